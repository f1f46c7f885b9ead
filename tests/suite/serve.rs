//! `packs serve` spoken to directly (newline-delimited JSON-RPC); the official SDK
//! client drives it in tests/mcp/test_serve.py.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{PACKS, Packs};

/// `packs serve` on `packs`, its stdin and stdout piped, for a test that talks to it.
pub(crate) fn start_server(packs: &Packs) -> std::process::Child {
    Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .arg("serve")
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .env_remove("PACKS_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start packs serve")
}

/// Send `requests`, close stdin, and collect every message the server wrote.
pub(crate) fn session(packs: &Packs, extra: &[&str], requests: &[Value]) -> Vec<Value> {
    let mut child = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .arg("serve")
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .args(extra)
        .env_remove("PACKS_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start packs serve");
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {l}")))
        .collect()
}

fn by_id(messages: &[Value], id: i64) -> &Value {
    messages.iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no response {id} in {messages:#?}"))
}

fn tools() -> Packs {
    Packs::new()
        .manifest("echo_words", json!({"name": "echo_words", "description": "d", "parameters": {"w": {"type": "string"}}, "command": "echo -- {{w:x}}"}))
        .manifest("careful", json!({"name": "careful", "description": "d", "command": "echo ran", "policy": {"confirm_before_run": true}}))
}

#[test]
fn negotiates_the_protocol_version() {
    let packs = tools();
    let init = |v: &str, id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let m = session(&packs, &[], &[init("2024-11-05", 1), init("1999-01-01", 2)]);
    assert_eq!(by_id(&m, 1)["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(by_id(&m, 2)["result"]["protocolVersion"], packs::mcp::PROTOCOL_VERSIONS[0]);
    assert_eq!(by_id(&m, 1)["result"]["capabilities"]["tools"]["listChanged"], true);
}

#[test]
fn errors_follow_json_rpc() {
    let packs = tools();
    let mut child_requests = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "nope"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "missing", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "zz"}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    ];
    child_requests.push(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let m = session(&packs, &[], &child_requests);
    assert_eq!(by_id(&m, 1)["error"]["code"], -32601);
    assert_eq!(by_id(&m, 2)["error"]["code"], -32602);
    assert_eq!(by_id(&m, 3)["error"]["code"], -32602);
    assert_eq!(by_id(&m, 4)["result"], json!({}));
    assert_eq!(m.len(), 4, "a notification gets no answer: {m:#?}");
}

#[test]
fn tools_list_paginates() {
    let mut packs = Packs::new();
    for i in 0..150 {
        packs = packs
            .manifest(&format!("t{i:03}"), json!({"name": format!("t{i:03}"), "description": "d", "command": "true"}));
    }
    let m = session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "100"}}),
        ],
    );
    let first = &by_id(&m, 1)["result"];
    assert_eq!(first["tools"].as_array().unwrap().len(), packs::mcp::PAGE_SIZE);
    assert_eq!(first["nextCursor"], "100");
    let second = &by_id(&m, 2)["result"];
    assert_eq!(second["tools"].as_array().unwrap().len(), 50);
    assert!(second.get("nextCursor").is_none());
    assert_eq!(second["tools"][0]["name"], "t100");
}

#[test]
fn approval_without_elicitation_needs_yes() {
    let packs = tools();
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "careful", "arguments": {}}});
    let m = session(&packs, &[], std::slice::from_ref(&call));
    let r = &by_id(&m, 1)["result"];
    assert_eq!(r["isError"], true);
    let body: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["error"]["kind"], "permission_denied");
    let m = session(&packs, &["--yes"], &[call]);
    assert_eq!(by_id(&m, 1)["result"]["content"][0]["text"], "ran\n");
}

#[test]
fn progress_notifications_carry_output() {
    let packs = tools();
    let m = session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo_words", "arguments": {"w": "hello"}, "_meta": {"progressToken": "tok"}}}),
        ],
    );
    let progress: Vec<&Value> = m.iter().filter(|x| x["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "{m:#?}");
    assert_eq!(progress[0]["params"]["progressToken"], "tok");
    assert_eq!(progress[0]["params"]["message"], "-- hello\n");
    assert_eq!(by_id(&m, 7)["result"]["content"][0]["text"], "-- hello\n");
}

/// A character the tool's output splits between two reads (two writes, 0.3 s apart) reaches
/// the progress messages whole, not as two U+FFFD.
#[test]
fn a_character_split_between_reads_is_whole_in_the_progress_messages() {
    let packs = Packs::new().manifest(
        "split",
        json!({"name": "split", "description": "d", "command": {"program": "sh", "args": ["-c", "printf '\\303'; sleep 0.3; printf '\\251 ok\\n'"]}}),
    );
    let m = session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "split", "arguments": {}, "_meta": {"progressToken": "t"}}}),
        ],
    );
    assert_eq!(by_id(&m, 1)["result"]["content"][0]["text"], "\u{e9} ok\n", "{m:#?}");
    let messages: Vec<&str> = m
        .iter()
        .filter(|x| x["method"] == "notifications/progress")
        .map(|x| x["params"]["message"].as_str().unwrap())
        .collect();
    assert!(messages.len() >= 2, "two reads, two notifications: {messages:?}");
    assert_eq!(messages.concat(), "\u{e9} ok\n", "{messages:?}");
}

