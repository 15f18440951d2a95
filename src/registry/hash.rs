//! Content hashes of tools: of canonical JSON (arguments for log correlation, schemas for the
//! validator cache) and of what a model sees of a tool (drift detection). Kept apart so that
//! registry entries and tool records can both use them without depending on each other.

use serde_json::Value;
use sha2::{Digest, Sha256};

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
