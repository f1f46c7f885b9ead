//! Exports of tool definitions for every model API (`packs::formats`): golden snapshots
//! over the bundled packs, checks that each export is what its API accepts (the list is in
//! docs/FORMATS.md), and FunctionGemma call round trips.

use packs::formats::{self, Export, ExportFormat, functiongemma, gemini, mcp, openai};
use packs::{Catalog, SearchPath, Tool};
use regex::Regex;
use serde_json::{Map, Value, json};

use crate::common::{Packs, require};

const ALL: [ExportFormat; 18] = [
    ExportFormat::Describe,
    ExportFormat::Openai,
    ExportFormat::OpenaiStrict,
    ExportFormat::OpenaiResponses,
    ExportFormat::Anthropic,
    ExportFormat::Gemini,
    ExportFormat::Mcp,
    ExportFormat::Gemma,
    ExportFormat::Functiongemma,
    ExportFormat::Qwen3,
    ExportFormat::Qwen3Xml,
    ExportFormat::Gemma4,
    ExportFormat::Llama3,
    ExportFormat::Mistral,
    ExportFormat::Glm,
    ExportFormat::Kimi,
    ExportFormat::GptOss,
    ExportFormat::Deepseek,
];

fn load(dir: impl Into<std::path::PathBuf>) -> Catalog {
    let catalog = Catalog::load(&SearchPath::dirs([dir.into()]));
    assert!(!catalog.has_errors(), "{:#?}", catalog.diagnostics);
    catalog
}

fn bundled() -> Catalog {
    load(concat!(env!("CARGO_MANIFEST_DIR"), "/packs"))
}

/// A manifest using every parameter shape a manifest can declare.
fn shapes() -> Packs {
    Packs::new().manifest(
        "all_shapes",
        json!({
            "name": "all_shapes",
            "description": "Exercise every parameter shape: \"quotes\", commas, {braces} and <tags>",
            "parameters": {
                "query": {"type": "string", "required": true, "description": "Text to look for", "minLength": 1,
                          "maxLength": 200, "pattern": "^[^/]+$"},
                "limit": {"type": "integer", "enum": [10, 20, 50], "default": 10, "description": "How many"},
                "ratio": {"type": "number", "minimum": 0, "maximum": 1},
                "when": {"type": "string", "format": "date-time", "description": "Not before"},
                "dir": {"type": "string", "format": "path", "default": ".", "description": "Where"},
                "filters": {"type": "array", "description": "Conditions, all of which must hold",
                            "items": {"type": "object", "properties": {
                                "field": {"type": "string", "description": "Field name"},
                                "op": {"type": "string", "enum": ["eq", "ne"]},
                                "value": {"type": "string"}
                            }, "required": ["field", "op"], "additionalProperties": false}},
                "tags": {"type": "array", "items": {"type": "string"}},
                "verbose": {"type": "boolean", "default": false},
                "selection": {"type": "string", "required": true, "source": "context.selection"}
            },
            "command": {"program": "printf", "args": ["%s\\0", "{{query}}", "{{selection}}"]},
            "policy": {"read_only": false, "requires_network": true},
        }),
    )
}

/// The tool of the documentation's `get_current_weather` example, as a manifest.
fn doc_weather() -> Packs {
    Packs::new().manifest(
        "get_current_weather",
        json!({
            "name": "get_current_weather",
            "description": "Gets the current weather in a given location.",
            "parameters": {
                "location": {"type": "string", "required": true,
                             "description": "The city and state, e.g. \"San Francisco, CA\" or \"Tokyo, JP\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "The unit to return the temperature in."}
            },
            "command": {"program": "printf", "args": ["%s\\0", "{{location}}"]},
        }),
    )
}

fn name_of(format: ExportFormat) -> String {
    format.as_str().to_owned()
}

// ---------------------------------------------------------------------------------------
// Golden snapshots
// ---------------------------------------------------------------------------------------

fn snapshot_all(prefix: &str, tools: &[&Tool]) {
    for format in ALL {
        let name = format!("{prefix}_{}", name_of(format));
        match formats::export(tools, format) {
            Export::Json(v) => insta::assert_json_snapshot!(name, v),
            Export::Text(t) => insta::assert_snapshot!(name, t),
        }
    }
}

#[test]
fn golden_exports_of_the_bundled_packs() {
    require("python3"); // the bundled word_count is a Python executable
    let catalog = bundled();
    let tools: Vec<&Tool> = catalog.tools().collect();
    assert!(tools.iter().any(|t| t.name() == "word_count"), "the executable tool is part of the golden set");
    snapshot_all("bundled", &tools);
}

#[test]
fn golden_exports_of_every_parameter_shape() {
    let packs = shapes();
    let catalog = load(packs.path());
    let tools: Vec<&Tool> = catalog.tools().collect();
    snapshot_all("shapes", &tools);
}

#[test]
fn format_names_are_kebab_case() {
    let names: Vec<String> = ExportFormat::ALL.iter().map(|f| name_of(*f)).collect();
    assert_eq!(
        names,
        [
            "describe",
            "openai",
            "openai-strict",
            "openai-responses",
            "anthropic",
            "gemini",
            "mcp",
            "gemma",
            "functiongemma",
            "qwen3",
            "qwen3-xml",
            "gemma4",
            "llama3",
            "mistral",
            "glm",
            "kimi",
            "gpt-oss",
            "deepseek"
        ]
    );
    assert_eq!("openai-strict".parse(), Ok(ExportFormat::OpenaiStrict));
    let e = "openai_strict".parse::<ExportFormat>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown value `openai_strict`; expected one of: describe, openai, openai-strict, openai-responses, anthropic, gemini, mcp, gemma, functiongemma, qwen3, qwen3-xml, gemma4, llama3, mistral, glm, kimi, gpt-oss, deepseek"
    );
}

