//! Tool calls in a model's response, and results in the shape that API expects.
//!
//! `packs call` reads a response from OpenAI Chat Completions, OpenAI Responses,
//! Anthropic Messages, Ollama, Gemini, or a model family's raw text, dispatches each call
//! through the normal pipeline ([`Responder`], the same loop for every front-end), and
//! prints the results so they can be appended to the conversation as they are.

use serde_json::{Map, Value, json};

use crate::formats::functiongemma;
use crate::formats::raw::{self, Family, Parsed};

mod conversation;
mod responder;

pub use conversation::{Conversation, DEFAULT_MAX_RETRIES, read_conversation, stop_retrying};
pub use responder::{Reply, Responder, Streaming};

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
        /// FunctionGemma text (the same as `gemma`).
        Functiongemma = "functiongemma",
        /// Gemma 4 text (`<|tool_call>call:NAME{...}<tool_call|>`).
        Gemma4 = "gemma4",
        /// Qwen3 (Hermes) text (`<tool_call>{"name", "arguments"}</tool_call>`).
        Qwen3 = "qwen3",
        /// Qwen3-Coder text (`<tool_call><function=NAME><parameter=K>V</parameter>...`).
        Qwen3Xml = "qwen3-xml",
        /// Llama 3.1-3.3 and 4 text (`{"name", "parameters"}`, `<|python_tag|>`).
        Llama3 = "llama3",
        /// Mistral text (`[TOOL_CALLS]`).
        Mistral = "mistral",
        /// GLM 4.5+ text (`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...`).
        Glm = "glm",
        /// Kimi K2 text (`<|tool_calls_section_begin|>...`).
        Kimi = "kimi",
        /// gpt-oss Harmony text (`<|channel|>commentary to=functions.NAME ...<|message|>{...}`).
        GptOss = "gpt-oss",
        /// DeepSeek V3, V3.1 and V3.2 text (`<｜tool▁calls▁begin｜>`, `<｜DSML｜function_calls>`).
        Deepseek = "deepseek",
    }
}

impl CallFormat {
    /// The raw-text family this format reads, for a text format.
    pub fn family(self) -> Option<Family> {
        Some(match self {
            Self::Gemma | Self::Functiongemma => Family::Functiongemma,
            Self::Gemma4 => Family::Gemma4,
            Self::Qwen3 => Family::Qwen3,
            Self::Qwen3Xml => Family::Qwen3Xml,
            Self::Llama3 => Family::Llama3,
            Self::Mistral => Family::Mistral,
            Self::Glm => Family::Glm,
            Self::Kimi => Family::Kimi,
            Self::GptOss => Family::GptOss,
            Self::Deepseek => Family::Deepseek,
            Self::Auto | Self::Openai | Self::OpenaiResponses | Self::Anthropic | Self::Ollama | Self::Gemini => {
                return None;
            }
        })
    }

    /// The format that reads `family` (FunctionGemma's is `gemma`).
    pub fn of_family(family: Family) -> Self {
        match family {
            Family::Functiongemma => Self::Gemma,
            Family::Gemma4 => Self::Gemma4,
            Family::Qwen3 => Self::Qwen3,
            Family::Qwen3Xml => Self::Qwen3Xml,
            Family::Llama3 => Self::Llama3,
            Family::Mistral => Self::Mistral,
            Family::Glm => Self::Glm,
            Family::Kimi => Self::Kimi,
            Family::GptOss => Self::GptOss,
            Family::Deepseek => Self::Deepseek,
        }
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

/// What [`find_calls`] read: the format, the calls in order, and the style to answer in.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The format read (never `Auto`).
    pub format: CallFormat,
    /// Every call, in order; a call that could not be read has `args: Err`.
    pub calls: Vec<FoundCall>,
    /// The input used snake_case field names (google-genai's serializers write
    /// `function_call`); the results are written the same way.
    pub snake_case: bool,
    /// For a text format: the whole parse (content, reasoning, calls).
    pub parsed: Option<Parsed>,
}

impl Reading {
    /// What the response says, as `packs call --parse-only` prints it: `{"content",
    /// "reasoning_content", "tool_calls": [{"name", "arguments"}]}` (a call that could not
    /// be read has `"error": {"message", "offset", "incomplete"}` instead of `"arguments"`,
    /// in every format, `offset` null for a JSON response; `"id"` when the response gave one).
    /// Content and reasoning come from text formats only.
    pub fn parse_json(&self) -> Value {
        if let Some(parsed) = &self.parsed {
            return serde_json::to_value(parsed).expect("a parse always serializes");
        }
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| {
                let mut v = json!({"name": c.name});
                if !c.id.is_empty() {
                    v["id"] = Value::String(c.id.clone());
                }
                match &c.args {
                    Ok(args) => v["arguments"] = args.clone(),
                    // The text formats' error shape; a JSON response has no byte offset.
                    Err(e) => v["error"] = json!({"message": e, "offset": null, "incomplete": false}),
                }
                v
            })
            .collect();
        json!({"content": null, "reasoning_content": null, "tool_calls": calls})
    }

