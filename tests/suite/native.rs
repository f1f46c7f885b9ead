//! Native tools: a third kind of tool, registered by a Rust program, through the same
//! pipeline as manifests and executables.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use packs::formats::{ExportFormat, export};
use packs::{
    Agent, ApproveAll, AsyncCall, AuditLog, Call, CancelToken, Catalog, Context, Denial, DenyAll, Failure, NativeCall,
    NativeError, NativeOutput, NativeTool, NativeToolError, OutputSpec, Policy, Progress, SearchPath, Status,
    ToolError, ToolKind,
};
use serde_json::{Map, Value, json};

use crate::common::{Packs, alive, printf_tool};

/// A configurable native tool that counts its runs.
struct Echo {
    name: &'static str,
    policy: Policy,
    output: OutputSpec,
    runs: Arc<AtomicUsize>,
    behave: fn(&Map<String, Value>) -> Result<String, NativeError>,
}

impl Echo {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            policy: Policy::default().with_read_only(true),
            output: OutputSpec::default(),
            runs: Arc::new(AtomicUsize::new(0)),
            behave: |args| Ok(format!("said {}", args["word"].as_str().unwrap_or_default())),
        }
    }
}

impl NativeTool for Echo {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Say a word back.\nLonger text for the manual page."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"word": {"type": "string", "maxLength": 8}}, "required": ["word"], "additionalProperties": false})
    }
    fn policy(&self) -> Policy {
        self.policy.clone()
    }
    fn output(&self) -> OutputSpec {
        self.output.clone()
    }
    fn execute(&self, args: &Map<String, Value>) -> Result<String, NativeError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        (self.behave)(args)
    }
}

fn catalog_with(tool: Echo) -> Catalog {
    let mut catalog = Catalog::default();
    catalog.register(tool).expect("registers");
    catalog
}

#[test]
fn a_native_tool_is_listed_exported_described_and_called() {
    let packs = Packs::new().manifest("file_tool", printf_tool("file_tool", json!({}), json!(["x"])));
    let mut catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    catalog.register(Echo::new("echo_word")).unwrap();
    let names: Vec<(&str, ToolKind)> = catalog.tools().map(|t| (t.name(), t.kind())).collect();
    assert_eq!(names, [("file_tool", ToolKind::Manifest), ("echo_word", ToolKind::Native)]);

    let tool = catalog.get("echo_word").unwrap();
    assert_eq!(tool.short_description(), "Say a word back.");
    assert_eq!(tool.describe().parameters["required"], json!(["word"]));
    let openai = export(&[tool], ExportFormat::Openai);
    assert_eq!(openai.as_json().unwrap()[0]["function"]["name"], "echo_word");
    assert_eq!(openai.as_json().unwrap()[0]["function"]["parameters"]["properties"]["word"]["maxLength"], 8);
    assert!(packs::prompt::tool_entry(tool).starts_with("- echo_word: Say a word back. Input: "));
    let page = packs::help_page(tool);
    assert!(page.contains("Longer text for the manual page."), "{page}");
    assert!(page.contains("native tool"), "{page}");

    let r = Call::new("echo_word", json!({"word": "hi"})).run(&catalog).unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.output, "said hi");
    assert_eq!(r.exit_code, Some(0));
}

