//! Python call syntax as Llama writes its calls: `NAME(key=VALUE, …)`, the values Python
//! literals as `ast.literal_eval` reads them (strings in either quote, triple-quoted, with
//! escapes or raw, adjacent strings joined; integers in any base, with `_`; floats; `True`,
//! `False`, `None`; lists, tuples as lists, dicts with string keys), read without evaluating
//! anything. What JSON cannot hold (bytes, complex numbers, sets, integers beyond 64 bits,
//! dict keys that are not strings, infinite floats) is an error, never a changed value.

use serde_json::{Map, Number, Value};

use super::raw::{CallError, error};

/// The deepest nesting of lists and dicts a value may have (a model's text must not
/// exhaust the stack).
const MAX_DEPTH: usize = 64;

/// The call `NAME(key=value, …)` at `pos` (after whitespace): its name (dotted names
/// allowed: `brave_search.call`), its keyword arguments, and the offset just past its `)`.
/// An error says whether the text ended inside the call.
pub(crate) fn call_at(text: &str, pos: usize) -> Result<(String, Map<String, Value>, usize), CallError> {
    let mut r = Reader { text, pos, depth: 0 };
    r.ws();
    let mut name = r.ident()?;
    while r.eat(".") {
        name.push('.');
        name.push_str(&r.ident()?);
    }
    r.ws();
    r.expect("(")?;
    let mut args = Map::new();
    loop {
        r.ws();
        if r.eat(")") {
            return Ok((name, args, r.pos));
        }
        let at = r.pos;
        let key = r.ident()?;
        r.ws();
        if !r.eat("=") {
            r.end()?;
            return Err(error(
                format!("`{name}` has a positional argument: each must be named (`key=value`)"),
                at,
                false,
            ));
        }
        let value = r.value()?;
        if args.insert(key.clone(), value).is_some() {
            return Err(error(format!("the argument `{key}` of `{name}` is given twice"), at, false));
        }
        r.ws();
        if r.eat(",") {
            continue;
        }
        r.end()?;
        if !r.rest().starts_with(')') {
            return Err(error(format!("expected `,` or `)` in the call of `{name}`"), r.pos, false));
        }
    }
}

/// Whether `s` (after whitespace) starts a call `NAME(`: Some(true) or Some(false) when the
/// text decides it, None when it ends first. `dotted`: only a `NAME.call(` counts.
pub(crate) fn starts_call(s: &str, dotted: bool) -> Option<bool> {
    let s = s.trim_start();
    let name_len = s.find(|c: char| !name_char(c)).unwrap_or(s.len());
    if s.starts_with(|c: char| c.is_ascii_digit()) || (name_len == 0 && !s.is_empty()) {
        return Some(false);
    }
    if name_len == s.len() {
        return None;
    }
    let mut rest = &s[name_len..];
    if dotted {
        let call = ".call";
        if rest.len() < call.len() {
            return if call.starts_with(rest) { None } else { Some(false) };
        }
        let Some(r) = rest.strip_prefix(call) else { return Some(false) };
        rest = r;
    }
    let rest = rest.trim_start();
    if rest.is_empty() { None } else { Some(rest.starts_with('(')) }
}

