//! `packs lock` and `--locked`: every kind of drift refused (and nothing else), formatting-only
//! edits allowed, `--update`'s semantic diff, `--check` diagnostics, and minisign signatures
//! made and checked by the real `minisign` program as well as by packs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Output, Packs, Test, require};

fn greet() -> Value {
    json!({"name": "greet", "description": "Say hello to someone",
           "parameters": {"who": {"type": "string", "required": true}},
           "command": {"program": "echo", "args": ["hello", "{{who}}"]}})
}

fn count() -> Value {
    json!({"name": "count", "description": "Count to three", "command": {"program": "seq", "args": ["3"]}})
}

/// An executable whose `--describe` answer is the file `describe.json` beside it, so the
/// answer can change while the executable's bytes do not.
const EXE: &str =
    "#!/bin/sh\nif [ \"$1\" = --describe ]; then cat \"$(dirname \"$0\")/describe.json\"; else echo ran; fi\n";

fn exe_describe(description: &str) -> String {
    json!({"name": "probe", "description": description, "parameters": {"type": "object", "properties": {}}}).to_string()
}

/// A project: `packs/` with two manifests and an executable, and the lock file beside it.
struct Project {
    root: Packs,
}

impl Project {
    fn new() -> Self {
        let root = Packs::new()
            .manifest("packs/greet", greet())
            .manifest("packs/count", count())
            .file("packs/describe.json", &exe_describe("Probe the machine"))
            .executable("packs/probe", EXE);
        Self { root }
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn file(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.file(rel), text).unwrap();
    }

    fn packs(&self, args: &[&str]) -> Output {
        Test::new().current_dir(self.path()).env_remove("PACKS_LOCKED").args(args).run()
    }

    fn lock(&self) {
        self.packs(&["lock"]).success();
    }

    /// `packs --locked run NAME`: its stderr when refused, None when it ran.
    fn refused(&self, name: &str) -> Option<String> {
        let args: Vec<&str> = match name {
            "greet" => vec!["--locked", "run", "greet", "--arg", "who=ana"],
            other => vec!["--locked", "run", other],
        };
        let out = self.packs(&args);
        match out.status.code() {
            Some(0) => None,
            Some(1) => Some(out.stderr.clone()),
            other => panic!("unexpected exit {other:?}: {}", out.stderr),
        }
    }
}

#[test]
fn a_fresh_lock_lets_every_tool_run_and_is_stable() {
    let p = Project::new();
    p.lock();
    let text = std::fs::read_to_string(p.file("packs.lock")).unwrap();
    assert!(text.starts_with("# packs.lock"), "{text}");
    // Name order, and the same bytes when nothing changed.
    let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("name = ")).collect();
    assert_eq!(names, ["\"count\"", "\"greet\"", "\"probe\""]);
    p.lock();
    assert_eq!(std::fs::read_to_string(p.file("packs.lock")).unwrap(), text);
    for name in ["greet", "count", "probe"] {
        assert_eq!(p.refused(name), None, "{name}");
    }
    p.packs(&["lock", "--check"]).success().stdout_contains("0 errors, 0 warnings");
}

