//! `packs.lock`: pins of what each tool tells a model and what it runs, and the checks
//! against them (`packs lock`, `--locked`).
//!
//! A pin holds, per tool, SHA-256 digests of its file (a manifest's or an executable's
//! bytes), of its *meaning* (the canonical JSON of its parts: description, parameters,
//! command, policy, output, …; a formatting-only edit leaves it alone) and of its describe
//! JSON (what a model is told), plus the parts themselves as canonical JSON, so a change can
//! be named and shown to a reviewer. See docs/LOCK.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::Catalog;
pub use crate::digest::{canonical, sha256};
use crate::tool::{Tool, ToolKind};

/// The lock file's format version.
pub const LOCK_VERSION: u32 = 1;

/// The lock file's name when none is given: `packs.lock` in the working directory.
pub const DEFAULT_LOCKFILE: &str = "packs.lock";

/// The signature file beside a lock file: `packs.lock.minisig`.
pub fn signature_path(lockfile: &Path) -> PathBuf {
    let mut name = lockfile.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// What `packs.lock` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// The format version ([`LOCK_VERSION`]).
    pub version: u32,
    /// One pin per tool, in name order.
    #[serde(rename = "tool", default)]
    pub tools: Vec<Pin>,
}

/// One tool's pin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// The tool's name (the pin is by name: a tool that moves keeps its pin).
    pub name: String,
    /// `manifest`, `executable` or `native`.
    pub kind: String,
    /// Where it was found, for people (not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `sha256:…` of the file's bytes (a manifest or an executable; none for a native tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `sha256:…` of the canonical JSON of [`Pin::pinned`]: what the tool means.
    pub meaning: String,
    /// `sha256:…` of the canonical describe JSON: what a model is told.
    pub describe: String,
    /// Each part, as canonical JSON: `description`, `parameters`, `command`, `policy`,
    /// `output`, `examples`, `modes` (manifests); `executable` (the file digest of an
    /// executable).
    pub pinned: BTreeMap<String, String>,
}

/// Why a lock file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// It cannot be read.
    #[error("cannot read the lock file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a lock file packs can read.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line when known.
        message: String,
    },
    /// A tool's file could not be read to pin it.
    #[error("cannot read {} to pin `{name}`: {source}", path.display())]
    ToolUnreadable {
        /// The tool.
        name: String,
        /// Its file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Its signature is missing, malformed, or not by the trusted key.
    #[error("{0}")]
    Signature(String),
}

impl LockFile {
    /// Read and parse `path`.
    pub fn read(path: &Path) -> Result<Self, LockError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| LockError::Unreadable { path: path.to_owned(), source })?;
        Self::parse(&text, path)
    }

    /// Parse a lock file's text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, LockError> {
        let lock: Self = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| format!("line {}: ", text[..s.start].matches('\n').count() + 1));
            LockError::Invalid {
                path: path.to_owned(),
                message: format!("{}{}", line.unwrap_or_default(), e.message()),
            }
        })?;
        if lock.version != LOCK_VERSION {
            return Err(LockError::Invalid {
                path: path.to_owned(),
                message: format!("lock file version {} is not {LOCK_VERSION}, the one this packs reads", lock.version),
            });
        }
        Ok(lock)
    }

    /// The pin of `name`.
    pub fn get(&self, name: &str) -> Option<&Pin> {
        self.tools.iter().find(|p| p.name == name)
    }

    /// Add or replace `pin`, keeping name order.
    pub fn put(&mut self, pin: Pin) {
        self.tools.retain(|p| p.name != pin.name);
        let at = self.tools.partition_point(|p| p.name < pin.name);
        self.tools.insert(at, pin);
    }

    /// The file's text: a header comment, then TOML in a stable order.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!(
            "# packs.lock: what each tool tells a model and what it runs, pinned by `packs lock`.\n\
             # Review changes to this file like code; `packs --locked` refuses tools that differ.\n{body}"
        )
    }
}

