//! The stdio transport: newline-delimited JSON-RPC 2.0 on stdin/stdout (stdout carries
//! protocol messages only; logs go to stderr), one connection for the process's life.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Options, PARSE_ERROR, Peer, Server};

/// After the client's input ends, how long calls still running may take to answer
/// before they are ended.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The longest message a client may send (one line); a longer one is answered with a
/// parse error and skipped, never held in memory.
const MAX_MESSAGE: u64 = 16 << 20;

/// Serve until `input` ends; then deny approvals still waiting, give calls still running
/// two seconds to answer, and end the rest.
pub fn serve(options: Options, input: impl BufRead, output: impl Write + Send + 'static) -> std::io::Result<()> {
    let yes = options.yes;
    let context = options.context.clone();
    let (server, startup) = Server::start(options, super::Seal::random());
    let out = Mutex::new(output);
    let write = move |msg: Value| {
        let mut line = msg.to_string();
        line.push('\n');
        let mut out = super::lock(&out);
        // A client that went away cannot be told anything; the loop ends with its stdin.
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    };
    let peer = Arc::new(Peer::new(&server, Box::new(write), String::new(), String::new(), context).stdio(yes));
    let stop = Arc::new(AtomicBool::new(false));
    let watch = server.options().watch;
    // Whatever the start left to do (loading the catalog a snapshot answered for, keeping a
    // snapshot), then `--watch`, on one thread beside the loop.
    let loading = matches!(startup, super::Startup::Load(_));
    // Without a load to wait for or a watch, what is left (keeping a snapshot: a file
    // written) is done here, before the first request: a thread for it would hold a task
    // while the first calls start theirs (under RLIMIT_NPROC, a call's worker could not).
    let startup = if loading || watch {
        startup
    } else {
        server.settle(startup);
        super::Startup::Done
    };
    let background = (loading || watch).then(|| {
        let (server, peer, stop) = (Arc::clone(&server), Arc::clone(&peer), Arc::clone(&stop));
        let changed = move || {
            // The stateless era has no standing notifications (its lists are never cached: ttlMs 0).
            if !peer.is_stateless() {
                peer.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            }
        };
        let work = move || {
            // Taken before the load reads the files, so a change during it is seen.
            let last = watch.then(|| super::watched(&server));
            if server.settle(startup) {
                changed();
            }
            if let Some(last) = last {
                super::watch(&server, last, &stop, &changed);
            }
        };
        std::thread::Builder::new().name("packs-load".into()).spawn(work)
    });
    let background = match background {
        None => None,
        Some(Ok(thread)) => Some(thread),
        Some(Err(e)) if loading => return Err(e),
        Some(Err(e)) => {
            if watch {
                eprintln!("packs serve: --watch is off: cannot start its thread: {e}");
            }
            None
        }
    };
    let pool = super::call_pool();
    let mut input = input;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        // Lines are read as bytes: one that is not UTF-8 gets a parse error like any
        // other bad line, and the server goes on.
        if std::io::Read::take(&mut input, MAX_MESSAGE + 1).read_until(b'\n', &mut bytes)? == 0 {
            break;
        }
        if bytes.len() as u64 > MAX_MESSAGE {
            // Drop the rest of the line unread into memory, answer, go on (a line of
            // MAX_MESSAGE + 1 bytes was read whole: its newline is the last byte).
            let ended = bytes.ends_with(b"\n") || skip_line(&mut input)?;
            peer.error(
                &Value::Null,
                PARSE_ERROR,
                &format!("a message longer than {} MiB is refused", MAX_MESSAGE >> 20),
            );
            if !ended {
                break;
            }
            continue;
        }
        let Ok(line) = std::str::from_utf8(&bytes) else {
            peer.error(&Value::Null, PARSE_ERROR, "not JSON: the line is not valid UTF-8");
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(msg) => peer.handle(msg, &pool),
            Err(e) => peer.error(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}")),
        }
    }
    // The client sent its last request: nobody is left to approve, and calls still
    // running get a short grace to answer (`echo REQUEST | packs serve` works), then end.
    peer.close();
    if !pool.wait_idle(std::time::Instant::now() + CLOSE_GRACE) {
        peer.end_calls();
    }
    pool.close();
    stop.store(true, Ordering::Relaxed);
    // The load, or the snapshot being kept, ends first (a load started from a snapshot then
    // tells the client, still connected or not, whether the list changed).
    if let Some(thread) = background {
        let _ = thread.join();
    }
    Ok(())
}

