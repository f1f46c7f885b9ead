//! One call pipeline behind every front-end: the same call is recorded, refused and
//! answered alike whether it comes through `packs run`, `packs call`, `packs serve`
//! or the library.

use serde_json::{Value, json};

use crate::common::{Packs, Test};

fn tools() -> Packs {
    Packs::new().manifest("hello", json!({"name": "hello", "description": "d", "command": "echo hello"})).manifest(
        "careful",
        json!({"name": "careful", "description": "d", "command": "echo ran", "policy": {"confirm_before_run": true}}),
    )
}

fn log_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn call_request(id: i64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}})
}

/// The unknown-tool line every front-end writes.
fn assert_unknown(line: &Value, name: &str) {
    assert_eq!(line["tool"], name, "{line}");
    assert_eq!(line["tier"], "unknown", "{line}");
    assert_eq!(line["decision"], "none", "{line}");
    assert_eq!(line["outcome"], "not_found", "{line}");
    assert_eq!(line["argv"], json!([]), "{line}");
}

#[test]
fn unknown_tools_are_audited_by_every_front_end() {
    let packs = tools();
    let dir = tempfile::tempdir().unwrap();

    let run_log = dir.path().join("run.jsonl");
    Test::new().packs_dir(&packs).arg("--log").arg(&run_log).args(["run", "no_such_tool"]).run().code(1);
    let run = log_lines(&run_log);
    assert_eq!(run.len(), 1);
    assert_unknown(&run[0], "no_such_tool");

    let call_log = dir.path().join("call.jsonl");
    let input = r#"{"tool_calls": [{"id": "c1", "function": {"name": "no_such_tool", "arguments": "{}"}}]}"#;
    Test::new().packs_dir(&packs).arg("--log").arg(&call_log).arg("call").stdin(input).run().success();
    let call = log_lines(&call_log);
    assert_eq!(call.len(), 1);
    assert_unknown(&call[0], "no_such_tool");

    let serve_log = dir.path().join("serve.jsonl");
    let log_arg = serve_log.to_str().unwrap();
    let answers = crate::serve::session(
        &packs,
        &["--log", log_arg],
        &[call_request(1, "no_such_tool"), call_request(2, "hello")],
    );
    let unknown = answers.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let served = log_lines(&serve_log);
    assert_eq!(served.len(), 2, "{served:?}");
    let (missing, hello): (Vec<&Value>, Vec<&Value>) = served.iter().partition(|l| l["tool"] == "no_such_tool");
    assert_unknown(missing[0], "no_such_tool");
    assert_eq!(hello[0]["outcome"], "ok");
    assert_eq!(hello[0]["argv"], json!(["echo", "hello"]));
}

#[test]
fn a_denied_call_reads_the_same_from_every_front_end() {
    let packs = tools();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let run = Test::new().packs_dir(&packs).arg("--log").arg(&log).args(["run", "careful", "--json"]).run();
    let run_error: Value = serde_json::from_slice(&run.code(3).stdout).unwrap();
    let input = r#"{"tool_calls": [{"id": "c1", "function": {"name": "careful", "arguments": "{}"}}]}"#;
    let call = Test::new().packs_dir(&packs).arg("--log").arg(&log).arg("call").stdin(input).run();
    let messages: Value = serde_json::from_slice(&call.success().stdout).unwrap();
    let call_error: Value = serde_json::from_str(messages[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(run_error, call_error);
    assert_eq!(run_error["error"]["kind"], "permission_denied");
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(line["decision"], "denied");
        assert_eq!(line["outcome"], "denied");
        assert_eq!(line["argv"], json!(["echo", "ran"]), "the approver was shown, and the log keeps, what would run");
    }
}

#[test]
fn dry_runs_and_manifest_tests_are_not_audited() {
    let packs = Packs::new().manifest(
        "hello",
        json!({"name": "hello", "description": "d", "command": "echo hello",
               "tests": [{"args": {}, "expect": {"output_equals": "hello"}}]}),
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    Test::new().packs_dir(&packs).arg("--log").arg(&log).args(["run", "hello", "--dry-run"]).run().success();
    // `packs test` records nothing: it refuses --log, and leaves PACKS_LOG alone.
    Test::new().packs_dir(&packs).env("PACKS_LOG", &log).args(["test"]).run().success();
    Test::new()
        .packs_dir(&packs)
        .arg("--log")
        .arg(&log)
        .args(["test"])
        .run()
        .code(1)
        .stderr_contains("`packs test` does not take --log");
    assert_eq!(log_lines(&log), Vec::<Value>::new());
}
