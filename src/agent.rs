//! Agents: `agents/<id>/` with `soul.md`, `context/*.md` and `agent.toml`.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::policy::Tier;
use crate::sandbox::SandboxMode;
use serde::Deserialize;

/// Where agents live when `PACKS_AGENTS` is not set.
pub(crate) const DEFAULT_AGENTS_DIR: &str = "agents";

/// `agent.toml`. Unknown keys are errors: a typo in `deny` must not allow a tool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Tools the agent may use (names or globs); absent means all.
    pub tools: Option<Vec<String>>,
    /// Tools the agent may never use (names or globs).
    pub deny: Vec<String>,
    /// Tools that always need approval (names or globs).
    pub ask: Vec<String>,
    /// The highest permission tier the agent may use.
    pub max_tier: Option<String>,
    /// The agent's pack directories, relative to the agent's directory.
    pub packs: Vec<PathBuf>,
    /// The agent's default mode (`Coding`, `Dictation`...).
    pub mode: Option<String>,
    /// Variables of packs' environment passed to every tool the agent calls.
    pub pass_env: Vec<String>,
    /// How strictly the agent's calls are confined by the kernel (`enforce`, `best-effort`,
    /// `off`): only where it is stricter than the operator's (`--sandbox`, `PACKS_SANDBOX`,
    /// else `enforce`); an agent tightens, never loosens.
    pub sandbox: Option<String>,
    /// More paths no confined tool of the agent's may read, added to the operator's list
    /// (absolute, or `~/` for the operator's `HOME`): an agent adds, never removes.
    pub deny_read: Vec<String>,
    /// Use only tools pinned as they are in the lock file (as `--locked`).
    pub locked: bool,
}

/// A loaded agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Its id (the directory name).
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its `agent.toml` (defaults when there is none).
    pub config: AgentConfig,
    allow: Option<GlobSet>,
    deny: GlobSet,
    ask: GlobSet,
    max_tier: Option<Tier>,
    sandbox: Option<SandboxMode>,
    deny_read: Vec<PathBuf>,
}

/// Why an agent could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The id is not a plain name.
    #[error("agent id `{0}` is not a name (letters, digits, `-`, `_`)")]
    BadId(String),
    /// The id is `none`, which means no agent ([`Agent::NONE`]), and names no directory.
    #[error("agent id `none` is reserved: it means no agent (`--agent none`)")]
    Reserved,
    /// No such directory.
    #[error("no agent `{id}`: {} is not a directory", dir.display())]
    NotFound {
        /// The id.
        id: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// `agent.toml` does not parse.
    #[error("{}: {message}", path.display())]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong in it, with its position when known.
        message: String,
    },
}

impl Agent {
    /// The agent a model is served for when no agent is named ([`Agent::for_model`]).
    pub const DEFAULT: &str = "default";

    /// The id that names no agent (`--agent none`); no agent directory may have it.
    pub const NONE: &str = "none";

