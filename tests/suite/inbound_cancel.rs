//! Inbound `notifications/cancelled`: the named in-flight call is dropped, which cancels it
//! upstream (a session-era server gets `notifications/cancelled`, a modern one sees its stream
//! closed). The cancelled request's POST gets the `cancelled` error (-32800) when the caller
//! reads JSON, and an event stream that ends without a response when it reads event streams.
//! A caller cancels only its own calls: request ids are scoped by the caller's back-channel
//! session (one the gateway issued), else its identity, else its TCP connection
//! (`gateway::cancel`). So the tests that cancel from another connection open a session first.

use std::thread;

use crate::common::*;
use serde_json::{Value, json};

/// A gateway whose server allows long attempts (the slow demo answers well within them).
fn gateway_for(url: &str) -> Gateway {
    Gateway::start(
        &format!("[servers.store]\ntransport = \"http\"\nurl = \"{url}\"\ntimeout_ms = 60000\n"),
        &[],
    )
}

fn call_body(id: Value, manga: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "price_lookup", "arguments": {"manga_id": manga}}})
}

/// A back-channel session of the gateway's own (an `initialize` declaring `roots`): a scope its
/// holder can cancel from any connection.
fn open_session(gw: &Gateway) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, headers, body) = gw.post_raw(initialize.to_string(), &[]);
    assert_eq!(status, 200, "{body}");
    headers.get("mcp-session-id").expect("a session id").to_str().unwrap().to_string()
}

fn cancel(gw: &Gateway, request_id: Value, headers: &[(&str, &str)]) {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the user pressed stop"}});
    let (status, _, body) = gw.post_raw(note.to_string(), headers);
    assert_eq!((status, body.as_str()), (202, ""), "a notification is answered 202 with no body");
}

fn cancelled_samples(gw: &Gateway) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["outcome=\"cancelled\""])
}

