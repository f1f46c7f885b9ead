//! Processes a tool leaves behind outside its process group (`setsid`, a double fork): packs
//! is their subreaper (Linux), so they become its children when their parents exit; each
//! carries its call's tag in its environment (`PACKS_CALL`), and is killed, with its group,
//! when its call ends. Untagged leftovers (a process that cleared its environment) are not
//! attributed to a call and are left alone; exited ones are reaped so no zombie stays. Only
//! the `packs` program adopts leftovers ([`adopt`]); in a program that embeds the library,
//! nothing here runs.

use std::collections::HashSet;

/// The variable that tags every process of a call.
pub(crate) const TAG_VAR: &str = "PACKS_CALL";

/// A tag for one call, unique in this packs process.
pub(crate) fn new_tag() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!("{}.{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// Whether this process adopted its tools' leftovers ([`adopt`]).
static ADOPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make this process the subreaper of everything its tools start, and the owner of every
/// child it does not otherwise wait for. Only the `packs` program does this: a program that
/// embeds the library has children of its own, whose orphans and exit statuses are its
/// business.
pub(crate) fn adopt() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer; no memory is passed.
        let ok = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
        ADOPTED.store(ok, std::sync::atomic::Ordering::SeqCst);
        // Not dumpable: a tool (same user, no privilege) cannot read packs' environment (its
        // secrets), memory or maps through /proc, nor ptrace it.
        // SAFETY: PR_SET_DUMPABLE takes an integer; no memory is passed.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
}

/// Kill every process of the call tagged `tag` that is now a child of packs (and its
/// group), reap them, and reap any exited child nobody waits for. `tracked` are the pids
/// of tools still running (their parent waits for them).
pub(crate) fn end(tag: &str, tracked: &HashSet<u32>) {
    if !ADOPTED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let needle = format!("{TAG_VAR}={tag}");
        // Killing one may hand packs its children: look again, a bounded number of times.
        for _ in 0..64 {
            let mut killed = false;
            for pid in children().into_iter().filter(|p| !tracked.contains(p)) {
                let Ok(id) = libc::pid_t::try_from(pid) else { continue };
                if is_zombie(pid) {
                    reap(id, libc::WNOHANG);
                    // Its children (if any) are packs' now: look again.
                    killed = true;
                } else if environ_has(pid, &needle) {
                    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own
                    // unreaped child, so neither it nor its group id can have been reused.
                    unsafe {
                        libc::kill(-id, libc::SIGKILL);
                        libc::kill(id, libc::SIGKILL);
                    }
                    reap_within(id, std::time::Duration::from_millis(500));
                    killed = true;
                }
            }
            if !killed {
                break;
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (tag, tracked);
}

/// Reap `pid` once it has died, waiting at most `limit` (a process held by a tracer may
/// never become reapable: a later sweep reaps it, packs never blocks on it).
#[cfg(target_os = "linux")]
fn reap_within(pid: libc::pid_t, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid pointer to an int.
        let r = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
        if r != 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(target_os = "linux")]
fn reap(pid: libc::pid_t, flags: libc::c_int) {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid pointer to an int.
    unsafe {
        libc::waitpid(pid, &raw mut status, flags);
    }
}

/// Whether a sweep could find anything: packs adopted its tools' leftovers and its main
/// thread has a child (or its children cannot be read, so a sweep must look). The common case,
/// no child at all, costs one `pread` of one byte, without the lock a sweep holds.
pub(crate) fn anything_to_sweep() -> bool {
    if !ADOPTED.load(std::sync::atomic::Ordering::SeqCst) {
        return false;
    }
    #[cfg(target_os = "linux")]
    let listed = {
        let mut byte = [0u8; 1];
        main_children().is_none_or(|file| !matches!(std::os::unix::fs::FileExt::read_at(file, &mut byte, 0), Ok(0)))
    };
    #[cfg(not(target_os = "linux"))]
    let listed = false;
    listed
}

/// The main thread's `children` file, opened once and read again from its start by each
/// sweep (a `seq_file`: a read at offset 0 lists the children as they are now), where
/// opening, reading and closing it cost three system calls per call; `None` on kernels
/// without these files.
#[cfg(target_os = "linux")]
fn main_children() -> Option<&'static std::fs::File> {
    static FILE: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| std::fs::File::open(format!("/proc/self/task/{}/children", std::process::id())).ok()).as_ref()
}

/// Packs' children that a call may have left: those of its main thread, or (on kernels
/// without `children` files) a scan of `/proc` for processes whose parent is packs.
///
/// A leftover becomes packs' child when its parent exits, and the kernel gives it to the
/// first live thread of the subreaper's thread group (`find_new_reaper`, then
/// `find_alive_thread`), which is the main thread while packs runs (its `main` returning
/// ends the process). The worker threads' children are the tools they wait for, tracked
/// by the caller: reading one file instead of one per thread is what a call pays here.
#[cfg(target_os = "linux")]
fn children() -> Vec<u32> {
    let me = std::process::id();
    if let Some(file) = main_children() {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match std::os::unix::fs::FileExt::read_at(file, &mut buf, text.len() as u64) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        return String::from_utf8_lossy(&text).split_whitespace().filter_map(|p| p.parse::<u32>().ok()).collect();
    }
    let mut pids = Vec::new();
    let mut found_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                found_file = true;
                pids.extend(text.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    if found_file {
        return pids;
    }
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(me))
        .collect()
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces).
#[cfg(target_os = "linux")]
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

#[cfg(target_os = "linux")]
fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

#[cfg(target_os = "linux")]
fn is_zombie(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "Z"))
}

#[cfg(target_os = "linux")]
fn environ_has(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle.as_bytes()))
}
