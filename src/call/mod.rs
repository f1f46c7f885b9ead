//! The call pipeline: the one way a call reaches a tool, from every front-end.
//!
//! ```text
//! lookup → decide (once) → arguments → validate → plan (once) → authorize
//!        → run → shape → mask → ToolResult / ToolError → audit
//! ```
//!
//! A [`Call`] names a tool and carries its arguments, context, approver and status
//! callback; [`Call::run`] and [`Call::dry_run`] take it through every step. No step
//! is public on its own, so a rule added to a step holds for `packs run`, the dry run,
//! `packs test`, `packs call`, `packs serve` and the library alike.

mod arguments;
mod context;
mod error;
mod mask;
mod plan;
mod result;
mod rules;
mod status;
mod ticket;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use context::{Context, UnknownContextKey};
pub use error::{FieldError, ToolError};
pub use plan::{Planned, StdinPreview};
pub use result::{Failure, ToolResult};
use rules::decide;
pub use rules::{ApprovalReason, ApprovalRequest, ApproveAll, Approver, Decision, Denial, DenyAll};
pub use status::{Phase, Status};
pub(crate) use ticket::Issuer;
pub use ticket::{Answers, DEFAULT_TICKET_TTL, Deferred, KeyFileError, Pending, TicketError, Tickets};

use crate::audit::{self, Entry};
use crate::catalog::Catalog;
use crate::native::{CancelToken, NativeCall, NativeOutput, NativeTool, Progress, Report};
use crate::output;
use crate::runner::{self, RunOutcome, SpawnError, Stream};
use crate::sandbox::Enforcement;
use crate::tool::{Body, Tool};
use mask::{Masker, Secrets};
use plan::{Plan, Target};

/// Why a front-end could not build a call's arguments (its message is shown to the caller).
pub type ArgumentsError = Box<dyn std::error::Error + Send + Sync>;

/// Builds a call's arguments from the tool once it is found.
type Build<'a> = Box<dyn FnOnce(&Tool) -> Result<Value, ArgumentsError> + 'a>;

/// How the arguments of a call are given.
enum Input<'a> {
    Value(Value),
    Build(Build<'a>),
}

/// What the pipeline does once a call is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Run the tool; record the call in the audit log.
    Run,
    /// Plan and decide; run nothing, ask no one, record nothing.
    DryRun,
    /// A manifest's own test: approved (writing the test is the approval), not recorded.
    Test,
    /// A manifest test that only plans: secrets render as `***`, so none is needed.
    TestDryRun,
}

enum Outcome {
    Ran(ToolResult),
    Planned(Planned),
    /// Deferred: the call waits for a person's answer, with a ticket.
    Pending(Pending),
}

/// How the call is approved: by the approver, by the person's answers (tickets), or
/// deferred (a ticket issued) when neither settles it.
#[derive(Clone, Copy)]
struct Approval<'a> {
    approver: &'a dyn Approver,
    answers: Option<&'a Answers<'a>>,
    defer: Option<&'a Tickets>,
    /// The server client making the call, bound into the tickets it is issued and checked
    /// against those it presents.
    principal: Option<&'a str>,
}

/// One call of a tool by name, ready to go through the pipeline.
///
/// ```no_run
/// use packs::{Call, Catalog, Context, DenyAll, SearchPath};
/// let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
/// let context = Context::new();
/// let result = Call::new("disk_usage", serde_json::json!({"path": "."}))
///     .context(&context)
///     .approver(&DenyAll)
///     .run(&catalog);
/// ```
#[must_use = "a call does nothing until it is run"]
pub struct Call<'a> {
    name: &'a str,
    input: Input<'a>,
    context: Option<&'a Context>,
    approver: &'a dyn Approver,
    answers: Option<&'a Answers<'a>>,
    principal: Option<&'a str>,
    on_status: Option<&'a (dyn Fn(Status<'_>) + Sync)>,
    cancel: Option<&'a CancelToken>,
    test: bool,
}

impl<'a> Call<'a> {
    /// A call of the tool `name` with `args`: a JSON object, a JSON string holding
    /// one, or null for no arguments. Without [`Call::context`] it is made with an
    /// empty [`Context`]; without [`Call::approver`], calls that need approval are denied.
    pub fn new(name: &'a str, args: Value) -> Self {
        Self {
            name,
            input: Input::Value(args),
            context: None,
            approver: &DenyAll,
            answers: None,
            principal: None,
            on_status: None,
            cancel: None,
            test: false,
        }
    }

    /// A call whose arguments are built from the tool once it is found (e.g. typing
    /// `key=value` pairs by its schema). An error becomes [`ToolError::InvalidArguments`].
    pub fn with_arguments_from(name: &'a str, build: impl FnOnce(&Tool) -> Result<Value, ArgumentsError> + 'a) -> Self {
        Self { input: Input::Build(Box::new(build)), ..Self::new(name, Value::Null) }
    }

    /// Make the call with `context`: its values, agent, workspace and audit log.
    pub fn context(mut self, context: &'a Context) -> Self {
        self.context = Some(context);
        self
    }

    /// Ask `approver` when the rules say a call needs a person's approval.
    pub fn approver(mut self, approver: &'a dyn Approver) -> Self {
        self.approver = approver;
        self
    }

    /// Settle approval with a person's answers given earlier: a call that needs approval and
    /// is the very call one of their tickets was issued for takes that ticket's answer
    /// (once: a ticket is spent); a ticket that is expired or used already refuses it
    /// ([`Denial::Ticket`]). Other calls are approved as usual.
    pub fn answers(mut self, answers: &'a Answers<'a>) -> Self {
        self.answers = Some(answers);
        self
    }

    /// The call is made by `principal`, one client of a server (an MCP bearer token or JWT
    /// subject): a ticket issued for it serves that client only.
    pub(crate) fn principal(mut self, principal: &'a str) -> Self {
        self.principal = Some(principal);
        self
    }

    /// Report each phase, the process once it started, and output as it arrives
    /// (secrets masked) to `on_status`.
    pub fn on_status(mut self, on_status: &'a (dyn Fn(Status<'_>) + Sync)) -> Self {
        self.on_status = Some(on_status);
        self
    }

    /// Cancel the call when `token` is cancelled (from another thread): a process tool's
    /// whole process group is killed, a native tool's own token is set and the call
    /// returns at once. Either way the result is a [`Failure::Cancelled`] (audited as
    /// `cancelled`); a token cancelled before the tool starts runs nothing.
    pub fn cancel_token(mut self, token: &'a CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The call is a manifest's own test: approved, and not recorded in the audit log.
    pub(crate) fn manifest_test(mut self) -> Self {
        self.test = true;
        self.approver = &ApproveAll;
        self
    }

    /// Take the call through the whole pipeline and run the tool.
    pub fn run(self, catalog: &Catalog) -> Result<ToolResult, ToolError> {
        let mode = if self.test { Mode::Test } else { Mode::Run };
        match self.pipeline(catalog, mode, None)? {
            Outcome::Ran(result) => Ok(result),
            Outcome::Planned(_) | Outcome::Pending(_) => {
                unreachable!("a run that is not dry or deferred runs the tool")
            }
        }
    }

    /// Take the call through the whole pipeline, but end a call that needs approval (and
    /// that no [`Call::answers`] settle) as [`Deferred::Pending`]: nothing runs and no one is
    /// asked; the pending result holds a ticket from `tickets` bound to this tool, these
    /// validated arguments, what would run, the agent and an expiry. The audit log records
    /// it with `"decision":"deferred"`; resume with [`Answers`] holding the ticket.
    pub fn run_deferred(self, catalog: &Catalog, tickets: &Tickets) -> Result<Deferred, ToolError> {
        match self.pipeline(catalog, Mode::Run, Some(tickets))? {
            Outcome::Ran(result) => Ok(Deferred::Ran(result)),
            Outcome::Pending(pending) => Ok(Deferred::Pending(pending)),
            Outcome::Planned(_) => unreachable!("a run that is not dry runs the tool"),
        }
    }

    /// Take the call through lookup, the rules, arguments and planning, and say what
    /// would run and what the rules would decide; run nothing, ask no one. A manifest
    /// test's dry run renders secrets as `***` (none needs to be set).
    pub fn dry_run(self, catalog: &Catalog) -> Result<Planned, ToolError> {
        let mode = if self.test { Mode::TestDryRun } else { Mode::DryRun };
        match self.pipeline(catalog, mode, None)? {
            Outcome::Planned(planned) => Ok(planned),
            Outcome::Ran(_) | Outcome::Pending(_) => unreachable!("a dry run runs nothing"),
        }
    }

    fn pipeline(self, catalog: &Catalog, mode: Mode, defer: Option<&Tickets>) -> Result<Outcome, ToolError> {
        let empty;
        let context = match self.context {
            Some(c) => c,
            None => {
                empty = Context::new();
                &empty
            }
        };
        let on_status = |s: Status<'_>| {
            if let Some(f) = self.on_status {
                f(s);
            }
        };
        let mut record = Record {
            tool: None,
            decision: "none",
            argv: Vec::new(),
            stdin_bytes: None,
            secrets: Secrets::default(),
            sandbox: None,
            reads: None,
        };
        // Every error leaves the pipeline masked: once the call is planned, its secrets
        // are known, and whatever failed after (a missing working directory named by a
        // secret, a sandbox that could not be set up) shows none of them.
        let approval = Approval { approver: self.approver, answers: self.answers, defer, principal: self.principal };
        let result =
            steps(catalog, self.name, self.input, context, approval, mode, &on_status, self.cancel, &mut record)
                .map_err(|e| e.masked(&record.secrets));
        if matches!(mode, Mode::Run | Mode::Test) {
            on_status(Status::Phase(Phase::Complete));
        }
        if mode == Mode::Run {
            record.write(self.name, context, &result);
        }
        result
    }
}

