//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, run with Node 22)
//! with the gateway as the CLIENT: for each scenario the suite starts its own test server and
//! runs `tests/peers/clients/conformance_client.py SERVER_URL`, which starts the gateway binary with
//! that one upstream and drives it like the orchestrator (`tools/list`, then `tools/call` of
//! every tool). A scenario passes when the suite reports no failed and no warning check AND
//! the checks that prove the behaviour ran are there with SUCCESS — the suite itself passes a
//! scenario whose server never saw an `initialize` (zero checks), so that alone proves nothing.
//!
//! - `initialize`: the handshake with the right version and clientInfo. The suite's server
//!   answers every method with 200, so only a client that probes with `server/discover` and
//!   checks `supportedVersions` initializes it.
//! - `tools_call`: `add_numbers` called through the gateway on a stateless TypeScript SDK server.
//! - `sse-retry` (SEP-1699): the answer stream ends early; the client must reconnect with GET
//!   after the `retry:` time, sending `Last-Event-ID`.
//! - `elicitation-sep1034-client-defaults` (SEP-1034): the suite's session-era server elicits
//!   with defaults and checks the client accepted them. Driven by a 2026-07-28 caller that
//!   declares `elicitation` (`CONFORMANCE_CALLER=modern`): the gateway holds the server's
//!   request and asks it as `input_required`; the caller accepts the defaults and retries.
//!   Without a caller that can be asked, the gateway's own session declares no elicitation and
//!   the server's tool fails (a client must not invent answers for a person).

use std::process::Command;

use crate::common::*;
use serde_json::Value;

/// Runs one client scenario; returns the suite's checks after asserting it passed.
fn run(scenario: &str) -> Vec<Value> {
    run_as(scenario, "orchestrator")
}

/// [`run`] with the wrapper driving the gateway as `caller` (`orchestrator`, or `modern`: a
/// 2026-07-28 caller that can be asked for elicitation).
fn run_as(scenario: &str, caller: &str) -> Vec<Value> {
    let out = temp_path(&format!("conformance-{scenario}"));
    let wrapper = peers_dir().join("clients/conformance_client.py");
    let output = Command::new(node22())
        .arg(conformance_suite())
        .args(["client", "--scenario", scenario, "--timeout", "60000", "--command"])
        // The suite splits the command on spaces and appends the server URL.
        .arg(format!("python3 {}", wrapper.display()))
        .arg("-o")
        .arg(&out)
        .env("CONFORMANCE_GATEWAY_BIN", BIN)
        .env("CONFORMANCE_CALLER", caller)
        .output()
        .expect("the conformance suite runs");
    let report =
        format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let dir = std::fs::read_dir(&out)
        .unwrap_or_else(|e| panic!("{scenario}: no results in {} ({e}):\n{report}", out.display()))
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with(scenario))
        .unwrap_or_else(|| panic!("{scenario}: no result folder:\n{report}"))
        .path();
    let checks: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap()).unwrap();
    let client_log = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(output.status.success(), "{scenario} failed:\n{report}\nclient log:\n{client_log}");
    for check in &checks {
        assert!(
            check["status"] != "FAILURE" && check["status"] != "WARNING",
            "{scenario}: {check}\nclient log:\n{client_log}"
        );
    }
    checks
}

fn assert_succeeded(scenario: &str, checks: &[Value], ids: &[&str]) {
    for id in ids {
        assert!(
            checks.iter().any(|c| c["id"] == *id && c["status"] == "SUCCESS"),
            "{scenario}: check {id} did not run or did not succeed: {checks:?}"
        );
    }
}

#[test]
fn conformance_client_initialize() {
    let checks = run("initialize");
    assert_succeeded("initialize", &checks, &["mcp-client-initialization"]);
}

#[test]
fn conformance_client_tools_call() {
    let checks = run("tools_call");
    assert_succeeded("tools_call", &checks, &["tool-add-numbers"]);
}

#[test]
fn conformance_client_sse_retry() {
    let checks = run("sse-retry");
    assert_succeeded(
        "sse-retry",
        &checks,
        &["client-sse-graceful-reconnect", "client-sse-retry-timing", "client-sse-last-event-id"],
    );
}

#[test]
fn conformance_client_elicitation_defaults_through_a_modern_caller() {
    let checks = run_as("elicitation-sep1034-client-defaults", "modern");
    assert_succeeded(
        "elicitation-sep1034-client-defaults",
        &checks,
        &[
            "client-elicitation-sep1034-string-default",
            "client-elicitation-sep1034-integer-default",
            "client-elicitation-sep1034-number-default",
            "client-elicitation-sep1034-enum-default",
            "client-elicitation-sep1034-boolean-default",
        ],
    );
}
