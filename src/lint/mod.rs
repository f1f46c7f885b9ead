//! `packs lint`: every problem in a pack directory as a located diagnostic with a
//! stable code (documented in docs/LINT.md).
//!
//! A manifest is checked in layers: syntax, the published JSON Schema
//! (`schemas/tool-pack.v1.json`), the manifest model, its templates, then the rule
//! families (one file each): parameters, templates, security, runtime.

pub use crate::code::{Code, UnknownCode};
mod agent;
mod parameters;
pub mod render;
mod runtime;
mod schema;
mod security;
mod templates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::argv::CommandTemplate;
use crate::catalog::{self, Claim, Precedence};
use crate::manifest::{self, Manifest};
use crate::source::{Diagnostic, FieldPath, Severity, SourceFile, Syntax, Target};

/// What `packs lint` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Make runtime warnings (program not on PATH) errors.
    pub strict: bool,
    /// `--packs`: the pack directories an agent directory's tools come from. Empty: the
    /// `packs` its `agent.toml` names, else `$PACKS_PATH`, else the default search path
    /// (`./packs`, the user's pack directories), as for the commands that act for it.
    pub packs: Vec<PathBuf>,
}

/// Everything lint found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Files checked (manifests and executables).
    pub files: usize,
    /// Tools that loaded.
    pub tools: usize,
    /// Every diagnostic, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// How many errors.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Error).count()
    }

    /// How many warnings.
    pub fn warnings(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Warning).count()
    }

    /// `checked 9 files (9 tools): 0 errors, 2 warnings`
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        format!(
            "checked {} ({}): {}, {}",
            plural(self.files, "file"),
            plural(self.tools, "tool"),
            plural(self.errors(), "error"),
            plural(self.warnings(), "warning")
        )
    }
}

/// Why lint could not run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LintError {
    /// A path given does not exist or cannot be read.
    #[error("cannot lint {}: {reason}", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
        /// Why it cannot be linted.
        reason: String,
    },
}

/// Lint pack directories and single files. Directories are treated as a search
/// path: an earlier one's tool shadows a later one's of the same name.
pub fn lint(paths: &[PathBuf], options: &Options) -> Result<Report, LintError> {
    let mut report = Report::default();
    let mut precedence = Precedence::default();
    let programs = ProgramCache::default();
    for path in paths {
        let meta =
            std::fs::metadata(path).map_err(|e| LintError::BadPath { path: path.clone(), reason: e.to_string() })?;
        // Agent Skills: a SKILL.md, a skill's directory, or an agent's directory (its
        // `context/*/SKILL.md`).
        let skills: Vec<PathBuf> = if meta.is_dir() && path.join("SKILL.md").is_file() {
            vec![path.join("SKILL.md")]
        } else if meta.is_dir() && (path.join("soul.md").is_file() || path.join("agent.toml").is_file()) {
            crate::prompt::context_modules(path)
                .into_iter()
                .filter_map(|m| match m {
                    crate::prompt::Module::Skill(p) => Some(p),
                    crate::prompt::Module::File(_) => None,
                })
                .collect()
        } else if path.file_name().is_some_and(|n| n == "SKILL.md") {
            vec![path.clone()]
        } else {
            Vec::new()
        };
        let is_agent = meta.is_dir() && (path.join("soul.md").is_file() || path.join("agent.toml").is_file());
        if !skills.is_empty() || is_agent {
            for skill in skills {
                report.files += 1;
                report.diagnostics.extend(lint_skill(&skill));
            }
            if is_agent && !path.join("SKILL.md").is_file() {
                report.diagnostics.extend(lint_agent(path, options)?);
            }
            continue;
        }
        let (manifests, executables, walk_diags) = if meta.is_dir() {
            let mut d = catalog::discover(path);
            d.diagnostics.extend(d.lookalikes.iter().filter_map(|p| catalog::misnamed_manifest(p)));
            (d.manifests, d.executables, d.diagnostics)
        } else if Syntax::of_manifest(path).is_some() {
            (vec![path.clone()], Vec::new(), Vec::new())
        } else if crate::runner::is_executable_file(path) {
            (Vec::new(), vec![path.clone()], Vec::new())
        } else {
            let mut reason = "not a pack directory, a *.tool.json / *.tool.toml manifest, or an executable".to_owned();
            if let Some(help) = catalog::misnamed_manifest(path).and_then(|d| d.help) {
                reason = format!("{reason} ({help})");
            }
            return Err(LintError::BadPath { path: path.clone(), reason });
        };
        report.diagnostics.extend(walk_diags);
        let mut named: Vec<(String, PathBuf)> = Vec::new();
        // Manifests are linted on all cores when there are many; results stay in file order.
        let linted = crate::catalog::parallel_map(&manifests, |file| lint_manifest(file, options, &programs));
        for (file, result) in manifests.iter().zip(linted) {
            report.files += 1;
            let (name, diags) = result.unwrap_or_else(|| {
                let message = "linting it failed unexpectedly (a bug in packs: please report it)";
                (None, vec![Diagnostic::file(Severity::Error, Code::Internal, file, message)])
            });
            report.diagnostics.extend(diags);
            if let Some(name) = name {
                report.tools += 1;
                named.push((name, file.clone()));
            }
        }
        for file in &executables {
            report.files += 1;
            let (name, diags) = lint_executable(file);
            report.diagnostics.extend(diags);
            if let Some(name) = name {
                report.tools += 1;
                named.push((name, file.clone()));
            }
        }
        for (name, file) in named {
            let diagnostic = match precedence.claim(&name, &file) {
                Claim::Won => continue,
                Claim::Duplicate { first } => {
                    (Severity::Error, Code::DuplicateName, catalog::duplicate_message(&name, first))
                }
                Claim::Shadowed { winner } => (
                    Severity::Warning,
                    Code::ShadowedName,
                    format!("tool `{name}` is shadowed by {}, found earlier on the search path", winner.display()),
                ),
            };
            report.diagnostics.push(name_diagnostic(&file, diagnostic.0, diagnostic.1, diagnostic.2));
        }
        precedence.end_dir();
    }
    Ok(report)
}

