//! The call pipeline: arguments → validate → plan an invocation → run → shape.
//!
//! Every step reports a structured [`ToolError`]; a tool that ran and failed is
//! a [`ToolResult`] with `ok: false`, never a crash of the caller.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::argv::{RenderFailure, Values};
use crate::catalog::{Catalog, LookupError};
use crate::output;
use crate::policy::Tier;
use crate::runner::{self, Invocation, SpawnError, Stream};
use crate::template::CONTEXT_KEYS;
use crate::tool::{Body, Tool};

/// The caller's context: values such as the active URL or selection that fill
/// context-sourced parameters and `{{context.KEY}}` placeholders.
#[derive(Debug, Clone, Default)]
pub struct Context {
    values: Map<String, Value>,
    agent: Option<std::sync::Arc<Agent>>,
    workspace: Option<PathBuf>,
    audit: Option<std::sync::Arc<crate::audit::AuditLog>>,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set `key` (one of [`CONTEXT_KEYS`]).
    pub fn set(&mut self, key: &str, value: impl Into<String>) -> Result<(), String> {
        if !CONTEXT_KEYS.contains(&key) {
            return Err(format!("unknown context key `{key}`; known keys: {}", CONTEXT_KEYS.join(", ")));
        }
        self.values.insert(key.to_owned(), Value::String(value.into()));
        Ok(())
    }

    /// The values, as a JSON object.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// Calls are made on behalf of `agent`: its allow/deny/ask lists and `max_tier` apply.
    pub fn with_agent(mut self, agent: Agent) -> Self {
        self.agent = Some(std::sync::Arc::new(agent));
        self
    }

    /// Confine `format: path` parameters to `dir` (default: the current directory), and
    /// run tools there unless their manifest sets a `cwd`.
    pub fn with_workspace(mut self, dir: PathBuf) -> Self {
        self.workspace = Some(dir);
        self
    }

    /// The workspace root: as set, else the current directory.
    pub fn workspace(&self) -> PathBuf {
        self.workspace.clone().or_else(|| std::env::current_dir().ok()).unwrap_or_else(|| PathBuf::from("."))
    }

    /// Record every call in `log`.
    pub fn with_audit(mut self, log: crate::audit::AuditLog) -> Self {
        self.audit = Some(std::sync::Arc::new(log));
        self
    }

    /// The audit log, if calls are recorded.
    pub fn audit(&self) -> Option<&crate::audit::AuditLog> {
        self.audit.as_deref()
    }

    /// The agent calls are made for, if any.
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_deref()
    }
}

