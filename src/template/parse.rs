//! The grammar of block templates: packs' own parser for the subset of Handlebars that
//! docs/MANIFEST.md documents ("Blocks and helpers").
//!
//! It reads the translated text (placeholders already rewritten to `__v`) in one pass,
//! with an explicit stack for blocks and a bounded depth for blocks and subexpressions,
//! so a hostile template costs time linear in its length and never a deep recursion.
//! Where Handlebars (6.4.4, which packs used before) accepts a form this parser does
//! not implement (hash arguments, block parameters, raw blocks, partials, decorators,
//! `{{&x}}`), the template is refused with an error naming the form. Whitespace follows
//! Handlebars' rules, quirks included: `~` trims the text beside a tag, a block tag alone
//! on its line takes the line with it, and the differential test in `mod.rs` checks the
//! output against Handlebars itself.

use serde_json::Value;

/// How deep blocks (counting each `{{else if}}` link as a level) and subexpressions may
/// nest: far more than a command needs, and a bound on the renderer's recursion.
pub(super) const MAX_NESTING: usize = 64;

/// A parsed template: what to write, in order.
#[derive(Debug, Default)]
pub(super) struct Program {
    pub nodes: Vec<Node>,
}

#[derive(Debug)]
pub(super) enum Node {
    Text(String),
    /// A comment: writes nothing, but is an element for the whitespace rules.
    Comment,
    /// `{{expr}}`.
    Value(Expr),
    Block(Box<Block>),
}

/// `{{#helper params}}body{{else}}inverse{{/helper}}`; `{{else helper ...}}` chains are
/// a block in the inverse.
#[derive(Debug)]
pub(super) struct Block {
    pub helper: String,
    pub params: Vec<Expr>,
    pub body: Vec<Node>,
    pub inverse: Option<Vec<Node>>,
}

#[derive(Debug)]
pub(super) enum Expr {
    Path(Path),
    Literal(Value),
    /// A helper with its arguments (`{{eq a b}}`, `(len xs)`, or `{{json}}` alone).
    Call(String, Vec<Expr>),
}

/// `a.b`, `this`, `../a`, `@index`.
#[derive(Debug)]
pub(super) struct Path {
    /// The text as written.
    pub raw: String,
    /// `@name`: a block's variable.
    pub local: bool,
    /// How many `../`.
    pub up: usize,
    /// The names, `this` left out.
    pub segs: Vec<String>,
}

/// Helpers that render a value or text (usable in `{{ }}` and in subexpressions).
pub(super) const VALUE_HELPERS: &[&str] =
    &["lookup", "len", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not", "json", "urlencode", "__v"];
/// Helpers of `{{#...}}` blocks.
const BLOCK_HELPERS: &[&str] =
    &["if", "unless", "each", "with", "eq", "ne", "gt", "gte", "lt", "lte", "and", "or", "not"];
/// Names of Handlebars helpers packs does not offer where it would call them.
const BLOCK_ONLY: &[&str] = &["if", "unless", "each", "with"];
const REFUSED_HELPERS: &[&str] = &["raw", "log"];

/// A parse error: byte offset in the parsed text, and the message (without the
/// `invalid template: ` prefix).
pub(super) type Error = (usize, String);

/// Parse `src` (a translated template).
pub(super) fn parse(src: &str) -> Result<Program, Error> {
    Parser { src, pos: 0, depth: 0, last_long_close: src.rfind("--}}") }.template()
}

/// A block being read: its head and its `{{else helper}}` links, each with its body,
/// then the plain `{{else}}` body if any.
struct Open {
    at: usize,
    parts: Vec<(String, Vec<Expr>, Vec<Node>)>,
    otherwise: Option<Vec<Node>>,
}

impl Open {
    fn current(&mut self) -> &mut Vec<Node> {
        match &mut self.otherwise {
            Some(nodes) => nodes,
            None => &mut self.parts.last_mut().expect("a block has its head").2,
        }
    }

    fn build(self) -> Block {
        let mut inverse = self.otherwise;
        let mut block = None;
        for (helper, params, body) in self.parts.into_iter().rev() {
            if let Some(b) = block.take() {
                inverse = Some(vec![Node::Block(Box::new(b))]);
            }
            block = Some(Block { helper, params, body, inverse: inverse.take() });
        }
        block.expect("a block has its head")
    }
}

enum Tag {
    Comment,
    Value(Expr),
    Open(String, Vec<Expr>),
    Else,
    ElseChain(String, Vec<Expr>),
    Close(String),
}

struct Lexed {
    tag: Tag,
    end: usize,
    omit_before: bool,
    omit_after: bool,
}

fn is_symbol(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '$' | ':') || !c.is_ascii()
}

