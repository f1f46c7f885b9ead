//! Kimi K2's raw output, as its chat template writes an assistant turn with calls:
//!
//! ```text
//! <think>REASONING</think>CONTENT<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_call_begin|>functions.NAME:1…<|tool_calls_section_end|>
//! ```
//!
//! The call's id is `functions.NAME:INDEX` (the template writes the tool result back under
//! it: `## Return of functions.NAME:0`); the name is the id without `functions.` and the
//! index. The arguments are JSON, read as JSON before `<|tool_call_end|>` is looked for.
//! Reasoning is `<think>…</think>` (K2 Thinking); the turn ends with `<|im_end|>`.

use serde_json::Value;

use super::qwen3::{THINK_END, THINK_START};
use super::qwen3_xml::skip_ws;
use super::raw::{Builder, Parsed, Spec, cut_at, error, json_read_at};

/// Opens the calls.
pub(crate) const SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
/// Closes the calls.
pub(crate) const SECTION_END: &str = "<|tool_calls_section_end|>";
/// Opens a call (its id follows).
pub(crate) const CALL_BEGIN: &str = "<|tool_call_begin|>";
/// Between a call's id and its arguments.
pub(crate) const ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";
/// Closes a call.
pub(crate) const CALL_END: &str = "<|tool_call_end|>";

/// Kimi's layout: `<think>` first, then call sections.
pub(crate) const SPEC: Spec = Spec {
    end_of_turn: &["<|im_end|>"],
    think: Some((THINK_START, THINK_END)),
    starts: &[SECTION_BEGIN],
    ends: &[SECTION_END],
    block: |text, open, _, _, b| section(text, open + SECTION_BEGIN.len(), b),
};

/// Parse Kimi K2 text (see the module's documentation).
pub(crate) fn parse(text: &str) -> Parsed {
    super::raw::drive(text, &SPEC, &|_| None)
}

/// The calls of a section whose body starts at `pos`; where reading goes on.
fn section(text: &str, mut pos: usize, b: &mut Builder) -> usize {
    let mut next_section = text[pos..].find(SECTION_BEGIN).map_or(text.len(), |i| pos + i);
    let mut read = 0;
    loop {
        let region = &text[..next_section];
        let ends_here = next_section == text.len();
        // Past this section: after its end, else at the next section.
        let resync =
            |from: usize| region[from..].find(SECTION_END).map_or(next_section, |i| from + i + SECTION_END.len());
        pos = skip_ws(region, pos);
        if region[pos..].starts_with(SECTION_END) {
            return pos + SECTION_END.len();
        }
        if pos == region.len() && ends_here && read > 0 {
            // Generation may stop before the section's end: the calls read are whole.
            return pos;
        }
        if !region[pos..].starts_with(CALL_BEGIN) {
            let cut = ends_here && (cut_at(region, pos, CALL_BEGIN) || cut_at(region, pos, SECTION_END));
            // The end token cut off after whole calls is no call begun.
            if !(cut && read > 0 && SECTION_END.starts_with(&region[pos..])) {
                let message = format!("expected `{CALL_BEGIN}` or `{SECTION_END}`");
                b.call("", None, Err(error(message, pos, cut)));
            }
            return resync(pos);
        }
        read += 1;
        let id_start = pos + CALL_BEGIN.len();
        let Some(id_end) = region[id_start..].find(ARGUMENT_BEGIN).map(|i| id_start + i) else {
            let id = region[id_start..].trim();
            let message = format!("the call `{id}` has no `{ARGUMENT_BEGIN}`");
            b.call(name_of(id), Some(id.to_owned()), Err(error(message, region.len(), ends_here)));
            return next_section;
        };
        let id = region[id_start..id_end].trim().to_owned();
        let name = name_of(&id);
        let args = id_end + ARGUMENT_BEGIN.len();
        // The JSON is read before the section's end is looked for: a section's start
        // inside one of its strings is text (the JSON's escaping says so), not a call.
        let json = json_read_at(text, args);
        let stop = match &json {
            Ok((_, end)) => *end,
            Err((_, stop)) => *stop,
        };
        if stop > next_section {
            // The section runs on past the JSON: read this call again in it.
            next_section = text[stop..].find(SECTION_BEGIN).map_or(text.len(), |i| stop + i);
            read -= 1;
            continue;
        }
        match json.map_err(|(e, _)| e) {
            Ok((v, end)) => {
                let tag = skip_ws(region, end);
                let result = match v {
                    Value::Object(m) => Ok(m),
                    _ => Err(error(format!("the arguments of `{name}` are not a JSON object"), args, false)),
                };
                if region[tag..].starts_with(CALL_END) {
                    b.call(name, Some(id), result);
                    pos = tag + CALL_END.len();
                } else {
                    let cut = ends_here && cut_at(region, tag, CALL_END);
                    b.call(name, Some(id), Err(error(format!("expected `{CALL_END}` after the arguments"), tag, cut)));
                    pos = region[tag..].find(CALL_END).map_or(region.len(), |i| tag + i + CALL_END.len());
                    if pos == region.len() {
                        return next_section;
                    }
                }
            }
            Err(e) => {
                let incomplete = e.incomplete && ends_here;
                b.call(name, Some(id), Err(super::raw::CallError { incomplete, ..e }));
                pos = region[args..].find(CALL_END).map_or(region.len(), |i| args + i + CALL_END.len());
                if pos == region.len() {
                    return next_section;
                }
            }
        }
    }
}

