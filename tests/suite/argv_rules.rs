//! Template and argv rules, through the real binary: omission, defaults,
//! groups, splats, value rendering, conditionals, context, literals, dry runs.

use serde_json::{Value, json};

use crate::common::{Packs, Test, printf_tool};

fn one(name: &str, parameters: Value, args: Value) -> Packs {
    Packs::new().manifest(name, printf_tool(name, parameters, args))
}

/// Run `packs run NAME JSON` and return the printed argv.
fn argv(packs: &Packs, name: &str, call: Value) -> Vec<String> {
    let out = Test::new().packs_dir(packs).args(["run", name]).arg(call.to_string()).run();
    out.success();
    out.argv()
}

#[test]
fn empty_elements_are_omitted_but_explicit_empty_strings_are_kept() {
    let packs = one(
        "omit",
        json!({"v": {"type": "string"}, "w": {"type": "string"}, "f": {"type": "boolean"}}),
        json!(["A", "{{v}}", "", "pre{{w}}", "{{#if f}}-f{{/if}}", "Z"]),
    );
    // `""` written in the manifest is kept; `{{v}}` is kept only when the call gave "".
    assert_eq!(argv(&packs, "omit", json!({})), ["A", "", "pre", "Z"]);
    assert_eq!(argv(&packs, "omit", json!({"v": "", "w": ""})), ["A", "", "", "pre", "Z"]);
    assert_eq!(argv(&packs, "omit", json!({"v": "x", "w": "y", "f": true})), ["A", "x", "", "prey", "-f", "Z"]);
}

#[test]
fn inline_and_declared_defaults() {
    let packs = one(
        "defaults",
        json!({
            "inl": {"type": "string"},
            "dec": {"type": "string", "default": "DECLARED"},
            "both": {"type": "string", "default": "DECLARED"},
            "num": {"type": "integer", "default": 7},
        }),
        json!(["{{inl:inline value}}", "{{dec}}", "{{both:INLINE}}", "--n={{num}}", "x={{inl:a:b}}"]),
    );
    assert_eq!(argv(&packs, "defaults", json!({})), ["inline value", "DECLARED", "INLINE", "--n=7", "x=a:b"]);
    assert_eq!(
        argv(&packs, "defaults", json!({"inl": "I", "dec": "D", "both": "B", "num": 0})),
        ["I", "D", "B", "--n=0", "x=I"]
    );
}

#[test]
fn groups_are_omitted_or_repeated() {
    let packs = one(
        "groups",
        json!({
            "team": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "human": {"type": "boolean"},
            "level": {"type": "integer", "default": 2},
        }),
        json!([
            "BEGIN",
            ["--team", "{{team}}"],
            ["--tag", "{{tags}}"],
            ["--human", "{{#if human}}{{/if}}"],
            ["--level", "{{level}}"],
            ["-v"],
            "END"
        ]),
    );
    assert_eq!(argv(&packs, "groups", json!({})), ["BEGIN", "--level", "2", "-v", "END"]);
    assert_eq!(argv(&packs, "groups", json!({"human": false, "tags": []})), ["BEGIN", "--level", "2", "-v", "END"]);
    assert_eq!(
        argv(&packs, "groups", json!({"team": "ENG", "tags": ["a", "b c"], "human": true, "level": 5})),
        ["BEGIN", "--team", "ENG", "--tag", "a", "--tag", "b c", "--human", "--level", "5", "-v", "END"]
    );
}

#[test]
fn tags_repeat_through_the_cli_arg_flag() {
    let packs = one(
        "tagged",
        json!({"tags": {"type": "array", "items": {"type": "string"}}}),
        json!(["x", ["--tag", "{{tags}}"]]),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "tagged", "--arg", "tags=a", "--arg", "tags=b"]).run();
    out.success();
    assert_eq!(out.argv(), ["x", "--tag", "a", "--tag", "b"]);
}

