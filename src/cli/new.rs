//! `packs new`: a manifest skeleton that lints clean and carries a test (what the policy
//! flags ask for can bring a warning, which is shown).

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
    /// Put no `--` before the values (for a program that prints `--` or reads no options;
    /// automatic for echo): each value's schema refuses a leading `-` instead
    #[arg(long)]
    no_options_end: bool,
    /// The permission tier: read_only (the default), workspace, system or elevated (a person approves each call)
    #[arg(long, value_name = "TIER")]
    tier: Option<crate::policy::Tier>,
    /// The tool needs the network (policy.requires_network)
    #[arg(long)]
    network: bool,
    /// A directory the confined tool may also write (absolute, or starting with {{env.NAME}}); repeatable
    #[arg(long, value_name = "PATH")]
    writable: Vec<String>,
    /// Seconds before the tool is killed
    #[arg(long, value_name = "SECS", default_value_t = crate::policy::DEFAULT_TIMEOUT_SECS)]
    timeout: u64,
}

pub(super) fn new(a: &NewArgs) -> Result<i32> {
    if !crate::names::is_snake_case(&a.name) || a.name.len() > 64 {
        bail!("`{}` is not a tool name: lowercase letters, digits and `_`, starting with a letter, at most 64", a.name);
    }
    if let Some(dup) = a.params.iter().enumerate().find(|(i, p)| a.params[..*i].iter().any(|q| q.name == p.name)) {
        bail!("parameter `{}` is given twice", dup.1.name);
    }
    if scaffold::prints_double_dash(&a.program)
        && let Some(flag) = a.params.iter().find(|p| p.kind == "boolean")
    {
        bail!(
            "`{}` takes no long options: a boolean parameter would be printed as `--{}`; leave `{}` out, \
             or write its template by hand after `packs new`",
            a.program,
            flag.name.replace('_', "-"),
            flag.name
        );
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
    let shape = scaffold::Shape {
        options_end: !a.no_options_end && !scaffold::prints_double_dash(&a.program),
        tier: a.tier,
        network: a.network,
        writable: a.writable.clone(),
        timeout_secs: a.timeout,
    };
    let manifest = scaffold::new_manifest(&a.name, &a.program, &description, &a.params, &shape);
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
    if report.errors() > 0 || report.warnings() > 0 {
        print!("{}", crate::lint::render::render(&report, crate::lint::render::Format::Human));
    }
    if report.errors() > 0 {
        bail!("{} was written but does not lint clean", path.display());
    }
    eprintln!("wrote {} (run its test: packs --packs {} test {})", path.display(), a.dir.display(), a.name);
    Ok(0)
}
