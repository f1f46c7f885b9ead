//! Rendering a parsed block template: Handlebars' semantics (6.4.4, non-strict, nothing
//! escaped) for the subset [`super::parse`] reads.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::parse::{Block, Expr, Node, Path, Program};
use super::{RenderError, lookup_marked, marked, require_secret, urlencode, value_text};

/// Where rendered text goes; `Err` stops the render (the output is full).
pub(super) trait Sink {
    fn write(&mut self, text: &str) -> Result<(), RenderError>;
}

impl Sink for String {
    fn write(&mut self, text: &str) -> Result<(), RenderError> {
        self.push_str(text);
        Ok(())
    }
}

/// Render `program` with `root` (the values), writing values between markers when `marks`.
pub(super) fn render(program: &Program, root: &Value, marks: bool, out: &mut dyn Sink) -> Result<(), RenderError> {
    render_within(program, root, marks, MAX_RENDER_STEPS, out).map(|_| ())
}

/// The most work one render may do, in steps: an element visited, an `#each` item, a value
/// copied or compared (a step per value it holds, and per 64 bytes of text). A manifest's
/// command renders in thousands; one that writes the whole 1 MiB the output may hold
/// (each item a byte) in a few million. Nested `#each` blocks over small arrays, or a large
/// value read once per item, would otherwise run for seconds or forever while writing
/// nothing the output cap could stop.
pub(super) const MAX_RENDER_STEPS: u64 = 10_000_000;

/// Why a render stopped at [`MAX_RENDER_STEPS`].
pub(super) const TOO_MUCH_WORK: &str =
    "takes more than 10,000,000 steps to render with these values (blocks repeat too much work)";

/// [`render`] with a budget of `steps`; the steps it took.
pub(super) fn render_within(
    program: &Program,
    root: &Value,
    marks: bool,
    steps: u64,
    out: &mut dyn Sink,
) -> Result<u64, RenderError> {
    let mut r =
        Renderer { root, marks, steps, scopes: vec![Scope { base: Base::Path(Vec::new()), locals: Map::new() }] };
    r.nodes(&program.nodes, out)?;
    Ok(steps - r.steps)
}

/// The work of copying or comparing `v`: a step per value and per 64 bytes of text,
/// counted up to `cap` (past which the count stops: the render stops anyway).
fn weight(v: &Value, cap: u64) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total += 1;
        match v {
            Value::String(s) => total += s.len() as u64 / 64,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                total += map.keys().map(|k| k.len() as u64 / 64).sum::<u64>();
                stack.extend(map.values());
            }
            _ => {}
        }
        if total > cap {
            break;
        }
    }
    total
}

/// The work of copying `names`: a step per 64 bytes.
fn text_weight(names: &[String]) -> u64 {
    names.iter().map(|n| n.len() as u64).sum::<u64>() / 64
}

/// What a block sees as `this`: a place in the values, or a value made on the way (a
/// literal, a helper's result, an item of such a value).
enum Base<'v> {
    Path(Vec<String>),
    /// Borrowed from the values when it is part of them (`(lookup obj "o")`), else its own.
    Value(Cow<'v, Value>),
}

struct Scope<'v> {
    base: Base<'v>,
    /// `@index`, `@key`, `@first`, `@last`.
    locals: Map<String, Value>,
}

/// A value an expression reads (or `None`, missing), and where in the values it is (for a
/// path read from a place in the values, present or not).
struct Got<'v> {
    value: Option<Cow<'v, Value>>,
    path: Option<Vec<String>>,
}

const NULL: Value = Value::Null;
static NULL_VALUE: Value = Value::Null;

impl Got<'_> {
    fn value(&self) -> &Value {
        self.value.as_deref().unwrap_or(&NULL)
    }

    fn derived(v: Value) -> Self {
        Got { value: Some(Cow::Owned(v)), path: None }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(f64::is_normal),
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A value as Handlebars writes it: arrays as `[a, b]`, objects as `[object]`.
fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        Value::Array(a) => format!("[{}]", a.iter().map(display).collect::<Vec<_>>().join(", ")),
        Value::Object(_) => "[object]".to_owned(),
    }
}

fn error(message: String) -> RenderError {
    RenderError::new(message)
}

