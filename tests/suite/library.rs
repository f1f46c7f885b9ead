//! The library entry points a front-end embeds: `Catalog::load` and `dispatch`.

use packs::calls::{self, CallFormat, Responder};
use packs::{Catalog, Context, DenyAll, SearchPath, ToolError};
use serde_json::{Value, json};

use crate::common::{Packs, nul_fields, printf_tool};

fn catalog(packs: &Packs) -> Catalog {
    let catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    assert!(catalog.diagnostics.is_empty(), "{:?}", catalog.diagnostics);
    catalog
}

fn echo() -> Packs {
    Packs::new().manifest(
        "echo_v",
        printf_tool(
            "echo_v",
            json!({"v": {"type": "string", "required": true}, "n": {"type": "integer"}}),
            json!(["{{v}}", "{{n}}"]),
        ),
    )
}

#[test]
fn dispatch_accepts_arguments_as_a_json_string() {
    let packs = echo();
    let catalog = catalog(&packs);
    let from_string = packs::dispatch(
        &catalog,
        "echo_v",
        Value::String(r#"{"v": "a b; $(id)", "n": 2}"#.into()),
        &Context::new(),
        &DenyAll,
    )
    .expect("a JSON string holding an object is accepted");
    assert!(from_string.ok, "{from_string:?}");
    assert_eq!(nul_fields(from_string.output.as_bytes()), Some(vec!["a b; $(id)".to_owned(), "2".to_owned()]));
    let from_object =
        packs::dispatch(&catalog, "echo_v", json!({"v": "a b; $(id)", "n": 2}), &Context::new(), &DenyAll).unwrap();
    assert_eq!(from_object.output, from_string.output);
}

#[test]
fn dispatch_rejects_arguments_that_are_not_an_object() {
    let packs = echo();
    let catalog = catalog(&packs);
    for args in [json!([1]), json!(5), json!(true), Value::String("[1]".into()), Value::String("{nope".into())] {
        let e = packs::dispatch(&catalog, "echo_v", args.clone(), &Context::new(), &DenyAll).unwrap_err();
        assert!(matches!(e, ToolError::InvalidArguments { .. }), "{args}: {e:?}");
        assert_eq!(e.kind(), "validation");
        assert!(e.retryable());
    }
    // Null and an empty string are "no arguments": here, a missing required one.
    for args in [Value::Null, Value::String("  ".into())] {
        let e = packs::dispatch(&catalog, "echo_v", args, &Context::new(), &DenyAll).unwrap_err();
        assert_eq!(
            e.to_json(),
            json!({"error": {
                "kind": "validation",
                "message": "invalid arguments for `echo_v`: `v`: `v` is required",
                "retryable": true,
                "errors": [{"field": "v", "message": "`v` is required", "schema": {"type": "string"}}],
            }})
        );
    }
}

#[test]
fn dispatch_only_resolves_cataloged_names() {
    let packs = echo();
    let catalog = catalog(&packs);
    for name in ["../../bin/sh", "/bin/sh", "printf", "echo_v.tool.json"] {
        let e = packs::dispatch(&catalog, name, json!({"v": "x"}), &Context::new(), &DenyAll).unwrap_err();
        assert_eq!(e.kind(), "not_found", "{name}");
        assert!(!e.retryable());
    }
}

#[test]
fn context_keys_are_checked_and_fill_parameters() {
    let packs = Packs::new().manifest(
        "open",
        printf_tool(
            "open",
            json!({"url": {"type": "string", "required": true, "source": "context.url"}}),
            json!(["{{url}}"]),
        ),
    );
    let catalog = catalog(&packs);
    let mut context = Context::new();
    assert!(context.set("nope", "x").is_err());
    context.set("url", "https://example.com/?q=1").unwrap();
    let r = packs::dispatch(&catalog, "open", json!({}), &context, &DenyAll).unwrap();
    assert_eq!(r.output, "https://example.com/?q=1\0");
}

#[test]
fn a_failed_tool_is_a_result_not_an_error() {
    let packs = Packs::new().manifest(
        "fails",
        json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "echo out; echo err >&2; exit 9"]}}),
    );
    let catalog = catalog(&packs);
    let r = packs::dispatch(&catalog, "fails", json!({}), &Context::new(), &DenyAll).unwrap();
    assert!(!r.ok);
    assert_eq!((r.exit_code, r.output.as_str(), r.stderr.as_str()), (Some(9), "out\n", "err\n"));
    assert_eq!(r.error.as_deref(), Some("the tool exited with code 9 (allowed exit codes: [0])"));
}

