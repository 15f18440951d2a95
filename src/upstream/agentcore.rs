//! AgentCore Gateway's Lambda target contract (`lambda_event = "agentcore"`): how one
//! `tools/call` becomes one Invoke, and how the function's return becomes a tool result.
//!
//! Functions written for AgentCore Gateway (awslabs `run-mcp-servers-with-aws-lambda`'s
//! `BedrockAgentCoreGatewayTargetHandler`, or hand-written handlers) take the tool's bare
//! `arguments` as the event and read the tool's name from the client context:
//! `context.client_context.custom["bedrockAgentCoreToolName"] = "<target>___<tool>"`. They
//! return the tool result (`{content, isError?}`) or any JSON. They have no `tools/list`, no
//! `ping`, nothing but tool calls: any other method is answered here with a JSON-RPC error,
//! never sent.
//!
//! The event has no room for `_meta`: the caller's progress token, trace context in `_meta`
//! and the gateway's idempotency key are not delivered (the trace context and request id
//! still travel in the client context, as for JSON-RPC functions).

use serde_json::{Map, Value, json, value::RawValue};

use super::{RawResult, UpstreamError, UpstreamReply, UpstreamRequest};
use crate::{config::TARGET_SEPARATOR, error::ErrorObject};

/// The client-context key naming the tool.
pub const TOOL_NAME_KEY: &str = "bedrockAgentCoreToolName";

/// What one Invoke sends for a `tools/call`.
#[derive(Debug)]
pub struct Invocation {
    /// The event: the call's `arguments` object (`{}` when it has none).
    pub payload: Vec<u8>,
    /// Base64 JSON `{"custom": {"bedrockAgentCoreToolName": …, trace keys…}}`.
    pub client_context: String,
}

/// A request for an AgentCore target: an Invoke to make, or the answer without one.
#[derive(Debug)]
pub enum Prepared {
    Invoke(Invocation),
    Answered(UpstreamReply),
}

/// Builds the Invoke of a `tools/call` for `target`; any other method is answered with
/// "method not found" (the function serves tool calls only).
pub fn prepare(
    target: &str,
    request: &UpstreamRequest,
    max_payload: usize,
) -> Result<Prepared, UpstreamError> {
    if request.method != "tools/call" {
        return Ok(Prepared::Answered(refusal(
            -32601,
            format!(
                "{} is not available on an AgentCore Lambda target: its function serves tools/call only (its tools are declared in configuration or the registry)",
                request.method
            ),
        )));
    }
    let Some(tool) = request.params.get("name").and_then(Value::as_str) else {
        return Ok(Prepared::Answered(refusal(-32602, "tools/call without a tool name".into())));
    };
    let payload = match request.params.get("arguments") {
        Some(arguments) => serde_json::to_vec(arguments),
        None => Ok(b"{}".to_vec()),
    }
    .map_err(|e| UpstreamError::Protocol(format!("arguments not encoded: {e}")))?;
    if payload.len() > max_payload {
        return Err(UpstreamError::PayloadTooLarge { size: payload.len(), limit: max_payload });
    }
    let name = format!("{target}{TARGET_SEPARATOR}{tool}");
    let client_context = request.outbound.lambda_client_context_with(&[(TOOL_NAME_KEY, &name)]).ok_or(
        UpstreamError::PayloadTooLarge {
            size: name.len(),
            limit: super::outbound::LAMBDA_CLIENT_CONTEXT_MAX,
        },
    )?;
    Ok(Prepared::Invoke(Invocation { payload, client_context }))
}

fn refusal(code: i64, message: String) -> UpstreamReply {
    UpstreamReply::Error(ErrorObject { code, message, data: None })
}

/// Maps a function's return to a tool result: a `{content: [...], isError?: bool}` object is
/// the result as it is (`structuredContent`, `_meta` kept); content blocks that carry `text`
/// but no `type` (a shape AgentCore accepts) get `"type": "text"`. Any other JSON becomes one
/// text block (a string as itself, anything else as its JSON text), plus `structuredContent`
/// when it is an object.
pub fn decode_return(body: &[u8]) -> Result<UpstreamReply, UpstreamError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        UpstreamError::Protocol(format!("function return is not UTF-8 (at byte {})", e.valid_up_to()))
    })?;
    if text.trim().is_empty() {
        return Err(UpstreamError::Protocol("the function returned no payload".into()));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| UpstreamError::Protocol(format!("function return is not JSON: {e}")))?;
    let raw = match value {
        Value::Object(map) if is_tool_result(&map) => {
            if needs_text_types(&map) {
                to_raw(&Value::Object(with_text_types(map)))?
            } else {
                RawValue::from_string(text.trim().to_string())
                    .map_err(|e| UpstreamError::Protocol(format!("function return: {e}")))?
            }
        }
        other => {
            let shown = match &other {
                Value::String(s) => s.clone(),
                _ => other.to_string(),
            };
            let mut result = json!({"content": [{"type": "text", "text": shown}]});
            if other.is_object() {
                result["structuredContent"] = other;
            }
            to_raw(&result)?
        }
    };
    Ok(UpstreamReply::Result(RawResult::new(raw)))
}

/// `{content: [...], isError?: bool}`: a tool result already.
fn is_tool_result(map: &Map<String, Value>) -> bool {
    map.get("content").is_some_and(Value::is_array) && map.get("isError").is_none_or(Value::is_boolean)
}

