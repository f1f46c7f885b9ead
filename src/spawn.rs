//! Starting a tool without copying packs: `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! std starts a child with `posix_spawn` (nothing of the parent copied) unless a step must
//! run between fork and exec; then it forks, and forking a process as large as `packs
//! serve` (threads, a runtime, a catalog) costs a page-table copy, copy-on-write faults and
//! TLB shootdowns on every call (measured: 0.77 ms of system time per call at 8 in flight,
//! against 0.20 ms unconfined). Every tool needs such a step (shedding the descriptors packs
//! inherited, [`crate::descriptors`]), a confined one more (its own session, resource limits,
//! Landlock, seccomp), so packs starts it the way `posix_spawn` works inside: the
//! child runs on a stack of its own in packs' memory while the calling thread waits until
//! the child has called `execve` (or exited). Before that it only makes system calls on
//! data prepared here: no allocation, no lock, no unwinding. Every signal is blocked around
//! the clone, and the child has every handler back to the default before unblocking, so no
//! handler of packs ever runs in it: on x86-64 the kernel does it at the clone (`clone3`'s
//! `CLONE_CLEAR_SIGHAND`, Linux 5.5: what `execve` does, a handled signal to the default
//! and an ignored one still ignored), elsewhere (x32 included) or where `clone3` fails and
//! `clone` works (an older kernel, a container's seccomp profile answering with any errno)
//! the child asks for each signal's disposition
//! (64 `rt_sigaction`s). Landlock and seccomp apply to the child's own task, and after
//! `execve` it has memory of its own: no packs task shares its restrictions.

use std::ffi::{CString, OsStr, OsString, c_char, c_int, c_void};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

/// A started child: its pid, the writing end of its stdin (when asked for) and the
/// reading ends of its stdout and stderr.
pub(crate) struct Started {
    pub(crate) pid: libc::pid_t,
    pub(crate) stdin: Option<File>,
    pub(crate) stdout: File,
    pub(crate) stderr: File,
}

/// Where the child starts, besides its program, arguments and environment.
#[derive(Clone, Copy)]
pub(crate) struct Child<'a> {
    /// Its working directory (none: packs').
    pub(crate) cwd: Option<&'a Path>,
    /// Its stdin from a pipe (returned in [`Started::stdin`]) rather than /dev/null.
    pub(crate) stdin_pipe: bool,
    /// A descriptor holding the program's bytes, to start it from instead of its path
    /// ([`crate::image`]); it is open in the program as [`IMAGE_FD`].
    pub(crate) image: Option<c_int>,
}

/// The descriptor a program started from its image finds it on (a script's interpreter
/// opens `/dev/fd/3` to read it).
pub(crate) const IMAGE_FD: c_int = 3;

/// What the child needs, all prepared before the clone.
struct ChildArgs<'a> {
    path: &'a CString,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: Option<&'a CString>,
    /// stdin, stdout, stderr, each above 2 so no `dup2` overwrites another's source.
    fds: [c_int; 3],
    /// The image to start from (see [`Child::image`]), or -1.
    image: c_int,
    setup: &'a (dyn Fn() -> io::Result<()> + Sync),
    /// Set by the child when a step or `execve` failed: the errno.
    error: c_int,
    /// Set by the child when it was `setup` that failed (the sandbox's steps).
    in_setup: bool,
    /// Whether the kernel reset the child's handlers at the clone (`CLONE_CLEAR_SIGHAND`).
    handlers_cleared: bool,
}

/// How big the child's stack is: it makes system calls and little else. Below malloc's
/// mmap threshold (128 KiB), so that it comes from the heap: an `munmap` per spawn would
/// cost every other thread of `packs serve` a TLB shootdown.
const STACK_BYTES: usize = 64 * 1024;

