//! The seam between persistent transports and the connection that multiplexes calls over them.
//!
//! WebSocket, the 2024-11-05 HTTP+SSE transport and stdio all carry the same thing: JSON-RPC
//! messages, both ways, over one long-lived connection. Each of them is only a *connector*
//! that opens such a connection and hands back a [`MessageChannel`]; everything above it —
//! the `initialize` handshake, matching answers to requests by id, progress, cancellation,
//! the connection state machine and its reconnect backoff — is written once, for all three.
//!
//! Contract for a connector:
//! - `outgoing` takes one serialized JSON-RPC message per item; when every sender is dropped
//!   the connector closes the connection (and, for stdio, stops the child process).
//! - `incoming` yields one serialized JSON-RPC message (or batch) per item, in order, each no
//!   longer than the `max_message_bytes` the connector was given (a longer one ends the
//!   channel with [`ChannelEnd::MessageTooLarge`]); `None` means the connection is over, and
//!   `ended` then says why.
//! - Everything a connector spawns ends when the channel is dropped.

use tokio::sync::{mpsc, watch};

/// A live connection to an MCP server: JSON-RPC messages as text, both ways.
#[derive(Debug)]
pub struct MessageChannel {
    /// Messages to the server, one serialized JSON-RPC message each.
    pub outgoing: mpsc::Sender<String>,
    /// Messages from the server, in order; `None` once the connection is over.
    pub incoming: mpsc::Receiver<String>,
    /// Why the connection ended: `None` while it is up, set before `incoming` ends.
    pub ended: watch::Receiver<Option<ChannelEnd>>,
}

/// Why a live connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEnd {
    /// The server closed it (WebSocket close frame, end of the SSE stream, child exited).
    Closed(String),
    /// The connection broke (reset, I/O error, keepalive unanswered).
    Broken(String),
    /// A message exceeded `max_message_bytes`; the connection was dropped.
    MessageTooLarge { limit: usize },
}

/// Why a connection could not be opened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    /// Nothing answered (refused, DNS, TLS, the command could not be started, timeout).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The server refused the gateway's credentials (HTTP 401/403 on the upgrade or stream).
    #[error("credentials refused (HTTP {status})")]
    NeedsAuth { status: u16 },
    /// Something answered, but not as this transport's MCP server would (wrong status, no
    /// `endpoint` event, refused subprotocol, …): a configuration error more than an outage.
    #[error("not an MCP server on this transport: {0}")]
    Protocol(String),
}

/// Opens connections of one kind (WebSocket URL, SSE URL, stdio command) to one server.
/// Called again for every reconnect; a connector holds settings, never a live connection.
pub trait Connector: Send + Sync + 'static {
    /// Opens one connection. Bounded in time by the connector's own connect timeout.
    fn connect(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>;

    /// What it connects to, for logs and `/admin` (never credentials or secret env values).
    fn describe(&self) -> String;
}
