//! Where a confined tool may not read: the credential stores (`~/.ssh`, `~/.aws`, browser
//! profiles...) and packs' own secret files, as Landlock grants of read rights around them.
//!
//! Landlock only ever allows, and a right granted on a directory holds for everything
//! beneath it. So read rights are granted on every entry on the way from `/` down to each
//! denied path but that path ([`crate::grants::grants`], the same walk writes use around
//! packs' configuration), and listing directories (`ReadDir`) on the whole tree. What that
//! leaves: a denied entry's name and metadata (`ls ~/.ssh`, `stat`) but never its contents;
//! an entry created in a directory on the way (`/`, `/home`, `$HOME`, `~/.config`..., and
//! every directory crossed following a link on the way: [`follow`]) after the rules were
//! built is not readable until they are rebuilt ([`Walk::changed`]: the next call after the
//! directory changed, the list resolved again); a denied path that does not
//! exist is kept ([`resolve`]): created later, it is unreadable (the directory on its way is
//! not granted whole) and denied once the rules are rebuilt. A rule is on a file, not the
//! name it was found by, so a file with another name (a hard link) is not granted on its own
//! (`grants.rs`): the rule would hold at a store's path too. A hard link inside a directory
//! granted whole, or a bind mount, made before packs started, is another path to the same
//! file.

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
/// (which resolves the list again: a missing directory may come back as a link). A dangling
/// link is followed to where its target would be created (`~/.aws -> /data/aws`, missing:
/// `/data/aws`), a link that loops (`ELOOP`) kept as itself with the names after it.
///
/// Each path is resolved as the kernel resolves it ([`follow`]): one name at a time, links
/// followed by reading them. The default list names two dozen paths under one home, most of
/// them missing: each path looked up costs one `lstat` once for the whole list, and each
/// link one `readlink` more.
pub(crate) fn resolve(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut known = Known::new();
    let mut out: Vec<PathBuf> =
        paths.iter().filter_map(|p| follow(p, &mut known, |_, _| {}, &mut Vec::new())).collect();
    out.sort();
    out.dedup();
    out
}

/// `denied` as the rules keep it: [`resolve`]d, and every link crossed on the way to it, as
/// itself (`~/.config` when it is a link to `~/dotfiles/config`). Reads through a link are
/// judged where they lead, so denying the link costs reads only that its directory's entries
/// are granted one by one; kept out of every writable place, it cannot be retargeted by a
/// tool that may write its directory, which would move the store out of the list at the
/// next call.
pub(crate) fn denied(denied: &[PathBuf]) -> Vec<PathBuf> {
    let mut known = Known::new();
    let mut links = Vec::new();
    let mut out: Vec<PathBuf> = denied.iter().filter_map(|p| follow(p, &mut known, |_, _| {}, &mut links)).collect();
    out.append(&mut links);
    out.sort();
    out.dedup();
    out
}

/// Most symbolic links followed on the way to one path (the kernel's limit: past it,
/// `ELOOP`).
const MAX_LINKS: usize = 40;

/// What a path was when it was looked up (itself, a link not followed).
#[derive(Debug, Clone)]
enum Entry {
    Dir,
    /// A link, and its target as written.
    Link(PathBuf),
    /// Missing, unreachable (no permission), or not a directory.
    Other,
}

/// The paths looked up so far (each one's directory resolved), and what they were: a tree of
/// names from `/`, so a step of a walk costs a lookup of one name in one directory, never a
/// hash or comparison of the whole path it is at (a chain of links through a deep directory
/// would make that quadratic).
#[derive(Debug)]
struct Known {
    /// Each node's directory (the root's is itself) and name; the root is node 0.
    nodes: Vec<(usize, std::ffi::OsString)>,
    /// The node of each name looked up in each directory node.
    children: std::collections::HashMap<(usize, std::ffi::OsString), usize>,
    /// What each node's path was when it was looked up.
    entries: std::collections::HashMap<usize, Entry>,
}

impl Known {
    const ROOT: usize = 0;

    fn new() -> Self {
        Self {
            nodes: vec![(Self::ROOT, std::ffi::OsString::new())],
            children: std::collections::HashMap::new(),
            entries: std::collections::HashMap::new(),
        }
    }

