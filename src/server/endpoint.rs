//! Which MCP endpoint a request is for: `/mcp/NAME` is `[endpoints.NAME]`, `/mcp` the whole
//! catalogue (unless `serve_plain_mcp = false`), and `GET /tools` and `GET /capabilities` take
//! `?endpoint=NAME`. Decided once, at the edge, before anything else of the request is read:
//! an unknown endpoint (or a closed `/mcp`) is a 404 with a JSON-RPC error body, so a client
//! told the wrong URL learns it at its first request. The endpoint then travels on the caller
//! ([`crate::identity::Caller::endpoint`]), which every decision on the request reads.

use std::sync::Arc;

use axum::{
    extract::Request,
    http::{StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    error::{Category, GatewayError},
    gateway::Gateway,
    identity::Caller,
    protocol::jsonrpc,
};

/// The endpoint of an MCP request, put on it by [`route`] (`None`: the plain `/mcp`).
#[derive(Debug, Clone)]
pub struct At(pub Option<Arc<str>>);

/// For a request to `/mcp` or `/mcp/NAME`: records its endpoint on the request and rewrites its
/// path to `/mcp` (the one set of MCP handlers serves every endpoint). Other paths are left
/// alone. `Err`: the 404 to answer.
pub fn route(gateway: &Gateway, request: &mut Request) -> Result<(), Box<Response>> {
    let path = request.uri().path();
    let endpoint = if path == "/mcp" {
        if !gateway.config().serve_plain_mcp {
            return Err(not_found(
                "the plain /mcp is not served here (serve_plain_mcp = false): use /mcp/NAME of a configured endpoint",
            ));
        }
        None
    } else if let Some(name) = path.strip_prefix("/mcp/") {
        match gateway.settings().endpoints().known(name) {
            Some(endpoint) => Some(endpoint),
            None => return Err(unknown(name)),
        }
    } else {
        return Ok(());
    };
    if endpoint.is_some() {
        let rewritten = match request.uri().query() {
            Some(query) => format!("/mcp?{query}"),
            None => "/mcp".to_string(),
        };
        match rewritten.parse::<Uri>() {
            Ok(uri) => *request.uri_mut() = uri,
            Err(_) => return Err(not_found("the request's URI could not be read")),
        }
    }
    request.extensions_mut().insert(At(endpoint));
    Ok(())
}

/// The endpoint [`route`] recorded on `request`'s extensions.
pub fn of(extensions: &axum::http::Extensions) -> Option<Arc<str>> {
    extensions.get::<At>().and_then(|at| at.0.clone())
}

/// `caller` through `endpoint` (the same `Arc` when it is the plain `/mcp`).
pub fn through(caller: Arc<Caller>, endpoint: Option<Arc<str>>) -> Arc<Caller> {
    match endpoint {
        None => caller,
        endpoint => Arc::new(caller.at_endpoint(endpoint)),
    }
}

/// The `endpoint` query parameter of `GET /tools` and `GET /capabilities`: the endpoint it
/// names, the plain catalogue when absent (404 when `serve_plain_mcp = false`), else the 404.
pub fn from_query(gateway: &Gateway, name: Option<&String>) -> Result<Option<Arc<str>>, Box<Response>> {
    match name {
        None if gateway.config().serve_plain_mcp => Ok(None),
        None => Err(not_found(
            "the whole catalogue is not served here (serve_plain_mcp = false): add ?endpoint=NAME of a configured endpoint",
        )),
        Some(name) => gateway.settings().endpoints().known(name).map(Some).ok_or_else(|| unknown(name)),
    }
}

fn unknown(name: &str) -> Box<Response> {
    let shown: String = name.chars().take(64).collect();
    not_found(&format!("no endpoint named {shown:?} is configured ([endpoints.NAME] serves /mcp/NAME)"))
}

fn not_found(detail: &str) -> Box<Response> {
    let err = GatewayError::new(Category::InvalidRequest, detail.to_string())
        .with_extra("reason", Value::String("unknown_endpoint".into()));
    let body = jsonrpc::Response::error(Value::Null, &err);
    let body =
        serde_json::to_vec(&body).unwrap_or_else(|_| json!({"error": detail}).to_string().into_bytes());
    Box::new((StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], body).into_response())
}
