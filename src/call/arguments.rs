//! Arguments: read (an object, or a JSON string holding one), filled from the context,
//! validated against the tool's schema, completed with literals and defaults.

use serde_json::{Map, Value};

use crate::call::{Context, FieldError, ToolError};
use crate::tool::Tool;

/// Arguments after context filling, validation, literals and defaults.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Arguments {
    /// What the call, the context or a literal gave.
    pub(crate) given: Map<String, Value>,
    /// `given` plus declared defaults.
    pub(crate) resolved: Map<String, Value>,
}

/// Turn raw arguments (an object, a JSON string holding one, or null) into an object.
pub(crate) fn parse_arguments(tool: &str, args: Value) -> Result<Map<String, Value>, ToolError> {
    let invalid = |message: String| ToolError::InvalidArguments { tool: tool.to_owned(), message };
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => Err(invalid(format!("expected a JSON object; the string holds {}", type_name(&other)))),
            Err(e) => Err(invalid(format!("expected a JSON object; the string is not JSON ({e})"))),
        },
        other => Err(invalid(format!("expected a JSON object, got {}", type_name(&other)))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Fill context values, validate against the tool's schema, add literals and defaults.
pub(crate) fn prepare(tool: &Tool, args: Value, context: &Context) -> Result<Arguments, ToolError> {
    let mut given = parse_arguments(tool.name(), args)?;
    if let Some(m) = tool.manifest() {
        for (name, p) in &m.parameters {
            if let Some(key) = p.source.and_then(|s| s.context_key())
                && !given.contains_key(name)
                && let Some(v) = context.values().get(key)
            {
                given.insert(name.clone(), v.clone());
            }
        }
    }
    validate(tool, &given)?;
    reject_nul_bytes(tool, &given)?;
    let mut resolved = given.clone();
    if let Some(m) = tool.manifest() {
        for (name, p) in &m.parameters {
            if !p.is_offered()
                && let Some(d) = &p.default
            {
                given.insert(name.clone(), d.clone());
            }
            if let Some(v) = given.get(name).or(p.default.as_ref()) {
                resolved.insert(name.clone(), v.clone());
            }
        }
    }
    Ok(Arguments { given, resolved })
}

fn validate(tool: &Tool, args: &Map<String, Value>) -> Result<(), ToolError> {
    // A synthesized schema only constrains properties it lists: no arguments are valid
    // exactly when nothing is required. Skipping the validator then saves its one-time
    // preparation (about half a millisecond) for argument-less calls.
    if args.is_empty() && tool.manifest().is_some_and(|m| !m.parameters.values().any(|p| p.required)) {
        return Ok(());
    }
    let validator =
        tool.validator().map_err(|message| ToolError::BrokenTool { tool: tool.name().to_owned(), message })?;
    let instance = Value::Object(args.clone());
    let schema = tool.validation_schema();
    let errors: Vec<FieldError> = validator
        .iter_errors(&instance)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let at = pointer.trim_start_matches('/');
            let within = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}/{name}") };
            // The schema that holds the failing keyword (`required` sits in the object's schema).
            let keyword_path = e.schema_path().to_string();
            let holder = keyword_path.rsplit_once('/').and_then(|(parent, _)| schema.pointer(parent));
            let properties = holder.and_then(|h| h.get("properties"));
            match e.kind() {
                jsonschema::error::ValidationErrorKind::Required { property: p } => {
                    let name = p.as_str().unwrap_or_default();
                    let field = within(name);
                    FieldError {
                        message: format!("`{field}` is required"),
                        schema: properties.and_then(|p| p.get(name)).cloned(),
                        field,
                    }
                }
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    let known: Vec<&str> = properties
                        .and_then(Value::as_object)
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let message = format!(
                        "unknown argument{} {}{}; {} takes: {}",
                        if unexpected.len() > 1 { "s" } else { "" },
                        unexpected.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
                        if at.is_empty() { String::new() } else { format!(" in `{at}`") },
                        if at.is_empty() { "the tool".to_owned() } else { format!("`{at}`") },
                        if known.is_empty() { "no arguments".to_owned() } else { known.join(", ") }
                    );
                    let field = unexpected.iter().map(|u| within(u)).collect::<Vec<_>>().join(", ");
                    FieldError { message, schema: holder.cloned().filter(|_| !at.is_empty()), field }
                }
                _ => FieldError {
                    message: e.to_string(),
                    schema: holder.cloned().or_else(|| {
                        let root = at.split('/').next().unwrap_or_default();
                        schema.get("properties").and_then(|p| p.get(root)).cloned()
                    }),
                    field: at.to_owned(),
                },
            }
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

