//! `packs serve`: a pack directory as a Model Context Protocol server over stdio.
//!
//! Newline-delimited JSON-RPC 2.0 on stdin/stdout (stdout carries protocol messages
//! only; logs go to stderr). Hand-written rather than built on the official SDK: the
//! server needs six methods and three notifications, and owning the loop keeps calls
//! on packs' own threads and dispatcher (see docs/ARCHITECTURE.md).
//!
//! Every `tools/call` runs on a worker of a bounded pool (`MAX_CALLS` at once) through the
//! same pipeline as `packs run`, so a slow tool never blocks `ping` or other calls;
//! cancellation kills the call's process group; approval uses MCP elicitation when the
//! client offers it.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::call::{ApprovalRequest, Approver, Call, Context, Status, ToolError};
use crate::catalog::{Catalog, LookupError, SearchPath};
use crate::pool::Pool;

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

/// After the client's input ends, how long calls still running may take to answer
/// before they are ended.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Most `tools/call` requests running at once; one more is refused until one ends.
const MAX_CALLS: usize = 64;

/// The longest message a client may send (one line); a longer one is answered with a
/// parse error and skipped, never held in memory.
const MAX_MESSAGE: u64 = 16 << 20;

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

/// How many approvals asked of a stateless-era client may wait for its answer at once.
const MAX_PENDING_APPROVALS: usize = 1024;

/// The era a connection speaks, decided by its first request and never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// `initialize`, then requests without an envelope (2025-11-25 and earlier).
    Handshake,
    /// Every request carries its own envelope (2026-07-28).
    Stateless,
}

/// An approval a stateless-era client was asked for (an `input_required` result): the
/// call it is for, bound by the tool's name and the canonical JSON of its arguments.
struct AskedApproval {
    tool: String,
    arguments: String,
    asked: std::time::Instant,
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
}

/// One in-flight call: its process once started, and whether it was cancelled.
#[derive(Default)]
struct Flight {
    process: Option<crate::runner::Process>,
    cancelled: bool,
}

struct Server {
    out: Mutex<Box<dyn Write + Send>>,
    catalog: RwLock<Arc<Catalog>>,
    options: Options,
    elicitation: AtomicBool,
    flights: Mutex<HashMap<String, Flight>>,
    pending: Mutex<HashMap<String, mpsc::Sender<Value>>>,
    next_id: AtomicU64,
    /// The protocol version `initialize` settled on.
    version: Mutex<Option<&'static str>>,
    /// The client hung up: approvals are denied, calls are ended.
    closed: AtomicBool,
    /// The connection's era, once its first request has decided it.
    era: Mutex<Option<Era>>,
    /// Approvals asked of a stateless-era client, by the `requestState` that names them.
    asked: Mutex<HashMap<String, AskedApproval>>,
    /// Makes `requestState` tokens unguessable (read from the OS at start).
    salt: u128,
}

thread_local! {
    /// While a batch is handled (on one thread, in order), the responses it produces,
    /// sent together as one array at its end.
    static BATCH: std::cell::RefCell<Option<Vec<Value>>> = const { std::cell::RefCell::new(None) };
}

