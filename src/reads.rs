//! Where a confined tool may not read: the credential stores (`~/.ssh`, `~/.aws`, browser
//! profiles...) and packs' own secret files, as Landlock grants of read rights around them.
//!
//! Landlock only ever allows, and a right granted on a directory holds for everything
//! beneath it. So read rights are granted on every entry on the way from `/` down to each
//! denied path but that path ([`crate::grants::grants`], the same walk writes use around
//! packs' configuration), and listing directories (`ReadDir`) on the whole tree. What that
//! leaves: a denied entry's name and metadata (`ls ~/.ssh`, `stat`) but never its contents;
//! an entry created in a directory on the way (`/`, `/home`, `$HOME`, `~/.config`...) after
//! the rules were built is not readable until they are rebuilt ([`Walk::changed`]: the next
//! call after the directory changed, the list resolved again); a denied path that does not
//! exist is kept ([`resolve`]): created later, it is unreadable (the directory on its way is
//! not granted whole) and denied once the rules are rebuilt. A hard link or bind mount made
//! elsewhere before packs started is another path to the same file.

use std::path::{Path, PathBuf};

/// The credential stores no confined tool reads by default, relative to the operator's
/// `HOME` (docs/SANDBOX.md lists them).
pub(crate) const DEFAULT_DENIED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".thunderbird",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".vault-token",
    ".pgpass",
];

/// What a tool whose reads are narrowed (`policy.readable`) may still read, beside the places
/// it names, its writable places and TMPDIR: what a program needs to start and run
/// (docs/SANDBOX.md lists them). Entries that do not exist are skipped.
pub(crate) const SYSTEM_READABLE: &[&str] = &[
    // Programs and libraries.
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    // The kernel's views (for an ordinary user, another process's environment or memory
    // stays out of reach: Landlock refuses ptrace-like access outside the domain; root keeps
    // CAP_SYS_PTRACE and reads packs' /proc/PPID/environ: docs/SANDBOX.md).
    "/proc",
    "/sys",
    // Devices a program opens as files.
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    // Of /etc, what the C library, the loader and a network client read, none of it secret.
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/alternatives",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/terminfo",
];

/// The directories of packs' `PATH` a narrowed tool may read (its programs must start): the
/// absolute ones, links resolved, but never `/`, a home or an ancestor of one, nor an
/// ancestor of a denied path, which would undo the narrowing (`PATH=...:$HOME/..`, a link
/// to `$HOME`). `homes` and `denied` are resolved.
pub(crate) fn path_dirs(path: Option<&std::ffi::OsStr>, homes: &[PathBuf], denied: &[PathBuf]) -> Vec<PathBuf> {
    let Some(path) = path else { return Vec::new() };
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.parent().is_some() && !homes.iter().chain(denied).any(|h| h.starts_with(d)))
        .collect()
}

/// The default list under `home`.
pub(crate) fn defaults(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home.filter(|h| h.is_absolute()) else { return Vec::new() };
    DEFAULT_DENIED.iter().map(|p| home.join(p)).collect()
}

/// `path` with a leading `~/` (or a lone `~`) under `home`; any other path as it is.
pub(crate) fn expand(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_owned(),
    }
}

/// packs' own home: `$HOME` when it is an absolute path, else the home directory of the
/// user's entry in `/etc/passwd` (an unset, empty or relative `HOME` does not leave the
/// credential stores unnamed).
pub(crate) fn home() -> Option<PathBuf> {
    env_home().or_else(passwd_home)
}

/// Every home the credential stores may lie under: `$HOME` and the passwd entry's, when
/// they differ (a tool's programs find one or the other). Empty: no home at all, so the
/// default list names nothing ([`homes_unknown`]).
pub(crate) fn homes() -> &'static [PathBuf] {
    static HOMES: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    HOMES.get_or_init(|| {
        let mut all: Vec<PathBuf> = env_home().into_iter().chain(passwd_home()).collect();
        all.dedup();
        all
    })
}

/// Whether no home could be found: the default list is empty, and reads are not confined
/// unless the operator named paths of their own (`--no-default-deny-read`).
pub(crate) fn homes_unknown() -> bool {
    homes().is_empty()
}

fn env_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute())
}

