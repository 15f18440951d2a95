//! The demo server over streamable HTTP: `POST /mcp` answers JSON (stateless, both eras).

use std::net::SocketAddr;

use axum::{
    Router,
    body::Bytes,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use tokio::net::TcpListener;

use super::handler;

/// The demo server's routes.
pub fn router() -> Router {
    Router::new().route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
}

async fn mcp(body: Bytes) -> Response {
    match handler::handle_body(&body) {
        Some(answer) => {
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&answer).unwrap_or_default())
                .into_response()
        }
        None => StatusCode::ACCEPTED.into_response(),
    }
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// Binds `addr` and serves the demo server in the background; returns the bound address.
pub async fn spawn(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router()).await {
            tracing::error!(error = %e, "demo server stopped");
        }
    });
    Ok(bound)
}
