//! The published JSON Schemas agree with what packs accepts and prints: every
//! bundled manifest is a valid `tool-pack.v1` document, and every describe
//! JSON packs prints (or an executable prints) is a valid `describe.v1` document.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{BUNDLED, Packs, REPO, Test};

fn validator(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(Path::new(REPO).join("schemas").join(file)).expect("read schema");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{file} does not compile: {e}"))
}

/// Every violation, as `pointer: message`.
fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

#[track_caller]
fn assert_valid(validator: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors = violations(validator, instance);
    assert!(errors.is_empty(), "{what} is not valid:\n{}\n{instance:#}", errors.join("\n"));
}

fn bundled_manifests() -> Vec<PathBuf> {
    walkdir::WalkDir::new(BUNDLED)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("walk packs/").into_path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".tool.json") || name.ends_with(".tool.toml")
        })
        .collect()
}

fn parse_manifest(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

#[test]
fn bundled_manifests_match_the_manifest_schema() {
    let schema = validator("tool-pack.v1.json");
    let manifests = bundled_manifests();
    let names: Vec<String> = manifests.iter().map(|p| p.strip_prefix(BUNDLED).unwrap().display().to_string()).collect();
    for expected in [
        "disk_usage.tool.json",
        "get_weather.tool.json",
        "git_commit.tool.json",
        "github_issue.tool.json",
        "now.tool.toml",
        "search_text.tool.json",
        "summarize_url.tool.json",
        "tools.d/files/list_files.tool.json",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} not found in {names:?}");
    }
    for path in &manifests {
        assert_valid(&schema, &parse_manifest(path), &path.display().to_string());
    }
}

#[test]
fn the_manifest_schema_rejects_what_packs_rejects() {
    let schema = validator("tool-pack.v1.json");
    let good = json!({"name": "ok", "description": "d", "command": "echo"});
    assert_valid(&schema, &good, "a minimal manifest");
    for bad in [
        json!({"name": "Bad-Name", "description": "d", "command": "echo"}),
        json!({"name": "ok", "description": "", "command": "echo"}),
        json!({"name": "ok", "description": "d"}),
        json!({"name": "ok", "description": "d", "command": "echo", "policy": {"timout_secs": 5}}),
        json!({"name": "ok", "description": "d", "command": "echo", "policy": {"timeout_secs": "5"}}),
        json!({"name": "ok", "description": "d", "command": {"program": "echo", "args": [[]]}}),
        json!({"name": "ok", "description": "d", "command": 5}),
        json!({"name": "ok", "description": "d", "command": "echo", "parameters": {"1x": {"type": "string"}}}),
        json!({"name": "ok", "description": "d", "command": "echo", "parameters": {"secret": {"type": "string"}}}),
        json!({"name": "ok", "description": "d", "command": "echo", "parameters": {"x": {"type": "date"}}}),
        json!({"name": "ok", "description": "d", "command": "echo", "output": {"format": "yaml"}}),
    ] {
        assert!(!violations(&schema, &bad).is_empty(), "the schema accepts {bad}");
    }
}

#[test]
fn bundled_catalog_loads_without_errors() {
    let out = Test::new().packs_dir(BUNDLED).args(["list", "--json"]).run();
    out.success().stderr_lacks("error");
    let list = out.json();
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "disk_usage",
        "get_weather",
        "git_commit",
        "github_issue",
        "current_time",
        "search_text",
        "summarize_url",
        "list_files",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert!(names.contains(&"word_count"), "{names:?}\n{}", out.stderr);
    out.stderr_eq("");
}

