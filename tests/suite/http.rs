//! `packs serve --http` spoken to over raw TCP: what a hostile or broken client sends gets a
//! clear status, the server never hangs or crashes, and its start-up refuses what is unsafe.
//! (The official SDK clients drive it in tests/mcp/test_http.py.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{PACKS, Packs, Test};

/// A running `packs serve --http 127.0.0.1:0`, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    _packs: Packs,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools() -> Packs {
    Packs::new()
        .manifest("echo_words", json!({"name": "echo_words", "description": "d", "parameters": {"w": {"type": "string"}}, "command": "echo -- {{w:x}}"}))
        .manifest("nap", json!({"name": "nap", "description": "d", "command": "sleep 0.3"}))
}

fn start(packs: Packs, extra: &[&str]) -> Server {
    start_with(packs, extra, &[])
}

/// [`start`] with these variables in the server's environment.
fn start_with(packs: Packs, extra: &[&str], env: &[(&str, &std::path::Path)]) -> Server {
    let mut child = Command::new(PACKS)
        .arg("--packs")
        .arg(packs.path())
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("PACKS_STATE_DIR", crate::common::STATE)
        .args(extra)
        .env_remove("PACKS_PATH")
        .env("PACKS_CACHE_DIR", "")
        .env("XDG_CONFIG_HOME", packs.join("no-config"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start packs serve --http");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .parse()
        .unwrap();
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Server { child, addr, _packs: packs }
}

/// A response: status, headers (lower-case names) and body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Send `raw` (a whole HTTP/1.1 request) and read the response until the server closes.
fn send(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(raw).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("the server answers within 60 s");
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response head in {text:?}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply { status, headers, body: body.to_owned() }
}

/// A POST to the MCP endpoint with `body` and extra header lines, answered as JSON.
fn post(addr: SocketAddr, extra: &str, body: &str) -> Reply {
    post_accepting(addr, "application/json", extra, body)
}

/// A POST whose client takes `accept`.
fn post_accepting(addr: SocketAddr, accept: &str, extra: &str, body: &str) -> Reply {
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: {accept}\r\n\
         Connection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    send(addr, raw.as_bytes())
}

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}).to_string()
}

#[test]
fn a_public_address_without_tokens_is_refused_at_start() {
    Test::new()
        .args(["serve", "--http", "0.0.0.0:0"])
        .run()
        .code(1)
        .stderr_contains("refusing to serve 0.0.0.0:0 without authentication")
        .stderr_contains("--token-file");
}

#[test]
fn a_bad_token_file_is_refused_at_start_naming_its_line() {
    let t = Test::new()
        .write("agents/ops/agent.toml", "")
        .write("tokens", "# clients\nshort ops\n")
        .env("PACKS_AGENTS", "agents");
    let tokens = t.path().join("tokens");
    t.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .run()
        .code(1)
        .stderr_contains("tokens:2: the token is 5 characters");
    let t = Test::new().write("tokens", "0123456789abcdef0123 ghost\n").env("PACKS_AGENTS", "agents");
    let tokens = t.path().join("tokens");
    t.args(["serve", "--http", "127.0.0.1:0", "--token-file"]).arg(&tokens).run().code(1).stderr_contains("tokens:1:");
    // A token's agent that asks for the lock cannot be served by an unlocked server.
    let t = Test::new()
        .write("tokens", "0123456789abcdef0123 careful\n")
        .write("agents/careful/agent.toml", "locked = true\n")
        .env("PACKS_AGENTS", "agents");
    let tokens = t.path().join("tokens");
    t.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .run()
        .code(1)
        .stderr_contains("agent `careful` says `locked = true`: serve with --locked");
}