#[test]
fn every_kind_of_drift_is_refused_naming_what_changed_and_the_rest_still_runs() {
    let edit = |p: &Project, f: &dyn Fn(&mut Value)| {
        let path = p.file("packs/greet.tool.json");
        let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        f(&mut m);
        std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    };
    type Change = (&'static str, &'static str, Box<dyn Fn(&Project)>);
    let changes: Vec<Change> = vec![
        (
            "greet",
            "description",
            Box::new(move |p| edit(p, &|m| m["description"] = json!("Say hello, and also rm -rf ~"))),
        ),
        ("greet", "parameters", Box::new(move |p| edit(p, &|m| m["parameters"]["loud"] = json!({"type": "boolean"})))),
        ("greet", "command", Box::new(move |p| edit(p, &|m| m["command"]["args"] = json!(["goodbye", "{{who}}"])))),
        ("greet", "policy", Box::new(move |p| edit(p, &|m| m["policy"] = json!({"read_only": false})))),
        ("probe", "executable", Box::new(|p| p.write("packs/probe", &format!("{EXE}# changed\n")))),
        (
            "probe",
            "description",
            Box::new(|p| p.write("packs/describe.json", &exe_describe("Probe, and upload ~/.ssh"))),
        ),
    ];
    for (tool, part, change) in changes {
        let p = Project::new();
        p.lock();
        change(&p);
        let why = p.refused(tool).unwrap_or_else(|| panic!("a changed {part} of {tool} must be refused"));
        assert!(why.contains("refused by the lock file") && why.contains(part), "{part}: {why}");
        let other = if tool == "greet" { "count" } else { "greet" };
        assert_eq!(p.refused(other), None, "{other} still matches its pin");
        // Withdrawn from what a model is offered, too.
        let catalog = p.packs(&["--locked", "-q", "catalog"]).success().json();
        let names: Vec<&str> = catalog.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(!names.contains(&tool) && names.contains(&other), "{names:?}");
        let check = p.packs(&["lock", "--check", "--format", "json"]);
        check.code(1);
        let report = check.json();
        let codes: Vec<&str> =
            report["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
        assert_eq!(codes, ["lock-drift"], "{report:#}");
    }
}

#[test]
fn a_new_tool_is_refused_until_pinned_and_a_removed_one_that_returns_changed_is_caught() {
    let p = Project::new();
    p.lock();
    std::fs::write(
        p.file("packs/extra.tool.json"),
        json!({"name": "extra", "description": "New", "command": "true"}).to_string(),
    )
    .unwrap();
    let why = p.refused("extra").unwrap();
    assert!(why.contains("not in the lock file"), "{why}");
    p.packs(&["lock", "--check"]).code(1).stdout_contains("error[lock-unpinned]");
    // Removed: a stale pin is a warning; back with another description: still caught.
    std::fs::remove_file(p.file("packs/greet.tool.json")).unwrap();
    p.packs(&["lock", "--check"]).code(1).stdout_contains("warning[lock-stale]");
    let mut changed = greet();
    changed["description"] = json!("Say hello (and more)");
    std::fs::write(p.file("packs/sub/greet.tool.json").tap_mkdir(), changed.to_string()).unwrap();
    assert!(p.refused("greet").unwrap().contains("description"));
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(self.parent().unwrap()).unwrap();
        self
    }
}

#[test]
fn formatting_only_edits_are_allowed_and_reported_as_such() {
    let p = Project::new();
    p.lock();
    // Compact JSON with the keys in another order: the same manifest.
    let m: Value = serde_json::from_str(&std::fs::read_to_string(p.file("packs/greet.tool.json")).unwrap()).unwrap();
    let mut keys: Vec<(&String, &Value)> = m.as_object().unwrap().iter().collect();
    keys.reverse();
    let reordered: serde_json::Map<String, Value> = keys.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    p.write("packs/greet.tool.json", &Value::Object(reordered).to_string());
    assert_eq!(p.refused("greet"), None);
    // Even as TOML instead of JSON.
    std::fs::remove_file(p.file("packs/count.tool.json")).unwrap();
    p.write(
        "packs/count.tool.toml",
        "name = \"count\"\ndescription = \"Count to three\"\n[command]\nprogram = \"seq\"\nargs = [\"3\"]\n",
    );
    assert_eq!(p.refused("count"), None);
    let check = p.packs(&["lock", "--check"]);
    check.success().stdout_contains("warning[lock-reformatted]").stdout_contains("0 errors, 2 warnings");
}

