//! WebSocket upstreams: one long-lived `ws://` / `wss://` connection carrying JSON-RPC text
//! frames both ways (the transport of the Python SDK 1.x `mcp.server.websocket` and of the
//! store's ECS servers). Only a [`Connector`]: the handshake, id multiplexing and reconnects are
//! the connection's, above it.
//!
//! Choices, each because a production gateway must not be held hostage by one upstream:
//! - **Subprotocol `mcp`** is requested on the upgrade, as the SDKs' WebSocket clients do; the
//!   Python SDK's server always answers with it, and a client that did not ask must fail such
//!   a handshake (RFC 6455), so asking is what makes it connect. A server that answers without
//!   `mcp`, or with another subprotocol, is refused ([`ConnectError::Protocol`]), as the
//!   TypeScript SDK's client (Node's `ws`) and browsers refuse it: it is not an MCP endpoint.
//! - **Bounded messages**: the library's own limits (`max_message_size` and `max_frame_size`,
//!   both the server's `max_response_bytes`) refuse a frame by its header, before its payload is
//!   buffered; a longer message ends the channel with [`ChannelEnd::MessageTooLarge`] after a
//!   best-effort close frame 1009.
//! - **Keepalive**: a ping every `ping_interval`; when no pong comes back within
//!   `pong_timeout`, the connection is declared broken ([`ChannelEnd::Broken`]) — a server that
//!   hangs (or a NAT that dropped the flow) is found without waiting for a call to time out. A
//!   write that cannot complete within `pong_timeout` (the server stopped reading) is broken
//!   too. The server's own pings are answered by the library.
//! - **Frames**: text frames are messages; a binary frame is accepted when it is UTF-8 (some
//!   servers send JSON that way) and ends the channel as broken otherwise. A close frame from
//!   the server ends the channel as [`ChannelEnd::Closed`] with its code and reason; dropping
//!   the channel sends a normal close (1000).
//! - **Upgrade answers**: 401/403 → [`ConnectError::NeedsAuth`]; 429 and 5xx (a proxy in front
//!   of a server that is down) → [`ConnectError::Unreachable`]; any other status or a failed
//!   handshake → [`ConnectError::Protocol`]. The whole connect (TCP, TLS, upgrade) is bounded
//!   by `connect_timeout`.
//! - **TLS** is rustls with the platform verifier, shared with `https://` upstreams: one TLS stack, one trust
//!   store; the client configuration is built once per process.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use futures_util::{SinkExt, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use tokio::{
    sync::{mpsc, watch},
    time::{Instant, MissedTickBehavior},
};
use tokio_tungstenite::{
    Connector as TlsConnector, MaybeTlsStream, WebSocketStream,
    tungstenite::{
        self, Message,
        client::IntoClientRequest,
        error::{CapacityError, ProtocolError},
        protocol::{CloseFrame, WebSocketConfig, frame::coding::CloseCode},
    },
};

use super::channel::{ChannelEnd, ConnectError, Connector, MessageChannel};

/// The subprotocol MCP WebSocket servers select.
pub const SUBPROTOCOL: &str = "mcp";

/// Messages buffered each way between the connection task and its user.
const CHANNEL_CAPACITY: usize = 64;

/// How long a close frame may take to go out when the channel ends.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Settings of one WebSocket server.
#[derive(Debug, Clone)]
pub struct WebSocketSettings {
    /// `ws://…` or `wss://…`.
    pub url: reqwest::Url,
    /// Static headers sent on the upgrade request (e.g. authorization). Never logged.
    pub headers: HeaderMap,
    /// Bounds TCP connect, TLS and the upgrade together.
    pub connect_timeout: Duration,
    /// Longest message (and frame) accepted from the server: its `max_response_bytes`.
    pub max_message_bytes: usize,
    /// How often a ping is sent.
    pub ping_interval: Duration,
    /// How long a pong (or a write) may take before the connection is declared broken.
    pub pong_timeout: Duration,
}

/// Opens WebSocket connections to one server.
#[derive(Debug, Clone)]
pub struct WebSocketConnector {
    settings: Arc<WebSocketSettings>,
}

impl WebSocketConnector {
    /// Refuses a URL that is not `ws://` or `wss://`, or headers no upgrade request can carry.
    pub fn new(settings: WebSocketSettings) -> Result<Self, String> {
        match settings.url.scheme() {
            "ws" | "wss" => {}
            other => return Err(format!("a WebSocket URL is ws:// or wss://, not {other}://")),
        }
        if settings.url.host_str().is_none() {
            return Err("a WebSocket URL needs a host".into());
        }
        if settings.max_message_bytes == 0
            || settings.ping_interval.is_zero()
            || settings.pong_timeout.is_zero()
        {
            return Err("max message size, ping interval and pong timeout must be positive".into());
        }
        Ok(Self { settings: Arc::new(settings) })
    }
}