/// One problem with a call's arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// The argument (`count`, `tags/1`), or empty for the arguments as a whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The schema of that argument, so a model can correct its call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// Why a call did not produce a result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The name is not a cataloged tool, or is ambiguous.
    #[error(transparent)]
    NotFound(#[from] LookupError),
    /// The arguments are not a JSON object (or a JSON string holding one), or could not be built.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// The arguments do not match the tool's schema.
    #[error("invalid arguments for `{tool}`: {}", errors.iter().map(|e| if e.field.is_empty() { e.message.clone() } else { format!("`{}`: {}", e.field, e.message) }).collect::<Vec<_>>().join("; "))]
    Validation {
        /// The tool.
        tool: String,
        /// Every problem found.
        errors: Vec<FieldError>,
    },
    /// A template could not be rendered with these values.
    #[error("{}: {failure}", file.display())]
    Render {
        /// The manifest.
        file: PathBuf,
        /// What failed.
        failure: RenderFailure,
    },
    /// The tool's own schema does not compile.
    #[error("tool `{tool}` is broken: {message}")]
    BrokenTool {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// The call is not allowed, or needed approval and did not get it.
    #[error("permission denied for `{tool}` (tier {tier}): {reason}")]
    PermissionDenied {
        /// The tool.
        tool: String,
        /// The tool's tier.
        tier: Tier,
        /// Why.
        reason: String,
    },
    /// The program could not be started.
    #[error("tool `{tool}`: {source}")]
    Spawn {
        /// The tool.
        tool: String,
        /// The OS error.
        #[source]
        source: SpawnError,
    },
}

impl ToolError {
    /// A stable kind name: `not_found`, `validation`, `invalid_tool` (a template or
    /// schema of the tool itself, or a missing secret), `permission_denied`, `execution`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::InvalidArguments { .. } | Self::Validation { .. } => "validation",
            Self::Render { .. } | Self::BrokenTool { .. } => "invalid_tool",
            Self::PermissionDenied { .. } => "permission_denied",
            Self::Spawn { .. } => "execution",
        }
    }

    /// Whether the caller (a model) may fix the call and retry.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::InvalidArguments { .. } | Self::Validation { .. })
    }

    /// The JSON form: `{"error": {"kind", "message", "retryable", "errors"?}}`.
    pub fn to_json(&self) -> Value {
        let mut e = Map::new();
        e.insert("kind".into(), self.kind().into());
        e.insert("message".into(), self.to_string().into());
        e.insert("retryable".into(), self.retryable().into());
        if let Self::Validation { errors, .. } = self {
            e.insert("errors".into(), serde_json::to_value(errors).unwrap_or_default());
        }
        if let Self::PermissionDenied { tier, reason, .. } = self {
            e.insert("tier".into(), tier.as_str().into());
            e.insert("reason".into(), reason.clone().into());
        }
        serde_json::json!({ "error": e })
    }
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// The tool's name.
    pub tool: String,
    /// True when the exit code was allowed, the output shaped, and no timeout hit.
    pub ok: bool,
    /// The exit code (None when killed by a signal).
    pub exit_code: Option<i32>,
    /// stdout after shaping, for the model.
    pub output: String,
    /// `output` cut to `max_chars` characters, for a person or speech.
    pub display: String,
    /// The tail of the tool's stderr.
    pub stderr: String,
    /// Wall time of the process.
    pub duration_ms: u64,
    /// stdout was longer than `max_output_bytes` and was cut.
    pub truncated: bool,
    /// The timeout killed the tool's process group.
    pub timed_out: bool,
    /// Why `ok` is false, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ToolResult {
    /// A failed run as the error a model can act on: `{"error": {"kind": "execution" |
    /// "timeout", "message", "exit_code", "elapsed_ms", "stderr" (its last 2,000
    /// characters), "output", "retryable"}}`. A timeout may succeed on retry; a tool that
    /// failed will fail the same way.
    pub fn error_json(&self) -> Value {
        let kind = if self.timed_out { "timeout" } else { "execution" };
        let chars: Vec<char> = self.stderr.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(2000)..].iter().collect();
        serde_json::json!({"error": {
            "kind": kind,
            "message": self.error,
            "exit_code": self.exit_code,
            "elapsed_ms": self.duration_ms,
            "stderr": tail,
            "output": self.display,
            "retryable": self.timed_out,
        }})
    }
}

/// Arguments after context filling, validation, literals and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Arguments {
    /// What the call, the context or a literal gave.
    pub given: Map<String, Value>,
    /// `given` plus declared defaults.
    pub resolved: Map<String, Value>,
}