fn cstring(bytes: &OsStr) -> io::Result<CString> {
    CString::new(bytes.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
}

/// A descriptor numbered 3 or above, close-on-exec (the child `dup2`s it to 0, 1 or 2).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates an open descriptor we own.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` was just returned to us and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// `/dev/null` for reading, opened once per process (close-on-exec, above 2): the stdin of
/// every child without a pipe, which gets its own copy of it by `dup2`. Checked at each use
/// (one `fstat`: still a character device with /dev/null's device number) and opened again
/// if not: a program using packs as a library may close descriptors it does not own
/// (`close_range(3, ~0)`), and the number, reused by its next `open`, would be another
/// file. A number no longer ours is never closed here.
fn dev_null() -> io::Result<BorrowedFd<'static>> {
    /// The descriptor (-1: none yet) and the device number it was opened on.
    static NULL: std::sync::Mutex<(c_int, libc::dev_t)> = std::sync::Mutex::new((-1, 0));
    let mut null = NULL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (fd, rdev) = *null;
    if fd >= 0 && rdev_of(fd) == Some(rdev) {
        // SAFETY: open (just checked), and never closed by packs.
        return Ok(unsafe { BorrowedFd::borrow_raw(fd) });
    }
    let file = above_stdio(File::open("/dev/null")?.into())?;
    let rdev = rdev_of(file.as_raw_fd()).ok_or_else(|| io::Error::other("/dev/null is not a character device"))?;
    // Kept for the life of the process.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
    *null = (fd, rdev);
    // SAFETY: just opened, and never closed.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// The device number of `fd` when it is a character device.
fn rdev_of(fd: c_int) -> Option<libc::dev_t> {
    // SAFETY: fstat writes into a local; a closed `fd` is an error.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &raw mut stat) } == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFCHR)
        .then_some(stat.st_rdev)
}

/// A pipe: (read end, write end), both close-on-exec and above 2.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just returned to us.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// Start `path` (or its image, `how.image`) with `argv` (its first element the name the
/// program sees) and exactly the environment `env`, stdin from a pipe (`how.stdin_pipe`)
/// or /dev/null, stdout and stderr into pipes, in `how.cwd`, after `setup` ran in the
/// child (it must only make system calls: it runs in packs' memory). An error of `setup`,
/// `chdir` or `execve` is returned here, and that child is reaped.
pub(crate) fn spawn(
    path: &Path,
    argv: &[&OsStr],
    env: &[(OsString, OsString)],
    how: Child<'_>,
    setup: &(dyn Fn() -> io::Result<()> + Sync),
) -> io::Result<Started> {
    spawn_by(path, argv, env, how, setup, Clone::Best)
}

/// [`spawn`], cloned `by` the way given.
fn spawn_by(
    path: &Path,
    argv: &[&OsStr],
    env: &[(OsString, OsString)],
    how: Child<'_>,
    setup: &(dyn Fn() -> io::Result<()> + Sync),
    by: Clone,
) -> io::Result<Started> {
    let Child { cwd, stdin_pipe, image } = how;
    let path = cstring(path.as_os_str())?;
    let argv: Vec<CString> = argv.iter().map(|a| cstring(a)).collect::<io::Result<_>>()?;
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<io::Result<_>>()?;
    let pointers = |strings: &[CString]| -> Vec<*const c_char> {
        strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(ptr::null())).collect()
    };
    let (argv_ptrs, envp_ptrs) = (pointers(&argv), pointers(&envp));
    let cwd = cwd.map(|c| cstring(c.as_os_str())).transpose()?;
    let (stdin_r, stdin_w) = if stdin_pipe {
        let (r, w) = pipe()?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    let stdin = match &stdin_r {
        Some(r) => r.as_fd(),
        None => dev_null()?,
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let mut args = ChildArgs {
        path: &path,
        argv: argv_ptrs.as_ptr(),
        envp: envp_ptrs.as_ptr(),
        cwd: cwd.as_ref(),
        fds: [stdin.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
        image: image.unwrap_or(-1),
        setup,
        error: 0,
        in_setup: false,
        handlers_cleared: false,
    };
    let pid = start(&mut args, by)?;
    // SAFETY: the child wrote `error` (if at all) before it exited or exec'd, and clone
    // returned only after that.
    let (error, in_setup) =
        unsafe { (ptr::read_volatile(&raw const args.error), ptr::read_volatile(&raw const args.in_setup)) };
    if error != 0 {
        reap(pid);
        let e = io::Error::from_raw_os_error(error);
        return Err(if in_setup { setup_failed(&e) } else { e });
    }
    Ok(Started { pid, stdin: stdin_w.map(File::from), stdout: out_r.into(), stderr: err_r.into() })
}

/// The error of a child whose `setup` (its sandbox's steps, before `execve`) failed: said so,
/// since an errno alone misleads (`E2BIG`, "Argument list too long", is Landlock's answer to a
/// 17th nested domain).
fn setup_failed(e: &io::Error) -> io::Error {
    let hint = if e.raw_os_error() == Some(libc::E2BIG) {
        ": Landlock nests at most 16 domains, and packs itself runs inside too many (a sandbox of its own, or a confined tool that started it)"
    } else {
        ""
    };
    io::Error::new(e.kind(), format!("the kernel refused to confine it ({e}){hint}"))
}

/// How [`start`] clones the child.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clone {
    /// `clone3` with `CLONE_CLEAR_SIGHAND` where the architecture and kernel allow it,
    /// `clone` otherwise.
    Best,
    /// `clone`, the child resetting each handler itself (the tests of the fallback).
    #[cfg_attr(not(test), allow(dead_code))]
    Plain,
}

/// `clone3` failed once in this process where `clone` then worked: `clone` from then on.
static CLONE3_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The child started by `clone3` (its result given), or else by `clone`. Any error of
/// `clone3` falls back (an older kernel says ENOSYS, a seccomp profile any errno: EPERM,
/// EACCES...); when `clone` then works, `clone3` is marked `refused` for the process, and
/// when it fails too (no more processes, no memory), its error is returned and `clone3` is
/// tried again next time.
fn or_clone(
    clone3: Result<libc::pid_t, c_int>,
    clone: impl FnOnce() -> io::Result<libc::pid_t>,
    refused: &std::sync::atomic::AtomicBool,
) -> io::Result<libc::pid_t> {
    match clone3 {
        Ok(pid) => Ok(pid),
        Err(_) => {
            let pid = clone()?;
            refused.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(pid)
        }
    }
}

/// Clone the child running [`child`] with `args` on a stack of its own, every signal
/// blocked in the calling thread meanwhile; returns once the child called `execve` or
/// exited (`CLONE_VFORK`).
fn start(args: &mut ChildArgs<'_>, how: Clone) -> io::Result<libc::pid_t> {
    let mut stack: Vec<u8> = Vec::with_capacity(STACK_BYTES);
    // The stack grows down: its top, aligned as the ABI wants (the bytes need no zeroing).
    let top = (stack.as_mut_ptr() as usize + STACK_BYTES) & !15;
    // SAFETY: the signal sets are plain values on this stack; sigfillset/pthread_sigmask
    // only write them. The clone runs `child` on `stack` (alive until this function
    // returns, and the child is done with it once the clone returns: CLONE_VFORK) with
    // `args`, which outlives it for the same reason.
    let pid = unsafe {
        let (mut all, mut old): (libc::sigset_t, libc::sigset_t) = (std::mem::zeroed(), std::mem::zeroed());
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old);
        let arg = std::ptr::from_mut(args).cast::<c_void>();
        let plain = || {
            (*arg.cast::<ChildArgs>()).handlers_cleared = false;
            let pid = libc::clone(child, top as *mut c_void, libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD, arg);
            if pid < 0 { Err(io::Error::last_os_error()) } else { Ok(pid) }
        };
        let started = if how == Clone::Best && !CLONE3_REFUSED.load(std::sync::atomic::Ordering::Relaxed) {
            (*arg.cast::<ChildArgs>()).handlers_cleared = true;
            let pid = clone3(arg, stack.as_mut_ptr() as usize, top);
            or_clone(if pid >= 0 { Ok(pid) } else { Err(errno()) }, plain, &CLONE3_REFUSED)
        } else {
            plain()
        };
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, ptr::null_mut());
        started
    };
    drop(stack);
    pid
}

