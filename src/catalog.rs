//! Discovery over pack directories, precedence, and lookup (default-deny).
//!
//! A pack directory holds manifests anywhere below it and executables at its
//! top level; hidden entries are skipped. Directories are searched in order: an
//! earlier one shadows a later one's tool of the same name, like `PATH`. A
//! broken file is reported and skipped; the rest of the catalog loads.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::describe;
use crate::describe_cache::{DescribeCache, Identity};
use crate::manifest;
use crate::runner::{self, Invocation};
use crate::source::{Diagnostic, Severity, Syntax};
use crate::tool::Tool;

/// How long an executable may take to answer `--describe`.
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of `--describe` output read.
const DESCRIBE_MAX_BYTES: u64 = 1024 * 1024;

/// The pack directories to search, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    /// Directories, earliest first.
    pub dirs: Vec<PathBuf>,
    /// True when none was given (the `./packs` fallback), so a missing one is not worth a warning.
    pub implicit: bool,
    /// Where executables' `--describe` answers are cached (none: ask them every time).
    pub describe_cache: Option<DescribeCache>,
}

impl SearchPath {
    /// `--packs` directories if any, else `PACKS_PATH` (colon-separated), else `./packs`.
    pub fn resolve(explicit: &[PathBuf], packs_path: Option<&OsStr>) -> Self {
        if !explicit.is_empty() {
            return Self::dirs(explicit.iter().cloned());
        }
        if let Some(var) = packs_path {
            let dirs: Vec<PathBuf> = std::env::split_paths(var).filter(|p| !p.as_os_str().is_empty()).collect();
            if !dirs.is_empty() {
                return Self::dirs(dirs);
            }
        }
        Self { implicit: true, ..Self::dirs(["packs"]) }
    }

    /// Exactly these directories.
    pub fn dirs(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        Self { dirs: dirs.into_iter().map(Into::into).collect(), implicit: false, describe_cache: None }
    }

    /// The same directories, caching executables' `--describe` answers in `cache`
    /// (see [`crate::describe_cache`]).
    pub fn with_describe_cache(self, cache: Option<DescribeCache>) -> Self {
        Self { describe_cache: cache, ..self }
    }
}

/// Why a name does not resolve to one tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// No cataloged tool has this name.
    #[error("no tool named `{name}`{}", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    NotFound {
        /// The name asked for.
        name: String,
        /// A close name, if there is one.
        suggestion: Option<String>,
    },
    /// Two files in one directory declare this name.
    #[error("tool `{name}` is declared twice in one pack directory: {} and {}", first.display(), second.display())]
    Ambiguous {
        /// The name.
        name: String,
        /// One file.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
}

/// A tool that lost to one of the same name in an earlier directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The name.
    pub name: String,
    /// The file that is used.
    pub winner: PathBuf,
    /// The file that is hidden.
    pub hidden: PathBuf,
}

enum Entry {
    Tool(Arc<Tool>),
    Ambiguous(PathBuf, PathBuf),
}

/// All tools found on a search path.
#[derive(Default)]
pub struct Catalog {
    entries: Vec<(String, Entry)>,
    index: HashMap<String, usize>,
    /// Problems found while loading (broken files are errors; the rest loaded).
    pub diagnostics: Vec<Diagnostic>,
    /// Tools hidden by an earlier directory's tool of the same name.
    pub shadowed: Vec<Shadowed>,
    /// Manifests not loaded by [`Catalog::load_named`]: their names are read
    /// again only to suggest one when the tool is not found.
    skipped: Vec<PathBuf>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("tools", &self.index.keys().collect::<Vec<_>>()).finish()
    }
}

impl Catalog {
    /// Discover every tool on `path`.
    pub fn load(path: &SearchPath) -> Self {
        Self::load_filtered(path, None)
    }

