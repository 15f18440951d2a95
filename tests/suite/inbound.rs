//! The inbound MCP endpoint, end to end: the real gateway binary in front of the real demo
//! server, over TCP. Covers both protocol eras, batches, notifications, the HTTP-level
//! refusals (403, 413, 405, 400) and every gateway-made JSON-RPC error.

use crate::common::*;
use serde_json::{Value, json};

fn demo_gateway() -> Gateway {
    Gateway::start_with_args("", &[], &["--demo"])
}

#[test]
fn bare_tools_call_without_handshake_reaches_the_demo_server() {
    let gw = demo_gateway();
    let answer = gw.call("manga_search", json!({"query": "ワンピース 100"}));
    let results = &structured(&answer)["results"];
    assert_eq!(results[0]["manga_id"], "MNG-00000001", "{answer}");
    assert_eq!(answer["result"]["isError"], false);
    // The default language (ja) was filled in before forwarding: titles come back in Japanese.
    assert_eq!(results[0]["title"], "ワンピース 100");
}

#[test]
fn defaults_are_forwarded_and_explicit_values_win() {
    let gw = demo_gateway();
    let answer = gw.call("manga_search", json!({"query": "naruto", "language": "en"}));
    assert_eq!(structured(&answer)["results"][0]["title"], "Naruto 1");
}

#[test]
fn tools_list_is_the_deterministic_catalogue() {
    let gw = demo_gateway();
    let names = gw.tool_names();
    assert_eq!(
        names,
        [
            "add_to_cart",
            "checkout",
            "inventory_check",
            "manga_recommendations",
            "manga_search",
            "price_lookup"
        ]
    );
    let (_, first) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let (_, second) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(first, second);
    assert!(first["result"]["tools"][0]["inputSchema"].is_object());
}

#[test]
fn legacy_client_handshake_then_call() {
    let gw = demo_gateway();
    let (status, init) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    assert_eq!(status, 200);
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    let (status, body) = gw.rpc(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!((status, body), (202, Value::Null));
    let (_, ping) = gw.rpc(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    assert_eq!(ping["result"], json!({}));
    let (status, headers, body) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000004"}}}).to_string(),
        &[("MCP-Protocol-Version", "2025-06-18")],
    );
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-request-id").is_some());
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["result"]["structuredContent"]["retail_price"], 484);
}

#[test]
fn modern_client_discovers_and_calls_with_meta_and_headers() {
    let gw = demo_gateway();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let (status, _, body) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
            .to_string(),
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "server/discover")],
    );
    assert_eq!(status, 200);
    let discover: Value = serde_json::from_str(&body).unwrap();
    assert!(
        discover["result"]["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")),
        "{discover}"
    );
    let (status, _, body) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "inventory_check", "arguments": {"manga_ids": ["MNG-00000001"]}, "_meta": meta}}).to_string(),
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "inventory_check")],
    );
    assert_eq!(status, 200);
    let call: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(call["result"]["structuredContent"]["items"][0]["stock"], 59, "{call}");
    // A header that disagrees with the body is refused.
    let (status, _, body) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}}).to_string(),
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call")],
    );
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, refused["error"]["code"].clone()), (400, json!(-32020)), "{refused}");
    assert_eq!(refused["id"], 3);
    // An unknown tool is -32602 for modern callers (the revision forbids -32002).
    let (_, _, body) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}, "_meta": meta}}).to_string(),
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "nope")],
    );
    let unknown: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(unknown["error"]["data"]["category"], "unknown_tool");
}

