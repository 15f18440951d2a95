//! One persistent connection per server, shared by every call to it: the part of the
//! WebSocket, legacy-SSE and stdio transports that is the same for all three.
//!
//! A [`Connection`] is a `tower::Service<UpstreamRequest>` over a [`Connector`]. A supervisor
//! task opens the connection, runs the session-era handshake (`initialize`, then
//! `notifications/initialized`: these transports predate the modern era) and keeps it up:
//!
//! ```text
//! connecting ──▶ ready ──▶ reconnecting ──▶ ready …
//!     │                        │
//!     └──── 10 min without a connection ──▶ failed (slow retry, every 5 min) ──▶ ready
//!     any attempt refused as 401/403 ──▶ needs_auth (slow retry) ──▶ ready
//!     gateway shutdown, or the server's stack dropped ──▶ disabled
//! ```
//!
//! Reconnects wait 1 s, doubling to 30 s, each delay jittered by ±20%
//! (`defaults.reconnect_*`). A connection counts as recovered only once it has stayed ready
//! for `reconnect_max_ms`: a server that crashes right after each handshake keeps backing
//! off (and ends `failed`) instead of being restarted every second forever.
//!
//! Calls are multiplexed by the gateway's own JSON-RPC ids, unique per connection and never
//! reused; a caller's id never reaches the server. An answer whose id matches no call in
//! flight (late, duplicated, invented) is dropped and counted
//! (`mcp_gateway_upstream_dropped_messages_total{reason="unknown_id"}`), as is a line that is
//! not JSON-RPC (`reason="invalid"`: the framing is intact, so the connection stays up and
//! only a call whose answer never comes times out). When the connection drops, every call in
//! flight fails with [`UpstreamError::Io`] (it may have been delivered). A call future dropped
//! before its answer (deadline, caller gone) sends `notifications/cancelled` for its id.
//!
//! Calls while the server is not `ready` fail at once with [`UpstreamError::NotConnected`]
//! (nothing sent), with one exception: calls made while the very first connection attempt is
//! still running wait for its outcome (bounded by their own timeout), so a gateway that just
//! started does not fail its first `tools/list` because a child process was still booting.
//!
//! Requests the server sends the gateway are answered at once so it never waits: `ping` with
//! `{}`, anything else (`roots/list`, `sampling/createMessage`, `elicitation/create`) with
//! `-32601`. `notifications/progress` carrying a call's progress token (the gateway's own,
//! set only when the call asked for progress) go to [`UpstreamRequest::progress`], rebuilt
//! from their validated fields ([`super::to_caller::ProgressUpdate`]): nothing else in their
//! params reaches the caller.
//!
//! Memory is bounded: the connector bounds each message (`max_response_bytes`), and the calls
//! in flight on one connection are bounded by the server's `max_concurrency` layer above.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec};
use serde::Deserialize;
use serde_json::{Map, Value, json, value::RawValue};
use tokio::sync::{mpsc, oneshot, watch};
use tower::Service;

use super::{
    ProgressSink, UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest,
    channel::{ChannelEnd, ConnectError, Connector, MessageChannel},
};
use crate::{
    config::ReconnectSettings,
    protocol::{jsonrpc::ErrorObject, mcp},
};

/// Where a persistent connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Opening the first connection (never ready yet).
    Connecting,
    Ready,
    /// The connection was lost (or attempts keep failing after it was up once): backing off.
    Reconnecting,
    /// No connection for `reconnect_give_up_ms`: retried only every `reconnect_slow_retry_ms`.
    Failed,
    /// The server refused the gateway's credentials: retried only every
    /// `reconnect_slow_retry_ms` (no tight loop against an auth wall).
    NeedsAuth,
    /// Stopped: gateway shutdown, or the server's stack was dropped.
    Disabled,
}

impl ConnectionState {
    pub const ALL: [ConnectionState; 6] = [
        ConnectionState::Connecting,
        ConnectionState::Ready,
        ConnectionState::Reconnecting,
        ConnectionState::Failed,
        ConnectionState::NeedsAuth,
        ConnectionState::Disabled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "connecting",
            ConnectionState::Ready => "ready",
            ConnectionState::Reconnecting => "reconnecting",
            ConnectionState::Failed => "failed",
            ConnectionState::NeedsAuth => "needs_auth",
            ConnectionState::Disabled => "disabled",
        }
    }

    /// A state that does not fix itself within seconds (readiness does not count the
    /// server's tools while it lasts).
    pub fn is_lasting(self) -> bool {
        matches!(self, ConnectionState::Failed | ConnectionState::NeedsAuth | ConnectionState::Disabled)
    }
}

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

