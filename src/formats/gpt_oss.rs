//! gpt-oss's raw output: messages in OpenAI's Harmony format. The prompt ends with
//! `<|start|>assistant`, and the model writes one or more messages:
//!
//! ```text
//! <|channel|>analysis<|message|>REASONING<|end|>
//! <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
//! <|start|>assistant<|channel|>final<|message|>CONTENT<|return|>
//! ```
//!
//! A message's header runs to `<|message|>`: the role, `<|channel|>` and the channel's name,
//! and the recipient `to=functions.NAME`, written after the channel or in the role header
//! (`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`); a
//! `<|constrain|>json` (or a bare `json`) says the body is JSON. A message with a recipient
//! is a call: its body is the arguments, read as JSON before `<|call|>` is looked for (the
//! text may also end there, as generation stops at `<|call|>`). A recipient that is not
//! `functions.…` (the built-in `browser.*`, `python`) is a call that is not run. Without a
//! recipient, the `analysis` channel is reasoning; `final` and `commentary` (the preamble
//! the model shows the user) are content. A body ends at `<|end|>`, `<|call|>`,
//! `<|return|>` or the next `<|start|>`. Text with no Harmony markers is content.

use serde_json::Value;

use super::qwen3_xml::skip_ws;
use super::raw::{Builder, CallError, Cursor, Live, Parsed, SchemaOf, Units, cut_at, error, json_at, run_units};

/// Starts a message.
pub(crate) const START: &str = "<|start|>";
/// Starts the channel's name in a header.
pub(crate) const CHANNEL: &str = "<|channel|>";
/// Ends a header; the body follows.
pub(crate) const MESSAGE: &str = "<|message|>";
/// Ends a message.
pub(crate) const END: &str = "<|end|>";
/// Ends a call message (generation stops there).
pub(crate) const CALL: &str = "<|call|>";
/// Ends the final message (generation stops there).
pub(crate) const RETURN: &str = "<|return|>";
/// The recipient of a call to a function.
pub(crate) const TO_FUNCTIONS: &str = "to=functions.";

/// Parse gpt-oss text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    run_units(text, &UNITS, &|_| None)
}

/// The ends of a body.
const BODY_ENDS: &[&str] = &[END, CALL, RETURN, START];

/// gpt-oss read message by message: a call is sent at its `<|call|>` (or the end token
/// that follows its JSON), a body's text as it comes.
pub(crate) const UNITS: Units = Units { end_of_turn: &[], held: BODY_ENDS, reads_end: |_| false, step };

/// The next message from `c.pos`.
fn step(text: &str, c: &mut Cursor, _: SchemaOf<'_>, b: &mut Builder) -> bool {
    let pos = c.pos;
    if pos >= text.len() {
        return false;
    }
    if c.eof && pos == 0 && !text.contains(MESSAGE) && !text.contains(CHANNEL) && !text.contains(TO_FUNCTIONS) {
        b.text(text);
        c.pos = text.len();
        return true;
    }
    let Some((message, _)) = c.find(0, text, pos, &[MESSAGE]) else {
        if !c.eof {
            c.searching = true;
            return false;
        }
        header_cut(text, pos, b);
        c.pos = text.len();
        return true;
    };
    let header = Header::read(&text[pos..message]);
    let body = message + MESSAGE.len();
    if let Some(recipient) = header.recipient {
        return match call(text, body, recipient, c, b) {
            Some(resume) => {
                c.pos = resume;
                true
            }
            None => {
                c.waiting = Some(pos);
                false
            }
        };
    }
    let end = match c.find(1, text, body, BODY_ENDS) {
        Some((end, _)) => end,
        None if c.eof => text.len(),
        None => {
            let kind = if header.channel == "analysis" { Live::Reasoning } else { Live::Content };
            c.live = Some((kind, body));
            c.searching = true;
            return false;
        }
    };
    let part = &text[body..end];
    if header.channel == "analysis" {
        b.reasoning(part);
    } else if !part.trim().is_empty() {
        if c.wrote {
            b.text("\n\n");
        }
        b.text(part.trim());
        c.wrote = true;
    }
    c.pos = past_end(text, end);
    true
}

