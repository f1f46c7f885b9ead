//! Tool calls in an open-weight model's raw text: the parse every family's parser gives
//! (`{content, reasoning_content, tool_calls}`), the families, detection by markers, and
//! the streaming reader. The format of each family is in its own module.
//!
//! What every parser holds to (docs/FORMATS.md, "Raw model output"):
//! - the text outside reasoning and calls is the content, verbatim and in order (only the
//!   whitespace at its very start and end, which the chat templates write between parts, is
//!   trimmed); the reasoning likewise;
//! - calls in the order they were written; values keep their JSON types;
//! - a call begun and not finished, or malformed, is an error in its place (never silence
//!   when a call marker is present); text without markers is content only.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

crate::names::named_enum! {
    /// The raw-text families `packs call --format` reads.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Family {
        /// Qwen3 and Hermes-style models: `<tool_call>{"name", "arguments"}</tool_call>`, `<think>`.
        Qwen3 = "qwen3",
        /// Qwen3-Coder and later: `<tool_call><function=NAME><parameter=K>V</parameter>…`.
        Qwen3Xml = "qwen3-xml",
        /// Gemma 4: `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`, `<|channel>thought…<channel|>`.
        Gemma4 = "gemma4",
        /// FunctionGemma: `<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`.
        Functiongemma = "functiongemma",
        /// Llama 3.1–3.3 and 4: a JSON `{"name", "parameters"}` call, `<|python_tag|>`.
        Llama3 = "llama3",
        /// Mistral: `[TOOL_CALLS]` with a JSON list or `NAME[ARGS]{…}`, `[CALL_ID]`, `[THINK]`.
        Mistral = "mistral",
        /// GLM 4.5 and later: `<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`, `<think>`.
        Glm = "glm",
        /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}…`.
        Kimi = "kimi",
        /// gpt-oss (Harmony): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`.
        GptOss = "gpt-oss",
        /// DeepSeek V3, V3.1 (`<｜tool▁calls▁begin｜>…`) and V3.2 (`<｜DSML｜function_calls>…`).
        Deepseek = "deepseek",
    }
}

/// What a model's raw text says: its content, its reasoning and its calls.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// The text outside reasoning and calls (None when there is none).
    pub content: Option<String>,
    /// The reasoning (thinking) text (None when there is none).
    pub reasoning_content: Option<String>,
    /// The calls, in the order written.
    pub tool_calls: Vec<ToolCall>,
}

/// One call in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The function's name (empty when it could not be read).
    pub name: String,
    /// The id the model wrote for the call (Mistral's `[CALL_ID]`), if any.
    pub id: Option<String>,
    /// The arguments, or why they could not be read.
    pub arguments: Result<Map<String, Value>, CallError>,
}

/// A call that could not be read: malformed, or cut off before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {offset})")]
pub struct CallError {
    /// What is wrong.
    pub message: String,
    /// Where, in bytes from the start of the text.
    pub offset: usize,
    /// The call was cut off (the text ends inside it): nothing of it may run.
    pub incomplete: bool,
}

impl CallError {
    /// For the model: what went wrong and what to do (FunctionGemma's wording, kept).
    pub fn for_model(&self) -> String {
        if self.incomplete {
            format!("{} (nothing ran; send the whole call again)", self.message)
        } else {
            format!("the call does not parse: {self}")
        }
    }
}

/// `{"name", "arguments"}`, with `"id"` when the model wrote one; a call that could not be
/// read is `{"name", "error": {"message", "offset", "incomplete"}}`.
impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        match &self.arguments {
            Ok(args) => map.serialize_entry("arguments", args)?,
            Err(e) => map.serialize_entry(
                "error",
                &serde_json::json!({"message": e.message, "offset": e.offset, "incomplete": e.incomplete}),
            )?,
        }
        map.end()
    }
}

/// `{"content", "reasoning_content", "tool_calls"}`, as `packs call --parse-only` prints it.
impl Serialize for Parsed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("content", &self.content)?;
        map.serialize_entry("reasoning_content", &self.reasoning_content)?;
        map.serialize_entry("tool_calls", &self.tool_calls)?;
        map.end()
    }
}

