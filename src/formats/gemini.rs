//! Gemini API function declarations: `{"functionDeclarations": [{"name", "description", "parameters"}]}`.
//!
//! `parameters` is Gemini's `Schema`, a select subset of the OpenAPI 3.0 schema object,
//! not JSON Schema: types are the upper-case `Type` enum names, `null` is `nullable`, and
//! only the fields in [`SCHEMA_FIELDS`] exist. See [`schema`] and `docs/FORMATS.md`.

use serde_json::{Map, Value, json};

use crate::tool::Tool;

/// The `Type` enum values (`NULL` is expressed as `nullable`).
pub const TYPES: &[&str] = &["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"];

/// The fields of Gemini's `Schema` an export may contain.
pub const SCHEMA_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "propertyOrdering",
    "example",
];

/// The `format` values Gemini documents, by type; any other `format` is dropped.
pub fn format_allowed(ty: &str, format: &str) -> bool {
    matches!(
        (ty, format),
        ("STRING", "enum" | "date-time") | ("NUMBER", "float" | "double") | ("INTEGER", "int32" | "int64")
    )
}

/// The `tools` entry holding every tool's declaration, in the order given.
pub fn tools(tools: &[&Tool]) -> Value {
    json!({"functionDeclarations": tools.iter().map(|t| tool(t)).collect::<Vec<_>>()})
}

/// Keywords Gemini's `Schema` cannot say and whose loss would change what a value may be;
/// a schema holding one of them (or a type list of more than one type besides `null`, a
/// `const` that is not a string, or an `additionalProperties` schema: a map Gemini's
/// `OBJECT` cannot hold) is exported as `parametersJsonSchema`, JSON Schema as is.
/// What [`schema`] can carry with a small loss stays `parameters` (an enum of numbers is
/// listed in the description; `exclusiveMinimum` and `multipleOf` are dropped, and packs
/// still validates them).
pub const JSON_SCHEMA_ONLY: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
];

/// Whether `s` uses something Gemini's `Schema` cannot say (see [`JSON_SCHEMA_ONLY`]),
/// at any depth.
pub fn needs_json_schema(s: &Value) -> bool {
    let Value::Object(m) = s else { return false };
    m.iter().any(|(k, v)| match k.as_str() {
        k if JSON_SCHEMA_ONLY.contains(&k) => true,
        // `[T, "null"]` is `nullable`; more types than that are not.
        "type" => v.as_array().is_some_and(|t| t.iter().filter(|t| *t != "null").count() > 1),
        "const" => !v.is_string(),
        "additionalProperties" => v.is_object(),
        "properties" => v.as_object().is_some_and(|p| p.values().any(needs_json_schema)),
        "items" => needs_json_schema(v),
        "anyOf" => v.as_array().is_some_and(|a| a.iter().any(needs_json_schema)),
        _ => false,
    })
}

/// One function declaration. `parameters` is left out when the tool takes none: Gemini
/// rejects an `OBJECT` schema without properties, and documents leaving it unset. A
/// schema Gemini's `Schema` cannot say ([`needs_json_schema`]) is given as
/// `parametersJsonSchema` instead, unchanged.
pub fn tool(t: &Tool) -> Value {
    let mut decl = Map::new();
    decl.insert("name".into(), t.name().into());
    decl.insert("description".into(), t.description().into());
    let source = super::parameters(t);
    if needs_json_schema(&source) {
        decl.insert("parametersJsonSchema".into(), source);
        return Value::Object(decl);
    }
    let parameters = schema(&source);
    if parameters.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
        decl.insert("parameters".into(), parameters);
    }
    Value::Object(decl)
}