#[test]
fn update_re_pins_one_tool_and_prints_what_a_reviewer_must_read() {
    let p = Project::new();
    p.lock();
    let mut m = greet();
    m["description"] = json!("Greet someone");
    m["parameters"]["loud"] = json!({"type": "boolean"});
    m["command"]["program"] = json!("printf");
    m["policy"] = json!({"read_only": false, "requires_network": true, "timeout_secs": 300});
    p.write("packs/greet.tool.json", &m.to_string());
    p.write(
        "packs/count.tool.json",
        &json!({"name": "count", "description": "Count to four", "command": "seq 4"}).to_string(),
    );
    let out = p.packs(&["lock", "--update", "greet"]);
    out.success().stdout_eq(
        "greet:\n\
         \x20 command.program: \"echo\" → \"printf\"\n\
         \x20 description: \"Say hello to someone\" → \"Greet someone\"\n\
         \x20 new parameter `loud`: {\"required\":false,\"type\":\"boolean\"}\n\
         \x20 policy.read_only: true → false (looser)\n\
         \x20 policy.requires_network: false → true (looser)\n\
         \x20 policy.timeout_secs: 30 → 300 (looser)\n",
    );
    assert_eq!(p.refused("greet"), None);
    // Only greet was re-pinned: count's change still needs review.
    assert!(p.refused("count").unwrap().contains("description"));
}

#[test]
fn without_a_lock_file_locked_refuses_everything() {
    let p = Project::new();
    p.packs(&["--locked", "run", "count"]).code(1).stderr_contains("--locked").stderr_contains("packs.lock");
    // An agent can ask for it.
    let agents = Packs::new().file("a/agent.toml", "locked = true\n").file("a/soul.md", "S");
    Test::new()
        .current_dir(p.path())
        .env("PACKS_AGENTS", agents.path())
        .args(["--agent", "a", "run", "count"])
        .run()
        .code(1)
        .stderr_contains("packs.lock");
    // And a lock file that is not one is an error naming its line.
    p.write("packs.lock", "version = 1\n[[tool]]\nname = 3\n");
    p.packs(&["--locked", "run", "count"]).code(1).stderr_contains("packs.lock: line 3");
}

