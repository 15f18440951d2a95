//! AgentCore-style Lambda targets in configuration: how a Lambda server's invocation is shaped
//! (`lambda_event`), the tool-name prefix such a function expects (`agentcore_target`), and
//! tool definitions declared in a JSON file (`tools_file`), as AgentCore Gateway targets
//! declare theirs.
//!
//! A function written for AgentCore Gateway has no `tools/list`: its tools are what the
//! operator declares (`tools`, `tools_file`, or registry entries naming the server). So the
//! declarations are checked when the configuration loads, each error naming the file (or the
//! key) and the entry, instead of surfacing as a missing or malformed tool at call time.

use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Config, ServerConfig, TransportKind};

/// What a Lambda server's function takes as its event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LambdaEvent {
    /// One JSON-RPC request per Invoke (the MCP request handlers of Lambda-hosted servers,
    /// e.g. awslabs' `stdio_server_adapter`); its tools are discovered with `tools/list`.
    #[default]
    Jsonrpc,
    /// AgentCore Gateway's Lambda target contract: the tool's bare `arguments` as the event,
    /// `bedrockAgentCoreToolName = "<target>___<tool>"` in the client context's `custom`.
    Agentcore,
}

impl LambdaEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            LambdaEvent::Jsonrpc => "jsonrpc",
            LambdaEvent::Agentcore => "agentcore",
        }
    }

    /// The kind a registry entry's `lambda_event` names (absent: `jsonrpc`).
    pub fn parse(name: Option<&str>) -> Option<Self> {
        match name {
            None | Some("jsonrpc") => Some(LambdaEvent::Jsonrpc),
            Some("agentcore") => Some(LambdaEvent::Agentcore),
            Some(_) => None,
        }
    }
}

/// Between the target and the tool in `bedrockAgentCoreToolName`.
pub const TARGET_SEPARATOR: &str = "___";

/// The keys a declared tool definition may carry.
const DEFINITION_KEYS: [&str; 7] =
    ["name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"];

/// The boolean hints of `annotations` (MCP's tool annotations).
const HINTS: [&str; 4] = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

impl ServerConfig {
    /// An AgentCore-style Lambda target (`transport = "lambda"`, `lambda_event = "agentcore"`).
    pub fn is_agentcore(&self) -> bool {
        self.transport == TransportKind::Lambda && self.lambda_event == LambdaEvent::Agentcore
    }

    /// The target name in `bedrockAgentCoreToolName`: `agentcore_target`, else the server's name.
    pub fn agentcore_target<'a>(&'a self, server: &'a str) -> &'a str {
        self.agentcore_target.as_deref().unwrap_or(server)
    }

    /// This server with the tools of its `tools_file` appended to its inline `tools` (what the
    /// running gateway serves as its declared tools).
    pub fn with_file_tools(&self) -> ServerConfig {
        let mut server = self.clone();
        let from_file = std::mem::take(&mut server.file_tools);
        server.tools.extend(from_file);
        server
    }
}

/// After deserialising (`raw` is the table it came from): reads every `tools_file`, and makes
/// AgentCore targets non-discovering (they have no `tools/list`); an explicit `discover = true`
/// on one is refused rather than ignored.
pub(super) fn prepare(config: &mut Config, raw: &toml::Table) -> anyhow::Result<()> {
    for (name, server) in &mut config.servers {
        if let Some(path) = &server.tools_file {
            server.file_tools =
                load_tools_file(path).with_context(|| format!("servers.{name}.tools_file"))?;
        }
        if server.is_agentcore() {
            let explicit = raw
                .get("servers")
                .and_then(|servers| servers.get(name))
                .and_then(|server| server.get("discover"))
                .and_then(toml::Value::as_bool);
            if explicit == Some(true) {
                bail!(
                    "server {name}: lambda_event = \"agentcore\" has no tools/list to discover; remove discover = true (its tools come from `tools`, `tools_file` or the registry)"
                );
            }
            server.discover = false;
        }
    }
    Ok(())
}

