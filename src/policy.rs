//! A tool's execution policy: what it may do and how it is run.

use serde::{Deserialize, Serialize};

/// The keys of `policy`, for did-you-mean help.
pub(crate) const POLICY_KEYS: &[&str] =
    &["read_only", "requires_network", "timeout_secs", "confirm_before_run", "allowed_exit_codes", "max_output_bytes"];

/// Default `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Default `max_output_bytes` (1 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// The `policy` table of a manifest (or of an executable's describe JSON).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Policy {
    /// The tool does not change anything.
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
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            read_only: true,
            requires_network: false,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            confirm_before_run: false,
            allowed_exit_codes: vec![0],
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
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

    /// Whether `code` counts as success.
    pub fn allows_exit(&self, code: i32) -> bool {
        self.allowed_exit_codes.contains(&code)
    }
}
