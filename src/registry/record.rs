//! One resolved tool: where it lives, what it accepts, and how safe it is to retry.

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{config::TransportKind, validation::ArgumentSchema};

/// A tool as the gateway exposes it.
#[derive(Debug)]
pub struct ToolRecord {
    /// The name callers use (namespaced `server__tool` when two servers share a name).
    pub name: Arc<str>,
    /// The name on the upstream server.
    pub upstream_name: Arc<str>,
    pub server: Arc<str>,
    pub transport: TransportKind,
    /// The `tools/list` entry callers see (with `name` set to [`Self::name`]).
    pub definition: Value,
    /// Hash of the canonical `inputSchema`; compiled validators are shared by this key.
    pub schema_hash: String,
    /// Hash of description + schema + annotations: a change alters what the LLM sees.
    pub definition_hash: String,
    pub schema: Arc<ArgumentSchema>,
    /// `annotations.readOnlyHint` (default false).
    pub read_only: bool,
    /// `annotations.idempotentHint` (default false).
    pub idempotent: bool,
    /// Where the tool came from when not from configuration or discovery: its registry
    /// entry's server (DynamoDB-registered tools).
    pub origin: Option<Arc<super::entry::ServerRef>>,
}

/// Short hex SHA-256 of canonical JSON (serde_json sorts object keys, so equal values hash
/// equally whatever their key order on the wire).
pub fn canonical_hash(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Hash of what an LLM sees of a tool.
pub fn definition_hash(definition: &Value) -> String {
    canonical_hash(&serde_json::json!({
        "description": definition.get("description"),
        "inputSchema": definition.get("inputSchema"),
        "annotations": definition.get("annotations"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"type":"object","properties":{"a":{},"b":{}}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"properties":{"b":{},"a":{}},"type":"object"}"#).unwrap();
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        assert_ne!(canonical_hash(&a), canonical_hash(&json!({})));
    }
}
