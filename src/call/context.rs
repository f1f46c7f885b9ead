//! `Context`: what a call is made with besides its arguments (context values, the
//! agent, the workspace, the audit log, the variables passed to every tool).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::audit::AuditLog;
use crate::sandbox::{Enforcement, SandboxMode, Unenforceable};
use crate::template::CONTEXT_KEYS;

/// The caller's context: values such as the active URL or selection that fill
/// context-sourced parameters and `{{context.KEY}}` placeholders, and the agent,
/// workspace and audit log every call is made with.
#[derive(Debug, Clone, Default)]
pub struct Context {
    values: Map<String, Value>,
    agent: Option<Arc<Agent>>,
    workspace: Option<PathBuf>,
    /// packs' own configuration, resolved: no confined tool writes there.
    control_plane: Arc<[PathBuf]>,
    /// What no confined tool reads, absolute, not resolved (the read rules resolve it each
    /// time they are built: [`crate::reads::denied`]); `None`: the default list under `$HOME`.
    denied_reads: Option<Arc<[PathBuf]>>,
    /// The operator dropped the default list (`--no-default-deny-read`): `denied_reads` is
    /// theirs alone.
    default_reads_dropped: bool,
    /// What the agent adds to it (`deny_read`), absolute.
    agent_denied_reads: Arc<[PathBuf]>,
    /// packs' own secrets (the secrets file, approval and session keys), absolute: denied
    /// whatever the lists above say.
    own_reads: Arc<[PathBuf]>,
    audit: Option<Arc<AuditLog>>,
    /// The settings in effect: the operator's (`with_*`), else the agent's.
    pass_env: Vec<String>,
    sandbox: SandboxMode,
    mode: Option<String>,
    /// The operator's own settings, kept apart so that another agent replaces the first
    /// one's settings instead of adding to them (a token's agent in `packs serve --http`).
    operator: Operator,
}

/// The settings a kept [`Context::enforcement`] was decided with. The lists are compared by
/// identity: each is kept alive here, so an equal pointer is the very same list (contexts
/// cloned from one another share them; a setting changed is a new list).
struct DecidedWith {
    sandbox: SandboxMode,
    control_plane: Arc<[PathBuf]>,
    denied_reads: Option<Arc<[PathBuf]>>,
    default_reads_dropped: bool,
    agent_denied_reads: Arc<[PathBuf]>,
    own_reads: Arc<[PathBuf]>,
}

impl DecidedWith {
    fn same(&self, other: &Self) -> bool {
        let denied = match (&self.denied_reads, &other.denied_reads) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.sandbox == other.sandbox
            && self.default_reads_dropped == other.default_reads_dropped
            && denied
            && Arc::ptr_eq(&self.control_plane, &other.control_plane)
            && Arc::ptr_eq(&self.agent_denied_reads, &other.agent_denied_reads)
            && Arc::ptr_eq(&self.own_reads, &other.own_reads)
    }
}

/// What the front-end set itself, before any agent's settings.
#[derive(Debug, Clone, Default)]
struct Operator {
    pass_env: Vec<String>,
    sandbox: Option<SandboxMode>,
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
    /// its `pass_env` (added to the context's) and its `mode` unless [`Context::with_mode`]
    /// set one (before or after), and its `sandbox` only where it is stricter than the
    /// operator's ([`Context::with_sandbox`], else `enforce`): an agent tightens, never
    /// loosens. An agent set earlier is replaced, its settings with it.
    #[must_use]
    pub fn with_agent(mut self, agent: Agent) -> Self {
        self.agent_denied_reads = absolute(agent.denied_reads()).into();
        self.agent = Some(Arc::new(agent));
        self.settle()
    }

