//! The rules: whether a call may run, may run once a person approves, or may not run
//! (fail closed), and the approvers that answer.

use std::path::PathBuf;

use crate::call::Context;
use crate::policy::Tier;
use crate::tool::Tool;

/// What the rules say about a call, before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// It may run.
    Allow,
    /// It may run if a person approves.
    Ask(ApprovalReason),
    /// It may not run.
    Deny(Denial),
}

/// Why a call needs a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalReason {
    /// The agent's `ask` list names the tool.
    #[error("agent `{agent}` asks for approval of it (agent.toml `ask`)")]
    AgentAsks {
        /// The agent's id.
        agent: String,
    },
    /// The tool's policy sets `confirm_before_run`.
    #[error("it asks to be confirmed before each run (policy.confirm_before_run)")]
    ConfirmBeforeRun,
    /// The tool's tier is `elevated`.
    #[error("its tier is elevated")]
    Elevated,
}

/// Why a call is not allowed to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// The agent's `tools` allow-list leaves the tool out, or its `deny` list names it.
    #[error("agent `{agent}` does not allow it (agent.toml `tools`/`deny`)")]
    NotAllowed {
        /// The agent's id.
        agent: String,
    },
    /// The tool's tier is above the agent's `max_tier`.
    #[error("its tier {tier} is above agent `{agent}`'s max_tier {max}")]
    AboveMaxTier {
        /// The agent's id.
        agent: String,
        /// The tool's tier.
        tier: Tier,
        /// The agent's highest tier.
        max: Tier,
    },
    /// The tool's `modes` leave out the mode in effect (an agent's `mode`, `--mode`).
    #[error("it is not offered in mode `{mode}` (its `modes` leave it out)")]
    NotInMode {
        /// The mode in effect.
        mode: String,
    },
    /// The call needed approval and the approver said no (or could not be asked).
    #[error("{0} and was not approved")]
    NotApproved(ApprovalReason),
    /// The call needed approval and the ticket given to answer it was refused (forged,
    /// expired, used before, or issued for another call).
    #[error("its approval ticket was refused: {0}")]
    Ticket(crate::call::TicketError),
}

/// Decide a call of `tool` for the agent in `context` (fail closed). The decision
/// depends on the tool and the context only, never on the arguments.
///
/// A tool outside the mode in effect is denied. With an agent: a tool outside its `tools` or inside its `deny` is denied, a tier
/// above its `max_tier` is denied, and a tool in its `ask` needs approval. Always: a
/// tool of tier `elevated` or with `confirm_before_run` needs approval.
pub(crate) fn decide(tool: &Tool, context: &Context) -> Decision {
    let tier = tool.tier();
    if let Some(mode) = context.mode().filter(|m| !tool.in_mode(m)) {
        return Decision::Deny(Denial::NotInMode { mode: mode.to_owned() });
    }
    if let Some(agent) = context.agent() {
        if !agent.allows(tool.name()) {
            return Decision::Deny(Denial::NotAllowed { agent: agent.id.clone() });
        }
        if let Some(max) = agent.max_tier().filter(|max| tier > *max) {
            return Decision::Deny(Denial::AboveMaxTier { agent: agent.id.clone(), tier, max });
        }
        if agent.asks(tool.name()) {
            return Decision::Ask(ApprovalReason::AgentAsks { agent: agent.id.clone() });
        }
    }
    // `confirm_before_run` always asks, whatever tier a manifest states.
    if tool.policy().confirm_before_run {
        Decision::Ask(ApprovalReason::ConfirmBeforeRun)
    } else if tier == Tier::Elevated {
        Decision::Ask(ApprovalReason::Elevated)
    } else {
        Decision::Allow
    }
}

/// What an approver is asked: the tool and exactly what would run, secrets masked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The tool's name.
    pub tool: String,
    /// Why approval is needed.
    pub reason: ApprovalReason,
    /// The tool's permission tier.
    pub tier: Tier,
    /// The argv that would run, secret values replaced by `***` (a native tool: its name
    /// and its arguments as JSON).
    pub argv: Vec<String>,
    /// The working directory, when set.
    pub cwd: Option<PathBuf>,
    /// The variables the tool's manifest sets, secret values replaced by `***`.
    pub env: Vec<(String, String)>,
    /// What the program would read on stdin (`command.stdin`), secrets masked.
    pub stdin: Option<crate::call::StdinPreview>,
}

impl ApprovalRequest {
    /// The command as a person should read it: each argument quoted for reading (never for
    /// running), control and invisible characters (`\r`, ESC, bidirectional overrides)
    /// escaped in bash's `$'…'` spelling, so what is shown is exactly what runs.
    pub fn command_line(&self) -> String {
        crate::visible::command_line(&self.argv)
    }
}

/// Decides calls that need a person's approval. packs fails closed: a call that
/// needs approval runs only when the approver says yes.
pub trait Approver {
    /// True to let the call run.
    fn approve(&self, request: &ApprovalRequest) -> bool;
}

/// Denies every call that needs approval (the default for non-interactive use).
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve(&self, _: &ApprovalRequest) -> bool {
        false
    }
}

/// Approves every call that needs approval (`packs run --yes`). The agent's rules
/// still deny what they deny.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _: &ApprovalRequest) -> bool {
        true
    }
}
