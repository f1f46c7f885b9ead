//! Spawn one tool process safely and capture its output.
//!
//! No shell is involved: `argv[0]` is looked up in `PATH` and every other
//! element reaches the child verbatim. The child gets `/dev/null` as stdin, or a
//! pipe that the same loop writes [`Invocation::stdin`] into, and leads its own
//! process group, so a timeout (or plain exit) can kill everything it started.
//! Both output pipes are read as data arrives (one `poll` loop on the calling
//! thread, no helper threads on Linux), with bounded memory: at most
//! `max_output_bytes` of stdout and the last [`STDERR_TAIL_BYTES`] of stderr are
//! kept, the rest is drained and counted.
//!
//! Unix only. The host process must not set `SIGCHLD` to `SIG_IGN` (that
//! would make the kernel reap children behind our back), and must ignore
//! `SIGPIPE` (Rust programs do) when tools get stdin: a tool that exits without
//! reading it makes the write fail with `EPIPE`, which is expected and ignored.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::policy::Limit;

/// How many bytes of stderr [`RunOutcome::stderr`] keeps (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Size of the buffer the output is read into.
const READ_BUF_BYTES: usize = 64 * 1024;
/// The read buffer of a thread's first run, grown to [`READ_BUF_BYTES`] by a read that fills it.
const FIRST_READ_BYTES: usize = 4 * 1024;

/// After the child is reaped and its group killed, how long the readers may
/// keep draining before we stop waiting for writers that left the group.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Everything needed to start one tool process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Invocation {
    /// `argv[0]` is the program (looked up in `PATH` like `execvp`), the rest
    /// are its arguments, passed verbatim.
    pub argv: Vec<String>,
    /// Variables set on top of the inherited environment (or of none, with `clear_env`).
    pub env: Vec<(String, String)>,
    /// Start from an empty environment: the child sees only `env`.
    pub clear_env: bool,
    /// Working directory of the child; `None` inherits ours.
    pub cwd: Option<std::path::PathBuf>,
    /// What the child reads on stdin (written while its output is read, so neither
    /// side waits for the other); `None`: `/dev/null`.
    #[serde(skip)]
    pub stdin: Option<Arc<[u8]>>,
    /// How long the child may run before its whole process group is killed.
    pub timeout: Duration,
    /// Most bytes of stdout kept in memory; the rest is counted and dropped.
    pub max_output_bytes: u64,
    /// Resource limits the child sets on itself before it runs the program.
    #[serde(skip)]
    pub limits: Vec<(Limit, u64)>,
    /// The kernel restrictions the child enters before it runs the program.
    #[serde(skip)]
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Prepared>>,
    /// The sealed bytes to start the program from instead of its file (an executable
    /// tool `--locked` checked; see [`crate::image`]).
    #[serde(skip)]
    pub image: Option<crate::image::PinnedImage>,
}

impl Invocation {
    /// `argv` with exactly the environment `env`, no stdin, in packs' directory, with
    /// `timeout` and at most `max_output_bytes` of stdout kept; no limits, no sandbox yet
    /// ([`confine`] attaches one).
    pub(crate) fn plain(
        argv: Vec<String>,
        env: Vec<(String, String)>,
        timeout: Duration,
        max_output_bytes: u64,
    ) -> Self {
        Self {
            argv,
            env,
            clear_env: true,
            cwd: None,
            stdin: None,
            timeout,
            max_output_bytes,
            limits: Vec::new(),
            sandbox: None,
            image: None,
        }
    }
}

/// The invocation with its sandbox attached (and `TMPDIR` set to the call's private temp
/// dir), when the kernel has something to enforce; `None` to run it as planned.
pub(crate) fn confine(
    invocation: &Invocation,
    enforcement: Option<&crate::sandbox::Enforcement>,
) -> io::Result<Option<Invocation>> {
    let Some(enforcement) = enforcement.filter(|e| e.confines()) else {
        return Ok(None);
    };
    let prepared = crate::sandbox::Prepared::new(enforcement)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot prepare its sandbox: {e}")))?;
    let mut confined = invocation.clone();
    if let Some(tmp) = &prepared.tmpdir {
        confined.env.retain(|(k, _)| k != "TMPDIR");
        confined.env.push(("TMPDIR".to_owned(), tmp.path().to_string_lossy().into_owned()));
    }
    confined.sandbox = Some(Arc::new(prepared));
    Ok(Some(confined))
}

/// Whether packs has a controlling terminal (decided once per process: opening `/dev/tty`,
/// which fails with `ENXIO` without one).
///
/// A confined tool gets a session of its own only then. A new session is a new scheduler
/// group under the kernel's autogroup scheduling, which waits behind the busy ones: on a
/// loaded machine that made every confined call several times slower (issue 30). Without a
/// terminal (an agent's `packs serve`, CI, a service) there is none to reach, and a process
/// group of its own is all the group kill needs. With one, the tool would share packs'
/// session and could open `/dev/tty`: seccomp refuses `TIOCSTI` and `TIOCLINUX`, but it
/// could still read what the user types (take the foreground with `tcsetpgrp`) or write
/// escape sequences the terminal answers into its input; its own session, with no
/// controlling terminal, keeps it away from the terminal, at that scheduling cost.
pub(crate) fn controlling_terminal() -> bool {
    static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TERMINAL
        .get_or_init(|| std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOCTTY).open("/dev/tty").is_ok())
}

