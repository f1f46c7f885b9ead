//! The manifest model (`*.tool.json`, `*.tool.toml`) and its loading.
//!
//! Loading never stops at the first problem it could report: unknown keys and
//! structural problems are errors that skip the file (with file, line and column),
//! and every message names the field.

use std::fmt;
use std::path::Path;

use indexmap::IndexMap;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::code::Code;
use crate::names::{MAX_NAME_LEN, did_you_mean, is_snake_case};
use crate::output::OutputSpec;
use crate::policy::Policy;
use crate::source::{Diagnostic, FieldPath, Seg, Severity, SourceFile, Syntax, Target};

/// A tool manifest, as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(crate) struct Manifest {
    /// Editor hint; ignored.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The tool's name (snake_case), used in function calls.
    pub name: String,
    /// What the tool does, for the model and for people.
    pub description: String,
    /// The manifest's own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Modes the tool is offered in (`Global`, `Coding`, ...); none means global.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modes: Vec<String>,
    /// Few-shot examples (FunctionGemma call syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Parameters, in declaration order.
    #[serde(default)]
    pub parameters: IndexMap<String, Parameter>,
    /// What to run.
    pub command: Command,
    /// Execution policy.
    #[serde(default)]
    pub policy: Policy,
    /// Output shaping.
    #[serde(default)]
    pub output: OutputSpec,
    /// Tests `packs test` runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<crate::tool_test::ToolTest>,
    /// `packs lint` settings for this manifest: rules it allows, each with the reason.
    #[serde(default, skip_serializing_if = "LintSettings::is_empty")]
    pub lint: LintSettings,
    /// Whether `policy.read_only` is written in the manifest (not the default).
    #[serde(skip)]
    pub read_only_stated: bool,
}

/// A manifest's `lint` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(crate) struct LintSettings {
    /// Lint codes this manifest allows, each with why (`option-injection = "…"`).
    #[serde(default)]
    pub allow: IndexMap<String, String>,
    /// What a person must still review (`packs convert` writes these); each is a warning
    /// until removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review: Vec<String>,
}

impl LintSettings {
    fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.review.is_empty()
    }
}

/// The JSON type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ParamType {
    /// A string.
    String,
    /// Any number.
    Number,
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A list.
    Array,
    /// An object.
    Object,
}

impl ParamType {
    /// The JSON-Schema type name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }
}

/// Where a parameter's value comes from when the call does not give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub(crate) enum ParamSource {
    /// The active URL.
    #[serde(rename = "context.url")]
    Url,
    /// The selected text.
    #[serde(rename = "context.selection")]
    Selection,
    /// The clipboard.
    #[serde(rename = "context.clipboard")]
    Clipboard,
    /// The active file.
    #[serde(rename = "context.file")]
    File,
    /// The caller's working directory.
    #[serde(rename = "context.cwd")]
    Cwd,
    /// The user's words.
    #[serde(rename = "transcript")]
    Transcript,
    /// Always the declared default; not offered to the model.
    #[serde(rename = "literal")]
    Literal,
}

impl ParamSource {
    /// The context key that fills this parameter, if any.
    pub(crate) fn context_key(self) -> Option<&'static str> {
        match self {
            Self::Url => Some("url"),
            Self::Selection => Some("selection"),
            Self::Clipboard => Some("clipboard"),
            Self::File => Some("file"),
            Self::Cwd => Some("cwd"),
            Self::Transcript => Some("transcript"),
            Self::Literal => None,
        }
    }
}

/// One declared parameter.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Parameter {
    /// Its JSON type.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// Must the call (or the context) give it?
    #[serde(default)]
    pub required: bool,
    /// What it means, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<Value>>,
    /// The value used when the call gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Where the value comes from when the call omits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ParamSource>,
    /// JSON Schema of array items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Value>,
    /// Regular expression a string must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Smallest number allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    /// Largest number allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// Shortest string allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Longest string allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// A format hint; `path` marks a filesystem path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Allow a leading `-` in a whole positional element (used by later checks).
    #[serde(default, skip_serializing_if = "std::ops::Not::not", rename = "allow_leading_dash")]
    pub allow_leading_dash: bool,
    /// More JSON Schema keywords for this parameter, merged into its schema after the fields
    /// above (`properties`, `required` and `additionalProperties` of a nested object,
    /// `minItems`, `oneOf`, …); a keyword here wins over the same one from a field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Map<String, Value>>,
}

