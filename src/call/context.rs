//! `Context`: what a call is made with besides its arguments (context values, the
//! agent, the workspace, the audit log, the variables passed to every tool).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::audit::AuditLog;
use crate::sandbox::SandboxMode;
use crate::template::CONTEXT_KEYS;

/// The caller's context: values such as the active URL or selection that fill
/// context-sourced parameters and `{{context.KEY}}` placeholders, and the agent,
/// workspace and audit log every call is made with.
#[derive(Debug, Clone, Default)]
pub struct Context {
    values: Map<String, Value>,
    agent: Option<Arc<Agent>>,
    workspace: Option<PathBuf>,
    audit: Option<Arc<AuditLog>>,
    pass_env: Vec<String>,
    sandbox: SandboxMode,
    mode: Option<String>,
}

/// A context key that packs does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown context key `{key}`; known keys: {}", CONTEXT_KEYS.join(", "))]
pub struct UnknownContextKey {
    /// The key given.
    pub key: String,
}

impl Context {
    /// An empty context: no values, no agent, the current directory as workspace, no log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The keys a context value may have: `url`, `selection`, `clipboard`, `file`, `cwd`,
    /// `transcript`.
    pub fn keys() -> &'static [&'static str] {
        CONTEXT_KEYS
    }

    /// Set `key` (one of [`Context::keys`]) to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<String>) -> Result<(), UnknownContextKey> {
        if !CONTEXT_KEYS.contains(&key) {
            return Err(UnknownContextKey { key: key.to_owned() });
        }
        self.values.insert(key.to_owned(), Value::String(value.into()));
        Ok(())
    }

    /// The values set, as a JSON object.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// Calls are made on behalf of `agent`: its allow/deny/ask lists and `max_tier` apply,
    /// and its `pass_env`, `sandbox` and `mode` settings (a later [`Context::with_sandbox`]
    /// or [`Context::with_mode`] wins).
    #[must_use]
    pub fn with_agent(mut self, agent: Agent) -> Self {
        self = self.with_pass_env(agent.config.pass_env.iter().cloned());
        if let Some(mode) = &agent.config.mode {
            self.mode = Some(mode.clone());
        }
        if let Some(mode) = agent.sandbox() {
            self.sandbox = mode;
        }
        self.agent = Some(Arc::new(agent));
        self
    }

    /// Pass these variables of packs' own environment to every tool (when set), beyond
    /// the minimal environment and each manifest's `env_passthrough`: an operator's
    /// convention (a stub flag, a proxy, a token) without editing the tools. An agent's
    /// `pass_env` adds to them. Their values are not masked: pass credentials as
    /// `{{secret.NAME}}` in a manifest instead.
    #[must_use]
    pub fn with_pass_env(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        for name in names {
            let name = name.into();
            if !self.pass_env.contains(&name) {
                self.pass_env.push(name);
            }
        }
        self
    }

    /// The variables passed to every tool.
    pub fn pass_env(&self) -> &[String] {
        &self.pass_env
    }

    /// How strictly tools' policies are enforced by the kernel (default: `enforce`, which
    /// refuses a call the kernel cannot confine; docs/SANDBOX.md).
    #[must_use]
    pub fn with_sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = mode;
        self
    }

    /// The sandbox mode.
    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// Confine `format: path` parameters to `dir` (default: the current directory), and
    /// run tools there unless their manifest sets a `cwd`.
    #[must_use]
    pub fn with_workspace(mut self, dir: PathBuf) -> Self {
        self.workspace = Some(dir);
        self
    }

    /// The workspace root: as set, else the current directory.
    pub fn workspace(&self) -> PathBuf {
        self.workspace.clone().or_else(|| std::env::current_dir().ok()).unwrap_or_else(|| PathBuf::from("."))
    }

    /// The workspace as set, if it was.
    pub(crate) fn workspace_set(&self) -> Option<&PathBuf> {
        self.workspace.as_ref()
    }

    /// Record every call made with this context in `log`.
    #[must_use]
    pub fn with_audit(mut self, log: AuditLog) -> Self {
        self.audit = Some(Arc::new(log));
        self
    }

    /// The audit log, if calls are recorded.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_deref()
    }

    /// Only tools whose `modes` include `mode` (or `Global`, or that state no modes) are
    /// offered (exports, prompts, `tools/list`) and may be called.
    #[must_use]
    pub fn with_mode(mut self, mode: impl Into<String>) -> Self {
        self.mode = Some(mode.into());
        self
    }

    /// The mode in effect, if any.
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    /// Whether `tool` is offered to a model in this context: the agent's rules can let it
    /// run ([`Agent::offers`]) and it belongs to the mode in effect.
    pub fn offers(&self, tool: &crate::tool::Tool) -> bool {
        self.agent().is_none_or(|a| a.offers(tool)) && self.mode().is_none_or(|m| tool.in_mode(m))
    }

    /// The agent calls are made for, if any.
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_deref()
    }
}
