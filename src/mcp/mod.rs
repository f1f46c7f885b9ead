//! `packs serve`: a pack directory as a Model Context Protocol server.
//!
//! This module is the protocol core both transports share: a `Server` (the catalog, the
//! calls in flight, the approvals asked, the metrics: one per process) and a `Peer` (what
//! one connection has settled: its era, protocol version, capabilities, agent). The stdio
//! transport (`stdio`) has one peer for its whole life; the HTTP transport ([`http`]) makes
//! one per POST, from what the request and its sealed session carry, so any replica can
//! answer any request. Hand-written rather than built on the official SDK: the server needs
//! six methods and three notifications, and owning the core keeps calls on packs' own
//! threads and dispatcher (see docs/ARCHITECTURE.md).
//!
//! Every `tools/call` runs on a worker of a bounded pool (`MAX_CALLS` at once) through the
//! same pipeline as `packs run`, so a slow tool never blocks `ping` or other calls;
//! cancellation kills the call's process group; approval uses MCP elicitation when the
//! client offers it, and in the stateless era an `input_required` result whose
//! `requestState` is an approval ticket (`crate::call::Tickets`: sealed with a key file,
//! spent once in the used-ticket directory beside it, so any replica sharing the file
//! honours it once, after a restart too).

mod auth;
pub mod http;
mod metrics;
pub mod oauth;
mod progress;
mod stdio;

pub use stdio::serve;

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::call::{Answers, ApprovalRequest, Approver, Call, Context, Deferred, Status, Tickets, ToolError};
use crate::catalog::{Catalog, LookupError, SearchPath};
use crate::pool::Pool;

use crate::seal::Seal;
pub(crate) use metrics::Metrics;

/// Protocol versions of the `initialize` handshake this server speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Protocol versions of the stateless era (every request carries its version, the
/// client's capabilities and info in `_meta`; `server/discover` instead of `initialize`).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `_meta` keys of the stateless era's per-request envelope, and of the server's stamp.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// What the server tells a model about itself.
const INSTRUCTIONS: &str = "Tools from packs pack directories. Arguments are validated against each tool's inputSchema; a result with isError explains what to fix.";

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 100;

/// How often `--watch` looks for changed files.
const WATCH_INTERVAL: Duration = Duration::from_millis(300);

/// How long an approval question waits for the client's answer.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Most `tools/call` requests running at once (counted until their answer is sent); one more
/// is refused until one ends.
const MAX_CALLS: usize = 64;

/// The workers calls run on: room for `MAX_CALLS` calls, and as many more workers that are
/// still returning from calls already answered (a client that keeps exactly `MAX_CALLS` in
/// flight sends its next call the moment an answer arrives).
fn call_pool() -> Pool {
    Pool::new("packs-call", 2 * MAX_CALLS)
}

/// Protocol versions whose clients may send JSON-RPC batches (2025-06-18 removed them).
const BATCH_VERSIONS: &[&str] = &["2025-03-26", "2024-11-05"];

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined server error: too many calls, no thread for a call.
const SERVER_ERROR: i64 = -32000;
/// The request's protocol version is not one this server speaks (2026-07-28).
const UNSUPPORTED_VERSION: i64 = -32022;

/// The era a connection speaks, decided by its first request and never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize`, then requests without an envelope (2025-11-25 and earlier).
    Handshake,
    /// Every request carries its own envelope (2026-07-28).
    Stateless,
}

/// How `packs serve` was started.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the tools come from.
    pub search: SearchPath,
    /// Agent, workspace and audit log for every call.
    pub context: Context,
    /// Approve calls that need approval when the client cannot be asked.
    pub yes: bool,
    /// Reload the catalog when files change.
    pub watch: bool,
    /// `--locked`: serve only tools pinned as they are in this lock file, read again when it
    /// changes (a tool that drifts while served is withdrawn, with `list_changed`).
    pub locked: Option<crate::lock::Locked>,
    /// The directories a listing reads besides the invocation (the pack directories and the
    /// agent's), when the first `tools/list` may be answered from this invocation's listing
    /// snapshot (stdio, without `--locked`): while it is current the catalog loads in the
    /// background, and a call waits for it. None: the catalog is loaded before serving.
    pub snapshot: Option<Vec<std::path::PathBuf>>,
    /// The approval key ([`Tickets`]) whose tickets a stateless-era (2026-07-28) client gets
    /// as `requestState` when a call needs approval, and presents again with the person's
    /// answer. None: such a call is not deferred (approved with `yes`, else denied).
    pub approvals: Option<Tickets>,
}

#[cfg(test)]
impl Options {
    /// The tests' server options: the tools of `dir`, a fresh context, nothing else on.
    pub(crate) fn over(dir: &std::path::Path) -> Self {
        Self {
            search: SearchPath::dirs([dir]),
            context: Context::new(),
            yes: false,
            watch: false,
            locked: None,
            snapshot: None,
            approvals: None,
        }
    }
}

/// One in-flight call: its process once started, and whether it was cancelled (by the
/// client, which wants no answer) or ended (by packs, which still owes one).
#[derive(Default)]
struct Flight {
    process: Option<crate::runner::Process>,
    cancelled: bool,
    ended: bool,
}

/// How a call that is over came to be over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    /// It ran to its end: answer with its result.
    Ran,
    /// The client cancelled it: it expects no answer.
    Cancelled,
    /// packs ended it (the client's input ended, the server stopped): answer that.
    Ended,
}

impl Flight {
    /// The client no longer wants the answer: end the tool's process group, if it started.
    fn cancel(&mut self) {
        self.cancelled = true;
        self.kill();
    }

    /// packs ends the call (its client's input ended, the server stops): the client still
    /// gets an answer saying so.
    fn end(&mut self) {
        self.ended = true;
        self.kill();
    }

    fn kill(&self) {
        if let Some(process) = &self.process {
            process.kill();
        }
    }
}

/// What every connection of one `packs serve` process shares.
pub(crate) struct Server {
    /// The catalog, or, while it loads, the listing a current snapshot holds.
    catalog: Mutex<Current>,
    /// Told when the catalog has loaded.
    loaded: Condvar,
    options: Options,
    /// Calls in flight, by their peer's key and request id.
    flights: Mutex<HashMap<String, Flight>>,
    /// Requests of ours (elicitation) waiting for a client's answer, by peer key and id.
    pending: Mutex<HashMap<String, mpsc::Sender<Value>>>,
    next_id: AtomicU64,
    /// Seals the HTTP transport's session ids.
    seal: Seal,
    /// Calls, outcomes, latency and denials (served at `/metrics` over HTTP).
    pub(crate) metrics: Metrics,
}

/// What the server offers now.
enum Current {
    /// The catalog, loaded.
    Loaded(Arc<Catalog>),
    /// Still loading: the `tools/list` entries of the server's own context, from a snapshot
    /// that was current when the server started.
    Loading(Arc<Early>),
}

/// A listing snapshot's `tools/list` entries: one JSON text per line, in the order offered.
pub(crate) struct Early {
    text: Vec<u8>,
    /// Where each line starts and ends in `text`.
    lines: Vec<(usize, usize)>,
}

impl Early {
    fn new(text: Vec<u8>) -> Self {
        let mut lines = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &text) {
            lines.push((start, end));
            start = end + 1;
        }
        Early { text, lines }
    }

    /// The entries from `start` on, at most `n` of them; None if one is not JSON (a
    /// snapshot is written whole and renamed into place: never, but then load).
    fn page(&self, start: usize, n: usize) -> Option<Vec<Value>> {
        let end = self.lines.len().min(start.saturating_add(n));
        let lines = self.lines.get(start..end).unwrap_or_default();
        lines.iter().map(|&(a, b)| serde_json::from_slice(&self.text[a..b]).ok()).collect()
    }
}

/// What is left to do once a stdio server answers: load the catalog a current snapshot
/// stood in for, or keep a snapshot of the catalog loaded.
pub(crate) enum Startup {
    /// The catalog is loaded; no snapshot to keep.
    Done,
    /// Load the catalog; what the snapshot offered is compared with it.
    Load(Arc<Early>),
    /// Keep a snapshot of the loaded catalog's listing, when it is a clean one.
    Store(crate::snapshot::Snapshot),
}

/// One connection as the protocol sees it: stdio's for the process's life, or one HTTP
/// request's, preset from its headers and session.
pub(crate) struct Peer {
    server: Arc<Server>,
    out: Box<dyn Fn(Value) + Send + Sync>,
    /// Separates this connection's request ids from other connections' in the shared maps.
    key: String,
    /// Who is calling (a token's agent), bound into every approval token minted for it.
    principal: String,
    /// The agent, workspace and log this connection's calls run with.
    context: Context,
    /// `--yes`: approve when the client cannot be asked (stdio only).
    yes: bool,
    /// Whether this transport can tell the client later that the tool list changed.
    notifies: bool,
    /// Whether this connection's context is the server's own (stdio), so a listing
    /// snapshot made in it answers for it.
    early: bool,
    elicitation: AtomicBool,
    /// The protocol version `initialize` settled on.
    version: Mutex<Option<&'static str>>,
    /// The client hung up: approvals are denied, calls are ended.
    closed: AtomicBool,
    /// The connection's era, once its first request has decided it.
    era: Mutex<Option<Era>>,
    /// Keys of the requests of ours this peer is waiting on (dropped when it closes).
    asking: Mutex<Vec<String>>,
}

