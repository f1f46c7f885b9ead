//! Authoring and migration: `packs new` skeletons and `packs convert`.

use crate::common::{Packs, Test};

#[test]
fn new_writes_a_skeleton_that_lints_clean_and_passes_its_test() {
    for (style, file) in
        [(None, "greet.tool.json"), (Some("--toml"), "greet.tool.toml"), (Some("--executable"), "greet.tool.toml")]
    {
        let work = Packs::new();
        let mut args = vec!["new", "greet", "--program", "echo", "--param", "who", "--param", "tags:array?"];
        args.extend(style);
        Test::new()
            .current_dir(work.path())
            .args(&args)
            .run()
            .success()
            .stderr_contains(&format!("wrote packs/{file}"));
        let path = work.join("packs").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        if style == Some("--executable") {
            use std::os::unix::fs::PermissionsExt;
            assert!(text.starts_with("#!/usr/bin/env -S packs exec\n"), "{text}");
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o111, 0o111);
        }
        Test::new()
            .current_dir(work.path())
            .args(["lint", "packs", "--deny-warnings"])
            .run()
            .success()
            .stdout_contains("0 errors, 0 warnings");
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "test"])
            .run()
            .success()
            .stdout_contains("1 passed");
        // And it runs: echo prints a `--`, so there is none, and a value that would be an
        // option of echo is refused by the parameter's schema instead.
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "run", "greet", "--arg", "who=world", "--arg", "tags=a"])
            .run()
            .success()
            .stdout_eq("world a\n");
        // An empty value is no option: it is given as it is.
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "run", "greet", "--arg", "who="])
            .run()
            .success()
            .stdout_eq("\n");
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "run", "greet", "--arg", "who=-n"])
            .run()
            .code(1)
            .stderr_contains("`who`: \"-n\" does not match \"^([^-]|$)\"");
        // Never over an existing file without --force.
        Test::new().current_dir(work.path()).args(&args).run().code(1).stderr_contains("exists; pass --force");
        let mut forced = args.clone();
        forced.push("--force");
        Test::new().current_dir(work.path()).args(&forced).run().success();
    }
    Test::new().args(["new", "Bad", "--program", "x"]).run().code(1).stderr_contains("is not a tool name");
    // echo takes no long options: a boolean flag would be printed, so it is refused.
    Test::new()
        .args(["new", "shout", "--program", "echo", "--param", "loud:boolean"])
        .run()
        .code(1)
        .stderr_contains("`echo` takes no long options: a boolean parameter would be printed as `--loud`");
    Test::new()
        .args(["new", "t", "--program", "x", "--tier", "admin"])
        .run()
        .code(1)
        .stderr_contains("unknown tier `admin`");
    Test::new()
        .args(["new", "t", "--program", "x", "--param", "n:float"])
        .run()
        .code(1)
        .stderr_contains("`float` is not a parameter type");
}

/// Tool definitions in an API's shape, as packs exports them: the input of the round trips.
fn definitions(format: &str, packs: &std::path::Path) -> serde_json::Value {
    Test::new().packs_dir(packs).args(["catalog", "--format", format]).run().success().json()
}

/// What a person does once they checked each `lint.review` entry: remove them.
fn reviewed(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let mut m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        m.as_object_mut().unwrap().remove("lint");
        std::fs::write(&path, m.to_string()).unwrap();
    }
}

fn by_name(v: &serde_json::Value) -> Vec<serde_json::Value> {
    let list = v.get("functionDeclarations").unwrap_or(v).as_array().unwrap().clone();
    let mut list = list;
    let name =
        |t: &serde_json::Value| t.pointer("/function/name").or(t.get("name")).unwrap().as_str().unwrap().to_owned();
    list.sort_by_key(name);
    list
}