fn missing_param(helper: &str, index: usize) -> RenderError {
    error(format!("Helper/Decorator {helper} param at index {index} required but not found"))
}

/// One step into a value: an array takes an index only.
fn step<'v>(v: &'v Value, seg: &str) -> Result<Option<&'v Value>, RenderError> {
    match v {
        Value::Array(items) => match seg.parse::<usize>() {
            Ok(i) => Ok(items.get(i)),
            Err(_) => Err(error(format!("Cannot access array/vector with string index, {seg}"))),
        },
        Value::Object(map) => Ok(map.get(seg)),
        _ => Ok(None),
    }
}

fn walk<'v>(mut v: &'v Value, segs: &[String]) -> Result<Option<&'v Value>, RenderError> {
    for seg in segs {
        match step(v, seg)? {
            Some(next) => v = next,
            None => return Ok(None),
        }
    }
    Ok(Some(v))
}

/// Compare like Handlebars' `gt`/`lt`: numbers by value (exactly), strings and booleans
/// among themselves, a number with a string that reads as one; anything else is unordered.
fn compare(x: &Value, y: &Value) -> Option<std::cmp::Ordering> {
    use serde_json::Number;
    fn nums(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
        let int = |n: &Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
        match (int(a), int(b)) {
            (Some(a), Some(b)) => Some(a.cmp(&b)),
            (Some(a), None) => int_float(a, b.as_f64()?),
            (None, Some(b)) => int_float(b, a.as_f64()?).map(std::cmp::Ordering::reverse),
            (None, None) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        }
    }
    fn int_float(a: i128, b: f64) -> Option<std::cmp::Ordering> {
        if b.is_nan() {
            return None;
        }
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        match (a as f64).partial_cmp(&b)? {
            std::cmp::Ordering::Equal => Some(a.cmp(&(b as i128))),
            other => Some(other),
        }
    }
    let num = |s: &str| s.parse::<Number>().ok();
    match (x, y) {
        (Value::Number(a), Value::Number(b)) => nums(a, b),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::String(b)) => nums(a, &num(b)?),
        (Value::String(a), Value::Number(b)) => nums(b, &num(a)?).map(std::cmp::Ordering::reverse),
        _ => None,
    }
}

struct Renderer<'v> {
    root: &'v Value,
    marks: bool,
    /// Steps left ([`MAX_RENDER_STEPS`]).
    steps: u64,
    /// Innermost last; the first is the values themselves.
    scopes: Vec<Scope<'v>>,
}

impl<'v> Renderer<'v> {
    /// Spend `n` steps of the budget, or stop the render.
    fn charge(&mut self, n: u64) -> Result<(), RenderError> {
        match self.steps.checked_sub(n) {
            Some(left) => {
                self.steps = left;
                Ok(())
            }
            None => {
                self.steps = 0;
                Err(error(TOO_MUCH_WORK.to_owned()))
            }
        }
    }

    /// A copy of `v`, paid for.
    fn copy(&mut self, v: &Value) -> Result<Value, RenderError> {
        self.charge(weight(v, self.steps))?;
        Ok(v.clone())
    }

    fn nodes(&mut self, nodes: &[Node], out: &mut dyn Sink) -> Result<(), RenderError> {
        for node in nodes {
            self.charge(1)?;
            match node {
                Node::Text(t) => {
                    if !t.is_empty() {
                        out.write(t)?;
                    }
                }
                Node::Comment => {}
                Node::Value(Expr::Path(p)) => {
                    let got = self.path(p)?;
                    if got.value.is_some() {
                        self.charge(weight(got.value(), self.steps))?;
                        let text = display(got.value());
                        self.escaped(&text, out)?;
                    } else if let Some(key) = missing_secret_of(p, &got) {
                        // `{{../secret.T}}` from inside a block, as `{{secret.T}}` does.
                        return Err(super::missing_secret(key));
                    }
                }
                Node::Value(Expr::Call(name, params)) => self.call(name, params, out)?,
                Node::Value(Expr::Literal(v)) => self.escaped(&display(v), out)?,
                Node::Block(b) => self.block(b, out)?,
            }
        }
        Ok(())
    }

    /// Write a value's text the way Handlebars' escape hook gets it: marked while marking.
    fn escaped(&self, text: &str, out: &mut dyn Sink) -> Result<(), RenderError> {
        if text.is_empty() {
            return Ok(());
        }
        if self.marks { out.write(&marked("", text)) } else { out.write(text) }
    }

