//! Streamable HTTP: the ECS-hosted MCP servers.
//!
//! **Era detection** follows the 2026-07-28 revision's backward-compatibility rule. The first
//! call to a server of unknown era probes it with `server/discover` (modern shape: `_meta`,
//! `MCP-Protocol-Version`, `Mcp-Method`). Only a result whose `supportedVersions` lists
//! 2026-07-28 makes it modern; any other answer — a JSON-RPC error, a non-JSON-RPC body, a 4xx,
//! a result without that version (what a lenient session-era server answers) — makes the
//! transport run `initialize` → `notifications/initialized`, keep the `Mcp-Session-Id`, and
//! speak the session era. A probe that gets no answer about the era (connect error, timeout,
//! 429, 5xx) fails the call with that error and learns nothing: the next call probes again.
//! The era is remembered per server. When a server later refuses it — a session-era `404`
//! (expired session) or `400` "no valid session", a `-32022` unsupported-version error not
//! listing the version sent, a modern request answered `400`/`404`/`405` without one of the
//! revision's own errors — the transport probes once more and replays the call once; a second
//! refusal fails the call. Probes are serialized per server and counted by a generation, so
//! concurrent refusals re-probe once.
//!
//! **Answers** may be JSON or an SSE stream; in a stream, the message carrying the request's
//! id is the answer and every other message reaches [`read_stream`]'s one place for them:
//! `notifications/progress` and `notifications/message` go to the call's sinks when it has
//! them ([`super::progress`]), the rest is skipped. Dropping the future closes the stream,
//! which is how a modern-era call is cancelled; a session-era call also gets
//! `notifications/cancelled`.
//!
//! **Resumable streams** (SEP-1699, session era): a stream that ends before the answer after
//! the server gave its events ids is picked up again with `GET` + `Last-Event-ID` (and the
//! session id), after the server's `retry:` time ([`DEFAULT_RETRY`] without one), at most
//! [`MAX_RECONNECTS`] times and never past the caller's deadline; a refused reconnection ends
//! the call. A modern-era stream is not resumed (the revision has no GET stream).
//!
//! **Credentials**: `401`/`403` on any request — probe, handshake, call, reconnection — is
//! [`UpstreamError::Unauthorized`]: not retried, not counted by the breaker, no era learned.
//! A server with `[servers.NAME.auth]` ([`super::credentials`]) gets its credentials once per
//! call, before anything is sent; every request built while the call runs carries them (they
//! are in scope for the call's task, [`CALL_CREDENTIALS`]), and a SigV4 signature is computed
//! over each request as it leaves. A `401` with an OAuth token renews the token once and runs
//! the call once more; a second `401` fails the call.
//!
//! Answers are bounded while they are read, never after: a JSON body by its `Content-Length`
//! up front and by counting chunks, an SSE stream per line and per event, both at the server's
//! `max_response_bytes` ([`UpstreamError::ResponseTooLarge`]), and the reconnected streams of
//! one answer together by the same limit; a 4xx body is read only up to
//! [`ERROR_BODY_PREFIX`] (enough for a JSON-RPC error), a 5xx body not at all. Time is bounded
//! by the layers around the transport: the attempt timeout covers the probe and the body, not
//! just the headers, so a body that drips or a stream that never answers ends as a timeout.
//!
//! **Server→client requests** of a back-channel caller's `tools/call` (sampling, elicitation,
//! roots) are relayed over a dedicated session-era session: see `http_relay.rs`.
//!
//! Modern-era `tools/call` requests mirror the arguments the tool's `inputSchema` marks with
//! `x-mcp-header` into `Mcp-Param-{Name}` headers ([`UpstreamRequest::param_headers`]). Every
//! request's headers are built in one place ([`Inner::build`]).

use std::{
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use http::{
    Method, StatusCode, Uri,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER},
};
use serde_json::Value;
use tower::Service;

use super::{
    UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest,
    credentials::{Applied, Credentials},
    decode_reply,
    http_client::{ClientError, HttpClient, RequestBuilder, Response},
    outbound::Outbound,
    parse_retry_after,
    progress::ProgressRelay,
    reply_from,
};
use crate::protocol::{
    jsonrpc::{ErrorObject, UpstreamResponse},
    mcp::{self, Era, headers},
    param_headers, sse,
};

