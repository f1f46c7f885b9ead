//! Tool declarations in the form each open-weight family's chat template writes them into
//! the prompt (`packs catalog --format FAMILY`): the text the template writes *because*
//! tools were given, byte for byte, without the turn it sits in (that turn also holds the
//! operator's system prompt or the user's first message). What each family expects, and
//! where the text goes, is in `docs/FORMATS.md`, *Prompts to match*.
//!
//! Most templates embed the OpenAI tool definitions (`{"type": "function", "function":
//! {"name", "description", "parameters"}}`) as Python's `json.dumps` writes them (what
//! `tojson` gives in transformers' and llama.cpp's template engines: `", "` and `": "`
//! between members, non-ASCII kept). Gemma 4 writes its own declaration syntax; gpt-oss a
//! TypeScript-like namespace (the Harmony renderer's).

use serde_json::{Map, Value};

use super::raw::Family;
use crate::tool::Tool;

/// The tool declarations of `tools` as `family`'s chat template writes them (empty when
/// there are no tools: every template writes nothing then). `functiongemma` is the
/// developer turn's text ([`super::functiongemma::developer_turn`]).
pub fn text(tools: &[&Tool], family: Family) -> String {
    if tools.is_empty() {
        return String::new();
    }
    let openai: Vec<Value> = tools.iter().map(|t| super::openai::tool(t)).collect();
    let functions = || openai.iter().map(|t| &t["function"]);
    match family {
        Family::Qwen3 => qwen3(&openai),
        Family::Qwen3Xml => qwen3_xml(functions()),
        Family::Gemma4 => functions().map(gemma4_declaration).collect(),
        Family::Functiongemma => super::functiongemma::developer_turn(tools),
        Family::Llama3 => llama3(&openai),
        Family::Mistral => format!("[AVAILABLE_TOOLS] {}[/AVAILABLE_TOOLS]", python_json(&Value::Array(openai))),
        Family::Glm => glm(&openai),
        Family::Kimi => {
            format!("<|im_system|>tool_declare<|im_middle|>{}<|im_end|>", python_json(&Value::Array(openai)))
        }
        Family::GptOss => harmony(functions()),
        Family::Deepseek => deepseek(functions()),
    }
}

