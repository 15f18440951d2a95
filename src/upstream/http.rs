//! Streamable HTTP: the ECS-hosted MCP servers.
//!
//! Each server is tried in the modern (2026-07-28) era first — `_meta` on the request,
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, no handshake. A server that
//! answers `400` without a recognisable modern JSON-RPC error is a session-era server: the
//! transport then runs `initialize` → `notifications/initialized`, keeps the `Mcp-Session-Id`,
//! remembers the era for that server, and replays the request. A `404` on a session-era
//! request means the session expired: the transport re-initializes once and replays.
//! Answers may be JSON or an SSE stream; in a stream, the message carrying the request's id is
//! the answer and everything before it (progress notifications) is skipped. Dropping the
//! future closes the stream, which is how a modern-era call is cancelled.
//!
//! Answers are bounded while they are read, never after: a JSON body by its `Content-Length`
//! up front and by counting chunks, an SSE stream per line and per event, both at the server's
//! `max_response_bytes` ([`UpstreamError::ResponseTooLarge`]); a 4xx body is read only up to
//! [`ERROR_BODY_PREFIX`] (enough for a JSON-RPC error), a 5xx body not at all. Time is bounded
//! by the layers around the transport: the attempt timeout covers the body, not just the
//! headers, so a body that drips or a stream that never answers ends as a timeout.
//!
//! Modern-era `tools/call` requests mirror the arguments the tool's `inputSchema` marks with
//! `x-mcp-header` into `Mcp-Param-{Name}` headers ([`UpstreamRequest::param_headers`]).

use std::{
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use reqwest::{
    Client, StatusCode, Url,
    header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
};
use serde_json::Value;
use tower::Service;

use super::{
    UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest, decode_reply, parse_retry_after,
    reply_from,
};
use crate::protocol::{
    jsonrpc::UpstreamResponse,
    mcp::{self, Era, headers},
    param_headers, sse,
};
use crate::telemetry::otel::Outbound;

/// What the transport knows about a server's era.
#[derive(Debug, Clone)]
enum EraState {
    /// Not yet talked to: try modern, fall back to legacy.
    Unknown,
    Modern,
    Legacy(LegacySession),
}

#[derive(Debug, Clone)]
struct LegacySession {
    /// `None` for a session-era server that does not use sessions.
    session_id: Option<HeaderValue>,
    version: &'static str,
    /// Bumped at every (re-)initialization, so concurrent 404s re-initialize once.
    generation: u64,
}

/// Settings of one streamable-HTTP server.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub url: Url,
    pub connect_timeout: Duration,
    /// Static headers (e.g. authorization) sent on every request.
    pub headers: HeaderMap,
    /// Most bytes one answer may occupy (`max_response_bytes`).
    pub max_response_bytes: usize,
}

/// How much of a 4xx body is read for its JSON-RPC error; the rest is never read.
pub const ERROR_BODY_PREFIX: usize = 64 * 1024;

/// A streamable-HTTP MCP server.
#[derive(Clone)]
pub struct HttpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    url: Url,
    headers: HeaderMap,
    max_response_bytes: usize,
    era: RwLock<EraState>,
    /// Serializes (re-)initialization.
    init: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

impl HttpTransport {
    pub fn new(settings: HttpSettings) -> Result<Self, UpstreamError> {
        let client = Client::builder()
            .connect_timeout(settings.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(512)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| UpstreamError::Protocol(format!("HTTP client: {e}")))?;
        let mut base = settings.headers;
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        base.insert(ACCEPT, HeaderValue::from_static(headers::ACCEPT_BOTH));
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                url: settings.url,
                headers: base,
                max_response_bytes: settings.max_response_bytes,
                era: RwLock::new(EraState::Unknown),
                init: tokio::sync::Mutex::new(()),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The era this server was found to speak (`None` before the first exchange).
    pub fn era(&self) -> Option<Era> {
        match self.inner.era_state() {
            EraState::Unknown => None,
            EraState::Modern => Some(Era::Modern),
            EraState::Legacy(_) => Some(Era::Legacy),
        }
    }

    /// Ends the legacy session, if any (`DELETE` with the session id), e.g. on shutdown.
    pub async fn close(&self) {
        if let EraState::Legacy(LegacySession { session_id: Some(id), .. }) = self.inner.era_state() {
            let _ = self
                .inner
                .client
                .delete(self.inner.url.clone())
                .header(headers::SESSION_ID, id)
                .timeout(Duration::from_secs(1))
                .send()
                .await;
        }
    }
}

impl Service<UpstreamRequest> for HttpTransport {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.call(request).await })
    }
}

