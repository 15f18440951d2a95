//! `POST /mcp`: the HTTP edge of the MCP endpoint. Checks what must be checked before any
//! JSON is read (origin, size, protocol version header), decodes single or batch JSON-RPC,
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
    error::{Category, GatewayError},
    gateway::{Gateway, call::Notifications},
    protocol::{
        jsonrpc::{self, Inbound},
        mcp,
    },
    upstream::{
        progress::LogSubscription,
        relay::{CallerSession, Relay},
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
    let response = handle(&gateway, &parts.headers, body, &request_id, peer).await;
    with_request_id(response, &request_id)
}

async fn handle(
    gateway: &Arc<Gateway>,
    headers: &HeaderMap,
    body: Body,
    request_id: &str,
    peer: Option<std::net::SocketAddr>,
) -> Response {
    if gateway.config.listen.ip().is_loopback()
        && let Some(host) = headers.get(header::HOST)
        && !host_allowed(host, &gateway.config.allowed_origins)
    {
        gateway.metrics.rejections.with_label_values(&["forbidden_host"]).inc();
        let err = GatewayError::new(
            Category::ForbiddenOrigin,
            "the Host header is not a loopback host (DNS rebinding protection)",
        );
        return error_response(StatusCode::FORBIDDEN, &err);
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin_allowed(origin, &gateway.config.allowed_origins)
    {
        gateway.metrics.rejections.with_label_values(&["forbidden_origin"]).inc();
        let err = GatewayError::new(Category::ForbiddenOrigin, "the Origin header is not an allowed origin");
        return error_response(StatusCode::FORBIDDEN, &err);
    }
    let limit = gateway.config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let drain_cap = limit.saturating_mul(4).max(DRAIN_MIN);
    if declared.is_some_and(|len| len > drain_cap) {
        return too_large(gateway, limit);
    }
    let bytes: Bytes = match read_limited(body, limit, drain_cap).await {
        Some(bytes) => bytes,
        None => return too_large(gateway, limit),
    };
    if let Some(version) = headers.get(mcp::headers::names::PROTOCOL_VERSION) {
        let version = version.to_str().unwrap_or_default();
        if !mcp::is_supported(version) {
            gateway.metrics.rejections.with_label_values(&["unsupported_protocol_version"]).inc();
            let err = GatewayError::new(Category::UnsupportedProtocolVersion, format!("{version:?}"))
                .with_extra("supported", json!(mcp::supported_versions()));
            return error_response(StatusCode::BAD_REQUEST, &err);
        }
    }
    // A back-channel session (see `sessions`): an unknown one of ours is refused, and a POSTed
    // response goes to the relayed request waiting for it. Requests without one: as always.
    let (session, unknown_session) = match gateway.sessions.lookup(headers) {
        sessions::Lookup::Sessionless => (None, false),
        sessions::Lookup::Found(session) => (Some(session), false),
        sessions::Lookup::Unknown => (None, true),
    };
    if let Some(session) = &session
        && let Some((id, message)) = sessions::as_response(&bytes)
    {
        return sessions::route_response(session, &id, message);
    }
    let inbound = match jsonrpc::decode(&bytes) {
        Ok(inbound) => inbound,
        Err(err) => {
            gateway.metrics.rejections.with_label_values(&["parse_error"]).inc();
            return error_response(StatusCode::BAD_REQUEST, &err);
        }
    };
    // An unknown session is 404, except for the `initialize` that starts a new one.
    if unknown_session && !matches!(&inbound, Inbound::Single(Ok(m)) if m.method == "initialize") {
        return sessions::unknown_session();
    }
    let caller = Arc::new(crate::identity::Caller::anonymous(peer));
    let info = RequestInfo::from_headers(headers, request_id, caller);
    // The dispatch futures are boxed where they are awaited: inline, the largest of them would
    // set the size of this request's future, which is copied whole at every level above it.
    match inbound {
        Inbound::Single(Ok(message)) if sessions::wants_back_channel(&message) => {
            let caller = message.clone();
            match Box::pin(dispatch::entry(gateway, Ok(message), &info, Notifications::default())).await {
                // Only an initialize that succeeded opens a session.
                Some(answer) if answer.body.is_ok() => {
                    sessions::with_session_id(answer_response(&answer), &gateway.sessions.create(&caller))
                }
                Some(answer) if answer.is_protocol_refusal() => {
                    let mut response = answer_response(&answer);
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    response
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
            if answers.is_empty() { StatusCode::ACCEPTED.into_response() } else { json_response(&answers) }
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
    let session = session.filter(|_| message.method == "tools/call" && message.id.is_some());
    if token.is_none() && log_level.is_none() && session.is_none() {
        return answer_for_event_stream_reader(
            Box::pin(dispatch::entry(gateway, Ok(message), &info, Notifications::default())).await,
        );
    }
    let (sink, mut received) = crate::gateway::call::progress_channel();
    let notifications = Notifications {
        progress: token.is_some().then(|| sink.clone()),
        logs: log_level.map(|min_level| LogSubscription { sink: sink.clone(), min_level }),
        relay: session.map(|caller| Relay {
            counter: Some(gateway.metrics.relayed_requests.clone()),
            ..Relay::new(caller, sink.clone())
        }),
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

/// `GET`/`DELETE /mcp`: the gateway offers no server-initiated stream and keeps no sessions.
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

/// `DELETE /mcp`: ends a back-channel session (and the upstream sessions opened for it). Without
/// one of the gateway's session ids there is nothing to end: `405` as before sessions existed.
pub async fn delete(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    match gateway.sessions.lookup(&headers) {
        sessions::Lookup::Found(session) => {
            gateway.sessions.end(&session.id);
            StatusCode::NO_CONTENT.into_response()
        }
        sessions::Lookup::Unknown => sessions::unknown_session(),
        sessions::Lookup::Sessionless => not_allowed().await,
    }
}

fn too_large(gateway: &Gateway, limit: usize) -> Response {
    gateway.metrics.rejections.with_label_values(&["payload_too_large"]).inc();
    let err = GatewayError::new(Category::PayloadTooLarge, format!("the body exceeds {limit} bytes"));
    error_response(StatusCode::PAYLOAD_TOO_LARGE, &err)
}

fn error_response(status: StatusCode, err: &GatewayError) -> Response {
    let body = jsonrpc::Response::error(Value::Null, err);
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

fn json_response<T: serde::Serialize>(answer: &T) -> Response {
    match serde_json::to_vec(answer) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &GatewayError::new(Category::Internal, format!("serializing the answer: {e}")),
        ),
    }
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

/// Loopback origins are always allowed (the orchestrator and local tools); others only when
/// configured. This is the DNS-rebinding defence the MCP transport spec asks for.
fn origin_allowed(origin: &HeaderValue, allowed: &[String]) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => rest.split(':').next().unwrap_or_default(),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// On a loopback listener, the `Host` must name a loopback host (or the host of a configured
/// origin): a browser page on a rebound name (`evil.example` resolving to 127.0.0.1) sends
/// that name as `Host`, with or without an `Origin`.
fn host_allowed(host: &HeaderValue, allowed_origins: &[String]) -> bool {
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if ["localhost", "127.0.0.1", "::1"].iter().any(|loopback| name.eq_ignore_ascii_case(loopback)) {
        return true;
    }
    allowed_origins.iter().any(|origin| {
        let rest = origin.split_once("://").map_or(origin.as_str(), |(_, r)| r);
        rest.eq_ignore_ascii_case(host)
            || rest.split(':').next().is_some_and(|h| h.eq_ignore_ascii_case(host))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_or_configured_origins_pass() {
        let allowed = vec!["https://shop.example".to_string()];
        for ok in ["http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080", "https://shop.example"] {
            assert!(origin_allowed(&HeaderValue::from_static(ok), &allowed), "{ok}");
        }
        for bad in
            ["https://evil.example", "http://localhost.evil.example", "null", "http://127.0.0.1.nip.io"]
        {
            assert!(!origin_allowed(&HeaderValue::from_static(bad), &allowed), "{bad}");
        }
    }

    #[test]
    fn only_loopback_or_configured_hosts_pass() {
        let allowed = vec!["https://shop.example".to_string()];
        for ok in ["localhost:8080", "127.0.0.1", "[::1]:9", "LOCALHOST", "shop.example"] {
            assert!(host_allowed(&HeaderValue::from_static(ok), &allowed), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example.com:8080", "localhost.evil.example", "127.0.0.2"] {
            assert!(!host_allowed(&HeaderValue::from_static(bad), &allowed), "{bad}");
        }
    }
}
