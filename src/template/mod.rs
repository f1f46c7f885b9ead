//! Templates: packs' placeholders on top of a subset of Handlebars.
//!
//! A template is Handlebars (the subset docs/MANIFEST.md documents, parsed and rendered
//! by [`parse`] and [`render`], packs' own code) with these additions, translated before
//! parsing:
//! - `{{p}}` renders a value the packs way (strings verbatim, numbers as JSON,
//!   objects and arrays as compact JSON, absent as empty), with no HTML escaping;
//! - `{{p:default}}` takes an inline default when the call gives no value;
//! - `{{context.url}}` (and the other context keys) read the caller's context;
//! - `{{env.NAME}}` reads packs' own environment (operator configuration, such
//!   as an API base URL the model must not choose) and `{{secret.NAME}}` reads a
//!   credential from it: a missing secret stops the call, and secret values are
//!   masked wherever packs shows a command or a result;
//! - `{{json v}}` renders a value as JSON (a string with quotes and escapes),
//!   for building request bodies; `{{urlencode v}}` percent-encodes it for a URL.
//!
//! Both are rewritten to the `__v` helper, which resolves the value order: the
//! call's value, then the inline default, then the parameter's `default`.
//! Every name a template uses is checked against the declared parameters when
//! the template is parsed, so a typo is a load error, not an empty argument.

mod parse;
mod render;

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use render::Sink;

/// Why a template did not render (a missing secret, an unknown helper, the size cap).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct RenderError {
    message: String,
}

impl RenderError {
    fn new(message: String) -> Self {
        Self { message }
    }

    /// What went wrong.
    pub(crate) fn reason(&self) -> &str {
        &self.message
    }
}

/// The context keys a template may read as `{{context.KEY}}`.
pub(crate) const CONTEXT_KEYS: &[&str] = &["url", "selection", "clipboard", "file", "cwd", "transcript"];

/// Key under which the render data holds the values the call (or context) gave: not an
/// identifier, so no parameter has it.
const GIVEN: &str = "packs:given";

/// A name a template reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Ref {
    /// A declared parameter.
    Param(String),
    /// A context key (`context.url` → `url`).
    Context(String),
    /// A variable of packs' environment (`env.NAME`).
    Env(String),
    /// A secret from packs' environment (`secret.NAME`).
    Secret(String),
}

/// A problem in a template, with the byte offset inside the template string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct TemplateError {
    /// Byte offset in the template source.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

/// Where the first character of a rendered template came from, when not from the
/// manifest's own text: packs refuses a call value that would start an argv element
/// with `-` (argv rule 7), whatever the element's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lead {
    /// The value of a declared parameter (`{{p}}`, `{{json p}}`, `{{urlencode p}}`).
    Param(String),
    /// A context value (`{{context.selection}}` → `selection`).
    Context(String),
    /// A value a block reads (`{{this}}` in `{{#each}}`, `{{lookup ...}}`): one of the
    /// template's parameters, which one is not known.
    Block,
}

/// A compiled template.
///
/// Most templates are text and plain placeholders (`--max-count={{n}}`); they are
/// kept as pieces and rendered directly. Templates with blocks or helpers are
/// parsed by [`parse`] (once per text, see [`compile`]).
#[derive(Debug, Clone)]
pub(crate) struct Template {
    source: String,
    body: Body,
    refs: Vec<Ref>,
    bare: Vec<String>,
    placeholder: Option<String>,
}

#[derive(Debug, Clone)]
enum Body {
    Pieces(Vec<Piece>),
    /// Translated source, compiled by [`Template::check`] or on first render, and where
    /// each expression of the translation starts in the source (for error offsets).
    Blocks(String, Vec<(usize, usize)>, OnceLock<Compiled>),
}

/// Part of a template without blocks or helpers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Value { name: String, inline: Option<Value> },
}

impl Template {
    /// Parse `source`, allowing the parameter names in `params`.
    pub(crate) fn parse(source: &str, params: &[&str]) -> Result<Self, TemplateError> {
        Self::parse_declared(source, &Declared::new(params))
    }

    /// [`Template::parse`] with the names already gathered (once for all the templates of
    /// a manifest: a look-up per placeholder, not a walk of every name).
    pub(crate) fn parse_declared(source: &str, params: &Declared<'_>) -> Result<Self, TemplateError> {
        let scan = scan(source, params)?;
        let mut refs = scan.refs;
        let body = match scan.pieces {
            Some(pieces) => Body::Pieces(pieces),
            None => Body::Blocks(scan.translated, scan.anchors, OnceLock::new()),
        };
        // What the parser says is read from the values themselves counts too: the parser
        // decides what renders, and a scanner that reads a scope differently (it once missed
        // `{{else\nif x}}`) must not leave a root read unrecorded. (A text that does not
        // parse is reported by `check`.)
        if let Body::Blocks(translated, anchors, compiled) = &body
            && let Ok(program) = compiled.get_or_init(|| compile(source, translated, anchors))
        {
            let known: std::collections::HashSet<Ref> = refs.iter().cloned().collect();
            for r in root_refs(program, source, params)? {
                if !known.contains(&r) && !refs.contains(&r) {
                    refs.push(r);
                }
            }
        }
        Ok(Self { source: source.to_owned(), body, refs, bare: scan.bare, placeholder: scan.placeholder })
    }

    /// Parse the blocks now (templates with blocks or helpers only; the result is kept
    /// for rendering). Loading a manifest calls this so syntax errors surface at load.
    pub(crate) fn check(&self) -> Result<(), TemplateError> {
        match &self.body {
            Body::Pieces(_) => Ok(()),
            Body::Blocks(translated, anchors, compiled) => compiled
                .get_or_init(|| compile(&self.source, translated, anchors))
                .as_ref()
                .map(|_| ())
                .map_err(Clone::clone),
        }
    }

    /// The text as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Every name the template reads, in order of appearance (may repeat).
    pub(crate) fn refs(&self) -> &[Ref] {
        &self.refs
    }

    /// The parameter names the template reads.
    pub(crate) fn params(&self) -> impl Iterator<Item = &str> {
        self.refs.iter().filter_map(|r| match r {
            Ref::Param(p) => Some(p.as_str()),
            _ => None,
        })
    }

    /// Parameters used as plain placeholders outside any block and without an inline
    /// default: these render empty when the parameter has no value.
    pub(crate) fn bare_params(&self) -> &[String] {
        &self.bare
    }

    /// True when the template is plain text, with no `{{ }}` at all.
    pub(crate) fn is_literal(&self) -> bool {
        matches!(&self.body, Body::Pieces(p) if p.iter().all(|p| matches!(p, Piece::Text(_))))
    }

    /// If the whole template is one parameter placeholder (`{{p}}` or `{{p:d}}`), its name.
    pub(crate) fn placeholder(&self) -> Option<&str> {
        self.placeholder.as_deref()
    }

    /// Render with `data` (see [`Data`]).
    pub(crate) fn render(&self, data: &Data) -> Result<String, RenderError> {
        self.render_marked(data, false)
    }

    /// Render with `data`, stopping with [`TOO_LONG`] once the text passes
    /// [`MAX_RENDER_BYTES`]: a block repeating a value (`{{#each items}}{{../text}}{{/each}}`)
    /// could otherwise build hundreds of megabytes from a small request before any size
    /// check saw it. (Text without blocks holds each value once: it is as large as the
    /// request, and is not cut here.)
    pub(crate) fn render_capped(&self, data: &Data) -> Result<String, RenderError> {
        let Body::Blocks(..) = &self.body else { return self.render(data) };
        let mut out = Capped { text: String::new(), limit: MAX_RENDER_BYTES, over: false };
        let result = self.render_blocks(data, false, &mut out);
        match (out.over, result) {
            (true, _) => Err(RenderError::new(TOO_LONG.to_owned())),
            (false, Err(e)) => Err(e),
            (false, Ok(())) => Ok(out.text),
        }
    }