    /// The node of `name` in the directory `dir`.
    fn child(&mut self, dir: usize, name: &std::ffi::OsStr) -> usize {
        let next = self.nodes.len();
        let node = *self.children.entry((dir, name.to_owned())).or_insert(next);
        if node == next {
            self.nodes.push((dir, name.to_owned()));
        }
        node
    }

    /// The directory of `node` (`..`: the root's is the root).
    fn parent(&self, node: usize) -> usize {
        self.nodes[node].0
    }

    /// The path of `node`.
    fn path(&self, mut node: usize) -> PathBuf {
        let mut names = Vec::new();
        while node != Self::ROOT {
            names.push(&self.nodes[node].1);
            node = self.nodes[node].0;
        }
        let mut path = PathBuf::from("/");
        path.extend(names.into_iter().rev());
        path
    }
}

/// `path` resolved as the kernel would resolve it, with [`resolve`]'s answer where it does not
/// exist: from `/`, one name at a time, `looked` told each directory (resolved) and the name
/// looked up in it before the lookup (the first time: not when `known` has the answer).
/// So what it is told is every directory whose entries decide the answer: each ancestor of
/// each path crossed, each link's directory, and the way to each link's target (a relative
/// one from the link's directory, `..` after a link from where the link led). A name
/// missing, not a directory before the end, or a link past the [`MAX_LINKS`]th ends the
/// lookups: the names after it are taken as they are written (`..` going up). Each link
/// crossed is added to `links`. `None`: `path` cannot be made absolute.
fn follow(
    path: &Path,
    known: &mut Known,
    mut looked: impl FnMut(&Path, &std::ffi::OsStr),
    links: &mut Vec<PathBuf>,
) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = parts(&path).into();
    let mut at = Known::ROOT;
    let mut followed = 0;
    while let Some(part) = pending.pop_front() {
        if part == "/" {
            at = Known::ROOT;
            continue;
        }
        if part == ".." {
            at = known.parent(at);
            continue;
        }
        let next = known.child(at, &part);
        // Told once per directory and name: an answer kept in `known` was told when it was
        // first looked up, and depends on nothing else (a chain of links that crosses the same
        // directories over and over tells each once).
        if !known.entries.contains_key(&next) {
            looked(&known.path(at), &part);
        }
        match lookup(next, known) {
            Entry::Dir => at = next,
            Entry::Link(target) if followed < MAX_LINKS => {
                followed += 1;
                links.push(known.path(next));
                for p in parts(&target).into_iter().rev() {
                    pending.push_front(p);
                }
            }
            Entry::Link(_) | Entry::Other => {
                at = next;
                break;
            }
        }
    }
    let mut at = known.path(at);
    for part in pending {
        match part.to_str() {
            Some("/") => at = PathBuf::from("/"),
            Some("..") => {
                at.pop();
            }
            _ => at.push(part),
        }
    }
    Some(at)
}

/// What the path of `node` is, from `known` or an `lstat` (and a `readlink` for a link).
fn lookup(node: usize, known: &mut Known) -> Entry {
    if let Some(entry) = known.entries.get(&node) {
        return entry.clone();
    }
    let path = known.path(node);
    let path = path.as_path();
    #[cfg(test)]
    tests::LOOKUPS.with(|n| n.set(n.get() + 1));
    let entry = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            #[cfg(test)]
            tests::READLINKS.with(|n| n.set(n.get() + 1));
            // An empty target resolves to nothing (`ENOENT`).
            match std::fs::read_link(path) {
                Ok(target) if !target.as_os_str().is_empty() => Entry::Link(target),
                _ => Entry::Other,
            }
        }
        Ok(meta) if meta.is_dir() => Entry::Dir,
        _ => Entry::Other,
    };
    known.entries.insert(node, entry.clone());
    entry
}

