//! Manifest skeletons: what `packs new` writes, and how `packs convert` writes the
//! manifests it makes (JSON or TOML text, an executable TOML with the packs shebang, and
//! never over an existing file unless asked).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// The first line of an executable manifest (`packs exec` runs it).
pub(crate) const SHEBANG: &str = "#!/usr/bin/env -S packs exec";

/// How a manifest is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// `NAME.tool.json`.
    Json,
    /// `NAME.tool.toml`.
    Toml,
    /// `NAME.tool.toml` with the packs shebang and the run bit: the file is a `--describe` tool.
    Executable,
}

impl Style {
    /// The file name for a tool `name`.
    pub(crate) fn file_name(self, name: &str) -> String {
        match self {
            Self::Json => format!("{name}.tool.json"),
            Self::Toml | Self::Executable => format!("{name}.tool.toml"),
        }
    }
}

/// One parameter of `packs new`: `NAME:TYPE`, optional with a trailing `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamSpec {
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) required: bool,
}

/// The types `--param` takes.
pub(crate) const PARAM_TYPES: &[&str] = &["string", "integer", "number", "boolean", "array"];

/// Parse `NAME:TYPE` or `NAME:TYPE?` (`NAME` alone is a required string).
pub(crate) fn parse_param(text: &str) -> Result<ParamSpec, String> {
    let (name, kind) = text.split_once(':').unwrap_or((text, "string"));
    let (kind, required) = match kind.strip_suffix('?') {
        Some(k) => (k, false),
        None => (kind, true),
    };
    if let Some(problem) = crate::names::parameter_name_problem(name) {
        return Err(problem);
    }
    if !PARAM_TYPES.contains(&kind) {
        return Err(format!("`{kind}` is not a parameter type; use one of {}", PARAM_TYPES.join(", ")));
    }
    Ok(ParamSpec { name: name.to_owned(), kind: kind.to_owned(), required })
}

/// A sample value of a parameter type, for the skeleton's test.
fn sample(kind: &str, name: &str) -> Value {
    match kind {
        "integer" => json!(3),
        "number" => json!(1.5),
        "boolean" => json!(true),
        "array" => json!([format!("{name}-1"), format!("{name}-2")]),
        _ => json!(format!("example-{name}")),
    }
}

/// What a `packs new` skeleton states beyond its parameters.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shape {
    /// Put `--` before the values. When false (a program that prints `--` rather than
    /// ending its options, or `--no-options-end`), each value's schema refuses a leading
    /// `-` instead, so the model is told and no value can become an option.
    pub(crate) options_end: bool,
    /// The permission tier, when stated (`read_only` follows from it).
    pub(crate) tier: Option<crate::policy::Tier>,
    /// `requires_network`.
    pub(crate) network: bool,
    /// `policy.writable`.
    pub(crate) writable: Vec<String>,
    /// `timeout_secs`.
    pub(crate) timeout_secs: u64,
}

/// A string that is empty or does not start with `-` (a value that cannot become an option).
const NO_LEADING_DASH: &str = "^([^-]|$)";

/// Programs that print a `--` they are given instead of reading it as the end of their
/// options (echo, the coreutils one and every shell's): a skeleton for them puts no `--`
/// before the values and refuses a value's leading `-` in its schema instead.
pub(crate) fn prints_double_dash(program: &str) -> bool {
    matches!(crate::operands::program_name(program), "echo")
}