/// Set `limits` on the calling process: in the child between fork and exec. Only
/// system calls; nothing allocates.
fn set_limits(limits: &[(Limit, u64)]) -> io::Result<()> {
    for (limit, value) in limits {
        let value = libc::rlim_t::try_from(*value).unwrap_or(libc::RLIM_INFINITY);
        let r = libc::rlimit { rlim_cur: value, rlim_max: value };
        let resource = match limit {
            Limit::Memory => libc::RLIMIT_AS,
            Limit::FileSize => libc::RLIMIT_FSIZE,
            Limit::CpuSeconds => libc::RLIMIT_CPU,
        };
        // SAFETY: setrlimit reads the struct we pass; it lives on this stack frame.
        if unsafe { libc::setrlimit(resource, &raw const r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What happened when the process ran.
#[derive(Debug, Clone)]
pub(crate) struct RunOutcome {
    /// Exit code; `None` when killed by a signal (including our timeout kill).
    pub exit_code: Option<i32>,
    /// The signal that killed the child, if any.
    pub signal: Option<i32>,
    /// The first `max_output_bytes` bytes of stdout.
    pub stdout: Vec<u8>,
    /// Everything the child wrote to stdout, counted.
    pub(crate) stdout_total_bytes: u64,
    /// Whether `stdout` holds less than the child wrote.
    pub stdout_truncated: bool,
    /// The last [`STDERR_TAIL_BYTES`] bytes of stderr.
    pub stderr: Vec<u8>,
    /// Everything the child wrote to stderr, counted.
    pub(crate) stderr_total_bytes: u64,
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
    /// the program started but waiting for it failed (it was killed)
    #[error("lost track of `{program}`: {source}")]
    Wait {
        /// `argv[0]`
        program: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Runs `inv` to completion (or timeout) and returns what happened.
pub(crate) fn run(inv: &Invocation) -> Result<RunOutcome, SpawnError> {
    run_streaming(inv, |_, _| {})
}

/// Same as [`run`], calling `on_chunk(stream, bytes)` on the calling thread
/// as data arrives (for streaming front-ends). A panic in `on_chunk` unwinds
/// to the caller after the child's group is killed and the child reaped.
pub(crate) fn run_streaming(
    inv: &Invocation,
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<RunOutcome, SpawnError> {
    run_observed(inv, |_| {}, on_chunk)
}

/// Same as [`run_streaming`], also calling `on_spawn(process)` once the child
/// started. Another thread may keep a clone of the [`Process`] and
/// [`Process::kill`] it to cancel the run; that is safe at any time.
///
/// Everything happens on the calling thread: one `poll` loop reads both pipes
/// and watches for the child's exit (a pidfd on Linux) and for the timeout, so
/// an `on_chunk` that blocks delays the timeout too.
pub(crate) fn run_observed(
    inv: &Invocation,
    on_spawn: impl FnOnce(&Process),
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<RunOutcome, SpawnError> {
    let (program, args) = inv.argv.split_first().ok_or(SpawnError::EmptyArgv)?;
    let start_error = |source| SpawnError::Start { program: program.clone(), source };
    if let Some((name, _)) = inv.env.iter().find(|(k, _)| k.is_empty() || k.contains('=')) {
        let msg = format!("invalid environment variable name {name:?}");
        return Err(start_error(io::Error::new(io::ErrorKind::InvalidInput, msg)));
    }
    // Resolving the program here (with the child's PATH) lets it start by `spawn` (a
    // vfork-style clone) instead of fork + a PATH walk of failing execve calls.
    // An executable `--locked` checked starts from its sealed bytes: its path is only a name.
    #[cfg(target_os = "linux")]
    let image = inv.image.as_ref().map(|i| i.fd());
    #[cfg(not(target_os = "linux"))]
    let image: Option<std::convert::Infallible> = inv.image.as_ref().map(|i| *i);
    let (lookup, kept) = resolve_program_kept(program, inv);
    let found = match lookup {
        _ if image.is_some() => Some(PathBuf::from(program)),
        Lookup::Found(path) => Some(path),
        Lookup::AsWritten => program.contains('/').then(|| PathBuf::from(program)),
        // Never left to execvp: it would search relative entries and hand a file without
        // `#!` to /bin/sh.
        Lookup::Missing => return Err(start_error(io::Error::from_raw_os_error(libc::ENOENT))),
    };
    let sandbox = inv.sandbox.as_ref().filter(|s| s.confines()).cloned();
    let confined = sandbox.is_some() || !inv.limits.is_empty();
    // The child sets up its own confinement before exec: a process group of its own (what
    // the group kill ends), its resource limits (they bind a whole process), the sandbox. A
    // thread of packs entering the sandbox and using posix_spawn would be cheaper, but the
    // tool would share that thread's Landlock domain while the thread shares packs' memory:
    // the tool could ptrace it, or read it through `/proc`.
    let limits = inv.limits.clone();
    let own_session = confined && controlling_terminal();
    let setup = move || {
        if !confined {
            // Unconfined: a process group of its own (std's `process_group(0)` gives it
            // on the other path, before this runs).
            // SAFETY: setpgid takes no pointers.
            return if unsafe { libc::setpgid(0, 0) } < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
        }
        // SAFETY: setsid and setpgid take no pointers.
        let grouped = unsafe { if own_session { libc::setsid() } else { libc::setpgid(0, 0) } };
        if grouped < 0 {
            return Err(io::Error::last_os_error());
        }
        set_limits(&limits)?;
        sandbox.as_ref().map_or(Ok(()), |s| s.enter())
    };
    let tag = crate::orphans::new_tag();
    // What the child gets, computed once whichever way it is started.
    let env = child_env(inv, &tag);
    // On Linux a child with a program path is started by `spawn` (clone with a shared
    // memory, no copy of packs), where it also sheds every descriptor but its stdio (and
    // its image) before exec: std's posix_spawn has no way to, so a shell's `exec 7>>file`
    // before `packs` would reach the tool. Otherwise (a program left to the system's
    // default search path, or not Linux) std forks, and the same sweep runs before exec.
    let direct = cfg!(target_os = "linux") && found.is_some();
    let std_command = || {
        let mut cmd = match &found {
            Some(path) => {
                let mut cmd = Command::new(path);
                cmd.arg0(program);
                cmd
            }
            None => Command::new(program),
        };
        cmd.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &inv.cwd {
            cmd.current_dir(cwd);
        }
        if !confined {
            cmd.process_group(0);
        }
        let setup = setup.clone();
        // SAFETY: `setup` and the sweep only make system calls on data prepared before the
        // fork; they allocate nothing and take no lock.
        unsafe {
            cmd.pre_exec(move || {
                crate::descriptors::close_on_exec_from(3)?;
                if confined { setup() } else { Ok(()) }
            });
        }
        cmd
    };
    let start = Instant::now();
    // Shared: tools start side by side; a sweep of leftovers waits for them to be registered.
    let spawning = SPAWNING.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    RUNNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let spawned = match found.as_deref().filter(|_| direct) {
        #[cfg(target_os = "linux")]
        Some(path) => {
            let argv: Vec<&std::ffi::OsStr> =
                std::iter::once(std::ffi::OsStr::new(program)).chain(args.iter().map(std::ffi::OsStr::new)).collect();
            let how = crate::spawn::Child { cwd: inv.cwd.as_deref(), stdin_pipe: inv.stdin.is_some(), image };
            let mut started = crate::spawn::spawn(path, &argv, &env, how, &setup);
            if started.is_err() && kept && image.is_none() {
                // A kept path that fails to start (gone, replaced, no longer executable):
                // the result is what a fresh search gives, never the stale path's.
                PROGRAMS.forget();
                started = match resolve_program(program, inv) {
                    Lookup::Found(fresh) => crate::spawn::spawn(&fresh, &argv, &env, how, &setup),
                    _ => Err(io::Error::from_raw_os_error(libc::ENOENT)),
                };
            }
            started.map(|s| {
                (
                    Spawned::Direct(s.pid),
                    s.stdin.map(OwnedFd::from),
                    Some(Box::new(s.stdout) as Box<dyn ReadFd>),
                    Some(Box::new(s.stderr) as Box<dyn ReadFd>),
                )
            })
        }
        _ => std_command().spawn().map(|mut child| {
            let input = child.stdin.take().map(OwnedFd::from);
            let out: Option<Box<dyn ReadFd>> = child.stdout.take().map(|o| Box::new(o) as _);
            let err: Option<Box<dyn ReadFd>> = child.stderr.take().map(|e| Box::new(e) as _);
            (Spawned::Std(child), input, out, err)
        }),
    };
    let (child, input, stdout, stderr) = spawned
        .inspect_err(|_| {
            RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        })
        .map_err(start_error)?;
    let process = Process::new(child.id());
    let mut reaper = Reaper { child, process: process.clone(), tag };
    register(&process);
    drop(spawning);
    on_spawn(&process);
    let wait_error = |source| SpawnError::Wait { program: program.clone(), source };
    let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
        return Err(wait_error(io::Error::other("child pipes are missing")));
    };
    let exit = ExitWatch::new(process.pid()).map_err(wait_error)?;
    // Nothing to write closes the pipe at once: the child reads end-of-file.
    let mut feed = match (input, &inv.stdin) {
        (Some(fd), Some(data)) if !data.is_empty() => Some(Feed::new(fd, data.clone()).map_err(wait_error)?),
        _ => None,
    };

    let mut pipes =
        [Some(Pipe { src: stdout, stream: Stream::Stdout }), Some(Pipe { src: stderr, stream: Stream::Stderr })];
    let mut kept = Kept::new(inv.max_output_bytes);
    let mut buf = ReadBuf::take();
    let deadline = start.checked_add(inv.timeout);
    let mut timed_out = false;
    let mut interrupted = false;
    let mut finished: Option<(Option<ExitStatus>, Duration, Instant)> = None;
    loop {
        // Checked on every pass, not only when `poll` times out: a tool that
        // writes without pause keeps a pipe readable forever.
        let now = Instant::now();
        let wait = match &finished {
            Some((_, _, drain_until)) => {
                // Drain grace over (or nothing left to drain): a writer that escaped
                // the group (setsid) may still hold a pipe; stop waiting for it.
                if pipes.iter().all(Option::is_none) || now >= *drain_until {
                    break;
                }
                Some(*drain_until - now)
            }
            None if timed_out => {
                feed = None;
                None
            }
            None => match deadline {
                Some(d) if now >= d => {
                    reaper.process.kill();
                    timed_out = true;
                    None
                }
                Some(d) => Some(d - now),
                None => None,
            },
        };
        let mut fds = [pollfd(exit.fd()); 5];
        let mut polled = [None; 5];
        let mut n = 0;
        for (slot, pipe) in pipes.iter().enumerate() {
            if let Some(pipe) = pipe {
                (fds[n], polled[n]) = (pipe.pollfd(), Some(slot));
                n += 1;
            }
        }
        if finished.is_none() {
            fds[n] = pollfd(exit.fd());
            n += 1;
            if let Some(feed) = &feed {
                fds[n] = feed.pollfd();
                polled[n] = Some(FEED_SLOT);
                n += 1;
            }
            if let Some(pipe) = INTERRUPT_PIPE.get().filter(|_| !interrupted) {
                fds[n] = pollfd(pipe.as_fd());
                polled[n] = Some(INTERRUPT_SLOT);
                n += 1;
            }
        }
        if poll(&mut fds[..n], wait).map_err(wait_error)? == 0 {
            continue;
        }
        for (fd, slot) in fds[..n].iter().zip(polled) {
            match slot {
                Some(INTERRUPT_SLOT) if fd.revents != 0 => {
                    // packs is interrupted: end the tool; the exit is reaped as usual.
                    if self::interrupted().is_some() {
                        reaper.process.kill();
                    }
                    interrupted = true;
                }
                // Writable, or the child closed its end (the write says which).
                Some(FEED_SLOT) if fd.revents != 0 && feed.as_mut().is_some_and(|f| !f.write()) => feed = None,
                Some(FEED_SLOT) => {}
                Some(slot) if fd.revents != 0 => {
                    let pipe = pipes[slot].as_mut().expect("polled pipes are open");
                    match pipe.read(&mut buf) {
                        Got::Data(len) => {
                            on_chunk(pipe.stream, &buf[..len]);
                            kept.add(pipe.stream, &buf[..len]);
                            buf.filled(len);
                        }
                        Got::Again => {}
                        Got::Closed => pipes[slot] = None,
                    }
                }
                None if fd.revents != 0 => {
                    // The child has exited but is not reaped yet, so its pgid cannot
                    // have been reused: kill leftovers that would hold the pipes open.
                    if exit.confirmed() {
                        reaper.process.kill();
                    }
                    // Whatever it did not read is no one's to read now.
                    feed = None;
                    let status = reaper.reap().map_err(wait_error)?;
                    finished = Some((Some(status), start.elapsed(), Instant::now() + DRAIN_GRACE));
                }
                _ => {}
            }
        }
    }
    let (status, duration, _) = finished.expect("the loop ends only after the child exited");
    let (stdout, stdout_total_bytes, stderr, stderr_total_bytes) = kept.finish();
    Ok(RunOutcome {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout_truncated: stdout_total_bytes > stdout.len() as u64,
        stdout_total_bytes,
        stdout,
        stderr,
        stderr_total_bytes,
        timed_out,
        duration,
    })
}

/// The buffer a run reads output into: one per thread, reused by its next run (a server's
/// worker makes one call after another), instead of 64 KiB allocated and zeroed per call.
/// Taken out while a run uses it, so a run started from `on_chunk` gets a new one.
struct ReadBuf(Vec<u8>);

thread_local! {
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl ReadBuf {
    fn take() -> Self {
        let mut buf = READ_BUF.take();
        if buf.is_empty() {
            // A thread's first run starts small: a one-shot `packs run` of a tool that prints
            // a line would otherwise zero (and fault in) 16 pages it never reads into.
            buf = vec![0; FIRST_READ_BYTES];
        }
        Self(buf)
    }

    /// A read of `len` bytes was made: one that filled the buffer grows it to its full size.
    fn filled(&mut self, len: usize) {
        if len == self.0.len() && len < READ_BUF_BYTES {
            self.0.resize(READ_BUF_BYTES, 0);
        }
    }
}

impl Drop for ReadBuf {
    fn drop(&mut self) {
        READ_BUF.set(std::mem::take(&mut self.0));
    }
}

impl std::ops::Deref for ReadBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for ReadBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// Where a program is found.
#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    /// In an absolute directory of the child's `PATH`.
    Found(PathBuf),
    /// A path (it has a slash), or there is no `PATH` at all (the system's default
    /// directories, all absolute, apply): started as written.
    AsWritten,
    /// In none of the absolute directories of the child's `PATH`.
    Missing,
}

/// The program the child would run for `program`, looked up in the child's `PATH`.
/// Relative entries (`.`, an empty entry, `bin`) are ignored: they mean whatever the
/// tool's working directory holds, so a file in a workspace could shadow a real program.
fn resolve_program(program: &str, inv: &Invocation) -> Lookup {
    resolve_program_kept(program, inv).0
}

/// [`resolve_program`], and whether the path was kept from an earlier search (in a process
/// that keeps them: [`keep_program_lookups`]); a kept path that fails to start is
/// searched for again.
fn resolve_program_kept(program: &str, inv: &Invocation) -> (Lookup, bool) {
    if program.is_empty() || program.contains('/') {
        return (Lookup::AsWritten, false);
    }
    let path = match inv.env.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => OsString::from(v),
        None if inv.clear_env => return (Lookup::AsWritten, false),
        None => match std::env::var_os("PATH") {
            Some(p) => p,
            None => return (Lookup::AsWritten, false),
        },
    };
    let found = PROGRAMS.find(&path, program);
    (found.path.map_or(Lookup::Missing, Lookup::Found), found.kept)
}

/// The `PATH` searches of this process ([`keep_program_lookups`]).
static PROGRAMS: crate::programs::Programs = crate::programs::Programs::new();

/// Keep where programs were found on the `PATH` from call to call, until the kernel reports
/// a change that could alter a result (`packs serve`: see `programs.rs`).
pub(crate) fn keep_program_lookups() {
    PROGRAMS.keep();
}

/// Whether `program` could start here, found on our `PATH` with the same test the
/// runner applies (for `packs lint`).
pub(crate) fn program_exists(program: &str) -> bool {
    if program.contains('/') {
        return crate::programs::may_execute(Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|p| crate::programs::search(&p, program).is_some())
}

/// A regular file with any execute bit: how a pack directory's executable tools are found.
pub(crate) fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A started tool process, to cancel it from another thread (see [`Status::Spawned`](crate::Status::Spawned)).
///
/// Its pid is also its process-group id. [`Process::kill`] signals only while
/// the child is not reaped, so it can never hit a process that reused the pid.
#[derive(Debug, Clone)]
pub struct Process {
    pid: u32,
    reaped: Arc<Mutex<bool>>,
}

/// The same process: clones of one handle.
impl PartialEq for Process {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.reaped, &other.reaped)
    }
}

impl Eq for Process {}

impl Process {
    fn new(pid: u32) -> Self {
        Self { pid, reaped: Arc::new(Mutex::new(false)) }
    }

    /// The process id (and process-group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends SIGKILL to the process and to every process in its group, unless it
    /// has been reaped already. Returns whether anything was signalled.
    pub fn kill(&self) -> bool {
        let reaped = self.reaped.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Ok(pid) = libc::pid_t::try_from(self.pid) else { return false };
        if *reaped || pid <= 0 {
            return false;
        }
        // SAFETY: kill(2) has no memory-safety preconditions. The child is not
        // reaped (checked under the lock that `reap` takes), so `pid` and the
        // group `-pid` are still ours. The child itself is signalled too, in
        // case it moved to another group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        }
        true
    }
}

/// Owns the child until it is reaped; dropping it early (an error, or a panic
/// in `on_chunk`) kills the child's group and reaps it, so nothing is left behind.
struct Reaper {
    child: Spawned,
    process: Process,
    /// The call's tag ([`crate::orphans`]): what it left outside its group is ended with it.
    tag: String,
}

impl Reaper {
    fn reap(&mut self) -> io::Result<ExitStatus> {
        // From here on `Process::kill` sends nothing: the pid is about to be freed.
        *self.process.reaped.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        // Still listed while it is waited for: another call's sweep of leftovers must not
        // reap it first.
        let status = self.child.wait();
        live().retain(|p| *p != self.process);
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // Nothing to look at (packs has no child but the tools it waits for): no sweep, and
        // no lock. A leftover of this call was made packs' child when its parent exited,
        // before that exit was seen here.
        if crate::orphans::anything_to_sweep() {
            // No tool may be between its spawn and its registration while leftovers are reaped.
            let _spawning = SPAWNING.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let tracked = live().iter().map(Process::pid).collect();
            crate::orphans::end(&self.tag, &tracked);
        }
        status
    }
}

/// A started tool process, to wait for.
enum Spawned {
    /// Started by std (forked, for a program left to the default search path, or not on Linux).
    Std(Child),
    /// Started by [`crate::spawn`].
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Direct(libc::pid_t),
}

impl Spawned {
    fn id(&self) -> u32 {
        match self {
            Self::Std(child) => child.id(),
            Self::Direct(pid) => pid.unsigned_abs(),
        }
    }

    fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Self::Std(child) => child.wait(),
            Self::Direct(pid) => {
                let mut status = 0;
                loop {
                    // SAFETY: waitpid writes the status into a local.
                    if unsafe { libc::waitpid(*pid, &raw mut status, 0) } >= 0 {
                        return Ok(ExitStatus::from_raw(status));
                    }
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// The child's whole environment: packs' own unless cleared, then the invocation's
/// variables and the call's tag (a later value of a name wins).
fn child_env(inv: &Invocation, tag: &str) -> Vec<(OsString, OsString)> {
    // Not read at all when the child starts from an empty environment (every call of a
    // tool: `Invocation::plain`): copying packs' environment is a lock and an allocation
    // per variable.
    let inherited = (!inv.clear_env).then(std::env::vars_os).into_iter().flatten();
    let given = inv.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let tagged = std::iter::once((OsString::from(crate::orphans::TAG_VAR), OsString::from(tag)));
    // Later entries win: the call's variables over packs' own, the tag over both.
    let env: std::collections::BTreeMap<OsString, OsString> = inherited.chain(given).chain(tagged).collect();
    env.into_iter().collect()
}

/// Held (shared) from a tool's spawn until it is registered in [`LIVE`], and (alone) while
/// leftovers are reaped: an exited tool not yet registered must not be reaped as a leftover.
static SPAWNING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The `polled` marker of the interrupt pipe in a run's poll set.
const INTERRUPT_SLOT: usize = usize::MAX;

/// The `polled` marker of the child's stdin in a run's poll set.
const FEED_SLOT: usize = usize::MAX - 1;

/// Every tool process started and not yet reaped, so that an interrupt of packs can
/// end them all ([`kill_all`]).
static LIVE: Mutex<Vec<Process>> = Mutex::new(Vec::new());

/// Set once packs is stopping: a process that starts after that is killed at once.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn live() -> std::sync::MutexGuard<'static, Vec<Process>> {
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kill the process group of every tool still running, and every one started from now
/// on (packs is stopping). Returns how many were signalled.
pub(crate) fn kill_all() -> usize {
    let live = live();
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    live.iter().filter(|p| p.kill()).count()
}

/// Tools started and not yet reaped (counted from just before the spawn, so a signal
/// never finds a tool running that it believes is not).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The signal that interrupted packs while tools ran (0: none).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The read end of the pipe the interrupt handler writes to; every run's poll loop
/// watches it (nobody reads it, so it stays readable for all of them).
static INTERRUPT_PIPE: std::sync::OnceLock<std::os::fd::OwnedFd> = std::sync::OnceLock::new();

/// From now on SIGINT, SIGTERM and SIGHUP end every running tool's process group: while
/// tools run, the handler records the signal and wakes every run, which kills its tool
/// and returns ([`interrupted`] then says which signal); while none runs, the signal
/// does what it does by default. Installed by the CLI only, once; a library user keeps
/// its own signal handling.
#[cfg(feature = "cli")]
pub(crate) fn end_tools_on_interrupt() -> io::Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    if INTERRUPT_PIPE.set(read).is_err() {
        return Ok(()); // installed already
    }
    // The write end lives as long as the process: the handler may run at any time.
    let write = std::os::fd::IntoRawFd::into_raw_fd(write);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let action = move || {
            if RUNNING.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                let _ = signal_hook::low_level::emulate_default_handler(signal);
            } else {
                INTERRUPTED.store(signal, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: write(2) is async-signal-safe; the descriptor stays open.
                let _ = unsafe { libc::write(write, b"!".as_ptr().cast(), 1) };
            }
        };
        // SAFETY: the action only touches atomics and calls write(2) or signal-hook's
        // emulation of the default action, all async-signal-safe.
        unsafe { signal_hook::low_level::register(signal, action) }?;
    }
    Ok(())
}

/// The signal that interrupted packs while tools ran, if one did.
pub(crate) fn interrupted() -> Option<i32> {
    Some(INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)).filter(|s| *s != 0)
}

/// Keep `process` in the registry [`kill_all`] reads; if packs is already stopping, kill it.
fn register(process: &Process) {
    let mut live = live();
    live.push(process.clone());
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        process.kill();
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.process.kill() {
            let _ = self.reap();
        }
    }
}

/// Something `poll` reports readable once the child has exited, without
/// reaping it (so its pid and pgid stay ours until [`Reaper::reap`]).
enum ExitWatch {
    /// A pidfd (Linux 5.3 and later).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    PidFd(OwnedFd),
    /// Elsewhere, or when pidfds are not allowed: a thread blocks in
    /// `waitid(WNOWAIT)` and then drops the peer of this socket.
    Thread(UnixStream),
}

impl ExitWatch {
    fn new(pid: u32) -> io::Result<Self> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: pidfd_open takes a pid and flags and returns a new
            // descriptor or -1; `pid` is our unreaped child, so it cannot be reused.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if let Ok(fd) = RawFd::try_from(fd)
                && fd >= 0
            {
                // SAFETY: the kernel just returned this descriptor; nothing else owns it.
                return Ok(Self::PidFd(unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        Self::waiter(pid)
    }

    /// The portable watch: a thread that waits and then hangs up.
    fn waiter(pid: u32) -> io::Result<Self> {
        let (ours, mut theirs) = UnixStream::pair()?;
        thread::Builder::new().name("runner-wait".into()).spawn(move || {
            let exited = wait_for_exit(pid);
            let _ = io::Write::write_all(&mut theirs, &[u8::from(exited)]);
        })?;
        Ok(Self::Thread(ours))
    }

    /// After `fd` became readable: whether the child is known to have exited
    /// unreaped (so its group may be signalled). A failed `waitid` says no.
    fn confirmed(&self) -> bool {
        match self {
            Self::PidFd(_) => true,
            Self::Thread(s) => {
                let mut byte = [0];
                matches!(io::Read::read(&mut &*s, &mut byte), Ok(1)) && byte[0] == 1
            }
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::PidFd(fd) => fd.as_fd(),
            Self::Thread(s) => s.as_fd(),
        }
    }
}

/// Blocks until the child `pid` has exited, without reaping it. Returns whether
/// the exit was observed (false: `waitid` failed, e.g. someone else reaped it).
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

/// The child's stdin while there is more to write: non-blocking, written when `poll`
/// says the pipe has room, so a child that writes before it reads (or never reads)
/// cannot block packs, and its output is drained meanwhile.
struct Feed {
    fd: OwnedFd,
    data: Arc<[u8]>,
    written: usize,
}

impl Feed {
    fn new(fd: OwnedFd, data: Arc<[u8]>) -> io::Result<Self> {
        // SAFETY: fcntl on a descriptor we own; only its status flags change (the child's
        // end of the pipe is another open file description and stays blocking).
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd, data, written: 0 })
    }

    fn pollfd(&self) -> libc::pollfd {
        libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 }
    }

    /// Write what the pipe takes now. Returns whether more is left to write; `false`
    /// when all is written or the child will read no more (`EPIPE`: it closed its stdin
    /// or exited), and the pipe is to be closed.
    fn write(&mut self) -> bool {
        let rest = &self.data[self.written..];
        let chunk = &rest[..rest.len().min(READ_BUF_BYTES)];
        // SAFETY: write(2) reads `chunk.len()` bytes from a live slice; the descriptor is ours.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) };
        match usize::try_from(n) {
            Ok(n) => {
                self.written += n;
                self.written < self.data.len()
            }
            Err(_) => {
                matches!(io::Error::last_os_error().kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock)
            }
        }
    }
}

/// One of the child's output pipes.
struct Pipe {
    src: Box<dyn ReadFd>,
    stream: Stream,
}

/// A readable descriptor (`ChildStdout`, `ChildStderr`).
trait ReadFd: io::Read + AsFd {}
impl<T: io::Read + AsFd> ReadFd for T {}

/// The outcome of one read from a pipe that `poll` reported ready.
enum Got {
    Data(usize),
    Again,
    Closed,
}

impl Pipe {
    fn pollfd(&self) -> libc::pollfd {
        pollfd(self.src.as_fd())
    }

    /// One read: poll said there is data or EOF, so this does not block.
    fn read(&mut self, buf: &mut [u8]) -> Got {
        match self.src.read(buf) {
            Ok(0) => Got::Closed,
            Ok(n) => Got::Data(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Got::Again,
            Err(_) => Got::Closed,
        }
    }
}

fn pollfd(fd: BorrowedFd<'_>) -> libc::pollfd {
    libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }
}

/// Waits for any of `fds` (`None`: no time limit); returns how many are ready
/// (0 also when a signal interrupted the wait).
fn poll(fds: &mut [libc::pollfd], wait: Option<Duration>) -> io::Result<usize> {
    // Round up, so a wake-up never comes before the deadline.
    let ms = wait.map_or(-1, |d| i32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(i32::MAX));
    // SAFETY: `fds` is a slice of initialised pollfd structs that outlives
    // the call, and every descriptor in it is borrowed, hence open.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if let Ok(n) = usize::try_from(rc) {
        return Ok(n);
    }
    let err = io::Error::last_os_error();
    // Interrupted: nothing is ready, and the caller works out the time left.
    if err.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(err) }
}

/// What is kept of the output: the head of stdout, the tail of stderr, and
/// how much of each there was.
struct Kept {
    cap: u64,
    stdout: Vec<u8>,
    stdout_total: u64,
    stderr: Vec<u8>,
    stderr_total: u64,
}

impl Kept {
    fn new(cap: u64) -> Self {
        Self { cap, stdout: Vec::new(), stdout_total: 0, stderr: Vec::new(), stderr_total: 0 }
    }

    fn add(&mut self, stream: Stream, chunk: &[u8]) {
        match stream {
            Stream::Stdout => {
                self.stdout_total += chunk.len() as u64;
                let room = self.cap.saturating_sub(self.stdout.len() as u64);
                let take = usize::try_from(room).unwrap_or(usize::MAX).min(chunk.len());
                self.stdout.extend_from_slice(&chunk[..take]);
            }
            Stream::Stderr => {
                self.stderr_total += chunk.len() as u64;
                self.stderr.extend_from_slice(chunk);
                if self.stderr.len() > 2 * STDERR_TAIL_BYTES {
                    self.stderr.drain(..self.stderr.len() - STDERR_TAIL_BYTES);
                }
            }
        }
    }

    fn finish(mut self) -> (Vec<u8>, u64, Vec<u8>, u64) {
        if self.stderr.len() > STDERR_TAIL_BYTES {
            self.stderr.drain(..self.stderr.len() - STDERR_TAIL_BYTES);
        }
        (self.stdout, self.stdout_total, self.stderr, self.stderr_total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn inv(argv: &[&str]) -> Invocation {
        Invocation {
            sandbox: None,
            limits: Vec::new(),
            image: None,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            stdin: None,
            timeout: Duration::from_secs(20),
            max_output_bytes: 1024 * 1024,
        }
    }

    /// A thread's first read buffer is small, grows by a read that fills it, and the grown one
    /// is what the thread's next run gets; every byte of a long output arrives either way.
    #[test]
    fn the_read_buffer_starts_small_and_grows_when_a_read_fills_it() {
        std::thread::spawn(|| {
            let mut buf = ReadBuf::take();
            assert_eq!(buf.len(), FIRST_READ_BYTES);
            buf.filled(FIRST_READ_BYTES - 1);
            assert_eq!(buf.len(), FIRST_READ_BYTES);
            buf.filled(FIRST_READ_BYTES);
            assert_eq!(buf.len(), READ_BUF_BYTES);
            buf.filled(READ_BUF_BYTES);
            assert_eq!(buf.len(), READ_BUF_BYTES);
            drop(buf);
            assert_eq!(ReadBuf::take().len(), READ_BUF_BYTES, "kept for the thread's next run");
            let out = run(&inv(&["head", "-c", "300000", "/dev/zero"])).unwrap();
            assert_eq!(out.stdout.len(), 300_000);
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            let out = run(&inv(&["head", "-c", "300000", "/dev/zero"])).unwrap();
            assert_eq!(out.stdout.len(), 300_000, "a fresh thread's small buffer reads all of it");
        })
        .join()
        .unwrap();
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

    /// `i` with `stdin`, started by [`crate::spawn`] unconfined and confined (a limit makes
    /// it so), and by std (no `PATH` at all: the program is left to the system's default
    /// search path): every path must feed stdin alike.
    fn both_spawn_paths(i: Invocation, stdin: &[u8]) -> [Invocation; 3] {
        let i = Invocation { stdin: Some(Arc::from(stdin)), ..i };
        let confined = Invocation { limits: vec![(Limit::CpuSeconds, 600)], ..i.clone() };
        let by_std = Invocation { clear_env: true, ..i.clone() };
        assert_eq!(resolve_program(&by_std.argv[0], &by_std), Lookup::AsWritten);
        [i, confined, by_std]
    }

    #[test]
    fn a_tool_inherits_only_its_stdin_stdout_and_stderr_on_every_path() {
        // A descriptor packs holds without close-on-exec (as a shell's `exec 7>>file`
        // leaves one): a tool must not get it, however it is started.
        let file = tempfile::tempfile().unwrap();
        // SAFETY: dup2 onto a number nothing else in this test binary uses.
        assert_eq!(unsafe { libc::dup2(file.as_raw_fd(), 960) }, 960);
        // SAFETY: 960 was just opened and is owned by nothing else.
        let _leaked = unsafe { OwnedFd::from_raw_fd(960) };
        for i in both_spawn_paths(inv(&["ls", "/proc/self/fd"]), b"") {
            let out = run(&i).unwrap();
            // 0, 1, 2 and the directory ls reads.
            let text = String::from_utf8(out.stdout).unwrap();
            assert_eq!(text, "0\n1\n2\n3\n", "limits {:?}, clear_env {}", i.limits, i.clear_env);
        }
    }

    #[test]
    fn stdin_arrives_byte_exact_with_nul_bytes_and_more_than_a_pipe_holds() {
        let mut data: Vec<u8> = b"a\0b\n\xff\r\n".to_vec();
        data.extend((0..300_000u32).map(|n| (n % 251) as u8));
        for i in both_spawn_paths(inv(&["cat"]), &data) {
            let out = run(&i).unwrap();
            assert_eq!((out.exit_code, out.stdout.len()), (Some(0), data.len()));
            assert!(out.stdout == data, "stdin reached cat unchanged (limits: {:?})", i.limits);
        }
    }

    #[test]
    fn an_empty_stdin_is_end_of_file_and_none_is_dev_null() {
        for i in both_spawn_paths(inv(&["wc", "-c"]), b"") {
            assert_eq!(run(&i).unwrap().stdout, b"0\n");
        }
        let out = run(&inv(&["readlink", "/proc/self/fd/0"])).unwrap();
        assert_eq!(out.stdout, b"/dev/null\n");
    }

    #[test]
    fn a_child_that_never_reads_stdin_or_writes_first_does_not_hang_packs() {
        let big = vec![b'x'; 4 * 1024 * 1024];
        // Exits at once without reading: the rest of the write fails with EPIPE, ignored.
        for i in both_spawn_paths(inv(&["sh", "-c", "echo kept; exit 3"]), &big) {
            let out = run(&i).unwrap();
            assert_eq!((out.exit_code, out.stdout.as_slice(), out.timed_out), (Some(3), &b"kept\n"[..], false));
        }
        // Writes more than a pipe holds before it reads a byte: both directions move.
        let script = "head -c 1000000 /dev/zero; wc -c";
        for i in both_spawn_paths(inv(&["sh", "-c", script]), &big) {
            let out = run(&i).unwrap();
            assert_eq!(out.exit_code, Some(0));
            assert_eq!(&out.stdout[1_000_000..], b"4194304\n");
        }
        // Reads nothing and keeps running: the timeout still ends it.
        let mut sleeper = inv(&["sleep", "30"]);
        sleeper.timeout = Duration::from_millis(300);
        for i in both_spawn_paths(sleeper, &big) {
            let out = run(&i).unwrap();
            assert!(out.timed_out);
        }
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

    /// Runs `argv` with a timeout of `ms`, which it must exceed; returns soon after.
    fn run_past(argv: &[&str], ms: u64) -> RunOutcome {
        let mut i = inv(argv);
        i.timeout = Duration::from_millis(ms);
        let started = Instant::now();
        let out = run(&i).unwrap();
        // Not the 30 s the tools would sleep, or forever: a bound that tells those apart, not a
        // speed (a starved test machine took over 5 s for a 300 ms timeout).
        assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
        assert!(out.timed_out);
        out
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let out = run_past(&["sh", "-c", "sleep 30 & echo $! >&2; sleep 30"], 500);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert!(out.duration >= Duration::from_millis(500));
        assert_grandchild_dead(&out.stderr);
    }

    #[test]
    fn leftover_grandchild_does_not_hold_us() {
        let t = Instant::now();
        let out = run(&inv(&["sh", "-c", "sleep 30 & echo $! >&2; echo done"])).unwrap();
        assert!(t.elapsed() < Duration::from_secs(20), "took {:?}", t.elapsed());
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
        while !dead() && t.elapsed() < Duration::from_secs(10) {
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
            // SAFETY: kill(2) on a pid the escaped child printed; it is still ours (a sleep).
            unsafe { libc::kill(pid.parse().expect("a pid"), libc::SIGKILL) };
        }
        assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
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
    fn argv0_is_the_program_as_written() {
        let out = run(&inv(&["cat", "/proc/self/cmdline"])).unwrap();
        assert_eq!(out.stdout, b"cat\0/proc/self/cmdline\0");
    }

    /// An executable `name` with `contents` in a new directory, and an invocation
    /// of it whose PATH starts with that directory.
    fn on_own_path(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf, Invocation) {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join(name);
        std::fs::write(&script, contents).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut i = inv(&[name]);
        i.env.push(("PATH".into(), format!("{}:/usr/bin:/bin", dir.path().display())));
        (dir, script, i)
    }

    #[test]
    fn the_childs_path_decides_which_program_runs() {
        let (_dir, script, mut i) = on_own_path("packs-runner-which-test", "#!/bin/sh\necho mine\n");
        assert_eq!(run(&i).unwrap().stdout, b"mine\n");
        assert_eq!(resolve_program("packs-runner-which-test", &i), Lookup::Found(script));

        // Relative PATH entries are ignored: they mean whatever the tool's cwd holds.
        i.env = vec![("PATH".into(), "bin:.::/usr/bin:/bin".into())];
        assert!(matches!(resolve_program("true", &i), Lookup::Found(p) if p.is_absolute()));
        i.env = vec![("PATH".into(), ".:bin".into())];
        assert_eq!(resolve_program("true", &i), Lookup::Missing);
        assert_eq!(resolve_program("./true", &i), Lookup::AsWritten);
    }

    #[test]
    fn a_script_without_an_interpreter_line_is_not_handed_to_a_shell() {
        // execvp would run it with /bin/sh; packs never involves a shell.
        let (_dir, _, i) = on_own_path("packs-runner-no-shebang", "echo ran by a shell\n");
        match run(&i) {
            Err(SpawnError::Start { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::ENOEXEC)),
            other => panic!("expected ENOEXEC, got {other:?}"),
        }
    }

    #[test]
    fn a_tool_that_never_stops_writing_still_times_out() {
        let out = run_past(&["sh", "-c", "yes & yes >&2 & wait"], 300);
        assert!(out.stdout_truncated || out.stdout_total_bytes > 0);
    }

    #[test]
    fn an_escaped_writer_that_never_stops_costs_at_most_the_grace() {
        // setsid leaves the group: only the drain grace bounds the wait.
        let mut i = inv(&["sh", "-c", "setsid yes & sleep 0.1; exit 0"]);
        i.max_output_bytes = 1024;
        let started = Instant::now();
        let out = run(&i).unwrap();
        let took = started.elapsed();
        assert_eq!(out.exit_code, Some(0));
        // Not the 30 s `yes` could go on for: the grace, with a margin that only bounds it.
        assert!(took < DRAIN_GRACE * 20, "took {took:?}");
        assert_eq!(out.stdout.len(), 1024);
        // The escaped `yes` dies of SIGPIPE once the pipe's last reader is gone.
    }

    #[test]
    fn a_cancel_after_reaping_signals_nothing() {
        let seen = Mutex::new(None);
        run_observed(&inv(&["true"]), |p| *seen.lock().unwrap() = Some(p.clone()), |_, _| {}).unwrap();
        let process = seen.into_inner().unwrap().expect("on_spawn was called");
        assert!(!process.kill(), "a reaped process is never signalled (its pid may be reused)");
    }

    #[test]
    fn a_child_that_leaves_its_group_is_still_killed_on_timeout() {
        // perl's setpgrp moves the child itself into a new group.
        let out = run_past(&["perl", "-e", "setpgrp(0, 0); sleep 30"], 300);
        assert_eq!(out.signal, Some(libc::SIGKILL));
    }

    #[test]
    fn a_panicking_observer_leaves_no_process_behind() {
        let pid = Mutex::new(None::<i32>);
        let result = std::panic::catch_unwind(|| {
            run_streaming(&inv(&["sh", "-c", "echo $$; exec sleep 30"]), |_, bytes| {
                let text = String::from_utf8_lossy(bytes);
                *pid.lock().unwrap() = text.trim().parse().ok();
                panic!("observer failed");
            })
        });
        assert!(result.is_err(), "the panic reaches the caller");
        let pid = pid.into_inner().unwrap().expect("the child printed its pid");
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "the child {pid} was killed and reaped");
    }

    #[test]
    fn the_portable_exit_watch_fires_without_reaping() {
        let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let watch = ExitWatch::waiter(child.id()).unwrap();
        let mut fds = [pollfd(watch.fd())];
        assert_eq!(poll(&mut fds, Some(Duration::from_secs(10))).unwrap(), 1);
        // Still a zombie for us to reap, with its status.
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }

    #[test]
    fn stream_serializes_lowercase() {
        assert_eq!(serde_json::to_string(&Stream::Stderr).unwrap(), "\"stderr\"");
    }
}
