//! Secret masking: every secret value becomes `***` in what a call shows, returns,
//! streams or records.

/// Replace every secret in `text` with `***`.
pub(crate) fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// Masks secrets in a stream that arrives in chunks: a secret split across two chunks
/// is still caught, because the last `longest secret - 1` bytes wait for the next chunk.
pub(crate) struct Masker {
    secrets: Vec<Vec<u8>>,
    held: Vec<u8>,
}

impl Masker {
    pub(crate) fn new(secrets: &[String]) -> Self {
        Self {
            secrets: secrets.iter().filter(|s| !s.is_empty()).map(|s| s.as_bytes().to_vec()).collect(),
            held: Vec::new(),
        }
    }

    /// Add a chunk; returns what can be shown now, masked.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let keep = self.secrets.iter().map(Vec::len).max().unwrap_or(1).saturating_sub(1);
        let mut cut = self.held.len().saturating_sub(keep);
        // A secret that starts before the cut ends inside what is held: release all of it.
        for s in &self.secrets {
            for start in 0..cut.min(self.held.len()) {
                if self.held[start..].starts_with(s) {
                    cut = cut.max(start + s.len());
                }
            }
        }
        let ready: Vec<u8> = self.held.drain(..cut).collect();
        self.mask(&ready)
    }

    /// Everything still held, masked.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.held);
        self.mask(&rest)
    }

    fn mask(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        'outer: while i < bytes.len() {
            for s in &self.secrets {
                if bytes[i..].starts_with(s) {
                    out.extend_from_slice(b"***");
                    i += s.len();
                    continue 'outer;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        out
    }
}