/// The connection's current state and history, for `/admin/connections` and `/readyz`.
#[derive(Debug, Clone)]
struct Status {
    state: ConnectionState,
    since: Instant,
    last_error: Option<String>,
    /// Failed attempts since the connection was last stable.
    failed_attempts: u32,
    /// Connections that reached `ready`.
    connects: u64,
    protocol_version: Option<&'static str>,
    /// The first connection attempt has concluded (calls stop waiting for it).
    first_attempt_done: bool,
}

/// The metric families connections report into, handed down by the gateway (which owns the
/// registry), so the transport layer never reaches up into telemetry.
#[derive(Clone)]
pub struct ConnectionMetricFamilies {
    /// `mcp_gateway_upstream_connection_state{server,state}`
    pub state: IntGaugeVec,
    /// `mcp_gateway_upstream_era{server,era}`
    pub era: IntGaugeVec,
    /// `mcp_gateway_upstream_reconnects_total{server}`
    pub reconnects: IntCounterVec,
    /// `mcp_gateway_upstream_dropped_messages_total{server,reason}`
    pub dropped: IntCounterVec,
}

/// The metric handles of one server's connection.
struct ConnectionMetrics {
    state: Vec<(ConnectionState, IntGauge)>,
    /// `mcp_gateway_upstream_era`: these transports are session era.
    era: [IntGauge; 2],
    reconnects: IntCounter,
    dropped: IntCounterVec,
}

impl ConnectionMetrics {
    fn new(families: &ConnectionMetricFamilies, server: &str) -> Self {
        Self {
            state: ConnectionState::ALL
                .iter()
                .map(|s| (*s, families.state.with_label_values(&[server, s.as_str()])))
                .collect(),
            era: [
                families.era.with_label_values(&[server, "session"]),
                families.era.with_label_values(&[server, "2026-07-28"]),
            ],
            reconnects: families.reconnects.with_label_values(&[server]),
            dropped: families.dropped.clone(),
        }
    }

    /// The enum-state idiom: 1 for the current state, 0 for the others.
    fn set(&self, current: ConnectionState) {
        if current == ConnectionState::Ready {
            self.era[0].set(1);
            self.era[1].set(0);
        }
        for (state, gauge) in &self.state {
            gauge.set(i64::from(*state == current));
        }
    }
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

/// What the supervisor is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Running,
    /// Gateway shutdown: the server ends `disabled`, as its metric says.
    Shutdown,
    /// Every handle is gone (a registry server's stack replaced): its successor under the
    /// same name owns the state metric from now on, so the last transition leaves it alone.
    Dropped,
}

struct Shared {
    settings: ConnectionSettings,
    connector: Box<dyn Connector>,
    status: watch::Sender<Status>,
    live: Mutex<Option<Arc<Live>>>,
    /// The connection being opened (handshake running), so a stop can close it too.
    opening: Mutex<Option<Arc<Live>>>,
    next_id: AtomicU64,
    metrics: ConnectionMetrics,
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
        let (status, _) = watch::channel(Status {
            state: ConnectionState::Connecting,
            since: Instant::now(),
            last_error: None,
            failed_attempts: 0,
            connects: 0,
            protocol_version: None,
            first_attempt_done: false,
        });
        let shared = Arc::new(Shared {
            settings,
            connector,
            status,
            live: Mutex::new(None),
            opening: Mutex::new(None),
            next_id: AtomicU64::new(1),
            metrics,
        });
        let (stop_tx, stop_rx) = watch::channel(Stop::Running);
        tracing::info!(
            server = %shared.settings.server,
            transport = shared.settings.transport,
            upstream = %shared.connector.describe(),
            "persistent upstream connection starting"
        );
        tokio::spawn(supervise(shared.clone(), stop_rx));
        Self { shared, owner: Arc::new(StopOnDrop(stop_tx)) }
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

/// Why an attempt to connect failed.
enum Failure {
    NeedsAuth(String),
    Other(String),
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

    /// Moves to `state`, logging the transition (only transitions: a failure that keeps the
    /// state is logged at debug).
    fn transition(&self, state: ConnectionState, reason: Option<String>, update: impl FnOnce(&mut Status)) {
        self.transition_inner(state, reason, true, update)
    }

