//! Held exchanges: a session-era server asking a modern (2026-07-28) caller something.
//!
//! A modern caller has no stream a server could write a request on: it learns of a question
//! from an `input_required` result and answers by retrying its call with `inputResponses` and
//! the `requestState` it was given (SEP-2322). A session-era server instead sends
//! `elicitation/create` (`sampling/createMessage`, `roots/list`) on the call's answer stream
//! and waits there for the answer. The gateway joins the two: the transport keeps that
//! upstream exchange open (its answer stream, read by a task of its own), the caller gets the
//! server's request as an `input_required` result ([`HeldExchanges::hold`]), and its retry
//! answers the held request ([`HeldExchanges::take`]), after which the same stream is read on
//! — to the result, or to the next question (another round). The task and its waiter talk
//! through one-shot channels only ([`Step`], [`Answer`]): whoever waits for the next step
//! (the first round's call, then each retry) holds its receiver, and dropping it tells the
//! task that nobody waits any more.
//!
//! Choices:
//! - The `requestState` handed out is sealed: HMAC-SHA256 under a key drawn from the OS when
//!   the gateway starts (so a state is good in this process only; a fleet needs the caller's
//!   retries routed to the same instance). It names the held exchange and binds it to the
//!   caller (its owner by [`crate::ownership`] and the `Mcp-Session-Id` it sent, hashed: with
//!   `[auth]`, another subject cannot use it; an anonymous caller's state is a bearer capability
//!   narrowed to its gateway session or the id it sent), to the call (tool and
//!   canonical arguments, hashed) and to an expiry. A forged, expired, other caller's or other
//!   call's state is refused with a precise reason ([`Refusal`]) and never reaches the
//!   upstream. The answer takes the exchange out of the table: a state is good once.
//! - A retry without a response for the question is asked the same question again (what the
//!   revision asks of a server missing information); a response that is not an object is
//!   refused and the question stays held.
//! - Bounded: at most `inbound.max_held_exchanges` such calls are open at once, asking or not
//!   (each holds an upstream session and its answer stream); one more is refused before
//!   anything is sent ([`HeldExchanges::reserve`]). The parked questions are bounded by the
//!   same number: each open call parks at most one, and parked questions whose call ended are
//!   swept at every new one.
//! - Expiring: a question not answered within `inbound.held_exchange_ttl_ms` is answered to
//!   the server with a JSON-RPC error by the transport's task, which then drops the stream.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use serde_json::{Value, value::RawValue};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::caller::{capability_for, mint_id};
use crate::{
    error::{ErrorObject, UpstreamError},
    ownership::Owner,
    protocol::mrtr,
};

/// The prefix of every `requestState` the gateway hands out (anything else is a server's own
/// state, passed through untouched).
pub const STATE_PREFIX: &str = "mcpgw-state.";

/// The key of the one question in an `input_required` result of a held exchange.
pub const QUESTION_KEY: &str = "mcpgw-input";

/// Whether `state` is one the gateway handed out (sealed or not: a forgery is refused, not
/// passed on).
pub fn is_ours(state: &str) -> bool {
    state.starts_with(STATE_PREFIX)
}

/// How a held call ends: the server's result or its JSON-RPC error, or why there is none.
pub type Final = Result<Result<Box<RawValue>, ErrorObject>, UpstreamError>;

/// A question of the server, in the 2026-07-28 shape ([`mrtr::input_request_params`]).
#[derive(Debug, Clone)]
pub struct Question {
    pub method: &'static str,
    /// `Null`: no params (`roots/list`).
    pub params: Value,
    /// When the transport stops waiting for the answer (and answers the server an error).
    pub expires: Instant,
}

/// What the transport's task tells whoever waits for the call's next step.
pub enum Step {
    /// The call ended.
    Done(Final),
    /// The server asks; the task waits for the answer on `answer` until `question.expires`.
    Asks { question: Question, answer: oneshot::Sender<Answer> },
}

/// The caller's response to a held question (its `InputResponse`, a result object), and where
/// the task tells the call's next step.
pub struct Answer {
    pub result: Value,
    pub next: oneshot::Sender<Step>,
}

/// Whose retry may answer a held question: digests of the caller and of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    caller: [u8; 16],
    call: [u8; 16],
}

