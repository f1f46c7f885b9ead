//! Safe dispatch: tiers, agent rules, leading-dash rejection, path confinement,
//! the minimal environment.

use serde_json::json;

use crate::common::{Packs, Test};

fn tier_of(packs: &Packs, name: &str) -> String {
    let out = Test::new().packs_dir(packs).args(["run", name, "--dry-run", "--json"]).run();
    out.success().json()["tier"].as_str().unwrap().to_owned()
}

#[test]
fn tiers_are_derived_or_stated() {
    let packs = Packs::new()
        .manifest("ro", json!({"name": "ro", "description": "d", "command": "true"}))
        .manifest(
            "ws",
            json!({"name": "ws", "description": "d", "parameters": {"p": {"type": "string", "format": "path"}},
                   "command": "touch -- {{p:x}}", "policy": {"read_only": false}}),
        )
        .manifest("net", json!({"name": "net", "description": "d", "command": "true", "policy": {"read_only": false, "requires_network": true}}))
        .manifest("sys", json!({"name": "sys", "description": "d", "command": "true", "policy": {"read_only": false}}))
        .manifest("conf", json!({"name": "conf", "description": "d", "command": "true", "policy": {"confirm_before_run": true}}))
        .manifest("stated", json!({"name": "stated", "description": "d", "command": "true", "policy": {"tier": "system"}}));
    for (name, tier) in [
        ("ro", "read_only"),
        ("ws", "workspace"),
        ("net", "system"),
        ("sys", "system"),
        ("conf", "elevated"),
        ("stated", "system"),
    ] {
        assert_eq!(tier_of(&packs, name), tier, "{name}");
    }
}

fn agent(toml: &str) -> Packs {
    Packs::new().file("a/soul.md", "S").file("a/agent.toml", toml)
}

fn tools() -> Packs {
    Packs::new().manifest("look", json!({"name": "look", "description": "d", "command": "echo looked"})).manifest(
        "change",
        json!({"name": "change", "description": "d", "command": "echo changed", "policy": {"read_only": false}}),
    )
}

fn run_as(agents: &Packs, tool: &str, extra: &[&str]) -> crate::common::Output {
    let tools = tools();
    Test::new()
        .env("PACKS_AGENTS", agents.path())
        .packs_dir(&tools)
        .args(["--agent", "a", "run", tool])
        .args(extra)
        .run()
}

#[test]
fn agent_max_tier_denies_above_it() {
    let a = agent("max_tier = \"read_only\"\n");
    run_as(&a, "look", &[]).success().stdout_eq("looked\n");
    run_as(&a, "change", &[]).code(3).stderr_contains("its tier system is above agent `a`'s max_tier read_only");
    let out = run_as(&a, "change", &["--json"]);
    assert_eq!(out.code(3).json()["error"]["tier"], "system");
}

#[test]
fn agent_deny_allow_and_ask() {
    run_as(&agent("deny = [\"ch*\"]\n"), "change", &[]).code(3).stderr_contains("does not allow");
    run_as(&agent("tools = [\"look\"]\n"), "change", &[]).code(3);
    run_as(&agent("tools = [\"look\"]\n"), "look", &[]).success();
    let ask = agent("ask = [\"look\"]\n");
    run_as(&ask, "look", &[]).code(3).stderr_contains("asks for approval");
    run_as(&ask, "look", &["--yes"]).success().stdout_eq("looked\n");
    let t = tools();
    Test::new()
        .env("PACKS_AGENTS", ask.path())
        .packs_dir(&t)
        .args(["--agent", "a", "run", "look", "--dry-run"])
        .run()
        .success()
        .stdout_contains("needs approval: agent `a` asks for approval of it");
    run_as(&agent("max_tier = \"root\"\n"), "look", &[]).code(1).stderr_contains("unknown tier `root`");
}

#[test]
fn leading_dashes_are_rejected_unless_guarded() {
    let packs = Packs::new()
        .manifest("bare", json!({"name": "bare", "description": "d", "parameters": {"f": {"type": "string"}}, "command": "echo {{f}}"}))
        .manifest("guarded", json!({"name": "guarded", "description": "d", "parameters": {"f": {"type": "string"}}, "command": "echo -- {{f}}"}))
        .manifest(
            "allowed",
            json!({"name": "allowed", "description": "d", "parameters": {"f": {"type": "string", "allow_leading_dash": true}}, "command": "echo {{f}}"}),
        );
    let out = Test::new().packs_dir(&packs).args(["run", "bare", "--json", "--arg", "f=--output=/etc/passwd"]).run();
    let e = out.code(1).json();
    assert_eq!(e["error"]["kind"], "validation");
    assert_eq!(e["error"]["errors"][0]["field"], "f");
    Test::new()
        .packs_dir(&packs)
        .args(["run", "bare", "--arg", "f=fine-dash"])
        .run()
        .success()
        .stdout_eq("fine-dash\n");
    Test::new().packs_dir(&packs).args(["run", "guarded", "--arg", "f=-n"]).run().success().stdout_eq("-- -n\n");
    Test::new().packs_dir(&packs).args(["run", "allowed", "--arg", "f=-e"]).run().success();
}

