//! The text of `notifications/progress`: a tool's output as it arrives, a chunk at a time, with
//! a character split between two reads kept whole.
//!
//! A read ends wherever the pipe's bytes end, so a chunk may stop inside a UTF-8 character (a
//! tool's one write larger than the read buffer, or two writes). Each chunk decoded alone
//! would show such a character as two `U+FFFD`; the incomplete end of a chunk (at most 3 bytes)
//! is held back and goes before the next chunk of the same stream. Bytes that are invalid
//! wherever they are still read as `U+FFFD`, as before.

use std::sync::Mutex;

use crate::runner::Stream;

/// The bytes each stream's last chunk ended with that do not yet make a character.
#[derive(Debug, Default)]
pub(super) struct ProgressText {
    held: Mutex<[Vec<u8>; 2]>,
}

impl ProgressText {
    /// The text of `chunk` of `stream`: the bytes held from that stream's last chunk, then
    /// `chunk`, up to an incomplete character at its end (held for the next chunk).
    pub(super) fn text(&self, stream: Stream, chunk: &[u8]) -> String {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = &mut held[usize::from(stream == Stream::Stderr)];
        held.extend_from_slice(chunk);
        let cut = complete_up_to(held);
        let text = String::from_utf8_lossy(&held[..cut]).into_owned();
        held.drain(..cut);
        text
    }
}

/// Where the last complete character of `bytes` ends: before an incomplete UTF-8 sequence at its
/// very end (a lead byte and fewer continuation bytes than it announces), else at its end.
fn complete_up_to(bytes: &[u8]) -> usize {
    // The lead byte of the last character starts at most 3 bytes before the end.
    let start = bytes.len().saturating_sub(3);
    let Some(lead) = (start..bytes.len()).rev().find(|&i| bytes[i] & 0xC0 != 0x80) else {
        return bytes.len();
    };
    match std::str::from_utf8(&bytes[lead..]) {
        // An incomplete sequence: not invalid (yet), only cut short.
        Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => lead,
        _ => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_chunks_arrives_whole() {
        let text = "a é € 𝄞 z".as_bytes();
        // Every split point, every stream: the texts joined are the text.
        for cut in 0..=text.len() {
            let progress = ProgressText::default();
            let (a, b) = text.split_at(cut);
            let joined = progress.text(Stream::Stdout, a) + &progress.text(Stream::Stdout, b);
            assert_eq!(joined, "a é € 𝄞 z", "cut at {cut}");
        }
        // One byte at a time.
        let progress = ProgressText::default();
        let joined: String = text.iter().map(|b| progress.text(Stream::Stderr, &[*b])).collect();
        assert_eq!(joined, "a é € 𝄞 z");
    }

    #[test]
    fn the_streams_hold_their_own_bytes() {
        let progress = ProgressText::default();
        let e = "é".as_bytes();
        assert_eq!(progress.text(Stream::Stdout, &e[..1]), "");
        assert_eq!(progress.text(Stream::Stderr, b"x"), "x");
        assert_eq!(progress.text(Stream::Stdout, &e[1..]), "é");
    }

    #[test]
    fn invalid_bytes_are_replaced_not_held() {
        let progress = ProgressText::default();
        // A continuation byte with no lead, a lead followed by a non-continuation, a byte never
        // valid: none waits for more.
        assert_eq!(progress.text(Stream::Stdout, b"a\x80"), "a\u{FFFD}");
        assert_eq!(progress.text(Stream::Stdout, b"\xC3("), "\u{FFFD}(");
        assert_eq!(progress.text(Stream::Stdout, b"\xFF"), "\u{FFFD}");
        assert_eq!(progress.text(Stream::Stdout, b"ok"), "ok");
        // A 4-byte lead with two continuations is held; a third completes it.
        assert_eq!(progress.text(Stream::Stdout, b"\xF0\x9D\x84"), "");
        assert_eq!(progress.text(Stream::Stdout, b"\x9E!"), "\u{1D11E}!");
    }

    #[test]
    fn complete_up_to_finds_the_cut() {
        assert_eq!(complete_up_to(b""), 0);
        assert_eq!(complete_up_to(b"abc"), 3);
        assert_eq!(complete_up_to("é".as_bytes()), 2);
        assert_eq!(complete_up_to(&"é".as_bytes()[..1]), 0);
        assert_eq!(complete_up_to(b"ab\xE2\x82"), 2);
        assert_eq!(complete_up_to(b"ab\x80\x80\x80"), 5);
    }
}
