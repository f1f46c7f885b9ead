//! Llama 3.1–3.3, 3.2's lightweight models and Llama 4 raw output, as Meta's prompt-format
//! pages (llama-models, `models/llama3_1/prompt_format.md`, `llama3_2/text_prompt_format.md`,
//! `llama4/prompt_format.md`) and its decoder (`llama3/tool_utils.py`, `llama4/chat_format.py`)
//! have them:
//!
//! - a JSON call `{"name": NAME, "parameters": {…}}` (3.1–3.3's zero-shot format; also with
//!   `"type": "function"`, or `"arguments"`), as the whole message; several follow one
//!   another, separated by whitespace or `;`;
//! - a Python list of calls `[get_weather(city="Paris"), f(n=1)]` (3.2's and 4's
//!   "pythonic" format), the values Python literals (see `python.rs`);
//! - after `<|python_tag|>` (Llama 4: `<|python_start|>`, ended by `<|python_end|>`), the
//!   ipython environment: one of the above, a built-in tool's call
//!   `brave_search.call(query="…")` (the call `brave_search` with its keyword arguments), or
//!   else Python code for the code interpreter: the call `code_interpreter` with
//!   `{"code": …}`, the code running to `<|eom_id|>` (or any end token).
//!
//! A JSON or pythonic call counts at the start of the text or after the tag; elsewhere it
//! is content. Text after the calls is content. Read unit by unit: each call is sent as
//! soon as it is whole (its closing `}` or `)`; a code body at its end token).

use serde_json::{Map, Value};

use super::python;
use super::raw::{
    Builder, Cursor, Parsed, SchemaOf, Units, error, json_call, json_read_at, marker_start, name_in_prefix, run_units,
    space,
};

/// Starts a call in the ipython environment (Llama 3).
pub(crate) const PYTHON_TAG: &str = "<|python_tag|>";
/// Starts a call in the ipython environment (Llama 4).
pub(crate) const PYTHON_START: &str = "<|python_start|>";
/// Ends Llama 4's ipython body.
const PYTHON_END: &str = "<|python_end|>";
/// The end-of-turn and end-of-message tokens an output may still end with (Llama 4's too).
const END_OF_TURN: &[&str] = &["<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|eom|>"];
/// What ends a code interpreter's code.
const CODE_ENDS: &[&str] = &["<|eom_id|>", "<|eot_id|>", "<|eom|>", "<|eot|>", PYTHON_END];
/// The tags that open the ipython environment.
const TAGS: &[&str] = &[PYTHON_TAG, PYTHON_START];
/// The markers that hold text back at the end of what came so far.
const HELD: &[&str] = &[PYTHON_TAG, PYTHON_START, PYTHON_END];

/// Llama read unit by unit.
pub(crate) const UNITS: Units = Units { end_of_turn: END_OF_TURN, held: HELD, reads_end: |c| c.mode == CODE, step };

/// What the next unit is.
const START: u8 = 0;
const CONTENT: u8 = 1;
const BODY: u8 = 2;
const JSON: u8 = 3;
const LIST: u8 = 4;
const BUILTIN: u8 = 5;
const CODE: u8 = 6;
const AFTER: u8 = 7;
const LIST_NEXT: u8 = 8;
const LIST_SEP: u8 = 10;
const DONE: u8 = 9;

/// Whether `text` starts (after whitespace) with `{"name"` or `{"type"`: a JSON call.
pub(crate) fn starts_like_a_call(text: &str) -> bool {
    json_start(text) == Some(true)
}

/// Whether `text` starts (after whitespace) with `[NAME(`: a pythonic list of calls.
pub(crate) fn starts_like_a_list(text: &str) -> bool {
    list_start(text) == Some(true)
}

/// Whether `s` starts a JSON call; None while the text is too short to say.
fn json_start(s: &str) -> Option<bool> {
    let Some(rest) = s.trim_start().strip_prefix('{') else {
        return if s.trim_start().is_empty() { None } else { Some(false) };
    };
    let rest = rest.trim_start();
    for key in ["\"name\"", "\"type\""] {
        if rest.starts_with(key) {
            return Some(true);
        }
        if key.starts_with(rest) {
            return None;
        }
    }
    Some(false)
}

