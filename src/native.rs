//! Native tools: tools written in Rust that run inside the program embedding packs.
//!
//! A [`NativeTool`] is the third kind of tool, beside manifests and executables. It
//! is registered in a [`Catalog`](crate::Catalog) and then goes through the same call
//! pipeline as the other kinds: validation against its input schema, tiers, agent
//! rules, approval, output shaping, masking and the audit log.
//!
//! A call of it runs [`NativeTool::run`] on a thread of its own with a [`NativeCall`]: the
//! validated arguments, what the call's context lets a tool see, a [`CancelToken`] and a
//! way to report [`Progress`] and output. The caller waits for it until the tool's
//! `policy().timeout_secs`, the call's own token or the async entry's drop ends the wait.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::output::OutputSpec;
use crate::policy::Policy;

/// The error a native tool returns: any error, shown to the model as the failure's message.
pub type NativeError = Box<dyn std::error::Error + Send + Sync>;

/// What a native tool returns: text (what a process would print, shaped by the tool's
/// [`OutputSpec`]), or a JSON value, kept as it is (never printed and parsed again):
/// it becomes the result's `json` and its compact text the `output`, after `extract_field`
/// and the output template, secrets masked in every string, capped at `max_output_bytes`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NativeOutput {
    /// Text, shaped by the tool's output format.
    Text(String),
    /// A JSON value, shaped as `json` output whatever the format says.
    Json(Value),
}

impl From<String> for NativeOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for NativeOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Value> for NativeOutput {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

/// How far a native tool has got: a phase of its own, a message, a percentage and an
/// estimate of the time left, each optional. It reaches the call's status callback as
/// [`Status::Progress`](crate::Status::Progress).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// The tool's own phase (`"download"`, `"index"`...).
    pub phase: Option<String>,
    /// A line for a person.
    pub message: Option<String>,
    /// How much is done, from 0 to 100.
    pub percent: Option<f32>,
    /// The time left, estimated.
    pub eta: Option<Duration>,
}

impl Progress {
    /// Progress in `phase`.
    pub fn new(phase: impl Into<String>) -> Self {
        Self { phase: Some(phase.into()), ..Self::default() }
    }

    /// With a message for a person.
    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// With how much is done: clamped to 0..=100; not a number is none.
    #[must_use]
    pub fn percent(mut self, percent: f32) -> Self {
        self.percent = (!percent.is_nan()).then(|| percent.clamp(0.0, 100.0));
        self
    }

    /// With the time left, estimated.
    #[must_use]
    pub fn eta(mut self, eta: Duration) -> Self {
        self.eta = Some(eta);
        self
    }
}

/// A cancellation flag shared by clones: set once ([`CancelToken::cancel`]), never reset.
///
/// A native tool polls its call's token ([`NativeCall::is_cancelled`]) or waits on it
/// ([`CancelToken::wait_timeout`]); packs sets it when the call's timeout expires, when the
/// caller's own token is cancelled (`Call::cancel_token`) and when the async entry's future
/// is dropped. A caller cancels a call, a process tool's whole process group included, by
/// cancelling the token it gave the call.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// What runs when a token is cancelled.
type Hook = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    cancelled: bool,
    hooks: Vec<(u64, Hook)>,
    next: u64,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancelToken {
    /// A token not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancel: every clone sees it, every waiter wakes, and what packs attached (killing a
    /// tool's process group, waking the caller of a native tool) runs now.
    pub fn cancel(&self) {
        let hooks = {
            let mut state = self.state();
            if state.cancelled {
                return;
            }
            state.cancelled = true;
            std::mem::take(&mut state.hooks)
        };
        self.0.changed.notify_all();
        for (_, hook) in hooks {
            hook();
        }
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state().cancelled
    }

    /// Wait until it is cancelled or `timeout` passed; returns whether it was cancelled.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        while !state.cancelled {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self.0.changed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        state.cancelled
    }

    /// Run `hook` when the token is cancelled (now, if it is already): returns the id to
    /// [`forget`](Self::forget) it by, or `None` when it ran at once.
    pub(crate) fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) -> Option<u64> {
        let mut state = self.state();
        if state.cancelled {
            drop(state);
            hook();
            return None;
        }
        let id = state.next;
        state.next += 1;
        state.hooks.push((id, Box::new(hook)));
        Some(id)
    }

    /// Drop a hook that is no longer needed (its call ended).
    pub(crate) fn forget(&self, id: Option<u64>) {
        if let Some(id) = id {
            self.state().hooks.retain(|(i, _)| *i != id);
        }
    }
}

/// What the caller of a native tool hears: the tool's reports, its end (from its thread),
/// or the caller's cancellation.
pub(crate) enum Report {
    Output(Vec<u8>),
    Progress(Progress),
    Done(Result<NativeOutput, String>),
    Cancelled,
}

