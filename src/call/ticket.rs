//! Deferred approval: a call that needs a person's approval ends as [`Pending`], holding a
//! ticket, instead of waiting for an answer; the front-end asks the person when it can and
//! resumes the call with the ticket and the answer ([`Answers`]).
//!
//! A ticket is sealed (HMAC-SHA-256, `crate::seal`) with a key read from a key file, so it
//! survives a restart and opens in every replica that holds the file. It binds the tool, the
//! digest of the validated arguments as canonical JSON, the digest of what would run as the
//! person is shown it (argv, working directory, variables, stdin, secrets masked), the agent
//! and an expiry, and the front-end that issued it ([`Issuer`]: a ticket of `packs call` does
//! not answer `packs serve`, nor the reverse). It is used once: spending it creates a file named by its nonce, with
//! `O_EXCL`, in the directory beside the key (`KEY.used/`), so a second process presenting it
//! is refused too; entries are named by their expiry and pruned once it passed.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::call::ApprovalRequest;
use crate::seal::Seal;

/// How long a ticket is valid unless the front-end says otherwise.
pub const DEFAULT_TICKET_TTL: Duration = Duration::from_secs(3600);

/// The key file's name in packs' state directory.
const KEY_FILE: &str = "approval.key";

/// What the key is derived with: a ticket never opens as another kind of sealed token.
const LABEL: &[u8] = b"packs approval tickets v1";

/// A key shorter than this is refused.
const MIN_KEY_BYTES: usize = 32;

/// A key file larger than this is refused (a key is a line).
const MAX_KEY_BYTES: u64 = 4096;

/// The key that seals approval tickets, and the record of the tickets already used.
#[derive(Debug, Clone)]
pub struct Tickets {
    seal: Seal,
    key: PathBuf,
    used: PathBuf,
    ttl: Duration,
    issuer: Issuer,
}

/// The front-end that issues tickets and the only one they answer: the same key file may
/// serve both, and a ticket a model got from one must not approve a call made through the
/// other (another client, another principal, another person asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Issuer {
    /// `packs call --defer-approval`, and the library's `Call::run_deferred` (the default).
    Call,
    /// `packs serve`'s stateless (2026-07-28) approvals.
    Serve,
}

impl Issuer {
    /// The claim sealed in the ticket (`"i"`).
    fn claim(self) -> &'static str {
        match self {
            Issuer::Call => "call",
            Issuer::Serve => "serve",
        }
    }
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// It could not be read, created, or its used-ticket directory made.
    #[error("approval key {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// It is not a regular file (a symbolic link, a directory, a device...).
    #[error("approval key {}: not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// Its group or others may read or write it.
    #[error("approval key {}: its mode {mode:04o} lets its group or others at it (chmod 600 it)", path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Another user owns it.
    #[error("approval key {}: owned by uid {owner}, not by this user", path.display())]
    NotOwned {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// It holds fewer than 32 bytes, or more than 4096.
    #[error("approval key {}: a key is 32 to 4096 bytes (it holds {bytes})", path.display())]
    BadSize {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
}

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TicketError {
    /// It does not open with this key: altered, cut, or issued with another key.
    #[error("the ticket is not one this approval key issued (altered, or issued with another key)")]
    Forged,
    /// It was issued for another tool.
    #[error("the ticket was issued for `{issued_for}`, not `{tool}`")]
    OtherTool {
        /// The tool it was issued for.
        issued_for: String,
        /// The tool called.
        tool: String,
    },
    /// It was issued for another agent (or for none).
    #[error("the ticket was issued for {}; the call is made for {}", agent_words(issued_for.as_deref()), agent_words(agent.as_deref()))]
    OtherAgent {
        /// The agent it was issued for.
        issued_for: Option<String>,
        /// The agent of the call.
        agent: Option<String>,
    },
    /// It was issued by another front-end (`packs call` and `packs serve` share a key file
    /// but not their tickets), or by a packs that put no issuer in it.
    #[error("the ticket was issued by {}, not by {presented_to} (a ticket answers only the front-end that issued it)", issuer_words(issued_by.as_deref()))]
    OtherIssuer {
        /// The front-end that issued it (`call`, `serve`), if it says.
        issued_by: Option<String>,
        /// The front-end it was presented to.
        presented_to: String,
    },
    /// It was issued to another client of a server (an MCP bearer token or JWT subject),
    /// or to none. The other client is not named: its identity is not this caller's to see.
    #[error("the ticket was issued to another client of this server")]
    OtherPrincipal,
    /// The call's validated arguments differ from those it was issued for.
    #[error("the call's arguments differ from those the ticket was issued for")]
    ChangedArguments,
    /// What would run differs from what the person was shown (the tool changed).
    #[error("what would run differs from what the ticket was issued for (the tool or its context changed)")]
    ChangedCommand,
    /// Its time passed.
    #[error("the ticket expired at {at}")]
    Expired {
        /// When (RFC 3339, UTC).
        at: String,
    },
    /// It was used before: each ticket approves one run.
    #[error("the ticket was already used (each ticket answers one call once)")]
    Used,
    /// The used-ticket record could not be written, so the ticket is not honoured.
    #[error("the used-ticket record {}: {message}", path.display())]
    Record {
        /// The directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// No call of the response was the one it was issued for (`packs call`).
    #[error("no call of `{tool}` in the response is the one it was issued for{}", .reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    NoCall {
        /// The tool it was issued for.
        tool: String,
        /// Why the call of that tool closest to it did not match.
        reason: Option<Box<TicketError>>,
    },
}

fn issuer_words(issuer: Option<&str>) -> String {
    issuer.map_or_else(|| "an earlier packs, which named no front-end".to_owned(), |i| format!("`packs {i}`"))
}

fn agent_words(agent: Option<&str>) -> String {
    agent.map_or_else(|| "no agent".to_owned(), |a| format!("agent `{a}`"))
}

/// A call that waits for a person's answer: it has not run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pending {
    /// The tool.
    pub tool: String,
    /// The ticket to resume the call with ([`Answers`]).
    pub ticket: String,
    /// What to show the person: the tool, why it needs approval and exactly what would run
    /// (secrets masked, control characters escaped), as the terminal prompt shows it.
    pub prompt: String,
    /// One short sentence to say aloud (a voice assistant asks when it can speak).
    pub speak: String,
    /// When the ticket expires.
    pub expires: SystemTime,
    /// What an approver would have been asked.
    pub request: ApprovalRequest,
}

