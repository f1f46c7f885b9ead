//! `packs convert`: manifests from other tool definitions and Agent Skills.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::convert::{self, Dest, Kind};
use crate::lint::{Report, render};

#[derive(clap::Args, Debug)]
pub(super) struct ConvertArgs {
    /// SKILL.md files, tool-definition JSON files (OpenAI, Anthropic, Gemini, MCP), executables
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// What the inputs are (default: detected from each)
    #[arg(long, value_enum, default_value = "auto")]
    from: From,
    /// The pack directory manifests are written to
    #[arg(long, value_name = "DIR", default_value = "packs")]
    output: PathBuf,
    /// Where a skill's body goes, as a context module (an agent's context/ directory)
    #[arg(long, value_name = "DIR", default_value = "agents/default/context")]
    context_dir: PathBuf,
    /// Write tool definitions as TOML manifests (skills always give TOML, for their comments)
    #[arg(long)]
    toml: bool,
    /// Overwrite existing files
    #[arg(long)]
    force: bool,
}

/// `--from`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
enum From {
    /// Detect from each input
    Auto,
    /// An Agent Skill's SKILL.md
    Skill,
    /// OpenAI function tools (Chat Completions or Responses)
    Openai,
    /// Anthropic Messages tools
    Anthropic,
    /// Gemini function declarations
    Gemini,
    /// MCP tools (tools/list entries or result)
    Mcp,
    /// An executable that answers --describe
    Describe,
}

impl From {
    fn kind(self) -> Kind {
        match self {
            Self::Auto => Kind::Auto,
            Self::Skill => Kind::Skill,
            Self::Openai => Kind::Openai,
            Self::Anthropic => Kind::Anthropic,
            Self::Gemini => Kind::Gemini,
            Self::Mcp => Kind::Mcp,
            Self::Describe => Kind::Describe,
        }
    }
}

pub(super) fn convert(a: &ConvertArgs) -> Result<i32> {
    let mut all = Vec::new();
    let mut problems = Report::default();
    for input in &a.inputs {
        let bytes = std::fs::read(input).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", input.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        problems.files += 1;
        match convert::convert(input, &text, a.from.kind(), a.toml) {
            Ok(c) => all.push(c),
            Err(diagnostics) => problems.diagnostics.extend(diagnostics),
        }
    }
    if !problems.diagnostics.is_empty() {
        eprint!("{}", render::render(&problems, render::Format::Human));
        bail!("nothing was converted: fix the input first");
    }
    // Every target is known before anything is written: all of them, or none.
    let mut targets: Vec<(PathBuf, &convert::NewFile)> = Vec::new();
    for file in all.iter().flat_map(|c| &c.files) {
        let dir = match file.dest {
            Dest::Packs => &a.output,
            Dest::Context => &a.context_dir,
        };
        let path = dir.join(&file.name);
        if targets.iter().any(|(p, _)| *p == path) {
            bail!("two inputs would both write {}: nothing was written", path.display());
        }
        if !a.force && std::fs::symlink_metadata(&path).is_ok() {
            bail!("{} exists (pass --force to overwrite it): nothing was written", path.display());
        }
        targets.push((path, file));
    }
    let mut written = Vec::new();
    for (path, file) in &targets {
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        crate::scaffold::write(dir, &name, &file.text, file.style, true).map_err(anyhow::Error::msg)?;
        eprintln!("wrote {}", path.display());
        if file.dest == Dest::Packs {
            written.push(path.clone());
        }
    }
    for note in all.iter().flat_map(|c| &c.notes) {
        eprintln!("note: {note}");
    }
    if written.is_empty() {
        return Ok(0);
    }
    // What was written lints with no errors; its warnings are what a person must review.
    let report = crate::lint::lint(&written, &crate::lint::Options::default())?;
    if report.errors() > 0 {
        print!("{}", render::render(&report, render::Format::Human));
        bail!("the converted manifests do not lint clean (a bug in packs convert: please report it)");
    }
    eprintln!("{} (`packs lint {}` lists what to review)", report.summary(), a.output.display());
    Ok(0)
}
