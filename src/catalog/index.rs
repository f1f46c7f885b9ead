//! The name index: which file declares each tool name, kept between runs in the cache
//! directory, so that `packs run NAME` (and `describe NAME`, `help NAME`) reads the one
//! file that declares NAME instead of every file of every pack directory.
//!
//! A load that read every name writes it ([`Record`]): per pack directory of the search
//! path, the identity (device, inode, size, modification and change times) of every
//! directory discovery entered, each tool's name, kind, file and that file's identity,
//! and the manifests whose name could not be read. A lookup trusts it only for an
//! answer it can prove current:
//! - every directory entered in the pack directories up to the one with the tool still
//!   has its identity, so no entry was added, removed or renamed there (each of those
//!   changes the directory's modification time); a pack directory that was missing is
//!   still missing;
//! - the tool's file still has its identity: not edited, replaced or `chmod`ed since
//!   (and once loaded it must still declare NAME);
//! - the manifests whose name could not be read are loaded again (their errors are
//!   reported as before); one that now loads makes the index stale;
//! - nothing it relies on had changed within [`DescribeCache::SETTLE`] of being
//!   recorded (a change in the same clock tick would not show in the timestamps).
//!
//! Anything else (no index, another search path or packs release, a name it does not
//! hold, one declared twice) is answered by a full load, which rewrites the index.
//! What it cannot see without reading every file: another file of those directories
//! edited in place (not replaced) so that it too declares NAME. Listing commands and
//! `lint` never use the index; docs/PERFORMANCE.md states this limit.
//!
//! The file is text, one record a line: the directory records, then the tool records
//! sorted by name, which a lookup bisects (a few reads of a few kilobytes), so its cost
//! does not grow with the number of tools. It is read only when this
//! user owns it, and written like the describe cache (private directory, no-follow,
//! atomic rename); any failure just means a full load.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::describe_cache::{self, DescribeCache, Identity};

/// The first line of an index: the format, and the packs release that wrote it.
fn header() -> String {
    format!("packs-name-index 2 {}\n", env!("CARGO_PKG_VERSION"))
}

/// The kinds of file a tool comes from in a pack directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Manifest,
    Executable,
}

impl Kind {
    fn letter(self) -> &'static str {
        match self {
            Self::Manifest => "m",
            Self::Executable => "x",
        }
    }
}

/// What a load that read every name saw of one pack directory.
#[derive(Debug, Default)]
pub(super) struct DirRecord {
    /// The directory is missing (or not a directory).
    pub(super) missing: bool,
    /// Every directory entered, the pack directory first; None for an identity that
    /// was still settling (never trusted).
    pub(super) entered: Vec<(PathBuf, Option<Identity>)>,
    /// Each tool: name, kind, file, and the file's identity when read (None: settling).
    pub(super) tools: Vec<(String, Kind, PathBuf, Option<Identity>)>,
    /// Manifests whose name could not be read.
    pub(super) unnamed: Vec<PathBuf>,
}

/// A settled identity, or None when it changed too recently to be relied on.
pub(super) fn settled(id: Identity) -> Option<Identity> {
    (!id.is_settling()).then_some(id)
}

/// What to load to resolve a name, as the index says.
#[derive(Debug)]
pub(super) struct Plan {
    /// The pack directories up to the one with the tool: missing, or the manifests in
    /// it whose name could not be read.
    pub(super) dirs: Vec<Option<Vec<PathBuf>>>,
    pub(super) kind: Kind,
    pub(super) file: PathBuf,
}

/// The index files of one cache directory.
pub(super) struct NameIndex<'a> {
    cache: &'a DescribeCache,
}

impl<'a> NameIndex<'a> {
    pub(super) fn new(cache: &'a DescribeCache) -> Self {
        Self { cache }
    }

    /// The search path as the index names it: its directories made absolute.
    fn key(dirs: &[PathBuf]) -> Option<Vec<PathBuf>> {
        dirs.iter().map(|d| std::path::absolute(d).ok()).collect()
    }

    fn file(&self, key: &[PathBuf]) -> PathBuf {
        let mut bytes = Vec::new();
        for dir in key {
            bytes.extend_from_slice(dir.as_os_str().as_bytes());
            bytes.push(0);
        }
        self.cache.dir().join(format!("names-{:016x}.idx", describe_cache::stable_hash(&bytes)))
    }