/// What the audit log needs to know of a call besides its outcome.
struct Record<'c> {
    tool: Option<&'c Tool>,
    /// `none` until the rules are applied, then `allowed`, `ask` (until the call is approved,
    /// denied or deferred), `approved`, `denied` or `deferred`.
    decision: &'static str,
    /// The argv shown (secrets masked), once planned.
    argv: Vec<String>,
    /// The size of what the program reads on stdin, once planned.
    stdin_bytes: Option<u64>,
    /// The call's secrets, once planned: masked in the error recorded too.
    secrets: Secrets,
    /// The sandbox level, once planned (or refused for want of one).
    sandbox: Option<&'static str>,
    /// How reads were confined, once planned.
    reads: Option<&'static str>,
}

impl Record<'_> {
    fn write(self, name: &str, context: &Context, result: &Result<Outcome, ToolError>) {
        let Some(log) = context.audit() else { return };
        let (exit_code, duration_ms, outcome, error) = match result {
            Ok(Outcome::Ran(r)) => {
                let outcome = match &r.failure {
                    None => "ok",
                    Some(Failure::Timeout(_)) => "timeout",
                    Some(Failure::Cancelled) => "cancelled",
                    Some(_) => "failed",
                };
                (r.exit_code, Some(r.duration_ms), outcome, r.error.clone())
            }
            Ok(Outcome::Planned(_)) => return,
            Ok(Outcome::Pending(_)) => (None, None, "pending", None),
            Err(e) => (
                None,
                None,
                if self.decision == "denied" { "denied" } else { e.kind() },
                Some(self.secrets.mask(&e.to_string())),
            ),
        };
        // The log was opened before the call; a failed write is kept in the log for
        // the front-end to report (`AuditLog::take_failure`): the call has run.
        let _ = log.record(&Entry {
            time: audit::now(),
            agent: context.agent().map(|a| a.id.as_str()),
            tool: self.tool.map_or(name, Tool::name),
            tier: self.tool.map_or("unknown", |t| t.tier().as_str()),
            decision: self.decision,
            argv: self.argv,
            stdin_bytes: self.stdin_bytes,
            sandbox: self.sandbox,
            reads: self.reads,
            exit_code,
            duration_ms,
            outcome,
            error,
        });
    }
}

