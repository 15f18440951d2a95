//! One persistent connection per server, shared by every call to it: the part of the
//! WebSocket, legacy-SSE and stdio transports that is the same for all three.
//!
//! A [`Connection`] is a `tower::Service<UpstreamRequest>` over a [`Connector`]: this file is
//! that facade (start, state, reports, shutdown). Behind it, by job:
//! - [`state`]: where the connection is in its life, its history, and the metrics that show it;
//! - [`supervisor`]: the task that opens the connection, runs the handshake, and reconnects
//!   with backoff;
//! - [`multiplexer`]: calls in flight over one open connection, matched to their answers by
//!   the gateway's own ids, and what the server sends besides answers.
//!
//! Memory is bounded: the connector bounds each message (`max_response_bytes`), and the calls
//! in flight on one connection are bounded by the server's `max_concurrency` layer above.

mod multiplexer;
mod state;
mod supervisor;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::sync::watch;
use tower::Service;

pub use self::state::{ConnectionMetricFamilies, ConnectionState};
use self::{
    multiplexer::Live,
    state::{ConnectionMetrics, Status},
    supervisor::{Stop, supervise},
};
use super::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest, channel::Connector};
use crate::config::ReconnectSettings;

/// What one persistent server needs besides its connector.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    pub server: Arc<str>,
    /// `websocket`, `sse`, `stdio` (logs and the admin report).
    pub transport: &'static str,
    pub reconnect: ReconnectSettings,
    /// Longest one connect plus the `initialize` handshake may take.
    pub handshake_timeout: Duration,
}

/// A persistent connection to one server, and the `Service` that calls through it.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    /// Stops the supervisor (and the connection) when the last clone goes away.
    owner: Arc<StopOnDrop>,
}

struct StopOnDrop(watch::Sender<Stop>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.send_if_modified(|stop| {
            let first = *stop == Stop::Running;
            if first {
                *stop = Stop::Dropped;
            }
            first
        });
    }
}

/// What the facade, the supervisor and the calls share.
struct Shared {
    settings: ConnectionSettings,
    connector: Box<dyn Connector>,
    status: watch::Sender<Status>,
    live: Mutex<Option<Arc<Live>>>,
    /// The connection being opened (handshake running), so a stop can close it too.
    opening: Mutex<Option<Arc<Live>>>,
    next_id: AtomicU64,
    metrics: ConnectionMetrics,
    /// How many `notifications/tools/list_changed` the server sent, over every connection.
    list_changed: Arc<watch::Sender<u64>>,
    /// What the server's last `initialize` declared it offers besides tools.
    offers: Mutex<crate::protocol::mcp::Offers>,
    /// The server's `notifications/resources/updated`, over every connection.
    updates: crate::backchannel::resource_updates::UpdateFeed,
}

impl Connection {
    /// Starts the supervisor (it connects at once). Must run inside a Tokio runtime.
    pub fn start(
        connector: Box<dyn Connector>,
        settings: ConnectionSettings,
        metrics: &ConnectionMetricFamilies,
    ) -> Self {
        let metrics = ConnectionMetrics::new(metrics, &settings.server);
        metrics.set(ConnectionState::Connecting);
        let (status, _) = watch::channel(Status::connecting());
        let shared = Arc::new(Shared {
            settings,
            connector,
            status,
            live: Mutex::new(None),
            opening: Mutex::new(None),
            next_id: AtomicU64::new(1),
            metrics,
            list_changed: Arc::new(watch::channel(0).0),
            offers: Mutex::default(),
            updates: Default::default(),
        });
        let (stop_tx, stop_rx) = watch::channel(Stop::Running);
        tracing::info!(
            server = %shared.settings.server,
            transport = shared.settings.transport,
            upstream = %shared.connector.describe(),
            "persistent upstream connection starting"
        );
        let supervised = shared.clone();
        crate::supervise::spawn(crate::supervise::Loop::Connection, move || {
            supervise(supervised.clone(), stop_rx.clone())
        });
        Self { shared, owner: Arc::new(StopOnDrop(stop_tx)) }
    }

    /// What the server declared it offers besides tools (nothing before its first handshake).
    pub fn offers(&self) -> crate::protocol::mcp::Offers {
        self.shared.offers.lock().map(|offers| *offers).unwrap_or_default()
    }