/// What one POST produced.
enum Exchange {
    Reply(UpstreamReply),
    /// `400` from a server that does not understand the modern era.
    NotModern,
    /// `404` on a request that carried a session id.
    SessionExpired,
}

impl Inner {
    fn era_state(&self) -> EraState {
        self.era.read().map(|e| e.clone()).unwrap_or(EraState::Unknown)
    }

    fn set_era(&self, state: EraState) {
        if let Ok(mut era) = self.era.write() {
            *era = state;
        }
    }

    async fn call(&self, request: UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        match self.era_state() {
            EraState::Modern => match self.post(&request, None).await? {
                Exchange::Reply(reply) => Ok(reply),
                // A server that changed eras under us (redeployed): learn again.
                Exchange::NotModern | Exchange::SessionExpired => self.fall_back(&request, 0).await,
            },
            EraState::Unknown => match self.post(&request, None).await? {
                Exchange::Reply(reply) => {
                    self.set_era(EraState::Modern);
                    tracing::info!(url = %self.url, era = "2026-07-28", "upstream speaks the modern era");
                    Ok(reply)
                }
                Exchange::NotModern | Exchange::SessionExpired => self.fall_back(&request, 0).await,
            },
            EraState::Legacy(session) => self.call_legacy(&request, session).await,
        }
    }

    async fn fall_back(
        &self,
        request: &UpstreamRequest,
        seen_generation: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        let session = self.initialize(seen_generation).await?;
        self.call_legacy(request, session).await
    }

    async fn call_legacy(
        &self,
        request: &UpstreamRequest,
        session: LegacySession,
    ) -> Result<UpstreamReply, UpstreamError> {
        match self.post(request, Some(&session)).await? {
            Exchange::Reply(reply) => Ok(reply),
            Exchange::SessionExpired | Exchange::NotModern => {
                tracing::info!(url = %self.url, "upstream session expired; re-initializing once");
                let renewed = self.initialize(session.generation).await?;
                match self.post(request, Some(&renewed)).await? {
                    Exchange::Reply(reply) => Ok(reply),
                    Exchange::SessionExpired | Exchange::NotModern => {
                        Err(UpstreamError::Status { status: 404 })
                    }
                }
            }
        }
    }

    /// Runs the session-era handshake unless another task already did since `seen_generation`.
    async fn initialize(&self, seen_generation: u64) -> Result<LegacySession, UpstreamError> {
        let _guard = self.init.lock().await;
        if let EraState::Legacy(current) = self.era_state()
            && current.generation > seen_generation
        {
            return Ok(current);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(mcp::encode_initialize(id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(status, response.headers()));
        }
        let session_id = response.headers().get(headers::SESSION_ID).cloned();
        let reply = read_answer(response, id, self.max_response_bytes).await?;
        let version = match &reply {
            UpstreamReply::Result(raw) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| v.get("protocolVersion").and_then(Value::as_str).map(str::to_string)),
            UpstreamReply::Error(e) => {
                return Err(UpstreamError::Protocol(format!("initialize failed: {} {}", e.code, e.message)));
            }
        };
        let version = mcp::LEGACY_VERSIONS
            .iter()
            .find(|v| Some(**v) == version.as_deref())
            .copied()
            .ok_or_else(|| {
                UpstreamError::Protocol(format!("upstream chose an unsupported protocol version {version:?}"))
            })?;
        let generation = seen_generation.max(match self.era_state() {
            EraState::Legacy(s) => s.generation,
            _ => 0,
        }) + 1;
        let session = LegacySession { session_id, version, generation };
        let mut notify = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(mcp::encode_notification("notifications/initialized", None));
        notify = legacy_headers(notify, &session);
        let notified = notify.send().await.map_err(request_error)?;
        if !notified.status().is_success() {
            return Err(status_error(notified.status(), notified.headers()));
        }
        tracing::info!(url = %self.url, version, session = session.session_id.is_some(), "upstream speaks the session era");
        self.set_era(EraState::Legacy(session.clone()));
        Ok(session)
    }

