//! Streamable HTTP: the ECS-hosted MCP servers. This file is the transport's face: its
//! settings, the `tower::Service`, and one call's path (a back-channel caller's relay, the
//! era, the POST, one re-probe after a refusal, credentials). The rest, by job:
//! - [`probe`]: which era a server speaks, learned and re-learned;
//! - [`exchange`]: one POST in the learned era, and whether its answer refuses that era;
//! - [`request`]: every request's headers, built in one place, and the cancellation of a
//!   session-era request dropped before its answer;
//! - [`answer`]: a 2xx answer, JSON or an SSE stream, and a stream resumed after it ended early;
//! - [`body`]: bodies read within their bounds;
//! - [`errors`]: HTTP statuses and client failures as [`UpstreamError`]s;
//! - [`relay`]: a back-channel caller's calls over a dedicated session;
//! - [`watch`]: the server's change stream (session-era GET, modern `subscriptions/listen`);
//! - [`held`]: a modern caller's calls to a session-era server, over a session of their own
//!   whose requests become `input_required` results;
//! - [`client`]: the pooled HTTP/1.1 client under all of them.
//!
//! **Credentials**: `401`/`403` on any request — probe, handshake, call, reconnection — is
//! [`UpstreamError::Unauthorized`]: not retried, not counted by the breaker, no era learned.
//! A server with `[servers.NAME.auth]` ([`super::credentials`]) gets its credentials once per
//! call, before anything is sent; every request built while the call runs carries them (they
//! are in scope for the call's task, [`CALL_CREDENTIALS`]), and a SigV4 signature is computed
//! over each request as it leaves. A `401` with an OAuth token renews the token once and runs
//! the call once more; a second `401` fails the call.
//!
//! Time is bounded by the layers around the transport: the attempt timeout covers the probe and
//! the body, not just the headers, so a body that drips or a stream that never answers ends as
//! a timeout.

mod answer;
pub(crate) mod body;
pub mod client;
pub(crate) mod errors;
mod exchange;
mod held;
mod probe;
mod relay;
mod request;
mod watch;

use std::{
    sync::{Arc, RwLock, atomic::AtomicU64},
    task::{Context, Poll},
    time::Duration,
};

use http::{
    Method, Uri,
    header::{HOST, HeaderMap, HeaderValue},
};
use tower::Service;

pub use self::{
    answer::{DEFAULT_RETRY, MAX_RECONNECTS},
    body::ERROR_BODY_PREFIX,
};
use self::{client::HttpClient, exchange::Exchange, probe::ProbeError, request::Headers};
use super::{
    UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest,
    credentials::{Applied, Credentials},
};
use crate::protocol::mcp::{self, Era};

/// The era a server was found to speak (learned in [`probe`], spoken by every request).
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
    /// Whether the server declared `tools.listChanged` (in `server/discover` or `initialize`):
    /// only then does [`watch`] open a change stream.
    list_changed: bool,
    /// What the server offers besides tools, as it declared.
    offers: mcp::Offers,
}

/// A session-era server's session: its id and the version negotiated in `initialize`.
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
    log_url: Box<str>,
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

/// `url` without its user-info. Nothing is made of it (no header is sent from it), and
/// hyper-util's connection pool keys connections by scheme and authority, which it writes
/// into its debug lines: user-info there is a secret in the log.
fn without_user_info(url: Uri) -> Uri {
    let host = match url.authority().and_then(|a| a.as_str().rsplit_once('@')) {
        Some((_, host)) => host.to_string(),
        None => return url,
    };
    let mut parts = url.clone().into_parts();
    match host.parse() {
        Ok(authority) => parts.authority = Some(authority),
        Err(_) => return url,
    }
    Uri::from_parts(parts).unwrap_or(url)
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
        let log_url = crate::redact::url(&url.to_string()).into();
        let url = without_user_info(url);
        let mut headers = settings.headers;
        if let Some(host) = host_header(&url)
            && !headers.contains_key(HOST)
        {
            headers.insert(HOST, host);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                log_url,
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
    /// What the server declared it offers besides tools (nothing before the first probe).
    pub fn offers(&self) -> mcp::Offers {
        self.inner.learned().offers
    }

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

impl Inner {
    fn learned(&self) -> Learned {
        self.era.read().map(|e| e.clone()).unwrap_or_default()
    }

    /// The rare paths (a relayed call, a probe, the post after a refusal) are boxed where they
    /// are awaited: inlined, their state would make every call's future (copied whole into
    /// its box) twice as large.
    async fn call(self: &Arc<Self>, request: &UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        // A task lives in the upstream session that created it: its requests follow the call.
        if let Some(relay) = &request.relay
            && (request.method == "tools/call" || request.method.starts_with("tasks/"))
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
        if let (Some(ask), Spoken::Legacy(shared)) = (&request.ask, &spoken)
            && request.method == "tools/call"
            && let Some(result) = Box::pin(self.held_call(request, ask, shared.version)).await
        {
            return result;
        }
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
    async fn call_with_credentials(
        self: &Arc<Self>,
        request: UpstreamRequest,
    ) -> Result<UpstreamReply, UpstreamError> {
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
        tracing::info!(url = %self.log_url, "upstream refused the token (HTTP 401); renewing it and trying once more");
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
        tracing::info!(url = %self.log_url, era = era_label(spoken), reason = %crate::redact::shown(&error), "upstream refused the remembered era; probing again");
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
}

/// The era as the logs name it.
fn era_label(spoken: &Spoken) -> &'static str {
    match spoken {
        Spoken::Modern => mcp::MODERN_VERSION,
        Spoken::Legacy(_) => "session",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_dropped_from_the_url_requests_go_to() {
        let stripped = |url: &str| without_user_info(Uri::try_from(url).expect("URL")).to_string();
        assert_eq!(stripped("http://u:SECRET@h:8080/mcp?k=v"), "http://h:8080/mcp?k=v");
        assert_eq!(stripped("https://TOKEN@h/mcp"), "https://h/mcp");
        assert_eq!(stripped("http://h/mcp"), "http://h/mcp");
    }

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
