//! The front-end loop: a model's response in, each call through the pipeline, the messages
//! to append out, in that API's shape (what `packs call` does, for every front-end).

use std::collections::VecDeque;

use serde_json::Value;

use super::{CallFormat, CallResult, Conversation, FoundCall, ReadError, Reading};
use crate::call::{Answers, Approver, Call, Context, Deferred, DenyAll, Status, TicketError, Tickets};
use crate::catalog::Catalog;
use crate::formats::raw::{self, Event, Family};

/// Answers a model's tool calls: reads them from its response ([`Responder::respond`]), a
/// whole conversation ([`Responder::respond_conversation`]) or a stream of its raw text
/// ([`Responder::stream`]), takes each through the pipeline ([`Call`]: the rules,
/// validation, approval, the run, masking, the audit log), and writes the results as the
/// messages to append, in the response's format.
///
/// A call the pipeline refuses (unknown tool, arguments that do not parse or validate,
/// denied, not approved) or whose tool fails is an error result the model can act on, never
/// an error of the loop: only a response that cannot be read at all is a [`ReadError`].
///
/// ```no_run
/// use packs::calls::{CallFormat, Responder};
/// use packs::{ApproveAll, Catalog, Context, SearchPath};
/// let catalog = Catalog::load(&SearchPath::dirs(["packs"]));
/// let context = Context::new();
/// let response = r#"{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
///     "function": {"name": "disk_usage", "arguments": "{\"path\": \".\"}"}}]}"#;
/// let reply = Responder::new(&catalog).context(&context).approver(&ApproveAll).respond(response, CallFormat::Openai)?;
/// print!("{}", reply.text); // [{"role": "tool", "tool_call_id": "c1", "content": ...}]
/// # Ok::<(), packs::calls::ReadError>(())
/// ```
#[non_exhaustive]
#[must_use = "a responder answers nothing until it is given a response"]
pub struct Responder<'a> {
    catalog: &'a Catalog,
    context: Option<&'a Context>,
    approver: &'a dyn Approver,
    answers: Option<&'a Answers<'a>>,
    defer: Option<&'a Tickets>,
    max_retries: usize,
    on_status: Option<&'a (dyn Fn(Status<'_>) + Sync)>,
}

/// What [`Responder::respond`] did: the calls it read, their results, and the messages to
/// append.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Reply {
    /// What was read: the format (never `Auto`), the calls, the text's content and reasoning.
    pub reading: Reading,
    /// One result per call, in order (the error result of a call that could not be read or
    /// was refused; a pending result holding a ticket when approval is deferred).
    pub results: Vec<CallResult>,
    /// The messages (or text) to append to the conversation, in the reading's format and
    /// style ([`Reading::render`]); empty when the response holds no call (a final answer).
    pub text: String,
}

impl<'a> Responder<'a> {
    /// Answer calls of the tools in `catalog`, with an empty [`Context`], every call that
    /// needs approval denied ([`DenyAll`]), and [`super::DEFAULT_MAX_RETRIES`].
    pub fn new(catalog: &'a Catalog) -> Self {
        Self {
            catalog,
            context: None,
            approver: &DenyAll,
            answers: None,
            defer: None,
            max_retries: super::DEFAULT_MAX_RETRIES,
            on_status: None,
        }
    }

    /// Make every call with `context`: its values, agent, workspace and audit log.
    pub fn context(mut self, context: &'a Context) -> Self {
        self.context = Some(context);
        self
    }

    /// Ask `approver` when the rules say a call needs a person's approval.
    pub fn approver(mut self, approver: &'a dyn Approver) -> Self {
        self.approver = approver;
        self
    }

    /// Settle approval with the person's answers to earlier pending results
    /// ([`Call::answers`]); [`Responder::refused_tickets`] reports the tickets no call took.
    pub fn answers(mut self, answers: &'a Answers<'a>) -> Self {
        self.answers = Some(answers);
        self
    }

    /// Answer each call that needs approval (and that no [`Responder::answers`] settle) with
    /// a pending result holding a ticket from `tickets`, instead of asking
    /// ([`Call::run_deferred`]).
    pub fn defer(mut self, tickets: &'a Tickets) -> Self {
        self.defer = Some(tickets);
        self
    }

