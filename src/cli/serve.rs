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
    /// On SIGTERM or SIGINT, how long calls still running may take before they are ended
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration, requires = "http")]
    grace: Duration,
}

/// `packs serve --http ADDR`.
pub(super) fn http(args: &ServeArgs, addr: SocketAddr, serve: crate::mcp::Options) -> i32 {
    let mut options = crate::mcp::http::HttpOptions::new(serve, addr);
    options.token_file.clone_from(&args.token_file);
    options.allow_hosts.clone_from(&args.allow_host);
    options.allow_origins.clone_from(&args.allow_origin);
    options.tls = args.tls_cert.clone().zip(args.tls_key.clone());
    options.max_body = args.max_body;
    options.max_calls_per_client = args.max_calls_per_client;
    options.grace = args.grace;
    match crate::mcp::http::serve(options) {
        Ok(()) => exit::OK,
        Err(e) => {
            report(&anyhow::anyhow!("packs serve: {e}"));
            exit::USAGE
        }
    }
}
