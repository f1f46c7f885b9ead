//! Snapshots of listing output: `packs catalog` and `packs list` answered from the cache
//! directory when nothing they read has changed since the run that wrote the snapshot, and
//! `packs serve`'s first `tools/list` answered from its `tools/list` entries while the tools
//! load (`mcp::Server::start`).
//!
//! A listing's output is a function of the packs executable, its arguments, working
//! directory and environment, and the files of the pack directories. A snapshot is kept
//! per invocation (a SHA-256 of the executable's identity, the arguments, the working
//! directory and the whole environment (but `_`) names its file, and the file holds that digest
//! whole) together with a fingerprint of the pack directories: the path and identity
//! (device, inode, size, modification and change times, links followed) of every entry
//! discovery would walk, hidden entries excepted, and of every directory, plus which pack
//! directories are missing. A run whose fingerprint matches prints the snapshot and reads
//! no manifest; any difference (an edit in place, `chmod`, a file added, removed, renamed
//! or replaced, a link retargeted, a directory created) is a full load, which writes a
//! new snapshot.
//!
//! A snapshot is written only when the output is a clean answer: the load and the export
//! printed nothing on stderr (no diagnostics, no warnings), the command succeeded, no
//! lock file was involved (its files are not in the fingerprint; an agent's directory is,
//! the caller lists it with the pack directories), stdout is
//! not a terminal, and the fingerprint taken after the load equals the one taken before
//! it with nothing in it changed within [`DescribeCache::SETTLE`] of the load's start (a
//! change during the load, or in the same clock tick, would not show in a later
//! fingerprint). Files are written and read like the describe cache: a private
//! directory, no following of links, an atomic rename, used only when this user owns
//! them; any failure is a full load. A cache directory keeps the [`KEPT`] most recently
//! written snapshots.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hmac_sha256::Hash as Sha256;

use crate::describe_cache::{self, DescribeCache, Identity};

/// The first line of a snapshot file: its format and the packs release that wrote it.
const MAGIC: &str = concat!("packs-listing-snapshot 1 ", env!("CARGO_PKG_VERSION"), "\n");

/// The snapshot of one invocation in one cache directory.
pub(crate) struct Snapshot {
    dir: PathBuf,
    file: PathBuf,
    key: String,
    pack_dirs: Vec<PathBuf>,
    /// The fingerprint taken when the snapshot was looked up, and when that was.
    before: Option<(Fingerprint, SystemTime)>,
}

/// What the pack directories hold, as a digest; `latest` is the latest time one of the
/// identities in it changed.
#[derive(PartialEq, Eq)]
struct Fingerprint {
    digest: String,
    latest: SystemTime,
}

impl Snapshot {
    /// The snapshot of this process's invocation listing `pack_dirs`, kept in `cache`;
    /// `extra` is whatever else the output depends on (`packs serve`: what the kernel
    /// confines, which decides its read-only hints). None when the packs executable cannot
    /// be identified.
    pub(crate) fn of_this_process(cache: &DescribeCache, pack_dirs: &[PathBuf], extra: &str) -> Option<Self> {
        let exe = Identity::of(&std::env::current_exe().ok()?)?;
        // `_` is the shell's note of the last command run (`/usr/bin/time` under `time`):
        // packs never reads it.
        let mut env: Vec<_> = std::env::vars_os().filter(|(k, _)| k != "_").collect();
        env.sort();
        let mut h = Sha256::new();
        field(&mut h, MAGIC.as_bytes());
        field(&mut h, exe.to_word().as_bytes());
        field(&mut h, std::env::current_dir().ok()?.as_os_str().as_bytes());
        field(&mut h, extra.as_bytes());
        for arg in std::env::args_os() {
            field(&mut h, b"arg");
            field(&mut h, arg.as_bytes());
        }
        for (k, v) in &env {
            field(&mut h, b"env");
            field(&mut h, k.as_bytes());
            field(&mut h, v.as_bytes());
        }
        let key = hex(&h.finalize());
        let dir = cache.dir().to_owned();
        let file = dir.join(format!("listing-{}.snap", &key[..16]));
        Some(Self { dir, file, key, pack_dirs: pack_dirs.to_vec(), before: None })
    }

