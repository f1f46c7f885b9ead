//! packs: declarative tool manifests turned into safe, self-describing tools.
//!
//! A tool is either a manifest (`*.tool.json` / `*.tool.toml`) or an executable
//! that answers `--describe`. Both become a [`Tool`]; a [`Catalog`] discovers
//! them over pack directories; [`dispatch`] validates a call, renders argv
//! without any shell, runs it and shapes the result.
//!
//! ```no_run
//! use packs::{Catalog, Context, SearchPath};
//! let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
//! let result = packs::dispatch(&catalog, "disk_usage", serde_json::json!({"path": "."}), &Context::new());
//! ```
#![warn(missing_docs)]

pub mod argv;
pub mod catalog;
pub mod cli;
pub mod describe;
pub mod dispatch;
pub mod help;
pub mod manifest;
pub mod output;
pub mod policy;
pub mod runner;
pub mod source;
pub mod template;
pub mod tool;

pub use catalog::{Catalog, LookupError, SearchPath};
pub use describe::Describe;
pub use dispatch::{Context, ToolError, ToolResult, call, dispatch};
pub use source::{Diagnostic, Severity};
pub use tool::{Tool, ToolKind};
