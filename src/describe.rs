//! The `--describe` value: its synthesis from a manifest, and asking an executable for it.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::describe_cache::{DescribeCache, Identity};
use crate::manifest::Manifest;
use crate::output::OutputSpec;
use crate::policy::Policy;
use crate::runner::{self, Invocation};

/// How long an executable may take to answer `--describe`.
pub(crate) const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of `--describe` output read.
const DESCRIBE_MAX_BYTES: u64 = 1024 * 1024;

/// What a tool says about itself: the `--describe` JSON.
///
/// `parameters` is a JSON-Schema object schema. `policy` and `output` are
/// optional; an executable tool may state them, a manifest tool always states
/// its policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Describe {
    /// snake_case name, used in function calls.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the call's arguments.
    pub parameters: Value,
    /// Execution policy, when stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// Output shaping, when stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSpec>,
}

/// The JSON Schema of a manifest's parameters, as offered to the model.
///
/// Declaration order is kept. `literal` parameters are not offered. A required
/// parameter filled from the caller's context is not listed as required (the
/// caller's context supplies it when the model does not); see [`validation_schema`].
pub(crate) fn parameters_schema(m: &Manifest) -> Value {
    schema(m, false)
}

/// The schema a call is validated against after context values are filled in:
/// like [`parameters_schema`] but every required parameter is required.
pub(crate) fn validation_schema(m: &Manifest) -> Value {
    schema(m, true)
}

fn schema(m: &Manifest, strict_required: bool) -> Value {
    // Sized up front: describes are built for every tool of a catalog, and
    // growing many small maps one key at a time was most of their cost.
    let mut properties = Map::with_capacity(m.parameters.len());
    let mut required = Vec::new();
    for (name, p) in m.parameters.iter().filter(|(_, p)| p.is_offered()) {
        let mut prop = Map::with_capacity(schema_keys(p));
        prop.insert("type".into(), p.kind.as_str().into());
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                prop.insert(k.into(), v);
            }
        };
        put("description", p.description.clone().map(Value::from));
        put("enum", p.allowed.clone().map(Value::from));
        put("default", p.default.clone());
        put("items", p.items.clone());
        put("pattern", p.pattern.clone().map(Value::from));
        put("minimum", p.minimum.clone().map(Value::from));
        put("maximum", p.maximum.clone().map(Value::from));
        put("minLength", p.min_length.map(Value::from));
        put("maxLength", p.max_length.map(Value::from));
        put("format", p.format.clone().map(Value::from));
        if let Some(extra) = &p.schema {
            prop.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        properties.insert(name.clone(), Value::Object(prop));
        let from_context = p.source.and_then(|s| s.context_key()).is_some();
        if p.required && (strict_required || !from_context) {
            required.push(Value::from(name.as_str()));
        }
    }
    let mut schema = Map::with_capacity(4);
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

/// How many keys a parameter's schema has: `type` and each keyword it states.
fn schema_keys(p: &crate::manifest::Parameter) -> usize {
    let stated = [
        p.description.is_some(),
        p.allowed.is_some(),
        p.default.is_some(),
        p.items.is_some(),
        p.pattern.is_some(),
        p.minimum.is_some(),
        p.maximum.is_some(),
        p.min_length.is_some(),
        p.max_length.is_some(),
        p.format.is_some(),
    ];
    1 + stated.iter().filter(|&&s| s).count() + p.schema.as_ref().map_or(0, Map::len)
}

/// Synthesize the describe value of a manifest.
pub(crate) fn synthesize(m: &Manifest) -> Describe {
    Describe {
        name: m.name.clone(),
        description: m.description.clone(),
        parameters: parameters_schema(m),
        policy: Some(m.policy.clone()),
        output: None,
    }
}

