//! Discovery: the files of a pack directory, read and turned into tools.
//!
//! Manifests anywhere below a directory (in path order), executables at its top
//! level; hidden entries skipped. A broken file becomes a diagnostic, never a gap in
//! the rest; a script at the top level that is not executable is named in a warning.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::code::Code;
use crate::describe;
use crate::describe_cache::{DescribeCache, Identity};
use crate::manifest;
use crate::runner::is_executable_file;
use crate::source::{Diagnostic, Severity, Syntax};
use crate::tool::Tool;

use super::index::{self, DirRecord, Kind};

fn is_hidden(name: &OsStr) -> bool {
    name.to_str().is_some_and(|n| n.starts_with('.'))
}

/// The files of one pack directory: manifests anywhere below it (in path order),
/// executables at its top level; hidden entries skipped.
pub(crate) struct Discovered {
    pub(crate) manifests: Vec<PathBuf>,
    pub(crate) executables: Vec<PathBuf>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// `*.json` and `*.toml` files that are not named as manifests (not read: see
    /// [`misnamed_manifest`]).
    pub(crate) lookalikes: Vec<PathBuf>,
    /// Every directory entered (the pack directory first), with its identity before
    /// it was read; None when that was still settling.
    pub(crate) entered: Vec<(PathBuf, Option<Identity>)>,
}

/// The entries of the pack directory `dir` in path order, as discovery reads them: hidden
/// entries skipped, links followed, each real directory entered once (`entered` is given
/// its path and metadata before it is read). Links make a directory graph, and a graph
/// without a cycle can still hold exponentially many paths.
pub(crate) fn walk<'a>(
    dir: &Path,
    mut entered: impl FnMut(&Path, &std::fs::Metadata) + 'a,
) -> impl Iterator<Item = walkdir::Result<walkdir::DirEntry>> + 'a {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    walkdir::WalkDir::new(dir).follow_links(true).sort_by_file_name().into_iter().filter_entry(move |e| {
        if e.depth() > 0 && is_hidden(e.file_name()) {
            return false;
        }
        if !e.file_type().is_dir() {
            return true;
        }
        // `metadata` follows links (follow_links is on): the directory itself.
        e.metadata().map_or(true, |m| {
            let first = seen.insert((m.dev(), m.ino()));
            if first {
                entered(e.path(), &m);
            }
            first
        })
    })
}

pub(crate) fn discover(dir: &Path) -> Discovered {
    let mut found = Discovered {
        manifests: Vec::new(),
        executables: Vec::new(),
        diagnostics: Vec::new(),
        lookalikes: Vec::new(),
        entered: Vec::new(),
    };
    let entered = &mut found.entered;
    let walk = walk(dir, |path, m| entered.push((path.to_owned(), index::settled(Identity::of_metadata(m)))));
    for entry in walk {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e.path().unwrap_or(dir).to_owned();
                found.diagnostics.push(Diagnostic::file(Severity::Warning, Code::Unreadable, &path, e.to_string()));
                continue;
            }
        };
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.into_path();
        if Syntax::of_manifest(&path).is_some() {
            found.manifests.push(path);
        } else if path.extension().is_some_and(|e| e == "json" || e == "toml") {
            found.lookalikes.push(path);
        } else if path.parent() == Some(dir) {
            if is_executable_file(&path) {
                found.executables.push(path);
            } else if starts_with_shebang(&path) {
                let message = "starts with `#!` but is not executable, so it is not a tool; make it executable (`chmod +x`) to offer it";
                found.diagnostics.push(Diagnostic::file(Severity::Warning, Code::NotExecutable, &path, message));
            }
        }
    }
    found
}

/// The most bytes a file may have to be taken for a misnamed manifest: manifests are small,
/// and data files beside them (fixtures, caches) are not read through on every load.
const LOOKALIKE_MAX_BYTES: u64 = 64 * 1024;