pub(super) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    depth: usize,
    /// Where the last `--}}` is: a `{{! --` after it is a short comment, found without a
    /// search to the end (which, once per comment, would make parsing quadratic).
    last_long_close: Option<usize>,
}

impl Parser<'_> {
    fn template(mut self) -> Result<Program, Error> {
        let src = self.src;
        let mut root: Vec<Node> = Vec::new();
        let mut open: Vec<Open> = Vec::new();
        // Handlebars' state: the end of the last element, whether the last tag trims the
        // text after it (`~}}`), and whether a standalone tag takes the rest of its line.
        let mut prev_end = 0;
        let mut omit_after = false;
        let mut trim_line = false;
        loop {
            let start = src[self.pos..].find("{{").map(|r| self.pos + r);
            let text_end = start.unwrap_or(src.len());
            if text_end > self.pos {
                let text = &src[self.pos..text_end];
                // Whitespace right after a tag is not text of its own: it joins the text
                // after it, or is handled at the next tag, or stays as it is at the end.
                if self.pos == 0 || !text.chars().all(is_space) {
                    let nodes = current(&mut root, &mut open);
                    nodes.push(Node::Text(raw_string(text, self.pos != 0 && omit_after, trim_line)));
                    trim_line = false;
                    prev_end = text_end;
                }
            }
            let Some(start) = start else { break };
            if src[..start].ends_with('\\') {
                return Err((
                    start - 1,
                    "a `\\` before `{{` (a Handlebars escape) is not supported in a template with blocks or helpers"
                        .into(),
                ));
            }
            self.pos = start;
            let lexed = self.tag()?;
            if start != prev_end && !omit_after {
                let nodes = current(&mut root, &mut open);
                nodes.push(Node::Text(raw_string(&src[prev_end..start], false, trim_line)));
                trim_line = false;
            }
            if lexed.omit_before {
                trim_end(current(&mut root, &mut open), str::trim_end);
            }
            let end = lexed.end;
            match lexed.tag {
                Tag::Comment => {
                    trim_line = standalone(src, start, end, current(&mut root, &mut open));
                    current(&mut root, &mut open).push(Node::Comment);
                }
                Tag::Value(expr) => {
                    omit_after = lexed.omit_after;
                    current(&mut root, &mut open).push(Node::Value(expr));
                }
                Tag::Open(helper, params) => {
                    omit_after = lexed.omit_after;
                    trim_line = standalone(src, start, end, current(&mut root, &mut open));
                    if depth(&open) >= MAX_NESTING {
                        return Err((start, format!("blocks nested more than {MAX_NESTING} deep")));
                    }
                    open.push(Open { at: start, parts: vec![(helper, params, Vec::new())], otherwise: None });
                }
                Tag::Else | Tag::ElseChain(..) => {
                    let Some(block) = open.last_mut() else {
                        return Err((start, "`{{else}}` outside a block".into()));
                    };
                    if block.otherwise.is_some() {
                        return Err((start, "`{{else}}` after the block's `{{else}}`".into()));
                    }
                    omit_after = lexed.omit_after;
                    trim_line = standalone(src, start, end, block.current());
                    match lexed.tag {
                        Tag::ElseChain(helper, params) => {
                            // Each link renders inside the one before it (its `{{else}}`).
                            if depth(&open) >= MAX_NESTING {
                                return Err((
                                    start,
                                    format!("blocks and `{{{{else if}}}}` links nested more than {MAX_NESTING} deep"),
                                ));
                            }
                            let block = open.last_mut().expect("checked above");
                            block.parts.push((helper, params, Vec::new()));
                        }
                        _ => block.otherwise = Some(Vec::new()),
                    }
                }
                Tag::Close(name) => {
                    let Some(mut block) = open.pop() else {
                        return Err((start, format!("`{{{{/{name}}}}}` closes a block that was never opened")));
                    };
                    omit_after = lexed.omit_after;
                    trim_line = standalone(src, start, end, block.current());
                    let head = &block.parts[0].0;
                    if *head != name {
                        return Err((start, format!("`{{{{/{name}}}}}` closes `{{{{#{head}}}}}`")));
                    }
                    let built = block.build();
                    current(&mut root, &mut open).push(Node::Block(Box::new(built)));
                }
            }
            prev_end = end;
            self.pos = end;
        }
        if let Some(block) = open.pop() {
            return Err((block.at, format!("`{{{{#{}}}}}` is never closed", block.parts[0].0)));
        }
        if prev_end < src.len() {
            root.push(Node::Text(raw_string(&src[prev_end..], omit_after, trim_line)));
        }
        Ok(Program { nodes: root })
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches(is_space).len();
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn symbols(&mut self) -> &str {
        let rest = &self.src[self.pos..];
        let n = rest.len() - rest.trim_start_matches(is_symbol).len();
        self.pos += n;
        &rest[..n]
    }

    /// What follows, to the end of the tag (at most 12 characters), for a message.
    fn snippet(&self) -> String {
        let rest = self.rest();
        let tag = rest.find("}}").map_or(rest, |end| &rest[..end + 2]);
        tag.chars().take(12).collect()
    }

    fn err<T>(&self, at: usize, message: impl Into<String>) -> Result<T, Error> {
        Err((at, message.into()))
    }

    /// One `{{ }}` tag at `self.pos`.
    fn tag(&mut self) -> Result<Lexed, Error> {
        let start = self.pos;
        if self.rest().starts_with("{{!") {
            // `{{!-- --}}` (Handlebars allows spaces before `--`), else `{{! }}`.
            let after = &self.src[start + 3..];
            let long = after.trim_start_matches(is_space).starts_with("--")
                && self.last_long_close.is_some_and(|at| at >= start + 3);
            let close = match if long { after.find("--}}") } else { None } {
                Some(len) => 3 + len + 4,
                _ => match after.find("}}") {
                    Some(len) => 3 + len + 2,
                    None => return self.err(start, "unclosed comment"),
                },
            };
            return Ok(Lexed { tag: Tag::Comment, end: start + close, omit_before: false, omit_after: false });
        }
        self.pos += 2;
        self.skip_space();
        let omit_before = self.eat("~");
        self.skip_space();
        let at = self.pos;
        let tag = match self.peek() {
            Some('!') => return self.err(start, "a comment starts right at `{{!`, with no `~` or space before `!`"),
            Some('#') => {
                self.pos += 1;
                self.skip_space();
                match self.peek() {
                    Some('*') => {
                        return self.err(start, "decorators (`{{#*inline}}`) are not supported in tool templates");
                    }
                    Some('>') => {
                        return self.err(start, "partial blocks (`{{#> name}}`) are not supported in tool templates");
                    }
                    _ => {}
                }
                let (helper, params) = self.helper_line(start, true)?;
                Tag::Open(helper, params)
            }
            Some('/') => {
                self.pos += 1;
                self.skip_space();
                Tag::Close(self.symbols().to_owned())
            }
            Some('^') => return self.err(start, "inverse sections (`{{^name}}`) are not supported; use `{{else}}`"),
            Some('>') => return self.err(start, "partials (`{{> name}}`) are not supported in tool templates"),
            Some('*') => return self.err(start, "decorators (`{{*name}}`) are not supported in tool templates"),
            Some('&') => return self.err(start, "`{{&name}}` is not supported; write `{{name}}` (nothing is escaped)"),
            Some('{') => {
                return self
                    .err(start, "raw blocks (`{{{{raw}}}}`) and `{{~{name}~}}` are not supported in tool templates");
            }
            Some('}') | None => return self.err(start, "empty placeholder `{{}}`"),
            _ => {
                let word_end = at + self.rest().len() - self.rest().trim_start_matches(is_symbol).len();
                let word = &self.src[at..word_end];
                if word == "else" {
                    self.pos = word_end;
                    self.skip_space();
                    if self.at_close() {
                        Tag::Else
                    } else {
                        let (helper, params) = self.helper_line(start, true)?;
                        Tag::ElseChain(helper, params)
                    }
                } else if let Some(rest) = word.strip_prefix("else") {
                    return self.err(
                        start,
                        format!(
                            "Handlebars reads `{{{{{word}}}}}` as `{{{{else {rest}}}}}`; write `{{{{this.{word}}}}}`"
                        ),
                    );
                } else {
                    Tag::Value(self.expression(start)?)
                }
            }
        };
        self.skip_space();
        let omit_after = self.eat("~");
        self.skip_space();
        if !self.eat("}}") {
            return self.err(start, format!("expected `}}}}` at `{}`", self.snippet()));
        }
        Ok(Lexed { tag, end: self.pos, omit_before, omit_after })
    }

    fn at_close(&self) -> bool {
        let rest = self.rest();
        rest.starts_with("}}") || rest.starts_with('~')
    }

    /// A block's helper and its arguments (`if x`, `each items`).
    fn helper_line(&mut self, start: usize, block: bool) -> Result<(String, Vec<Expr>), Error> {
        let name = self.symbols().to_owned();
        if name.is_empty() {
            return self.err(start, "a block names no helper");
        }
        if block && REFUSED_HELPERS.contains(&name.as_str()) || !block && BLOCK_ONLY.contains(&name.as_str()) {
            return self.err(start, format!("the `{name}` helper is not supported here"));
        }
        if block && !BLOCK_HELPERS.contains(&name.as_str()) && VALUE_HELPERS.contains(&name.as_str()) {
            return self.err(start, format!("`{name}` is not a block helper; write `{{{{{name} ...}}}}`"));
        }
        let params = self.params(start)?;
        Ok((name, params))
    }

    /// What `{{ }}` holds when it is not a block: a helper with arguments, or one name.
    fn expression(&mut self, start: usize) -> Result<Expr, Error> {
        let at = self.pos;
        let word = self.symbols().to_owned();
        let next = self.peek();
        if !word.is_empty() && !matches!(next, Some('.' | '/' | '[')) {
            self.skip_space();
            if !self.at_close() {
                if BLOCK_ONLY.contains(&word.as_str()) || REFUSED_HELPERS.contains(&word.as_str()) {
                    return self.err(start, format!("the `{word}` helper is not supported here"));
                }
                let params = self.params(start)?;
                if params.is_empty() {
                    return self.err(start, "expected `}}`");
                }
                return Ok(Expr::Call(word, params));
            }
        }
        self.pos = at;
        if self.peek() == Some('(') {
            return self.err(start, "a subexpression cannot be the whole expression; drop the parentheses");
        }
        let path = self.path(start)?;
        let name = path.raw.as_str();
        if BLOCK_ONLY.contains(&name) || REFUSED_HELPERS.contains(&name) {
            return self.err(start, format!("the `{name}` helper is not supported here"));
        }
        if VALUE_HELPERS.contains(&name) {
            return Ok(Expr::Call(path.raw, Vec::new()));
        }
        Ok(Expr::Path(path))
    }

    /// Arguments up to `~` or `}}` (or `)` in a subexpression).
    fn params(&mut self, start: usize) -> Result<Vec<Expr>, Error> {
        let mut params = Vec::new();
        loop {
            self.skip_space();
            if self.at_close() || self.peek() == Some(')') || self.peek().is_none() {
                return Ok(params);
            }
            params.push(self.param(start)?);
        }
    }

    fn param(&mut self, start: usize) -> Result<Expr, Error> {
        let at = self.pos;
        let rest = self.rest();
        let word_len = rest.len() - rest.trim_start_matches(is_symbol).len();
        let word = &rest[..word_len];
        if word_len > 0 && rest[word_len..].trim_start_matches(is_space).starts_with('=') {
            return self.err(start, format!("hash arguments (`{word}=...`) are not supported in tool templates"));
        }
        if word == "as" && rest[word_len..].trim_start_matches(is_space).starts_with('|') {
            return self.err(start, "block parameters (`as |x|`) are not supported in tool templates");
        }
        if matches!(word, "as" | "else") {
            return self.err(start, format!("`{word}` cannot be an argument"));
        }
        match self.peek() {
            Some(q @ ('"' | '\'')) => self.string(start, q),
            Some('[') => {
                self.err(start, "segment literals (`[name]`) and array literals are not supported in tool templates")
            }
            Some('{') => self.err(start, "object literals are not supported in tool templates"),
            Some('(') => {
                self.pos += 1;
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return self.err(start, format!("subexpressions nested more than {MAX_NESTING} deep"));
                }
                self.skip_space();
                let name = self.symbols().to_owned();
                if name.is_empty() {
                    return self.err(start, "a subexpression names no helper");
                }
                if BLOCK_ONLY.contains(&name.as_str()) || REFUSED_HELPERS.contains(&name.as_str()) {
                    return self.err(start, format!("the `{name}` helper is not supported here"));
                }
                if matches!(self.peek(), Some('.' | '/' | '[')) {
                    return self.err(start, format!("`({name}...`: a subexpression names a helper"));
                }
                let params = self.params(start)?;
                self.skip_space();
                if !self.eat(")") {
                    return self.err(start, "a subexpression is not closed with `)`");
                }
                self.depth -= 1;
                Ok(Expr::Call(name, params))
            }
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(start, at),
            _ => {
                for (lit, value) in [("true", Value::Bool(true)), ("false", Value::Bool(false)), ("null", Value::Null)]
                {
                    if word == lit {
                        self.pos += word_len;
                        return Ok(Expr::Literal(value));
                    }
                }
                Ok(Expr::Path(self.path(start)?))
            }
        }
    }

    fn number(&mut self, start: usize, at: usize) -> Result<Expr, Error> {
        let digits = |p: &mut Self| {
            let rest = p.rest();
            let n = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            p.pos += n;
            n
        };
        self.eat("-");
        if digits(self) == 0 {
            return self.bad_word(start, at);
        }
        self.eat(".");
        digits(self);
        let before_exp = self.pos;
        if self.eat("E") {
            self.eat("-");
            if digits(self) == 0 {
                self.pos = before_exp;
            }
        }
        if self.peek().is_some_and(is_symbol) {
            return self.bad_word(start, at);
        }
        let text = &self.src[at..self.pos];
        match serde_json::from_str::<Value>(text) {
            Ok(v) => Ok(Expr::Literal(v)),
            Err(_) => self.err(start, format!("invalid parameter `{text}`")),
        }
    }

    fn bad_word(&mut self, start: usize, at: usize) -> Result<Expr, Error> {
        self.pos = at;
        let word = self.symbols().to_owned();
        self.err(start, format!("`{word}` is neither a number nor a name (a name starts with a letter or `_`)"))
    }

    /// A string literal, as Handlebars reads it (JSON escapes; `\'` in single quotes).
    fn string(&mut self, start: usize, quote: char) -> Result<Expr, Error> {
        let at = self.pos;
        self.pos += 1;
        loop {
            let Some(c) = self.peek() else { return self.err(start, "a string is never closed") };
            self.pos += c.len_utf8();
            if c == quote {
                break;
            }
            if c == '\\' {
                match self.peek() {
                    Some(e) if e == quote || matches!(e, '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => self.pos += 1,
                    Some('u') if self.rest().get(1..5).is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit())) => {
                        self.pos += 5;
                    }
                    _ => return self.err(start, "a string holds an escape Handlebars does not know"),
                }
            }
        }
        let text = &self.src[at..self.pos];
        if text.contains("}}") {
            return self.err(start, "`}}` inside a string is not supported in tool templates");
        }
        let json = if quote == '"' {
            text.to_owned()
        } else {
            format!("\"{}\"", text[1..text.len() - 1].replace("\\'", "'").replace('"', "\\\""))
        };
        match serde_json::from_str::<Value>(&json) {
            Ok(v) => Ok(Expr::Literal(v)),
            Err(_) => self.err(start, format!("invalid parameter `{text}`")),
        }
    }

    /// A path: `a`, `a.b`, `this`, `this.a`, `./a`, `../a`, `@index`.
    fn path(&mut self, start: usize) -> Result<Path, Error> {
        let at = self.pos;
        if !self.eat("this.") && !self.eat("this/") {
            self.eat("./");
        }
        if self.rest().starts_with("@root") {
            return self.err(start, "`@root` is not supported in tool templates; name the value instead");
        }
        let local = self.eat("@");
        let mut up = 0;
        while self.rest().starts_with("..") && matches!(self.rest()[2..].chars().next(), Some('.' | '/')) {
            self.pos += 3;
            up += 1;
        }
        let mut segs = Vec::new();
        loop {
            if self.peek() == Some('[') {
                return self.err(start, "segment literals (`[name]`) are not supported in tool templates");
            }
            let id = self.symbols().to_owned();
            if id.is_empty() {
                return self.err(start, format!("expected a name at `{}`", self.snippet()));
            }
            if id != "this" {
                segs.push(id);
            }
            if matches!(self.peek(), Some('.' | '/')) {
                self.pos += 1;
            } else {
                break;
            }
        }
        Ok(Path { raw: self.src[at..self.pos].to_owned(), local, up, segs })
    }
}

