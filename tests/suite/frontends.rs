//! Front-ends: `packs prompt` (agents), `packs describe --prompt`, and `packs call`
//! for every model API's response shape.

use serde_json::{Value, json};

use crate::common::{Packs, Test};

/// An agents root with one agent `a`.
fn agents(soul: Option<&str>, modules: &[(&str, &str)], toml: &str) -> Packs {
    let mut p = Packs::new().file("a/agent.toml", toml);
    if let Some(s) = soul {
        p = p.file("a/soul.md", s);
    }
    for (name, text) in modules {
        p = p.file(&format!("a/context/{name}"), text);
    }
    p
}

fn tools() -> Packs {
    Packs::new()
        .manifest(
            "echo_words",
            json!({
                "name": "echo_words", "description": "Echo words back.\nSecond line is not shown.",
                "modes": ["Coding"],
                "parameters": {"words": {"type": "string", "required": true}, "loud": {"type": "boolean"}},
                "command": {"program": "echo", "args": ["{{#if loud}}LOUD{{/if}}", "--", "{{words}}"]}
            }),
        )
        .manifest(
            "count",
            json!({
                "name": "count", "description": "Print JSON with a count",
                "parameters": {"n": {"type": "integer", "required": true, "enum": [1, 2]}},
                "command": {"program": "printf", "args": ["{\"n\": %s}", "{{n}}"]},
                "output": {"format": "json"}
            }),
        )
        .manifest(
            "guarded",
            json!({"name": "guarded", "description": "Needs approval", "command": "echo ran", "policy": {"confirm_before_run": true}}),
        )
}

#[test]
fn prompt_is_soul_then_modules_byte_for_byte() {
    let a = agents(Some("SOUL\n"), &[("b.md", "B"), ("a.md", "A\n"), ("notes.txt", "ignored")], "");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "a"])
        .run()
        .success()
        .stdout_eq("SOUL\n\n---\nA\n\n---\nB");
    let a = agents(Some("S"), &[("02-second.md", "2"), ("01-first.md", "$HOME {{x}} `code` *md*")], "");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["--agent", "a", "prompt"])
        .run()
        .success()
        .stdout_eq("S\n---\n$HOME {{x}} `code` *md*\n---\n2");
    let a = agents(Some(""), &[], "");
    Test::new().env("PACKS_AGENTS", a.path()).args(["prompt", "--agent", "a"]).run().success().stdout_eq("");
}

#[test]
fn prompt_errors_name_the_path() {
    let a = agents(None, &[], "");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "a"])
        .run()
        .code(1)
        .stderr_contains("soul.md is missing")
        .one_line_error();
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "nobody"])
        .run()
        .code(1)
        .stderr_contains("no agent `nobody`");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "../etc"])
        .run()
        .code(1)
        .stderr_contains("is not a name");
    let bad = agents(Some("S"), &[], "dney = [\"x\"]\n");
    Test::new()
        .env("PACKS_AGENTS", bad.path())
        .args(["prompt", "--agent", "a"])
        .run()
        .code(1)
        .stderr_contains("agent.toml")
        .stderr_contains("dney");
}

#[test]
fn prompt_tools_section_follows_mode_and_agent_rules() {
    let a = agents(Some("S\n"), &[], "deny = [\"guard*\"]\n");
    let t = tools();
    let out = Test::new()
        .env("PACKS_AGENTS", a.path())
        .arg("--packs")
        .arg(t.path())
        .args(["prompt", "--agent", "a", "--tools"])
        .run();
    out.success()
        .stdout_contains("S\n\n---\n# Tools\n")
        .stdout_contains("- count: Print JSON with a count. Input: {\"n\": 1|2}\n")
        .stdout_contains("- echo_words: Echo words back. Input: {\"words\": string, \"loud\"?: boolean}\n")
        .stdout_lacks("guarded")
        .stdout_lacks("Second line");
    let out = Test::new()
        .env("PACKS_AGENTS", a.path())
        .arg("--packs")
        .arg(t.path())
        .args(["prompt", "--agent", "a", "--tools", "--mode", "Dictation"])
        .run();
    out.success().stdout_contains("- count:").stdout_lacks("echo_words");
}

#[test]
fn describe_prompt_entry() {
    Test::new()
        .arg("--packs")
        .arg(tools().path())
        .args(["describe", "count", "--prompt"])
        .run()
        .success()
        .stdout_eq("- count: Print JSON with a count. Input: {\"n\": 1|2}\n");
}

fn call(input: &str, extra: &[&str]) -> crate::common::Output {
    Test::new().arg("--packs").arg(tools().path()).arg("call").args(extra).stdin(input.as_bytes().to_vec()).run()
}

