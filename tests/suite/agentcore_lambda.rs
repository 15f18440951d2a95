//! AgentCore-style Lambda targets (`lambda_event = "agentcore"`) and the direct-invoke path,
//! through the real `aws-sdk-lambda` client against a Lambda Invoke API emulator
//! (`tests/peers/lambda_invoke_emulator.py`) hosting functions built from awslabs'
//! `run-mcp-servers-with-aws-lambda`: `BedrockAgentCoreGatewayTargetHandler` and
//! `stdio_server_adapter`, both around a real MCP server on stdio, plus a hand-written
//! AgentCore target. The emulator records what each function received (event, decoded client
//! context, the JSON-RPC request the handler built), so every assertion is about what
//! happened, not about timing.

use std::{path::PathBuf, process::Command, time::Duration};

use crate::common::*;
use serde_json::{Value, json};

/// The Invoke API emulator and its recorded invocations (also used by `federation_sources`).
pub(crate) struct Emulator {
    _proc: Proc,
    pub(crate) port: u16,
}

impl Emulator {
    pub(crate) fn start() -> Self {
        let python = lambda_python();
        assert!(
            python.exists(),
            "the awslabs Lambda handlers' virtualenv is missing at {}: run scripts/install-test-deps.sh",
            python.display()
        );
        let mut command = Command::new(python);
        command
            .arg("-W")
            .arg("ignore")
            .arg(peers_dir().join("servers/lambda_invoke_emulator.py"))
            .arg("0")
            .env("PYTHONUNBUFFERED", "1");
        let mut proc = Proc::spawn("lambda-invoke-emulator", command);
        let line = proc.wait_line("READY", Duration::from_secs(60));
        let port = line.trim().trim_start_matches("READY").trim().parse().expect("READY <port>");
        Self { _proc: proc, port }
    }

    /// Every invocation so far, oldest first.
    fn invocations(&self) -> Vec<Value> {
        let url = format!("http://127.0.0.1:{}/_invocations", self.port);
        let report: Value = reqwest::blocking::get(url).unwrap().json().unwrap();
        report["invocations"].as_array().unwrap().clone()
    }

    pub(crate) fn invocations_of(&self, function: &str) -> Vec<Value> {
        self.invocations().into_iter().filter(|i| i["function"] == function).collect()
    }

    pub(crate) fn reset(&self) {
        let url = format!("http://127.0.0.1:{}/_reset", self.port);
        reqwest::blocking::Client::new().post(url).send().unwrap();
    }
}

fn store_tools_file() -> PathBuf {
    peers_dir().join("servers/lambda_store_tools.json")
}

/// The hand-written target's tools, declared inline.
const PLAIN_TOOLS: &str = r#"
[[servers.plain.tools]]
name = "order_status"
description = "Status of an order"
inputSchema = { type = "object", properties = { order_id = { type = "string" } }, required = ["order_id"] }
annotations = { readOnlyHint = true }
[[servers.plain.tools]]
name = "store_motd"
description = "Message of the day"
inputSchema = { type = "object" }
annotations = { readOnlyHint = true }
[[servers.plain.tools]]
name = "store_notice"
description = "Store notice"
inputSchema = { type = "object" }
annotations = { readOnlyHint = true }
[[servers.plain.tools]]
name = "store_refuse"
description = "A tool that reports a failure"
inputSchema = { type = "object", properties = { order_id = { type = "string" } } }
annotations = { readOnlyHint = true }
[[servers.plain.tools]]
name = "store_explode"
description = "Declared, but the function raises for it"
inputSchema = { type = "object" }
"#;