    fn transition_inner(
        &self,
        state: ConnectionState,
        reason: Option<String>,
        set_metric: bool,
        update: impl FnOnce(&mut Status),
    ) {
        let mut from = state;
        self.status.send_modify(|status| {
            from = status.state;
            if from != state {
                status.state = state;
                status.since = Instant::now();
            }
            if reason.is_some() {
                status.last_error = reason.clone();
            }
            update(status);
        });
        if set_metric {
            self.metrics.set(state);
        }
        let server = &*self.settings.server;
        let transport = self.settings.transport;
        let reason = reason.as_deref();
        match (from == state, state) {
            (true, _) => {
                tracing::debug!(
                    server,
                    transport,
                    state = state.as_str(),
                    reason,
                    "upstream connection attempt failed"
                )
            }
            (false, ConnectionState::Ready | ConnectionState::Connecting | ConnectionState::Disabled) => {
                tracing::info!(
                    server,
                    transport,
                    from = from.as_str(),
                    to = state.as_str(),
                    reason,
                    "upstream connection state changed"
                )
            }
            (false, _) => {
                tracing::warn!(
                    server,
                    transport,
                    from = from.as_str(),
                    to = state.as_str(),
                    reason,
                    "upstream connection state changed"
                )
            }
        }
    }

    /// Connects and runs the handshake, bounded by `handshake_timeout`.
    async fn open(self: &Arc<Self>) -> Result<(Arc<Live>, &'static str), Failure> {
        let within = self.settings.handshake_timeout;
        let channel = match tokio::time::timeout(within, self.connector.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(ConnectError::NeedsAuth { status })) => {
                return Err(Failure::NeedsAuth(format!("credentials refused (HTTP {status})")));
            }
            Ok(Err(e)) => return Err(Failure::Other(e.to_string())),
            Err(_) => return Err(Failure::Other(format!("no connection within {within:?}"))),
        };
        let live = Live::start(channel, self.settings.server.clone(), self.metrics.dropped.clone());
        if let Ok(mut opening) = self.opening.lock() {
            *opening = Some(live.clone());
        }
        let handshake = tokio::time::timeout(within, self.handshake(&live)).await;
        if let Ok(mut opening) = self.opening.lock() {
            opening.take();
        }
        match handshake {
            Ok(Ok(version)) => Ok((live, version)),
            Ok(Err(reason)) => {
                live.close();
                Err(Failure::Other(reason))
            }
            Err(_) => {
                live.close();
                Err(Failure::Other(format!("no answer to initialize within {within:?}")))
            }
        }
    }

    /// `initialize` → `notifications/initialized`; returns the version the server chose.
    async fn handshake(&self, live: &Arc<Live>) -> Result<&'static str, String> {
        let id = self.next_id();
        let message = String::from_utf8(mcp::encode_initialize(id)).unwrap_or_default();
        let answer = live.register(id, None).ok_or("connection closed during the handshake")?;
        if !live.send(message).await {
            return Err("connection closed during the handshake".into());
        }
        let reply = answer
            .await
            .map_err(|_| "connection closed during the handshake".to_string())?
            .map_err(|e| format!("initialize failed: {e}"))?;
        let raw = match reply {
            UpstreamReply::Result(raw) => raw.into_raw(),
            UpstreamReply::Error(e) => return Err(format!("initialize refused: {} {}", e.code, e.message)),
        };
        let chosen = serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|v| v.get("protocolVersion").and_then(Value::as_str).map(str::to_string));
        let version = mcp::LEGACY_VERSIONS
            .iter()
            .find(|v| Some(**v) == chosen.as_deref())
            .copied()
            .ok_or_else(|| format!("the server chose an unsupported protocol version {chosen:?}"))?;
        let initialized = String::from_utf8(mcp::encode_notification("notifications/initialized", None))
            .unwrap_or_default();
        if !live.send(initialized).await {
            return Err("connection closed during the handshake".into());
        }
        Ok(version)
    }

    /// A ready connection, or why there is none.
    async fn ready_live(&self) -> Result<Arc<Live>, UpstreamError> {
        let mut status = self.status.subscribe();
        loop {
            {
                let current = status.borrow_and_update();
                if current.state == ConnectionState::Ready {
                    return self.live().ok_or(UpstreamError::NotConnected { state: "reconnecting" });
                }
                if current.first_attempt_done || current.state != ConnectionState::Connecting {
                    return Err(UpstreamError::NotConnected { state: current.state.as_str() });
                }
            }
            // The very first attempt is still running: its outcome decides.
            if status.changed().await.is_err() {
                return Err(UpstreamError::NotConnected { state: ConnectionState::Disabled.as_str() });
            }
        }
    }

    async fn call(self: Arc<Self>, request: UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        let live = self.ready_live().await?;
        let not_connected = || UpstreamError::NotConnected { state: ConnectionState::Reconnecting.as_str() };
        let id = self.next_id();
        let message = encode_call(id, &request);
        let answer = live.register(id, request.progress.clone()).ok_or_else(not_connected)?;
        let mut guard = CallGuard { live: &live, id, sent: false, done: false };
        if !live.send(message).await {
            return Err(not_connected());
        }
        guard.sent = true;
        let result = answer.await.unwrap_or_else(|_| Err(UpstreamError::Io("connection closed".into())));
        guard.done = true;
        result
    }
}

