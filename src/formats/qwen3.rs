//! Qwen3's raw output (the Hermes layout its chat template writes):
//!
//! ```text
//! <think>\nREASONING\n</think>\n\nCONTENT\n<tool_call>\n{"name": "NAME", "arguments": {…}}\n</tool_call>\n<tool_call>…
//! ```
//!
//! Checked against Qwen3's template, which writes `<tool_call>\n{"name": "NAME",
//! "arguments": ARGUMENTS}\n</tool_call>` with the arguments as `tojson` gives them, and a
//! newline before each call but a first one with no content before it. The call's JSON is
//! read as JSON before its end tag is looked for, so a `</tool_call>` inside a string value
//! stays in the value. A prompt may open the thought itself (`enable_thinking`): then the
//! output holds `</think>` alone, and what precedes it is reasoning.

use super::raw::{Builder, Parsed, Spec, error, json_call, json_read_at, name_in_prefix};

/// Opens a call.
pub(crate) const CALL_START: &str = "<tool_call>";
/// Closes a call.
pub(crate) const CALL_END: &str = "</tool_call>";
/// Opens the reasoning.
pub(crate) const THINK_START: &str = "<think>";
/// Closes the reasoning.
pub(crate) const THINK_END: &str = "</think>";
/// The end-of-turn tokens an output may still end with.
const END_OF_TURN: &[&str] = &["<|im_end|>", "<|endoftext|>"];

/// Qwen3's layout: `<think>` first, then `<tool_call>` blocks.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: END_OF_TURN,
    think: Some((THINK_START, THINK_END)),
    starts: &[CALL_START],
    ends: &[CALL_END],
    block: |text, open, _, _, b| call(text, open, b),
};

/// Parse Qwen3 text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    super::raw::drive(text, &SPEC, &|_| None)
}

/// The `<tool_call>` block at `open`; where reading goes on.
fn call(text: &str, open: usize, b: &mut Builder) -> usize {
    let body = open + CALL_START.len();
    let next_start = text[body..].find(CALL_START).map_or(text.len(), |i| body + i);
    match json_read_at(text, body) {
        Ok((v, end)) => {
            let after = &text[end..];
            let tag = end + (after.len() - after.trim_start().len());
            let parsed = json_call(&v, &["arguments", "parameters"], body);
            let name = v.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
            if text[tag..].starts_with(CALL_END) {
                match parsed {
                    Ok((name, args)) => b.call(name, None, Ok(args)),
                    Err(e) => b.call(name, None, Err(e)),
                }
                tag + CALL_END.len()
            } else if tag == text.len() {
                b.call(name, None, Err(error(format!("`{CALL_START}` has no `{CALL_END}`"), tag, true)));
                text.len()
            } else {
                b.call(name, None, Err(error(format!("expected `{CALL_END}` after the call's JSON"), tag, false)));
                resync(text, tag, next_start)
            }
        }
        Err((e, stop)) => {
            // Named from the text before where the JSON broke (and before the next call).
            b.call(name_in_prefix(&text[body..stop.min(next_start)]), None, Err(e.clone()));
            if e.incomplete { text.len() } else { resync(text, body, next_start) }
        }
    }
}

/// Where reading goes on after a malformed call at `from`: past its end tag, or at the
/// next call (the first at or after `from`, which is `next_start` unless the call's JSON
/// ran past it).
fn resync(text: &str, from: usize, next_start: usize) -> usize {
    let next_start =
        if from <= next_start { next_start } else { text[from..].find(CALL_START).map_or(text.len(), |i| from + i) };
    match text[from..next_start].find(CALL_END) {
        Some(i) => from + i + CALL_END.len(),
        None => next_start,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> serde_json::Value {
        as_json(&parse_every_way(text, Family::Qwen3, &|_| None))
    }

    #[test]
    fn the_templates_layout_parses() {
        // The assistant turn as Qwen3's template writes it: reasoning, content, two calls.
        let text = "<think>\nThe user wants the weather.\n</think>\n\nLet me check both cities.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"days\": null}}\n</tool_call><|im_end|>";
        assert_eq!(
            parse(text),
            json!({
                "content": "Let me check both cities.",
                "reasoning_content": "The user wants the weather.",
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
                    {"name": "get_weather", "arguments": {"city": "東京", "days": null}}
                ]
            })
        );
    }

    #[test]
    fn values_keep_their_types_and_markers_inside_strings_stay_text() {
        let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"a </tool_call> b <tool_call>\", \"n\": \"3\", \"m\": 3, \"e\": 1.5e3, \"t\": \"  two\\nlines  \", \"b\": false}}\n</tool_call>";
        assert_eq!(
            parse(text)["tool_calls"],
            json!([{"name": "f", "arguments": {"s": "a </tool_call> b <tool_call>", "n": "3", "m": 3, "e": 1500.0, "t": "  two\nlines  ", "b": false}}])
        );
    }

    #[test]
    fn text_around_and_between_calls_is_kept_in_order() {
        let text = "First.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\nThen:  spaced  \n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\nDone.";
        let p = parse(text);
        assert_eq!(p["content"], json!("First.\n\nThen:  spaced  \n\nDone."));
        assert_eq!(p["tool_calls"], json!([{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]));
    }

    #[test]
    fn a_thought_opened_by_the_prompt_ends_at_its_close_tag() {
        let p = parse(
            "The user wants a file.\n</think>\n\n<tool_call>\n{\"name\": \"ls\", \"arguments\": {\"path\": \".\"}}\n</tool_call>",
        );
        assert_eq!(p["reasoning_content"], json!("The user wants a file."));
        assert_eq!(p["content"], json!(null));
        assert_eq!(p["tool_calls"][0]["name"], json!("ls"));
        // A thought cut off: all of it is reasoning, and no call.
        let p = parse("<think>\nStill thinking about <tool_call> syntax");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": "Still thinking about <tool_call> syntax", "tool_calls": []})
        );
        let p = parse("<think>\nStill thinking");
        assert_eq!(p, json!({"content": null, "reasoning_content": "Still thinking", "tool_calls": []}));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors_in_their_place() {
        let p = parse("<tool_call>\n{\"name\": \"rm\", \"arguments\": {\"path\": \"/tm");
        let call = &p["tool_calls"][0];
        assert_eq!(call["name"], json!("rm"));
        assert_eq!(call["error"]["incomplete"], json!(true));
        let p = parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
        // Malformed, then a good call: both reported, in order.
        let p = parse(
            "<tool_call>\n{\"name\": \"a\", \"arguments\": {'x': 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
        );
        assert_eq!(p["tool_calls"][0]["name"], json!("a"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false));
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
        let p = parse("<tool_call>\n{\"arguments\": {}}\n</tool_call>");
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("no \"name\""), "{p}");
        let p = parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}} trailing\n</tool_call>Bye");
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("expected `</tool_call>`"), "{p}");
        assert_eq!(p["content"], json!("Bye"));
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(
            parse("It is 12 °C in Paris."),
            json!({"content": "It is 12 °C in Paris.", "reasoning_content": null, "tool_calls": []})
        );
        assert_eq!(parse(""), json!({"content": null, "reasoning_content": null, "tool_calls": []}));
    }

    #[test]
    fn arguments_written_as_a_json_string_are_read() {
        let p = parse("<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>");
        assert_eq!(p["tool_calls"], json!([{"name": "f", "arguments": {"a": 1}}]));
    }
}