    /// One POST of `request` in the era given by `session` (`None` = modern).
    async fn post(
        &self,
        request: &UpstreamRequest,
        session: Option<&LegacySession>,
    ) -> Result<Exchange, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let era = if session.is_some() { Era::Legacy } else { Era::Modern };
        let mut builder = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(mcp::encode_request(id, request.method, &request.params, era));
        // Trace context (also in `_meta`) and the caller's request id: see telemetry::otel.
        for (name, value) in Outbound::of(&request.params).headers() {
            builder = builder.header(name, value);
        }
        builder = match session {
            Some(session) => legacy_headers(builder, session),
            None => {
                let mut b = builder
                    .header(headers::PROTOCOL_VERSION, mcp::MODERN_VERSION)
                    .header(headers::METHOD, request.method);
                if let Some(tool) = &request.tool {
                    // The spec's value encoding, sentinel-looking names included.
                    b = b.header(headers::NAME, param_headers::encode(tool));
                }
                for (name, value) in &request.param_headers {
                    b = b.header(format!("{}{name}", param_headers::PREFIX), value);
                }
                b
            }
        };
        // A session-era server learns of a dropped call (deadline, caller gone) by notification;
        // a modern-era call is cancelled by closing its stream, which dropping does.
        let mut cancel = session.map(|s| CancelOnDrop {
            client: self.client.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            session: s.clone(),
            id,
            armed: true,
        });
        let response = builder.send().await.map_err(request_error)?;
        let status = response.status();
        if status.is_success() {
            let answer = read_answer(response, id, self.max_response_bytes).await.map(Exchange::Reply);
            if let Some(cancel) = cancel.as_mut() {
                cancel.armed = false;
            }
            return answer;
        }
        if let Some(cancel) = cancel.as_mut() {
            cancel.armed = false;
        }
        match status {
            StatusCode::NOT_FOUND if session.is_some_and(|s| s.session_id.is_some()) => {
                Ok(Exchange::SessionExpired)
            }
            StatusCode::TOO_MANY_REQUESTS => Err(status_error(status, response.headers())),
            s if s.is_server_error() => Err(status_error(status, response.headers())),
            _ => {
                let retry = status_error(status, response.headers());
                let body = read_prefix(response, ERROR_BODY_PREFIX).await;
                let parsed = serde_json::from_slice::<UpstreamResponse>(&body).ok();
                let with_session = session.is_some_and(|s| s.session_id.is_some());
                if with_session
                    && status == StatusCode::BAD_REQUEST
                    && complains_about_session(parsed.as_ref())
                {
                    // Some servers (the TypeScript SDK's examples) answer an unknown session
                    // with 400 "No valid session ID" instead of 404.
                    return Ok(Exchange::SessionExpired);
                }
                let may_be_legacy = matches!(
                    status,
                    StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
                );
                if session.is_none() && may_be_legacy && !is_modern_rejection(parsed.as_ref()) {
                    return Ok(Exchange::NotModern);
                }
                // A JSON-RPC error in a 4xx body is the server's answer to the request.
                match parsed.and_then(|p| reply_from(p).ok()) {
                    Some(reply @ UpstreamReply::Error(_)) => Ok(Exchange::Reply(reply)),
                    _ => Err(retry),
                }
            }
        }
    }
}

/// A JSON-RPC error whose message is about the session id.
fn complains_about_session(response: Option<&UpstreamResponse>) -> bool {
    response
        .and_then(|r| r.error.as_ref())
        .is_some_and(|e| e.message.to_ascii_lowercase().contains("session"))
}

/// Sends `notifications/cancelled` for a session-era request dropped before its answer.
struct CancelOnDrop {
    client: Client,
    url: Url,
    headers: HeaderMap,
    session: LegacySession,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let params = serde_json::json!({"requestId": self.id, "reason": "cancelled by the gateway (deadline or caller gone)"});
        let request = legacy_headers(
            self.client
                .post(self.url.clone())
                .headers(self.headers.clone())
                .timeout(Duration::from_secs(2))
                .body(mcp::encode_notification("notifications/cancelled", Some(params))),
            &self.session,
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = request.send().await;
            });
        }
    }
}

/// A modern server refuses a request with one of the revision's own errors: `-32020`
/// (header mismatch), `-32021` (missing client capability), or `-32022` (unsupported version)
/// listing the modern version among those it supports. Anything else in a 400/404/405 means
/// the server predates the modern era.
///
/// A standard JSON-RPC error (`-32601`…`-32603`, `-32700`) in such a status is the modern
/// server's answer to this request (e.g. `-32602` for an unknown tool) and is kept as one;
/// session-era transports refuse a request without a session with `-32000` (TypeScript SDK)
/// or `-32600` (Python SDK 1.x): "Bad Request: No valid session ID".
fn is_modern_rejection(response: Option<&UpstreamResponse>) -> bool {
    let Some(error) = response.and_then(|r| r.error.as_ref()) else {
        return false;
    };
    match error.code {
        -32020 | -32021 | -32603..=-32601 | -32700 => true,
        -32022 => error
            .data
            .as_ref()
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|versions| versions.iter().any(|v| v == mcp::MODERN_VERSION)),
        _ => false,
    }
}