#[test]
fn a_cancelled_call_to_a_session_era_server_is_cancelled_there_and_answered_cancelled() {
    let demo = Demo::with_sessions(30_000);
    let gw = gateway_for(&demo.url());
    let session = open_session(&gw);
    let scope = [("mcp-session-id", session.as_str())];
    let call = post_in_background(&gw, call_body(json!("order-7"), "MNG-00000001").to_string(), &scope);
    wait_for("the call to reach the server", || demo.stats()["calls"] == 1);
    cancel(&gw, json!("order-7"), &scope);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(content_type.starts_with("application/json"), "{content_type}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], "order-7");
    expect_error(&answer, -32800, "cancelled");
    wait_for("the server to get notifications/cancelled", || demo.stats()["cancel_notifications"] == 1);
    let stats = demo.stats();
    assert_eq!(stats["answered"], 0, "{stats}");
    assert_eq!(cancelled_samples(&gw), 1.0);
    let breakers: Value = gw.admin_get("/admin/breakers").send().unwrap().json().unwrap();
    assert_eq!(breakers["store"]["consecutive_failures"], 0, "a cancel is not a failure: {breakers}");
}

#[test]
fn a_cancelled_call_to_a_modern_server_closes_its_upstream_stream_and_an_sse_caller_gets_no_response() {
    let demo = Demo::slow(30_000);
    let gw = gateway_for(&demo.url());
    let session = open_session(&gw);
    let scope = [("mcp-session-id", session.as_str())];
    let call = post_in_background(
        &gw,
        call_body(json!(11), "MNG-00000002").to_string(),
        &[("accept", ACCEPT_BOTH), scope[0]],
    );
    wait_for("the call to reach the server", || demo.stats()["calls"] == 1);
    cancel(&gw, json!(11), &scope);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    assert_eq!(body, "", "the stream ends without a response");
    wait_for("the server to see the call abandoned", || demo.stats()["abandoned"] == 1);
    // The session that lets the caller cancel from another connection runs its calls over a
    // dedicated session-era session (it may relay requests), so the server is also told with
    // `notifications/cancelled` there; a sessionless modern call's stream is only closed.
    let stats = demo.stats();
    assert_eq!(stats["answered"], 0, "{stats}");
    assert_eq!(cancelled_samples(&gw), 1.0);
}

#[test]
fn a_cancelled_progress_stream_ends_after_its_progress_with_no_response() {
    let port = free_port();
    let _peer = progress_server(port);
    let gw = gateway_for(&format!("http://127.0.0.1:{port}/mcp"));
    let body = json!({"jsonrpc": "2.0", "id": "p-1", "method": "tools/call",
        "params": {"name": "progress_forever", "arguments": {"interval_ms": 50}, "_meta": {"progressToken": "t"}}});
    let session = open_session(&gw);
    let scope = [("mcp-session-id", session.as_str())];
    let call = post_in_background(&gw, body.to_string(), &[("accept", ACCEPT_BOTH), scope[0]]);
    let stats = || {
        let answer = gw.call("peer_stats", json!({}));
        serde_json::from_str::<Value>(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    wait_for("the call to start upstream", || stats()["started"] == 1);
    cancel(&gw, json!("p-1"), &scope);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/event-stream"));
    let events: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["method"] == "notifications/progress"), "no response event: {body}");
    wait_for("the upstream task to be cancelled", || stats()["cancelled"] == 1);
    assert_eq!(stats()["finished"], 0, "progress_forever never finished: {}", stats());
}

#[test]
fn request_ids_are_scoped_by_the_callers_session() {
    let demo = Demo::slow(5_000);
    let gw = gateway_for(&demo.url());
    let (session_a, session_b) = (open_session(&gw), open_session(&gw));
    let a = post_in_background(
        &gw,
        call_body(json!(1), "MNG-00000001").to_string(),
        &[("mcp-session-id", session_a.as_str())],
    );
    let b = post_in_background(
        &gw,
        call_body(json!(1), "MNG-00000002").to_string(),
        &[("mcp-session-id", session_b.as_str())],
    );
    let c = post_in_background(&gw, call_body(json!(1), "MNG-00000003").to_string(), &[]);
    wait_for("the three calls to reach the server", || demo.stats()["calls"] == 3);
    let in_a = [("mcp-session-id", session_a.as_str())];
    cancel(&gw, json!(99), &in_a); // unknown id: nothing happens
    cancel(&gw, json!("1"), &in_a); // "1" is not 1: nothing happens
    cancel(&gw, json!(1), &[("mcp-session-id", "sess-b")]); // an id of its own proves nothing
    cancel(&gw, json!(1), &in_a);
    let answer = |h: thread::JoinHandle<(u16, String, String)>| -> Value {
        let (status, _, body) = h.join().unwrap();
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    expect_error(&answer(a), -32800, "cancelled");
    let b = answer(b);
    assert_eq!(b["result"]["structuredContent"]["manga_id"], "MNG-00000002", "{b}");
    let c = answer(c);
    assert_eq!(c["result"]["structuredContent"]["manga_id"], "MNG-00000003", "{c}");
    wait_for("the server to see one call abandoned or cancelled", || {
        let stats = demo.stats();
        stats["abandoned"] == 1 || stats["cancel_notifications"] == 1
    });
    assert_eq!(demo.stats()["answered"], 2);
    assert_eq!(cancelled_samples(&gw), 1.0);
}

#[test]
fn sessionless_callers_on_two_connections_cannot_cancel_each_others_calls() {
    let demo = Demo::slow(3_000);
    let gw = gateway_for(&demo.url());
    // Caller A and caller B, each on its own connection, both use id 7.
    let a = post_in_background(&gw, call_body(json!(7), "MNG-00000001").to_string(), &[]);
    let b = post_in_background(&gw, call_body(json!(7), "MNG-00000002").to_string(), &[]);
    wait_for("both calls to reach the server", || demo.stats()["calls"] == 2);
    // A's cancel can only come on another connection (its own is busy with its call): it is
    // not the connection either call arrived on, so it cancels nothing.
    cancel(&gw, json!(7), &[]);
    for (handle, manga) in [(a, "MNG-00000001"), (b, "MNG-00000002")] {
        let (status, _, body) = handle.join().unwrap();
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["result"]["structuredContent"]["manga_id"], manga, "{answer}");
    }
    let stats = demo.stats();
    assert_eq!((stats["answered"].as_u64(), stats["abandoned"].as_u64()), (Some(2), Some(0)), "{stats}");
    assert_eq!(cancelled_samples(&gw), 0.0);
}

#[test]
fn a_sessionless_callers_cancel_on_its_own_connection_still_works() {
    let demo = Demo::slow(3_000);
    let gw = gateway_for(&demo.url());
    // B's call 7 runs on its own connection.
    let b = post_in_background(&gw, call_body(json!(7), "MNG-00000002").to_string(), &[]);
    wait_for("B's call to reach the server", || demo.stats()["calls"] == 1);
    // A sends its call 7 and its cancel on one connection (one HTTP/1.1 request: a batch).
    let cancel_7 = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    let batch = json!([call_body(json!(7), "MNG-00000001"), cancel_7]);
    let (status, _, body) = gw.post_raw(batch.to_string(), &[]);
    assert_eq!(status, 200, "{body}");
    let answers: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answers.as_array().map(Vec::len), Some(1), "{answers}");
    expect_error(&answers[0], -32800, "cancelled");
    let (status, _, body) = b.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["manga_id"], "MNG-00000002",
        "B's call was not cancelled: {answer}"
    );
    wait_for("the server to answer B", || demo.stats()["answered"] == 1);
    assert_eq!(cancelled_samples(&gw), 1.0);
}

#[test]
fn a_cancelled_batch_item_is_answered_cancelled_and_the_others_complete() {
    let demo = Demo::slow(5_000);
    let gw = gateway_for(&demo.url());
    let batch = json!([call_body(json!("x"), "MNG-00000001"), call_body(json!("y"), "MNG-00000002")]);
    let session = open_session(&gw);
    let scope = [("mcp-session-id", session.as_str())];
    let call = post_in_background(&gw, batch.to_string(), &[("accept", ACCEPT_BOTH), scope[0]]);
    wait_for("both items to reach the server", || demo.stats()["calls"] == 2);
    cancel(&gw, json!("x"), &scope);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("application/json"), "a batch is answered as JSON: {content_type}");
    let answers: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answers[0]["id"], "x");
    expect_error(&answers[0], -32800, "cancelled");
    assert_eq!(answers[1]["id"], "y");
    assert_eq!(answers[1]["result"]["structuredContent"]["manga_id"], "MNG-00000002", "{answers}");
}
