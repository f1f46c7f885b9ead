//! `packs lint` over fixtures with one broken manifest per rule, every output
//! format snapshot-tested, and `packs test`.

use serde_json::json;

use crate::common::{Packs, REPO, Test};

/// Lint both fixture directories (the second is shadowed by the first) from the repo root.
fn lint_fixtures(format: &str) -> crate::common::Output {
    let out = Test::new()
        .current_dir(REPO)
        .args(["lint", "tests/fixtures/lint", "tests/fixtures/lint-shadow", "--format", format])
        .run();
    out.code(1).no_panic();
    out
}

#[test]
fn human_output() {
    insta::assert_snapshot!("lint_human", lint_fixtures("human").stdout());
}

#[test]
fn json_output() {
    let out = lint_fixtures("json");
    insta::assert_json_snapshot!("lint_json", out.json());
}

#[test]
fn github_output() {
    insta::assert_snapshot!("lint_github", lint_fixtures("github").stdout());
}

#[test]
fn sarif_output() {
    let sarif = lint_fixtures("sarif").json();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    let rules: Vec<&str> =
        run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    for result in run["results"].as_array().unwrap() {
        let id = result["ruleId"].as_str().unwrap();
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index], id, "ruleIndex points at the rule");
        assert!(matches!(result["level"].as_str(), Some("error" | "warning")));
        let location = &result["locations"][0]["physicalLocation"];
        assert!(location["artifactLocation"]["uri"].as_str().unwrap().starts_with("tests/fixtures/"));
    }
    insta::assert_json_snapshot!("lint_sarif", sarif);
}

#[test]
fn every_rule_with_a_fixture_fires_where_expected() {
    let report = lint_fixtures("json").json();
    let found: Vec<(String, String)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["file"].as_str().unwrap().to_owned()))
        .collect();
    for (code, file) in [
        ("invalid-json", "invalid-json.tool.json"),
        ("invalid-toml", "invalid-toml.tool.toml"),
        ("schema-violation", "schema-violation.tool.json"),
        ("unknown-key", "unknown-key.tool.json"),
        ("invalid-name", "invalid-name.tool.json"),
        ("empty-description", "empty-description.tool.json"),
        ("long-description", "long-description.tool.json"),
        ("duplicate-name", "duplicate-name-b.tool.json"),
        ("shadowed-name", "lint-shadow/good.tool.json"),
        ("literal-without-default", "literal-without-default.tool.json"),
        ("default-type-mismatch", "default-problems.tool.json"),
        ("default-not-in-enum", "default-problems.tool.json"),
        ("required-with-default", "default-problems.tool.json"),
        ("enum-type-mismatch", "default-problems.tool.json"),
        ("unknown-source", "unknown-source.tool.json"),
        ("invalid-pattern", "pattern-problems.tool.json"),
        ("pattern-on-non-string", "pattern-problems.tool.json"),
        ("invalid-parameter-schema", "invalid-parameter-schema.tool.json"),
        ("undeclared-placeholder", "undeclared-placeholder.tool.json"),
        ("unknown-context-key", "unknown-context-key.tool.json"),
        ("invalid-template", "invalid-template.tool.json"),
        ("unused-parameter", "template-warnings.tool.json"),
        ("optional-renders-empty", "template-warnings.tool.json"),
        ("extract-field-needs-json", "extract-field-needs-json.tool.json"),
        ("shell-injection", "shell-injection.tool.json"),
        ("option-injection", "option-injection.tool.json"),
        ("hardcoded-secret", "hardcoded-secret.tool.json"),
        ("hardcoded-secret", "hardcoded-secret-by-name.tool.json"),
        ("unused-allowance", "unused-allowance.tool.json"),
        ("unknown-key", "unused-allowance.tool.json"),
        ("implicit-read-only", "implicit-read-only.tool.json"),
        ("unconfirmed-mutation", "unconfirmed-mutation.tool.json"),
        ("program-not-found", "program-not-found.tool.json"),
        ("timeout-out-of-range", "policy-ranges.tool.json"),
        ("invalid-exit-codes", "policy-ranges.tool.json"),
        ("invalid-example", "invalid-example.tool.json"),
        ("invalid-test", "invalid-test.tool.json"),
        ("bad-describe", "lint/bad-describe"),
        ("invalid-parameters-schema", "lint/invalid-parameters-schema"),
        ("not-executable", "lint/not-executable"),
    ] {
        assert!(
            found.iter().any(|(c, f)| c == code && f.ends_with(file)),
            "expected `{code}` in {file}; found {found:#?}"
        );
    }
    // An allowance with a reason silences its rule in its own manifest only.
    assert!(!found.iter().any(|(c, f)| c == "hardcoded-secret" && f.ends_with("unused-allowance.tool.json")));
    assert_eq!(found.iter().filter(|(c, _)| c == "unused-allowance").count(), 1, "{found:#?}");
    // The clean manifest among them has nothing to say.
    assert!(!found.iter().any(|(_, f)| f == "tests/fixtures/lint/good.tool.json"), "{found:#?}");
}