    /// The results as the messages (or text) to append, in this reading's format and style.
    pub fn render(&self, results: &[CallResult]) -> String {
        render(results, self.format, self.snake_case)
    }
}

/// The shapes `--format auto` recognizes, for the error that names them.
const SHAPES: &str = "OpenAI Chat Completions (`choices`, or a message with `role`), OpenAI Responses \
    (`output` items), Anthropic Messages (`content` blocks), Gemini (`candidates` or `parts`), Ollama \
    (`message`)";

/// Detect the format of `input`: a JSON response by its shape, or model text by its
/// markers ([`raw::detect`]).
///
/// Text that is not a JSON object or array is model text: the family whose markers it
/// holds, else FunctionGemma text (with or without calls); text with the markers of two
/// families is an error ([`raw::detect`]). Text that starts like JSON is
/// a response of a known shape, else model text holding a family's markers (Mistral's
/// `[TOOL_CALLS]`, a Llama 3 call `{"name": …, "parameters": …}`); anything else is an error
/// (reading it as text would silently find no calls).
pub fn detect(input: &str) -> Result<CallFormat, ReadError> {
    let trimmed = input.trim_start();
    let family = || raw::detect(input).map_err(|e| ReadError(format!("{e} (`--format`)")));
    if !trimmed.starts_with(['{', '[']) {
        return Ok(family()?.map_or(CallFormat::Gemma, CallFormat::of_family));
    }
    // Model text may start like JSON too (Mistral's `[TOOL_CALLS]`, Llama's JSON calls):
    // read by its markers when it is not a response of a known shape.
    let shape = serde_json::from_str::<Value>(input).ok().as_ref().and_then(shape_of);
    if shape.is_none()
        && let Some(family) = family()?
    {
        return Ok(CallFormat::of_family(family));
    }
    let v: Value = serde_json::from_str(input)
        .map_err(|e| ReadError(format!("the input starts like JSON but does not parse: {e}")))?;
    shape_of(&v).ok_or_else(|| ReadError(format!("the input is JSON of no known response shape; packs reads {SHAPES}")))
}

/// The format whose shape `v` has.
fn shape_of(v: &Value) -> Option<CallFormat> {
    if let Some(items) = v.as_array() {
        // A bare list of Responses output items.
        let item = |i: &Value| i.get("type").is_some_and(Value::is_string);
        return items.iter().all(item).then_some(CallFormat::OpenaiResponses);
    }
    let has_array = |k: &str| v.get(k).is_some_and(Value::is_array);
    if has_array("output") || str_of(v, "object") == "response" {
        return Some(CallFormat::OpenaiResponses);
    }
    if has_array("candidates") || has_array("parts") {
        return Some(CallFormat::Gemini);
    }
    if has_array("content") || v.get("stop_reason").is_some() || str_of(v, "type") == "message" {
        return Some(CallFormat::Anthropic);
    }
    if v.get("choices").is_some() {
        return Some(CallFormat::Openai);
    }
    if v.get("message").is_some_and(Value::is_object) {
        return Some(CallFormat::Ollama);
    }
    if let Some(calls) = v.get("tool_calls").and_then(Value::as_array) {
        // Ollama's calls carry no id and give arguments as an object.
        let ollama = calls
            .iter()
            .all(|c| c.get("id").is_none() && c.pointer("/function/arguments").is_some_and(Value::is_object));
        return Some(if ollama && !calls.is_empty() { CallFormat::Ollama } else { CallFormat::Openai });
    }
    // A chat message with no calls: a final answer.
    if v.get("role").is_some_and(Value::is_string) {
        return Some(CallFormat::Openai);
    }
    None
}

