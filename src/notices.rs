//! The kernel's change notices, asked for without blocking: inotify watches on directories
//! (each for the names that matter in it, or for every name) and the mount table
//! (`/proc/self/mountinfo`, whose change a mount over a watched directory makes, which
//! inotify does not report). What a process keeps from the file system between calls (where
//! a program is on the `PATH`, the read rules around the credential stores) stays only while
//! [`Notices::quiet`] says nothing that matters came; one `poll` asks. A directory on a
//! file system whose changes inotify does not hear ([`seen`]: network, FUSE, cluster,
//! procfs) is not watched: nothing that depends on it is kept.

/// What [`Notices::watch`] made of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Watched: a change in it is a notice.
    Watched,
    /// Not watched: it is on a file system whose changes make no notice ([`seen`] says
    /// which), so nothing that depends on it may be kept.
    Unseen,
    /// It could not be watched (no more watches, no permission, gone).
    Failed,
}

/// Whether inotify reports the changes of a file system of type `f_type` (`statfs`,
/// linux/magic.h). inotify hears what this kernel does: not what another client or the
/// server of a network file system does (NFS, SMB/CIFS, 9p, Ceph, AFS, Coda, NCP, Lustre,
/// GPFS), nor another node of a cluster file system on a shared disk (OCFS2, GFS2), nor a
/// FUSE server (sshfs, GlusterFS, virtiofs: all FUSE's type). Nor procfs: its entries come
/// and go with processes without a notice, and its magic links (`/proc/PID/cwd`,
/// `/proc/PID/root`) lead into another process's mounts, which a path resolved here does
/// not reach. An overlay is seen: a change made through it is a notice, and changing its
/// layers underneath while it is mounted is undefined (the kernel's overlayfs docs), as a
/// container's root is, whose every `PATH` directory is on one.
pub(crate) fn seen(f_type: u32) -> bool {
    const UNSEEN: &[u32] = &[
        0x9fa0,      // PROC_SUPER_MAGIC
        0x6969,      // NFS_SUPER_MAGIC
        0x517b,      // SMB_SUPER_MAGIC
        0xff53_4d42, // CIFS_SUPER_MAGIC
        0xfe53_4d42, // SMB2_SUPER_MAGIC
        0x564c,      // NCP_SUPER_MAGIC
        0x0102_1997, // V9FS_MAGIC
        0x00c3_6400, // CEPH_SUPER_MAGIC
        0x5346_414f, // AFS_SUPER_MAGIC (OpenAFS too)
        0x6b41_4653, // AFS_FS_MAGIC (kAFS)
        0x7375_7245, // CODA_SUPER_MAGIC
        0x6573_5546, // FUSE_SUPER_MAGIC
        0x7461_636f, // OCFS2_SUPER_MAGIC
        0x0116_1970, // GFS2_MAGIC
        0x0bd0_0bd0, // Lustre's LL_SUPER_MAGIC
        0x4750_4653, // GPFS ("GPFS")
    ];
    !UNSEEN.contains(&f_type)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::{HashMap, HashSet};
    use std::ffi::{OsStr, OsString};
    use std::fs::File;
    use std::mem::MaybeUninit;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use rustix::fs::inotify;

    use super::Watch;

    /// Watches and the mount table; see the module.
    #[derive(Debug)]
    pub(crate) struct Notices {
        inotify: OwnedFd,
        /// Polled for `POLLPRI`: the mount table changed.
        mounts: File,
        /// Per watch, the names whose events matter (`None`: every name). An event on the
        /// directory itself (moved, removed, its mode or times changed, unmounted, its watch
        /// gone) always does, and so does an overflow of the queue.
        names: HashMap<i32, Option<HashSet<OsString>>>,
        /// A notice that matters came: it stays so.
        heard: bool,
    }

    impl Notices {
        /// No watch yet; `None` when the kernel offers no inotify or mount table.
        pub(crate) fn new() -> Option<Self> {
            let inotify = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
            let mounts = File::open("/proc/self/mountinfo").ok()?;
            Some(Self { inotify, mounts, names: HashMap::new(), heard: false })
        }

        /// Watch `dir` (the last component not followed) for entries named `name` (`None`:
        /// any) created, removed, moved in or out or changed in mode or times, and for its own
        /// removal, move or change (its mode, its times); not when its file system makes
        /// no notices ([`super::seen`]).
        pub(crate) fn watch(&mut self, dir: &Path, name: Option<&OsStr>) -> Watch {
            use inotify::WatchFlags as W;
            use rustix::fs::OFlags;
            // The file system of `dir` itself (a link not followed, as the watch is made).
            let Ok(at) =
                rustix::fs::open(dir, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, rustix::fs::Mode::empty())
            else {
                return Watch::Failed;
            };
            let Ok(fs) = rustix::fs::fstatfs(&at) else { return Watch::Failed };
            // `f_type` is 32 or 64 bits wide, signed or not: the magic numbers are 32 bits.
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation, trivial_numeric_casts)]
            if !super::seen(fs.f_type as u32) {
                return Watch::Unseen;
            }
            let mask = W::CREATE
                | W::DELETE
                | W::MOVED_FROM
                | W::MOVED_TO
                | W::ATTRIB
                | W::MODIFY
                | W::DELETE_SELF
                | W::MOVE_SELF
                | W::DONT_FOLLOW;
            let Ok(wd) = inotify::add_watch(&self.inotify, dir, mask) else { return Watch::Failed };
            let names = self.names.entry(wd).or_insert_with(|| Some(HashSet::new()));
            match (names, name) {
                (Some(set), Some(name)) => {
                    set.insert(name.to_owned());
                }
                (names, None) => *names = None,
                (None, Some(_)) => {}
            }
            Watch::Watched
        }

        /// Whether nothing that matters came since the watches were made (one `poll`, not
        /// blocking; notices that came are read). Once false, always false.
        pub(crate) fn quiet(&mut self) -> bool {
            if self.heard {
                return false;
            }
            let mut fds = [
                libc::pollfd { fd: self.inotify.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.mounts.as_raw_fd(), events: libc::POLLPRI, revents: 0 },
            ];
            // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 0) };
            let quiet = match n {
                0 => true,
                n if n < 0 => false,
                _ if fds[1].revents != 0 || fds[0].revents & !libc::POLLIN != 0 => false,
                _ => self.only_unrelated_events(),
            };
            self.heard = !quiet;
            quiet
        }

        /// Read every queued event; false when one of them matters.
        fn only_unrelated_events(&mut self) -> bool {
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
            let mut unrelated = true;
            loop {
                match reader.next() {
                    Ok(event) => {
                        // A file's contents written (`MODIFY` with a name) move no entry.
                        let entry = event.events().intersects(
                            inotify::ReadFlags::CREATE
                                | inotify::ReadFlags::DELETE
                                | inotify::ReadFlags::MOVED_FROM
                                | inotify::ReadFlags::MOVED_TO
                                | inotify::ReadFlags::ATTRIB,
                        );
                        let matters = event.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW)
                            || match (event.file_name(), self.names.get(&event.wd())) {
                                (Some(_), _) if !entry => false,
                                (Some(name), Some(Some(names))) => names.contains(OsStr::from_bytes(name.to_bytes())),
                                (Some(_), Some(None)) => true,
                                // The directory itself (its modification time set alone is a
                                // `MODIFY`), or a watch we do not know.
                                _ => true,
                            };
                        unrelated &= !matters;
                    }
                    Err(rustix::io::Errno::AGAIN) => return unrelated,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => return false,
                }
            }
        }
    }
}

