//! Qwen3-Coder's (and later Qwen models') raw output, as its chat template writes a call:
//!
//! ```text
//! <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>
//! ```
//!
//! Checked against the Qwen3-Coder template (`'<parameter=' + name + '>\n'`, the value,
//! `'\n</parameter>\n'`, then `'</function>\n</tool_call>'`). A value is text: the template writes a string as it is, an object or a list as JSON, and
//! anything else with Python's `str` (`True`, `None`, `3`). So values are typed by the
//! tool's schema (`3` is `3` for an integer, `"3"` for a string; `True` is `true` for a
//! boolean); a parameter the schema does not type stays text. The newline the template
//! writes after `<parameter=KEY>` and before `</parameter>` is not part of the value; any
//! other whitespace is. A value ends at the `</parameter>` followed by the next
//! `<parameter=` or by `</function>`, so the closing tag's text inside a value stays in it.
//! Reasoning is `<think>…</think>`, as for `qwen3`.

use serde_json::{Map, Number, Value};

use super::qwen3::{CALL_END, CALL_START, THINK_END, THINK_START};
use super::raw::{Builder, CallError, Parsed, SchemaOf, Spec, error};

/// Opens the function inside a call: `<function=NAME>`.
pub(crate) const FUNCTION: &str = "<function=";
/// Closes the function.
pub(crate) const FUNCTION_END: &str = "</function>";
/// Opens a parameter: `<parameter=KEY>`.
pub(crate) const PARAMETER: &str = "<parameter=";
/// Closes a parameter.
pub(crate) const PARAMETER_END: &str = "</parameter>";

/// Qwen3-Coder's layout: `<think>` first, then `<tool_call>` blocks.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: &["<|im_end|>", "<|endoftext|>"],
    think: Some((THINK_START, THINK_END)),
    starts: &[CALL_START],
    ends: &[CALL_END],
    block: |text, open, _, schema_of, b| tool_call_block(text, open, schema_of, b, call),
};

/// Why a call after a call cut off by another call's start does not run.
pub(crate) const AFTER_CUT: &str = "not run: it follows a call that the start of another call cut off, \
     so it may be text quoted in that call's value (nothing after such a call runs)";

/// How a `<tool_call>` body is read: the call after `<tool_call>` at `body`, given where
/// the next `<tool_call>` starts; its name, its arguments, and where reading goes on.
pub(crate) type ReadCall = fn(
    text: &str,
    body: usize,
    next_start: usize,
    schema_of: SchemaOf<'_>,
) -> (String, Result<Map<String, Value>, CallError>, usize);

/// The block `<tool_call>` opens at `open` (Qwen3-Coder, GLM: values are verbatim text),
/// read by `call`; the offset where reading goes on.
///
/// A call that has not ended (its `</tool_call>` not read) when the next `<tool_call>`
/// starts is cut off by it: an error, as is every call after it in the text, each naming
/// its tool (see [`AFTER_CUT`]). A value is verbatim text, so a value that quotes a whole
/// call looks just like a call cut off and a new one started; the quoted call must not run.
/// So the block reads on to the end of the text (a stream holds it until the end).
pub(crate) fn tool_call_block(
    text: &str,
    open: usize,
    schema_of: SchemaOf<'_>,
    b: &mut Builder,
    call: ReadCall,
) -> usize {
    let read = |open: usize| {
        let body = open + CALL_START.len();
        let next_start = text[body..].find(CALL_START).map_or(text.len(), |i| body + i);
        let (name, result, end) = call(text, body, next_start, schema_of);
        let cut = end == next_start && next_start < text.len() && !text[..end].ends_with(CALL_END);
        (name, result, end, cut)
    };
    let (name, result, end, cut) = read(open);
    b.call(name, None, result);
    if !cut {
        return end;
    }
    let mut pos = end;
    while let Some(at) = text[pos..].find(CALL_START).map(|i| pos + i) {
        b.text(&text[pos..at]);
        let (name, _, end, _) = read(at);
        b.call(name, None, Err(error(AFTER_CUT, at, false)));
        pos = end;
    }
    pos
}