#[test]
fn bad_requests_get_clear_statuses_and_the_server_goes_on() {
    let s = start(tools(), &["--max-body", "1000"]);
    let r = post(s.addr, "", "{not json");
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (400, json!(-32700)), "{}", r.body);
    let r = post(s.addr, "", "[]");
    assert_eq!(r.status, 400);
    assert!(r.body.contains("batches are not taken over HTTP"), "{}", r.body);
    let r = post(s.addr, "", "\"just a string\"");
    assert_eq!(r.status, 400);
    // A body over --max-body: refused by its declared length, unread...
    let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"pad\":\"{}\"}}", "x".repeat(5000));
    let r = post(s.addr, "", &big);
    assert_eq!(r.status, 413, "{}", r.body);
    // ...and when it is sent chunked, with no length, cut off at the limit.
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        s.addr,
        big.len()
    );
    assert_eq!(send(s.addr, chunked.as_bytes()).status, 413);
    let r = send(
        s.addr,
        format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}", s.addr)
            .as_bytes(),
    );
    assert_eq!(r.status, 415);
    let r = send(s.addr, format!("GET /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr).as_bytes());
    assert_eq!((r.status, r.header("allow")), (405, Some("POST")));
    let r = send(s.addr, format!("DELETE /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr).as_bytes());
    assert_eq!(r.status, 405);
    let r = send(s.addr, format!("GET /other HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr).as_bytes());
    assert_eq!(r.status, 404);
    // Health checks: GET or HEAD, no Host needed (a load balancer's probe may send none).
    let r = send(s.addr, b"GET /healthz HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    let r = send(s.addr, format!("HEAD /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr).as_bytes());
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    // Not HTTP at all: an error status, or the connection closed; never a hang.
    let mut garbage = TcpStream::connect(s.addr).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    garbage.write_all(b"\x16\x03\x01 hello?\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = garbage.read_to_end(&mut reply);
    assert!(reply.is_empty() || reply.starts_with(b"HTTP/1.1 4"), "{}", String::from_utf8_lossy(&reply));
    // Host and Origin: DNS-rebinding protection.
    let r = send(s.addr, b"POST /mcp HTTP/1.1\r\nHost: attacker.example\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(s.addr, "Origin: http://attacker.example\r\n", &call(1, "echo_words"));
    assert_eq!(r.status, 403, "{}", r.body);
    // Through all that, the server still answers.
    let r = post(s.addr, "", &call(2, "echo_words"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"]["content"][0]["text"], "-- x\n");
}

fn modern(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[test]
fn the_stateless_era_checks_its_headers_against_the_body() {
    let s = start(tools(), &[]);
    let v = "MCP-Protocol-Version: 2026-07-28\r\n";
    let body = modern(1, "tools/call", json!({"name": "echo_words", "arguments": {"w": "hi"}}));
    let sse = "application/json, text/event-stream";
    let ok = post_accepting(s.addr, sse, &format!("{v}Mcp-Method: tools/call\r\nMcp-Name: echo_words\r\n"), &body);
    assert_eq!(ok.status, 200, "{}", ok.body);
    // The call answers on an SSE stream: the result, then the stream ends.
    assert_eq!(ok.header("content-type"), Some("text/event-stream"));
    assert!(ok.body.contains(r#""text":"-- hi\n""#) && ok.body.contains(r#""resultType":"complete""#), "{}", ok.body);
    // The name may be sent base64-encoded.
    let ok = post(s.addr, &format!("{v}Mcp-Method: tools/call\r\nMcp-Name: =?base64?ZWNob193b3Jkcw==?=\r\n"), &body);
    assert_eq!(ok.status, 200, "{}", ok.body);
    for (headers, why) in [
        (format!("{v}Mcp-Name: echo_words\r\n"), "Mcp-Method header is missing"),
        (format!("{v}Mcp-Method: tools/list\r\nMcp-Name: echo_words\r\n"), "Mcp-Method `tools/list` does not match"),
        (format!("{v}Mcp-Method: tools/call\r\n"), "Mcp-Name header is missing"),
        (format!("{v}Mcp-Method: tools/call\r\nMcp-Name: nap\r\n"), "Mcp-Name `nap` does not match"),
        (format!("{v}Mcp-Method: tools/call\r\nMcp-Name: =?base64?!!?=\r\n"), "not valid base64"),
        // Standard base64 with its padding, once at the end: not two padded blocks ("echo" and
        // "_words"), nor the name unpadded.
        (format!("{v}Mcp-Method: tools/call\r\nMcp-Name: =?base64?ZWNobw==X3dvcmRz?=\r\n"), "not valid base64"),
        (format!("{v}Mcp-Method: tools/call\r\nMcp-Name: =?base64?ZWNob193b3Jkcw?=\r\n"), "not valid base64"),
    ] {
        let r = post(s.addr, &headers, &body);
        assert_eq!(r.status, 400, "{why}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], -32020, "{why}: {}", r.body);
        assert!(r.body.contains(why), "{why}: {}", r.body);
    }
    // The body's version must be the header's.
    let r = post(s.addr, "MCP-Protocol-Version: 2025-11-25\r\nMcp-Method: ping\r\n", &modern(2, "ping", json!({})));
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (400, json!(-32020)), "{}", r.body);
    // A version nobody speaks: 400 naming the versions served.
    let r = post(
        s.addr,
        "MCP-Protocol-Version: 2099-01-01\r\nMcp-Method: ping\r\n",
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}",
    );
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (400, json!(-32022)), "{}", r.body);
    assert!(r.json()["error"]["data"]["supported"].as_array().unwrap().contains(&json!("2026-07-28")));
    // An unknown method: 404 with -32601 (not a legacy server's bare 404).
    let r = post(s.addr, &format!("{v}Mcp-Method: resources/list\r\n"), &modern(4, "resources/list", json!({})));
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (404, json!(-32601)), "{}", r.body);
    // server/discover, answered as JSON.
    let r = post(s.addr, &format!("{v}Mcp-Method: server/discover\r\n"), &modern(5, "server/discover", json!({})));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["supportedVersions"], json!(["2026-07-28"]));
}

#[test]
fn slow_clients_are_cut_off_and_never_starve_the_others() {
    let s = start(tools(), &[]);
    // 200 connections that send half a request and then nothing (slowloris).
    let slow: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
            c
        })
        .collect();
    let started = Instant::now();
    let r = post(s.addr, "", &call(1, "echo_words"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(started.elapsed() < Duration::from_secs(5), "a normal request waited {:?}", started.elapsed());
    // The slow ones are closed once their headers are late (10 s), not held for ever: the
    // server ends the connection (end of file or a reset), well before our read gives up.
    let mut first = slow.into_iter().next().unwrap();
    first.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut rest = Vec::new();
    match first.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "the slow connection was held: {e}"),
    }
}

#[test]
fn a_thousand_concurrent_calls_are_each_answered_or_refused() {
    let s = start(tools(), &["--max-calls-per-client", "32"]);
    let addr = s.addr;
    let threads: Vec<_> = (0..1000)
        .map(|i| {
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let r = post(addr, "", &call(i, "nap"));
                    (r.status, r.body)
                })
                .unwrap()
        })
        .collect();
    let (mut ran, mut refused) = (0, 0);
    for t in threads {
        let (status, body) = t.join().expect("every request is answered");
        match status {
            200 => {
                let v: Value = serde_json::from_str(&body).unwrap();
                assert!(v["result"]["isError"] == false || v["error"]["code"] == -32000, "{body}");
                ran += 1;
            }
            429 => {
                assert!(body.contains("calls of this client are running"), "{body}");
                refused += 1;
            }
            other => panic!("status {other}: {body}"),
        }
    }
    assert_eq!(ran + refused, 1000);
    assert!(ran >= 32, "ran {ran}, refused {refused}");
    // And the server is fine after.
    let r = post(addr, "", &call(5000, "echo_words"));
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_client_that_does_not_read_its_progress_costs_bounded_memory() {
    let packs = tools().manifest(
        "flood",
        json!({"name": "flood", "description": "d", "command": "head -c 300000000 /dev/zero", "policy": {"timeout_secs": 60}}),
    );
    let s = start(packs, &[]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "flood", "arguments": {}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    // The tool writes 300 MB as fast as it can while the client reads nothing.
    std::thread::sleep(Duration::from_secs(3));
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kb < 150_000, "the server holds {rss_kb} kB for a client that reads nothing");
    // Reading now: some progress, then the result, then the end of the stream.
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("notifications/progress"), "no progress at all");
    assert!(text.contains(r#""id":1,"result""#), "no result: {}", &text[text.len().saturating_sub(500)..]);
}

#[test]
fn sigterm_past_the_grace_ends_running_tools_and_leaves_no_process() {
    let marker = format!("39.{}", std::process::id());
    let packs = tools().manifest(
        "long",
        json!({"name": "long", "description": "d", "command": format!("sleep {marker}"), "policy": {"timeout_secs": 60}}),
    );
    let mut s = start(packs, &["--grace", "1s"]);
    let addr = s.addr;
    let caller = std::thread::spawn(move || post(addr, "", &call(1, "long")));
    let running = || crate::common::a_process_runs(&["sleep", &marker]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running() {
        assert!(Instant::now() < deadline, "the tool never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // The grace is 1 s; ten is only a bound that it ended, not a speed.
    assert!(stopped.elapsed() < Duration::from_secs(10), "the server took {:?} to stop", stopped.elapsed());
    assert!(!running(), "`sleep {marker}` outlived the server");
    // The caller got an answer (the call was ended) or its connection closed; never a hang.
    let _ = caller.join();
    // New connections are refused.
    assert!(TcpStream::connect(addr).is_err());
}

/// Read one response from a connection that stays open: its head, then `content-length` bytes.
fn read_one(stream: &mut TcpStream) -> Reply {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).expect("a response head"), 1, "closed before a response: {bytes:?}");
        bytes.push(byte[0]);
    }
    let head = parse(&bytes);
    let len: usize = head.header("content-length").expect("a content-length").parse().unwrap();
    let mut body = vec![0; len];
    stream.read_exact(&mut body).unwrap();
    bytes.extend_from_slice(&body);
    parse(&bytes)
}

#[test]
fn a_refusal_before_the_body_is_read_says_the_connection_closes() {
    let s = start(tools(), &[]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let head = |content_type: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nAccept: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            s.addr,
            body.len()
        )
    };
    // The body comes after the head, as many clients write them: refused (415) before it
    // arrives, so hyper ends the connection, and the answer must say so.
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(head("text/plain").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let _ = stream.write_all(body.as_bytes());
    let r = read_one(&mut stream);
    assert_eq!(r.status, 415, "{}", r.body);
    assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
    // A request whose body was read keeps its connection: a second one is answered on it.
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    for _ in 0..2 {
        stream.write_all(head("application/json").as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        stream.write_all(body.as_bytes()).unwrap();
        let r = read_one(&mut stream);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("connection"), None, "{:?}", r.headers);
    }
}

/// A token's agent is applied by the same rules as `--agent`: its `sandbox = "off"` loosens
/// nothing the operator set, and the operator's `--mode` wins over its `mode`.
#[test]
fn a_tokens_agent_tightens_the_operators_settings_and_never_loosens_them() {
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("written");
    let serve = |sandbox: &str| {
        let packs = Packs::new()
            .manifest(
                "scribble",
                json!({"name": "scribble", "description": "d", "policy": {"read_only": true},
                "command": format!("touch {}", target.display())}),
            )
            .manifest(
                "coding",
                json!({"name": "coding", "description": "d", "modes": ["Coding"], "command": "echo coded"}),
            )
            .file("agents/loose/agent.toml", "sandbox = \"off\"\nmode = \"Coding\"\n")
            .file("tokens", &format!("{TOKEN} loose\n"));
        let (agents, tokens) = (packs.join("agents"), packs.join("tokens"));
        let tokens = tokens.to_str().unwrap().to_owned();
        start_with(
            packs,
            &["--sandbox", sandbox, "--mode", "Dictation", "--token-file", &tokens],
            &[("PACKS_AGENTS", agents.as_path())],
        )
    };
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let s = serve("enforce");
    let list = post(s.addr, &auth, r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#);
    assert_eq!(list.status, 200, "{}", list.body);
    let names: Vec<Value> =
        list.json()["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, [json!("scribble")], "the operator's --mode Dictation wins over the agent's Coding");
    let r = post(s.addr, &auth, &call(2, "coding"));
    assert!(r.body.contains("coding"), "{}", r.body);
    assert!(!r.body.contains("coded"), "a tool outside the operator's mode ran: {}", r.body);
    let r = post(s.addr, &auth, &call(3, "scribble"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!target.exists(), "the agent's sandbox = \"off\" loosened --sandbox enforce: {}", r.body);
    drop(s);
    // The operator's own --sandbox off is honoured: the same call writes.
    let s = serve("off");
    let r = post(s.addr, &auth, &call(4, "scribble"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(target.exists(), "{}", r.body);
}

/// `GET path` with extra header lines.
fn get(addr: SocketAddr, path: &str, extra: &str) -> Reply {
    send(addr, format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n").as_bytes())
}

#[test]
fn metrics_take_a_token_of_their_own_and_never_a_clients() {
    const OPS: &str = "ops-token-0123456789abcdef";
    const READER: &str = "reader-token-0123456789abcdef";
    const SCRAPER: &str = "metrics-token-0123456789abcdef";
    let bearer = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let serve = |extra: &[&str]| {
        let packs = tools()
            .manifest("ops_only", json!({"name": "ops_only", "description": "d", "command": "echo done"}))
            .file("agents/ops/agent.toml", "")
            .file("agents/reader/agent.toml", "deny = [\"ops_only\"]\n")
            .file("tokens", &format!("{OPS} ops\n{READER} reader\n"))
            .file("metrics-tokens", &format!("# Prometheus\n{SCRAPER}\n"));
        let (agents, tokens, scrapers) = (packs.join("agents"), packs.join("tokens"), packs.join("metrics-tokens"));
        let (tokens, scrapers) = (tokens.to_str().unwrap().to_owned(), scrapers.to_str().unwrap().to_owned());
        let mut args = vec!["--token-file".to_owned(), tokens];
        for e in extra {
            args.push(if *e == "METRICS" { scrapers.clone() } else { (*e).to_owned() });
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        start_with(packs, &args, &[("PACKS_AGENTS", agents.as_path())])
    };
    // Without a metrics token file, no client's token opens the metrics: the reader's agent
    // hides ops_only from it, and the metrics would name it.
    let s = serve(&[]);
    let r = post(s.addr, &bearer(OPS), &call(1, "ops_only"));
    assert!(r.body.contains("done"), "{}", r.body);
    for token in [READER, OPS] {
        let r = get(s.addr, "/metrics", &bearer(token));
        assert_eq!(r.status, 403, "a client's token read the metrics: {}", r.body);
        assert!(!r.body.contains("ops_only"), "{}", r.body);
        assert!(r.body.contains("--metrics-token-file"), "{}", r.body);
    }
    assert_eq!(get(s.addr, "/metrics", "").status, 401);
    drop(s);
    // With one, its tokens read every agent's counts; clients still get 403, and a metrics
    // token is no client's (401 at the MCP endpoint).
    let s = serve(&["--metrics-token-file", "METRICS"]);
    let r = post(s.addr, &bearer(OPS), &call(1, "ops_only"));
    assert!(r.body.contains("done"), "{}", r.body);
    let r = get(s.addr, "/metrics", &bearer(READER));
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(!r.body.contains("ops_only"), "{}", r.body);
    let r = get(s.addr, "/metrics", &bearer("not-a-token-0123456789"));
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")), "{:?}", r.headers);
    let r = get(s.addr, "/metrics", &bearer(SCRAPER));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains(r#"packs_calls_total{tool="ops_only",outcome="ok"} 1"#), "{}", r.body);
    assert!(r.body.contains(r#"packs_denials_total{reason="metrics_credential"} 1"#), "{}", r.body);
    let r = post(s.addr, &bearer(SCRAPER), r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#);
    assert_eq!(r.status, 401, "a metrics token listed the tools: {}", r.body);
}

#[test]
fn a_metrics_token_that_is_also_a_clients_is_refused_at_start() {
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let t = Test::new()
        .write("agents/ops/agent.toml", "")
        .write("tokens", &format!("{TOKEN} ops\n"))
        .write("metrics-tokens", &format!("# scrapers\n\n{TOKEN}\n"))
        .env("PACKS_AGENTS", "agents");
    let (tokens, scrapers) = (t.path().join("tokens"), t.path().join("metrics-tokens"));
    t.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .arg("--metrics-token-file")
        .arg(&scrapers)
        .run()
        .code(1)
        .stderr_contains("--metrics-token-file: ")
        .stderr_contains("metrics-tokens:3: this token is also a client's");
    let t = Test::new().write("metrics-tokens", "short\n");
    let scrapers = t.path().join("metrics-tokens");
    t.args(["serve", "--http", "127.0.0.1:0", "--metrics-token-file"])
        .arg(&scrapers)
        .run()
        .code(1)
        .stderr_contains("metrics-tokens:1: the token is 5 characters");
}

/// A stateless-era `tools/call` of `careful` with `w`, from a client that answers forms, and
/// when given, the retry's ticket and answer; its result.
fn careful_call(addr: SocketAddr, w: &str, retry: Option<(&str, bool)>) -> Value {
    careful_call_as(addr, "", w, retry)
}

/// [`careful_call`] with extra header lines (a client's `Authorization`).
fn careful_call_as(addr: SocketAddr, extra: &str, w: &str, retry: Option<(&str, bool)>) -> Value {
    let mut params = json!({"name": "careful", "arguments": {"w": w}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}});
    if let Some((ticket, yes)) = retry {
        params["requestState"] = json!(ticket);
        params["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": yes}}});
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string();
    let headers = format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: careful\r\n{extra}");
    let r = post(addr, &headers, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["result"].clone()
}

/// The tool that needs a person's approval, in a directory of its own.
fn careful() -> Packs {
    tools().manifest(
        "careful",
        json!({"name": "careful", "description": "d",
        "parameters": {"w": {"type": "string"}}, "command": "echo ran {{w}}",
        "policy": {"confirm_before_run": true}}),
    )
}

/// A ticket is bound to the client's token, not to the token's line in the file: replicas
/// whose files list the same tokens in another order honour each other's tickets, and a
/// client given a rotated token on the same line does not inherit the old client's.
#[test]
fn a_ticket_follows_the_token_and_not_its_line_in_the_token_file() {
    const ONE: &str = "one-token-0123456789abcdef";
    const TWO: &str = "two-token-0123456789abcdef";
    const ROTATED: &str = "rotated-token-0123456789abcdef";
    let state = tempfile::tempdir().unwrap();
    let key = state.path().join("approval.key");
    let serve = |lines: &str| {
        let packs = careful().file("agents/ops/agent.toml", "").file("tokens", lines);
        let (agents, tokens) = (packs.join("agents"), packs.join("tokens"));
        let tokens = tokens.to_str().unwrap().to_owned();
        start_with(
            packs,
            &["--approval-key", key.to_str().unwrap(), "--token-file", &tokens],
            &[("PACKS_AGENTS", agents.as_path())],
        )
    };
    let a = serve(&format!("{ONE} ops\n{TWO} ops\n"));
    let b = serve(&format!("# the same clients, listed the other way round\n{TWO} ops\n{ONE} ops\n"));
    let rotated = serve(&format!("{ROTATED} ops\n{TWO} ops\n"));
    let auth = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let ticket = |r: &Value| r["requestState"].as_str().unwrap_or_else(|| panic!("no ticket: {r}")).to_owned();
    // Asked on A by ONE, answered on B by ONE: it runs.
    let asked = ticket(&careful_call_as(a.addr, &auth(ONE), "x", None));
    let ran = careful_call_as(b.addr, &auth(ONE), "x", Some((&asked, true)));
    assert_eq!((text(&ran), &ran["isError"]), ("ran x\n".to_owned(), &json!(false)), "{ran}");
    // Nor does the principal carry the token: TWO on B cannot use ONE's ticket.
    let asked = ticket(&careful_call_as(a.addr, &auth(ONE), "y", None));
    let stolen = careful_call_as(b.addr, &auth(TWO), "y", Some((&asked, true)));
    assert!(text(&stolen).contains("issued to another client of this server"), "{stolen}");
    // ONE's token rotated: the new client on ONE's line does not get ONE's ticket.
    let inherited = careful_call_as(rotated.addr, &auth(ROTATED), "y", Some((&asked, true)));
    assert!(text(&inherited).contains("issued to another client of this server"), "{inherited}");
    assert!(!text(&inherited).contains(ONE) && !text(&stolen).contains(ONE), "{inherited} {stolen}");
}

/// `packs call --defer-approval` and `packs serve` may share a key file, never their
/// tickets: each refuses the other's, saying why, in the audit log too.
#[test]
fn a_ticket_of_packs_call_does_not_answer_packs_serve_nor_the_reverse() {
    let state = tempfile::tempdir().unwrap();
    let (key, log) = (state.path().join("approval.key"), state.path().join("audit.jsonl"));
    let s = start(careful(), &["--approval-key", key.to_str().unwrap(), "--log", log.to_str().unwrap()]);
    let call_side = careful();
    let response = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "careful", "arguments": "{\"w\": \"one\"}"}}]}}]})
    .to_string();
    let packs_call = |args: &[&str]| {
        Test::new()
            .packs_dir(call_side.path())
            .arg("--log")
            .arg(&log)
            .args(["call", "--approval-key"])
            .arg(&key)
            .args(args)
            .stdin(response.as_str())
            .run()
    };
    // A ticket of `packs call`, presented to serve's stateless retry.
    let out = packs_call(&["--defer-approval"]);
    let content: Value = serde_json::from_str(out.json()[0]["content"].as_str().unwrap()).unwrap();
    let from_call = content["pending"]["ticket"].as_str().unwrap().to_owned();
    let refused = careful_call(s.addr, "one", Some((&from_call, true)));
    let text = refused["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(refused["isError"] == true, "{refused}");
    assert!(
        text.contains(
            "the ticket was issued by `packs call`, not by `packs serve` (a ticket answers only the front-end"
        ),
        "{refused}"
    );
    // A ticket of serve, presented to `packs call --approve`.
    let from_serve = careful_call(s.addr, "one", None)["requestState"].as_str().unwrap().to_owned();
    let out = packs_call(&["--approve", &from_serve]);
    out.code(3).stderr_contains(
        "packs: approval ticket refused: the ticket was issued by `packs serve`, not by `packs call` (a ticket \
         answers only the front-end that issued it)",
    );
    // Both refusals are in the audit log, and neither ticket ran its call.
    let audit = std::fs::read_to_string(&log).unwrap();
    let refusals: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["error"].as_str().is_some_and(|m| m.contains("a ticket answers only the front-end")))
        .collect();
    assert_eq!(refusals.len(), 2, "{audit}");
    assert!(refusals.iter().all(|e| e["decision"] == "denied"), "{audit}");
    assert!(!audit.contains("\"approved\""), "{audit}");
}

#[test]
fn an_approval_asked_by_one_replica_is_honoured_by_another_once() {
    let state = tempfile::tempdir().unwrap();
    let key = state.path().join("approval.key");
    let log = state.path().join("audit.jsonl");
    let careful = || {
        tools().manifest(
            "careful",
            json!({"name": "careful", "description": "d",
            "parameters": {"w": {"type": "string"}}, "command": "echo ran {{w}}",
            "policy": {"confirm_before_run": true}}),
        )
    };
    let flags = ["--approval-key", key.to_str().unwrap(), "--log", log.to_str().unwrap()];
    let (a, b) = (start(careful(), &flags), start(careful(), &flags));
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    // Replica A asks; replica B runs the call with the person's yes; both refuse it again.
    let asked = careful_call(a.addr, "one", None);
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let ticket = asked["requestState"].as_str().unwrap().to_owned();
    assert!(ticket.contains('.') && !ticket.contains("one"), "an opaque sealed ticket: {ticket}");
    let ran = careful_call(b.addr, "one", Some((&ticket, true)));
    assert_eq!((text(&ran), &ran["isError"]), ("ran one\n".to_owned(), &json!(false)), "{ran}");
    for replica in [&a, &b] {
        let again = careful_call(replica.addr, "one", Some((&ticket, true)));
        assert!(again["isError"] == true && text(&again).contains("the ticket was already used"), "{again}");
    }
    // Changed arguments: refused, on either replica.
    let ticket = careful_call(a.addr, "two", None)["requestState"].as_str().unwrap().to_owned();
    let changed = careful_call(b.addr, "other", Some((&ticket, true)));
    assert!(text(&changed).contains("arguments differ from those the ticket was issued for"), "{changed}");
    // Tampered: refused.
    let forged = format!("x{ticket}");
    let tampered = careful_call(b.addr, "two", Some((&forged, true)));
    assert!(text(&tampered).contains("not one this approval key issued"), "{tampered}");
    // A replica started with another key does not honour it.
    let other_key = state.path().join("other.key");
    let c = start(careful(), &["--approval-key", other_key.to_str().unwrap()]);
    let stranger = careful_call(c.addr, "two", Some((&ticket, true)));
    assert!(text(&stranger).contains("not one this approval key issued"), "{stranger}");
    // A ticket that has expired (this replica issues them valid for no time).
    let brief = start(careful(), &["--approval-key", key.to_str().unwrap(), "--approval-ttl", "0"]);
    let ticket = careful_call(brief.addr, "three", None)["requestState"].as_str().unwrap().to_owned();
    let expired = careful_call(a.addr, "three", Some((&ticket, true)));
    assert!(text(&expired).contains("the ticket expired at"), "{expired}");
    // Every question and refusal of A and B is in their audit log, the refusal's reason named.
    let audit: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let reason = |e: &Value| {
        let error = e["error"].as_str().unwrap_or_default();
        let reasons = [("already used", "used"), ("arguments differ", "changed"), ("not one this", "forged")];
        let found = reasons.into_iter().chain([("expired at", "expired")]).find(|(words, _)| error.contains(words));
        found.map_or("", |(_, reason)| reason)
    };
    let decisions: Vec<(&str, &str)> = audit.iter().map(|e| (e["decision"].as_str().unwrap(), reason(e))).collect();
    let expected = [
        ("deferred", ""),
        ("approved", ""),
        ("denied", "used"),
        ("denied", "used"),
        ("deferred", ""),
        ("denied", "changed"),
        ("denied", "forged"),
        ("denied", "expired"),
    ];
    assert_eq!(decisions, expected, "{audit:#?}");
}
