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

/// The family whose markers `text` holds, or None when it holds none; an error when it holds
/// the markers of two families.
///
/// A family's own markers count wherever they are: Harmony's `<|channel|>`, `<|message|>` or
/// `to=functions.` (gpt-oss); Kimi's `<|tool_calls_section_begin|>`; DeepSeek's
/// `<｜tool▁calls▁begin｜>` or `<｜DSML｜function_calls>`; Gemma 4's `<|tool_call>` or
/// `<|channel>`; `<tool_call>`, the family told by what follows its first one: `<function=`
/// (qwen3-xml), `{` or nothing (qwen3), a name (glm); Mistral's `[TOOL_CALLS]` or `[THINK]`;
/// Llama's `<|python_tag|>` or `<|python_start|>`, and text that starts with `{"name"` or
/// `{"type"` (a JSON call) or `[NAME(` (a pythonic list of calls); FunctionGemma's
/// `<start_function_call>`. Text with none of those is qwen3 when it holds `<think>` or
/// `</think>` (which several families write).
///
/// Text with the markers of two families (a Qwen3 answer that quotes Harmony's
/// `<|channel|>`, or a later `<tool_call>` that plainly starts another `<tool_call>`
/// family's call) cannot be told: read as the one, it loses that one's calls, or runs a call
/// the model only quoted. It is refused, naming the first marker of each.
pub fn detect(text: &str) -> Result<Option<Family>, Ambiguous> {
    use super::{deepseek, functiongemma, gemma4, gpt_oss, kimi, llama3, mistral, qwen3, qwen3_xml};
    let own: [(Family, &[&'static str]); 8] = [
        (Family::GptOss, &[gpt_oss::CHANNEL, gpt_oss::MESSAGE, gpt_oss::TO_FUNCTIONS]),
        (Family::Kimi, &[kimi::SECTION_BEGIN]),
        (Family::Deepseek, &[deepseek::CALLS_BEGIN, deepseek::FUNCTION_CALLS]),
        (Family::Gemma4, &[gemma4::CALL_START, gemma4::CHANNEL_START]),
        (Family::Qwen3, &[qwen3::CALL_START]),
        (Family::Mistral, &[mistral::TOOL_CALLS, mistral::THINK_START]),
        (Family::Llama3, &[llama3::PYTHON_TAG, llama3::PYTHON_START]),
        (Family::Functiongemma, &[functiongemma::START_CALL]),
    ];
    // The first of each family's markers, in the order they are in the text.
    let mut found: Vec<(usize, &'static str, Family)> = own
        .iter()
        .filter_map(|(family, markers)| {
            markers.iter().filter_map(|m| text.find(m).map(|at| (at, *m, *family))).min_by_key(|(at, ..)| *at)
        })
        .collect();
    // A Llama 3 call that starts the text is the first of Llama's markers.
    let start = text.len() - text.trim_start().len();
    let llama = if llama3::starts_like_a_call(text) {
        Some(if text[start + 1..].trim_start().starts_with("\"type\"") { "{\"type\"" } else { "{\"name\"" })
    } else {
        llama3::starts_like_a_list(text).then_some("[NAME(")
    };
    if let Some(marker) = llama {
        found.retain(|(.., family)| *family != Family::Llama3);
        found.push((start, marker, Family::Llama3));
    }
    found.sort_unstable_by_key(|(at, ..)| *at);
    for (at, marker, family) in &mut found {
        if *marker == qwen3::CALL_START {
            let after = text[*at + marker.len()..].trim_start();
            *family = if after.starts_with(qwen3_xml::FUNCTION) {
                Family::Qwen3Xml
            } else if after.is_empty() || after.starts_with(['{', '<']) {
                Family::Qwen3
            } else {
                Family::Glm
            };
        }
    }
    // A later `<tool_call>` that starts a call of another `<tool_call>` family (a quoted
    // Qwen3 call before a Qwen3-Coder one) is that family's marker.
    if let Some(&(first, marker, family)) = found.iter().find(|(_, m, _)| *m == qwen3::CALL_START) {
        let from = first + marker.len();
        let other = text[from..].match_indices(marker).find_map(|(i, _)| {
            let at = from + i;
            tool_call_family(&text[at + marker.len()..]).filter(|f| *f != family).map(|f| (at, marker, f))
        });
        if let Some(other) = other {
            found.push(other);
            found.sort_unstable_by_key(|(at, ..)| *at);
        }
    }
    match found[..] {
        [] if text.contains(qwen3::THINK_END) || text.contains(qwen3::THINK_START) => Ok(Some(Family::Qwen3)),
        [] => Ok(None),
        [(_, _, family)] => Ok(Some(family)),
        [first, second, ..] => Err(Ambiguous { markers: [first, second] }),
    }
}

/// The `<tool_call>` family whose call starts `after` (the text after a `<tool_call>`), or
/// None when it plainly starts none: `<function=` (qwen3-xml), `{` and a key (qwen3), a
/// name and `<arg_key>` or `</tool_call>` (glm). Text quoted in a JSON string (`{\"name\"`)
/// starts none.
fn tool_call_family(after: &str) -> Option<Family> {
    use super::{glm, qwen3, qwen3_xml};
    let after = after.trim_start();
    if after.starts_with(qwen3_xml::FUNCTION) {
        return Some(Family::Qwen3Xml);
    }
    if after.strip_prefix('{').is_some_and(|rest| rest.trim_start().starts_with('"')) {
        return Some(Family::Qwen3);
    }
    let name = after.find(|c: char| !(c.is_alphanumeric() || "_-.:/".contains(c))).unwrap_or(after.len());
    let rest = after[name..].trim_start();
    (name > 0 && (rest.starts_with(glm::ARG_KEY) || rest.starts_with(qwen3::CALL_END))).then_some(Family::Glm)
}

/// Text that holds the markers of two families ([`detect`]): which one wrote it cannot be
/// told from the text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ambiguous {
    /// The first marker of each of the first two families found, in text order: its byte
    /// offset, the marker, the family.
    pub markers: [(usize, &'static str, Family); 2],
}

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [(a_at, a, a_family), (b_at, b, b_family)] = self.markers;
        write!(
            f,
            "the text holds the markers of two families, `{a}` ({a_family}) at byte {a_at} and `{b}` \
             ({b_family}) at byte {b_at}: say which family wrote it, since a guess could run a call the \
             model only quoted"
        )
    }
}

impl std::error::Error for Ambiguous {}

/// What a stream has found for certain, as soon as it is certain.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// More content text. The pieces, joined, are the final `content` exactly (the
    /// whitespace at its start and end is never sent).
    Content(String),
    /// More reasoning text; joined, the final `reasoning_content` exactly.
    Reasoning(String),
    /// A whole call (or a call that could not be read), in the order written.
    Call(ToolCall),
}

/// How a family's text is laid out, for the families read as a prelude (reasoning) and
/// then blocks (calls, channels) opened by markers with text between them: the whole
/// parse ([`drive`]) and the incremental one ([`Stream`]) are the same steps.
pub(crate) struct Spec {
    /// The end-of-turn tokens the text may still end with (dropped there).
    pub(crate) end_of_turn: &'static [&'static str],
    /// The reasoning at the start: `(open, close)` as [`reasoning`] reads them.
    pub(crate) think: Option<(&'static str, &'static str)>,
    /// The markers that open a block.
    pub(crate) starts: &'static [&'static str],
    /// The markers a whole block ends with.
    pub(crate) ends: &'static [&'static str],
    /// The block `marker` opens at `open`: its calls (and reasoning) into the builder, and
    /// the offset where reading goes on.
    pub(crate) block:
        fn(text: &str, open: usize, marker: &'static str, schema_of: SchemaOf<'_>, b: &mut Builder) -> usize,
}