/// A minisign key pair made by the `minisign` program, protected by `password`.
fn keypair(dir: &Path, stem: &str, password: &str) -> (PathBuf, PathBuf) {
    require("minisign");
    let (public, secret) = (dir.join(format!("{stem}.pub")), dir.join(format!("{stem}.key")));
    let mut child = Command::new("minisign")
        .arg("-G")
        .arg("-p")
        .arg(&public)
        .arg("-s")
        .arg(&secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(format!("{password}\n{password}\n").as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    (public, secret)
}

fn minisign_verifies(lockfile: &Path, public: &Path) -> bool {
    Command::new("minisign").arg("-V").arg("-p").arg(public).arg("-m").arg(lockfile).output().unwrap().status.success()
}

#[test]
#[ignore = "needs minisign (the reference implementation signatures are checked against)"]
fn signatures_good_bad_missing_and_of_another_key() {
    let p = Project::new();
    let keys = tempfile::tempdir().unwrap();
    let (public, secret) = keypair(keys.path(), "team", "correct horse");
    let (other_public, _) = keypair(keys.path(), "other", "battery staple");
    let lockfile = p.file("packs.lock");
    // A wrong password changes nothing.
    Test::new()
        .current_dir(p.path())
        .env("PACKS_SIGN_PASSWORD", "wrong")
        .args(["lock", "--sign"])
        .arg(&secret)
        .run()
        .code(1)
        .stderr_contains("Wrong password");
    assert!(!lockfile.exists());
    Test::new()
        .current_dir(p.path())
        .env("PACKS_SIGN_PASSWORD", "correct horse")
        .args(["lock", "--sign"])
        .arg(&secret)
        .run()
        .success();
    // The reference implementation accepts packs' signature.
    assert!(minisign_verifies(&lockfile, &public));
    let verify = |key: &Path| p.packs(&["--locked", "--verify", key.to_str().unwrap(), "run", "count"]);
    verify(&public).success().stdout_eq("1\n2\n3\n");
    verify(&other_public).code(1).stderr_contains("does not verify");
    // A lock file changed after signing.
    let text = std::fs::read_to_string(&lockfile).unwrap();
    std::fs::write(&lockfile, text.replace("Count to three", "Count to three ")).unwrap();
    verify(&public).code(1).stderr_contains("does not verify");
    // Signed by the minisign program: packs accepts it.
    std::fs::write(&lockfile, &text).unwrap();
    let mut child = Command::new("minisign")
        .arg("-S")
        .arg("-s")
        .arg(&secret)
        .arg("-m")
        .arg(&lockfile)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"correct horse\n").unwrap();
    assert!(child.wait().unwrap().success());
    verify(&public).success();
    // No signature at all: a refusal, never a warning.
    std::fs::remove_file(p.file("packs.lock.minisig")).unwrap();
    verify(&public).code(1).stderr_contains("is not signed");
    p.packs(&["lock", "--check", "--verify", public.to_str().unwrap()]).code(1).stderr_contains("is not signed");
}

#[test]
fn locked_tests_of_a_refused_tool_fail() {
    let p = Project::new();
    let mut m = greet();
    m["tests"] = json!([{"name": "says hello", "args": {"who": "ana"}, "expect": {"stdout_contains": "hello ana"}}]);
    std::fs::write(p.file("packs/greet.tool.json"), m.to_string()).unwrap();
    p.lock();
    p.packs(&["--locked", "test"]).success().stdout_contains("1 passed, 0 failed");
    m["description"] = json!("Say hello, differently");
    std::fs::write(p.file("packs/greet.tool.json"), m.to_string()).unwrap();
    p.packs(&["--locked", "-q", "test"])
        .code(1)
        .stdout_contains("FAIL greet / (its tests)")
        .stdout_contains("not run: refused by the lock file")
        .stdout_contains("0 passed, 1 failed");
}

/// A minisign key pair made by the `minisign` crate (no password): the public key file
/// and the secret key.
fn crate_keypair(dir: &Path) -> (PathBuf, minisign::SecretKey) {
    let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let public = dir.join("crate.pub");
    std::fs::write(&public, pair.pk.to_box().unwrap().to_string()).unwrap();
    (public, pair.sk)
}

/// `p` locked, and its lock file signed by a key made for it: the key's directory (alive
/// as long as it is needed), the public key file, and the signed text.
fn signed_lock(p: &Project) -> (tempfile::TempDir, PathBuf, String) {
    let keys = tempfile::tempdir().unwrap();
    let (public, secret) = crate_keypair(keys.path());
    p.lock();
    let signed = std::fs::read_to_string(p.file("packs.lock")).unwrap();
    let signature = minisign::sign(None, &secret, signed.as_bytes(), None, None).unwrap();
    std::fs::write(p.file("packs.lock.minisig"), signature.to_string()).unwrap();
    (keys, public, signed)
}

#[test]
fn a_lock_file_swapped_during_verification_is_never_trusted_on_anothers_signature() {
    // Two lock files take turns at packs.lock: the signed one pins `count` as it was; the
    // attacker's, unsigned, pins `count` as the attacker rewrote it. A check of the signed
    // bytes followed by a parse of the swapped-in ones would run the rewrite.
    let p = Project::new();
    let (_keys, public, signed) = signed_lock(&p);
    p.packs(&["--locked", "--verify", public.to_str().unwrap(), "run", "count"]).success().stdout_eq("1\n2\n3\n");
    p.write(
        "packs/count.tool.json",
        &json!({"name": "count", "description": "Count to three", "command": {"program": "echo", "args": ["pwned"]}})
            .to_string(),
    );
    p.lock();
    let forged = std::fs::read_to_string(p.file("packs.lock")).unwrap();
    assert_ne!(signed, forged);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, lockfile, staged) = (stop.clone(), p.file("packs.lock"), p.file("packs.lock.next"));
        std::thread::spawn(move || {
            for text in [&signed, &forged].into_iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                std::fs::write(&staged, text).unwrap();
                std::fs::rename(&staged, &lockfile).unwrap();
            }
        })
    };
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let out = p.packs(&["--locked", "--verify", public.to_str().unwrap(), "run", "count"]);
        assert_ne!(out.stdout(), "pwned\n", "the attacker's pin was trusted: {}", out.stderr);
        out.code(1);
        let why = if out.stderr.contains("does not verify") { "forged lock refused" } else { "rewrite refused" };
        *outcomes.entry(why).or_insert(0) += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    // Both files were read at some point (the race was real), and neither ever ran the rewrite.
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
}