    /// Write what a full load recorded of `dirs` (one record per directory, in order).
    pub(super) fn write(&self, dirs: &[PathBuf], records: &[DirRecord]) {
        let Some(key) = Self::key(dirs) else { return };
        if records.len() != key.len() {
            return;
        }
        let mut head = Vec::new();
        let mut tools = Vec::new();
        for (pos, (dir, record)) in key.iter().zip(records).enumerate() {
            line(&mut head, &["P", &pos.to_string(), if record.missing { "missing" } else { "dir" }], dir);
            for (path, id) in &record.entered {
                line(&mut head, &["D", &pos.to_string(), &word(id.as_ref())], path);
            }
            for path in &record.unnamed {
                line(&mut head, &["U", &pos.to_string()], path);
            }
            for (name, kind, path, id) in &record.tools {
                let mut t = b"T\t".to_vec();
                escape(name.as_bytes(), &mut t);
                line(&mut t, &["", &pos.to_string(), kind.letter(), &word(id.as_ref())], path);
                tools.push(t);
            }
        }
        // Sorted by name (then search order), for `find`'s bisection.
        tools.sort_by(|a, b| tool_key(a).cmp(tool_key(b)).then_with(|| a.cmp(b)));
        let mut text = format!("{}{}\n", header(), head.len()).into_bytes();
        text.extend_from_slice(&head);
        for t in tools {
            text.extend_from_slice(&t);
        }
        if describe_cache::write_private(self.cache.dir(), &self.file(&key), &text).is_ok() {
            describe_cache::evict(self.cache.dir(), "names-", KEPT);
        }
    }

    /// What to load for `name`, when the index proves it current for that name. Reads
    /// the directory records and bisects the sorted tool records, so its cost does not
    /// grow with the number of tools.
    pub(super) fn lookup(&self, dirs: &[PathBuf], name: &str) -> Option<Plan> {
        use std::os::unix::fs::FileExt;
        let key = Self::key(dirs)?;
        let file = describe_cache::open_own(&self.file(&key))?;
        let len = file.metadata().ok()?.len();
        // The first line: the format and release, then the length of the directory records.
        let mut first = vec![0; BLOCK];
        let n = file.read_at(&mut first, 0).ok()?;
        let prefix = header();
        let rest = first[..n].strip_prefix(prefix.as_bytes())?;
        let end = find_byte(b'\n', rest)?;
        let head_len: u64 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
        let head_at = (prefix.len() + end + 1) as u64;
        if head_at.checked_add(head_len)? > len {
            return None;
        }
        let mut head = vec![0; usize::try_from(head_len).ok()?];
        file.read_exact_at(&mut head, head_at).ok()?;
        let mut wanted = Vec::new();
        escape(name.as_bytes(), &mut wanted);
        let hit = find(&file, head_at + head_len, len, &wanted)?;
        let fields: Vec<&[u8]> = hit.split(|&b| b == b'\t').collect();
        let [_, _, pos, kind, id, path] = fields.as_slice() else { return None };
        let found: usize = std::str::from_utf8(pos).ok()?.parse().ok()?;
        if found >= key.len() {
            return None;
        }
        let mut plan = Plan { dirs: Vec::new(), kind: Kind::Manifest, file: PathBuf::new() };
        let mut records =
            head.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| l.split(|&b| b == b'\t').collect::<Vec<_>>());
        let mut records = records.by_ref().peekable();
        for (pos, dir) in key.iter().enumerate().take(found + 1) {
            let record = records.next()?;
            let [b"P", at, state, path] = record.as_slice() else { return None };
            if *at != pos.to_string().as_bytes() || unescape(path)? != *dir {
                return None;
            }
            let missing = *state == b"missing";
            if missing == dirs[pos].is_dir() {
                return None;
            }
            let mut unnamed = Vec::new();
            while let Some(r) = records.next_if(|r| r.first().is_some_and(|&f| f != b"P")) {
                match r.as_slice() {
                    [b"D", _, id, path] => {
                        let now = Identity::of(&unescape(path)?);
                        if now.is_none() || now != parse_word(id)? {
                            return None;
                        }
                    }
                    [b"U", _, path] => unnamed.push(unescape(path)?),
                    _ => return None,
                }
            }
            plan.dirs.push((!missing).then_some(unnamed));
        }
        plan.kind = match *kind {
            b"m" => Kind::Manifest,
            b"x" => Kind::Executable,
            _ => return None,
        };
        plan.file = unescape(path)?;
        let now = Identity::of(&plan.file);
        (now.is_some() && now == parse_word(id)?).then_some(plan)
    }
}

