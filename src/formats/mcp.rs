//! MCP `tools/list` entries: `{"name", "title", "description", "inputSchema", "annotations"}`.
//!
//! The annotations are hints derived from what the tool's definition states: `readOnlyHint`
//! only when it says `read_only: true` (a manifest's default is no statement, and clients
//! auto-approve on the hint), `destructiveHint` its negation, `idempotentHint` the same as
//! `readOnlyHint` (a tool that changes nothing can be repeated), `openWorldHint` is
//! `requires_network`.

use serde_json::{Value, json};

use crate::tool::Tool;

/// One `tools/list` entry.
pub fn tool(t: &Tool) -> Value {
    let title = title(t.name());
    let policy = t.policy();
    let read_only = t.states_read_only();
    json!({
        "name": t.name(),
        "title": title,
        "description": t.description(),
        "inputSchema": super::parameters(t),
        "annotations": {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": !read_only,
            "idempotentHint": read_only,
            "openWorldHint": policy.requires_network,
        },
    })
}

/// A display title from a tool name: words split on `_`, `-` and `.`, each capitalized
/// (`get_weather` → `Get Weather`).
pub fn title(name: &str) -> String {
    name.split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(title("get_weather"), "Get Weather");
        assert_eq!(title("current_time"), "Current Time");
        assert_eq!(title("ls"), "Ls");
        assert_eq!(title("a__b-c.d2"), "A B C D2");
    }
}