/// Reads a `tools_file`: a JSON array of tool definitions (AgentCore's inline tool schema), or
/// an object whose `tools` is one (a `tools/list` result). Every entry is checked.
pub fn load_tools_file(path: &Path) -> anyhow::Result<Vec<Value>> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {shown}"))?;
    let doc: Value = serde_json::from_str(&text).with_context(|| format!("{shown} is not JSON"))?;
    let tools = match doc {
        Value::Array(tools) => tools,
        Value::Object(mut map) => match map.remove("tools") {
            Some(Value::Array(tools)) => tools,
            _ => bail!(
                "{shown}: expected a JSON array of tool definitions (or an object whose `tools` is one)"
            ),
        },
        _ => bail!("{shown}: expected a JSON array of tool definitions, found {}", kind(&doc)),
    };
    check_definitions(&tools, |i, name| match name {
        Some(name) => format!("{shown}: entry {i} ({name:?})"),
        None => format!("{shown}: entry {i}"),
    })?;
    Ok(tools)
}

/// Checks a list of declared tool definitions, and that no name appears twice; `at` names an
/// entry (its index and, when it has one, its name) in errors.
pub fn check_definitions(tools: &[Value], at: impl Fn(usize, Option<&str>) -> String) -> anyhow::Result<()> {
    let mut seen = std::collections::HashMap::new();
    for (i, tool) in tools.iter().enumerate() {
        let name = tool.get("name").and_then(Value::as_str);
        if let Err(reason) = check_definition(tool) {
            bail!("{}: {reason}", at(i, name));
        }
        if let Some(name) = name
            && let Some(first) = seen.insert(name, i)
        {
            bail!("{}: the name is already declared by entry {first}", at(i, Some(name)));
        }
    }
    Ok(())
}

/// Why a declared tool definition is unusable, if it is.
pub fn check_definition(tool: &Value) -> Result<(), String> {
    let Some(map) = tool.as_object() else {
        return Err(format!("a tool definition must be a JSON object, found {}", kind(tool)));
    };
    if let Some(unknown) = map.keys().find(|k| !DEFINITION_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown key {unknown:?} (a tool definition has {})",
            DEFINITION_KEYS.join(", ")
        ));
    }
    match map.get("name") {
        Some(Value::String(name)) if valid_tool_name(name) => {}
        Some(Value::String(name)) => {
            return Err(format!("name {name:?} must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -"));
        }
        Some(other) => return Err(format!("name must be a string, found {}", kind(other))),
        None => return Err("needs a name".into()),
    }
    match map.get("description") {
        Some(Value::String(_)) => {}
        Some(other) => return Err(format!("description must be a string, found {}", kind(other))),
        None => return Err("needs a description".into()),
    }
    if let Some(title) = map.get("title").filter(|t| !t.is_string()) {
        return Err(format!("title must be a string, found {}", kind(title)));
    }
    match map.get("inputSchema") {
        Some(schema) => object_schema("inputSchema", schema)?,
        None => return Err("needs an inputSchema (a JSON Schema with \"type\": \"object\")".into()),
    }
    if let Some(schema) = map.get("outputSchema") {
        object_schema("outputSchema", schema)?;
    }
    if let Some(annotations) = map.get("annotations") {
        let Some(annotations) = annotations.as_object() else {
            return Err(format!("annotations must be an object, found {}", kind(annotations)));
        };
        for (key, value) in annotations {
            if HINTS.contains(&key.as_str()) && !value.is_boolean() {
                return Err(format!("annotations.{key} must be true or false, found {}", kind(value)));
            }
        }
    }
    if let Some(meta) = map.get("_meta").filter(|m| !m.is_object()) {
        return Err(format!("_meta must be an object, found {}", kind(meta)));
    }
    Ok(())
}

fn object_schema(key: &str, schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        _ if !schema.is_object() => {
            Err(format!("{key} must be a JSON Schema object, found {}", kind(schema)))
        }
        Some(Value::String(t)) if t == "object" => Ok(()),
        Some(other) => Err(format!("{key}.type must be \"object\", found {other}")),
        None => Err(format!("{key} needs \"type\": \"object\"")),
    }
}

