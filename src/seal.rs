//! Sealed tokens: JSON the server hands a client and reads back unchanged, signed with
//! HMAC-SHA-256 so that a client cannot forge or alter one. `requestState` tokens (an
//! approval asked in the stateless era) and the HTTP transport's session ids are sealed:
//! every replica that holds the same key reads them, so no replica keeps them in memory.
//! Deferred approvals' tickets (`call/ticket.rs`) are sealed too, with a key file's key.

use data_encoding::BASE64URL_NOPAD as URL_SAFE_NO_PAD;
use hmac_sha256::HMAC;
use serde_json::Value;

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
        Seal { key: HMAC::mac(secret, label) }
    }

    /// 64 unpredictable bits, for nonces.
    pub(crate) fn nonce(&self) -> u64 {
        let bytes = random_bytes();
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    }

    /// `value` as a token: base64url of its JSON, a dot, base64url of the HMAC of that text.
    pub(crate) fn seal(&self, value: &Value) -> String {
        let body = URL_SAFE_NO_PAD.encode(value.to_string().as_bytes());
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(&HMAC::mac(&body, self.key)))
    }

    /// The value sealed in `token`, if this key sealed it (compared in constant time).
    pub(crate) fn open(&self, token: &str) -> Option<Value> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let (body, tag) = token.split_once('.')?;
        let tag: [u8; 32] = URL_SAFE_NO_PAD.decode(tag.as_bytes()).ok()?.try_into().ok()?;
        HMAC::verify(body, self.key, &tag).then_some(())?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body.as_bytes()).ok()?).ok()
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
    HMAC::mac(b"packs fallback randomness", seed)
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
        let forged = URL_SAFE_NO_PAD.encode(json!({"t": "rm", "x": 2}).to_string().as_bytes());
        assert_eq!(seal.open(&format!("{forged}.{tag}")), None);
        assert_eq!(seal.open(body), None);
        assert_eq!(seal.open(&format!("{body}.")), None);
        assert_eq!(seal.open(&"a".repeat(MAX_TOKEN + 1)), None);
        assert_ne!(seal.nonce(), seal.nonce());
    }

    /// RFC 4231's HMAC-SHA-256 test cases 1, 2 and 6 (a key longer than a block), through
    /// the key derivation: the keys replicas derive from a shared file must not change.
    #[test]
    fn hmac_sha256_gives_rfc_4231s_known_answers() {
        let hex = |b: [u8; 32]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let cases: [(&[u8], &[u8], &str); 3] = [
            (&[0x0b; 20], b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, data, mac) in cases {
            assert_eq!(hex(Seal::derived_for(key, data).key), mac);
        }
    }

    /// A token sealed by an earlier build (computed independently: Python's `hmac` and
    /// `base64`) still opens, and the same value seals to the same bytes.
    #[test]
    fn a_token_sealed_by_an_earlier_build_opens() {
        let token = "eyJ0Ijoicm0iLCJ4IjoxfQ.gt4QukhuJ2BVm5EA-7jkl0hkyaYiB8Gtcrhu3-c1F-A";
        let seal = Seal::derived(b"secret");
        assert_eq!(seal.open(token), Some(json!({"t": "rm", "x": 1})));
        assert_eq!(seal.seal(&json!({"t": "rm", "x": 1})), token);
        assert_eq!(seal.open(&token.replace(".gt4Q", ".gt4R")), None, "a changed tag");
        assert_eq!(seal.open(&token[..token.len() - 1]), None, "a short tag");
    }
}
