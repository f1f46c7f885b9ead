//! Values never reach a shell: whatever a value holds, it arrives as exactly
//! one argv element (or env value), byte for byte.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use crate::common::{Packs, Test, nul_fields, printf_tool};

/// Values a model (or an attacker steering it) might send.
const HOSTILE: &[&str] = &[
    "a; rm -rf /",
    "x | cat /etc/passwd",
    "true && false || echo pwned",
    "$(id)",
    "`id`",
    "${HOME} $PATH $0",
    "\"double\" 'single' \\\"mixed'",
    "*",
    "/etc/*",
    "~",
    "~root/.ssh",
    "line1\nline2",
    "\r\n\t\u{b}\u{c}",
    "\u{1}\u{2}\u{7f}\u{85}\u{200b}\u{202e}\u{feff}\u{fffd}",
    "héllo ✓ 日本語 🦀 👨‍👩‍👧 🇵🇹",
    "-rf",
    "--help",
    "--",
    "-",
    "",
    " ",
    "{{v}}",
    "{{#if v}}x{{/if}}",
    "{{{v}}}",
    "> /tmp/x < /etc/passwd 2>&1",
    "a\\b\\\\c\\0",
    "%s %d %n %%",
    "'; exec sh; '",
    "\"); system(\"id",
];

fn echo_tool() -> Packs {
    Packs::new().manifest("echo_v", printf_tool("echo_v", json!({"v": {"type": "string"}}), json!(["--", "{{v}}"])))
}

#[test]
fn hostile_values_arrive_verbatim_through_arg() {
    let packs = echo_tool();
    for v in HOSTILE {
        let out = Test::new().packs_dir(&packs).args(["run", "echo_v", "--arg"]).arg(format!("v={v}")).run();
        out.success();
        assert_eq!(out.argv(), ["--", v], "value {v:?}");
    }
}

#[test]
fn hostile_values_arrive_verbatim_through_json_arguments() {
    let packs = echo_tool();
    for v in HOSTILE {
        let out = Test::new().packs_dir(&packs).args(["run", "echo_v"]).arg(json!({ "v": v }).to_string()).run();
        out.success();
        assert_eq!(out.argv(), ["--", v], "value {v:?}");
    }
}

#[test]
fn hostile_values_splat_one_element_each() {
    let packs = Packs::new().manifest(
        "splat",
        printf_tool(
            "splat",
            // printf reads its arguments after the format as data, so a leading `-` is safe here.
            json!({"vs": {"type": "array", "items": {"type": "string"}, "allow_leading_dash": true}}),
            json!(["{{vs}}"]),
        ),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "splat"]).arg(json!({ "vs": HOSTILE }).to_string()).run();
    out.success();
    assert_eq!(out.argv(), HOSTILE);
}

#[test]
fn hostile_values_inside_a_larger_template_stay_one_element() {
    let packs = Packs::new().manifest(
        "prefixed",
        printf_tool("prefixed", json!({"v": {"type": "string"}}), json!(["--name={{v}}", "x{{v}}y"])),
    );
    for v in HOSTILE {
        let out = Test::new().packs_dir(&packs).args(["run", "prefixed", "--arg"]).arg(format!("v={v}")).run();
        out.success();
        assert_eq!(out.argv(), [format!("--name={v}"), format!("x{v}y")], "value {v:?}");
    }
}

#[test]
fn one_line_command_string_behaves_the_same() {
    // JSON `printf '%s\\0' -- {{v}}`: the command line is split once, at load
    // time, with shell-words rules; values are never split.
    let packs = Packs::new()
        .manifest(
            "line_json",
            json!({
                "name": "line_json",
                "description": "command as one line",
                "parameters": {"v": {"type": "string"}},
                "command": "printf '%s\\0' -- {{v}}",
            }),
        )
        .file(
            "line_toml.tool.toml",
            "name = \"line_toml\"\ndescription = \"command as one line\"\ncommand = '''printf '%s\\0' -- {{v}}'''\n\n[parameters.v]\ntype = \"string\"\n",
        );
    for tool in ["line_json", "line_toml"] {
        for v in HOSTILE {
            let out = Test::new().packs_dir(&packs).args(["run", tool, "--arg"]).arg(format!("v={v}")).run();
            out.success();
            assert_eq!(out.argv(), ["--", v], "tool {tool}, value {v:?}");
        }
    }
}

