//! Secret masking: every secret value becomes `***` in what a call shows, returns,
//! streams or records.
//!
//! A secret is masked in the forms packs itself writes it (as is, URL-encoded by
//! `{{urlencode secret.X}}`, JSON-escaped by `{{json secret.X}}`), the longest match
//! first, in one pass over the text (Aho-Corasick: linear in the text's size, whatever
//! the number of secrets). Text that was cut (the stdout kept under `max_output_bytes`,
//! the tail kept of stderr) loses a secret cut at its edge too. A stream ([`Masker`]) holds
//! back only an end that could begin a secret, until the next chunk shows what it is.

use aho_corasick::{AhoCorasick, MatchKind};

/// What replaces a secret.
const MASK: &str = "***";

/// The secrets of one call, ready to mask text.
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets {
    /// Every form of every secret, longest first.
    forms: Vec<String>,
    /// The bytes a form begins with, a bit each.
    firsts: [u64; 4],
    matcher: Option<AhoCorasick>,
}

impl Secrets {
    /// The secrets whose values are `values` (empty values are ignored).
    pub(crate) fn new(values: &[String]) -> Self {
        let mut forms: Vec<String> = values
            .iter()
            .filter(|v| !v.is_empty())
            .flat_map(|v| {
                let json = serde_json::to_string(v).unwrap_or_default();
                let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
                [v.clone(), crate::template::urlencode(v), json]
            })
            .filter(|f| !f.is_empty())
            .collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        let matcher = (!forms.is_empty())
            .then(|| AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&forms).ok())
            .flatten();
        let mut firsts = [0; 4];
        for &b in forms.iter().filter_map(|f| f.as_bytes().first()) {
            firsts[usize::from(b / 64)] |= 1 << (b % 64);
        }
        Self { forms, firsts, matcher }
    }

    /// No secret to mask.
    pub(crate) fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// The longest form, in bytes.
    fn longest(&self) -> usize {
        self.forms.first().map_or(0, String::len)
    }

    /// The length of the longest end of `text` that could begin a secret (a proper prefix
    /// of one of its forms); 0 when none could. Only positions holding a byte some form
    /// begins with are compared, so ordinary text costs one look per byte of the last
    /// `longest form - 1`.
    fn beginning_at_end(&self, text: &[u8]) -> usize {
        let from = text.len().saturating_sub(self.longest().saturating_sub(1));
        (from..text.len())
            .find(|&p| {
                let (b, end) = (text[p], &text[p..]);
                self.firsts[usize::from(b / 64)] & (1 << (b % 64)) != 0
                    && self.forms.iter().any(|f| f.len() > end.len() && f.as_bytes().starts_with(end))
            })
            .map_or(0, |p| text.len() - p)
    }

    /// `text` with every secret replaced by `***`.
    pub(crate) fn mask(&self, text: &str) -> String {
        match &self.matcher {
            Some(m) => m.replace_all(text, &vec![MASK; self.forms.len()]),
            None => text.to_owned(),
        }
    }

    /// `bytes` with every secret replaced by `***`.
    pub(crate) fn mask_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.matcher {
            Some(m) => m.replace_all_bytes(bytes, &vec![MASK.as_bytes(); self.forms.len()]),
            None => bytes.to_vec(),
        }
    }

    /// Like [`Secrets::mask_bytes`] for text that was cut after its end (a prefix of
    /// what the tool wrote): a secret's beginning at the end is masked too.
    pub(crate) fn mask_cut_end(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = self.mask_bytes(bytes);
        if let Some(len) = self.forms.iter().filter_map(|f| partial_end(&out, f.as_bytes())).max() {
            out.truncate(out.len() - len);
            out.extend_from_slice(MASK.as_bytes());
        }
        out
    }

    /// Like [`Secrets::mask_bytes`] for text that was cut before its start (the tail of
    /// what the tool wrote): a secret's end at the start is masked too.
    pub(crate) fn mask_cut_start(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = self.mask_bytes(bytes);
        if let Some(len) = self.forms.iter().filter_map(|f| partial_start(&out, f.as_bytes())).max() {
            out.splice(..len, MASK.bytes());
        }
        out
    }
}

