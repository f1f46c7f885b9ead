//! FunctionGemma's call syntax: `call:NAME{key:<escape>text<escape>,n:15,flag:true,obj:{…},list:[…]}`,
//! optionally wrapped in `<start_function_call>…<end_function_call>`, and its function
//! declarations: `<start_function_declaration>declaration:NAME{description:…,parameters:{…}}<end_function_declaration>`.
//!
//! Strings are wrapped in `<escape>` tokens and stay strings; numbers and booleans
//! are typed; objects and arrays recurse.

use serde_json::{Map, Number, Value};

use crate::tool::Tool;

/// The token that wraps string values.
pub const ESCAPE: &str = "<escape>";
/// Opens a call.
pub const START_CALL: &str = "<start_function_call>";
/// Closes a call.
pub const END_CALL: &str = "<end_function_call>";
/// Opens a function declaration.
pub const START_DECLARATION: &str = "<start_function_declaration>";
/// Closes a function declaration.
pub const END_DECLARATION: &str = "<end_function_declaration>";
/// The developer-turn sentence that switches FunctionGemma to function calling; the
/// declarations follow it directly.
pub const TRIGGER: &str = "You are a model that can do function calling with the following functions";
/// Opens the developer turn.
pub const START_DEVELOPER_TURN: &str = "<start_of_turn>developer\n";
/// Closes a turn.
pub const END_TURN: &str = "<end_of_turn>\n";

/// One parsed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// Its arguments.
    pub args: Map<String, Value>,
    /// Byte range of `call:…}` in the text.
    pub span: std::ops::Range<usize>,
}

/// A syntax error at a byte offset of the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {offset})")]
pub struct ParseError {
    /// Where.
    pub offset: usize,
    /// What.
    pub message: String,
}

/// Every call in `text` (wrapped or bare), in order. Text around calls is ignored.
pub fn parse_calls(text: &str) -> Result<Vec<Call>, ParseError> {
    let mut calls = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find("call:") {
        let start = pos + rel;
        let mut p = Parser { text, pos: start + "call:".len() };
        let name = p.ident()?;
        if name.is_empty() {
            return Err(p.error("expected a function name after `call:`"));
        }
        p.expect("{")?;
        let args = p.members('}')?;
        calls.push(Call { name, args, span: start..p.pos });
        pos = p.pos;
    }
    Ok(calls)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError { offset: self.pos, message: message.into() }
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), ParseError> {
        if self.eat(s) { Ok(()) } else { Err(self.error(format!("expected `{s}`"))) }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        self.skip_ws();
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .unwrap_or(self.rest().len());
        let id = self.rest()[..len].to_owned();
        self.pos += len;
        Ok(id)
    }

    /// A member name: an identifier, or a string in `<escape>` (declarations write the
    /// keys of object values that way).
    fn key(&mut self) -> Result<String, ParseError> {
        self.skip_ws();
        if self.eat(ESCAPE) {
            let Some(end) = self.rest().find(ESCAPE) else {
                return Err(self.error("unterminated name: no closing `<escape>`"));
            };
            let key = self.rest()[..end].to_owned();
            self.pos += end + ESCAPE.len();
            return Ok(key);
        }
        self.ident()
    }

    /// `key:value,...` up to `close`.
    fn members(&mut self, close: char) -> Result<Map<String, Value>, ParseError> {
        let mut map = Map::new();
        let close_s = close.to_string();
        if self.eat(&close_s) {
            return Ok(map);
        }
        loop {
            let key = self.key()?;
            if key.is_empty() {
                return Err(self.error("expected an argument name"));
            }
            self.expect(":")?;
            let value = self.value()?;
            map.insert(key, value);
            if self.eat(",") {
                continue;
            }
            self.expect(&close_s)?;
            return Ok(map);
        }
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        self.skip_ws();
        if self.eat(ESCAPE) {
            let Some(end) = self.rest().find(ESCAPE) else {
                return Err(self.error("unterminated string: no closing `<escape>`"));
            };
            let s = self.rest()[..end].to_owned();
            self.pos += end + ESCAPE.len();
            return Ok(Value::String(s));
        }
        if self.eat("{") {
            return self.members('}').map(Value::Object);
        }
        if self.eat("[") {
            let mut items = Vec::new();
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            loop {
                items.push(self.value()?);
                if self.eat(",") {
                    continue;
                }
                self.expect("]")?;
                return Ok(Value::Array(items));
            }
        }
        let len = self.rest().find([',', '}', ']']).unwrap_or(self.rest().len());
        let word = self.rest()[..len].trim();
        let value = match word {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            w => match w.parse::<i64>() {
                Ok(i) => Value::from(i),
                Err(_) => match w.parse::<f64>().ok().and_then(Number::from_f64) {
                    Some(n) => Value::Number(n),
                    None if w.is_empty() => return Err(self.error("expected a value")),
                    // An unescaped word: models sometimes omit <escape>; keep it as a string.
                    None => Value::String(w.to_owned()),
                },
            },
        };
        self.pos += len;
        Ok(value)
    }
}

