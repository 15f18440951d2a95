//! A hostile upstream process (`tests/peers/scripted/hostile_server.py`) against the real gateway:
//! an endless SSE stream, one 100 MB SSE line, 50 MB JSON bodies (chunked and announced),
//! a body that drips a byte a second, 5xx and 4xx answers with huge bodies. Each call gets a
//! clear JSON-RPC error of the cap or timeout category, and the gateway's peak resident set
//! (`VmHWM`) stays far below what buffering any one of those answers would take.

use crate::common::*;
use serde_json::json;

/// One HTTP server per hostile mode, each with one tool that is neither read-only nor
/// idempotent, so no call is retried and each error is the first attempt's. The modes that
/// must end in a timeout get a short one; the others a long one, so that on a loaded machine
/// a cap is never mistaken for a timeout.
fn config(addr: std::net::SocketAddr, modes: &[&str]) -> String {
    let mut config = String::from("[defaults]\ntimeout_ms = 30000\ndeadline_ms = 60000\n");
    for mode in modes {
        let name = mode.replace('-', "_");
        let timeout_ms = if matches!(*mode, "endless-sse" | "drip") { 1500 } else { 30000 };
        config += &format!(
            r#"
[servers.{name}]
transport = "http"
url = "http://{addr}/{mode}"
discover = false
timeout_ms = {timeout_ms}
[[servers.{name}.tools]]
name = "{name}_tool"
description = "a tool of a hostile server"
inputSchema = {{ type = "object" }}
"#
        );
    }
    config
}

#[test]
fn hostile_answers_get_clear_errors_and_the_gateway_memory_stays_bounded() {
    let (_hostile, addr) = hostile_server(&[]);
    let modes = [
        "endless-sse",
        "long-line",
        "big-json",
        "big-json-length",
        "drip",
        "huge-5xx",
        "huge-400",
        "echo-headers",
    ];
    let gateway = Gateway::start(&config(addr, &modes), &[]);
    let pid = gateway.proc.child.id();
    let baseline = peak_rss_kib(pid);

    // (mode, code, category): what the caller is told, and that it is told at once.
    let expected = [
        ("endless-sse", -32001, "timeout"),
        ("long-line", -32000, "response_too_large"),
        ("big-json", -32000, "response_too_large"),
        ("big-json-length", -32000, "response_too_large"),
        ("drip", -32001, "timeout"),
        ("huge-5xx", -32000, "upstream_error"),
        ("huge-400", -32000, "upstream_protocol"),
    ];
    let mut report = Vec::new();
    for (mode, code, category) in expected {
        let tool = format!("{}_tool", mode.replace('-', "_"));
        let response = gateway.call(&tool, json!({}));
        let data = expect_error(&response, code, category);
        assert_eq!(data["attempts"], 1, "{mode}: {response}");
        if category == "response_too_large" {
            let message = response["error"]["message"].as_str().unwrap();
            assert!(message.contains("8388608-byte limit"), "{mode}: the message names the cap: {message}");
            assert_eq!(data["retryable"], false, "{mode}: the same call would bring the same answer");
        }
        report.push(format!("{mode}: peak {} KiB", peak_rss_kib(pid)));
    }

    // The gateway is still healthy and answers an ordinary call.
    let ok = gateway.call("echo_headers_tool", json!({}));
    assert!(ok.get("result").is_some(), "{ok}");

    let peak = peak_rss_kib(pid);
    eprintln!("gateway VmHWM: at start {baseline} KiB, after all hostile answers {peak} KiB; {report:?}");
    // Buffering the 100 MB line or a 50 MB body alone would exceed this several times over.
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB (start {baseline} KiB); {report:?}");
}

#[test]
fn a_smaller_cap_per_server_applies_to_json_and_sse_answers_alike() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = config(addr, &["big-json", "long-line"]);
    // Both keys set through the environment, as ECS task definitions do.
    let gateway = Gateway::start(
        &config,
        &[
            ("MCP_GATEWAY_SERVERS__BIG_JSON__MAX_RESPONSE_BYTES", "65536"),
            ("MCP_GATEWAY_DEFAULTS__MAX_RESPONSE_BYTES", "131072"),
        ],
    );
    let big = gateway.call("big_json_tool", json!({}));
    expect_error(&big, -32000, "response_too_large");
    assert!(big["error"]["message"].as_str().unwrap().contains("65536-byte limit"), "{big}");
    let line = gateway.call("long_line_tool", json!({}));
    expect_error(&line, -32000, "response_too_large");
    assert!(line["error"]["message"].as_str().unwrap().contains("131072-byte limit"), "{line}");
}

#[test]
fn a_lambda_payload_over_the_cap_is_refused() {
    // The SDK reads a payload whole, so the cap is checked on what it received.
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        r#"
[aws]
endpoint_url = "http://{addr}"
region = "us-east-1"
[servers.fat]
transport = "lambda"
function = "big-fn"
discover = false
max_response_bytes = 1048576
[[servers.fat.tools]]
name = "fat_tool"
description = "answers 2 MB"
inputSchema = {{ type = "object" }}
annotations = {{ readOnlyHint = true }}
"#
    );
    let gateway = Gateway::start(&config, &[]);
    let response = gateway.call("fat_tool", json!({}));
    let data = expect_error(&response, -32000, "response_too_large");
    assert_eq!(data["attempts"], 1, "not retried, though the tool is read-only: {response}");
    assert_eq!(hostile_hits(addr, "/2015-03-31/functions/big-fn/invocations"), 1);
}