    fn scope(&self, up: usize) -> &Scope<'v> {
        let innermost = self.scopes.len() - 1;
        // `../` beyond the outermost scope reads the innermost, as Handlebars does.
        self.scopes.get(innermost.wrapping_sub(up)).filter(|_| up <= innermost).unwrap_or(&self.scopes[innermost])
    }

    fn path(&mut self, p: &Path) -> Result<Got<'v>, RenderError> {
        if p.local {
            let Some(name) = p.segs.first() else { return Ok(Got { value: None, path: None }) };
            let innermost = self.scopes.len() - 1;
            let v = (p.up <= innermost).then(|| self.scopes[innermost - p.up].locals.get(name)).flatten().cloned();
            // `@key` is a copy of an object's key, which a call may make long.
            if let Some(v) = &v {
                self.charge(weight(v, self.steps))?;
            }
            return Ok(Got { value: v.map(Cow::Owned), path: None });
        }
        let found = match &self.scope(p.up).base {
            Base::Value(Cow::Borrowed(v)) => {
                let v: &'v Value = v;
                return Ok(Got { value: walk(v, &p.segs)?.map(Cow::Borrowed), path: None });
            }
            Base::Value(Cow::Owned(v)) => Err(walk(v, &p.segs)?.cloned()),
            Base::Path(base) => {
                let full: Vec<String> = base.iter().chain(&p.segs).cloned().collect();
                // A step per name, and per 64 bytes of them: a key of the values (a base
                // inside `#each` over an object) is as long as a call makes it.
                self.charge(full.len() as u64 + text_weight(&full))?;
                Ok((walk(self.root, &full)?, full))
            }
        };
        match found {
            Ok((v, full)) => Ok(Got { value: v.map(Cow::Borrowed), path: Some(full) }),
            // A value made on the way: what it is taken from is not the values', so it is copied.
            Err(v) => {
                if let Some(v) = &v {
                    self.charge(weight(v, self.steps))?;
                }
                Ok(Got { value: v.map(Cow::Owned), path: None })
            }
        }
    }

    /// A `json`/`urlencode` argument: its value, and the tag its text is marked with (see
    /// [`argument_tag`]). `env.`, `secret.` and `context.` are read from the values
    /// themselves, as `{{env.X}}` is, wherever the helper is; another path is a
    /// parameter's (or the context's) only when read from the values themselves, and a
    /// block's value when read from an item (`{{#each items}}{{json name}}{{/each}}`
    /// writes an item's `name`, not the parameter `name`).
    fn written(&mut self, e: Option<&Expr>) -> Result<(Got<'v>, Option<String>), RenderError> {
        let p = match e {
            None => return Ok((Got { value: None, path: None }, None)),
            Some(Expr::Literal(v)) => return Ok((Got::derived(v.clone()), None)),
            // A subexpression's value may be a call's value (`(lookup meta "k")`): only
            // the block knows which, so it is marked as such.
            Some(e @ Expr::Call(..)) => return Ok((self.expr(e)?, Some(String::new()))),
            Some(Expr::Path(p)) => p,
        };
        let got = if namespaced(p) {
            // Read where Handlebars reads it too, for its errors (`context.url` in an array).
            self.path(p)?;
            let full = p.segs.clone();
            Got { value: walk(self.root, &full)?.map(Cow::Borrowed), path: Some(full) }
        } else {
            self.path(p)?
        };
        if let Some(key) = missing_secret_of(p, &got) {
            return Err(super::missing_secret(key));
        }
        let tag = if got.value.is_none() {
            None // `null` or nothing: no value's text
        } else if from_root(p, &got) {
            argument_tag(&p.segs)
        } else {
            Some(String::new())
        };
        Ok((got, tag))
    }

    fn expr(&mut self, e: &Expr) -> Result<Got<'v>, RenderError> {
        match e {
            Expr::Literal(v) => Ok(Got::derived(v.clone())),
            Expr::Path(p) => self.path(p),
            Expr::Call(name, params) if name == "lookup" => self.lookup(params),
            Expr::Call(name, params) => self.value_of(name, params).map(Got::derived),
        }
    }

    /// `lookup c i`: the item or field, borrowed from the values when `c` is part of them.
    fn lookup(&mut self, params: &[Expr]) -> Result<Got<'v>, RenderError> {
        fn find<'a>(c: &'a Value, i: &Value) -> &'a Value {
            let found = match c {
                Value::Array(items) => i.as_u64().and_then(|u| usize::try_from(u).ok()).and_then(|u| items.get(u)),
                Value::Object(m) => i.as_str().and_then(|k| m.get(k)),
                _ => None,
            };
            found.unwrap_or(&NULL_VALUE)
        }
        let args = self.args(params)?;
        let (Some(c), Some(i)) = (args.first(), args.get(1)) else {
            return Err(missing_param("lookup", args.len()));
        };
        let value = match &c.value {
            Some(Cow::Borrowed(c)) => Cow::Borrowed(find(c, i.value())),
            Some(Cow::Owned(c)) => Cow::Owned(self.copy(find(c, i.value()))?),
            None => Cow::Borrowed(&NULL_VALUE),
        };
        Ok(Got { value: Some(value), path: None })
    }

    fn args(&mut self, params: &[Expr]) -> Result<Vec<Got<'v>>, RenderError> {
        params.iter().map(|p| self.expr(p)).collect()
    }

    /// A helper's result as a value (in a subexpression or a block's head).
    fn value_of(&mut self, name: &str, params: &[Expr]) -> Result<Value, RenderError> {
        if let Some(v) = self.computed(name, params)? {
            return Ok(v);
        }
        let mut text = String::new();
        self.write_helper(name, params, &mut text)?;
        self.charge(text.len() as u64 / 64)?;
        Ok(Value::String(text))
    }

    /// The helpers that compute a value; `None` for the ones that write text.
    fn computed(&mut self, name: &str, params: &[Expr]) -> Result<Option<Value>, RenderError> {
        let two = |args: &[Got<'_>], f: fn(&Value, &Value) -> bool| match args {
            [x, y, ..] => Ok(Value::Bool(f(x.value(), y.value()))),
            [_] => Err(missing_param(name, 1)),
            [] => Err(missing_param(name, 0)),
        };
        let v = match name {
            "eq" | "ne" | "gt" | "gte" | "lt" | "lte" => {
                let args = self.args(params)?;
                if let [x, y, ..] = &args[..] {
                    let cap = self.steps;
                    self.charge(weight(x.value(), cap).min(weight(y.value(), cap)))?;
                }
                let op: fn(&Value, &Value) -> bool = match name {
                    "eq" => |x, y| x == y,
                    "ne" => |x, y| x != y,
                    "gt" => |x, y| compare(x, y) == Some(std::cmp::Ordering::Greater),
                    "gte" => |x, y| compare(x, y).is_some_and(|o| o != std::cmp::Ordering::Less),
                    "lt" => |x, y| compare(x, y) == Some(std::cmp::Ordering::Less),
                    _ => |x, y| compare(x, y).is_some_and(|o| o != std::cmp::Ordering::Greater),
                };
                two(&args, op)?
            }
            "not" => {
                let args = self.args(params)?;
                let x = args.first().ok_or_else(|| missing_param(name, 0))?;
                Value::Bool(!truthy(x.value()))
            }
            "and" => Value::Bool(self.args(params)?.iter().all(|a| truthy(a.value()))),
            "or" => Value::Bool(self.args(params)?.iter().any(|a| truthy(a.value()))),
            "len" => {
                let args = self.args(params)?;
                let x = args
                    .first()
                    .ok_or_else(|| error("Helper/Decorator len param with name x required but not found".into()))?;
                Value::from(match x.value() {
                    Value::Array(a) => a.len(),
                    Value::Object(m) => m.len(),
                    Value::String(s) => s.len(),
                    _ => 0,
                })
            }
            "lookup" => match self.lookup(params)?.value {
                Some(Cow::Borrowed(v)) => self.copy(v)?,
                Some(Cow::Owned(v)) => v,
                None => Value::Null,
            },
            _ => return Ok(None),
        };
        Ok(Some(v))
    }

    /// `{{helper ...}}`: what the helper writes.
    fn call(&mut self, name: &str, params: &[Expr], out: &mut dyn Sink) -> Result<(), RenderError> {
        match name {
            "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "not" | "and" | "or" => {
                let v = self.computed(name, params)?.unwrap_or_default();
                out.write(if v.as_bool() == Some(true) { "true" } else { "false" })
            }
            "len" | "lookup" => {
                let v = self.computed(name, params)?.unwrap_or_default();
                self.escaped(&display(&v), out)
            }
            _ => self.write_helper(name, params, out),
        }
    }

    /// The helpers that write text: packs' `__v`, `json`, `urlencode`.
    fn write_helper(&mut self, name: &str, params: &[Expr], out: &mut dyn Sink) -> Result<(), RenderError> {
        match name {
            "__v" => {
                let args = self.args(params)?;
                let key = args.first().and_then(|a| a.value().as_str()).unwrap_or_default().to_owned();
                let inline = args.get(1).map(Got::value);
                require_secret(self.root, &key)?;
                let (text, given) = lookup_marked(self.root, &key, inline);
                if given && self.marks { out.write(&marked(&key, &text)) } else { out.write(&text) }
            }
            "json" | "urlencode" => {
                let (got, tag) = self.written(params.first())?;
                for more in params.iter().skip(1) {
                    self.expr(more)?;
                }
                let v = got.value();
                self.charge(weight(v, self.steps))?;
                let text = if name == "json" { v.to_string() } else { urlencode(&value_text(v)) };
                match tag.filter(|_| self.marks) {
                    Some(tag) => out.write(&marked(&tag, &text)),
                    None => out.write(&text),
                }
            }
            _ => Err(error(format!("Helper not found {name}"))),
        }
    }

    fn block(&mut self, b: &Block, out: &mut dyn Sink) -> Result<(), RenderError> {
        let branch = |yes: bool| if yes { Some(&b.body) } else { b.inverse.as_ref() };
        match b.helper.as_str() {
            "if" | "unless" => {
                let args = self.args(&b.params)?;
                let x = args.first().ok_or_else(|| missing_param(&b.helper, 0))?;
                let yes = truthy(x.value()) == (b.helper == "if");
                self.maybe(branch(yes), out)
            }
            "each" => {
                let args = self.args(&b.params)?;
                let x = args.into_iter().next().ok_or_else(|| missing_param("each", 0))?;
                self.each(b, x, out)
            }
            "with" => {
                let args = self.args(&b.params)?;
                let x = args.into_iter().next().ok_or_else(|| missing_param("with", 0))?;
                if !truthy(x.value()) {
                    return self.maybe(b.inverse.as_ref(), out);
                }
                let locals = self.scopes.last().map(|s| s.locals.clone()).unwrap_or_default();
                self.charge(locals.values().map(|v| weight(v, u64::MAX)).sum())?;
                let base = match (x.path, x.value) {
                    (Some(p), _) => Base::Path(p),
                    (None, v) => Base::Value(v.unwrap_or(Cow::Owned(Value::Null))),
                };
                self.scopes.push(Scope { base, locals });
                let result = self.nodes(&b.body, out);
                self.scopes.pop();
                result
            }
            name => match self.computed(name, &b.params)? {
                Some(v) => self.maybe(branch(v.as_bool().unwrap_or(false)), out),
                None => Err(error(format!("Helper not found {name}"))),
            },
        }
    }

    fn maybe(&mut self, nodes: Option<&Vec<Node>>, out: &mut dyn Sink) -> Result<(), RenderError> {
        match nodes {
            Some(n) => self.nodes(n, out),
            None => Ok(()),
        }
    }

    fn each(&mut self, b: &Block, x: Got<'v>, out: &mut dyn Sink) -> Result<(), RenderError> {
        // The items, borrowed when the value is part of the values.
        let whole: Option<&'v Value> = match &x.value {
            Some(Cow::Borrowed(v)) => Some(v),
            _ => None,
        };
        let len = match x.value() {
            Value::Array(list) if !list.is_empty() || b.inverse.is_none() => list.len(),
            Value::Object(map) if !map.is_empty() || b.inverse.is_none() => map.len(),
            _ => return self.maybe(b.inverse.as_ref(), out),
        };
        let items: Box<dyn Iterator<Item = (Option<&String>, &Value)>> = match x.value() {
            Value::Array(list) => Box::new(list.iter().map(|v| (None, v))),
            Value::Object(map) => Box::new(map.iter().map(|(k, v)| (Some(k), v))),
            _ => Box::new(std::iter::empty()),
        };
        self.scopes.push(Scope { base: Base::Path(Vec::new()), locals: Map::new() });
        let mut result = Ok(());
        for (i, (key, v)) in items.enumerate() {
            let base = match &x.path {
                Some(p) => {
                    Base::Path(p.iter().cloned().chain([key.cloned().unwrap_or_else(|| i.to_string())]).collect())
                }
                None => match whole {
                    Some(whole) => {
                        let item = match (whole, key) {
                            (Value::Object(map), Some(k)) => map.get(k),
                            (Value::Array(list), _) => list.get(i),
                            _ => None,
                        };
                        Base::Value(Cow::Borrowed(item.unwrap_or(&NULL_VALUE)))
                    }
                    None => match self.copy(v) {
                        Ok(v) => Base::Value(Cow::Owned(v)),
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    },
                },
            };
            // An item, and the bytes of its key copied twice (into its place and `@key`).
            let copied = match &base {
                Base::Path(full) => text_weight(full),
                Base::Value(_) => 0,
            };
            if let Err(e) = self.charge(1 + copied + key.map_or(0, |k| k.len() as u64 / 64)) {
                result = Err(e);
                break;
            }
            let scope = self.scopes.last_mut().expect("pushed above");
            scope.locals.insert("first".into(), Value::Bool(i == 0));
            scope.locals.insert("last".into(), Value::Bool(i + 1 == len));
            scope.locals.insert("index".into(), Value::from(i));
            if let Some(k) = key {
                scope.locals.insert("key".into(), Value::String(k.clone()));
            }
            scope.base = base;
            result = self.nodes(&b.body, out);
            if result.is_err() {
                break;
            }
        }
        self.scopes.pop();
        result
    }
}

