//! Who is calling over HTTP: bearer tokens from a token file, each mapped to an agent
//! (whose allow/deny/ask/max_tier rules then decide every call), compared in constant time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::agent::Agent;
use crate::call::Context;

/// Tokens shorter than this are refused at start-up: they could be guessed.
const MIN_TOKEN: usize = 16;

/// A client the server knows: its name (in logs, metrics and sealed tokens) and the
/// context its calls run with.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    /// `AGENT_ID#DIGEST` for a token from the file: [`principal`], the same for a token
    /// wherever it stands in the file and on every replica, another for a rotated token.
    pub(crate) principal: String,
    /// The base context with the agent's rules.
    pub(crate) context: Arc<Context>,
}

/// The token file, read at start-up.
#[derive(Debug)]
pub(crate) struct Tokens {
    /// SHA-256 of each token (compared in constant time, all of them every time), and whose.
    entries: Vec<([u8; 32], Client)>,
    /// The file's bytes: replicas that share the file derive the same sealing key from it.
    pub(crate) secret: Vec<u8>,
}

/// A token file that cannot be used, with where.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenFileError {
    /// The file cannot be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is wrong.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file has no token.
    #[error("{}: no token in the file (one `{expected}` per line)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
        /// What a line holds.
        expected: &'static str,
    },
}

fn digest(token: &str) -> [u8; 32] {
    hmac_sha256::Hash::hash(token.as_bytes())
}

impl Tokens {
    /// Read `path`: one `TOKEN AGENT_ID` per line, `#` comments and blank lines ignored;
    /// each agent loaded from `agents` (under `base`'s workspace, log and sandbox).
    /// The agents the tokens act for.
    pub(crate) fn agents(&self) -> impl Iterator<Item = &crate::agent::Agent> {
        self.entries.iter().filter_map(|(_, client)| client.context.agent())
    }

    pub(crate) fn read(path: &Path, agents: &Path, base: &Context) -> Result<Self, TokenFileError> {
        let bytes = std::fs::read(path).map_err(|source| TokenFileError::Read { path: path.to_owned(), source })?;
        let line_error = |line: usize, message: String| TokenFileError::Line { path: path.to_owned(), line, message };
        let text = std::str::from_utf8(&bytes).map_err(|e| line_error(1, format!("not UTF-8: {e}")))?;
        let mut entries: Vec<([u8; 32], Client)> = Vec::new();
        let mut loaded: std::collections::HashMap<String, Arc<Context>> = std::collections::HashMap::new();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [token, agent] = fields[..] else {
                return Err(line_error(n, format!("expected `TOKEN AGENT_ID`, found {} field(s)", fields.len())));
            };
            well_formed(token).map_err(|message| line_error(n, message))?;
            let hash = digest(token);
            if entries.iter().any(|(h, _)| *h == hash) {
                return Err(line_error(n, "this token is already on an earlier line".into()));
            }
            let context = match loaded.get(agent) {
                Some(c) => Arc::clone(c),
                None => {
                    let loaded_agent = Agent::load(agents, agent).map_err(|e| line_error(n, e.to_string()))?;
                    let c = Arc::new(base.clone().with_agent(loaded_agent));
                    loaded.insert(agent.to_owned(), Arc::clone(&c));
                    c
                }
            };
            let client = Client { principal: principal(agent, &hash), context };
            entries.push((hash, client));
        }
        if entries.is_empty() {
            return Err(TokenFileError::Empty { path: path.to_owned(), expected: "TOKEN AGENT_ID" });
        }
        Ok(Tokens { entries, secret: bytes })
    }

    /// The client `token` belongs to. Every entry is compared, each in constant time, so
    /// the time taken says nothing about which one matched or how much of it did.
    pub(crate) fn check(&self, token: &str) -> Option<&Client> {
        let presented = digest(token);
        let mut found = None;
        for (hash, client) in &self.entries {
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(client);
            }
        }
        found
    }
}

