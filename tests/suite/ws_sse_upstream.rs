//! WebSocket and HTTP+SSE (2024-11-05) upstreams through the gateway binary, against servers
//! nobody here wrote: the Python SDK 1.x WebSocket server, `server-everything` in its SSE mode
//! and a Python SDK 2.x SSE server. Tools are aggregated and called; a server killed mid-test
//! makes its calls fail fast while the others keep answering, and once it is back the
//! gateway has reconnected by itself (state at `/admin/connections`, reconnects counted).

use crate::common::*;
use serde_json::{Value, json};

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

    let report = gateway.connections();
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
    wait_for("the WebSocket connection back", || gateway.connection_state("ws") == "ready");
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
    let connects_before = gateway.connections()[server]["connects"].as_u64().unwrap();
    drop(process); // SIGKILL: no close frame, no end of stream, just a dead socket
    wait_for("the gateway to see the server gone", || gateway.connection_state(server) != "ready");

    let answer = gateway.call(tool, arguments.clone());
    let data = expect_error(&answer, -32000, "upstream_unavailable");
    assert!(data["connection_state"].is_string(), "{answer}");
    let other = gateway.call(other_tool.0, other_tool.1);
    assert!(other.get("result").is_some(), "another server is not affected: {other}");

    let restarted = restart();
    wait_for("the gateway to reconnect", || gateway.connection_state(server) == "ready");
    let answer = gateway.call(tool, arguments);
    assert!(answer.get("result").is_some(), "{answer}");
    let report = gateway.connections();
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
    assert_eq!(gateway.connection_state("ws"), "ready");
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
    assert_ne!(gateway.connection_state("ws"), "ready");
    ws.signal("CONT");
    wait_for("the gateway to reconnect", || gateway.connection_state("ws") == "ready");
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
    wait_for("needs_auth", || gateway.connection_state("ws") == "needs_auth");
    let answer = gateway.call("add", json!({"a": 1, "b": 1}));
    expect_error(&answer, -32007, "upstream_auth");
    drop(gateway);

    let headers = format!("{tools}\nheaders = {{authorization = \"Bearer s3cret\"}}");
    let gateway = Gateway::start(&ws_server_config("ws", port, &headers), &[]);
    wait_for("ready", || gateway.connection_state("ws") == "ready");
    let answer = gateway.call("add", json!({"a": 1, "b": 1}));
    assert_eq!(structured(&answer)["result"], 2, "{answer}");
}

#[test]
fn wss_is_verified_against_the_trust_store_reqwest_uses() {
    let dir = Scratch::new("wss");
    private_ca(&dir);
    let port = free_port();
    let _ws = python_ws_server_with(port, &["--tls", &dir.path("server.pem"), &dir.path("server.key")]);
    let url = format!("wss://127.0.0.1:{port}/ws");
    let server = format!("[servers.ws]\ntransport = \"websocket\"\nurl = \"{url}\"\n{QUICK}\n");

    // The private CA trusted the way the HTTP client trusts it (SSL_CERT_FILE): it connects.
    let gateway = Gateway::start(&server, &[("SSL_CERT_FILE", &dir.path("ca.pem"))]);
    wait_for("the server's tools", || gateway.tool_names().iter().any(|n| n == "add"));
    let sum = gateway.call("add", json!({"a": 40, "b": 2}));
    assert_eq!(structured(&sum)["result"], 42, "{sum}");
    assert_eq!(gateway.connections()["ws"]["target"], url);
    drop(gateway);

    // Another CA trusted instead: no connection, and the reason says why.
    let other = Scratch::new("wss-other");
    private_ca(&other);
    let config = format!("ready_min_tools = 0\n{server}");
    let gateway = Gateway::start(&config, &[("SSL_CERT_FILE", &other.path("ca.pem"))]);
    wait_for("a refused certificate", || gateway.connections()["ws"]["last_error"].is_string());
    let report = gateway.connections();
    let reason = report["ws"]["last_error"].as_str().unwrap();
    assert!(reason.contains("invalid peer certificate"), "{report}");
    assert_ne!(report["ws"]["state"], "ready", "{report}");
}