/// Render a value in FunctionGemma's syntax (strings wrapped in `<escape>`).
pub fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{ESCAPE}{s}{ESCAPE}"),
        Value::Object(m) => {
            let inner: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{}", render_value(v))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(render_value).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// One parsed declaration: `declaration:NAME{…}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The function's name.
    pub name: String,
    /// Its body: `description`, `parameters`, …
    pub body: Map<String, Value>,
    /// Byte range of `declaration:…}` in the text.
    pub span: std::ops::Range<usize>,
}

/// Every declaration in `text` (wrapped or bare), in order. Text around them is ignored.
pub fn parse_declarations(text: &str) -> Result<Vec<Declaration>, ParseError> {
    let mut found = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find("declaration:") {
        let start = pos + rel;
        let mut p = Parser { text, pos: start + "declaration:".len() };
        let name = p.ident()?;
        if name.is_empty() {
            return Err(p.error("expected a function name after `declaration:`"));
        }
        p.expect("{")?;
        let body = p.members('}')?;
        found.push(Declaration { name, body, span: start..p.pos });
        pos = p.pos;
    }
    Ok(found)
}

/// One tool's declaration, wrapped in `<start_function_declaration>…<end_function_declaration>`.
pub fn tool(t: &Tool) -> String {
    declare(t.name(), t.description(), &t.describe().parameters)
}

/// Every tool's declaration, one a line, in the order given (`packs catalog --format gemma`).
pub fn declarations(tools: &[&Tool]) -> String {
    tools.iter().map(|t| tool(t) + "\n").collect()
}

/// The developer turn's text: [`TRIGGER`] followed directly by every declaration, with
/// nothing between them (the layout of FunctionGemma's chat template). Wrap it in
/// [`developer_prompt`]'s turn markers to start a prompt.
pub fn developer_turn(tools: &[&Tool]) -> String {
    let mut out = String::from(TRIGGER);
    tools.iter().for_each(|t| out.push_str(&tool(t)));
    out
}

/// The whole developer turn: `<start_of_turn>developer\n` + [`developer_turn`] +
/// `<end_of_turn>\n`; the user turn follows.
pub fn developer_prompt(tools: &[&Tool]) -> String {
    format!("{START_DEVELOPER_TURN}{}{END_TURN}", developer_turn(tools))
}

/// A declaration from a name, a description and a JSON-Schema parameters schema, as
/// FunctionGemma's chat template renders it:
///
/// `declaration:NAME{description:<escape>…<escape>,parameters:{properties:{…},required:[…],type:<escape>OBJECT<escape>}}`
///
/// - properties in name order (the template's `dictsort`), each
///   `{description:…[,enum:[…]][,items:{…}][,properties:{…},required:[…]],type:<escape>TYPE<escape>}`:
///   `description` always (empty when there is none), `type` last and upper case;
///   `items` for arrays, `properties` and `required` for objects, recursively;
/// - `properties` and `required` are left out when empty;
/// - every string in `<escape>`; an `<escape>` inside a text is removed, since nothing can
///   quote it;
/// - keywords the template does not render (`default`, `pattern`, `minimum`, `format`,
///   …) are left out.
pub fn declare(name: &str, description: &str, parameters: &Value) -> String {
    let mut out = format!("{START_DECLARATION}declaration:{name}{{description:{}", esc(description));
    if let Some(p) = parameters.as_object().filter(|p| !p.is_empty()) {
        out.push_str(",parameters:{");
        out.push_str(&object_body(p));
        out.push('}');
    }
    out.push('}');
    out.push_str(END_DECLARATION);
    out
}

