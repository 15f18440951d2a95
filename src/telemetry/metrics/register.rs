//! Every metric family's name, help text and labels, registered once in [`Metrics::new`],
//! with the zero series of the fixed label sets (tiers, reasons, kinds) created there too.
//! Separate from the struct: this is the long, declarative list an operator greps for a
//! metric's name.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::{
    LATENCY_BUCKETS, Metrics, REMOTE_LOOKUP_RESULTS, ToolLabels, UPSTREAM_REFUSAL_REASONS,
    labels::DEFAULT_TOOL_LABEL_CAP,
};

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
            approvals: counters(
                &r,
                "mcp_gateway_approvals_total",
                "approvals of tool calls by tool and outcome (asked, approved, denied, used, expired, lost, refused_full)",
                &["tool", "outcome"],
            ),
            approvals_waiting: gauge(
                &r,
                "mcp_gateway_approvals_waiting",
                "approvals asked and not decided, or approved and not used yet",
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
                others: Default::default(),
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
}
