//! Inbound connections, bounded: the accept loop and each connection's life, served with
//! hyper's HTTP/1 connection directly (`axum::serve` has no header, idle or connection bounds).
//!
//! - **Connection cap** (`inbound.max_connections`): a connection over the cap is accepted,
//!   answered `503` with a JSON-RPC `-32005` error naming the limit, and closed, rather than
//!   left in the kernel's backlog, so a client learns at once why and a flood cannot use up
//!   the process's descriptors (which outbound connects to upstreams need too). The answers of
//!   refused connections are themselves bounded ([`REFUSING_AT_ONCE`]); past that they are
//!   closed without one.
//! - **Header read timeout** (`inbound.header_read_timeout_ms`): once the first byte of a
//!   request arrives, its headers must be complete within it, or the connection is closed.
//!   hyper's own timer cannot say this: it starts as soon as a connection waits for a
//!   request, so it would also be the idle timeout.
//! - **Idle timeout** (`inbound.idle_timeout_ms`): a connection on which no request is being
//!   read or answered for that long is closed gracefully (an answer still streaming finishes
//!   first).
//! - The body read timeout is the handler's (`super::mcp`: 408 with a JSON-RPC error).
//!
//! Shutdown: stop accepting, ask every connection to close after its current exchange, and
//! return once all have (the caller bounds that wait by the grace period).
//!
//! The cost per request: a few atomic updates, a clock read and one wake-up of the
//! connection's task when its head starts; per read of the socket while no request is in
//! flight, two atomic loads.

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::{body::Body, response::Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Semaphore, watch},
};

use crate::{
    config::InboundLimits,
    error::{Category, GatewayError},
    protocol::jsonrpc,
};

/// Most refused connections being answered `503` at once; more are closed without an answer.
pub const REFUSING_AT_ONCE: usize = 64;

/// The connection-level bounds (from `[inbound]`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl ConnectionLimits {
    pub fn from_config(limits: &InboundLimits) -> Self {
        Self {
            header_read_timeout: limits.header_read_timeout(),
            idle_timeout: limits.idle_timeout(),
            max_connections: limits.max_connections,
        }
    }
}

/// One request's answer being made.
pub type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// A per-request service of one connection.
pub type Service = Box<dyn Fn(axum::extract::Request) -> Answer + Send + Sync>;

/// Accepts and serves connections on `listener` until `stop` turns true, then waits for every
/// connection to finish its current exchange. `service` makes the service of a peer's
/// connection; `over_cap` counts refused connections.
pub async fn run(
    listener: TcpListener,
    service: impl Fn(SocketAddr) -> Service,
    limits: ConnectionLimits,
    over_cap: Option<prometheus::IntCounter>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    // Every connection task holds a receiver; all dropped = all connections closed.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.wait_for(|stopping| *stopping) => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of descriptors (EMFILE) and the like: wait rather than spin.
                tracing::error!(error = %e, "accepting a connection failed");
                tokio::select! {
                    _ = stop.wait_for(|stopping| *stopping) => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(counter) = &over_cap {
                counter.inc();
            }
            refuse(tcp, &refusing, limits.max_connections);
            continue;
        };
        let service = service(peer);
        let stop = stop.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            serve_connection(tcp, service, limits, stop).await;
            drop(slot);
            drop(open);
        });
    }
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

/// Errors of one connection attempt, not of the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// The answer to a connection over the cap.
pub fn over_cap_response(max_connections: usize) -> Vec<u8> {
    let err = GatewayError::new(
        Category::Overloaded,
        format!("the gateway serves at most {max_connections} connections at once; try again later"),
    )
    .with_limit("inbound.max_connections", max_connections as u64);
    let body =
        serde_json::to_vec(&jsonrpc::Response::error(serde_json::Value::Null, &err)).unwrap_or_default();
    let mut answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

/// Answers `503` and closes (within a second), or just closes when too many are being refused.
fn refuse(tcp: TcpStream, refusing: &Arc<Semaphore>, max_connections: usize) {
    let Ok(permit) = refusing.clone().try_acquire_owned() else { return };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _permit = permit;
        let mut tcp = tcp;
        let answer = async {
            tcp.write_all(&over_cap_response(max_connections)).await?;
            tcp.shutdown().await?;
            // Read what the client sent (a little) so closing does not reset the connection
            // before it has read the answer.
            let mut sink = [0u8; 4096];
            let mut read = 0;
            while read < 64 * 1024 {
                match tcp.read(&mut sink).await? {
                    0 => break,
                    n => read += n,
                }
            }
            Ok::<_, std::io::Error>(())
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
    });
}

/// No request head started (in [`Activity::head_started_ms`]).
const NONE: u64 = u64::MAX;

