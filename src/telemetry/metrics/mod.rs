//! Prometheus metrics (served at `GET /metrics`). Units are in the names (`_seconds`,
//! `_total`). Label values come from the registry and the classifier, never from raw caller
//! input, so a caller cannot blow up cardinality with made-up tool names.
//!
//! This file holds the families' struct and the exposition; their registration is
//! `register`, the bounded `tool` label (a tool's series exist from its first use, never for
//! the whole catalogue) `labels`, and the zero series each tool and server gets (and loses)
//! `series`.

mod labels;
mod register;
mod series;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, RwLock},
};

use prometheus::{Encoder, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Registry, TextEncoder};

/// Latency buckets, in seconds: from 100 µs (the gateway's own cost) to 30 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];

/// Every metric the gateway exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `mcp_gateway_tool_calls_total{tool,server,outcome}`
    pub tool_calls: IntCounterVec,
    /// `mcp_gateway_tool_call_duration_seconds{tool,server}`
    pub tool_call_duration: HistogramVec,
    /// `mcp_gateway_surface_requests_total{method,server,outcome}`: resources, prompts and
    /// completion (never a URI or a prompt name as a label).
    pub surface_requests: IntCounterVec,
    /// `mcp_gateway_surface_request_duration_seconds{method,server}`
    pub surface_request_duration: HistogramVec,
    /// `mcp_gateway_upstream_requests_total{server,transport,status}`
    pub upstream_requests: IntCounterVec,
    /// `mcp_gateway_upstream_request_duration_seconds{server,transport}`
    pub upstream_duration: HistogramVec,
    /// `mcp_gateway_in_flight`
    pub in_flight: IntGauge,
    /// `mcp_gateway_log_lines_dropped_total`: log lines dropped by the lossy writer (synced
    /// from [`super::logging::dropped_lines`] at each scrape)
    pub log_lines_dropped: prometheus::IntCounter,
    /// `mcp_gateway_log_bytes_dropped_total`: bytes of the log lines dropped by the lossy
    /// writer (its queue is bounded in bytes, `inbound.log_queue_bytes`; synced at each scrape)
    pub log_bytes_dropped: prometheus::IntCounter,
    log_sync: std::sync::Arc<std::sync::Mutex<()>>,
    /// `mcp_gateway_in_flight_waiters`: calls waiting for an identical read-only call in flight
    pub in_flight_waiters: IntGauge,
    /// `mcp_gateway_requests_total{method}` (inbound JSON-RPC messages)
    pub requests: IntCounterVec,
    /// `mcp_gateway_relayed_requests_total{method,outcome}`: server→client requests of
    /// back-channel callers' calls (`answered`, `unanswered`, `not_declared`, `limit`, `ping`)
    pub relayed_requests: IntCounterVec,
    /// `mcp_gateway_back_channel_sessions`: inbound back-channel sessions open
    pub back_channel_sessions: IntGauge,
    /// `mcp_gateway_upstream_list_changed_total{server,result}`: upstream
    /// `notifications/tools/list_changed` received, by what they caused (`refreshed`: the
    /// server's refresh ran for it, `coalesced`: absorbed by a refresh already due)
    pub upstream_list_changed: IntCounterVec,
    /// `mcp_gateway_upstream_change_streams{server}`: 1 while the gateway reads a
    /// streamable-HTTP server's change stream (session-era GET, `subscriptions/listen`)
    pub upstream_change_streams: IntGaugeVec,
    /// `mcp_gateway_listen_streams`: callers' change-notification streams open (`GET /mcp`,
    /// `subscriptions/listen`)
    pub listen_streams: IntGauge,
    /// `mcp_gateway_list_changed_sent_total`: `notifications/tools/list_changed` sent to callers
    pub list_changed_sent: prometheus::IntCounter,
    /// `mcp_gateway_resource_subscriptions{server}`: resource URIs the gateway is subscribed to
    /// upstream (once per URI, however many callers subscribed)
    pub resource_subscriptions: IntGaugeVec,
    /// `mcp_gateway_resource_updates_total{server,result}`: upstream
    /// `notifications/resources/updated`, per caller it was for: `relayed`, or dropped
    /// (`unsubscribed`, `denied`, `no_stream`, `full`, `lagged`)
    pub resource_updates: IntCounterVec,
    /// `mcp_gateway_http_rejections_total{reason}` (403, 413, parse errors)
    pub rejections: IntCounterVec,
    /// `mcp_gateway_registry_tools`
    pub registry_tools: IntGauge,
    /// `mcp_gateway_registry_refresh_total{server,outcome}`
    pub registry_refreshes: IntCounterVec,
    /// `mcp_gateway_upstream_era{server,era}` (1 for the era in use)
    pub upstream_era: IntGaugeVec,
    /// `mcp_gateway_breaker_state{server}` (0 closed, 1 open, 2 half-open)
    pub breaker_state: IntGaugeVec,
    /// `mcp_gateway_breaker_transitions_total{server,to}`
    pub breaker_transitions: IntCounterVec,
    /// `mcp_gateway_breaker_rejected_total{server}` (calls refused while open)
    pub breaker_rejected: IntCounterVec,
    /// `mcp_gateway_breaker_health_probes_total{server,result}` (`success` / `failure` /
    /// `peer`: a peer held the fleet's claim for the interval)
    pub breaker_health_probes: IntCounterVec,
    /// `mcp_gateway_retries_total{server,result}` (`taken` / `denied_by_budget`)
    pub retries: IntCounterVec,
    /// `mcp_gateway_cancellations_total{server,reason}` (`deadline` / `disconnect`)
    pub cancellations: IntCounterVec,
    /// `mcp_gateway_load_shed_total{server}`
    pub load_shed: IntCounterVec,
    /// `mcp_gateway_fallbacks_total{tool,kind}` (`stale` / `alternative`)
    pub fallbacks: IntCounterVec,
    /// `mcp_gateway_result_cache_total{tool,result}` (`hit` / `miss` / `shared`)
    pub result_cache: IntCounterVec,
    /// `mcp_gateway_result_truncations_total{tool}`
    pub truncations: IntCounterVec,
    /// `mcp_gateway_shared_state_errors_total{operation}` (Redis unreachable)
    pub shared_state_errors: IntCounterVec,
    /// `mcp_gateway_registry_lookups_total{tier,result}` (`hit`/`miss`/`negative`/`error`/`stale`)
    pub registry_lookups: IntCounterVec,
    /// `mcp_gateway_registry_miss_wakes_total{result}` (`refreshed`/`skipped`): refreshes
    /// woken by unknown-tool calls
    pub registry_miss_wakes: IntCounterVec,
    /// `mcp_gateway_registry_tool_changes_total{change}` (`added`/`removed`/`changed`)
    pub registry_tool_changes: IntCounterVec,
    /// `mcp_gateway_registry_refresh_duration_seconds{source}`
    pub registry_refresh_duration: HistogramVec,
    /// `mcp_gateway_registry_drift_tools{server,kind}` (`added`/`removed`/`schema_changed`)
    pub registry_drift: IntGaugeVec,
    /// `mcp_gateway_upstream_connection_state{server,state}`: 1 for the current state of a
    /// persistent connection, 0 for the others
    pub upstream_connection_state: IntGaugeVec,
    /// `mcp_gateway_upstream_reconnects_total{server}`: connection attempts after the first
    pub upstream_reconnects: IntCounterVec,
    /// `mcp_gateway_registry_upstreams_refused_total{reason}`: calls refused because their
    /// registry entry's URL is not allowed, or it names a configured server elsewhere ([`UPSTREAM_REFUSAL_REASONS`])
    pub registry_upstreams_refused: IntCounterVec,
    /// `mcp_gateway_registry_upstreams`: server stacks built from registry entries, alive
    pub registry_upstreams: IntGauge,
    /// `mcp_gateway_registry_upstreams_dropped_total`: registry-built stacks dropped because
    /// no live entry names their origin any more
    pub registry_upstreams_dropped: prometheus::IntCounter,
    /// `mcp_gateway_registry_remote_lookups_total{result}`: lookups below memory (Redis,
    /// DynamoDB) admitted by the miss budget, or answered unknown without one
    pub registry_remote_lookups: IntCounterVec,
    /// `mcp_gateway_upstream_dropped_messages_total{server,reason}` (`unknown_id` / `invalid`
    /// / `progress_overflow`): messages from a persistent connection that were dropped
    pub upstream_dropped_messages: IntCounterVec,
    /// `mcp_gateway_quota_rejections_total{quota,limit}` (`rate` / `concurrency`): calls
    /// refused by a quota (never sent upstream)
    pub quota_rejections: IntCounterVec,
    /// `mcp_gateway_quota_local_decisions_total{quota}`: quota decisions this instance made
    /// alone (no Redis configured, or Redis away)
    pub quota_local_decisions: IntCounterVec,
    /// `mcp_gateway_quota_redis_decisions_total{quota}`: quota decisions made in Redis
    pub quota_redis_decisions: IntCounterVec,
    /// `mcp_gateway_quota_batched_decisions_total{quota}`: calls allowed from a batch an
    /// earlier Redis decision granted (`quotas.fleet_batch_ms`)
    pub quota_batched_decisions: IntCounterVec,
    /// `mcp_gateway_quota_redis_available`: 1 while quota decisions go to Redis, 0 while they
    /// are local (and when no Redis is configured)
    pub quota_redis_available: IntGauge,
    /// `mcp_gateway_audit_lines_dropped_total`: audit lines lost (queue full or sink failing;
    /// synced from the audit sink at each scrape)
    pub audit_lines_dropped: prometheus::IntCounter,
    audit_dropped_source: std::sync::Arc<std::sync::OnceLock<super::lossy::DroppedLines>>,
    /// `mcp_gateway_tool_name_collisions{kind}`: tool names offered and not granted as asked
    /// (see [`crate::registry::catalog::Collision`])
    pub tool_name_collisions: IntGaugeVec,
    /// `mcp_gateway_catalogue_refusals_total{server,list,bound}`: lists refused whole for
    /// going over a bound (see [`crate::registry::bounds`]); the server's last good list stays
    pub catalogue_refusals: IntCounterVec,
    /// `mcp_gateway_alias_map_builds_total`: exported-name maps built (one per catalogue
    /// snapshot at most, at its first alias-shaped lookup)
    pub alias_map_builds: prometheus::IntCounter,
    /// `mcp_gateway_tool_definitions_pending`: changed definitions waiting for approval
    pub tool_definitions_pending: IntGauge,
    /// `mcp_gateway_tool_definitions_pinned`: approved (pinned) definitions
    pub tool_definitions_pinned: IntGauge,
    /// `mcp_gateway_prompt_definitions_pending`: changed prompt definitions waiting for approval
    pub prompt_definitions_pending: IntGauge,
    /// `mcp_gateway_prompt_definitions_pinned`: approved (pinned) prompt definitions
    pub prompt_definitions_pinned: IntGauge,
    /// `mcp_gateway_metric_series`: series in the last exposition (histogram buckets count)
    pub metric_series: IntGauge,
    /// `mcp_gateway_metric_tool_label_values`: distinct tools admitted as `tool` label values
    pub tool_label_values: IntGauge,
    /// `mcp_gateway_auth_rejections_total{reason}`: requests answered 401 (`missing_token`,
    /// `expired`, `wrong_issuer`, `wrong_audience`, `bad_signature`, `unknown_key`, …)
    pub auth_rejections: IntCounterVec,
    /// `mcp_gateway_policy_decisions_total{rule,server,outcome}`: `tools/call` decisions by
    /// the deciding policy's `@id` (`default_deny` when none matched) and `allow`/`deny`
    pub policy_decisions: IntCounterVec,
    /// `mcp_gateway_guardrail_decisions_total{hook,tool,decision}`: guardrail hooks' decisions
    /// (`allow`, `deny`, `replace`, `timeout_open`, `timeout_closed`, `error_open`,
    /// `error_closed`); `hook` is a configured hook's name, `tool` the bounded tool label
    pub guardrail_decisions: IntCounterVec,
    /// `mcp_gateway_approvals_total{tool,outcome}`: approvals `asked`, `approved`, `denied`,
    /// `used`, `expired`, `lost` (a restart), `refused_full` (bounds); `tool` the bounded label
    pub approvals: IntCounterVec,
    /// `mcp_gateway_approvals_waiting`: approvals asked and not decided, or approved and unused
    pub approvals_waiting: IntGauge,
    /// `mcp_gateway_policy_reloads_total{outcome}`: `loaded`, `invalid`, `unreadable`
    pub policy_reloads: IntCounterVec,
    /// `mcp_gateway_config_reloads_total{trigger,outcome}`: configuration reloads by what asked
    /// (`signal`, `watch`, `admin`) and how they ended (`applied`, `unchanged`, `invalid`)
    pub config_reloads: IntCounterVec,
    /// `mcp_gateway_config_generation`: the configuration generation in force (1 at start,
    /// one more per applied reload)
    pub config_generation: IntGauge,
    /// `mcp_gateway_config_restart_required`: keys the configuration file changed that keep
    /// their running values until a restart (0: the file is wholly in force)
    pub config_restart_required: IntGauge,
    /// `mcp_gateway_background_restarts_total{loop}`: background loops restarted after a
    /// panic ([`crate::supervise`]; one series per loop, synced at each scrape)
    pub background_restarts: IntCounterVec,
    /// `mcp_gateway_upstream_token_fetches_total{server,kind,outcome}`: token requests (OAuth)
    /// and AWS credential resolutions (SigV4) for upstream credentials; `outcome` is `success`,
    /// `refused` or `unavailable`
    pub upstream_token_fetches: IntCounterVec,
    /// `mcp_gateway_upstream_auth_retries_total{server}`: calls run again with a renewed
    /// token after the server refused the cached one (HTTP 401)
    pub upstream_auth_retries: IntCounterVec,
    /// Servers (`\0server`) whose series exist already.
    initialised: std::sync::Arc<Mutex<HashSet<String>>>,
    /// The tools admitted as label values.
    tool_labels: Arc<RwLock<ToolLabels>>,
}