/// A back-channel caller's calls over a dedicated session, relaying server→client requests.
#[path = "http_relay.rs"]
mod relay;

/// The era a server was found to speak.
#[derive(Debug, Clone)]
enum Spoken {
    Modern,
    Legacy(LegacySession),
}

/// What the transport knows about a server's era, and how often it learned it.
#[derive(Debug, Clone, Default)]
struct Learned {
    /// `None`: not yet learned (or the last probe failed): the next call probes.
    spoken: Option<Spoken>,
    /// Bumped at every successful probe, so concurrent refusals re-probe once.
    generation: u64,
}

#[derive(Debug, Clone)]
struct LegacySession {
    /// `None` for a session-era server that does not use sessions.
    session_id: Option<HeaderValue>,
    version: &'static str,
}

/// Settings of one streamable-HTTP server.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub url: reqwest::Url,
    pub connect_timeout: Duration,
    /// Static headers (e.g. authorization) sent on every request.
    pub headers: HeaderMap,
    /// Most bytes one answer may occupy (`max_response_bytes`).
    pub max_response_bytes: usize,
    /// Credentials obtained per call (`[servers.NAME.auth]`); `None`: static headers only.
    pub credentials: Option<Credentials>,
}

tokio::task_local! {
    /// The credentials of the call running on this task: [`Inner::build`] adds them to every
    /// request the call sends (probe, handshake, the call, reconnections, its cancellation).
    static CALL_CREDENTIALS: Applied;
}

/// How much of a 4xx body is read for its JSON-RPC error; the rest is never read.
pub const ERROR_BODY_PREFIX: usize = 64 * 1024;

/// Most reconnections of one answer stream (SEP-1699); the caller's deadline bounds them too.
pub const MAX_RECONNECTS: u32 = 5;

/// The wait before a reconnection when the stream gave no `retry:` field.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The longest `retry:` wait honoured (a larger one is clamped; the deadline still applies).
const MAX_RETRY: Duration = Duration::from_secs(30);

/// A streamable-HTTP MCP server.
#[derive(Clone)]
pub struct HttpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    client: HttpClient,
    /// The MCP endpoint, parsed once.
    url: Uri,
    /// The endpoint as logs may show it (user-info and query values redacted).
    pub(super) log_url: Box<str>,
    headers: HeaderMap,
    max_response_bytes: usize,
    credentials: Option<Credentials>,
    era: RwLock<Learned>,
    /// Serializes probes (`server/discover`, then `initialize` if needed).
    probe: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

/// The `Host` header hyper-util writes when a request has none (the host, and the port unless
/// it is the scheme's default), made once per server instead of formatted on every request.
fn host_header(url: &Uri) -> Option<HeaderValue> {
    let host = url.host()?;
    let secure = matches!(url.scheme_str(), Some("https" | "wss"));
    match url.port_u16() {
        Some(port) if !(port == 443 && secure || port == 80 && !secure) => {
            HeaderValue::from_str(&format!("{host}:{port}")).ok()
        }
        _ => HeaderValue::from_str(host).ok(),
    }
}

