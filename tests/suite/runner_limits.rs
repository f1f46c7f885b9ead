//! Limits enforced while a tool runs: timeout (of the whole process group),
//! output caps, stderr tails, exit-code policy, programs that cannot start.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Packs, Test, alive};

fn sh_tool(name: &str, script: &str, policy: Value) -> Packs {
    Packs::new().manifest(
        name,
        json!({"name": name, "description": "d", "command": {"program": "sh", "args": ["-c", script]}, "policy": policy}),
    )
}

/// Whether `pid` is gone (or a zombie waiting for its parent).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z')),
    }
}

#[test]
fn timeout_kills_the_tool_and_its_grandchildren() {
    let packs = sh_tool("slow", "sleep 30 & echo $! >&2; sleep 30", json!({"timeout_secs": 1}));
    let out = Test::new().packs_dir(&packs).args(["run", "slow", "--json"]).run();
    out.code(124).stderr_eq("");
    // Ended by the timeout (1 s), not by `sleep 30`.
    assert!(out.elapsed < Duration::from_secs(20), "took {:?}", out.elapsed);
    let r = out.json();
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["ok"], false);
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["error"], "timed out after 1s");
    assert!(r["duration_ms"].as_u64().unwrap() >= 1000, "{r}");
    let pid: u32 = r["stderr"].as_str().unwrap().trim().parse().expect("the grandchild's pid");
    let start = Instant::now();
    while !dead(pid) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dead(pid), "grandchild {pid} survived the timeout");
}

#[test]
fn timeout_without_json() {
    let packs = sh_tool("slow", "echo started; sleep 30", json!({"timeout_secs": 1}));
    Test::new()
        .packs_dir(&packs)
        .args(["run", "slow"])
        .run()
        .code(124)
        .stdout_eq("started\n")
        .stderr_eq("error: tool `slow`: timed out after 1s\n");
}

/// Runs its arguments as a command, then reports the peak resident set size of that
/// process (what GNU `time -v` reports, with only python3, which every machine here has).
pub(crate) const PEAK_RSS: &str = "import resource, subprocess, sys\n\
    code = subprocess.run(sys.argv[1:]).returncode\n\
    print('peak RSS (KiB):', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n\
    sys.exit(code)";

/// The peak resident set size [`PEAK_RSS`] reported, in KiB.
pub(crate) fn max_rss_kib(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| l.trim().strip_prefix("peak RSS (KiB): ")?.parse().ok())
}

#[test]
fn two_hundred_megabytes_of_stdout_are_capped() {
    let packs = Packs::new()
        .manifest("flood", json!({"name": "flood", "description": "d", "command": "head -c 200000000 /dev/zero"}));
    let out = Test::new().packs_dir(&packs).args(["run", "flood", "--json"]).wrapper(["python3", "-c", PEAK_RSS]).run();
    out.success();
    let r = out.json();
    assert_eq!(r["truncated"], true);
    assert_eq!(r["ok"], true);
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["output"].as_str().unwrap().len(), 1024 * 1024, "the default cap is 1 MiB");
    let kib = max_rss_kib(&out.stderr).unwrap_or_else(|| panic!("no peak RSS in {}", out.stderr));
    assert!(kib < 100 * 1024, "packs held {kib} KiB at its peak for 200 MB of output");
}

#[test]
fn a_smaller_output_cap_is_honoured() {
    let packs = Packs::new().manifest(
        "capped",
        json!({"name": "capped", "description": "d", "command": "seq 1 100000", "policy": {"max_output_bytes": 10}}),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "capped", "--json"]).run();
    out.success();
    let r = out.json();
    assert_eq!((r["output"].clone(), r["truncated"].clone()), (json!("1\n2\n3\n4\n5\n"), json!(true)));
    // Without --json the cut is reported on stderr.
    Test::new()
        .packs_dir(&packs)
        .args(["run", "capped"])
        .run()
        .success()
        .stdout_eq("1\n2\n3\n4\n5\n")
        .stderr_eq("warning: the output was cut at 10 bytes (policy.max_output_bytes)\n");
}