/// Serve until `input` ends; then deny approvals still waiting, give calls still running
/// two seconds to answer, and end the rest.
pub fn serve(options: Options, input: impl BufRead, output: impl Write + Send + 'static) -> std::io::Result<()> {
    let catalog = load(&options, None);
    let server = Arc::new(Server {
        out: Mutex::new(Box::new(output)),
        catalog: RwLock::new(Arc::new(catalog)),
        options,
        elicitation: AtomicBool::new(false),
        flights: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        version: Mutex::new(None),
        closed: AtomicBool::new(false),
        era: Mutex::new(None),
        asked: Mutex::new(HashMap::new()),
        salt: random_salt(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = server.options.watch.then(|| {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("packs-watch".into())
            .spawn(move || watch(&server, &stop))
            .inspect_err(|e| eprintln!("packs serve: --watch is off: cannot start its thread: {e}"))
            .ok()
    });
    let pool = Pool::new("packs-call", MAX_CALLS);
    let mut input = input;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        // Lines are read as bytes: one that is not UTF-8 gets a parse error like any
        // other bad line, and the server goes on.
        if std::io::Read::take(&mut input, MAX_MESSAGE + 1).read_until(b'\n', &mut bytes)? == 0 {
            break;
        }
        if bytes.len() as u64 > MAX_MESSAGE {
            // Drop the rest of the line unread into memory, answer, go on.
            let ended = skip_line(&mut input)?;
            server.error(
                &Value::Null,
                PARSE_ERROR,
                &format!("a message longer than {} MiB is refused", MAX_MESSAGE >> 20),
            );
            if !ended {
                break;
            }
            continue;
        }
        let Ok(line) = std::str::from_utf8(&bytes) else {
            server.error(&Value::Null, PARSE_ERROR, "not JSON: the line is not valid UTF-8");
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(msg) => server.handle(msg, &pool),
            Err(e) => server.error(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}")),
        }
    }
    // The client sent its last request: nobody is left to approve, and calls still
    // running get a short grace to answer (`echo REQUEST | packs serve` works), then end.
    server.deny_approvals();
    if !pool.wait_idle(std::time::Instant::now() + CLOSE_GRACE) {
        server.end_calls();
    }
    pool.close();
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = watcher.flatten() {
        let _ = w.join();
    }
    Ok(())
}

/// 128 bits from the OS (`/dev/urandom`), mixed with the time and the pid when it cannot be read.
fn random_salt() -> u128 {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok() {
        return u128::from_le_bytes(bytes);
    }
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    now ^ (u128::from(std::process::id()) << 64)
}

/// Read up to the end of the current line without keeping it; false at the end of input.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<bool> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        match memchr::memchr(b'\n', buf) {
            Some(at) => {
                input.consume(at + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
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

fn watch(server: &Server, stop: &AtomicBool) {
    let mut last = fingerprint(&server.options);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_INTERVAL);
        let now = fingerprint(&server.options);
        if now == last {
            continue;
        }
        last = now;
        let previous = server.catalog.read().map(|c| Arc::clone(&c)).ok();
        let catalog = Arc::new(load(&server.options, previous.as_deref()));
        // A broken edit keeps the last good version: then what a client sees has not changed.
        let changed = previous.as_ref().is_none_or(|p| server.listing(p) != server.listing(&catalog));
        if let Ok(mut slot) = server.catalog.write() {
            *slot = catalog;
        }
        // The stateless era has no standing notifications (its lists are never cached: ttlMs 0).
        if changed && !server.is_stateless() {
            server.send(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
    }
}

impl Server {
    fn send(&self, msg: &Value) {
        let mut line = msg.to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A client that went away cannot be told anything; the loop ends with its stdin.
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    }

    /// Send a response, or keep it for the batch this thread is answering.
    fn respond(&self, response: Value) {
        let kept = BATCH.with(|b| match b.borrow_mut().as_mut() {
            Some(responses) => {
                responses.push(response.clone());
                true
            }
            None => false,
        });
        if !kept {
            self.send(&response);
        }
    }

    fn reply(&self, id: &Value, result: Value) {
        self.respond(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.respond(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}));
    }

    /// The client hung up: every approval still waiting (or asked from now on) is denied.
    fn deny_approvals(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// End every call still running (their answers would reach nobody).
    fn end_calls(&self) {
        let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for flight in flights.values_mut() {
            flight.cancelled = true;
            if let Some(process) = &flight.process {
                process.kill();
            }
        }
    }

    /// Handle a batch (protocol versions that have them): every request in order on one
    /// worker, then one array of the responses. Elsewhere, one error.
    fn batch(self: &Arc<Self>, items: Vec<Value>, pool: &Pool) {
        let version = *self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let server = Arc::clone(self);
        let run = move || {
            BATCH.with(|b| *b.borrow_mut() = Some(Vec::new()));
            // The worker is reused: whatever happens, it stops collecting responses.
            let _ = catch_unwind(AssertUnwindSafe(|| {
                for item in items {
                    server.handle_one(item, None);
                }
            }));
            let responses = BATCH.with(|b| b.borrow_mut().take()).unwrap_or_default();
            if !responses.is_empty() {
                server.send(&Value::Array(responses));
            }
        };
        if let Err(refused) = pool.submit(run) {
            self.error(&Value::Null, SERVER_ERROR, &format!("the batch is refused: {refused}"));
        }
    }

    /// Handle one message; a `tools/call` (or a batch) goes to the pool.
    fn handle(self: &Arc<Self>, msg: Value, pool: &Pool) {
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
                // A response to a request of ours (elicitation).
                if let Some(id) = &id
                    && let Some(tx) = self.pending.lock().ok().and_then(|mut p| p.remove(&id.to_string()))
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
        let era = *self
            .era
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert(if enveloped && method != "initialize" { Era::Stateless } else { Era::Handshake });
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
        self.flights
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_string(), Flight::default());
        let Some(pool) = pool else { return self.call_caught(id, &params) };
        let server = Arc::clone(self);
        let (job_id, job_params) = (id.clone(), params);
        if let Err(refused) = pool.submit(move || server.call_caught(&job_id, &job_params)) {
            self.finish(&id.to_string());
            self.error(id, SERVER_ERROR, &refused.to_string());
        }
    }

    /// A request of a stateless-era (2026-07-28) connection: its envelope is checked (the
    /// version, the client's capabilities), then it is answered like the handshake era's,
    /// each result with `resultType` and the server's info in `_meta`.
    fn stateless(self: &Arc<Self>, id: &Value, method: &str, params: &Value, pool: Option<&Pool>) {
        let unsupported = |requested: &Value| {
            json!({"code": UNSUPPORTED_VERSION, "message": "Unsupported protocol version",
                   "data": {"supported": MODERN_VERSIONS, "requested": requested}})
        };
        if method == "initialize" {
            let requested = params.get("protocolVersion").cloned().unwrap_or(Value::Null);
            return self.respond(json!({"jsonrpc": "2.0", "id": id, "error": unsupported(&requested)}));
        }
        let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
            let message = format!("params._meta must be an object carrying `{VERSION_KEY}` and `{CAPABILITIES_KEY}`");
            return self.error(id, INVALID_PARAMS, &message);
        };
        let missing: Vec<&str> =
            [VERSION_KEY, CAPABILITIES_KEY].into_iter().filter(|k| !meta.contains_key(*k)).collect();
        if !missing.is_empty() {
            let message = format!("params._meta is missing the required envelope key(s): {}", missing.join(", "));
            return self.error(id, INVALID_PARAMS, &message);
        }
        match &meta[VERSION_KEY] {
            Value::String(v) if MODERN_VERSIONS.contains(&v.as_str()) => {}
            Value::String(v) => {
                return self
                    .respond(json!({"jsonrpc": "2.0", "id": id, "error": unsupported(&Value::from(v.as_str()))}));
            }
            _ => return self.error(id, INVALID_PARAMS, &format!("`{VERSION_KEY}` must be a string")),
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
        *self.era.lock().unwrap_or_else(std::sync::PoisonError::into_inner) == Some(Era::Stateless)
    }

    /// Remember an approval asked of a stateless-era client; its `requestState` token.
    fn ask_later(&self, tool: &str, arguments: &Value) -> String {
        // SHA-256 of the secret salt and a counter: unguessable, and no two alike.
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut seed = self.salt.to_le_bytes().to_vec();
        seed.extend_from_slice(&n.to_le_bytes());
        let token = crate::lock::sha256(&seed).trim_start_matches("sha256:").to_owned();
        let mut asked = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        asked.retain(|_, a| a.asked.elapsed() < ELICITATION_TIMEOUT);
        if asked.len() >= MAX_PENDING_APPROVALS
            && let Some(oldest) = asked.iter().min_by_key(|(_, a)| a.asked).map(|(k, _)| k.clone())
        {
            asked.remove(&oldest);
        }
        let arguments = crate::lock::canonical(arguments);
        asked.insert(
            token.clone(),
            AskedApproval { tool: tool.to_owned(), arguments, asked: std::time::Instant::now() },
        );
        token
    }

    /// What a retried stateless-era call answers: None when it carries no answer (ask),
    /// `Some(true)` when its `requestState` names an approval asked for this very tool and
    /// these arguments (used once, within the time an approval may wait) and the `approve`
    /// answer accepts, `Some(false)` for any other answer (declined, or a token that is
    /// unknown, used, expired or for another call): denied, not asked again.
    fn answered(&self, tool: &str, params: &Value) -> Option<bool> {
        if params.get("requestState").is_none() && params.get("inputResponses").is_none() {
            return None;
        }
        let Some(token) = params.get("requestState").and_then(Value::as_str) else { return Some(false) };
        let Some(asked) = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(token) else {
            return Some(false);
        };
        let arguments = crate::lock::canonical(params.get("arguments").unwrap_or(&Value::Null));
        let answer = params.pointer("/inputResponses/approve");
        Some(
            asked.tool == tool
                && asked.arguments == arguments
                && asked.asked.elapsed() < ELICITATION_TIMEOUT
                && answer.and_then(|a| a.get("action")).and_then(Value::as_str) == Some("accept")
                && answer.and_then(|a| a.pointer("/content/approve")).and_then(Value::as_bool) == Some(true),
        )
    }

    /// Run a call; if packs itself fails inside it (a bug), the client still gets an answer.
    fn call_caught(self: &Arc<Self>, id: &Value, params: &Value) {
        if catch_unwind(AssertUnwindSafe(|| self.call(id, params))).is_err() {
            self.finish(&id.to_string());
            self.error(
                id,
                INTERNAL_ERROR,
                "the call failed inside packs (a bug; it is logged on stderr); the server goes on",
            );
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let Some(request) = params.get("requestId") else { return };
            let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(flight) = flights.get_mut(&request.to_string()) {
                flight.cancelled = true;
                if let Some(process) = &flight.process {
                    process.kill();
                }
            }
        }
    }

    fn initialize(&self, id: &Value, params: &Value) {
        let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
        *self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(version);
        let elicitation = params.pointer("/capabilities/elicitation").is_some();
        self.elicitation.store(elicitation, Ordering::Relaxed);
        self.reply(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
        );
    }

    /// The tools a client is offered (an agent's rules and the mode applied).
    fn offered<'c>(&self, catalog: &'c Catalog) -> Vec<&'c crate::tool::Tool> {
        catalog.tools().filter(|t| self.options.context.offers(t)).collect()
    }

    /// A tool's `tools/list` entry. Clients auto-approve on `readOnlyHint`, so it is claimed
    /// only for a tool that states `read_only`, adds no `policy.writable` place, and whose
    /// writes the kernel confines here (a native tool runs in packs' own process: never).
    fn entry(&self, t: &crate::tool::Tool) -> Value {
        let mut entry = crate::formats::mcp::tool(t);
        let enforced = t.kind() != crate::tool::ToolKind::Native && t.policy().writable.is_empty() && {
            let context = &self.options.context;
            let needs = crate::sandbox::Needs::of(t.tier(), t.policy().requires_network, &context.workspace(), &[]);
            crate::sandbox::decide(needs, context.sandbox(), crate::sandbox::Support::probe())
                .is_ok_and(|e| e.writes_under.is_some() && e.unenforced.is_empty())
        };
        if !enforced && let Some(hints) = entry.get_mut("annotations").and_then(Value::as_object_mut) {
            hints.insert("readOnlyHint".into(), Value::Bool(false));
            hints.insert("destructiveHint".into(), Value::Bool(true));
            hints.insert("idempotentHint".into(), Value::Bool(false));
        }
        entry
    }

    /// What `tools/list` would answer, whole, by name (a tool kept at its last good
    /// version may move in the catalog's order; a client sees the same tools).
    fn listing(&self, catalog: &Catalog) -> Vec<Value> {
        let mut tools = self.offered(catalog);
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        tools.into_iter().map(|t| self.entry(t)).collect()
    }

    fn list(&self, id: &Value, params: &Value) {
        match self.list_result(params) {
            Ok(result) => self.reply(id, result),
            Err(message) => self.error(id, INVALID_PARAMS, &message),
        }
    }

    /// A `tools/list` page, or why the cursor is refused.
    fn list_result(&self, params: &Value) -> Result<Value, String> {
        let catalog =
            self.catalog.read().map(|c| Arc::clone(&c)).map_err(|_| "the catalog is unavailable".to_owned())?;
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(c) => c.parse::<usize>().map_err(|_| format!("invalid cursor `{c}`"))?,
        };
        let tools = self.offered(&catalog);
        let page: Vec<Value> = tools.iter().skip(start).take(PAGE_SIZE).map(|t| self.entry(t)).collect();
        let mut result = json!({"tools": page});
        if start + PAGE_SIZE < tools.len() {
            result["nextCursor"] = Value::String((start + PAGE_SIZE).to_string());
        }
        Ok(result)
    }

    fn call(self: &Arc<Self>, id: &Value, params: &Value) {
        let key = id.to_string();
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
        let progress = params.pointer("/_meta/progressToken").cloned();
        // The call keeps the catalog it started with, whatever a reload does meanwhile.
        let Some(catalog) = self.catalog.read().map(|c| Arc::clone(&c)).ok() else {
            self.finish(&key);
            return self.error(id, INVALID_REQUEST, "the catalog is unavailable");
        };
        let sent = AtomicU64::new(0);
        let stateless = self.is_stateless();
        // A stateless-era client is asked by an `input_required` result, then retries.
        let can_elicit =
            params.pointer(&format!("/_meta/{}/elicitation", CAPABILITIES_KEY.replace('/', "~1"))).is_some();
        let approver = Elicitor {
            server: self,
            yes: self.options.yes,
            stateless: stateless.then(|| Stateless {
                granted: self.answered(name, params),
                can_elicit,
                asked: Mutex::new(None),
            }),
        };
        let on_status = |status: Status<'_>| match status {
            Status::Spawned { process, .. } => {
                let mut flights = self.flights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(f) = flights.get_mut(&key) {
                    if f.cancelled {
                        process.kill();
                    }
                    f.process = Some(process.clone());
                }
            }
            Status::Output { chunk, .. } => {
                if let Some(token) = &progress {
                    let total = sent.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                    self.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                        "progressToken": token,
                        "progress": total,
                        "message": String::from_utf8_lossy(chunk),
                    }}));
                }
            }
            _ => {}
        };
        let result = Call::new(name, args)
            .context(&self.options.context)
            .approver(&approver)
            .on_status(&on_status)
            .run(&catalog);
        if let Some(failure) = self.options.context.audit().and_then(crate::audit::AuditLog::take_failure) {
            eprintln!("packs serve: {failure}; the call is not in the log");
        }
        if let Some(signal) = crate::runner::interrupted() {
            // The server was interrupted (the CLI asked for that): every tool ends, then
            // the server, with 128 + the signal.
            crate::runner::kill_all();
            eprintln!("packs serve: signal {signal}: running tools were ended");
            std::process::exit(128 + signal);
        }
        if self.finish(&key) {
            return; // cancelled: the client no longer expects an answer
        }
        if let Some(request) = approver.stateless.as_ref().and_then(|s| s.asked.lock().ok()?.take()) {
            // Not run: the client is asked, and retries with its answer and this token.
            let token = self.ask_later(name, params.get("arguments").unwrap_or(&Value::Null));
            let (message, schema) = approval_question(&request);
            return self.reply(
                id,
                json!({
                    "resultType": "input_required",
                    "inputRequests": {"approve": {"method": "elicitation/create",
                        "params": {"mode": "form", "message": message, "requestedSchema": schema}}},
                    "requestState": token,
                    "_meta": {SERVER_INFO_KEY: server_info()},
                }),
            );
        }
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

    /// The call is over; returns whether it had been cancelled.
    fn finish(&self, key: &str) -> bool {
        self.flights.lock().ok().and_then(|mut f| f.remove(key)).is_some_and(|f| f.cancelled)
    }

    /// Ask the client (MCP elicitation) whether a call may run.
    fn elicit(&self, request: &ApprovalRequest) -> bool {
        let id = format!("packs-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Under the lock `close` takes: a client that hung up approves nothing.
            if self.closed.load(Ordering::SeqCst) {
                return false;
            }
            pending.insert(Value::String(id.clone()).to_string(), tx);
        }
        let (message, schema) = approval_question(request);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
            "message": message,
            "requestedSchema": schema,
        }}));
        let Ok(answer) = rx.recv_timeout(ELICITATION_TIMEOUT) else { return false };
        answer.pointer("/result/action").and_then(Value::as_str) == Some("accept")
            && answer.pointer("/result/content/approve").and_then(Value::as_bool) == Some(true)
    }
}