/// Parse Qwen3-Coder text (see the module's documentation).
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
    let at_end = |i: usize| i >= text.len();
    // Past the end of this call: after its end tag, else at the next call.
    let resync = |from: usize| region[from..].find(CALL_END).map_or(next_start, |i| from + i + CALL_END.len());
    let mut pos = skip_ws(region, body);
    if !region[pos..].starts_with(FUNCTION) {
        let cut = at_end(pos) || FUNCTION.starts_with(&region[pos..]);
        return (
            String::new(),
            Err(error(format!("expected `{FUNCTION}NAME>` after `{CALL_START}`"), pos, cut)),
            resync(pos),
        );
    }
    let name_start = pos + FUNCTION.len();
    let Some(gt) = region[name_start..].find('>').map(|i| name_start + i) else {
        let name = region[name_start..].trim().to_owned();
        return (
            name,
            Err(error("the function's name has no closing `>`", next_start, at_end(next_start))),
            next_start,
        );
    };
    let name = region[name_start..gt].trim().to_owned();
    let schema = schema_of(&name);
    let mut args = Map::new();
    pos = skip_ws(region, gt + 1);
    loop {
        if region[pos..].starts_with(FUNCTION_END) {
            pos = skip_ws(region, pos + FUNCTION_END.len());
            if region[pos..].starts_with(CALL_END) {
                return (name, Ok(args), pos + CALL_END.len());
            }
            let cut = at_end(pos) || CALL_END.starts_with(&region[pos..]);
            return (name, Err(error(format!("expected `{CALL_END}` after `{FUNCTION_END}`"), pos, cut)), resync(pos));
        }
        if !region[pos..].starts_with(PARAMETER) {
            let cut = at_end(pos) || PARAMETER.starts_with(&region[pos..]) || FUNCTION_END.starts_with(&region[pos..]);
            let message = format!("expected `{PARAMETER}KEY>` or `{FUNCTION_END}`");
            return (name, Err(error(message, pos, cut)), resync(pos));
        }
        let key_start = pos + PARAMETER.len();
        let Some(gt) = region[key_start..].find('>').map(|i| key_start + i) else {
            return (
                name,
                Err(error("the parameter's name has no closing `>`", next_start, at_end(next_start))),
                next_start,
            );
        };
        let key = region[key_start..gt].trim().to_owned();
        let value_start = gt + 1;
        let Some(value_end) = value_end(region, value_start) else {
            let message = format!("the parameter `{key}` has no `{PARAMETER_END}`");
            return (name, Err(error(message, next_start, at_end(next_start))), next_start);
        };
        let raw = &region[value_start..value_end];
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        if args.contains_key(&key) {
            let message = format!("the argument `{key}` of `{name}` is given twice");
            return (name, Err(error(message, key_start, false)), resync(value_end));
        }
        let member = schema.as_ref().and_then(|s| s.get("properties")?.get(&key));
        args.insert(key, typed(raw, member));
        pos = skip_ws(region, value_end + PARAMETER_END.len());
    }
}

/// Where the value starting at `from` ends: the first `</parameter>` followed (after
/// whitespace) by `<parameter=` or `</function>`; else the last `</parameter>` before the
/// text ends.
fn value_end(region: &str, from: usize) -> Option<usize> {
    let mut last = None;
    let mut at = from;
    while let Some(i) = region[at..].find(PARAMETER_END) {
        let end = at + i;
        let after = region[end + PARAMETER_END.len()..].trim_start();
        if after.starts_with(PARAMETER) || after.starts_with(FUNCTION_END) {
            return Some(end);
        }
        last = Some(end);
        at = end + PARAMETER_END.len();
    }
    last
}

pub(crate) fn skip_ws(text: &str, pos: usize) -> usize {
    pos + (text[pos..].len() - text[pos..].trim_start().len())
}

