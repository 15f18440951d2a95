//! OpenTelemetry tracing end to end, with real processes: the gateway exports OTLP/HTTP
//! protobuf to `tests/peers/receivers/otlp_receiver.py` (decoded with the OpenTelemetry project's own
//! Python bindings, written as JSON lines); upstreams are the demo server over HTTP and behind
//! the Lambda Invoke API emulator, which record the trace context they received.
//!
//! Checked: the message span is parented on the caller's `traceparent` (header or `_meta`),
//! attempt spans are its children (a retried call has two), attributes say what happened
//! (cache hit, attempts, breaker state, upstream status, error type), the upstream sees the
//! attempt span's context (HTTP header and `_meta`; Lambda client context and `_meta`) and the
//! caller's `X-Request-Id` / `X-Amzn-Trace-Id`, the call's log line carries the trace id, spans
//! of a call drained at SIGTERM are exported before exit, and with tracing off the caller's
//! context passes through unchanged.

use std::{path::PathBuf, process::Command};

use crate::common::*;
use serde_json::{Value, json};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// The OTLP receiver process and the file it writes spans to.
struct Receiver {
    _proc: Proc,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start() -> Self {
        let python = peers_dir().join(".venv-otel/bin/python");
        assert!(
            python.exists(),
            "missing the OTLP receiver's Python venv {} (opentelemetry-proto): run scripts/install-test-deps.sh",
            python.display()
        );
        let port = free_port();
        let out = temp_path("spans.jsonl");
        let mut command = Command::new(python);
        command.arg("-u").arg(peers_dir().join("receivers/otlp_receiver.py")).arg(port.to_string()).arg(&out);
        let proc = Proc::spawn_until("otlp_receiver.py", command, "otlp receiver listening");
        Self { _proc: proc, port, out }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("receiver writes JSON lines"))
            .collect()
    }

    fn in_trace(&self, trace: &str) -> Vec<Value> {
        self.spans().into_iter().filter(|s| s["trace_id"] == trace).collect()
    }

    /// Waits until the trace holds a server span and `clients` client spans; returns them.
    fn wait_trace(&self, trace: &str, clients: usize) -> (Value, Vec<Value>) {
        wait_for(&format!("trace {trace} with {clients} attempt span(s) at the receiver"), || {
            let spans = self.in_trace(trace);
            spans.iter().filter(|s| s["kind"] == "SERVER").count() == 1
                && spans.iter().filter(|s| s["kind"] == "CLIENT").count() == clients
        });
        let spans = self.in_trace(trace);
        let server = spans.iter().find(|s| s["kind"] == "SERVER").cloned().unwrap();
        let mut clients: Vec<Value> = spans.into_iter().filter(|s| s["kind"] == "CLIENT").collect();
        clients.sort_by_key(|s| s["attributes"]["mcp_gateway.attempt"].as_i64());
        (server, clients)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.out);
    }
}

fn tool(server: &str, name: &str, required: &str) -> String {
    format!(
        r#"
[[servers.{server}.tools]]
name = "{name}"
description = "{name}"
inputSchema = {{ type = "object", properties = {{ {required} = {{ type = "string" }} }}, required = ["{required}"] }}
annotations = {{ readOnlyHint = true }}
"#
    )
}

/// HTTP server `shop` (manga_search, cached), Lambda `fn` (manga_recommendations), and Lambda
/// `crash` (price_lookup; the function always crashes; one retry, no breaker).
fn config(http: &Demo, lambda: &Demo) -> String {
    let mut config = format!(
        r#"
[aws]
endpoint_url = "http://{lambda}"
region = "us-east-1"
[tools.manga_search]
cache_ttl_ms = 600000
[servers.shop]
transport = "http"
url = "{http}"
discover = false
[servers.fn]
transport = "lambda"
function = "mcp-demo"
discover = false
[servers.crash]
transport = "lambda"
function = "mcp-demo-unhandled"
discover = false
retry = {{ max_retries_safe = 1, backoff_base_ms = 1, backoff_max_ms = 2 }}
breaker = {{ enabled = false }}
"#,
        lambda = lambda.addr,
        http = http.url()
    );
    config += &tool("shop", "manga_search", "query");
    config += &tool("fn", "manga_recommendations", "user_id");
    config += &tool("crash", "price_lookup", "manga_id");
    config
}