/// A message's header: its channel's name and its recipient.
struct Header<'a> {
    channel: &'a str,
    recipient: Option<&'a str>,
}

impl<'a> Header<'a> {
    fn read(header: &'a str) -> Self {
        let channel = header.find(CHANNEL).map_or("", |i| {
            let name = header[i + CHANNEL.len()..].trim_start();
            &name[..name.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(name.len())]
        });
        // `to=` as a word of its own (after the role, the channel or a space): `photo=` or
        // `auto=` in a header names no recipient.
        let word = |i: usize| i == 0 || header[..i].ends_with(|c: char| c.is_whitespace() || c == '>');
        let recipient = header.match_indices("to=").map(|(i, _)| i).find(|&i| word(i)).map(|i| {
            let r = &header[i + 3..];
            &r[..r.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(r.len())]
        });
        Self { channel, recipient }
    }
}

/// The text ends inside a header (no `<|message|>`): a call begun is an error; a cut-off
/// header of any other message says nothing.
fn header_cut(text: &str, pos: usize, b: &mut Builder) {
    let header = Header::read(&text[pos..]);
    if let Some(recipient) = header.recipient {
        let message = format!("the call to `{recipient}` has no `{MESSAGE}`");
        b.call(function_name(recipient), None, Err(error(message, text.len(), true)));
    } else if !text[pos..].contains(CHANNEL) && !text[pos..].contains(START) && !cut_at(text, pos, START) {
        // Text that holds no header at all (after a body's end): content.
        b.text(&text[pos..]);
    }
}

/// The call whose body starts at `body`, to `recipient`; where reading goes on, or None
/// when the text so far does not decide it.
fn call(text: &str, body: usize, recipient: &str, c: &mut Cursor, b: &mut Builder) -> Option<usize> {
    let name = function_name(recipient);
    let not_a_function = |at: usize| -> CallError {
        error(format!("`{recipient}` is a built-in tool, not a function: it is not run"), at, false)
    };
    // Where the body that starts at `from` ends, past its end token.
    let past = |c: &mut Cursor, from: usize| match c.find(1, text, from, BODY_ENDS) {
        Some((end, _)) => Some(past_end(text, end)),
        None => c.eof.then_some(text.len()),
    };
    match json_at(text, body) {
        Ok((v, end)) => {
            let tag = skip_ws(text, end);
            let ends = [CALL, END, RETURN, START];
            if !c.eof && ends.iter().any(|e| e.len() > text.len() - tag && e.starts_with(&text[tag..])) {
                // The end token is still to come (or to be whole).
                return None;
            }
            if tag < text.len() && !ends.iter().any(|e| text[tag..].starts_with(e)) {
                let resume = past(c, tag)?;
                let cut = cut_at(text, tag, CALL) || cut_at(text, tag, END);
                b.call(name, None, Err(error(format!("expected `{CALL}` after the call's JSON"), tag, cut)));
                return Some(resume);
            }
            let result = match v {
                _ if !recipient.starts_with("functions.") => Err(not_a_function(body)),
                Value::Object(m) => Ok(m),
                _ => Err(error(format!("the arguments of `{name}` are not a JSON object"), body, false)),
            };
            b.call(name, None, result);
            Some(past_end(text, tag))
        }
        Err(e) if e.incomplete && !c.eof => None,
        Err(e) if !recipient.starts_with("functions.") => {
            let resume = if e.incomplete { text.len() } else { past(c, body)? };
            b.call(name, None, Err(if e.incomplete { e } else { not_a_function(body) }));
            Some(resume)
        }
        Err(e) => {
            let resume = if e.incomplete { text.len() } else { past(c, body)? };
            b.call(name, None, Err(e));
            Some(resume)
        }
    }
}

/// The function's name of a recipient: `functions.NAME` is `NAME`; any other recipient is
/// itself.
fn function_name(recipient: &str) -> String {
    recipient.strip_prefix("functions.").unwrap_or(recipient).to_owned()
}

