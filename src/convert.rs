//! `packs convert`: tool definitions from elsewhere made into manifests.
//!
//! - OpenAI (Chat Completions and Responses), Anthropic, Gemini and MCP tool definitions
//!   (one, an array, or a `tools/list` result): one manifest per tool, name, description and
//!   parameters carried over exactly (what a manifest parameter cannot state goes in its
//!   `schema`), a `command` to fill in, listed under `lint.review`.
//! - Agent Skills (`SKILL.md`, with OpenClaw's `metadata.openclaw` requirements): the body
//!   as a context module, and a manifest skeleton per required program.
//! - An executable that answers `--describe` is already a tool: it is left as it is, and
//!   the report says why.
//!
//! Nothing is written here: [`convert`] returns the files and the notes; the CLI writes
//! them all or none.

use std::path::Path;

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::code::Code;
use crate::scaffold::Style;
use crate::source::{Diagnostic, FieldPath, Severity, SourceFile, Syntax, Target};

/// What `packs convert` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Detect from the file.
    Auto,
    /// An Agent Skill's `SKILL.md`.
    Skill,
    /// OpenAI function tools (Chat Completions or Responses).
    Openai,
    /// Anthropic Messages tools.
    Anthropic,
    /// Gemini function declarations.
    Gemini,
    /// MCP tools (`tools/list` entries or result).
    Mcp,
    /// An executable that answers `--describe`.
    Describe,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Skill => "skill",
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Mcp => "mcp",
            Self::Describe => "describe",
        }
    }
}

/// Where a converted file goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    /// The pack directory (`--output`).
    Packs,
    /// The agent's context directory (`--context-dir`).
    Context,
}

/// One file to write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewFile {
    pub(crate) dest: Dest,
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) style: Style,
}

/// What converting one input gives: files, and what a person should know (what could
/// not be carried over, what was changed).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Converted {
    pub(crate) files: Vec<NewFile>,
    pub(crate) notes: Vec<String>,
}

/// Convert `path` (its text `text`), read as `kind`; `toml` writes TOML manifests.
/// Malformed input is a positioned diagnostic, and nothing of it is converted.
pub(crate) fn convert(path: &Path, text: &str, kind: Kind, toml: bool) -> Result<Converted, Vec<Diagnostic>> {
    let kind = if kind == Kind::Auto { detect(path, text) } else { kind };
    let style = if toml { Style::Toml } else { Style::Json };
    match kind {
        Kind::Skill => skill(path, text),
        Kind::Describe => Ok(Converted {
            files: Vec::new(),
            notes: vec![format!(
                "{}: an executable that answers --describe is already a packs tool: put it in a pack directory \
                 as it is. packs calls it with the arguments as one JSON argument, which a manifest's argv \
                 cannot spell, so no manifest is written (`packs describe NAME` shows its schema)",
                path.display()
            )],
        }),
        _ => definitions(path, text, kind, style),
    }
}

/// The kind of `path`: a `SKILL.md` (or text starting with `---`), an executable, or JSON
/// tool definitions of some API (by their shape).
fn detect(path: &Path, text: &str) -> Kind {
    if path.file_name().is_some_and(|n| n.eq_ignore_ascii_case("SKILL.md")) || text.starts_with("---") {
        return Kind::Skill;
    }
    if text.starts_with("#!") || (crate::runner::is_executable_file(path) && !text.trim_start().starts_with(['{', '[']))
    {
        return Kind::Describe;
    }
    let Ok(v) = serde_json::from_str::<Value>(text) else { return Kind::Openai };
    let entries = entries(&v);
    let first = entries.first().map(|(_, e)| *e).unwrap_or(&Value::Null);
    if v.get("functionDeclarations").is_some() || first.get("parametersJsonSchema").is_some() {
        Kind::Gemini
    } else if first.get("inputSchema").is_some() {
        Kind::Mcp
    } else if first.get("input_schema").is_some() {
        Kind::Anthropic
    } else if first.get("type").and_then(Value::as_str) == Some("function") {
        Kind::Openai
    } else if first
        .get("parameters")
        .is_some_and(|p| p.get("type").and_then(Value::as_str).is_some_and(|t| t == "OBJECT"))
    {
        Kind::Gemini
    } else {
        Kind::Openai
    }
}