    /// In a conversation: how many times a call that failed validation may be retried before
    /// the model is told to stop and report ([`Conversation::limit`]).
    pub fn max_retries(mut self, max_retries: usize) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Report each call's phases, process and output to `on_status` ([`Call::on_status`]).
    pub fn on_status(mut self, on_status: &'a (dyn Fn(Status<'_>) + Sync)) -> Self {
        self.on_status = Some(on_status);
        self
    }

    /// Read the calls in a model's `response` (`CallFormat::Auto` detects the format; text
    /// values typed by the tools' schemas, [`super::find_calls_for`]) and answer them.
    pub fn respond(&self, response: &str, format: CallFormat) -> Result<Reply, ReadError> {
        Ok(self.respond_to(super::find_calls_for(response, format, self.catalog)?))
    }

    /// Answer the calls of a response read already.
    pub fn respond_to(&self, reading: Reading) -> Reply {
        self.reply(reading, None)
    }

    /// Read a whole conversation (the message list a front-end keeps,
    /// [`super::read_conversation`]), answer the calls no result follows yet, and stop a
    /// tool's validation retries after [`Responder::max_retries`].
    pub fn respond_conversation(&self, conversation: &str, format: CallFormat) -> Result<Reply, ReadError> {
        let mut conversation = super::read_conversation(conversation, format, Some(self.catalog))?;
        let reading = conversation.pending.clone();
        Ok(self.reply(reading, Some(&mut conversation)))
    }

    fn reply(&self, reading: Reading, mut conversation: Option<&mut Conversation>) -> Reply {
        // An interrupt (packs' signal handlers) ends the call that runs and the ones after it.
        let mut results: Vec<CallResult> = reading
            .calls
            .iter()
            .take_while(|_| crate::runner::interrupted().is_none())
            .map(|c| self.answer(c.clone()))
            .collect();
        if let Some(conversation) = &mut conversation {
            for r in &mut results {
                conversation.limit(r, self.max_retries);
            }
        }
        let text = if reading.calls.is_empty() { String::new() } else { reading.render(&results) };
        Reply { reading, results, text }
    }

    /// Take one call through the pipeline; every failure becomes an error result the model
    /// can read. Arguments that could not be read (`call.args` is an error) go through the
    /// pipeline too: the rules decide first, and the audit log records the refusal with the
    /// rules' decision.
    pub fn answer(&self, call: FoundCall) -> CallResult {
        let args = call.args.clone();
        let mut built =
            Call::with_arguments_from(&call.name, move |_| args.map_err(Into::into)).approver(self.approver);
        if let Some(context) = self.context {
            built = built.context(context);
        }
        if let Some(answers) = self.answers {
            built = built.answers(answers);
        }
        if let Some(on_status) = self.on_status {
            built = built.on_status(on_status);
        }
        let outcome = match self.defer {
            Some(tickets) => built.run_deferred(self.catalog, tickets),
            None => built.run(self.catalog).map(Deferred::Ran),
        };
        match outcome {
            // Not run: the model is told it waits; the front-end reads the ticket and prompt.
            Ok(Deferred::Pending(pending)) => {
                let value = pending.to_json();
                CallResult { call, ok: true, content: value.to_string(), value }
            }
            Ok(Deferred::Ran(r)) if r.ok => {
                CallResult { call, ok: true, content: r.for_model(), value: r.json.unwrap_or(Value::Null) }
            }
            Ok(Deferred::Ran(r)) => {
                let value = r.error_json();
                CallResult { call, ok: false, content: value.to_string(), value }
            }
            Err(e) => {
                let value = e.to_json();
                CallResult { call, ok: false, content: value.to_string(), value }
            }
        }
    }

    /// Answer a model's raw text (`family`) as it streams: [`Streaming::push`] each chunk,
    /// and take the results (an iterator): each call runs as soon as it is whole.
    pub fn stream(&self, family: Family) -> Streaming<'_, 'a> {
        Streaming { responder: self, parser: Some(raw::Stream::new(family)), queue: VecDeque::new(), answered: 0 }
    }

    /// The end of a batch answered with [`Responder::answers`]: record each ticket no call
    /// took in the context's audit log and return them ([`Answers::audit_refused`]).
    /// [`Answers::all_honoured`] then says whether every ticket answered its call.
    pub fn refused_tickets(&self) -> Vec<(Option<String>, TicketError)> {
        let Some(answers) = self.answers else { return Vec::new() };
        match self.context {
            Some(context) => answers.audit_refused(context),
            None => answers.audit_refused(&Context::new()),
        }
    }
}

/// A model's raw text answered as it streams ([`Responder::stream`]): push chunks as they
/// come, and iterate for the results: each item runs the next call that is whole (so a
/// result is there before the rest of the response is read), none when no call is waiting.
/// [`Streaming::finish`] at the end of the text queues the calls left. [`super::render_line`]
/// writes a result as the message to append, on a line of its own.
#[must_use = "a stream answers the calls pushed to it only when iterated"]
pub struct Streaming<'r, 'a> {
    responder: &'r Responder<'a>,
    parser: Option<raw::Stream>,
    /// Whole calls not run yet, in order.
    queue: VecDeque<FoundCall>,
    answered: usize,
}

impl Streaming<'_, '_> {
    /// The next chunk of the text, as it came (a character may be split between chunks):
    /// the events it makes certain (content and reasoning to show, and each whole call,
    /// which the iterator runs). Nothing after [`Streaming::finish`].
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        let catalog = self.responder.catalog;
        let schema_of = |name: &str| catalog.get(name).ok().map(|t| t.describe().parameters.clone());
        let Some(parser) = &mut self.parser else { return Vec::new() };
        let events = parser.push(chunk, &schema_of);
        self.queue_calls(&events);
        events
    }

    /// The end of the text: its last events, the calls among them queued for the iterator;
    /// an error when the text is not UTF-8 (the calls already answered stand).
    pub fn finish(&mut self) -> Result<Vec<Event>, ReadError> {
        let catalog = self.responder.catalog;
        let schema_of = |name: &str| catalog.get(name).ok().map(|t| t.describe().parameters.clone());
        let Some(parser) = self.parser.take() else { return Ok(Vec::new()) };
        let (_, events) =
            parser.finish_events(&schema_of).map_err(|e| ReadError(format!("the text is not UTF-8: {e}")))?;
        self.queue_calls(&events);
        Ok(events)
    }

    fn queue_calls(&mut self, events: &[Event]) {
        let calls =
            events.iter().filter_map(|e| if let Event::Call(c) = e { Some(super::found_call(c)) } else { None });
        self.queue.extend(calls);
    }

    /// How many calls were answered so far.
    pub fn answered(&self) -> usize {
        self.answered
    }
}

impl Iterator for Streaming<'_, '_> {
    type Item = CallResult;

    /// Run the next whole call; none when no call waits (or packs was interrupted).
    fn next(&mut self) -> Option<CallResult> {
        if crate::runner::interrupted().is_some() {
            return None;
        }
        let call = self.queue.pop_front()?;
        self.answered += 1;
        Some(self.responder.answer(call))
    }
}
