//! `packs lint`.

use std::path::PathBuf;

use super::print;
use crate::agent::Agent;
use crate::catalog::SearchPath;
use crate::lint::{self, Options, render};

/// Exit codes of `packs lint`.
const CLEAN: i32 = 0;
const FAILED: i32 = 1;
const CANNOT_RUN: i32 = 2;

#[derive(clap::Args, Debug)]
pub(super) struct LintArgs {
    /// Pack directories, manifests or executables (default: the search path)
    paths: Vec<PathBuf>,
    /// Output format
    #[arg(long, default_value = "human", value_parser = super::choice(render::Format::ALL, render::Format::as_str, render::Format::help))]
    format: render::Format,
    /// Fail on warnings too
    #[arg(long)]
    deny_warnings: bool,
    /// Make runtime warnings (a program not on PATH) errors
    #[arg(long)]
    strict: bool,
}

/// Lint the PATHs; without any, the pack directories and the agent that `prompt`, `catalog`,
/// `call` and `serve` act for (`agent`: `--agent`, else the default agent when it exists).
pub(super) fn lint(a: &LintArgs, packs: &[PathBuf], agent: Option<&str>, color: bool) -> i32 {
    let paths = if a.paths.is_empty() {
        let agent = match Agent::for_model(&Agent::root(), agent) {
            Ok(agent) => agent,
            Err(e) => {
                eprintln!("error: {e}");
                return CANNOT_RUN;
            }
        };
        // The directories those commands load: `--packs`, else the agent's, else the search path.
        let dirs = match &agent {
            Some(agent) if packs.is_empty() => agent.pack_dirs(),
            _ => packs.to_vec(),
        };
        let mut paths = SearchPath::resolve(&dirs, std::env::var_os("PACKS_PATH").as_deref()).dirs;
        paths.extend(agent.map(|agent| agent.dir));
        paths
    } else {
        a.paths.clone()
    };
    let options = Options { strict: a.strict, packs: packs.to_vec() };
    let report = match lint::lint(&paths, &options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return CANNOT_RUN;
        }
    };
    if print(&render::render_with(&report, a.format, color)).is_err() {
        return CANNOT_RUN;
    }
    if report.errors() > 0 || (a.deny_warnings && report.warnings() > 0) { FAILED } else { CLEAN }
}
