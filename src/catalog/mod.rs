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

use crate::code::Code;
use crate::describe_cache::DescribeCache;
use crate::manifest;
use crate::native::NativeTool;
use crate::source::{Diagnostic, Severity};
use crate::tool::{NativeToolError, Tool};

mod discovery;
mod index;
mod precedence;

pub(crate) use discovery::{describe_executable, discover, misnamed_manifest, parallel_map, walk};
use discovery::{load_dir, quick_name};
use index::{DirRecord, Kind, NameIndex, Plan};
pub(crate) use precedence::{Claim, Precedence, duplicate_message};

/// The pack directories to search, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    /// Directories, earliest first.
    pub dirs: Vec<PathBuf>,
    /// True when none was given (the `./packs` fallback), so a missing one is not worth a warning.
    pub implicit: bool,
    /// Where executables' `--describe` answers are cached (none: ask them every time).
    pub describe_cache: Option<DescribeCache>,
    /// Whether [`Catalog::load_named`] may keep and use a name index in the describe
    /// cache's directory (see [`SearchPath::with_name_index`]).
    pub name_index: bool,
}

impl SearchPath {
    /// `--packs` directories if any, else `PACKS_PATH` (colon-separated), else the default:
    /// `./packs`, then the user's pack directories ([`SearchPath::user_dirs`] of this
    /// process's environment).
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
        let user = Self::user_dirs(std::env::var_os("XDG_CONFIG_HOME").as_deref(), std::env::var_os("HOME").as_deref());
        Self { implicit: true, ..Self::dirs(std::iter::once(PathBuf::from("packs")).chain(user)) }
    }

    /// The user's configuration directory: `config_home` (`XDG_CONFIG_HOME`) when it is an
    /// absolute path, else `home/.config` (none without an absolute `home`).
    pub(crate) fn config_dir(config_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
        match config_home.map(Path::new).filter(|p| p.is_absolute()) {
            Some(dir) => Some(dir.to_owned()),
            None => home.map(Path::new).filter(|p| p.is_absolute()).map(|home| home.join(".config")),
        }
    }

    /// The user's pack directories, in precedence order: `CONFIG/packs/tools`, then each
    /// directory in `CONFIG/packs/tools.d/` in name order (hidden entries skipped), where
    /// CONFIG is `config_home` (`XDG_CONFIG_HOME`) when it is an absolute path, else
    /// `home/.config`. Only directories that exist are listed.
    pub fn user_dirs(config_home: Option<&OsStr>, home: Option<&OsStr>) -> Vec<PathBuf> {
        let Some(config) = Self::config_dir(config_home, home) else { return Vec::new() };
        let root = config.join("packs");
        let mut dirs: Vec<PathBuf> = std::iter::once(root.join("tools")).filter(|d| d.is_dir()).collect();
        let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("tools.d"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        more.sort();
        dirs.extend(more);
        dirs
    }

    /// Exactly these directories.
    pub fn dirs(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        Self {
            dirs: dirs.into_iter().map(Into::into).collect(),
            implicit: false,
            describe_cache: None,
            name_index: false,
        }
    }

    /// The same directories, caching executables' `--describe` answers in `cache`
    /// (see [`DescribeCache`]).
    pub fn with_describe_cache(self, cache: Option<DescribeCache>) -> Self {
        Self { describe_cache: cache, ..self }
    }

    /// The same directories; with `on` (and a describe cache), [`Catalog::load_named`]
    /// keeps an index of which file declares each name in the cache's directory, so that
    /// resolving one name reads one file instead of all of them. The index is used only
    /// while the directories and the tool's file are unchanged; it cannot see another
    /// file edited in place to declare the same name, so leave it off where a lock file
    /// or a review must see every file.
    pub fn with_name_index(self, on: bool) -> Self {
        Self { name_index: on, ..self }
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
    /// The tool exists but was withdrawn: `--locked` refused it, or its manifest awaits
    /// review (`lint.review`).
    #[error("tool `{name}` is {reason}")]
    Refused {
        /// The tool's name.
        name: String,
        /// Why (names what changed).
        reason: String,
    },
    /// Two files in one directory declare this name.
    #[error("tool `{name}` is declared twice in one pack directory: {} and {}", first.display(), second.display())]
    Ambiguous {
        /// The name both files declare.
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
    /// The name both tools declare.
    pub name: String,
    /// The file that is used.
    pub winner: PathBuf,
    /// The file that is hidden.
    pub hidden: PathBuf,
}

enum Entry {
    Tool(Arc<Tool>),
    Ambiguous(PathBuf, PathBuf),
    /// Withdrawn (the lock file refused it, or its manifest awaits review), with why.
    Refused(String),
}

/// All tools found on a search path.
#[derive(Default)]
pub struct Catalog {
    entries: Vec<(String, Entry)>,
    index: HashMap<String, usize>,
    precedence: Precedence,
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
        Self::load_filtered(path, None, None)
    }

    /// Discover enough of `path` to resolve `name`, the same way [`Catalog::load`] would.
    ///
    /// Every manifest is read, but only its `name` is parsed; the manifests that
    /// declare `name` (and any whose name cannot be read, so their errors are
    /// reported) are loaded fully, and directories after the one that has the tool
    /// are skipped. Executables are always described: their names are not in a file.
    /// `packs run`, `describe` and `help` use this to start fast in large pack directories.
    ///
    /// With a name index ([`SearchPath::with_name_index`]) that is current for `name`,
    /// only the tool's file is read (and any manifest whose name could not be read, so
    /// its errors are still reported); otherwise everything is read as above and the
    /// index rewritten.
    pub fn load_named(path: &SearchPath, name: &str) -> Self {
        let index = path.describe_cache.as_ref().filter(|_| path.name_index).map(NameIndex::new);
        let Some(index) = index else { return Self::load_filtered(path, Some(name), None) };
        if let Some(catalog) = index.lookup(&path.dirs, name).and_then(|plan| Self::load_planned(path, name, plan)) {
            return catalog;
        }
        let mut records = Vec::new();
        let catalog = Self::load_filtered(path, Some(name), Some(&mut records));
        index.write(&path.dirs, &records);
        catalog
    }

    /// With `records`, every directory is read (even after the one with `only`) and what
    /// the name index needs is recorded, a [`DirRecord`] per directory; only the
    /// directories up to the one with `only` add tools and diagnostics.
    fn load_filtered(path: &SearchPath, only: Option<&str>, mut records: Option<&mut Vec<DirRecord>>) -> Self {
        let mut catalog = Self::default();
        for dir in &path.dirs {
            let found = only.is_some_and(|n| catalog.index.contains_key(n));
            if found && records.is_none() {
                break;
            }
            if !dir.is_dir() {
                if let Some(records) = records.as_deref_mut() {
                    records.push(DirRecord { missing: true, ..DirRecord::default() });
                }
                if !found {
                    catalog.missing_dir(path, dir);
                }
                continue;
            }
            let mut record = records.is_some().then(DirRecord::default);
            let (tools, diagnostics, skipped) = load_dir(dir, only, path.describe_cache.as_ref(), record.as_mut());
            if let (Some(records), Some(record)) = (records.as_deref_mut(), record) {
                records.push(record);
            }
            if !found {
                catalog.diagnostics.extend(diagnostics);
                catalog.skipped.extend(skipped);
                catalog.add_dir(tools);
            }
        }
        catalog
    }

    /// The catalog [`Catalog::load_named`] would load, from the files `plan` names;
    /// None when what they hold now shows the index stale.
    fn load_planned(path: &SearchPath, name: &str, plan: Plan) -> Option<Self> {
        let mut catalog = Self::default();
        let last = plan.dirs.len().checked_sub(1)?;
        for (pos, (dir, unnamed)) in path.dirs.iter().zip(plan.dirs).enumerate() {
            let Some(unnamed) = unnamed else {
                catalog.missing_dir(path, dir);
                continue;
            };
            for file in unnamed {
                // A manifest whose name could not be read that now loads is a name the index lacks.
                catalog.diagnostics.extend(Self::load_file(&file).err()?);
            }
            let mut tools = Vec::new();
            if pos == last {
                let (tool, warnings) = match plan.kind {
                    Kind::Manifest => Self::load_file(&plan.file).ok()?,
                    Kind::Executable => describe_executable(&plan.file, path.describe_cache.as_ref()).ok()?,
                };
                if tool.name() != name {
                    return None;
                }
                catalog.diagnostics.extend(warnings);
                tools.push(tool);
            }
            catalog.add_dir(tools);
        }
        Some(catalog)
    }

    /// Note that the pack directory `dir` is missing (unless it is only the default's).
    fn missing_dir(&mut self, path: &SearchPath, dir: &Path) {
        if !path.implicit {
            self.diagnostics.push(Diagnostic::file(
                Severity::Warning,
                Code::MissingPackDir,
                dir,
                "pack directory does not exist or is not a directory",
            ));
        }
    }

    /// Load one manifest file as a tool, whatever its name (`packs exec`).
    ///
    /// The file is never run: `packs exec` on a copy of an executable manifest
    /// named without its `.tool.*` suffix must not end up executing itself.
    pub(crate) fn load_file(path: &Path) -> Result<(Tool, Vec<Diagnostic>), Vec<Diagnostic>> {
        Tool::from_manifest(manifest::load(path)?)
    }

    /// A catalog of exactly `tool` (`packs exec` runs a file through the pipeline with it).
    pub(crate) fn of_tool(tool: Tool) -> Self {
        let mut catalog = Self::default();
        catalog.add_dir(vec![tool]);
        catalog
    }

    /// Add a native tool. It goes through the same pipeline as the other kinds and is
    /// listed, exported and offered in prompts like them. It takes precedence over a
    /// pack directory's tool of the same name (recorded in [`Catalog::shadowed`]); two
    /// native tools of one name are an error.
    pub fn register(&mut self, tool: impl NativeTool + 'static) -> Result<(), NativeToolError> {
        self.register_shared(Arc::new(tool))
    }

    /// Like [`Catalog::register`], for a tool that is shared.
    pub fn register_shared(&mut self, tool: Arc<dyn NativeTool>) -> Result<(), NativeToolError> {
        let tool = Tool::from_native(tool)?;
        let name = tool.name().to_owned();
        let Some(&i) = self.index.get(&name) else {
            self.index.insert(name.clone(), self.entries.len());
            self.entries.push((name, Entry::Tool(Arc::new(tool))));
            return Ok(());
        };
        let hidden = match &self.entries[i].1 {
            Entry::Tool(t) if t.native().is_some() => return Err(NativeToolError::Duplicate(name)),
            Entry::Tool(t) => t.source().to_owned(),
            Entry::Ambiguous(a, _) => a.clone(),
            Entry::Refused(_) => PathBuf::new(),
        };
        self.shadowed.push(Shadowed { name, winner: tool.source().to_owned(), hidden });
        self.entries[i].1 = Entry::Tool(Arc::new(tool));
        Ok(())
    }

    fn add_dir(&mut self, tools: Vec<Tool>) {
        for tool in tools {
            let name = tool.name().to_owned();
            match self.precedence.claim(&name, tool.source()) {
                Claim::Won => {
                    // A manifest awaiting review holds its name, but is neither offered nor run.
                    let entry = match tool.awaiting_review() {
                        Some(why) => Entry::Refused(why),
                        None => Entry::Tool(Arc::new(tool)),
                    };
                    self.index.insert(name.clone(), self.entries.len());
                    self.entries.push((name, entry));
                }
                Claim::Duplicate { first } => {
                    let first = first.to_owned();
                    self.diagnostics.push(Diagnostic::file(
                        Severity::Error,
                        Code::DuplicateName,
                        tool.source(),
                        precedence::duplicate_message(&name, &first),
                    ));
                    if let Some(&i) = self.index.get(&name) {
                        self.entries[i].1 = Entry::Ambiguous(first, tool.source().to_owned());
                    }
                }
                Claim::Shadowed { winner } => {
                    let winner = winner.to_owned();
                    self.shadowed.push(Shadowed { name, winner, hidden: tool.source().to_owned() });
                }
            }
        }
        self.precedence.end_dir();
    }

    /// The tool named `name`. Only cataloged tools resolve: a path is never a name.
    pub fn get(&self, name: &str) -> Result<&Tool, LookupError> {
        match self.index.get(name).map(|&i| &self.entries[i].1) {
            Some(Entry::Tool(t)) => Ok(t),
            Some(Entry::Ambiguous(a, b)) => {
                Err(LookupError::Ambiguous { name: name.to_owned(), first: a.clone(), second: b.clone() })
            }
            Some(Entry::Refused(reason)) => Err(LookupError::Refused { name: name.to_owned(), reason: reason.clone() }),
            None => {
                let mut buf = Vec::new();
                let skipped: Vec<String> = self.skipped.iter().filter_map(|p| quick_name(p, &mut buf)).collect();
                let names: Vec<&str> = self.index.keys().chain(&skipped).map(String::as_str).collect();
                Err(LookupError::NotFound {
                    name: name.to_owned(),
                    suggestion: crate::names::did_you_mean(name, &names).map(str::to_owned),
                })
            }
        }
    }

    /// Whether the search found nothing at all: no tool, no broken or refused one, and no
    /// manifest passed over for another name.
    pub(crate) fn found_nothing(&self) -> bool {
        self.entries.is_empty() && self.skipped.is_empty() && self.diagnostics.is_empty()
    }

    /// Every usable tool, in search order (directory, then path).
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.entries.iter().filter_map(|(_, e)| match e {
            Entry::Tool(t) => Some(&**t),
            Entry::Ambiguous(..) | Entry::Refused(_) => None,
        })
    }

    /// The tools withdrawn by [`Catalog::refuse`], with why.
    pub(crate) fn refused(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().filter_map(|(name, e)| match e {
            Entry::Refused(reason) => Some((name.as_str(), reason.as_str())),
            _ => None,
        })
    }

    /// Withdraw the tool `name`: it is no longer listed, and a lookup of it fails with
    /// `reason` (`--locked` refusing a tool that changed).
    pub(crate) fn refuse(&mut self, name: &str, reason: String) {
        if let Some(&i) = self.index.get(name) {
            self.entries[i].1 = Entry::Refused(reason);
        }
    }

    /// After reloading: every tool of `previous` whose file is now broken (an error
    /// diagnostic names it) and that this catalog lacks is kept in its last good version.
    /// Returns the names kept.
    pub(crate) fn keep_last_good(&mut self, previous: &Catalog) -> Vec<String> {
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