#[test]
fn a_line_that_is_not_utf8_gets_a_parse_error_and_the_server_goes_on() {
    let packs = tools();
    let mut child = start_server(&packs);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"\xff}\n").unwrap();
    stdin.write_all(b"\xc3\n").unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo_words", "arguments": {"w": "still here"}}})).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let errors: Vec<&Value> = m.iter().filter(|x| x["error"]["code"] == -32700).collect();
    assert_eq!(errors.len(), 2, "{m:#?}");
    assert_eq!(errors[0]["id"], Value::Null);
    assert_eq!(by_id(&m, 2)["result"]["content"][0]["text"], "-- still here\n");
}

fn init(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[test]
fn every_message_that_could_be_a_request_gets_an_answer() {
    let packs = tools();
    let m = session(
        &packs,
        &[],
        &[
            json!("just a string"),
            json!(5),
            json!({"jsonrpc": "2.0", "id": 3, "method": 5}),
            json!({"jsonrpc": "2.0", "id": 4}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
        ],
    );
    let invalid = |id: Value| m.iter().filter(|x| x["id"] == id && x["error"]["code"] == -32600).count();
    assert_eq!(invalid(Value::Null), 2, "{m:#?}");
    assert_eq!(invalid(json!(3)), 1, "{m:#?}");
    assert_eq!(invalid(json!(4)), 1, "{m:#?}");
    assert_eq!(by_id(&m, 5)["result"], json!({}));
}

#[test]
fn batches_are_answered_as_the_negotiated_version_requires() {
    let packs = tools();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo_words", "arguments": {"w": "batched"}}},
    ]);
    // 2025-03-26 has batches: one array of the responses, in order.
    let m = session(&packs, &[], &[init("2025-03-26"), batch.clone(), json!([])]);
    let arrays: Vec<&Value> = m.iter().filter(|x| x.is_array()).collect();
    assert_eq!(arrays.len(), 1, "{m:#?}");
    assert_eq!(arrays[0][0]["id"], 1);
    assert_eq!(arrays[0][1]["result"]["content"][0]["text"], "-- batched\n");
    assert_eq!(arrays[0].as_array().unwrap().len(), 2, "a notification gets no response");
    assert!(m.iter().any(|x| x["error"]["code"] == -32600 && x["error"]["message"] == "an empty batch"), "{m:#?}");
    // Newer versions removed them: one error, nothing run.
    let m = session(&packs, &[], &[init("2025-11-25"), batch]);
    assert_eq!(m.len(), 2, "{m:#?}");
    assert_eq!(m[1]["error"]["code"], -32600);
    assert!(m[1]["error"]["message"].as_str().unwrap().contains("2025-11-25"));
}