/// A tool's parts, each a JSON value (see [`Pin::pinned`]).
fn parts(tool: &Tool, file_digest: Option<&str>) -> BTreeMap<String, Value> {
    let mut parts = BTreeMap::new();
    parts.insert("description".to_owned(), Value::from(tool.description()));
    parts.insert("policy".to_owned(), serde_json::to_value(tool.policy()).unwrap_or_default());
    parts.insert("output".to_owned(), serde_json::to_value(tool.output_spec()).unwrap_or_default());
    match tool.manifest() {
        Some(m) => {
            let whole = serde_json::to_value(m).unwrap_or_default();
            for key in ["parameters", "command", "examples", "modes"] {
                parts.insert(key.to_owned(), whole.get(key).cloned().unwrap_or(Value::Null));
            }
        }
        None => {
            parts.insert("parameters".to_owned(), tool.describe().parameters.clone());
        }
    }
    if tool.kind() == ToolKind::Executable {
        parts.insert("executable".to_owned(), Value::from(file_digest.unwrap_or_default()));
    }
    parts
}

/// Pin `tool` as it is now. `base` is the directory `source` is written relative to (the
/// lock file's), when the tool's file is below it.
pub fn pin(tool: &Tool, base: Option<&Path>) -> Result<Pin, LockError> {
    let file = match tool.kind() {
        ToolKind::Native => None,
        _ => {
            let path = tool.source();
            let bytes = std::fs::read(path).map_err(|source| unreadable(tool, source))?;
            Some(sha256(&bytes))
        }
    };
    Ok(pin_of(tool, base, file))
}

fn unreadable(tool: &Tool, source: std::io::Error) -> LockError {
    LockError::ToolUnreadable { name: tool.name().to_owned(), path: tool.source().to_owned(), source }
}

/// The pin of `tool` whose file's digest is `file`.
fn pin_of(tool: &Tool, base: Option<&Path>, file: Option<String>) -> Pin {
    let parts = parts(tool, file.as_deref());
    let pinned: BTreeMap<String, String> = parts.iter().map(|(k, v)| (k.clone(), canonical(v))).collect();
    let meaning = sha256(canonical(&Value::Object(parts.into_iter().collect())).as_bytes());
    let describe = sha256(canonical(&crate::formats::describe(tool)).as_bytes());
    let source = match tool.kind() {
        ToolKind::Native => None,
        _ => {
            let s = tool.source();
            let shown = base.and_then(|b| s.strip_prefix(b).ok()).unwrap_or(s);
            Some(shown.to_string_lossy().into_owned())
        }
    };
    Pin { name: tool.name().to_owned(), kind: tool.kind().as_str().to_owned(), source, file, meaning, describe, pinned }
}

/// `tool` pinned as it is now, and (for an executable, on Linux) the sealed copy of the
/// very bytes whose digest the pin holds, to start it from once it is found unchanged.
fn pin_now(tool: &Tool) -> Result<(Pin, Option<crate::image::PinnedImage>), LockError> {
    #[cfg(target_os = "linux")]
    if tool.kind() == ToolKind::Executable {
        // One read: the bytes hashed are the bytes sealed.
        let bytes = std::fs::read(tool.source()).map_err(|e| unreadable(tool, e))?;
        let image = crate::image::Image::of(&bytes).map_err(|e| unreadable(tool, e))?;
        let pin = pin_of(tool, None, Some(sha256(&bytes)));
        return Ok((pin, Some(std::sync::Arc::new(image))));
    }
    Ok((pin(tool, None)?, None))
}

/// How a tool differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Drift {
    /// The lock has no pin of this name.
    Unpinned,
    /// What it means or tells a model changed: these parts (`description`, `parameters`,
    /// `command`, `policy`, `output`, `examples`, `modes`, `executable`; `describe` when only
    /// the describe JSON differs, `kind` when it became another kind of tool).
    Changed(Vec<String>),
    /// Only the file's formatting changed (same meaning, same describe).
    Reformatted,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unpinned => f.write_str("it is not in the lock file"),
            Self::Changed(parts) => write!(f, "it changed since it was pinned: {}", parts.join(", ")),
            Self::Reformatted => f.write_str("its file was reformatted since it was pinned (same meaning)"),
        }
    }
}

/// Compare `now` (a fresh [`pin`]) with the lock's pin of its name.
pub fn drift(now: &Pin, lock: &LockFile) -> Option<Drift> {
    let Some(then) = lock.get(&now.name) else { return Some(Drift::Unpinned) };
    if then.kind != now.kind {
        return Some(Drift::Changed(vec!["kind".to_owned()]));
    }
    if then.meaning != now.meaning || then.describe != now.describe {
        let mut changed: Vec<String> = then
            .pinned
            .keys()
            .chain(now.pinned.keys())
            .filter(|k| then.pinned.get(*k) != now.pinned.get(*k))
            .cloned()
            .collect();
        changed.sort();
        changed.dedup();
        if changed.is_empty() {
            changed.push("describe".to_owned());
        }
        return Some(Drift::Changed(changed));
    }
    (then.file != now.file).then_some(Drift::Reformatted)
}

