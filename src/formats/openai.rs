//! OpenAI tool definitions: Chat Completions plain and strict (Structured Outputs), and
//! the Responses API's flat function tools.
//!
//! Plain: `{"type": "function", "function": {"name", "description", "parameters"}}` with
//! the describe schema as is. Strict adds `"strict": true` and rewrites the schema to the
//! subset strict mode accepts (see [`strict_schema`] and `docs/FORMATS.md`); a tool whose
//! schema strict mode cannot say ([`strict_gap`]) is exported plain. Responses:
//! `{"type": "function", "name", "description", "parameters", "strict": false}`.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use crate::tool::Tool;

/// The string `format` values strict mode accepts; any other `format` is dropped.
pub const STRICT_STRING_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// The keywords a strict schema keeps; every other keyword is dropped.
///
/// `required` and `additionalProperties` are rewritten on every object schema, and
/// `format` is kept only when its value is one of [`STRICT_STRING_FORMATS`].
pub const STRICT_KEYWORDS: &[&str] = &[
    // Any schema.
    "type",
    "description",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    // Objects.
    "properties",
    "required",
    "additionalProperties",
    // Arrays.
    "items",
    "minItems",
    "maxItems",
    // Strings.
    "pattern",
    "format",
    // Numbers.
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
];

/// One tool for Chat Completions `tools`.
pub fn tool(t: &Tool) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name(),
            "description": t.description(),
            "parameters": super::parameters(t),
        },
    })
}

/// One tool for the Responses API's `tools`: the flat function shape. `strict` is stated
/// as `false` (the API's default is strict, which rejects most schemas as written).
pub fn responses_tool(t: &Tool) -> Value {
    json!({
        "type": "function",
        "name": t.name(),
        "description": t.description(),
        "parameters": super::parameters(t),
        "strict": false,
    })
}

/// One tool for Chat Completions `tools` with `"strict": true`; the plain [`tool`] when
/// strict mode cannot say its schema ([`strict_gap`]).
pub fn strict_tool(t: &Tool) -> Value {
    if strict_gap(t).is_some() {
        return tool(t);
    }
    json!({
        "type": "function",
        "function": {
            "name": t.name(),
            "description": t.description(),
            "parameters": strict_schema(&super::parameters(t)),
            "strict": true,
        },
    })
}