/// How many indexes a cache directory keeps (one per search path: with the default
/// `./packs`, one per working directory packs ran in).
const KEPT: usize = 64;

/// How many bytes a bisection step reads.
const BLOCK: usize = 8192;

/// The first `byte` in `hay`, a word at a time. Not `memchr::memchr`: its first call
/// asks the CPU for its features (a few `cpuid`s, 8 µs each on a virtual machine here,
/// 60 µs in all), which a `run` would pay for a lookup of a few kilobytes.
fn find_byte(byte: u8, hay: &[u8]) -> Option<usize> {
    memchr::arch::all::memchr::One::new(byte).find(hay)
}

/// The escaped name of a tool record (`T`, tab, name, tab, ...).
fn tool_key(record: &[u8]) -> &[u8] {
    let rest = record.get(2..).unwrap_or_default();
    &rest[..find_byte(b'\t', rest).unwrap_or(rest.len())]
}

/// The one tool record named `wanted` (escaped) among the sorted records in
/// `[start, end)` of `file`, without its newline; None when there is none, more than
/// one, or the records are not as [`NameIndex::write`] makes them.
fn find(file: &std::fs::File, start: u64, end: u64, wanted: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let block = BLOCK as u64;
    let mut buf = vec![0; BLOCK];
    if start > end {
        return None;
    }
    // Every record starting at or after `hi` is named `wanted` or later; `lo` is a record's start.
    let (mut lo, mut hi) = (start, end);
    while hi - lo > block {
        let mid = lo + (hi - lo) / 2;
        // The first record starting at `mid` or after (a newline precedes it).
        let (mut at, mut n, mut nl) = (mid - 1, 0, None);
        while nl.is_none() && at < hi {
            n = file.read_at(&mut buf, at).ok()?;
            nl = find_byte(b'\n', &buf[..n]);
            if n == 0 {
                return None;
            }
            at += nl.map_or(n, |k| k + 1) as u64;
        }
        let Some(nl) = nl.filter(|_| at < hi) else {
            // No record starts in [mid, hi): every one from `mid` on is `wanted` or later.
            hi = mid;
            continue;
        };
        // The record's name, whole (followed by its tab): read again from its start when
        // the block cut it.
        let complete = |r: &[u8]| r.len() > 2 + tool_key(r).len();
        let mut from = nl + 1;
        if !complete(&buf[from..n]) {
            let n = file.read_at(&mut buf, at).ok()?;
            from = 0;
            if !complete(&buf[..n]) {
                return None;
            }
        }
        let name = tool_key(&buf[from..]);
        if name < wanted {
            lo = at;
        } else {
            hi = at;
        }
    }
    // The records from `lo`: the first named `wanted` or later is at most `hi`; read on
    // until a record after it shows it is the only one.
    let mut chunk = vec![0; usize::try_from(hi - lo).ok()? + 2 * BLOCK];
    let n = file.read_at(&mut chunk, lo).ok()?;
    let at_end = lo + n as u64 >= end;
    let chunk = &chunk[..n];
    let mut found = None;
    let mut records = chunk.split_inclusive(|&b| b == b'\n');
    for record in records.by_ref() {
        let record = record.strip_suffix(b"\n")?;
        match tool_key(record).cmp(wanted) {
            std::cmp::Ordering::Less => continue,
            std::cmp::Ordering::Equal if found.is_none() => found = Some(record.to_vec()),
            std::cmp::Ordering::Equal => return None,
            std::cmp::Ordering::Greater => return found,
        }
    }
    // Ran out of records: the answer holds only if the file ended here too.
    if at_end { found } else { None }
}

/// An identity as a field: its word, or `-` when it is not to be trusted.
fn word(id: Option<&Identity>) -> String {
    id.map_or_else(|| "-".to_owned(), Identity::to_word)
}

/// A field [`word`] wrote: Some(None) for `-`, None when it is neither.
fn parse_word(field: &[u8]) -> Option<Option<Identity>> {
    match field {
        b"-" => Some(None),
        _ => Identity::from_word(std::str::from_utf8(field).ok()?).map(Some),
    }
}

