//! The `packs` command line: clap definitions and one function per subcommand.

mod args;
mod call;
mod command_line;
mod convert;
mod lint;
mod list;
mod lock;
mod new;
mod prompt;
mod run;
mod sandbox;
mod serve;
mod signals;
mod test;

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::catalog::{Catalog, SearchPath};
use crate::formats::ExportFormat;
use crate::session::{self, Front, Key, Operator, Session, Source};
use crate::source::Diagnostic;
use serve::ServeArgs;

/// Exit codes of `packs run` (documented in docs/TOOL_INTERFACE.md).
pub(crate) mod exit {
    /// The tool ran and succeeded.
    pub(crate) const OK: i32 = 0;
    /// Not found, bad arguments, validation failure (or a usage error).
    pub(crate) const USAGE: i32 = 1;
    /// The tool ran and failed.
    pub(crate) const TOOL_FAILED: i32 = 2;
    /// The call needed approval and did not get it.
    pub(crate) const DENIED: i32 = 3;
    /// The tool timed out.
    pub(crate) const TIMEOUT: i32 = 124;
}

/// `--sandbox MODE`.
fn sandbox_mode(text: &str) -> Result<crate::sandbox::SandboxMode, String> {
    text.parse().map_err(|e: crate::names::UnknownName| e.to_string())
}

/// `--pass-env NAME`: a variable name.
fn pass_env_name(name: &str) -> Result<String, String> {
    crate::environment::check_name(name).map(|()| name.to_owned())
}

#[derive(Parser, Debug)]
#[command(
    name = "packs",
    version,
    about = "Declarative tool manifests as safe, self-describing tools for LLM agents",
    disable_help_subcommand = true,
    after_help = "Run `packs help COMMAND` for a command's help, `packs help NAME` (or `packs help --tool NAME`) for a tool's manual page.\n\n\
        Environment: PACKS_PATH (pack directories), PACKS_AGENT, PACKS_WORKSPACE, PACKS_LOG,\n\
        PACKS_CACHE_DIR (where executables' --describe answers, the name index and listing\n\
        snapshots are kept; empty: no cache)."
)]
struct Cli {
    /// When to colour the output: auto (on a terminal, unless NO_COLOR is set), always, never
    #[arg(long, value_name = "WHEN", global = true, value_enum, default_value = "auto")]
    color: ColorWhen,

    /// A pack directory to search (repeatable, in order; default: $PACKS_PATH, else ./packs)
    #[arg(long = "packs", value_name = "DIR", global = true)]
    packs: Vec<PathBuf>,

    /// Do not print warnings about the pack directories
    #[arg(short, long, global = true)]
    quiet: bool,

    /// Confine `format: path` parameters to this directory and run tools in it (default: the current directory)
    #[arg(long, value_name = "DIR", global = true, env = "PACKS_WORKSPACE")]
    workspace: Option<PathBuf>,

    /// Append one JSON line per call to this file (secrets masked)
    #[arg(long, value_name = "FILE", global = true, env = "PACKS_LOG")]
    log: Option<PathBuf>,

    /// Read `{{secret.NAME}}` values from this file of KEY=value lines (as well as the environment)
    #[arg(long, value_name = "FILE", global = true)]
    secrets_file: Option<PathBuf>,

    /// Pass this variable of packs' environment to every tool, when set (repeatable; not masked: use {{secret.NAME}} for credentials)
    #[arg(long = "pass-env", value_name = "NAME", global = true, value_parser = pass_env_name)]
    pass_env: Vec<String>,

    /// Kernel confinement of tools: enforce (refuse what cannot be confined), best-effort, off
    #[arg(long, value_name = "MODE", global = true, env = "PACKS_SANDBOX", value_parser = sandbox_mode)]
    sandbox: Option<crate::sandbox::SandboxMode>,

    /// Act as this agent (agents/ID, or $PACKS_AGENTS/ID): its pack directories and tool rules.
    /// Without it, prompt, catalog, call, serve and lint act for the agent `default` when it exists;
    /// `none`: no agent
    #[arg(long, value_name = "ID", global = true, env = "PACKS_AGENT")]
    agent: Option<String>,