/// The steps, in order; `record` learns what the audit log needs as they go.
#[allow(clippy::too_many_arguments)]
fn steps<'c>(
    catalog: &'c Catalog,
    name: &str,
    input: Input<'_>,
    context: &Context,
    approval: Approval<'_>,
    mode: Mode,
    on_status: &(dyn Fn(Status<'_>) + Sync),
    cancel: Option<&CancelToken>,
    record: &mut Record<'c>,
) -> Result<Outcome, ToolError> {
    let tool = catalog.get(name)?;
    record.tool = Some(tool);
    let dry = matches!(mode, Mode::DryRun | Mode::TestDryRun);
    if !dry {
        on_status(Status::Phase(Phase::Validate));
    }
    let decision = decide(tool, context);
    // The rules' decision is recorded as soon as it is made: a call that fails after it
    // (arguments that do not parse or validate, a plan that fails) is audited with it.
    record.decision = match &decision {
        Decision::Allow => "allowed",
        Decision::Ask(_) => "ask",
        Decision::Deny(_) => "denied",
    };
    if let (Decision::Deny(reason), false) = (&decision, dry) {
        return Err(denied(tool, reason.clone()));
    }
    let raw = match input {
        Input::Value(v) => v,
        Input::Build(build) => build(tool)
            .map_err(|e| ToolError::InvalidArguments { tool: tool.name().to_owned(), message: e.to_string() })?,
    };
    let args = arguments::prepare(tool, raw, context)?;
    let plan = Plan::new(tool, &args, context, mode == Mode::TestDryRun).inspect_err(|e| {
        if matches!(e, ToolError::Unconfinable { .. }) {
            record.sandbox = Some("unavailable");
        }
    })?;
    record.sandbox = Some(plan.enforcement.as_deref().map_or("in-process", Enforcement::level));
    record.reads = Some(plan.enforcement.as_deref().map_or("unconfined", Enforcement::reads));
    record.secrets = plan.secrets.clone();
    if dry {
        return Ok(Outcome::Planned(Planned::new(tool, plan, decision)));
    }
    record.argv.clone_from(&plan.shown_argv);
    record.stdin_bytes = plan.shown_stdin.as_ref().map(|s| s.bytes);
    on_status(Status::Phase(Phase::Authorize));
    record.decision = match decision {
        Decision::Allow => "allowed",
        Decision::Ask(reason) => {
            let request = ApprovalRequest {
                tool: tool.name().to_owned(),
                reason,
                tier: tool.tier(),
                argv: plan.shown_argv.clone(),
                cwd: plan.shown_cwd.clone(),
                env: plan.shown_env.clone(),
                stdin: plan.shown_stdin.clone(),
            };
            let agent = context.agent().map(|a| a.id.as_str());
            let presented = (approval.answers.is_some() || approval.defer.is_some())
                .then(|| ticket::Presented::new(tool.name(), agent, &args.resolved, &request).by(approval.principal));
            let answered = match (&presented, approval.answers) {
                (Some(p), Some(answers)) => answers.take(p),
                _ => None,
            };
            let approved = match (answered, approval.defer, presented) {
                (Some(Err(e)), _, _) => {
                    record.decision = "denied";
                    return Err(denied(tool, Denial::Ticket(e)));
                }
                (Some(Ok(yes)), _, _) => yes,
                (None, Some(tickets), Some(presented)) => {
                    record.decision = "deferred";
                    return Ok(Outcome::Pending(tickets.issue(&presented, request, tool.description())));
                }
                (None, _, _) => approval.approver.approve(&request),
            };
            if !approved {
                record.decision = "denied";
                return Err(denied(tool, Denial::NotApproved(request.reason)));
            }
            "approved"
        }
        Decision::Deny(reason) => {
            record.decision = "denied";
            return Err(denied(tool, reason));
        }
    };
    on_status(Status::Phase(Phase::Execute));
    execute(tool, &plan, &args.resolved, context, on_status, cancel).map(Outcome::Ran)
}

fn denied(tool: &Tool, reason: Denial) -> ToolError {
    ToolError::PermissionDenied { tool: tool.name().to_owned(), tier: tool.tier(), reason }
}

/// Run the plan, streaming masked output to `on_status`, then shape and mask the result.
fn execute(
    tool: &Tool,
    plan: &Plan,
    args: &serde_json::Map<String, Value>,
    context: &Context,
    on_status: &(dyn Fn(Status<'_>) + Sync),
    cancel: Option<&CancelToken>,
) -> Result<ToolResult, ToolError> {
    if cancel.is_some_and(CancelToken::is_cancelled) {
        return Ok(shape_ran(tool, plan, Ran::cancelled(Duration::ZERO), context));
    }
    let maskers = [Mutex::new(Masker::new(&plan.secrets)), Mutex::new(Masker::new(&plan.secrets))];
    let on_chunk = |stream: Stream, chunk: &[u8]| {
        if plan.secrets.is_empty() {
            on_status(Status::Output { stream, chunk });
        } else if let Ok(mut m) = maskers[usize::from(stream == Stream::Stderr)].lock() {
            let ready = m.push(chunk);
            drop(m);
            if !ready.is_empty() {
                on_status(Status::Output { stream, chunk: &ready });
            }
        }
    };
    let ran = match (&plan.target, &tool.body) {
        (Target::Process(invocation), _) => {
            // A program named by a secret is not shown either.
            let spawn_error = |source: SpawnError| ToolError::Spawn {
                tool: tool.name().to_owned(),
                source: match source {
                    SpawnError::Start { program, source } => SpawnError::Start { program: plan.mask(&program), source },
                    SpawnError::Wait { program, source } => SpawnError::Wait { program: plan.mask(&program), source },
                    other => other,
                },
            };
            if let Some(cwd) = invocation.cwd.as_ref().filter(|c| !c.is_dir()) {
                let message = format!("its working directory {} does not exist", cwd.display());
                return Err(spawn_error(SpawnError::Start {
                    program: invocation.argv.first().cloned().unwrap_or_default(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, message),
                }));
            }
            // The caller's token kills the group: attached once the process exists (at once
            // if it is cancelled already), forgotten once the run is over.
            let hook = Mutex::new(None);
            let on_spawn = |process: &runner::Process| {
                if let Some(token) = cancel {
                    let process = process.clone();
                    *hook.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = token.on_cancel(move || {
                        process.kill();
                    });
                }
                on_status(Status::Spawned { pid: process.pid(), process });
            };
            let confined = runner::confine(invocation, plan.enforcement.as_deref()).map_err(|source| {
                let program = invocation.argv.first().cloned().unwrap_or_default();
                spawn_error(SpawnError::Start { program, source })
            })?;
            let invocation = confined.as_ref().unwrap_or(invocation);
            let ran = runner::run_observed(invocation, on_spawn, on_chunk);
            if let Some(token) = cancel {
                token.forget(hook.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner));
            }
            let out = ran.map_err(spawn_error)?;
            // Killed by the caller's token (not by its timeout, not exited on its own).
            let cancelled = !out.timed_out && out.exit_code.is_none() && cancel.is_some_and(CancelToken::is_cancelled);
            Ran { out, native_error: None, json: None, cancelled }
        }
        (Target::Native, Body::Native(native)) => {
            let call = NativeCall {
                tool: tool.name().to_owned(),
                args: args.clone(),
                values: context.values().clone(),
                agent: context.agent().map(|a| a.id.clone()),
                workspace: context.workspace(),
                mode: context.mode().map(str::to_owned),
                cancel: CancelToken::new(),
                report: None,
            };
            let on_progress = |progress: &Progress| on_status(Status::Progress(progress));
            run_native(native, call, plan, cancel, &on_chunk, &on_progress)
        }
        (Target::Native, _) => unreachable!("only native tools plan a native target"),
    };
    for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
        let rest = maskers[i].lock().map(|mut m| m.finish()).unwrap_or_default();
        if !rest.is_empty() {
            on_status(Status::Output { stream, chunk: &rest });
        }
    }
    Ok(shape_ran(tool, plan, ran, context))
}

/// What ran, for [`shape_ran`].
struct Ran {
    out: RunOutcome,
    /// A native tool's error (or panic).
    native_error: Option<String>,
    /// A native tool's JSON result, kept as it is (`out.stdout` holds its text).
    json: Option<Value>,
    /// The caller cancelled the call.
    cancelled: bool,
}

impl Ran {
    /// Nothing ran, or nothing of it is kept: what `duration` of waiting ended with.
    fn empty(duration: Duration) -> RunOutcome {
        RunOutcome {
            exit_code: None,
            signal: None,
            stdout: Vec::new(),
            stdout_total_bytes: 0,
            stdout_truncated: false,
            stderr: Vec::new(),
            stderr_total_bytes: 0,
            timed_out: false,
            duration,
        }
    }

    fn cancelled(duration: Duration) -> Self {
        Self { out: Self::empty(duration), native_error: None, json: None, cancelled: true }
    }
}

/// Run a native tool on a thread of its own, as if it were a process: its text (or its
/// JSON's) is stdout (capped at `max_output_bytes`), an error or a panic is its failure.
/// The caller waits for it until the plan's timeout or the caller's token; then the tool's
/// token is set and the call ends (the thread, which packs cannot kill, runs on alone).
fn run_native(
    native: &Arc<dyn NativeTool>,
    mut call: NativeCall,
    plan: &Plan,
    cancel: Option<&CancelToken>,
    on_chunk: &(dyn Fn(Stream, &[u8]) + Sync),
    on_progress: &dyn Fn(&Progress),
) -> Ran {
    let start = Instant::now();
    let (heard, hear) = mpsc::channel();
    call.report = Some(heard.clone());
    let token = call.cancel.clone();
    let done = heard.clone();
    let tool = Arc::clone(native);
    let spawned = std::thread::Builder::new().name(format!("packs-native-{}", call.tool)).spawn(move || {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| tool.run(&call)));
        let outcome = match outcome {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(e)) => Err(e.to_string()),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                Err(format!("the tool panicked: {what}"))
            }
        };
        let _ = done.send(Report::Done(outcome));
    });
    if let Err(e) = spawned {
        let out = Ran::empty(start.elapsed());
        return Ran {
            out,
            native_error: Some(format!("its thread could not start: {e}")),
            json: None,
            cancelled: false,
        };
    }
    let hook = cancel.and_then(|c| {
        let heard = heard.clone();
        c.on_cancel(move || drop(heard.send(Report::Cancelled)))
    });
    drop(heard);
    let deadline = start + plan.timeout;
    let outcome = loop {
        match hear.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Report::Output(chunk)) => on_chunk(Stream::Stdout, &chunk),
            Ok(Report::Progress(progress)) => on_progress(&progress),
            Ok(Report::Done(outcome)) => break Some(outcome),
            Ok(Report::Cancelled) => break None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                token.cancel();
                if let Some(c) = cancel {
                    c.forget(hook);
                }
                let mut out = Ran::empty(start.elapsed());
                out.timed_out = true;
                return Ran { out, native_error: None, json: None, cancelled: false };
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Some(Err("the tool's thread ended without a result".to_owned()));
            }
        }
    };
    if let Some(c) = cancel {
        c.forget(hook);
    }
    let Some(outcome) = outcome else {
        token.cancel();
        return Ran::cancelled(start.elapsed());
    };
    let (stdout, json, error) = match outcome {
        Ok(NativeOutput::Text(text)) => (text.into_bytes(), None, None),
        Ok(NativeOutput::Json(value)) => (value.to_string().into_bytes(), Some(value), None),
        Err(e) => (Vec::new(), None, Some(e)),
    };
    let total = stdout.len() as u64;
    let keep = usize::try_from(plan.max_output_bytes).unwrap_or(usize::MAX).min(stdout.len());
    let out = RunOutcome {
        exit_code: error.is_none().then_some(0),
        signal: None,
        stdout_truncated: keep < stdout.len(),
        stdout: stdout[..keep].to_vec(),
        stdout_total_bytes: total,
        stderr_total_bytes: 0,
        stderr: Vec::new(),
        timed_out: false,
        duration: start.elapsed(),
    };
    Ran { out, native_error: error, json, cancelled: false }
}

/// Turn what ran into a result: check the exit, shape stdout, mask secrets everywhere.
#[cfg(test)]
fn shape(tool: &Tool, plan: &Plan, (out, native_error): (RunOutcome, Option<String>), context: &Context) -> ToolResult {
    shape_ran(tool, plan, Ran { out, native_error, json: None, cancelled: false }, context)
}

