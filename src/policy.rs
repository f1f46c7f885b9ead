//! A tool's execution policy: what it may do and how it is run.

use serde::{Deserialize, Serialize};

/// The keys of `policy`, for did-you-mean help.
pub(crate) const POLICY_KEYS: &[&str] = &[
    "tier",
    "env_passthrough",
    "read_only",
    "requires_network",
    "timeout_secs",
    "confirm_before_run",
    "allowed_exit_codes",
    "max_output_bytes",
    "writable",
    "reads_credentials",
    "readable",
    "unix_sockets",
    "max_memory_bytes",
    "max_file_bytes",
    "max_cpu_secs",
];

/// Default `timeout_secs`.
pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Default `max_output_bytes` (1 MiB).
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Permission tiers, ordered from least to most trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Changes nothing.
    ReadOnly,
    /// Changes only files under the workspace, through confined path parameters.
    Workspace,
    /// Network access or effects packs cannot confine.
    System,
    /// A person approves each call.
    Elevated,
}

impl Tier {
    /// `read_only`, `workspace`, `system`, `elevated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Workspace => "workspace",
            Self::System => "system",
            Self::Elevated => "elevated",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tier name that is none of `read_only`, `workspace`, `system`, `elevated`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier `{0}`; tiers are read_only, workspace, system, elevated")]
pub struct UnknownTier(pub String);

impl std::str::FromStr for Tier {
    type Err = UnknownTier;
    fn from_str(s: &str) -> Result<Self, UnknownTier> {
        match s {
            "read_only" => Ok(Self::ReadOnly),
            "workspace" => Ok(Self::Workspace),
            "system" => Ok(Self::System),
            "elevated" => Ok(Self::Elevated),
            other => Err(UnknownTier(other.to_owned())),
        }
    }
}

/// The `policy` table of a manifest (or of an executable's describe JSON).
///
/// A native tool builds one from [`Policy::default`] and the `with_` methods
/// (`Policy::default().with_tier(Tier::ReadOnly)`); new fields will come, so it is
/// `#[non_exhaustive]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Policy {
    /// The permission tier, when stated; otherwise derived (see [`Policy::tier`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Names of packs' environment variables passed to the tool (beyond the minimal set).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_passthrough: Vec<String>,
    /// The tool does not change anything.
    #[serde(deserialize_with = "stated_read_only")]
    pub read_only: bool,
    /// The tool needs the network.
    pub requires_network: bool,
    /// Seconds before the tool's whole process group is killed.
    pub timeout_secs: u64,
    /// A person must approve each call.
    pub confirm_before_run: bool,
    /// Exit codes that count as success.
    pub allowed_exit_codes: Vec<i32>,
    /// Most bytes of stdout kept; the rest is drained and counted.
    pub max_output_bytes: u64,
    /// More places a confined tool may write (absolute directories; templates may read only
    /// `{{env.NAME}}`, the operator's environment): a cache such as `{{env.HOME}}/.npm`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// The tool may read the credential stores every other confined tool is kept from
    /// (`~/.ssh`, `~/.aws`...: docs/SANDBOX.md); a warning in `packs lint`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reads_credentials: bool,
    /// Reads narrowed to these places (absolute; templates may read only `{{env.NAME}}` and
    /// `{{workspace}}`), the tool's writable places and TMPDIR, and what a program needs to
    /// start (docs/SANDBOX.md lists them); absent: reads are not narrowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readable: Option<Vec<String>>,
    /// The tool may create Unix-domain sockets (the default); `false`: `socket(AF_UNIX)` is
    /// refused (seccomp), so it reaches no local daemon, by path or abstract name.
    #[serde(skip_serializing_if = "is_true")]
    pub unix_sockets: bool,
    /// Most address space each of the tool's processes may map (`RLIMIT_AS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    /// Largest file a tool's process may write (`RLIMIT_FSIZE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
    /// CPU seconds each of the tool's processes may use (`RLIMIT_CPU`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_secs: Option<u64>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            tier: None,
            env_passthrough: Vec::new(),
            read_only: true,
            requires_network: false,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            confirm_before_run: false,
            allowed_exit_codes: vec![0],
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            writable: Vec::new(),
            reads_credentials: false,
            readable: None,
            unix_sockets: true,
            max_memory_bytes: None,
            max_file_bytes: None,
            max_cpu_secs: None,
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_true(b: &bool) -> bool {
    *b
}

/// Builders: each sets one field (the field's documentation says what it means).
impl Policy {
    /// With the permission tier (`tier`).
    #[must_use]
    pub fn with_tier(mut self, value: Tier) -> Self {
        self.tier = Some(value);
        self
    }

    /// With names of packs' environment variables passed to the tool (`env_passthrough`).
    #[must_use]
    pub fn with_env_passthrough(mut self, value: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.env_passthrough = value.into_iter().map(Into::into).collect();
        self
    }

    /// With whether the tool changes nothing (`read_only`).
    #[must_use]
    pub fn with_read_only(mut self, value: bool) -> Self {
        self.read_only = value;
        self
    }

    /// With whether the tool needs the network (`requires_network`).
    #[must_use]
    pub fn with_requires_network(mut self, value: bool) -> Self {
        self.requires_network = value;
        self
    }

