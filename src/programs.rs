//! Where a program named without a slash is found: the search of the child's `PATH` (its
//! absolute directories in order, the first file this process may execute), and, in a
//! process that turned it on (`packs serve`), the result kept per (`PATH`, program) until
//! the kernel reports a change that could alter it.
//!
//! The kept result is never trusted beyond what the kernel says. Before a search is kept,
//! every directory of the `PATH` and every directory on the way to it (each symbolic link
//! followed one step at a time, as the kernel resolves it) is watched with inotify: a
//! directory for the names looked up in it, itself for being removed, moved or changed. The
//! mount table is watched too (`/proc/self/mountinfo`: a mount over a directory of the
//! `PATH` moves no entry). Every lookup first asks, without blocking, whether anything came
//! (one `poll`); any event on a watched name, on a watched directory itself, or an overflow
//! of the queue drops every kept result. A search that skipped a symbolic link (whose
//! target may change anywhere) or an entry that is there but not executable (a `chmod`
//! through another hard link to it raises no notice in the watched directory) is not kept,
//! nor one whose way goes through a directory on a file system that makes no notices
//! ([`crate::notices::seen`]: procfs, whose magic links such as `/proc/PID/cwd` lead into
//! another process's mounts). And a kept path that fails to start (the file
//! went away, or is no longer executable) is searched for again at once by the caller
//! ([`Programs::forget`]), so a stale result never decides what runs.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::notices::Watch;

/// A regular file that this process may execute (as `execvp` would find out:
/// execute permission for our effective ids, and not on a `noexec` mount).
pub(crate) fn may_execute(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    let allowed = unsafe { libc::faccessat(libc::AT_FDCWD, c_path.as_ptr(), libc::X_OK, libc::AT_EACCESS) } == 0;
    allowed && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// What one search found.
struct Search {
    found: Option<PathBuf>,
    /// Whether the result may be kept: no candidate before the one found (or, when none
    /// was found, at all) was there: a symbolic link (whose target no watch of ours
    /// covers) or a file not executable (its mode may change through another hard link).
    keepable: bool,
}

/// The first absolute directory of `path` holding `program` that this process may execute.
/// Relative entries (`.`, an empty entry, `bin`) are ignored: they mean whatever the
/// tool's working directory holds, so a file in a workspace could shadow a real program.
pub(crate) fn search(path: &OsStr, program: &str) -> Option<PathBuf> {
    search_noting_links(path, program, false).found
}

fn search_noting_links(path: &OsStr, program: &str, note_links: bool) -> Search {
    let mut keepable = true;
    for dir in std::env::split_paths(path).filter(|dir| dir.is_absolute()) {
        let candidate = dir.join(program);
        if may_execute(&candidate) {
            return Search { found: Some(candidate), keepable };
        }
        // A symbolic link's target may change anywhere; a file that is there but not
        // executable may become so through another hard link (a `chmod` there raises no
        // notice in this directory); one that cannot be looked at, anything. Only a name
        // that is not there leaves the search keepable (its creation is a notice here).
        if note_links
            && !matches!(std::fs::symlink_metadata(&candidate), Err(e)
                if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR))
        {
            keepable = false;
        }
    }
    Search { found: None, keepable }
}

/// Found by a search, or kept from an earlier one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) path: Option<PathBuf>,
    /// Kept: if it fails to start, [`Programs::forget`] and search again.
    pub(crate) kept: bool,
}

/// The searches of one process, kept while nothing they depend on changed.
pub(crate) struct Programs {
    state: std::sync::Mutex<Option<Kept>>,
    /// Whether results are kept at all (off: every lookup searches).
    on: std::sync::atomic::AtomicBool,
}

impl Programs {
    pub(crate) const fn new() -> Self {
        Self { state: std::sync::Mutex::new(None), on: std::sync::atomic::AtomicBool::new(false) }
    }