thread_local! {
    /// While a batch is handled (on one thread, in order), the responses it produces,
    /// sent together as one array at its end.
    static BATCH: std::cell::RefCell<Option<Vec<Value>>> = const { std::cell::RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Server {
    /// Load the catalog and start; `seal` signs the tokens clients hand back.
    pub(crate) fn new(options: Options, seal: Seal) -> Arc<Self> {
        let catalog = load(&options, None);
        Self::with(options, seal, Current::Loaded(Arc::new(catalog)))
    }

    /// Start from this invocation's listing snapshot when `options.snapshot` asks for it and
    /// it is current (the catalog is then [`Server::settle`]d in the background), else load
    /// the catalog now, as [`Server::new`] does.
    pub(crate) fn start(options: Options, seal: Seal) -> (Arc<Self>, Startup) {
        // A server's tools get packs' variables from one copy of its environment, not a new
        // one per call.
        crate::environment::freeze();
        // Where each tool's program is on the PATH, kept until the kernel reports a change.
        crate::runner::keep_program_lookups();
        let snapshot = match (&options.snapshot, &options.search.describe_cache) {
            (Some(inputs), Some(cache)) if options.locked.is_none() => {
                // The read-only hints and the sandbox notes follow what this kernel confines
                // and the server's context (the arguments and environment are in the key).
                let kernel = format!("serve {:?} {}", crate::sandbox::Support::probe(), options.context.sandbox_key());
                crate::snapshot::Snapshot::of_this_process(cache, inputs, &kernel)
            }
            _ => None,
        };
        let Some(mut snapshot) = snapshot else { return (Self::new(options, seal), Startup::Done) };
        if let Some(text) = snapshot.lookup() {
            let early = Arc::new(Early::new(text));
            return (Self::with(options, seal, Current::Loading(Arc::clone(&early))), Startup::Load(early));
        }
        (Self::new(options, seal), Startup::Store(snapshot))
    }

    fn with(mut options: Options, seal: Seal, current: Current) -> Arc<Self> {
        // The server's tickets are its own: `packs call`'s do not answer it, nor the reverse.
        options.approvals = options.approvals.map(|t| t.issued_by(crate::call::Issuer::Serve));
        Arc::new(Server {
            catalog: Mutex::new(current),
            loaded: Condvar::new(),
            options,
            flights: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            seal,
            metrics: Metrics::default(),
        })
    }

    /// The options the server was started with.
    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// The catalog, once loaded (waiting for a load in the background).
    fn catalog(&self) -> Arc<Catalog> {
        let mut current = lock(&self.catalog);
        loop {
            match &*current {
                Current::Loaded(catalog) => return Arc::clone(catalog),
                Current::Loading(_) => {
                    current = self.loaded.wait(current).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
        }
    }

    /// The snapshot's listing, while the catalog it stands in for loads.
    fn early(&self) -> Option<Arc<Early>> {
        match &*lock(&self.catalog) {
            Current::Loading(early) => Some(Arc::clone(early)),
            Current::Loaded(_) => None,
        }
    }

    fn install(&self, catalog: Arc<Catalog>) {
        *lock(&self.catalog) = Current::Loaded(catalog);
        self.loaded.notify_all();
    }

    /// Finish what [`Server::start`] left: load the catalog a snapshot stood in for (true
    /// when what it offers differs from what the snapshot offered: the client is told), or
    /// keep a snapshot of a clean listing.
    pub(crate) fn settle(&self, startup: Startup) -> bool {
        let context = &self.options.context;
        match startup {
            Startup::Done => false,
            Startup::Load(early) => {
                // A panic here would leave calls waiting for ever: the server cannot go on.
                let loaded = catch_unwind(AssertUnwindSafe(|| {
                    let catalog = load(&self.options, None);
                    let text = snapshot_text(context, &catalog);
                    (catalog, text)
                }));
                let Ok((catalog, text)) = loaded else {
                    eprintln!("packs serve: loading the catalog failed inside packs (a bug); the server stops");
                    std::process::exit(70);
                };
                self.install(Arc::new(catalog));
                text != early.text
            }
            Startup::Store(snapshot) => {
                let catalog = self.catalog();
                if catalog.diagnostics.is_empty() {
                    snapshot.store(&snapshot_text(context, &catalog));
                }
                false
            }
        }
    }

    /// Reload the catalog now; whether what a client is offered changed.
    fn reload(&self) -> bool {
        let previous = self.catalog();
        let catalog = Arc::new(load(&self.options, Some(&previous)));
        // A broken edit keeps the last good version: then what a client sees has not changed.
        let context = &self.options.context;
        let changed = listing(context, &previous) != listing(context, &catalog);
        self.install(catalog);
        changed
    }

    /// End every call still running (their answers would reach nobody); how many there were.
    pub(crate) fn end_calls(&self, prefix: &str) -> usize {
        let mut flights = lock(&self.flights);
        let mut ended = 0;
        for (_, flight) in flights.iter_mut().filter(|(k, _)| k.starts_with(prefix)) {
            flight.end();
            ended += 1;
        }
        ended
    }

    /// Calls running now.
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.flights).len()
    }
}

/// Load the catalog, logging its problems to stderr; with `--locked`, withdraw what the
/// lock file does not pin as it is (all of it when the lock file cannot be trusted).
fn load(options: &Options, previous: Option<&Catalog>) -> Catalog {
    let mut catalog = Catalog::load(&options.search);
    for d in &catalog.diagnostics {
        eprintln!("{d}");
    }
    if let Some(previous) = previous {
        for name in catalog.keep_last_good(previous) {
            eprintln!("packs serve: keeping the last good version of `{name}` until its file is fixed");
        }
    }
    if let Some(locked) = &options.locked {
        match locked.read() {
            Ok(lock) => {
                for r in crate::lock::enforce(&mut catalog, &lock) {
                    eprintln!("packs serve: `{}` is withdrawn: {}", r.name, r.drift);
                }
            }
            Err(e) => {
                let names = crate::lock::refuse_all(&mut catalog, &format!("--locked: {e}"));
                eprintln!("packs serve: --locked: {e}: every tool ({}) is withdrawn", names.len());
            }
        }
    }
    catalog
}

/// Files that make up the catalog (and the lock file, with `--locked`), with their
/// modification times and sizes.
fn fingerprint(options: &Options) -> Vec<(std::path::PathBuf, Option<SystemTime>, u64)> {
    let mut paths = Vec::new();
    for dir in &options.search.dirs {
        let found = crate::catalog::discover(dir);
        paths.extend(found.manifests.into_iter().chain(found.executables));
    }
    paths.extend(options.locked.iter().flat_map(crate::lock::Locked::files));
    paths
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            (path, modified, meta.map_or(0, |m| m.len()))
        })
        .collect()
}

/// The files `--watch` watches, as they are now.
pub(crate) fn watched(server: &Server) -> Vec<(std::path::PathBuf, Option<SystemTime>, u64)> {
    fingerprint(&server.options)
}

/// `--watch`: reload when files change from `last`, until `stop`; `changed` is told when
/// what a client is offered changed (stdio sends `list_changed`).
pub(crate) fn watch(
    server: &Server,
    mut last: Vec<(std::path::PathBuf, Option<SystemTime>, u64)>,
    stop: &AtomicBool,
    changed: &dyn Fn(),
) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_INTERVAL);
        let now = fingerprint(&server.options);
        if now == last {
            continue;
        }
        last = now;
        if server.reload() {
            changed();
        }
    }
}

/// The tools a client is offered (an agent's rules and the mode applied).
fn offered<'c>(context: &Context, catalog: &'c Catalog) -> Vec<&'c crate::tool::Tool> {
    catalog.tools().filter(|t| context.offers(t)).collect()
}

/// A tool's `tools/list` entry. Clients auto-approve on `readOnlyHint`, so it is claimed
/// only for a tool that states `read_only`, adds no `policy.writable` place, and whose
/// writes and signals the kernel confines here (a tool that can kill the user's other
/// processes changes its environment; a native tool runs in packs' own process: never).
/// `_meta` states what the kernel enforces for it here (`dev.packs/sandbox`: the words of
/// `--dry-run`'s `sandbox:` line in this connection's context; none for a native tool).
fn entry(context: &Context, t: &crate::tool::Tool) -> Value {
    // A server lists the same tools again and again: keep each one's describe (an export
    // made once only synthesizes it for the moment).
    t.describe();
    let mut entry = crate::formats::mcp::tool(t);
    let decided = context.enforcement(t);
    let enforced = t.policy().writable.is_empty()
        && decided.as_ref().is_some_and(|decided| {
            decided.as_ref().is_ok_and(|e| e.writes_under.is_some() && e.signals_confined() && e.unenforced.is_empty())
        });
    if let (Some(decided), Some(fields)) = (&decided, entry.as_object_mut()) {
        fields.insert("_meta".into(), json!({"dev.packs/sandbox": crate::sandbox::stated(decided)}));
    }
    if !enforced && let Some(hints) = entry.get_mut("annotations").and_then(Value::as_object_mut) {
        hints.insert("readOnlyHint".into(), Value::Bool(false));
        hints.insert("destructiveHint".into(), Value::Bool(true));
        hints.insert("idempotentHint".into(), Value::Bool(false));
    }
    entry
}

/// What a listing snapshot of serve holds: each `tools/list` entry the server's own
/// context is offered, in order, as one line of JSON.
fn snapshot_text(context: &Context, catalog: &Catalog) -> Vec<u8> {
    let mut text = Vec::new();
    for t in offered(context, catalog) {
        // Serializing a `Value` into memory cannot fail.
        let _ = serde_json::to_writer(&mut text, &entry(context, t));
        text.push(b'\n');
    }
    text
}

/// What `tools/list` would answer, whole, by name (a tool kept at its last good
/// version may move in the catalog's order; a client sees the same tools).
fn listing(context: &Context, catalog: &Catalog) -> Vec<Value> {
    let mut tools = offered(context, catalog);
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    tools.into_iter().map(|t| entry(context, t)).collect()
}

/// What a connection has settled before its next request, for a transport that makes a
/// peer per request (HTTP): the era, the handshake's version and the client's elicitation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settled {
    pub(crate) era: Option<Era>,
    pub(crate) version: Option<&'static str>,
    pub(crate) elicitation: bool,
}

impl Peer {
    /// A connection of `server` whose messages go to `out`.
    pub(crate) fn new(
        server: &Arc<Server>,
        out: Box<dyn Fn(Value) + Send + Sync>,
        key: String,
        principal: String,
        context: Context,
    ) -> Self {
        Peer {
            server: Arc::clone(server),
            out,
            key,
            principal,
            context,
            yes: false,
            notifies: false,
            early: false,
            elicitation: AtomicBool::new(false),
            version: Mutex::new(None),
            closed: AtomicBool::new(false),
            era: Mutex::new(None),
            asking: Mutex::new(Vec::new()),
        }
    }

    /// Approve with `--yes` when the client cannot be asked; tell it when the list changes.
    pub(crate) fn stdio(mut self, yes: bool) -> Self {
        self.yes = yes;
        self.notifies = true;
        self.early = true;
        self
    }

    /// Start from what earlier requests of this connection settled.
    pub(crate) fn settled(self, settled: Settled) -> Self {
        *lock(&self.era) = settled.era;
        *lock(&self.version) = settled.version;
        self.elicitation.store(settled.elicitation, Ordering::Relaxed);
        self
    }

    /// What this connection has settled so far.
    pub(crate) fn settlement(&self) -> Settled {
        Settled {
            era: *lock(&self.era),
            version: *lock(&self.version),
            elicitation: self.elicitation.load(Ordering::Relaxed),
        }
    }

    fn send(&self, msg: Value) {
        (self.out)(msg);
    }

    /// Send a response, or keep it for the batch this thread is answering.
    fn respond(&self, response: Value) {
        let response = BATCH.with(|b| match b.borrow_mut().as_mut() {
            Some(responses) => {
                responses.push(response);
                None
            }
            None => Some(response),
        });
        if let Some(response) = response {
            self.send(response);
        }
    }

    fn reply(&self, id: &Value, result: Value) {
        self.respond(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub(crate) fn error(&self, id: &Value, code: i64, message: &str) {
        self.respond(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}));
    }

