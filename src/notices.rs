//! The kernel's change notices, asked for without blocking: inotify watches on directories
//! (each for the names that matter in it, or for every name) and the mount table
//! (`/proc/self/mountinfo`, whose change a mount over a watched directory makes, which
//! inotify does not report). What a process keeps from the file system between calls (where
//! a program is on the `PATH`, the read rules around the credential stores) stays only while
//! [`Notices::quiet`] says nothing that matters came; one `poll` asks.

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
        /// removal, move or change (its mode, its times). False when it cannot be watched.
        pub(crate) fn watch(&mut self, dir: &Path, name: Option<&OsStr>) -> bool {
            use inotify::WatchFlags as W;
            let mask = W::CREATE
                | W::DELETE
                | W::MOVED_FROM
                | W::MOVED_TO
                | W::ATTRIB
                | W::MODIFY
                | W::DELETE_SELF
                | W::MOVE_SELF
                | W::DONT_FOLLOW;
            let Ok(wd) = inotify::add_watch(&self.inotify, dir, mask) else { return false };
            let names = self.names.entry(wd).or_insert_with(|| Some(HashSet::new()));
            match (names, name) {
                (Some(set), Some(name)) => {
                    set.insert(name.to_owned());
                }
                (names, None) => *names = None,
                (None, Some(_)) => {}
            }
            true
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
        pub(crate) fn watch(&mut self, _: &Path, _: Option<&OsStr>) -> bool {
            false
        }
        pub(crate) fn quiet(&mut self) -> bool {
            false
        }
    }
}

pub(crate) use imp::Notices;