/// Check an agent's directory against the tools it is offered, from the pack directories
/// [`Options::packs`] says ([`unoffered-tool`](Code::UnofferedTool)).
fn lint_agent(dir: &Path, options: &Options) -> Result<Vec<Diagnostic>, LintError> {
    let bad = |reason: String| LintError::BadPath { path: dir.to_owned(), reason };
    // The directory's own name is its id: `agents/ID` as given, else (`.`, `..`) as resolved.
    let full = match dir.file_name() {
        Some(_) => dir.to_owned(),
        None => dir.canonicalize().map_err(|e| bad(e.to_string()))?,
    };
    let (Some(root), Some(id)) = (full.parent(), full.file_name().and_then(|n| n.to_str())) else {
        return Err(bad("not an agent's directory".into()));
    };
    let root = if root.as_os_str().is_empty() { Path::new(".") } else { root };
    let agent = crate::agent::Agent::load(root, id).map_err(|e| bad(e.to_string()))?;
    let dirs = if options.packs.is_empty() { agent.pack_dirs() } else { options.packs.clone() };
    let path = crate::catalog::SearchPath::resolve(&dirs, std::env::var_os("PACKS_PATH").as_deref());
    let catalog = crate::catalog::Catalog::load(&path);
    Ok(agent::unoffered_tools(&agent, &catalog))
}

/// Check a `SKILL.md` against the Agent Skills rules (its directory names it).
fn lint_skill(path: &Path) -> Vec<Diagnostic> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return vec![Diagnostic::file(Severity::Error, Code::Unreadable, path, format!("cannot read: {e}"))],
    };
    let at_line = |line: Option<usize>, message: String| {
        let mut d = Diagnostic::file(Severity::Error, Code::InvalidSkill, path, message);
        d.line = line;
        d.column = line.map(|_| 1);
        d
    };
    let skill = match crate::skill::parse(&text) {
        Ok(s) => s,
        Err(e) => return vec![at_line(e.line, e.message)],
    };
    let dir = path.parent().and_then(Path::file_name).and_then(|n| n.to_str());
    let frontmatter_end = skill.body_line.saturating_sub(1);
    crate::skill::problems(&skill.front, dir)
        .into_iter()
        .map(|(field, message)| {
            // The line that sets the field, within the frontmatter; else its opening line.
            let line = text
                .lines()
                .take(frontmatter_end)
                .position(|l| l.strip_prefix(field).is_some_and(|rest| rest.trim_start().starts_with(':')))
                .map_or(1, |i| i + 1);
            let mut d = at_line(Some(line), message);
            d.field = Some(field.to_owned());
            d
        })
        .collect()
}