/// A pack directory with nested objects, arrays of objects, type lists and `oneOf`: what a
/// manifest states with fields and what only its parameters' `schema` can.
fn rich() -> Packs {
    Packs::new().manifest(
        "rich",
        serde_json::json!({
            "name": "create_event", "description": "Create a calendar event",
            "parameters": {
                "title": {"type": "string", "required": true, "description": "What", "minLength": 1},
                "when": {"type": "string", "required": true, "format": "date-time"},
                "attendees": {"type": "array", "description": "Who", "items": {"type": "object",
                    "properties": {"email": {"type": "string"}, "optional": {"type": "boolean"}},
                    "required": ["email"], "additionalProperties": false}},
                "location": {"type": "object", "schema": {"properties": {
                    "room": {"type": "string"}, "floor": {"type": "integer", "minimum": 0}},
                    "required": ["room"], "additionalProperties": false}},
                "reminder": {"type": "integer", "enum": [5, 10, 30], "default": 10},
                "note": {"type": "string", "schema": {"type": ["string", "null"]}},
                "color": {"type": "string", "schema": {"oneOf": [{"const": "red"}, {"pattern": "^#[0-9a-f]{6}$"}]}}
            },
            "command": {"program": "true"}
        }),
    )
}

#[test]
fn tool_definitions_round_trip_through_convert_for_every_format() {
    let sources = [rich()];
    let bundled = std::path::Path::new(crate::common::REPO).join("packs");
    for format in ["openai", "openai-responses", "anthropic", "gemini", "mcp"] {
        for dir in [sources[0].path(), bundled.as_path()] {
            let input = definitions(format, dir);
            let work = Packs::new().file(&format!("{format}.json"), &input.to_string());
            let out = Test::new()
                .current_dir(work.path())
                .args(["convert", &format!("{format}.json"), "--output", "converted"])
                .run();
            out.success().stderr_contains(": 0 errors,");
            // Not offered while they await review: none is listed.
            assert_eq!(by_name(&definitions(format, &work.join("converted"))), Vec::<serde_json::Value>::new());
            reviewed(&work.join("converted"));
            let back = definitions(format, &work.join("converted"));
            assert_eq!(by_name(&back), by_name(&input), "{format} from {}", dir.display());
        }
    }
}

