//! Hostile text at every raw-text parser: a prompt injection can make a model write
//! anything, so no text may panic a parser, overflow its stack, or make a stream disagree
//! with the whole parse.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use super::raw::{Family, SchemaOf, Stream, detect, parse};

/// Every family's markers, whole; their halves are added by [`pieces`].
const MARKERS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<|tool_call>",
    "<tool_call|>",
    "<|\"|>",
    "<|channel>",
    "<channel|>",
    "<start_function_call>",
    "<end_function_call>",
    "<escape>",
    "<start_function_response>",
    "<end_function_response>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|eot|>",
    "<|eom|>",
    "<end_of_turn>",
    "<turn|>",
    "<|tool_response>",
    "<eos>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|user|>",
    "<|observation|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "</s>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|constrain|>",
    "to=functions.",
    "to=functions.f",
    " commentary",
    "analysis",
    "final",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<｜DSML｜invoke",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter",
    "</｜DSML｜parameter>",
    "<｜end▁of▁sentence｜>",
    " name=\"f\"",
    " string=\"true\"",
    " string=\"false\"",
    "functions.f:0",
    "call:",
    "call:f",
    "f",
    "a",
    "{\"name\": \"f\"",
    "\"arguments\": ",
    "\"parameters\": ",
    "{\"a\": 1}",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "\"",
    "'",
    "\\",
    "\\u",
    "\\ud800",
    ":",
    ",",
    "=",
    ".",
    "-",
    "1e999",
    "-0",
    "0x1F",
    "true",
    "null",
    "None",
    "\n",
    " ",
    "\t",
    "é",
    "°",
    "🦀",
    "\u{0}",
    "\u{feff}",
    "\u{202e}",
    "｜",
    "▁",
];

/// A whole call of each family (and its variants), for the mutations to start from.
const CALLS: &[&str] = &[
    "<think>hm</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1, \"s\": \"x\"}}\n</tool_call>",
    "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n[1, 2]\n</parameter>\n</function>\n</tool_call>",
    "<|channel>thought\nhm<channel|><|tool_call>call:f{a:1,s:<|\"|>x<|\"|>,c:{d:true},b:[1,<|\"|>y<|\"|>]}<tool_call|>",
    "<start_function_call>call:f{a:1,s:<escape>x<escape>,c:{d:true},b:[1,<escape>y<escape>]}<end_function_call>",
    "<start_function_call>call:f{s:<escape>x<end_function_call><start_function_call>call:g{}<end_function_call><escape>}<end_function_call>",
    "call:f{s:<escape>x\ncall:g{}\n<escape>}\n<start_function_call>call:g{}<end_function_call>",
    "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|eom_id|>",
    "{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"parameters\": {}}",
    "[f(a=1, s='x', b=[1, 2], c={'d': True}), g()]",
    "<|python_tag|>brave_search.call(query=\"x\")<|eom_id|>",
    "[THINK]hm[/THINK][TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]{}",
    "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abc123def\"}]</s>",
    "<tool_call>\n<function=f>\n<parameter=s>\n<tool_call>\n<function=g>\n</function>\n</tool_call>\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>f<arg_key>s</arg_key><arg_value><tool_call>g</tool_call></arg_value></tool_call><tool_call>g</tool_call>",
    "<think>hm</think><tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>s</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"s\": \"<|tool_calls_section_begin|><|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{}<|tool_call_end|>\"}<|tool_call_end|><|tool_calls_section_end|>",
    "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">1</｜DSML｜parameter>\n<｜DSML｜parameter name=\"s\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
];

/// The markers, whole and cut at each char boundary (a half of a multibyte marker too).
fn pieces() -> Vec<String> {
    let mut out = Vec::new();
    for m in MARKERS {
        out.push((*m).to_owned());
        for (i, _) in m.char_indices().skip(1) {
            out.push(m[..i].to_owned());
        }
    }
    out
}

/// A schema for `f` that types the values written as text.
fn schema(name: &str) -> Option<Value> {
    (name == "f").then(|| {
        json!({"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "array"}, "c": {"type": "object"},
            "d": {"type": "boolean"}, "e": {"type": "number"}, "s": {"type": "string"}
        }})
    })
}