/// `struct clone_args` up to `tls` (`CLONE_ARGS_SIZE_VER0`, linux/sched.h).
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

/// `CLONE_CLEAR_SIGHAND` (linux/sched.h): the child's handled signals back to the default.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND)` running [`child`] with `arg` on
/// the stack from `base` to `top`: the child's pid, or -1 with errno set. libc has no
/// `clone3` wrapper, and the raw system call returns in the child on the new stack, so the
/// child's side is written here: it calls `child` (frame pointer cleared, the stack
/// aligned as a call wants) and exits with what it returns (it never returns: it
/// `execve`s or `_exit`s).
///
/// # Safety
/// As for `clone(CLONE_VM | CLONE_VFORK)`: `arg` and the stack outlive the call, every
/// signal is blocked, and `child` only makes system calls.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
unsafe fn clone3(arg: *mut c_void, base: usize, top: usize) -> libc::pid_t {
    let clone_args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_CLEAR_SIGHAND,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: (top - base) as u64,
        tls: 0,
    };
    let entry: extern "C" fn(*mut c_void) -> c_int = child;
    let ret: i64;
    // SAFETY: the system call reads `clone_args` (alive across it); the parent's side
    // clobbers only what `syscall` does (rcx, r11, rax). The child's side runs on its own
    // stack (`top` is 16-aligned, as the ABI wants at a `call`) and never comes back here:
    // it calls `entry(arg)` and then `exit`.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") &raw const clone_args,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") entry,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        // SAFETY: errno is this thread's; the raw system call returned -errno.
        unsafe { *libc::__errno_location() = -ret as c_int };
        return -1;
    }
    ret as libc::pid_t
}

