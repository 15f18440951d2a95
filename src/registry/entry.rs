//! A registry entry: one tool as stored in DynamoDB (and cached as JSON in Redis) — its
//! definition, the server it lives on, and its lifecycle fields.
//!
//! DynamoDB item (table `mcp-tool-registry`, partition key `tool_name`):
//!
//! | attribute | type | meaning |
//! |---|---|---|
//! | `tool_name` | S | the tool's name (key) |
//! | `definition` | S | JSON: `{description, inputSchema, annotations, title?, outputSchema?}` |
//! | `server_name` | S | the server it lives on |
//! | `transport` | S | `http` \| `lambda` \| `websocket` \| `sse` \| `stdio` |
//! | `url` | S | streamable-HTTP endpoint (http), `ws://`/`wss://` URL (websocket), SSE stream URL (sse) |
//! | `command` | S | stdio: the key of a `[stdio_commands.NAME]` of the gateway's configuration — never a program itself |
//! | `function_name`, `qualifier` | S | Lambda function and alias/version (lambda) |
//! | `lambda_event` | S | lambda: `jsonrpc` (default) \| `agentcore` (AgentCore Gateway's Lambda target contract) |
//! | `agentcore_target` | S | lambda, `agentcore`: the target in `bedrockAgentCoreToolName` (default: `server_name`) |
//! | `status` | S | `active` \| `inactive` |
//! | `healthy` | BOOL | false hides the tool like `inactive` |
//! | `version` | N | incremented on every write |
//! | `updated_at` | S | RFC 3339 time of the last write |
//! | `schema_hash`, `definition_hash` | S | hashes of the canonical schema / definition |
//! | `overrides` | S | optional JSON: catalogue control (`rename`, `description`, `hide`, `annotations`, `fixed_arguments`, `default_arguments`; see [`super::control`]) |

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::hash::{canonical_hash, definition_hash};
use crate::tool_control::ToolOverrides;

/// Where a registered tool's server is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRef {
    pub name: String,
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qualifier: Option<String>,
    /// stdio: the name of one of the gateway's `stdio_commands` (an allowlist: a registry
    /// writer can pick a configured command, never supply one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// lambda: `jsonrpc` (absent) or `agentcore` (the function is an AgentCore Gateway
    /// Lambda target: bare arguments, the tool named in the client context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_event: Option<String>,
    /// lambda, `agentcore`: the target in `bedrockAgentCoreToolName` (absent: the server name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agentcore_target: Option<String>,
}

/// One registered tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryEntry {
    pub tool_name: String,
    /// `{description, inputSchema, annotations, …}` without the name.
    pub definition: Value,
    pub server: ServerRef,
    pub status: String,
    pub healthy: bool,
    pub version: u64,
    pub updated_at: String,
    /// Catalogue control of this tool; `[tools.NAME]` of the configuration wins key by key.
    #[serde(default, skip_serializing_if = "ToolOverrides::is_empty")]
    pub overrides: ToolOverrides,
}

impl RegistryEntry {
    /// Served only when active and healthy.
    pub fn is_live(&self) -> bool {
        self.status == "active" && self.healthy
    }

    /// The `tools/list` entry: the definition with the name.
    pub fn tool_definition(&self) -> Value {
        let mut tool = self.definition.clone();
        if let Value::Object(map) = &mut tool {
            map.insert("name".into(), json!(self.tool_name));
        }
        tool
    }

    pub fn schema_hash(&self) -> String {
        canonical_hash(self.definition.get("inputSchema").unwrap_or(&json!({"type": "object"})))
    }

    pub fn definition_hash(&self) -> String {
        definition_hash(&self.tool_definition())
    }

