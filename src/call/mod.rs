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
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

pub use context::{Context, UnknownContextKey};
pub use error::{FieldError, ToolError};
pub use plan::{Planned, StdinPreview};
pub use result::{Failure, ToolResult};
pub use rules::{ApprovalReason, ApprovalRequest, ApproveAll, Approver, Decision, Denial, DenyAll, decide};
pub use status::{Phase, Status};
pub use ticket::{Answers, DEFAULT_TICKET_TTL, Deferred, KeyFileError, Pending, TicketError, Tickets};

use crate::audit::{self, Entry};
use crate::catalog::Catalog;
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
    on_status: Option<&'a (dyn Fn(Status<'_>) + Sync)>,
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
            on_status: None,
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

    /// Report each phase, the process once it started, and output as it arrives
    /// (secrets masked) to `on_status`.
    pub fn on_status(mut self, on_status: &'a (dyn Fn(Status<'_>) + Sync)) -> Self {
        self.on_status = Some(on_status);
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
        let approval = Approval { approver: self.approver, answers: self.answers, defer };
        let result = steps(catalog, self.name, self.input, context, approval, mode, &on_status, &mut record)
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
    /// `none` until the rules are applied, then `allowed`, `approved`, `denied` or `deferred`.
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
    record: &mut Record<'c>,
) -> Result<Outcome, ToolError> {
    let tool = catalog.get(name)?;
    record.tool = Some(tool);
    let dry = matches!(mode, Mode::DryRun | Mode::TestDryRun);
    if !dry {
        on_status(Status::Phase(Phase::Validate));
    }
    let decision = decide(tool, context);
    if let (Decision::Deny(reason), false) = (&decision, dry) {
        record.decision = "denied";
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
    record.sandbox = Some(plan.enforcement.as_ref().map_or("in-process", Enforcement::level));
    record.reads = Some(plan.enforcement.as_ref().map_or("unconfined", Enforcement::reads));
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
                .then(|| ticket::Presented::new(tool.name(), agent, &args.resolved, &request));
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
    execute(tool, &plan, &args.resolved, context, on_status).map(Outcome::Ran)
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
) -> Result<ToolResult, ToolError> {
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
            let on_spawn = |process: &runner::Process| on_status(Status::Spawned { pid: process.pid(), process });
            let confined = runner::confine(invocation, plan.enforcement.as_ref()).map_err(|source| {
                let program = invocation.argv.first().cloned().unwrap_or_default();
                spawn_error(SpawnError::Start { program, source })
            })?;
            let invocation = confined.as_ref().unwrap_or(invocation);
            runner::run_observed(invocation, on_spawn, on_chunk).map(|out| (out, None)).map_err(spawn_error)?
        }
        (Target::Native, Body::Native(native)) => run_native(&**native, args, plan.max_output_bytes, &on_chunk),
        (Target::Native, _) => unreachable!("only native tools plan a native target"),
    };
    for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
        let rest = maskers[i].lock().map(|mut m| m.finish()).unwrap_or_default();
        if !rest.is_empty() {
            on_status(Status::Output { stream, chunk: &rest });
        }
    }
    Ok(shape(tool, plan, ran, context))
}

/// Run a native tool on this thread, as if it were a process: its text is stdout
/// (capped at `max_output_bytes`), an error or a panic is its failure.
fn run_native(
    native: &dyn crate::native::NativeTool,
    args: &serde_json::Map<String, Value>,
    max_output_bytes: u64,
    on_chunk: &(dyn Fn(Stream, &[u8]) + Sync),
) -> (RunOutcome, Option<String>) {
    let start = Instant::now();
    let chunk = |bytes: &[u8]| on_chunk(Stream::Stdout, bytes);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| native.execute_with_status(args, &chunk)));
    let (stdout, error) = match outcome {
        Ok(Ok(text)) => (text.into_bytes(), None),
        Ok(Err(e)) => (Vec::new(), Some(e.to_string())),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            (Vec::new(), Some(format!("the tool panicked: {what}")))
        }
    };
    let total = stdout.len() as u64;
    let keep = usize::try_from(max_output_bytes).unwrap_or(usize::MAX).min(stdout.len());
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
    (out, error)
}

/// Turn what ran into a result: check the exit, shape stdout, mask secrets everywhere.
fn shape(
    tool: &Tool,
    plan: &Plan,
    (mut out, native_error): (RunOutcome, Option<String>),
    context: &Context,
) -> ToolResult {
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
    let failure = if let Some(message) = native_error {
        Some(Failure::Native(message))
    } else if out.timed_out {
        Some(Failure::Timeout(plan.timeout))
    } else if !out.exit_code.is_some_and(|c| policy.allows_exit(c)) {
        Some(match (out.exit_code, out.signal) {
            (Some(code), _) => Failure::ExitCode { code, allowed: allowed() },
            (None, Some(signal)) => Failure::Signal { signal, allowed: allowed() },
            (None, None) => Failure::Abnormal { allowed: allowed() },
        })
    } else if out.stdout_truncated && spec.format.is_json() {
        Some(Failure::OutputTooLarge(policy.max_output_bytes))
    } else {
        match output::shape(spec, tool.output_template(), &out.stdout, context.values()) {
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
