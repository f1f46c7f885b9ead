//! `tools/call` of a trivial tool (`true`) over Streamable HTTP, against the same call over
//! stdio and against spawning `true` directly, in the same run, at 1, 8 and 64 callers at
//! once: per-call latency (p50, p99) and calls per second.
//!
//! `cargo bench --bench http` (a release build of packs); `-- --calls N` sets the calls per
//! configuration (default 2,000). Figures and targets are in docs/PERFORMANCE.md.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const CALL: &str = r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#;

/// What one configuration measured.
struct Measured {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Measured {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[at]
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }
}

/// `callers` threads, each doing `calls / callers` of `one` in a row.
fn concurrently(callers: usize, calls: usize, one: impl Fn(usize) -> Box<dyn FnMut() + Send> + Sync) -> Measured {
    let barrier = Arc::new(Barrier::new(callers + 1));
    let per = calls / callers;
    let start = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..callers)
            .map(|i| {
                let mut call = one(i);
                let barrier = Arc::clone(&barrier);
                scope.spawn(move || {
                    barrier.wait();
                    (0..per)
                        .map(|_| {
                            let t = Instant::now();
                            call();
                            t.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let latencies: Vec<Duration> = handles.into_iter().flat_map(|h| h.join().expect("a caller")).collect();
        (start.elapsed(), latencies)
    });
    Measured { latencies: start.1, wall: start.0 }
}

fn direct(callers: usize, calls: usize) -> Measured {
    concurrently(callers, calls, |_| {
        Box::new(|| {
            let s = Command::new("true").stdin(Stdio::null()).status().expect("spawn true");
            assert!(s.success());
        })
    })
}

/// `packs serve` over stdio with `callers` calls kept in flight.
fn stdio(dir: &Path, callers: usize, calls: usize) -> Measured {
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_packs"))
            .arg("--packs")
            .arg(dir)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("packs serve"),
    );
    let mut stdin = child.0.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.0.stdout.take().expect("stdout"));
    let mut sent = std::collections::HashMap::new();
    let mut send = |id: usize, sent: &mut std::collections::HashMap<usize, Instant>| {
        writeln!(stdin, "{}", CALL.replace("ID", &id.to_string())).expect("write");
        sent.insert(id, Instant::now());
    };
    // Warm up: the first call compiles the tool's validator.
    send(0, &mut sent);
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read");
    sent.clear();
    let start = Instant::now();
    let mut next = 1;
    for _ in 0..callers {
        send(next, &mut sent);
        next += 1;
    }
    let mut latencies = Vec::with_capacity(calls);
    while latencies.len() < calls {
        line.clear();
        stdout.read_line(&mut line).expect("read");
        assert!(line.contains("\"isError\":false"), "{line}");
        let id: usize =
            line.split("\"id\":").nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).expect("an id");
        latencies.push(sent.remove(&id).expect("a call of ours").elapsed());
        if next <= calls {
            send(next, &mut sent);
            next += 1;
        }
    }
    let wall = start.elapsed();
    drop(child);
    Measured { latencies, wall }
}

/// A server process, killed however the benchmark ends (a failed assertion included).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `packs serve --http` on loopback; its address.
fn http_server(dir: &Path) -> (Killed, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_packs"))
        .arg("--packs")
        .arg(dir)
        .args(["serve", "--http", "127.0.0.1:0", "--max-calls-per-client", "64"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("packs serve --http");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read");
    let addr =
        line.split("http://").nth(1).and_then(|r| r.split('/').next()).expect("an address").parse().expect("addr");
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Killed(child), addr)
}

/// One keep-alive connection's `tools/call`, answered as JSON.
fn http_call(stream: &mut BufReader<TcpStream>, addr: SocketAddr, id: usize) {
    let body = CALL.replace("ID", &id.to_string());
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.get_mut().write_all(request.as_bytes()).expect("write");
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        stream.read_line(&mut line).expect("read");
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().expect("a length");
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).expect("read body");
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("\"isError\":false"), "{body}");
}

fn http(addr: SocketAddr, callers: usize, calls: usize) -> Measured {
    // Warm up.
    let mut warm = BufReader::new(TcpStream::connect(addr).expect("connect"));
    http_call(&mut warm, addr, 0);
    concurrently(callers, calls, |i| {
        let mut stream = BufReader::new(TcpStream::connect(addr).expect("connect"));
        let _ = stream.get_ref().set_nodelay(true);
        let mut id = i * 1_000_000;
        Box::new(move || {
            id += 1;
            http_call(&mut stream, addr, id);
        })
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`; a filter or `--calls N` may follow.
    let calls = args
        .iter()
        .position(|a| a == "--calls")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..99 {
        std::fs::write(
            dir.path().join(format!("tool_{i}.tool.json")),
            format!(r#"{{"name": "tool_{i}", "description": "d", "command": {{"program": "true", "args": []}}}}"#),
        )
        .expect("write");
    }
    std::fs::write(
        dir.path().join("noop.tool.json"),
        r#"{"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}"#,
    )
    .expect("write");
    let (server, addr) = http_server(dir.path());
    println!(
        "tools/call of `true`, {calls} calls per row, 100 manifests, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "callers", "how", "p50 ms", "p99 ms", "calls/s", "p50 - direct", "vs direct /s"
    );
    for callers in [1, 8, 64] {
        let base = direct(callers, calls);
        let rows =
            [("direct", base), ("stdio", stdio(dir.path(), callers, calls)), ("http", http(addr, callers, calls))];
        let (base_p50, base_rate) = (rows[0].1.percentile(0.5), rows[0].1.per_second());
        for (how, m) in &rows {
            println!(
                "{callers:<8} {how:>8} {:>10.3} {:>10.3} {:>10.0} {:>+12.3} {:>13.0}%",
                m.percentile(0.5).as_secs_f64() * 1e3,
                m.percentile(0.99).as_secs_f64() * 1e3,
                m.per_second(),
                (m.percentile(0.5).as_secs_f64() - base_p50.as_secs_f64()) * 1e3,
                m.per_second() / base_rate * 100.0,
            );
        }
    }
    drop(server);
}