    /// Discover enough of `path` to resolve `name`, the same way [`Catalog::load`] would.
    ///
    /// Every manifest is read, but only its `name` is parsed; the manifests that
    /// declare `name` (and any whose name cannot be read, so their errors are
    /// reported) are loaded fully, and directories after the one that has the tool
    /// are skipped. Executables are always described: their names are not in a file.
    /// `packs run`, `describe` and `help` use this to start fast in large pack directories.
    pub fn load_named(path: &SearchPath, name: &str) -> Self {
        Self::load_filtered(path, Some(name))
    }

    fn load_filtered(path: &SearchPath, only: Option<&str>) -> Self {
        let mut catalog = Self::default();
        for dir in &path.dirs {
            if only.is_some_and(|n| catalog.index.contains_key(n)) {
                break;
            }
            if !dir.is_dir() {
                if !path.implicit {
                    catalog.diagnostics.push(Diagnostic::file(
                        Severity::Warning,
                        "missing-pack-dir",
                        dir,
                        "pack directory does not exist or is not a directory",
                    ));
                }
                continue;
            }
            let (tools, diagnostics, skipped) = load_dir(dir, only, path.describe_cache.as_ref());
            catalog.diagnostics.extend(diagnostics);
            catalog.skipped.extend(skipped);
            catalog.add_dir(tools);
        }
        catalog
    }

    /// Load one manifest file as a tool, whatever its name (`packs exec`).
    ///
    /// The file is never run: `packs exec` on a copy of an executable manifest
    /// named without its `.tool.*` suffix must not end up executing itself.
    pub fn load_file(path: &Path) -> Result<(Tool, Vec<Diagnostic>), Vec<Diagnostic>> {
        Tool::from_manifest(manifest::load(path)?)
    }

    fn add_dir(&mut self, tools: Vec<Tool>) {
        let mut here: HashMap<String, usize> = HashMap::new();
        for tool in tools {
            let name = tool.name().to_owned();
            if let Some(&i) = here.get(&name) {
                let first = match &self.entries[i].1 {
                    Entry::Tool(t) => t.source().to_owned(),
                    Entry::Ambiguous(a, _) => a.clone(),
                };
                self.diagnostics.push(Diagnostic::file(
                    Severity::Error,
                    "duplicate-name",
                    tool.source(),
                    format!("tool `{name}` is also declared in {}; neither is used", first.display()),
                ));
                self.entries[i].1 = Entry::Ambiguous(first, tool.source().to_owned());
            } else if let Some(&i) = self.index.get(&name) {
                let winner = match &self.entries[i].1 {
                    Entry::Tool(t) => t.source().to_owned(),
                    Entry::Ambiguous(a, _) => a.clone(),
                };
                self.shadowed.push(Shadowed { name, winner, hidden: tool.source().to_owned() });
            } else {
                self.index.insert(name.clone(), self.entries.len());
                here.insert(name.clone(), self.entries.len());
                self.entries.push((name, Entry::Tool(Arc::new(tool))));
            }
        }
    }

    /// The tool named `name`. Only cataloged tools resolve: a path is never a name.
    pub fn get(&self, name: &str) -> Result<&Tool, LookupError> {
        match self.index.get(name).map(|&i| &self.entries[i].1) {
            Some(Entry::Tool(t)) => Ok(t),
            Some(Entry::Ambiguous(a, b)) => {
                Err(LookupError::Ambiguous { name: name.to_owned(), first: a.clone(), second: b.clone() })
            }
            None => {
                let mut buf = Vec::new();
                let skipped: Vec<String> = self.skipped.iter().filter_map(|p| quick_name(p, &mut buf)).collect();
                let names: Vec<&str> = self.index.keys().chain(&skipped).map(String::as_str).collect();
                Err(LookupError::NotFound {
                    name: name.to_owned(),
                    suggestion: manifest::did_you_mean(name, &names).map(str::to_owned),
                })
            }
        }
    }