impl Parameter {
    /// A filesystem path, or an array of them (`format: path` on the parameter or on its
    /// `items`): confined to the workspace.
    pub(crate) fn is_path(&self) -> bool {
        self.format.as_deref() == Some("path")
            || self.items.as_ref().and_then(|i| i.get("format")).and_then(Value::as_str) == Some("path")
    }

    /// Offered to the model (everything but `literal`).
    pub(crate) fn is_offered(&self) -> bool {
        self.source != Some(ParamSource::Literal)
    }
}

/// The command to run: a program and templated arguments.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Command {
    /// The program (a name looked up in `PATH`, or a path).
    pub program: String,
    /// Argument templates; each renders to exactly one argv element.
    pub args: Vec<Arg>,
    /// Environment variables (values are templates).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub env: IndexMap<String, String>,
    /// Working directory (a template).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// What the program reads on its standard input (a template); without it, `/dev/null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

/// One element of `command.args`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub(crate) enum Arg {
    /// A template rendering to one argv element (or a splat of an array).
    One(String),
    /// A group, omitted as a whole when a parameter it uses is absent or false.
    Group(Vec<String>),
}

#[derive(Deserialize)]
struct CommandTable {
    program: String,
    #[serde(default)]
    args: Vec<Arg>,
    #[serde(default)]
    env: IndexMap<String, String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    stdin: Option<String>,
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Command;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command line string or a table with `program` and `args`")
            }
            fn visit_str<E: de::Error>(self, line: &str) -> Result<Command, E> {
                split_command_line(line).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Command, A::Error> {
                let t = CommandTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Command { program: t.program, args: t.args, env: t.env, cwd: t.cwd, stdin: t.stdin })
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Arg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Arg;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a template string or an array of template strings (a group)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Arg, E> {
                Ok(Arg::One(s.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Arg, A::Error> {
                let items = Vec::<String>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                if items.is_empty() {
                    return Err(de::Error::custom("an argument group may not be empty"));
                }
                Ok(Arg::Group(items))
            }
        }
        d.deserialize_any(V)
    }
}

/// Split a one-line command (`"du -sh -- {{path}}"`) into program and args with
/// shell-words rules, once, at load time. Template expressions are kept whole,
/// so `{{#if human}}-h{{/if}}` stays one word even though it has a space.
pub(crate) fn split_command_line(line: &str) -> Result<Command, String> {
    // Mask each {{...}} with a private-use marker so shlex sees no spaces or quotes in it.
    let mut masked = String::with_capacity(line.len());
    let mut exprs = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else { break };
        masked.push_str(&rest[..start]);
        masked.push_str(&format!("\u{E000}{}\u{E001}", exprs.len()));
        exprs.push(&rest[start..start + len + 2]);
        rest = &rest[start + len + 2..];
    }
    masked.push_str(rest);
    let words =
        shlex::split(&masked).ok_or_else(|| format!("cannot split command line `{line}`: unbalanced quotes"))?;
    let unmask = |w: &str| {
        let mut out = w.to_owned();
        for (i, e) in exprs.iter().enumerate() {
            out = out.replace(&format!("\u{E000}{i}\u{E001}"), e);
        }
        out
    };
    let mut words = words.iter().map(|w| unmask(w));
    let program = words.next().ok_or_else(|| "the command line is empty".to_owned())?;
    Ok(Command { program, args: words.map(Arg::One).collect(), env: IndexMap::new(), cwd: None, stdin: None })
}

