//! The 2024-11-05 HTTP+SSE transport (deprecated by the spec, still served by many servers,
//! e.g. `server-everything sse` and the Python SDK's `.run("sse")`): a `GET` opens an event
//! stream whose first `endpoint` event names the URL to `POST` messages to; the server's
//! messages come back as `message` events on that stream. Only a [`Connector`]: the
//! handshake, id multiplexing and reconnects are the connection's, above it.
//!
//! Choices:
//! - **Endpoint**: the `endpoint` event's data is resolved against the SSE URL (it is usually a
//!   relative path with a session id) and refused when it names another origin (scheme, host,
//!   port): the gateway's static headers (credentials) must never be posted to a host the
//!   configuration did not name ([`ConnectError::Protocol`]). The `GET` and the wait for the
//!   endpoint are bounded together by `connect_timeout`; redirects are not followed, for the
//!   same reason.
//! - **Bounded**: every line and every event of the stream is bounded by `max_message_bytes`
//!   (the server's `max_response_bytes`) while it is read, by the decoder of
//!   [`crate::protocol::sse`]; a longer one ends the channel with
//!   [`ChannelEnd::MessageTooLarge`]. A `POST`'s answer body is only drained up to 64 KiB
//!   (servers answer `202 Accepted`; the answer itself comes on the stream).
//! - **Posting**: one `POST` at a time, in order (so `notifications/initialized` reaches the
//!   server before the next request), each bounded by `post_timeout` (the server's attempt
//!   timeout: the server only has to accept the message, but a busy one may take longer than
//!   a connect to do so, and a failed `POST` drops the whole connection). Any 2xx is accepted. 401/403 ends the channel as broken and makes the next
//!   [`Connector::connect`] report [`ConnectError::NeedsAuth`] (the credentials that were
//!   refused are the ones it would send again); any other status or failure ends the channel
//!   as [`ChannelEnd::Broken`] (a `404` is a session the server forgot, e.g. after a restart).
//! - **End**: the stream ending is [`ChannelEnd::Closed`]; a read error is
//!   [`ChannelEnd::Broken`]. There is no keepalive of our own: the transport has no ping, and a
//!   server that hangs is found by the calls' own timeouts.
//! - **Statuses of the `GET`**: 401/403 → [`ConnectError::NeedsAuth`]; 429 and 5xx →
//!   [`ConnectError::Unreachable`]; any other non-2xx, or a 2xx that is not
//!   `text/event-stream`, → [`ConnectError::Protocol`].

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use reqwest::{
    Client, Response, Url,
    header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue},
    redirect,
};
use tokio::sync::{mpsc, oneshot, watch};

use super::channel::{ChannelEnd, ConnectError, Connector, MessageChannel};
use crate::protocol::sse::{Decoder, Event};

/// Messages buffered each way between the connection's tasks and its user.
const CHANNEL_CAPACITY: usize = 64;

/// How much of a `POST`'s answer body is read (to reuse the connection); the rest is dropped.
const POST_BODY_DRAIN: usize = 64 * 1024;

/// Settings of one HTTP+SSE server.
#[derive(Debug, Clone)]
pub struct LegacySseSettings {
    /// The SSE endpoint (`http://…/sse`).
    pub url: Url,
    /// Static headers sent on the `GET` and on every `POST` (e.g. authorization). Never logged.
    pub headers: HeaderMap,
    /// Bounds the `GET` until the `endpoint` event.
    pub connect_timeout: Duration,
    /// Bounds each `POST` (the server's attempt timeout).
    pub post_timeout: Duration,
    /// Longest line or event accepted on the stream: the server's `max_response_bytes`.
    pub max_message_bytes: usize,
}

/// Opens HTTP+SSE connections to one server.
#[derive(Clone)]
pub struct LegacySseConnector {
    settings: Arc<LegacySseSettings>,
    client: Client,
    /// The status of a `POST` that refused the credentials; taken by the next `connect`.
    auth_refused: Arc<Mutex<Option<u16>>>,
}

impl LegacySseConnector {
    pub fn new(settings: LegacySseSettings) -> Result<Self, String> {
        match settings.url.scheme() {
            "http" | "https" => {}
            other => return Err(format!("an SSE URL is http:// or https://, not {other}://")),
        }
        if settings.max_message_bytes == 0 {
            return Err("the max message size must be positive".into());
        }
        let client = Client::builder()
            .connect_timeout(settings.connect_timeout)
            .redirect(redirect::Policy::none())
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Self { settings: Arc::new(settings), client, auth_refused: Arc::default() })
    }
}