/// No `clone3` path on this architecture: [`start`] falls back to `clone`.
#[cfg(not(all(target_arch = "x86_64", target_pointer_width = "64")))]
unsafe fn clone3(_arg: *mut c_void, _base: usize, _top: usize) -> libc::pid_t {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// Wait for `pid` to end (a child that failed before `execve`).
fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid writes the status into a local.
    while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

/// The errno of the last failed call in the child.
fn errno() -> c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)
}

/// The child, until `execve`: system calls only, on data the parent prepared.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and untouched while the parent
    // waits (CLONE_VFORK); everything below is a system call on prepared data.
    unsafe {
        let args = &mut *arg.cast::<ChildArgs>();
        let fail = |args: &mut ChildArgs, error: c_int| -> ! {
            ptr::write_volatile(&raw mut args.error, if error == 0 { libc::EINVAL } else { error });
            libc::_exit(127)
        };
        // No handler of packs may run here: every one back to the default (what was
        // ignored stays ignored, as across execve, except SIGPIPE, which Rust ignores).
        // The kernel did it at the clone when `handlers_cleared`; SIGPIPE is left.
        if args.handlers_cleared {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGPIPE, &raw const default, ptr::null_mut());
        }
        for signal in 1..=libc::SIGRTMAX() {
            if args.handlers_cleared {
                break;
            }
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, ptr::null(), &raw mut old) == 0
                && (old.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
                && old.sa_sigaction != libc::SIG_DFL
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &raw const default, ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const none, ptr::null_mut());
        // Nothing of packs' descriptors past `execve` but the ones put in place below.
        if let Err(e) = crate::descriptors::close_on_exec_from(3) {
            fail(args, e.raw_os_error().unwrap_or(libc::EBADF));
        }
        for (target, &fd) in args.fds.iter().enumerate() {
            // dup2 clears close-on-exec on the copy.
            if libc::dup2(fd, target as c_int) < 0 {
                fail(args, errno());
            }
        }
        // The image on IMAGE_FD, open across exec (a script's interpreter reads it there).
        if args.image >= 0 {
            let kept = if args.image == IMAGE_FD {
                libc::fcntl(IMAGE_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(args.image, IMAGE_FD)
            };
            if kept < 0 {
                fail(args, errno());
            }
        }
        if let Some(cwd) = args.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            fail(args, errno());
        }
        if let Err(e) = (args.setup)() {
            ptr::write_volatile(&raw mut args.in_setup, true);
            fail(args, e.raw_os_error().unwrap_or(libc::EPERM));
        }
        if args.image >= 0 {
            libc::syscall(libc::SYS_execveat, IMAGE_FD, c"".as_ptr(), args.argv, args.envp, libc::AT_EMPTY_PATH);
        } else {
            libc::execve(args.path.as_ptr(), args.argv, args.envp);
        }
        fail(args, errno())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn child_in(cwd: Option<&Path>) -> Child<'_> {
        Child { cwd, stdin_pipe: false, image: None }
    }

    /// Start `path` with `argv` (no setup) and return its exit status and stdout.
    fn run(path: &str, argv: &[&str], env: &[(&str, &str)], cwd: Option<&str>) -> (i32, Vec<u8>) {
        let argv: Vec<&OsStr> = argv.iter().map(OsStr::new).collect();
        let env: Vec<(OsString, OsString)> = env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let mut started = spawn(Path::new(path), &argv, &env, child_in(cwd.map(Path::new)), &|| Ok(())).unwrap();
        let mut out = Vec::new();
        started.stdout.read_to_end(&mut out).unwrap();
        let mut status = 0;
        // SAFETY: waitpid writes into a local.
        assert_eq!(unsafe { libc::waitpid(started.pid, &raw mut status, 0) }, started.pid);
        (status, out)
    }

    #[test]
    fn the_child_gets_its_argv_environment_and_directory_exactly() {
        let (status, out) = run("/bin/cat", &["named", "/proc/self/cmdline"], &[], None);
        assert_eq!((status, out.as_slice()), (0, &b"named\0/proc/self/cmdline\0"[..]));
        let (_, out) =
            run("/bin/sh", &["sh", "-c", "printf '%s|%s|' \"$X\" \"$(pwd)\"; env | wc -l"], &[("X", "a b")], Some("/"));
        // Exactly the environment given (X, plus what sh itself sets: PWD, SHLVL, _).
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("a b|/|"), "{text}");
        assert!(text.trim_end().rsplit('|').next().unwrap().trim().parse::<u32>().unwrap() <= 4, "{text}");
    }

    #[test]
    fn a_program_starts_from_its_image_whatever_its_path_holds() {
        // A script and a binary, each read into an image and then replaced on disk: what
        // runs is what was read, and a script's interpreter reads it on IMAGE_FD.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\necho \"ran as $0 with $1\"\n").unwrap();
        let binary = dir.path().join("binary");
        std::fs::copy("/bin/echo", &binary).unwrap();
        let image = |path: &Path| crate::image::Image::of(&std::fs::read(path).unwrap()).unwrap();
        let images = [image(&script), image(&binary)];
        std::fs::write(&script, "#!/bin/sh\necho pwned\n").unwrap();
        std::fs::remove_file(&binary).unwrap();
        let mut outs = Vec::new();
        for (image, path) in images.iter().zip([&script, &binary]) {
            let argv = [OsStr::new("tool"), OsStr::new("arg")];
            let how = Child { cwd: None, stdin_pipe: false, image: Some(image.fd()) };
            let mut started = spawn(path, &argv, &[], how, &|| Ok(())).unwrap();
            let mut out = String::new();
            started.stdout.read_to_string(&mut out).unwrap();
            let mut status = 0;
            // SAFETY: waitpid writes into a local.
            assert_eq!(unsafe { libc::waitpid(started.pid, &raw mut status, 0) }, started.pid);
            assert_eq!(status, 0, "{out}");
            outs.push(out);
        }
        assert_eq!(outs, ["ran as /dev/fd/3 with arg\n", "arg\n"]);
    }

    #[test]
    fn a_program_started_from_its_image_gets_it_on_3_and_no_other_descriptor() {
        let file = tempfile::tempfile().unwrap();
        // SAFETY: dup2 onto a number nothing else in this test binary uses.
        assert_eq!(unsafe { libc::dup2(file.as_raw_fd(), 970) }, 970);
        // SAFETY: 970 was just opened and is owned by nothing else.
        let _leaked = unsafe { OwnedFd::from_raw_fd(970) };
        let image = crate::image::Image::of(&std::fs::read("/bin/ls").unwrap()).unwrap();
        let argv = [OsStr::new("ls"), OsStr::new("/proc/self/fd")];
        let how = Child { cwd: None, stdin_pipe: false, image: Some(image.fd()) };
        let mut started = spawn(Path::new("/bin/ls"), &argv, &[], how, &|| Ok(())).unwrap();
        let mut out = String::new();
        started.stdout.read_to_string(&mut out).unwrap();
        let mut status = 0;
        // SAFETY: waitpid writes into a local.
        assert_eq!(unsafe { libc::waitpid(started.pid, &raw mut status, 0) }, started.pid);
        // stdio, the image (IMAGE_FD), and the directory ls reads.
        assert_eq!((status, out.as_str()), (0, "0\n1\n2\n3\n4\n"));
    }

    /// Signals 1 to 64 as `/proc/PID/status` shows them, of `key` (`SigBlk:`, `SigIgn:`...).
    fn mask(status: &str, key: &str) -> u64 {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    }

    fn bit(signal: c_int) -> u64 {
        1 << (signal - 1)
    }

    /// Times [`count_hit`] ran, in any process sharing this memory.
    static HITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    extern "C" fn count_hit(_: c_int) {
        HITS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn the_child_starts_with_no_signal_blocked_or_handled_and_only_sigpipe_unignored() {
        // Rust ignores SIGPIPE in packs: a tool gets the default back (as std gives it). A
        // signal ignored before packs stays ignored (as across execve): SIGUSR2 here. A
        // handled signal (SIGUSR1, counting in this memory) is the default from the clone
        // on: sent to the child before its `execve`, it ends the child and no handler runs
        // in packs' memory. Both ways of cloning, the kernel's reset and the child's own.
        // SAFETY: installs a handler that only touches an atomic, and SIG_IGN.
        unsafe {
            let mut handled: libc::sigaction = std::mem::zeroed();
            handled.sa_sigaction = count_hit as extern "C" fn(c_int) as libc::sighandler_t;
            assert_eq!(libc::sigaction(libc::SIGUSR1, &raw const handled, ptr::null_mut()), 0);
            libc::signal(libc::SIGUSR2, libc::SIG_IGN);
        }
        let send_usr1 = || -> io::Result<()> {
            // SAFETY: raw getpid and kill (the child's own pid: glibc's caches the parent's).
            unsafe { libc::syscall(libc::SYS_kill, libc::syscall(libc::SYS_getpid), libc::SIGUSR1) };
            Ok(())
        };
        for by in [Clone::Best, Clone::Plain] {
            let argv = [OsStr::new("cat"), OsStr::new("/proc/self/status")];
            let mut started = spawn_by(Path::new("/bin/cat"), &argv, &[], child_in(None), &|| Ok(()), by).unwrap();
            let mut status = String::new();
            started.stdout.read_to_string(&mut status).unwrap();
            assert_eq!(mask(&status, "SigBlk:"), 0, "{status}");
            assert_eq!(mask(&status, "SigCgt:"), 0, "{status}");
            assert_eq!(
                mask(&status, "SigIgn:") & (bit(libc::SIGPIPE) | bit(libc::SIGUSR2)),
                bit(libc::SIGUSR2),
                "{status}"
            );
            let killed = spawn_by(Path::new("/bin/true"), &argv, &[], child_in(None), &send_usr1, by).unwrap();
            let mut wait = 0;
            // SAFETY: waitpid writes into a local.
            assert_eq!(unsafe { libc::waitpid(killed.pid, &raw mut wait, 0) }, killed.pid);
            assert!(libc::WIFSIGNALED(wait) && libc::WTERMSIG(wait) == libc::SIGUSR1, "status {wait:#x}");
            assert_eq!(HITS.load(std::sync::atomic::Ordering::SeqCst), 0);
            // SAFETY: reaps the child read above.
            unsafe { libc::waitpid(started.pid, ptr::null_mut(), 0) };
        }
        // SAFETY: back to the default disposition.
        unsafe { libc::signal(libc::SIGUSR2, libc::SIG_DFL) };
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
    fn the_kernel_resets_the_handlers_where_it_can() {
        // clone3 with CLONE_CLEAR_SIGHAND (Linux 5.5) on this kernel, unless a seccomp filter
        // of the test's own stands in the way: a malformed clone3 would fall back unseen.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let seccomp = status.lines().any(|l| l.starts_with("Seccomp:") && !l.ends_with('0'));
        run("/bin/true", &["true"], &[], None);
        if version >= (5, 5) && !seccomp {
            assert!(!CLONE3_REFUSED.load(std::sync::atomic::Ordering::Relaxed), "kernel {release}");
        }
    }

    #[test]
    fn stdin_is_dev_null_even_once_its_descriptor_was_replaced() {
        let null = dev_null().unwrap().as_raw_fd();
        // The number replaced by another file (the read end of a pipe whose writer is gone:
        // a child of another test that got it would read an end, as from /dev/null).
        let (r, w) = pipe().unwrap();
        drop(w);
        // SAFETY: dup2 onto the number dev_null() holds, as a host closing and reopening
        // descriptors would; the copy is left open (another thread may hold the number).
        assert_eq!(unsafe { libc::dup2(r.as_raw_fd(), null) }, null);
        let (status, out) = run("/bin/readlink", &["readlink", "/proc/self/fd/0"], &[], None);
        assert_eq!((status, String::from_utf8_lossy(&out).trim()), (0, "/dev/null"));
        assert_ne!(dev_null().unwrap().as_raw_fd(), null, "opened again");
    }

    #[test]
    fn any_clone3_error_falls_back_to_clone_and_refuses_it_only_if_clone_works() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let refused = AtomicBool::new(false);
        assert_eq!(or_clone(Ok(7), || panic!("clone after a clone3 that worked"), &refused).unwrap(), 7);
        assert!(!refused.load(Ordering::Relaxed));
        // No more processes: clone fails alike, its error is returned, clone3 tried again.
        let error = or_clone(Err(libc::EAGAIN), || Err(io::Error::from_raw_os_error(libc::EAGAIN)), &refused);
        assert_eq!(error.unwrap_err().raw_os_error(), Some(libc::EAGAIN));
        assert!(!refused.load(Ordering::Relaxed));
        // A seccomp profile answering clone3 with EACCES (or ENOSYS, EPERM...).
        for errno in [libc::EACCES, libc::ENOSYS, libc::EFAULT] {
            let refused = AtomicBool::new(false);
            assert_eq!(or_clone(Err(errno), || Ok(42), &refused).unwrap(), 42);
            assert!(refused.load(Ordering::Relaxed), "errno {errno}");
        }
    }

    #[test]
    fn failures_before_exec_are_returned_with_their_errno() {
        let argv = [OsStr::new("x")];
        let fails = |path: &str, setup: &(dyn Fn() -> io::Result<()> + Sync)| {
            spawn(Path::new(path), &argv, &[], child_in(None), setup).err().and_then(|e| e.raw_os_error())
        };
        assert_eq!(fails("/nonexistent/program", &|| Ok(())), Some(libc::ENOENT));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "echo no shebang\n").unwrap();
        std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // No shell fallback: a file that is not a program is an error, never `sh FILE`.
        assert_eq!(fails(plain.to_str().unwrap(), &|| Ok(())), Some(libc::ENOEXEC));
        // A failed sandbox step says so, its errno's kind kept.
        let refused = |errno| {
            let e = spawn(Path::new("/bin/true"), &argv, &[], child_in(None), &move || {
                Err(io::Error::from_raw_os_error(errno))
            });
            e.err().unwrap()
        };
        let e = refused(libc::EACCES);
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().starts_with("the kernel refused to confine it (Permission denied"), "{e}");
        let e = refused(libc::E2BIG);
        assert!(e.to_string().contains("Landlock nests at most 16 domains"), "{e}");
        let bad_cwd = spawn(Path::new("/bin/true"), &argv, &[], child_in(Some(Path::new("/nonexistent"))), &|| Ok(()));
        assert_eq!(bad_cwd.err().and_then(|e| e.raw_os_error()), Some(libc::ENOENT));
    }
}