/// Whether `packs run NAME ARGS --dry-run` refuses the call as a value that would become
/// an option, naming `field`.
fn refused_as_option(packs: &Packs, name: &str, args: serde_json::Value, field: &str) -> bool {
    let out = Test::new().packs_dir(packs).args(["run", name, "--dry-run", "--json"]).arg(args.to_string()).run();
    out.no_panic();
    match out.status.code() {
        Some(0) => false,
        Some(1) => {
            let e = out.json();
            assert_eq!(e["error"]["kind"], "validation", "{name}: {}", out.stdout());
            assert_eq!(e["error"]["errors"][0]["field"], field, "{name}: {}", out.stdout());
            assert!(e["error"]["errors"][0]["message"].as_str().unwrap().contains("starts with `-`"));
            true
        }
        other => panic!("{name}: exit {other:?}: {}", out.stderr),
    }
}

#[test]
fn a_value_never_becomes_an_option_whatever_the_shape() {
    let string = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let tool = |name: &str, parameters: serde_json::Value, args: serde_json::Value| json!({"name": name, "description": "d", "parameters": parameters, "command": {"program": "true", "args": args}});
    let packs = Packs::new()
        .manifest("one_group", tool("one_group", json!({"v": string}), json!([["{{v}}"]])))
        .manifest("pair_group", tool("pair_group", json!({"v": string}), json!([["--name", "{{v}}"]])))
        .manifest("two_parts", tool("two_parts", json!({"name": string, "ext": string}), json!(["{{name}}{{ext}}"])))
        .manifest("number", tool("number", json!({"pid": {"type": "integer"}}), json!(["{{pid}}"])))
        .manifest("json_number", tool("json_number", json!({"n": {"type": "number"}}), json!(["{{json n}}"])))
        .manifest("splat", tool("splat", json!({"vs": strings}), json!(["{{vs}}"])))
        .manifest("per_item", tool("per_item", json!({"tags": strings}), json!([["--tag", "{{tags}}"]])))
        .manifest("each", tool("each", json!({"vs": strings}), json!(["{{#each vs}}{{this}}{{/each}}"])))
        .manifest("triple", tool("triple", json!({"vs": strings}), json!(["{{#each vs}}{{{this}}}{{/each}}"])))
        .manifest("in_block", tool("in_block", json!({"v": string}), json!(["{{#if v}}{{v}}{{/if}}"])))
        .manifest("url", tool("url", json!({"v": string}), json!(["{{urlencode v}}"])))
        .manifest("find", program_tool("find", "find", json!({"dir": string}), json!(["--", "{{dir}}"])))
        .manifest("context", tool("context", json!({}), json!(["{{context.selection}}"])))
        .manifest("late_dash", tool("late_dash", json!({"v": string}), json!([["{{v}}", "--"]])))
        .manifest("dash_value", tool("dash_value", json!({"v": string}), json!(["{{v}}"])));
    for (name, args, field) in [
        ("one_group", json!({"v": "-x"}), "v"),
        ("pair_group", json!({"v": "--output=/etc/passwd"}), "v"),
        ("two_parts", json!({"name": "-rf", "ext": ".txt"}), "name"),
        ("two_parts", json!({"name": "", "ext": "-rf"}), "ext"),
        ("number", json!({"pid": -1}), "pid"),
        ("json_number", json!({"n": -1.5}), "n"),
        ("splat", json!({"vs": ["a", "-x"]}), "vs"),
        ("per_item", json!({"tags": ["ok", "-x"]}), "tags"),
        ("each", json!({"vs": ["-x"]}), "vs"),
        ("triple", json!({"vs": ["-x"]}), "vs"),
        ("in_block", json!({"v": "-x"}), "v"),
        ("url", json!({"v": "-x"}), "v"),
        // find reads `-delete` after `--` as an expression: `--` does not guard it.
        ("find", json!({"dir": "-delete"}), "dir"),
        // A `--` after the value does not guard it; a `--` a value renders ends nothing.
        ("late_dash", json!({"v": "-x"}), "v"),
        ("dash_value", json!({"v": "--"}), "v"),
    ] {
        assert!(refused_as_option(&packs, name, args.clone(), field), "{name} {args} was not refused");
    }
    for (name, args) in [
        ("two_parts", json!({"name": "a", "ext": "-x"})),
        ("number", json!({"pid": 1})),
        ("pair_group", json!({"v": "x-"})),
    ] {
        assert!(!refused_as_option(&packs, name, args.clone(), ""), "{name} {args} was refused");
    }
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "context", "--context", "selection=-rf", "--dry-run", "--json"])
        .run();
    assert_eq!(out.code(1).json()["error"]["errors"][0]["field"], "context.selection");
    // A context value a block writes (`../context.KEY` from inside `{{#each}}`) is the
    // client's too; `@root` and the like, which reached it unseen, are refused at load.
    let dashed = json!({"type": "array", "items": {"type": "string"}, "allow_leading_dash": true});
    let packs = Packs::new()
        .manifest(
            "outer",
            tool("outer", json!({"vs": dashed}), json!(["{{#each vs}}{{../context.selection}}{{/each}}"])),
        )
        .manifest(
            "root",
            tool("root", json!({}), json!(["{{#if @root.context.url}}{{@root.context.selection}}{{/if}}"])),
        );
    let out = Test::new()
        .packs_dir(&packs)
        .args(["run", "outer", "--context", "selection=-rf", "--dry-run", "--json", r#"{"vs": ["a"]}"#])
        .run();
    assert_eq!(out.code(1).json()["error"]["errors"][0]["field"], "context.selection", "{}", out.stdout());
    let out = Test::new().packs_dir(&packs).args(["run", "root", "--context", "selection=-rf", "--dry-run"]).run();
    out.no_panic().stderr_contains("`@root.context.url` is not supported in tool templates");
}

#[test]
fn values_after_the_end_of_options_may_start_with_a_dash() {
    let string = json!({"type": "string"});
    let packs = Packs::new()
        .manifest("shell", program_tool("shell", "sh", json!({"v": string}), json!(["-c", "printf '%s\\n' \"$1\"", "sh", "{{v}}"])))
        .manifest("python", program_tool("python", "python3", json!({"v": string}), json!(["-c", "import sys; print(sys.argv[1])", "{{v}}"])))
        .manifest("guarded", program_tool("guarded", "printf", json!({"v": string}), json!(["%s\\n", "--", "{{v}}"])))
        .manifest(
            "defaults",
            json!({"name": "defaults", "description": "d", "parameters": {"flag": {"type": "string", "default": "-x"}},
                   "command": {"program": "printf", "args": ["%s\\n", "{{flag}}", "{{env.PACKS_TEST_DASH}}"]}}),
        )
        .manifest(
            "allowed",
            json!({"name": "allowed", "description": "d", "parameters": {"v": {"type": "string", "allow_leading_dash": true}},
                   "command": {"program": "printf", "args": ["%s\\n", ["-v", "{{v}}"]]}}),
        );
    Test::new().packs_dir(&packs).args(["run", "shell", "--arg", "v=-rf"]).run().success().stdout_eq("-rf\n");
    Test::new().packs_dir(&packs).args(["run", "python", "--arg", "v=-rf"]).run().success().stdout_eq("-rf\n");
    Test::new().packs_dir(&packs).args(["run", "guarded", "--arg", "v=-n"]).run().success().stdout_eq("--\n-n\n");
    // The manifest's default and the operator's environment are not the model's values.
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_DASH", "-y")
        .args(["run", "defaults"])
        .run()
        .success()
        .stdout_eq("-x\n-y\n");
    Test::new().packs_dir(&packs).args(["run", "allowed", "--arg", "v=-e"]).run().success().stdout_eq("-v\n-e\n");
}

fn program_tool(
    name: &str,
    program: &str,
    parameters: serde_json::Value,
    args: serde_json::Value,
) -> serde_json::Value {
    json!({"name": name, "description": "d", "parameters": parameters, "command": {"program": program, "args": args}})
}

#[test]
fn path_parameters_stay_in_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("inside")).unwrap();
    std::fs::write(ws.path().join("inside/file"), "x").unwrap();
    std::os::unix::fs::symlink("/etc", ws.path().join("out")).unwrap();
    let packs = Packs::new().manifest(
        "show",
        json!({"name": "show", "description": "d", "parameters": {"p": {"type": "string", "format": "path", "required": true}},
               "command": "ls -d -- {{p}}"}),
    );
    let run = |p: &str| {
        Test::new()
            .packs_dir(&packs)
            .arg("--workspace")
            .arg(ws.path())
            .args(["run", "show", "--arg"])
            .arg(format!("p={p}"))
            .run()
    };
    run("inside/file").success().stdout_eq("inside/file\n");
    run("inside/../inside").success();
    run("not-yet/created").code(2); // allowed by confinement; ls fails because it does not exist
    for escape in ["..", "../", "inside/../../x", "/etc/passwd", "out/passwd", "out", "nope/../../x"] {
        run(escape).code(1).stderr_contains("`p`").stderr_contains("workspace").no_panic();
    }
}