#[test]
fn every_code_is_documented() {
    let docs = std::fs::read_to_string(format!("{REPO}/docs/LINT.md")).expect("docs/LINT.md");
    let mut seen = std::collections::BTreeSet::new();
    for code in packs::lint::Code::ALL {
        let name = code.as_str();
        assert!(seen.insert(name), "two codes are named `{name}`");
        assert_eq!(name.parse(), Ok(*code));
        assert!(!code.description().is_empty(), "`{name}` has no description");
        assert!(docs.contains(&format!("id=\"{name}\"")), "docs/LINT.md has no section for `{name}`");
        assert!(docs.contains(&format!("| [`{name}`](#{name}) |")), "docs/LINT.md's table has no row for `{name}`");
    }
    // Every section documents a code packs has (none is left over from a removed rule).
    for anchor in docs.split("<a id=\"").skip(1).filter_map(|s| s.split('"').next()) {
        if docs.contains(&format!("### `{anchor}`")) {
            assert!(anchor.parse::<packs::lint::Code>().is_ok(), "docs/LINT.md documents `{anchor}`, which is no code");
        }
    }
}

#[test]
fn the_tool_packs_spec_examples_have_no_errors() {
    let out = Test::new().current_dir(REPO).args(["lint", "tests/fixtures/spec-examples", "--format", "json"]).run();
    out.success();
    assert_eq!(out.json()["summary"]["errors"], 0, "{}", out.stdout());
    assert_eq!(out.json()["summary"]["tools"], 4);
}

#[test]
fn bundled_packs_have_no_errors() {
    let out = Test::new().current_dir(REPO).args(["lint", "packs"]).run();
    out.success().stdout_contains("0 errors");
}

#[test]
fn exit_codes() {
    // Warnings pass unless --deny-warnings.
    let warn = Packs::new()
        .manifest("w", json!({"name": "w", "description": "d", "command": "true", "policy": {"timeout_secs": 0}}));
    Test::new().args(["lint"]).arg(warn.path()).run().success().stdout_contains("0 errors, 1 warning");
    Test::new().args(["lint", "--deny-warnings"]).arg(warn.path()).run().code(1);
    // Lint itself cannot run.
    Test::new().args(["lint", "no/such/dir"]).run().code(2).stderr_contains("no/such/dir").no_panic();
    Test::new().args(["lint", "--format", "yaml"]).run().code(1).no_panic();
    // --strict makes a missing program an error.
    let missing =
        Packs::new().manifest("m", json!({"name": "m", "description": "d", "command": "surely-not-installed-xyz"}));
    Test::new().args(["lint"]).arg(missing.path()).run().success();
    Test::new().args(["lint", "--strict"]).arg(missing.path()).run().code(1).stdout_contains("program-not-found");
}

#[test]
fn default_paths_are_the_search_path() {
    let packs = Packs::new().manifest("x", json!({"name": "Bad", "description": "d", "command": "true"}));
    Test::new().env("PACKS_PATH", packs.path()).args(["lint"]).run().code(1).stdout_contains("invalid-name");
    Test::new().arg("--packs").arg(packs.path()).args(["lint"]).run().code(1).stdout_contains("invalid-name");
}

#[test]
fn packs_test_passes_on_the_bundled_packs() {
    let out = Test::new().current_dir(REPO).args(["test"]).run();
    out.success();
    let last = out.stdout().lines().last().unwrap_or_default().to_owned();
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
    for line in out.stdout().lines().filter(|l| !l.ends_with(" failed")) {
        assert!(line.starts_with("PASS "), "{line}");
    }
}

#[test]
fn packs_test_reports_failures_with_expected_and_got() {
    let packs = Packs::new().manifest(
        "echoer",
        json!({
            "name": "echoer",
            "description": "echo",
            "parameters": {"w": {"type": "string", "required": true}},
            "command": "echo -- {{w}}",
            "tests": [
                {"name": "right", "args": {"w": "hi"}, "expect": {"output_equals": "-- hi", "exit_code": 0, "ok": true}},
                {"name": "wrong output", "args": {"w": "hi"}, "expect": {"output_equals": "bye"}},
                {"name": "wrong argv", "dry_run": true, "args": {"w": "a"}, "expect": {"argv": ["echo", "a"]}},
                {"name": "validation", "args": {}, "expect": {"error": "validation"}},
                {"name": "unexpected error", "args": {"x": 1}, "expect": {"ok": true}},
                {"name": "dry run cannot check output", "dry_run": true, "args": {"w": "a"}, "expect": {"ok": true}}
            ]
        }),
    );
    let out = Test::new().arg("--packs").arg(packs.path()).args(["test"]).run();
    out.code(1)
        .stdout_contains("PASS echoer / right\n")
        .stdout_contains("FAIL echoer / wrong output\n    output\n      expected: \"bye\"\n      got:      \"-- hi\\n\"\n")
        .stdout_contains("FAIL echoer / wrong argv\n    argv\n      expected: [\"echo\", \"a\"]\n      got:      [\"echo\", \"--\", \"a\"]\n")
        .stdout_contains("PASS echoer / validation\n")
        .stdout_contains("FAIL echoer / unexpected error\n")
        .stdout_contains("FAIL echoer / dry run cannot check output\n    expectations a dry run can check\n")
        .stdout_contains("\n2 passed, 4 failed\n");
    Test::new()
        .arg("--packs")
        .arg(packs.path())
        .args(["test", "nope"])
        .run()
        .code(1)
        .stderr_contains("no tool named `nope`");
}

