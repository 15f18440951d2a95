//! The HTTP/1.1 client of the streamable-HTTP transport: hyper-util's pooled client over
//! rustls (the platform verifier, as every TLS peer of the gateway), with the small
//! request/response surface the transport needs.
//!
//! Why not reqwest on this path: every tool call crosses it, and reqwest's per-request layers
//! — the URL cloned and re-parsed (IDNA included) by its redirect policy, the header map and
//! body re-wrapped, a timeout wrapper per request — cost several microseconds per call that
//! the bare forwarder of the overhead benchmark does not pay. The rest of the
//! gateway (health probes, the SSE transport, OTLP export) keeps reqwest.
//!
//! Redirects are **not** followed: a configured MCP endpoint that answers 3xx is a
//! configuration error, and following it would re-send a tool call — and the server's
//! credentials — to a place nobody configured. The 3xx reaches the caller as the server's
//! HTTP status.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header::CONTENT_LENGTH};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};

type Pooled = Client<BoundedConnect<HttpsConnector<HttpConnector>>, Full<Bytes>>;

/// A pooled HTTP/1.1 client (`http` and `https`); cloning shares the pool.
#[derive(Clone)]
pub struct HttpClient {
    pooled: Arc<Pooled>,
}

impl HttpClient {
    /// A client whose connects (TCP and, for `https`, the TLS handshake) give up after
    /// `connect_timeout`; idle pooled connections are kept 60 s, at most 512 per host, with
    /// `TCP_NODELAY`.
    pub fn new(connect_timeout: Duration, tls: &rustls::ClientConfig) -> Self {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let connector = BoundedConnect { inner: https, limit: connect_timeout };
        let pooled = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(512)
            .build(connector);
        Self { pooled: Arc::new(pooled) }
    }

    /// Starts a request to `uri` (absolute: scheme and authority).
    pub fn request(&self, method: Method, uri: Uri) -> RequestBuilder {
        let mut request = http::Request::new(Bytes::new());
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        RequestBuilder { client: self.clone(), request: Ok(request), timeout: None, signer: None }
    }
}

/// Something that signs a request as it is about to leave, over its final method, URL,
/// headers and body (SigV4: `upstream::credentials::sigv4`).
pub trait SignRequest: Send + Sync {
    fn sign(&self, request: &mut http::Request<Bytes>) -> Result<(), String>;
}

/// Bounds a whole connect — TCP, then the TLS handshake — by the connect timeout. A server
/// that accepts TCP and never finishes the handshake is then a connect error like a refused
/// one (the request provably never left, so a retry is safe), not an attempt timeout.
#[derive(Clone)]
struct BoundedConnect<C> {
    inner: C,
    limit: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower::Service<Uri> for BoundedConnect<C>
where
    C: tower::Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(format!("no connection within {} ms (TCP and TLS)", limit.as_millis()).into()),
            }
        })
    }
}

/// One request being built. An invalid header name or value is kept as the request's error
/// and returned by [`RequestBuilder::send`], so building never fails half-way.
pub struct RequestBuilder {
    client: HttpClient,
    request: Result<http::Request<Bytes>, ClientError>,
    timeout: Option<Duration>,
    /// Signs the request in [`RequestBuilder::send`], after everything else was set.
    signer: Option<std::sync::Arc<dyn SignRequest>>,
}

impl RequestBuilder {
    /// Replaces the request's headers with `map` (call it first).
    pub fn headers(mut self, map: HeaderMap) -> Self {
        if let Ok(request) = &mut self.request {
            *request.headers_mut() = map;
        }
        self
    }