/// The home directory of this process' real user, read from `/etc/passwd` itself: the
/// distributed binary is static, and a static C library's `getpwuid_r` needs the NSS
/// modules of the very glibc it was linked with (a user known only to LDAP or sssd is not
/// found: with `HOME` unset too, [`homes_unknown`] holds and reads fail closed).
fn passwd_home() -> Option<PathBuf> {
    // SAFETY: getuid takes no arguments and cannot fail.
    let uid = unsafe { libc::getuid() };
    passwd_entry_home(&std::fs::read_to_string("/etc/passwd").ok()?, uid)
}

/// The home field of `uid`'s line in a passwd file's `text`, when it is absolute.
fn passwd_entry_home(text: &str, uid: u32) -> Option<PathBuf> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let (Some(id), Some(home)) = (fields.get(2), fields.get(5)) else { return None };
        (id.parse::<u32>().ok() == Some(uid)).then(|| PathBuf::from(home)).filter(|h| h.is_absolute())
    })
}

/// The default list under packs' own `HOME` (once per process; not resolved: see
/// [`resolve`]).
pub(crate) fn default_list() -> &'static [PathBuf] {
    static DEFAULT: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| homes().iter().flat_map(|h| defaults(Some(h))).collect())
}

/// `paths` as the read rules deny them: absolute, links resolved, and a path that does not
/// exist (yet) kept as its longest existing ancestor, resolved, with the missing components
/// after it. Never dropped: the walk around it then grants the directories on the way one
/// entry at a time and never the name itself, so a store created later (`aws configure`
/// while `packs serve` runs) is unreadable at once, and denied when the rules are rebuilt
/// (which resolves the list again: a missing directory may come back as a link).
///
/// The default list names two dozen paths under one home, most of them missing: each
/// existing directory is resolved once (`realpath` costs a `readlink` per component), and a
/// missing path costs one `lstat` (one that cannot be `lstat`ed cannot be resolved either).
pub(crate) fn resolve(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut known = std::collections::HashMap::new();
    let mut out: Vec<PathBuf> = paths.iter().filter_map(|p| resolve_one(p, &mut known)).collect();
    out.sort();
    out.dedup();
    out
}

/// `path` resolved as [`resolve`] says; `known` holds the paths resolved so far (`None`:
/// missing or unresolvable).
fn resolve_one(path: &Path, known: &mut std::collections::HashMap<PathBuf, Option<PathBuf>>) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut missing = Vec::new();
    let mut existing = path.as_path();
    loop {
        if let Some(real) = real_path(existing, known) {
            let mut out = real;
            for part in missing.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::Normal(name) => out.push(name),
                    _ => {}
                }
            }
            return Some(out);
        }
        missing.push(existing.components().next_back()?);
        existing = existing.parent()?;
    }
}

/// `path` (absolute) with its links resolved, as `canonicalize` gives it, from what is
/// known: an entry that is not a link is its parent resolved and its name, so only links
/// (and `.`/`..`) cost a `realpath`. `None`: it does not exist or cannot be reached.
fn real_path(path: &Path, known: &mut std::collections::HashMap<PathBuf, Option<PathBuf>>) -> Option<PathBuf> {
    if let Some(real) = known.get(path) {
        return real.clone();
    }
    #[cfg(test)]
    tests::LOOKUPS.with(|n| n.set(n.get() + 1));
    let real = match (std::fs::symlink_metadata(path), path.parent(), path.file_name()) {
        (Err(_), _, _) => None,
        // The root.
        (Ok(_), None, _) => Some(path.to_owned()),
        (Ok(meta), Some(parent), Some(name))
            if !meta.file_type().is_symlink()
                && path.components().next_back() == Some(std::path::Component::Normal(name)) =>
        {
            real_path(parent, known).map(|p| p.join(name))
        }
        (Ok(_), _, _) => {
            #[cfg(test)]
            tests::REALPATHS.with(|n| n.set(n.get() + 1));
            std::fs::canonicalize(path).ok()
        }
    };
    known.insert(path.to_owned(), real.clone());
    real
}

