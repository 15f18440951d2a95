//! Inbound back-channel sessions, the table (its HTTP answers are in `server/sessions.rs` and
//! the in-flight calls they may cancel in `gateway/cancel.rs`): the one reason the gateway
//! keeps inbound sessions at all is to relay server→client requests (sampling, elicitation,
//! roots) to the caller of a `tools/call` ([`super::relay`]). Everything else stays
//! sessionless.
//!
//! Choices:
//! - Only an `initialize` declaring `sampling`, `elicitation` or `roots` (the capabilities a
//!   relayed request needs), or extensions (`capabilities.extensions`: its servers are told
//!   them at the `initialize` of its dedicated upstream sessions, and MCP Apps changes what it
//!   is listed), gets an `Mcp-Session-Id`: a fresh id of 128 random bits prefixed
//!   `mcpgw-session-`. Any other `initialize` is answered without one, so the
//!   orchestrator's path neither changes nor slows down.
//! - The table is bounded: at most `inbound.max_sessions` sessions, and an idle session ends
//!   after [`IDLE_TTL`] (swept every [`SWEEP_EVERY`]). When the table is full, only expired
//!   sessions make room: a new `initialize` is refused ([`Refusal::Full`], 503) rather than
//!   ending another caller's live session and its waiting relayed requests — one caller
//!   flooding `initialize`s must not push everyone else out. (With no caller identity, a cap
//!   per caller could not be enforced; this needs none.) Ending a session (`DELETE /mcp`,
//!   expiry) ends the upstream sessions opened for it with `DELETE`.
//! - A session keeps only what the gateway uses from the `initialize`: the back-channel
//!   capabilities declared (`sampling`, `elicitation`, `roots`, with their values), the
//!   extensions declared (checked and bounded first: `protocol::extensions`) and
//!   clientInfo's `name` and `version` (cut at `inbound.max_client_info_chars`). When that
//!   still exceeds `inbound.max_session_bytes` the `initialize` is refused
//!   ([`Refusal::TooLarge`], 400): a caller cannot park megabytes in the table.
//! - A session is bound to the subject whose `initialize` opened it ([`crate::ownership`]): a
//!   request presenting it under another subject (or anonymously, for an identified
//!   subject's session) is answered as for an unknown id, [`Lookup::Unknown`], and never
//!   reaches the session — not its relayed requests, its tasks or its calls.
//! - A request carrying an unknown or expired id of the gateway's own (prefix `mcpgw-`) gets
//!   `404` (the client initializes again, as the transport spec asks; an `initialize` still
//!   carrying the old id is served, not refused). An id the gateway never
//!   issued in any form is not a session of ours: it only narrows the cancellation scope of
//!   the caller's request ids (its subject or connection, see `gateway/cancel.rs`).
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

use http::HeaderMap;
use serde_json::{Value, json};

use super::caller::{CallerSession, ID_PREFIX};
use crate::{
    identity::Caller,
    ownership::OpenedBy,
    protocol::{jsonrpc, mcp},
};

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
    limits: Limits,
}

/// The table's bounds (from `[inbound]`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_sessions: usize,
    pub max_session_bytes: usize,
    pub max_client_info_chars: usize,
}

impl Limits {
    pub fn from_config(limits: &crate::config::InboundLimits) -> Self {
        Self {
            max_sessions: limits.max_sessions,
            max_session_bytes: limits.max_session_bytes,
            max_client_info_chars: limits.max_client_info_chars,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::from_config(&crate::config::InboundLimits::default())
    }
}

/// Why no session was opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `max_sessions` live sessions exist.
    Full { max_sessions: usize },
    /// What the session would keep is `bytes` long, over `max_session_bytes`.
    TooLarge { bytes: usize, max_session_bytes: usize },
}

/// What a session keeps from its `initialize`: the declared back-channel capabilities and a
/// bounded clientInfo. Its size is the JSON length of both.
pub fn kept_state(message: &jsonrpc::Message, max_client_info_chars: usize) -> (Value, Value, usize) {
    let params = message.params.as_ref();
    let mut capabilities = serde_json::Map::new();
    if let Some(declared) = params.and_then(|p| p.get("capabilities")).and_then(Value::as_object) {
        for name in BACK_CHANNEL {
            if let Some(value) = declared.get(name).filter(|v| !v.is_null()) {
                capabilities.insert(name.to_string(), value.clone());
            }
        }
        // The extensions it declared (checked and bounded before: `protocol::extensions`), so
        // the servers that serve it are told them at their `initialize`.
        if let Some(extensions) =
            declared.get("extensions").and_then(Value::as_object).filter(|e| !e.is_empty())
        {
            capabilities.insert("extensions".into(), Value::Object(extensions.clone()));
        }
    }
    let mut client_info = serde_json::Map::new();
    if let Some(info) = params.and_then(|p| p.get("clientInfo")).and_then(Value::as_object) {
        for name in ["name", "version"] {
            if let Some(text) = info.get(name).and_then(Value::as_str) {
                client_info.insert(
                    name.to_string(),
                    json!(text.chars().take(max_client_info_chars).collect::<String>()),
                );
            }
        }
    }
    let (capabilities, client_info) = (Value::Object(capabilities), Value::Object(client_info));
    let bytes = serde_json::to_vec(&capabilities).map_or(usize::MAX, |v| v.len())
        + serde_json::to_vec(&client_info).map_or(usize::MAX, |v| v.len());
    (capabilities, client_info, bytes)
}