impl HttpTransport {
    pub fn new(settings: HttpSettings) -> Result<Self, UpstreamError> {
        let tls = super::tls::client_config()
            .map_err(|e| UpstreamError::Protocol(format!("TLS client configuration: {e}")))?;
        let client = HttpClient::new(settings.connect_timeout, &tls);
        let url = Uri::try_from(settings.url.as_str()).map_err(|e| {
            UpstreamError::Protocol(format!(
                "MCP endpoint {}: {e}",
                crate::redact::url(settings.url.as_str())
            ))
        })?;
        let mut headers = settings.headers;
        if let Some(host) = host_header(&url)
            && !headers.contains_key(HOST)
        {
            headers.insert(HOST, host);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                log_url: crate::redact::url(&url.to_string()).into(),
                url,
                headers,
                max_response_bytes: settings.max_response_bytes,
                credentials: settings.credentials,
                era: RwLock::new(Learned::default()),
                probe: tokio::sync::Mutex::new(()),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// The era this server was found to speak (`None` before the first successful probe).
    pub fn era(&self) -> Option<Era> {
        match self.inner.learned().spoken {
            None => None,
            Some(Spoken::Modern) => Some(Era::Modern),
            Some(Spoken::Legacy(_)) => Some(Era::Legacy),
        }
    }

    /// Ends the legacy session, if any (`DELETE` with the session id), e.g. on shutdown.
    pub async fn close(&self) {
        if let Some(Spoken::Legacy(session)) = self.inner.learned().spoken
            && session.session_id.is_some()
        {
            let delete = async {
                let _ = self
                    .inner
                    .build(Method::DELETE, Headers::Legacy(&session))
                    .timeout(Duration::from_secs(1))
                    .send()
                    .await;
            };
            match &self.inner.credentials {
                None => delete.await,
                Some(credentials) => match credentials.for_call(None).await {
                    Ok(applied) => CALL_CREDENTIALS.scope(applied, delete).await,
                    Err(_) => delete.await,
                },
            }
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
        if inner.credentials.is_some() {
            return Box::pin(async move { inner.call_with_credentials(request).await });
        }
        Box::pin(async move { inner.call(&request).await })
    }
}

/// What one POST produced.
enum Exchange {
    Reply(UpstreamReply),
    /// The server refused the era the request was sent in; the error is what the caller gets
    /// if it refuses again after a re-probe.
    Refused(UpstreamError),
}

/// Why a probe learned nothing.
enum ProbeError {
    /// No usable answer (transport failure, refused credentials, a handshake not understood).
    Failed(UpstreamError),
    /// The server answered `initialize` with its own failure: passed on as its answer.
    Answered(ErrorObject),
}

impl From<UpstreamError> for ProbeError {
    fn from(error: UpstreamError) -> Self {
        ProbeError::Failed(error)
    }
}

/// The era-specific headers of one request (see [`Inner::build`]).
enum Headers<'a> {
    /// A modern request: version, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
    Modern { method: &'static str, tool: Option<&'a str>, params: &'a [(String, String)] },
    /// `initialize`: no version header, no session yet.
    Handshake,
    /// A session-era request: the negotiated version (2025-06-18 on) and the session id.
    Legacy(&'a LegacySession),
    /// A reconnection `GET` of a session-era stream, resuming after the given event id.
    Resume(&'a LegacySession, &'a str),
}

impl Inner {
    fn learned(&self) -> Learned {
        self.era.read().map(|e| e.clone()).unwrap_or_default()
    }

    /// Builds every request to the server: the static headers (credentials), content
    /// negotiation, then the era's headers.
    fn build(&self, method: Method, era: Headers<'_>) -> RequestBuilder {
        // Sized once for the static headers and the era's (no regrowth on the way).
        let mut map = HeaderMap::with_capacity(self.headers.len() + 8);
        for (name, value) in &self.headers {
            map.append(name.clone(), value.clone());
        }
        let applied = match &self.credentials {
            None => None,
            Some(_) => CALL_CREDENTIALS.try_with(Applied::clone).ok(),
        };
        let mut signer = None;
        match applied {
            Some(Applied::Bearer(value)) => {
                map.insert(AUTHORIZATION, value);
            }
            Some(Applied::Signed(sign)) => signer = Some(sign),
            None => {}
        }
        if method == Method::POST {
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let accept = if method == Method::GET { "text/event-stream" } else { headers::ACCEPT_BOTH };
        map.insert(ACCEPT, HeaderValue::from_static(accept));
        let mut builder = self.client.request(method, self.url.clone()).headers(map);
        if let Some(signer) = signer {
            builder = builder.signed_by(signer);
        }
        match era {
            Headers::Modern { method, tool, params } => {
                builder = builder
                    .typed_header(
                        headers::names::PROTOCOL_VERSION,
                        HeaderValue::from_static(mcp::MODERN_VERSION),
                    )
                    .typed_header(headers::names::METHOD, HeaderValue::from_static(method));
                if let Some(tool) = tool {
                    // The spec's value encoding, sentinel-looking names included.
                    builder = builder.header(headers::names::NAME, param_headers::encode(tool));
                }
                for (name, value) in params {
                    builder = builder.header(format!("{}{name}", param_headers::PREFIX), value);
                }
            }
            Headers::Handshake => {}
            Headers::Legacy(session) => builder = legacy_headers(builder, session),
            Headers::Resume(session, last_event_id) => {
                builder = legacy_headers(builder, session).header("last-event-id", last_event_id);
            }
        }
        builder
    }

    /// The rare paths (a relayed call, a probe, the post after a refusal) are boxed where they
    /// are awaited: inlined, their state would make every call's future (copied whole into
    /// its box) twice as large.
    async fn call(&self, request: &UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        if let Some(relay) = &request.relay
            && request.method == "tools/call"
            && let Some(result) = Box::pin(self.relay_call(request, relay)).await
        {
            return result;
        }
        let learned = self.learned();
        let (spoken, generation) = match learned.spoken {
            Some(spoken) => (spoken, learned.generation),
            None => match Box::pin(self.probe(learned.generation)).await {
                Ok(probed) => probed,
                Err(ProbeError::Failed(error)) => return Err(error),
                Err(ProbeError::Answered(error)) => return Ok(UpstreamReply::Error(error)),
            },
        };
        match self.post(request, &spoken).await? {
            Exchange::Reply(reply) => Ok(reply),
            Exchange::Refused(error) => {
                Box::pin(self.after_refusal(request, &spoken, generation, error)).await
            }
        }
    }

    /// [`Inner::call`] for a server with credentials: obtained before anything is sent (none
    /// to be had: the call fails, nothing is sent), in scope for every request of the call;
    /// an OAuth token refused with `401` is renewed once and the call run once more.
    async fn call_with_credentials(&self, request: UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        let Some(credentials) = &self.credentials else {
            return self.call(&request).await;
        };
        let caller = request.caller.as_deref();
        let applied = credentials.for_call(caller).await?;
        let result = CALL_CREDENTIALS.scope(applied.clone(), self.call(&request)).await;
        if !(matches!(result, Err(UpstreamError::Unauthorized { status: 401 }))
            && credentials.renews_on_401())
        {
            return result;
        }
        tracing::info!(url = %self.url, "upstream refused the token (HTTP 401); renewing it and trying once more");
        credentials.refused(caller, &applied);
        let renewed = credentials.for_call(caller).await?;
        CALL_CREDENTIALS.scope(renewed, self.call(&request)).await
    }

    /// The server refused the remembered era: probe again and post once more.
    async fn after_refusal(
        &self,
        request: &UpstreamRequest,
        spoken: &Spoken,
        generation: u64,
        error: UpstreamError,
    ) -> Result<UpstreamReply, UpstreamError> {
        tracing::info!(url = %self.log_url, era = era_label(spoken), reason = %error, "upstream refused the remembered era; probing again");
        let spoken = match self.probe(generation).await {
            Ok((spoken, _)) => spoken,
            Err(ProbeError::Failed(error)) => return Err(error),
            Err(ProbeError::Answered(error)) => return Ok(UpstreamReply::Error(error)),
        };
        match self.post(request, &spoken).await? {
            Exchange::Reply(reply) => Ok(reply),
            Exchange::Refused(error) => Err(error),
        }
    }

    /// Learns the server's era unless another task did since `seen_generation`: `server/discover`,
    /// then `initialize` on any answer that does not show a modern server.
    async fn probe(&self, seen_generation: u64) -> Result<(Spoken, u64), ProbeError> {
        let _guard = self.probe.lock().await;
        let current = self.learned();
        if current.generation > seen_generation
            && let Some(spoken) = current.spoken
        {
            return Ok((spoken, current.generation));
        }
        let learned = match self.discover().await {
            Ok(true) => Ok(Spoken::Modern),
            Ok(false) => self.initialize().await.map(Spoken::Legacy),
            Err(error) => Err(ProbeError::Failed(error)),
        };
        let generation = current.generation + 1;
        if let Ok(mut era) = self.era.write() {
            *era = match &learned {
                Ok(spoken) => Learned { spoken: Some(spoken.clone()), generation },
                // Nothing learned: the next call probes again.
                Err(_) => Learned { spoken: None, generation: current.generation },
            };
        }
        match &learned {
            Ok(Spoken::Modern) => {
                tracing::info!(url = %self.log_url, era = mcp::MODERN_VERSION, "upstream speaks the modern era")
            }
            Ok(Spoken::Legacy(session)) => {
                tracing::info!(url = %self.log_url, version = session.version, session = session.session_id.is_some(), "upstream speaks the session era")
            }
            Err(ProbeError::Failed(error)) => tracing::warn!(url = %self.log_url, %error, "era probe failed"),
            Err(ProbeError::Answered(error)) => {
                tracing::warn!(url = %self.log_url, code = error.code, message = %error.message, "initialize refused")
            }
        }
        learned.map(|spoken| (spoken, generation))
    }

    /// `server/discover`: `Ok(true)` only for a result listing the modern version; `Ok(false)`
    /// for any other answer; `Err` when there was no answer about the era (connection, timeout,
    /// 429, 5xx, an over-limit body) or the credentials were refused.
    async fn discover(&self) -> Result<bool, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .build(Method::POST, Headers::Modern { method: mcp::DISCOVER, tool: None, params: &[] })
            .body(mcp::encode_discover(id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if status.is_success() {
            return match read_answer(response, id, self.max_response_bytes, None, None).await {
                Ok(UpstreamReply::Result(raw)) => {
                    Ok(serde_json::from_str::<Value>(raw.get()).is_ok_and(|r| mcp::shows_modern(&r)))
                }
                Ok(UpstreamReply::Error(_)) | Err(UpstreamError::Protocol(_)) => Ok(false),
                Err(error) => Err(error),
            };
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(status_error(status, response.headers()))
            }
            s if s.is_server_error() => Err(status_error(status, response.headers())),
            _ => Ok(false),
        }
    }

    /// Runs the session-era handshake and returns the session.
    async fn initialize(&self) -> Result<LegacySession, ProbeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .build(Method::POST, Headers::Handshake)
            .body(mcp::encode_initialize(id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(status, response.headers()).into());
        }
        let session_id = response.headers().get(headers::SESSION_ID).cloned();
        let reply = read_answer(response, id, self.max_response_bytes, None, None).await?;
        let version = match &reply {
            UpstreamReply::Result(raw) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| v.get("protocolVersion").and_then(Value::as_str).map(str::to_string)),
            // The server's own failure (internal error, implementation-defined server errors)
            // is its answer to the call; any other error means the handshake is not understood.
            UpstreamReply::Error(e) if e.code == -32603 || (-32099..=-32000).contains(&e.code) => {
                let message = format!("initialize failed: {}", e.message);
                return Err(ProbeError::Answered(ErrorObject { message, ..e.clone() }));
            }
            UpstreamReply::Error(e) => {
                return Err(
                    UpstreamError::Protocol(format!("initialize failed: {} {}", e.code, e.message)).into()
                );
            }
        };
        let version = legacy_version(version.as_deref()).ok_or_else(|| {
            UpstreamError::Protocol(format!("upstream chose an unsupported protocol version {version:?}"))
        })?;
        let session = LegacySession { session_id, version };
        self.send_initialized(&session).await?;
        Ok(session)
    }

    /// Ends a session-era handshake: `notifications/initialized` under the new session.
    async fn send_initialized(&self, session: &LegacySession) -> Result<(), UpstreamError> {
        let notified = self
            .build(Method::POST, Headers::Legacy(session))
            .body(mcp::encode_notification("notifications/initialized", None))
            .send()
            .await
            .map_err(request_error)?;
        if !notified.status().is_success() {
            return Err(status_error(notified.status(), notified.headers()));
        }
        Ok(())
    }

    /// One POST of `request` in the era the server was found to speak.
    async fn post(&self, request: &UpstreamRequest, spoken: &Spoken) -> Result<Exchange, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let session = match spoken {
            Spoken::Modern => None,
            Spoken::Legacy(session) => Some(session),
        };
        let (era, sent_version, era_headers) = match session {
            None => (
                Era::Modern,
                mcp::MODERN_VERSION,
                Headers::Modern {
                    method: request.method,
                    tool: request.tool.as_deref(),
                    params: &request.param_headers,
                },
            ),
            Some(session) => (Era::Legacy, session.version, Headers::Legacy(session)),
        };
        let (patch, relay) = ProgressRelay::outbound(request, id, era);
        let body = mcp::encode_patched_request(id, request.method, &request.params, era, &patch);
        let builder = with_outbound(self.build(Method::POST, era_headers).body(body), &request.outbound);
        // A session-era server learns of a dropped call (deadline, caller gone) by notification;
        // a modern-era call is cancelled by closing its stream, which dropping does.
        let mut cancel = CancelOnDrop { pending: session.map(|session| (self, session, id)) };
        let response = builder.send().await.map_err(request_error)?;
        let status = response.status();
        if status.is_success() {
            let resume = session.map(|session| Resume { inner: self, session, deadline: request.deadline });
            let answer = read_answer(response, id, self.max_response_bytes, resume, relay.as_ref()).await;
            cancel.disarm();
            return match answer? {
                UpstreamReply::Error(e) if refuses(&e, sent_version) => {
                    Ok(Exchange::Refused(UpstreamError::Protocol(format!("{} {}", e.code, e.message))))
                }
                reply => Ok(Exchange::Reply(reply)),
            };
        }
        cancel.disarm();
        let with_session = session.is_some_and(|s| s.session_id.is_some());
        match status {
            // What the caller gets if even a fresh session is refused.
            StatusCode::NOT_FOUND if with_session => Ok(Exchange::Refused(UpstreamError::Protocol(
                "the server refused a fresh session too (HTTP 404 right after a new handshake)".into(),
            ))),
            StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(status_error(status, response.headers()))
            }
            s if s.is_server_error() => Err(status_error(status, response.headers())),
            _ => {
                let failed = status_error(status, response.headers());
                let body = read_prefix(response, ERROR_BODY_PREFIX).await;
                let parsed = serde_json::from_slice::<UpstreamResponse>(&body).ok();
                let error = parsed.as_ref().and_then(|r| r.error.as_ref());
                if status == StatusCode::BAD_REQUEST
                    && session.is_some()
                    && (with_session && complains_about_session(error)
                        || refuses_legacy_version(error, sent_version))
                {
                    // Some servers (the TypeScript SDK's examples) answer an unknown session
                    // with 400 "No valid session ID" instead of 404; a server redeployed
                    // without the session era refuses its version.
                    return Ok(Exchange::Refused(failed));
                }
                let may_be_legacy = matches!(
                    status,
                    StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
                );
                if session.is_none() && may_be_legacy && !is_modern_rejection(parsed.as_ref()) {
                    return Ok(Exchange::Refused(failed));
                }
                // A JSON-RPC error in a 4xx body is the server's answer to the request.
                match parsed.and_then(|p| reply_from(p).ok()) {
                    Some(reply @ UpstreamReply::Error(_)) => Ok(Exchange::Reply(reply)),
                    _ => Err(failed),
                }
            }
        }
    }

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

/// The session-era version a server chose in `initialize`, if the gateway speaks it.
fn legacy_version(chosen: Option<&str>) -> Option<&'static str> {
    mcp::LEGACY_VERSIONS.iter().find(|v| Some(**v) == chosen).copied()
}

fn era_label(spoken: &Spoken) -> &'static str {
    match spoken {
        Spoken::Modern => mcp::MODERN_VERSION,
        Spoken::Legacy(_) => "session",
    }
}