impl Pending {
    /// The pending result as JSON, for the model and the front-end:
    /// `{"pending": {"tool", "ticket", "prompt", "speak", "expires"}, "message"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "pending": {
                "tool": self.tool,
                "ticket": self.ticket,
                "prompt": self.prompt,
                "speak": self.speak,
                "expires": humantime::format_rfc3339_seconds(self.expires).to_string(),
            },
            "message": format!(
                "`{}` has not run: it waits for a person's approval. Go on with other work; do not call it again \
                 for this, the answer comes later.",
                self.tool
            ),
        })
    }
}

/// How a call went through the pipeline when approval may be deferred.
#[derive(Debug)]
#[non_exhaustive]
pub enum Deferred {
    /// It ran (or was allowed, approved by a ticket, and ran).
    Ran(crate::call::ToolResult),
    /// It needs a person's approval: nothing ran.
    Pending(Pending),
}

/// What a ticket holds, opened.
#[derive(Debug, Clone)]
struct Claims {
    tool: String,
    agent: Option<String>,
    /// The server client it was issued to (absent: none, as `packs call` issues them).
    principal: Option<String>,
    /// The front-end that issued it (absent in tickets of an earlier packs).
    issuer: Option<String>,
    arguments: String,
    command: String,
    /// Milliseconds since the epoch.
    expires: u64,
    nonce: String,
}

impl Claims {
    fn from(v: &Value) -> Option<Self> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        if v["k"] != "ticket" {
            return None;
        }
        let nonce = s("n")?;
        // Names a file in the used-ticket directory: hex only (it is ours, sealed, but checked).
        if nonce.is_empty() || nonce.len() > 64 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Claims {
            tool: s("t")?,
            agent: match v.get("g")? {
                Value::Null => None,
                Value::String(a) => Some(a.clone()),
                _ => return None,
            },
            principal: match v.get("p") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => Some(p.clone()),
                Some(_) => return None,
            },
            issuer: match v.get("i") {
                None => None,
                Some(Value::String(i)) => Some(i.clone()),
                Some(_) => return None,
            },
            arguments: s("a")?,
            command: s("c")?,
            expires: v.get("x")?.as_u64()?,
            nonce,
        })
    }

    /// Why this call is not the one the ticket was issued for (first difference), if it is not.
    fn mismatch(&self, call: &Presented<'_>) -> Option<TicketError> {
        if self.tool != call.tool {
            Some(TicketError::OtherTool { issued_for: self.tool.clone(), tool: call.tool.to_owned() })
        } else if self.agent.as_deref() != call.agent {
            Some(TicketError::OtherAgent { issued_for: self.agent.clone(), agent: call.agent.map(str::to_owned) })
        } else if self.principal.as_deref() != call.principal {
            Some(TicketError::OtherPrincipal)
        } else if self.arguments != call.arguments {
            Some(TicketError::ChangedArguments)
        } else if self.command != call.command {
            Some(TicketError::ChangedCommand)
        } else {
            None
        }
    }
}

/// A call as a ticket is checked against.
pub(crate) struct Presented<'a> {
    pub(crate) tool: &'a str,
    pub(crate) agent: Option<&'a str>,
    /// The server client making the call (an MCP bearer token's or JWT's), if any.
    pub(crate) principal: Option<&'a str>,
    /// Digest of the validated arguments' canonical JSON.
    pub(crate) arguments: String,
    /// Digest of what the person is shown.
    pub(crate) command: String,
}

impl<'a> Presented<'a> {
    pub(crate) fn new(
        tool: &'a str,
        agent: Option<&'a str>,
        arguments: &Map<String, Value>,
        request: &ApprovalRequest,
    ) -> Self {
        let digest = |v: &Value| crate::digest::sha256(crate::digest::canonical(v).as_bytes());
        let command = json!({
            "argv": request.argv,
            "cwd": request.cwd.as_ref().map(|c| c.to_string_lossy()),
            "env": request.env,
            "stdin": request.stdin.as_ref().map(|s| json!([s.bytes, s.text, s.cut])),
        });
        Presented {
            tool,
            agent,
            principal: None,
            arguments: digest(&Value::Object(arguments.clone())),
            command: digest(&command),
        }
    }