/// The request as sent: the gateway's id, the session-era shape, and a progress token of the
/// gateway's own only when the call can receive progress (a caller's token never goes up).
fn encode_call(id: u64, request: &UpstreamRequest) -> String {
    let mut params = Map::clone(&request.params);
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.remove("progressToken");
        if request.progress.is_some() {
            meta.insert("progressToken".into(), json!(id));
        }
    }
    if params.get("_meta").is_some_and(|m| m.as_object().is_some_and(Map::is_empty)) {
        params.remove("_meta");
    }
    json!({"jsonrpc": "2.0", "id": id, "method": request.method, "params": params}).to_string()
}

/// Takes a call out of the pending map when its future ends early, and tells the server.
struct CallGuard<'a> {
    live: &'a Arc<Live>,
    id: u64,
    sent: bool,
    done: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let was_pending = self.live.unregister(self.id);
        if self.sent && was_pending {
            let params =
                json!({"requestId": self.id, "reason": "cancelled by the gateway (deadline or caller gone)"});
            let message =
                String::from_utf8(mcp::encode_notification("notifications/cancelled", Some(params)))
                    .unwrap_or_default();
            self.live.try_send(message);
        }
    }
}

/// The supervisor: connect, serve, reconnect with backoff, until stopped.
async fn supervise(shared: Arc<Shared>, mut stop: watch::Receiver<Stop>) {
    let settings = shared.settings.reconnect;
    let mut backoff = settings.initial;
    let mut failing_since: Option<Instant> = None;
    let mut ever_ready = false;
    let mut attempts: u64 = 0;
    loop {
        if *stop.borrow() != Stop::Running {
            break;
        }
        attempts += 1;
        if attempts > 1 {
            shared.metrics.reconnects.inc();
        }
        let opened = tokio::select! {
            opened = shared.open() => opened,
            _ = stopped(&mut stop) => break,
        };
        let delay = match opened {
            Ok((live, version)) => {
                shared.set_live(Some(live.clone()));
                shared.transition(ConnectionState::Ready, None, |s| {
                    s.connects += 1;
                    s.protocol_version = Some(version);
                    s.first_attempt_done = true;
                });
                ever_ready = true;
                let ready_at = Instant::now();
                let mut done = live.done.subscribe();
                let ended = tokio::select! {
                    ended = done.wait_for(Option::is_some) => ended.ok().and_then(|e| (*e).clone()),
                    _ = stopped(&mut stop) => None,
                };
                shared.set_live(None);
                live.close();
                let Some(reason) = ended else {
                    live.wait_closed(Duration::from_secs(60)).await;
                    break;
                };
                if ready_at.elapsed() >= settings.max {
                    // It was stable: a fresh outage, with a fresh backoff and give-up clock.
                    backoff = settings.initial;
                    failing_since = None;
                }
                failing_since.get_or_insert_with(Instant::now);
                shared.transition(
                    ConnectionState::Reconnecting,
                    Some(format!("connection lost: {reason}")),
                    |s| {
                        s.failed_attempts = 0;
                    },
                );
                next_backoff(&mut backoff, settings.max)
            }
            Err(Failure::NeedsAuth(reason)) => {
                failing_since.get_or_insert_with(Instant::now);
                shared.transition(ConnectionState::NeedsAuth, Some(reason), |s| {
                    s.failed_attempts += 1;
                    s.first_attempt_done = true;
                });
                settings.slow_retry
            }
            Err(Failure::Other(reason)) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                let (state, delay) = if since.elapsed() >= settings.give_up_after {
                    (ConnectionState::Failed, settings.slow_retry)
                } else if ever_ready {
                    (ConnectionState::Reconnecting, next_backoff(&mut backoff, settings.max))
                } else {
                    (ConnectionState::Connecting, next_backoff(&mut backoff, settings.max))
                };
                shared.transition(state, Some(reason), |s| {
                    s.failed_attempts += 1;
                    s.first_attempt_done = true;
                });
                delay
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut stop) => break,
        }
    }
    // A stop during a handshake leaves that connection here.
    let opening = shared.opening.lock().ok().and_then(|mut o| o.take());
    for live in [shared.live(), opening].into_iter().flatten() {
        shared.set_live(None);
        live.close();
        live.wait_closed(Duration::from_secs(60)).await;
    }
    let replaced = *stop.borrow() == Stop::Dropped;
    shared.transition_inner(ConnectionState::Disabled, None, !replaced, |s| s.first_attempt_done = true);
}

