//! Output shaping: stdout → `output` (for the model) and `display` (for a person or speech).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::template::{Data, Environment, Template};

/// The keys of `output`, for did-you-mean help.
pub(crate) const OUTPUT_KEYS: &[&str] =
    &["format", "speak", "max_chars", "extract_field", "template", "include_stderr"];

/// Default `max_chars`.
pub(crate) const DEFAULT_MAX_CHARS: usize = 1000;

/// Appended to `display` when it was cut.
pub(crate) const TRUNCATION_MARKER: &str = "…";

/// What the tool prints on stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Plain text.
    #[default]
    Text,
    /// JSON: parsed, and invalid JSON is an error.
    Json,
    /// JSON lines: each non-empty line parsed as JSON, the result their array; a line
    /// that is not JSON is an error naming it.
    Jsonl,
    /// Markdown (passed through as text).
    Markdown,
}

impl OutputFormat {
    /// Parsed as JSON (`json` or `jsonl`).
    pub(crate) fn is_json(self) -> bool {
        matches!(self, Self::Json | Self::Jsonl)
    }
}

/// The `output` table of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct OutputSpec {
    /// How to read stdout.
    pub format: OutputFormat,
    /// Whether a voice front-end should speak the result.
    pub speak: bool,
    /// Most characters of `display`.
    pub max_chars: usize,
    /// A JSON pointer (`/data/url`) or dotted path (`data.url`) to extract from JSON output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extract_field: Option<String>,
    /// A template over `{{output}}` (and `{{result}}`, the extracted JSON value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Append a successful run's stderr to what the model receives (warnings, progress
    /// that matters to the answer).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub include_stderr: bool,
}

impl Default for OutputSpec {
    fn default() -> Self {
        Self {
            format: OutputFormat::Text,
            speak: true,
            max_chars: DEFAULT_MAX_CHARS,
            extract_field: None,
            template: None,
            include_stderr: false,
        }
    }
}

/// The names an output template may use.
pub(crate) const TEMPLATE_NAMES: &[&str] = &["output", "result"];

/// Stdout after shaping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shaped {
    /// For the model.
    pub output: String,
    /// For a person or speech: `output` cut to `max_chars` characters.
    pub display: String,
    /// The parsed (and extracted) JSON, when the format is json.
    pub json: Option<Value>,
}

/// Shape stdout by `spec`; `template` is the compiled `spec.template`.
pub(crate) fn shape(
    spec: &OutputSpec,
    template: Option<&Template>,
    stdout: &[u8],
    context: &Map<String, Value>,
) -> Result<Shaped, String> {
    let text = String::from_utf8_lossy(stdout);
    match spec.format {
        OutputFormat::Json => {
            let value: Value =
                serde_json::from_str(&text).map_err(|e| format!("the tool's output is not valid JSON ({e})"))?;
            shape_value(spec, template, value, context)
        }
        OutputFormat::Jsonl => {
            let value = json_lines(&text, spec.extract_field.as_deref())?;
            finish(spec, template, value.to_string(), Some(value), context)
        }
        OutputFormat::Text | OutputFormat::Markdown => finish(spec, template, text.into_owned(), None, context),
    }
}

/// Shape a JSON value a tool returned as it is (a native tool's): as `json` output, without
/// printing and parsing it again.
pub(crate) fn shape_value(
    spec: &OutputSpec,
    template: Option<&Template>,
    value: Value,
    context: &Map<String, Value>,
) -> Result<Shaped, String> {
    let value = match &spec.extract_field {
        Some(field) => {
            extract(&value, field).cloned().ok_or_else(|| format!("the tool's JSON output has no field `{field}`"))?
        }
        None => value,
    };
    let text = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    finish(spec, template, text, Some(value), context)
}

/// The output template over `output` (and `result`, the JSON), then `display`.
fn finish(
    spec: &OutputSpec,
    template: Option<&Template>,
    mut output: String,
    json: Option<Value>,
    context: &Map<String, Value>,
) -> Result<Shaped, String> {
    if let Some(t) = template {
        let mut vars = Map::new();
        vars.insert("output".into(), Value::String(output.trim_end_matches('\n').to_owned()));
        vars.insert("result".into(), json.clone().unwrap_or(Value::Null));
        let environment = Environment::read(t.refs());
        output = t
            .render(&Data::with_environment(&vars, &vars, context, &environment))
            .map_err(|e| format!("the output template failed: {}", e.reason()))?;
    }
    let display = truncate(output.trim_end(), spec.max_chars);
    Ok(Shaped { output, display, json })
}

