//! Establishing a request's caller at the HTTP edge, and the 401 every refusal gets: a
//! JSON-RPC error body (`unauthenticated`) and `WWW-Authenticate: Bearer
//! resource_metadata="…/.well-known/oauth-protected-resource"` (plus `error="invalid_token"`
//! when a token was presented), as the MCP authorization spec asks. Nothing of a refused
//! request is read further or sent anywhere.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use crate::{
    error::{Category, GatewayError},
    gateway::Gateway,
    identity::{Authenticator, Caller, metadata},
    protocol::jsonrpc,
};

/// The caller of this request, or the 401 to answer.
pub async fn establish(
    gateway: &Gateway,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<Arc<Caller>, Response> {
    if let Authenticator::Anonymous = gateway.authenticator() {
        return Ok(Arc::new(Caller::anonymous(peer)));
    }
    match gateway.authenticator().caller(headers, peer).await {
        Ok(caller) => Ok(caller),
        Err(failure) => {
            gateway.record_auth_rejection(failure.reason);
            tracing::info!(reason = failure.reason, detail = %failure.detail, peer = ?peer, "request refused: no valid caller identity");
            let err = GatewayError::new(Category::Unauthenticated, failure.detail)
                .with_extra("reason", Value::String(failure.reason.into()));
            let body = jsonrpc::Response::error(Value::Null, &err);
            Err((
                StatusCode::UNAUTHORIZED,
                [
                    (header::CONTENT_TYPE, "application/json".parse().expect("static")),
                    (
                        header::WWW_AUTHENTICATE,
                        metadata::challenge(headers, &gateway.config(), failure.token_given),
                    ),
                ],
                serde_json::to_vec(&body).unwrap_or_default(),
            )
                .into_response())
        }
    }
}

/// `GET /.well-known/oauth-protected-resource` (and its `/mcp` path-suffixed form).
pub async fn protected_resource_metadata(
    axum::extract::State(gateway): axum::extract::State<Arc<Gateway>>,
    headers: HeaderMap,
) -> Response {
    if !matches!(gateway.authenticator(), Authenticator::Jwt(_)) {
        return (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({"error": "this gateway takes no bearer tokens ([auth] mode is not \"jwt\")"})))
            .into_response();
    }
    axum::Json(metadata::document(&headers, &gateway.config())).into_response()
}
