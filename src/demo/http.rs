//! The demo server over streamable HTTP: `POST /mcp` answers JSON (stateless, both eras).
//!
//! For tests and demos of the gateway's resilience it can answer `tools/call` after a delay
//! (`--delay-ms`), and `GET /_stats` reports what it saw: calls received, calls answered,
//! calls abandoned by the client before the answer (cancellations), and
//! `notifications/cancelled` received.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::json;
use tokio::net::TcpListener;

use super::handler;

/// What the demo server has seen.
#[derive(Debug, Default)]
pub struct Stats {
    pub calls: AtomicU64,
    pub answered: AtomicU64,
    pub abandoned: AtomicU64,
    pub cancel_notifications: AtomicU64,
}

#[derive(Clone)]
struct DemoState {
    stats: Arc<Stats>,
    delay: Duration,
}

/// The demo server's routes; `delay` postpones every `tools/call` answer.
pub fn router(delay: Duration) -> Router {
    let state = DemoState { stats: Arc::default(), delay };
    Router::new()
        .route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
        .route("/_stats", get(stats))
        .with_state(state)
}

/// Counts a call the client gave up on before the answer.
struct Abandoned<'a> {
    stats: &'a Stats,
    armed: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn mcp(State(state): State<DemoState>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    if text.contains("\"notifications/cancelled\"") {
        state.stats.cancel_notifications.fetch_add(1, Ordering::Relaxed);
    }
    let is_call = text.contains("\"tools/call\"");
    let mut guard = Abandoned { stats: &state.stats, armed: is_call };
    if is_call {
        state.stats.calls.fetch_add(1, Ordering::Relaxed);
        if !state.delay.is_zero() {
            tokio::time::sleep(state.delay).await;
        }
    }
    let response = match handler::handle_body(&body) {
        Some(answer) => {
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&answer).unwrap_or_default())
                .into_response()
        }
        None => StatusCode::ACCEPTED.into_response(),
    };
    if is_call {
        guard.armed = false;
        state.stats.answered.fetch_add(1, Ordering::Relaxed);
    }
    response
}

async fn stats(State(state): State<DemoState>) -> Response {
    let s = &state.stats;
    Json(json!({
        "calls": s.calls.load(Ordering::Relaxed),
        "answered": s.answered.load(Ordering::Relaxed),
        "abandoned": s.abandoned.load(Ordering::Relaxed),
        "cancel_notifications": s.cancel_notifications.load(Ordering::Relaxed),
    }))
    .into_response()
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// Binds `addr` and serves the demo server in the background; returns the bound address.
pub async fn spawn(addr: SocketAddr, delay: Duration) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(
            axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            router(delay),
        )
        .await
        {
            tracing::error!(error = %e, "demo server stopped");
        }
    });
    Ok(bound)
}
