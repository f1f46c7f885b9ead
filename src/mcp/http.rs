//! The Streamable HTTP transport: `packs serve --http ADDR`.
//!
//! One MCP endpoint (`/mcp`) that takes POST, for both eras, decided per request: a request
//! whose `MCP-Protocol-Version` header names 2026-07-28 is stateless (its headers are checked
//! against its body; approval by an `input_required` result); any other speaks 2025-11-25 and
//! earlier (after `initialize`, with a sealed `Mcp-Session-Id` that carries the negotiated
//! version and the client's elicitation capability, so any replica can read it). Nothing is
//! kept between requests but the calls in flight and the elicitations waiting for an answer.
//!
//! Every request is checked before its body is read: `Host` and `Origin` (DNS-rebinding
//! protection, 403), the bearer token (401 with a challenge), the body's size (413) and the
//! time it takes to arrive (408). A `tools/call` answers as a Server-Sent Events stream when
//! the client takes one: progress, elicitation requests (2025-11-25) and then the result;
//! the stream closing (the client went away) kills the tool's process group. `/healthz`
//! answers without a token; `/metrics` counts every agent's calls, so when clients are told
//! apart it takes only a token of its own (`--metrics-token-file`), never a client's.
//!
//! hyper (HTTP/1.1) on tokio, rustls for TLS: see docs/ARCHITECTURE.md for why.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use super::auth::{Client, MetricsTokens, Tokens};
use super::oauth::{OAuth, OAuthOptions};
use super::{
    Era, INVALID_REQUEST, METHOD_NOT_FOUND, MODERN_VERSIONS, Options, PARSE_ERROR, PROTOCOL_VERSIONS, Peer, Seal,
    Server, Settled, UNSUPPORTED_VERSION, VERSION_KEY,
};
use crate::call::Context;
use crate::pool::Pool;

/// The MCP endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// The request header that carries a handshake-era session.
const SESSION_HEADER: &str = "mcp-session-id";
/// The request header that carries the protocol version.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The stateless era's mirrors of the body's method and name.
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// The stateless era's error for headers that do not match the body.
const HEADER_MISMATCH: i64 = -32020;

/// How long a client may take to send a request's headers, and then its body.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Clients whose running calls are counted before those with none running are forgotten.
const MAX_CLIENTS_TRACKED: usize = 4096;

/// Messages a request's stream may hold unread before its progress notifications are dropped.
const MAX_QUEUED: usize = 256;

/// How long a call waits for one of the server's `MAX_CALLS` slots before it is refused (503).
const QUEUE_WAIT: Duration = Duration::from_secs(30);

/// How often an SSE stream with nothing to say sends a comment: it keeps proxies from
/// closing it, and finds out soon that a client went away (its call is then cancelled).
const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// How `packs serve --http` was started.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Tools, base context, `--watch`, `--locked`.
    pub serve: Options,
    /// Where to listen.
    pub addr: SocketAddr,
    /// `--token-file`: one `TOKEN AGENT_ID` per line.
    pub token_file: Option<PathBuf>,
    /// Where agents named in the token file are loaded from.
    pub agents: PathBuf,
    /// `--metrics-token-file`: one `TOKEN` per line, the credentials `/metrics` takes.
    pub metrics_token_file: Option<PathBuf>,
    /// Host names (beyond `localhost` on a loopback address, and IP literals) a request's
    /// `Host` may name.
    pub allow_hosts: Vec<String>,
    /// Origins a browser's request may come from (none by default).
    pub allow_origins: Vec<String>,
    /// `--tls-cert` and `--tls-key` (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The largest request body taken, in bytes.
    pub max_body: usize,
    /// Most `tools/call` requests one client may have running at once.
    pub max_calls_per_client: usize,
    /// Most connections open at once (more wait to be accepted).
    pub max_connections: usize,
    /// On SIGTERM or SIGINT, how long calls still running may take before they are ended.
    pub grace: Duration,
    /// OAuth 2.1 resource-server mode: JWT access tokens from this issuer.
    pub oauth: Option<OAuthOptions>,
    /// The agent whose rules a JWT's client follows (none: the base context's).
    pub oauth_agent: Option<String>,
    /// A secret replicas share that seals session ids (default: derived from the token
    /// file, else random per process). Approvals are sealed with `serve.approvals`.
    pub session_key: Option<PathBuf>,
}

impl HttpOptions {
    /// Defaults for `addr` and the tools in `serve`.
    pub fn new(serve: Options, addr: SocketAddr) -> Self {
        HttpOptions {
            serve,
            addr,
            token_file: None,
            metrics_token_file: None,
            agents: crate::agent::Agent::root(),
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            tls: None,
            max_body: 4 << 20,
            max_calls_per_client: 16,
            max_connections: 1024,
            grace: Duration::from_secs(10),
            oauth: None,
            oauth_agent: None,
            session_key: None,
        }
    }
}

/// Why `packs serve --http` did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A non-loopback address without tokens.
    #[error(
        "refusing to serve {0} without authentication: anyone who can reach it could run the tools \
         (give --token-file, or bind a loopback address such as 127.0.0.1:8731)"
    )]
    Unauthenticated(SocketAddr),
    /// The token file, session key or OAuth agent cannot be used (its path and line, and why).
    #[error("{0}")]
    Tokens(String),
    /// The issuer's keys cannot be fetched, or a URL is not one packs takes.
    #[error("--oauth-issuer: {0}")]
    OAuth(String),
    /// The certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The address cannot be bound, or the runtime not started.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Everything a request handler needs.
struct State {
    server: Arc<Server>,
    pool: Arc<Pool>,
    tokens: Option<Tokens>,
    oauth: Option<OAuth>,
    /// The tokens `/metrics` takes (none: open only when no client has a token).
    metrics_tokens: Option<MetricsTokens>,
    /// The client of a server without tokens (loopback only).
    anonymous: Client,
    loopback: bool,
    allow_hosts: Vec<String>,
    allow_origins: Vec<String>,
    max_body: usize,
    max_calls_per_client: usize,
    /// Calls running on this server (waited for, up to `QUEUE_WAIT`).
    calls: Arc<Semaphore>,
    /// Calls running per client principal.
    per_client: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
    /// Per-request keys for requests outside a session.
    next_request: AtomicU64,
}

type Body = BoxBody<Bytes, Infallible>;

