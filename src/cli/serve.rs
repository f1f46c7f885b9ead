//! `packs serve`: its options, and the HTTP transport's start (stdio is started in mod.rs).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{exit, report};

#[derive(clap::Args, Debug)]
pub(super) struct ServeArgs {
    /// Reload when manifests or executables change (and tell a stdio client)
    #[arg(long)]
    pub(super) watch: bool,
    /// Approve calls that need approval when the client cannot be asked (stdio only)
    #[arg(short = 'y', long, conflicts_with = "http")]
    pub(super) yes: bool,
    /// Serve MCP over Streamable HTTP at this address (e.g. 127.0.0.1:8731), endpoint /mcp
    #[arg(long, value_name = "ADDR")]
    pub(super) http: Option<SocketAddr>,
    /// Bearer tokens, one `TOKEN AGENT_ID` per line: each client's calls follow its agent's rules
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// Bearer tokens for GET /metrics, one per line: the only ones it takes (a client's token gets 403)
    #[arg(long, value_name = "FILE", requires = "http")]
    metrics_token_file: Option<PathBuf>,
    /// A host name requests may address besides IP literals (and localhost on loopback); repeatable
    #[arg(long, value_name = "NAME", requires = "http")]
    allow_host: Vec<String>,
    /// An Origin a browser's request may come from (none by default); repeatable
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// TLS certificate chain (PEM)
    #[arg(long, value_name = "PEM", requires_all = ["http", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM)
    #[arg(long, value_name = "PEM", requires_all = ["http", "tls_cert"])]
    tls_key: Option<PathBuf>,
    /// The largest request body taken, in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, requires = "http")]
    max_body: usize,
    /// Most tools/call requests one client may have running at once (more get 429)
    #[arg(long, value_name = "N", default_value_t = 16, requires = "http")]
    max_calls_per_client: usize,
    /// Most connections open at once; more wait to be accepted
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "http")]
    max_connections: usize,
    /// On SIGTERM or SIGINT, how long calls still running may take before they are ended
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration, requires = "http")]
    grace: Duration,
    /// OAuth 2.1 resource server: take JWT access tokens from this issuer (verified against its JWKS)
    #[arg(long, value_name = "URL", requires_all = ["http", "resource"])]
    oauth_issuer: Option<String>,
    /// This server's canonical URL (e.g. https://tools.example.com/mcp): the tokens' audience
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    resource: Option<String>,
    /// The audience tokens must name, when it is not --resource
    #[arg(long, value_name = "AUD", requires = "oauth_issuer")]
    oauth_audience: Option<String>,
    /// The issuer's JWKS URL, when it is not in the issuer's metadata
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_jwks_uri: Option<String>,
    /// Extra CA certificates (PEM) trusted when fetching from the issuer
    #[arg(long, value_name = "PEM", requires = "oauth_issuer")]
    oauth_ca: Option<PathBuf>,
    /// The agent whose rules clients with a JWT follow
    #[arg(long, value_name = "ID", requires = "oauth_issuer")]
    oauth_agent: Option<String>,
    /// A secret file replicas share (32+ bytes) sealing session ids (default: from --token-file)
    #[arg(long, value_name = "FILE", requires = "http")]
    session_key_file: Option<PathBuf>,
    /// The key file sealing the approval tickets 2026-07-28 clients get as requestState; replicas
    /// share it (created 0600 when missing; default: approval.key in packs' state directory,
    /// $PACKS_STATE_DIR or $XDG_STATE_HOME/packs or ~/.local/state/packs)
    #[arg(long, value_name = "FILE", env = "PACKS_APPROVAL_KEY")]
    approval_key: Option<PathBuf>,
    /// How long an approval ticket issued now stays valid, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = crate::call::DEFAULT_TICKET_TTL.as_secs())]
    approval_ttl: u64,
}

impl ServeArgs {
    /// The files of the server's own configuration (tokens, keys, certificates): packs'
    /// control plane, which no confined tool may write.
    pub(super) fn protected_files(&self) -> Vec<PathBuf> {
        [
            &self.token_file,
            &self.metrics_token_file,
            &self.tls_cert,
            &self.tls_key,
            &self.oauth_ca,
            &self.session_key_file,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
    }
}

impl ServeArgs {
    /// The approval key whose tickets answer 2026-07-28 approvals, opened (created when
    /// missing) before any tool runs, so that it is in the control plane from the start. A
    /// key given (`--approval-key`, `PACKS_APPROVAL_KEY`) that cannot be used stops the
    /// server; the default one only turns deferred approval off, with a warning (a server
    /// that never needs it must not fail to start for it).
    pub(super) fn tickets(&self) -> anyhow::Result<Option<crate::call::Tickets>> {
        let ttl = Duration::from_secs(self.approval_ttl);
        if let Some(key) = &self.approval_key {
            return Ok(Some(crate::call::Tickets::open(key)?.ttl(ttl)));
        }
        let opened = match crate::call::Tickets::default_key_file() {
            None => Err("no state directory (set PACKS_STATE_DIR or HOME)".to_owned()),
            Some(key) => crate::call::Tickets::open(&key).map_err(|e| e.to_string()),
        };
        match opened {
            Ok(tickets) => Ok(Some(tickets.ttl(ttl))),
            Err(e) => {
                eprintln!(
                    "packs serve: warning: {e}: a 2026-07-28 client's call that needs approval is denied (give \
                     --approval-key FILE)"
                );
                Ok(None)
            }
        }
    }
}

/// `packs serve --http ADDR`.
pub(super) fn http(args: &ServeArgs, addr: SocketAddr, serve: crate::mcp::Options) -> i32 {
    let mut options = crate::mcp::http::HttpOptions::new(serve, addr);
    options.token_file.clone_from(&args.token_file);
    options.metrics_token_file.clone_from(&args.metrics_token_file);
    options.allow_hosts.clone_from(&args.allow_host);
    options.allow_origins.clone_from(&args.allow_origin);
    options.tls = args.tls_cert.clone().zip(args.tls_key.clone());
    options.max_body = args.max_body;
    options.max_calls_per_client = args.max_calls_per_client;
    options.grace = args.grace;
    options.max_connections = args.max_connections;
    options.oauth = args.oauth_issuer.clone().zip(args.resource.clone()).map(|(issuer, resource)| {
        crate::mcp::oauth::OAuthOptions {
            issuer,
            resource,
            audience: args.oauth_audience.clone(),
            jwks_uri: args.oauth_jwks_uri.clone(),
            ca: args.oauth_ca.clone(),
        }
    });
    options.oauth_agent.clone_from(&args.oauth_agent);
    options.session_key.clone_from(&args.session_key_file);
    match crate::mcp::http::serve(options) {
        Ok(()) => exit::OK,
        Err(e) => {
            report(&anyhow::anyhow!("packs serve: {e}"));
            exit::USAGE
        }
    }
}