/// A diagnostic at the `name` of a manifest (or the whole file for an executable).
fn name_diagnostic(file: &Path, severity: Severity, code: Code, message: String) -> Diagnostic {
    match Syntax::of_manifest(file)
        .and_then(|syntax| std::fs::read_to_string(file).ok().map(|t| SourceFile::new(file.to_owned(), t, syntax)))
    {
        Some(src) => Diagnostic::at(&src, severity, code, &FieldPath::dotted("name"), Target::Value, message),
        None => Diagnostic::file(severity, code, file, message),
    }
}

/// What rules see of one manifest.
pub(crate) struct Subject<'a> {
    pub(crate) m: &'a Manifest,
    pub(crate) src: &'a SourceFile,
    pub(crate) raw: &'a Value,
    pub(crate) command: Option<&'a CommandTemplate>,
}

impl Subject<'_> {
    pub(crate) fn diag(
        &self,
        severity: Severity,
        code: Code,
        path: &FieldPath,
        target: Target,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::at(self.src, severity, code, path, target, message)
    }
}

/// Lint one manifest file; returns its name when it loads as a tool.
fn lint_manifest(path: &Path, options: &Options, programs: &ProgramCache) -> (Option<String>, Vec<Diagnostic>) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return (
                None,
                vec![Diagnostic::file(Severity::Error, Code::Unreadable, path, format!("cannot read: {e}"))],
            );
        }
    };
    let syntax = Syntax::of_manifest(path).unwrap_or(Syntax::Json);
    let src = SourceFile::new(path.to_owned(), text, syntax);
    let raw = match schema::parse_value(&src) {
        Ok(v) => v,
        Err(d) => return (None, vec![d]),
    };
    let mut diags = schema::diagnostics(&src, &raw);
    // An unknown key refuses the file, as loading does, but the manifest beside it still
    // means something: the rules go on (a credential next to a typo is still found, and
    // kept out of every diagnostic).
    let unknown_key = diags.iter().any(|d| d.code == Code::UnknownKey);
    if diags.iter().any(|d| d.severity == Severity::Error && d.code != Code::UnknownKey) {
        return (None, diags);
    }
    // Unknown keys are reported from the schema, as the same errors.
    let (loaded, errors) = manifest::parse_checked(src, manifest::UnknownKeys::Skip);
    let mut loads = errors.is_empty() && !unknown_key;
    diags.extend(errors);
    let Some(loaded) = loaded else { return (None, diags) };
    let src = &loaded.source;
    diags.extend(loaded.warnings.iter().cloned());
    let m = &loaded.manifest;
    let params: Vec<&str> = m.parameters.keys().map(String::as_str).collect();
    let command = match CommandTemplate::compile(&m.command, &params) {
        Ok(c) => Some(c),
        Err(errs) => {
            for (field, e) in errs {
                let code = if e.message.contains("names no declared parameter") {
                    Code::UndeclaredPlaceholder
                } else if e.message.contains("unknown context key") {
                    Code::UnknownContextKey
                } else {
                    Code::InvalidTemplate
                };
                let offset = src
                    .locate_in_string(&field, e.offset)
                    .or_else(|| src.locate_nearest(&field, Target::Value).map(|r| r.start));
                let mut d = Diagnostic::file(Severity::Error, code, path, e.message).at_offset(src, offset);
                d.field = Some(field.to_string());
                diags.push(d);
            }
            None
        }
    };
    loads &= command.is_some();
    if let Some(c) = &command {
        let loader = crate::tool::loader_variables(m, c, src);
        loads &= loader.is_empty();
        diags.extend(loader);
        for (site, t) in c.templates() {
            if let Err(e) = t.check() {
                loads = false;
                diags.push(Subject { m, src, raw: &raw, command: None }.diag(
                    Severity::Error,
                    Code::InvalidTemplate,
                    &site.path(),
                    Target::Value,
                    e.message,
                ));
            }
        }
    }
    if let Some(text) = &m.output.template {
        let parsed = crate::template::Template::parse(text, crate::output::TEMPLATE_NAMES);
        if let Err(e) = parsed.and_then(|t| t.check()) {
            loads = false;
            let field = FieldPath::dotted("output.template");
            let offset = src.locate_in_string(&field, e.offset);
            let mut d =
                Diagnostic::file(Severity::Error, Code::InvalidTemplate, path, e.message).at_offset(src, offset);
            d.field = Some(field.to_string());
            diags.push(d);
        }
    }
    let subject = Subject { m, src, raw: &raw, command: command.as_ref() };
    let mut rules = Vec::new();
    parameters::check(&subject, &mut rules);
    templates::check(&subject, &mut rules);
    security::check(&subject, &mut rules);
    runtime::check(&subject, options, programs, &mut rules);
    allow(&subject, rules, &mut diags);
    for (i, item) in m.lint.review.iter().enumerate() {
        diags.push(
            subject
                .diag(
                    Severity::Warning,
                    Code::NeedsReview,
                    &FieldPath::dotted("lint.review").index(i),
                    Target::Value,
                    format!("to review: {item}"),
                )
                .with_help("remove the entry once a person has checked it"),
        );
    }
    redact_secrets(&subject, &mut diags);
    (loads.then(|| m.name.clone()), diags)
}

