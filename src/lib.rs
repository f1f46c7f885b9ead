//! packs: declarative tool manifests turned into safe, self-describing tools.
//!
//! A tool is either a manifest (`*.tool.json` / `*.tool.toml`) or an executable
//! that answers `--describe`. Both become a [`Tool`]; a [`Catalog`] discovers
//! them over pack directories; [`dispatch`] validates a call, renders argv
//! without any shell, runs it and shapes the result.
//!
//! ```no_run
//! use packs::{Catalog, Context, DenyAll, SearchPath};
//! let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
//! let args = serde_json::json!({"path": "."});
//! // Calls that need a person's approval are denied by `DenyAll`; implement `Approver` to ask.
//! let result = packs::dispatch(&catalog, "disk_usage", args, &Context::new(), &DenyAll);
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod argv;
pub mod audit;
pub mod call;
pub mod calls;
pub mod catalog;
pub mod cli;
pub mod describe;
pub mod describe_cache;
pub mod environment;
pub mod formats;
pub mod help;
pub mod lint;
pub mod manifest;
pub mod mcp;
pub mod names;
pub mod native;
pub mod output;
pub mod policy;
pub mod prompt;
pub mod runner;
pub mod source;
pub mod template;
pub mod testing;
pub mod tool;
pub mod tool_test;

pub use call::{
    ApprovalReason, ApprovalRequest, ApproveAll, Approver, Call, Context, Decision, Denial, DenyAll, Failure,
    FieldError, Phase, Planned, Status, ToolError, ToolResult, UnknownContextKey,
};
pub use catalog::{Catalog, LookupError, SearchPath};
pub use describe::Describe;

/// Look up `name` in `catalog` and take the call through the whole pipeline: the
/// same as `Call::new(name, args).context(context).approver(approver).run(catalog)`.
pub fn dispatch(
    catalog: &Catalog,
    name: &str,
    args: serde_json::Value,
    context: &Context,
    approver: &dyn Approver,
) -> Result<ToolResult, ToolError> {
    Call::new(name, args).context(context).approver(approver).run(catalog)
}
pub use source::{Diagnostic, Severity};
pub use tool::{Tool, ToolKind};
