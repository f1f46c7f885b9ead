//! A cache of what executables answered to `--describe`, so a `packs run` does not
//! start every executable tool of a pack directory on every call.
//!
//! One small JSON file per executable, named by a hash of its absolute path, holding the
//! path, the identity of the file it was (device, inode, size, modification and
//! change times) and the bytes `--describe` printed. An entry is used only while
//! the file still has that identity: editing, replacing, `chmod`ing or `touch`ing
//! the executable makes packs ask it again. Only successful describes are kept,
//! and never for a file changed in the last [`SETTLE`] (its timestamps could still
//! miss a change made in the same clock tick). Nothing here is ever required:
//! every error reading or writing the cache just means asking the executable.
//!
//! The cache cannot see files an executable reads to build its describe; after
//! changing one, `touch` the executable (or set `PACKS_CACHE_DIR=` to turn the
//! cache off). docs/TOOL_INTERFACE.md documents this for users.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Version of the entry format; entries of another version are ignored.
const FORMAT: u32 = 1;

/// How long a file must have been left alone before its describe is kept.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// The cache directory packs uses: `$PACKS_CACHE_DIR` (set but empty turns the
/// cache off), else `$XDG_CACHE_HOME/packs`, else `$HOME/.cache/packs`.
pub(crate) fn default_dir() -> Option<PathBuf> {
    dir_from(|k| std::env::var_os(k))
}

fn dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(dir) = var("PACKS_CACHE_DIR") {
        return absolute(dir);
    }
    var("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| var("HOME").and_then(absolute).map(|h| h.join(".cache")))
        .map(|d| d.join("packs"))
}

/// FNV-1a of `bytes`: stable across Rust releases, so cache entries named by it outlive
/// an upgrade.
pub(crate) fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// What makes a file the same file: if any of this changes, its describe may have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    /// The identity of the file at `path` (symlinks followed).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        fs::metadata(path).ok().map(|m| Self::of_metadata(&m))
    }

    /// The identity of the file `m` describes.
    pub(crate) fn of_metadata(m: &fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// The identity as one word (`dev:ino:size:mtime:mtime_ns:ctime:ctime_ns`), for the name index.
    pub(crate) fn to_word(&self) -> String {
        let Self { dev, ino, size, mtime: (ms, mns), ctime: (cs, cns) } = self;
        format!("{dev}:{ino}:{size}:{ms}:{mns}:{cs}:{cns}")
    }

    /// The identity [`Identity::to_word`] wrote; None for anything else.
    pub(crate) fn from_word(word: &str) -> Option<Self> {
        let parts: Vec<&str> = word.split(':').collect();
        let [dev, ino, size, ms, mns, cs, cns] = parts.as_slice() else { return None };
        let (u, i) = (|s: &str| s.parse::<u64>().ok(), |s: &str| s.parse::<i64>().ok());
        Some(Self { dev: u(dev)?, ino: u(ino)?, size: u(size)?, mtime: (i(ms)?, i(mns)?), ctime: (i(cs)?, i(cns)?) })
    }

    /// When the file last changed: the later of its modification and change times.
    pub(crate) fn changed(&self) -> SystemTime {
        let as_time = |(s, ns): (i64, i64)| match u64::try_from(s) {
            Ok(s) => SystemTime::UNIX_EPOCH + Duration::new(s, u32::try_from(ns).unwrap_or(0).min(999_999_999)),
            Err(_) => SystemTime::UNIX_EPOCH,
        };
        as_time(self.mtime).max(as_time(self.ctime))
    }

    /// Changed so recently that a further change might not show in the timestamps. A
    /// time in the future (a clock set back) counts as recent too.
    pub(crate) fn is_settling(&self) -> bool {
        self.changed() + SETTLE > SystemTime::now()
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    path: PathBuf,
    identity: Identity,
    describe: String,
}

/// The describe cache in one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeCache {
    dir: PathBuf,
}

impl DescribeCache {
    /// How long a file must stay unchanged before its describe is cached.
    pub const SETTLE: Duration = SETTLE;

    /// The cache in `$PACKS_CACHE_DIR`, else the user's cache directory
    /// (`$XDG_CACHE_HOME/packs`, `~/.cache/packs`); none when `PACKS_CACHE_DIR` is empty.
    pub fn in_default_dir() -> Option<Self> {
        default_dir().map(Self::new)
    }

    /// A cache kept in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory entries are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, exe: &Path) -> PathBuf {
        // Collisions are harmless: an entry records its path and is checked.
        self.dir.join(format!("describe-{:016x}.json", stable_hash(exe.as_os_str().as_bytes())))
    }

    /// What `exe` printed for `--describe` when it had identity `id`, if known.
    pub(crate) fn get(&self, exe: &Path, id: &Identity) -> Option<String> {
        let exe = std::path::absolute(exe).ok()?;
        let entry: Entry = serde_json::from_slice(&read_own(&self.entry_path(&exe))?).ok()?;
        (entry.format == FORMAT && entry.path == exe && entry.identity == *id).then_some(entry.describe)
    }

    /// Remember that `exe`, with identity `id` before it ran, printed `describe`.
    /// Skipped when the file changed meanwhile or too recently to be sure.
    pub(crate) fn put(&self, exe: &Path, id: &Identity, describe: &str) {
        if id.is_settling() || Identity::of(exe).as_ref() != Some(id) {
            return;
        }
        let Ok(exe) = std::path::absolute(exe) else { return };
        let entry = Entry { format: FORMAT, path: exe.clone(), identity: id.clone(), describe: describe.to_owned() };
        let _ = self.write(&self.entry_path(&exe), &entry);
    }

    fn write(&self, path: &Path, entry: &Entry) -> std::io::Result<()> {
        write_private(&self.dir, path, &serde_json::to_vec(entry)?)
    }
}

