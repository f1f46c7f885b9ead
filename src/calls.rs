//! Tool calls in a model's response, and results in the shape that API expects.
//!
//! `packs call` reads a response from OpenAI Chat Completions, OpenAI Responses,
//! Anthropic Messages, Ollama, or FunctionGemma text, dispatches each call through
//! the normal pipeline, and prints the results so they can be appended to the
//! conversation as they are.

use serde_json::{Map, Value, json};

use crate::formats::functiongemma;

crate::names::named_enum! {
    /// The response formats `packs call` understands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum CallFormat {
        /// Detect from the input.
        Auto = "auto",
        /// OpenAI Chat Completions (`tool_calls`, arguments as a JSON string).
        Openai = "openai",
        /// OpenAI Responses (`function_call` output items).
        OpenaiResponses = "openai-responses",
        /// Anthropic Messages (`tool_use` content blocks).
        Anthropic = "anthropic",
        /// Ollama chat (`message.tool_calls`, arguments as an object or a JSON string).
        Ollama = "ollama",
        /// Gemini `generateContent` (`functionCall` parts).
        Gemini = "gemini",
        /// FunctionGemma text (`call:NAME{...}`).
        Gemma = "gemma",
    }
}

/// One call found in a response.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundCall {
    /// The id the API gave the call (empty for FunctionGemma).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, or why they could not be read.
    pub args: Result<Value, String>,
}

/// Why a response could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

/// Detect the format of `input` (JSON shapes first, then FunctionGemma text).
pub fn detect(input: &str) -> CallFormat {
    let Ok(v) = serde_json::from_str::<Value>(input) else { return CallFormat::Gemma };
    let items = v.get("output").or(Some(&v)).and_then(Value::as_array);
    if items.is_some_and(|items| items.iter().any(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))) {
        return CallFormat::OpenaiResponses;
    }
    if v.get("candidates").is_some() || v.get("parts").and_then(Value::as_array).is_some() {
        return CallFormat::Gemini;
    }
    if v.get("content").and_then(Value::as_array).is_some() || v.get("stop_reason").is_some() {
        return CallFormat::Anthropic;
    }
    if v.get("choices").is_some() {
        return CallFormat::Openai;
    }
    if v.get("message").is_some() && v.get("model").is_some() {
        return CallFormat::Ollama;
    }
    if let Some(calls) = v.get("tool_calls").and_then(Value::as_array) {
        // Ollama's calls carry no id and give arguments as an object.
        let ollama = calls
            .iter()
            .all(|c| c.get("id").is_none() && c.pointer("/function/arguments").is_some_and(Value::is_object));
        return if ollama && !calls.is_empty() { CallFormat::Ollama } else { CallFormat::Openai };
    }
    if v.get("message").is_some() {
        return CallFormat::Ollama;
    }
    // A JSON document with none of these shapes: read it as text.
    CallFormat::Gemma
}