#[test]
fn megabytes_of_stderr_and_a_failure_keep_the_tail() {
    let packs = sh_tool(
        "noisy",
        "head -c 5000000 /dev/zero | tr '\\0' x >&2; echo ' LAST LINE' >&2; echo partial; exit 3",
        json!({}),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "noisy"]).run();
    out.code(2).stdout_eq("partial\n");
    assert!(
        out.stderr
            .ends_with("xxxx LAST LINE\nerror: tool `noisy`: the tool exited with code 3 (allowed exit codes: [0])\n"),
        "{}",
        &out.stderr[out.stderr.len().saturating_sub(300)..]
    );
    assert!(out.stderr.len() < 1024 * 1024, "stderr is a tail, not all 5 MB: {} bytes", out.stderr.len());

    let out = Test::new().packs_dir(&packs).args(["run", "noisy", "--json"]).run();
    out.code(2).stderr_eq("");
    let r = out.json();
    assert_eq!(r["exit_code"], 3);
    assert_eq!(r["ok"], false);
    assert!(r["stderr"].as_str().unwrap().ends_with("x LAST LINE\n"));
}

#[test]
fn allowed_exit_codes_make_grep_no_match_a_success() {
    let manifest = |codes: Value| json!({"name": "find", "description": "d", "command": "grep -e no-such-line -- /dev/null", "policy": {"allowed_exit_codes": codes}});
    let packs = Packs::new().manifest("find", manifest(json!([0, 1])));
    let out = Test::new().packs_dir(&packs).args(["run", "find", "--json"]).run();
    out.success();
    assert_eq!((out.json()["ok"].clone(), out.json()["exit_code"].clone()), (json!(true), json!(1)));
    Test::new().packs_dir(&packs).args(["run", "find"]).run().success().stdout_eq("").stderr_eq("");

    let packs = Packs::new().manifest("find", manifest(json!([0])));
    Test::new()
        .packs_dir(&packs)
        .args(["run", "find"])
        .run()
        .code(2)
        .stdout_eq("")
        .stderr_eq("error: tool `find`: the tool exited with code 1 (allowed exit codes: [0])\n");
}

#[test]
fn bundled_search_text_treats_no_match_as_success() {
    let packs = Packs::new().bundled("search_text.tool.json");
    let test = Test::new().write("haystack.txt", "alpha\nbeta\n");
    let out = test.packs_dir(&packs).args(["run", "search_text", "--arg", "pattern=zeta"]).run();
    out.success().stdout_eq("").stderr_eq("");
    let test = Test::new().write("haystack.txt", "alpha\nbeta\n");
    test.packs_dir(&packs)
        .args(["run", "search_text", "--arg", "pattern=^b", "--arg", "path=haystack.txt"])
        .run()
        .success()
        .stdout_eq("2:beta\n");
}

#[test]
fn killed_by_a_signal_is_a_failure() {
    let packs = sh_tool("killed", "kill -TERM $$", json!({}));
    let out = Test::new().packs_dir(&packs).args(["run", "killed", "--json"]).run();
    out.code(2);
    let r = out.json();
    assert_eq!(r["exit_code"], Value::Null);
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["error"], "the tool was killed by signal 15 (allowed exit codes: [0])");
}

#[test]
fn a_missing_program_exits_2() {
    let packs = Packs::new().manifest(
        "ghost",
        json!({"name": "ghost", "description": "d", "command": "packs-test-no-such-program-9c1e --flag"}),
    );
    Test::new()
        .packs_dir(&packs)
        .args(["run", "ghost"])
        .run()
        .code(2)
        .stdout_eq("")
        .one_line_error()
        .stderr_contains("error: tool `ghost`: cannot start `packs-test-no-such-program-9c1e`");
    let out = Test::new().packs_dir(&packs).args(["run", "ghost", "--json"]).run();
    out.code(2);
    assert_eq!(out.json()["error"]["kind"], "execution");
}

