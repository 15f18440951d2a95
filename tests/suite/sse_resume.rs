//! Resumable answer streams on session-era upstreams (SEP-1699): a stream that ends before
//! the answer, after the server gave its events ids and a `retry:` time, is picked up again
//! with `GET` + `Last-Event-ID` (and the session id). Against a Python SDK 2.x server with an
//! event store that closes its own stream mid-call (what servers do during a deploy), and
//! against `tests/peers/scripted/era_peer.py early-end` for the bounds: at most five reconnections,
//! no wait past the caller's deadline, and the reconnected streams' bytes within
//! `max_response_bytes`. Each peer records the requests it got, in order.

use std::{net::SocketAddr, process::Command};

use crate::common::*;
use serde_json::{Value, json};

fn labels(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .map(|s| s["method"].as_str().unwrap_or_else(|| s["http"].as_str().unwrap()).to_string())
        .collect()
}

fn gets(seen: &[Value]) -> Vec<&Value> {
    seen.iter().filter(|s| s["http"] == "GET").collect()
}

/// A server with one static tool (neither read-only nor idempotent: one attempt per call).
fn server(name: &str, addr: SocketAddr, extra: &str) -> String {
    format!(
        r#"
[servers.{name}]
transport = "http"
url = "http://{addr}/mcp"
discover = false
{extra}
[[servers.{name}.tools]]
name = "{name}_tool"
inputSchema = {{ type = "object" }}
"#
    )
}

#[test]
fn a_stream_closed_by_a_python_sdk_server_is_resumed_with_last_event_id() {
    let port = free_port();
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/resumable_server.py")).args([&port.to_string(), "200"]);
    // The server's own word that it listens (a TCP connect could reach another process that
    // briefly held the port, and the gateway's first probe would then be refused).
    let _python =
        Proc::spawn_until("resumable_server.py (Python MCP SDK 2.x)", command, &format!("READY {port}"));
    let (_proxy, proxy) = era_peer(&["proxy", &format!("http://127.0.0.1:{port}/mcp")]);
    let config = format!("[servers.res]\ntransport = \"http\"\nurl = \"http://{proxy}/mcp\"\n");
    let gateway = Gateway::start(&config, &[]);

    let answer = gateway.call("slow_echo", json!({"text": "デプロイ中"}));
    assert_eq!(result_text(&answer), "デプロイ中", "{answer}");
    let recorded = era_seen(proxy);
    assert_eq!(
        labels(&recorded),
        // The lists the server declared (resources, prompts) are read with its tools.
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "resources/list",
            "resources/templates/list",
            "prompts/list",
            "tools/call",
            "GET"
        ],
        "{recorded:?}"
    );
    let (call, resume) = (&recorded[7], &recorded[8]);
    assert_eq!(resume["status"], 200, "{recorded:?}");
    assert!(resume["last_event_id"].as_str().is_some_and(|id| !id.is_empty()), "{recorded:?}");
    assert_eq!(resume["session"], call["session"], "the same session: {recorded:?}");
    assert_eq!(resume["protocol_version"], "2025-11-25", "{recorded:?}");

    // A call whose stream is not closed is not reconnected.
    let echo = gateway.call("echo", json!({"text": "plain"}));
    assert_eq!(result_text(&echo), "plain", "{echo}");
    assert_eq!(gets(&era_seen(proxy)).len(), 1);
}

#[test]
fn reconnections_are_bounded_by_count_and_by_the_answer_limit() {
    // Both peers end every stream before the answer: one with bare priming events, one after
    // ~300 KB of progress notifications per reconnection (1 MiB for the whole answer).
    let (_count_peer, count) = era_peer(&["early-end", "10"]);
    let (_bytes_peer, bytes) = era_peer(&["early-end", "10", "300000"]);
    for addr in [count, bytes] {
        let client = reqwest::blocking::Client::new();
        let set = client.post(format!("http://{addr}/_answer_after")).body(r#"{"n": 0}"#).send().unwrap();
        assert!(set.status().is_success());
    }
    let config = server("count", count, "") + &server("bytes", bytes, "max_response_bytes = 1048576");
    let gateway = Gateway::start(&config, &[]);

    let answer = gateway.call("count_tool", json!({}));
    let data = expect_error(&answer, -32000, "upstream_protocol");
    assert_eq!(data["attempts"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("after 5 reconnection"), "{message}");
    let recorded = era_seen(count);
    let resumed: Vec<&Value> = gets(&recorded).into_iter().map(|g| &g["last_event_id"]).collect();
    // Each reconnection names the last id the previous stream gave.
    assert_eq!(resumed, ["ev-1", "ev-2", "ev-3", "ev-4", "ev-5"], "{recorded:?}");

    let answer = gateway.call("bytes_tool", json!({}));
    let data = expect_error(&answer, -32000, "response_too_large");
    assert_eq!(data["attempts"], 1, "{answer}");
    // Three reconnected streams fit in 1 MiB; the fourth crosses it and is cut there.
    assert_eq!(gets(&era_seen(bytes)).len(), 4, "{:?}", era_seen(bytes));
}

#[test]
fn a_retry_time_past_the_callers_deadline_is_not_waited_for() {
    // The server asks for a minute; the caller's deadline is three seconds away.
    let (_peer, addr) = era_peer(&["early-end", "60000"]);
    let gateway = Gateway::start(&server("slow", addr, "deadline_ms = 3000"), &[]);
    let answer = gateway.call("slow_tool", json!({}));
    let data = expect_error(&answer, -32000, "upstream_protocol");
    assert_eq!(data["attempts"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("would pass the caller's deadline"), "{message}");
    let recorded = era_seen(addr);
    assert_eq!(
        labels(&recorded),
        ["server/discover", "initialize", "notifications/initialized", "tools/call"],
        "no reconnection: {recorded:?}"
    );
}