/// Rewrite a parameters schema for strict mode, recursively:
///
/// - every object schema gets `additionalProperties: false` and lists every property in
///   `required` (in property order);
/// - a property that was optional becomes nullable: `"type": "string"` becomes
///   `["string", "null"]`, `null` is added to its `enum`, and a schema without a `type`
///   becomes `anyOf: [schema, {"type": "null"}]`; its `default` moves into the
///   description (`(default: …)`), since strict mode has no defaults. A caller strips those
///   nulls by the tool's own schema ([`strip_nulls`]) before dispatch, so packs applies the
///   default;
/// - keywords outside [`STRICT_KEYWORDS`] are dropped (`default`, `minLength`,
///   `maxLength`, `title`, `examples`, `$schema`, …), and so is a `format` strict mode
///   does not know (such as `path`);
/// - the root is always `"type": "object"`.
pub fn strict_schema(schema: &Value) -> Value {
    let mut root = node(schema, false);
    if let Value::Object(m) = &mut root {
        m.insert("type".into(), "object".into());
        if !m.contains_key("properties") {
            m.insert("properties".into(), Value::Object(Map::new()));
            m.insert("required".into(), Value::Array(Vec::new()));
            m.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    root
}

/// Why `t` cannot be exported in strict mode, or None when it can: a schema in its strict
/// rewrite that constrains nothing (`{}`, a schema whose only keywords strict mode drops,
/// such as `oneOf` or `not`), which the API rejects. Names the place, e.g.
/// `properties/filter`.
pub fn strict_gap(t: &Tool) -> Option<String> {
    fn gap(s: &Value, at: &str) -> Option<String> {
        let Value::Object(m) = s else { return None };
        let says_something = ["type", "enum", "const", "anyOf", "$ref"].iter().any(|k| m.contains_key(*k));
        if !says_something {
            return Some(if at.is_empty() { "the parameters schema".into() } else { format!("`{at}`") });
        }
        let join = |k: &str| if at.is_empty() { k.to_owned() } else { format!("{at}/{k}") };
        let named = |key: &str| m.get(key).and_then(Value::as_object).into_iter().flatten();
        for (name, p) in named("properties") {
            // A nullable optional property is `anyOf: [schema, null]`: look inside.
            let branches = p.get("anyOf").and_then(Value::as_array).filter(|_| p.get("type").is_none());
            let found = match branches {
                Some(b) => b.iter().find_map(|b| gap(b, &join(&format!("properties/{name}")))),
                None => gap(p, &join(&format!("properties/{name}"))),
            };
            if found.is_some() {
                return found;
            }
        }
        for (name, d) in named("$defs") {
            if let Some(g) = gap(d, &join(&format!("$defs/{name}"))) {
                return Some(g);
            }
        }
        if let Some(items) = m.get("items")
            && let Some(g) = gap(items, &join("items"))
        {
            return Some(g);
        }
        m.get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find_map(|(i, b)| gap(b, &join(&format!("anyOf/{i}"))))
    }
    gap(&strict_schema(&super::parameters(t)), "").map(|at| format!("{at} accepts any value in strict mode"))
}

/// Remove the `null` members a strict-mode model sends for optional arguments it leaves out,
/// as `schema` (the tool's own parameters schema, not its [`strict_schema`] export) says:
/// a member is dropped only where it is a declared property of an object schema, not in
/// its `required`, whose own schema does not accept `null` (so only the strict export made
/// it nullable), and packs then applies its default. The walk follows `properties` into
/// nested objects, `items` into arrays' elements, a local `$ref` (`#`, `#/$defs/…`,
/// `#/definitions/…`), and the one branch of an `anyOf` / `oneOf` that may describe the
/// object or array (pydantic's optional nested model). Every other `null` is kept: a required property's, one whose schema
/// accepts `null` (`"deleted_at": null` meaning IS NULL), an undeclared member's (free-form
/// objects, `additionalProperties`), an array element. A value the schema does not describe
/// is left as it is, and so is everything when `schema` is not an object schema.
pub fn strip_nulls(args: &mut Value, schema: &Value) {
    strip(args, schema, schema, &mut Judged::default());
}

/// What one [`strip_nulls`] learnt of its schema, each thing once however many values of an
/// array it applies to: whether a property schema accepts `null` ([`accepts_null`]), the
/// schema that describes an object or array ([`describing`]), an object schema's
/// `required`; and how many schemas, branches and names it looked at in all.
#[derive(Default)]
struct Judged<'a> {
    accepts: HashMap<*const Value, bool>,
    described: HashMap<(*const Value, bool), Option<&'a Map<String, Value>>>,
    required: HashMap<*const Map<String, Value>, Rc<HashSet<&'a str>>>,
    work: usize,
}

impl<'a> Judged<'a> {
    fn accepts_null(&mut self, schema: &Value, root: &Value) -> bool {
        if let Some(known) = self.accepts.get(&std::ptr::from_ref(schema)) {
            return *known;
        }
        let mut budget = MAX_JUDGED;
        let accepts = accepts_null(schema, root, &mut budget);
        self.work += MAX_JUDGED - budget;
        self.accepts.insert(std::ptr::from_ref(schema), accepts);
        accepts
    }

    fn describing(&mut self, value: &Value, schema: &'a Value, root: &'a Value) -> Option<&'a Map<String, Value>> {
        let key = (std::ptr::from_ref(schema), value.is_object());
        if let Some(known) = self.described.get(&key) {
            return *known;
        }
        let found = describing(value, schema, root, 0, &mut self.work);
        self.described.insert(key, found);
        found
    }

    fn required(&mut self, schema: &'a Map<String, Value>) -> Rc<HashSet<&'a str>> {
        let work = &mut self.work;
        let names = self.required.entry(std::ptr::from_ref(schema)).or_insert_with(|| {
            let names = schema.get("required").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            *work += names.len();
            Rc::new(names.iter().filter_map(Value::as_str).collect())
        });
        Rc::clone(names)
    }
}

/// How many `$ref`s in a row are followed before a schema is taken as unknown (a cycle of
/// references that never reaches a value).
const MAX_REFS: usize = 32;

fn strip<'a>(value: &mut Value, schema: &'a Value, root: &'a Value, judged: &mut Judged<'a>) {
    if !(value.is_object() || value.is_array()) {
        return;
    }
    let Some(schema) = judged.describing(value, schema, root) else { return };
    match value {
        Value::Object(members) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
            let required = judged.required(schema);
            members.retain(|name, v| {
                let optional = !required.contains(name.as_str());
                !(v.is_null() && optional && properties.get(name).is_some_and(|p| !judged.accepts_null(p, root)))
            });
            for (name, v) in members.iter_mut() {
                if let Some(p) = properties.get(name) {
                    strip(v, p, root, judged);
                }
            }
        }
        Value::Array(elements) => {
            if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
                elements.iter_mut().for_each(|e| strip(e, items, root, judged));
            }
        }
        _ => {}
    }
}

