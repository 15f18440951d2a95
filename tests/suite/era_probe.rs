//! Era detection of streamable-HTTP upstreams as the 2026-07-28 revision specifies: probe with
//! `server/discover`, modern only if its `supportedVersions` lists 2026-07-28, `initialize`
//! on any other answer, the era remembered per server and probed again (once) when a server
//! refuses it. Each test asserts the JSON-RPC methods the upstream saw, in order, as recorded
//! by `tests/peers/scripted/era_peer.py` — a lenient session-era peer, or a recording proxy in front
//! of the official SDK servers (server-everything: sessions enforced; Python SDK 2.x: modern).
//! Also: 401/403 from an upstream is `upstream_auth`, tried once, not held against the breaker.

use crate::common::*;
use serde_json::{Value, json};

/// After a server's first lists: the one `tools/call`, and around it only refreshes of those
/// lists (a refresh interval or a `ttlMs` hint may pass before the call on a busy machine),
/// never a second probe or handshake.
fn assert_only_the_call_and_refreshes(after_lists: &[String], refreshed: &[&str], seen: &[Value]) {
    let calls = after_lists.iter().filter(|m| m.as_str() == "tools/call").count();
    assert_eq!(calls, 1, "{seen:?}");
    assert!(after_lists.iter().all(|m| m == "tools/call" || refreshed.contains(&m.as_str())), "{seen:?}");
}