    /// The client hung up: every approval it was asked (or is asked from now on) is denied.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let mine = std::mem::take(&mut *lock(&self.asking));
        let mut pending = lock(&self.server.pending);
        for key in mine {
            pending.remove(&key);
        }
    }

    /// End this connection's calls still running; how many there were.
    pub(crate) fn end_calls(&self) -> usize {
        self.server.end_calls(&format!("{}\0", self.key))
    }

    /// Cancel one request of this connection (its client went away or said so).
    pub(crate) fn cancel(&self, request: &Value) {
        let mut flights = lock(&self.server.flights);
        if let Some(flight) = flights.get_mut(&self.flight_key(request)) {
            flight.cancel();
        }
    }

    fn flight_key(&self, id: &Value) -> String {
        format!("{}\0{id}", self.key)
    }

    /// Handle a batch (protocol versions that have them): every request in order on one
    /// worker, then one array of the responses. Elsewhere, one error.
    fn batch(self: &Arc<Self>, items: Vec<Value>, pool: &Pool) {
        let version = *lock(&self.version);
        if !version.is_some_and(|v| BATCH_VERSIONS.contains(&v)) {
            let shown = version.unwrap_or("none yet");
            return self.error(
                &Value::Null,
                INVALID_REQUEST,
                &format!("JSON-RPC batches are not part of protocol version {shown}: send one message per line"),
            );
        }
        if items.is_empty() {
            return self.error(&Value::Null, INVALID_REQUEST, "an empty batch");
        }
        let peer = Arc::clone(self);
        let run = move || {
            BATCH.with(|b| *b.borrow_mut() = Some(Vec::new()));
            // The worker is reused: whatever happens, it stops collecting responses.
            let _ = catch_unwind(AssertUnwindSafe(|| {
                for item in items {
                    peer.handle_one(item, None);
                }
            }));
            let responses = BATCH.with(|b| b.borrow_mut().take()).unwrap_or_default();
            if !responses.is_empty() {
                peer.send(Value::Array(responses));
            }
        };
        if let Err(refused) = pool.submit(run) {
            self.error(&Value::Null, SERVER_ERROR, &format!("the batch is refused: {refused}"));
        }
    }

    /// Handle one message; a `tools/call` (or a batch) goes to the pool.
    pub(crate) fn handle(self: &Arc<Self>, msg: Value, pool: &Pool) {
        match msg {
            Value::Array(items) => self.batch(items, pool),
            msg => self.handle_one(msg, Some(pool)),
        }
    }

    /// Handle one message. A `tools/call` runs on the pool, or on this thread in a batch
    /// (no `pool`).
    fn handle_one(self: &Arc<Self>, msg: Value, pool: Option<&Pool>) {
        let Value::Object(fields) = &msg else {
            return self.error(&Value::Null, INVALID_REQUEST, "a message must be a JSON object");
        };
        let id = fields.get("id").cloned();
        let method = match fields.get("method") {
            Some(Value::String(m)) => m.clone(),
            Some(_) => return self.error(&id.unwrap_or(Value::Null), INVALID_REQUEST, "`method` must be a string"),
            None if fields.contains_key("result") || fields.contains_key("error") => {
                // A response to a request of ours (elicitation), from this connection only.
                if let Some(id) = &id
                    && let Some(tx) = lock(&self.server.pending).remove(&self.flight_key(id))
                {
                    let _ = tx.send(msg);
                }
                return;
            }
            None => return self.error(&id.unwrap_or(Value::Null), INVALID_REQUEST, "a request needs a `method`"),
        };
        let params = fields.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            return self.notification(&method, &params);
        };
        // The first request decides the era: one that carries the stateless envelope (and is
        // not `initialize`, which that era does not have) opens a stateless connection.
        let enveloped = params.get("_meta").and_then(|m| m.get(VERSION_KEY)).is_some();
        let era = *lock(&self.era).get_or_insert(if enveloped && method != "initialize" {
            Era::Stateless
        } else {
            Era::Handshake
        });
        if era == Era::Stateless {
            return self.stateless(&id, &method, &params, pool);
        }
        if enveloped && method != "initialize" {
            return self.error(
                &id,
                INVALID_REQUEST,
                "this connection opened with `initialize`: a request with a 2026-07-28 `_meta` envelope is refused \
                 (open a new connection to speak 2026-07-28)",
            );
        }
        match method.as_str() {
            "initialize" => self.initialize(&id, &params),
            "ping" => self.reply(&id, json!({})),
            "tools/list" => self.list(&id, &params),
            "tools/call" => self.start_call(&id, params, pool),
            _ if id.is_null() => self.error(&id, INVALID_REQUEST, "a request needs an id"),
            other => self.error(&id, METHOD_NOT_FOUND, &format!("unknown method `{other}`")),
        }
    }

    /// A `tools/call` goes to the pool (or runs here, in a batch).
    fn start_call(self: &Arc<Self>, id: &Value, params: Value, pool: Option<&Pool>) {
        {
            let mut flights = lock(&self.server.flights);
            if flights.len() >= MAX_CALLS {
                drop(flights);
                let message = format!("{MAX_CALLS} calls are running; try again when one ends");
                return self.error(id, SERVER_ERROR, &message);
            }
            flights.insert(self.flight_key(id), Flight::default());
        }
        let Some(pool) = pool else { return self.call_caught(id, &params) };
        let peer = Arc::clone(self);
        let (job_id, job_params) = (id.clone(), params);
        if let Err(refused) = pool.submit(move || peer.call_caught(&job_id, &job_params)) {
            self.finish(id);
            self.error(id, SERVER_ERROR, &refused.to_string());
        }
    }

    /// A request of a stateless-era (2026-07-28) connection: its envelope is checked (the
    /// version, the client's capabilities), then it is answered like the handshake era's,
    /// each result with `resultType` and the server's info in `_meta`.
    fn stateless(self: &Arc<Self>, id: &Value, method: &str, params: &Value, pool: Option<&Pool>) {
        if method == "initialize" {
            let requested = params.get("protocolVersion").cloned().unwrap_or(Value::Null);
            return self.respond(json!({"jsonrpc": "2.0", "id": id, "error": unsupported_version(&requested)}));
        }
        if let Err(error) = check_envelope(params) {
            return self.respond(json!({"jsonrpc": "2.0", "id": id, "error": error}));
        }
        match method {
            "server/discover" => self.reply(
                id,
                stateless_result(json!({
                    "supportedVersions": MODERN_VERSIONS,
                    "capabilities": {"tools": {}},
                    "instructions": INSTRUCTIONS,
                    // The tool list follows the pack directories (and `--watch`): never cached.
                    "ttlMs": 0,
                    "cacheScope": "private",
                })),
            ),
            "ping" => self.reply(id, stateless_result(json!({}))),
            "tools/list" => match self.list_result(params) {
                Ok(mut result) => {
                    result["ttlMs"] = json!(0);
                    result["cacheScope"] = json!("private");
                    self.reply(id, stateless_result(result));
                }
                Err(message) => self.error(id, INVALID_PARAMS, &message),
            },
            "tools/call" => self.start_call(id, params.clone(), pool),
            other => self.error(id, METHOD_NOT_FOUND, &format!("unknown method `{other}`")),
        }
    }

    /// Whether this connection speaks the stateless era.
    fn is_stateless(&self) -> bool {
        *lock(&self.era) == Some(Era::Stateless)
    }

    /// Run a call; if packs itself fails inside it (a bug), the client still gets an answer.
    fn call_caught(self: &Arc<Self>, id: &Value, params: &Value) {
        if catch_unwind(AssertUnwindSafe(|| self.call(id, params))).is_err() {
            self.finish(id);
            self.error(
                id,
                INTERNAL_ERROR,
                "the call failed inside packs (a bug; it is logged on stderr); the server goes on",
            );
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled"
            && let Some(request) = params.get("requestId")
        {
            self.cancel(request);
        }
    }

    fn initialize(&self, id: &Value, params: &Value) {
        let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
        *lock(&self.version) = Some(version);
        let elicitation = params.pointer("/capabilities/elicitation").is_some();
        self.elicitation.store(elicitation, Ordering::Relaxed);
        self.reply(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": self.notifies}},
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
        );
    }

    fn list(&self, id: &Value, params: &Value) {
        match self.list_result(params) {
            Ok(result) => self.reply(id, result),
            Err(message) => self.error(id, INVALID_PARAMS, &message),
        }
    }

    /// A `tools/list` page, or why the cursor is refused.
    fn list_result(&self, params: &Value) -> Result<Value, String> {
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(c) => c.parse::<usize>().map_err(|_| format!("invalid cursor `{c}`"))?,
        };
        // While the catalog loads, the snapshot answers for the context it was made in.
        let early = if self.early { self.server.early() } else { None };
        let (page, total) = match early.and_then(|e| Some((e.page(start, PAGE_SIZE)?, e.lines.len()))) {
            Some(answer) => answer,
            None => {
                let catalog = self.server.catalog();
                let tools = offered(&self.context, &catalog);
                let page = tools.iter().skip(start).take(PAGE_SIZE).map(|t| entry(&self.context, t)).collect();
                (page, tools.len())
            }
        };
        let mut result = json!({"tools": page});
        if start.saturating_add(PAGE_SIZE) < total {
            result["nextCursor"] = Value::String((start + PAGE_SIZE).to_string());
        }
        Ok(result)
    }

    fn call(self: &Arc<Self>, id: &Value, params: &Value) {
        let key = self.flight_key(id);
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
        let progress = params.pointer("/_meta/progressToken").cloned();
        // The call keeps the catalog it started with, whatever a reload does meanwhile.
        let catalog = self.server.catalog();
        let started = Instant::now();
        let metrics = &self.server.metrics;
        let _in_flight = metrics.call_started();
        // Unknown names are counted under one label: a client cannot grow the metrics.
        let known = catalog.get(name).is_ok();
        let label = if known { name } else { "" };
        let sent = AtomicU64::new(0);
        let progress_text = progress::ProgressText::default();
        let stateless = self.is_stateless();
        // A stateless-era client is asked by an `input_required` result whose `requestState`
        // is an approval ticket, then retries with the ticket and the person's answer.
        let tickets = self.server.options.approvals.as_ref();
        let retried = if stateless { retried(params) } else { None };
        let answers = retried.zip(tickets).map(|((ticket, approve), t)| Answers::only(t, ticket, approve));
        let can_elicit =
            params.pointer(&format!("/_meta/{}/elicitation", CAPABILITIES_KEY.replace('/', "~1"))).is_some();
        let defer = tickets.filter(|_| stateless && can_elicit && retried.is_none());
        let approver = Elicitor {
            peer: self,
            yes: self.yes,
            // A retry's answer is settled by its ticket (without a key: denied); a client
            // that cannot answer a form gets `--yes`, else no.
            stateless: stateless.then_some(self.yes && retried.is_none()),
        };
        let on_status = |status: Status<'_>| match status {
            Status::Spawned { process, .. } => {
                let mut flights = lock(&self.server.flights);
                if let Some(f) = flights.get_mut(&key) {
                    if f.cancelled || f.ended {
                        process.kill();
                    }
                    f.process = Some(process.clone());
                }
            }
            Status::Output { stream, chunk } => {
                if let Some(token) = &progress {
                    let total = sent.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                    self.send(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                        "progressToken": token,
                        "progress": total,
                        "message": progress_text.text(stream, chunk),
                    }}));
                }
            }
            _ => {}
        };
        let mut built = Call::new(name, args)
            .context(&self.context)
            .approver(&approver)
            .on_status(&on_status)
            .principal(&self.principal);
        if let Some(answers) = &answers {
            built = built.answers(answers);
        }
        let result = match defer {
            Some(tickets) => built.run_deferred(&catalog, tickets),
            None => built.run(&catalog).map(Deferred::Ran),
        };
        // A ticket the retried call did not take (it needed no approval, or failed before
        // approval was asked) is refused, and recorded so.
        if let Some(answers) = &answers {
            for (_, e) in answers.audit_refused(&self.context) {
                eprintln!("packs serve: approval ticket refused: {e}");
            }
        }
        if let Some(failure) = self.context.audit().and_then(crate::audit::AuditLog::take_failure) {
            eprintln!("packs serve: {failure}; the call is not in the log");
        }
        if let Some(signal) = crate::runner::interrupted() {
            // The server was interrupted (the CLI asked for that): every tool ends, then
            // the server, with 128 + the signal.
            crate::runner::kill_all();
            eprintln!("packs serve: signal {signal}: running tools were ended");
            std::process::exit(128 + signal);
        }
        match self.finish(id) {
            Finished::Cancelled => {
                metrics.call_ended(label, "cancelled", started.elapsed());
                return; // cancelled: the client no longer expects an answer
            }
            Finished::Ended => {
                metrics.call_ended(label, "cancelled", started.elapsed());
                let message = "cancelled: the client's input ended (or the server is stopping) before the call \
                               finished, so packs ended it";
                return self.error(id, SERVER_ERROR, message);
            }
            Finished::Ran => {}
        }
        let result = match result {
            Ok(Deferred::Pending(pending)) => {
                // Not run: the client is asked, and retries with its answer and this ticket.
                metrics.call_ended(label, "approval_asked", started.elapsed());
                let (message, schema) = approval_question(&pending.request);
                return self.reply(
                    id,
                    json!({
                        "resultType": "input_required",
                        "inputRequests": {"approve": {"method": "elicitation/create",
                            "params": {"mode": "form", "message": message, "requestedSchema": schema}}},
                        "requestState": pending.ticket,
                        "_meta": {SERVER_INFO_KEY: server_info()},
                    }),
                );
            }
            Ok(Deferred::Ran(r)) => Ok(r),
            Err(e) => Err(e),
        };
        metrics.call_ended(label, outcome(&result), started.elapsed());
        let content =
            |text: String, is_error: bool| json!({"content": [{"type": "text", "text": text}], "isError": is_error});
        // For voice front-ends: whether to speak the result, and the text cut for speech.
        let meta = |r: &crate::call::ToolResult| json!({"dev.packs/speak": r.speak, "dev.packs/display": r.display});
        let response = match result {
            Ok(r) if r.ok => {
                let mut v = content(r.for_model(), false);
                v["_meta"] = meta(&r);
                if let Some(structured @ Value::Object(_)) = r.json {
                    v["structuredContent"] = structured;
                }
                v
            }
            Ok(r) => {
                let mut v = content(r.error_json().to_string(), true);
                v["_meta"] = meta(&r);
                v
            }
            Err(ToolError::NotFound(e)) => {
                let hint = match &e {
                    LookupError::NotFound { suggestion: Some(s), .. } => format!("; did you mean `{s}`?"),
                    _ => String::new(),
                };
                let message = match e {
                    LookupError::NotFound { .. } => format!("Unknown tool: {name}{hint}"),
                    other => other.to_string(),
                };
                return self.error(id, INVALID_PARAMS, &message);
            }
            Err(e) => content(e.to_json().to_string(), true),
        };
        self.reply(id, if stateless { stateless_result(response) } else { response });
    }

    /// The call is over: how it ended.
    fn finish(&self, id: &Value) -> Finished {
        match lock(&self.server.flights).remove(&self.flight_key(id)) {
            Some(f) if f.cancelled => Finished::Cancelled,
            Some(f) if f.ended => Finished::Ended,
            _ => Finished::Ran,
        }
    }

    /// Ask the client (MCP elicitation) whether a call may run.
    fn elicit(&self, request: &ApprovalRequest) -> bool {
        let id = format!("packs-{}", self.server.next_id.fetch_add(1, Ordering::Relaxed));
        let key = self.flight_key(&Value::String(id.clone()));
        let (tx, rx) = mpsc::channel();
        {
            let mut pending = lock(&self.server.pending);
            // Under the lock `close` takes: a client that hung up approves nothing.
            if self.closed.load(Ordering::SeqCst) {
                return false;
            }
            pending.insert(key.clone(), tx);
            lock(&self.asking).push(key);
        }
        let (message, schema) = approval_question(request);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
            "message": message,
            "requestedSchema": schema,
        }}));
        let Ok(answer) = rx.recv_timeout(ELICITATION_TIMEOUT) else { return false };
        answer.pointer("/result/action").and_then(Value::as_str) == Some("accept")
            && answer.pointer("/result/content/approve").and_then(Value::as_bool) == Some(true)
    }
}

