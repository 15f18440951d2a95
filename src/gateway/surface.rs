//! What the rooms above the gateway ([`crate::server`] and the binary's commands) may ask of
//! it. [`Gateway`]'s fields are private: the inbound side counts a refusal, registers a call
//! for cancellation, asks for a refresh or an approval through the methods here, each named
//! after what it does, and never reaches into the metrics, the notifiers or the tables behind
//! them.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};

use super::{Gateway, Upstream, cancel};
use crate::backchannel::sessions;
use crate::{
    config::Config,
    identity::Authenticator,
    registry::{
        entry::RegistryEntry,
        pins::{Approval, Kind},
    },
    telemetry::metrics::method_label,
};

impl Gateway {
    /// The configuration in force (the last applied reload's, or the one it started with).
    pub fn config(&self) -> Arc<Config> {
        self.settings().config.clone()
    }

    /// How the listener establishes callers (`[auth]`).
    pub fn authenticator(&self) -> &Authenticator {
        &self.authenticator
    }

    /// Inbound back-channel sessions (callers that can answer server→client requests).
    pub fn sessions(&self) -> &Arc<sessions::Sessions> {
        &self.sessions
    }

    /// Counts a request the inbound side refused before it became a call
    /// (`mcp_gateway_rejections_total{reason}`).
    pub fn record_rejection(&self, reason: &str) {
        self.metrics.rejections.with_label_values(&[reason]).inc();
    }

    /// The counter a listener increments by itself for every connection it refuses over its
    /// cap (`mcp_gateway_rejections_total{reason="connections_over_cap"}`).
    pub fn connections_over_cap_counter(&self) -> prometheus::IntCounter {
        self.metrics.rejections.with_label_values(&["connections_over_cap"])
    }

    /// Counts a request that named no valid caller identity, by the reason it was refused.
    pub fn record_auth_rejection(&self, reason: &str) {
        self.metrics.auth_rejections.with_label_values(&[reason]).inc();
    }

    /// Counts one decoded JSON-RPC message by its method (unknown methods as `other`).
    pub fn record_request(&self, method: &str) {
        self.metrics.requests.with_label_values(&[method_label(method)]).inc();
    }

    /// Counts a batch entry or message that was not valid JSON-RPC.
    pub fn record_invalid_request(&self) {
        self.metrics.requests.with_label_values(&["invalid"]).inc();
    }

    /// The counter of server→client requests relayed to callers, by method.
    pub fn relayed_requests_counter(&self) -> prometheus::IntCounterVec {
        self.metrics.relayed_requests.clone()
    }

    /// `tools/call`s in flight now (for the shutdown log lines).
    pub fn calls_in_flight(&self) -> i64 {
        self.metrics.in_flight.get()
    }

    /// The Prometheus text, with a zero series for every known server and every tool called
    /// so far (see [`crate::telemetry::metrics`]).
    pub fn render_metrics(&self) -> Vec<u8> {
        let upstreams = self.all_upstreams();
        self.metrics.ensure_series(upstreams.iter().map(|u| (u.name.as_ref(), u.transport.as_str())));
        self.metrics.render()
    }