    /// The output the snapshot holds, when it is current.
    pub(crate) fn lookup(&mut self) -> Option<Vec<u8>> {
        let started = SystemTime::now();
        let now = fingerprint(&self.pack_dirs);
        let text = describe_cache::read_own(&self.file);
        self.before = Some((now, started));
        let (fingerprint, _) = self.before.as_ref()?;
        let mut text = text?;
        let (key, rest) = split_line(text.strip_prefix(MAGIC.as_bytes())?)?;
        let (digest, output) = split_line(rest)?;
        if key != self.key.as_bytes() || digest != fingerprint.digest.as_bytes() {
            return None;
        }
        // The output is the file's tail: keep the one buffer, without its head.
        text.drain(..text.len() - output.len());
        Some(text)
    }

    /// Keep `output` as this invocation's snapshot, if the pack directories did not change
    /// since [`Snapshot::lookup`] and had settled by then.
    pub(crate) fn store(&self, output: &[u8]) {
        let Some((before, started)) = &self.before else { return };
        let settled = !at_settling(before.latest, *started);
        if !settled || fingerprint(&self.pack_dirs) != *before {
            return;
        }
        let mut bytes = Vec::with_capacity(MAGIC.len() + 2 * 66 + output.len());
        bytes.extend_from_slice(MAGIC.as_bytes());
        let _ = writeln!(bytes, "{}\n{}", self.key, before.digest);
        bytes.extend_from_slice(output);
        if describe_cache::write_private(&self.dir, &self.file, &bytes).is_ok() {
            describe_cache::evict(&self.dir, "listing-", KEPT);
        }
    }
}

/// How many snapshots a cache directory keeps: an invocation whose environment changes
/// every time (a session id) must not fill the disk, one snapshot per run.
const KEPT: usize = 16;

/// Whether a change at `changed` might still not show in timestamps read at `at`.
fn at_settling(changed: SystemTime, at: SystemTime) -> bool {
    changed + DescribeCache::SETTLE > at
}

/// The fingerprint of `pack_dirs`: every entry discovery walks, with its identity.
fn fingerprint(pack_dirs: &[PathBuf]) -> Fingerprint {
    let mut h = Sha256::new();
    let mut latest = SystemTime::UNIX_EPOCH;
    let mut note = |h: &mut Sha256, kind: &[u8], path: &Path, id: Option<Identity>| {
        field(h, kind);
        field(h, path.as_os_str().as_bytes());
        match id {
            Some(id) => {
                field(h, id.to_word().as_bytes());
                latest = latest.max(id.changed());
            }
            None => field(h, b"-"),
        }
    };
    for dir in pack_dirs {
        if !dir.is_dir() {
            note(&mut h, b"missing", dir, None);
            continue;
        }
        // Each directory walked is yielded once (the walk enters a real directory once).
        for entry in crate::catalog::walk(dir, |_, _| {}) {
            match entry {
                Ok(e) => {
                    let kind: &[u8] = if e.file_type().is_dir() { b"dir" } else { b"file" };
                    note(&mut h, kind, e.path(), e.metadata().ok().map(|m| Identity::of_metadata(&m)));
                }
                Err(e) => note(&mut h, e.to_string().as_bytes(), e.path().unwrap_or(dir), None),
            }
        }
    }
    Fingerprint { digest: hex(&h.finalize()), latest }
}

/// One length-prefixed field, so no two sequences of fields hash alike.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes up to the first newline, and those after it.
fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let nl = memchr::memchr(b'\n', bytes)?;
    Some((&bytes[..nl], &bytes[nl + 1..]))
}

/// Whether this process's stdout is a terminal (no snapshot then: people at a terminal
/// do not need one, and what they see may depend on it).
pub(crate) fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}
