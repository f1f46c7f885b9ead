//! Wrapper programs (`env`, `nice`, `timeout`...) and the option guard: a wrapper's own
//! options and its `--` end where the program it runs is named, so the guard applies to
//! the wrapped program's operands (issue 29, item 2).

use serde_json::{Value, json};

use crate::common::{Packs, Test};

/// The 11 forms the review found: each runs `sort {{f}}` through a wrapper, most with a
/// `--` that belongs to the wrapper.
const FORMS: &[&[&str]] = &[
    &["env", "--"],
    &["env", "-i", "--"],
    &["env", "-i", "LC_ALL=C"],
    &["nice", "-n", "5", "--"],
    &["timeout", "--", "10"],
    &["stdbuf", "-oL", "--"],
    &["setsid", "--"],
    &["nohup", "--"],
    &["xargs", "-0", "--"],
    &["ionice", "-c", "3", "--"],
    &["flock", "--", "/tmp/packs-lock"],
    &["busybox"],
];

fn manifest(form: &[&str], tail: &[&str]) -> Value {
    let mut args: Vec<&str> = form[1..].to_vec();
    args.push("sort");
    args.extend(tail);
    json!({
        "name": "wrapped",
        "description": "Sort a file through a wrapper",
        "parameters": { "f": { "type": "string", "required": true } },
        "command": { "program": form[0], "args": args },
    })
}

#[test]
fn a_value_after_a_wrappers_double_dash_is_still_refused_as_an_option() {
    for form in FORMS {
        let packs = Packs::new().manifest("wrapped", manifest(form, &["{{f}}"]));
        let out =
            Test::new().packs_dir(&packs).args(["run", "wrapped", "--dry-run", "--arg", "f=--output=../victim"]).run();
        out.code(1)
            .stderr_contains("`f`: \"--output=../victim\" starts with `-`, and `sort` would read it as an option");
        assert!(out.stdout().is_empty(), "{form:?}: {}", out.report());
    }
}

#[test]
fn a_double_dash_of_the_wrapped_program_ends_its_options() {
    for form in FORMS {
        let packs = Packs::new().manifest("wrapped", manifest(form, &["--", "{{f}}"]));
        let out = Test::new().packs_dir(&packs).args(["run", "wrapped", "--dry-run", "--arg", "f=-x"]).run();
        out.success().stdout_contains("sort -- -x");
    }
}

#[test]
fn a_wrapper_option_value_from_the_call_is_refused_as_the_wrappers_option() {
    let packs = Packs::new().manifest(
        "niced",
        json!({
            "name": "niced",
            "description": "Sort at a niceness",
            "parameters": { "n": { "type": "string", "required": true } },
            "command": { "program": "env", "args": ["{{n}}", "sort", "--", "x"] },
        }),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "niced", "--dry-run", "--arg", "n=-S"]).run();
    out.code(1).stderr_contains("\"-S\" starts with `-`, and `env` would read it as an option");
}

#[test]
fn lint_names_the_wrapped_program_and_the_double_dash_it_lacks() {
    for form in FORMS {
        let packs = Packs::new().manifest("wrapped", manifest(form, &["{{f}}"]));
        let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
        out.no_panic();
        let warnings: Vec<Value> = out.json()["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["code"] == "option-injection")
            .cloned()
            .collect();
        assert_eq!(warnings.len(), 1, "{form:?}: {}", out.report());
        let message = warnings[0]["message"].as_str().unwrap();
        let help = warnings[0]["help"].as_str().unwrap_or_default();
        if form.contains(&"--") {
            let wrapper = form[0];
            assert!(
                message.contains(&format!("the `--` before it ends the options of `{wrapper}`, which runs `sort`")),
                "{form:?}: {message}"
            );
            assert!(help.contains(&format!("`{wrapper} -- sort -- {{{{f}}}}`")), "{form:?}: {help}");
        } else {
            assert!(message.contains("can start an argument with `-`"), "{form:?}: {message}");
            assert!(help.contains("if `sort` honours `--`"), "{form:?}: {help}");
        }
        // With sort's own `--`, nothing to report.
        let packs = Packs::new().manifest("wrapped", manifest(form, &["--", "{{f}}"]));
        let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
        let report = out.json();
        let codes: Vec<&Value> = report["diagnostics"].as_array().unwrap().iter().map(|d| &d["code"]).collect();
        assert!(!codes.contains(&&json!("option-injection")), "{form:?}: {}", out.report());
    }
}

#[test]
fn lint_sees_a_script_or_a_chosen_program_behind_any_wrapper() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("timeout", &["10", "sh", "-c", "{{f}}"], "is pasted into code that `sh` runs"),
        ("flock", &["/tmp/l", "-c", "{{f}}"], "is pasted into code that `sh` runs"),
        ("stdbuf", &["-oL", "env", "-i", "bash", "-lc", "{{f}}"], "is pasted into code that `bash` runs"),
        ("timeout", &["5", "nice", "--", "{{f}}"], "chooses the program that `nice` runs"),
        ("env", &["-S", "{{f}}"], "chooses the program that `env` runs"),
    ];
    for (program, args, expected) in cases {
        let packs = Packs::new().manifest(
            "t",
            json!({"name": "t", "description": "d", "parameters": {"f": {"type": "string"}},
                   "command": {"program": program, "args": args}}),
        );
        let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
        let report = out.json();
        let found = report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "shell-injection" && d["message"].as_str().is_some_and(|m| m.contains(expected)));
        assert!(found, "{program} {args:?}: {}", out.report());
    }
}
