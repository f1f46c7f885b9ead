//! `packs lock`: pin the tools of pack directories in `packs.lock`, check them (`--check`),
//! re-pin one after review (`--update`), sign the lock (`--sign`); and `--locked`, which
//! the other subcommands use to refuse tools that drifted.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::print;
use crate::catalog::{Catalog, SearchPath};
use crate::code::Code;
use crate::lint::{Report, render};
use crate::lock::{self, Drift, LockFile};
use crate::source::{Diagnostic, FieldPath, Severity, SourceFile, Syntax, Target};

#[derive(clap::Args, Debug)]
pub(super) struct LockArgs {
    /// Pack directories to pin (default: the search path)
    dirs: Vec<PathBuf>,
    /// Compare the tools with the lock file instead of writing it; exit 1 on any drift
    #[arg(long, conflicts_with_all = ["update", "sign"])]
    check: bool,
    /// Re-pin only this tool (after reviewing it) and print what changed; repeatable
    #[arg(long, value_name = "NAME")]
    update: Vec<String>,
    /// Sign the lock file with this minisign secret key (writes LOCKFILE.minisig); an encrypted key's password is read from PACKS_SIGN_PASSWORD
    #[arg(long, value_name = "SECKEY")]
    sign: Option<PathBuf>,
    /// Output format of --check
    #[arg(long, default_value = "human", value_parser = super::choice(render::Format::ALL, render::Format::as_str, render::Format::help))]
    format: render::Format,
}

/// Exit codes of `packs lock`.
const CLEAN: i32 = 0;
const DRIFTED: i32 = 1;

/// Where the lock is, and the key its signature must verify with, if any.
pub(super) struct LockOptions<'a> {
    pub(super) lockfile: &'a Path,
    pub(super) verify: Option<&'a Path>,
}

/// Read the lock file for `--locked` (its signature checked first when a key is given).
pub(super) fn read_trusted(o: &LockOptions<'_>) -> Result<LockFile> {
    match o.locked().read() {
        Err(e @ lock::LockError::Unreadable { .. }) => {
            Err(anyhow::Error::new(e).context("--locked needs a lock file: write one with `packs lock`"))
        }
        other => Ok(other?),
    }
}

impl LockOptions<'_> {
    /// The same, owned, for `packs serve`.
    pub(super) fn locked(&self) -> lock::Locked {
        lock::Locked { lockfile: self.lockfile.to_owned(), verify: self.verify.map(Path::to_owned) }
    }
}

/// `--locked`: withdraw every tool of `catalog` the lock does not pin as it is, and say so.
pub(super) fn enforce(catalog: &mut Catalog, lock: &LockFile, quiet: bool) {
    for r in lock::enforce(catalog, lock) {
        if !quiet {
            eprintln!("warning: tool `{}` ({}) is refused by the lock file: {}", r.name, r.source.display(), r.drift);
        }
    }
}

