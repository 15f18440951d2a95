//! Alert ratios are never empty, and `/metrics` does not grow with the catalogue: a fresh
//! gateway's `/metrics` has a zero series per known server for every outcome the alert rules
//! use, and none per tool; a tool gets its whole zero set at its first call (a tool learned
//! by a later refresh too), so its ratios are 0 rather than empty from then on. Before any
//! call, a catalogue of 5,006 tools exports what one of 206 does.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Demo, Gateway, free_port};

const DEMO_TOOLS: &[&str] =
    &["add_to_cart", "checkout", "inventory_check", "manga_recommendations", "manga_search", "price_lookup"];

/// The value of the one sample of `name` carrying exactly these labels (order as exported).
fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (label_text, value) = rest.split_once("} ")?;
        let mut got: Vec<(&str, &str)> = label_text
            .split("\",")
            .map(|kv| {
                let (k, v) = kv.split_once("=\"").unwrap();
                (k, v.trim_end_matches('"'))
            })
            .collect();
        got.sort();
        let mut want = labels.to_vec();
        want.sort();
        (got == want).then(|| value.parse().unwrap())
    })
}

/// The zero series of `tools` (every outcome but `success`, which their one call may have
/// moved) and of `server` (unless `transport` is `None`).
fn assert_zero_series(metrics: &str, server: &str, transport: Option<&str>, tools: &[&str]) {
    let zero = |name: &str, labels: &[(&str, &str)]| {
        assert_eq!(
            sample(metrics, name, labels),
            Some(0.0),
            "{name}{labels:?} missing or non-zero in:\n{metrics}"
        );
    };
    for tool in tools {
        for outcome in [
            "tool_error",
            "fallback_stale",
            "upstream_error",
            "upstream_unavailable",
            "timeout",
            "rate_limited",
            "circuit_open",
            "overloaded",
            "upstream_misconfigured",
            "upstream_protocol",
            "internal",
        ] {
            zero("mcp_gateway_tool_calls_total", &[("tool", tool), ("server", server), ("outcome", outcome)]);
        }
        zero("mcp_gateway_fallbacks_total", &[("tool", tool), ("kind", "stale")]);
        zero("mcp_gateway_fallbacks_total", &[("tool", tool), ("kind", "alternative")]);
        zero("mcp_gateway_result_truncations_total", &[("tool", tool)]);
    }
    // Server-level series (skipped for a server that has already failed, whose counters moved).
    let Some(transport) = transport else { return };
    for status in ["connect_error", "timeout", "5xx", "429", "function_error_unhandled"] {
        zero(
            "mcp_gateway_upstream_requests_total",
            &[("server", server), ("transport", transport), ("status", status)],
        );
    }
    for to in ["open", "half_open", "closed"] {
        zero("mcp_gateway_breaker_transitions_total", &[("server", server), ("to", to)]);
    }
    zero("mcp_gateway_breaker_rejected_total", &[("server", server)]);
    zero("mcp_gateway_load_shed_total", &[("server", server)]);
    zero("mcp_gateway_retries_total", &[("server", server), ("result", "denied_by_budget")]);
    zero("mcp_gateway_cancellations_total", &[("server", server), ("reason", "deadline")]);
    for tier in ["redis", "dynamodb"] {
        zero("mcp_gateway_registry_lookups_total", &[("tier", tier), ("result", "error")]);
    }
    zero("mcp_gateway_shared_state_errors_total", &[("operation", "poll")]);
}

#[test]
fn a_fresh_gateway_exports_server_series_and_a_tool_its_zero_set_from_its_first_call() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let metrics = gw.metrics();
    assert_zero_series(&metrics, "demo", Some("http"), &[]);
    assert_eq!(tool_series(&metrics), 0, "no tool series before a call:\n{metrics}");
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert!(answer.get("result").is_some(), "{answer}");
    let metrics = gw.metrics();
    assert_zero_series(&metrics, "demo", None, &["price_lookup"]);
    let success = [("tool", "price_lookup"), ("server", "demo"), ("outcome", "success")];
    assert_eq!(sample(&metrics, "mcp_gateway_tool_calls_total", &success), Some(1.0));
    for tool in DEMO_TOOLS.iter().filter(|t| **t != "price_lookup") {
        assert!(!metrics.contains(&format!("tool=\"{tool}\"")), "{tool} was never called:\n{metrics}");
    }
    // A made-up name gets no series (cardinality stays bounded by the catalogue).
    gw.call("made_up", json!({}));
    assert!(!gw.metrics().contains("tool=\"made_up\""));
}

#[test]
fn metrics_do_not_grow_with_the_catalogue_before_use() {
    let exposition = |extra: usize| {
        let demo = Demo::with_extra_tools(extra);
        let gw =
            Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
        assert_eq!(gw.tool_names().len(), extra + 6);
        gw.metrics()
    };
    let small = exposition(200);
    let large = exposition(5_000);
    assert_eq!(tool_series(&small), 0, "{small}");
    assert_eq!(tool_series(&large), 0, "{large}");
    let series = |m: &str| {
        let line = m.lines().find(|l| l.starts_with("mcp_gateway_metric_series ")).unwrap_or_default();
        line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_default()
    };
    assert!(series(&small) > 0.0, "{small}");
    assert_eq!(series(&small), series(&large), "the same series for 206 and 5,006 tools");
    assert!(large.len() < 64 * 1024, "{} bytes", large.len());
}

#[test]
fn tools_learned_by_a_refresh_get_their_zero_set_at_their_first_call() {
    let port = free_port();
    let config = format!(
        "refresh_interval_secs = 1\nready_min_tools = 0\n[servers.late]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gw = Gateway::start(&config, &[]);
    let before = gw.metrics();
    // The server itself is known from the configuration: its series exist already.
    assert_eq!(sample(&before, "mcp_gateway_load_shed_total", &[("server", "late")]), Some(0.0), "{before}");

    let _demo = Demo::start(false, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gw.tool_names().contains(&"manga_search".to_string()) {
        assert!(Instant::now() < deadline, "the refresh never learned the tools");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(tool_series(&gw.metrics()), 0);
    let answer = gw.call("manga_search", json!({"query": "naruto"}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_zero_series(&gw.metrics(), "late", None, &["manga_search"]);
}

/// Samples carrying a `tool` label.
fn tool_series(metrics: &str) -> usize {
    metrics.lines().filter(|l| !l.starts_with('#') && l.contains("tool=\"")).count()
}