/// How deep the renderer recurses at this point: a level per open block and per
/// `{{else helper}}` link it has (a link is a block in the inverse of the one before).
fn depth(open: &[Open]) -> usize {
    open.iter().map(|b| b.parts.len()).sum()
}

/// The elements a tag adds to: the innermost open block's current body, or the root.
fn current<'a>(root: &'a mut Vec<Node>, open: &'a mut [Open]) -> &'a mut Vec<Node> {
    match open.last_mut() {
        Some(block) => block.current(),
        None => root,
    }
}

/// Trim the end of the last element when it is text.
fn trim_end(nodes: &mut [Node], trim: fn(&str) -> &str) {
    if let Some(Node::Text(t)) = nodes.last_mut() {
        let len = trim(t).len();
        t.truncate(len);
    }
}

/// Text as Handlebars keeps it: all leading whitespace trimmed after `~}}`; after a
/// standalone tag, the spaces and the line break that end its line.
fn raw_string(text: &str, trim_start: bool, trim_line: bool) -> String {
    if trim_start {
        text.trim_start().to_owned()
    } else if trim_line {
        let s = text.trim_start_matches([' ', '\t']);
        s.strip_prefix("\r\n").or_else(|| s.strip_prefix('\n')).unwrap_or(s).to_owned()
    } else {
        text.to_owned()
    }
}

/// Handlebars' standalone rule: a tag with only spaces before it on its line and only
/// spaces and a line break (or the end) after it takes those spaces with it. Returns
/// whether the rest of the line after it is to be dropped.
fn standalone(src: &str, start: usize, end: usize, nodes: &mut [Node]) -> bool {
    let after = &src[end..];
    let line_ends = after.trim_start_matches([' ', '\t']).starts_with(['\n', '\r']) || after.is_empty();
    if !line_ends {
        return false;
    }
    let before = src[..start].trim_end_matches([' ', '\t']);
    let line_starts = before.ends_with(['\n', '\r']) || before.is_empty();
    if line_starts {
        trim_end(nodes, |t| t.trim_end_matches([' ', '\t']));
    }
    line_starts
}