    /// Refuse every tool that is not pinned in the lock file as it is (see `packs lock`)
    #[arg(long, global = true, env = "PACKS_LOCKED", value_parser = clap::builder::FalseyValueParser::new())]
    locked: bool,

    /// The lock file of `packs lock` and --locked
    #[arg(long, value_name = "FILE", global = true, env = "PACKS_LOCKFILE", default_value = crate::lock::DEFAULT_LOCKFILE)]
    lockfile: PathBuf,

    /// Trust the lock file only with a valid minisign signature (LOCKFILE.minisig) by this public key
    #[arg(long, value_name = "PUBKEY", global = true, env = "PACKS_LOCK_PUBKEY")]
    verify: Option<PathBuf>,

    /// Also keep PATH unreadable by read_only and workspace tools, beyond the default list of
    /// credential stores (repeatable; `~/` is $HOME; default: $PACKS_DENY_READ, paths separated by `:`)
    #[arg(long = "deny-read", value_name = "PATH", global = true)]
    deny_read: Vec<PathBuf>,

    /// Drop the default list of credential stores: only --deny-read's paths (and an agent's
    /// `deny_read`) stay unreadable
    #[arg(long, global = true, env = "PACKS_NO_DEFAULT_DENY_READ", value_parser = clap::builder::FalseyValueParser::new())]
    no_default_deny_read: bool,

    /// Offer and run only tools whose `modes` include MODE or `Global` (default: the agent's `mode`)
    #[arg(long, value_name = "MODE", global = true, env = "PACKS_MODE")]
    mode: Option<String>,

    #[command(subcommand)]
    command: command_line::Commands,
}

// Each command's own options are added when that command is parsed (clap's `defer`), not for
// every command at every start: a `packs run` no longer builds serve's, call's and the other
// commands' options (a third of a one-shot run's page faults went to clap's tree).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
enum Command {
    /// List the tools: name, kind, read-only, description, source file
    List {
        /// Print a JSON array instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Print a tool's --describe JSON
    Describe {
        /// The tool's name
        name: String,
        /// Print the tool's terse system-prompt entry instead
        #[arg(long)]
        prompt: bool,
    },
    /// Print the --describe JSON of every tool as an array
    Catalog {
        /// The format: describe JSON, or tool definitions for a model API
        #[arg(long, default_value = "describe", value_parser = choice(ExportFormat::ALL, ExportFormat::as_str, ExportFormat::help))]
        format: ExportFormat,
    },
    /// Run a tool
    Run(run::RunArgs),
    /// Read a model's response on stdin, run the tool calls in it, print the results for that API
    Call(call::CallArgs),
    /// Serve the tools over the Model Context Protocol (stdio, or Streamable HTTP with --http)
    Serve(Box<ServeArgs>),
    /// Print an agent's system prompt: soul.md, then its context modules (and tools)
    Prompt(prompt::PromptArgs),
    /// Show each setting in effect (sandbox, mode, agent, workspace...) and where it came from
    Session {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Show what this kernel can enforce for tools (Landlock, seccomp) and the sandbox mode
    Sandbox {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Check pack directories and manifests: every problem with file, line, column and a stable code
    Lint(lint::LintArgs),
    /// Make manifests from SKILL.md skills and OpenAI, Anthropic, Gemini or MCP tool definitions
    Convert(convert::ConvertArgs),
    /// Write a manifest skeleton (with a test) that lints clean
    New(new::NewArgs),
    /// Pin the tools in packs.lock, check them against it (--check), re-pin one after review (--update)
    Lock(lock::LockArgs),
    /// Run the tests manifests carry (`tests`), through the real pipeline
    ///
    /// The global options apply as to `packs run`, except that every call is approved (writing
    /// the test is the approval) and none is recorded: `--log` is refused.
    Test(test::TestArgs),
    /// Use a manifest file as an executable: `--describe`, or run it with a JSON argument
    ///
    /// The global options apply as to `packs run` (`--agent`, `--workspace`, `--sandbox`,
    /// `--mode`, `--pass-env`, `--secrets-file`, `--log`, `--locked`), except that calls are
    /// approved (the program running the file decides; its describe JSON carries
    /// `confirm_before_run`) and `--packs` is refused: the file is the one tool.
    Exec(run::ExecArgs),
    /// Show a command's help, or a tool's manual page (or this help without NAME)
    Help {
        /// A packs command (`run`, `lint`, …), else a tool's name
        name: Option<String>,
        /// NAME is a tool, even when a packs command has that name
        #[arg(long)]
        tool: bool,
    },
    /// Print a shell completion script for packs (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print packs' own man page (roff; `packs man | man -l -`)
    Man,
}

/// `--color`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set (CLICOLOR_FORCE forces it)
    Auto,
    /// Always
    Always,
    /// Never
    Never,
}

impl ColorWhen {
    /// The `--color` given on the command line (before parsing, so clap's own messages follow it).
    fn from_args() -> Self {
        let mut args = std::env::args_os().skip(1);
        let mut when = Self::Auto;
        while let Some(a) = args.next() {
            let value = match a.to_str() {
                Some("--") => break,
                Some("--color") => args.next().and_then(|v| v.into_string().ok()),
                Some(s) => s.strip_prefix("--color=").map(str::to_owned),
                None => None,
            };
            match value.as_deref() {
                Some("always") => when = Self::Always,
                Some("never") => when = Self::Never,
                Some("auto") => when = Self::Auto,
                _ => {}
            }
        }
        when
    }

    fn clap(self) -> clap::ColorChoice {
        match self {
            Self::Auto => clap::ColorChoice::Auto,
            Self::Always => clap::ColorChoice::Always,
            Self::Never => clap::ColorChoice::Never,
        }
    }

    /// Whether to colour text written to stdout: `always`, `never`, or for `auto` a
    /// terminal, unless NO_COLOR is set to anything but empty (<https://no-color.org>);
    /// CLICOLOR_FORCE (not empty, not `0`) colours a pipe too.
    fn stdout(self) -> bool {
        use std::io::IsTerminal;
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) => false,
            Self::Auto => set("CLICOLOR_FORCE") || std::io::stdout().is_terminal(),
        }
    }
}