/// The `misnamed-manifest` warning for `path` (a `*.json` or `*.toml` file not named as a
/// manifest), when it looks like one: at most [`LOOKALIKE_MAX_BYTES`], it parses, and is a
/// table with `name` and `command` (an executable's describe answer, with `name`,
/// `description` and `parameters` but no `command`, is not one). packs reads only
/// `*.tool.json` and `*.tool.toml`, so such a file would be ignored without a word.
pub(crate) fn misnamed_manifest(path: &Path) -> Option<Diagnostic> {
    use std::io::Read;
    let file_name = path.file_name()?.to_str()?;
    let (stem, ext) = file_name.rsplit_once('.')?;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() || file.metadata().ok()?.len() > LOOKALIKE_MAX_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(LOOKALIKE_MAX_BYTES).read_to_string(&mut text).ok()?;
    let value: serde_json::Value = match ext {
        "json" => serde_json::from_str(&text).ok()?,
        "toml" => toml::from_str(&text).ok()?,
        _ => return None,
    };
    let table = value.as_object()?;
    let has = |k: &str| table.contains_key(k);
    if !(has("name") && has("command")) {
        return None;
    }
    let renamed = format!("{stem}.tool.{ext}");
    let message = "this looks like a tool manifest, but packs loads only files named *.tool.json or *.tool.toml, so it is not loaded";
    Some(
        Diagnostic::file(Severity::Warning, Code::MisnamedManifest, path, message)
            .with_help(format!("rename {file_name} to {renamed}")),
    )
}

/// Whether a file's first bytes are `#!`: a script meant to run (a README or a data
/// file at the top of a pack directory is not one, and stays unmentioned).
fn starts_with_shebang(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head == *b"#!"
}

/// Load one directory: the tools, the problems, and (with `only`) the manifests
/// that were skipped because they do not declare `only`.
///
/// With `record`, every manifest's name is read (not only the ones that may be
/// `only`) and what the name index needs is recorded there.
pub(super) fn load_dir(
    dir: &Path,
    only: Option<&str>,
    cache: Option<&DescribeCache>,
    mut record: Option<&mut DirRecord>,
) -> (Vec<Tool>, Vec<Diagnostic>, Vec<PathBuf>) {
    let Discovered { mut manifests, executables, mut diagnostics, lookalikes, entered } = discover(dir);
    // A manifest saved without the `.tool.` infix is named, not silently passed over (by
    // listings and lint; a call looking up one name does not read the data files around).
    if only.is_none() {
        diagnostics.extend(lookalikes.iter().filter_map(|p| misnamed_manifest(p)));
    }
    let mut skipped = Vec::new();
    if let Some(name) = only {
        // Sequential: for a hundred files, starting threads costs more than it saves.
        let mut buf = Vec::new();
        (manifests, skipped) = match record.as_deref_mut() {
            None => manifests.into_iter().partition(|p| may_declare(p, name, &mut buf)),
            Some(record) => manifests.into_iter().partition(|p| {
                let (id, declared) = read_name(p, &mut buf);
                let wanted = declared.as_deref().is_none_or(|d| d == name);
                match declared {
                    Some(declared) => record.tools.push((declared, Kind::Manifest, p.clone(), id)),
                    None => record.unnamed.push(p.clone()),
                }
                wanted
            }),
        };
    }
    let identities: Vec<Option<Identity>> = match record {
        Some(_) => executables.iter().map(|p| Identity::of(p).and_then(index::settled)).collect(),
        None => Vec::new(),
    };
    let mut tools = Vec::with_capacity(manifests.len() + executables.len());
    for loaded in load_manifests(&manifests) {
        match loaded {
            Ok((tool, warnings)) => {
                diagnostics.extend(warnings);
                tools.push(tool);
            }
            Err(errors) => diagnostics.extend(errors),
        }
    }
    for (i, result) in describe_all(&executables, cache).into_iter().enumerate() {
        match result {
            Ok((tool, warnings)) => {
                if let Some(record) = record.as_deref_mut() {
                    let id = identities.get(i).cloned().flatten();
                    record.tools.push((tool.name().to_owned(), Kind::Executable, executables[i].clone(), id));
                }
                diagnostics.extend(warnings);
                tools.push(tool);
            }
            Err(d) => diagnostics.push(d),
        }
    }
    if let Some(record) = record {
        record.entered = entered;
    }
    (tools, diagnostics, skipped)
}

/// The identity of the manifest at `path` before it was read (None: unreadable or
/// settling) and the name it declares (None: unreadable or unparsable).
fn read_name(path: &Path, buf: &mut Vec<u8>) -> (Option<Identity>, Option<String>) {
    use std::io::Read;
    buf.clear();
    let Ok(mut file) = std::fs::File::open(path) else { return (None, None) };
    let id = file.metadata().ok().map(|m| Identity::of_metadata(&m)).and_then(index::settled);
    if file.read_to_end(buf).is_err() {
        return (None, None);
    }
    (id, parse_name(path, buf))
}