#[test]
fn quoted_words_of_a_command_line_are_kept_whole() {
    let packs = Packs::new().manifest(
        "words",
        json!({
            "name": "words",
            "description": "quoting in a one-line command",
            "parameters": {"v": {"type": "string"}},
            "command": "printf '%s\\0' 'two words' \"dq $HOME\" --x={{v}} '{{v}}'",
        }),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "words", "--arg", "v=a b;c"]).run();
    out.success();
    assert_eq!(out.argv(), ["two words", "dq $HOME", "--x=a b;c", "a b;c"]);
}

#[test]
fn hostile_values_in_env_arrive_verbatim() {
    let packs = Packs::new().manifest(
        "env_v",
        json!({
            "name": "env_v",
            "description": "print a variable",
            "parameters": {"v": {"type": "string"}},
            "command": {"program": "printenv", "args": ["PACKS_TEST_V"], "env": {"PACKS_TEST_V": "{{v}}"}},
        }),
    );
    for v in HOSTILE.iter().filter(|v| !v.is_empty()) {
        let out = Test::new().packs_dir(&packs).args(["run", "env_v", "--arg"]).arg(format!("v={v}")).run();
        out.success();
        assert_eq!(out.stdout, format!("{v}\n").into_bytes(), "value {v:?}");
    }
}

#[test]
fn executable_receives_the_call_as_one_json_argument() {
    let packs = Packs::new().executable(
        "argdump",
        r#"#!/bin/sh
if [ "$1" = "--describe" ]; then
  printf '%s' '{"name":"argdump","description":"dump argv","parameters":{"type":"object","properties":{"v":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}}'
  exit 0
fi
printf '%s\0' "$#" "$@"
"#,
    );
    for v in HOSTILE {
        let call = json!({"v": v, "n": 3});
        let out = Test::new().packs_dir(&packs).args(["run", "argdump"]).arg(call.to_string()).run();
        out.success();
        let argv = out.argv();
        assert_eq!(argv.len(), 2, "{argv:?}");
        assert_eq!(argv[0], "1");
        let received: Value = serde_json::from_str(&argv[1]).expect("the argument is JSON");
        assert_eq!(received, call, "value {v:?}");
    }
}

#[test]
fn any_string_is_exactly_one_verbatim_element() {
    let packs = echo_tool();
    let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
    let values = any::<String>().prop_map(|s| s.replace('\0', ""));
    runner
        .run(&values, |v| {
            let out = Test::new().packs_dir(&packs).args(["run", "echo_v", "--arg"]).arg(format!("v={v}")).run();
            prop_assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
            let raw = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
            prop_assert_eq!(nul_fields(raw), Some(vec!["--".to_owned(), v]));
            Ok(())
        })
        .unwrap();
}

#[test]
fn any_list_of_strings_splats_verbatim() {
    let packs = Packs::new().manifest(
        "splat",
        printf_tool(
            "splat",
            json!({"vs": {"type": "array", "items": {"type": "string"}}}),
            json!(["begin", "{{vs}}", "end"]),
        ),
    );
    let mut runner = TestRunner::new(Config { cases: 24, failure_persistence: None, ..Config::default() });
    let lists = proptest::collection::vec(any::<String>().prop_map(|s| s.replace('\0', "")), 0..6);
    runner
        .run(&lists, |vs| {
            let out = Test::new().packs_dir(&packs).args(["run", "splat"]).arg(json!({ "vs": vs }).to_string()).run();
            // Either the call is rejected as invalid (a value that would read as an option),
            // or every value arrives byte-exact; nothing else.
            if vs.iter().any(|v| v.starts_with('-')) {
                prop_assert_eq!(out.status.code(), Some(1), "stderr: {}", out.stderr);
                prop_assert!(out.stderr.contains("`vs`") && out.stderr.contains("starts with `-`"), "{}", out.stderr);
                return Ok(());
            }
            prop_assert_eq!(out.status.code(), Some(0), "stderr: {}", out.stderr);
            let raw = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
            let mut expected = vec!["begin".to_owned()];
            expected.extend(vs);
            expected.push("end".to_owned());
            prop_assert_eq!(nul_fields(raw), Some(expected));
            Ok(())
        })
        .unwrap();
}
