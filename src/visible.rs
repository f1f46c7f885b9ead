//! Text shown to a person: every character that could move the cursor, erase, reorder
//! or hide text is written as a visible escape, so what a person reads (and approves)
//! is what the bytes say.
//!
//! Escapes use the spelling of bash's `$'…'` quoting: `\r`, `\n`, `\t`, `\x1b`, `\u202e`,
//! `\U000e0041`. A command line is shown with each argument that needs one as `$'…'`, so
//! it can be read exactly and pasted into bash to give the same argv.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;

/// Whether `c` is shown as an escape: C0 and C1 controls, DEL, and the characters that
/// change how text around them is displayed without being seen themselves (bidirectional
/// overrides and isolates, zero-width characters, line and paragraph separators, soft
/// hyphen, invisible fillers, variation selectors, tag characters, the byte-order mark,
/// interlinear annotation marks).
pub(crate) fn needs_escape(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}' | '\u{fff9}'..='\u{fffb}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
}

fn escape_char(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if u32::from(c) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if u32::from(c) <= 0xffff => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\U{:08x}", u32::from(c));
        }
    }
}

/// Text for a terminal (a description, a help page): every character [`needs_escape`]
/// says is escaped, except newlines and tabs, which lay the text out.
pub(crate) fn prose(text: &str) -> Cow<'_, str> {
    escaped(text, |c| needs_escape(c) && c != '\n' && c != '\t')
}

/// Text that must stay on one line of a terminal (a setting and its value): every character
/// [`needs_escape`] says is escaped, newlines and tabs too, so no value starts a line of its own.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    escaped(text, needs_escape)
}

/// `text` with each character `escape` names written as its escape.
fn escaped(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escape(c) {
            escape_char(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One argument as a person reads it (and bash would take it): as it is when it is a
/// plain word, in single quotes when the shell would split or expand it, as `$'…'` with
/// escapes when it holds a character [`needs_escape`] names.
pub(crate) fn word(arg: &str) -> Cow<'_, str> {
    if !arg.chars().any(needs_escape) {
        // Only NUL makes try_quote fail, and NUL needs an escape.
        return shlex::try_quote(arg).unwrap_or(Cow::Borrowed(arg));
    }
    let mut out = String::with_capacity(arg.len() + 8);
    out.push_str("$'");
    arg.chars().for_each(|c| quoted_char(c, &mut out));
    out.push('\'');
    Cow::Owned(out)
}

/// A [`word`] of bytes that need not be UTF-8 (a path, a directory): a byte that is not
/// part of a character is written `\xNN`, as bash reads it back, so two names that differ
/// in such a byte never look the same.
pub(crate) fn os_word(arg: &OsStr) -> Cow<'_, str> {
    if let Some(text) = arg.to_str() {
        return word(text);
    }
    let mut out = String::with_capacity(arg.len() + 8);
    out.push_str("$'");
    for chunk in arg.as_bytes().utf8_chunks() {
        chunk.valid().chars().for_each(|c| quoted_char(c, &mut out));
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

/// One character inside `$'…'`.
fn quoted_char(c: char, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\'' => out.push_str("\\'"),
        c if needs_escape(c) => escape_char(c, out),
        c => out.push(c),
    }
}

/// A command line as a person reads it: each argument a [`word`], joined by spaces.
pub(crate) fn command_line(argv: &[String]) -> String {
    argv.iter().map(|a| word(a)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_and_shell_words_are_quoted() {
        assert_eq!(word("src/main.rs"), "src/main.rs");
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word("$(id)"), "'$(id)'");
        assert_eq!(word(r"C:\dir"), r#""C:\\dir""#);
    }

    #[test]
    fn invisible_and_moving_characters_are_escaped() {
        assert_eq!(word("ok\rrm -rf ~"), r"$'ok\rrm -rf ~'");
        assert_eq!(word("\u{1b}[2Kx"), r"$'\x1b[2Kx'");
        assert_eq!(word("txt.\u{202e}exe"), r"$'txt.\u202eexe'");
        assert_eq!(word("a\u{0}b"), r"$'a\x00b'");
        assert_eq!(word("it's\n\\"), r"$'it\'s\n\\'");
        assert_eq!(word("\u{85}\u{200b}\u{e0041}"), r"$'\u0085\u200b\U000e0041'");
        assert_eq!(word("\u{7f}"), r"$'\x7f'");
    }

    #[test]
    fn prose_keeps_its_lines() {
        assert_eq!(prose("one\ntwo\tcols"), "one\ntwo\tcols");
        assert_eq!(prose("title\u{1b}]0;pwned\u{7}\r\n"), r"title\x1b]0;pwned\x07\r".to_owned() + "\n");
        assert!(matches!(prose("plain é ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_command_line_is_its_words_and_the_first_c1_control_an_escape_of_four_digits() {
        let argv = ["ls".to_owned(), "a b".to_owned(), "\u{1b}x".to_owned(), "\u{80}".to_owned()];
        assert_eq!(command_line(&argv), r"ls 'a b' $'\x1bx' $'\u0080'");
        assert_eq!(word("\u{7f}\u{80}"), r"$'\x7f\u0080'");
    }

    #[test]
    fn a_line_stays_one_line() {
        assert_eq!(line("deny-read: /a\n  /forged\t(flag)"), r"deny-read: /a\n  /forged\t(flag)");
        assert_eq!(line("x\u{1b}]0;t\u{7}"), r"x\x1b]0;t\x07");
        assert!(matches!(line("plain é ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_name_that_is_not_utf8_shows_each_stray_byte_and_bash_reads_it_back() {
        use std::os::unix::ffi::OsStrExt;
        let name = OsStr::from_bytes(b"/tmp/ws\xff'\x1b\xc3 \xe2\x80\xae\xe2\x80x");
        let shown = os_word(name);
        assert_eq!(shown, r"$'/tmp/ws\xff\'\x1b\xc3 \u202e\xe2\x80x'");
        assert_eq!(os_word(OsStr::new("a b\u{1b}")), word("a b\u{1b}"));
        // Pasted into bash, it is the same bytes again (in any locale: no `\u` escape).
        let name = OsStr::from_bytes(b"/tmp/ws\xff'\x1b\xc3 \xe2\x80x\\");
        let shown = os_word(name);
        let out = std::process::Command::new("bash").args(["-c", &format!("printf %s {shown}")]).output().unwrap();
        assert_eq!(out.stdout, name.as_bytes(), "{shown}");
    }

    #[test]
    fn every_control_character_is_escaped() {
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let shown = word(&c.to_string()).into_owned();
            assert!(shown.chars().all(|s| !s.is_control()), "{c:?} shown as {shown:?}");
        }
    }
}