#[test]
fn exports_keep_the_catalog_order_and_are_pure() {
    let catalog = bundled();
    let tools: Vec<&Tool> = catalog.tools().collect();
    let mut reversed = tools.clone();
    reversed.reverse();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for format in ALL {
        let export = formats::export(&tools, format);
        assert_eq!(export, formats::export(&tools, format), "{format:?} is deterministic");
        assert_eq!(exported_names(format, &export), names, "{format:?} keeps the order given");
        let mut back = exported_names(format, &formats::export(&reversed, format));
        back.reverse();
        assert_eq!(back, names, "{format:?} follows the order it is given, whatever it is");
        if let Export::Json(v) = &export {
            let printed: Value = serde_json::from_str(&export.to_string()).unwrap();
            assert_eq!(&printed, v, "Display prints the JSON");
        }
    }
    assert_eq!(formats::export(&[], ExportFormat::Openai), Export::Json(json!([])));
    assert_eq!(formats::export(&[], ExportFormat::Gemini), Export::Json(json!({"functionDeclarations": []})));
    assert_eq!(formats::export(&[], ExportFormat::Gemma), Export::Text(String::new()));
}

fn exported_names(format: ExportFormat, export: &Export) -> Vec<String> {
    let each = |re: &str, t: &str| Regex::new(re).unwrap().captures_iter(t).map(|c| c[1].to_owned()).collect();
    match export {
        Export::Text(t) => match format {
            ExportFormat::Gemma4 => each(r"<\|tool>declaration:([^{]+)\{", t),
            ExportFormat::GptOss => each(r"(?m)^type (\S+) = ", t),
            ExportFormat::Qwen3Xml => each(r"<function>\n<name>([^<]+)</name>", t),
            ExportFormat::Llama3 => each(r#"(?m)^        "name": "([^"]+)""#, t),
            ExportFormat::Deepseek => each(r#"(?m)^\{"name": "([^"]+)""#, t),
            ExportFormat::Qwen3 | ExportFormat::Glm | ExportFormat::Kimi | ExportFormat::Mistral => {
                each(r#""function": \{"name": "([^"]+)""#, t)
            }
            _ => functiongemma::parse_declarations(t).unwrap().into_iter().map(|d| d.name).collect(),
        },
        Export::Json(v) => {
            let list = v.get("functionDeclarations").unwrap_or(v).as_array().unwrap();
            list.iter().map(|e| e.get("function").unwrap_or(e)["name"].as_str().unwrap().to_owned()).collect()
        }
    }
}

/// A family's prompt text: the templates that embed OpenAI's JSON embed exactly the
/// `openai` export (Python's separators; DeepSeek the `function` objects; Llama indented
/// by four), in order; Harmony's and Gemma 4's declarations say the schema's parameters.
fn check_prompt(format: ExportFormat, text: &str, tools: &[&Tool]) {
    use formats::declarations::python_json;
    let openai: Vec<Value> = tools.iter().map(|t| openai::tool(t)).collect();
    let indented = |v: &Value| {
        let mut out = Vec::new();
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b"    "));
        serde::Serialize::serialize(v, &mut ser).unwrap();
        String::from_utf8(out).unwrap()
    };
    let embedded: Option<Vec<String>> = match format {
        ExportFormat::Qwen3 | ExportFormat::Glm => {
            Some(openai.iter().map(|t| format!("\n{}\n", python_json(t))).collect())
        }
        ExportFormat::Deepseek => Some(openai.iter().map(|t| format!("\n{}\n", python_json(&t["function"]))).collect()),
        ExportFormat::Llama3 => Some(openai.iter().map(|t| format!("{}\n\n", indented(t))).collect()),
        ExportFormat::Kimi | ExportFormat::Mistral => Some(vec![python_json(&Value::Array(openai.clone()))]),
        _ => None,
    };
    if let Some(parts) = embedded {
        let mut from = 0;
        for part in parts {
            let at = text[from..].find(&part).unwrap_or_else(|| panic!("{format:?} embeds {part}"));
            from += at + part.len() - 1;
        }
    }
    let line = Regex::new(r"(?m)^(\w+)(\??):(?: (.*?),?(?: // default: .*)?)?$").unwrap();
    for (t, o) in tools.iter().zip(&openai) {
        let schema = &o["function"]["parameters"];
        let props = schema["properties"].as_object().unwrap();
        let required: Vec<&str> =
            schema["required"].as_array().map(|r| r.iter().map(|n| n.as_str().unwrap()).collect()).unwrap_or_default();
        match format {
            ExportFormat::GptOss => {
                // The declaration's top-level lines give back each parameter, its optionality and type.
                let start = text.find(&format!("type {} = ", t.name())).unwrap();
                let block = &text[start..start + text[start..].find(") => any;").unwrap()];
                let found: Vec<(String, bool, String)> = line
                    .captures_iter(block)
                    .map(|c| (c[1].to_owned(), c[2].is_empty(), c.get(3).map_or("", |m| m.as_str()).to_owned()))
                    .collect();
                let names: Vec<&str> = found.iter().map(|f| f.0.as_str()).collect();
                assert_eq!(names, props.keys().map(String::as_str).collect::<Vec<_>>(), "{}: parameters", t.name());
                for (name, is_required, ty) in &found {
                    assert_eq!(*is_required, required.contains(&name.as_str()), "{}.{name}: required", t.name());
                    let p = &props[name];
                    let expected = match p["type"].as_str() {
                        Some("string") => match p["enum"].as_array() {
                            Some(e) => {
                                e.iter().map(|v| format!("\"{}\"", v.as_str().unwrap())).collect::<Vec<_>>().join(" | ")
                            }
                            None => "string".into(),
                        },
                        Some("integer" | "number") => "number".into(),
                        Some("boolean") => "boolean".into(),
                        Some("array") if p["items"]["type"] == "string" => "string[]".into(),
                        _ => continue,
                    };
                    assert_eq!(ty, &expected, "{}.{name}: type", t.name());
                }
            }
            ExportFormat::Gemma4 => {
                let start = text.find(&format!("<|tool>declaration:{}{{", t.name())).unwrap();
                let block = &text[start..start + text[start..].find("<tool|>").unwrap()];
                let names: Vec<String> = required.iter().map(|n| format!("<|\"|>{n}<|\"|>")).collect();
                if !required.is_empty() {
                    assert!(
                        block.ends_with(&format!("required:[{}],type:<|\"|>OBJECT<|\"|>}}}}", names.join(","))),
                        "{block}"
                    );
                }
                for name in props.keys() {
                    assert!(block.contains(&format!("{name}:{{")), "{}: declares {name}", t.name());
                }
            }
            ExportFormat::Qwen3Xml => {
                for name in props.keys() {
                    assert!(
                        text.contains(&format!("<parameter>\n<name>{name}</name>")),
                        "{}: declares {name}",
                        t.name()
                    );
                }
            }
            _ => {}
        }
    }
}

#[test]
fn describe_is_what_the_catalog_describes() {
    let catalog = bundled();
    let tools: Vec<&Tool> = catalog.tools().collect();
    let expected: Vec<Value> = tools.iter().map(|t| serde_json::to_value(t.describe()).unwrap()).collect();
    assert_eq!(formats::export(&tools, ExportFormat::Describe), Export::Json(Value::Array(expected)));
}

// ---------------------------------------------------------------------------------------
// What each API accepts
// ---------------------------------------------------------------------------------------

/// Tool names OpenAI, Anthropic and MCP clients accept.
fn check_name(name: &str) {
    let re = Regex::new(r"^[a-zA-Z0-9_-]{1,64}$").unwrap();
    assert!(re.is_match(name), "tool name `{name}` must match {re}");
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn compiles(schema: &Value, what: &str) {
    if let Err(e) = jsonschema::validator_for(schema) {
        panic!("{what}: the schema does not compile: {e}\n{schema:#}");
    }
}

/// Every schema node of `schema`, itself first: properties, items, anyOf branches, $defs.
fn nodes(schema: &Value) -> Vec<&Value> {
    let mut out = vec![schema];
    let children = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
        .chain(schema.get("items").filter(|i| i.is_object()))
        .chain(schema.get("anyOf").and_then(Value::as_array).into_iter().flatten())
        .chain(schema.get("$defs").and_then(Value::as_object).into_iter().flat_map(|d| d.values()));
    for child in children {
        out.extend(nodes(child));
    }
    out
}

/// Levels of object nesting (the root object is 1).
fn depth(schema: &Value) -> usize {
    let here = usize::from(schema.get("properties").is_some());
    let below = nodes(schema).into_iter().skip(1).filter(|n| n.get("properties").is_some()).map(depth).max();
    here + below.unwrap_or(0)
}

fn type_names(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

fn property_names(schema: &Value) -> Vec<&str> {
    schema.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, _)| k.as_str()).collect()
}

fn check_openai(export: &Value, tools: &[&Tool]) {
    let list = export.as_array().expect("an array of tools");
    assert_eq!(list.len(), tools.len());
    for (entry, tool) in list.iter().zip(tools) {
        assert_eq!(keys(entry), ["type", "function"]);
        assert_eq!(entry["type"], "function");
        let f = &entry["function"];
        assert_eq!(keys(f), ["name", "description", "parameters"]);
        check_name(f["name"].as_str().unwrap());
        assert_eq!(f["name"], tool.name());
        assert_eq!(f["parameters"]["type"], "object");
        compiles(&f["parameters"], tool.name());
    }
}

/// The Responses API's flat function tool: `strict` stated (its default is true).
fn check_openai_responses(export: &Value, tools: &[&Tool]) {
    let list = export.as_array().expect("an array of tools");
    assert_eq!(list.len(), tools.len());
    for (entry, tool) in list.iter().zip(tools) {
        assert_eq!(keys(entry), ["type", "name", "description", "parameters", "strict"]);
        assert_eq!(entry["type"], "function");
        assert_eq!(entry["name"], tool.name());
        assert_eq!(entry["strict"], false);
        assert_eq!(entry["parameters"], openai::tool(tool)["function"]["parameters"]);
        compiles(&entry["parameters"], tool.name());
    }
}

/// Keywords the Structured Outputs guide lists as supported ("Supported schemas").
const STRICT_SUPPORTED: &[&str] = &[
    "type",
    "description",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
];
const STRICT_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

fn check_openai_strict(export: &Value, tools: &[&Tool]) {
    let list = export.as_array().expect("an array of tools");
    assert_eq!(list.len(), tools.len());
    for (entry, tool) in list.iter().zip(tools) {
        let what = tool.name();
        assert_eq!(entry["type"], "function");
        let f = &entry["function"];
        if openai::strict_gap(tool).is_some() {
            assert_eq!(entry, &openai::tool(tool), "{what}: exported plain");
            continue;
        }
        assert_eq!(keys(f), ["name", "description", "parameters", "strict"]);
        assert_eq!(f["strict"], true);
        check_name(f["name"].as_str().unwrap());
        let params = &f["parameters"];
        assert_eq!(params["type"], "object", "{what}: the root is an object");
        assert!(params.get("anyOf").is_none(), "{what}: the root is not anyOf");
        assert!(depth(params) <= 10, "{what}: at most 10 levels of nesting");
        let all = nodes(params);
        let property_count: usize = all.iter().map(|n| property_names(n).len()).sum();
        assert!(property_count <= 5000, "{what}: at most 5000 properties");
        let enum_values: usize = all.iter().filter_map(|n| n.get("enum")?.as_array()).map(Vec::len).sum();
        assert!(enum_values <= 1000, "{what}: at most 1000 enum values");
        for node in all {
            assert!(
                ["type", "enum", "const", "anyOf", "$ref"].iter().any(|k| node.get(*k).is_some()),
                "{what}: strict mode rejects a schema that constrains nothing:\n{node:#}"
            );
            for k in keys(node) {
                assert!(STRICT_SUPPORTED.contains(&k), "{what}: `{k}` is not supported in strict mode:\n{node:#}");
            }
            if let Some(format) = node.get("format") {
                assert!(STRICT_FORMATS.contains(&format.as_str().unwrap()), "{what}: format {format}");
            }
            if type_names(node).contains(&"object") {
                assert_eq!(node["additionalProperties"], false, "{what}: additionalProperties false:\n{node:#}");
                assert_eq!(required_of(node), property_names(node), "{what}: every property required:\n{node:#}");
            }
        }
        compiles(params, what);
        // Optional parameters take null; required ones do not.
        let original = &tool.describe().parameters;
        let validator = jsonschema::validator_for(params).unwrap();
        let required = required_of(original);
        for name in property_names(original) {
            let takes_null = jsonschema::is_valid(&params["properties"][name], &Value::Null);
            assert_eq!(takes_null, !required.contains(&name), "{what}.{name}: null only for optional parameters");
        }
        // The first example, its missing parameters sent as null, is a valid strict call, and
        // stripping the nulls gives the example back.
        if let Some(args) = example_args(tool) {
            let mut padded = args.clone();
            for name in property_names(original) {
                padded.entry(name).or_insert(Value::Null);
            }
            let mut padded = Value::Object(padded);
            assert!(validator.is_valid(&padded), "{what}: {padded} is valid in strict mode");
            openai::strip_nulls(&mut padded, original);
            assert_eq!(padded, Value::Object(args));
        }
    }
}

fn check_anthropic(export: &Value, tools: &[&Tool]) {
    let list = export.as_array().expect("an array of tools");
    assert_eq!(list.len(), tools.len());
    for (entry, tool) in list.iter().zip(tools) {
        assert_eq!(keys(entry), ["name", "description", "input_schema"]);
        check_name(entry["name"].as_str().unwrap());
        assert_eq!(entry["name"], tool.name());
        assert_eq!(entry["input_schema"]["type"], "object");
        compiles(&entry["input_schema"], tool.name());
    }
}

/// The fields of Gemini's `Schema` (Gemini API reference, `Schema`).
const GEMINI_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];
const GEMINI_TYPES: &[&str] = &["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"];