/// A parsed manifest with its source, and the warnings found while loading it.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    /// The manifest.
    pub manifest: Manifest,
    /// Its text, for locating later problems.
    pub source: SourceFile,
    /// Non-fatal problems (unknown keys...).
    pub warnings: Vec<Diagnostic>,
}

/// Every key the format knows at each level, for did-you-mean help.
pub(crate) fn known_keys(parent: &FieldPath) -> &'static [&'static str] {
    match parent.0.as_slice() {
        [] => &[
            "$schema",
            "name",
            "description",
            "version",
            "modes",
            "examples",
            "parameters",
            "command",
            "policy",
            "output",
            "tests",
            "lint",
        ],
        [Seg::Key(k), _] if k == "parameters" => &[
            "type",
            "required",
            "description",
            "enum",
            "default",
            "source",
            "items",
            "pattern",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "format",
            "allow_leading_dash",
            "schema",
        ],
        [Seg::Key(k)] if k == "command" => &["program", "args", "env", "cwd", "stdin"],
        [Seg::Key(k)] if k == "policy" => crate::policy::POLICY_KEYS,
        [Seg::Key(k)] if k == "output" => crate::output::OUTPUT_KEYS,
        [Seg::Key(k)] if k == "lint" => &["allow", "review"],
        [Seg::Key(k), Seg::Index(_)] if k == "tests" => crate::tool_test::TEST_KEYS,
        [Seg::Key(k), Seg::Index(_), Seg::Key(e)] if k == "tests" && e == "expect" => crate::tool_test::EXPECT_KEYS,
        [Seg::Key(k), _, Seg::Key(s), ..] if k == "parameters" && (s == "items" || s == "schema") => SCHEMA_KEYWORDS,
        _ => &[],
    }
}

/// The keywords of JSON Schema (draft 7, and the `$defs` of later drafts): what a
/// parameter's `items` and `schema` may hold. A validator ignores any other key, so a
/// misspelled one (`patern`) would silently check nothing.
const SCHEMA_KEYWORDS: &[&str] = &[
    "$id",
    "$schema",
    "$ref",
    "$comment",
    "$defs",
    "title",
    "description",
    "default",
    "readOnly",
    "writeOnly",
    "examples",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "additionalItems",
    "items",
    "maxItems",
    "minItems",
    "uniqueItems",
    "contains",
    "maxProperties",
    "minProperties",
    "required",
    "additionalProperties",
    "definitions",
    "properties",
    "patternProperties",
    "dependencies",
    "propertyNames",
    "const",
    "enum",
    "type",
    "format",
    "contentMediaType",
    "contentEncoding",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
];

/// Every key of the JSON Schema `schema` (at `at`) and of the schemas inside it that is not
/// a JSON Schema keyword.
fn unknown_schema_keys(schema: &Value, at: &FieldPath, out: &mut Vec<FieldPath>) {
    let Some(object) = schema.as_object() else { return };
    for (key, value) in object {
        let here = at.key(key);
        if !SCHEMA_KEYWORDS.contains(&key.as_str()) {
            out.push(here);
            continue;
        }
        match key.as_str() {
            // One schema.
            "items"
            | "additionalItems"
            | "additionalProperties"
            | "contains"
            | "propertyNames"
            | "not"
            | "if"
            | "then"
            | "else" => match value {
                Value::Array(list) => {
                    for (i, s) in list.iter().enumerate() {
                        unknown_schema_keys(s, &here.index(i), out);
                    }
                }
                _ => unknown_schema_keys(value, &here, out),
            },
            // A list of schemas.
            "allOf" | "anyOf" | "oneOf" => {
                for (i, s) in value.as_array().into_iter().flatten().enumerate() {
                    unknown_schema_keys(s, &here.index(i), out);
                }
            }
            // A map of names to schemas.
            "properties" | "patternProperties" | "definitions" | "$defs" | "dependencies" => {
                for (name, s) in value.as_object().into_iter().flatten() {
                    unknown_schema_keys(s, &here.key(name), out);
                }
            }
            _ => {}
        }
    }
}