/// [`shape`], with a native tool's JSON value and the caller's cancellation.
fn shape_ran(tool: &Tool, plan: &Plan, ran: Ran, context: &Context) -> ToolResult {
    let Ran { mut out, native_error, json, cancelled } = ran;
    // Masked before anything is shaped or cut: a secret cut at the edge of what was kept
    // (or by `max_chars` later) never shows its beginning or its end.
    if !plan.secrets.is_empty() {
        out.stdout = if out.stdout_truncated {
            plan.secrets.mask_cut_end(&out.stdout)
        } else {
            plan.secrets.mask_bytes(&out.stdout)
        };
        out.stderr = if out.stderr_total_bytes > out.stderr.len() as u64 {
            plan.secrets.mask_cut_start(&out.stderr)
        } else {
            plan.secrets.mask_bytes(&out.stderr)
        };
    }
    let policy = tool.policy();
    let spec = tool.output_spec();
    let mut result = ToolResult {
        tool: tool.name().to_owned(),
        ok: false,
        exit_code: out.exit_code,
        output: String::new(),
        display: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
        truncated: out.stdout_truncated,
        speak: spec.speak,
        stdout_kept_bytes: out.stdout.len() as u64,
        include_stderr: spec.include_stderr,
        stdout_bytes: out.stdout_total_bytes,
        stderr_bytes: out.stderr_total_bytes,
        timed_out: out.timed_out,
        error: None,
        failure: None,
        json: None,
    };
    let allowed = || policy.allowed_exit_codes.clone();
    let failure = if cancelled {
        Some(Failure::Cancelled)
    } else if let Some(message) = native_error {
        Some(Failure::Native(message))
    } else if out.timed_out {
        Some(Failure::Timeout(plan.timeout))
    } else if !out.exit_code.is_some_and(|c| policy.allows_exit(c)) {
        Some(match (out.exit_code, out.signal) {
            (Some(code), _) => Failure::ExitCode { code, allowed: allowed() },
            (None, Some(signal)) => Failure::Signal { signal, allowed: allowed() },
            (None, None) => Failure::Abnormal { allowed: allowed() },
        })
    } else if out.stdout_truncated && (spec.format.is_json() || json.is_some()) {
        Some(Failure::OutputTooLarge(policy.max_output_bytes))
    } else {
        let shaped = match json {
            // A native tool's value as it is: not printed and parsed again.
            Some(value) => output::shape_value(spec, tool.output_template(), value, context.values()),
            None => output::shape(spec, tool.output_template(), &out.stdout, context.values()),
        };
        match shaped {
            Ok(shaped) => {
                result.ok = true;
                // The parsed value travels with the result while it is what `output` holds.
                result.json = shaped.json.filter(|_| tool.output_template().is_none());
                result.output = shaped.output;
                result.display = shaped.display;
                None
            }
            Err(e) => Some(Failure::Output(e)),
        }
    };
    if let Some(failure) = failure {
        result.output = String::from_utf8_lossy(&out.stdout).into_owned();
        result.display = output::truncate(result.output.trim_end(), spec.max_chars);
        let failure = failure.masked(&plan.secrets);
        result.error = Some(plan.mask(&failure.to_string()));
        result.failure = Some(failure);
    }
    if !plan.secrets.is_empty() {
        for field in [&mut result.output, &mut result.display, &mut result.stderr] {
            *field = plan.mask(field);
        }
        if let Some(json) = &mut result.json {
            mask_json(json, &plan.secrets);
        }
    }
    result
}