/// Turn raw arguments (an object, a JSON string holding one, or null) into an object.
pub fn parse_arguments(tool: &str, args: Value) -> Result<Map<String, Value>, ToolError> {
    let invalid = |message: String| ToolError::InvalidArguments { tool: tool.to_owned(), message };
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => Err(invalid(format!("expected a JSON object; the string holds {}", type_name(&other)))),
            Err(e) => Err(invalid(format!("expected a JSON object; the string is not JSON ({e})"))),
        },
        other => Err(invalid(format!("expected a JSON object, got {}", type_name(&other)))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Fill context values, validate against the tool's schema, add literals and defaults.
pub fn prepare(tool: &Tool, args: Value, context: &Context) -> Result<Arguments, ToolError> {
    let mut given = parse_arguments(tool.name(), args)?;
    if let Some(m) = tool.manifest() {
        for (name, p) in &m.parameters {
            if let Some(key) = p.source.and_then(|s| s.context_key()) {
                if !given.contains_key(name) {
                    if let Some(v) = context.values().get(key) {
                        given.insert(name.clone(), v.clone());
                    }
                }
            }
        }
    }
    validate(tool, &given)?;
    reject_leading_dashes(tool, &given)?;
    let mut resolved = given.clone();
    if let Some(m) = tool.manifest() {
        for (name, p) in &m.parameters {
            if !p.is_offered() {
                if let Some(d) = &p.default {
                    given.insert(name.clone(), d.clone());
                }
            }
            if let Some(v) = given.get(name).or(p.default.as_ref()) {
                resolved.insert(name.clone(), v.clone());
            }
        }
    }
    Ok(Arguments { given, resolved })
}

/// Every `format: path` value must resolve (symlinks followed) inside the workspace. A
/// relative value is resolved where the tool will read it: its working directory.
fn confine_paths(
    tool: &Tool,
    given: &Map<String, Value>,
    workspace: &Path,
    cwd: Option<&Path>,
) -> Result<(), ToolError> {
    let Some(m) = tool.manifest() else { return Ok(()) };
    if !m.parameters.values().any(|p| p.format.as_deref() == Some("path")) {
        return Ok(());
    }
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
    let here = std::env::current_dir().unwrap_or_else(|_| root.clone());
    let base = cwd.map_or_else(|| here.clone(), |c| here.join(c));
    let mut errors = Vec::new();
    for (name, _) in m.parameters.iter().filter(|(_, p)| p.format.as_deref() == Some("path")) {
        let values: Vec<&str> = match given.get(name) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => vec![s.as_str()],
            _ => Vec::new(),
        };
        for v in values {
            if let Err(why) = confined(&root, &base, v) {
                errors.push(FieldError {
                    field: name.clone(),
                    message: format!("{v:?} {why}; paths must stay inside the workspace {}", root.display()),
                    schema: tool.validation_schema().get("properties").and_then(|s| s.get(name)).cloned(),
                });
            }
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

/// Resolve `value` against `root` (following symlinks as far as the path exists) and
/// check it stays inside.
fn confined(root: &Path, base: &Path, value: &str) -> Result<PathBuf, String> {
    use std::path::Component;
    let candidate = base.join(value);
    // The longest part that exists is resolved by the OS (symlinks included); the rest
    // is taken lexically and may not climb with `..`.
    let mut existing = candidate.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(ToOwned::to_owned) else { break };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let mut resolved = std::fs::canonicalize(&existing).map_err(|e| format!("cannot be resolved ({e})"))?;
    for part in rest.iter().rev() {
        match Path::new(part).components().next() {
            Some(Component::Normal(n)) => resolved.push(n),
            _ => return Err("climbs out with `..` below a path that does not exist".into()),
        }
    }
    if resolved.starts_with(root) {
        Ok(resolved)
    } else {
        Err(format!("resolves to {}, outside the workspace", resolved.display()))
    }
}

/// A string given for a whole positional argument may not start with `-` unless a `--`
/// comes before it or the parameter sets `allow_leading_dash` (`--output=/etc/passwd`).
fn reject_leading_dashes(tool: &Tool, given: &Map<String, Value>) -> Result<(), ToolError> {
    let (Some(m), Some(command)) = (tool.manifest(), tool.command()) else { return Ok(()) };
    let mut errors = Vec::new();
    for name in command.unguarded_positionals() {
        if m.parameters.get(name).is_none_or(|p| p.allow_leading_dash) {
            continue;
        }
        let values: Vec<&Value> = match given.get(name) {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(v) => vec![v],
            None => Vec::new(),
        };
        if let Some(bad) = values.iter().filter_map(|v| v.as_str()).find(|s| s.starts_with('-')) {
            errors.push(FieldError {
                field: name.to_owned(),
                message: format!(
                    "{bad:?} starts with `-`, and the program would read it as an option; give a value that does not start with `-` (the manifest can put \"--\" before the argument or set `allow_leading_dash`)"
                ),
                schema: tool.validation_schema().get("properties").and_then(|p| p.get(name)).cloned(),
            });
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

fn validate(tool: &Tool, args: &Map<String, Value>) -> Result<(), ToolError> {
    // A synthesized schema only constrains properties it lists: no arguments are valid
    // exactly when nothing is required. Skipping the validator then saves its one-time
    // preparation (about half a millisecond) for argument-less calls.
    if args.is_empty() && tool.manifest().is_some_and(|m| !m.parameters.values().any(|p| p.required)) {
        return Ok(());
    }
    let validator =
        tool.validator().map_err(|message| ToolError::BrokenTool { tool: tool.name().to_owned(), message })?;
    let instance = Value::Object(args.clone());
    let schema = tool.validation_schema();
    let property = |name: &str| schema.get("properties").and_then(|p| p.get(name)).cloned();
    let errors: Vec<FieldError> = validator
        .iter_errors(&instance)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let mut field = pointer.trim_start_matches('/').to_owned();
            let mut message = e.to_string();
            match e.kind() {
                jsonschema::error::ValidationErrorKind::Required { property: p } => {
                    field = p.as_str().unwrap_or_default().to_owned();
                    message = format!("`{field}` is required");
                }
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    field = unexpected.join(", ");
                    let known: Vec<&str> = schema
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    message = format!(
                        "unknown argument{} {}; the tool takes: {}",
                        if unexpected.len() > 1 { "s" } else { "" },
                        unexpected.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
                        if known.is_empty() { "no arguments".to_owned() } else { known.join(", ") }
                    );
                }
                _ => {}
            }
            let root = field.split('/').next().unwrap_or_default().to_owned();
            FieldError { schema: property(&root), field, message }
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

/// The process one call would start, and the secrets to mask when showing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What to run.
    pub invocation: Invocation,
    /// Secret values in it (`{{secret.NAME}}`).
    pub secrets: Vec<String>,
    /// The variables the manifest sets (the rest of the environment is the minimal base).
    pub env_changes: Vec<(String, String)>,
}

impl Plan {
    /// Replace every secret value in `text` with `***`.
    pub fn mask(&self, text: &str) -> String {
        mask(text, &self.secrets)
    }
}

/// Variables a tool gets from packs' environment without asking: enough to find
/// programs, a home, a locale, a terminal type and a temporary directory.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TMPDIR"];

/// Set for every tool so nothing waits for input that will never come.
pub const NON_INTERACTIVE_ENV: &[(&str, &str)] =
    &[("GIT_TERMINAL_PROMPT", "0"), ("PAGER", "cat"), ("GIT_EDITOR", "true")];

/// The whole environment of a tool: [`BASE_ENV`] and `LC_*` from packs' own environment,
/// the `passthrough` names, the non-interactive defaults, then `extra` (the manifest's `env`).
pub fn minimal_env(passthrough: &[String], extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| BASE_ENV.contains(&k.as_str()) || k.starts_with("LC_") || passthrough.iter().any(|p| p == k))
        .collect();
    env.sort();
    env.extend(NON_INTERACTIVE_ENV.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env.extend(extra);
    env
}

/// Replace every secret in `text` with `***`.
pub fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// Plan the process one call would start: argv, env, cwd, timeout, output cap.
pub fn plan(tool: &Tool, args: &Arguments, context: &Context) -> Result<Plan, ToolError> {
    plan_with(tool, args, context, false)
}

/// Like [`plan`], with every `{{secret.NAME}}` rendered as `***`: for showing or
/// testing a command without the credentials (the plan must not be run).
pub fn plan_with_placeholder_secrets(tool: &Tool, args: &Arguments, context: &Context) -> Result<Plan, ToolError> {
    plan_with(tool, args, context, true)
}

fn plan_with(tool: &Tool, args: &Arguments, context: &Context, placeholder_secrets: bool) -> Result<Plan, ToolError> {
    let policy = tool.policy();
    let (argv, env, cwd, secrets) = match &tool.body {
        Body::Manifest { command, .. } => {
            let values = Values { given: &args.given, resolved: &args.resolved, context: context.values() };
            let rendered = if placeholder_secrets {
                command.render_with_placeholder_secrets(&values)
            } else {
                command.render(&values)
            };
            let r = rendered.map_err(|failure| ToolError::Render { file: tool.source().to_owned(), failure })?;
            (r.argv, r.env, r.cwd.map(PathBuf::from), r.secrets)
        }
        Body::Executable => {
            let json = Value::Object(args.given.clone()).to_string();
            (vec![tool.source().to_string_lossy().into_owned(), json], Vec::new(), None, Vec::new())
        }
    };
    let cwd = cwd.or_else(|| context.workspace.clone());
    confine_paths(tool, &args.given, &context.workspace(), cwd.as_deref())?;
    let env_changes = env.clone();
    let env = minimal_env(&policy.env_passthrough, env);
    let invocation = Invocation {
        argv,
        env,
        clear_env: true,
        cwd,
        timeout: policy.timeout(),
        max_output_bytes: policy.max_output_bytes,
    };
    Ok(Plan { invocation, secrets, env_changes })
}

/// Run a planned invocation and shape its output. `on_chunk` sees output as it
/// arrives (unmasked: a front-end that shows it should mask with [`Plan::mask`]).
/// Secret values are masked in the result.
pub fn execute(
    tool: &Tool,
    plan: &Plan,
    context: &Context,
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<ToolResult, ToolError> {
    execute_observed(tool, plan, context, |_| {}, on_chunk)
}

/// Like [`execute`], calling `on_spawn(process)` when the tool's process started
/// (keep a clone of it to cancel the call from another thread).
pub fn execute_observed(
    tool: &Tool,
    plan: &Plan,
    context: &Context,
    on_spawn: impl FnOnce(&runner::Process),
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<ToolResult, ToolError> {
    let mut result = run_and_shape(tool, &plan.invocation, context, on_spawn, on_chunk)?;
    if !plan.secrets.is_empty() {
        for field in [&mut result.output, &mut result.display, &mut result.stderr] {
            *field = plan.mask(field);
        }
        result.error = result.error.map(|e| plan.mask(&e));
    }
    Ok(result)
}

fn run_and_shape(
    tool: &Tool,
    invocation: &Invocation,
    context: &Context,
    on_spawn: impl FnOnce(&runner::Process),
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<ToolResult, ToolError> {
    let spawn_error = |source| ToolError::Spawn { tool: tool.name().to_owned(), source };
    if let Some(cwd) = invocation.cwd.as_ref().filter(|c| !c.is_dir()) {
        let message = format!("its working directory {} does not exist", cwd.display());
        return Err(spawn_error(SpawnError::Start {
            program: invocation.argv.first().cloned().unwrap_or_default(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, message),
        }));
    }
    let out = runner::run_observed(invocation, on_spawn, on_chunk).map_err(spawn_error)?;
    let policy = tool.policy();
    let mut result = ToolResult {
        tool: tool.name().to_owned(),
        ok: false,
        exit_code: out.exit_code,
        output: String::new(),
        display: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
        truncated: out.stdout_truncated,
        timed_out: out.timed_out,
        error: None,
    };
    let raw = |r: &mut ToolResult, error: String| {
        r.output = String::from_utf8_lossy(&out.stdout).into_owned();
        r.display = output::truncate(r.output.trim_end(), tool.output_spec().max_chars);
        r.error = Some(error);
    };
    if out.timed_out {
        raw(&mut result, format!("timed out after {}", human_duration(invocation.timeout)));
    } else if !out.exit_code.is_some_and(|c| policy.allows_exit(c)) {
        let how = match (out.exit_code, out.signal) {
            (Some(c), _) => format!("exited with code {c}"),
            (None, Some(s)) => format!("was killed by signal {s}"),
            (None, None) => "ended abnormally".to_owned(),
        };
        raw(&mut result, format!("the tool {how} (allowed exit codes: {:?})", policy.allowed_exit_codes));
    } else if out.stdout_truncated && tool.output_spec().format == output::OutputFormat::Json {
        raw(
            &mut result,
            format!("the tool's JSON output is larger than max_output_bytes ({})", policy.max_output_bytes),
        );
    } else {
        match output::shape(tool.output_spec(), tool.output_template(), &out.stdout, context.values()) {
            Ok(shaped) => {
                result.ok = true;
                result.output = shaped.output;
                result.display = shaped.display;
            }
            Err(e) => raw(&mut result, e),
        }
    }
    Ok(result)
}

fn human_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

/// What an approver is asked: the tool and the exact command, secrets masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The tool's name.
    pub tool: String,
    /// Why approval is needed (e.g. `confirm_before_run`).
    pub reason: String,
    /// The tool's permission tier.
    pub tier: Tier,
    /// The argv that would run, with secret values replaced by `***`.
    pub argv: Vec<String>,
    /// The working directory, when set.
    pub cwd: Option<PathBuf>,
}

/// Decides calls that need a person's approval. Packs fails closed: a call that
/// needs approval runs only when the approver says yes.
pub trait Approver {
    /// True to let the call run.
    fn approve(&self, request: &ApprovalRequest) -> bool;
}

/// Denies every call that needs approval (the default for non-interactive use).
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve(&self, _: &ApprovalRequest) -> bool {
        false
    }
}

/// Approves every call (`packs run --yes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _: &ApprovalRequest) -> bool {
        true
    }
}

/// What the rules say about a call, before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It may run.
    Allow,
    /// It may run if a person approves; why approval is needed.
    Ask(String),
    /// It may not run; why.
    Deny(String),
}

/// Decide a call of `tool` for the agent in `context` (fail closed).
///
/// With an agent: a tool outside its `tools` or inside its `deny` is denied, a tier
/// above its `max_tier` is denied, and a tool in its `ask` or of tier `elevated`
/// needs approval. Without one: everything up to `system` runs, `elevated` needs approval.
pub fn decide(tool: &Tool, context: &Context) -> Decision {
    let tier = tool.tier();
    if let Some(agent) = context.agent() {
        if !agent.allows(tool.name()) {
            return Decision::Deny(format!("agent `{}` does not allow it (agent.toml `tools`/`deny`)", agent.id));
        }
        if let Some(max) = agent.max_tier().filter(|max| tier > *max) {
            return Decision::Deny(format!("its tier {tier} is above agent `{}`'s max_tier {max}", agent.id));
        }
        if agent.asks(tool.name()) {
            return Decision::Ask(format!("agent `{}` asks for approval of it (agent.toml `ask`)", agent.id));
        }
    }
    // `confirm_before_run` always asks, whatever tier a manifest states.
    if tier == Tier::Elevated || tool.policy().confirm_before_run {
        let why = if tool.policy().confirm_before_run {
            "it asks to be confirmed before each run (policy.confirm_before_run)"
        } else {
            "its tier is elevated"
        };
        return Decision::Ask(why.to_owned());
    }
    Decision::Allow
}

/// The approval a planned call needs, if any (None also when it is denied outright).
pub fn approval_needed(tool: &Tool, plan: &Plan, context: &Context) -> Option<ApprovalRequest> {
    match decide(tool, context) {
        Decision::Ask(reason) => Some(ApprovalRequest {
            tool: tool.name().to_owned(),
            reason,
            tier: tool.tier(),
            argv: plan.invocation.argv.iter().map(|a| plan.mask(a)).collect(),
            cwd: plan.invocation.cwd.clone(),
        }),
        Decision::Allow | Decision::Deny(_) => None,
    }
}

/// The error for a call the rules deny.
fn denied(tool: &Tool, reason: String) -> ToolError {
    ToolError::PermissionDenied { tool: tool.name().to_owned(), tier: tool.tier(), reason }
}

/// Deny a call outright when the rules say so (before validating or planning it).
pub fn check_allowed(tool: &Tool, context: &Context) -> Result<(), ToolError> {
    match decide(tool, context) {
        Decision::Deny(reason) => Err(denied(tool, reason)),
        Decision::Allow | Decision::Ask(_) => Ok(()),
    }
}

/// Apply the rules to a planned call: deny, allow, or ask `approver`. A denial is an error.
pub fn authorize(tool: &Tool, plan: &Plan, context: &Context, approver: &dyn Approver) -> Result<(), ToolError> {
    check_allowed(tool, context)?;
    match approval_needed(tool, plan, context) {
        Some(request) if !approver.approve(&request) => {
            Err(denied(tool, format!("{} and was not approved", request.reason)))
        }
        _ => Ok(()),
    }
}

/// The whole pipeline: look up, validate, plan, authorize, run, shape.
pub fn dispatch(
    catalog: &Catalog,
    name: &str,
    args: Value,
    context: &Context,
    approver: &dyn Approver,
) -> Result<ToolResult, ToolError> {
    let tool = catalog.get(name)?;
    call(tool, args, context, approver, |_, _| {})
}

/// Validate, plan, authorize, run and shape a call of `tool`, streaming output to `on_chunk`.
pub fn call(
    tool: &Tool,
    args: Value,
    context: &Context,
    approver: &dyn Approver,
    on_chunk: impl Fn(Stream, &[u8]) + Sync,
) -> Result<ToolResult, ToolError> {
    call_with_status(tool, args, context, approver, |s| {
        if let Status::Output { stream, chunk } = s {
            on_chunk(stream, chunk);
        }
    })
}

/// Masks secrets in a stream that arrives in chunks: a secret split across two chunks
/// is still caught, because the last `longest secret - 1` bytes wait for the next chunk.
struct Masker {
    secrets: Vec<Vec<u8>>,
    held: Vec<u8>,
}

impl Masker {
    fn new(secrets: &[String]) -> Self {
        Self {
            secrets: secrets.iter().filter(|s| !s.is_empty()).map(|s| s.as_bytes().to_vec()).collect(),
            held: Vec::new(),
        }
    }

    /// Add a chunk; returns what can be shown now, masked.
    fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let keep = self.secrets.iter().map(Vec::len).max().unwrap_or(1).saturating_sub(1);
        let mut cut = self.held.len().saturating_sub(keep);
        // A secret that starts before the cut ends inside what is held: release all of it.
        for s in &self.secrets {
            for start in 0..cut.min(self.held.len()) {
                if self.held[start..].starts_with(s) {
                    cut = cut.max(start + s.len());
                }
            }
        }
        let ready: Vec<u8> = self.held.drain(..cut).collect();
        self.mask(&ready)
    }

    /// Everything still held, masked.
    fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.held);
        self.mask(&rest)
    }

    fn mask(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        'outer: while i < bytes.len() {
            for s in &self.secrets {
                if bytes[i..].starts_with(s) {
                    out.extend_from_slice(b"***");
                    i += s.len();
                    continue 'outer;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        out
    }
}

/// The phases of a call, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Checking the arguments.
    Validate,
    /// Applying the rules, asking for approval if needed.
    Authorize,
    /// The tool is running.
    Execute,
    /// The call is over (whatever the outcome).
    Complete,
}

/// What a status callback hears about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status<'a> {
    /// A phase begins.
    Phase(Phase),
    /// The tool's process started; `pid` is also its process group id.
    Spawned {
        /// The process id.
        pid: u32,
        /// The process: keep a clone to cancel the call ([`runner::Process::kill`]).
        process: &'a runner::Process,
    },
    /// Output as it arrives, secrets masked.
    Output {
        /// stdout or stderr.
        stream: Stream,
        /// The bytes.
        chunk: &'a [u8],
    },
}