fn ignored_path(p: &serde_ignored::Path<'_>) -> FieldPath {
    let mut segs = Vec::new();
    let mut cur = p;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                segs.push(Seg::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                segs.push(Seg::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    segs.reverse();
    FieldPath(segs)
}

fn error_path(p: &serde_path_to_error::Path) -> FieldPath {
    FieldPath(
        p.iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                _ => None,
            })
            .collect(),
    )
}

/// Read and parse the manifest at `path`. The syntax follows the name
/// (`.tool.json`, `.tool.toml`, `.json`); any other name is JSON when its first
/// character (after a `#!` line) is `{`, else TOML.
pub(crate) fn load(path: &Path) -> Result<Loaded, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Diagnostic::file(Severity::Error, Code::Unreadable, path, format!("cannot read: {e}"))])?;
    let syntax = Syntax::of_manifest(path).unwrap_or_else(|| {
        let body = if text.starts_with("#!") { text.find('\n').map_or("", |i| &text[i..]) } else { &text };
        let json = path.extension().is_some_and(|e| e == "json") || body.trim_start().starts_with('{');
        if json { Syntax::Json } else { Syntax::Toml }
    });
    parse(SourceFile::new(path.to_owned(), text, syntax))
}

/// Parse a manifest from its source text.
pub(crate) fn parse(source: SourceFile) -> Result<Loaded, Vec<Diagnostic>> {
    match parse_checked(source, UnknownKeys::Refuse) {
        (Some(loaded), errors) if errors.is_empty() => Ok(loaded),
        (_, errors) => Err(errors),
    }
}

/// Whether [`parse_checked`] reports the keys the format does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnknownKeys {
    /// As `unknown-key` errors.
    Refuse,
    /// Not at all: the caller finds them another way (lint, from the JSON Schema).
    Skip,
}

/// Parse a manifest, keeping it even when the structural checks (name, description...)
/// found errors, so a linter can go on checking it. Returns the manifest when it
/// deserialized, and the errors.
pub(crate) fn parse_checked(source: SourceFile, keys: UnknownKeys) -> (Option<Loaded>, Vec<Diagnostic>) {
    let mut unknown = Vec::new();
    let (result, read_only_stated) = crate::policy::noting_read_only(|| {
        if keys == UnknownKeys::Skip {
            // Without the wrappers that track each key's path (they allocate per key),
            // about twice as fast; a text that fails is parsed again below for the path.
            let quick = match source.syntax {
                Syntax::Json => serde_json::from_str(&source.text).ok(),
                Syntax::Toml => toml::from_str(&source.text).ok(),
            };
            if let Some(manifest) = quick {
                return Ok(manifest);
            }
        }
        match source.syntax {
            Syntax::Json => parse_json(&source, &mut unknown),
            Syntax::Toml => parse_toml(&source, &mut unknown),
        }
    });
    let manifest = match result {
        Ok(m) => {
            let mut m = Manifest { read_only_stated, ..m };
            // Kept for the life of a catalog, thousands at a time: no room to grow.
            m.parameters.shrink_to_fit();
            m.command.args.shrink_to_fit();
            m
        }
        Err(d) => return (None, vec![d]),
    };
    let mut warnings = Vec::new();
    let mut errors: Vec<Diagnostic> = match keys {
        UnknownKeys::Refuse => unknown.iter().map(|path| unknown_key(&source, path)).collect(),
        UnknownKeys::Skip => Vec::new(),
    };
    errors.extend(check(&manifest, &source, &mut warnings));
    (Some(Loaded { manifest, source, warnings }), errors)
}

