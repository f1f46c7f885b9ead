//! The operator's configuration, resolved once, with its precedence as data.
//!
//! Every front-end (run, its dry run, call, test, exec, serve over stdio or HTTP) gets one
//! [`Session`]: the pack directories, the agent, the lock, and the [`Context`] every call is
//! made with (workspace, sandbox mode, mode, pass-env, audit log). Which settings a front-end
//! honours is data too ([`Front`]): a setting given on the command line that a front-end
//! cannot honour is refused with the reason, never ignored.

use std::fmt;
use std::path::PathBuf;

use crate::agent::Agent;
use crate::call::Context;
use crate::sandbox::SandboxMode;

/// One setting of the operator's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// `--packs DIR` (else the agent's `packs`, else `$PACKS_PATH`, else `./packs`).
    Packs,
    /// `--workspace DIR`, `PACKS_WORKSPACE`.
    Workspace,
    /// `--log FILE`, `PACKS_LOG`.
    Log,
    /// `--secrets-file FILE`.
    SecretsFile,
    /// `--pass-env NAME`.
    PassEnv,
    /// `--sandbox MODE`, `PACKS_SANDBOX`.
    Sandbox,
    /// `--agent ID`, `PACKS_AGENT`.
    Agent,
    /// `--locked`, `PACKS_LOCKED`.
    Locked,
    /// `--lockfile FILE`, `PACKS_LOCKFILE`.
    Lockfile,
    /// `--verify PUBKEY`, `PACKS_LOCK_PUBKEY`.
    Verify,
    /// `--mode MODE`, `PACKS_MODE`.
    Mode,
    /// `--deny-read PATH`, `PACKS_DENY_READ`.
    DenyRead,
    /// `--no-default-deny-read`, `PACKS_NO_DEFAULT_DENY_READ`.
    NoDefaultDenyRead,
}

/// How the operator's value and an agent's combine: the precedence, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Only the operator sets it (command line, else environment, else the default).
    Operator,
    /// The operator's value, else the agent's, else the default.
    OperatorThenAgent,
    /// The operator's values and the agent's together.
    Both,
    /// The stricter of the operator's (or the default) and the agent's: an agent tightens,
    /// never loosens.
    Stricter,
    /// Added to a default list: the operator's (command line, else environment) and the
    /// agent's together; only the operator drops the default list.
    Adds,
}

impl Rule {
    /// The rule in words (`packs session --json`).
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Operator => "command line, else environment, else default",
            Self::OperatorThenAgent => "command line, else environment, else the agent's, else default",
            Self::Both => "the command line's and the agent's together",
            Self::Stricter => {
                "the stricter of the operator's (or the default) and the agent's: an agent tightens, never loosens"
            }
            Self::Adds => {
                "the default list (unless --no-default-deny-read), the command line's (else the environment's) and the agent's together: an agent adds, never removes"
            }
        }
    }
}

/// A setting's flag, environment variable and precedence rule.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) key: Key,
    pub(crate) flag: &'static str,
    pub(crate) env: Option<&'static str>,
    pub(crate) rule: Rule,
}

/// Every setting: the precedence table `packs session` prints and the CLI resolves with.
pub(crate) const SETTINGS: &[Spec] = &[
    Spec { key: Key::Packs, flag: "--packs", env: Some("PACKS_PATH"), rule: Rule::OperatorThenAgent },
    Spec { key: Key::Agent, flag: "--agent", env: Some("PACKS_AGENT"), rule: Rule::Operator },
    Spec { key: Key::Workspace, flag: "--workspace", env: Some("PACKS_WORKSPACE"), rule: Rule::Operator },
    Spec { key: Key::Sandbox, flag: "--sandbox", env: Some("PACKS_SANDBOX"), rule: Rule::Stricter },
    Spec { key: Key::Mode, flag: "--mode", env: Some("PACKS_MODE"), rule: Rule::OperatorThenAgent },
    Spec { key: Key::PassEnv, flag: "--pass-env", env: None, rule: Rule::Both },
    Spec { key: Key::DenyRead, flag: "--deny-read", env: Some("PACKS_DENY_READ"), rule: Rule::Adds },
    Spec {
        key: Key::NoDefaultDenyRead,
        flag: "--no-default-deny-read",
        env: Some("PACKS_NO_DEFAULT_DENY_READ"),
        rule: Rule::Operator,
    },
    Spec { key: Key::SecretsFile, flag: "--secrets-file", env: None, rule: Rule::Operator },
    Spec { key: Key::Log, flag: "--log", env: Some("PACKS_LOG"), rule: Rule::Operator },
    Spec { key: Key::Locked, flag: "--locked", env: Some("PACKS_LOCKED"), rule: Rule::Stricter },
    Spec { key: Key::Lockfile, flag: "--lockfile", env: Some("PACKS_LOCKFILE"), rule: Rule::Operator },
    Spec { key: Key::Verify, flag: "--verify", env: Some("PACKS_LOCK_PUBKEY"), rule: Rule::Operator },
];

