//! `packs prompt`.

use anyhow::Result;

use super::args;
use crate::agent::Agent;
use crate::catalog::Catalog;
use crate::prompt;
use crate::tool::Tool;

/// What `packs prompt` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum PromptFormat {
    /// soul.md, the context modules, and with --tools a tools section.
    Text,
    /// FunctionGemma's developer turn: declarations, then the tools' examples.
    Gemma,
}

#[derive(clap::Args, Debug)]
pub(super) struct PromptArgs {
    /// Append a tools section: each tool the agent may use, tersely
    #[arg(long)]
    tools: bool,
    /// Keep only tools whose `modes` include this mode or `Global` (default: the agent's `mode`)
    #[arg(long)]
    mode: Option<String>,
    /// `text` (soul, context modules, tools) or `gemma` (FunctionGemma's developer turn)
    #[arg(long, value_enum, default_value = "text")]
    format: PromptFormat,
    /// Set a context value used by `--format gemma` examples (url, selection, ...)
    #[arg(long = "context", value_name = "KEY=VALUE")]
    context: Vec<String>,
}

/// The tools an agent may use in a mode, in catalog order.
pub(super) fn agent_tools<'c>(catalog: &'c Catalog, agent: Option<&Agent>, mode: Option<&str>) -> Vec<&'c Tool> {
    catalog
        .tools()
        .filter(|t| agent.is_none_or(|a| a.offers(t)))
        .filter(|t| mode.is_none_or(|m| prompt::in_mode(t, m)))
        .collect()
}

pub(super) fn prompt(catalog: &Catalog, a: &PromptArgs, agent: Option<&Agent>) -> Result<i32> {
    let Some(agent) = agent else { anyhow::bail!("no agent") };
    let context = args::context(&a.context, &crate::call::Context::new())?;
    let mode = a.mode.as_deref().or(agent.config.mode.as_deref());
    let text = match a.format {
        PromptFormat::Gemma => prompt::gemma(&agent_tools(catalog, Some(agent), mode), &context),
        PromptFormat::Text => {
            let mut text = prompt::compose(&agent.dir)?;
            if a.tools {
                text.push_str(&prompt::tools_section(&agent_tools(catalog, Some(agent), mode)));
            }
            text
        }
    };
    // Byte for byte: no newline is added.
    super::print(&text)?;
    Ok(0)
}