    /// Where the first character of `rendered` (this template rendered with `data`)
    /// came from: `None` when the manifest's text (or a default, `env.` or `secret.`
    /// value: the manifest's and the operator's) leads, or the output is empty.
    ///
    /// The template is rendered again with every value written between markers
    /// (NUL, which no value holds: arguments with one are refused before rendering).
    /// If that render, unmarked, is not `rendered` (a helper compared marked text),
    /// the answer is [`Lead::Block`]: assume a value leads.
    ///
    /// With it come the values that would lead next, in order, were the ones before them
    /// empty (`{{a}}{{b}}` with both starting with `-`: `a`, then `b`). Only a template
    /// of text and plain placeholders gives them, where emptying a value changes nothing
    /// else; a block may render differently once a value is empty, so it gives none.
    /// Lint's probes take a whole chain from one render instead of one render per link.
    pub(crate) fn lead(&self, data: &Data, rendered: &str) -> Option<(Lead, Vec<Lead>)> {
        if rendered.is_empty() || self.is_literal() {
            return None;
        }
        let marked = match self.render_marked(data, true) {
            Ok(m) if unmark(&m) == rendered => m,
            _ => return Some((Lead::Block, Vec::new())),
        };
        let lead_of = |tag: &str| {
            if let Some(key) = tag.strip_prefix("context.") {
                Lead::Context(key.to_owned())
            } else if self.params().any(|p| p == tag) {
                Lead::Param(tag.to_owned())
            } else {
                Lead::Block
            }
        };
        let first = lead_of(first_tag(&marked)?);
        let mut next = Vec::new();
        if matches!(self.body, Body::Pieces(_)) && first != Lead::Block {
            let mut rest = leading_value(&marked).map_or("", |(_, _, rest)| rest);
            while let Some((tag, text, after)) = leading_value(rest) {
                let lead = lead_of(tag);
                if !text.starts_with('-') || lead == Lead::Block {
                    break;
                }
                next.push(lead);
                rest = after;
            }
        }
        Some((first, next))
    }

    fn render_marked(&self, data: &Data, marks: bool) -> Result<String, RenderError> {
        match &self.body {
            Body::Pieces(pieces) => {
                let mut out = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => out.push_str(t),
                        Piece::Value { name, inline } => {
                            require_secret(data.root(), name)?;
                            let (text, given) = lookup_marked(data.root(), name, inline.as_ref());
                            if marks && given {
                                push_marked(&mut out, name, &text);
                            } else {
                                out.push_str(&text);
                            }
                        }
                    }
                }
                Ok(out)
            }
            Body::Blocks(..) => {
                let mut out = String::new();
                self.render_blocks(data, marks, &mut out)?;
                Ok(out)
            }
        }
    }

    /// Render a body of blocks into `out` (which may stop it).
    fn render_blocks(&self, data: &Data, marks: bool, out: &mut dyn Sink) -> Result<(), RenderError> {
        let Body::Blocks(translated, anchors, compiled) = &self.body else { unreachable!("a body of blocks") };
        let program = compiled
            .get_or_init(|| compile(&self.source, translated, anchors))
            .as_ref()
            .map_err(|e| RenderError::new(e.message.clone()))?;
        render::render(program, &data.0, marks, out)
    }
}

/// The most bytes a command template may render to ([`Template::render_capped`]): more
/// than any argv element may hold (the kernel's limit is 128 KiB) and as much as a tool's
/// standard input may.
pub(crate) const MAX_RENDER_BYTES: usize = 1024 * 1024;

/// Why [`Template::render_capped`] stopped.
pub(crate) const TOO_LONG: &str = "renders to more than 1 MiB (1,048,576 bytes) with these values";

/// Collects rendered text up to `limit` bytes; past it, it sets `over` and refuses more,
/// which ends the render.
struct Capped {
    text: String,
    limit: usize,
    over: bool,
}

impl Sink for Capped {
    fn write(&mut self, seg: &str) -> Result<(), RenderError> {
        if self.text.len().saturating_add(seg.len()) > self.limit {
            self.over = true;
            return Err(RenderError::new(TOO_LONG.to_owned()));
        }
        self.text.push_str(seg);
        Ok(())
    }
}

/// Marker around a value while marking: `\0TAG\x01TEXT\0`. No value holds a NUL, and a
/// tag (a name) holds neither marker.
const MARK: char = '\0';
const TAG_END: char = '\x01';

/// Write `text` between markers naming where it came from (`p`, `context.url`, or `""`
/// for a value only the block knows).
fn push_marked(out: &mut String, tag: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    out.push(MARK);
    out.push_str(tag);
    out.push(TAG_END);
    out.push_str(text);
    out.push(MARK);
}

fn marked(tag: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + tag.len() + 3);
    push_marked(&mut out, tag, text);
    out
}

/// A marked render without its markers.
fn unmark(marked: &str) -> String {
    let mut out = String::with_capacity(marked.len());
    let mut rest = marked;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let Some(tag_end) = after.find(TAG_END) else { return out + after };
        let text = &after[tag_end + 1..];
        let end = text.find(MARK).unwrap_or(text.len());
        out.push_str(&text[..end]);
        rest = text.get(end + 1..).unwrap_or_default();
    }
    out + rest
}

/// The tag of the value that provides the first character, if a value does.
fn first_tag(marked: &str) -> Option<&str> {
    let rest = marked.strip_prefix(MARK)?;
    let (tag, _) = rest.split_once(TAG_END)?;
    Some(tag)
}

/// The marked value `marked` starts with: its tag, its text and what follows it.
fn leading_value(marked: &str) -> Option<(&str, &str, &str)> {
    let (tag, rest) = marked.strip_prefix(MARK)?.split_once(TAG_END)?;
    let (text, after) = rest.split_once(MARK).unwrap_or((rest, ""));
    Some((tag, text, after))
}

/// Whether a value read as `name` is the operator's (`env.`, `secret.`), never marked.
fn is_operators(name: &str) -> bool {
    name.starts_with("env.") || name.starts_with("secret.")
}

/// A template of blocks as parsed once per process for its text (shared by every
/// template of that text), or why its text does not parse.
type Compiled = Result<Arc<parse::Program>, TemplateError>;

/// Most distinct template texts [`compile`] remembers, and the longest it remembers:
/// pack directories repeat the same few short blocks (`{{#if verbose}}-v{{/if}}`) in
/// many manifests, parsed once. A parsed text near the length bound holds a few KB, so
/// the cache stays small; a long-running server that sees ever new texts stops
/// remembering at this bound rather than growing.
const COMPILED_TEXTS: usize = 256;
const COMPILED_TEXT_BYTES: usize = 1024;

/// By source text: its translation (which the parameter names also shape) and what it compiled to.
type Cache = std::sync::Mutex<std::collections::HashMap<String, (String, Compiled)>>;

fn compile(source: &str, translated: &str, anchors: &[(usize, usize)]) -> Compiled {
    static SEEN: OnceLock<Cache> = OnceLock::new();
    compile_in(SEEN.get_or_init(Cache::default), source, translated, anchors)
}

/// [`compile`] with the cache `seen` (a test's own, which no other test fills).
fn compile_in(seen: &Cache, source: &str, translated: &str, anchors: &[(usize, usize)]) -> Compiled {
    if source.len() + translated.len() > COMPILED_TEXT_BYTES {
        return compile_text(translated, anchors);
    }
    // A poisoned lock only means another thread panicked while holding it: the map is whole.
    let lock = || seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((t, known)) = lock().get(source)
        && t == translated
    {
        return known.clone();
    }
    let compiled = compile_text(translated, anchors);
    let mut seen = lock();
    if seen.len() < COMPILED_TEXTS || seen.contains_key(source) {
        seen.insert(source.to_owned(), (translated.to_owned(), compiled.clone()));
    }
    compiled
}

fn compile_text(translated: &str, anchors: &[(usize, usize)]) -> Compiled {
    parse::parse(translated).map(Arc::new).map_err(|(at, message)| TemplateError {
        offset: source_offset(anchors, at),
        message: format!("invalid template: {message}"),
    })
}

/// The source offset of a translated one: the start of the expression it falls in, or
/// the same place in the text between expressions (which translation does not change).
/// `anchors` holds (translated, source) offsets of each expression's start and end.
fn source_offset(anchors: &[(usize, usize)], at: usize) -> usize {
    match anchors.partition_point(|&(t, _)| t <= at).checked_sub(1) {
        None => at,
        Some(k) if k % 2 == 0 => anchors[k].1,
        Some(k) => anchors[k].1 + (at - anchors[k].0),
    }
}

/// The values a template is rendered with.
#[derive(Debug)]
pub(crate) struct Data(Value);