    /// Every usable tool, in search order (directory, then path).
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.entries.iter().filter_map(|(_, e)| match e {
            Entry::Tool(t) => Some(&**t),
            Entry::Ambiguous(..) => None,
        })
    }

    /// The tool named `name`, shared (a reloading server hands it to a running call).
    pub fn get_shared(&self, name: &str) -> Result<Arc<Tool>, LookupError> {
        self.get(name)?;
        match self.index.get(name).map(|&i| &self.entries[i].1) {
            Some(Entry::Tool(t)) => Ok(Arc::clone(t)),
            _ => Err(LookupError::NotFound { name: name.to_owned(), suggestion: None }),
        }
    }

    /// After reloading: every tool of `previous` whose file is now broken (an error
    /// diagnostic names it) and that this catalog lacks is kept in its last good version.
    /// Returns the names kept.
    pub fn keep_last_good(&mut self, previous: &Catalog) -> Vec<String> {
        let mut kept = Vec::new();
        for (name, entry) in &previous.entries {
            let Entry::Tool(tool) = entry else { continue };
            let broken = self.diagnostics.iter().any(|d| d.severity == Severity::Error && d.file == tool.source());
            if broken && !self.index.contains_key(name) {
                self.index.insert(name.clone(), self.entries.len());
                self.entries.push((name.clone(), Entry::Tool(Arc::clone(tool))));
                kept.push(name.clone());
            }
        }
        kept
    }

    /// How many usable tools there are.
    pub fn len(&self) -> usize {
        self.tools().count()
    }

    /// True when no tool loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }
}

fn is_hidden(name: &OsStr) -> bool {
    name.to_str().is_some_and(|n| n.starts_with('.'))
}

pub(crate) use crate::runner::is_executable_file;

/// Load one directory: manifests below it (in path order), executables at its top.
/// The files of one pack directory: manifests anywhere below it (in path order),
/// executables at its top level; hidden entries skipped.
pub(crate) struct Discovered {
    pub(crate) manifests: Vec<PathBuf>,
    pub(crate) executables: Vec<PathBuf>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

pub(crate) fn discover(dir: &Path) -> Discovered {
    let mut found = Discovered { manifests: Vec::new(), executables: Vec::new(), diagnostics: Vec::new() };
    let walk = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !is_hidden(e.file_name()));
    for entry in walk {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e.path().unwrap_or(dir).to_owned();
                found.diagnostics.push(Diagnostic::file(Severity::Warning, "unreadable", &path, e.to_string()));
                continue;
            }
        };
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.into_path();
        if Syntax::of_manifest(&path).is_some() {
            found.manifests.push(path);
        } else if path.parent() == Some(dir) && is_executable_file(&path) {
            found.executables.push(path);
        }
    }
    found
}

/// Load one directory: the tools, the problems, and (with `only`) the manifests
/// that were skipped because they do not declare `only`.
fn load_dir(
    dir: &Path,
    only: Option<&str>,
    cache: Option<&DescribeCache>,
) -> (Vec<Tool>, Vec<Diagnostic>, Vec<PathBuf>) {
    let Discovered { mut manifests, executables, mut diagnostics } = discover(dir);
    let mut skipped = Vec::new();
    if let Some(name) = only {
        // Sequential: for a hundred files, starting threads costs more than it saves.
        let mut buf = Vec::new();
        (manifests, skipped) = manifests.into_iter().partition(|p| may_declare(p, name, &mut buf));
    }
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
    for result in describe_all(&executables, cache) {
        match result {
            Ok((tool, warnings)) => {
                diagnostics.extend(warnings);
                tools.push(tool);
            }
            Err(d) => diagnostics.push(d),
        }
    }
    (tools, diagnostics, skipped)
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
fn quick_name(path: &Path, buf: &mut Vec<u8>) -> Option<String> {
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
                Err(vec![Diagnostic::file(Severity::Error, "internal", p, "loading failed unexpectedly")])
            })
        })
        .collect()
}

/// `f` over `items` in order, on all cores when there are 64 items or more;
/// `None` for the items of a thread that panicked.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<Option<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads < 2 || items.len() < 64 {
        return items.iter().map(|i| Some(f(i))).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(chunk).map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<_>>())).collect();
        handles
            .into_iter()
            .zip(items.chunks(chunk))
            .flat_map(|(h, c)| match h.join() {
                Ok(results) => results.into_iter().map(Some).collect::<Vec<_>>(),
                Err(_) => c.iter().map(|_| None).collect(),
            })
            .collect()
    })
}

