//! `packs exec FILE`: a manifest used as an executable tool, and the bundled
//! `now.tool.toml` run through its own shebang.

use std::process::Command;

use serde_json::json;

use crate::common::{BUNDLED, Packs, REPO, Test, path_with_packs};

fn now_toml() -> String {
    format!("{BUNDLED}/now.tool.toml")
}

#[test]
fn exec_describe_prints_the_describe_json() {
    let out = Test::new().args(["exec", &now_toml(), "--describe"]).run();
    out.success().stderr_eq("");
    let d = out.json();
    assert_eq!(d["name"], "current_time");
    assert_eq!(d["parameters"]["type"], "object");
    assert_eq!(d["parameters"]["required"], json!([]));
    assert_eq!(d["parameters"]["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["timezone", "format"]);
    assert_eq!(d["policy"]["timeout_secs"], 5);
}

#[test]
fn exec_runs_with_one_json_argument() {
    // A POSIX TZ string: the C library needs no time zone database for it.
    Test::new()
        .args(["exec", &now_toml(), r#"{"timezone": "JST-9", "format": "%Z|%z"}"#])
        .run()
        .success()
        .stdout_eq("JST|+0900\n")
        .stderr_eq("");
    // An argument starting with a dash is still the arguments, not an option.
    let packs = Packs::new().manifest(
        "echo_v",
        json!({"name": "echo_v", "description": "d", "parameters": {"v": {"type": "string", "allow_leading_dash": true}}, "command": "printf %s {{v}}"}),
    );
    Test::new()
        .args(["exec"])
        .arg(packs.join("echo_v.tool.json"))
        .arg(r#"{"v": "-n --x"}"#)
        .run()
        .success()
        .stdout_eq("-n --x");
}

#[test]
fn exec_reports_failures_with_exit_1() {
    // Invalid arguments.
    Test::new()
        .args(["exec", &now_toml(), r#"{"timezone": "../../etc/passwd"}"#])
        .run()
        .code(1)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("`timezone`");
    Test::new()
        .args(["exec", &now_toml(), "not json"])
        .run()
        .code(1)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("not JSON");
    // A tool that runs and fails.
    let packs = Packs::new().manifest(
        "fails",
        json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "echo partial; echo broken >&2; exit 4"]}}),
    );
    Test::new()
        .arg("exec")
        .arg(packs.join("fails.tool.json"))
        .arg("{}")
        .run()
        .code(1)
        .stdout_eq("partial\n")
        .stderr_eq("broken\nerror: the tool exited with code 4 (allowed exit codes: [0])\n");
    // Not a tool at all.
    let test = Test::new();
    let missing = test.path().join("missing.tool.json");
    test.arg("exec")
        .arg(&missing)
        .arg("{}")
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_contains(&format!("error: {} is not a usable tool\n", missing.display()))
        .no_panic();
    // Neither arguments nor --describe.
    Test::new().args(["exec", &now_toml()]).run().code(1).stdout_eq("").one_line_error();
}

#[test]
fn exec_never_runs_its_file() {
    // `packs exec` reads FILE as a manifest whatever its name; an executable is not run.
    let packs = Packs::new().executable(
        "argdump",
        "#!/bin/sh\ntouch \"$0.RAN\"\necho '{\"name\":\"argdump\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}'\n",
    );
    for args in [vec!["--describe"], vec![r#"{"a": "b"}"#]] {
        let out = Test::new().arg("exec").arg(packs.join("argdump")).args(args).run();
        out.code(1)
            .stdout_eq("")
            .stderr_contains(&format!("error: {} is not a usable tool\n", packs.join("argdump").display()));
    }
    assert!(!packs.join("argdump.RAN").exists(), "packs exec ran the file");
}

#[test]
fn exec_reads_a_json_manifest_under_any_name() {
    let packs =
        Packs::new().file("hello_json", r#"{"name": "hello_json", "description": "d", "command": "echo json"}"#);
    Test::new().arg("exec").arg(packs.join("hello_json")).arg("{}").run().success().stdout_eq("json\n");
}

#[test]
fn exec_reads_a_toml_manifest_under_any_name() {
    let packs =
        Packs::new().file("hello_toml", "name = \"hello_toml\"\ndescription = \"d\"\ncommand = \"echo toml\"\n");
    Test::new().arg("exec").arg(packs.join("hello_toml")).arg("{}").run().success().stdout_eq("toml\n");
    Test::new().arg("exec").arg(packs.join("hello_toml")).arg("--describe").run().success();
}

#[test]
fn exec_does_not_ask_for_approval() {
    // The program running the file as an executable decides; the describe JSON tells it.
    let packs = Packs::new().manifest(
        "careful",
        json!({"name": "careful", "description": "d", "command": "echo ran", "policy": {"confirm_before_run": true}}),
    );
    let file = packs.join("careful.tool.json");
    let d = Test::new().arg("exec").arg(&file).arg("--describe").run().success().json();
    assert_eq!(d["policy"]["confirm_before_run"], true);
    Test::new().arg("exec").arg(&file).arg("{}").run().success().stdout_eq("ran\n");
}

#[test]
fn now_tool_runs_through_its_shebang() {
    let run = |args: &[&str]| {
        Command::new(now_toml())
            .args(args)
            .current_dir(REPO)
            .env("PATH", path_with_packs())
            .env_remove("PACKS_PATH")
            .output()
            .expect("run packs/now.tool.toml")
    };
    let out = run(&["--describe"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["name"], "current_time");

    let out = run(&[r#"{"timezone": "UTC", "format": "%Z %Y"}"#]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let year: u32 = text.trim().strip_prefix("UTC ").expect("starts with the zone").parse().unwrap();
    assert!(year >= 2024, "{text:?}");

    let out = run(&[r#"{"timezone": "Nowhere/$(id)"}"#]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn now_tool_defaults_to_the_callers_time_zone() {
    // Without `timezone`, `TZ` is not set to "" (which the C library reads as UTC).
    Test::new()
        .env("TZ", "JST-9")
        .args(["exec", &now_toml(), r#"{"format": "%Z"}"#])
        .run()
        .success()
        .stdout_eq("JST\n");
}
