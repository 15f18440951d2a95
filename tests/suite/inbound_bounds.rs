//! The inbound bounds (`[inbound]`), end to end against the built gateway over real sockets:
//! slow headers and bodies, the connection cap, oversized batches, session floods, and long
//! caller-chosen ids with a log reader that does not keep up. Each asserts what the caller
//! sees and what the gateway did (upstream call counts, metrics), never how long it took.

use std::{
    io::{BufRead, BufReader, ErrorKind, Read, Write},
    net::TcpStream,
    time::Duration,
};

use crate::common::*;
use serde_json::{Value, json};

fn catalog(url: &str, inbound: &str) -> String {
    format!("[servers.catalog]\ntransport = \"http\"\nurl = \"{url}\"\n[inbound]\n{inbound}\n")
}

/// A client without a connection pool: each request its own connection.
fn unpooled() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Whether the peer has closed `stream` (EOF or reset); `false` when it is merely quiet.
fn closed_by_peer(stream: &mut TcpStream, seen: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 4096];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => {
            seen.extend_from_slice(&buf[..n]);
            false
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(_) => true,
    }
}

/// Reads one whole HTTP/1.1 response with a `content-length`: status and body.
fn read_response(stream: &mut TcpStream) -> (u16, Value) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[test]
fn headers_dribbled_past_the_header_timeout_are_never_served() {
    let demo = Demo::http();
    let gw = Gateway::start(&catalog(&demo.url(), "header_read_timeout_ms = 500"), &[]);
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "x"}}}).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nx-padding: {}\r\ncontent-length: {}\r\n\r\n",
        "p".repeat(400),
        body.len()
    );
    // One byte every 100 ms: the whole head would take over 40 s; the bound is 0.5 s.
    let mut seen = Vec::new();
    let mut closed = false;
    for byte in head.as_bytes() {
        if stream.write_all(&[*byte]).is_err() || closed_by_peer(&mut stream, &mut seen) {
            closed = true;
            break;
        }
    }
    assert!(closed, "the connection outlived a head dribbled far past the header timeout");
    let _ = stream.write_all(body.as_bytes());
    assert!(seen.is_empty(), "nothing was answered: {}", String::from_utf8_lossy(&seen));
    assert_eq!(demo.stats()["calls"], 0, "the request never reached the upstream");
    // Others are served as before.
    assert_eq!(gw.call("manga_search", json!({"query": "x"}))["result"]["isError"], false);
}

#[test]
fn a_body_sent_past_the_body_timeout_gets_a_408_with_a_json_rpc_error() {
    let demo = Demo::http();
    let gw = Gateway::start(&catalog(&demo.url(), "body_read_timeout_ms = 500"), &[]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "x"}}}).to_string();
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    // One body byte every 100 ms (the body would take over 10 s); stop when the answer comes.
    let mut answered = false;
    for byte in body.as_bytes() {
        if stream.write_all(&[*byte]).is_err() {
            answered = true;
            break;
        }
        let mut peek = [0u8; 1];
        match stream.peek(&mut peek) {
            Ok(n) if n > 0 => {
                answered = true;
                break;
            }
            _ => {}
        }
    }
    assert!(answered, "no answer while the body was dribbled past the body timeout");
    let (status, answer) = read_response(&mut stream);
    assert_eq!(status, 408, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["error"]["data"]["limit"]["key"], "inbound.body_read_timeout_ms", "{answer}");
    assert_eq!(answer["error"]["data"]["limit"]["value"], 500);
    assert_eq!(demo.stats()["calls"], 0, "the call never ran");
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_http_rejections_total", &["body_read_timeout"]), 1.0);
}