    /// The call is made by `principal`, a client of a server (none when empty).
    pub(crate) fn by(mut self, principal: Option<&'a str>) -> Self {
        self.principal = principal.filter(|p| !p.is_empty());
        self
    }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

impl Tickets {
    /// Where the key file is by default: `approval.key` in packs' state directory
    /// (`$PACKS_STATE_DIR`, else `$XDG_STATE_HOME/packs`, else `~/.local/state/packs`; each
    /// only when absolute; `~` is `$HOME`, else the user's home in /etc/passwd).
    pub fn default_key_file() -> Option<PathBuf> {
        let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        let dir = match std::env::var_os("PACKS_STATE_DIR") {
            Some(dir) => absolute(dir)?,
            None => std::env::var_os("XDG_STATE_HOME")
                .and_then(absolute)
                // `$HOME`, else the user's entry in /etc/passwd (a server started without
                // HOME, by a service manager or a client that clears the environment).
                .or_else(|| crate::reads::home().map(|h| h.join(".local/state")))?
                .join("packs"),
        };
        Some(dir.join(KEY_FILE))
    }

    /// The default key file and its used-ticket directory ([`Tickets::default_key_file`]),
    /// whether or not they exist yet: packs' own secrets, which no confined tool reads.
    pub(crate) fn default_files() -> Vec<PathBuf> {
        Self::default_key_file().map(|key| vec![used_dir(&key), key]).unwrap_or_default()
    }

    /// Open the key file `key` (created with 32 random bytes, mode 0600, in a directory made
    /// 0700, when missing) and its used-ticket directory beside it (`KEY.used`). A key file
    /// that is not a regular file, that its group or others may read or write, that another
    /// user owns or that holds fewer than 32 bytes is refused. Tickets last
    /// [`DEFAULT_TICKET_TTL`] unless [`Tickets::ttl`] says otherwise.
    pub fn open(key: &Path) -> Result<Self, KeyFileError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| KeyFileError::Io { path, source }
        };
        let file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(key) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(key).map_err(io(key))?,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(KeyFileError::NotRegular { path: key.to_owned() });
            }
            Err(e) => return Err(io(key)(e)),
        };
        let secret = read_key(key, file)?;
        let used = used_dir(key);
        match std::fs::create_dir(&used) {
            Ok(()) => std::fs::set_permissions(&used, std::fs::Permissions::from_mode(0o700)).map_err(io(&used))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(&used)(e)),
        }
        let meta = std::fs::symlink_metadata(&used).map_err(io(&used))?;
        if !meta.is_dir() {
            return Err(io(&used)(std::io::Error::other("the used-ticket record must be a directory")));
        }
        Ok(Tickets {
            seal: Seal::derived_for(LABEL, &secret),
            key: key.to_owned(),
            used,
            ttl: DEFAULT_TICKET_TTL,
            issuer: Issuer::Call,
        })
    }

    /// Tickets issued from now on name `issuer`, and only tickets that name it are honoured.
    #[must_use]
    pub(crate) fn issued_by(mut self, issuer: Issuer) -> Self {
        self.issuer = issuer;
        self
    }

    /// Tickets issued from now on expire `ttl` after they are issued.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The key file and the used-ticket directory: packs' own configuration, which no
    /// confined tool may write (`Context::with_control_plane`) and whose key none may read
    /// (`Context::with_denied_reads`).
    pub fn files(&self) -> Vec<PathBuf> {
        vec![self.key.clone(), self.used.clone()]
    }

    /// A ticket for `request`, made by `presented`.
    pub(crate) fn issue(&self, presented: &Presented<'_>, request: ApprovalRequest, description: &str) -> Pending {
        let expires = SystemTime::now() + self.ttl;
        let nonce = format!("{:016x}{:016x}", self.seal.nonce(), self.seal.nonce());
        let ticket = self.seal.seal(&json!({
            "k": "ticket",
            "t": presented.tool,
            "g": presented.agent,
            "p": presented.principal,
            "i": self.issuer.claim(),
            "a": presented.arguments,
            "c": presented.command,
            "x": millis(expires),
            "n": nonce,
        }));
        Pending {
            tool: request.tool.clone(),
            ticket,
            prompt: request.prompt(),
            speak: speak(&request.tool, description),
            expires,
            request,
        }
    }

    /// The claims of `token`, when this key sealed it and this front-end issued it.
    fn open_ticket(&self, token: &str) -> Result<Claims, TicketError> {
        let claims = self.seal.open(token.trim()).as_ref().and_then(Claims::from).ok_or(TicketError::Forged)?;
        if claims.issuer.as_deref() != Some(self.issuer.claim()) {
            return Err(TicketError::OtherIssuer {
                issued_by: claims.issuer,
                presented_to: format!("`packs {}`", self.issuer.claim()),
            });
        }
        Ok(claims)
    }

    /// Spend a ticket whose claims matched: refused when expired or used before.
    fn spend(&self, claims: &Claims) -> Result<(), TicketError> {
        let now = millis(SystemTime::now());
        if claims.expires <= now {
            return Err(TicketError::Expired { at: rfc3339(claims.expires) });
        }
        let record = |e: std::io::Error| TicketError::Record { path: self.used.clone(), message: e.to_string() };
        self.prune(now);
        let entry = self.used.join(format!("{}-{}", claims.expires, claims.nonce));
        match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&entry) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(TicketError::Used),
            Err(e) => Err(record(e)),
        }
    }

    /// Remove the used-ticket entries whose tickets expired: they are refused as expired.
    fn prune(&self, now: u64) {
        let Ok(entries) = std::fs::read_dir(&self.used) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let expired = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(x, _)| x.parse::<u64>().ok())
                .is_some_and(|x| x <= now);
            if expired {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

fn used_dir(key: &Path) -> PathBuf {
    let mut name = key.file_name().unwrap_or_default().to_owned();
    name.push(".used");
    key.with_file_name(name)
}

/// Create the key file with 32 random bytes (hex), never over one another process made
/// meanwhile (written aside, then linked into place).
fn create_key(key: &Path) -> std::io::Result<File> {
    if let Some(dir) = key.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let seal = Seal::random();
    let hex: String = (0..4).map(|_| format!("{:016x}", seal.nonce())).collect();
    let aside = key.with_file_name(format!(".approval-key-{}-{:x}", std::process::id(), seal.nonce()));
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&aside)?;
    let written = file.write_all(format!("{hex}\n").as_bytes()).and_then(|()| file.sync_all());
    let linked = written.and_then(|()| std::fs::hard_link(&aside, key));
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(key)
}