impl Key {
    /// Its row of [`SETTINGS`].
    pub(crate) fn spec(self) -> &'static Spec {
        SETTINGS.iter().find(|s| s.key == self).expect("every key has a row")
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// The command line (the flag).
    Flag,
    /// packs' environment (the variable).
    Env,
    /// The agent's `agent.toml`.
    Agent(String),
    /// Nobody set it: packs' default.
    Default,
}

/// A setting's value as shown, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) key: Key,
    pub(crate) value: String,
    pub(crate) source: Source,
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = self.key.spec();
        let name = spec.flag.trim_start_matches("--");
        match &self.source {
            Source::Flag => write!(f, "{name}: {} (from {})", self.value, spec.flag),
            Source::Env => write!(f, "{name}: {} (from {})", self.value, spec.env.unwrap_or(spec.flag)),
            Source::Agent(id) => write!(f, "{name}: {} (from agent {id}'s agent.toml)", self.value),
            Source::Default => write!(f, "{name}: {} (default)", self.value),
        }
    }
}

/// What the operator gave, before any agent: the command line and environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Operator {
    pub(crate) packs: Vec<PathBuf>,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) log: Option<PathBuf>,
    pub(crate) secrets_file: Option<PathBuf>,
    pub(crate) pass_env: Vec<String>,
    pub(crate) sandbox: Option<SandboxMode>,
    pub(crate) agent: Option<String>,
    pub(crate) locked: bool,
    pub(crate) lockfile: PathBuf,
    pub(crate) verify: Option<PathBuf>,
    pub(crate) mode: Option<String>,
    /// Paths added to what no confined tool reads (`~/` not yet expanded).
    pub(crate) deny_read: Vec<PathBuf>,
    /// The default list of credential stores is dropped: only `deny_read` (and the agent's).
    pub(crate) no_default_deny_read: bool,
    /// Each setting given, with where (command line or environment).
    pub(crate) given: Vec<(Key, Source)>,
}

impl Operator {
    /// Where the operator gave `key`, if they did.
    pub(crate) fn source(&self, key: Key) -> Option<&Source> {
        self.given.iter().find(|(k, _)| *k == key).map(|(_, s)| s)
    }
}

/// A front-end: the settings it honours, and how it differs from the others.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Front {
    /// The command (`exec`), as an error names it.
    pub(crate) name: &'static str,
    /// The settings it honours; any other given on the command line is refused.
    pub(crate) honours: Honours,
    /// Why it honours no more (said when one is refused).
    pub(crate) because: &'static str,
    /// It serves a model: without `--agent` it acts for the default agent, when there is one.
    pub(crate) serves_model: bool,
    /// Its calls are recorded in the audit log.
    pub(crate) records: bool,
}