/// Whether `s` starts a pythonic list of calls; None while the text is too short to say.
fn list_start(s: &str) -> Option<bool> {
    let Some(rest) = s.trim_start().strip_prefix('[') else {
        return if s.trim_start().is_empty() { None } else { Some(false) };
    };
    python::starts_call(rest, false)
}

/// While neither [`json_start`] nor [`list_start`] decides `s`: the characters that, added
/// to it, decide nothing (see [`python::undecided_run`]); None when a few characters do.
fn start_run(s: &str) -> Option<fn(char) -> bool> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('[') {
        return python::undecided_run(rest, false);
    }
    let rest = s.strip_prefix('{').unwrap_or(s);
    rest.trim_start().is_empty().then_some(space as fn(char) -> bool)
}

/// Parse Llama text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    run_units(text, &UNITS, &|_| None)
}

/// The next unit from `c.pos`.
fn step(text: &str, c: &mut Cursor, _: SchemaOf<'_>, b: &mut Builder) -> bool {
    let pos = c.pos;
    let rest = &text[pos..];
    // Past the whitespace at `pos` (read only by the steps that skip it).
    let at = || pos + (rest.len() - rest.trim_start().len());
    match c.mode {
        START => {
            let eof = c.eof;
            let decided = |d: Option<bool>| if eof { d.unwrap_or(false) } else { d.is_some_and(|x| x) };
            let (json, list) = (json_start(rest), list_start(rest));
            if decided(json) {
                c.mode = JSON;
            } else if decided(list) {
                c.mode = LIST;
            } else if c.eof || (json.is_some() && list.is_some()) {
                c.mode = CONTENT;
            } else {
                c.idle = start_run(rest);
                return false;
            }
            true
        }
        CONTENT => {
            if let Some((tag, marker)) = c.find(0, text, pos, TAGS) {
                b.text(&text[pos..tag]);
                c.pos = tag + marker.len();
                c.mode = BODY;
                return true;
            }
            let end = if c.eof { text.len() } else { pos + marker_start(rest, HELD) };
            b.text(&text[pos..end]);
            c.pos = end;
            end > pos
        }
        BODY => {
            let r = rest.trim_start();
            let kind = if r.is_empty() {
                if !c.eof {
                    c.idle = Some(space);
                    return false;
                }
                let message = format!("expected a call after `{PYTHON_TAG}`");
                b.call("", None, Err(error(message, pos, true)));
                c.mode = DONE;
                return true;
            } else if r.starts_with('{') {
                JSON
            } else if r.starts_with('[') {
                match list_start(r) {
                    Some(true) => LIST,
                    None if !c.eof => {
                        c.idle = start_run(r);
                        return false;
                    }
                    _ => CODE,
                }
            } else {
                match python::starts_call(r, true) {
                    Some(true) => BUILTIN,
                    None if !c.eof => {
                        c.idle = python::undecided_run(r, true);
                        return false;
                    }
                    _ => CODE,
                }
            };
            c.mode = kind;
            true
        }
        JSON => match json_read_at(text, pos) {
            Ok((v, end)) => {
                let name = v.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
                match json_call(&v, &["parameters", "arguments"], pos) {
                    Ok((name, args)) => b.call(name, None, Ok(args)),
                    Err(e) => b.call(name, None, Err(e)),
                }
                c.pos = end;
                c.mode = AFTER;
                true
            }
            Err((e, _)) if e.incomplete && !c.eof => {
                c.waiting = Some(pos);
                false
            }
            Err((e, stop)) => {
                // Named from the text the JSON was read in: what follows where it stopped
                // parsing is not part of it (and a stream has not seen it yet).
                b.call(name_in_prefix(&text[pos..stop]), None, Err(e));
                c.mode = DONE;
                true
            }
        },
        LIST => {
            // Past the `[`: the first call.
            c.pos = at() + 1;
            c.mode = LIST_NEXT;
            true
        }
        LIST_NEXT => {
            let at = at();
            let r = &text[at..];
            if r.is_empty() && !c.eof {
                c.idle = Some(space);
                return false;
            }
            if r.starts_with(']') {
                c.pos = at + 1;
                c.mode = AFTER;
                return true;
            }
            match python_call(text, at, c, b) {
                None => false,
                Some(Ok(end)) => {
                    c.pos = end;
                    c.mode = LIST_SEP;
                    true
                }
                Some(Err(())) => {
                    c.mode = DONE;
                    true
                }
            }
        }
        LIST_SEP => {
            let at = at();
            let r = &text[at..];
            if r.is_empty() && !c.eof {
                c.idle = Some(space);
                return false;
            }
            if r.is_empty() {
                b.call("", None, Err(error("the list of calls has no `]`", at, true)));
                c.mode = DONE;
            } else if r.starts_with(',') {
                c.pos = at + 1;
                c.mode = LIST_NEXT;
            } else if r.starts_with(']') {
                c.pos = at;
                c.mode = LIST_NEXT;
            } else {
                b.call("", None, Err(error("expected `,` or `]` after a call in the list", at, false)));
                c.mode = DONE;
            }
            true
        }
        BUILTIN => match python_call(text, at(), c, b) {
            None => false,
            Some(Ok(end)) => {
                c.pos = end;
                c.mode = AFTER;
                true
            }
            Some(Err(())) => {
                c.mode = DONE;
                true
            }
        },
        CODE => {
            let (end, past) = match c.find(1, text, pos, CODE_ENDS) {
                Some((end, token)) => (end, end + token.len()),
                None if c.eof => (text.len(), text.len()),
                None => {
                    c.searching = true;
                    return false;
                }
            };
            let mut args = Map::new();
            args.insert("code".into(), Value::String(text[pos..end].trim().to_owned()));
            b.call("code_interpreter", None, Ok(args));
            c.pos = past;
            c.mode = AFTER;
            true
        }
        AFTER => {
            // Between calls: whitespace, `;`, the end of Llama 4's ipython body.
            let mut r = rest.trim_start();
            if let Some(x) = r.strip_prefix(';') {
                r = x.trim_start();
            }
            if let Some(x) = r.strip_prefix(PYTHON_END) {
                r = x.trim_start();
            }
            if !c.eof && (r.is_empty() || ([";", PYTHON_END].iter().any(|m| m.starts_with(r)))) {
                // Spaces alone decide nothing; a `;` or a tag begun, a few characters do.
                c.idle = r.is_empty().then_some(space as fn(char) -> bool);
                return false;
            }
            c.pos = text.len() - r.len();
            c.mode = if r.starts_with('{') { JSON } else { CONTENT };
            true
        }
        _ => {
            c.pos = text.len();
            false
        }
    }
}