#[test]
fn a_mistake_inside_a_command_object_is_named_not_a_one_of_failure() {
    // `command` is a string or an object; lint reports what is wrong with the form used.
    let packs = Packs::new()
        .manifest("typo", json!({"name": "typo", "description": "d", "command": {"program": "echo", "argz": ["hi"]}}))
        .manifest("no_program", json!({"name": "no_program", "description": "d", "command": {"args": ["a"]}}))
        .manifest("number", json!({"name": "number", "description": "d", "command": 42}));
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    let report = out.json();
    let found: Vec<(String, String, String)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let field = d["field"].as_str().unwrap_or_default().to_owned();
            (d["code"].as_str().unwrap().to_owned(), field, d["message"].as_str().unwrap().to_owned())
        })
        .collect();
    assert!(
        found.contains(&(
            "unknown-key".into(),
            "command.argz".into(),
            "unknown key `argz` in `command`: packs would ignore it, so the file is refused".into()
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            "schema-violation".into(),
            "command".into(),
            "`command`: \"program\" is a required property".into()
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            "schema-violation".into(),
            "command".into(),
            "`command` must be string or object, not 42".into()
        )),
        "{found:?}"
    );
    assert!(!out.stdout().contains("oneOf"), "{}", out.stdout());
}

#[test]
fn a_parameter_may_not_take_a_name_templates_read_as_something_else() {
    // A parameter named `secret` rendered `{{secret}}` as the map of the secrets the
    // templates read (`{"TOKEN":"..."}`) into argv; `env` and `context` likewise, and
    // `{{#if null}}` was never true. Loading refuses these names, and lint says why.
    for name in ["context", "env", "secret", "this", "true", "false", "null", "else"] {
        let packs = Packs::new().manifest(
            "t",
            json!({
                "name": "t", "description": "d",
                "parameters": {name: {"type": "string", "default": "fallback"}},
                "command": {"program": "echo", "args": [format!("{{{{{name}}}}}"), "{{secret.TOKEN}}"]}
            }),
        );
        let run = Test::new().env("TOKEN", "hunter2").arg("--packs").arg(packs.path()).args(["run", "t"]).run();
        run.no_panic().stderr_contains("invalid-parameter-name").stderr_contains("reserved");
        run.stdout_lacks("hunter2").stderr_lacks("hunter2");
        let lint = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
        let first = &lint.json()["diagnostics"][0];
        assert_eq!(first["code"], "invalid-parameter-name", "{name}: {}", lint.stdout());
        assert_eq!(first["field"], format!("parameters.{name}"));
        assert!(first["message"].as_str().unwrap().contains("is reserved"), "{}", first["message"]);
    }
    // Names that merely contain one are fine.
    let packs = Packs::new().manifest(
        "t",
        json!({"name": "t", "description": "d", "parameters": {"env_name": {"type": "string", "default": "v"}},
               "command": {"program": "echo", "args": ["{{env_name}}"]}}),
    );
    Test::new().arg("--packs").arg(packs.path()).args(["run", "t"]).run().success().stdout_contains("v");
}

