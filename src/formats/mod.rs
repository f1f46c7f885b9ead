//! The formats front-ends speak: exports of tool definitions and parsing of model calls.
//!
//! Every export is a pure function of the tools it is given (tool data in, JSON or text
//! out), in the order given. One module per model API; each has a `tool` function that
//! converts one tool, and [`export`] converts a list. The rules each export applies, and
//! the sources they come from, are in `docs/FORMATS.md`.

use serde_json::{Value, json};

use crate::tool::Tool;

pub mod anthropic;
pub mod declarations;
pub(crate) mod deepseek;
pub mod functiongemma;
pub mod gemini;
pub(crate) mod gemma4;
pub(crate) mod glm;
pub(crate) mod gpt_oss;
#[cfg(test)]
mod hostile;
pub(crate) mod kimi;
pub(crate) mod llama3;
pub mod mcp;
pub(crate) mod mistral;
pub mod openai;
pub(crate) mod python;
pub(crate) mod qwen3;
pub(crate) mod qwen3_xml;
pub mod raw;

crate::names::named_enum! {
    /// The tool-definition formats `packs catalog --format` can print.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ExportFormat {
        /// The tools' describe JSON, as `packs describe` prints it.
        Describe = "describe",
        /// OpenAI Chat Completions `tools`.
        Openai = "openai",
        /// OpenAI Chat Completions `tools` in strict mode (Structured Outputs).
        OpenaiStrict = "openai-strict",
        /// OpenAI Responses API `tools` (flat function tools).
        OpenaiResponses = "openai-responses",
        /// Anthropic Messages API `tools`.
        Anthropic = "anthropic",
        /// Gemini API `tools[].functionDeclarations`.
        Gemini = "gemini",
        /// MCP `tools/list` result entries.
        Mcp = "mcp",
        /// FunctionGemma function declarations (text).
        Gemma = "gemma",
        /// FunctionGemma's developer turn: the trigger sentence and the declarations (text).
        Functiongemma = "functiongemma",
        /// Qwen3's `# Tools` section with `<tools></tools>` (text).
        Qwen3 = "qwen3",
        /// Qwen3-Coder's `# Tools` section, each function in XML (text).
        Qwen3Xml = "qwen3-xml",
        /// Gemma 4's `<|tool>declaration:…<tool|>` blocks (text).
        Gemma4 = "gemma4",
        /// Llama 3.1's tools in the first user turn (text).
        Llama3 = "llama3",
        /// Mistral's `[AVAILABLE_TOOLS]` block (text).
        Mistral = "mistral",
        /// GLM 4.5's `# Tools` section with `<tools></tools>` (text).
        Glm = "glm",
        /// Kimi K2's `tool_declare` system message (text).
        Kimi = "kimi",
        /// gpt-oss's Harmony `# Tools` section, a TypeScript-like `namespace functions` (text).
        GptOss = "gpt-oss",
        /// DeepSeek V3.2's `## Tools` section (text).
        Deepseek = "deepseek",
    }
}

/// An export is JSON, except FunctionGemma's, which is text.
#[derive(Debug, Clone, PartialEq)]
pub enum Export {
    /// A JSON document.
    Json(serde_json::Value),
    /// Text, printed as is.
    Text(String),
}

impl Export {
    /// The JSON document, for a JSON export.
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Self::Json(v) => Some(v),
            Self::Text(_) => None,
        }
    }

    /// The text, for a text export.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Json(_) => None,
            Self::Text(t) => Some(t),
        }
    }
}

/// JSON exports print pretty (no trailing newline); text prints as is.
impl std::fmt::Display for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Json(v) => {
                let text = serde_json::to_string_pretty(v).map_err(|_| std::fmt::Error)?;
                f.write_str(&text)
            }
            Self::Text(t) => f.write_str(t),
        }
    }
}

/// The tool definitions of `tools`, in the order given, in `format`.
pub fn export(tools: &[&Tool], format: ExportFormat) -> Export {
    let each = |convert: fn(&Tool) -> Value| Value::Array(tools.iter().map(|t| convert(t)).collect());
    match per_tool(format) {
        Some(convert) => Export::Json(each(convert)),
        None if format == ExportFormat::Gemini => Export::Json(gemini::tools(tools)),
        None => Export::Text(text(tools, format)),
    }
}

