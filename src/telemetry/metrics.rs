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
//!
//! The `tool` label is bounded: at most `catalogue.max_tool_label_values` distinct tools are
//! admitted (first come, kept while they stay in the catalogue); calls of any other tool are
//! counted under `tool="other"`. When a tool leaves the catalogue ([`Metrics::retain_tools`])
//! its series are removed, so an upstream that renames its tools on every list cannot grow the
//! series without bound. `mcp_gateway_metric_series` reports the count at each scrape.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, RwLock},
};

use crate::error::Category;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

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
    /// Tools (`tool\0server`) and servers whose series exist already.
    initialised: std::sync::Arc<Mutex<HashSet<String>>>,
    /// The tools admitted as label values.
    tool_labels: Arc<RwLock<ToolLabels>>,
}

/// The tool label values in use, bounded by a cap.
#[derive(Debug)]
struct ToolLabels {
    /// Admitted tool → the server its series carry.
    admitted: HashMap<Arc<str>, Arc<str>, foldhash::fast::RandomState>,
    cap: usize,
}

/// The `tool` label of every tool over the cap (and of tools not in the catalogue).
pub const OTHER_TOOL: &str = "other";

/// Default cap on distinct tool label values (`catalogue.max_tool_label_values`).
const DEFAULT_TOOL_LABEL_CAP: usize = 20_000;

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
    Category::Forbidden,
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
const SHARED_STATE_OPERATIONS: &[&str] = &["connect", "publish", "poll", "subscribe", "quota"];
const REJECTION_REASONS: &[&str] = &[
    "forbidden_origin",
    "forbidden_host",
    "payload_too_large",
    "parse_error",
    "unsupported_protocol_version",
    "batch_too_large",
    "batch_answer_too_large",
    "body_read_timeout",
    "sessions_full",
    "session_too_large",
    "connections_over_cap",
    "admin_unauthorized",
    "admin_forbidden",
    "admin_elsewhere",
];
/// Why a registry entry's upstream URL was refused (`registry_upstreams_refused`).
pub const UPSTREAM_REFUSAL_REASONS: &[&str] =
    &["not_allowlisted", "special_address", "invalid_url", crate::registry::borrow::REASON];
