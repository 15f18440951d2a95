//! The outbound step (`gateway/outbound.rs`, docs/security.md#the-outbound-step): every piece
//! of upstream data that reaches a caller passes the after-hooks that match it. An official
//! Python SDK server (tests/peers/servers/pii_server.py) puts an e-mail address and a card
//! number in every kind of answer — a tool result, resource contents (text and blobs), prompt
//! messages, completion values, progress, log entries, a JSON-RPC error — and a `match_servers`
//! redact hook must strip them from each; the official Python SDK client reads the resources
//! and prompts through the gateway. A `resultType` no revision defines is `upstream_protocol`,
//! before-hooks judge a prompt's and a completion's arguments, a hook tool is told the kind of
//! item it judges and its replacement must be one, and reading a task's result leaves an audit
//! line. Every assertion is about what the caller, the server, the hook or the audit trail saw.

use std::process::Command;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use crate::common::*;

const EMAIL: &str = "ann@example.com";
const CARD: &str = "4111 1111 1111 1111";

/// The PII server over streamable HTTP.
fn pii_server() -> (Proc, String) {
    let port = free_port();
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/pii_server.py")).arg(port.to_string()).env("PYTHONUNBUFFERED", "1");
    (Proc::spawn_until("pii-server", command, "READY"), format!("http://127.0.0.1:{port}/mcp"))
}

/// The gateway in front of the PII server (`pii`), with `hooks` and an audit file.
fn gateway(url: &str, audit: &str, hooks: &str) -> Gateway {
    let config = format!("{}[audit]\nsink = \"file\"\nfile = \"{audit}\"\n{hooks}", http_server("pii", url));
    Gateway::start(&config, &[])
}

const REDACT_SERVER: &str = r#"
[[hooks]]
name = "pii"
phase = "after"
match_servers = ["pii"]
builtin = "redact"
detect = ["card", "email"]
"#;

fn read_lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn rpc(gw: &Gateway, method: &str, params: Value) -> Value {
    gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).1
}

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(EMAIL) && !text.contains(CARD), "{what} leaks: {text}");
}