pub(super) fn run(a: &LockArgs, packs: &[PathBuf], o: &LockOptions<'_>, quiet: bool) -> Result<i32> {
    let dirs = if a.dirs.is_empty() {
        SearchPath::resolve(packs, std::env::var_os("PACKS_PATH").as_deref()).dirs
    } else {
        a.dirs.clone()
    };
    let catalog = Catalog::load(&SearchPath::dirs(dirs));
    if !quiet {
        super::print_diagnostics(&catalog.diagnostics);
    }
    let base = o.lockfile.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    let base = base.and_then(|b| std::fs::canonicalize(b).ok());
    if a.check {
        return check(&catalog, a, o);
    }
    // The key opens before anything is written: a wrong key or password changes nothing.
    let signing = match &a.sign {
        Some(key) => Some(lock::SigningKey::open(key, std::env::var("PACKS_SIGN_PASSWORD").ok())?),
        None => None,
    };
    // With --verify, the pins `--update` keeps are trusted only on a good signature (one read).
    let previous = match o.locked().read() {
        Ok(l) => Some(l),
        Err(lock::LockError::Unreadable { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) if a.update.is_empty() => {
            // A full re-lock replaces a lock that cannot be read; say so.
            eprintln!("warning: {e}; writing a new one");
            None
        }
        Err(e) => return Err(e.into()),
    };
    let pin = |t: &crate::tool::Tool| {
        lock::pin(t, None).map(|mut p| {
            // The source is written relative to the lock file's directory when below it.
            p.source = p.source.map(|s| relative(Path::new(&s), base.as_deref()));
            p
        })
    };
    let mut report = Vec::new();
    let new_lock = if a.update.is_empty() {
        let mut fresh = LockFile { version: lock::LOCK_VERSION, tools: Vec::new() };
        for t in catalog.tools() {
            fresh.put(pin(t)?);
        }
        if let Some(prev) = &previous {
            for p in &fresh.tools {
                let old = prev.get(&p.name);
                if old.is_none_or(|o| o.meaning != p.meaning || o.describe != p.describe || o.kind != p.kind) {
                    report.push((p.name.clone(), lock::semantic_diff(old, p)));
                }
            }
            for gone in prev.tools.iter().filter(|o| fresh.get(&o.name).is_none()) {
                report.push((gone.name.clone(), vec!["removed".to_owned()]));
            }
        }
        fresh
    } else {
        let Some(mut lock) = previous else {
            bail!(
                "{} does not exist: run `packs lock` first, then --update a tool after reviewing it",
                o.lockfile.display()
            )
        };
        for name in &a.update {
            match catalog.get(name) {
                Ok(t) => {
                    let p = pin(t)?;
                    let lines = lock::semantic_diff(lock.get(name), &p);
                    report.push((name.clone(), if lines.is_empty() { vec!["unchanged".to_owned()] } else { lines }));
                    lock.put(p);
                }
                Err(e) if lock.get(name).is_some() => {
                    lock.tools.retain(|p| &p.name != name);
                    report.push((name.clone(), vec![format!("removed ({e})")]));
                }
                Err(e) => bail!("cannot pin `{name}`: {e}"),
            }
        }
        lock
    };
    write_atomically(o.lockfile, &new_lock.to_toml())?;
    let mut out = String::new();
    for (name, lines) in &report {
        out.push_str(&format!("{name}:\n"));
        for l in lines {
            out.push_str(&format!("  {l}\n"));
        }
    }
    print(&out)?;
    eprintln!("pinned {} tools in {}", new_lock.tools.len(), o.lockfile.display());
    if let Some(key) = &signing {
        let sig = key.sign(o.lockfile)?;
        eprintln!("signed: {}", sig.display());
    } else if lock::signature_path(o.lockfile).exists() {
        // The old signature is of the old text: it no longer verifies, say so.
        eprintln!(
            "warning: {} signs the previous lock file; sign this one with --sign",
            lock::signature_path(o.lockfile).display()
        );
    }
    Ok(CLEAN)
}

/// `path` relative to `base` when it is below it (both made absolute first).
fn relative(path: &Path, base: Option<&Path>) -> String {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    base.and_then(|b| absolute.strip_prefix(b).ok())
        .map_or_else(|| path.to_string_lossy().into_owned(), |r| r.to_string_lossy().into_owned())
}

/// Write `text` to `path` through a temporary file in the same directory, so a reader
/// never sees half a lock file.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".packs.lock.")
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())?;
    tmp.persist(path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `packs lock --check`: every drift as a coded, positioned diagnostic.
fn check(catalog: &Catalog, a: &LockArgs, o: &LockOptions<'_>) -> Result<i32> {
    let lock = o.locked().read()?;
    let mut report = Report { files: 0, tools: 0, diagnostics: Vec::new() };
    for t in catalog.tools() {
        report.files += 1;
        report.tools += 1;
        let now = lock::pin(t, None)?;
        let Some(d) = lock::drift(&now, &lock) else { continue };
        let (severity, code, message, field) = match &d {
            Drift::Unpinned => (
                Severity::Error,
                Code::LockUnpinned,
                format!("tool `{}` is not in {}", t.name(), o.lockfile.display()),
                "name".to_owned(),
            ),
            Drift::Changed(parts) => (
                Severity::Error,
                Code::LockDrift,
                format!("tool `{}` changed since {} pinned it: {}", t.name(), o.lockfile.display(), parts.join(", ")),
                parts.first().cloned().unwrap_or_default(),
            ),
            Drift::Reformatted => (
                Severity::Warning,
                Code::LockReformatted,
                format!(
                    "tool `{}`: its file was reformatted since it was pinned (its meaning did not change)",
                    t.name()
                ),
                String::new(),
            ),
        };
        let help = match &d {
            Drift::Reformatted => format!("run `packs lock --update {}` to record the new file digest", t.name()),
            _ => format!("review the change, then `packs lock --update {}`", t.name()),
        };
        report.diagnostics.push(positioned(t.source(), severity, code, &field, message).with_help(help));
    }
    for gone in lock.tools.iter().filter(|p| catalog.get(&p.name).is_err()) {
        let at = gone.source.as_deref().map_or_else(|| o.lockfile.to_owned(), PathBuf::from);
        report.diagnostics.push(
            Diagnostic::file(
                Severity::Warning,
                Code::LockStale,
                &at,
                format!("tool `{}` is pinned in {} but no longer found", gone.name, o.lockfile.display()),
            )
            .with_help(format!("run `packs lock --update {}` to drop its pin", gone.name)),
        );
    }
    print(&render::render(&report, a.format))?;
    Ok(if report.errors() > 0 { DRIFTED } else { CLEAN })
}

/// A diagnostic at `field` of a manifest (the whole file for an executable, or when the
/// field is not written in it).
fn positioned(file: &Path, severity: Severity, code: Code, field: &str, message: String) -> Diagnostic {
    let src = Syntax::of_manifest(file)
        .and_then(|syntax| std::fs::read_to_string(file).ok().map(|t| SourceFile::new(file.to_owned(), t, syntax)));
    match src {
        Some(src) if !field.is_empty() => {
            Diagnostic::at(&src, severity, code, &FieldPath::dotted(field), Target::Value, message)
        }
        _ => Diagnostic::file(severity, code, file, message),
    }
}
