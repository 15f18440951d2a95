//! Prometheus metrics (served at `GET /metrics`). Units are in the names (`_seconds`,
//! `_total`). Label values come from the registry and the classifier, never from raw caller
//! input, so a caller cannot blow up cardinality with made-up tool names.
//!
//! Labelled counters are pre-initialised: every known tool and server gets a zero series for
//! each outcome an alert divides by or counts (call outcomes and error categories, upstream
//! statuses, breaker transitions, fallbacks, shedding, retries, registry tier errors), so a
//! ratio such as `errors / calls` is 0 rather than empty before the first error. Fixed label
//! sets are created at construction; per-tool and per-server ones by [`Metrics::ensure_series`],
//! which the `/metrics` handlers call with the current catalogue, so tools learned by a refresh
//! have their series at the next scrape.

use std::{collections::HashSet, sync::Mutex};

use crate::error::Category;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Latency buckets, in seconds: from 100 µs (the gateway's own cost) to 30 s.
const LATENCY_BUCKETS: &[f64] = &[
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
    /// `mcp_gateway_upstream_requests_total{server,transport,status}`
    pub upstream_requests: IntCounterVec,
    /// `mcp_gateway_upstream_request_duration_seconds{server,transport}`
    pub upstream_duration: HistogramVec,
    /// `mcp_gateway_in_flight`
    pub in_flight: IntGauge,
    /// `mcp_gateway_log_lines_dropped_total`: log lines dropped by the lossy writer (synced
    /// from [`super::logging::dropped_lines`] at each scrape)
    pub log_lines_dropped: prometheus::IntCounter,
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
    /// `mcp_gateway_upstream_dropped_messages_total{server,reason}` (`unknown_id` / `invalid`
    /// / `progress_overflow`): messages from a persistent connection that were dropped
    pub upstream_dropped_messages: IntCounterVec,
    /// `mcp_gateway_upstream_token_fetches_total{server,kind,outcome}`: token requests (OAuth)
    /// and AWS credential resolutions (SigV4) for upstream credentials; `outcome` is `success`,
    /// `refused` or `unavailable`
    pub upstream_token_fetches: IntCounterVec,
    /// `mcp_gateway_upstream_auth_retries_total{server}`: calls run again with a renewed
    /// token after the server refused the cached one (HTTP 401)
    pub upstream_auth_retries: IntCounterVec,
    /// Tools (`tool\0server`) and servers whose series exist already.
    initialised: std::sync::Arc<Mutex<HashSet<String>>>,
}

/// `tool_calls` outcomes given a zero series per tool: successes, tool errors, fallbacks and
/// every error category a call can end in (the alert rules count them all).
const CALL_OUTCOMES: &[&str] =
    &["success", "tool_error", "cache_hit", "shared", "fallback_stale", "fallback_alternative"];
const CALL_ERROR_CATEGORIES: &[Category] = &[
    Category::BadInput,
    Category::PayloadTooLarge,
    Category::UpstreamError,
    Category::UpstreamUnavailable,
    Category::Timeout,
    Category::RateLimited,
    Category::CircuitOpen,
    Category::Overloaded,
    Category::UpstreamMisconfigured,
    Category::UpstreamAuth,
    Category::UpstreamRejected,
    Category::UpstreamProtocol,
    Category::Internal,
];
/// Upstream attempt statuses given a zero series per server.
const UPSTREAM_STATUSES: &[&str] = &[
    "200",
    "connect_error",
    "io_error",
    "timeout",
    "429",
    "404",
    "500",
    "502",
    "503",
    "504",
    "5xx",
    "protocol_error",
    "function_error_unhandled",
    "function_error_handled",
    "401",
    "403",
    "not_connected",
];
const BREAKER_TARGETS: &[&str] = &["open", "half_open", "closed"];
const REGISTRY_TIERS: &[&str] = &["memory", "redis", "dynamodb"];
const LOOKUP_RESULTS: &[&str] = &["hit", "miss", "negative", "error", "stale"];
const SHARED_STATE_OPERATIONS: &[&str] = &["connect", "publish", "poll", "subscribe"];
const REJECTION_REASONS: &[&str] = &[
    "forbidden_origin",
    "forbidden_host",
    "payload_too_large",
    "parse_error",
    "unsupported_protocol_version",
];

fn counters(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("metric names are unique");
    metric
}

fn gauges(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("metric names are unique");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let metric = IntGauge::new(name, help).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("metric names are unique");
    metric
}

fn histograms(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()), labels)
        .expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("metric names are unique");
    metric
}

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new();
        let build = gauges(&r, "mcp_gateway_build_info", "build information", &["version"]);
        build.with_label_values(&[crate::VERSION]).set(1);
        let metrics = Self {
            tool_calls: counters(
                &r,
                "mcp_gateway_tool_calls_total",
                "tools/call requests by tool, server and outcome",
                &["tool", "server", "outcome"],
            ),
            tool_call_duration: histograms(
                &r,
                "mcp_gateway_tool_call_duration_seconds",
                "tools/call latency through the gateway, in seconds",
                &["tool", "server"],
            ),
            upstream_requests: counters(
                &r,
                "mcp_gateway_upstream_requests_total",
                "attempts sent to upstream servers, by HTTP or invoke status",
                &["server", "transport", "status"],
            ),
            upstream_duration: histograms(
                &r,
                "mcp_gateway_upstream_request_duration_seconds",
                "one upstream attempt, in seconds",
                &["server", "transport"],
            ),
            in_flight: gauge(&r, "mcp_gateway_in_flight", "tools/call requests being processed"),
            log_lines_dropped: {
                let counter = prometheus::IntCounter::new(
                    "mcp_gateway_log_lines_dropped_total",
                    "log lines dropped because stdout did not keep up",
                )
                .expect("valid metric");
                r.register(Box::new(counter.clone())).expect("metric names are unique");
                counter
            },
            log_sync: std::sync::Arc::default(),
            in_flight_waiters: gauge(
                &r,
                "mcp_gateway_in_flight_waiters",
                "calls waiting for an identical read-only call in flight",
            ),
            relayed_requests: counters(
                &r,
                "mcp_gateway_relayed_requests_total",
                "server-to-client requests of back-channel callers' calls, by outcome",
                &["method", "outcome"],
            ),
            back_channel_sessions: gauge(
                &r,
                "mcp_gateway_back_channel_sessions",
                "inbound back-channel sessions open (callers that can answer server requests)",
            ),
            requests: counters(
                &r,
                "mcp_gateway_requests_total",
                "inbound JSON-RPC messages by method",
                &["method"],
            ),
            rejections: counters(
                &r,
                "mcp_gateway_http_rejections_total",
                "inbound HTTP requests refused before dispatch",
                &["reason"],
            ),
            registry_tools: gauge(&r, "mcp_gateway_registry_tools", "tools in the catalogue"),
            registry_refreshes: counters(
                &r,
                "mcp_gateway_registry_refresh_total",
                "tools/list refreshes by server and outcome",
                &["server", "outcome"],
            ),
            upstream_era: gauges(
                &r,
                "mcp_gateway_upstream_era",
                "protocol era each upstream speaks (1 = in use)",
                &["server", "era"],
            ),
            breaker_state: gauges(
                &r,
                "mcp_gateway_breaker_state",
                "circuit breaker state (0 closed, 1 open, 2 half-open)",
                &["server"],
            ),
            breaker_transitions: counters(
                &r,
                "mcp_gateway_breaker_transitions_total",
                "circuit breaker transitions by target state",
                &["server", "to"],
            ),
            breaker_rejected: counters(
                &r,
                "mcp_gateway_breaker_rejected_total",
                "calls refused because the circuit was open",
                &["server"],
            ),
            retries: counters(
                &r,
                "mcp_gateway_retries_total",
                "retries taken and retries denied by the budget",
                &["server", "result"],
            ),
            cancellations: counters(
                &r,
                "mcp_gateway_cancellations_total",
                "upstream calls cancelled by deadline or caller disconnect",
                &["server", "reason"],
            ),
            load_shed: counters(
                &r,
                "mcp_gateway_load_shed_total",
                "calls shed by the per-server concurrency limit",
                &["server"],
            ),
            fallbacks: counters(
                &r,
                "mcp_gateway_fallbacks_total",
                "fallbacks served instead of a failed call",
                &["tool", "kind"],
            ),
            result_cache: counters(
                &r,
                "mcp_gateway_result_cache_total",
                "read-only result cache lookups",
                &["tool", "result"],
            ),
            truncations: counters(
                &r,
                "mcp_gateway_result_truncations_total",
                "tool results cut to the size budget",
                &["tool"],
            ),
            shared_state_errors: counters(
                &r,
                "mcp_gateway_shared_state_errors_total",
                "Redis operations for shared state that failed",
                &["operation"],
            ),
            registry_lookups: counters(
                &r,
                "mcp_gateway_registry_lookups_total",
                "registry lookups by tier and result",
                &["tier", "result"],
            ),
            registry_miss_wakes: counters(
                &r,
                "mcp_gateway_registry_miss_wakes_total",
                "refresh wake-ups by unknown-tool calls: refreshed or skipped (rate limit)",
                &["result"],
            ),
            registry_tool_changes: counters(
                &r,
                "mcp_gateway_registry_tool_changes_total",
                "tool definitions added, removed or changed by refreshes",
                &["change"],
            ),
            registry_refresh_duration: histograms(
                &r,
                "mcp_gateway_registry_refresh_duration_seconds",
                "registry refresh duration, in seconds",
                &["source"],
            ),
            registry_drift: gauges(
                &r,
                "mcp_gateway_registry_drift_tools",
                "tools differing between the registry and the server's live tools/list",
                &["server", "kind"],
            ),
            upstream_connection_state: gauges(
                &r,
                "mcp_gateway_upstream_connection_state",
                "state of each persistent upstream connection (1 = current state)",
                &["server", "state"],
            ),
            upstream_reconnects: counters(
                &r,
                "mcp_gateway_upstream_reconnects_total",
                "connection attempts to persistent upstreams after the first",
                &["server"],
            ),
            upstream_dropped_messages: counters(
                &r,
                "mcp_gateway_upstream_dropped_messages_total",
                "messages from persistent upstreams dropped: answers to no call, invalid JSON-RPC, progress overflow",
                &["server", "reason"],
            ),
            upstream_token_fetches: counters(
                &r,
                "mcp_gateway_upstream_token_fetches_total",
                "token requests and AWS credential resolutions for upstream credentials, by outcome",
                &["server", "kind", "outcome"],
            ),
            upstream_auth_retries: counters(
                &r,
                "mcp_gateway_upstream_auth_retries_total",
                "calls run again with a renewed token after the server refused the cached one (HTTP 401)",
                &["server"],
            ),
            registry: r,
            initialised: Default::default(),
        };
        for tier in REGISTRY_TIERS {
            for result in LOOKUP_RESULTS {
                metrics.registry_lookups.with_label_values(&[tier, result]);
            }
        }
        for operation in SHARED_STATE_OPERATIONS {
            metrics.shared_state_errors.with_label_values(&[operation]);
        }
        for reason in REJECTION_REASONS {
            metrics.rejections.with_label_values(&[reason]);
        }
        metrics
    }

    /// Creates the zero series of every `(tool, server)` and `(server, transport)` not seen
    /// before (cheap when nothing is new: one set lookup each).
    pub fn ensure_series<'a>(
        &self,
        tools: impl IntoIterator<Item = (&'a str, &'a str)>,
        servers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        let Ok(mut seen) = self.initialised.lock() else { return };
        for (server, transport) in servers {
            if !seen.insert(format!("\0{server}")) {
                continue;
            }
            for status in UPSTREAM_STATUSES {
                self.upstream_requests.with_label_values(&[server, transport, status]);
            }
            self.upstream_duration.with_label_values(&[server, transport]);
            for to in BREAKER_TARGETS {
                self.breaker_transitions.with_label_values(&[server, to]);
            }
            self.breaker_rejected.with_label_values(&[server]);
            self.load_shed.with_label_values(&[server]);
            for result in ["taken", "denied_by_budget"] {
                self.retries.with_label_values(&[server, result]);
            }
            for reason in ["deadline", "disconnect"] {
                self.cancellations.with_label_values(&[server, reason]);
            }
            for outcome in ["success", "failure"] {
                self.registry_refreshes.with_label_values(&[server, outcome]);
            }
            if matches!(transport, "websocket" | "sse" | "stdio") {
                self.upstream_reconnects.with_label_values(&[server]);
                for reason in ["unknown_id", "invalid", "progress_overflow"] {
                    self.upstream_dropped_messages.with_label_values(&[server, reason]);
                }
            }
        }
        for (tool, server) in tools {
            if !seen.insert(format!("{tool}\0{server}")) {
                continue;
            }
            let outcomes =
                CALL_OUTCOMES.iter().copied().chain(CALL_ERROR_CATEGORIES.iter().map(|c| c.as_str()));
            for outcome in outcomes {
                self.tool_calls.with_label_values(&[tool, server, outcome]);
            }
            self.tool_call_duration.with_label_values(&[tool, server]);
            for kind in ["stale", "alternative"] {
                self.fallbacks.with_label_values(&[tool, kind]);
            }
            for result in ["hit", "miss", "shared"] {
                self.result_cache.with_label_values(&[tool, result]);
            }
            self.truncations.with_label_values(&[tool]);
        }
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
        }
        let mut out = Vec::with_capacity(16 * 1024);
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
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
        _ => "other",
    }
}