impl Connector for WebSocketConnector {
    fn connect(&self) -> Pin<Box<dyn Future<Output = Result<MessageChannel, ConnectError>> + Send>> {
        let settings = self.settings.clone();
        Box::pin(async move {
            let limit = settings.connect_timeout;
            match tokio::time::timeout(limit, open(&settings)).await {
                Ok(Ok(ws)) => Ok(spawn(ws, &settings)),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(ConnectError::Unreachable(format!("no WebSocket connection within {limit:?}"))),
            }
        })
    }

    fn describe(&self) -> String {
        describe_url(&self.settings.url)
    }
}

/// The URL as logs may show it ([`crate::redact::url`]).
pub(crate) fn describe_url(url: &reqwest::Url) -> String {
    crate::redact::url(url.as_str())
}

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// The process's TLS client configuration (`upstream::tls`).
fn tls_config() -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    super::tls::client_config()
        .map_err(|e| ConnectError::Unreachable(format!("TLS client configuration: {e}")))
}

async fn open(settings: &WebSocketSettings) -> Result<Ws, ConnectError> {
    let mut request = settings
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| ConnectError::Protocol(format!("WebSocket request: {e}")))?;
    for (name, value) in &settings.headers {
        request.headers_mut().append(name, value.clone());
    }
    request.headers_mut().insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
    let config = WebSocketConfig::default()
        .max_message_size(Some(settings.max_message_bytes))
        .max_frame_size(Some(settings.max_message_bytes));
    let tls = if settings.url.scheme() == "wss" { Some(TlsConnector::Rustls(tls_config()?)) } else { None };
    let (ws, _response) = tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, tls)
        .await
        .map_err(upgrade_error)?;
    Ok(ws)
}

/// Why an upgrade failed, in the connector's terms.
fn upgrade_error(error: tungstenite::Error) -> ConnectError {
    use tungstenite::Error as E;
    match error {
        E::Http(response) => match response.status().as_u16() {
            status @ (401 | 403) => ConnectError::NeedsAuth { status },
            status @ (429 | 500..) => ConnectError::Unreachable(format!("upgrade answered HTTP {status}")),
            status => ConnectError::Protocol(format!("upgrade answered HTTP {status}, not 101")),
        },
        E::Io(e) => ConnectError::Unreachable(e.to_string()),
        E::Tls(e) => ConnectError::Unreachable(format!("TLS: {e}")),
        E::Url(e) => ConnectError::Protocol(format!("URL: {e}")),
        E::Protocol(ProtocolError::SecWebSocketSubProtocolError(e)) => {
            ConnectError::Protocol(format!("the server did not select the `{SUBPROTOCOL}` subprotocol: {e}"))
        }
        other => ConnectError::Protocol(format!("WebSocket handshake: {other}")),
    }
}

fn spawn(ws: Ws, settings: &WebSocketSettings) -> MessageChannel {
    let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (ended_tx, ended_rx) = watch::channel(None);
    let session = Session {
        ws,
        outgoing: out_rx,
        incoming: in_tx,
        limit: settings.max_message_bytes,
        ping_interval: settings.ping_interval,
        pong_timeout: settings.pong_timeout,
    };
    tokio::spawn(async move {
        let mut session = session;
        let end = session.run().await;
        tracing::debug!(?end, "WebSocket upstream connection ended");
        // Set before `incoming` ends, which is when the session is dropped.
        let _ = ended_tx.send(Some(end));
        drop(session);
    });
    MessageChannel { outgoing: out_tx, incoming: in_rx, ended: ended_rx }
}

/// The task that owns one live connection.
struct Session {
    ws: Ws,
    outgoing: mpsc::Receiver<String>,
    incoming: mpsc::Sender<String>,
    limit: usize,
    ping_interval: Duration,
    pong_timeout: Duration,
}

