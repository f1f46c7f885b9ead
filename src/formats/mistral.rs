//! Mistral's raw output, in the three layouts its tokenizers have used:
//!
//! ```text
//! [TOOL_CALLS][{"name": "NAME", "arguments": {…}, "id": "abcdef123"}, …]   (v3–v7: a JSON list)
//! [TOOL_CALLS]NAME[CALL_ID]abcdef123[ARGS]{…}[TOOL_CALLS]NAME[CALL_ID]…    (v11, Small 3.2: one tag a call, with its id)
//! [TOOL_CALLS]NAME[ARGS]{…}[TOOL_CALLS]NAME[ARGS]{…}                       (v13 and later, Magistral 2509: no id)
//! ```
//!
//! (Checked against mistral-common's rendering as vLLM's tests and tool parsers quote it:
//! `[TOOL_CALLS]get_weather[CALL_ID]call12345[ARGS]{"location": "San Francisco, CA"}</s>`.)
//!
//! Reasoning is `[THINK]…[/THINK]` (Magistral); the turn ends with `</s>`. Text before the
//! first `[TOOL_CALLS]` and after the calls is content. The arguments are JSON, read as
//! JSON, so a `[TOOL_CALLS]` inside a string stays in it.

use serde_json::Value;

use super::raw::{Builder, Parsed, Spec, error, json_at, json_call, json_read_at, name_in_prefix};

/// Starts the calls (and, from v11 on, each call).
pub(crate) const TOOL_CALLS: &str = "[TOOL_CALLS]";
/// Between a call's name (or id) and its arguments (v11 and later).
pub(crate) const ARGS: &str = "[ARGS]";
/// Between a call's name and its id (v11).
pub(crate) const CALL_ID: &str = "[CALL_ID]";
/// Opens the reasoning.
pub(crate) const THINK_START: &str = "[THINK]";
/// Closes the reasoning.
pub(crate) const THINK_END: &str = "[/THINK]";

/// Mistral's layout: `[THINK]` first, then `[TOOL_CALLS]` blocks.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: &["</s>"],
    think: Some((THINK_START, THINK_END)),
    starts: &[TOOL_CALLS],
    ends: &["}", "]"],
    block: |text, tag, _, _, b| {
        let after = tag + TOOL_CALLS.len();
        let start = after + (text[after..].len() - text[after..].trim_start().len());
        let next = if text[start..].starts_with('[') { list(text, start, b) } else { named(text, start, b) };
        // After a call that could not be read, go on at the next tag.
        next.unwrap_or_else(|| {
            let next = text[after..].find(TOOL_CALLS).map_or(text.len(), |i| after + i);
            b.scanned += next - after;
            next
        })
    },
};

/// Parse Mistral text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    super::raw::drive(text, &SPEC, &|_| None)
}

/// The JSON list of calls at `start`; where its text ends, or None when it could not be read.
fn list(text: &str, start: usize, b: &mut Builder) -> Option<usize> {
    let (v, end) = match json_read_at(text, start) {
        Ok(found) => found,
        Err((e, broke)) => {
            // The name is looked for before the next tag only: from each of many lists that
            // do not parse to the end of the text would be quadratic (and another call's);
            // and before where the JSON broke (what follows is not part of it).
            let stop = text[start..].find(TOOL_CALLS).map_or(text.len(), |i| start + i);
            b.scanned += stop - start;
            b.call(name_in_prefix(&text[start..stop.min(broke)]), None, Err(e));
            return None;
        }
    };
    let Value::Array(items) = v else {
        b.call("", None, Err(error("the calls are not a JSON list", start, false)));
        return Some(end);
    };
    for item in &items {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        match json_call(item, &["arguments", "parameters"], start) {
            Ok((name, args)) => b.call(name, id, Ok(args)),
            Err(e) => b.call(name, id, Err(e)),
        }
    }
    Some(end)
}