/// `EXE` with `echo ran` turned into `echo pwned`: the same describe, other bytes.
fn evil_exe() -> String {
    EXE.replace("echo ran", "echo pwned")
}

/// Replace `path` by `text` (executable) the way an attacker would: a new file renamed
/// over it, or the same file rewritten in place.
fn swap(path: &Path, text: &str, in_place: bool) {
    use std::os::unix::fs::PermissionsExt;
    if in_place {
        std::fs::write(path, text).unwrap();
        return;
    }
    // Hidden: discovery skips it, as it would skip an editor's temporary file.
    let staged = path.with_file_name(format!(".{}.staged", path.file_name().unwrap().to_string_lossy()));
    std::fs::write(&staged, text).unwrap();
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

#[test]
fn an_executable_swapped_after_the_locked_check_never_runs_in_serve() {
    use std::io::{BufRead, Write};
    // serve --locked without --watch checks once at start: the executable's bytes are
    // sealed then, and every later call runs them, whatever the file becomes.
    let p = Project::new();
    p.lock();
    let mut child = Command::new(crate::common::PACKS)
        .current_dir(p.path())
        .args(["--locked", "serve"])
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .env_remove("PACKS_LOCKED")
        .env("XDG_CONFIG_HOME", p.file("no-config"))
        .env("PACKS_CACHE_DIR", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let _ = lines.next();
    let mut ask = |id: u64| -> String {
        let call =
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "probe", "arguments": {}}});
        writeln!(stdin, "{call}").unwrap();
        let reply: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        reply["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{reply}")).to_owned()
    };
    assert_eq!(ask(1), "ran\n");
    swap(&p.file("packs/probe"), &evil_exe(), false);
    assert_eq!(ask(2), "ran\n", "a file renamed over the executable ran");
    swap(&p.file("packs/probe"), &evil_exe().replace("pwned", "pwned in place"), true);
    assert_eq!(ask(3), "ran\n", "the executable rewritten in place ran");
    std::fs::remove_file(p.file("packs/probe")).unwrap();
    assert_eq!(ask(4), "ran\n", "the pinned bytes run even with the file gone");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_executable_swapped_while_packs_run_checks_it_never_runs() {
    // One file takes turns being the pinned executable and another with the same
    // describe: `packs --locked run` either refuses it or runs the pinned bytes.
    let p = Project::new();
    p.lock();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, path) = (stop.clone(), p.file("packs/probe"));
        std::thread::spawn(move || {
            let evil = evil_exe();
            for text in [EXE, evil.as_str()].into_iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                swap(&path, text, false);
            }
        })
    };
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..150 {
        let out = p.packs(&["--locked", "run", "probe"]);
        assert!(!out.stdout().contains("pwned"), "the swapped-in executable ran: {}", out.report());
        let outcome = match out.status.code() {
            Some(0) => "ran",
            Some(1) if out.stderr.contains("refused by the lock file") => "refused",
            // Caught mid-swap: the file could not describe itself (a file being written
            // cannot be executed: ETXTBSY), so there was no tool to run.
            Some(1) if out.stderr.contains("no tool named `probe`") => "skipped",
            _ => panic!("{}", out.report()),
        };
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(outcomes.contains_key("ran"), "{outcomes:?}");
}

#[test]
fn update_with_verify_keeps_no_pin_of_a_lock_file_whose_signature_fails() {
    // `--update NAME` keeps every other pin: under --verify they must be the signed ones.
    let p = Project::new();
    let (_keys, public, signed) = signed_lock(&p);
    let verify = ["--verify", public.to_str().unwrap()];
    p.packs(&[&verify[..], &["lock", "--update", "count"]].concat()).success();
    // Someone edits a pin the update would carry over.
    let forged = signed.replacen("sha256:", "sha256:0", 1);
    p.write("packs.lock", &forged);
    let out = p.packs(&[&verify[..], &["lock", "--update", "count"]].concat());
    out.code(1).stderr_contains("does not verify");
    assert_eq!(std::fs::read_to_string(p.file("packs.lock")).unwrap(), forged, "the lock file was rewritten");
}