    /// With seconds before the tool's process group is killed (`timeout_secs`).
    #[must_use]
    pub fn with_timeout_secs(mut self, value: u64) -> Self {
        self.timeout_secs = value;
        self
    }

    /// With whether a person must approve each call (`confirm_before_run`).
    #[must_use]
    pub fn with_confirm_before_run(mut self, value: bool) -> Self {
        self.confirm_before_run = value;
        self
    }

    /// With the exit codes that count as success (`allowed_exit_codes`).
    #[must_use]
    pub fn with_allowed_exit_codes(mut self, value: impl IntoIterator<Item = i32>) -> Self {
        self.allowed_exit_codes = value.into_iter().collect();
        self
    }

    /// With the most bytes of stdout kept (`max_output_bytes`).
    #[must_use]
    pub fn with_max_output_bytes(mut self, value: u64) -> Self {
        self.max_output_bytes = value;
        self
    }

    /// With more places a confined tool may write (`writable`).
    #[must_use]
    pub fn with_writable(mut self, value: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.writable = value.into_iter().map(Into::into).collect();
        self
    }

    /// With whether the tool may read the credential stores (`reads_credentials`).
    #[must_use]
    pub fn with_reads_credentials(mut self, value: bool) -> Self {
        self.reads_credentials = value;
        self
    }

    /// With reads narrowed to these places (`readable`).
    #[must_use]
    pub fn with_readable(mut self, value: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.readable = Some(value.into_iter().map(Into::into).collect());
        self
    }

    /// With whether the tool may create Unix-domain sockets (`unix_sockets`).
    #[must_use]
    pub fn with_unix_sockets(mut self, value: bool) -> Self {
        self.unix_sockets = value;
        self
    }

    /// With the most address space each process may map (`max_memory_bytes`).
    #[must_use]
    pub fn with_max_memory_bytes(mut self, value: u64) -> Self {
        self.max_memory_bytes = Some(value);
        self
    }

    /// With the largest file a process may write (`max_file_bytes`).
    #[must_use]
    pub fn with_max_file_bytes(mut self, value: u64) -> Self {
        self.max_file_bytes = Some(value);
        self
    }

    /// With the CPU seconds each process may use (`max_cpu_secs`).
    #[must_use]
    pub fn with_max_cpu_secs(mut self, value: u64) -> Self {
        self.max_cpu_secs = Some(value);
        self
    }
}

/// A resource limit a policy may set on a tool's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Address space (`RLIMIT_AS`).
    Memory,
    /// Largest file written (`RLIMIT_FSIZE`).
    FileSize,
    /// CPU seconds (`RLIMIT_CPU`).
    CpuSeconds,
}

impl Policy {
    /// The resource limits the policy sets (resource, value), for the runner.
    pub(crate) fn limits(&self) -> Vec<(Limit, u64)> {
        [
            (Limit::Memory, self.max_memory_bytes),
            (Limit::FileSize, self.max_file_bytes),
            (Limit::CpuSeconds, self.max_cpu_secs),
        ]
        .into_iter()
        .filter_map(|(l, v)| Some((l, v?)))
        .collect()
    }
}

impl Policy {
    /// The default policy of an executable tool: like a manifest's, but not read-only
    /// (packs cannot see what an executable does).
    pub fn executable_default() -> Self {
        Self { read_only: false, ..Self::default() }
    }

    /// The timeout as a duration (0 means the default, never "no timeout").
    pub fn timeout(&self) -> std::time::Duration {
        let secs = if self.timeout_secs == 0 { DEFAULT_TIMEOUT_SECS } else { self.timeout_secs };
        std::time::Duration::from_secs(secs)
    }

    /// The tier: as stated, else derived. `confirm_before_run` → elevated; `read_only` →
    /// read_only; no network and at least one `format: path` parameter (confined to the
    /// workspace) → workspace; anything else → system.
    pub fn tier(&self, has_path_parameter: bool) -> Tier {
        if let Some(t) = self.tier {
            t
        } else if self.confirm_before_run {
            Tier::Elevated
        } else if self.read_only {
            Tier::ReadOnly
        } else if !self.requires_network && has_path_parameter {
            Tier::Workspace
        } else {
            Tier::System
        }
    }

    /// Whether `code` counts as success.
    pub fn allows_exit(&self, code: i32) -> bool {
        self.allowed_exit_codes.contains(&code)
    }
}

thread_local! {
    /// Set when a policy being deserialized on this thread states `read_only` (the
    /// default, `true` for a manifest, is no statement: MCP clients must not be told a
    /// tool is read-only because nobody said otherwise).
    static READ_ONLY_STATED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn stated_read_only<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    READ_ONLY_STATED.with(|s| s.set(true));
    bool::deserialize(deserializer)
}

/// Run `parse` and say whether the policy it deserialized stated `read_only`.
pub(crate) fn noting_read_only<T>(parse: impl FnOnce() -> T) -> (T, bool) {
    READ_ONLY_STATED.with(|s| s.set(false));
    let parsed = parse();
    (parsed, READ_ONLY_STATED.with(std::cell::Cell::get))
}