fn traced_gateway(receiver: &Receiver, http: &Demo, lambda: &Demo) -> Gateway {
    let endpoint = receiver.endpoint();
    Gateway::start(
        &config(http, lambda),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint), ("OTEL_BSP_SCHEDULE_DELAY", "50")],
    )
}

fn call_body(id: u64, tool: &str, arguments: Value, meta: Option<Value>) -> String {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// The gateway's JSON log line for the call with this `X-Request-Id`.
fn log_line(gateway: &Gateway, request_id: &str) -> Value {
    let mut found = None;
    wait_for(&format!("the log line of request {request_id}"), || {
        found = gateway
            .proc
            .output()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["message"] == "tools/call" && l["request_id"] == request_id);
        found.is_some()
    });
    found.unwrap()
}

fn lambda_last(lambda: &Demo) -> Value {
    let report: Value =
        reqwest::blocking::get(format!("http://{}/_invocations", lambda.addr)).unwrap().json().unwrap();
    report["last"].clone()
}

#[test]
fn an_http_call_is_one_server_span_parented_on_the_callers_context_with_one_attempt_span() {
    let receiver = Receiver::start();
    let (http, lambda) = (Demo::http(), Demo::lambda_api());
    let gateway = traced_gateway(&receiver, &http, &lambda);

    let secret = "secret-query-text-never-in-spans";
    let (status, _, body) = gateway.post_raw(
        call_body(7, "manga_search", json!({"query": secret}), None),
        &[
            ("traceparent", &traceparent(TRACE, PARENT)),
            ("tracestate", "vendor=abc"),
            ("x-request-id", "req-otel-1"),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"result\""), "{body}");

    let (server, clients) = receiver.wait_trace(TRACE, 1);
    assert_eq!(server["parent_span_id"], PARENT, "parented on the inbound traceparent: {server}");
    assert_eq!(server["name"], "tools/call manga_search");
    assert_eq!(server["service"], "mcp-gateway");
    let a = &server["attributes"];
    assert_eq!(a["mcp.method.name"], "tools/call");
    assert_eq!(a["gen_ai.tool.name"], "manga_search");
    assert_eq!(a["rpc.system.name"], "jsonrpc");
    assert_eq!(a["jsonrpc.request.id"], "7");
    assert_eq!(a["mcp_gateway.server"], "shop");
    assert_eq!(a["mcp_gateway.transport"], "http");
    assert_eq!(a["mcp_gateway.outcome"], "success");
    assert_eq!(a["mcp_gateway.attempts"], 1);
    assert_eq!(a["mcp_gateway.cache"], "miss");
    assert!(a.get("mcp_gateway.cache_hit").is_none(), "`mcp_gateway.cache` says it: {server}");
    assert_eq!(a["mcp_gateway.fallback"], "none");
    assert_eq!(a["mcp_gateway.request_id"], "req-otel-1");
    assert!(a.get("error.type").is_none(), "{server}");
    assert_ne!(server["status"], "ERROR");

    let attempt = &clients[0];
    assert_eq!(attempt["parent_span_id"], server["span_id"], "the attempt is a child of the call");
    assert_eq!(attempt["name"], "tools/call manga_search");
    let b = &attempt["attributes"];
    assert_eq!(b["mcp_gateway.attempt"], 1);
    assert_eq!(b["mcp_gateway.breaker.state"], "closed");
    assert_eq!(b["mcp_gateway.upstream.status"], "200");
    assert_eq!(b["mcp_gateway.server"], "shop");

    // The upstream got the attempt span's context, in the header and in `_meta`, and the
    // caller's request id.
    let sent = traceparent(TRACE, attempt["span_id"].as_str().unwrap());
    let stats = http.stats();
    assert_eq!(stats["last_headers"]["traceparent"], sent, "{stats}");
    assert_eq!(stats["last_headers"]["tracestate"], "vendor=abc", "{stats}");
    assert_eq!(stats["last_headers"]["x-request-id"], "req-otel-1", "{stats}");
    assert_eq!(stats["last_meta"]["traceparent"], sent, "{stats}");

    assert_eq!(log_line(&gateway, "req-otel-1")["trace_id"], TRACE);
    let everything = std::fs::read_to_string(&receiver.out).unwrap();
    assert!(!everything.contains(secret), "arguments never go into spans");

    // The same call again, its context in `_meta` only (SEP-414): a cache hit, no attempt.
    let (trace2, parent2) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let meta = json!({"traceparent": traceparent(trace2, parent2)});
    let (status, _, body) = gateway.post_raw(
        call_body(8, "manga_search", json!({"query": secret}), Some(meta)),
        &[("x-request-id", "req-otel-2")],
    );
    assert_eq!(status, 200, "{body}");
    let (server, _) = receiver.wait_trace(trace2, 0);
    assert_eq!(server["parent_span_id"], parent2);
    assert_eq!(server["attributes"]["mcp_gateway.cache"], "hit");
    assert_eq!(server["attributes"]["mcp_gateway.attempts"], 0);
    assert_eq!(http.stats()["calls"], 1, "served from the cache");
    assert_eq!(log_line(&gateway, "req-otel-2")["trace_id"], trace2);
}

