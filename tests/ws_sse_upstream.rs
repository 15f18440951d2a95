//! WebSocket and HTTP+SSE (2024-11-05) upstreams through the gateway binary, against servers
//! nobody here wrote: the Python SDK 1.x WebSocket server, `server-everything` in its SSE mode
//! and a Python SDK 2.x SSE server. Tools are aggregated and called; a server killed mid-test
//! makes its calls fail fast while the others keep answering, and once it is back the
//! gateway has reconnected by itself (state at `/admin/connections`, reconnects counted).

mod common;

use common::*;
use serde_json::{Value, json};

fn connections(gateway: &Gateway) -> Value {
    gateway.client.get(gateway.url("/admin/connections")).send().unwrap().json().unwrap()
}

fn state_of(gateway: &Gateway, server: &str) -> String {
    connections(gateway)[server]["state"].as_str().unwrap_or("absent").to_string()
}

fn ws_server_config(name: &str, port: u16, extra: &str) -> String {
    format!("[servers.{name}]\ntransport = \"websocket\"\nurl = \"ws://127.0.0.1:{port}/ws\"\n{extra}\n")
}

fn sse_server_config(name: &str, port: u16, extra: &str) -> String {
    format!("[servers.{name}]\ntransport = \"sse\"\nurl = \"http://127.0.0.1:{port}/sse\"\n{extra}\n")
}

/// Quick reconnects, so a restarted server is found soon (the schedule is not under test).
const QUICK: &str = "reconnect_initial_ms = 100\nreconnect_max_ms = 400";

#[test]
fn websocket_and_sse_servers_are_aggregated_and_called_through_the_gateway() {
    let (ws_port, py_port, every_port) = (free_port(), free_port(), free_port());
    let _ws = python_ws_server(ws_port, None);
    let _py = python_sse_server(py_port, None);
    let _every = everything_sse_server(every_port);
    let config = format!(
        "{}{}{}",
        ws_server_config("ws", ws_port, "max_response_bytes = 65536"),
        sse_server_config("pysse", py_port, ""),
        sse_server_config("every", every_port, ""),
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the tools of all three servers", || {
        let names = gateway.tool_names();
        ["ws__add", "pysse__add", "echo"].iter().all(|t| names.iter().any(|n| n == t))
    });

    // The two Python servers offer the same names: each copy is namespaced by its server.
    let sum = gateway.call("ws__add", json!({"a": 20, "b": 22}));
    assert_eq!(structured(&sum)["result"], 42, "{sum}");
    let loud = gateway.call("pysse__shout", json!({"text": "over sse"}));
    assert_eq!(loud["result"]["content"][0]["text"], "OVER SSE", "{loud}");
    let echo = gateway.call("echo", json!({"message": "everything over sse"}));
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: everything over sse", "{echo}");

    let report = connections(&gateway);
    for (server, transport) in [("ws", "websocket"), ("pysse", "sse"), ("every", "sse")] {
        assert_eq!(report[server]["state"], "ready", "{report}");
        assert_eq!(report[server]["transport"], transport, "{report}");
    }
    assert_eq!(report["ws"]["target"], format!("ws://127.0.0.1:{ws_port}/ws"));
    let metrics = gateway.metrics();
    for server in ["ws", "pysse", "every"] {
        let ready = [format!("server=\"{server}\""), "state=\"ready\"".to_string()];
        let filters: Vec<&str> = ready.iter().map(String::as_str).collect();
        assert_eq!(metric(&metrics, "mcp_gateway_upstream_connection_state", &filters), 1.0, "{server}");
    }

    // An answer over the WebSocket server's max_response_bytes: that call only, the
    // connection is dropped and made again.
    let big = gateway.call("ws__blob", json!({"size": 200_000}));
    expect_error(&big, -32000, "response_too_large");
    wait_for("the WebSocket connection back", || state_of(&gateway, "ws") == "ready");
    let small = gateway.call("ws__blob", json!({"size": 1000}));
    assert_eq!(small["result"]["content"][0]["text"].as_str().unwrap().len(), 1000, "{small}");
}

/// Kills `server`'s process, checks that its calls fail fast while `other_tool` still works,
/// restarts it with `restart`, and checks that the gateway reconnected by itself.
fn kill_and_restart(
    gateway: &Gateway,
    server: &str,
    process: Proc,
    call: (&str, Value),
    other_tool: (&str, Value),
    restart: impl FnOnce() -> Proc,
) -> Proc {
    let (tool, arguments) = call;
    assert!(gateway.call(tool, arguments.clone()).get("result").is_some());
    let connects_before = connections(gateway)[server]["connects"].as_u64().unwrap();
    drop(process); // SIGKILL: no close frame, no end of stream, just a dead socket
    wait_for("the gateway to see the server gone", || state_of(gateway, server) != "ready");

    let answer = gateway.call(tool, arguments.clone());
    let data = expect_error(&answer, -32000, "upstream_unavailable");
    assert!(data["connection_state"].is_string(), "{answer}");
    let other = gateway.call(other_tool.0, other_tool.1);
    assert!(other.get("result").is_some(), "another server is not affected: {other}");

    let restarted = restart();
    wait_for("the gateway to reconnect", || state_of(gateway, server) == "ready");
    let answer = gateway.call(tool, arguments);
    assert!(answer.get("result").is_some(), "{answer}");
    let report = connections(gateway);
    assert!(report[server]["connects"].as_u64().unwrap() > connects_before, "{report}");
    assert!(report[server]["reconnects"].as_u64().unwrap() >= 1, "{report}");
    let filter = format!("server=\"{server}\"");
    assert!(metric(&gateway.metrics(), "mcp_gateway_upstream_reconnects_total", &[&filter]) >= 1.0);
    restarted
}