#[cfg(test)]
thread_local! {
    /// How many times this thread copied a [`Data`] (all the values at once).
    pub(crate) static DATA_COPIES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Clone for Data {
    fn clone(&self) -> Self {
        #[cfg(test)]
        DATA_COPIES.with(|c| c.set(c.get() + 1));
        Self(self.0.clone())
    }
}

impl Data {
    /// `resolved`: each parameter's value after defaults (absent ones may be missing);
    /// `given`: the values the call or context gave; `context`: the context map.
    #[cfg(test)]
    pub(crate) fn new(resolved: &Map<String, Value>, given: &Map<String, Value>, context: &Map<String, Value>) -> Self {
        Self::with_environment(resolved, given, context, &Environment::default())
    }

    /// Like [`Data::new`], with the `env.` and `secret.` values the templates read.
    pub(crate) fn with_environment(
        resolved: &Map<String, Value>,
        given: &Map<String, Value>,
        context: &Map<String, Value>,
        environment: &Environment,
    ) -> Self {
        Self::of(resolved.clone(), given, context, environment)
    }

    /// Like [`Data::with_environment`], taking `resolved` (which becomes the root: no
    /// parameter is named like the other keys, see `names::RESERVED_PARAMETER_NAMES`).
    pub(crate) fn of(
        mut root: Map<String, Value>,
        given: &Map<String, Value>,
        context: &Map<String, Value>,
        environment: &Environment,
    ) -> Self {
        root.insert(GIVEN.into(), Value::Object(given.clone()));
        root.insert("context".into(), Value::Object(context.clone()));
        root.insert("env".into(), Value::Object(environment.env.clone()));
        root.insert("secret".into(), Value::Object(environment.secrets.clone()));
        Self(Value::Object(root))
    }

    /// Bind `name` to `value` (given), in place: a group repeated per array item rebinds
    /// one copy of the values per item rather than copying them all (the array included)
    /// for each.
    pub(crate) fn set(&mut self, name: &str, value: &Value) {
        if let Some(obj) = self.0.as_object_mut() {
            obj.insert(name.to_owned(), value.clone());
            if let Some(Value::Object(given)) = obj.get_mut(GIVEN) {
                given.insert(name.to_owned(), value.clone());
            }
        }
    }

    /// The root object.
    pub(crate) fn root(&self) -> &Value {
        &self.0
    }

    /// A parameter's resolved value (after defaults; null when it has none), if declared.
    pub(crate) fn resolved(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

/// The `env.` and `secret.` values templates read, taken from packs' own environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Environment {
    /// `env.NAME` values that are set.
    pub env: Map<String, Value>,
    /// `secret.NAME` values that are set.
    pub secrets: Map<String, Value>,
}

impl Environment {
    /// Read the variables `refs` name from the process environment.
    pub(crate) fn read<'r>(refs: impl IntoIterator<Item = &'r Ref>) -> Self {
        let mut e = Self::default();
        for r in refs {
            let (map, name) = match r {
                Ref::Env(n) => (&mut e.env, n),
                Ref::Secret(n) => (&mut e.secrets, n),
                _ => continue,
            };
            if let Some(v) = std::env::var_os(name) {
                map.insert(name.clone(), Value::String(v.to_string_lossy().into_owned()));
            }
        }
        e
    }

    /// Like [`Environment::read`], but every secret is the text `***` (for dry-run
    /// tests, which must not depend on, or reveal, real credentials).
    pub(crate) fn read_with_placeholder_secrets<'r>(refs: impl IntoIterator<Item = &'r Ref>) -> Self {
        let refs: Vec<&Ref> = refs.into_iter().collect();
        let mut e = Self::read(refs.iter().copied());
        for r in refs {
            if let Ref::Secret(n) = r {
                e.secrets.insert(n.clone(), Value::String("***".into()));
            }
        }
        e
    }

    /// The secret values, for masking.
    pub(crate) fn secret_values(&self) -> Vec<String> {
        self.secrets.values().filter_map(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }
}

/// Render one value as argv text: strings verbatim, numbers as JSON,
/// booleans `true`/`false`, null empty, arrays and objects as compact JSON.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reading `secret.NAME` when it is not set stops the render: a call must not run with an
/// empty credential. Only a secret the render reads is required, so one in a branch that is
/// not taken (`{{#if stub}}...{{else}}{{secret.T}}{{/if}}`) is not.
fn require_secret(root: &Value, name: &str) -> Result<(), RenderError> {
    match name.strip_prefix("secret.") {
        Some(key) if root.get("secret").and_then(|s| s.get(key)).is_none() => Err(missing_secret(key)),
        _ => Ok(()),
    }
}

fn missing_secret(key: &str) -> RenderError {
    RenderError::new(format!("secret `{key}` is not set: export {key}=... in the environment packs runs in"))
}

/// A placeholder's text, and whether it is a value from the call or the context
/// (not a default, and not the operator's `env.` or `secret.`).
fn lookup_marked(root: &Value, name: &str, inline: Option<&Value>) -> (String, bool) {
    let present = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    let given = !is_operators(name)
        && match name.split_once('.') {
            Some((ns, key)) => present(root.get(ns).and_then(|c| c.get(key))),
            None => present(root.get(GIVEN).and_then(|g| g.get(name))),
        };
    (lookup(root, name, inline).map(value_text).unwrap_or_default(), given)
}

/// The value of a placeholder: the call's value, then the inline default, then
/// the declared default (namespaced names: the value, then the inline default).
fn lookup<'a>(root: &'a Value, name: &str, inline: Option<&'a Value>) -> Option<&'a Value> {
    let present = |v: Option<&'a Value>| v.filter(|v| !v.is_null());
    match name.split_once('.') {
        Some((ns, key)) => present(root.get(ns).and_then(|c| c.get(key))).or(inline),
        None => present(root.get(GIVEN).and_then(|g| g.get(name))).or(inline).or_else(|| present(root.get(name))),
    }
}

/// Percent-encode everything but RFC 3986's unreserved characters.
pub(crate) fn urlencode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

struct Scan {
    translated: String,
    /// (translated, source) offsets of each expression's start, then its end.
    anchors: Vec<(usize, usize)>,
    bare: Vec<String>,
    /// The template as pieces, when it has no blocks or helpers.
    pieces: Option<Vec<Piece>>,
    refs: Vec<Ref>,
    placeholder: Option<String>,
}

/// Find every `{{ }}` expression: translate placeholders, collect and check names.
fn scan(src: &str, params: &Declared<'_>) -> Result<Scan, TemplateError> {
    let mut out = String::with_capacity(src.len() + 16);
    let mut pieces = Some(Vec::new());
    let mut refs = Vec::new();
    let mut bare = Vec::new();
    let mut placeholder = None;
    let mut iter_depth = 0usize; // inside #each / #with, names may be item fields
    // Open blocks: the helper, where, and whether its body (`each`/`with`) is an item's scope
    // now (not after its `{{else}}`, which renders where the block is).
    let mut open_blocks: Vec<(String, usize, bool)> = Vec::new();
    let mut pos = 0;
    let mut expressions = 0;
    let mut anchors = Vec::new();
    // The parser's comment rule: `{{!` + spaces + `--` is a long comment (to `--}}`) when a
    // `--}}` follows, else a short one (to `}}`); the last `--}}` found once, not per comment.
    let last_long_close = src.rfind("--}}");
    while let Some(rel) = src[pos..].find("{{") {
        let start = pos + rel;
        if expressions > 0 {
            anchors.push((out.len(), pos));
        }
        out.push_str(&src[pos..start]);
        anchors.push((out.len(), start));
        if let Some(p) = pieces.as_mut().filter(|_| start > pos) {
            p.push(Piece::Text(src[pos..start].to_owned()));
        }
        let long_comment = src[start..].starts_with("{{!")
            && src[start + 3..].trim_start_matches(parse::is_space).starts_with("--")
            && last_long_close.is_some_and(|at| at >= start + 3);
        let (open, close) = if long_comment || src[start..].starts_with("{{!--") {
            ("{{!--", "--}}")
        } else if src[start..].starts_with("{{{") {
            ("{{{", "}}}")
        } else {
            ("{{", "}}")
        };
        let body_start = start + if long_comment { 3 } else { open.len() };
        let Some(body_len) = src[body_start..].find(close) else {
            return Err(TemplateError { offset: start, message: "unclosed `{{`: no matching `}}`".into() });
        };
        let end = body_start + body_len + close.len();
        let raw = &src[start..end];
        // An expression as the parser gets it: `{{{x}}}` becomes `{{x}}` (escaping is off
        // anyway), so every value a block writes passes the escape hook that marks it.
        let expression =
            if open == "{{{" { format!("{{{{{}}}}}", &src[body_start..body_start + body_len]) } else { raw.to_owned() };
        pos = end;
        expressions += 1;
        // The parser takes spaces before a `~` too (`{{ ~else}}`).
        let body = src[body_start..body_start + body_len].trim_matches(|c: char| c == '~' || c.is_whitespace());
        let err = |message: String| TemplateError { offset: start, message };
        let first = body.chars().next();
        if open == "{{!--" {
            // A long comment (what it holds is not read: `{{!-- {{x}} --}}`).
            pieces = None;
            out.push_str(raw);
            continue;
        }
        if matches!(first, Some('!' | '/' | '#' | '^')) {
            pieces = None;
        }
        match first {
            None => return Err(err("empty placeholder `{{}}`".into())),
            Some('!') => {
                out.push_str(raw);
                continue;
            }
            Some('>') => return Err(err("partials (`{{> name}}`) are not supported in tool templates".into())),
            Some('/') => {
                let helper = body[1..].trim();
                let scoped = match open_blocks.pop() {
                    Some((open, _, scoped)) if open == helper => scoped,
                    Some((open, ..)) => {
                        return Err(err(format!("`{raw}` closes `{{{{#{open}}}}}`; expected `{{{{/{open}}}}}`")));
                    }
                    None => return Err(err(format!("`{raw}` closes a block that was never opened"))),
                };
                if scoped {
                    iter_depth -= 1;
                }
                out.push_str(raw);
                continue;
            }
            Some('#' | '^') => {
                let mut words = tokens(&body[1..]);
                let helper = if words.is_empty() { String::new() } else { words.remove(0) };
                if helper.is_empty() {
                    return Err(err(format!("block `{raw}` names no helper")));
                }
                helper_name(&helper).map_err(err)?;
                collect_refs(&words, params, iter_depth > 0, &mut refs).map_err(err)?;
                let scoped = matches!(helper.as_str(), "each" | "with");
                iter_depth += usize::from(scoped);
                open_blocks.push((helper, start, scoped));
                out.push_str(raw);
                continue;
            }
            _ => {}
        }
        // As the parser reads it: `else` then any whitespace (`{{else\nif x}}` is a link too).
        let is_else = body.strip_prefix("else").is_some_and(|r| r.is_empty() || r.starts_with(parse::is_space));
        if is_else && let Some((_, _, scoped)) = open_blocks.last_mut().filter(|b| b.2) {
            // What follows `{{else}}` of `{{#each}}`/`{{#with}}` renders outside the item.
            *scoped = false;
            iter_depth -= 1;
        }
        if let Some((name, default)) = simple_placeholder(body).filter(|_| !is_else) {
            if let Some(r) = namespaced(name).map_err(err)? {
                if matches!(r, Ref::Secret(_)) && default.is_some() {
                    return Err(err(format!("`{raw}`: a secret cannot have an inline default")));
                }
                refs.push(r);
            } else if params.contains(name) {
                refs.push(Ref::Param(name.to_owned()));
                placeholder = Some(name.to_owned());
                if open_blocks.is_empty() && default.is_none() {
                    bare.push(name.to_owned());
                }
            } else if name == "this" && iter_depth == 0 {
                return Err(err(WHOLE_DATA.into()));
            } else if iter_depth > 0 {
                out.push_str(&expression);
                pieces = None;
                continue;
            } else {
                return Err(err(undeclared(name, params)));
            }
            // `~` trims the text beside the placeholder, as Handlebars' `{{~a~}}` does: the
            // parser applies it, so the template is no longer plain pieces.
            let inside = &src[body_start..body_start + body_len];
            let tilde_before = open == "{{" && inside.trim_start().starts_with('~');
            let tilde_after = open == "{{" && inside.trim_end().ends_with('~');
            if tilde_before || tilde_after {
                pieces = None;
            }
            out.push_str(if tilde_before { "{{~__v \"" } else { "{{__v \"" });
            out.push_str(name);
            out.push('"');
            if let Some(d) = default {
                out.push(' ');
                out.push_str(&Value::String(d.to_owned()).to_string());
            }
            out.push_str(if tilde_after { "~}}" } else { "}}" });
            if let Some(p) = pieces.as_mut() {
                p.push(Piece::Value { name: name.to_owned(), inline: default.map(|d| Value::String(d.to_owned())) });
            }
            continue;
        }
        pieces = None;
        // A helper expression such as `{{lookup x "k"}}` or `{{else}}`.
        let mut words = tokens(body);
        if words.first().is_some_and(|w| w == "else") {
            words.remove(0);
        }
        let link = if words.len() > 1 { Some(words.remove(0)) } else { None };
        if let Some(helper) = &link {
            helper_name(helper).map_err(err)?;
        }
        collect_refs(&words, params, iter_depth > 0, &mut refs).map_err(err)?;
        // `{{else each xs}}` / `{{else with obj}}`: what follows, to the next `{{else}}` or
        // the close, is the item's scope, as after `{{#each xs}}`.
        if is_else
            && matches!(link.as_deref(), Some("each" | "with"))
            && let Some((_, _, scoped)) = open_blocks.last_mut()
        {
            *scoped = true;
            iter_depth += 1;
        }
        out.push_str(&expression);
    }
    if let Some((open, at, _)) = open_blocks.pop() {
        return Err(TemplateError {
            offset: at,
            message: format!("`{{{{#{open}}}}}` is never closed with `{{{{/{open}}}}}`"),
        });
    }
    if expressions > 0 {
        anchors.push((out.len(), pos));
    }
    out.push_str(&src[pos..]);
    if let Some(p) = pieces.as_mut().filter(|_| pos < src.len()) {
        p.push(Piece::Text(src[pos..].to_owned()));
    }
    let whole = expressions == 1 && src.starts_with("{{") && pos == src.len();
    Ok(Scan { translated: out, anchors, bare, pieces, refs, placeholder: placeholder.filter(|_| whole) })
}

/// The names a parsed template reads from the values themselves, by the parser's reading
/// of scopes (an `#each`/`#with` body, and an `{{else each}}`/`{{else with}}` link's, is an
/// item's; `../` reaches out of it), and `env.`/`secret.`/`context.` paths anywhere (which
/// `json` and `urlencode` read from the values wherever they are). A root read of a name
/// that is not declared, or of a whole namespace, is refused, naming the path.
fn root_refs(program: &parse::Program, source: &str, params: &Declared<'_>) -> Result<Vec<Ref>, TemplateError> {
    fn nodes<'p>(nodes: &'p [parse::Node], depth: usize, out: &mut Vec<&'p parse::Path>) {
        for node in nodes {
            match node {
                parse::Node::Value(e) => expr(e, depth, out),
                parse::Node::Block(b) => {
                    for e in &b.params {
                        expr(e, depth, out);
                    }
                    nodes_in(&b.body, depth + usize::from(matches!(b.helper.as_str(), "each" | "with")), out);
                    if let Some(inverse) = &b.inverse {
                        nodes_in(inverse, depth, out);
                    }
                }
                parse::Node::Text(_) | parse::Node::Comment => {}
            }
        }
    }
    // (A named function for the recursion, which the parser bounds at 64 levels.)
    fn nodes_in<'p>(n: &'p [parse::Node], depth: usize, out: &mut Vec<&'p parse::Path>) {
        nodes(n, depth, out);
    }
    fn expr<'p>(e: &'p parse::Expr, depth: usize, out: &mut Vec<&'p parse::Path>) {
        match e {
            parse::Expr::Path(p) if !p.local => {
                let spaced =
                    p.up == 0 && p.segs.len() >= 2 && matches!(p.segs[0].as_str(), "env" | "secret" | "context");
                // `../` past the outermost scope reads the innermost, as the renderer does.
                if p.up == depth || depth == 0 || spaced {
                    out.push(p);
                }
            }
            parse::Expr::Call(_, args) => {
                for a in args {
                    expr(a, depth, out);
                }
            }
            _ => {}
        }
    }
    let mut paths = Vec::new();
    nodes(&program.nodes, 0, &mut paths);
    let mut refs = Vec::new();
    for p in paths {
        let err = |message: String| TemplateError { offset: source.find(&p.raw).unwrap_or(0), message };
        match p.segs.as_slice() {
            [] => return Err(err(WHOLE_DATA.into())),
            [ns, key, ..] if matches!(ns.as_str(), "env" | "secret" | "context") => {
                refs.extend(namespaced(&format!("{ns}.{key}")).map_err(err)?);
            }
            [ns] if matches!(ns.as_str(), "env" | "secret" | "context") => {
                return Err(err(format!("`{}` reads every `{ns}.` value at once; name the one it reads", p.raw)));
            }
            [name, ..] if params.contains(name) => refs.push(Ref::Param(name.clone())),
            [name, ..] => return Err(err(undeclared(name, params))),
        }
    }
    Ok(refs)
}

