//! Interoperability with MCP peers nobody here wrote: the official TypeScript "everything"
//! server (session era, SSE answers), a Python SDK 2.x server (modern era), and the Python
//! SDK client talking to the gateway in both eras.

use std::{process::Command, time::Duration};

use crate::common::*;
use serde_json::{Value, json};

#[test]
fn the_typescript_everything_server_through_the_gateway_with_sessions_and_sse() {
    let port = free_port();
    let mut everything = everything_server(port);
    let gw = Gateway::start(&http_server("everything", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let names = gw.tool_names();
    assert!(names.contains(&"echo".to_string()), "{names:?}");
    assert!(names.len() >= 10, "{names:?}");
    let echo = gw.call("echo", json!({"message": "こんにちは"}));
    assert!(result_text(&echo).contains("こんにちは"), "{echo}");
    let sum = gw.call("get-sum", json!({"a": 2, "b": 40}));
    assert!(result_text(&sum).contains("42"), "{sum}");
    // The everything server's own schema validation is mirrored by the gateway's.
    let invalid = gw.call("get-sum", json!({"a": "two"}));
    expect_error(&invalid, -32602, "bad_input");
    let metrics = gw.metrics();
    assert!(
        metrics.contains("mcp_gateway_upstream_era{era=\"session\",server=\"everything\"} 1"),
        "{metrics}"
    );

    // Session expiry: the server restarts (all sessions gone); the next call re-initializes
    // transparently and is replayed once.
    drop(everything.child.kill());
    let _ = everything.child.wait();
    everything = everything_server(port);
    let after = gw.call("echo", json!({"message": "after restart"}));
    assert!(result_text(&after).contains("after restart"), "{after}");
    drop(everything);
}

#[test]
fn a_python_sdk_server_through_the_gateway_in_the_modern_era() {
    let port = free_port();
    let _python = python_server(port);
    let gw = Gateway::start(&http_server("python", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    assert_eq!(gw.tool_names(), ["add", "shout"]);
    let added = gw.call("add", json!({"a": 20, "b": 22}));
    assert_eq!(added["result"]["structuredContent"]["result"], 42, "{added}");
    let shouted = gw.call("shout", json!({"text": "manga"}));
    assert_eq!(result_text(&shouted), "MANGA");
    expect_error(&gw.call("add", json!({"a": 1})), -32602, "bad_input");
    let metrics = gw.metrics();
    assert!(
        metrics.contains("mcp_gateway_upstream_era{era=\"2026-07-28\",server=\"python\"} 1"),
        "{metrics}"
    );
}

fn python_client(gateway: &Gateway, mode: &str, tool: &str, arguments: Value) -> Value {
    let output = Command::new(python())
        .arg(peers_dir().join("clients/python_client.py"))
        .args([&gateway.url("/mcp"), mode, tool, &arguments.to_string()])
        .output()
        .expect("python client runs");
    assert!(
        output.status.success(),
        "python client ({mode}) failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.proc.output()
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn the_python_sdk_client_lists_and_calls_tools_through_the_gateway_in_both_eras() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    for mode in ["legacy", "2026-07-28", "auto"] {
        let out = python_client(&gw, mode, "manga_search", json!({"query": "ワンピース", "max_results": 2}));
        let tools: Vec<&str> = out["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert!(tools.contains(&"manga_search") && tools.len() == 6, "{mode}: {tools:?}");
        let results = &out["result"]["structuredContent"]["results"];
        assert_eq!(results.as_array().unwrap().len(), 2, "{mode}: {out}");
        assert_eq!(results[0]["manga_id"], "MNG-00000001", "{mode}: {out}");
    }
}

#[test]
fn the_python_sdk_client_sees_tool_errors_as_results() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let out = python_client(&gw, "2026-07-28", "price_lookup", json!({"manga_id": "MNG-00000000"}));
    assert_eq!(out["result"]["isError"], true, "{out}");
    let _ = Duration::ZERO;
}