/// A gateway with the AgentCore targets `store` (awslabs handler, tools from `tools_file`,
/// target `manga-store`) and `plain` (hand-written, inline tools), and `extra` appended.
fn gateway(emulator: &Emulator, extra: &str) -> Gateway {
    let config = format!(
        r#"
max_body_bytes = 8388608
[aws]
endpoint_url = "http://127.0.0.1:{port}"
region = "us-east-1"
[defaults]
timeout_ms = 30000
deadline_ms = 90000
# Not for AgentCore targets: their event has no room for the key.
[defaults.retry]
honours_idempotency_keys = true

[servers.store]
transport = "lambda"
function = "agentcore-store"
lambda_event = "agentcore"
agentcore_target = "manga-store"
tools_file = {file:?}

[servers.plain]
transport = "lambda"
function = "agentcore-plain"
lambda_event = "agentcore"
{PLAIN_TOOLS}
{extra}"#,
        port = emulator.port,
        file = store_tools_file().display().to_string(),
    );
    Gateway::start(&config, &[])
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text block: {answer}"))
}

#[test]
fn a_call_sends_the_bare_arguments_and_names_the_tool_in_the_client_context() {
    let emulator = Emulator::start();
    let gw = gateway(&emulator, "");
    // Declared tools only: the targets were never asked for a list (nor anything else).
    let names = gw.tool_names();
    for tool in ["manga_search", "price_lookup", "add_to_cart", "order_status", "store_motd"] {
        assert!(names.contains(&tool.to_string()), "{tool} not in {names:?}");
    }
    let (_, listed) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let search =
        listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "manga_search").unwrap();
    assert_eq!(search["inputSchema"]["required"], json!(["query"]), "the tools_file definition is served");
    assert_eq!(search["annotations"]["readOnlyHint"], true);
    assert!(emulator.invocations().is_empty(), "nothing invoked before a call: {:?}", emulator.invocations());

    let answer = gw.call_with(
        "manga_search",
        json!({"query": "frieren", "max_results": 3}),
        &[("x-request-id", "req-agentcore-1")],
    );
    assert_eq!(structured(&answer)["results"][0]["manga_id"], "MNG-00000017", "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let invocations = emulator.invocations();
    assert_eq!(invocations.len(), 1, "{invocations:?}");
    let invocation = &invocations[0];
    assert_eq!(invocation["function"], "agentcore-store");
    assert_eq!(
        invocation["event"],
        json!({"query": "frieren", "max_results": 3}),
        "the event is the bare arguments"
    );
    let custom = &invocation["client_context"]["custom"];
    assert_eq!(custom["bedrockAgentCoreToolName"], "manga-store___manga_search", "{invocation}");
    assert_eq!(custom["x-request-id"], "req-agentcore-1", "the request id still travels: {invocation}");
    // What the awslabs handler made of it: a tools/call of the bare tool name.
    assert_eq!(
        invocation["seen"],
        json!({"method": "tools/call", "name": "manga_search", "arguments": {"query": "frieren", "max_results": 3}})
    );
    assert_eq!(invocation["outcome"], "result");

    // Without agentcore_target the server's name is the target.
    gw.call("order_status", json!({"order_id": "A-1"}));
    let plain = emulator.invocations_of("agentcore-plain");
    assert_eq!(plain[0]["client_context"]["custom"]["bedrockAgentCoreToolName"], "plain___order_status");
    assert_eq!(plain[0]["event"], json!({"order_id": "A-1"}));

    // A tool that is not declared is refused by the gateway: no Invoke.
    emulator.reset();
    let unknown = gw.call("not_declared", json!({}));
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert_eq!(unknown["error"]["data"]["category"], "unknown_tool", "{unknown}");
    // Other methods are the gateway's own; nothing reaches the functions (a function has no
    // handshake to declare resources: the gateway's list holds none of theirs).
    let (_, resources) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}));
    assert_eq!(resources["result"], json!({"resources": []}), "{resources}");
    let (_, ping) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    assert!(emulator.invocations().is_empty(), "{:?}", emulator.invocations());

    let (status, ready) = gw.readyz();
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["servers"]["store"]["tools"], "loaded", "{ready}");
    let metrics = gw.metrics();
    assert!(
        metrics.contains(
            "mcp_gateway_upstream_requests_total{server=\"store\",status=\"200\",transport=\"lambda\"}"
        ),
        "{metrics}"
    );
}