    /// Load agent `id` from `root` (`PACKS_AGENTS`, else `./agents`).
    pub fn load(root: &Path, id: &str) -> Result<Self, AgentError> {
        if id == Self::NONE {
            return Err(AgentError::Reserved);
        }
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(AgentError::BadId(id.to_owned()));
        }
        let dir = root.join(id);
        if !dir.is_dir() {
            return Err(AgentError::NotFound { id: id.to_owned(), dir });
        }
        let path = dir.join("agent.toml");
        let config: AgentConfig = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| {
                let at = e.span().map(|s| {
                    let line = text[..s.start].matches('\n').count() + 1;
                    format!("line {line}: ")
                });
                AgentError::BadConfig {
                    path: path.clone(),
                    message: format!("{}{}", at.unwrap_or_default(), e.message()),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AgentConfig::default(),
            Err(e) => return Err(AgentError::BadConfig { path, message: e.to_string() }),
        };
        let globs = |patterns: &[String]| -> Result<GlobSet, AgentError> {
            let mut b = GlobSetBuilder::new();
            for p in patterns {
                b.add(Glob::new(p).map_err(|e| AgentError::BadConfig { path: path.clone(), message: e.to_string() })?);
            }
            b.build().map_err(|e| AgentError::BadConfig { path: path.clone(), message: e.to_string() })
        };
        let allow = config.tools.as_deref().map(globs).transpose()?;
        let deny = globs(&config.deny)?;
        let ask = globs(&config.ask)?;
        let max_tier = config
            .max_tier
            .as_deref()
            .map(str::parse::<Tier>)
            .transpose()
            .map_err(|e| AgentError::BadConfig { path: path.clone(), message: e.to_string() })?;
        if let Some(bad) = config.pass_env.iter().find(|n| crate::environment::check_name(n).is_err()) {
            let why = crate::environment::check_name(bad).err().unwrap_or_default();
            return Err(AgentError::BadConfig { path, message: format!("`pass_env`: {why}") });
        }
        let sandbox = config
            .sandbox
            .as_deref()
            .map(str::parse::<SandboxMode>)
            .transpose()
            .map_err(|e| AgentError::BadConfig { path: path.clone(), message: format!("`sandbox`: {e}") })?;
        let home = crate::reads::home();
        let mut deny_read = Vec::new();
        for entry in &config.deny_read {
            let denied = crate::reads::expand(Path::new(entry), home.as_deref());
            if !denied.is_absolute() {
                let message = format!(
                    "`deny_read`: `{entry}` is neither an absolute path nor under `~/`{}",
                    if home.is_none() && entry.starts_with('~') { " (HOME is not set)" } else { "" }
                );
                return Err(AgentError::BadConfig { path, message });
            }
            deny_read.push(denied);
        }
        Ok(Self { id: id.to_owned(), dir, config, allow, deny, ask, max_tier, sandbox, deny_read })
    }

    /// The agent the operator named, if any: `id` loaded from `root`; no agent for `None` or
    /// [`Agent::NONE`]. The operator's own commands (`packs run`, `test`, `list`, `describe`,
    /// `help`) act for this agent: without `--agent` they can run any tool.
    pub fn named(root: &Path, id: Option<&str>) -> Result<Option<Self>, AgentError> {
        match id {
            None | Some(Self::NONE) => Ok(None),
            Some(id) => Self::load(root, id).map(Some),
        }
    }

    /// The agent a model is served for (`packs prompt`, `catalog`, `call`, `serve`, and what
    /// `packs lint` checks): the one named ([`Agent::named`]; [`Agent::NONE`] is none); when none
    /// is named, [`Agent::DEFAULT`] if `root` has a directory of that name, else no agent. One
    /// rule, so what a model is offered and what its calls may run come from one decision.
    pub fn for_model(root: &Path, id: Option<&str>) -> Result<Option<Self>, AgentError> {
        match id {
            None if root.join(Self::DEFAULT).is_dir() => Self::load(root, Self::DEFAULT).map(Some),
            id => Self::named(root, id),
        }
    }

    /// The paths `agent.toml` adds to what no confined tool reads (`deny_read`, `~/` expanded).
    pub fn denied_reads(&self) -> &[PathBuf] {
        &self.deny_read
    }

    /// The sandbox mode `agent.toml` sets, if it does.
    pub fn sandbox(&self) -> Option<SandboxMode> {
        self.sandbox
    }

    /// The agents root: `PACKS_AGENTS`, else `./agents`.
    pub fn root() -> PathBuf {
        std::env::var_os("PACKS_AGENTS").map_or_else(|| PathBuf::from(DEFAULT_AGENTS_DIR), PathBuf::from)
    }

    /// Whether the agent may use the tool `name` (its `tools` allow-list, then `deny`).
    pub fn allows(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.is_match(name)) && !self.deny.is_match(name)
    }

    /// Whether the agent can ever use `tool`: allowed by name and within `max_tier`. Only
    /// these are offered to a model (prompts, exports, `tools/list`).
    pub fn offers(&self, tool: &crate::tool::Tool) -> bool {
        self.allows(tool.name()) && self.max_tier.is_none_or(|max| tool.tier() <= max)
    }

    /// Whether calls of `name` always need approval (`ask`).
    pub fn asks(&self, name: &str) -> bool {
        self.ask.is_match(name)
    }

    /// The highest tier the agent may use.
    pub fn max_tier(&self) -> Option<Tier> {
        self.max_tier
    }

    /// The agent's pack directories, resolved against its directory.
    pub fn pack_dirs(&self) -> Vec<PathBuf> {
        self.config.packs.iter().map(|p| self.dir.join(p)).collect()
    }
}
