//! `command.stdin`: what a tool reads on its standard input, rendered from the call's
//! values, bounded, shown masked, the same from every front-end; and `output.format:
//! "jsonl"`.

use serde_json::{Value, json};

use crate::common::{Packs, Test};

/// A tool `name` running `program args` with `stdin` and the string parameter `text`.
fn tool(name: &str, program: &str, args: Value, stdin: &str) -> Value {
    json!({
        "name": name,
        "description": "A tool reading its stdin",
        "parameters": {"text": {"type": "string", "required": true, "description": "Text"}},
        "command": {"program": program, "args": args, "stdin": stdin},
    })
}

fn cat() -> Packs {
    Packs::new().manifest("cat", tool("cat", "cat", json!([]), "{{text}}"))
}

fn run_json(packs: &Packs, name: &str, args: &Value) -> crate::common::Output {
    Test::new().packs_dir(packs).args(["run", name, &args.to_string(), "--json"]).run()
}

#[test]
fn stdin_reaches_the_program_byte_for_byte_nul_included() {
    let text = "two words\n$(id) `id` 'q' \"d\" -n --\r\n\u{0}after NUL héllo 🦀\t\n\n";
    let out = run_json(&cat(), "cat", &json!({"text": text}));
    out.success();
    assert_eq!(out.json()["output"], text);
    // A value that also reaches argv still cannot hold a NUL byte.
    let both = Packs::new().manifest("both", tool("both", "printf", json!(["%s", "{{text}}"]), "{{text}}"));
    let out = run_json(&both, "both", &json!({"text": "a\u{0}b"}));
    out.code(1).stdout_contains("contains a NUL byte");
}

#[test]
fn json_helper_and_context_and_literal_text_in_stdin() {
    let packs = Packs::new().manifest(
        "doc",
        json!({
            "name": "doc",
            "description": "JSON on stdin",
            "parameters": {"doc": {"type": "object", "required": true, "description": "A document"}},
            "command": {"program": "cat", "stdin": "{\"doc\": {{json doc}}, \"url\": {{json context.url}}}\n"},
        }),
    );
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "doc", r#"{"doc": {"a": [1, "x\"y"]}}"#, "--context", "url=https://e.x/?q=1"])
        .run();
    out.success().stdout_eq("{\"doc\": {\"a\":[1,\"x\\\"y\"]}, \"url\": \"https://e.x/?q=1\"}\n");
}

/// One `tools/call` of `name` with `arguments` through `packs serve` (a value larger
/// than a command line may hold reaches a tool this way); the answer's result.
fn served(packs: &Packs, extra: &[&str], name: &str, arguments: Value) -> Value {
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let answers = crate::serve::session(packs, extra, &[call]);
    answers.into_iter().find(|m| m["id"] == 1).expect("an answer")
}

#[test]
fn a_tool_that_never_reads_a_large_stdin_or_exits_early_keeps_its_output() {
    let big = "x".repeat(1024 * 1024 - 10);
    let packs = Packs::new()
        .manifest("ignore", tool("ignore", "sh", json!(["-c", "echo ignored it"]), "{{text}}"))
        .manifest("early", tool("early", "head", json!(["-c", "5"]), "{{text}}"));
    let answer = served(&packs, &[], "ignore", json!({"text": big}));
    assert_eq!(answer["result"]["content"][0]["text"], "ignored it\n", "{answer}");
    let answer = served(&packs, &[], "early", json!({"text": big}));
    assert_eq!(answer["result"]["content"][0]["text"], "xxxxx", "{answer}");
}

#[test]
fn stdin_over_one_mebibyte_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_arg = log.to_str().unwrap();
    let packs = Packs::new().manifest("wc", tool("wc", "wc", json!(["-c"]), "{{text}}\n"));
    let answer = served(&packs, &[], "wc", json!({"text": "y".repeat(1024 * 1024 - 1)}));
    assert_eq!(answer["result"]["content"][0]["text"], "1048576\n", "1 MiB exactly fits");
    let answer = served(&packs, &["--log", log_arg], "wc", json!({"text": "y".repeat(1024 * 1024)}));
    assert!(
        answer.to_string().contains(
            "`command.stdin` renders to 1048577 bytes with these values, more than the 1048576 bytes (1 MiB) a tool's standard input may hold"
        ),
        "{answer}"
    );
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!((line["outcome"].as_str(), line["exit_code"].as_i64()), (Some("validation"), None), "{line}");
}