/// Find the calls in `input` read as `format` (`Auto` detects).
pub fn find_calls(input: &str, format: CallFormat) -> Result<(CallFormat, Vec<FoundCall>), ReadError> {
    let format = if format == CallFormat::Auto { detect(input) } else { format };
    if format == CallFormat::Gemma {
        return gemma_calls(input).map(|c| (format, c));
    }
    let v: Value = serde_json::from_str(input).map_err(|e| ReadError(format!("the input is not JSON: {e}")))?;
    let mut calls = match format {
        CallFormat::Openai => openai_calls(&v),
        CallFormat::OpenaiResponses => responses_calls(&v),
        CallFormat::Anthropic => anthropic_calls(&v),
        CallFormat::Ollama => ollama_calls(&v),
        CallFormat::Gemini => gemini_calls(&v),
        CallFormat::Auto | CallFormat::Gemma => Vec::new(),
    };
    // Strict-mode models send `null` for optional arguments they leave out.
    for c in &mut calls {
        if let Ok(args) = &mut c.args {
            crate::formats::openai::strip_nulls(args);
        }
    }
    Ok((format, calls))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Arguments given as a JSON string (OpenAI) or an object (Ollama); both are accepted.
fn arguments(v: Option<&Value>) -> Result<Value, String> {
    match v {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .map_err(|e| format!("the arguments are not valid JSON ({e}): {s}"))
            .and_then(|a| if a.is_object() { Ok(a) } else { Err(format!("the arguments are not a JSON object: {s}")) }),
        Some(o @ Value::Object(_)) => Ok(o.clone()),
        Some(other) => Err(format!("the arguments are not a JSON object: {other}")),
    }
}

fn openai_calls(v: &Value) -> Vec<FoundCall> {
    tool_calls(v.pointer("/choices/0/message").unwrap_or(v))
}

/// `tool_calls` of a chat message: `[{id, function: {name, arguments}}]` (OpenAI and Ollama).
fn tool_calls(message: &Value) -> Vec<FoundCall> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let f = c.get("function").unwrap_or(&Value::Null);
            FoundCall {
                id: str_of(c, "id").to_owned(),
                name: str_of(f, "name").to_owned(),
                args: arguments(f.get("arguments")),
            }
        })
        .collect()
}

fn responses_calls(v: &Value) -> Vec<FoundCall> {
    let items = v.get("output").unwrap_or(v);
    items
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| str_of(i, "type") == "function_call")
        .map(|i| {
            let id = if str_of(i, "call_id").is_empty() { str_of(i, "id") } else { str_of(i, "call_id") };
            FoundCall { id: id.to_owned(), name: str_of(i, "name").to_owned(), args: arguments(i.get("arguments")) }
        })
        .collect()
}

fn anthropic_calls(v: &Value) -> Vec<FoundCall> {
    v.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| str_of(b, "type") == "tool_use")
        .map(|b| FoundCall {
            id: str_of(b, "id").to_owned(),
            name: str_of(b, "name").to_owned(),
            args: arguments(b.get("input")),
        })
        .collect()
}

fn ollama_calls(v: &Value) -> Vec<FoundCall> {
    tool_calls(v.get("message").unwrap_or(v))
}

fn gemini_calls(v: &Value) -> Vec<FoundCall> {
    let parts = v.pointer("/candidates/0/content/parts").or_else(|| v.get("parts"));
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("functionCall"))
        .map(|c| FoundCall {
            id: str_of(c, "id").to_owned(),
            name: str_of(c, "name").to_owned(),
            args: arguments(c.get("args")),
        })
        .collect()
}

fn gemma_calls(text: &str) -> Result<Vec<FoundCall>, ReadError> {
    match functiongemma::parse_calls(text) {
        Ok(calls) => Ok(calls
            .into_iter()
            .map(|c| FoundCall { id: String::new(), name: c.name, args: Ok(Value::Object(c.args)) })
            .collect()),
        // A malformed call is an error result for that call, named if the name was readable.
        Err(e) => {
            let start = text[..e.offset.min(text.len())].rfind("call:").map_or(0, |i| i + "call:".len());
            let name: String = text[start..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            Ok(vec![FoundCall {
                id: String::new(),
                name,
                args: Err(format!("the call does not parse: {}", e.message)),
            }])
        }
    }
}

/// The outcome of one call, ready to render.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The call it answers.
    pub call: FoundCall,
    /// True when the tool ran and succeeded.
    pub ok: bool,
    /// For the model: the tool's output, or the error as JSON text it can act on.
    pub content: String,
    /// The structured value (the output JSON, or the error object).
    pub value: Value,
}

