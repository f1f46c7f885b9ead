//! Gemma 4's raw output, as its chat template writes an assistant turn:
//!
//! ```text
//! <|channel>thought\nREASONING<channel|>CONTENT<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,flag:true,o:{…},l:[…]}<tool_call|>
//! ```
//!
//! A call's body is FunctionGemma's syntax with `<|"|>` in place of `<escape>` (the
//! template's `format_argument`): strings in `<|"|>` stay strings, bare words are typed (by
//! the tool's schema when one is known), objects and arrays recurse. The body is read
//! before the end tag is looked for, so `<tool_call|>` inside a string stays in it.

use super::functiongemma;
use super::raw::{Builder, Parsed, SchemaOf, Spec, error};

/// Opens a call.
pub(crate) const CALL_START: &str = "<|tool_call>";
/// Closes a call.
pub(crate) const CALL_END: &str = "<tool_call|>";
/// Wraps a string value.
pub(crate) const QUOTE: &str = "<|\"|>";
/// Opens a channel (the thought).
pub(crate) const CHANNEL_START: &str = "<|channel>";
/// Closes a channel.
pub(crate) const CHANNEL_END: &str = "<channel|>";
/// The end-of-turn tokens an output may still end with (generation stops at a tool
/// response's start).
const END_OF_TURN: &[&str] = &["<turn|>", "<|tool_response>", "<eos>"];

/// Gemma 4's layout: channels (the thought) and calls, in any order.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: END_OF_TURN,
    think: None,
    starts: &[CHANNEL_START, CALL_START],
    ends: &[CHANNEL_END, CALL_END],
    block: |text, open, marker, schema_of, b| {
        if marker == CALL_START {
            return call(text, open, schema_of, b);
        }
        let inner = open + CHANNEL_START.len();
        let end = text[inner..].find(CHANNEL_END).map(|i| inner + i);
        let body = &text[inner..end.unwrap_or(text.len())];
        // The channel's name (`thought`) starts its text.
        b.reasoning(body.strip_prefix("thought").unwrap_or(body));
        end.map_or(text.len(), |e| e + CHANNEL_END.len())
    },
};

/// Parse Gemma 4 text (see the module's documentation).
pub(crate) fn parse(text: &str, schema_of: SchemaOf<'_>) -> Parsed {
    super::raw::drive(text, &SPEC, schema_of)
}

/// The call whose start tag is at `open`; the offset where reading goes on.
fn call(text: &str, open: usize, schema_of: SchemaOf<'_>, b: &mut Builder) -> usize {
    let body = open + CALL_START.len();
    let (next_start, scanned) = next_call(text, body);
    b.scanned += scanned;
    let start = body + (text[body..next_start].len() - text[body..next_start].trim_start().len());
    // Past the end of this call's text: after its end tag, else at the next call.
    let resync = |from: usize| text[from..next_start].find(CALL_END).map_or(next_start, |i| from + i + CALL_END.len());
    if !text[start..next_start].starts_with("call:") {
        let incomplete = start == text.len() || "call:".starts_with(&text[start..next_start]);
        b.call("", None, Err(error(format!("expected `call:NAME{{…}}` after `{CALL_START}`"), start, incomplete)));
        return resync(start);
    }
    let bounded = &text[..next_start];
    match functiongemma::call_with(bounded, start, true, QUOTE, schema_of) {
        Ok(c) => {
            let after = &text[c.span.end..next_start];
            let tag = c.span.end + (after.len() - after.trim_start().len());
            if text[tag..].starts_with(CALL_END) {
                b.call(c.name, None, Ok(c.args));
                tag + CALL_END.len()
            } else if tag == text.len() {
                b.call(c.name, None, Err(error(format!("`{CALL_START}` has no `{CALL_END}`"), tag, true)));
                tag
            } else {
                b.call(c.name, None, Err(error(format!("expected `{CALL_END}` after the call"), tag, false)));
                resync(tag)
            }
        }
        Err(e) => {
            // The text ended inside the call only when no end tag follows.
            let incomplete = e.incomplete && !text[start..next_start].contains(CALL_END);
            let message = e.message.strip_prefix("incomplete call: ").unwrap_or(&e.message).to_owned();
            b.call(e.name, None, Err(error(message, e.offset, incomplete)));
            if incomplete { text.len() } else { resync(e.offset.min(next_start)) }
        }
    }
}