/// The length of the longest proper prefix of `secret` that `text` ends with.
fn partial_end(text: &[u8], secret: &[u8]) -> Option<usize> {
    (1..secret.len()).rev().find(|&n| text.ends_with(&secret[..n]))
}

/// The length of the longest proper suffix of `secret` that `text` starts with.
fn partial_start(text: &[u8], secret: &[u8]) -> Option<usize> {
    (1..secret.len()).rev().find(|&n| text.starts_with(&secret[secret.len() - n..]))
}

/// Masks secrets in a stream that arrives in chunks: a secret split across two chunks
/// is still caught, because the end of a chunk that could begin a secret (the longest
/// suffix that is a proper prefix of one of its forms) waits for the next chunk. Anything
/// else comes out at once: a line that ends in a newline is shown whole, as it arrives.
pub(crate) struct Masker<'s> {
    secrets: &'s Secrets,
    held: Vec<u8>,
}

impl<'s> Masker<'s> {
    pub(crate) fn new(secrets: &'s Secrets) -> Self {
        Self { secrets, held: Vec::new() }
    }

    /// Add a chunk; returns what can be shown now, masked.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let mut cut = self.held.len() - self.secrets.beginning_at_end(&self.held);
        // A secret that starts before the cut ends inside what is held (the held suffix lies
        // within it): release all of it. No longer one can start there, or the suffix from
        // its start would be a prefix of it, and kept.
        if let Some(m) = &self.secrets.matcher {
            for found in m.find_iter(&self.held) {
                if found.start() < cut {
                    cut = cut.max(found.end());
                } else {
                    break;
                }
            }
        }
        let ready: Vec<u8> = self.held.drain(..cut).collect();
        self.secrets.mask_bytes(&ready)
    }

    /// Everything still held, masked.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.held);
        self.secrets.mask_bytes(&rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(values: &[&str]) -> Secrets {
        Secrets::new(&values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_longest_secret_wins_and_encoded_forms_are_masked() {
        let s = secrets(&["abc", "abcdef", "p@ss w\"rd"]);
        assert_eq!(s.mask("x abcdef y abc"), "x *** y ***");
        assert_eq!(s.mask("url=p%40ss%20w%22rd json=p@ss w\\\"rd raw=p@ss w\"rd"), "url=*** json=*** raw=***");
    }

    #[test]
    fn a_secret_cut_at_an_edge_is_masked() {
        let s = secrets(&["hunter22"]);
        assert_eq!(s.mask_cut_end(b"token: hunt"), b"token: ***");
        assert_eq!(s.mask_cut_end(b"token: hunter22 and h"), b"token: *** and ***");
        assert_eq!(s.mask_cut_start(b"er22 was the key"), b"*** was the key");
        assert_eq!(s.mask_cut_end(b"nothing here"), b"nothing here");
    }

    #[test]
    fn streaming_masks_across_chunks() {
        let s = secrets(&["hunter22"]);
        let mut m = Masker::new(&s);
        let mut out = m.push(b"key=hun");
        out.extend(m.push(b"ter22 done"));
        out.extend(m.finish());
        assert_eq!(out, b"key=*** done");
    }

    /// What a masker shows after each of `chunks`, then at the end.
    fn streamed(s: &Secrets, chunks: &[&str]) -> Vec<String> {
        let mut m = Masker::new(s);
        let mut shown: Vec<String> = chunks.iter().map(|c| String::from_utf8(m.push(c.as_bytes())).unwrap()).collect();
        shown.push(String::from_utf8(m.finish()).unwrap());
        shown
    }

    #[test]
    fn streaming_holds_back_only_what_could_begin_a_secret() {
        let s = secrets(&["hunter22"]);
        // Nothing that could begin the secret: each chunk comes out whole, at once.
        assert_eq!(streamed(&s, &["deploying main\n", "accepted\n"]), ["deploying main\n", "accepted\n", ""]);
        assert_eq!(streamed(&s, &["token hunter22 accepted\n"]), ["token *** accepted\n", ""]);
        // A possible beginning waits; if the rest never comes, it is shown as it was.
        assert_eq!(streamed(&s, &["key=hun", "ter22 done"]), ["key=", "*** done", ""]);
        assert_eq!(streamed(&s, &["key=hun", "gry\n"]), ["key=", "hungry\n", ""]);
        assert_eq!(streamed(&s, &["ends with h"]), ["ends with ", "h"]);
        // Split one byte at a time, the secret is still masked.
        let text = "a hunter2 hunter22 h\n";
        let chunks: Vec<String> = text.chars().map(String::from).collect();
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(streamed(&s, &chunks).concat(), "a hunter2 *** h\n");
    }

    #[test]
    fn streaming_waits_for_the_longest_form_a_held_end_could_begin() {
        // "abc" is a secret and begins the longer "abcdef": it waits to see which it is.
        let s = secrets(&["abc", "abcdef"]);
        assert_eq!(streamed(&s, &["x abc", "def y"]), ["x ", "*** y", ""]);
        assert_eq!(streamed(&s, &["x abc", " y"]), ["x ", "*** y", ""]);
        // A secret whose end could begin it again ("abab" ends with "ab"): released whole.
        let s = secrets(&["abab"]);
        assert_eq!(streamed(&s, &["x abab", "ab"]), ["x ***", "", "ab"]);
        assert_eq!(streamed(&s, &["x abab", "ab", "ab\n"]), ["x ***", "", "***\n", ""]);
        // Encoded forms count too: "p%40" could begin the URL-encoded "p@ss".
        let s = secrets(&["p@ss"]);
        assert_eq!(streamed(&s, &["url=p%4", "0ss\n"]), ["url=", "***\n", ""]);
    }

    #[test]
    fn a_stream_shows_what_masking_the_whole_text_shows_however_it_is_split() {
        let s = secrets(&["abc", "abcdef", "abab", "p@ss"]);
        for text in ["x abcdef abc ababab abcde p%40ss p@s", "abababcabcdefabc", "ab\nabc\nabcd"] {
            let whole = s.mask(text);
            for i in 0..=text.len() {
                for j in i..=text.len() {
                    let shown = streamed(&s, &[&text[..i], &text[i..j], &text[j..]]).concat();
                    assert_eq!(shown, whole, "{text:?} split at {i} and {j}");
                }
            }
        }
    }

    #[test]
    fn a_stream_of_near_misses_is_scanned_a_bounded_number_of_times() {
        // Every byte is a near-miss. Masking text is one Aho-Corasick pass (linear by the
        // algorithm); what a stream could make quadratic is what it holds back and scans
        // again with the next chunk: that stays under one secret's length, whatever came.
        let s = secrets(&["aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaac"]);
        let text = "a".repeat(1_000_000);
        assert_eq!(s.mask(&text), text);
        let mut m = Masker::new(&s);
        let (mut shown, mut scanned) = (Vec::new(), 0);
        for chunk in text.as_bytes().chunks(4096) {
            scanned += m.held.len() + chunk.len();
            shown.extend(m.push(chunk));
            assert!(m.held.len() < s.longest(), "held {} bytes", m.held.len());
        }
        shown.extend(m.finish());
        assert_eq!(shown, text.as_bytes());
        let chunks = text.len().div_ceil(4096);
        assert!(scanned <= text.len() + chunks * s.longest(), "scanned {scanned} bytes of {}", text.len());
    }

    #[test]
    fn a_whole_secret_at_the_end_of_a_chunk_comes_out_at_once_when_no_longer_one_could_follow() {
        // "xyz" is whole, and begins no other form: nothing waits for the next chunk.
        let s = secrets(&["xyz", "abcdefgh"]);
        assert_eq!(streamed(&s, &["1 xyz"]), ["1 ***", ""]);
        assert_eq!(streamed(&s, &["1 xyz", " abc"]), ["1 ***", " ", "abc"]);
    }
}