/// A tool's parameters schema by name (None: not known; values keep the format's types).
pub type SchemaOf<'a> = &'a dyn Fn(&str) -> Option<Value>;

/// Parse `text` as `family` writes it; `schema_of` types the values of the formats that
/// write them as text (`qwen3-xml`, `glm`, and bare words of `gemma4` and `functiongemma`).
pub fn parse(text: &str, family: Family, schema_of: SchemaOf<'_>) -> Parsed {
    match family {
        Family::Qwen3 => super::qwen3::parse(text),
        Family::Qwen3Xml => super::qwen3_xml::parse(text, schema_of),
        Family::Gemma4 => super::gemma4::parse(text, schema_of),
        Family::Functiongemma => super::functiongemma::parse(text, schema_of),
        Family::Llama3 => super::llama3::parse(text),
        Family::Mistral => super::mistral::parse(text),
        Family::Glm => super::glm::parse(text, schema_of),
        Family::Kimi => super::kimi::parse(text),
        Family::GptOss => super::gpt_oss::parse(text),
        Family::Deepseek => super::deepseek::parse(text),
    }
}

/// The family whose markers `text` holds, or None when it holds none. A marker counts
/// wherever it is; the first of these checks to match wins: Harmony's `<|channel|>`,
/// `<|message|>` or `to=functions.` (gpt-oss); Kimi's `<|tool_calls_section_begin|>`;
/// DeepSeek's `<｜tool▁calls▁begin｜>` or `<｜DSML｜function_calls>`; Gemma 4's `<|tool_call>`
/// or `<|channel>`; `<tool_call>` followed by `<function=` (qwen3-xml), by `{` or nothing
/// (qwen3), or by a name (glm); Mistral's `[TOOL_CALLS]` or `[THINK]`; Llama's
/// `<|python_tag|>`; FunctionGemma's `<start_function_call>`; `<think>` or `</think>`
/// (qwen3); text that starts with `{"name"` or `{"type": "function"` (llama3).
pub fn detect(text: &str) -> Option<Family> {
    use super::{deepseek, gpt_oss, kimi};
    if [gpt_oss::CHANNEL, gpt_oss::MESSAGE, gpt_oss::TO_FUNCTIONS].iter().any(|m| text.contains(m)) {
        return Some(Family::GptOss);
    }
    if text.contains(kimi::SECTION_BEGIN) {
        return Some(Family::Kimi);
    }
    if text.contains(deepseek::CALLS_BEGIN) || text.contains(deepseek::FUNCTION_CALLS) {
        return Some(Family::Deepseek);
    }
    if text.contains(super::gemma4::CALL_START) || text.contains(super::gemma4::CHANNEL_START) {
        return Some(Family::Gemma4);
    }
    if let Some(i) = text.find(super::qwen3::CALL_START) {
        let after = text[i + super::qwen3::CALL_START.len()..].trim_start();
        return Some(if after.starts_with(super::qwen3_xml::FUNCTION) {
            Family::Qwen3Xml
        } else if after.is_empty() || after.starts_with(['{', '<']) {
            Family::Qwen3
        } else {
            Family::Glm
        });
    }
    if text.contains(super::mistral::TOOL_CALLS) || text.contains(super::mistral::THINK_START) {
        return Some(Family::Mistral);
    }
    if text.contains(super::llama3::PYTHON_TAG) {
        return Some(Family::Llama3);
    }
    if text.contains(super::functiongemma::START_CALL) {
        return Some(Family::Functiongemma);
    }
    if text.contains(super::qwen3::THINK_END) || text.contains(super::qwen3::THINK_START) {
        return Some(Family::Qwen3);
    }
    super::llama3::starts_like_a_call(text).then_some(Family::Llama3)
}

/// A parser fed chunks split anywhere (inside markers, inside UTF-8 characters): its
/// [`Stream::finish`] gives exactly what [`parse`] gives for the whole text.
#[derive(Debug, Clone)]
pub struct Stream {
    family: Family,
    bytes: Vec<u8>,
}

