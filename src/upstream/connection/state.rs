//! Where a persistent connection is in its life, what it went through, and the metrics that
//! show it: every change of state goes through [`Shared::transition`], which keeps the status,
//! the `mcp_gateway_upstream_connection_state` gauges and the log in step.

use std::time::Instant;

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use super::Shared;

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

/// The connection's current state and history, for `/admin/connections` and `/readyz`.
#[derive(Debug, Clone)]
pub(super) struct Status {
    pub(super) state: ConnectionState,
    pub(super) since: Instant,
    pub(super) last_error: Option<String>,
    /// Failed attempts since the connection was last stable.
    pub(super) failed_attempts: u32,
    /// Connections that reached `ready`.
    pub(super) connects: u64,
    pub(super) protocol_version: Option<&'static str>,
    /// The first connection attempt has concluded (calls stop waiting for it).
    pub(super) first_attempt_done: bool,
}

impl Status {
    /// Before the first connection attempt.
    pub(super) fn connecting() -> Self {
        Self {
            state: ConnectionState::Connecting,
            since: Instant::now(),
            last_error: None,
            failed_attempts: 0,
            connects: 0,
            protocol_version: None,
            first_attempt_done: false,
        }
    }
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
pub(super) struct ConnectionMetrics {
    state: Vec<(ConnectionState, IntGauge)>,
    /// `mcp_gateway_upstream_era`: these transports are session era.
    era: [IntGauge; 2],
    pub(super) reconnects: IntCounter,
    pub(super) dropped: IntCounterVec,
}

impl ConnectionMetrics {
    pub(super) fn new(families: &ConnectionMetricFamilies, server: &str) -> Self {
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
    pub(super) fn set(&self, current: ConnectionState) {
        if current == ConnectionState::Ready {
            self.era[0].set(1);
            self.era[1].set(0);
        }
        for (state, gauge) in &self.state {
            gauge.set(i64::from(*state == current));
        }
    }
}

impl Shared {
    /// Moves to `state`, logging the transition (only transitions: a failure that keeps the
    /// state is logged at debug).
    pub(super) fn transition(
        &self,
        state: ConnectionState,
        reason: Option<String>,
        update: impl FnOnce(&mut Status),
    ) {
        self.transition_inner(state, reason, true, update)
    }

    pub(super) fn transition_inner(
        &self,
        state: ConnectionState,
        reason: Option<String>,
        set_metric: bool,
        update: impl FnOnce(&mut Status),
    ) {
        // The reason is shown in logs, `/capabilities` and `/admin/connections`: a connector's
        // error may name the URL it failed to reach.
        let reason = reason.map(|r| crate::redact::text(&r));
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
}
