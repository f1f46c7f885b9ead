//! `packs new`: a manifest skeleton that lints clean and carries a test.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::scaffold::{self, ParamSpec, Style};

#[derive(clap::Args, Debug)]
pub(super) struct NewArgs {
    /// The tool's name (snake_case)
    name: String,
    /// The program it runs
    #[arg(long, value_name = "PROG")]
    program: String,
    /// A parameter, NAME:TYPE (string, integer, number, boolean, array); a trailing `?` makes it optional; repeatable
    #[arg(long = "param", value_name = "NAME:TYPE", value_parser = scaffold::parse_param)]
    params: Vec<ParamSpec>,
    /// What the tool does (a model reads it to choose the tool)
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Write TOML instead of JSON
    #[arg(long)]
    toml: bool,
    /// Write an executable TOML manifest (packs shebang, run bit): the file is a --describe tool
    #[arg(long, conflicts_with = "toml")]
    executable: bool,
    /// The directory to write in (default: ./packs)
    #[arg(long, value_name = "DIR", default_value = "packs")]
    dir: PathBuf,
    /// Overwrite an existing file
    #[arg(long)]
    force: bool,
}

pub(super) fn new(a: &NewArgs) -> Result<i32> {
    if !crate::names::is_snake_case(&a.name) || a.name.len() > 64 {
        bail!("`{}` is not a tool name: lowercase letters, digits and `_`, starting with a letter, at most 64", a.name);
    }
    if let Some(dup) = a.params.iter().enumerate().find(|(i, p)| a.params[..*i].iter().any(|q| q.name == p.name)) {
        bail!("parameter `{}` is given twice", dup.1.name);
    }
    let style = match (a.toml, a.executable) {
        (_, true) => Style::Executable,
        (true, false) => Style::Toml,
        (false, false) => Style::Json,
    };
    let description = a
        .description
        .clone()
        .unwrap_or_else(|| format!("Run {} (TODO: say what it does and when to use it)", a.program));
    let manifest = scaffold::new_manifest(&a.name, &a.program, &description, &a.params);
    let comments = match style {
        Style::Executable => vec![format!(
            "An executable manifest: `./{0} --describe`, or `./{0} '{{\"…\": …}}'`.",
            style.file_name(&a.name)
        )],
        _ => Vec::new(),
    };
    let text = scaffold::render(&manifest, style, &comments).map_err(anyhow::Error::msg)?;
    let path = scaffold::write(&a.dir, &style.file_name(&a.name), &text, style, a.force).map_err(anyhow::Error::msg)?;
    // What was written lints clean, or it says why.
    let report = crate::lint::lint(std::slice::from_ref(&path), &crate::lint::Options::default())?;
    if report.errors() > 0 {
        print!("{}", crate::lint::render::render(&report, crate::lint::render::Format::Human));
        bail!("{} was written but does not lint clean", path.display());
    }
    eprintln!("wrote {} (run its test: packs --packs {} test {})", path.display(), a.dir.display(), a.name);
    Ok(0)
}
