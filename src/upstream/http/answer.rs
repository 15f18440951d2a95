//! A 2xx answer of a streamable-HTTP server: JSON, or an SSE stream. In a stream, the message
//! carrying the request's id is the answer and every other message reaches [`read_stream`]'s
//! one place for them: `notifications/progress` and `notifications/message` go to the call's
//! sinks when it has them ([`ProgressRelay`]), the rest is skipped. Dropping the future closes
//! the stream, which is how a modern-era call is cancelled; a session-era call also gets
//! `notifications/cancelled`.
//!
//! **Resumable streams** (SEP-1699, session era): a stream that ends before the answer after
//! the server gave its events ids is picked up again with `GET` + `Last-Event-ID` (and the
//! session id), after the server's `retry:` time ([`DEFAULT_RETRY`] without one), at most
//! [`MAX_RECONNECTS`] times and never past the caller's deadline; a refused reconnection ends
//! the call. A modern-era stream is not resumed (the revision has no GET stream). The
//! reconnected streams of one answer are bounded together by `max_response_bytes`.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};

use super::{
    Headers, Inner, LegacySession,
    body::{drain, is_event_stream, read_body},
    client::Response,
    errors::{request_error, status_error},
};
use crate::{
    backchannel::subscriptions::ProgressRelay,
    protocol::{jsonrpc::UpstreamResponse, sse},
    upstream::{UpstreamError, UpstreamReply, decode_reply, reply_from},
};

/// Most reconnections of one answer stream (SEP-1699); the caller's deadline bounds them too.
pub const MAX_RECONNECTS: u32 = 5;

/// The wait before a reconnection when the stream gave no `retry:` field.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The longest `retry:` wait honoured (a larger one is clamped; the deadline still applies).
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How an answer stream that ended early is picked up again (session era only).
pub(super) struct Resume<'a> {
    pub(super) inner: &'a Inner,
    pub(super) session: &'a LegacySession,
    /// The caller's deadline: no reconnection wait runs past it.
    pub(super) deadline: Option<Instant>,
}

/// What a stream reader carries from one connection of an answer stream to the next.
#[derive(Default)]
struct StreamPosition {
    last_event_id: Option<String>,
    retry: Option<Duration>,
    /// Bytes read on reconnections so far (together bounded by `max_response_bytes`).
    resumed_bytes: usize,
}

/// Reads a 2xx answer: JSON, or an SSE stream up to the message with our id (progress and log
/// entries for it before that go to `relay`), reconnecting a stream that ends early when
/// `resume` allows it (see the module docs).
pub(super) async fn read_answer(
    response: Response,
    id: u64,
    limit: usize,
    resume: Option<Resume<'_>>,
    relay: Option<&ProgressRelay>,
) -> Result<UpstreamReply, UpstreamError> {
    if !is_event_stream(&response) {
        let body = read_body(response, limit).await?;
        if body.is_empty() {
            return Err(UpstreamError::Protocol("empty answer to a request".into()));
        }
        return decode_reply(&body);
    }
    // Boxed: the stream's state would double the size of every call's future, JSON or not.
    Box::pin(read_answer_stream(response, id, limit, resume, relay)).await
}

/// [`read_answer`] for an event stream.
async fn read_answer_stream(
    mut response: Response,
    id: u64,
    limit: usize,
    resume: Option<Resume<'_>>,
    relay: Option<&ProgressRelay>,
) -> Result<UpstreamReply, UpstreamError> {
    let mut position = StreamPosition::default();
    let mut reconnects = 0;
    loop {
        if let Some(reply) =
            read_stream(&mut response, id, limit, &mut position, reconnects > 0, relay).await?
        {
            drain(response);
            return reply;
        }
        let ended = if reconnects == 0 {
            "event stream ended without an answer".to_string()
        } else {
            format!("event stream ended without an answer after {reconnects} reconnection(s)")
        };
        let (Some(resume), Some(last_event_id)) = (&resume, position.last_event_id.clone()) else {
            return Err(UpstreamError::Protocol(ended));
        };
        // A reconnection whose connection fails (a server restarting during a deploy) is
        // tried again after the same wait, within the same count.
        loop {
            if reconnects >= MAX_RECONNECTS {
                return Err(UpstreamError::Protocol(format!("{ended}; no more reconnections")));
            }
            let wait = position.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
            if resume.deadline.is_some_and(|d| crate::clock::after(wait) >= d) {
                return Err(UpstreamError::Protocol(format!(
                    "{ended}; reconnecting in {} ms would pass the caller's deadline",
                    wait.as_millis()
                )));
            }
            tokio::time::sleep(wait).await;
            reconnects += 1;
            tracing::debug!(url = %resume.inner.log_url, last_event_id, reconnects, "resuming an answer stream");
            match resume.inner.reconnect(resume.session, &last_event_id).await {
                Ok(next) => {
                    response = next;
                    break;
                }
                Err(UpstreamError::Connect(_)) => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

/// Reads one connection of an answer stream: `Some` at the message answering `id`, `None`
/// when the connection ends first. `position` keeps the last event id and `retry` time.
async fn read_stream(
    response: &mut Response,
    id: u64,
    limit: usize,
    position: &mut StreamPosition,
    resumed: bool,
    relay: Option<&ProgressRelay>,
) -> Result<Option<Result<UpstreamReply, UpstreamError>>, UpstreamError> {
    let mut decoder = sse::Decoder::with_limit(limit);
    while let Some(chunk) = response.chunk().await.map_err(request_error)? {
        if resumed {
            position.resumed_bytes = position.resumed_bytes.saturating_add(chunk.len());
            if position.resumed_bytes > limit {
                return Err(UpstreamError::ResponseTooLarge { limit });
            }
        }
        let events = decoder.feed(&chunk).map_err(|e| UpstreamError::ResponseTooLarge { limit: e.limit });
        // The position counts what was complete before an error too.
        if let Some(last) = decoder.last_event_id().filter(|v| !v.is_empty()) {
            position.last_event_id = Some(last.to_string());
        }
        if let Some(ms) = decoder.retry_ms() {
            position.retry = Some(Duration::from_millis(ms));
        }
        for event in events? {
            if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                continue;
            }
            // Every message of the stream other than the answer (progress and log entries for the
            // call, other notifications, requests from the server) is seen here: the call's
            // relay takes what is for it, the rest is skipped.
            if let Some(relay) = relay {
                relay.offer(&event.data);
            }
            let Ok(message) = serde_json::from_str::<UpstreamResponse>(&event.data) else {
                continue;
            };
            let answers_us = message.id.as_ref().is_some_and(|v| v.as_u64() == Some(id));
            if answers_us && (message.result.is_some() || message.error.is_some()) {
                return Ok(Some(reply_from(message)));
            }
        }
    }
    Ok(None)
}

impl Inner {
    /// The reconnection `GET` of a session-era answer stream (SEP-1699).
    async fn reconnect(
        &self,
        session: &LegacySession,
        last_event_id: &str,
    ) -> Result<Response, UpstreamError> {
        let response = self
            .build(Method::GET, Headers::Resume(session, last_event_id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(match status {
                // A server without a GET stream (405) or without the session any more: the
                // answer is lost, which is not the server failing.
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => {
                    UpstreamError::Protocol(format!(
                        "the server refused to resume the answer stream (HTTP {status})"
                    ))
                }
                _ => status_error(status, response.headers()),
            });
        }
        if !is_event_stream(&response) {
            return Err(UpstreamError::Protocol("the resumed answer is not an event stream".into()));
        }
        Ok(response)
    }
}