/// A character of a name.
fn name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// While [`starts_call`] is None for `s`: the characters that, added to `s`, leave it None
/// (the run `s` ends in: the spaces before or after the name, or the name itself); None
/// when `s` ends inside the `.call` of a dotted name (a few characters decide it).
pub(crate) fn undecided_run(s: &str, dotted: bool) -> Option<fn(char) -> bool> {
    let s = s.trim_start();
    let name_len = s.find(|c: char| !name_char(c)).unwrap_or(s.len());
    if s.is_empty() {
        return Some(super::raw::space);
    }
    if name_len == s.len() {
        return Some(name_char);
    }
    let rest = &s[name_len..];
    if dotted && rest.len() < ".call".len() {
        return None;
    }
    Some(super::raw::space)
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, s: &str) -> bool {
        let ok = self.rest().starts_with(s);
        if ok {
            self.pos += s.len();
        }
        ok
    }

    /// An error when the text ended here: the call was cut off.
    fn end(&self) -> Result<(), CallError> {
        if self.rest().is_empty() { Err(error("the call ends before its `)`", self.pos, true)) } else { Ok(()) }
    }

    fn expect(&mut self, s: &str) -> Result<(), CallError> {
        if self.eat(s) {
            return Ok(());
        }
        self.end()?;
        Err(error(format!("expected `{s}`"), self.pos, false))
    }

    fn ident(&mut self) -> Result<String, CallError> {
        let rest = self.rest();
        let n = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if n == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            self.end()?;
            return Err(error("expected a name", self.pos, false));
        }
        if n == rest.len() {
            return Err(error("the call ends inside a name", self.pos, true));
        }
        self.pos += n;
        Ok(rest[..n].to_owned())
    }

    fn value(&mut self) -> Result<Value, CallError> {
        self.ws();
        self.end()?;
        let at = self.pos;
        let rest = self.rest();
        let c = rest.chars().next().unwrap_or_default();
        match c {
            '[' | '(' | '{' => {
                if self.depth >= MAX_DEPTH {
                    return Err(error(format!("the value nests deeper than {MAX_DEPTH}"), at, false));
                }
                self.depth += 1;
                let v = match c {
                    '{' => self.dict(),
                    _ => self.list(c),
                };
                self.depth -= 1;
                v
            }
            '"' | '\'' => self.strings(),
            '+' | '-' | '.' | '0'..='9' => self.number(),
            _ => {
                let n = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
                let word = &rest[..n];
                if n == rest.len() {
                    return Err(error("the call ends inside a value", at, true));
                }
                let v = match word {
                    "True" => Value::Bool(true),
                    "False" => Value::Bool(false),
                    "None" => Value::Null,
                    _ if rest[n..].starts_with(['"', '\'']) && word.len() <= 2 => {
                        let w = word.to_ascii_lowercase();
                        if w == "r" || w == "u" {
                            return self.strings();
                        }
                        return Err(error(format!("`{word}` strings are not text literals"), at, false));
                    }
                    _ => return Err(error(format!("`{word}` is not a Python literal"), at, false)),
                };
                self.pos += n;
                Ok(v)
            }
        }
    }

    /// A list `[…]` or a tuple `(…)` (a list in JSON; `(v)` is `v`).
    fn list(&mut self, open: char) -> Result<Value, CallError> {
        let close = if open == '[' { "]" } else { ")" };
        self.pos += 1;
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            self.ws();
            if self.eat(close) {
                if open == '(' && items.len() == 1 && !comma {
                    return Ok(items.pop().unwrap_or_default());
                }
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.ws();
            comma = self.eat(",");
            if !comma {
                self.end()?;
                if !self.rest().starts_with(close) {
                    return Err(error(format!("expected `,` or `{close}`"), self.pos, false));
                }
            }
        }
    }

    fn dict(&mut self) -> Result<Value, CallError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.ws();
            if self.eat("}") {
                return Ok(Value::Object(map));
            }
            let at = self.pos;
            let key = self.value()?;
            self.ws();
            if !self.eat(":") {
                self.end()?;
                return Err(error("expected `:` in a dict (sets are not read)", self.pos, false));
            }
            let Value::String(key) = key else {
                return Err(error("a dict key must be a string (JSON's keys are)", at, false));
            };
            let value = self.value()?;
            if map.contains_key(&key) {
                // Python keeps the last; the text says both (as JSON's key twice does).
                return Err(error(format!("the key `{key}` is given twice in a dict"), at, false));
            }
            map.insert(key, value);
            self.ws();
            if !self.eat(",") {
                self.end()?;
                if !self.rest().starts_with('}') {
                    return Err(error("expected `,` or `}`", self.pos, false));
                }
            }
        }
    }

    /// One string literal, or several written one after another (joined, as Python does).
    fn strings(&mut self) -> Result<Value, CallError> {
        let mut s = self.string()?;
        loop {
            let save = self.pos;
            self.ws();
            let rest = self.rest();
            let prefixed =
                rest.len() > 1 && rest.starts_with(['r', 'R', 'u', 'U']) && rest[1..].starts_with(['"', '\'']);
            if rest.starts_with(['"', '\'']) || prefixed {
                s.push_str(&self.string()?);
            } else if rest.is_empty() || (rest.len() == 1 && rest.starts_with(['r', 'R', 'u', 'U'])) {
                // More may follow: the text ends here.
                return Err(error("the call ends after a string", self.pos, true));
            } else {
                self.pos = save;
                return Ok(Value::String(s));
            }
        }
    }

    fn string(&mut self) -> Result<String, CallError> {
        let at = self.pos;
        let mut raw = false;
        if self.eat("r") || self.eat("R") {
            raw = true;
        } else {
            let _ = self.eat("u") || self.eat("U");
        }
        let rest = self.rest();
        let quote = &rest[..1];
        let triple = quote.repeat(3);
        let close = if rest.starts_with(&triple) { triple.as_str() } else { quote };
        self.pos += close.len();
        let mut out = String::new();
        loop {
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Err(error("the text ends inside a string", at, true));
            };
            if rest.starts_with(close) {
                self.pos += close.len();
                return Ok(out);
            }
            if c == '\n' && close.len() == 1 {
                return Err(error("a string in one quote ends at its line", at, false));
            }
            if c != '\\' {
                out.push(c);
                self.pos += c.len_utf8();
                continue;
            }
            let Some(e) = rest[1..].chars().next() else {
                return Err(error("the text ends inside a string", at, true));
            };
            if raw {
                // A raw string keeps the backslash (it still keeps the quote from ending it).
                out.push('\\');
                out.push(e);
                self.pos += 1 + e.len_utf8();
                continue;
            }
            self.pos += 1 + e.len_utf8();
            match e {
                '\n' => {}
                '\\' | '\'' | '"' => out.push(e),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'a' => out.push('\u{7}'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'v' => out.push('\u{b}'),
                '0'..='7' => {
                    let digits: String = std::iter::once(e)
                        .chain(self.rest().chars().take(2).take_while(|d| ('0'..='7').contains(d)))
                        .collect();
                    self.pos += digits.len() - 1;
                    let code = u32::from_str_radix(&digits, 8).unwrap_or_default();
                    out.push(char::from_u32(code).unwrap_or_default());
                }
                'x' | 'u' | 'U' => {
                    let n = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let hex = self.rest().get(..n).unwrap_or(self.rest());
                    if hex.len() < n && self.rest().chars().all(|d| d.is_ascii_hexdigit()) {
                        return Err(error("the text ends inside a string", at, true));
                    }
                    let code = (hex.len() == n && hex.chars().all(|d| d.is_ascii_hexdigit()))
                        .then(|| u32::from_str_radix(hex, 16).ok())
                        .flatten()
                        .and_then(char::from_u32);
                    let Some(ch) = code else {
                        return Err(error(
                            format!("a `\\{e}` escape needs {n} hex digits of a character"),
                            self.pos,
                            false,
                        ));
                    };
                    out.push(ch);
                    self.pos += n;
                }
                'N' => return Err(error("`\\N{…}` escapes are not read", self.pos, false)),
                other => {
                    // Python keeps an unknown escape as written.
                    out.push('\\');
                    out.push(other);
                }
            }
        }
    }

    fn number(&mut self) -> Result<Value, CallError> {
        let at = self.pos;
        let mut negative = false;
        loop {
            self.ws();
            if self.eat("-") {
                negative = !negative;
            } else if !self.eat("+") {
                break;
            }
        }
        let rest = self.rest();
        let n = rest
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_alphanumeric()
                    || c == '_'
                    || c == '.'
                    || ((c == '+' || c == '-') && i > 0 && rest[..i].ends_with(['e', 'E']) && !rest.starts_with("0x")))
            })
            .map_or(rest.len(), |(i, _)| i);
        if n == rest.len() {
            return Err(error("the call ends inside a number", at, true));
        }
        let word = &rest[..n];
        let bad = || error(format!("`{word}` is not a number JSON can hold"), at, false);
        if word.contains("__") || word.ends_with('_') || word.starts_with('_') {
            return Err(bad());
        }
        let digits = word.replace('_', "");
        let radix = match digits.get(..2).map(str::to_ascii_lowercase).as_deref() {
            Some("0x") => 16,
            Some("0o") => 8,
            Some("0b") => 2,
            _ => 10,
        };
        self.pos += n;
        if radix != 10 || !digits.contains(['.', 'e', 'E', 'j', 'J']) {
            let body = if radix == 10 { &digits[..] } else { &digits[2..] };
            if radix == 10 && body.len() > 1 && body.starts_with('0') && body.chars().any(|c| c != '0') {
                return Err(bad());
            }
            let magnitude = u128::from_str_radix(body, radix).map_err(|_| bad())?;
            let number = if negative {
                i64::try_from(magnitude)
                    .ok()
                    .map(|m| Number::from(-m))
                    .or((magnitude == 1 << 63).then(|| Number::from(i64::MIN)))
            } else {
                u64::try_from(magnitude).ok().map(Number::from)
            };
            return number.map(Value::Number).ok_or_else(bad);
        }
        if digits.ends_with(['j', 'J']) || !digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(bad());
        }
        let f: f64 = digits.parse().map_err(|_| bad())?;
        let f = if negative { -f } else { f };
        Number::from_f64(f).filter(|_| f.is_finite()).map(Value::Number).ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(text: &str) -> Value {
        let (_, args, end) = call_at(text, 0).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(end, text.len(), "{text}");
        Value::Object(args)
    }

    #[test]
    fn literals_read_as_python_reads_them() {
        assert_eq!(
            args(
                r#"f(a="x 'y'", b='say "hi"', c="tab\there\n", d='''one
two''', e=r'C:\new', f="a" 'b', g="\x41\u00e9\U0001F600\101\q", h="東京")"#
            ),
            json!({"a": "x 'y'", "b": "say \"hi\"", "c": "tab\there\n", "d": "one\ntwo", "e": "C:\\new", "f": "ab", "g": "Aé😀A\\q", "h": "東京"})
        );
        assert_eq!(
            args("f(a=1, b=-2, c=1_000, d=0x1F, e=0o17, f=0b101, g=1.5, h=1e5, i=-.5, j=True, k=False, l=None)"),
            json!({"a": 1, "b": -2, "c": 1000, "d": 31, "e": 15, "f": 5, "g": 1.5, "h": 100000.0, "i": -0.5, "j": true, "k": false, "l": null})
        );
        assert_eq!(
            args("f(a=[1, 'x', [None]], b=(1, 2), c=(3), d=(), e={'k': {'n': [True]}, \"j\": 2,}, f=[])"),
            json!({"a": [1, "x", [null]], "b": [1, 2], "c": 3, "d": [], "e": {"k": {"n": [true]}, "j": 2}, "f": []})
        );
        assert_eq!(args("f()"), json!({}));
        assert_eq!(args("f( a = 1 , )"), json!({"a": 1}));
    }

    #[test]
    fn what_json_cannot_hold_and_what_is_not_a_literal_are_errors() {
        for text in [
            "f(a=b'x')",
            "f(a=1j)",
            "f(a={1, 2})",
            "f(a={1: 2})",
            "f(a=99999999999999999999)",
            "f(a=1e999)",
            "f(a=007)",
            "f(a=os.system('x'))",
            "f(a=x)",
            "f(1)",
            "f(a=1, a=2)",
            "f(a=1 b=2)",
            "f(a='x\ny')",
            "f(a=f'{x}')",
        ] {
            let e = call_at(text, 0).expect_err(text);
            assert!(!e.incomplete, "{text}: {e}");
        }
        for text in ["f(a=1", "f(a='x", "f(a=[1, 2", "f(a=\"\\u00", "f(a", "f", "f(a=Tr", "f(a='x' "] {
            let e = call_at(text, 0).expect_err(text);
            assert!(e.incomplete, "{text}: {e}");
        }
    }

    #[test]
    fn a_call_start_is_decided_as_soon_as_the_text_says() {
        assert_eq!(starts_call("get_weather(", false), Some(true));
        assert_eq!(starts_call("get_weather ", false), None);
        assert_eq!(starts_call("get_wea", false), None);
        assert_eq!(starts_call("see note]", false), Some(false));
        assert_eq!(starts_call("1, 2]", false), Some(false));
        assert_eq!(starts_call("brave_search.call(", true), Some(true));
        assert_eq!(starts_call("brave_search.ca", true), None);
        assert_eq!(starts_call("print(1)", true), Some(false));
        assert_eq!(starts_call("x.y(", true), Some(false));
        // While undecided: the run the text ends in, that more of decides nothing.
        for (s, dotted, more, other) in [
            ("  ", false, " ", "f"),
            ("  get_wea", false, "ther", " "),
            ("get_weather  ", false, " ", "("),
            ("brave_search", true, "_x", "."),
            ("brave_search.call ", true, " ", "("),
        ] {
            assert_eq!(starts_call(s, dotted), None, "{s}");
            let run = undecided_run(s, dotted).expect(s);
            assert!(more.chars().all(run) && !other.chars().all(run), "{s}");
            assert_eq!(starts_call(&format!("{s}{more}"), dotted), None, "{s}{more}");
        }
        assert!(undecided_run("brave_search.ca", true).is_none());
    }
}