/// The recorded requests as `"HTTP-method JSON-RPC-method"` (or just the HTTP method).
fn methods(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .map(|s| match s["method"].as_str() {
            Some(method) => method.to_string(),
            None => s["http"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn a_lenient_session_era_server_is_initialized_before_it_is_used() {
    // The peer answers anything with 200 and never checks sessions or headers, as servers that
    // predate 2026-07-28 and keep no sessions do: only `server/discover`'s result can tell.
    let (_peer, addr) = era_peer(&["lenient"]);
    let gateway = Gateway::start(&http_server("lenient", &format!("http://{addr}/mcp")), &[]);
    let answer = gateway.call("lookup", json!({"q": "manga"}));
    assert_eq!(result_text(&answer), "lenient:manga", "{answer}");
    let seen = era_seen(addr);
    assert_eq!(
        methods(&seen),
        ["server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call"],
        "{seen:?}"
    );
    assert_eq!(seen[0]["protocol_version"], "2026-07-28", "the probe is modern: {seen:?}");
    assert_eq!(seen[1]["protocol_version"], Value::Null, "initialize carries no version header");
    for later in &seen[2..] {
        assert_eq!(later["protocol_version"], "2025-06-18", "the negotiated version: {later}");
    }
    let metrics = gateway.metrics();
    assert!(metrics.contains("mcp_gateway_upstream_era{era=\"session\",server=\"lenient\"} 1"), "{metrics}");
}

#[test]
fn sdk_servers_are_probed_once_and_spoken_to_in_their_era() {
    // server-everything (TypeScript SDK): sessions enforced, so the session-less probe is
    // refused with a 4xx; the Python SDK 2.x: a modern server that lists 2026-07-28.
    let everything_port = free_port();
    let _everything = everything_server(everything_port);
    let (_strict_proxy, strict) = era_peer(&["proxy", &format!("http://127.0.0.1:{everything_port}/mcp")]);
    let python_port = free_port();
    let _python = python_server(python_port);
    let (_modern_proxy, modern) = era_peer(&["proxy", &format!("http://127.0.0.1:{python_port}/mcp")]);
    let config = http_server("everything", &format!("http://{strict}/mcp"))
        + &http_server("python", &format!("http://{modern}/mcp"));
    let gateway = Gateway::start(&config, &[]);
    let echo = gateway.call("echo", json!({"message": "hello"}));
    assert!(result_text(&echo).contains("hello"), "{echo}");
    let added = gateway.call("add", json!({"a": 20, "b": 22}));
    assert_eq!(added["result"]["structuredContent"]["result"], 42, "{added}");

    let strict_seen = era_seen(strict);
    let strict_methods = methods(&strict_seen);
    let read_at_refresh = ["tools/list", "resources/list", "resources/templates/list", "prompts/list"];
    assert_eq!(
        strict_methods[..7],
        // The lists the server declared (resources, prompts) are read with its tools.
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            read_at_refresh[0],
            read_at_refresh[1],
            read_at_refresh[2],
            read_at_refresh[3],
        ],
        "{strict_seen:?}"
    );
    assert_only_the_call_and_refreshes(&strict_methods[7..], &read_at_refresh, &strict_seen);
    let refused = strict_seen[0]["status"].as_u64().unwrap();
    assert!((400..500).contains(&refused), "the strict server refuses the probe: {strict_seen:?}");
    let session = strict_seen[2]["session"].as_str().expect("the session id is kept");
    for later in &strict_seen[2..] {
        assert_eq!(later["session"], session, "{later}");
    }

    let modern_seen = era_seen(modern);
    let modern_methods = methods(&modern_seen);
    assert_eq!(
        modern_methods[..5],
        ["server/discover", read_at_refresh[0], read_at_refresh[1], read_at_refresh[2], read_at_refresh[3]],
        "{modern_seen:?}"
    );
    assert_only_the_call_and_refreshes(&modern_methods[5..], &read_at_refresh, &modern_seen);
    for request in &modern_seen {
        assert_eq!(request["protocol_version"], "2026-07-28", "{request}");
        assert_eq!(request["status"], 200, "{request}");
    }
    let metrics = gateway.metrics();
    assert!(
        metrics.contains("mcp_gateway_upstream_era{era=\"session\",server=\"everything\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mcp_gateway_upstream_era{era=\"2026-07-28\",server=\"python\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_server_redeployed_in_the_other_era_is_probed_again() {
    // One address, behind a recording proxy; the process behind it changes era twice. The
    // catalogue is the Python server's (`add`, `shout`), learned at start.
    let port = free_port();
    let mut python = python_server(port);
    let (_proxy, proxy) = era_peer(&["proxy", &format!("http://127.0.0.1:{port}/mcp")]);
    // A static tool and no discovery: no `tools/list` refresh (the Python SDK's `ttlMs` hint
    // would schedule them) interleaves with the calls.
    let config = http_server("svc", &format!("http://{proxy}/mcp"))
        + "discover = false\n[[servers.svc.tools]]\nname = \"add\"\ninputSchema = { type = \"object\" }\n";
    let gateway = Gateway::start(&config, &[]);
    assert_eq!(era_seen(proxy), Vec::<Value>::new(), "nothing is sent before the first call");
    let added = gateway.call("add", json!({"a": 20, "b": 22}));
    assert_eq!(added["result"]["structuredContent"]["result"], 42, "{added}");
    assert_eq!(methods(&era_seen(proxy)), ["server/discover", "tools/call"]);

    // Modern → session era: the modern request is refused (400), the server probed again and
    // the request replayed once in the session era, where server-everything answers it (it
    // has no tool `add`: its own error comes back).
    python.terminate();
    let everything = everything_server(port);
    let answer = gateway.call("add", json!({"a": 1, "b": 2}));
    let after = era_seen(proxy);
    assert_eq!(
        methods(&after[2..]),
        ["tools/call", "server/discover", "initialize", "notifications/initialized", "tools/call"],
        "{after:?}\n{}",
        gateway.proc.output()
    );
    assert_eq!(after[2]["status"], 400, "{after:?}");
    assert_eq!(after[6]["status"], 200, "{after:?}");
    assert!(after[6]["session"].is_string(), "{after:?}");
    assert!(answer.to_string().contains("add"), "server-everything's answer about `add`: {answer}");

    // Session era → modern: the old session is unknown (404), the probe finds a modern server.
    drop(everything);
    let _python = python_server(port);
    let added = gateway.call("add", json!({"a": 1, "b": 2}));
    assert_eq!(added["result"]["structuredContent"]["result"], 3, "{added}");
    let after = era_seen(proxy);
    assert_eq!(methods(&after[7..]), ["tools/call", "server/discover", "tools/call"], "{after:?}");
    assert_eq!(after[7]["status"], 404, "the old session is refused: {after:?}");
    assert_eq!(after[9]["protocol_version"], "2026-07-28", "{after:?}");
}

#[test]
fn a_server_that_refuses_every_session_is_probed_again_once_and_the_call_fails() {
    // A session-era server whose sessions are gone at once: one re-probe, one replay, no loop.
    let (_peer, addr) = era_peer(&["expiring"]);
    let config = format!(
        "{}discover = false\n[[servers.expiring.tools]]\nname = \"lookup\"\ninputSchema = {{ type = \"object\" }}\n",
        http_server("expiring", &format!("http://{addr}/mcp"))
    );
    let gateway = Gateway::start(&config, &[]);
    let answer = gateway.call("lookup", json!({"q": "x"}));
    let data = expect_error(&answer, -32000, "upstream_protocol");
    assert_eq!(data["attempts"], 1, "not idempotent: one attempt: {answer}");
    let handshake = ["server/discover", "initialize", "notifications/initialized", "tools/call"];
    let expected: Vec<&str> = handshake.iter().chain(handshake.iter()).copied().collect();
    assert_eq!(methods(&era_seen(addr)), expected);
}

#[test]
fn refused_credentials_are_upstream_auth_tried_once_and_not_held_against_the_breaker() {
    // 401 to everything (the probe included), and 403 only to the handshake of a server whose
    // probe says "session era".
    let (_unauthorized, unauthorized) = era_peer(&["refuse", "401"]);
    let (_forbidden, forbidden) = era_peer(&["refuse-handshake", "403"]);
    let mut config = String::new();
    for (name, addr) in [("unauthorized", unauthorized), ("forbidden", forbidden)] {
        config += &format!(
            r#"
[servers.{name}]
transport = "http"
url = "http://{addr}/mcp"
discover = false
breaker = {{ consecutive_failures = 2 }}
[[servers.{name}.tools]]
name = "{name}_tool"
inputSchema = {{ type = "object" }}
annotations = {{ readOnlyHint = true }}
"#
        );
    }
    let gateway = Gateway::start(&config, &[]);
    for (name, addr, status, per_call) in [
        ("unauthorized", unauthorized, 401, vec!["server/discover"]),
        ("forbidden", forbidden, 403, vec!["server/discover", "initialize"]),
    ] {
        for call in 1..=3 {
            // Read-only: any retryable failure would be retried, so a retry would show.
            let answer = gateway.call(&format!("{name}_tool"), json!({}));
            let data = expect_error(&answer, -32007, "upstream_auth");
            assert_eq!(data["attempts"], 1, "{name} call {call}: {answer}");
            assert_eq!(data["retryable"], false, "{name}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains(&status.to_string()), "{name}: {message}");
        }
        let expected: Vec<&str> = (0..3).flat_map(|_| per_call.iter().copied()).collect();
        assert_eq!(methods(&era_seen(addr)), expected, "{name}: no era is learned, nothing retried");
        let state = gateway.breaker(name);
        assert_eq!(state["state"], "closed", "{name}: {state}");
        assert_eq!(state["consecutive_failures"], 0, "{name}: {state}");
    }
    let metrics = gateway.metrics();
    for name in ["unauthorized", "forbidden"] {
        assert!(metrics.contains(&format!("mcp_gateway_breaker_state{{server=\"{name}\"}} 0")), "{metrics}");
    }
}
