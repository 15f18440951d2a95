//! Streamable HTTP for a modern (2026-07-28) caller of a session-era server: the server's
//! requests become `input_required` results while the exchange is held open
//! ([`crate::backchannel::held`] says why and what binds the caller's retry).
//!
//! Such a `tools/call` (the caller declared a capability a server may ask under) goes, to a
//! server found to speak the session era, over a session of its own: `initialize` stating the
//! caller's `clientCapabilities` and `clientInfo` (the server decides what it may ask from
//! them, and the gateway's shared session declares none), `notifications/initialized`, the
//! call, and `DELETE` when the call ends. The answer stream is read by a task of its own, so
//! that the caller's request can end with the question while the server keeps waiting for
//! its answer. On that stream:
//! - a request the caller declared the capability for is a question ([`Step::Asks`]) for
//!   whoever waits for the call's next step; its answer is POSTed with the server's id and the
//!   stream read on, to the result or the next question;
//! - `ping` is answered `{}`; a request for an undeclared capability, one the 2026-07-28 shape
//!   cannot carry, anything else, or more than [`MAX_RELAYED_PER_CALL`] questions are answered
//!   with an error by the gateway;
//! - progress and log entries are not relayed (the caller's request that could carry them may
//!   already have ended with a question);
//! - the session's standalone stream (`GET`), when the server offers one, is read too: servers
//!   may send their requests there, and the session is the call's alone.
//!
//! The call ends, the server told with `notifications/cancelled` while its answer is owed and
//! the session ended with `DELETE`, when nobody waits for the next step any more (the caller's
//! deadline, a disconnect) or a question is not answered by its expiry — the server then gets
//! a JSON-RPC error ([`UNANSWERED`]) for it first. A server that refuses the session era for
//! such a session keeps the caller on the normal path.

use std::{
    collections::VecDeque,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use http::Method;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::{
    CALL_CREDENTIALS, Headers, Inner, LegacySession,
    body::{drain, is_event_stream, read_body},
    client::Response,
    errors::request_error,
    request::with_outbound,
};
use crate::{
    backchannel::{
        held::{Answer, Asker, Final, Question, Step},
        relay::MAX_RELAYED_PER_CALL,
    },
    protocol::{
        jsonrpc::UpstreamResponse,
        mcp::{self, Era},
        mrtr, sse,
    },
    upstream::{
        RawResult, UpstreamError, UpstreamReply, UpstreamRequest, credentials::Applied, decode_reply,
        reply_from,
    },
};

/// The JSON-RPC code of the error a server gets for a request its caller never answered
/// (the code the SDKs use for a request that timed out).
pub const UNANSWERED: i64 = -32001;

/// The methods a server may ask a caller.
const ASKABLE: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];

impl Inner {
    /// Runs `request` for the modern caller `ask` over a session of its own (at `version`, the
    /// one the server chose for the gateway); `None` when the server refuses it (the normal
    /// path then).
    pub(super) async fn held_call(
        self: &Arc<Self>,
        request: &UpstreamRequest,
        ask: &Asker,
        version: &'static str,
    ) -> Option<Result<UpstreamReply, UpstreamError>> {
        let permit = match ask.exchanges.reserve() {
            Ok(permit) => permit,
            Err(limit) => return Some(Err(UpstreamError::HeldFull { limit })),
        };
        let session = match self.open_session(&ask.capabilities, &ask.client_info, version).await {
            Ok(Some(session)) => session,
            Ok(None) => return None,
            Err(error) => return Some(Err(error)),
        };
        tracing::debug!(url = %self.log_url, "a session of its own for a modern caller that may be asked");
        Some(self.post_held(request, ask, session, permit).await)
    }

    /// POSTs the call in its own session; an event-stream answer is read by the exchange's
    /// task, and this waits for its first step.
    async fn post_held(
        self: &Arc<Self>,
        request: &UpstreamRequest,
        ask: &Asker,
        session: LegacySession,
        permit: OwnedSemaphorePermit,
    ) -> Result<UpstreamReply, UpstreamError> {
        // Opened before the call, so that nothing the server sends there for it is missed.
        let standalone = self.standalone_stream(&session).await;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = mcp::encode_patched_request(
            id,
            request.method,
            &request.params,
            Era::Legacy,
            &request.trace_patch(),
        );
        let builder =
            with_outbound(self.build(Method::POST, Headers::Legacy(&session)).body(body), &request.outbound);
        // Dropped before the end (the call dropped, a failure): the server is told, the session ended.
        let mut open = Open { inner: self.clone(), session, owed: Some(id) };
        let response = builder.send().await.map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            open.owed = None;
            return super::relay::refused_answer(response).await;
        }
        if !is_event_stream(&response) {
            let body = read_body(response, self.max_response_bytes).await;
            open.owed = None;
            return match body {
                Ok(body) if body.is_empty() => {
                    Err(UpstreamError::Protocol("empty answer to a request".into()))
                }
                Ok(body) => decode_reply(&body),
                Err(error) => Err(error),
            };
        }
        let (first, first_step) = oneshot::channel();
        let reader = Reader {
            response,
            decoder: sse::Decoder::with_limit(self.max_response_bytes),
            standalone,
            queued: VecDeque::new(),
        };
        let exchange = Exchange { open, reader, id, ask: ask.clone(), _permit: permit };
        // The task sends requests of the call: with the call's credentials, when it has any.
        match CALL_CREDENTIALS.try_with(Applied::clone) {
            Ok(applied) => tokio::spawn(CALL_CREDENTIALS.scope(applied, exchange.run(first))),
            Err(_) => tokio::spawn(exchange.run(first)),
        };
        match first_step.await {
            Ok(Step::Done(done)) => reply_of(done),
            Ok(Step::Asks { question, answer }) => {
                let asked = ask.exchanges.hold(&ask.binding, question, answer);
                Ok(UpstreamReply::Result(RawResult::new(asked)))
            }
            Err(_) => Err(UpstreamError::Protocol("the exchange ended without an answer".into())),
        }
    }
}