/// The directories walked to grant read rights around `denied` (each one's ancestors), and
/// what they looked like: an entry added, removed or renamed in one changes it. Where the
/// kernel offers change notices and each directory is on a file system that makes them
/// ([`crate::notices::seen`]), they are watched too, and asked instead of looking at each
/// directory again (one `poll` per check instead of a `stat` per directory).
#[derive(Debug)]
pub(crate) struct Walk {
    seen: Vec<(PathBuf, Option<Stamp>)>,
    /// Every directory of `seen` that exists, watched (made before it was looked at).
    notices: Option<std::sync::Mutex<crate::notices::Notices>>,
    /// Nothing was recorded, or the paths moved while they were ([`Walk::resolved`]): the
    /// rules are stale at once ([`Walk::unrecorded`]).
    unrecorded: bool,
}

/// A directory's inode and modification time (seconds, nanoseconds).
type Stamp = (u64, i64, i64);

impl Walk {
    /// The directories on the way to `denied`, as they are now.
    pub(crate) fn of(denied: &[PathBuf]) -> Self {
        let mut walk = Self {
            seen: Vec::new(),
            notices: crate::notices::Notices::new().map(std::sync::Mutex::new),
            unrecorded: false,
        };
        walk.record(denied);
        walk
    }

    /// Record the directories on the way to `more` too (those not recorded yet).
    fn record(&mut self, more: &[PathBuf]) {
        let mut dirs: Vec<PathBuf> = more
            .iter()
            .flat_map(|d| d.ancestors().skip(1).map(Path::to_owned))
            .filter(|d| !self.seen.iter().any(|(s, _)| s == d))
            .collect();
        dirs.sort();
        dirs.dedup();
        // Parents sort before their children: a missing directory is not watched, but its
        // creation is a notice on its parent, watched already. A directory that cannot be
        // watched (or is on a file system that makes no notices) turns them off: each
        // directory is compared instead.
        for d in dirs {
            let watched = self.notices.as_mut().is_some_and(|n| {
                n.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).watch(&d, None)
                    == crate::notices::Watch::Watched
            });
            let stamp = look(&d);
            if !watched && stamp.is_some() {
                self.notices = None;
            }
            self.seen.push((d, stamp));
        }
    }

    /// `denied` resolved ([`resolve`]) and the walk that keeps it true: the directories on
    /// the way to the paths as named are recorded before they are resolved, so a link made
    /// on the way meanwhile is a change; those on the way to the resolved paths after, and
    /// then the paths are resolved again: one that resolves elsewhere now (a link made on
    /// its way before that was recorded) makes the walk stale at once.
    pub(crate) fn resolved(denied: &[PathBuf]) -> (Vec<PathBuf>, Self) {
        Self::resolved_by(denied, resolve)
    }

    fn resolved_by(denied: &[PathBuf], mut resolve: impl FnMut(&[PathBuf]) -> Vec<PathBuf>) -> (Vec<PathBuf>, Self) {
        let mut walk = Self::of(denied);
        let resolved = resolve(denied);
        walk.record(&resolved);
        if resolve(denied) != resolved {
            walk.unrecorded = true;
        }
        (resolved, walk)
    }

    /// No directory recorded (a process that builds the rules once): [`Walk::changed`]
    /// always says so, and rules kept with it are built again at their next use.
    pub(crate) fn unrecorded() -> Self {
        Self { seen: Vec::new(), notices: None, unrecorded: true }
    }

    /// Whether a directory walked changed since (its inode or modification time, or a
    /// notice on it or on an entry in it).
    pub(crate) fn changed(&self) -> bool {
        if self.unrecorded {
            return true;
        }
        match &self.notices {
            Some(notices) => !notices.lock().unwrap_or_else(std::sync::PoisonError::into_inner).quiet(),
            None => self.seen.iter().any(|(dir, was)| look(dir) != *was),
        }
    }
}