/// What LLM tool APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The checks of one server's AgentCore keys (part of [`Config::validate`]).
pub(super) fn validate(name: &str, server: &ServerConfig, config: &Config) -> anyhow::Result<()> {
    if let Some(target) = &server.agentcore_target
        && let Err(reason) = check_target(target)
    {
        bail!("server {name}: agentcore_target {target:?} {reason}");
    }
    if !server.is_agentcore() {
        return Ok(());
    }
    let target = server.agentcore_target(name);
    if target.contains(TARGET_SEPARATOR) {
        bail!(
            "server {name}: the target name {target:?} contains \"___\", which separates target and tool in bedrockAgentCoreToolName; set agentcore_target"
        );
    }
    if server.discover {
        bail!(
            "server {name}: lambda_event = \"agentcore\" has no tools/list to discover; set discover = false"
        );
    }
    if server.retry.as_ref().is_some_and(|r| r.honours_idempotency_keys) {
        bail!(
            "server {name}: retry.honours_idempotency_keys cannot apply to lambda_event = \"agentcore\" (the event is the bare arguments: there is no place for the key)"
        );
    }
    check_definitions(&server.tools, |i, tool| match tool {
        Some(tool) => format!("servers.{name}.tools[{i}] ({tool:?})"),
        None => format!("servers.{name}.tools[{i}]"),
    })?;
    for tool in &server.file_tools {
        let declared = tool.get("name");
        if declared.is_some() && server.tools.iter().any(|inline| inline.get("name") == declared) {
            bail!(
                "server {name}: tool {} is declared both in `tools` and in tools_file",
                declared.map(Value::to_string).unwrap_or_default()
            );
        }
    }
    let registry = config.redis_url.is_some() || config.dynamodb_table.is_some();
    if server.tools.is_empty() && server.file_tools.is_empty() && !registry {
        bail!(
            "server {name}: lambda_event = \"agentcore\" has no tools/list: declare its tools in `tools` or `tools_file` (or register them: redis_url / dynamodb_table)"
        );
    }
    Ok(())
}

/// AgentCore target names: 1 to 100 characters of a-z, A-Z, 0-9, _ and -, without "___".
fn check_target(target: &str) -> Result<(), String> {
    if !(1..=100).contains(&target.len())
        || !target.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err("must be 1 to 100 characters of a-z, A-Z, 0-9, _ and -".into());
    }
    if target.contains(TARGET_SEPARATOR) {
        return Err("must not contain \"___\" (it separates target and tool)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reason(tool: Value) -> String {
        check_definition(&tool).expect_err("refused")
    }

    #[test]
    fn declared_definitions_are_checked_key_by_key() {
        let good = json!({
            "name": "order_status", "description": "Status of an order",
            "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
            "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "title": "Order"}
        });
        assert_eq!(check_definition(&good), Ok(()));
        assert!(reason(json!(["x"])).contains("JSON object, found an array"));
        assert!(
            reason(json!({"description": "d", "inputSchema": {"type": "object"}})).contains("needs a name")
        );
        assert!(
            reason(json!({"name": "a b", "description": "d", "inputSchema": {"type": "object"}}))
                .contains("1 to 64")
        );
        assert!(
            reason(json!({"name": "a", "inputSchema": {"type": "object"}})).contains("needs a description")
        );
        assert!(reason(json!({"name": "a", "description": "d"})).contains("needs an inputSchema"));
        assert!(
            reason(json!({"name": "a", "description": "d", "inputSchema": {"type": "string"}}))
                .contains("inputSchema.type must be \"object\"")
        );
        assert!(
            reason(json!({"name": "a", "description": "d", "inputSchema": {"type": "object"}, "outputSchema": []}))
                .contains("outputSchema must be a JSON Schema object")
        );
        assert!(
            reason(json!({"name": "a", "description": "d", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}))
                .contains("annotations.readOnlyHint must be true or false")
        );
        assert!(
            reason(json!({"name": "a", "description": "d", "inputSchema": {"type": "object"}, "input_schema": {}}))
                .contains("unknown key \"input_schema\"")
        );
    }

    #[test]
    fn a_name_declared_twice_names_both_entries() {
        let tool = json!({"name": "a", "description": "d", "inputSchema": {"type": "object"}});
        let err = check_definitions(&[tool.clone(), tool], |i, n| format!("entry {i} ({n:?})")).unwrap_err();
        assert_eq!(err.to_string(), "entry 1 (Some(\"a\")): the name is already declared by entry 0");
    }

    #[test]
    fn target_names_cannot_hide_the_separator() {
        assert!(check_target("store-tools_1").is_ok());
        assert!(check_target("store___tools").unwrap_err().contains("\"___\""));
        assert!(check_target("").is_err());
        assert!(check_target("store.tools").is_err());
    }
}
