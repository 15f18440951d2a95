//! The demo server over streamable HTTP: `POST /mcp` answers JSON (stateless, both eras).
//!
//! For tests and demos of the gateway's resilience it can answer `tools/call` after a delay
//! (`--delay-ms`), and `GET /_stats` reports what it saw: calls received, calls answered,
//! calls abandoned by the client before the answer (cancellations),
//! `notifications/cancelled` received, and the last call's `_meta`, tool name, arguments and trace headers. With `--sessions` it behaves as a session-era server:
//! `initialize` issues an `Mcp-Session-Id`, every other request must carry a live one (400
//! without, 404 for an unknown one), `DELETE /mcp` ends it, `POST /_expire_sessions` ends all.

use std::{
    collections::HashSet,
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
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::handler;

/// What the demo server has seen.
#[derive(Debug, Default)]
pub struct Stats {
    pub calls: AtomicU64,
    pub answered: AtomicU64,
    pub abandoned: AtomicU64,
    pub cancel_notifications: AtomicU64,
    /// The body of the last `tools/call`, kept as text and parsed only when `/_stats` is read
    /// (a benchmark upstream pays a copy, not a parse): tests check its `_meta`.
    pub last_call: std::sync::Mutex<String>,
    /// The trace and request-id headers of the last `tools/call` (`traceparent`, `tracestate`,
    /// `x-request-id`), so tests can see what the gateway propagated.
    pub last_trace_headers: std::sync::Mutex<Vec<(&'static str, String)>>,
}

/// Headers recorded per call for `/_stats`.
const TRACE_HEADERS: [&str; 3] = ["traceparent", "tracestate", "x-request-id"];

/// How the demo server behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoOptions {
    /// Postpones every `tools/call` answer.
    pub delay: Duration,
    /// Session-era behaviour: `initialize` required, `Mcp-Session-Id` checked.
    pub sessions: bool,
}

#[derive(Clone)]
struct DemoState {
    stats: Arc<Stats>,
    delay: Duration,
    sessions: Option<Arc<std::sync::Mutex<HashSet<String>>>>,
}

/// The demo server's routes.
pub fn router(options: DemoOptions) -> Router {
    let state = DemoState {
        stats: Arc::default(),
        delay: options.delay,
        sessions: options.sessions.then(Arc::default),
    };
    Router::new()
        .route("/mcp", post(mcp).get(not_allowed).delete(end_session))
        .route("/_stats", get(stats))
        .route("/_expire_sessions", post(expire_sessions))
        .with_state(state)
}

fn session_error(status: StatusCode, code: i64, message: &str) -> Response {
    (status, Json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})))
        .into_response()
}

async fn end_session(State(state): State<DemoState>, headers: HeaderMap) -> Response {
    let (Some(sessions), Some(id)) =
        (&state.sessions, headers.get("mcp-session-id").and_then(|v| v.to_str().ok()))
    else {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    let removed = sessions.lock().map(|mut s| s.remove(id)).unwrap_or(false);
    if removed { StatusCode::OK.into_response() } else { StatusCode::NOT_FOUND.into_response() }
}

async fn expire_sessions(State(state): State<DemoState>) -> Response {
    if let Some(sessions) = &state.sessions
        && let Ok(mut sessions) = sessions.lock()
    {
        sessions.clear();
    }
    StatusCode::OK.into_response()
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

async fn mcp(State(state): State<DemoState>, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    let mut new_session = None;
    if let Some(sessions) = &state.sessions {
        let presented = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
        if text.contains("\"initialize\"") {
            let id = format!("{:032x}", fastrand::u128(..));
            if let Ok(mut s) = sessions.lock() {
                s.insert(id.clone());
            }
            new_session = Some(id);
        } else {
            match presented {
                None => {
                    return session_error(
                        StatusCode::BAD_REQUEST,
                        -32000,
                        "Bad Request: No valid session ID provided",
                    );
                }
                Some(id) if !sessions.lock().map(|s| s.contains(id)).unwrap_or(false) => {
                    return session_error(StatusCode::NOT_FOUND, -32001, "Session not found");
                }
                Some(_) => {}
            }
        }
    }
    if text.contains("\"notifications/cancelled\"") {
        state.stats.cancel_notifications.fetch_add(1, Ordering::Relaxed);
    }
    let is_call = text.contains("\"tools/call\"");
    let mut guard = Abandoned { stats: &state.stats, armed: is_call };
    if is_call {
        state.stats.calls.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = state.stats.last_call.lock() {
            last.clear();
            last.push_str(&text);
        }
        if let Ok(mut last) = state.stats.last_trace_headers.lock() {
            last.clear();
            for name in TRACE_HEADERS {
                if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
                    last.push((name, value.to_string()));
                }
            }
        }
        if !state.delay.is_zero() {
            tokio::time::sleep(state.delay).await;
        }
    }
    let mut response = match handler::handle_body(&body) {
        Some(answer) => {
            ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&answer).unwrap_or_default())
                .into_response()
        }
        None => StatusCode::ACCEPTED.into_response(),
    };
    if let Some(id) = new_session
        && let Ok(value) = id.parse()
    {
        response.headers_mut().insert("mcp-session-id", value);
    }
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
        "last_meta": s
            .last_call
            .lock()
            .ok()
            .and_then(|body| serde_json::from_str::<Value>(&body).ok())
            .and_then(|call| call.pointer("/params/_meta").cloned())
            .unwrap_or(Value::Null),
        // The last call's tool name and arguments as the server received them (what a gateway
        // in front of it injected, renamed or filled in).
        "last_tool": s
            .last_call
            .lock()
            .ok()
            .and_then(|body| serde_json::from_str::<Value>(&body).ok())
            .map(|call| json!({"name": call.pointer("/params/name"), "arguments": call.pointer("/params/arguments")}))
            .unwrap_or(Value::Null),
        "last_headers": s
            .last_trace_headers
            .lock()
            .map(|h| h.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>())
            .unwrap_or_default(),
    }))
    .into_response()
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// Binds `addr` and serves the demo server in the background; returns the bound address.
pub async fn spawn(addr: SocketAddr, options: DemoOptions) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(
            axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            router(options),
        )
        .await
        {
            tracing::error!(error = %e, "demo server stopped");
        }
    });
    Ok(bound)
}
