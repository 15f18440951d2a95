//! Inbound `notifications/cancelled`: the named in-flight call is dropped, which cancels it
//! upstream (a session-era server gets `notifications/cancelled`, a modern one sees its stream
//! closed). The cancelled request's POST gets the `cancelled` error (-32800) when the caller
//! reads JSON, and an event stream that ends without a response when it reads event streams.
//! Request ids are scoped by the caller's `Mcp-Session-Id`.

mod common;

use std::{process::Command, thread, time::Duration};

use common::*;
use serde_json::{Value, json};

const BOTH: &str = "application/json, text/event-stream";

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

/// POSTs `body` from another thread; the handle yields status, content type and body.
fn post_in_background(
    gw: &Gateway,
    body: String,
    headers: &[(&str, &str)],
) -> thread::JoinHandle<(u16, String, String)> {
    let url = gw.url("/mcp");
    let headers: Vec<(String, String)> =
        headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        let mut request = client.post(url).header("content-type", "application/json").body(body);
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        let response = request.send().expect("gateway answers");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (status, content_type, response.text().unwrap())
    })
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
    let call = post_in_background(&gw, call_body(json!("order-7"), "MNG-00000001").to_string(), &[]);
    wait_for("the call to reach the server", || demo.stats()["calls"] == 1);
    cancel(&gw, json!("order-7"), &[]);
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
fn a_cancelled_call_to_a_modern_server_closes_its_stream_and_an_sse_caller_gets_no_response() {
    let demo = Demo::slow(30_000);
    let gw = gateway_for(&demo.url());
    let call = post_in_background(&gw, call_body(json!(11), "MNG-00000002").to_string(), &[("accept", BOTH)]);
    wait_for("the call to reach the server", || demo.stats()["calls"] == 1);
    cancel(&gw, json!(11), &[]);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    assert_eq!(body, "", "the stream ends without a response");
    wait_for("the server to see the call abandoned", || demo.stats()["abandoned"] == 1);
    let stats = demo.stats();
    assert_eq!(stats["cancel_notifications"], 0, "modern era: the stream closes, no notification: {stats}");
    assert_eq!(stats["answered"], 0, "{stats}");
    assert_eq!(cancelled_samples(&gw), 1.0);
}

#[test]
fn a_cancelled_progress_stream_ends_after_its_progress_with_no_response() {
    let port = free_port();
    let mut command = Command::new(python());
    command.arg(peers_dir().join("progress_server.py")).arg(port.to_string());
    let mut peer = Proc::spawn("progress-server", command);
    peer.wait_line("READY", Duration::from_secs(30));
    let gw = gateway_for(&format!("http://127.0.0.1:{port}/mcp"));
    let body = json!({"jsonrpc": "2.0", "id": "p-1", "method": "tools/call",
        "params": {"name": "progress_forever", "arguments": {"interval_ms": 50}, "_meta": {"progressToken": "t"}}});
    let call = post_in_background(&gw, body.to_string(), &[("accept", BOTH)]);
    let stats = || {
        let answer = gw.call("peer_stats", json!({}));
        serde_json::from_str::<Value>(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    wait_for("the call to start upstream", || stats()["started"] == 1);
    cancel(&gw, json!("p-1"), &[]);
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
    let a = post_in_background(
        &gw,
        call_body(json!(1), "MNG-00000001").to_string(),
        &[("mcp-session-id", "sess-a")],
    );
    let b = post_in_background(
        &gw,
        call_body(json!(1), "MNG-00000002").to_string(),
        &[("mcp-session-id", "sess-b")],
    );
    let c = post_in_background(&gw, call_body(json!(1), "MNG-00000003").to_string(), &[]);
    wait_for("the three calls to reach the server", || demo.stats()["calls"] == 3);
    cancel(&gw, json!(99), &[("mcp-session-id", "sess-a")]); // unknown id: nothing happens
    cancel(&gw, json!("1"), &[("mcp-session-id", "sess-a")]); // "1" is not 1: nothing happens
    cancel(&gw, json!(1), &[("mcp-session-id", "sess-a")]);
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
    wait_for("the server to see one call abandoned", || demo.stats()["abandoned"] == 1);
    assert_eq!(demo.stats()["answered"], 2);
    assert_eq!(cancelled_samples(&gw), 1.0);
}

#[test]
fn a_cancelled_batch_item_is_answered_cancelled_and_the_others_complete() {
    let demo = Demo::slow(5_000);
    let gw = gateway_for(&demo.url());
    let batch = json!([call_body(json!("x"), "MNG-00000001"), call_body(json!("y"), "MNG-00000002")]);
    let call = post_in_background(&gw, batch.to_string(), &[("accept", BOTH)]);
    wait_for("both items to reach the server", || demo.stats()["calls"] == 2);
    cancel(&gw, json!("x"), &[]);
    let (status, content_type, body) = call.join().unwrap();
    assert_eq!(status, 200);
    assert!(content_type.starts_with("application/json"), "a batch is answered as JSON: {content_type}");
    let answers: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answers[0]["id"], "x");
    expect_error(&answers[0], -32800, "cancelled");
    assert_eq!(answers[1]["id"], "y");
    assert_eq!(answers[1]["result"]["structuredContent"]["manga_id"], "MNG-00000002", "{answers}");
}