/// The function's name in a call id: `functions.NAME:0` is `NAME`.
fn name_of(id: &str) -> String {
    let id = id.strip_prefix("functions.").unwrap_or(id);
    id.rsplit_once(':').map_or(id, |(name, _)| name).to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::raw::Family;
    use super::super::raw::tests::{as_json, parse_every_way};

    fn parse(text: &str) -> Value {
        as_json(&parse_every_way(text, Family::Kimi, &|_| None))
    }

    #[test]
    fn the_templates_layout_parses() {
        let p = parse(
            "<think>Two cities.</think>Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris <|tool_call_end|>\", \"days\": 3}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"東京\", \"days\": null, \"e\": 1e2}<|tool_call_end|><|tool_calls_section_end|><|im_end|>",
        );
        assert_eq!(
            p,
            json!({"content": "Checking.", "reasoning_content": "Two cities.", "tool_calls": [
                {"name": "get_weather", "id": "functions.get_weather:0", "arguments": {"city": "Paris <|tool_call_end|>", "days": 3}},
                {"name": "get_weather", "id": "functions.get_weather:1", "arguments": {"city": "東京", "days": null, "e": 100.0}}
            ]})
        );
        // Whitespace between the tokens, as models write it; text after the section.
        let p = parse(
            "<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.ls:0 <|tool_call_argument_begin|> {} <|tool_call_end|>\n<|tool_calls_section_end|>\nDone.",
        );
        assert_eq!(p["tool_calls"], json!([{"name": "ls", "id": "functions.ls:0", "arguments": {}}]));
        assert_eq!(p["content"], json!("Done."));
        // Generation stopped before the section's end: the calls read are whole.
        let p = parse(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0<|tool_call_argument_begin|>{\"path\": \".\"}<|tool_call_end|>",
        );
        assert_eq!(p["tool_calls"], json!([{"name": "ls", "id": "functions.ls:0", "arguments": {"path": "."}}]));
    }

    #[test]
    fn truncated_and_malformed_calls_are_errors() {
        for cut in [
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0<|tool_call_argument_begin|>{\"path\": \"/t",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.ls:0<|tool_call_argument_begin|>{}<|tool_ca",
        ] {
            let p = parse(cut);
            assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{cut}: {p}");
            assert_eq!(p["tool_calls"][0]["name"], json!("ls"), "{cut}: {p}");
        }
        let p = parse("<|tool_calls_section_begin|>");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
        let p = parse(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>[1]<|tool_call_end|><|tool_call_begin|>functions.b:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        );
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(false), "{p}");
        assert_eq!(p["tool_calls"][1], json!({"name": "b", "id": "functions.b:1", "arguments": {}}));
    }

    #[test]
    fn a_section_inside_a_json_string_is_text_not_a_call() {
        // The model quotes text that holds a whole section (a page it read, a file it
        // writes): the JSON's escaping says where the string ends, so it is one call.
        let inner = "<|tool_calls_section_begin|><|tool_call_begin|>functions.rm:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
        let text = format!(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0<|tool_call_argument_begin|>{{\"text\": \"{inner}\"}}<|tool_call_end|><|tool_calls_section_end|>"
        );
        let p = parse(&text);
        assert_eq!(
            p["tool_calls"],
            json!([{"name": "write", "id": "functions.write:0", "arguments": {"text": inner}}]),
            "{p}"
        );
        assert_eq!(p["content"], json!(null), "{p}");
        // Cut off inside the string: an incomplete call, and still no `rm`.
        let cut = &text[..text.find("<|tool_call_end|><|tool_calls_section_end|>\"").unwrap()];
        let p = parse(cut);
        assert_eq!(p["tool_calls"].as_array().map(Vec::len), Some(1), "{p}");
        assert_eq!(p["tool_calls"][0]["error"]["incomplete"], json!(true), "{p}");
        // Broken after the string: an error, and still no `rm`.
        let p = parse(&text.replace("\"}<|tool_call_end|>", "\", oops}<|tool_call_end|>"));
        assert_eq!(p["tool_calls"].as_array().map(Vec::len), Some(1), "{p}");
        assert_eq!(p["tool_calls"][0]["name"], json!("write"), "{p}");
    }

    #[test]
    fn plain_text_is_content_only() {
        assert_eq!(
            parse("Hello.<|im_end|>"),
            json!({"content": "Hello.", "reasoning_content": null, "tool_calls": []})
        );
    }
}
