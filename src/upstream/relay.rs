//! Server→client requests (`sampling/createMessage`, `elicitation/create`, `roots/list`)
//! relayed from an upstream to the caller of the `tools/call` they belong to.
//!
//! The contract between the inbound side and a transport that can relay (only streamable HTTP,
//! see `upstream/http/relay.rs`): a caller that initialized with a back-channel capability has a
//! [`CallerSession`] (kept by `gateway::sessions`); each of its `tools/call`s carries a
//! [`Relay`] in its [`super::UpstreamRequest`]. The transport hands each upstream request to
//! [`Relay::ask`], which mints a fresh unguessable id, writes the request on the caller's event
//! stream (the call's notification channel) and waits for the caller's JSON-RPC response,
//! which the inbound side routes back by that id ([`CallerSession::answer`]).
//!
//! Choices:
//! - Only methods the caller declared a capability for are relayed ([`CallerSession::allows`]);
//!   anything else is answered upstream with `-32601` without bothering the caller. [`Relay::ask`]
//!   checks it again itself, and a [`RelayedRequest`] (the only kind of request that can reach a
//!   caller's stream, see [`super::to_caller`]) can be made nowhere else.
//! - Waiting for the caller is bounded by the call's deadline (the caller's `X-Request-Timeout-Ms`
//!   or `_meta` timeout, else the server's `deadline_ms`), NOT by the attempt timeout
//!   (`timeout_ms` measures the server; its clock stops while the caller is being asked, so a
//!   person may take longer than a server's attempt). A caller that does not answer ends the
//!   call with [`super::UpstreamError::CallerDidNotAnswer`], attributed to the caller: not
//!   retried, not counted by the breaker.
//! - Once something was relayed ([`Relay::relayed`]), the call is neither retried nor followed
//!   by a fallback: a person or a model may already have been asked.
//! - One call relays at most [`MAX_RELAYED_PER_CALL`] requests, one at a time (the transport
//!   reads on only after the caller answered), so one call never has more than one outstanding.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use reqwest::header::HeaderValue;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{
    ProgressSink, UpstreamError,
    to_caller::{RelayedRequest, ToCaller},
};

/// Most server→client requests one call may relay to its caller.
pub const MAX_RELAYED_PER_CALL: u32 = 16;

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
fn relayable(method: &str) -> Option<&'static str> {
    ["sampling/createMessage", "elicitation/create", "roots/list"].into_iter().find(|m| *m == method)
}

/// An upstream session-era session opened for one caller session (a DEDICATED one: it states
/// the caller's capabilities and clientInfo), or a server that refused the session era.
pub enum Dedicated {
    Open {
        session_id: Option<HeaderValue>,
        version: &'static str,
        /// The `DELETE` that ends it.
        close: Option<Box<super::http::client::RequestBuilder>>,
    },
    /// The server refused a session-era `initialize`: its calls take the normal path.
    Refused,
}

/// What a back-channel caller told at `initialize`, its relayed requests waiting for an
/// answer, and the upstream sessions opened for it.
pub struct CallerSession {
    pub id: Arc<str>,
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
            capabilities,
            client_info,
            protocol_version,
            last_used: Mutex::new(Instant::now()),
            pending: Mutex::default(),
            upstream: tokio::sync::Mutex::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// Whether the caller declared the capability `method` needs.
    pub fn allows(&self, method: &str) -> bool {
        let capability = match relayable(method) {
            Some("sampling/createMessage") => "sampling",
            Some("elicitation/create") => "elicitation",
            Some("roots/list") => "roots",
            _ => return false,
        };
        self.capabilities.get(capability).is_some_and(|c| !c.is_null())
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
            if let Dedicated::Open { close: Some(delete), .. } = dedicated {
                let _ = delete.send().await;
            }
        }
    }
}

/// One call's way back to its caller.
#[derive(Clone)]
pub struct Relay {
    pub caller: Arc<CallerSession>,
    /// The call's notification channel; its inbound end writes each [`RelayedRequest`] on the
    /// caller's event stream.
    pub outbox: ProgressSink,
    pub state: Arc<RelayState>,
    /// `mcp_gateway_relayed_requests_total{method,outcome}`, when counted.
    pub counter: Option<prometheus::IntCounterVec>,
}