/// `name`, `name:default`, `context.key`, `context.key:default`.
fn simple_placeholder(body: &str) -> Option<(&str, Option<&str>)> {
    let (name, default) = match body.split_once(':') {
        Some((n, d)) => (n, Some(d)),
        None => (body, None),
    };
    let path_ok = name.split('.').all(crate::names::is_identifier) && name.split('.').count() <= 2;
    let namespaced = ["context.", "env.", "secret."].iter().any(|ns| name.starts_with(ns));
    (path_ok && (namespaced || !name.contains('.'))).then_some((name, default))
}

/// `context.KEY`, `env.NAME`, `secret.NAME` → a reference; other names → None. The `/`
/// spelling (`secret/NAME`) is the same path to the renderer, so it is the same reference.
fn namespaced(name: &str) -> Result<Option<Ref>, String> {
    let Some((ns, key)) = name.split_once(['.', '/']) else { return Ok(None) };
    match ns {
        "context" if CONTEXT_KEYS.contains(&key) => Ok(Some(Ref::Context(key.to_owned()))),
        "context" => Err(format!("unknown context key `{key}`; known keys: {}", CONTEXT_KEYS.join(", "))),
        "env" => Ok(Some(Ref::Env(key.to_owned()))),
        "secret" => Ok(Some(Ref::Secret(key.to_owned()))),
        _ => Ok(None),
    }
}

