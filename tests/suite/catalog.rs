//! Discovery: broken files are reported with positions and skipped, names
//! resolve in search-path order, hidden entries are skipped, manifests are
//! found at any depth and executables only at the top.

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::common::{Packs, Test};

/// 1-based line and column (in characters) of the first `needle` in `text`.
fn position(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {text:?}"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().count() + 1;
    (line, col)
}

fn simple(name: &str, output: &str) -> Value {
    json!({"name": name, "description": format!("prints {output}"), "command": {"program": "echo", "args": [output]}})
}

/// The names `packs list --json` shows.
fn names(out: &crate::common::Output) -> Vec<String> {
    out.json()
        .as_array()
        .expect("list --json is an array")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

const UNDECLARED: &str = "{\"name\":\"bad_placeholder\",\"description\":\"d\",\"parameters\":{\"path\":{\"type\":\"string\"}},\n \"command\":{\"program\":\"echo\",\"args\":[\"x\",\"--p={{pth}}\"]}}";

#[test]
fn broken_manifests_are_reported_and_skipped() {
    let packs = Packs::new()
        .manifest("a_good", simple("good_one", "good"))
        .file(
            "bad_json.tool.json",
            "{\"name\":\"bad_json\",\n  \"description\": \"d\",\n  \"command\": \"echo x\",,\n}",
        )
        .file(
            "bad_type.tool.json",
            "{\"name\":\"bad_type\",\"description\":\"d\",\"command\":\"echo\",\n \"policy\":{\"timeout_secs\":\"5\"}}",
        )
        .file("bad_placeholder.tool.json", UNDECLARED)
        .file("bad_name.tool.json", "{\"name\":\"Bad-Name\",\"description\":\"d\",\"command\":\"echo\"}")
        .file("bad_toml.tool.toml", "name = \"bad_toml\"\ndescription = \"d\"\ncommand = 5\n")
        .file("empty.tool.json", "")
        .manifest("z_good", simple("another_good", "fine"));
    let dir = packs.path().display().to_string();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success();
    assert_eq!(names(&out), ["good_one", "another_good"]);
    let (line, col) = position(UNDECLARED, "{{pth}}");
    assert_eq!((line, col), (2, 47));
    out.stderr_contains(&format!("error[invalid-json]: {dir}/bad_json.tool.json:3:23: "))
        .stderr_contains(&format!(
            "error[invalid-field]: {dir}/bad_type.tool.json:2:29: `policy.timeout_secs`: invalid type: string \"5\""
        ))
        .stderr_contains(&format!(
            "error[invalid-template]: {dir}/bad_placeholder.tool.json:{line}:{col}: \
             `{{{{pth}}}}` names no declared parameter; did you mean `path`?\n"
        ))
        .stderr_contains(&format!(
            "error[invalid-name]: {dir}/bad_name.tool.json:1:9: tool name `Bad-Name` must be snake_case"
        ))
        .stderr_contains(&format!("error[invalid-field]: {dir}/bad_toml.tool.toml:3:11: `command`: invalid type"))
        .stderr_contains(&format!("error[invalid-json]: {dir}/empty.tool.json"));
    assert_eq!(out.stderr.lines().count(), 6, "one diagnostic per broken file:\n{}", out.stderr);

    // The good ones run.
    Test::new().packs_dir(&packs).args(["-q", "run", "good_one"]).run().success().stdout_eq("good\n").stderr_eq("");
}

#[test]
fn undeclared_placeholder_in_a_command_line_points_at_the_command() {
    let text = "{\"name\":\"bad_line\",\"description\":\"d\",\"parameters\":{\"path\":{\"type\":\"string\"}},\n \"command\": \"echo {{pth}}\"}";
    let packs = Packs::new().file("bad_line.tool.json", text);
    // The words of a one-line command came out of one string: the position is that string's.
    let (line, col) = position(text, "\"echo {{pth}}\"");
    Test::new()
        .packs_dir(&packs)
        .arg("list")
        .run()
        .success()
        .stderr_contains(&format!("{}/bad_line.tool.json:{line}:{col}: ", packs.path().display()));
}

#[test]
fn an_unknown_key_is_an_error_with_a_suggestion_and_only_its_file_is_skipped() {
    let json_text =
        "{\"name\":\"typo_json\",\"description\":\"d\",\"command\":\"echo ok\",\n  \"polcy\":{\"timeout_secs\":5}}";
    let toml_text = "name = \"typo_toml\"\ndescription = \"d\"\ncommand = \"echo ok\"\n\n[output]\nmax_char = 5\n";
    let test_text = "name = \"typo_test\"\ndescription = \"d\"\ncommand = \"echo ok\"\n\n[[tests]]\nname = \"t\"\n\n[tests.expect]\noutput = \"ok\"\n";
    let packs = Packs::new()
        .file("typo_json.tool.json", json_text)
        .file("typo_toml.tool.toml", toml_text)
        .file("typo_test.tool.toml", test_text)
        .manifest("good", simple("good", "fine"));
    let dir = packs.path().display().to_string();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success();
    assert_eq!(names(&out), ["good"]);
    let (l, c) = position(json_text, "\"polcy\"");
    let (tl, tc) = position(toml_text, "max_char");
    let (el, ec) = position(test_text, "output =");
    out.stderr_eq(&format!(
        "error[unknown-key]: {dir}/typo_json.tool.json:{l}:{c}: unknown key `polcy`: \
         packs would ignore it, so the file is refused (help: did you mean `policy`?)\n\
         error[unknown-key]: {dir}/typo_test.tool.toml:{el}:{ec}: unknown key `output` in `tests.0.expect`: \
         packs would ignore it, so the file is refused (help: did you mean `output_equals`?)\n\
         error[unknown-key]: {dir}/typo_toml.tool.toml:{tl}:{tc}: unknown key `max_char` in `output`: \
         packs would ignore it, so the file is refused (help: did you mean `max_chars`?)\n"
    ));
    // A key with nothing close gets the keys its level knows.
    let packs = Packs::new().file(
        "colour.tool.json",
        "{\"name\":\"c\",\"description\":\"d\",\"command\":{\"program\":\"true\",\"colour\":1}}",
    );
    Test::new().packs_dir(&packs).arg("list").run().success().stderr_contains(
        "unknown key `colour` in `command`: packs would ignore it, so the file is refused (help: the keys here are program, args",
    );
}

#[test]
fn one_name_twice_in_one_directory_is_an_error() {
    let packs = Packs::new()
        .manifest("first", simple("dup", "one"))
        .file("nested/second.tool.json", &serde_json::to_string(&simple("dup", "two")).unwrap())
        .manifest("other", simple("other", "other"));
    let first = packs.join("first.tool.json").display().to_string();
    let second = packs.join("nested/second.tool.json").display().to_string();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success().stderr_eq(&format!(
        "error[duplicate-name]: {second}: tool `dup` is also declared in {first}; neither is used\n"
    ));
    assert_eq!(names(&out), ["other"]);

    Test::new()
        .packs_dir(&packs)
        .args(["-q", "run", "dup"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq(&format!("error: tool `dup` is declared twice in one pack directory: {first} and {second}\n"));
    Test::new().packs_dir(&packs).args(["-q", "run", "other"]).run().success().stdout_eq("other\n");
}

#[test]
fn a_name_spelled_with_escapes_is_found_by_run_and_counts_as_a_duplicate() {
    // `run` scans names without parsing files that cannot declare the name:
    // one spelled with \u escapes (JSON, TOML) must still be found.
    let escaped = r#"{"name": "\u0065scaped", "description": "d", "command": {"program": "echo", "args": ["json"]}}"#;
    let toml = "name = \"t\\u006Fml_escaped\"\ndescription = \"d\"\ncommand = \"echo toml\"\n";
    let packs =
        Packs::new().file("a.tool.json", escaped).file("b.tool.toml", toml).manifest("other", simple("other", "other"));
    Test::new().packs_dir(&packs).args(["run", "escaped"]).run().success().stdout_eq("json\n");
    Test::new().packs_dir(&packs).args(["run", "toml_escaped"]).run().success().stdout_eq("toml\n");
    Test::new()
        .packs_dir(&packs)
        .args(["run", "escapd"])
        .run()
        .code(1)
        .stderr_eq("error: no tool named `escapd`; did you mean `escaped`?\n");

    let dup = packs.file("c.tool.json", &serde_json::to_string(&simple("escaped", "plain")).unwrap());
    let (first, second) = (dup.join("a.tool.json"), dup.join("c.tool.json"));
    Test::new().packs_dir(&dup).args(["-q", "run", "escaped"]).run().code(1).stderr_eq(&format!(
        "error: tool `escaped` is declared twice in one pack directory: {} and {}\n",
        first.display(),
        second.display()
    ));
}

#[test]
fn an_earlier_directory_shadows_a_later_one() {
    let a = Packs::new().manifest("same", simple("same", "from-a")).manifest("only_a", simple("only_a", "a"));
    let b = Packs::new().manifest("same", simple("same", "from-b")).manifest("only_b", simple("only_b", "b"));
    Test::new().packs_dir(&a).packs_dir(&b).args(["run", "same"]).run().success().stdout_eq("from-a\n").stderr_eq("");
    Test::new().packs_dir(&b).packs_dir(&a).args(["run", "same"]).run().success().stdout_eq("from-b\n");
    // Both directories contribute their other tools.
    Test::new().packs_dir(&a).packs_dir(&b).args(["run", "only_b"]).run().success().stdout_eq("b\n");
    let out = Test::new().packs_dir(&a).packs_dir(&b).args(["list", "--json"]).run();
    out.success();
    let list = out.json();
    let same: Vec<&Value> = list.as_array().unwrap().iter().filter(|t| t["name"] == "same").collect();
    assert_eq!(same.len(), 1);
    assert_eq!(same[0]["source"], a.join("same.tool.json").display().to_string());
}

#[test]
fn packs_path_is_searched_in_order() {
    let a = Packs::new().manifest("same", simple("same", "from-a"));
    let b = Packs::new().manifest("same", simple("same", "from-b")).manifest("only_b", simple("only_b", "b"));
    let path = |first: &Packs, second: &Packs| format!("{}:{}", first.path().display(), second.path().display());
    Test::new().env("PACKS_PATH", path(&a, &b)).args(["run", "same"]).run().success().stdout_eq("from-a\n");
    Test::new().env("PACKS_PATH", path(&b, &a)).args(["run", "same"]).run().success().stdout_eq("from-b\n");
    Test::new().env("PACKS_PATH", path(&a, &b)).args(["run", "only_b"]).run().success().stdout_eq("b\n");
    // Empty entries are ignored.
    Test::new()
        .env("PACKS_PATH", format!("::{}:", b.path().display()))
        .args(["run", "only_b"])
        .run()
        .success()
        .stdout_eq("b\n");
    // --packs wins over PACKS_PATH.
    Test::new()
        .env("PACKS_PATH", b.path())
        .packs_dir(&a)
        .args(["run", "only_b"])
        .run()
        .code(1)
        .stderr_eq("error: no tool named `only_b`\n");
}

#[test]
fn default_search_path_is_packs_in_the_working_directory() {
    let test = Test::new().write("packs/here.tool.json", &simple("here", "found").to_string());
    test.args(["run", "here"]).run().success().stdout_eq("found\n").stderr_eq("");
    // From the repository root, ./packs is the bundled directory.
    let out = Test::new().current_dir(crate::common::REPO).args(["-q", "list", "--json"]).run();
    out.success();
    assert!(names(&out).contains(&"disk_usage".to_owned()), "{}", out.stdout());
    // No ./packs and nothing configured: no tools and no warning, only a hint on stderr of
    // where packs looked (cli.rs has its text).
    let out = Test::new().args(["list", "--json"]).run();
    out.success().stdout_eq("[]\n");
    assert!(
        out.stderr.starts_with("no tools found; packs looked for tools in the default search path:\n"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

#[test]
fn a_missing_explicit_directory_is_a_warning() {
    let test = Test::new();
    let missing = test.path().join("no-such-dir");
    let out = test.packs_dir(&missing).args(["list", "--json"]).run();
    out.success().stdout_eq("[]\n").stderr_eq(&format!(
        "warning[missing-pack-dir]: {}: pack directory does not exist or is not a directory\n",
        missing.display()
    ));
}

#[test]
fn quiet_hides_diagnostics() {
    let packs = Packs::new().manifest("good", simple("good", "x")).file("bad.tool.json", "{");
    Test::new().packs_dir(&packs).args(["--quiet", "list", "--json"]).run().success().stderr_eq("");
    Test::new().packs_dir(&packs).args(["list", "--json"]).run().success().stderr_contains("bad.tool.json");
}

#[test]
fn hidden_files_and_directories_are_skipped() {
    let mark = r#"#!/bin/sh
touch "$(dirname "$0")/RAN"
echo '{"name":"hidden_exec","description":"d","parameters":{"type":"object"}}'
"#;
    let packs = Packs::new()
        .manifest("visible", simple("visible", "v"))
        .file(".hidden.tool.json", &simple("hidden_file", "h").to_string())
        .file(".git/hooks.tool.json", &simple("hidden_dir", "h").to_string())
        .file("sub/.cache/deep.tool.json", &simple("hidden_deep", "h").to_string())
        .file(".broken.tool.json", "{ not json")
        .executable(".hidden_exec", mark);
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success().stderr_eq("");
    assert_eq!(names(&out), ["visible"]);
    assert!(!packs.join("RAN").exists(), "a hidden executable was run");
}

#[test]
fn manifests_are_found_at_any_depth() {
    let packs = Packs::new()
        .manifest("top", simple("top", "t"))
        .file("a/b/c/deep.tool.json", &simple("deep", "d").to_string())
        .file("x/y/other.tool.toml", "name = \"from_toml\"\ndescription = \"d\"\ncommand = \"echo toml\"\n");
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success().stderr_eq("");
    assert_eq!(names(&out), ["deep", "top", "from_toml"]);
    Test::new().packs_dir(&packs).args(["run", "deep"]).run().success().stdout_eq("d\n");
    Test::new().packs_dir(&packs).args(["run", "from_toml"]).run().success().stdout_eq("toml\n");
}

#[test]
fn executables_are_only_found_at_the_top() {
    // Each script reports that it ran (a describe runs confined: it cannot leave a file).
    let reports = crate::common::Reports::new();
    let script = |name: &str| {
        format!(
            "#!/bin/sh\n{}\nif [ \"$1\" = --describe ]; then echo '{{\"name\":\"{name}\",\"description\":\"d\",\"parameters\":{{\"type\":\"object\"}}}}'; else echo {name}; fi\n",
            reports.shell(name)
        )
    };
    let packs = Packs::new()
        .executable("top_exec", &script("top_exec"))
        .executable("sub/nested_exec", &script("nested_exec"))
        .file("not_executable", &script("not_executable"))
        .file("README.md", "# not a tool\n")
        .file("data.json", "{\"name\": \"data\"}");
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    // The script that is not executable is named; the README and the data file are not.
    let dir = packs.path().display().to_string();
    out.success().stderr_eq(&format!(
        "warning[not-executable]: {dir}/not_executable: starts with `#!` but is not executable, so it is not a tool; make it executable (`chmod +x`) to offer it\n"
    ));
    assert_eq!(names(&out), ["top_exec"]);
    assert_eq!(out.json()[0]["kind"], "executable");
    // Only the top-level executable was asked to describe itself; nothing nested was run.
    assert_eq!(reports.take(), ["top_exec"]);
}

#[test]
fn an_executable_manifest_is_a_manifest() {
    // `now.tool.toml` has its run bit set; in a pack directory it is still read as a manifest.
    let packs = Packs::new().bundled("now.tool.toml");
    std::fs::set_permissions(packs.join("now.tool.toml"), Permissions::from_mode(0o755)).unwrap();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success().stderr_eq("");
    assert_eq!(out.json()[0]["name"], "current_time");
    assert_eq!(out.json()[0]["kind"], "manifest");
}

#[test]
fn a_graph_of_directory_links_is_walked_once_per_directory() {
    // level_i holds two links to level_{i+1}: 2^30 paths, 31 directories.
    let root = tempfile::tempdir().unwrap();
    let levels = 30;
    for i in 0..=levels {
        std::fs::create_dir(root.path().join(format!("level_{i}"))).unwrap();
    }
    for i in 0..levels {
        for link in ["a", "b"] {
            std::os::unix::fs::symlink(
                root.path().join(format!("level_{}", i + 1)),
                root.path().join(format!("level_{i}/{link}")),
            )
            .unwrap();
        }
    }
    std::fs::write(
        root.path().join(format!("level_{levels}/deep.tool.json")),
        r#"{"name": "deep", "description": "d", "command": "true"}"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = Test::new().packs_dir(root.path().join("level_0")).args(["list", "--json"]).run();
    let tools = out.success().json();
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(tools.as_array().map(Vec::len), Some(1), "{tools}");
    assert_eq!(tools[0]["name"], "deep");
}

#[test]
fn a_syntax_error_is_reported_as_one_even_after_a_type_error_in_the_same_value() {
    let packs = Packs::new().file(
        "early.tool.json",
        "{\n  \"name\": \"early\",\n  \"description\": \"d\",\n  \"command\": \"true\",\n  \"parameters\": [}\n}\n",
    );
    let dir = packs.path().display().to_string();
    let out = Test::new().packs_dir(&packs).args(["list"]).run();
    out.success().stderr_contains(&format!("error[invalid-json]: {dir}/early.tool.json:5:18: expected value"));
    out.stderr_lacks("invalid-field");
    // Lint says the same.
    Test::new().args(["lint"]).arg(packs.path()).run().code(1).stdout_contains("5:18").stdout_contains("invalid-json");
}

#[test]
fn user_pack_directories_come_after_dot_packs() {
    let home = Packs::new()
        .manifest(".config/packs/tools/mine", simple("mine", "from tools"))
        .manifest(".config/packs/tools/both", simple("both", "user copy"))
        .manifest(".config/packs/tools.d/b-pack/extra", simple("extra", "from b"))
        .manifest(".config/packs/tools.d/a-pack/extra", simple("extra", "from a"))
        .manifest(".config/packs/tools.d/.hidden/secret", simple("secret", "hidden"));
    let config = home.path().join(".config");
    let test = |xdg: Option<&std::path::Path>| {
        let mut t = Test::new().write("packs/both.tool.json", &simple("both", "project copy").to_string());
        t = t.env("HOME", home.path());
        t = match xdg {
            Some(x) => t.env("XDG_CONFIG_HOME", x),
            None => t.env_remove("XDG_CONFIG_HOME"),
        };
        t
    };
    // ./packs first, then CONFIG/packs/tools, then tools.d/* in name order.
    test(None).args(["run", "both"]).run().success().stdout_eq("project copy\n");
    test(None).args(["run", "mine"]).run().success().stdout_eq("from tools\n");
    test(None).args(["run", "extra"]).run().success().stdout_eq("from a\n");
    test(None).args(["run", "secret"]).run().code(1).stderr_contains("no tool named `secret`");
    let out = test(Some(&config)).args(["list", "--json"]).run();
    let rows = out.success().json();
    let dir_of = |name: &str| {
        rows.as_array().unwrap().iter().find(|r| r["name"] == name).unwrap()["pack_dir"].as_str().unwrap().to_owned()
    };
    assert_eq!(dir_of("both"), "packs");
    assert_eq!(dir_of("mine"), config.join("packs/tools").to_str().unwrap());
    assert_eq!(dir_of("extra"), config.join("packs/tools.d/a-pack").to_str().unwrap());
    // A relative XDG_CONFIG_HOME is ignored (the XDG rule): HOME/.config is used.
    test(Some(std::path::Path::new("relative/config"))).args(["run", "mine"]).run().success();
    // An explicit search path is exactly what it says.
    let elsewhere = Packs::new().manifest("other", simple("other", "x"));
    test(None).packs_dir(&elsewhere).args(["run", "mine"]).run().code(1);
    test(None).env("PACKS_PATH", elsewhere.path()).args(["run", "mine"]).run().code(1);
}
