//! `packs run` and `packs exec`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::{args, exit, print, print_diagnostics};
use crate::catalog::Catalog;
use crate::dispatch::{self, Context, Plan, ToolError, ToolResult};
use crate::tool::Tool;

#[derive(clap::Args, Debug)]
pub(super) struct RunArgs {
    /// The tool's name
    name: String,
    /// The arguments as a JSON object, e.g. '{"path": "."}'
    #[arg(value_name = "JSON")]
    input: Option<String>,
    /// Set one argument (typed by the tool's schema; repeat for lists)
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    args: Vec<String>,
    /// Set a context value (url, selection, clipboard, file, cwd, transcript)
    #[arg(long = "context", value_name = "KEY=VALUE")]
    context: Vec<String>,
    /// Print the whole result (or error) as JSON
    #[arg(long)]
    json: bool,
    /// Show what would run (argv, cwd, env) and run nothing
    #[arg(long)]
    dry_run: bool,
}

impl RunArgs {
    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

#[derive(clap::Args, Debug)]
pub(super) struct ExecArgs {
    /// A manifest (or --describe executable) file
    file: PathBuf,
    /// Print the tool's --describe JSON
    #[arg(long, conflicts_with = "input")]
    describe: bool,
    /// The arguments as a JSON object
    #[arg(value_name = "JSON", allow_hyphen_values = true)]
    input: Option<String>,
}

/// Exit code for a result.
fn result_code(r: &ToolResult) -> i32 {
    if r.timed_out {
        exit::TIMEOUT
    } else if r.ok {
        exit::OK
    } else {
        exit::TOOL_FAILED
    }
}

/// Exit code for an error before or while starting the tool.
fn error_code(e: &ToolError) -> i32 {
    match e {
        ToolError::Spawn { .. } => exit::TOOL_FAILED,
        _ => exit::USAGE,
    }
}

pub(super) fn run(catalog: &Catalog, a: &RunArgs) -> Result<i32> {
    let outcome = (|| -> Result<std::result::Result<Outcome, ToolError>> {
        let tool = match catalog.get(&a.name) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e.into())),
        };
        let raw = args::arguments(tool, a.input.as_deref(), &a.args)?;
        let context = args::context(&a.context)?;
        Ok(plan_and_run(tool, raw, &context, a.dry_run))
    })()?;
    match outcome {
        Err(e) => {
            if a.json {
                print(&format!("{:#}\n", e.to_json()))?;
            } else {
                eprintln!("error: {e}");
            }
            Ok(error_code(&e))
        }
        Ok(Outcome::DryRun(inv)) => {
            print(&dry_run_text(&inv, a.json))?;
            Ok(exit::OK)
        }
        Ok(Outcome::Ran(r)) => {
            if a.json {
                print(&format!("{}\n", serde_json::to_string_pretty(&r)?))?;
            } else {
                let mut out = r.output.clone();
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                print(&out)?;
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(r.stderr.as_bytes());
                if let Some(e) = &r.error {
                    let _ = writeln!(err, "error: tool `{}`: {e}", r.tool);
                }
            }
            Ok(result_code(&r))
        }
    }
}

enum Outcome {
    DryRun(Plan),
    Ran(ToolResult),
}

fn plan_and_run(tool: &Tool, raw: Value, context: &Context, dry_run: bool) -> Result<Outcome, ToolError> {
    let prepared = dispatch::prepare(tool, raw, context)?;
    let plan = dispatch::plan(tool, &prepared, context)?;
    if dry_run {
        return Ok(Outcome::DryRun(plan));
    }
    dispatch::execute(tool, &plan, context, |_, _| {}).map(Outcome::Ran)
}

/// The command as a person would type it (quoted for reading, never for running).
fn quoted(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shlex::try_quote(a).map_or_else(|_| format!("{a:?}"), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dry_run_text(plan: &Plan, as_json: bool) -> String {
    let masked: Vec<String> = plan.invocation.argv.iter().map(|a| plan.mask(a)).collect();
    let env: Vec<(String, String)> = plan.invocation.env.iter().map(|(k, v)| (k.clone(), plan.mask(v))).collect();
    let inv = &plan.invocation;
    if as_json {
        let env: serde_json::Map<String, Value> =
            env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let v = json!({
            "argv": masked,
            "command": quoted(&masked),
            "cwd": inv.cwd,
            "env": env,
            "timeout_secs": inv.timeout.as_secs(),
            "max_output_bytes": inv.max_output_bytes,
        });
        return format!("{v:#}\n");
    }
    let mut s = format!("{}\n", quoted(&masked));
    if let Some(cwd) = &inv.cwd {
        s.push_str(&format!("  cwd: {}\n", cwd.display()));
    }
    for (k, v) in &env {
        s.push_str(&format!(
            "  env: {k}={}\n",
            shlex::try_quote(v).map_or_else(|_| format!("{v:?}"), |q| q.into_owned())
        ));
    }
    s.push_str(&format!("  timeout: {}s\n", inv.timeout.as_secs()));
    s
}

pub(super) fn exec(a: &ExecArgs) -> Result<i32> {
    let (tool, warnings) = match Catalog::load_file(&a.file) {
        Ok(loaded) => loaded,
        Err(errors) => {
            print_diagnostics(&errors);
            bail!("{} is not a usable tool", a.file.display());
        }
    };
    print_diagnostics(&warnings);
    if a.describe {
        print(&format!("{}\n", serde_json::to_string_pretty(tool.describe())?))?;
        return Ok(exit::OK);
    }
    let Some(input) = &a.input else {
        bail!("give the arguments as one JSON argument, or --describe");
    };
    let raw = Value::String(input.clone());
    match dispatch::call(&tool, raw, &Context::new(), |_, _| {}) {
        Ok(r) => {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(r.stderr.as_bytes());
            if let Some(e) = &r.error {
                let _ = writeln!(err, "error: {e}");
            }
            print(&r.output)?;
            Ok(if r.ok { 0 } else { 1 })
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}