impl Connector for LegacySseConnector {
    fn connect(&self) -> Pin<Box<dyn Future<Output = Result<MessageChannel, ConnectError>> + Send>> {
        let this = self.clone();
        Box::pin(async move {
            let refused = this.auth_refused.lock().map(|mut s| s.take()).unwrap_or(None);
            if let Some(status) = refused {
                return Err(ConnectError::NeedsAuth { status });
            }
            let limit = this.settings.connect_timeout;
            let opened = tokio::time::timeout(limit, open(&this.client, &this.settings))
                .await
                .map_err(|_| ConnectError::Unreachable(format!("no `endpoint` event within {limit:?}")))??;
            Ok(spawn(this, opened))
        })
    }

    fn describe(&self) -> String {
        super::websocket::describe_url(&self.settings.url)
    }
}

/// A stream that has named its endpoint.
struct Opened {
    response: Response,
    decoder: Decoder,
    endpoint: Url,
    /// Events that arrived in the same chunks as the endpoint, after it.
    pending: Vec<Event>,
}

async fn open(client: &Client, settings: &LegacySseSettings) -> Result<Opened, ConnectError> {
    let mut response = client
        .get(settings.url.clone())
        .headers(settings.headers.clone())
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
        .header(CACHE_CONTROL, HeaderValue::from_static("no-cache"))
        .send()
        .await
        .map_err(|e| ConnectError::Unreachable(error_chain(&e)))?;
    let status = response.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => return Err(ConnectError::NeedsAuth { status }),
        429 | 500.. => return Err(ConnectError::Unreachable(format!("the SSE GET answered HTTP {status}"))),
        _ => return Err(ConnectError::Protocol(format!("the SSE GET answered HTTP {status}"))),
    }
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.trim_start().to_ascii_lowercase().starts_with("text/event-stream") {
        return Err(ConnectError::Protocol(format!(
            "the SSE GET answered `{content_type}`, not text/event-stream"
        )));
    }
    let mut decoder = Decoder::with_limit(settings.max_message_bytes);
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                return Err(ConnectError::Protocol("the SSE stream ended before an `endpoint` event".into()));
            }
            Err(e) => return Err(ConnectError::Unreachable(error_chain(&e))),
        };
        let events = decoder.feed(&chunk).map_err(|too| {
            ConnectError::Protocol(format!(
                "a line or event over {} bytes before the `endpoint` event",
                too.limit
            ))
        })?;
        let mut events = events.into_iter();
        if let Some(event) = events.by_ref().find(|e| e.event.as_deref() == Some("endpoint")) {
            let endpoint = resolve_endpoint(&settings.url, &event.data)?;
            return Ok(Opened { response, decoder, endpoint, pending: events.collect() });
        }
    }
}

/// The `endpoint` event's URL, resolved against the SSE URL; refused on another origin.
fn resolve_endpoint(sse_url: &Url, data: &str) -> Result<Url, ConnectError> {
    let endpoint = sse_url
        .join(data.trim())
        .map_err(|e| ConnectError::Protocol(format!("the `endpoint` event is not a URL ({e})")))?;
    if endpoint.origin() != sse_url.origin() {
        return Err(ConnectError::Protocol(format!(
            "the `endpoint` event names another origin ({}), refused: the gateway posts only to {}",
            endpoint.origin().ascii_serialization(),
            sse_url.origin().ascii_serialization()
        )));
    }
    Ok(endpoint)
}

fn spawn(connector: LegacySseConnector, opened: Opened) -> MessageChannel {
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (ended_tx, ended_rx) = watch::channel(None);
    let (failed_tx, failed_rx) = oneshot::channel();
    let poster = Poster {
        client: connector.client.clone(),
        endpoint: opened.endpoint,
        headers: connector.settings.headers.clone(),
        timeout: connector.settings.post_timeout,
        auth_refused: connector.auth_refused.clone(),
    };
    let writer = AbortOnDrop(tokio::spawn(poster.run(out_rx, failed_tx)));
    let reader = Reader {
        response: opened.response,
        decoder: opened.decoder,
        incoming: in_tx,
        limit: connector.settings.max_message_bytes,
    };
    tokio::spawn(async move {
        let mut reader = reader;
        let end = reader.run(opened.pending, failed_rx).await;
        drop(writer);
        tracing::debug!(?end, "HTTP+SSE upstream connection ended");
        // Set before `incoming` ends, which is when the reader is dropped.
        let _ = ended_tx.send(Some(end));
        drop(reader);
    });
    MessageChannel { outgoing: out_tx, incoming: in_rx, ended: ended_rx }
}

/// Aborts the task when dropped: the writer never outlives its channel.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads the event stream; the task that decides when the channel ends.
struct Reader {
    response: Response,
    decoder: Decoder,
    incoming: mpsc::Sender<String>,
    limit: usize,
}

/// The channel's user went away (dropped the receiver or every sender).
fn closed_by_gateway() -> ChannelEnd {
    ChannelEnd::Closed("closed by the gateway".into())
}