/// Past the end token at `at` (`<|start|>` is kept: it opens the next message).
fn past_end(text: &str, at: usize) -> usize {
    [END, CALL, RETURN].iter().find(|t| text[at..].starts_with(**t)).map_or(at, |t| at + t.len())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::GptOss, &|_| None))
    }

    fn call(reasoning: Option<&str>, args: Value) -> Value {
        json!({"content": null, "reasoning_content": reasoning, "tool_calls": [{"name": "special_function", "arguments": args}]})
    }

    #[test]
    fn reasoning_and_final_content() {
        // Cases of llama.cpp's gpt-oss parser tests.
        let p = parse(
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?<|return|>",
        );
        assert_eq!(
            p,
            json!({"content": "Hello, world!\nWhat's up?", "reasoning_content": "I'm\nthinking", "tool_calls": []})
        );
        let p = parse("<|channel|>analysis<|message|>I'm\nthink");
        assert_eq!(p, json!({"content": null, "reasoning_content": "I'm\nthink", "tool_calls": []}));
        // A preamble in the commentary channel is content; a call follows it.
        let p = parse(
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary<|message|>Hello, world!\nWhat's up?<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
        );
        assert_eq!(p["content"], json!("Hello, world!\nWhat's up?"));
        assert_eq!(p["tool_calls"], json!([{"name": "special_function", "arguments": {"arg1": 1}}]));
    }

    #[test]
    fn the_recipient_in_the_channel_or_in_the_role_header() {
        let thinking = Some("I'm\nthinking");
        for text in [
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}<|call|>",
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}",
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>analysis to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
        ] {
            assert_eq!(parse(text), call(thinking, json!({"arg1": 1})), "{text}");
        }
        for text in [
            " to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}",
            " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
            "<|start|>assistant to=functions.special_function<|channel|>commentary json<|message|>{\"arg1\": 1}<|call|>",
        ] {
            assert_eq!(parse(text), call(None, json!({"arg1": 1})), "{text}");
        }
    }

    #[test]
    fn parallel_calls_and_values_keep_their_types() {
        let p = parse(
            "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"s\": \"x <|call|> y\", \"n\": \"3\", \"m\": 3, \"e\": 1e2, \"z\": null, \"u\": \"東京\\n\"}<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{}<|call|>",
        );
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "a", "arguments": {"s": "x <|call|> y", "n": "3", "m": 3, "e": 100.0, "z": null, "u": "東京\n"}}, {"name": "b", "arguments": {}}])
        );
    }

    #[test]
    fn truncated_malformed_and_builtin_calls_are_errors() {
        for cut in [
            "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1",
            "<|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json",
            "<|start|>assistant<|channel|>commentary to=functions.special_function<|message|>",
            "<|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{}<|ca",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
            assert_eq!(p["tool_calls"][0]["name"], json!("special_function"), "{cut}: {p}");
        }
        let p = parse(
            "<|channel|>commentary to=functions.a<|message|>{'x': 1}<|call|><|start|>assistant<|channel|>commentary to=functions.b<|message|>{}<|call|>",
        );
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
        let p = parse("<|channel|>analysis to=browser.search<|message|>{\"query\": \"x\"}<|call|>");
        assert_eq!(p["tool_calls"][0]["name"], json!("browser.search"));
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("built-in"), "{p}");
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(parse("Hello."), json!({"content": "Hello.", "reasoning_content": null, "tool_calls": []}));
    }

    #[test]
    fn a_recipient_is_a_word_of_its_own() {
        let p = parse("<|channel|>commentary photo=functions.rm <|constrain|>json<|message|>{}<|call|>");
        assert_eq!(p["tool_calls"], json!([]), "{p}");
        let p = parse("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>");
        assert_eq!(p["tool_calls"], json!([{"name": "f", "arguments": {}}]), "{p}");
        let p = parse("<|channel|>commentary\tto=functions.f<|message|>{}<|call|>");
        assert_eq!(p["tool_calls"], json!([{"name": "f", "arguments": {}}]), "{p}");
    }
}
