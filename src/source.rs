//! Source files and positions: where in a manifest a key or value sits.
//!
//! Manifests are deserialized straight from their text (fast path). Only when a
//! diagnostic needs a position is the text parsed a second time into a tree with
//! byte ranges (`jsonc-parser` for JSON, `toml`'s spanned tables for TOML), and
//! the field path of the problem is looked up in it.

use crate::code::Code;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The two manifest syntaxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// `*.tool.json`
    Json,
    /// `*.tool.toml`
    Toml,
}

impl Syntax {
    /// The syntax a manifest file name implies, if it is a manifest at all.
    pub fn of_manifest(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        if name.ends_with(".tool.json") {
            Some(Self::Json)
        } else if name.ends_with(".tool.toml") {
            Some(Self::Toml)
        } else {
            None
        }
    }
}

/// One step of a path into a document: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// A field path such as `command.args.2`, used in messages and for locating.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    /// Parse a dotted path (`policy.timeout_secs`, `command.args.0`).
    pub fn dotted(path: &str) -> Self {
        Self(
            path.split('.')
                .filter(|s| !s.is_empty())
                .map(|s| match s.parse() {
                    Ok(i) => Seg::Index(i),
                    Err(_) => Seg::Key(s.to_owned()),
                })
                .collect(),
        )
    }

    /// This path extended by one key.
    pub fn key(&self, key: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(key.to_owned()));
        p
    }

    /// This path extended by one index.
    pub fn index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(index));
        p
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match seg {
                Seg::Key(k) => f.write_str(k)?,
                Seg::Index(n) => write!(f, "{n}")?,
            }
        }
        Ok(())
    }
}

/// Which part of an object entry to point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The key itself (for unknown keys).
    Key,
    /// The value under the key.
    Value,
}

/// A manifest's text and where it came from.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The file it was read from.
    pub path: PathBuf,
    /// Its full text (a leading `#!` line is blanked, offsets are unchanged).
    pub text: String,
    /// Its syntax.
    pub syntax: Syntax,
    /// Where each line starts, computed on first use.
    line_starts: std::sync::OnceLock<Vec<usize>>,
    /// The key and value range of every field, indexed once a file is looked up often
    /// (None when the text does not parse).
    fields: std::sync::OnceLock<Option<Fields>>,
    /// Lookups so far, to tell when to index.
    lookups: Lookups,
}

/// A count of lookups (a clone starts again from nothing).
#[derive(Debug, Default)]
struct Lookups(std::sync::atomic::AtomicUsize);

impl Clone for Lookups {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// Lookups of a JSON file that scan its text, before its fields are indexed: a file with
/// a diagnostic or two is read once per lookup, building nothing; one with many is
/// indexed, so that each later lookup is a hash lookup per step and the whole stays linear.
const SCANS_BEFORE_INDEX: usize = 4;

/// Where a path leads in a document: the deepest field of its longest prefix that exists.
struct Found {
    /// The field's key range (none for an array element or the root).
    key: Option<Range<usize>>,
    /// Its value's range.
    value: Range<usize>,
    /// How many steps of the path it is.
    depth: usize,
}

impl Found {
    fn range(self, target: Target) -> Range<usize> {
        match (target, self.key) {
            (Target::Key, Some(k)) => k,
            _ => self.value,
        }
    }
}

/// Every field of a document: its key and value ranges, and each field's children by the
/// step that reaches them. Looking up a path walks it one step at a time (a hash lookup
/// per step), so no path is built or hashed per field, and a wide object stays linear.
#[derive(Debug, Clone, Default)]
struct Fields {
    /// Each field's key range (if it has a key) and value range; the root is the first.
    ranges: Vec<(Option<Range<usize>>, Range<usize>)>,
    /// (parent, step) → child. Of two equal keys the last is kept, as serde keeps the
    /// last value of a map: a position points at the value that is used.
    children: std::collections::HashMap<(usize, Seg), usize>,
}

impl Fields {
    /// Add a field under `parent` (None: the root) and return it.
    fn add(&mut self, parent: Option<usize>, seg: Seg, key: Option<Range<usize>>, value: Range<usize>) -> usize {
        let node = self.ranges.len();
        self.ranges.push((key, value));
        if let Some(parent) = parent {
            self.children.insert((parent, seg), node);
        }
        node
    }