#[test]
fn openai_chat_calls() {
    let input = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo_words", "arguments": "{\"words\": \"hi; rm -rf ~\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "count", "arguments": "{\"n\": 3}"}},
        {"id": "c3", "type": "function", "function": {"name": "guarded", "arguments": "{}"}},
        {"id": "c4", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "c5", "type": "function", "function": {"name": "count", "arguments": "{not json"}}
    ]}}]});
    let out = call(&input.to_string(), &[]);
    out.success();
    let msgs = out.json();
    assert_eq!(msgs[0], json!({"role": "tool", "tool_call_id": "c1", "content": "-- hi; rm -rf ~\n"}));
    let content = |i: usize| -> Value { serde_json::from_str(msgs[i]["content"].as_str().unwrap()).unwrap() };
    assert_eq!(content(1)["error"]["kind"], "validation");
    assert_eq!(content(1)["error"]["errors"][0]["field"], "n");
    assert_eq!(content(1)["error"]["errors"][0]["schema"]["enum"], json!([1, 2]));
    assert_eq!(content(2)["error"]["kind"], "permission_denied");
    assert_eq!(content(3)["error"]["kind"], "not_found");
    assert_eq!(content(4)["error"]["kind"], "validation");
    assert_eq!(msgs[4]["tool_call_id"], "c5");
    // --yes approves.
    let out = call(
        &json!({"tool_calls": [{"id": "g", "type": "function", "function": {"name": "guarded", "arguments": ""}}]})
            .to_string(),
        &["--yes"],
    );
    assert_eq!(out.success().json()[0]["content"], "ran\n");
}

/// A strict-mode model sends `null` for an optional argument it leaves out: that null is
/// dropped by the tool's schema, so the default applies; a null the schema does not make
/// optional-and-not-null (inside a free-form object, an array element) is the model's value.
#[test]
fn strict_mode_nulls_are_stripped_by_the_tool_schema_and_meaningful_ones_kept() {
    let packs = Packs::new().manifest(
        "query",
        json!({
            "name": "query", "description": "Query rows",
            "parameters": {"where": {"type": "object"}, "tags": {"type": "array"}, "limit": {"type": "integer", "default": 10}},
            "command": {"program": "printf", "args": ["limit=%s\n", "{{limit}}"]}
        }),
    );
    let args = json!({"where": {"deleted_at": null}, "tags": [null, {"a": null}], "limit": null});
    let input = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "query", "arguments": args.to_string()}},
        {"id": "c2", "type": "function", "function": {"name": "nope", "arguments": args.to_string()}}
    ]}}]})
    .to_string();
    let call = |extra: &[&str]| {
        Test::new().arg("--packs").arg(packs.path()).arg("call").args(extra).stdin(input.as_bytes().to_vec()).run()
    };
    let parsed = call(&["--parse-only"]).success().json();
    assert_eq!(
        parsed["tool_calls"][0]["arguments"],
        json!({"where": {"deleted_at": null}, "tags": [null, {"a": null}]})
    );
    assert_eq!(parsed["tool_calls"][1]["arguments"], args, "an unknown tool's call is left as it is");
    let msgs = call(&[]).success().json();
    assert_eq!(msgs[0]["content"], "limit=10\n", "the default applies");
    // The same in a conversation.
    let conversation = json!([
        {"role": "user", "content": "Rows not deleted"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "query", "arguments": args.to_string()}}]}
    ]);
    let out = Test::new()
        .arg("--packs")
        .arg(packs.path())
        .args(["call", "--conversation"])
        .stdin(conversation.to_string().into_bytes())
        .run();
    assert_eq!(out.success().json()[0]["content"], "limit=10\n");
}

#[test]
fn openai_responses_calls() {
    let input = json!({"output": [
        {"type": "message", "content": []},
        {"type": "function_call", "call_id": "r1", "name": "count", "arguments": "{\"n\": 2}"}
    ]});
    let out = call(&input.to_string(), &[]);
    assert_eq!(out.success().json(), json!([{"type": "function_call_output", "call_id": "r1", "output": "{\"n\":2}"}]));
}

#[test]
fn anthropic_calls() {
    let input = json!({"role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "tu1", "name": "count", "input": {"n": 1}},
        {"type": "tool_use", "id": "tu2", "name": "count", "input": {"n": "one"}}
    ]});
    let out = call(&input.to_string(), &[]);
    let msg = out.success().json();
    assert_eq!(msg["role"], "user");
    assert_eq!(
        msg["content"][0],
        json!({"type": "tool_result", "tool_use_id": "tu1", "content": "{\"n\":1}", "is_error": false})
    );
    assert_eq!(msg["content"][1]["tool_use_id"], "tu2");
    assert_eq!(msg["content"][1]["is_error"], true);
}

#[test]
fn ollama_calls_with_object_or_string_arguments() {
    let input = json!({"model": "llama3.2", "message": {"role": "assistant", "tool_calls": [
        {"function": {"name": "echo_words", "arguments": {"words": "a b", "loud": true}}},
        {"function": {"name": "count", "arguments": "{\"n\": 2}"}}
    ]}});
    let out = call(&input.to_string(), &[]);
    assert_eq!(
        out.success().json(),
        json!([
            {"role": "tool", "tool_name": "echo_words", "content": "LOUD -- a b\n"},
            {"role": "tool", "tool_name": "count", "content": "{\"n\":2}"}
        ])
    );
}

#[test]
fn functiongemma_calls() {
    let input = "Sure.\n<start_function_call>call:echo_words{words:<escape>x, y {z}<escape>,loud:false}<end_function_call>\n<start_function_call>call:count{n:2}<end_function_call>";
    let out = call(input, &[]);
    out.success().stdout_eq(
        "<start_function_response>response:echo_words{result:<escape>-- x, y {z}\n<escape>}<end_function_response>\n\
         <start_function_response>response:count{n:2}<end_function_response>\n",
    );
    let out = call("<start_function_call>call:count{n:<escape>open}<end_function_call>", &[]);
    out.success().stdout_contains("<start_function_response>response:count{error:").stdout_contains("does not parse");
}

