//! A whole conversation in: the calls still waiting for results, and how many times in a
//! row each tool's calls failed validation (the validation-retry loop of ADR-0004).
//!
//! A front-end keeps the message list it sends to the model; `packs call --conversation`
//! reads it, answers the calls no result follows yet, and after `max_retries` consecutive
//! validation failures of a tool tells the model to stop retrying it and report.

use std::collections::HashMap;

use serde_json::Value;

use super::{CallFormat, CallResult, FoundCall, ReadError, Reading, arguments, str_of};
use crate::formats::functiongemma;

/// How many times a model may retry a call that failed validation before it is told to
/// stop (ADR-0004: two retries, three attempts in all).
pub const DEFAULT_MAX_RETRIES: usize = 2;

/// What a conversation holds for packs: the calls to answer, in the format to answer in,
/// and each tool's run of validation failures so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The calls no result follows yet (in order), their format and reply style.
    pub pending: Reading,
    /// Per tool name: its results' consecutive validation failures, counted back from
    /// the latest result of that tool.
    failures: HashMap<String, usize>,
}

/// One call or one result, in conversation order.
enum Event {
    Call(FoundCall),
    Result { id: String, name: String, validation_failure: bool },
}

impl Conversation {
    /// How many times in a row calls of `tool` failed validation before now.
    pub fn failures(&self, tool: &str) -> usize {
        self.failures.get(tool).copied().unwrap_or(0)
    }

    /// Apply the retry limit to `result`, the answer to a call of `result.call.name`, and
    /// count it: when it is a validation failure and the tool already failed validation
    /// `max_retries` times in a row, it becomes non-retryable and tells the model to stop
    /// and report (see [`stop_retrying`]).
    pub fn limit(&mut self, result: &mut CallResult, max_retries: usize) {
        let count = self.failures.entry(result.call.name.clone()).or_default();
        if is_validation_failure(&result.value) {
            if *count >= max_retries {
                stop_retrying(result, *count + 1);
            }
            *count += 1;
        } else {
            *count = 0;
        }
    }
}

/// Make a validation failure final: `retryable: false`, and a message telling the model
/// that this was attempt `attempts` and it must stop retrying and tell the user.
pub fn stop_retrying(result: &mut CallResult, attempts: usize) {
    if let Some(error) = result.value.get_mut("error").and_then(Value::as_object_mut) {
        error.insert("retryable".into(), false.into());
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        error.insert(
            "message".into(),
            format!(
                "{message}. Calls of `{}` failed validation {attempts} times in a row: do not call it again \
                 this turn; tell the user what went wrong",
                result.call.name
            )
            .into(),
        );
        result.content = result.value.to_string();
    }
}

/// Whether a result's value is packs' validation error (`{"error": {"kind": "validation"}}`).
fn is_validation_failure(value: &Value) -> bool {
    value.pointer("/error/kind").and_then(Value::as_str) == Some("validation")
}

/// Whether a result's text (as the conversation holds it) is a validation error.
fn text_is_validation_failure(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| is_validation_failure(&v))
}