/// Gemini's schema read back as JSON Schema (lower-case types, `nullable` as a `null` type).
fn gemini_as_json_schema(s: &Value) -> Value {
    let Value::Object(m) = s else { return s.clone() };
    let mut out = Map::new();
    for (k, v) in m {
        let v = match k.as_str() {
            "type" => Value::from(v.as_str().unwrap().to_ascii_lowercase()),
            "nullable" => continue,
            "items" => gemini_as_json_schema(v),
            "properties" => Value::Object(
                v.as_object().unwrap().iter().map(|(n, p)| (n.clone(), gemini_as_json_schema(p))).collect(),
            ),
            "anyOf" => Value::Array(v.as_array().unwrap().iter().map(gemini_as_json_schema).collect()),
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

fn check_gemini(export: &Value, tools: &[&Tool]) {
    assert_eq!(keys(export), ["functionDeclarations"]);
    let list = export["functionDeclarations"].as_array().unwrap();
    assert_eq!(list.len(), tools.len());
    let name_re = Regex::new(r"^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$").unwrap();
    for (decl, tool) in list.iter().zip(tools) {
        let what = tool.name();
        let name = decl["name"].as_str().unwrap();
        assert!(name_re.is_match(name), "{name} must match {name_re}");
        assert_eq!(name, tool.name());
        assert_eq!(decl["description"], tool.description());
        let original = &tool.describe().parameters;
        if let Some(json_schema) = decl.get("parametersJsonSchema") {
            assert_eq!(keys(decl), ["name", "description", "parametersJsonSchema"]);
            assert!(gemini::needs_json_schema(original), "{what}: JSON Schema only when the subset cannot say it");
            assert_eq!(json_schema, original, "{what}: given unchanged");
            continue;
        }
        assert!(!gemini::needs_json_schema(original), "{what}: the subset would lose part of it");
        let Some(params) = decl.get("parameters") else {
            assert_eq!(keys(decl), ["name", "description"]);
            assert!(property_names(original).is_empty(), "{what}: parameters are left out only when there are none");
            continue;
        };
        assert_eq!(keys(decl), ["name", "description", "parameters"]);
        assert_eq!(params["type"], "OBJECT");
        assert!(!property_names(params).is_empty(), "{what}: an OBJECT has properties");
        assert_eq!(property_names(params), property_names(original), "{what}: the same parameters");
        assert_eq!(required_of(params), required_of(original), "{what}: the same required parameters");
        for node in nodes(params) {
            for k in keys(node) {
                assert!(GEMINI_FIELDS.contains(&k), "{what}: `{k}` is not a field of Gemini's Schema:\n{node:#}");
            }
            if let Some(t) = node.get("type") {
                assert!(GEMINI_TYPES.contains(&t.as_str().unwrap()), "{what}: type {t}");
            }
            if let Some(values) = node.get("enum") {
                assert!(values.as_array().unwrap().iter().all(Value::is_string), "{what}: enum values are strings");
            }
            for r in required_of(node) {
                assert!(property_names(node).contains(&r), "{what}: required `{r}` is a property");
            }
        }
        compiles(&gemini_as_json_schema(params), what);
    }
}

fn check_mcp(export: &Value, tools: &[&Tool]) {
    let list = export.as_array().expect("an array of tools");
    assert_eq!(list.len(), tools.len());
    for (entry, tool) in list.iter().zip(tools) {
        assert_eq!(keys(entry), ["name", "title", "description", "inputSchema", "annotations"]);
        check_name(entry["name"].as_str().unwrap());
        assert_eq!(entry["name"], tool.name());
        let title = entry["title"].as_str().unwrap();
        assert!(!title.is_empty() && title.chars().next().unwrap().is_uppercase(), "{title}");
        assert_eq!(entry["inputSchema"]["type"], "object");
        compiles(&entry["inputSchema"], tool.name());
        let a = &entry["annotations"];
        assert_eq!(keys(a), ["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]);
        let p = tool.policy();
        assert_eq!(a["title"], title);
        // Only a stated read_only is advertised (clients auto-approve on the hint).
        let stated = tool.states_read_only();
        assert!(!stated || p.read_only);
        assert_eq!(a["readOnlyHint"], stated);
        assert_eq!(a["destructiveHint"], !stated);
        assert_eq!(a["idempotentHint"], stated);
        assert_eq!(a["openWorldHint"], p.requires_network);
    }
}

fn check_gemma(text: &str, tools: &[&Tool]) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), tools.len());
    assert!(text.ends_with('\n'));
    for (line, tool) in lines.iter().zip(tools) {
        let what = tool.name();
        assert!(line.starts_with(functiongemma::START_DECLARATION) && line.ends_with(functiongemma::END_DECLARATION));
        assert_eq!(line.matches(functiongemma::ESCAPE).count() % 2, 0, "{what}: <escape> tokens pair up");
        let decls = functiongemma::parse_declarations(line).unwrap_or_else(|e| panic!("{what}: {e}\n{line}"));
        assert_eq!(decls.len(), 1);
        let d = &decls[0];
        assert_eq!(d.name, tool.name());
        assert_eq!(d.span.end + functiongemma::END_DECLARATION.len(), line.len(), "{what}: nothing after the body");
        assert_eq!(d.body["description"], tool.description());
        let original = &tool.describe().parameters;
        let params = Value::Object(d.body.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default());
        assert_eq!(params["type"], "OBJECT");
        let mut expected_names = property_names(original);
        expected_names.sort();
        assert_eq!(property_names(&params), expected_names, "{what}: properties, in name order");
        assert_eq!(required_of(&params), required_of(original), "{what}: required");
        for name in expected_names {
            let (p, o) = (&params["properties"][name], &original["properties"][name]);
            assert_eq!(keys(p)[0], "description", "{what}.{name}: description first");
            match type_names(o).into_iter().find(|t| *t != "null") {
                Some(t) => {
                    assert_eq!(*keys(p).last().unwrap(), "type", "{what}.{name}: type last");
                    assert_eq!(p["type"], t.to_ascii_uppercase(), "{what}.{name}: upper-case type");
                }
                None => assert!(p.get("type").is_none(), "{what}.{name}: no type to write"),
            }
            assert_eq!(p["description"], o.get("description").cloned().unwrap_or(json!("")));
            if let Some(values) = o.get("enum") {
                assert_eq!(&p["enum"], values, "{what}.{name}: enum");
            }
        }
    }
}

fn check_all(tools: &[&Tool]) {
    for format in ALL {
        match (format, formats::export(tools, format)) {
            (ExportFormat::Describe, Export::Json(v)) => {
                for (d, t) in v.as_array().unwrap().iter().zip(tools) {
                    check_name(d["name"].as_str().unwrap());
                    compiles(&d["parameters"], t.name());
                }
            }
            (ExportFormat::Openai, Export::Json(v)) => check_openai(&v, tools),
            (ExportFormat::OpenaiStrict, Export::Json(v)) => check_openai_strict(&v, tools),
            (ExportFormat::OpenaiResponses, Export::Json(v)) => check_openai_responses(&v, tools),
            (ExportFormat::Anthropic, Export::Json(v)) => check_anthropic(&v, tools),
            (ExportFormat::Gemini, Export::Json(v)) => check_gemini(&v, tools),
            (ExportFormat::Mcp, Export::Json(v)) => check_mcp(&v, tools),
            (ExportFormat::Gemma, Export::Text(t)) => check_gemma(&t, tools),
            (format, Export::Text(t)) if formats::family(format).is_some() => check_prompt(format, &t, tools),
            (format, export) => panic!("{format:?} exported the wrong kind: {export:?}"),
        }
    }
}

#[test]
fn bundled_exports_are_what_each_api_accepts() {
    let catalog = bundled();
    let tools: Vec<&Tool> = catalog.tools().collect();
    assert!(tools.len() >= 8, "the bundled packs load");
    check_all(&tools);
}

#[test]
fn every_parameter_shape_exports_to_what_each_api_accepts() {
    let packs = shapes();
    let catalog = load(packs.path());
    let tools: Vec<&Tool> = catalog.tools().collect();
    check_all(&tools);
    // The parts each API cannot express go where the model still reads them.
    let strict = openai::strict_tool(tools[0]);
    let props = &strict["function"]["parameters"]["properties"];
    assert_eq!(props["limit"]["description"], "How many (default: 10)");
    assert_eq!(props["limit"]["enum"], json!([10, 20, 50, null]));
    assert!(props["dir"].get("format").is_none(), "`path` is not a strict format");
    assert_eq!(props["when"]["format"], "date-time");
    assert!(props["query"].get("minLength").is_none());
    assert_eq!(props["query"]["pattern"], "^[^/]+$");
    let g = gemini::tool(tools[0]);
    assert_eq!(g["parameters"]["properties"]["limit"]["description"], "How many. One of: 10, 20, 50.");
    assert_eq!(g["parameters"]["properties"]["when"]["format"], "date-time");
    // A context-filled parameter is offered but not required; strict mode makes it nullable.
    assert_eq!(props["selection"]["type"], json!(["string", "null"]));
}

#[test]
fn a_tool_without_parameters_exports_an_empty_object_schema() {
    let packs = Packs::new()
        .manifest("noop", json!({"name": "noop", "description": "Do nothing", "command": {"program": "true"}}));
    let catalog = load(packs.path());
    let tools: Vec<&Tool> = catalog.tools().collect();
    check_all(&tools);
    assert!(gemini::tool(tools[0]).get("parameters").is_none(), "Gemini: parameters unset");
    assert_eq!(
        functiongemma::tool(tools[0]),
        "<start_function_declaration>declaration:noop{description:<escape>Do nothing<escape>,\
         parameters:{type:<escape>OBJECT<escape>}}<end_function_declaration>"
    );
    assert_eq!(
        openai::strict_tool(tools[0])["function"]["parameters"],
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    );
    assert_eq!(mcp::tool(tools[0])["inputSchema"]["type"], "object");
}

#[test]
fn executable_schemas_with_unsupported_keywords_are_cleaned() {
    let describe = json!({
        "name": "odd_shapes",
        "description": "An executable with a liberal schema",
        "parameters": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "Args",
            "properties": {
                "id": {"type": "string", "format": "uuid", "examples": ["x"]},
                "mode": {"const": "fast"},
                "n": {"type": ["integer", "null"], "exclusiveMinimum": 0, "multipleOf": 2},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "required": ["id"]
        }
    });
    let script = format!("#!/bin/sh\nprintf '%s' '{describe}'\n");
    let packs = Packs::new().executable("odd", &script);
    let catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    let tools: Vec<&Tool> = catalog.tools().collect();
    assert_eq!(tools.len(), 1, "{:#?}", catalog.diagnostics);
    check_all(&tools);
    let strict = &openai::strict_tool(tools[0])["function"]["parameters"];
    assert_eq!(strict["properties"]["mode"], json!({"enum": ["fast", null]}));
    assert_eq!(strict["properties"]["either"]["anyOf"][2], json!({"type": "null"}));
    assert_eq!(strict["properties"]["meta"]["properties"], json!({}), "a free-form object cannot be strict");
    // A map (`additionalProperties` schema) is more than Gemini's `Schema` can hold: the
    // declaration carries the JSON Schema as is; the conversion still cleans what it can.
    assert_eq!(gemini::tool(tools[0])["parametersJsonSchema"], describe["parameters"]);
    let g = &gemini::schema(&describe["parameters"])["properties"];
    assert_eq!(g["mode"], json!({"enum": ["fast"]}));
    assert_eq!(g["n"], json!({"type": "INTEGER", "nullable": true}));
    assert_eq!(g["id"], json!({"type": "STRING"}), "uuid is not a Gemini format");
}

#[test]
fn schemas_gemini_cannot_say_are_given_as_json_schema_and_never_emptied() {
    let describe = json!({
        "name": "refs", "description": "Uses $ref, oneOf and a non-string const",
        "parameters": {
            "type": "object",
            "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
            "properties": {
                "at": {"$ref": "#/$defs/point"},
                "shape": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"r": {"type": "number"}}}]},
                "version": {"const": 2}
            },
            "required": ["at"]
        }
    });
    let script = format!("#!/bin/sh\nprintf '%s' '{describe}'\n");
    let packs = Packs::new().executable("refs", &script);
    let catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    let tools: Vec<&Tool> = catalog.tools().collect();
    assert_eq!(tools.len(), 1, "{:#?}", catalog.diagnostics);
    check_all(&tools);
    let g = gemini::tool(tools[0]);
    assert_eq!(g["parametersJsonSchema"], describe["parameters"]);
    assert!(g.get("parameters").is_none(), "the two are mutually exclusive");
    // Strict mode cannot say `oneOf`: the tool is exported plain, with a warning naming it.
    let strict = openai::strict_tool(tools[0]);
    assert!(strict["function"].get("strict").is_none(), "{strict:#}");
    assert_eq!(strict, openai::tool(tools[0]));
    let warnings = formats::export_warnings(&tools, ExportFormat::OpenaiStrict);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("`refs`") && warnings[0].contains("properties/shape"), "{warnings:?}");
    assert!(formats::export_warnings(&tools, ExportFormat::Openai).is_empty());
}