fn read_key(key: &Path, file: File) -> Result<Vec<u8>, KeyFileError> {
    let path = || key.to_owned();
    let meta = file.metadata().map_err(|source| KeyFileError::Io { path: path(), source })?;
    if !meta.is_file() {
        return Err(KeyFileError::NotRegular { path: path() });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Exposed { path: path(), mode });
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(KeyFileError::NotOwned { path: path(), owner: meta.uid() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_KEY_BYTES + 1).read_to_end(&mut bytes).map_err(|source| KeyFileError::Io { path: path(), source })?;
    let secret = bytes.trim_ascii();
    if secret.len() < MIN_KEY_BYTES || bytes.len() as u64 > MAX_KEY_BYTES {
        return Err(KeyFileError::BadSize { path: path(), bytes: bytes.len() as u64 });
    }
    Ok(secret.to_vec())
}

/// One sentence to say aloud: the tool's name as words and the first sentence of its
/// description, at most about 160 characters.
fn speak(tool: &str, description: &str) -> String {
    let words = tool.replace(['_', '-', '.'], " ");
    let first = description.split_inclusive(['.', '\n']).next().unwrap_or_default().trim();
    let first = crate::visible::prose(first.trim_end_matches('.'));
    let mut line =
        if first.is_empty() { format!("May I run {words}?") } else { format!("May I run {words}? It will: {first}.") };
    if line.chars().count() > 160 {
        line = line.chars().take(157).collect::<String>() + "...";
    }
    line
}

impl ApprovalRequest {
    /// What a person is asked, as text: the tool, its tier, why approval is needed, and
    /// exactly what would run (the argv, working directory, variables and stdin, secrets
    /// masked, control characters escaped), as `packs run` asks on a terminal.
    pub fn prompt(&self) -> String {
        let mut text = format!("`{}` (tier {}) needs approval: {}\n", self.tool, self.tier, self.reason);
        text.push_str(&format!("  {}\n", self.command_line()));
        if let Some(cwd) = &self.cwd {
            text.push_str(&format!("  in {}\n", crate::visible::os_word(cwd.as_os_str())));
        }
        for (k, v) in &self.env {
            text.push_str(&format!("  env: {}={}\n", crate::visible::prose(k), crate::visible::word(v)));
        }
        if let Some(stdin) = &self.stdin {
            text.push_str(&format!("  stdin: {}\n", stdin.summary()));
        }
        text
    }
}

/// The person's answers to pending calls: tickets, each approving or denying the one call it
/// was issued for. Give them to [`crate::Call::answers`]: a call that needs approval and is
/// the very call a ticket was issued for (tool, validated arguments, what would run, agent)
/// takes that ticket's answer, once; any other call goes on as usual. [`Answers::refused`]
/// says which tickets no call took, and why.
#[derive(Debug)]
pub struct Answers<'t> {
    tickets: &'t Tickets,
    given: Vec<Given>,
    /// One ticket for one call ([`Answers::only`]): any call that needs approval takes it,
    /// and is refused when it is not the call it was issued for.
    strict: bool,
}

#[derive(Debug)]
struct Given {
    approve: bool,
    claims: Result<Claims, TicketError>,
    taken: AtomicBool,
    /// It was taken, and was neither expired nor used before.
    honoured: AtomicBool,
    /// Why the closest call of its tool was not its call.
    miss: Mutex<Option<TicketError>>,
}

impl<'t> Answers<'t> {
    /// No answers yet.
    pub fn new(tickets: &'t Tickets) -> Self {
        Answers { tickets, given: Vec::new(), strict: false }
    }

    /// One answer for one call: the call given these answers must be the one `ticket` was
    /// issued for, or it is refused ([`crate::Denial::Ticket`]).
    pub fn only(tickets: &'t Tickets, ticket: &str, approve: bool) -> Self {
        let mut answers = Self::new(tickets).answer(ticket, approve);
        answers.strict = true;
        answers
    }

    /// The person approves the call `ticket` was issued for.
    #[must_use]
    pub fn approve(self, ticket: &str) -> Self {
        self.answer(ticket, true)
    }

    /// The person denies the call `ticket` was issued for.
    #[must_use]
    pub fn deny(self, ticket: &str) -> Self {
        self.answer(ticket, false)
    }

