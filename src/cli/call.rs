//! `packs call`: a model's response in, tool results out, in that API's shape.

use std::io::Read;

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::run::TerminalApprover;
use super::{args, print};
use crate::call::{Answers, ApproveAll, Context, Tickets};
use crate::calls::{self, CallFormat, Responder};
use crate::catalog::Catalog;

#[derive(clap::Args, Debug)]
pub(super) struct CallArgs {
    /// The response's format
    #[arg(long, default_value = "auto", value_parser = super::choice(CallFormat::ALL, CallFormat::as_str, CallFormat::help))]
    format: CallFormat,
    /// Approve calls that need confirmation (stdin carries the response, so packs cannot ask)
    #[arg(short = 'y', long, conflicts_with = "defer_approval")]
    yes: bool,
    /// Answer each call that needs approval with a pending result holding a ticket, instead of
    /// asking; send the same response again with --approve TICKET or --deny TICKET
    #[arg(long, conflicts_with = "parse_only")]
    defer_approval: bool,
    /// Run the call this ticket (from a pending result) was issued for: the person approved it
    #[arg(long, value_name = "TICKET", conflicts_with = "parse_only")]
    approve: Vec<String>,
    /// Refuse the call this ticket was issued for: the person said no
    #[arg(long, value_name = "TICKET", conflicts_with = "parse_only")]
    deny: Vec<String>,
    /// The key file that seals tickets (created 0600 when missing; default: approval.key in
    /// packs' state directory, $PACKS_STATE_DIR or $XDG_STATE_HOME/packs or ~/.local/state/packs)
    #[arg(long, value_name = "FILE", env = "PACKS_APPROVAL_KEY")]
    approval_key: Option<std::path::PathBuf>,
    /// How long a ticket issued now stays valid, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = crate::call::DEFAULT_TICKET_TTL.as_secs())]
    approval_ttl: u64,
    /// Set a context value (url, selection, clipboard, file, cwd, transcript)
    #[arg(long = "context", value_name = "KEY=VALUE")]
    context: Vec<String>,
    /// stdin is the whole conversation (the message list a front-end keeps): answer the calls
    /// no result follows yet, and stop a tool's validation retries after --max-retries
    #[arg(long)]
    conversation: bool,
    /// With --conversation: how many times a call that failed validation may be retried before
    /// the model is told to stop and report
    #[arg(long, value_name = "N", default_value_t = calls::DEFAULT_MAX_RETRIES, requires = "conversation")]
    max_retries: usize,
    /// Print what the response says as JSON ({"content", "reasoning_content", "tool_calls"})
    /// and run nothing
    #[arg(long, conflicts_with = "conversation")]
    parse_only: bool,
    /// With --parse-only: OpenAI tool definitions (a JSON array) whose schemas type the values,
    /// instead of the pack directories' tools
    #[arg(long, value_name = "FILE", requires = "parse_only")]
    tools: Option<std::path::PathBuf>,
    /// Read a model's raw text (--format FAMILY) from stdin as it comes, and run each call as
    /// soon as it is whole, printing its result on a line of its own
    #[arg(long, conflicts_with_all = ["conversation", "parse_only"])]
    stream: bool,
}

/// A response (or a conversation) larger than this is refused, never held in memory.
const MAX_INPUT: u64 = 64 << 20;

/// The approval key, when tickets are issued or answered.
fn tickets(a: &CallArgs) -> Result<Option<Tickets>> {
    if !a.defer_approval && a.approve.is_empty() && a.deny.is_empty() {
        return Ok(None);
    }
    let Some(key) = a.approval_key.clone().or_else(Tickets::default_key_file) else {
        anyhow::bail!("no approval key file: give --approval-key FILE (or set PACKS_STATE_DIR or HOME)");
    };
    let tickets = Tickets::open(&key)?.ttl(std::time::Duration::from_secs(a.approval_ttl));
    Ok(Some(tickets))
}