/// Remote registry lookups for names below the catalogue (`registry_remote_lookups`).
pub const REMOTE_LOOKUP_RESULTS: &[&str] = &["admitted", "over_budget"];

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
            surface_requests: counters(
                &r,
                "mcp_gateway_surface_requests_total",
                "resources/read, prompts/get and completion/complete requests by method, server and outcome",
                &["method", "server", "outcome"],
            ),
            surface_request_duration: histograms(
                &r,
                "mcp_gateway_surface_request_duration_seconds",
                "resources/read, prompts/get and completion/complete latency through the gateway, in seconds",
                &["method", "server"],
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
            log_bytes_dropped: {
                let counter = prometheus::IntCounter::new(
                    "mcp_gateway_log_bytes_dropped_total",
                    "bytes of log lines dropped because stdout did not keep up",
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
            upstream_list_changed: counters(
                &r,
                "mcp_gateway_upstream_list_changed_total",
                "upstream notifications/tools/list_changed received, by whether a refresh ran for it",
                &["server", "result"],
            ),
            upstream_change_streams: gauges(
                &r,
                "mcp_gateway_upstream_change_streams",
                "1 while a streamable-HTTP server's change stream is open (GET or subscriptions/listen)",
                &["server"],
            ),
            listen_streams: gauge(
                &r,
                "mcp_gateway_listen_streams",
                "callers' change-notification streams open (GET /mcp, subscriptions/listen)",
            ),
            list_changed_sent: {
                let counter = prometheus::IntCounter::new(
                    "mcp_gateway_list_changed_sent_total",
                    "notifications/tools/list_changed sent to callers",
                )
                .expect("valid metric");
                r.register(Box::new(counter.clone())).expect("metric names are unique");
                counter
            },
            resource_subscriptions: gauges(
                &r,
                "mcp_gateway_resource_subscriptions",
                "resource URIs the gateway is subscribed to upstream, once per URI",
                &["server"],
            ),
            resource_updates: counters(
                &r,
                "mcp_gateway_resource_updates_total",
                "upstream notifications/resources/updated, relayed to a subscribed caller or dropped (by why)",
                &["server", "result"],
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
            breaker_health_probes: counters(
                &r,
                "mcp_gateway_breaker_health_probes_total",
                "health probes of servers whose circuit is open, by result",
                &["server", "result"],
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
            quota_rejections: counters(
                &r,
                "mcp_gateway_quota_rejections_total",
                "calls refused by a quota, by quota name and limit (rate or concurrency)",
                &["quota", "limit"],
            ),
            quota_local_decisions: counters(
                &r,
                "mcp_gateway_quota_local_decisions_total",
                "quota decisions made by this instance alone (no Redis configured, or Redis away)",
                &["quota"],
            ),
            quota_redis_decisions: counters(
                &r,
                "mcp_gateway_quota_redis_decisions_total",
                "quota decisions made in Redis, shared by the fleet (round trips)",
                &["quota"],
            ),
            quota_batched_decisions: counters(
                &r,
                "mcp_gateway_quota_batched_decisions_total",
                "calls allowed from a batch of a quota's rate that an earlier Redis decision granted",
                &["quota"],
            ),
            quota_redis_available: gauge(
                &r,
                "mcp_gateway_quota_redis_available",
                "1 while quota decisions go to Redis, 0 while they are made locally",
            ),
            audit_lines_dropped: {
                let counter = prometheus::IntCounter::new(
                    "mcp_gateway_audit_lines_dropped_total",
                    "audit lines lost because the audit sink did not keep up or failed",
                )
                .expect("valid metric");
                r.register(Box::new(counter.clone())).expect("metric names are unique");
                counter
            },
            audit_dropped_source: Default::default(),
            catalogue_refusals: counters(
                &r,
                "mcp_gateway_catalogue_refusals_total",
                "upstream lists refused whole for going over a catalogue bound (the last good list stays served), by server, list and bound",
                &["server", "list", "bound"],
            ),
            alias_map_builds: {
                let counter = prometheus::IntCounter::new(
                    "mcp_gateway_alias_map_builds_total",
                    "maps from exported (model-API) tool names to tools built, at most one per catalogue snapshot",
                )
                .expect("valid metric");
                r.register(Box::new(counter.clone())).expect("metric names are unique");
                counter
            },
            tool_name_collisions: gauges(
                &r,
                "mcp_gateway_tool_name_collisions",
                "tool names servers offered and did not get as asked, by kind (alias_of_another_server and namespaced_clash are refused)",
                &["kind"],
            ),
            tool_definitions_pending: gauge(
                &r,
                "mcp_gateway_tool_definitions_pending",
                "changed tool definitions not served until approved (catalogue.pin_tool_definitions)",
            ),
            tool_definitions_pinned: gauge(
                &r,
                "mcp_gateway_tool_definitions_pinned",
                "approved tool definitions (catalogue.pin_tool_definitions)",
            ),
            prompt_definitions_pending: gauge(
                &r,
                "mcp_gateway_prompt_definitions_pending",
                "changed prompt definitions not served until approved (catalogue.pin_tool_definitions)",
            ),
            prompt_definitions_pinned: gauge(
                &r,
                "mcp_gateway_prompt_definitions_pinned",
                "approved prompt definitions (catalogue.pin_tool_definitions)",
            ),
            metric_series: gauge(
                &r,
                "mcp_gateway_metric_series",
                "series in the last /metrics exposition (each histogram bucket counts)",
            ),
            tool_label_values: gauge(
                &r,
                "mcp_gateway_metric_tool_label_values",
                "distinct tools admitted as tool label values (catalogue.max_tool_label_values caps it)",
            ),
            auth_rejections: counters(
                &r,
                "mcp_gateway_auth_rejections_total",
                "inbound requests refused for their caller identity (HTTP 401), by reason",
                &["reason"],
            ),
            policy_decisions: counters(
                &r,
                "mcp_gateway_policy_decisions_total",
                "tools/call policy decisions by deciding rule, server and outcome",
                &["rule", "server", "outcome"],
            ),
            guardrail_decisions: counters(
                &r,
                "mcp_gateway_guardrail_decisions_total",
                "guardrail hooks' decisions on tools/call, by hook, tool and decision",
                &["hook", "tool", "decision"],
            ),
            background_restarts: {
                let metric = counters(
                    &r,
                    "mcp_gateway_background_restarts_total",
                    "background loops restarted after a panic, by loop",
                    &["loop"],
                );
                for which in crate::supervise::Loop::ALL {
                    metric.with_label_values(&[which.name()]);
                }
                metric
            },
            policy_reloads: counters(
                &r,
                "mcp_gateway_policy_reloads_total",
                "policy file reloads by outcome",
                &["outcome"],
            ),
            config_reloads: {
                let metric = counters(
                    &r,
                    "mcp_gateway_config_reloads_total",
                    "configuration reloads by trigger and outcome",
                    &["trigger", "outcome"],
                );
                for trigger in ["signal", "watch", "admin"] {
                    for outcome in ["applied", "unchanged", "invalid"] {
                        metric.with_label_values(&[trigger, outcome]);
                    }
                }
                metric
            },
            config_generation: gauge(
                &r,
                "mcp_gateway_config_generation",
                "the configuration generation in force (1 at start, one more per applied reload)",
            ),
            config_restart_required: gauge(
                &r,
                "mcp_gateway_config_restart_required",
                "changed configuration keys that keep their running values until a restart",
            ),
            registry_upstreams_refused: counters(
                &r,
                "mcp_gateway_registry_upstreams_refused_total",
                "calls refused because their registry entry's upstream URL is not allowed",
                &["reason"],
            ),
            registry_upstreams: gauge(
                &r,
                "mcp_gateway_registry_upstreams",
                "server stacks built from registry entries, alive",
            ),
            registry_upstreams_dropped: {
                let metric = prometheus::IntCounter::new(
                    "mcp_gateway_registry_upstreams_dropped_total",
                    "registry-built server stacks dropped because no live entry names them",
                )
                .expect("valid metric");
                r.register(Box::new(metric.clone())).expect("metric names are unique");
                metric
            },
            registry_remote_lookups: counters(
                &r,
                "mcp_gateway_registry_remote_lookups_total",
                "registry lookups below memory: admitted by the miss budget, or refused (over_budget)",
                &["result"],
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
            tool_labels: Arc::new(RwLock::new(ToolLabels {
                admitted: HashMap::default(),
                cap: DEFAULT_TOOL_LABEL_CAP,
            })),
        };
        for tier in REGISTRY_TIERS {
            for result in LOOKUP_RESULTS {
                metrics.registry_lookups.with_label_values(&[tier, result]);
            }
        }
        for kind in crate::registry::catalog::COLLISION_KINDS {
            metrics.tool_name_collisions.with_label_values(&[kind]);
        }
        for operation in SHARED_STATE_OPERATIONS {
            metrics.shared_state_errors.with_label_values(&[operation]);
        }
        for reason in REJECTION_REASONS {
            metrics.rejections.with_label_values(&[reason]);
        }
        for reason in UPSTREAM_REFUSAL_REASONS {
            metrics.registry_upstreams_refused.with_label_values(&[reason]);
        }
        for result in REMOTE_LOOKUP_RESULTS {
            metrics.registry_remote_lookups.with_label_values(&[result]);
        }
        metrics
    }

    /// Sets the cap on distinct tool label values (`catalogue.max_tool_label_values`).
    pub fn set_tool_label_cap(&self, cap: usize) {
        if let Ok(mut labels) = self.tool_labels.write() {
            labels.cap = cap.max(1);
        }
    }

    /// The `tool` label value of `tool`: its name when admitted, else [`OTHER_TOOL`].
    pub fn tool_label<'a>(&self, tool: &'a str) -> &'a str {
        match self.tool_labels.read() {
            Ok(labels) if labels.admitted.contains_key(tool) => tool,
            _ => OTHER_TOOL,
        }
    }

    /// Makes the catalogue's tools (`(tool, server)`) the admitted label values: tools that left
    /// it (or moved to another server) lose their series, new ones are admitted while the cap
    /// allows (in the order given). Returns how many series sets were removed.
    ///
    /// Lock order, as in [`Self::ensure_series`]: the set of initialised series first, then the
    /// admitted labels. A scrape creating a tool's zero series and a refresh removing that tool
    /// are thereby one before the other: the series cannot be created after their removal (a
    /// leak that grew with every rename) and the two cannot wait on each other.
    pub fn retain_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
        let current: HashMap<&str, &str> = tools.into_iter().collect();
        let Ok(mut seen) = self.initialised.lock() else { return 0 };
        let Ok(mut labels) = self.tool_labels.write() else { return 0 };
        let departed: Vec<(Arc<str>, Arc<str>)> = labels
            .admitted
            .iter()
            .filter(|(tool, server)| current.get(tool.as_ref()) != Some(&server.as_ref()))
            .map(|(tool, server)| (tool.clone(), server.clone()))
            .collect();
        for (tool, server) in &departed {
            labels.admitted.remove(tool);
            self.remove_tool_series(tool, server);
            seen.remove(&format!("{tool}\0{server}"));
        }
        let mut fresh: Vec<(&str, &str)> = current
            .iter()
            .filter(|(tool, _)| !labels.admitted.contains_key(**tool))
            .map(|(t, s)| (*t, *s))
            .collect();
        fresh.sort_unstable();
        for (tool, server) in fresh {
            if labels.admitted.len() >= labels.cap {
                break;
            }
            labels.admitted.insert(tool.into(), server.into());
        }
        self.tool_label_values.set(labels.admitted.len() as i64);
        departed.len()
    }

    /// Drops every per-tool series of `tool` on `server`.
    fn remove_tool_series(&self, tool: &str, server: &str) {
        let outcomes = CALL_OUTCOMES
            .iter()
            .copied()
            .chain(["shared_failure"])
            .chain(Category::ALL.iter().map(|c| c.as_str()));
        for outcome in outcomes {
            let _ = self.tool_calls.remove_label_values(&[tool, server, outcome]);
        }
        let _ = self.tool_call_duration.remove_label_values(&[tool, server]);
        for kind in ["stale", "alternative"] {
            let _ = self.fallbacks.remove_label_values(&[tool, kind]);
        }
        for result in ["hit", "miss", "shared"] {
            let _ = self.result_cache.remove_label_values(&[tool, result]);
        }
        let _ = self.truncations.remove_label_values(&[tool]);
    }

    /// Creates the zero series of every `(tool, server)` and `(server, transport)` not seen
    /// before (cheap when nothing is new: one set lookup each). Tools not admitted as label
    /// values get theirs under [`OTHER_TOOL`].
    /// Removes the gauge series of a server a reload removed: a gauge left at its last value
    /// would go on saying, say, that a breaker is open, for a server that is gone (and keep
    /// its alert firing). Its counters stay: they only ever stop growing.
    pub fn forget_server(&self, server: &str, connection_states: &[&str]) {
        let _ = self.breaker_state.remove_label_values(&[server]);
        let _ = self.upstream_change_streams.remove_label_values(&[server]);
        let _ = self.resource_subscriptions.remove_label_values(&[server]);
        for era in ["session", "2026-07-28"] {
            let _ = self.upstream_era.remove_label_values(&[server, era]);
        }
        for state in connection_states {
            let _ = self.upstream_connection_state.remove_label_values(&[server, state]);
        }
        if let Ok(mut seen) = self.initialised.lock() {
            seen.remove(&format!("\0{server}"));
        }
    }

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
            for result in ["success", "failure", "peer"] {
                self.breaker_health_probes.with_label_values(&[server, result]);
            }
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
            for bound in crate::registry::bounds::Bound::ALL {
                self.catalogue_refusals.with_label_values(&[
                    server,
                    crate::registry::bounds::ListKind::Tools.as_str(),
                    bound.as_str(),
                ]);
            }
            if matches!(transport, "websocket" | "sse" | "stdio") {
                self.upstream_reconnects.with_label_values(&[server]);
                for reason in ["unknown_id", "invalid", "progress_overflow"] {
                    self.upstream_dropped_messages.with_label_values(&[server, reason]);
                }
            }
        }
        for (tool, server) in tools {
            let tool = self.tool_label(tool);
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
