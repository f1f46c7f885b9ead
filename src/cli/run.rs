//! `packs run` and `packs exec`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::{args, exit, print, print_diagnostics};
use crate::call::{
    ApprovalRequest, ApproveAll, Approver, Call, Context, Decision, Planned, Status, ToolError, ToolResult,
};
use crate::catalog::Catalog;
use crate::runner::Stream;
use crate::visible;

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
    /// Approve calls that need confirmation without asking (needed without a terminal)
    #[arg(short = 'y', long)]
    yes: bool,
    /// Print the tool's stdout and stderr as they arrive (raw, secrets masked), not the shaped output
    #[arg(long, conflicts_with_all = ["json", "dry_run"])]
    stream: bool,
}

impl RunArgs {
    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

#[derive(clap::Args, Debug)]
pub(super) struct ExecArgs {
    /// A manifest file (*.tool.json, *.tool.toml, or any name: JSON if it starts with `{`, else TOML)
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
pub(super) fn error_code(e: &ToolError) -> i32 {
    match e {
        ToolError::Spawn { .. } => exit::TOOL_FAILED,
        ToolError::PermissionDenied { .. } => exit::DENIED,
        _ => exit::USAGE,
    }
}

/// Asks on the terminal; without one (stdin or stderr not a terminal), denies.
pub(super) struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        use std::io::{BufRead, IsTerminal};
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            eprintln!("packs: no terminal to ask for approval on: denied (pass --yes to approve)");
            return false;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "packs: `{}` (tier {}) needs approval: {}", request.tool, request.tier, request.reason);
        let _ = writeln!(err, "  {}", request.command_line());
        if let Some(cwd) = &request.cwd {
            let _ = writeln!(err, "  in {}", visible::os_word(cwd.as_os_str()));
        }
        for (k, v) in &request.env {
            let _ = writeln!(err, "  env: {}={}", visible::prose(k), visible::word(v));
        }
        if let Some(stdin) = &request.stdin {
            let _ = writeln!(err, "  stdin: {}", stdin.summary());
        }
        let _ = write!(err, "Run it? [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() {
            return false;
        }
        matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES")
    }
}

/// A file named for `name` (`name.tool.json`, `name.tool.toml`, an executable `name`) that
/// failed to load: the likely reason a tool of that name is not found.
fn broken_file_named<'c>(catalog: &'c Catalog, name: &str) -> Option<&'c std::path::Path> {
    catalog
        .diagnostics
        .iter()
        .filter(|d| d.severity == crate::source::Severity::Error)
        .map(|d| d.file.as_path())
        .find(|f| f.file_name().and_then(|n| n.to_str()).and_then(|n| n.split('.').next()) == Some(name))
}

/// Run (or dry-run) one call; `no_tool_hint` is printed after a not-found error when the
/// search found no tool at all (where packs looked, and how to add one).
pub(super) fn run(catalog: &Catalog, a: &RunArgs, base: &Context, no_tool_hint: Option<&str>) -> Result<i32> {
    // A bad --context is the caller's mistake, like a bad argument: the pipeline reports
    // (and records) it once it has found the tool.
    let (context, context_error) = match args::context(&a.context, base) {
        Ok(context) => (context, None),
        Err(e) => (base.clone(), Some(format!("{e:#}"))),
    };
    let build = |tool: &crate::tool::Tool| match context_error {
        Some(e) => Err(e.into()),
        None => args::arguments(tool, a.input.as_deref(), &a.args).map_err(|e| format!("{e:#}").into()),
    };
    let approver: &dyn Approver = if a.yes { &ApproveAll } else { &TerminalApprover };
    let stream = |status: Status<'_>| {
        if let Status::Output { stream, chunk } = status {
            // Chunks go out as they arrive; a closed pipe is not worth a crash.
            let _ = match stream {
                Stream::Stdout => std::io::stdout().lock().write_all(chunk).and_then(|()| std::io::stdout().flush()),
                Stream::Stderr => std::io::stderr().lock().write_all(chunk),
            };
        }
    };
    let mut call = Call::with_arguments_from(&a.name, build).context(&context).approver(approver);
    if a.stream {
        call = call.on_status(&stream);
    }
    let outcome = if a.dry_run { call.dry_run(catalog).map(Err) } else { call.run(catalog).map(Ok) };
    match outcome {
        Err(e) => {
            if a.json {
                print(&format!("{:#}\n", e.to_json()))?;
            } else {
                eprintln!("error: {e}");
                if let ToolError::NotFound(crate::catalog::LookupError::NotFound { name, .. }) = &e {
                    match no_tool_hint {
                        Some(hint) => eprintln!("{hint}"),
                        None => {
                            if let Some(file) = broken_file_named(catalog, name) {
                                let file = file.display();
                                eprintln!(
                                    "note: {file} failed to load (above) and may declare it; `packs lint {file}` shows every problem"
                                );
                            }
                        }
                    }
                }
            }
            Ok(error_code(&e))
        }
        Ok(Err(planned)) => {
            print(&dry_run_text(&planned, a.json))?;
            Ok(exit::OK)
        }
        Ok(Ok(r)) => {
            if a.json {
                let mut v = serde_json::to_value(&r)?;
                if !r.ok {
                    // The structured error too: kind execution or timeout, and whether to retry.
                    v["failure"] = r.error_json()["error"].clone();
                }
                print(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
            } else if a.stream {
                // Everything was printed as it arrived.
                if let Some(e) = &r.error {
                    eprintln!("error: tool `{}`: {e}", r.tool);
                }
            } else {
                let mut out = r.output.clone();
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                print(&out)?;
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(r.stderr.as_bytes());
                if r.truncated {
                    let cap = catalog.get(&r.tool).map(|t| t.policy().max_output_bytes).unwrap_or_default();
                    let _ = writeln!(err, "warning: the output was cut at {cap} bytes (policy.max_output_bytes)");
                }
                if let Some(e) = &r.error {
                    let _ = writeln!(err, "error: tool `{}`: {e}", r.tool);
                }
            }
            Ok(result_code(&r))
        }
    }
}