impl Reader {
    async fn run(
        &mut self,
        pending: Vec<Event>,
        mut writer_failed: oneshot::Receiver<ChannelEnd>,
    ) -> ChannelEnd {
        if !self.forward(pending).await {
            return closed_by_gateway();
        }
        loop {
            tokio::select! {
                biased;
                failure = &mut writer_failed => {
                    // An error from the writer, or the writer's end: every sender was dropped.
                    return failure.unwrap_or_else(|_| closed_by_gateway());
                }
                _ = self.incoming.closed() => return closed_by_gateway(),
                chunk = self.response.chunk() => match chunk {
                    Ok(Some(chunk)) => match self.decoder.feed(&chunk) {
                        Ok(events) => {
                            if !self.forward(events).await {
                                return closed_by_gateway();
                            }
                        }
                        Err(_) => return ChannelEnd::MessageTooLarge { limit: self.limit },
                    },
                    Ok(None) => return ChannelEnd::Closed("the SSE stream ended".into()),
                    // A server shutting down closes the connection without ending the chunked
                    // body: that is the stream ending too, not a broken connection.
                    Err(e) if ends_with_eof(&e) => {
                        return ChannelEnd::Closed("the server closed the SSE stream's connection".into());
                    }
                    Err(e) => return ChannelEnd::Broken(format!("reading the SSE stream: {}", error_chain(&e))),
                },
            }
        }
    }

    /// Hands `message` events on; `false` when nobody receives them any more.
    async fn forward(&mut self, events: Vec<Event>) -> bool {
        for event in events {
            match event.event.as_deref() {
                None | Some("message") => {
                    if self.incoming.send(event.data).await.is_err() {
                        return false;
                    }
                }
                // A repeated `endpoint`, or an event type this transport does not define.
                Some(other) => tracing::debug!(event = other, "ignored an SSE event"),
            }
        }
        true
    }
}

/// Posts outgoing messages to the endpoint, one at a time.
struct Poster {
    client: Client,
    endpoint: Url,
    headers: HeaderMap,
    timeout: Duration,
    auth_refused: Arc<Mutex<Option<u16>>>,
}

impl Poster {
    async fn run(self, mut outgoing: mpsc::Receiver<String>, failed: oneshot::Sender<ChannelEnd>) {
        while let Some(message) = outgoing.recv().await {
            if let Err(end) = self.post(message).await {
                let _ = failed.send(end);
                return;
            }
        }
    }

    async fn post(&self, message: String) -> Result<(), ChannelEnd> {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(message);
        let limit = self.timeout;
        let exchange = async move {
            let mut response =
                request.send().await.map_err(|e| (format!("POST failed: {}", error_chain(&e)), None))?;
            let status = response.status().as_u16();
            if !response.status().is_success() {
                return Err((format!("POST answered HTTP {status}"), Some(status)));
            }
            let mut drained = 0;
            while drained < POST_BODY_DRAIN {
                match response.chunk().await {
                    Ok(Some(chunk)) => drained += chunk.len(),
                    _ => break,
                }
            }
            Ok(())
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err((message, Some(status @ (401 | 403))))) => {
                if let Ok(mut refused) = self.auth_refused.lock() {
                    *refused = Some(status);
                }
                Err(ChannelEnd::Broken(format!("{message}: credentials refused")))
            }
            Ok(Err((message, _))) => Err(ChannelEnd::Broken(message)),
            Err(_) => Err(ChannelEnd::Broken(format!("POST not answered within {limit:?}"))),
        }
    }
}

/// Whether an error was caused by the connection reaching its end (EOF), not by a reset.
fn ends_with_eof(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// An error and its sources, for messages (reqwest's own text leaves out the cause).
/// The error and its causes, with any URL in them redacted (reqwest names the URL).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    crate::redact::text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_sse_url_and_stay_on_its_origin() {
        let sse: Url = "http://127.0.0.1:8080/mcp/sse".parse().unwrap();
        let relative = resolve_endpoint(&sse, "/message?sessionId=abc").unwrap();
        assert_eq!(relative.as_str(), "http://127.0.0.1:8080/message?sessionId=abc");
        let sibling = resolve_endpoint(&sse, "messages/?session_id=1\n").unwrap();
        assert_eq!(sibling.as_str(), "http://127.0.0.1:8080/mcp/messages/?session_id=1");
        let absolute = resolve_endpoint(&sse, "http://127.0.0.1:8080/m?s=1").unwrap();
        assert_eq!(absolute.as_str(), "http://127.0.0.1:8080/m?s=1");
        for foreign in
            ["http://evil.example/m", "https://127.0.0.1:8080/m", "http://127.0.0.1:8081/m", "//other/m"]
        {
            let refused = resolve_endpoint(&sse, foreign).unwrap_err();
            assert!(
                matches!(refused, ConnectError::Protocol(ref m) if m.contains("another origin")),
                "{foreign}"
            );
        }
    }
}
