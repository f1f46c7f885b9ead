//! What a person is shown is what runs: control characters, ESC sequences and
//! bidirectional overrides in values and manifest strings are escaped visibly wherever
//! packs shows them (the approval prompt, MCP elicitation, dry runs, `list`, `help`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{PACKS, Packs, Test};

/// A value that redraws the line: a carriage return, an erase-line sequence, a
/// right-to-left override.
const HOSTILE: &str = "safe\r\u{1b}[2Kdanger \u{202e}txt.exe";
/// How packs shows it: one bash `$'…'` word.
const SHOWN: &str = r"$'safe\r\x1b[2Kdanger \u202etxt.exe'";

fn echo_tool(confirm: bool) -> Packs {
    Packs::new().manifest(
        "careful",
        json!({"name": "careful", "description": "Echo a word\u{1b}[31m red\u{202e}", "parameters": {"v": {"type": "string"}},
               "command": {"program": "echo", "args": ["--", "{{v}}"], "env": {"NOTE": "{{v}}"}},
               "policy": {"confirm_before_run": confirm}}),
    )
}

fn assert_no_raw(text: &str) {
    for bad in ['\u{1b}', '\u{202e}'] {
        assert!(!text.contains(bad), "raw {bad:?} reached the screen: {text:?}");
    }
}

#[test]
fn dry_runs_escape_what_they_show() {
    let packs = echo_tool(false);
    let out =
        Test::new().packs_dir(&packs).args(["run", "careful", "--dry-run", "--arg"]).arg(format!("v={HOSTILE}")).run();
    let stdout = String::from_utf8_lossy(&out.success().stdout).into_owned();
    assert_no_raw(&stdout);
    assert!(!stdout.contains('\r'), "{stdout:?}");
    assert!(stdout.starts_with(&format!("echo -- {SHOWN}\n")), "{stdout}");
    assert!(stdout.contains(&format!("  env: NOTE={SHOWN}\n")), "{stdout}");
    // JSON carries the exact value (and the command in POSIX quoting, which JSON escapes).
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "careful", "--dry-run", "--json", "--arg"])
        .arg(format!("v={HOSTILE}"))
        .run();
    let v: Value = serde_json::from_slice(&out.success().stdout).unwrap();
    assert_eq!(v["argv"], json!(["echo", "--", HOSTILE]));
    assert_eq!(v["command"], format!("echo -- '{HOSTILE}'"));
}

/// A working directory whose name is not UTF-8 is shown with its stray byte as `\xNN`, as bash
/// reads it back, never as U+FFFD (two directories would look the same); the JSON carries the
/// text with U+FFFD, and the tool runs in that directory.
#[test]
fn a_working_directory_that_is_not_utf8_shows_its_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let packs = Packs::new().manifest(
        "where",
        json!({"name": "where", "description": "Print the directory", "command": {"program": "pwd", "args": ["-P"]}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let odd = base.join(std::ffi::OsStr::from_bytes(b"ws\xff"));
    std::fs::create_dir(&odd).unwrap();
    let run = |extra: &[&str]| {
        Test::new().packs_dir(&packs).args(["run", "where", "--workspace"]).arg(&odd).args(extra.iter().copied()).run()
    };
    let out = run(&["--dry-run"]);
    out.success().stdout_contains(&format!("\n  cwd: $'{}/ws\\xff'\n", base.display()));
    let out = run(&["--dry-run", "--json"]);
    assert_eq!(out.success().json()["cwd"], format!("{}/ws\u{fffd}", base.display()));
    // Its output is text (U+FFFD for the stray byte), and no directory of that name exists.
    let out = run(&[]);
    out.success().stdout_contains(&format!("{}/ws\u{fffd}\n", base.display()));
    assert!(!base.join("ws\u{fffd}").exists());
}

#[test]
fn list_help_and_prompt_lines_escape_manifest_strings() {
    let packs = echo_tool(false);
    for args in [&["list"][..], &["help", "careful"], &["describe", "careful", "--prompt"]] {
        let out = Test::new().packs_dir(&packs).args(args.iter().copied()).run();
        let stdout = String::from_utf8_lossy(&out.success().stdout).into_owned();
        assert_no_raw(&stdout);
        assert!(stdout.contains(r"Echo a word\x1b[31m red\u202e"), "{args:?}: {stdout}");
    }
}

#[test]
fn the_approval_prompt_shows_escapes_and_the_environment() {
    crate::common::require("script"); // util-linux's (Debian: bsdutils)
    let packs = echo_tool(true);
    // `script` runs packs on a pseudo-terminal, so it asks; the value reaches it through
    // the environment (`script -c` takes a shell command line).
    let command = format!("{PACKS} --packs {} run careful --arg \"v=$HOSTILE_VALUE\"", packs.path().display());
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("PACKS_PATH")
        .env("HOSTILE_VALUE", HOSTILE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_no_raw(&text);
    assert!(text.contains(&format!("  echo -- {SHOWN}")), "{text:?}");
    assert!(text.contains(&format!("  env: NOTE={SHOWN}")), "{text:?}");
    assert_eq!(out.status.code(), Some(3), "{text}");
}

#[test]
fn mcp_elicitation_shows_escapes_and_the_environment() {
    let packs = echo_tool(true);
    let mut child = crate::serve::start_server(&packs);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "careful", "arguments": {"v": HOSTILE}}}),
    );
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    assert_eq!(next()["id"], 1);
    let ask = next();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let message = ask["params"]["message"].as_str().unwrap();
    assert_no_raw(message);
    assert!(!message.contains('\r'), "{message:?}");
    assert!(message.contains(&format!("echo -- {SHOWN}\nenv: NOTE={SHOWN}")), "{message}");
    send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}));
    let answer = next();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