/// The first of `markers` in `text` from `from`: its offset and which.
fn first_marker(text: &str, from: usize, markers: &[&'static str]) -> Option<(usize, &'static str)> {
    markers.iter().filter_map(|m| text[from..].find(m).map(|i| (from + i, *m))).min_by_key(|(i, _)| *i)
}

/// Where a layout's start markers next occur in a text read front to back (that may grow
/// at its end, as a stream's does): each marker's next occurrence is remembered, and a
/// search starts where the last one left off, so every byte is scanned about once per
/// marker, however many blocks there are. (Searching each marker afresh from each
/// block's end reads to the end of the text for a marker that never occurs: quadratic.)
#[derive(Debug, Clone, Default)]
pub(crate) struct Markers {
    /// Per marker: no occurrence starts between the last `from` and `clear`, but `hit`.
    next: Vec<(usize, Option<usize>)>,
    /// Bytes scanned so far.
    work: usize,
}

impl Markers {
    /// The first of `markers` in `text` at or after `from` (which never goes back between
    /// calls, and `markers` stay the same): its offset and which.
    pub(crate) fn first(&mut self, text: &str, from: usize, markers: &[&'static str]) -> Option<(usize, &'static str)> {
        if self.next.len() != markers.len() {
            self.next = vec![(0, None); markers.len()];
        }
        let mut best: Option<(usize, &'static str)> = None;
        for (m, (clear, hit)) in markers.iter().zip(&mut self.next) {
            let at = match *hit {
                Some(h) if h >= from => Some(h),
                _ => {
                    let start = floor_char(text, from.max(*clear));
                    let found = text[start..].find(m).map(|i| start + i);
                    self.work += found.map_or(text.len(), |i| i + m.len()) - start;
                    *hit = found;
                    // Not found: a later occurrence may only start in the last bytes, that
                    // the text may yet complete.
                    *clear =
                        found.unwrap_or_else(|| floor_char(text, (text.len() + 1).saturating_sub(m.len()).max(start)));
                    found
                }
            };
            if let Some(i) = at
                && best.is_none_or(|(b, _)| i < b)
            {
                best = Some((i, *m));
            }
        }
        best
    }
}

/// Read the reasoning at the start of `text` (`open`…`close`, or `close` alone when the
/// prompt opened it) into `b`, with any text before `open` as content; the offset where
/// the rest begins, or None when the thought never ended (all of it is reasoning). The
/// thought opens before the first call (at `first_call`) and before any `close`: a call
/// marker, or an `open` after the thought ended, is text.
pub(crate) fn reasoning(text: &str, open: &str, close: &str, first_call: usize, b: &mut Builder) -> Option<usize> {
    let head = &text[..first_call];
    let o = head.find(open);
    let c = head.find(close);
    match (o, c) {
        (Some(o), c) if c.is_none_or(|c| o < c) => {
            b.text(&text[..o]);
            let inner = o + open.len();
            match text[inner..].find(close) {
                Some(c) => {
                    b.reasoning(&text[inner..inner + c]);
                    Some(inner + c + close.len())
                }
                None => {
                    b.reasoning(&text[inner..]);
                    None
                }
            }
        }
        (_, Some(c)) => {
            b.reasoning(&text[..c]);
            Some(c + close.len())
        }
        _ => Some(0),
    }
}

/// The whole parse of a family laid out as `spec` says.
pub(crate) fn drive(text: &str, spec: &Spec, schema_of: SchemaOf<'_>) -> Parsed {
    drive_builder(text, spec, schema_of).finish()
}

/// The whole parse, and the bytes its marker searches scanned (for the tests' work count).
#[cfg(test)]
pub(crate) fn drive_work(text: &str, spec: &Spec, schema_of: SchemaOf<'_>) -> (Parsed, usize) {
    let b = drive_builder(text, spec, schema_of);
    let work = b.scanned;
    (b.finish(), work)
}

/// The whole parse into a builder.
fn drive_builder(text: &str, spec: &Spec, schema_of: SchemaOf<'_>) -> Builder {
    let text = strip_end(text, spec.end_of_turn);
    let mut b = Builder::default();
    let mut pos = 0;
    if let Some((open, close)) = spec.think {
        let first = first_marker(text, 0, spec.starts).map_or(text.len(), |(i, _)| i);
        match reasoning(text, open, close, first, &mut b) {
            Some(p) => pos = p,
            None => return b,
        }
    }
    let mut markers = Markers::default();
    while let Some((open, marker)) = markers.first(text, pos, spec.starts) {
        b.text(&text[pos..open]);
        pos = (spec.block)(text, open, marker, schema_of, &mut b);
    }
    b.text(&text[pos..]);
    b.scanned += markers.work;
    b
}

/// The layout of `family`, when it is read as prelude and blocks.
fn spec_of(family: Family) -> Option<&'static Spec> {
    Some(match family {
        Family::Qwen3 => &super::qwen3::SPEC,
        Family::Qwen3Xml => &super::qwen3_xml::SPEC,
        Family::Gemma4 => &super::gemma4::SPEC,
        Family::Mistral => &super::mistral::SPEC,
        Family::Glm => &super::glm::SPEC,
        Family::Kimi => &super::kimi::SPEC,
        Family::Deepseek => &super::deepseek::SPEC,
        Family::Functiongemma | Family::Llama3 | Family::GptOss => return None,
    })
}

/// The layout of `family`, when it is read unit by unit.
fn units_of(family: Family) -> Option<&'static Units> {
    Some(match family {
        Family::Llama3 => &super::llama3::UNITS,
        Family::GptOss => &super::gpt_oss::UNITS,
        Family::Functiongemma => &super::functiongemma::UNITS,
        _ => return None,
    })
}

/// How a family is read unit by unit (a call, a message, a line of text...) where its
/// layout is not a prelude and blocks: `step` reads the next unit that the text so far
/// decides, so the whole parse ([`run_units`], the text ended) and the incremental one
/// ([`Stream`], more may come) are the same steps.
pub(crate) struct Units {
    /// The end-of-turn tokens the text may still end with (dropped there).
    pub(crate) end_of_turn: &'static [&'static str],
    /// The markers whose start, at the end of the text so far, holds text back.
    pub(crate) held: &'static [&'static str],
    /// Whether the step at `c` reads an end-of-turn token at the end of the text as the end
    /// of its unit, which it is whether or not the text ends there (Llama's code ends at
    /// `<|eom_id|>`). A stream shows the other steps the text without it (the whole parse
    /// drops it; a step must not read it as a unit's text).
    pub(crate) reads_end: fn(c: &Cursor) -> bool,
    /// Read the next unit from `c.pos` into `b` and move `c` past it: true when it did;
    /// false when the text so far does not decide it (when `c.eof`: only when all is read).
    pub(crate) step: fn(text: &str, c: &mut Cursor, schema_of: SchemaOf<'_>, b: &mut Builder) -> bool,
}

/// What a body of text being read is, while its end has not come.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Live {
    Content,
    Reasoning,
}

/// Where a family read unit by unit stands.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cursor {
    /// The text before this offset is read.
    pub(crate) pos: usize,
    /// The family's own state (what the next unit may be).
    pub(crate) mode: u8,
    /// Whether a part of the content was written (a family that joins its parts).
    pub(crate) wrote: bool,
    /// The text is whole: nothing more will come.
    pub(crate) eof: bool,
    /// The family's marker searches (each always with the same markers).
    pub(crate) markers: [Markers; 2],
    /// A unit begun at this offset waits for its end, which only a closing character
    /// (`>`, `}`, `)`, `]`) or a line's end can bring: it is tried again when one arrives.
    pub(crate) waiting: Option<usize>,
    /// A body of text from this offset whose end has not come (sent as it comes).
    pub(crate) live: Option<(Live, usize)>,
    /// The step decided nothing, and the text from where it began to the end is a run
    /// (whitespace, a name) that more characters of this class leave undecided: it is tried
    /// again only when another character arrives. (A step that returns false with neither
    /// `waiting` nor `idle` nor `searching` is tried at each push, its read counted.)
    pub(crate) idle: Option<fn(char) -> bool>,
    /// The step decided nothing and read only by its marker searches (which remember where
    /// they stopped and count what they scan): it is tried at each push, nothing counted.
    pub(crate) searching: bool,
}

/// Whitespace: a run of it before a unit decides nothing ([`Cursor::idle`]).
pub(crate) fn space(c: char) -> bool {
    c.is_whitespace()
}

impl Cursor {
    /// The first of `markers` at or after `from`, by the search `i` (which must always be
    /// given the same markers).
    pub(crate) fn find(
        &mut self,
        i: usize,
        text: &str,
        from: usize,
        markers: &[&'static str],
    ) -> Option<(usize, &'static str)> {
        self.markers[i].first(text, from, markers)
    }
}

/// The whole parse of a family read unit by unit.
pub(crate) fn run_units(text: &str, units: &Units, schema_of: SchemaOf<'_>) -> Parsed {
    let text = strip_end(text, units.end_of_turn);
    let mut c = Cursor { eof: true, ..Cursor::default() };
    let mut b = Builder::default();
    while (units.step)(text, &mut c, schema_of, &mut b) {}
    b.finish()
}

/// Where a stream stands in a family's layout.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Before the reasoning is decided: nothing of the text is certain yet.
    Prelude,
    /// Inside a thought opened at `inner` whose end has not come.
    Thinking { inner: usize },
    /// Among blocks: text up to `pos` is read.
    Blocks,
    /// Unit by unit.
    Units,
    /// The text is not UTF-8, or the family is read at the end only.
    Whole,
}

