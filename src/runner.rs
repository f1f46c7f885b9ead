//! Spawn one tool process safely and capture its output.
//!
//! No shell is involved: `argv[0]` is looked up in `PATH` and every other
//! element reaches the child verbatim. The child gets `/dev/null` as stdin
//! and leads its own process group, so a timeout (or plain exit) can kill
//! everything it started. Output is read concurrently with bounded memory:
//! at most `max_output_bytes` of stdout and the last [`STDERR_TAIL_BYTES`]
//! of stderr are kept, the rest is drained and counted.
//!
//! Unix only. The host process must not set `SIGCHLD` to `SIG_IGN` (that
//! would make the kernel reap children behind our back).

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// How many bytes of stderr [`RunOutcome::stderr`] keeps (the tail).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Size of the buffer each reader thread reads into.
const READ_BUF_BYTES: usize = 64 * 1024;

/// After the child is reaped and its group killed, how long the readers may
/// keep draining before we stop waiting for writers that left the group.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Everything needed to start one tool process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Invocation {
    /// `argv[0]` is the program (looked up in `PATH` like `execvp`), the rest
    /// are its arguments, passed verbatim.
    pub argv: Vec<String>,
    /// Variables set on top of the inherited environment (or of none, with `clear_env`).
    pub env: Vec<(String, String)>,
    /// Start from an empty environment: the child sees only `env`.
    pub clear_env: bool,
    /// Working directory of the child; `None` inherits ours.
    pub cwd: Option<std::path::PathBuf>,
    /// How long the child may run before its whole process group is killed.
    pub timeout: Duration,
    /// Most bytes of stdout kept in memory; the rest is counted and dropped.
    pub max_output_bytes: u64,
}

/// What happened when the process ran.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit code; `None` when killed by a signal (including our timeout kill).
    pub exit_code: Option<i32>,
    /// The signal that killed the child, if any.
    pub signal: Option<i32>,
    /// The first `max_output_bytes` bytes of stdout.
    pub stdout: Vec<u8>,
    /// Everything the child wrote to stdout, counted.
    pub stdout_total_bytes: u64,
    /// Whether `stdout` holds less than the child wrote.
    pub stdout_truncated: bool,
    /// The last [`STDERR_TAIL_BYTES`] bytes of stderr.
    pub stderr: Vec<u8>,
    /// Everything the child wrote to stderr, counted.
    pub stderr_total_bytes: u64,
    /// Whether the child was killed because it ran past the timeout.
    pub timed_out: bool,
    /// Wall time from just before spawning to reaping the child.
    pub duration: Duration,
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// The child's standard output.
    Stdout,
    /// The child's standard error.
    Stderr,
}

/// Why a process could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// argv was empty
    #[error("nothing to run: the command line is empty")]
    EmptyArgv,
    /// the program could not be started
    #[error("cannot start `{program}`: {source}")]
    Start {
        /// `argv[0]`
        program: String,
        /// The underlying error (not found, permission denied, missing cwd...).
        #[source]
        source: io::Error,
    },
}

/// Runs `inv` to completion (or timeout) and returns what happened.
pub fn run(inv: &Invocation) -> Result<RunOutcome, SpawnError> {
    run_streaming(inv, |_, _| {})
}

/// Same as [`run`], calling `on_chunk(stream, bytes)` from the reader threads
/// as data arrives (for streaming front-ends). A panic in `on_chunk` is
/// propagated to the caller once the child is gone.
pub fn run_streaming(inv: &Invocation, on_chunk: impl Fn(Stream, &[u8]) + Sync) -> Result<RunOutcome, SpawnError> {
    run_observed(inv, |_| {}, on_chunk)
}

