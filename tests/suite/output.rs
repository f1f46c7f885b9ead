//! Output shaping: JSON parsing, field extraction, templates, display truncation.

use serde_json::{Value, json};

use crate::common::{Packs, Test};

const DOC: &str =
    r#"{"data": {"url": "https://example.com/1", "items": [{"id": 7}, {"id": 8}], "title": "Ünïcödé \"q\""}}"#;

fn json_tool(name: &str, output: Value) -> Packs {
    Packs::new().manifest(
        name,
        json!({"name": name, "description": "d", "command": {"program": "printf", "args": ["%s", DOC]}, "output": output}),
    )
}

fn run_json(packs: &Packs, name: &str) -> Value {
    let out = Test::new().packs_dir(packs).args(["run", name, "--json"]).run();
    out.success();
    out.json()
}

#[test]
fn json_output_without_extraction_is_compact_json() {
    let packs = json_tool("whole", json!({"format": "json"}));
    let expected = serde_json::from_str::<Value>(DOC).unwrap().to_string();
    Test::new().packs_dir(&packs).args(["run", "whole"]).run().success().stdout_eq(&format!("{expected}\n"));
}

#[test]
fn extract_field_by_pointer_and_by_dotted_path() {
    let packs = json_tool("pointer", json!({"format": "json", "extract_field": "/data/url"}));
    Test::new().packs_dir(&packs).args(["run", "pointer"]).run().success().stdout_eq("https://example.com/1\n");
    assert_eq!(run_json(&packs, "pointer")["output"], "https://example.com/1");

    let packs = json_tool("dotted", json!({"format": "json", "extract_field": "data.items.1.id"}));
    Test::new().packs_dir(&packs).args(["run", "dotted"]).run().success().stdout_eq("8\n");

    let packs = json_tool("object", json!({"format": "json", "extract_field": "/data/items/0"}));
    assert_eq!(run_json(&packs, "object")["output"], "{\"id\":7}");

    let packs = json_tool("string", json!({"format": "json", "extract_field": "data.title"}));
    assert_eq!(run_json(&packs, "string")["output"], "Ünïcödé \"q\"");
}

#[test]
fn a_missing_field_is_a_failure() {
    let packs = json_tool("missing", json!({"format": "json", "extract_field": "data.nope"}));
    let out = Test::new().packs_dir(&packs).args(["run", "missing", "--json"]).run();
    out.code(2);
    let r = out.json();
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"], "the tool's JSON output has no field `data.nope`");
    assert_eq!(r["output"], DOC, "the raw output is kept");
}

#[test]
fn output_template_over_output_and_result() {
    let packs = json_tool(
        "templated",
        json!({"format": "json", "extract_field": "/data/url", "template": "Created issue: {{output}}"}),
    );
    Test::new()
        .packs_dir(&packs)
        .args(["run", "templated"])
        .run()
        .success()
        .stdout_eq("Created issue: https://example.com/1\n");

    let packs = json_tool(
        "result",
        json!({"format": "json", "extract_field": "data", "template": "{{result.items.0.id}} / {{result.title}}"}),
    );
    assert_eq!(run_json(&packs, "result")["output"], "7 / Ünïcödé \"q\"");

    // A text tool: `{{output}}` is stdout without its trailing newline.
    let packs = Packs::new().manifest(
        "text",
        json!({"name": "text", "description": "d", "command": "echo hello", "output": {"template": "<{{output}}>"}}),
    );
    Test::new().packs_dir(&packs).args(["run", "text"]).run().success().stdout_eq("<hello>\n");
}

#[test]
fn invalid_json_output_is_a_failure() {
    let packs = Packs::new().manifest(
        "liar",
        json!({"name": "liar", "description": "d", "command": "echo {not json", "output": {"format": "json"}}),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "liar", "--json"]).run();
    out.code(2).stderr_eq("");
    let r = out.json();
    assert_eq!(r["ok"], false);
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["output"], "{not json\n");
    assert!(r["error"].as_str().unwrap().starts_with("the tool's output is not valid JSON"), "{r}");
    Test::new()
        .packs_dir(&packs)
        .args(["run", "liar"])
        .run()
        .code(2)
        .stdout_eq("{not json\n")
        .stderr_contains("error: tool `liar`: the tool's output is not valid JSON");
}