#[test]
fn lambda_attempts_carry_the_context_in_the_client_context_and_a_retry_makes_two_attempt_spans() {
    let receiver = Receiver::start();
    let (http, lambda) = (Demo::http(), Demo::lambda_api());
    let gateway = traced_gateway(&receiver, &http, &lambda);

    let amzn = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    let (status, _, body) = gateway.post_raw(
        call_body(1, "manga_recommendations", json!({"user_id": "U-1"}), None),
        &[
            ("traceparent", &traceparent(TRACE, PARENT)),
            ("x-request-id", "req-lambda-1"),
            ("x-amzn-trace-id", amzn),
        ],
    );
    assert_eq!(status, 200, "{body}");
    let (server, clients) = receiver.wait_trace(TRACE, 1);
    assert_eq!(server["parent_span_id"], PARENT);
    assert_eq!(server["attributes"]["mcp_gateway.transport"], "lambda");
    assert_eq!(clients[0]["parent_span_id"], server["span_id"]);
    let sent = traceparent(TRACE, clients[0]["span_id"].as_str().unwrap());
    let last = lambda_last(&lambda);
    let custom = &last["client_context"]["custom"];
    assert_eq!(custom["traceparent"], sent, "{last}");
    assert_eq!(custom["x-request-id"], "req-lambda-1", "{last}");
    assert_eq!(last["x-amzn-trace-id"], amzn, "{last}");
    assert_eq!(last["meta"]["traceparent"], sent, "{last}");

    // A crashing function, retried once: one call span, two attempt spans under it.
    let trace = "11111111111111111111111111111111";
    let (status, _, body) = gateway.post_raw(
        call_body(2, "price_lookup", json!({"manga_id": "MNG-1"}), None),
        &[("traceparent", &traceparent(trace, PARENT)), ("x-request-id", "req-lambda-2")],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"error\""), "{body}");
    let (server, clients) = receiver.wait_trace(trace, 2);
    let a = &server["attributes"];
    assert_eq!(a["mcp_gateway.attempts"], 2, "{server}");
    assert_eq!(a["mcp_gateway.server"], "crash");
    assert_eq!(a["error.type"], a["mcp_gateway.outcome"], "{server}");
    assert_eq!(a["error.type"], "upstream_error", "{server}");
    assert_eq!(server["status"], "ERROR");
    for (n, attempt) in clients.iter().enumerate() {
        assert_eq!(attempt["parent_span_id"], server["span_id"], "attempt {n} under the call");
        assert_eq!(attempt["attributes"]["mcp_gateway.attempt"], n as i64 + 1);
        assert_eq!(attempt["attributes"]["mcp_gateway.upstream.status"], "function_error_unhandled");
        assert_eq!(attempt["attributes"]["error.type"], "function_error_unhandled");
        assert_eq!(attempt["status"], "ERROR");
    }
    assert_ne!(clients[0]["span_id"], clients[1]["span_id"]);
    // The second attempt carried its own span id.
    let custom = lambda_last(&lambda)["client_context"]["custom"].clone();
    assert_eq!(custom["traceparent"], traceparent(trace, clients[1]["span_id"].as_str().unwrap()));
    assert_eq!(log_line(&gateway, "req-lambda-2")["trace_id"], trace);
}

