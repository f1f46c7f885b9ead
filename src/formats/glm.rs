//! GLM 4.5 and later (4.6, 4.7): the raw output, as its chat template writes an assistant
//! turn with calls:
//!
//! ```text
//! \n<think>REASONING</think>\nCONTENT\n<tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>
//! ```
//!
//! (GLM 4.7 writes the same without the newlines between the tags.) A value is text: the
//! template writes a string as it is and anything else as JSON (`tojson`), so values are
//! typed by the tool's schema as `qwen3-xml` types them (`1` is `1` for an integer, `"1"`
//! for a string); a parameter the schema does not type stays text. A value is verbatim
//! (whitespace kept) and ends at the `</arg_value>` followed by the next `<arg_key>` or by
//! `</tool_call>`, so the closing tag's text inside a value stays in it. Reasoning is
//! `<think>…</think>`; the turn ends at `<|user|>` or `<|observation|>`.

use serde_json::{Map, Value};

use super::qwen3::{CALL_END, CALL_START, THINK_END, THINK_START};
use super::qwen3_xml::{skip_ws, tool_call_block, typed};
use super::raw::{CallError, Parsed, SchemaOf, Spec, cut_at, error, value_end};

/// Opens an argument's name.
pub(crate) const ARG_KEY: &str = "<arg_key>";
/// Closes an argument's name.
pub(crate) const ARG_KEY_END: &str = "</arg_key>";
/// Opens an argument's value.
pub(crate) const ARG_VALUE: &str = "<arg_value>";
/// Closes an argument's value.
pub(crate) const ARG_VALUE_END: &str = "</arg_value>";
/// The tokens generation stops at, which an output may still end with.
const END_OF_TURN: &[&str] = &["<|user|>", "<|observation|>", "<|endoftext|>"];

/// GLM's layout: `<think>` first, then `<tool_call>` blocks.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: END_OF_TURN,
    think: Some((THINK_START, THINK_END)),
    starts: &[CALL_START],
    ends: &[CALL_END],
    block: |text, open, _, schema_of, b| tool_call_block(text, open, schema_of, b, call),
};

/// Parse GLM text (see the module's documentation).
pub(crate) fn parse(text: &str, schema_of: SchemaOf<'_>) -> Parsed {
    super::raw::drive(text, &SPEC, schema_of)
}