/// A block tried and not yet certain: tried again when a marker that could end it (or
/// open the next) arrives, within a budget of work linear in its length.
#[derive(Debug, Clone, Copy)]
struct Tried {
    /// The text's length at the last try.
    len: usize,
    /// Bytes read by the tries so far.
    work: usize,
    /// The text's length when markers were last looked for.
    seen: usize,
}

/// A parser fed chunks split anywhere (inside markers, inside UTF-8 characters) that
/// sends [`Event`]s as soon as they are certain: content (held back only while it could
/// be the start of a marker, an end-of-turn token, or reasoning the prompt opened),
/// reasoning, and each call once it is whole. [`Stream::finish`] gives exactly what
/// [`parse`] gives for the whole text, and the events sent, joined, are that parse.
///
/// Families read as blocks (`qwen3`, `qwen3-xml`, `gemma4`, `mistral`, `glm`, `kimi`,
/// `deepseek`) and families read unit by unit (`llama3`, `gpt-oss`, `functiongemma`) send
/// calls as they end. The work is linear in the text: a block (or a unit) is parsed again
/// only when a marker (or a closing character) that could end it arrives, and at most four
/// times its length in all.
#[derive(Debug, Clone)]
pub struct Stream {
    family: Family,
    text: String,
    /// Bytes of a character not yet whole, or every byte from the first that is not UTF-8.
    pending: Vec<u8>,
    bad: bool,
    phase: Phase,
    b: Builder,
    pos: usize,
    /// No prelude marker starts before this offset.
    scanned: usize,
    tried: Option<Tried>,
    /// The start markers among blocks.
    markers: Markers,
    /// Where a family read unit by unit stands.
    cursor: Cursor,
    /// The text's length when units were last stepped.
    units_seen: usize,
    /// Where the whitespace at the ends of the text, of the content so far (which only grows
    /// at its end), and of the body being sent as it comes (a thought, a gpt-oss message)
    /// stands: each read once.
    text_trim: Trim,
    content_trim: Trim,
    live_trim: Trim,
    sent_content: usize,
    sent_reasoning: usize,
    sent_calls: usize,
    /// Bytes read by the stream's own scans and tries, and copied into its events (for the
    /// tests' work count).
    work: usize,
}

impl Stream {
    /// A stream of `family`'s text.
    pub fn new(family: Family) -> Self {
        let spec = spec_of(family);
        let phase = match spec {
            Some(s) if s.think.is_some() => Phase::Prelude,
            Some(_) => Phase::Blocks,
            None if units_of(family).is_some() => Phase::Units,
            None => Phase::Whole,
        };
        Self {
            family,
            text: String::new(),
            pending: Vec::new(),
            bad: false,
            phase,
            b: Builder::default(),
            pos: 0,
            scanned: 0,
            tried: None,
            markers: Markers::default(),
            cursor: Cursor::default(),
            units_seen: 0,
            text_trim: Trim::default(),
            content_trim: Trim::default(),
            live_trim: Trim::default(),
            sent_content: 0,
            sent_reasoning: 0,
            sent_calls: 0,
            work: 0,
        }
    }