/// Run the CLI with the process's arguments; returns the exit code.
pub(crate) fn main() -> i32 {
    use clap::CommandFactory;
    let (cli, matches) = match command_line::parse(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return code;
        }
    };
    // `serve --http` shuts down gracefully on a signal instead (finishing calls in flight).
    let http = matches!(&cli.command.0, Command::Serve(args) if args.http.is_some());
    if matches!(
        cli.command.0,
        Command::Run(_) | Command::Call(_) | Command::Serve(_) | Command::Exec(_) | Command::Test(_)
    ) {
        if !http {
            signals::end_tools_on_interrupt();
        }
        // What a tool leaves outside its process group becomes packs' to end (Linux).
        crate::orphans::adopt();
    }
    if matches!(cli.command.0, Command::Run(_) | Command::Exec(_)) {
        crate::sandbox::one_call_per_process();
    }
    // The operator's configuration, resolved once; a flag this command cannot honour is refused.
    let operator = cli.operator(&matches);
    let front = cli.command.0.front();
    if let Err(e) = front.check(&operator) {
        report(&e.into());
        return exit::USAGE;
    }
    let result = match cli.command.0 {
        Command::Exec(args) => match open_session(operator, &front) {
            Ok(session) => {
                if !cli.quiet {
                    warn_best_effort(&session.context);
                }
                run::exec(&args, &session)
            }
            Err(code) => return code,
        },
        Command::Lint(args) => Ok(lint::lint(&args, &cli.packs, cli.agent.as_deref(), cli.color.stdout())),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "packs", &mut out);
            print(&String::from_utf8_lossy(&out)).map(|()| exit::OK)
        }
        Command::Man => {
            let mut out = Vec::new();
            match man_page(&mut out) {
                Ok(()) => print(&String::from_utf8_lossy(&out)).map(|()| exit::OK),
                Err(e) => Err(e.into()),
            }
        }
        Command::Help { name: Some(name), tool: false } if is_subcommand(&name) => {
            let mut cmd = Cli::command();
            cmd.build();
            match cmd.find_subcommand_mut(&name) {
                Some(sub) => {
                    let help = sub.render_long_help();
                    let text = if cli.color.stdout() { help.ansi().to_string() } else { help.to_string() };
                    print(&text).map(|()| exit::OK)
                }
                None => Ok(exit::OK),
            }
        }
        Command::New(args) => new::new(&args),
        Command::Convert(args) => convert::convert(&args),
        Command::Lock(args) => {
            let options = lock::LockOptions { lockfile: &cli.lockfile, verify: cli.verify.as_deref() };
            lock::run(&args, &cli.packs, &options, cli.quiet)
        }
        Command::Help { name: None, .. } => {
            let _ = Cli::command().color(cli.color.clap()).print_help();
            Ok(exit::OK)
        }
        ref command => {
            let session = match open_session(operator, &front) {
                Ok(session) => session,
                Err(code) => return code,
            };
            let agent = &session.agent;
            let dirs = session.dirs.clone();
            let runs_tools =
                matches!(command, Command::Run(_) | Command::Call(_) | Command::Serve(_) | Command::Test(_));
            if runs_tools && !cli.quiet {
                warn_best_effort(&session.context);
            }
            // packs' own configuration is the session's (no confined tool may write there:
            // docs/SANDBOX.md); the server adds its token and key files.
            let mut base = session.context.clone();
            let mut approvals = None;
            if let Command::Serve(args) = command {
                // The approval key and its used tickets join the server's own files.
                approvals = match args.tickets() {
                    Ok(tickets) => tickets,
                    Err(e) => {
                        report(&e);
                        return exit::USAGE;
                    }
                };
                let own: Vec<_> =
                    args.protected_files().into_iter().chain(approvals.iter().flat_map(|t| t.files())).collect();
                base = base.with_control_plane(session.control_plane().into_iter().chain(own.iter().cloned()));
                // What no confined tool reads: the session's list (the credential stores, the
                // operator's, the secrets file) and the server's own secrets.
                base = base.own_secrets(&own);
            }
            if let Command::Session { json } = command {
                return session_report(&session, *json);
            }
            if let Command::Sandbox { json } = command {
                return sandbox::report(&base, *json);
            }
            if let Command::Serve(args) = command {
                let (lockfile, verify) = session.lockfile();
                let locked = session.locked.then(|| lock::LockOptions { lockfile, verify }.locked());
                let options = crate::mcp::Options {
                    search: search_path(&dirs),
                    context: base.clone(),
                    yes: args.yes,
                    watch: args.watch,
                    // The first tools/list over stdio may come from the listing snapshot, as a
                    // catalog's does (its inputs: the pack directories and the agent's).
                    snapshot: (args.http.is_none() && !session.locked).then(|| {
                        let mut inputs = search_path(&dirs).dirs;
                        inputs.extend(agent.as_ref().map(|a| a.dir.clone()));
                        inputs
                    }),
                    locked,
                    approvals,
                };
                if let Some(addr) = args.http {
                    return serve::http(args, addr, options);
                }
                return match crate::mcp::serve(options, std::io::stdin().lock(), std::io::stdout()) {
                    Ok(()) => signals::exit_status().unwrap_or(exit::OK),
                    Err(e) => {
                        report(&e.into());
                        exit::USAGE
                    }
                };
            }
            let only = match command {
                Command::Describe { name, .. } | Command::Help { name: Some(name), .. } => Some(name.as_str()),
                Command::Run(args) => Some(args.name()),
                _ => None,
            };
            let locked = session.locked;
            // A listing whose inputs are all in the fingerprint, printed to a file or pipe: the
            // pack directories, and the agent's directory (its `agent.toml`) when one applies.
            let mut snapshot = match command {
                Command::List { .. } | Command::Catalog { .. } if !locked && !crate::snapshot::stdout_is_terminal() => {
                    let path = search_path(&dirs);
                    let mut inputs = path.dirs.clone();
                    inputs.extend(agent.as_ref().map(|a| a.dir.clone()));
                    path.describe_cache
                        .as_ref()
                        .and_then(|c| crate::snapshot::Snapshot::of_this_process(c, &inputs, ""))
                }
                _ => None,
            };
            if let Some(out) = snapshot.as_mut().and_then(crate::snapshot::Snapshot::lookup) {
                return match write_out(|o| o.write_all(&out)) {
                    Ok(()) => signals::exit_status().unwrap_or(exit::OK),
                    Err(e) => {
                        report(&e);
                        exit::USAGE
                    }
                };
            }
            // The lock file's verification never relies on the name index.
            let mut catalog = load_catalog(&dirs, cli.quiet, only, !locked);
            if locked {
                let (lockfile, verify) = session.lockfile();
                match lock::read_trusted(&lock::LockOptions { lockfile, verify }) {
                    Ok(l) => lock::enforce(&mut catalog, &l, cli.quiet || only.is_some()),
                    Err(e) => {
                        report(&e.context("--locked: every tool is refused"));
                        return exit::USAGE;
                    }
                }
            }
            let result = match command {
                Command::List { json } => {
                    // No tool at all: say where packs looked (and keep no snapshot of that).
                    let empty = catalog.found_nothing();
                    if empty && !cli.quiet {
                        eprintln!("no tools found; {}", list::where_tools_come_from(&dirs));
                    }
                    listing(snapshot.filter(|_| !empty), &catalog, |out| {
                        list::list(&catalog, *json, &search_path(&dirs).dirs, out).map(|()| true)
                    })
                }
                Command::Describe { name, prompt } => list::describe(&catalog, name, *prompt),
                Command::Catalog { format } => {
                    listing(snapshot, &catalog, |out| list::catalog(&catalog, *format, &base, out))
                }
                Command::Run(args) => {
                    let hint = (catalog.found_nothing() && !cli.quiet).then(|| list::where_tools_come_from(&dirs));
                    run::run(&catalog, args, &base, hint.as_deref())
                }
                Command::Call(args) => call::call(&catalog, args, &base),
                Command::Prompt(args) => prompt::prompt(&catalog, args, &base),
                Command::Test(args) => test::test(&catalog, args, &base),
                Command::Help { name: Some(name), .. } => list::help(&catalog, name, &base),
                Command::Exec(_)
                | Command::Lint(_)
                | Command::Lock(_)
                | Command::New(_)
                | Command::Convert(_)
                | Command::Help { name: None, .. }
                | Command::Completions { .. }
                | Command::Man
                | Command::Serve(_)
                | Command::Session { .. }
                | Command::Sandbox { .. } => {
                    unreachable!("handled above")
                }
            };
            // The process exits next: freeing thousands of small allocations one by one is wasted time.
            std::mem::forget(catalog);
            if let Some(failure) = base.audit().and_then(crate::audit::AuditLog::take_failure) {
                let _ = writeln!(std::io::stderr().lock(), "warning: {failure}; the call is not in the log");
            }
            result
        }
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            exit::USAGE
        }
    };
    signals::exit_status().unwrap_or(code)
}

