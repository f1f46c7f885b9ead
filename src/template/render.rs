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
    let mut r = Renderer { root, marks, scopes: vec![Scope { base: Base::Path(Vec::new()), locals: Map::new() }] };
    r.nodes(&program.nodes, out)
}

/// What a block sees as `this`: a place in the values, or a value made on the way (a
/// literal, a helper's result, an item of such a value).
enum Base {
    Path(Vec<String>),
    Value(Value),
}

struct Scope {
    base: Base,
    /// `@index`, `@key`, `@first`, `@last`.
    locals: Map<String, Value>,
}

/// A value an expression reads: missing, or a value and where in the values it is.
struct Got<'v> {
    value: Option<Cow<'v, Value>>,
    path: Option<Vec<String>>,
}

const NULL: Value = Value::Null;

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
    /// Innermost last; the first is the values themselves.
    scopes: Vec<Scope>,
}

impl<'v> Renderer<'v> {
    fn nodes(&mut self, nodes: &[Node], out: &mut dyn Sink) -> Result<(), RenderError> {
        for node in nodes {
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
                        let text = display(got.value());
                        self.escaped(&text, out)?;
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

    fn scope(&self, up: usize) -> &Scope {
        let innermost = self.scopes.len() - 1;
        // `../` beyond the outermost scope reads the innermost, as Handlebars does.
        self.scopes.get(innermost.wrapping_sub(up)).filter(|_| up <= innermost).unwrap_or(&self.scopes[innermost])
    }

    fn path(&self, p: &Path) -> Result<Got<'v>, RenderError> {
        if p.local {
            let Some(name) = p.segs.first() else { return Ok(Got { value: None, path: None }) };
            let innermost = self.scopes.len() - 1;
            let v = (p.up <= innermost).then(|| self.scopes[innermost - p.up].locals.get(name)).flatten();
            return Ok(Got { value: v.cloned().map(Cow::Owned), path: None });
        }
        match &self.scope(p.up).base {
            Base::Value(v) => Ok(Got { value: walk(v, &p.segs)?.map(|v| Cow::Owned(v.clone())), path: None }),
            Base::Path(base) => {
                let full: Vec<String> = base.iter().chain(&p.segs).cloned().collect();
                Ok(match walk(self.root, &full)? {
                    Some(v) => Got { value: Some(Cow::Borrowed(v)), path: Some(full) },
                    None => Got { value: None, path: None },
                })
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Got<'v>, RenderError> {
        match e {
            Expr::Literal(v) => Ok(Got::derived(v.clone())),
            Expr::Path(p) => self.path(p),
            Expr::Call(name, params) => self.value_of(name, params).map(Got::derived),
        }
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
            "lookup" => {
                let args = self.args(params)?;
                let (Some(c), Some(i)) = (args.first(), args.get(1)) else {
                    return Err(missing_param(name, args.len()));
                };
                let found = match c.value() {
                    Value::Array(items) => {
                        i.value().as_u64().and_then(|u| usize::try_from(u).ok()).and_then(|u| items.get(u))
                    }
                    Value::Object(m) => i.value().as_str().and_then(|k| m.get(k)),
                    _ => None,
                };
                found.cloned().unwrap_or(Value::Null)
            }
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
                let args = self.args(params)?;
                let v = args.first().map_or(&NULL, Got::value);
                let text = if name == "json" { v.to_string() } else { urlencode(&value_text(v)) };
                let raw = match params.first() {
                    Some(Expr::Path(p)) => Some(p.raw.as_str()),
                    _ => None,
                };
                if let Some(key) = raw.and_then(|r| r.strip_prefix("secret."))
                    && v.is_null()
                {
                    return Err(super::missing_secret(key));
                }
                // A subexpression's value may be a call's value (`(lookup meta "k")`): only
                // the block knows which, so it is marked as such.
                let tag = match params.first() {
                    Some(Expr::Call(..)) => Some(String::new()),
                    _ => raw.and_then(super::argument_tag),
                };
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
                let base = match x.path {
                    Some(p) => Base::Path(p),
                    None => Base::Value(x.value().clone()),
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

    fn each(&mut self, b: &Block, x: Got<'_>, out: &mut dyn Sink) -> Result<(), RenderError> {
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
            let scope = self.scopes.last_mut().expect("pushed above");
            scope.locals.insert("first".into(), Value::Bool(i == 0));
            scope.locals.insert("last".into(), Value::Bool(i + 1 == len));
            scope.locals.insert("index".into(), Value::from(i));
            if let Some(k) = key {
                scope.locals.insert("key".into(), Value::String(k.clone()));
            }
            scope.base = match &x.path {
                Some(p) => {
                    Base::Path(p.iter().cloned().chain([key.cloned().unwrap_or_else(|| i.to_string())]).collect())
                }
                None => Base::Value(v.clone()),
            };
            result = self.nodes(&b.body, out);
            if result.is_err() {
                break;
            }
        }
        self.scopes.pop();
        result
    }
}