/// The public items of the module in `path` (named `module`), and of its `pub mod`s: what
/// `pub` declares at the top level (`named_enum!` blocks too) and what `pub use` re-exports.
fn public_items(path: &std::path::Path, module: &str, out: &mut std::collections::BTreeSet<(String, String)>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let mut in_macro = false;
    while let Some(line) = lines.next() {
        if line.ends_with("named_enum! {") {
            in_macro = true;
        } else if in_macro && line == "}" {
            in_macro = false;
        } else if in_macro {
            if let Some(rest) = line.strip_prefix("    pub enum ") {
                out.insert((module.to_owned(), ident(rest)));
            }
        } else if let Some(rest) = line.strip_prefix("pub use ") {
            let mut statement = rest.to_owned();
            while !statement.trim_end().ends_with(';') {
                statement.push_str(lines.next().expect("a `pub use` ends with `;`").trim());
            }
            let statement = statement.trim_end().trim_end_matches(';');
            let names = match statement.split_once('{') {
                Some((_, list)) => list.trim_end_matches('}').split(',').map(str::to_owned).collect(),
                None => vec![statement.to_owned()],
            };
            for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                let name = name.rsplit(" as ").next().unwrap().rsplit("::").next().unwrap();
                out.insert((module.to_owned(), name.to_owned()));
            }
        } else if let Some(rest) = line.strip_prefix("pub ") {
            let rest = rest.trim_start_matches("unsafe ").trim_start_matches("async ");
            let Some((kind, rest)) = rest.split_once(' ') else { continue };
            match kind {
                "mod" => {
                    let name = ident(rest);
                    let dir = match path.file_name().and_then(|f| f.to_str()) {
                        Some("lib.rs" | "mod.rs") => path.parent().unwrap().to_owned(),
                        _ => path.with_extension(""),
                    };
                    let file = [dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs")]
                        .into_iter()
                        .find(|f| f.is_file())
                        .unwrap_or_else(|| panic!("{}: no file for `pub mod {name}`", path.display()));
                    public_items(&file, &format!("{module}::{name}"), out);
                }
                "fn" | "struct" | "enum" | "trait" | "const" | "static" | "type" => {
                    out.insert((module.to_owned(), ident(rest)));
                }
                _ => {}
            }
        }
    }
}

fn ident(text: &str) -> String {
    text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// docs/LIBRARY.md's table of the public API lists exactly what the crate exports.
#[test]
fn the_public_api_is_this_table() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut exported = std::collections::BTreeSet::new();
    public_items(&root.join("src/lib.rs"), "packs", &mut exported);
    assert!(exported.len() > 100, "the scan found the exports: {exported:?}");

    let page = std::fs::read_to_string(root.join("docs/LIBRARY.md")).unwrap();
    let table = page.split("## The public API").nth(1).expect("docs/LIBRARY.md has `## The public API`");
    let mut documented = std::collections::BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let module = cells[1].trim_matches('`');
        for item in cells[2].split(',').map(|i| i.trim()) {
            assert!(item.starts_with('`') && item.ends_with('`'), "docs/LIBRARY.md: `{item}` in the row of {module}");
            assert!(
                documented.insert((module.to_owned(), item.trim_matches('`').to_owned())),
                "docs/LIBRARY.md lists {module}::{item} twice"
            );
        }
    }
    // A public module is a row of its own, not an item of its parent's rows.
    let modules: std::collections::BTreeSet<String> = documented.iter().map(|(m, _)| m.clone()).collect();
    let exported: std::collections::BTreeSet<_> =
        exported.into_iter().filter(|(m, i)| !modules.contains(&format!("{m}::{i}"))).collect();
    let show = |set: Vec<&(String, String)>| set.iter().map(|(m, i)| format!("{m}::{i}")).collect::<Vec<_>>();
    assert_eq!(
        (show(exported.difference(&documented).collect()), show(documented.difference(&exported).collect())),
        (vec![], vec![]),
        "(exported but not in docs/LIBRARY.md's table, in the table but not exported)"
    );
}

