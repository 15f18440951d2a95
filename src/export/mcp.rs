//! MCP: the definitions as `tools/list` returns them (the catalogue's exposed names), so the
//! same export command serves MCP-native clients too.

use serde_json::Value;

use super::Converted;

pub fn tool(tool: &Value) -> Converted {
    Converted { tool: tool.clone(), not_strict: None }
}