    /// Keep results from now on.
    pub(crate) fn keep(&self) {
        self.on.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where `program` is on `path`: kept, when nothing changed since it was searched for;
    /// otherwise searched for now (and kept, where that is safe).
    pub(crate) fn find(&self, path: &OsStr, program: &str) -> Found {
        if !self.on.load(std::sync::atomic::Ordering::Relaxed) {
            return Found { path: search(path, program), kept: false };
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(kept) = state.as_mut() {
            if !kept.current() {
                *state = None;
            } else {
                match kept.get(path, program) {
                    Some(Some(found)) => return Found { path: Some(found.to_owned()), kept: true },
                    // Watched already, but not to be kept (a link on the way, or not found):
                    // searched each time, without watching again.
                    Some(None) => return Found { path: search(path, program), kept: false },
                    None => {}
                }
            }
        }
        if state.is_none() {
            *state = Kept::new();
        }
        let Some(kept) = state.as_mut() else {
            // No notices here (or no more inotify instances): nothing is kept from now on.
            self.on.store(false, std::sync::atomic::Ordering::Relaxed);
            return Found { path: search(path, program), kept: false };
        };
        // Watched first, searched second: a change after the watch is a notice next time.
        let watched = kept.watch(path, program);
        if watched == Watch::Failed {
            // A directory that cannot be watched (no more watches, no permission): watching
            // again at every call would cost more than the search it saves.
            *state = None;
            self.on.store(false, std::sync::atomic::Ordering::Relaxed);
            return Found { path: search(path, program), kept: false };
        }
        let searched = search_noting_links(path, program, true);
        let keep = searched.found.clone().filter(|_| searched.keepable && watched == Watch::Watched);
        kept.insert(path, program, keep);
        Found { path: searched.found, kept: false }
    }

    /// Drop every kept result (one failed to start).
    pub(crate) fn forget(&self) {
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

/// Most results kept at once; past it they are all dropped and kept anew.
const MAX_KEPT: usize = 1024;

/// Most symbolic links followed on the way to one directory (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Kept results and the notices that keep them true.
struct Kept {
    notices: crate::notices::Notices,
    /// Per (`PATH`, program), where it was found; `None`: searched each time (see `find`).
    found: std::collections::HashMap<(std::ffi::OsString, String), Option<PathBuf>>,
}

impl Kept {
    /// A new, empty set; `None` without the kernel's notices.
    fn new() -> Option<Self> {
        Some(Self { notices: crate::notices::Notices::new()?, found: std::collections::HashMap::new() })
    }

    fn get(&self, path: &OsStr, program: &str) -> Option<Option<&Path>> {
        // The key is built to look it up: an allocation of two short strings.
        self.found.get(&(path.to_owned(), program.to_owned())).map(Option::as_deref)
    }

    fn insert(&mut self, path: &OsStr, program: &str, found: Option<PathBuf>) {
        if self.found.len() >= MAX_KEPT {
            self.found.clear();
        }
        self.found.insert((path.to_owned(), program.to_owned()), found);
    }

    /// Whether no notice came that could change a kept result.
    fn current(&mut self) -> bool {
        self.notices.quiet()
    }

    /// Watch what a search of `program` on `path` depends on: each absolute directory,
    /// for `program` and for itself, and each directory on the way to it, for the next
    /// name. `Unseen` when one is on a file system that makes no notices (the result must
    /// not be kept), `Failed` when one could not be watched.
    fn watch(&mut self, path: &OsStr, program: &str) -> Watch {
        for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
            match self.watch_dir(&dir, program) {
                Watch::Watched => {}
                other => return other,
            }
        }
        Watch::Watched
    }

    /// Resolve `dir` one name at a time as the kernel would, watching each directory
    /// for the name looked up in it before looking it up; then `dir` itself for
    /// `program`. A name that does not exist (or is no directory) ends the walk: its
    /// creation is a notice on the directory watched for it.
    fn watch_dir(&mut self, dir: &Path, program: &str) -> Watch {
        let mut pending: std::collections::VecDeque<std::ffi::OsString> = crate::reads::parts(dir).into();
        let mut at = PathBuf::from("/");
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            if part == "/" {
                at = PathBuf::from("/");
                continue;
            }
            if part == ".." {
                at.pop();
                continue;
            }
            match self.notices.watch(&at, Some(&part)) {
                Watch::Watched => {}
                other => return other,
            }
            let next = at.join(&part);
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    let Ok(target) = std::fs::read_link(&next) else { return Watch::Failed };
                    if links > MAX_LINKS {
                        return Watch::Failed;
                    }
                    for p in crate::reads::parts(&target).into_iter().rev() {
                        pending.push_front(p);
                    }
                }
                Ok(m) if m.is_dir() => at = next,
                // Missing, or not a directory: nothing is found below it until the name
                // changes, which the watch on `at` reports.
                Ok(_) => return Watch::Watched,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Watch::Watched,
                Err(_) => return Watch::Failed,
            }
        }
        self.notices.watch(&at, Some(OsStr::new(program)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A scratch directory (canonical) holding a directory of each name: the holder (kept
    /// alive by the caller), its path, and the directories.
    fn dirs<const N: usize>(names: [&str; N]) -> (tempfile::TempDir, PathBuf, [PathBuf; N]) {
        let holder = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(holder.path()).unwrap();
        let made = names.map(|n| root.join(n));
        for d in &made {
            std::fs::create_dir(d).unwrap();
        }
        (holder, root, made)
    }

    fn tool(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_kept_result_holds_until_a_change_on_the_way_could_alter_it() {
        let (_root, root, [a, b]) = dirs(["a", "b"]);
        let m = root.join("missing/bin");
        let path = std::env::join_paths([&m, &a, &b]).unwrap();
        let programs = Programs::new();
        programs.keep();
        let find = || programs.find(&path, "prog");
        let in_b = tool(&b, "prog", "#!/bin/sh\n");
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: false });
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: true });
        // An unrelated name in a directory of the PATH changes nothing.
        tool(&a, "other", "");
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: true });
        // The program in an earlier directory.
        let in_a = tool(&a, "prog", "#!/bin/sh\n");
        assert_eq!(find(), Found { path: Some(in_a.clone()), kept: false });
        assert_eq!(find(), Found { path: Some(in_a.clone()), kept: true });
        // No longer executable.
        std::fs::set_permissions(&in_a, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: false });
        std::fs::remove_file(&in_a).unwrap();
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: false });
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: true });
        // A directory of the PATH that did not exist, created with the program in it.
        std::fs::create_dir_all(&m).unwrap();
        assert!(!find().kept);
        let in_m = tool(&m, "prog", "#!/bin/sh\n");
        assert_eq!(find(), Found { path: Some(in_m.clone()), kept: false });
        // The directory on the way replaced by a link elsewhere.
        std::fs::rename(root.join("missing"), root.join("gone")).unwrap();
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: false });
        std::os::unix::fs::symlink(root.join("gone"), root.join("missing")).unwrap();
        assert_eq!(find(), Found { path: Some(in_m.clone()), kept: false });
        assert_eq!(find(), Found { path: Some(in_m.clone()), kept: true });
        // The link's target moved away: the link now dangles.
        std::fs::rename(root.join("gone"), root.join("gone2")).unwrap();
        assert_eq!(find(), Found { path: Some(in_b.clone()), kept: false });
        // forget() drops what is kept.
        assert!(find().kept);
        programs.forget();
        assert!(!find().kept);
    }

    #[test]
    fn a_search_past_a_file_not_executable_is_not_kept() {
        // `a/prog` is not executable, `x/link` a hard link to it: a `chmod` through the link
        // raises no notice on `a`, yet a fresh search finds `a/prog` after it.
        let (_root, _, [a, b, x]) = dirs(["a", "b", "x"]);
        let in_a = tool(&a, "prog", "#!/bin/sh\n");
        std::fs::set_permissions(&in_a, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::hard_link(&in_a, x.join("link")).unwrap();
        let in_b = tool(&b, "prog", "#!/bin/sh\n");
        let path = std::env::join_paths([&a, &b]).unwrap();
        let programs = Programs::new();
        programs.keep();
        for _ in 0..2 {
            assert_eq!(programs.find(&path, "prog"), Found { path: Some(in_b.clone()), kept: false });
        }
        std::fs::set_permissions(x.join("link"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(programs.find(&path, "prog"), Found { path: Some(in_a), kept: false });
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_search_through_proc_is_not_kept() {
        // `/proc/PID/root` and `/proc/PID/cwd` lead into that process's mounts, which the
        // link's text resolved here may not be; and procfs makes no notices.
        let (_root, _, [a, b]) = dirs(["a", "b"]);
        let in_b = tool(&b, "prog", "#!/bin/sh\n");
        let through_proc = Path::new("/proc/self/root").join(a.strip_prefix("/").unwrap());
        let path = std::env::join_paths([&through_proc, &b]).unwrap();
        let programs = Programs::new();
        programs.keep();
        for _ in 0..2 {
            assert_eq!(programs.find(&path, "prog"), Found { path: Some(in_b.clone()), kept: false });
        }
        // Other searches are still kept.
        let plain = std::env::join_paths([&a, &b]).unwrap();
        assert!(!programs.find(&plain, "prog").kept);
        assert!(programs.find(&plain, "prog").kept);
    }

    #[test]
    fn a_search_past_a_link_is_not_kept_and_nothing_is_kept_unless_asked() {
        let (_root, root, [a, b]) = dirs(["a", "b"]);
        let in_b = tool(&b, "prog", "#!/bin/sh\n");
        // A dangling link in an earlier directory: its target could appear anywhere.
        std::os::unix::fs::symlink(root.join("nowhere"), a.join("prog")).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        let programs = Programs::new();
        programs.keep();
        for _ in 0..2 {
            assert_eq!(programs.find(&path, "prog"), Found { path: Some(in_b.clone()), kept: false });
        }
        let target = tool(&root, "nowhere", "#!/bin/sh\n");
        assert_eq!(programs.find(&path, "prog"), Found { path: Some(a.join("prog")), kept: false });
        assert!(target.exists());
        // Not found: searched again at the next call (and found once it is there).
        for _ in 0..2 {
            assert_eq!(programs.find(&path, "absent"), Found { path: None, kept: false });
        }
        let absent = tool(&b, "absent", "#!/bin/sh\n");
        assert_eq!(programs.find(&path, "absent"), Found { path: Some(absent.clone()), kept: false });
        assert_eq!(programs.find(&path, "absent"), Found { path: Some(absent), kept: true });
        let off = Programs::new();
        for _ in 0..2 {
            assert!(!off.find(&path, "prog").kept);
        }
    }
}