#[test]
fn array_placeholder_splats_one_element_per_item() {
    let packs = one("splat", json!({"files": {"type": "array"}}), json!(["cat", "--", "{{files}}", "end"]));
    assert_eq!(argv(&packs, "splat", json!({"files": ["a", "-b", "c d"]})), ["cat", "--", "a", "-b", "c d", "end"]);
    assert_eq!(argv(&packs, "splat", json!({"files": []})), ["cat", "--", "end"]);
    assert_eq!(argv(&packs, "splat", json!({})), ["cat", "--", "end"]);
    // Items that are not strings render the way single values do.
    assert_eq!(
        argv(&packs, "splat", json!({"files": [1, true, null, {"k": "v"}]})),
        ["cat", "--", "1", "true", "", r#"{"k":"v"}"#, "end"]
    );
}

#[test]
fn numbers_booleans_objects_and_arrays_render_as_json() {
    let packs = one(
        "values",
        json!({
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "o": {"type": "object"},
            "a": {"type": "array"},
        }),
        json!(["n={{n}}", "{{x}}", "{{b}}", "{{o}}", "a={{a}}"]),
    );
    assert_eq!(
        argv(
            &packs,
            "values",
            json!({"n": -15, "x": 1.5, "b": false, "o": {"z": [1, "two"], "a": null}, "a": ["q", 2]})
        ),
        ["n=-15", "1.5", "false", r#"{"z":[1,"two"],"a":null}"#, r#"a=["q",2]"#]
    );
    assert_eq!(argv(&packs, "values", json!({"b": true})), ["n=", "true", "a="]);
}

#[test]
fn if_block_adds_a_flag() {
    let packs = one("cond", json!({"flag": {"type": "boolean"}}), json!(["ls", "{{#if flag}}-h{{/if}}", "--", "."]));
    assert_eq!(argv(&packs, "cond", json!({"flag": true})), ["ls", "-h", "--", "."]);
    assert_eq!(argv(&packs, "cond", json!({"flag": false})), ["ls", "--", "."]);
    assert_eq!(argv(&packs, "cond", json!({})), ["ls", "--", "."]);
}

#[test]
fn if_block_sees_a_declared_default() {
    let packs = one(
        "cond_default",
        json!({"human": {"type": "boolean", "default": true}}),
        json!(["du", "{{#if human}}-h{{/if}}"]),
    );
    assert_eq!(argv(&packs, "cond_default", json!({})), ["du", "-h"]);
    assert_eq!(argv(&packs, "cond_default", json!({"human": false})), ["du"]);
}

#[test]
fn context_placeholders_read_the_callers_context() {
    let packs = one("ctx", json!({}), json!(["open", "{{context.url}}", "{{context.selection:none}}"]));
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "ctx", "--context", "url=https://example.com/a?b=1&c='2'", "--context", "selection=some text"])
        .run();
    out.success();
    assert_eq!(out.argv(), ["open", "https://example.com/a?b=1&c='2'", "some text"]);
    assert_eq!(argv(&packs, "ctx", json!({})), ["open", "none"]);
}

#[test]
fn context_sourced_parameter_is_filled_from_the_context() {
    let packs = one(
        "summarize",
        json!({"url": {"type": "string", "required": true, "source": "context.url"}}),
        json!(["get", "{{url}}"]),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "summarize", "--context", "url=https://ctx.example/"]).run();
    out.success();
    assert_eq!(out.argv(), ["get", "https://ctx.example/"]);

    // The call's own value wins over the context.
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "summarize", "--arg", "url=https://call.example/", "--context", "url=https://ctx.example/"])
        .run();
    out.success();
    assert_eq!(out.argv(), ["get", "https://call.example/"]);

    // Neither: the required parameter is missing.
    Test::new()
        .packs_dir(&packs)
        .args(["run", "summarize"])
        .run()
        .code(1)
        .stderr_eq("error: invalid arguments for `summarize`: `url`: `url` is required\n");

    // The model is not told it must give it: the context does.
    let describe = Test::new().packs_dir(&packs).args(["describe", "summarize"]).run().success().json();
    assert_eq!(describe["parameters"]["required"], json!([]));
    assert_eq!(describe["parameters"]["properties"]["url"], json!({"type": "string"}));
}