#[test]
fn batches_answer_in_order_and_fail_item_by_item() {
    let gw = demo_gateway();
    let (status, body) = gw.rpc(&json!([
        {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "price_lookup", "arguments": {"isbn": "978-4-08-882434-5"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "add_to_cart", "arguments": {"quantity": 3}}},
        {"jsonrpc": "2.0", "id": "d", "method": "ping"},
        {"jsonrpc": "1.0", "id": "e", "method": "ping"},
        42
    ]));
    assert_eq!(status, 200);
    let items = body.as_array().unwrap();
    let ids: Vec<&Value> = items.iter().map(|i| &i["id"]).collect();
    assert_eq!(ids, [&json!("a"), &json!("b"), &json!("c"), &json!("d"), &json!("e"), &Value::Null]);
    assert_eq!(items[0]["result"]["structuredContent"]["manga_id"], "MNG-00000004");
    expect_error(&items[1], -32002, "unknown_tool");
    expect_error(&items[2], -32602, "bad_input");
    assert_eq!(items[3]["result"], json!({}));
    expect_error(&items[4], -32600, "invalid_request");
    expect_error(&items[5], -32600, "invalid_request");
}

#[test]
fn notification_only_batches_get_202_without_body() {
    let gw = demo_gateway();
    let (status, _, body) = gw.post_raw(
        json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}]).to_string(),
        &[],
    );
    assert_eq!((status, body.as_str()), (202, ""));
}

#[test]
fn invalid_arguments_list_every_violation_and_are_never_forwarded() {
    let gw = demo_gateway();
    let answer = gw.call("manga_search", json!({"language": "fr", "max_results": 0, "genre": "horror"}));
    let data = expect_error(&answer, -32602, "bad_input");
    let violations = data["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 4, "{answer}");
    assert!(violations.iter().any(|v| v["path"] == "/max_results"));
    assert_eq!(data["tool"], "manga_search");
    assert_eq!(data["retryable"], false);
    // oneOf: both identifiers at once is a violation too.
    let both = gw.call("price_lookup", json!({"manga_id": "MNG-00000001", "isbn": "9784088835457"}));
    expect_error(&both, -32602, "bad_input");
    // Arguments that are not an object.
    let (_, not_object) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": [1]}}));
    expect_error(&not_object, -32602, "bad_input");
    // Only the start-up tools/list ever reached the upstream.
    let metrics = gw.metrics();
    let upstream = metric(&metrics, "mcp_gateway_upstream_requests_total", &["server=\"demo\""]);
    assert_eq!(upstream, 1.0, "invalid calls must never be forwarded:\n{metrics}");
}

#[test]
fn tool_errors_pass_through_untouched() {
    let gw = demo_gateway();
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-99999999"}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("MNG-99999999"));
    assert!(gw.metrics().contains("outcome=\"tool_error\""));
}

#[test]
fn unknown_tools_and_methods() {
    let gw = demo_gateway();
    let answer = gw.call("manga_serch", json!({}));
    let data = expect_error(&answer, -32002, "unknown_tool");
    assert_eq!(data["tool"], "manga_serch");
    let (_, method) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 9, "method": "resources/lists"}));
    expect_error(&method, -32601, "method_not_found");
    let (_, no_name) =
        gw.rpc(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": {}}}));
    expect_error(&no_name, -32602, "bad_input");
    // Made-up tool names never become metric labels.
    assert!(!gw.metrics().contains("manga_serch"));
}

#[test]
fn malformed_bodies_get_precise_errors() {
    let gw = demo_gateway();
    for (body, code) in [
        ("{not json", -32700),
        ("", -32700),
        ("[]", -32600),
        ("\"just a string\"", -32600),
        (r#"{"jsonrpc":"2.0","id":1}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, -32600),
    ] {
        let (status, _, text) = gw.post_raw(body.to_string(), &[]);
        assert!(status == 200 || status == 400, "{body}: {status}");
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{body}: non-JSON answer {text:?}"));
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
    }
    // Invalid UTF-8 and binary garbage.
    let (status, _, text) = gw.post_raw(vec![0xff, 0xfe, 0x00, 0x7b], &[]);
    assert_eq!(status, 400);
    assert!(text.contains("-32700"));
}

#[test]
fn oversized_bodies_get_413_with_a_json_rpc_error() {
    let gw = Gateway::start_with_args("max_body_bytes = 4096", &[], &["--demo"]);
    let query = "x".repeat(5000);
    let (status, _, text) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": query}}}).to_string(),
        &[],
    );
    assert_eq!(status, 413);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["data"]["category"], "payload_too_large");
    // Chunked bodies without Content-Length are refused the same way (the gateway reads and
    // drops a bounded excess so the client sees the 413, not a reset).
    let chunks: Vec<Vec<u8>> = (0..10).map(|_| vec![b' '; 1000]).collect();
    let response = gw
        .client
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .body(reqwest::blocking::Body::new(ChunkedReader(chunks, 0)))
        .send();
    assert_eq!(response.expect("a 413 answer, not a reset").status(), 413);
    for _ in 0..20 {
        let (status, _, _) = gw.post_raw("x".repeat(6000), &[]);
        assert_eq!(status, 413);
    }
    // And the gateway still serves.
    let (status, _) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(status, 200);
}

