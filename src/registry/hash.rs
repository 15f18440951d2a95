//! Content hashes of tools: of canonical JSON (arguments for log correlation, schemas for the
//! validator cache) and of what a model sees of a tool (drift detection). Kept apart so that
//! registry entries and tool records can both use them without depending on each other.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Short hex SHA-256 of canonical JSON: object keys sorted at every depth, so equal values
/// hash equally whatever their key order on the wire. Sorted here rather than left to
/// serde_json's map: a dependency (cedar-policy) turns on its `preserve_order` feature for the
/// whole build, and then its maps keep the caller's order. The bytes are those serde_json
/// writes for a sorted map, so hashes are the same as they always were.
///
/// This runs on every call (the log line's `args_hash`, the cache key): the JSON is written
/// into one buffer and hashed in one piece, and the hex is built from a table.
pub fn canonical_hash(value: &Value) -> String {
    let mut bytes = Vec::with_capacity(128);
    write_canonical(value, &mut bytes);
    hex_digest(&bytes)
}

/// Short hex SHA-256 of `bytes`.
fn hex_digest(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(16);
    for b in &digest[..8] {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// The whole SHA-256 (64 hex digits) of the same canonical JSON: what an approval is bound to
/// (`crate::approvals`). The short hash above is for correlation; a 64-bit prefix is within
/// reach of a birthday search, so nothing that authorizes may rest on it.
pub fn canonical_sha256(value: &Value) -> String {
    let mut bytes = Vec::with_capacity(128);
    write_canonical(value, &mut bytes);
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Compact JSON with every object's keys in sorted order.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
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
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// Hash of what an LLM sees of a tool: the canonical hash of
/// `{"description":…,"inputSchema":…,"annotations":…}` (an absent field `null`), written
/// straight from the definition rather than from a copy of its schema.
pub fn definition_hash(definition: &Value) -> String {
    let mut schema = Vec::new();
    write_canonical(definition.get("inputSchema").unwrap_or(&Value::Null), &mut schema);
    definition_hash_with(definition, &schema)
}

/// [`definition_hash`] given the canonical bytes of the definition's `inputSchema` (`null`
/// when it has none).
fn definition_hash_with(definition: &Value, schema: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(schema.len() + 256);
    // The keys in sorted order, as `write_canonical` writes an object's.
    for (i, key) in ["annotations", "description", "inputSchema"].into_iter().enumerate() {
        bytes.extend_from_slice(if i == 0 { b"{\"" } else { b",\"" });
        bytes.extend_from_slice(key.as_bytes());
        bytes.extend_from_slice(b"\":");
        match key {
            "inputSchema" => bytes.extend_from_slice(schema),
            _ => write_canonical(definition.get(key).unwrap_or(&Value::Null), &mut bytes),
        }
    }
    bytes.push(b'}');
    hex_digest(&bytes)
}

/// A tool's schema hash ([`canonical_hash`] of its `inputSchema`, `default` when it has
/// none) and its [`definition_hash`], its schema written canonically once for both.
pub fn schema_and_definition_hashes(definition: &Value, default: &Value) -> (String, String) {
    let mut schema = Vec::with_capacity(256);
    match definition.get("inputSchema") {
        Some(input) => {
            write_canonical(input, &mut schema);
            (hex_digest(&schema), definition_hash_with(definition, &schema))
        }
        None => {
            write_canonical(default, &mut schema);
            (hex_digest(&schema), definition_hash_with(definition, b"null"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash_and_the_bytes_are_sorted_compact_json() {
        let a: Value = serde_json::from_str(r#"{"b":{"y":1,"x":[{"d":1,"c":"\u00e9"}]},"a":null}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":null,"b":{"x":[{"c":"é","d":1}],"y":1}}"#).unwrap();
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        let mut bytes = Vec::new();
        write_canonical(&a, &mut bytes);
        assert_eq!(String::from_utf8(bytes).unwrap(), r#"{"a":null,"b":{"x":[{"c":"é","d":1}],"y":1}}"#);
    }

    #[test]
    fn a_definition_hash_is_that_of_its_three_fields_as_one_object() {
        let tool = json!({
            "name": "n",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "description": "caf\u{e9}",
            "annotations": {"readOnlyHint": true},
            "outputSchema": {"type": "object"}
        });
        let fields = |t: &Value| json!({"description": t.get("description"), "inputSchema": t.get("inputSchema"), "annotations": t.get("annotations")});
        assert_eq!(definition_hash(&tool), canonical_hash(&fields(&tool)));
        let bare = json!({"name": "n"});
        assert_eq!(definition_hash(&bare), canonical_hash(&fields(&bare)), "absent fields are null");
        let default = json!({"type": "object"});
        for t in [&tool, &bare] {
            let schema = canonical_hash(t.get("inputSchema").unwrap_or(&default));
            assert_eq!(schema_and_definition_hashes(t, &default), (schema, definition_hash(t)));
        }
    }

    #[test]
    fn hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"type":"object","properties":{"a":{},"b":{}}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"properties":{"b":{},"a":{}},"type":"object"}"#).unwrap();
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        assert_ne!(canonical_hash(&a), canonical_hash(&json!({})));
        // The first 8 bytes of SHA-256 of `{}`'s canonical text, in lower-case hex.
        assert_eq!(canonical_hash(&json!({})), "44136fa355b3678a");
    }
}
