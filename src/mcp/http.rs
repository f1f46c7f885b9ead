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