/// The security codes lint reports for one manifest with this `command`.
fn codes_for(command: serde_json::Value) -> Vec<String> {
    let packs = Packs::new().manifest(
        "t",
        json!({"name": "t", "description": "d", "parameters": {"x": {"type": "string"}}, "command": command}),
    );
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    let mut codes: Vec<String> =
        out.json()["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect();
    codes.retain(|c| c == "shell-injection" || c == "implicit-read-only");
    codes
}

#[test]
fn wrappers_are_seen_through() {
    // xargs runs a program: its arguments are arguments, not code...
    assert_eq!(
        codes_for(json!({"program": "xargs", "args": ["-0", "grep", "-l", "--", "{{x}}"]})),
        Vec::<String>::new()
    );
    // ...unless that program is a shell, or the model chooses it.
    assert_eq!(
        codes_for(json!({"program": "xargs", "args": ["-I", "{}", "sh", "-c", "echo {{x}}"]})),
        ["shell-injection"]
    );
    assert_eq!(codes_for(json!({"program": "xargs", "args": ["-n", "1", "{{x}}"]})), ["shell-injection"]);
    assert_eq!(
        codes_for(json!({"program": "env", "args": ["-i", "LANG=C", "nice", "-n", "5", "bash", "-lc", "{{x}}"]})),
        ["shell-injection"]
    );
    assert_eq!(codes_for(json!({"program": "env", "args": ["LANG=C", "{{x}}"]})), ["shell-injection"]);
}

#[test]
fn mutators_are_found_past_global_options_and_attached_suffixes() {
    for command in [
        json!({"program": "git", "args": ["-C", "{{x}}", "commit", "-m", "m"]}),
        json!({"program": "git", "args": ["-c", "user.name=x", "push"]}),
        json!({"program": "kubectl", "args": ["-n", "prod", "delete", "pod", "{{x}}"]}),
        json!({"program": "sed", "args": ["-i.bak", "s/a/b/", "{{x}}"]}),
        json!({"program": "sed", "args": ["-ni", "p", "{{x}}"]}),
        json!({"program": "sed", "args": ["--in-place=.orig", "s/a/b/", "{{x}}"]}),
    ] {
        assert_eq!(codes_for(command.clone()), ["implicit-read-only"], "{command}");
    }
    for command in [
        json!({"program": "git", "args": ["-C", "{{x}}", "log", "--oneline"]}),
        json!({"program": "sed", "args": ["-n", "-e", "s/i/j/p", "{{x}}"]}),
        json!({"program": "sed", "args": ["-E", "s/a/b/", "{{x}}"]}),
    ] {
        assert_eq!(codes_for(command.clone()), Vec::<String>::new(), "{command}");
    }
}

/// Load and lint `bytes` as a manifest, rendering the report in every format: whatever the
/// bytes, nothing panics.
fn load_and_lint(dir: &std::path::Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let catalog = packs::Catalog::load(&packs::SearchPath::dirs([dir]));
    for d in &catalog.diagnostics {
        let _ = d.to_string();
    }
    let report = packs::lint::lint(std::slice::from_ref(&path), &packs::lint::Options::default()).unwrap();
    for format in packs::lint::render::Format::ALL {
        let _ = packs::lint::render::render(&report, *format);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn text_cut_inside_a_character_is_reported_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cut.tool.json"), "{\"name\": \"x\", \"description\": \"é".as_bytes()).unwrap();
    let out = Test::new().args(["lint"]).arg(dir.path().join("cut.tool.json")).run();
    out.code(1).stdout_contains("invalid-json").no_panic();
}

#[test]
fn thousands_of_warnings_in_one_file_render_in_linear_time() {
    let params: serde_json::Map<String, serde_json::Value> =
        (0..2000).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    let packs = Packs::new()
        .manifest("many", json!({"name": "many", "description": "d", "parameters": params, "command": "true"}));
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    out.success();
    // Every warning is located, the last parameter's too (that the lookups stay linear is
    // counted in source.rs: a file looked up thousands of times is scanned at most five times).
    let report = out.json();
    let diagnostics = report["diagnostics"].as_array().unwrap_or_else(|| panic!("{report}"));
    assert_eq!(diagnostics.len(), 2000, "{report}");
    assert!(diagnostics.iter().all(|d| d["line"].as_u64().is_some()), "{report}");
}

#[test]
fn arbitrary_and_mutated_manifests_never_panic_load_or_lint() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let dir = tempfile::tempdir().unwrap();
    let valid = serde_json::to_vec_pretty(&json!({
        "name": "echo_é", "description": "Say ünïcode back ✓", "parameters": {"w": {"type": "string", "default": "ø"}},
        "command": {"program": "echo", "args": ["--", "{{w}}", "{{#if w}}x{{/if}}"]}, "policy": {"timeout_secs": 5}
    }))
    .unwrap();
    let toml =
        b"name = \"t\"\ndescription = \"d \xc3\xa9\"\ncommand = \"echo {{x}}\"\n[parameters.x]\ntype = \"string\"\n"
            .to_vec();
    let mut runner = TestRunner::new(Config { cases: 200, failure_persistence: None, ..Config::default() });
    // Arbitrary bytes, as JSON and as TOML.
    runner
        .run(&proptest::collection::vec(any::<u8>(), 0..300), |bytes| {
            load_and_lint(dir.path(), "any.tool.json", &bytes);
            load_and_lint(dir.path(), "any.tool.toml", &bytes);
            Ok(())
        })
        .unwrap();
    // Valid manifests cut at any byte (inside characters too), or with one byte changed.
    for base in [(&valid, "m.tool.json"), (&toml, "m.tool.toml")] {
        let (bytes, name) = base;
        for cut in 0..bytes.len() {
            load_and_lint(dir.path(), name, &bytes[..cut]);
        }
        runner
            .run(&(0..bytes.len(), any::<u8>()), |(at, byte)| {
                let mut changed = bytes.clone();
                changed[at] = byte;
                load_and_lint(dir.path(), name, &changed);
                Ok(())
            })
            .unwrap();
    }
}

/// The `option-injection` fields lint reports for one manifest, with their messages.
fn option_warnings(parameters: serde_json::Value, command: serde_json::Value) -> Vec<(String, String)> {
    let packs = Packs::new()
        .manifest("t", json!({"name": "t", "description": "d", "parameters": parameters, "command": command}));
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    out.no_panic();
    out.json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "option-injection")
        .map(|d| (d["field"].as_str().unwrap_or_default().to_owned(), d["message"].as_str().unwrap().to_owned()))
        .collect()
}

fn option_fields(parameters: serde_json::Value, command: serde_json::Value) -> Vec<String> {
    let mut fields: Vec<String> = option_warnings(parameters, command).into_iter().map(|(f, _)| f).collect();
    fields.sort();
    fields
}