#[test]
fn function_returns_become_tool_results() {
    let emulator = Emulator::start();
    let gw = gateway(&emulator, "");

    // {content, structuredContent, isError} from the awslabs handler: as it is.
    let found = gw.call("price_lookup", json!({"manga_id": "MNG-00000042"}));
    assert_eq!(structured(&found)["price_jpy"], 528, "{found}");
    // The SDK server's own tool error: an isError result, passed through, not retried.
    let missing = gw.call("price_lookup", json!({"manga_id": "MNG-404"}));
    assert_eq!(missing["result"]["isError"], true, "{missing}");
    assert!(text_of(&missing).contains("no manga with id MNG-404"), "{missing}");
    assert_eq!(emulator.invocations_of("agentcore-store").len(), 2, "the tool error was not retried");

    // A hand-written target's plain JSON: an object is text plus structuredContent.
    let order = gw.call("order_status", json!({"order_id": "A-7"}));
    let expected = json!({"order_id": "A-7", "status": "shipped", "items": 2});
    assert_eq!(structured(&order), &expected, "{order}");
    assert_eq!(serde_json::from_str::<Value>(text_of(&order)).unwrap(), expected, "{order}");
    // A string is its own text, without structuredContent.
    let motd = gw.call("store_motd", json!({}));
    assert_eq!(text_of(&motd), "本日は全品10%オフ", "{motd}");
    assert!(motd["result"].get("structuredContent").is_none(), "{motd}");
    // Content blocks written without a type are text blocks.
    let notice = gw.call("store_notice", json!({}));
    assert_eq!(
        notice["result"]["content"][0],
        json!({"type": "text", "text": "closed on Monday"}),
        "{notice}"
    );
    // isError from the function itself.
    let refused = gw.call("store_refuse", json!({"order_id": "B-1"}));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(text_of(&refused), "no order B-1");
}

#[test]
fn function_errors_are_upstream_errors_retried_only_for_safe_tools() {
    let emulator = Emulator::start();
    let gw = gateway(&emulator, "");

    // The MCP server dies mid-call: the adapter fails, the AgentCore handler raises, Lambda
    // answers X-Amz-Function-Error: Unhandled. A read-only tool: retried twice.
    let crash = gw.call("crash_server", json!({}));
    let data = expect_error(&crash, -32000, "upstream_error");
    assert_eq!(data["server"], "store");
    assert_eq!(data["retryable"], true);
    assert_eq!(data["attempts"], 3, "{crash}");
    assert!(
        !crash.to_string().contains("Internal failure"),
        "function error messages are not echoed: {crash}"
    );
    let crashes = emulator.invocations_of("agentcore-store");
    assert_eq!(crashes.len(), 3, "{crashes:?}");
    assert!(crashes.iter().all(|i| i["outcome"] == "error" && i["error_type"] == "Exception"), "{crashes:?}");
    assert!(crashes.iter().all(|i| i["seen"]["name"] == "crash_server"), "{crashes:?}");

    // Neither read-only nor idempotent: one attempt, although the defaults say the servers
    // honour idempotency keys (no key can reach an AgentCore function).
    let explode = gw.call("store_explode", json!({}));
    let data = expect_error(&explode, -32000, "upstream_error");
    assert_eq!(data["attempts"], 1, "{explode}");
    let exploded = emulator.invocations_of("agentcore-plain");
    assert_eq!(exploded.len(), 1, "{exploded:?}");
    assert_eq!(exploded[0]["error_type"], "KeyError");

    let metrics = gw.metrics();
    assert!(metrics.contains("status=\"function_error_unhandled\""), "{metrics}");
}

