//! Deferred approval through `packs call --defer-approval`: a call that needs approval is
//! answered with a pending result holding a ticket; the same response sent again with
//! `--approve TICKET` (or `--deny TICKET`) runs (or refuses) exactly that call, once.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{Packs, Test};

/// A tool that needs approval and leaves a file behind when it runs, and one that does not.
fn tools() -> Packs {
    Packs::new()
        .manifest(
            "careful",
            json!({
                "name": "careful",
                "description": "Create a file. Only after asking.",
                "parameters": {"file": {"type": "string", "required": true}},
                "command": {"program": "touch", "args": ["--", "{{file}}"]},
                "policy": {"read_only": false, "confirm_before_run": true},
            }),
        )
        .manifest("hello", json!({"name": "hello", "description": "Say hello", "command": "echo hello"}))
        .file("a/agent.toml", "")
        .file("b/agent.toml", "")
}

/// An OpenAI chat response calling `careful` for each file, then `hello`.
fn response(files: &[&Path]) -> String {
    let mut calls: Vec<Value> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": "careful", "arguments": json!({"file": f}).to_string()}})
        })
        .collect();
    calls.push(json!({"id": "call_h", "type": "function", "function": {"name": "hello", "arguments": "{}"}}));
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}]}).to_string()
}

struct Setup {
    packs: Packs,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        Setup { packs: tools(), dir: tempfile::tempdir().unwrap() }
    }
    fn key(&self) -> PathBuf {
        self.dir.path().join("state/approval.key")
    }
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn log(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }
    /// `packs call` on `input` with the key, the log and `args`.
    fn call(&self, input: &str, args: &[&str]) -> crate::common::Output {
        Test::new()
            .packs_dir(self.packs.path())
            .env("PACKS_AGENTS", self.packs.path())
            .arg("--log")
            .arg(self.log())
            .args(["call", "--approval-key"])
            .arg(self.key())
            .args(args)
            .stdin(input)
            .run()
    }
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Each tool message's content, as JSON.
fn contents(out: &crate::common::Output) -> Vec<Value> {
    let each = |m: &Value| {
        let text = m["content"].as_str().unwrap();
        serde_json::from_str(text).unwrap_or_else(|_| Value::from(text))
    };
    out.json().as_array().unwrap().iter().map(each).collect()
}

fn ticket(content: &Value) -> String {
    content["pending"]["ticket"].as_str().unwrap_or_else(|| panic!("not pending: {content}")).to_owned()
}

#[test]
fn a_pending_call_runs_once_when_approved() {
    let s = Setup::new();
    let made = s.file("made");
    let input = response(&[&made]);
    let out = s.call(&input, &["--defer-approval"]);
    out.success().stderr_eq("");
    let c = contents(&out);
    assert!(!made.exists(), "a pending call ran");
    let pending = &c[0]["pending"];
    assert_eq!(pending["tool"], "careful");
    assert_eq!(pending["speak"], "May I run careful? It will: Create a file.");
    assert_eq!(
        pending["prompt"],
        format!(
            "`careful` (tier elevated) needs approval: it asks to be confirmed before each run (policy.confirm_before_run)\n  touch -- {}\n",
            made.display()
        )
    );
    assert!(c[0]["message"].as_str().unwrap().contains("has not run: it waits for a person's approval"));
    assert_eq!(out.json()[0]["tool_call_id"], "call_0");
    // The call that needs no approval runs at once.
    assert_eq!(out.json()[1]["content"], "hello\n");
    let meta = std::fs::metadata(s.key()).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);

    let t = ticket(&c[0]);
    let out = s.call(&input, &["--defer-approval", "--approve", &t]);
    out.success().stderr_eq("");
    assert!(made.exists(), "the approved call did not run");
    assert_eq!(out.json()[0]["content"], "");
    assert_eq!(out.json()[1]["content"], "hello\n");

    // Replayed: refused, not run again, whether deferring or not.
    std::fs::remove_file(&made).unwrap();
    let out = s.call(&input, &["--approve", &t]);
    out.code(3).stderr_eq("");
    assert!(!made.exists(), "a replayed ticket ran the call again");
    let c = contents(&out);
    assert_eq!(c[0]["error"]["kind"], "permission_denied");
    assert_eq!(
        c[0]["error"]["reason"],
        "its approval ticket was refused: the ticket was already used (each ticket answers one call once)"
    );

    let decisions: Vec<(String, String, String)> = s
        .audit()
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap().into(),
                e["decision"].as_str().unwrap().into(),
                e["outcome"].as_str().unwrap().into(),
            )
        })
        .collect();
    let d = |t: &str, d: &str, o: &str| (t.to_owned(), d.to_owned(), o.to_owned());
    assert_eq!(
        decisions,
        [
            d("careful", "deferred", "pending"),
            d("hello", "allowed", "ok"),
            d("careful", "approved", "ok"),
            d("hello", "allowed", "ok"),
            d("careful", "denied", "denied"),
            d("hello", "allowed", "ok"),
        ]
    );
    assert_eq!(s.audit()[0]["argv"], json!(["touch", "--", made]));
}