#[test]
fn transcript_sourced_parameter_is_filled_from_the_context() {
    let packs = one(
        "note",
        json!({"message": {"type": "string", "required": true, "source": "transcript"}}),
        json!(["-m", "{{message}}"]),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "note", "--context", "transcript=fix the typo"]).run();
    out.success();
    assert_eq!(out.argv(), ["-m", "fix the typo"]);
}

#[test]
fn literal_parameter_takes_its_default_and_cannot_be_set() {
    let packs = one(
        "lit",
        json!({
            "mode": {"type": "string", "source": "literal", "default": "--safe"},
            "v": {"type": "string"},
        }),
        json!(["{{mode}}", "{{v}}"]),
    );
    assert_eq!(argv(&packs, "lit", json!({"v": "x"})), ["--safe", "x"]);
    Test::new()
        .packs_dir(&packs)
        .args(["run", "lit", "--arg", "mode=--unsafe", "--arg", "v=x"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq("error: invalid arguments for `lit`: `mode`: unknown argument `mode`; the tool takes: v\n");
    let describe = Test::new().packs_dir(&packs).args(["describe", "lit"]).run().success().json();
    assert_eq!(describe["parameters"]["properties"], json!({"v": {"type": "string"}}));
}

#[test]
fn cwd_and_env_are_templates() {
    let work = tempfile::tempdir().unwrap();
    let packs = Packs::new().manifest(
        "where",
        json!({
            "name": "where",
            "description": "print the working directory and a variable",
            "parameters": {"dir": {"type": "string", "required": true}, "v": {"type": "string"}},
            "command": {"program": "sh", "args": ["-c", "pwd -P; printf '%s\\n' \"$PACKS_TEST_V\""], "cwd": "{{dir}}", "env": {"PACKS_TEST_V": "v={{v}}"}},
        }),
    );
    let dir = work.path().canonicalize().unwrap();
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "where", "--arg", "v=a b"])
        .arg(format!("--arg=dir={}", dir.display()))
        .run();
    out.success().stdout_eq(&format!("{}\nv=a b\n", dir.display()));
}

#[test]
fn dry_run_prints_the_quoted_command_and_runs_nothing() {
    let packs = Packs::new().manifest(
        "make_file",
        json!({
            "name": "make_file",
            "description": "create a file",
            "parameters": {"file": {"type": "string", "required": true}},
            "command": {"program": "touch", "args": ["--", "{{file}}"]},
            "policy": {"read_only": false, "timeout_secs": 7},
        }),
    );
    let test = Test::new();
    let target = test.path().join("created by touch");
    let out = test
        .packs_dir(&packs)
        .args(["run", "make_file", "--dry-run"])
        .arg(format!("--arg=file={}", target.display()))
        .run();
    out.success()
        .stdout_eq(&format!(
            "touch -- '{}'\n  timeout: 7s\n  tier: system\n  sandbox: no network, no abstract Unix socket; signals only its own processes\n",
            target.display()
        ))
        .stderr_eq("");
    assert!(!target.exists(), "--dry-run ran the tool");

    // Without --dry-run it does run (so the check above could fail).
    let out =
        Test::new().packs_dir(&packs).args(["run", "make_file"]).arg(format!("--arg=file={}", target.display())).run();
    out.success();
    assert!(target.exists());
}

#[test]
fn dry_run_text_shows_cwd_and_env() {
    let packs = Packs::new().manifest(
        "envy",
        json!({
            "name": "envy",
            "description": "d",
            "parameters": {"v": {"type": "string"}},
            "command": {"program": "env", "args": ["{{v}}"], "cwd": "/tmp", "env": {"A_VAR": "x {{v}}"}},
        }),
    );
    Test::new()
        .packs_dir(&packs)
        .args(["run", "envy", "--dry-run", "--arg", "v=it's"])
        .run()
        .success()
        .stdout_eq("env \"it's\"\n  cwd: /tmp\n  env: A_VAR=\"x it's\"\n  timeout: 30s\n  tier: read_only\n  sandbox: writes only to its private TMPDIR; credential stores unreadable; no network, no abstract Unix socket; signals only its own processes\n");
}

