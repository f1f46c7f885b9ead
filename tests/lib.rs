//! The integration suite: one test binary driving the real `packs` executable.
//!
//! Every test runs `packs` as a child process in its own scratch directory,
//! with explicit `--packs` directories (or `PACKS_PATH` set in the child's
//! environment), so the developer's environment never leaks in.
//!
//! The modules live in `tests/suite/`: Cargo builds every `tests/*.rs` file as
//! a test binary of its own, and one binary links (and runs) much faster.

#[path = "suite/approval.rs"]
mod approval;
#[path = "suite/architecture.rs"]
mod architecture;
#[path = "suite/argv_rules.rs"]
mod argv_rules;
#[path = "suite/authoring.rs"]
mod authoring;
#[path = "suite/catalog.rs"]
mod catalog;
#[path = "suite/cli.rs"]
mod cli;
#[path = "suite/common.rs"]
mod common;
#[path = "suite/defer.rs"]
mod defer;
#[path = "suite/docs.rs"]
mod docs;
#[path = "suite/exec.rs"]
mod exec;
#[path = "suite/executables.rs"]
mod executables;
#[path = "suite/formats.rs"]
mod formats;
#[path = "suite/frontends.rs"]
mod frontends;
#[path = "suite/fuzz.rs"]
mod fuzz;
#[path = "suite/http.rs"]
mod http;
#[path = "suite/injection.rs"]
mod injection;
#[path = "suite/library.rs"]
mod library;
#[path = "suite/lint.rs"]
mod lint;
#[path = "suite/loader_variables.rs"]
mod loader_variables;
#[path = "suite/lock.rs"]
mod lock;
#[path = "suite/name_index.rs"]
mod name_index;
#[path = "suite/native.rs"]
mod native;
#[path = "suite/network.rs"]
mod network;
#[path = "suite/output.rs"]
mod output;
#[path = "suite/pipeline.rs"]
mod pipeline;
#[path = "suite/reads.rs"]
mod reads;
#[path = "suite/runner_limits.rs"]
mod runner_limits;
#[path = "suite/safety.rs"]
mod safety;
#[path = "suite/sandbox.rs"]
mod sandbox;
#[path = "suite/schemas.rs"]
mod schemas;
#[path = "suite/serve.rs"]
mod serve;
#[path = "suite/session.rs"]
mod session;
#[path = "suite/snapshot.rs"]
mod snapshot;

#[path = "suite/stdin.rs"]
mod stdin;
#[path = "suite/validation.rs"]
mod validation;
#[path = "suite/visible.rs"]
mod visible;
#[path = "suite/wrappers.rs"]
mod wrappers;