/// A manifest tool's values become argv elements and environment values, which cannot
/// hold a NUL byte: such a value is the caller's mistake to fix, not a failure to run.
/// A value only `command.stdin` reads is data on a pipe, and may hold one.
fn reject_nul_bytes(tool: &Tool, given: &Map<String, Value>) -> Result<(), ToolError> {
    fn has_nul(v: &Value) -> bool {
        match v {
            Value::String(s) => s.contains('\0'),
            Value::Array(items) => items.iter().any(has_nul),
            Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }
    if tool.manifest().is_none() {
        return Ok(()); // executables and native tools receive JSON, which carries `\u0000`
    }
    let command = tool.command().and_then(Result::ok);
    let errors: Vec<FieldError> = given
        .iter()
        .filter(|(name, v)| has_nul(v) && !command.is_some_and(|c| c.only_on_stdin(name)))
        .map(|(name, _)| FieldError {
            field: name.clone(),
            message: "contains a NUL byte, which no program argument or environment variable can carry; remove it"
                .to_owned(),
            schema: tool.validation_schema().get("properties").and_then(|p| p.get(name)).cloned(),
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::{Catalog, SearchPath};

    /// `args` prepared for the one tool `manifest` declares, in an empty context.
    fn prepared(manifest: Value, args: Value) -> Result<Arguments, ToolError> {
        let dir = tempfile::tempdir().unwrap();
        let name = manifest["name"].as_str().unwrap().to_owned();
        std::fs::write(dir.path().join(format!("{name}.tool.json")), manifest.to_string()).unwrap();
        let catalog = Catalog::load(&SearchPath::dirs([dir.path()]));
        assert!(!catalog.has_errors(), "{:?}", catalog.diagnostics);
        prepare(catalog.get(&name).unwrap(), args, &Context::new())
    }

    fn field_errors(result: Result<Arguments, ToolError>) -> Vec<FieldError> {
        match result {
            Err(ToolError::Validation { errors, .. }) => errors,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_argument_carries_the_schema_of_the_object_it_is_in_unless_that_is_the_tool() {
        let opts = json!({"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": false});
        let tool = json!({"name": "t", "description": "d", "parameters": {"opts": {"type": "array", "items": opts}},
                          "command": {"program": "echo", "args": ["{{json opts}}"]}});
        let top = field_errors(prepared(tool.clone(), json!({"zzz": 1})));
        assert_eq!((top[0].field.as_str(), &top[0].schema), ("zzz", &None), "{top:?}");
        let nested = field_errors(prepared(tool, json!({"opts": [{"k": "a", "x": 1}]})));
        assert_eq!(nested[0].field, "opts/0/x");
        assert_eq!(nested[0].message, "unknown argument `x` in `opts/0`; `opts/0` takes: k");
        assert_eq!(nested[0].schema.as_ref(), Some(&opts), "{nested:?}");
    }

    #[test]
    fn a_nul_byte_in_an_objects_key_or_in_one_of_its_values_is_refused() {
        let tool = json!({"name": "t", "description": "d", "parameters": {"opts": {"type": "object"}},
                          "command": {"program": "echo", "args": ["{{json opts}}"]}});
        for opts in [json!({"k": "a\u{0}"}), json!({"a\u{0}": "v"}), json!({"k": {"deep": ["\u{0}"]}})] {
            let errors = field_errors(prepared(tool.clone(), json!({ "opts": opts })));
            assert_eq!(errors[0].field, "opts", "{opts}");
            assert!(errors[0].message.contains("NUL byte"), "{errors:?}");
        }
        assert!(prepared(tool, json!({"opts": {"k": "a", "n": 1}})).is_ok());
    }
}