#[test]
fn connections_over_the_cap_get_a_503_and_calls_still_reach_the_upstream() {
    let demo = Demo::http();
    let mut gw = Gateway::start(&catalog(&demo.url(), "max_connections = 4"), &[]);
    // The readiness probe's pooled connection is closed with its client.
    gw.client = unpooled();
    let client = unpooled();
    // Hold every slot with idle connections, each proven accepted by a served request.
    let mut held: Vec<TcpStream> = Vec::new();
    wait_for("four held connections", || {
        held.retain_mut(|s| {
            s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            !closed_by_peer(s, &mut Vec::new())
        });
        while held.len() < 4 {
            let mut stream = TcpStream::connect(gw.addr).unwrap();
            stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").unwrap();
            let (status, _) = read_response(&mut stream);
            if status != 200 {
                return false;
            }
            held.push(stream);
        }
        true
    });
    // A flood over the cap: each one answered 503 (-32005) or closed, none served.
    let mut refused = 0;
    for _ in 0..40 {
        let mut stream = TcpStream::connect(gw.addr).unwrap();
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
        let mut text = Vec::new();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let _ = stream.read_to_end(&mut text);
        let text = String::from_utf8_lossy(&text);
        assert!(!text.starts_with("HTTP/1.1 200"), "served over the cap: {text}");
        if text.starts_with("HTTP/1.1 503") {
            let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            assert_eq!(body["error"]["code"], -32005, "{body}");
            assert_eq!(body["error"]["data"]["limit"]["key"], "inbound.max_connections");
            assert_eq!(body["error"]["data"]["limit"]["value"], 4);
            refused += 1;
        }
    }
    assert!(refused > 0, "no connection over the cap was answered 503");
    // One slot freed: a normal call gets through, and so does the gateway's own connect to its
    // upstream (the flood used no descriptors it needed).
    held.pop();
    let before = demo.stats()["calls"].as_u64().unwrap();
    let mut answer = Value::Null;
    wait_for("a call after a slot was freed", || {
        let response = client
            .post(gw.url("/mcp"))
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "x"}}}).to_string())
            .send();
        match response {
            Ok(r) if r.status() == 200 => {
                answer = r.json().unwrap();
                true
            }
            _ => false,
        }
    });
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(demo.stats()["calls"].as_u64().unwrap(), before + 1);
    drop(held);
    let mut metrics = String::new();
    wait_for("the metrics after the held connections closed", || {
        match client.get(gw.url("/metrics")).send() {
            Ok(r) if r.status() == 200 => {
                metrics = r.text().unwrap();
                true
            }
            _ => false,
        }
    });
    assert!(
        metric(&metrics, "mcp_gateway_http_rejections_total", &["connections_over_cap"]) >= refused as f64,
        "{metrics}"
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let gw = Gateway::start_with_args("[inbound]\nidle_timeout_ms = 300\n", &[], &["--demo"]);
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut stream).0, 200);
    // Then nothing: the gateway closes it (EOF), without an answer.
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut rest = Vec::new();
    let read = stream.read_to_end(&mut rest);
    assert!(read.is_ok() && rest.is_empty(), "{read:?} {}", String::from_utf8_lossy(&rest));
}

#[test]
fn an_oversized_batch_is_one_error_and_no_item_runs() {
    let demo = Demo::http();
    let gw = Gateway::start(&catalog(&demo.url(), "max_batch_items = 8"), &[]);
    // Distinct arguments: identical read-only calls would share one upstream call.
    let item = |i: usize| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": format!("q{i}")}}});
    let (status, answer) = gw.rpc(&Value::Array((0..9).map(item).collect()));
    assert_eq!(status, 400, "{answer}");
    assert!(answer.is_object(), "one error, not an array of answers: {answer}");
    assert_eq!(answer["error"]["code"], -32600);
    assert_eq!(answer["error"]["data"]["limit"], json!({"key": "inbound.max_batch_items", "value": 8}));
    assert_eq!(demo.stats()["calls"], 0, "no item of the refused batch ran");
    // At the bound: every item runs and is answered.
    let (status, answers) = gw.rpc(&Value::Array((0..8).map(item).collect()));
    assert_eq!(status, 200);
    assert_eq!(answers.as_array().map(Vec::len), Some(8));
    assert_eq!(demo.stats()["calls"], 8);
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_http_rejections_total", &["batch_too_large"]), 1.0);
}

#[test]
fn a_batch_whose_answers_pass_the_byte_bound_gets_errors_for_the_rest() {
    let gw = Gateway::start_with_args("[inbound]\nmax_batch_answer_bytes = 6000\n", &[], &["--demo"]);
    let (_, alone) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}));
    let one = alone.to_string().len();
    assert!(one < 6000 && one * 4 > 6000, "the catalogue's size suits the test: {one}");
    let batch: Vec<Value> =
        (0..4).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"})).collect();
    let (status, text) = {
        let (status, _, text) = gw.post_raw(Value::Array(batch).to_string(), &[]);
        (status, text)
    };
    assert_eq!(status, 200);
    assert!(text.len() <= 6000 + 2 * 4 * 400, "the answer stays near the bound: {}", text.len());
    let answers: Value = serde_json::from_str(&text).unwrap();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 4, "every item is answered");
    assert!(answers[0]["result"]["tools"].is_array());
    let refused: Vec<&Value> = answers.iter().filter(|a| a.get("error").is_some()).collect();
    assert!(!refused.is_empty());
    for answer in refused {
        assert_eq!(answer["error"]["data"]["limit"]["key"], "inbound.max_batch_answer_bytes", "{answer}");
    }
}

/// `initialize` declaring `capabilities`; the status, body and `Mcp-Session-Id`.
fn initialize(gw: &Gateway, capabilities: Value, client_info: Value) -> (u16, Value, Option<String>) {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": client_info}});
    let (status, headers, text) = gw.post_raw(body.to_string(), &[]);
    let session = headers.get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    (status, serde_json::from_str(&text).unwrap_or(Value::Null), session)
}

