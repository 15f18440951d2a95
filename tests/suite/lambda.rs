//! Lambda upstreams through the real `aws-sdk-lambda` client against a local implementation of
//! the Lambda Invoke REST API (`mcp-gateway demo-server --lambda-api`) running the demo
//! server as the function. Every answer the real service gives is produced: results, API
//! Gateway proxy bodies, `Unhandled`/`Handled` function errors, throttling, unknown functions,
//! slow functions, oversized payloads.

use crate::common::*;
use serde_json::json;

fn static_tool(server: &str, function: &str, extra: &str) -> String {
    format!(
        r#"
[servers.{server}]
transport = "lambda"
function = "{function}"
discover = false
{extra}
[[servers.{server}.tools]]
name = "manga_search"
description = "search"
inputSchema = {{ type = "object", properties = {{ query = {{ type = "string" }} }}, required = ["query"] }}
annotations = {{ readOnlyHint = true }}
"#
    )
}

fn lambda_gateway(emulator: &Demo) -> Gateway {
    let mut config = format!(
        r#"
max_body_bytes = 8388608
[aws]
endpoint_url = "http://{addr}"
region = "ap-northeast-1"
[tools.manga_search]
server = "shop"
[servers.shop]
transport = "lambda"
function = "mcp-demo"
qualifier = "live"
"#,
        addr = emulator.addr
    );
    config += &static_tool("proxy", "mcp-demo-proxy", "");
    config += &static_tool("crash", "mcp-demo-unhandled", "");
    config += &static_tool("handled", "mcp-demo-handled", "");
    config += &static_tool("throttled", "mcp-demo-throttled", "");
    config += &static_tool("missing", "no-such-function", "");
    config += &static_tool("slow", "mcp-demo-slow-3000", "timeout_ms = 300");
    Gateway::start(&config, &[])
}

#[test]
fn lambda_tools_are_discovered_and_called() {
    let emulator = Demo::lambda_api();
    let gw = lambda_gateway(&emulator);
    let names = gw.tool_names();
    assert!(names.contains(&"manga_search".to_string()), "{names:?}");
    assert!(names.contains(&"checkout".to_string()));
    // Same name on several servers: the configured route keeps the bare name, others are namespaced.
    assert!(names.contains(&"proxy__manga_search".to_string()), "{names:?}");
    let answer = gw.call("manga_search", json!({"query": "鬼滅"}));
    assert_eq!(structured(&answer)["results"][0]["manga_id"], "MNG-00000004", "{answer}");
    let via_proxy = gw.call("proxy__manga_search", json!({"query": "frieren", "language": "en"}));
    assert_eq!(structured(&via_proxy)["results"][0]["manga_id"], "MNG-00000017", "{via_proxy}");
    let metrics = gw.metrics();
    assert!(
        metrics.contains(
            "mcp_gateway_upstream_requests_total{server=\"shop\",status=\"200\",transport=\"lambda\"}"
        ),
        "{metrics}"
    );
}

#[test]
fn function_errors_throttling_and_missing_functions_map_to_the_error_table() {
    let emulator = Demo::lambda_api();
    let gw = lambda_gateway(&emulator);
    let args = json!({"query": "naruto"});

    let crash = gw.call("crash__manga_search", args.clone());
    let data = expect_error(&crash, -32000, "upstream_error");
    assert_eq!(data["retryable"], true);
    assert_eq!(data["server"], "crash");
    // Read-only tool: retried twice (the default) before giving up.
    assert_eq!(data["attempts"], 3);
    assert!(!crash.to_string().contains("signal: killed"), "function error messages are not echoed: {crash}");

    let handled = gw.call("handled__manga_search", args.clone());
    let data = expect_error(&handled, -32000, "upstream_rejected");
    assert_eq!(data["retryable"], false);
    assert_eq!(data["attempts"], 1, "a handled function error is not retried");

    let throttled = gw.call("throttled__manga_search", args.clone());
    let data = expect_error(&throttled, -32003, "rate_limited");
    assert_eq!(data["retry_after_ms"], 1000, "{throttled}");
    assert_eq!(data["retryable"], true);
    assert_eq!(data["attempts"], 3, "Retry-After (1 s, under the cap) was honoured twice");

    let missing = gw.call("missing__manga_search", args.clone());
    let data = expect_error(&missing, -32006, "upstream_misconfigured");
    assert_eq!(data["retryable"], false);
    assert!(missing["error"]["message"].as_str().unwrap().contains("no-such-function"), "{missing}");

    let metrics = gw.metrics();
    for status in ["function_error_unhandled", "function_error_handled", "429", "404"] {
        assert!(metrics.contains(&format!("status=\"{status}\"")), "no {status} in\n{metrics}");
    }
}

#[test]
fn slow_functions_time_out_at_the_configured_limit() {
    let emulator = Demo::lambda_api();
    let gw = lambda_gateway(&emulator);
    let slow = gw.call("slow__manga_search", json!({"query": "naruto"}));
    let data = expect_error(&slow, -32001, "timeout");
    assert_eq!(data["retryable"], true);
    // Cut by the server's own attempt limit (300 ms), not by the function's 3 s.
    let message = slow["error"]["message"].as_str().unwrap();
    assert!(message.contains("300ms"), "{slow}");
}

#[test]
fn payloads_over_six_megabytes_are_refused_before_sending() {
    let emulator = Demo::lambda_api();
    let gw = lambda_gateway(&emulator);
    let before = emulator.invocations("mcp-demo");
    let huge = "x".repeat(6 * 1024 * 1024 + 10);
    let answer = gw.call("manga_search", json!({"query": huge}));
    let data = expect_error(&answer, -32600, "payload_too_large");
    assert_eq!(data["retryable"], false);
    assert_eq!(emulator.invocations("mcp-demo"), before, "the oversized payload reached Lambda");
}