impl Binding {
    /// The caller (its [`Owner`] and the `Mcp-Session-Id` it sent, if any) and the call (the
    /// tool and its canonical arguments' hash).
    pub fn new(owner: &Owner, session: Option<&str>, tool: &str, arguments_hash: &str) -> Self {
        let digest = |parts: &[Option<&str>]| {
            let mut hasher = Sha256::new();
            for part in parts {
                // Length-prefixed, so no two different lists hash the same.
                match part {
                    Some(text) => {
                        hasher.update((text.len() as u64).to_be_bytes());
                        hasher.update(text.as_bytes());
                    }
                    None => hasher.update(u64::MAX.to_be_bytes()),
                }
            }
            let mut out = [0u8; 16];
            out.copy_from_slice(&hasher.finalize()[..16]);
            out
        };
        let (kind, name) = owner.parts();
        Self {
            caller: digest(&[Some(kind), name, session]),
            call: digest(&[Some(tool), Some(arguments_hash)]),
        }
    }
}

/// Why a `requestState` of the gateway's form was refused (nothing reached the upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not sealed by this gateway process (tampered, made up, or from another instance or an
    /// earlier run).
    Forged,
    /// Past its expiry.
    Expired,
    /// Handed to another caller (subject or session).
    OtherCaller,
    /// Handed out for another call (tool or arguments).
    OtherCall,
    /// Its exchange is no longer held: answered already, expired, or its call ended.
    Unknown,
    /// The response to the question is not an object (the question stays held).
    BadResponse,
}

impl Refusal {
    /// `error.data.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Forged => "request_state_forged",
            Refusal::Expired => "request_state_expired",
            Refusal::OtherCaller => "request_state_other_caller",
            Refusal::OtherCall => "request_state_other_call",
            Refusal::Unknown => "request_state_unknown",
            Refusal::BadResponse => "input_response_invalid",
        }
    }

    /// The error message.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Forged => "requestState was not issued by this gateway (or was altered)",
            Refusal::Expired => "requestState has expired: call the tool again without it",
            Refusal::OtherCaller => "requestState was issued to another caller",
            Refusal::OtherCall => "requestState was issued for another call (tool or arguments differ)",
            Refusal::Unknown => {
                "the question this requestState answers is no longer open (answered already, expired, or its call ended): call the tool again without it"
            }
            Refusal::BadResponse => "inputResponses must map the question's key to a result object",
        }
    }
}

/// What a retry carrying a state of the gateway's led to.
pub enum Taken {
    /// The answer went to the server: the call's next step arrives here.
    Answered(oneshot::Receiver<Step>),
    /// The retry had no response for the question: the same question, asked again.
    AskAgain(Box<RawValue>),
}

/// One question waiting for its caller.
struct Parked {
    method: &'static str,
    params: Value,
    expires: Instant,
    state: String,
    answer: oneshot::Sender<Answer>,
}

/// The held exchanges of this process: the open-call bound and the parked questions.
pub struct HeldExchanges {
    parked: Mutex<HashMap<String, Parked>>,
    open: Arc<Semaphore>,
    max: usize,
    ttl: Duration,
    key: [u8; 32],
}

