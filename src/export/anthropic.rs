//! Anthropic Messages: `tools = [{"name", "description", "input_schema"}]` (the `anthropic`
//! SDK's `ToolParam`).
//!
//! Constraints: `name` matches `^[a-zA-Z0-9_-]{1,64}$` (mapped otherwise); `input_schema` is a
//! JSON Schema whose root is `type: object` (set when a server left it out, with a warning).
//! `description` is optional and left out when the tool has none.

use serde_json::{Value, json};

use super::{Converted, schema};

pub fn tool(tool: &Value, name: &str, notes: &mut schema::Notes) -> Converted {
    let (input, description) = schema::prepare(tool, notes);
    let mut out = json!({"name": name, "input_schema": input});
    if let Some(description) = description {
        out["description"] = json!(description);
    }
    Converted { tool: out, not_strict: None }
}