/// `packs call` of FunctionGemma text: its output, and each `<start_function_response>…` in it.
fn function_responses(input: &str) -> (String, Vec<String>) {
    let out = call(input, &[]);
    let text = out.success().stdout().to_owned();
    let responses = text.split_terminator("<end_function_response>\n").map(str::to_owned).collect();
    (text, responses)
}

#[test]
fn functiongemma_a_malformed_call_fails_alone_and_the_others_run() {
    // Malformed, but its end tag is outside any string: it fails alone.
    let input = "<start_function_call>call:count{n:2} trailing<end_function_call>\
                 <start_function_call>call:echo_words{words:<escape>ran<escape>}<end_function_call>";
    let (text, responses) = function_responses(input);
    let responses: Vec<&str> = responses.iter().map(String::as_str).collect();
    assert_eq!(responses.len(), 2, "{text}");
    assert!(responses[0].starts_with("<start_function_response>response:count{error:{"), "{text}");
    assert!(responses[0].contains("unexpected text after the call"), "{text}");
    assert_eq!(responses[1], "<start_function_response>response:echo_words{result:<escape>-- ran\n<escape>}");
}

#[test]
fn functiongemma_a_call_after_one_cut_off_inside_a_string_does_not_run() {
    // `count`'s string is open at its end tag, so the end tag and `echo_words` may be text
    // the string quotes (this test ran `echo_words` before): neither runs.
    let input = "<start_function_call>call:count{n:<escape>open}<end_function_call>\
                 <start_function_call>call:echo_words{words:<escape>ran<escape>}<end_function_call>";
    let (text, responses) = function_responses(input);
    let responses: Vec<&str> = responses.iter().map(String::as_str).collect();
    assert_eq!(responses.len(), 2, "{text}");
    assert!(responses[0].starts_with("<start_function_response>response:count{error:{"), "{text}");
    // The error is well-formed FunctionGemma: the model's `<escape>` is not echoed raw.
    let body = responses[0].trim_start_matches("<start_function_response>response:count");
    assert_eq!(body.matches("<escape>").count() % 2, 0, "{text}");
    assert!(!body.contains("<escape>open"), "{text}");
    assert!(body.contains("no closing `[escape]`"), "{text}");
    assert!(responses[1].starts_with("<start_function_response>response:echo_words{error:{"), "{text}");
    assert!(responses[1].contains("not run: it follows a call that the start of another call cut off"), "{text}");
    assert!(!responses[1].contains("-- ran"), "{text}");
}

#[test]
fn functiongemma_prose_is_a_final_answer() {
    for prose in ["I can place a call: 555 for you.", "Let me recall:x first.", "call: me later"] {
        // Nothing runs, and the operator is told so.
        call(prose, &[]).success().stdout_eq("").stderr_eq("packs: no tool calls\n");
    }
}

#[test]
fn functiongemma_an_incomplete_call_runs_nothing() {
    let marker = tempfile::tempdir().unwrap();
    let input =
        format!("<start_function_call>call:echo_words{{words:<escape>{}", marker.path().join("never").display());
    let out = call(&input, &[]);
    out.success()
        .stdout_contains("response:echo_words{error:")
        .stdout_contains("incomplete call")
        .stdout_contains("nothing ran");
}

#[test]
fn functiongemma_values_are_typed_by_the_schema() {
    // `count` takes an integer; `echo_words` a string and a boolean.
    let input = "<start_function_call>call:count{n:<escape>2<escape>}<end_function_call>\
                 <start_function_call>call:echo_words{words:555,loud:TRUE}<end_function_call>";
    call(input, &[]).success().stdout_eq(
        "<start_function_response>response:count{n:2}<end_function_response>\n\
         <start_function_response>response:echo_words{result:<escape>LOUD -- 555\n<escape>}<end_function_response>\n",
    );
}

#[test]
fn gemini_snake_case_from_google_genai_is_answered_in_snake_case() {
    let input = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"function_call": {"id": "c9", "name": "count", "args": {"n": 1}}}
    ]}}]});
    let out = call(&input.to_string(), &[]);
    assert_eq!(
        out.success().json(),
        json!({"role": "user", "parts": [{"function_response": {"id": "c9", "name": "count", "response": {"n": 1}}}]})
    );
}

#[test]
fn input_of_no_known_shape_is_an_error() {
    call(&json!({"answer": 42}).to_string(), &[])
        .code(1)
        .stdout_eq("")
        .stderr_contains("no known response shape")
        .one_line_error();
    call("{\"choices\": [", &[]).code(1).stderr_contains("does not parse");
    call(&json!({"choices": []}).to_string(), &["--format", "anthropic"])
        .code(1)
        .stderr_contains("looks like `openai`");
}

#[test]
fn no_calls_print_nothing() {
    call("Just a friendly answer, no tools.", &[]).success().stdout_eq("");
    call(&json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}).to_string(), &[])
        .success()
        .stdout_eq("");
}