/// Where `--locked` reads its lock file, and the key its signature must verify with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    /// The lock file.
    pub lockfile: PathBuf,
    /// A minisign public key file: the lock file is trusted only with a valid signature by it.
    pub verify: Option<PathBuf>,
}

impl Locked {
    /// Read the lock file, its signature checked first when a key is given. The file is
    /// read once: the bytes whose signature verifies are the bytes parsed, so a lock file
    /// swapped in between cannot be trusted on another's signature.
    pub fn read(&self) -> Result<LockFile, LockError> {
        let path = &self.lockfile;
        let bytes = std::fs::read(path).map_err(|source| LockError::Unreadable { path: path.to_owned(), source })?;
        if let Some(key) = &self.verify {
            verify_signature(&bytes, path, key)?;
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| LockError::Invalid { path: path.to_owned(), message: format!("not UTF-8 text: {e}") })?;
        LockFile::parse(&text, path)
    }

    /// The files whose change means the lock must be read again (the lock file, its
    /// signature).
    pub fn files(&self) -> [PathBuf; 2] {
        [self.lockfile.clone(), signature_path(&self.lockfile)]
    }
}

/// A tool `--locked` refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The tool's name.
    pub name: String,
    /// Its file (none for a native tool).
    pub source: PathBuf,
    /// How it differs (never [`Drift::Reformatted`], which is allowed).
    pub drift: Drift,
}

/// Withdraw every tool of `catalog` (a lock that cannot be trusted refuses them all),
/// each with `reason`; returns their names.
pub fn refuse_all(catalog: &mut Catalog, reason: &str) -> Vec<String> {
    let names: Vec<String> = catalog.tools().map(|t| t.name().to_owned()).collect();
    for name in &names {
        catalog.refuse(name, format!("refused: {reason}"));
    }
    names
}

/// Enforce `lock` on `catalog`: every tool that is not pinned, or whose meaning or
/// describe differs from its pin, is withdrawn (a lookup of it fails with the reason);
/// tools that still match keep working, and so does a tool whose file was only
/// reformatted. A tool whose file cannot be read is refused too. An executable that
/// matches is started from then on from the bytes that were hashed, sealed in memory
/// (on Linux), never from its path: a file swapped in after this check never runs.
pub fn enforce(catalog: &mut Catalog, lock: &LockFile) -> Vec<Refusal> {
    let mut refused = Vec::new();
    let checked: Vec<(String, PathBuf, Option<Drift>)> = catalog
        .tools()
        .map(|t| {
            let drift = match pin_now(t) {
                Ok((now, image)) => {
                    let drift = drift(&now, lock).filter(|d| *d != Drift::Reformatted);
                    if let (None, Some(image)) = (&drift, image) {
                        t.pin_image(image);
                    }
                    drift
                }
                Err(e) => Some(Drift::Changed(vec![format!("file ({e})")])),
            };
            (t.name().to_owned(), t.source().to_owned(), drift)
        })
        .collect();
    for (name, source, d) in checked {
        if let Some(d) = d {
            catalog.refuse(&name, format!("refused by the lock file: {d}"));
            refused.push(Refusal { name, source, drift: d });
        }
    }
    refused
}

/// What a reviewer must read when `old` is re-pinned as `new`: each changed part, with
/// what it was and what it is; a policy change that gives the tool more room is marked
/// `(looser)`.
pub fn semantic_diff(old: Option<&Pin>, new: &Pin) -> Vec<String> {
    let Some(old) = old else {
        return vec![format!("new tool `{}` ({})", new.name, new.kind)];
    };
    let value = |p: &Pin, k: &str| p.pinned.get(k).and_then(|s| serde_json::from_str::<Value>(s).ok());
    let mut lines = Vec::new();
    if old.kind != new.kind {
        lines.push(format!("kind: {} → {}", old.kind, new.kind));
    }
    let keys: std::collections::BTreeSet<&String> = old.pinned.keys().chain(new.pinned.keys()).collect();
    for key in keys {
        let (a, b) = (value(old, key), value(new, key));
        if a == b {
            continue;
        }
        let (a, b) = (a.unwrap_or(Value::Null), b.unwrap_or(Value::Null));
        match key.as_str() {
            "parameters" => lines.extend(map_diff("parameter", &a, &b)),
            "policy" => lines.extend(policy_diff(&a, &b)),
            "command" => lines.extend(field_diff("command", &a, &b)),
            "output" => lines.extend(field_diff("output", &a, &b)),
            _ => lines.push(format!("{key}: {} → {}", short(&a), short(&b))),
        }
    }
    if lines.is_empty() && old.describe != new.describe {
        lines.push("describe JSON changed".to_owned());
    }
    lines
}