/// `value` as Python's `json.dumps(value, ensure_ascii=False)` writes it: `", "` between
/// members and items, `": "` after a key, non-ASCII characters as they are.
pub fn python_json(value: &Value) -> String {
    /// serde_json's compact output with Python's separators.
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    serde::Serialize::serialize(value, &mut ser).expect("a JSON value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// `json.dumps(value, indent=4)`: one member a line, four spaces a level, `": "` after a key.
fn python_json_indented(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    serde::Serialize::serialize(value, &mut ser).expect("a JSON value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Qwen3's system-turn section (its template: `# Tools`, one OpenAI definition a line in
/// `<tools></tools>`, then the call format). The template writes it after
/// `<|im_start|>system\n` and the system prompt's text and `\n\n`, and ends the turn with
/// `<|im_end|>\n` right after it.
fn qwen3(openai: &[Value]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in openai {
        out.push('\n');
        out.push_str(&python_json(t));
    }
    out.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within \
         <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    out
}

/// GLM 4.5's system turn (after `<|system|>\n`): `# Tools`, one OpenAI definition a line in
/// `<tools></tools>`, then the `<arg_key>`/`<arg_value>` call format.
fn glm(openai: &[Value]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n",
    );
    for t in openai {
        out.push_str(&python_json(t));
        out.push('\n');
    }
    out.push_str(
        "</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n\
         <tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n\
         <arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>",
    );
    out
}

/// Llama 3.1–3.3's tools in the first user turn (the default, `tools_in_user_message`):
/// the instruction, then each OpenAI definition as `json.dumps(indent=4)` followed by a
/// blank line; the user's first message follows directly.
fn llama3(openai: &[Value]) -> String {
    let mut out = String::from(
        "Given the following functions, please respond with a JSON for a function call with its proper \
         arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \
         \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n",
    );
    for t in openai {
        out.push_str(&python_json_indented(t));
        out.push_str("\n\n");
    }
    out
}

/// DeepSeek V3.2's tools section (its encoder's `TOOLS_SYSTEM_TEMPLATE`): the DSML call
/// format, then each function object (`{"name", "description", "parameters"}`, not the
/// OpenAI wrapper) a line in `<functions></functions>`. It follows the system prompt after
/// `\n\n`.
fn deepseek<'a>(functions: impl Iterator<Item = &'a Value>) -> String {
    const D: &str = "｜DSML｜";
    let schemas: Vec<String> = functions.map(python_json).collect();
    format!(
        "## Tools\nYou have access to a set of tools you can use to answer the user's question.\n\
         You can invoke functions by writing a \"<{D}function_calls>\" block like the following as part of your reply to the user:\n\
         <{D}function_calls>\n<{D}invoke name=\"$FUNCTION_NAME\">\n\
         <{D}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}parameter>\n...\n</{D}invoke>\n\
         <{D}invoke name=\"$FUNCTION_NAME2\">\n...\n</{D}invoke>\n</{D}function_calls>\n\
         String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects \
         should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" \
         for other types (numbers, booleans, arrays, objects).\n\
         If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking \
         block. Here is an example:\n<{D}function_calls>\n...\n</{D}function_calls>\n<function_results>\n...\n</function_results>\n\
         <think>...thinking about results</think>\nHere are the functions available in JSONSchema format:\n<functions>\n{}\n</functions>\n",
        schemas.join("\n")
    )
}

/// Qwen3-Coder's system-turn section (its published template): each function in XML
/// (`<function>`, `<name>`, `<description>`, `<parameters>` with one `<parameter>` each,
/// a schema's other keywords as `<KEY>VALUE</KEY>`), then the XML call format. The
/// template writes it after the system prompt and `\n\n`.
fn qwen3_xml<'a>(functions: impl Iterator<Item = &'a Value>) -> String {
    let mut out = String::from("# Tools\n\nYou have access to the following tools:\n\n<tools>");
    let empty = Map::new();
    for f in functions {
        out.push_str(&format!("\n<function>\n<name>{}</name>", jinja_text(&f["name"])));
        if let Some(d) = f.get("description") {
            out.push_str(&format!("\n<description>{}</description>", jinja_text(d).trim()));
        }
        out.push_str("\n<parameters>");
        let params = f["parameters"].as_object().unwrap_or(&empty);
        for (name, schema) in params.get("properties").and_then(Value::as_object).unwrap_or(&empty) {
            out.push_str(&format!("\n<parameter>\n<name>{name}</name>"));
            let schema = schema.as_object().unwrap_or(&empty);
            if let Some(t) = schema.get("type") {
                out.push_str(&format!("\n<type>{}</type>", jinja_text(t)));
            }
            if let Some(d) = schema.get("description") {
                out.push_str(&format!("\n<description>{}</description>", jinja_text(d).trim()));
            }
            extra_keys(schema, &["name", "type", "description"], &mut out);
            out.push_str("\n</parameter>");
        }
        extra_keys(params, &["type", "properties"], &mut out);
        out.push_str("\n</parameters>\n</function>");
    }
    out.push_str(
        "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n\
         <tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n\
         <parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n\
         - Function calls MUST follow the specified format: the tool calling block MUST begin with an opening \
         <tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be specified\n\
         - You may provide optional reasoning for your function call in natural language BEFORE the function call, \
         but NOT after\n- If there is no function call available, answer the question like normal with your current \
         knowledge and do not tell the user about function calls\n</IMPORTANT>",
    );
    out
}

/// The template's `render_extra_keys`: every key not `handled` as `\n<KEY>VALUE</KEY>`,
/// mappings and lists as JSON (`tojson`), other values as Jinja's `string` filter writes them.
fn extra_keys(schema: &Map<String, Value>, handled: &[&str], out: &mut String) {
    for (k, v) in schema.iter().filter(|(k, _)| !handled.contains(&k.as_str())) {
        let value = if v.is_object() || v.is_array() { python_json(v) } else { jinja_text(v) };
        out.push_str(&format!("\n<{k}>{value}</{k}>"));
    }
}

/// A value as Jinja's `{{ v }}` prints it (Python's `str`): strings bare, `True`/`False`,
/// `None`, lists as Python's `repr`.
fn jinja_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr` of a JSON value (strings in single quotes, `True`, `None`).
fn python_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(a) => format!("[{}]", a.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            let inner: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", python_repr(&Value::String(k.clone())), python_repr(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Gemma 4
// ---------------------------------------------------------------------------------------

/// Gemma 4's string delimiter.
const Q: &str = "<|\"|>";

/// One Gemma 4 declaration, `<|tool>declaration:NAME{description:<|"|>…<|"|>,parameters:{…}}<tool|>`,
/// as its template's `format_function_declaration` writes it (the template's own quirks
/// kept, since the model was trained on them: a property without a description that is
/// an object or an array starts with a comma, and has none before its `type`).
fn gemma4_declaration(function: &Value) -> String {
    let name = function["name"].as_str().unwrap_or_default();
    let description = jinja_text(&function["description"]);
    let mut out = format!("<|tool>declaration:{name}{{description:{Q}{description}{Q}");
    if let Some(params) = function["parameters"].as_object().filter(|p| !p.is_empty()) {
        out.push_str(",parameters:{");
        if let Some(props) = params.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
            out.push_str(&format!("properties:{{{}}},", gemma4_properties(props)));
        }
        if let Some(required) = params.get("required").filter(|r| truthy(r)) {
            out.push_str(&format!("required:{},", gemma4_names(required)));
        }
        if let Some(t) = params.get("type").filter(|t| truthy(t)) {
            out.push_str(&format!("type:{Q}{}{Q}}}", jinja_text(t).to_uppercase()));
        }
    }
    out.push_str("}<tool|>");
    out
}

/// `[<|"|>a<|"|>,…]` of a `required` list.
fn gemma4_names(list: &Value) -> String {
    let names: Vec<String> =
        list.as_array().into_iter().flatten().map(|n| format!("{Q}{}{Q}", jinja_text(n))).collect();
    format!("[{}]", names.join(","))
}

/// Jinja's truth of a value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// The template's `format_parameters`: properties in name order, the names it reserves
/// (`description`, `type`, `properties`, `required`, `nullable`) skipped.
fn gemma4_properties(props: &Map<String, Value>) -> String {
    const RESERVED: [&str; 5] = ["description", "type", "properties", "required", "nullable"];
    let mut names: Vec<&String> = props.keys().filter(|k| !RESERVED.contains(&k.as_str())).collect();
    names.sort();
    let empty = Map::new();
    let each = names.into_iter().map(|key| {
        let value = props[key].as_object().unwrap_or(&empty);
        let mut out = format!("{key}:{{");
        let mut comma = false;
        if let Some(d) = value.get("description").filter(|d| truthy(d)) {
            out.push_str(&format!("description:{Q}{}{Q}", jinja_text(d)));
            comma = true;
        }
        if value.get("nullable").is_some_and(truthy) {
            out.push_str(if comma { ",nullable:true" } else { "nullable:true" });
            comma = true;
        }
        let ty = match value.get("type") {
            Some(Value::Array(a)) => a.first().map(jinja_text).unwrap_or_default(),
            Some(t) => jinja_text(t),
            None => String::new(),
        }
        .to_uppercase();
        match ty.as_str() {
            "STRING" => {
                if let Some(e) = value.get("enum").filter(|e| truthy(e)) {
                    if comma {
                        out.push(',');
                    }
                    out.push_str(&format!("enum:{}", gemma4_argument(e, true)));
                    comma = true;
                }
            }
            "OBJECT" => {
                out.push_str(",properties:{");
                match value.get("properties") {
                    Some(Value::Object(p)) => out.push_str(&gemma4_properties(p)),
                    _ => out.push_str(&gemma4_properties(value)),
                }
                out.push('}');
                if let Some(r) = value.get("required").filter(|r| truthy(r)) {
                    out.push_str(&format!(",required:{}", gemma4_names(r)));
                }
            }
            "ARRAY" => {
                if let Some(items) = value.get("items").and_then(Value::as_object).filter(|i| !i.is_empty()) {
                    out.push_str(&format!(",items:{{{}}}", gemma4_items(items)));
                }
            }
            _ => {}
        }
        if comma {
            out.push(',');
        }
        out.push_str(&format!("type:{Q}{ty}{Q}}}"));
        out
    });
    each.collect::<Vec<_>>().join(",")
}

/// An array's `items` schema, its keys in name order as the template writes them.
fn gemma4_items(items: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = items.keys().filter(|k| !items[*k].is_null()).collect();
    keys.sort();
    let empty = Map::new();
    keys.into_iter()
        .map(|k| {
            let v = &items[k];
            match k.as_str() {
                "properties" => format!("properties:{{{}}}", gemma4_properties(v.as_object().unwrap_or(&empty))),
                "required" => format!("required:{}", gemma4_names(v)),
                "type" => match v {
                    Value::Array(a) => format!(
                        "type:[{}]",
                        a.iter()
                            .map(|t| format!("{Q}{}{Q}", jinja_text(t).to_uppercase()))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    t => format!("type:{Q}{}{Q}", jinja_text(t).to_uppercase()),
                },
                _ => format!("{k}:{}", gemma4_argument(v, true)),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The template's `format_argument`: strings in `<|"|>`, mappings in key order (keys in
/// `<|"|>` when `escape_keys`), other values as Jinja prints them.
fn gemma4_argument(v: &Value, escape_keys: bool) -> String {
    match v {
        Value::String(s) => format!("{Q}{s}{Q}"),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => {
            format!("[{}]", a.iter().map(|i| gemma4_argument(i, escape_keys)).collect::<Vec<_>>().join(","))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let key = if escape_keys { format!("{Q}{k}{Q}") } else { k.clone() };
                    format!("{key}:{}", gemma4_argument(&m[k], escape_keys))
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        other => python_repr(other),
    }
}

// ---------------------------------------------------------------------------------------
// gpt-oss (Harmony)
// ---------------------------------------------------------------------------------------

/// The developer message's tools section, as the Harmony renderer writes it:
///
/// ```text
/// # Tools
///
/// ## functions
///
/// namespace functions {
///
/// // DESCRIPTION
/// type NAME = (_: {
/// // PARAMETER DESCRIPTION
/// location: string,
/// unit?: "metric" | "imperial", // default: metric
/// }) => any;
///
/// } // namespace functions
/// ```
///
/// It follows `# Instructions\n\nINSTRUCTIONS\n\n` in the developer message
/// (`<|start|>developer<|message|>…<|end|>`). A tool without parameters is
/// `type NAME = () => any;`.
fn harmony<'a>(functions: impl Iterator<Item = &'a Value>) -> String {
    let mut lines = vec!["## functions\n".to_owned(), "namespace functions {\n".to_owned()];
    for f in functions {
        let description = f["description"].as_str().unwrap_or_default();
        lines.extend(description.lines().map(|l| format!("// {l}")));
        let name = f["name"].as_str().unwrap_or_default();
        let has_parameters =
            f["parameters"].get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        if has_parameters {
            lines.push(format!("type {name} = (_: {}) => any;\n", typescript(&f["parameters"], "")));
        } else {
            lines.push(format!("type {name} = () => any;\n"));
        }
    }
    lines.push("} // namespace functions".to_owned());
    format!("# Tools\n\n{}", lines.join("\n"))
}

/// A default's comment: a string that is not an enum value's in quotes, else as JSON.
fn harmony_default(schema: &Value) -> Option<String> {
    let default = schema.get("default")?;
    let is_enum = schema.get("enum").and_then(Value::as_array).is_some_and(|e| !e.is_empty());
    Some(match default.as_str() {
        Some(s) if !is_enum => format!("default: \"{s}\""),
        Some(s) => format!("default: {s}"),
        None => format!("default: {default}"),
    })
}

/// `type | null` when the schema says `nullable` and the type does not name null yet.
fn harmony_nullable(schema: &Value, ty: String) -> String {
    if schema.get("nullable").and_then(Value::as_bool).unwrap_or(false) && !ty.contains("null") {
        format!("{ty} | null")
    } else {
        ty
    }
}

/// A JSON Schema as the Harmony renderer's TypeScript-like type: objects as `{ … }` with
/// one property a line (`name?: type,` when optional, its description, title and string
/// examples as comments above, its default as a comment after), `"a" | "b"` for a string
/// enum, `number` for numbers and integers, `T[]` for arrays, unions for `oneOf` and type
/// lists, `any` otherwise.
fn typescript(schema: &Value, indent: &str) -> String {
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        let mut out = String::new();
        for v in variants {
            out.push_str(&format!("\n{indent} | "));
            out.push_str(&harmony_nullable(v, typescript(v, &format!("{indent}   "))));
            let comments: Vec<String> = v
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .into_iter()
                .chain(harmony_default(v))
                .collect();
            if !comments.is_empty() {
                out.push_str(&format!(" // {}", comments.join(" ")));
            }
        }
        return out;
    }
    if let Some(types) = schema.get("type").and_then(Value::as_array) {
        let names: Vec<&str> =
            types.iter().filter_map(Value::as_str).map(|t| if t == "integer" { "number" } else { t }).collect();
        if !names.is_empty() {
            return names.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => typescript_object(schema, indent),
        Some("string") => {
            let values: Vec<String> = schema
                .get("enum")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|s| format!("\"{s}\""))
                .collect();
            if values.is_empty() { "string".into() } else { values.join(" | ") }
        }
        Some("number" | "integer") => "number".into(),
        Some("boolean") => "boolean".into(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("{}[]", typescript(items, indent)),
            None => "Array<any>".into(),
        },
        _ => "any".into(),
    }
}