/// What a request's `Mcp-Session-Id` names, for the caller presenting it.
pub enum Lookup {
    /// No id, or one the gateway never issued: sessionless, as always.
    Sessionless,
    /// A live back-channel session this caller opened.
    Found(Arc<CallerSession>),
    /// A stateless listen id this process minted for this caller's subject (no table entry).
    Listen(Arc<str>),
    /// An id of the gateway's own that is unknown, expired, or bound to another subject.
    Unknown,
}

impl Lookup {
    /// The gateway session the request presented, verified: its owner's session
    /// ([`crate::ownership::Owner::of`]).
    pub fn verified(&self) -> Option<Arc<str>> {
        match self {
            Lookup::Found(session) => Some(session.id.clone()),
            Lookup::Listen(id) => Some(id.clone()),
            Lookup::Sessionless | Lookup::Unknown => None,
        }
    }
}

/// Whether `message` is an `initialize` declaring a capability that needs a back-channel.
pub fn wants_back_channel(message: &jsonrpc::Message) -> bool {
    message.method == "initialize"
        && message.id.is_some()
        && message.params.as_ref().and_then(|p| p.get("capabilities")).and_then(Value::as_object).is_some_and(
            |caps| {
                BACK_CHANNEL.iter().any(|c| caps.get(*c).is_some_and(|v| !v.is_null()))
                    || caps.get("extensions").and_then(Value::as_object).is_some_and(|e| !e.is_empty())
            },
        )
}

impl Sessions {
    /// An empty table counted by `gauge`.
    pub fn counted(gauge: prometheus::IntGauge) -> Self {
        Self { gauge: Some(gauge), ..Self::default() }
    }

    /// The table bounded by `limits`.
    pub fn with_limits(self, limits: Limits) -> Self {
        Self { limits, ..self }
    }

    fn counted_now(&self, open: usize) {
        if let Some(gauge) = &self.gauge {
            gauge.set(open as i64);
        }
    }

    /// A new session for `caller`'s `initialize` (see [`wants_back_channel`]), bound to its
    /// subject, or why none was opened (the table is full of live sessions, or the caller's
    /// state is too large).
    pub fn create(
        self: &Arc<Self>,
        message: &jsonrpc::Message,
        caller: &Caller,
    ) -> Result<Arc<CallerSession>, Refusal> {
        let limits = self.limits;
        let (capabilities, client_info, bytes) = kept_state(message, limits.max_client_info_chars);
        if bytes > limits.max_session_bytes {
            return Err(Refusal::TooLarge { bytes, max_session_bytes: limits.max_session_bytes });
        }
        let requested =
            message.params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
        let session = Arc::new(
            CallerSession::new(capabilities, client_info, mcp::negotiate_legacy(requested))
                .opened_by(OpenedBy::of(caller)),
        );
        if self.len() >= limits.max_sessions {
            // Only expired sessions make room.
            self.sweep(Instant::now());
        }
        {
            let Ok(mut table) = self.table.lock() else { return Err(Refusal::Full { max_sessions: 0 }) };
            if table.len() >= limits.max_sessions {
                return Err(Refusal::Full { max_sessions: limits.max_sessions });
            }
            table.insert(session.id.clone(), session.clone());
            self.counted_now(table.len());
        }
        self.start_sweeper();
        tracing::info!(session = %crate::redact::session_tag(&session.id), "back-channel session opened");
        Ok(session)
    }

    /// The session a request of `caller` names (another subject's is [`Lookup::Unknown`]).
    pub fn lookup(&self, headers: &HeaderMap, caller: &Caller) -> Lookup {
        let Some(id) = headers.get(mcp::headers::names::SESSION_ID).and_then(|v| v.to_str().ok()) else {
            return Lookup::Sessionless;
        };
        if !id.starts_with(ID_PREFIX) {
            return Lookup::Sessionless;
        }
        // A stateless listen id (`super::listeners`): no session is kept for it.
        if id.starts_with(super::listeners::LISTEN_ID_PREFIX) {
            return if super::listeners::is_listen_id(id, &OpenedBy::of(caller)) {
                Lookup::Listen(id.into())
            } else {
                Lookup::Unknown
            };
        }
        let found = self.table.lock().ok().and_then(|t| t.get(id).cloned());
        match found {
            // Another subject's session is not touched: its idle clock is its owner's.
            Some(session) if !session.opened_by.admits(caller) => {
                tracing::warn!(
                    session = %crate::redact::session_tag(&session.id),
                    "a back-channel session presented by another subject than the one that opened it: refused as unknown"
                );
                Lookup::Unknown
            }
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
                tracing::info!(session = %crate::redact::session_tag(&session.id), "back-channel session ended by the client");
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
            tracing::info!(session = %crate::redact::session_tag(&session.id), "back-channel session expired (idle)");
            session.close();
        }
    }

