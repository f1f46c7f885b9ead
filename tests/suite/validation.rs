//! Calls are validated against the tool's schema before anything runs.

use serde_json::json;

use crate::common::{Packs, Test, printf_tool};

fn checked() -> Packs {
    Packs::new().manifest(
        "checked",
        printf_tool(
            "checked",
            json!({
                "path": {"type": "string", "required": true},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "unit": {"type": "string", "enum": ["metric", "imperial"]},
                "repo": {"type": "string", "pattern": "^[a-z]+/[a-z]+$"},
                "verbose": {"type": "boolean"},
            }),
            json!(["{{path}}", "{{count}}", "{{unit}}", "{{repo}}", "{{verbose}}"]),
        ),
    )
}

#[test]
fn a_valid_call_runs() {
    let out = Test::new()
        .with_packs(checked())
        .args(["run", "checked"])
        .arg(r#"{"path": "p", "count": 3, "unit": "metric", "repo": "acme/widgets", "verbose": true}"#)
        .run();
    out.success();
    assert_eq!(out.argv(), ["p", "3", "metric", "acme/widgets", "true"]);
}

#[test]
fn missing_required_argument() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "--arg", "count=2"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq("error: invalid arguments for `checked`: `path`: `path` is required\n");
}

#[test]
fn wrong_type() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", r#"{"path": "p", "count": "three"}"#])
        .run()
        .code(1)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("`count`")
        .stderr_contains("\"three\"")
        .stderr_contains("integer");
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", r#"{"path": 5}"#])
        .run()
        .code(1)
        .one_line_error()
        .stderr_contains("`path`")
        .stderr_contains("string");
}

#[test]
fn out_of_range() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "--arg", "path=p", "--arg", "count=11"])
        .run()
        .code(1)
        .one_line_error()
        .stderr_contains("`count`")
        .stderr_contains("11");
}

#[test]
fn value_outside_the_enum() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "--arg", "path=p", "--arg", "unit=kelvin"])
        .run()
        .code(1)
        .one_line_error()
        .stderr_contains("`unit`")
        .stderr_contains("\"kelvin\"");
}

#[test]
fn pattern_mismatch() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "--arg", "path=p", "--arg", "repo=../../etc\npasswd"])
        .run()
        .code(1)
        .one_line_error()
        .stderr_contains("`repo`")
        .stderr_contains("^[a-z]+/[a-z]+$");
}

#[test]
fn unknown_argument_is_rejected() {
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "--arg", "path=p", "--arg", "cmd=rm -rf /"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq(
            "error: invalid arguments for `checked`: `cmd`: unknown argument `cmd`; \
             the tool takes: path, count, unit, repo, verbose\n",
        );
}

#[test]
fn arguments_must_be_an_object() {
    for bad in ["[1, 2]", "\"path\"", "42", "null"] {
        Test::new()
            .with_packs(checked())
            .args(["run", "checked", bad])
            .run()
            .code(1)
            .stdout_eq("")
            .one_line_error()
            .stderr_contains("error: invalid arguments for `checked`: ")
            .stderr_contains("JSON object");
    }
    Test::new()
        .with_packs(checked())
        .args(["run", "checked", "{not json"])
        .run()
        .code(1)
        .one_line_error()
        .stderr_contains("not valid JSON");
}