/// Render results as the messages (or text) to append for `format`.
pub fn render_results(results: &[CallResult], format: CallFormat) -> String {
    // One JSON value per result, in the API's shape.
    let each = |f: &dyn Fn(&CallResult) -> Value| Value::Array(results.iter().map(f).collect());
    let pretty = |v: Value| format!("{v:#}\n");
    match format {
        CallFormat::Openai | CallFormat::Auto => {
            pretty(each(&|r| json!({"role": "tool", "tool_call_id": r.call.id, "content": r.content})))
        }
        CallFormat::OpenaiResponses => {
            pretty(each(&|r| json!({"type": "function_call_output", "call_id": r.call.id, "output": r.content})))
        }
        CallFormat::Anthropic => pretty(json!({"role": "user", "content": each(&|r| {
            json!({"type": "tool_result", "tool_use_id": r.call.id, "content": r.content, "is_error": !r.ok})
        })})),
        CallFormat::Ollama => {
            pretty(each(&|r| json!({"role": "tool", "tool_name": r.call.name, "content": r.content})))
        }
        CallFormat::Gemini => {
            let parts: Vec<Value> = results
                .iter()
                .map(|r| {
                    let response = match (&r.value, r.ok) {
                        (Value::Object(_), _) => r.value.clone(),
                        (_, true) => json!({"output": r.content}),
                        (_, false) => json!({"error": r.content}),
                    };
                    let mut f = json!({"name": r.call.name, "response": response});
                    if !r.call.id.is_empty() {
                        f["id"] = Value::String(r.call.id.clone());
                    }
                    json!({"functionResponse": f})
                })
                .collect();
            format!("{:#}\n", json!({"role": "user", "parts": parts}))
        }
        CallFormat::Gemma => results
            .iter()
            .map(|r| {
                let body = match (&r.value, r.ok) {
                    (Value::Object(_), _) => functiongemma::render_value(&r.value),
                    (_, true) => functiongemma::render_value(&json!({"result": r.content})),
                    (_, false) => functiongemma::render_value(&json!({"error": r.content})),
                };
                format!("<start_function_response>response:{}{body}<end_function_response>\n", r.call.name)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format() {
        let openai = r#"{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{\"a\":1}"}}]}}]}"#;
        let responses = r#"{"output":[{"type":"function_call","call_id":"c2","name":"t","arguments":"{}"}]}"#;
        let anthropic = r#"{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"tu1","name":"t","input":{"a":1}}]}"#;
        let ollama = r#"{"model":"llama3","message":{"role":"assistant","tool_calls":[{"function":{"name":"t","arguments":{"a":1}}}]}}"#;
        assert_eq!(detect(openai), CallFormat::Openai);
        assert_eq!(detect(responses), CallFormat::OpenaiResponses);
        assert_eq!(detect(anthropic), CallFormat::Anthropic);
        assert_eq!(detect(ollama), CallFormat::Ollama);
        let bare_ollama = r#"{"role":"assistant","tool_calls":[{"function":{"name":"t","arguments":{"a":1}}}]}"#;
        assert_eq!(detect(bare_ollama), CallFormat::Ollama);
        assert_eq!(detect("call:t{a:1}"), CallFormat::Gemma);
        let gemini = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"},{"functionCall":{"name":"t","args":{"a":1}}}]}}]}"#;
        assert_eq!(detect(gemini), CallFormat::Gemini);
        assert_eq!(find_calls(gemini, CallFormat::Auto).unwrap().1[0].args, Ok(json!({"a": 1})));
        for input in [openai, anthropic, ollama] {
            let (_, calls) = find_calls(input, CallFormat::Auto).unwrap();
            assert_eq!(calls[0].name, "t");
            assert_eq!(calls[0].args, Ok(json!({"a": 1})));
        }
    }

    #[test]
    fn bad_arguments_are_per_call_errors() {
        let input = r#"{"tool_calls":[{"id":"x","function":{"name":"t","arguments":"{oops"}},{"id":"y","function":{"name":"u","arguments":"{}"}}]}"#;
        let (_, calls) = find_calls(input, CallFormat::Auto).unwrap();
        assert!(calls[0].args.is_err());
        assert_eq!(calls[1].args, Ok(json!({})));
        let (_, calls) = find_calls("call:t{a:<escape>open}", CallFormat::Gemma).unwrap();
        assert_eq!(calls[0].name, "t");
        assert!(calls[0].args.is_err());
    }
}