    fn start_sweeper(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        self.sweeper.get_or_init(|| {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Supervised (`crate::supervise`): a panicking sweep is restarted.
                crate::supervise::spawn(crate::supervise::Loop::SessionSweeper, move || {
                    let weak = weak.clone();
                    async move {
                        let mut tick = tokio::time::interval(SWEEP_EVERY);
                        loop {
                            tick.tick().await;
                            let Some(sessions) = weak.upgrade() else { return };
                            sessions.sweep(Instant::now());
                        }
                    }
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn anonymous() -> Caller {
        Caller::anonymous(None)
    }

    fn subject(name: &str) -> Caller {
        Caller { subject: Some(name.into()), ..anonymous() }
    }

    #[test]
    fn a_session_is_found_only_by_the_subject_that_opened_it() {
        let sessions = Arc::new(Sessions::default());
        let alices = sessions.create(&initialize(json!({"sampling": {}})), &subject("alice")).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_str(&alices.id).unwrap());
        assert!(matches!(sessions.lookup(&headers, &subject("alice")), Lookup::Found(_)));
        assert!(matches!(sessions.lookup(&headers, &subject("bob")), Lookup::Unknown));
        assert!(matches!(sessions.lookup(&headers, &anonymous()), Lookup::Unknown));
        let listen = super::super::listeners::mint_listen_id(&OpenedBy::of(&subject("alice")));
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_str(&listen).unwrap());
        assert!(matches!(sessions.lookup(&headers, &subject("alice")), Lookup::Listen(_)));
        assert!(matches!(sessions.lookup(&headers, &subject("bob")), Lookup::Unknown));
        assert!(!alices.is_closed(), "a refused presenter ends nothing");
    }

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
    async fn a_full_table_refuses_new_sessions_and_keeps_live_ones() {
        let limits = Limits { max_sessions: 3, max_session_bytes: 1024, max_client_info_chars: 8 };
        let sessions = Arc::new(Sessions::default().with_limits(limits));
        let live: Vec<_> = (0..3)
            .map(|_| sessions.create(&initialize(json!({"sampling": {}})), &anonymous()).unwrap())
            .collect();
        assert_eq!(
            sessions.create(&initialize(json!({"roots": {}})), &anonymous()).unwrap_err(),
            Refusal::Full { max_sessions: 3 }
        );
        assert!(live.iter().all(|s| !s.is_closed()), "no live session was evicted");
        // An expired one makes room.
        if let Ok(mut last) = live[0].last_used_for_test() {
            *last = Instant::now() - IDLE_TTL;
        }
        let fresh = sessions
            .create(&initialize(json!({"roots": {}})), &anonymous())
            .expect("an expired session made room");
        assert!(live[0].is_closed() && !live[1].is_closed() && !fresh.is_closed());
        assert_eq!(sessions.len(), 3);
    }

    #[test]
    fn a_session_keeps_only_what_it_needs_and_refuses_too_much() {
        let big = "x".repeat(100_000);
        let message = jsonrpc::Message {
            id: Some(json!(1)),
            method: "initialize".into(),
            params: Some(json!({
                "capabilities": {"sampling": {}, "experimental": {"blob": big}},
                "clientInfo": {"name": big, "version": "1.0", "extra": big},
            })),
        };
        let (capabilities, client_info, bytes) = kept_state(&message, 8);
        assert_eq!(capabilities, json!({"sampling": {}}));
        assert_eq!(client_info, json!({"name": "xxxxxxxx", "version": "1.0"}));
        assert!(bytes < 100, "{bytes}");
        let sessions = Arc::new(Sessions::default());
        assert!(sessions.create(&message, &anonymous()).is_ok(), "the large parts are not kept");
        let message = initialize(json!({"sampling": {"blob": big}}));
        assert!(matches!(sessions.create(&message, &anonymous()), Err(Refusal::TooLarge { .. })));
    }

    #[tokio::test]
    async fn idle_sessions_expire_and_foreign_ids_stay_sessionless() {
        let sessions = Arc::new(Sessions::default());
        let session = sessions.create(&initialize(json!({"sampling": {}})), &anonymous()).unwrap();
        assert_eq!(session.protocol_version, "2025-06-18");
        let mut headers = HeaderMap::new();
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_str(&session.id).unwrap());
        assert!(matches!(sessions.lookup(&headers, &anonymous()), Lookup::Found(_)));
        sessions.sweep(Instant::now() + IDLE_TTL);
        assert!(matches!(sessions.lookup(&headers, &anonymous()), Lookup::Unknown), "expired");
        assert!(session.is_closed());
        headers.insert(mcp::headers::SESSION_ID, HeaderValue::from_static("sess-a"));
        assert!(matches!(sessions.lookup(&headers, &anonymous()), Lookup::Sessionless));
    }
}