/// The tool entries of a document, with their field paths: an array, one tool, `{"tools":
/// [...]}` (MCP `tools/list` result, also inside a JSON-RPC `result`), or Gemini's
/// `{"functionDeclarations": [...]}` (one, or an array of them).
fn entries(v: &Value) -> Vec<(FieldPath, &Value)> {
    fn list(p: FieldPath, a: &Value) -> Vec<(FieldPath, &Value)> {
        a.as_array().into_iter().flatten().enumerate().map(|(i, e)| (p.index(i), e)).collect()
    }
    let root = FieldPath::default();
    if let Some(result) = v.get("result").filter(|r| r.get("tools").is_some()) {
        return list(root.key("result").key("tools"), &result["tools"]);
    }
    if let Some(tools) = v.get("tools") {
        return list(root.key("tools"), tools);
    }
    if let Some(decls) = v.get("functionDeclarations") {
        return list(root.key("functionDeclarations"), decls);
    }
    match v {
        Value::Array(items) if items.iter().any(|i| i.get("functionDeclarations").is_some()) => items
            .iter()
            .enumerate()
            .flat_map(|(i, t)| list(root.index(i).key("functionDeclarations"), &t["functionDeclarations"]))
            .collect(),
        Value::Array(_) => list(root, v),
        Value::Object(_) => vec![(root, v)],
        _ => Vec::new(),
    }
}