/// Whether the manifest at `path` may declare the tool `name`: false only when it
/// certainly does not. It is read (into `buf`, reused) but parsed only when the
/// bytes of `name` appear in it, or an escape (`\u`, `\U`) might spell them.
/// An unreadable or unparsable file may: loading it fully reports what is wrong.
fn may_declare(path: &Path, name: &str, buf: &mut Vec<u8>) -> bool {
    if read_into(path, buf).is_err() {
        return true;
    }
    let spelled = |needle: &[u8]| memchr::memmem::find(buf, needle).is_some();
    if !spelled(name.as_bytes()) && !spelled(b"\\u") && !spelled(b"\\U") {
        return false;
    }
    parse_name(path, buf).is_none_or(|n| n == name)
}

/// Reads the whole file into `buf`, reusing its capacity (and skipping the
/// `stat` that sizing a fresh buffer would cost).
fn read_into(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    buf.clear();
    // Manifests are small: most are read with one call, plus the one that sees EOF.
    buf.reserve(64 * 1024);
    std::fs::File::open(path)?.take(u64::MAX).read_to_end(buf).map(drop)
}

/// The `name` a manifest declares; None when it cannot be read or parsed.
pub(super) fn quick_name(path: &Path, buf: &mut Vec<u8>) -> Option<String> {
    read_into(path, buf).ok()?;
    parse_name(path, buf)
}

/// The `name` in a manifest's text, parsing nothing else.
fn parse_name(path: &Path, bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct NameOnly {
        name: String,
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let body = if text.starts_with("#!") { text.find('\n').map_or("", |i| &text[i..]) } else { text };
    let parsed: NameOnly = match Syntax::of_manifest(path)? {
        Syntax::Json => serde_json::from_str(body).ok()?,
        Syntax::Toml => toml::from_str(body).ok()?,
    };
    Some(parsed.name)
}

type Loaded = Result<(Tool, Vec<Diagnostic>), Vec<Diagnostic>>;

/// Load manifests in order, spread over the machine's cores when there are many.
fn load_manifests(paths: &[PathBuf]) -> Vec<Loaded> {
    let load = |p: &PathBuf| manifest::load(p).and_then(Tool::from_manifest);
    parallel_map(paths, load)
        .into_iter()
        .zip(paths)
        .map(|(r, p)| {
            r.unwrap_or_else(|| {
                Err(vec![Diagnostic::file(Severity::Error, Code::Internal, p, "loading failed unexpectedly")])
            })
        })
        .collect()
}

/// Work started on a thread of a scope, or done on this one because no thread could
/// be started (a process or cgroup limit): loading never fails for want of threads.
enum Job<'s, R> {
    Thread(std::thread::ScopedJoinHandle<'s, R>),
    Done(R),
}

impl<'s, R: Send + 's> Job<'s, R> {
    fn start<'e>(scope: &'s std::thread::Scope<'s, 'e>, work: impl FnOnce() -> R + Send + Copy + 's) -> Self {
        match std::thread::Builder::new().spawn_scoped(scope, work) {
            Ok(handle) => Self::Thread(handle),
            Err(_) => Self::Done(work()),
        }
    }

    /// The result; `None` when the thread panicked.
    fn finish(self) -> Option<R> {
        match self {
            Self::Thread(handle) => handle.join().ok(),
            Self::Done(result) => Some(result),
        }
    }
}

/// `f` over `items` in order, on all cores when there are 64 items or more;
/// `None` for an item whose `f` panicked (the others are all there). Threads take the
/// next few items as they finish (not a fixed share each), so one slow thread or file
/// does not leave the others idle.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<Option<R>> {
    /// Items a thread takes at once: few enough to even out, enough to keep the counter cool.
    const BATCH: usize = 8;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    // A panic is this item's alone (the hook has printed it): `f` shares nothing mutable.
    let f = |item: &T| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item))).ok();
    if threads < 2 || items.len() < 64 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let start = next.fetch_add(BATCH, std::sync::atomic::Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + BATCH).min(items.len());
            done.extend(items[start..end].iter().enumerate().map(|(k, item)| (start + k, f(item))));
        }
    };
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|s| {
        let jobs: Vec<_> = (0..threads).map(|_| Job::start(s, &work)).collect();
        for (i, r) in jobs.into_iter().filter_map(Job::finish).flatten() {
            results[i] = r;
        }
    });
    results
}