#[test]
fn tools_get_a_minimal_environment() {
    let packs = Packs::new()
        .manifest("env", json!({"name": "env", "description": "d", "command": "env"}))
        .manifest("env_pass", json!({"name": "env_pass", "description": "d", "command": "env", "policy": {"env_passthrough": ["PACKS_TEST_PASS"]}}));
    let out = Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_LEAK", "secret-ish")
        .env("PACKS_TEST_PASS", "ok")
        .args(["run", "env"])
        .run();
    out.success()
        .stdout_lacks("PACKS_TEST_LEAK")
        .stdout_lacks("PACKS_TEST_PASS")
        .stdout_contains("PATH=")
        .stdout_contains("GIT_TERMINAL_PROMPT=0\n")
        .stdout_contains("PAGER=cat\n")
        .stdout_contains("GIT_EDITOR=true\n");
    for line in out.stdout().lines() {
        let name = line.split('=').next().unwrap();
        assert!(
            ["PATH", "HOME", "LANG", "TERM", "TMPDIR", "GIT_TERMINAL_PROMPT", "PAGER", "GIT_EDITOR", "PACKS_CALL"]
                .contains(&name)
                || name.starts_with("LC_"),
            "unlisted variable reached the tool: {line}"
        );
    }
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_PASS", "ok")
        .args(["run", "env_pass"])
        .run()
        .success()
        .stdout_contains("PACKS_TEST_PASS=ok\n");
}