#[test]
fn a_client_that_hangs_up_ends_waiting_approvals_and_running_tools() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let started_marker = dir.path().join("started");
    let packs = Packs::new()
        .manifest("careful", json!({"name": "careful", "description": "d", "command": {"program": "touch", "args": [ran.to_str().unwrap()]}, "policy": {"confirm_before_run": true, "read_only": false}}))
        .manifest("slow", json!({"name": "slow", "description": "d", "command": {"program": "sh", "args": ["-c", format!("touch {}; sleep 300", started_marker.display())]}, "policy": {"timeout_secs": 600, "read_only": false}}));
    let mut child = start_server(&packs);
    let mut stdin = child.stdin.take().unwrap();
    let call = |id: i64, name: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}});
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}})).unwrap();
    writeln!(stdin, "{}", call(1, "careful")).unwrap();
    writeln!(stdin, "{}", call(2, "slow")).unwrap();
    // Wait until the approval is asked for and the slow tool runs, then hang up.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.contains("elicitation/create") {
            break;
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !started_marker.exists() {
        assert!(std::time::Instant::now() < deadline, "the slow tool never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let hung_up = std::time::Instant::now();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    // Calls get 2 s to answer after a hang-up; fifteen only bounds that it ended.
    assert!(hung_up.elapsed() < std::time::Duration::from_secs(15), "took {:?}", hung_up.elapsed());
    assert!(!ran.exists(), "an approval nobody gave ran the tool");
    // Every request was answered: the one waiting for approval with its denial, the one
    // whose tool was ended with an error that says so.
    let rest: Vec<Value> = lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    let answer =
        |id: i64| rest.iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no answer to {id}: {rest:#?}"));
    assert_eq!(answer(1)["result"]["isError"], true, "{rest:#?}");
    let ended = &answer(2)["error"];
    assert_eq!(ended["code"], -32000, "{rest:#?}");
    assert!(ended["message"].as_str().unwrap().starts_with("cancelled: the client's input ended"), "{ended}");
}

/// A session with `packs serve` run as a user that may have `nproc` processes and threads
/// in all (RLIMIT_NPROC), so that starting a thread or a tool fails as under `ulimit -u`
/// or a cgroup's `pids.max`. The limit does not bind root, so the server runs as an unused
/// uid (with `setpriv`), from a copy of packs and a pack directory that uid can read.
/// A `null` among `requests` is a pause of 300 ms.
fn session_with_nproc(packs: &Packs, nproc: u32, requests: &[Value]) -> (Vec<Value>, String) {
    let copy = crate::common::ForOtherUser::new(packs);
    // Where that uid keeps its approval key.
    let state = copy.place.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut child = copy
        .command(&["prlimit", &format!("--nproc={nproc}")])
        .arg("serve")
        .env("PACKS_STATE_DIR", &state)
        .env("HOME", copy.place.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start prlimit (util-linux)");
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        if r.is_null() {
            std::thread::sleep(std::time::Duration::from_millis(300));
        } else {
            writeln!(stdin, "{r}").unwrap();
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let messages = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {l}")))
        .collect();
    (messages, stderr)
}

#[test]
#[ignore = "needs root (runs packs as another user, whom RLIMIT_NPROC binds)"]
fn without_threads_or_processes_a_call_fails_clearly_and_the_server_goes_on() {
    let packs = tools().executable(
        "described",
        "#!/bin/sh\necho '{\"name\": \"described\", \"description\": \"d\", \"parameters\": {}}'\n",
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let call = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo_words", "arguments": {"w": "hi"}}});
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    // One thread in all: no worker can start, nor can the executable's `--describe` run.
    let (m, stderr) = session_with_nproc(&packs, 1, &[init.clone(), call(2), call(3), ping.clone()]);
    for id in [2, 3] {
        let e = &by_id(&m, id)["error"];
        assert_eq!(e["code"], -32000, "{m:#?}");
        assert!(e["message"].as_str().unwrap().contains("cannot start a thread for the call"), "{m:#?}");
    }
    assert_eq!(by_id(&m, 9)["result"], json!({}));
    assert!(stderr.contains("described"), "the executable that could not be described is named: {stderr}");
    // Two: a worker starts, but the tool's process cannot.
    let (m, _) = session_with_nproc(&packs, 2, &[init.clone(), call(2), ping.clone()]);
    let r = &by_id(&m, 2)["result"];
    assert_eq!(r["isError"], true, "{m:#?}");
    assert!(r["content"][0]["text"].as_str().unwrap().contains("Resource temporarily unavailable"), "{m:#?}");
    assert_eq!(by_id(&m, 9)["result"], json!({}));
    // Three: one worker and its tool. A second call while the first one's tool runs cannot
    // get a thread of its own: it waits for the worker, which takes it next.
    let nap = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "nap", "arguments": {}}});
    // (After the input ends, running calls have 2 seconds to answer: enough for both naps.)
    let packs = tools().manifest("nap", json!({"name": "nap", "description": "d", "command": "sleep 0.5"}));
    let (m, _) = session_with_nproc(&packs, 3, &[init, nap(2), Value::Null, nap(3), ping]);
    for id in [2, 3] {
        assert_eq!(by_id(&m, id)["result"]["isError"], false, "{m:#?}");
    }
    assert_eq!(by_id(&m, 9)["result"], json!({}));
}

#[test]
fn watch_tells_the_client_only_when_the_list_changed() {
    use std::io::BufRead;
    use std::time::Duration;
    let packs = tools();
    let mut child = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .args(["serve", "--watch"])
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .env_remove("PACKS_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start packs serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    let changed_within = |wait: Duration| {
        let until = std::time::Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(m) if m["method"] == "notifications/tools/list_changed" => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    // Edit only once the server has loaded the catalog and answers.
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap()["id"], 1);
    let file = packs.path().join("echo_words.tool.json");
    let good = std::fs::read_to_string(&file).unwrap();
    // A broken edit: the last good version stays, and the list a client sees is the same.
    std::fs::write(&file, "{ not json").unwrap();
    // The watcher looks every 300 ms: 800 ms is two looks or more.
    assert!(!changed_within(Duration::from_millis(800)), "list_changed for a broken edit");
    // Fixed as it was: still the same list.
    std::fs::write(&file, &good).unwrap();
    assert!(!changed_within(Duration::from_millis(800)), "list_changed for an unchanged list");
    // A real change is announced.
    std::fs::write(&file, good.replace("\"description\": \"d\"", "\"description\": \"changed\"")).unwrap();
    assert!(changed_within(Duration::from_secs(5)), "no list_changed after a real change");
    drop(stdin);
    let _ = child.wait();
}

#[test]
fn an_oversized_message_is_refused_without_being_held_and_the_server_goes_on() {
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "a".repeat(17 << 20)}});
    let m = session(&tools(), &[], &[huge, json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})]);
    assert_eq!(m[0]["error"]["code"], -32700, "{:?}", m[0]);
    assert_eq!(m[0]["error"]["message"], "a message longer than 16 MiB is refused");
    assert_eq!(by_id(&m, 2)["result"], json!({}));
}