/// A value shown on one line (strings without quotes).
fn short(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "(none)".to_owned(),
        other => other.to_string(),
    }
}

/// Members of two objects (parameters): added, removed, changed.
fn map_diff(what: &str, a: &Value, b: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let mut lines = Vec::new();
    for (k, v) in b {
        match a.get(k) {
            None => lines.push(format!("new {what} `{k}`: {v}")),
            Some(old) if old != v => lines.push(format!("{what} `{k}`: {old} → {v}")),
            Some(_) => {}
        }
    }
    for k in a.keys().filter(|k| !b.contains_key(*k)) {
        lines.push(format!("removed {what} `{k}`"));
    }
    lines
}

/// Fields of two objects (command, output), each changed one on its own line.
fn field_diff(what: &str, a: &Value, b: &Value) -> Vec<String> {
    match (a.as_object(), b.as_object()) {
        (Some(am), Some(bm)) => {
            let keys: std::collections::BTreeSet<&String> = am.keys().chain(bm.keys()).collect();
            keys.into_iter()
                .filter(|k| am.get(*k) != bm.get(*k))
                .map(|k| {
                    let show = |m: &serde_json::Map<String, Value>| m.get(k).map_or("(none)".to_owned(), short);
                    format!("{what}.{k}: {} → {}", show(am), show(bm))
                })
                .collect()
        }
        _ => vec![format!("{what}: {} → {}", short(a), short(b))],
    }
}

/// Policy fields that changed, each marked `(looser)` when it gives the tool more room.
fn policy_diff(a: &Value, b: &Value) -> Vec<String> {
    let looser = |k: &str, old: &Value, new: &Value| -> bool {
        let num = |v: &Value| v.as_f64().unwrap_or(f64::INFINITY);
        match k {
            "read_only" | "confirm_before_run" => old == &Value::Bool(true) && new != &Value::Bool(true),
            "requires_network" | "reads_credentials" => new == &Value::Bool(true) && old != &Value::Bool(true),
            "unix_sockets" => old == &Value::Bool(false) && new != &Value::Bool(false),
            "timeout_secs" | "max_output_bytes" | "max_memory_bytes" | "max_file_bytes" | "max_cpu_secs" => {
                num(new) > num(old)
            }
            "writable" | "allowed_exit_codes" => {
                let set = |v: &Value| v.as_array().cloned().unwrap_or_default();
                set(new).iter().any(|x| !set(old).contains(x))
            }
            // Narrowed reads: dropping the list, or a new place in it, reads more.
            "readable" => {
                let set = |v: &Value| v.as_array().cloned().unwrap_or_default();
                old.is_array() && (!new.is_array() || set(new).iter().any(|x| !set(old).contains(x)))
            }
            "tier" => tier_rank(new) > tier_rank(old),
            _ => false,
        }
    };
    let empty = serde_json::Map::new();
    let (am, bm) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let keys: std::collections::BTreeSet<&String> = am.keys().chain(bm.keys()).collect();
    keys.into_iter()
        .filter(|k| am.get(*k) != bm.get(*k))
        .map(|k| {
            let (old, new) = (am.get(k).cloned().unwrap_or(Value::Null), bm.get(k).cloned().unwrap_or(Value::Null));
            let mark = if looser(k, &old, &new) { " (looser)" } else { "" };
            format!("policy.{k}: {} → {}{mark}", short(&old), short(&new))
        })
        .collect()
}

fn tier_rank(v: &Value) -> usize {
    match v.as_str() {
        Some("read_only") => 0,
        Some("standard") => 1,
        Some("elevated") => 2,
        _ => 3,
    }
}