/// Tools for the front-end loop: one that runs, one that prints JSON, one that asks first.
fn loop_tools() -> Packs {
    Packs::new()
        .manifest(
            "say",
            json!({"name": "say", "description": "Echo words",
                   "parameters": {"words": {"type": "string", "required": true}},
                   "command": {"program": "echo", "args": ["{{words}}"]}}),
        )
        .manifest(
            "count",
            json!({"name": "count", "description": "Print JSON with a count",
                   "parameters": {"n": {"type": "integer", "required": true}},
                   "command": {"program": "printf", "args": ["{\"n\": %s}", "{{n}}"]}, "output": {"format": "json"}}),
        )
        .manifest(
            "careful",
            json!({"name": "careful", "description": "Asks first", "command": "echo careful ran",
                   "parameters": {"n": {"type": "integer"}}, "policy": {"confirm_before_run": true}}),
        )
}

/// A context whose audit log is a file in a new temporary directory.
fn audited() -> (tempfile::TempDir, std::path::PathBuf, Context) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let context = Context::new().with_audit(packs::AuditLog::open(&log).unwrap());
    (dir, log, context)
}

fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Approves everything, and counts what it was asked.
struct Counting(std::sync::atomic::AtomicUsize);

impl packs::Approver for Counting {
    fn approve(&self, _: &packs::ApprovalRequest) -> bool {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        true
    }
}

