//! The kernel's change notices, asked for without blocking: inotify watches on directories
//! (each for the names that matter in it, or for every name), on files (a second name given
//! to one: [`Notices::watch_file`]) and the mount table
//! (`/proc/self/mountinfo`, whose change a mount over a watched directory makes, which
//! inotify does not report). What a process keeps from the file system between calls (where
//! a program is on the `PATH`, the read rules around the credential stores) stays only while
//! [`Notices::quiet`] says nothing that matters came; one `poll` asks. A directory on a
//! file system whose changes inotify does not hear ([`seen`]: network, FUSE, cluster,
//! procfs) is not watched ([`Watch::Unseen`]), and nothing that depends on it is kept on the
//! notices' word: the caller keeps nothing (a program found on the `PATH`), or looks again
//! at each use (the read rules' walk `stat`s each directory and file it depends on, which
//! such a file system answers from its attribute cache: a change another machine made may
//! go unseen until that expires, 30 to 60 seconds for an NFS directory by default).

/// What [`Notices::watch`] made of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Watched: a change in it is a notice.
    Watched,
    /// Not watched: it is on a file system whose changes make no notice ([`seen`] says
    /// which), so nothing that depends on it may be kept on the notices' word.
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

/// Whether two names that differ may be one entry in a directory of a file system of type
/// `f_type`: always on vfat, exFAT, NTFS, HFS(+), JFS and ISO 9660 (case-insensitive, or
/// may be mounted so); on ext4, f2fs, tmpfs, bcachefs and an overlay when the directory
/// itself folds case (`casefolded`, asked only there). A notice there names the entry as it
/// was spelled (`.SSH` for `.ssh`, or another Unicode normalization of it), so any name
/// matters.
pub(crate) fn any_case(f_type: u32, casefolded: impl FnOnce() -> bool) -> bool {
    const FOLDING: &[u32] = &[
        0x4d44,      // MSDOS_SUPER_MAGIC (vfat, msdos)
        0x2011_bab0, // EXFAT_SUPER_MAGIC
        0x7366_746e, // NTFS3 ("ntfs")
        0x5346_544e, // NTFS_SB_MAGIC
        0x4244,      // HFS_SUPER_MAGIC
        0x482b,      // HFSPLUS_SUPER_MAGIC
        0x3153_464a, // JFS_SUPER_MAGIC
        0x9660,      // ISOFS_SUPER_MAGIC
    ];
    const MAY_FOLD: &[u32] = &[
        0xef53,      // EXT4_SUPER_MAGIC (ext2, ext3)
        0xf2f5_2010, // F2FS_SUPER_MAGIC
        0x0102_1994, // TMPFS_MAGIC
        0xca45_1a4e, // BCACHEFS_SUPER_MAGIC
        0x794c_7630, // OVERLAYFS_SUPER_MAGIC (its layers' flags)
    ];
    FOLDING.contains(&f_type) || (MAY_FOLD.contains(&f_type) && casefolded())
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::{HashMap, HashSet};
    use std::ffi::{OsStr, OsString};
    use std::fs::File;
    use std::mem::MaybeUninit;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use rustix::fs::inotify;

    use super::Watch;

    /// Watches and the mount table; see the module.
    #[derive(Debug)]
    pub(crate) struct Notices {
        inotify: Instance,
        /// Polled for `POLLPRI`: the mount table changed.
        mounts: File,
        /// Per watch, the names whose events matter (`None`: every name). An event on the
        /// directory itself (moved, removed, its mode or times changed, unmounted, its watch
        /// gone) always does, and so does an overflow of the queue.
        names: HashMap<i32, Option<HashSet<OsString>>>,
        /// The watch of each directory watched, by the path it was watched at: a name added
        /// later costs no system call. The path's own replacement is a notice on its parent,
        /// watched for its name by every caller (each walks down from `/`), so while no
        /// notice came the path still leads to the directory watched.
        dirs: HashMap<PathBuf, i32>,
        /// Whether an entry created, moved in or moved out under any name matters
        /// ([`Notices::new_entries`]).
        new_entries: bool,
        /// Files watched themselves ([`Notices::watch_file`]), by watch: the path each was
        /// found at and its inode number.
        files: HashMap<i32, (PathBuf, u64)>,
        /// A notice that matters came: it stays so.
        heard: bool,
    }

    impl Notices {
        /// No watch yet; `None` when the kernel offers no inotify or mount table.
        pub(crate) fn new() -> Option<Self> {
            let inotify = Instance(inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?);
            let mounts = File::open("/proc/self/mountinfo").ok()?;
            Some(Self {
                inotify,
                mounts,
                names: HashMap::new(),
                dirs: HashMap::new(),
                new_entries: false,
                files: HashMap::new(),
                heard: false,
            })
        }

        /// The same, for a directory each of whose entries is granted by a rule of its own (a
        /// Landlock rule is on the inode, not the name): an entry created or moved in under any
        /// name matters too (it must be granted; not when it is removed again before
        /// [`Notices::quiet`] reads the notices: a new inode has no rule), and so does any entry
        /// moved out, whatever its name (it carries its rule where it goes, a credential store
        /// included, which no watch hears). What stays unheard under a name not watched: an
        /// entry removed (a removed name leads nowhere; a file with another name somewhere is
        /// never granted on its own, see `grants.rs`), its mode, owner or times changed (a
        /// link count too: the kernel reports that to the file's own watch, never to its
        /// directory's: [`Notices::watch_file`]), its contents written.
        pub(crate) fn new_entries(mut self) -> Self {
            self.new_entries = true;
            self
        }

        /// Watch `dir` (the last component not followed) for entries named `name` (`None`:
        /// any) created, removed, moved in or out or changed in mode or times, and for its own
        /// removal, move or change (its mode, its times); not when its file system makes
        /// no notices ([`super::seen`]). In a directory where two names may be one entry
        /// ([`super::any_case`]: a case-insensitive file system or directory), every name.
        pub(crate) fn watch(&mut self, dir: &Path, name: Option<&OsStr>) -> Watch {
            let wd = match self.dirs.get(dir) {
                Some(&wd) => wd,
                None => match self.add(dir) {
                    Ok(wd) => wd,
                    Err(not) => return not,
                },
            };
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

        /// Watch the file `fd` (found at `path`, granted by a rule of its own) for a second
        /// name: a hard link made anywhere (`ln ~/notes ~/.ssh/x`, inside a store) changes
        /// only the file's link count, which the kernel reports to a watch on the file itself
        /// (`IN_ATTRIB`), not to its directory's. A notice on it matters unless the file is
        /// still at `path` with one name (its mode or times changed); its removal or move
        /// matters too. The caller checks its link count after this, which a link made
        /// before the watch changed.
        pub(crate) fn watch_file(&mut self, path: &Path, fd: BorrowedFd<'_>) -> Watch {
            use inotify::WatchFlags as W;
            let Ok(fs) = rustix::fs::fstatfs(fd) else { return Watch::Failed };
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation, trivial_numeric_casts)]
            let f_type = fs.f_type as u32;
            if !super::seen(f_type) {
                return Watch::Unseen;
            }
            let Ok(stat) = rustix::fs::fstat(fd) else { return Watch::Failed };
            // The descriptor's own file (an `O_PATH` one too): procfs' link to it is followed.
            let at = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let mask = W::ATTRIB | W::DELETE_SELF | W::MOVE_SELF;
            match inotify::add_watch(&self.inotify, at.as_str(), mask) {
                Ok(wd) => {
                    self.files.insert(wd, (path.to_owned(), stat.st_ino));
                    Watch::Watched
                }
                Err(_) => Watch::Failed,
            }
        }

        /// A new watch on `dir`, for no name yet (every name where names may differ in case
        /// alone).
        fn add(&mut self, dir: &Path) -> Result<i32, Watch> {
            use inotify::WatchFlags as W;
            use rustix::fs::OFlags;
            // The file system of `dir` itself (a link not followed, as the watch is made).
            let at =
                rustix::fs::open(dir, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, rustix::fs::Mode::empty())
                    .map_err(|_| Watch::Failed)?;
            let fs = rustix::fs::fstatfs(&at).map_err(|_| Watch::Failed)?;
            // `f_type` is 32 or 64 bits wide, signed or not: the magic numbers are 32 bits.
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation, trivial_numeric_casts)]
            let f_type = fs.f_type as u32;
            if !super::seen(f_type) {
                return Err(Watch::Unseen);
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
            let wd = inotify::add_watch(&self.inotify, dir, mask).map_err(|_| Watch::Failed)?;
            if super::any_case(f_type, || casefolded(dir)) {
                self.names.insert(wd, None);
            }
            self.dirs.insert(dir.to_owned(), wd);
            Ok(wd)
        }

        /// Whether nothing that matters came since the watches were made (one `poll`, not
        /// blocking; notices that came are read). Once false, always false.
        pub(crate) fn quiet(&mut self) -> bool {
            if self.heard {
                return false;
            }
            let mut fds = [
                libc::pollfd { fd: self.inotify.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 },
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
            use inotify::ReadFlags as R;
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
            let mut unrelated = true;
            // Entries created (or moved in) under names not watched, and not gone since.
            let mut added: HashSet<(i32, OsString)> = HashSet::new();
            loop {
                match reader.next() {
                    Ok(event) => {
                        let flags = event.events();
                        // A file's contents written (`MODIFY` with a name) move no entry.
                        let entry = flags.intersects(R::CREATE | R::DELETE | R::MOVED_FROM | R::MOVED_TO | R::ATTRIB);
                        let file = self.files.get(&event.wd());
                        let matters = flags.contains(R::QUEUE_OVERFLOW)
                            || if let Some((path, ino)) = file {
                                // Its mode, times or link count changed: nothing, while it
                                // is still where it was with one name. Moved, removed, its
                                // watch gone: something.
                                let gone = R::MOVE_SELF | R::DELETE_SELF | R::IGNORED | R::UNMOUNT;
                                flags.intersects(gone) || !one_name(path, *ino)
                            } else {
                                match (event.file_name(), self.names.get(&event.wd())) {
                                    (Some(_), _) if !entry => false,
                                    (Some(name), Some(Some(names))) => {
                                        // The whole name, not a prefix of it (`.conf` is not `.config`).
                                        let name = OsStr::from_bytes(name.to_bytes());
                                        if names.contains(name) {
                                            true
                                        } else if !self.new_entries {
                                            false
                                        } else if flags.contains(R::MOVED_FROM) {
                                            // It may carry its rule anywhere (into a store).
                                            true
                                        } else {
                                            if flags.intersects(R::CREATE | R::MOVED_TO) {
                                                added.insert((event.wd(), name.to_owned()));
                                            } else if flags.contains(R::DELETE) {
                                                added.remove(&(event.wd(), name.to_owned()));
                                            }
                                            false
                                        }
                                    }
                                    (Some(_), Some(None)) => true,
                                    // The directory itself (its modification time set alone is a
                                    // `MODIFY`; removed, moved, unmounted, its watch gone), or a
                                    // watch we do not know.
                                    _ => true,
                                }
                            };
                        unrelated &= !matters;
                    }
                    Err(rustix::io::Errno::AGAIN) => return unrelated && added.is_empty(),
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => return false,
                }
            }
        }
    }

    /// Whether the file at `path` (not followed) is inode `ino` with one name.
    fn one_name(path: &Path, ino: u64) -> bool {
        rustix::fs::lstat(path).is_ok_and(|s| s.st_ino == ino && s.st_nlink == 1)
    }

    /// An inotify instance. Closing one that holds watches waits for the kernel to destroy
    /// them (a grace period, about 8 ms here): a holder that keeps it under a lock other
    /// threads wait for drops it after letting go of the lock (the read rules: `sandbox.rs`).
    /// Not on a thread of its own: a thread kept for closing took one of the threads and
    /// processes a limit (`RLIMIT_NPROC`) allows, which a tool then could not get.
    #[derive(Debug)]
    struct Instance(OwnedFd);

    impl AsFd for Instance {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.0.as_fd()
        }
    }

    /// Whether the directory at `dir` has the case-folding flag (`FS_CASEFOLD_FL`: ext4,
    /// f2fs, tmpfs, bcachefs made with it); one that cannot be opened or asked is taken to.
    fn casefolded(dir: &Path) -> bool {
        use rustix::fs::OFlags;
        const CASEFOLD: u32 = 0x4000_0000;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::open(dir, flags, rustix::fs::Mode::empty()) else { return true };
        match rustix::fs::ioctl_getflags(&fd) {
            Ok(got) => got.bits() & CASEFOLD != 0,
            // No inode flags on this file system: no case folding either.
            Err(rustix::io::Errno::NOTTY | rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => false,
            Err(_) => true,
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
        pub(crate) fn new_entries(self) -> Self {
            self
        }
        pub(crate) fn watch(&mut self, _: &Path, _: Option<&OsStr>) -> super::Watch {
            super::Watch::Failed
        }
        pub(crate) fn watch_file(&mut self, _: &Path, _: std::os::fd::BorrowedFd<'_>) -> super::Watch {
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

    #[test]
    fn names_that_may_differ_in_case_alone_are_all_heeded_on_a_folding_file_system() {
        // vfat, exFAT, ntfs3: always, without asking the directory.
        for folding in [0x4d44, 0x2011_bab0, 0x7366_746e] {
            assert!(any_case(folding, || panic!("asked")), "{folding:#x}");
        }
        // ext4, tmpfs, overlay: when the directory folds case.
        for may in [0xef53, 0x0102_1994, 0x794c_7630] {
            assert!(any_case(may, || true), "{may:#x}");
            assert!(!any_case(may, || false), "{may:#x}");
        }
        // xfs, btrfs: never.
        for never in [0x5846_5342, 0x9123_683e] {
            assert!(!any_case(never, || panic!("asked")), "{never:#x}");
        }
    }

    /// A change made in a directory.
    #[cfg(target_os = "linux")]
    type Change<'a> = Box<dyn FnOnce() + 'a>;

    /// A fresh watch of `dir` for `names`, new entries heeded or not; `then` done; whether
    /// it was heard.
    #[cfg(target_os = "linux")]
    fn heard(dir: &std::path::Path, names: Option<&[&str]>, new_entries: bool, then: impl FnOnce()) -> bool {
        let mut notices = Notices::new().unwrap();
        if new_entries {
            notices = notices.new_entries();
        }
        match names {
            Some(names) => {
                for name in names {
                    assert_eq!(notices.watch(dir, Some(std::ffi::OsStr::new(name))), Watch::Watched);
                }
            }
            None => assert_eq!(notices.watch(dir, None), Watch::Watched),
        }
        assert!(notices.quiet());
        then();
        !notices.quiet()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn only_a_watched_name_a_new_entry_one_moved_out_or_the_directory_itself_is_heard() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let at = |name: &str| dir.join(name);
        std::fs::create_dir(at(".config")).unwrap();
        for f in ["notes", ".con", ".configs", ".bash_history"] {
            std::fs::write(at(f), "x").unwrap();
        }
        let watched = Some(&[".config", ".netrc"][..]);
        // Off the names, nothing new left, nothing moved out: not heard.
        let quiet: [(&str, Change); 5] = [
            ("contents written", Box::new(|| std::fs::write(at(".bash_history"), "y").unwrap())),
            (
                "a mode changed",
                Box::new(|| {
                    std::fs::set_permissions(at("notes"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
                }),
            ),
            ("a prefix of a name removed", Box::new(|| std::fs::remove_file(at(".con")).unwrap())),
            ("a longer name removed", Box::new(|| std::fs::remove_file(at(".configs")).unwrap())),
            (
                "made and removed again",
                Box::new(|| {
                    std::fs::write(at(".netr"), "x").unwrap();
                    std::fs::remove_file(at(".netr")).unwrap();
                }),
            ),
        ];
        for (what, then) in quiet {
            assert!(!heard(dir, watched, true, then), "{what}");
        }
        // A watched name, a new entry or one moved out (when heeded: it carries its rule
        // where it goes, into a store too), the directory itself: heard.
        let loud: [(&str, bool, Change); 8] = [
            ("a watched name made", false, Box::new(|| std::fs::write(at(".netrc"), "x").unwrap())),
            (
                "a watched name renamed over",
                false,
                Box::new(|| {
                    std::fs::write(at("n"), "x").unwrap();
                    std::fs::rename(at("n"), at(".netrc")).unwrap();
                }),
            ),
            ("a watched name removed", false, Box::new(|| std::fs::remove_file(at(".netrc")).unwrap())),
            (
                "a watched name's mode changed",
                false,
                Box::new(|| {
                    std::fs::set_permissions(at(".config"), std::os::unix::fs::PermissionsExt::from_mode(0o700))
                        .unwrap();
                }),
            ),
            ("a new entry", true, Box::new(|| std::fs::write(at("new"), "x").unwrap())),
            ("moved out", true, Box::new(|| std::fs::rename(at("notes"), at(".config/notes")).unwrap())),
            (
                "made and moved out again",
                true,
                Box::new(|| {
                    std::fs::write(at(".netr"), "x").unwrap();
                    std::fs::rename(at(".netr"), at(".config/.netr")).unwrap();
                }),
            ),
            (
                "the directory touched",
                false,
                Box::new(|| {
                    std::fs::File::open(dir).unwrap().set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
                }),
            ),
        ];
        for (what, new_entries, then) in loud {
            assert!(heard(dir, watched, new_entries, then), "{what}");
        }
        // Without new entries heeded, a new entry or one moved out off the names is not
        // heard; with every name watched, any is.
        assert!(!heard(dir, watched, false, || std::fs::write(at("other"), "x").unwrap()));
        let moved = || std::fs::rename(at(".bash_history"), at(".config/.bash_history")).unwrap();
        assert!(!heard(dir, watched, false, moved));
        assert!(heard(dir, None, false, || std::fs::remove_file(at("other")).unwrap()));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_file_watched_itself_is_heard_given_another_name_moved_or_removed_not_touched() {
        // `ln ~/notes ~/.ssh/x` changes nothing in `~`: only the file's link count.
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::create_dir(dir.join("store")).unwrap();
        let file = dir.join("notes");
        let heard = |then: &dyn Fn()| {
            std::fs::write(&file, "x").unwrap();
            let mut notices = Notices::new().unwrap().new_entries();
            assert_eq!(notices.watch(dir, Some(std::ffi::OsStr::new("store"))), Watch::Watched);
            let fd = std::fs::File::open(&file).unwrap();
            assert_eq!(notices.watch_file(&file, std::os::fd::AsFd::as_fd(&fd)), Watch::Watched);
            assert!(notices.quiet());
            then();
            let heard = !notices.quiet();
            drop(std::fs::remove_file(dir.join("store/x")));
            heard
        };
        let mode = |m| std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
        assert!(!heard(&|| mode(0o600)), "its mode changed");
        assert!(!heard(&|| std::fs::File::open(&file).unwrap().set_modified(std::time::SystemTime::now()).unwrap()));
        assert!(!heard(&|| std::fs::write(&file, "y").unwrap()), "its contents written");
        assert!(heard(&|| std::fs::hard_link(&file, dir.join("store/x")).unwrap()), "a name added in a store");
        assert!(
            heard(&|| {
                std::fs::hard_link(&file, dir.join("store/x")).unwrap();
                std::fs::remove_file(&file).unwrap();
            }),
            "a name added, the first removed"
        );
        assert!(heard(&|| std::fs::remove_file(&file).unwrap()), "removed");
        assert!(heard(&|| std::fs::rename(&file, dir.join("store/x")).unwrap()), "moved into a store");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn an_overflowed_queue_is_heard_whatever_the_names_it_lost() {
        // Past `max_queued_events`, the kernel drops events and queues one overflow: every
        // event queued names no watched name, but the ones dropped might have.
        let most: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(16384);
        if most > 100_000 {
            return;
        }
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        assert!(heard(dir, Some(&["watched"]), false, || {
            for i in 0..=most {
                std::fs::File::create(dir.join(i.to_string())).unwrap();
            }
        }));
    }
}