// ---------------------------------------------------------------------------------------
// FunctionGemma
// ---------------------------------------------------------------------------------------

/// Arguments of the tool's first example (`call:NAME{…}` in FunctionGemma syntax).
fn example_args(tool: &Tool) -> Option<Map<String, Value>> {
    let example = tool.examples().first()?;
    let calls = functiongemma::parse_calls(example).unwrap_or_else(|e| panic!("{}: {e}\n{example}", tool.name()));
    assert_eq!(calls.len(), 1, "{}: one call in {example}", tool.name());
    assert_eq!(calls[0].name, tool.name(), "the example calls its own tool");
    Some(calls[0].args.clone())
}

/// A value for `schema` that stresses the syntax: commas, braces, quotes, a colon, digits.
fn synthetic(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match type_names(schema).first().copied() {
        Some("integer") => schema.get("minimum").cloned().unwrap_or(json!(-7)),
        Some("number") => json!(2.5),
        Some("boolean") => json!(true),
        Some("array") => json!([synthetic(schema.get("items").unwrap_or(&json!({"type": "string"}))), "second"]),
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            match props {
                Some(p) if !p.is_empty() => Value::Object(p.iter().map(|(k, s)| (k.clone(), synthetic(s))).collect()),
                _ => json!({"k": "v", "empty": {}, "list": []}),
            }
        }
        _ => json!("a, b} [c] {d}: 15 \"e\" — é\nline two"),
    }
}