#[test]
fn json_error_output_lists_every_field() {
    let out = Test::new().with_packs(checked()).args(["run", "checked", "--json", r#"{"count": 0, "extra": 1}"#]).run();
    out.code(1).stderr_eq("");
    let v = out.json();
    let error = &v["error"];
    assert_eq!(error["kind"], "validation");
    assert_eq!(error["retryable"], true);
    assert!(error["message"].as_str().unwrap().starts_with("invalid arguments for `checked`: "), "{v:#}");
    let errors = error["errors"].as_array().expect("errors is an array");
    let mut fields: Vec<&str> = errors.iter().map(|e| e["field"].as_str().unwrap()).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["count", "extra", "path"], "{v:#}");
    let path = errors.iter().find(|e| e["field"] == "path").unwrap();
    assert_eq!(path["message"], "`path` is required");
    assert_eq!(path["schema"], json!({"type": "string"}));
    let count = errors.iter().find(|e| e["field"] == "count").unwrap();
    assert_eq!(count["schema"], json!({"type": "integer", "minimum": 1, "maximum": 10}));
    let extra = errors.iter().find(|e| e["field"] == "extra").unwrap();
    assert_eq!(extra["message"], "unknown argument `extra`; the tool takes: path, count, unit, repo, verbose");
    assert!(extra.get("schema").is_none(), "{extra}");
}

#[test]
fn json_error_output_for_an_unknown_tool() {
    let out = Test::new().with_packs(checked()).args(["run", "chekced", "--json"]).run();
    out.code(1).stderr_eq("");
    assert_eq!(
        out.json(),
        json!({"error": {"kind": "not_found", "message": "no tool named `chekced`; did you mean `checked`?", "retryable": false}})
    );
}

#[test]
fn json_error_output_for_unparsable_arguments() {
    for args in [vec!["{not json"], vec!["[1]"], vec!["--arg", "count=three"]] {
        let out = Test::new().with_packs(checked()).args(["run", "checked", "--json"]).args(&args).run();
        out.code(1).stderr_eq("");
        let error = &out.json()["error"];
        assert_eq!(error["kind"], "validation", "{args:?}");
        assert_eq!(error["retryable"], true);
        assert!(error["message"].as_str().unwrap().starts_with("invalid arguments for `checked`: "), "{error}");
    }
}

#[test]
fn unknown_tool() {
    Test::new()
        .with_packs(checked())
        .args(["run", "nope"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq("error: no tool named `nope`\n");
    Test::new()
        .with_packs(checked())
        .args(["run", "checkd"])
        .run()
        .code(1)
        .stderr_eq("error: no tool named `checkd`; did you mean `checked`?\n");
}

#[test]
fn a_path_is_never_a_tool_name() {
    // A script that would leave a mark if anything ran it.
    let packs = checked().executable(
        "bin/sh",
        "#!/bin/sh\ntouch \"$(dirname \"$0\")/RAN\"\necho '{\"name\":\"sh\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}'\n",
    );
    for name in ["../../bin/sh", "/bin/sh", "bin/sh", "./checked", "checked.tool.json", "sh", ""] {
        let out = Test::new().packs_dir(&packs).args(["run", name]).run();
        out.code(1).stdout_eq("").one_line_error().stderr_contains(&format!("error: no tool named `{name}`"));
    }
    assert!(!packs.join("bin/RAN").exists(), "the nested script was run");
}

#[test]
fn arg_values_are_typed_by_the_schema() {
    let packs = Packs::new().manifest(
        "typed",
        printf_tool(
            "typed",
            json!({
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "b": {"type": "boolean"},
                "s": {"type": "string"},
                "l": {"type": "array"},
                "o": {"type": "object"},
            }),
            json!(["{{n}}", "{{x}}", "{{b}}", "s={{s}}", "{{l}}", "{{o}}"]),
        ),
    );
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "typed", "--arg", "n=42", "--arg", "x=2.5", "--arg", "b=false", "--arg", "s=007"])
        .args(["--arg", "l=one", "--arg", "l=2", "--arg", r#"o={"k": [1]}"#])
        .run();
    out.success();
    // `s=007` stays a string; `l=2` is a list item, as text.
    assert_eq!(out.argv(), ["42", "2.5", "false", "s=007", "one", "2", r#"{"k":[1]}"#]);

    let out =
        Test::new().packs_dir(&packs).args(["run", "typed", "--arg", r#"l=["a", "b c"]"#, "--arg", "b=yes"]).run();
    out.success();
    assert_eq!(out.argv(), ["true", "s=", "a", "b c"]);

    for bad in ["n=4x", "n=", "b=maybe", "o=[1]"] {
        Test::new()
            .packs_dir(&packs)
            .args(["run", "typed", "--arg", bad])
            .run()
            .code(1)
            .stdout_eq("")
            .one_line_error()
            .stderr_contains(&format!("`--arg {}", &bad[..2]));
    }
}

#[test]
fn arg_overrides_the_json_object() {
    let out = Test::new()
        .with_packs(checked())
        .args(["run", "checked", r#"{"path": "from-json", "count": 1}"#, "--arg", "path=from-arg"])
        .run();
    out.success();
    assert_eq!(out.argv(), ["from-arg", "1"]);
}

#[test]
fn a_nul_byte_in_a_value_is_a_validation_error() {
    let packs = Packs::new().manifest(
        "echo_v",
        json!({"name": "echo_v", "description": "d", "parameters": {"v": {"type": "string"}, "vs": {"type": "array"}},
               "command": {"program": "echo", "args": ["--", "{{v}}", "{{vs}}"]}}),
    );
    for args in [json!({"v": "a\u{0}b"}), json!({"vs": ["ok", "x\u{0}"]})] {
        let out = Test::new().packs_dir(&packs).args(["run", "echo_v", "--json"]).arg(args.to_string()).run();
        let v = out.code(1).json();
        assert_eq!(v["error"]["kind"], "validation", "{v}");
        assert_eq!(v["error"]["retryable"], true);
        assert!(v["error"]["message"].as_str().unwrap().contains("NUL byte"), "{v}");
    }
}

#[test]
fn nested_errors_name_the_nested_field_and_its_schema() {
    let packs = Packs::new().manifest(
        "nested",
        json!({"name": "nested", "description": "d", "command": "true", "parameters": {"items": {"type": "array",
            "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}, "additionalProperties": false}}}}),
    );
    let run = |args: &str| Test::new().packs_dir(&packs).args(["run", "nested", args, "--json", "--dry-run"]).run();
    let out = run(r#"{"items": [{"k": "a"}, {}]}"#);
    let e = &out.code(1).json()["error"]["errors"][0];
    assert_eq!(e["field"], "items/1/k");
    assert_eq!(e["message"], "`items/1/k` is required");
    assert_eq!(e["schema"], json!({"type": "string"}));
    let out = run(r#"{"items": [{"k": "a", "x": 1}]}"#);
    let e = &out.code(1).json()["error"]["errors"][0];
    assert_eq!(e["field"], "items/0/x");
    assert_eq!(e["message"], "unknown argument `x` in `items/0`; `items/0` takes: k");
    let out = run(r#"{"items": [{"k": 5}]}"#);
    let e = &out.code(1).json()["error"]["errors"][0];
    assert_eq!(e["field"], "items/0/k");
    assert_eq!(e["schema"], json!({"type": "string"}));
}
