//! FunctionGemma's call syntax: `call:NAME{key:<escape>text<escape>,n:15,flag:true,obj:{…},list:[…]}`,
//! optionally wrapped in `<start_function_call>…<end_function_call>`, and its function
//! declarations: `<start_function_declaration>declaration:NAME{description:…,parameters:{…}}<end_function_declaration>`.
//!
//! Strings are wrapped in `<escape>` tokens and stay strings; numbers and booleans
//! are typed; objects and arrays recurse.

use serde_json::{Map, Number, Value};

use super::raw::{Builder, Cursor, SchemaOf, Units, marker_start};
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

/// A call that could not be read: malformed, or cut off before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {offset})")]
pub struct CallError {
    /// The function's name, when it could be read (empty otherwise).
    pub name: String,
    /// Where the problem is, in bytes from the start of the text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
    /// The call was cut off (a start tag with no end tag, or text that ends inside the
    /// call): nothing of it may run.
    pub incomplete: bool,
}

/// Every call in `text`, in order, each parsed on its own: a malformed call is an error
/// in its place and the calls around it still parse.
///
/// - From the first `<start_function_call>` on, only the wrapped blocks are read: each
///   must hold exactly one `call:NAME{…}`; a start tag with no end tag (before the next
///   start tag or the end of the text) is an incomplete call.
/// - Before it (or in text without one), a bare `call:NAME{` counts only at the start of a
///   line (after spaces), so prose such as "place a call: 555" or "recall:x" is not a call.
///   (So a call is decided by the text before it: a stream sends it as soon as it ends.)
///   A bare call that fails on a later line than its first (its string held lines) goes
///   on there: the lines between are its text, not calls.
/// - A call cut off inside an `<escape>` string (a block whose end tag, or the next start
///   tag, comes while a string is open; a bare call that fails inside a string) is an
///   error, and so is every call after it, each naming its tool: a string is written as it
///   is, so those calls may be text the string quotes, and none of them runs. (A call cut
///   off outside a string, or malformed inside a block that ends, is an error in its place
///   only.)
///
/// `schema_of` gives a tool's parameters schema by name; values are typed by it (a bare
/// `TRUE` is `true` for a boolean and the text `"TRUE"` for a string, `555` is the text
/// `"555"` for a string, `<escape>5<escape>` is `5` for an integer). A tool it does not know
/// gets the default typing: `true`, `false`, `null` and numbers typed, other words text.
pub fn scan_calls(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> Vec<Result<Call, CallError>> {
    let first = text.find(START_CALL).unwrap_or(text.len());
    let (mut found, cut) = bare_calls(&text[..first], schema_of);
    found.extend(wrapped_calls(text, cut, schema_of));
    found
}

/// Every call in `text`, all of which must parse (manifest examples; `packs lint`). Values
/// get the default typing (see [`scan_calls`]).
pub fn parse_calls(text: &str) -> Result<Vec<Call>, ParseError> {
    scan_calls(text, &|_| None)
        .into_iter()
        .map(|c| c.map_err(|e| ParseError { offset: e.offset, message: e.message }))
        .collect()
}

/// FunctionGemma text as a [`raw::Parsed`](super::raw::Parsed): the calls of
/// [`scan_calls`], and as content the text outside the `<start_function_call>` blocks and
/// the bare calls that parsed. FunctionGemma has no reasoning. Read unit by unit (a line,
/// a bare call, a block): a call is sent at its closing `}` (bare) or its
/// `<end_function_call>`.
pub fn parse(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> super::raw::Parsed {
    super::raw::run_units(text, &UNITS, schema_of)
}

/// FunctionGemma read unit by unit.
pub(crate) const UNITS: Units =
    Units { end_of_turn: &["<end_of_turn>"], held: &[START_CALL], reads_end: |_| false, step };

/// At the start of a line, before any `<start_function_call>`.
const LINE: u8 = 0;
/// Inside a line that is content, before any `<start_function_call>`.
const IN_LINE: u8 = 1;
/// From the first `<start_function_call>` on.
const WRAPPED: u8 = 2;
/// At a `<start_function_call>`.
const BLOCK: u8 = 3;
/// Added to the mode once a call was cut off inside an open `<escape>` string: every later
/// call is an error (see [`scan_calls`]).
const CUT: u8 = 4;

/// Whether an `<escape>` string is open at the end of `s` (which starts outside one).
fn escape_open(s: &str) -> bool {
    s.matches(ESCAPE).count() % 2 == 1
}

/// The error of a call (`name`, at `offset`) after a call cut off inside a string.
fn after_cut(name: String, offset: usize) -> CallError {
    CallError { name, offset, message: super::qwen3_xml::AFTER_CUT.to_owned(), incomplete: false }
}

fn add(b: &mut Builder, call: Result<Call, CallError>) {
    match call {
        Ok(c) => b.call(c.name, None, Ok(c.args)),
        Err(e) => b.call(
            e.name,
            None,
            Err(super::raw::CallError { message: e.message, offset: e.offset, incomplete: e.incomplete }),
        ),
    }
}

/// The next unit from `c.pos`.
fn step(text: &str, c: &mut Cursor, schema_of: SchemaOf<'_>, b: &mut Builder) -> bool {
    let pos = c.pos;
    let cut = c.mode & CUT;
    let mode = c.mode & !CUT;
    if mode == BLOCK {
        let body = pos + START_CALL.len();
        let next = c.find(0, text, body, &[START_CALL]).map(|(i, _)| i);
        let end = c.find(1, text, body, &[END_CALL]).map(|(i, _)| i).filter(|e| next.is_none_or(|n| *e < n));
        let (call, stop, resume) = match (end, next) {
            (Some(end), _) => (wrapped_block(text, body, end, schema_of), end, end + END_CALL.len()),
            (None, None) if !c.eof => {
                c.searching = true;
                return false;
            }
            (None, next) => {
                let stop = next.unwrap_or(text.len());
                (Err(cut_block(text, body, stop)), stop, stop)
            }
        };
        // Its end tag, or the next start tag, inside a string: cut off.
        let cut_here = stop < text.len() && escape_open(&text[body..stop]);
        add(b, if cut != 0 { Err(after_cut(call.map_or_else(|e| e.name, |c| c.name), pos)) } else { call });
        c.pos = resume;
        c.mode = WRAPPED | if cut_here { CUT } else { cut };
        return true;
    }
    // Searched from `pos`, which never goes back (a block's search starts past its tag).
    let first = c.find(0, text, pos, &[START_CALL]).map(|(i, _)| i);
    if mode == WRAPPED {
        let Some(open) = first else {
            let end = if c.eof { text.len() } else { pos + marker_start(&text[pos..], UNITS.held) };
            b.text(&text[pos..end]);
            c.pos = end;
            return end > pos;
        };
        b.text(&text[pos..open]);
        c.pos = open;
        c.mode = BLOCK | cut;
        return true;
    }
    // Before any start tag: lines, and bare calls at their start.
    let (region, whole) = match first {
        Some(f) => (f, true),
        None => (text.len(), c.eof),
    };
    if pos >= region {
        if first.is_some() {
            c.mode = BLOCK | cut;
            return true;
        }
        return false;
    }
    if mode == IN_LINE {
        let line = &text[pos..region];
        let end = match line.find('\n') {
            Some(i) => {
                c.mode = LINE | cut;
                pos + i + 1
            }
            None if whole => region,
            None => pos + marker_start(line, UNITS.held),
        };
        b.text(&text[pos..end]);
        c.pos = end;
        return end > pos;
    }
    let line = &text[pos..region];
    let start = pos + (line.len() - line.trim_start_matches(line_space).len());
    let head = &text[start..region];
    let bare = match head.strip_prefix("call:") {
        Some(after) => {
            let name = leading_ident(after);
            let rest = &after[name.len()..];
            let tail = rest.trim_start_matches(line_space);
            if !whole && (tail.is_empty() || name.len() == after.len()) {
                // The name, or the spaces after it, decide nothing until another character
                // comes; after `call:` alone, a few characters do.
                c.idle = match (after.is_empty(), name.len() == after.len()) {
                    (true, _) => None,
                    (false, true) => Some(ident_char),
                    (false, false) => Some(line_space),
                };
                return false;
            }
            !name.is_empty() && tail.starts_with('{')
        }
        None if !whole && "call:".starts_with(head) => {
            // Spaces at the line's start decide nothing; `call:` begun, a few characters do.
            c.idle = head.is_empty().then_some(line_space as fn(char) -> bool);
            return false;
        }
        None => false,
    };
    c.mode = IN_LINE | cut;
    if !bare {
        return true;
    }
    match one_call(&text[..region], start, true, schema_of) {
        Ok(call) => {
            // The call's text is not content; the rest of its line is.
            b.text(&text[pos..start]);
            c.pos = call.span.end;
            add(b, if cut != 0 { Err(after_cut(call.name, start)) } else { Ok(call) });
        }
        Err(e) if e.incomplete && !whole => {
            c.mode = LINE | cut;
            c.waiting = Some(pos);
            return false;
        }
        Err(e) => {
            // It failed inside a string, which may hold the lines (and calls) after it.
            if bare_cut(text, start, &e) {
                c.mode |= CUT;
            }
            if let Some(line) = failed_on_line(text, start, &e) {
                // The lines it read are its text (a string may hold a line that starts with
                // `call:`): content, and reading goes on at the line it failed on.
                b.text(&text[pos..line]);
                c.pos = line;
                if text[line..e.offset].chars().all(line_space) {
                    c.mode = LINE | (c.mode & CUT);
                }
            }
            add(b, if cut != 0 { Err(after_cut(e.name, start)) } else { Err(e) });
        }
    }
    true
}

/// Whether the bare call at `start` that failed with `e` failed inside an `<escape>` string
/// (one with no closing token before the first start tag or the end of the text): the
/// string may hold the lines after it, and any call in them is text it quotes.
fn bare_cut(text: &str, start: usize, e: &CallError) -> bool {
    escape_open(&text[start..e.offset.clamp(start, text.len())])
}

/// Where the line that the bare call at `start` failed on (with `e`) starts, when that is a
/// line after the call's first.
fn failed_on_line(text: &str, start: usize, e: &CallError) -> Option<usize> {
    text[start..e.offset.clamp(start, text.len())].rfind('\n').map(|i| start + i + 1)
}

/// The error of a block whose end tag does not come before `stop`.
fn cut_block(text: &str, body: usize, stop: usize) -> CallError {
    let block = &text[body..stop];
    let name = block.trim_start().strip_prefix("call:").map(leading_ident).unwrap_or_default();
    CallError {
        name: name.to_owned(),
        offset: body - START_CALL.len(),
        message: format!("incomplete call: `{START_CALL}` has no `{END_CALL}` (the output was cut off?)"),
        incomplete: true,
    }
}

/// The call of the block from `body` to its end tag at `end`.
fn wrapped_block(
    text: &str,
    body: usize,
    end: usize,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<Call, CallError> {
    // Parse inside the block only: nothing may reach past its end tag.
    let block = &text[..end];
    let start = body + (block[body..].len() - block[body..].trim_start().len());
    if block[start..].starts_with("call:") {
        one_call(block, start, false, schema_of).and_then(|c| {
            let rest = &block[c.span.end..];
            if rest.trim().is_empty() {
                Ok(c)
            } else {
                Err(CallError {
                    name: c.name,
                    offset: c.span.end,
                    message: format!("unexpected text after the call, before `{END_CALL}`"),
                    incomplete: false,
                })
            }
        })
    } else {
        Err(CallError {
            name: String::new(),
            offset: start,
            message: format!("expected `call:NAME{{…}}` after `{START_CALL}`"),
            incomplete: false,
        })
    }
}

/// The wrapped calls; every one an error when `cut` (a call before them was cut off inside
/// a string), and every one after a block cut off inside a string.
fn wrapped_calls(text: &str, mut cut: bool, schema_of: &dyn Fn(&str) -> Option<Value>) -> Vec<Result<Call, CallError>> {
    let mut found = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find(START_CALL) {
        let open = pos + rel + START_CALL.len();
        let next_start = text[open..].find(START_CALL).map(|i| open + i);
        // The end tag is looked for only up to the next start tag: linear in the text.
        let window = &text[open..next_start.unwrap_or(text.len())];
        let (call, stop) = match window.find(END_CALL).map(|i| open + i) {
            Some(end) => {
                pos = end + END_CALL.len();
                (wrapped_block(text, open, end, schema_of), end)
            }
            None => {
                // Cut off: read the name for the report, run nothing.
                pos = next_start.unwrap_or(text.len());
                (Err(cut_block(text, open, pos)), pos)
            }
        };
        found.push(if cut {
            Err(after_cut(call.map_or_else(|e| e.name, |c| c.name), open - START_CALL.len()))
        } else {
            call
        });
        cut |= stop < text.len() && escape_open(&text[open..stop]);
    }
    found
}

/// The bare calls in `text` (before any start tag), and whether one was cut off inside a
/// string (every call after it is then an error).
fn bare_calls(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> (Vec<Result<Call, CallError>>, bool) {
    let mut cut = false;
    let mut found = Vec::new();
    let mut line_start = 0;
    while line_start < text.len() {
        let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        let start = line_start + (line.len() - line.trim_start().len());
        let mut next = line_end + 1;
        if let Some(after) = text[start..line_end].strip_prefix("call:") {
            let name = leading_ident(after);
            if !name.is_empty() && after[name.len()..].trim_start().starts_with('{') {
                let call = one_call(text, start, true, schema_of);
                if let Ok(c) = &call {
                    // A call may span lines (strings hold newlines): go on after it.
                    next = text[c.span.end..].find('\n').map_or(text.len(), |i| c.span.end + i + 1);
                }
                if let Err(e) = &call
                    && let Some(line) = failed_on_line(text, start, e)
                {
                    // Go on at the line it failed on (see `step`).
                    next = if text[line..e.offset].chars().all(line_space) {
                        line
                    } else {
                        text[e.offset..].find('\n').map_or(text.len(), |i| e.offset + i + 1)
                    };
                }
                let was_cut = cut;
                cut |= call.as_ref().is_err_and(|e| bare_cut(text, start, e));
                found.push(if was_cut {
                    Err(after_cut(call.map_or_else(|e| e.name, |c| c.name), start))
                } else {
                    call
                });
            }
        }
        line_start = next;
    }
    (found, cut)
}

/// One function response in a transcript: `response:NAME{…}` in
/// `<start_function_response>…<end_function_response>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The function's name.
    pub name: String,
    /// The response's members (empty when it does not parse).
    pub value: Map<String, Value>,
    /// Byte offset of its start tag.
    pub offset: usize,
}

/// Opens a function response.
pub const START_RESPONSE: &str = "<start_function_response>";

/// Every function response in `text`, in order (a transcript of earlier turns).
pub fn scan_responses(text: &str) -> Vec<Response> {
    let mut found = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find(START_RESPONSE) {
        let offset = pos + rel;
        let start = offset + START_RESPONSE.len();
        pos = start;
        let Some(after) = text[start..].trim_start().strip_prefix("response:") else { continue };
        let name = leading_ident(after).to_owned();
        let mut p = Parser { text, pos: text.len() - after.len() + name.len(), depth: 0, escape: ESCAPE };
        let value = if p.eat("{") { p.members('}', None).unwrap_or_default() } else { Map::new() };
        pos = pos.max(p.pos);
        found.push(Response { name, value, offset });
    }
    found
}

/// The name at the start of `s`: a letter or `_`, then letters, digits, `_`, `-`, `.`.
fn leading_ident(s: &str) -> &str {
    if !s.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return "";
    }
    let len = s.find(|c: char| !ident_char(c)).unwrap_or(s.len());
    &s[..len]
}

/// A character of a name after its first.
fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Whitespace within a line.
fn line_space(c: char) -> bool {
    c.is_whitespace() && c != '\n'
}

/// The call `call:NAME{…}` at byte `start` of `text` (which ends where the call must end).
/// `cut`: reaching the end of `text` means the call was cut off (bare calls), not that it
/// is malformed (a block closed by its end tag).
fn one_call(text: &str, start: usize, cut: bool, schema_of: &dyn Fn(&str) -> Option<Value>) -> Result<Call, CallError> {
    call_with(text, start, cut, ESCAPE, schema_of)
}

/// [`one_call`] with strings wrapped in `escape` (Gemma 4 writes `<|"|>`).
pub(crate) fn call_with(
    text: &str,
    start: usize,
    cut: bool,
    escape: &str,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<Call, CallError> {
    let mut p = Parser { text, pos: start + "call:".len(), depth: 0, escape };
    let name = p.ident().unwrap_or_default();
    let fail = |e: ParseError, name: &str| {
        let incomplete = cut && e.offset >= text.len();
        CallError {
            name: name.to_owned(),
            incomplete,
            message: if incomplete { format!("incomplete call: {}", e.message) } else { e.message },
            offset: e.offset,
        }
    };
    if name.is_empty() {
        return Err(fail(p.error("expected a function name after `call:`"), ""));
    }
    let schema = schema_of(&name);
    p.expect("{").map_err(|e| fail(e, &name))?;
    let args = p.members('}', schema.as_ref()).map_err(|e| fail(e, &name))?;
    Ok(Call { name, args, span: start..p.pos })
}

struct Parser<'a> {
    text: &'a str,
    /// The token that wraps strings: `<escape>` here, `<|"|>` for Gemma 4.
    escape: &'a str,
    pos: usize,
    /// Objects and arrays open around the value being read.
    depth: usize,
}

/// The deepest nesting of objects and arrays a call may have: a model's text must not
/// exhaust the stack.
const MAX_DEPTH: usize = 64;

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
        if self.eat(self.escape) {
            let Some(end) = self.rest().find(self.escape) else {
                return Err(self.error(format!("unterminated name: no closing `{}`", self.escape)));
            };
            let key = self.rest()[..end].to_owned();
            self.pos += end + self.escape.len();
            return Ok(key);
        }
        self.ident()
    }

    /// `key:value,...` up to `close`; `schema` (an object schema) types each member.
    fn members(&mut self, close: char, schema: Option<&Value>) -> Result<Map<String, Value>, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("objects and arrays nest deeper than {MAX_DEPTH}")));
        }
        let result = self.members_inner(close, schema);
        self.depth -= 1;
        result
    }

    fn members_inner(&mut self, close: char, schema: Option<&Value>) -> Result<Map<String, Value>, ParseError> {
        let mut map = Map::new();
        let close_s = close.to_string();
        if self.eat(&close_s) {
            return Ok(map);
        }
        loop {
            self.skip_ws();
            let at = self.pos;
            let key = self.key()?;
            if key.is_empty() {
                return Err(self.error("expected an argument name"));
            }
            if map.contains_key(&key) {
                return Err(ParseError { offset: at, message: format!("`{key}` is given twice") });
            }
            self.expect(":")?;
            let member = schema.and_then(|s| s.get("properties")?.get(&key));
            let value = self.value(member)?;
            map.insert(key, value);
            if self.eat(",") {
                continue;
            }
            self.expect(&close_s)?;
            return Ok(map);
        }
    }

    /// One value, typed by `schema` when there is one (see [`scan_calls`]).
    fn value(&mut self, schema: Option<&Value>) -> Result<Value, ParseError> {
        self.skip_ws();
        if self.eat(self.escape) {
            let Some(end) = self.rest().find(self.escape) else {
                // Where the closing token was looked for: the end of the text.
                return Err(ParseError {
                    offset: self.text.len(),
                    message: format!("unterminated string: no closing `{}`", self.escape),
                });
            };
            let s = self.rest()[..end].to_owned();
            self.pos += end + self.escape.len();
            let types = Types::of(schema);
            // A string where the schema wants a number or a boolean (and no string).
            return Ok(match types {
                Some(t) if !t.string => t.word(&s).unwrap_or(Value::String(s)),
                _ => Value::String(s),
            });
        }
        if self.eat("{") {
            return self.members('}', schema).map(Value::Object);
        }
        if self.eat("[") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(self.error(format!("objects and arrays nest deeper than {MAX_DEPTH}")));
            }
            let items = self.items(schema.and_then(|s| s.get("items")));
            self.depth -= 1;
            return items.map(Value::Array);
        }
        // A bare word ends at `,`, `}`, `]` or the end of its line: scanning stays linear
        // however many unfinished calls a text holds.
        let len = self.rest().find([',', '}', ']', '\n']).unwrap_or(self.rest().len());
        let word = self.rest()[..len].trim();
        if word.is_empty() {
            return Err(self.error("expected a value"));
        }
        let value = match Types::of(schema) {
            Some(t) => t.word(word).unwrap_or_else(|| Value::String(word.to_owned())),
            None => default_word(word),
        };
        self.pos += len;
        Ok(value)
    }
}