#[test]
fn the_responder_answers_an_openai_response_with_tool_messages() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let (_dir, log, context) = audited();
    let approver = Counting(0.into());
    let response = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "say", "arguments": r#"{"words": "hi; $(id)"}"#}},
        {"id": "c2", "type": "function", "function": {"name": "count", "arguments": r#"{"n": 3}"#}},
        {"id": "c3", "type": "function", "function": {"name": "careful", "arguments": "{}"}},
        {"id": "c4", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
    ]}}]});
    let reply = Responder::new(&catalog)
        .context(&context)
        .approver(&approver)
        .respond(&response.to_string(), CallFormat::Auto)
        .unwrap();
    assert_eq!(reply.reading.format, CallFormat::Openai);
    assert_eq!(approver.0.load(std::sync::atomic::Ordering::SeqCst), 1, "only `careful` asks");
    let messages: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(messages[0], json!({"role": "tool", "tool_call_id": "c1", "content": "hi; $(id)\n"}));
    assert_eq!(messages[1]["tool_call_id"], "c2");
    assert_eq!(messages[2]["content"], "careful ran\n");
    let error: Value = serde_json::from_str(messages[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(error["error"]["kind"], "not_found");
    // The structured results: the JSON a tool printed, the error object of a refusal.
    let ok: Vec<bool> = reply.results.iter().map(|r| r.ok).collect();
    assert_eq!(ok, [true, true, true, false]);
    assert_eq!(reply.results[1].value, json!({"n": 3}));
    assert_eq!(reply.results[3].value, error);
    let decisions: Vec<Value> = audit_lines(&log).iter().map(|l| l["decision"].clone()).collect();
    assert_eq!(decisions, [json!("allowed"), json!("allowed"), json!("approved"), json!("none")]);
    // A final answer: no calls, nothing to append.
    let done = r#"{"choices": [{"message": {"role": "assistant", "content": "Done."}}]}"#;
    let reply = Responder::new(&catalog).respond(done, CallFormat::Auto).unwrap();
    assert!(reply.results.is_empty() && reply.text.is_empty(), "{reply:?}");
    // A response that cannot be read at all is the loop's error; nothing ran.
    assert!(Responder::new(&catalog).respond(r#"{"answer": 42}"#, CallFormat::Auto).is_err());
}

#[test]
fn the_responder_answers_anthropic_and_qwen3_in_their_shapes() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let responder = Responder::new(&catalog);
    let anthropic = json!({"role": "assistant", "content": [
        {"type": "text", "text": "Saying it."},
        {"type": "tool_use", "id": "tu1", "name": "say", "input": {"words": "hello"}},
        {"type": "tool_use", "id": "tu2", "name": "careful", "input": {}},
    ]});
    let reply = responder.respond(&anthropic.to_string(), CallFormat::Anthropic).unwrap();
    let message: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(message["role"], "user");
    assert_eq!(
        message["content"][0],
        json!({"type": "tool_result", "tool_use_id": "tu1", "content": "hello\n", "is_error": false})
    );
    // No approver: a call that needs approval is refused, an error result the model reads.
    assert_eq!(message["content"][1]["is_error"], true);
    assert!(message["content"][1]["content"].as_str().unwrap().contains("permission_denied"), "{message}");

    let qwen3 = "<think>\nCount.\n</think>\n\n<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 2}}\n</tool_call>\n\
                 <tool_call>\n{\"name\": \"say\", \"arguments\": {\"words\": 5}}\n</tool_call>";
    let reply = responder.respond(qwen3, CallFormat::Qwen3).unwrap();
    assert_eq!(reply.reading.parsed.as_ref().unwrap().reasoning_content.as_deref(), Some("Count."));
    let messages: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(messages[0], json!({"role": "tool", "name": "count", "content": "{\"n\":2}"}));
    // A number for a string parameter: a validation error the model can correct.
    assert_eq!(reply.results[1].value["error"]["kind"], "validation");
    assert!(messages[1]["content"].as_str().unwrap().contains("is not of type"), "{messages}");
}

#[test]
fn badly_formed_arguments_are_validated_and_audited_with_the_rules_decision() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let (_dir, log, context) = audited();
    let calls = json!({"role": "assistant", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "say", "arguments": "{\"words\": oops"}},
        {"id": "b", "type": "function", "function": {"name": "say", "arguments": "\"a string\""}},
        {"id": "c", "type": "function", "function": {"name": "say", "arguments": "{\"words\": [1]}"}},
        {"id": "d", "type": "function", "function": {"name": "careful", "arguments": "{\"n\": \"x\"}"}},
        {"id": "e", "type": "function", "function": {"name": "careful", "arguments": "{oops"}},
    ]});
    let approver = Counting(0.into());
    let reply = Responder::new(&catalog)
        .context(&context)
        .approver(&approver)
        .respond(&calls.to_string(), CallFormat::Openai)
        .unwrap();
    assert_eq!(approver.0.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing invalid is put to a person");
    for r in &reply.results {
        assert!(!r.ok, "{r:?}");
        assert_eq!(r.value["error"]["kind"], "validation", "{r:?}");
    }
    assert!(reply.results[0].content.contains("not valid JSON"), "{:?}", reply.results[0]);
    assert!(reply.results[1].content.contains("not a JSON object"), "{:?}", reply.results[1]);
    // The library's own idiom: the model's arguments as they came, a JSON string.
    let e = packs::Call::new("say", Value::String("{oops".into())).context(&context).run(&catalog).unwrap_err();
    assert_eq!(e.kind(), "validation");
    // An agent that denies `say`: the rules answer first, whatever the arguments.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bot")).unwrap();
    std::fs::write(root.path().join("bot/agent.toml"), "deny = [\"say\"]\n").unwrap();
    let bot = context.clone().with_agent(packs::Agent::load(root.path(), "bot").unwrap());
    let first = json!({"role": "assistant", "tool_calls": [calls["tool_calls"][0].clone()]});
    let denied = Responder::new(&catalog).context(&bot).respond(&first.to_string(), CallFormat::Openai).unwrap();
    assert_eq!(denied.results[0].value["error"]["kind"], "permission_denied");

    let lines = audit_lines(&log);
    let seen: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| (l["tool"].as_str().unwrap(), l["decision"].as_str().unwrap(), l["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("say", "allowed", "validation"),
            ("say", "allowed", "validation"),
            ("say", "allowed", "validation"),
            ("careful", "ask", "validation"),
            ("careful", "ask", "validation"),
            ("say", "allowed", "validation"),
            ("say", "denied", "denied"),
        ]
    );
    assert!(lines[0]["error"].as_str().unwrap().contains("not valid JSON"), "{}", lines[0]);
}

#[test]
fn a_conversation_stops_a_tools_validation_retries() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let failed = json!({"error": {"kind": "validation", "message": "bad", "retryable": true}}).to_string();
    let call = |id: &str| {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "count", "arguments": "{\"n\": \"many\"}"}}]})
    };
    let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": failed});
    let conversation =
        json!([{"role": "user", "content": "count"}, call("1"), result("1"), call("2"), result("2"), call("3")]);
    let respond = |retries: usize| {
        Responder::new(&catalog).max_retries(retries).respond_conversation(&conversation.to_string(), CallFormat::Auto)
    };
    let reply = respond(2).unwrap();
    assert_eq!(reply.results.len(), 1, "only the call no result follows");
    assert_eq!(reply.results[0].call.id, "3");
    assert_eq!(reply.results[0].value["error"]["retryable"], false);
    assert!(reply.results[0].content.contains("failed validation 3 times in a row"), "{:?}", reply.results[0]);
    let more = respond(5).unwrap();
    assert_eq!(more.results[0].value["error"]["retryable"], true);
}

