//! A front-end's loop in a few lines: a model's response (OpenAI Chat Completions) in, its
//! tool calls through the pipeline (rules, validation, approval, sandbox, audit log), the
//! messages to append out. From the project root (it reads ./packs):
//! `cargo run --example agent_loop [-- RESPONSE.json [AUDIT.jsonl]]` (the log: stderr).
use packs::calls::{CallFormat, Responder};
use packs::{AuditLog, Catalog, Context, DenyAll, SearchPath};

/// Two calls: one runs, one whose arguments do not parse (the model is told why).
pub(crate) const RESPONSE: &str = r#"{"choices": [{"message": {"role": "assistant", "tool_calls": [
  {"id": "c1", "type": "function", "function": {"name": "disk_usage", "arguments": "{\"path\": \"src\"}"}},
  {"id": "c2", "type": "function", "function": {"name": "word_count", "arguments": "{\"text\": oops"}}]}}]}"#;

/// The messages to append after `response`, each call recorded in the audit log `log`.
pub(crate) fn answer(response: &str, log: &str) -> Result<String, Box<dyn std::error::Error>> {
    let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
    let context = Context::new().with_audit(AuditLog::open(log.as_ref())?);
    // DenyAll refuses the calls that need a person's approval: implement `Approver` to ask.
    let responder = Responder::new(&catalog).context(&context).approver(&DenyAll);
    Ok(responder.respond(response, CallFormat::Openai)?.text)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let response = args.next().map_or_else(|| Ok(RESPONSE.to_owned()), std::fs::read_to_string)?;
    print!("{}", answer(&response, &args.next().unwrap_or_else(|| "/dev/stderr".into()))?);
    Ok(())
}