/// An answer refusing the version the request was sent in (`-32022` not listing it).
fn refuses(error: &ErrorObject, sent_version: &str) -> bool {
    mcp::refuses_version(error.code, error.data.as_ref(), sent_version)
}

/// A session-era request refused for its version: `-32022` not listing it, or a
/// session-era SDK's "Unsupported protocol version" (`-32000` from the TypeScript SDK).
fn refuses_legacy_version(error: Option<&ErrorObject>, sent_version: &str) -> bool {
    error.is_some_and(|e| {
        refuses(e, sent_version) || e.message.to_ascii_lowercase().contains("unsupported protocol version")
    })
}

/// A JSON-RPC error whose message is about the session id.
fn complains_about_session(error: Option<&ErrorObject>) -> bool {
    error.is_some_and(|e| e.message.to_ascii_lowercase().contains("session"))
}

/// Sends `notifications/cancelled` for a session-era request dropped before its answer. The
/// notification is built only then: the common case, an answered call, builds nothing.
struct CancelOnDrop<'a> {
    /// The session and id of the request; `None` once the answer came (or modern era).
    pending: Option<(&'a Inner, &'a LegacySession, u64)>,
}

impl CancelOnDrop<'_> {
    fn disarm(&mut self) {
        self.pending = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some((inner, session, id)) = self.pending.take() else {
            return;
        };
        let params = serde_json::json!({"requestId": id, "reason": "cancelled by the gateway (deadline or caller gone)"});
        let request = inner
            .build(Method::POST, Headers::Legacy(session))
            .timeout(Duration::from_secs(2))
            .body(mcp::encode_notification("notifications/cancelled", Some(params)));
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

/// The attempt's trace context (also in `_meta`) and the caller's request id, as headers. A
/// value that cannot be a header value is left out rather than failing the call.
fn with_outbound(mut builder: RequestBuilder, outbound: &Outbound) -> RequestBuilder {
    for (name, value) in outbound.headers() {
        if let Ok(value) = HeaderValue::from_str(value) {
            builder = builder.typed_header(HeaderName::from_static(name), value);
        }
    }
    builder
}

fn legacy_headers(builder: RequestBuilder, session: &LegacySession) -> RequestBuilder {
    let mut builder = builder;
    // The header exists from 2025-06-18 on.
    if session.version >= "2025-06-18" {
        builder =
            builder.typed_header(headers::names::PROTOCOL_VERSION, HeaderValue::from_static(session.version));
    }
    if let Some(id) = &session.session_id {
        builder = builder.typed_header(headers::names::SESSION_ID, id.clone());
    }
    builder
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// How an answer stream that ended early is picked up again (session era only).
struct Resume<'a> {
    inner: &'a Inner,
    session: &'a LegacySession,
    /// The caller's deadline: no reconnection wait runs past it.
    deadline: Option<Instant>,
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
async fn read_answer(
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
            if resume.deadline.is_some_and(|d| Instant::now() + wait >= d) {
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

/// Reads a whole body of at most `limit` bytes: refused up front by `Content-Length`, else at
/// the chunk that crosses the limit (dropping the response then closes the connection).
/// A body that arrives in one piece (most JSON answers) is kept as it came, not copied.
async fn read_body(mut response: Response, limit: usize) -> Result<bytes::Bytes, UpstreamError> {
    let declared = response.content_length().unwrap_or(0);
    if declared > limit as u64 {
        return Err(UpstreamError::ResponseTooLarge { limit });
    }
    let Some(first) = response.chunk().await.map_err(request_error)? else {
        return Ok(bytes::Bytes::new());
    };
    if first.len() > limit {
        return Err(UpstreamError::ResponseTooLarge { limit });
    }
    let Some(second) = response.chunk().await.map_err(request_error)? else {
        return Ok(first);
    };
    let mut body = Vec::with_capacity((declared as usize).max(first.len() + second.len()));
    body.extend_from_slice(&first);
    let mut next = Some(second);
    while let Some(chunk) = next {
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::ResponseTooLarge { limit });
        }
        if body.len() + chunk.len() > body.capacity() && body.len() > 64 * 1024 {
            // One growth to the cap instead of doubling (see `sse::Decoder::reserve`).
            body.reserve_exact(limit - body.len());
        }
        body.extend_from_slice(&chunk);
        next = response.chunk().await.map_err(request_error)?;
    }
    Ok(body.into())
}

/// The first `limit` bytes of a body (or all of a shorter one); read errors end it early.
async fn read_prefix(mut response: Response, limit: usize) -> Vec<u8> {
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
fn drain(mut response: Response) {
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
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            UpstreamError::Unauthorized { status: status.as_u16() }
        }
        StatusCode::TOO_MANY_REQUESTS => UpstreamError::RateLimited {
            retry_after: headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after),
        },
        StatusCode::NOT_FOUND => UpstreamError::NotFound("the MCP endpoint answered 404".into()),
        status => UpstreamError::Status { status: status.as_u16() },
    }
}

fn request_error(error: ClientError) -> UpstreamError {
    // A connect error — refused, TLS refused, or the connect timeout — provably never sent
    // the request.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_header_is_what_hyper_util_would_write() {
        let host = |url: &str| host_header(&Uri::try_from(url).expect("URL")).expect("a host");
        assert_eq!(host("http://127.0.0.1:9000/mcp"), "127.0.0.1:9000");
        assert_eq!(host("http://mcp.internal/mcp"), "mcp.internal");
        assert_eq!(
            host("http://mcp.internal:80/mcp"),
            "mcp.internal",
            "the scheme's default port is left out"
        );
        assert_eq!(host("https://mcp.internal:443/mcp"), "mcp.internal");
        assert_eq!(host("https://mcp.internal:80/mcp"), "mcp.internal:80");
        assert_eq!(host("http://mcp.internal:443/mcp"), "mcp.internal:443");
        assert_eq!(host("http://[::1]:8080/mcp"), "[::1]:8080");
        assert_eq!(
            host("http://user:secret@mcp.internal:9000/mcp"),
            "mcp.internal:9000",
            "never the credentials"
        );
    }
}