#[test]
fn every_describe_matches_the_describe_schema() {
    let schema = validator("describe.v1.json");
    let list = Test::new().packs_dir(BUNDLED).args(["-q", "list", "--json"]).run();
    list.success();
    let names: Vec<String> =
        list.json().as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    assert!(names.len() >= 8, "{names:?}");
    let mut described = Vec::new();
    for name in &names {
        let d = Test::new().packs_dir(BUNDLED).args(["-q", "describe", name]).run().success().json();
        assert_eq!(&d["name"], name.as_str());
        assert_valid(&schema, &d, &format!("packs describe {name}"));
        described.push(d);
    }
    let catalog = Test::new().packs_dir(BUNDLED).args(["-q", "catalog"]).run().success().json();
    let entries = catalog.as_array().expect("catalog is an array");
    for entry in entries {
        assert_valid(&schema, entry, &format!("catalog entry {}", entry["name"]));
    }
    assert_eq!(entries, &described, "catalog is every describe, in list order");
}

#[test]
fn exec_describe_matches_the_describe_schema() {
    let schema = validator("describe.v1.json");
    let d = Test::new().args(["exec", &format!("{BUNDLED}/now.tool.toml"), "--describe"]).run().success().json();
    assert_valid(&schema, &d, "packs exec now.tool.toml --describe");
}

#[test]
fn word_count_describe_matches_the_describe_schema() {
    crate::common::require("python3"); // the bundled word_count is a Python script
    let out = std::process::Command::new(format!("{BUNDLED}/word_count")).arg("--describe").output().unwrap();
    assert!(out.status.success());
    let d: Value = serde_json::from_slice(&out.stdout).expect("word_count --describe prints JSON");
    assert_valid(&validator("describe.v1.json"), &d, "word_count --describe");
    // And packs runs it.
    Test::new()
        .packs_dir(BUNDLED)
        .args(["-q", "run", "word_count", "--arg", "text=hello brave new world"])
        .run()
        .success()
        .stdout_eq("4 words, 1 lines, 21 characters\n");
}

#[test]
fn describe_of_every_parameter_feature_matches_the_schema() {
    let schema = validator("describe.v1.json");
    let packs = Packs::new().manifest(
        "everything",
        json!({
            "name": "everything",
            "description": "Uses every parameter feature",
            "version": "2.0.0",
            "modes": ["Coding"],
            "examples": ["User: x\ncall:everything{}"],
            "parameters": {
                "s": {"type": "string", "required": true, "description": "s", "pattern": "^a", "minLength": 1, "maxLength": 9, "format": "path"},
                "n": {"type": "number", "minimum": 0.5, "maximum": 9.5, "default": 1.5},
                "i": {"type": "integer", "enum": [1, 2, 3]},
                "b": {"type": "boolean", "default": false},
                "a": {"type": "array", "items": {"type": "string"}},
                "o": {"type": "object"},
                "u": {"type": "string", "source": "context.url", "required": true},
                "l": {"type": "string", "source": "literal", "default": "x"},
            },
            "command": {"program": "echo", "args": ["{{s}}", ["--n", "{{n}}"], "{{a}}", "{{l}}"], "env": {"X": "{{u}}"}, "cwd": "{{context.cwd}}"},
            "policy": {"read_only": false, "requires_network": true, "timeout_secs": 3, "confirm_before_run": true, "allowed_exit_codes": [0, 2], "max_output_bytes": 10},
            "output": {"format": "markdown", "speak": false, "max_chars": 20, "template": "{{output}}"},
        }),
    );
    assert_valid(&validator("tool-pack.v1.json"), &parse_manifest(&packs.join("everything.tool.json")), "the manifest");
    let d = Test::new().packs_dir(&packs).args(["describe", "everything"]).run().success().stderr_eq("").json();
    assert_valid(&schema, &d, "its describe");
    assert_eq!(d["parameters"]["required"], json!(["s"]));
    assert_eq!(
        d["parameters"]["properties"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["s", "n", "i", "b", "a", "o", "u"],
        "declaration order, literal not offered"
    );
    assert_eq!(
        d["policy"],
        json!({"read_only": false, "requires_network": true, "timeout_secs": 3, "confirm_before_run": true, "allowed_exit_codes": [0, 2], "max_output_bytes": 10})
    );
}