/// The parameter names a template may read: in the manifest's order, for messages, and
/// as a set once there are more than a few.
pub(crate) struct Declared<'a> {
    names: &'a [&'a str],
    set: Option<std::collections::HashSet<&'a str>>,
}

impl<'a> Declared<'a> {
    pub(crate) fn new(names: &'a [&'a str]) -> Self {
        Self { names, set: (names.len() > 16).then(|| names.iter().copied().collect()) }
    }

    fn contains(&self, name: &str) -> bool {
        match &self.set {
            Some(set) => set.contains(name),
            None => self.names.contains(&name),
        }
    }
}

/// Most names an `undeclared` message lists, and most it compares for a did-you-mean: a
/// manifest of thousands of names and as many typos costs one bounded message each.
const NAMES_SHOWN: usize = 10;
const NAMES_COMPARED: usize = 256;

fn undeclared(name: &str, params: &Declared<'_>) -> String {
    let names = params.names;
    let mut msg = format!("`{{{{{name}}}}}` names no declared parameter");
    let near = if names.len() <= NAMES_COMPARED { crate::names::did_you_mean(name, names) } else { None };
    if let Some(s) = near {
        msg.push_str(&format!("; did you mean `{s}`?"));
    } else if names.is_empty() {
        msg.push_str(" (the tool declares no parameters)");
    } else if names.len() <= NAMES_SHOWN {
        msg.push_str(&format!("; declared: {}", names.join(", ")));
    } else {
        let shown = names[..NAMES_SHOWN].join(", ");
        msg.push_str(&format!("; declared: {shown} and {} more", names.len() - NAMES_SHOWN));
    }
    msg
}

/// Split a helper expression into words, keeping string literals whole and
/// treating parentheses as their own words.
fn tokens(body: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    for c in body.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                cur.push(c);
                quote = None;
            }
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                cur.push(c);
                quote = Some(c);
            }
            (None, '(' | ')') => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                words.push(c.to_string());
            }
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// A helper's name is a plain name: a path there (`[a b]`, `@root.x`, `../x`) would be
/// read as a value that [`collect_refs`] never saw.
fn helper_name(word: &str) -> Result<(), String> {
    if word.split(['-', '_']).all(|part| part.chars().all(|c| c.is_ascii_alphanumeric()))
        && !word.is_empty()
        && word != "__v"
    {
        Ok(())
    } else {
        Err(format!("`{word}` is not a helper's name"))
    }
}

/// Why `{{this}}` (or `.`, `..`) is refused where it names the whole set of values.
const WHOLE_DATA: &str = "`this` outside `{{#each}}` or `{{#with}}` is every value at once (the context, the environment and secrets the command reads included); name the value instead (`{{name}}`, `{{context.url}}`)";

/// Record the names a helper's arguments read; a word right after `(` is a helper name.
///
/// Every path that could reach the values is either recorded or refused, since what a
/// template reads decides which values can lead an argument (and so what is refused at run
/// time): `../name` is recorded as `name` (from inside a block, the name beside the
/// parameters); `@root`, segment literals (`[name]`), and `this`, `.` or `..` where they
/// mean every value are refused.
fn collect_refs(words: &[String], params: &Declared<'_>, lenient: bool, refs: &mut Vec<Ref>) -> Result<(), String> {
    let mut after_paren = false;
    for w in words {
        if w == "(" {
            after_paren = true;
            continue;
        }
        if std::mem::take(&mut after_paren) {
            helper_name(w)?;
            continue;
        }
        if w == ")" {
            continue;
        }
        let w = w.rsplit_once('=').map_or(w.as_str(), |(_, v)| v); // hash argument key=value
        let literal = w.starts_with(['"', '\'', '{', '-']) || w.starts_with(|c: char| c.is_ascii_digit());
        if literal || matches!(w, "true" | "false" | "null" | "as" | "|") {
            continue;
        }
        if w.contains('[') {
            return Err(format!("`{w}`: segment literals (`[name]`) are not supported in tool templates"));
        }
        if let Some(var) = w.strip_prefix('@') {
            if matches!(var, "index" | "key" | "first" | "last") {
                continue;
            }
            return Err(format!(
                "`{w}` is not supported in tool templates (only `@index`, `@key`, `@first` and `@last`); name the value instead (`{{{{name}}}}`, `{{{{context.url}}}}`)"
            ));
        }
        // `../`: a scope further out, up to the values themselves; `./` and `this.`: this one.
        let mut up = false;
        let mut w = w;
        loop {
            if let Some(rest) = w.strip_prefix("../") {
                (w, up) = (rest, true);
            } else if let Some(rest) =
                w.strip_prefix("./").or_else(|| w.strip_prefix("this.")).or_else(|| w.strip_prefix("this/"))
            {
                w = rest;
            } else {
                break;
            }
        }
        if matches!(w, "" | "." | ".." | "this") {
            if up || w == ".." || !lenient {
                return Err(WHOLE_DATA.into());
            }
            continue; // the item of `{{#each}}` / `{{#with}}`
        }
        if w.contains(':') {
            return Err(format!("`{w}`: a name in a block or a helper's argument has no `:`"));
        }
        let root = w.split(['.', '/']).next().unwrap_or_default();
        // Further out than an item may be the values themselves, where `context`, `env` and
        // `secret` hold every such value at once: one is named (`../context.url`).
        if up && matches!(root, "context" | "env" | "secret") && !w.contains(['.', '/']) {
            return Err(format!(
                "`{{{{../{root}}}}}` reads every `{root}.` value at once; name the one the template reads (`../{root}.NAME`)"
            ));
        }
        if let Some(r) = namespaced(w)? {
            refs.push(r);
        } else if params.contains(root) {
            // Inside `{{#each}}`/`{{#with}}` a name without `../` is the item's field, which
            // the block's head already counts as read: `{{#each items}}{{json name}}{{/each}}`
            // reads `items`, not the parameter `name`.
            if up || !lenient {
                refs.push(Ref::Param(root.to_owned()));
            }
        } else if !lenient {
            return Err(undeclared(root, params));
        }
    }
    Ok(())
}