/// Serve over HTTP until SIGTERM or SIGINT; then stop accepting, give calls still running
/// `grace` to answer, end the rest, and return.
pub fn serve(options: HttpOptions) -> Result<(), StartError> {
    let loopback = options.addr.ip().is_loopback();
    if !loopback && options.token_file.is_none() && options.oauth.is_none() {
        return Err(StartError::Unauthenticated(options.addr));
    }
    let base = options.serve.context.clone();
    let tokens = match &options.token_file {
        Some(path) => Some(Tokens::read(path, &options.agents, &base).map_err(|e| StartError::Tokens(e.to_string()))?),
        None => None,
    };
    let metrics_tokens = match &options.metrics_token_file {
        Some(path) => Some(
            MetricsTokens::read(path, tokens.as_ref())
                .map_err(|e| StartError::Tokens(format!("--metrics-token-file: {e}")))?,
        ),
        None => None,
    };
    let tls = match &options.tls {
        Some((cert, key)) => Some(tls_acceptor(cert, key)?),
        None => None,
    };
    // Replicas that share the key (or the token file) open each other's sealed tokens.
    let seal = match (&options.session_key, &tokens) {
        (Some(path), _) => {
            let secret = std::fs::read(path).map_err(|e| StartError::Tokens(format!("{}: {e}", path.display())))?;
            if secret.len() < 32 {
                return Err(StartError::Tokens(format!(
                    "{}: a session key needs at least 32 bytes (e.g. `head -c 32 /dev/urandom`)",
                    path.display()
                )));
            }
            Seal::derived(&secret)
        }
        (None, Some(tokens)) => Seal::derived(&tokens.secret),
        (None, None) => Seal::random(),
    };
    let oauth_client = match &options.oauth_agent {
        Some(id) => {
            let agent = crate::agent::Agent::load(&options.agents, id)
                .map_err(|e| StartError::Tokens(format!("--oauth-agent: {e}")))?;
            Client { principal: String::new(), context: Arc::new(base.clone().with_agent(agent)) }
        }
        None => Client { principal: String::new(), context: Arc::new(base.clone()) },
    };
    // A client's agent tightens what the operator set, never loosens it; one catalog serves
    // every client, so an agent that asks for `locked` needs the whole server locked.
    if options.serve.locked.is_none()
        && let Some(agent) =
            tokens.iter().flat_map(Tokens::agents).chain(oauth_client.context.agent()).find(|a| a.config.locked)
    {
        return Err(StartError::Tokens(format!(
            "agent `{}` says `locked = true`: serve with --locked (one catalog serves every client)",
            agent.id
        )));
    }
    let mut serve_options = options.serve.clone();
    serve_options.yes = false; // nobody at this end to approve for the client
    // The tools get packs' variables from one copy of its environment, not a new one per call.
    crate::environment::freeze();
    let server = Server::new(serve_options, seal);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("packs-http")
        .build()
        .map_err(|source| StartError::Listen { addr: options.addr, source })?;
    let oauth = match &options.oauth {
        Some(o) => Some(runtime.block_on(OAuth::start(o.clone(), oauth_client)).map_err(StartError::OAuth)?),
        None => None,
    };
    let state = Arc::new(State {
        server: Arc::clone(&server),
        pool: Arc::new(super::call_pool()),
        calls: Arc::new(Semaphore::new(super::MAX_CALLS)),
        tokens,
        oauth,
        metrics_tokens,
        anonymous: Client { principal: String::new(), context: Arc::new(base) },
        loopback,
        allow_hosts: options.allow_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
        allow_origins: options.allow_origins.clone(),
        max_body: options.max_body,
        max_calls_per_client: options.max_calls_per_client.max(1),
        per_client: std::sync::Mutex::new(std::collections::HashMap::new()),
        next_request: AtomicU64::new(1),
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = server.options().watch.then(|| {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("packs-watch".into())
            // Over HTTP a client lists again when it wants to (no standing stream to notify).
            .spawn(move || {
                let last = super::watched(&server);
                super::watch(&server, last, &stop, &|| {})
            })
            .inspect_err(|e| eprintln!("packs serve: --watch is off: cannot start its thread: {e}"))
            .ok()
    });
    let result = runtime.block_on(run(state.clone(), options.addr, options.max_connections, options.grace, tls));
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = watcher.flatten() {
        let _ = w.join();
    }
    // Calls still running past the grace were ended; their workers end with them.
    state.pool.close();
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Accept connections until a signal; then shut down gracefully.
async fn run(
    state: Arc<State>,
    addr: SocketAddr,
    max_connections: usize,
    grace: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Result<(), StartError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen_error = |source| StartError::Listen { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    let mut term = signal(SignalKind::terminate()).map_err(listen_error)?;
    let mut int = signal(SignalKind::interrupt()).map_err(listen_error)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    eprintln!("packs serve: listening on {scheme}://{bound}{ENDPOINT}");
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let connections = Arc::new(Semaphore::new(max_connections.max(1)));
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&connections).acquire_owned() => p.expect("the semaphore is never closed"),
            _ = term.recv() => break,
            _ = int.recv() => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was taken: go on.
                    eprintln!("packs serve: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        };
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        let service = hyper::service::service_fn(move |req| {
            let state = Arc::clone(&state);
            async move { Ok::<_, Infallible>(respond(&state, req, remote).await) }
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
        match &tls {
            None => {
                let conn = graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
                tokio::spawn(async move {
                    let _ = conn.await;
                    drop(permit);
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    // A handshake that does not finish in time is dropped (slow or hostile).
                    if let Ok(Ok(stream)) = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                        let _ = watcher.watch(conn).await;
                    }
                    drop(permit);
                });
            }
        }
    }
    drop(listener);
    let running = state.server.in_flight();
    eprintln!("packs serve: stopping: {running} call(s) running get {}s to finish", grace.as_secs());
    let finished = tokio::select! {
        done = tokio::time::timeout(grace, graceful.shutdown()) => done.is_ok(),
        // A second signal: no more waiting.
        _ = term.recv() => false,
        _ = int.recv() => false,
    };
    if !finished {
        let ended = state.server.end_calls("");
        eprintln!("packs serve: {ended} call(s) still running were ended");
        // Their answers (cancelled) reach the clients still connected, briefly.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while state.server.in_flight() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
    Ok(())
}

fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<tokio_rustls::TlsAcceptor, StartError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| StartError::Tls(format!("{}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(StartError::Tls(format!("{}: no certificate in the file", cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| StartError::Tls(format!("{}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StartError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| StartError::Tls(format!("the certificate and key do not go together: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Answer one HTTP request, counting its status.
async fn respond(state: &Arc<State>, req: Request<Incoming>, remote: SocketAddr) -> Response<Body> {
    let has_body = !hyper::body::Body::is_end_stream(req.body());
    let mut response = route(state, req, remote).await;
    // hyper ends a connection whose request body was left unread (a refusal answers before
    // reading it) rather than drain it: say so, or the client sends its next request on a
    // connection about to close and sees it drop without an answer.
    if has_body && response.extensions().get::<BodyRead>().is_none() {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    state.server.metrics.responded(response.status().as_u16());
    response
}

/// Marks a response to a request whose body was read to its end.
#[derive(Clone, Copy)]
struct BodyRead;

async fn route(state: &Arc<State>, req: Request<Incoming>, _remote: SocketAddr) -> Response<Body> {
    let path = req.uri().path();
    if path == "/healthz" && (req.method() == Method::GET || req.method() == Method::HEAD) {
        // For load balancers: no token, no Host check, nothing about the tools.
        return text(StatusCode::OK, "ok\n");
    }
    if let Err(refusal) = check_host_and_origin(state, req.headers()) {
        state.server.metrics.denied("origin_or_host");
        return refusal;
    }
    if let Some(oauth) = &state.oauth
        && req.method() == Method::GET
        && (path == oauth.metadata_path() || path == "/.well-known/oauth-protected-resource")
    {
        // RFC 9728: where a client gets a token for this server (no token needed to ask).
        return json_response(StatusCode::OK, &oauth.metadata(), None);
    }
    if path == "/metrics" && req.method() == Method::GET {
        return metrics(state, req.headers()).await;
    }
    let client = match authenticate(state, req.headers()).await {
        Ok(client) => client,
        Err(refusal) => {
            state.server.metrics.denied("unauthenticated");
            return refusal;
        }
    };
    match (path, req.method()) {
        (ENDPOINT, &Method::POST) => post(state, req, client).await,
        (ENDPOINT, _) => {
            // No standalone SSE stream (GET) and no sessions to end (DELETE): both eras allow 405.
            let mut response = rpc_error(StatusCode::METHOD_NOT_ALLOWED, &Value::Null, INVALID_REQUEST, "use POST");
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
            response
        }
        _ => text(StatusCode::NOT_FOUND, &format!("not found: the MCP endpoint is {ENDPOINT}\n")),
    }
}

/// `GET /metrics`. The metrics count every agent's calls by tool name, so a client, who may
/// see only its own agent's tools, never reads them: when clients are told apart (tokens or
/// OAuth) only a token from `--metrics-token-file` opens them (a client's own gets 403), and
/// with that file given, only its tokens do even on a server without client tokens.
async fn metrics(state: &State, headers: &HeaderMap) -> Response<Body> {
    let presented = headers.get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(super::auth::bearer);
    let open = state.metrics_tokens.is_none() && state.tokens.is_none() && state.oauth.is_none();
    let scraper = presented.is_some_and(|t| state.metrics_tokens.as_ref().is_some_and(|m| m.check(t)));
    if open || scraper {
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")
            .body(full(state.server.metrics.render()))
            .expect("a valid response");
    }
    let client = match presented {
        None => false,
        Some(token) => {
            state.tokens.as_ref().is_some_and(|t| t.check(token).is_some())
                || match &state.oauth {
                    Some(oauth) => oauth.verify(token).await.is_ok(),
                    None => false,
                }
        }
    };
    if !client {
        state.server.metrics.denied("unauthenticated");
        let why = if presented.is_some() { Some("the token is not a metrics token") } else { None };
        return unauthorized(state, why, "a bearer token from --metrics-token-file is needed");
    }
    state.server.metrics.denied("metrics_credential");
    let message = if state.metrics_tokens.is_some() {
        "a client's token does not open /metrics (they count every agent's calls): use a token from --metrics-token-file"
    } else {
        "a client's token does not open /metrics (they count every agent's calls): start the server with --metrics-token-file and scrape with one of its tokens"
    };
    rpc_error(StatusCode::FORBIDDEN, &Value::Null, INVALID_REQUEST, message)
}

/// DNS-rebinding protection: `Host` must name this server (an IP literal, `localhost` on a
/// loopback address, or an `--allow-host` name) and an `Origin`, when sent (browsers do),
/// must be one `--allow-origin` names.
fn check_host_and_origin(state: &State, headers: &HeaderMap) -> Result<(), Response<Body>> {
    let forbidden = |what: &str| rpc_error(StatusCode::FORBIDDEN, &Value::Null, INVALID_REQUEST, what);
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return Err(forbidden("a request needs a Host header"));
    };
    if !host_allowed(state, host) {
        return Err(forbidden(&format!(
            "Host `{}` is not this server (DNS-rebinding protection; see --allow-host)",
            crate::visible::prose(host)
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !state.allow_origins.iter().any(|o| o == origin) {
            return Err(forbidden(&format!(
                "Origin `{}` is not allowed (DNS-rebinding protection; see --allow-origin)",
                crate::visible::prose(origin)
            )));
        }
    }
    Ok(())
}

fn host_allowed(state: &State, host: &str) -> bool {
    // Strip the port: `[::1]:8731`, `127.0.0.1:8731`, `name:8731`.
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(ip, _)| ip),
        None => host
            .rsplit_once(':')
            .map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host }),
    };
    // A browser tricked by rebinding sends the attacker's name, never an IP literal.
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    let name = name.to_ascii_lowercase();
    (state.loopback && name == "localhost") || state.allow_hosts.contains(&name)
}

/// The client a request's bearer token names (a token from the file, else a JWT when
/// OAuth is on); without either, the anonymous client.
async fn authenticate(state: &State, headers: &HeaderMap) -> Result<Client, Response<Body>> {
    if state.tokens.is_none() && state.oauth.is_none() {
        return Ok(state.anonymous.clone());
    }
    let presented = headers.get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(super::auth::bearer);
    let mut why = "the token is not valid".to_owned();
    if let Some(token) = presented {
        if let Some(client) = state.tokens.as_ref().and_then(|t| t.check(token)) {
            return Ok(client.clone());
        }
        if let Some(oauth) = &state.oauth {
            match oauth.verify(token).await {
                Ok(client) => return Ok(client),
                Err(refused) => why = refused.0,
            }
        }
    }
    Err(unauthorized(state, presented.is_some().then_some(why.as_str()), "a bearer token is needed"))
}

/// 401 with its challenge: `why` a presented token was refused, or `needed` when none was.
fn unauthorized(state: &State, why: Option<&str>, needed: &str) -> Response<Body> {
    // RFC 6750 challenge; with OAuth, RFC 9728's pointer to where a token comes from.
    let mut challenge = String::from(r#"Bearer realm="packs""#);
    if let Some(oauth) = &state.oauth {
        challenge.push_str(&format!(r#", resource_metadata="{}""#, oauth.metadata_url()));
    }
    if let Some(why) = why {
        // A header value: visible ASCII, no quotes or backslashes.
        let why: String = why
            .chars()
            .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
            .filter(|c| c.is_ascii_graphic() || *c == ' ')
            .collect();
        challenge.push_str(&format!(r#", error="invalid_token", error_description="{why}""#));
    }
    let message = match why {
        Some(why) => format!("a valid bearer token is needed: {why}"),
        None => needed.to_owned(),
    };
    let mut response = rpc_error(StatusCode::UNAUTHORIZED, &Value::Null, INVALID_REQUEST, &message);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The MCP endpoint.
async fn post(state: &Arc<State>, req: Request<Incoming>, client: Client) -> Response<Body> {
    let mut read = false;
    let mut response = answer_post(state, req, client, &mut read).await;
    if read {
        response.extensions_mut().insert(BodyRead);
    }
    response
}

/// [`post`]'s answer; `read` is set once the body was read to its end.
async fn answer_post(state: &Arc<State>, req: Request<Incoming>, client: Client, read: &mut bool) -> Response<Body> {
    let headers = req.headers().clone();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")));
    if !is_json {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &Value::Null,
            INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("*/*").to_ascii_lowercase();
    let takes = |kind: &str| accept.contains(kind) || accept.contains("*/*");
    if !takes("application/json") && !takes("text/event-stream") {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            &Value::Null,
            INVALID_REQUEST,
            "Accept must list application/json and text/event-stream",
        );
    }
    let body = match read_body(state, req).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    *read = true;
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &Value::Null, PARSE_ERROR, &format!("not JSON: {e}")),
    };
    let Value::Object(fields) = &msg else {
        let message = if msg.is_array() {
            "JSON-RPC batches are not taken over HTTP: send one message per POST"
        } else {
            "a message must be a JSON object"
        };
        return rpc_error(StatusCode::BAD_REQUEST, &Value::Null, INVALID_REQUEST, message);
    };
    let id = fields.get("id").cloned();
    let method = fields.get("method").and_then(Value::as_str).map(str::to_owned);
    let params = fields.get("params").cloned().unwrap_or(Value::Null);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // Which era: the header decides (2026-07-28 clients always send it).
    let version = header(VERSION_HEADER);
    let enveloped = params.get("_meta").and_then(|m| m.get(VERSION_KEY)).is_some();
    let stateless = version.is_some_and(|v| MODERN_VERSIONS.contains(&v));
    let settled = if stateless {
        if let Err(refusal) = check_stateless_headers(&headers, &id, method.as_deref(), &params) {
            return refusal;
        }
        if let Err(error) = super::check_envelope(&params) {
            // An unsupported version, or an envelope missing what this era requires: 400.
            return json_response(StatusCode::BAD_REQUEST, &json!({"jsonrpc": "2.0", "id": id, "error": error}), None);
        }
        Settled { era: Some(Era::Stateless), version: None, elicitation: false }
    } else {
        if let Some(v) = version
            && !PROTOCOL_VERSIONS.contains(&v)
        {
            let error = json!({"code": UNSUPPORTED_VERSION, "message": "Unsupported protocol version",
                "data": {"supported": MODERN_VERSIONS.iter().chain(PROTOCOL_VERSIONS).collect::<Vec<_>>(), "requested": v}});
            return json_response(StatusCode::BAD_REQUEST, &json!({"jsonrpc": "2.0", "id": id, "error": error}), None);
        }
        if enveloped && method.as_deref() != Some("initialize") {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id.as_ref().unwrap_or(&Value::Null),
                HEADER_MISMATCH,
                "Header mismatch: a request with a 2026-07-28 `_meta` envelope needs `MCP-Protocol-Version: 2026-07-28`",
            );
        }
        Settled {
            era: (method.as_deref() != Some("initialize")).then_some(Era::Handshake),
            version: version.and_then(|v| PROTOCOL_VERSIONS.iter().copied().find(|p| *p == v)),
            elicitation: false,
        }
    };
    // A handshake-era session: sealed by a replica that shares the key, for this client.
    let mut session = None;
    let mut settled = settled;
    if !stateless && let Some(token) = header(SESSION_HEADER) {
        let opened =
            state.server.seal.open(token).filter(|s| s["k"] == "session" && s["p"] == client.principal.as_str());
        let Some(opened) = opened else {
            return rpc_error(
                StatusCode::NOT_FOUND,
                id.as_ref().unwrap_or(&Value::Null),
                INVALID_REQUEST,
                "unknown session: initialize again",
            );
        };
        if settled.version.is_none() {
            settled.version = opened["v"].as_str().and_then(|v| PROTOCOL_VERSIONS.iter().copied().find(|p| *p == v));
        }
        settled.elicitation = opened["e"] == true;
        session = opened["n"].as_str().map(|n| format!("s:{n}"));
    }
    let key = session.clone().unwrap_or_else(|| format!("r:{}", state.next_request.fetch_add(1, Ordering::Relaxed)));
    match (&method, &id) {
        // A response to a request of ours (an elicitation answer) or a notification: 202.
        (None, Some(_)) | (Some(_), None) => {
            let (peer, _rx) = peer(state, &client, key, settled);
            peer.handle(msg, &state.pool);
            empty(StatusCode::ACCEPTED)
        }
        (None, None) => rpc_error(StatusCode::BAD_REQUEST, &Value::Null, INVALID_REQUEST, "a request needs a `method`"),
        (Some(method), Some(id)) => {
            let call = method == "tools/call";
            let _permit = if call {
                match take_call_slot(state, &client).await {
                    Ok(p) => Some(p),
                    Err(refusal) => return refusal,
                }
            } else {
                None
            };
            let stream = call && takes("text/event-stream");
            // An elicitation request reaches the client only on a stream it reads.
            settled.elicitation &= stream;
            let (peer, rx) = peer(state, &client, key, settled);
            let guard = CancelOnDrop { peer: Arc::clone(&peer), id: id.clone(), armed: true };
            peer.handle(msg.clone(), &state.pool);
            let minted = (method == "initialize").then(|| {
                let s = peer.settlement();
                state.server.seal.seal(&json!({"k": "session", "v": s.version, "e": s.elicitation,
                    "p": client.principal, "n": format!("{:x}", state.server.seal.nonce())}))
            });
            if stream {
                let body = Sse {
                    rx,
                    id: id.clone(),
                    done: false,
                    guard: Some(guard),
                    _permit,
                    tick: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
                };
                return Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "text/event-stream")
                    .header(header::CACHE_CONTROL, "no-cache")
                    .header("x-accel-buffering", "no")
                    .body(BoxBody::new(body))
                    .expect("a valid response");
            }
            let answer = final_answer(rx, id, guard).await;
            let status = if stateless && answer["error"]["code"] == METHOD_NOT_FOUND {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            json_response(status, &answer, minted.as_deref())
        }
    }
}

/// Read the body within the size and time limits.
async fn read_body(state: &State, req: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &Value::Null,
            INVALID_REQUEST,
            &format!("the body is larger than {} bytes (--max-body)", state.max_body),
        )
    };
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(req.into_body(), state.max_body).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            PARSE_ERROR,
            &format!("the body could not be read: {e}"),
        )),
        Err(_) => Err(rpc_error(
            StatusCode::REQUEST_TIMEOUT,
            &Value::Null,
            INVALID_REQUEST,
            &format!("the body took longer than {}s to arrive", BODY_TIMEOUT.as_secs()),
        )),
    }
}

/// The stateless era's headers must mirror the body (2026-07-28, Server Validation).
fn check_stateless_headers(
    headers: &HeaderMap,
    id: &Option<Value>,
    method: Option<&str>,
    params: &Value,
) -> Result<(), Response<Body>> {
    let id = id.as_ref().unwrap_or(&Value::Null);
    let mismatch =
        |what: String| rpc_error(StatusCode::BAD_REQUEST, id, HEADER_MISMATCH, &format!("Header mismatch: {what}"));
    let header = |name: &str| {
        headers.get(name).map(|v| v.to_str().map_err(|_| mismatch(format!("{name} is not visible ASCII"))))
    };
    let version = header(VERSION_HEADER).transpose()?;
    let body_version = params.pointer(&format!("/_meta/{}", VERSION_KEY.replace('/', "~1"))).and_then(Value::as_str);
    if let Some(body_version) = body_version
        && version != Some(body_version)
    {
        return Err(mismatch(format!(
            "MCP-Protocol-Version `{}` does not match the body's `{body_version}`",
            version.unwrap_or_default()
        )));
    }
    let Some(method) = method else { return Ok(()) };
    match header(METHOD_HEADER).transpose()? {
        None => return Err(mismatch("the Mcp-Method header is missing".into())),
        Some(m) if m != method => {
            return Err(mismatch(format!("Mcp-Method `{m}` does not match the body's `{method}`")));
        }
        Some(_) => {}
    }
    if method == "tools/call" {
        let body_name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        match header(NAME_HEADER).transpose()?.map(decode_header_value) {
            None => return Err(mismatch("the Mcp-Name header is missing".into())),
            Some(None) => return Err(mismatch("Mcp-Name is not valid base64 UTF-8".into())),
            Some(Some(name)) if name != body_name => {
                return Err(mismatch(format!(
                    "Mcp-Name `{}` does not match the body's `{}`",
                    crate::visible::prose(&name),
                    crate::visible::prose(body_name)
                )));
            }
            Some(Some(_)) => {}
        }
    }
    Ok(())
}

/// A header value, decoded when it uses the `=?base64?…?=` sentinel.
fn decode_header_value(value: &str) -> Option<String> {
    match value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) {
        Some(encoded) => {
            // Padding only at the end: data-encoding reads `QQ==QQ==` as two padded blocks,
            // and a client's one encoded name is one block sequence (RFC 4648, section 3.2).
            if encoded.trim_end_matches('=').contains('=') {
                return None;
            }
            let bytes = data_encoding::BASE64.decode(encoded.as_bytes()).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// Slots for one more call: one of `client`'s (429 at once when it has its most running),
/// then one of the server's (waited for up to `QUEUE_WAIT`, then 503). Held until the answer
/// has been sent.
async fn take_call_slot(state: &State, client: &Client) -> Result<CallSlot, Response<Body>> {
    let semaphore = {
        let mut per_client = state.per_client.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if per_client.len() >= MAX_CLIENTS_TRACKED {
            // Clients with no call running need no entry (a JWT issuer can mint many subjects).
            per_client.retain(|_, s| s.available_permits() < state.max_calls_per_client);
        }
        Arc::clone(
            per_client
                .entry(client.principal.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(state.max_calls_per_client))),
        )
    };
    let busy = |status: StatusCode, message: String| {
        let mut response = rpc_error(status, &Value::Null, super::SERVER_ERROR, &message);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    };
    let mine = semaphore.try_acquire_owned().map_err(|_| {
        state.server.metrics.denied("too_many_calls");
        let n = state.max_calls_per_client;
        busy(StatusCode::TOO_MANY_REQUESTS, format!("{n} calls of this client are running; try again when one ends"))
    })?;
    match tokio::time::timeout(QUEUE_WAIT, Arc::clone(&state.calls).acquire_owned()).await {
        Ok(Ok(server)) => Ok(CallSlot { _mine: mine, _server: server }),
        _ => {
            state.server.metrics.denied("server_busy");
            Err(busy(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{} calls are running on this server; try again", super::MAX_CALLS),
            ))
        }
    }
}

/// A call's slots (its client's and the server's), released when dropped.
struct CallSlot {
    _mine: tokio::sync::OwnedSemaphorePermit,
    _server: tokio::sync::OwnedSemaphorePermit,
}

/// A peer for one request; its messages arrive on the receiver.
fn peer(state: &State, client: &Client, key: String, settled: Settled) -> (Arc<Peer>, Inbox) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&queued);
    let out = Box::new(move |msg: Value| {
        // A client that reads slowly (or not at all) while its tool writes a lot: progress
        // notifications past `MAX_QUEUED` are dropped, never held; responses always go.
        if msg.get("id").is_none() && count.load(Ordering::Relaxed) >= MAX_QUEUED {
            return;
        }
        count.fetch_add(1, Ordering::Relaxed);
        // The request's client went away: nothing to tell it.
        let _ = tx.send(msg);
    });
    let peer =
        Peer::new(&state.server, out, key, client.principal.clone(), Context::clone(&client.context)).settled(settled);
    (Arc::new(peer), Inbox { rx, queued })
}

/// The messages a request's peer sends, and how many wait to be read.
struct Inbox {
    rx: mpsc::UnboundedReceiver<Value>,
    queued: Arc<AtomicUsize>,
}

impl Inbox {
    async fn recv(&mut self) -> Option<Value> {
        let msg = self.rx.recv().await;
        self.queued.fetch_sub(usize::from(msg.is_some()), Ordering::Relaxed);
        msg
    }

    fn poll_recv(&mut self, cx: &mut TaskContext<'_>) -> Poll<Option<Value>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(_)) = polled {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        polled
    }
}

/// Whether `msg` is the response to request `id`.
fn is_final(msg: &Value, id: &Value) -> bool {
    msg.get("id") == Some(id) && (msg.get("result").is_some() || msg.get("error").is_some())
}

/// Wait for the response to `id` (other messages cannot reach a JSON-only client).
async fn final_answer(mut rx: Inbox, id: &Value, mut guard: CancelOnDrop) -> Value {
    while let Some(msg) = rx.recv().await {
        if is_final(&msg, id) {
            guard.armed = false;
            return msg;
        }
    }
    guard.armed = false;
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": super::INTERNAL_ERROR, "message": "the request ended without an answer"}})
}

/// Until its request has been answered, dropping this (the client went away) cancels the
/// request's call; in any case the peer closes (its elicitations are denied).
struct CancelOnDrop {
    peer: Arc<Peer>,
    id: Value,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.peer.cancel(&self.id);
        }
        self.peer.close();
    }
}

/// A request's SSE stream: its messages, then the response, which ends it.
struct Sse {
    rx: Inbox,
    id: Value,
    done: bool,
    guard: Option<CancelOnDrop>,
    _permit: Option<CallSlot>,
    tick: tokio::time::Interval,
}

impl http_body::Body for Sse {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(msg)) => {
                if is_final(&msg, &this.id) {
                    this.done = true;
                    if let Some(mut guard) = this.guard.take() {
                        guard.armed = false;
                    }
                }
                let event = format!("event: message\ndata: {msg}\n\n");
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))))
            }
            Poll::Ready(None) => {
                this.done = true;
                let error = json!({"jsonrpc": "2.0", "id": this.id, "error": {"code": super::INTERNAL_ERROR, "message": "the request ended without an answer"}});
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!("event: message\ndata: {error}\n\n"))))))
            }
            Poll::Pending => match this.tick.poll_tick(cx) {
                // A comment: ignored by clients, and a write that fails once the client is gone.
                Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b":\n\n"))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