impl Stream {
    /// A stream of `family`'s text.
    pub fn new(family: Family) -> Self {
        Self { family, bytes: Vec::new() }
    }

    /// The next chunk, as it came (a character may be split between chunks).
    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
    }

    /// The parse of everything pushed; an error when the bytes are not UTF-8.
    pub fn finish(self, schema_of: SchemaOf<'_>) -> Result<Parsed, std::string::FromUtf8Error> {
        let text = String::from_utf8(self.bytes)?;
        Ok(parse(&text, self.family, schema_of))
    }
}

/// Collects a parse: content pieces in order, reasoning, calls.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
}

impl Builder {
    /// Text outside calls and reasoning, verbatim.
    pub(crate) fn text(&mut self, s: &str) {
        self.content.push_str(s);
    }

    /// Reasoning text (a second block follows the first after a blank line).
    pub(crate) fn reasoning(&mut self, s: &str) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if !self.reasoning.is_empty() {
            self.reasoning.push_str("\n\n");
        }
        self.reasoning.push_str(s);
    }

    pub(crate) fn call(
        &mut self,
        name: impl Into<String>,
        id: Option<String>,
        arguments: Result<Map<String, Value>, CallError>,
    ) {
        self.calls.push(ToolCall { name: name.into(), id, arguments });
    }

    pub(crate) fn finish(self) -> Parsed {
        let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        Parsed { content: some(&self.content), reasoning_content: some(&self.reasoning), tool_calls: self.calls }
    }
}

/// An error at `offset`; `incomplete` when the text ended first.
pub(crate) fn error(message: impl Into<String>, offset: usize, incomplete: bool) -> CallError {
    let message = message.into();
    CallError { message: if incomplete { format!("incomplete call: {message}") } else { message }, offset, incomplete }
}

/// The JSON value that starts at byte `pos` of `text` (after whitespace), and the offset
/// just past it. Marker text inside a JSON string is part of the string. An error says
/// whether the text ended inside the value.
pub(crate) fn json_at(text: &str, pos: usize) -> Result<(Value, usize), CallError> {
    let start = pos + (text[pos..].len() - text[pos..].trim_start().len());
    let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    match values.next() {
        Some(Ok(v)) => Ok((v, start + values.byte_offset())),
        Some(Err(e)) => {
            let eof = e.is_eof();
            Err(error(format!("the JSON does not parse: {e}"), start, eof))
        }
        None => Err(error("expected a JSON value", start, true)),
    }
}

/// The object `{"name": …, KEY: {…}}` of a JSON call, where KEY is one of `keys` (absent:
/// no arguments); a JSON string is accepted for the arguments, as models write both.
pub(crate) fn json_call(v: &Value, keys: &[&str], offset: usize) -> Result<(String, Map<String, Value>), CallError> {
    let Some(obj) = v.as_object() else {
        return Err(error("the call is not a JSON object", offset, false));
    };
    let Some(name) = obj.get("name").and_then(Value::as_str) else {
        return Err(error("the call has no \"name\" string", offset, false));
    };
    let args = keys.iter().find_map(|k| obj.get(*k));
    let args = match args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            _ => return Err(error(format!("the arguments of `{name}` are not a JSON object"), offset, false)),
        },
        Some(_) => return Err(error(format!("the arguments of `{name}` are not a JSON object"), offset, false)),
    };
    Ok((name.to_owned(), args))
}