#[test]
fn a_block_that_repeats_a_value_stops_at_one_mebibyte_before_it_is_built() {
    // 117 KB of arguments would render 300 MB through `{{#each}}`: the render stops at the
    // cap, so packs never holds the rest (found by review: 322 MB at its peak), in stdin
    // and in an argument alike.
    let each = "{{#each items}}{{../text}}{{/each}}";
    let parameters = json!({"text": {"type": "string", "required": true},
        "items": {"type": "array", "items": {"type": "integer"}, "required": true}});
    let packs = Packs::new()
        .manifest(
            "amp",
            json!({"name": "amp", "description": "d", "parameters": parameters.clone(),
            "command": {"program": "wc", "args": ["-c"], "stdin": each}}),
        )
        .manifest(
            "amp_arg",
            json!({"name": "amp_arg", "description": "d", "parameters": parameters,
            "command": {"program": "printf", "args": ["%.3s", each]}}),
        );
    let args = json!({"text": "A".repeat(100_000), "items": (0..3000).collect::<Vec<_>>()}).to_string();
    for (name, field) in [("amp", "command.stdin"), ("amp_arg", "command.args.1")] {
        let out = Test::new()
            .packs_dir(packs.path())
            .args(["run", name, &args, "--json"])
            .wrapper(["python3", "-c", crate::runner_limits::PEAK_RSS])
            .run();
        out.code(1);
        let e: Value = serde_json::from_str(out.stdout()).unwrap();
        assert_eq!(e["error"]["kind"], "validation", "{e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{field}` renders to more than 1 MiB")), "{message}");
        let kib = crate::runner_limits::max_rss_kib(&out.stderr).unwrap_or_else(|| panic!("{}", out.stderr));
        assert!(kib < 100 * 1024, "{name}: packs held {kib} KiB at its peak");
    }
    // Below the cap the block renders whole.
    let small = json!({"text": "A".repeat(1000), "items": (0..1000).collect::<Vec<_>>()});
    run_json(&packs, "amp", &small).success();
}

#[test]
fn dry_run_shows_the_size_and_a_preview_human_and_json() {
    let packs = cat();
    Test::new()
        .packs_dir(&packs)
        .args(["run", "cat", "--dry-run", "--arg", "text=a\nb"])
        .run()
        .success()
        .stdout_eq("cat\n  stdin: 3 bytes: $'a\\nb'\n  timeout: 30s\n  tier: read_only\n  sandbox: writes only to its private TMPDIR; credential stores unreadable; no network, no abstract Unix socket; signals only its own processes\n");
    let long = "0123456789".repeat(30);
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "cat", "--dry-run", "--json", "--arg", &format!("text={long}")])
        .run();
    out.success();
    let v = out.json();
    assert_eq!(v["stdin"], json!({"bytes": 300, "preview": &long[..200], "cut": true}));
    assert_eq!(v["argv"], json!(["cat"]));
    Test::new()
        .packs_dir(&packs)
        .args(["run", "cat", "--dry-run", "--arg", &format!("text={long}")])
        .run()
        .success()
        .stdout_contains(&format!("  stdin: 300 bytes, starting {}\n", &long[..200]));
    // Without `command.stdin` there is no stdin line (the tool reads /dev/null).
    let plain = Packs::new().manifest("plain", json!({"name": "plain", "description": "d", "command": "true"}));
    let out = Test::new().packs_dir(&plain).args(["run", "plain", "--dry-run", "--json"]).run();
    out.success();
    assert_eq!(out.json()["stdin"], Value::Null);
}

#[test]
fn a_secret_in_stdin_is_masked_in_dry_runs_results_and_the_audit_log() {
    let secret = "tk_live_stdin_42";
    let packs = Packs::new().manifest("login", tool("login", "cat", json!([]), "token={{secret.PACKS_T}}\n{{text}}"));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let with =
        |args: &[&str]| Test::new().packs_dir(&packs).env("PACKS_T", secret).arg("--log").arg(&log).args(args).run();
    with(&["run", "login", "--dry-run", "--arg", "text=hi"])
        .success()
        .stdout_lacks(secret)
        .stdout_contains("  stdin: 25 bytes: $'token=***\\nhi'\n");
    let out = with(&["run", "login", "--json", "--arg", "text=hi"]);
    out.success().stdout_lacks(secret);
    assert_eq!(out.json()["output"], "token=***\nhi", "the program got the secret; what comes back is masked");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(secret) && !text.contains("hi\""), "{text}");
    let line: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!((line["stdin_bytes"].as_u64(), line["argv"].clone()), (Some(25), json!(["cat"])), "{line}");
}

#[test]
fn every_front_end_gives_the_tool_its_stdin() {
    let packs = Packs::new().manifest("count", tool("count", "wc", json!(["-l"]), "{{text}}"));
    // packs call (an OpenAI response)
    let input = json!({"tool_calls": [{"id": "c1", "function": {"name": "count", "arguments": "{\"text\": \"a\\nb\\nc\\n\"}"}}]});
    Test::new().packs_dir(&packs).arg("call").stdin(input.to_string()).run().success().stdout_contains("3\\n");
    // packs serve (stdio)
    let answers = crate::serve::session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "count", "arguments": {"text": "1\n2\n"}}}),
        ],
    );
    let answer = answers.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "2\n", "{answer}");
    // packs exec FILE
    let file = packs.join("count.tool.json");
    Test::new().arg("exec").arg(&file).arg(r#"{"text": "x\n"}"#).run().success().stdout_eq("1\n");
}