/// Whether `v` has the shape of `format` (for a format named with `--format`).
fn has_shape(v: &Value, format: CallFormat) -> bool {
    let shape = shape_of(v);
    match format {
        // A bare chat message reads the same in both.
        CallFormat::Openai | CallFormat::Ollama => matches!(shape, Some(CallFormat::Openai | CallFormat::Ollama)),
        other => shape == Some(other),
    }
}

/// Find the calls in `input` read as `format` (`Auto` detects). FunctionGemma values get
/// the default typing and no `null` is stripped; [`find_calls_for`] reads them by the
/// tools' schemas.
pub fn find_calls(input: &str, format: CallFormat) -> Result<Reading, ReadError> {
    read(input, format, &|_| None)
}

/// [`find_calls`], with FunctionGemma values typed by the parameters schema of the tool
/// of that name in `catalog` (a bare `555` is text for a string parameter), and the nulls a
/// strict-mode model sends for optional arguments of a JSON response's calls stripped by it
/// ([`crate::formats::openai::strip_nulls`]).
pub fn find_calls_for(input: &str, format: CallFormat, catalog: &crate::Catalog) -> Result<Reading, ReadError> {
    read(input, format, &|name| catalog.get(name).ok().map(|t| t.describe().parameters.clone()))
}

/// [`find_calls`], with text values typed and strict-mode nulls stripped by `schema_of` (a
/// tool's parameters schema by name; `packs call --tools` reads them from OpenAI tool
/// definitions).
pub fn find_calls_with(
    input: &str,
    format: CallFormat,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<Reading, ReadError> {
    read(input, format, schema_of)
}

fn read(input: &str, format: CallFormat, schema_of: &dyn Fn(&str) -> Option<Value>) -> Result<Reading, ReadError> {
    let format = if format == CallFormat::Auto { detect(input)? } else { format };
    if let Some(family) = format.family() {
        let parsed = raw::parse(input, family, schema_of);
        let calls = parsed.tool_calls.iter().map(found_call).collect();
        let format = CallFormat::of_family(family);
        return Ok(Reading { format, calls, snake_case: false, parsed: Some(parsed) });
    }
    // A key given twice (in a call's `input`, say) is refused, not one of its values picked.
    let v: Value = raw::json_value(input).map_err(|e| {
        ReadError(if e.is_data() {
            format!("the input cannot be read: {e}")
        } else {
            format!("the input is not JSON: {e}")
        })
    })?;
    if !has_shape(&v, format) {
        return Err(ReadError(format!(
            "the input is not {} JSON{}",
            format.help(),
            shape_of(&v).map(|f| format!(" (it looks like `{}`)", f.as_str())).unwrap_or_default()
        )));
    }
    let mut snake_case = false;
    let mut calls = match format {
        CallFormat::Openai => openai_calls(&v),
        CallFormat::OpenaiResponses => responses_calls(&v),
        CallFormat::Anthropic => anthropic_calls(&v),
        CallFormat::Ollama => ollama_calls(&v),
        CallFormat::Gemini => {
            let (calls, snake) = gemini_calls(&v);
            snake_case = snake;
            calls
        }
        _ => Vec::new(),
    };
    strip_nulls(&mut calls, schema_of);
    Ok(Reading { format, calls, snake_case, parsed: None })
}

/// Strict-mode models send `null` for optional arguments they leave out: drop those, as each
/// call's tool schema says, so packs applies the defaults; a call of an unknown tool is left
/// as it is (dispatch refuses it).
fn strip_nulls(calls: &mut [FoundCall], schema_of: &dyn Fn(&str) -> Option<Value>) {
    for c in calls {
        if let Ok(args) = &mut c.args
            && let Some(schema) = schema_of(&c.name)
        {
            crate::formats::openai::strip_nulls(args, &schema);
        }
    }
}

/// A raw-text call as a found call; one whose arguments could not be read is an error
/// result of its own (named if it could be), saying why, for the model.
pub fn found_call(c: &raw::ToolCall) -> FoundCall {
    FoundCall {
        id: c.id.clone().unwrap_or_default(),
        name: c.name.clone(),
        args: c.arguments.clone().map(Value::Object).map_err(|e| e.for_model()),
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Arguments given as a JSON string (OpenAI) or an object (Ollama); both are accepted.
fn arguments(v: Option<&Value>) -> Result<Value, String> {
    match v {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) => raw::json_value(s)
            .map_err(|e| format!("the arguments are not valid JSON ({e}): {}", quoted(s)))
            .and_then(|a| {
                if a.is_object() { Ok(a) } else { Err(format!("the arguments are not a JSON object: {}", quoted(s))) }
            }),
        Some(o @ Value::Object(_)) => Ok(o.clone()),
        Some(other) => Err(format!("the arguments are not a JSON object: {}", quoted(&other.to_string()))),
    }
}

/// A model's text quoted in an error it is answered with: whole when short, else its first
/// 200 characters and its length (a 64 MiB string is not sent back to the model in full).
fn quoted(text: &str) -> std::borrow::Cow<'_, str> {
    const MOST: usize = 200;
    match text.char_indices().nth(MOST) {
        None => text.into(),
        Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()).into(),
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

/// `functionCall` parts (the REST API's camelCase) or `function_call` parts (what
/// google-genai's `model_dump` writes); true when the calls were snake_case.
fn gemini_calls(v: &Value) -> (Vec<FoundCall>, bool) {
    let parts = v.pointer("/candidates/0/content/parts").or_else(|| v.get("parts"));
    let mut snake = false;
    let calls = parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            p.get("functionCall").or_else(|| {
                let c = p.get("function_call").filter(|c| c.is_object());
                snake |= c.is_some();
                c
            })
        })
        .filter(|c| c.is_object())
        .map(|c| FoundCall {
            id: str_of(c, "id").to_owned(),
            name: str_of(c, "name").to_owned(),
            args: arguments(c.get("args")),
        })
        .collect();
    (calls, snake)
}

