//! The answers of the federated methods, checked and fitted before they reach a caller:
//! the gateway's own list pages and cursors, and the shape and size of what a server read,
//! got or completed.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use super::{PAGE_SIZE, Unroutable};
use crate::{
    error::{Category, GatewayError},
    protocol::extensions,
    resource_uri::{CanonicalUri, UriRefusal},
};

/// The prefix of the gateway's own list cursors.
const CURSOR_PREFIX: &str = "mcpgw-cursor.";
/// Most values a `completion/complete` result may carry (the specification's bound).
const MAX_COMPLETION_VALUES: usize = 100;

/// One page of `items` after the caller's cursor, as `{key: [...], nextCursor?}`.
pub(super) fn page_of<'a, T: serde::Serialize + ?Sized + 'a>(
    items: impl Iterator<Item = &'a T>,
    params: &Map<String, Value>,
    key: &str,
) -> Result<Value, GatewayError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => decode_cursor(cursor)
            .ok_or_else(|| bad_input("params.cursor is not a cursor this gateway gave"))?,
        Some(_) => return Err(bad_input("params.cursor must be a string")),
    };
    let mut page: Vec<&T> = items.skip(start).take(PAGE_SIZE + 1).collect();
    let more = page.len() > PAGE_SIZE;
    page.truncate(PAGE_SIZE);
    let mut result = json!({ key: page });
    if more {
        result["nextCursor"] = json!(encode_cursor(start + PAGE_SIZE));
    }
    Ok(result)
}

fn encode_cursor(offset: usize) -> String {
    format!("{CURSOR_PREFIX}{}", URL_SAFE_NO_PAD.encode(offset.to_string()))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let encoded = cursor.strip_prefix(CURSOR_PREFIX)?;
    let text = URL_SAFE_NO_PAD.decode(encoded).ok()?;
    std::str::from_utf8(&text).ok()?.parse().ok()
}

pub(super) fn bad_input(detail: &str) -> GatewayError {
    GatewayError::new(Category::BadInput, detail)
}

pub(in crate::gateway) fn not_found(uri: &CanonicalUri, why: Unroutable) -> GatewayError {
    let detail = match why {
        Unroutable::Unknown => {
            "no server lists it, and no template or configured prefix covers it".to_string()
        }
        Unroutable::Claimed(servers) => {
            let servers: Vec<&str> = servers.iter().map(|s| s.as_ref()).collect();
            format!(
                "several servers claim it ({}) and no configured prefix names its owner",
                servers.join(", ")
            )
        }
    };
    // `data.uri`, as the specification's resource-not-found error carries it.
    GatewayError::new(Category::ResourceNotFound, format!("no server serves this resource URI: {detail}"))
        .with_extra("uri", json!(crate::redact::url(uri.as_str())))
}

/// A resource URI that has no canonical form (`crate::resource_uri`): refused before any
/// decision, with the reason in `error.data.reason`.
fn refused_uri(refusal: UriRefusal) -> GatewayError {
    GatewayError::new(Category::BadInput, format!("params.uri is refused: {refusal}"))
        .with_extra("reason", json!(refusal.reason()))
}

/// `params.uri` of a request in its canonical form, or the caller's error.
pub(in crate::gateway) fn canonical_param(uri: Option<&Value>) -> Result<CanonicalUri, GatewayError> {
    let Some(uri) = uri.and_then(Value::as_str) else {
        return Err(bad_input("params.uri must be a string"));
    };
    canonical_uri(uri)
}

/// A caller's resource URI in its canonical form, or the caller's error.
pub(in crate::gateway) fn canonical_uri(raw: &str) -> Result<CanonicalUri, GatewayError> {
    CanonicalUri::parse(raw).map_err(refused_uri)
}

fn protocol(detail: &str) -> GatewayError {
    GatewayError::new(Category::UpstreamProtocol, format!("the server's answer is not MCP: {detail}"))
}

/// A `resources/read` result checked (`contents`: objects with a `uri` and a `text` or
/// `blob`) and fitted to `budget` bytes of content: text beyond it cut and marked, a blob
/// beyond it refused.
pub(super) fn checked_contents(mut result: Value, budget: usize) -> Result<Value, GatewayError> {
    let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) else {
        return Err(protocol("resources/read result without a contents array"));
    };
    let mut left = budget;
    for content in contents.iter_mut() {
        let Some(content) = content.as_object_mut() else {
            return Err(protocol("a content that is not an object"));
        };
        if !content.get("uri").is_some_and(Value::is_string) {
            return Err(protocol("a content without a uri"));
        }
        // An MCP App's HTML is never cut (a cut document is a broken app): over the budget it
        // is refused, as a blob is.
        let app = content.get("mimeType").and_then(Value::as_str) == Some(extensions::APP_MIME_TYPE);
        if let Some(Value::String(text)) = content.get_mut("text") {
            if app && text.len() > left {
                return Err(GatewayError::new(
                    Category::ResponseTooLarge,
                    format!(
                        "an MCP App's HTML of {} bytes is over the result budget ({budget} bytes); it is never cut",
                        text.len()
                    ),
                ));
            }
            if text.len() > left {
                let mut cut = left;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                let dropped = text.len() - cut;
                text.truncate(cut);
                text.push_str(&format!("…[truncated {dropped} bytes]"));
                // Beside the server's own `_meta` (an app's `ui`, say), never instead of it.
                match content.get_mut("_meta").and_then(Value::as_object_mut) {
                    Some(meta) => {
                        meta.insert("io.mcp-gateway/truncated".into(), json!(true));
                    }
                    None => {
                        content.insert("_meta".into(), json!({"io.mcp-gateway/truncated": true}));
                    }
                }
            }
            left = left.saturating_sub(content.get("text").and_then(Value::as_str).map_or(0, str::len));
        } else if let Some(Value::String(blob)) = content.get("blob") {
            if blob.len() > left {
                return Err(GatewayError::new(
                    Category::ResponseTooLarge,
                    format!("a blob of {} bytes is over the result budget ({budget} bytes)", blob.len()),
                ));
            }
            left -= blob.len();
        } else {
            return Err(protocol("a content with neither text nor blob"));
        }
    }
    Ok(result)
}