#[test]
fn the_bounds_of_lambda_servers_apply_to_agentcore_targets() {
    let emulator = Emulator::start();
    let extra = format!(
        r#"
[servers.tight]
transport = "lambda"
function = "agentcore-store"
lambda_event = "agentcore"
tools_file = {file:?}
max_response_bytes = 4096
timeout_ms = 4000
retry = {{ max_retries_safe = 0 }}
breaker = {{ consecutive_failures = 2, open_base_ms = 600000, open_max_ms = 600000 }}
"#,
        file = store_tools_file().display().to_string(),
    );
    let gw = gateway(&emulator, &extra);

    // Over Lambda's 6 MB: refused before sending.
    let huge = "x".repeat(6 * 1024 * 1024 + 10);
    let answer = gw.call("store__manga_search", json!({"query": huge}));
    let data = expect_error(&answer, -32600, "payload_too_large");
    assert_eq!(data["retryable"], false);
    assert!(emulator.invocations().is_empty(), "the oversized event reached Lambda");
    // The function's first invocation starts its handler (seconds of Python imports on a
    // busy machine): made through the other target, so the attempt timeout below is spent
    // only on what each call asks for.
    let warm = gw.call("store__manga_search", json!({"query": "frieren"}));
    assert_eq!(structured(&warm)["results"][0]["manga_id"], "MNG-00000017", "{warm}");

    // An answer over max_response_bytes.
    let big = gw.call("tight__big_answer", json!({"size": 20000}));
    expect_error(&big, -32000, "response_too_large");
    // The attempt timeout (the function sleeps longer).
    let slow = gw.call("tight__slow_search", json!({"query": "frieren", "seconds": 10}));
    let data = expect_error(&slow, -32001, "timeout");
    assert_eq!(data["attempts"], 1, "{slow}");
    // Two failures in a row opened the breaker: the next call is refused without an Invoke.
    let before = emulator.invocations_of("agentcore-store").len();
    let refused = gw.call("tight__manga_search", json!({"query": "frieren"}));
    expect_error(&refused, -32004, "circuit_open");
    // The slow invocation may still be finishing in the emulator (it is recorded when it
    // ends); it is the only other one.
    assert!(emulator.invocations_of("agentcore-store").len() <= before + 1);
    // No health probe can reach an AgentCore target: nothing but the callers' calls went out.
    let seen: Vec<Value> = emulator.invocations().iter().map(|i| i["seen"]["method"].clone()).collect();
    assert!(seen.iter().all(|m| m == "tools/call"), "{seen:?}");
    // The other targets are not affected.
    let fine = gw.call("store__manga_search", json!({"query": "frieren"}));
    assert_eq!(structured(&fine)["results"][0]["manga_id"], "MNG-00000017", "{fine}");
}

#[test]
fn the_direct_invoke_adapter_works_through_jsonrpc_lambda_servers() {
    let emulator = Emulator::start();
    let config = format!(
        r#"
[aws]
endpoint_url = "http://127.0.0.1:{port}"
region = "us-east-1"
[defaults]
timeout_ms = 30000
deadline_ms = 90000
[servers.direct]
transport = "lambda"
function = "direct-store"
qualifier = "live"
"#,
        port = emulator.port
    );
    let gw = Gateway::start(&config, &[]);
    // Discovered with tools/list, one JSON-RPC message per event.
    let names = gw.tool_names();
    assert!(
        names.contains(&"manga_search".to_string()) && names.contains(&"add_to_cart".to_string()),
        "{names:?}"
    );
    let listed = emulator.invocations_of("direct-store");
    assert!(listed.iter().any(|i| i["event"]["method"] == "tools/list"), "{listed:?}");
    assert!(listed.iter().all(|i| i["qualifier"] == "live"), "{listed:?}");

    emulator.reset();
    let answer = gw.call("add_to_cart", json!({"manga_id": "MNG-00000004", "quantity": 2}));
    assert_eq!(structured(&answer)["line_total_jpy"], 1056, "{answer}");
    let calls = emulator.invocations_of("direct-store");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let event = &calls[0]["event"];
    assert_eq!(event["jsonrpc"], "2.0");
    assert_eq!(event["method"], "tools/call");
    assert_eq!(event["params"]["name"], "add_to_cart");
    assert_eq!(event["params"]["arguments"], json!({"manga_id": "MNG-00000004", "quantity": 2}));
    let custom = calls[0]["client_context"]["custom"].as_object().cloned().unwrap_or_default();
    assert!(!custom.contains_key("bedrockAgentCoreToolName"), "{custom:?}");
    // The server's own tool error comes back as one.
    let missing = gw.call("price_lookup", json!({"manga_id": "MNG-404"}));
    assert_eq!(missing["result"]["isError"], true, "{missing}");
}

