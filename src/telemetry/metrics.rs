//! Prometheus metrics (served at `GET /metrics`). Units are in the names (`_seconds`,
//! `_total`). Label values come from the registry and the classifier, never from raw caller
//! input, so a caller cannot blow up cardinality with made-up tool names.

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
    /// `mcp_gateway_requests_total{method}` (inbound JSON-RPC messages)
    pub requests: IntCounterVec,
    /// `mcp_gateway_http_rejections_total{reason}` (403, 413, parse errors)
    pub rejections: IntCounterVec,
    /// `mcp_gateway_registry_tools`
    pub registry_tools: IntGauge,
    /// `mcp_gateway_registry_refresh_total{server,outcome}`
    pub registry_refreshes: IntCounterVec,
    /// `mcp_gateway_upstream_era{server,era}` (1 for the era in use)
    pub upstream_era: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let tool_calls = IntCounterVec::new(
            Opts::new("mcp_gateway_tool_calls_total", "tools/call requests by tool, server and outcome"),
            &["tool", "server", "outcome"],
        )
        .expect("valid metric");
        let tool_call_duration = HistogramVec::new(
            HistogramOpts::new(
                "mcp_gateway_tool_call_duration_seconds",
                "tools/call latency through the gateway, in seconds",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["tool", "server"],
        )
        .expect("valid metric");
        let upstream_requests = IntCounterVec::new(
            Opts::new(
                "mcp_gateway_upstream_requests_total",
                "requests sent to upstream servers, by HTTP or invoke status",
            ),
            &["server", "transport", "status"],
        )
        .expect("valid metric");
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "mcp_gateway_upstream_request_duration_seconds",
                "one upstream attempt, in seconds",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["server", "transport"],
        )
        .expect("valid metric");
        let in_flight = IntGauge::new("mcp_gateway_in_flight", "tools/call requests being processed")
            .expect("valid metric");
        let requests = IntCounterVec::new(
            Opts::new("mcp_gateway_requests_total", "inbound JSON-RPC messages by method"),
            &["method"],
        )
        .expect("valid metric");
        let rejections = IntCounterVec::new(
            Opts::new("mcp_gateway_http_rejections_total", "inbound HTTP requests refused before dispatch"),
            &["reason"],
        )
        .expect("valid metric");
        let registry_tools =
            IntGauge::new("mcp_gateway_registry_tools", "tools in the catalogue").expect("valid metric");
        let registry_refreshes = IntCounterVec::new(
            Opts::new("mcp_gateway_registry_refresh_total", "tools/list refreshes by server and outcome"),
            &["server", "outcome"],
        )
        .expect("valid metric");
        let upstream_era = IntGaugeVec::new(
            Opts::new("mcp_gateway_upstream_era", "protocol era each upstream speaks (1 = in use)"),
            &["server", "era"],
        )
        .expect("valid metric");
        for collector in [
            Box::new(tool_calls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(tool_call_duration.clone()),
            Box::new(upstream_requests.clone()),
            Box::new(upstream_duration.clone()),
            Box::new(in_flight.clone()),
            Box::new(requests.clone()),
            Box::new(rejections.clone()),
            Box::new(registry_tools.clone()),
            Box::new(registry_refreshes.clone()),
            Box::new(upstream_era.clone()),
        ] {
            registry.register(collector).expect("metric names are unique");
        }
        let build = IntGaugeVec::new(Opts::new("mcp_gateway_build_info", "build information"), &["version"])
            .expect("valid metric");
        build.with_label_values(&[crate::VERSION]).set(1);
        registry.register(Box::new(build)).expect("metric names are unique");
        Self {
            registry,
            tool_calls,
            tool_call_duration,
            upstream_requests,
            upstream_duration,
            in_flight,
            requests,
            rejections,
            registry_tools,
            registry_refreshes,
            upstream_era,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
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
        _ => "other",
    }
}