#[test]
fn agent_rules_apply_to_calls() {
    let a = agents(Some("S"), &[], "tools = [\"count\"]\n");
    let out = Test::new()
        .env("PACKS_AGENTS", a.path())
        .arg("--packs")
        .arg(tools().path())
        .args(["--agent", "a", "call"])
        .stdin(
            json!({"tool_calls": [{"id": "1", "function": {"name": "echo_words", "arguments": "{\"words\": \"x\"}"}}]})
                .to_string()
                .into_bytes(),
        )
        .run();
    let content: Value = serde_json::from_str(out.success().json()[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["error"]["kind"], "permission_denied");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .arg("--packs")
        .arg(tools().path())
        .args(["--agent", "a", "run", "echo_words", "--arg", "words=x"])
        .run()
        .code(3)
        .stderr_contains("does not allow");
}

#[test]
fn hidden_files_are_not_context_modules() {
    let a = agents(Some("S"), &[("a.md", "A"), (".draft.md", "DRAFT"), ("._a.md", "APPLEDOUBLE")], "");
    Test::new().env("PACKS_AGENTS", a.path()).args(["prompt", "--agent", "a"]).run().success().stdout_eq("S\n---\nA");
}

#[test]
fn a_mode_filters_what_is_offered_and_what_may_run_everywhere() {
    let t = tools();
    let names = |out: &crate::common::Output| -> Vec<String> {
        out.success().json().as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_owned()).collect()
    };
    let catalog = |extra: &[&str]| Test::new().arg("--packs").arg(t.path()).args(extra).arg("catalog").run();
    assert!(names(&catalog(&[])).contains(&"echo_words".to_owned()));
    assert!(!names(&catalog(&["--mode", "Dictation"])).contains(&"echo_words".to_owned()));
    assert!(names(&catalog(&["--mode", "coding"])).contains(&"echo_words".to_owned()), "modes match in any case");
    // A call of a tool outside the mode is denied, as a result the model reads.
    let input = json!({"tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "echo_words", "arguments": "{\"words\": \"hi\"}"}}]});
    let out = call(&input.to_string(), &["--mode", "Dictation"]);
    let content: Value = serde_json::from_str(out.success().json()[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["error"]["kind"], "permission_denied");
    assert!(content["error"]["reason"].as_str().unwrap().contains("mode `Dictation`"), "{content}");
    // An agent's `mode` is the default; `--mode` wins over it.
    let a = agents(Some("S"), &[], "mode = \"Dictation\"\n");
    let with_agent = |extra: &[&str]| {
        Test::new()
            .env("PACKS_AGENTS", a.path())
            .arg("--packs")
            .arg(t.path())
            .args(["--agent", "a"])
            .args(extra)
            .arg("catalog")
            .run()
    };
    assert!(!names(&with_agent(&[])).contains(&"echo_words".to_owned()));
    assert!(names(&with_agent(&["--mode", "Coding"])).contains(&"echo_words".to_owned()));
    // packs serve: tools/list leaves it out and tools/call refuses it.
    let messages = crate::serve::session(
        &t,
        &["--mode", "Dictation"],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo_words", "arguments": {"words": "hi"}}}),
        ],
    );
    let by_id = |id: i64| messages.iter().find(|m| m["id"] == id).unwrap();
    let listed: Vec<&str> =
        by_id(2)["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(listed.contains(&"count") && !listed.contains(&"echo_words"), "{listed:?}");
    assert_eq!(by_id(3)["result"]["isError"], true, "{:#}", by_id(3));
    assert!(by_id(3)["result"]["content"][0]["text"].as_str().unwrap().contains("not offered in mode"));
}

#[test]
fn conversation_validation_retries_stop_after_two() {
    let t = tools();
    let run = |messages: &Value, extra: &[&str]| -> Value {
        let out = Test::new()
            .arg("--packs")
            .arg(t.path())
            .args(["call", "--conversation"])
            .args(extra)
            .stdin(messages.to_string().into_bytes())
            .run();
        out.success().json()
    };
    let bad_call = |id: &str| json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function", "function": {"name": "count", "arguments": "{\"n\": 7}"}}]});
    let mut messages = vec![json!({"role": "user", "content": "count to seven"})];
    let mut verdicts = Vec::new();
    for id in ["c1", "c2", "c3"] {
        messages.push(bad_call(id));
        let answer = run(&json!({ "messages": messages }), &[]);
        let answer = answer.as_array().unwrap();
        assert_eq!(answer.len(), 1, "only the call without a result is answered: {answer:?}");
        assert_eq!(answer[0]["tool_call_id"], id);
        let error: Value = serde_json::from_str(answer[0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["kind"], "validation");
        verdicts.push(error["error"]["retryable"].as_bool().unwrap());
        if id == "c3" {
            assert!(error["error"]["message"].as_str().unwrap().contains("tell the user what went wrong"), "{error}");
            // A larger budget lets the model go on.
            let lenient = run(&json!({ "messages": messages }), &["--max-retries", "5"]);
            let lenient: Value = serde_json::from_str(lenient[0]["content"].as_str().unwrap()).unwrap();
            assert_eq!(lenient["error"]["retryable"], true);
        }
        messages.push(answer[0].clone());
    }
    assert_eq!(verdicts, [true, true, false]);
    // Everything answered: nothing to do.
    Test::new()
        .arg("--packs")
        .arg(t.path())
        .args(["call", "--conversation"])
        .stdin(json!(messages).to_string().into_bytes())
        .run()
        .success()
        .stdout_eq("");
}