/// What a call's relay did so far (shared by every attempt and the layers around them).
#[derive(Debug)]
pub struct RelayState {
    relayed: AtomicU32,
    /// The method of the relayed request the call waits for an answer to right now. Cleared
    /// when the wait ends by itself, not when the waiting future is dropped.
    waiting: tokio::sync::watch::Sender<Option<String>>,
    /// Time spent waiting for the caller: finished waits, and when the current one began.
    waited: Mutex<(Duration, Option<Instant>)>,
}

impl Default for RelayState {
    fn default() -> Self {
        Self {
            relayed: AtomicU32::new(0),
            waiting: tokio::sync::watch::Sender::new(None),
            waited: Mutex::new((Duration::ZERO, None)),
        }
    }
}

impl RelayState {
    /// The relayed request the call is waiting on (if it is waiting for its caller).
    pub fn waiting(&self) -> Option<String> {
        self.waiting.borrow().clone()
    }

    /// Total time spent waiting for the caller so far (the current wait included): the
    /// attempt timeout does not count it (see the attempt timeout layer).
    pub fn waited(&self) -> Duration {
        self.waited
            .lock()
            .map(|w| w.0 + w.1.map_or(Duration::ZERO, |since| since.elapsed()))
            .unwrap_or_default()
    }

    /// Returns once the call is not waiting for its caller.
    pub async fn until_answered(&self) {
        let mut receiver = self.waiting.subscribe();
        let _ = receiver.wait_for(Option::is_none).await;
    }

    fn set_waiting(&self, method: Option<&str>) {
        if let Ok(mut waited) = self.waited.lock() {
            match (method, waited.1.take()) {
                (Some(_), _) => waited.1 = Some(Instant::now()),
                (None, Some(since)) => waited.0 += since.elapsed(),
                (None, None) => {}
            }
        }
        self.waiting.send_replace(method.map(str::to_string));
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("caller", &self.caller.id).field("state", &self.state).finish()
    }
}

/// Removes a relayed request from its session's waiting list, and counts it, however the
/// wait ends (answered, timed out, or dropped with the call).
struct Pending<'a> {
    relay: &'a Relay,
    method: &'a str,
    id: String,
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Ok(mut pending) = self.relay.caller.pending.lock() {
            pending.remove(&self.id);
        }
        self.relay.count(self.method, if self.answered { "answered" } else { "unanswered" });
    }
}

impl Relay {
    pub fn new(caller: Arc<CallerSession>, outbox: ProgressSink) -> Self {
        Self { caller, outbox, state: Arc::default(), counter: None }
    }

    /// Counts one request of the server by what became of it (`method` bounded to the three
    /// relayable ones, `ping`, and `other`).
    pub fn count(&self, method: &str, outcome: &str) {
        let method = match method {
            "sampling/createMessage" | "elicitation/create" | "roots/list" | "ping" => method,
            _ => "other",
        };
        if let Some(counter) = &self.counter {
            counter.with_label_values(&[method, outcome]).inc();
        }
    }

    /// Whether a request was relayed to the caller (the call must not be repeated).
    pub fn relayed(&self) -> bool {
        self.state.relayed.load(Ordering::Relaxed) > 0
    }

    /// The JSON-RPC answer (`result` or `error` member) to send upstream for a request the
    /// upstream made, when the gateway answers it itself: `None` when it is for the caller.
    pub fn local_answer(&self, method: &str) -> Option<(&'static str, Value)> {
        if method == "ping" {
            self.count(method, "ping");
            return Some(("result", json!({})));
        }
        if !self.caller.allows(method) {
            self.count(method, "not_declared");
            let shown: String = method.chars().take(64).collect();
            return Some((
                "error",
                json!({"code": -32601, "message": format!("the client did not declare the capability {shown} needs")}),
            ));
        }
        if self.state.relayed.load(Ordering::Relaxed) >= MAX_RELAYED_PER_CALL {
            self.count(method, "limit");
            return Some((
                "error",
                json!({"code": -32603, "message": format!("the gateway relays at most {MAX_RELAYED_PER_CALL} requests per call")}),
            ));
        }
        None
    }

