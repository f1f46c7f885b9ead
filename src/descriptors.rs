//! What a tool inherits of packs' open descriptors: nothing but what packs hands it.
//!
//! Landlock checks a file when it is opened, so a descriptor a tool inherits is a way
//! around its confinement: after `exec 7>>~/.bashrc; packs run tool`, a read-only tool
//! could append to `~/.bashrc` through descriptor 7. Rust opens its own descriptors
//! close-on-exec, but what packs inherited, or what a library opened without
//! `O_CLOEXEC`, would reach every tool. So the child, between its start and `execve`,
//! marks every descriptor from 3 up close-on-exec (before it puts its stdin, stdout,
//! stderr, and a sealed image on 3, in place: those it keeps): `execve` closes them all.
//!
//! Close-on-exec rather than closed at once: until `execve` the child may still need one
//! (the Landlock ruleset it enters; std's pipe that reports a failed `execve`), and the
//! kernel closes the lot atomically at `execve`. It runs in the child between its start
//! and `execve`, so it only makes system calls: no allocation, no lock.

use std::io;

/// Mark every descriptor numbered `lowest` or above close-on-exec. `close_range` with
/// `CLOSE_RANGE_CLOEXEC` (Linux 5.11) where the kernel has it; else every descriptor
/// `/proc/self/fd` lists; else every number below the descriptor limit.
pub(crate) fn close_on_exec_from(lowest: libc::c_int) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range takes integers only.
        let swept = unsafe {
            libc::syscall(libc::SYS_close_range, lowest as libc::c_uint, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC)
        };
        if swept == 0 {
            return Ok(());
        }
        // ENOSYS before Linux 5.9, EINVAL for the flag before 5.11: sweep by hand.
        if let Some(done) = listed(lowest) {
            return done;
        }
    }
    every(lowest)
}

/// The fallback where `/proc` is mounted: each descriptor `/proc/self/fd` lists, read
/// with `getdents64` into a buffer on the stack. `None` when it cannot be opened.
#[cfg(target_os = "linux")]
fn listed(lowest: libc::c_int) -> Option<io::Result<()>> {
    // SAFETY: open reads a NUL-terminated literal.
    let dir = unsafe { libc::open(c"/proc/self/fd".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if dir < 0 {
        return None;
    }
    let mut buf = [0u8; 2048];
    let result = loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`.
        let got = unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
        let Ok(got) = usize::try_from(got) else { break Err(io::Error::last_os_error()) };
        if got == 0 {
            break Ok(());
        }
        let entries = Entries { buf: &buf[..got] };
        for fd in entries {
            if fd >= lowest && fd != dir {
                // SAFETY: fcntl takes integers; a descriptor closed meanwhile is EBADF.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
    };
    // SAFETY: `dir` is ours.
    unsafe { libc::close(dir) };
    Some(result)
}

/// The descriptor numbers in a `getdents64` buffer (`struct linux_dirent64`: inode
/// (8 bytes), offset (8), record length (2), type (1), then the NUL-terminated name);
/// names that are not numbers (`.`, `..`) are skipped.
#[cfg(target_os = "linux")]
struct Entries<'a> {
    buf: &'a [u8],
}

#[cfg(target_os = "linux")]
impl Iterator for Entries<'_> {
    type Item = libc::c_int;

    fn next(&mut self) -> Option<libc::c_int> {
        loop {
            let len = usize::from(u16::from_ne_bytes([*self.buf.get(16)?, *self.buf.get(17)?]));
            let record = self.buf.get(..len).filter(|_| len > 19)?;
            self.buf = &self.buf[len..];
            let name = record[19..].split(|&b| b == 0).next().unwrap_or_default();
            let number = name.iter().try_fold(0 as libc::c_int, |n, &b| {
                b.is_ascii_digit().then(|| n.checked_mul(10)?.checked_add(libc::c_int::from(b - b'0'))).flatten()
            });
            if let Some(fd) = number.filter(|_| !name.is_empty()) {
                return Some(fd);
            }
        }
    }
}

/// The last fallback: every number from `lowest` below the hard descriptor limit
/// (capped at 2^20, Linux's default ceiling `fs.nr_open`).
fn every(lowest: libc::c_int) -> io::Result<()> {
    // SAFETY: getrlimit writes into a local.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let top = libc::c_int::try_from(limit.rlim_max.min(1 << 20)).unwrap_or(1 << 20);
    for fd in lowest..top {
        // SAFETY: fcntl takes integers; a number that is not open is EBADF.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// A file open on descriptor `fd` (a high number), not close-on-exec.
    fn inheritable(fd: libc::c_int) -> std::fs::File {
        let file = tempfile::tempfile().unwrap();
        // SAFETY: dup2 onto a high number nothing else in the test binary uses; the
        // copy is owned by the returned File.
        let high = unsafe { libc::dup2(file.as_raw_fd(), fd) };
        assert_eq!(high, fd);
        // SAFETY: `high` was just opened and is owned by nothing else.
        unsafe { std::os::fd::FromRawFd::from_raw_fd(high) }
    }

    fn close_on_exec(file: &std::fs::File) -> bool {
        // SAFETY: F_GETFD on an open descriptor.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFD) & libc::FD_CLOEXEC != 0 }
    }

    #[test]
    fn every_way_marks_what_is_open_above_the_lowest_and_nothing_below() {
        #[cfg(target_os = "linux")]
        let listed = |lowest| listed(lowest).expect("/proc is mounted");
        type Sweep<'a> = &'a dyn Fn(libc::c_int) -> io::Result<()>;
        let ways: &[(&str, Sweep<'_>)] = &[
            ("close_on_exec_from", &close_on_exec_from),
            #[cfg(target_os = "linux")]
            ("listed", &listed),
            ("every", &every),
        ];
        for (i, (way, sweep)) in ways.iter().enumerate() {
            let base = 900 + 10 * libc::c_int::try_from(i).unwrap();
            let (below, above) = (inheritable(base), inheritable(base + 5));
            assert!(!close_on_exec(&below) && !close_on_exec(&above), "{way}");
            sweep(base + 1).unwrap();
            assert!(!close_on_exec(&below) && close_on_exec(&above), "{way}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn entries_are_read_from_a_getdents_buffer() {
        let mut buf = Vec::new();
        for name in [&b"."[..], b"..", b"0", b"17", b"x1"] {
            let len = (19 + name.len() + 1).next_multiple_of(8);
            let mut record = vec![0u8; len];
            record[16..18].copy_from_slice(&u16::try_from(len).unwrap().to_ne_bytes());
            record[19..19 + name.len()].copy_from_slice(name);
            buf.extend(record);
        }
        assert_eq!(Entries { buf: &buf }.collect::<Vec<_>>(), [0, 17]);
        // A record cut short ends the walk (each record above is 24 bytes; the fourth is 17).
        assert_eq!(Entries { buf: &buf[..95] }.collect::<Vec<_>>(), [0]);
    }
}
