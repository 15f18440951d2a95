//! Alert ratios are never empty: a fresh gateway's `/metrics` already has a zero series per
//! known tool and server for every outcome the alert rules use, and tools learned by a later
//! refresh get theirs too.

use std::time::{Duration, Instant};

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
            "success",
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
fn a_fresh_gateway_exports_zero_series_for_every_demo_tool_and_server() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let metrics = gw.metrics();
    assert_zero_series(&metrics, "demo", Some("http"), DEMO_TOOLS);
    // A made-up name gets no series (cardinality stays bounded by the catalogue).
    assert!(!metrics.contains("tool=\"made_up\""));
}

#[test]
fn tools_learned_by_a_refresh_get_their_zero_series() {
    let port = free_port();
    let config = format!(
        "refresh_interval_secs = 1\nready_min_tools = 0\n[servers.late]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gw = Gateway::start(&config, &[]);
    let before = gw.metrics();
    assert!(
        sample(
            &before,
            "mcp_gateway_tool_calls_total",
            &[("tool", "manga_search"), ("server", "late"), ("outcome", "success")]
        )
        .is_none()
    );
    // The server itself is known from the configuration: its series exist already.
    assert_eq!(sample(&before, "mcp_gateway_load_shed_total", &[("server", "late")]), Some(0.0), "{before}");

    let _demo = Demo::start(false, port);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gw.tool_names().contains(&"manga_search".to_string()) {
        assert!(Instant::now() < deadline, "the refresh never learned the tools");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_zero_series(&gw.metrics(), "late", None, DEMO_TOOLS);
}
