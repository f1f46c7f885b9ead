//! Llama 3.1–3.3 (and 4) raw output: the chat template asks for a call as JSON,
//! `{"name": NAME, "parameters": {…}}`, as the whole message, and writes one back so
//! (ending the turn with `<|eot_id|>`); the model may also start it with `<|python_tag|>`
//! (the ipython environment's tag, ended by `<|eom_id|>`). `"arguments"` is read as well
//! as `"parameters"`, and `{"type": "function", …}` too, as the models write them. Several
//! calls follow one another, separated by whitespace or `;`.
//!
//! Built-in tools (`brave_search.call(query="…")` after `<|python_tag|>`) are not read: such
//! a call is an error, never silence.
//!
//! Checked against the Llama 3.1/3.2/3.3 templates (`'{"name": "' + name + '", ' +
//! '"parameters": ' + arguments | tojson + "}"`, then `<|eot_id|>`, or `<|eom_id|>` in the
//! ipython mode). Llama 4's own template writes calls in Python syntax
//! (`[get_weather(city="Paris")]`), which this module does not read: a Llama 4 model
//! prompted for JSON calls is read as above.

use super::raw::{Builder, Parsed, error, json_at, json_call, name_in_prefix, strip_end};

/// Starts a call in the ipython environment.
pub(crate) const PYTHON_TAG: &str = "<|python_tag|>";
/// The end-of-turn and end-of-message tokens an output may still end with (Llama 4's too).
const END_OF_TURN: &[&str] = &["<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|eom|>"];

/// Whether `text` starts (after whitespace) with `{"name"` or `{"type"`: a JSON call.
pub(crate) fn starts_like_a_call(text: &str) -> bool {
    let Some(rest) = text.trim_start().strip_prefix('{') else { return false };
    let rest = rest.trim_start();
    rest.starts_with("\"name\"") || rest.starts_with("\"type\"")
}

/// Parse Llama 3 text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    let text = strip_end(text, END_OF_TURN);
    let mut b = Builder::default();
    if let Some(tag) = text.find(PYTHON_TAG) {
        b.text(&text[..tag]);
        let start = tag + PYTHON_TAG.len();
        if text[start..].trim_start().starts_with('{') {
            calls(text, start, &mut b);
        } else {
            let name = text[start..].trim_start();
            let name = &name[..name.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(name.len())];
            let message = format!(
                "expected a JSON call `{{\"name\": …, \"parameters\": {{…}}}}` after `{PYTHON_TAG}` (built-in tool calls are not read)"
            );
            b.call(name, None, Err(error(message, start, text[start..].trim().is_empty())));
        }
    } else if starts_like_a_call(text) {
        calls(text, 0, &mut b);
    } else {
        b.text(text);
    }
    b.finish()
}

/// The JSON calls from `pos`; text after the last one is content.
fn calls(text: &str, mut pos: usize, b: &mut Builder) {
    loop {
        match json_at(text, pos) {
            Ok((v, end)) => {
                let name = v.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
                match json_call(&v, &["parameters", "arguments"], pos) {
                    Ok((name, args)) => b.call(name, None, Ok(args)),
                    Err(e) => b.call(name, None, Err(e)),
                }
                let rest = text[end..].trim_start();
                let rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
                pos = text.len() - rest.len();
                if !rest.starts_with('{') {
                    b.text(rest);
                    return;
                }
            }
            Err(e) => {
                b.call(name_in_prefix(&text[pos..]), None, Err(e));
                return;
            }
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
    fn truncated_malformed_and_builtin_calls_are_errors() {
        let p = parse("{\"name\": \"rm\", \"parameters\": {\"path\": \"/t");
        assert_eq!(p["tool_calls"][0]["name"], json!("rm"));
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true));
        let p = parse("<|python_tag|>{\"name\": \"a\", \"parameters\": [1]}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false));
        let p = parse("<|python_tag|>brave_search.call(query=\"x\")<|eom_id|>");
        assert_eq!(p["tool_calls"][0]["name"], json!("brave_search"));
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("built-in"));
        let p = parse("<|python_tag|>");
        assert!(p["tool_calls"][0]["error"].is_object(), "{p}");
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