/// A 2026-07-28 request: the per-request envelope in `_meta`.
fn modern(id: i64, method: &str, mut params: Value) -> Value {
    let envelope = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    });
    params["_meta"] = envelope;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn the_stateless_era_on_the_wire() {
    let packs = tools();
    let mut bad_version = modern(4, "tools/list", json!({}));
    bad_version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2030-01-01");
    let mut no_capabilities = modern(5, "tools/list", json!({}));
    no_capabilities["params"]["_meta"].as_object_mut().unwrap().remove("io.modelcontextprotocol/clientCapabilities");
    let m = session(
        &packs,
        &[],
        &[
            modern(1, "server/discover", json!({})),
            modern(2, "tools/list", json!({})),
            modern(3, "tools/call", json!({"name": "echo_words", "arguments": {"w": "hi"}})),
            bad_version,
            no_capabilities,
            json!({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            modern(7, "tools/call", json!({"name": "careful", "arguments": {}})),
        ],
    );
    let discover = &by_id(&m, 1)["result"];
    assert_eq!(discover["supportedVersions"], json!(packs::mcp::MODERN_VERSIONS));
    assert_eq!((discover["resultType"].as_str(), discover["ttlMs"].as_u64()), (Some("complete"), Some(0)));
    assert_eq!(discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "packs");
    let list = &by_id(&m, 2)["result"];
    assert_eq!(list["resultType"], "complete");
    assert_eq!(list["cacheScope"], "private");
    assert_eq!(list["tools"].as_array().unwrap().len(), 2);
    let call = &by_id(&m, 3)["result"];
    assert_eq!((call["resultType"].as_str(), call["content"][0]["text"].as_str()), (Some("complete"), Some("-- hi\n")));
    let e = &by_id(&m, 4)["error"];
    assert_eq!(e["code"], -32022);
    assert_eq!(e["data"], json!({"supported": ["2026-07-28"], "requested": "2030-01-01"}));
    assert_eq!(by_id(&m, 5)["error"]["code"], -32602);
    assert!(by_id(&m, 5)["error"]["message"].as_str().unwrap().contains("clientCapabilities"));
    // `initialize` does not exist in this era: refused, naming what is served.
    assert_eq!(by_id(&m, 6)["error"]["code"], -32022);
    // A call that needs approval is not run: the client is asked, by an `input_required` result.
    let asked = &by_id(&m, 7)["result"];
    assert_eq!(asked["resultType"], "input_required");
    assert_eq!(asked["inputRequests"]["approve"]["method"], "elicitation/create");
    assert!(asked["requestState"].as_str().is_some_and(|t| t.len() >= 32), "{asked}");
}

#[test]
fn a_stateless_approval_is_bound_to_its_call_and_used_once() {
    let packs = tools();
    // Asked, then answered: the answer's token must be for this tool and these arguments.
    let mut child = start_server(&packs);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |request: Value| -> Value {
        writeln!(stdin, "{request}").unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let first = ask(modern(1, "tools/call", json!({"name": "careful", "arguments": {}})));
    let token = first["result"]["requestState"].as_str().unwrap().to_owned();
    let accept = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    let call = |id: i64, token: &str, answer: &Value| {
        modern(
            id,
            "tools/call",
            json!({"name": "careful", "arguments": {}, "requestState": token, "inputResponses": answer}),
        )
    };
    // Another tool cannot use it: that one needs no approval and runs; the ticket is left
    // for its own call (and refused for this one, on stderr and in the audit log).
    let other = ask(modern(
        2,
        "tools/call",
        json!({"name": "echo_words", "arguments": {}, "requestState": token, "inputResponses": accept}),
    ));
    assert_eq!(other["result"]["content"][0]["text"], "-- x\n", "echo_words needs no approval: it runs");
    // Its own call runs, once.
    let ran = ask(call(3, &token, &accept));
    assert_eq!(ran["result"]["content"][0]["text"], "ran\n", "{ran}");
    let again = ask(call(4, &token, &accept));
    assert_eq!(again["result"]["isError"], true, "a ticket is used once: {again}");
    assert!(again["result"]["content"][0]["text"].as_str().unwrap().contains("the ticket was already used"), "{again}");
    // Declined: denied, not asked again, and the ticket spent.
    let fresh = ask(modern(5, "tools/call", json!({"name": "careful", "arguments": {}})));
    let token = fresh["result"]["requestState"].as_str().unwrap().to_owned();
    let declined = json!({"approve": {"action": "accept", "content": {"approve": false}}});
    let no = ask(call(6, &token, &declined));
    assert_eq!(no["result"]["isError"], true, "{no}");
    assert!(no["result"]["content"][0]["text"].as_str().unwrap().contains("was not approved"), "{no}");
    let after = ask(call(7, &token, &accept));
    assert!(after["result"]["content"][0]["text"].as_str().unwrap().contains("already used"), "{after}");
    // A request without the envelope is refused on this connection, naming what is missing.
    let bare = ask(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    drop(stdin);
    child.wait().unwrap();
}

/// `packs serve` over stdio in `dir` with the approval key `key` and `extra` flags: the
/// responses to `requests`, and stderr.
fn keyed_session(
    packs: &Packs,
    dir: &std::path::Path,
    key: &std::path::Path,
    extra: &[&str],
    requests: &[Value],
) -> (Vec<Value>, String) {
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let out = crate::common::Test::new()
        .packs_dir(packs.path())
        .current_dir(dir)
        .arg("--log")
        .arg(dir.join("audit.jsonl"))
        .args(["serve", "--approval-key"])
        .arg(key)
        .args(extra)
        .stdin(input)
        .run();
    out.success();
    let messages = out.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (messages, out.stderr.clone())
}

#[test]
fn a_stateless_approval_ticket_outlives_its_server_runs_once_and_expires() {
    let packs = tools().manifest(
        "stamp",
        json!({"name": "stamp", "description": "d", "parameters": {"w": {"type": "string"}},
               "command": "echo stamped {{w}}", "policy": {"confirm_before_run": true}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state/approval.key");
    let stamp = |id: i64, w: &str| modern(id, "tools/call", json!({"name": "stamp", "arguments": {"w": w}}));
    let answer = |id: i64, w: &str, ticket: &str, yes: bool| {
        modern(
            id,
            "tools/call",
            json!({"name": "stamp", "arguments": {"w": w}, "requestState": ticket,
            "inputResponses": {"approve": {"action": "accept", "content": {"approve": yes}}}}),
        )
    };
    let text =
        |m: &[Value], id: i64| by_id(m, id)["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    // One server asks twice, and ends.
    let (asked, _) = keyed_session(&packs, dir.path(), &key, &[], &[stamp(1, "a"), stamp(2, "b")]);
    let ticket = |id: i64| by_id(&asked, id)["result"]["requestState"].as_str().unwrap().to_owned();
    let (a, b) = (ticket(1), ticket(2));
    let mode = std::fs::metadata(&key).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions())).unwrap();
    assert_eq!(mode & 0o777, 0o600);
    // Another server with the same key (a restart): the first, presented twice at once,
    // runs once; the second is refused for other arguments, and runs for its own.
    let requests =
        [answer(3, "a", &a, true), answer(4, "a", &a, true), answer(5, "c", &b, true), answer(6, "b", &b, true)];
    let (m, stderr) = keyed_session(&packs, dir.path(), &key, &[], &requests);
    let (ran, refused): (Vec<String>, Vec<String>) =
        [text(&m, 3), text(&m, 4)].into_iter().partition(|t| t.starts_with("stamped"));
    assert_eq!(ran, ["stamped a\n"], "{m:#?} {stderr}");
    assert!(refused[0].contains("the ticket was already used"), "{m:#?}");
    assert!(text(&m, 5).contains("the call's arguments differ from those the ticket was issued for"), "{m:#?}");
    assert_eq!(text(&m, 6), "stamped b\n", "{m:#?}");
    // A third, issuing tickets valid for no time: refused as expired.
    let (asked, _) = keyed_session(&packs, dir.path(), &key, &["--approval-ttl", "0"], &[stamp(7, "d")]);
    let expired = by_id(&asked, 7)["result"]["requestState"].as_str().unwrap().to_owned();
    let (m, _) = keyed_session(&packs, dir.path(), &key, &[], &[answer(8, "d", &expired, true)]);
    assert!(text(&m, 8).contains("the ticket expired at"), "{m:#?}");
    // The log holds each question and each refusal.
    let log = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let mut decisions: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["decision"].as_str().unwrap().to_owned())
        .collect();
    decisions.sort();
    assert_eq!(decisions, ["approved", "approved", "deferred", "deferred", "deferred", "denied", "denied", "denied"]);
}

#[test]
fn a_confined_tool_of_the_server_neither_reads_its_approval_key_nor_writes_its_used_tickets() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Beside packs' own files, the workspace's other entries stay writable.
    std::fs::create_dir(ws.join("sub")).unwrap();
    let packs = tools().manifest("prowl", crate::common::key_prowler());
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "prowl", "arguments": {"dir": ws}}});
    let out = crate::common::Test::new()
        .packs_dir(packs.path())
        .arg("--workspace")
        .arg(ws)
        .env("PACKS_STATE_DIR", ws.join("state"))
        .arg("serve")
        .stdin(format!("{}\n{call}\n", init("2025-11-25")))
        .run();
    out.success();
    assert!(ws.join("state/approval.key").is_file(), "the default key is made at start");
    let m: Vec<Value> = out.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let text = by_id(&m, 1)["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(text, "noread\nnowrite\nnochange\nworkspace\n", "{m:#?}");
}

#[test]
fn an_enveloped_request_on_a_handshake_connection_is_refused() {
    let packs = tools();
    let m = session(
        &packs,
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            modern(2, "tools/list", json!({})),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        ],
    );
    assert_eq!(by_id(&m, 2)["error"]["code"], -32600);
    assert!(by_id(&m, 3)["result"]["tools"].is_array());
    assert!(by_id(&m, 3)["result"].get("resultType").is_none(), "handshake-era results are as before");
}

/// `packs serve` over stdio with its listing snapshots in `cache`: every message it wrote,
/// and its stderr.
fn cached_session(packs: &Packs, cache: &std::path::Path, extra: &[&str], requests: &[Value]) -> (Vec<Value>, String) {
    let mut child = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .args(extra)
        .arg("serve")
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .env_remove("PACKS_PATH")
        .env("PACKS_CACHE_DIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start packs serve");
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let messages = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (messages, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn snapshots(cache: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("listing-"))
        .collect()
}

/// Keep a snapshot's head (what makes it current) and replace the entries it lists.
fn forge(snapshot: &std::path::Path, entries: &str) {
    let bytes = std::fs::read(snapshot).unwrap();
    let head: Vec<&[u8]> = bytes.splitn(4, |&b| b == b'\n').take(3).collect();
    let mut forged = head.join(&b'\n');
    forged.push(b'\n');
    forged.extend_from_slice(entries.as_bytes());
    std::fs::write(snapshot, forged).unwrap();
}

/// A first session, its list pages and a call, against a pack of 150 tools (two pages).
fn listing_session() -> (Packs, Vec<Value>) {
    let mut packs = Packs::new();
    for i in 0..150 {
        packs = packs.manifest(
            &format!("t{i:03}"),
            json!({"name": format!("t{i:03}"), "description": format!("tool {i}"), "parameters": {"n": {"type": "number", "minimum": 0.1}}, "command": "echo {{n:1}}"}),
        );
    }
    let requests = vec![
        init("2025-06-18"),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "100"}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "t007", "arguments": {"n": 7}}}),
    ];
    (packs, requests)
}