/// Convert a JSON Schema to Gemini's `Schema`, recursively:
///
/// - `type` becomes upper case (`"string"` → `"STRING"`); a type list drops `"null"` for
///   `nullable: true`, and more than one other type becomes `anyOf`;
/// - `enum` stays when its values are strings (a `null` value becomes `nullable`); an enum
///   of other values is dropped and listed in the description instead, since Gemini's
///   `enum` holds strings; a string `const` becomes a one-value `enum`;
/// - `required` keeps only names listed in `properties`, and is left out when empty;
/// - `format` stays only when [`format_allowed`];
/// - every field outside [`SCHEMA_FIELDS`] is dropped: `additionalProperties`, `default`,
///   `$schema`, `$ref`, `$defs`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`,
///   `oneOf`, `allOf`, `not`, …
pub fn schema(s: &Value) -> Value {
    let Value::Object(src) = s else { return json!({}) };
    let mut out = Map::new();
    let mut note = None;
    let (ty, nullable, others) = gemini_type(src.get("type"));
    let properties = src.get("properties").and_then(Value::as_object);
    for (key, value) in src {
        match key.as_str() {
            "type" => {
                if let Some(t) = &ty {
                    out.insert("type".into(), t.clone().into());
                }
                if nullable {
                    out.insert("nullable".into(), true.into());
                }
                if !others.is_empty() {
                    let branches = others.iter().map(|t| json!({"type": t})).collect();
                    out.insert("anyOf".into(), Value::Array(branches));
                }
            }
            "format" => {
                if let (Some(t), Some(f)) = (&ty, value.as_str())
                    && format_allowed(t, f)
                {
                    out.insert(key.clone(), value.clone());
                }
            }
            "enum" => {
                let values = value.as_array().map(Vec::as_slice).unwrap_or_default();
                if values.iter().all(|v| v.is_string() || v.is_null()) {
                    let strings: Vec<Value> = values.iter().filter(|v| v.is_string()).cloned().collect();
                    if values.iter().any(Value::is_null) {
                        out.insert("nullable".into(), true.into());
                    }
                    out.insert(key.clone(), Value::Array(strings));
                } else {
                    let listed: Vec<String> = values.iter().map(Value::to_string).collect();
                    note = Some(format!("One of: {}.", listed.join(", ")));
                }
            }
            "const" => match value {
                Value::String(_) => {
                    out.insert("enum".into(), json!([value]));
                }
                other => note = Some(format!("Always {other}.")),
            },
            "properties" => {
                let props = properties.into_iter().flatten().map(|(name, p)| (name.clone(), schema(p))).collect();
                out.insert(key.clone(), Value::Object(props));
            }
            "required" => {
                let names: Vec<Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|n| n.as_str().is_some_and(|n| properties.is_some_and(|p| p.contains_key(n))))
                    .cloned()
                    .collect();
                if !names.is_empty() {
                    out.insert(key.clone(), Value::Array(names));
                }
            }
            "items" => {
                out.insert(key.clone(), schema(value));
            }
            "anyOf" => {
                let branches = value.as_array().into_iter().flatten().map(schema).collect();
                out.insert(key.clone(), Value::Array(branches));
            }
            "nullable" if value.as_bool() == Some(true) => {
                out.insert(key.clone(), value.clone());
            }
            "nullable" => {}
            k if SCHEMA_FIELDS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    if let Some(note) = note {
        let description = match out.get("description").and_then(Value::as_str) {
            Some(d) if d.ends_with(['.', '!', '?']) => format!("{d} {note}"),
            Some(d) if !d.is_empty() => format!("{d}. {note}"),
            _ => note,
        };
        out.insert("description".into(), description.into());
    }
    Value::Object(out)
}

/// The Gemini type of a JSON-Schema `type`: the single type, whether `null` was allowed,
/// and the types when there are several (for `anyOf`).
fn gemini_type(t: Option<&Value>) -> (Option<String>, bool, Vec<String>) {
    let names: Vec<&str> = match t {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = names.contains(&"null");
    let upper: Vec<String> = names.iter().filter(|n| **n != "null").map(|n| n.to_ascii_uppercase()).collect();
    match upper.len() {
        0 => (None, nullable, Vec::new()),
        1 => (upper.into_iter().next(), nullable, Vec::new()),
        _ => (None, nullable, upper),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_the_openapi_subset() {
        let s = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where", "format": "path", "default": "."},
                "when": {"type": ["string", "null"], "format": "date-time"},
                "n": {"type": "integer", "enum": [1, 2], "exclusiveMinimum": 0},
                "unit": {"type": "string", "enum": ["c", "f"], "minLength": 1, "pattern": "^[cf]$"},
                "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}},
                         "required": ["k", "missing"], "additionalProperties": false}}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        assert_eq!(
            schema(&s),
            json!({
                "type": "OBJECT",
                "properties": {
                    "path": {"type": "STRING", "description": "Where"},
                    "when": {"type": "STRING", "nullable": true, "format": "date-time"},
                    "n": {"type": "INTEGER", "description": "One of: 1, 2."},
                    "unit": {"type": "STRING", "enum": ["c", "f"], "minLength": 1, "pattern": "^[cf]$"},
                    "list": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {"k": {"type": "BOOLEAN"}},
                             "required": ["k"]}}
                },
                "required": ["path"]
            })
        );
    }
}
