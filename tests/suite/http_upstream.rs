//! Streamable-HTTP upstream failures, each mapped to its row of the error table: connection
//! refused, reset, 5xx, 429 with Retry-After, slow answers, non-MCP answers. The failing
//! upstream is a real HTTP server on loopback that misbehaves on purpose.

use std::{io::Read, net::TcpListener, time::Duration};

use crate::common::*;
use axum::{
    Router,
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::post,
};
use serde_json::json;

/// Starts the misbehaving server on a background runtime; returns its address.
fn faulty_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let app = Router::new()
                .route("/500/mcp", post(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
                .route("/503/mcp", post(|| async { (StatusCode::SERVICE_UNAVAILABLE, "maintenance") }))
                .route("/429/mcp", post(|| async {
                    let mut h = HeaderMap::new();
                    h.insert("retry-after", "2".parse().unwrap());
                    (StatusCode::TOO_MANY_REQUESTS, h, "slow down").into_response()
                }))
                .route("/slow/mcp", post(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    StatusCode::OK
                }))
                // Not followed: the call must not reach /internal/mcp (which would answer it).
                .route("/redirect/mcp", post(|| async { (StatusCode::TEMPORARY_REDIRECT, [("location", "/internal/mcp")]) }))
                .route("/garbage/mcp", post(|| async { ([("content-type", "text/html")], "<html>hello</html>") }))
                .route("/internal/mcp", post(|| async {
                    ([("content-type", "application/json")], json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "database down"}}).to_string())
                }));
            axum::serve(tokio::net::TcpListener::from_std(listener).unwrap(), app).await.unwrap();
        });
    });
    addr
}

/// Accepts connections, reads a little, and drops them without answering.
fn resetting_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            drop(stream);
        }
    });
    addr
}

fn server(name: &str, url: &str, extra: &str) -> String {
    format!(
        r#"
[servers.{name}]
transport = "http"
url = "{url}"
discover = false
{extra}
[[servers.{name}.tools]]
name = "{name}_tool"
inputSchema = {{ type = "object" }}
"#
    )
}

fn failing_gateway() -> Gateway {
    let faulty = faulty_server();
    let reset = resetting_server();
    let refused = free_port();
    let mut config = String::from("[defaults]\nconnect_timeout_ms = 500\n");
    config += &server("refused", &format!("http://127.0.0.1:{refused}/mcp"), "");
    config += &server("reset", &format!("http://{reset}/mcp"), "");
    for path in ["500", "503", "429", "garbage", "internal", "redirect"] {
        config += &server(&format!("s{path}"), &format!("http://{faulty}/{path}/mcp"), "");
    }
    config += &server("slow", &format!("http://{faulty}/slow/mcp"), "timeout_ms = 250");
    Gateway::start(&config, &[])
}

#[test]
fn every_upstream_failure_has_its_error_table_row() {
    let gw = failing_gateway();
    let cases = [
        ("refused_tool", -32000, "upstream_unavailable", true),
        ("reset_tool", -32000, "upstream_error", true),
        ("s500_tool", -32000, "upstream_error", true),
        ("s503_tool", -32000, "upstream_error", true),
        ("s429_tool", -32003, "rate_limited", true),
        ("sgarbage_tool", -32000, "upstream_protocol", false),
        ("sinternal_tool", -32000, "upstream_error", true),
        // A redirecting endpoint is misconfigured: the redirect is not followed, nor retried.
        ("sredirect_tool", -32000, "upstream_protocol", false),
        ("slow_tool", -32001, "timeout", true),
    ];
    for (tool, code, category, retryable) in cases {
        let answer = gw.call(tool, json!({}));
        let data = expect_error(&answer, code, category);
        assert_eq!(data["retryable"], retryable, "{tool}: {answer}");
        assert_eq!(data["tool"], tool);
        if tool == "s429_tool" {
            assert_eq!(data["retry_after_ms"], 2000, "{answer}");
        }
        if tool == "sinternal_tool" {
            assert!(answer["error"]["message"].as_str().unwrap().contains("database down"));
            assert_eq!(data["upstream_code"], -32603);
        }
    }
}