/// Read up to the end of the current line without keeping it; false at the end of input.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<bool> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        match memchr::memchr(b'\n', buf) {
            Some(at) => {
                input.consume(at + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Context;

    /// What `serve` wrote.
    #[derive(Clone, Default)]
    struct Out(Arc<Mutex<Vec<u8>>>);

    impl Write for Out {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Serve `input` over an empty pack directory; the messages written.
    fn serve_input(input: Vec<u8>) -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::over(dir.path());
        let out = Out::default();
        serve(options, std::io::Cursor::new(input), out.clone()).unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// `{"jsonrpc":"2.0","id":ID,"method":"ping"}` padded with spaces to `len` bytes, newline included.
    fn ping(id: u64, len: usize) -> Vec<u8> {
        let mut line = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string().into_bytes();
        line.resize(len - 1, b' ');
        line.push(b'\n');
        line
    }

    #[test]
    fn a_message_of_up_to_sixteen_mib_is_read_and_a_longer_one_is_skipped_with_a_parse_error() {
        assert_eq!(MAX_MESSAGE, 16 << 20);
        let max = usize::try_from(MAX_MESSAGE).unwrap();
        let mut input = ping(1, max);
        // Read whole, newline included: the next line is the next message.
        input.extend(ping(2, max + 1));
        input.extend(ping(3, 100));
        input.extend(b"\n");
        input.extend(b"\xff\n");
        input.extend(ping(4, max + 2));
        // What follows the first MAX_MESSAGE + 1 bytes is dropped, not read as a message.
        input.extend(vec![b'x'; max + 3]);
        input.push(b'\n');
        input.extend(ping(5, 50));
        // The last line is too long and has no end: the input ends there.
        input.extend(vec![b' '; max + 10]);
        let answers = serve_input(input);
        let too_long = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": PARSE_ERROR, "message": "a message longer than 16 MiB is refused"}});
        let not_utf8 = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": PARSE_ERROR, "message": "not JSON: the line is not valid UTF-8"}});
        let pong = |id: u64| json!({"jsonrpc": "2.0", "id": id, "result": {}});
        assert_eq!(
            answers,
            [pong(1), too_long.clone(), pong(3), not_utf8, too_long.clone(), too_long.clone(), pong(5), too_long]
        );
    }

    /// `serve` over a pack directory of `manifests`, with `watch`, its input the other end of
    /// the returned socket (dropping it ends the input), writing to the returned `Out`.
    fn serving(
        manifests: &[Value],
        watch: bool,
    ) -> (tempfile::TempDir, std::os::unix::net::UnixStream, Out, std::thread::JoinHandle<std::io::Result<()>>) {
        let dir = tempfile::tempdir().unwrap();
        for m in manifests {
            let name = m["name"].as_str().unwrap();
            std::fs::write(dir.path().join(format!("{name}.tool.json")), m.to_string()).unwrap();
        }
        let options = Options {
            context: Context::new().with_sandbox(crate::sandbox::SandboxMode::Off),
            watch,
            ..Options::over(dir.path())
        };
        let (client, input) = std::os::unix::net::UnixStream::pair().unwrap();
        let out = Out::default();
        let written = out.clone();
        let thread = std::thread::spawn(move || serve(options, std::io::BufReader::new(input), written));
        (dir, client, out, thread)
    }

    /// The messages written so far.
    fn messages(out: &Out) -> Vec<Value> {
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn send(client: &mut std::os::unix::net::UnixStream, msg: &Value) {
        writeln!(client, "{msg}").unwrap();
    }

    fn initialize() -> Value {
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    }

    /// A `sh -c SCRIPT` tool.
    fn shell(name: &str, script: &str) -> Value {
        json!({"name": name, "description": "d", "command": {"program": "sh", "args": ["-c", script]}})
    }

    #[test]
    fn calls_running_when_the_input_ends_have_two_seconds_to_answer_and_are_ended_after() {
        let tools = [shell("quick", "sleep 0.5; echo done"), shell("slow", "sleep 8; echo slept")];
        let (_dir, mut client, out, thread) = serving(&tools, false);
        send(&mut client, &initialize());
        for (id, name) in [(1, "quick"), (2, "slow")] {
            send(&mut client, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name}}));
        }
        drop(client);
        thread.join().unwrap().unwrap();
        let answers = messages(&out);
        let answer = |id: u64| answers.iter().find(|a| a["id"] == id).map(Value::to_string).unwrap_or_default();
        // Within the grace: answered with what it printed.
        assert!(answer(1).contains("done"), "{answers:?}");
        // Past it: ended (and answered so), never run to its end.
        assert!(answer(2).contains("packs ended it") && !answer(2).contains("slept"), "{answers:?}");
    }

    #[test]
    fn with_watch_a_change_in_the_pack_directory_is_announced_to_the_client() {
        let (dir, mut client, out, thread) = serving(&[shell("hello", "echo hello")], true);
        send(&mut client, &initialize());
        let start = std::time::Instant::now();
        let announced = |out: &Out| messages(out).iter().any(|m| m["method"] == "notifications/tools/list_changed");
        // A new tool, again and again (the watch takes its first look on a thread of its own).
        let mut n = 0;
        while !announced(&out) && start.elapsed() < Duration::from_secs(30) {
            n += 1;
            std::fs::write(dir.path().join(format!("new{n}.tool.json")), shell(&format!("new{n}"), "true").to_string())
                .unwrap();
            std::thread::sleep(Duration::from_millis(500));
        }
        drop(client);
        thread.join().unwrap().unwrap();
        assert!(announced(&out), "{:?}", messages(&out));
    }
}