/// A reader that yields its chunks one by one (forces chunked transfer encoding).
struct ChunkedReader(Vec<Vec<u8>>, usize);

impl std::io::Read for ChunkedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.get(self.1) {
            None => Ok(0),
            Some(chunk) => {
                let n = chunk.len().min(buf.len());
                buf[..n].copy_from_slice(&chunk[..n]);
                self.1 += 1;
                Ok(n)
            }
        }
    }
}

#[test]
fn foreign_origins_get_403_and_loopback_origins_pass() {
    let gw = demo_gateway();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let (status, _, text) = gw.post_raw(ping.clone(), &[("Origin", "https://evil.example")]);
    assert_eq!(status, 403);
    assert!(text.contains("forbidden_origin"));
    let (status, _, _) = gw.post_raw(ping, &[("Origin", "http://localhost:3000")]);
    assert_eq!(status, 200);
}

#[test]
fn unsupported_protocol_versions_are_refused_with_the_supported_list() {
    let gw = demo_gateway();
    let (status, _, text) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        &[("MCP-Protocol-Version", "1999-01-01")],
    );
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["error"]["data"]["supported"].as_array().unwrap().contains(&json!("2025-11-25")));
    assert_eq!(v["error"]["code"], -32022);
    let (status, v) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}}}));
    assert_eq!(status, 400);
    assert_eq!(v["error"]["data"]["category"], "unsupported_protocol_version");
}

#[test]
fn other_http_methods_and_paths() {
    let gw = demo_gateway();
    let get = gw.client.get(gw.url("/mcp")).send().unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(get.headers()["allow"], "POST");
    assert!(get.text().unwrap().contains("jsonrpc"));
    assert_eq!(gw.client.get(gw.url("/nope")).send().unwrap().status(), 404);
    assert_eq!(gw.client.get(gw.url("/healthz")).send().unwrap().status(), 200);
    let ready: Value = gw.client.get(gw.url("/readyz")).send().unwrap().json().unwrap();
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["tools"], 6);
}