/// Elsewhere there are no notices: nothing is kept.
#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ffi::OsStr;
    use std::path::Path;

    #[derive(Debug)]
    pub(crate) struct Notices;

    impl Notices {
        pub(crate) fn new() -> Option<Self> {
            None
        }
        pub(crate) fn watch(&mut self, _: &Path, _: Option<&OsStr>) -> super::Watch {
            super::Watch::Failed
        }
        pub(crate) fn quiet(&mut self) -> bool {
            false
        }
    }
}

pub(crate) use imp::Notices;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_fuse_cluster_and_proc_file_systems_are_unseen_local_ones_and_overlays_seen() {
        // nfs, cifs, smb2, 9p, ceph, fuse, kAFS, proc.
        for unseen in [0x6969, 0xff53_4d42, 0xfe53_4d42, 0x0102_1997, 0x00c3_6400, 0x6573_5546, 0x6b41_4653, 0x9fa0] {
            assert!(!seen(unseen), "{unseen:#x}");
        }
        // ext4, xfs, btrfs, tmpfs, overlay.
        for local in [0xef53, 0x5846_5342, 0x9123_683e, 0x0102_1994, 0x794c_7630] {
            assert!(seen(local), "{local:#x}");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_directory_of_procfs_is_not_watched() {
        let mut notices = Notices::new().unwrap();
        assert_eq!(notices.watch(std::path::Path::new("/proc/self"), None), Watch::Unseen);
        assert_eq!(notices.watch(std::path::Path::new("/proc"), None), Watch::Unseen);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(notices.watch(dir.path(), None), Watch::Watched);
        assert_eq!(notices.watch(&dir.path().join("missing"), None), Watch::Failed);
    }
}