/// Most executables asked for `--describe` at once: each waits on a process.
const DESCRIBE_WORKERS: usize = 16;

type Described = Result<(Tool, Vec<Diagnostic>), Diagnostic>;

/// Describe every executable, in order: answers the describe cache holds are read on
/// this thread; only the others are asked, on at most [`DESCRIBE_WORKERS`] threads that
/// take the next executable as they finish one (or on this thread when none can start).
fn describe_all(paths: &[PathBuf], cache: Option<&DescribeCache>) -> Vec<Described> {
    let mut results: Vec<Option<Described>> = paths
        .iter()
        .map(|p| {
            let (d, unknown) = describe::cached(p, cache)?;
            Some(tool_of(p, d, unknown))
        })
        .collect();
    let misses: Vec<usize> = (0..paths.len()).filter(|&i| results[i].is_none()).collect();
    if !misses.is_empty() {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || {
            let mut done = Vec::new();
            loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&i) = misses.get(k) else { return done };
                done.push((i, describe_executable(&paths[i], cache)));
            }
        };
        let found: Vec<(usize, Described)> = std::thread::scope(|s| {
            let workers = misses.len().min(DESCRIBE_WORKERS);
            let jobs: Vec<_> = (0..workers).map(|_| Job::start(s, &work)).collect();
            // A worker that panicked leaves its executable unanswered: reported below.
            jobs.into_iter().filter_map(Job::finish).flatten().collect()
        });
        for (i, r) in found {
            results[i] = Some(r);
        }
    }
    results
        .into_iter()
        .zip(paths)
        .map(|(r, p)| {
            r.unwrap_or_else(|| {
                Err(Diagnostic::file(Severity::Warning, Code::BadDescribe, p, "describing it failed unexpectedly"))
            })
        })
        .collect()
}

fn skipped(path: &Path, why: String) -> Diagnostic {
    Diagnostic::file(Severity::Warning, Code::BadDescribe, path, format!("skipped executable: {why}"))
}

/// Ask one executable for its describe JSON (or take the answer `cache` kept for
/// this very file) and build the tool, with warnings for unknown keys.
pub(crate) fn describe_executable(
    path: &Path,
    cache: Option<&DescribeCache>,
) -> Result<(Tool, Vec<Diagnostic>), Diagnostic> {
    let (d, unknown) = describe::ask(path, cache).map_err(|why| skipped(path, why))?;
    tool_of(path, d, unknown)
}

/// The tool of an executable's describe, with a warning per unknown key.
fn tool_of(path: &Path, d: describe::Describe, unknown: Vec<String>) -> Described {
    let tool = Tool::from_executable(path.to_owned(), d).map_err(|why| skipped(path, why))?;
    let warnings = unknown
        .into_iter()
        .map(|key| {
            Diagnostic::file(
                Severity::Warning,
                Code::UnknownKey,
                path,
                format!("its --describe output has an unknown key `{key}`; it is ignored"),
            )
        })
        .collect();
    Ok((tool, warnings))
}

#[cfg(test)]
mod tests {
    use super::parallel_map;

    #[test]
    fn parallel_map_keeps_order_and_loses_only_a_panicking_item() {
        let items: Vec<usize> = (0..1000).collect();
        let doubled = parallel_map(&items, |i| i * 2);
        assert_eq!(doubled, items.iter().map(|i| Some(i * 2)).collect::<Vec<_>>());
        // Short lists stay on this thread.
        assert_eq!(parallel_map(&items[..3], |i| i + 1), vec![Some(1), Some(2), Some(3)]);
        // Items panic, on the worker threads and on this one: each is None, every other
        // item is there and in place.
        for n in [1000, 3] {
            let results = parallel_map(&items[..n], |&i| if i % 500 == 1 { panic!("item {i}") } else { i });
            let expected: Vec<Option<usize>> = (0..n).map(|i| (i % 500 != 1).then_some(i)).collect();
            assert_eq!(results, expected);
        }
    }
}