/// Read a conversation: a JSON message list (OpenAI Chat Completions or Ollama `messages`,
/// Anthropic `messages`, Gemini `contents`, OpenAI Responses `input` items; bare, or as the
/// request body holding it), or a FunctionGemma transcript. `format` names the format,
/// or `Auto` detects it from the calls the conversation holds. With a `catalog`,
/// FunctionGemma values are typed by the tools' schemas, and the nulls a strict-mode model
/// sends for optional arguments are stripped by them from JSON calls (see
/// [`super::find_calls_for`]).
pub fn read_conversation(
    input: &str,
    format: CallFormat,
    catalog: Option<&crate::Catalog>,
) -> Result<Conversation, ReadError> {
    let schema_of = |name: &str| catalog?.get(name).ok().map(|t| t.describe().parameters.clone());
    let schema_of: &dyn Fn(&str) -> Option<Value> = &schema_of;
    if format.family().is_some_and(|_| !matches!(format, CallFormat::Gemma | CallFormat::Functiongemma)) {
        return Err(ReadError(format!(
            "--conversation reads JSON message lists and FunctionGemma transcripts, not `{format}` text: \
             give the model's last response alone"
        )));
    }
    let format = if format == CallFormat::Functiongemma { CallFormat::Gemma } else { format };
    let trimmed = input.trim_start();
    let (mut detected, snake_case, events) = if format == CallFormat::Gemma || !trimmed.starts_with(['{', '[']) {
        (CallFormat::Gemma, false, gemma_events(input, schema_of))
    } else {
        let v: Value = crate::formats::raw::json_value(input)
            .map_err(|e| ReadError(format!("the conversation starts like JSON but does not parse: {e}")))?;
        let items =
            ["messages", "contents", "input"].iter().find_map(|k| v.get(*k)).unwrap_or(&v).as_array().ok_or_else(
                || {
                    ReadError(
                        "the conversation is not a message list (a JSON array, or an object with `messages`, \
                     `contents` or `input`)"
                            .into(),
                    )
                },
            )?;
        json_events(items)
    };
    if format != CallFormat::Auto {
        detected = format;
    }
    let mut failures: HashMap<String, usize> = HashMap::new();
    let mut pending: Vec<FoundCall> = Vec::new();
    for event in events {
        match event {
            Event::Call(c) => pending.push(c),
            Event::Result { id, name, validation_failure } => {
                // The call it answers: by id, else the earliest waiting call of that name.
                let at = pending
                    .iter()
                    .position(|c| !id.is_empty() && c.id == id)
                    .or_else(|| pending.iter().position(|c| (id.is_empty() || c.id.is_empty()) && c.name == name));
                let tool = match at {
                    Some(i) => pending.remove(i).name,
                    None => name,
                };
                let count = failures.entry(tool).or_default();
                *count = if validation_failure { *count + 1 } else { 0 };
            }
        }
    }
    let mut calls = pending;
    if detected != CallFormat::Gemma {
        super::strip_nulls(&mut calls, schema_of);
    }
    Ok(Conversation { pending: Reading { format: detected, calls, snake_case, parsed: None }, failures })
}

