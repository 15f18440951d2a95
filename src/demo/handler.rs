//! The demo server's MCP request handler, shared by its HTTP and Lambda front ends. It speaks
//! both eras: session-era clients `initialize` first; modern clients send `_meta` on every
//! request and may call `server/discover`. It keeps no session state.

use serde_json::{Value, json};

use super::tools;
use crate::protocol::{
    jsonrpc::{self, Inbound, Message},
    mcp,
};

const NAME: &str = "manga-demo";
const INSTRUCTIONS: &str =
    "MangaAssist demo catalogue: search manga, look up prices and stock, manage a cart.";

/// Handles one JSON-RPC body (single or batch); `None` when nothing is to be answered.
pub fn handle_body(body: &[u8]) -> Option<Value> {
    match jsonrpc::decode(body) {
        Err(e) => Some(error(Value::Null, -32700, &e.detail)),
        Ok(Inbound::Single(message)) => handle_entry(message),
        Ok(Inbound::Batch(items)) => {
            let answers: Vec<Value> = items.into_iter().filter_map(handle_entry).collect();
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
    }
}

fn handle_entry(entry: jsonrpc::Entry) -> Option<Value> {
    match entry {
        Ok(message) => handle(&message),
        Err(rejected) => Some(error(rejected.id, -32600, &rejected.error.detail)),
    }
}

/// Handles one message; `None` for notifications.
pub fn handle(message: &Message) -> Option<Value> {
    let id = message.id.clone()?;
    let params = message.params.as_ref();
    let modern = match mcp::meta_version(params) {
        Some(v) if v == mcp::MODERN_VERSION => true,
        Some(v) if mcp::is_supported(v) => false,
        Some(v) => {
            return Some(error_with_data(
                id,
                -32022,
                &format!("Unsupported protocol version: {v}"),
                json!({"supported": mcp::supported_versions(), "requested": v}),
            ));
        }
        None => false,
    };
    let result = match message.method.as_str() {
        "initialize" => {
            let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
            mcp::initialize_result(requested, NAME, crate::VERSION, Some(INSTRUCTIONS))
        }
        "ping" => json!({}),
        "server/discover" => mcp::discover_result(NAME, crate::VERSION, Some(INSTRUCTIONS), 3_600_000),
        "tools/list" if modern => {
            json!({"tools": tools::definitions(), "ttlMs": 60_000, "cacheScope": "public"})
        }
        "tools/list" => json!({"tools": tools::definitions()}),
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
            let empty = json!({});
            let args = params.and_then(|p| p.get("arguments")).unwrap_or(&empty);
            match tools::call(name, args) {
                Some(result) => result,
                None => return Some(error(id, -32602, &format!("Unknown tool: {name}"))),
            }
        }
        other => return Some(error(id, -32601, &format!("Method not found: {other}"))),
    };
    let mut result = result;
    if modern {
        result["resultType"] = json!("complete");
    }
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn error_with_data(id: Value, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_eras_are_answered() {
        let legacy = handle_body(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        )
        .unwrap();
        assert_eq!(legacy["result"]["protocolVersion"], "2025-06-18");
        let modern = handle_body(
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"manga_search","arguments":{"query":"naruto"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        )
        .unwrap();
        assert_eq!(modern["result"]["resultType"], "complete");
        assert!(handle_body(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
    }
}