#[test]
fn a_toml_manifest_with_stdin() {
    let packs = Packs::new().file(
        "upper.tool.toml",
        "name = \"upper\"\ndescription = \"Upper-case text\"\n\n[parameters.text]\ntype = \"string\"\nrequired = true\ndescription = \"Text\"\n\n[command]\nprogram = \"tr\"\nargs = [\"a-z\", \"A-Z\"]\nstdin = \"\"\"\n{{text}}\n\"\"\"\n",
    );
    Test::new().packs_dir(&packs).args(["run", "upper", "--arg", "text=shout"]).run().success().stdout_eq("SHOUT\n");
}

#[test]
fn an_undeclared_name_in_stdin_is_a_load_error_with_its_position_and_lint_reads_stdin() {
    let packs = Packs::new().file(
        "bad.tool.json",
        "{\n  \"name\": \"bad\",\n  \"description\": \"d\",\n  \"parameters\": {\"text\": {\"type\": \"string\", \"description\": \"t\"}},\n  \"command\": {\"program\": \"cat\", \"stdin\": \"{{txet}}\"}\n}\n",
    );
    let out = Test::new().packs_dir(&packs).args(["run", "bad", "--arg", "text=x"]).run();
    out.code(1).stderr_contains("bad.tool.json:5:").stderr_contains("txet");
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.join("bad.tool.json")).run();
    let diags = out.json();
    let d = diags["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "undeclared-placeholder").cloned();
    let d = d.unwrap_or_else(|| panic!("{diags:#}"));
    assert_eq!((d["field"].as_str(), d["line"].as_u64()), (Some("command.stdin"), Some(5)), "{d}");
    // A parameter used only in stdin is used; a credential written into stdin is found.
    let good = Packs::new().manifest("good", tool("good", "cat", json!([]), "{{text}}"));
    Test::new().args(["lint", "--deny-warnings"]).arg(good.path()).run().success();
    let leaky = Packs::new()
        .manifest("leaky", tool("leaky", "cat", json!([]), "ghp_abcdefghijklmnopqrstuvwxyz0123456789 {{text}}"));
    Test::new()
        .args(["lint"])
        .arg(leaky.path())
        .run()
        .code(1)
        .stdout_contains("hardcoded-secret")
        .stdout_lacks("ghp_abcdefghijklmnopqrstuvwxyz0123456789");
}

#[test]
fn json_lines_output_is_an_array_and_a_bad_line_is_named() {
    let lines = |name: &str, text: &str, output: Value| json!({"name": name, "description": "d", "command": {"program": "printf", "args": ["%s", text]}, "output": output});
    let packs = Packs::new()
        .manifest(
            "rows",
            lines("rows", "{\"id\":1,\"n\":\"a\"}\n\n{\"id\":2,\"n\":\"b\"}\n", json!({"format": "jsonl"})),
        )
        .manifest("ids", lines("ids", "{\"id\":1}\n{\"id\":2}\n", json!({"format": "jsonl", "extract_field": "id"})))
        .manifest("broken", lines("broken", "{\"id\":1}\nnot json\n", json!({"format": "jsonl"})));
    let out = Test::new().packs_dir(&packs).args(["run", "rows", "--json"]).run();
    out.success();
    assert_eq!(out.json()["output"], r#"[{"id":1,"n":"a"},{"id":2,"n":"b"}]"#);
    Test::new().packs_dir(&packs).args(["run", "ids"]).run().success().stdout_eq("[1,2]\n");
    let out = Test::new().packs_dir(&packs).args(["run", "broken", "--json"]).run();
    out.code(2);
    let r = out.json();
    assert!(r["error"].as_str().unwrap().starts_with("line 2 of the tool's output is not valid JSON"), "{r}");
    assert_eq!(r["output"], "{\"id\":1}\nnot json\n", "the raw output is kept");
}

#[test]
fn the_published_schema_knows_stdin_and_jsonl() {
    let path = std::path::Path::new(crate::common::REPO).join("schemas/tool-pack.v1.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let with = |command: Value, output: Value| {
        json!({"name": "t", "description": "d", "parameters": {"text": {"type": "string", "description": "t"}},
               "command": command, "output": output})
    };
    let good = with(json!({"program": "cat", "stdin": "{{text}}"}), json!({"format": "jsonl", "extract_field": "a"}));
    assert!(validator.is_valid(&good), "{:?}", validator.iter_errors(&good).map(|e| e.to_string()).collect::<Vec<_>>());
    assert!(!validator.is_valid(&with(json!({"program": "cat", "stdin": ["{{text}}"]}), json!({}))));
    assert!(!validator.is_valid(&with(json!({"program": "cat", "stdin": 7}), json!({}))));
    assert!(!validator.is_valid(&with(json!({"program": "cat"}), json!({"format": "ndjson"}))));
    // And packs itself refuses what the schema refuses.
    let packs = Packs::new().manifest("t", with(json!({"program": "cat", "stdin": ["{{text}}"]}), json!({})));
    Test::new().packs_dir(&packs).args(["run", "t"]).run().code(1).stderr_contains("command");
}
