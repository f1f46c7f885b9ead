//! `packs prompt`.

use anyhow::Result;

use super::args;
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
    /// `text` (soul, context modules, tools) or `gemma` (FunctionGemma's developer turn)
    #[arg(long, value_enum, default_value = "text")]
    format: PromptFormat,
    /// Set a context value used by `--format gemma` examples (url, selection, ...)
    #[arg(long = "context", value_name = "KEY=VALUE")]
    context: Vec<String>,
}

pub(super) fn prompt(catalog: &Catalog, a: &PromptArgs, base: &crate::call::Context) -> Result<i32> {
    let Some(agent) = base.agent() else {
        let default = crate::agent::Agent::root().join(crate::agent::Agent::DEFAULT);
        anyhow::bail!("no agent to prompt for: name one with --agent ID, or make {}/", default.display())
    };
    // The agent's rules and the mode in effect (`--mode`, else the agent's `mode`).
    let tools: Vec<&Tool> = catalog.tools().filter(|t| base.offers(t)).collect();
    let context = args::context(&a.context, &crate::call::Context::new())?;
    let text = match a.format {
        PromptFormat::Gemma => prompt::gemma(&tools, &context),
        PromptFormat::Text => {
            let mut text = prompt::compose(&agent.dir)?;
            if a.tools {
                text.push_str(&prompt::tools_section(&tools));
            }
            text
        }
    };
    // Byte for byte: no newline is added.
    super::print(&text)?;
    Ok(0)
}
