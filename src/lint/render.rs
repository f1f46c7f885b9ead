//! One renderer per output format: human (source line with a caret), json,
//! github (workflow commands), sarif (2.1.0, for code scanning).

use std::collections::HashMap;
use std::path::Path;

use codespan_reporting::diagnostic::{Diagnostic as Rendered, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;
use serde_json::{Value, json};

use super::Report;
use crate::code::Code;
use crate::source::{Diagnostic, Severity};

crate::names::named_enum! {
    /// The output formats of `packs lint`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Format {
        /// Source lines with carets, like rustc (default).
        Human = "human",
        /// One JSON document.
        Json = "json",
        /// GitHub Actions workflow commands (`::error file=…::`).
        Github = "github",
        /// SARIF 2.1.0, for GitHub code scanning.
        Sarif = "sarif",
    }
}

/// Render `report` in `format` (no colour).
pub fn render(report: &Report, format: Format) -> String {
    render_with(report, format, false)
}

/// Render `report` in `format`; with `color`, the human format is coloured with ANSI
/// escapes (errors red, warnings yellow, as rustc does). The other formats are data.
pub fn render_with(report: &Report, format: Format, color: bool) -> String {
    match format {
        Format::Human => human(report, color),
        Format::Json => format!("{:#}\n", json(report)),
        Format::Github => github(report),
        Format::Sarif => format!("{:#}\n", sarif(report)),
    }
}

/// Paths are shown relative to the current directory (`cwd`, read once per report)
/// when they are below it.
fn shown(path: &Path, cwd: Option<&Path>) -> String {
    cwd.and_then(|c| path.strip_prefix(c).ok()).unwrap_or(path).display().to_string()
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The byte range to underline: the diagnostic's span, else its line and column.
fn range(d: &Diagnostic, text: &str) -> Option<std::ops::Range<usize>> {
    let r = d.span.clone().or_else(|| {
        let (line, col) = (d.line?, d.column?);
        let start: usize = text.split_inclusive('\n').take(line - 1).map(str::len).sum();
        let rest = &text[start.min(text.len())..];
        let at = start + rest.char_indices().nth(col - 1).map_or(rest.len(), |(i, _)| i);
        Some(at..at)
    })?;
    // Never slice inside a character or past the end, whatever a span says.
    let valid = |i: usize| i <= text.len() && text.is_char_boundary(i);
    if !valid(r.start) || !valid(r.end) || r.end < r.start {
        return None;
    }
    let end = if r.end > r.start {
        r.end
    } else {
        text[r.start..].chars().next().map_or(r.start, |c| r.start + c.len_utf8())
    };
    Some(r.start..end)
}

/// `word` in bold `code` (an ANSI colour number) when `color`.
fn paint(word: &str, code: u8, color: bool) -> String {
    if color { format!("\x1b[1;{code}m{word}\x1b[0m") } else { word.to_owned() }
}

fn human(report: &Report, color: bool) -> String {
    let cwd = std::env::current_dir().ok();
    // The diagnostics of one file are next to each other: each run of them is rendered
    // (its file read once, however many it has) on its own, in parallel with the others.
    let runs: Vec<&[Diagnostic]> = report.diagnostics.chunk_by(|a, b| a.file == b.file).collect();
    // Never print the line of a credential, under any diagnostic (a one-line manifest has
    // its secret on the line every other diagnostic points at): CI logs are read by many.
    let mut secrets: HashMap<&Path, Vec<&Diagnostic>> = HashMap::new();
    for d in report.diagnostics.iter().filter(|d| d.code == Code::HardcodedSecret) {
        secrets.entry(&d.file).or_default().push(d);
    }
    let render = |run: &&[Diagnostic]| {
        let secrets = run.first().and_then(|d| secrets.get(d.file.as_path())).map_or(&[][..], Vec::as_slice);
        human_file(run, secrets, cwd.as_deref(), color)
    };
    let rendered = crate::catalog::parallel_map(&runs, render);
    let mut out = String::new();
    for (run, text) in runs.iter().zip(rendered) {
        out.push_str(&text.unwrap_or_else(|| render(run)));
    }
    out.push_str(&report.summary());
    out.push('\n');
    out
}

/// The diagnostics of one file, each with its source lines when the file can be read and
/// none of those lines holds one of `secrets` (the file's `hardcoded-secret` diagnostics;
/// one without a position hides every line).
fn human_file(diagnostics: &[Diagnostic], secrets: &[&Diagnostic], cwd: Option<&Path>, color: bool) -> String {
    use codespan_reporting::files::Files;
    let Some(first) = diagnostics.first() else { return String::new() };
    let file = std::fs::read_to_string(&first.file).ok().map(|t| SimpleFile::new(shown(&first.file, cwd), t));
    // The lines (0-based, inclusive) a byte range spans; None when it is not in the file.
    let lines_of = |f: &SimpleFile<String, String>, rg: &std::ops::Range<usize>| {
        Some((f.line_index((), rg.start).ok()?, f.line_index((), rg.end).ok()?))
    };
    let secret_lines: Vec<Option<(usize, usize)>> = match &file {
        Some(f) => secrets.iter().map(|d| range(d, f.source()).and_then(|rg| lines_of(f, &rg))).collect(),
        None => Vec::new(),
    };
    // Never print the line of a credential, under any diagnostic (a secret's own included).
    let shows_secret = |f: &SimpleFile<String, String>, rg: &std::ops::Range<usize>| {
        !secret_lines.is_empty()
            && lines_of(f, rg).is_none_or(|(a, b)| secret_lines.iter().any(|s| s.is_none_or(|(c, d)| a <= d && c <= b)))
    };
    let config = term::Config::default();
    let mut out = String::new();
    for d in diagnostics {
        let mut r = match d.severity {
            Severity::Error => Rendered::error(),
            Severity::Warning => Rendered::warning(),
        }
        .with_code(d.code.as_str())
        .with_message(&d.message);
        if let Some(help) = &d.help {
            r = r.with_notes(vec![format!("help: {help}")]);
        }
        let rendered = file
            .as_ref()
            .and_then(|f| range(d, f.source()).map(|rg| (f, rg)))
            .filter(|(f, rg)| !shows_secret(f, rg))
            .and_then(|(f, rg)| {
                let label = match &d.field {
                    Some(name) => Label::primary((), rg).with_message(format!("`{name}`")),
                    None => Label::primary((), rg),
                };
                let diagnostic = r.clone().with_labels(vec![label]);
                if color {
                    let mut buffer = term::termcolor::Buffer::ansi();
                    term::emit_to_write_style(&mut buffer, &config, f, &diagnostic).ok()?;
                    String::from_utf8(buffer.into_inner()).ok()
                } else {
                    term::emit_into_string(&config, f, &diagnostic).ok()
                }
            });
        match rendered {
            Some(s) => out.push_str(&s),
            None => {
                let at = match (d.line, d.column) {
                    (Some(l), Some(c)) => format!(":{l}:{c}"),
                    _ => String::new(),
                };
                let code = if d.severity == Severity::Error { 31 } else { 33 };
                out.push_str(&format!(
                    "{}: {}\n  --> {}{at}\n",
                    paint(&format!("{}[{}]", severity_word(d.severity), d.code), code, color),
                    d.message,
                    shown(&d.file, cwd)
                ));
                if let Some(help) = &d.help {
                    out.push_str(&format!("  = help: {help}\n"));
                }
                out.push('\n');
            }
        }
    }
    out
}

fn json(report: &Report) -> Value {
    let cwd = std::env::current_dir().ok();
    let diagnostics: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            json!({
                "code": d.code,
                "severity": severity_word(d.severity),
                "file": shown(&d.file, cwd.as_deref()),
                "line": d.line,
                "column": d.column,
                "field": d.field,
                "message": d.message,
                "help": d.help,
            })
        })
        .collect();
    json!({
        "summary": {
            "files": report.files,
            "tools": report.tools,
            "errors": report.errors(),
            "warnings": report.warnings(),
        },
        "diagnostics": diagnostics,
    })
}

