//! Parameter rules: defaults, enums, required, patterns; the tool's description.

use serde_json::{Value, json};

use super::Subject;
use crate::code::Code;
use crate::manifest::ParamType;
use crate::source::{Diagnostic, FieldPath, Severity, Target};

/// Longer descriptions cost every prompt that lists the tool.
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Whether `v` is a value of JSON type `t`.
pub(crate) fn is_of_type(v: &Value, t: ParamType) -> bool {
    match t {
        ParamType::String => v.is_string(),
        ParamType::Number => v.is_number(),
        ParamType::Integer => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        ParamType::Boolean => v.is_boolean(),
        ParamType::Array => v.is_array(),
        ParamType::Object => v.is_object(),
    }
}

/// `a string`, `an integer`, `an array`, `an object`...
fn a(ty: &str) -> String {
    let article = if ty.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {ty}")
}

pub(super) fn check(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    // A parameter's `schema` keywords must make a valid JSON Schema with its fields.
    let with_schema = || s.m.parameters.iter().filter(|(_, p)| p.schema.is_some());
    let offered = with_schema().next().map(|_| crate::describe::parameters_schema(s.m)).unwrap_or_default();
    for (name, p) in with_schema() {
        // Keywords that break draft 7's meta-schema on their own are a load error
        // (`invalid-parameter-schema`, at the keyword): said once.
        if p.schema.as_ref().is_some_and(|k| !jsonschema::draft7::meta::is_valid(&Value::Object(k.clone()))) {
            continue;
        }
        let Some(merged) = offered.pointer(&format!("/properties/{}", name.replace('~', "~0").replace('/', "~1")))
        else {
            continue;
        };
        if let Err(e) = jsonschema::meta::validate(merged) {
            out.push(s.diag(
                Severity::Error,
                Code::InvalidField,
                &FieldPath::dotted("parameters").key(name).key("schema"),
                Target::Value,
                format!("`{name}`'s schema with these keywords is not a valid JSON Schema: {e}"),
            ));
        }
    }
    let chars = s.m.description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        out.push(s.diag(
            Severity::Warning,
            Code::LongDescription,
            &FieldPath::dotted("description"),
            Target::Value,
            format!("the description is {chars} characters; every prompt that lists the tool pays for it (keep it under {MAX_DESCRIPTION_CHARS})"),
        ));
    }
    for (name, p) in &s.m.parameters {
        // Built only for a diagnostic.
        let at = || FieldPath::dotted("parameters").key(name);
        let ty = p.kind.as_str();
        if let Some(d) = &p.default {
            if !is_of_type(d, p.kind) {
                out.push(s.diag(
                    Severity::Error,
                    Code::DefaultTypeMismatch,
                    &at().key("default"),
                    Target::Value,
                    format!("the default of `{name}` is {d}, which is not {}", a(ty)),
                ));
            } else if let Some(allowed) = p.allowed.as_ref().filter(|a| !a.contains(d)) {
                out.push(s.diag(
                    Severity::Error,
                    Code::DefaultNotInEnum,
                    &at().key("default"),
                    Target::Value,
                    format!(
                        "the default of `{name}` is {d}, which is not one of its `enum` values {}",
                        Value::from(allowed.clone())
                    ),
                ));
            }
            if p.required {
                out.push(
                    s.diag(
                        Severity::Warning,
                        Code::RequiredWithDefault,
                        &at().key("required"),
                        Target::Key,
                        format!("`{name}` is required and has a default: the default is never used"),
                    )
                    .with_help("drop `required` to make the default apply, or drop the default"),
                );
            }
        }
        for (i, v) in p.allowed.iter().flatten().enumerate() {
            if !is_of_type(v, p.kind) {
                out.push(s.diag(
                    Severity::Error,
                    Code::EnumTypeMismatch,
                    &at().key("enum").index(i),
                    Target::Value,
                    format!("`enum` value {v} of `{name}` is not {}", a(ty)),
                ));
            }
        }
        if let Some(pattern) = &p.pattern
            && jsonschema::validator_for(&json!({"type": "string", "pattern": pattern})).is_err()
        {
            out.push(s.diag(
                Severity::Error,
                Code::InvalidPattern,
                &at().key("pattern"),
                Target::Value,
                format!("`pattern` of `{name}` is not a valid regular expression: {pattern}"),
            ));
        }
        if p.pattern.is_some() && p.kind != ParamType::String {
            out.push(s.diag(
                Severity::Warning,
                Code::PatternOnNonString,
                &at().key("pattern"),
                Target::Key,
                format!("`pattern` only applies to strings, and `{name}` is {}", a(ty)),
            ));
        }
    }
}
