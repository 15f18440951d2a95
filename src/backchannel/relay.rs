//! Server→client requests (`sampling/createMessage`, `elicitation/create`, `roots/list`)
//! relayed from an upstream to the caller of the `tools/call` they belong to.
//!
//! The contract between the inbound side and a transport that can relay (only streamable HTTP,
//! see `upstream/http/relay.rs`): a caller that initialized with a back-channel capability has a
//! [`CallerSession`] (kept in [`super::sessions`]); each of its `tools/call`s carries a
//! [`Relay`] in its upstream request. The transport hands each upstream request to
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
//!   call with [`Unanswered::Silent`] (the upstream error `CallerDidNotAnswer`), attributed to
//!   the caller: not retried, not counted by the breaker.
//! - Once something was relayed ([`Relay::relayed`]), the call is neither retried nor followed
//!   by a fallback: a person or a model may already have been asked.
//! - One call relays at most [`MAX_RELAYED_PER_CALL`] requests, one at a time (the transport
//!   reads on only after the caller answered), so one call never has more than one outstanding.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    ProgressSink,
    caller::{CallerSession, mint_id, relayable},
    to_caller::{RelayedRequest, ToCaller},
};

/// Most server→client requests one call may relay to its caller.
pub const MAX_RELAYED_PER_CALL: u32 = 16;

/// Why a relayed request got no answer from the caller (the transport turns it into its own
/// error: the caller's doing, not the server's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// The caller's session did not declare the capability the method (cut to 64 characters)
    /// needs: nothing was written for it.
    NotDeclared(String),
    /// The caller did not answer the method (cut to 64 characters) before the call's deadline,
    /// or its session ended.
    Silent(String),
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
        self.relay.caller.stop_waiting(&self.id);
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

    /// What the caller's session declared at `initialize`: its capabilities and clientInfo.
    pub fn declared(&self) -> (&Value, &Value) {
        (&self.caller.capabilities, &self.caller.client_info)
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
    /// [`Unanswered::Silent`].
    pub async fn ask(
        &self,
        method: &str,
        params: Option<Value>,
        deadline: Option<Instant>,
    ) -> Result<(&'static str, Value), Unanswered> {
        let silent = || Unanswered::Silent(method.chars().take(64).collect());
        // Checked here too, not only by `local_answer`: a request reaches a caller's stream
        // only for a session that declared the capability it needs.
        let Some(relayable) = relayable(method).filter(|_| self.caller.allows(method)) else {
            return Err(Unanswered::NotDeclared(method.chars().take(64).collect()));
        };
        if self.caller.is_closed() {
            return Err(silent());
        }
        let id = mint_id("relay");
        let rx = self.caller.expect_answer(id.clone());
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
    fn the_gateway_answers_pings_and_undeclared_methods_itself() {
        let caller = Arc::new(CallerSession::new(json!({"elicitation": {}}), json!({}), "2025-06-18"));
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let relay = Relay::new(caller, tx.into());
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
        let relay = Relay::new(caller, tx.into());
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
        let relay = Relay::new(caller.clone(), tx.into());
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