    fn answer(mut self, ticket: &str, approve: bool) -> Self {
        let claims = self.tickets.open_ticket(ticket);
        self.given.push(Given {
            approve,
            claims,
            taken: AtomicBool::new(false),
            honoured: AtomicBool::new(false),
            miss: Mutex::new(None),
        });
        self
    }

    /// The answer for `call`, when a ticket was issued for it: `Ok(approve)`, or why the
    /// ticket is refused (expired, used, or, with [`Answers::only`], not its call). None:
    /// no ticket answers it.
    pub(crate) fn take(&self, call: &Presented<'_>) -> Option<Result<bool, TicketError>> {
        for given in &self.given {
            let Ok(claims) = &given.claims else { continue };
            match claims.mismatch(call) {
                None if !given.taken.swap(true, Ordering::SeqCst) => {
                    let spent = self.tickets.spend(claims);
                    given.honoured.store(spent.is_ok(), Ordering::SeqCst);
                    return Some(spent.map(|()| given.approve));
                }
                None => {}
                Some(TicketError::OtherTool { .. }) => {}
                Some(miss) => {
                    let mut slot = given.miss.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    slot.get_or_insert(miss);
                }
            }
        }
        if self.strict {
            let given = self.given.first()?;
            if !given.taken.swap(true, Ordering::SeqCst) {
                return Some(Err(match &given.claims {
                    Ok(claims) => claims.mismatch(call).unwrap_or(TicketError::Used),
                    Err(e) => e.clone(),
                }));
            }
        }
        None
    }

    /// Whether every ticket answered its call (none forged, expired, used before, or left
    /// without its call).
    pub fn all_honoured(&self) -> bool {
        self.given.iter().all(|g| g.honoured.load(Ordering::SeqCst))
    }

    /// The tickets no call took, each with the tool it names (when it opened) and why.
    pub fn refused(&self) -> Vec<(Option<String>, TicketError)> {
        self.given
            .iter()
            .filter(|g| !g.taken.load(Ordering::SeqCst))
            .map(|g| match &g.claims {
                Err(e) => (None, e.clone()),
                Ok(claims) => {
                    let miss = g.miss.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                    (
                        Some(claims.tool.clone()),
                        TicketError::NoCall { tool: claims.tool.clone(), reason: miss.map(Box::new) },
                    )
                }
            })
            .collect()
    }

    /// Record each ticket no call took in `context`'s audit log (decision `denied`, outcome
    /// `ticket_refused`), and return them, as [`Answers::refused`].
    pub fn audit_refused(&self, context: &crate::call::Context) -> Vec<(Option<String>, TicketError)> {
        let refused = self.refused();
        if let Some(log) = context.audit() {
            for (tool, error) in &refused {
                let _ = log.record(&crate::audit::Entry {
                    time: crate::audit::now(),
                    agent: context.agent().map(|a| a.id.as_str()),
                    tool: tool.as_deref().unwrap_or(""),
                    tier: "unknown",
                    decision: "denied",
                    argv: Vec::new(),
                    stdin_bytes: None,
                    sandbox: None,
                    reads: None,
                    exit_code: None,
                    duration_ms: None,
                    outcome: "ticket_refused",
                    error: Some(format!("approval ticket refused: {error}")),
                });
            }
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::ApprovalReason;
    use crate::policy::Tier;

    fn request(argv: &[&str]) -> ApprovalRequest {
        ApprovalRequest {
            tool: "deploy".into(),
            reason: ApprovalReason::Elevated,
            tier: Tier::Elevated,
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            cwd: None,
            env: Vec::new(),
            stdin: None,
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_key_file_is_created_private_and_refused_when_exposed() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("state/approval.key");
        let tickets = Tickets::open(&key).unwrap();
        let meta = std::fs::metadata(&key).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(dir.path().join("state/approval.key.used").is_dir());
        assert_eq!(tickets.files(), vec![key.clone(), dir.path().join("state/approval.key.used")]);
        // The same file gives the same key: a ticket survives a restart.
        let presented = Presented::new("deploy", None, &args(json!({"b": 1})), &request(&["deploy"]));
        let pending = tickets.issue(&presented, request(&["deploy"]), "Deploy a branch.");
        let again = Tickets::open(&key).unwrap();
        assert!(again.open_ticket(&pending.ticket).is_ok());

        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(Tickets::open(&key), Err(KeyFileError::Exposed { mode: 0o640, .. })));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        assert!(matches!(Tickets::open(&link), Err(KeyFileError::NotRegular { .. })));
        assert!(matches!(Tickets::open(dir.path()), Err(KeyFileError::NotRegular { .. } | KeyFileError::Io { .. })));
        let short = dir.path().join("short.key");
        std::fs::write(&short, "abc\n").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(Tickets::open(&short), Err(KeyFileError::BadSize { bytes: 4, .. })));
    }

    #[test]
    fn a_ticket_answers_its_own_call_once_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let req = request(&["deploy", "main"]);
        let call = Presented::new("deploy", Some("ops"), &args(json!({"branch": "main"})), &req);
        let pending = tickets.issue(&call, req.clone(), "Deploy a branch.\nMore.");
        assert_eq!(pending.speak, "May I run deploy? It will: Deploy a branch.");
        assert!(pending.prompt.starts_with("`deploy` (tier elevated) needs approval: its tier is elevated\n"));
        assert!(pending.prompt.contains("  deploy main\n"));

        // Another tool, agent, argument or command: not its call.
        let other_tool = Presented { tool: "rollback", ..Presented::new("x", Some("ops"), &Map::new(), &req) };
        let other_agent = Presented::new("deploy", None, &args(json!({"branch": "main"})), &req);
        let other_args = Presented::new("deploy", Some("ops"), &args(json!({"branch": "dev"})), &req);
        let other_command = Presented::new("deploy", Some("ops"), &args(json!({"branch": "main"})), &request(&["x"]));
        let answers = Answers::new(&tickets).approve(&pending.ticket);
        for other in [&other_tool, &other_agent, &other_args, &other_command] {
            assert_eq!(answers.take(other), None);
        }
        let refused = answers.refused();
        assert_eq!(refused.len(), 1);
        assert_eq!(
            refused[0].1.to_string(),
            "no call of `deploy` in the response is the one it was issued for: the ticket was issued for agent `ops`; \
             the call is made for no agent"
        );
        // Issued to no server client: a call made by one is not its call either.
        let strict = Answers::only(&tickets, &pending.ticket, true);
        let by_client = Presented::new("deploy", Some("ops"), &args(json!({"branch": "main"})), &req).by(Some("ops#1"));
        assert_eq!(strict.take(&by_client), Some(Err(TicketError::OtherPrincipal)));
        assert_eq!(answers.take(&call), Some(Ok(true)));
        assert!(answers.refused().is_empty());
        // Spent: a second answer set (another process) presenting it again is refused.
        let replay = Answers::new(&tickets).approve(&pending.ticket);
        assert_eq!(replay.take(&call), Some(Err(TicketError::Used)));
        // Strict: one ticket for one call, refused with the reason.
        let strict = Answers::only(&tickets, &pending.ticket, true);
        assert_eq!(strict.take(&other_args), Some(Err(TicketError::ChangedArguments)));
        let strict = Answers::only(&tickets, &pending.ticket, true);
        assert!(matches!(strict.take(&other_tool), Some(Err(TicketError::OtherTool { .. }))));
    }

