//! A call's values never reach a variable that changes how programs load or start
//! (`LD_PRELOAD`, `BASH_ENV`...): a positioned load error and the `loader-variable` lint
//! error (issue 29, item 3).

use serde_json::{Value, json};

use crate::common::{Packs, Test};

fn tool(parameters: Value, command: Value) -> Value {
    json!({"name": "t", "description": "d", "parameters": parameters, "command": command})
}

/// The line and column (from 1) where `needle` first starts in the file at `path`.
fn position(path: &std::path::Path, needle: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let (i, line) = text.lines().enumerate().find(|(_, l)| l.contains(needle)).expect("needle in file");
    (i as u64 + 1, line.find(needle).unwrap() as u64 + 1)
}

/// The `loader-variable` diagnostics of `packs lint` on one pack directory: (field, line).
fn lint_fields(packs: &Packs) -> Vec<(String, u64)> {
    let out = Test::new().args(["lint", "--format", "json"]).arg(packs.path()).run();
    out.no_panic();
    let report = out.json();
    report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "loader-variable")
        .map(|d| (d["field"].as_str().unwrap_or_default().to_owned(), d["line"].as_u64().unwrap_or_default()))
        .collect()
}

#[test]
fn a_call_value_in_a_loader_variable_is_a_positioned_load_error() {
    let s = json!({"lib": {"type": "string"}});
    for name in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "GCONV_PATH",
        "BASH_ENV",
        "ENV",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_ASKPASS",
        "LESSOPEN",
        "PATH",
    ] {
        let packs = Packs::new().manifest("t", tool(s.clone(), json!({"program": "true", "env": {name: "x{{lib}}"}})));
        let out = Test::new().packs_dir(&packs).args(["run", "t", "--arg", "lib=/tmp/evil.so"]).run();
        // At the variable's name.
        let (line, col) = position(&packs.join("t.tool.json"), &format!("\"{name}\""));
        out.code(1).stderr_contains(&format!(
            "error[loader-variable]: {}:{line}:{col}: `{name}` changes how programs load or start, and its value reads the call's `lib`",
            packs.join("t.tool.json").display()
        ));
        assert_eq!(lint_fields(&packs), [(format!("command.env.{name}"), line)], "{name}");
    }
}

#[test]
fn the_context_and_an_env_wrappers_assignment_are_call_values_too() {
    let packs =
        Packs::new().manifest("t", tool(json!({}), json!({"program": "true", "env": {"BASH_ENV": "{{context.url}}"}})));
    let out = Test::new().packs_dir(&packs).args(["run", "t", "--context", "url=/tmp/x"]).run();
    out.code(1)
        .stderr_contains("`BASH_ENV` changes how programs load or start, and its value reads the context's `url`");
    let packs = Packs::new().manifest(
        "t",
        tool(
            json!({"c": {"type": "string"}}),
            json!({"program": "env", "args": ["-i", "GIT_SSH_COMMAND={{c}}", "git", "fetch"]}),
        ),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "t", "--dry-run", "--arg", "c=sh -c id"]).run();
    out.code(1).stderr_contains("`GIT_SSH_COMMAND` changes how programs load or start");
    let (line, _) = position(&packs.join("t.tool.json"), "GIT_SSH_COMMAND=");
    assert_eq!(lint_fields(&packs), [("command.args.1".to_owned(), line)]);
}

#[test]
fn toml_manifests_are_positioned_at_the_variable() {
    let packs = Packs::new().file(
        "t.tool.toml",
        "name = \"t\"\ndescription = \"d\"\n[parameters.opts]\ntype = \"string\"\n[command]\nprogram = \"node\"\n[command.env]\nNODE_OPTIONS = \"{{opts}}\"\n",
    );
    let out = Test::new().packs_dir(&packs).args(["run", "t", "--arg", "opts=--require=/tmp/x.js"]).run();
    out.code(1).stderr_contains("t.tool.toml:8:1: `NODE_OPTIONS` changes how programs load or start");
}

#[test]
fn the_manifests_and_the_operators_values_may_set_them() {
    let packs = Packs::new().manifest(
        "t",
        tool(
            json!({"tz": {"type": "string"}}),
            json!({"program": "printf", "args": ["%s|%s|%s", "--", "x"], "env": {
                "LD_LIBRARY_PATH": "/opt/lib",
                "PYTHONPATH": "{{env.PACKS_TEST_PYPATH}}",
                "GIT_ASKPASS": "{{secret.PACKS_TEST_ASKPASS}}",
                "TZ": "{{tz}}",
            }}),
        ),
    );
    let out = Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_PYPATH", "/opt/py")
        .env("PACKS_TEST_ASKPASS", "/bin/false")
        .args(["run", "t", "--arg", "tz=UTC"])
        .run();
    out.success();
    assert!(lint_fields(&packs).is_empty());
}
