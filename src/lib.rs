//! packs: declarative tool manifests turned into safe, self-describing tools.
//!
//! Three kinds of tool become one [`Tool`]: a manifest (`*.tool.json` / `*.tool.toml`),
//! an executable that answers `--describe`, and a [`NativeTool`] a Rust program
//! registers. A [`Catalog`] discovers the first two over pack directories and takes
//! the third by [`Catalog::register`]. Every call goes through one pipeline, [`Call`]:
//! lookup, the rules (tiers, agent, approval), arguments and validation, a plan rendered
//! without any shell, the run, output shaping, secret masking and the audit log.
//!
//! ```no_run
//! use packs::{Call, Catalog, Context, DenyAll, SearchPath};
//! let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
//! let context = Context::new();
//! // Calls that need a person's approval are denied by `DenyAll`; implement `Approver` to ask.
//! let result = Call::new("disk_usage", serde_json::json!({"path": "."}))
//!     .context(&context)
//!     .approver(&DenyAll)
//!     .run(&catalog);
//! ```
//!
//! docs/LIBRARY.md walks through a front-end: loading, native tools, approval, status
//! and results.

// Without the command line, the helpers only its subcommands and the server use (a
// catalog's snapshot, the signal handlers, the interrupt's kill_all...) are unused: the
// full build (`cargo clippy --all-targets -- -D warnings`) is where dead code is an error.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]

mod agent;
mod argv;
#[cfg(feature = "async")]
mod asynchronous;
mod audit;
mod call;
pub mod calls;
mod catalog;
#[cfg(feature = "cli")]
mod cli;
mod code;
#[cfg(feature = "convert")]
mod convert;
mod describe;
mod describe_cache;
mod descriptors;
mod environment;
pub mod formats;
mod grants;
mod help;
mod image;
#[cfg(feature = "lint")]
pub mod lint;
// Public through `lock` (its re-export) when that feature is on.
#[cfg_attr(not(feature = "lock"), allow(unreachable_pub))]
mod digest;
#[cfg(feature = "lock")]
pub mod lock;
mod manifest;
#[cfg(feature = "mcp")]
pub mod mcp;
mod names;
mod native;
mod notices;
mod operands;
mod orphans;
mod output;
mod policy;
#[cfg(feature = "mcp")]
mod pool;
mod programs;
pub mod prompt;
mod reads;
mod runner;
mod sandbox;
#[cfg(feature = "convert")]
mod scaffold;
mod seal;
#[cfg(feature = "cli")]
mod session;
#[cfg(feature = "skills")]
mod skill;
#[cfg(feature = "mcp")]
mod snapshot;
mod source;
#[cfg(target_os = "linux")]
mod spawn;
mod template;
mod testing;
mod tool;
mod tool_test;
mod visible;

pub use agent::{Agent, AgentError};
#[cfg(feature = "async")]
pub use asynchronous::AsyncCall;
pub use audit::{AuditLog, Entry as AuditEntry};
pub use call::{
    Answers, ApprovalReason, ApprovalRequest, ApproveAll, Approver, ArgumentsError, Call, Context, DEFAULT_TICKET_TTL,
    Decision, Deferred, Denial, DenyAll, Failure, FieldError, KeyFileError, Pending, Phase, Planned, Status,
    StdinPreview, TicketError, Tickets, ToolError, ToolResult, UnknownContextKey,
};
pub use catalog::{Catalog, LookupError, SearchPath, Shadowed};
pub use describe::Describe;
pub use describe_cache::DescribeCache;
pub use help::page as help_page;
pub use names::UnknownName;
pub use native::{CancelToken, NativeCall, NativeError, NativeOutput, NativeTool, Progress};
pub use output::{OutputFormat, OutputSpec};
pub use policy::{Policy, Tier, UnknownTier};
pub use runner::{Process, SpawnError, Stream};
pub use sandbox::{Enforcement, SandboxMode, Support as SandboxSupport, Unenforceable};
pub use source::{Diagnostic, Severity};
pub use testing::{Outcome as TestOutcome, run_tests};
pub use tool::{NativeToolError, Tool, ToolKind};

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

/// The `packs` command line (the binary's `main`): parses the process's arguments,
/// runs the subcommand and returns the exit code.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub fn cli_main() -> i32 {
    cli::main()
}
