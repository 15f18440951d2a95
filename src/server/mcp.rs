//! `POST /mcp`: the HTTP edge of the MCP endpoint. Checks what must be checked before any
//! JSON is read (size, protocol version header; `Host` and `Origin` were checked for every
//! route by [`super::edge`]), decodes single or batch JSON-RPC,
//! hands each message to [`super::dispatch`], and writes the answer: JSON, or `202` with no
//! body when everything was a notification. Every refusal has a JSON-RPC error body.
//!
//! A single `tools/call` carrying `_meta.progressToken` from a caller whose `Accept` names
//! `text/event-stream` is answered with an event stream ([`super::stream`]): progress, then the
//! response. Everything else is JSON: a caller accepting only JSON gets no progress, and a
//! batch is answered as one JSON array (its items relay no progress). Upstream log entries
//! (`notifications/message`) are relayed the same way to a `tools/call` caller accepting
//! event streams, at the level it asked for ([`dispatch::log_level`]); without a progress token
//! the answer commits to an event stream only when an entry arrives before the response, so a
//! call that logs nothing is still answered with JSON. A single request the caller cancelled
//! gets an empty event stream when it accepts one, else the `cancelled` error.
//!
//! Back-channel sessions ([`super::sessions`]): an `initialize` declaring sampling, elicitation
//! or roots gets an `Mcp-Session-Id`; that caller's `tools/call` accepting event streams may
//! carry relayed server→client requests on its stream, and the caller POSTs its answers back.

use std::sync::Arc;

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{
    dispatch::{self, RequestInfo},
    sessions, stream,
};
use crate::{
    backchannel::{CallerSession, LogSubscription, Notifications, Relay, progress_channel},
    error::{Category, GatewayError},
    gateway::Gateway,
    protocol::{
        jsonrpc::{self, Inbound},
        mcp,
    },
};

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Takes the whole request: the headers are moved out of it (axum's `HeaderMap` extractor
/// would copy them on every call).
pub async fn post(State(gateway): State<Arc<Gateway>>, request: axum::extract::Request) -> Response {
    let peer =
        request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0);
    post_from(gateway, peer, request).await
}

/// `POST /mcp` from a known TCP peer (the connection's own service calls this directly).
pub async fn post_from(
    gateway: Arc<Gateway>,
    peer: Option<std::net::SocketAddr>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let request_id = request_id(&parts.headers);
    let endpoint = super::endpoint::of(&parts.extensions);
    let response = handle(&gateway, &parts.headers, body, &request_id, peer, endpoint).await;
    with_request_id(response, &request_id)
}