/// One record: its fields, then a path, tab-separated.
fn line(out: &mut Vec<u8>, fields: &[&str], path: &Path) {
    for f in fields {
        out.extend_from_slice(f.as_bytes());
        out.push(b'\t');
    }
    escape(path.as_os_str().as_bytes(), out);
    out.push(b'\n');
}

/// Any bytes as a field: backslash, tab and newline escaped.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
}

/// The path [`escape`] wrote; None for a field it cannot have written.
fn unescape(field: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(field.len());
    let mut bytes = field.iter();
    while let Some(&b) = bytes.next() {
        out.push(match (b, b == b'\\') {
            (_, false) => b,
            (_, true) => match bytes.next()? {
                b'\\' => b'\\',
                b't' => b'\t',
                b'n' => b'\n',
                _ => return None,
            },
        });
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_index_is_a_miss_never_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DescribeCache::new(dir.path().join("cache"));
        let index = NameIndex::new(&cache);
        let dirs = [dir.path().join("packs")];
        index.write(&dirs, &[DirRecord { missing: true, ..DirRecord::default() }]);
        let file = std::fs::read_dir(cache.dir()).unwrap().next().unwrap().unwrap().path();
        for body in ["99999999999\n", "18446744073709551615\n", "5\nT\tx\t0\tm\t-\t/x\n", "0\n\n\n", "x\n", ""] {
            std::fs::write(&file, format!("{}{body}", header())).unwrap();
            assert!(index.lookup(&dirs, "x").is_none(), "{body:?}");
        }
    }

    #[test]
    fn any_path_survives_escaping() {
        for raw in [&b"plain/a.tool.json"[..], b"tab\there", b"new\nline\\back", b"\xff\xfe bytes", b"\\t"] {
            let mut out = Vec::new();
            escape(raw, &mut out);
            assert!(!out.contains(&b'\t') && !out.contains(&b'\n'));
            assert_eq!(unescape(&out).unwrap().as_os_str().as_bytes(), raw);
        }
        assert_eq!(unescape(b"bad\\x"), None);
        assert_eq!(unescape(b"trailing\\"), None);
    }

    /// `find` against a linear search, over sections of many sizes, with a name
    /// recorded twice and paths long enough that records straddle the blocks.
    #[test]
    fn bisection_finds_exactly_what_a_scan_finds() {
        use std::io::Write;
        for count in [0usize, 1, 2, 7, 100, 3_000, 20_000] {
            let mut names: Vec<String> =
                (0..count).map(|i| format!("tool_{:x}", i.wrapping_mul(2_654_435_761) % 1_000_003)).collect();
            if count > 2 {
                names.push(names[count / 2].clone());
            }
            let mut records: Vec<Vec<u8>> = names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let path = format!("/p/{}/{n}.tool.json", "d".repeat(if i % 97 == 0 { 9_000 } else { i % 40 }));
                    let mut r = format!("T\t{n}\t").into_bytes();
                    line(&mut r, &["0", "m", "-"], Path::new(&path));
                    r
                })
                .collect();
            records.sort_by(|a, b| tool_key(a).cmp(tool_key(b)).then_with(|| a.cmp(b)));
            let mut file = tempfile::tempfile().unwrap();
            let prefix = b"header line\n";
            file.write_all(prefix).unwrap();
            for r in &records {
                file.write_all(r).unwrap();
            }
            let end = file.metadata().unwrap().len();
            let mut probes: Vec<String> = names.iter().step_by(1 + count / 200).cloned().collect();
            probes.extend(["", "a", "tool_", "tool_zzzz", "\u{ff}"].map(String::from));
            for probe in probes {
                let matching: Vec<&Vec<u8>> = records.iter().filter(|r| tool_key(r) == probe.as_bytes()).collect();
                let expected = match matching.as_slice() {
                    [one] => Some(one.strip_suffix(b"\n").unwrap().to_vec()),
                    _ => None,
                };
                let got = find(&file, prefix.len() as u64, end, probe.as_bytes());
                // A record too long for a block may make `find` give up (a full load), never err.
                assert!(
                    got == expected || (got.is_none() && matching.iter().any(|r| r.len() > BLOCK)),
                    "{count}: {probe}: {:?} {:?}",
                    got.map(|g| g.len()),
                    expected.map(|e| e.len())
                );
            }
        }
    }
}
