//! A Rust front-end that adds a native tool beside the bundled pack directory.
//!
//! ```sh
//! cargo run --example native_tool            # from the project root (it reads ./packs)
//! cargo run --example native_tool -- DIR     # another pack directory
//! ```
//!
//! It registers `sum_numbers` (a native tool) in the catalog of `packs/`, prints the
//! catalog as OpenAI tool definitions, then calls one tool of each kind through the
//! same pipeline: `disk_usage` (a manifest), `word_count` (an executable that answers
//! `--describe`) and `sum_numbers` (native), streaming each call's status.

use std::process::ExitCode;

use packs::formats::{ExportFormat, export};
use packs::{
    ApprovalRequest, Approver, Call, Catalog, Context, NativeError, NativeTool, Policy, SearchPath, Status, Tier,
    ToolKind,
};
use serde_json::{Map, Value, json};

/// Adds numbers: a native tool, running inside this program.
struct SumNumbers;

impl NativeTool for SumNumbers {
    fn name(&self) -> &str {
        "sum_numbers"
    }

    fn description(&self) -> &str {
        "Add a list of numbers and say how many there were"
    }

    fn version(&self) -> Option<&str> {
        Some("1.0.0")
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "numbers": {"type": "array", "items": {"type": "number"}, "minItems": 1, "description": "The numbers to add"}
            },
            "required": ["numbers"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {"sum": {"type": "number"}, "count": {"type": "integer"}},
            "required": ["sum", "count"]
        }))
    }

    fn policy(&self) -> Policy {
        Policy::default().with_read_only(true).with_tier(Tier::ReadOnly)
    }

    fn execute(&self, args: &Map<String, Value>) -> Result<String, NativeError> {
        // The pipeline validated the arguments against `input_schema` before calling.
        let numbers: Vec<f64> = args["numbers"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
        let sum: f64 = numbers.iter().sum();
        Ok(json!({"sum": sum, "count": numbers.len()}).to_string())
    }
}

/// Approves nothing, but says what it was asked (a real front-end would ask a person).
struct Refuse;

impl Approver for Refuse {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        eprintln!("approval asked for {} ({}): refused", request.tool, request.reason);
        false
    }
}

fn main() -> ExitCode {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "packs".to_owned());
    let mut catalog = Catalog::load(&SearchPath::dirs([&dir]));
    for d in &catalog.diagnostics {
        eprintln!("{d}");
    }
    if let Err(e) = catalog.register(SumNumbers) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }

    // The catalog, native tool included, as a model API's tool definitions.
    let tools: Vec<_> = catalog.tools().collect();
    println!("{}", export(&tools, ExportFormat::Openai));

    let context = Context::new();
    let on_status = |status: Status<'_>| match status {
        Status::Phase(phase) => eprintln!("  phase: {phase:?}"),
        Status::Output { chunk, .. } => eprintln!("  output: {} bytes", chunk.len()),
        _ => {}
    };
    let calls = [
        ("disk_usage", json!({"path": "src"})),
        ("word_count", json!({"text": "native, manifest and executable tools"})),
        ("sum_numbers", json!({"numbers": [1, 2, 3.5]})),
    ];
    let mut failed = false;
    for (name, args) in calls {
        let kind = catalog.get(name).map(|t| t.kind());
        eprintln!("call {name} ({})", kind.map_or("missing", ToolKind::as_str));
        match Call::new(name, args).context(&context).approver(&Refuse).on_status(&on_status).run(&catalog) {
            Ok(result) if result.ok => {
                println!("{name}: {}", result.output.trim_end());
                if let Some(value) = &result.json {
                    println!("{name} (structured): {value}");
                }
            }
            Ok(result) => {
                failed = true;
                println!("{name} failed: {}", result.error.unwrap_or_default());
            }
            Err(e) => {
                failed = true;
                println!("{name} error ({}): {e}", e.kind());
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