    /// The next chunk, as it came (a character may be split between chunks): the events
    /// it makes certain.
    pub fn push(&mut self, chunk: &[u8], schema_of: SchemaOf<'_>) -> Vec<Event> {
        if self.bad {
            self.pending.extend_from_slice(chunk);
            return Vec::new();
        }
        self.pending.extend_from_slice(chunk);
        let before = self.text.len();
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                self.text.push_str(s);
                self.pending.clear();
            }
            Err(e) => {
                let good = e.valid_up_to();
                self.text.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                self.pending.drain(..good);
                if e.error_len().is_some() {
                    self.bad = true;
                    self.phase = Phase::Whole;
                    return Vec::new();
                }
            }
        }
        if self.text.len() == before {
            return Vec::new();
        }
        self.text_trim.read(&self.text, self.text.len(), &mut self.work);
        self.advance(schema_of);
        self.events(None)
    }

    /// The parse of everything pushed, and the events not sent yet; an error when the
    /// bytes are not UTF-8.
    pub fn finish_events(
        mut self,
        schema_of: SchemaOf<'_>,
    ) -> Result<(Parsed, Vec<Event>), std::string::FromUtf8Error> {
        let mut bytes = std::mem::take(&mut self.text).into_bytes();
        bytes.append(&mut self.pending);
        let text = String::from_utf8(bytes)?;
        let whole = parse(&text, self.family, schema_of);
        let events = self.events(Some(&whole));
        Ok((whole, events))
    }

    /// The parse of everything pushed; an error when the bytes are not UTF-8.
    pub fn finish(self, schema_of: SchemaOf<'_>) -> Result<Parsed, std::string::FromUtf8Error> {
        self.finish_events(schema_of).map(|(p, _)| p)
    }

    /// Bytes read so far by the stream's scans and tries (linear in the text).
    #[doc(hidden)]
    pub fn work(&self) -> usize {
        self.work + self.markers.work + self.cursor.markers.iter().map(|m| m.work).sum::<usize>()
    }

    /// Read what the text up to its current end makes certain.
    fn advance(&mut self, schema_of: SchemaOf<'_>) {
        if self.phase == Phase::Units {
            return self.units(schema_of);
        }
        let Some(spec) = spec_of(self.family) else { return };
        let think = spec.think.iter().flat_map(|(o, c)| [*o, *c]);
        let longest = spec
            .starts
            .iter()
            .chain(spec.ends)
            .chain(spec.end_of_turn)
            .copied()
            .chain(think)
            .map(str::len)
            .max()
            .unwrap_or(0);
        loop {
            match self.phase {
                Phase::Whole | Phase::Units => return,
                Phase::Prelude => {
                    let (open, close) = spec.think.expect("a prelude has a thought");
                    let from = floor_char(&self.text, self.scanned);
                    self.work += self.text.len() - from;
                    let t = &self.text[..];
                    let o = t[from..].find(open).map(|i| from + i);
                    let c = t[from..].find(close).map(|i| from + i);
                    let first = first_marker(t, from, spec.starts).map(|(i, _)| i);
                    let earliest = [o, c, first].into_iter().flatten().min();
                    match earliest {
                        None => {
                            self.scanned = t.len().saturating_sub(longest);
                            return;
                        }
                        Some(e) if Some(e) == o => {
                            self.b.text(&t[..e]);
                            self.phase = Phase::Thinking { inner: e + open.len() };
                            self.scanned = e + open.len();
                        }
                        Some(e) if Some(e) == c => {
                            self.b.reasoning(&t[..e]);
                            self.pos = e + close.len();
                            self.phase = Phase::Blocks;
                        }
                        Some(_) => self.phase = Phase::Blocks,
                    }
                }
                Phase::Thinking { inner } => {
                    let close = spec.think.expect("a thought has an end").1;
                    let from = floor_char(&self.text, self.scanned.max(inner));
                    self.work += self.text.len() - from;
                    match self.text[from..].find(close) {
                        Some(i) => {
                            self.b.reasoning(&self.text[inner..from + i]);
                            self.pos = from + i + close.len();
                            self.phase = Phase::Blocks;
                        }
                        None => {
                            self.scanned = self.text.len().saturating_sub(close.len());
                            return;
                        }
                    }
                }
                Phase::Blocks => {
                    if !self.blocks(spec, schema_of) {
                        return;
                    }
                }
            }
        }
    }

    /// The units the text so far decides.
    fn units(&mut self, schema_of: SchemaOf<'_>) {
        let Some(units) = units_of(self.family) else { return };
        // The steps read the text but an end-of-turn token it may end with (and the whitespace
        // after it, or the start of one): the whole parse drops it, so a step must not read it
        // as the text of a unit (but one whose unit it ends, or one past it). Should more
        // text come after it, it is text, read then.
        let full = &self.text[..];
        let visible = visible_end(full, self.text_trim.end, units.end_of_turn);
        let text_for = |c: &Cursor| if c.pos > visible || (units.reads_end)(c) { full } else { &full[..visible] };
        let t = text_for(&self.cursor);
        let seen = std::mem::replace(&mut self.units_seen, t.len()).min(t.len());
        if let Some(run) = self.cursor.idle {
            // Only a character outside the run the text ended in could decide the unit.
            self.work += t.len() - seen;
            if t[seen..].chars().all(run) {
                return;
            }
        }
        if let (Some(start), Some(tried)) = (self.cursor.waiting, &mut self.tried) {
            // Only a closing character that came since could end the unit; past the
            // budget, only when the unit has doubled since.
            let seen = std::mem::replace(&mut tried.seen, t.len()).min(t.len());
            self.work += t.len() - seen;
            let arrived = t.as_bytes()[seen..].iter().any(|b| b"}])>\n".contains(b));
            let within = tried.work <= 4 * (t.len() - start) || t.len() - start >= 2 * (tried.len - start);
            if !arrived || !within {
                return;
            }
        }
        loop {
            let from = self.cursor.waiting.unwrap_or(self.cursor.pos);
            self.cursor.waiting = None;
            self.cursor.live = None;
            self.cursor.idle = None;
            self.cursor.searching = false;
            let t = text_for(&self.cursor);
            let stepped = (units.step)(t, &mut self.cursor, schema_of, &mut self.b);
            // Every step reads the text from where it began to the end at most, and is
            // counted so, but one that only searched for markers (counted by the searches).
            // A step that decides nothing must say what it waits for (`waiting`, `idle`,
            // `searching`), or be tried again at each push with its read counted: were it
            // to read a long tail each time, the count would show it.
            let read = t.len() - from;
            if stepped || !self.cursor.searching {
                self.work += read;
            }
            if stepped {
                self.tried = None;
                continue;
            }
            if let Some(start) = self.cursor.waiting {
                let work = self.tried.filter(|_| start == from).map_or(0, |t| t.work) + read;
                self.tried = Some(Tried { len: t.len(), work, seen: t.len() });
            } else {
                self.tried = None;
            }
            return;
        }
    }

    /// One step among blocks; false when the text says nothing more for certain yet.
    fn blocks(&mut self, spec: &Spec, schema_of: SchemaOf<'_>) -> bool {
        let t = &self.text[..];
        let pos = self.pos;
        let found = self.markers.first(t, pos, spec.starts);
        let Some((open, marker)) = found else {
            // Text to the end, but what could start a marker or be the end-of-turn token.
            let end = pos + held_from(&t[pos..], self.text_trim.end.saturating_sub(pos), spec);
            self.b.text(&t[pos..end]);
            self.pos = end;
            return false;
        };
        if open > pos {
            self.b.text(&t[pos..open]);
            self.pos = open;
        }
        if let Some(tried) = &mut self.tried {
            // Only a marker that ended since could make it whole; past the budget, only
            // when the block has doubled since.
            let seen = std::mem::replace(&mut tried.seen, t.len());
            let arrived = spec.ends.iter().chain(spec.starts).any(|m| {
                let from = floor_char(t, (seen + 1).saturating_sub(m.len()).max(open));
                self.work += t.len() - from;
                t[from..].contains(m)
            });
            let within = tried.work <= 4 * (t.len() - open) || t.len() - open >= 2 * (tried.len - open);
            if !arrived || !within {
                return false;
            }
        }
        let mut step = Builder::default();
        let resume = (spec.block)(t, open, marker, schema_of, &mut step);
        let read = t.len() - open;
        self.work += read;
        let incomplete = step.calls.iter().any(|c| c.arguments.as_ref().is_err_and(|e| e.incomplete));
        let failed = step.calls.iter().any(|c| c.arguments.is_err());
        let certain = !incomplete
            && resume > open
            && (resume < t.len() || spec.ends.iter().any(|e| t[..resume].ends_with(e)))
            && (!failed || first_marker(t, resume, spec.starts).is_some());
        if !certain {
            let work = self.tried.map_or(0, |t| t.work) + read;
            self.tried = Some(Tried { len: t.len(), work, seen: t.len() });
            return false;
        }
        self.tried = None;
        self.b.content.push_str(&step.content);
        self.b.reasoning(&step.reasoning);
        self.b.calls.append(&mut step.calls);
        self.pos = resume;
        true
    }

    /// The events not sent yet: of the text read so far, or, at the end, of `whole`.
    fn events(&mut self, whole: Option<&Parsed>) -> Vec<Event> {
        // Only what was not sent is copied: copying all the text so far at each push
        // would make a long stream quadratic.
        let mut out = Vec::new();
        let (content, reasoning, calls): ([&str; 3], [&str; 3], &[ToolCall]) = match whole {
            Some(p) => (
                [p.content.as_deref().unwrap_or_default(), "", ""],
                [p.reasoning_content.as_deref().unwrap_or_default(), "", ""],
                &p.tool_calls,
            ),
            None => {
                // The content and the body so far without the whitespace at their ends, each
                // read once as it grows (trimming all of it at each push would read a long run
                // of whitespace again each time).
                let mut reasoning = [self.b.reasoning.as_str(), "", ""];
                let mut content =
                    [self.content_trim.read(&self.b.content, self.b.content.len(), &mut self.work), "", ""];
                let live = match (self.phase, self.cursor.live) {
                    (Phase::Thinking { inner }, _) => {
                        // The thought so far, but what could start its end or an end-of-turn token.
                        let spec = spec_of(self.family).expect("a thought has a layout");
                        let tail = &self.text[inner..];
                        Some((Live::Reasoning, inner, held_from(tail, self.text_trim.end.saturating_sub(inner), spec)))
                    }
                    (Phase::Units, Some((kind, start))) => {
                        // The body so far, but what could start a marker that ends it.
                        let units = units_of(self.family).expect("units have a layout");
                        let tail = &self.text[start..];
                        let trimmed = self.text_trim.end.saturating_sub(start);
                        Some((kind, start, held_in(tail, trimmed, units.end_of_turn, units.held)))
                    }
                    _ => None,
                };
                if let Some((kind, start, held)) = live {
                    if self.live_trim.from != start {
                        self.live_trim = Trim::at(start);
                    }
                    let live = self.live_trim.read(&self.text, start + held, &mut self.work);
                    let parts = if kind == Live::Content { &mut content } else { &mut reasoning };
                    if !live.is_empty() && !parts[0].is_empty() {
                        parts[1] = "\n\n";
                    }
                    parts[2] = live;
                }
                (content, reasoning, &self.b.calls)
            }
        };
        if let Some(new) = tail_of(&content, self.sent_content) {
            self.sent_content = content.iter().map(|r| r.len()).sum();
            self.work += new.len();
            out.push(Event::Content(new));
        }
        if let Some(new) = tail_of(&reasoning, self.sent_reasoning) {
            self.sent_reasoning = reasoning.iter().map(|r| r.len()).sum();
            self.work += new.len();
            out.push(Event::Reasoning(new));
        }
        for c in calls.iter().skip(self.sent_calls) {
            out.push(Event::Call(c.clone()));
        }
        self.sent_calls = self.sent_calls.max(calls.len());
        out
    }
}

/// Where the whitespace at the ends of a text that grows at its end stands (the text from
/// `from` to where it was read): each byte is read once, however often the trimmed text is
/// asked for, so a long run of whitespace is not read again at each push.
#[derive(Debug, Clone, Copy, Default)]
struct Trim {
    /// Where the text begins.
    from: usize,
    /// The text is read up to this offset.
    read: usize,
    /// Where its first character that is not whitespace starts, once one was read.
    start: Option<usize>,
    /// Where its last character that is not whitespace ends (`from` while there is none).
    end: usize,
}

impl Trim {
    /// The text that begins at `from`, nothing of it read.
    fn at(from: usize) -> Self {
        Self { from, read: from, start: None, end: from }
    }

    /// `text[from..to]` without the whitespace at its ends, reading only what was not read
    /// (`text` grows only at its end; `to` goes back only to read again from `from`); the
    /// bytes read are added to `work`.
    fn read<'a>(&mut self, text: &'a str, to: usize, work: &mut usize) -> &'a str {
        if to < self.read {
            *self = Self::at(self.from);
        }
        let new = &text[self.read..to];
        *work += new.len();
        if self.start.is_none() {
            let lead = new.len() - new.trim_start().len();
            if lead < new.len() {
                self.start = Some(self.read + lead);
            }
        }
        if self.start.is_some() {
            let kept = new.trim_end().len();
            if kept > 0 {
                self.end = self.read + kept;
            }
        }
        self.read = to;
        self.start.map_or("", |s| &text[s..self.end])
    }
}

/// The text `parts` make, joined, from byte `from` on; None when it is no longer than
/// `from` or `from` is inside a character.
fn tail_of(parts: &[&str], mut from: usize) -> Option<String> {
    if parts.iter().map(|p| p.len()).sum::<usize>() <= from {
        return None;
    }
    let mut rest = parts.iter();
    for part in rest.by_ref() {
        if from < part.len() {
            let mut tail = part.get(from..)?.to_owned();
            tail.extend(rest.copied());
            return Some(tail);
        }
        from -= part.len();
    }
    None
}