/// Whether `p` names the operator's or the caller's values (`env.X`, `secret.X`,
/// `context.K`, as written: not `this.env.X`), which a helper reads from the values
/// themselves wherever it is.
fn namespaced(p: &Path) -> bool {
    let first = p.raw.split(['.', '/']).next().unwrap_or_default();
    !p.local && p.up == 0 && p.segs.len() >= 2 && matches!(first, "env" | "secret" | "context") && first == p.segs[0]
}

/// Whether `got` (what `p` read) was read from the values themselves, not from an item.
fn from_root(p: &Path, got: &Got<'_>) -> bool {
    !p.local && got.path.as_deref() == Some(&p.segs[..])
}

/// The secret `p` reads from the values themselves, when it is not set.
fn missing_secret_of<'p>(p: &'p Path, got: &Got<'_>) -> Option<&'p str> {
    match &p.segs[..] {
        [ns, key] if ns == "secret" && from_root(p, got) && got.value().is_null() => Some(key),
        _ => None,
    }
}

/// The tag a value read from the values themselves is marked with: the parameter it is
/// (`p`), the context key (`context.url`); `None` for the operator's `env.` and `secret.`.
pub(super) fn argument_tag(segs: &[String]) -> Option<String> {
    Some(match segs {
        [ns, ..] if ns == "env" || ns == "secret" => return None,
        [ns, key, ..] if ns == "context" => format!("context.{key}"),
        [name, ..] if crate::names::is_identifier(name) && name != "context" => name.clone(),
        _ => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps(src: &str, root: &Value, budget: u64) -> Result<u64, RenderError> {
        let program = super::super::parse::parse(src).expect("parses");
        render_within(&program, root, false, budget, &mut String::new())
    }

    #[test]
    fn a_render_stops_when_its_steps_run_out() {
        let root = json!({"xs": ["a", "b", "c"], "big": {"k": (0..1000).collect::<Vec<_>>()}});
        // Exactly its steps render; one fewer stops, with the reason.
        let src = "{{#each xs}}{{this}}{{#if (eq ../big.k ../big.k)}}!{{/if}}{{/each}}";
        let needed = steps(src, &root, u64::MAX).unwrap();
        assert!(needed > 3 * 1000, "comparing `big.k` per item is paid for: {needed}");
        assert_eq!(steps(src, &root, needed).unwrap(), needed);
        assert_eq!(steps(src, &root, needed - 1).unwrap_err().reason(), TOO_MUCH_WORK);
    }

    #[test]
    fn a_value_read_through_lookup_or_with_is_borrowed_not_copied() {
        // Reading a large value once per item costs a step or two, not its size.
        let k: Vec<u32> = (0..1000).collect();
        let root = json!({"xs": ["a", "b", "c"], "big": {"k": k, "o": {"l": [1, 2], "big": k}}});
        for src in [
            "{{#each xs}}{{#if (lookup ../big \"k\")}}!{{/if}}{{/each}}",
            "{{#with (lookup big \"o\")}}{{#each big}}{{#if ../big}}{{/if}}{{/each}}{{/with}}",
            "{{#each (lookup big \"k\")}}{{#with (lookup ../big \"o\")}}{{#if l}}{{/if}}{{/with}}{{/each}}",
        ] {
            let used = steps(src, &root, u64::MAX).unwrap();
            assert!(used < 20 * 1000, "{src}: {used}");
        }
    }

    #[test]
    fn the_budget_pays_for_the_bytes_of_keys_it_copies() {
        // `#each` over an object copies each key (into the item's place and `@key`), and a
        // path read inside copies the place again: a call's long keys cost their length.
        let long = |c: char| c.to_string().repeat(60_000);
        let root = json!({"obj": {long('a'): 1, long('b'): 1}});
        let deep = |n: usize| {
            let mut src = "x{{#each obj}}".to_owned();
            for k in 1..n {
                src.push_str(&format!("{{{{#each {}obj}}}}", "../".repeat(k)));
            }
            src + &"{{/each}}".repeat(n)
        };
        let per_key = 60_000 / 64;
        for (src, items, copies) in [
            (deep(1), 2, 2),
            (deep(2), 6, 2),
            ("{{#each obj}}{{#if @key}}{{/if}}{{#if this}}{{/if}}{{/each}}".to_owned(), 2, 4),
            ("{{#each obj}}{{#with ../obj}}{{#if @key}}{{/if}}{{/with}}{{/each}}".to_owned(), 2, 4),
        ] {
            let used = steps(&src, &root, MAX_RENDER_STEPS).unwrap();
            assert!(used >= items * copies * per_key, "{src}: {used}");
        }
        // Nested 18 deep, 2^19 items each copying 60 KB: the budget stops it after a few
        // thousand (at most 64 bytes copied per step), with its reason.
        let e = steps(&deep(18), &root, MAX_RENDER_STEPS).unwrap_err();
        assert_eq!(e.reason(), TOO_MUCH_WORK);
    }

    #[test]
    fn the_budget_stops_repeated_work_that_writes_nothing() {
        // `#each` nested 40 deep over two items: 2^40 visits, no output (here with a
        // tenth of the budget, which it runs through in the same way).
        let deep = |n: usize| {
            let mut src = "{{#each xs}}".to_owned();
            for k in 1..n {
                src.push_str(&format!("{{{{#each {}xs}}}}", "../".repeat(k)));
            }
            src + &"{{/each}}".repeat(n)
        };
        let root = json!({"xs": [1, 1]});
        assert!(steps(&deep(3), &root, MAX_RENDER_STEPS).is_ok());
        let e = steps(&deep(40), &root, MAX_RENDER_STEPS / 10).unwrap_err();
        assert_eq!(e.reason(), TOO_MUCH_WORK);
        // A large value compared or written once per item is paid for by its size.
        let big = json!({"xs": vec![1; 20_000]});
        for src in
            ["{{#each xs}}{{#if (eq ../xs ../xs)}}{{/if}}{{/each}}", "{{#each xs}}{{#if (json ../xs)}}{{/if}}{{/each}}"]
        {
            assert_eq!(steps(src, &big, MAX_RENDER_STEPS).unwrap_err().reason(), TOO_MUCH_WORK, "{src}");
        }
        // While a render that writes the whole 1 MiB an output may hold, a byte an item,
        // stays well within it.
        let items = json!({"xs": vec!["a"; super::super::MAX_RENDER_BYTES]});
        let used = steps("{{#each xs}}{{this}}{{/each}}", &items, MAX_RENDER_STEPS).unwrap();
        assert!(used < MAX_RENDER_STEPS, "{used}");
    }
}