#[test]
fn a_current_listing_snapshot_answers_as_the_full_load_would() {
    let (packs, requests) = listing_session();
    let cache = tempfile::tempdir().unwrap();
    crate::common::settle();
    // Cold: the catalog is loaded, then a snapshot of its listing kept.
    let (cold, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    assert_eq!(snapshots(cache.path()).len(), 1, "{stderr}");
    assert_eq!(by_id(&cold, 2)["result"]["tools"].as_array().unwrap().len(), 100);
    assert_eq!(by_id(&cold, 3)["result"]["tools"].as_array().unwrap().len(), 50);
    assert_eq!(by_id(&cold, 4)["result"]["content"][0]["text"], "7\n");
    // Warm: every answer is the same, and nothing is said to have changed.
    let (warm, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    assert_eq!(warm, cold, "{stderr}");
    // With another working directory it is another invocation: a snapshot of its own.
    let other = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .arg("serve")
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .current_dir(cache.path())
        .env_remove("PACKS_PATH")
        .env("PACKS_CACHE_DIR", cache.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(other.status.success());
    assert_eq!(snapshots(cache.path()).len(), 2);
}

#[test]
fn a_stale_listing_snapshot_is_corrected_and_a_changed_pack_never_uses_it() {
    let (packs, requests) = listing_session();
    let cache = tempfile::tempdir().unwrap();
    crate::common::settle();
    let (cold, _) = cached_session(&packs, cache.path(), &[], &requests);
    let snapshot = snapshots(cache.path()).pop().unwrap();
    // A current snapshot is used: one whose entries were forged stands in for the catalog
    // until it loads, which then tells the client its list changed; calls see the catalog.
    let forged = json!({"name": "forged", "description": "stale", "inputSchema": {"type": "object"}});
    forge(&snapshot, &format!("{forged}\n"));
    let (warm, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    let changed = warm.iter().filter(|m| m["method"] == "notifications/tools/list_changed").count();
    assert_eq!(changed, 1, "{warm:#?}\n{stderr}");
    let first = &by_id(&warm, 2)["result"];
    assert!(*first == by_id(&cold, 2)["result"] || *first == json!({"tools": [forged]}), "{first:#}");
    assert_eq!(by_id(&warm, 4), by_id(&cold, 4));
    // Any change to the pack directory: the snapshot is not used (no list_changed, the
    // answers of a full load).
    forge(&snapshot, &format!("{forged}\n"));
    std::fs::write(packs.path().join("notes.txt"), "a new entry\n").unwrap();
    let (changed_pack, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    assert_eq!(changed_pack, cold, "{stderr}");
}

#[test]
fn serve_keeps_no_snapshot_of_a_broken_pack_or_under_locked() {
    let packs = tools().file("broken.tool.json", "{ not json");
    let cache = tempfile::tempdir().unwrap();
    crate::common::settle();
    let requests = [init("2025-06-18"), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})];
    for _ in 0..2 {
        let (messages, stderr) = cached_session(&packs, cache.path(), &[], &requests);
        assert!(stderr.contains("broken.tool.json"), "the diagnostics every time: {stderr}");
        assert_eq!(by_id(&messages, 2)["result"]["tools"].as_array().unwrap().len(), 2);
    }
    assert!(snapshots(cache.path()).is_empty());
    // Under --locked every start checks the tools against the lock file: no snapshot.
    let clean = tools();
    let dir = tempfile::tempdir().unwrap();
    let lockfile = dir.path().join("packs.lock");
    let lockfile = lockfile.to_str().unwrap();
    let made = Command::new(PACKS).arg("--packs").arg(clean.path()).args(["lock", "--lockfile", lockfile]).output();
    assert!(made.unwrap().status.success());
    crate::common::settle();
    for _ in 0..2 {
        let (messages, stderr) = cached_session(&clean, cache.path(), &["--locked", "--lockfile", lockfile], &requests);
        assert_eq!(by_id(&messages, 2)["result"]["tools"].as_array().unwrap().len(), 2, "{stderr}");
    }
    assert!(snapshots(cache.path()).is_empty());
}

/// The `sandbox:` line `packs run NAME --dry-run` prints with `extra` flags.
fn dry_run_sandbox_line(packs: &Packs, extra: &[&str], name: &str) -> String {
    let out = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .args(extra)
        .args(["run", name, "--dry-run"])
        .env_remove("PACKS_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout.lines().find_map(|l| l.trim().strip_prefix("sandbox: "));
    line.unwrap_or_else(|| panic!("no sandbox line: {stdout}{}", String::from_utf8_lossy(&out.stderr))).to_owned()
}

#[test]
fn each_tools_list_entry_states_its_sandbox_as_dry_run_does() {
    let packs = Packs::new()
        .manifest("reader", json!({"name": "reader", "description": "d", "command": "echo hi", "policy": {"read_only": true}}))
        .manifest(
            "keys",
            json!({"name": "keys", "description": "d", "command": "echo hi", "policy": {"read_only": true, "reads_credentials": true}}),
        );
    let list = [json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})];
    let note = |messages: &[Value], name: &str| -> String {
        let tools = by_id(messages, 1)["result"]["tools"].as_array().unwrap().clone();
        let entry = tools.into_iter().find(|t| t["name"] == name).unwrap();
        entry["_meta"]["dev.packs/sandbox"].as_str().unwrap_or_else(|| panic!("no sandbox note: {entry}")).to_owned()
    };
    for extra in [&["--sandbox", "best-effort"][..], &["--sandbox", "off"]] {
        let m = session(&packs, extra, &list);
        for name in ["reader", "keys"] {
            assert_eq!(note(&m, name), dry_run_sandbox_line(&packs, extra, name), "{name} {extra:?}");
        }
    }
    let m = session(&packs, &["--sandbox", "best-effort"], &list);
    assert!(note(&m, "reader").contains("credential stores unreadable"), "{}", note(&m, "reader"));
    assert!(note(&m, "keys").contains("may read credential stores (policy.reads_credentials)"), "{}", note(&m, "keys"));
    let off = session(&packs, &["--sandbox", "off"], &list);
    assert_eq!(note(&off, "reader"), "off: nothing is enforced");
    // The listing snapshot answers with the same notes, and one made under another sandbox
    // mode or another denied-read list never answers for this one.
    let cache = tempfile::tempdir().unwrap();
    crate::common::settle();
    let requests = [init("2025-06-18"), list[0].clone()];
    let (cold, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    assert_eq!(snapshots(cache.path()).len(), 1, "{stderr}");
    let (warm, stderr) = cached_session(&packs, cache.path(), &[], &requests);
    assert_eq!(warm, cold, "{stderr}");
    assert!(note(&warm, "reader").contains("credential stores unreadable"), "{}", note(&warm, "reader"));
    let (off, _) = cached_session(&packs, cache.path(), &["--sandbox", "off"], &requests);
    assert_eq!(note(&off, "reader"), "off: nothing is enforced");
    let (dropped, _) = cached_session(&packs, cache.path(), &["--no-default-deny-read"], &requests);
    // Both keep packs' own secret, the approval key, unreadable whatever the list, and say so.
    let dry = dry_run_sandbox_line(&packs, &["--no-default-deny-read"], "reader");
    let reader = note(&dropped, "reader");
    for said in [&dry, &reader] {
        assert!(said.contains("reads not restricted but for packs' own secrets (--no-default-deny-read)"), "{said}");
    }
}

/// A server keeps where each tool's program was found on the PATH (issue 30), and every
/// change that alters where it is (one in an earlier directory, created with its directory;
/// removed; no longer executable; replaced) decides the very next call, as a fresh search
/// would. Real files, one real server over stdio, each answer read before the next change.
#[test]
fn where_a_program_is_on_the_path_follows_every_change_from_one_call_to_the_next() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (early, a, b) = (root.join("early/bin"), root.join("a"), root.join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let put = |dir: &std::path::Path, says: &str, mode: u32| {
        // Written beside and renamed into place: the name changes in one step.
        let spare = root.join(format!("spare-{says}"));
        std::fs::write(&spare, format!("#!/bin/sh\necho {says}\n")).unwrap();
        std::fs::set_permissions(&spare, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::rename(&spare, dir.join("packs-which-tool")).unwrap();
    };
    put(&b, "b", 0o755);
    let packs = Packs::new().manifest(
        "which",
        json!({"name": "which", "description": "d", "command": {"program": "packs-which-tool", "args": []}}),
    );
    let path =
        std::env::join_paths([early.as_path(), &a, &b, std::path::Path::new("/usr/bin"), std::path::Path::new("/bin")])
            .unwrap();
    let mut child = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .arg("serve")
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .env("PATH", &path)
        .env_remove("PACKS_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start packs serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})).unwrap();
    let mut id = 0;
    let mut call = || -> String {
        id += 1;
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "which", "arguments": {}}})
        )
        .unwrap();
        loop {
            let line = lines.next().expect("an answer").unwrap();
            let m: Value = serde_json::from_str(&line).unwrap();
            if m["id"] == id {
                if let Some(message) = m["error"]["message"].as_str() {
                    return format!("error: {message}");
                }
                let text = m["result"]["content"][0]["text"].as_str().unwrap_or_default().trim().to_owned();
                return if m["result"]["isError"] == true { format!("error: {text}") } else { text };
            }
        }
    };
    assert_eq!(call(), "b");
    assert_eq!(call(), "b");
    put(&a, "a", 0o755);
    assert_eq!(call(), "a", "a program added in an earlier directory");
    std::fs::remove_file(a.join("packs-which-tool")).unwrap();
    assert_eq!(call(), "b", "the program found removed");
    assert_eq!(call(), "b");
    std::fs::create_dir_all(&early).unwrap();
    put(&early, "early", 0o755);
    assert_eq!(call(), "early", "a directory of the PATH created with the program in it");
    std::fs::set_permissions(early.join("packs-which-tool"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(call(), "b", "the program found no longer executable");
    put(&b, "b2", 0o755);
    assert_eq!(call(), "b2", "the program found replaced");
    put(&b, "b3", 0o644);
    let gone = call();
    assert!(gone.starts_with("error: ") && gone.contains("packs-which-tool"), "{gone}");
    put(&a, "a2", 0o755);
    assert_eq!(call(), "a2");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `readOnlyHint` is claimed only for a `read_only` tool whose every restriction the kernel
/// enforces: under `best-effort`, a user without a home directory (no passwd entry, no
/// `HOME`) has credential stores nobody can name, so a tool whose writes and signals are
/// confined is still not listed read-only; with a home it is.
#[test]
#[ignore = "needs root (runs packs as a user without a passwd entry)"]
fn a_read_only_tool_with_a_restriction_unenforced_is_not_listed_read_only() {
    let packs = Packs::new().manifest(
        "reader",
        json!({"name": "reader", "description": "d", "command": "echo hi", "policy": {"read_only": true}}),
    );
    let copy = crate::common::ForOtherUser::new(&packs);
    let state = copy.place.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let list = |home: Option<&std::path::Path>| -> Value {
        let mut cmd = copy.command(&[]);
        match home {
            Some(h) => cmd.env("HOME", h),
            None => cmd.env_remove("HOME"),
        };
        let mut child = cmd
            .args(["--sandbox", "best-effort", "serve"])
            .env("PACKS_STATE_DIR", &state)
            .env("PACKS_CACHE_DIR", "")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("setpriv (util-linux)");
        writeln!(child.stdin.take().unwrap(), "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let m: Vec<Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        by_id(&m, 1)["result"]["tools"][0].clone()
    };
    let homeless = list(None);
    let note = homeless["_meta"]["dev.packs/sandbox"].as_str().unwrap();
    assert!(note.contains("credential stores readable (no home directory)"), "{homeless}");
    assert!(note.contains("signals only its own processes"), "writes and signals are confined: {homeless}");
    assert_eq!(homeless["annotations"]["readOnlyHint"], false, "{homeless}");
    let housed = list(Some(copy.place.path()));
    assert_eq!(housed["annotations"]["readOnlyHint"], true, "{housed}");
}