/// The bytes of the file at `path` when this user owns it; None otherwise. A shared
/// cache directory must not let another user decide what packs reads from it.
pub(crate) fn read_own(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = open_own(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The file at `path`, opened for reading, when this user owns it.
pub(crate) fn open_own(path: &Path) -> Option<fs::File> {
    let file = fs::File::open(path).ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    (file.metadata().ok()?.uid() == unsafe { libc::geteuid() }).then_some(file)
}

/// Write `bytes` to `path` in the cache directory `dir` (created private if missing), so
/// that a reader sees the old file or the new one, never half of one. Refused when `dir`
/// is not this user's alone.
pub(crate) fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    // Never write into a directory that another user could tamper with.
    let meta = fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other("the cache directory is not private"));
    }
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().unwrap_or(OsStr::new("entry"));
    let unique = format!("{}.{}", std::process::id(), WRITES.fetch_add(1, Ordering::Relaxed));
    let tmp = dir.join(format!(".{}.{unique}.tmp", name.to_string_lossy()));
    let result = (|| {
        // A new file only (no following a planted symlink), readable by us alone.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Remove the least recently written files of the cache directory `dir` whose names start
/// with `prefix`, beyond the `keep` newest: kinds of entries made per search path or per
/// invocation must not grow without end.
pub(crate) fn evict(dir: &Path, prefix: &str, keep: usize) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut found: Vec<(SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().as_bytes().starts_with(prefix.as_bytes()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if found.len() <= keep {
        return;
    }
    found.sort();
    for (_, path) in &found[..found.len() - keep] {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn eviction_keeps_the_newest_entries_of_one_kind() {
        let dir = tempfile::tempdir().unwrap();
        let base = SystemTime::now() - Duration::from_secs(1000);
        for i in 0..20u64 {
            // Written in shuffled order; their modification times say which are newest.
            let n = (i * 7) % 20;
            let path = dir.path().join(format!("names-{n:02}.idx"));
            fs::write(&path, "x").unwrap();
            fs::File::options().write(true).open(&path).unwrap().set_modified(base + Duration::from_secs(n)).unwrap();
        }
        fs::write(dir.path().join("describe-1.json"), "{}").unwrap();
        evict(dir.path(), "names-", 5);
        let mut left: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(
            left,
            ["describe-1.json", "names-15.idx", "names-16.idx", "names-17.idx", "names-18.idx", "names-19.idx"]
        );
    }

    #[test]
    fn the_directory_comes_from_the_environment_in_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
        };
        assert_eq!(dir_from(env(&[("PACKS_CACHE_DIR", "/c"), ("HOME", "/h")])), Some("/c".into()));
        assert_eq!(dir_from(env(&[("PACKS_CACHE_DIR", ""), ("HOME", "/h")])), None);
        assert_eq!(dir_from(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])), Some("/x/packs".into()));
        assert_eq!(dir_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])), Some("/h/.cache/packs".into()));
        assert_eq!(dir_from(env(&[])), None);
    }

    #[test]
    fn an_entry_holds_only_for_the_same_file_once_it_settled() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        fs::write(&exe, "#!/bin/sh\n").unwrap();
        let cache = DescribeCache::new(dir.path().join("cache"));
        let id = Identity::of(&exe).unwrap();

        // Just written: too fresh to be kept.
        cache.put(&exe, &id, "{}");
        assert_eq!(cache.get(&exe, &id), None);

        // A settled identity (as if written long ago) is kept and read back.
        let old = Identity { mtime: (1, 0), ctime: (1, 0), ..id.clone() };
        let entry = Entry { format: FORMAT, path: exe.clone(), identity: old.clone(), describe: "{\"a\":1}".into() };
        cache.write(&cache.entry_path(&exe), &entry).unwrap();
        assert_eq!(cache.get(&exe, &old).as_deref(), Some("{\"a\":1}"));
        // Any other identity or path misses.
        assert_eq!(cache.get(&exe, &Identity { size: old.size + 1, ..old.clone() }), None);
        assert_eq!(cache.get(&dir.path().join("other"), &old), None);
        let mode = fs::metadata(cache.dir()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the cache directory is private");
        let entry_mode = fs::metadata(cache.entry_path(&exe)).unwrap().mode() & 0o777;
        assert_eq!(entry_mode, 0o600);
        // The entry name does not depend on the Rust release (FNV-1a of the path, checked with Python).
        assert_eq!(
            DescribeCache::new("/c").entry_path(Path::new("/p/tool")),
            Path::new("/c/describe-55d7b92a6d1b7b39.json")
        );
    }

    #[test]
    fn a_directory_others_can_write_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        let cache = DescribeCache::new(&shared);
        let exe = dir.path().join("tool");
        let entry = Entry {
            format: FORMAT,
            path: exe.clone(),
            identity: Identity { dev: 1, ino: 2, size: 3, mtime: (1, 0), ctime: (1, 0) },
            describe: "{}".into(),
        };
        assert!(cache.write(&cache.entry_path(&exe), &entry).is_err());
        assert_eq!(fs::read_dir(&shared).unwrap().count(), 0);
    }
}