/// The call after `<tool_call>` at `body`: its name, its arguments, and where reading goes on.
fn call(
    text: &str,
    body: usize,
    next_start: usize,
    schema_of: SchemaOf<'_>,
) -> (String, Result<Map<String, Value>, CallError>, usize) {
    let region = &text[..next_start];
    let ends_here = next_start == text.len();
    let resync = |from: usize| region[from..].find(CALL_END).map_or(next_start, |i| from + i + CALL_END.len());
    // The name runs to the first tag.
    let name_end = region[body..].find('<').map_or(region.len(), |i| body + i);
    let name = region[body..name_end].trim().to_owned();
    if name_end == region.len() {
        let message = format!("`{CALL_START}{name}` has no arguments or `{CALL_END}`");
        return (name, Err(error(message, name_end, ends_here)), next_start);
    }
    if name.is_empty() {
        let message = format!("expected the function's name after `{CALL_START}`");
        return (name, Err(error(message, body, false)), resync(body));
    }
    let schema = schema_of(&name);
    let mut args = Map::new();
    let mut pos = name_end;
    loop {
        if region[pos..].starts_with(CALL_END) {
            return (name, Ok(args), pos + CALL_END.len());
        }
        if !region[pos..].starts_with(ARG_KEY) {
            let cut = ends_here && (cut_at(region, pos, ARG_KEY) || cut_at(region, pos, CALL_END));
            let message = format!("expected `{ARG_KEY}` or `{CALL_END}`");
            return (name, Err(error(message, pos, cut)), resync(pos));
        }
        let key_start = pos + ARG_KEY.len();
        let Some(key_end) = region[key_start..].find(ARG_KEY_END).map(|i| key_start + i) else {
            let message = format!("the argument's name has no `{ARG_KEY_END}`");
            return (name, Err(error(message, region.len(), ends_here)), next_start);
        };
        let key = region[key_start..key_end].trim().to_owned();
        pos = skip_ws(region, key_end + ARG_KEY_END.len());
        if !region[pos..].starts_with(ARG_VALUE) {
            let cut = ends_here && cut_at(region, pos, ARG_VALUE);
            let message = format!("expected `{ARG_VALUE}` after the argument `{key}`");
            return (name, Err(error(message, pos, cut)), resync(pos));
        }
        let value_start = pos + ARG_VALUE.len();
        let Some(end) = value_end(region, value_start, ARG_VALUE_END, &[ARG_KEY, CALL_END]) else {
            let message = format!("the argument `{key}` has no `{ARG_VALUE_END}`");
            return (name, Err(error(message, region.len(), ends_here)), next_start);
        };
        if args.contains_key(&key) {
            let message = format!("the argument `{key}` of `{name}` is given twice");
            return (name, Err(error(message, key_start, false)), resync(end));
        }
        let member = schema.as_ref().and_then(|s| s.get("properties")?.get(&key));
        args.insert(key, typed(&region[value_start..end], member));
        pos = skip_ws(region, end + ARG_VALUE_END.len());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "arg1": {"type": "integer"}, "city": {"type": "string"}, "days": {"type": "integer"},
            "x": {"type": ["number", "null"]}, "all": {"type": "boolean"}, "tags": {"type": "array"}, "o": {"type": "object"}
        }})
    }

    fn parse(text: &str) -> Value {
        let s = schema();
        as_json(&parse_every_way(text, Family::Glm, &|name| (name != "untyped").then(|| s.clone())))
    }

    #[test]
    fn the_templates_layout_parses() {
        // llama.cpp's GLM-4.5 parser tests: a call after a newline, with and without a thought.
        let p = parse("\n<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}}]})
        );
        let p = parse(
            "\n<think>I'm\nthinking</think>\n<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        );
        assert_eq!(p["reasoning_content"], json!("I'm\nthinking"));
        assert_eq!(p["tool_calls"], json!([{"name": "special_function", "arguments": {"arg1": 1}}]));
        // Content first, then two calls in the GLM 4.7 layout (no newlines).
        let p = parse(
            "\n<think></think>\nChecking both.\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>東京</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>1984</arg_value></tool_call><|observation|>",
        );
        assert_eq!(
            p,
            json!({"content": "Checking both.", "reasoning_content": null, "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "東京", "days": 3}},
                {"name": "get_weather", "arguments": {"city": "1984"}}
            ]})
        );
    }

    #[test]
    fn values_are_typed_by_the_schema_and_kept_verbatim() {
        let p = parse(
            "<tool_call>f\n<arg_key>x</arg_key>\n<arg_value>null</arg_value>\n<arg_key>all</arg_key>\n<arg_value>true</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", 2]</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{\"k\": 1.5e3}</arg_value>\n<arg_key>city</arg_key>\n<arg_value>  two\nlines </arg_value> </arg_value>\n</tool_call>",
        );
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "f", "arguments": {"x": null, "all": true, "tags": ["a", 2], "o": {"k": 1500.0}, "city": "  two\nlines </arg_value> "}}])
        );
        // No schema: text.
        let p = parse("<tool_call>untyped<arg_key>n</arg_key><arg_value>3</arg_value></tool_call>");
        assert_eq!(p["tool_calls"], json!([{"name": "untyped", "arguments": {"n": "3"}}]));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        for cut in [
            "<tool_call>get_weather",
            "<tool_call>get_weather\n<arg_key>ci",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_val",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_c",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
            assert_eq!(p["tool_calls"][0]["name"], json!("get_weather"), "{cut}: {p}");
        }
        let p = parse("<tool_call>a<arg_key>k</arg_key>v</tool_call>\n<tool_call>b</tool_call>");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
    }

    #[test]
    fn a_call_quoted_in_a_value_never_runs() {
        // `content` quotes a whole call: the quoted `<tool_call>` cuts `write_file` off,
        // which reads just like a call cut off and a new one begun. Neither runs, nor
        // anything after.
        let text = "<tool_call>write_file\n<arg_key>content</arg_key>\n<arg_value>To delete:\n<tool_call>rm\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call></arg_value>\n</tool_call>\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>";
        let p = parse(text);
        super::super::raw::tests::assert_cut_and_refused(&p, "write_file", &["rm", "get_weather"]);
    }

    #[test]
    fn well_formed_calls_and_a_malformed_call_that_ended_still_run() {
        let p =
            parse("<tool_call>untyped<arg_key>n</arg_key><arg_value>1</arg_value></tool_call><tool_call>b</tool_call>");
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "untyped", "arguments": {"n": "1"}}, {"name": "b", "arguments": {}}])
        );
        // Its `</tool_call>` came before the next call: an error in its place only.
        let p =
            parse("<tool_call>a<arg_key>k</arg_key><arg_value>v</arg_value>oops</tool_call>\n<tool_call>b</tool_call>");
        assert!(p["tool_calls"][0]["error"].is_object(), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "arguments": {}}));
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(
            parse("It is 12 °C."),
            json!({"content": "It is 12 °C.", "reasoning_content": null, "tool_calls": []})
        );
    }
}