#[test]
fn agent_skills_are_context_modules_in_name_order_without_their_frontmatter() {
    let skill = "---\nname: pdf-tools\ndescription: Work with PDF files.\nmetadata:\n  openclaw:\n    requires:\n      bins: [qpdf]\n---\n# PDF tools\nUse qpdf.\n";
    let a = agents(Some("SOUL"), &[("a-first.md", "A"), ("pdf-tools/SKILL.md", skill), ("z-last.md", "Z")], "");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "a"])
        .run()
        .success()
        .stdout_eq("SOUL\n---\nA\n---\n# PDF tools\nUse qpdf.\n\n---\nZ");
    // A broken skill is an error naming the file and line, not a silently missing module.
    let a = agents(Some("S"), &[("bad/SKILL.md", "---\nname: bad\ndescription: [oops\n---\nbody")], "");
    Test::new()
        .env("PACKS_AGENTS", a.path())
        .args(["prompt", "--agent", "a"])
        .run()
        .code(1)
        .stderr_contains("bad/SKILL.md: line ")
        .one_line_error();
    // packs lint checks the frontmatter against the Agent Skills rules.
    let a = agents(
        Some("S"),
        &[
            ("good-skill/SKILL.md", "---\nname: good-skill\ndescription: Fine.\n---\nbody"),
            ("Other/SKILL.md", "---\nname: Not_Valid\ndescription: ''\n---\nbody"),
        ],
        "",
    );
    let out = Test::new().args(["lint", "--format", "json"]).arg(a.path().join("a")).run();
    out.code(1);
    let report = out.json();
    let found: Vec<(String, String, u64)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["code"].as_str().unwrap().into(), d["field"].as_str().unwrap_or("").into(), d["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        found,
        [
            ("invalid-skill".into(), "name".into(), 2),
            ("invalid-skill".into(), "name".into(), 2),
            ("invalid-skill".into(), "description".into(), 3)
        ],
        "{report:#}"
    );
    assert_eq!(report["summary"]["files"], 2, "{report:#}");
}

#[test]
fn an_oversized_response_is_refused_not_held() {
    let huge = vec![b'a'; (64 << 20) + 1];
    call(std::str::from_utf8(&huge).unwrap(), &[]).code(1).stderr_contains("larger than 64 MiB").one_line_error();
}

/// What `prompt --tools`, `catalog`, `call` and `serve` (stdio) offer and let run in a
/// scratch directory, with `extra` global options: the tools each lists, and for each a
/// call of every tool, `true` when it ran.
fn model_facing(t: &Packs, agents_dir: Option<&str>, extra: &[&str]) -> Vec<(&'static str, Vec<String>, Vec<bool>)> {
    let all = ["count", "echo_words", "guarded"];
    let arguments = |n: &str| match n {
        "count" => json!({"n": 1}),
        "echo_words" => json!({"words": "hi"}),
        _ => json!({}),
    };
    let test = || {
        let mut test = Test::new().arg("--packs").arg(t.path()).args(extra);
        if let Some(toml) = agents_dir {
            test = test.write("agents/default/agent.toml", toml).write("agents/default/soul.md", "S\n");
        }
        test
    };
    let mut seen = Vec::new();
    // packs prompt --tools: the names of the tools section.
    let out = test().args(["prompt", "--tools"]).run();
    let listed = if agents_dir.is_some() && !extra.contains(&"none") {
        out.success()
            .stdout()
            .lines()
            .filter_map(|l| l.strip_prefix("- ")?.split(':').next())
            .map(str::to_owned)
            .collect()
    } else {
        out.code(1).stderr_contains("no agent to prompt for: name one with --agent ID, or make agents/default/");
        Vec::new()
    };
    seen.push(("prompt", listed, Vec::new()));
    // packs catalog, and packs call of every tool (approved).
    let out = test().arg("catalog").run();
    let listed =
        out.success().json().as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_owned()).collect();
    let calls: Vec<Value> = all
        .iter()
        .map(|n| json!({"id": n, "type": "function", "function": {"name": n, "arguments": arguments(n).to_string()}}))
        .collect();
    let out = test().args(["call", "--yes"]).stdin(json!({ "tool_calls": calls }).to_string()).run();
    let ran = out
        .success()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let content = r["content"].as_str().unwrap();
            serde_json::from_str::<Value>(content).map_or(true, |v| v.get("error").is_none())
        })
        .collect();
    seen.push(("catalog/call", listed, ran));
    // packs serve over stdio: tools/list, then tools/call of each.
    let mut requests = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    for (i, n) in all.iter().enumerate() {
        requests.push(json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {"name": n, "arguments": arguments(n)}}));
    }
    let stdin: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let out = test().args(["serve", "--yes"]).stdin(stdin).run();
    let messages: Vec<Value> = out.success().stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_id = |id: usize| messages.iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no {id}: {messages:?}"));
    let listed = by_id(2)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let ran = (0..all.len()).map(|i| by_id(10 + i)["result"]["isError"] != true).collect();
    seen.push(("serve", listed, ran));
    seen
}

