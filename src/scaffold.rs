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

/// The manifest `packs new` writes: the program, each parameter rendered into argv (flags
/// for booleans, the values after `--`, so none can become an option), read-only and
/// other policies at their safe defaults, and one dry-run test whose expected argv the
/// template gives for sample values.
pub(crate) fn new_manifest(name: &str, program: &str, description: &str, params: &[ParamSpec]) -> Value {
    let mut parameters = Map::new();
    let mut flags = Vec::new();
    let mut values = Vec::new();
    let mut args_in = Map::new();
    let mut argv = vec![json!(program)];
    let mut argv_values = Vec::new();
    for p in params {
        let mut decl = Map::new();
        decl.insert("type".into(), p.kind.clone().into());
        if p.kind == "array" {
            decl.insert("items".into(), json!({"type": "string"}));
        }
        decl.insert("required".into(), p.required.into());
        decl.insert("description".into(), format!("TODO: what `{}` is", p.name).into());
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
        args.push(json!("--"));
        argv.push(json!("--"));
        args.extend(values);
        argv.extend(argv_values);
    }
    json!({
        "name": name,
        "description": description,
        "parameters": parameters,
        "command": {"program": program, "args": args},
        "policy": {"read_only": true, "requires_network": false, "timeout_secs": 30},
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
