//! Sealed tokens: JSON the server hands a client and reads back unchanged, signed with
//! HMAC-SHA-256 so that a client cannot forge or alter one. `requestState` tokens (an
//! approval asked in the stateless era) and the HTTP transport's session ids are sealed:
//! every replica that holds the same key reads them, so no replica keeps them in memory.
//! Deferred approvals' tickets (`call/ticket.rs`) are sealed too, with a key file's key.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde_json::Value;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The key tokens are sealed with.
#[derive(Clone)]
pub(crate) struct Seal {
    key: [u8; 32],
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

/// Tokens longer than this are not opened (a header or field a client fills at will).
const MAX_TOKEN: usize = 4096;

impl Seal {
    /// A key of 32 bytes from the OS: tokens open only in this process.
    pub(crate) fn random() -> Self {
        Seal { key: random_bytes() }
    }

    /// A key derived from a secret every replica holds (the token file's bytes): tokens
    /// sealed by one replica open in every other.
    pub(crate) fn derived(secret: &[u8]) -> Self {
        Self::derived_for(b"packs serve: sealed tokens v1", secret)
    }

    /// A key derived from `secret` for one purpose (`label`): tokens sealed for one purpose
    /// never open for another, even from the same secret.
    pub(crate) fn derived_for(label: &[u8], secret: &[u8]) -> Self {
        let mut mac = HmacSha256::new_from_slice(label).expect("HMAC takes any key");
        mac.update(secret);
        Seal { key: mac.finalize().into_bytes().into() }
    }

    /// 64 unpredictable bits, for nonces.
    pub(crate) fn nonce(&self) -> u64 {
        let bytes = random_bytes();
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    }

    /// `value` as a token: base64url of its JSON, a dot, base64url of the HMAC of that text.
    pub(crate) fn seal(&self, value: &Value) -> String {
        let body = URL_SAFE_NO_PAD.encode(value.to_string());
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    /// The value sealed in `token`, if this key sealed it (compared in constant time).
    pub(crate) fn open(&self, token: &str) -> Option<Value> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let (body, tag) = token.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key")
    }
}

/// 32 bytes from `/dev/urandom`; if it cannot be read, the time and pid hashed (tokens
/// are then guessable only by someone who knows both to the nanosecond).
fn random_bytes() -> [u8; 32] {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok() {
        return bytes;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{now}-{}-{:p}", std::process::id(), &bytes);
    let mut mac = HmacSha256::new_from_slice(seed.as_bytes()).expect("HMAC takes any key");
    mac.update(b"packs fallback randomness");
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sealed_value_opens_only_unchanged_and_with_its_key() {
        let seal = Seal::derived(b"secret");
        let token = seal.seal(&json!({"t": "rm", "x": 1}));
        assert_eq!(seal.open(&token), Some(json!({"t": "rm", "x": 1})));
        assert_eq!(Seal::derived(b"secret").open(&token), Some(json!({"t": "rm", "x": 1})), "replicas share it");
        assert_eq!(Seal::derived(b"other").open(&token), None);
        assert_eq!(Seal::random().open(&token), None);
        let (body, tag) = token.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(json!({"t": "rm", "x": 2}).to_string());
        assert_eq!(seal.open(&format!("{forged}.{tag}")), None);
        assert_eq!(seal.open(body), None);
        assert_eq!(seal.open(&format!("{body}.")), None);
        assert_eq!(seal.open(&"a".repeat(MAX_TOKEN + 1)), None);
        assert_ne!(seal.nonce(), seal.nonce());
    }
}