#[test]
fn option_injection_is_flagged_in_every_shape_the_run_time_refuses() {
    let s = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let cmd = |args: serde_json::Value| json!({"program": "prog", "args": args});
    let cases: Vec<(serde_json::Value, serde_json::Value, Vec<&str>)> = vec![
        (json!({"v": s}), cmd(json!([["{{v}}"]])), vec!["command.args.0.0"]),
        (json!({"v": s}), cmd(json!([["--name", "{{v}}"]])), vec!["command.args.0.1"]),
        (json!({"v": s}), cmd(json!(["-l", "{{v}}"])), vec!["command.args.1"]),
        (json!({"a": s, "b": s}), cmd(json!(["{{a}}{{b}}"])), vec!["command.args.0", "command.args.0"]),
        (json!({"n": {"type": "integer"}}), cmd(json!(["{{n}}"])), vec!["command.args.0"]),
        (json!({"vs": strings}), cmd(json!(["{{vs}}"])), vec!["command.args.0"]),
        (json!({"vs": strings}), cmd(json!(["{{#each vs}}{{this}}{{/each}}"])), vec!["command.args.0"]),
        (json!({"v": s, "f": {"type": "boolean"}}), cmd(json!(["{{#if f}}{{v}}{{/if}}"])), vec!["command.args.0"]),
        (json!({}), cmd(json!(["{{context.selection}}"])), vec!["command.args.0"]),
        (json!({"d": s}), json!({"program": "find", "args": ["--", "{{d}}"]}), vec!["command.args.1"]),
        // Guarded or unable to start with `-`: nothing to say.
        (json!({"v": s}), cmd(json!(["--", "{{v}}"])), vec![]),
        (json!({"v": s}), cmd(json!(["x{{v}}", "--name={{v}}"])), vec![]),
        (json!({"n": {"type": "integer", "minimum": 0}}), cmd(json!(["{{n}}"])), vec![]),
        (json!({"v": {"type": "string", "pattern": "^[a-z]+$"}}), cmd(json!(["{{v}}"])), vec![]),
        (json!({"v": {"type": "string", "enum": ["a", "b"]}}), cmd(json!(["{{v}}"])), vec![]),
        (json!({"b": {"type": "boolean"}}), cmd(json!(["{{b}}"])), vec![]),
        (json!({"v": s}), json!({"program": "sh", "args": ["-c", "printf '%s' \"$1\"", "sh", "{{v}}"]}), vec![]),
        (json!({"v": s}), json!({"program": "python3", "args": ["-c", "import sys", "{{v}}"]}), vec![]),
        (json!({"v": {"type": "string", "allow_leading_dash": true}}), cmd(json!(["-m", "{{v}}"])), vec![]),
    ];
    for (parameters, command, expected) in cases {
        assert_eq!(option_fields(parameters.clone(), command.clone()), expected, "{parameters} {command}");
    }
    // `allow_leading_dash` on a value that is not an option's value is itself the hole.
    let w = option_warnings(json!({"v": {"type": "string", "allow_leading_dash": true}}), cmd(json!(["{{v}}"])));
    assert!(w[0].1.contains("sets `allow_leading_dash` but is not an option's value"), "{w:?}");
    let w = option_warnings(json!({"v": s}), cmd(json!(["--name", "{{v}}"])));
    assert!(w[0].1.contains("follows `--name` (its value, if `--name` takes one)"), "{w:?}");
    let w = option_warnings(json!({"d": s}), json!({"program": "find", "args": ["--", "{{d}}"]}));
    assert!(w[0].1.contains("even after `--`"), "{w:?}");
}

#[test]
fn human_output_of_many_files_keeps_their_order_and_never_shows_a_secrets_line() {
    // Enough files for the diagnostics to be rendered on all cores; one with a credential,
    // and two declaring one name (that diagnostic comes after the others: a second run
    // of the same file's diagnostics).
    let token = "EXAMPLEexampleEXAMPLEexample0000";
    let mut packs = Packs::new();
    for i in 0..70 {
        let dashed = json!({"pattern": {"type": "string", "required": true}});
        let command = json!({"program": "grep", "args": ["-e", "{{pattern}}", "--", "."]});
        packs = packs.manifest(
            &format!("t{i:02}"),
            json!({"name": format!("t{i:02}"), "description": "d", "parameters": dashed, "command": command}),
        );
    }
    let secret = json!({"program": "true", "args": ["--header", format!("Authorization: Bearer {token}")]});
    // A manifest on one line: every diagnostic of it points at the secret's line.
    let one_line = json!({"name": "one_line", "description": "d", "extra": 1, "command": secret});
    packs = packs
        .manifest("t30b", json!({"name": "t30", "description": "d", "command": "true"}))
        .manifest("t50b", json!({"name": "secret_tool", "description": "d", "command": secret}))
        .file("t60b.tool.json", &one_line.to_string());
    let human = Test::new().args(["lint"]).arg(packs.path()).run();
    human.code(1).no_panic();
    let human = human.stdout();
    assert!(!human.contains(token), "{human}");
    let json = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run().json();
    let expected: Vec<String> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{}:{}:{}", d["file"].as_str().unwrap(), d["line"], d["column"]))
        .collect();
    // Where each diagnostic is, in the order shown: `┌─ file:line:col` beside a source
    // line, `--> file:line:col` where the line is not shown.
    let shown: Vec<String> = human
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("┌─ ").or_else(|| l.trim_start().strip_prefix("--> ")))
        .map(str::to_owned)
        .collect();
    assert_eq!(shown, expected);
    assert!(expected.len() >= 72, "{expected:?}");
    assert!(human.contains("hardcoded-secret") && human.contains("duplicate-name"), "{human}");
    assert!(human.contains("t60b.tool.json:1:") && human.contains("unknown-key"), "{human}");
}