/// `NAME[ARGS]{…}` or `NAME[CALL_ID]ID[ARGS]{…}` at `start`; where it ends, or None.
fn named(text: &str, start: usize, b: &mut Builder) -> Option<usize> {
    let Some(bracket) = text[start..].find('[').map(|i| start + i) else {
        let name = text[start..].trim();
        b.call(name, None, Err(error(format!("expected `{ARGS}` after the name"), text.len(), true)));
        return Some(text.len());
    };
    let name = text[start..bracket].trim().to_owned();
    let mut id = None;
    let mut at = bracket;
    if text[at..].starts_with(CALL_ID) {
        let id_start = at + CALL_ID.len();
        let Some(args) = text[id_start..].find(ARGS).map(|i| id_start + i) else {
            b.call(name, None, Err(error(format!("expected `{ARGS}` after the call's id"), text.len(), true)));
            return Some(text.len());
        };
        id = Some(text[id_start..args].trim().to_owned());
        at = args;
    }
    // The text ends inside the `[ARGS]` or `[CALL_ID]` token.
    let cut = ARGS.starts_with(&text[at..]) || CALL_ID.starts_with(&text[at..]);
    if name.is_empty() || !text[at..].starts_with(ARGS) {
        let message = if name.is_empty() {
            "expected a function name".to_owned()
        } else {
            format!("expected `{ARGS}` after the name")
        };
        b.call(name, id, Err(error(message, at, cut)));
        return None;
    }
    let args = at + ARGS.len();
    match json_at(text, args) {
        Ok((Value::Object(m), end)) => {
            b.call(name, id, Ok(m));
            Some(end)
        }
        Ok((_, end)) => {
            b.call(name, id, Err(error("the arguments are not a JSON object", args, false)));
            Some(end)
        }
        Err(e) => {
            b.call(name, id, Err(e));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::Mistral, &|_| None))
    }

    #[test]
    fn the_json_list_layout() {
        // As the Mistral Small 3.1 template writes calls back: a space after the tag, the
        // function's JSON with the id, `</s>`.
        let p = parse(
            "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcdef123\"}, {\"name\": \"now\", \"arguments\": {}, \"id\": \"bcdefa234\"}]</s>",
        );
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": null, "tool_calls": [
                {"name": "get_weather", "id": "abcdef123", "arguments": {"city": "Paris"}},
                {"name": "now", "id": "bcdefa234", "arguments": {}}
            ]})
        );
    }

    #[test]
    fn the_args_layouts_with_and_without_call_ids() {
        let p = parse(
            "[THINK]Two cities.[/THINK]Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"a [TOOL_CALLS] b\", \"n\": 3}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Lyon\", \"n\": 3.5}",
        );
        assert_eq!(
            p,
            json!({"content": "Checking.", "reasoning_content": "Two cities.", "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "a [TOOL_CALLS] b", "n": 3}},
                {"name": "get_weather", "arguments": {"city": "Lyon", "n": 3.5}}
            ]})
        );
        // As mistral-common renders a v11 call (quoted in vLLM's tests).
        let p = parse("[TOOL_CALLS]get_weather[CALL_ID]call12345[ARGS]{\"location\": \"San Francisco, CA\"}</s>");
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "get_weather", "id": "call12345", "arguments": {"location": "San Francisco, CA"}}])
        );
        let p = parse("[TOOL_CALLS]add[CALL_ID]Xq9aB2cD1[ARGS]{\"a\": 1, \"b\": null}</s>");
        assert_eq!(p["tool_calls"], json!([{"name": "add", "id": "Xq9aB2cD1", "arguments": {"a": 1, "b": null}}]));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        for cut in [
            "[TOOL_CALLS]add",
            "[TOOL_CALLS]add[AR",
            "[TOOL_CALLS]add[ARGS]{\"a\": ",
            "[TOOL_CALLS][{\"name\": \"add\"",
            "[TOOL_CALLS]add[CALL_ID]abc",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
            assert_eq!(p["tool_calls"][0]["name"], json!("add"), "{cut}: {p}");
        }
        let p = parse("[TOOL_CALLS]add{\"a\": 1}[TOOL_CALLS]sub[ARGS]{}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "sub", "arguments": {}}));
        let p = parse("[TOOL_CALLS][{\"arguments\": {}}]");
        assert!(p["tool_calls"][0]["error"]["message"].as_str().unwrap().contains("\"name\""), "{p}");
    }

    #[test]
    fn many_calls_that_do_not_parse_are_read_in_linear_work() {
        // Each list that does not parse is named from the text before the next tag only
        // (from each to the end of the text, the whole parse was quadratic), and the next
        // tag is looked for once.
        for unit in
            ["[TOOL_CALLS][x", "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {", "[TOOL_CALLS]f[ARGS]{\"a\": ]"]
        {
            let text = unit.repeat(2000);
            let (parsed, work) = super::super::raw::drive_work(&text, &super::SPEC, &|_| None);
            assert_eq!(parsed.tool_calls.len(), 2000, "{unit}");
            assert!(parsed.tool_calls.iter().all(|c| c.arguments.is_err()), "{unit}");
            assert!(work < 8 * text.len(), "{unit}: {work} bytes scanned for {}", text.len());
        }
        let p = parse("[TOOL_CALLS][x[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]");
        assert_eq!(p["tool_calls"][0]["name"], json!(""), "another call's name: {p}");
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(
            parse("Il fait 12 °C.</s>"),
            json!({"content": "Il fait 12 °C.", "reasoning_content": null, "tool_calls": []})
        );
    }
}
