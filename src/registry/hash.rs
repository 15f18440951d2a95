//! Content hashes of tools: of canonical JSON (arguments for log correlation, schemas for the
//! validator cache) and of what a model sees of a tool (drift detection). Kept apart so that
//! registry entries and tool records can both use them without depending on each other.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Short hex SHA-256 of canonical JSON: compact, object keys sorted, so equal values hash
/// equally whatever their key order on the wire.
///
/// The keys are sorted here rather than left to serde_json's map: a dependency
/// (cedar-policy-core) turns on serde_json's `preserve_order`, which keeps objects in wire order.
/// The text is byte for byte what serde_json wrote with sorted maps, so hashes are unchanged.
///
/// This runs on every call (the log line's `args_hash`, the cache key): the JSON is hashed in
/// one piece (writing it into the hasher fragment by fragment cost more than the buffer) and
/// the hex is built from a table.
pub fn canonical_hash(value: &Value) -> String {
    let mut bytes = Vec::with_capacity(128);
    write_canonical(&mut bytes, value);
    let digest = Sha256::digest(&bytes);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(16);
    for b in &digest[..8] {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// Compact JSON with every object's keys in sorted order.
fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, key);
                out.push(b':');
                write_canonical(out, item);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
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
        // The first 8 bytes of SHA-256 of `{}`'s canonical text, in lower-case hex.
        assert_eq!(canonical_hash(&json!({})), "44136fa355b3678a");
        // Nested objects inside arrays too, and the text is serde_json's compact form.
        let c: Value = serde_json::from_str(r#"[{"z":1,"a":[{"y":"\u00e9","b":null}]}]"#).unwrap();
        let mut text = Vec::new();
        write_canonical(&mut text, &c);
        assert_eq!(String::from_utf8(text).unwrap(), r#"[{"a":[{"b":null,"y":"é"}],"z":1}]"#);
    }
}