/// A held call's final step as the transport's reply.
pub fn reply_of(done: Final) -> Result<UpstreamReply, UpstreamError> {
    match done? {
        Ok(raw) => Ok(UpstreamReply::Result(RawResult::new(raw))),
        Err(error) => Ok(UpstreamReply::Error(error)),
    }
}

/// A call's own session, and the call's id while its answer is owed: dropped, it tells the
/// server (`notifications/cancelled`) and ends the session (`DELETE`), in the background.
struct Open {
    inner: Arc<Inner>,
    session: LegacySession,
    owed: Option<u64>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let timeout = Duration::from_secs(2);
        let cancel = self.owed.take().map(|id| {
            let params = json!({"requestId": id, "reason": "cancelled by the gateway (the caller went away or did not answer)"});
            self.inner
                .build(Method::POST, Headers::Legacy(&self.session))
                .timeout(timeout)
                .body(mcp::encode_notification("notifications/cancelled", Some(params)))
        });
        let delete = self
            .session
            .session_id
            .is_some()
            .then(|| self.inner.build(Method::DELETE, Headers::Legacy(&self.session)).timeout(timeout));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(cancel) = cancel {
                    let _ = cancel.send().await;
                }
                if let Some(delete) = delete {
                    let _ = delete.send().await;
                }
            });
        }
    }
}

/// The events of a call's answer stream and of its session's standalone stream (`GET`), one
/// at a time.
struct Reader {
    response: Response,
    decoder: sse::Decoder,
    /// The session's standalone stream, while it lasts: a server may send its requests there
    /// rather than on the call's stream (the TypeScript SDK does unless told the related
    /// request). The session is the call's alone, so whatever comes there is for it.
    standalone: Option<(Response, sse::Decoder)>,
    queued: VecDeque<sse::Event>,
}

impl Reader {
    /// The next event; `None` when the call's answer stream ended.
    async fn next_event(&mut self) -> Result<Option<sse::Event>, UpstreamError> {
        let too_large = |e: sse::TooLarge| UpstreamError::ResponseTooLarge { limit: e.limit };
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Ok(Some(event));
            }
            let Reader { response, decoder, standalone, queued } = self;
            let main = match standalone {
                None => response.chunk().await,
                Some((side, side_decoder)) => tokio::select! {
                    chunk = response.chunk() => chunk,
                    chunk = side.chunk() => {
                        match chunk {
                            Ok(Some(chunk)) => queued.extend(side_decoder.feed(&chunk).map_err(too_large)?),
                            // The standalone stream ended or broke: the call's stream goes on.
                            _ => *standalone = None,
                        }
                        continue;
                    }
                },
            };
            let Some(chunk) = main.map_err(request_error)? else {
                return Ok(None);
            };
            queued.extend(decoder.feed(&chunk).map_err(too_large)?);
        }
    }
}

impl Inner {
    /// The session's standalone stream (`GET`), when the server offers one (a session id, a
    /// `2xx` event stream within 2 s); `None` otherwise.
    async fn standalone_stream(&self, session: &LegacySession) -> Option<(Response, sse::Decoder)> {
        session.session_id.as_ref()?;
        let response = self
            .build(Method::GET, Headers::Legacy(session))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        (response.status().is_success() && is_event_stream(&response))
            .then(|| (response, sse::Decoder::with_limit(self.max_response_bytes)))
    }
}