/// What a person is asked to approve a call: the message, and the form (one `approve`
/// boolean). Control and invisible characters are escaped: the client shows what will run.
fn approval_question(request: &ApprovalRequest) -> (String, Value) {
    let mut command = request.command_line();
    if let Some(cwd) = &request.cwd {
        command.push_str(&format!("\nin {}", crate::visible::word(&cwd.to_string_lossy())));
    }
    for (k, v) in &request.env {
        command.push_str(&format!("\nenv: {}={}", crate::visible::prose(k), crate::visible::word(v)));
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
fn server_info() -> Value {
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

/// Approval for MCP calls: elicitation when the client declared it, else `--yes`, else deny.
struct Elicitor<'s> {
    server: &'s Server,
    yes: bool,
    /// On a stateless-era connection, what this call's request says (the server cannot
    /// send the client a request there).
    stateless: Option<Stateless>,
}

/// Approval of a stateless-era call: decided by the answer the retried call carries, or
/// asked (by an `input_required` result) when there is none and the client can answer a form.
struct Stateless {
    granted: Option<bool>,
    can_elicit: bool,
    asked: Mutex<Option<ApprovalRequest>>,
}

impl Approver for Elicitor<'_> {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        match &self.stateless {
            Some(Stateless { granted: Some(answer), .. }) => *answer,
            Some(s) if s.can_elicit => {
                // Denied for now; the client is asked and retries with its answer.
                if let Ok(mut asked) = s.asked.lock() {
                    *asked = Some(request.clone());
                }
                false
            }
            Some(_) => self.yes,
            None if self.server.elicitation.load(Ordering::Relaxed) => self.server.elicit(request),
            None => self.yes,
        }
    }
}