fn definitions(path: &Path, text: &str, kind: Kind, style: Style) -> Result<Converted, Vec<Diagnostic>> {
    let src = SourceFile::new(path.to_owned(), text.to_owned(), Syntax::Json);
    let v: Value = serde_json::from_str(text).map_err(|e| {
        let mut d = Diagnostic::file(Severity::Error, Code::InvalidJson, path, format!("not JSON: {e}"));
        d.line = Some(e.line());
        d.column = Some(e.column());
        vec![d]
    })?;
    let entries = entries(&v);
    let mut errors = Vec::new();
    let err = |at: &FieldPath, message: String| {
        Diagnostic::at(&src, Severity::Error, Code::InvalidField, at, Target::Value, message)
    };
    if entries.is_empty() {
        errors.push(err(&FieldPath::default(), format!("no {} tool definitions found", kind.as_str())));
    }
    let mut out = Converted::default();
    let mut seen: IndexMap<String, FieldPath> = IndexMap::new();
    for (at, entry) in entries {
        let (name, description, schema) = match kind {
            Kind::Openai if entry.get("function").is_some() => {
                let f = &entry["function"];
                (f.get("name"), f.get("description"), f.get("parameters").cloned())
            }
            Kind::Openai => (entry.get("name"), entry.get("description"), entry.get("parameters").cloned()),
            Kind::Anthropic => (entry.get("name"), entry.get("description"), entry.get("input_schema").cloned()),
            Kind::Mcp => (entry.get("name"), entry.get("description"), entry.get("inputSchema").cloned()),
            _ => {
                let schema = match (entry.get("parametersJsonSchema"), entry.get("parameters")) {
                    (Some(js), _) => Some(js.clone()),
                    (None, Some(p)) => Some(from_gemini(p)),
                    (None, None) => None,
                };
                (entry.get("name"), entry.get("description"), schema)
            }
        };
        let Some(name) = name.and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            errors.push(err(&at, "this tool definition has no `name`".into()));
            continue;
        };
        if let Some(first) = seen.get(name) {
            errors.push(err(&at, format!("tool `{name}` is defined twice (first at `{first}`)")));
            continue;
        }
        seen.insert(name.to_owned(), at.clone());
        let description = description.and_then(Value::as_str).unwrap_or_default();
        let schema = schema.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        match manifest_of(name, description, &schema) {
            Ok((mut manifest, mut notes)) => {
                if kind == Kind::Mcp {
                    mcp_policy(entry, &mut manifest, &mut notes);
                }
                let tool = manifest["name"].as_str().unwrap_or(name).to_owned();
                let text = crate::scaffold::render(&manifest, style, &[]).map_err(|e| vec![err(&at, e)])?;
                out.files.push(NewFile { dest: Dest::Packs, name: style.file_name(&tool), text, style });
                out.notes.extend(notes.into_iter().map(|n| format!("{tool}: {n}")));
            }
            Err(message) => errors.push(err(&at, message)),
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// An MCP tool's annotations as the policy they describe: `readOnlyHint` is `read_only`
/// (stated, so the sandbox enforces it), `openWorldHint` is `requires_network`. A title
/// other than the one packs derives from the name is not kept.
fn mcp_policy(entry: &Value, manifest: &mut Value, notes: &mut Vec<String>) {
    let hints = entry.get("annotations").cloned().unwrap_or(Value::Null);
    let mut policy = Map::new();
    if let Some(ro) = hints.get("readOnlyHint").and_then(Value::as_bool) {
        policy.insert("read_only".into(), ro.into());
    }
    if let Some(net) = hints.get("openWorldHint").and_then(Value::as_bool) {
        policy.insert("requires_network".into(), net.into());
    }
    if !policy.is_empty() {
        manifest["policy"] = Value::Object(policy);
    }
    let derived = crate::formats::mcp::title(manifest["name"].as_str().unwrap_or_default());
    if let Some(title) = entry.get("title").and_then(Value::as_str).filter(|t| *t != derived) {
        notes.push(format!("its title `{title}` is not kept: packs titles a tool from its name (`{derived}`)"));
    }
}

/// Gemini's OpenAPI-subset `Schema` read back as JSON Schema: lower-case types, `nullable`
/// as a `null` type; the rest as it is (`propertyOrdering` dropped).
fn from_gemini(s: &Value) -> Value {
    let Value::Object(m) = s else { return s.clone() };
    let mut out = Map::new();
    for (k, v) in m {
        let v = match k.as_str() {
            "type" => Value::from(v.as_str().unwrap_or_default().to_ascii_lowercase()),
            "nullable" | "propertyOrdering" => continue,
            "items" => from_gemini(v),
            "properties" => {
                Value::Object(v.as_object().into_iter().flatten().map(|(n, p)| (n.clone(), from_gemini(p))).collect())
            }
            "anyOf" => Value::Array(v.as_array().into_iter().flatten().map(from_gemini).collect()),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if m.get("nullable") == Some(&Value::Bool(true))
        && let Some(t) = out.remove("type")
    {
        out.insert("type".into(), json!([t, "null"]));
    }
    Value::Object(out)
}

/// The manifest types.
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// Parameter keywords a manifest states as fields; any other goes in `schema`.
const FIELDS: &[&str] = &[
    "type",
    "description",
    "enum",
    "default",
    "items",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "format",
];

/// Whether keyword `k` with value `v` is stated as a manifest parameter field (of the type
/// that field takes); any other keyword goes in the parameter's `schema`.
fn as_field(k: &str, v: &Value) -> bool {
    FIELDS.contains(&k)
        && match k {
            "description" | "pattern" | "format" => v.is_string(),
            "enum" => v.is_array(),
            "minimum" | "maximum" => v.is_number(),
            "minLength" | "maxLength" => v.is_u64(),
            "items" => v.is_object(),
            _ => true,
        }
}

/// A manifest for a tool definition: parameters carried over exactly, a command to fill in.
fn manifest_of(name: &str, description: &str, schema: &Value) -> Result<(Value, Vec<String>), String> {
    let mut notes = Vec::new();
    let tool = if crate::names::is_snake_case(name) && name.len() <= 64 {
        name.to_owned()
    } else {
        let fixed: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let fixed = fixed.trim_start_matches(|c: char| !c.is_ascii_lowercase()).chars().take(64).collect::<String>();
        if !crate::names::is_snake_case(&fixed) {
            return Err(format!("`{name}` cannot be made a tool name (snake_case, starting with a letter)"));
        }
        notes.push(format!("renamed from `{name}`: a tool name is snake_case"));
        fixed
    };
    let Value::Object(root) = schema else { return Err("its parameters schema is not an object".into()) };
    if root.get("type").and_then(Value::as_str).is_some_and(|t| t != "object") {
        return Err("its parameters schema is not of type `object`".into());
    }
    for k in root
        .keys()
        .filter(|k| !matches!(k.as_str(), "type" | "properties" | "required" | "additionalProperties" | "$schema"))
    {
        notes.push(format!(
            "the parameters schema's `{k}` is not carried over (a manifest's root schema is its parameters)"
        ));
    }
    if root.get("additionalProperties") != Some(&Value::Bool(false)) {
        notes.push("packs refuses arguments the schema does not name (`additionalProperties: false`)".into());
    }
    let required: Vec<&str> =
        root.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut parameters = Map::new();
    let mut kinds = Vec::new();
    for (pname, p) in root.get("properties").and_then(Value::as_object).into_iter().flatten() {
        if let Some(problem) = crate::names::parameter_name_problem(pname) {
            return Err(problem);
        }
        let Value::Object(p) = p else { return Err(format!("parameter `{pname}`'s schema is not an object")) };
        let mut decl = Map::new();
        let mut extra = Map::new();
        let kind = match p.get("type") {
            Some(Value::String(t)) if TYPES.contains(&t.as_str()) => t.clone(),
            Some(Value::Array(list)) => {
                let first = list.iter().filter_map(Value::as_str).find(|t| *t != "null" && TYPES.contains(t));
                extra.insert("type".into(), Value::Array(list.clone()));
                first.unwrap_or("string").to_owned()
            }
            _ => {
                notes.push(format!("parameter `{pname}` states no single type: converted as a string, review it"));
                "string".to_owned()
            }
        };
        decl.insert("type".into(), kind.clone().into());
        decl.insert("required".into(), required.contains(&pname.as_str()).into());
        for (k, v) in p {
            if k == "type" {
                continue;
            }
            if as_field(k, v) {
                decl.insert(k.clone(), v.clone());
            } else {
                extra.insert(k.clone(), v.clone());
            }
        }
        if !extra.is_empty() {
            decl.insert("schema".into(), Value::Object(extra));
        }
        parameters.insert(pname.clone(), Value::Object(decl));
        kinds.push((pname.clone(), kind));
    }
    let mut args = Vec::new();
    let mut values = Vec::new();
    for (p, kind) in &kinds {
        match kind.as_str() {
            "boolean" => args.push(json!(format!("{{{{#if {p}}}}}--{}{{{{/if}}}}", p.replace('_', "-")))),
            "object" => values.push(json!(format!("{{{{json {p}}}}}"))),
            _ => values.push(json!(format!("{{{{{p}}}}}"))),
        }
    }
    if !values.is_empty() {
        args.push(json!("--"));
        args.extend(values);
    }
    let manifest = json!({
        "name": tool,
        "description": description,
        "parameters": parameters,
        "command": {"program": tool, "args": args},
        "lint": {"review": [
            "command: the program and its arguments are placeholders; write what runs",
            "policy: read_only, requires_network and the other limits are at their safe defaults; set what the command needs"
        ]}
    });
    Ok((manifest, notes))
}

/// A skill: its body as a context module, a manifest per required program.
fn skill(path: &Path, text: &str) -> Result<Converted, Vec<Diagnostic>> {
    let skill = crate::skill::parse(text).map_err(|e| {
        let mut d = Diagnostic::file(Severity::Error, Code::InvalidSkill, path, e.message.clone());
        d.line = e.line;
        d.column = e.line.map(|_| 1);
        vec![d]
    })?;
    let front = &skill.front;
    let problems = crate::skill::problems(front, None);
    let Some(name) = front.name.clone().filter(|_| !problems.iter().any(|(f, _)| *f == "name" && front.name.is_none()))
    else {
        let mut d = Diagnostic::file(Severity::Error, Code::InvalidSkill, path, "the skill has no `name`");
        d.line = Some(1);
        return Err(vec![d]);
    };
    let mut out = Converted::default();
    for (field, message) in &problems {
        out.notes.push(format!("{}: {field}: {message} (converted anyway)", path.display()));
    }
    let description = front.description.clone().unwrap_or_default();
    out.files.push(NewFile {
        dest: Dest::Context,
        name: format!("{}.md", name.replace(['/', '\\'], "_")),
        text: skill.body.clone(),
        style: Style::Json,
    });
    // OpenClaw's requirements: metadata.openclaw (aliases clawdbot, clawdis), which may be
    // a JSON string.
    let metadata = match &front.metadata {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
        Some(v) => v.clone(),
        None => Value::Null,
    };
    let (alias, claw) = ["openclaw", "clawdbot", "clawdis"]
        .iter()
        .find_map(|k| metadata.get(*k).map(|v| (*k, v.clone())))
        .unwrap_or(("openclaw", Value::Null));
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    let requires = claw.get("requires").cloned().unwrap_or(Value::Null);
    let bins = strings(requires.get("bins"));
    let any_bins = strings(requires.get("anyBins"));
    let env = strings(requires.get("env"));
    let primary = claw.get("primaryEnv").and_then(Value::as_str).map(str::to_owned);
    let os = strings(claw.get("os"));
    let install = claw.get("install").cloned();
    let relative = relative_programs(path, text, skill.body_line, alias, &bins, &any_bins);
    if !relative.is_empty() {
        return Err(relative);
    }
    if bins.is_empty() && any_bins.is_empty() {
        out.notes.push(format!(
            "{}: the skill names no required program (metadata.openclaw.requires.bins): only its context module is written",
            path.display()
        ));
    }
    if !any_bins.is_empty() {
        out.notes.push(format!(
            "{}: one of {} is required (anyBins): a manifest is written for each",
            path.display(),
            any_bins.join(", ")
        ));
    }
    if let Some(tools) = &front.allowed_tools {
        out.notes.push(format!(
            "{}: allowed-tools {tools} is not converted: packs decides what a tool may do by its policy and an agent's rules",
            path.display()
        ));
    }
    if let Some(c) = requires.get("config") {
        out.notes
            .push(format!("{}: requires.config {c} is not converted: give the tool what it reads", path.display()));
    }
    for bin in bins.iter().chain(&any_bins) {
        let tool: String =
            bin.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
        let tool = tool.trim_start_matches(|c: char| !c.is_ascii_lowercase()).to_owned();
        if !crate::names::is_snake_case(&tool) {
            out.notes.push(format!("{}: program `{bin}` gives no tool name: not converted", path.display()));
            continue;
        }
        let mut command = json!({"program": bin, "args": []});
        let mut review = vec![
            format!("command: `{bin}`'s arguments are to be written: what the skill's instructions run"),
            "policy: read_only, requires_network and the other limits are at their safe defaults; set what the command needs".to_owned(),
            "parameters: none yet; declare what a model may choose".to_owned(),
        ];
        let passthrough: Vec<&String> = env.iter().filter(|e| Some(*e) != primary.as_ref()).collect();
        if let Some(p) = &primary {
            command["env"] = json!({ p: format!("{{{{secret.{p}}}}}") });
        }
        let mut manifest = json!({
            "name": tool,
            "description": format!("Run {bin} for the {name} skill: {description}"),
            "command": command,
            "lint": {"review": []}
        });
        if !passthrough.is_empty() {
            manifest["policy"] = json!({"env_passthrough": passthrough});
            review.push(format!(
                "policy.env_passthrough: {} pass through from packs' environment",
                passthrough.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        if !os.is_empty() {
            review.push(format!("the skill runs on: {}", os.join(", ")));
        }
        manifest["lint"]["review"] = json!(review);
        let mut comments = vec![
            format!("Converted by `packs convert` from {} (skill `{name}`).", path.display()),
            "Review every `lint.review` entry, then remove it.".to_owned(),
        ];
        if let Some(install) = &install {
            comments.push(String::new());
            comments.push("How the skill says to install what it needs (packs convert never runs these):".to_owned());
            let steps = match install {
                Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            for step in steps {
                comments.push(format!("  {step}"));
            }
        }
        let style = Style::Toml;
        let text = crate::scaffold::render(&manifest, style, &comments)
            .map_err(|e| vec![Diagnostic::file(Severity::Error, Code::Internal, path, e)])?;
        out.files.push(NewFile { dest: Dest::Packs, name: style.file_name(&tool), text, style });
    }
    Ok(out)
}

/// A required program named by a relative path (`./payload`, `bin/run`, `../x`) is refused:
/// the manifest would run whatever file of that name lies in the directory packs runs
/// from, the workspace a model may write to. Each is an error at its line of the skill.
fn relative_programs(
    path: &Path,
    text: &str,
    body_line: usize,
    alias: &str,
    bins: &[String],
    any_bins: &[String],
) -> Vec<Diagnostic> {
    let named = bins.iter().enumerate().map(|(i, b)| ("bins", i, b));
    let named = named.chain(any_bins.iter().enumerate().map(|(i, b)| ("anyBins", i, b)));
    let mut out = Vec::new();
    for (list, i, bin) in named.filter(|(_, _, b)| b.contains('/') && !b.starts_with('/')) {
        let field = format!("metadata.{alias}.requires.{list}.{i}");
        let mut d = Diagnostic::file(
            Severity::Error,
            Code::InvalidSkill,
            path,
            format!(
                "`{field}`: the program `{bin}` is a relative path: a manifest would run whatever file of that \
                 name is in the directory packs runs from (the workspace, which a tool or a model may write)"
            ),
        )
        .with_help("name a program on PATH, or give its absolute path, and convert again");
        // The frontmatter's line that names it (its first mention), else the frontmatter's start.
        let found = text
            .lines()
            .enumerate()
            .take(body_line.saturating_sub(1))
            .skip(1)
            .find_map(|(n, line)| line.find(bin.as_str()).map(|col| (n + 1, line[..col].chars().count() + 1)));
        let (line, column) = found.unwrap_or((1, 1));
        d.line = Some(line);
        d.column = Some(column);
        d.field = Some(field);
        out.push(d);
    }
    out
}