    /// The settings in effect from the operator's and the agent's (the operator's win).
    fn settle(mut self) -> Self {
        let agent = self.agent.as_deref();
        self.pass_env.clone_from(&self.operator.pass_env);
        for name in agent.map(|a| a.config.pass_env.as_slice()).unwrap_or_default() {
            if !self.pass_env.contains(name) {
                self.pass_env.push(name.clone());
            }
        }
        self.mode = self.operator.mode.clone().or_else(|| agent.and_then(|a| a.config.mode.clone()));
        // An agent may tighten the sandbox, never loosen it: its `sandbox` counts only where
        // it is stricter than the operator's (or the default, `enforce`). An `agent.toml`
        // (in a checkout, or rewritten by a tool) cannot turn confinement off.
        let operator = self.operator.sandbox.unwrap_or_default();
        self.sandbox = match agent.and_then(Agent::sandbox) {
            Some(theirs) if theirs.is_stricter_than(operator) => theirs,
            _ => operator,
        };
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
            if !self.operator.pass_env.contains(&name) {
                self.operator.pass_env.push(name);
            }
        }
        self.settle()
    }

    /// The variables passed to every tool.
    pub fn pass_env(&self) -> &[String] {
        &self.pass_env
    }

    /// How strictly tools' policies are enforced by the kernel (default: `enforce`, which
    /// refuses a call the kernel cannot confine; docs/SANDBOX.md).
    #[must_use]
    pub fn with_sandbox(mut self, mode: SandboxMode) -> Self {
        self.operator.sandbox = Some(mode);
        self.settle()
    }

    /// The sandbox mode.
    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// What the kernel would enforce for a call of `tool` in this context: the one place
    /// the sandbox level is decided (the plan, `--dry-run`, `packs help NAME` and the MCP
    /// read-only hint all ask here). `None` for a native tool (it runs in packs' own
    /// process); an error when this context's mode is `enforce` and the kernel cannot
    /// confine what the tool's policy needs.
    pub(crate) fn enforcement(&self, tool: &crate::tool::Tool) -> Option<Result<Enforcement, Unenforceable>> {
        if tool.kind() == crate::tool::ToolKind::Native {
            return None;
        }
        let policy = tool.policy();
        let needs =
            crate::sandbox::Needs::of(tool.tier(), policy.requires_network, &self.workspace(), &tool.writable_dirs())
                .protecting(&self.control_plane)
                .denying_reads(self.denies_reads(tool).then(|| self.denied_reads().into_owned()))
                .reads_list_replaced(self.default_reads_dropped, self.own_reads.len())
                .without_home(crate::reads::homes_unknown())
                .unix_sockets(policy.unix_sockets)
                .reading_only(self.readable_places(tool));
        Some(crate::sandbox::decide(needs, self.sandbox, crate::sandbox::Support::probe()))
    }

    /// [`Context::enforcement`], kept in the tool while this context's settings are the ones
    /// it was decided with (`packs serve` makes every call of a connection with one
    /// context). Only for a tool whose decision reads nothing but its policy and these
    /// settings: not a `workspace` tool (its workspace is resolved per call), nor one whose
    /// `policy.writable` or `policy.readable` names places (rendered and resolved per call).
    pub(crate) fn enforcement_kept(&self, tool: &crate::tool::Tool) -> Option<Result<Arc<Enforcement>, Unenforceable>> {
        let policy = tool.policy();
        let keepable = tool.kind() != crate::tool::ToolKind::Native
            && !matches!(tool.tier(), crate::policy::Tier::Workspace)
            && policy.writable.is_empty()
            && policy.readable.is_none();
        if !keepable {
            return self.enforcement(tool).map(|r| r.map(Arc::new));
        }
        let settings = DecidedWith {
            sandbox: self.sandbox,
            control_plane: Arc::clone(&self.control_plane),
            denied_reads: self.denied_reads.clone(),
            default_reads_dropped: self.default_reads_dropped,
            agent_denied_reads: Arc::clone(&self.agent_denied_reads),
            own_reads: Arc::clone(&self.own_reads),
        };
        let mut slot = tool.kept().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((with, decided)) = slot.as_ref().and_then(|k| k.downcast_ref::<(DecidedWith, Arc<Enforcement>)>())
            && with.same(&settings)
        {
            return Some(Ok(Arc::clone(decided)));
        }
        let decided = self.enforcement(tool)?.map(Arc::new);
        if let Ok(enforcement) = &decided {
            *slot = Some(Arc::new((settings, Arc::clone(enforcement))));
        }
        Some(decided)
    }

    /// What, besides the tools and the kernel, [`Context::enforcement`] depends on, in one
    /// text: part of the key of serve's listing snapshot, whose entries state it.
    pub(crate) fn sandbox_key(&self) -> String {
        format!(
            "{:?} {:?} {} {:?} {:?} {}",
            self.sandbox,
            self.denied_reads(),
            self.default_reads_dropped,
            self.control_plane,
            self.workspace(),
            crate::reads::homes_unknown()
        )
    }

    /// Where `tool` may read when its manifest narrows reads (`policy.readable`): the places
    /// it names, and its manifest's directory (a script beside it must start).
    fn readable_places(&self, tool: &crate::tool::Tool) -> Option<Vec<PathBuf>> {
        // Most tools do not narrow reads: no workspace to find and resolve for them.
        tool.policy().readable.as_ref()?;
        let real = |p: &std::path::Path| std::fs::canonicalize(p).ok();
        let workspace = self.workspace();
        let mut places = tool.readable_places(&real(&workspace).unwrap_or(workspace))?;
        places.extend(tool.source().parent().and_then(real));
        Some(places)
    }

    /// Confine `format: path` parameters to `dir` (default: the current directory), and
    /// run tools there unless their manifest sets a `cwd`.
    #[must_use]
    pub fn with_workspace(mut self, dir: PathBuf) -> Self {
        self.workspace = Some(dir);
        self
    }

    /// packs' own configuration: pack directories, agents, the lock file and its signature,
    /// the audit log, secrets and token files, packs' cache. No confined tool may write there,
    /// even where it may write otherwise (a workspace holding `./packs`): see docs/SANDBOX.md.
    /// Paths are resolved now (links, the current directory); one that does not exist now is
    /// not reserved (docs/SANDBOX.md says why).
    #[must_use]
    pub fn with_control_plane(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let paths: Vec<PathBuf> = paths.into_iter().collect();
        self.control_plane = crate::grants::resolved(&paths).into();
        self
    }

    /// `paths` added to packs' own configuration (no confined tool writes them) and to what
    /// no confined tool reads (a front-end's own key files, e.g. `packs call`'s approval key).
    #[must_use]
    pub(crate) fn protecting_files(mut self, paths: &[PathBuf]) -> Self {
        self.control_plane = merged(&self.control_plane, &crate::grants::resolved(paths));
        self.own_secrets(paths)
    }

    /// `paths` added to packs' own secrets: no confined tool reads them, whatever the
    /// operator's list of denied reads (`--no-default-deny-read` included).
    #[must_use]
    pub(crate) fn own_secrets(mut self, paths: &[PathBuf]) -> Self {
        // Kept as given (absolute) and resolved when the rules are built, as
        // `with_denied_reads` keeps them.
        self.own_reads = merged(&self.own_reads, &absolute(paths));
        self
    }

    /// What no `read_only` or `workspace` tool may read (open, list beneath, execute, map):
    /// credential stores and packs' own secrets (docs/SANDBOX.md); by default the list
    /// under `$HOME` (docs/SANDBOX.md lists it). A relative path is taken from the
    /// current directory now; links are resolved each time the rules are built, and a path
    /// that does not exist (yet) is denied all the same: created later, it is unreadable.
    #[must_use]
    pub fn with_denied_reads(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let paths: Vec<PathBuf> = paths.into_iter().collect();
        self.denied_reads = Some(absolute(&paths).into());
        self
    }

    /// The operator replaced the default list: the paths given to
    /// [`Context::with_denied_reads`] are all there is, and `--dry-run` says so.
    #[must_use]
    pub(crate) fn dropping_default_reads(mut self, dropped: bool) -> Self {
        self.default_reads_dropped = dropped;
        self
    }

    /// What no confined tool may read, absolute (not resolved): the operator's list (else
    /// the default one), what the agent adds, and packs' own secrets.
    pub(crate) fn denied_reads(&self) -> std::borrow::Cow<'_, [PathBuf]> {
        let operator = self.denied_reads.as_deref().unwrap_or_else(|| crate::reads::default_list());
        let added = || self.agent_denied_reads.iter().chain(self.own_reads.iter());
        if added().all(|p| operator.contains(p)) {
            return std::borrow::Cow::Borrowed(operator);
        }
        let mut all: Vec<PathBuf> = operator.iter().chain(added()).cloned().collect();
        all.sort();
        all.dedup();
        std::borrow::Cow::Owned(all)
    }

    /// Whether `tool`'s reads are confined: a `read_only` or `workspace` tool that does not
    /// state `policy.reads_credentials: true`.
    pub(crate) fn denies_reads(&self, tool: &crate::tool::Tool) -> bool {
        matches!(tool.tier(), crate::policy::Tier::ReadOnly | crate::policy::Tier::Workspace)
            && !tool.policy().reads_credentials
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
        self.operator.mode = Some(mode.into());
        self.settle()
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

/// `paths` absolute (from the current directory), sorted, without repeats.
fn absolute(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths.iter().filter_map(|p| std::path::absolute(p).ok()).collect();
    out.sort();
    out.dedup();
    out
}

/// `old` and `added`, sorted, each once.
fn merged(old: &[PathBuf], added: &[PathBuf]) -> Arc<[PathBuf]> {
    let mut all: Vec<PathBuf> = old.iter().chain(added).cloned().collect();
    all.sort();
    all.dedup();
    all.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(root: &std::path::Path, id: &str, toml: &str) -> Agent {
        std::fs::create_dir_all(root.join(id)).unwrap();
        std::fs::write(root.join(id).join("agent.toml"), toml).unwrap();
        Agent::load(root, id).unwrap()
    }

    #[test]
    fn another_agent_replaces_the_first_ones_settings_and_the_operators_win() {
        let dir = tempfile::tempdir().unwrap();
        let first = agent(dir.path(), "first", "mode = \"Coding\"\nsandbox = \"off\"\npass_env = [\"A\"]\n");
        let second = agent(dir.path(), "second", "pass_env = [\"B\"]\n");
        let base = Context::new().with_pass_env(["OP"]).with_agent(first);
        // Its `sandbox = "off"` loosens nothing: the default stays.
        assert_eq!(
            (base.mode(), base.sandbox(), base.pass_env()),
            (Some("Coding"), SandboxMode::Enforce, &["OP".to_owned(), "A".to_owned()][..])
        );
        // A token's agent in `packs serve --http`: nothing of the first agent stays.
        let token = base.clone().with_agent(second.clone());
        assert_eq!(
            (token.mode(), token.sandbox(), token.pass_env()),
            (None, SandboxMode::default(), &["OP".to_owned(), "B".to_owned()][..])
        );
        // The operator's mode and sandbox win over an agent's, set before or after it.
        let op = Context::new().with_mode("Dictation").with_sandbox(SandboxMode::BestEffort);
        for c in [
            op.clone().with_agent(agent(dir.path(), "third", "mode = \"Coding\"\nsandbox = \"off\"\n")),
            op.with_agent(second),
        ] {
            assert_eq!((c.mode(), c.sandbox()), (Some("Dictation"), SandboxMode::BestEffort));
        }
        // An agent may tighten what the operator set, set before or after it.
        let strict = agent(dir.path(), "strict", "sandbox = \"enforce\"\n");
        let loose = Context::new().with_sandbox(SandboxMode::Off);
        assert_eq!(loose.clone().with_agent(strict.clone()).sandbox(), SandboxMode::Enforce);
        assert_eq!(Context::new().with_agent(strict).with_sandbox(SandboxMode::Off).sandbox(), SandboxMode::Enforce);
        let careful = agent(dir.path(), "careful", "sandbox = \"best-effort\"\n");
        assert_eq!(loose.with_agent(careful.clone()).sandbox(), SandboxMode::BestEffort);
        assert_eq!(Context::new().with_agent(careful).sandbox(), SandboxMode::Enforce);
    }

    #[test]
    fn an_agent_adds_to_the_denied_reads_and_the_next_agent_does_not_inherit_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["op", "theirs"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let toml = format!("deny_read = [{:?}]\n", root.join("theirs").display().to_string());
        let adds = agent(&root.join("agents"), "adds", &toml);
        let plain = agent(&root.join("agents"), "plain", "");
        let base = Context::new().with_denied_reads([root.join("op")]);
        assert_eq!(&*base.denied_reads(), [root.join("op")]);
        let with = base.clone().with_agent(adds);
        assert_eq!(&*with.denied_reads(), [root.join("op"), root.join("theirs")]);
        assert_eq!(&*with.with_agent(plain).denied_reads(), [root.join("op")]);
    }

    #[test]
    fn a_decision_is_kept_per_tool_while_the_settings_are_the_same_lists() {
        use serde_json::json;
        let (_dir, catalog) = crate::call::tests::pack(&[
            json!({"name": "ro", "description": "d", "command": "true"}),
            json!({"name": "ws", "description": "d", "command": "true", "policy": {"tier": "workspace"}}),
            json!({"name": "cache", "description": "d", "command": "true", "policy": {"writable": ["/tmp/x"]}}),
        ]);
        let (ro, ws, cache) = (catalog.get("ro").unwrap(), catalog.get("ws").unwrap(), catalog.get("cache").unwrap());
        let decided = |c: &Context, t| c.enforcement_kept(t).unwrap().unwrap();
        let ctx = Context::new().with_control_plane([PathBuf::from("/nonexistent/packs")]);
        let first = decided(&ctx, ro);
        // The same context, or a clone of it: the very decision kept, equal to a fresh one.
        assert!(Arc::ptr_eq(&first, &decided(&ctx, ro)));
        assert!(Arc::ptr_eq(&first, &decided(&ctx.clone(), ro)));
        assert_eq!(*first, ctx.enforcement(ro).unwrap().unwrap());
        // A setting changed: decided again, for the new settings.
        let off = ctx.clone().with_sandbox(SandboxMode::Off);
        let again = decided(&off, ro);
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(again.mode, SandboxMode::Off);
        let denied = ctx.clone().with_denied_reads([PathBuf::from("/secret")]);
        assert_eq!(decided(&denied, ro).reads_denied.as_deref(), Some(&[PathBuf::from("/secret")][..]));
        // Decisions that read places per call are never kept.
        for tool in [ws, cache] {
            assert!(!Arc::ptr_eq(&decided(&ctx, tool), &decided(&ctx, tool)));
        }
    }

    #[test]
    fn the_context_keys_are_the_six_and_no_other_is_set() {
        assert_eq!(Context::keys(), ["url", "selection", "clipboard", "file", "cwd", "transcript"]);
        let mut c = Context::new();
        c.set("url", "https://example.com").unwrap();
        let e = c.set("urls", "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown context key `urls`; known keys: url, selection, clipboard, file, cwd, transcript"
        );
        assert_eq!(c.values(), &serde_json::json!({"url": "https://example.com"}).as_object().cloned().unwrap());
    }

    #[test]
    fn a_variable_passed_is_passed_once() {
        let dir = tempfile::tempdir().unwrap();
        let also = agent(dir.path(), "also", "pass_env = [\"A\", \"B\"]\n");
        let c = Context::new().with_pass_env(["A", "A"]).with_pass_env(["A", "C"]).with_agent(also);
        assert_eq!(c.pass_env(), ["A", "C", "B"]);
    }

    #[test]
    fn the_sandbox_key_changes_with_each_setting_the_sandbox_level_depends_on() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let base = Context::new().with_workspace(root.clone());
        let variants = [
            base.clone().with_sandbox(SandboxMode::Off),
            base.clone().with_denied_reads([root.join("secret")]),
            base.clone().with_denied_reads([root.join("secret")]).dropping_default_reads(true),
            base.clone().with_control_plane([root.clone()]),
            base.clone().with_workspace(root.join("other")),
        ];
        let keys: Vec<String> = std::iter::once(&base).chain(&variants).map(Context::sandbox_key).collect();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(keys.iter().filter(|k| *k == key).count(), 1, "{i}: {key}");
        }
        assert_eq!(base.sandbox_key(), base.clone().with_mode("Coding").sandbox_key());
        assert!(keys[1].starts_with("Off "), "{}", keys[1]);
    }

    #[test]
    fn control_plane_and_own_secrets_add_to_what_was_set_and_keep_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["packs", "key", "secrets", "op"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let c = Context::new()
            .with_mode("Coding")
            .with_denied_reads([root.join("op")])
            .with_control_plane([root.join("packs")])
            .protecting_files(&[root.join("key")])
            .own_secrets(&[root.join("secrets"), root.join("key")])
            .dropping_default_reads(true);
        assert_eq!(c.mode(), Some("Coding"));
        assert_eq!(&*c.control_plane, [root.join("key"), root.join("packs")]);
        assert_eq!(&*c.own_reads, [root.join("key"), root.join("secrets")]);
        assert_eq!(&*c.denied_reads(), [root.join("key"), root.join("op"), root.join("secrets")]);
        assert!(c.default_reads_dropped);
        assert!(!c.clone().dropping_default_reads(false).default_reads_dropped);
    }

    #[test]
    fn reads_are_denied_to_read_only_and_workspace_tools_that_do_not_state_reads_credentials() {
        let tool = |name: &str, policy: serde_json::Value| serde_json::json!({"name": name, "description": "d", "policy": policy, "command": {"program": "true"}});
        let (_dir, catalog) = crate::call::tests::pack(&[
            tool("ro", serde_json::json!({"tier": "read_only"})),
            tool("ws", serde_json::json!({"tier": "workspace"})),
            tool("sys", serde_json::json!({"tier": "system"})),
            tool("cred", serde_json::json!({"tier": "workspace", "reads_credentials": true})),
        ]);
        let c = Context::new();
        let denies: Vec<bool> = ["ro", "ws", "sys", "cred"].map(|n| c.denies_reads(catalog.get(n).unwrap())).to_vec();
        assert_eq!(denies, [true, true, false, false]);
    }

    #[test]
    fn a_tool_that_narrows_reads_reads_the_places_it_names_and_its_own_directory() {
        let ws = tempfile::tempdir().unwrap();
        let ws_real = std::fs::canonicalize(ws.path()).unwrap();
        let (dir, catalog) = crate::call::tests::pack(&[
            serde_json::json!({"name": "narrow", "description": "d", "policy": {"read_only": true,
                "readable": ["{{workspace}}/data", "/etc/hostname"]}, "command": {"program": "true"}}),
            serde_json::json!({"name": "wide", "description": "d", "policy": {"read_only": true},
                "command": {"program": "true"}}),
        ]);
        let c = Context::new().with_workspace(ws.path().to_owned());
        assert_eq!(
            c.readable_places(catalog.get("narrow").unwrap()),
            Some(vec![
                ws_real.join("data"),
                PathBuf::from("/etc/hostname"),
                std::fs::canonicalize(dir.path()).unwrap()
            ])
        );
        assert_eq!(c.readable_places(catalog.get("wide").unwrap()), None);
    }
}
