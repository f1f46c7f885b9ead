//! FunctionGemma's call syntax: `call:NAME{key:<escape>text<escape>,n:15,flag:true,obj:{…},list:[…]}`,
//! optionally wrapped in `<start_function_call>…<end_function_call>`.
//!
//! Strings are wrapped in `<escape>` tokens and stay strings; numbers and booleans
//! are typed; objects and arrays recurse.

use serde_json::{Map, Number, Value};

/// The token that wraps string values.
pub const ESCAPE: &str = "<escape>";
/// Opens a call.
pub const START_CALL: &str = "<start_function_call>";
/// Closes a call.
pub const END_CALL: &str = "<end_function_call>";

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

    /// `key:value,...` up to `close`.
    fn members(&mut self, close: char) -> Result<Map<String, Value>, ParseError> {
        let mut map = Map::new();
        let close_s = close.to_string();
        if self.eat(&close_s) {
            return Ok(map);
        }
        loop {
            let key = self.ident()?;
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
}
