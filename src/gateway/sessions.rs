//! Inbound back-channel sessions, the table (its HTTP answers are in [`crate::server::sessions`]
//! and the in-flight calls they may cancel in [`super::cancel`]): the one reason the gateway
//! keeps inbound sessions at all is
//! to relay server→client requests (sampling, elicitation, roots) to the caller of a
//! `tools/call` ([`crate::upstream::relay`]). Everything else stays sessionless.
//!
//! Choices:
//! - Only an `initialize` declaring `sampling`, `elicitation` or `roots` (the capabilities a
//!   relayed request needs) gets an `Mcp-Session-Id`: a fresh id of 128 random bits prefixed
//!   `mcpgw-session-`. Any other `initialize` is answered as before, without one, so the
//!   orchestrator's path neither changes nor slows down.
//! - The table is bounded: at most [`MAX_SESSIONS`] sessions (creating one more ends the least
//!   recently used) and an idle session ends after [`IDLE_TTL`] (swept every [`SWEEP_EVERY`]).
//!   Ending a session (`DELETE /mcp`, eviction, expiry) ends the upstream sessions opened for
//!   it with `DELETE`.
//! - A request carrying an unknown or expired id of the gateway's own (prefix `mcpgw-`) gets
//!   `404` (the client initializes again, as the transport spec asks; an `initialize` still
//!   carrying the old id is served, not refused). An id the gateway never
//!   issued in any form is not a session of ours: it keeps scoping the caller's request ids
//!   for cancellation, exactly as before sessions existed.
//! - A POSTed JSON-RPC *response* (an `id`, a `result` or `error`, no `method`) from a known
//!   session is routed to the relayed request with that id and answered `202`. An id no
//!   request of that session waits under (unknown, answered already, given up, or another
//!   session's) is refused with `400` and a `-32600` error whose `data.reason` is
//!   `unknown_relayed_id` — not `404`, which would tell the client its session is gone.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::{
    protocol::{jsonrpc, mcp},
    upstream::relay::{CallerSession, ID_PREFIX},
};

/// Most inbound back-channel sessions kept at once.
pub const MAX_SESSIONS: usize = 1024;
/// How long an unused session lives.
pub const IDLE_TTL: Duration = Duration::from_secs(600);
/// How often idle sessions are swept.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The capabilities that need a back-channel.
const BACK_CHANNEL: [&str; 3] = ["sampling", "elicitation", "roots"];

/// The table of inbound back-channel sessions.
#[derive(Default)]
pub struct Sessions {
    table: Mutex<HashMap<Arc<str>, Arc<CallerSession>>>,
    sweeper: std::sync::OnceLock<()>,
    /// `mcp_gateway_back_channel_sessions`, when counted.
    gauge: Option<prometheus::IntGauge>,
}

/// What a request's `Mcp-Session-Id` names.
pub enum Lookup {
    /// No id, or one the gateway never issued: sessionless, as always.
    Sessionless,
    Found(Arc<CallerSession>),
    /// An id of the gateway's own that is unknown or expired.
    Unknown,
}

/// Whether `message` is an `initialize` declaring a capability that needs a back-channel.
pub fn wants_back_channel(message: &jsonrpc::Message) -> bool {
    message.method == "initialize"
        && message.id.is_some()
        && message
            .params
            .as_ref()
            .and_then(|p| p.get("capabilities"))
            .and_then(Value::as_object)
            .is_some_and(|caps| BACK_CHANNEL.iter().any(|c| caps.get(*c).is_some_and(|v| !v.is_null())))
}

impl Sessions {
    /// An empty table counted by `gauge`.
    pub fn counted(gauge: prometheus::IntGauge) -> Self {
        Self { gauge: Some(gauge), ..Self::default() }
    }

    fn counted_now(&self, open: usize) {
        if let Some(gauge) = &self.gauge {
            gauge.set(open as i64);
        }
    }

    /// A new session for the caller of `initialize` (see [`wants_back_channel`]).
    pub fn create(self: &Arc<Self>, message: &jsonrpc::Message) -> Arc<CallerSession> {
        let params = message.params.as_ref();
        let field = |name: &str| params.and_then(|p| p.get(name)).cloned().unwrap_or_else(|| json!({}));
        let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
        let session = Arc::new(CallerSession::new(
            field("capabilities"),
            field("clientInfo"),
            mcp::negotiate_legacy(requested),
        ));
        let evicted = {
            let Ok(mut table) = self.table.lock() else { return session };
            let evicted = if table.len() >= MAX_SESSIONS {
                let oldest = table.values().min_by_key(|s| s.last_used()).map(|s| s.id.clone());
                oldest.and_then(|id| table.remove(&id))
            } else {
                None
            };
            table.insert(session.id.clone(), session.clone());
            self.counted_now(table.len());
            evicted
        };
        if let Some(evicted) = evicted {
            tracing::info!(session = %crate::telemetry::redact::session_tag(&evicted.id), "back-channel session evicted (table full)");
            evicted.close();
        }
        self.start_sweeper();
        tracing::info!(session = %crate::telemetry::redact::session_tag(&session.id), "back-channel session opened");
        session
    }