/// The current delay, jittered by ±20%; doubles the next one up to `max`.
fn next_backoff(backoff: &mut Duration, max: Duration) -> Duration {
    let delay = backoff.mul_f64(0.8 + 0.4 * fastrand::f64());
    *backoff = (*backoff * 2).min(max);
    delay
}

/// Resolves once a stop is asked for (or every owner is gone).
async fn stopped(stop: &mut watch::Receiver<Stop>) {
    let _ = stop.wait_for(|s| *s != Stop::Running).await;
}

/// One open connection: its pending calls and the task reading it.
struct Live {
    server: Arc<str>,
    outgoing: Mutex<Option<mpsc::Sender<String>>>,
    pending: Mutex<Pending>,
    /// Tells the reader to stop (and drop the incoming side) when the gateway closes it.
    stop_reader: watch::Sender<bool>,
    /// Why the connection ended, set by the reader once every pending call has been failed.
    done: watch::Sender<Option<String>>,
    /// The connector's own account of the end (set once the connection is really down).
    ended: watch::Receiver<Option<ChannelEnd>>,
    dropped: IntCounterVec,
}

#[derive(Default)]
struct Pending {
    closed: bool,
    calls: HashMap<u64, PendingCall>,
}

struct PendingCall {
    answer: oneshot::Sender<Result<UpstreamReply, UpstreamError>>,
    progress: Option<ProgressSink>,
}

/// The fields of any JSON-RPC message, the result kept raw.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

impl Live {
    fn start(channel: MessageChannel, server: Arc<str>, dropped: IntCounterVec) -> Arc<Self> {
        let MessageChannel { outgoing, incoming, ended } = channel;
        let live = Arc::new(Self {
            server,
            outgoing: Mutex::new(Some(outgoing)),
            pending: Mutex::default(),
            stop_reader: watch::channel(false).0,
            done: watch::channel(None).0,
            ended,
            dropped,
        });
        tokio::spawn(read(live.clone(), incoming));
        live
    }

    fn in_flight(&self) -> usize {
        self.pending.lock().map_or(0, |p| p.calls.len())
    }

    /// Adds a call to the pending map; `None` once the connection is closed.
    fn register(
        &self,
        id: u64,
        progress: Option<ProgressSink>,
    ) -> Option<oneshot::Receiver<Result<UpstreamReply, UpstreamError>>> {
        let mut pending = self.pending.lock().ok()?;
        if pending.closed {
            return None;
        }
        let (answer, receiver) = oneshot::channel();
        pending.calls.insert(id, PendingCall { answer, progress });
        Some(receiver)
    }

    /// Removes a call; whether it was still waiting.
    fn unregister(&self, id: u64) -> bool {
        self.pending.lock().is_ok_and(|mut p| p.calls.remove(&id).is_some())
    }

    fn sender(&self) -> Option<mpsc::Sender<String>> {
        self.outgoing.lock().ok().and_then(|o| o.clone())
    }

    /// Queues a message; false when the connection is closed.
    async fn send(&self, message: String) -> bool {
        match self.sender() {
            Some(sender) => sender.send(message).await.is_ok(),
            None => false,
        }
    }

    /// Queues a message without waiting (answers to the server, cancellations).
    fn try_send(&self, message: String) {
        if let Some(sender) = self.sender() {
            let _ = sender.try_send(message);
        }
    }