#[test]
fn deny_refuses_exactly_its_call_and_the_others_wait_again() {
    let s = Setup::new();
    let (one, two) = (s.file("one"), s.file("two"));
    let input = response(&[&one, &two]);
    let out = s.call(&input, &["--defer-approval"]);
    out.success();
    let c = contents(&out);
    let (t1, t2) = (ticket(&c[0]), ticket(&c[1]));
    assert_ne!(t1, t2);
    // The second is denied; the first, given no answer, waits again with a new ticket.
    let out = s.call(&input, &["--defer-approval", "--deny", &t2]);
    out.success().stderr_eq("");
    let c = contents(&out);
    assert_ne!(ticket(&c[0]), t1);
    assert_eq!(c[1]["error"]["kind"], "permission_denied");
    assert!(c[1]["error"]["reason"].as_str().unwrap().ends_with("and was not approved"), "{}", c[1]);
    assert!(!one.exists() && !two.exists());
    // The first ticket still answers its call.
    s.call(&input, &["--approve", &t1]).success();
    assert!(one.exists() && !two.exists());
}

#[test]
fn a_changed_argument_another_agent_a_forged_or_expired_ticket_is_refused() {
    let s = Setup::new();
    let made = s.file("made");
    let input = response(&[&made]);
    let issue = |args: &[&str]| ticket(&contents(&s.call(&input, args))[0]);

    // A changed argument: the ticket answers no call; the changed call is denied as usual.
    let t = issue(&["--defer-approval"]);
    let other = s.file("other");
    let out = s.call(&response(&[&other]), &["--approve", &t]);
    out.code(3).stderr_eq(
        "packs: no terminal to ask for approval on: denied (pass --yes to approve)\n\
         packs: approval ticket refused: no call of `careful` in the response is the one it was issued for: the call's \
         arguments differ from those the ticket was issued for\n",
    );
    assert!(!other.exists() && !made.exists());
    assert_eq!(contents(&out)[0]["error"]["kind"], "permission_denied");

    // Another agent.
    let t = issue(&["--defer-approval", "--agent", "a"]);
    let out = s.call(&input, &["--agent", "b", "--defer-approval", "--approve", &t]);
    out.code(3).stderr_eq(
        "packs: approval ticket refused: no call of `careful` in the response is the one it was issued for: the \
         ticket was issued for agent `a`; the call is made for agent `b`\n",
    );
    assert!(contents(&out)[0]["pending"]["ticket"].is_string(), "the call waits again");
    assert!(!made.exists());

    // Another tool: a ticket for `careful` given to a response without it.
    let only_hello = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "h", "type": "function", "function": {"name": "hello", "arguments": "{}"}}]}}]})
    .to_string();
    s.call(&only_hello, &["--approve", &t]).code(3).stderr_eq(
        "packs: approval ticket refused: no call of `careful` in the response is the one it was issued for\n",
    );

    // Tampered.
    let (body, tag) = t.split_once('.').unwrap();
    let forged = format!("{}x.{tag}", &body[..body.len() - 1]);
    s.call(&input, &["--agent", "a", "--defer-approval", "--approve", &forged]).code(3).stderr_eq(
        "packs: approval ticket refused: the ticket is not one this approval key issued (altered, or issued with \
         another key)\n",
    );
    assert!(!made.exists());

    // Expired (a ticket valid for no time at all).
    let t = issue(&["--defer-approval", "--approval-ttl", "0"]);
    let out = s.call(&input, &["--approve", &t]);
    out.code(3);
    assert!(!made.exists());
    let reason = contents(&out)[0]["error"]["reason"].as_str().unwrap().to_owned();
    assert!(reason.starts_with("its approval ticket was refused: the ticket expired at 20"), "{reason}");

    // Each refusal is in the audit log.
    let refused: Vec<String> = s
        .audit()
        .iter()
        .filter(|e| e["outcome"] == "ticket_refused" || e["error"].as_str().is_some_and(|m| m.contains("ticket")))
        .map(|e| e["error"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(refused.len(), 5, "{refused:#?}");
    assert!(refused[0].starts_with("approval ticket refused: no call of `careful`"), "{refused:#?}");
    assert!(refused[4].contains("the ticket expired at"), "{refused:#?}");
}

#[test]
fn the_key_file_is_refused_when_others_may_read_it_and_defaults_to_the_state_directory() {
    let s = Setup::new();
    let made = s.file("made");
    let input = response(&[&made]);
    s.call(&input, &["--defer-approval"]).success();
    std::fs::set_permissions(s.key(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    s.call(&input, &["--defer-approval"]).code(1).stdout_eq("").stderr_eq(&format!(
        "error: approval key {}: its mode 0644 lets its group or others at it (chmod 600 it)\n",
        s.key().display()
    ));

    let state = tempfile::tempdir().unwrap();
    let out = Test::new()
        .packs_dir(s.packs.path())
        .env("PACKS_STATE_DIR", state.path())
        .args(["call", "--defer-approval"])
        .stdin(input)
        .run();
    out.success();
    assert!(state.path().join("approval.key").is_file());
    assert!(state.path().join("approval.key.used").is_dir());
}

#[test]
fn a_confined_tool_neither_reads_the_key_nor_writes_the_used_tickets() {
    let s = Setup::new();
    let ws = s.dir.path();
    // Beside packs' own files, the workspace's other entries stay writable.
    std::fs::create_dir(ws.join("sub")).unwrap();
    let packs = tools().manifest("prowl", crate::common::key_prowler());
    let input = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "p", "type": "function", "function": {"name": "prowl", "arguments": json!({"dir": ws}).to_string()}}]}}]})
    .to_string();
    let out = Test::new()
        .packs_dir(packs.path())
        .arg("--workspace")
        .arg(ws)
        .args(["call", "--defer-approval", "--approval-key"])
        .arg(s.key())
        .stdin(input)
        .run();
    out.success();
    assert_eq!(out.json()[0]["content"], "noread\nnowrite\nnochange\nworkspace\n");
}