/// The tool label values in use, bounded by a cap: the tools called so far, each with its
/// zero series.
#[derive(Debug)]
pub(super) struct ToolLabels {
    /// Admitted tool → the server its series carry.
    pub(super) admitted: HashMap<Arc<str>, Arc<str>, foldhash::fast::RandomState>,
    /// Servers whose `tool="other"` zero series exist.
    pub(super) others: HashSet<Arc<str>, foldhash::fast::RandomState>,
    pub(super) cap: usize,
}

/// The `tool` label of every tool over the cap (and of tools not in the catalogue).
pub const OTHER_TOOL: &str = "other";

/// Why a registry entry's upstream URL was refused (`registry_upstreams_refused`).
pub const UPSTREAM_REFUSAL_REASONS: &[&str] =
    &["not_allowlisted", "special_address", "invalid_url", crate::registry::borrow::REASON];
/// Remote registry lookups for names below the catalogue (`registry_remote_lookups`).
pub const REMOTE_LOOKUP_RESULTS: &[&str] = &["admitted", "over_budget"];

impl Metrics {
    /// Reports the audit sink's lost lines as `mcp_gateway_audit_lines_dropped_total`.
    pub fn watch_audit_drops(&self, dropped: super::lossy::DroppedLines) {
        let _ = self.audit_dropped_source.set(dropped);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        {
            let _one_at_a_time = self.log_sync.lock().unwrap_or_else(|p| p.into_inner());
            let dropped = super::logging::dropped_lines();
            let seen = self.log_lines_dropped.get();
            if dropped > seen {
                self.log_lines_dropped.inc_by(dropped - seen);
            }
            let dropped = super::logging::dropped_bytes();
            let seen = self.log_bytes_dropped.get();
            if dropped > seen {
                self.log_bytes_dropped.inc_by(dropped - seen);
            }
            let supervision = crate::supervise::global();
            for which in crate::supervise::Loop::ALL {
                let counter = self.background_restarts.with_label_values(&[which.name()]);
                let (restarts, seen) = (supervision.restarts(*which), counter.get());
                if restarts > seen {
                    counter.inc_by(restarts - seen);
                }
            }
            if let Some(source) = self.audit_dropped_source.get() {
                let (dropped, seen) = (source.get(), self.audit_lines_dropped.get());
                if dropped > seen {
                    self.audit_lines_dropped.inc_by(dropped - seen);
                }
            }
        }
        let mut families = self.registry.gather();
        let series: usize = families
            .iter()
            .flat_map(|family| {
                let histogram = family.get_field_type() == prometheus::proto::MetricType::HISTOGRAM;
                family.get_metric().iter().map(move |metric| match histogram {
                    // Buckets, +Inf, _sum and _count.
                    true => metric.get_histogram().get_bucket().len() + 3,
                    false => 1,
                })
            })
            .sum();
        self.metric_series.set(series as i64);
        // The gauge is part of this exposition too: patch its sample in what was gathered.
        if let Some(family) = families.iter_mut().find(|f| f.name() == "mcp_gateway_metric_series")
            && let Some(metric) = family.mut_metric().first_mut()
        {
            let mut gauge = prometheus::proto::Gauge::default();
            gauge.set_value(series as f64);
            metric.set_gauge(gauge);
        }
        let mut out = Vec::with_capacity(16 * 1024);
        let _ = TextEncoder::new().encode(&families, &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The method label: known methods by name, everything else as `other` (bounded cardinality).
pub fn method_label(method: &str) -> &'static str {
    match method {
        "tools/call" => "tools/call",
        "tools/list" => "tools/list",
        "initialize" => "initialize",
        "notifications/initialized" => "notifications/initialized",
        "notifications/cancelled" => "notifications/cancelled",
        "server/discover" => "server/discover",
        "ping" => "ping",
        "logging/setLevel" => "logging/setLevel",
        "subscriptions/listen" => "subscriptions/listen",
        _ => "other",
    }
}
