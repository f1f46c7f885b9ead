//! `packs call`: a model's response in, tool results out, in that API's shape.

use std::io::Read;

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::run::TerminalApprover;
use super::{args, print};
use crate::call::{ApproveAll, Approver, Call, Context};
use crate::calls::{self, CallFormat, CallResult, FoundCall};
use crate::catalog::Catalog;

#[derive(clap::Args, Debug)]
pub(super) struct CallArgs {
    /// The response's format
    #[arg(long, default_value = "auto", value_parser = super::choice(CallFormat::ALL, CallFormat::as_str, CallFormat::help))]
    format: CallFormat,
    /// Approve calls that need confirmation (stdin carries the response, so packs cannot ask)
    #[arg(short = 'y', long)]
    yes: bool,
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

/// `packs call --stream`: stdin read as it comes, each call run when whole, its result
/// printed (and flushed) at once; what is left runs at the end of the input.
fn stream(catalog: &Catalog, a: &CallArgs, context: &Context) -> Result<i32> {
    let Some(family) = a.format.family() else {
        anyhow::bail!("--stream reads a model's raw text: name its family with --format (gemma4, qwen3, ...)");
    };
    let schema_of = |name: &str| catalog.get(name).ok().map(|t| t.describe().parameters.clone());
    let approver: &dyn Approver = if a.yes { &ApproveAll } else { &TerminalApprover };
    let mut parser = crate::formats::raw::Stream::new(family);
    let mut ran = 0;
    let mut run = |events: Vec<crate::formats::raw::Event>| -> Result<()> {
        for e in events {
            if let crate::formats::raw::Event::Call(c) = e {
                if crate::runner::interrupted().is_some() {
                    return Ok(());
                }
                let result = answer(catalog, calls::found_call(&c), context, approver);
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
    Ok(0)
}

pub(super) fn call(catalog: &Catalog, a: &CallArgs, base: &Context) -> Result<i32> {
    if a.stream {
        return stream(catalog, a, &args::context(&a.context, base)?);
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
    let approver: &dyn Approver = if a.yes { &ApproveAll } else { &TerminalApprover };
    // An interrupt ends the call that runs and the ones after it.
    let mut results: Vec<CallResult> = reading
        .calls
        .iter()
        .take_while(|_| crate::runner::interrupted().is_none())
        .map(|c| answer(catalog, c.clone(), &context, approver))
        .collect();
    if let Some(conversation) = &mut conversation {
        for r in &mut results {
            conversation.limit(r, a.max_retries);
        }
    }
    print(&reading.render(&results))?;
    Ok(0)
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
fn answer(catalog: &Catalog, call: FoundCall, context: &Context, approver: &dyn Approver) -> CallResult {
    // Arguments that could not be read are reported (and recorded) by the pipeline too.
    let args = call.args.clone();
    let outcome = Call::with_arguments_from(&call.name, move |_| args.map_err(Into::into))
        .context(context)
        .approver(approver)
        .run(catalog);
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
