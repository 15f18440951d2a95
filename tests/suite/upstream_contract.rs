//! What the gateway concludes from how an upstream failed, against real processes
//! (`tests/peers/scripted/hostile_server.py`):
//! - "never sent" only when proven: a Lambda Invoke that was received and then reset may have
//!   run, so a non-idempotent tool is not repeated even where unsafe retries are allowed; an
//!   HTTP connect timeout never sent anything, so it is retried and reported as unavailable;
//! - an upstream's `-32020`/`-32022` is the gateway's own client error: not retried, not
//!   counted by the breaker;
//! - modern-era calls carry the `Mcp-Param-*` headers the tool's schema asks for.

use crate::common::*;
use serde_json::json;

fn tool(server: &str, name: &str, read_only: bool) -> String {
    format!(
        r#"
[[servers.{server}.tools]]
name = "{name}"
description = "a test tool"
inputSchema = {{ type = "object" }}
annotations = {{ readOnlyHint = {read_only} }}
"#
    )
}

#[test]
fn a_lambda_reset_after_the_request_was_sent_is_not_repeated_for_a_non_idempotent_tool() {
    let (_hostile, addr) = hostile_server(&[]);
    let mut config = format!(
        r#"
[aws]
endpoint_url = "http://{addr}"
region = "us-east-1"
[servers.payments]
transport = "lambda"
function = "charge-fn"
discover = false
# Unsafe retries are allowed where the request provably never left.
retry = {{ max_retries_unsafe = 2 }}
[servers.lookups]
transport = "lambda"
function = "lookup-fn"
discover = false
"#
    );
    config += &tool("payments", "charge", false);
    config += &tool("lookups", "lookup", true);
    let gateway = Gateway::start(&config, &[]);

    let charged = gateway.call("charge", json!({}));
    let data = expect_error(&charged, -32000, "upstream_error");
    assert_eq!(data["attempts"], 1, "the function may have run: never repeated: {charged}");
    assert_eq!(hostile_hits(addr, "/2015-03-31/functions/charge-fn/invocations"), 1);

    let looked_up = gateway.call("lookup", json!({}));
    let data = expect_error(&looked_up, -32000, "upstream_error");
    assert_eq!(data["attempts"], 3, "a read-only tool is retried: {looked_up}");
    assert_eq!(hostile_hits(addr, "/2015-03-31/functions/lookup-fn/invocations"), 3);
}

#[test]
fn a_lambda_endpoint_that_refuses_connections_never_got_the_request_and_is_retried() {
    // The other half of the Lambda rule: a dispatch failure whose chain holds a connect error.
    let port = free_port();
    let mut config = format!(
        r#"
[aws]
endpoint_url = "http://127.0.0.1:{port}"
region = "us-east-1"
[servers.payments]
transport = "lambda"
function = "charge-fn"
discover = false
retry = {{ max_retries_unsafe = 2, backoff_base_ms = 1, backoff_max_ms = 5 }}
"#
    );
    config += &tool("payments", "charge", false);
    let gateway = Gateway::start(&config, &[]);
    let response = gateway.call("charge", json!({}));
    let data = expect_error(&response, -32000, "upstream_unavailable");
    assert_eq!(data["attempts"], 3, "nothing was sent, so even a charge is tried again: {response}");
}

#[test]
fn an_http_connect_timeout_never_sent_the_request_and_is_retried() {
    let (_blackhole, addr) = hostile_server(&["blackhole"]);
    let mut config = format!(
        r#"
[servers.orders]
transport = "http"
url = "http://{addr}/mcp"
discover = false
connect_timeout_ms = 200
timeout_ms = 5000
retry = {{ max_retries_unsafe = 2, backoff_base_ms = 1, backoff_max_ms = 5 }}
"#
    );
    config += &tool("orders", "place_order", false);
    let gateway = Gateway::start(&config, &[]);
    let response = gateway.call("place_order", json!({}));
    let data = expect_error(&response, -32000, "upstream_unavailable");
    assert_eq!(data["attempts"], 3, "a connect timeout is retried like a refused connection: {response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot connect"), "{message}");
}

#[test]
fn upstream_header_mismatch_and_unsupported_version_are_not_retried_nor_counted() {
    let (_hostile, addr) = hostile_server(&[]);
    let mut config = String::new();
    for (server, code) in [("mismatch", "-32020"), ("version", "-32022")] {
        config += &format!(
            r#"
[servers.{server}]
transport = "http"
url = "http://{addr}/refuse-{code}"
discover = false
breaker = {{ consecutive_failures = 2 }}
"#
        );
        // Read-only: retried after any retryable failure, so a retry would show.
        config += &tool(server, &format!("{server}_tool"), true);
    }
    let gateway = Gateway::start(&config, &[]);
    for (server, code) in [("mismatch", -32020), ("version", -32022)] {
        for call in 1..=3 {
            let response = gateway.call(&format!("{server}_tool"), json!({}));
            let data = expect_error(&response, -32000, "upstream_protocol");
            assert_eq!(data["attempts"], 1, "{server} call {call}: {response}");
            assert_eq!(data["upstream_code"], code, "{response}");
            assert_eq!(data["retryable"], false, "{response}");
        }
        assert_eq!(hostile_hits(addr, &format!("/refuse-{code}")), 3, "one POST per call");
        let state = gateway.breaker(server);
        assert_eq!(state["consecutive_failures"], 0, "{server}: {state}");
        assert_eq!(state["state"], "closed", "{server}: {state}");
    }
    let metrics = gateway.metrics();
    for server in ["mismatch", "version"] {
        assert!(
            metrics.contains(&format!("mcp_gateway_breaker_state{{server=\"{server}\"}} 0")),
            "{metrics}"
        );
    }
}

#[test]
fn modern_tools_calls_mirror_x_mcp_header_arguments_into_mcp_param_headers() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        r#"
[servers.spanner]
transport = "http"
url = "http://{addr}/echo-headers"
discover = false
[[servers.spanner.tools]]
name = "execute_sql"
description = "Execute SQL"
[servers.spanner.tools.inputSchema]
type = "object"
required = ["region", "query"]
[servers.spanner.tools.inputSchema.properties.region]
type = "string"
x-mcp-header = "Region"
[servers.spanner.tools.inputSchema.properties.priority]
type = "integer"
x-mcp-header = "Priority"
[servers.spanner.tools.inputSchema.properties.greeting]
type = "string"
x-mcp-header = "Greeting"
[servers.spanner.tools.inputSchema.properties.shard]
type = "string"
x-mcp-header = "Shard"
[servers.spanner.tools.inputSchema.properties.query]
type = "string"
"#
    );
    let gateway = Gateway::start(&config, &[]);
    let arguments =
        json!({"region": "us-west1", "priority": 42, "greeting": "Hello, 世界", "query": "SELECT 1"});
    let response = gateway.call("execute_sql", arguments);
    let seen = structured(&response);
    assert_eq!(seen["mcp-method"], "tools/call", "{response}");
    assert_eq!(seen["mcp-name"], "execute_sql", "{response}");
    assert_eq!(seen["mcp-param-region"], "us-west1", "{response}");
    assert_eq!(seen["mcp-param-priority"], "42", "{response}");
    assert_eq!(seen["mcp-param-greeting"], "=?base64?SGVsbG8sIOS4lueVjA==?=", "{response}");
    assert!(seen.get("mcp-param-shard").is_none(), "an absent argument sends no header: {response}");
    assert!(seen.get("mcp-param-query").is_none(), "an unannotated argument stays in the body: {response}");
}