/// Calls and results of a JSON message list, in order, and the format they were written in.
fn json_events(items: &[Value]) -> (CallFormat, bool, Vec<Event>) {
    let mut format = None;
    let mut snake = false;
    let mut events = Vec::new();
    let mut seen = |f: CallFormat| {
        format.get_or_insert(f);
    };
    for item in items {
        // OpenAI Chat Completions and Ollama: an assistant message's `tool_calls`.
        for c in item.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let f = c.get("function").unwrap_or(&Value::Null);
            let ollama = c.get("id").is_none() && f.get("arguments").is_some_and(Value::is_object);
            seen(if ollama { CallFormat::Ollama } else { CallFormat::Openai });
            events.push(Event::Call(FoundCall {
                id: str_of(c, "id").to_owned(),
                name: str_of(f, "name").to_owned(),
                args: arguments(f.get("arguments")),
            }));
        }
        // Their tool results: `{"role": "tool", "tool_call_id" | "tool_name", "content"}`.
        if str_of(item, "role") == "tool" {
            let name =
                if str_of(item, "tool_name").is_empty() { str_of(item, "name") } else { str_of(item, "tool_name") };
            events.push(Event::Result {
                id: str_of(item, "tool_call_id").to_owned(),
                name: name.to_owned(),
                validation_failure: text_is_validation_failure(&content_text(item.get("content"))),
            });
        }
        // Anthropic: `tool_use` and `tool_result` content blocks.
        for b in item.get("content").and_then(Value::as_array).into_iter().flatten() {
            match str_of(b, "type") {
                "tool_use" => {
                    seen(CallFormat::Anthropic);
                    events.push(Event::Call(FoundCall {
                        id: str_of(b, "id").to_owned(),
                        name: str_of(b, "name").to_owned(),
                        args: arguments(b.get("input")),
                    }));
                }
                "tool_result" => events.push(Event::Result {
                    id: str_of(b, "tool_use_id").to_owned(),
                    name: String::new(),
                    validation_failure: text_is_validation_failure(&content_text(b.get("content"))),
                }),
                _ => {}
            }
        }
        // Gemini: `functionCall` / `functionResponse` parts (or google-genai's snake_case).
        for p in item.get("parts").and_then(Value::as_array).into_iter().flatten() {
            if let Some(c) = p.get("functionCall").or_else(|| p.get("function_call")).filter(|c| c.is_object()) {
                seen(CallFormat::Gemini);
                snake |= p.get("function_call").is_some();
                events.push(Event::Call(FoundCall {
                    id: str_of(c, "id").to_owned(),
                    name: str_of(c, "name").to_owned(),
                    args: arguments(c.get("args")),
                }));
            }
            if let Some(r) = p.get("functionResponse").or_else(|| p.get("function_response")) {
                events.push(Event::Result {
                    id: str_of(r, "id").to_owned(),
                    name: str_of(r, "name").to_owned(),
                    validation_failure: r.get("response").is_some_and(is_validation_failure),
                });
            }
        }
        // OpenAI Responses: `function_call` and `function_call_output` items.
        match str_of(item, "type") {
            "function_call" => {
                seen(CallFormat::OpenaiResponses);
                events.push(Event::Call(FoundCall {
                    id: str_of(item, "call_id").to_owned(),
                    name: str_of(item, "name").to_owned(),
                    args: arguments(item.get("arguments")),
                }));
            }
            "function_call_output" => events.push(Event::Result {
                id: str_of(item, "call_id").to_owned(),
                name: String::new(),
                validation_failure: text_is_validation_failure(&content_text(item.get("output"))),
            }),
            _ => {}
        }
    }
    (format.unwrap_or(CallFormat::Openai), snake, events)
}