#[test]
fn display_is_cut_to_max_chars_on_a_character_boundary() {
    let packs = Packs::new().manifest(
        "say",
        json!({
            "name": "say",
            "description": "d",
            "parameters": {"s": {"type": "string"}},
            "command": {"program": "printf", "args": ["%s", "{{s}}"]},
            "output": {"max_chars": 5},
        }),
    );
    for (text, display) in [
        ("héllo wörld", "héll…"),
        ("日本語のテキスト", "日本語の…"),
        ("🎉🎉🎉🎉🎉🎉", "🎉🎉🎉🎉…"),
        ("👍🏽👍🏽👍🏽", "👍🏽👍🏽…"),
        ("short", "short"),
        ("ok\n\n", "ok"),
    ] {
        let out = Test::new().packs_dir(&packs).args(["run", "say", "--json", "--arg"]).arg(format!("s={text}")).run();
        out.success();
        let r = out.json();
        assert_eq!(r["output"], text, "output is never cut");
        assert_eq!(r["display"], display, "display of {text:?}");
        let chars = r["display"].as_str().unwrap().chars().count();
        assert!(chars <= 5, "{chars} chars");
        if display.ends_with('…') {
            assert_eq!(chars, 5);
        }
    }
}

#[test]
fn display_defaults_to_a_thousand_chars() {
    let packs = Packs::new().manifest(
        "long",
        json!({"name": "long", "description": "d", "command": {"program": "sh", "args": ["-c", "yes é | head -n 3000 | tr -d '\\n'"]}}),
    );
    let r = run_json(&packs, "long");
    let display = r["display"].as_str().unwrap();
    assert_eq!(display.chars().count(), 1000);
    assert!(display.ends_with('…'));
    assert!(r["output"].as_str().unwrap().len() >= 3000);
}

#[test]
fn run_result_json_shape() {
    let packs = Packs::new().manifest(
        "hello",
        json!({"name": "hello", "description": "d", "command": {"program": "sh", "args": ["-c", "echo hi; echo warn >&2"]}}),
    );
    let mut r = run_json(&packs, "hello");
    assert!(r["duration_ms"].is_u64());
    r["duration_ms"] = json!(0);
    assert_eq!(
        r,
        json!({
            "tool": "hello",
            "ok": true,
            "exit_code": 0,
            "output": "hi\n",
            "display": "hi",
            "stderr": "warn\n",
            "duration_ms": 0,
            "truncated": false,
            "speak": true,
            "timed_out": false,
        })
    );
    // Without --json: stdout is the output, the tool's stderr is passed on.
    Test::new().packs_dir(&packs).args(["run", "hello"]).run().success().stdout_eq("hi\n").stderr_eq("warn\n");
}

/// A tool that writes `seq 1 N` on stdout and a warning on stderr.
fn noisy(output: Value) -> Packs {
    Packs::new().manifest(
        "noisy",
        json!({"name": "noisy", "description": "Count, and warn",
               "command": {"program": "sh", "args": ["-c", "seq 1 1000; echo 'warning: partial data' >&2"]},
               "policy": {"max_output_bytes": 20}, "output": output}),
    )
}

fn call_noisy(packs: &Packs) -> String {
    let input =
        json!({"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "noisy", "arguments": "{}"}}]});
    let out = Test::new().packs_dir(packs).arg("call").stdin(input.to_string().into_bytes()).run();
    out.success().json()[0]["content"].as_str().unwrap().to_owned()
}

#[test]
fn a_model_is_told_when_output_was_cut_and_sees_stderr_when_asked() {
    // seq 1 1000 writes 3,893 bytes; 20 are kept.
    let packs = noisy(json!({}));
    let content = call_noisy(&packs);
    assert_eq!(
        content,
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n[packs: the output was cut: 20 of 3893 bytes kept (policy.max_output_bytes)]\n"
    );
    let packs = noisy(json!({"include_stderr": true, "speak": false}));
    let content = call_noisy(&packs);
    assert!(content.ends_with("(policy.max_output_bytes)]\n[stderr]\nwarning: partial data\n"), "{content:?}");
    // `packs run` keeps stdout as the tool wrote it; the rest goes to stderr.
    let out = Test::new().packs_dir(&packs).args(["run", "noisy"]).run();
    out.success()
        .stdout_eq("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n")
        .stderr_contains("warning: partial data")
        .stderr_contains("cut at 20 bytes");
    // `speak` travels in the JSON result and in MCP `_meta`, with the text cut for speech.
    let json = Test::new().packs_dir(&packs).args(["run", "noisy", "--json"]).run().success().json();
    assert_eq!(json["speak"], false);
    let messages = crate::serve::session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "noisy", "arguments": {}}}),
        ],
    );
    let result = &messages.iter().find(|m| m["id"] == 2).unwrap()["result"];
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(result["content"][0]["text"], content);
    assert_eq!(
        result["_meta"],
        json!({"dev.packs/speak": false, "dev.packs/display": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10"})
    );
}