/// Every entry point a model's text reaches, with `text` and split at `cuts` for a stream:
/// none may panic, and a stream's parse and events agree with the whole parse.
fn every_entry_point(text: &str, cuts: &[usize]) {
    let _ = detect(text);
    let _ = super::functiongemma::scan_calls(text, &schema);
    let _ = super::functiongemma::parse_calls(text);
    let _ = super::functiongemma::scan_responses(text);
    for schema_of in [&(|_: &str| None) as SchemaOf<'_>, &schema] {
        for family in Family::ALL {
            let whole = parse(text, *family, schema_of);
            let bytes = text.as_bytes();
            let mut s = Stream::new(*family);
            let mut events = Vec::new();
            let mut at = 0;
            for &cut in cuts {
                let cut = cut.min(bytes.len()).max(at);
                events.extend(s.push(&bytes[at..cut], schema_of));
                at = cut;
            }
            events.extend(s.push(&bytes[at..], schema_of));
            let (streamed, rest) = s.finish_events(schema_of).expect("the text is UTF-8");
            events.extend(rest);
            assert_eq!(streamed, whole, "{family:?} streamed at {cuts:?}: {text:?}");
            assert_eq!(super::raw::tests::joined(&events), whole, "{family:?} events at {cuts:?}: {text:?}");
        }
    }
}