/// The principal of the token whose SHA-256 is `hash`, acting for `agent`: the agent and the
/// first 16 hex digits of the digest (two tokens of one agent stay apart; the token itself is
/// never in it). Approval tickets are bound to it, so it must not depend on the token's line:
/// replicas whose files list the tokens in another order honour each other's tickets, and a
/// client given a rotated token on the same line does not inherit the old client's.
fn principal(agent: &str, hash: &[u8; 32]) -> String {
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{agent}#{hex}")
}

/// Why `token` cannot be used, if it cannot: too short to be safe from guessing, or not
/// something an HTTP header carries.
fn well_formed(token: &str) -> Result<(), String> {
    if token.len() < MIN_TOKEN {
        return Err(format!(
            "the token is {} characters: at least {MIN_TOKEN} are needed (e.g. `openssl rand -hex 32`)",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token is visible ASCII only (it travels in an HTTP header)".into());
    }
    Ok(())
}

/// The metrics token file (`--metrics-token-file`): the only credentials `/metrics` takes
/// when the server authenticates its clients. The metrics count every agent's calls by tool,
/// so a client's token, which sees only its own agent's tools, is not one of them; and a
/// metrics token is not a client's (`/mcp` refuses it).
#[derive(Debug)]
pub(crate) struct MetricsTokens {
    /// SHA-256 of each token, compared in constant time, all of them every time.
    hashes: Vec<[u8; 32]>,
}

impl MetricsTokens {
    /// Read `path`: one token per line, `#` comments and blank lines ignored. A token that
    /// `clients` also holds is refused: one credential, one role.
    pub(crate) fn read(path: &Path, clients: Option<&Tokens>) -> Result<Self, TokenFileError> {
        let bytes = std::fs::read(path).map_err(|source| TokenFileError::Read { path: path.to_owned(), source })?;
        let line_error = |line: usize, message: String| TokenFileError::Line { path: path.to_owned(), line, message };
        let text = std::str::from_utf8(&bytes).map_err(|e| line_error(1, format!("not UTF-8: {e}")))?;
        let mut hashes: Vec<[u8; 32]> = Vec::new();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [token] = fields[..] else {
                return Err(line_error(n, format!("expected one `TOKEN`, found {} fields", fields.len())));
            };
            well_formed(token).map_err(|message| line_error(n, message))?;
            let hash = digest(token);
            if hashes.contains(&hash) {
                return Err(line_error(n, "this token is already on an earlier line".into()));
            }
            if clients.is_some_and(|c| c.entries.iter().any(|(h, _)| *h == hash)) {
                return Err(line_error(
                    n,
                    "this token is also a client's (in --token-file): give metrics a token of their own".into(),
                ));
            }
            hashes.push(hash);
        }
        if hashes.is_empty() {
            return Err(TokenFileError::Empty { path: path.to_owned(), expected: "TOKEN" });
        }
        Ok(MetricsTokens { hashes })
    }

    /// Whether `token` is one of them (every entry compared, each in constant time).
    pub(crate) fn check(&self, token: &str) -> bool {
        let presented = digest(token);
        let mut found = false;
        for hash in &self.hashes {
            found |= bool::from(hash.ct_eq(&presented));
        }
        found
    }
}

/// The bearer token of an `Authorization` header value.
pub(crate) fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_token_file_maps_tokens_to_agents_and_says_where_it_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(agents.join("ops")).unwrap();
        std::fs::write(agents.join("ops/agent.toml"), "").unwrap();
        let ok = write(dir.path(), "ok", "# clients\n\n0123456789abcdef0123 ops\nfedcba9876543210fedc ops\n");
        let tokens = Tokens::read(&ok, &agents, &Context::new()).unwrap();
        let (first, second) = ("0123456789abcdef0123", "fedcba9876543210fedc");
        let principal_of = |tokens: &Tokens, token: &str| tokens.check(token).unwrap().principal.clone();
        let p1 = principal_of(&tokens, first);
        // The agent and 16 hex digits of the token's SHA-256, never the token.
        let sha = crate::digest::sha256(first.as_bytes());
        assert_eq!(p1, format!("ops#{}", &sha["sha256:".len()..][..16]));
        assert!(!p1.contains(first));
        assert_ne!(principal_of(&tokens, second), p1, "two tokens of one agent stay apart");
        // The same in a file that lists them in another order; another for a rotated token.
        let reordered = write(dir.path(), "reordered", &format!("{second} ops\n{first} ops\n"));
        let reordered = Tokens::read(&reordered, &agents, &Context::new()).unwrap();
        assert_eq!(principal_of(&reordered, first), p1);
        let rotated = write(dir.path(), "rotated", "# clients\n\n0123456789abcdef0124 ops\n");
        let rotated = Tokens::read(&rotated, &agents, &Context::new()).unwrap();
        assert_ne!(principal_of(&rotated, "0123456789abcdef0124"), p1);
        assert!(tokens.check("0123456789abcdef012").is_none());
        assert!(tokens.check("").is_none());
        let err = |text: &str| {
            Tokens::read(&write(dir.path(), "bad", text), &agents, &Context::new()).unwrap_err().to_string()
        };
        assert!(err("short ops\n").contains("bad:1: the token is 5 characters"), "{}", err("short ops\n"));
        assert!(err("\n0123456789abcdef0123\n").contains("bad:2: expected `TOKEN AGENT_ID`, found 1"));
        assert!(err("0123456789abcdef0123 nobody\n").contains("bad:1:"));
        assert!(err("0123456789abcdef0123 ops\n0123456789abcdef0123 ops\n").contains("bad:2: this token is already"));
        assert!(err("# nothing\n").contains("no token in the file"));
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn a_token_is_sixteen_visible_ascii_characters_or_more() {
        assert_eq!(well_formed("0123456789abcdef"), Ok(()));
        let short = well_formed("0123456789abcde").unwrap_err();
        assert!(short.starts_with("the token is 15 characters: at least 16 are needed"), "{short}");
        let visible = Err("a token is visible ASCII only (it travels in an HTTP header)".to_owned());
        assert_eq!(well_formed("0123456789abcdef\u{e9}"), visible);
        assert_eq!(well_formed("0123456789abcdef\u{7f}"), visible);
    }

    #[test]
    fn the_metrics_token_file_holds_tokens_of_their_own_and_says_where_it_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(agents.join("ops")).unwrap();
        std::fs::write(agents.join("ops/agent.toml"), "").unwrap();
        let clients = write(dir.path(), "clients", "client-token-0123456789 ops\n");
        let clients = Tokens::read(&clients, &agents, &Context::new()).unwrap();
        assert_eq!(clients.agents().map(|a| a.id.as_str()).collect::<Vec<_>>(), ["ops"]);
        let file = write(dir.path(), "metrics", "# scrapers\n\nmetrics-token-0123456789\nmetrics-token-9876543210\n");
        let metrics = MetricsTokens::read(&file, Some(&clients)).unwrap();
        assert!(metrics.check("metrics-token-0123456789"));
        assert!(metrics.check("metrics-token-9876543210"));
        assert!(!metrics.check("metrics-token-012345678"));
        assert!(!metrics.check("client-token-0123456789"), "a client's token is not a metrics token");
        let err =
            |text: &str| MetricsTokens::read(&write(dir.path(), "bad", text), Some(&clients)).unwrap_err().to_string();
        let shared = err("\nclient-token-0123456789\n");
        assert!(shared.contains("bad:2: this token is also a client's (in --token-file)"), "{shared}");
        let twice = err("metrics-token-0123456789\nmetrics-token-0123456789\n");
        assert!(twice.contains("bad:2: this token is already on an earlier line"), "{twice}");
        assert!(err("a b\n").contains("bad:1: expected one `TOKEN`, found 2 fields"), "{}", err("a b\n"));
        assert!(err("short\n").contains("bad:1: the token is 5 characters"));
        assert!(err("# none\n").contains("no token in the file (one `TOKEN` per line)"));
        // Without a client file, any well-formed token may be a metrics token.
        let alone = MetricsTokens::read(&write(dir.path(), "alone", "client-token-0123456789\n"), None).unwrap();
        assert!(alone.check("client-token-0123456789"));
    }
}
