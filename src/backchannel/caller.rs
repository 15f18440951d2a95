//! One back-channel caller's session: who opened it (the subject it is bound to,
//! [`crate::ownership`]), what it declared at `initialize` (the capabilities a
//! relayed request needs, its clientInfo, the version negotiated), the relayed requests that
//! wait for its answer, and the upstream sessions opened for it (ended with it). The table of
//! these sessions is [`super::sessions`]; what a call relays through one is [`super::relay`].

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use http::HeaderValue;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::ownership::OpenedBy;

/// The prefix of every id the gateway mints (inbound session ids and relayed request ids).
pub const ID_PREFIX: &str = "mcpgw-";

/// A fresh id of 128 random bits from the OS generator: unguessable, so a caller cannot answer
/// (or end) what is not its own.
pub fn mint_id(kind: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: still unique, though guessable; logged so an operator notices.
        tracing::error!("no OS randomness for an id; falling back to a weak generator");
        bytes = fastrand::u128(..).to_le_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{ID_PREFIX}{kind}-{hex}")
}

/// The methods a server may ask a caller through the relay (`None`: not relayable).
pub(super) fn relayable(method: &str) -> Option<&'static str> {
    ["sampling/createMessage", "elicitation/create", "roots/list"].into_iter().find(|m| *m == method)
}

/// The client capability a relayable method needs (`None`: not relayable).
pub fn capability_for(method: &str) -> Option<&'static str> {
    match relayable(method)? {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        _ => Some("roots"),
    }
}

/// What ends an upstream session opened for a caller (the transport's `DELETE`, built when the
/// session was opened); run when the caller's session ends.
pub type EndSession = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An upstream session-era session opened for one caller session (a DEDICATED one: it states
/// the caller's capabilities and clientInfo), or a server that refused the session era.
pub enum Dedicated {
    Open {
        session_id: Option<HeaderValue>,
        version: &'static str,
        /// What ends it (`None`: a server without sessions, nothing to end).
        close: Option<EndSession>,
    },
    /// The server refused a session-era `initialize`: its calls take the normal path.
    Refused,
}

/// What a back-channel caller told at `initialize`, its relayed requests waiting for an
/// answer, and the upstream sessions opened for it.
pub struct CallerSession {
    pub id: Arc<str>,
    /// The subject that opened it: only that subject may present it ([`OpenedBy::admits`]).
    pub opened_by: OpenedBy,
    pub capabilities: Value,
    pub client_info: Value,
    /// The session-era version negotiated with the caller.
    pub protocol_version: &'static str,
    last_used: Mutex<Instant>,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// By server URL; a tokio mutex so one handshake per caller runs at a time.
    pub upstream: tokio::sync::Mutex<HashMap<String, Dedicated>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for CallerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerSession").field("id", &self.id).finish_non_exhaustive()
    }
}

impl CallerSession {
    pub fn new(capabilities: Value, client_info: Value, protocol_version: &'static str) -> Self {
        Self {
            id: mint_id("session").into(),
            opened_by: OpenedBy::default(),
            capabilities,
            client_info,
            protocol_version,
            last_used: Mutex::new(Instant::now()),
            pending: Mutex::default(),
            upstream: tokio::sync::Mutex::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// The session bound to the subject that opens it (an anonymous one otherwise).
    pub fn opened_by(self, opened_by: OpenedBy) -> Self {
        Self { opened_by, ..self }
    }

    /// Whether the caller declared the capability `method` needs.
    pub fn allows(&self, method: &str) -> bool {
        capability_for(method)
            .is_some_and(|capability| self.capabilities.get(capability).is_some_and(|c| !c.is_null()))
    }

    pub fn touch(&self) {
        if let Ok(mut last) = self.last_used.lock() {
            *last = Instant::now();
        }
    }

    #[cfg(test)]
    pub fn last_used_for_test(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, Instant>> {
        self.last_used.lock()
    }

    pub fn last_used(&self) -> Instant {
        self.last_used.lock().map(|l| *l).unwrap_or_else(|_| Instant::now())
    }

    /// Registers the relayed request `id` as waiting for the caller's answer: the answer
    /// arrives on the receiver ([`CallerSession::answer`]).
    pub(super) fn expect_answer(&self, id: String) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        rx
    }

    /// Stops waiting for an answer to the relayed request `id`.
    pub(super) fn stop_waiting(&self, id: &str) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(id);
        }
    }

    /// Routes the caller's response `message` to the relayed request `id`; `false` when no
    /// request of this session waits under that id (never minted, answered, or given up).
    pub fn answer(&self, id: &str, message: Value) -> bool {
        let waiting = self.pending.lock().ok().and_then(|mut p| p.remove(id));
        waiting.is_some_and(|tx| tx.send(message).is_ok())
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Ends the session: relayed requests still waiting fail, and every upstream session
    /// opened for it is ended with `DELETE` (in the background).
    pub fn close(self: &Arc<Self>) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        self.close_waiting_requests();
        let session = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move { session.end_upstream().await });
    }

    /// Marks the session ended; relayed requests still waiting fail at once.
    pub fn close_waiting_requests(&self) {
        self.closed.store(true, Ordering::Relaxed);
        if let Ok(mut pending) = self.pending.lock() {
            pending.clear();
        }
    }

    /// Ends the upstream sessions opened for this caller (`DELETE`, 2 s each at most).
    pub async fn end_upstream(&self) {
        let opened = std::mem::take(&mut *self.upstream.lock().await);
        for dedicated in opened.into_values() {
            if let Dedicated::Open { close: Some(end), .. } = dedicated {
                end.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_declared_capabilities_are_relayed_and_ids_are_unguessable() {
        let caller = CallerSession::new(json!({"sampling": {}}), json!({}), "2025-06-18");
        assert!(caller.allows("sampling/createMessage"));
        assert!(!caller.allows("elicitation/create") && !caller.allows("roots/list"));
        assert!(!caller.allows("tools/call"));
        let (a, b) = (mint_id("relay"), mint_id("relay"));
        assert_ne!(a, b);
        assert!(a.starts_with("mcpgw-relay-") && a.len() == "mcpgw-relay-".len() + 32, "{a}");
    }
}