/// A FunctionGemma call that could not be read is an error result of its own, named if it
/// could be.
fn gemma_error(e: functiongemma::CallError) -> FoundCall {
    FoundCall {
        id: String::new(),
        name: e.name.clone(),
        args: Err(if e.incomplete {
            format!("{} (nothing ran; send the whole call again)", e.message)
        } else {
            format!("the call does not parse: {e}")
        }),
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

/// Render results as the messages (or text) to append for `format` (Gemini in the REST
/// API's camelCase; [`Reading::render`] answers in the style the input used).
pub fn render_results(results: &[CallResult], format: CallFormat) -> String {
    render(results, format, false)
}

fn render(results: &[CallResult], format: CallFormat, snake_case: bool) -> String {
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
                    let key = if snake_case { "function_response" } else { "functionResponse" };
                    json!({ key: f })
                })
                .collect();
            format!("{:#}\n", json!({"role": "user", "parts": parts}))
        }
        CallFormat::Gemma4
        | CallFormat::Qwen3
        | CallFormat::Qwen3Xml
        | CallFormat::Llama3
        | CallFormat::Mistral
        | CallFormat::Glm
        | CallFormat::Kimi
        | CallFormat::GptOss
        | CallFormat::Deepseek => pretty(each(&tool_message)),
        CallFormat::Gemma | CallFormat::Functiongemma => results.iter().map(function_response).collect(),
    }
}

/// One result of a raw-text family on a line of its own, as `packs call --stream` prints
/// it: the `{"role": "tool", …}` message as compact JSON, or FunctionGemma's response.
pub fn render_line(result: &CallResult, family: raw::Family) -> String {
    match family {
        raw::Family::Functiongemma => function_response(result),
        _ => format!("{}\n", tool_message(result)),
    }
}

/// A raw-text family's result message: `{"role": "tool", "name", "content"}`, with
/// `tool_call_id` when the model wrote an id.
fn tool_message(r: &CallResult) -> Value {
    let mut m = json!({"role": "tool", "name": r.call.name, "content": r.content});
    if !r.call.id.is_empty() {
        m["tool_call_id"] = Value::String(r.call.id.clone());
    }
    m
}