/// Under `--sandbox best-effort`, say once (on stderr, before any tool runs) what this kernel
/// leaves unenforced: tools then run partly unconfined (the audit log says `partial` per call).
fn warn_best_effort(context: &crate::call::Context) {
    if context.sandbox() != crate::sandbox::SandboxMode::BestEffort {
        return;
    }
    let gaps = crate::sandbox::for_a_describe().unenforced;
    if !gaps.is_empty() {
        eprintln!("warning: --sandbox best-effort: tools run partly unconfined here: {}", gaps.join("; "));
    }
}

/// Whether `name` is a packs command (`packs help NAME` shows its help then).
fn is_subcommand(name: &str) -> bool {
    use clap::CommandFactory;
    Cli::command().get_subcommands().any(|c| c.get_name() == name || c.get_all_aliases().any(|a| a == name))
}

/// packs' man page: `packs(1)` with a section per command (its options included), in
/// ASCII roff: an ellipsis in the help texts becomes `...`, any other character beyond
/// ASCII groff's `\[uXXXX]`.
fn man_page(out: &mut Vec<u8>) -> std::io::Result<()> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    cmd.build();
    let mut roff = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render(&mut roff)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        roff.extend_from_slice(format!(".SH \"PACKS {}\"\n", sub.get_name().to_uppercase()).as_bytes());
        let page = clap_mangen::Man::new(sub.clone());
        page.render_description_section(&mut roff)?;
        page.render_synopsis_section(&mut roff)?;
        page.render_options_section(&mut roff)?;
    }
    out.extend_from_slice(ascii_roff(&String::from_utf8_lossy(&roff)).as_bytes());
    Ok(())
}