#[test]
fn registry_entries_name_websocket_and_sse_servers_by_url() {
    let (ws_port, every_port) = (free_port(), free_port());
    let _ws = python_ws_server(ws_port, None);
    let _every = everything_sse_server(every_port);
    let stores = Stores::dynamodb();
    let entries = [
        (
            "add",
            json!({"name": "ws", "transport": "websocket", "url": format!("ws://127.0.0.1:{ws_port}/ws")}),
        ),
        (
            "echo",
            json!({"name": "every", "transport": "sse", "url": format!("http://127.0.0.1:{every_port}/sse")}),
        ),
    ];
    for (tool, server) in entries {
        stores.put(
            false,
            &json!({"name": tool, "description": tool, "inputSchema": {"type": "object"}, "server": server}),
        );
    }
    let config = format!("refresh_interval_secs = 1\nready_min_tools = 2\n{}", stores.config());
    let gateway = Gateway::start(&config, REGISTRY_LOOPBACK);
    let sum = gateway.call("add", json!({"a": 5, "b": 6}));
    assert_eq!(structured(&sum)["result"], 11, "{sum}");
    let echo = gateway.call("echo", json!({"message": "from the registry"}));
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: from the registry", "{echo}");
    let report = gateway.connections();
    assert_eq!(report["ws"]["transport"], "websocket", "{report}");
    assert_eq!(report["every"]["transport"], "sse", "{report}");
    assert_eq!(report["ws"]["state"], "ready", "{report}");
    assert_eq!(report["every"]["state"], "ready", "{report}");
}

#[test]
fn oversized_websocket_and_sse_messages_are_refused_while_read_not_buffered() {
    let (ws_port, py_port) = (free_port(), free_port());
    let _ws = python_ws_server(ws_port, None);
    let _py = python_sse_server(py_port, None);
    // Generous times: the server takes a while to build 80 MB, and speed is not under test.
    let limit = "max_response_bytes = 1048576\ntimeout_ms = 30000\ndeadline_ms = 60000";
    let config = format!(
        "{}{}",
        ws_server_config("ws", ws_port, &format!("{limit}\n{QUICK}")),
        sse_server_config("pysse", py_port, &format!("{limit}\n{QUICK}"))
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("both servers' tools", || gateway.tool_names().iter().any(|n| n == "pysse__blob"));
    let pid = gateway.proc.child.id();
    let baseline = peak_rss_kib(pid);
    let listed = |server: &str| {
        let filter = format!("server=\"{server}\"");
        metric(&gateway.metrics(), "mcp_gateway_registry_refresh_total", &[&filter, "outcome=\"success\""])
    };
    // 40 MB of text, twice in the answer (content and structuredContent): an 80 MB message.
    for (tool, server) in [("ws__blob", "ws"), ("pysse__blob", "pysse")] {
        let before = listed("pysse");
        let answer = gateway.call(tool, json!({"size": 40_000_000}));
        let data = expect_error(&answer, -32000, "response_too_large");
        assert_eq!(data["retryable"], false, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("1048576-byte limit"), "{tool}: {message}");
        // The server's recovery re-lists every server: wait until that is over, so the next
        // oversized answer is the only call on its connection (and so named as too large).
        wait_for("the connection back and re-listed", || {
            gateway.connection_state(server) == "ready" && listed("pysse") > before
        });
    }
    let peak = peak_rss_kib(pid);
    eprintln!("gateway VmHWM: {baseline} KiB before two 80 MB messages, {peak} KiB after");
    // Buffering either message would add 80 MB; the limit is 1 MiB a message.
    assert!(peak < baseline + 32 * 1024, "peak RSS {peak} KiB (before: {baseline} KiB)");
    // Both connections came back and serve ordinary answers.
    for server in ["ws", "pysse"] {
        let small = gateway.call(&format!("{server}__blob"), json!({"size": 10}));
        assert_eq!(small["result"]["content"][0]["text"], "xxxxxxxxxx", "{small}");
    }
}

#[test]
fn progress_from_websocket_and_sse_servers_reaches_an_sse_caller_under_its_own_token() {
    let (ws_port, py_port) = (free_port(), free_port());
    let _ws = python_ws_server(ws_port, None);
    let _py = python_sse_server(py_port, None);
    let config =
        format!("{}{}", ws_server_config("ws", ws_port, ""), sse_server_config("pysse", py_port, ""));
    let gateway = Gateway::start(&config, &[]);
    wait_for("both servers' tools", || gateway.tool_names().iter().any(|n| n == "pysse__count_up"));
    for (tool, token) in [("ws__count_up", json!("ws-token")), ("pysse__count_up", json!(7))] {
        let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {
            "name": tool, "arguments": {"steps": 3}, "_meta": {"progressToken": token}}});
        let (status, headers, text) =
            gateway.post_raw(body.to_string(), &[("accept", "application/json, text/event-stream")]);
        assert_eq!(status, 200, "{text}");
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(content_type.starts_with("text/event-stream"), "{tool}: {headers:?}");
        let events = sse_events(&text);
        let progress: Vec<f64> = events
            .iter()
            .filter(|e| e["method"] == "notifications/progress")
            .map(|e| {
                assert_eq!(e["params"]["progressToken"], token, "{tool}: the caller's own token: {e}");
                e["params"]["progress"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(progress, [1.0, 2.0, 3.0], "{tool}: {text}");
        let last = events.last().unwrap();
        assert_eq!(last["id"], "c-1", "{tool}: the answer comes last: {text}");
        assert_eq!(last["result"]["content"][0]["text"], "counted to 3", "{tool}: {text}");
    }
}
