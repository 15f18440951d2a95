//! `Mcp-Param-{Name}` headers (2026-07-28 streamable HTTP, "Custom Headers from Tool
//! Parameters"): a tool's `inputSchema` may mark a property with `"x-mcp-header": "Region"`,
//! and a modern-era `tools/call` over HTTP then carries the argument's value as
//! `Mcp-Param-Region`, so intermediaries can route on it without reading the body.
//!
//! What the spec asks and what is done here:
//! - only properties reachable from the root through `properties` keys alone count (an
//!   annotation under `items`, `oneOf`, `$ref`, … is not followed);
//! - strings as they are, integers in decimal, booleans as `true`/`false`; a `null` or absent
//!   argument sends no header; other value types send none either;
//! - a value that is not plain visible ASCII (with interior spaces or tabs), has surrounding
//!   whitespace, or itself looks like the sentinel, travels as `=?base64?{UTF-8 base64}?=`.
//!
//! An annotation whose name is not an HTTP token is skipped here (with a header name we
//! cannot send, sending nothing is the only choice); excluding such tools from `tools/list`,
//! as the spec asks of clients, belongs to the registry and is not done by this module.

use base64::Engine;
use serde_json::Value;

/// The header name prefix (`Mcp-Param-`, lower-cased as HTTP/2 sends it).
pub const PREFIX: &str = "mcp-param-";

/// The schema keyword naming the header.
const ANNOTATION: &str = "x-mcp-header";

/// The `(name, value)` pairs (name without [`PREFIX`]) to send for a call of a tool with
/// `input_schema` and `arguments`.
pub fn for_call(input_schema: Option<&Value>, arguments: &Value) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    if let Some(schema) = input_schema {
        collect(schema, Some(arguments), &mut headers, 0);
    }
    headers
}

/// Whether a schema annotates any property reachable through `properties` with a header
/// (computed once per schema: a tool that declares none sends none, and its calls skip the walk).
pub fn declared(schema: &Value) -> bool {
    fn walk(schema: &Value, depth: usize) -> bool {
        depth <= 32
            && schema.get("properties").and_then(Value::as_object).is_some_and(|properties| {
                properties.values().any(|p| p.get(ANNOTATION).is_some() || walk(p, depth + 1))
            })
    }
    walk(schema, 0)
}

fn collect(schema: &Value, instance: Option<&Value>, out: &mut Vec<(String, String)>, depth: usize) {
    // Deeper than any real schema: a guard against pathological ones, not a rule of the spec.
    if depth > 32 {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        let value = instance.and_then(|i| i.get(key));
        if let Some(name) = property.get(ANNOTATION).and_then(Value::as_str) {
            if is_token(name)
                && !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                && let Some(text) = value.and_then(as_header_text)
            {
                out.push((name.to_string(), encode(&text)));
            }
            continue;
        }
        collect(property, value, out, depth + 1);
    }
}

/// The string form of a primitive argument (`None` for null, numbers with a fraction, objects…).
fn as_header_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => n.as_i64().map(|i| i.to_string()).or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
                .map(|f| (f as i64).to_string())
        }),
        _ => None,
    }
}

/// RFC 9110 `token` (`1*tchar`).
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value as the spec's "Value Encoding" section says.
pub fn encode(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x21..0x7f).contains(&b) || b == b' ' || b == b'\t')
        && value.trim_matches([' ', '\t']) == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_string()
    } else {
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_declares_headers_only_through_properties() {
        let nested = json!({"properties": {"where": {"properties": {"region": {"x-mcp-header": "Region"}}}}});
        assert!(declared(&nested));
        assert!(!declared(&json!({"properties": {"q": {"type": "string"}}})));
        assert!(!declared(&json!({"type": "object"})));
        let under_items =
            json!({"properties": {"list": {"items": {"properties": {"r": {"x-mcp-header": "R"}}}}}});
        assert!(!declared(&under_items), "not followed by the spec, so not declared");
        assert!(for_call(Some(&under_items), &json!({"list": [{"r": "x"}]})).is_empty());
    }

    #[test]
    fn annotated_arguments_become_headers_encoded_as_the_spec_shows() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                "greeting": {"type": "string", "x-mcp-header": "Greeting"},
                "absent": {"type": "string", "x-mcp-header": "Absent"},
                "nothing": {"type": "string", "x-mcp-header": "Nothing"},
                "query": {"type": "string"},
                "target": {"type": "object", "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}}},
                "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string", "x-mcp-header": "X"}}}},
                "bad": {"type": "string", "x-mcp-header": "Bad Name"},
            }
        });
        let args = json!({
            "region": "us-west1", "priority": 42, "dry": false, "greeting": "Hello, 世界",
            "nothing": null, "query": "SELECT 1", "target": {"tenant": " padded "},
            "list": [{"x": "no"}], "bad": "x",
        });
        let mut got = for_call(Some(&schema), &args);
        got.sort();
        let want: Vec<(String, String)> = [
            ("Dry-Run", "false"),
            ("Greeting", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("Priority", "42"),
            ("Region", "us-west1"),
            ("Tenant", "=?base64?IHBhZGRlZCA=?="),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_spec_encoding_examples() {
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(encode("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
        assert_eq!(encode("a b"), "a b");
    }

    mod properties {
        use base64::Engine;
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any argument text encodes to a valid header value that decodes back to it, and
            /// grows by at most the base64 factor.
            #[test]
            fn any_value_round_trips_as_a_valid_header(value in any::<String>()) {
                let encoded = encode(&value);
                prop_assert!(axum::http::HeaderValue::from_str(&encoded).is_ok(), "{:?}", encoded);
                prop_assert!(encoded.len() <= value.len().div_ceil(3) * 4 + "=?base64??=".len());
                let decoded = match encoded.strip_prefix("=?base64?").and_then(|e| e.strip_suffix("?=")) {
                    Some(b64) => String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap(),
                    None => encoded.clone(),
                };
                prop_assert_eq!(decoded, value);
            }

            /// Arbitrary schemas and arguments (names and values chosen by a registry entry or a
            /// caller): no panic, only token names, no name twice, every value a header value.
            #[test]
            fn arbitrary_schemas_and_arguments(
                names in prop::collection::vec("[ -~]{0,6}", 0..6),
                values in prop::collection::vec(prop_oneof![any::<String>().prop_map(Value::from), any::<i64>().prop_map(Value::from), any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from), any::<bool>().prop_map(Value::from), Just(Value::Null)], 0..6),
                nest in any::<bool>(),
            ) {
                let mut properties = serde_json::Map::new();
                let mut arguments = serde_json::Map::new();
                for (i, name) in names.iter().enumerate() {
                    properties.insert(format!("p{i}"), json!({"x-mcp-header": name}));
                    if let Some(value) = values.get(i) {
                        arguments.insert(format!("p{i}"), value.clone());
                    }
                }
                let (schema, arguments) = if nest {
                    (json!({"properties": {"inner": {"properties": properties}}}), json!({"inner": arguments}))
                } else {
                    (json!({"properties": properties}), Value::Object(arguments))
                };
                let headers = for_call(Some(&schema), &arguments);
                prop_assert!(headers.len() <= names.len());
                for (i, (name, value)) in headers.iter().enumerate() {
                    prop_assert!(axum::http::HeaderName::from_bytes(format!("{PREFIX}{name}").as_bytes()).is_ok(), "{:?}", name);
                    prop_assert!(axum::http::HeaderValue::from_str(value).is_ok());
                    prop_assert!(!headers[..i].iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
                }
                prop_assert_eq!(declared(&schema), !names.is_empty());
            }
        }
    }
}