fn legacy_headers(builder: reqwest::RequestBuilder, session: &LegacySession) -> reqwest::RequestBuilder {
    let mut builder = builder;
    // The header exists from 2025-06-18 on.
    if session.version >= "2025-06-18" {
        builder = builder.header(headers::PROTOCOL_VERSION, session.version);
    }
    if let Some(id) = &session.session_id {
        builder = builder.header(HeaderName::from_static(headers::SESSION_ID), id.clone());
    }
    builder
}

/// Reads a 2xx answer: JSON, or an SSE stream up to the message with our id.
async fn read_answer(
    mut response: reqwest::Response,
    id: u64,
    limit: usize,
) -> Result<UpstreamReply, UpstreamError> {
    let is_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !is_stream {
        let body = read_body(response, limit).await?;
        if body.is_empty() {
            return Err(UpstreamError::Protocol("empty answer to a request".into()));
        }
        return decode_reply(&body);
    }
    let mut decoder = sse::Decoder::with_limit(limit);
    while let Some(chunk) = response.chunk().await.map_err(request_error)? {
        let events = decoder.feed(&chunk).map_err(|e| UpstreamError::ResponseTooLarge { limit: e.limit })?;
        for event in events {
            if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                continue;
            }
            let Ok(message) = serde_json::from_str::<UpstreamResponse>(&event.data) else {
                continue;
            };
            let answers_us = message.id.as_ref().is_some_and(|v| v.as_u64() == Some(id));
            if answers_us && (message.result.is_some() || message.error.is_some()) {
                drain(response);
                return reply_from(message);
            }
        }
    }
    Err(UpstreamError::Protocol("event stream ended without an answer".into()))
}

/// Reads a whole body of at most `limit` bytes: refused up front by `Content-Length`, else at
/// the chunk that crosses the limit (dropping the response then closes the connection).
async fn read_body(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, UpstreamError> {
    let declared = response.content_length().unwrap_or(0);
    if declared > limit as u64 {
        return Err(UpstreamError::ResponseTooLarge { limit });
    }
    let mut body = Vec::with_capacity(declared as usize);
    while let Some(chunk) = response.chunk().await.map_err(request_error)? {
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::ResponseTooLarge { limit });
        }
        if body.len() + chunk.len() > body.capacity() && body.len() > 64 * 1024 {
            // One growth to the cap instead of doubling (see `sse::Decoder::reserve`).
            body.reserve_exact(limit - body.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `limit` bytes of a body (or all of a shorter one); read errors end it early.
async fn read_prefix(mut response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]),
            _ => break,
        }
    }
    body
}

/// Reads the rest of an answered stream in the background. Servers end a request's stream
/// right after its answer; closing it early instead would look like a client disconnect,
/// which some session-era servers treat as the end of the session, and would cost the
/// pooled connection.
fn drain(mut response: reqwest::Response) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let mut left: usize = 1 << 20;
            while let Ok(Some(chunk)) = response.chunk().await {
                left = left.saturating_sub(chunk.len());
                if left == 0 {
                    break;
                }
            }
        })
        .await;
    });
}

fn status_error(status: StatusCode, headers: &HeaderMap) -> UpstreamError {
    match status {
        StatusCode::TOO_MANY_REQUESTS => UpstreamError::RateLimited {
            retry_after: headers
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after),
        },
        StatusCode::NOT_FOUND => UpstreamError::NotFound("the MCP endpoint answered 404".into()),
        status => UpstreamError::Status { status: status.as_u16() },
    }
}

fn request_error(error: reqwest::Error) -> UpstreamError {
    // A connect error — refused, or the connect timeout — provably never sent the request, so
    // it is checked before `is_timeout`, which a connect timeout also satisfies.
    if error.is_connect() {
        UpstreamError::Connect(root_cause(&error))
    } else if error.is_timeout() {
        UpstreamError::Timeout(Duration::ZERO)
    } else {
        UpstreamError::Io(root_cause(&error))
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
