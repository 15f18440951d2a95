//! Amazon Bedrock Converse: `toolConfig = {"tools": [{"toolSpec": {"name", "description",
//! "inputSchema": {"json": …}}}]}` (botocore's `bedrock-runtime` service model, operation
//! `Converse`).
//!
//! Constraints from that model: `name` matches `[a-zA-Z0-9_-]+`, 1–64 characters (mapped
//! otherwise, see [`super::names`]); `description` has at least one character (a tool
//! without one gets its title, else its name, and a warning); `tools` has at least one
//! element (an empty catalogue gives `toolConfig: null` and a note). The JSON Schema is
//! passed as it is: Converse takes JSON Schema documents.

use serde_json::{Value, json};

use super::{Converted, schema};

pub fn tool(tool: &Value, name: &str, notes: &mut schema::Notes) -> Converted {
    let (input, description) = schema::prepare(tool, notes);
    let description = description.unwrap_or_else(|| {
        notes.add("no description (Bedrock needs one): the tool name is used", "");
        name.to_string()
    });
    Converted {
        tool: json!({"toolSpec": {"name": name, "description": description, "inputSchema": {"json": input}}}),
        not_strict: None,
    }
}

/// The `toolConfig` value; `null` when there is no tool (Converse refuses an empty list).
pub fn tool_config(tools: Vec<Value>) -> Value {
    if tools.is_empty() { Value::Null } else { json!({"tools": tools}) }
}
