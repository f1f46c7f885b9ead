//! `packs call`: a model's response in, tool results out, in that API's shape.

use std::io::Read;

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::run::TerminalApprover;
use super::{args, print};
use crate::call::{Answers, ApproveAll, Approver, Call, Context, Deferred, Tickets};
use crate::calls::{self, CallFormat, CallResult, FoundCall};
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

/// How this invocation settles approval: the approver, and with tickets, the person's answers
/// and whether to defer.
struct Approval<'a> {
    approver: &'a dyn Approver,
    answers: Option<Answers<'a>>,
    defer: Option<&'a Tickets>,
}

impl Approval<'_> {
    /// Report the tickets no call took (audited as refused); whether every ticket was honoured.
    fn finish(&self, context: &Context) -> bool {
        let Some(answers) = &self.answers else { return true };
        for (_, e) in answers.audit_refused(context) {
            eprintln!("packs: approval ticket refused: {e}");
        }
        answers.all_honoured()
    }
}

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
fn stream(catalog: &Catalog, a: &CallArgs, context: &Context, approval: &Approval<'_>) -> Result<i32> {
    let Some(family) = a.format.family() else {
        anyhow::bail!("--stream reads a model's raw text: name its family with --format (gemma4, qwen3, ...)");
    };
    let schema_of = |name: &str| catalog.get(name).ok().map(|t| t.describe().parameters.clone());
    let mut parser = crate::formats::raw::Stream::new(family);
    let mut ran = 0;
    let mut run = |events: Vec<crate::formats::raw::Event>| -> Result<()> {
        for e in events {
            if let crate::formats::raw::Event::Call(c) = e {
                if crate::runner::interrupted().is_some() {
                    return Ok(());
                }
                let result = answer(catalog, calls::found_call(&c), context, approval);
                print(&calls::render_line(&result, family))?;
                ran += 1;
            }
        }
        Ok(())
    };
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
        run(parser.push(&buf[..n], &schema_of))?;
    }
    let (_, rest) =
        parser.finish_events(&schema_of).context("reading the model's response from stdin (it must be UTF-8)")?;
    run(rest)?;
    if ran == 0 {
        eprintln!("packs: no tool calls");
    }
    Ok(if approval.finish(context) { 0 } else { super::exit::DENIED })
}

pub(super) fn call(catalog: &Catalog, a: &CallArgs, base: &Context) -> Result<i32> {
    let tickets = tickets(a)?;
    // The key and its used-ticket record are packs' own: no confined tool writes or reads them.
    let base = &match &tickets {
        Some(t) => base.clone().protecting_files(&t.files()),
        None => base.clone(),
    };
    let approval = Approval {
        approver: if a.yes { &ApproveAll } else { &TerminalApprover },
        answers: tickets.as_ref().map(|t| {
            let answers = a.approve.iter().fold(Answers::new(t), |s, ticket| s.approve(ticket));
            a.deny.iter().fold(answers, |s, ticket| s.deny(ticket))
        }),
        defer: tickets.as_ref().filter(|_| a.defer_approval),
    };
    if a.stream {
        return stream(catalog, a, &args::context(&a.context, base)?, &approval);
    }
    let mut input = String::new();
    std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_string(&mut input)
        .context("reading the model's response from stdin (it must be UTF-8)")?;
    if input.len() as u64 > MAX_INPUT {
        anyhow::bail!("the input is larger than {} MiB: nothing was read as calls", MAX_INPUT >> 20);
    }
    let context = args::context(&a.context, base)?;
    let mut conversation =
        if a.conversation { Some(calls::read_conversation(&input, a.format, Some(catalog))?) } else { None };
    let reading = match (&conversation, &a.tools) {
        (Some(c), _) => c.pending.clone(),
        (None, Some(file)) => {
            let schemas = tool_schemas(file)?;
            calls::find_calls_with(&input, a.format, &|name| schemas.get(name).cloned())?
        }
        (None, None) => calls::find_calls_for(&input, a.format, catalog)?,
    };
    if a.parse_only {
        print(&format!("{:#}\n", reading.parse_json()))?;
        return Ok(0);
    }
    if reading.calls.is_empty() {
        eprintln!("packs: no tool calls");
        return Ok(0);
    }
    // An interrupt ends the call that runs and the ones after it.
    let mut results: Vec<CallResult> = reading
        .calls
        .iter()
        .take_while(|_| crate::runner::interrupted().is_none())
        .map(|c| answer(catalog, c.clone(), &context, &approval))
        .collect();
    if let Some(conversation) = &mut conversation {
        for r in &mut results {
            conversation.limit(r, a.max_retries);
        }
    }
    print(&reading.render(&results))?;
    Ok(if approval.finish(&context) { 0 } else { super::exit::DENIED })
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

/// Run one call through the pipeline; every failure becomes an error result the model can read.
fn answer(catalog: &Catalog, call: FoundCall, context: &Context, approval: &Approval<'_>) -> CallResult {
    // Arguments that could not be read are reported (and recorded) by the pipeline too.
    let args = call.args.clone();
    let mut built = Call::with_arguments_from(&call.name, move |_| args.map_err(Into::into))
        .context(context)
        .approver(approval.approver);
    if let Some(answers) = &approval.answers {
        built = built.answers(answers);
    }
    let outcome = match approval.defer {
        Some(tickets) => built.run_deferred(catalog, tickets),
        None => built.run(catalog).map(Deferred::Ran),
    };
    let outcome = match outcome {
        Ok(Deferred::Pending(pending)) => {
            // Not run: the model is told it waits; the front-end reads the ticket and prompt.
            let value = pending.to_json();
            return CallResult { call, ok: true, content: value.to_string(), value };
        }
        Ok(Deferred::Ran(r)) => Ok(r),
        Err(e) => Err(e),
    };
    match outcome {
        Err(e) => {
            let value = e.to_json();
            CallResult { call, ok: false, content: value.to_string(), value }
        }
        Ok(r) if !r.ok => {
            let value = r.error_json();
            CallResult { call, ok: false, content: value.to_string(), value }
        }
        Ok(r) => CallResult { call, ok: true, content: r.for_model(), value: r.json.unwrap_or(Value::Null) },
    }
}
