//! Executable tools: anything at the top of a pack directory that answers
//! `--describe` with a describe JSON.

use std::time::Duration;

use serde_json::json;

use crate::common::{Packs, Test};

/// A shell tool: prints `describe` for `--describe`, else runs `body`.
fn script(describe: &str, body: &str) -> String {
    format!("#!/bin/sh\nif [ \"$1\" = \"--describe\" ]; then\n  cat <<'JSON'\n{describe}\nJSON\n  exit 0\nfi\n{body}\n")
}

const ECHO_DESCRIBE: &str = r#"{"name": "echo_call", "description": "Echo the call back", "parameters": {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"], "additionalProperties": false}}"#;

#[test]
fn a_good_executable_is_listed_described_and_called() {
    let packs = Packs::new().executable("echo_call", &script(ECHO_DESCRIBE, "printf 'argc=%s arg=%s' \"$#\" \"$1\""));
    let exe = packs.join("echo_call").display().to_string();

    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success().stderr_eq("");
    assert_eq!(
        out.json(),
        json!([{"name": "echo_call", "kind": "executable", "read_only": false, "description": "Echo the call back", "source": exe,
                "pack_dir": packs.path().display().to_string()}])
    );

    let describe = Test::new().packs_dir(&packs).args(["describe", "echo_call"]).run().success().json();
    assert_eq!(describe["name"], "echo_call");
    assert_eq!(describe["parameters"], serde_json::from_str::<serde_json::Value>(ECHO_DESCRIBE).unwrap()["parameters"]);

    Test::new()
        .packs_dir(&packs)
        .args(["run", "echo_call", "--arg", "msg=hi there; $(id)"])
        .run()
        .success()
        .stdout_eq("argc=1 arg={\"msg\":\"hi there; $(id)\"}\n")
        .stderr_eq("");

    // Its schema is enforced before it runs.
    Test::new()
        .packs_dir(&packs)
        .args(["run", "echo_call", "--arg", "msg=x", "--arg", "other=1"])
        .run()
        .code(1)
        .stdout_eq("")
        .stderr_eq(
            "error: invalid arguments for `echo_call`: `other`: unknown argument `other`; the tool takes: msg\n",
        );
    Test::new()
        .packs_dir(&packs)
        .args(["run", "echo_call"])
        .run()
        .code(1)
        .stderr_eq("error: invalid arguments for `echo_call`: `msg`: `msg` is required\n");
}

#[test]
fn an_executable_states_its_policy_and_output() {
    let describe = r#"{"name": "counter", "description": "Count", "parameters": {"type": "object"},
  "policy": {"read_only": true, "timeout_secs": 3, "allowed_exit_codes": [0, 3]},
  "output": {"format": "json", "extract_field": "/data/n", "template": "n is {{output}}"}}"#;
    let packs = Packs::new().executable("counter", &script(describe, "echo '{\"data\": {\"n\": 41}}'; exit 3"));
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success();
    assert_eq!(out.json()[0]["read_only"], true);
    let out = Test::new().packs_dir(&packs).args(["run", "counter", "--json"]).run();
    out.success();
    let r = out.json();
    assert_eq!(
        (r["ok"].clone(), r["exit_code"].clone(), r["output"].clone()),
        (json!(true), json!(3), json!("n is 41"))
    );
}

#[test]
fn a_failing_executable_exits_2_with_its_stderr() {
    let packs = Packs::new().executable("echo_call", &script(ECHO_DESCRIBE, "echo 'it broke' >&2; exit 5"));
    Test::new()
        .packs_dir(&packs)
        .args(["run", "echo_call", "--arg", "msg=x"])
        .run()
        .code(2)
        .stdout_eq("")
        .stderr_eq("it broke\nerror: tool `echo_call`: the tool exited with code 5 (allowed exit codes: [0])\n");
}