impl Parser<'_> {
    /// The items of an array after its `[`, up to its `]`.
    fn items(&mut self, item: Option<&Value>) -> Result<Vec<Value>, ParseError> {
        let mut items = Vec::new();
        if self.eat("]") {
            return Ok(items);
        }
        loop {
            items.push(self.value(item)?);
            if self.eat(",") {
                continue;
            }
            self.expect("]")?;
            return Ok(items);
        }
    }
}

/// The JSON types a schema allows, for typing a bare word.
#[derive(Debug, Clone, Copy, Default)]
struct Types {
    string: bool,
    boolean: bool,
    integer: bool,
    number: bool,
    null: bool,
}

impl Types {
    /// The types `schema`'s `type` names; None when it names none (any value).
    fn of(schema: Option<&Value>) -> Option<Self> {
        let names: Vec<&str> = match schema?.get("type")? {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        let mut t = Self::default();
        for n in names {
            match n {
                "string" => t.string = true,
                "boolean" => t.boolean = true,
                "integer" => t.integer = true,
                "number" => t.number = true,
                "null" => t.null = true,
                _ => {}
            }
        }
        Some(t)
    }

    /// `word` as a value of one of these types, the text itself when a string is allowed,
    /// or None when none fits (the schema's validation then says what is wrong).
    fn word(self, word: &str) -> Option<Value> {
        if self.null && word == "null" {
            return Some(Value::Null);
        }
        if self.boolean {
            if word.eq_ignore_ascii_case("true") {
                return Some(Value::Bool(true));
            }
            if word.eq_ignore_ascii_case("false") {
                return Some(Value::Bool(false));
            }
        }
        if self.integer
            && let Some(i) = super::raw::integer(word)
        {
            return Some(i);
        }
        if self.number
            && let Some(n) = number(word)
        {
            return Some(n);
        }
        self.string.then(|| Value::String(word.to_owned()))
    }
}

/// A JSON number: an integer when it is one, else a finite float.
fn number(word: &str) -> Option<Value> {
    super::raw::integer(word).or_else(|| word.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number))
}

