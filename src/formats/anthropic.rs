//! Anthropic Messages API tool definitions: `{"name", "description", "input_schema"}`.
//!
//! `input_schema` is the describe parameters schema as is: the API takes a JSON Schema
//! object schema.

use serde_json::{Value, json};

use crate::tool::Tool;

/// One tool for the Messages API `tools`.
pub fn tool(t: &Tool) -> Value {
    json!({
        "name": t.name(),
        "description": t.description(),
        "input_schema": super::parameters(t),
    })
}