/// An object schema's `{ … }` (see [`typescript`]).
fn typescript_object(schema: &Value, indent: &str) -> String {
    let mut out = String::new();
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    out.push_str("{\n");
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let empty = Map::new();
    for (key, val) in schema.get("properties").and_then(Value::as_object).unwrap_or(&empty) {
        let optional = if required.contains(&key.as_str()) { "" } else { "?" };
        if let Some(title) = val.get("title").and_then(Value::as_str) {
            out.push_str(&format!("{indent}// {title}\n{indent}//\n"));
        }
        let description = val.get("description").and_then(Value::as_str);
        let one_of = val.get("oneOf");
        if let Some(d) = description.filter(|_| one_of.is_none()) {
            out.push_str(&format!("{indent}// {d}\n"));
        }
        examples(val, indent, &mut out);
        if let Some(variants) = one_of.and_then(Value::as_array) {
            // The property's description above it, unless the first variant repeats it.
            let first_says = variants.first().and_then(|v| v.get("description")).and_then(Value::as_str);
            let above = description.filter(|d| Some(*d) != first_says);
            if let Some(d) = above {
                out.push_str(&format!("{indent}// {d}\n"));
            }
            if let Some(d) = harmony_default(val) {
                out.push_str(&format!("{indent}// {d}\n"));
            }
            out.push_str(&format!("{indent}{key}{optional}:\n"));
            for (i, v) in variants.iter().enumerate() {
                out.push_str(&format!("{indent} | "));
                out.push_str(&harmony_nullable(v, typescript(v, &format!("{indent}   "))));
                let own = v.get("description").and_then(Value::as_str).filter(|d| Some(*d) != description);
                let own = if i == 0 && above.is_some() { None } else { own };
                let comments: Vec<String> = own.map(str::to_owned).into_iter().chain(harmony_default(v)).collect();
                if !comments.is_empty() {
                    out.push_str(&format!(" // {}", comments.join(" ")));
                }
                out.push('\n');
            }
            out.push_str(&format!("{indent},\n"));
            continue;
        }
        let ty = harmony_nullable(val, typescript(val, &format!("{indent}    ")));
        out.push_str(&format!("{indent}{key}{optional}: {ty},"));
        if let Some(d) = harmony_default(val) {
            out.push_str(&format!(" // {d}"));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent}}}"));
    out
}