    /// The field at the longest prefix of `path` that exists.
    fn find(&self, path: &[Seg]) -> Option<Found> {
        let (node, depth) = self.deepest(path)?;
        let (key, value) = self.ranges[node].clone();
        Some(Found { key, value, depth })
    }

    /// The field at the longest prefix of `path` that exists, and how many steps that is.
    fn deepest(&self, path: &[Seg]) -> Option<(usize, usize)> {
        if self.ranges.is_empty() {
            return None;
        }
        let mut node = 0;
        for (depth, seg) in path.iter().enumerate() {
            match self.children.get(&(node, seg.clone())) {
                Some(&child) => node = child,
                None => return Some((node, depth)),
            }
        }
        Some((node, path.len()))
    }
}

impl SourceFile {
    /// Wrap text read from `path`; a leading `#!` line is blanked so that an
    /// executable manifest (`#!/usr/bin/env -S packs exec`) parses as JSON too.
    pub fn new(path: PathBuf, mut text: String, syntax: Syntax) -> Self {
        if text.starts_with("#!") {
            let end = text.find('\n').unwrap_or(text.len());
            text.replace_range(..end, &" ".repeat(end));
        }
        Self {
            path,
            text,
            syntax,
            line_starts: std::sync::OnceLock::new(),
            fields: std::sync::OnceLock::new(),
            lookups: Lookups::default(),
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let starts = self
            .line_starts
            .get_or_init(|| std::iter::once(0).chain(self.text.match_indices('\n').map(|(i, _)| i + 1)).collect());
        let line = starts.partition_point(|&start| start <= offset);
        let line_start = starts[line - 1];
        (line, self.text[line_start..offset].chars().count() + 1)
    }

    /// The byte range of the key or value at `path`, if the document has it.
    /// An empty path is the whole document.
    pub fn locate(&self, path: &FieldPath, target: Target) -> Option<Range<usize>> {
        let found = self.find(&path.0)?;
        (found.depth == path.0.len()).then(|| found.range(target))
    }

    /// Like [`SourceFile::locate`], falling back to the nearest enclosing field that
    /// exists in the text (`command.args.2` of a one-line `command` string is `command`).
    pub fn locate_nearest(&self, path: &FieldPath, target: Target) -> Option<Range<usize>> {
        let found = self.find(&path.0)?;
        let whole = found.depth == path.0.len();
        Some(found.range(if whole { target } else { Target::Value }))
    }

    /// The field at the longest prefix of `path` that exists in the text (None when the
    /// text does not parse). The first few lookups of a JSON file scan it; after them its
    /// fields are indexed, once.
    fn find(&self, path: &[Seg]) -> Option<Found> {
        use std::sync::atomic::Ordering;
        let scan = self.syntax == Syntax::Json
            && self.fields.get().is_none()
            && self.lookups.0.fetch_add(1, Ordering::Relaxed) < SCANS_BEFORE_INDEX;
        if scan {
            return json_find(&self.text, path);
        }
        self.fields
            .get_or_init(|| match self.syntax {
                Syntax::Json => json_fields(&self.text),
                Syntax::Toml => toml_fields(&self.text),
            })
            .as_ref()?
            .find(path)
    }

    /// The position of `offset` inside the string value at `path`, mapped back
    /// into the file when the string is written without escapes; otherwise the
    /// start of the value.
    pub fn locate_in_string(&self, path: &FieldPath, offset: usize) -> Option<usize> {
        let range = self.locate(path, Target::Value)?;
        let raw = &self.text[range.clone()];
        let quote_len = if raw.starts_with("\"\"\"") || raw.starts_with("'''") { 3 } else { 1 };
        let inner = raw.get(quote_len..raw.len().saturating_sub(quote_len))?;
        let plain = !inner.contains('\\') || raw.starts_with('\'');
        Some(if plain && offset <= inner.len() { range.start + quote_len + offset } else { range.start })
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Deepest nesting [`json_walk`] follows (serde_json, which reads manifests, refuses
/// deeper documents too): a hostile file cannot exhaust the stack.
const MAX_JSON_DEPTH: usize = 128;

/// One step of [`json_walk`] into a document.
enum Step<'t> {
    /// The document itself.
    Root,
    /// An object's member, by its key (decoded).
    Key(std::borrow::Cow<'t, str>),
    /// An array's element.
    Index(usize),
}

impl Step<'_> {
    fn is(&self, seg: &Seg) -> bool {
        match (self, seg) {
            (Self::Key(k), Seg::Key(s)) => k == s,
            (Self::Index(i), Seg::Index(j)) => i == j,
            _ => false,
        }
    }
}

/// What [`json_walk`] meets, in document order.
enum Event<'t> {
    /// A value: its step, key range (members only) and range. For an object or an array
    /// the range is its start only; its end comes with [`Event::Close`].
    Value { step: Step<'t>, key: Option<Range<usize>>, range: Range<usize>, container: bool },
    /// The end of the innermost object or array (the offset after its closing bracket).
    Close(usize),
}

/// Walk a strict JSON text (no comments, trailing commas or single quotes) with
/// `jsonc-parser`'s scanner, telling `visit` each value; None when the text is not strict
/// JSON or nests too deeply. No tree is built.
fn json_walk<'t>(text: &'t str, mut visit: impl FnMut(Event<'t>)) -> Option<()> {
    use jsonc_parser::{Scanner, ScannerOptions};
    let options = ScannerOptions {
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let mut scanner = Scanner::new(text, &options);
    let first = scanner.scan().ok()??;
    json_value(&mut scanner, first, Step::Root, None, &mut visit, 0)?;
    // Nothing may follow the document.
    scanner.scan().ok()?.is_none().then_some(())
}

/// Walk the value that starts with `token` (and everything in it).
fn json_value<'t>(
    scanner: &mut jsonc_parser::Scanner<'t>,
    token: jsonc_parser::tokens::Token<'t>,
    step: Step<'t>,
    key: Option<Range<usize>>,
    visit: &mut impl FnMut(Event<'t>),
    depth: usize,
) -> Option<()> {
    use jsonc_parser::tokens::Token;
    let start = scanner.token_start();
    let close = match token {
        Token::String(_) | Token::Number(_) | Token::Boolean(_) | Token::Null => {
            visit(Event::Value { step, key, range: start..scanner.token_end(), container: false });
            return Some(());
        }
        Token::OpenBrace => Token::CloseBrace,
        Token::OpenBracket => Token::CloseBracket,
        _ => return None,
    };
    if depth >= MAX_JSON_DEPTH {
        return None;
    }
    visit(Event::Value { step, key, range: start..start, container: true });
    let mut next = scanner.scan().ok()??;
    let mut index = 0;
    while next != close {
        if index > 0 {
            // `,` between members, never before the close.
            if next != Token::Comma {
                return None;
            }
            next = scanner.scan().ok()??;
        }
        if close == Token::CloseBrace {
            let Token::String(name) = next else { return None };
            let key = scanner.token_start()..scanner.token_end();
            if scanner.scan().ok()?? != Token::Colon {
                return None;
            }
            let value = scanner.scan().ok()??;
            json_value(scanner, value, Step::Key(name), Some(key), visit, depth + 1)?;
        } else {
            json_value(scanner, next, Step::Index(index), None, visit, depth + 1)?;
        }
        index += 1;
        next = scanner.scan().ok()??;
    }
    visit(Event::Close(scanner.token_end()));
    Some(())
}

/// Every field of a JSON text, indexed.
fn json_fields(text: &str) -> Option<Fields> {
    // About one field per 16 bytes of text (a manifest has one per 30 or so): the map
    // is sized once instead of rehashed as it grows.
    // (At most 65,536 up front: a huge file of padding reserves no gigabyte.)
    let estimate = (text.len() / 16 + 1).min(1 << 16);
    let mut fields =
        Fields { ranges: Vec::with_capacity(estimate), children: std::collections::HashMap::with_capacity(estimate) };
    let mut open: Vec<usize> = Vec::new();
    json_walk(text, |event| match event {
        Event::Value { step, key, range, container } => {
            let seg = match step {
                Step::Root => Seg::Index(0),
                Step::Key(k) => Seg::Key(k.into_owned()),
                Step::Index(i) => Seg::Index(i),
            };
            let node = fields.add(open.last().copied(), seg, key, range);
            if container {
                open.push(node);
            }
        }
        Event::Close(end) => {
            if let Some(node) = open.pop() {
                fields.ranges[node].1.end = end;
            }
        }
    })?;
    Some(fields)
}

/// The field at the longest prefix of `path` in a JSON text, found by one scan that keeps
/// nothing else. Of two equal keys the later is used, as with the index.
fn json_find(text: &str, path: &[Seg]) -> Option<Found> {
    let mut found: Option<Found> = None;
    // Per open object or array: its start and, when the path leads to it, its depth.
    let mut open: Vec<(usize, Option<usize>)> = Vec::new();
    json_walk(text, |event| match event {
        Event::Value { step, key, range, container } => {
            let on_path = match (&step, open.last()) {
                (Step::Root, _) => Some(0),
                (_, Some((_, Some(depth)))) if path.get(*depth).is_some_and(|seg| step.is(seg)) => Some(depth + 1),
                _ => None,
            };
            if let Some(depth) = on_path {
                found = Some(Found { key, value: range.clone(), depth });
            }
            if container {
                open.push((range.start, on_path));
            }
        }
        Event::Close(end) => {
            if let Some((start, Some(depth))) = open.pop()
                && let Some(f) = found.as_mut().filter(|f| f.depth == depth && f.value.start == start)
            {
                f.value.end = end;
            }
        }
    })?;
    found
}

fn toml_fields(text: &str) -> Option<Fields> {
    use toml::de::{DeTable, DeValue};
    fn walk(value: &DeValue<'_>, at: usize, fields: &mut Fields) {
        match value {
            DeValue::Table(table) => {
                for (key, v) in table {
                    let seg = Seg::Key(key.get_ref().to_string());
                    let child = fields.add(Some(at), seg, Some(key.span()), v.span());
                    walk(v.get_ref(), child, fields);
                }
            }
            DeValue::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let child = fields.add(Some(at), Seg::Index(i), None, v.span());
                    walk(v.get_ref(), child, fields);
                }
            }
            _ => {}
        }
    }
    let root = DeTable::parse(text).ok()?;
    let mut fields = Fields::default();
    let at = fields.add(None, Seg::Index(0), None, root.span());
    let table = DeValue::Table(root.into_inner());
    walk(&table, at, &mut fields);
    Some(fields)
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Reported, the tool still loads.
    Warning,
    /// The tool (or file) is skipped.
    Error,
}

/// A problem found in a file, with as precise a position as is known.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Stable kebab-case code, e.g. `unknown-key`.
    pub code: Code,
    /// The file it is about.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column in characters, when known.
    pub column: Option<usize>,
    /// The field path (`policy.timout_secs`), when it is about one field.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when known.
    pub help: Option<String>,
    /// Byte range in the file, when known (for rendering the source line).
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

impl Diagnostic {
    /// A diagnostic about a whole file (no position).
    pub fn file(severity: Severity, code: Code, file: &Path, message: impl Into<String>) -> Self {
        Self {
            severity,
            code,
            file: file.to_owned(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
            help: None,
            span: None,
        }
    }

    /// A diagnostic about the field at `path`, located in `src`.
    pub fn at(
        src: &SourceFile,
        severity: Severity,
        code: Code,
        path: &FieldPath,
        target: Target,
        message: impl Into<String>,
    ) -> Self {
        let range = src.locate_nearest(path, target);
        let mut d = Self::file(severity, code, &src.path, message).at_offset(src, range.as_ref().map(|r| r.start));
        d.span = range;
        if !path.0.is_empty() {
            d.field = Some(path.to_string());
        }
        d
    }

    /// Set the position from a byte offset in `src`.
    pub fn at_offset(mut self, src: &SourceFile, offset: Option<usize>) -> Self {
        // An offset from a parser may fall inside a multi-byte character (a text cut in
        // the middle of one): point at the character's start.
        if let Some(offset) = offset.map(|o| floor_char_boundary(&src.text, o.min(src.text.len()))) {
            let (line, column) = src.line_col(offset);
            self.line = Some(line);
            self.column = Some(column);
            self.span = Some(offset..offset);
        }
        self
    }

    /// Add a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Turn into a warning.
    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{sev}[{}]: {}", self.code, self.file.display())?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, " (help: {help})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str, syntax: Syntax) -> SourceFile {
        SourceFile::new("t".into(), text.into(), syntax)
    }

    #[test]
    fn locates_json_keys_and_values() {
        let s = src("{\n  \"policy\": {\n    \"timout_secs\": 5\n  },\n  \"args\": [\"a\", \"b\"]\n}", Syntax::Json);
        let r = s.locate(&FieldPath::dotted("policy.timout_secs"), Target::Key).unwrap();
        assert_eq!(s.line_col(r.start), (3, 5));
        let r = s.locate(&FieldPath::dotted("args.1"), Target::Value).unwrap();
        assert_eq!(&s.text[r], "\"b\"");
        assert!(s.locate(&FieldPath::dotted("nope"), Target::Key).is_none());
    }

    #[test]
    fn locates_toml_keys_and_values() {
        let s = src("name = \"x\"\n[policy]\ntimout_secs = 5\n", Syntax::Toml);
        let r = s.locate(&FieldPath::dotted("policy.timout_secs"), Target::Key).unwrap();
        assert_eq!(s.line_col(r.start), (3, 1));
        let r = s.locate(&FieldPath::dotted("name"), Target::Value).unwrap();
        assert_eq!(&s.text[r], "\"x\"");
    }

    #[test]
    fn nearest_enclosing_field_and_last_of_equal_keys() {
        let s = src("{\"a\": {\"x\": 1}, \"a\": {\"y\": 2}, \"c\": \"one line\"}", Syntax::Json);
        // serde keeps the last value of a map's equal keys: a position points there.
        let r = s.locate(&FieldPath::dotted("a"), Target::Key).unwrap();
        assert_eq!(r.start, 16);
        assert!(s.locate(&FieldPath::dotted("a.y"), Target::Value).is_some());
        assert!(s.locate(&FieldPath::dotted("a.x"), Target::Value).is_none());
        let r = s.locate_nearest(&FieldPath::dotted("c.2.z"), Target::Key).unwrap();
        assert_eq!(&s.text[r], "\"one line\"");
        let r = s.locate_nearest(&FieldPath::dotted("a.y"), Target::Key).unwrap();
        assert_eq!(&s.text[r], "\"y\"");
        // An empty path is the whole document; a path that is not there falls back to it.
        assert_eq!(s.locate(&FieldPath::default(), Target::Value).unwrap(), 0..s.text.len());
        assert_eq!(s.locate_nearest(&FieldPath::dotted("nope"), Target::Key).unwrap(), 0..s.text.len());
        assert!(src("{", Syntax::Json).locate_nearest(&FieldPath::dotted("a"), Target::Key).is_none());
    }

    #[test]
    fn every_field_of_a_wide_object_is_located() {
        // A lookup is a hash lookup per step, not a scan of the siblings (the benchmark of
        // `lint` shows what that costs): 20,000 keys, each located at its own value.
        let n = 20_000;
        let body: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {{\"v\": [{i}]}}")).collect();
        let s = src(&format!("{{{}}}", body.join(",\n")), Syntax::Json);
        for i in 0..n {
            let r = s.locate(&FieldPath::dotted(&format!("k{i}.v.0")), Target::Value).unwrap();
            assert_eq!(s.text[r].parse::<usize>().unwrap(), i);
        }
        // The text was scanned by the first lookups only, then indexed once: thousands of
        // diagnostics in one file cost one pass each, not one scan each (lint's rendering was
        // quadratic once).
        assert_eq!(s.lookups.0.load(std::sync::atomic::Ordering::Relaxed), SCANS_BEFORE_INDEX + 1);
        assert!(s.fields.get().is_some_and(Option::is_some), "the fields were indexed");
    }

    #[test]
    fn only_strict_json_has_positions_and_depth_is_bounded() {
        // Escaped keys are matched decoded; nested arrays and objects end where they close.
        let s = src("{\"a\\u0062\": [1, {\"c\": [true, null]}], \"d\": -1.5e3}", Syntax::Json);
        let r = s.locate(&FieldPath::dotted("ab.1.c.1"), Target::Value).unwrap();
        assert_eq!(&s.text[r], "null");
        let r = s.locate(&FieldPath::dotted("ab.1"), Target::Value).unwrap();
        assert_eq!(&s.text[r], "{\"c\": [true, null]}");
        assert_eq!(&s.text[s.locate(&FieldPath::dotted("d"), Target::Value).unwrap()], "-1.5e3");
        // What serde_json refuses has no positions (and locating falls back to the file).
        for text in
            ["{\"a\": 1,}", "[1, 2,]", "{\"a\": 1} 2", "{\"a\" 1}", "// c\n{}", "{'a': 1}", "[1 2]", "{\"a\": 0x1}"]
        {
            assert!(src(text, Syntax::Json).locate(&FieldPath::default(), Target::Value).is_none(), "{text}");
        }
        // A hostile nesting depth is refused rather than followed down the stack.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(src(&deep, Syntax::Json).locate(&FieldPath::dotted("0"), Target::Value).is_none());
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(src(&ok, Syntax::Json).locate(&FieldPath::dotted("0.0.0"), Target::Value).is_some());
    }

    #[test]
    fn a_scan_finds_what_the_index_finds() {
        // The first lookups of a file scan it; later ones use the index: they must agree,
        // duplicate keys, missing steps and containers included.
        let docs = [
            "{\"a\": {\"b\": 1, \"x\": {}}, \"a\": {\"b\": [2, {\"c\": 3}]}, \"d\": [[], [4]]}",
            "[{\"k\": \"v\"}, {\"k\": {\"k\": null}}, 5]",
            "{\"a\": {\"b\": {\"c\": 1}}, \"a\": {\"b\": 2}}",
            "\"just a string\"",
        ];
        let steps = ["a", "b", "c", "d", "k", "x", "0", "1", "2"];
        for doc in docs {
            let fields = json_fields(doc).unwrap();
            // Every path of up to four of these steps.
            let mut level: Vec<Vec<&str>> = vec![vec![]];
            let mut paths = level.clone();
            for _ in 0..4 {
                level = level.iter().flat_map(|p| steps.iter().map(move |s| [p.as_slice(), &[*s]].concat())).collect();
                paths.extend(level.iter().cloned());
            }
            for p in paths {
                let path = FieldPath::dotted(&p.join("."));
                let scanned = json_find(doc, &path.0).unwrap();
                let indexed = fields.find(&path.0).unwrap();
                let show = |f: &Found| (f.key.clone(), f.value.clone(), f.depth);
                assert_eq!(show(&scanned), show(&indexed), "{doc} at {path}");
            }
        }
    }

    #[test]
    fn shebang_is_blanked_without_moving_offsets() {
        let s = src("#!/usr/bin/env -S packs exec\n{\"a\": 1}", Syntax::Json);
        let r = s.locate(&FieldPath::dotted("a"), Target::Value).unwrap();
        assert_eq!(s.line_col(r.start), (2, 7));
    }

    #[test]
    fn position_inside_a_string() {
        let s = src("{\"args\": [\"x {{bad\"]}", Syntax::Json);
        let off = s.locate_in_string(&FieldPath::dotted("args.0"), 2).unwrap();
        assert_eq!(&s.text[off..off + 5], "{{bad");
    }
}