#[test]
fn metrics_and_logs_describe_each_call_without_raw_arguments() {
    let gw = demo_gateway();
    let secret = "SECRET-CARD-4242";
    gw.call("checkout", json!({"shipping_address_id": "addr-1", "payment_method_id": secret}));
    let metrics = gw.metrics();
    for needle in [
        "mcp_gateway_tool_calls_total{outcome=\"success\",server=\"demo\",tool=\"checkout\"} 1",
        "mcp_gateway_tool_call_duration_seconds_bucket{server=\"demo\",tool=\"checkout\",le=\"0.0001\"}",
        "mcp_gateway_upstream_requests_total{server=\"demo\",status=\"200\",transport=\"http\"}",
        "mcp_gateway_in_flight 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    let mut proc = gw.proc;
    let line = proc.wait_line("\"tool\":\"checkout\"", std::time::Duration::from_secs(5));
    let v: Value = serde_json::from_str(&line).unwrap();
    for key in [
        "request_id",
        "jsonrpc_id",
        "tool",
        "server",
        "transport",
        "outcome",
        "latency_us",
        "attempts",
        "args_hash",
    ] {
        assert!(v.get(key).is_some(), "log line lacks {key}: {line}");
    }
    assert_eq!(v["outcome"], "success");
    assert!(!proc.output().contains(secret), "raw arguments leaked into the logs");
}

#[test]
fn shutdown_drains_in_flight_calls() {
    // A slow Lambda upstream keeps a call in flight while SIGTERM arrives.
    let lambda = Demo::lambda_api();
    let config = format!(
        "[aws]\nendpoint_url = \"http://{}\"\n[servers.slow]\ntransport = \"lambda\"\nfunction = \"mcp-demo-slow-1500\"\n",
        lambda.addr
    );
    let gw = Gateway::start(&config, &[]);
    let url = gw.url("/mcp");
    let call = std::thread::spawn(move || {
        reqwest::blocking::Client::new()
            .post(url)
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "naruto"}}}).to_string())
            .send()
            .map(|r| r.text().unwrap())
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut proc = gw.proc;
    let status = proc.terminate();
    assert!(status.success(), "gateway exit status {status}");
    let text = call.join().unwrap().expect("the in-flight call got an answer");
    assert!(text.contains("Naruto"), "{text}");
    // Its log line, written after the answer left, is not lost with the process.
    // (The process has exited: its last lines may still be on their way through the pipe.)
    let logged = |output: &str| {
        output
            .lines()
            .any(|l| l.contains("\"tool\":\"manga_search\"") && l.contains("\"outcome\":\"success\""))
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !logged(&proc.output()) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(logged(&proc.output()), "no log line for the drained call:\n{}", proc.output());
}

#[test]
fn non_loopback_addresses_need_the_explicit_flag() {
    let refused = std::process::Command::new(BIN)
        .args(["serve", "--demo", "--listen", "0.0.0.0:0"])
        .output()
        .expect("the binary runs");
    assert!(!refused.status.success());
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("--allow-non-loopback"), "{text}");
    let mut allowed = Proc::spawn("gateway", {
        let mut c = std::process::Command::new(BIN);
        c.args(["serve", "--demo", "--listen", "0.0.0.0:0", "--allow-non-loopback"]);
        c
    });
    let warning = allowed.wait_line("non-loopback", std::time::Duration::from_secs(20));
    assert!(warning.contains("WARN"), "{warning}");
}

#[test]
fn help_and_config_check_work_for_operators() {
    let help = std::process::Command::new(BIN).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("serve"));
    let checked = std::process::Command::new(BIN)
        .args(["check-config", "--config", "config/example.toml"])
        .env("MCP_GATEWAY_SERVERS__CATALOG__HEADERS__AUTHORIZATION", "Bearer secret-token")
        .output()
        .unwrap();
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let text = String::from_utf8_lossy(&checked.stdout);
    assert!(text.contains("<redacted>") && !text.contains("secret-token"), "{text}");
    let bad = std::process::Command::new(BIN)
        .args(["check-config"])
        .env("MCP_GATEWAY_LISTEN_PORT", "1")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("listen_port"));
}

#[test]
fn random_and_mutated_bodies_always_get_a_json_answer() {
    let gw = demo_gateway();
    let valid = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "naruto"}}}).to_string();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300 {
        let mut body = valid.clone().into_bytes();
        match round % 4 {
            // Flip bytes.
            0 => {
                for _ in 0..(1 + next() % 4) {
                    let i = (next() as usize) % body.len();
                    body[i] = (next() % 256) as u8;
                }
            }
            // Truncate.
            1 => body.truncate((next() as usize) % body.len()),
            // Pure noise.
            2 => body = (0..(next() % 200)).map(|_| (next() % 256) as u8).collect(),
            // Deep nesting and odd shapes.
            _ => {
                let depth = 1 + (next() % 300) as usize;
                body = format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes();
            }
        }
        let (status, _, text) = gw.post_raw(body, &[]);
        assert!(matches!(status, 200 | 202 | 400), "round {round}: HTTP {status} {text}");
        if status != 202 {
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("round {round}: non-JSON answer ({e}): {text:?}"));
            assert!(
                v.is_array() || v.get("result").is_some() || v.get("error").is_some(),
                "round {round}: {v}"
            );
        }
    }
    let (status, _) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(status, 200, "the gateway survived");
}
