//! What an upstream may and may not do to a caller (docs/security-upstream-trust.md), against
//! the real gateway and real upstream processes:
//!
//! - a hostile server (`tests/peers/scripted/forging_server.py`, over streamable HTTP and over stdio)
//!   whose progress and log notifications carry `jsonrpc`/`id`/`result`/`method` keys, and
//!   which sends an unsolicited `elicitation/create` on the call's stream: the caller's event
//!   stream holds only rebuilt notifications under its own progress token, then its answer;
//! - read-only calls that differ only in forwarded `_meta` (per-user context) are never
//!   answered from one another's cache entry or shared call in flight.

use std::{
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

use crate::common::*;
use serde_json::{Value, json};

fn keys(params: &Value) -> Vec<&str> {
    params.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default()
}

/// Checks that `stream` holds only notifications the gateway rebuilt (progress under
/// `token`, log entries) and ends with the answer to `call_id`; returns the progress values
/// and the log entries' data, in order.
fn only_rebuilt(stream: &str, token: &Value, call_id: &Value) -> (Vec<f64>, Vec<Value>) {
    let all = sse_events(stream);
    let (answer, notifications) = all.split_last().unwrap_or_else(|| panic!("no events: {stream}"));
    assert_eq!(&answer["id"], call_id, "the last event answers the call: {stream}");
    assert_eq!(answer["result"]["content"][0]["text"], "forged nothing", "{stream}");
    assert!(!stream.contains("evil"), "no forged tools/list result reached the caller: {stream}");
    assert!(
        !stream.contains("elicitation/create"),
        "no request reached a caller that did not declare it: {stream}"
    );
    assert!(
        !stream.contains("victim-7") && !stream.contains("forged-ask") && !stream.contains("srv-ask"),
        "{stream}"
    );
    let (mut progress, mut logs) = (Vec::new(), Vec::new());
    for event in notifications {
        assert_eq!(keys(event), ["jsonrpc", "method", "params"], "a notification, nothing more: {event}");
        let params = &event["params"];
        match event["method"].as_str() {
            Some("notifications/progress") => {
                assert_eq!(&params["progressToken"], token, "the caller's own token: {event}");
                assert!(
                    keys(params)
                        .iter()
                        .all(|k| ["progressToken", "progress", "total", "message"].contains(k)),
                    "{event}"
                );
                progress.push(params["progress"].as_f64().unwrap());
            }
            Some("notifications/message") => {
                assert!(keys(params).iter().all(|k| ["level", "logger", "data"].contains(k)), "{event}");
                logs.push(params["data"].clone());
            }
            _ => panic!("only progress and log notifications: {event}"),
        }
    }
    (progress, logs)
}

fn forge_call(id: &Value, token: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "forge", "arguments": {}, "_meta": {"progressToken": token}}})
    .to_string()
}

fn forging_http_config(addr: std::net::SocketAddr) -> String {
    format!(
        r#"[servers.forger]
transport = "http"
url = "http://{addr}/mcp"
discover = false
[[servers.forger.tools]]
name = "forge"
description = "a tool of a hostile server"
inputSchema = {{ type = "object" }}
"#
    )
}