#[test]
fn prompt_catalog_call_and_serve_act_for_one_default_agent() {
    let t = tools();
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // agents/default offers `count` only: `echo_words` is outside its mode, `guarded` denied.
    let toml = "mode = \"Dictation\"\ndeny = [\"guarded\"]\n";
    let seen = model_facing(&t, Some(toml), &[]);
    assert_eq!(seen[0].1, names(&["count"]), "prompt --tools");
    for (what, listed, ran) in &seen[1..] {
        assert_eq!(listed, &names(&["count"]), "{what} lists what the default agent is offered");
        assert_eq!(ran, &[true, false, false], "{what} runs only what it lists");
    }
    // Named explicitly, the same agent gives the same answers.
    let explicit = model_facing(&t, Some(toml), &["--agent", "default"]);
    assert_eq!(explicit, seen);
    // `--agent none`: no agent, so every tool, for catalog, call and serve alike.
    let every = names(&["echo_words", "count", "guarded"]);
    let none = model_facing(&t, Some(toml), &["--agent", "none"]);
    for (what, listed, ran) in &none[1..] {
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(sorted, names(&["count", "echo_words", "guarded"]), "{what}: {listed:?}");
        assert_eq!(ran, &[true, true, true], "{what}");
    }
    // Without agents/default: no agent either, the same as `--agent none`.
    let absent = model_facing(&t, None, &[]);
    assert_eq!(absent[1..], none[1..]);
    assert_eq!(absent[1].1.len(), every.len());
}

#[test]
fn the_operators_own_commands_do_not_follow_the_default_agent() {
    let t = tools();
    let test = || {
        Test::new()
            .arg("--packs")
            .arg(t.path())
            .write("agents/default/agent.toml", "tools = [\"count\"]\n")
            .write("agents/default/soul.md", "S\n")
    };
    test().args(["run", "echo_words", "--arg", "words=hi"]).run().success().stdout_eq("-- hi\n");
    test().arg("list").run().success().stdout_contains("echo_words");
    test().args(["describe", "echo_words"]).run().success();
    // Named, an agent binds them too.
    test()
        .args(["--agent", "default", "run", "echo_words", "--arg", "words=hi"])
        .run()
        .code(3)
        .stderr_contains("agent `default` does not allow it");
    // `none` is no agent, and no agent directory may be called that.
    test().args(["--agent", "none", "run", "echo_words", "--arg", "words=hi"]).run().success();
    let out = Test::new().write("agents/none/soul.md", "S").args(["--agent", "none", "prompt"]).run();
    out.code(1).stderr_contains("no agent to prompt for");
}