    /// Closes the connection from the gateway's side: the connector sees its senders gone.
    fn close(&self) {
        if let Ok(mut outgoing) = self.outgoing.lock() {
            outgoing.take();
        }
        let _ = self.stop_reader.send(true);
    }

    /// Waits until the connector reports the connection down (for stdio: the child reaped).
    async fn wait_closed(&self, within: Duration) {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(within, ended.wait_for(Option::is_some)).await;
    }

    /// Fails every call in flight and refuses new ones.
    fn fail_all(&self, end: Option<&ChannelEnd>) {
        let calls = match self.pending.lock() {
            Ok(mut pending) => {
                pending.closed = true;
                std::mem::take(&mut pending.calls)
            }
            Err(_) => return,
        };
        let single = calls.len() == 1;
        for (_, call) in calls {
            let error = match end {
                // With one call in flight, the oversized message was its answer.
                Some(ChannelEnd::MessageTooLarge { limit }) if single => {
                    UpstreamError::ResponseTooLarge { limit: *limit }
                }
                Some(end) => UpstreamError::Io(format!("connection lost: {}", describe_end(end))),
                None => UpstreamError::Io("connection closed".into()),
            };
            let _ = call.answer.send(Err(error));
        }
    }

    fn drop_message(&self, reason: &'static str) {
        self.dropped.with_label_values(&[&self.server, reason]).inc();
    }

    /// Handles one incoming text: a message or a batch.
    fn dispatch(&self, text: &str) {
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            match serde_json::from_str::<Vec<&RawValue>>(trimmed) {
                Ok(items) => items.iter().for_each(|item| self.dispatch_one(item.get())),
                Err(_) => self.invalid(text),
            }
        } else {
            self.dispatch_one(text);
        }
    }

    fn invalid(&self, text: &str) {
        self.drop_message("invalid");
        let mut end = text.len().min(200);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        tracing::debug!(server = %self.server, line = &text[..end], "upstream sent something that is not JSON-RPC; ignored");
    }

    fn dispatch_one(&self, text: &str) {
        let Ok(message) = serde_json::from_str::<Incoming>(text) else {
            return self.invalid(text);
        };
        let id = message.id.filter(|id| id.get() != "null");
        match (message.method.as_deref(), id) {
            (Some(method), Some(id)) => self.answer_server_request(method, id),
            (Some("notifications/progress"), None) => self.progress(message.params),
            (Some(_), None) => {}
            (None, Some(id)) => {
                let reply = match (message.result, message.error) {
                    (_, Some(error)) => Ok(UpstreamReply::Error(error)),
                    (Some(result), None) => {
                        Ok(UpstreamReply::Result(super::RawResult::new(result.to_owned())))
                    }
                    (None, None) => {
                        Err(UpstreamError::Protocol("response has neither result nor error".into()))
                    }
                };
                let call = serde_json::from_str::<u64>(id.get())
                    .ok()
                    .and_then(|id| self.pending.lock().ok().and_then(|mut p| p.calls.remove(&id)));
                match call {
                    Some(call) => {
                        let _ = call.answer.send(reply);
                    }
                    None => {
                        self.drop_message("unknown_id");
                        tracing::debug!(server = %self.server, id = id.get(), "answer to no call in flight; dropped");
                    }
                }
            }
            (None, None) => self.invalid(text),
        }
    }

    /// Answers a request from the server at once, so it never waits on the gateway.
    fn answer_server_request(&self, method: &str, id: &RawValue) {
        let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
        let answer = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("the gateway does not serve {method} to upstream servers"),
            }})
        };
        self.try_send(answer.to_string());
    }

    fn progress(&self, params: Option<&RawValue>) {
        let Some(params) = params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p.get()).ok())
        else {
            return self.drop_message("invalid");
        };
        let sink = params.get("progressToken").and_then(Value::as_u64).and_then(|token| {
            self.pending.lock().ok().and_then(|p| p.calls.get(&token).and_then(|c| c.progress.clone()))
        });
        // Only the validated fields go on, never the upstream's params as they came.
        let Some(update) = super::to_caller::ProgressUpdate::from_params(&params) else {
            return self.drop_message("invalid");
        };
        match sink {
            Some(sink) => {
                if sink.try_send(super::to_caller::ToCaller::Progress(update)).is_err() {
                    self.drop_message("progress_overflow");
                }
            }
            None => self.drop_message("unknown_id"),
        }
    }
}

