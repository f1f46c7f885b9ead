//! Native tools: tools written in Rust that run inside the program embedding packs.
//!
//! A [`NativeTool`] is the third kind of tool, beside manifests and executables. It
//! is registered in a [`Catalog`](crate::Catalog) and then goes through the same call
//! pipeline as the other kinds: validation against its input schema, tiers, agent
//! rules, approval, output shaping, masking and the audit log.

use serde_json::{Map, Value};

use crate::output::OutputSpec;
use crate::policy::Policy;

/// The error a native tool returns: any error, shown to the model as the failure's message.
pub type NativeError = Box<dyn std::error::Error + Send + Sync>;

/// A tool implemented in Rust.
///
/// Only [`name`](NativeTool::name), [`description`](NativeTool::description),
/// [`input_schema`](NativeTool::input_schema) and [`execute`](NativeTool::execute)
/// must be written; the rest of the tool contract has defaults derived from them.
///
/// `execute` is called with arguments that were validated against `input_schema`
/// (defaults from the schema are not filled in) and only after the rules allowed
/// the call. It runs on the caller's thread: packs cannot kill it, so it must keep
/// to its own time limits (`policy().timeout_secs` is not enforced for native tools).
/// A panic is caught and becomes a failed result.
pub trait NativeTool: Send + Sync {
    /// The name a model calls it by: snake_case, at most 64 characters.
    fn name(&self) -> &str;

    /// What it does, for the model and for people.
    fn description(&self) -> &str;

    /// One line for lists (default: the description's first line).
    fn short_description(&self) -> &str {
        self.description().lines().next().unwrap_or_default()
    }

    /// Its version (default: none).
    fn version(&self) -> Option<&str> {
        None
    }

    /// The JSON Schema of its arguments: an object schema.
    fn input_schema(&self) -> Value;

    /// The JSON Schema of its output, when it prints JSON (default: none).
    fn output_schema(&self) -> Option<Value> {
        None
    }

    /// Its manual page (default: generated from the name, description and schema, as
    /// for every other kind of tool).
    fn help(&self) -> Option<String> {
        None
    }

    /// Its terse system-prompt line (default: generated as for every other kind of tool).
    fn prompt_line(&self) -> Option<String> {
        None
    }

    /// Its policy: tier, `read_only`, `confirm_before_run`, allowed output size
    /// (default: not read-only, so of tier `system`).
    fn policy(&self) -> Policy {
        Policy::executable_default()
    }

    /// How its output is shaped (default: text; `json` when an output schema is given).
    fn output(&self) -> OutputSpec {
        let mut spec = OutputSpec::default();
        if self.output_schema().is_some() {
            spec.format = crate::output::OutputFormat::Json;
        }
        spec
    }

    /// Do the work. Returns what the tool prints (shaped by [`output`](NativeTool::output)),
    /// or an error the model is shown.
    fn execute(&self, args: &Map<String, Value>) -> Result<String, NativeError>;

    /// Like [`execute`](NativeTool::execute), reporting output as it is produced through
    /// `chunk` (it reaches status callbacks as stdout, secrets masked). The default
    /// calls `execute` and reports nothing.
    fn execute_with_status(&self, args: &Map<String, Value>, chunk: &dyn Fn(&[u8])) -> Result<String, NativeError> {
        let _ = chunk;
        self.execute(args)
    }
}