    /// The session a request names.
    pub fn lookup(&self, headers: &HeaderMap) -> Lookup {
        let Some(id) = headers.get(mcp::headers::names::SESSION_ID).and_then(|v| v.to_str().ok()) else {
            return Lookup::Sessionless;
        };
        if !id.starts_with(ID_PREFIX) {
            return Lookup::Sessionless;
        }
        let found = self.table.lock().ok().and_then(|t| t.get(id).cloned());
        match found {
            Some(session) if session.last_used().elapsed() < IDLE_TTL => {
                session.touch();
                Lookup::Found(session)
            }
            Some(_) => {
                self.sweep(Instant::now());
                Lookup::Unknown
            }
            None => Lookup::Unknown,
        }
    }

    /// Ends the session `id`; `false` when there is none.
    pub fn end(&self, id: &str) -> bool {
        let removed = self.table.lock().ok().and_then(|mut t| {
            let removed = t.remove(id);
            self.counted_now(t.len());
            removed
        });
        match removed {
            Some(session) => {
                tracing::info!(session = %crate::telemetry::redact::session_tag(&session.id), "back-channel session ended by the client");
                session.close();
                true
            }
            None => false,
        }
    }

    /// Ends every session and waits for their upstream sessions' `DELETE`s (shutdown).
    pub async fn close_all(&self) {
        let all: Vec<Arc<CallerSession>> =
            self.table.lock().map(|mut t| t.drain().map(|(_, s)| s).collect()).unwrap_or_default();
        self.counted_now(0);
        let ending = all.iter().map(|session| {
            session.close_waiting_requests();
            session.end_upstream()
        });
        futures_util::future::join_all(ending).await;
    }

    pub fn len(&self) -> usize {
        self.table.lock().map(|t| t.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends every session idle for [`IDLE_TTL`] at `now`.
    fn sweep(&self, now: Instant) {
        let expired: Vec<Arc<CallerSession>> = match self.table.lock() {
            Ok(mut table) => {
                let ids: Vec<Arc<str>> = table
                    .values()
                    .filter(|s| now.saturating_duration_since(s.last_used()) >= IDLE_TTL)
                    .map(|s| s.id.clone())
                    .collect();
                let expired = ids.iter().filter_map(|id| table.remove(id)).collect();
                self.counted_now(table.len());
                expired
            }
            Err(_) => Vec::new(),
        };
        for session in expired {
            tracing::info!(session = %crate::telemetry::redact::session_tag(&session.id), "back-channel session expired (idle)");
            session.close();
        }
    }

    fn start_sweeper(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        self.sweeper.get_or_init(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let mut tick = tokio::time::interval(SWEEP_EVERY);
                    loop {
                        tick.tick().await;
                        let Some(sessions) = weak.upgrade() else { return };
                        sessions.sweep(Instant::now());
                    }
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn initialize(capabilities: Value) -> jsonrpc::Message {
        jsonrpc::Message {
            id: Some(json!(1)),
            method: "initialize".into(),
            params: Some(
                json!({"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "t"}}),
            ),
        }
    }

    #[test]
    fn only_back_channel_capabilities_open_a_session() {
        assert!(wants_back_channel(&initialize(json!({"sampling": {}}))));
        assert!(wants_back_channel(&initialize(json!({"elicitation": {}}))));
        assert!(!wants_back_channel(&initialize(json!({}))));
        assert!(!wants_back_channel(&initialize(json!({"experimental": {}}))));
    }

    #[tokio::test]
    async fn idle_sessions_expire_and_foreign_ids_stay_sessionless() {
        let sessions = Arc::new(Sessions::default());
        let session = sessions.create(&initialize(json!({"sampling": {}})));
        assert_eq!(session.protocol_version, "2025-06-18");
        let mut headers = HeaderMap::new();
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_str(&session.id).unwrap());
        assert!(matches!(sessions.lookup(&headers), Lookup::Found(_)));
        sessions.sweep(Instant::now() + IDLE_TTL);
        assert!(matches!(sessions.lookup(&headers), Lookup::Unknown), "expired");
        assert!(session.is_closed());
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_static("sess-a"));
        assert!(matches!(sessions.lookup(&headers), Lookup::Sessionless));
    }
}