/// JSON lines: every line that is not blank parsed as one JSON value (a `\r` before
/// the newline is allowed), `extract_field` taken from each; the array of them.
fn json_lines(text: &str, extract_field: Option<&str>) -> Result<Value, String> {
    let mut values = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| format!("line {} of the tool's output is not valid JSON ({e})", i + 1))?;
        values.push(match extract_field {
            Some(field) => extract(&value, field)
                .cloned()
                .ok_or_else(|| format!("line {} of the tool's JSON-lines output has no field `{field}`", i + 1))?,
            None => value,
        });
    }
    Ok(Value::Array(values))
}

/// Look up a JSON pointer (`/a/0/b`) or a dotted path (`a.0.b`).
pub(crate) fn extract<'v>(value: &'v Value, field: &str) -> Option<&'v Value> {
    if field.starts_with('/') || field.is_empty() {
        return value.pointer(field);
    }
    field.split('.').try_fold(value, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => a.get(seg.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Cut `s` to at most `max_chars` characters (never inside a character), marking the cut.
pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    let max_chars = max_chars.max(1);
    match s.char_indices().nth(max_chars) {
        None => s.to_owned(),
        Some(_) => {
            let keep = max_chars.saturating_sub(TRUNCATION_MARKER.chars().count()).max(1);
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            format!("{}{TRUNCATION_MARKER}", &s[..end])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo wörld", 5), "héll…");
        assert_eq!(truncate("日本語のテキスト", 3), "日本…");
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("🎉🎉🎉", 2), "🎉…");
        assert_eq!(truncate("abc", 3), "abc");
    }

    #[test]
    fn extraction_by_pointer_and_dotted_path() {
        let v = json!({"data": {"url": "u", "items": [{"id": 7}]}});
        assert_eq!(extract(&v, "/data/url"), Some(&json!("u")));
        assert_eq!(extract(&v, "data.items.0.id"), Some(&json!(7)));
        assert_eq!(extract(&v, "data.nope"), None);
    }

    #[test]
    fn json_output_is_parsed_extracted_and_templated() {
        let spec = OutputSpec {
            format: OutputFormat::Json,
            extract_field: Some("html_url".into()),
            template: Some("Created issue: {{output}}".into()),
            ..OutputSpec::default()
        };
        let t = Template::parse(spec.template.as_deref().unwrap(), TEMPLATE_NAMES).unwrap();
        let s = shape(&spec, Some(&t), br#"{"html_url":"https://x/1"}"#, &Map::new()).unwrap();
        assert_eq!(s.output, "Created issue: https://x/1");
        assert!(shape(&spec, Some(&t), b"not json", &Map::new()).unwrap_err().contains("not valid JSON"));
        assert!(shape(&spec, Some(&t), b"{}", &Map::new()).unwrap_err().contains("no field `html_url`"));
    }

    #[test]
    fn json_lines_are_an_array_with_the_field_taken_from_each_line() {
        let spec = OutputSpec { format: OutputFormat::Jsonl, ..OutputSpec::default() };
        let s = shape(&spec, None, b"{\"a\":1}\r\n\n  \n[2]\n\"x\"", &Map::new()).unwrap();
        assert_eq!(s.json, Some(json!([{"a": 1}, [2], "x"])));
        assert_eq!(s.output, r#"[{"a":1},[2],"x"]"#);
        assert_eq!(shape(&spec, None, b"", &Map::new()).unwrap().json, Some(json!([])));
        let bad = shape(&spec, None, b"{\"a\":1}\n\n{oops\n", &Map::new()).unwrap_err();
        assert!(bad.starts_with("line 3 of the tool's output is not valid JSON"), "{bad}");
        let spec = OutputSpec { extract_field: Some("a".into()), ..spec };
        assert_eq!(shape(&spec, None, b"{\"a\":1}\n{\"a\":[2]}\n", &Map::new()).unwrap().json, Some(json!([1, [2]])));
        let missing = shape(&spec, None, b"{\"a\":1}\n{\"b\":2}\n", &Map::new()).unwrap_err();
        assert_eq!(missing, "line 2 of the tool's JSON-lines output has no field `a`");
    }
}