impl Session {
    /// Runs until the connection ends, and says why.
    async fn run(&mut self) -> ChannelEnd {
        let mut pings =
            tokio::time::interval_at(crate::clock::after_tokio(self.ping_interval), self.ping_interval);
        pings.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut pong_due: Option<Instant> = None;
        let mut sequence: u64 = 0;
        loop {
            let pong_wait = async {
                match pong_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // What the server sent first: a pong already read must count before its deadline.
                biased;
                frame = self.ws.next() => match frame {
                    Some(Ok(Message::Text(text))) => {
                        if self.incoming.send(text.as_str().to_owned()).await.is_err() {
                            return self.close(CloseCode::Normal, "").await;
                        }
                    }
                    Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec()) {
                        Ok(text) => {
                            if self.incoming.send(text).await.is_err() {
                                return self.close(CloseCode::Normal, "").await;
                            }
                        }
                        Err(_) => {
                            let _ = self.close(CloseCode::Invalid, "binary frame is not UTF-8").await;
                            return ChannelEnd::Broken("a binary frame that is not UTF-8 text".into());
                        }
                    },
                    Some(Ok(Message::Pong(_))) => pong_due = None,
                    Some(Ok(Message::Ping(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(frame))) => {
                        // The library has queued the close reply; flush it, briefly.
                        let _ = tokio::time::timeout(CLOSE_GRACE, self.ws.close(None)).await;
                        return ChannelEnd::Closed(match frame {
                            Some(f) => format!("close frame {} {}", u16::from(f.code), f.reason.as_str()).trim_end().to_owned(),
                            None => "close frame without a code".to_owned(),
                        });
                    }
                    Some(Err(error)) => return self.read_error(error).await,
                    None => return ChannelEnd::Broken("connection ended without a close frame".into()),
                },
                message = self.outgoing.recv() => match message {
                    Some(text) => {
                        if let Err(end) = self.write(Message::Text(text.into())).await {
                            return end;
                        }
                    }
                    None => return self.close(CloseCode::Normal, "").await,
                },
                _ = self.incoming.closed() => return self.close(CloseCode::Normal, "").await,
                _ = pings.tick() => {
                    if pong_due.is_none() {
                        sequence += 1;
                        if let Err(end) = self.write(Message::Ping(sequence.to_be_bytes().to_vec().into())).await {
                            return end;
                        }
                        pong_due = Some(crate::clock::after_tokio(self.pong_timeout));
                    }
                }
                _ = pong_wait => {
                    return ChannelEnd::Broken(format!("no pong within {:?} of a ping", self.pong_timeout));
                }
            }
        }
    }

    /// Sends one frame, bounded by the pong timeout: a server that stopped reading is broken.
    async fn write(&mut self, message: Message) -> Result<(), ChannelEnd> {
        match tokio::time::timeout(self.pong_timeout, self.ws.send(message)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ChannelEnd::Broken(format!("write failed: {e}"))),
            Err(_) => {
                Err(ChannelEnd::Broken(format!("a write did not complete within {:?}", self.pong_timeout)))
            }
        }
    }

    async fn read_error(&mut self, error: tungstenite::Error) -> ChannelEnd {
        use tungstenite::Error as E;
        match error {
            E::Capacity(CapacityError::MessageTooLong { .. }) => {
                let _ = self.close(CloseCode::Size, "message too big").await;
                ChannelEnd::MessageTooLarge { limit: self.limit }
            }
            E::ConnectionClosed | E::AlreadyClosed => ChannelEnd::Closed("connection closed".into()),
            E::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                ChannelEnd::Broken("connection reset without a close frame".into())
            }
            other => ChannelEnd::Broken(other.to_string()),
        }
    }

    /// Best-effort close frame; the channel ends whatever happens. Returns the end to report
    /// where the channel's user left (dropped every sender or the receiver).
    async fn close(&mut self, code: CloseCode, reason: &'static str) -> ChannelEnd {
        let frame = CloseFrame { code, reason: reason.into() };
        let _ = tokio::time::timeout(CLOSE_GRACE, self.ws.close(Some(frame))).await;
        ChannelEnd::Closed("closed by the gateway".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> WebSocketSettings {
        WebSocketSettings {
            url: url.parse().unwrap(),
            headers: HeaderMap::new(),
            connect_timeout: Duration::from_secs(1),
            max_message_bytes: 1024,
            ping_interval: Duration::from_secs(1),
            pong_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn only_websocket_urls_are_accepted() {
        assert!(WebSocketConnector::new(settings("ws://127.0.0.1:1/ws")).is_ok());
        assert!(WebSocketConnector::new(settings("wss://example.com/ws")).is_ok());
        let refused = WebSocketConnector::new(settings("http://127.0.0.1:1/ws")).unwrap_err();
        assert!(refused.contains("ws:// or wss://"), "{refused}");
    }

    #[test]
    fn descriptions_leave_out_credentials_and_queries() {
        let connector =
            WebSocketConnector::new(settings("wss://user:pw@example.com:8443/ws?token=s3cret")).unwrap();
        assert_eq!(connector.describe(), "wss://user:<redacted>@example.com:8443/ws?token=<redacted>");
    }

    #[test]
    fn upgrade_statuses_map_to_connect_errors() {
        let status = |code: u16| {
            let response = tungstenite::http::Response::builder().status(code).body(None).unwrap();
            upgrade_error(tungstenite::Error::Http(Box::new(response)))
        };
        assert!(matches!(status(401), ConnectError::NeedsAuth { status: 401 }));
        assert!(matches!(status(403), ConnectError::NeedsAuth { status: 403 }));
        assert!(matches!(status(503), ConnectError::Unreachable(_)));
        assert!(matches!(status(429), ConnectError::Unreachable(_)));
        assert!(matches!(status(404), ConnectError::Protocol(_)));
        assert!(matches!(status(200), ConnectError::Protocol(_)));
    }
}