/// How a call ended, for the metrics.
fn outcome(result: &Result<crate::call::ToolResult, ToolError>) -> &'static str {
    match result {
        Ok(r) if r.ok => "ok",
        Ok(_) => "failed",
        Err(ToolError::NotFound(_)) => "unknown_tool",
        Err(ToolError::InvalidArguments { .. } | ToolError::Validation { .. }) => "invalid",
        Err(ToolError::PermissionDenied { .. }) => "denied",
        Err(_) => "error",
    }
}

/// The stateless era's refusal of a version this server does not speak.
fn unsupported_version(requested: &Value) -> Value {
    json!({"code": UNSUPPORTED_VERSION, "message": "Unsupported protocol version",
           "data": {"supported": MODERN_VERSIONS, "requested": requested}})
}

/// Check a stateless-era request's envelope (its version and the client's capabilities);
/// the JSON-RPC error when it is not one this server accepts.
fn check_envelope(params: &Value) -> Result<&str, Value> {
    let invalid = |message: String| json!({"code": INVALID_PARAMS, "message": message});
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(invalid(format!(
            "params._meta must be an object carrying `{VERSION_KEY}` and `{CAPABILITIES_KEY}`"
        )));
    };
    let missing: Vec<&str> = [VERSION_KEY, CAPABILITIES_KEY].into_iter().filter(|k| !meta.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(invalid(format!("params._meta is missing the required envelope key(s): {}", missing.join(", "))));
    }
    match &meta[VERSION_KEY] {
        Value::String(v) if MODERN_VERSIONS.contains(&v.as_str()) => Ok(v),
        Value::String(v) => Err(unsupported_version(&Value::from(v.as_str()))),
        _ => Err(invalid(format!("`{VERSION_KEY}` must be a string"))),
    }
}

/// What a person is asked to approve a call: the message, and the form (one `approve`
/// boolean). Control and invisible characters are escaped: the client shows what will run.
fn approval_question(request: &ApprovalRequest) -> (String, Value) {
    let mut command = request.command_line();
    if let Some(cwd) = &request.cwd {
        command.push_str(&format!("\nin {}", crate::visible::os_word(cwd.as_os_str())));
    }
    for (k, v) in &request.env {
        command.push_str(&format!("\nenv: {}={}", crate::visible::prose(k), crate::visible::word(v)));
    }
    if let Some(stdin) = &request.stdin {
        command.push_str(&format!("\nstdin: {}", stdin.summary()));
    }
    let message = format!("Run `{}` (tier {})? {}.\n\n{command}", request.tool, request.tier, request.reason);
    let schema = json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Run it", "description": command}},
        "required": ["approve"],
    });
    (message, schema)
}

/// `name`, `title` and `version` of this server.
pub(crate) fn server_info() -> Value {
    json!({"name": "packs", "title": "packs", "version": env!("CARGO_PKG_VERSION")})
}

/// A stateless-era result: `resultType` (`complete` unless it says otherwise) and the
/// server's info stamped in `_meta`.
fn stateless_result(mut result: Value) -> Value {
    if let Value::Object(m) = &mut result {
        m.entry("resultType").or_insert_with(|| json!("complete"));
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.entry(SERVER_INFO_KEY).or_insert_with(server_info);
        }
    }
    result
}

/// What a retried stateless-era call answers: its `requestState` (the ticket; empty when
/// missing, so it is refused) and whether the person approved (the `approve` form accepted
/// with `approve: true`; anything else is no). None: it carries no answer.
fn retried(params: &Value) -> Option<(&str, bool)> {
    if params.get("requestState").is_none() && params.get("inputResponses").is_none() {
        return None;
    }
    let ticket = params.get("requestState").and_then(Value::as_str).unwrap_or_default();
    let answer = params.pointer("/inputResponses/approve");
    let approve = answer.and_then(|a| a.get("action")).and_then(Value::as_str) == Some("accept")
        && answer.and_then(|a| a.pointer("/content/approve")).and_then(Value::as_bool) == Some(true);
    Some((ticket, approve))
}

/// Approval for MCP calls: elicitation when the client declared it, else `--yes`, else deny.
struct Elicitor<'s> {
    peer: &'s Peer,
    yes: bool,
    /// On a stateless-era connection (the server cannot send the client a request there),
    /// the answer when the call's ticket does not settle it and it is not deferred.
    stateless: Option<bool>,
}

