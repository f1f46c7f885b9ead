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
            ["PATH", "HOME", "LANG", "TERM", "TMPDIR", "GIT_TERMINAL_PROMPT", "PAGER", "GIT_EDITOR"].contains(&name)
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