/// The settings a front-end honours: a few, or every one but a few.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Honours {
    /// Only these.
    Only(&'static [Key]),
    /// Every setting but these.
    AllBut(&'static [Key]),
}

impl Honours {
    /// Every setting.
    pub(crate) const ALL: Self = Self::AllBut(&[]);

    /// Whether `key` is honoured.
    pub(crate) fn contains(self, key: &Key) -> bool {
        match self {
            Self::Only(keys) => keys.contains(key),
            Self::AllBut(keys) => !keys.contains(key),
        }
    }
}

/// Every setting (the table [`SETTINGS`] must have one row each).
#[cfg(test)]
const ALL: &[Key] = &[
    Key::Packs,
    Key::Workspace,
    Key::Log,
    Key::SecretsFile,
    Key::PassEnv,
    Key::Sandbox,
    Key::Agent,
    Key::Locked,
    Key::Lockfile,
    Key::Verify,
    Key::Mode,
    Key::DenyRead,
    Key::NoDefaultDenyRead,
];

/// A setting given on the command line that a front-end cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`packs {command}` does not take {flag}: {because}")]
pub(crate) struct Unhonoured {
    pub(crate) command: &'static str,
    pub(crate) flag: &'static str,
    pub(crate) because: &'static str,
}

impl Front {
    /// Refuse the first setting given on the command line that this front-end does not
    /// honour. One from the environment is left alone: it is set for every command.
    pub(crate) fn check(&self, operator: &Operator) -> Result<(), Unhonoured> {
        match operator.given.iter().find(|(k, s)| *s == Source::Flag && !self.honours.contains(k)) {
            Some((key, _)) => Err(Unhonoured { command: self.name, flag: key.spec().flag, because: self.because }),
            None => Ok(()),
        }
    }
}

/// The operator's configuration resolved once for one front-end.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    operator: Operator,
    /// The agent it acts for, if any.
    pub(crate) agent: Option<Agent>,
    /// The pack directories given (`--packs`, else the agent's; empty: `$PACKS_PATH`, else `./packs`).
    pub(crate) dirs: Vec<PathBuf>,
    /// Whether only tools pinned in the lock file may run (the operator's `--locked` or the agent's).
    pub(crate) locked: bool,
    /// What every call is made with: the agent, workspace, sandbox mode, mode, pass-env, audit log.
    pub(crate) context: Context,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error(transparent)]
    Unhonoured(#[from] Unhonoured),
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
    #[error("cannot write the audit log {}: {error}", path.display())]
    Log { path: PathBuf, error: std::io::Error },
}

impl Session {
    /// Resolve `operator` for `front`: refuse what it cannot honour, load the agent, open the
    /// audit log (for a front-end that records), and settle every setting by [`SETTINGS`]'
    /// rules. Secrets are read by the caller (they go into the process environment).
    pub(crate) fn open(operator: Operator, front: &Front) -> Result<Self, SessionError> {
        front.check(&operator)?;
        let honours = |k: Key| front.honours.contains(&k);
        let agent = if honours(Key::Agent) {
            let root = Agent::root();
            let id = operator.agent.as_deref();
            if front.serves_model { Agent::for_model(&root, id)? } else { Agent::named(&root, id)? }
        } else {
            None
        };
        let mut context = Context::new();
        if front.records
            && honours(Key::Log)
            && let Some(path) = &operator.log
        {
            let log =
                crate::audit::AuditLog::open(path).map_err(|error| SessionError::Log { path: path.clone(), error })?;
            context = context.with_audit(log);
        }
        if honours(Key::Workspace)
            && let Some(dir) = &operator.workspace
        {
            context = context.with_workspace(dir.clone());
        }
        if honours(Key::PassEnv) {
            context = context.with_pass_env(operator.pass_env.iter().cloned());
        }
        if honours(Key::Sandbox)
            && let Some(mode) = operator.sandbox
        {
            context = context.with_sandbox(mode);
        }
        if honours(Key::Mode)
            && let Some(mode) = &operator.mode
        {
            context = context.with_mode(mode.clone());
        }
        let home = crate::reads::home();
        let dropped = honours(Key::NoDefaultDenyRead) && operator.no_default_deny_read;
        let mut denied_reads = if dropped { Vec::new() } else { crate::reads::default_list().to_vec() };
        if honours(Key::DenyRead) {
            denied_reads.extend(operator.deny_read.iter().map(|p| crate::reads::expand(p, home.as_deref())));
        }
        // packs' own secrets, denied whatever the list: the secrets file, and the approval
        // key of deferred approvals with its used tickets (`packs call`, `packs serve`),
        // whichever command runs now: a tool run by `packs run` must not read or plant it.
        let mut own: Vec<PathBuf> = Vec::new();
        if honours(Key::SecretsFile) {
            own.extend(operator.secrets_file.iter().cloned());
        }
        own.extend(crate::call::Tickets::default_files());
        context = context.with_denied_reads(denied_reads).dropping_default_reads(dropped).own_secrets(&own);
        // The agent last or first makes no difference: `Context` keeps the operator's
        // settings apart and settles them with the agent's by the rules above.
        if let Some(a) = &agent {
            context = context.with_agent(a.clone());
        }
        let dirs = match (&agent, operator.packs.is_empty()) {
            (Some(a), true) => a.pack_dirs(),
            _ => operator.packs.clone(),
        };
        let locked = honours(Key::Locked) && (operator.locked || agent.as_ref().is_some_and(|a| a.config.locked));
        let mut session = Self { operator, agent, dirs, locked, context };
        // Every front-end's calls keep off packs' own configuration, `packs exec`'s included.
        session.context = session.context.clone().with_control_plane(session.control_plane());
        Ok(session)
    }