/// The manifest `packs new` writes: the program, each parameter rendered into argv (flags
/// for booleans; the values after `--`, or, without it, with schemas that refuse a leading
/// `-`, so none can become an option), the policy `shape` states (read-only and the other
/// policies at their safe defaults otherwise), and one dry-run test whose expected argv the
/// template gives for sample values.
pub(crate) fn new_manifest(name: &str, program: &str, description: &str, params: &[ParamSpec], shape: &Shape) -> Value {
    let mut parameters = Map::new();
    let mut flags = Vec::new();
    let mut values = Vec::new();
    let mut args_in = Map::new();
    let mut argv = vec![json!(program)];
    let mut argv_values = Vec::new();
    // Without `--`, each value says it may not start with `-`, so lint knows and the model is told.
    let no_dash = !shape.options_end;
    for p in params {
        let mut decl = Map::new();
        decl.insert("type".into(), p.kind.clone().into());
        match p.kind.as_str() {
            "array" if no_dash => {
                decl.insert("items".into(), json!({"type": "string", "pattern": NO_LEADING_DASH}));
            }
            "array" => {
                decl.insert("items".into(), json!({"type": "string"}));
            }
            "string" if no_dash => {
                decl.insert("pattern".into(), json!(NO_LEADING_DASH));
            }
            "integer" | "number" if no_dash => {
                decl.insert("minimum".into(), json!(0));
            }
            _ => {}
        }
        decl.insert("required".into(), p.required.into());
        let what = if no_dash && p.kind != "boolean" {
            format!("TODO: what `{}` is (it may not start with `-`)", p.name)
        } else {
            format!("TODO: what `{}` is", p.name)
        };
        decl.insert("description".into(), what.into());
        parameters.insert(p.name.clone(), Value::Object(decl));
        let value = sample(&p.kind, &p.name);
        match p.kind.as_str() {
            "boolean" => {
                let flag = format!("--{}", p.name.replace('_', "-"));
                flags.push(json!(format!("{{{{#if {}}}}}{flag}{{{{/if}}}}", p.name)));
                argv.push(json!(flag));
            }
            "array" => {
                // An element that is exactly `{{p}}` splats an array: one element per item.
                values.push(json!(format!("{{{{{}}}}}", p.name)));
                argv_values.extend(value.as_array().cloned().unwrap_or_default());
            }
            _ => {
                values.push(json!(format!("{{{{{}}}}}", p.name)));
                argv_values.push(match &value {
                    Value::String(s) => json!(s),
                    other => json!(other.to_string()),
                });
            }
        }
        args_in.insert(p.name.clone(), value);
    }
    let mut args = flags;
    if !values.is_empty() {
        if shape.options_end {
            args.push(json!("--"));
            argv.push(json!("--"));
        }
        args.extend(values);
        argv.extend(argv_values);
    }
    let mut policy = Map::new();
    if let Some(tier) = shape.tier {
        policy.insert("tier".into(), tier.as_str().into());
    }
    let read_only = shape.tier.is_none_or(|t| t == crate::policy::Tier::ReadOnly);
    policy.insert("read_only".into(), read_only.into());
    policy.insert("requires_network".into(), shape.network.into());
    if shape.tier == Some(crate::policy::Tier::Elevated) {
        // What the tier means, written out: a person approves each call.
        policy.insert("confirm_before_run".into(), true.into());
    }
    if !shape.writable.is_empty() {
        policy.insert("writable".into(), json!(shape.writable));
    }
    let timeout = if shape.timeout_secs == 0 { crate::policy::DEFAULT_TIMEOUT_SECS } else { shape.timeout_secs };
    policy.insert("timeout_secs".into(), timeout.into());
    json!({
        "name": name,
        "description": description,
        "parameters": parameters,
        "command": {"program": program, "args": args},
        "policy": policy,
        "tests": [{
            "name": "the command it would run",
            "dry_run": true,
            "args": args_in,
            "expect": {"argv": argv}
        }]
    })
}

/// `manifest` as the text of a file in `style`, with `comments` (lines of prose) at the top
/// of a TOML file (JSON has no comments: they are left out).
pub(crate) fn render(manifest: &Value, style: Style, comments: &[String]) -> Result<String, String> {
    match style {
        Style::Json => serde_json::to_string_pretty(manifest).map(|t| t + "\n").map_err(|e| e.to_string()),
        Style::Toml | Style::Executable => {
            let body = toml::to_string(manifest).map_err(|e| e.to_string())?;
            let mut out = String::new();
            if style == Style::Executable {
                out.push_str(SHEBANG);
                out.push('\n');
            }
            for c in comments {
                if c.is_empty() {
                    out.push_str("#\n");
                }
                for line in c.lines() {
                    out.push_str(if line.is_empty() { "#" } else { "# " });
                    out.push_str(line);
                    out.push('\n');
                }
            }
            out.push_str(&body);
            Ok(out)
        }
    }
}

/// Write `text` to `dir/file`, creating `dir`; an existing file is an error unless `force`.
/// An executable style gets the run bit.
pub(crate) fn write(dir: &Path, file: &str, text: &str, style: Style, force: bool) -> Result<PathBuf, String> {
    let path = dir.join(file);
    if !force && std::fs::symlink_metadata(&path).is_ok() {
        return Err(format!("{} exists; pass --force to overwrite it", path.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if style == Style::Executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", path.display()))?;
    }
    Ok(path)
}