fn look(dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).ok().map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use crate::grants::{Grant, grants};

    thread_local! {
        /// `lstat`s made by [`real_path`] on this thread.
        pub(super) static LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// `realpath`s made by [`real_path`] on this thread.
        pub(super) static REALPATHS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn the_default_list_costs_one_lookup_per_path_and_a_realpath_per_link_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), home.join(".ssh")).unwrap();
        let list = defaults(Some(&home));
        LOOKUPS.with(|n| n.set(0));
        REALPATHS.with(|n| n.set(0));
        let got = resolve(&list);
        // Each path of the list, its missing parents (`.docker`, `.local`, `.local/share`,
        // `.cargo`) and the directories above the home once each; one `realpath`: the link.
        let distinct: std::collections::BTreeSet<&Path> = list.iter().flat_map(|p| p.ancestors()).collect();
        assert!(
            LOOKUPS.with(std::cell::Cell::get) <= distinct.len(),
            "{} > {}",
            LOOKUPS.with(std::cell::Cell::get),
            distinct.len()
        );
        assert_eq!(REALPATHS.with(std::cell::Cell::get), 1);
        // The same answer as resolving each path on its own.
        assert!(got.contains(&root.join("elsewhere")), "the link resolved: {got:?}");
        assert!(got.contains(&home.join(".config/gh")));
        assert!(got.contains(&home.join(".local/share/keyrings")), "a missing path is kept: {got:?}");
        assert_eq!(got.len(), list.len());
    }

    #[test]
    fn the_defaults_are_under_home_and_nothing_without_one() {
        let d = defaults(Some(Path::new("/home/u")));
        assert!(d.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(d.contains(&PathBuf::from("/home/u/.docker/config.json")));
        assert!(defaults(None).is_empty());
        assert!(defaults(Some(Path::new("relative"))).is_empty(), "a relative HOME names nothing");
    }

    #[test]
    fn path_dirs_never_open_the_root_home_or_an_ancestor_of_either() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home/u");
        for d in ["home/u/.cargo/bin", "home/u/.ssh", "usr/bin", "srv"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(&home, root.join("to-home")).unwrap();
        let entries = ["usr/bin", "", "home/u", "home/u/..", "to-home", "to-home/.cargo/bin", "home/u/.ssh/..", "srv"];
        let mut path: Vec<PathBuf> = entries.iter().map(|e| root.join(e)).collect();
        path.push(PathBuf::from("/"));
        path.push(PathBuf::from("relative"));
        let path = std::env::join_paths(path).unwrap();
        let denied = [root.join("srv/secret")];
        assert_eq!(
            path_dirs(Some(&path), std::slice::from_ref(&home), &denied),
            [root.join("usr/bin"), home.join(".cargo/bin")]
        );
    }

    #[test]
    fn a_missing_path_is_kept_under_its_existing_ancestor_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let got = resolve(&[
            root.join("link/.aws"),
            root.join("link/.config/gh"),
            root.join("link/no/../.pgpass"),
            root.join("real"),
        ]);
        assert_eq!(
            got,
            [root.join("real"), root.join("real/.aws"), root.join("real/.config/gh"), root.join("real/.pgpass")]
        );
    }

    #[test]
    fn the_passwd_home_is_the_entry_of_the_uid() {
        let text = "root:x:0:0:root:/root:/bin/bash\nbad line\nu:x:1000:1000::/home/u:/bin/sh\nr:x:7:7::rel:/bin/sh\n";
        assert_eq!(passwd_entry_home(text, 1000), Some(PathBuf::from("/home/u")));
        assert_eq!(passwd_entry_home(text, 0), Some(PathBuf::from("/root")));
        assert_eq!(passwd_entry_home(text, 7), None, "a relative home names nothing");
        assert_eq!(passwd_entry_home(text, 54321), None);
    }

    #[test]
    fn a_tilde_is_home_only_at_the_start() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(expand(Path::new("~/.secrets"), home), PathBuf::from("/home/u/.secrets"));
        assert_eq!(expand(Path::new("~"), home), PathBuf::from("/home/u"));
        assert_eq!(expand(Path::new("/srv/~/x"), home), PathBuf::from("/srv/~/x"));
        assert_eq!(expand(Path::new("~other/x"), home), PathBuf::from("~other/x"));
        assert_eq!(expand(Path::new("~/x"), None), PathBuf::from("~/x"));
    }

    #[test]
    fn rules_kept_with_an_unrecorded_walk_are_stale_at_once() {
        // A one-call process stats no directory, and a second call would rebuild.
        let walk = Walk::unrecorded();
        assert!(walk.seen.is_empty());
        assert!(walk.changed());
        assert!(!Walk::of(&[]).changed());
    }

    /// A walk of `denied` that saw no change yet. Every directory on the way is watched, `/`
    /// and the temporary directory included, where other tests' files come and go: a walk is
    /// taken again until one is quiet (a change seen then is another test's, not a failure).
    #[cfg(target_os = "linux")]
    fn quiet_walk(denied: &[PathBuf]) -> Walk {
        for _ in 0..200 {
            let walk = Walk::of(denied);
            assert!(walk.notices.is_some(), "this kernel's notices are watched: {walk:?}");
            if !walk.changed() {
                return walk;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("no walk of {denied:?} was quiet");
    }

    /// The walk tests' homes, in /var/tmp (fewer other files come and go there than in /tmp),
    /// one test at a time.
    #[cfg(target_os = "linux")]
    fn walk_home() -> (std::sync::MutexGuard<'static, ()>, tempfile::TempDir) {
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let guard = ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (guard, tempfile::tempdir_in("/var/tmp").or_else(|_| tempfile::tempdir()).unwrap())
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_are_granted_around_the_denied_paths_and_a_change_on_the_way_is_seen() {
        let (_one, dir) = walk_home();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        for d in [".ssh", ".config/gcloud", ".config/fish", "src"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".bashrc"), "x").unwrap();
        let denied: Vec<PathBuf> = resolve(&defaults(Some(&home))).into_iter().filter(|p| p.exists()).collect();
        assert_eq!(denied, [home.join(".config/gcloud"), home.join(".ssh")]);
        let got: Vec<Grant> = grants(&home, &denied).unwrap().into_iter().map(|o| o.grant).collect();
        for want in
            [Grant::Tree(home.join("src")), Grant::Tree(home.join(".config/fish")), Grant::File(home.join(".bashrc"))]
        {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
        assert!(!got.iter().any(|g| matches!(g, Grant::Tree(p) | Grant::File(p) if p.starts_with(home.join(".ssh")))));
        let walk = quiet_walk(&denied);
        assert!(walk.seen.iter().any(|(d, _)| *d == home.join(".config")));
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(home.join(".config/new"), "x").unwrap();
        assert!(walk.changed(), "an entry created on the way is seen");
        assert!(walk.changed(), "and stays seen");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_link_made_on_the_way_while_the_paths_are_resolved_is_a_change() {
        let (_one, dir) = walk_home();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["dotfiles/aws", "elsewhere/aws"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        let denied = [home.join(".aws")];
        // Nothing moves: the paths resolved, and a walk that stays quiet.
        let quiet = (0..200).find_map(|_| {
            let (resolved, walk) = Walk::resolved(&denied);
            assert_eq!(resolved, denied);
            (!walk.changed()).then_some(walk)
        });
        assert!(quiet.is_some(), "no walk was quiet");
        // `~/.aws` made a link to `~/dotfiles/aws` after the walk of `~` began, before the
        // paths were resolved.
        let (resolved, walk) = Walk::resolved_by(&denied, |d| {
            if !home.join(".aws").exists() {
                std::os::unix::fs::symlink(home.join("dotfiles/aws"), home.join(".aws")).unwrap();
            }
            resolve(d)
        });
        assert_eq!(resolved, [home.join("dotfiles/aws")]);
        assert!(walk.changed(), "a link made while the paths were resolved");
        // `~/dotfiles/aws` made a link elsewhere once the paths were resolved, before the
        // way to them (`~/dotfiles`) was recorded.
        let mut first = true;
        let (resolved, walk) = Walk::resolved_by(&denied, |d| {
            let resolved = resolve(d);
            if std::mem::take(&mut first) {
                std::fs::rename(home.join("dotfiles/aws"), home.join("dotfiles/old")).unwrap();
                std::os::unix::fs::symlink(home.join("elsewhere/aws"), home.join("dotfiles/aws")).unwrap();
            }
            resolved
        });
        assert_eq!(resolved, [home.join("dotfiles/aws")]);
        assert!(walk.changed(), "a link made before the way to the resolved paths was recorded");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_directory_on_the_way_replaced_touched_or_created_is_a_change() {
        let (_one, dir) = walk_home();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        let denied = [home.join(".config/gh"), home.join(".docker/config.json")];
        let fresh = || quiet_walk(&denied);
        let walk = fresh();
        std::fs::rename(home.join(".config"), home.join("old")).unwrap();
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        assert!(walk.changed(), "a directory on the way replaced");
        let walk = fresh();
        std::fs::File::open(home.join(".config")).unwrap().set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        assert!(walk.changed(), "a directory on the way touched");
        let walk = fresh();
        std::fs::create_dir(home.join(".docker")).unwrap();
        assert!(walk.changed(), "a missing directory on the way created");
    }
}