#[test]
fn a_streamed_call_is_answered_as_soon_as_it_is_whole() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let responder = Responder::new(&catalog);
    let mut stream = responder.stream(packs::formats::raw::Family::Qwen3);
    let events = stream.push(b"Sure.\n<tool_call>\n{\"name\": \"say\", \"arguments\": {\"words\": \"one\"}}\n</tool_");
    assert!(events.iter().all(|e| !matches!(e, packs::formats::raw::Event::Call(_))), "{events:?}");
    assert_eq!(stream.next(), None, "no call is whole yet");
    stream.push(b"call>\n<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"say\", \"argu");
    let whole: Vec<_> = stream.by_ref().collect();
    assert_eq!(whole.iter().map(|r| r.content.as_str()).collect::<Vec<_>>(), ["one\n", "{\"n\":1}"]);
    assert_eq!(stream.answered(), 2);
    stream.finish().unwrap();
    let rest: Vec<_> = stream.by_ref().collect();
    assert_eq!(rest.len(), 1, "the call cut off at the end");
    assert!(rest[0].content.contains("incomplete call"), "{:?}", rest[0]);
    let line: Value = serde_json::from_str(&calls::render_line(&whole[0], packs::formats::raw::Family::Qwen3)).unwrap();
    assert_eq!(line, json!({"role": "tool", "name": "say", "content": "one\n"}));
}

#[test]
fn a_deferred_call_is_pending_then_answered_with_its_ticket() {
    let packs = loop_tools();
    let catalog = catalog(&packs);
    let dir = tempfile::tempdir().unwrap();
    let tickets = packs::Tickets::open(&dir.path().join("approval.key")).unwrap();
    let context = Context::new();
    let response = json!({"role": "assistant", "tool_calls": [
        {"id": "k", "type": "function", "function": {"name": "careful", "arguments": "{}"}},
        {"id": "s", "type": "function", "function": {"name": "say", "arguments": "{\"words\": \"now\"}"}},
    ]})
    .to_string();
    let reply =
        Responder::new(&catalog).context(&context).defer(&tickets).respond(&response, CallFormat::Openai).unwrap();
    assert_eq!(reply.results[1].content, "now\n", "a call that needs no approval runs");
    let ticket = reply.results[0].value["pending"]["ticket"].as_str().expect("pending").to_owned();
    let answers = packs::Answers::new(&tickets).approve(&ticket);
    let responder = Responder::new(&catalog).context(&context).answers(&answers);
    let again = responder.respond(&response, CallFormat::Openai).unwrap();
    assert_eq!(again.results[0].content, "careful ran\n");
    assert!(responder.refused_tickets().is_empty() && answers.all_honoured());
    // Spent: the same ticket again refuses the call.
    let answers = packs::Answers::new(&tickets).approve(&ticket);
    let replay = Responder::new(&catalog).context(&context).answers(&answers).respond(&response, CallFormat::Openai);
    assert_eq!(replay.unwrap().results[0].value["error"]["kind"], "permission_denied");
    assert!(!answers.all_honoured());
}

/// examples/agent_loop.rs, run for real: the bundled packs, the literal response, the audit log.
#[test]
fn the_agent_loop_example_answers_its_response() {
    #[path = "../../examples/agent_loop.rs"]
    #[allow(dead_code)]
    mod agent_loop;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let text = agent_loop::answer(agent_loop::RESPONSE, log.to_str().unwrap()).unwrap();
    let messages: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(messages[0]["tool_call_id"], "c1");
    assert!(messages[0]["content"].as_str().unwrap().ends_with("\tsrc\n"), "{messages}");
    assert!(messages[1]["content"].as_str().unwrap().contains("not valid JSON"), "{messages}");
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 2);
    assert_eq!((lines[0]["tool"].as_str(), lines[0]["outcome"].as_str()), (Some("disk_usage"), Some("ok")));
    assert_eq!((lines[1]["decision"].as_str(), lines[1]["outcome"].as_str()), (Some("allowed"), Some("validation")));
}