#[test]
fn a_call_without_context_starts_a_trace_that_the_log_line_and_the_upstream_share() {
    let receiver = Receiver::start();
    let (http, lambda) = (Demo::http(), Demo::lambda_api());
    let gateway = traced_gateway(&receiver, &http, &lambda);
    let (status, _, body) = gateway.post_raw(
        call_body(1, "manga_search", json!({"query": "berserk"}), None),
        &[("x-request-id", "req-fresh"), ("traceparent", "not-a-traceparent")],
    );
    assert_eq!(status, 200, "{body}");
    let trace =
        log_line(&gateway, "req-fresh")["trace_id"].as_str().expect("a trace id in the log line").to_string();
    let (server, clients) = receiver.wait_trace(&trace, 1);
    assert_eq!(server["parent_span_id"], "", "a root span: the invalid traceparent is ignored");
    let stats = http.stats();
    assert_eq!(
        stats["last_headers"]["traceparent"],
        traceparent(&trace, clients[0]["span_id"].as_str().unwrap())
    );

    // Other methods get a span too; a gateway-made error is marked.
    let (status, _) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"traceparent": traceparent(TRACE, PARENT)}}}));
    assert_eq!(status, 200);
    let (server, _) = receiver.wait_trace(TRACE, 0);
    assert_eq!(server["name"], "tools/list");
    assert_eq!(server["parent_span_id"], PARENT);
    let unknown = "22222222222222222222222222222222";
    let body =
        call_body(4, "no_such_tool", json!({}), Some(json!({"traceparent": traceparent(unknown, PARENT)})));
    let (status, _, _) = gateway.post_raw(body, &[]);
    assert_eq!(status, 200);
    let (server, _) = receiver.wait_trace(unknown, 0);
    assert_eq!(server["name"], "tools/call", "an invented tool name stays out of the span name");
    assert!(server["attributes"].get("gen_ai.tool.name").is_none(), "nor is it an attribute: {server}");
    assert_eq!(server["attributes"]["error.type"], "unknown_tool", "{server}");
    assert_eq!(server["attributes"]["rpc.response.status_code"], "-32002", "{server}");
    assert_eq!(server["status"], "ERROR");

    // An invented method names no span: every unknown method's span has one bounded name.
    let invented = "33333333333333333333333333333333";
    let (status, _) = gateway
        .rpc(&json!({"jsonrpc": "2.0", "id": 5, "method": "x/invented-by-the-caller-7f3a",
        "params": {"_meta": {"traceparent": traceparent(invented, PARENT)}}}));
    assert_eq!(status, 200);
    let (server, _) = receiver.wait_trace(invented, 0);
    assert_eq!(server["name"], "mcp.unknown_method", "{server}");
    assert_eq!(server["attributes"]["mcp.method.name"], "mcp.unknown_method", "{server}");
    assert!(!server.to_string().contains("invented-by-the-caller"), "{server}");
}