#[cfg(test)]
mod differential;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, params: &[&str], resolved: Value, given: Value) -> String {
        let t = Template::parse(src, params).unwrap();
        let data = Data::new(
            resolved.as_object().unwrap(),
            given.as_object().unwrap(),
            json!({"url": "https://e.x/?a=1&b=<2>"}).as_object().unwrap(),
        );
        t.render(&data).unwrap()
    }

    #[test]
    fn value_order_call_then_inline_then_default() {
        let p = &["team"];
        assert_eq!(render("{{team:ENG}}", p, json!({"team": "OPS"}), json!({"team": "WEB"})), "WEB");
        assert_eq!(render("{{team:ENG}}", p, json!({"team": "OPS"}), json!({})), "ENG");
        assert_eq!(render("{{team}}", p, json!({"team": "OPS"}), json!({})), "OPS");
        assert_eq!(render("{{team}}", p, json!({}), json!({})), "");
        assert_eq!(render("x={{team:a b: c}}", p, json!({}), json!({})), "x=a b: c");
    }

    #[test]
    fn values_render_without_escaping() {
        let p = &["v"];
        assert_eq!(render("{{v}}", p, json!({}), json!({"v": "<a href='x'>&"})), "<a href='x'>&");
        assert_eq!(render("{{v}}", p, json!({}), json!({"v": 1.5})), "1.5");
        assert_eq!(render("{{v}}", p, json!({}), json!({"v": {"a": [1, true]}})), r#"{"a":[1,true]}"#);
        assert_eq!(render("{{context.url}}", p, json!({}), json!({})), "https://e.x/?a=1&b=<2>");
        assert_eq!(render("{{context.file:none}}", p, json!({}), json!({})), "none");
    }

    #[test]
    fn blocks_and_helpers() {
        let p = &["h", "fmt", "tags"];
        assert_eq!(render("{{#if h}}-h{{/if}}", p, json!({"h": true}), json!({"h": true})), "-h");
        assert_eq!(render("{{#if h}}-h{{/if}}", p, json!({"h": false}), json!({})), "");
        assert_eq!(render("{{#if h}}-h{{/if}}", p, json!({}), json!({})), "");
        assert_eq!(
            render("{{#if (eq fmt \"json\")}}--json{{else}}--text{{/if}}", p, json!({"fmt": "json"}), json!({})),
            "--json"
        );
        assert_eq!(render("{{#each tags}}{{this}},{{/each}}", p, json!({"tags": ["a", "b"]}), json!({})), "a,b,");
    }

    #[test]
    fn environment_and_json_helper() {
        let t = Template::parse("{{env.API:https://x}}/{{secret.TOK}} {\"t\":{{json title}} }", &["title"]).unwrap();
        let mut env = Environment::default();
        env.secrets.insert("TOK".into(), json!("s3"));
        let given = json!({"title": "a \"b\"\n"});
        let data = Data::with_environment(given.as_object().unwrap(), given.as_object().unwrap(), &Map::new(), &env);
        assert_eq!(t.render(&data).unwrap(), "https://x/s3 {\"t\":\"a \\\"b\\\"\\n\" }");
        assert_eq!(t.refs(), &[Ref::Env("API".into()), Ref::Secret("TOK".into()), Ref::Param("title".into())]);
        assert!(Template::parse("{{secret.TOK:x}}", &[]).is_err());
    }

    #[test]
    fn urlencode_helper_encodes_a_path_segment() {
        let t = Template::parse("https://x/{{urlencode loc}}", &["loc"]).unwrap();
        let v = json!({"loc": "São Paulo/../?a=1&b"});
        let data = Data::new(v.as_object().unwrap(), v.as_object().unwrap(), &Map::new());
        assert_eq!(t.render(&data).unwrap(), "https://x/S%C3%A3o%20Paulo%2F..%2F%3Fa%3D1%26b");
    }

    #[test]
    fn names_are_checked() {
        let e = Template::parse("--x {{pth}}", &["path"]).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.message.contains("did you mean `path`"), "{}", e.message);
        assert!(Template::parse("{{context.nope}}", &[]).is_err());
        assert!(Template::parse("{{#if missing}}x{{/if}}", &["other"]).is_err());
        assert!(Template::parse("{{x", &["x"]).is_err());
        let e = Template::parse("a {{#if x}}b", &["x"]).unwrap_err();
        assert_eq!((e.offset, e.message.as_str()), (2, "`{{#if}}` is never closed with `{{/if}}`"));
        let e = Template::parse("{{#if x}}b{{/each}}", &["x"]).unwrap_err();
        assert!(e.message.contains("expected `{{/if}}`"), "{}", e.message);
        let t = Template::parse("{{#if x}}{{lookup x}}{{/if}}", &["x"]).unwrap();
        assert!(t.check().is_ok());
        let t = Template::parse("{{#if x}}{{lookup x ))}}{{/if}}", &["x"]).unwrap();
        assert!(t.check().unwrap_err().message.contains("invalid template"));
    }

    #[test]
    fn every_path_to_the_values_is_seen_or_refused() {
        // What a template reads decides which values can lead an argument: a path around
        // the names (`@root`, `../`, `this`, `[..]`) must be recorded or refused.
        let p = &["tags", "p"];
        for refused in [
            "{{@root.context.url}}",
            "{{#if @root.context.url}}-x{{/if}}",
            "{{this}}",
            "{{#each this}}{{@key}}{{/each}}",
            "{{lookup this \"secret\"}}",
            "{{#with .}}{{url}}{{/with}}",
            "{{[secret]}}",
            "{{#each tags}}{{[a b]}}{{/each}}",
            "{{#each tags}}{{lookup ../this \"secret\"}}{{/each}}",
            "{{#each tags}}{{json ..}}{{/each}}",
            "{{#each tags}}{{@partial-block}}{{/each}}",
            // From inside a block, the namespaces whole and packs' own keys.
            "{{#each tags}}{{lookup ../context 'url'}}{{/each}}",
            "{{#each tags}}{{#with ../context}}{{url}}{{/with}}{{/each}}",
            "{{#each tags}}{{../packs:given.p}}{{/each}}",
            "{{#each tags}}{{lookup ../packs:given 'p'}}{{/each}}",
            "{{#each tags}}{{#each tags}}{{json ../../secret}}{{/each}}{{/each}}",
            "{{#each tags}}{{#with ../env}}{{HOME}}{{/with}}{{/each}}",
            // After `{{else}}` of `{{#each}}`/`{{#with}}`, names are the values' again.
            "{{#each tags}}x{{else}}{{lookup context 'url'}}{{/each}}",
            "{{#each tags}}x{{else}}{{this}}{{/each}}",
            "{{#with p}}x{{else}}{{#each this}}{{@key}}{{/each}}{{/with}}",
        ] {
            assert!(Template::parse(refused, p).is_err(), "{refused} parsed");
        }
        let refs = |src: &str| Template::parse(src, p).unwrap_or_else(|e| panic!("{src}: {}", e.message)).refs;
        assert!(refs("{{#each tags}}{{../context.url}}{{/each}}").contains(&Ref::Context("url".into())));
        assert!(refs("{{#each tags}}{{../p}}{{/each}}").contains(&Ref::Param("p".into())));
        assert!(refs("{{#if this.p}}x{{/if}}").contains(&Ref::Param("p".into())));
        assert!(
            refs("{{#each tags}}{{#each tags}}{{../../context.url}}{{/each}}{{/each}}")
                .contains(&Ref::Context("url".into()))
        );
        assert!(refs("{{#each tags}}x{{else}}{{json p}}{{/each}}").contains(&Ref::Param("p".into())));
        assert_eq!(refs("{{#each tags}}{{urlencode p}}{{/each}}"), [Ref::Param("tags".into())], "the item's `p`");
        for fine in [
            "{{#each tags}}{{this}}{{/each}}",
            "{{#each tags}}{{#if @index}},{{/if}}{{.}}{{/each}}",
            "{{#each tags}}{{lookup context 'url'}}{{else}}none{{/each}}{{#with p}}{{k}}{{/with}}",
        ] {
            assert!(Template::parse(fine, p).is_ok(), "{fine}");
        }
    }

    #[test]
    fn compiled_once_per_text_and_rendered_with_each_templates_values() {
        // Two manifests with the same block share its compiled form (in a cache of the test's
        // own: the process's stops remembering once other tests compiled enough texts)...
        let a = Template::parse("{{#if v}}-v{{/if}}{{n}}", &["v", "n"]).unwrap();
        let b = Template::parse("{{#if v}}-v{{/if}}{{n}}", &["v", "n"]).unwrap();
        assert!(a.check().is_ok() && b.check().is_ok());
        let cache = Cache::default();
        let compiled = |t: &Template| {
            let Body::Blocks(translated, anchors, _) = &t.body else { panic!("not blocks") };
            compile_in(&cache, &t.source, translated, anchors).unwrap()
        };
        assert!(Arc::ptr_eq(&compiled(&a), &compiled(&b)));
        // and each renders its own values.
        let data = |v: bool, n: &str| Data::new(json!({"v": v, "n": n}).as_object().unwrap(), &Map::new(), &Map::new());
        assert_eq!(a.render(&data(true, "1")).unwrap(), "-v1");
        assert_eq!(b.render(&data(false, "2")).unwrap(), "2");
        // A text that does not compile is an error for every template of that text, at its offset.
        for _ in 0..2 {
            let t = Template::parse("ab{{#if x}}{{lookup x ))}}{{/if}}", &["x"]).unwrap();
            let e = t.check().unwrap_err();
            assert!(e.message.contains("invalid template") && e.offset >= 2, "{e:?}");
        }
    }

    #[test]
    fn what_leads_through_blocks_helpers_and_subexpressions() {
        // A value reached through a block, `lookup` or a subexpression leads as a block's
        // value: which parameter is not known, but it is never the manifest's text.
        let p = &["tags", "meta", "v", "n"];
        let v = json!({"tags": ["-x", "y"], "meta": {"k": "-m", "n": -1}, "v": "-v", "n": 1});
        let data = Data::new(v.as_object().unwrap(), v.as_object().unwrap(), &Map::new());
        let lead = |src: &str| {
            let t = Template::parse(src, p).unwrap();
            let rendered = t.render(&data).unwrap();
            t.lead(&data, &rendered).map(|(lead, _)| lead)
        };
        let block = Some(Lead::Block);
        assert_eq!(lead("{{#each tags}}{{this}}{{/each}}"), block);
        assert_eq!(lead("{{#each meta}}{{@key}}{{/each}}"), block);
        assert_eq!(lead("{{#each tags}}{{#if @first}}{{../v}}{{/if}}{{/each}}"), block);
        assert_eq!(lead("{{#with meta}}{{k}}{{/with}}"), block);
        assert_eq!(lead("{{#with meta}}{{{k}}}{{/with}}"), block);
        assert_eq!(lead("{{lookup meta \"k\"}}"), block);
        assert_eq!(lead("{{lookup tags 0}}"), block);
        assert_eq!(lead("{{json (lookup meta \"n\")}}"), block);
        assert_eq!(lead("{{urlencode (lookup meta \"k\")}}"), block);
        assert_eq!(lead("{{#if (eq (lookup meta \"k\") \"-m\")}}{{v}}{{/if}}"), Some(Lead::Param("v".into())));
        assert_eq!(lead("{{#if n}}{{json n}}{{/if}}{{v}}"), Some(Lead::Param("n".into())));
        assert_eq!(lead("{{#if n}}{{urlencode v}}{{/if}}"), Some(Lead::Param("v".into())));
        assert_eq!(lead("{{#each tags}}x{{this}}{{/each}}"), None);
        assert_eq!(lead("{{#unless n}}x{{else}}{{v:d}}{{/unless}}"), Some(Lead::Param("v".into())));
        assert_eq!(lead("{{eq v \"-v\"}}"), None, "`true` is the helper's text");
        // `~` trims the manifest's text beside a placeholder, as in Handlebars; what leads
        // then is the value.
        assert_eq!(lead("{{#if n}} {{~v}}{{/if}}"), Some(Lead::Param("v".into())));
        assert_eq!(lead(" {{~v}}"), Some(Lead::Param("v".into())));
    }

    #[test]
    fn a_tilde_trims_beside_a_placeholder() {
        let p = &["a", "b"];
        let v = json!({"a": "-v", "b": true});
        for (src, want) in [
            ("{{#if b}} {{~a}}{{/if}}", "-v"),
            ("x {{~a~}} y", "x-vy"),
            ("x\n  {{~a}}", "x-v"),
            ("{{a~}}  z", "-vz"),
            ("{{~a:d~}}", "-v"),
            ("x {{a}} y", "x -v y"),
            ("x {{ ~a ~ }} y", "x-vy"),
        ] {
            assert_eq!(render(src, p, v.clone(), v.clone()), want, "{src}");
        }
    }

    #[test]
    fn a_helper_credits_a_value_to_where_it_is_read() {
        // `json`/`urlencode` inside a block: a value is a parameter's only when read from
        // the values themselves; `env.`, `secret.`, `context.` are read from them wherever
        // the helper is (not from a model's item that has such keys).
        let p = &["items", "name", "meta", "v"];
        let v = json!({
            "items": [{"name": "-rf"}],
            "name": "ok",
            "meta": {"env": {"X": "-m"}, "secret": {"TOK": -5}, "context": {"url": "-u"}},
            "v": "-v",
        });
        let mut env = Environment::default();
        env.env.insert("X".into(), json!("operator"));
        let context = json!({"url": "https://e.x"});
        let data =
            Data::with_environment(v.as_object().unwrap(), v.as_object().unwrap(), context.as_object().unwrap(), &env);
        let run = |src: &str| {
            let t = Template::parse(src, p).unwrap_or_else(|e| panic!("{src}: {}", e.message));
            t.render(&data).map(|r| {
                let lead = t.lead(&data, &r).map(|(lead, _)| lead);
                (r, lead)
            })
        };
        let ok = |src: &str| run(src).unwrap_or_else(|e| panic!("{src}: {}", e.message));
        assert_eq!(ok("{{#each items}}{{urlencode name}}{{/each}}"), ("-rf".into(), Some(Lead::Block)));
        assert_eq!(ok("{{#each items}}{{json name}}{{/each}}"), ("\"-rf\"".into(), Some(Lead::Block)));
        assert_eq!(ok("{{#with meta}}{{urlencode env.X}}{{/with}}"), ("operator".into(), None));
        assert_eq!(
            ok("{{#with meta}}{{json context.url}}{{/with}}"),
            ("\"https://e.x\"".into(), Some(Lead::Context("url".into())))
        );
        assert_eq!(ok("{{#with meta}}{{urlencode this.env.X}}{{/with}}"), ("-m".into(), Some(Lead::Block)));
        assert_eq!(ok("{{#each items}}{{urlencode ../v}}{{/each}}"), ("-v".into(), Some(Lead::Param("v".into()))));
        assert_eq!(ok("{{#if v}}{{urlencode v}}{{/if}}"), ("-v".into(), Some(Lead::Param("v".into()))));
        // The secret is the operator's, and it is not set: the call stops.
        let e = run("{{#with meta}}{{json secret.TOK}}{{/with}}").unwrap_err();
        assert!(e.reason().contains("secret `TOK` is not set"), "{e}");
    }

    #[test]
    fn refs_and_placeholder() {
        let t = Template::parse("{{a}}", &["a", "b"]).unwrap();
        assert_eq!(t.placeholder(), Some("a"));
        let t = Template::parse("--x={{a}}{{#if b}}y{{/if}}{{context.url}}", &["a", "b"]).unwrap();
        assert_eq!(t.placeholder(), None);
        assert_eq!(t.refs(), &[Ref::Param("a".into()), Ref::Param("b".into()), Ref::Context("url".into())]);
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;
    use serde_json::json;

    const P: &[&str] = &["a", "name", "n", "xs", "obj", "flag", "items"];

    /// Values where only the call's values (`given`) and the context start with `-`; the
    /// defaults (`xs`, `items`) do not.
    fn data() -> Data {
        let resolved = json!({"xs": [], "items": [{"name": "it"}], "name": "-rf", "a": "-a", "obj": {"k": "-k"},
            "flag": false, "n": 1});
        let given = json!({"name": "-rf", "a": "-a", "obj": {"k": "-k"}, "flag": false, "n": 1});
        Data::new(resolved.as_object().unwrap(), given.as_object().unwrap(), json!({"url": "-u"}).as_object().unwrap())
    }

    /// Why a marked render of `t` writes a call's or context's value `t` does not say it
    /// reads, if it does: a tagged value must be among its refs; a block's value that starts
    /// with `-` must come with a given parameter or a context key among them (what
    /// `refuse_options` refuses a block's lead for).
    fn unrecorded(t: &Template, marked: &str) -> Option<String> {
        let given = ["name", "a", "obj", "flag", "n"];
        let mut rest = marked;
        while let Some((tag, text, after)) = rest.find(MARK).and_then(|at| leading_value(&rest[at..])) {
            let ok = match tag.strip_prefix("context.") {
                Some(k) => t.refs().contains(&Ref::Context(k.to_owned())),
                None if tag.is_empty() => {
                    !text.starts_with('-')
                        || t.refs().iter().any(|r| match r {
                            Ref::Param(p) => given.contains(&p.as_str()),
                            Ref::Context(_) => true,
                            _ => false,
                        })
                }
                None => t.params().any(|p| p == tag),
            };
            if !ok {
                return Some(format!("{tag:?} writes {text:?}, refs {:?}", t.refs()));
            }
            rest = after;
        }
        None
    }

    #[test]
    fn the_scope_scan_sees_is_the_parsers() {
        let d = data();
        for src in [
            // `else` and a link's helper apart by a newline, a tab or a CR (1a).
            "{{#each xs}}x{{else\nif 1}}{{urlencode name}}{{/each}}",
            "{{#each xs}}x{{else\tif 1}}{{urlencode context.url}}{{/each}}",
            "{{#with xs}}x{{else\runless flag}}{{urlencode name}}{{/with}}",
            "{{#each xs}}{{~else\nif 1~}}{{urlencode name}}{{/each}}",
            "{{#each xs}}{{ ~else ~}}{{urlencode name}}{{/each}}",
            "{{#each xs}}{{ ~ else\nif 1}}{{urlencode name}}{{/each}}",
            // `{{!` + a space + `--` is a long comment, as the parser reads it (1b).
            "{{! -- }}{{#each xs}} --}}{{urlencode name}}{{! -- }}{{/each}} --}}",
            "{{!\n-- {{#with obj}} --}}{{urlencode name}}{{!-- {{/with}} --}}",
            "{{!--}}{{urlencode name}}{{!--}}",
        ] {
            let t = Template::parse(src, P).unwrap_or_else(|e| panic!("{src:?}: {e}"));
            t.check().unwrap_or_else(|e| panic!("{src:?}: {e}"));
            let marked = t.render_marked(&d, true).unwrap();
            assert!(unmark(&marked).starts_with('-'), "{src:?}: {marked:?}");
            assert_eq!(unrecorded(&t, &marked), None, "{src:?}");
            let rendered = t.render(&d).unwrap();
            let lead = t.lead(&d, &rendered).map(|(l, _)| l);
            assert_ne!(lead, None, "{src:?}");
        }
        // What the second case reads at the root is refused when undeclared, as anywhere there.
        let e = Template::parse("{{#each xs}}x{{else\nif 1}}{{urlencode nme}}{{/each}}", P).unwrap_err();
        assert!(e.message.contains("names no declared parameter"), "{e:?}");
        assert!(Template::parse("{{#each xs}}x{{else\tif 1}}{{lookup context 'url'}}{{/each}}", P).is_err());
    }

    #[test]
    fn an_else_each_or_else_with_link_is_the_items_scope() {
        let d = data();
        for (src, want, refs) in [
            ("{{#if flag}}x{{else each items}}{{json name}}{{/if}}", "\"it\"", vec!["flag", "items"]),
            ("{{#if flag}}x{{else each items}}{{this.name}}{{/if}}", "it", vec!["flag", "items"]),
            ("{{#if flag}}x{{else with obj}}{{urlencode k}}{{/if}}", "-k", vec!["flag", "obj"]),
            ("{{#each xs}}x{{else with obj}}{{urlencode k}}{{/each}}", "-k", vec!["xs", "obj"]),
            // After the link's own `{{else}}`, names are the root's again.
            ("{{#if flag}}x{{else with n}}y{{else}}{{urlencode name}}{{/if}}", "y", vec!["flag", "n", "name"]),
        ] {
            let t = Template::parse(src, P).unwrap_or_else(|e| panic!("{src:?}: {e}"));
            assert_eq!(t.render(&d).unwrap(), want, "{src}");
            assert_eq!(t.params().collect::<Vec<_>>(), refs, "{src}");
        }
        // The link's argument is read where the block is.
        assert!(Template::parse("{{#each xs}}x{{else with nope}}{{k}}{{/each}}", P).is_err());
        // And an item's field is not a root name once the link's scope ends.
        assert!(Template::parse("{{#if flag}}{{else each items}}{{/if}}{{urlencode k}}", P).is_err());
    }

    #[test]
    fn every_value_written_is_one_the_template_says_it_reads() {
        // Random templates from pieces that open, link and close scopes in every spelling the
        // parser takes: any value the render writes must be among what the template reads.
        let pieces: &[&str] = &[
            "{{#each items}}",
            "{{#with obj}}",
            "{{#each xs}}",
            "{{#if flag}}",
            "{{#unless flag}}",
            "{{/each}}",
            "{{/with}}",
            "{{/if}}",
            "{{/unless}}",
            "{{else}}",
            "{{else if 1}}",
            "{{else\nif 1}}",
            "{{else\tunless flag}}",
            "{{~else\nif 1~}}",
            "{{else\reach xs}}",
            "{{else\nwith obj}}",
            "{{else each items}}",
            "{{else with obj}}",
            "{{ else }}",
            "{{ ~else}}",
            "{{ ~ else if 1 ~ }}",
            "{{! -- }}",
            " --}}",
            "{{!-- ",
            "{{!--}}",
            "{{! x}}",
            "{{!\n--}}",
            "{{urlencode name}}",
            "{{json a}}",
            "{{urlencode ../name}}",
            "{{lookup context 'url'}}",
            "{{json context.url}}",
            "{{context.url}}",
            "x",
            " ",
            "\n",
            "{{#each this}}{{@key}}{{/each}}",
            "{{urlencode k}}",
            "{{a}}",
            "{{name}}",
            "{{this}}",
            "{{lookup this 'k'}}",
            "{{json ../../a}}",
            "{{{name}}}",
            "{{#with (lookup obj 'k')}}",
            "{{json this}}",
        ];
        let d = data();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut rendered = 0;
        for _ in 0..100_000 {
            let n = 2 + (next() % 9) as usize;
            let src: String = (0..n).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
            let Ok(t) = Template::parse(&src, P) else { continue };
            if t.check().is_err() {
                continue;
            }
            let Ok(marked) = t.render_marked(&d, true) else { continue };
            rendered += 1;
            assert_eq!(unrecorded(&t, &marked), None, "{src:?}");
        }
        assert!(rendered > 2_000, "{rendered} templates rendered");
    }
}