/// The pythonic call at `at` into `b`: Some(Ok(end)) when read, Some(Err(())) when it is an
/// error (reading stops), None when the text so far does not decide it.
fn python_call(text: &str, at: usize, c: &mut Cursor, b: &mut Builder) -> Option<Result<usize, ()>> {
    match python::call_at(text, at) {
        Ok((name, args, end)) => {
            let name = name.strip_suffix(".call").map(str::to_owned).unwrap_or(name);
            b.call(name, None, Ok(args));
            Some(Ok(end))
        }
        Err(e) if e.incomplete && !c.eof => {
            c.waiting = Some(at);
            None
        }
        Err(e) => {
            let r = &text[at..];
            let n = r.find(|ch: char| !(ch.is_alphanumeric() || ch == '_')).unwrap_or(r.len());
            b.call(&r[..n], None, Err(e));
            Some(Err(()))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::Llama3, &|_| None))
    }

    #[test]
    fn the_templates_layout_parses() {
        // As the 3.1 template writes a call back: the JSON, then the end of the turn.
        let p = parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}<|eot_id|>");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]})
        );
        let p = parse(
            "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"s\": \"a\\\"b }\", \"n\": 1e2, \"z\": null}}<|eom_id|>",
        );
        assert_eq!(p["tool_calls"], json!([{"name": "f", "arguments": {"s": "a\"b }", "n": 100.0, "z": null}}]));
    }

    #[test]
    fn parallel_calls_in_order_and_the_type_form() {
        let p = parse(
            "{\"type\": \"function\", \"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": [1, \"2\"]}}\n{\"name\": \"c\", \"parameters\": {}}",
        );
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": [1, "2"]}}, {"name": "c", "arguments": {}}])
        );
    }

    #[test]
    fn text_before_the_tag_and_after_the_calls_is_content() {
        let p = parse("I'll look.\n<|python_tag|>{\"name\": \"a\", \"parameters\": {}} and then I'll say more.");
        assert_eq!(p["content"], json!("I'll look.\nand then I'll say more."));
        assert_eq!(p["tool_calls"], json!([{"name": "a", "arguments": {}}]));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        let p = parse("{\"name\": \"rm\", \"parameters\": {\"path\": \"/t");
        assert_eq!(p["tool_calls"][0]["name"], json!("rm"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true));
        let p = parse("<|python_tag|>{\"name\": \"a\", \"parameters\": [1]}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false));
        let p = parse("<|python_tag|>");
        assert!(p["tool_calls"][0]["error"].is_object(), "{p}");
    }

    #[test]
    fn a_call_that_does_not_parse_is_named_from_the_text_read_before_its_error() {
        // A `"name"` after where the JSON broke is not this call's (and a stream, which
        // sends the error as soon as it comes, has not seen it yet).
        let p = parse("{\"name\": \"f\", \"parameters\": {}}; {oops} then {\"name\": \"rm\"}");
        assert_eq!(p["tool_calls"][1]["name"], json!(""), "{p}");
        let p = parse("{\"name\": \"f\", \"parameters\": {\"a\": 1,}} and {\"name\": \"rm\"}");
        assert_eq!(p["tool_calls"][0]["name"], json!("f"), "{p}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        let p = parse("{\n\"name\": \"g\",\n\"parameters\": {\"a\": 1,}} {\"name\": \"rm\"}");
        assert_eq!(p["tool_calls"][0]["name"], json!("g"), "{p}");
    }

    #[test]
    fn pythonic_lists_as_llama_3_2_and_4_write_them() {
        // Meta's examples (llama3_2/text_prompt_format.md, llama4/prompt_format.md).
        let p = parse(
            "[get_weather(city='San Francisco', metric='celsius'), get_weather(city='Seattle', metric='celsius')]<|eot_id|>",
        );
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "San Francisco", "metric": "celsius"}},
                {"name": "get_weather", "arguments": {"city": "Seattle", "metric": "celsius"}}]})
        );
        let p = parse("[get_user_info(user_id=7890, special='black')]<|eot|>");
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "get_user_info", "arguments": {"user_id": 7890, "special": "black"}}])
        );
        let p = parse("<|python_tag|>[get_weather(city=\"San Francisco\", metric=\"celsius\")]<|eot_id|>");
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "get_weather", "arguments": {"city": "San Francisco", "metric": "celsius"}}])
        );
        // Values of every literal kind, a trailing comma, text after the list.
        let p = parse(
            "[f(s=\"a \\\"q\\\" ]) 東京\\n\", n=-3, x=1e5, b=True, z=None, l=[1, 'two'], d={'k': (1, 2)},), g()] Done.",
        );
        assert_eq!(
            p,
            json!({"content": "Done.", "reasoning_content": null, "tool_calls": [
                {"name": "f", "arguments": {"s": "a \"q\" ]) 東京\n", "n": -3, "x": 100000.0, "b": true, "z": null, "l": [1, "two"], "d": {"k": [1, 2]}}},
                {"name": "g", "arguments": {}}]})
        );
        // Cut off, malformed: errors; the calls before still read.
        let p = parse("[f(a=1), g(b='x");
        assert_eq!(p["tool_calls"][0], json!({"name": "f", "arguments": {"a": 1}}));
        assert_eq!(p["tool_calls"][1]["name"], json!("g"));
        assert_eq!(p["tool_calls"][1]["error"]["incomplete"], json!(true));
        // A list that never closes: its whole calls are calls (the whole parse's and the
        // stream's alike, which sends each at its `)`), and the missing `]` an error after them.
        let p = parse("[f(a=1)");
        assert_eq!(p["tool_calls"][0], json!({"name": "f", "arguments": {"a": 1}}), "{p}");
        assert_eq!(p["tool_calls"][1]["error"]["incomplete"], json!(true), "{p}");
        assert_eq!(
            p["tool_calls"][1]["error"]["message"],
            json!("incomplete call: the list of calls has no `]`"),
            "{p}"
        );
        let p = parse("[f(a=os.system('x'))]");
        assert_eq!(p["tool_calls"][0]["name"], json!("f"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false));
        let p = parse("[f(1)]");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false));
        // A list that is not of calls is content.
        assert_eq!(parse("[see the note] and [1, 2]")["tool_calls"], json!([]));
    }

    #[test]
    fn built_in_tools_and_the_code_interpreter() {
        // Llama 3.1's built-in tools (llama3_1/prompt_format.md).
        let p = parse("<|python_tag|>brave_search.call(query=\"latest price of 1oz gold\")<|eom_id|>");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [{"name": "brave_search", "arguments": {"query": "latest price of 1oz gold"}}]})
        );
        let p = parse("<|python_tag|>wolfram_alpha.call(query=\"100th decimal of pi\")<|eom_id|>");
        assert_eq!(p["tool_calls"], json!([{"name": "wolfram_alpha", "arguments": {"query": "100th decimal of pi"}}]));
        // Any other text after the tag is code for the code interpreter, to its end token.
        let p = parse("<|python_tag|>def is_prime(n):\n    return n > 1\n\nprint(is_prime(7))<|eom_id|>");
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "code_interpreter", "arguments": {"code": "def is_prime(n):\n    return n > 1\n\nprint(is_prime(7))"}}])
        );
        // Llama 4's ipython body.
        let p = parse("<|python_start|>[get_weather(city=\"Paris\")]<|python_end|><|eom|>");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
        );
        let p = parse("<|python_tag|>brave_search.call(query=\"x\"");
        assert_eq!(p["tool_calls"][0]["name"], json!("brave_search"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true));
    }

    #[test]
    fn each_call_is_sent_as_soon_as_it_is_whole() {
        use super::super::raw::{Event, Stream};
        let schema_of: super::super::raw::SchemaOf<'_> = &|_| None;
        let cases = [
            ("{\"name\": \"a\", \"parameters\": {\"x\": 1}}", "; {\"name\": \"b\", \"parameters\": {}}"),
            (
                "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}",
                "\n{\"name\": \"b\", \"parameters\": {}}<|eom_id|>",
            ),
            ("[a(x='1 ) ]')", ", b(y=2)]<|eot|>"),
            ("<|python_tag|>brave_search.call(query=\"a\")", "<|eom_id|>"),
            ("<|python_tag|>print(1)<|eom_id|>", "Then text."),
        ];
        for (first, second) in cases {
            let mut s = Stream::new(super::super::raw::Family::Llama3);
            let mut events = Vec::new();
            for b in first.as_bytes() {
                events.extend(s.push(&[*b], schema_of));
            }
            assert!(matches!(&events[..], [Event::Call(c)] if c.arguments.is_ok()), "{first}: {events:?}");
            let (parsed, _) = s.finish_events(schema_of).unwrap();
            assert_eq!(parsed, super::parse(first));
            parse_every_way(&format!("{first}{second}"), super::super::raw::Family::Llama3, schema_of);
        }
    }

    #[test]
    fn plain_text_and_other_json_are_content() {
        assert_eq!(
            parse("The answer is {42}."),
            json!({"content": "The answer is {42}.", "reasoning_content": null, "tool_calls": []})
        );
        assert_eq!(parse("{\"answer\": 42}")["tool_calls"], json!([]));
    }
}
