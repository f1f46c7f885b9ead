//! System prompts: an agent's soul, its context modules, and a terse tools section.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::tool::Tool;

/// Between the soul and each context module.
pub const SEPARATOR: &str = "\n---\n";

#[cfg(feature = "skills")]
/// Why a prompt could not be composed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// The agent has no `soul.md`.
    #[error("{} is missing: an agent needs a soul", path.display())]
    MissingSoul {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A skill's `SKILL.md` does not parse.
    #[error("{}: {message}", path.display())]
    Skill {
        /// The `SKILL.md`.
        path: PathBuf,
        /// What is wrong, with its line.
        message: String,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(feature = "skills")]
/// `soul.md`, then each context module in name order, each after `\n---\n`, byte for byte.
/// A module is a `context/*.md` file, or a skill directory `context/<skill>/SKILL.md`, whose
/// body (after its YAML frontmatter) is the module.
pub fn compose(agent_dir: &Path) -> Result<String, PromptError> {
    let soul_path = agent_dir.join("soul.md");
    let read =
        |path: &Path| std::fs::read(path).map_err(|source| PromptError::Unreadable { path: path.to_owned(), source });
    let mut out = match std::fs::read(&soul_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PromptError::MissingSoul { path: soul_path }),
        Err(source) => return Err(PromptError::Unreadable { path: soul_path, source }),
    };
    for module in context_modules(agent_dir) {
        out.extend_from_slice(SEPARATOR.as_bytes());
        match module {
            Module::File(path) => out.extend_from_slice(&read(&path)?),
            Module::Skill(path) => {
                let text = String::from_utf8_lossy(&read(&path)?).into_owned();
                let skill = crate::skill::parse(&text)
                    .map_err(|e| PromptError::Skill { path: path.clone(), message: e.to_string() })?;
                out.extend_from_slice(skill.body.as_bytes());
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(feature = "skills")]
/// One context module of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Module {
    /// `context/NAME.md`, used whole.
    File(PathBuf),
    /// `context/NAME/SKILL.md`, used without its frontmatter.
    Skill(PathBuf),
}

#[cfg(feature = "skills")]
/// An agent's context modules in name order: `context/*.md` files (as a shell glob reads
/// it: hidden files are not modules) and `context/*/SKILL.md` skills (hidden directories
/// are not either).
pub(crate) fn context_modules(agent_dir: &Path) -> Vec<Module> {
    let context = agent_dir.join("context");
    let mut named: Vec<(std::ffi::OsString, Module)> = std::fs::read_dir(&context)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let path = e.path();
            if path.is_dir() {
                let skill = path.join("SKILL.md");
                skill.is_file().then(|| (e.file_name(), Module::Skill(skill)))
            } else {
                (path.extension().is_some_and(|x| x == "md") && path.is_file())
                    .then(|| (e.file_name(), Module::File(path)))
            }
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.into_iter().map(|(_, m)| m).collect()
}

/// Whether a tool is offered in `mode`: its `modes` include it or `Global`, or it has none
/// ([`Tool::in_mode`]).
pub fn in_mode(tool: &Tool, mode: &str) -> bool {
    tool.in_mode(mode)
}

/// The input shape of a tool, tersely: `{"path": string, "human_readable"?: boolean}`.
pub fn input_shape(parameters: &Value) -> String {
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let props = parameters.get("properties").and_then(Value::as_object);
    let parts: Vec<String> = props
        .into_iter()
        .flatten()
        .map(|(name, schema)| {
            let ty = match schema.get("enum").and_then(Value::as_array) {
                Some(values) => values.iter().map(Value::to_string).collect::<Vec<_>>().join("|"),
                None => schema.get("type").and_then(Value::as_str).unwrap_or("any").to_owned(),
            };
            let opt = if required.contains(&name.as_str()) { "" } else { "?" };
            format!("\"{name}\"{opt}: {ty}")
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// One tool's entry in a system prompt: a native tool's own line, else
/// `- name: first line of the description. Input: {...}`.
pub fn tool_entry(tool: &Tool) -> String {
    if let Some(line) = tool.native().and_then(crate::NativeTool::prompt_line) {
        return line;
    }
    let description = tool.short_description().trim_end_matches('.');
    format!("- {}: {description}. Input: {}", tool.name(), input_shape(&tool.describe().parameters))
}

/// The tools section appended by `packs prompt --tools`.
pub fn tools_section(tools: &[&Tool]) -> String {
    let mut s = String::from(SEPARATOR);
    s.push_str("# Tools\n\nCall a tool with a JSON object matching its input. `?` marks optional fields.\n\n");
    for t in tools {
        s.push_str(&tool_entry(t));
        s.push('\n');
    }
    s
}

/// FunctionGemma's developer turn for `tools`, then each tool's few-shot examples with
/// their `{{url}}`-style placeholders filled from `context` (an unknown one is left as is).
pub fn gemma(tools: &[&Tool], context: &crate::call::Context) -> String {
    use crate::formats::functiongemma;
    let mut out = format!("{}{}", functiongemma::START_DEVELOPER_TURN, functiongemma::developer_turn(tools));
    for example in tools.iter().filter_map(|t| t.manifest()).flat_map(|m| &m.examples) {
        let mut text = example.clone();
        for (key, value) in context.values() {
            text = text.replace(&format!("{{{{{key}}}}}"), value.as_str().unwrap_or_default());
        }
        out.push_str("\n\n");
        out.push_str(&text);
    }
    out.push_str(functiongemma::END_TURN);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "skills")]
    fn agent(soul: Option<&str>, modules: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(s) = soul {
            std::fs::write(dir.path().join("soul.md"), s).unwrap();
        }
        if !modules.is_empty() {
            std::fs::create_dir(dir.path().join("context")).unwrap();
        }
        for (name, text) in modules {
            std::fs::write(dir.path().join("context").join(name), text).unwrap();
        }
        dir
    }

    #[cfg(feature = "skills")]
    #[test]
    fn composition_is_byte_exact() {
        let a = agent(Some("SOUL\n"), &[("b.md", "B"), ("a.md", "A\n"), ("c.txt", "ignored")]);
        assert_eq!(compose(a.path()).unwrap(), "SOUL\n\n---\nA\n\n---\nB");
        let a = agent(Some("S"), &[("02.md", "two"), ("01.md", "one $HOME {{x}} **b**")]);
        assert_eq!(compose(a.path()).unwrap(), "S\n---\none $HOME {{x}} **b**\n---\ntwo");
        assert_eq!(compose(agent(Some("only\n"), &[]).path()).unwrap(), "only\n");
        assert_eq!(compose(agent(Some(""), &[]).path()).unwrap(), "");
    }

    #[cfg(feature = "skills")]
    #[test]
    fn empty_context_dir_and_missing_soul() {
        let a = agent(Some("S\n"), &[]);
        std::fs::create_dir(a.path().join("context")).unwrap();
        assert_eq!(compose(a.path()).unwrap(), "S\n");
        let e = compose(agent(None, &[]).path()).unwrap_err();
        assert!(e.to_string().contains("soul.md is missing"), "{e}");
    }

    #[test]
    fn input_shape_is_terse() {
        let p = serde_json::json!({"type": "object", "properties": {
            "path": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}, "n": {"type": "integer"}
        }, "required": ["path"]});
        assert_eq!(input_shape(&p), r#"{"path": string, "unit"?: "c"|"f", "n"?: integer}"#);
    }
}