/// The object schema that describes `value` (an object or an array): `schema` itself when
/// it has `properties` (an object) or `items` (an array), else the one branch of its `anyOf`
/// or `oneOf` (or its only `allOf` schema) that may describe such a value, as pydantic
/// writes an optional nested model (`anyOf: [{"$ref": …}, {"type": "null"}]`). None when
/// none does, or two branches might (which one the value is cannot be told). `work` counts
/// the branches looked at.
fn describing<'a>(
    value: &Value,
    schema: &'a Value,
    root: &'a Value,
    depth: usize,
    work: &mut usize,
) -> Option<&'a Map<String, Value>> {
    let m = resolve(schema, root)?;
    let (key, kind) = match value {
        Value::Object(_) => ("properties", "object"),
        Value::Array(_) => ("items", "array"),
        _ => return None,
    };
    if m.contains_key(key) || depth >= MAX_REFS {
        return Some(m);
    }
    let branches: Vec<&Value> = match (m.get("anyOf").or_else(|| m.get("oneOf")), m.get("allOf")) {
        (Some(Value::Array(b)), _) => b.iter().collect(),
        (None, Some(Value::Array(b))) if b.len() == 1 => b.iter().collect(),
        _ => return Some(m),
    };
    *work += branches.len();
    let may = |b: &&Value| {
        resolve(b, root).is_none_or(|b| {
            let types = types(b);
            b.contains_key(key)
                || types.contains(&kind)
                || (types.is_empty() && !b.contains_key("enum") && !b.contains_key("const"))
        })
    };
    match branches.into_iter().filter(may).collect::<Vec<_>>()[..] {
        [one] => describing(value, one, root, depth + 1, work),
        _ => None,
    }
}

/// The JSON pointer of a local `$ref`: the root (`#`), `#/$defs/…` or `#/definitions/…`.
fn local(reference: &Value) -> Option<&str> {
    let pointer = reference.as_str()?.strip_prefix('#')?;
    (pointer.is_empty() || pointer.starts_with("/$defs/") || pointer.starts_with("/definitions/")).then_some(pointer)
}

/// `schema` with its local `$ref`s followed, or None when one cannot be (not local, missing,
/// or a cycle).
fn resolve<'a>(mut schema: &'a Value, root: &'a Value) -> Option<&'a Map<String, Value>> {
    for _ in 0..=MAX_REFS {
        let m = schema.as_object()?;
        let Some(reference) = m.get("$ref") else { return Some(m) };
        schema = root.pointer(local(reference)?)?;
    }
    None
}

/// How many schemas [`accepts_null`] looks at to judge one property: references that fan
/// out (an `allOf` of two references to itself) would otherwise take exponential work.
const MAX_JUDGED: usize = 10_000;