/// The next `<|tool_call>` from `from` that is not inside a `<|"|>` string (the end of the
/// text when there is none): a call's text ends there at the latest. Also the bytes scanned:
/// both tokens start with `<|`, so one scan finds the first of them (searching each on its
/// own would read to the end of the text for a call with no string after it: quadratic).
fn next_call(text: &str, mut from: usize) -> (usize, usize) {
    let start = from;
    let mut quoted = false;
    while let Some(i) = text[from..].find("<|") {
        let at = from + i;
        let rest = &text[at..];
        if rest.starts_with(QUOTE) {
            quoted = !quoted;
            from = at + QUOTE.len();
        } else if !quoted && rest.starts_with(CALL_START) {
            return (at, at + CALL_START.len() - start);
        } else {
            from = at + 2;
        }
    }
    (text.len(), text.len() - start)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::Gemma4, &|_| None))
    }

    #[test]
    fn the_templates_layout_parses() {
        // As the template writes a model turn with two calls (keys in name order, strings
        // in <|"|>, numbers and booleans bare, objects and lists recursing).
        let text = "<|channel>thought\nThe user wants Paris.<channel|>Checking.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,metric:true,opts:{a:[1,<|\"|>x<|\"|>]}}<tool_call|><|tool_call>call:now{}<tool_call|><turn|>";
        assert_eq!(
            parse(text),
            json!({
                "content": "Checking.",
                "reasoning_content": "The user wants Paris.",
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "metric": true, "opts": {"a": [1, "x"]}}},
                    {"name": "now", "arguments": {}}
                ]
            })
        );
    }

    #[test]
    fn the_issues_example_is_a_call() {
        let p = parse("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>");
        assert_eq!(p["tool_calls"], json!([{"name": "get_weather", "arguments": {"city": "Paris"}}]));
    }

    #[test]
    fn strings_keep_markers_whitespace_and_unicode() {
        let p = parse(
            "<|tool_call>call:f{s:<|\"|>a <tool_call|> b, } ]\n  c <|tool_call> é<|\"|>,n:-2.5e2,z:null}<tool_call|>",
        );
        assert_eq!(
            p["tool_calls"][0]["arguments"],
            json!({"s": "a <tool_call|> b, } ]\n  c <|tool_call> é", "n": -250.0, "z": null}),
            "{p}"
        );
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let schema = json!({"type": "object", "properties": {"phone": {"type": "string"}, "n": {"type": "integer"}}});
        let p = parse_every_way("<|tool_call>call:f{phone:555,n:<|\"|>7<|\"|>}<tool_call|>", Family::Gemma4, &|_| {
            Some(schema.clone())
        });
        assert_eq!(as_json(&p)["tool_calls"][0]["arguments"], json!({"phone": "555", "n": 7}));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        let p = parse("<|tool_call>call:rm{path:<|\"|>/tm");
        assert_eq!(p["tool_calls"][0]["name"], json!("rm"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
        let p = parse("<|tool_call>call:a{}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
        let p = parse("<|tool_call>call:a{x 1}<tool_call|>After.<|tool_call>call:b{}<tool_call|>");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
        assert_eq!(p["content"], json!("After."));
        let p = parse("<|tool_call>get_weather{}<tool_call|>");
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("expected `call:"), "{p}");
        // A thought cut off is reasoning.
        let p = parse("<|channel>thought\nhmm");
        assert_eq!(p, json!({"content": null, "reasoning_content": "hmm", "tool_calls": []}));
    }

    #[test]
    fn many_calls_are_read_in_linear_work() {
        // Calls with text between them, with strings and without (no `<|"|>` after them),
        // and no channel at all: each marker search goes on where the last one stopped.
        for quoted in [true, false] {
            let text: String = (0..2000)
                .map(|i| {
                    let value = if quoted { format!("<|\"|>Paris {i}<|\"|>") } else { i.to_string() };
                    format!("Step {i}, as a model would say.\n<|tool_call>call:f{{a:{value},days:3}}<tool_call|>")
                })
                .collect();
            let (parsed, work) = super::super::raw::drive_work(&text, &super::SPEC, &|_| None);
            assert_eq!(parsed.tool_calls.len(), 2000);
            assert!(parsed.tool_calls.iter().all(|c| c.arguments.is_ok()));
            assert!(work < 8 * text.len(), "quoted {quoted}: {work} bytes scanned for {}", text.len());
        }
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(parse("Bonjour."), json!({"content": "Bonjour.", "reasoning_content": null, "tool_calls": []}));
        // The empty thought the template writes when thinking is off.
        assert_eq!(
            parse("<|channel>thought\n<channel|>Hi"),
            json!({"content": "Hi", "reasoning_content": null, "tool_calls": []})
        );
    }
}