#[test]
fn audit_log_has_one_line_per_call_with_secrets_masked() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let packs = Packs::new()
        .manifest(
            "greet",
            json!({"name": "greet", "description": "d", "parameters": {"who": {"type": "string"}},
                   "command": {"program": "echo", "args": ["--", "{{who:world}}", "{{secret.PACKS_TEST_KEY}}"]}}),
        )
        .manifest(
            "careful",
            json!({"name": "careful", "description": "d", "command": "true", "policy": {"confirm_before_run": true}}),
        );
    let run = |args: &[&str]| {
        Test::new().packs_dir(&packs).env("PACKS_TEST_KEY", "hunter2").arg("--log").arg(&log).args(args).run()
    };
    run(&["run", "greet", "--arg", "who=you"]).success().stdout_eq("-- you ***\n");
    run(&["run", "careful"]).code(3);
    run(&["run", "careful", "--yes"]).success();
    run(&["run", "greet", "--arg", "nope=1"]).code(1);
    run(&["run", "no_such_tool"]).code(1);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("hunter2"), "a secret reached the audit log: {text}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines[0]["tool"], "greet");
    assert_eq!(lines[0]["decision"], "allowed");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["exit_code"], 0);
    assert_eq!(lines[0]["argv"], json!(["echo", "--", "you", "***"]));
    assert!(lines[0]["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["decision"], "denied");
    assert_eq!(lines[1]["outcome"], "denied");
    assert_eq!(lines[1]["tier"], "elevated");
    assert_eq!(lines[2]["decision"], "approved");
    assert_eq!(lines[3]["outcome"], "validation");
    assert_eq!(lines[3]["decision"], "allowed", "bad arguments are audited with the rules' decision");
    assert_eq!(lines[4]["tool"], "no_such_tool");
    assert_eq!(lines[4]["outcome"], "not_found");
    // A log that cannot be written stops the call before it runs.
    let marker = dir.path().join("ran");
    let touch = Packs::new().manifest(
        "touch",
        json!({"name": "touch", "description": "d", "parameters": {"f": {"type": "string"}}, "command": "touch -- {{f}}", "policy": {"read_only": false}}),
    );
    Test::new()
        .packs_dir(&touch)
        .args(["--log", "/nonexistent-dir/audit.jsonl", "run", "touch", "--arg"])
        .arg(format!("f={}", marker.display()))
        .run()
        .code(1)
        .stderr_contains("cannot write the audit log");
    assert!(!marker.exists());

    // A log that opens but fails to take the line (a full disk) is reported after
    // the call, which has run: its result and exit code stand.
    if std::path::Path::new("/dev/full").exists() {
        Test::new()
            .packs_dir(&touch)
            .args(["--log", "/dev/full", "run", "touch", "--arg"])
            .arg(format!("f={}", marker.display()))
            .run()
            .success()
            .stderr_eq(
                "warning: cannot write the audit log /dev/full: No space left on device (os error 28); the call is not in the log\n",
            );
        assert!(marker.exists());
    }
}

#[test]
fn stream_prints_chunks_as_they_arrive() {
    let packs = Packs::new().manifest(
        "slow",
        json!({"name": "slow", "description": "d", "command": {"program": "sh", "args": ["-c", "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three"]},
               "output": {"template": "shaped: {{output}}"}}),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "slow", "--stream"]).run();
    out.success().stdout_eq("one\nthree\n").stderr_eq("two\n");
    Test::new().packs_dir(&packs).args(["run", "slow"]).run().success().stdout_eq("shaped: one\nthree\n");
}

#[test]
fn secrets_file_feeds_secret_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secrets");
    std::fs::write(&file, "# test secrets\nPACKS_FILE_TOKEN=from-file\n\n").unwrap();
    let packs = Packs::new().manifest(
        "show",
        json!({"name": "show", "description": "d", "command": {"program": "sh", "args": ["-c", "echo \"got $1\"", "sh", "{{secret.PACKS_FILE_TOKEN}}"]}}),
    );
    Test::new()
        .packs_dir(&packs)
        .arg("--secrets-file")
        .arg(&file)
        .args(["run", "show"])
        .run()
        .success()
        .stdout_eq("got ***\n");
    Test::new().packs_dir(&packs).args(["run", "show"]).run().code(1).stderr_contains("PACKS_FILE_TOKEN");
    std::fs::write(&file, "not a pair\n").unwrap();
    Test::new()
        .packs_dir(&packs)
        .arg("--secrets-file")
        .arg(&file)
        .args(["run", "show"])
        .run()
        .code(1)
        .stderr_contains(":1: expected KEY=value");
}

#[test]
fn status_callback_reports_phases_and_chunks_in_order() {
    use std::sync::Mutex;
    let packs = Packs::new().manifest(
        "two",
        json!({"name": "two", "description": "d", "command": {"program": "sh", "args": ["-c", "printf a; sleep 0.2; printf b"]}}),
    );
    let catalog = packs::Catalog::load(&packs::SearchPath::dirs([packs.path()]));
    let seen = Mutex::new(Vec::new());
    let on_status = |s: packs::Status<'_>| {
        seen.lock().unwrap().push(match s {
            packs::Status::Phase(p) => format!("{p:?}"),
            packs::Status::Output { chunk, .. } => String::from_utf8_lossy(chunk).into_owned(),
            packs::Status::Spawned { pid, process } => {
                assert!(pid > 0);
                assert_eq!(process.pid(), pid);
                "spawned".into()
            }
            _ => "other".into(),
        });
    };
    let r = packs::Call::new("two", json!({})).on_status(&on_status).run(&catalog).unwrap();
    assert!(r.ok);
    assert_eq!(seen.into_inner().unwrap(), ["Validate", "Authorize", "Execute", "spawned", "a", "b", "Complete"]);
}

#[test]
fn approval_on_a_pseudo_terminal() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    crate::common::require("script"); // util-linux's (Debian: bsdutils)
    let packs = Packs::new().manifest(
        "careful",
        json!({"name": "careful", "description": "d", "command": "echo ran", "policy": {"confirm_before_run": true}}),
    );
    for (answer, code, ran) in [("y\n", 0, true), ("n\n", 3, false)] {
        // `script` gives packs a pseudo-terminal, so it asks; the answer is typed after the prompt.
        let command = format!("{} --packs {} run careful", crate::common::PACKS, packs.path().display());
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("PACKS_PATH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        child.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("`careful` (tier elevated) needs approval"), "{text}");
        assert!(text.contains("Run it? [y/N]"), "{text}");
        assert_eq!(text.contains("\nran"), ran, "{text}");
        assert_eq!(out.status.code(), Some(code), "{text}");
    }
}