/// One call of a native tool: its arguments, what the call's context lets a tool see
/// (the context values, the agent's id, the workspace, the mode; never secrets, the
/// approver or the audit log), its [`CancelToken`], and where it reports progress and
/// output. [`NativeCall::new`] builds one to test a tool without the pipeline.
pub struct NativeCall {
    pub(crate) tool: String,
    pub(crate) args: Map<String, Value>,
    pub(crate) values: Map<String, Value>,
    pub(crate) agent: Option<String>,
    pub(crate) workspace: PathBuf,
    pub(crate) mode: Option<String>,
    pub(crate) cancel: CancelToken,
    pub(crate) report: Option<mpsc::Sender<Report>>,
}

impl fmt::Debug for NativeCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeCall")
            .field("tool", &self.tool)
            .field("args", &self.args)
            .field("values", &self.values)
            .field("agent", &self.agent)
            .field("workspace", &self.workspace)
            .field("mode", &self.mode)
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}

impl NativeCall {
    /// A call with `args` outside the pipeline (to test a tool): no context values, no
    /// agent, the current directory as workspace, a token of its own, reports dropped.
    pub fn new(args: Map<String, Value>) -> Self {
        Self {
            tool: String::new(),
            args,
            values: Map::new(),
            agent: None,
            workspace: std::env::current_dir().unwrap_or_default(),
            mode: None,
            cancel: CancelToken::new(),
            report: None,
        }
    }

    /// The arguments, validated against the tool's input schema (its defaults not filled in).
    pub fn args(&self) -> &Map<String, Value> {
        &self.args
    }

    /// The name the tool was called by.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The context values set (`url`, `selection`, `clipboard`, `file`, `cwd`, `transcript`).
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// One context value, when set.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.values.get(key).and_then(Value::as_str)
    }

    /// The id of the agent the call is made for, when there is one.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    /// The workspace the call is made in.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The mode in effect, when there is one.
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    /// The call's token: cancelled at its timeout, or when its caller cancels it.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// Whether the call was cancelled (the tool should stop: its result is no longer awaited).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Report progress: it reaches the call's status callback as `Status::Progress`.
    pub fn progress(&self, progress: Progress) {
        self.send(Report::Progress(progress));
    }

    /// Report output as it is produced: it reaches the call's status callback as stdout,
    /// secrets masked (what the result holds is what the tool returns).
    pub fn output(&self, chunk: &[u8]) {
        if !chunk.is_empty() {
            self.send(Report::Output(chunk.to_vec()));
        }
    }

    fn send(&self, report: Report) {
        if let Some(sender) = &self.report {
            // The caller stopped listening (a timeout, a cancellation): nothing to do.
            let _ = sender.send(report);
        }
    }
}

/// A tool implemented in Rust.
///
/// Only [`name`](NativeTool::name), [`description`](NativeTool::description),
/// [`input_schema`](NativeTool::input_schema) and one of [`run`](NativeTool::run) (the
/// whole contract: context, JSON out, cancellation, progress) or
/// [`execute`](NativeTool::execute) (arguments in, text out) must be written; the rest of
/// the tool contract has defaults derived from them.
///
/// A call runs [`run`](NativeTool::run) (whose default calls `execute_with_status`, which
/// calls `execute`) with arguments that were validated against `input_schema` (defaults
/// from the schema are not filled in), only after the rules allowed the call, on a thread
/// of its own. The caller waits until it returns, or until `policy().timeout_secs` pass
/// (the call ends as timed out) or the call is cancelled (it ends as cancelled): then the
/// call's [`CancelToken`] is set and the call returns at once. packs cannot kill a thread:
/// a tool that ignores its token runs on until it returns, its result dropped.
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
    /// or an error the model is shown. The default fails: a tool writes `run` or this.
    fn execute(&self, args: &Map<String, Value>) -> Result<String, NativeError> {
        let _ = args;
        Err(format!("the native tool `{}` implements neither `run` nor `execute`", self.name()).into())
    }

    /// Like [`execute`](NativeTool::execute), reporting output as it is produced through
    /// `chunk` (it reaches status callbacks as stdout, secrets masked). The default
    /// calls `execute` and reports nothing.
    fn execute_with_status(&self, args: &Map<String, Value>, chunk: &dyn Fn(&[u8])) -> Result<String, NativeError> {
        let _ = chunk;
        self.execute(args)
    }

    /// Do the work with the whole call: its arguments and context ([`NativeCall`]), its
    /// [`CancelToken`], progress and output reported as they happen. Returns text or a JSON
    /// value ([`NativeOutput`]), or an error the model is shown. The default calls
    /// [`execute_with_status`](NativeTool::execute_with_status), its chunks reported as output.
    fn run(&self, call: &NativeCall) -> Result<NativeOutput, NativeError> {
        self.execute_with_status(call.args(), &|chunk| call.output(chunk)).map(NativeOutput::Text)
    }
}