fn full(text: impl Into<Bytes>) -> Body {
    BoxBody::new(Full::new(text.into()))
}

fn empty(status: StatusCode) -> Response<Body> {
    Response::builder().status(status).body(full(Bytes::new())).expect("a valid response")
}

fn text(status: StatusCode, text: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(text.to_owned()))
        .expect("a valid response")
}

fn json_response(status: StatusCode, value: &Value, session: Option<&str>) -> Response<Body> {
    let mut builder = Response::builder().status(status).header(header::CONTENT_TYPE, "application/json");
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session);
    }
    builder.body(full(value.to_string())).expect("a valid response")
}

/// An HTTP error whose body is a JSON-RPC error response.
fn rpc_error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response<Body> {
    json_response(status, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}), None)
}

#[cfg(test)]
mod tests {
    //! The transport driven over loopback: `respond` serves each connection of a listener
    //! on 127.0.0.1 (as `run` does, without its signals), and the tests speak raw HTTP/1.1
    //! to it, so what a client sends byte for byte is what the server reads.

    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::path::Path;
    use std::time::Instant;

    use crate::sandbox::SandboxMode;

    /// A client's token (agent `ops`) and a metrics token, for the servers that take them.
    const CLIENT: &str = "0123456789abcdef0123";
    const SCRAPER: &str = "fedcba9876543210fedc";