#[test]
fn agent_packs_are_its_search_path() {
    let tools =
        Packs::new().manifest("only_here", json!({"name": "only_here", "description": "d", "command": "echo here"}));
    let agents = Packs::new()
        .file("a/soul.md", "S")
        .file("a/agent.toml", &format!("packs = [{:?}]\n", tools.path().display().to_string()));
    // No --packs: the agent's directories are the search path.
    Test::new()
        .env("PACKS_AGENTS", agents.path())
        .args(["--agent", "a", "run", "only_here"])
        .run()
        .success()
        .stdout_eq("here\n");
}

#[test]
fn secrets_are_masked_in_streamed_output() {
    let packs = Packs::new().manifest(
        "leak",
        json!({"name": "leak", "description": "d",
               "command": {"program": "sh", "args": ["-c", "echo \"out $1\"; echo \"err $1\" >&2", "sh", "{{secret.PACKS_STREAM_KEY}}"]}}),
    );
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_STREAM_KEY", "s3cr3t-value")
        .args(["run", "leak", "--stream"])
        .run()
        .success()
        .stdout_eq("out ***\n")
        .stderr_eq("err ***\n");
}

#[test]
fn a_secret_split_across_writes_is_still_masked_when_streaming() {
    let packs = Packs::new().manifest(
        "split",
        json!({"name": "split", "description": "d",
               "command": {"program": "sh", "args": ["-c", "printf 'key=%s' \"${1%????}\"; sleep 0.2; printf '%s done\\n' \"${1#????}\"", "sh", "{{secret.PACKS_SPLIT_KEY}}"]}}),
    );
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_SPLIT_KEY", "hunter22")
        .args(["run", "split", "--stream"])
        .run()
        .success()
        .stdout_eq("key=*** done\n");
}

#[test]
fn a_streamed_line_comes_out_whole_while_the_tool_runs_with_a_secret_in_play() {
    // The tool prints a line, then waits (10 s at most) until the test has read that line
    // from packs' stdout: with a secret in play, the line must still come out whole, while
    // the tool runs (only an end that could begin the secret is held back).
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = r#"echo "deploying $1"; i=0; while [ ! -e "$3" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
        if [ -e "$3" ]; then echo "token $2 accepted" >&2; else echo "nobody read the line in time" >&2; fi"#;
    let packs = Packs::new().manifest(
        "deploy",
        json!({"name": "deploy", "description": "d",
               "parameters": {"branch": {"type": "string"}, "go": {"type": "string"}},
               "command": {"program": "sh", "args": ["-c", script, "sh", "{{branch}}", "{{secret.PACKS_DEPLOY_TOKEN}}", "{{go}}"]}}),
    );
    let mut child = std::process::Command::new(crate::common::PACKS)
        .arg("--packs")
        .arg(packs.path())
        .args(["run", "deploy", "--arg", "branch=main", "--arg"])
        .arg(format!("go={}", go.display()))
        .arg("--stream")
        .current_dir(dir.path())
        .env("PACKS_DEPLOY_TOKEN", "s3cr3t-deploy-token")
        .env("PACKS_CACHE_DIR", "")
        .env("XDG_CONFIG_HOME", dir.path().join("no-config"))
        .env_remove("PACKS_PATH")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    std::fs::write(&go, "").unwrap();
    assert_eq!(line, "deploying main\n");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!((rest.as_str(), String::from_utf8_lossy(&out.stderr).as_ref()), ("", "token *** accepted\n"));
}

#[test]
fn relative_paths_are_confined_where_the_tool_reads_them() {
    let ws = tempfile::tempdir().unwrap();
    let packs = Packs::new().manifest(
        "rooted",
        json!({"name": "rooted", "description": "d", "parameters": {"p": {"type": "string", "format": "path", "required": true}},
               "command": {"program": "ls", "args": ["-d", "--", "{{p}}"], "cwd": "/"}}),
    );
    Test::new()
        .packs_dir(&packs)
        .arg("--workspace")
        .arg(ws.path())
        .args(["run", "rooted", "--arg", "p=etc/passwd"])
        .run()
        .code(1)
        .stderr_contains("outside the workspace");
}

#[test]
fn failures_carry_a_structured_error() {
    let packs = Packs::new()
        .manifest("fails", json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "echo boom >&2; exit 4"]}}))
        .manifest("hangs", json!({"name": "hangs", "description": "d", "command": "sleep 5", "policy": {"timeout_secs": 1}}));
    let out = Test::new().packs_dir(&packs).args(["run", "fails", "--json"]).run();
    let v = out.code(2).json();
    assert_eq!(v["failure"]["kind"], "execution");
    assert_eq!(v["failure"]["exit_code"], 4);
    assert_eq!(v["failure"]["stderr"], "boom\n");
    assert_eq!(v["failure"]["retryable"], false);
    let out = Test::new().packs_dir(&packs).args(["run", "hangs", "--json"]).run();
    let v = out.code(124).json();
    assert_eq!(v["failure"]["kind"], "timeout");
    assert_eq!(v["failure"]["retryable"], true);
    assert!(v["failure"]["elapsed_ms"].as_u64().unwrap() >= 900);
    // A success has no failure.
    let ok = Packs::new().manifest("fine", json!({"name": "fine", "description": "d", "command": "true"}));
    assert!(Test::new().packs_dir(&ok).args(["run", "fine", "--json"]).run().success().json().get("failure").is_none());
}