    #[test]
    fn a_tampered_or_foreign_ticket_is_forged_and_an_expired_one_expired() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let pending = tickets.issue(&call, req.clone(), "");
        assert_eq!(pending.speak, "May I run deploy?");
        let (body, tag) = pending.ticket.split_once('.').unwrap();
        let mut altered = body.as_bytes().to_vec();
        altered[3] ^= 1;
        let altered = format!("{}.{tag}", String::from_utf8(altered).unwrap());
        assert_eq!(Answers::only(&tickets, &altered, true).take(&call), Some(Err(TicketError::Forged)));
        let other = Tickets::open(&dir.path().join("other")).unwrap();
        assert_eq!(Answers::only(&other, &pending.ticket, true).take(&call), Some(Err(TicketError::Forged)));
        // A session token sealed from the same bytes never opens as a ticket.
        let secret = std::fs::read(dir.path().join("k")).unwrap();
        let session = Seal::derived(secret.trim_ascii()).seal(&json!({"k": "ticket"}));
        assert_eq!(Answers::only(&tickets, &session, true).take(&call), Some(Err(TicketError::Forged)));

        let expired = tickets.clone().ttl(Duration::ZERO).issue(&call, req, "");
        let answer = Answers::new(&tickets).deny(&expired.ticket).take(&call);
        assert!(matches!(answer, Some(Err(TicketError::Expired { .. }))), "{answer:?}");
    }

    #[test]
    fn a_ticket_answers_only_the_front_end_that_issued_it() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let (call_side, serve_side) =
            (Tickets::open(&key).unwrap(), Tickets::open(&key).unwrap().issued_by(Issuer::Serve));
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        for (issuer, presented_to, from, to) in
            [("call", "serve", &call_side, &serve_side), ("serve", "call", &serve_side, &call_side)]
        {
            let pending = from.issue(&call, req.clone(), "");
            let refused = Answers::only(to, &pending.ticket, true).take(&call);
            let want = TicketError::OtherIssuer {
                issued_by: Some(issuer.to_owned()),
                presented_to: format!("`packs {presented_to}`"),
            };
            assert_eq!(refused, Some(Err(want.clone())));
            assert_eq!(
                want.to_string(),
                format!(
                    "the ticket was issued by `packs {issuer}`, not by `packs {presented_to}` (a ticket answers only \
                     the front-end that issued it)"
                )
            );
            // Not spent by the refusal: its own front-end still takes it, once.
            assert_eq!(Answers::only(from, &pending.ticket, true).take(&call), Some(Ok(true)));
        }
        // A ticket that names no front-end (an earlier packs sealed it) answers neither.
        let secret = std::fs::read(&key).unwrap();
        let seal = Seal::derived_for(LABEL, secret.trim_ascii());
        let unnamed = seal.seal(&json!({"k": "ticket", "t": "deploy", "g": null, "a": call.arguments,
            "c": call.command, "x": millis(SystemTime::now()) + 60_000, "n": "ab"}));
        for tickets in [&call_side, &serve_side] {
            let refused = Answers::only(tickets, &unnamed, true).take(&call);
            assert!(matches!(refused, Some(Err(TicketError::OtherIssuer { issued_by: None, .. }))), "{refused:?}");
        }
    }

    #[test]
    fn used_entries_are_pruned_once_expired() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let used = dir.path().join("k.used");
        std::fs::write(used.join("1-00ff"), "").unwrap();
        let far = millis(SystemTime::now()) + 3_600_000;
        std::fs::write(used.join(format!("{far}-00aa")), "").unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let pending = tickets.issue(&call, req, "");
        assert_eq!(Answers::new(&tickets).approve(&pending.ticket).take(&call), Some(Ok(true)));
        let mut names: Vec<String> =
            std::fs::read_dir(&used).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names.len(), 2);
        assert!(!names.contains(&"1-00ff".to_owned()));
        assert!(names.contains(&format!("{far}-00aa")));
    }

    /// A ticket sealed with `tickets`' key and these claims, as a packs that issued it would.
    fn sealed(key: &Path, claims: &Value) -> String {
        let secret = std::fs::read(key).unwrap();
        Seal::derived_for(LABEL, secret.trim_ascii()).seal(claims)
    }

    #[test]
    fn a_tickets_nonce_is_one_to_sixty_four_hex_digits() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let tickets = Tickets::open(&key).unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let expires = millis(SystemTime::now()) + 60_000;
        let with_nonce = |n: &str| {
            sealed(
                &key,
                &json!({"k": "ticket", "t": "deploy", "g": null, "i": "call", "a": call.arguments,
                "c": call.command, "x": expires, "n": n}),
            )
        };
        for good in ["a", "f".repeat(64).as_str(), "0123456789abcdefABCDEF"] {
            assert_eq!(Answers::only(&tickets, &with_nonce(good), true).take(&call), Some(Ok(true)), "{good}");
        }
        for bad in ["", "f".repeat(65).as_str(), "e".repeat(80).as_str(), "../x", "ab-cd", "g0"] {
            assert_eq!(
                Answers::only(&tickets, &with_nonce(bad), true).take(&call),
                Some(Err(TicketError::Forged)),
                "{bad}"
            );
        }
        // Claims of the wrong kinds do not open either.
        let base = json!({"k": "ticket", "t": "deploy", "g": null, "i": "call", "a": call.arguments,
            "c": call.command, "x": expires, "n": "ab"});
        for (k, v) in [("k", json!("session")), ("g", json!(1)), ("p", json!(2)), ("i", json!(true)), ("x", json!("1"))]
        {
            let mut claims = base.clone();
            claims[k] = v;
            assert_eq!(
                Answers::only(&tickets, &sealed(&key, &claims), true).take(&call),
                Some(Err(TicketError::Forged)),
                "{k}"
            );
        }
    }

    #[test]
    fn an_expired_ticket_says_when_it_expired() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let tickets = Tickets::open(&key).unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        // 2001-09-09T01:46:40Z is 1,000,000,000 s after the epoch.
        let ticket = sealed(
            &key,
            &json!({"k": "ticket", "t": "deploy", "g": null, "i": "call", "a": call.arguments,
            "c": call.command, "x": 1_000_000_000_000_u64 + 999, "n": "ab"}),
        );
        let answer = Answers::only(&tickets, &ticket, true).take(&call);
        let want = TicketError::Expired { at: "2001-09-09T01:46:40Z".into() };
        assert_eq!(answer, Some(Err(want.clone())));
        assert_eq!(want.to_string(), "the ticket expired at 2001-09-09T01:46:40Z");
    }

    #[test]
    fn a_key_is_thirty_two_to_four_thousand_and_ninety_six_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            path
        };
        // The size counts the whole file; the key is what is left once trimmed.
        assert!(Tickets::open(&write("32", &[b'k'; 32])).is_ok());
        assert!(Tickets::open(&write("32nl", &[&[b'k'; 32][..], b"\n"].concat())).is_ok());
        assert!(matches!(Tickets::open(&write("31", &[b'k'; 31])), Err(KeyFileError::BadSize { bytes: 31, .. })));
        assert!(matches!(
            Tickets::open(&write("31sp", &[&[b'k'; 31][..], b"  \n"].concat())),
            Err(KeyFileError::BadSize { bytes: 34, .. })
        ));
        assert!(Tickets::open(&write("4096", &[b'k'; 4096])).is_ok());
        // Read no further than one byte past the limit.
        assert!(matches!(Tickets::open(&write("4097", &[b'k'; 4097])), Err(KeyFileError::BadSize { bytes: 4097, .. })));
        assert!(matches!(Tickets::open(&write("big", &[b'k'; 9000])), Err(KeyFileError::BadSize { bytes: 4097, .. })));
        let error = Tickets::open(&write("abc", b"abc")).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("approval key {}: a key is 32 to 4096 bytes (it holds 3)", dir.path().join("abc").display())
        );
        // Another key: tickets of one do not open with the other.
        let (a, b) =
            (Tickets::open(&write("a", &[b'a'; 40])).unwrap(), Tickets::open(&write("b", &[b'b'; 40])).unwrap());
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let pending = a.issue(&call, req, "");
        assert_eq!(Answers::only(&b, &pending.ticket, true).take(&call), Some(Err(TicketError::Forged)));
        assert_eq!(Answers::only(&a, &pending.ticket, true).take(&call), Some(Ok(true)));
    }

    #[test]
    fn a_key_that_cannot_be_opened_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        // Its directory is a file (ENOTDIR): neither a link nor missing.
        let key = file.join("approval.key");
        let error = Tickets::open(&key).unwrap_err();
        assert!(
            matches!(&error, KeyFileError::Io { path, source } if *path == key
            && source.raw_os_error() == Some(libc::ENOTDIR)),
            "{error:?}"
        );
        // The used-ticket record is a file: refused.
        let key = dir.path().join("k");
        std::fs::write(dir.path().join("k.used"), "").unwrap();
        let error = Tickets::open(&key).unwrap_err();
        assert!(matches!(&error, KeyFileError::Io { path, .. } if *path == dir.path().join("k.used")), "{error:?}");
    }

    #[test]
    fn a_ticket_whose_use_cannot_be_recorded_is_not_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let pending = tickets.issue(&call, req, "");
        let used = dir.path().join("k.used");
        std::fs::remove_dir(&used).unwrap();
        std::fs::write(&used, "").unwrap();
        let answers = Answers::new(&tickets).approve(&pending.ticket);
        let answer = answers.take(&call);
        assert!(matches!(&answer, Some(Err(TicketError::Record { path, .. })) if *path == used), "{answer:?}");
        assert!(!answers.all_honoured());
    }

    #[test]
    fn every_ticket_honoured_is_said_and_those_no_call_took_are_audited() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let req = request(&["deploy"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let (one, two) = (tickets.issue(&call, req.clone(), ""), tickets.issue(&call, req.clone(), ""));
        assert!(Answers::new(&tickets).all_honoured(), "no ticket, none refused");
        let answers = Answers::new(&tickets).approve(&one.ticket).deny(&two.ticket);
        assert!(!answers.all_honoured());
        assert_eq!(answers.take(&call), Some(Ok(true)));
        assert!(!answers.all_honoured());
        assert_eq!(answers.take(&call), Some(Ok(false)));
        assert!(answers.all_honoured());

        let log = dir.path().join("audit.jsonl");
        let context = crate::call::Context::new().with_audit(crate::audit::AuditLog::open(&log).unwrap());
        let three = tickets.issue(&call, req, "");
        let answers = Answers::new(&tickets).approve(&three.ticket).approve("not a ticket");
        let refused = answers.audit_refused(&context);
        assert_eq!(refused, answers.refused());
        assert_eq!(refused.len(), 2);
        assert_eq!(refused[0].0.as_deref(), Some("deploy"));
        assert_eq!(refused[1], (None, TicketError::Forged));
        let lines: Vec<Value> =
            std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["tool"], "deploy");
        assert_eq!(lines[0]["decision"], "denied");
        assert_eq!(lines[0]["outcome"], "ticket_refused");
        assert_eq!(
            lines[0]["error"],
            "approval ticket refused: no call of `deploy` in the response is the one it was issued for"
        );
        assert_eq!(lines[1]["tool"], "");
        assert_eq!(lines[1]["error"], format!("approval ticket refused: {}", TicketError::Forged));
    }

    #[test]
    fn what_is_said_aloud_is_at_most_a_hundred_and_sixty_characters() {
        let fits = "x".repeat(160 - "May I run a? It will: .".len());
        assert_eq!(speak("a", &fits).chars().count(), 160);
        assert_eq!(speak("a", &fits), format!("May I run a? It will: {fits}."));
        let long = format!("{fits}y");
        let said = speak("a", &long);
        assert_eq!(said.chars().count(), 160);
        assert_eq!(said, format!("May I run a? It will: {}...", &long[..157 - "May I run a? It will: ".len()]));
        assert_eq!(speak("db_dump.v2-x", "Dump it. Then more."), "May I run db dump v2 x? It will: Dump it.");
    }

    #[test]
    fn a_pending_call_as_json_names_the_tool_its_ticket_prompt_sentence_and_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let tickets = Tickets::open(&dir.path().join("k")).unwrap();
        let req = request(&["deploy", "main"]);
        let call = Presented::new("deploy", None, &Map::new(), &req);
        let mut pending = tickets.issue(&call, req, "Deploy a branch.");
        pending.expires = UNIX_EPOCH + Duration::from_millis(1_000_000_000_999);
        let json = pending.to_json();
        assert_eq!(
            json["pending"],
            json!({"tool": "deploy", "ticket": pending.ticket, "prompt": pending.prompt,
                "speak": "May I run deploy? It will: Deploy a branch.", "expires": "2001-09-09T01:46:40Z"})
        );
        assert_eq!(
            json["message"],
            "`deploy` has not run: it waits for a person's approval. Go on with other work; do not call it again \
             for this, the answer comes later."
        );
    }

    #[test]
    fn callers_that_create_the_key_at_once_all_open_the_one_key() {
        // Each finds no key, writes one aside and links it into place: all but one find the
        // link taken, and open the key the first one linked (the window holds an fsync, so
        // eight callers released at once race in it).
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let key = dir.path().join("state/approval.key");
            let barrier = std::sync::Barrier::new(8);
            let opened: Vec<Result<Tickets, KeyFileError>> = std::thread::scope(|s| {
                let callers: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            Tickets::open(&key)
                        })
                    })
                    .collect();
                callers.into_iter().map(|c| c.join().unwrap()).collect()
            });
            let opened: Vec<Tickets> = opened.into_iter().map(Result::unwrap).collect();
            let req = request(&["deploy"]);
            let call = Presented::new("deploy", None, &Map::new(), &req);
            for tickets in &opened {
                let pending = opened[0].issue(&call, req.clone(), "");
                assert_eq!(Answers::only(tickets, &pending.ticket, true).take(&call), Some(Ok(true)));
            }
            let left: Vec<_> =
                std::fs::read_dir(dir.path().join("state")).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left.len(), 2, "the key and its record, nothing written aside: {left:?}");
        }
    }
}