#[test]
fn dry_run_json_shape() {
    let packs = Packs::new().manifest(
        "shape",
        json!({
            "name": "shape",
            "description": "d",
            "parameters": {"v": {"type": "string"}},
            "command": {"program": "printf", "args": ["%s", "{{v}}"], "cwd": "/", "env": {"K": "{{v}}"}},
            "policy": {"timeout_secs": 9, "max_output_bytes": 4096},
        }),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "shape", "--dry-run", "--json", "--arg", "v=a b"]).run();
    out.success();
    assert_eq!(
        out.json(),
        json!({
            "argv": ["printf", "%s", "a b"],
            "command": "printf '%s' 'a b'",
            "cwd": "/",
            "env": {"K": "a b"},
            "stdin": null,
            "timeout_secs": 9,
            "max_output_bytes": 4096,
            "tier": "read_only",
            "sandbox": {"level": "enforced", "enforced": "writes only to its private TMPDIR; credential stores unreadable; no network, no abstract Unix socket; signals only its own processes"},
            "needs_approval": null,
            "denied": null,
        })
    );
}

#[test]
fn dry_run_command_is_safe_to_paste_into_a_shell() {
    let packs = Packs::new().manifest(
        "echo_all",
        printf_tool("echo_all", json!({"vs": {"type": "array", "allow_leading_dash": true}}), json!(["{{vs}}"])),
    );
    let values = json!({"vs": ["a b", "$(id)", "`id`", "'q'", "\"dq\"", "x\ny", "*", "~", "-n", "", "é🦀", "a\\b"]});
    let real = Test::new().packs_dir(&packs).args(["run", "echo_all"]).arg(values.to_string()).run();
    real.success();
    let plan =
        Test::new().packs_dir(&packs).args(["run", "echo_all", "--dry-run", "--json"]).arg(values.to_string()).run();
    let command = plan.success().json()["command"].as_str().expect("command is a string").to_owned();
    let pasted = std::process::Command::new("sh").arg("-c").arg(&command).output().unwrap();
    assert!(pasted.status.success(), "{command}");
    assert_eq!(real.stdout.strip_suffix(b"\n").unwrap(), pasted.stdout, "{command}");
}

#[test]
fn each_block_over_an_omitted_optional_parameter_renders_nothing() {
    let packs = one(
        "each",
        json!({"tags": {"type": "array", "items": {"type": "string"}}}),
        json!(["A", "--tags={{#each tags}}{{this}},{{/each}}", "Z"]),
    );
    assert_eq!(argv(&packs, "each", json!({"tags": ["x", "y"]})), ["A", "--tags=x,y,", "Z"]);
    assert_eq!(argv(&packs, "each", json!({})), ["A", "--tags=", "Z"]);
}

#[test]
fn eq_helper_on_an_omitted_optional_parameter_is_false() {
    let packs = one(
        "fmt",
        json!({"format": {"type": "string", "enum": ["json", "text"]}}),
        json!(["A", "{{#if (eq format \"json\")}}--json{{else}}--text{{/if}}"]),
    );
    assert_eq!(argv(&packs, "fmt", json!({"format": "json"})), ["A", "--json"]);
    assert_eq!(argv(&packs, "fmt", json!({})), ["A", "--text"]);
}

#[test]
fn env_placeholders_read_the_operators_environment() {
    let packs = one(
        "api",
        json!({"path": {"type": "string"}}),
        json!(["{{env.PACKS_TEST_API:https://default.example}}/{{path}}"]),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "api", "--arg", "path=x"]).run();
    out.success();
    assert_eq!(out.argv(), ["https://default.example/x"]);
    let out = Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_API", "http://127.0.0.1:1")
        .args(["run", "api", "--arg", "path=x"])
        .run();
    out.success();
    assert_eq!(out.argv(), ["http://127.0.0.1:1/x"]);
    // It is not a parameter: a call cannot set it.
    Test::new()
        .packs_dir(&packs)
        .args(["run", "api", "--arg", "PACKS_TEST_API=http://evil.example"])
        .run()
        .code(1)
        .stderr_contains("unknown argument `PACKS_TEST_API`");
}