/// A workspace with a subdirectory, a dangling link out of it, a link to a magic
/// directory, and a writing tool that runs at the workspace root.
fn writing_workspace() -> (tempfile::TempDir, tempfile::TempDir, Packs) {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("created"), ws.path().join("dangling")).unwrap();
    std::os::unix::fs::symlink("/proc/self/cwd", ws.path().join("here")).unwrap();
    let packs = Packs::new().manifest(
        "touch_at_root",
        json!({"name": "touch_at_root", "description": "d",
               "parameters": {"p": {"type": "string", "format": "path", "required": true},
                              "more": {"type": "array", "items": {"type": "string", "format": "path"}}},
               "command": {"program": "touch", "args": ["--", "{{p}}", "{{more}}"], "cwd": ws.path().to_str().unwrap()},
               "policy": {"read_only": false}}),
    );
    (ws, outside, packs)
}

#[test]
fn confinement_judges_links_by_their_target_and_refuses_magic_links() {
    let (ws, outside, packs) = writing_workspace();
    // packs runs in a subdirectory; the tool runs at the workspace root.
    let run = |args: serde_json::Value| {
        Test::new()
            .packs_dir(&packs)
            .current_dir(ws.path().join("sub"))
            .arg("--workspace")
            .arg(ws.path())
            .args(["run", "touch_at_root"])
            .arg(args.to_string())
            .run()
    };
    let cases = [
        // /proc/self/cwd is packs' directory (inside) for packs, the root for the tool.
        (json!({"p": "/proc/self/cwd/../escaped"}), "/proc/self/cwd"),
        (json!({"p": "/dev/fd/0"}), "/dev/fd"),
        (json!({"p": "here/../escaped"}), "goes through /proc"),
        // A dangling link is where a writing tool would create the file: outside.
        (json!({"p": "dangling"}), "outside the workspace"),
        (json!({"p": "sub/../dangling"}), "outside the workspace"),
        // Items of an array of paths are confined too.
        (json!({"p": "fine", "more": ["ok", "dangling"]}), "outside the workspace"),
    ];
    for (args, why) in cases {
        run(args.clone()).code(1).stderr_contains("`").stderr_contains(why).no_panic();
        assert!(!outside.path().join("created").exists(), "{args}: a file was created outside the workspace");
        assert!(!ws.path().join("escaped").exists() && !ws.path().parent().unwrap().join("escaped").exists());
    }
    // Paths that stay inside still work, relative to where the tool runs.
    run(json!({"p": "made", "more": ["sub/also"]})).success();
    assert!(ws.path().join("made").exists() && ws.path().join("sub/also").exists());
}

#[test]
fn an_audit_log_that_is_a_fifo_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let packs = Packs::new().manifest("t", json!({"name": "t", "description": "d", "command": "true"}));
    let started = std::time::Instant::now();
    Test::new()
        .packs_dir(&packs)
        .arg("--log")
        .arg(&fifo)
        .args(["run", "t"])
        .run()
        .code(1)
        .stderr_contains("cannot write the audit log")
        .stderr_contains("FIFO");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "opening the log blocked");
    // A directory is refused too; a character device is a fine log.
    Test::new().packs_dir(&packs).arg("--log").arg(dir.path()).args(["run", "t"]).run().code(1);
    Test::new().packs_dir(&packs).args(["--log", "/dev/null", "run", "t"]).run().success();
}

#[test]
fn secrets_never_leave_in_any_form() {
    let secret = "p@ss w\"rd";
    let packs = Packs::new()
        .manifest(
            "encoded",
            json!({"name": "encoded", "description": "d",
                   "command": {"program": "echo", "args": ["--", "{{urlencode secret.PACKS_K}}", "{{json secret.PACKS_K}}", "{{secret.PACKS_K}}"],
                               "cwd": "/tmp/{{secret.PACKS_K}}"}}),
        )
        .manifest(
            "cut",
            json!({"name": "cut", "description": "d", "command": {"program": "printf", "args": ["key=%s and more", "{{secret.PACKS_LONG}}"]},
                   "policy": {"max_output_bytes": 9}}),
        )
        .manifest(
            "nested",
            json!({"name": "nested", "description": "d", "command": {"program": "printf", "args": ["%s|%s", "{{secret.PACKS_SHORT}}", "{{secret.PACKS_LONG}}"]},
                   "output": {"max_chars": 6}}),
        )
        .manifest(
            "to_model",
            json!({"name": "to_model", "description": "d", "command": "true", "output": {"template": "{{output}} {{secret.PACKS_K}}"}}),
        );
    let run = |args: &[&str]| {
        Test::new()
            .packs_dir(&packs)
            .env("PACKS_K", secret)
            .env("PACKS_LONG", "hunter22")
            .env("PACKS_SHORT", "hunt")
            .args(args.iter().copied())
            .run()
    };
    // Encoded forms and the working directory are masked where the call is shown.
    let plan = run(&["run", "encoded", "--dry-run"]);
    let shown = String::from_utf8_lossy(&plan.success().stdout).into_owned();
    assert!(!shown.contains("p@ss") && !shown.contains("p%40ss") && !shown.contains("rd"), "{shown}");
    assert!(shown.contains("cwd: '/tmp/***'"), "{shown}");
    // A secret cut by max_output_bytes shows none of its beginning.
    let out = run(&["run", "cut", "--json"]);
    let v = out.json();
    assert_eq!(v["output"], "key=***", "{v}");
    // The longest secret is masked whole, before max_chars cuts the display.
    let out = run(&["run", "nested", "--json"]);
    let v = out.json();
    assert_eq!(v["output"], "***|***", "{v}");
    assert!(!v["display"].as_str().unwrap().contains("hu"), "{v}");
    // An output template that reads a secret would send it to the model: a load error.
    run(&["run", "to_model"]).code(1).stderr_contains("would send the secret to the model");
}