/// The `unknown-key` error for the key at `path`: a key the format does not know would
/// otherwise be ignored (a misspelled `polcy` leaves the default policy, a misspelled
/// test expectation checks nothing), so the file is refused. Loading and lint's schema
/// check both build it here, with the same did-you-mean, or the keys that level knows.
pub(crate) fn unknown_key(source: &SourceFile, path: &FieldPath) -> Diagnostic {
    let (parent, key) = match path.0.split_last() {
        Some((Seg::Key(k), parent)) => (FieldPath(parent.to_vec()), k.clone()),
        _ => (FieldPath::default(), path.to_string()),
    };
    let where_ = if parent.0.is_empty() { String::new() } else { format!(" in `{parent}`") };
    let d = Diagnostic::at(
        source,
        Severity::Error,
        Code::UnknownKey,
        path,
        Target::Key,
        format!("unknown key `{key}`{where_}: packs would ignore it, so the file is refused"),
    );
    let known = known_keys(&parent);
    match did_you_mean(&key, known) {
        Some(k) => d.with_help(format!("did you mean `{k}`?")),
        None if !known.is_empty() => d.with_help(format!("the keys here are {}", known.join(", "))),
        None => d,
    }
}

fn parse_json(source: &SourceFile, unknown: &mut Vec<FieldPath>) -> Result<Manifest, Diagnostic> {
    let diagnostic = |inner: &serde_json::Error, path: &FieldPath| {
        // The model is read as the text is parsed, so a type error can come before a syntax
        // error later in the same value (`"parameters": [}`): the syntax error is the problem.
        let syntax_error = syntax_error(&source.text);
        let (inner, path) = match &syntax_error {
            Some(e) if !(inner.is_syntax() || inner.is_eof()) => (e, &FieldPath::default()),
            _ => (inner, path),
        };
        let syntax = syntax_error.is_some();
        let code = if syntax { Code::InvalidJson } else { Code::InvalidField };
        let mut msg = strip_position(&inner.to_string());
        if !syntax && msg == "expected value" {
            // serde_json's word for "this enum field holds the wrong kind of value".
            msg = format!("invalid value{}", expected_values(path));
        }
        let mut d = Diagnostic::file(Severity::Error, code, &source.path, field_message(path, &msg));
        if inner.line() > 0 {
            d.line = Some(inner.line());
            d.column = Some(inner.column());
        }
        if !path.0.is_empty() {
            d.field = Some(path.to_string());
        }
        d
    };
    let mut de = serde_json::Deserializer::from_str(&source.text);
    let mut record = |p: serde_ignored::Path<'_>| unknown.push(ignored_path(&p));
    let ignored = serde_ignored::Deserializer::new(&mut de, &mut record);
    let manifest = serde_path_to_error::deserialize(ignored).map_err(|e| {
        let path = error_path(e.path());
        schema_shaped_parameters(source, &path).unwrap_or_else(|| diagnostic(e.inner(), &path))
    })?;
    de.end().map_err(|e| diagnostic(&e, &FieldPath::default()))?;
    Ok(manifest)
}

fn parse_toml(source: &SourceFile, unknown: &mut Vec<FieldPath>) -> Result<Manifest, Diagnostic> {
    let syntax_error = |e: toml::de::Error, code, path: &FieldPath| {
        let d = Diagnostic::file(Severity::Error, code, &source.path, field_message(path, e.message()));
        let mut d = d.at_offset(source, e.span().map(|s| s.start));
        if !path.0.is_empty() {
            d.field = Some(path.to_string());
        }
        d
    };
    let de = toml::Deserializer::parse(&source.text)
        .map_err(|e| syntax_error(e, Code::InvalidToml, &FieldPath::default()))?;
    let mut record = |p: serde_ignored::Path<'_>| unknown.push(ignored_path(&p));
    let ignored = serde_ignored::Deserializer::new(de, &mut record);
    serde_path_to_error::deserialize(ignored).map_err(|e| {
        let path = error_path(e.path());
        schema_shaped_parameters(source, &path)
            .unwrap_or_else(|| syntax_error(e.into_inner(), Code::InvalidField, &path))
    })
}