/// Whether `schema` may accept `null`: false only when its `type`, `enum`, `const`, a `$ref`
/// it points to, or all of its `anyOf` / `oneOf` branches (or one of `allOf`'s) rule it out.
/// A schema it cannot judge (or not within [`MAX_JUDGED`] schemas) is taken to accept
/// `null`, so its `null` is kept.
fn accepts_null(schema: &Value, root: &Value, budget: &mut usize) -> bool {
    fn at(schema: &Value, root: &Value, refs: usize, budget: &mut usize) -> bool {
        if *budget == 0 {
            return true;
        }
        *budget -= 1;
        let m = match schema {
            Value::Bool(b) => return *b,
            Value::Object(m) => m,
            _ => return true,
        };
        if m.contains_key("type") && !types(m).contains(&"null") {
            return false;
        }
        if let Some(Value::Array(e)) = m.get("enum")
            && !e.contains(&Value::Null)
        {
            return false;
        }
        if m.get("const").is_some_and(|c| !c.is_null()) {
            return false;
        }
        if let Some(reference) = m.get("$ref") {
            let target = local(reference).and_then(|p| root.pointer(p));
            if let Some(target) = target.filter(|_| refs < MAX_REFS)
                && !at(target, root, refs + 1, budget)
            {
                return false;
            }
        }
        let branches = |k: &str| m.get(k).and_then(Value::as_array);
        for k in ["anyOf", "oneOf"] {
            if let Some(b) = branches(k)
                && !b.iter().any(|b| at(b, root, refs, budget))
            {
                return false;
            }
        }
        branches("allOf").is_none_or(|b| b.iter().all(|b| at(b, root, refs, budget)))
    }
    at(schema, root, 0, budget)
}