/// A `prompts/get` result checked (`messages`: objects with a `role` and a `content`) and
/// bounded by `budget` bytes.
pub(super) fn checked_messages(result: Value, budget: usize) -> Result<Value, GatewayError> {
    let Some(messages) = result.get("messages").and_then(Value::as_array) else {
        return Err(protocol("prompts/get result without a messages array"));
    };
    if messages.iter().any(|m| {
        !m.get("role").is_some_and(Value::is_string) || !m.get("content").is_some_and(Value::is_object)
    }) {
        return Err(protocol("a prompt message without a role or a content"));
    }
    let size = crate::registry::bounds::json_len(&result);
    if size > budget {
        return Err(GatewayError::new(
            Category::ResponseTooLarge,
            format!("a prompt of {size} bytes is over the result budget ({budget} bytes)"),
        ));
    }
    Ok(result)
}

/// A `completion/complete` result checked: `completion.values`, at most 100 strings.
pub(super) fn checked_completion(result: Value) -> Result<Value, GatewayError> {
    let values = result.pointer("/completion/values").and_then(Value::as_array);
    match values {
        Some(values) if values.len() <= MAX_COMPLETION_VALUES && values.iter().all(Value::is_string) => {
            Ok(result)
        }
        Some(_) => Err(protocol("completion values must be at most 100 strings")),
        None => Err(protocol("completion/complete result without completion.values")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_the_gateways_own_and_a_foreign_one_is_refused() {
        let items: Vec<Value> = (0..250).map(|i| json!({"uri": format!("r://{i}")})).collect();
        let first = page_of(items.iter(), &Map::new(), "resources").unwrap();
        assert_eq!(first["resources"].as_array().unwrap().len(), PAGE_SIZE);
        let cursor = first["nextCursor"].as_str().unwrap().to_string();
        let mut params = Map::new();
        params.insert("cursor".into(), json!(cursor));
        let second = page_of(items.iter(), &params, "resources").unwrap();
        assert_eq!(second["resources"][0]["uri"], "r://100");
        params.insert("cursor".into(), second["nextCursor"].clone());
        let last = page_of(items.iter(), &params, "resources").unwrap();
        assert_eq!(last["resources"].as_array().unwrap().len(), 50);
        assert!(last.get("nextCursor").is_none());
        params.insert("cursor".into(), json!("an upstream's cursor"));
        assert_eq!(page_of(items.iter(), &params, "resources").unwrap_err().category, Category::BadInput);
    }

    #[test]
    fn an_apps_html_is_refused_whole_and_a_cut_keeps_the_servers_meta() {
        let ui = json!({"csp": {"connectDomains": ["https://api.example"]}});
        let app = json!({"contents": [{"uri": "ui://a/app.html", "mimeType": extensions::APP_MIME_TYPE,
            "text": "<html>".repeat(20), "_meta": {"ui": ui}}]});
        assert_eq!(checked_contents(app.clone(), 1000).unwrap(), app, "under the budget: untouched");
        assert_eq!(checked_contents(app, 50).unwrap_err().category, Category::ResponseTooLarge);
        let text = json!({"contents": [{"uri": "r://x", "text": "x".repeat(100), "_meta": {"ui": ui}}]});
        let cut = checked_contents(text, 10).unwrap();
        assert_eq!(cut["contents"][0]["_meta"]["ui"], ui);
        assert_eq!(cut["contents"][0]["_meta"]["io.mcp-gateway/truncated"], true);
    }

    #[test]
    fn read_results_are_checked_and_fitted_to_the_budget() {
        let text = json!({"contents": [{"uri": "a://1", "text": "x".repeat(100)}]});
        let cut = checked_contents(text, 10).unwrap();
        assert!(cut["contents"][0]["text"].as_str().unwrap().starts_with("xxxxxxxxxx…[truncated 90 bytes]"));
        assert_eq!(cut["contents"][0]["_meta"]["io.mcp-gateway/truncated"], true);
        let blob = json!({"contents": [{"uri": "a://1", "blob": "QUJD".repeat(10)}]});
        assert_eq!(checked_contents(blob, 10).unwrap_err().category, Category::ResponseTooLarge);
        assert_eq!(
            checked_contents(json!({"contents": [{"text": "no uri"}]}), 10).unwrap_err().category,
            Category::UpstreamProtocol
        );
        assert_eq!(
            checked_contents(json!({"result": 1}), 10).unwrap_err().category,
            Category::UpstreamProtocol
        );
        assert!(checked_completion(json!({"completion": {"values": ["a", "b"]}})).is_ok());
        let many: Vec<String> = (0..101).map(|i| i.to_string()).collect();
        assert!(checked_completion(json!({"completion": {"values": many}})).is_err());
        assert!(checked_messages(json!({"messages": [{"role": "user"}]}), 1000).is_err());
    }
}