#[test]
fn spans_of_a_call_drained_at_sigterm_are_exported_before_exit() {
    let receiver = Receiver::start();
    let (http, lambda) = (Demo::slow(1500), Demo::lambda_api());
    let endpoint = receiver.endpoint();
    // A batch delay far longer than the test: only the shutdown flush can export the spans.
    let mut gateway = Gateway::start(
        &config(&http, &lambda),
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &format!("{endpoint}/v1/traces")),
            ("OTEL_BSP_SCHEDULE_DELAY", "3600000"),
        ],
    );
    let url = gateway.url("/mcp");
    let call = std::thread::spawn(move || {
        reqwest::blocking::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("traceparent", traceparent(TRACE, PARENT))
            .body(call_body(1, "manga_search", json!({"query": "drained"}), None))
            .send()
            .and_then(|r| r.text())
    });
    wait_for("the slow upstream to receive the call", || http.stats()["calls"] == 1);
    let status = gateway.proc.terminate();
    assert!(status.success(), "gateway exit: {status}; output:\n{}", gateway.proc.output());
    let answer = call.join().unwrap().expect("the drained call is answered");
    assert!(answer.contains("\"result\""), "{answer}");
    let (server, clients) = receiver.wait_trace(TRACE, 1);
    assert_eq!(server["attributes"]["mcp_gateway.outcome"], "success");
    assert_eq!(clients[0]["parent_span_id"], server["span_id"]);
}

#[test]
fn with_tracing_off_the_callers_context_passes_through_unchanged() {
    let (http, lambda) = (Demo::http(), Demo::lambda_api());
    let gateway = Gateway::start(&config(&http, &lambda), &[]);
    let inbound = traceparent(TRACE, PARENT);
    let (status, _, body) = gateway.post_raw(
        call_body(1, "manga_search", json!({"query": "off"}), None),
        &[("traceparent", &inbound), ("tracestate", "k=v"), ("x-request-id", "req-off")],
    );
    assert_eq!(status, 200, "{body}");
    let stats = http.stats();
    assert_eq!(stats["last_headers"]["traceparent"], inbound, "{stats}");
    assert_eq!(stats["last_headers"]["tracestate"], "k=v", "{stats}");
    assert_eq!(stats["last_headers"]["x-request-id"], "req-off", "{stats}");
    assert_eq!(stats["last_meta"]["traceparent"], inbound, "{stats}");
    assert_eq!(log_line(&gateway, "req-off")["trace_id"], TRACE);

    let (status, _, body) = gateway.post_raw(
        call_body(
            2,
            "manga_recommendations",
            json!({"user_id": "U-2"}),
            Some(json!({"traceparent": inbound})),
        ),
        &[("x-request-id", "req-off-2")],
    );
    assert_eq!(status, 200, "{body}");
    let last = lambda_last(&lambda);
    assert_eq!(last["client_context"]["custom"]["traceparent"], inbound, "{last}");
    assert_eq!(last["client_context"]["custom"]["x-request-id"], "req-off-2", "{last}");
    assert!(last["x-amzn-trace-id"].is_null(), "none inbound, none sent: {last}");
    assert!(!gateway.proc.output().contains("OpenTelemetry tracing on"));
}

#[test]
fn an_unsampled_caller_is_not_exported_but_its_trace_still_reaches_the_upstream() {
    // The default sampler is parent-based: a caller that did not sample is not recorded.
    let receiver = Receiver::start();
    let (http, lambda) = (Demo::http(), Demo::lambda_api());
    let gateway = traced_gateway(&receiver, &http, &lambda);
    let unsampled = "33333333333333333333333333333333";
    let (status, _, body) = gateway.post_raw(
        call_body(1, "manga_search", json!({"query": "a"}), None),
        &[("traceparent", &format!("00-{unsampled}-{PARENT}-00")), ("x-request-id", "req-unsampled")],
    );
    assert_eq!(status, 200, "{body}");
    let sent = http.stats()["last_headers"]["traceparent"].as_str().unwrap().to_string();
    assert!(sent.starts_with(&format!("00-{unsampled}-")) && sent.ends_with("-00"), "{sent}");
    assert_eq!(log_line(&gateway, "req-unsampled")["trace_id"], unsampled);
    // A sampled call made after it is exported; spans leave in the order they end, so by then
    // the unsampled call's spans would have been exported too.
    let (status, _, body) = gateway.post_raw(
        call_body(2, "manga_search", json!({"query": "b"}), None),
        &[("traceparent", &traceparent(TRACE, PARENT))],
    );
    assert_eq!(status, 200, "{body}");
    receiver.wait_trace(TRACE, 1);
    assert!(receiver.in_trace(unsampled).is_empty(), "{:?}", receiver.in_trace(unsampled));
}
