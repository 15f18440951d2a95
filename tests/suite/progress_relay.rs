//! Progress relay: a `tools/call` with `_meta.progressToken` from a caller accepting
//! `text/event-stream` is answered with an event stream carrying the upstream's
//! `notifications/progress` (under the caller's token) and then the response. Real upstreams:
//! a Python SDK 2.x server (modern era), the TypeScript "everything" server (session era),
//! and the demo server (which records the `_meta` it received).

use std::io::{BufRead, BufReader};

use crate::common::*;
use serde_json::{Value, json};

fn call_body(id: Value, tool: &str, arguments: Value, meta: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    .to_string()
}

fn content_type(headers: &reqwest::header::HeaderMap) -> &str {
    headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Splits events into progress notifications and the rest, checking every progress event
/// carries `token`.
fn progress_of(events: &[Value], token: &Value) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e["method"] == "notifications/progress")
        .map(|e| {
            assert_eq!(&e["params"]["progressToken"], token, "progress under the caller's token: {e}");
            e["params"]["progress"].as_f64().unwrap()
        })
        .collect()
}

fn peer_stats(gw: &Gateway) -> Value {
    let answer = gw.call("peer_stats", json!({}));
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
    serde_json::from_str(text).unwrap()
}

#[test]
fn a_python_sdk_servers_progress_reaches_an_sse_caller_under_its_own_token_before_the_result() {
    let port = free_port();
    let _peer = progress_server(port);
    let gw = Gateway::start(&http_server("prog", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let token = json!("caller-token-9");
    let body = call_body(
        json!("a-1"),
        "count_up",
        json!({"steps": 3, "delay_ms": 30}),
        json!({"progressToken": token}),
    );
    let (status, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{text}");
    assert!(content_type(&headers).starts_with("text/event-stream"), "{headers:?}");
    let streamed = sse_events(&text);
    assert_eq!(progress_of(&streamed, &token), [1.0, 2.0, 3.0], "{text}");
    let last = streamed.last().unwrap();
    assert_eq!(last["id"], "a-1", "the response is the last event: {text}");
    assert_eq!(last["result"]["content"][0]["text"], "counted to 3", "{text}");
    assert_eq!(streamed.len(), 4, "{text}");

    // A numeric token is mapped back as the same number.
    let body =
        call_body(json!(2), "count_up", json!({"steps": 2, "delay_ms": 10}), json!({"progressToken": 77}));
    let (_, _, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(progress_of(&sse_events(&text), &json!(77)), [1.0, 2.0], "{text}");
}

#[test]
fn the_session_era_everything_server_relays_progress_and_a_cache_hit_streams_only_the_result() {
    let port = free_port();
    let _everything = everything_server(port);
    let config = format!(
        "{}\n[tools.trigger-long-running-operation]\ncache_ttl_ms = 60000\n",
        http_server("everything", &format!("http://127.0.0.1:{port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let arguments = json!({"duration": 0.3, "steps": 3});
    let body = call_body(
        json!(5),
        "trigger-long-running-operation",
        arguments.clone(),
        json!({"progressToken": 42}),
    );
    let (status, headers, text) = gw.post_raw(body.clone(), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{text}");
    assert!(content_type(&headers).starts_with("text/event-stream"), "{headers:?}");
    let first = sse_events(&text);
    assert_eq!(progress_of(&first, &json!(42)), [1.0, 2.0, 3.0], "{text}");
    assert!(first.last().unwrap()["result"]["content"][0]["text"].as_str().unwrap().contains("completed"));
    let metrics = gw.metrics();
    assert!(
        metrics.contains("mcp_gateway_upstream_era{era=\"session\",server=\"everything\"} 1"),
        "{metrics}"
    );

    // The same read-only call again is a cache hit: nothing goes upstream, so there is no
    // progress; the stream carries the cached result alone.
    let (status, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("text/event-stream"));
    let again = sse_events(&text);
    assert_eq!(again.len(), 1, "{text}");
    assert_eq!(again[0]["result"], first.last().unwrap()["result"]);
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["outcome=\"cache_hit\""]), 1.0);
}

#[test]
fn the_upstream_gets_the_gateways_token_only_when_the_caller_can_receive_progress() {
    let demo = Demo::http();
    let gw = Gateway::start(&http_server("store", &demo.url()), &[]);
    let arguments = json!({"manga_id": "MNG-00000001"});
    let meta = json!({"progressToken": "mine", "trace": "t-1"});

    // JSON only: a plain JSON answer, and no progress token upstream at all.
    let body = call_body(json!(1), "price_lookup", arguments.clone(), meta.clone());
    let (status, headers, text) = gw.post_raw(body.clone(), &[("accept", "application/json")]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("application/json"), "{headers:?}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["result"]["structuredContent"]["manga_id"], "MNG-00000001", "{answer}");
    let seen = demo.stats()["last_meta"].clone();
    assert!(seen.get("progressToken").is_none(), "{seen}");
    assert_eq!(seen["trace"], "t-1", "other caller _meta still goes along: {seen}");

    // Event stream: the upstream sees the gateway's own token, never the caller's; the demo
    // sends no progress, so the stream is the response alone.
    let (status, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("text/event-stream"));
    let streamed = sse_events(&text);
    assert_eq!(streamed.len(), 1, "{text}");
    assert_eq!(streamed[0]["result"], answer["result"]);
    let seen = demo.stats()["last_meta"].clone();
    let upstream_token = seen["progressToken"].as_str().unwrap_or_else(|| panic!("{seen}"));
    assert!(upstream_token.starts_with("mcp-gateway-") && upstream_token != "mine", "{seen}");

    // Errors are JSON-RPC error events in the stream.
    let body = call_body(json!("e"), "no_such_tool", json!({}), json!({"progressToken": 1}));
    let (status, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("text/event-stream"));
    let streamed = sse_events(&text);
    assert_eq!(streamed.len(), 1, "{text}");
    expect_error(&streamed[0], -32002, "unknown_tool");

    // A batch is never streamed: one JSON array, progress tokens or not.
    let batch = format!(
        "[{},{}]",
        call_body(json!(1), "price_lookup", arguments.clone(), json!({"progressToken": "b1"})),
        call_body(json!(2), "price_lookup", arguments, json!({"progressToken": "b2"}))
    );
    let (status, headers, text) = gw.post_raw(batch, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("application/json"), "{headers:?}");
    let answers: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answers.as_array().map(Vec::len), Some(2), "{answers}");
    assert!(demo.stats()["last_meta"].get("progressToken").is_none(), "batch items ask for no progress");
}

#[test]
fn endless_progress_does_not_hold_the_call_past_its_deadline() {
    let port = free_port();
    let _peer = progress_server(port);
    let gw = Gateway::start(&http_server("prog", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let body =
        call_body(json!(1), "progress_forever", json!({"interval_ms": 50}), json!({"progressToken": "p"}));
    let (status, _, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH), ("x-request-timeout-ms", "1000")]);
    assert_eq!(status, 200);
    let streamed = sse_events(&text);
    let progress = progress_of(&streamed, &json!("p"));
    assert!(!progress.is_empty(), "progress came before the deadline: {text}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "increasing: {progress:?}");
    expect_error(streamed.last().unwrap(), -32001, "timeout");
    wait_for("the upstream task to be cancelled", || peer_stats(&gw)["cancelled"] == 1);
}

#[test]
fn a_caller_that_disconnects_mid_stream_cancels_the_upstream_call() {
    let port = free_port();
    let _peer = progress_server(port);
    let gw = Gateway::start(&http_server("prog", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let body =
        call_body(json!(1), "progress_forever", json!({"interval_ms": 50}), json!({"progressToken": "p"}));
    let response = gw
        .client
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .body(body)
        .send()
        .expect("gateway answers");
    assert_eq!(response.status(), 200);
    let mut reader = BufReader::new(response);
    let mut seen = 0;
    let mut line = String::new();
    while seen < 2 {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended early");
        if line.starts_with("data: ") && line.contains("notifications/progress") {
            seen += 1;
        }
    }
    assert_eq!(peer_stats(&gw)["cancelled"], 0);
    drop(reader);
    wait_for("the upstream task to be cancelled", || peer_stats(&gw)["cancelled"] == 1);
    wait_for("the caller_disconnected sample", || {
        metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["progress_forever", "caller_disconnected"])
            == 1.0
    });
}

fn log_data(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["method"] == "notifications/message")
        .map(|e| e["params"]["data"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn upstream_log_entries_reach_an_sse_caller_at_its_level_and_a_call_that_cannot_receive_them_is_json() {
    let port = free_port();
    let _fixtures = conformance_fixtures(port, &[]);
    let gw = Gateway::start(&http_server("fixtures", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let logged = ["Tool execution started", "Tool processing data", "Tool execution completed"];

    // A session-era or bare caller accepting event streams gets every level, then the result.
    let body = call_body(json!(1), "test_tool_with_logging", json!({}), json!({}));
    let (status, headers, text) = gw.post_raw(body.clone(), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200);
    assert!(content_type(&headers).starts_with("text/event-stream"), "{headers:?}");
    let streamed = sse_events(&text);
    assert_eq!(log_data(&streamed), logged, "{text}");
    assert_eq!(streamed.last().unwrap()["id"], 1, "the response is last: {text}");

    // JSON only: JSON, no entries.
    let (_, headers, text) = gw.post_raw(body, &[("accept", "application/json")]);
    assert!(content_type(&headers).starts_with("application/json"), "{headers:?}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["id"], 1);

    // A modern caller opts in per request; its level is honoured (the entries are "info").
    let modern = |level: Option<&str>| {
        let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        if let Some(level) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        let body = call_body(json!("m"), "test_tool_with_logging", json!({}), meta);
        let (_, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
        (content_type(&headers).to_string(), text)
    };
    let (ct, text) = modern(Some("info"));
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    assert_eq!(log_data(&sse_events(&text)), logged, "{text}");
    for quiet in [Some("error"), None] {
        let (ct, text) = modern(quiet);
        assert!(ct.starts_with("application/json"), "{quiet:?}: nothing to relay, plain JSON: {ct} {text}");
    }

    // logging/setLevel is answered (the level cannot be kept: no sessions), bad levels refused.
    let (_, ok) = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "debug"}}));
    assert_eq!(ok["result"], json!({}), "{ok}");
    let (_, bad) = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "loud"}}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[test]
fn a_caller_that_stops_reading_does_not_keep_the_call_past_its_deadline() {
    let port = free_port();
    let _peer = progress_server(port);
    let gw = Gateway::start(&http_server("prog", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    // Progress as fast as the server can send it, to a caller that never reads: the socket
    // buffers fill, yet the call still ends at its deadline and is cancelled upstream.
    let arguments = json!({"interval_ms": 0, "pad": 65536});
    let body = call_body(json!(1), "progress_forever", arguments, json!({"progressToken": "p"}));
    let response = gw
        .client
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("x-request-timeout-ms", "3000")
        .body(body)
        .send()
        .expect("gateway answers");
    assert_eq!(response.status(), 200);
    wait_for("the upstream task to be cancelled at the deadline", || peer_stats(&gw)["cancelled"] == 1);
    wait_for("the call's timeout sample", || {
        metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["progress_forever", "outcome=\"timeout\""])
            == 1.0
    });
    drop(response);
}

/// The same relay over a persistent transport: server-everything as a stdio child. The
/// connection multiplexes calls by the gateway's own ids and tokens; the caller still sees
/// its own token, in order, before the result.
#[test]
fn progress_from_a_stdio_server_reaches_the_caller_under_its_own_token() {
    let entry = peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "@modelcontextprotocol/server-everything is missing: run scripts/install-test-deps.sh"
    );
    let config = format!(
        "[servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        entry.display().to_string()
    );
    let gw = Gateway::start(&config, &[]);
    wait_for("server-everything's tools over stdio", || {
        gw.tool_names().contains(&"trigger-long-running-operation".to_string())
    });
    let body = call_body(
        json!("s-1"),
        "trigger-long-running-operation",
        json!({"duration": 0.3, "steps": 3}),
        json!({"progressToken": "tok-stdio"}),
    );
    let (status, headers, text) = gw.post_raw(body, &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{text}");
    assert!(content_type(&headers).starts_with("text/event-stream"), "{headers:?}");
    let all = sse_events(&text);
    assert_eq!(progress_of(&all, &json!("tok-stdio")), [1.0, 2.0, 3.0], "{text}");
    let last = all.last().unwrap();
    assert_eq!(last["id"], "s-1", "{text}");
    assert!(last["result"]["content"][0]["text"].as_str().unwrap().contains("completed"), "{text}");
}
