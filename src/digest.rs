//! Digests of values: canonical JSON and SHA-256, as lock files pin tools and approval
//! tickets bind a call's arguments (the library needs them without the `lock` feature).

use serde_json::Value;

/// `sha256:` and the lowercase hex digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = hmac_sha256::Hash::hash(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// `v` as canonical JSON: object keys sorted, no whitespace.
pub fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2's examples (appendix B): lock files and tickets written by any earlier build
    /// hold these bytes, so a change of the SHA-256 implementation must give them again.
    #[test]
    fn sha256_gives_the_standards_known_answers() {
        let cases: [(&[u8], &str); 3] = [
            (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (input, hex) in cases {
            assert_eq!(sha256(input), format!("sha256:{hex}"), "{:?}", String::from_utf8_lossy(input));
        }
        let million = vec![b'a'; 1_000_000];
        assert_eq!(sha256(&million), "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = serde_json::json!({"b": [{"z": 1, "a": 2}], "a": null});
        assert_eq!(canonical(&v), r#"{"a":null,"b":[{"a":2,"z":1}]}"#);
    }
}
