//! Streamable HTTP with a back-channel: a `tools/call` of a caller that can answer
//! server→client requests ([`crate::backchannel::relay`]) goes over a DEDICATED session-era
//! session opened for (that caller's session, this server).
//!
//! Why dedicated: the server decides what to ask by the capabilities its client declared, and
//! the gateway's shared session (or the sessionless modern era, which has no back-channel for
//! requests) declares none. So the dedicated session's `initialize` states the caller's own
//! capabilities and clientInfo, then `notifications/initialized`; its id is kept in the
//! caller's session and ended with `DELETE` when that ends. A server that refuses the session
//! era (an error or a modern-only answer to `initialize`) is remembered for the caller and its
//! calls take the normal path; a handshake that fails for want of an answer (connect, 5xx,
//! credentials) fails the call as the normal path would.
//!
//! While the answer stream is read, a message with `method` and `id` is a request from the
//! server: answered by the gateway itself when it is a `ping` or not for this caller (`-32601`
//! for a capability it did not declare), else relayed to the caller; the answer is POSTed
//! back in the session with the server's own id, and reading goes on to the result. A
//! dedicated session the server forgot (`404`) is opened again once when nothing was relayed
//! yet. Answers are bounded as on the normal path (`max_response_bytes` per SSE line and
//! event); a dedicated stream is not resumed after a disconnection (the caller may have been
//! asked something: the call fails instead of being replayed).

use std::sync::atomic::Ordering;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{
    Headers, Inner, LegacySession,
    answer::read_answer,
    body::{ERROR_BODY_PREFIX, drain, is_event_stream, read_body, read_prefix},
    client::Response,
    errors::{request_error, status_error},
    probe::legacy_version,
    request::{CancelOnDrop, with_outbound},
};
use crate::{
    backchannel::{
        Relay,
        caller::{Dedicated, EndSession},
        subscriptions::ProgressRelay,
    },
    protocol::{
        jsonrpc::UpstreamResponse,
        mcp::{self, Era},
        sse,
    },
    upstream::{UpstreamError, UpstreamReply, UpstreamRequest, decode_reply, reply_from},
};

/// What one POST in a dedicated session produced.
enum Posted {
    Done(Result<UpstreamReply, UpstreamError>),
    /// The server no longer knows the session (`404`).
    SessionGone,
}

impl Inner {
    /// Runs `request` over the caller's dedicated session; `None` when this server refuses the
    /// session era (the caller then takes the normal path).
    pub(super) async fn relay_call(
        &self,
        request: &UpstreamRequest,
        relay: &Relay,
    ) -> Option<Result<UpstreamReply, UpstreamError>> {
        for _ in 0..2 {
            let session = match self.dedicated(relay).await {
                Ok(Some(session)) => session,
                Ok(None) => return None,
                Err(error) => return Some(Err(error)),
            };
            match self.post_relayed(request, relay, &session).await {
                Posted::Done(result) => return Some(result),
                Posted::SessionGone if !relay.relayed() => {
                    tracing::info!(url = %self.log_url, caller = %crate::redact::session_tag(&relay.caller.id), "dedicated upstream session gone; opening a new one");
                    relay.caller.upstream.lock().await.remove(&self.key());
                }
                Posted::SessionGone => break,
            }
        }
        Some(Err(UpstreamError::Protocol("the server forgot the dedicated session (HTTP 404)".into())))
    }

    /// Dedicated sessions are kept by the server's URL (a server rebuilt at the same URL is the
    /// same server; a session it forgot is opened again, see above).
    fn key(&self) -> String {
        self.url.to_string()
    }

