//! DeepSeek's raw output, in the layouts its chat templates write (the markers use the
//! fullwidth bar `｜` and `▁`):
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>   (V3, R1)
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>                           (V3.1)
//! <｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n<｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>   (V3.2)
//! ```
//!
//! V3 and V3.1 arguments are JSON, read as JSON before the end marker is looked for. A
//! V3.2 (DSML) parameter with `string="true"` is text, verbatim (it ends at the
//! `</｜DSML｜parameter>` followed by the next parameter or `</｜DSML｜invoke>`); one with
//! `string="false"` is JSON. Reasoning is `<think>…</think>`, or `</think>` alone when the
//! prompt opened it (V3.1 and V3.2 do); the turn ends with `<｜end▁of▁sentence｜>`.

use serde_json::{Map, Value};

use super::qwen3::{THINK_END, THINK_START};
use super::qwen3_xml::skip_ws;
use super::raw::{Builder, CallError, Parsed, Spec, cut_at, error, json_at, value_end};

/// Opens the calls (V3, V3.1).
pub(crate) const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
/// Closes the calls (V3, V3.1).
pub(crate) const CALLS_END: &str = "<｜tool▁calls▁end｜>";
/// Opens a call (V3, V3.1).
pub(crate) const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
/// Closes a call (V3, V3.1).
pub(crate) const CALL_END: &str = "<｜tool▁call▁end｜>";
/// Between a call's name (V3.1) or type (V3) and the rest.
pub(crate) const SEP: &str = "<｜tool▁sep｜>";
/// Opens the calls (V3.2, DSML).
pub(crate) const FUNCTION_CALLS: &str = "<｜DSML｜function_calls>";
/// Closes the calls (V3.2).
pub(crate) const FUNCTION_CALLS_END: &str = "</｜DSML｜function_calls>";
/// Opens a call (V3.2): `<｜DSML｜invoke name="NAME">`.
pub(crate) const INVOKE: &str = "<｜DSML｜invoke";
/// Closes a call (V3.2).
pub(crate) const INVOKE_END: &str = "</｜DSML｜invoke>";
/// Opens a parameter (V3.2): `<｜DSML｜parameter name="K" string="true|false">`.
pub(crate) const PARAMETER: &str = "<｜DSML｜parameter";
/// Closes a parameter (V3.2).
pub(crate) const PARAMETER_END: &str = "</｜DSML｜parameter>";
/// The end of the turn.
const END_OF_SENTENCE: &str = "<｜end▁of▁sentence｜>";

/// DeepSeek's layout: `<think>` first, then V3/V3.1 or V3.2 call blocks.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: &[END_OF_SENTENCE],
    think: Some((THINK_START, THINK_END)),
    starts: &[CALLS_BEGIN, FUNCTION_CALLS],
    ends: &[CALLS_END, FUNCTION_CALLS_END],
    block: |text, open, marker, _, b| {
        let body = open + marker.len();
        if marker == CALLS_BEGIN { calls(text, body, b) } else { dsml(text, body, b) }
    },
};

/// Parse DeepSeek text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    super::raw::drive(text, &SPEC, &|_| None)
}

/// The V3 / V3.1 calls from `pos` (after `<｜tool▁calls▁begin｜>`); where reading goes on.
fn calls(text: &str, mut pos: usize, b: &mut Builder) -> usize {
    let end_of = |from: usize, token: &str| text[from..].find(token).map(|i| from + i + token.len());
    let mut read = 0;
    loop {
        pos = skip_ws(text, pos);
        if text[pos..].starts_with(CALLS_END) {
            return pos + CALLS_END.len();
        }
        if pos == text.len() && read > 0 {
            return pos;
        }
        if !text[pos..].starts_with(CALL_BEGIN) {
            let cut = cut_at(text, pos, CALL_BEGIN) || cut_at(text, pos, CALLS_END);
            if !(cut && read > 0 && CALLS_END.starts_with(&text[pos..])) {
                b.call("", None, Err(error(format!("expected `{CALL_BEGIN}` or `{CALLS_END}`"), pos, cut)));
            }
            return end_of(pos, CALLS_END).unwrap_or(text.len());
        }
        read += 1;
        let head = pos + CALL_BEGIN.len();
        let Some(sep) = text[head..].find(SEP).map(|i| head + i) else {
            let name = text[head..].trim();
            b.call(name, None, Err(error(format!("expected `{SEP}` after the name"), text.len(), true)));
            return text.len();
        };
        let head_text = text[head..sep].trim();
        let after = sep + SEP.len();
        let (name, args) = if head_text == "function" && !text[after..].trim_start().starts_with('{') {
            // V3: the name on its own line, then the JSON in a ```json fence.
            let line_end = text[after..].find('\n').map_or(text.len(), |i| after + i);
            let name = text[after..line_end].trim().to_owned();
            let mut at = skip_ws(text, line_end);
            if text[at..].starts_with("```") {
                at += 3;
                at += text[at..].len() - text[at..].trim_start_matches("json").len();
            }
            (name, at)
        } else {
            (head_text.to_owned(), after)
        };
        let (result, at) = match json_at(text, args) {
            Ok((Value::Object(m), end)) => (Ok(m), end),
            Ok((_, end)) => (Err(error(format!("the arguments of `{name}` are not a JSON object"), args, false)), end),
            Err(e) => {
                let resume = if e.incomplete { text.len() } else { end_of(args, CALL_END).unwrap_or(text.len()) };
                b.call(name, None, Err(e));
                if resume == text.len() {
                    return resume;
                }
                pos = resume;
                continue;
            }
        };
        let mut tag = skip_ws(text, at);
        if text[tag..].starts_with("```") {
            tag = skip_ws(text, tag + 3);
        }
        if text[tag..].starts_with(CALL_END) {
            b.call(name, None, result);
            pos = tag + CALL_END.len();
        } else {
            let cut = cut_at(text, tag, CALL_END) || cut_at(text, tag, "```");
            b.call(name, None, Err(error(format!("expected `{CALL_END}` after the arguments"), tag, cut)));
            match end_of(tag, CALL_END) {
                Some(p) => pos = p,
                None => return text.len(),
            }
        }
    }
}