/// A bare word with no schema to go by: `true`, `false` (any case), `null` and numbers are
/// typed; any other word is text (models sometimes leave out `<escape>`).
fn default_word(word: &str) -> Value {
    if word.eq_ignore_ascii_case("true") {
        Value::Bool(true)
    } else if word.eq_ignore_ascii_case("false") {
        Value::Bool(false)
    } else if word == "null" {
        Value::Null
    } else {
        number(word).unwrap_or_else(|| Value::String(word.to_owned()))
    }
}

/// What an `<escape>` inside a string value becomes in [`render_value`]: nothing can quote
/// the token, and an error message that quotes the model's text must still parse.
pub const ESCAPE_SHOWN: &str = "[escape]";

/// Render a value in FunctionGemma's syntax (strings wrapped in `<escape>`, any `<escape>`
/// inside a string shown as [`ESCAPE_SHOWN`]: the result always parses back).
pub fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{ESCAPE}{}{ESCAPE}", s.replace(ESCAPE, ESCAPE_SHOWN)),
        Value::Object(m) => {
            let inner: Vec<String> = m.iter().map(|(k, v)| format!("{}:{}", key_text(k), render_value(v))).collect();
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
        let mut p = Parser { text, pos: start + "declaration:".len(), depth: 0, escape: ESCAPE };
        let name = p.ident()?;
        if name.is_empty() {
            return Err(p.error("expected a function name after `declaration:`"));
        }
        p.expect("{")?;
        let body = p.members('}', None)?;
        found.push(Declaration { name, body, span: start..p.pos });
        pos = p.pos;
    }
    Ok(found)
}