    /// Adds one header (after any of the same name).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        if let Ok(request) = &mut self.request {
            let name = HeaderName::try_from(name).map_err(Into::into);
            let value = HeaderValue::try_from(value).map_err(Into::into);
            match name.and_then(|name| value.map(|value| (name, value))) {
                Ok((name, value)) => {
                    request.headers_mut().append(name, value);
                }
                Err(error) => self.request = Err(ClientError::new(Kind::Builder, error)),
            }
        }
        self
    }

    /// Adds one header already in its typed form (after any of the same name): what the
    /// gateway sends on every request uses static names and values, which cost no copy.
    pub fn typed_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        if let Ok(request) = &mut self.request {
            request.headers_mut().append(name, value);
        }
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        if let Ok(request) = &mut self.request {
            *request.body_mut() = body.into();
        }
        self
    }

    /// Has `signer` sign the request when it is sent (a signing failure is the request's error:
    /// nothing is sent).
    pub fn signed_by(mut self, signer: std::sync::Arc<dyn SignRequest>) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Bounds the wait for the response's head (not its body).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Sends the request; the response's head has arrived when this returns.
    pub async fn send(self) -> Result<Response, ClientError> {
        let mut request = self.request?;
        if let Some(signer) = &self.signer {
            signer.sign(&mut request).map_err(|e| ClientError::new(Kind::Builder, e))?;
        }
        let sent = self.client.pooled.request(request.map(Full::new));
        let head = match self.timeout {
            None => sent.await,
            Some(limit) => match tokio::time::timeout(limit, sent).await {
                Ok(head) => head,
                Err(_) => {
                    return Err(ClientError::new(Kind::Timeout, "no answer within the request's timeout"));
                }
            },
        };
        match head {
            Ok(inner) => Ok(Response { inner }),
            Err(error) if error.is_connect() => Err(ClientError::new(Kind::Connect, error)),
            Err(error) => Err(ClientError::new(Kind::Transport, error)),
        }
    }
}

/// A response whose head has arrived; the body is read chunk by chunk.
pub struct Response {
    inner: http::Response<Incoming>,
}

impl Response {
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }

    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The body's declared length, if the server declared one.
    pub fn content_length(&self) -> Option<u64> {
        self.inner.headers().get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
    }

    /// The next piece of the body; `None` at its end (trailers are skipped).
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        while let Some(frame) = self.inner.body_mut().frame().await {
            let frame = frame.map_err(|e| ClientError::new(Kind::Transport, e))?;
            if let Ok(data) = frame.into_data() {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The request could not be built (an invalid header): never sent.
    Builder,
    /// No connection could be made: never sent.
    Connect,
    /// The request's own timeout passed before the response's head.
    Timeout,
    /// The connection failed while the request or its answer was under way.
    Transport,
}

/// Why a request got no (complete) response. The source chain ends at the root cause.
#[derive(Debug)]
pub struct ClientError {
    kind: Kind,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl ClientError {
    fn new(kind: Kind, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self { kind, source: source.into() }
    }

    /// No connection was made, so the request was provably never sent.
    pub fn is_connect(&self) -> bool {
        self.kind == Kind::Connect
    }

    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::Timeout
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            Kind::Builder => "invalid request",
            Kind::Connect => "connect failed",
            Kind::Timeout => "timed out",
            Kind::Transport => "connection failed",
        };
        write!(f, "{what}: {}", self.source)
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> HttpClient {
        let tls = crate::upstream::tls::client_config().expect("the platform's TLS configuration");
        HttpClient::new(Duration::from_secs(1), &tls)
    }

    #[tokio::test]
    async fn an_invalid_header_is_the_requests_error_and_nothing_is_sent() {
        let error = client()
            .request(Method::POST, Uri::from_static("http://127.0.0.1:9/mcp"))
            .header("mcp-param-x", "line\nbreak")
            .send()
            .await
            .err()
            .expect("refused");
        assert!(!error.is_connect() && !error.is_timeout(), "{error}");
        assert!(error.to_string().starts_with("invalid request"), "{error}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        // Bind then drop a listener: its port refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let uri: Uri = format!("http://127.0.0.1:{port}/mcp").parse().unwrap();
        let error = client().request(Method::POST, uri).body("{}").send().await.err().expect("refused");
        assert!(error.is_connect(), "{error}");
    }
}