    /// The DynamoDB item.
    pub fn to_item(&self) -> HashMap<String, AttributeValue> {
        let s = |v: &str| AttributeValue::S(v.to_string());
        let mut item = HashMap::from([
            ("tool_name".to_string(), s(&self.tool_name)),
            ("definition".to_string(), s(&self.definition.to_string())),
            ("server_name".to_string(), s(&self.server.name)),
            ("transport".to_string(), s(&self.server.transport)),
            ("status".to_string(), s(&self.status)),
            ("healthy".to_string(), AttributeValue::Bool(self.healthy)),
            ("version".to_string(), AttributeValue::N(self.version.to_string())),
            ("updated_at".to_string(), s(&self.updated_at)),
            ("schema_hash".to_string(), s(&self.schema_hash())),
            ("definition_hash".to_string(), s(&self.definition_hash())),
        ]);
        if !self.overrides.is_empty() {
            item.insert("overrides".to_string(), s(&json!(self.overrides).to_string()));
        }
        for (key, value) in [
            ("url", &self.server.url),
            ("function_name", &self.server.function),
            ("qualifier", &self.server.qualifier),
            ("command", &self.server.command),
            ("lambda_event", &self.server.lambda_event),
            ("agentcore_target", &self.server.agentcore_target),
        ] {
            if let Some(value) = value {
                item.insert(key.to_string(), s(value));
            }
        }
        item
    }

    /// Reads a DynamoDB item; `Err` names what is wrong with it.
    pub fn from_item(item: &HashMap<String, AttributeValue>) -> Result<Self, String> {
        let text = |key: &str| item.get(key).and_then(|v| v.as_s().ok()).cloned();
        let required = |key: &str| text(key).ok_or_else(|| format!("item lacks {key}"));
        let definition: Value = serde_json::from_str(&required("definition")?)
            .map_err(|e| format!("definition is not JSON: {e}"))?;
        // An entry whose overrides cannot be read is refused whole: serving it without them
        // would drop the operator's constraints (a fixed argument, a hidden tool).
        let overrides = match text("overrides") {
            Some(text) => serde_json::from_str(&text).map_err(|e| format!("overrides are not valid: {e}"))?,
            None => ToolOverrides::default(),
        };
        Ok(Self {
            tool_name: required("tool_name")?,
            definition,
            server: ServerRef {
                name: required("server_name")?,
                transport: required("transport")?,
                url: text("url"),
                function: text("function_name"),
                qualifier: text("qualifier"),
                command: text("command"),
                lambda_event: text("lambda_event"),
                agentcore_target: text("agentcore_target"),
            },
            status: text("status").unwrap_or_else(|| "active".into()),
            healthy: item.get("healthy").and_then(|v| v.as_bool().ok()).copied().unwrap_or(true),
            version: item
                .get("version")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            updated_at: text("updated_at").unwrap_or_default(),
            overrides,
        })
    }
}

/// Now, as RFC 3339 (UTC, second precision), without a date crate.
pub fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// A point in time as RFC 3339 (UTC, second precision).
pub fn rfc3339(at: std::time::SystemTime) -> String {
    let secs = at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip() {
        let entry = RegistryEntry {
            tool_name: "manga_search".into(),
            definition: json!({"description": "d", "inputSchema": {"type": "object"}}),
            server: ServerRef {
                name: "catalog".into(),
                transport: "http".into(),
                url: Some("http://x/mcp".into()),
                function: None,
                qualifier: None,
                command: None,
                lambda_event: None,
                agentcore_target: None,
            },
            status: "active".into(),
            healthy: true,
            version: 3,
            updated_at: now_rfc3339(),
            overrides: ToolOverrides::default(),
        };
        assert_eq!(RegistryEntry::from_item(&entry.to_item()).unwrap(), entry);
        let controlled = RegistryEntry {
            overrides: serde_json::from_value(
                json!({"rename": "find_manga", "fixed_arguments": {"language": "en"}}),
            )
            .unwrap(),
            ..entry.clone()
        };
        assert_eq!(RegistryEntry::from_item(&controlled.to_item()).unwrap(), controlled);
        let mut broken = controlled.to_item();
        broken.insert("overrides".into(), AttributeValue::S(r#"{"renam": "x"}"#.into()));
        assert!(RegistryEntry::from_item(&broken).unwrap_err().contains("overrides are not valid"));
        assert_eq!(entry.tool_definition()["name"], "manga_search");
        assert!(now_rfc3339().starts_with("20"));
    }
}