/// Whether `parameters` is written as a JSON Schema object (`"type": "object"` with
/// `properties`), as OpenAI's and MCP's definitions are: the most common slip of someone
/// coming from them.
pub(crate) fn is_schema_shaped(parameters: &Value) -> bool {
    parameters.get("type").and_then(Value::as_str) == Some("object")
        && parameters.get("properties").is_some_and(Value::is_object)
}

/// One error that says what is wrong with a JSON-Schema-shaped `parameters` and how to
/// write it, instead of what serde or the schema say of its `type` and `properties`
/// entries read as parameters. Lint's schema check reports the same one.
pub(crate) fn schema_shaped_parameters_error(source: &SourceFile) -> Diagnostic {
    Diagnostic::at(
        source,
        Severity::Error,
        Code::InvalidField,
        &FieldPath::dotted("parameters"),
        Target::Key,
        "`parameters` is written as a JSON Schema (`\"type\": \"object\"` with `properties`); a manifest's `parameters` maps each parameter's name to its spec",
    )
    .with_help(
        "move the entries of `properties` up into `parameters`, and mark each name listed in `required` with `\"required\": true`; or make the manifest from the definition with `packs convert`",
    )
}

/// The error of [`schema_shaped_parameters_error`], when a failure to read the manifest at
/// `path` is one inside such a `parameters` (looked at only once reading has failed).
fn schema_shaped_parameters(source: &SourceFile, path: &FieldPath) -> Option<Diagnostic> {
    if !matches!(path.0.first(), Some(Seg::Key(k)) if k == "parameters") {
        return None;
    }
    let raw: Value = match source.syntax {
        Syntax::Json => serde_json::from_str(&source.text).ok()?,
        Syntax::Toml => toml::from_str(&source.text).ok()?,
    };
    is_schema_shaped(raw.get("parameters")?).then(|| schema_shaped_parameters_error(source))
}

/// The text's JSON syntax error, if it has one.
fn syntax_error(text: &str) -> Option<serde_json::Error> {
    serde_json::from_str::<de::IgnoredAny>(text).err()
}

/// The allowed values of an enumerated field, for messages.
fn expected_values(path: &FieldPath) -> &'static str {
    match path.0.last() {
        Some(Seg::Key(k)) if k == "type" => {
            "; expected one of \"string\", \"number\", \"integer\", \"boolean\", \"array\", \"object\""
        }
        Some(Seg::Key(k)) if k == "source" => {
            "; expected one of \"context.url\", \"context.selection\", \"context.clipboard\", \"context.file\", \"context.cwd\", \"transcript\", \"literal\""
        }
        Some(Seg::Key(k)) if k == "format" => "; expected one of \"text\", \"json\", \"markdown\"",
        _ => "",
    }
}

/// serde_json appends " at line L column C"; positions are reported separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

fn field_message(path: &FieldPath, msg: &str) -> String {
    // serde names the Rust type it wanted; a person wrote a table or an object.
    let msg = msg.replace("expected struct Parameter", "expected a parameter's spec (an object: type, description...)");
    let msg = match msg.find("expected struct ") {
        Some(i) => format!("{}expected an object", &msg[..i]),
        None => msg,
    };
    if path.0.is_empty() { msg } else { format!("`{path}`: {msg}") }
}

/// Where `schema` (a parameter's `items` or `schema`, at `at`) breaks JSON Schema draft 7's
/// meta-schema (`{"minimum": "x"}`): an error at the offending keyword. The validator a call
/// compiles from the parameters would refuse the same schema, at the first call instead of
/// at load.
fn invalid_schema(src: &SourceFile, schema: &Value, at: &FieldPath, errors: &mut Vec<Diagnostic>) {
    let meta = jsonschema::draft7::meta::validator();
    for e in meta.iter_errors(schema) {
        // The pointer's segments, as keys or indices by what they step into.
        let mut path = at.clone();
        let mut here = Some(schema);
        for seg in e.instance_path().to_string().split('/').skip(1) {
            let seg = seg.replace("~1", "/").replace("~0", "~");
            match (here, seg.parse::<usize>()) {
                (Some(Value::Array(items)), Ok(i)) => {
                    here = items.get(i);
                    path = path.index(i);
                }
                _ => {
                    here = here.and_then(|v| v.get(&seg));
                    path = path.key(&seg);
                }
            }
        }
        errors.push(Diagnostic::at(
            src,
            Severity::Error,
            Code::InvalidParameterSchema,
            &path,
            Target::Value,
            format!("`{path}` is not valid JSON Schema (draft 7): {e}"),
        ));
    }
}