/// FunctionGemma's `<start_function_response>response:NAME{…}<end_function_response>` line.
fn function_response(r: &CallResult) -> String {
    let body = match (&r.value, r.ok) {
        (Value::Object(_), _) => functiongemma::render_value(&r.value),
        (_, true) => functiongemma::render_value(&json!({"result": r.content})),
        (_, false) => functiongemma::render_value(&json!({"error": r.content})),
    };
    let name = if r.call.name.is_empty() { "unknown" } else { r.call.name.as_str() };
    format!("<start_function_response>response:{name}{body}<end_function_response>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(input: &str) -> Vec<FoundCall> {
        find_calls(input, CallFormat::Auto).unwrap().calls
    }

    /// A quoted Harmony call beside a Qwen3 call: read as either family one call is lost or a
    /// quoted one runs, so `auto` reads no call at all and says why; a JSON response that
    /// quotes markers in its text is read by its shape.
    #[test]
    fn text_with_two_families_markers_is_refused_and_a_json_response_is_read_by_its_shape() {
        let text = "Quoting: <|channel|>commentary to=functions.delete_all<|message|>{}<|call|>\n\
                    <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
        let Err(ReadError(said)) = find_calls(text, CallFormat::Auto) else { panic!("read") };
        assert!(said.contains("`<|channel|>` (gpt-oss) at byte 9 and `<tool_call>` (qwen3) at byte 76"), "{said}");
        assert!(said.ends_with("(`--format`)"), "{said}");
        let named = find_calls(text, CallFormat::Qwen3).unwrap();
        assert_eq!(named.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["get_weather"]);
        let quoted = json!({"role": "assistant", "content": [{"type": "text", "text": text},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]});
        let reading = find_calls(&quoted.to_string(), CallFormat::Auto).unwrap();
        assert_eq!((reading.format, reading.calls.len()), (CallFormat::Anthropic, 1));
    }

    /// A key given twice in a call's arguments is an error, not one of its values picked: in
    /// OpenAI's `arguments` string that call's, elsewhere (Anthropic's `input`, a conversation)
    /// the whole input's, naming the key and where.
    #[test]
    fn a_key_given_twice_is_refused_not_picked() {
        let openai = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"path\": \"a\", \"path\": \"/\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "u", "arguments": "{\"path\": \"a\"}"}}]}}]});
        let found = calls(&openai.to_string());
        let Err(said) = &found[0].args else { panic!("{:?}", found[0]) };
        assert!(said.contains("the key `path` is given twice at line 1 column"), "{said}");
        assert_eq!(found[1].args, Ok(json!({"path": "a"})));
        let anthropic = r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"t","input":{"path":"a","path":"/"}}]}"#;
        let Err(ReadError(said)) = find_calls(anthropic, CallFormat::Anthropic) else { panic!("read") };
        assert_eq!(said, "the input cannot be read: the key `path` is given twice at line 1 column 97");
        let conversation =
            r#"[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"t","input":{"a":1,"a":2}}]}]"#;
        let Err(ReadError(said)) = read_conversation(conversation, CallFormat::Auto, None) else { panic!("read") };
        assert!(said.contains("the key `a` is given twice"), "{said}");
    }

    /// Arguments that do not read are quoted in the call's error whole when short, and by
    /// their start and length when long.
    #[test]
    fn unreadable_arguments_are_quoted_by_their_start_when_long() {
        let call = |arguments: &str| {
            let v = json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "t", "arguments": arguments}}]});
            calls(&v.to_string()).remove(0).args.unwrap_err()
        };
        assert_eq!(call("[1]"), "the arguments are not a JSON object: [1]");
        let long = format!("[\"é{}\"]", "x".repeat(1 << 20));
        let said = call(&long);
        assert!(said.len() < 600, "{} bytes", said.len());
        assert!(said.ends_with(&format!("[\"é{}… ({} bytes in all)", "x".repeat(197), long.len())), "{said}");
        let said = call(&format!("{{{}", "x".repeat(1 << 20)));
        assert!(said.starts_with("the arguments are not valid JSON (") && said.len() < 600, "{said:.300}");
    }

    #[test]
    fn detects_each_format() {
        let openai = r#"{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{\"a\":1}"}}]}}]}"#;
        let responses = r#"{"output":[{"type":"function_call","call_id":"c2","name":"t","arguments":"{}"}]}"#;
        let anthropic = r#"{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"tu1","name":"t","input":{"a":1}}]}"#;
        let ollama = r#"{"model":"llama3","message":{"role":"assistant","tool_calls":[{"function":{"name":"t","arguments":{"a":1}}}]}}"#;
        assert_eq!(detect(openai), Ok(CallFormat::Openai));
        assert_eq!(detect(responses), Ok(CallFormat::OpenaiResponses));
        assert_eq!(detect(anthropic), Ok(CallFormat::Anthropic));
        assert_eq!(detect(ollama), Ok(CallFormat::Ollama));
        let bare_ollama = r#"{"role":"assistant","tool_calls":[{"function":{"name":"t","arguments":{"a":1}}}]}"#;
        assert_eq!(detect(bare_ollama), Ok(CallFormat::Ollama));
        assert_eq!(detect("call:t{a:1}"), Ok(CallFormat::Gemma));
        let gemini = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"},{"functionCall":{"name":"t","args":{"a":1}}}]}}]}"#;
        assert_eq!(detect(gemini), Ok(CallFormat::Gemini));
        assert_eq!(calls(gemini)[0].args, Ok(json!({"a": 1})));
        for input in [openai, anthropic, ollama] {
            let found = calls(input);
            assert_eq!(found[0].name, "t");
            assert_eq!(found[0].args, Ok(json!({"a": 1})));
        }
    }

    #[test]
    fn final_answers_have_no_calls_and_unknown_shapes_are_errors() {
        for answer in [
            r#"{"choices":[{"message":{"role":"assistant","content":"Done."}}]}"#,
            r#"{"output":[{"type":"message","role":"assistant","content":[]}]}"#,
            r#"{"role":"assistant","content":"Done."}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Done."}]}}]}"#,
            "It is 12 degrees.",
            "42",
            "place a call: 555",
            "",
        ] {
            assert_eq!(calls(answer), vec![], "{answer}");
        }
        assert!(detect(r#"{"answer": 42}"#).unwrap_err().0.contains("no known response shape"));
        assert!(detect(r#"{"choices": ["#).unwrap_err().0.contains("does not parse"));
        let e = find_calls(r#"{"choices":[]}"#, CallFormat::Anthropic).unwrap_err();
        assert!(e.0.contains("it looks like `openai`"), "{e}");
    }

    #[test]
    fn gemini_reads_and_answers_in_the_style_of_its_input() {
        let snake = r#"{"candidates":[{"content":{"role":"model","parts":[{"function_call":{"id":"g1","name":"t","args":{"a":1}}}]}}]}"#;
        let reading = find_calls(snake, CallFormat::Auto).unwrap();
        assert!(reading.snake_case);
        assert_eq!(reading.calls[0].args, Ok(json!({"a": 1})));
        let result =
            CallResult { call: reading.calls[0].clone(), ok: true, content: "x".into(), value: json!({"v": 1}) };
        let out: Value = serde_json::from_str(&reading.render(std::slice::from_ref(&result))).unwrap();
        assert_eq!(out["parts"][0]["function_response"]["id"], "g1");
        let camel = find_calls(&snake.replace("function_call", "functionCall"), CallFormat::Gemini).unwrap();
        assert!(!camel.snake_case);
        let out: Value = serde_json::from_str(&camel.render(&[result])).unwrap();
        assert_eq!(out["parts"][0]["functionResponse"]["response"], json!({"v": 1}));
    }

    #[test]
    fn bad_arguments_are_per_call_errors() {
        let input = r#"{"tool_calls":[{"id":"x","function":{"name":"t","arguments":"{oops"}},{"id":"y","function":{"name":"u","arguments":"{}"}}]}"#;
        let found = calls(input);
        assert!(found[0].args.is_err());
        assert_eq!(found[1].args, Ok(json!({})));
        let found = find_calls("call:t{a:<escape>open}", CallFormat::Gemma).unwrap().calls;
        assert_eq!(found[0].name, "t");
        assert!(found[0].args.is_err());
    }

    #[test]
    fn functiongemma_error_results_are_well_formed_functiongemma() {
        let call = FoundCall { id: String::new(), name: "t".into(), args: Err("bad <escape>x".into()) };
        let value = json!({"error": {"message": "the call does not parse: call:t{a:<escape>x}"}});
        let r = CallResult { call, ok: false, content: value.to_string(), value };
        let text = render_results(&[r], CallFormat::Gemma);
        let body = text.strip_prefix("<start_function_response>response:t").unwrap();
        let body = body.strip_suffix("<end_function_response>\n").unwrap();
        assert_eq!(body.matches(functiongemma::ESCAPE).count(), 2, "{text}");
        assert!(functiongemma::parse_calls(&format!("call:t{body}")).is_ok(), "{text}");
    }
}