/// Record, in the context's audit log, a call whose tool could not be resolved (or
/// whose arguments could not be read) before any tool was involved.
pub fn audit_unresolved(context: &Context, name: &str, error: &ToolError) {
    if let Some(log) = context.audit() {
        let _ = log.record(&crate::audit::Entry {
            time: crate::audit::now(),
            agent: context.agent().map(|a| a.id.as_str()),
            tool: name,
            tier: "unknown",
            decision: "none",
            argv: Vec::new(),
            exit_code: None,
            duration_ms: None,
            outcome: error.kind(),
            error: Some(error.to_string()),
        });
    }
}

/// Like [`call`], reporting each phase and each output chunk to `on_status`, and
/// recording the call in the context's audit log, if it has one.
pub fn call_with_status(
    tool: &Tool,
    args: Value,
    context: &Context,
    approver: &dyn Approver,
    on_status: impl Fn(Status<'_>) + Sync,
) -> Result<ToolResult, ToolError> {
    let mut argv: Vec<String> = Vec::new();
    // Until the rules are applied, no decision was taken.
    let mut decision = "none";
    let result = (|| {
        on_status(Status::Phase(Phase::Validate));
        check_allowed(tool, context).inspect_err(|_| decision = "denied")?;
        let args = prepare(tool, args, context)?;
        let plan = plan(tool, &args, context)?;
        argv = plan.invocation.argv.iter().map(|a| plan.mask(a)).collect();
        on_status(Status::Phase(Phase::Authorize));
        let asked = approval_needed(tool, &plan, context).is_some();
        authorize(tool, &plan, context, approver).inspect_err(|_| decision = "denied")?;
        decision = if asked { "approved" } else { "allowed" };
        on_status(Status::Phase(Phase::Execute));
        let maskers = [Mutex::new(Masker::new(&plan.secrets)), Mutex::new(Masker::new(&plan.secrets))];
        let masker = |stream: Stream| maskers[usize::from(stream == Stream::Stderr)].lock();
        let result = execute_observed(
            tool,
            &plan,
            context,
            |process| on_status(Status::Spawned { pid: process.pid(), process }),
            |stream, chunk| {
                if plan.secrets.is_empty() {
                    on_status(Status::Output { stream, chunk });
                } else if let Ok(mut m) = masker(stream) {
                    let ready = m.push(chunk);
                    if !ready.is_empty() {
                        on_status(Status::Output { stream, chunk: &ready });
                    }
                }
            },
        );
        for stream in [Stream::Stdout, Stream::Stderr] {
            if let Some(rest) = masker(stream).ok().map(|mut m| m.finish()).filter(|r| !r.is_empty()) {
                on_status(Status::Output { stream, chunk: &rest });
            }
        }
        result
    })();
    on_status(Status::Phase(Phase::Complete));
    if let Some(log) = context.audit() {
        let (exit_code, duration_ms, outcome, error) = match &result {
            Ok(r) => (
                r.exit_code,
                Some(r.duration_ms),
                if r.ok {
                    "ok"
                } else if r.timed_out {
                    "timeout"
                } else {
                    "failed"
                },
                r.error.clone(),
            ),
            Err(e) => (None, None, if decision == "denied" { "denied" } else { e.kind() }, Some(e.to_string())),
        };
        // The log was opened before the call; a failed write is kept in the log for
        // the front-end to report (`AuditLog::take_failure`): the call has run.
        let _ = log.record(&crate::audit::Entry {
            time: crate::audit::now(),
            agent: context.agent().map(|a| a.id.as_str()),
            tool: tool.name(),
            tier: tool.tier().as_str(),
            decision,
            argv,
            exit_code,
            duration_ms,
            outcome,
            error,
        });
    }
    result
}