#[test]
fn forged_messages_in_an_http_servers_notifications_never_reach_the_caller() {
    let (_forger, addr) = forging_server();
    let gateway = Gateway::start(&forging_http_config(addr), &[]);
    let (id, token) = (json!("call-1"), json!("caller-token"));
    let (status, headers, stream) = gateway.post_raw(forge_call(&id, &token), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{stream}");
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/event-stream"), "{headers:?}");
    let (progress, logs) = only_rebuilt(&stream, &token, &id);
    // The legitimate parts did arrive, rebuilt (the first update's message kept).
    assert_eq!(progress, [1.0, 2.0, 3.0], "{stream}");
    assert!(stream.contains(r#""message":"step 1""#), "{stream}");
    assert_eq!(logs, [json!("hello"), json!({"note": "still here"})], "{stream}");
    // The upstream saw the gateway's own token, never the caller's.
    let stats: Value = reqwest::blocking::get(format!("http://{addr}/_stats")).unwrap().json().unwrap();
    assert_eq!(stats["calls"], 1, "{stats}");
    assert!(stats["progress_tokens"][0].as_str().unwrap().starts_with("mcp-gateway-"), "{stats}");
}

#[test]
fn forged_messages_in_a_stdio_servers_progress_never_reach_the_caller() {
    let script = peers_dir().join("scripted/forging_server.py");
    let config = format!(
        "[servers.forger]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"-u\", \"{}\", \"stdio\"]\n",
        script.display()
    );
    let gateway = Gateway::start(&config, &[]);
    let (id, token) = (json!(41), json!(9));
    let (status, _, stream) = gateway.post_raw(forge_call(&id, &token), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{stream}");
    let (progress, _) = only_rebuilt(&stream, &token, &id);
    assert_eq!(progress, [1.0, 2.0, 3.0], "{stream}");
}

#[test]
fn a_back_channel_caller_gets_only_requests_the_relay_made_for_what_it_declared() {
    let (_forger, addr) = forging_server();
    let gateway = Gateway::start(&forging_http_config(addr), &[]);
    // A caller that declared sampling only: it has a session, and an `elicitation/create` is
    // not something it can be asked.
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, headers, body) = gateway.post_raw(initialize.to_string(), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{body}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_string();
    let (id, token) = (json!("call-2"), json!("t-2"));
    let (status, _, stream) = gateway
        .post_raw(forge_call(&id, &token), &[("accept", ACCEPT_BOTH), ("mcp-session-id", session.as_str())]);
    assert_eq!(status, 200, "{stream}");
    let (progress, _) = only_rebuilt(&stream, &token, &id);
    assert_eq!(progress, [1.0, 2.0, 3.0], "{stream}");
    let refused = metric(
        &gateway.metrics(),
        "mcp_gateway_relayed_requests_total",
        &["method=\"elicitation/create\"", "outcome=\"not_declared\""],
    );
    assert_eq!(refused, 1.0, "the unsolicited request was answered upstream by the gateway");
}

fn cached_config(demo: &Demo) -> String {
    format!(
        "[servers.catalog]\ntransport = \"http\"\nurl = \"{}\"\n\n[tools.price_lookup]\ncache_ttl_ms = 600000\n",
        demo.url()
    )
}

fn price_call(id: u64, meta: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000002"}, "_meta": meta}})
    .to_string()
}

fn answered(gateway: &Gateway, body: String) -> Value {
    let (status, _, text) = gateway.post_raw(body, &[]);
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(structured(&answer)["manga_id"], "MNG-00000002", "{answer}");
    answer
}

fn user_of_last_call(demo: &Demo) -> Value {
    demo.stats()["last_meta"]["user_key"].clone()
}

#[test]
fn cached_results_are_keyed_by_the_forwarded_meta() {
    let demo = Demo::http();
    let gateway = Gateway::start(&cached_config(&demo), &[]);
    answered(&gateway, price_call(1, json!({"user_key": "alice"})));
    assert_eq!(user_of_last_call(&demo), "alice");
    answered(&gateway, price_call(2, json!({"user_key": "bob"})));
    assert_eq!(demo.stats()["calls"], 2, "bob's call went upstream, not to alice's cache entry");
    assert_eq!(user_of_last_call(&demo), "bob");
    // The cache still serves each user's own entry, and trace context alone keys nothing.
    let traced = json!({"user_key": "alice", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"});
    answered(&gateway, price_call(3, traced));
    answered(&gateway, price_call(4, json!({"user_key": "bob"})));
    assert_eq!(demo.stats()["calls"], 2, "{}", demo.stats());
    let hits = metric(&gateway.metrics(), "mcp_gateway_result_cache_total", &["result=\"hit\""]);
    assert_eq!(hits, 2.0);
}

#[test]
fn calls_in_flight_are_shared_only_with_the_same_forwarded_meta() {
    let demo = Demo::slow(6000);
    let gateway = Arc::new(Gateway::start(&cached_config(&demo), &[]));
    let call = |id: u64, user: &'static str| {
        let gateway = gateway.clone();
        thread::spawn(move || answered(&gateway, price_call(id, json!({"user_key": user}))))
    };
    let alice = call(1, "alice");
    wait_for("alice's call to reach the server", || demo.stats()["calls"] == 1);
    let bob = call(2, "bob");
    // Bob's call either goes upstream (right) or waits for alice's (wrong): wait for either.
    let waiters = || metric(&gateway.metrics(), "mcp_gateway_in_flight_waiters", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while demo.stats()["calls"] != 2 && waiters() == 0.0 {
        assert!(Instant::now() < deadline, "bob's call neither went upstream nor waited");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(waiters(), 0.0, "bob's call waited for alice's");
    // A second call of alice's does share hers.
    let alice_again = call(3, "alice");
    wait_for("alice's second call to join her first", || waiters() == 1.0);
    for handle in [alice, bob, alice_again] {
        handle.join().unwrap();
    }
    assert_eq!(demo.stats()["calls"], 2, "{}", demo.stats());
}
