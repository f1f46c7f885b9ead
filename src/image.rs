//! An executable tool's bytes, read once and sealed in memory: what `--locked` hashed is
//! what runs.
//!
//! Checking an executable's file against its pin and later starting it by path leaves a
//! window: a file renamed over it, or rewritten in place, between the check and the
//! `execve` runs bytes nobody checked. So `--locked` reads the file once, hashes those
//! bytes, and copies them into a memfd sealed against every change (`F_SEAL_WRITE`,
//! `F_SEAL_SHRINK`, `F_SEAL_GROW`, `F_SEAL_SEAL`); the runner starts the tool from that
//! descriptor (`execveat(fd, "", AT_EMPTY_PATH)`), whatever the path holds by then.
//!
//! A script (`#!`) started this way is given its file as `/dev/fd/3` (the kernel's name
//! for a script run from a descriptor), so the descriptor stays open, read-only by its
//! seals, in the tool; a script that finds files beside itself through `$0` cannot do so
//! under `--locked`.

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The sealed bytes a tool is started from, shared by every call of it.
#[cfg(target_os = "linux")]
pub(crate) type PinnedImage = std::sync::Arc<Image>;
/// The sealed bytes a tool is started from: none where packs cannot run a program from
/// memory (it then starts the program from its path).
#[cfg(not(target_os = "linux"))]
pub(crate) type PinnedImage = std::convert::Infallible;

/// The sealed copy of one executable's bytes.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(crate) struct Image {
    fd: OwnedFd,
}

/// One image is equal only to itself (two invocations are the same when they would
/// start from the very same bytes).
#[cfg(target_os = "linux")]
impl PartialEq for Image {
    fn eq(&self, other: &Self) -> bool {
        self.fd.as_raw_fd() == other.fd.as_raw_fd()
    }
}

#[cfg(target_os = "linux")]
impl Eq for Image {}

#[cfg(target_os = "linux")]
impl Image {
    /// `bytes` (read once, hashed by the caller) in a sealed memfd.
    pub(crate) fn of(bytes: &[u8]) -> io::Result<Self> {
        Ok(Self { fd: sealed(bytes)? })
    }

    /// The descriptor the tool is started from (close-on-exec in packs).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A memfd holding `bytes`, executable, sealed against any change.
#[cfg(target_os = "linux")]
fn sealed(bytes: &[u8]) -> io::Result<OwnedFd> {
    const MFD_EXEC: libc::c_uint = 0x10;
    let name = c"packs-image";
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // Kernels since 6.3 may refuse to execute a memfd not created with MFD_EXEC (the
    // `vm.memfd_noexec` sysctl); older ones refuse the flag itself.
    // SAFETY: memfd_create reads a NUL-terminated name and returns a new descriptor.
    let mut raw = unsafe { libc::memfd_create(name.as_ptr(), flags | MFD_EXEC) };
    if raw < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // SAFETY: as above.
        raw = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned to us and is owned by nothing else.
    let mut fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if raw <= 2 {
        // Above stdin, stdout and stderr (packs started with one closed): the child sets
        // those up before it moves the image to its place.
        // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor we own.
        let above = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 3) };
        if above < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `above` was just returned to us.
        fd = unsafe { OwnedFd::from_raw_fd(above) };
    }
    let mut file = std::fs::File::from(fd);
    io::Write::write_all(&mut file, bytes)?;
    let fd = OwnedFd::from(file);
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: F_ADD_SEALS takes an int argument on a descriptor we own.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn an_image_holds_the_bytes_and_cannot_change() {
        let image = Image::of(b"#!/bin/sh\necho ran\n").unwrap();
        let mut copy = String::new();
        let mut file = std::fs::File::open(format!("/proc/self/fd/{}", image.fd())).unwrap();
        io::Read::read_to_string(&mut file, &mut copy).unwrap();
        assert_eq!(copy, "#!/bin/sh\necho ran\n");
        // And nobody can write into it, through any descriptor.
        let mut writable =
            std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", image.fd())).unwrap();
        let e = io::Write::write_all(&mut writable, b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    }
}