/// One tool's declaration, wrapped in `<start_function_declaration>…<end_function_declaration>`.
pub fn tool(t: &Tool) -> String {
    t.with_describe(|d| declare(t.name(), t.description(), &d.parameters))
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

/// An object key as written in a value: bare when it is a name the parser reads back
/// whole, else in `<escape>` tokens.
fn key_text(k: &str) -> String {
    if !k.is_empty() && leading_ident(k).len() == k.len() { k.to_owned() } else { esc(k) }
}

/// A string in `<escape>` tokens, any `<escape>` inside it removed.
fn esc(s: &str) -> String {
    format!("{ESCAPE}{}{ESCAPE}", s.replace(ESCAPE, ""))
}

#[cfg(test)]
mod tests {
    use super::super::raw::Family;
    use super::super::raw::tests::parse_every_way;
    use super::*;
    use serde_json::json;

    fn scan(text: &str) -> Vec<Result<Call, CallError>> {
        scan_calls(text, &|_| None)
    }

    #[test]
    fn parses_wrapped_calls_with_typed_values() {
        let text = "User: hi\n<start_function_call>call:get_weather{location:<escape>Half Moon Bay, CA<escape>,days:3,metric:true,opts:{a:[1,<escape>x<escape>]}}<end_function_call> and <start_function_call>call:now{}<end_function_call>";
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
    fn from_the_first_tag_on_only_tagged_calls_count() {
        // A bare call before the first tag counts (what comes later cannot undo a call a
        // stream already ran); after it, only tagged calls do.
        let text = "call:first{}\n<start_function_call>call:a{n:1}<end_function_call>\ncall:b{}";
        let calls = parse_calls(text).unwrap();
        assert_eq!(calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["first", "a"]);
        let p = parse_every_way(text, Family::Functiongemma, &|_| None);
        assert_eq!(p.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["first", "a"]);
        assert_eq!(p.content.as_deref(), Some("call:b{}"));
    }

    #[test]
    fn a_malformed_call_is_an_error_in_its_place_and_the_others_still_parse() {
        let text = "<start_function_call>call:a{n:1}<end_function_call>\
                    <start_function_call>call:c{n:2} trailing<end_function_call>\
                    <start_function_call>nonsense<end_function_call>\
                    <start_function_call>call:d{n:3}<end_function_call>\
                    <start_function_call>call:b{s:<escape>open}<end_function_call>\
                    <start_function_call>call:e{n:4}<end_function_call>";
        let found = scan(text);
        assert_eq!(found.len(), 6);
        assert_eq!(found[0].as_ref().unwrap().name, "a");
        assert!(found[1].as_ref().unwrap_err().message.contains("unexpected text"));
        assert!(found[2].as_ref().unwrap_err().message.contains("expected `call:NAME"));
        assert_eq!(found[3].as_ref().unwrap().name, "d");
        let b = found[4].as_ref().unwrap_err();
        assert_eq!((b.name.as_str(), b.incomplete), ("b", false));
        assert!(b.message.contains("unterminated"), "{b}");
        // `b`'s block ends inside its open string, so its end tag, and `e`, may be text the
        // string quotes: `e` does not run (it did before a call quoted in a string could run;
        // see `a_call_quoted_in_a_string_never_runs`).
        let e = found[5].as_ref().unwrap_err();
        assert_eq!(e.name, "e");
        assert!(e.message.contains("follows a call that the start of another call cut off"), "{e}");
        assert_eq!(as_parsed(&found), parse_every_way(text, Family::Functiongemma, &|_| None).tool_calls);
    }

    /// The calls of [`scan_calls`] as the unit parse gives them.
    fn as_parsed(found: &[Result<Call, CallError>]) -> Vec<super::super::raw::ToolCall> {
        let mut b = Builder::default();
        for c in found {
            add(&mut b, c.clone());
        }
        b.finish().tool_calls
    }

    #[test]
    fn a_call_quoted_in_a_string_never_runs() {
        let run = |text: &str| {
            let found = scan(text);
            assert_eq!(as_parsed(&found), parse_every_way(text, Family::Functiongemma, &|_| None).tool_calls, "{text}");
            found
        };
        // The block ends at the quoted end tag, inside the string: `write` is an error, and
        // the quoted `rm` does not run.
        let found = run(
            "<start_function_call>call:write{text:<escape>x<end_function_call><start_function_call>call:rm{}<end_function_call><escape>}<end_function_call>",
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].as_ref().unwrap_err().name, "write");
        let rm = found[1].as_ref().unwrap_err();
        assert_eq!(rm.name, "rm");
        assert!(rm.message.contains("follows a call that the start of another call cut off"), "{rm}");
        // A start tag inside an open string, and what follows, run nothing.
        let found = run(
            "<start_function_call>call:write{text:<escape>x<start_function_call>call:rm{}<end_function_call><escape>}<end_function_call>\n<start_function_call>call:ls{}<end_function_call>",
        );
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found.iter().all(Result::is_err), "{found:?}");
        assert_eq!(
            (found[1].as_ref().unwrap_err().name.as_str(), found[2].as_ref().unwrap_err().name.as_str()),
            ("rm", "ls")
        );
        // A bare call whose string runs to the first start tag: the tagged `rm` is an error.
        // One whose string holds a line that starts with `call:`: that line is its text.
        for (text, n) in [
            ("call:write{text:<escape>x\n<start_function_call>call:rm{}<end_function_call><escape>}", 2),
            ("call:write{text:<escape>x\ncall:rm{}\n<escape>", 1),
            ("call:write{text:<escape>x\ncall:rm{}\n", 1),
        ] {
            let found = run(text);
            assert_eq!(found.len(), n, "{text}: {found:?}");
            assert!(found.iter().all(Result::is_err), "{text}: {found:?}");
        }
    }

    #[test]
    fn well_formed_calls_and_a_malformed_call_that_ended_still_run() {
        let text = "call:f{s:<escape>a<escape>}\n<start_function_call>call:g{s:<escape>b<escape>}<end_function_call><start_function_call>call:h{}<end_function_call>";
        let names: Vec<_> = scan(text).into_iter().map(|c| c.unwrap().name).collect();
        assert_eq!(names, ["f", "g", "h"]);
        // Ended by its end tag outside any string: an error in its place only.
        let text = "<start_function_call>call:g{s:<escape>b<escape> x}<end_function_call><start_function_call>call:h{}<end_function_call>";
        let found = scan(text);
        assert!(found[0].is_err() && found[1].as_ref().is_ok_and(|c| c.name == "h"), "{found:?}");
        // A start tag outside a string cuts the call before it off (the output broke off and
        // a new call began): the new call runs.
        let found = scan("<start_function_call>call:a{n:<start_function_call>call:b{}<end_function_call>");
        assert!(found[0].is_err() && found[1].as_ref().is_ok_and(|c| c.name == "b"), "{found:?}");
        // So does a bare call that failed outside a string.
        let found = scan("call:a{n 1}\ncall:b{}");
        assert!(found[0].is_err() && found[1].as_ref().is_ok_and(|c| c.name == "b"), "{found:?}");
    }

    #[test]
    fn an_unterminated_start_tag_is_an_incomplete_call() {
        let found =
            scan("<start_function_call>call:a{n:1}<end_function_call><start_function_call>call:rm{path:<escape>/tmp/x");
        assert_eq!(found.len(), 2);
        assert!(found[0].is_ok());
        let e = found[1].as_ref().unwrap_err();
        assert!(e.incomplete && e.name == "rm", "{e:?}");
        // A start tag followed by another start tag before any end tag.
        let found = scan("<start_function_call>call:a{<start_function_call>call:b{}<end_function_call>");
        assert!(found[0].as_ref().unwrap_err().incomplete);
        assert_eq!(found[1].as_ref().unwrap().name, "b");
        // A bare call cut off at the end of the text.
        let e = scan("call:a{n:1,s:<escape>half").remove(0).unwrap_err();
        assert!(e.incomplete, "{e:?}");
    }

    #[test]
    fn hostile_text_is_refused_without_exhausting_the_stack_or_the_clock() {
        let deep = format!("call:f{{a:{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let e = scan(&deep).remove(0).unwrap_err();
        assert!(e.message.contains("nest deeper than 64"), "{e:?}");
        let deep = format!("<start_function_call>call:f{{{}<end_function_call>", "a:{".repeat(100_000));
        assert!(scan(&deep).remove(0).is_err());
        // Many start tags and no end tag, or many unfinished bare calls: each is reported,
        // and reading stays linear in the text (a quadratic scan would take minutes here).
        let tags = START_CALL.repeat(50_000);
        let found = scan(&tags);
        assert_eq!(found.len(), 50_000);
        assert!(found.iter().all(|c| c.as_ref().is_err_and(|e| e.incomplete)));
        let lines = "call:f{a:b\n".repeat(100_000);
        assert_eq!(scan(&lines).len(), 100_000);
        // Multi-byte text around every token: no slicing inside a character.
        let text = "é<start_function_call>ü call:ö{ä:<escape>ß<escape>}€<end_function_call>✓call:x{";
        let found = scan(text);
        assert!(found[0].is_err(), "{found:?}");
    }

    #[test]
    fn bare_calls_count_only_at_the_start_of_a_line() {
        for prose in ["place a call: 555", "recall:x", "Please recall:note{x}", "call: me maybe", "so call:f{} later"] {
            assert_eq!(scan(prose), vec![], "{prose}");
        }
        let found = scan("Sure.\n  call:f{s:<escape>two\nlines<escape>}\ncall:g{}");
        let names: Vec<_> = found.iter().map(|c| c.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "phone": {"type": "string"}, "loud": {"type": "boolean"}, "n": {"type": "integer"},
            "x": {"type": ["number", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
            "o": {"type": "object", "properties": {"flag": {"type": "boolean"}}}
        }});
        let found = scan_calls(
            "call:f{phone:555,loud:TRUE,n:<escape>7<escape>,x:1.50,tags:[1,true],o:{flag:False},other:TRUE}",
            &|name| (name == "f").then(|| schema.clone()),
        );
        assert_eq!(
            Value::Object(found[0].as_ref().unwrap().args.clone()),
            json!({"phone": "555", "loud": true, "n": 7, "x": 1.5, "tags": ["1", "true"], "o": {"flag": false}, "other": true})
        );
        // A word no schema type fits stays text, for validation to report.
        let found = scan_calls("call:f{n:many}", &|_| Some(schema.clone()));
        assert_eq!(found[0].as_ref().unwrap().args["n"], json!("many"));
    }

    #[test]
    fn strings_keep_commas_braces_and_numbers() {
        let calls = parse_calls("call:f{s:<escape>a, b} [c] 15<escape>,n:-2.5}").unwrap();
        assert_eq!(Value::Object(calls[0].args.clone()), json!({"s": "a, b} [c] 15", "n": -2.5}));
        let v = json!({"s": "a <escape> b", "weird key": 1});
        let text = format!("call:f{}", render_value(&v));
        let calls = parse_calls(&text).unwrap();
        assert_eq!(Value::Object(calls[0].args.clone()), json!({"s": "a [escape] b", "weird key": 1}));
        let calls = parse_calls("call:f{s:<escape>a, b} [c] 15<escape>,n:-2.5}").unwrap();
        assert_eq!(Value::Object(calls[0].args.clone()), json!({"s": "a, b} [c] 15", "n": -2.5}));
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse_calls("call:f{s:<escape>open}").unwrap_err();
        assert!(e.message.contains("unterminated"));
        assert!(parse_calls("call:f{s 1}").is_err());
        assert!(parse_calls("<start_function_call>call:{}<end_function_call>").is_err());
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