/// `packs call --stream`: stdin read as it comes, each call run when whole, its result
/// printed (and flushed) at once; what is left runs at the end of the input.
fn stream(a: &CallArgs, responder: &Responder<'_>) -> Result<()> {
    let Some(family) = a.format.family() else {
        anyhow::bail!("--stream reads a model's raw text: name its family with --format (gemma4, qwen3, ...)");
    };
    let mut streaming = responder.stream(family);
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("reading the model's response from stdin")),
        };
        total += n as u64;
        if total > MAX_INPUT {
            anyhow::bail!("the input is larger than {} MiB: the calls after that were not read", MAX_INPUT >> 20);
        }
        streaming.push(&buf[..n]);
        for result in streaming.by_ref() {
            print(&calls::render_line(&result, family))?;
        }
    }
    streaming.finish().context("reading the model's response from stdin (it must be UTF-8)")?;
    for result in streaming.by_ref() {
        print(&calls::render_line(&result, family))?;
    }
    if streaming.answered() == 0 {
        eprintln!("packs: no tool calls");
    }
    Ok(())
}

pub(super) fn call(catalog: &Catalog, a: &CallArgs, base: &Context) -> Result<i32> {
    let tickets = tickets(a)?;
    // The key and its used-ticket record are packs' own: no confined tool writes or reads them.
    let base = &match &tickets {
        Some(t) => base.clone().protecting_files(&t.files()),
        None => base.clone(),
    };
    let answers = tickets.as_ref().map(|t| {
        let answers = a.approve.iter().fold(Answers::new(t), |s, ticket| s.approve(ticket));
        a.deny.iter().fold(answers, |s, ticket| s.deny(ticket))
    });
    let context = args::context(&a.context, base)?;
    let mut responder = Responder::new(catalog)
        .context(&context)
        .approver(if a.yes { &ApproveAll } else { &TerminalApprover })
        .max_retries(a.max_retries);
    if let Some(answers) = &answers {
        responder = responder.answers(answers);
    }
    if let Some(tickets) = tickets.as_ref().filter(|_| a.defer_approval) {
        responder = responder.defer(tickets);
    }
    if a.stream {
        stream(a, &responder)?;
    } else {
        let mut input = String::new();
        std::io::stdin()
            .take(MAX_INPUT + 1)
            .read_to_string(&mut input)
            .context("reading the model's response from stdin (it must be UTF-8)")?;
        if input.len() as u64 > MAX_INPUT {
            anyhow::bail!("the input is larger than {} MiB: nothing was read as calls", MAX_INPUT >> 20);
        }
        if a.parse_only {
            let reading = match &a.tools {
                Some(file) => {
                    let schemas = tool_schemas(file)?;
                    calls::find_calls_with(&input, a.format, &|name| schemas.get(name).cloned())?
                }
                None => calls::find_calls_for(&input, a.format, catalog)?,
            };
            print(&format!("{:#}\n", reading.parse_json()))?;
            return Ok(0);
        }
        let reply = if a.conversation {
            responder.respond_conversation(&input, a.format)?
        } else {
            responder.respond(&input, a.format)?
        };
        if reply.reading.calls.is_empty() {
            eprintln!("packs: no tool calls");
            return Ok(0);
        }
        print(&reply.text)?;
    }
    for (_, e) in responder.refused_tickets() {
        eprintln!("packs: approval ticket refused: {e}");
    }
    let honoured = answers.as_ref().is_none_or(Answers::all_honoured);
    Ok(if honoured { 0 } else { super::exit::DENIED })
}

/// The parameters schema of each tool in an OpenAI tool-definition file, by name
/// (`[{"type": "function", "function": {"name", "parameters"}}]`; the Responses API's flat
/// `{"name", "parameters"}` is read too).
fn tool_schemas(file: &std::path::Path) -> Result<std::collections::HashMap<String, Value>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))?;
    let Some(items) = v.as_array() else {
        anyhow::bail!("{}: expected a JSON array of OpenAI tool definitions", file.display());
    };
    let mut schemas = std::collections::HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let f = item.get("function").unwrap_or(item);
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            anyhow::bail!("{}: tool {i} has no `function.name`", file.display());
        };
        let parameters = f.get("parameters").cloned().unwrap_or(Value::Null);
        schemas.insert(name.to_owned(), parameters);
    }
    Ok(schemas)
}