#[test]
fn converted_manifests_carry_what_needs_review_and_lint_without_errors() {
    let input = serde_json::json!([{"type": "function", "function": {"name": "Get-Weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let work = Packs::new().file("tools.json", &input.to_string());
    let out = Test::new().current_dir(work.path()).args(["convert", "tools.json", "--toml"]).run();
    out.success()
        .stderr_contains("wrote packs/get_weather.tool.toml")
        .stderr_contains("renamed from `Get-Weather`")
        .stderr_contains("additionalProperties: false");
    let lint = Test::new().current_dir(work.path()).args(["lint", "packs", "--format", "json"]).run();
    let codes: Vec<String> = lint.success().json()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect();
    assert!(codes.iter().filter(|c| *c == "needs-review").count() == 2, "{codes:?}");
}

const SKILL: &str = "---
name: todoist
description: Manage tasks in Todoist from the command line.
license: MIT
allowed-tools: Bash(todoist:*)
metadata:
  openclaw:
    primaryEnv: TODOIST_API_KEY
    os: [darwin, linux]
    requires:
      bins: [todoist-cli]
      env: [TODOIST_API_KEY, TODOIST_PROJECT]
    install:
      - kind: brew
        formula: todoist-cli
---
# Todoist

Run `todoist-cli list` to see today's tasks.
";

#[test]
fn a_skill_becomes_a_context_module_and_a_manifest_per_program() {
    let work = Packs::new().file("skills/todoist/SKILL.md", SKILL);
    let out = Test::new().current_dir(work.path()).args(["convert", "skills/todoist/SKILL.md"]).run();
    out.success()
        .stderr_contains("wrote agents/default/context/todoist.md")
        .stderr_contains("wrote packs/todoist_cli.tool.toml")
        .stderr_contains("allowed-tools");
    assert_eq!(
        std::fs::read_to_string(work.join("agents/default/context/todoist.md")).unwrap(),
        "# Todoist\n\nRun `todoist-cli list` to see today's tasks.\n"
    );
    let manifest = std::fs::read_to_string(work.join("packs/todoist_cli.tool.toml")).unwrap();
    for expected in [
        "program = \"todoist-cli\"",
        "TODOIST_API_KEY = \"{{secret.TODOIST_API_KEY}}\"",
        "env_passthrough = [\"TODOIST_PROJECT\"]",
        "# How the skill says to install what it needs (packs convert never runs these):",
        "formula",
        "the skill runs on: darwin, linux",
    ] {
        assert!(manifest.contains(expected), "{expected}\n{manifest}");
    }
    // It lints with warnings only; it is not offered or run while it awaits review, and
    // once reviewed, the secret is a secret.
    Test::new().current_dir(work.path()).args(["lint", "packs"]).run().success().stdout_contains("0 errors");
    let dry_run = || {
        Test::new()
            .current_dir(work.path())
            .env("TODOIST_API_KEY", "tk_live_1")
            .args(["--packs", "packs", "run", "todoist_cli", "--dry-run"])
            .run()
    };
    dry_run().code(1).stderr_contains("tool `todoist_cli` is awaiting review");
    let path = work.join("packs/todoist_cli.tool.toml");
    let reviewed: String = manifest.lines().filter(|l| !l.starts_with("review = ")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, reviewed).unwrap();
    dry_run().success().stdout_contains("env: TODOIST_API_KEY='***'");
}

#[test]
fn a_skill_naming_a_relative_program_is_refused_at_its_line() {
    // Found by review: `./payload` in a skill became a manifest that runs whatever file of
    // that name is in the workspace.
    let skill = "---\nname: payload\ndescription: Runs a payload.\nmetadata:\n  openclaw:\n    requires:\n      bins:\n        - jq\n        - ./payload\n      anyBins: [bin/alt]\n---\nRun it.\n";
    let work = Packs::new().file("skills/payload/SKILL.md", skill);
    let out = Test::new().current_dir(work.path()).args(["convert", "skills/payload/SKILL.md"]).run();
    out.code(1)
        .stderr_contains("skills/payload/SKILL.md:9:11")
        .stderr_contains("`metadata.openclaw.requires.bins.1`: the program `./payload` is a relative path")
        .stderr_contains("skills/payload/SKILL.md:10:17")
        .stderr_contains("`metadata.openclaw.requires.anyBins.0`: the program `bin/alt`")
        .stderr_contains("nothing was converted");
    assert!(!work.join("packs").exists() && !work.join("agents").exists(), "nothing is written");
    // An absolute path names one program, wherever packs runs: converted.
    let work = Packs::new().file("SKILL.md", &skill.replace("./payload", "/usr/bin/env").replace("[bin/alt]", "[]"));
    Test::new().current_dir(work.path()).args(["convert", "SKILL.md"]).run().success();
    assert!(
        std::fs::read_to_string(work.join("packs/usr_bin_env.tool.toml"))
            .unwrap()
            .contains("program = \"/usr/bin/env\"")
    );
}

#[test]
fn a_manifest_awaiting_review_is_neither_offered_nor_run() {
    // Found by review: converted manifests with unreviewed `lint.review` entries loaded and ran.
    let input = serde_json::json!([{"name": "probe", "description": "Probe", "input_schema": {"type": "object"}}]);
    let work = Packs::new().file("tools.json", &input.to_string());
    let dir = Packs::new();
    let out = dir.path().to_str().unwrap();
    Test::new().current_dir(work.path()).args(["convert", "tools.json", "--output", out]).run().success();
    // Give it a program that runs, as a person would, and leave the review entries.
    let path = dir.join("probe.tool.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["command"] = serde_json::json!({"program": "echo", "args": ["ran"]});
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    let packs = || Test::new().packs_dir(&dir);
    packs()
        .args(["run", "probe"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_contains("warning[needs-review]")
        .stderr_contains("probe.tool.json:")
        .stderr_contains("error: tool `probe` is awaiting review: ")
        .stderr_contains("probe.tool.json lists 2 things a person must still check");
    packs().args(["run", "probe", "--json"]).run().code(1).stdout_contains("awaiting review").stdout_lacks("\"ran");
    Test::new()
        .args(["exec", path.to_str().unwrap(), "{}"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_contains("awaiting review");
    let list = packs().args(["list"]).run();
    list.success().stderr_contains("awaiting review");
    assert!(!list.stdout().contains("probe"), "{}", list.stdout());
    let messages = crate::serve::session(
        &dir,
        &[],
        &[
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "probe", "arguments": {}}}),
        ],
    );
    let text = serde_json::to_string(&messages).unwrap();
    assert!(!text.contains("\"ran") && text.contains("awaiting review"), "{text}");
    assert_eq!(messages[0]["result"]["tools"], serde_json::json!([]), "{text}");
    // Reviewed: each entry checked and removed, the tool runs.
    manifest.as_object_mut().unwrap().remove("lint");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    packs().args(["run", "probe"]).run().success().stdout_eq("ran\n");
}

#[test]
fn malformed_inputs_are_positioned_errors_and_nothing_is_written() {
    let dup = serde_json::json!({"tools": [
        {"name": "a", "description": "A", "inputSchema": {"type": "object"}},
        {"description": "no name", "inputSchema": {"type": "object"}},
        {"name": "a", "description": "again", "inputSchema": {"type": "object"}}
    ]});
    let work = Packs::new()
        .file("dup.json", &serde_json::to_string_pretty(&dup).unwrap())
        .file("bad/SKILL.md", "---\nname: bad\ndescription: [unclosed\n---\nbody\n")
        .file(
            "good.json",
            &serde_json::json!([{"name": "ok", "description": "Fine", "input_schema": {"type": "object"}}]).to_string(),
        )
        .file("broken.json", "{\"tools\": [");
    let out = Test::new()
        .current_dir(work.path())
        .args(["convert", "good.json", "dup.json", "bad/SKILL.md", "broken.json"])
        .run();
    out.code(1)
        .stderr_contains("dup.json:10:5")
        .stderr_contains("has no `name`")
        .stderr_contains("tool `a` is defined twice (first at `tools.0`)")
        .stderr_contains("bad/SKILL.md:3:")
        .stderr_contains("broken.json:1:")
        .stderr_contains("nothing was converted");
    assert!(!work.join("packs").exists(), "nothing is written when any input is malformed");
    // An existing file is never overwritten without --force, and then nothing is written.
    let work = Packs::new()
        .file("good.json", &serde_json::json!([{"name": "ok", "description": "Fine", "input_schema": {"type": "object"}}, {"name": "other", "description": "Other", "input_schema": {"type": "object"}}]).to_string())
        .file("packs/ok.tool.json", "{}");
    Test::new()
        .current_dir(work.path())
        .args(["convert", "good.json"])
        .run()
        .code(1)
        .stderr_contains("packs/ok.tool.json exists");
    assert!(!work.join("packs/other.tool.json").exists());
    assert_eq!(std::fs::read_to_string(work.join("packs/ok.tool.json")).unwrap(), "{}");
    Test::new().current_dir(work.path()).args(["convert", "good.json", "--force"]).run().success();
    // An executable that answers --describe stays one, and the report says why.
    let work = Packs::new().executable("tool", "#!/bin/sh\necho '{}'\n");
    Test::new()
        .current_dir(work.path())
        .args(["convert", "tool"])
        .run()
        .success()
        .stderr_contains("is already a packs tool");
}

#[test]
fn the_readme_skeleton_prints_the_value_alone() {
    let work = Packs::new();
    let new = |args: &[&str]| Test::new().current_dir(work.path()).arg("new").args(args).run();
    new(&["greet", "--program", "echo", "--param", "who"]).success();
    Test::new()
        .current_dir(work.path())
        .args(["run", "greet", "--arg", "who=world"])
        .run()
        .success()
        .stdout_eq("world\n");
    // A program that honours `--` gets it, and a value after it may start with `-`.
    new(&["base", "--program", "basename", "--param", "who", "--param", "n:integer?"]).success();
    Test::new().current_dir(work.path()).args(["run", "base", "--arg", "who=-n"]).run().success().stdout_eq("-n\n");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("packs/base.tool.json")).unwrap()).unwrap();
    assert_eq!(base["command"]["args"], serde_json::json!(["--", "{{who}}", "{{n}}"]));
    assert!(base["parameters"]["who"].get("pattern").is_none(), "{base}");
    // `--no-options-end` asks for what echo gets: no `--`, and schemas that refuse a leading `-`.
    new(&[
        "cat_it",
        "--program",
        "cat",
        "--param",
        "path",
        "--param",
        "n:integer?",
        "--param",
        "more:array?",
        "--no-options-end",
    ])
    .success();
    let cat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("packs/cat_it.tool.json")).unwrap()).unwrap();
    assert_eq!(cat["command"]["args"], serde_json::json!(["{{path}}", "{{n}}", "{{more}}"]));
    assert_eq!(cat["parameters"]["path"]["pattern"], "^([^-]|$)");
    assert_eq!(cat["parameters"]["n"]["minimum"], 0);
    assert_eq!(cat["parameters"]["more"]["items"]["pattern"], "^([^-]|$)");
    Test::new().current_dir(work.path()).args(["lint", "packs", "--deny-warnings"]).run().success();
    Test::new().current_dir(work.path()).args(["--packs", "packs", "test"]).run().success().stdout_contains("3 passed");
}

#[test]
fn new_states_the_policy_it_is_asked_for() {
    let work = Packs::new();
    let policy = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(work.join(&format!("packs/{name}.tool.json"))).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["policy"].clone()
    };
    let new = |args: &[&str]| Test::new().current_dir(work.path()).arg("new").args(args).run();
    new(&["plain", "--program", "true"]).success();
    assert_eq!(policy("plain"), serde_json::json!({"read_only": true, "requires_network": false, "timeout_secs": 30}));
    new(&[
        "cache",
        "--program",
        "true",
        "--tier",
        "workspace",
        "--writable",
        "{{env.HOME}}/.cache/x",
        "--writable",
        "/tmp/y",
        "--timeout",
        "5",
    ])
    .success();
    assert_eq!(
        policy("cache"),
        serde_json::json!({"tier": "workspace", "read_only": false, "requires_network": false,
            "writable": ["{{env.HOME}}/.cache/x", "/tmp/y"], "timeout_secs": 5})
    );
    // Elevated writes out what it means: a person approves each call.
    new(&["deploy", "--program", "true", "--tier", "elevated", "--network"]).success();
    assert_eq!(
        policy("deploy"),
        serde_json::json!({"tier": "elevated", "read_only": false, "requires_network": true,
            "confirm_before_run": true, "timeout_secs": 30})
    );
    // What lint warns about in a skeleton is shown, not hidden.
    new(&["fetch", "--program", "true", "--tier", "system", "--network"])
        .success()
        .stdout_contains("warning[unconfirmed-mutation]");
    Test::new()
        .current_dir(work.path())
        .args(["--packs", "packs", "run", "deploy", "--dry-run"])
        .run()
        .success()
        .stdout_contains("tier: elevated");
    Test::new().current_dir(work.path()).args(["--packs", "packs", "test"]).run().success().stdout_contains("4 passed");
}