#[cfg(test)]
mod spelling_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_slash_spelling_of_a_namespaced_name_reads_what_the_dotted_one_does() {
        let src = "{{#each xs}}{{json secret/TOK}}{{/each}}{{json env/E}}{{urlencode context/url}}";
        let t = Template::parse(src, &["xs"]).unwrap();
        let refs =
            [Ref::Param("xs".into()), Ref::Secret("TOK".into()), Ref::Env("E".into()), Ref::Context("url".into())];
        assert_eq!(t.refs(), refs);
        let environment = Environment {
            env: json!({"E": "e"}).as_object().unwrap().clone(),
            secrets: json!({"TOK": "s"}).as_object().unwrap().clone(),
        };
        let v = json!({"xs": [1]});
        let data = Data::with_environment(
            v.as_object().unwrap(),
            v.as_object().unwrap(),
            json!({"url": "u"}).as_object().unwrap(),
            &environment,
        );
        assert_eq!(t.render(&data).unwrap(), "\"s\"\"e\"u");
        assert!(Template::parse("{{json context/nope}}", &[]).unwrap_err().message.contains("unknown context key"));
    }
}

#[cfg(test)]
mod root_ref_tests {
    use super::*;

    fn reads(src: &str, params: &[&str]) -> Result<Vec<Ref>, TemplateError> {
        let program = parse::parse(src).unwrap();
        root_refs(&program, src, &Declared::new(params))
    }