#[test]
fn registry_entries_can_be_agentcore_targets() {
    let emulator = Emulator::start();
    let (_dynamo, port) = dynamodb_local();
    let env = vec![
        ("MCP_GATEWAY_DYNAMODB_TABLE", "mcp-tool-registry".to_string()),
        ("MCP_GATEWAY_DYNAMODB_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("MCP_GATEWAY_REGISTRY__DYNAMODB_TIMEOUT_MS", "30000".to_string()),
    ];
    registry_cli(&env, &["create-table"]);
    let scratch = Scratch::new("agentcore-registry");
    let entry = json!({
        "name": "manga_search",
        "description": "Search the catalog by title.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "annotations": {"readOnlyHint": true},
        "server": {
            "name": "registered", "transport": "lambda", "function": "agentcore-store",
            "lambda_event": "agentcore", "agentcore_target": "reg-store"
        },
    });
    std::fs::write(scratch.path("entry.json"), entry.to_string()).unwrap();
    registry_cli(&env, &["put", &scratch.path("entry.json")]);
    // An AgentCore entry is checked as a declared tool: no description, no entry.
    let mut bad = entry.clone();
    bad["name"] = json!("price_lookup");
    bad.as_object_mut().unwrap().remove("description");
    std::fs::write(scratch.path("bad.json"), bad.to_string()).unwrap();
    let refused = Command::new(BIN)
        .args(["registry", "put", &scratch.path("bad.json")])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a description"), "{refused:?}");

    let config = format!(
        "dynamodb_table = \"mcp-tool-registry\"\ndynamodb_endpoint = \"http://127.0.0.1:{port}\"\n[registry]\ndynamodb_timeout_ms = 30000\n[aws]\nendpoint_url = \"http://127.0.0.1:{}\"\nregion = \"us-east-1\"\n[defaults]\ntimeout_ms = 30000\ndeadline_ms = 90000\n",
        emulator.port
    );
    let gw = Gateway::start(&config, &[]);
    let answer = gw.call("manga_search", json!({"query": "鬼滅"}));
    assert_eq!(structured(&answer)["results"][0]["manga_id"], "MNG-00000004", "{answer}");
    let invocations = emulator.invocations();
    assert_eq!(invocations.len(), 1, "{invocations:?}");
    assert_eq!(
        invocations[0]["client_context"]["custom"]["bedrockAgentCoreToolName"],
        "reg-store___manga_search"
    );
    assert_eq!(invocations[0]["event"], json!({"query": "鬼滅"}));
    // Drift has no tools/list to compare an AgentCore target with, and says so.
    let drift: Value = gw.admin_get("/admin/registry/drift").send().unwrap().json().unwrap();
    assert!(drift["registered"]["skipped"].as_str().is_some_and(|s| s.contains("AgentCore")), "{drift}");
    assert_eq!(emulator.invocations().len(), 1, "drift invoked nothing");
}

/// `check-config` with `config`: its stderr when it fails.
fn refused(config: &str) -> String {
    let scratch = Scratch::new("agentcore-config");
    let path = scratch.path("gateway.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(BIN).args(["check-config", "--config", &path]).env_clear().output().unwrap();
    assert!(!output.status.success(), "accepted:\n{config}");
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn tools_files_and_agentcore_keys_are_checked_at_load() {
    let scratch = Scratch::new("agentcore-tools-files");
    let server = |file: &str, extra: &str| {
        format!(
            "[servers.store]\ntransport = \"lambda\"\nfunction = \"f\"\nlambda_event = \"agentcore\"\ntools_file = {file:?}\n{extra}"
        )
    };
    let write = |name: &str, text: &str| {
        let path = scratch.path(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let good = r#"{"name": "a", "description": "d", "inputSchema": {"type": "object"}}"#;

    let missing = scratch.path("missing.json");
    let err = refused(&server(&missing, ""));
    assert!(err.contains("servers.store.tools_file") && err.contains("missing.json"), "{err}");

    let path = write("broken.json", "[{\"name\": ");
    let err = refused(&server(&path, ""));
    assert!(err.contains("broken.json is not JSON") && err.contains("line 1"), "{err}");

    let path = write("object.json", r#"{"name": "a"}"#);
    assert!(refused(&server(&path, "")).contains("expected a JSON array of tool definitions"));

    let path =
        write("nodesc.json", &format!(r#"[{good}, {{"name": "b", "inputSchema": {{"type": "object"}}}}]"#));
    let err = refused(&server(&path, ""));
    assert!(err.contains("nodesc.json: entry 1 (\"b\"): needs a description"), "{err}");

    let path = write("dup.json", &format!("[{good}, {good}]"));
    let err = refused(&server(&path, ""));
    assert!(err.contains("dup.json: entry 1 (\"a\"): the name is already declared by entry 0"), "{err}");

    let path =
        write("schema.json", r#"[{"name": "a", "description": "d", "inputSchema": {"type": "array"}}]"#);
    assert!(refused(&server(&path, "")).contains("entry 0 (\"a\"): inputSchema.type must be \"object\""));

    let path = write("good.json", &format!("[{good}]"));
    let err = refused(&server(&path, "discover = true\n"));
    assert!(err.contains("has no tools/list to discover"), "{err}");
    let err = refused(&server(&path, "agentcore_target = \"a___b\"\n"));
    assert!(err.contains("agentcore_target \"a___b\" must not contain \"___\""), "{err}");
    let err = refused(&server(&path, "retry = { honours_idempotency_keys = true }\n"));
    assert!(err.contains("honours_idempotency_keys cannot apply"), "{err}");
    let err =
        refused("[servers.store]\ntransport = \"lambda\"\nfunction = \"f\"\nlambda_event = \"agentcore\"\n");
    assert!(err.contains("declare its tools in `tools` or `tools_file`"), "{err}");
    let err = refused(&format!(
        "{}[[servers.store.tools]]\nname = \"a\"\ndescription = \"inline\"\ninputSchema = {{ type = \"object\" }}\n",
        server(&path, "")
    ));
    assert!(err.contains("tool \"a\" is declared both in `tools` and in tools_file"), "{err}");
    let err = refused("[servers.x]\ntransport = \"lambda\"\nfunction = \"f\"\nlambda_event = \"soap\"\n");
    assert!(err.contains("lambda_event") && err.contains("jsonrpc") && err.contains("agentcore"), "{err}");

    // A good one loads, and check-config shows the keys (and the server as non-discovering).
    let config = write("ok.toml", &server(&path, "agentcore_target = \"store-v2\"\n"));
    let output =
        Command::new(BIN).args(["check-config", "--json", "--config", &config]).env_clear().output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    let store = &shown["servers"]["store"];
    assert_eq!(store["lambda_event"], "agentcore");
    assert_eq!(store["agentcore_target"], "store-v2");
    assert_eq!(store["tools_file"], json!(path));
    assert_eq!(store["discover"], false);
}