#[test]
fn secrets_are_masked_in_dry_runs_and_results() {
    let packs = Packs::new().manifest(
        "leaky",
        json!({
            "name": "leaky",
            "description": "A careless tool that prints its token",
            "command": {
                "program": "sh",
                "args": ["-c", "echo \"token is $1 and $TOKEN\"; echo \"debug: $1\" >&2", "sh", "{{secret.PACKS_TEST_TOKEN}}"],
                "env": {"TOKEN": "{{secret.PACKS_TEST_TOKEN}}"},
            },
        }),
    );
    let secret = "tk_live_42";
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_TOKEN", secret)
        .args(["run", "leaky", "--dry-run"])
        .run()
        .success()
        .stdout_eq(
            "sh -c 'echo \"token is $1 and $TOKEN\"; echo \"debug: $1\" >&2' sh '***'\n  env: TOKEN='***'\n  timeout: 30s\n  tier: read_only\n  sandbox: writes only to its private TMPDIR; credential stores unreadable; no network, no abstract Unix socket; signals only its own processes\n",
        );
    let out = Test::new().packs_dir(&packs).env("PACKS_TEST_TOKEN", secret).args(["run", "leaky", "--json"]).run();
    out.success().stdout_lacks(secret);
    let r = out.json();
    assert_eq!(r["output"], "token is *** and ***\n");
    assert_eq!(r["stderr"], "debug: ***\n");
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_TOKEN", secret)
        .args(["run", "leaky"])
        .run()
        .success()
        .stdout_eq("token is *** and ***\n")
        .stderr_eq("debug: ***\n");
    // Unset: nothing runs, not even a dry run.
    Test::new()
        .packs_dir(&packs)
        .args(["run", "leaky", "--dry-run"])
        .run()
        .code(1)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("secret `PACKS_TEST_TOKEN` is not set");
}

#[test]
fn a_secret_is_required_only_where_the_render_reads_it() {
    let tool = |name: &str, parameters: Value, args: Value| json!({"name": name, "description": "d", "parameters": parameters, "command": {"program": "echo", "args": args}});
    let packs = Packs::new()
        .manifest(
            "branch",
            tool(
                "branch",
                json!({"stub": {"type": "boolean"}}),
                json!(["{{#if stub}}stubbed{{else}}{{secret.PACKS_T}}{{/if}}"]),
            ),
        )
        .manifest("group", tool("group", json!({}), json!([["--token", "{{secret.PACKS_T}}"]])))
        .manifest(
            "optional_group",
            tool("optional_group", json!({"o": {"type": "string"}}), json!([["--o", "{{o}}", "{{secret.PACKS_T}}"]])),
        )
        .manifest("helper", tool("helper", json!({}), json!(["{{json secret.PACKS_T}}"])))
        .manifest("encoded", tool("encoded", json!({}), json!(["{{#if true}}{{urlencode secret.PACKS_T}}{{/if}}"])));
    let run = |name: &str, args: &str| Test::new().packs_dir(&packs).args(["run", name, args]).run();
    // The branch that reads the secret is not taken: nothing is missing.
    run("branch", r#"{"stub": true}"#).success().stdout_eq("stubbed\n");
    // A group another absent name omits does not read its secret either.
    run("optional_group", "{}").success().stdout_eq("\n");
    for (name, args) in [
        ("branch", r#"{"stub": false}"#),
        ("group", "{}"),
        ("optional_group", r#"{"o": "x"}"#),
        ("helper", "{}"),
        ("encoded", "{}"),
    ] {
        run(name, args).code(1).one_line_error().stderr_contains("secret `PACKS_T` is not set");
    }
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_T", "s3cret")
        .args(["run", "branch", r#"{"stub": false}"#])
        .run()
        .success()
        .stdout_eq("***\n");
}
