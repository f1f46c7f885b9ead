//! An async front-end: two calls at once through the same pipeline, one of them cancelled.
//!
//! ```sh
//! cargo run --example async_agent --features async
//! ```
//!
//! It loads a pack directory it writes itself (one manifest, `wait_then_say`: a shell
//! that sleeps, then prints) and registers a native tool (`count_up`: counts in steps,
//! reporting progress, and stops when its call is cancelled). Both run concurrently on
//! tokio; the slow process is cancelled by its token after 300 ms (its process group is
//! killed), while the native tool finishes and returns JSON.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use packs::{
    AsyncCall, CancelToken, Catalog, Context, NativeCall, NativeError, NativeOutput, NativeTool, Policy, Progress,
    SearchPath, Status, Tier,
};
use serde_json::{Value, json};

/// Counts to `to` in steps of 20 ms, reporting each step; stops early when cancelled.
struct CountUp;

impl NativeTool for CountUp {
    fn name(&self) -> &str {
        "count_up"
    }

    fn description(&self) -> &str {
        "Count up to a number, slowly, and say how far it got"
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"to": {"type": "integer", "minimum": 1, "maximum": 100}},
               "required": ["to"], "additionalProperties": false})
    }

    fn policy(&self) -> Policy {
        Policy::default().with_read_only(true).with_tier(Tier::ReadOnly).with_timeout_secs(10)
    }

    fn run(&self, call: &NativeCall) -> Result<NativeOutput, NativeError> {
        let to = call.args()["to"].as_u64().unwrap_or(1);
        let step = Duration::from_millis(20);
        for i in 1..=to {
            // Waiting on the token instead of sleeping: a cancellation ends the wait at once.
            if call.cancel_token().wait_timeout(step) {
                return Err(format!("cancelled at {i}").into());
            }
            let left = step * u32::try_from(to - i).unwrap_or(u32::MAX);
            call.progress(Progress::new("count").percent(i as f32 * 100.0 / to as f32).eta(left));
        }
        Ok(json!({"counted": to, "agent": call.agent(), "url": call.value("url")}).into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let manifest = json!({
        "name": "wait_then_say",
        "description": "Wait some seconds, then say so",
        "parameters": {"seconds": {"type": "integer", "minimum": 0, "maximum": 60}},
        "command": {"program": "sh", "args": ["-c", "sleep \"$1\"; echo waited", "sh", "{{seconds}}"]},
        "policy": {"read_only": true}
    });
    std::fs::write(dir.path().join("wait_then_say.tool.json"), manifest.to_string()).expect("write the manifest");
    let mut catalog = Catalog::load(&SearchPath::dirs([dir.path()]));
    for d in &catalog.diagnostics {
        eprintln!("{d}");
    }
    catalog.register(CountUp).expect("register count_up");
    let catalog = Arc::new(catalog);
    let mut context = Context::new();
    context.set("url", "https://example.org/").expect("a context key");
    let context = Arc::new(context);

    let progress = |status: Status<'_>| match status {
        Status::Progress(p) => eprintln!("  count_up: {:.0}%", p.percent.unwrap_or_default()),
        Status::Spawned { pid, .. } => eprintln!("  wait_then_say: started, process group {pid}"),
        _ => {}
    };
    let count = AsyncCall::new("count_up", json!({"to": 10})).context(Arc::clone(&context)).on_status(progress);
    let token = CancelToken::new();
    let wait = AsyncCall::new("wait_then_say", json!({"seconds": 30}))
        .context(context)
        .on_status(progress)
        .cancel_token(token.clone());

    let cancel = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    };
    let (counted, waited, ()) = tokio::join!(count.run(Arc::clone(&catalog)), wait.run(Arc::clone(&catalog)), cancel);

    let mut ok = true;
    match counted {
        Ok(r) if r.ok => println!("count_up: {}", r.json.unwrap_or_default()),
        other => {
            ok = false;
            println!("count_up did not finish: {other:?}");
        }
    }
    match waited {
        Ok(r) => println!("wait_then_say: {} ({})", r.error.unwrap_or_default(), r.failure.map_or("ok", |f| f.kind())),
        Err(e) => {
            ok = false;
            println!("wait_then_say error: {e}");
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