#[test]
fn the_library_defers_and_resumes_one_call() {
    use packs::{Answers, Call, Catalog, Context, Deferred, Denial, SearchPath, TicketError, Tickets, ToolError};
    let s = Setup::new();
    let catalog = Catalog::load(&SearchPath::dirs([s.packs.path()]));
    let context = Context::new();
    let tickets = Tickets::open(&s.key()).unwrap();
    let made = s.file("made");
    let args = json!({"file": made});
    let Ok(Deferred::Pending(p)) =
        Call::new("careful", args.clone()).context(&context).run_deferred(&catalog, &tickets)
    else {
        panic!("not pending")
    };
    assert!(!made.exists());
    assert_eq!(p.tool, "careful");
    // Another call with this ticket: refused, with the reason.
    let other = json!({"file": s.file("other")});
    let answers = Answers::only(&tickets, &p.ticket, true);
    let refused = Call::new("careful", other).context(&context).answers(&answers).run(&catalog);
    assert!(
        matches!(
            &refused,
            Err(ToolError::PermissionDenied { reason: Denial::Ticket(TicketError::ChangedArguments), .. })
        ),
        "{refused:?}"
    );
    // Its own call, approved: runs once.
    let answers = Answers::only(&tickets, &p.ticket, true);
    let result = Call::new("careful", args.clone()).context(&context).answers(&answers).run(&catalog).unwrap();
    assert!(result.ok && made.exists());
    let again = Call::new("careful", args).context(&context).answers(&answers).run(&catalog);
    assert!(matches!(&again, Err(ToolError::PermissionDenied { reason: Denial::NotApproved(_), .. })), "{again:?}");
}