    /// The caller's dedicated session with this server, opened on first use.
    async fn dedicated(&self, relay: &Relay) -> Result<Option<LegacySession>, UpstreamError> {
        let mut opened = relay.caller.upstream.lock().await;
        if relay.caller.is_closed() {
            // Ended meanwhile: nothing can be relayed any more, and nothing may be opened for it.
            return Ok(None);
        }
        match opened.get(&self.key()) {
            Some(Dedicated::Open { session_id, version, .. }) => {
                return Ok(Some(LegacySession { session_id: session_id.clone(), version }));
            }
            Some(Dedicated::Refused) => return Ok(None),
            None => {}
        }
        let entry = match self.open_dedicated(relay).await? {
            Some(session) => {
                let close = session.session_id.as_ref().map(|_| {
                    let delete = self
                        .build(Method::DELETE, Headers::Legacy(&session))
                        .timeout(std::time::Duration::from_secs(2));
                    let end: EndSession = Box::pin(async move {
                        let _ = delete.send().await;
                    });
                    end
                });
                tracing::info!(url = %self.log_url, caller = %crate::redact::session_tag(&relay.caller.id), version = session.version, "dedicated upstream session opened");
                Dedicated::Open { session_id: session.session_id, version: session.version, close }
            }
            None => {
                tracing::info!(url = %self.log_url, caller = %crate::redact::session_tag(&relay.caller.id), "server refuses the session era; relayed calls take the normal path");
                Dedicated::Refused
            }
        };
        let session = match &entry {
            Dedicated::Open { session_id, version, .. } => {
                Some(LegacySession { session_id: session_id.clone(), version })
            }
            Dedicated::Refused => None,
        };
        opened.insert(self.key(), entry);
        Ok(session)
    }

    /// `initialize` with the caller's capabilities and clientInfo, then
    /// `notifications/initialized`. `Ok(None)`: the server refuses the session era.
    async fn open_dedicated(&self, relay: &Relay) -> Result<Option<LegacySession>, UpstreamError> {
        let caller = &relay.caller;
        self.open_session(&caller.capabilities, &caller.client_info, caller.protocol_version).await
    }