fn dry_run_text(planned: &Planned, as_json: bool) -> String {
    let (approval, denial) = match &planned.decision {
        Decision::Ask(r) => (Some(r.to_string()), None),
        Decision::Deny(r) => (None, Some(r.to_string())),
        _ => (None, None),
    };
    let masked = &planned.argv;
    let env = &planned.env;
    if as_json {
        let env: serde_json::Map<String, Value> =
            env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let v = json!({
            "argv": masked,
            // POSIX quoting, exact and safe to paste into any `sh` (JSON escapes the rest).
            "command": shlex::try_join(masked.iter().map(String::as_str)).unwrap_or_else(|_| planned.command_line()),
            "cwd": planned.cwd.as_ref().map(|c| c.to_string_lossy()),
            "env": env,
            "stdin": planned.stdin.as_ref().map(|s| json!({"bytes": s.bytes, "preview": s.text, "cut": s.cut})),
            "timeout_secs": planned.timeout.as_secs(),
            "max_output_bytes": planned.max_output_bytes,
            "tier": planned.tier.as_str(),
            "sandbox": planned.sandbox.as_ref().map(|e| json!({"level": e.level(), "enforced": e.describe()})),
            "needs_approval": approval,
            "denied": denial,
        });
        return format!("{v:#}\n");
    }
    let mut s = format!("{}\n", planned.command_line());
    if let Some(cwd) = &planned.cwd {
        s.push_str(&format!("  cwd: {}\n", visible::os_word(cwd.as_os_str())));
    }
    for (k, v) in env {
        s.push_str(&format!("  env: {}={}\n", visible::prose(k), visible::word(v)));
    }
    if let Some(stdin) = &planned.stdin {
        s.push_str(&format!("  stdin: {}\n", stdin.summary()));
    }
    s.push_str(&format!("  timeout: {}s\n", planned.timeout.as_secs()));
    s.push_str(&format!("  tier: {}\n", planned.tier));
    if let Some(e) = &planned.sandbox {
        s.push_str(&format!("  sandbox: {}\n", e.describe()));
    }
    if let Some(reason) = approval {
        s.push_str(&format!("  needs approval: {reason}\n"));
    }
    if let Some(reason) = denial {
        s.push_str(&format!("  would be denied: {reason}\n"));
    }
    s
}

/// `packs exec FILE`: the session applies as to `packs run` (agent, workspace, sandbox, mode,
/// pass-env, secrets, `--locked`, the audit log), with one named override: calls are approved,
/// since the program running the file as an executable decides approval (the describe JSON
/// carries `confirm_before_run` for it).
pub(super) fn exec(a: &ExecArgs, session: &crate::session::Session) -> Result<i32> {
    let (tool, warnings) = match Catalog::load_file(&a.file) {
        Ok(loaded) => loaded,
        Err(errors) => {
            print_diagnostics(&errors);
            bail!("{} is not a usable tool", a.file.display());
        }
    };
    print_diagnostics(&warnings);
    let name = tool.name().to_owned();
    let mut catalog = Catalog::of_tool(tool);
    if session.locked {
        let (lockfile, verify) = session.lockfile();
        let lock = super::lock::LockOptions { lockfile, verify };
        match super::lock::read_trusted(&lock) {
            Ok(l) => super::lock::enforce(&mut catalog, &l, true),
            Err(e) => bail!(e.context("--locked: every tool is refused")),
        }
    }
    if a.describe {
        let tool = catalog.get(&name)?;
        print(&format!("{}\n", serde_json::to_string_pretty(tool.describe())?))?;
        return Ok(exit::OK);
    }
    let Some(input) = &a.input else {
        bail!("give the arguments as one JSON argument, or --describe");
    };
    let outcome =
        Call::new(&name, Value::String(input.clone())).context(&session.context).approver(&ApproveAll).run(&catalog);
    if let Some(failure) = session.context.audit().and_then(crate::audit::AuditLog::take_failure) {
        let _ = writeln!(std::io::stderr().lock(), "warning: {failure}; the call is not in the log");
    }
    match outcome {
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