#[test]
fn no_output_format_repeats_a_hardcoded_secret_in_another_diagnostic() {
    // The optional-renders-empty warning quotes its template, which here holds a token.
    let token = "EXAMPLEexampleEXAMPLEexample0000";
    let packs = Packs::new().manifest(
        "quoted",
        json!({
            "name": "quoted", "description": "d",
            "parameters": {"suffix": {"type": "string"}},
            "command": {"program": "curl", "args": ["-H", format!("Authorization: Bearer {token}{{{{suffix}}}}"), "--", "https://example.invalid"]}
        }),
    );
    for format in ["human", "json", "github", "sarif"] {
        let out = Test::new().args(["lint", "--format", format]).arg(packs.path()).run();
        out.code(1).no_panic();
        let text = out.stdout();
        assert!(text.contains("hardcoded-secret") && text.contains("optional-renders-empty"), "{format}: {text}");
        assert!(!text.contains(token), "{format}: {text}");
    }
}

/// An agent `a` (mode `Global`, `denied` in its deny list) whose soul and context modules
/// name tools in several ways, and the pack directory it takes its tools from.
fn agent_naming_tools() -> (Test, Packs) {
    let tool =
        |name: &str, modes: &[&str]| json!({"name": name, "description": "d", "modes": modes, "command": "true"});
    let packs = Packs::new()
        .manifest("coding_only", tool("coding_only", &["Coding"]))
        .manifest("everywhere", tool("everywhere", &[]))
        .manifest("denied", tool("denied", &["Global"]));
    let test = Test::new()
        .write("agents/a/agent.toml", "mode = \"Global\"\ndeny = [\"denied\"]\n")
        // Line 2 names a tool it is offered, a word that is no tool, and one it is not offered.
        .write("agents/a/soul.md", "# Soul\nUse `everywhere`, read `output`, and ``coding_only``.\n")
        // Prose and fenced code are not mentions; an inline span after a fence is.
        .write(
            "agents/a/context/1.md",
            "coding_only in prose.\n```\n`coding_only`\n```\nThen `coding_only` twice: `coding_only`.\n",
        )
        // A skill: its frontmatter is not part of the prompt, its body is.
        .write("agents/a/context/sk/SKILL.md", "---\nname: sk\ndescription: uses `denied`\n---\nCall `denied`.\n");
    (test, packs)
}

#[test]
fn unoffered_tool_is_reported_where_the_prompt_names_it() {
    let (test, packs) = agent_naming_tools();
    let out = test.arg("--packs").arg(packs.path()).args(["lint", "agents/a", "--format", "json"]).run();
    let found: Vec<(String, String, u64, u64)> = out.success().json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let file = d["file"].as_str().unwrap().to_owned();
            (d["code"].as_str().unwrap().to_owned(), file, d["line"].as_u64().unwrap(), d["column"].as_u64().unwrap())
        })
        .collect();
    let at = |file: &str, line, column| ("unoffered-tool".to_owned(), file.to_owned(), line, column);
    assert_eq!(
        found,
        [at("agents/a/soul.md", 2, 40), at("agents/a/context/1.md", 5, 7), at("agents/a/context/sk/SKILL.md", 5, 7)]
    );
    let messages = out.json()["diagnostics"].to_string();
    assert!(messages.contains("its `modes` (Coding) leave out the agent's mode `Global`"), "{messages}");
    assert!(messages.contains("its `tools` and `deny` lists leave it out"), "{messages}");
}