/// A credential written into the manifest is never repeated by another diagnostic (some
/// quote a template's text, in every output format): each text the `hardcoded-secret` rule
/// finds is masked wherever another diagnostic's message or help holds it.
fn redact_secrets(s: &Subject<'_>, diags: &mut [Diagnostic]) {
    let secrets: Vec<&str> =
        security::secrets(s).into_iter().map(|(_, text, _)| text).filter(|t| !t.is_empty()).collect();
    for d in diags.iter_mut().filter(|d| d.code != Code::HardcodedSecret) {
        for secret in &secrets {
            d.message = d.message.replace(secret, "***");
            if let Some(help) = &mut d.help {
                *help = help.replace(secret, "***");
            }
        }
    }
}

/// Keep the rule diagnostics the manifest's `lint.allow` does not silence, and report each
/// allowance that names no code (a typo) or silenced nothing. Only rule diagnostics can be
/// allowed: what stops a tool from loading is reported before the rules run.
fn allow(s: &Subject<'_>, rules: Vec<Diagnostic>, out: &mut Vec<Diagnostic>) {
    let base = FieldPath::dotted("lint.allow");
    let mut allowed: Vec<(Code, &str, bool)> = Vec::new();
    for name in s.m.lint.allow.keys() {
        match name.parse::<Code>() {
            Ok(code) => allowed.push((code, name.as_str(), false)),
            Err(e) => {
                out.push(s.diag(Severity::Warning, Code::UnknownKey, &base.key(name), Target::Key, e.to_string()))
            }
        }
    }
    for d in rules {
        match allowed.iter_mut().find(|(code, _, _)| *code == d.code) {
            Some((_, _, used)) => *used = true,
            None => out.push(d),
        }
    }
    for (code, name, _) in allowed.into_iter().filter(|(_, _, used)| !used) {
        out.push(
            s.diag(
                Severity::Warning,
                Code::UnusedAllowance,
                &base.key(name),
                Target::Key,
                format!("`{code}` is allowed, but this manifest has no `{code}` diagnostic to silence"),
            )
            .with_help("remove the allowance: it would hide a new problem of that kind without review"),
        );
    }
}

/// Lint an executable: its describe must answer and be valid.
fn lint_executable(path: &Path) -> (Option<String>, Vec<Diagnostic>) {
    match catalog::describe_executable(path, None) {
        Err(mut d) => {
            d.severity = Severity::Error;
            (None, vec![d])
        }
        Ok((tool, mut warnings)) => {
            if let Err(e) = jsonschema::meta::validate(&tool.describe().parameters) {
                warnings.push(Diagnostic::file(
                    Severity::Error,
                    Code::InvalidParametersSchema,
                    path,
                    format!("its --describe `parameters` is not a valid JSON Schema: {e}"),
                ));
            }
            (Some(tool.name().to_owned()), warnings)
        }
    }
}

/// Whether programs are on PATH, looked up once each (shared by the threads that lint).
#[derive(Default)]
pub(crate) struct ProgramCache {
    found: std::sync::Mutex<HashMap<String, bool>>,
}

impl ProgramCache {
    pub(crate) fn exists(&self, program: &str) -> bool {
        let known = self.found.lock().ok().and_then(|f| f.get(program).copied());
        if let Some(found) = known {
            return found;
        }
        let found = crate::runner::program_exists(program);
        if let Ok(mut f) = self.found.lock() {
            f.insert(program.to_owned(), found);
        }
        found
    }
}