/// The largest char boundary at or before `i`.
pub(crate) fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where the text `tail` (with no whole start marker in it) stops being certain: at a
/// suffix that could be the start of a marker or of an end-of-turn token, or at a whole
/// end-of-turn token that only whitespace follows.
/// `trimmed` is the length of `tail` without the whitespace at its end.
fn held_from(tail: &str, trimmed: usize, spec: &Spec) -> usize {
    let think = spec.think.iter().flat_map(|(o, c)| [*o, *c]);
    let markers: Vec<&str> = spec.starts.iter().copied().chain(think).collect();
    held_in(tail, trimmed, spec.end_of_turn, &markers)
}

/// Where the text `tail` stops being certain: at a suffix that could be the start of one of
/// `markers` or `end_of_turn`, or at a whole end-of-turn token that only whitespace follows.
/// `trimmed` is the length of `tail` without the whitespace at its end (which a stream
/// knows without reading that whitespace again).
fn held_in(tail: &str, trimmed: usize, end_of_turn: &[&str], markers: &[&str]) -> usize {
    let trimmed = &tail[..trimmed];
    let whole = end_of_turn.iter().filter(|t| trimmed.ends_with(*t)).map(|t| trimmed.len() - t.len());
    whole.chain([marker_start(tail, markers), marker_start(tail, end_of_turn)]).min().unwrap_or(tail.len())
}

/// Where a suffix of `tail` that could be the start of one of `markers` begins (the end of
/// `tail` when none could).
pub(crate) fn marker_start(tail: &str, markers: &[&str]) -> usize {
    let mut held = tail.len();
    for m in markers {
        for k in (1..m.len()).rev() {
            if m.is_char_boundary(k) && tail.ends_with(&m[..k]) {
                held = held.min(tail.len() - k);
                break;
            }
        }
    }
    held
}

/// The end of `text` but an end-of-turn token it may end with: a whole one that only
/// whitespace follows (which the whole parse drops, see [`strip_end`]), or the start of one
/// at the very end. `trimmed` is the length of `text` without the whitespace at its end.
fn visible_end(text: &str, trimmed: usize, end_of_turn: &[&str]) -> usize {
    held_in(text, trimmed, end_of_turn, &[])
}