fn types(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// One schema node; `nullable` when it is an optional property.
fn node(schema: &Value, nullable: bool) -> Value {
    let Value::Object(src) = schema else { return schema.clone() };
    let is_object = types(src).contains(&"object") || src.contains_key("properties");
    let required: Vec<&str> = src
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    for (key, value) in src {
        let kept = match key.as_str() {
            "properties" => {
                let props = value.as_object().map(|props| {
                    props
                        .iter()
                        .map(|(name, p)| (name.clone(), node(p, !required.contains(&name.as_str()))))
                        .collect::<Map<_, _>>()
                });
                props.map(Value::Object)
            }
            "items" if value.is_object() => Some(node(value, false)),
            "anyOf" => value.as_array().map(|a| Value::Array(a.iter().map(|s| node(s, false)).collect())),
            "$defs" => value
                .as_object()
                .map(|d| Value::Object(d.iter().map(|(name, s)| (name.clone(), node(s, false))).collect())),
            "format" => value.as_str().filter(|f| STRICT_STRING_FORMATS.contains(f)).map(Value::from),
            // Rewritten below.
            "required" | "additionalProperties" => None,
            k if STRICT_KEYWORDS.contains(&k) => Some(value.clone()),
            _ => None,
        };
        if let Some(v) = kept {
            out.insert(key.clone(), v);
        }
    }
    if is_object {
        let props = out.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        let all: Vec<Value> =
            props.as_object().map(|p| p.keys().cloned().map(Value::from).collect()).unwrap_or_default();
        out.insert("required".into(), Value::Array(all));
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if nullable {
        if let Some(default) = src.get("default") {
            let note = format!("(default: {default})");
            let description = match out.get("description").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => format!("{d} {note}"),
                _ => note,
            };
            out.insert("description".into(), description.into());
        }
        out = make_nullable(out);
    }
    Value::Object(out)
}

/// Let a schema also accept `null`.
fn make_nullable(mut out: Map<String, Value>) -> Map<String, Value> {
    if let Some(c) = out.remove("const") {
        let mut values = vec![c];
        if let Some(Value::Array(e)) = out.remove("enum") {
            values.extend(e);
        }
        out.insert("enum".into(), Value::Array(values));
    }
    if let Some(Value::Array(e)) = out.get_mut("enum")
        && !e.contains(&Value::Null)
    {
        e.push(Value::Null);
    }
    match out.get_mut("type") {
        Some(Value::String(t)) => {
            if t != "null" {
                let t = std::mem::take(t);
                out.insert("type".into(), json!([t, "null"]));
            }
        }
        Some(Value::Array(a)) => {
            if !a.iter().any(|t| t == "null") {
                a.push("null".into());
            }
        }
        _ => {
            let null = json!({"type": "null"});
            match out.get_mut("anyOf") {
                Some(Value::Array(branches)) => {
                    if !branches.contains(&null) {
                        branches.push(null);
                    }
                }
                _ => {
                    // An untyped schema (`$ref`, an `enum` alone, …): wrap it, keeping the
                    // description outside where the model reads it.
                    if out.contains_key("enum") {
                        return out;
                    }
                    let description = out.remove("description");
                    let mut wrapped = Map::new();
                    if let Some(d) = description {
                        wrapped.insert("description".into(), d);
                    }
                    wrapped.insert("anyOf".into(), Value::Array(vec![Value::Object(out), null]));
                    return wrapped;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_properties_become_nullable_and_required() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where", "format": "path"},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "minLength": 1},
                "n": {"type": ["integer"], "minimum": 1},
                "any": {"description": "Anything"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}
            },
            "required": ["path"],
            "additionalProperties": false,
            "$schema": "https://json-schema.org/draft/2020-12/schema"
        });
        assert_eq!(
            strict_schema(&schema),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where"},
                    "unit": {"type": ["string", "null"], "enum": ["c", "f", null], "description": "(default: \"c\")"},
                    "n": {"type": ["integer", "null"], "minimum": 1},
                    "any": {"description": "Anything", "anyOf": [{}, {"type": "null"}]},
                    "tags": {
                        "type": ["array", "null"],
                        "items": {
                            "type": "object",
                            "properties": {"k": {"type": ["string", "null"]}},
                            "required": ["k"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "unit", "n", "any", "tags"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn an_empty_schema_is_an_empty_object() {
        let empty = json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
        assert_eq!(strict_schema(&json!({})), empty);
        assert_eq!(strict_schema(&json!({"type": "object"})), empty);
    }

    /// `args` after [`strip_nulls`] by `schema`.
    fn stripped(mut args: Value, schema: Value) -> Value {
        strip_nulls(&mut args, &schema);
        args
    }

    #[test]
    fn an_optional_property_sent_as_null_is_dropped_so_its_default_applies() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "unit": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
                "n": {"type": "integer"},
                "any": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "mode": {"const": "fast"},
            },
            "required": ["path"]
        });
        let args = json!({"path": "/tmp", "unit": null, "n": null, "any": null, "mode": null});
        assert_eq!(stripped(args, schema), json!({"path": "/tmp"}));
    }

    #[test]
    fn what_a_strict_mode_model_sends_for_the_strict_export_is_stripped_back() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "unit": {"type": "string", "default": "metric"},
                "tags": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "string"}}, "required": ["k"]}
                }
            },
            "required": ["path"]
        });
        let strict = strict_schema(&schema);
        let sent = json!({"path": "/tmp", "unit": null, "tags": [{"k": "a", "v": null}]});
        assert!(jsonschema::is_valid(&strict, &sent), "a strict-mode call");
        assert_eq!(stripped(sent, schema), json!({"path": "/tmp", "tags": [{"k": "a"}]}));
    }

    #[test]
    fn a_meaningful_null_is_kept() {
        // A free-form filter: `deleted_at IS NULL`, and an array of anything.
        let schema = json!({
            "type": "object",
            "properties": {
                "where": {"type": "object"},
                "tags": {"type": "array"},
                "limit": {"type": "integer"}
            }
        });
        let args = json!({"where": {"deleted_at": null}, "tags": [null, {"a": null}], "limit": null});
        assert_eq!(stripped(args, schema), json!({"where": {"deleted_at": null}, "tags": [null, {"a": null}]}));
    }

    #[test]
    fn a_required_property_s_null_is_kept() {
        let schema = json!({
            "type": "object",
            "properties": {"parent": {"type": ["integer", "null"]}, "name": {"type": "string"}},
            "required": ["parent", "name"]
        });
        // Validation then refuses `name`, rather than calling it missing.
        let args = json!({"parent": null, "name": null});
        assert_eq!(stripped(args.clone(), schema), args);
    }

    #[test]
    fn an_optional_property_whose_schema_accepts_null_keeps_it() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"]},
                "b": {"enum": ["x", null]},
                "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "d": {"description": "anything"},
                "e": true,
                "f": {"$ref": "#/$defs/maybe"},
                "g": {"const": null},
                "h": {"$ref": "https://example.com/elsewhere.json"}
            },
            "$defs": {"maybe": {"type": ["object", "null"]}}
        });
        let args = json!({"a": null, "b": null, "c": null, "d": null, "e": null, "f": null, "g": null, "h": null});
        assert_eq!(stripped(args.clone(), schema), args);
    }

    #[test]
    fn undeclared_members_and_array_elements_keep_their_nulls() {
        let schema = json!({
            "type": "object",
            "properties": {
                "labels": {"type": "object", "properties": {"team": {"type": "string"}}, "additionalProperties": true},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}}
            },
            "additionalProperties": true
        });
        let args = json!({
            "labels": {"team": null, "other": null},
            "ids": [1, null],
            "rows": [null, {"x": null, "y": null}],
            "extra": null
        });
        let want = json!({"labels": {"other": null}, "ids": [1, null], "rows": [null, {"y": null}], "extra": null});
        assert_eq!(stripped(args, schema), want);
    }

    #[test]
    fn nested_objects_are_stripped_through_properties_items_and_refs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "opts": {"type": "object", "properties": {"deep": {"$ref": "#/$defs/deep"}}},
                "list": {"type": "array", "items": {"$ref": "#/definitions/item"}}
            },
            "$defs": {"deep": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}, "required": ["y"]}},
            "definitions": {"item": {"type": "object", "properties": {"z": {"type": "boolean"}}}}
        });
        let args = json!({"opts": {"deep": {"x": null, "y": null}}, "list": [{"z": null}, {"z": true}]});
        assert_eq!(stripped(args, schema), json!({"opts": {"deep": {"y": null}}, "list": [{}, {"z": true}]}));
    }

    #[test]
    fn without_a_schema_nothing_is_stripped_and_ref_cycles_end() {
        let args = json!({"a": null, "b": {"c": null}});
        assert_eq!(stripped(args.clone(), Value::Null), args);
        assert_eq!(stripped(args.clone(), json!({})), args);
        let cycle = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"$ref": "#/$defs/a"}}
        });
        assert_eq!(stripped(args.clone(), cycle), args);
    }

    /// An optional nested model as pydantic writes it (`anyOf: [{"$ref": …}, {"type":
    /// "null"}]`, or pydantic 1's `allOf: [{"$ref": …}]`) is stripped through the one
    /// branch that describes an object (or an array): the strict-mode call validates; with
    /// two such branches nothing inside is stripped (which one the value is cannot be told).
    #[test]
    fn a_nullable_nested_object_is_stripped_through_its_one_object_branch() {
        let schema = json!({
            "type": "object",
            "properties": {
                "inner": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}], "default": null},
                "old": {"allOf": [{"$ref": "#/$defs/Inner"}], "description": "pydantic 1"},
                "list": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Inner"}}, {"type": "null"}]},
                "two": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}]}
            },
            "required": ["two"],
            "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "integer"}}, "required": ["y"]}}
        });
        let sent = json!({
            "inner": {"x": null, "y": 1},
            "old": {"x": null, "y": 2},
            "list": [{"x": null, "y": 3}],
            "two": {"x": null, "y": 4}
        });
        assert!(jsonschema::is_valid(&strict_schema(&schema), &sent), "a strict-mode call");
        let want = json!({"inner": {"y": 1}, "old": {"y": 2}, "list": [{"y": 3}], "two": {"x": null, "y": 4}});
        assert_eq!(stripped(sent, schema), want);
    }

    /// A recursive schema by `"$ref": "#"` (the root, as OpenAI's strict-mode examples
    /// write a tree) is followed like a `$defs` reference.
    #[test]
    fn a_reference_to_the_root_is_followed() {
        let schema = json!({
            "type": "object",
            "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["children"]
        });
        let sent = json!({"label": null, "children": [{"label": null, "children": []}]});
        assert!(jsonschema::is_valid(&strict_schema(&schema), &sent), "a strict-mode call");
        assert_eq!(stripped(sent, schema), json!({"children": [{"children": []}]}));
    }

    /// A chain of references is followed for [`MAX_REFS`] steps and no more (beyond, the
    /// schema accepts `null`: its `null` is kept); a `false` schema accepts nothing, null
    /// neither.
    #[test]
    fn a_chain_of_references_is_followed_so_far_and_a_false_schema_takes_no_null() {
        let chain = |refs: usize| {
            let defs: Map<String, Value> = (0..refs)
                .map(|i| {
                    let next = if i + 1 == refs {
                        json!({"type": "string"})
                    } else {
                        json!({"$ref": format!("#/$defs/d{}", i + 1)})
                    };
                    (format!("d{i}"), next)
                })
                .collect();
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs})
        };
        assert_eq!(stripped(json!({"a": null}), chain(MAX_REFS)), json!({}));
        assert_eq!(stripped(json!({"a": null}), chain(MAX_REFS + 1)), json!({"a": null}));
        let never = json!({"type": "object", "properties": {"a": false, "b": true}});
        assert_eq!(stripped(json!({"a": null, "b": null}), never), json!({"b": null}));
    }

    /// A schema whose references fan out (`allOf` of two references to itself, or a chain
    /// of such) is judged in bounded work: a schema too costly to judge accepts `null`, so
    /// its `null` is kept (validation then says what is wrong).
    #[test]
    fn a_fanning_ref_chain_is_judged_in_bounded_work() {
        let args = json!({"a": null, "b": 1});
        let fan = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"type": "integer"}},
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}
        });
        assert_eq!(stripped(args.clone(), fan), args);
        let mut defs = Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
            defs.insert(format!("d{i}"), json!({"anyOf": [next.clone(), next.clone(), {"type": "null"}]}));
        }
        defs.insert("d40".into(), json!({"type": "string"}));
        let chain = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs});
        assert_eq!(stripped(args.clone(), chain), args);
    }

    /// What a call learns of its schema it learns once: an array of many objects, each
    /// described by one branch of a huge `anyOf` with a huge `required`, costs as much work
    /// for 1,000 objects as for 10.
    #[test]
    fn a_huge_any_of_or_required_is_read_once_however_many_objects() {
        let mut branches: Vec<Value> = (0..1000).map(|i| json!({"type": "string", "maxLength": i})).collect();
        let required: Vec<String> = (0..1000).map(|i| format!("r{i}")).collect();
        branches.push(json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": required}));
        let schema = json!({
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {"anyOf": branches}}}
        });
        let work = |n: usize| {
            let mut args = json!({"rows": vec![json!({"a": null, "b": 1}); n]});
            let mut judged = Judged::default();
            strip(&mut args, &schema, &schema, &mut judged);
            assert_eq!(args["rows"][n - 1], json!({"b": 1}));
            judged.work
        };
        assert_eq!(work(10), work(1000));
        // What is counted, once: the 1,001 branches, the 1,000 required names, and the one
        // schema judged for `a`'s null.
        assert_eq!(work(1), 1001 + 1000 + 1);
    }

    /// How an object or array value finds the schema that describes it through `anyOf`,
    /// `oneOf` and `allOf`: a branch may describe it by its `properties`, its `type`, or by
    /// saying nothing of its kind (then followed further); an `allOf` of two is not merged
    /// (nothing inside is stripped); a branch that names itself ends after [`MAX_REFS`]
    /// steps.
    #[test]
    fn the_schema_that_describes_a_value_is_found_through_its_branches() {
        let inner = json!({"properties": {"a": {"type": "string"}}});
        let none = json!({"type": "null"});
        let cases = [
            // A branch of type object with no `properties` of its own is followed into its own `anyOf`.
            (json!({"anyOf": [{"type": "object", "anyOf": [inner]}, none]}), json!({})),
            // A branch that says nothing of its kind (no type, enum or const) is followed.
            (json!({"anyOf": [{"allOf": [inner]}, none]}), json!({})),
            (json!({"anyOf": [{"description": "any", "allOf": [inner]}, {"enum": [1]}]}), json!({})),
            // Two schemas under `allOf` are not merged: nothing inside is stripped.
            (json!({"allOf": [inner, {"enum": [{}]}]}), json!({"a": null})),
            // A branch that only names itself describes nothing that can be told.
            (json!({"anyOf": [{"$ref": "#/$defs/loop"}, none]}), json!({"a": null})),
        ];
        for (nested, want) in cases {
            let schema = json!({"type": "object", "properties": {"n": nested},
                "$defs": {"loop": {"anyOf": [{"$ref": "#/$defs/loop"}, none]}}});
            let got = stripped(json!({"n": {"a": null}}), schema.clone());
            assert_eq!(got, json!({"n": want}), "{schema}");
        }
    }

    /// Each property schema is judged once per call: an array of many objects naming a
    /// property whose schema costs the most to judge costs that once, not once per object.
    #[test]
    fn a_property_schema_is_judged_once_however_many_objects_name_it() {
        let schema = json!({
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}}}},
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}
        });
        let mut args = json!({"rows": vec![json!({"a": null}); 100]});
        let want = args.clone();
        let mut judged = Judged::default();
        strip(&mut args, &schema, &schema, &mut judged);
        assert_eq!(args, want);
        assert_eq!(judged.work, MAX_JUDGED);
    }
}
