//! The `tests` a manifest carries: arguments, context, and what to expect.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Keys of one test, for did-you-mean help.
pub(crate) const TEST_KEYS: &[&str] = &["name", "args", "context", "dry_run", "expect"];
/// Keys of `expect`.
pub(crate) const EXPECT_KEYS: &[&str] =
    &["exit_code", "ok", "stdout_contains", "stdout_matches", "output_equals", "error", "argv"];

/// One entry of a manifest's `tests`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct ToolTest {
    /// A label (default: its position, `#1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The call's arguments.
    pub args: Map<String, Value>,
    /// Context values (`url`, `cwd`, ...).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub context: IndexMap<String, String>,
    /// Plan only; compare `expect.argv` and run nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// What must hold.
    pub expect: Expect,
}

/// What a test expects. Every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct Expect {
    /// The tool's exit code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The result's `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Text the output contains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_contains: Option<String>,
    /// A regular expression the output matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_matches: Option<String>,
    /// The exact output (trailing whitespace ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_equals: Option<String>,
    /// An error kind (`validation`, `not_found`, `permission_denied`...) or text the error contains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `dry_run`: the exact argv (secrets as `***`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
}