/// The V3.2 (DSML) calls from `pos` (after `<｜DSML｜function_calls>`); where reading goes on.
fn dsml(text: &str, mut pos: usize, b: &mut Builder) -> usize {
    let end_of = |from: usize, token: &str| text[from..].find(token).map(|i| from + i + token.len());
    let mut read = 0;
    loop {
        pos = skip_ws(text, pos);
        if text[pos..].starts_with(FUNCTION_CALLS_END) {
            return pos + FUNCTION_CALLS_END.len();
        }
        if pos == text.len() && read > 0 {
            return pos;
        }
        if !text[pos..].starts_with(INVOKE) {
            let cut = cut_at(text, pos, INVOKE) || cut_at(text, pos, FUNCTION_CALLS_END);
            if !(cut && read > 0 && FUNCTION_CALLS_END.starts_with(&text[pos..])) {
                let message = format!("expected `{INVOKE} name=\"…\">` or `{FUNCTION_CALLS_END}`");
                b.call("", None, Err(error(message, pos, cut)));
            }
            return end_of(pos, FUNCTION_CALLS_END).unwrap_or(text.len());
        }
        read += 1;
        let (name, result, next) = invoke(text, pos + INVOKE.len());
        b.call(name, None, result);
        match next {
            Some(p) => pos = p,
            None => return end_of(pos, FUNCTION_CALLS_END).unwrap_or(text.len()),
        }
    }
}

/// One `<｜DSML｜invoke name="NAME">…</｜DSML｜invoke>` whose attributes start at `pos`:
/// its name, its arguments, and where reading goes on (None: at the calls' end).
fn invoke(text: &str, pos: usize) -> (String, Result<Map<String, Value>, CallError>, Option<usize>) {
    let Some((attrs, mut pos)) = tag_attributes(text, pos) else {
        let name = attribute(&text[pos..], "name").unwrap_or_default();
        return (name, Err(error("the `invoke` tag has no closing `>`", text.len(), true)), None);
    };
    let name = attribute(attrs, "name").unwrap_or_default();
    // The end of this call, for the value that has no closing tag followed by another.
    let resync = |from: usize| text[from..].find(INVOKE_END).map(|i| from + i + INVOKE_END.len());
    if name.is_empty() {
        return (name, Err(error("the `invoke` tag has no `name`", pos, false)), resync(pos));
    }
    if let Some(twice) = repeated(attrs) {
        let message = format!("the `invoke` tag gives `{twice}` twice");
        return (name, Err(error(message, pos, false)), resync(pos));
    }
    let mut args = Map::new();
    loop {
        pos = skip_ws(text, pos);
        if text[pos..].starts_with(INVOKE_END) {
            return (name, Ok(args), Some(pos + INVOKE_END.len()));
        }
        if !text[pos..].starts_with(PARAMETER) {
            let cut = cut_at(text, pos, PARAMETER) || cut_at(text, pos, INVOKE_END);
            let message = format!("expected `{PARAMETER} name=\"…\">` or `{INVOKE_END}`");
            return (name, Err(error(message, pos, cut)), resync(pos));
        }
        let Some((attrs, value_start)) = tag_attributes(text, pos + PARAMETER.len()) else {
            return (name, Err(error("the `parameter` tag has no closing `>`", text.len(), true)), None);
        };
        let key = attribute(attrs, "name").unwrap_or_default();
        let Some(end) = value_end(text, value_start, PARAMETER_END, &[PARAMETER, INVOKE_END]) else {
            let message = format!("the parameter `{key}` has no `{PARAMETER_END}`");
            return (name, Err(error(message, text.len(), true)), None);
        };
        if key.is_empty() {
            let message = format!("a `parameter` of `{name}` has no `name`");
            return (name, Err(error(message, pos, false)), resync(end));
        }
        if let Some(twice) = repeated(attrs) {
            let message = format!("the parameter `{key}` of `{name}` gives `{twice}` twice");
            return (name, Err(error(message, pos, false)), resync(end));
        }
        let raw = &text[value_start..end];
        let value = if attribute(attrs, "string").as_deref() == Some("false") {
            match super::raw::json_value(raw.trim()) {
                Ok(v) => v,
                Err(e) => {
                    let message = format!("the value of `{key}` (string=\"false\") is not JSON: {e}");
                    return (name, Err(error(message, value_start, false)), resync(end));
                }
            }
        } else {
            Value::String(raw.to_owned())
        };
        if args.contains_key(&key) {
            let message = format!("the argument `{key}` of `{name}` is given twice");
            return (name, Err(error(message, pos, false)), resync(end));
        }
        args.insert(key, value);
        pos = end + PARAMETER_END.len();
    }
}