/// `roff` with every character beyond ASCII written as ASCII: `…` as `...`, the others as
/// groff's `\[uXXXX]` escape (raw UTF-8 is not portable roff: `groff -ww` warns, other
/// formatters print mojibake).
fn ascii_roff(roff: &str) -> String {
    let mut ascii = String::with_capacity(roff.len());
    for c in roff.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else if c == '\u{2026}' {
            // Every output device has three periods; groff's ASCII device has no U+2026.
            ascii.push_str("...");
        } else {
            ascii.push_str(&format!("\\[u{:04X}]", u32::from(c)));
        }
    }
    ascii
}

/// A clap parser for one of the library's named enums: the accepted names, each with
/// its help, listed in `--help` and in the error for a value that is none of them.
fn choice<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
    help: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(all.iter().map(|v| PossibleValue::new(name(*v)).help(short_help(help(*v)))))
        .map(move |s| all.iter().copied().find(|v| name(*v) == s).expect("clap accepted one of the names"))
}

/// A one-line help as clap's derive shows a doc comment: without its final period
/// (an ellipsis stays).
fn short_help(help: &str) -> &str {
    match help.strip_suffix('.') {
        Some(short) if !short.ends_with('.') => short,
        _ => help,
    }
}

/// Read `KEY=value` lines (blank lines and `#` comments skipped) into packs' own
/// environment, where `{{secret.NAME}}` looks. Tools never see them unless a manifest
/// passes one on explicitly.
fn load_secrets(path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read secrets file {}", path.display()))?;
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .filter(|(k, _)| crate::names::is_identifier(k.trim()))
            .with_context(|| format!("{}:{}: expected KEY=value", path.display(), i + 1))?;
        pairs.push((k.trim().to_owned(), v.to_owned()));
    }
    for (k, v) in pairs {
        // SAFETY: called from `main` before any thread is started, so nothing reads the
        // environment concurrently.
        unsafe { std::env::set_var(k, v) };
    }
    Ok(())
}

