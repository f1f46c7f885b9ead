//! The schema check: a manifest's text parsed as JSON (TOML through its serde model)
//! and checked against the published `schemas/tool-pack.v1.json`, each violation
//! placed at the key or value it is about.

use std::sync::OnceLock;

use serde_json::Value;

use super::Code;
use crate::manifest;
use crate::source::{Diagnostic, FieldPath, Seg, Severity, SourceFile, Syntax, Target};

/// The published manifest schema, compiled once.
const TOOL_PACK_SCHEMA: &str = include_str!("../../schemas/tool-pack.v1.json");

/// Parse the text into a JSON value (TOML through its serde model).
pub(super) fn parse_value(src: &SourceFile) -> Result<Value, Diagnostic> {
    match src.syntax {
        Syntax::Json => serde_json::from_str(&src.text).map_err(|e| {
            let mut d = Diagnostic::file(Severity::Error, Code::InvalidJson, &src.path, strip_position(&e.to_string()));
            if e.line() > 0 {
                let offset = offset_of_line_col(&src.text, e.line(), e.column());
                d = d.at_offset(src, Some(offset));
            }
            d
        }),
        Syntax::Toml => toml::from_str(&src.text).map_err(|e: toml::de::Error| {
            Diagnostic::file(Severity::Error, Code::InvalidToml, &src.path, e.message().to_owned())
                .at_offset(src, e.span().map(|s| s.start))
        }),
    }
}

fn strip_position(msg: &str) -> String {
    msg.rfind(" at line ").map_or_else(|| msg.to_owned(), |i| msg[..i].to_owned())
}

/// Byte offset of a 1-based line and column (serde_json's columns count bytes).
pub(crate) fn offset_of_line_col(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column.saturating_sub(1)).min(text.len())
}

fn tool_pack_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value = serde_json::from_str(TOOL_PACK_SCHEMA).unwrap_or(Value::Bool(true));
        jsonschema::validator_for(&schema).unwrap_or_else(|_| {
            jsonschema::validator_for(&Value::Bool(true)).unwrap_or_else(|_| unreachable!("`true` is a valid schema"))
        })
    })
}

/// Checks the JSON Schema covers better than serde, with rule codes where a rule owns the field.
pub(super) fn diagnostics(src: &SourceFile, raw: &Value) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // Everything the schema says of a JSON-Schema-shaped `parameters` follows from that one
    // mistake: say it once.
    let schema_shaped = raw.get("parameters").is_some_and(manifest::is_schema_shaped);
    if schema_shaped {
        out.push(manifest::schema_shaped_parameters_error(src));
    }
    for e in tool_pack_validator().iter_errors(raw) {
        if schema_shaped && e.instance_path().to_string().starts_with("/parameters") {
            continue;
        }
        schema_error(src, &e, &mut out);
    }
    out
}

fn schema_error(src: &SourceFile, e: &jsonschema::ValidationError<'_>, out: &mut Vec<Diagnostic>) {
    use jsonschema::error::ValidationErrorKind as Kind;
    let here = e.instance_path().to_string();
    let path = pointer_path(&here);
    let dotted = path.to_string();
    // Fields with their own rules (and codes) are checked there.
    // A reserved parameter name is reported by the manifest model, which says why.
    let reserved_name = dotted == "parameters"
        && matches!(e.kind(), Kind::PropertyNames { error } if matches!(error.kind(), Kind::Not { .. }));
    let owned = reserved_name
        || dotted == "name"
        || dotted == "description"
        || dotted.starts_with("policy.timeout_secs")
        || dotted.starts_with("policy.allowed_exit_codes");
    if owned {
        return;
    }
    match e.kind() {
        Kind::AdditionalProperties { unexpected } => {
            out.extend(unexpected.iter().map(|key| manifest::unknown_key(src, &path.key(key))));
        }
        // "Not valid under any of the schemas" says little. When exactly one of the
        // alternatives is for this value's type (`command` as a string or an
        // object), what is wrong is what that alternative says.
        Kind::OneOfNotValid { context } | Kind::AnyOf { context } => {
            let wrong_type = |s: &jsonschema::ValidationError<'_>| {
                matches!(s.kind(), Kind::Type { .. }) && s.instance_path().to_string() == here
            };
            let mut meant = context.iter().filter(|errs| !errs.is_empty() && !errs.iter().any(wrong_type));
            // No alternative is for this type: say which types are.
            let wanted: Vec<String> = context
                .iter()
                .flatten()
                .filter(|s| wrong_type(s))
                .filter_map(|s| match s.kind() {
                    Kind::Type { kind: jsonschema::error::TypeKind::Single(t) } => Some(format!("{t}")),
                    _ => None,
                })
                .collect();
            match (meant.next(), meant.next()) {
                (Some(errs), None) => errs.iter().for_each(|s| schema_error(src, s, out)),
                (None, _) if !wanted.is_empty() && wanted.len() == context.len() => {
                    let found = e.instance();
                    let message = format!("`{dotted}` must be {}, not {found}", wanted.join(" or "));
                    out.push(violation(src, &path, message));
                }
                _ => out.push(violation(src, &path, format!("`{dotted}`: {e}"))),
            }
        }
        _ => out.push(violation(src, &path, format!("`{dotted}`: {e}"))),
    }
}

fn violation(src: &SourceFile, path: &FieldPath, message: String) -> Diagnostic {
    let code = match path.0.last() {
        Some(Seg::Key(k)) if k == "source" => Code::UnknownSource,
        _ => Code::SchemaViolation,
    };
    Diagnostic::at(src, Severity::Error, code, path, Target::Value, message)
}

/// `/parameters/url/type` → `parameters.url.type` (array indices as indices).
fn pointer_path(pointer: &str) -> FieldPath {
    FieldPath(
        pointer
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .map(|s| match s.parse() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key(s),
            })
            .collect(),
    )
}