    const JSON_ONLY: &str = "Accept: application/json\r\n";
    const BOTH: &str = "Accept: application/json, text/event-stream\r\n";
    const MODERN: &str = "MCP-Protocol-Version: 2026-07-28\r\n";

    fn manifests() -> Vec<Value> {
        vec![
            json!({"name": "echo_words", "description": "d", "parameters": {"w": {"type": "string"}},
                "command": "echo -- {{w:x}}"}),
            json!({"name": "nap", "description": "d", "command": "sleep 2.5"}),
            json!({"name": "long_nap", "description": "d", "command": "sleep 60"}),
            json!({"name": "careful", "description": "d", "parameters": {"w": {"type": "string"}},
                "command": "echo ran {{w}}", "policy": {"confirm_before_run": true}}),
        ]
    }

    /// A handler's state over a pack directory of [`manifests`], without tokens, on a
    /// loopback address; `tweak` changes it (its second argument is a scratch directory).
    fn state(tweak: impl FnOnce(&mut State, &Path)) -> (tempfile::TempDir, State) {
        let dir = tempfile::tempdir().unwrap();
        let packs = dir.path().join("packs");
        std::fs::create_dir(&packs).unwrap();
        for m in manifests() {
            let name = m["name"].as_str().unwrap();
            std::fs::write(packs.join(format!("{name}.tool.json")), m.to_string()).unwrap();
        }
        let base = Context::new().with_sandbox(SandboxMode::Off).with_workspace(dir.path().into());
        let options = Options { context: base.clone(), ..Options::over(&packs) };
        let mut state = State {
            server: Server::new(options, Seal::derived(b"test key")),
            pool: Arc::new(super::super::call_pool()),
            tokens: None,
            oauth: None,
            metrics_tokens: None,
            anonymous: Client { principal: String::new(), context: Arc::new(base) },
            loopback: true,
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            max_body: 4 << 20,
            max_calls_per_client: 16,
            calls: Arc::new(Semaphore::new(super::super::MAX_CALLS)),
            per_client: std::sync::Mutex::new(std::collections::HashMap::new()),
            next_request: AtomicU64::new(1),
        };
        tweak(&mut state, dir.path());
        (dir, state)
    }