#[test]
fn a_missing_working_directory_exits_2() {
    let packs = Packs::new().manifest(
        "nowhere",
        json!({"name": "nowhere", "description": "d", "command": {"program": "pwd", "cwd": "/nonexistent/packs-test-dir"}}),
    );
    Test::new().packs_dir(&packs).args(["run", "nowhere"]).run().code(2).one_line_error();
}

#[test]
fn stdin_is_not_passed_to_the_tool() {
    let packs = Packs::new().manifest(
        "reader",
        json!({"name": "reader", "description": "d", "command": "cat", "policy": {"timeout_secs": 5}}),
    );
    let out = Test::new().packs_dir(&packs).args(["run", "reader"]).stdin("secret input\n").run();
    // `cat` that waited for input would be ended by the timeout (exit 124), not succeed.
    out.success().stdout_eq("");
}

#[test]
fn relative_path_entries_never_find_a_program() {
    use std::os::unix::fs::PermissionsExt;
    // A workspace holding files named like programs, one without `#!` (execvp would hand
    // it to /bin/sh), and a PATH that starts with `.`.
    let ws = tempfile::tempdir().unwrap();
    let marker = ws.path().join("shadowed");
    for (name, body) in
        [("true", format!("touch {}\n", marker.display())), ("only_here", "#!/bin/sh\necho ran\n".into())]
    {
        let file = ws.path().join(name);
        std::fs::write(&file, body).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let packs = Packs::new()
        .manifest("t", json!({"name": "t", "description": "d", "command": "true"}))
        .manifest("o", json!({"name": "o", "description": "d", "command": "only_here"}));
    let path = format!(".::{}", std::env::var("PATH").unwrap());
    let run =
        |name: &str| Test::new().packs_dir(&packs).current_dir(ws.path()).env("PATH", &path).args(["run", name]).run();
    run("t").success();
    assert!(!marker.exists(), "a file in the workspace shadowed `true`");
    run("o").code(2).stderr_contains("cannot start `only_here`: No such file or directory");
}

/// A tool that records its pid and its child's, then waits far past any test.
fn sleeper(dir: &Path) -> Packs {
    let script = format!("sleep 300 & echo $! > {0}/child; echo $$ > {0}/tool; wait", dir.display());
    Packs::new().manifest(
        "sleepy",
        json!({"name": "sleepy", "description": "d", "command": {"program": "sh", "args": ["-c", script]},
               "policy": {"timeout_secs": 600, "read_only": false}}),
    )
}

fn wait_for_file(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_interrupt_ends_the_tool_then_packs_with_the_conventional_status() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let dir = tempfile::tempdir().unwrap();
        let packs = sleeper(dir.path());
        for args in [&["run", "sleepy"][..], &["serve"]] {
            let _ = std::fs::remove_file(dir.path().join("tool"));
            let _ = std::fs::remove_file(dir.path().join("child"));
            let mut child = std::process::Command::new(crate::common::PACKS)
                .arg("--packs")
                .arg(packs.path())
                .args(args)
                .env_remove("PACKS_PATH")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // Held open until packs exits: a client that signals the server has not hung up.
            let mut stdin = child.stdin.take().unwrap();
            if args[0] == "serve" {
                use std::io::Write;
                let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sleepy", "arguments": {}}});
                writeln!(stdin, "{call}").unwrap();
            }
            let (tool, grandchild) =
                (wait_for_file(&dir.path().join("tool")), wait_for_file(&dir.path().join("child")));
            let sent = Instant::now();
            // SAFETY: kill(2) on the packs process this test started and has not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            let status = child.wait().unwrap();
            drop(stdin);
            assert_eq!(status.code(), Some(code), "{args:?} after signal {signal}");
            assert!(sent.elapsed() < Duration::from_secs(5), "{args:?}: packs took {:?}", sent.elapsed());
            std::thread::sleep(Duration::from_millis(100));
            assert!(!alive(tool) && !alive(grandchild), "{args:?}: the tool outlived packs (signal {signal})");
        }
    }
}
