//! `--arg key=value` and `--context key=value`: typed by the tool's schema.

use anyhow::{Context as _, Result, bail};
use serde_json::{Map, Value};

use crate::call::Context;
use crate::tool::Tool;

fn split_pair<'a>(flag: &str, pair: &'a str) -> Result<(&'a str, &'a str)> {
    pair.split_once('=').with_context(|| format!("`{flag} {pair}`: expected KEY=VALUE"))
}

/// Build the call's arguments: the positional JSON object (if any), then each `--arg`.
pub(super) fn arguments(tool: &Tool, json: Option<&str>, pairs: &[String]) -> Result<Value> {
    let mut args = match json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => bail!("the arguments must be a JSON object, like '{{\"path\": \".\"}}'"),
            Err(e) => bail!("the arguments are not valid JSON: {e}"),
        },
    };
    let props = tool.validation_schema().get("properties").and_then(Value::as_object);
    let mut set = std::collections::HashSet::new();
    for pair in pairs {
        let (key, raw) = split_pair("--arg", pair)?;
        let ty = props.and_then(|p| p.get(key)).and_then(|s| s.get("type")).and_then(Value::as_str);
        let value = typed(key, raw, ty)?;
        match (ty, args.get_mut(key), value) {
            // `--arg tag=a --arg tag=b` builds a list
            (Some("array"), Some(Value::Array(items)), Value::Array(new)) => items.extend(new),
            // A second --arg for one that is not a list would silently replace the first
            // (a --arg does replace a value of the JSON object: that is how to override one).
            (_, Some(_), _) if !set.insert(key) => bail!("`--arg {key}` is given twice; `{key}` takes one value"),
            (_, _, value) => {
                set.insert(key);
                args.insert(key.to_owned(), value);
            }
        }
    }
    Ok(Value::Object(args))
}

fn typed(key: &str, raw: &str, ty: Option<&str>) -> Result<Value> {
    let parsed = || serde_json::from_str::<Value>(raw);
    Ok(match ty {
        Some("string") => Value::String(raw.to_owned()),
        Some("integer" | "number") => match parsed() {
            Ok(v @ Value::Number(_)) => v,
            _ => bail!(
                "`--arg {key}={raw}`: `{key}` takes {}, and `{raw}` is not one",
                if ty == Some("integer") { "an integer" } else { "a number" }
            ),
        },
        Some("boolean") => match raw {
            "true" | "yes" | "1" | "" => Value::Bool(true),
            "false" | "no" | "0" => Value::Bool(false),
            _ => bail!("`--arg {key}={raw}`: `{key}` is a boolean (true or false)"),
        },
        Some("array") => match parsed() {
            Ok(v @ Value::Array(_)) => v,
            _ => Value::Array(vec![Value::String(raw.to_owned())]),
        },
        Some("object") => match parsed() {
            Ok(v @ Value::Object(_)) => v,
            _ => bail!("`--arg {key}=...`: `{key}` is an object; give it as JSON"),
        },
        // Unknown to the schema: let validation report it, keeping the value's JSON type if it has one.
        _ => parsed().unwrap_or_else(|_| Value::String(raw.to_owned())),
    })
}

/// Build the context from `base` (agent, workspace) and `--context key=value` pairs.
pub(super) fn context(pairs: &[String], base: &Context) -> Result<Context> {
    let mut ctx = base.clone();
    for pair in pairs {
        let (key, value) = split_pair("--context", pair)?;
        ctx.set(key, value).map_err(anyhow::Error::msg)?;
    }
    Ok(ctx)
}
