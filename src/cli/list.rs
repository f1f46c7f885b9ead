//! `packs list`, `packs describe`, `packs catalog`, `packs help NAME`.

use anyhow::Result;
use serde_json::{Value, json};

use super::{exit, print, print_json};
use crate::catalog::Catalog;
use crate::formats::{self, ExportFormat};
use crate::output::truncate;
use crate::visible;

/// Every tool: name, kind, read-only, description, and the file it came from (JSON: and
/// the pack directory of `dirs` holding it; a native tool has none), written to `out`.
pub(super) fn list(
    catalog: &Catalog,
    as_json: bool,
    dirs: &[std::path::PathBuf],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if as_json {
        let rows: Vec<Value> = catalog
            .tools()
            .map(|t| {
                let pack_dir = dirs.iter().find(|d| t.source().starts_with(d));
                json!({
                    "name": t.name(),
                    "kind": t.kind(),
                    "read_only": t.policy().read_only,
                    "description": t.description(),
                    "source": t.source(),
                    "pack_dir": pack_dir,
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        return out.write_all(b"\n");
    }
    let rows: Vec<[String; 5]> = catalog
        .tools()
        .map(|t| {
            [
                t.name().to_owned(),
                t.kind().as_str().to_owned(),
                if t.policy().read_only { "yes" } else { "no" }.to_owned(),
                truncate(&visible::prose(t.short_description()), 60),
                visible::prose(&t.source().to_string_lossy()).into_owned(),
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "READ-ONLY", "DESCRIPTION", "SOURCE"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count() + 2;
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.write_all(line.trim_end().as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Where packs looked for tools (for `dirs`, as `--packs` or an agent gave them; else
/// `PACKS_PATH`; else the defaults), and how to add one: printed on stderr when a listing
/// finds no tool, or a call names one that is not there.
pub(super) fn where_tools_come_from(dirs: &[std::path::PathBuf]) -> String {
    use std::fmt::Write as _;
    const DEFAULTS: &str = "the default search path";
    let packs_path = std::env::var_os("PACKS_PATH").filter(|v| !v.is_empty());
    let (from, searched) = match (dirs.is_empty(), &packs_path) {
        (false, _) => ("--packs", dirs.to_vec()),
        (true, Some(var)) => ("PACKS_PATH", std::env::split_paths(var).filter(|p| !p.as_os_str().is_empty()).collect()),
        (true, None) => {
            let config = crate::catalog::SearchPath::config_dir(
                std::env::var_os("XDG_CONFIG_HOME").as_deref(),
                std::env::var_os("HOME").as_deref(),
            );
            let mut defaults = vec![std::path::PathBuf::from("./packs")];
            if let Some(config) = config {
                defaults.push(config.join("packs/tools"));
                defaults.push(config.join("packs/tools.d"));
            }
            (DEFAULTS, defaults)
        }
    };
    let mut text = format!("packs looked for tools in {from}:\n");
    for dir in &searched {
        let each_in_it = from == DEFAULTS && dir.ends_with("tools.d");
        let state = match (dir.is_dir(), each_in_it) {
            (false, _) => " (no such directory)",
            (true, true) => " (each directory in it)",
            (true, false) => "",
        };
        let _ = writeln!(text, "  {}{state}", visible::prose(&dir.to_string_lossy()));
    }
    text.push_str(
        "add a tool with `packs new NAME --program PROGRAM` (it writes packs/NAME.tool.json), or name a pack \
         directory with `--packs DIR` or PACKS_PATH",
    );
    text
}

pub(super) fn describe(catalog: &Catalog, name: &str, prompt_entry: bool) -> Result<i32> {
    let tool = catalog.get(name)?;
    if prompt_entry {
        print(&format!("{}\n", visible::prose(&crate::prompt::tool_entry(tool))))?;
        return Ok(exit::OK);
    }
    print_json(tool.describe())?;
    Ok(exit::OK)
}

/// Every tool (the agent's, with `--agent`) in `format`, written to `out`; true when no
/// warning was printed.
pub(super) fn catalog(
    catalog: &Catalog,
    format: ExportFormat,
    context: &crate::call::Context,
    out: &mut dyn std::io::Write,
) -> std::io::Result<bool> {
    let tools: Vec<_> = catalog.tools().filter(|t| context.offers(t)).collect();
    let warnings = formats::export_warnings(&tools, format);
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    formats::write_export(&tools, format, out)?;
    Ok(warnings.is_empty())
}

pub(super) fn help(catalog: &Catalog, name: &str, context: &crate::call::Context) -> Result<i32> {
    let tool = catalog.get(name)?;
    print(&crate::help::page_in(tool, context))?;
    Ok(exit::OK)
}