impl std::fmt::Debug for HeldExchanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldExchanges")
            .field("max", &self.max)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl HeldExchanges {
    /// At most `max` open calls; a question waits `ttl` for its answer.
    pub fn new(max: usize, ttl: Duration) -> Self {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            tracing::error!("no OS randomness for the requestState key; falling back to a weak generator");
            for chunk in key.chunks_mut(16) {
                chunk.copy_from_slice(&fastrand::u128(..).to_le_bytes());
            }
        }
        Self { parked: Mutex::default(), open: Arc::new(Semaphore::new(max)), max, ttl, key }
    }

    /// How long a question waits for its caller.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A place for one more open call, or the bound when all are taken.
    pub fn reserve(&self) -> Result<OwnedSemaphorePermit, usize> {
        self.open.clone().try_acquire_owned().map_err(|_| self.max)
    }

    /// Questions parked right now (for tests and metrics).
    pub fn parked(&self) -> usize {
        self.parked.lock().map(|p| p.values().filter(|q| !q.answer.is_closed()).count()).unwrap_or(0)
    }

    /// Parks the server's `question` for the caller bound by `binding` and returns the
    /// `input_required` result that asks it.
    pub fn hold(
        &self,
        binding: &Binding,
        question: Question,
        answer: oneshot::Sender<Answer>,
    ) -> Box<RawValue> {
        let id = mint_id("held");
        let expires_ms = unix_ms_at(question.expires);
        let state = self.seal(&id, binding, expires_ms);
        let result = mrtr::input_required_result(QUESTION_KEY, question.method, &question.params, &state);
        let parked = Parked {
            method: question.method,
            params: question.params,
            expires: question.expires,
            state,
            answer,
        };
        if let Ok(mut table) = self.parked.lock() {
            table.retain(|_, q| !q.answer.is_closed());
            table.insert(id, parked);
        }
        result
    }

    /// A caller's retry carrying `state`: checked (seal, expiry, caller, call), then its
    /// response to the question is handed to the waiting exchange.
    pub fn take(&self, state: &str, binding: &Binding, responses: Option<&Value>) -> Result<Taken, Refusal> {
        let (id, caller, call, expires_ms) = self.open_seal(state).ok_or(Refusal::Forged)?;
        if unix_ms_at(Instant::now()) > expires_ms {
            return Err(Refusal::Expired);
        }
        if caller != binding.caller {
            return Err(Refusal::OtherCaller);
        }
        if call != binding.call {
            return Err(Refusal::OtherCall);
        }
        let mut table = self.parked.lock().map_err(|_| Refusal::Unknown)?;
        let parked = table.remove(&id).ok_or(Refusal::Unknown)?;
        if parked.answer.is_closed() || parked.expires <= Instant::now() {
            return Err(Refusal::Unknown);
        }
        let response = responses.and_then(Value::as_object).and_then(|r| r.get(QUESTION_KEY));
        match response {
            None => {
                let again =
                    mrtr::input_required_result(QUESTION_KEY, parked.method, &parked.params, &parked.state);
                table.insert(id, parked);
                Ok(Taken::AskAgain(again))
            }
            Some(result) if !result.is_object() => {
                table.insert(id, parked);
                Err(Refusal::BadResponse)
            }
            Some(result) => {
                drop(table);
                let (next, receiver) = oneshot::channel();
                parked.answer.send(Answer { result: result.clone(), next }).map_err(|_| Refusal::Unknown)?;
                Ok(Taken::Answered(receiver))
            }
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length: this cannot fail.
        <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }

    /// `mcpgw-state.` + base64url(payload) + `.` + base64url(HMAC over the part before it).
    fn seal(&self, id: &str, binding: &Binding, expires_ms: u64) -> String {
        let payload = format!("{id}.{}.{}.{expires_ms}", hex(&binding.caller), hex(&binding.call));
        let signed = format!("{STATE_PREFIX}{}", URL_SAFE_NO_PAD.encode(payload));
        let mut mac = self.mac();
        mac.update(signed.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signed}.{tag}")
    }

    /// The id, caller and call digests and expiry of a state this process sealed.
    fn open_seal(&self, state: &str) -> Option<(String, [u8; 16], [u8; 16], u64)> {
        let (signed, tag) = state.rsplit_once('.')?;
        let mut mac = self.mac();
        mac.update(signed.as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(tag).ok()?).ok()?;
        let payload = URL_SAFE_NO_PAD.decode(signed.strip_prefix(STATE_PREFIX)?).ok()?;
        let payload = String::from_utf8(payload).ok()?;
        let mut parts = payload.split('.');
        let id = parts.next()?.to_string();
        let caller = unhex(parts.next()?)?;
        let call = unhex(parts.next()?)?;
        let expires_ms = parts.next()?.parse().ok()?;
        Some((id, caller, call, expires_ms))
    }
}

/// Whether a caller that declared `capabilities` may be asked `method`.
pub fn allows(capabilities: &Value, method: &str) -> bool {
    capability_for(method).is_some_and(|c| capabilities.get(c).is_some_and(|v| !v.is_null()))
}

/// A modern caller that may be asked, for the transport: the table, what the caller declared
/// (told to the session-era server in the `initialize` of the call's own session), and whose
/// retry may answer.
#[derive(Clone)]
pub struct Asker {
    pub exchanges: Arc<HeldExchanges>,
    pub capabilities: Value,
    pub client_info: Value,
    pub binding: Binding,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker").field("capabilities", &self.capabilities).finish_non_exhaustive()
    }
}

impl Asker {
    /// Whether the caller declared the capability `method` needs.
    pub fn allows(&self, method: &str) -> bool {
        allows(&self.capabilities, method)
    }
}