#[test]
fn operators_pass_named_variables_to_every_tool() {
    let packs = Packs::new()
        .manifest("show", json!({"name": "show", "description": "d", "command": "printenv PACKS_STUB PACKS_OTHER"}));
    let run = |extra: &[&str]| {
        Test::new()
            .packs_dir(&packs)
            .env("PACKS_STUB", "1")
            .env("PACKS_OTHER", "o")
            .args(extra)
            .args(["run", "show"])
            .run()
    };
    // Not passed: printenv finds neither (exit 1).
    run(&[]).code(2).stdout_eq("");
    run(&["--pass-env", "PACKS_STUB"]).code(2).stdout_eq("1\n");
    run(&["--pass-env", "PACKS_STUB", "--pass-env", "PACKS_OTHER"]).success().stdout_eq("1\no\n");
    run(&["--pass-env", "A=B"]).code(1).stderr_contains("is not a variable name");
    // An agent's `pass_env` adds to the command line's.
    let agents = Packs::new().file("a/agent.toml", "pass_env = [\"PACKS_OTHER\"]\n");
    Test::new()
        .env("PACKS_AGENTS", agents.path())
        .packs_dir(&packs)
        .env("PACKS_STUB", "1")
        .env("PACKS_OTHER", "o")
        .args(["--agent", "a", "--pass-env", "PACKS_STUB", "run", "show"])
        .run()
        .success()
        .stdout_eq("1\no\n");
    let bad = Packs::new().file("a/agent.toml", "pass_env = [\"\"]\n");
    Test::new()
        .env("PACKS_AGENTS", bad.path())
        .packs_dir(&packs)
        .args(["--agent", "a", "run", "show"])
        .run()
        .code(1)
        .stderr_contains("`pass_env`: a variable name cannot be empty");
}

#[test]
fn no_error_text_shows_a_secret() {
    // Found by review: a `cwd` of /srv/tenants/{{secret.K}} that does not exist printed the
    // secret in the CLI's error (the audit line masked it). The secret is in the working
    // directory, the argv and the environment of each tool; each fails in its own way, and
    // no front-end's text of it (error, JSON, dry run, exec, MCP) holds the secret.
    let secret = "tenant-s3cr3t-42";
    let base = json!({"description": "d",
        "command": {"program": "echo", "args": ["--", "{{secret.PACKS_TENANT}}"],
                    "env": {"TENANT_TOKEN": "{{secret.PACKS_TENANT}}"},
                    "cwd": "/nonexistent-packs-test/tenants/{{secret.PACKS_TENANT}}"}});
    let with = |name: &str, extra: serde_json::Value| {
        let mut m = base.clone();
        m["name"] = name.into();
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        m
    };
    let packs = Packs::new()
        // Its working directory does not exist: the spawn fails.
        .manifest("gone", with("gone", json!({})))
        // A path parameter resolves below that directory, outside the workspace.
        .manifest("outside", with("outside", json!({"parameters": {"p": {"type": "string", "format": "path"}}})))
        .file("secrets.env", &format!("PACKS_TENANT={secret}\n"));
    let secrets = packs.join("secrets.env");
    let secrets = secrets.to_str().unwrap();
    let run = |args: &[&str]| {
        Test::new().packs_dir(&packs).args(["--secrets-file", secrets]).args(args.iter().copied()).run()
    };
    let clean = |out: &crate::common::Output, what: &str| {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), out.stderr);
        assert!(!text.contains(secret) && !text.contains("s3cr3t"), "{what} shows the secret:\n{text}");
    };
    for (tool, args, code) in [("gone", "{}", 2), ("outside", r#"{"p": "x"}"#, 1)] {
        let out = run(&["run", tool, args]);
        out.code(code).stderr_contains("***");
        clean(&out, &format!("run {tool}"));
        let out = run(&["run", tool, args, "--json"]);
        out.code(code).stdout_contains("***");
        clean(&out, &format!("run {tool} --json"));
        let out = run(&["run", tool, args, "--dry-run"]);
        clean(&out, &format!("run {tool} --dry-run"));
        let file = packs.join(&format!("{tool}.tool.json"));
        let out = Test::new().args(["--secrets-file", secrets, "exec", file.to_str().unwrap(), args]).run();
        out.code(1).stderr_contains("***");
        clean(&out, &format!("exec {tool}"));
    }
    let call = |id: i64, tool: &str, args: serde_json::Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    let messages = crate::serve::session(
        &packs,
        &["--secrets-file", secrets],
        &[call(1, "gone", json!({})), call(2, "outside", json!({"p": "x"}))],
    );
    let text = serde_json::to_string(&messages).unwrap();
    assert_eq!(messages.len(), 2, "{text}");
    assert!(text.contains("***") && !text.contains(secret), "MCP answers show the secret: {text}");
}

