//! An agent's prompt against the tools it is offered: `unoffered-tool`.
//!
//! A tool counts as named when a Markdown code span of the soul or a context module (text
//! between matching backticks, outside fenced code blocks) is exactly its name, and the
//! tool is one the agent's pack directories hold. Prose that happens to contain a tool's
//! name ("search text") is not a mention: only what a writer marked as code is.

use std::collections::HashSet;
use std::path::Path;

use crate::agent::Agent;
use crate::call::Context;
use crate::catalog::Catalog;
use crate::code::Code;
use crate::prompt::Module;
use crate::source::{Diagnostic, Severity};
use crate::tool::Tool;

/// Every file of `agent`'s prompt (soul, context modules) that names, in a code span, a
/// tool of `catalog` (the tools the agent sees before its rules) it is not offered.
pub(crate) fn unoffered_tools(agent: &Agent, catalog: &Catalog) -> Vec<Diagnostic> {
    let context = Context::new().with_agent(agent.clone());
    let mut files = vec![(agent.dir.join("soul.md"), false)];
    files.extend(crate::prompt::context_modules(&agent.dir).into_iter().map(|m| match m {
        Module::File(path) => (path, false),
        Module::Skill(path) => (path, true),
    }));
    let mut out = Vec::new();
    for (path, skill) in files {
        // A file that cannot be read is `packs prompt`'s error to report (and a skill's
        // frontmatter `invalid-skill`'s).
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let start = if skill { body_offset(&text) } else { Some(0) };
        let Some(start) = start else { continue };
        let mut seen = HashSet::new();
        for (at, word) in code_spans(&text[start..]) {
            let Ok(tool) = catalog.get(word) else { continue };
            if context.offers(tool) || !seen.insert(word) {
                continue;
            }
            out.push(diagnostic(&path, &text, start + at, tool, agent, &context));
        }
    }
    out
}

/// Where a skill's body starts (after its frontmatter), if it parses.
fn body_offset(text: &str) -> Option<usize> {
    let skill = crate::skill::parse(text).ok()?;
    let skip = skill.body_line.saturating_sub(1);
    Some(text.split_inclusive('\n').take(skip).map(str::len).sum())
}

fn diagnostic(path: &Path, text: &str, at: usize, tool: &Tool, agent: &Agent, context: &Context) -> Diagnostic {
    let name = tool.name();
    let why = if !agent.allows(name) {
        "its `tools` and `deny` lists leave it out".to_owned()
    } else if let Some(max) = agent.max_tier().filter(|max| tool.tier() > *max) {
        format!("its tier `{}` is above the agent's `max_tier` `{max}`", tool.tier())
    } else {
        let modes = tool.manifest().map(|m| m.modes.join(", ")).unwrap_or_default();
        format!("its `modes` ({modes}) leave out the agent's mode `{}`", context.mode().unwrap_or_default())
    };
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let mut d = Diagnostic::file(
        Severity::Warning,
        Code::UnofferedTool,
        path,
        format!("names the tool `{name}`, which agent `{}` is not offered: {why}", agent.id),
    );
    d.line = Some(text[..at].matches('\n').count() + 1);
    d.column = Some(text[line_start..at].chars().count() + 1);
    d.span = Some(at..at + name.len());
    d.help = Some(format!(
        "a model told to use `{name}` has every call of it denied: offer it to the agent \
         ({}), or leave it out of the prompt",
        agent.dir.join("agent.toml").display()
    ));
    d
}

/// The code spans of Markdown `text` outside fenced code blocks, each as the byte offset of
/// its trimmed content and that content: a run of backticks up to the next run of the same
/// length on the same line.
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut fence: Option<(u8, usize)> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let line_at = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let run = |c: u8| trimmed.bytes().take_while(|&b| b == c).count();
        let (ticks, tildes) = (run(b'`'), run(b'~'));
        match fence {
            Some((c, n)) => {
                if (c == b'`' && ticks >= n || c == b'~' && tildes >= n) && trimmed[run(c)..].trim().is_empty() {
                    fence = None;
                }
                continue;
            }
            None if ticks >= 3 && !trimmed[ticks..].contains('`') => {
                fence = Some((b'`', ticks));
                continue;
            }
            None if tildes >= 3 => {
                fence = Some((b'~', tildes));
                continue;
            }
            None => {}
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'`' {
                i += 1;
                continue;
            }
            let open = bytes[i..].iter().take_while(|&&b| b == b'`').count();
            let content = i + open;
            let mut j = content;
            let mut close = None;
            while j < bytes.len() {
                if bytes[j] == b'`' {
                    let n = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                    if n == open {
                        close = Some(j);
                        break;
                    }
                    j += n;
                } else {
                    j += 1;
                }
            }
            let Some(end) = close else {
                i = content;
                continue;
            };
            let inner = &line[content..end];
            let word = inner.trim();
            if !word.is_empty() {
                let lead = inner.len() - inner.trim_start().len();
                spans.push((line_at + content + lead, word));
            }
            i = end + open;
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::code_spans;

    fn words(text: &str) -> Vec<&str> {
        code_spans(text).into_iter().map(|(_, w)| w).collect()
    }

    #[test]
    fn code_spans_are_matched_runs_outside_fences() {
        assert_eq!(words("use `a` and ``b`` then `c"), ["a", "b"]);
        assert_eq!(words("``x ` y`` and ` z `"), ["x ` y", "z"]);
        assert_eq!(words("```sh\n`inside`\n```\nafter `out`\n"), ["out"]);
        assert_eq!(words("~~~\n`inside`\n~~~\n`out`"), ["out"]);
        assert_eq!(words("````\n```\n`still`\n````\n`out`"), ["out"]);
        assert_eq!(words("```a``` is inline"), ["a"]);
        let text = "one\n  `two` x";
        let (at, w) = code_spans(text)[0];
        assert_eq!((&text[at..at + w.len()], w), ("two", "two"));
    }
}