/// What a connection is doing, for its timers: written by its socket reads and its service.
struct Activity {
    born: Instant,
    /// Requests handed to the service and not answered yet.
    busy: AtomicU32,
    /// Milliseconds since `born` when the connection last became idle.
    idle_since_ms: AtomicU64,
    /// Milliseconds since `born` of the first byte of a request head not yet complete.
    head_started_ms: AtomicU64,
    /// Wakes the connection's timer when a head starts (its clock is shorter than idle's).
    head_starting: tokio::sync::Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            born: Instant::now(),
            busy: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(NONE),
            head_starting: tokio::sync::Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    fn at(&self, ms: u64) -> Instant {
        self.born + Duration::from_millis(ms)
    }

    /// When the connection's next bound is due, and which.
    fn next_bound(&self, limits: &ConnectionLimits) -> (Instant, Bound) {
        if self.busy.load(Ordering::Acquire) > 0 {
            return (Instant::now() + limits.idle_timeout, Bound::None);
        }
        match self.head_started_ms.load(Ordering::Acquire) {
            NONE => (self.at(self.idle_since_ms.load(Ordering::Acquire)) + limits.idle_timeout, Bound::Idle),
            started => (self.at(started) + limits.header_read_timeout, Bound::Headers),
        }
    }

    fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_started_ms.store(NONE, Ordering::Release);
    }

    fn request_answered(&self) {
        self.idle_since_ms.store(self.now_ms(), Ordering::Release);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }

    /// Bytes arrived: the first of a new request head starts its clock.
    fn bytes_read(&self) {
        if self.busy.load(Ordering::Acquire) == 0 && self.head_started_ms.load(Ordering::Acquire) == NONE {
            self.head_started_ms.store(self.now_ms(), Ordering::Release);
            self.head_starting.notify_one();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    None,
    Idle,
    Headers,
}

async fn serve_connection(
    tcp: TcpStream,
    service: Service,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: tcp, activity: activity.clone() });
    let service = Tracked { service: Arc::new(service), activity: activity.clone() };
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    tokio::pin!(conn);
    let mut closing = false;
    let (first, _) = activity.next_bound(&limits);
    let timer = tokio::time::sleep_until(first.into());
    tokio::pin!(timer);
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = stop.wait_for(|stopping| *stopping), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = activity.head_starting.notified() => {
                let (due, _) = activity.next_bound(&limits);
                timer.as_mut().reset(due.into());
            }
            _ = timer.as_mut() => {
                let (due, bound) = activity.next_bound(&limits);
                if due <= Instant::now() {
                    match bound {
                        // Dropped: the connection is closed without an answer.
                        Bound::Headers => {
                            tracing::debug!("request headers not complete in time; connection closed");
                            return;
                        }
                        Bound::Idle if !closing => {
                            conn.as_mut().graceful_shutdown();
                            closing = true;
                        }
                        _ => {}
                    }
                }
                let (due, _) = activity.next_bound(&limits);
                let due = due.max(Instant::now() + Duration::from_millis(10));
                timer.as_mut().reset(due.into());
            }
        }
    }
}

/// The connection's socket, telling [`Activity`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The connection's service, telling [`Activity`] when a request starts and is answered.
struct Tracked {
    service: Arc<Service>,
    activity: Arc<Activity>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = Answering;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        self.activity.request_started();
        Answering { answer: (self.service)(request.map(Body::new)), activity: Some(self.activity.clone()) }
    }
}

/// A request being answered; marks the connection idle when done (or dropped).
struct Answering {
    answer: Answer,
    activity: Option<Arc<Activity>>,
}

impl Future for Answering {
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = std::task::ready!(self.answer.as_mut().poll(cx));
        if let Some(activity) = self.activity.take() {
            activity.request_answered();
        }
        Poll::Ready(Ok(response))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.request_answered();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_over_cap_answer_is_a_503_with_a_json_rpc_error() {
        let answer = String::from_utf8(over_cap_response(7)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], -32005);
        assert_eq!(body["error"]["data"]["limit"]["key"], "inbound.max_connections");
        assert_eq!(body["error"]["data"]["limit"]["value"], 7);
    }

    #[test]
    fn the_header_clock_starts_at_the_first_byte_and_stops_at_the_request() {
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
        };
        let activity = Activity::new();
        assert_eq!(activity.next_bound(&limits).1, Bound::Idle);
        activity.bytes_read();
        let (due, bound) = activity.next_bound(&limits);
        assert_eq!(bound, Bound::Headers);
        assert!(due <= Instant::now() + limits.header_read_timeout);
        activity.request_started();
        activity.bytes_read(); // the body: not a new head
        assert_eq!(activity.next_bound(&limits).1, Bound::None);
        activity.request_answered();
        assert_eq!(activity.next_bound(&limits).1, Bound::Idle);
    }
}