/// Same as [`run_streaming`], also calling `on_spawn(pid)` once the child started.
/// The pid is the child's process group id too: a caller may kill the group
/// (`kill(-pid, SIGKILL)`) to cancel the run while `run_observed` is still waiting.
pub fn run_observed(
    inv: &Invocation,
    on_spawn: impl FnOnce(u32),
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<RunOutcome, SpawnError> {
    let (program, args) = inv.argv.split_first().ok_or(SpawnError::EmptyArgv)?;
    let start_error = |source| SpawnError::Start { program: program.clone(), source };
    if let Some((name, _)) = inv.env.iter().find(|(k, _)| k.is_empty() || k.contains('=')) {
        let msg = format!("invalid environment variable name {name:?}");
        return Err(start_error(io::Error::new(io::ErrorKind::InvalidInput, msg)));
    }
    let mut cmd = Command::new(program);
    if inv.clear_env {
        cmd.env_clear();
    }
    cmd.args(args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = &inv.cwd {
        cmd.current_dir(cwd);
    }
    // Dropping `stop_tx` makes `stop_rx` readable, which tells the readers to quit.
    let (stop_tx, stop_rx) = UnixStream::pair().map_err(start_error)?;

    let start = Instant::now();
    let mut child = cmd.spawn().map_err(start_error)?;
    // std hands out a pid_t as u32, so this cast round-trips. With
    // `process_group(0)` the child's pid is also its process group id.
    let pid = child.id();
    on_spawn(pid);
    let pgid = pid as libc::pid_t;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill_group(pgid);
        let _ = child.wait();
        return Err(start_error(io::Error::other("child pipes are missing")));
    };

    let (on_chunk, stop_rx) = (&on_chunk, &stop_rx);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (exit_tx, exit_rx) = mpsc::channel::<bool>();
    thread::scope(|s| {
        let done = done_tx.clone();
        let out = spawn_named(s, "runner-stdout", move || {
            let _done = done;
            read_head(stdout, stop_rx, inv.max_output_bytes, on_chunk)
        });
        let done = done_tx;
        let err = spawn_named(s, "runner-stderr", move || {
            let _done = done;
            read_tail(stderr, stop_rx, on_chunk)
        });
        let waiter = spawn_named(s, "runner-wait", move || {
            let _ = exit_tx.send(wait_for_exit(pid));
        });
        let (out, err) = match (out, err, waiter) {
            (Ok(out), Ok(err), Ok(_)) => (out, err),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                kill_group(pgid);
                let _ = child.wait();
                drop(stop_tx);
                return Err(start_error(e));
            }
        };

        let (exited, timed_out) = match exit_rx.recv_timeout(inv.timeout) {
            Ok(exited) => (exited, false),
            Err(RecvTimeoutError::Timeout) => {
                kill_group(pgid);
                (exit_rx.recv().unwrap_or(false), true)
            }
            Err(RecvTimeoutError::Disconnected) => (false, false),
        };
        // The child has exited but is not reaped yet, so its pgid cannot have
        // been reused: kill leftovers that would hold the pipes open.
        if exited {
            kill_group(pgid);
        }
        let status = child.wait().ok();
        let duration = start.elapsed();

        // Let the readers drain what is left, but do not wait forever for a
        // writer that escaped the group (setsid) and still holds a pipe.
        let _ = done_rx.recv_timeout(DRAIN_GRACE);
        drop(stop_tx);
        let (stdout, stdout_total_bytes) = out.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        let (stderr, stderr_total_bytes) = err.join().unwrap_or_else(|p| std::panic::resume_unwind(p));

        Ok(RunOutcome {
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            stdout_truncated: stdout_total_bytes > stdout.len() as u64,
            stdout,
            stdout_total_bytes,
            stderr,
            stderr_total_bytes,
            timed_out,
            duration,
        })
    })
}

/// Spawns a named scoped thread, reporting failure instead of panicking.
fn spawn_named<'scope, T: Send + 'scope>(
    s: &'scope thread::Scope<'scope, '_>,
    name: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> io::Result<thread::ScopedJoinHandle<'scope, T>> {
    thread::Builder::new().name(name.to_owned()).spawn_scoped(s, f)
}

