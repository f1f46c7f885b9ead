//! Agent Skills (`SKILL.md`): YAML frontmatter (`name`, `description`, `license`,
//! `compatibility`, `metadata`, `allowed-tools`) and a Markdown body. An agent's
//! `context/<skill>/SKILL.md` is a context module (its body), `packs lint` checks the
//! frontmatter against the Agent Skills rules, and `packs convert` reads skills.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The longest `name` the Agent Skills rules allow.
pub(crate) const MAX_NAME: usize = 64;
/// The longest `description`.
pub(crate) const MAX_DESCRIPTION: usize = 1024;
/// The longest `compatibility`.
pub(crate) const MAX_COMPATIBILITY: usize = 500;

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Skill {
    /// The frontmatter.
    pub(crate) front: Frontmatter,
    /// The Markdown after the frontmatter (the line after the closing `---` onwards).
    pub(crate) body: String,
    /// The 1-based line the body starts on.
    pub(crate) body_line: usize,
}

/// A skill's frontmatter, as written (the rules are checked by [`problems`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub(crate) struct Frontmatter {
    /// The skill's name (lowercase letters, digits and single hyphens; its directory's name).
    pub(crate) name: Option<String>,
    /// What the skill does and when to use it.
    pub(crate) description: Option<String>,
    /// Its license.
    pub(crate) license: Option<String>,
    /// What it needs from its environment, in prose.
    pub(crate) compatibility: Option<String>,
    /// Free-form metadata (OpenClaw's `openclaw`/`clawdbot` requirements live here).
    pub(crate) metadata: Option<Value>,
    /// Tools the skill may use, space-separated (experimental in the format).
    pub(crate) allowed_tools: Option<Value>,
    /// Any other key, kept for reporting.
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// Why a `SKILL.md` cannot be read, with the 1-based line when known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub(crate) struct SkillError {
    /// The line of the file.
    pub(crate) line: Option<usize>,
    /// What is wrong.
    pub(crate) message: String,
}

/// Parse a `SKILL.md`'s text: `---`, YAML, `---`, then the body.
pub(crate) fn parse(text: &str) -> Result<Skill, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let err = |line: Option<usize>, message: &str| SkillError { line, message: message.to_owned() };
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(err(Some(1), "a SKILL.md starts with `---` and YAML frontmatter"));
    }
    let mut yaml = String::new();
    let mut consumed = 4usize.min(text.len());
    let mut line_no = 1;
    let mut closed = false;
    for line in lines {
        line_no += 1;
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(err(None, "the frontmatter has no closing `---` line"));
    }
    let front: Frontmatter = if yaml.trim().is_empty() {
        Frontmatter::default()
    } else {
        serde_saphyr::from_str(&yaml).map_err(|e| {
            // Lines of the YAML are lines of the file after the opening `---`.
            let line = e.location().map(|l| l.line() as usize + 1);
            let message = e.to_string().lines().next().unwrap_or("invalid YAML").to_owned();
            SkillError { line, message: format!("the frontmatter is not valid YAML: {message}") }
        })?
    };
    let body = text.get(consumed.min(text.len())..).unwrap_or_default().to_owned();
    Ok(Skill { front, body, body_line: line_no + 1 })
}

/// What breaks the Agent Skills rules, as (field, message): `name` required, 1 to 64
/// lowercase letters, digits and hyphens, no hyphen first, last or doubled, equal to the
/// skill's directory name (`dir_name`); `description` required, at most 1,024 characters;
/// `compatibility` at most 500; `metadata` a map.
pub(crate) fn problems(front: &Frontmatter, dir_name: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match front.name.as_deref() {
        None => out.push(("name", "the frontmatter has no `name`".to_owned())),
        Some(name) => {
            let chars_ok = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            let shape_ok = !name.starts_with('-') && !name.ends_with('-') && !name.contains("--");
            if name.is_empty() || name.chars().count() > MAX_NAME || !chars_ok || !shape_ok {
                out.push((
                    "name",
                    format!(
                        "`{name}` is not a skill name: 1 to {MAX_NAME} lowercase letters, digits and hyphens, \
                         no hyphen first, last or twice in a row"
                    ),
                ));
            }
            if let Some(dir) = dir_name.filter(|d| *d != name) {
                out.push(("name", format!("`{name}` is not the name of its directory, `{dir}`")));
            }
        }
    }
    match front.description.as_deref().map(str::trim) {
        None | Some("") => out.push(("description", "the frontmatter has no `description`".to_owned())),
        Some(d) if d.chars().count() > MAX_DESCRIPTION => out.push((
            "description",
            format!("the description is {} characters; the most is {MAX_DESCRIPTION}", d.chars().count()),
        )),
        Some(_) => {}
    }
    if let Some(c) = front.compatibility.as_deref().filter(|c| c.chars().count() > MAX_COMPATIBILITY) {
        out.push((
            "compatibility",
            format!("`compatibility` is {} characters; the most is {MAX_COMPATIBILITY}", c.chars().count()),
        ));
    }
    if front.metadata.as_ref().is_some_and(|m| !m.is_object()) {
        out.push(("metadata", "`metadata` is a map of keys to values".to_owned()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_body() {
        let s = parse(
            "---\nname: pdf-tools\ndescription: Work with PDFs.\nmetadata:\n  author: ana\n---\n# PDF\nUse it.\n",
        )
        .unwrap();
        assert_eq!(s.front.name.as_deref(), Some("pdf-tools"));
        assert_eq!(s.body, "# PDF\nUse it.\n");
        assert_eq!(s.body_line, 7);
        assert!(problems(&s.front, Some("pdf-tools")).is_empty());
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("---\nname: x\ndescription: [unclosed\n---\nbody").unwrap_err();
        assert!(e.line.is_some_and(|l| l >= 3), "{e:?}");
        assert!(parse("no frontmatter").is_err());
        assert!(parse("---\nname: x\n").unwrap_err().message.contains("closing"));
    }

    #[test]
    fn the_agent_skills_rules() {
        let front = |name: &str, d: &str| Frontmatter {
            name: Some(name.into()),
            description: Some(d.into()),
            ..Frontmatter::default()
        };
        for bad in ["PDF", "-pdf", "pdf-", "pd--f", "pdf_tools", ""] {
            assert!(!problems(&front(bad, "d"), None).is_empty(), "{bad}");
        }
        assert_eq!(problems(&front("pdf", "d"), Some("other"))[0].0, "name");
        assert_eq!(problems(&front("pdf", &"x".repeat(1025)), None)[0].0, "description");
        assert_eq!(problems(&front("pdf", " "), None)[0].0, "description");
    }
}