#[test]
fn unoffered_tool_is_checked_for_the_agent_model_commands_act_for() {
    let (test, packs) = agent_naming_tools();
    let dir = test.path().to_owned();
    std::fs::rename(dir.join("agents/a"), dir.join("agents/default")).unwrap();
    let lint = |extra: &[&str]| {
        Test::new()
            .current_dir(&dir)
            .arg("--packs")
            .arg(packs.path())
            .args(extra)
            .args(["lint", "--format", "json"])
            .run()
    };
    // Without a PATH: the pack directories and the default agent.
    let out = lint(&[]);
    let codes = |out: &crate::common::Output| -> Vec<String> {
        out.json()["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(codes(out.success()), ["unoffered-tool"; 3]);
    assert_eq!(out.json()["summary"]["files"], 4, "three manifests and the skill");
    // Where the agent offers every tool, nothing is reported.
    std::fs::write(dir.join("agents/default/agent.toml"), "").unwrap();
    assert_eq!(codes(lint(&[]).success()), Vec::<String>::new());
    std::fs::write(dir.join("agents/default/agent.toml"), "tools = [\"everywhere\"]\n").unwrap();
    assert_eq!(codes(lint(&[]).success()).len(), 3);
    // `--agent none`: no agent to check; `--deny-warnings` fails on the warning.
    assert_eq!(codes(lint(&["--agent", "none"]).success()), Vec::<String>::new());
    lint(&[]).code(0);
    let out = Test::new().current_dir(&dir).arg("--packs").arg(packs.path()).args(["lint", "--deny-warnings"]).run();
    out.code(1).stdout_contains("warning[unoffered-tool]");
    drop(test);
}

#[test]
fn the_bundled_checkout_lints_clean() {
    // Clean but for what this machine lacks: `summarize_url` runs `npx`, which a machine with
    // only the Rust toolchain does not have.
    let out = Test::new().current_dir(REPO).args(["lint", "--format", "json"]).run();
    let report = out.success().json();
    assert_eq!(report["summary"]["tools"], 10, "{report}");
    for d in report["diagnostics"].as_array().unwrap() {
        assert_eq!(d["code"], "program-not-found", "{d}");
        assert_eq!(d["message"], "`npx` is not on PATH here", "{d}");
    }
    Test::new()
        .current_dir(REPO)
        .args(["lint", "agents/default"])
        .run()
        .success()
        .stdout_eq("checked 0 files (0 tools): 0 errors, 0 warnings\n");
}

#[test]
fn an_unknown_key_at_any_level_is_an_error_with_a_did_you_mean_and_the_rules_still_run() {
    let toml = "name = \"typo\"\ndescription = \"d\"\ncommand = \"echo ok\"\n\n[polcy]\ntimeout_secs = 5\n\n\
                [[tests]]\nname = \"t\"\n\n[tests.expect]\noutput = \"ok\"\n";
    let json = json!({
        "$schema": "https://example.com/tool-pack.v1.json",
        "name": "typo_json",
        "description": "d",
        "parameters": {"who": {"type": "string", "requird": true}},
        "command": {"program": "echo", "args": ["--", "{{who}}"]},
        "output": {"formt": "text"},
    });
    let packs = Packs::new().file("typo.tool.toml", toml).manifest("typo_json", json);
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    out.code(1);
    let report = out.json();
    let found: Vec<(String, String, String, String)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "unknown-key")
        .map(|d| {
            let text = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
            (text("severity"), text("field"), text("help"), format!("{}:{}", d["line"], d["column"]))
        })
        .collect();
    let e = |field: &str, help: &str, at: &str| ("error".to_owned(), field.to_owned(), help.to_owned(), at.to_owned());
    assert_eq!(
        found,
        [
            e("tests.0.expect.output", "did you mean `output_equals`?", "12:1"),
            e("polcy", "did you mean `policy`?", "5:2"),
            e("parameters.who.requird", "did you mean `required`?", "8:7"),
            e("output.formt", "did you mean `format`?", "19:5"),
        ],
        "{report:#}"
    );
    // Neither file is a tool, and nothing else is wrong with them.
    assert_eq!(report["summary"]["tools"], 0, "{report:#}");
    assert_eq!(report["summary"]["errors"], 4, "{report:#}");
}

#[test]
fn a_manifest_without_the_tool_infix_is_named_with_its_new_name() {
    let g = "{\n  \"name\": \"g\",\n  \"description\": \"Greet\",\n  \"command\": \"echo hi\"\n}\n";
    let toml = "name = \"h\"\ndescription = \"d\"\ncommand = \"echo\"\n[parameters.x]\ntype = \"string\"\n";
    // Not taken for manifests: data, a broken file, an executable's describe answer (no
    // `command`), and a file too large to be a manifest (not read through on every load).
    let describe = json!({"name": "d", "description": "d", "parameters": {"type": "object"}});
    let big = json!({"name": "big", "command": "true", "rows": "x".repeat(70_000)});
    let packs = Packs::new()
        .file("g.json", g)
        .file("sub/h.toml", toml)
        .file("data.json", "{\"name\": \"not a tool\"}")
        .file("describe.json", &describe.to_string())
        .file("big.json", &big.to_string())
        .file("broken.json", "{\"name\": ");
    let dir = packs.path().display().to_string();
    let out = Test::new().args(["lint", "--format", "github"]).arg(packs.path()).run();
    out.success().stdout_eq(&format!(
        "::warning file={dir}/g.json,title=packs lint%3A misnamed-manifest::this looks like a tool manifest, but packs loads only files named *.tool.json or *.tool.toml, so it is not loaded%0Ahelp: rename g.json to g.tool.json\n\
         ::warning file={dir}/sub/h.toml,title=packs lint%3A misnamed-manifest::this looks like a tool manifest, but packs loads only files named *.tool.json or *.tool.toml, so it is not loaded%0Ahelp: rename h.toml to h.tool.toml\n\
         checked 0 files (0 tools): 0 errors, 2 warnings\n"
    ));
    // Loading says so on stderr; `list`'s stdout is the same table.
    let list = Test::new().packs_dir(&packs).arg("list").run();
    list.success().stdout_eq("NAME  KIND  READ-ONLY  DESCRIPTION  SOURCE\n");
    list.stderr_contains(&format!("warning[misnamed-manifest]: {dir}/g.json: this looks like a tool manifest"));
    list.stderr_contains("(help: rename h.toml to h.tool.toml)");
    // A call looks up one name: it reads no data file around it, and says nothing of them.
    Test::new().packs_dir(&packs).args(["run", "g"]).run().code(1).stderr_lacks("misnamed-manifest");
    // Named alone, the file gets the same help.
    Test::new().arg("lint").arg(packs.join("g.json")).run().code(2).stderr_contains("(rename g.json to g.tool.json)");
}

#[test]
fn a_misspelled_keyword_inside_items_or_schema_is_an_unknown_key() {
    // JSON Schema ignores keys it does not know: `patern` in `items` would check nothing
    // (found by review, where `packs new` writes its `pattern`).
    let m = json!({"name": "t", "description": "d", "command": "echo {{x}} {{y}}", "parameters": {
        "x": {"type": "array", "items": {"type": "string", "patern": "^[^-]"}},
        "y": {"type": "object", "schema": {"properties": {"a": {"type": "string", "maxLenght": 3}},
               "required": ["a"], "additionalProperties": false}}}});
    let packs = Packs::new().manifest("t", m);
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    let report = out.code(1).json();
    let found: Vec<(String, String)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "unknown-key")
        .map(|d| (d["field"].as_str().unwrap().to_owned(), d["help"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        found,
        [
            ("parameters.x.items.patern".to_owned(), "did you mean `pattern`?".to_owned()),
            ("parameters.y.schema.properties.a.maxLenght".to_owned(), "did you mean `maxLength`?".to_owned()),
        ],
        "{report:#}"
    );
    // And the tool is not loaded.
    Test::new().packs_dir(packs.path()).args(["run", "t", "--arg", "x=a"]).run().code(1).stderr_contains("unknown-key");
}

/// `parameters` written as a JSON Schema (as in OpenAI's and MCP's definitions) is one
/// error that says so and how to write it, from lint and from loading, in JSON and TOML;
/// not what the schema says of `type`, `properties` and `required` read as parameters.
#[test]
fn parameters_written_as_a_json_schema_is_one_clear_error() {
    let packs = Packs::new()
        .manifest(
            "t",
            json!({"name": "t", "description": "d", "command": {"program": "echo", "args": ["--", "{{a}}"]},
                   "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}),
        )
        .file(
            "u.tool.toml",
            "name = \"u\"\ndescription = \"d\"\ncommand = \"echo {{a}}\"\n[parameters]\ntype = \"object\"\n[parameters.properties.a]\ntype = \"string\"\n",
        );
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    out.code(1).no_panic();
    let diagnostics = out.json()["diagnostics"].as_array().unwrap().clone();
    let said: Vec<(&str, &str, &str)> = diagnostics
        .iter()
        .map(|d| (d["file"].as_str().unwrap(), d["field"].as_str().unwrap(), d["message"].as_str().unwrap()))
        .collect();
    assert_eq!(said.len(), 2, "one error per file: {said:#?}");
    for (file, field, message) in said {
        assert!(file.ends_with("t.tool.json") || file.ends_with("u.tool.toml"), "{file}");
        assert_eq!(field, "parameters");
        assert!(message.contains("is written as a JSON Schema"), "{message}");
    }
    let dir = packs.path().to_owned();
    let out = Test::new().packs_dir(&dir).args(["run", "t", r#"{"a": "x"}"#]).run();
    out.code(1).no_panic();
    out.stderr_contains("t.tool.json:11:").stderr_contains("`parameters` is written as a JSON Schema");
    out.stderr_lacks("expected struct");
    // Not found, because its file did not load: said after the error.
    out.stderr_contains("error: no tool named `t`\nnote: ").stderr_contains("t.tool.json failed to load (above)");
    let out = Test::new().packs_dir(&dir).args(["run", "u", r#"{"a": "x"}"#]).run();
    out.code(1).no_panic();
    out.stderr_contains("u.tool.toml:4:").stderr_contains("move the entries of `properties` up");
    out.stderr_lacks("expected struct");
}

/// serde's Rust type names never reach a person: a parameter that is not a table says
/// what was expected in the manifest's terms.
#[test]
fn a_parameter_that_is_not_an_object_names_no_rust_type() {
    let packs = Packs::new()
        .manifest("t", json!({"name": "t", "description": "d", "command": "echo", "parameters": {"a": "string"}}));
    let out = Test::new().with_packs(packs).args(["run", "t", "{}"]).run();
    out.code(1).no_panic();
    out.stderr_contains("`parameters.a`: invalid type: string \"string\", expected a parameter's spec");
    out.stderr_lacks("struct");
}

#[test]
fn a_long_else_if_chain_is_a_load_error_not_a_stack_overflow() {
    // Each `{{else if}}` link renders inside the one before: 5,000 of them would overflow
    // the stack of `packs run`, `packs lint` (and take a whole `packs serve` down).
    let chain = format!("{{{{#if a}}}}x{}{{{{/if}}}}", "{{else if a}}y".repeat(5000));
    let packs = Packs::new().manifest(
        "chain",
        json!({"name": "chain", "description": "d", "parameters": {"a": {"type": "boolean"}}, "command": {"program": "echo", "args": [chain]}}),
    );
    Test::new()
        .args(["lint"])
        .arg(packs.path())
        .run()
        .code(1)
        .no_panic()
        .stdout_contains("`{{else if}}` links nested more than 64 deep");
    Test::new()
        .packs_dir(&packs)
        .args(["run", "chain", "--dry-run", r#"{"a": false}"#])
        .run()
        .no_panic()
        .stderr_contains("`{{else if}}` links nested more than 64 deep");
}