impl Cli {
    /// What the operator gave on the command line and in the environment, and where each
    /// setting came from.
    fn operator(&self, matches: &clap::ArgMatches) -> Operator {
        use clap::parser::ValueSource;
        let ids = [
            (Key::Packs, "packs"),
            (Key::Workspace, "workspace"),
            (Key::Log, "log"),
            (Key::SecretsFile, "secrets_file"),
            (Key::PassEnv, "pass_env"),
            (Key::Sandbox, "sandbox"),
            (Key::Agent, "agent"),
            (Key::Locked, "locked"),
            (Key::Lockfile, "lockfile"),
            (Key::Verify, "verify"),
            (Key::Mode, "mode"),
            (Key::DenyRead, "deny_read"),
            (Key::NoDefaultDenyRead, "no_default_deny_read"),
        ];
        let mut given: Vec<(Key, Source)> = ids
            .into_iter()
            .filter_map(|(key, id)| match matches.value_source(id) {
                Some(ValueSource::CommandLine) => Some((key, Source::Flag)),
                Some(ValueSource::EnvVariable) => Some((key, Source::Env)),
                _ => None,
            })
            .collect();
        // `PACKS_DENY_READ` is a list (`:`-separated, as `PATH`); the flag replaces it.
        let mut deny_read = self.deny_read.clone();
        if deny_read.is_empty()
            && let Some(list) = std::env::var_os("PACKS_DENY_READ").filter(|l| !l.is_empty())
        {
            deny_read = std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()).collect();
            given.push((Key::DenyRead, Source::Env));
        }
        Operator {
            packs: self.packs.clone(),
            workspace: self.workspace.clone(),
            log: self.log.clone(),
            secrets_file: self.secrets_file.clone(),
            pass_env: self.pass_env.clone(),
            sandbox: self.sandbox,
            agent: self.agent.clone(),
            locked: self.locked,
            lockfile: self.lockfile.clone(),
            verify: self.verify.clone(),
            mode: self.mode.clone(),
            deny_read,
            no_default_deny_read: self.no_default_deny_read,
            given,
        }
    }
}