/// The raw-text family whose prompt form `format` is, for the formats named after one.
pub fn family(format: ExportFormat) -> Option<raw::Family> {
    use raw::Family as F;
    Some(match format {
        ExportFormat::Functiongemma => F::Functiongemma,
        ExportFormat::Qwen3 => F::Qwen3,
        ExportFormat::Qwen3Xml => F::Qwen3Xml,
        ExportFormat::Gemma4 => F::Gemma4,
        ExportFormat::Llama3 => F::Llama3,
        ExportFormat::Mistral => F::Mistral,
        ExportFormat::Glm => F::Glm,
        ExportFormat::Kimi => F::Kimi,
        ExportFormat::GptOss => F::GptOss,
        ExportFormat::Deepseek => F::Deepseek,
        _ => return None,
    })
}

/// A text export: FunctionGemma's declarations one a line, or a family's prompt text
/// ([`declarations::text`]) ending with a newline.
fn text(tools: &[&Tool], format: ExportFormat) -> String {
    match family(format) {
        Some(f) => {
            let mut t = declarations::text(tools, f);
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            t
        }
        None => functiongemma::declarations(tools),
    }
}

/// The conversion of one tool, for the formats that are a JSON array of converted tools.
fn per_tool(format: ExportFormat) -> Option<fn(&Tool) -> Value> {
    Some(match format {
        ExportFormat::Describe => describe,
        ExportFormat::Openai => openai::tool,
        ExportFormat::OpenaiStrict => openai::strict_tool,
        ExportFormat::OpenaiResponses => openai::responses_tool,
        ExportFormat::Anthropic => anthropic::tool,
        ExportFormat::Mcp => mcp::tool,
        _ => return None,
    })
}

/// Write the export of `tools` in `format` to `out` (pretty JSON, or the text), ending with
/// a newline: what [`export`] returns, without building it first. Each tool is converted
/// as it is written and dropped (the describe format is serialized from the describe
/// itself), so a listing of thousands of tools never holds all their JSON at once.
pub fn write_export(tools: &[&Tool], format: ExportFormat, mut out: impl std::io::Write) -> std::io::Result<()> {
    use serde::ser::{SerializeMap, Serializer};
    /// `tools`, each converted as it is serialized.
    struct Each<'a>(&'a [&'a Tool], fn(&Tool) -> Value);
    impl serde::Serialize for Each<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter().map(|t| One(t, self.1)))
        }
    }
    struct One<'a>(&'a Tool, fn(&Tool) -> Value);
    impl serde::Serialize for One<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            (self.1)(self.0).serialize(s)
        }
    }
    /// One tool's describe, serialized as it is made.
    struct Fresh<'a>(&'a Tool);
    impl serde::Serialize for Fresh<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.with_describe(|d| d.serialize(s))
        }
    }
    /// Gemini's `{"functionDeclarations": [...]}`.
    struct Declarations<'a>(Each<'a>);
    impl serde::Serialize for Declarations<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("functionDeclarations", &self.0)?;
            map.end()
        }
    }
    match (format, per_tool(format)) {
        (ExportFormat::Describe, _) => {
            serde_json::to_writer_pretty(&mut out, &tools.iter().map(|t| Fresh(t)).collect::<Vec<_>>())?;
        }
        (_, Some(convert)) => serde_json::to_writer_pretty(&mut out, &Each(tools, convert))?,
        (ExportFormat::Gemini, None) => {
            serde_json::to_writer_pretty(&mut out, &Declarations(Each(tools, gemini::tool)))?;
        }
        (_, None) => return out.write_all(text(tools, format).as_bytes()),
    }
    out.write_all(b"\n")
}

/// What a person should know about exporting `tools` in `format`: each tool exported in a
/// lesser form than asked, with why (a tool strict mode cannot say is exported plain).
pub fn export_warnings(tools: &[&Tool], format: ExportFormat) -> Vec<String> {
    match format {
        ExportFormat::OpenaiStrict => tools
            .iter()
            .filter_map(|t| {
                openai::strict_gap(t).map(|why| format!("`{}` is exported without strict mode: {why}", t.name()))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A tool's describe JSON, as a value.
pub fn describe(t: &Tool) -> Value {
    t.with_describe(|d| serde_json::to_value(d).expect("a describe value always serializes"))
}

/// The parameters schema offered to the model: the describe `parameters`, or an empty
/// object schema when a tool states none that is an object.
pub(crate) fn parameters(t: &Tool) -> Value {
    t.with_describe(|d| match &d.parameters {
        p @ Value::Object(m) if !m.is_empty() => p.clone(),
        _ => json!({"type": "object", "properties": {}}),
    })
}