/// `properties:{…},required:[…],type:<escape>OBJECT<escape>` of an object schema.
fn object_body(schema: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
        parts.push(format!("properties:{{{}}}", properties(props)));
    }
    if let Some(req) = required(schema) {
        parts.push(req);
    }
    if let Some(t) = type_name(schema) {
        parts.push(format!("type:{}", esc(&t)));
    }
    parts.join(",")
}

fn properties(props: &Map<String, Value>) -> String {
    let mut names: Vec<&String> = props.keys().collect();
    names.sort();
    let empty = Map::new();
    names
        .into_iter()
        .map(|name| format!("{name}:{{{}}}", property(props[name].as_object().unwrap_or(&empty))))
        .collect::<Vec<_>>()
        .join(",")
}

fn property(schema: &Map<String, Value>) -> String {
    let description = schema.get("description").and_then(Value::as_str).unwrap_or_default();
    let mut parts = vec![format!("description:{}", esc(description))];
    if let Some(values) = schema.get("enum").filter(|e| e.is_array()) {
        parts.push(format!("enum:{}", argument(values)));
    }
    let ty = type_name(schema);
    match ty.as_deref() {
        Some("ARRAY") => {
            if let Some(items) = schema.get("items").and_then(Value::as_object).filter(|i| !i.is_empty()) {
                parts.push(format!("items:{{{}}}", items_body(items)));
            }
        }
        Some("OBJECT") => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
                parts.push(format!("properties:{{{}}}", properties(props)));
            }
            parts.extend(required(schema));
        }
        _ => {}
    }
    if let Some(t) = ty {
        parts.push(format!("type:{}", esc(&t)));
    }
    parts.join(",")
}