/// `raw` as the type `schema` names: text when it allows a string (or names no type), else
/// the first of null, boolean, integer, number, object or array it reads as; the text
/// itself when none fits (validation then says what is wrong).
pub(crate) fn typed(raw: &str, schema: Option<&Value>) -> Value {
    let names: Vec<&str> = match schema.and_then(|s| s.get("type")) {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let text = || Value::String(raw.to_owned());
    if names.is_empty() {
        return text();
    }
    let word = raw.trim();
    for name in &names {
        let v = match *name {
            "null" if matches!(word, "null" | "None") => Some(Value::Null),
            "boolean" if word.eq_ignore_ascii_case("true") => Some(Value::Bool(true)),
            "boolean" if word.eq_ignore_ascii_case("false") => Some(Value::Bool(false)),
            "integer" => super::raw::integer(word),
            "number" => super::raw::integer(word)
                .or_else(|| word.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)),
            "object" => super::raw::json_value(word).ok().filter(Value::is_object),
            "array" => super::raw::json_value(word).ok().filter(Value::is_array),
            _ => None,
        };
        if let Some(v) = v {
            return v;
        }
    }
    text()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::tests::{as_json, parse_every_way};
    use super::super::raw::{self, Family};

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": ["number", "null"]},
            "all": {"type": "boolean"}, "tags": {"type": "array"}, "o": {"type": "object"}, "code": {"type": "string"}
        }})
    }

    fn parse(text: &str) -> Value {
        let s = schema();
        as_json(&parse_every_way(text, Family::Qwen3Xml, &|name| (name == "f").then(|| s.clone())))
    }

    #[test]
    fn the_templates_layout_parses_and_values_are_typed_by_the_schema() {
        let text = "I'll list it.\n<tool_call>\n<function=f>\n<parameter=path>\n 007 \n</parameter>\n<parameter=n>\n3\n</parameter>\n<parameter=x>\nNone\n</parameter>\n<parameter=all>\nTrue\n</parameter>\n<parameter=tags>\n[\"a\", 2]\n</parameter>\n<parameter=o>\n{\"k\": null}\n</parameter>\n<parameter=other>\n5\n</parameter>\n</function>\n</tool_call><|im_end|>";
        assert_eq!(
            parse(text),
            json!({"content": "I'll list it.", "reasoning_content": null, "tool_calls": [{"name": "f", "arguments": {
                "path": " 007 ", "n": 3, "x": null, "all": true, "tags": ["a", 2], "o": {"k": null}, "other": "5"
            }}]})
        );
    }

    #[test]
    fn values_keep_newlines_and_marker_text() {
        let text = "<tool_call>\n<function=f>\n<parameter=code>\nif a:\n    print(\"</parameter>\")\n\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>";
        let p = parse(text);
        assert_eq!(p["tool_calls"][0]["arguments"]["code"], json!("if a:\n    print(\"</parameter>\")\n"), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "g", "arguments": {}}));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        for cut in [
            "<tool_call>\n<function=f>\n<parameter=path>\n/tm",
            "<tool_call>\n<function=f>\n<parameter=path>\n/tmp\n</parameter>\n</func",
            "<tool_call>\n<function=f",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
        }
        let p =
            parse("<tool_call>\n{\"name\": \"f\"}\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "g", "arguments": {}}));
    }

    #[test]
    fn a_call_quoted_in_a_value_never_runs() {
        // `content` quotes a whole call: the quoted `<tool_call>` cuts `write_file` off,
        // which reads just like a call cut off and a new one begun. Neither runs, nor
        // anything after.
        let text = "<tool_call>\n<function=write_file>\n<parameter=content>\nTo delete:\n<tool_call>\n<function=rm>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>\n</parameter>\n</function>\n</tool_call>\nand <tool_call>\n<function=g>\n</function>\n</tool_call>";
        let p = parse(text);
        super::super::raw::tests::assert_cut_and_refused(&p, "write_file", &["rm", "g"]);
        // A call cut off mid-value by a new call is the same text: the new call does not run.
        let p = parse(
            "<tool_call>\n<function=f>\n<parameter=path>\n/tm<tool_call>\n<function=g>\n</function>\n</tool_call>",
        );
        assert!(p["tool_calls"][0]["error"].is_object() && p["tool_calls"][1]["error"].is_object(), "{p}");
    }

    #[test]
    fn well_formed_calls_and_a_malformed_call_that_ended_still_run() {
        let p = parse(
            "<tool_call>\n<function=f>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>",
        );
        assert_eq!(p["tool_calls"], json!([{"name": "f", "arguments": {"n": 1}}, {"name": "g", "arguments": {}}]));
        // Its `</tool_call>` came before the next call: an error in its place only.
        let p = parse(
            "<tool_call>\n<function=f>\n<parameter=n>\n1\n</parameter>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>",
        );
        assert!(p["tool_calls"][0]["error"].is_object(), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "g", "arguments": {}}));
    }

    #[test]
    fn many_calls_after_a_cut_call_fed_in_small_pieces_are_read_in_linear_work() {
        use super::super::raw::SchemaOf;
        let schema_of: SchemaOf<'_> = &|_| None;
        let cases = [
            (
                Family::Qwen3Xml,
                "<tool_call>\n<function=f>\n<parameter=s>\nquoted:\n",
                "<tool_call>\n<function=g>\n</function>\n</tool_call>",
            ),
            (Family::Glm, "<tool_call>f<arg_key>s</arg_key><arg_value>quoted:\n", "<tool_call>g</tool_call>"),
        ];
        for (family, cut, call) in cases {
            let text = format!("{cut}{}", format!("Step, as a model would say.\n{call}\n").repeat(500));
            let (mut events, parsed, rest) = raw::tests::streamed_in_linear_work(family, &text, schema_of);
            events.extend(rest);
            assert_eq!(raw::tests::joined(&events), parsed, "{family:?}");
            assert_eq!(parsed.tool_calls.len(), 501, "{family:?}");
            assert!(parsed.tool_calls.iter().all(|c| c.arguments.is_err()), "{family:?}");
        }
    }

    #[test]
    fn reasoning_and_plain_text() {
        let p = parse("<think>\nList it.\n</think>\n\n<tool_call>\n<function=g>\n</function>\n</tool_call>");
        assert_eq!(
            p,
            json!({"content": null, "reasoning_content": "List it.", "tool_calls": [{"name": "g", "arguments": {}}]})
        );
        assert_eq!(parse("Done."), json!({"content": "Done.", "reasoning_content": null, "tool_calls": []}));
    }
}