impl Approver for Elicitor<'_> {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        match self.stateless {
            Some(answer) => answer,
            None if self.peer.elicitation.load(Ordering::Relaxed) => self.peer.elicit(request),
            None => self.yes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxMode;

    /// A server over a pack directory of `manifests`, and a peer whose messages are kept.
    struct Harness {
        dir: tempfile::TempDir,
        /// Where the approval key is, when the harness made it (removed with it).
        _state: Option<tempfile::TempDir>,
        server: Arc<Server>,
        sent: Arc<Mutex<Vec<Value>>>,
    }

    impl Harness {
        fn new(manifests: &[Value]) -> Self {
            let state = tempfile::tempdir().unwrap();
            let tickets = Tickets::open(&state.path().join("approval.key")).unwrap();
            Harness { _state: Some(state), ..Self::with_tickets(manifests, Some(tickets)) }
        }

        /// A server whose approval tickets are sealed with `tickets` (None: no key).
        fn with_tickets(manifests: &[Value], tickets: Option<Tickets>) -> Self {
            Self::starting(manifests, tickets, None)
        }

        /// A server as [`Harness::with_tickets`] makes it, or, with `early`, one started from
        /// a listing snapshot of those entries (`Current::Loading`): its catalog loads when the
        /// test settles it.
        fn starting(manifests: &[Value], tickets: Option<Tickets>, early: Option<Arc<Early>>) -> Self {
            let dir = tempfile::tempdir().unwrap();
            for m in manifests {
                let name = m["name"].as_str().unwrap();
                std::fs::write(dir.path().join(format!("{name}.tool.json")), m.to_string()).unwrap();
            }
            let options = Options { approvals: tickets, ..Options::over(dir.path()) };
            let seal = Seal::derived(b"test key");
            let server = match early {
                None => Server::new(options, seal),
                Some(early) => Server::with(options, seal, Current::Loading(early)),
            };
            Harness { dir, _state: None, server, sent: Arc::new(Mutex::new(Vec::new())) }
        }

        fn peer_with(&self, key: &str, principal: &str, context: Context) -> Arc<Peer> {
            let sent = Arc::clone(&self.sent);
            let out = Box::new(move |v: Value| lock(&sent).push(v));
            Arc::new(Peer::new(&self.server, out, key.into(), principal.into(), context))
        }

        fn peer(&self) -> Arc<Peer> {
            self.peer_with(
                "k",
                "p",
                Context::new().with_sandbox(SandboxMode::Off).with_workspace(self.dir.path().into()),
            )
        }

        /// Everything sent since the last look.
        fn take(&self) -> Vec<Value> {
            std::mem::take(&mut *lock(&self.sent))
        }

        /// Handle `msg` on this thread (a call too) and return what was sent.
        fn answer(&self, peer: &Arc<Peer>, msg: Value) -> Vec<Value> {
            peer.handle_one(msg, None);
            self.take()
        }

        /// The stdio connection (`key`), with `--yes` or not, as `settled` left it.
        fn stdio_peer(&self, key: &str, settled: Settled, yes: bool) -> Arc<Peer> {
            let sent = Arc::clone(&self.sent);
            let out = Box::new(move |v: Value| lock(&sent).push(v));
            let context = Context::new().with_sandbox(SandboxMode::Off).with_workspace(self.dir.path().into());
            Arc::new(Peer::new(&self.server, out, key.into(), "p".into(), context).stdio(yes).settled(settled))
        }

        /// The first message sent that `wanted` picks, taken from those kept (20 s at most).
        fn wait_for(&self, wanted: impl Fn(&Value) -> bool) -> Value {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let mut sent = lock(&self.sent);
                if let Some(i) = sent.iter().position(&wanted) {
                    return sent.remove(i);
                }
                assert!(Instant::now() < deadline, "not sent within 20 s; sent: {sent:?}");
                drop(sent);
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        /// Handle `msg` on another thread; what was sent once it is handled (20 s at most).
        fn answer_within(&self, peer: &Arc<Peer>, msg: Value) -> Vec<Value> {
            let (tx, rx) = mpsc::channel();
            let peer = Arc::clone(peer);
            std::thread::spawn(move || {
                peer.handle_one(msg, None);
                let _ = tx.send(());
            });
            rx.recv_timeout(Duration::from_secs(20)).expect("the message is handled within 20 s");
            self.take()
        }
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "hello", "description": "d", "command": {"program": "echo", "args": ["hello"]}}),
            json!({"name": "data", "description": "d", "command": {"program": "echo", "args": ["{\"a\": 1}"]},
                   "output": {"format": "json"}}),
            json!({"name": "list", "description": "d", "command": {"program": "echo", "args": ["[1]"]},
                   "output": {"format": "json"}}),
            json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "exit 4"]}}),
            json!({"name": "coder", "description": "d", "command": "true", "modes": ["Coding"]}),
        ]
    }

    fn error_of(answers: &[Value]) -> (i64, String) {
        assert_eq!(answers.len(), 1, "{answers:?}");
        let e = &answers[0]["error"];
        (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_owned())
    }

    #[test]
    fn requests_are_routed_and_bad_json_rpc_is_refused_with_its_code() {
        let h = Harness::new(&tools());
        let peer = h.peer();
        assert_eq!(
            error_of(&h.answer(&peer, json!([1, 2]))),
            (INVALID_REQUEST, "a message must be a JSON object".into())
        );
        let (code, _) = error_of(&h.answer(&peer, json!({"jsonrpc": "2.0", "id": 1, "method": 7})));
        assert_eq!(code, INVALID_REQUEST);
        let answers = h.answer(&peer, json!({"jsonrpc": "2.0", "id": 2}));
        assert_eq!(error_of(&answers), (INVALID_REQUEST, "a request needs a `method`".into()));
        assert_eq!(answers[0]["id"], 2);
        let answers = h.answer(&peer, json!({"jsonrpc": "2.0", "id": 3, "method": "tools/nope"}));
        assert_eq!(error_of(&answers), (METHOD_NOT_FOUND, "unknown method `tools/nope`".into()));
        assert_eq!(
            h.answer(&peer, json!({"jsonrpc": "2.0", "id": 4, "method": "ping"})),
            [json!({"jsonrpc": "2.0", "id": 4, "result": {}})]
        );
        // A notification (no id) is never answered, even an unknown one.
        assert!(h.answer(&peer, json!({"jsonrpc": "2.0", "method": "notifications/whatever"})).is_empty());
        // A response to nothing we asked is dropped.
        assert!(h.answer(&peer, json!({"jsonrpc": "2.0", "id": "packs-9", "result": {}})).is_empty());
        // A null id is not an id.
        let (code, message) = error_of(&h.answer(&peer, json!({"jsonrpc": "2.0", "id": null, "method": "other"})));
        assert_eq!((code, message.as_str()), (INVALID_REQUEST, "a request needs an id"));
    }

    #[test]
    fn initialize_settles_the_version_and_batches_only_where_the_version_has_them() {
        let h = Harness::new(&tools());
        let pool = Pool::new("test", 2);
        let peer = h.peer();
        // Before `initialize`: no version, no batches.
        peer.handle(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), &pool);
        let (code, message) = error_of(&h.take());
        assert_eq!(code, INVALID_REQUEST);
        assert!(message.contains("protocol version none yet"), "{message}");
        let answers = h.answer(
            &peer,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {"elicitation": {}}}}),
        );
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(answers[0]["result"]["capabilities"]["tools"]["listChanged"], false);
        assert!(peer.settlement().elicitation);
        assert_eq!(peer.settlement().era, Some(Era::Handshake));
        peer.handle(json!([]), &pool);
        assert_eq!(error_of(&h.take()), (INVALID_REQUEST, "an empty batch".into()));
        peer.handle(
            json!([{"jsonrpc": "2.0", "id": 7, "method": "ping"}, {"jsonrpc": "2.0", "id": 8, "method": "ping"}]),
            &pool,
        );
        let start = Instant::now();
        while lock(&h.sent).is_empty() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let sent = h.take();
        assert_eq!(sent.len(), 1, "one array answers the batch: {sent:?}");
        let ids: Vec<&Value> = sent[0].as_array().unwrap().iter().map(|r| &r["id"]).collect();
        assert_eq!(ids, [&json!(7), &json!(8)]);
        // An unknown version is answered with the newest.
        let other = h.peer_with("k2", "p", Context::new());
        let answers = h.answer(
            &other,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "1999-01-01"}}),
        );
        assert_eq!(answers[0]["result"]["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert!(!other.settlement().elicitation);
        // A connection that opened with `initialize` refuses the stateless envelope.
        let enveloped = json!({"jsonrpc": "2.0", "id": 9, "method": "ping",
            "params": {"_meta": {VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}}});
        let (code, message) = error_of(&h.answer(&other, enveloped));
        assert_eq!(code, INVALID_REQUEST);
        assert!(message.contains("opened with `initialize`"), "{message}");
    }

    #[test]
    fn tools_list_offers_what_the_agent_and_mode_allow_page_by_page() {
        let h = Harness::new(&tools());
        let names = |peer: &Arc<Peer>| -> Vec<String> {
            let answers = h.answer(peer, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
            answers[0]["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let mut all = names(&h.peer());
        all.sort();
        assert_eq!(all, ["coder", "data", "fails", "hello", "list"]);
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("bot")).unwrap();
        std::fs::write(root.path().join("bot/agent.toml"), "deny = [\"fails\"]\nmode = \"Dictation\"\n").unwrap();
        let agent = crate::agent::Agent::load(root.path(), "bot").unwrap();
        let mut theirs = names(&h.peer_with("a", "bot", Context::new().with_agent(agent)));
        theirs.sort();
        assert_eq!(theirs, ["data", "hello", "list"]);
        let (code, message) = error_of(
            &h.answer(&h.peer(), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}})),
        );
        assert_eq!((code, message.as_str()), (INVALID_PARAMS, "invalid cursor `x`"));
    }

    #[test]
    fn tools_list_pages_by_cursor() {
        let manifests: Vec<Value> = (0..PAGE_SIZE + 3)
            .map(|i| json!({"name": format!("t{i:03}"), "description": "d", "command": "true"}))
            .collect();
        let h = Harness::new(&manifests);
        let peer = h.peer();
        let first = h.answer(&peer, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        assert_eq!(first[0]["result"]["tools"].as_array().unwrap().len(), PAGE_SIZE);
        let cursor = first[0]["result"]["nextCursor"].as_str().unwrap().to_owned();
        assert_eq!(cursor, PAGE_SIZE.to_string());
        let next =
            h.answer(&peer, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": cursor}}));
        assert_eq!(next[0]["result"]["tools"].as_array().unwrap().len(), 3);
        assert!(next[0]["result"].get("nextCursor").is_none());
        // Exactly one page: no cursor.
        let h = Harness::new(&manifests[..PAGE_SIZE]);
        let only = h.answer(&h.peer(), json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        assert!(only[0]["result"].get("nextCursor").is_none());
    }

    #[test]
    fn tools_call_answers_results_failures_and_unknown_names() {
        let h = Harness::new(&tools());
        let peer = h.peer();
        let call = |name: &str| json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name}});
        let ok = &h.answer(&peer, call("hello"))[0]["result"];
        assert_eq!(ok["content"][0]["text"], "hello\n");
        assert_eq!(ok["isError"], false);
        assert!(ok.get("structuredContent").is_none());
        assert_eq!(ok["_meta"]["dev.packs/display"], "hello");
        let data = &h.answer(&peer, call("data"))[0]["result"];
        assert_eq!(data["structuredContent"], json!({"a": 1}));
        // Only an object is structured content.
        let list = &h.answer(&peer, call("list"))[0]["result"];
        assert!(list.get("structuredContent").is_none(), "{list}");
        let failed = &h.answer(&peer, call("fails"))[0]["result"];
        assert_eq!(failed["isError"], true);
        let error: Value = serde_json::from_str(failed["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["exit_code"], 4);
        let (code, message) = error_of(&h.answer(&peer, call("helo")));
        assert_eq!((code, message.as_str()), (INVALID_PARAMS, "Unknown tool: helo; did you mean `hello`?"));
        assert_eq!(h.server.in_flight(), 0, "every call's flight is gone once answered");
        // Invalid arguments are a result the model can act on, not a protocol error.
        let bad =
            json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "hello", "arguments": 3}});
        let bad = &h.answer(&peer, bad)[0]["result"];
        assert_eq!(bad["isError"], true);
        assert!(bad["content"][0]["text"].as_str().unwrap().contains("\"kind\":\"validation\""), "{bad}");
    }

    #[test]
    fn cancellation_and_ending_are_kept_per_connection() {
        let h = Harness::new(&tools());
        let a = h.peer_with("a", "p", Context::new());
        let ab = h.peer_with("ab", "p", Context::new());
        for (peer, id) in [(&a, json!(1)), (&a, json!(2)), (&ab, json!(1))] {
            lock(&h.server.flights).insert(peer.flight_key(&id), Flight::default());
        }
        assert_eq!(h.server.in_flight(), 3);
        // The client cancels request 1 of `a`: only that one.
        a.handle_one(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}), None);
        assert!(h.take().is_empty(), "a cancellation is not answered");
        assert_eq!(a.finish(&json!(1)), Finished::Cancelled);
        assert_eq!(ab.finish(&json!(1)), Finished::Ran, "another connection's request 1 is not touched");
        // `a` hangs up: its calls end (not `ab`'s, whose key begins with `a`).
        lock(&h.server.flights).insert(ab.flight_key(&json!(1)), Flight::default());
        assert_eq!(a.end_calls(), 1);
        assert_eq!(a.finish(&json!(2)), Finished::Ended);
        assert_eq!(ab.finish(&json!(1)), Finished::Ran);
        assert_eq!(a.finish(&json!(3)), Finished::Ran, "an unknown call ran");
        assert_eq!(h.server.in_flight(), 0);
    }

    #[test]
    fn calls_past_the_limit_are_refused_until_one_ends() {
        let h = Harness::new(&tools());
        let peer = h.peer();
        for i in 0..MAX_CALLS {
            lock(&h.server.flights).insert(format!("other\0{i}"), Flight::default());
        }
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hello"}});
        let (code, message) = error_of(&h.answer(&peer, call.clone()));
        assert_eq!(code, SERVER_ERROR);
        assert_eq!(message, format!("{MAX_CALLS} calls are running; try again when one ends"));
        lock(&h.server.flights).remove("other\u{0}0");
        assert_eq!(h.answer(&peer, call)[0]["result"]["isError"], false);
    }

    /// A tool that needs approval and says what it ran with.
    fn careful() -> Value {
        json!({"name": "careful", "description": "d",
               "parameters": {"a": {"type": "string"}, "b": {"type": "integer"}},
               "command": {"program": "echo", "args": ["ran", "{{a}}", "{{b}}"]},
               "policy": {"confirm_before_run": true}})
    }

    /// A stateless-era `tools/call` of `careful` with `arguments`, and, when given, the
    /// retry's ticket and answer (`Some(true)`: the form accepted with `approve: true`).
    fn stateless_call(arguments: Value, ticket: Option<&str>, answer: Option<bool>) -> Value {
        let meta = json!({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {"elicitation": {}}});
        let mut params = json!({"name": "careful", "arguments": arguments, "_meta": meta});
        if let Some(ticket) = ticket {
            params["requestState"] = json!(ticket);
        }
        if let Some(yes) = answer {
            params["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": yes}}});
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    }

    /// The `requestState` an approval question carries.
    fn asked(answers: &[Value]) -> String {
        let result = &answers[0]["result"];
        assert_eq!(result["resultType"], "input_required", "{answers:?}");
        result["requestState"].as_str().unwrap().to_owned()
    }

    /// What a call's result says: its text, and whether it is an error.
    fn said(answers: &[Value]) -> (String, bool) {
        let result = &answers[0]["result"];
        (result["content"][0]["text"].as_str().unwrap_or_default().to_owned(), result["isError"] == true)
    }

    #[test]
    fn an_approval_ticket_runs_its_call_once_for_its_principal_tool_and_arguments() {
        let h = Harness::new(&[careful()]);
        let peer = h.peer();
        let args = json!({"b": 2, "a": "x"});
        let ask = || asked(&h.answer(&peer, stateless_call(args.clone(), None, None)));
        // The same arguments in another order are the same call: it runs, once.
        let ticket = ask();
        let ran = h.answer(&peer, stateless_call(json!({"a": "x", "b": 2}), Some(&ticket), Some(true)));
        assert_eq!(said(&ran), ("ran x 2\n".to_owned(), false));
        let replayed = said(&h.answer(&peer, stateless_call(args.clone(), Some(&ticket), Some(true))));
        assert!(replayed.1 && replayed.0.contains("the ticket was already used"), "{replayed:?}");
        // Another client, other arguments: refused, and the ticket still serves its own call,
        // once. A no is its answer: the ticket is spent.
        let workspace = || Context::new().with_sandbox(SandboxMode::Off).with_workspace(h.dir.path().into());
        let other = h.peer_with("k2", "q", workspace());
        let cases: [(&Arc<Peer>, Value, bool, &str); 3] = [
            (&other, args.clone(), true, "issued to another client"),
            (&peer, json!({"b": 3, "a": "x"}), true, "arguments differ"),
            (&peer, args.clone(), false, "was not approved"),
        ];
        for (who, arguments, yes, why) in cases {
            let ticket = ask();
            let (text, error) = said(&h.answer(who, stateless_call(arguments, Some(&ticket), Some(yes))));
            assert!(error && text.contains(why), "{why}: {text}");
            let right = stateless_call(args.clone(), Some(&ticket), Some(true));
            if yes {
                assert_eq!(said(&h.answer(&peer, right.clone())), ("ran x 2\n".to_owned(), false), "{why}");
            }
            let again = said(&h.answer(&peer, right));
            assert!(again.1 && again.0.contains("already used"), "{why}: {again:?}");
        }
        let (text, error) = said(&h.answer(&peer, stateless_call(args.clone(), None, Some(true))));
        assert!(error && text.contains("not one this approval key issued"), "{text}");
        // Tampered: one byte of the body changed.
        let ticket = ask();
        let mut bytes = ticket.clone().into_bytes();
        bytes[3] = if bytes[3] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        let (text, error) = said(&h.answer(&peer, stateless_call(args.clone(), Some(&tampered), Some(true))));
        assert!(error && text.contains("not one this approval key issued"), "{text}");
        let real = h.answer(&peer, stateless_call(args.clone(), Some(&ticket), Some(true)));
        assert_eq!(said(&real), ("ran x 2\n".to_owned(), false), "the real one still opens");
    }

    #[test]
    fn an_approval_ticket_opens_in_another_server_with_the_key_once_and_not_after_it_expires() {
        let state = tempfile::tempdir().unwrap();
        let key = state.path().join("approval.key");
        let first = Harness::with_tickets(&[careful()], Some(Tickets::open(&key).unwrap()));
        // Replicas serve the same tools in the same workspace.
        let peer = |h: &Harness| {
            let context = Context::new().with_sandbox(SandboxMode::Off).with_workspace(state.path().into());
            h.peer_with("k", "p", context)
        };
        let args = json!({"a": "x", "b": 1});
        let ticket = asked(&first.answer(&peer(&first), stateless_call(args.clone(), None, None)));
        // Another server (a replica, or this one restarted) opening the same key file.
        let second = Harness::with_tickets(&[careful()], Some(Tickets::open(&key).unwrap()));
        let retry = stateless_call(args.clone(), Some(&ticket), Some(true));
        assert_eq!(said(&second.answer(&peer(&second), retry.clone())), ("ran x 1\n".to_owned(), false));
        let replayed = said(&first.answer(&peer(&first), retry));
        assert!(replayed.1 && replayed.0.contains("already used"), "{replayed:?}");
        // Another key: not its ticket.
        let stranger = Harness::with_tickets(&[careful()], Some(Tickets::open(&state.path().join("k2")).unwrap()));
        let ticket = asked(&first.answer(&first.peer(), stateless_call(args.clone(), None, None)));
        let (text, _) =
            said(&stranger.answer(&stranger.peer(), stateless_call(args.clone(), Some(&ticket), Some(true))));
        assert!(text.contains("not one this approval key issued"), "{text}");
        // Expired: a ticket valid for no time at all.
        let brief = Harness::with_tickets(&[careful()], Some(Tickets::open(&key).unwrap().ttl(Duration::ZERO)));
        let ticket = asked(&brief.answer(&brief.peer(), stateless_call(args.clone(), None, None)));
        let (text, error) = said(&brief.answer(&brief.peer(), stateless_call(args.clone(), Some(&ticket), Some(true))));
        assert!(error && text.contains("the ticket expired at"), "{text}");
        // Without a key the call is not deferred: denied (no --yes), and a retry is refused.
        let keyless = Harness::with_tickets(&[careful()], None);
        let (text, error) = said(&keyless.answer(&keyless.peer(), stateless_call(args.clone(), None, None)));
        assert!(error && text.contains("was not approved"), "{text}");
        let (text, error) = said(&keyless.answer(&keyless.peer(), stateless_call(args, Some(&ticket), Some(true))));
        assert!(error && text.contains("was not approved"), "{text}");
    }

    #[test]
    fn a_stateless_request_needs_its_envelope_and_a_version_this_server_speaks() {
        assert!(
            check_envelope(&json!({})).unwrap_err()["message"]
                .as_str()
                .unwrap()
                .starts_with("params._meta must be an object")
        );
        let missing = check_envelope(&json!({"_meta": {VERSION_KEY: "2026-07-28"}})).unwrap_err();
        assert_eq!(missing["code"], INVALID_PARAMS);
        assert!(missing["message"].as_str().unwrap().ends_with(CAPABILITIES_KEY), "{missing}");
        let old = check_envelope(&json!({"_meta": {VERSION_KEY: "2025-11-25", CAPABILITIES_KEY: {}}})).unwrap_err();
        assert_eq!(old["code"], UNSUPPORTED_VERSION);
        assert_eq!(old["data"]["requested"], "2025-11-25");
        let number = check_envelope(&json!({"_meta": {VERSION_KEY: 1, CAPABILITIES_KEY: {}}})).unwrap_err();
        assert_eq!(number["code"], INVALID_PARAMS);
        assert_eq!(
            check_envelope(&json!({"_meta": {VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}})),
            Ok("2026-07-28")
        );
        // Results carry `resultType` (kept when set) and the server's info.
        let r = stateless_result(json!({"resultType": "input_required", "_meta": {"x": 1}}));
        assert_eq!(r["resultType"], "input_required");
        assert_eq!((r["_meta"]["x"].as_i64(), &r["_meta"][SERVER_INFO_KEY]), (Some(1), &server_info()));
        assert_eq!(stateless_result(json!({}))["resultType"], "complete");
    }

    #[test]
    fn a_stateless_connection_answers_with_result_types_and_asks_for_approval_by_token() {
        let h = Harness::new(&[json!({"name": "careful", "description": "d",
            "command": {"program": "echo", "args": ["ran"]}, "policy": {"confirm_before_run": true}})]);
        let peer = h.peer();
        let meta = json!({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {"elicitation": {}}});
        let discover =
            h.answer(&peer, json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}));
        assert_eq!(discover[0]["result"]["supportedVersions"], json!(MODERN_VERSIONS));
        assert_eq!(peer.settlement().era, Some(Era::Stateless));
        let init = h.answer(
            &peer,
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2026-07-28"}}),
        );
        assert_eq!(init[0]["error"]["code"], UNSUPPORTED_VERSION);
        let call =
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "careful", "_meta": meta}});
        let asked = h.answer(&peer, call.clone());
        let result = &asked[0]["result"];
        assert_eq!(result["resultType"], "input_required");
        let token = result["requestState"].as_str().unwrap().to_owned();
        let mut retry = call.clone();
        retry["params"]["requestState"] = json!(token);
        retry["params"]["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": true}}});
        let ran = h.answer(&peer, retry.clone());
        assert_eq!(ran[0]["result"]["content"][0]["text"], "ran\n");
        assert_eq!(ran[0]["result"]["resultType"], "complete");
        let replayed = h.answer(&peer, retry);
        assert_eq!(replayed[0]["result"]["isError"], true, "{replayed:?}");
    }

    #[test]
    fn metrics_outcomes_name_each_way_a_call_ends() {
        let denied = ToolError::PermissionDenied {
            tool: "t".into(),
            tier: crate::policy::Tier::Elevated,
            reason: crate::call::Denial::NotAllowed { agent: "a".into() },
        };
        assert_eq!(outcome(&Err(denied)), "denied");
        assert_eq!(outcome(&Err(ToolError::InvalidArguments { tool: "t".into(), message: String::new() })), "invalid");
        assert_eq!(outcome(&Err(ToolError::Validation { tool: "t".into(), errors: Vec::new() })), "invalid");
        assert_eq!(outcome(&Err(ToolError::BrokenTool { tool: "t".into(), message: String::new() })), "error");
    }

    #[test]
    fn the_approval_question_shows_what_runs_with_control_characters_escaped() {
        let request = ApprovalRequest {
            tool: "rm".into(),
            reason: crate::call::ApprovalReason::Elevated,
            tier: crate::policy::Tier::Elevated,
            argv: vec!["rm".into(), "a\u{1b}[2Jb".into()],
            cwd: Some("/w".into()),
            env: vec![("K".into(), "v".into())],
            stdin: None,
        };
        let (message, schema) = approval_question(&request);
        assert!(message.starts_with("Run `rm` (tier elevated)? its tier is elevated."), "{message}");
        assert!(!message.contains('\u{1b}'), "{message:?}");
        assert!(message.contains("\nin /w") && message.contains("\nenv: K=v"), "{message}");
        assert_eq!(schema["required"], json!(["approve"]));
    }

    /// The codes are the numbers the specifications give (JSON-RPC 2.0's, and MCP's for an
    /// unsupported protocol version), not only whatever the constants hold.
    #[test]
    fn error_codes_are_the_specifications_numbers() {
        assert_eq!(
            [PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR],
            [-32700, -32600, -32601, -32602, -32603]
        );
        assert_eq!((SERVER_ERROR, UNSUPPORTED_VERSION), (-32000, -32022));
    }

    #[test]
    fn the_server_names_itself_packs_at_its_version() {
        assert_eq!(server_info(), json!({"name": "packs", "title": "packs", "version": env!("CARGO_PKG_VERSION")}));
    }

    /// Each call is counted under how it ended: a tool that ran and succeeded, one that ran and
    /// failed, a name no tool has.
    #[test]
    fn the_metrics_count_each_call_under_how_it_ended() {
        let h = Harness::new(&tools());
        let peer = h.peer();
        h.answer(
            &peer,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        );
        for (id, name) in [(2, "hello"), (3, "fails"), (4, "nope")] {
            h.answer(&peer, json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name}}));
        }
        let text = h.server.metrics.render();
        assert!(text.contains(r#"packs_calls_total{tool="hello",outcome="ok"} 1"#), "{text}");
        assert!(text.contains(r#"packs_calls_total{tool="fails",outcome="failed"} 1"#), "{text}");
        assert!(text.contains(r#"packs_calls_total{tool="(unknown)",outcome="unknown_tool"} 1"#), "{text}");
    }

    /// Wait (20 s at most) until `done`; whether it came.
    fn within(done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// A pool the test never waits for: a test that fails while a call still runs (its tool
    /// never ended) fails at once instead of waiting for it.
    fn detached_pool() -> &'static Pool {
        Box::leak(Box::new(Pool::new("test", 8)))
    }

    /// A handshake-era connection (2025-11-25) that declared elicitation or not.
    fn handshake(elicitation: bool) -> Settled {
        Settled { era: Some(Era::Handshake), version: Some("2025-11-25"), elicitation }
    }

    /// A `tools/call` of `careful` (which needs approval) as request `id`.
    fn careful_call(id: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "careful", "arguments": {"a": "x", "b": 1}}})
    }

    /// A tool that touches `marker` once it runs, then sleeps for five minutes.
    fn sleeper(marker: &std::path::Path, confirm: bool) -> Value {
        json!({"name": "sleeper", "description": "d",
               "command": {"program": "sh", "args": ["-c", format!("touch '{}'; exec sleep 300", marker.display())]},
               "policy": {"timeout_secs": 600, "confirm_before_run": confirm, "read_only": false}})
    }

    /// The workers have room for `MAX_CALLS` calls and as many more still returning from
    /// answered ones: `2 * MAX_CALLS` jobs are taken at once, and the next is refused.
    #[test]
    fn the_call_pool_takes_twice_max_calls_jobs_at_once() {
        let pool = call_pool();
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let mut taken = Vec::new();
        for _ in 0..2 * MAX_CALLS {
            let gate = Arc::clone(&gate);
            let job = move || {
                let mut open = lock(&gate.0);
                while !*open {
                    open = gate.1.wait(open).unwrap();
                }
            };
            taken.push(pool.submit(job).is_ok());
        }
        let refused = pool.submit(|| {});
        // Open the gate before judging: a failing test must not wait for its jobs for ever.
        *lock(&gate.0) = true;
        gate.1.notify_all();
        assert_eq!(taken.iter().filter(|&&ok| ok).count(), 2 * MAX_CALLS, "{taken:?}");
        assert!(matches!(refused, Err(crate::pool::Refused::Full(n)) if n == 2 * MAX_CALLS), "{refused:?}");
    }

    /// A listing snapshot's entries, page by page; a line that is not JSON spoils every page
    /// that holds it (the catalog then answers).
    #[test]
    fn a_snapshots_page_is_its_lines_from_the_cursor_on() {
        let early = Early::new(b"{\"name\": \"a\"}\n{\"name\": \"b\"}\n{\"name\": \"c\"}\n".to_vec());
        let names = |page: Option<Vec<Value>>| page.map(|p| p.iter().map(|e| e["name"].clone()).collect::<Vec<_>>());
        assert_eq!(names(early.page(0, 2)), Some(vec![json!("a"), json!("b")]));
        assert_eq!(names(early.page(1, 100)), Some(vec![json!("b"), json!("c")]));
        assert_eq!(names(early.page(3, 100)), Some(vec![]));
        assert_eq!(names(early.page(9, usize::MAX)), Some(vec![]));
        let spoilt = Early::new(b"{\"name\": \"a\"}\nnot json\n".to_vec());
        assert_eq!(names(spoilt.page(0, 1)), Some(vec![json!("a")]));
        assert_eq!(spoilt.page(0, 2), None);
    }

    /// A server started from a snapshot (`Current::Loading`): the stdio connection's
    /// `tools/list` is the snapshot's while the catalog loads, another connection's waits for
    /// the catalog; `settle` loads it, says whether what is offered differs from what the
    /// snapshot offered, and from then on the catalog answers.
    #[test]
    fn a_snapshot_answers_for_the_catalog_until_it_is_settled() {
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let listed = |answers: &[Value]| answers[0]["result"]["tools"].clone();
        // What the catalog offers the server's own context, and its snapshot: those entries,
        // one a line.
        let h = Harness::new(&tools());
        let context = h.server.options.context.clone();
        let offered = listed(&h.answer(&h.peer_with("own", "p", context.clone()), list.clone()));
        assert_eq!(offered.as_array().unwrap().len(), 5, "{offered}");
        let text = snapshot_text(&context, &h.server.catalog());
        let lines: Vec<Value> =
            text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        assert_eq!((Value::Array(lines), text.last()), (offered.clone(), Some(&b'\n')));
        // Started from a snapshot that no longer says what the catalog offers.
        let forged = json!({"name": "forged", "description": "stale", "inputSchema": {"type": "object"}});
        let early = Arc::new(Early::new(format!("{forged}\n").into_bytes()));
        let h = Harness::starting(&tools(), None, Some(Arc::clone(&early)));
        let stdio = h.stdio_peer("s", handshake(false), false);
        assert_eq!(listed(&h.answer_within(&stdio, list.clone())), json!([forged]));
        // Another connection (whose context the snapshot was not made in) waits for the catalog.
        let other = h.peer_with("other", "p", context.clone());
        let waiting = std::thread::spawn({
            let list = list.clone();
            move || other.handle_one(list, None)
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(h.take().is_empty(), "answered before the catalog loaded");
        assert!(h.server.settle(Startup::Load(early)), "what is offered changed");
        assert_eq!(h.wait_for(|m| m["id"] == 1)["result"]["tools"], offered);
        waiting.join().unwrap();
        assert!(h.server.early().is_none());
        // (The stdio peer's context runs tools unconfined: the same tools, other sandbox notes.)
        let names = |tools: &Value| tools.as_array().unwrap().iter().map(|t| t["name"].clone()).collect::<Vec<_>>();
        let now = listed(&h.answer_within(&stdio, list));
        assert_eq!(names(&now), names(&offered), "once settled, the catalog answers");
        // Started from a current snapshot: settling it changes nothing a client sees.
        let h = Harness::starting(&tools(), None, Some(Arc::new(Early::new(text))));
        assert!(!h.server.settle(Startup::Load(h.server.early().unwrap())));
    }

    /// `Server::start` looks for a listing snapshot only without `--locked` (a lock file is
    /// not in a snapshot's fingerprint): a first start keeps one, the next starts from it.
    #[test]
    fn a_server_starts_from_its_listing_snapshot_only_without_a_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        for m in tools() {
            std::fs::write(dir.path().join(format!("{}.tool.json", m["name"].as_str().unwrap())), m.to_string())
                .unwrap();
        }
        let cache = tempfile::tempdir().unwrap();
        let options = |locked: Option<crate::lock::Locked>| Options {
            search: SearchPath::dirs([dir.path()])
                .with_describe_cache(Some(crate::describe_cache::DescribeCache::new(cache.path()))),
            locked,
            snapshot: Some(vec![dir.path().to_owned()]),
            ..Options::over(dir.path())
        };
        let lock_file = crate::lock::Locked { lockfile: dir.path().join("packs.lock"), verify: None };
        let (_, startup) = Server::start(options(Some(lock_file)), Seal::derived(b"k"));
        assert!(matches!(startup, Startup::Done), "a snapshot was looked up under --locked");
        // A snapshot is kept only of files that had settled when they were read.
        std::thread::sleep(crate::describe_cache::DescribeCache::SETTLE + Duration::from_millis(100));
        let (first, startup) = Server::start(options(None), Seal::derived(b"k"));
        assert!(matches!(startup, Startup::Store(_)), "no snapshot was looked up");
        assert!(!first.settle(startup));
        let (second, startup) = Server::start(options(None), Seal::derived(b"k"));
        let Startup::Load(early) = startup else { panic!("the snapshot kept is not used") };
        assert_eq!(early.text, snapshot_text(&first.options.context, &first.catalog()));
        assert!(!second.settle(Startup::Load(early)));
    }

    /// `--watch`: what is watched is every manifest with its time and size; a reload tells
    /// whether what a client is offered changed (a broken edit keeps the last good version:
    /// no change), and the watcher reloads when a file changes, until it is stopped.
    #[test]
    fn reload_and_watch_tell_a_change_of_what_is_offered_and_only_that() {
        let h = Harness::new(&tools());
        let mut files: Vec<(std::path::PathBuf, bool, u64)> =
            watched(&h.server).into_iter().map(|(path, time, len)| (path, time.is_some(), len)).collect();
        files.sort();
        let mut expected: Vec<(std::path::PathBuf, bool, u64)> = std::fs::read_dir(h.dir.path())
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let len = std::fs::metadata(&path).unwrap().len();
                (path, true, len)
            })
            .collect();
        expected.sort();
        assert_eq!(files, expected);
        let file = h.dir.path().join("hello.tool.json");
        let good = std::fs::read_to_string(&file).unwrap();
        assert!(!h.server.reload(), "nothing changed");
        std::fs::write(&file, "{ not json").unwrap();
        assert!(!h.server.reload(), "a broken edit keeps the last good version");
        std::fs::write(&file, good.replace("\"d\"", "\"changed\"")).unwrap();
        assert!(h.server.reload(), "a description changed");
        // The watcher, on its own thread, sees a change and tells it once.
        let stop = Arc::new(AtomicBool::new(false));
        let told = Arc::new(AtomicU64::new(0));
        let watcher = std::thread::spawn({
            let (server, stop, told) = (Arc::clone(&h.server), Arc::clone(&stop), Arc::clone(&told));
            let last = watched(&server);
            move || {
                watch(&server, last, &stop, &|| {
                    let _ = told.fetch_add(1, Ordering::SeqCst);
                })
            }
        });
        std::thread::sleep(WATCH_INTERVAL * 2);
        assert_eq!(told.load(Ordering::SeqCst), 0, "told of a change that did not happen");
        std::fs::write(&file, good.replace("\"d\"", "\"changed again\"")).unwrap();
        assert!(within(|| told.load(Ordering::SeqCst) == 1), "the change was not told");
        stop.store(true, Ordering::SeqCst);
        watcher.join().unwrap();
    }

    /// A client that declared elicitation is asked (`elicitation/create`) and its answer
    /// decides: only the form accepted with `approve: true` runs the call. One that did not is
    /// never asked: `--yes` approves, else no. A client that hangs up while asked is denied at
    /// once, and asked nothing more.
    #[test]
    fn a_client_that_answers_forms_is_asked_and_only_an_accepted_yes_runs_the_call() {
        let h = Harness::new(&[careful()]);
        let pool = detached_pool();
        let peer = h.stdio_peer("s", handshake(true), false);
        let cases =
            [("accept", true, true), ("accept", false, false), ("decline", true, false), ("cancel", true, false)];
        for (id, (action, approve, runs)) in (1..).zip(cases) {
            peer.handle(careful_call(id), pool);
            let asked = h.wait_for(|m| m["method"] == "elicitation/create");
            let message = asked["params"]["message"].as_str().unwrap();
            assert!(message.starts_with("Run `careful` (tier"), "{message}");
            let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": action, "content": {"approve": approve}}});
            peer.handle_one(answer, None);
            let (text, error) = said(&[h.wait_for(|m| m["id"] == id)]);
            if runs {
                assert_eq!((text.as_str(), error), ("ran x 1\n", false), "{action} {approve}");
            } else {
                assert!(error && text.contains("was not approved"), "{action} {approve}: {text}");
            }
        }
        for yes in [true, false] {
            let quiet = h.stdio_peer(&format!("quiet {yes}"), handshake(false), yes);
            let sent = h.answer_within(&quiet, careful_call(9));
            assert!(sent.iter().all(|m| m["method"] != "elicitation/create"), "{sent:?}");
            let (text, error) = said(&sent);
            assert_eq!(!error, yes, "--yes {yes}: {text}");
        }
        peer.handle(careful_call(20), pool);
        h.wait_for(|m| m["method"] == "elicitation/create");
        peer.close();
        let (text, error) = said(&[h.wait_for(|m| m["id"] == 20)]);
        assert!(error && text.contains("was not approved"), "{text}");
        let sent = h.answer_within(&peer, careful_call(21));
        assert!(sent.iter().all(|m| m["method"] != "elicitation/create"), "{sent:?}");
        assert!(said(&sent).1, "{sent:?}");
    }

    /// Only a stateless-era client that can answer a form, calling without a retry's answer,
    /// is asked by an `input_required` result: a stateless one that cannot, or a handshake-era
    /// one (whatever its `_meta` says), is denied at once without `--yes`.
    #[test]
    fn only_a_stateless_client_that_answers_forms_is_asked_by_a_ticket() {
        let h = Harness::new(&[careful()]);
        let meta = json!({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}});
        let mut call = careful_call(1);
        call["params"]["_meta"] = meta;
        let (text, error) = said(&h.answer(&h.peer(), call));
        assert!(error && text.contains("was not approved"), "{text}");
        let mut call = careful_call(2);
        call["params"]["_meta"] = json!({CAPABILITIES_KEY: {"elicitation": {}}});
        let (text, error) = said(&h.answer_within(&h.stdio_peer("s", handshake(false), false), call));
        assert!(error && text.contains("was not approved"), "{text}");
    }

    /// A call's process is recorded once it starts: cancelling the call (the client) or
    /// ending it (packs) kills it, and a call cancelled before its process started (while
    /// its approval was asked) has its process killed as it starts.
    #[test]
    fn a_cancelled_or_ended_call_ends_its_tool() {
        let marks = tempfile::tempdir().unwrap();
        let started = marks.path().join("started");
        let h = Harness::new(&[sleeper(&started, false)]);
        let pool = detached_pool();
        let peer = h.peer();
        let call = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "sleeper"}});
        let cancel =
            |id: i64| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
        peer.handle(call(1), pool);
        assert!(within(|| started.exists()), "the tool never started");
        peer.handle(cancel(1), pool);
        assert!(within(|| h.server.in_flight() == 0), "the cancelled call's tool still runs");
        assert!(pool.wait_idle(Instant::now() + Duration::from_secs(20)));
        assert!(h.take().is_empty(), "a cancelled call is not answered");
        std::fs::remove_file(&started).unwrap();
        peer.handle(call(2), pool);
        assert!(within(|| started.exists()), "the tool never started");
        assert_eq!(peer.end_calls(), 1);
        let (code, message) = error_of(&[h.wait_for(|m| m["id"] == 2)]);
        assert_eq!(code, SERVER_ERROR);
        assert!(message.starts_with("cancelled: the client's input ended"), "{message}");
        // Cancelled while its approval is asked: the process it then starts is killed at once.
        let h = Harness::new(&[sleeper(&started, true)]);
        let peer = h.stdio_peer("s", handshake(true), false);
        peer.handle(call(3), pool);
        let asked = h.wait_for(|m| m["method"] == "elicitation/create");
        peer.handle(cancel(3), pool);
        peer.handle_one(
            json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"approve": true}}}),
            None,
        );
        assert!(within(|| h.server.in_flight() == 0), "the tool of a call cancelled before it started still runs");
        assert!(pool.wait_idle(Instant::now() + Duration::from_secs(20)));
        assert!(h.take().is_empty(), "a cancelled call is not answered");
    }

    /// A call with a `progressToken` gets a `notifications/progress` per read of its output:
    /// the bytes so far, and the text read.
    #[test]
    fn progress_counts_the_bytes_of_output_so_far() {
        let split = json!({"name": "split", "description": "d",
            "command": {"program": "sh", "args": ["-c", "printf ab; sleep 0.3; printf 'cde\\n'"]}});
        let h = Harness::new(&[split]);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "split", "_meta": {"progressToken": "t"}}});
        let sent = h.answer(&h.peer(), call);
        let progress: Vec<&Value> = sent.iter().filter(|m| m["method"] == "notifications/progress").collect();
        assert!(!progress.is_empty(), "{sent:?}");
        // However the output was cut into reads, each says how many bytes came so far.
        let mut so_far = 0;
        for p in &progress {
            so_far += p["params"]["message"].as_str().unwrap().len();
            assert_eq!(
                (&p["params"]["progressToken"], &p["params"]["progress"]),
                (&json!("t"), &json!(so_far)),
                "{sent:?}"
            );
        }
        assert_eq!(so_far, 6);
        assert_eq!(sent.last().unwrap()["result"]["content"][0]["text"], "abcde\n");
    }

    /// `readOnlyHint` (clients auto-approve on it) is claimed only for a `read_only` tool
    /// without `policy.writable` whose writes and signals the kernel confines here: not with
    /// the sandbox off, not for a tool that names places to write. (On a kernel that confines
    /// writes and signals, Landlock ABI 6 and seccomp, as the sandbox's tests require.)
    #[test]
    fn only_a_read_only_tool_the_kernel_confines_is_listed_read_only() {
        let h = Harness::new(&[
            json!({"name": "reader", "description": "d", "command": "true", "policy": {"read_only": true}}),
            json!({"name": "scribe", "description": "d", "command": "true",
                   "policy": {"read_only": true, "writable": ["/tmp/packs-scribe"]}}),
        ]);
        let hints = |mode: SandboxMode| -> Vec<(String, Value, Value)> {
            let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
            let answers = h.answer(&h.peer_with("h", "p", Context::new().with_sandbox(mode)), list);
            let tools = answers[0]["result"]["tools"].as_array().unwrap();
            let hint = |t: &Value, k: &str| t["annotations"][k].clone();
            let mut hints: Vec<_> = tools
                .iter()
                .map(|t| (t["name"].as_str().unwrap().to_owned(), hint(t, "readOnlyHint"), hint(t, "destructiveHint")))
                .collect();
            hints.sort_by(|a, b| a.0.cmp(&b.0));
            hints
        };
        let (yes, no) = (json!(true), json!(false));
        let reader = |read_only: &Value| ("reader".to_owned(), read_only.clone(), json!(read_only == &no));
        let scribe = ("scribe".to_owned(), no.clone(), yes.clone());
        assert_eq!(hints(SandboxMode::Enforce), [reader(&yes), scribe.clone()]);
        assert_eq!(hints(SandboxMode::Off), [reader(&no), scribe]);
    }
}