/// Check that `data`, read from `lockfile`, is what `lockfile`'s minisign signature
/// (`LOCKFILE.minisig`) signs with the public key in `pubkey_file` (a minisign `.pub` file,
/// or the key's base64 line). A missing, malformed or wrong signature is an error, never a
/// warning.
fn verify_signature(data: &[u8], lockfile: &Path, pubkey_file: &Path) -> Result<(), LockError> {
    let err = |m: String| LockError::Signature(m);
    let key_text = std::fs::read_to_string(pubkey_file)
        .map_err(|e| err(format!("cannot read the public key {}: {e}", pubkey_file.display())))?;
    let key = key_text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .and_then(|l| minisign_verify::PublicKey::from_base64(l).ok())
        .ok_or_else(|| err(format!("{} is not a minisign public key", pubkey_file.display())))?;
    let sig_path = signature_path(lockfile);
    let sig_text = std::fs::read_to_string(&sig_path)
        .map_err(|e| err(format!("{} is not signed: cannot read {}: {e}", lockfile.display(), sig_path.display())))?;
    let signature = minisign_verify::Signature::decode(&sig_text)
        .map_err(|e| err(format!("{} is not a minisign signature: {e}", sig_path.display())))?;
    key.verify(data, &signature, false).map_err(|e| {
        err(format!(
            "the signature {} does not verify {} with the key {}: {e}",
            sig_path.display(),
            lockfile.display(),
            pubkey_file.display()
        ))
    })
}

#[cfg(feature = "sign")]
/// A minisign secret key, opened (`packs lock --sign`): opened before the lock file is
/// written, so a wrong key or password changes nothing.
pub struct SigningKey(minisign::SecretKey);

#[cfg(feature = "sign")]
impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(…)")
    }
}

#[cfg(feature = "sign")]
impl SigningKey {
    /// Open the minisign secret key in `seckey_file`. An encrypted key (what `minisign -G`
    /// writes) needs its `password`; without one the key must be unencrypted.
    pub fn open(seckey_file: &Path, password: Option<String>) -> Result<Self, LockError> {
        let err = |m: String| LockError::Signature(m);
        let key_text = std::fs::read_to_string(seckey_file)
            .map_err(|e| err(format!("cannot read the secret key {}: {e}", seckey_file.display())))?;
        let key_box = minisign::SecretKeyBox::from_string(&key_text)
            .map_err(|e| err(format!("{} is not a minisign secret key: {e}", seckey_file.display())))?;
        let key = match password {
            Some(p) => key_box.into_secret_key(Some(p)),
            None => key_box.into_unencrypted_secret_key(),
        }
        .map_err(|e| {
            err(format!(
                "cannot open the secret key {}: {e} (an encrypted key needs PACKS_SIGN_PASSWORD)",
                seckey_file.display()
            ))
        })?;
        Ok(Self(key))
    }

    /// Sign `lockfile`, writing `LOCKFILE.minisig` (trusted comment `file:NAME`).
    pub fn sign(&self, lockfile: &Path) -> Result<PathBuf, LockError> {
        let err = |m: String| LockError::Signature(m);
        let data = std::fs::read(lockfile).map_err(|e| err(format!("cannot read {}: {e}", lockfile.display())))?;
        let name = lockfile.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let trusted = format!("file:{name}");
        let signature = minisign::sign(None, &self.0, std::io::Cursor::new(&data), Some(&trusted), None)
            .map_err(|e| err(format!("cannot sign {}: {e}", lockfile.display())))?;
        let sig_path = signature_path(lockfile);
        std::fs::write(&sig_path, signature.to_string())
            .map_err(|e| err(format!("cannot write {}: {e}", sig_path.display())))?;
        Ok(sig_path)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn reading_credentials_and_unix_sockets_regained_are_looser() {
        let diff = super::policy_diff(&json!({"unix_sockets": false}), &json!({"reads_credentials": true}));
        assert_eq!(
            diff,
            ["policy.reads_credentials: (none) → true (looser)", "policy.unix_sockets: false → (none) (looser)"]
        );
        assert_eq!(
            super::policy_diff(&json!({}), &json!({"unix_sockets": false})),
            ["policy.unix_sockets: (none) → false"]
        );
        assert_eq!(
            super::policy_diff(&json!({"readable": ["/a"]}), &json!({})),
            ["policy.readable: [\"/a\"] → (none) (looser)"]
        );
        assert_eq!(super::policy_diff(&json!({}), &json!({"readable": []})), ["policy.readable: (none) → []"]);
    }
}
