//! Man-page style help for a tool, generated from the tool itself.

use std::fmt::Write;

use serde_json::Value;

use crate::manifest::Arg;
use crate::tool::Tool;

const INDENT: &str = "       ";

/// The manual page of `tool` (`packs help NAME`): a native tool's own, else one
/// generated from the tool itself; control and invisible characters escaped.
pub fn page(tool: &Tool) -> String {
    page_in(tool, &crate::call::Context::new())
}

/// The manual page of `tool` as calls in `context` would run it (its POLICY section says
/// what the kernel enforces under that context's sandbox mode and workspace).
pub(crate) fn page_in(tool: &Tool, context: &crate::call::Context) -> String {
    if let Some(page) = tool.native().and_then(crate::NativeTool::help) {
        return crate::visible::prose(&page).into_owned();
    }
    let mut s = String::new();
    let d = tool.describe();
    let title = d.name.to_uppercase();
    let _ = writeln!(s, "{title}(1){:>width$}", format!("{title}(1)"), width = 60usize.saturating_sub(title.len()));
    section(&mut s, "NAME", &format!("{} - {}", d.name, first_line(&d.description)));
    section(&mut s, "SYNOPSIS", &format!("packs run {} '{}'", d.name, synopsis(&d.parameters)));
    section(&mut s, "DESCRIPTION", &d.description);
    section(&mut s, "PARAMETERS", &parameters(tool));
    section(&mut s, "COMMAND", &command(tool));
    section(&mut s, "POLICY", &policy(tool, context));
    section(&mut s, "OUTPUT", &output(tool));
    if !tool.examples().is_empty() {
        section(&mut s, "EXAMPLES", &tool.examples().join("\n\n"));
    }
    section(
        &mut s,
        "EXIT STATUS",
        "0    the tool ran and succeeded\n\
         1    not found, bad arguments, or validation failure\n\
         2    the tool ran and failed (exit code not allowed, or it could not start)\n\
         3    the call needed approval and was denied\n\
         124  the tool timed out; its process group was killed",
    );
    section(&mut s, "SOURCE", &format!("{} ({})", tool.source().display(), tool.kind().as_str()));
    // Manifest strings reach a terminal: nothing in them may move the cursor or hide text.
    crate::visible::prose(&s).into_owned()
}

fn section(s: &mut String, title: &str, body: &str) {
    let _ = writeln!(s, "\n{title}");
    for line in body.lines() {
        if line.is_empty() {
            s.push('\n');
        } else {
            let _ = writeln!(s, "{INDENT}{line}");
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// `{"path": <string>, "human_readable": <boolean>}` with optional keys in brackets.
fn synopsis(params: &Value) -> String {
    let required = required(params);
    let parts: Vec<String> = properties(params)
        .map(|(name, schema)| {
            let ty = schema.get("type").and_then(Value::as_str).unwrap_or("any");
            let item = format!("\"{name}\": <{ty}>");
            if required.contains(&name.as_str()) { item } else { format!("[{item}]") }
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn properties(params: &Value) -> impl Iterator<Item = (&String, &Value)> {
    params.get("properties").and_then(Value::as_object).into_iter().flatten()
}

fn required(params: &Value) -> Vec<&str> {
    params
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn parameters(tool: &Tool) -> String {
    let schema = tool.validation_schema();
    let required = required(schema);
    let mut s = String::new();
    for (name, p) in properties(schema) {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("any");
        let req = if required.contains(&name.as_str()) { ", required" } else { "" };
        let _ = writeln!(s, "{name} ({ty}{req})");
        let mut notes = Vec::new();
        if let Some(d) = p.get("description").and_then(Value::as_str) {
            notes.push(d.to_owned());
        }
        if let Some(e) = p.get("enum").and_then(Value::as_array) {
            notes.push(format!("One of: {}.", e.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")));
        }
        if let Some(d) = p.get("default") {
            notes.push(format!("Default: {d}."));
        }
        for key in ["pattern", "minimum", "maximum", "minLength", "maxLength", "format"] {
            if let Some(v) = p.get(key) {
                notes.push(format!("{key}: {v}."));
            }
        }
        if let Some(src) =
            tool.manifest().and_then(|m| m.parameters.get(name)).and_then(|p| p.source).and_then(|s| s.context_key())
        {
            notes.push(format!("Filled from the caller's context ({src}) when omitted."));
        }
        for n in notes {
            let _ = writeln!(s, "       {n}");
        }
    }
    if s.is_empty() { "none".into() } else { s.trim_end().to_owned() }
}

fn command(tool: &Tool) -> String {
    if tool.native().is_some() {
        return format!("(a native tool: it runs inside the program that registered it, as `{}`)", tool.name());
    }
    let Some(m) = tool.manifest() else {
        return format!(
            "{} '<arguments as JSON>'\n(an executable tool: it receives the call's JSON as its one argument)",
            tool.source().display()
        );
    };
    let mut words = vec![m.command.program.clone()];
    for a in &m.command.args {
        match a {
            Arg::One(t) => words.push(t.clone()),
            Arg::Group(g) => words.push(format!("[{}]", g.join(" "))),
        }
    }
    let quoted: Vec<String> =
        words.iter().map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned())).collect();
    let mut s = quoted.join(" ");
    if let Some(cwd) = &m.command.cwd {
        let _ = write!(s, "\ncwd: {cwd}");
    }
    for (k, v) in &m.command.env {
        let _ = write!(s, "\nenv: {k}={v}");
    }
    if let Some(stdin) = &m.command.stdin {
        let _ = write!(s, "\nstdin: {}", crate::visible::word(stdin));
    }
    s.push_str("\nNo shell is involved: each argument renders to exactly one argv element; [a b] is a group.");
    s
}

fn policy(tool: &Tool, context: &crate::call::Context) -> String {
    let p = tool.policy();
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut s = format!(
        "tier: {}\nread-only: {}\nnetwork: {}\ntimeout: {}s\nconfirm before run: {}\nallowed exit codes: {}\nmax output bytes: {}",
        tool.tier(),
        yes(p.read_only),
        yes(p.requires_network),
        p.timeout().as_secs(),
        yes(p.confirm_before_run),
        p.allowed_exit_codes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        p.max_output_bytes
    );
    if !p.unix_sockets {
        s.push_str("\nunix sockets: no");
    }
    for (name, value) in [
        ("max memory bytes", p.max_memory_bytes),
        ("max file bytes", p.max_file_bytes),
        ("max cpu secs", p.max_cpu_secs),
    ] {
        if let Some(v) = value {
            let _ = write!(s, "\n{name}: {v}");
        }
    }
    let enforced = match context.enforcement(tool) {
        None => "nothing (a native tool runs in the program's own process)".to_owned(),
        Some(decided) => crate::sandbox::stated(&decided),
    };
    let _ = write!(s, "\nenforced by the kernel: {enforced}");
    s
}

fn output(tool: &Tool) -> String {
    let o = tool.output_spec();
    let mut s = format!(
        "format: {}\nspeak: {}\nmax chars: {}",
        serde_json::to_value(o.format).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
        o.speak,
        o.max_chars
    );
    if let Some(f) = &o.extract_field {
        let _ = write!(s, "\nextract field: {f}");
    }
    if let Some(t) = &o.template {
        let _ = write!(s, "\ntemplate: {t}");
    }
    s
}