#[test]
fn validation_comes_before_a_native_tool_runs() {
    let tool = Echo::new("echo_word");
    let runs = Arc::clone(&tool.runs);
    let catalog = catalog_with(tool);
    for bad in [json!({}), json!({"word": "far too long"}), json!({"word": "a", "extra": 1}), json!("[1]")] {
        let e = Call::new("echo_word", bad.clone()).run(&catalog).unwrap_err();
        assert_eq!(e.kind(), "validation", "{bad}: {e}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a call that does not validate never runs");
    let r = Call::new("echo_word", Value::String(r#"{"word": "ok"}"#.into())).run(&catalog).unwrap();
    assert_eq!(r.output, "said ok");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn tiers_approval_and_agent_rules_apply_to_native_tools() {
    let mut careful = Echo::new("careful_word");
    careful.policy = Policy::default().with_confirm_before_run(true);
    let runs = Arc::clone(&careful.runs);
    let catalog = catalog_with(careful);
    let args = || json!({"word": "hi"});
    let e = Call::new("careful_word", args()).approver(&DenyAll).run(&catalog).unwrap_err();
    match &e {
        ToolError::PermissionDenied { reason: Denial::NotApproved(_), .. } => {}
        other => panic!("expected a refused approval, got {other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let asked = Mutex::new(Vec::new());
    struct Recorder<'a>(&'a Mutex<Vec<Vec<String>>>);
    impl packs::Approver for Recorder<'_> {
        fn approve(&self, request: &packs::ApprovalRequest) -> bool {
            self.0.lock().unwrap().push(request.argv.clone());
            true
        }
    }
    let r = Call::new("careful_word", args()).approver(&Recorder(&asked)).run(&catalog).unwrap();
    assert!(r.ok);
    assert_eq!(asked.into_inner().unwrap(), [vec!["careful_word".to_owned(), r#"{"word":"hi"}"#.to_owned()]]);

    // An agent that denies the tool: the approver is never reached.
    let agents = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(agents.path().join("a")).unwrap();
    std::fs::write(agents.path().join("a/agent.toml"), "deny = [\"careful_*\"]\n").unwrap();
    let context = Context::new().with_agent(Agent::load(agents.path(), "a").unwrap());
    let e = Call::new("careful_word", args()).context(&context).approver(&ApproveAll).run(&catalog).unwrap_err();
    assert!(matches!(e, ToolError::PermissionDenied { reason: Denial::NotAllowed { .. }, .. }), "{e:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn native_calls_are_audited_and_report_their_phases() {
    let catalog = catalog_with(Echo::new("echo_word"));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let context = Context::new().with_audit(AuditLog::open(&log).unwrap());
    let phases = Mutex::new(Vec::new());
    let on_status = |s: Status<'_>| {
        if let Status::Phase(p) = s {
            phases.lock().unwrap().push(format!("{p:?}"));
        }
    };
    Call::new("echo_word", json!({"word": "hi"})).context(&context).on_status(&on_status).run(&catalog).unwrap();
    assert_eq!(phases.into_inner().unwrap(), ["Validate", "Authorize", "Execute", "Complete"]);
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(line["tool"], "echo_word");
    assert_eq!(line["tier"], "read_only");
    assert_eq!(line["decision"], "allowed");
    assert_eq!(line["outcome"], "ok");
    assert_eq!(line["argv"], json!(["echo_word", r#"{"word":"hi"}"#]));
}

#[test]
fn native_output_is_shaped_and_failures_are_results() {
    let mut structured = Echo::new("structured");
    structured.output = OutputSpec {
        format: packs::OutputFormat::Json,
        extract_field: Some("data".into()),
        max_chars: 5,
        ..OutputSpec::default()
    };
    structured.behave = |_| Ok(r#"{"data": {"answer": 42, "text": "long enough"}}"#.into());
    let mut failing = Echo::new("failing");
    failing.behave = |_| Err("the service said no".into());
    let mut panicking = Echo::new("panicking");
    panicking.behave = |_| panic!("boom");
    let mut catalog = catalog_with(structured);
    catalog.register(failing).unwrap();
    catalog.register(panicking).unwrap();
    let args = || json!({"word": "x"});

    let r = Call::new("structured", args()).run(&catalog).unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.json, Some(json!({"answer": 42, "text": "long enough"})), "the parsed value travels with the result");
    assert_eq!(r.display.chars().count(), 5);

    let r = Call::new("failing", args()).run(&catalog).unwrap();
    assert!(!r.ok);
    assert_eq!(r.failure, Some(Failure::Native("the service said no".into())));
    assert_eq!(r.error_json()["error"]["message"], "the service said no");

    let r = Call::new("panicking", args()).run(&catalog).unwrap();
    assert!(!r.ok);
    assert_eq!(r.error.as_deref(), Some("the tool panicked: boom"));
}

#[test]
fn registration_checks_the_tool() {
    let mut catalog = Catalog::default();
    assert_eq!(catalog.register(Echo::new("Not Snake")), Err(NativeToolError::BadName("Not Snake".into())));
    struct NoSchema;
    impl NativeTool for NoSchema {
        fn name(&self) -> &str {
            "no_schema"
        }
        fn description(&self) -> &str {
            "d"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "string"})
        }
        fn execute(&self, _: &Map<String, Value>) -> Result<String, NativeError> {
            Ok(String::new())
        }
    }
    assert!(matches!(catalog.register(NoSchema), Err(NativeToolError::BadSchema { .. })));
    catalog.register(Echo::new("echo_word")).unwrap();
    assert_eq!(catalog.register(Echo::new("echo_word")), Err(NativeToolError::Duplicate("echo_word".into())));

    // A native tool shadows a pack directory's tool of the same name, and says so.
    let packs = Packs::new().manifest("echo_word", printf_tool("echo_word", json!({}), json!(["x"])));
    let mut catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    catalog.register(Echo::new("echo_word")).unwrap();
    assert_eq!(catalog.get("echo_word").unwrap().kind(), ToolKind::Native);
    assert_eq!(catalog.shadowed.len(), 1);
    assert!(catalog.shadowed[0].hidden.ends_with("echo_word.tool.json"));
}

#[test]
fn the_native_tool_example_runs() {
    // Cargo builds the examples for `cargo test`, beside the test binaries' directory.
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples/native_tool");
    let out = std::process::Command::new(&example)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PACKS_CACHE_DIR", "")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", example.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let export_end = stdout.find("\ndisk_usage: ").expect("a manifest call");
    let tools: Value = serde_json::from_str(&stdout[..export_end]).expect("the OpenAI export first");
    let names: Vec<&str> = tools.as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(names.contains(&"sum_numbers") && names.contains(&"disk_usage"), "{names:?}");
    assert!(stdout.contains("word_count: 5 words, 1 lines, 37 characters"), "{stdout}");
    assert!(stdout.contains(r#"sum_numbers (structured): {"sum":6.5,"count":3}"#), "{stdout}");
}

#[test]
fn native_tools_are_pinned_and_locked_through_the_library() {
    use packs::lock::{self, Drift, LockFile};
    let catalog = catalog_with(Echo::new("echo_word"));
    let mut pinned = LockFile { version: lock::LOCK_VERSION, tools: Vec::new() };
    pinned.put(lock::pin(catalog.get("echo_word").unwrap(), None).unwrap());
    assert_eq!(pinned.tools[0].kind, "native");
    assert_eq!(pinned.tools[0].file, None, "a native tool has no file");
    // The same tool: nothing refused.
    let mut same = catalog_with(Echo::new("echo_word"));
    assert!(lock::enforce(&mut same, &pinned).is_empty());
    // Its policy loosened: withdrawn, and a call names why.
    let mut looser = Echo::new("echo_word");
    looser.policy.read_only = false;
    let mut changed = catalog_with(looser);
    let refused = lock::enforce(&mut changed, &pinned);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].drift, Drift::Changed(vec!["policy".into()]));
    assert_eq!(changed.tools().count(), 0);
    let e = changed.get("echo_word").unwrap_err().to_string();
    assert!(e.contains("refused by the lock file") && e.contains("policy"), "{e}");
}

/// A native tool written against the whole contract (`run`): context, progress, output,
/// cancellation, JSON out. `behave` is what it does.
struct Contract {
    policy: Policy,
    behave: fn(&NativeCall) -> Result<NativeOutput, NativeError>,
}

impl NativeTool for Contract {
    fn name(&self) -> &str {
        "contract"
    }
    fn description(&self) -> &str {
        "A tool of the whole contract"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn policy(&self) -> Policy {
        self.policy.clone()
    }
    fn run(&self, call: &NativeCall) -> Result<NativeOutput, NativeError> {
        (self.behave)(call)
    }
}

fn contract(behave: fn(&NativeCall) -> Result<NativeOutput, NativeError>) -> Catalog {
    let mut catalog = Catalog::default();
    catalog.register(Contract { policy: Policy::default().with_read_only(true), behave }).unwrap();
    catalog
}

#[test]
fn a_native_tool_sees_the_calls_context_and_its_progress_reaches_on_status() {
    let catalog = contract(|call| {
        call.progress(Progress::new("index").percent(40.0).eta(Duration::from_secs(3)).message("4 of 10"));
        call.output(b"working\n");
        call.progress(Progress::new("index").percent(250.0));
        Ok(json!({
            "tool": call.tool(),
            "n": call.args()["n"],
            "url": call.value("url"),
            "mode": call.mode(),
            "workspace": call.workspace(),
            "cancelled": call.is_cancelled(),
        })
        .into())
    });
    let workspace = tempfile::tempdir().unwrap();
    let mut context = Context::new().with_mode("Coding").with_workspace(workspace.path().to_owned());
    context.set("url", "https://example.org/page").unwrap();
    let heard = Mutex::new(Vec::new());
    let on_status = |s: Status<'_>| {
        heard.lock().unwrap().push(match s {
            Status::Phase(p) => format!("{p:?}"),
            Status::Progress(p) => {
                format!("{}:{:?}:{:?}:{:?}", p.phase.as_deref().unwrap(), p.percent, p.eta, p.message)
            }
            Status::Output { chunk, .. } => format!("out:{}", String::from_utf8_lossy(chunk)),
            _ => "other".to_owned(),
        });
    };
    let r = Call::new("contract", json!({"n": 7})).context(&context).on_status(&on_status).run(&catalog).unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(
        r.json,
        Some(json!({"tool": "contract", "n": 7, "url": "https://example.org/page", "mode": "Coding",
                    "workspace": workspace.path(), "cancelled": false}))
    );
    assert_eq!(
        heard.into_inner().unwrap(),
        [
            "Validate",
            "Authorize",
            "Execute",
            r#"index:Some(40.0):Some(3s):Some("4 of 10")"#,
            "out:working\n",
            "index:Some(100.0):None:None",
            "Complete"
        ]
    );
}

#[test]
fn a_native_tools_json_result_is_kept_as_it_is_not_printed_and_parsed_again() {
    // Nested deeper than serde_json's parser accepts (128): printed and parsed again, it
    // would be a failure ("recursion limit exceeded").
    fn deep() -> Value {
        (0..200).fold(json!("bottom"), |inner, _| json!([inner]))
    }
    assert!(serde_json::from_str::<Value>(&deep().to_string()).is_err(), "a round trip would fail");
    let catalog = contract(|_| Ok(NativeOutput::Json(deep())));
    let r = Call::new("contract", Value::Null).run(&catalog).unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.json, Some(deep()));
    assert_eq!(r.output, deep().to_string());
}

#[test]
fn a_native_tools_json_result_over_max_output_bytes_is_a_failure() {
    let mut catalog = Catalog::default();
    catalog
        .register(Contract {
            policy: Policy::default().with_read_only(true).with_max_output_bytes(20),
            behave: |_| Ok(json!({"k": "0123456789012345678901234567890123456789"}).into()),
        })
        .unwrap();
    let r = Call::new("contract", Value::Null).run(&catalog).unwrap();
    assert!(!r.ok && r.truncated, "{r:?}");
    assert_eq!(r.failure, Some(Failure::OutputTooLarge(20)));
    assert_eq!(r.json, None);
    assert_eq!(r.output, r#"{"k":"01234567890123"#);
}

#[test]
fn a_native_tool_that_ignores_cancellation_still_ends_at_its_timeout() {
    static TOKEN: Mutex<Option<CancelToken>> = Mutex::new(None);
    let mut catalog = Catalog::default();
    catalog
        .register(Contract {
            policy: Policy::default().with_read_only(true).with_timeout_secs(1),
            behave: |call| {
                *TOKEN.lock().unwrap() = Some(call.cancel_token().clone());
                std::thread::sleep(Duration::from_secs(4)); // never looks at its token
                Ok("too late".into())
            },
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let context = Context::new().with_audit(AuditLog::open(&log).unwrap());
    let start = Instant::now();
    let r = Call::new("contract", Value::Null).context(&context).run(&catalog).unwrap();
    assert!(start.elapsed() < Duration::from_secs(4), "the call did not wait for the tool");
    assert!(!r.ok && r.timed_out, "{r:?}");
    assert_eq!(r.failure, Some(Failure::Timeout(Duration::from_secs(1))));
    assert_eq!(r.error_json()["error"]["kind"], "timeout");
    let token = TOKEN.lock().unwrap().clone().expect("the tool ran");
    assert!(token.is_cancelled(), "the tool's token is set at its timeout");
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(line["outcome"], "timeout");
}

#[test]
fn a_call_cancelled_by_its_token_ends_cancelled_and_the_tool_sees_it() {
    static SAW: Mutex<Option<bool>> = Mutex::new(None);
    let catalog = contract(|call| {
        call.progress(Progress::new("wait"));
        let cancelled = call.cancel_token().wait_timeout(Duration::from_secs(60));
        *SAW.lock().unwrap() = Some(cancelled);
        Ok("stopped".into())
    });
    let token = CancelToken::new();
    // Cancelled from the status callback once the tool is running (any thread may cancel).
    let on_status = |s: Status<'_>| {
        if matches!(s, Status::Progress(_)) {
            token.cancel();
        }
    };
    let start = Instant::now();
    let r = Call::new("contract", Value::Null).cancel_token(&token).on_status(&on_status).run(&catalog).unwrap();
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(!r.ok, "{r:?}");
    assert_eq!(r.failure, Some(Failure::Cancelled));
    assert_eq!(
        (r.error_json()["error"]["kind"].as_str(), r.failure.as_ref().unwrap().retryable()),
        (Some("cancelled"), false)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while SAW.lock().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*SAW.lock().unwrap(), Some(true), "the tool's own token was set");
    // A token cancelled already: nothing runs.
    let r = Call::new("contract", Value::Null).cancel_token(&token).run(&catalog).unwrap();
    assert_eq!(r.failure, Some(Failure::Cancelled));
}

#[test]
fn dropping_an_async_call_kills_the_tools_whole_process_group() {
    let packs = Packs::new().manifest(
        "forks",
        json!({"name": "forks", "description": "Starts a grandchild, says its pid and waits",
               "command": {"program": "sh", "args": ["-c", "sleep 300 & echo $!; wait"]}}),
    );
    let catalog = Arc::new(Catalog::load(&SearchPath::dirs([packs.path()])));
    let log = packs.join("audit.jsonl");
    let context = Arc::new(Context::new().with_audit(AuditLog::open(&log).unwrap()));
    let pids: Arc<Mutex<(Option<u32>, Option<u32>)>> = Arc::default();
    let heard = Arc::clone(&pids);
    let call = AsyncCall::new("forks", Value::Null).context(context).on_status(move |s| match s {
        Status::Spawned { pid, .. } => heard.lock().unwrap().0 = Some(pid),
        Status::Output { chunk, .. } => heard.lock().unwrap().1 = String::from_utf8_lossy(chunk).trim().parse().ok(),
        _ => {}
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let (child, grandchild) = runtime.block_on(async {
        let mut running = std::pin::pin!(call.run(catalog));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(ended) = tokio::time::timeout(Duration::from_millis(20), &mut running).await {
                panic!("the call ended on its own: {ended:?}");
            }
            if let (Some(child), Some(grandchild)) = *pids.lock().unwrap() {
                break (child, grandchild);
            }
            assert!(Instant::now() < deadline, "the tool did not start: {:?}", pids.lock().unwrap());
        }
        // `running` is dropped here.
    });
    assert!(child != grandchild);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (alive(child) || alive(grandchild)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(child), "the tool's process {child} outlived the dropped future");
    assert!(!alive(grandchild), "its grandchild {grandchild} outlived the dropped future");
    // The call went on to its end on the blocking pool: audited as cancelled.
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().last() {
            break serde_json::from_str::<Value>(line).unwrap()["outcome"].clone();
        }
        assert!(Instant::now() < deadline, "the call was not audited");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(outcome, "cancelled");
    drop(runtime);
}

#[test]
fn dropping_an_async_call_sets_a_native_tools_token() {
    static SAW: Mutex<Option<bool>> = Mutex::new(None);
    let catalog = Arc::new(contract(|call| {
        call.progress(Progress::new("wait"));
        let cancelled = call.cancel_token().wait_timeout(Duration::from_secs(60));
        *SAW.lock().unwrap() = Some(cancelled);
        Ok("stopped".into())
    }));
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let heard = Arc::clone(&started);
    let call = AsyncCall::new("contract", Value::Null).on_status(move |s| {
        if matches!(s, Status::Progress(_)) {
            heard.store(true, Ordering::SeqCst);
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async {
        let mut running = std::pin::pin!(call.run(catalog));
        while !started.load(Ordering::SeqCst) {
            assert!(tokio::time::timeout(Duration::from_millis(20), &mut running).await.is_err());
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while SAW.lock().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*SAW.lock().unwrap(), Some(true), "the tool's token was set when the future was dropped");
}

#[test]
fn a_tool_written_for_execute_alone_still_works_and_one_with_neither_fails_clearly() {
    struct Neither;
    impl NativeTool for Neither {
        fn name(&self) -> &str {
            "neither"
        }
        fn description(&self) -> &str {
            "d"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
    }
    let mut catalog = catalog_with(Echo::new("echo_word"));
    catalog.register(Neither).unwrap();
    let r = Call::new("echo_word", json!({"word": "hi"})).run(&catalog).unwrap();
    assert_eq!((r.ok, r.output.as_str(), r.json.as_ref()), (true, "said hi", None));
    let r = Call::new("neither", Value::Null).run(&catalog).unwrap();
    assert_eq!(
        r.failure,
        Some(Failure::Native("the native tool `neither` implements neither `run` nor `execute`".into()))
    );
    // Outside the pipeline, a tool is tested with a call of its own.
    let call = NativeCall::new(Map::from_iter([("word".to_owned(), json!("yo"))]));
    assert_eq!(Echo::new("echo_word").run(&call).unwrap(), NativeOutput::Text("said yo".into()));
}

#[test]
fn the_async_example_runs_two_calls_at_once_and_cancels_one() {
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples/async_agent");
    let out = std::process::Command::new(&example)
        .env("PACKS_CACHE_DIR", "")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", example.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(r#"count_up: {"counted":10,"agent":null,"url":"https://example.org/"}"#), "{stdout}");
    assert!(stdout.contains("wait_then_say: the call was cancelled (cancelled)"), "{stdout}");
    assert!(stderr.contains("count_up: 100%") && stderr.contains("wait_then_say: started"), "{stderr}");
}