/// A result's content as text: a string, or the text blocks of a content list.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// Calls and responses of a FunctionGemma transcript, in text order.
fn gemma_events(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> Vec<Event> {
    let calls = functiongemma::scan_calls(text, schema_of).into_iter().map(|c| match c {
        Ok(c) => {
            (c.span.start, Event::Call(FoundCall { id: String::new(), name: c.name, args: Ok(Value::Object(c.args)) }))
        }
        Err(e) => (e.offset, Event::Call(super::gemma_error(e))),
    });
    let responses = functiongemma::scan_responses(text).into_iter().map(|r| {
        let value = Value::Object(r.value);
        (r.offset, Event::Result { id: String::new(), name: r.name, validation_failure: is_validation_failure(&value) })
    });
    let mut events: Vec<(usize, Event)> = calls.chain(responses).collect();
    events.sort_by_key(|(at, _)| *at);
    events.into_iter().map(|(_, e)| e).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const FAILED: &str = r#"{"error":{"kind":"validation","message":"bad","retryable":true}}"#;

    fn read(v: &Value) -> Conversation {
        read_conversation(&v.to_string(), CallFormat::Auto, None).unwrap()
    }

    fn call(id: &str, name: &str) -> Value {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]})
    }

    fn result(id: &str, content: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": content})
    }

    #[test]
    fn openai_pending_calls_and_consecutive_failures_per_tool() {
        let c = read(&json!({"messages": [
            {"role": "user", "content": "hi"},
            call("a", "t"), result("a", FAILED),
            call("b", "u"), result("b", "ok"),
            call("c", "t"), result("c", FAILED),
            call("d", "t"),
        ]}));
        assert_eq!(c.pending.format, CallFormat::Openai);
        assert_eq!(c.pending.calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["d"]);
        assert_eq!((c.failures("t"), c.failures("u"), c.failures("v")), (2, 0, 0));
        // A success resets the run.
        let c =
            read(&json!([call("a", "t"), result("a", FAILED), call("b", "t"), result("b", "fine"), call("c", "t")]));
        assert_eq!(c.failures("t"), 0);
    }

    #[test]
    fn the_third_failure_in_a_row_is_final() {
        let mut c =
            read(&json!([call("a", "t"), result("a", FAILED), call("b", "t"), result("b", FAILED), call("c", "t")]));
        let value: Value = serde_json::from_str(FAILED).unwrap();
        let mut r = CallResult { call: c.pending.calls[0].clone(), ok: false, content: FAILED.into(), value };
        let mut lenient = c.clone();
        let mut same = r.clone();
        lenient.limit(&mut same, 3);
        assert_eq!(same.value["error"]["retryable"], true);
        c.limit(&mut r, DEFAULT_MAX_RETRIES);
        assert_eq!(r.value["error"]["retryable"], false);
        assert!(r.content.contains("failed validation 3 times in a row: do not call it again"), "{}", r.content);
        assert_eq!(c.failures("t"), 3);
    }

    #[test]
    fn every_api_shape_is_read() {
        let anthropic = json!({"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": FAILED}], "is_error": true}]},
            {"role": "assistant", "content": [{"type": "text", "text": "again"}, {"type": "tool_use", "id": "y", "name": "t", "input": {"a": 1}}]},
        ]});
        let c = read(&anthropic);
        assert_eq!(
            (c.pending.format, c.pending.calls[0].id.as_str(), c.failures("t")),
            (CallFormat::Anthropic, "y", 1)
        );
        let failed: Value = serde_json::from_str(FAILED).unwrap();
        let gemini = json!({"contents": [
            {"role": "model", "parts": [{"function_call": {"name": "t", "args": {}}}]},
            {"role": "user", "parts": [{"function_response": {"name": "t", "response": failed}}]},
            {"role": "model", "parts": [{"function_call": {"name": "t", "args": {"a": 1}}}]},
        ]});
        let c = read(&gemini);
        assert_eq!((c.pending.format, c.pending.snake_case, c.failures("t")), (CallFormat::Gemini, true, 1));
        assert_eq!(c.pending.calls[0].args, Ok(json!({"a": 1})));
        let responses = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "r1", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "r1", "output": FAILED},
            {"type": "function_call", "call_id": "r2", "name": "t", "arguments": "{}"},
        ]});
        let c = read(&responses);
        assert_eq!(
            (c.pending.format, c.pending.calls[0].id.as_str(), c.failures("t")),
            (CallFormat::OpenaiResponses, "r2", 1)
        );
        let ollama = json!([
            {"role": "assistant", "tool_calls": [{"function": {"name": "t", "arguments": {}}}]},
            {"role": "tool", "tool_name": "t", "content": FAILED},
            {"role": "assistant", "tool_calls": [{"function": {"name": "t", "arguments": {"a": 1}}}]},
        ]);
        let c = read(&ollama);
        assert_eq!((c.pending.format, c.pending.calls.len(), c.failures("t")), (CallFormat::Ollama, 1, 1));
        let gemma = "<start_of_turn>model\n<start_function_call>call:t{a:1}<end_function_call>\
                     <start_function_response>response:t{error:{kind:<escape>validation<escape>,retryable:true}}<end_function_response>\
                     <start_function_call>call:t{a:2}<end_function_call>";
        let c = read_conversation(gemma, CallFormat::Auto, None).unwrap();
        assert_eq!((c.pending.format, c.failures("t")), (CallFormat::Gemma, 1));
        assert_eq!(c.pending.calls[0].args, Ok(json!({"a": 2})));
        assert!(read_conversation(r#"{"model": "x"}"#, CallFormat::Auto, None).is_err());
    }
}