    /// Registers a `tools/call` in flight under the caller's id, so that a
    /// `notifications/cancelled` from the same caller can drop it (see [`cancel`]).
    pub fn register_cancellable(
        &self,
        scope: cancel::Scope,
        id: &Value,
        fired: Arc<std::sync::atomic::AtomicBool>,
    ) -> cancel::Registration<'_> {
        self.cancellable.register(scope, id, fired)
    }

    /// Cancels the caller's calls in flight under `id`; returns how many there were.
    pub fn cancel_call(&self, scope: cancel::Scope, id: &Value) -> usize {
        self.cancellable.cancel(scope, id)
    }

    /// A configured server's stack, by name (not the registry-built ones).
    pub fn configured_upstream(&self, name: &str) -> Option<Arc<Upstream>> {
        self.settings().upstreams.get(name).cloned()
    }

    /// The configured servers' stacks, by name.
    pub fn configured_upstreams(&self) -> Vec<Arc<Upstream>> {
        self.settings().upstreams.values().cloned().collect()
    }

    /// The DynamoDB registry's active tools as of the last refresh.
    pub fn registry_entries(&self) -> Vec<RegistryEntry> {
        self.registry_entries.read().map(|e| e.clone()).unwrap_or_default()
    }

    /// The Redis and DynamoDB tiers' state (`None`: neither is configured).
    pub fn registry_tiers_report(&self) -> Option<Value> {
        self.registry.dynamic.as_ref().map(|d| d.report())
    }

    /// Refreshes every server and registry tier at once (an operator's request; not
    /// rate-limited, answered before the refresh runs).
    pub fn force_refresh(&self) {
        self.refresh_forced.notify_one();
    }

    /// Approved tool definitions (`catalogue.pin_tool_definitions`; `None` when off).
    pub fn pins(&self) -> Option<&crate::registry::pins::PinStore> {
        self.pins.as_deref()
    }

    /// Approves pending definition changes (a tool or a prompt, optionally of one server, or
    /// all of them); on an approval the catalogue and the federation's index are rebuilt from
    /// the lists already known. `None`: definition pinning is off.
    pub fn approve_definitions(
        &self,
        named: Option<(Kind, &str)>,
        server: Option<&str>,
        all: bool,
    ) -> Option<Approval> {
        let pins = self.pins.as_ref()?;
        let approval = pins.approve(named, server, all);
        if let Approval::Approved(_) = &approval {
            self.metrics.tool_definitions_pending.set(pins.pending_count(Kind::Tool) as i64);
            self.repin_prompts();
            self.rebuild_now.notify_one();
        }
        Some(approval)
    }

    /// Closes every upstream connection and session once the gateway is done serving:
    /// persistent connections stop together (stdio children: SIGTERM, then a kill after the
    /// grace), so shutdown leaves no child process behind; session-era HTTP sessions are
    /// ended; the dedicated upstream sessions of back-channel callers are closed.
    pub async fn close_connections(&self) {
        let upstreams = self.all_upstreams();
        let grace = Duration::from_millis(self.settings().config.defaults.stdio_stop_grace_ms)
            .saturating_add(Duration::from_secs(2));
        let persistent = upstreams.iter().filter_map(|u| u.connection.as_ref()).map(|c| c.shutdown(grace));
        futures_util::future::join_all(persistent).await;
        for upstream in &upstreams {
            if let Some(http) = &upstream.http {
                http.close().await;
            }
        }
        self.sessions.close_all().await;
    }

    /// Writes out the audit lines still queued (the calls have drained), waiting at most
    /// `within`.
    pub fn flush_audit(&self, within: Duration) {
        if let Some(audit) = &self.audit {
            audit.close(within);
        }
    }

    /// `GET /admin/calls`: the recent calls, newest first, as JSON text
    /// (`telemetry::recent_calls`).
    pub fn recent_calls_report(&self) -> Vec<u8> {
        self.recent_calls.report()
    }

    /// `GET /admin/overview`: readiness, the catalogue's size, and the last minute's figures
    /// for the gateway and each server with its transport, era, connection, breaker and last
    /// error (`telemetry::overview`).
    pub fn overview_report(&self) -> Value {
        use crate::telemetry::overview::Figures;
        let window = self.overview.window(&self.metrics);
        let figures = |f: Option<&Figures>| match f {
            Some(f) => json!({
                "calls_per_sec": f.calls_per_sec,
                "error_ratio": f.error_ratio,
                "p50_ms": f.p50_ms,
                "p99_ms": f.p99_ms,
                "calls": f.calls,
            }),
            None => {
                json!({"calls_per_sec": 0.0, "error_ratio": null, "p50_ms": null, "p99_ms": null, "calls": 0})
            }
        };
        let servers: Vec<Value> = self
            .all_upstreams()
            .iter()
            .map(|u| {
                let era = u.http.as_ref().and_then(|h| h.era()).map(|era| match era {
                    crate::protocol::mcp::Era::Modern => crate::protocol::mcp::MODERN_VERSION,
                    crate::protocol::mcp::Era::Legacy => "session",
                });
                let mut entry = figures(window.servers.get(u.name.as_ref()));
                if let Some(map) = entry.as_object_mut() {
                    map.insert("name".into(), json!(u.name.as_ref()));
                    map.insert("transport".into(), json!(u.transport.as_str()));
                    map.insert("era".into(), json!(era));
                    map.insert("connection".into(), json!(u.connection.as_ref().map(|c| c.state().as_str())));
                    map.insert("breaker".into(), json!(u.breaker.state().name()));
                    // Why it is not closed, and since when (null while closed).
                    let breaker = u.breaker.report();
                    map.insert("breaker_reason".into(), breaker["reason"].clone());
                    map.insert("breaker_since".into(), breaker["since"].clone());
                    map.insert("last_error".into(), self.recent_calls.last_error(&u.name));
                }
                entry
            })
            .collect();
        let mut gateway = figures(Some(&window.gateway));
        if let Some(map) = gateway.as_object_mut() {
            map.insert("ready".into(), json!(self.readiness.is_ready()));
            map.insert("tools".into(), json!(self.catalog().snapshot().tools().len()));
            map.insert("window_secs".into(), json!(window.seconds));
        }
        json!({"gateway": gateway, "servers": servers})
    }
}