/// Structural checks serde cannot express. Returns the errors; pushes warnings.
fn check(m: &Manifest, src: &SourceFile, warnings: &mut Vec<Diagnostic>) -> Vec<Diagnostic> {
    if m.output.extract_field.is_some() && !m.output.format.is_json() {
        warnings.push(Diagnostic::at(
            src,
            Severity::Warning,
            Code::ExtractFieldNeedsJson,
            &FieldPath::dotted("output.extract_field"),
            Target::Key,
            "`output.extract_field` has no effect unless `output.format` is `json` or `jsonl`",
        ));
    }
    let mut unknown = Vec::new();
    for (name, p) in &m.parameters {
        let at = FieldPath::dotted("parameters").key(name);
        if let Some(items) = &p.items {
            unknown_schema_keys(items, &at.key("items"), &mut unknown);
        }
        if let Some(schema) = &p.schema {
            unknown_schema_keys(&Value::Object(schema.clone()), &at.key("schema"), &mut unknown);
        }
    }
    let mut errors: Vec<Diagnostic> = unknown.iter().map(|path| unknown_key(src, path)).collect();
    for (name, p) in &m.parameters {
        let at = FieldPath::dotted("parameters").key(name);
        if let Some(items) = &p.items {
            invalid_schema(src, items, &at.key("items"), &mut errors);
        }
        if let Some(schema) = &p.schema {
            invalid_schema(src, &Value::Object(schema.clone()), &at.key("schema"), &mut errors);
        }
    }
    let mut err = |path: &str, code, msg: String| {
        errors.push(Diagnostic::at(src, Severity::Error, code, &FieldPath::dotted(path), Target::Value, msg));
    };
    if !is_snake_case(&m.name) {
        err(
            "name",
            Code::InvalidName,
            format!(
                "tool name `{}` must be snake_case: a lowercase letter, then lowercase letters, digits or `_`",
                m.name
            ),
        );
    } else if m.name.len() > MAX_NAME_LEN {
        err(
            "name",
            Code::InvalidName,
            format!("tool name is {} characters long; at most {MAX_NAME_LEN} are allowed", m.name.len()),
        );
    }
    if m.description.trim().is_empty() {
        err(
            "description",
            Code::EmptyDescription,
            "`description` may not be empty: the model reads it to choose the tool".into(),
        );
    }
    if m.command.program.trim().is_empty() {
        err("command.program", Code::EmptyProgram, "`command.program` may not be empty".into());
    }
    // Every name problem, then every literal without a default (the order they were reported in).
    let names = m.parameters.keys().filter_map(|name| {
        crate::names::parameter_name_problem(name).map(|message| (name, Code::InvalidParameterName, message))
    });
    let literals = m.parameters.iter().filter(|(_, p)| p.source == Some(ParamSource::Literal) && p.default.is_none());
    let literals = literals.map(|(name, _)| {
        let message = format!("parameter `{name}` has `source: literal` but no `default` to take its value from");
        (name, Code::LiteralWithoutDefault, message)
    });
    for (name, code, message) in names.chain(literals) {
        let at = FieldPath::dotted("parameters").key(name);
        errors.push(Diagnostic::at(src, Severity::Error, code, &at, Target::Key, message));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str, syntax: Syntax) -> Result<Loaded, Vec<Diagnostic>> {
        parse(SourceFile::new("m".into(), text.into(), syntax))
    }

    #[test]
    fn command_line_is_split_keeping_templates_whole() {
        let c = split_command_line("du -sh {{#if human}}-h{{/if}} -- '{{path}}' \"a b\"").unwrap();
        assert_eq!(c.program, "du");
        assert_eq!(c.args, ["-sh", "{{#if human}}-h{{/if}}", "--", "{{path}}", "a b"].map(|s| Arg::One(s.into())));
        assert!(split_command_line("echo 'open").is_err());
        assert!(split_command_line("   ").is_err());
    }

    #[test]
    fn unknown_keys_are_errors_with_position_and_suggestion() {
        let e = parse_str(
            "{\"name\":\"t\",\"description\":\"d\",\"command\":\"true\",\n\"policy\":{\"timout_secs\":5}}",
            Syntax::Json,
        )
        .unwrap_err();
        assert_eq!(e.len(), 1);
        let w = &e[0];
        assert_eq!((w.severity, w.code), (Severity::Error, Code::UnknownKey));
        assert_eq!((w.line, w.column), (Some(2), Some(11)));
        assert_eq!(w.help.as_deref(), Some("did you mean `timeout_secs`?"));
        let toml = "name = \"t\"\ndescription = \"d\"\ncommand = \"true\"\n\n[[tests]]\nname = \"x\"\n[tests.expect]\noutput = \"hi\"\n";
        let e = parse_str(toml, Syntax::Toml).unwrap_err();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].field.as_deref(), Some("tests.0.expect.output"));
        assert_eq!(e[0].line, Some(8));
        assert_eq!(e[0].help.as_deref(), Some("did you mean `output_equals`?"));
        // `$schema` is a key of the format.
        assert!(
            parse_str("{\"$schema\":\"x\",\"name\":\"t\",\"description\":\"d\",\"command\":\"true\"}", Syntax::Json)
                .is_ok()
        );
    }

    #[test]
    fn free_form_schemas_are_checked_at_load_where_they_break_the_meta_schema() {
        let text = "{\"name\":\"t\",\"description\":\"d\",\"command\":\"true\",\"parameters\":{\n\"w\":{\"type\":\"integer\",\"schema\":{\"minimum\":\"1\"}},\n\"l\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"int\"}]}}}}";
        let e = parse_str(text, Syntax::Json).unwrap_err();
        let found: Vec<_> = e.iter().map(|d| (d.code, d.field.as_deref(), d.line)).collect();
        assert!(
            found.contains(&(Code::InvalidParameterSchema, Some("parameters.w.schema.minimum"), Some(2))),
            "{found:?}"
        );
        assert!(
            found.contains(&(Code::InvalidParameterSchema, Some("parameters.l.items.anyOf.1.type"), Some(3))),
            "{found:?}"
        );
        // Valid keywords load.
        let ok = "{\"name\":\"t\",\"description\":\"d\",\"command\":\"true\",\"parameters\":{\"w\":{\"type\":\"integer\",\"schema\":{\"minimum\":1}}}}";
        assert!(parse_str(ok, Syntax::Json).is_ok());
    }

    #[test]
    fn type_errors_name_the_field_and_line() {
        let e = parse_str(
            "{\"name\":\"t\",\"description\":\"d\",\"command\":\"true\",\n\"policy\":{\"timeout_secs\":\"5\"}}",
            Syntax::Json,
        )
        .unwrap_err();
        assert_eq!(e[0].field.as_deref(), Some("policy.timeout_secs"));
        assert_eq!(e[0].line, Some(2));
        let e = parse_str("name = \"t\"\ndescription = \"d\"\ncommand = 5\n", Syntax::Toml).unwrap_err();
        assert_eq!(e[0].field.as_deref(), Some("command"));
        assert_eq!(e[0].line, Some(3));
    }

    #[test]
    fn bad_names_are_errors() {
        let e =
            parse_str("{\"name\":\"Bad-Name\",\"description\":\"d\",\"command\":\"true\"}", Syntax::Json).unwrap_err();
        assert_eq!(e[0].code, Code::InvalidName);
        assert_eq!(e[0].column, Some(9));
    }
}