/// `path`'s names, `/` for the root, `..` kept (taken after the links before it): the steps
/// of a walk that follows links itself (here, and `programs.rs`' PATH directories).
pub(crate) fn parts(path: &Path) -> Vec<std::ffi::OsString> {
    use std::path::Component;
    path.components()
        .filter_map(|c| match c {
            Component::RootDir => Some("/".into()),
            Component::ParentDir => Some("..".into()),
            Component::Normal(n) => Some(n.to_owned()),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// The directories whose entries decide where the denied paths resolve ([`follow`]: every
/// directory a name was looked up in on the way, links and their targets' ways included),
/// and what they looked like: an entry added, removed or renamed in one changes it. Where
/// the kernel offers change notices and each directory is on a file system that makes them
/// ([`crate::notices::seen`]), they are watched too, each for the names looked up in it
/// (and for any entry created there, which the rules must grant), and asked instead of
/// looking at each directory again (one `poll` per check instead of a `stat` per
/// directory).
///
/// And the files granted by rules of their own ([`Walk::granted`]): a rule is on the file,
/// so a second name given to one after the rules were built (`ln ~/notes ~/.ssh/x`, which
/// changes nothing in a directory on the way) would read through the rule at the store's
/// path. Each is watched itself where the directories are, else looked at (`lstat`) at each
/// check: a second name, or the file moved or gone from its path, is a change.
#[derive(Debug)]
pub(crate) struct Walk {
    seen: Vec<(PathBuf, Option<Stamp>)>,
    /// The directories of `seen`, to find one without going through them all.
    seen_dirs: std::collections::HashSet<PathBuf>,
    /// The files granted by rules of their own, and their inode numbers.
    files: Vec<(PathBuf, u64)>,
    /// Every directory of `seen`, watched for the names looked up in it (made before they
    /// were looked up).
    notices: Option<std::sync::Mutex<crate::notices::Notices>>,
    /// Nothing was recorded, or the paths moved while they were ([`Walk::resolved`]): the
    /// rules are stale at once ([`Walk::unrecorded`]).
    unrecorded: bool,
}

/// A directory's inode and modification time (seconds, nanoseconds).
type Stamp = (u64, i64, i64);

impl Walk {
    /// The directories on the way to `denied`, as they are now.
    #[cfg(test)]
    fn of(denied: &[PathBuf]) -> Self {
        Self::resolved(denied).1
    }

    /// Record that `name` is looked up in `dir` (resolved, reached): watched for it, and
    /// `dir` looked at the first time, before the lookup. A directory that cannot be watched
    /// (or is on a file system that makes no notices) turns them off: each directory is
    /// compared instead.
    fn record(&mut self, dir: &Path, name: &std::ffi::OsStr) {
        if let Some(notices) = self.notices.as_mut() {
            let watched = notices.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).watch(dir, Some(name))
                == crate::notices::Watch::Watched;
            if !watched {
                self.notices = None;
            }
        }
        #[cfg(test)]
        tests::RECORDS.with(|n| n.set(n.get() + 1));
        if self.seen_dirs.insert(dir.to_owned()) {
            let stamp = look(dir);
            // Reached, but gone or unreachable already: nothing to compare with.
            if stamp.is_none() {
                self.unrecorded = true;
            }
            self.seen.push((dir.to_owned(), stamp));
        }
    }

    /// `denied` resolved, links crossed included ([`denied`]), and the walk that keeps it true: each directory is
    /// recorded before a name is looked up in it, so a change after the lookup is a change;
    /// then the paths are resolved again: one that resolves elsewhere now (a change the
    /// modification times may miss, made in the clock tick of the look) makes the walk stale
    /// at once.
    pub(crate) fn resolved(denied: &[PathBuf]) -> (Vec<PathBuf>, Self) {
        Self::resolved_by(denied, self::denied)
    }

    fn resolved_by(denied: &[PathBuf], mut again: impl FnMut(&[PathBuf]) -> Vec<PathBuf>) -> (Vec<PathBuf>, Self) {
        let mut walk = Self {
            seen: Vec::new(),
            seen_dirs: std::collections::HashSet::new(),
            files: Vec::new(),
            notices: crate::notices::Notices::new().map(|n| std::sync::Mutex::new(n.new_entries())),
            unrecorded: false,
        };
        let mut known = Known::new();
        let mut links = Vec::new();
        let mut resolved: Vec<PathBuf> = denied
            .iter()
            .filter_map(|p| follow(p, &mut known, |dir, name| walk.record(dir, name), &mut links))
            .collect();
        resolved.append(&mut links);
        resolved.sort();
        resolved.dedup();
        if again(denied) != resolved {
            walk.unrecorded = true;
        }
        (resolved, walk)
    }

    /// No directory recorded (a process that builds the rules once): [`Walk::changed`]
    /// always says so, and rules kept with it are built again at their next use.
    pub(crate) fn unrecorded() -> Self {
        Self {
            seen: Vec::new(),
            seen_dirs: std::collections::HashSet::new(),
            files: Vec::new(),
            notices: None,
            unrecorded: true,
        }
    }

    /// Record that the file `fd`, found at `path`, was granted by a rule of its own (with one
    /// name: `grants.rs` grants no other): watched, or looked at in each check, from now on;
    /// its link count is checked after the watch is made, so a name added before is a
    /// change too. A file that cannot be watched turns the notices off.
    #[cfg(target_os = "linux")]
    pub(crate) fn granted(&mut self, path: &Path, fd: std::os::fd::BorrowedFd<'_>) {
        if self.unrecorded {
            return;
        }
        if let Some(notices) = self.notices.as_mut() {
            let watched = notices.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).watch_file(path, fd)
                == crate::notices::Watch::Watched;
            if !watched {
                self.notices = None;
            }
        }
        match rustix::fs::fstat(fd) {
            Ok(stat) if stat.st_nlink == 1 => self.files.push((path.to_owned(), stat.st_ino)),
            _ => self.unrecorded = true,
        }
    }

    /// Whether a directory walked changed since: its inode or modification time, or, where
    /// it is watched, a notice on it, on a name looked up in it, of an entry created in it
    /// or moved out of it (or a mount); or a file granted on its own was given another name,
    /// moved or removed.
    pub(crate) fn changed(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        if self.unrecorded {
            return true;
        }
        match &self.notices {
            Some(notices) => !notices.lock().unwrap_or_else(std::sync::PoisonError::into_inner).quiet(),
            None => {
                self.seen.iter().any(|(dir, was)| look(dir) != *was)
                    || self.files.iter().any(|(file, ino)| {
                        !std::fs::symlink_metadata(file).is_ok_and(|m| m.ino() == *ino && m.nlink() == 1)
                    })
            }
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
        /// `lstat`s made by [`lookup`] on this thread.
        pub(super) static LOOKUPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// `readlink`s made by [`lookup`] on this thread.
        pub(super) static READLINKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        /// Names recorded by [`Walk::record`] on this thread.
        pub(super) static RECORDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn a_walk_records_each_name_once_however_often_a_chain_of_links_crosses_it() {
        // 40 links, each into a deep directory and back up to the next (`l0 -> d/d/.../../l1`):
        // every link crosses the same directories again. Each is recorded (watched, looked
        // at) the first time only, as each is looked up once.
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let deep = ["d"; 30].join("/");
        std::fs::create_dir_all(root.join(&deep)).unwrap();
        let back = ["..", ".."].repeat(15).join("/");
        for i in 0..40 {
            std::os::unix::fs::symlink(format!("{deep}/{back}/l{}", i + 1), root.join(format!("l{i}"))).unwrap();
        }
        std::fs::create_dir(root.join("l40")).unwrap();
        LOOKUPS.with(|n| n.set(0));
        RECORDS.with(|n| n.set(0));
        let (resolved, _walk) = Walk::resolved_by(&[root.join("l0/secret")], |_| Vec::new());
        assert!(resolved.contains(&root.join("l40/secret")), "{resolved:?}");
        let (lookups, records) = (LOOKUPS.with(std::cell::Cell::get), RECORDS.with(std::cell::Cell::get));
        assert_eq!(records, lookups, "one record per name looked up");
        assert!(lookups < 40 * 10, "{lookups} lookups");
    }

    #[test]
    fn the_default_list_costs_one_lookup_per_path_and_a_readlink_per_link_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), home.join(".ssh")).unwrap();
        let list = defaults(Some(&home));
        LOOKUPS.with(|n| n.set(0));
        READLINKS.with(|n| n.set(0));
        let got = resolve(&list);
        // Each path of the list, its missing parents (`.docker`, `.local`, `.local/share`,
        // `.cargo`) and the directories above the home once each; one `readlink`: the link.
        let distinct: std::collections::BTreeSet<&Path> = list.iter().flat_map(|p| p.ancestors()).collect();
        assert!(
            LOOKUPS.with(std::cell::Cell::get) <= distinct.len(),
            "{} > {}",
            LOOKUPS.with(std::cell::Cell::get),
            distinct.len()
        );
        assert_eq!(READLINKS.with(std::cell::Cell::get), 1);
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
        // `~/.aws` made a link to `~/dotfiles/aws` once the walk looked it up, before the
        // paths were resolved again: stale at once, whatever the notices say.
        let (resolved, walk) = Walk::resolved_by(&denied, |d| {
            if !home.join(".aws").exists() {
                std::os::unix::fs::symlink(home.join("dotfiles/aws"), home.join(".aws")).unwrap();
            }
            self::denied(d)
        });
        assert_eq!(resolved, denied);
        assert!(walk.unrecorded && walk.changed(), "a link made while the paths were resolved");
        // `~/dotfiles/aws` made a link elsewhere once the paths were resolved twice: the way to
        // the link's target (`~/dotfiles`, for `aws`) was watched.
        let mut first = true;
        let (resolved, walk) = Walk::resolved_by(&denied, |d| {
            let resolved = self::denied(d);
            if std::mem::take(&mut first) {
                std::fs::rename(home.join("dotfiles/aws"), home.join("dotfiles/old")).unwrap();
                std::os::unix::fs::symlink(home.join("elsewhere/aws"), home.join("dotfiles/aws")).unwrap();
            }
            resolved
        });
        assert_eq!(resolved, [home.join(".aws"), home.join("dotfiles/aws")], "the link crossed kept too");
        assert!(!walk.unrecorded);
        assert!(walk.changed(), "a link made on the way to a link's target");
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

    /// A link at `at` to `target`, made as `ln -sfn` makes it: a new link renamed over the
    /// old one.
    fn relink(target: impl AsRef<Path>, at: &Path) {
        let new = at.with_extension("new-link");
        std::os::unix::fs::symlink(target, &new).unwrap();
        std::fs::rename(&new, at).unwrap();
    }

    /// A scratch tree: `~/.config -> /opt/links/l1 -> ../../data/cfg` (a link whose target is
    /// a link, relative), `~/.aws -> ../data/aws` (dangling), `~/.kube -> loop/a`, `loop/a ->
    /// b -> a` (a loop), and `~/.netrc`.
    fn chains(root: &Path) -> PathBuf {
        for d in ["home", "opt/links", "data/cfg/gh", "data/cfg2/gh", "loop"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let home = root.join("home");
        std::fs::write(home.join(".netrc"), "x").unwrap();
        std::os::unix::fs::symlink("../../data/cfg", root.join("opt/links/l1")).unwrap();
        std::os::unix::fs::symlink(root.join("opt/links/l1"), home.join(".config")).unwrap();
        std::os::unix::fs::symlink("../data/aws", home.join(".aws")).unwrap();
        std::os::unix::fs::symlink(root.join("loop/a"), home.join(".kube")).unwrap();
        std::os::unix::fs::symlink("b", root.join("loop/a")).unwrap();
        std::os::unix::fs::symlink("a", root.join("loop/b")).unwrap();
        home
    }

    #[test]
    fn paths_resolve_as_the_kernel_resolves_them_through_chains_of_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = chains(&root);
        std::os::unix::fs::symlink("../opt/links/l1/../cfg2", home.join("rel")).unwrap();
        // What exists resolves where the kernel says.
        for p in [".config/gh", ".config", "rel/gh", ".config/../cfg2/gh", "rel/../../opt/links"] {
            assert_eq!(resolve(&[home.join(p)]), [std::fs::canonicalize(home.join(p)).unwrap()], "{p}");
        }
        assert_eq!(resolve(&[home.join(".config/gh")]), [root.join("data/cfg/gh")]);
        // `..` after a link goes up from where the link led, even on the way to a missing name.
        assert_eq!(resolve(&[home.join(".config/../secret")]), [root.join("data/secret")]);
        // A dangling link: where the store would be made through it.
        assert_eq!(resolve(&[home.join(".aws")]), [root.join("data/aws")]);
        assert_eq!(resolve(&[home.join(".aws/credentials")]), [root.join("data/aws/credentials")]);
        // A loop: a link of the loop and the names after it (nothing reads through it).
        let [looped] = &resolve(&[home.join(".kube/config")])[..] else { panic!() };
        assert!([root.join("loop/a/config"), root.join("loop/b/config")].contains(looped), "{looped:?}");
        // A file on the way: the names after it as written.
        assert_eq!(resolve(&[home.join(".netrc/x/../y")]), [home.join(".netrc/y")]);
    }

    /// Whether `walk` sees a change: its notices, and the modification times alone.
    #[cfg(target_os = "linux")]
    fn seen_both_ways(mut walk: Walk) -> (bool, bool) {
        let notices = walk.changed();
        walk.notices = None;
        (notices, walk.changed())
    }

    /// A walk of `denied` whose notices and times say nothing changed yet (see `quiet_walk`),
    /// taken a clock tick before the change that follows.
    #[cfg(target_os = "linux")]
    fn quiet_walk_of_times(denied: &[PathBuf]) -> Walk {
        let walk = quiet_walk(denied);
        assert!(!walk.seen.iter().any(|(dir, was)| look(dir) != *was));
        std::thread::sleep(std::time::Duration::from_millis(20));
        walk
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_link_on_the_way_retargeted_anywhere_in_a_chain_is_a_change() {
        let (_one, dir) = walk_home();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = chains(&root);
        let denied = [home.join(".config/gh")];
        assert_eq!(
            Walk::resolved(&denied).0,
            [root.join("data/cfg/gh"), home.join(".config"), root.join("opt/links/l1")],
            "the store and the links crossed"
        );
        // Every directory whose entries decide it: the link's, the link's target's way.
        let walk = quiet_walk_of_times(&denied);
        for d in ["home", "opt", "opt/links", "data", "data/cfg"] {
            assert!(walk.seen.iter().any(|(s, _)| *s == root.join(d)), "{d} in {:?}", walk.seen);
        }
        // The link in the middle of the chain retargeted: `~/.config/gh` is elsewhere now.
        relink("../../data/cfg2", &root.join("opt/links/l1"));
        assert_eq!(seen_both_ways(walk), (true, true), "the middle link retargeted");
        assert_eq!(resolve(&denied), [root.join("data/cfg2/gh")]);
        // The first link retargeted, the last directory renamed, a missing one made.
        let walk = quiet_walk_of_times(&denied);
        relink(root.join("data/cfg"), &home.join(".config"));
        assert_eq!(seen_both_ways(walk), (true, true), "the first link retargeted");
        let walk = quiet_walk_of_times(&denied);
        std::fs::rename(root.join("data/cfg"), root.join("data/old")).unwrap();
        assert_eq!(seen_both_ways(walk), (true, true), "the target renamed");
        let walk = quiet_walk_of_times(&denied);
        std::fs::create_dir(root.join("data/cfg")).unwrap();
        assert_eq!(seen_both_ways(walk), (true, true), "the target made again");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_dangling_link_s_target_made_or_a_loop_broken_is_a_change() {
        let (_one, dir) = walk_home();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = chains(&root);
        let aws = [home.join(".aws/credentials")];
        assert_eq!(Walk::resolved(&aws).0, [root.join("data/aws/credentials"), home.join(".aws")]);
        let walk = quiet_walk_of_times(&aws);
        std::fs::create_dir(root.join("data/aws")).unwrap();
        assert_eq!(seen_both_ways(walk), (true, true), "the store made through the link");
        let kube = [home.join(".kube/config")];
        let walk = quiet_walk_of_times(&kube);
        relink(root.join("data"), &root.join("loop/b"));
        assert_eq!(seen_both_ways(walk), (true, true), "the loop broken");
        assert_eq!(resolve(&kube), [root.join("data/config")]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_file_granted_on_its_own_given_a_name_in_a_store_is_a_change() {
        // `ln ~/notes ~/.ssh/x` changes no directory on the way: the file is watched itself,
        // or looked at where there are no notices.
        let (_one, dir) = walk_home();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(home.join(".ssh")).unwrap();
        let denied = [home.join(".ssh")];
        let notes = home.join("notes");
        let walk = |linked_before: bool| {
            std::fs::write(&notes, "x").unwrap();
            let mut walk = quiet_walk_of_times(&denied);
            let fd = std::fs::File::open(&notes).unwrap();
            if linked_before {
                std::fs::hard_link(&notes, home.join(".ssh/x")).unwrap();
            }
            walk.granted(&notes, std::os::fd::AsFd::as_fd(&fd));
            walk
        };
        let link = || std::fs::hard_link(&notes, home.join(".ssh/x")).unwrap();
        let unlink = || std::fs::remove_file(home.join(".ssh/x")).unwrap();
        let quiet = walk(false);
        std::fs::write(&notes, "contents").unwrap();
        assert_eq!(seen_both_ways(quiet), (false, false), "its contents written");
        let linked = walk(false);
        link();
        assert_eq!(seen_both_ways(linked), (true, true), "a name in a store");
        unlink();
        // A name given between the grant and the record: stale at once.
        assert!(walk(true).changed(), "linked before it was recorded");
        unlink();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn an_unrelated_entry_changed_in_a_directory_on_the_way_is_no_change_but_a_new_one_or_one_moved_out_is() {
        let (_one, dir) = walk_home();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::create_dir(home.join("attic")).unwrap();
        std::fs::create_dir(home.join("src")).unwrap();
        for f in [".bash_history", "notes", ".con", ".netrc"] {
            std::fs::write(home.join(f), "x").unwrap();
        }
        let denied = [home.join(".config/gh"), home.join(".netrc"), home.join(".docker/config.json")];
        // The directories above the home are watched for their names, and an entry created
        // there by another test is a new entry: the home's own are tried until one is quiet.
        let unrelated = (0..20).any(|i| {
            let walk = quiet_walk(&denied);
            let history = std::fs::OpenOptions::new().append(true).open(home.join(".bash_history")).unwrap();
            std::io::Write::write_all(&mut &history, b"ls\n").unwrap();
            std::fs::set_permissions(home.join("notes"), std::os::unix::fs::PermissionsExt::from_mode(0o600 + i))
                .unwrap();
            std::fs::File::open(home.join("notes")).unwrap().set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
            std::fs::remove_file(home.join(".con")).unwrap();
            std::fs::write(home.join(".con"), "x").unwrap();
            std::fs::remove_file(home.join(".con")).unwrap();
            std::fs::write(home.join(".tmp"), "x").unwrap();
            std::fs::remove_file(home.join(".tmp")).unwrap();
            let quiet = !walk.changed();
            std::fs::write(home.join(".con"), "x").unwrap();
            quiet
        });
        assert!(unrelated, "writing, touching or removing an entry off the way, a prefix of a name on it");
        let changes: [(&str, &dyn Fn()); 7] = [
            ("an entry created (to be granted)", &|| std::fs::write(home.join("new"), "x").unwrap()),
            // Its rule is on the inode: moved into a store, it would read there.
            ("an entry moved into a store", &|| {
                std::fs::rename(home.join("notes"), home.join(".config/gh/notes")).unwrap()
            }),
            ("a directory moved into another", &|| {
                std::fs::rename(home.join("attic"), home.join("src/attic")).unwrap()
            }),
            ("a name on the way created", &|| std::fs::create_dir(home.join(".docker")).unwrap()),
            ("a name on the way renamed over", &|| {
                std::fs::write(home.join(".netrc.new"), "y").unwrap();
                std::fs::rename(home.join(".netrc.new"), home.join(".netrc")).unwrap();
            }),
            ("a name on the way removed", &|| std::fs::remove_file(home.join(".netrc")).unwrap()),
            ("a directory on the way renamed", &|| std::fs::rename(home.join(".config"), home.join("cfg")).unwrap()),
        ];
        for (what, change) in changes {
            let walk = quiet_walk(&denied);
            change();
            assert!(walk.changed(), "{what}");
        }
    }
}