/// A property's string examples as comments (`// Examples:` then `// - "…"`).
fn examples(val: &Value, indent: &str, out: &mut String) {
    let Some(list) = val.get("examples").and_then(Value::as_array).filter(|l| !l.is_empty()) else { return };
    out.push_str(&format!("{indent}// Examples:\n"));
    for ex in list.iter().filter_map(Value::as_str) {
        out.push_str(&format!("{indent}// - \"{ex}\"\n"));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn python_json_has_pythons_separators_and_keeps_non_ascii() {
        let v = json!({"a": [1, 2.5, "é\n\"x\"\u{1}"], "b": {}, "c": [], "d": null, "e": true});
        assert_eq!(python_json(&v), r#"{"a": [1, 2.5, "é\n\"x\"\u0001"], "b": {}, "c": [], "d": null, "e": true}"#);
        assert_eq!(
            python_json_indented(&json!({"a": [1], "b": {}})),
            "{\n    \"a\": [\n        1\n    ],\n    \"b\": {}\n}"
        );
    }

    /// The example of the Harmony format guide (`get_location` without parameters, and
    /// `get_current_weather`), byte for byte.
    #[test]
    fn harmony_writes_the_guides_example() {
        let functions = [
            json!({"name": "get_location", "description": "Gets the location of the user.",
                   "parameters": {"type": "object", "properties": {}}}),
            json!({"name": "get_current_weather", "description": "Gets the current weather in the provided location.",
                   "parameters": {"type": "object", "properties": {
                       "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                       "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
                   "required": ["location"]}}),
        ];
        assert_eq!(
            harmony(functions.iter()),
            "# Tools\n\n## functions\n\nnamespace functions {\n\n// Gets the location of the user.\n\
             type get_location = () => any;\n\n// Gets the current weather in the provided location.\n\
             type get_current_weather = (_: {\n// The city and state, e.g. San Francisco, CA\nlocation: string,\n\
             format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n} // namespace functions"
        );
    }

    #[test]
    fn harmony_types_nested_objects_arrays_unions_and_defaults() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "default": 3},
            "s": {"type": "string", "default": "x"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "any": {"type": ["string", "null"]},
            "opts": {"type": "object", "description": "Options", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]},
            "free": {},
            "list": {"type": "array"}
        }, "required": ["n"]});
        assert_eq!(
            typescript(&schema, ""),
            "{\nn: number, // default: 3\ns?: string, // default: \"x\"\ntags?: string[],\nany?: string | null,\n\
             // Options\nopts?:     // Options\n{\n    deep: boolean,\n    },\nfree?: any,\nlist?: Array<any>,\n}"
        );
    }

    #[test]
    fn gemma4_writes_its_templates_declaration() {
        let f = json!({"name": "find", "description": "Find things", "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What"},
            "limit": {"type": "integer", "enum": [10, 20]},
            "mode": {"type": "string", "enum": ["a", "b"], "nullable": true},
            "filters": {"type": "array", "description": "All must hold", "items": {"type": "object",
                "properties": {"field": {"type": "string"}}, "required": ["field"]}},
            "opts": {"type": "object", "properties": {"deep": {"type": ["boolean", "null"]}}, "required": ["deep"]},
            "type": {"type": "string"}
        }, "required": ["query"]}});
        assert_eq!(
            gemma4_declaration(&f),
            "<|tool>declaration:find{description:<|\"|>Find things<|\"|>,parameters:{properties:{\
             filters:{description:<|\"|>All must hold<|\"|>,items:{properties:{field:{type:<|\"|>STRING<|\"|>}},\
             required:[<|\"|>field<|\"|>],type:<|\"|>OBJECT<|\"|>},type:<|\"|>ARRAY<|\"|>},\
             limit:{type:<|\"|>INTEGER<|\"|>},\
             mode:{nullable:true,enum:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],type:<|\"|>STRING<|\"|>},\
             opts:{,properties:{deep:{type:<|\"|>BOOLEAN<|\"|>}},required:[<|\"|>deep<|\"|>]type:<|\"|>OBJECT<|\"|>},\
             query:{description:<|\"|>What<|\"|>,type:<|\"|>STRING<|\"|>}},\
             required:[<|\"|>query<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>"
        );
        let bare = json!({"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}});
        assert_eq!(
            gemma4_declaration(&bare),
            "<|tool>declaration:now{description:<|\"|><|\"|>,parameters:{type:<|\"|>OBJECT<|\"|>}}<tool|>"
        );
    }

    #[test]
    fn qwen3_xml_writes_each_keyword_as_its_template_does() {
        let f = json!({"name": "find", "description": " Find things\n", "parameters": {"type": "object", "properties": {
            "limit": {"type": "integer", "enum": [10, 20], "default": 10, "description": "How many"},
            "any": {"type": ["string", "null"], "nullable": false}
        }, "required": ["limit"], "additionalProperties": false}});
        let text = qwen3_xml(std::iter::once(&f));
        let tools = &text[..text.find("\n\nIf you choose").unwrap()];
        assert_eq!(
            tools,
            "# Tools\n\nYou have access to the following tools:\n\n<tools>\n<function>\n<name>find</name>\n\
             <description>Find things</description>\n<parameters>\n<parameter>\n<name>limit</name>\n<type>integer</type>\n\
             <description>How many</description>\n<enum>[10, 20]</enum>\n<default>10</default>\n</parameter>\n\
             <parameter>\n<name>any</name>\n<type>['string', 'null']</type>\n<nullable>False</nullable>\n</parameter>\n\
             <required>[\"limit\"]</required>\n<additionalProperties>False</additionalProperties>\n</parameters>\n\
             </function>\n</tools>"
        );
    }
}