impl Command {
    /// The command as a front-end: the settings it honours (any other given on the command
    /// line is refused), whether it serves a model (it then acts for the default agent when
    /// `--agent` names none, [`crate::agent::Agent::for_model`]; the operator's own commands act only for an
    /// agent named), and whether its calls are recorded.
    fn front(&self) -> Front {
        use session::Honours::{self, AllBut, Only};
        const LISTING: Honours = Only(&[Key::Packs, Key::Agent, Key::Locked, Key::Lockfile, Key::Verify]);
        const OFFERING: Honours = Only(&[Key::Packs, Key::Agent, Key::Locked, Key::Lockfile, Key::Verify, Key::Mode]);
        const HELP: Honours = Only(&[
            Key::Packs,
            Key::Agent,
            Key::Locked,
            Key::Lockfile,
            Key::Verify,
            Key::Workspace,
            Key::Sandbox,
            Key::DenyRead,
            Key::NoDefaultDenyRead,
        ]);
        const ALL: Honours = Honours::ALL;
        let front = |name, honours: Honours, because, serves_model, records| Front {
            name,
            honours,
            because,
            serves_model,
            records,
        };
        let lists = "it lists tools and runs none";
        match self {
            Self::Run(_) => front("run", ALL, "", false, true),
            Self::Call(_) => front("call", ALL, "", true, true),
            Self::Serve(_) => front("serve", ALL, "", true, true),
            Self::Exec(_) => {
                front("exec", AllBut(&[Key::Packs]), "it runs the one manifest file it is given", false, true)
            }
            Self::Test(_) => front(
                "test",
                AllBut(&[Key::Log]),
                "its calls are approved by the tests and never recorded",
                false,
                false,
            ),
            Self::Session { .. } => front("session", ALL, "", false, false),
            Self::List { .. } => front("list", LISTING, lists, false, false),
            Self::Describe { .. } => front("describe", LISTING, lists, false, false),
            Self::Catalog { .. } => front("catalog", OFFERING, lists, true, false),
            Self::Prompt(_) => front("prompt", OFFERING, lists, true, false),
            // NAME may be a tool: its page says what the kernel enforces in this session.
            Self::Help { name: Some(_), .. } => front("help", HELP, "a manual page runs no tool", false, false),
            // It lists the reads denied too, which the agent and these flags make.
            Self::Sandbox { .. } => front(
                "sandbox",
                Only(&[Key::Sandbox, Key::Agent, Key::DenyRead, Key::NoDefaultDenyRead, Key::SecretsFile]),
                "it reports what the kernel enforces and runs no tool",
                false,
                false,
            ),
            Self::Lint(_) => {
                front("lint", Only(&[Key::Packs, Key::Agent]), "it checks manifests and runs no tool", true, false)
            }
            Self::Lock(_) => front(
                "lock",
                Only(&[Key::Packs, Key::Lockfile, Key::Verify]),
                "it pins the tools of the pack directories and runs none",
                false,
                false,
            ),
            Self::New(_) => front("new", Only(&[]), "it writes a manifest skeleton and runs no tool", false, false),
            Self::Convert(_) => front("convert", Only(&[]), "it converts definitions and runs no tool", false, false),
            Self::Completions { .. } => front("completions", Only(&[]), "it prints a completion script", false, false),
            Self::Man => front("man", Only(&[]), "it prints packs' man page", false, false),
            Self::Help { .. } => front("help", Only(&[]), "it prints a command's help", false, false),
        }
    }
}

/// Open the session for `front` (reading `--secrets-file` into packs' environment when it
/// honours one); an error is reported, and its exit status returned.
fn open_session(operator: Operator, front: &Front) -> Result<Session, i32> {
    if front.honours.contains(&Key::SecretsFile)
        && let Some(file) = &operator.secrets_file
        && let Err(e) = load_secrets(file)
    {
        report(&e);
        return Err(exit::USAGE);
    }
    Session::open(operator, front).map_err(|e| {
        report(&e.into());
        exit::USAGE
    })
}