    #[test]
    fn the_parsed_template_says_what_it_reads_from_the_values() {
        let p = &["xs", "name", "flag", "items", "obj", "a"];
        let param = |n: &str| Ref::Param(n.to_owned());
        for (src, want) in [
            ("{{#each xs}}x{{else\nif 1}}{{urlencode name}}{{/each}}", vec![param("xs"), param("name")]),
            ("{{#if flag}}{{else each items}}{{json name}}{{/if}}", vec![param("flag"), param("items")]),
            ("{{#each xs}}{{#with obj}}{{json ../../a}}{{json name}}{{/with}}{{/each}}", vec![param("xs"), param("a")]),
            ("{{#each xs}}{{json ../../../a}}{{/each}}", vec![param("xs")]),
            ("{{#with obj}}{{urlencode context/url}}{{/with}}", vec![param("obj"), Ref::Context("url".into())]),
            ("{{! -- }}{{#each xs}} --}}{{urlencode name}}", vec![param("name")]),
        ] {
            assert_eq!(reads(src, p).unwrap(), want, "{src:?}");
        }
        // A root read the names do not declare is refused, wherever a scanner put the scope.
        for src in ["{{#each xs}}{{else\tif 1}}{{lookup context 'url'}}{{/each}}", "{{json nope}}", "{{json ../env}}"] {
            assert!(reads(src, p).is_err(), "{src:?}");
        }
    }
}