/// Collects a parse: content pieces in order, reasoning, calls.
#[derive(Debug, Default, Clone)]
pub(crate) struct Builder {
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    /// Bytes scanned for markers (for the tests' work count).
    pub(crate) scanned: usize,
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
/// just past it. Marker text inside a JSON string is part of the string. An error is at
/// the byte where the JSON stopped parsing, and says whether the text ended inside the value.
pub(crate) fn json_at(text: &str, pos: usize) -> Result<(Value, usize), CallError> {
    json_read_at(text, pos).map_err(|(e, _)| e)
}

/// [`json_at`], and on an error the offset where the JSON stopped parsing: the text read
/// before it is all the value may be known by (what follows may not be part of it).
pub(crate) fn json_read_at(text: &str, pos: usize) -> Result<(Value, usize), (CallError, usize)> {
    let start = pos + (text[pos..].len() - text[pos..].trim_start().len());
    let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Unique>();
    match values.next() {
        Some(Ok(Unique(v))) => Ok((v, start + values.byte_offset())),
        Some(Err(e)) => {
            let eof = e.is_eof();
            // serde_json's line is 1-based and its column counts the line's bytes up to and
            // including the one it stopped at (at the end of the text: all of them).
            let json = &text[start..];
            let line = json.split_inclusive('\n').take(e.line().saturating_sub(1)).map(str::len).sum::<usize>();
            let column = if eof { e.column() } else { e.column().saturating_sub(1) };
            let stop = start + floor_char(json, line + column);
            // The offset is where reading stopped (the line and column are the JSON's own).
            Err((error(format!("the JSON does not parse: {e}"), stop, eof), stop))
        }
        None => Err((error("expected a JSON value", start, true), text.len())),
    }
}

/// `word` as a JSON integer: any that fits 64 bits, signed or not (as serde_json reads one);
/// None for any other word.
pub(crate) fn integer(word: &str) -> Option<Value> {
    match word.parse::<i64>() {
        Ok(i) => Some(Value::from(i)),
        Err(_) => word.parse::<u64>().ok().map(Value::from),
    }
}

/// The JSON document `text`, each of whose objects names a member once.
pub(crate) fn json_value(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Unique>(text).map(|u| u.0)
}

/// A JSON value each of whose objects names a member once: a key given twice is an error
/// (serde_json keeps the last, another reader the first; the text says both).
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("the key `{key}` is given twice")));
            }
            let Unique(v) = map.next_value()?;
            members.insert(key, v);
        }
        Ok(Value::Object(members))
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
        Some(Value::String(s)) => match json_value(s) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(error(format!("the arguments of `{name}` are not a JSON object"), offset, false)),
            Err(e) => {
                let message = format!("the arguments of `{name}` are a string that does not parse as JSON: {e}");
                return Err(error(message, offset, false));
            }
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

    /// Feed `chunks` to a stream: its final parse, and the events it sent, the last of
    /// them at its finish.
    pub(crate) fn stream(family: Family, chunks: &[&[u8]], schema_of: SchemaOf<'_>) -> (Parsed, Vec<Event>) {
        let mut s = Stream::new(family);
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(s.push(chunk, schema_of));
        }
        let (parsed, last) = s.finish_events(schema_of).unwrap();
        events.extend(last);
        (parsed, events)
    }

    /// `text` fed to a stream of `family` in pieces of 16 bytes, which it must read in linear
    /// work (fewer than 16 bytes read per byte of text): the events sent before the end, the
    /// parse, and the events sent at the end.
    pub(crate) fn streamed_in_linear_work(
        family: Family,
        text: &str,
        schema_of: SchemaOf<'_>,
    ) -> (Vec<Event>, Parsed, Vec<Event>) {
        let mut s = Stream::new(family);
        let mut events = Vec::new();
        for piece in text.as_bytes().chunks(16) {
            events.extend(s.push(piece, schema_of));
        }
        assert!(s.work() < 16 * text.len(), "{family:?}: {} bytes read for {}", s.work(), text.len());
        let (parsed, rest) = s.finish_events(schema_of).unwrap();
        (events, parsed, rest)
    }

    /// `p` (a parse as JSON) holds `first`, cut off by the start of another call (an error), and
    /// then `later`, each refused because it follows such a call.
    pub(crate) fn assert_cut_and_refused(p: &Value, first: &str, later: &[&str]) {
        let calls = p["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1 + later.len(), "{p}");
        assert_eq!(calls[0]["name"], serde_json::json!(first), "{p}");
        assert!(calls[0]["error"].is_object(), "{p}");
        for (c, name) in calls[1..].iter().zip(later) {
            assert_eq!(c["name"], serde_json::json!(name), "{p}");
            let message = c["error"]["message"].as_str().unwrap();
            assert!(message.contains("follows a call that the start of another call cut off"), "{p}");
        }
    }

    /// The events, joined: content, reasoning, calls.
    pub(crate) fn joined(events: &[Event]) -> Parsed {
        let mut p = Parsed::default();
        for e in events {
            match e {
                Event::Content(t) => p.content.get_or_insert_default().push_str(t),
                Event::Reasoning(t) => p.reasoning_content.get_or_insert_default().push_str(t),
                Event::Call(c) => p.tool_calls.push(c.clone()),
            }
        }
        p
    }

    /// Parse `text` whole, in two chunks split at every byte (inside markers and inside
    /// characters too), in three chunks at a stride, and a byte at a time: every way gives
    /// the same parse, and the events each stream sent, joined, are that parse.
    pub(crate) fn parse_every_way(text: &str, family: Family, schema_of: SchemaOf<'_>) -> Parsed {
        let whole = parse(text, family, schema_of);
        let bytes = text.as_bytes();
        let check = |chunks: &[&[u8]], how: &str| {
            let (parsed, events) = stream(family, chunks, schema_of);
            assert_eq!(parsed, whole, "{how} of {text:?}");
            assert_eq!(joined(&events), whole, "the events, {how} of {text:?}");
        };
        for i in 0..=bytes.len() {
            check(&[&bytes[..i], &bytes[i..]], &format!("split at byte {i}"));
        }
        for i in (0..bytes.len()).step_by(3) {
            check(&[&bytes[..i / 2], &bytes[i / 2..i], &bytes[i..]], &format!("split at {} and {i}", i / 2));
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        check(&bytewise, "a byte at a time");
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
            ("hm\n</think>\n\nHello", Some(Family::Qwen3)),
            ("<think>\nhm, and the text ends", Some(Family::Qwen3)),
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
            assert_eq!(detect(text), Ok(family), "{text}");
        }
    }

    /// Text with the markers of two families is refused, whichever comes first and wherever
    /// they are, naming the first marker of each; the `<tool_call>` families are one (what
    /// follows the first tells them apart), and a `<think>` beside a family's markers is theirs.
    #[test]
    fn text_with_the_markers_of_two_families_is_refused() {
        let calls = [
            (Family::GptOss, "<|channel|>commentary to=functions.rm <|constrain|>json<|message|>{}<|call|>"),
            (
                Family::Kimi,
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.rm:0<|tool_call_argument_begin|>{}",
            ),
            (Family::Deepseek, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"rm\">"),
            (Family::Gemma4, "<|tool_call>call:rm{}<tool_call|>"),
            (Family::Qwen3, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"),
            (Family::Mistral, "[TOOL_CALLS]rm[ARGS]{}"),
            (Family::Llama3, "<|python_tag|>{\"name\": \"rm\", \"parameters\": {}}"),
            (Family::Functiongemma, "<start_function_call>call:rm{}<end_function_call>"),
        ];
        for (a, a_text) in calls {
            assert_eq!(detect(&format!("<think>hm</think>{a_text}")), Ok(Some(a)), "{a_text}");
            for (b, b_text) in calls.iter().filter(|(b, _)| *b != a) {
                let text = format!("Quoting {a_text} and then\n{b_text}");
                let Err(e) = detect(&text) else { panic!("{a} then {b}: {:?}", detect(&text)) };
                let [(a_at, a_marker, a_family), (b_at, b_marker, b_family)] = e.markers;
                assert_eq!((a_family, b_family), (a, *b), "{text}");
                assert!(a_at < b_at && text[a_at..].starts_with(a_marker) && text[b_at..].starts_with(b_marker));
                assert_eq!(a_at, "Quoting ".len(), "{text}");
                let said = e.to_string();
                assert!(said.contains(&format!("`{a_marker}` ({a}) at byte {a_at}")), "{said}");
                assert!(said.contains(&format!("`{b_marker}` ({b}) at byte {b_at}")), "{said}");
            }
        }
        let qwen3_in_a_string =
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"<tool_call>{\\\"name\\\"\"}}\n</tool_call>";
        assert_eq!(detect(qwen3_in_a_string), Ok(Some(Family::Qwen3)));
    }

    /// The `<tool_call>` families are told apart by what follows each `<tool_call>`, not
    /// only the first: a quoted Qwen3 JSON call before a Qwen3-Coder call (or a GLM call
    /// after a Qwen3 one) is refused, not read as the first so the quoted call runs; a
    /// `<tool_call>` that starts no call of its own (text inside a JSON string) decides nothing.
    #[test]
    fn tool_call_families_that_disagree_are_refused() {
        let qwen3 = "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>";
        let xml =
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
        let glm = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>";
        let empty_glm = "<tool_call>get_time</tool_call>";
        for (a, a_family) in [(qwen3, Family::Qwen3), (xml, Family::Qwen3Xml), (glm, Family::Glm)] {
            assert_eq!(detect(&format!("{a}\n{a}")), Ok(Some(a_family)), "{a}");
            for (b, b_family) in
                [(qwen3, Family::Qwen3), (xml, Family::Qwen3Xml), (glm, Family::Glm), (empty_glm, Family::Glm)]
            {
                if a_family == b_family {
                    continue;
                }
                let text = format!("Like `{a}`, so:\n{b}");
                let Err(e) = detect(&text) else { panic!("{a_family} then {b_family}: {:?}", detect(&text)) };
                let [(a_at, _, got_a), (b_at, _, got_b)] = e.markers;
                assert_eq!((a_at, got_a, b_at, got_b), (6, a_family, a.len() + 13, b_family), "{text}");
            }
        }
    }

    /// A Llama 3 call that starts the text is a marker like any other: a `</think>` or a
    /// `<tool_call>` in its arguments does not make it Qwen3 text (its call silently lost).
    #[test]
    fn a_llama3_call_at_the_start_counts_beside_other_markers() {
        let think = "{\"name\": \"write\", \"parameters\": {\"text\": \"</think>\"}}";
        assert_eq!(detect(think), Ok(Some(Family::Llama3)));
        let python_tag = "{\"name\": \"write\", \"parameters\": {}}<|python_tag|>";
        assert_eq!(detect(python_tag), Ok(Some(Family::Llama3)));
        let quoting = "{\"name\": \"write\", \"parameters\": {\"text\": \"<tool_call>x\"}}";
        let Err(e) = detect(quoting) else { panic!("{:?}", detect(quoting)) };
        assert_eq!(e.markers.map(|(at, _, family)| (at, family)), [(0, Family::Llama3), (42, Family::Glm)]);
        let list = "[rm(path=\"[TOOL_CALLS]\")]";
        assert!(detect(list).is_err(), "{:?}", detect(list));
        // The marker named is the one the call starts with, where it starts.
        for (text, at, marker) in [
            ("{\"type\": \"function\", \"name\": \"rm\", \"parameters\": {\"s\": \"<|channel|>\"}}", 0, "{\"type\""),
            ("\n { \"name\": \"rm\", \"parameters\": {\"s\": \"<|channel|>\"}}", 2, "{\"name\""),
            ("[rm(s=\"<|channel|>\")]", 0, "[NAME("),
        ] {
            let Err(e) = detect(text) else { panic!("{text}: {:?}", detect(text)) };
            assert_eq!(e.markers[0], (at, marker, Family::Llama3), "{text}");
        }
    }

    /// A whole call of each family read as blocks, as its template writes it.
    const WHOLE_CALLS: &[(Family, &str)] = &[
        (Family::Qwen3, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"),
        (Family::Qwen3Xml, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"),
        (Family::Gemma4, "<|tool_call>call:f{a:1}<tool_call|>"),
        (Family::Mistral, "[TOOL_CALLS]f[ARGS]{\"a\": 1}"),
        (Family::Glm, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>"),
        (
            Family::Kimi,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
        ),
        (
            Family::Deepseek,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ),
    ];

    fn calls_in(events: &[Event]) -> usize {
        events.iter().filter(|e| matches!(e, Event::Call(_))).count()
    }

    #[test]
    fn a_call_is_sent_when_it_ends_before_the_text_after_it() {
        let schema_of: SchemaOf<'_> = &|_| None;
        let after = "x".repeat(1 << 20);
        for (family, call) in WHOLE_CALLS {
            let mut s = Stream::new(*family);
            // The call, two calls, in small pieces: each sent as its last byte comes.
            let text = format!("Sure.\n{call}\n{call}");
            let mut sent = Vec::new();
            for (i, b) in text.bytes().enumerate() {
                let events = s.push(&[b], schema_of);
                if calls_in(&events) > 0 {
                    sent.push(i + 1);
                }
            }
            assert_eq!(sent, [6 + call.len(), text.len()], "{family:?}");
            // A megabyte of text after them: sent as it comes, in 64 KiB pieces.
            let mut content = 0;
            for piece in after.as_bytes().chunks(1 << 16) {
                for e in s.push(piece, schema_of) {
                    match e {
                        Event::Content(t) => content += t.len(),
                        other => panic!("{family:?}: {other:?}"),
                    }
                }
            }
            assert!(content >= after.len() - 32, "{family:?}: {content}");
            assert!(s.work() < 8 * (text.len() + after.len()), "{family:?}: {} bytes read", s.work());
            let (parsed, rest) = s.finish_events(schema_of).unwrap();
            assert_eq!(parsed.tool_calls.len(), 2);
            assert_eq!(calls_in(&rest), 0, "{family:?}");
        }
    }

    #[test]
    fn a_long_call_fed_in_small_pieces_is_read_in_linear_work() {
        let schema_of: SchemaOf<'_> = &|_| None;
        // Markers inside the value: each arrival may try the block again, within the budget.
        for value in ["a}]</tool_call></arg_value> ", "abcdefghijklmnop"] {
            let value = serde_json::to_string(&value.repeat(1 << 14)).unwrap();
            let plain = !value.contains('<');
            let cases = [
                (
                    Family::Qwen3,
                    format!("<tool_call>\n{{\"name\": \"f\", \"arguments\": {{\"a\": {value}}}}}\n</tool_call>"),
                ),
                (Family::Mistral, format!("[TOOL_CALLS]f[ARGS]{{\"a\": {value}}}")),
                (
                    Family::Glm,
                    format!("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>"),
                ),
            ];
            for (family, text) in cases {
                let mut s = Stream::new(family);
                let mut events = Vec::new();
                for piece in text.as_bytes().chunks(7) {
                    events.extend(s.push(piece, schema_of));
                }
                if plain {
                    assert_eq!(calls_in(&events), 1, "{family:?}: the call is sent before the end");
                }
                assert!(s.work() < 16 * text.len(), "{family:?}: {} bytes read for {}", s.work(), text.len());
                let (parsed, rest) = s.finish_events(schema_of).unwrap();
                assert_eq!(parsed, parse(&text, family, schema_of));
                assert_eq!(calls_in(&events) + calls_in(&rest), 1);
            }
        }
    }

    #[test]
    fn a_section_of_many_calls_fed_in_small_pieces_is_read_in_linear_work() {
        let schema_of: SchemaOf<'_> = &|_| None;
        let n = 1000;
        let kimi = |i| {
            format!(
                "<|tool_call_begin|>functions.f:{i}<|tool_call_argument_begin|>{{\"city\": \"Paris {i}\"}}<|tool_call_end|>"
            )
        };
        let deepseek =
            |i| format!("<｜tool▁call▁begin｜>f<｜tool▁sep｜>{{\"city\": \"Paris {i}\"}}<｜tool▁call▁end｜>");
        type Unit<'a> = &'a dyn Fn(usize) -> String;
        let cases: [(Family, Unit<'_>, &str, &str); 2] = [
            (Family::Kimi, &kimi, "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
            (Family::Deepseek, &deepseek, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
        ];
        for (family, unit, open, close) in cases {
            // One section of many calls (held until it ends), and text after it.
            let calls: String = (0..n).map(unit).collect();
            let text = format!("I will look them all up.{open}{calls}{close}\nDone.");
            let (events, parsed, rest) = streamed_in_linear_work(family, &text, schema_of);
            assert_eq!(calls_in(&events), n, "{family:?}: the calls are sent when the section ends");
            assert_eq!(parsed, parse(&text, family, schema_of));
            assert_eq!(parsed.tool_calls.len(), n);
            assert!(parsed.tool_calls.iter().all(|c| c.arguments.is_ok()), "{family:?}");
            assert_eq!(calls_in(&rest), 0, "{family:?}");
        }
    }

    #[test]
    fn many_calls_with_text_between_fed_in_small_pieces_are_read_in_linear_work() {
        let schema_of: SchemaOf<'_> = &|_| None;
        for (family, call) in WHOLE_CALLS {
            let text: String = (0..500).map(|i| format!("Step {i}, as a model would say.\n{call}\n")).collect();
            let (mut events, parsed, rest) = streamed_in_linear_work(*family, &text, schema_of);
            events.extend(rest);
            assert_eq!(joined(&events), parsed, "{family:?}");
            assert_eq!(parsed.tool_calls.len(), 500, "{family:?}");
        }
    }

    /// Two calls of each family read unit by unit, and what a stream must have sent once the
    /// first (and its end) came.
    const UNIT_CALLS: &[(Family, &str, &str)] = &[
        (
            Family::Llama3,
            "{\"name\": \"f\", \"parameters\": {\"a\": 1}}",
            "; {\"name\": \"f\", \"parameters\": {\"a\": 2}}",
        ),
        (Family::Llama3, "<|python_tag|>[f(a=1)", ", f(a=2)]<|eom_id|>"),
        (
            Family::GptOss,
            "<|channel|>analysis<|message|>Two lookups.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
            "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 2}<|call|>",
        ),
        (
            Family::Functiongemma,
            "<start_function_call>call:f{a:1}<end_function_call>",
            "<start_function_call>call:f{a:2}<end_function_call>",
        ),
        (Family::Functiongemma, "Looking.\ncall:f{a:1}", "\ncall:f{a:2}"),
    ];

    #[test]
    fn llama3_gpt_oss_and_functiongemma_send_each_call_before_the_next_is_pushed() {
        let schema_of: SchemaOf<'_> = &|_| None;
        for (family, first, second) in UNIT_CALLS {
            let mut s = Stream::new(*family);
            let mut events = Vec::new();
            // A byte at a time: the call is sent by the push of its last byte.
            for (i, b) in first.bytes().enumerate() {
                let sent = s.push(&[b], schema_of);
                assert!(calls_in(&sent) == 0 || i + 1 == first.len(), "{family:?}: sent at byte {i} of {first}");
                events.extend(sent);
            }
            assert_eq!(calls_in(&events), 1, "{family:?}: {first}: {events:?}");
            events.extend(s.push(second.as_bytes(), schema_of));
            let (parsed, rest) = s.finish_events(schema_of).unwrap();
            events.extend(rest);
            assert_eq!(joined(&events), parsed, "{family:?}");
            let args: Vec<_> = parsed.tool_calls.iter().map(|c| c.arguments.clone().unwrap()["a"].clone()).collect();
            assert_eq!(args, [1, 2], "{family:?}");
            parse_every_way(&format!("{first}{second}"), *family, schema_of);
        }
        // gpt-oss's reasoning and content are sent as they come, before their message ends.
        let mut s = Stream::new(Family::GptOss);
        assert_eq!(s.push(b"<|channel|>analysis<|message|>Let me <|e", schema_of), [Event::Reasoning("Let me".into())]);
        let sent = s.push(b"nd|><|start|>assistant<|channel|>final<|message|>It is 12", schema_of);
        assert_eq!(sent, [Event::Content("It is 12".into())]);
    }

    #[test]
    fn unit_families_read_long_calls_and_many_calls_in_linear_work() {
        let schema_of: SchemaOf<'_> = &|_| None;
        let value = "a}])> ".repeat(1 << 13);
        let json = serde_json::to_string(&value).unwrap();
        let cases = [
            (Family::Llama3, format!("<|python_tag|>{{\"name\": \"f\", \"parameters\": {{\"a\": {json}}}}}")),
            (Family::Llama3, format!("[f(a={json})]")),
            (Family::GptOss, format!("<|channel|>commentary to=functions.f<|message|>{{\"a\": {json}}}<|call|>")),
            (
                Family::Functiongemma,
                format!("<start_function_call>call:f{{a:<escape>{value}<escape>}}<end_function_call>"),
            ),
            (Family::Functiongemma, format!("call:f{{a:<escape>{value}<escape>}}")),
        ];
        for (family, text) in cases {
            for text in [text.clone(), (0..300).map(|i| format!("{text}\nStep {i}.\n")).collect::<String>()] {
                let mut s = Stream::new(family);
                for piece in text.as_bytes().chunks(7) {
                    s.push(piece, schema_of);
                }
                assert!(s.work() < 16 * text.len(), "{family:?}: {} bytes read for {}", s.work(), text.len());
                let (parsed, _) = s.finish_events(schema_of).unwrap();
                assert_eq!(parsed, parse(&text, family, schema_of), "{family:?}");
                assert!(
                    parsed.tool_calls.iter().all(|c| c.arguments.is_ok()),
                    "{family:?}: {:?}",
                    parsed.tool_calls.first()
                );
            }
        }
    }

    #[test]
    fn long_runs_of_whitespace_or_a_name_are_read_in_linear_work() {
        let schema_of: SchemaOf<'_> = &|_| None;
        // Long runs a unit's start is not decided by (whitespace, a name not yet ended, the
        // spaces inside a list or after a tag), alone or before what decides it: each step
        // that decides nothing is counted, so one that read the run again at each push would
        // show here.
        let (sp, name) = (" ".repeat(1 << 15), "a".repeat(1 << 15));
        let call = "{\"name\": \"f\", \"parameters\": {}}";
        let harmony = "<|channel|>commentary to=functions.f<|message|>{}<|call|>";
        let cases = [
            (Family::Llama3, sp.clone()),
            (Family::Llama3, format!("{sp}{call}")),
            (Family::Llama3, format!("{{{sp}\"name\": \"f\", \"parameters\": {{}}}}")),
            (Family::Llama3, format!("{call}{sp};{sp}{call}")),
            (Family::Llama3, format!("[{name}")),
            (Family::Llama3, format!("[{name}{sp}(a=1)]")),
            (Family::Llama3, format!("[{sp}f(a=1)]")),
            (Family::Llama3, format!("[f(a=\"1\"){sp},{sp}g(){sp}]")),
            (Family::Llama3, format!("[f(a=\"1\"){sp}")),
            (Family::Llama3, format!("<|python_tag|>{sp}")),
            (Family::Llama3, format!("<|python_tag|>{sp}[{sp}{name}")),
            (Family::Llama3, format!("<|python_tag|>{name}{sp}")),
            (Family::Llama3, format!("<|python_tag|>{name}.call(q=1)")),
            (Family::Llama3, format!("<|python_tag|>{sp}print({name})<|eom_id|>")),
            (Family::GptOss, sp.clone()),
            (Family::GptOss, format!("<|start|>assistant{sp}{harmony}")),
            (Family::GptOss, format!("<|channel|>commentary to=functions.{name}<|message|>{{}}<|call|>")),
            (Family::GptOss, format!("<|channel|>commentary to=functions.f<|message|>{sp}{{}}{sp}<|call|>")),
            (Family::GptOss, format!("<|channel|>analysis<|message|>{sp}{name}<|end|>{harmony}")),
            (Family::Functiongemma, sp.clone()),
            (Family::Functiongemma, format!("{sp}call:f{{a:1}}")),
            (Family::Functiongemma, format!("call:{name}{sp}{{a:1}}\n{sp}\n")),
            (Family::Functiongemma, format!("<start_function_call>{sp}call:{name}{{}}<end_function_call>")),
        ];
        // Long runs of whitespace in the content and the reasoning, of every family: between
        // words, at the start, before a call, after one, at the end, after an end-of-turn
        // token. The events are the text so far without the whitespace at its ends: a stream
        // that trimmed all of it again at each push (reading the run each time) would show here.
        let mut cases = cases.to_vec();
        let wrap = |family: Family, s: &str| match family {
            Family::GptOss => format!("<|channel|>final<|message|>{s}"),
            _ => s.to_owned(),
        };
        let mut calls: Vec<(Family, String)> = WHOLE_CALLS.iter().map(|(f, c)| (*f, c.to_string())).collect();
        calls.extend(UNIT_CALLS.iter().map(|(f, first, _)| (*f, first.to_string())));
        calls.push((Family::Llama3, format!("<|python_tag|>{call}")));
        calls.push((Family::GptOss, format!("<|start|>assistant{harmony}<|start|>assistant")));
        for (family, call) in &calls {
            let family = *family;
            let eot = spec_of(family).map_or_else(|| units_of(family).unwrap().end_of_turn, |s| s.end_of_turn);
            let after = wrap(family, &format!("{sp}Done.{sp}"));
            cases.extend([
                (family, wrap(family, &format!("Hello{sp}world.{sp}Bye."))),
                (family, wrap(family, &format!("{sp}Hello."))),
                (family, wrap(family, &format!("Hello{sp}"))),
                (family, format!("{}{call}", wrap(family, &format!("Hello.{sp}")))),
                (family, format!("{call}{after}")),
                (family, format!("{call}{sp}")),
                (family, format!("{call}{call}{sp}{call}")),
            ]);
            for eot in eot {
                cases.push((family, wrap(family, &format!("Hello.{sp}{eot}{sp}"))));
                cases.push((family, format!("{call}{eot}{sp}")));
            }
            if let Some((open, close)) = spec_of(family).and_then(|s| s.think) {
                cases.extend([
                    (family, format!("{open}{sp}Hmm{sp}so.{sp}")),
                    (family, format!("{open}Hmm{sp}so.{sp}{close}{sp}Hello{sp}{call}")),
                    (family, format!("Hmm{sp}so.{sp}{close}{sp}Hello{sp}")),
                ]);
            }
        }
        cases.extend([
            (Family::GptOss, format!("<|channel|>analysis<|message|>{sp}Hmm{sp}so.{sp}")),
            (Family::GptOss, format!("<|channel|>analysis<|message|>Hmm{sp}<|end|>{harmony}{sp}")),
            (Family::Gemma4, format!("<|channel>thought\n{sp}Hmm{sp}<channel|>{sp}Hello{sp}")),
        ]);
        for (family, text) in cases {
            let mut s = Stream::new(family);
            let mut events = Vec::new();
            for piece in text.as_bytes().chunks(7) {
                events.extend(s.push(piece, schema_of));
            }
            let head = &text[..40.min(text.len())];
            assert!(s.work() < 16 * text.len(), "{family:?} {head:?}: {} bytes read for {}", s.work(), text.len());
            let (parsed, rest) = s.finish_events(schema_of).unwrap();
            events.extend(rest);
            assert_eq!(parsed, parse(&text, family, schema_of), "{family:?} {head:?}");
            assert_eq!(joined(&events), parsed, "{family:?} {head:?}");
        }
    }

    #[test]
    fn a_unit_cut_off_by_an_end_of_turn_token_streams_as_the_whole_parse_reads_it() {
        // The whole parse drops an end-of-turn token at the end, so the text ends inside the
        // unit: an incomplete call. A stream must not read the token as the unit's text (a
        // list's next item, JSON) and send another error, before the end shows it is the end.
        let schema_of: SchemaOf<'_> = &|_| None;
        let cases = [
            (Family::Llama3, "<|python_tag|>[f(a=1)<|eot_id|>"),
            (Family::Llama3, "[f(a=1), <|eom_id|>\n"),
            (Family::Llama3, "{\"name\": \"f\", <|eot_id|>"),
            (Family::Llama3, "<|python_tag|>brave_search.call(query=\"a\"<|eom_id|>"),
            (Family::Llama3, "<|python_tag|><|eom_id|> "),
            (Family::Functiongemma, "call:f{a:<end_of_turn>"),
            (Family::Functiongemma, "<start_function_call>call:f{a:1<end_of_turn>"),
        ];
        for (family, text) in cases {
            let whole = parse_every_way(text, family, schema_of);
            assert!(
                whole.tool_calls.last().is_some_and(|c| c.arguments.as_ref().is_err_and(|e| e.incomplete)),
                "{text}: {whole:?}"
            );
        }
        // Followed by more text, the token is text: a list's next item that does not parse.
        let whole = parse_every_way("[f(a=1)<|eot_id|> more", Family::Llama3, schema_of);
        assert!(whole.tool_calls[1].arguments.as_ref().is_err_and(|e| !e.incomplete), "{whole:?}");
    }

    #[test]
    fn reasoning_and_content_are_sent_as_they_come() {
        let schema_of: SchemaOf<'_> = &|_| None;
        let mut s = Stream::new(Family::Qwen3);
        assert_eq!(s.push(b"<think>\nLet me", schema_of), [Event::Reasoning("Let me".into())]);
        // A cut end tag is held back, then given back when it is not one.
        assert_eq!(s.push(b" see </thi", schema_of), [Event::Reasoning(" see".into())]);
        assert_eq!(
            s.push(b"ng>.</think>\n\nIt is", schema_of),
            [Event::Content("It is".into()), Event::Reasoning(" </thing>.".into())]
        );
        assert_eq!(s.push(b" 12 \xc2", schema_of), [Event::Content(" 12".into())]);
        assert_eq!(s.push(b"\xb0C.<tool_", schema_of), [Event::Content(" °C.".into())]);
        assert_eq!(s.push(b"call>", schema_of), []);
        let (parsed, rest) = s.finish_events(schema_of).unwrap();
        assert_eq!(parsed.content.as_deref(), Some("It is 12 °C."));
        assert_eq!(parsed.reasoning_content.as_deref(), Some("Let me see </thing>."));
        assert!(matches!(&rest[..], [Event::Call(c)] if c.arguments.as_ref().is_err_and(|e| e.incomplete)));
    }

    #[test]
    fn text_before_any_marker_waits_for_one_as_it_may_be_reasoning_the_prompt_opened() {
        let schema_of: SchemaOf<'_> = &|_| None;
        let mut s = Stream::new(Family::Qwen3);
        assert_eq!(s.push(b"Paris, I think.", schema_of), []);
        assert_eq!(
            s.push(b"</think>\n\nIt is", schema_of),
            [Event::Content("It is".into()), Event::Reasoning("Paris, I think.".into())]
        );
        let mut s = Stream::new(Family::Gemma4);
        assert_eq!(s.push(b"It is 12 <", schema_of), [Event::Content("It is 12".into())]);
    }

    #[test]
    fn a_stream_refuses_bytes_that_are_not_utf8() {
        let mut s = Stream::new(Family::Qwen3);
        assert_eq!(s.push(b"<tool_call>\xff", &|_| None), Vec::new());
        assert!(s.finish(&|_| None).is_err());
    }
}