#[test]
fn the_python_sdk_client_sees_the_resources_prompts_and_completions_of_a_redacted_server_redacted() {
    let (_server, url) = pii_server();
    let scratch = Scratch::new("outbound-surface");
    let audit = scratch.path("audit.jsonl");
    let gw = gateway(&url, &audit, REDACT_SERVER);
    let tool = gw.call("profile", json!({}));
    assert_eq!(result_text(&tool), "contact [redacted:email], card [redacted:card]", "{tool}");

    for mode in ["legacy", "2026-07-28"] {
        let output = Command::new(python())
            .arg(peers_dir().join("clients/surface_client.py"))
            .args([&gw.url("/mcp"), mode, "pii://profile", "write_to", r#"{"name": "Ann"}"#])
            .output()
            .expect("the client runs");
        assert!(output.status.success(), "{mode}: {}", String::from_utf8_lossy(&output.stderr));
        let seen: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
        assert_eq!(
            seen["read"]["contents"][0]["text"], "Ann <[redacted:email]> pays with [redacted:card]",
            "{mode}: {seen}"
        );
        assert_eq!(
            seen["prompt"]["messages"][0]["content"]["text"],
            "Write to Ann at [redacted:email] about card [redacted:card]",
            "{mode}: {seen}"
        );
        assert_eq!(
            seen["completion"]["completion"]["values"],
            json!(["[redacted:email]", "bob", "carol"]),
            "{mode}: {seen}"
        );
        assert_clean(mode, &seen.to_string());
    }

    // A text blob is read and redacted; a binary one is not touched.
    let blob = rpc(&gw, "resources/read", json!({"uri": "pii://card.txt"}));
    let encoded = blob["result"]["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("{blob}"));
    let decoded = String::from_utf8(STANDARD.decode(encoded).expect("base64")).expect("utf-8");
    assert_eq!(decoded, "card [redacted:card] of [redacted:email]");
    let photo = rpc(&gw, "resources/read", json!({"uri": "pii://photo.png"}));
    let encoded = photo["result"]["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("{photo}"));
    assert!(
        STANDARD.decode(encoded).expect("base64").ends_with(EMAIL.as_bytes()),
        "a binary blob is not read"
    );

    // The audit lines of the reads carry the hook's decision.
    wait_for("the read's audit line", || {
        read_lines(&audit).iter().any(|l| l["method"] == "resources/read" && l["tool"] == "pii://card.txt")
    });
    let lines = read_lines(&audit);
    let read =
        lines.iter().find(|l| l["method"] == "resources/read" && l["tool"] == "pii://card.txt").unwrap();
    assert_eq!(
        read["guardrails"],
        json!([{"hook": "pii", "phase": "after", "decision": "replace"}]),
        "{read}"
    );
    let prompt = lines.iter().find(|l| l["method"] == "prompts/get").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(prompt["guardrails"][0]["decision"], "replace", "{prompt}");
}

#[test]
fn before_hooks_judge_the_arguments_of_prompts_and_completions() {
    let (_server, url) = pii_server();
    let scratch = Scratch::new("outbound-before");
    let audit = scratch.path("audit.jsonl");
    let hooks = r#"
[[hooks]]
name = "no-cards"
phase = "before"
match_servers = ["pii"]
builtin = "refuse"
detect = ["card"]
"#;
    let gw = gateway(&url, &audit, hooks);
    let refused = rpc(&gw, "prompts/get", json!({"name": "echo", "arguments": {"text": CARD}}));
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    assert_eq!(refused["error"]["data"]["guardrail"]["hook"], "no-cards", "{refused}");
    let completion =
        json!({"ref": {"type": "ref/prompt", "name": "echo"}, "argument": {"name": "text", "value": CARD}});
    let refused = rpc(&gw, "completion/complete", completion);
    assert_eq!(refused["error"]["data"]["category"], "guardrail", "{refused}");
    let hits = gw.call("prompt_hits", json!({}));
    assert_eq!(result_text(&hits), "0", "a refused prompt never reached the server: {hits}");
    let allowed = rpc(&gw, "prompts/get", json!({"name": "echo", "arguments": {"text": "hello"}}));
    assert_eq!(allowed["result"]["messages"][0]["content"]["text"], "Echo: hello", "{allowed}");
    wait_for("the refusal's audit line", || read_lines(&audit).iter().any(|l| l["method"] == "prompts/get"));
    let line = read_lines(&audit).into_iter().find(|l| l["method"] == "prompts/get").unwrap();
    assert_eq!(
        (&line["outcome"], &line["rule"]),
        (&json!("guardrail"), &json!("guardrail:no-cards")),
        "{line}"
    );
}

#[test]
fn a_hook_tool_is_told_the_kind_of_item_and_its_replacement_must_be_one() {
    let (_server, url) = pii_server();
    let scratch = Scratch::new("outbound-hook-tool");
    let record = scratch.path("hook-inputs.jsonl");
    let port = free_port();
    let mut command = Command::new(python());
    command
        .arg(peers_dir().join("servers/hook_server.py"))
        .arg(port.to_string())
        .args(["--record", &record])
        .env("PYTHONUNBUFFERED", "1");
    let _hooks = Proc::spawn_until("hook-server", command, "READY");
    let hooks = format!(
        r#"{guards}
[[hooks]]
name = "items"
phase = "after"
match_servers = ["pii"]
server = "guards"
tool = "guard_item"
timeout_ms = 60000
"#,
        guards = http_server("guards", &format!("http://127.0.0.1:{port}/mcp"))
    );
    let gw = gateway(&url, &scratch.path("audit.jsonl"), &hooks);
    let prompt = rpc(&gw, "prompts/get", json!({"name": "write_to", "arguments": {"name": "Ann"}}));
    assert_eq!(prompt["result"]["messages"][0]["content"]["text"], "replaced prompt", "{prompt}");
    // A replacement that is no resource is a failure of the hook (closed: the read is refused).
    let read = rpc(&gw, "resources/read", json!({"uri": "pii://profile"}));
    assert_eq!(read["error"]["data"]["category"], "guardrail", "{read}");
    assert_clean("the refused read", &read.to_string());
    // No hook call is made for an error: the server's own words are withheld.
    let failed = gw.call("failing", json!({}));
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("JSON-RPC error -32602") && message.contains("guardrail items"), "{failed}");
    assert!(failed["error"]["data"].get("upstream_data").is_none(), "{failed}");
    assert_clean("the withheld error", &failed.to_string());
    let inputs = read_lines(&record);
    let prompt_input =
        inputs.iter().find(|i| i["input"]["kind"] == "prompt").unwrap_or_else(|| panic!("{inputs:?}"));
    assert_eq!(prompt_input["input"]["tool"], "write_to");
    assert_eq!(prompt_input["input"]["server"], "pii");
    assert_eq!(prompt_input["input"]["arguments"], json!({"name": "Ann"}));
    assert!(prompt_input["input"]["result"]["messages"].is_array(), "{prompt_input}");
    let resource_input =
        inputs.iter().find(|i| i["input"]["kind"] == "resource").unwrap_or_else(|| panic!("{inputs:?}"));
    assert_eq!(resource_input["input"]["tool"], "pii://profile");
    assert!(resource_input["input"]["result"]["contents"].is_array(), "{resource_input}");
}

#[test]
fn a_result_type_of_the_servers_own_is_upstream_protocol_hooked_or_not() {
    let (_server, url) = pii_server();
    let scratch = Scratch::new("outbound-result-type");
    for hooks in ["", REDACT_SERVER] {
        let gw = gateway(&url, &scratch.path("audit.jsonl"), hooks);
        let answer = gw.call("partial_profile", json!({}));
        expect_error(&answer, -32000, "upstream_protocol");
        assert_clean("a partial result", &answer.to_string());
    }
}

#[test]
fn progress_log_entries_and_error_messages_of_a_hooked_call_are_redacted() {
    let (_server, url) = pii_server();
    let scratch = Scratch::new("outbound-stream");
    let gw = gateway(&url, &scratch.path("audit.jsonl"), REDACT_SERVER);
    let body = json!({"jsonrpc": "2.0", "id": "n-1", "method": "tools/call",
        "params": {"name": "noisy", "arguments": {}, "_meta": {"progressToken": "p-1"}}});
    let (status, _, text) = gw.post_raw(body.to_string(), &[("accept", ACCEPT_BOTH)]);
    assert_eq!(status, 200, "{text}");
    let events = sse_events(&text);
    let messages: Vec<&Value> = events
        .iter()
        .filter(|e| e["method"] == "notifications/progress")
        .filter_map(|e| e["params"].get("message"))
        .collect();
    assert!(messages.contains(&&json!("mailing [redacted:email]")), "{text}");
    let logs: Vec<&Value> = events
        .iter()
        .filter(|e| e["method"] == "notifications/message")
        .map(|e| &e["params"]["data"])
        .collect();
    assert!(!logs.is_empty() && logs.iter().all(|d| d.to_string().contains("[redacted:email]")), "{text}");
    assert_eq!(events.last().map(|e| e["result"]["content"][0]["text"].clone()), Some(json!("noisy done")));
    assert_clean("the event stream", &text);

    let failed = gw.call("failing", json!({}));
    assert_eq!(failed["error"]["code"], -32602, "the server's own code: {failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no account for [redacted:email]"), "{failed}");
    assert_eq!(failed["error"]["data"]["upstream_data"]["email"], "[redacted:email]", "{failed}");
    assert_clean("the error", &failed.to_string());
}

#[test]
fn a_tasks_status_and_result_pass_the_hooks_and_reading_the_result_leaves_an_audit_line() {
    let port = free_port();
    let _everything = everything_server(port);
    let scratch = Scratch::new("outbound-task");
    let audit = scratch.path("audit.jsonl");
    let config = format!(
        "{}[audit]\nsink = \"file\"\nfile = \"{audit}\"\n[[hooks]]\nname = \"stages\"\nphase = \"after\"\nmatch_servers = [\"research\"]\nbuiltin = \"redact\"\npatterns = [\"Gathering sources|Analyzing content|Synthesizing findings|Generating report\"]\n",
        http_server("research", &format!("http://127.0.0.1:{port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let (_, created) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "simulate-research-query", "arguments": {"topic": "tokyo"}, "task": {"ttl": 60000}}}));
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}"));
    // The server's status message names its stage: the caller reads it redacted.
    let mut status = Value::Null;
    wait_for("a status message", || {
        let (_, got) =
            gw.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": id}}));
        status = got["result"]["statusMessage"].clone();
        status.is_string()
    });
    assert!(status.as_str().unwrap_or_default().starts_with("[redacted]"), "{status}");
    let (_, result) =
        gw.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": id}}));
    let text = result_text(&result);
    assert!(text.contains("tokyo") && !text.contains("Gathering sources"), "{result}");
    wait_for("the result read's audit line", || {
        read_lines(&audit).iter().any(|l| l["method"] == "tasks/result")
    });
    let line = read_lines(&audit).into_iter().find(|l| l["method"] == "tasks/result").unwrap();
    assert_eq!(line["tool"], "simulate-research-query", "{line}");
    assert_eq!(line["server"], "research", "{line}");
    assert_eq!(line["outcome"], "ok", "{line}");
    assert_eq!(
        line["guardrails"],
        json!([{"hook": "stages", "phase": "after", "decision": "replace"}]),
        "{line}"
    );
}
