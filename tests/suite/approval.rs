//! `policy.confirm_before_run`: a call runs only when approved (`--yes`, a
//! person at a terminal, or a library `Approver`); packs fails closed.

use std::sync::Mutex;

use packs::{ApprovalRequest, ApproveAll, Approver, Catalog, Context, DenyAll, SearchPath};
use serde_json::json;

use crate::common::{Packs, Test};

/// A tool that leaves a file behind when it runs.
fn careful() -> Packs {
    Packs::new().manifest(
        "careful",
        json!({
            "name": "careful",
            "description": "Create a file, after asking",
            "parameters": {"file": {"type": "string", "required": true}},
            "command": {"program": "touch", "args": ["--", "{{file}}"]},
            "policy": {"read_only": false, "confirm_before_run": true},
        }),
    )
}

const DENIED: &str = "packs: no terminal to ask for approval on: denied (pass --yes to approve)\n\
                      error: permission denied for `careful` (tier elevated): it asks to be confirmed before each run \
                      (policy.confirm_before_run) and was not approved\n";

#[test]
fn without_a_terminal_the_call_is_denied() {
    let packs = careful();
    let test = Test::new();
    let target = test.path().join("made");
    // A "y" on a stdin that is not a terminal is not an answer.
    let out = test
        .packs_dir(&packs)
        .args(["run", "careful"])
        .arg(format!("--arg=file={}", target.display()))
        .stdin("y\n")
        .run();
    out.code(3).stdout_eq("").stderr_eq(DENIED);
    assert!(!target.exists(), "a denied call ran");
}

#[test]
fn denial_as_json() {
    let packs = careful();
    let test = Test::new();
    let target = test.path().join("made");
    let out =
        test.packs_dir(&packs).args(["run", "careful", "--json"]).arg(format!("--arg=file={}", target.display())).run();
    out.code(3);
    assert_eq!(
        out.json(),
        json!({"error": {
            "kind": "permission_denied",
            "message": "permission denied for `careful` (tier elevated): it asks to be confirmed before each run (policy.confirm_before_run) and was not approved",
            "retryable": false,
            "tier": "elevated",
            "reason": "it asks to be confirmed before each run (policy.confirm_before_run) and was not approved",
        }})
    );
    assert!(!target.exists());
}

#[test]
fn yes_approves() {
    let packs = careful();
    for flag in ["--yes", "-y"] {
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("made");
        Test::new()
            .packs_dir(&packs)
            .args(["run", "careful", flag])
            .arg(format!("--arg=file={}", target.display()))
            .run()
            .success()
            .stderr_eq("");
        assert!(target.exists(), "{flag} did not run the tool");
    }
}

#[test]
fn dry_run_shows_that_approval_is_needed_and_runs_nothing() {
    let packs = careful();
    let test = Test::new();
    let target = test.path().join("made");
    let out = test
        .packs_dir(&packs)
        .args(["run", "careful", "--dry-run"])
        .arg(format!("--arg=file={}", target.display()))
        .run();
    out.success().stderr_eq("").stdout_eq(&format!(
        "touch -- {}\n  timeout: 30s\n  tier: elevated\n  sandbox: no network, no abstract Unix socket; signals only its own processes\n  needs approval: it asks to be confirmed before each run (policy.confirm_before_run)\n",
        target.display()
    ));
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "careful", "--dry-run", "--json"])
        .arg(format!("--arg=file={}", target.display()))
        .run();
    out.success();
    assert_eq!(out.json()["needs_approval"], "it asks to be confirmed before each run (policy.confirm_before_run)");
    assert!(!target.exists());
}

/// Records what it was asked and answers `answer`.
struct Recorder {
    answer: bool,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Recorder {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        self.asked.lock().unwrap().push(request.clone());
        self.answer
    }
}

#[test]
fn library_approvers_decide_and_see_the_masked_command() {
    // PATH is set in every environment, so it stands in for a credential here.
    let packs = Packs::new().manifest(
        "deploy",
        json!({
            "name": "deploy",
            "description": "d",
            "parameters": {"target": {"type": "string", "required": true}},
            "command": {"program": "echo", "args": ["deploy", "{{target}}", "--token={{secret.PATH}}"]},
            "policy": {"confirm_before_run": true},
        }),
    );
    let catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    let args = json!({"target": "prod"});

    let e = packs::dispatch(&catalog, "deploy", args.clone(), &Context::new(), &DenyAll).unwrap_err();
    assert_eq!(e.kind(), "permission_denied");
    assert!(!e.retryable());

    let no = Recorder { answer: false, asked: Mutex::new(Vec::new()) };
    assert!(packs::dispatch(&catalog, "deploy", args.clone(), &Context::new(), &no).is_err());
    let asked = no.asked.into_inner().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, "deploy");
    assert_eq!(asked[0].argv, ["echo", "deploy", "prod", "--token=***"]);

    let r = packs::dispatch(&catalog, "deploy", args.clone(), &Context::new(), &ApproveAll).unwrap();
    assert!(r.ok);
    assert_eq!(r.output, "deploy prod --token=***\n", "the secret is masked in the result too");

    // A tool that does not ask is never put to the approver.
    let quiet = Packs::new().manifest("quiet", json!({"name": "quiet", "description": "d", "command": "echo fine"}));
    let catalog = Catalog::load(&SearchPath::dirs([quiet.path()]));
    let r = packs::dispatch(&catalog, "quiet", json!({}), &Context::new(), &DenyAll).unwrap();
    assert_eq!(r.output, "fine\n");
}