#[test]
fn a_value_a_helper_writes_from_an_item_is_the_items() {
    // `{{urlencode name}}` inside `{{#each items}}` writes the item's `name`: the call gave
    // it through `items`, whatever the parameter `name` holds. `env.`/`secret.`/`context.`
    // are read from packs' own values, as `{{env.HOME}}` is, not from the model's object.
    let objects = json!({"type": "array", "items": {"type": "object"}});
    let packs = Packs::new()
        .manifest(
            "item_name",
            program_tool(
                "item_name",
                "true",
                json!({"items": objects, "name": {"type": "string"}}),
                json!(["{{#each items}}{{urlencode name}}{{/each}}"]),
            ),
        )
        .manifest(
            "item_env",
            program_tool(
                "item_env",
                "echo",
                json!({"obj": {"type": "object"}}),
                json!([
                    "{{#with obj}}{{urlencode env.PACKS_TEST_HOME}}{{/with}}",
                    "{{#with obj}}{{json secret.PACKS_TEST_TOK}}{{/with}}"
                ]),
            ),
        );
    assert!(refused_as_option(&packs, "item_name", json!({"items": [{"name": "-rf"}]}), "items"));
    assert!(refused_as_option(&packs, "item_name", json!({"items": [{"name": "-rf"}], "name": "ok"}), "items"));
    let call = json!({"obj": {"env": {"PACKS_TEST_HOME": "--evil"}, "secret": {"PACKS_TEST_TOK": -5}}});
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_HOME", "/home/op")
        .env("PACKS_TEST_TOK", "t0k")
        .args(["run", "item_env", "--dry-run"])
        .arg(call.to_string())
        .run()
        .success()
        .stdout_contains("%2Fhome%2Fop")
        .stdout_lacks("evil")
        .stdout_lacks("-5");
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_HOME", "/home/op")
        .env_remove("PACKS_TEST_TOK")
        .args(["run", "item_env", "--dry-run"])
        .arg(call.to_string())
        .run()
        .code(1)
        .stderr_contains("secret `PACKS_TEST_TOK` is not set");
}

#[test]
fn a_secret_read_from_inside_a_block_is_required_too() {
    let packs = Packs::new().manifest(
        "token",
        program_tool(
            "token",
            "echo",
            json!({"xs": {"type": "array", "items": {"type": "string"}}}),
            json!(["{{#each xs}}--token={{../secret.PACKS_TEST_TOK}}{{/each}}"]),
        ),
    );
    Test::new()
        .packs_dir(&packs)
        .env_remove("PACKS_TEST_TOK")
        .args(["run", "token", "--dry-run", r#"{"xs": ["a"]}"#])
        .run()
        .code(1)
        .stderr_contains("secret `PACKS_TEST_TOK` is not set");
    Test::new()
        .packs_dir(&packs)
        .env("PACKS_TEST_TOK", "t0k")
        .args(["run", "token", "--dry-run", r#"{"xs": ["a"]}"#])
        .run()
        .success()
        .stdout_contains("--token=")
        .stdout_lacks("t0k");
}

#[test]
fn a_block_cannot_reach_the_context_unseen() {
    // `../context` (every context value at once) and packs' own keys are refused at load,
    // so no context value leads an element without being refused.
    let strings = json!({"type": "array", "items": {"type": "string"}, "default": ["a"]});
    for (name, template) in [
        ("whole", "{{#each xs}}{{lookup ../context 'url'}}{{/each}}"),
        ("with", "{{#each xs}}{{#with ../context}}{{url}}{{/with}}{{/each}}"),
        ("given", "{{#each xs}}{{../packs:given.xs}}{{/each}}"),
        ("inverse", "{{#each xs}}x{{else}}{{lookup context 'url'}}{{/each}}"),
    ] {
        let packs = Packs::new().manifest(name, program_tool(name, "echo", json!({"xs": strings}), json!([template])));
        let out = Test::new().packs_dir(&packs).args(["run", name, "--context", "url=-u", "--dry-run", "{}"]).run();
        out.code(1).no_panic();
        assert!(!out.stdout().contains("-u"), "{name}: {}", out.stdout());
        assert!(out.stderr.contains("error[invalid-template]"), "{name}: {}", out.stderr);
    }
}

#[test]
fn a_tilde_beside_a_placeholder_trims_as_handlebars_and_the_value_still_leads() {
    let packs = Packs::new().manifest(
        "tilde",
        program_tool(
            "tilde",
            "echo",
            json!({"f": {"type": "boolean"}, "v": {"type": "string"}}),
            json!(["{{#if f}} {{~v}}{{/if}}", "x {{~v~}} y"]),
        ),
    );
    Test::new()
        .packs_dir(&packs)
        .args(["run", "tilde", "--dry-run", r#"{"f": true, "v": "ok"}"#])
        .run()
        .success()
        .stdout_contains("echo ok xoky");
    assert!(refused_as_option(&packs, "tilde", json!({"f": true, "v": "-v"}), "v"));
}

#[test]
fn a_render_that_repeats_too_much_work_fails_the_call_naming_the_template() {
    // Comparing a large array with itself once per item writes nothing the output cap
    // could stop: the work budget does, and the error names the template.
    let ints = json!({"type": "array", "items": {"type": "integer"}});
    let template = "{{#each xs}}{{#if (eq ../xs ../xs)}}{{/if}}{{/each}}";
    let packs =
        Packs::new().manifest("busy", program_tool("busy", "echo", json!({"xs": ints}), json!(["x", template])));
    let call = json!({"xs": vec![1; 20_000]}).to_string();
    Test::new()
        .packs_dir(&packs)
        .args(["run", "busy", "--dry-run"])
        .arg(&call)
        .run()
        .code(1)
        .no_panic()
        .stderr_contains("takes more than 10,000,000 steps to render")
        .stderr_contains("command.args.1");
    // The same template over a small array renders.
    Test::new().packs_dir(&packs).args(["run", "busy", "--dry-run", r#"{"xs": [1, 2]}"#]).run().success();
}