fn round_trip(name: &str, args: &Map<String, Value>) {
    let body = format!("call:{name}{}", functiongemma::render_value(&Value::Object(args.clone())));
    let text = format!("{}{body}{}", functiongemma::START_CALL, functiongemma::END_CALL);
    let calls = functiongemma::parse_calls(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    assert_eq!(calls.len(), 1, "{text}");
    assert_eq!(calls[0].name, name);
    assert_eq!(&calls[0].args, args, "{text}");
    assert_eq!(&text[calls[0].span.clone()], body);
}

#[test]
fn every_bundled_tool_round_trips_through_the_call_syntax() {
    let catalog = bundled();
    let shapes = shapes();
    let more = load(shapes.path());
    for tool in catalog.tools().chain(more.tools()) {
        let parameters = &tool.describe().parameters;
        let synthetic_args = synthetic(parameters).as_object().cloned().unwrap_or_default();
        assert_eq!(property_names(parameters).len(), synthetic_args.len(), "{}: every parameter", tool.name());
        round_trip(tool.name(), &synthetic_args);
        if let Some(args) = example_args(tool) {
            round_trip(tool.name(), &args);
            // The example is a call the tool accepts.
            let validator = jsonschema::validator_for(tool.validation_schema()).unwrap();
            let args = Value::Object(args);
            assert!(validator.is_valid(&args), "{}: the first example {args} is valid", tool.name());
        }
    }
    // A tool without examples gets a synthetic call.
    assert!(catalog.tools().any(|t| t.examples().is_empty()));
}

/// Calls printed in Google's FunctionGemma documentation.
/// "FunctionGemma formatting and best practices"
/// (https://ai.google.dev/gemma/docs/functiongemma/formatting-and-best-practices): Turn 3
/// and "Scenario B"; its "Full function calling sequence" page: the call, the response and
/// the answer in one model turn.
const DOC_CALLS: &[(&str, &str, &str)] = &[
    (
        "<start_function_call>call:get_current_weather{location:<escape>Tokyo, Japan<escape>}<end_function_call>",
        "get_current_weather",
        r#"{"location": "Tokyo, Japan"}"#,
    ),
    (
        "<start_function_call>call:get_current_temperature{location:<escape>Paris<escape>,unit:<escape>celsius<escape>}<end_function_call>",
        "get_current_temperature",
        r#"{"location": "Paris", "unit": "celsius"}"#,
    ),
    (
        "<start_of_turn>model\n<start_function_call>call:get_current_weather{location:<escape>Tokyo, Japan<escape>}<end_function_call><start_function_response>response:get_current_weather{temperature:15,weather:<escape>sunny<escape>}<end_function_response>The current weather in Tokyo is sunny with a temperature of 15 degrees Celsius.<end_of_turn>",
        "get_current_weather",
        r#"{"location": "Tokyo, Japan"}"#,
    ),
];

#[test]
fn calls_from_the_documentation_parse() {
    for (text, name, args) in DOC_CALLS {
        let calls = functiongemma::parse_calls(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(calls.len(), 1, "{text}");
        assert_eq!(calls[0].name, *name);
        assert_eq!(Value::Object(calls[0].args.clone()), serde_json::from_str::<Value>(args).unwrap());
    }
}

/// The developer turn printed in "FunctionGemma formatting and best practices", Turn 1.
const DOC_DEVELOPER_TURN: &str = "<start_of_turn>developer\nYou are a model that can do function calling with the following functions<start_function_declaration>declaration:get_current_weather{description:<escape>Gets the current weather in a given location.<escape>,parameters:{properties:{location:{description:<escape>The city and state, e.g. \"San Francisco, CA\" or \"Tokyo, JP\"<escape>,type:<escape>STRING<escape>},unit:{description:<escape>The unit to return the temperature in.<escape>,enum:[<escape>celsius<escape>,<escape>fahrenheit<escape>],type:<escape>STRING<escape>}},required:[<escape>location<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>";

#[test]
fn the_developer_turn_is_the_documented_one_byte_for_byte() {
    let packs = doc_weather();
    let catalog = load(packs.path());
    let tools: Vec<&Tool> = catalog.tools().collect();
    assert_eq!(functiongemma::developer_prompt(&tools), format!("{DOC_DEVELOPER_TURN}\n"));
    let turn = functiongemma::developer_turn(&tools);
    assert_eq!(
        format!("{}{turn}{}", functiongemma::START_DEVELOPER_TURN, functiongemma::END_TURN),
        format!("{DOC_DEVELOPER_TURN}\n")
    );
    let decls = functiongemma::parse_declarations(DOC_DEVELOPER_TURN).unwrap();
    assert_eq!(decls.len(), 1);
    assert_eq!(decls[0].body["parameters"]["properties"]["unit"]["enum"], json!(["celsius", "fahrenheit"]));
}

#[test]
fn the_developer_turn_lists_every_tool_after_the_trigger() {
    let catalog = bundled();
    let tools: Vec<&Tool> = catalog.tools().collect();
    let turn = functiongemma::developer_turn(&tools);
    let rest = turn.strip_prefix(functiongemma::TRIGGER).expect("the trigger sentence first");
    assert!(rest.starts_with(functiongemma::START_DECLARATION), "declarations follow the trigger directly");
    let Export::Text(lines) = formats::export(&tools, ExportFormat::Gemma) else { panic!("gemma is text") };
    assert_eq!(rest, lines.replace('\n', ""), "the declarations, in order, with nothing between them");
    let names: Vec<String> = functiongemma::parse_declarations(&turn).unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, tools.iter().map(|t| t.name()).collect::<Vec<_>>());
}

#[test]
fn mcp_read_only_hints_come_only_from_what_a_manifest_states() {
    let packs = Packs::new()
        .manifest("silent", json!({"name": "silent", "description": "d", "command": "true"}))
        .manifest(
            "said_yes",
            json!({"name": "said_yes", "description": "d", "command": "true", "policy": {"read_only": true}}),
        )
        .manifest(
            "said_no",
            json!({"name": "said_no", "description": "d", "command": "true", "policy": {"read_only": false}}),
        )
        .file(
            "toml_yes.tool.toml",
            "name = \"toml_yes\"\ndescription = \"d\"\ncommand = \"true\"\n[policy]\nread_only = true\n",
        );
    let catalog = load(packs.path());
    let tools: Vec<&Tool> = catalog.tools().collect();
    let export = formats::export(&tools, ExportFormat::Mcp);
    let hint = |name: &str| {
        let list = export.as_json().unwrap().as_array().unwrap();
        list.iter().find(|t| t["name"] == name).unwrap()["annotations"].clone()
    };
    // The silent manifest is read-only by default for packs' own tier, but nobody said so.
    assert!(catalog.get("silent").unwrap().policy().read_only);
    assert_eq!(hint("silent")["readOnlyHint"], false);
    assert_eq!(hint("silent")["destructiveHint"], true);
    assert_eq!(hint("said_yes")["readOnlyHint"], true);
    assert_eq!(hint("toml_yes")["readOnlyHint"], true);
    assert_eq!(hint("said_no")["readOnlyHint"], false);
}

#[test]
fn written_exports_are_the_exports() {
    // `write_export` (what `packs catalog` prints, serialized without building a tree first)
    // says exactly what `export` returns, in every format, for many tools and for none.
    let catalog = bundled();
    let all: Vec<&Tool> = catalog.tools().collect();
    for tools in [all, Vec::new()] {
        for format in ALL {
            let mut written = Vec::new();
            formats::write_export(&tools, format, &mut written).unwrap();
            let expected = match formats::export(&tools, format) {
                Export::Json(v) => format!("{}\n", serde_json::to_string_pretty(&v).unwrap()),
                Export::Text(t) => t,
            };
            assert_eq!(String::from_utf8(written).unwrap(), expected, "{format:?} of {} tools", tools.len());
        }
    }
}