/// One response per raw-text family, as its chat template writes a turn: every call runs
/// through the pipeline and is answered as a `tool` message, in order.
#[test]
fn raw_text_families_run_their_calls() {
    let cases = [
        (
            "qwen3",
            "<think>\nEcho it.\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"echo_words\", \"arguments\": {\"words\": \"a </tool_call> b\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 2}}\n</tool_call><|im_end|>",
        ),
        (
            "qwen3-xml",
            "<tool_call>\n<function=echo_words>\n<parameter=words>\na </tool_call> b\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=count>\n<parameter=n>\n2\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "gemma4",
            "<|tool_call>call:echo_words{words:<|\"|>a </tool_call> b<|\"|>}<tool_call|><|tool_call>call:count{n:2}<tool_call|>",
        ),
        (
            "llama3",
            "{\"name\": \"echo_words\", \"parameters\": {\"words\": \"a </tool_call> b\"}}; {\"name\": \"count\", \"parameters\": {\"n\": 2}}<|eot_id|>",
        ),
        (
            "mistral",
            "[TOOL_CALLS]echo_words[ARGS]{\"words\": \"a </tool_call> b\"}[TOOL_CALLS]count[ARGS]{\"n\": 2}</s>",
        ),
        (
            "glm",
            "\n<think></think>\n<tool_call>echo_words\n<arg_key>words</arg_key>\n<arg_value>a </tool_call> b</arg_value>\n</tool_call>\n<tool_call>count\n<arg_key>n</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
        ),
        (
            "kimi",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.echo_words:0<|tool_call_argument_begin|>{\"words\": \"a </tool_call> b\"}<|tool_call_end|><|tool_call_begin|>functions.count:1<|tool_call_argument_begin|>{\"n\": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|>",
        ),
        (
            "gpt-oss",
            "<|channel|>analysis<|message|>Echo, then count.<|end|><|start|>assistant<|channel|>commentary to=functions.echo_words <|constrain|>json<|message|>{\"words\": \"a </tool_call> b\"}<|call|><|start|>assistant to=functions.count<|channel|>commentary json<|message|>{\"n\": 2}<|call|>",
        ),
        (
            "deepseek",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>echo_words<｜tool▁sep｜>{\"words\": \"a </tool_call> b\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>count<｜tool▁sep｜>{\"n\": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        ),
        (
            "deepseek",
            "</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"echo_words\">\n<｜DSML｜parameter name=\"words\" string=\"true\">a </tool_call> b</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"count\">\n<｜DSML｜parameter name=\"n\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>",
        ),
    ];
    for (format, text) in cases {
        for extra in [&["--format", format][..], &[]] {
            let out = call(text, extra);
            out.success().stderr_eq("");
            let mut answers = out.json();
            // Kimi's calls carry ids (`functions.NAME:INDEX`), and the answers name them.
            for (i, a) in answers.as_array_mut().unwrap().iter_mut().enumerate() {
                let id = a.as_object_mut().unwrap().remove("tool_call_id");
                let name = a["name"].as_str().unwrap().to_owned();
                assert_eq!(id, (format == "kimi").then(|| json!(format!("functions.{name}:{i}"))), "{format}");
            }
            assert_eq!(
                answers,
                json!([
                    {"role": "tool", "name": "echo_words", "content": "-- a </tool_call> b\n"},
                    {"role": "tool", "name": "count", "content": "{\"n\":2}"}
                ]),
                "{format} {extra:?}"
            );
        }
    }
}

#[test]
fn raw_text_parse_only_runs_nothing_and_types_by_the_tools_file() {
    let marker = tempfile::tempdir().unwrap();
    let text = format!(
        "Let me.\n<tool_call>\n<function=echo_words>\n<parameter=words>\n{}\n</parameter>\n<parameter=loud>\nTrue\n</parameter>\n</function>\n</tool_call>",
        marker.path().join("x").display()
    );
    let out = call(&text, &["--parse-only", "--format", "qwen3-xml"]);
    out.success().stderr_eq("");
    assert_eq!(out.json()["tool_calls"][0]["arguments"]["loud"], json!(true));
    assert_eq!(out.json()["content"], json!("Let me."));
    // With --tools, the schemas come from the file: `loud` is untyped there, so it stays text.
    let defs = marker.path().join("tools.json");
    std::fs::write(&defs, r#"[{"type": "function", "function": {"name": "echo_words", "parameters": {"type": "object", "properties": {"words": {"type": "string"}}}}}]"#).unwrap();
    let out = call(&text, &["--parse-only", "--tools", defs.to_str().unwrap()]);
    out.success();
    assert_eq!(out.json()["tool_calls"][0]["arguments"]["loud"], json!("True"));
    assert_eq!(std::fs::read_dir(marker.path()).unwrap().count(), 1, "nothing ran");
}

/// A call that could not be read has one error shape in every format.
#[test]
fn parse_only_errors_have_one_shape() {
    let openai = r#"{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "count", "arguments": "{\"n\": "}}]}"#;
    let out = call(openai, &["--parse-only"]);
    out.success();
    let error = &out.json()["tool_calls"][0]["error"];
    assert_eq!(error["offset"], json!(null), "{error}");
    assert_eq!(error["incomplete"], json!(false), "{error}");
    assert!(error["message"].as_str().unwrap().contains("not valid JSON"), "{error}");
    let out = call("<tool_call>count<arg_key>n</arg_key><arg_value>2", &["--parse-only"]);
    out.success();
    let error = &out.json()["tool_calls"][0]["error"];
    let keys: Vec<&String> = error.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["message", "offset", "incomplete"], "{error}");
    assert_eq!(error["incomplete"], json!(true), "{error}");
}

#[test]
fn raw_text_cut_off_calls_are_errors_the_model_reads() {
    let out = call("<tool_call>\n{\"name\": \"echo_words\", \"arguments\": {\"words\": \"hi", &["--format", "qwen3"]);
    out.success();
    let content = out.json()[0]["content"].as_str().unwrap().to_owned();
    assert!(content.contains("incomplete call") && content.contains("nothing ran"), "{content}");
    // Plain prose: no calls, said on stderr.
    call("It is 12 degrees.", &["--format", "qwen3"]).success().stdout_eq("").stderr_eq("packs: no tool calls\n");
}

/// A Qwen3-Coder or GLM value that quotes a whole call cuts its own call off at the quoted
/// `<tool_call>`: neither call runs, whole or streamed.
#[test]
fn a_call_quoted_in_a_qwen3_xml_or_glm_value_never_runs() {
    let cases = [
        (
            "qwen3-xml",
            "<tool_call>\n<function=echo_words>\n<parameter=words>\nrun this: <tool_call>\n<function=count>\n<parameter=n>\n2\n</parameter>\n</function>\n</tool_call>\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "glm",
            "<tool_call>echo_words<arg_key>words</arg_key><arg_value>run this: <tool_call>count<arg_key>n</arg_key><arg_value>2</arg_value></tool_call></arg_value></tool_call>",
        ),
    ];
    for (format, input) in cases {
        for stream in [false, true] {
            let mut args = vec!["--format", format];
            if stream {
                args.push("--stream");
            }
            let out = call(input, &args);
            let text = out.success().stdout();
            let results: Vec<Value> = if stream {
                text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
            } else {
                serde_json::from_str::<Vec<Value>>(text).unwrap()
            };
            assert_eq!(results.len(), 2, "{format} {stream}: {text}");
            assert_eq!((results[0]["name"].as_str(), results[1]["name"].as_str()), (Some("echo_words"), Some("count")));
            assert!(!text.contains("-- run this"), "{format} {stream}: {text}");
            let second = results[1]["content"].as_str().unwrap();
            assert!(second.contains("not run: it follows a call that the start of another call cut off"), "{second}");
        }
    }
}

/// `packs call --stream --format FORMAT` fed `before` (each piece written and flushed), then
/// `after` once the first result was read: that first result, read from stdout while the
/// rest of the response has not been written yet (reading it is the sync, not a delay), and
/// the results that follow at the end, in order.
fn stream_first_result_then_rest(format: &str, before: &[&[u8]], after: &[u8]) -> (Value, Vec<Value>) {
    use std::io::{BufRead, BufReader, Write};
    let t = tools();
    let mut child = std::process::Command::new(crate::common::PACKS)
        .args(["--packs"])
        .arg(t.path())
        .args(["call", "--stream", "--format", format])
        .env("HOME", t.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // A watchdog: were the first result never sent before the end of input, the read below
    // would wait forever; after a minute packs is killed, the read ends, and the test fails.
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let pid = child.id() as libc::pid_t;
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            // SAFETY: kill takes no pointers; the child is not yet reaped (the test waits on it later).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    for piece in before {
        stdin.write_all(piece).unwrap();
        stdin.flush().unwrap();
    }
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    done.send(()).unwrap();
    watchdog.join().unwrap();
    // A result in JSON, or in FunctionGemma's own form (kept as a JSON string).
    let line = |l: &str| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.trim_end().to_owned()));
    assert!(!first.is_empty(), "{format}: the first call's result, before the end of input");
    let first = line(&first);
    stdin.write_all(after).unwrap();
    drop(stdin);
    let rest: Vec<Value> = stdout.lines().map(|l| line(&l.unwrap())).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{format}");
    (first, rest)
}

/// `packs call --stream` runs a call as soon as it is whole, before the rest of the response
/// is written; the later calls follow at the end, in order.
#[test]
fn a_streamed_call_runs_before_the_rest_of_the_response_is_written() {
    // The first call, split inside its end tag, then the rest of the tag.
    let (first, rest) = stream_first_result_then_rest(
        "qwen3",
        &[
            b"<think>\nEcho.\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"echo_words\", \"arguments\": {\"words\": \"one </tool_call>\"}}\n</tool_",
            b"call>\nand then",
        ],
        // The rest: a second call, and one cut off at the end.
        b"\n<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"count\", \"argu",
    );
    assert_eq!(first["role"], "tool");
    assert_eq!(first["name"], "echo_words");
    assert!(first["content"].as_str().unwrap().contains("one </tool_call>"), "{first}");
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["name"], "count");
    assert!(rest[1]["content"].as_str().unwrap().contains("incomplete call"), "{}", rest[1]);
}