fn unix_ms_at(at: Instant) -> u64 {
    let now = Instant::now();
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let wall = if at >= now { wall + (at - now) } else { wall.saturating_sub(now - at) };
    wall.as_millis() as u64
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn question(ttl: Duration) -> Question {
        Question {
            method: "elicitation/create",
            params: json!({"message": "ok?"}),
            expires: Instant::now() + ttl,
        }
    }

    fn state_of(raw: &RawValue) -> String {
        let value: Value = serde_json::from_str(raw.get()).unwrap();
        assert_eq!(value["resultType"], "input_required");
        assert_eq!(value["inputRequests"][QUESTION_KEY]["method"], "elicitation/create");
        value["requestState"].as_str().unwrap().to_string()
    }

    fn subject(name: &str) -> Owner {
        Owner::Subject(name.into())
    }

    fn answer(result: Value) -> Value {
        json!({QUESTION_KEY: result})
    }

    #[tokio::test]
    async fn an_answer_reaches_the_held_exchange_once() {
        let held = HeldExchanges::new(4, Duration::from_secs(60));
        let alice = Binding::new(&subject("alice"), None, "place_order", "h1");
        let (tx, rx) = oneshot::channel();
        let state = state_of(&held.hold(&alice, question(Duration::from_secs(60)), tx));
        assert!(is_ours(&state));
        assert_eq!(held.parked(), 1);
        let Ok(Taken::Answered(_next)) =
            held.take(&state, &alice, Some(&answer(json!({"action": "decline"}))))
        else {
            panic!("answered")
        };
        let got = rx.await.unwrap();
        assert_eq!(got.result, json!({"action": "decline"}));
        assert_eq!(
            held.take(&state, &alice, Some(&answer(json!({})))).err(),
            Some(Refusal::Unknown),
            "a state is good once"
        );
    }

    #[tokio::test]
    async fn forged_other_callers_other_calls_and_expired_states_are_refused() {
        let held = HeldExchanges::new(4, Duration::from_secs(60));
        let alice = Binding::new(&subject("alice"), None, "place_order", "h1");
        let (tx, _rx) = oneshot::channel();
        let state = state_of(&held.hold(&alice, question(Duration::from_secs(60)), tx));
        let response = answer(json!({"action": "accept"}));
        let bob = Binding::new(&subject("bob"), None, "place_order", "h1");
        assert_eq!(held.take(&state, &bob, Some(&response)).err(), Some(Refusal::OtherCaller));
        let sessioned = Binding::new(&subject("alice"), Some("s"), "place_order", "h1");
        assert_eq!(held.take(&state, &sessioned, Some(&response)).err(), Some(Refusal::OtherCaller));
        let other_call = Binding::new(&subject("alice"), None, "place_order", "h2");
        assert_eq!(held.take(&state, &other_call, Some(&response)).err(), Some(Refusal::OtherCall));
        // One character changed anywhere: not ours any more.
        let mut tampered = state.clone().into_bytes();
        let at = STATE_PREFIX.len() + 3;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(held.take(&tampered, &alice, Some(&response)).err(), Some(Refusal::Forged));
        assert_eq!(held.take("mcpgw-state.x.y", &alice, Some(&response)).err(), Some(Refusal::Forged));
        // Another process's key.
        let other = HeldExchanges::new(4, Duration::from_secs(60));
        assert_eq!(other.take(&state, &alice, Some(&response)).err(), Some(Refusal::Forged));
        // A refused retry leaves the question held for the right caller.
        assert!(matches!(held.take(&state, &alice, Some(&response)), Ok(Taken::Answered(_))));
        let (tx, _rx) = oneshot::channel();
        let expired = state_of(&held.hold(&alice, question(Duration::ZERO), tx));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(held.take(&expired, &alice, Some(&response)).err(), Some(Refusal::Expired));
    }

    #[tokio::test]
    async fn a_retry_without_the_answer_is_asked_again_and_a_bad_answer_keeps_the_question() {
        let held = HeldExchanges::new(4, Duration::from_secs(60));
        let alice = Binding::new(&Owner::Nobody, None, "t", "h");
        let (tx, _rx) = oneshot::channel();
        let state = state_of(&held.hold(&alice, question(Duration::from_secs(60)), tx));
        let Ok(Taken::AskAgain(again)) = held.take(&state, &alice, None) else { panic!("asked again") };
        assert_eq!(state_of(&again), state);
        assert_eq!(held.take(&state, &alice, Some(&answer(json!("yes")))).err(), Some(Refusal::BadResponse));
        assert!(matches!(held.take(&state, &alice, Some(&answer(json!({})))), Ok(Taken::Answered(_))));
    }

    #[test]
    fn open_calls_are_bounded_and_ended_calls_leave_nothing_parked() {
        let held = HeldExchanges::new(2, Duration::from_secs(60));
        let (a, b) = (held.reserve().unwrap(), held.reserve().unwrap());
        assert_eq!(held.reserve().err(), Some(2));
        drop(a);
        let _c = held.reserve().expect("a place freed");
        drop(b);
        let alice = Binding::new(&Owner::Nobody, None, "t", "h");
        let (tx, rx) = oneshot::channel();
        let _ = held.hold(&alice, question(Duration::from_secs(60)), tx);
        drop(rx);
        assert_eq!(held.parked(), 0, "its call ended");
    }
}