#[test]
fn broken_describes_are_skipped_with_a_reason() {
    let packs = Packs::new()
        .executable("good", &script(ECHO_DESCRIBE, "echo ok"))
        .executable("fails", "#!/bin/sh\necho 'describe is broken' >&2\nexit 3\n")
        .executable("slow", "#!/bin/sh\nsleep 30\n")
        .executable("silent", "#!/bin/sh\nexit 0\n")
        .executable("not_json", "#!/bin/sh\necho 'name: not json'\n")
        .executable("no_params", "#!/bin/sh\necho '{\"name\": \"no_params\", \"description\": \"d\"}'\n")
        .executable("bad_name", "#!/bin/sh\necho '{\"name\": \"Bad Name\", \"description\": \"d\", \"parameters\": {\"type\": \"object\"}}'\n")
        .executable("not_object", "#!/bin/sh\necho '{\"name\": \"n\", \"description\": \"d\", \"parameters\": {\"type\": \"string\"}}'\n")
        .executable("no_shebang", "echo this is not a script\n");
    let at = |f: &str| packs.join(f).display().to_string();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success();
    // Executables are described in parallel, so one slow describe costs one timeout, not one each.
    assert!(out.elapsed >= Duration::from_secs(5), "the describe timeout is 5s: {:?}", out.elapsed);
    // Ended by that timeout, not by the script's `sleep 30`.
    assert!(out.elapsed < Duration::from_secs(25), "took {:?}", out.elapsed);
    assert_eq!(out.json().as_array().unwrap().len(), 1);
    assert_eq!(out.json()[0]["name"], "echo_call");
    let skipped = |f: &str, why: &str| format!("warning[bad-describe]: {}: skipped executable: {why}", at(f));
    out.stderr_contains(&skipped("fails", "`--describe` exited with code 3: describe is broken\n"))
        .stderr_contains(&skipped("slow", "`--describe` did not answer within 5s\n"))
        .stderr_contains(&skipped("silent", "its --describe printed nothing\n"))
        .stderr_contains(&skipped("not_json", "its --describe output is not JSON"))
        .stderr_contains(&skipped("no_params", "its --describe output has no `parameters`\n"))
        .stderr_contains(&skipped("bad_name", "its --describe name `Bad Name` is not snake_case"))
        .stderr_contains(&skipped("not_object", "its --describe `parameters` is not a JSON-Schema object"))
        .stderr_contains(&format!("warning[bad-describe]: {}: skipped executable: ", at("no_shebang")));
    assert_eq!(out.stderr.lines().count(), 8, "{}", out.stderr);
}

/// A shell tool that reports each `--describe` it answers to `reports` (a describe runs
/// confined: it cannot note it in a file).
fn counted(reports: &crate::common::Reports, description: &str) -> String {
    let describe =
        json!({"name": "counted", "description": description, "parameters": {"type": "object", "properties": {}}});
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--describe\" ]; then\n  {}\n  echo '{describe}'\n  exit 0\nfi\necho ran\n",
        reports.shell("described")
    )
}

#[test]
fn describes_are_cached_while_the_executable_is_the_same_file() {
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let reports = crate::common::Reports::new();
    let packs = Packs::new().executable("counted", &counted(&reports, "first"));
    let total = std::cell::Cell::new(0);
    let describes = || {
        total.set(total.get() + reports.take().len());
        total.get()
    };
    let packs_with = |cache: &std::path::Path| Test::new().packs_dir(&packs).env("PACKS_CACHE_DIR", cache);
    let describe = || packs_with(&cache).args(["describe", "counted"]).run().success().json()["description"].clone();

    // Just written: asked, but not kept (a change in the same clock tick could go unseen).
    assert_eq!(describe(), "first");
    assert_eq!(describes(), 1);
    let describes_kept = || {
        std::fs::read_dir(&cache).map_or(0, |d| {
            d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("describe-")).count()
        })
    };
    assert_eq!(describes_kept(), 0, "nothing is cached for a file that just changed");

    crate::common::settle();
    assert_eq!(describe(), "first");
    assert_eq!(describes(), 2);
    // Kept now: describe, run and list take the answer from the cache.
    assert_eq!(describe(), "first");
    packs_with(&cache).args(["run", "counted"]).run().success().stdout_eq("ran\n");
    packs_with(&cache).args(["list"]).run().success().stdout_contains("counted");
    assert_eq!(describes(), 2);

    // Changing the file makes packs ask again.
    std::fs::write(packs.join("counted"), counted(&reports, "second, longer")).unwrap();
    assert_eq!(describe(), "second, longer");
    assert_eq!(describes(), 3);

    // An empty PACKS_CACHE_DIR turns the cache off; lint always asks.
    let before = describes();
    packs_with(std::path::Path::new("")).args(["describe", "counted"]).run().success();
    Test::new().args(["lint"]).arg(packs.path()).env("PACKS_CACHE_DIR", &cache).run().success();
    assert_eq!(describes(), before + 2);
}

#[test]
fn an_executables_schema_is_used_and_shown_verbatim() {
    // No `additionalProperties`: the tool accepts keys it does not list, and packs adds nothing.
    let describe = r#"{"name": "open", "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}"#;
    let schema = serde_json::from_str::<serde_json::Value>(describe).unwrap()["parameters"].clone();
    let packs = Packs::new().executable("open", &script(describe, "printf '%s' \"$1\""));
    Test::new()
        .packs_dir(&packs)
        .args(["run", "open", r#"{"city": "x", "extra": 1}"#])
        .run()
        .success()
        .stdout_eq("{\"city\":\"x\",\"extra\":1}\n");
    let describe = Test::new().packs_dir(&packs).args(["describe", "open"]).run().success().json();
    assert_eq!(describe["parameters"], schema);
    for (format, pointer) in
        [("mcp", "/0/inputSchema"), ("anthropic", "/0/input_schema"), ("openai", "/0/function/parameters")]
    {
        let out = Test::new().packs_dir(&packs).args(["catalog", "--format", format]).run().success().json();
        assert_eq!(out.pointer(pointer), Some(&schema), "{format}: {out}");
    }
}