    pub fn state(&self) -> ConnectionState {
        self.shared.status.borrow().state
    }

    /// The current state, since when, and the last connection error (for `/capabilities`).
    pub fn health(&self) -> (ConnectionState, Instant, Option<String>) {
        let status = self.shared.status.borrow();
        (status.state, status.since, status.last_error.clone())
    }

    /// The `/admin/connections` entry of this server (never credentials or env values).
    pub fn report(&self) -> Value {
        let status = self.shared.status.borrow().clone();
        let in_flight = self.shared.live().map_or(0, |live| live.in_flight());
        json!({
            "transport": self.shared.settings.transport,
            "target": self.shared.connector.describe(),
            "state": status.state.as_str(),
            "in_state_ms": status.since.elapsed().as_millis() as u64,
            "last_error": status.last_error,
            "failed_attempts": status.failed_attempts,
            "connects": status.connects,
            "reconnects": self.shared.metrics.reconnects.get(),
            "protocol_version": status.protocol_version,
            "in_flight": in_flight,
        })
    }

    /// The moments the server's tools may have changed or are not known yet: each time the
    /// connection becomes ready after an outage, or after its first attempts failed.
    pub fn recoveries(&self) -> Recoveries {
        let status = self.shared.status.subscribe();
        let seen = status.borrow().connects;
        Recoveries { status, seen }
    }

    /// A counter of the server's `notifications/tools/list_changed`, watched for increments.
    pub fn list_changes(&self) -> watch::Receiver<u64> {
        self.shared.list_changed.subscribe()
    }

    /// The server's `notifications/resources/updated`, from now on (validated, bounded:
    /// [`crate::backchannel::resource_updates`]).
    pub fn resource_updates(
        &self,
    ) -> tokio::sync::broadcast::Receiver<crate::backchannel::resource_updates::ResourceUpdated> {
        self.shared.updates.subscribe()
    }

    /// Stops the connection (for stdio: SIGTERM, then kill after the grace) and waits until
    /// it is down, at most `within`.
    pub async fn shutdown(&self, within: Duration) {
        let _ = self.owner.0.send(Stop::Shutdown);
        let mut status = self.shared.status.subscribe();
        let _ = tokio::time::timeout(within, status.wait_for(|s| s.state == ConnectionState::Disabled)).await;
    }
}

/// See [`Connection::recoveries`].
pub struct Recoveries {
    status: watch::Receiver<Status>,
    /// Connections counted so far.
    seen: u64,
}

impl Recoveries {
    /// Waits for the next recovery; `false` once the connection is gone for good.
    pub async fn next(&mut self) -> bool {
        loop {
            if self.status.changed().await.is_err() {
                return false;
            }
            let status = self.status.borrow_and_update();
            if status.state == ConnectionState::Disabled {
                return false;
            }
            if status.state == ConnectionState::Ready && status.connects > self.seen {
                let recovered = status.connects > 1 || status.failed_attempts > 0;
                self.seen = status.connects;
                if recovered {
                    return true;
                }
            }
        }
    }
}

impl Service<UpstreamRequest> for Connection {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { shared.call(request).await })
    }
}

impl Shared {
    fn live(&self) -> Option<Arc<Live>> {
        self.live.lock().ok().and_then(|l| l.clone())
    }

    fn set_live(&self, live: Option<Arc<Live>>) {
        if let Ok(mut slot) = self.live.lock() {
            *slot = live;
        }
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// Fresh metric families for the tests, as the gateway's registry would hand them down.
#[cfg(test)]
fn test_families() -> ConnectionMetricFamilies {
    use prometheus::{IntCounterVec, IntGaugeVec, Opts};
    let opts = |name: &str| Opts::new(name, name);
    ConnectionMetricFamilies {
        state: IntGaugeVec::new(opts("state"), &["server", "state"]).unwrap(),
        era: IntGaugeVec::new(opts("era"), &["server", "era"]).unwrap(),
        reconnects: IntCounterVec::new(opts("reconnects"), &["server"]).unwrap(),
        dropped: IntCounterVec::new(opts("dropped"), &["server", "reason"]).unwrap(),
    }
}