/// The name a failed call may still show: the string after `"name"` in a JSON prefix.
pub(crate) fn name_in_prefix(text: &str) -> String {
    let Some(i) = text.find("\"name\"") else { return String::new() };
    let rest = text[i + 6..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else { return String::new() };
    let Some(rest) = rest.trim_start().strip_prefix('"') else { return String::new() };
    rest.find('"').map(|j| rest[..j].to_owned()).unwrap_or_default()
}

/// Where a value written as text, starting at `from`, ends: the first `close` followed
/// (after whitespace) by one of `next` (the next element, or the end of its parent); else
/// the last `close` in `region`. So the closing tag's text inside a value stays in it.
pub(crate) fn value_end(region: &str, from: usize, close: &str, next: &[&str]) -> Option<usize> {
    let mut last = None;
    let mut at = from;
    while let Some(i) = region[at..].find(close) {
        let end = at + i;
        let after = region[end + close.len()..].trim_start();
        if next.iter().any(|n| after.starts_with(n)) {
            return Some(end);
        }
        last = Some(end);
        at = end + close.len();
    }
    last
}

/// Whether the text from `pos` is cut off: it ends there, or it is the start of `token`.
pub(crate) fn cut_at(text: &str, pos: usize, token: &str) -> bool {
    pos >= text.len() || token.starts_with(&text[pos..])
}

/// `text` without one of `tokens` at its end (after whitespace): the end-of-turn token a
/// raw output may still carry.
pub(crate) fn strip_end<'a>(text: &'a str, tokens: &[&str]) -> &'a str {
    let trimmed = text.trim_end();
    tokens.iter().find_map(|t| trimmed.strip_suffix(t)).unwrap_or(text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Parse `text` whole and in two chunks at every byte (inside markers and inside
    /// characters too), and in three chunks at a stride: every way gives the same parse.
    pub(crate) fn parse_every_way(text: &str, family: Family, schema_of: SchemaOf<'_>) -> Parsed {
        let whole = parse(text, family, schema_of);
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            let mut s = Stream::new(family);
            s.push(&bytes[..i]);
            s.push(&bytes[i..]);
            assert_eq!(s.finish(schema_of).unwrap(), whole, "split at byte {i} of {text:?}");
        }
        for i in (0..bytes.len()).step_by(3) {
            let mut s = Stream::new(family);
            for chunk in [&bytes[..i / 2], &bytes[i / 2..i], &bytes[i..]] {
                s.push(chunk);
            }
            assert_eq!(s.finish(schema_of).unwrap(), whole, "split at {} and {i} of {text:?}", i / 2);
        }
        whole
    }

    /// The parse as JSON, for comparing with a literal.
    pub(crate) fn as_json(p: &Parsed) -> Value {
        serde_json::to_value(p).unwrap()
    }

    #[test]
    fn detects_each_family_by_its_markers() {
        let cases = [
            ("<|tool_call>call:f{}<tool_call|>", Some(Family::Gemma4)),
            ("<|channel>thought\nhm<channel|>Hi", Some(Family::Gemma4)),
            ("<tool_call>\n{\"name\": \"f\"}\n</tool_call>", Some(Family::Qwen3)),
            ("<tool_call>\n<function=f>\n</function>\n</tool_call>", Some(Family::Qwen3Xml)),
            ("[TOOL_CALLS]f[ARGS]{}", Some(Family::Mistral)),
            ("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", Some(Family::Llama3)),
            ("{\"name\": \"f\", \"parameters\": {}}", Some(Family::Llama3)),
            ("<start_function_call>call:f{}<end_function_call>", Some(Family::Functiongemma)),
            ("<think>\nhm\n</think>\n\nHello", Some(Family::Qwen3)),
            ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", Some(Family::Glm)),
            ("<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", Some(Family::Glm)),
            ("<think></think>\n<tool_call>ls</tool_call>", Some(Family::Glm)),
            (
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
                Some(Family::Kimi),
            ),
            ("<|channel|>analysis<|message|>hm<|end|>", Some(Family::GptOss)),
            (" to=functions.f<|channel|>commentary json<|message|>{}", Some(Family::GptOss)),
            ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>", Some(Family::Deepseek)),
            ("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>", Some(Family::Deepseek)),
            ("It is 12 degrees in Paris.", None),
        ];
        for (text, family) in cases {
            assert_eq!(detect(text), family, "{text}");
        }
    }

    #[test]
    fn a_stream_refuses_bytes_that_are_not_utf8() {
        let mut s = Stream::new(Family::Qwen3);
        s.push(b"<tool_call>\xff");
        assert!(s.finish(&|_| None).is_err());
    }
}