    /// The client tokens (`CLIENT` for agent `ops`) read into `state`, over its base context
    /// (as `serve` reads them).
    fn with_tokens(state: &mut State, dir: &Path) {
        let agents = dir.join("agents");
        std::fs::create_dir_all(agents.join("ops")).unwrap();
        std::fs::write(agents.join("ops/agent.toml"), "").unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, format!("{CLIENT} ops\n")).unwrap();
        state.tokens = Some(Tokens::read(&file, &agents, &state.anonymous.context).unwrap());
    }

    /// The metrics token `SCRAPER` read into `state`.
    fn with_metrics_token(state: &mut State, dir: &Path) {
        let file = dir.join("metrics-tokens");
        std::fs::write(&file, format!("{SCRAPER}\n")).unwrap();
        state.metrics_tokens = Some(MetricsTokens::read(&file, state.tokens.as_ref()).unwrap());
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// A state served on 127.0.0.1, until dropped.
    struct Harness {
        _dir: tempfile::TempDir,
        state: Arc<State>,
        addr: SocketAddr,
        runtime: Option<tokio::runtime::Runtime>,
    }

    impl Drop for Harness {
        fn drop(&mut self) {
            // A handler that never yields must not hold the test at its end.
            if let Some(runtime) = self.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }

    fn harness(tweak: impl FnOnce(&mut State, &Path)) -> Harness {
        let (dir, state) = state(tweak);
        let state = Arc::new(state);
        let runtime = runtime();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = Arc::clone(&state);
        runtime.spawn(async move {
            while let Ok((stream, remote)) = listener.accept().await {
                let state = Arc::clone(&serving);
                let service = hyper::service::service_fn(move |req| {
                    let state = Arc::clone(&state);
                    async move { Ok::<_, Infallible>(respond(&state, req, remote).await) }
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        Harness { _dir: dir, state, addr, runtime: Some(runtime) }
    }

    /// A response: status, headers (lower-case names) and body.
    #[derive(Debug)]
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
        }

        fn json(&self) -> Value {
            serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
        }

        /// The JSON-RPC error's code and message.
        fn error(&self) -> (i64, String) {
            let v = self.json();
            (v["error"]["code"].as_i64().unwrap(), v["error"]["message"].as_str().unwrap().to_owned())
        }
    }

    /// One connection.
    struct Conn(BufReader<TcpStream>);

    impl Conn {
        fn send(&mut self, raw: &[u8]) {
            self.0.get_mut().write_all(raw).unwrap();
        }

        /// The status line and headers.
        fn head(&mut self) -> (u16, Vec<(String, String)>) {
            let mut line = String::new();
            self.0.read_line(&mut line).unwrap();
            let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
            let mut headers = Vec::new();
            loop {
                line.clear();
                self.0.read_line(&mut line).unwrap();
                let Some((name, value)) = line.trim_end().split_once(':') else { break };
                headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
            }
            (status, headers)
        }

        /// One chunk of a chunked body (None: the last).
        fn chunk(&mut self) -> Option<String> {
            let mut size = String::new();
            self.0.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or_else(|e| panic!("chunk size {size:?}: {e}"));
            let mut data = vec![0; n + 2];
            self.0.read_exact(&mut data).unwrap();
            data.truncate(n);
            (n > 0).then(|| String::from_utf8(data).unwrap())
        }

        /// A whole response (`head_only`: the answer to a HEAD, which has no body).
        fn reply(&mut self, head_only: bool) -> Reply {
            let (status, headers) = self.head();
            let mut reply = Reply { status, headers, body: String::new() };
            if head_only {
                return reply;
            }
            if let Some(n) = reply.header("content-length") {
                let mut body = vec![0; n.parse().unwrap()];
                self.0.read_exact(&mut body).unwrap();
                reply.body = String::from_utf8(body).unwrap();
            } else if reply.header("transfer-encoding") == Some("chunked") {
                while let Some(chunk) = self.chunk() {
                    reply.body.push_str(&chunk);
                }
            } else {
                self.0.read_to_string(&mut reply.body).unwrap();
            }
            reply
        }
    }

    impl Harness {
        fn connect(&self) -> Conn {
            let stream = TcpStream::connect(self.addr).unwrap();
            // Generous for a loopback answer; a hung server fails the test instead of hanging it.
            stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            Conn(BufReader::new(stream))
        }

        /// Send one request on a connection of its own and read its answer.
        fn send(&self, raw: &str) -> Reply {
            let mut conn = self.connect();
            conn.send(raw.as_bytes());
            conn.reply(raw.starts_with("HEAD "))
        }

        /// `GET path` with these header lines besides `Host`.
        fn get(&self, path: &str, headers: &str) -> Reply {
            self.send(&format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n"))
        }

        /// POST `body` to the endpoint with these header lines besides `Host`, a JSON
        /// `Content-Type` and `Content-Length`.
        fn post(&self, headers: &str, body: &str) -> Reply {
            self.send(&post_request(headers, body))
        }
    }

    fn post_request(headers: &str, body: &str) -> String {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    fn rpc(id: u64, method: &str, params: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    }

    fn call(id: u64, tool: &str, arguments: Value) -> String {
        rpc(id, "tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// A 2026-07-28 request: its `_meta` envelope.
    fn modern(id: u64, method: &str, mut params: Value) -> String {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
        rpc(id, method, params)
    }

    fn bearer(token: &str) -> String {
        format!("Authorization: Bearer {token}\r\n")
    }

    fn metrics_text(h: &Harness) -> String {
        h.state.server.metrics.render()
    }

    #[test]
    fn healthz_answers_get_and_head_without_a_token_or_a_host_check_and_other_paths_say_where_the_endpoint_is() {
        let h = harness(with_tokens);
        let r = h.send("GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n");
        assert_eq!((r.status, r.body.as_str()), (200, "ok\n"), "{r:?}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        let r = h.send("HEAD /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n");
        assert_eq!(r.status, 200, "{r:?}");
        // Another method is not the health check: it needs a token like any other request.
        let r = h.send("POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(r.status, 401, "{r:?}");
        let token = bearer(CLIENT);
        let r = h.send(&format!("POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{token}Content-Length: 0\r\n\r\n"));
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(r.body, "not found: the MCP endpoint is /mcp\n");
        let r = h.get("/elsewhere", &token);
        assert_eq!((r.status, r.body.as_str()), (404, "not found: the MCP endpoint is /mcp\n"));
        // GET and DELETE on the endpoint: 405, POST is allowed.
        for method in ["GET", "DELETE"] {
            let r = h.send(&format!("{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{token}\r\n"));
            assert_eq!(r.status, 405, "{method}: {r:?}");
            assert_eq!(r.header("allow"), Some("POST"));
            assert_eq!(r.error(), (INVALID_REQUEST, "use POST".into()));
            assert_eq!(r.json()["id"], Value::Null);
        }
        // POST is the endpoint's (and answers with the tools).
        let r = h.post(&format!("{token}{JSON_ONLY}"), &rpc(1, "tools/list", json!({})));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 4, "{r:?}");
        // Every answer is counted by its status.
        let text = metrics_text(&h);
        assert!(text.contains(r#"packs_http_responses_total{code="405"} 2"#), "{text}");
        assert!(text.contains(r#"packs_http_responses_total{code="200"} 3"#), "{text}");
    }

    #[test]
    fn host_names_this_server_and_an_origin_is_one_allowed() {
        let (_dir, s) = state(|s, _| s.allow_hosts = vec!["mcp.example".into()]);
        for host in ["127.0.0.1:8731", "127.0.0.1", "[::1]:8731", "[::1]", "10.1.2.3:80", "localhost", "LocalHost:8731"]
        {
            assert!(host_allowed(&s, host), "{host}");
        }
        assert!(host_allowed(&s, "MCP.example:443"));
        assert!(host_allowed(&s, "mcp.example"));
        for host in
            ["evil.example", "evil.example:8731", "localhost.evil.example", "localhost:x", "mcp.example.evil", ""]
        {
            assert!(!host_allowed(&s, host), "{host}");
        }
        // `localhost` names this server only when it listens on a loopback address.
        let (_dir, public) = state(|s, _| s.loopback = false);
        assert!(!host_allowed(&public, "localhost:8731"));
        assert!(host_allowed(&public, "192.0.2.1:8731"));
        assert!(!host_allowed(&public, "mcp.example"));

        let h = harness(|s, _| s.allow_origins = vec!["https://app.example".into()]);
        let list = rpc(1, "tools/list", json!({}));
        let refused = |r: Reply, says: &str| {
            assert_eq!(r.status, 403, "{r:?}");
            let (code, message) = r.error();
            assert_eq!(code, INVALID_REQUEST);
            assert!(message.contains(says), "{message}");
        };
        refused(
            h.send(&post_request(JSON_ONLY, &list).replace("Host: 127.0.0.1", "Host: evil.example")),
            "Host `evil.example` is not this server (DNS-rebinding protection; see --allow-host)",
        );
        refused(
            h.send(&post_request(JSON_ONLY, &list).replace("Host: 127.0.0.1\r\n", "")),
            "a request needs a Host header",
        );
        refused(
            h.post(&format!("Origin: https://evil.example\r\n{JSON_ONLY}"), &list),
            "Origin `https://evil.example` is not allowed (DNS-rebinding protection; see --allow-origin)",
        );
        let r = h.post(&format!("Origin: https://app.example\r\n{JSON_ONLY}"), &list);
        assert_eq!(r.status, 200, "{r:?}");
        let r = h.send(&post_request(JSON_ONLY, &list).replace("Host: 127.0.0.1", "Host: localhost:1"));
        assert_eq!(r.status, 200, "{r:?}");
        let text = metrics_text(&h);
        assert!(text.contains(r#"packs_denials_total{reason="origin_or_host"} 3"#), "{text}");
    }

    #[test]
    fn a_bearer_token_names_the_client_and_a_refusal_says_why_in_its_challenge() {
        let h = harness(with_tokens);
        let list = rpc(1, "tools/list", json!({}));
        let r = h.post(JSON_ONLY, &list);
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(r.header("www-authenticate"), Some(r#"Bearer realm="packs""#));
        assert_eq!(r.error(), (INVALID_REQUEST, "a bearer token is needed".into()));
        let r = h.post(&format!("{}{JSON_ONLY}", bearer("0123456789abcdef0124")), &list);
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some(r#"Bearer realm="packs", error="invalid_token", error_description="the token is not valid""#)
        );
        assert_eq!(r.error().1, "a valid bearer token is needed: the token is not valid");
        let r = h.post(&format!("{}{JSON_ONLY}", bearer(CLIENT)), &list);
        assert_eq!(r.status, 200, "{r:?}");
        let text = metrics_text(&h);
        assert!(text.contains(r#"packs_denials_total{reason="unauthenticated"} 2"#), "{text}");

        // A server without tokens serves everyone as the anonymous client.
        let open = harness(|_, _| {});
        assert_eq!(open.post(JSON_ONLY, &list).status, 200);
    }

    #[test]
    fn a_challenge_holds_only_what_a_header_value_can() {
        let (_dir, s) = state(|_, _| {});
        let r = unauthorized(&s, Some("a \"b\" \\c é\nd"), "unused");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers()[header::WWW_AUTHENTICATE],
            r#"Bearer realm="packs", error="invalid_token", error_description="a 'b' 'c d""#
        );
        let r = unauthorized(&s, None, "what is needed");
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], r#"Bearer realm="packs""#);
    }

    #[test]
    fn metrics_are_open_only_without_clients_and_otherwise_take_only_a_metrics_token() {
        let open = harness(|_, _| {});
        let r = open.get("/metrics", "");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
        assert!(r.body.contains("packs_calls_in_flight 0") && r.body.ends_with("# EOF\n"), "{}", r.body);
        // Only GET reads them.
        let r = open.send("POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(r.status, 404, "{r:?}");

        let expect = |r: Reply, status: u16, says: &str| {
            assert_eq!(r.status, status, "{r:?}");
            assert_eq!(r.error().1, says, "{r:?}");
        };
        // Clients told apart, no metrics token: nobody reads them.
        let clients = harness(with_tokens);
        expect(clients.get("/metrics", ""), 401, "a bearer token from --metrics-token-file is needed");
        expect(
            clients.get("/metrics", &bearer(CLIENT)),
            403,
            "a client's token does not open /metrics (they count every agent's calls): start the server with --metrics-token-file and scrape with one of its tokens",
        );
        let text = metrics_text(&clients);
        assert!(text.contains(r#"packs_denials_total{reason="metrics_credential"} 1"#), "{text}");
        assert!(text.contains(r#"packs_denials_total{reason="unauthenticated"} 1"#), "{text}");

        // With a metrics token: that token and no other.
        let both = harness(|s, dir| {
            with_tokens(s, dir);
            with_metrics_token(s, dir);
        });
        assert_eq!(both.get("/metrics", &bearer(SCRAPER)).status, 200);
        expect(both.get("/metrics", ""), 401, "a bearer token from --metrics-token-file is needed");
        let r = both.get("/metrics", &bearer("0123456789abcdef0124"));
        assert!(r.header("www-authenticate").unwrap().contains("the token is not a metrics token"), "{r:?}");
        expect(r, 401, "a valid bearer token is needed: the token is not a metrics token");
        expect(
            both.get("/metrics", &bearer(CLIENT)),
            403,
            "a client's token does not open /metrics (they count every agent's calls): use a token from --metrics-token-file",
        );
        // A metrics token is not a client's.
        assert_eq!(both.post(&format!("{}{JSON_ONLY}", bearer(SCRAPER)), &rpc(1, "tools/list", json!({}))).status, 401);

        // A metrics token file on a server without client tokens: its tokens only.
        let scraped = harness(with_metrics_token);
        assert_eq!(scraped.get("/metrics", "").status, 401);
        assert_eq!(scraped.get("/metrics", &bearer(SCRAPER)).status, 200);
        assert_eq!(scraped.post(JSON_ONLY, &rpc(1, "tools/list", json!({}))).status, 200);
    }

    #[test]
    fn a_post_needs_json_and_an_accept_that_takes_json_or_a_stream_and_an_early_refusal_closes() {
        let h = harness(|_, _| {});
        let list = rpc(1, "tools/list", json!({}));
        let r = h.send(&post_request(JSON_ONLY, &list).replace("application/json\r\nAccept", "text/plain\r\nAccept"));
        assert_eq!(r.status, 415, "{r:?}");
        assert_eq!(r.error(), (INVALID_REQUEST, "Content-Type must be application/json".into()));
        // Its body was not read: the connection closes, and the client is told.
        assert_eq!(r.header("connection"), Some("close"));
        for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
            let raw =
                post_request(JSON_ONLY, &list).replace("Type: application/json", &format!("Type: {content_type}"));
            assert_eq!(h.send(&raw).status, 200, "{content_type}");
        }
        let r = h.post("Accept: text/html\r\n", &list);
        assert_eq!(r.status, 406, "{r:?}");
        assert_eq!(r.error().1, "Accept must list application/json and text/event-stream");
        assert_eq!(r.header("connection"), Some("close"));
        for accept in ["Accept: application/json\r\n", "Accept: text/event-stream\r\n", "Accept: */*\r\n", ""] {
            let r = h.post(accept, &list);
            assert_eq!(r.status, 200, "{accept:?}: {r:?}");
            // The body was read: the connection stays open.
            assert_eq!(r.header("connection"), None, "{accept:?}");
        }
        // Without a body, nothing is left unread, whatever the answer.
        let r = h.send("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\r\n");
        assert_eq!((r.status, r.header("connection")), (415, None));
        // A connection whose request was answered stays usable.
        let mut conn = h.connect();
        for id in 1..=2 {
            conn.send(post_request(JSON_ONLY, &rpc(id, "ping", json!({}))).as_bytes());
            let r = conn.reply(false);
            assert_eq!(r.json()["id"], id, "{r:?}");
        }
    }

    #[test]
    fn the_body_is_taken_up_to_max_body_bytes_and_each_bad_body_gets_its_error() {
        let h = harness(|s, _| s.max_body = 200);
        let list = rpc(1, "tools/list", json!({}));
        let exactly = format!("{list:200}");
        let r = h.post(JSON_ONLY, &exactly);
        assert_eq!(r.status, 200, "{r:?}");
        let r = h.post(JSON_ONLY, &format!("{list:201}"));
        assert_eq!(r.status, 413, "{r:?}");
        assert_eq!(r.error(), (INVALID_REQUEST, "the body is larger than 200 bytes (--max-body)".into()));
        // A chunked body has no length to refuse up front: it is cut when it passes the limit.
        let chunk = " ".repeat(150);
        let raw = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{JSON_ONLY}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
            chunk.len(),
            chunk.len()
        );
        let r = h.send(&raw);
        assert_eq!(r.status, 413, "{r:?}");
        // A chunked body within the limit is read.
        let raw = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{JSON_ONLY}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{list}\r\n0\r\n\r\n",
            list.len()
        );
        assert_eq!(h.send(&raw).status, 200);
        // A body that ends before its length: it could not be read.
        let mut conn = h.connect();
        conn.send(post_request(JSON_ONLY, &list).replace(&format!("Length: {}", list.len()), "Length: 100").as_bytes());
        conn.0.get_ref().shutdown(std::net::Shutdown::Write).unwrap();
        let r = conn.reply(false);
        assert_eq!(r.status, 400, "{r:?}");
        let (code, message) = r.error();
        assert_eq!(code, PARSE_ERROR);
        assert!(message.starts_with("the body could not be read: "), "{message}");

        let bad = |body: &str, status: u16, code: i64, says: &str| {
            let r = h.post(JSON_ONLY, body);
            assert_eq!(r.status, status, "{body}: {r:?}");
            let (c, message) = r.error();
            assert_eq!(c, code, "{body}");
            assert!(message.starts_with(says), "{body}: {message}");
        };
        bad("{", 400, PARSE_ERROR, "not JSON: ");
        bad(&format!("[{list}]"), 400, INVALID_REQUEST, "JSON-RPC batches are not taken over HTTP");
        bad("\"tools/list\"", 400, INVALID_REQUEST, "a message must be a JSON object");
        bad(r#"{"jsonrpc": "2.0"}"#, 400, INVALID_REQUEST, "a request needs a `method`");
        // A notification, or a response to a request of ours: accepted, nothing to say.
        for body in [
            r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
            r#"{"jsonrpc": "2.0", "id": 7, "result": {}}"#,
        ] {
            let r = h.post(JSON_ONLY, body);
            assert_eq!((r.status, r.body.as_str()), (202, ""), "{body}");
        }
    }

    #[test]
    fn the_version_header_decides_the_era_and_a_stateless_requests_headers_mirror_its_body() {
        assert_eq!(HEADER_MISMATCH, -32020);
        let h = harness(|_, _| {});
        let list = rpc(1, "tools/list", json!({}));
        let r = h.post(&format!("MCP-Protocol-Version: 2025-11-25\r\n{JSON_ONLY}"), &list);
        assert_eq!(r.status, 200, "{r:?}");
        let r = h.post(&format!("MCP-Protocol-Version: 1999-01-01\r\n{JSON_ONLY}"), &list);
        assert_eq!(r.status, 400, "{r:?}");
        let v = r.json();
        assert_eq!(v["id"], 1);
        assert_eq!(v["error"]["code"], UNSUPPORTED_VERSION);
        assert_eq!(v["error"]["data"]["requested"], "1999-01-01");
        assert_eq!(v["error"]["data"]["supported"][0], "2026-07-28");
        // A 2026-07-28 envelope without its header.
        let r = h.post(JSON_ONLY, &modern(2, "tools/list", json!({})));
        assert_eq!(r.status, 400, "{r:?}");
        assert_eq!(r.json()["id"], 2);
        assert!(r.error().1.contains("needs `MCP-Protocol-Version: 2026-07-28`"), "{r:?}");
        assert_eq!(r.error().0, HEADER_MISMATCH);

        let stateless = |headers: &str, body: &str| h.post(&format!("{MODERN}{JSON_ONLY}{headers}"), body);
        let mismatch = |r: Reply, says: &str| {
            assert_eq!(r.status, 400, "{r:?}");
            assert_eq!(r.error(), (HEADER_MISMATCH, format!("Header mismatch: {says}")), "{r:?}");
        };
        let r = stateless("Mcp-Method: tools/list\r\n", &modern(3, "tools/list", json!({})));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 4);
        mismatch(stateless("", &modern(3, "tools/list", json!({}))), "the Mcp-Method header is missing");
        mismatch(
            stateless("Mcp-Method: tools/call\r\n", &modern(3, "tools/list", json!({}))),
            "Mcp-Method `tools/call` does not match the body's `tools/list`",
        );
        let mut older = serde_json::from_str::<Value>(&modern(3, "tools/list", json!({}))).unwrap();
        older["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
        mismatch(
            stateless("Mcp-Method: tools/list\r\n", &older.to_string()),
            "MCP-Protocol-Version `2026-07-28` does not match the body's `2025-11-25`",
        );
        // A stateless request without the envelope: the envelope's own error, 400.
        let r = stateless("Mcp-Method: tools/list\r\n", &list);
        assert_eq!(r.status, 400, "{r:?}");
        assert_eq!(r.json()["error"]["code"], super::super::INVALID_PARAMS);

        let echo = modern(4, "tools/call", json!({"name": "echo_words", "arguments": {"w": "x"}}));
        for name in ["echo_words", "=?base64?ZWNob193b3Jkcw==?="] {
            let r = stateless(&format!("Mcp-Method: tools/call\r\nMcp-Name: {name}\r\n"), &echo);
            assert_eq!(r.status, 200, "{name}: {r:?}");
            assert_eq!(r.json()["result"]["content"][0]["text"], "-- x\n", "{r:?}");
        }
        mismatch(stateless("Mcp-Method: tools/call\r\n", &echo), "the Mcp-Name header is missing");
        mismatch(
            stateless("Mcp-Method: tools/call\r\nMcp-Name: nap\r\n", &echo),
            "Mcp-Name `nap` does not match the body's `echo_words`",
        );
        mismatch(
            stateless("Mcp-Method: tools/call\r\nMcp-Name: =?base64?!!?=\r\n", &echo),
            "Mcp-Name is not valid base64 UTF-8",
        );
        // An unknown method: 404 in the stateless era, a JSON-RPC error in the other.
        let r = stateless("Mcp-Method: nope/x\r\n", &modern(5, "nope/x", json!({})));
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(r.error().0, METHOD_NOT_FOUND);
        let r = h.post(JSON_ONLY, &rpc(5, "nope/x", json!({})));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.error().0, METHOD_NOT_FOUND);
        // A session header means nothing to the stateless era.
        let r = stateless("Mcp-Method: tools/list\r\nMcp-Session-Id: made-up\r\n", &modern(6, "tools/list", json!({})));
        assert_eq!(r.status, 200, "{r:?}");
    }

    #[test]
    fn a_header_value_is_itself_or_the_base64_it_wraps() {
        assert_eq!(decode_header_value("echo_words").as_deref(), Some("echo_words"));
        assert_eq!(decode_header_value("").as_deref(), Some(""));
        assert_eq!(decode_header_value("=?base64?ZWNob193b3Jkcw==?=").as_deref(), Some("echo_words"));
        assert_eq!(decode_header_value("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode_header_value("=??=").as_deref(), Some("=??="));
        assert_eq!(decode_header_value("=?base64?QQ==QQ==?="), None);
        assert_eq!(decode_header_value("=?base64?not base64?="), None);
        assert_eq!(decode_header_value("=?base64?/w==?="), None, "not UTF-8");
    }

    #[test]
    fn initialize_mints_a_session_that_only_its_own_client_can_use() {
        let h = harness(|_, _| {});
        let init = rpc(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        let r = h.post(JSON_ONLY, &init);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25");
        let session = r.header("mcp-session-id").expect("a session").to_owned();
        let opened = h.state.server.seal.open(&session).unwrap();
        assert_eq!(
            (opened["k"].as_str(), opened["v"].as_str(), opened["e"].as_bool()),
            (Some("session"), Some("2025-11-25"), Some(false))
        );
        let list = rpc(2, "tools/list", json!({}));
        let r = h.post(&format!("Mcp-Session-Id: {session}\r\n{JSON_ONLY}"), &list);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("mcp-session-id"), None, "only initialize mints one");
        let unknown = |token: &str| {
            let r = h.post(&format!("Mcp-Session-Id: {token}\r\n{JSON_ONLY}"), &list);
            assert_eq!(r.status, 404, "{r:?}");
            assert_eq!(r.error(), (INVALID_REQUEST, "unknown session: initialize again".into()));
            assert_eq!(r.json()["id"], 2);
        };
        unknown("made-up");
        // Sealed by this server, but not a session, or another client's.
        let seal = &h.state.server.seal;
        unknown(&seal.seal(&json!({"k": "ticket", "v": "2025-11-25", "e": false, "p": "", "n": "1"})));
        unknown(&seal.seal(&json!({"k": "session", "v": "2025-11-25", "e": false, "p": "ops#1", "n": "1"})));
    }

    /// The events of an SSE answer up to its last (keep-alive comments skipped).
    fn read_events(conn: &mut Conn) -> Vec<Value> {
        let (mut events, started) = (Vec::new(), Instant::now());
        while let Some(chunk) = conn.chunk() {
            // A stream that never ends (keep-alives, or events without end) fails the test.
            assert!(started.elapsed() < Duration::from_secs(30) && events.len() < 1000, "no end: {events:?}");
            if chunk == ":\n\n" {
                continue;
            }
            let data = chunk.strip_prefix("event: message\ndata: ").and_then(|d| d.strip_suffix("\n\n"));
            events.push(serde_json::from_str(data.unwrap_or_else(|| panic!("{chunk:?}"))).unwrap());
        }
        events
    }

    #[test]
    fn a_call_answers_on_a_stream_that_asks_for_approval_only_of_a_client_that_can_answer() {
        let h = harness(|_, _| {});
        let session = |capabilities: Value| {
            let init = rpc(
                1,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}),
            );
            h.post(JSON_ONLY, &init).header("mcp-session-id").unwrap().to_owned()
        };
        // A client that can answer a form is asked on the stream, and the call waits for it.
        let asked = session(json!({"elicitation": {}}));
        let mut conn = h.connect();
        conn.send(
            post_request(&format!("Mcp-Session-Id: {asked}\r\n{BOTH}"), &call(2, "careful", json!({"w": "yes"})))
                .as_bytes(),
        );
        let (status, headers) = conn.head();
        assert_eq!(status, 200);
        let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(header("content-type"), Some("text/event-stream"));
        assert_eq!(header("cache-control"), Some("no-cache"));
        let request = loop {
            let chunk = conn.chunk().expect("an elicitation request before the answer");
            if chunk != ":\n\n" {
                break serde_json::from_str::<Value>(chunk.strip_prefix("event: message\ndata: ").unwrap().trim_end())
                    .unwrap();
            }
        };
        assert_eq!(request["method"], "elicitation/create", "{request}");
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"approve": true}}});
        let r = h.post(&format!("Mcp-Session-Id: {asked}\r\n{JSON_ONLY}"), &answer.to_string());
        assert_eq!(r.status, 202, "{r:?}");
        let events = read_events(&mut conn);
        let last = events.last().unwrap();
        assert_eq!(last["id"], 2);
        assert_eq!(last["result"]["content"][0]["text"], "ran yes\n", "{events:?}");

        // A client that cannot answer one is not asked: the call is refused at once.
        let not_asked = session(json!({}));
        let mut conn = h.connect();
        conn.send(
            post_request(&format!("Mcp-Session-Id: {not_asked}\r\n{BOTH}"), &call(3, "careful", json!({"w": "no"})))
                .as_bytes(),
        );
        assert_eq!(conn.head().0, 200);
        let events = read_events(&mut conn);
        assert_eq!(events.len(), 1, "only the answer: {events:?}");
        assert_eq!(events[0]["id"], 3);
        assert_eq!(events[0]["result"]["isError"], true, "{events:?}");
        assert!(!events[0].to_string().contains("ran no"), "{events:?}");

        // A call answers on a stream only when the client takes one; other requests never do.
        let r = h.post(BOTH, &rpc(4, "tools/list", json!({})));
        assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
        let r = h.post(JSON_ONLY, &call(5, "echo_words", json!({"w": "x"})));
        assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
        assert_eq!(r.json()["result"]["content"][0]["text"], "-- x\n");
        let r = h.post(BOTH, &call(6, "echo_words", json!({"w": "x"})));
        assert_eq!(r.header("content-type"), Some("text/event-stream"), "{r:?}");
        assert!(r.body.contains(r#""text":"-- x\n""#), "{r:?}");
    }

    #[test]
    fn a_stream_with_nothing_to_say_sends_a_comment_each_second_and_none_sooner() {
        let h = harness(|_, _| {});
        let mut conn = h.connect();
        let sent = Instant::now();
        conn.send(post_request(BOTH, &call(1, "nap", json!({}))).as_bytes());
        assert_eq!(conn.head().0, 200);
        let first = conn.chunk().unwrap();
        let after = sent.elapsed();
        assert_eq!(first, ":\n\n", "a 2.5 s call says nothing else first");
        assert!(after >= Duration::from_millis(900), "the first keep-alive came after {after:?}");
        let events = read_events(&mut conn);
        assert_eq!(events.last().unwrap()["id"], 1, "{events:?}");
        assert_eq!(events.last().unwrap()["result"]["isError"], false, "{events:?}");
    }

    #[test]
    fn a_client_that_closes_its_stream_ends_its_call() {
        let h = harness(|_, _| {});
        let mut conn = h.connect();
        conn.send(post_request(BOTH, &call(1, "long_nap", json!({}))).as_bytes());
        assert_eq!(conn.head().0, 200);
        let waited = Instant::now();
        while h.state.server.in_flight() == 0 {
            assert!(waited.elapsed() < Duration::from_secs(30), "the call never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(conn);
        // The 60 s tool is killed once a keep-alive finds the client gone.
        let waited = Instant::now();
        while h.state.server.in_flight() > 0 {
            assert!(waited.elapsed() < Duration::from_secs(30), "the call outlived its client");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn a_client_has_its_own_call_slots_and_idle_clients_are_forgotten_past_the_tracked_number() {
        let (_dir, s) = state(|s, _| s.max_calls_per_client = 2);
        let rt = runtime();
        let client =
            |principal: &str| Client { principal: principal.into(), context: Arc::clone(&s.anonymous.context) };
        let (a, b) = (client("a"), client("b"));
        let first = rt.block_on(take_call_slot(&s, &a)).ok().unwrap();
        let _second = rt.block_on(take_call_slot(&s, &a)).ok().unwrap();
        let Err(refused) = rt.block_on(take_call_slot(&s, &a)) else { panic!("a third call of `a` ran") };
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        let body = rt.block_on(refused.into_body().collect()).unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], super::super::SERVER_ERROR);
        assert_eq!(body["error"]["message"], "2 calls of this client are running; try again when one ends");
        assert!(s.server.metrics.render().contains(r#"packs_denials_total{reason="too_many_calls"} 1"#));
        // Another client's calls are its own; one of `a`'s ending frees a slot.
        let b_slot = rt.block_on(take_call_slot(&s, &b)).ok().unwrap();
        drop(first);
        let _third = rt.block_on(take_call_slot(&s, &a)).ok().unwrap();

        // Past the tracked number, clients with nothing running are forgotten, the others kept.
        drop(b_slot);
        {
            let mut per_client = s.per_client.lock().unwrap();
            for n in per_client.len()..MAX_CLIENTS_TRACKED {
                per_client.insert(format!("idle{n}"), Arc::new(Semaphore::new(2)));
            }
            assert_eq!(per_client.len(), MAX_CLIENTS_TRACKED);
        }
        let _c = rt.block_on(take_call_slot(&s, &client("c"))).ok().unwrap();
        let mut kept: Vec<String> = s.per_client.lock().unwrap().keys().cloned().collect();
        kept.sort();
        assert_eq!(kept, ["a", "c"]);
        // Below the tracked number, nobody is forgotten.
        let d_slot = rt.block_on(take_call_slot(&s, &client("d"))).ok().unwrap();
        drop(d_slot);
        let _e = rt.block_on(take_call_slot(&s, &client("e"))).ok().unwrap();
        assert_eq!(s.per_client.lock().unwrap().len(), 4);
    }

    #[test]
    fn past_256_unread_messages_progress_is_dropped_and_a_response_never_is() {
        let (_dir, s) = state(|_, _| {});
        let rt = runtime();
        let settled = Settled { era: None, version: None, elicitation: false };
        let (peer, mut inbox) = peer(&s, &s.anonymous, "k".into(), settled);
        let progress =
            |i: usize| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}});
        for i in 0..300 {
            peer.send(progress(i));
        }
        peer.send(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        let mut received = Vec::new();
        while received.last().is_none_or(|m: &Value| m.get("id").is_none()) {
            assert!(received.len() <= MAX_QUEUED, "{:?}", &received[received.len() - 3..]);
            received.push(rt.block_on(inbox.recv()).unwrap());
        }
        assert_eq!(received.len(), MAX_QUEUED + 1);
        assert_eq!(received[MAX_QUEUED - 1]["params"]["progress"], MAX_QUEUED - 1);
        assert_eq!(inbox.queued.load(Ordering::Relaxed), 0);
        // Once read, there is room again.
        for i in 0..3 {
            peer.send(progress(i));
        }
        let polled = rt.block_on(std::future::poll_fn(|cx| inbox.poll_recv(cx)));
        assert_eq!(polled.unwrap()["params"]["progress"], 0);
        assert_eq!(inbox.queued.load(Ordering::Relaxed), 2);
        assert_eq!(rt.block_on(inbox.recv()).unwrap()["params"]["progress"], 1);
        assert_eq!(inbox.queued.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_answer_is_the_response_to_the_request_and_a_request_that_ends_without_one_says_so() {
        let id = json!(7);
        assert!(is_final(&json!({"jsonrpc": "2.0", "id": 7, "result": {}}), &id));
        assert!(is_final(&json!({"jsonrpc": "2.0", "id": 7, "error": {"code": 1}}), &id));
        assert!(!is_final(&json!({"jsonrpc": "2.0", "id": 8, "result": {}}), &id));
        assert!(!is_final(&json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create"}), &id));
        assert!(!is_final(&json!({"jsonrpc": "2.0", "method": "notifications/progress"}), &id));
        assert!(!is_final(&json!({"jsonrpc": "2.0", "result": {}}), &id));

        let rt = runtime();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inbox = Inbox { rx, queued: Arc::new(AtomicUsize::new(1)) };
        tx.send(json!(1)).unwrap();
        drop(tx);
        assert_eq!(rt.block_on(inbox.recv()), Some(json!(1)));
        assert_eq!(rt.block_on(inbox.recv()), None);
        assert_eq!(inbox.queued.load(Ordering::Relaxed), 0);

        let (_dir, s) = state(|_, _| {});
        let settled = Settled { era: None, version: None, elicitation: false };
        let (peer, inbox) = peer(&s, &s.anonymous, "k".into(), settled);
        peer.send(json!({"jsonrpc": "2.0", "method": "notifications/progress"}));
        peer.send(json!({"jsonrpc": "2.0", "id": 7, "result": {"ok": 1}}));
        let guard = CancelOnDrop { peer: Arc::clone(&peer), id: id.clone(), armed: true };
        assert_eq!(
            rt.block_on(final_answer(inbox, &id, guard)),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"ok": 1}})
        );

        let (tx, rx) = mpsc::unbounded_channel();
        drop(tx);
        let ended = Inbox { rx, queued: Arc::new(AtomicUsize::new(0)) };
        let guard = CancelOnDrop { peer, id: id.clone(), armed: true };
        let answer = rt.block_on(final_answer(ended, &id, guard));
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], super::super::INTERNAL_ERROR);
        assert_eq!(answer["error"]["message"], "the request ended without an answer");
    }

    #[test]
    fn serve_refuses_what_is_unsafe_or_unusable_before_it_listens() {
        let dir = tempfile::tempdir().unwrap();
        let options = |addr: &str| {
            let mut o = HttpOptions::new(Options::over(dir.path()), addr.parse().unwrap());
            o.agents = dir.path().join("agents");
            o
        };
        let refusal = |o: HttpOptions| serve(o).expect_err("refused").to_string();
        let missing = dir.path().join("missing");
        assert!(
            refusal(options("192.0.2.1:8731")).starts_with("refusing to serve 192.0.2.1:8731 without authentication")
        );
        // With tokens (or on loopback), the next check speaks.
        let mut public = options("192.0.2.1:8731");
        public.token_file = Some(missing.clone());
        assert!(refusal(public).starts_with("cannot read the token file"));
        let mut local = options("127.0.0.1:0");
        local.metrics_token_file = Some(missing.clone());
        assert!(refusal(local).starts_with("--metrics-token-file: cannot read"));
        let mut tls = options("127.0.0.1:0");
        tls.tls = Some((missing.clone(), missing.clone()));
        assert!(refusal(tls).starts_with(&format!("TLS: {}", missing.display())));
        // A session key of 32 bytes or more.
        let key = dir.path().join("key");
        let with_key = |len: usize| {
            std::fs::write(&key, vec![b'k'; len]).unwrap();
            let mut o = options("127.0.0.1:0");
            o.session_key = Some(key.clone());
            o.oauth_agent = Some("nobody".into());
            refusal(o)
        };
        assert!(with_key(31).ends_with("a session key needs at least 32 bytes (e.g. `head -c 32 /dev/urandom`)"));
        assert!(with_key(32).starts_with("--oauth-agent: "), "{}", with_key(32));
        let mut o = options("127.0.0.1:0");
        o.session_key = Some(missing.clone());
        assert!(refusal(o).starts_with(&missing.display().to_string()));
    }

    #[test]
    fn a_certificate_file_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let Err(e) = tls_acceptor(&empty, &empty) else { panic!("an empty certificate file was taken") };
        assert_eq!(e.to_string(), format!("TLS: {}: no certificate in the file", empty.display()));
    }

    #[test]
    fn run_says_when_its_address_cannot_be_bound() {
        let (_dir, s) = state(|_, _| {});
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let result = runtime().block_on(run(Arc::new(s), addr, 1, Duration::from_secs(1), None));
        let Err(StartError::Listen { addr: said, .. }) = result else { panic!("{result:?}") };
        assert_eq!(said, addr);
    }

    #[test]
    fn with_oauth_the_resource_metadata_needs_no_token_and_a_refused_jwt_points_to_it() {
        let keys = issuer::Server::start();
        keys.json("/jwks", &json!({"keys": []}));
        let options = OAuthOptions {
            issuer: "https://issuer.example".into(),
            resource: "https://tools.example/mcp".into(),
            audience: None,
            jwks_uri: Some(format!("{}/jwks", keys.url)),
            ca: None,
        };
        let client = Client { principal: String::new(), context: Arc::new(Context::new()) };
        let oauth = runtime().block_on(OAuth::start(options, client)).unwrap();
        let h = harness(move |s, _| s.oauth = Some(oauth));
        for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
            let r = h.get(path, "");
            assert_eq!(r.status, 200, "{path}: {r:?}");
            assert_eq!(r.json()["resource"], "https://tools.example/mcp");
            assert_eq!(r.json()["authorization_servers"][0], "https://issuer.example");
        }
        // Only GET, only those paths.
        let r = h.send(
            "POST /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(h.get("/.well-known/oauth-protected-resource/other", "").status, 401);
        let pointer = r#"Bearer realm="packs", resource_metadata="https://tools.example/.well-known/oauth-protected-resource/mcp""#;
        let r = h.post(JSON_ONLY, &rpc(1, "tools/list", json!({})));
        assert_eq!((r.status, r.header("www-authenticate")), (401, Some(pointer)), "{r:?}");
        let r = h.post(&format!("{}{JSON_ONLY}", bearer("not.a.jwt")), &rpc(1, "tools/list", json!({})));
        assert_eq!(r.status, 401, "{r:?}");
        let challenge = r.header("www-authenticate").unwrap();
        assert!(
            challenge.starts_with(&format!(r#"{pointer}, error="invalid_token", error_description=""#)),
            "{challenge}"
        );
        assert_ne!(r.error().1, "a valid bearer token is needed: the token is not valid", "the JWT's own refusal");
        // Clients are told apart: /metrics is not open, and a refused JWT is no metrics token.
        assert_eq!(h.get("/metrics", "").status, 401);
        assert_eq!(h.get("/metrics", &bearer("not.a.jwt")).status, 401);
    }

    use super::super::oauth::tests as issuer;

    /// An issuer on 127.0.0.1 whose key set holds `k1` (the test key of seed 1).
    fn issuer_with_k1() -> issuer::Server {
        let server = issuer::Server::start();
        server.json("/jwks", &json!({"keys": [issuer::jwk(1, "k1")]}));
        server
    }

    /// A token of `server`'s naming `k1`, signed with the test key of `seed`, its valid claims
    /// (subject `alice`, audience `issuer::RESOURCE`) changed by `changes`.
    fn jwt(server: &issuer::Server, seed: u8, changes: Value) -> String {
        issuer::token(seed, Some("k1"), &issuer::claims(&server.url, changes))
    }

    /// OAuth on, taking `server`'s tokens for agent `robots`, whose calls are recorded in
    /// `audit.jsonl`; and an approval key, so a stateless call's ticket is bound to its client.
    fn with_oauth(server: &issuer::Server) -> impl FnOnce(&mut State, &Path) {
        let options = issuer::options(&server.url, Some(format!("{}/jwks", server.url)));
        move |s, dir| {
            let agents = dir.join("agents");
            std::fs::create_dir_all(agents.join("robots")).unwrap();
            std::fs::write(agents.join("robots/agent.toml"), "").unwrap();
            let base = Context::clone(&s.anonymous.context);
            let context = base
                .clone()
                .with_agent(crate::agent::Agent::load(&agents, "robots").unwrap())
                .with_audit(crate::audit::AuditLog::open(&dir.join("audit.jsonl")).unwrap());
            let client = Client { principal: String::new(), context: Arc::new(context) };
            s.oauth = Some(runtime().block_on(OAuth::start(options, client)).unwrap());
            let approvals = crate::call::Tickets::open(&dir.join("approval.key")).unwrap();
            let options = Options { context: base, approvals: Some(approvals), ..Options::over(&dir.join("packs")) };
            s.server = Server::new(options, Seal::derived(b"test key"));
        }
    }

    /// The challenge of a server whose resource is `issuer::RESOURCE`: where its metadata
    /// is, and why a presented token was refused.
    fn jwt_challenge(why: Option<&str>) -> String {
        let pointer = r#"Bearer realm="packs", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp""#;
        match why {
            Some(why) => format!(r#"{pointer}, error="invalid_token", error_description="{why}""#),
            None => pointer.to_owned(),
        }
    }

    /// Neither the token nor its signature is anywhere in the response.
    fn echoes_nothing_of(r: &Reply, token: &str) {
        let signature = token.rsplit('.').next().unwrap();
        for part in [token, signature] {
            assert!(!r.body.contains(part), "the body echoes the token: {r:?}");
            assert!(r.headers.iter().all(|(_, v)| !v.contains(part)), "a header echoes the token: {r:?}");
        }
    }

    fn initialize(id: u64) -> String {
        rpc(
            id,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
    }

    /// The lines of the JWT clients' audit log.
    fn audited(h: &Harness) -> Vec<Value> {
        let text = std::fs::read_to_string(h._dir.path().join("audit.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn with_oauth_a_valid_jwt_gets_through_as_its_subject_and_any_other_gets_the_challenge() {
        let keys = issuer_with_k1();
        let h = harness(with_oauth(&keys));
        let alice = jwt(&keys, 1, json!({}));
        let as_client = |token: &str| format!("{}{JSON_ONLY}", bearer(token));

        // initialize, then tools/list in the session it mints, which is alice's.
        let r = h.post(&as_client(&alice), &initialize(1));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["result"]["protocolVersion"], "2025-11-25", "{r:?}");
        echoes_nothing_of(&r, &alice);
        let session = r.header("mcp-session-id").expect("a session").to_owned();
        assert_eq!(h.state.server.seal.open(&session).unwrap()["p"], "jwt:alice");
        let list = rpc(2, "tools/list", json!({}));
        let in_session = |token: &str| format!("Mcp-Session-Id: {session}\r\n{}", as_client(token));
        let r = h.post(&in_session(&alice), &list);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["id"], 2);
        assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 4, "{r:?}");
        // Another subject of the same issuer is another client: alice's session is not bob's.
        let bob = jwt(&keys, 1, json!({"sub": "bob"}));
        let r = h.post(&in_session(&bob), &list);
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(r.error(), (INVALID_REQUEST, "unknown session: initialize again".into()));

        // A call runs with --oauth-agent's context (its agent, its audit log), in alice's slots.
        let r = h.post(&as_client(&alice), &call(3, "echo_words", json!({"w": "hi"})));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["result"]["content"][0]["text"], "-- hi\n", "{r:?}");
        let lines = audited(&h);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            (lines[0]["agent"].as_str(), lines[0]["tool"].as_str(), lines[0]["outcome"].as_str()),
            (Some("robots"), Some("echo_words"), Some("ok")),
            "{lines:?}"
        );
        let slots: Vec<String> = h.state.per_client.lock().unwrap().keys().cloned().collect();
        assert_eq!(slots, ["jwt:alice"]);

        // A 2026-07-28 approval ticket is bound to the JWT's subject: bob cannot use alice's.
        let careful = |id: u64, token: &str, ticket: Option<&str>| {
            let mut params = json!({"name": "careful", "arguments": {"w": "yes"}});
            if let Some(ticket) = ticket {
                params["requestState"] = json!(ticket);
                params["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": true}}});
            }
            let mut body: Value = serde_json::from_str(&modern(id, "tools/call", params)).unwrap();
            body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
            let headers = format!("{MODERN}Mcp-Method: tools/call\r\nMcp-Name: careful\r\n{}", as_client(token));
            let r = h.post(&headers, &body.to_string());
            assert_eq!(r.status, 200, "{r:?}");
            r.json()["result"].clone()
        };
        let asked = careful(4, &alice, None);
        assert_eq!(asked["resultType"], "input_required", "{asked}");
        let ticket = asked["requestState"].as_str().unwrap();
        let stolen = careful(5, &bob, Some(ticket));
        let text = stolen["content"][0]["text"].as_str().unwrap_or_default();
        assert!(stolen["isError"] == true && text.contains("issued to another client of this server"), "{stolen}");
        let ran = careful(6, &alice, Some(ticket));
        assert_eq!((&ran["content"][0]["text"], &ran["isError"]), (&json!("ran yes\n"), &json!(false)), "{ran}");
        let calls = audited(&h).len();

        // Refused: no token, another key's signature under k1's id, expired, for another
        // audience, from another issuer, not a JWT: 401 with the challenge, for initialize (no
        // session minted) as for a call (which never runs).
        let r = h.post(JSON_ONLY, &call(7, "echo_words", json!({"w": "x"})));
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(r.header("www-authenticate"), Some(jwt_challenge(None).as_str()));
        assert_eq!(r.error(), (INVALID_REQUEST, "a bearer token is needed".into()));
        let now = issuer::now();
        let refusals = [
            (jwt(&keys, 2, json!({})), "the token is not valid: InvalidSignature"),
            (jwt(&keys, 1, json!({"exp": now - 100})), "the token is not valid: ExpiredSignature"),
            (jwt(&keys, 1, json!({"aud": "https://other.example/mcp"})), "the token is not valid: InvalidAudience"),
            (jwt(&keys, 1, json!({"iss": "https://other.example"})), "the token is not valid: InvalidIssuer"),
            (CLIENT.to_owned(), "not a JWT: InvalidToken"),
        ];
        for (token, why) in &refusals {
            for request in [initialize(8), call(9, "echo_words", json!({"w": "x"}))] {
                let r = h.post(&as_client(token), &request);
                assert_eq!(r.status, 401, "{why}: {r:?}");
                assert_eq!(r.header("www-authenticate"), Some(jwt_challenge(Some(why)).as_str()), "{r:?}");
                assert_eq!(r.error(), (INVALID_REQUEST, format!("a valid bearer token is needed: {why}")));
                assert_eq!(r.header("mcp-session-id"), None, "{r:?}");
                echoes_nothing_of(&r, token);
            }
        }
        assert_eq!(audited(&h).len(), calls, "a refused request runs nothing");
        let text = metrics_text(&h);
        assert!(text.contains(r#"packs_denials_total{reason="unauthenticated"} 11"#), "{text}");

        // A client's JWT does not open /metrics (403, as a client's static token).
        let r = h.get("/metrics", &bearer(&alice));
        assert_eq!(r.status, 403, "{r:?}");
        assert!(r.error().1.starts_with("a client's token does not open /metrics"), "{r:?}");
        assert_eq!(h.get("/metrics", &bearer(&refusals[1].0)).status, 401);
        // Nothing above named a key the set lacks: the keys were fetched once, at start.
        assert_eq!(keys.hits("/jwks"), 1);
    }

    #[test]
    fn with_oauth_and_a_token_file_both_credentials_work_each_as_its_own_client() {
        let keys = issuer_with_k1();
        let h = harness(|s, dir| {
            with_tokens(s, dir);
            with_oauth(&keys)(s, dir);
        });
        let alice = jwt(&keys, 1, json!({}));
        let as_client = |token: &str| format!("{}{JSON_ONLY}", bearer(token));
        // Each gets in, and is its own principal: the token's agent and digest, the JWT's subject.
        let session = |token: &str| {
            let r = h.post(&as_client(token), &initialize(1));
            assert_eq!(r.status, 200, "{r:?}");
            let session = r.header("mcp-session-id").expect("a session").to_owned();
            let principal = h.state.server.seal.open(&session).unwrap()["p"].as_str().unwrap().to_owned();
            (session, principal)
        };
        let (static_session, static_principal) = session(CLIENT);
        let (jwt_session, jwt_principal) = session(&alice);
        assert!(static_principal.starts_with("ops#"), "{static_principal}");
        assert_eq!(jwt_principal, "jwt:alice");
        let list = rpc(2, "tools/list", json!({}));
        for (token, session) in [(CLIENT, &static_session), (alice.as_str(), &jwt_session)] {
            let r = h.post(&format!("Mcp-Session-Id: {session}\r\n{}", as_client(token)), &list);
            assert_eq!(r.status, 200, "{r:?}");
            assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 4, "{r:?}");
        }
        // Neither is the other: each one's session is unknown to the other.
        for (token, session) in [(CLIENT, &jwt_session), (alice.as_str(), &static_session)] {
            let r = h.post(&format!("Mcp-Session-Id: {session}\r\n{}", as_client(token)), &list);
            assert_eq!(r.status, 404, "{r:?}");
        }
        // Each one's calls run with its own agent: only the JWT's reach --oauth-agent's log.
        for token in [CLIENT, alice.as_str()] {
            let r = h.post(&as_client(token), &call(3, "echo_words", json!({"w": "hi"})));
            assert_eq!(r.json()["result"]["content"][0]["text"], "-- hi\n", "{r:?}");
        }
        let lines = audited(&h);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["agent"], "robots", "{lines:?}");
        let mut slots: Vec<String> = h.state.per_client.lock().unwrap().keys().cloned().collect();
        slots.sort();
        assert_eq!(slots, ["jwt:alice".to_owned(), static_principal]);
        // A token not in the file is tried as a JWT, and refused as one.
        let r = h.post(&as_client("0123456789abcdef0124"), &list);
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(r.header("www-authenticate"), Some(jwt_challenge(Some("not a JWT: InvalidToken")).as_str()));
        echoes_nothing_of(&r, "0123456789abcdef0124");

        // A valid JWT is no static token: a server with only the token file refuses it.
        let tokens_only = harness(with_tokens);
        let r = tokens_only.post(&as_client(&alice), &list);
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some(r#"Bearer realm="packs", error="invalid_token", error_description="the token is not valid""#)
        );
        echoes_nothing_of(&r, &alice);
        assert_eq!(tokens_only.post(&as_client(CLIENT), &list).status, 200);
    }
}
