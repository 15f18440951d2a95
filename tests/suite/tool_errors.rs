//! What a model is told when its call is refused (SEP-1303): for a caller of 2025-11-25 or
//! later, arguments that fail the schema, a guardrail's refusal and a policy denial are tool
//! execution errors — a result with `isError: true` whose text names every violation — with the
//! gateway's structured error kept in `_meta["mcp-gateway/error"]`; older and bare callers keep
//! the JSON-RPC error. Real clients: the official Python SDK client (both eras) and LangChain's
//! MCP adapters (what an agent hands its model); the TypeScript SDK client (the Inspector CLI)
//! is in `inspector_cli.rs`.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Gateway, expect_error, lambda_python, peers_dir, python};

const BAD: &str = r#"{"query": "naruto", "max_results": 99}"#;

fn raw_call(gw: &Gateway, version: Option<&str>, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let headers: Vec<(&str, &str)> = version.map(|v| ("mcp-protocol-version", v)).into_iter().collect();
    let (status, _, text) = gw.post_raw(body.to_string(), &headers);
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The text the model reads and the gateway's error kept beside it.
fn execution_error(answer: &Value) -> (String, Value) {
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {answer}"));
    (text.to_string(), result["_meta"]["mcp-gateway/error"].clone())
}

#[test]
fn bad_arguments_are_a_tool_execution_error_for_2025_11_25_callers_and_a_protocol_error_before() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let arguments: Value = serde_json::from_str(BAD).unwrap();
    // 2025-11-25 (header) and the modern era: a result naming the violation.
    let (text, error) =
        execution_error(&raw_call(&gw, Some("2025-11-25"), "manga_search", arguments.clone()));
    assert!(text.contains("inputSchema of manga_search"), "{text}");
    assert!(text.contains("\n- /max_results: 99 is greater than the maximum of"), "{text}");
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"]["category"], "bad_input", "{error}");
    assert_eq!(error["data"]["retryable"], false, "{error}");
    assert_eq!(error["data"]["violations"][0]["path"], "/max_results", "{error}");
    // 2025-06-18 and a bare caller (taken for 2025-03-26): the JSON-RPC error, as before.
    expect_error(&raw_call(&gw, Some("2025-06-18"), "manga_search", arguments.clone()), -32602, "bad_input");
    expect_error(&raw_call(&gw, None, "manga_search", arguments), -32602, "bad_input");
    // What the specification keeps a protocol error stays one: an unknown tool.
    expect_error(&raw_call(&gw, Some("2025-11-25"), "no_such_tool", json!({})), -32002, "unknown_tool");
}

#[test]
fn a_guardrail_refusal_and_a_policy_denial_are_tool_execution_errors_too() {
    let policy = crate::common::TempFile::with(
        "tool-errors.cedar",
        "@id(\"open\")\npermit (principal, action, resource);\n\
         @id(\"no-checkout\")\nforbid (principal, action, resource) when { resource.name == \"checkout\" };\n",
    );
    let config = format!(
        "[policy]\nfile = {:?}\n[[hooks]]\nname = \"no-cards\"\nphase = \"before\"\nmatch_tools = [\"*\"]\nbuiltin = \"refuse\"\ndetect = [\"card\"]\n",
        policy.arg()
    );
    let gw = Gateway::start_with_args(&config, &[], &["--demo"]);
    let card = json!({"query": "4111 1111 1111 1111"});
    let (text, error) = execution_error(&raw_call(&gw, Some("2025-11-25"), "manga_search", card));
    assert!(text.contains("guardrail no-cards refused the call"), "{text}");
    assert_eq!(error["data"]["category"], "guardrail", "{error}");
    let (text, error) = execution_error(&raw_call(&gw, Some("2025-11-25"), "checkout", json!({})));
    assert!(text.contains("does not allow this caller to call checkout"), "{text}");
    assert_eq!(error["data"]["rule"], "no-checkout", "{error}");
    // A 2025-06-18 caller: the JSON-RPC errors.
    expect_error(&raw_call(&gw, Some("2025-06-18"), "checkout", json!({})), -32008, "forbidden");
}

#[test]
fn the_python_sdk_client_shows_the_violation_as_the_tools_answer_in_both_eras() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    for mode in ["legacy", "2026-07-28"] {
        let output = Command::new(python())
            .arg(peers_dir().join("clients/python_client.py"))
            .args([&gw.url("/mcp"), mode, "manga_search", BAD])
            .output()
            .expect("python client runs");
        assert!(
            output.status.success(),
            "{mode}: the SDK raised instead of returning the tool's answer: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let out: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(out["result"]["isError"], true, "{mode}: {out}");
        let text = out["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("/max_results: 99 is greater than the maximum of"), "{mode}: {text}");
    }
}

#[test]
fn langchains_mcp_adapters_hand_the_model_the_violation() {
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let output = Command::new(lambda_python())
        .arg(peers_dir().join("clients/framework_tool_error_client.py"))
        .args([&gw.url("/mcp"), "manga_search", BAD])
        .output()
        .expect("the LangChain client runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    // The adapters hand an `isError` result's text on as the tool's answer (0.3) or raise it as
    // a `ToolException` an agent shows the model; a JSON-RPC error surfaces as an exception
    // whose text holds the message only, never the violation.
    assert_ne!(seen["outcome"], "protocol_error", "{seen}");
    let text = seen["text"].as_str().unwrap_or_default();
    assert!(text.contains("/max_results: 99 is greater than the maximum of"), "{seen}");
}
