//! OAuth 2.0 Protected Resource Metadata (RFC 9728), which the MCP authorization spec points
//! clients at: `GET /.well-known/oauth-protected-resource` says which authorization server
//! issues tokens for this gateway, and every 401 names that document in its
//! `WWW-Authenticate: Bearer resource_metadata="…"`.

use axum::http::{HeaderMap, HeaderValue, header};
use serde_json::{Value, json};

use crate::config::Config;

/// The path of the metadata document.
pub const PATH: &str = "/.well-known/oauth-protected-resource";

/// `http://<host>` of this request (its `Host` header, else the listen address).
pub fn origin(headers: &HeaderMap, config: &Config) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| config.listen.to_string());
    format!("http://{host}")
}

/// The protected resource's identifier: `[auth] resource`, else `http://<host>/mcp`.
pub fn resource(headers: &HeaderMap, config: &Config) -> String {
    config.auth.resource.clone().unwrap_or_else(|| format!("{}/mcp", origin(headers, config)))
}

/// The metadata document.
pub fn document(headers: &HeaderMap, config: &Config) -> Value {
    let mut body = json!({
        "resource": resource(headers, config),
        "bearer_methods_supported": ["header"],
        "resource_name": "mcp-gateway",
    });
    if let Some(issuer) = &config.auth.issuer {
        body["authorization_servers"] = json!([issuer]);
    }
    if !config.auth.scopes_supported.is_empty() {
        body["scopes_supported"] = json!(config.auth.scopes_supported);
    }
    body
}

/// The `WWW-Authenticate` value of a 401: where the metadata is, and `invalid_token` when a
/// token was presented (RFC 6750 §3.1; a request without one gets no error code).
pub fn challenge(headers: &HeaderMap, config: &Config, token_given: bool) -> HeaderValue {
    let mut value = format!("Bearer resource_metadata=\"{}{PATH}\"", origin(headers, config));
    if token_given {
        value.push_str(", error=\"invalid_token\"");
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}