#[test]
fn a_killed_websocket_server_fails_fast_and_is_reconnected_when_it_is_back() {
    let (ws_port, py_port) = (free_port(), free_port());
    let ws = python_ws_server(ws_port, None);
    let _py = python_sse_server(py_port, None);
    let config =
        format!("{}{}", ws_server_config("ws", ws_port, QUICK), sse_server_config("pysse", py_port, QUICK));
    let gateway = Gateway::start(&config, &[]);
    wait_for("both servers' tools", || gateway.tool_names().iter().any(|n| n == "pysse__add"));
    let _ws = kill_and_restart(
        &gateway,
        "ws",
        ws,
        ("ws__add", json!({"a": 1, "b": 2})),
        ("pysse__add", json!({"a": 3, "b": 4})),
        || python_ws_server(ws_port, None),
    );
}

#[test]
fn killed_sse_servers_fail_fast_and_are_reconnected_when_they_are_back() {
    let (py_port, every_port) = (free_port(), free_port());
    let py = python_sse_server(py_port, None);
    let every = everything_sse_server(every_port);
    let config = format!(
        "{}{}",
        sse_server_config("pysse", py_port, QUICK),
        sse_server_config("every", every_port, QUICK)
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("both servers' tools", || {
        let names = gateway.tool_names();
        names.iter().any(|n| n == "shout") && names.iter().any(|n| n == "echo")
    });
    let _py = kill_and_restart(
        &gateway,
        "pysse",
        py,
        ("shout", json!({"text": "a"})),
        ("echo", json!({"message": "still here"})),
        || python_sse_server(py_port, None),
    );
    let _every = kill_and_restart(
        &gateway,
        "every",
        every,
        ("echo", json!({"message": "back"})),
        ("shout", json!({"text": "still here"})),
        || everything_sse_server(every_port),
    );
}

#[test]
fn a_hung_websocket_server_is_found_by_the_keepalive_and_reconnected_when_it_resumes() {
    let port = free_port();
    let ws = python_ws_server(port, None);
    let config = format!(
        "[defaults]\nws_ping_interval_ms = 200\nws_pong_timeout_ms = 2000\n\n{}",
        ws_server_config("ws", port, QUICK)
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the server's tools", || gateway.tool_names().iter().any(|n| n == "add"));
    assert_eq!(state_of(&gateway, "ws"), "ready");
    // No call is made while it hangs: only the keepalive can notice.
    ws.signal("STOP");
    // The transition's log line says why (the admin report's last error moves on with the
    // reconnect attempts that time out against the stopped process).
    wait_for("the keepalive to declare the connection broken", || {
        gateway.proc.output().lines().any(|l| {
            l.contains("upstream connection state changed")
                && l.contains("\"from\":\"ready\"")
                && l.contains("no pong")
        })
    });
    assert_ne!(state_of(&gateway, "ws"), "ready");
    ws.signal("CONT");
    wait_for("the gateway to reconnect", || state_of(&gateway, "ws") == "ready");
    let sum = gateway.call("add", json!({"a": 2, "b": 3}));
    assert_eq!(structured(&sum)["result"], 5, "{sum}");
}

#[test]
fn a_websocket_upgrade_refused_puts_the_server_in_needs_auth_and_the_configured_header_opens_it() {
    let port = free_port();
    let _ws = python_ws_server(port, Some("s3cret"));
    let tools = r#"tools = [{name = "add", description = "Add", inputSchema = {type = "object"}}]"#;
    let config = format!("ready_min_tools = 0\n{}", ws_server_config("ws", port, tools));
    let gateway = Gateway::start(&config, &[]);
    wait_for("needs_auth", || state_of(&gateway, "ws") == "needs_auth");
    let answer = gateway.call("add", json!({"a": 1, "b": 1}));
    expect_error(&answer, -32007, "upstream_auth");
    drop(gateway);

    let headers = format!("{tools}\nheaders = {{authorization = \"Bearer s3cret\"}}");
    let gateway = Gateway::start(&ws_server_config("ws", port, &headers), &[]);
    wait_for("ready", || state_of(&gateway, "ws") == "ready");
    let answer = gateway.call("add", json!({"a": 1, "b": 1}));
    assert_eq!(structured(&answer)["result"], 2, "{answer}");
}