    /// packs' own configuration as this session has it: the pack directories searched, the
    /// agents, the lock file and its signature, the audit log, the secrets file, packs'
    /// cache. No confined tool may write there (docs/SANDBOX.md); the session's context
    /// has it, and `packs serve` adds its token and key files.
    pub(crate) fn control_plane(&self) -> Vec<PathBuf> {
        let op = &self.operator;
        let mut paths = crate::catalog::SearchPath::resolve(&self.dirs, std::env::var_os("PACKS_PATH").as_deref()).dirs;
        paths.push(Agent::root());
        paths.push(op.lockfile.clone());
        paths.push(crate::lock::signature_path(&op.lockfile));
        paths.extend(op.log.iter().chain(&op.secrets_file).cloned());
        // packs' cache is made now (private) if it is not there yet: a piece of the control
        // plane that does not exist is not reserved, and a tool whose workspace is `$HOME`
        // could make it and plant the next listing snapshot (src/snapshot.rs).
        if let Some(cache) = crate::describe_cache::default_dir() {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&cache);
            paths.push(cache);
        }
        // So is the state directory that holds the default approval key: a tool must not
        // plant a key there before `packs call` or `packs serve` first makes one.
        if let Some(state) = crate::call::Tickets::default_key_file().as_deref().and_then(std::path::Path::parent) {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state);
            paths.push(state.to_owned());
        }
        paths
    }

    /// The lock options, when tools must be pinned.
    pub(crate) fn lockfile(&self) -> (&std::path::Path, Option<&std::path::Path>) {
        (&self.operator.lockfile, self.operator.verify.as_deref())
    }

    /// Each setting's value in effect and where it came from, in [`SETTINGS`]' order.
    pub(crate) fn resolved(&self) -> Vec<Resolved> {
        let op = &self.operator;
        let agent = self.agent.as_ref();
        let from_agent = || Source::Agent(agent.map(|a| a.id.clone()).unwrap_or_default());
        let given = |k: Key| op.source(k).cloned().unwrap_or(Source::Default);
        let c = &self.context;
        SETTINGS
            .iter()
            .map(|spec| {
                let (value, source) = match spec.key {
                    Key::Packs => {
                        let shown =
                            |d: &[PathBuf]| d.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
                        if !op.packs.is_empty() {
                            (shown(&op.packs), Source::Flag)
                        } else if !self.dirs.is_empty() {
                            (shown(&self.dirs), from_agent())
                        } else {
                            match std::env::var("PACKS_PATH") {
                                Ok(p) if !p.is_empty() => (p, Source::Env),
                                _ => ("./packs".to_owned(), Source::Default),
                            }
                        }
                    }
                    Key::Agent => match agent {
                        Some(a) if op.agent.is_none() => (a.id.clone(), Source::Default),
                        Some(a) => (a.id.clone(), given(Key::Agent)),
                        None => ("none".to_owned(), given(Key::Agent)),
                    },
                    Key::Workspace => match c.workspace_set() {
                        Some(w) => (w.display().to_string(), given(Key::Workspace)),
                        None => ("the current directory".to_owned(), Source::Default),
                    },
                    Key::Sandbox => {
                        let value = c.sandbox().as_str().to_owned();
                        match op.sandbox {
                            Some(mine) if mine == c.sandbox() => (value, given(Key::Sandbox)),
                            None if c.sandbox() == SandboxMode::default() => (value, Source::Default),
                            _ => (value, from_agent()),
                        }
                    }
                    Key::Mode => match (c.mode(), &op.mode) {
                        (None, _) => ("none (every tool)".to_owned(), Source::Default),
                        (Some(m), Some(_)) => (m.to_owned(), given(Key::Mode)),
                        (Some(m), None) => (m.to_owned(), from_agent()),
                    },
                    Key::PassEnv => {
                        let value = if c.pass_env().is_empty() { "none".to_owned() } else { c.pass_env().join(" ") };
                        let agents = agent.is_some_and(|a| !a.config.pass_env.is_empty());
                        let source = match (op.pass_env.is_empty(), agents) {
                            (true, true) => from_agent(),
                            (false, _) => Source::Flag,
                            (true, false) => Source::Default,
                        };
                        (value, source)
                    }
                    Key::SecretsFile => match &op.secrets_file {
                        Some(f) => (f.display().to_string(), Source::Flag),
                        None => ("none".to_owned(), Source::Default),
                    },
                    Key::Log => match &op.log {
                        Some(f) => (f.display().to_string(), given(Key::Log)),
                        None => ("none".to_owned(), Source::Default),
                    },
                    Key::Locked => match (op.locked, self.locked) {
                        (true, _) => ("yes".to_owned(), given(Key::Locked)),
                        (false, true) => ("yes".to_owned(), from_agent()),
                        (false, false) => ("no".to_owned(), Source::Default),
                    },
                    Key::Lockfile => (op.lockfile.display().to_string(), given(Key::Lockfile)),
                    Key::Verify => match &op.verify {
                        Some(k) => (k.display().to_string(), given(Key::Verify)),
                        None => ("none".to_owned(), Source::Default),
                    },
                    Key::DenyRead => {
                        let home = crate::reads::home();
                        let mut parts = Vec::new();
                        if !op.no_default_deny_read {
                            parts.push("the credential stores".to_owned());
                        }
                        let theirs = agent.map_or(&[][..], Agent::denied_reads);
                        for path in op
                            .deny_read
                            .iter()
                            .map(|p| crate::reads::expand(p, home.as_deref()))
                            .chain(theirs.iter().cloned())
                        {
                            parts.push(path.display().to_string());
                        }
                        let value = if parts.is_empty() { "none".to_owned() } else { parts.join(", ") };
                        let source = match (op.source(Key::DenyRead), theirs.is_empty()) {
                            (Some(s), _) => s.clone(),
                            (None, false) => from_agent(),
                            (None, true) => Source::Default,
                        };
                        (value, source)
                    }
                    Key::NoDefaultDenyRead => match op.no_default_deny_read {
                        true => ("yes".to_owned(), given(Key::NoDefaultDenyRead)),
                        false => ("no".to_owned(), Source::Default),
                    },
                };
                Resolved { key: spec.key, value, source }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front(honours: &'static [Key]) -> Front {
        Front {
            name: "x",
            honours: Honours::Only(honours),
            because: "it runs no tool",
            serves_model: false,
            records: true,
        }
    }

    #[test]
    fn a_flag_a_front_end_cannot_honour_is_refused_and_the_environment_is_not() {
        let mut op = Operator { log: Some("log".into()), ..Operator::default() };
        op.given.push((Key::Log, Source::Env));
        front(&[]).check(&op).unwrap();
        op.given[0].1 = Source::Flag;
        let e = front(&[Key::Packs]).check(&op).unwrap_err();
        assert_eq!(e.to_string(), "`packs x` does not take --log: it runs no tool");
        front(&[Key::Log]).check(&op).unwrap();
    }

    #[test]
    fn each_setting_has_one_row_and_sources_say_where() {
        for key in ALL {
            assert_eq!(SETTINGS.iter().filter(|s| s.key == *key).count(), 1, "{key:?}");
        }
        assert_eq!(SETTINGS.len(), ALL.len());
        let r = Resolved { key: Key::Sandbox, value: "enforce".into(), source: Source::Flag };
        assert_eq!(r.to_string(), "sandbox: enforce (from --sandbox)");
        let r = Resolved { key: Key::Sandbox, value: "enforce".into(), source: Source::Env };
        assert_eq!(r.to_string(), "sandbox: enforce (from PACKS_SANDBOX)");
    }
}