/// Reads the connection until it ends or the gateway closes it.
async fn read(live: Arc<Live>, mut incoming: mpsc::Receiver<String>) {
    let mut stop = live.stop_reader.subscribe();
    loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(text) => live.dispatch(&text),
                None => break,
            },
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    drop(incoming);
    let end = live.ended.borrow().clone();
    live.fail_all(end.as_ref());
    let reason = end.as_ref().map_or_else(|| "closed by the gateway".to_string(), describe_end);
    let _ = live.done.send(Some(reason));
}

fn describe_end(end: &ChannelEnd) -> String {
    match end {
        ChannelEnd::Closed(why) => format!("closed: {why}"),
        ChannelEnd::Broken(why) => format!("broken: {why}"),
        ChannelEnd::MessageTooLarge { limit } => format!("a message exceeded the {limit}-byte limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fresh families, as the gateway's registry would hand them down.
    fn families() -> ConnectionMetricFamilies {
        use prometheus::Opts;
        let opts = |name: &str| Opts::new(name, name);
        ConnectionMetricFamilies {
            state: IntGaugeVec::new(opts("state"), &["server", "state"]).unwrap(),
            era: IntGaugeVec::new(opts("era"), &["server", "era"]).unwrap(),
            reconnects: IntCounterVec::new(opts("reconnects"), &["server"]).unwrap(),
            dropped: IntCounterVec::new(opts("dropped"), &["server", "reason"]).unwrap(),
        }
    }

    #[test]
    fn the_progress_token_is_the_gateways_own_and_only_when_progress_is_wanted() {
        let mut params = Map::new();
        params.insert("name".into(), json!("echo"));
        params.insert("_meta".into(), json!({"progressToken": "callers-token", "k": 1}));
        let mut request = UpstreamRequest::new("tools/call", params);
        let sent: Value = serde_json::from_str(&encode_call(7, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"], json!({"k": 1}));
        assert_eq!(sent["id"], 7);
        request.progress = Some(mpsc::channel(1).0);
        let sent: Value = serde_json::from_str(&encode_call(8, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"]["progressToken"], 8);
    }

    /// An in-process peer: answers `initialize`, and each `tools/call` with a progress
    /// notification for its token, one for a token nobody holds, then the result.
    struct ScriptedPeer;

    impl Connector for ScriptedPeer {
        fn connect(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>
        {
            Box::pin(async {
                let (outgoing, mut from_gateway) = mpsc::channel::<String>(8);
                let (to_gateway, incoming) = mpsc::channel::<String>(8);
                let (_ended_tx, ended) = watch::channel(None);
                tokio::spawn(async move {
                    let _ended_tx = _ended_tx;
                    while let Some(text) = from_gateway.recv().await {
                        let message: Value = serde_json::from_str(&text).unwrap();
                        let id = message["id"].clone();
                        let answers = match message["method"].as_str() {
                            Some("initialize") => vec![json!({"jsonrpc": "2.0", "id": id, "result": {
                                "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "p", "version": "1"}}})],
                            Some("tools/call") => {
                                let token = message["params"]["_meta"]["progressToken"].clone();
                                vec![
                                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}}),
                                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 999_999, "progress": 1}}),
                                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}),
                                ]
                            }
                            _ => vec![],
                        };
                        for answer in answers {
                            let _ = to_gateway.send(answer.to_string()).await;
                        }
                    }
                });
                Ok(MessageChannel { outgoing, incoming, ended })
            })
        }

        fn describe(&self) -> String {
            "scripted".into()
        }
    }

    #[tokio::test]
    async fn progress_reaches_the_call_that_asked_for_it_by_the_gateways_token() {
        let metrics = families();
        let settings = ConnectionSettings {
            server: "p".into(),
            transport: "stdio",
            reconnect: ReconnectSettings {
                initial: Duration::from_millis(10),
                max: Duration::from_millis(10),
                give_up_after: Duration::from_secs(60),
                slow_retry: Duration::from_secs(60),
            },
            handshake_timeout: Duration::from_secs(5),
        };
        let mut connection = Connection::start(Box::new(ScriptedPeer), settings, &metrics);
        let (sink, mut progress) = mpsc::channel(4);
        let mut request = UpstreamRequest::new("tools/call", Map::new());
        request.progress = Some(sink);
        let reply = connection.call(request).await.unwrap();
        assert!(matches!(reply, UpstreamReply::Result(_)));
        let Ok(super::super::to_caller::ToCaller::Progress(update)) = progress.try_recv() else {
            panic!("the progress notification")
        };
        assert_eq!(update.progress(), 1.0);
        assert!(progress.try_recv().is_err(), "another call's token reached this call");
        assert_eq!(metrics.dropped.with_label_values(&["p", "unknown_id"]).get(), 1);
        assert_eq!(connection.state(), ConnectionState::Ready);
        connection.shutdown(Duration::from_secs(5)).await;
        assert_eq!(connection.state(), ConnectionState::Disabled);
    }

    /// Refuses every connection, as `refusal` says, counting the attempts.
    struct Refusing {
        refusal: ConnectError,
        attempts: Arc<AtomicU64>,
    }

    impl Connector for Refusing {
        fn connect(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>
        {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let refusal = self.refusal.clone();
            Box::pin(async move { Err(refusal) })
        }

        fn describe(&self) -> String {
            "refusing".into()
        }
    }

    fn quick(server: &str) -> ConnectionSettings {
        ConnectionSettings {
            server: server.into(),
            transport: "websocket",
            reconnect: ReconnectSettings {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(2),
                give_up_after: Duration::from_secs(3600),
                slow_retry: Duration::from_secs(3600),
            },
            handshake_timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn refused_credentials_wait_for_the_slow_retry_while_an_outage_backs_off_quickly() {
        let metrics = families();
        let auth_attempts = Arc::new(AtomicU64::new(0));
        let down_attempts = Arc::new(AtomicU64::new(0));
        let auth = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::NeedsAuth { status: 401 },
                attempts: auth_attempts.clone(),
            }),
            quick("auth"),
            &metrics,
        );
        let down = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::Unreachable("refused".into()),
                attempts: down_attempts.clone(),
            }),
            quick("down"),
            &metrics,
        );
        // While the unreachable server is retried 50 times on its 1-2 ms backoff, the one that
        // refused the gateway's credentials is not tried again (its slow retry is an hour).
        while down_attempts.load(Ordering::Relaxed) < 50 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(auth_attempts.load(Ordering::Relaxed), 1);
        assert_eq!(auth.state(), ConnectionState::NeedsAuth);
        assert_eq!(down.state(), ConnectionState::Connecting);
        let refused = auth.clone().call(UpstreamRequest::new("tools/list", Map::new())).await;
        assert!(matches!(refused, Err(UpstreamError::NotConnected { state: "needs_auth" })), "{refused:?}");
        let gauge = |server: &str, state: &str| metrics.state.with_label_values(&[server, state]).get();
        assert_eq!((gauge("auth", "needs_auth"), gauge("auth", "connecting")), (1, 0));
        assert_eq!(auth.report()["last_error"], "credentials refused (HTTP 401)");
    }

    #[tokio::test]
    async fn an_outage_longer_than_the_give_up_time_ends_failed() {
        let metrics = families();
        let mut settings = quick("gone");
        settings.reconnect.give_up_after = Duration::from_millis(20);
        let attempts = Arc::new(AtomicU64::new(0));
        let connection = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::Unreachable("refused".into()),
                attempts: attempts.clone(),
            }),
            settings,
            &metrics,
        );
        let mut status = connection.shared.status.subscribe();
        let _ = status.wait_for(|s| s.state == ConnectionState::Failed).await;
        let tried = attempts.load(Ordering::Relaxed);
        assert!(tried >= 2, "{tried}");
        let refused = connection.clone().call(UpstreamRequest::new("tools/list", Map::new())).await;
        assert!(matches!(refused, Err(UpstreamError::NotConnected { state: "failed" })), "{refused:?}");
        connection.shutdown(Duration::from_secs(5)).await;
        assert_eq!(attempts.load(Ordering::Relaxed), tried, "a failed server waits for its slow retry");
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_bounded_jitter() {
        let mut backoff = Duration::from_secs(1);
        let delays: Vec<Duration> =
            (0..8).map(|_| next_backoff(&mut backoff, Duration::from_secs(30))).collect();
        for (delay, nominal) in delays.iter().zip([1u64, 2, 4, 8, 16, 30, 30, 30]) {
            let nominal = Duration::from_secs(nominal);
            assert!(
                *delay >= nominal.mul_f64(0.8) && *delay <= nominal.mul_f64(1.2),
                "{delay:?} vs {nominal:?}"
            );
        }
    }
}