/// The families read unit by unit run their first call before the input ends too: Llama's
/// JSON and pythonic calls at their closing bracket, gpt-oss's at `<|call|>`,
/// FunctionGemma's at `<end_function_call>`.
#[test]
fn llama_gpt_oss_and_functiongemma_calls_run_while_the_response_is_still_written() {
    /// The format, the pieces written before the first result is read, the rest.
    type Case<'a> = (&'a str, &'a [&'a [u8]], &'a [u8]);
    let cases: [Case<'_>; 4] = [
        (
            "llama3",
            &[b"{\"name\": \"echo_words\", \"parameters\": {\"words\": \"one }\"", b"}}"],
            b"; {\"name\": \"count\", \"parameters\": {\"n\": 2}}<|eot_id|>",
        ),
        ("llama3", &[b"[echo_words(words='one )", b"')"], b", count(n=2)]<|eot|>"),
        (
            "gpt-oss",
            &[
                b"<|channel|>analysis<|message|>Echo.<|end|><|start|>assistant<|channel|>commentary to=functions.echo_words <|constrain|>json<|message|>{\"words\": \"one <|call|>\"}<|ca",
                b"ll|>",
            ],
            b"<|start|>assistant<|channel|>commentary to=functions.count <|constrain|>json<|message|>{\"n\": 2}<|call|>",
        ),
        (
            "functiongemma",
            &[b"<start_function_call>call:echo_words{words:<escape>one }<escape>}<end_function", b"_call>"],
            b"<start_function_call>call:count{n:2}<end_function_call>",
        ),
    ];
    for (format, before, after) in cases {
        let (first, rest) = stream_first_result_then_rest(format, before, after);
        if let Value::String(response) = &first {
            // FunctionGemma's response form (the echoed words' newline ends the first line).
            assert!(response.starts_with("<start_function_response>response:echo_words{"), "{response}");
            assert!(response.contains("one }"), "{response}");
            assert!(rest.last().and_then(Value::as_str).unwrap().contains("response:count{"), "{rest:?}");
            continue;
        }
        assert_eq!(rest.len(), 1, "{format}: {rest:?}");
        assert_eq!(first["name"], "echo_words", "{format}: {first}");
        assert!(first["content"].as_str().unwrap().contains("one "), "{format}: {first}");
        assert_eq!(rest[0]["name"], "count", "{format}: {rest:?}");
    }
}

#[test]
fn stream_needs_a_raw_text_family_and_says_when_there_is_no_call() {
    let t = tools();
    let call = |input: &str, extra: &[&str]| {
        Test::new()
            .arg("--packs")
            .arg(t.path())
            .args(["call", "--stream"])
            .args(extra)
            .stdin(input.as_bytes().to_vec())
            .run()
    };
    call("{}", &["--format", "openai"]).code(1).stderr_contains("--stream reads a model's raw text");
    call("It is 12 degrees.", &["--format", "gemma4"]).success().stdout_eq("").stderr_contains("packs: no tool calls");
}
