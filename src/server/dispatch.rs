//! Method dispatch for one decoded JSON-RPC message. Notifications get no answer; every
//! request gets exactly one.

use std::sync::Arc;

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::{
    error::{Category, GatewayError},
    gateway::{Gateway, call::CallContext},
    protocol::{
        jsonrpc::{Entry, Message, Response},
        mcp,
    },
    telemetry::metrics::method_label,
};

const INSTRUCTIONS: &str = "MCP tool gateway: one endpoint for every tool of every configured MCP server.";

/// What the HTTP request tells about its messages.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub request_id: Arc<str>,
    /// `Mcp-Method` header of a modern-era request, checked against the body.
    pub method_header: Option<String>,
    /// From `X-Request-Timeout-Ms`: when the caller stops waiting.
    pub deadline: Option<std::time::Instant>,
}

impl RequestInfo {
    pub fn from_headers(headers: &HeaderMap, request_id: &str) -> Self {
        Self {
            request_id: request_id.into(),
            method_header: headers
                .get(mcp::headers::METHOD)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            deadline: headers
                .get("x-request-timeout-ms")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms)),
        }
    }
}

/// Answers one batch entry (or the single message).
pub async fn entry(gateway: &Gateway, entry: Entry, info: &RequestInfo) -> Option<Response> {
    match entry {
        Ok(message) => message_answer(gateway, message, info).await,
        Err(rejected) => {
            gateway.metrics.requests.with_label_values(&["invalid"]).inc();
            Some(Response::error(rejected.id, &rejected.error))
        }
    }
}

async fn message_answer(gateway: &Gateway, message: Message, info: &RequestInfo) -> Option<Response> {
    gateway.metrics.requests.with_label_values(&[method_label(&message.method)]).inc();
    let Some(id) = message.id.clone() else {
        // notifications/initialized, notifications/cancelled, …: nothing to answer.
        return None;
    };
    if let Some(err) = protocol_error(&message, info) {
        return Some(Response::error(id, &err));
    }
    let params = message.params;
    let modern = mcp::is_modern(params.as_ref());
    let ttl_ms = gateway.refresh_interval().as_millis() as u64;
    let answer = match message.method.as_str() {
        "tools/call" => {
            let ctx = CallContext {
                request_id: info.request_id.clone(),
                jsonrpc_id: id.clone(),
                deadline: info.deadline,
            };
            return Some(match gateway.call_tool(params, &ctx).await {
                Ok(raw) if modern => Response::result(id, mcp::with_result_type(raw)),
                Ok(raw) => Response::result(id, raw),
                Err(err) => {
                    let mut object = err.to_error_object();
                    // The modern revision names unknown tools -32602 (and never sends -32002).
                    if modern && err.category == Category::UnknownTool {
                        object.code = -32602;
                    }
                    Response { id, body: Err(object) }
                }
            });
        }
        // The catalogue's pre-serialised list, shared (not copied) by every request.
        "tools/list" if modern => {
            let (head, tail) = mcp::cacheable_shared(gateway.catalog().list_result(), ttl_ms);
            return Some(Response::shared(id, head, tail));
        }
        "tools/list" => {
            return Some(Response::shared(id, bytes::Bytes::new(), gateway.catalog().list_result()));
        }
        "initialize" => {
            let requested = params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
            mcp::initialize_result(requested, "mcp-gateway", crate::VERSION, Some(INSTRUCTIONS))
        }
        "server/discover" => mcp::discover_result("mcp-gateway", crate::VERSION, Some(INSTRUCTIONS), ttl_ms),
        "ping" => json!({}),
        other => {
            let shown: String = other.chars().take(64).collect();
            let err = GatewayError::new(Category::MethodNotFound, shown);
            return Some(Response::error(id, &err));
        }
    };
    Some(Response::result_value(id, &answer))
}

/// Modern-era checks: a `_meta` protocol version we speak, and an `Mcp-Method` header that
/// agrees with the body.
fn protocol_error(message: &Message, info: &RequestInfo) -> Option<GatewayError> {
    if let Some(version) = mcp::meta_version(message.params.as_ref())
        && !mcp::is_supported(version)
    {
        return Some(
            GatewayError::new(Category::UnsupportedProtocolVersion, format!("{version:?}"))
                .with_extra("supported", json!(mcp::supported_versions())),
        );
    }
    match &info.method_header {
        Some(header) if header != &message.method => Some(GatewayError::new(
            Category::HeaderMismatch,
            "the Mcp-Method header does not match the request body",
        )),
        _ => None,
    }
}