/// An array's `items` schema, its keys in name order as the template writes them.
fn items_body(items: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = items.keys().collect();
    keys.sort();
    let empty = Map::new();
    keys.into_iter()
        .filter_map(|k| {
            let v = &items[k];
            Some(match k.as_str() {
                "properties" => format!("properties:{{{}}}", properties(v.as_object().unwrap_or(&empty))),
                "required" => required(items)?,
                "type" => format!("type:{}", esc(&type_name(items)?)),
                _ => format!("{k}:{}", argument(v)),
            })
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `required:[<escape>a<escape>,…]`, or None when nothing is required.
fn required(schema: &Map<String, Value>) -> Option<String> {
    let names: Vec<String> = schema.get("required")?.as_array()?.iter().filter_map(Value::as_str).map(esc).collect();
    (!names.is_empty()).then(|| format!("required:[{}]", names.join(",")))
}

/// The upper-case type name; the first non-null type of a type list.
fn type_name(schema: &Map<String, Value>) -> Option<String> {
    let t = match schema.get("type")? {
        Value::String(t) => t.as_str(),
        Value::Array(a) => a.iter().filter_map(Value::as_str).find(|t| *t != "null")?,
        _ => return None,
    };
    Some(t.to_ascii_uppercase())
}

/// A value as the template's `format_argument` writes it: strings (and object keys) in
/// `<escape>`, objects in key order.
fn argument(v: &Value) -> String {
    match v {
        Value::String(s) => esc(s),
        Value::Array(a) => format!("[{}]", a.iter().map(argument).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys.into_iter().map(|k| format!("{}:{}", esc(k), argument(&m[k]))).collect();
            format!("{{{}}}", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// A string in `<escape>` tokens, any `<escape>` inside it removed.
fn esc(s: &str) -> String {
    format!("{ESCAPE}{}{ESCAPE}", s.replace(ESCAPE, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_wrapped_and_bare_calls_with_typed_values() {
        let text = "User: hi\n<start_function_call>call:get_weather{location:<escape>Half Moon Bay, CA<escape>,days:3,metric:true,opts:{a:[1,<escape>x<escape>]}}<end_function_call> and call:now{}";
        let calls = parse_calls(text).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            Value::Object(calls[0].args.clone()),
            json!({"location": "Half Moon Bay, CA", "days": 3, "metric": true, "opts": {"a": [1, "x"]}})
        );
        assert_eq!(calls[1].name, "now");
        assert!(calls[1].args.is_empty());
    }

    #[test]
    fn strings_keep_commas_braces_and_numbers() {
        let calls = parse_calls("call:f{s:<escape>a, b} [c] 15<escape>,n:-2.5}").unwrap();
        assert_eq!(Value::Object(calls[0].args.clone()), json!({"s": "a, b} [c] 15", "n": -2.5}));
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse_calls("call:f{s:<escape>open}").unwrap_err();
        assert!(e.message.contains("unterminated"));
        assert!(parse_calls("call:f{s 1}").is_err());
        assert!(parse_calls("call:{}").is_err());
    }

    #[test]
    fn render_round_trips() {
        let v = json!({"s": "x, y", "n": 15, "b": false, "o": {"l": [1, "a"]}});
        let text = format!("call:f{}", render_value(&v));
        assert_eq!(Value::Object(parse_calls(&text).unwrap()[0].args.clone()), v);
    }

    /// The declaration printed in "FunctionGemma formatting and best practices"
    /// (ai.google.dev/gemma/docs/functiongemma/formatting-and-best-practices), Turn 1.
    const DOC_DECLARATION: &str = "<start_function_declaration>declaration:get_current_weather{description:<escape>Gets the current weather in a given location.<escape>,parameters:{properties:{location:{description:<escape>The city and state, e.g. \"San Francisco, CA\" or \"Tokyo, JP\"<escape>,type:<escape>STRING<escape>},unit:{description:<escape>The unit to return the temperature in.<escape>,enum:[<escape>celsius<escape>,<escape>fahrenheit<escape>],type:<escape>STRING<escape>}},required:[<escape>location<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration>";

    #[test]
    fn declarations_match_the_documented_rendering() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The unit to return the temperature in."},
                "location": {"type": "string", "description": "The city and state, e.g. \"San Francisco, CA\" or \"Tokyo, JP\""}
            },
            "required": ["location"],
            "additionalProperties": false
        });
        let d = declare("get_current_weather", "Gets the current weather in a given location.", &parameters);
        assert_eq!(d, DOC_DECLARATION);
        let parsed = parse_declarations(&d).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].name, "get_current_weather");
        assert_eq!(parsed[0].body["parameters"]["required"], json!(["location"]));
    }

    #[test]
    fn nested_schemas_recurse_and_empty_parts_are_left_out() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}},
                "n": {"type": ["integer", "null"], "enum": [1, 2], "default": 1}
            },
            "required": []
        });
        assert_eq!(
            declare("f", "d <escape>x", &parameters),
            "<start_function_declaration>declaration:f{description:<escape>d x<escape>,parameters:{properties:{\
             n:{description:<escape><escape>,enum:[1,2],type:<escape>INTEGER<escape>},\
             tags:{description:<escape><escape>,items:{properties:{k:{description:<escape><escape>,type:<escape>INTEGER<escape>}},\
             required:[<escape>k<escape>],type:<escape>OBJECT<escape>},type:<escape>ARRAY<escape>}},\
             type:<escape>OBJECT<escape>}}<end_function_declaration>"
        );
        assert_eq!(
            declare("g", "none", &json!({"type": "object", "properties": {}})),
            "<start_function_declaration>declaration:g{description:<escape>none<escape>,parameters:{type:<escape>OBJECT<escape>}}<end_function_declaration>"
        );
        let text = declare(
            "h",
            "keys",
            &json!({"type": "object", "properties": {"o": {"type": "array", "items": {"default": {"a b": 1}}}}}),
        );
        assert!(text.contains("items:{default:{<escape>a b<escape>:1}}"), "{text}");
        assert_eq!(
            parse_declarations(&text).unwrap()[0].body["parameters"]["properties"]["o"]["items"],
            json!({"default": {"a b": 1}})
        );
    }
}