/// Random text of markers, their halves, JSON and Python punctuation and any character, and
/// each family's whole calls with such pieces put in and cut anywhere: 1000 cases by
/// default (`PACKS_HOSTILE_CASES=100000 cargo test --lib formats::hostile` for a long run).
#[test]
fn hostile_text_never_panics_and_streams_as_it_parses() {
    let pieces = pieces();
    let piece = prop_oneof![
        4 => proptest::sample::select(pieces),
        1 => any::<char>().prop_map(String::from),
    ];
    let noise = proptest::collection::vec(piece.clone(), 0..24).prop_map(|p| p.concat());
    // A whole call, a few pieces put in at char boundaries, and cut at one.
    let edits = proptest::collection::vec((any::<proptest::sample::Index>(), piece), 0..4);
    let mutated = (proptest::sample::select(CALLS), edits, any::<proptest::sample::Index>(), any::<bool>()).prop_map(
        |(call, edits, cut, whole)| {
            let mut t = call.to_owned();
            for (at, p) in edits {
                let i = super::raw::floor_char(&t, at.index(t.len() + 1));
                t.insert_str(i, &p);
            }
            if !whole {
                t.truncate(super::raw::floor_char(&t, cut.index(t.len() + 1)));
            }
            t
        },
    );
    let texts = prop_oneof![noise, mutated];
    let case = (texts, proptest::collection::vec(0usize..200, 0..4)).prop_map(|(t, mut cuts)| {
        cuts.sort_unstable();
        (t, cuts)
    });
    let cases = std::env::var("PACKS_HOSTILE_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    runner
        .run(&case, |(text, cuts)| {
            every_entry_point(&text, &cuts);
            Ok(())
        })
        .unwrap();
}

/// Each family's call with its arguments nested `depth` deep (`open` and `close` the
/// family's own brackets), closed or not.
fn nested(depth: usize) -> Vec<(Family, String)> {
    let deep = |open: &str, close: &str, closed: bool| {
        format!("{}1{}", open.repeat(depth), if closed { close.repeat(depth) } else { String::new() })
    };
    let mut out = Vec::new();
    for closed in [true, false] {
        let json = format!("{{\"a\": {}}}", deep("[", "]", closed));
        let obj = format!("{{\"a\": {}}}", deep("{\"a\": ", "}", closed));
        for args in [&json, &obj] {
            out.push((Family::Qwen3, format!("<tool_call>{{\"name\": \"f\", \"arguments\": {args}}}</tool_call>")));
            out.push((Family::Llama3, format!("{{\"name\": \"f\", \"parameters\": {args}}}")));
            out.push((Family::Mistral, format!("[TOOL_CALLS]f[ARGS]{args}")));
            out.push((Family::Mistral, format!("[TOOL_CALLS][{{\"name\": \"f\", \"arguments\": {args}}}]")));
            out.push((
                Family::Kimi,
                format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"),
            ));
            out.push((Family::GptOss, format!("<|channel|>commentary to=functions.f<|message|>{args}<|call|>")));
            out.push((
                Family::Deepseek,
                format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{args}<｜tool▁call▁end｜>"),
            ));
            out.push((
                Family::Qwen3Xml,
                format!("<tool_call><function=f><parameter=b>{args}</parameter></function></tool_call>"),
            ));
            out.push((
                Family::Glm,
                format!("<tool_call>f<arg_key>b</arg_key><arg_value>{args}</arg_value></tool_call>"),
            ));
        }
        out.push((Family::Gemma4, format!("<|tool_call>call:f{{a:{}}}<tool_call|>", deep("[", "]", closed))));
        out.push((Family::Gemma4, format!("<|tool_call>call:f{{a:{}}}<tool_call|>", deep("{a:", "}", closed))));
        out.push((
            Family::Functiongemma,
            format!("<start_function_call>call:f{{a:{}}}<end_function_call>", deep("[", "]", closed)),
        ));
        out.push((Family::Llama3, format!("[f(a={})]", deep("[", "]", closed))));
        out.push((Family::Llama3, format!("[f(a={})]", deep("{'a': ", "}", closed))));
        out.push((Family::Llama3, format!("<|python_tag|>brave_search.call(query={})", deep("(", ")", closed))));
    }
    out
}

#[test]
fn arguments_nested_a_hundred_thousand_deep_are_refused_without_exhausting_the_stack() {
    let schema_of: SchemaOf<'_> = &schema;
    for (family, text) in nested(100_000) {
        let p = parse(&text, family, schema_of);
        assert!(
            p.tool_calls.iter().all(|c| c.arguments.is_err() || family == Family::Qwen3Xml || family == Family::Glm),
            "{family:?}"
        );
        let mut s = Stream::new(family);
        for piece in text.as_bytes().chunks(1 << 14) {
            s.push(piece, schema_of);
        }
        assert_eq!(s.finish(schema_of).unwrap(), p, "{family:?}");
    }
}

/// A call that gives an argument twice, in each family's own way: the text says two
/// values (and a value the model quotes can say the second), so the call is refused
/// rather than one of them picked (serde_json keeps the last, other readers the first).
#[test]
fn an_argument_given_twice_is_an_error_in_every_family() {
    let j = "{\"path\": \"/tmp/x\", \"path\": \"/etc/shadow\"}";
    let cases = [
        (Family::Qwen3, format!("<tool_call>\n{{\"name\": \"f\", \"arguments\": {j}}}\n</tool_call>")),
        (Family::Qwen3, "<tool_call>\n{\"name\": \"ls\", \"name\": \"f\", \"arguments\": {}}\n</tool_call>".to_owned()),
        (Family::Llama3, format!("{{\"name\": \"f\", \"parameters\": {j}}}")),
        (Family::Llama3, format!("<|python_tag|>{{\"name\": \"f\", \"parameters\": {{\"o\": {j}}}}}")),
        (Family::Mistral, format!("[TOOL_CALLS]f[ARGS]{j}")),
        (Family::Mistral, format!("[TOOL_CALLS][{{\"name\": \"f\", \"arguments\": {}}}]", serde_json::to_string(j).unwrap())),
        (
            Family::Kimi,
            format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{j}<|tool_call_end|><|tool_calls_section_end|>"),
        ),
        (Family::GptOss, format!("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{j}<|call|>")),
        (Family::Deepseek, format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{j}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")),
        (
            Family::Deepseek,
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"path\" string=\"true\">/tmp/x</｜DSML｜parameter>\n<｜DSML｜parameter name=\"path\" string=\"true\">/etc/shadow</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>".to_owned(),
        ),
        (
            Family::Deepseek,
            format!("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"o\" string=\"false\">{j}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
        ),
        (
            Family::Qwen3Xml,
            "<tool_call>\n<function=f>\n<parameter=path>\n/tmp/x\n</parameter>\n<parameter=s>\nhi\n</parameter>\n<parameter=path>\n/etc/shadow\n</parameter>\n</function>\n</tool_call>".to_owned(),
        ),
        (
            Family::Glm,
            "<tool_call>f\n<arg_key>path</arg_key>\n<arg_value>/tmp/x</arg_value>\n<arg_key>path</arg_key>\n<arg_value>/etc/shadow</arg_value>\n</tool_call>".to_owned(),
        ),
        (Family::Gemma4, "<|tool_call>call:f{path:<|\"|>/tmp/x<|\"|>,path:<|\"|>/etc/shadow<|\"|>}<tool_call|>".to_owned()),
        (Family::Gemma4, "<|tool_call>call:f{c:{d:1,d:2}}<tool_call|>".to_owned()),
        (
            Family::Functiongemma,
            "<start_function_call>call:f{path:<escape>/tmp/x<escape>,path:<escape>/etc/shadow<escape>}<end_function_call>".to_owned(),
        ),
        (Family::Functiongemma, "call:f{path:<escape>/tmp/x<escape>, path:<escape>/etc/shadow<escape>}".to_owned()),
        (Family::Llama3, "[f(path='/tmp/x', path='/etc/shadow')]".to_owned()),
        (Family::Llama3, "[f(o={'path': '/tmp/x', 'path': '/etc/shadow'})]".to_owned()),
    ];
    for (family, text) in cases {
        let p = super::raw::tests::parse_every_way(&text, family, &schema);
        let [call] = &p.tool_calls[..] else { panic!("{family:?}: {text}: {p:?}") };
        let e = call.arguments.as_ref().expect_err(&text);
        assert!(e.message.contains("given twice") && !e.incomplete, "{family:?}: {text}: {e:?}");
    }
    // The object schema types `c` for Qwen3-Coder and GLM: JSON with a key twice is not an
    // object (validation says so), never one of its readings.
    let text =
        "<tool_call>\n<function=f>\n<parameter=c>\n{\"d\": 1, \"d\": 2}\n</parameter>\n</function>\n</tool_call>";
    let p = parse(text, Family::Qwen3Xml, &schema);
    assert_eq!(
        p.tool_calls[0].arguments,
        Ok(serde_json::Map::from_iter([("c".into(), json!("{\"d\": 1, \"d\": 2}"))]))
    );
}

/// A DeepSeek V3.2 parameter without a `name` is refused, not an argument named "".
#[test]
fn a_dsml_parameter_without_a_name_is_an_error() {
    let text = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter string=\"true\">/</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let p = super::raw::tests::parse_every_way(text, Family::Deepseek, &schema);
    let [call] = &p.tool_calls[..] else { panic!("{p:?}") };
    let e = call.arguments.as_ref().unwrap_err();
    assert!(e.message.contains("has no `name`") && !e.incomplete, "{e:?}");
}

/// A JSON call that does not parse is an error at the byte where the JSON stopped parsing
/// (FORMATS.md: "the byte in the text where reading stopped"), not at the JSON's start; a
/// JSON cut off is an error at the end of the text.
#[test]
fn a_json_error_is_at_the_byte_where_reading_stopped() {
    let cases = [
        (Family::Qwen3, "Sure.\n<tool_call>\n{\"name\": \"f\",\n \"arguments\": {\"é\": 1,, }}\n</tool_call>", ",, "),
        (Family::Llama3, "{\"name\": \"f\", \"parameters\": {\"a\": x}}", "x}"),
        (Family::Mistral, "[TOOL_CALLS]f[ARGS]{\"a\" 1}", "1}"),
        (
            Family::Kimi,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1 2]<|tool_call_end|>",
            "2]",
        ),
        (Family::GptOss, "<|channel|>commentary to=functions.f<|message|>{\"a\": tru}<|call|>", "}<|call|>"),
    ];
    for (family, text, at) in cases {
        let p = super::raw::tests::parse_every_way(text, family, &schema);
        let e = p.tool_calls[0].arguments.as_ref().unwrap_err();
        let want = text.find(at).unwrap() + usize::from(at.starts_with(','));
        assert_eq!((e.offset, e.incomplete), (want, false), "{family:?}: {text}: {e:?}");
    }
    let text = "[TOOL_CALLS]f[ARGS]{\"a\": \"é";
    let e = parse(text, Family::Mistral, &schema).tool_calls.remove(0).arguments.unwrap_err();
    assert_eq!((e.offset, e.incomplete), (text.len(), true), "{e:?}");
}

/// An integer written as text keeps its exact value up to `u64::MAX`, as a JSON integer
/// does: not the nearest float (for a `number`) nor text (for an `integer`).
#[test]
fn an_integer_written_as_text_keeps_its_value_to_64_bits_unsigned() {
    let big = u64::MAX;
    let cases = [
        (
            Family::Qwen3Xml,
            format!(
                "<tool_call><function=f><parameter=a>{big}</parameter><parameter=e>{big}</parameter></function></tool_call>"
            ),
        ),
        (
            Family::Glm,
            format!(
                "<tool_call>f<arg_key>a</arg_key><arg_value>{big}</arg_value><arg_key>e</arg_key><arg_value>{big}</arg_value></tool_call>"
            ),
        ),
        (Family::Gemma4, format!("<|tool_call>call:f{{a:{big},e:{big}}}<tool_call|>")),
        (Family::Functiongemma, format!("<start_function_call>call:f{{a:{big},e:{big},x:{big}}}<end_function_call>")),
    ];
    for (family, text) in cases {
        let p = parse(&text, family, &schema);
        let args = p.tool_calls[0].arguments.as_ref().expect(&text);
        assert_eq!(args["a"], json!(big), "{family:?}: {args:?}");
        assert_eq!(args["e"], json!(big), "{family:?}: {args:?}");
        if family == Family::Functiongemma {
            // Untyped by the schema: the default typing reads a number too.
            assert_eq!(args["x"], json!(big), "{args:?}");
        }
    }
}

/// A JSON call that does not parse is named only from the text before where it broke: a
/// `"name"` after that is not its own.
#[test]
fn a_broken_json_call_is_named_only_from_before_its_error() {
    let cases = [
        (Family::Qwen3, "<tool_call>\n{oops, \"name\": \"rm\"}\n</tool_call>"),
        (Family::Mistral, "[TOOL_CALLS][{oops \"name\": \"rm\"}]"),
        (Family::Llama3, "{\"name\": \"f\", \"parameters\": {}} {oops \"name\": \"rm\"}"),
    ];
    for (family, text) in cases {
        let p = super::raw::tests::parse_every_way(text, family, &schema);
        let failed = p.tool_calls.iter().find(|c| c.arguments.is_err()).expect(text);
        assert_eq!(failed.name, "", "{family:?}: {text}");
    }
    // A name before the error is still shown.
    let p = parse("<tool_call>\n{\"name\": \"ls\", oops}\n</tool_call>", Family::Qwen3, &schema);
    assert_eq!(p.tool_calls[0].name, "ls");
}

/// DeepSeek V3.2's tag attributes are `KEY="VALUE"` pairs read in order: `name="` inside
/// another attribute's value is text, and an attribute given twice is an error.
#[test]
fn dsml_attributes_are_read_as_pairs() {
    let call = |invoke: &str, parameter: &str| {
        format!(
            "<｜DSML｜function_calls>\n<｜DSML｜invoke {invoke}>\n<｜DSML｜parameter {parameter}>/tmp</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
        )
    };
    let read = |text: &str| super::raw::tests::parse_every_way(text, Family::Deepseek, &schema).tool_calls;
    let calls = read(&call("note=\"x name=\" name=\"ls\"", "name=\"path\" string=\"true\""));
    assert_eq!((calls[0].name.as_str(), calls[0].arguments.is_ok()), ("ls", true), "{calls:?}");
    let calls = read(&call("name=\"ls\" name=\"rm\"", "name=\"path\" string=\"true\""));
    assert!(calls[0].arguments.as_ref().is_err_and(|e| e.message.contains("`name` twice")), "{calls:?}");
    let calls = read(&call("name=\"f\"", "name=\"path\" string=\"true\" string=\"false\""));
    assert!(calls[0].arguments.as_ref().is_err_and(|e| e.message.contains("`string` twice")), "{calls:?}");
    let calls = read(&call("name=\"f\"", "hint=\"a name=\" name=\"path\" string=\"true\""));
    assert_eq!(calls[0].arguments, Ok(serde_json::Map::from_iter([("path".into(), json!("/tmp"))])), "{calls:?}");
}