/// What reading the stream came to.
enum Read {
    Done(Final),
    Asks { method: &'static str, params: Value, upstream_id: Value },
}

/// What the gateway does with one request of the server.
enum Decision {
    /// Answered by the gateway (`result` or `error` member).
    Local(&'static str, Value),
    /// A question for the caller (2026-07-28 params).
    Ask(&'static str, Value),
}

/// One held call: its session, its answer stream, whose questions it asks.
struct Exchange {
    open: Open,
    reader: Reader,
    /// The call's JSON-RPC id in its session.
    id: u64,
    ask: Asker,
    /// Its place among the open held calls (`inbound.max_held_exchanges`).
    _permit: OwnedSemaphorePermit,
}

impl Exchange {
    /// Reads the stream to each step and tells it to whoever waits (`next`), until the call
    /// ends or nobody waits any more.
    async fn run(mut self, mut next: oneshot::Sender<Step>) {
        let mut asked = 0u32;
        loop {
            let read = tokio::select! {
                read = self.read_step(&mut asked) => read,
                () = next.closed() => return,
            };
            let (method, params, upstream_id) = match read {
                Read::Done(done) => {
                    if done.is_ok() {
                        self.open.owed = None;
                    }
                    let _ = next.send(Step::Done(done));
                    let Exchange { reader, .. } = self;
                    drain(reader.response);
                    return;
                }
                Read::Asks { method, params, upstream_id } => (method, params, upstream_id),
            };
            let ttl = self.ask.exchanges.ttl();
            let expires = crate::clock::after(ttl);
            let (answer, answered) = oneshot::channel();
            let question = Question { method, params, expires };
            if next.send(Step::Asks { question, answer }).is_err() {
                self.unanswered(upstream_id, "the client went away before it was asked").await;
                return;
            }
            match tokio::time::timeout_at(expires.into(), answered).await {
                Ok(Ok(Answer { result, next: following })) => {
                    let sent = self
                        .open
                        .inner
                        .answer_upstream(&self.open.session, upstream_id, "result", result)
                        .await;
                    if let Err(error) = sent {
                        let _ = following.send(Step::Done(Err(error)));
                        return;
                    }
                    next = following;
                }
                Ok(Err(_)) => {
                    self.unanswered(upstream_id, "the client went away before it answered").await;
                    return;
                }
                Err(_) => {
                    tracing::info!(url = %self.open.inner.log_url, method, "a held question expired unanswered");
                    let reason = format!("the client did not answer within {} ms", ttl.as_millis());
                    self.unanswered(upstream_id, &reason).await;
                    return;
                }
            }
        }
    }

    /// Answers the server's request with the error of a question nobody answered.
    async fn unanswered(&self, upstream_id: Value, reason: &str) {
        let error = json!({"code": UNANSWERED, "message": reason});
        let _ = self.open.inner.answer_upstream(&self.open.session, upstream_id, "error", error).await;
    }

    /// Reads on to the call's answer or the next question, answering what is not one.
    async fn read_step(&mut self, asked: &mut u32) -> Read {
        loop {
            let event = match self.reader.next_event().await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    return Read::Done(Err(UpstreamError::Protocol(
                        "event stream ended without an answer".into(),
                    )));
                }
                Err(error) => return Read::Done(Err(error)),
            };
            if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                continue;
            }
            let Ok(mut message) = serde_json::from_str::<Value>(&event.data) else { continue };
            if let Some(method) = message.get("method").and_then(Value::as_str).map(str::to_string) {
                // A notification (progress, log entries): not relayed here.
                let Some(upstream_id) = message.get_mut("id").map(Value::take) else { continue };
                match self.decide(&method, message.get("params"), *asked) {
                    Decision::Ask(method, params) => {
                        *asked += 1;
                        return Read::Asks { method, params, upstream_id };
                    }
                    Decision::Local(member, value) => {
                        let session = &self.open.session;
                        if let Err(error) =
                            self.open.inner.answer_upstream(session, upstream_id, member, value).await
                        {
                            return Read::Done(Err(error));
                        }
                    }
                }
                continue;
            }
            let answers_us = message.get("id").is_some_and(|v| v.as_u64() == Some(self.id));
            if answers_us && (message.get("result").is_some() || message.get("error").is_some()) {
                let parsed = serde_json::from_str::<UpstreamResponse>(&event.data)
                    .map_err(|e| UpstreamError::Protocol(format!("invalid JSON-RPC response: {e}")));
                return Read::Done(parsed.and_then(reply_from).map(|reply| match reply {
                    UpstreamReply::Result(raw) => Ok(raw.into_raw()),
                    UpstreamReply::Error(error) => Err(error),
                }));
            }
        }
    }

    /// A question for the caller, or the gateway's own answer.
    fn decide(&self, method: &str, params: Option<&Value>, asked: u32) -> Decision {
        if method == "ping" {
            return Decision::Local("result", json!({}));
        }
        let shown: String = method.chars().take(64).collect();
        let Some(askable) = ASKABLE.into_iter().find(|m| *m == method).filter(|m| self.ask.allows(m)) else {
            let message = format!("the client did not declare the capability {shown} needs");
            return Decision::Local("error", json!({"code": -32601, "message": message}));
        };
        if asked >= MAX_RELAYED_PER_CALL {
            let message =
                format!("the gateway asks a client at most {MAX_RELAYED_PER_CALL} questions per call");
            return Decision::Local("error", json!({"code": -32603, "message": message}));
        }
        match mrtr::input_request_params(askable, params) {
            Some(params) => Decision::Ask(askable, params),
            None => {
                let message = format!("{shown} lacks what a 2026-07-28 client needs to be asked it");
                Decision::Local("error", json!({"code": -32602, "message": message}))
            }
        }
    }
}