async fn handle(
    gateway: &Arc<Gateway>,
    headers: &HeaderMap,
    body: Body,
    request_id: &str,
    peer: Option<std::net::SocketAddr>,
    endpoint: Option<Arc<str>>,
) -> Response {
    // Who is calling, before any of the body is read: a refused request costs nothing more.
    let caller = match super::caller::establish(gateway, headers, peer).await {
        Ok(caller) => super::endpoint::through(caller, endpoint),
        Err(refused) => return refused,
    };
    // One configuration for the whole request, whatever a reload swaps in meanwhile.
    let config = gateway.config();
    let limit = config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let drain_cap = limit.saturating_mul(4).max(DRAIN_MIN);
    if declared.is_some_and(|len| len > drain_cap) {
        return too_large(gateway, limit);
    }
    let read_timeout = config.inbound.body_read_timeout();
    let bytes: Bytes = match tokio::time::timeout(read_timeout, read_limited(body, limit, drain_cap)).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return too_large(gateway, limit),
        Err(_) => return body_too_slow(gateway, read_timeout),
    };
    if let Some(version) = headers.get(mcp::headers::names::PROTOCOL_VERSION) {
        let version = version.to_str().unwrap_or_default();
        if !mcp::is_supported(version) {
            gateway.record_rejection("unsupported_protocol_version");
            let err = GatewayError::new(Category::UnsupportedProtocolVersion, format!("{version:?}"))
                .with_extra("supported", json!(mcp::supported_versions()));
            return error_response(StatusCode::BAD_REQUEST, &err);
        }
    }
    // A back-channel session (see `sessions`): an unknown one of ours, or one another subject
    // opened, is refused, and a POSTed response goes to the relayed request waiting for it.
    // Requests without one: as always.
    let lookup = gateway.sessions().lookup(headers, &caller);
    let verified = lookup.verified();
    let (session, unknown_session) = match lookup {
        sessions::Lookup::Sessionless | sessions::Lookup::Listen(_) => (None, false),
        sessions::Lookup::Found(session) => (Some(session), false),
        sessions::Lookup::Unknown => (None, true),
    };
    if let Some(session) = &session
        && let Some((id, message)) = sessions::as_response(&bytes)
    {
        return sessions::route_response(session, &id, message);
    }
    let inbound = match jsonrpc::decode_bounded(&bytes, config.inbound.max_batch_items) {
        Ok(inbound) => inbound,
        Err(err) => {
            let reason = if err.category == Category::ParseError { "parse_error" } else { "batch_too_large" };
            gateway.record_rejection(reason);
            return error_response(StatusCode::BAD_REQUEST, &err);
        }
    };
    // An unknown session is 404, except for the `initialize` that starts a new one.
    if unknown_session && !matches!(&inbound, Inbound::Single(Ok(m)) if m.method == "initialize") {
        return sessions::unknown_session();
    }
    let mut info = RequestInfo::from_headers(headers, request_id, caller).owned_through(verified.as_ref());
    info.session_apps =
        session.as_ref().is_some_and(|s| crate::protocol::extensions::negotiates_apps(Some(&s.capabilities)));
    // The dispatch futures are boxed where they are awaited: inline, the largest of them would
    // set the size of this request's future, which is copied whole at every level above it.
    match inbound {
        Inbound::Single(Ok(message)) if sessions::wants_back_channel(&message) => {
            let caller = message.clone();
            match Box::pin(dispatch::entry(gateway, Ok(message), &info, Notifications::default())).await {
                // Only an initialize that succeeded opens a session.
                Some(answer) if answer.body.is_ok() => match gateway.sessions().create(&caller, &info.caller)
                {
                    Ok(session) => sessions::with_session_id(answer_response(&answer), &session),
                    Err(refusal) => sessions::refused(gateway, answer.id.clone(), &refusal),
                },
                Some(answer) if answer.is_protocol_refusal() => {
                    let mut response = answer_response(&answer);
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    response
                }
                Some(answer) => answer_response(&answer),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
        // A modern caller's change stream (`listen`).
        Inbound::Single(Ok(message)) if super::listen::is_listen(gateway, &message) => {
            super::listen::subscribe(gateway, message, &info).await
        }
        // A session-era `initialize` that opened no back-channel session gets a stateless
        // listen id, so it can open the GET stream of list changes (`listen`).
        Inbound::Single(Ok(message))
            if message.method == "initialize"
                && message.id.is_some()
                && gateway.lists_changes()
                && !mcp::is_modern(message.params.as_ref()) =>
        {
            match Box::pin(dispatch::entry(gateway, Ok(message), &info, Notifications::default())).await {
                Some(answer) if answer.body.is_ok() => {
                    super::listen::with_listen_id(answer_response(&answer), &info.caller)
                }
                Some(answer) => answer_response(&answer),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
        Inbound::Single(Ok(message))
            if info.accepts_sse && dispatch::protocol_error(&message, &info).is_none() =>
        {
            for_event_stream_reader(gateway, message, info, session).await
        }
        Inbound::Single(entry) => {
            match Box::pin(dispatch::entry(gateway, entry, &info, Notifications::default())).await {
                // The modern revision answers its own protocol errors with HTTP 400.
                Some(answer) if answer.is_protocol_refusal() => {
                    let mut response = answer_response(&answer);
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    response
                }
                Some(answer) => answer_response(&answer),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
        Inbound::Batch(entries) => {
            // Items run concurrently and fail alone; answers keep request order.
            let answers: Vec<_> = join_all(
                entries.into_iter().map(|e| dispatch::entry(gateway, e, &info, Notifications::default())),
            )
            .await
            .into_iter()
            .flatten()
            .collect();
            if answers.is_empty() {
                StatusCode::ACCEPTED.into_response()
            } else {
                batch_response(gateway, &answers)
            }
        }
    }
}

/// One message (no protocol refusal) from a caller accepting event streams. A `tools/call`
/// that may relay something is run with sinks: with a progress token the answer is an event
/// stream at once; with log entries only, it becomes one when an entry arrives before the
/// response, else it stays JSON.
async fn for_event_stream_reader(
    gateway: &Arc<Gateway>,
    message: jsonrpc::Message,
    info: RequestInfo,
    session: Option<Arc<CallerSession>>,
) -> Response {
    let token = dispatch::progress_token(&message).cloned();
    let log_level = if message.method == "tools/call" { dispatch::log_level(&message) } else { None };
    // A back-channel caller's tools/call may relay server→client requests on its stream.
    // So may a tasks/result: a task waiting for input asks on that stream (2025-11-25).
    let session = session
        .filter(|_| matches!(message.method.as_str(), "tools/call" | "tasks/result") && message.id.is_some());
    if token.is_none() && log_level.is_none() && session.is_none() {
        return answer_for_event_stream_reader(
            Box::pin(dispatch::entry(gateway, Ok(message), &info, Notifications::default())).await,
        );
    }
    let (sink, mut received) = progress_channel();
    let notifications = Notifications {
        progress: token.is_some().then(|| sink.clone()),
        logs: log_level.map(|min_level| LogSubscription { sink: sink.clone(), min_level }),
        relay: session.map(|caller| Relay {
            counter: Some(gateway.relayed_requests_counter()),
            ..Relay::new(caller, sink.clone())
        }),
        ask: None,
    };
    drop(sink);
    let gateway = gateway.clone();
    let mut call: stream::Call =
        Box::pin(async move { dispatch::entry(&gateway, Ok(message), &info, notifications).await });
    if token.is_some() {
        return stream::response(call, received, token, None);
    }
    tokio::select! {
        biased;
        Some(first) = received.recv() => stream::response(call, received, None, Some(first)),
        answer = &mut call => answer_for_event_stream_reader(answer),
    }
}

/// JSON, except that a cancelled request gets an empty event stream (no response).
fn answer_for_event_stream_reader(answer: Option<jsonrpc::Response>) -> Response {
    match answer {
        Some(answer) if dispatch::is_cancelled(&answer) => stream::empty(),
        // Written from its segments like any JSON answer: a shared `tools/list` is not copied.
        Some(answer) => answer_response(&answer),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// Oversized bodies up to this size are read and discarded before the 413, so the client
/// finishes sending and reads the answer instead of seeing the connection reset.
const DRAIN_MIN: usize = 8 * 1024 * 1024;

/// Reads at most `limit` bytes; `None` when the body is larger (what follows, up to
/// `drain_cap`, is read and dropped within a second).
async fn read_limited(body: Body, limit: usize, drain_cap: usize) -> Option<Bytes> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        if kept.len() + chunk.len() > limit {
            let mut seen = kept.len() + chunk.len();
            let drain = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    seen += chunk.len();
                    if seen > drain_cap {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
            return None;
        }
        kept.extend_from_slice(&chunk);
    }
    Some(kept.freeze())
}

/// `GET`/`DELETE /mcp` without a session of the gateway's (or with list-change streams off).
pub async fn not_allowed() -> Response {
    let mut response = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &GatewayError::new(
            Category::InvalidRequest,
            "use POST; this endpoint keeps no sessions and no server stream",
        ),
    );
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

/// `DELETE /mcp`: ends a back-channel session (and the upstream sessions opened for it) or a
/// listen id, and the change streams opened under either — only for the subject that opened it
/// (another's is `404`, as unknown: [`crate::ownership`]). Without one of the gateway's session
/// ids there is nothing to end: `405`.
pub async fn delete(State(gateway): State<Arc<Gateway>>, request: axum::extract::Request) -> Response {
    let peer =
        request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0);
    let headers = request.headers();
    let caller = match super::caller::establish(&gateway, headers, peer).await {
        Ok(caller) => super::endpoint::through(caller, super::endpoint::of(request.extensions())),
        Err(refused) => return refused,
    };
    match gateway.sessions().lookup(headers, &caller) {
        sessions::Lookup::Found(session) => {
            gateway.sessions().end(&session.id);
            gateway.listeners().close_session(&session.id);
            gateway.end_session_subscriptions(&session.id);
            StatusCode::NO_CONTENT.into_response()
        }
        sessions::Lookup::Listen(id) => {
            gateway.listeners().close_session(&id);
            gateway.end_session_subscriptions(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        sessions::Lookup::Unknown => sessions::unknown_session(),
        sessions::Lookup::Sessionless => not_allowed().await,
    }
}

/// `408` for a body not read within `inbound.body_read_timeout_ms`; the connection is closed
/// after the answer (what is left of the body is never read).
fn body_too_slow(gateway: &Gateway, timeout: std::time::Duration) -> Response {
    gateway.record_rejection("body_read_timeout");
    let err = GatewayError::new(
        Category::InvalidRequest,
        format!("the request body was not received within {} ms", timeout.as_millis()),
    )
    .with_limit("inbound.body_read_timeout_ms", timeout.as_millis() as u64);
    let mut response = error_response(StatusCode::REQUEST_TIMEOUT, &err);
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn too_large(gateway: &Gateway, limit: usize) -> Response {
    gateway.record_rejection("payload_too_large");
    let err = GatewayError::new(Category::PayloadTooLarge, format!("the body exceeds {limit} bytes"));
    error_response(StatusCode::PAYLOAD_TOO_LARGE, &err)
}

fn error_response(status: StatusCode, err: &GatewayError) -> Response {
    let body = jsonrpc::Response::error(Value::Null, err);
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

/// A batch's answers as one JSON array, at most `inbound.max_batch_answer_bytes` of them: an
/// answer that would pass the bound is replaced by a `-32600` error under its id.
fn batch_response(gateway: &Gateway, answers: &[jsonrpc::Response]) -> Response {
    let limit = gateway.config().inbound.max_batch_answer_bytes;
    let mut body = Vec::with_capacity(256);
    body.push(b'[');
    for (index, answer) in answers.iter().enumerate() {
        if index > 0 {
            body.push(b',');
        }
        let start = body.len();
        let written = serde_json::to_writer(&mut body, answer);
        if written.is_err() || body.len() > limit {
            body.truncate(start);
            gateway.record_rejection("batch_answer_too_large");
            let err = GatewayError::new(
                Category::InvalidRequest,
                format!("the batch's answers exceed {limit} bytes; send this request alone"),
            )
            .with_limit("inbound.max_batch_answer_bytes", limit as u64);
            let _ = serde_json::to_writer(&mut body, &jsonrpc::Response::error(answer.id.clone(), &err));
        }
    }
    body.push(b']');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// One answer as an HTTP response; a shared result (`tools/list`) goes out without a copy.
fn answer_response(answer: &jsonrpc::Response) -> Response {
    match answer.encode() {
        Ok(segments) => {
            ([(header::CONTENT_TYPE, "application/json")], Body::new(super::body::Segments::new(segments)))
                .into_response()
        }
        Err(e) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &GatewayError::new(Category::Internal, format!("serializing the answer: {e}")),
        ),
    }
}

/// The caller's `X-Request-Id` when it is sane, else a fresh one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| {
            // 16 hex digits, written without `format!` (this runs for every request).
            let random = fastrand::u64(..);
            (0..16)
                .rev()
                .map(|i| char::from(b"0123456789abcdef"[(random >> (i * 4)) as usize & 0xf]))
                .collect()
        })
}

fn with_request_id(mut response: Response, request_id: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