    /// Relays `method` to the caller and waits for its answer: the `result` or `error` member
    /// to send upstream. Bounded by `deadline`; a caller gone (session ended) or silent is
    /// [`UpstreamError::CallerDidNotAnswer`].
    pub async fn ask(
        &self,
        method: &str,
        params: Option<Value>,
        deadline: Option<Instant>,
    ) -> Result<(&'static str, Value), UpstreamError> {
        let silent = || UpstreamError::CallerDidNotAnswer(method.chars().take(64).collect());
        // Checked here too, not only by `local_answer`: a request reaches a caller's stream
        // only for a session that declared the capability it needs.
        let Some(relayable) = relayable(method).filter(|_| self.caller.allows(method)) else {
            return Err(UpstreamError::Protocol(format!(
                "the client did not declare the capability {} needs",
                method.chars().take(64).collect::<String>()
            )));
        };
        if self.caller.is_closed() {
            return Err(silent());
        }
        let id = mint_id("relay");
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.caller.pending.lock() {
            pending.insert(id.clone(), tx);
        }
        let mut pending = Pending { relay: self, method, id: id.clone(), answered: false };
        self.state.relayed.fetch_add(1, Ordering::Relaxed);
        self.state.set_waiting(Some(method));
        let message = ToCaller::Request(RelayedRequest::made_by_the_relay(id, relayable, params));
        let exchange = async {
            self.outbox.send(message).await.ok()?;
            rx.await.ok()
        };
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), exchange).await.ok().flatten(),
            None => exchange.await,
        };
        self.state.set_waiting(None);
        pending.answered = answer.is_some();
        drop(pending);
        let mut answer = answer.ok_or_else(silent)?;
        if let Some(error) = answer.get_mut("error").map(Value::take) {
            return Ok(("error", error));
        }
        Ok(("result", answer.get_mut("result").map(Value::take).unwrap_or_else(|| json!({}))))
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn the_gateway_answers_pings_and_undeclared_methods_itself() {
        let caller = Arc::new(CallerSession::new(json!({"elicitation": {}}), json!({}), "2025-06-18"));
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let relay = Relay::new(caller, tx);
        assert_eq!(relay.local_answer("ping"), Some(("result", json!({}))));
        let (member, error) = relay.local_answer("sampling/createMessage").expect("not declared");
        assert_eq!((member, error["code"].as_i64()), ("error", Some(-32601)));
        assert_eq!(relay.local_answer("tools/list").map(|(_, e)| e["code"].clone()), Some(json!(-32601)));
        assert_eq!(relay.local_answer("elicitation/create"), None, "for the caller");
        relay.state.relayed.store(MAX_RELAYED_PER_CALL, Ordering::Relaxed);
        let (_, error) = relay.local_answer("elicitation/create").expect("over the per-call limit");
        assert_eq!(error["code"], -32603);
    }

    #[tokio::test]
    async fn a_request_for_an_undeclared_capability_never_reaches_the_caller() {
        let caller = Arc::new(CallerSession::new(json!({"sampling": {}}), json!({}), "2025-06-18"));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let relay = Relay::new(caller, tx);
        for method in ["elicitation/create", "roots/list", "tools/list", "notifications/message"] {
            assert!(relay.ask(method, None, None).await.is_err(), "{method}");
        }
        assert!(rx.try_recv().is_err(), "nothing was written for the caller");
        assert!(!relay.relayed());
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiting_request_once_and_only_by_its_id() {
        let caller = Arc::new(CallerSession::new(json!({"sampling": {}}), json!({}), "2025-06-18"));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let relay = Relay::new(caller.clone(), tx);
        let asking = tokio::spawn({
            let relay = relay.clone();
            async move { relay.ask("sampling/createMessage", Some(json!({"x": 1})), None).await }
        });
        let Some(ToCaller::Request(sent)) = rx.recv().await else {
            panic!("the request is written for the caller")
        };
        assert_eq!(sent.to_message()["params"], json!({"x": 1}));
        let id = sent.id().to_string();
        assert!(!caller.answer("mcpgw-relay-unknown", json!({})));
        assert!(caller.answer(&id, json!({"jsonrpc": "2.0", "id": id, "result": {"ok": true}})));
        assert!(!caller.answer(&id, json!({})), "answered once");
        let (member, value) = asking.await.unwrap().unwrap();
        assert_eq!((member, value), ("result", json!({"ok": true})));
        assert!(relay.relayed() && relay.state.waiting().is_none());
    }
}