fn untyped_text(block: &Value) -> bool {
    block.get("type").is_none() && block.get("text").is_some_and(Value::is_string)
}

fn needs_text_types(map: &Map<String, Value>) -> bool {
    map.get("content").and_then(Value::as_array).is_some_and(|blocks| blocks.iter().any(untyped_text))
}

fn with_text_types(mut map: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Array(blocks)) = map.get_mut("content") {
        for block in blocks.iter_mut().filter(|b| untyped_text(b)) {
            if let Value::Object(block) = block {
                block.insert("type".into(), json!("text"));
            }
        }
    }
    map
}

fn to_raw(value: &Value) -> Result<Box<RawValue>, UpstreamError> {
    serde_json::value::to_raw_value(value).map_err(|e| UpstreamError::Protocol(format!("tool result: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use base64::Engine;

    use super::*;

    fn call(arguments: Option<Value>) -> UpstreamRequest {
        let mut params = Map::new();
        params.insert("name".into(), json!("manga_search"));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), arguments);
        }
        params.insert("_meta".into(), json!({"io.modelcontextprotocol/idempotencyKey": "k"}));
        UpstreamRequest::new("tools/call", params)
    }

    fn decoded_context(encoded: &str) -> Value {
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    fn result_of(body: &str) -> Value {
        match decode_return(body.as_bytes()) {
            Ok(UpstreamReply::Result(raw)) => serde_json::from_str(raw.get()).expect("JSON"),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn a_call_is_its_bare_arguments_and_the_tool_named_in_the_client_context() {
        let mut request = call(Some(json!({"query": "鬼滅", "limit": 3})));
        request.outbound.request_id = Some(Arc::from("req-1"));
        let Ok(Prepared::Invoke(invocation)) = prepare("store", &request, 1024) else { panic!("no invoke") };
        assert_eq!(
            serde_json::from_slice::<Value>(&invocation.payload).unwrap(),
            json!({"query": "鬼滅", "limit": 3})
        );
        let context = decoded_context(&invocation.client_context);
        assert_eq!(context["custom"][TOOL_NAME_KEY], "store___manga_search");
        assert_eq!(context["custom"]["x-request-id"], "req-1");
        let Ok(Prepared::Invoke(empty)) = prepare("store", &call(None), 1024) else { panic!("no invoke") };
        assert_eq!(empty.payload, b"{}");
    }

    #[test]
    fn other_methods_are_answered_without_an_invoke() {
        for method in ["tools/list", "ping", "resources/list"] {
            let request = UpstreamRequest::new(method, Map::new());
            match prepare("store", &request, 1024) {
                Ok(Prepared::Answered(UpstreamReply::Error(e))) => {
                    assert_eq!(e.code, -32601);
                    assert!(e.message.starts_with(method), "{}", e.message);
                }
                other => panic!("{method}: {other:?}"),
            }
        }
    }

    #[test]
    fn payloads_over_the_limit_are_refused_before_sending() {
        let request = call(Some(json!({"query": "x".repeat(100)})));
        assert!(matches!(
            prepare("store", &request, 64),
            Err(UpstreamError::PayloadTooLarge { limit: 64, .. })
        ));
    }

    #[test]
    fn the_tool_name_is_kept_when_the_trace_state_does_not_fit() {
        let mut request = call(Some(json!({})));
        request.outbound.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        request.outbound.tracestate = Some("x".repeat(3000));
        let Ok(Prepared::Invoke(invocation)) = prepare("store", &request, 1024) else { panic!("no invoke") };
        let context = decoded_context(&invocation.client_context);
        assert_eq!(context["custom"][TOOL_NAME_KEY], "store___manga_search");
        assert!(context["custom"].get("tracestate").is_none());
        assert!(context["custom"].get("traceparent").is_some());
    }

    #[test]
    fn returns_map_to_tool_results() {
        let as_is =
            r#"{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":1},"isError":false}"#;
        assert_eq!(result_of(as_is), serde_json::from_str::<Value>(as_is).unwrap());
        let untyped = result_of(r#"{"content":[{"text":"no type"}],"isError":true}"#);
        assert_eq!(untyped, json!({"content": [{"type": "text", "text": "no type"}], "isError": true}));
        let object = result_of(r#"{"orders":[{"id":"A1"}]}"#);
        assert_eq!(object["structuredContent"], json!({"orders": [{"id": "A1"}]}));
        assert_eq!(object["content"][0], json!({"type": "text", "text": r#"{"orders":[{"id":"A1"}]}"#}));
        assert_eq!(
            result_of(r#""plain text""#),
            json!({"content": [{"type": "text", "text": "plain text"}]})
        );
        assert_eq!(result_of("[1,2]"), json!({"content": [{"type": "text", "text": "[1,2]"}]}));
        // `content` that is not a list of blocks is data like any other.
        let odd = result_of(r#"{"content":"hello"}"#);
        assert_eq!(odd["structuredContent"], json!({"content": "hello"}));
        assert!(matches!(decode_return(b""), Err(UpstreamError::Protocol(_))));
        assert!(matches!(decode_return(b"{nope"), Err(UpstreamError::Protocol(_))));
        let Ok(UpstreamReply::Result(raw)) = decode_return(br#"{"content":[],"isError":true}"#) else {
            panic!()
        };
        assert!(raw.is_tool_error(), "isError reaches the retry layer and the breaker");
    }
}