/// Mask secrets in every string of a JSON value.
fn mask_json(value: &mut Value, secrets: &Secrets) {
    match value {
        Value::String(s) => *s = secrets.mask(s),
        Value::Array(items) => items.iter_mut().for_each(|v| mask_json(v, secrets)),
        Value::Object(map) => map.values_mut().for_each(|v| mask_json(v, secrets)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::agent::Agent;
    use crate::audit::AuditLog;
    use crate::catalog::SearchPath;
    use crate::policy::{Policy, Tier};
    use crate::sandbox::SandboxMode;

    /// A pack directory holding `manifests` (each written as `NAME.tool.json`), loaded (the
    /// other steps' tests use it too).
    pub(super) fn pack(manifests: &[Value]) -> (tempfile::TempDir, Catalog) {
        let dir = tempfile::tempdir().unwrap();
        for m in manifests {
            let name = m["name"].as_str().unwrap();
            std::fs::write(dir.path().join(format!("{name}.tool.json")), m.to_string()).unwrap();
        }
        let catalog = Catalog::load(&SearchPath::dirs([dir.path()]));
        assert!(!catalog.has_errors(), "{:?}", catalog.diagnostics);
        (dir, catalog)
    }

    fn agent(root: &Path, id: &str, toml: &str) -> Agent {
        std::fs::create_dir_all(root.join(id)).unwrap();
        std::fs::write(root.join(id).join("agent.toml"), toml).unwrap();
        Agent::load(root, id).unwrap()
    }

    /// A context that runs tools unconfined (the kernel of the machine running the tests
    /// is not what these tests are about) in `workspace`.
    fn context(workspace: &Path) -> Context {
        Context::new().with_sandbox(SandboxMode::Off).with_workspace(workspace.to_owned())
    }

    fn audit_lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Approves or denies, and remembers what it was asked.
    struct Recorder {
        answer: bool,
        asked: Mutex<Vec<ApprovalRequest>>,
    }

    impl Approver for Recorder {
        fn approve(&self, request: &ApprovalRequest) -> bool {
            self.asked.lock().unwrap().push(request.clone());
            self.answer
        }
    }

    fn recorder(answer: bool) -> Recorder {
        Recorder { answer, asked: Mutex::new(Vec::new()) }
    }

    fn tiers() -> (tempfile::TempDir, Catalog) {
        pack(&[
            json!({"name": "look", "description": "d", "command": "echo look"}),
            json!({"name": "net", "description": "d", "command": "echo net", "policy": {"tier": "system"}}),
            json!({"name": "boss", "description": "d", "command": "echo boss", "policy": {"tier": "elevated"}}),
            json!({"name": "careful", "description": "d", "command": "echo careful",
                   "policy": {"confirm_before_run": true, "tier": "read_only"}}),
            json!({"name": "coder", "description": "d", "command": "echo coder", "modes": ["Coding"]}),
        ])
    }

    #[test]
    fn the_rules_decide_by_tier_confirmation_and_mode() {
        let (_dir, catalog) = tiers();
        let tool = |n: &str| catalog.get(n).unwrap();
        let none = Context::new();
        assert_eq!(tool("look").tier(), Tier::ReadOnly);
        assert_eq!(tool("net").tier(), Tier::System);
        assert_eq!(decide(tool("look"), &none), Decision::Allow);
        assert_eq!(decide(tool("net"), &none), Decision::Allow);
        assert_eq!(decide(tool("boss"), &none), Decision::Ask(ApprovalReason::Elevated));
        // `confirm_before_run` asks whatever the tier says.
        assert_eq!(decide(tool("careful"), &none), Decision::Ask(ApprovalReason::ConfirmBeforeRun));
        // No mode in effect: every tool; a mode: only the tools that state it (or none).
        assert_eq!(decide(tool("coder"), &none), Decision::Allow);
        let coding = Context::new().with_mode("Coding");
        assert_eq!(decide(tool("coder"), &coding), Decision::Allow);
        assert_eq!(decide(tool("look"), &coding), Decision::Allow);
        let dictation = Context::new().with_mode("Dictation");
        assert_eq!(decide(tool("coder"), &dictation), Decision::Deny(Denial::NotInMode { mode: "Dictation".into() }));
        // The mode is decided first: even an elevated tool outside it is denied, not asked.
        let boss_modes = pack(&[json!({"name": "boss", "description": "d", "command": "true",
                                        "policy": {"tier": "elevated"}, "modes": ["Coding"]})]);
        assert!(matches!(
            decide(boss_modes.1.get("boss").unwrap(), &dictation),
            Decision::Deny(Denial::NotInMode { .. })
        ));
    }

    #[test]
    fn an_agents_lists_and_max_tier_deny_or_ask() {
        let (_dir, catalog) = tiers();
        let tool = |n: &str| catalog.get(n).unwrap();
        let root = tempfile::tempdir().unwrap();
        let with = |id: &str, toml: &str| Context::new().with_agent(agent(root.path(), id, toml));
        let allow_list = with("a", "tools = [\"lo*\", \"boss\"]\n");
        assert_eq!(decide(tool("look"), &allow_list), Decision::Allow);
        assert_eq!(decide(tool("net"), &allow_list), Decision::Deny(Denial::NotAllowed { agent: "a".into() }));
        assert_eq!(decide(tool("boss"), &allow_list), Decision::Ask(ApprovalReason::Elevated));
        let deny = with("b", "deny = [\"look\"]\n");
        assert_eq!(decide(tool("look"), &deny), Decision::Deny(Denial::NotAllowed { agent: "b".into() }));
        assert_eq!(decide(tool("net"), &deny), Decision::Allow);
        let max = with("c", "max_tier = \"read_only\"\n");
        assert_eq!(decide(tool("look"), &max), Decision::Allow);
        assert_eq!(
            decide(tool("net"), &max),
            Decision::Deny(Denial::AboveMaxTier { agent: "c".into(), tier: Tier::System, max: Tier::ReadOnly })
        );
        // At the max tier itself: allowed.
        let system = with("s", "max_tier = \"system\"\n");
        assert_eq!(decide(tool("net"), &system), Decision::Allow);
        assert!(matches!(decide(tool("boss"), &system), Decision::Deny(Denial::AboveMaxTier { .. })));
        let ask = with("d", "ask = [\"look\"]\n");
        assert_eq!(decide(tool("look"), &ask), Decision::Ask(ApprovalReason::AgentAsks { agent: "d".into() }));
        // Denied beats asked: a tool both denied and asked for is denied.
        let both = with("e", "ask = [\"look\"]\ndeny = [\"look\"]\n");
        assert!(matches!(decide(tool("look"), &both), Decision::Deny(Denial::NotAllowed { .. })));
        // The agent's mode counts as the operator's does.
        let mode = with("f", "mode = \"Dictation\"\n");
        assert!(matches!(decide(tool("coder"), &mode), Decision::Deny(Denial::NotInMode { .. })));
    }

    #[test]
    fn a_call_that_needs_approval_runs_only_when_approved_and_the_approver_sees_what_runs() {
        let (dir, catalog) = pack(&[json!({"name": "careful", "description": "d",
            "parameters": {"who": {"type": "string", "required": true}},
            "command": {"program": "echo", "args": ["hi", "{{who}}"]}, "policy": {"confirm_before_run": true}})]);
        let log = dir.path().join("audit.jsonl");
        let ctx = context(dir.path()).with_audit(AuditLog::open(&log).unwrap());
        let no = recorder(false);
        let denied = Call::new("careful", json!({"who": "bob"})).context(&ctx).approver(&no).run(&catalog).unwrap_err();
        assert!(
            matches!(
                &denied,
                ToolError::PermissionDenied { reason: Denial::NotApproved(ApprovalReason::ConfirmBeforeRun), .. }
            ),
            "{denied:?}"
        );
        let asked = no.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].argv, ["echo", "hi", "bob"]);
        assert_eq!(asked[0].tool, "careful");
        assert_eq!(asked[0].command_line(), "echo hi bob");
        let yes = recorder(true);
        let ran = Call::new("careful", json!({"who": "bob"})).context(&ctx).approver(&yes).run(&catalog).unwrap();
        assert!(ran.ok);
        assert_eq!(ran.output.trim(), "hi bob");
        // Without an approver: denied (fail closed).
        assert!(Call::new("careful", json!({"who": "x"})).context(&ctx).run(&catalog).is_err());
        let all = Call::new("careful", json!({"who": "all"})).context(&ctx).approver(&ApproveAll).run(&catalog);
        assert_eq!(all.unwrap().output.trim(), "hi all");
        let lines = audit_lines(&log);
        let decisions: Vec<&str> = lines.iter().map(|l| l["decision"].as_str().unwrap()).collect();
        assert_eq!(decisions, ["denied", "approved", "denied", "approved"]);
        assert_eq!(lines[0]["outcome"], "denied");
        assert_eq!(lines[0]["argv"], json!(["echo", "hi", "bob"]), "what was refused is recorded");
        assert_eq!(lines[1]["outcome"], "ok");
        assert_eq!(lines[1]["exit_code"], 0);
    }

    #[test]
    fn a_denied_call_is_refused_before_its_arguments_are_read_and_audited() {
        let (dir, catalog) = tiers();
        let root = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let ctx = context(dir.path())
            .with_agent(agent(root.path(), "bot", "deny = [\"look\"]\n"))
            .with_audit(AuditLog::open(&log).unwrap());
        // Arguments that are not even an object: the rules answer first.
        let e = Call::new("look", json!(7)).context(&ctx).approver(&ApproveAll).run(&catalog).unwrap_err();
        assert_eq!(e.kind(), "permission_denied");
        assert!(!e.retryable());
        assert_eq!(e.to_json()["error"]["tier"], "read_only");
        let line = &audit_lines(&log)[0];
        assert_eq!(line["agent"], "bot");
        assert_eq!(line["tool"], "look");
        assert_eq!(line["tier"], "read_only");
        assert_eq!(line["decision"], "denied");
        assert_eq!(line["outcome"], "denied");
        assert_eq!(line["argv"], json!([]));
        assert!(line["error"].as_str().unwrap().contains("agent `bot` does not allow it"), "{line}");
        // A dry run shows the decision instead of failing.
        let planned = Call::new("look", Value::Null).context(&ctx).dry_run(&catalog).unwrap();
        assert!(matches!(planned.decision, Decision::Deny(Denial::NotAllowed { .. })));
        assert_eq!(audit_lines(&log).len(), 1, "a dry run records nothing");
    }

    #[test]
    fn the_audit_record_names_the_tool_tier_decision_argv_sandbox_and_outcome() {
        let (dir, catalog) = pack(&[
            json!({"name": "hello", "description": "d", "command": {"program": "echo", "args": ["hello"]}}),
            json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "echo oops >&2; exit 3"]}}),
            json!({"name": "needs", "description": "d", "parameters": {"n": {"type": "integer", "required": true}},
                   "command": {"program": "echo", "args": ["{{n}}"]}}),
        ]);
        let log = dir.path().join("audit.jsonl");
        let ctx = context(dir.path()).with_audit(AuditLog::open(&log).unwrap());
        Call::new("hello", Value::Null).context(&ctx).run(&catalog).unwrap();
        let failed = Call::new("fails", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(!failed.ok);
        Call::new("needs", json!({"n": "x"})).context(&ctx).run(&catalog).unwrap_err();
        Call::new("nope", Value::Null).context(&ctx).run(&catalog).unwrap_err();
        let lines = audit_lines(&log);
        assert_eq!(lines.len(), 4);
        let ok = &lines[0];
        assert_eq!((ok["tool"].as_str(), ok["tier"].as_str()), (Some("hello"), Some("read_only")));
        assert_eq!((ok["decision"].as_str(), ok["outcome"].as_str()), (Some("allowed"), Some("ok")));
        assert_eq!(ok["argv"], json!(["echo", "hello"]));
        assert_eq!(ok["sandbox"], "off");
        assert_eq!(ok["exit_code"], 0);
        assert!(ok["duration_ms"].is_u64());
        assert!(ok.get("error").is_none() && ok.get("stdin_bytes").is_none(), "{ok}");
        assert_eq!(ok["agent"], Value::Null);
        let failed = &lines[1];
        assert_eq!((failed["outcome"].as_str(), failed["exit_code"].as_i64()), (Some("failed"), Some(3)));
        assert!(failed["error"].as_str().unwrap().contains("exited with code 3"), "{failed}");
        let invalid = &lines[2];
        assert_eq!(invalid["outcome"], "validation");
        assert_eq!(invalid["exit_code"], Value::Null);
        assert_eq!(invalid["duration_ms"], Value::Null);
        assert_eq!(invalid["argv"], json!([]));
        assert!(invalid.get("sandbox").is_none(), "not planned: {invalid}");
        let unknown = &lines[3];
        assert_eq!((unknown["tier"].as_str(), unknown["outcome"].as_str()), (Some("unknown"), Some("not_found")));
        assert_eq!(unknown["decision"], "none");
    }

    #[test]
    fn arguments_are_an_object_a_json_string_holding_one_or_nothing() {
        let (dir, catalog) = pack(&[json!({"name": "greet", "description": "d",
            "parameters": {"who": {"type": "string"}},
            "command": {"program": "echo", "args": ["hi", "{{who:world}}"]}})]);
        let ctx = context(dir.path());
        let argv = |args: Value| Call::new("greet", args).context(&ctx).dry_run(&catalog).map(|p| p.argv);
        assert_eq!(argv(json!({"who": "ann"})).unwrap(), ["echo", "hi", "ann"]);
        assert_eq!(argv(json!("{\"who\": \"bo\"}")).unwrap(), ["echo", "hi", "bo"]);
        assert_eq!(argv(Value::Null).unwrap(), ["echo", "hi", "world"]);
        assert_eq!(argv(json!("  ")).unwrap(), ["echo", "hi", "world"]);
        let message = |args: Value| match argv(args).unwrap_err() {
            ToolError::InvalidArguments { message, .. } => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(message(json!(3)), "expected a JSON object, got a number");
        assert_eq!(message(json!([1])), "expected a JSON object, got an array");
        assert_eq!(message(json!(true)), "expected a JSON object, got a boolean");
        assert_eq!(message(json!("[1]")), "expected a JSON object; the string holds an array");
        assert_eq!(message(json!("\"x\"")), "expected a JSON object; the string holds a string");
        assert!(message(json!("{nope")).starts_with("expected a JSON object; the string is not JSON ("));
        // A builder's error is the caller's: invalid arguments, retryable.
        let built = Call::with_arguments_from("greet", |_| Err("who=?".into())).context(&ctx).dry_run(&catalog);
        let e = built.unwrap_err();
        assert_eq!((e.kind(), e.retryable()), ("validation", true));
        assert!(e.to_string().contains("who=?"), "{e}");
        let built = Call::with_arguments_from("greet", |t| Ok(json!({"who": t.name()}))).context(&ctx);
        assert_eq!(built.dry_run(&catalog).unwrap().argv, ["echo", "hi", "greet"]);
    }

    #[test]
    fn context_values_fill_what_the_call_omits_literals_are_fixed_and_defaults_resolve() {
        let (dir, catalog) = pack(&[json!({"name": "open", "description": "d",
            "parameters": {
                "url": {"type": "string", "source": "context.url", "required": true},
                "mode": {"type": "string", "source": "literal", "default": "fast"},
                "depth": {"type": "integer", "default": 2}
            },
            "command": {"program": "echo", "args": ["{{url}}", "{{mode}}", "{{depth}}"]}})]);
        let mut ctx = context(dir.path());
        ctx.set("url", "https://example.org").unwrap();
        let argv = |args: Value| Call::new("open", args).context(&ctx).dry_run(&catalog).map(|p| p.argv);
        assert_eq!(argv(Value::Null).unwrap(), ["echo", "https://example.org", "fast", "2"]);
        // What the call gives wins over the context.
        assert_eq!(argv(json!({"url": "u", "depth": 5})).unwrap(), ["echo", "u", "fast", "5"]);
        // A literal is not the model's to give: it is an unknown argument.
        let e = argv(json!({"mode": "slow"})).unwrap_err();
        assert!(matches!(&e, ToolError::Validation { errors, .. } if errors[0].field == "mode"), "{e:?}");
        // Without the context value, the required parameter is missing, by name.
        let bare = context(dir.path());
        let e = Call::new("open", Value::Null).context(&bare).dry_run(&catalog).unwrap_err();
        let ToolError::Validation { errors, .. } = &e else { panic!("{e:?}") };
        assert_eq!(errors[0].field, "url");
        assert_eq!(errors[0].message, "`url` is required");
        assert_eq!(errors[0].schema.as_ref().unwrap()["type"], "string");
        // Wrong types are named by field.
        let e = argv(json!({"depth": "deep"})).unwrap_err();
        let ToolError::Validation { errors, .. } = &e else { panic!("{e:?}") };
        assert_eq!(errors[0].field, "depth");
        assert!(e.retryable());
    }

    #[test]
    fn a_nul_byte_is_refused_in_argv_and_env_values_but_not_on_stdin() {
        let (dir, catalog) = pack(&[
            json!({"name": "say", "description": "d", "parameters": {"text": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
                   "command": {"program": "echo", "args": ["{{text}}", "{{tags}}"]}}),
            json!({"name": "feed", "description": "d", "parameters": {"text": {"type": "string"}},
                   "command": {"program": "cat", "stdin": "{{text}}"}}),
        ]);
        let ctx = context(dir.path());
        let e = Call::new("say", json!({"text": "a\u{0}b"})).context(&ctx).dry_run(&catalog).unwrap_err();
        let ToolError::Validation { errors, .. } = &e else { panic!("{e:?}") };
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "text");
        assert!(errors[0].message.contains("NUL byte"));
        let e = Call::new("say", json!({"tags": ["ok", "b\u{0}"]})).context(&ctx).dry_run(&catalog).unwrap_err();
        assert!(matches!(&e, ToolError::Validation { errors, .. } if errors[0].field == "tags"), "{e:?}");
        let fed = Call::new("feed", json!({"text": "a\u{0}b"})).context(&ctx).dry_run(&catalog).unwrap();
        assert_eq!(fed.stdin.unwrap().bytes, 3);
    }

    #[test]
    fn the_plan_renders_argv_env_and_cwd_and_refuses_a_value_that_would_be_an_option() {
        let (dir, catalog) = pack(&[
            json!({"name": "grep", "description": "d",
                   "parameters": {"pattern": {"type": "string", "required": true},
                                  "flag": {"type": "string", "allow_leading_dash": true}},
                   "command": {"program": "grep", "args": ["{{pattern}}", "{{flag}}"],
                               "env": {"MODE": "m-{{pattern}}"}, "cwd": "sub"}}),
            json!({"name": "safe", "description": "d", "parameters": {"pattern": {"type": "string"}},
                   "command": {"program": "grep", "args": ["--", "{{pattern}}"]}}),
        ]);
        let ctx = context(dir.path());
        let planned =
            Call::new("grep", json!({"pattern": "x y", "flag": "-i"})).context(&ctx).dry_run(&catalog).unwrap();
        assert_eq!(planned.argv, ["grep", "x y", "-i"]);
        assert_eq!(planned.env, [("MODE".to_owned(), "m-x y".to_owned())]);
        assert_eq!(planned.cwd, Some("sub".into()));
        assert_eq!(planned.decision, Decision::Allow);
        assert_eq!(planned.tier, Tier::ReadOnly);
        let e = Call::new("grep", json!({"pattern": "-rf"})).context(&ctx).dry_run(&catalog).unwrap_err();
        let ToolError::Validation { errors, .. } = &e else { panic!("{e:?}") };
        assert_eq!(errors[0].field, "pattern");
        assert!(errors[0].message.starts_with("\"-rf\" starts with `-`"), "{}", errors[0].message);
        // After `--` a leading dash is data.
        let planned = Call::new("safe", json!({"pattern": "-rf"})).context(&ctx).dry_run(&catalog).unwrap();
        assert_eq!(planned.argv, ["grep", "--", "-rf"]);
        // The working directory is checked when the call runs: it does not exist.
        let e = Call::new("grep", json!({"pattern": "x"})).context(&ctx).run(&catalog).unwrap_err();
        assert_eq!(e.kind(), "execution");
        assert!(e.to_string().contains("its working directory sub does not exist"), "{e}");
    }

    #[test]
    fn path_parameters_stay_inside_the_workspace() {
        let (dir, catalog) = pack(&[json!({"name": "cat", "description": "d",
            "parameters": {"file": {"type": "string", "format": "path"},
                           "files": {"type": "array", "items": {"type": "string", "format": "path"}}},
            "command": {"program": "cat", "args": ["--", "{{file}}", "{{files}}"]}})]);
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(workspace.join("in")).unwrap();
        std::os::unix::fs::symlink("/etc", workspace.join("out")).unwrap();
        std::os::unix::fs::symlink("in", workspace.join("ok")).unwrap();
        let ctx = Context::new().with_sandbox(SandboxMode::Off).with_workspace(workspace.clone());
        let field_error = |args: Value| match Call::new("cat", args).context(&ctx).dry_run(&catalog) {
            Ok(p) => panic!("planned: {:?}", p.argv),
            Err(ToolError::Validation { errors, .. }) => (errors[0].field.clone(), errors[0].message.clone()),
            Err(e) => panic!("{e:?}"),
        };
        let ws = workspace.display().to_string();
        for (args, field) in [
            (json!({"file": "../x"}), "file"),
            (json!({"file": "/etc/passwd"}), "file"),
            (json!({"file": "out/passwd"}), "file"),
            (json!({"files": ["in/a", "out"]}), "files"),
            (json!({"file": "new/../../x"}), "file"),
        ] {
            let (f, message) = field_error(args.clone());
            assert_eq!(f, field, "{args}");
            assert!(message.contains(&format!("paths must stay inside the workspace {ws}")), "{args}: {message}");
        }
        let (_, message) = field_error(json!({"file": "/proc/self/cwd/x"}));
        assert!(message.contains("which the kernel resolves in the process that opens it"), "{message}");
        let (_, message) = field_error(json!({"file": "nothing/../.."}));
        assert!(message.contains("climbs out with `..` below a path that does not exist"), "{message}");
        for ok in [json!({"file": "in/a"}), json!({"file": "ok/new.txt"}), json!({"files": ["in", "./in/../in/x"]})] {
            assert!(Call::new("cat", ok.clone()).context(&ctx).dry_run(&catalog).is_ok(), "{ok}");
        }
        let inside = format!("{ws}/in/a");
        assert!(Call::new("cat", json!({"file": inside})).context(&ctx).dry_run(&catalog).is_ok());
    }

    #[test]
    fn exit_codes_count_as_the_policy_allows() {
        let script =
            |code: i32| json!({"program": "sh", "args": ["-c", format!("echo out; echo err >&2; exit {code}")]});
        let (dir, catalog) = pack(&[
            json!({"name": "three", "description": "d", "command": script(3)}),
            json!({"name": "three_ok", "description": "d", "command": script(3),
                   "policy": {"allowed_exit_codes": [0, 3]}}),
        ]);
        let ctx = context(dir.path());
        let failed = Call::new("three", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(!failed.ok);
        assert_eq!(failed.exit_code, Some(3));
        assert_eq!(failed.failure, Some(Failure::ExitCode { code: 3, allowed: vec![0] }));
        assert_eq!(failed.error.as_deref(), Some("the tool exited with code 3 (allowed exit codes: [0])"));
        assert_eq!(failed.output, "out\n", "a failed run keeps its output");
        assert_eq!(failed.stderr, "err\n");
        assert_eq!(failed.error_json()["error"]["kind"], "execution");
        assert_eq!(failed.error_json()["error"]["retryable"], false);
        let ok = Call::new("three_ok", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(ok.ok, "{ok:?}");
        assert_eq!((ok.exit_code, ok.failure.as_ref()), (Some(3), None));
        assert_eq!(ok.output, "out\n");
    }

    #[test]
    fn stdout_is_cut_at_max_output_bytes_and_cut_json_is_a_failure() {
        let (dir, catalog) = pack(&[
            json!({"name": "big", "description": "d", "command": {"program": "echo", "args": ["0123456789abcdef"]},
                   "policy": {"max_output_bytes": 10}}),
            json!({"name": "bigjson", "description": "d", "command": {"program": "echo", "args": ["{\"k\": \"0123456789\"}"]},
                   "policy": {"max_output_bytes": 10}, "output": {"format": "json"}}),
            json!({"name": "json", "description": "d", "command": {"program": "echo", "args": ["{\"k\": [1, 2]}"]},
                   "output": {"format": "json"}}),
        ]);
        let ctx = context(dir.path());
        let big = Call::new("big", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(big.ok && big.truncated);
        assert_eq!(big.output, "0123456789");
        assert_eq!((big.stdout_kept_bytes, big.stdout_bytes), (10, 17));
        assert!(big.for_model().contains("the output was cut: 10 of 17 bytes kept"), "{}", big.for_model());
        let cut = Call::new("bigjson", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(!cut.ok);
        assert_eq!(cut.failure, Some(Failure::OutputTooLarge(10)));
        assert_eq!(cut.json, None);
        let whole = Call::new("json", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(whole.ok);
        assert_eq!(whole.json, Some(json!({"k": [1, 2]})));
    }

    /// A native tool that writes `len` bytes, or fails, or panics.
    struct Native {
        len: usize,
        max_output_bytes: u64,
    }

    impl crate::native::NativeTool for Native {
        fn name(&self) -> &str {
            "native"
        }
        fn description(&self) -> &str {
            "d"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"mode": {"type": "string"}}})
        }
        fn policy(&self) -> Policy {
            Policy { max_output_bytes: self.max_output_bytes, ..Policy::default() }
        }
        fn execute(&self, args: &serde_json::Map<String, Value>) -> Result<String, crate::native::NativeError> {
            match args.get("mode").and_then(Value::as_str) {
                Some("fail") => Err("it broke".into()),
                Some("panic") => panic!("boom"),
                _ => Ok("x".repeat(self.len)),
            }
        }
    }

    #[test]
    fn a_native_tools_output_is_capped_and_its_errors_and_panics_are_failures() {
        let mut catalog = Catalog::default();
        catalog.register(Native { len: 100, max_output_bytes: 10 }).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let ctx = context(dir.path()).with_audit(AuditLog::open(&log).unwrap());
        let r = Call::new("native", Value::Null).context(&ctx).run(&catalog).unwrap();
        assert!(r.ok);
        assert!(r.truncated);
        assert_eq!(r.output, "x".repeat(10));
        assert_eq!((r.stdout_kept_bytes, r.stdout_bytes), (10, 100));
        let failed = Call::new("native", json!({"mode": "fail"})).context(&ctx).run(&catalog).unwrap();
        assert_eq!((failed.ok, failed.exit_code), (false, None));
        assert_eq!(failed.failure, Some(Failure::Native("it broke".into())));
        let panicked = Call::new("native", json!({"mode": "panic"})).context(&ctx).run(&catalog).unwrap();
        assert_eq!(panicked.failure, Some(Failure::Native("the tool panicked: boom".into())));
        let lines = audit_lines(&log);
        assert_eq!(lines[0]["sandbox"], "in-process");
        assert_eq!(lines[0]["argv"], json!(["native", "{}"]));
        assert_eq!(lines[1]["outcome"], "failed");
        // Under the cap: all of it, not cut.
        let mut roomy = Catalog::default();
        roomy.register_shared(Arc::new(Native { len: 10, max_output_bytes: 10 })).unwrap();
        let r = Call::new("native", Value::Null).context(&ctx).run(&roomy).unwrap();
        assert!(!r.truncated);
        assert_eq!(r.output.len(), 10);
    }

    #[test]
    fn a_native_tools_json_value_is_masked_in_every_string_and_capped() {
        let mut catalog = Catalog::default();
        catalog.register(Native { len: 0, max_output_bytes: 40 }).unwrap();
        let ctx = Context::new();
        let tool = catalog.get("native").unwrap();
        let args = arguments::prepare(tool, Value::Null, &ctx).unwrap();
        let mut plan = Plan::new(tool, &args, &ctx, false).unwrap();
        plan.secrets = Secrets::new(&["hunter22".to_owned()]);
        let ran = |value: Value| {
            let text = value.to_string();
            let keep = text.len().min(40);
            let out = RunOutcome {
                exit_code: Some(0),
                stdout: text.as_bytes()[..keep].to_vec(),
                stdout_total_bytes: text.len() as u64,
                stdout_truncated: keep < text.len(),
                ..Ran::empty(Duration::ZERO)
            };
            Ran { out, native_error: None, json: Some(value), cancelled: false }
        };
        // The value itself is masked (not text parsed from masked stdout): mask_json's work.
        let r = shape_ran(tool, &plan, ran(json!({"k": ["x hunter22"], "n": 1})), &ctx);
        assert!(r.ok, "{r:?}");
        assert_eq!(r.json, Some(json!({"k": ["x ***"], "n": 1})));
        assert!(!r.output.contains("hunter22") && !r.display.contains("hunter22"), "{r:?}");
        let r = shape_ran(tool, &plan, ran(json!({"k": "0123456789".repeat(5)})), &ctx);
        assert_eq!((r.ok, r.truncated, r.json), (false, true, None));
        assert_eq!(r.failure, Some(Failure::OutputTooLarge(40)));
    }

    #[test]
    fn shaping_masks_a_secret_the_tool_escaped_in_json_in_the_parsed_value_too() {
        let (dir, catalog) = pack(&[json!({"name": "json", "description": "d", "command": "true",
            "output": {"format": "json"}})]);
        let ctx = context(dir.path());
        let tool = catalog.get("json").unwrap();
        let args = arguments::prepare(tool, Value::Null, &ctx).unwrap();
        let mut plan = Plan::new(tool, &args, &ctx, false).unwrap();
        plan.secrets = Secrets::new(&["pässwörd".to_owned()]);
        // Escaped as Python's json.dumps does (`\u00e4`): no form packs writes, so only the
        // parsed value shows the secret.
        let stdout = br#"{"token": "p\u00e4ssw\u00f6rd", "list": ["x p\u00e4ssw\u00f6rd"], "n": 1}"#.to_vec();
        let ran = RunOutcome {
            exit_code: Some(0),
            signal: None,
            stdout_total_bytes: stdout.len() as u64,
            stdout,
            stdout_truncated: false,
            stderr: "pässwörd failed".as_bytes().to_vec(),
            stderr_total_bytes: 18,
            timed_out: false,
            duration: std::time::Duration::from_millis(5),
        };
        let result = shape(tool, &plan, (ran, None), &ctx);
        assert!(result.ok, "{result:?}");
        assert_eq!(result.json, Some(json!({"token": "***", "list": ["x ***"], "n": 1})));
        assert_eq!(result.stderr, "*** failed");
        assert!(!result.output.contains("pässwörd") && !result.display.contains("pässwörd"), "{result:?}");
        assert_eq!(result.duration_ms, 5);
    }

    #[test]
    fn a_timeout_or_a_signal_is_its_own_failure() {
        let (dir, catalog) = pack(&[json!({"name": "t", "description": "d", "command": "true"})]);
        let ctx = context(dir.path());
        let tool = catalog.get("t").unwrap();
        let args = arguments::prepare(tool, Value::Null, &ctx).unwrap();
        let plan = Plan::new(tool, &args, &ctx, false).unwrap();
        let outcome = |exit_code, signal, timed_out| RunOutcome {
            exit_code,
            signal,
            stdout: Vec::new(),
            stdout_total_bytes: 0,
            stdout_truncated: false,
            stderr: Vec::new(),
            stderr_total_bytes: 0,
            timed_out,
            duration: std::time::Duration::ZERO,
        };
        let failure = |o| shape(tool, &plan, (o, None), &ctx).failure;
        assert_eq!(failure(outcome(None, Some(9), true)), Some(Failure::Timeout(plan.timeout)));
        assert_eq!(failure(outcome(None, Some(9), false)), Some(Failure::Signal { signal: 9, allowed: vec![0] }));
        assert_eq!(failure(outcome(None, None, false)), Some(Failure::Abnormal { allowed: vec![0] }));
        assert_eq!(failure(outcome(Some(0), None, false)), None);
        let timeout = Failure::Timeout(std::time::Duration::from_millis(1500));
        assert_eq!((timeout.kind(), timeout.retryable()), ("timeout", true));
        assert_eq!(timeout.to_string(), "timed out after 1500ms");
        assert_eq!(Failure::Timeout(std::time::Duration::from_secs(30)).to_string(), "timed out after 30s");
        assert!(!Failure::Native("x".into()).retryable());
    }

    #[test]
    fn status_hears_the_phases_in_order_and_the_output() {
        let (dir, catalog) =
            pack(&[json!({"name": "hi", "description": "d", "command": {"program": "echo", "args": ["hi"]}})]);
        let ctx = context(dir.path());
        let heard = Mutex::new(Vec::new());
        let on_status = |s: Status<'_>| {
            let entry = match s {
                Status::Phase(p) => format!("{p:?}"),
                Status::Spawned { .. } => "spawned".to_owned(),
                Status::Output { chunk, .. } => format!("out:{}", String::from_utf8_lossy(chunk)),
                Status::Progress(p) => format!("progress:{p:?}"),
            };
            heard.lock().unwrap().push(entry);
        };
        Call::new("hi", Value::Null).context(&ctx).on_status(&on_status).run(&catalog).unwrap();
        assert_eq!(heard.lock().unwrap().join(","), "Validate,Authorize,Execute,spawned,out:hi\n,Complete");
        heard.lock().unwrap().clear();
        Call::new("hi", Value::Null).context(&ctx).on_status(&on_status).dry_run(&catalog).unwrap();
        assert!(heard.lock().unwrap().is_empty(), "a dry run reports nothing");
    }

    #[test]
    fn a_run_renders_real_secrets_and_only_a_manifest_tests_dry_run_renders_placeholders() {
        let (dir, catalog) = pack(&[json!({"name": "key", "description": "d",
            "command": {"program": "echo", "args": ["{{secret.PACKS_UNIT_TEST_NEVER_SET}}"]}})]);
        let ctx = context(dir.path());
        // The secret is not set: a run (and a plain dry run) cannot render it.
        let e = Call::new("key", Value::Null).context(&ctx).run(&catalog).unwrap_err();
        assert_eq!(e.kind(), "invalid_tool", "{e}");
        assert!(Call::new("key", Value::Null).context(&ctx).dry_run(&catalog).is_err());
        // A manifest test that only plans needs none: it renders `***`.
        let planned = Call::new("key", Value::Null).context(&ctx).manifest_test().dry_run(&catalog).unwrap();
        assert_eq!(planned.argv, ["echo", "***"]);
    }

    #[test]
    fn what_a_stream_held_back_for_a_possible_secret_comes_out_at_the_end_on_its_own_stream() {
        // A secret the test process surely has: its HOME (skipped where it is too short).
        let Some(home) = std::env::var("HOME").ok().filter(|h| h.len() >= 3) else { return };
        let start: String = home.chars().take(2).collect();
        let (dir, catalog) = pack(&[json!({"name": "tease", "description": "d",
            "parameters": {"p": {"type": "string"}},
            "command": {"program": "printf", "args": ["%s", "{{p}}"], "env": {"H": "{{secret.HOME}}"}}})]);
        let ctx = context(dir.path());
        let heard = Mutex::new(Vec::new());
        let on_status = |s: Status<'_>| {
            if let Status::Output { stream, chunk } = s {
                heard.lock().unwrap().push((stream, String::from_utf8_lossy(chunk).into_owned()));
            }
        };
        let r =
            Call::new("tease", json!({"p": format!("x {start}")})).context(&ctx).on_status(&on_status).run(&catalog);
        assert_eq!(r.unwrap().output, format!("x {start}"));
        let heard = heard.into_inner().unwrap();
        assert!(heard.iter().all(|(stream, chunk)| *stream == Stream::Stdout && !chunk.is_empty()), "{heard:?}");
        assert_eq!(heard.iter().map(|(_, c)| c.as_str()).collect::<String>(), format!("x {start}"));
    }

    #[test]
    fn shaping_masks_a_secret_cut_at_the_edge_of_what_was_kept_and_only_there() {
        let (dir, catalog) = pack(&[json!({"name": "t", "description": "d", "command": "true"})]);
        let ctx = context(dir.path());
        let tool = catalog.get("t").unwrap();
        let args = arguments::prepare(tool, Value::Null, &ctx).unwrap();
        let mut plan = Plan::new(tool, &args, &ctx, false).unwrap();
        plan.secrets = Secrets::new(&["hunter22".to_owned()]);
        let shaped = |stdout: &str, cut: bool, stderr: &str, stderr_total: u64| {
            let ran = RunOutcome {
                exit_code: Some(0),
                signal: None,
                stdout: stdout.as_bytes().to_vec(),
                stdout_total_bytes: stdout.len() as u64 + u64::from(cut) * 6,
                stdout_truncated: cut,
                stderr: stderr.as_bytes().to_vec(),
                stderr_total_bytes: stderr_total,
                timed_out: false,
                duration: std::time::Duration::ZERO,
            };
            let r = shape(tool, &plan, (ran, None), &ctx);
            (r.output, r.stderr)
        };
        // Cut: the secret's beginning (stdout's end) and its end (stderr's start) are masked.
        assert_eq!(shaped("key hun", true, "er22 failed", 100), ("key ***".to_owned(), "*** failed".to_owned()));
        // Whole: text that only looks like a piece of the secret is left as it is.
        assert_eq!(shaped("key hun", false, "er22 failed", 11), ("key hun".to_owned(), "er22 failed".to_owned()));
    }
}