/// Parse an executable's describe output. Returns the describe and the unknown keys
/// (dotted paths) it carried, or why it was not accepted. A `policy` that does not
/// say `read_only` is not read-only: packs cannot see what an executable does.
pub(crate) fn parse_executable_describe(stdout: &[u8]) -> Result<(Describe, Vec<String>), String> {
    let text = std::str::from_utf8(stdout).map_err(|_| "its --describe output is not UTF-8".to_owned())?;
    if text.trim().is_empty() {
        return Err("its --describe printed nothing".into());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("its --describe output is not JSON: {e}"))?;
    let obj = value.as_object().ok_or("its --describe output is not a JSON object")?;
    for key in ["name", "description", "parameters"] {
        if !obj.contains_key(key) {
            return Err(format!("its --describe output has no `{key}`"));
        }
    }
    let mut value = value;
    if let Some(Value::Object(policy)) = value.get_mut("policy") {
        policy.entry("read_only").or_insert(Value::Bool(false));
    }
    let mut unknown = Vec::new();
    let mut record = |p: serde_ignored::Path<'_>| {
        // Keys under `parameters` are JSON Schema, open by design.
        let p = p.to_string();
        if !p.starts_with("parameters.") {
            unknown.push(p);
        }
    };
    let d: Describe = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut record))
        .map_err(|e| format!("its --describe output has a bad `{}`: {}", e.path(), e.inner()))?;
    if !crate::names::is_snake_case(&d.name) || d.name.len() > crate::names::MAX_NAME_LEN {
        return Err(format!("its --describe name `{}` is not snake_case (at most 64 characters)", d.name));
    }
    if d.description.trim().is_empty() {
        return Err("its --describe description is empty".into());
    }
    if d.parameters.get("type").and_then(Value::as_str) != Some("object") {
        return Err("its --describe `parameters` is not a JSON-Schema object (`\"type\": \"object\"`)".into());
    }
    Ok((d, unknown))
}

/// Environment variable counting how deeply `--describe` runs are nested, so an
/// executable that runs packs on its own directory cannot recurse without end.
const NESTING_VAR: &str = "PACKS_DESCRIBE_DEPTH";
const MAX_NESTING: u32 = 4;

/// The describe `cache` kept for this very file, if it holds one that parses: no process
/// is started (discovery reads these on the calling thread and starts threads only for
/// the executables it must ask).
pub(crate) fn cached(path: &Path, cache: Option<&DescribeCache>) -> Option<(Describe, Vec<String>)> {
    let cache = cache?;
    let id = Identity::of(path)?;
    parse_executable_describe(cache.get(path, &id)?.as_bytes()).ok()
}

/// Ask the executable at `path` for its describe JSON (or take the answer `cache`
/// kept for this very file). Returns the describe and the unknown keys it carried,
/// or why the executable is skipped.
pub(crate) fn ask(path: &Path, cache: Option<&DescribeCache>) -> Result<(Describe, Vec<String>), String> {
    if let Some(found) = cached(path, cache) {
        return Ok(found);
    }
    let identity = cache.and_then(|_| Identity::of(path));
    let depth: u32 = std::env::var(NESTING_VAR).ok().and_then(|d| d.parse().ok()).unwrap_or(0);
    if depth >= MAX_NESTING {
        return Err(format!("`--describe` runs are nested {depth} deep (an executable that runs packs on itself?)"));
    }
    let invocation = Invocation::plain(
        vec![path.to_string_lossy().into_owned(), "--describe".into()],
        crate::environment::minimal_env(&[], vec![(NESTING_VAR.to_owned(), (depth + 1).to_string())]),
        DESCRIBE_TIMEOUT,
        DESCRIBE_MAX_BYTES,
    );
    // Confined as a `read_only` tool without network: a describe answers, it changes nothing
    // (it writes only to a private TMPDIR), whatever the file became since it was written.
    // As far as this kernel can: an executable is described on any kernel.
    let enforcement = crate::sandbox::for_a_describe();
    let confined = runner::confine(&invocation, Some(&enforcement))
        .map_err(|e| format!("`--describe` cannot be confined: {e}"))?;
    let out = runner::run(confined.as_ref().unwrap_or(&invocation)).map_err(|e| e.to_string())?;
    if out.timed_out {
        return Err(format!("`--describe` did not answer within {}s", DESCRIBE_TIMEOUT.as_secs()));
    }
    if out.exit_code != Some(0) {
        let code = out.exit_code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail = stderr.trim().lines().last().map(|l| format!(": {l}")).unwrap_or_default();
        return Err(format!("`--describe` exited with {code}{tail}"));
    }
    if out.stdout_truncated {
        return Err(format!("`--describe` printed more than {DESCRIBE_MAX_BYTES} bytes"));
    }
    let found = parse_executable_describe(&out.stdout)?;
    if let (Some(cache), Some(id), Ok(text)) = (cache, &identity, std::str::from_utf8(&out.stdout)) {
        cache.put(path, id, text);
    }
    Ok(found)
}