/// Escaping of workflow command data and properties.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn github(report: &Report) -> String {
    let cwd = std::env::current_dir().ok();
    let mut out = String::new();
    for d in &report.diagnostics {
        let mut props = vec![format!("file={}", escape_property(&shown(&d.file, cwd.as_deref())))];
        if let Some(l) = d.line {
            props.push(format!("line={l}"));
        }
        if let Some(c) = d.column {
            props.push(format!("col={c}"));
        }
        props.push(format!("title={}", escape_property(&format!("packs lint: {}", d.code))));
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        out.push_str(&format!("::{} {}::{}\n", severity_word(d.severity), props.join(","), escape_data(&message)));
    }
    out.push_str(&report.summary());
    out.push('\n');
    out
}

fn sarif(report: &Report) -> Value {
    let cwd = std::env::current_dir().ok();
    // The rules the results use, by name.
    let used: Vec<Code> = {
        let mut codes: Vec<Code> = report.diagnostics.iter().map(|d| d.code).collect();
        codes.sort_unstable_by_key(|c| c.as_str());
        codes.dedup();
        codes
    };
    let rules: Vec<Value> = used
        .iter()
        .map(|code| {
            json!({
                "id": code,
                "name": code,
                "shortDescription": {"text": code.description()},
                "helpUri": format!("https://github.com/packs-dev/packs/blob/main/docs/LINT.md#{code}"),
            })
        })
        .collect();
    let results: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            let mut region = serde_json::Map::new();
            if let Some(l) = d.line {
                region.insert("startLine".into(), l.into());
            }
            if let Some(c) = d.column {
                region.insert("startColumn".into(), c.into());
            }
            let mut location = json!({"artifactLocation": {"uri": shown(&d.file, cwd.as_deref()).replace('\\', "/")}});
            if !region.is_empty() {
                location["region"] = Value::Object(region);
            }
            let mut text = d.message.clone();
            if let Some(help) = &d.help {
                text.push_str(&format!(" (help: {help})"));
            }
            json!({
                "ruleId": d.code,
                "ruleIndex": used.iter().position(|c| *c == d.code),
                "level": severity_word(d.severity),
                "message": {"text": text},
                "locations": [{"physicalLocation": location}],
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "packs",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/packs-dev/packs",
                "rules": rules,
            }},
            "results": results,
        }],
    })
}