/// The attribute text of a tag from `pos` to its `>` (quoted `>` skipped), and the offset
/// past the `>`; None when the text ends first.
fn tag_attributes(text: &str, pos: usize) -> Option<(&str, usize)> {
    let mut quoted = false;
    for (i, c) in text[pos..].char_indices() {
        match c {
            '"' => quoted = !quoted,
            '>' if !quoted => return Some((&text[pos..pos + i], pos + i + 1)),
            _ => {}
        }
    }
    None
}

/// A tag's attributes, `KEY="VALUE"` pairs read in order (so `name="` inside another
/// attribute's value is that value's text), up to the first text that is not one.
fn attributes(attrs: &str) -> Vec<(&str, &str)> {
    let mut pairs = Vec::new();
    let mut rest = attrs;
    loop {
        rest = rest.trim_start();
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim_end();
        if key.is_empty() || key.contains(|c: char| c.is_whitespace() || c == '"') {
            break;
        }
        let Some(value) = rest[eq + 1..].trim_start().strip_prefix('"') else { break };
        let Some(end) = value.find('"') else { break };
        pairs.push((key, &value[..end]));
        rest = &value[end + 1..];
    }
    pairs
}

/// The value of `key="…"` in a tag's attribute text.
fn attribute(attrs: &str, key: &str) -> Option<String> {
    attributes(attrs).into_iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_owned())
}

/// An attribute a tag gives twice (`name="ls" name="rm"` says two names).
fn repeated(attrs: &str) -> Option<&str> {
    let pairs = attributes(attrs);
    pairs.iter().enumerate().find(|(i, (k, _))| pairs[..*i].iter().any(|(seen, _)| seen == k)).map(|(_, (k, _))| *k)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::Deepseek, &|_| None))
    }

    #[test]
    fn the_v3_layout_parses() {
        // As DeepSeek V3's (and R1's) template writes calls: the type, the name, a JSON fence.
        let p = parse(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris ```<｜tool▁call▁end｜>\", \"days\": 3}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"東京\", \"days\": null}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        );
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris ```<｜tool▁call▁end｜>", "days": 3}},
                {"name": "get_weather", "arguments": {"city": "東京", "days": null}}
            ]})
        );
    }

    #[test]
    fn the_v3_1_layout_parses() {
        // V3.1: the prompt opens the thought; content, then the calls with the name first.
        let p = parse(
            "The user wants Paris.</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"e\": 1.5e3}<｜tool▁call▁end｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        );
        assert_eq!(
            p,
            json!({"content": "Checking.", "reasoning_content": "The user wants Paris.", "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris", "e": 1500.0}},
                {"name": "now", "arguments": {}}
            ]})
        );
    }

    #[test]
    fn the_v3_2_dsml_layout_parses() {
        let p = parse(
            "Need both.</think>Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">  1984\nline </｜DSML｜parameter> </｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"o\" string=\"false\">{\"k\": [null, true]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>",
        );
        assert_eq!(
            p,
            json!({"content": "Checking.", "reasoning_content": "Need both.", "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "  1984\nline </｜DSML｜parameter> ", "days": 3, "o": {"k": [null, true]}}},
                {"name": "now", "arguments": {}}
            ]})
        );
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        for cut in [
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>ls",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>ls<｜tool▁sep｜>{\"path\": \"/t",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>ls<｜tool▁sep｜>{}<｜tool▁ca",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>ls\n```json\n{\"path\"",
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"ls\">\n<｜DSML｜parameter name=\"path\" string=\"true\">/t",
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"ls\">\n<｜DSML｜parameter name=\"n\" string=\"false\">[1,",
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"ls\">\n</｜DSML｜inv",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
            assert_eq!(p["tool_calls"][0]["name"], json!("ls"), "{cut}: {p}");
        }
        let p = parse(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"a\">\n<｜DSML｜parameter name=\"n\" string=\"false\">not json</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"b\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        );
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
        let p = parse("<｜tool▁calls▁begin｜>");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(
            parse("Hi.<｜end▁of▁sentence｜>"),
            json!({"content": "Hi.", "reasoning_content": null, "tool_calls": []})
        );
    }
}
