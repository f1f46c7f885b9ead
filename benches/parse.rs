//! Parse throughput of a model's raw text, per family (`packs::formats::raw`).
//!
//! `cargo bench --bench parse` — a response of about 100 KB (many calls with text between
//! them) parsed whole, and streamed 16 bytes at a time, against two baselines over the
//! same number of bytes: `serde_json::from_str` of a JSON document and a `memchr` scan.
//! Figures are in docs/PERFORMANCE.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use packs::formats::raw::{self, Event, Family};
use serde_json::Value;

/// About this many bytes per response.
const SIZE: usize = 100_000;
/// The chunk size of the streamed parse.
const CHUNK: usize = 16;

/// One call with the text the family writes around it, `i` making each unique.
fn unit(family: Family, i: usize) -> String {
    let text = format!("Step {i}: checking the weather in a city with a name of some length, as a model would say.\n");
    match family {
        Family::Qwen3 => format!(
            "{text}<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"location\": \"Paris {i}\", \"days\": 3}}}}\n</tool_call>\n"
        ),
        Family::Qwen3Xml => format!(
            "{text}<tool_call>\n<function=get_weather>\n<parameter=location>\nParis {i}\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n"
        ),
        Family::Gemma4 => {
            format!("{text}<|tool_call>call:get_weather{{location:<|\"|>Paris {i}<|\"|>,days:3}}<tool_call|>")
        }
        Family::Functiongemma => {
            format!(
                "{text}<start_function_call>call:get_weather{{location:<escape>Paris {i}<escape>,days:3}}<end_function_call>"
            )
        }
        Family::Llama3 => {
            format!("{{\"name\": \"get_weather\", \"parameters\": {{\"location\": \"Paris {i}\", \"days\": 3}}}}; ")
        }
        Family::Mistral => format!("[TOOL_CALLS]get_weather[ARGS]{{\"location\": \"Paris {i}\", \"days\": 3}}"),
        Family::Glm => format!(
            "{text}<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris {i}</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
        ),
        Family::Kimi => format!(
            "<|tool_call_begin|>functions.get_weather:{i}<|tool_call_argument_begin|>{{\"location\": \"Paris {i}\", \"days\": 3}}<|tool_call_end|>"
        ),
        Family::GptOss => format!(
            "<|start|>assistant<|channel|>analysis<|message|>{text}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{{\"location\": \"Paris {i}\", \"days\": 3}}<|call|>"
        ),
        Family::Deepseek => format!(
            "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{{\"location\": \"Paris {i}\", \"days\": 3}}<｜tool▁call▁end｜>"
        ),
    }
}

/// A response of about [`SIZE`] bytes and the number of calls in it.
fn response(family: Family) -> (String, usize) {
    let (open, close) = match family {
        Family::Kimi => ("I will look them all up.<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
        Family::Deepseek => ("I will look them all up.<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
        _ => ("", ""),
    };
    let mut text = open.to_owned();
    let mut n = 0;
    while text.len() < SIZE {
        text.push_str(&unit(family, n));
        n += 1;
    }
    text.push_str(close);
    (text, n)
}

/// Llama's pythonic form (3.2, 4): one list of about [`SIZE`] bytes of calls, and their number.
fn pythonic() -> (String, usize) {
    let mut text = String::from("[");
    let mut n = 0;
    while text.len() < SIZE {
        if n > 0 {
            text.push_str(", ");
        }
        text.push_str(&format!("get_weather(location='Paris {n}', days=3)"));
        n += 1;
    }
    text.push(']');
    (text, n)
}

fn schema_of(_: &str) -> Option<Value> {
    Some(serde_json::json!({"type": "object", "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"}}}))
}

/// The streamed parse: the calls its events carry.
fn stream(text: &str, family: Family) -> usize {
    let mut s = raw::Stream::new(family);
    let mut calls = 0;
    for chunk in text.as_bytes().chunks(CHUNK) {
        calls += s.push(chunk, &schema_of).iter().filter(|e| matches!(e, Event::Call(_))).count();
    }
    let (_, rest) = s.finish_events(&schema_of).expect("UTF-8");
    calls + rest.iter().filter(|e| matches!(e, Event::Call(_))).count()
}

/// A JSON document of about [`SIZE`] bytes: a list of calls.
fn json_document() -> String {
    let mut doc = String::from("[");
    let mut i = 0;
    while doc.len() < SIZE {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(
            "{{\"text\": \"Step {i}: checking the weather, as a model would say.\", \"name\": \"get_weather\", \"arguments\": {{\"location\": \"Paris {i}\", \"days\": 3}}}}"
        ));
        i += 1;
    }
    doc.push(']');
    doc
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(20);

    let doc = json_document();
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.bench_function("baseline/serde_json", |b| b.iter(|| serde_json::from_str::<Value>(black_box(&doc)).unwrap()));
    g.bench_function("baseline/memchr", |b| b.iter(|| memchr::memchr_iter(b'<', black_box(doc.as_bytes())).count()));

    let cases = Family::ALL.iter().map(|&f| (f.as_str().to_owned(), f, response(f)));
    for (label, family, (text, n)) in cases.chain([("llama3-pythonic".to_owned(), Family::Llama3, pythonic())]) {
        let family: Family = family;
        // The bench measures real work: every call is found, whole and streamed.
        let whole = raw::parse(&text, family, &schema_of);
        assert_eq!(whole.tool_calls.len(), n, "{label}: calls found");
        assert!(whole.tool_calls.iter().all(|c| c.arguments.is_ok()), "{label}: every call reads");
        assert_eq!(stream(&text, family), n, "{label}: calls streamed");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("whole", &label), &text, |b, t| {
            b.iter(|| raw::parse(black_box(t), family, &schema_of))
        });
        g.bench_with_input(BenchmarkId::new("stream16", &label), &text, |b, t| b.iter(|| stream(black_box(t), family)));
    }
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