#[test]
fn a_session_flood_is_refused_and_other_callers_sessions_survive() {
    let gw = Gateway::start_with_args("[inbound]\nmax_sessions = 8\n", &[], &["--demo"]);
    let (status, _, first) =
        initialize(&gw, json!({"sampling": {}}), json!({"name": "victim", "version": "1"}));
    assert_eq!(status, 200);
    let victim = first.expect("a back-channel session");
    let mut opened = 1;
    let mut refusals = 0;
    for i in 0..30 {
        let (status, answer, session) =
            initialize(&gw, json!({"sampling": {}}), json!({"name": format!("flood-{i}")}));
        match status {
            200 => {
                assert!(session.is_some());
                opened += 1;
            }
            503 => {
                assert!(session.is_none());
                assert_eq!(answer["id"], 0, "{answer}");
                assert_eq!(answer["error"]["code"], -32005, "{answer}");
                assert_eq!(
                    answer["error"]["data"]["limit"],
                    json!({"key": "inbound.max_sessions", "value": 8})
                );
                refusals += 1;
            }
            other => panic!("unexpected {other}: {answer}"),
        }
    }
    assert_eq!((opened, refusals), (8, 23));
    // The first caller's session is still there: a request under it is served, not 404.
    let (status, _, text) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
        &[("mcp-session-id", victim.as_str())],
    );
    assert_eq!(status, 200, "{text}");
    // Ending it makes room for one more.
    let ended = gw.client.delete(gw.url("/mcp")).header("mcp-session-id", victim.as_str()).send().unwrap();
    assert_eq!(ended.status(), 204);
    let (status, _, session) = initialize(&gw, json!({"roots": {}}), json!({"name": "late"}));
    assert_eq!((status, session.is_some()), (200, true));
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_http_rejections_total", &["sessions_full"]), 23.0);
}

#[test]
fn a_session_keeps_only_a_bounded_state() {
    let gw = Gateway::start_with_args("[inbound]\nmax_session_bytes = 4096\n", &[], &["--demo"]);
    let blob = "x".repeat(200_000);
    // What the gateway does not keep may be large: accepted.
    let (status, _, session) = initialize(
        &gw,
        json!({"sampling": {}, "experimental": {"blob": blob}}),
        json!({"name": blob, "version": "1", "icons": [blob]}),
    );
    assert_eq!((status, session.is_some()), (200, true));
    // What it would keep may not.
    let (status, answer, session) =
        initialize(&gw, json!({"sampling": {"blob": blob}}), json!({"name": "big"}));
    assert_eq!(status, 400, "{answer}");
    assert!(session.is_none());
    assert_eq!(answer["error"]["code"], -32600);
    assert_eq!(answer["error"]["data"]["limit"], json!({"key": "inbound.max_session_bytes", "value": 4096}));
}

#[test]
fn long_caller_ids_with_a_slow_log_reader_keep_the_log_queue_bounded_in_bytes() {
    let mut gw =
        UnreadGateway::start("[inbound]\nlog_queue_bytes = 65536\nlog_max_field_bytes = 512\n", &["--demo"]);
    let addr = gw.addr;
    // Then stdout is not read while 200 calls with 256 KiB JSON-RPC ids (logged on each call
    // line) go through.
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let long = "i".repeat(256 * 1024);
    for n in 0..200 {
        let body = json!({"jsonrpc": "2.0", "id": format!("{long}{n}"), "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}});
        let answer = client
            .post(format!("http://{addr}/mcp"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap_or_else(|e| panic!("call {n} got no answer: {e}"));
        assert_eq!(answer.status(), 200);
    }
    let metrics = client.get(format!("http://{addr}/metrics")).send().unwrap().text().unwrap();
    let lines = metric(&metrics, "mcp_gateway_log_lines_dropped_total", &[]);
    let bytes = metric(&metrics, "mcp_gateway_log_bytes_dropped_total", &[]);
    // 200 lines are far below the line bound (128 000): only the byte bound dropped them.
    assert!(lines > 0.0 && bytes > 0.0, "{metrics}");
    // Every dropped line had its ids cut before it was queued.
    assert!(bytes / lines < 4096.0, "{bytes} bytes in {lines} lines");
    // What was written: lines of bounded length, the ids marked as cut.
    let _ = gw.child.kill();
    let _ = gw.child.wait();
    let mut written = String::new();
    let _ = gw.stdout.read_to_string(&mut written);
    // The process was killed while it wrote: a last line without its newline is cut short.
    let complete = written.rfind('\n').map_or("", |end| &written[..=end]);
    let calls: Vec<&str> = complete.lines().filter(|l| l.contains("\"tools/call\"")).collect();
    assert!(!calls.is_empty(), "some call lines were written");
    for call in &calls {
        assert!(call.len() < 4096, "a line of {} bytes", call.len());
        let v: Value = serde_json::from_str(call).unwrap();
        assert!(v["jsonrpc_id"].as_str().unwrap().contains("[truncated "), "{call}");
    }
}