#[test]
fn a_dead_upstream_opens_its_breaker_and_then_fails_fast() {
    let gw = failing_gateway();
    // The first calls find the connection refused; five in a row open the breaker.
    let mut refused = 0;
    loop {
        let answer = gw.call("refused_tool", json!({}));
        if answer["error"]["data"]["category"] == "circuit_open" {
            break;
        }
        expect_error(&answer, -32000, "upstream_unavailable");
        refused += 1;
        assert!(refused <= 5, "the breaker did not open after {refused} failures");
    }
    assert_eq!(refused, 5);
    for _ in 0..20 {
        let answer = gw.call("refused_tool", json!({}));
        let data = expect_error(&answer, -32004, "circuit_open");
        assert_eq!(data["attempts"], 0);
        assert!(data["retry_after_ms"].as_u64().unwrap() <= 1200, "{answer}");
    }
    let metrics = gw.metrics();
    assert!(metrics.contains("status=\"connect_error\""), "{metrics}");
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"refused\"} 1"), "{metrics}");
    assert!(metrics.contains("mcp_gateway_breaker_rejected_total{server=\"refused\"} 21"), "{metrics}");
    // Other servers are untouched by this one's breaker.
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"s500\"} 0"), "{metrics}");
}

#[test]
fn a_server_down_at_start_is_reported_by_readyz_and_keeps_its_static_tools() {
    let refused = free_port();
    let config = format!(
        "refresh_interval_secs = 1\n[servers.down]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{refused}/mcp\"\n[[servers.down.tools]]\nname = \"kept\"\ninputSchema = {{ type = \"object\" }}\n"
    );
    let gw = Gateway::start(&config, &[]);
    let ready: serde_json::Value = gw.client.get(gw.url("/readyz")).send().unwrap().json().unwrap();
    assert_eq!(ready["servers"]["down"]["tools"], "unavailable", "{ready}");
    assert_eq!(gw.tool_names(), ["kept"]);
    // When the server comes up, the next refresh learns its tools.
    let demo = Demo::start(false, refused);
    wait_for("the tools of the server that came up", || {
        gw.tool_names().contains(&"manga_search".to_string())
    });
    drop(demo);
    assert!(gw.tool_names().contains(&"kept".to_string()));
}

/// The official Python SDK server over HTTPS, its certificate signed by a private CA.
fn python_https_server(port: u16, dir: &Scratch) -> Proc {
    let mut command = std::process::Command::new(python());
    command.arg(peers_dir().join("servers/python_server.py")).arg(port.to_string()).args([
        "--tls",
        &dir.path("server.pem"),
        &dir.path("server.key"),
    ]);
    Proc::spawn_on("python MCP server (TLS)", command, port)
}

#[test]
fn an_https_upstream_is_verified_against_the_trust_store() {
    let dir = Scratch::new("https-upstream");
    private_ca(&dir);
    let port = free_port();
    let _server = python_https_server(port, &dir);
    let tools = r#"tools = [{name = "add", description = "Add", inputSchema = {type = "object"}}]"#;
    // No discovery: the call alone crosses TLS, so no startup `tools/list` failure counts
    // against the breaker before the refused call is made.
    let config = format!(
        "ready_min_tools = 0\n[servers.tls]\ntransport = \"http\"\nurl = \"https://127.0.0.1:{port}/mcp\"\ndiscover = false\n{tools}\n"
    );

    // The private CA trusted (SSL_CERT_FILE, as for wss:// and reqwest): the call goes through.
    let gateway = Gateway::start(&config, &[("SSL_CERT_FILE", &dir.path("ca.pem"))]);
    let sum = gateway.call("add", json!({"a": 40, "b": 2}));
    assert_eq!(structured(&sum)["result"], 42, "{sum}");
    drop(gateway);

    // Another CA trusted instead: the handshake refuses the certificate, nothing is sent, and
    // the caller is told the server is unavailable and why.
    let other = Scratch::new("https-upstream-other");
    private_ca(&other);
    let gateway = Gateway::start(&config, &[("SSL_CERT_FILE", &other.path("ca.pem"))]);
    let answer = gateway.call("add", json!({"a": 40, "b": 2}));
    expect_error(&answer, -32000, "upstream_unavailable");
    assert!(
        answer["error"]["message"].as_str().is_some_and(|m| m.contains("invalid peer certificate")),
        "{answer}"
    );
}

#[test]
fn a_tls_handshake_that_never_completes_is_a_connect_failure_not_a_timeout() {
    // Accepts TCP and never answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    // The attempt timeout (10 s) is far longer than the connect timeout: the handshake must be
    // bounded by the latter, as a connect failure (never sent, so safe to retry).
    let config = format!(
        "[defaults]\nconnect_timeout_ms = 300\n{}",
        server("silent", &format!("https://{addr}/mcp"), "")
    );
    let gw = Gateway::start(&config, &[]);
    let answer = gw.call("silent_tool", json!({}));
    let data = expect_error(&answer, -32000, "upstream_unavailable");
    assert_eq!(data["retryable"], true, "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("TCP and TLS")), "{answer}");
}