/// Run `--describe` on every executable, in parallel.
fn describe_all(paths: &[PathBuf], cache: Option<&DescribeCache>) -> Vec<Result<(Tool, Vec<Diagnostic>), Diagnostic>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = paths.iter().map(|p| s.spawn(move || describe_executable(p, cache))).collect();
        handles
            .into_iter()
            .zip(paths)
            .map(|(h, p)| {
                h.join().unwrap_or_else(|_| {
                    Err(Diagnostic::file(Severity::Warning, "bad-describe", p, "describing it failed unexpectedly"))
                })
            })
            .collect()
    })
}

/// Environment variable counting how deeply `--describe` runs are nested, so an
/// executable that runs packs on its own directory cannot recurse without end.
const NESTING_VAR: &str = "PACKS_DESCRIBE_DEPTH";
const MAX_NESTING: u32 = 4;

/// Ask one executable for its describe JSON (or take the answer `cache` kept for
/// this very file) and build the tool.
pub(crate) fn describe_executable(
    path: &Path,
    cache: Option<&DescribeCache>,
) -> Result<(Tool, Vec<Diagnostic>), Diagnostic> {
    let identity = cache.and_then(|_| Identity::of(path));
    if let (Some(cache), Some(id)) = (cache, &identity)
        && let Some(text) = cache.get(path, id)
        && let Ok(found) = from_describe(path, text.as_bytes())
    {
        return Ok(found);
    }
    let skip = |why: String| skipped(path, why);
    let depth: u32 = std::env::var(NESTING_VAR).ok().and_then(|d| d.parse().ok()).unwrap_or(0);
    if depth >= MAX_NESTING {
        return Err(skip(format!(
            "`--describe` runs are nested {depth} deep (an executable that runs packs on itself?)"
        )));
    }
    let invocation = Invocation {
        argv: vec![path.to_string_lossy().into_owned(), "--describe".into()],
        env: crate::dispatch::minimal_env(&[], vec![(NESTING_VAR.to_owned(), (depth + 1).to_string())]),
        clear_env: true,
        cwd: None,
        timeout: DESCRIBE_TIMEOUT,
        max_output_bytes: DESCRIBE_MAX_BYTES,
    };
    let out = runner::run(&invocation).map_err(|e| skip(e.to_string()))?;
    if out.timed_out {
        return Err(skip(format!("`--describe` did not answer within {}s", DESCRIBE_TIMEOUT.as_secs())));
    }
    if out.exit_code != Some(0) {
        let code = out.exit_code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail = stderr.trim().lines().last().map(|l| format!(": {l}")).unwrap_or_default();
        return Err(skip(format!("`--describe` exited with {code}{tail}")));
    }
    if out.stdout_truncated {
        return Err(skip(format!("`--describe` printed more than {DESCRIBE_MAX_BYTES} bytes")));
    }
    let found = from_describe(path, &out.stdout)?;
    if let (Some(cache), Some(id), Ok(text)) = (cache, &identity, std::str::from_utf8(&out.stdout)) {
        cache.put(path, id, text);
    }
    Ok(found)
}

fn skipped(path: &Path, why: String) -> Diagnostic {
    Diagnostic::file(Severity::Warning, "bad-describe", path, format!("skipped executable: {why}"))
}

/// The tool an executable's describe output declares, with warnings for unknown keys.
fn from_describe(path: &Path, stdout: &[u8]) -> Result<(Tool, Vec<Diagnostic>), Diagnostic> {
    let skip = |why: String| skipped(path, why);
    let (d, unknown) = describe::parse_executable_describe(stdout).map_err(skip)?;
    let tool = Tool::from_executable(path.to_owned(), d).map_err(skip)?;
    let warnings = unknown
        .into_iter()
        .map(|key| {
            Diagnostic::file(
                Severity::Warning,
                "unknown-key",
                path,
                format!("its --describe output has an unknown key `{key}`; it is ignored"),
            )
        })
        .collect();
    Ok((tool, warnings))
}