/// `packs session`: each setting in effect and where it came from.
fn session_report(session: &Session, as_json: bool) -> i32 {
    let resolved = session.resolved();
    let written = if as_json {
        let rows: serde_json::Map<String, serde_json::Value> = resolved
            .iter()
            .map(|r| {
                let spec = r.key.spec();
                let from = match &r.source {
                    Source::Flag => spec.flag.to_owned(),
                    Source::Env => spec.env.unwrap_or(spec.flag).to_owned(),
                    Source::Agent(id) => format!("agent {id}"),
                    Source::Default => "default".to_owned(),
                };
                (
                    spec.flag.trim_start_matches("--").to_owned(),
                    serde_json::json!({"value": r.value, "from": from, "rule": spec.rule.describe()}),
                )
            })
            .collect();
        print_json(&rows)
    } else {
        // A value (an agent's path, a directory's name) never starts a line or moves the cursor.
        print(&resolved.iter().map(|r| format!("{}\n", crate::visible::line(&r.to_string()))).collect::<String>())
    };
    match written {
        Ok(()) => exit::OK,
        Err(e) => {
            report(&e);
            exit::USAGE
        }
    }
}

/// `--packs` directories, else `$PACKS_PATH`, else `./packs`; describes cached
/// where `$PACKS_CACHE_DIR` (or the user's cache directory) says.
fn search_path(dirs: &[PathBuf]) -> SearchPath {
    SearchPath::resolve(dirs, std::env::var_os("PACKS_PATH").as_deref())
        .with_describe_cache(crate::describe_cache::default_dir().map(crate::describe_cache::DescribeCache::new))
}

/// Load the catalog; with `only`, just enough of it to resolve that one name (with
/// `name_index`, by the name index when it is current).
fn load_catalog(dirs: &[PathBuf], quiet: bool, only: Option<&str>, name_index: bool) -> Catalog {
    let path = search_path(dirs).with_name_index(name_index);
    let catalog = match only {
        Some(name) => Catalog::load_named(&path, name),
        None => Catalog::load(&path),
    };
    if !quiet {
        print_diagnostics(&catalog.diagnostics);
    }
    catalog
}

fn print_diagnostics(diagnostics: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diagnostics {
        let _ = writeln!(err, "{d}");
    }
}

/// Print the listing `render` writes (true when it printed nothing on stderr). With a
/// `snapshot` to keep, the listing is rendered in memory first and kept when it is a clean
/// answer (nothing on stderr from the load or the render); without one it goes straight to
/// stdout.
fn listing(
    snapshot: Option<crate::snapshot::Snapshot>,
    catalog: &Catalog,
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<bool>,
) -> anyhow::Result<i32> {
    let Some(snapshot) = snapshot else {
        write_out(|o| render(o).map(drop))?;
        return Ok(exit::OK);
    };
    let mut out = Vec::new();
    let clean = render(&mut out)? && catalog.diagnostics.is_empty();
    write_out(|o| o.write_all(&out))?;
    if clean {
        snapshot.store(&out);
    }
    Ok(exit::OK)
}

/// Print an error as one line (its causes on following lines).
fn report(e: &anyhow::Error) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {e}");
    for cause in e.chain().skip(1) {
        let _ = writeln!(err, "  caused by: {cause}");
    }
}

/// Write to stdout; a closed pipe (`packs catalog | head`) is not an error.
/// Print `value` as pretty JSON and a newline, serialized straight into a buffered stdout (no
/// string of it all first); a closed pipe is not an error.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    write_out(|out| {
        serde_json::to_writer_pretty(&mut *out, value)?;
        out.write_all(b"\n")
    })
}

/// Run `write` on a buffered stdout and flush it; a closed pipe is not an error.
fn write_out(
    write: impl FnOnce(&mut std::io::BufWriter<std::io::StdoutLock<'static>>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn roff_beyond_ascii_is_escaped() {
        assert_eq!(super::ascii_roff("a … b — c é 🦀\n"), "a ... b \\[u2014] c \\[u00E9] \\[u1F980]\n");
    }
}