    /// A session of its own for one client: `initialize` stating `capabilities` and
    /// `client_info` at `version`, then `notifications/initialized`. `Ok(None)`: the server
    /// refuses the session era.
    pub(super) async fn open_session(
        &self,
        capabilities: &Value,
        client_info: &Value,
        version: &str,
    ) -> Result<Option<LegacySession>, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": capabilities,
                "clientInfo": client_info,
            },
        });
        let response = self
            .build(Method::POST, Headers::Handshake)
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return match status {
                StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    Err(status_error(status, response.headers()))
                }
                s if s.is_server_error() => Err(status_error(status, response.headers())),
                _ => Ok(None),
            };
        }
        let session_id = response.headers().get(mcp::headers::SESSION_ID).cloned();
        let version = match read_answer(response, id, self.max_response_bytes, None, None).await {
            Ok(UpstreamReply::Result(raw)) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| v.get("protocolVersion").and_then(Value::as_str).map(str::to_string)),
            Ok(UpstreamReply::Error(_)) | Err(UpstreamError::Protocol(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        let Some(version) = legacy_version(version.as_deref()) else {
            return Ok(None);
        };
        let session = LegacySession { session_id, version };
        self.send_initialized(&session).await?;
        Ok(Some(session))
    }

    /// One POST of `request` in the dedicated session, relaying what the server asks.
    async fn post_relayed(
        &self,
        request: &UpstreamRequest,
        relay: &Relay,
        session: &LegacySession,
    ) -> Posted {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (patch, progress) = request.notifications_relay(id, Era::Legacy);
        let body = mcp::encode_patched_request(id, request.method, &request.params, Era::Legacy, &patch);
        let builder =
            with_outbound(self.build(Method::POST, Headers::Legacy(session)).body(body), &request.outbound);
        let mut cancel = CancelOnDrop { pending: Some((self, session, id)) };
        let response = match builder.send().await {
            Ok(response) => response,
            Err(error) => {
                cancel.disarm();
                return Posted::Done(Err(request_error(error)));
            }
        };
        let status = response.status();
        if !status.is_success() {
            cancel.disarm();
            if status == StatusCode::NOT_FOUND && session.session_id.is_some() {
                return Posted::SessionGone;
            }
            return Posted::Done(refused_answer(response).await);
        }
        let answer = if is_event_stream(&response) {
            self.read_relaying(response, id, relay, session, request, progress.as_ref()).await
        } else {
            match read_body(response, self.max_response_bytes).await {
                Ok(body) if body.is_empty() => {
                    Err(UpstreamError::Protocol("empty answer to a request".into()))
                }
                Ok(body) => decode_reply(&body),
                Err(error) => Err(error),
            }
        };
        cancel.disarm();
        Posted::Done(answer)
    }

    /// Reads an answer stream up to the message answering `id`, relaying the server's requests.
    async fn read_relaying(
        &self,
        mut response: Response,
        id: u64,
        relay: &Relay,
        session: &LegacySession,
        request: &UpstreamRequest,
        progress: Option<&ProgressRelay>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let limit = self.max_response_bytes;
        let mut decoder = sse::Decoder::with_limit(limit);
        while let Some(chunk) = response.chunk().await.map_err(request_error)? {
            let events =
                decoder.feed(&chunk).map_err(|e| UpstreamError::ResponseTooLarge { limit: e.limit })?;
            for event in events {
                if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                    continue;
                }
                if let Some(progress) = progress {
                    progress.offer(&event.data);
                }
                let Ok(mut message) = serde_json::from_str::<Value>(&event.data) else { continue };
                if let Some(method) = message.get("method").and_then(Value::as_str).map(str::to_string) {
                    if let Some(upstream_id) = message.get_mut("id").map(Value::take) {
                        let params = message.get_mut("params").map(Value::take);
                        self.answer_server_request(relay, session, request, &method, upstream_id, params)
                            .await?;
                    }
                    continue;
                }
                let answers_us = message.get("id").is_some_and(|v| v.as_u64() == Some(id));
                if answers_us && (message.get("result").is_some() || message.get("error").is_some()) {
                    drain(response);
                    let parsed: UpstreamResponse = serde_json::from_str(&event.data)
                        .map_err(|e| UpstreamError::Protocol(format!("invalid JSON-RPC response: {e}")))?;
                    return reply_from(parsed);
                }
            }
        }
        Err(UpstreamError::Protocol("event stream ended without an answer".into()))
    }

    /// Answers one request of the server: by the gateway, or by relaying it to the caller.
    async fn answer_server_request(
        &self,
        relay: &Relay,
        session: &LegacySession,
        request: &UpstreamRequest,
        method: &str,
        upstream_id: Value,
        params: Option<Value>,
    ) -> Result<(), UpstreamError> {
        let (member, value) = match relay.local_answer(method) {
            Some(answer) => answer,
            None => {
                tracing::info!(url = %self.log_url, caller = %crate::redact::session_tag(&relay.caller.id), method, "relaying a server request to the caller");
                relay.ask(method, params, request.deadline).await?
            }
        };
        self.answer_upstream(session, upstream_id, member, value).await
    }

    /// POSTs the JSON-RPC answer (`member`: `result` or `error`) to the server's request
    /// `upstream_id` in `session`.
    pub(super) async fn answer_upstream(
        &self,
        session: &LegacySession,
        upstream_id: Value,
        member: &str,
        value: Value,
    ) -> Result<(), UpstreamError> {
        let mut answer = serde_json::Map::new();
        answer.insert("jsonrpc".into(), json!("2.0"));
        answer.insert("id".into(), upstream_id);
        answer.insert(member.into(), value);
        let sent = self
            .build(Method::POST, Headers::Legacy(session))
            .body(serde_json::to_vec(&answer).unwrap_or_default())
            .send()
            .await
            .map_err(request_error)?;
        if !sent.status().is_success() {
            return Err(status_error(sent.status(), sent.headers()));
        }
        Ok(())
    }
}

/// A non-success answer to a POST in a session: a 4xx (but 401, 403, 429) whose body is a
/// JSON-RPC error is that error, passed on; anything else is the status's failure.
pub(super) async fn refused_answer(response: Response) -> Result<UpstreamReply, UpstreamError> {
    let status = response.status();
    let failed = status_error(status, response.headers());
    if !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS)
    {
        return Err(failed);
    }
    let body = read_prefix(response, ERROR_BODY_PREFIX).await;
    let parsed = serde_json::from_slice::<UpstreamResponse>(&body).ok();
    match parsed.and_then(|p| reply_from(p).ok()) {
        Some(reply @ UpstreamReply::Error(_)) => Ok(reply),
        _ => Err(failed),
    }
}