/// Blocks until the child `pid` has exited, without reaping it. Returns
/// whether the exit was observed.
fn wait_for_exit(pid: u32) -> bool {
    loop {
        // SAFETY: siginfo_t is plain old data, for which all-zero bytes are valid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t that outlives the call.
        // WNOWAIT leaves the child a zombie, so `pid` stays ours until reaped.
        let rc = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Sends SIGKILL to every process in group `pgid`; an empty group (ESRCH) is fine.
fn kill_group(pgid: libc::pid_t) {
    if pgid > 0 {
        // SAFETY: kill(2) has no memory-safety preconditions. The caller
        // guarantees the group leader is our not-yet-reaped child.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// Keeps the first `cap` bytes of `src`, counting (and dropping) the rest.
fn read_head(
    src: impl Read + AsFd,
    stop: &UnixStream,
    cap: u64,
    on_chunk: &(dyn Fn(Stream, &[u8]) + Sync),
) -> (Vec<u8>, u64) {
    let (mut kept, mut total) = (Vec::new(), 0u64);
    pump(src, stop, |chunk| {
        on_chunk(Stream::Stdout, chunk);
        total += chunk.len() as u64;
        let room = cap.saturating_sub(kept.len() as u64);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
        kept.extend_from_slice(&chunk[..take]);
    });
    (kept, total)
}

/// Keeps the last [`STDERR_TAIL_BYTES`] bytes of `src`, counting all of it.
fn read_tail(src: impl Read + AsFd, stop: &UnixStream, on_chunk: &(dyn Fn(Stream, &[u8]) + Sync)) -> (Vec<u8>, u64) {
    let (mut tail, mut total) = (Vec::new(), 0u64);
    pump(src, stop, |chunk| {
        on_chunk(Stream::Stderr, chunk);
        total += chunk.len() as u64;
        tail.extend_from_slice(chunk);
        if tail.len() > 2 * STDERR_TAIL_BYTES {
            tail.drain(..tail.len() - STDERR_TAIL_BYTES);
        }
    });
    if tail.len() > STDERR_TAIL_BYTES {
        tail.drain(..tail.len() - STDERR_TAIL_BYTES);
    }
    (tail, total)
}

/// Feeds every chunk read from `src` to `sink` until EOF, a read error, or
/// `stop` becoming readable (its peer was dropped).
fn pump(mut src: impl Read + AsFd, stop: &UnixStream, mut sink: impl FnMut(&[u8])) {
    let mut buf = vec![0; READ_BUF_BYTES];
    while let Ok(true) = wait_readable(src.as_fd(), stop.as_fd()) {
        match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => sink(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// Blocks until `fd` is readable or at EOF (`true`), or `stop` is readable (`false`).
fn wait_readable(fd: BorrowedFd<'_>, stop: BorrowedFd<'_>) -> io::Result<bool> {
    let pollfd = |fd: BorrowedFd<'_>| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let mut fds = [pollfd(fd), pollfd(stop)];
    loop {
        // SAFETY: `fds` is an array of two initialised pollfd structs that
        // outlives the call, and both descriptors are borrowed, hence open.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc >= 0 {
            return Ok(fds[1].revents == 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn inv(argv: &[&str]) -> Invocation {
        Invocation {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            timeout: Duration::from_secs(20),
            max_output_bytes: 1024 * 1024,
        }
    }

    #[test]
    fn argv_arrives_byte_exact() {
        let hostile = [
            "two words",
            "\"double\" 'single'",
            "a; rm -rf /",
            "$(id)",
            "`id`",
            "line1\nline2",
            "*",
            "-n",
            "--",
            "",
            "héllo ✓ 日本 🦀",
            "$HOME ${PATH} | > < &",
        ];
        let mut argv = vec!["printf", "%s\\0"];
        argv.extend(hostile);
        let out = run(&inv(&argv)).unwrap();
        assert_eq!(out.exit_code, Some(0));
        let mut parts: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
        assert_eq!(parts.pop(), Some(&b""[..]), "output must end with NUL");
        let expected: Vec<&[u8]> = hostile.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(parts, expected);
    }

    #[test]
    fn env_overlay_is_visible() {
        let mut i = inv(&["printenv", "PACKS_RUNNER_TEST_VAR"]);
        i.env.push(("PACKS_RUNNER_TEST_VAR".into(), "v a=l;ue $(id)".into()));
        let out = run(&i).unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, b"v a=l;ue $(id)\n");
    }

    #[test]
    fn env_name_with_equals_is_rejected() {
        for bad in ["PATH=/evil:", ""] {
            let mut i = inv(&["true"]);
            i.env.push((bad.into(), "x".into()));
            match run(&i) {
                Err(SpawnError::Start { source, .. }) => {
                    assert_eq!(source.kind(), io::ErrorKind::InvalidInput)
                }
                other => panic!("expected Start error, got {other:?}"),
            }
        }
    }

    #[test]
    fn cwd_is_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = inv(&["pwd", "-P"]);
        i.cwd = Some(dir.path().to_path_buf());
        let out = run(&i).unwrap();
        assert_eq!(out.exit_code, Some(0));
        let printed = String::from_utf8(out.stdout).unwrap();
        let printed = std::path::Path::new(printed.trim_end_matches('\n'));
        assert_eq!(printed.canonicalize().unwrap(), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn stdin_is_dev_null() {
        let mut i = inv(&["cat"]);
        i.timeout = Duration::from_secs(5);
        let out = run(&i).unwrap();
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, Some(0));
        assert!(out.stdout.is_empty());
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let mut i = inv(&["sh", "-c", "sleep 30 & echo $! >&2; sleep 30"]);
        i.timeout = Duration::from_millis(500);
        let t = Instant::now();
        let out = run(&i).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
        assert!(out.timed_out);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert!(out.duration >= Duration::from_millis(500));
        assert_grandchild_dead(&out.stderr);
    }

    #[test]
    fn leftover_grandchild_does_not_hold_us() {
        let t = Instant::now();
        let out = run(&inv(&["sh", "-c", "sleep 30 & echo $! >&2; echo done"])).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, b"done\n");
        assert_grandchild_dead(&out.stderr);
    }

    /// `stderr` holds a pid; that process must be gone (or a zombie) soon.
    fn assert_grandchild_dead(stderr: &[u8]) {
        let pid: u32 = String::from_utf8_lossy(stderr).trim().parse().unwrap();
        let dead = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z')),
        };
        let t = Instant::now();
        while !dead() && t.elapsed() < Duration::from_secs(2) {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(dead(), "grandchild {pid} survived");
    }

    #[test]
    fn escaped_grandchild_holding_stdout_does_not_hold_us() {
        // `setsid` leaves our process group, so the group kill misses it.
        let script = "setsid sh -c 'echo $$; exec sleep 30' & sleep 0.2; echo done";
        let t = Instant::now();
        let out = run(&inv(&["sh", "-c", script])).unwrap();
        let elapsed = t.elapsed();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for pid in text.lines().filter(|l| l.parse::<u32>().is_ok()) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, Some(0));
        assert!(text.ends_with("done\n"), "{text:?}");
    }

    #[test]
    fn exit_code_and_signal_are_reported() {
        let out = run(&inv(&["sh", "-c", "exit 7"])).unwrap();
        assert_eq!((out.exit_code, out.signal), (Some(7), None));
        let out = run(&inv(&["sh", "-c", "kill -TERM $$"])).unwrap();
        assert_eq!((out.exit_code, out.signal), (None, Some(libc::SIGTERM)));
        assert!(!out.timed_out);
    }

    #[test]
    fn huge_stdout_is_capped_and_drained() {
        let mut i = inv(&["head", "-c", "200000000", "/dev/zero"]);
        i.timeout = Duration::from_secs(120);
        let out = run(&i).unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert!(!out.timed_out);
        assert_eq!(out.stdout.len(), 1024 * 1024);
        assert_eq!(out.stdout_total_bytes, 200_000_000);
        assert!(out.stdout_truncated);
    }

    #[test]
    fn small_stdout_is_not_truncated() {
        let out = run(&inv(&["printf", "hello"])).unwrap();
        assert_eq!(out.stdout, b"hello");
        assert_eq!(out.stdout_total_bytes, 5);
        assert!(!out.stdout_truncated);
    }

    #[test]
    fn huge_stderr_keeps_a_tail() {
        let script = "head -c 8000000 /dev/zero >&2; printf END >&2; exit 3";
        let out = run(&inv(&["sh", "-c", script])).unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stderr.len(), STDERR_TAIL_BYTES);
        assert_eq!(out.stderr_total_bytes, 8_000_003);
        assert!(out.stderr.ends_with(b"\0END"));
    }

    #[test]
    fn eight_mb_stderr_then_exit_3() {
        let script = "head -c 8000000 /dev/zero >&2; exit 3";
        let out = run(&inv(&["sh", "-c", script])).unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stderr.len(), STDERR_TAIL_BYTES);
        assert_eq!(out.stderr_total_bytes, 8_000_000);
    }

    #[test]
    fn spawn_errors_are_reported() {
        let missing = run(&inv(&["packs-runner-no-such-program-7f3a"]));
        match missing {
            Err(SpawnError::Start { program, source }) => {
                assert_eq!(program, "packs-runner-no-such-program-7f3a");
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected Start error, got {other:?}"),
        }

        let mut i = inv(&["true"]);
        i.cwd = Some("/nonexistent/packs-runner-test-dir".into());
        assert!(matches!(run(&i), Err(SpawnError::Start { .. })));

        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("not-executable");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        let denied = run(&inv(&[script.to_str().unwrap()]));
        match denied {
            Err(SpawnError::Start { source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::PermissionDenied)
            }
            other => panic!("expected Start error, got {other:?}"),
        }

        let empty = Invocation { argv: Vec::new(), ..inv(&[]) };
        assert!(matches!(run(&empty), Err(SpawnError::EmptyArgv)));
    }

    #[test]
    fn streaming_delivers_every_chunk_on_the_right_stream() {
        let script = "printf out1; printf err1 >&2; sleep 0.1; printf out2; printf err2 >&2";
        let chunks = Mutex::new(Vec::new());
        let out = run_streaming(&inv(&["sh", "-c", script]), |stream, bytes| {
            chunks.lock().unwrap().push((stream, bytes.to_vec()));
        })
        .unwrap();
        let chunks = chunks.into_inner().unwrap();
        let joined = |want: Stream| -> Vec<u8> {
            chunks.iter().filter(|(s, _)| *s == want).flat_map(|(_, b)| b.clone()).collect()
        };
        assert_eq!(joined(Stream::Stdout), b"out1out2");
        assert_eq!(joined(Stream::Stderr), b"err1err2");
        assert_eq!(out.stdout, b"out1out2");
        assert_eq!(out.stderr, b"err1err2");
    }

    #[test]
    fn stream_serializes_lowercase() {
        assert_eq!(serde_json::to_string(&Stream::Stderr).unwrap(), "\"stderr\"");
    }
}
