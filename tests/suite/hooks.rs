//! Guardrail hooks (`[[hooks]]`, docs/hooks.md) on real calls: the built-in rules on the demo
//! server's results and arguments, hooks that are MCP tools on an official-SDK Python server
//! (tests/peers/servers/hook_server.py) and on a Lambda function behind the Invoke API
//! emulator (tests/peers/servers/lambda_invoke_emulator.py, `direct-hooks`), and hooks that
//! hang or fail under both failure modes. Every assertion is about what happened: what the
//! caller got, what the upstream and the hook saw (demo `/_stats`, the hook's record, the
//! emulator's invocations), the decision counters and the audit lines — never durations.

use std::{path::Path, process::Command, time::Duration};

use crate::common::*;
use serde_json::{Value, json};

/// The JSON-RPC code of a guardrail refusal.
const GUARDRAIL: i64 = -32012;

/// `mcp_gateway_guardrail_decisions_total` of one hook, tool and decision.
fn decisions(gw: &Gateway, hook: &str, tool: &str, decision: &str) -> f64 {
    let (hook, tool, decision) =
        (format!("hook=\"{hook}\""), format!("tool=\"{tool}\""), format!("decision=\"{decision}\""));
    metric(&gw.metrics(), "mcp_gateway_guardrail_decisions_total", &[&hook, &tool, &decision])
}

/// The calls the demo server has received.
fn upstream_calls(demo: &Demo) -> u64 {
    demo.stats()["calls"].as_u64().unwrap_or(0)
}

fn read_lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The official-SDK hook server over streamable HTTP, recording each input in `record`.
fn hook_server(record: &str) -> (Proc, u16) {
    let port = free_port();
    let mut command = Command::new(python());
    command
        .arg(peers_dir().join("servers/hook_server.py"))
        .arg(port.to_string())
        .args(["--record", record])
        .env("PYTHONUNBUFFERED", "1");
    (Proc::spawn_until("hook-server", command, "READY"), port)
}

#[test]
fn builtin_redaction_of_cards_emails_phones_and_patterns_in_a_real_result() {
    let scratch = Scratch::new("hooks-redact");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let config = format!(
        r#"{server}
[audit]
sink = "file"
file = "{audit}"
[[hooks]]
name = "pii"
phase = "after"
match_tools = ["manga_search"]
builtin = "redact"
detect = ["card", "email", "phone"]
[[hooks]]
name = "orders"
phase = "after"
match_servers = ["store"]
match_tools = ["checkout"]
builtin = "redact"
patterns = ["ORD-[0-9]{{8}}"]
"#,
        server = http_server("store", &demo.url())
    );
    let gw = Gateway::start(&config, &[]);
    let query = "card 4111 1111 1111 1111 not 4111 1111 1111 1112 mail ann@example.com tel +81 90-1234-5678";
    let answer = gw.call("manga_search", json!({"query": query}));
    let echoed = structured(&answer)["query"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        echoed, "card [redacted:card] not 4111 1111 1111 1112 mail [redacted:email] tel [redacted:phone]",
        "{answer}"
    );
    let text = result_text(&answer);
    assert!(text.contains("[redacted:card]") && text.contains("4111 1111 1111 1112"), "{text}");
    assert!(!text.contains("4111 1111 1111 1111") && !text.contains("ann@example.com"), "{text}");
    // The server got the call as sent: redaction is on what comes back.
    assert_eq!(demo.stats()["last_tool"]["arguments"]["query"], query);

    let order = gw.call("checkout", json!({"shipping_address_id": "addr-1", "payment_method_id": "pm-1"}));
    assert_eq!(structured(&order)["order_id"], "[redacted]", "{order}");
    assert_eq!(structured(&order)["status"], "confirmed", "the rest of the result is kept");

    let clean = gw.call("manga_search", json!({"query": "frieren"}));
    assert!(structured(&clean)["total"].as_u64().unwrap_or(0) > 0, "{clean}");
    assert_eq!(decisions(&gw, "pii", "manga_search", "replace"), 1.0);
    assert_eq!(decisions(&gw, "pii", "manga_search", "allow"), 1.0);
    assert_eq!(decisions(&gw, "orders", "checkout", "replace"), 1.0);
    assert_eq!(decisions(&gw, "pii", "checkout", "allow"), 0.0, "a hook runs only on what it matches");

    wait_for("three audit lines", || read_lines(&audit).len() >= 3);
    let lines = read_lines(&audit);
    assert_eq!(lines[0]["tool"], "manga_search");
    assert_eq!(lines[0]["guardrails"], json!([{"hook": "pii", "phase": "after", "decision": "replace"}]));
    assert_eq!(lines[1]["guardrails"], json!([{"hook": "orders", "phase": "after", "decision": "replace"}]));
    assert_eq!(lines[2]["guardrails"][0]["decision"], "allow");
    let raw = std::fs::read_to_string(&audit).unwrap_or_default();
    // The card number as written (a bare "4111" may be part of a timestamp).
    assert!(!raw.contains("ann@example.com") && !raw.contains("4111 1111"), "{raw}");
}

#[test]
fn arguments_carrying_a_card_number_are_refused_before_the_server() {
    let scratch = Scratch::new("hooks-refuse");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let config = format!(
        r#"{server}
[audit]
sink = "file"
file = "{audit}"
[[hooks]]
name = "no-cards"
phase = "before"
match_tools = ["*"]
builtin = "refuse"
detect = ["card"]
"#,
        server = http_server("store", &demo.url())
    );
    let gw = Gateway::start(&config, &[]);
    let before = upstream_calls(&demo);
    let refused = gw
        .call("checkout", json!({"shipping_address_id": "a-1", "payment_method_id": "4111-1111-1111-1111"}));
    let data = expect_error(&refused, GUARDRAIL, "guardrail");
    assert_eq!(data["guardrail"]["hook"], "no-cards", "{refused}");
    assert_eq!(data["guardrail"]["phase"], "before");
    assert_eq!(data["retryable"], false);
    assert!(
        !refused.to_string().contains("4111-1111-1111-1111"),
        "the error never echoes the match: {refused}"
    );
    assert_eq!(upstream_calls(&demo), before, "the server never saw the refused call");

    // Digits that fail the Luhn check are no card: the call goes through.
    let allowed = gw
        .call("checkout", json!({"shipping_address_id": "a-1", "payment_method_id": "4111-1111-1111-1112"}));
    assert_eq!(structured(&allowed)["status"], "confirmed", "{allowed}");
    assert_eq!(upstream_calls(&demo), before + 1);
    assert_eq!(decisions(&gw, "no-cards", "checkout", "deny"), 1.0);
    assert_eq!(decisions(&gw, "no-cards", "checkout", "allow"), 1.0);

    wait_for("two audit lines", || read_lines(&audit).len() >= 2);
    let lines = read_lines(&audit);
    assert_eq!(
        (lines[0]["decision"].as_str(), lines[0]["rule"].as_str()),
        (Some("deny"), Some("guardrail:no-cards"))
    );
    assert_eq!(lines[0]["outcome"], "guardrail");
    assert_eq!(lines[0]["guardrails"], json!([{"hook": "no-cards", "phase": "before", "decision": "deny"}]));
    assert_eq!(lines[1]["outcome"], "ok");
    assert_eq!(lines[1]["guardrails"][0]["decision"], "allow");
}

#[test]
fn an_sdk_server_hook_denies_replaces_arguments_and_replaces_results() {
    let scratch = Scratch::new("hooks-sdk");
    let record = scratch.path("hook-inputs.jsonl");
    let (_hooks, port) = hook_server(&record);
    let demo = Demo::http();
    let config = format!(
        r#"[auth]
mode = "header"
subject_header = "x-caller-subject"
[metrics]
main_listener = "open"
{store}
{guards}
[[hooks]]
name = "deny"
phase = "before"
match_tools = ["manga_search"]
server = "guards"
tool = "guard_deny"
timeout_ms = 60000
[[hooks]]
name = "rewrite"
phase = "before"
match_tools = ["manga_search"]
server = "guards"
tool = "guard_rewrite"
timeout_ms = 60000
[[hooks]]
name = "summary"
phase = "after"
match_tools = ["manga_search"]
server = "guards"
tool = "guard_result"
timeout_ms = 60000
"#,
        store = http_server("store", &demo.url()),
        guards = http_server("guards", &format!("http://127.0.0.1:{port}/mcp")),
    );
    let gw = Gateway::start(&config, &[]);
    let alice = [("x-caller-subject", "alice"), ("authorization", "Bearer caller-secret-token")];
    let before = upstream_calls(&demo);

    let denied = gw.call_with("manga_search", json!({"query": "forbidden volume"}), &alice);
    let data = expect_error(&denied, GUARDRAIL, "guardrail");
    assert_eq!(
        data["guardrail"],
        json!({"hook": "deny", "phase": "before", "reason": "forbidden query for alice"})
    );
    assert_eq!(upstream_calls(&demo), before, "a denied call never reaches the server");

    let answer = gw.call_with("manga_search", json!({"query": "rewrite-me"}), &alice);
    assert_eq!(
        demo.stats()["last_tool"]["arguments"]["query"],
        "frieren",
        "the server got the replaced arguments"
    );
    let result = structured(&answer);
    assert_eq!(result["replaced"], true, "{answer}");
    let seen = result["results_seen"].as_u64().unwrap_or(0);
    assert!(seen > 0, "the after-hook saw the server's results for the rewritten query: {answer}");
    assert_eq!(result_text(&answer), format!("replaced by the hook after {seen} results"));

    assert_eq!(decisions(&gw, "deny", "manga_search", "deny"), 1.0);
    assert_eq!(decisions(&gw, "deny", "manga_search", "allow"), 1.0);
    assert_eq!(decisions(&gw, "rewrite", "manga_search", "replace"), 1.0);
    assert_eq!(decisions(&gw, "summary", "manga_search", "replace"), 1.0);

    // What the hooks saw: the caller's subject, never its token; the arguments each hook got
    // are the previous hook's output; the after-hook got the server's own result.
    let inputs = read_lines(&record);
    let raw = std::fs::read_to_string(&record).unwrap_or_default();
    assert!(!raw.contains("caller-secret-token") && !raw.contains("Bearer"), "{raw}");
    let first = &inputs[0];
    assert_eq!(first["tool"], "guard_deny");
    assert_eq!(first["input"]["phase"], "before");
    assert_eq!(first["input"]["tool"], "manga_search");
    assert_eq!(first["input"]["server"], "store");
    assert_eq!(first["input"]["caller"]["subject"], "alice");
    let after: Vec<&Value> = inputs.iter().filter(|i| i["tool"] == "guard_result").collect();
    assert_eq!(after.len(), 1, "{inputs:?}");
    assert_eq!(after[0]["input"]["phase"], "after");
    assert_eq!(after[0]["input"]["result"]["structuredContent"]["query"], "frieren");
    let rewrites: Vec<&Value> = inputs.iter().filter(|i| i["tool"] == "guard_rewrite").collect();
    assert_eq!(rewrites.len(), 1, "the denied call never reached the second hook: {inputs:?}");
}

#[test]
fn a_replacement_that_changes_a_fixed_argument_is_a_failure_of_the_hook() {
    let scratch = Scratch::new("hooks-fixed");
    let record = scratch.path("hook-inputs.jsonl");
    let (_hooks, port) = hook_server(&record);
    let demo = Demo::http();
    // The operator fixes `query`; a hook rewriting it would change what the operator fixed.
    let config = format!(
        r#"{store}
{guards}
[tools.manga_search]
fixed_arguments = {{ query = "rewrite-me" }}
[[hooks]]
name = "rewrite"
phase = "before"
match_tools = ["manga_search"]
server = "guards"
tool = "guard_rewrite"
timeout_ms = 60000
failure = "closed"
"#,
        store = http_server("store", &demo.url()),
        guards = http_server("guards", &format!("http://127.0.0.1:{port}/mcp")),
    );
    let gw = Gateway::start(&config, &[]);
    let before = upstream_calls(&demo);
    let refused = gw.call("manga_search", json!({}));
    let data = expect_error(&refused, GUARDRAIL, "guardrail");
    assert_eq!(data["guardrail"]["reason"], "the guardrail failed", "{refused}");
    assert_eq!(upstream_calls(&demo), before);
    assert_eq!(decisions(&gw, "rewrite", "manga_search", "error_closed"), 1.0);
    let inputs = read_lines(&record);
    assert_eq!(
        inputs[0]["input"]["arguments"]["query"], "rewrite-me",
        "the hook saw the fixed value: {inputs:?}"
    );
}

#[test]
fn hooks_that_hang_or_fail_decide_by_their_failure_mode() {
    let scratch = Scratch::new("hooks-failing");
    let record = scratch.path("hook-inputs.jsonl");
    let (_hooks, port) = hook_server(&record);
    let demo = Demo::http();
    let hook = |name: &str, tool: &str, guarded: &str, timeout_ms: u64, failure: &str| {
        format!(
            "[[hooks]]\nname = \"{name}\"\nphase = \"before\"\nmatch_tools = [\"{guarded}\"]\nserver = \"guards\"\ntool = \"{tool}\"\ntimeout_ms = {timeout_ms}\nfailure = \"{failure}\"\n"
        )
    };
    let config = format!(
        "{}{}{}{}{}{}",
        http_server("store", &demo.url()),
        http_server("guards", &format!("http://127.0.0.1:{port}/mcp")),
        hook("hang-open", "guard_hang", "manga_search", 500, "open"),
        hook("hang-closed", "guard_hang", "price_lookup", 500, "closed"),
        hook("broken-open", "guard_fail", "inventory_check", 60000, "open"),
        hook("broken-closed", "guard_fail", "add_to_cart", 60000, "closed"),
    );
    let gw = Gateway::start(&config, &[]);

    let before = upstream_calls(&demo);
    let open = gw.call("manga_search", json!({"query": "frieren"}));
    assert!(structured(&open)["total"].as_u64().unwrap_or(0) > 0, "open: the call went on: {open}");
    assert_eq!(upstream_calls(&demo), before + 1);

    let closed = gw.call("price_lookup", json!({"manga_id": "MNG-00000004"}));
    let data = expect_error(&closed, GUARDRAIL, "guardrail");
    assert_eq!(data["guardrail"]["hook"], "hang-closed");
    assert_eq!(data["guardrail"]["reason"], "the guardrail did not answer in time");
    assert_eq!(upstream_calls(&demo), before + 1, "closed: nothing sent");

    let open = gw.call("inventory_check", json!({"manga_ids": ["MNG-00000004"]}));
    assert!(open.get("result").is_some(), "{open}");
    assert_eq!(upstream_calls(&demo), before + 2);
    let closed = gw.call("add_to_cart", json!({"manga_id": "MNG-00000004", "quantity": 1}));
    let data = expect_error(&closed, GUARDRAIL, "guardrail");
    assert_eq!(
        data["guardrail"],
        json!({"hook": "broken-closed", "phase": "before", "reason": "the guardrail failed"})
    );
    assert_eq!(upstream_calls(&demo), before + 2);

    assert_eq!(decisions(&gw, "hang-open", "manga_search", "timeout_open"), 1.0);
    assert_eq!(decisions(&gw, "hang-closed", "price_lookup", "timeout_closed"), 1.0);
    assert_eq!(decisions(&gw, "broken-open", "inventory_check", "error_open"), 1.0);
    assert_eq!(decisions(&gw, "broken-closed", "add_to_cart", "error_closed"), 1.0);
    // The hooks were really asked (and the hanging ones really hung: no decision of theirs).
    let asked: Vec<String> =
        read_lines(&record).iter().map(|i| i["tool"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(asked, ["guard_hang", "guard_hang", "guard_fail", "guard_fail"], "{asked:?}");
}

/// The Lambda Invoke API emulator hosting the hook server as the function `direct-hooks`.
struct Emulator {
    _proc: Proc,
    port: u16,
}

impl Emulator {
    fn start(record: &str) -> Self {
        let python = lambda_python();
        let mut command = Command::new(&python);
        command
            .arg("-W")
            .arg("ignore")
            .arg(peers_dir().join("servers/lambda_invoke_emulator.py"))
            .arg("0")
            .env("PYTHONUNBUFFERED", "1")
            .env("HOOK_RECORD", record);
        let mut proc = Proc::spawn("lambda-invoke-emulator", command);
        let line = proc.wait_line("READY", Duration::from_secs(60));
        let port = line.trim().trim_start_matches("READY").trim().parse().expect("READY <port>");
        Self { _proc: proc, port }
    }

    fn hook_calls(&self) -> Vec<Value> {
        let url = format!("http://127.0.0.1:{}/_invocations", self.port);
        let report: Value = reqwest::blocking::get(url).unwrap().json().unwrap();
        let all = report["invocations"].as_array().cloned().unwrap_or_default();
        all.into_iter()
            .filter(|i| i["function"] == "direct-hooks" && i["event"]["method"] == "tools/call")
            .collect()
    }
}

#[test]
fn a_lambda_function_is_a_hook_through_the_invoke_api() {
    let scratch = Scratch::new("hooks-lambda");
    let record = scratch.path("hook-inputs.jsonl");
    let emulator = Emulator::start(&record);
    let demo = Demo::http();
    let config = format!(
        r#"[aws]
endpoint_url = "http://127.0.0.1:{port}"
region = "us-east-1"
{store}
[servers.lambda_guards]
transport = "lambda"
function = "direct-hooks"
timeout_ms = 60000
deadline_ms = 90000
[[hooks]]
name = "lambda-deny"
phase = "before"
match_servers = ["store"]
match_tools = ["manga_*"]
server = "lambda_guards"
tool = "guard_deny"
timeout_ms = 60000
"#,
        port = emulator.port,
        store = http_server("store", &demo.url()),
    );
    let gw = Gateway::start(&config, &[]);
    let before = upstream_calls(&demo);
    let denied = gw.call("manga_search", json!({"query": "forbidden"}));
    let data = expect_error(&denied, GUARDRAIL, "guardrail");
    assert_eq!(data["guardrail"]["hook"], "lambda-deny");
    assert_eq!(data["guardrail"]["reason"], "forbidden query for None", "an anonymous caller: {denied}");
    assert_eq!(upstream_calls(&demo), before);

    let allowed = gw.call("manga_search", json!({"query": "frieren"}));
    assert!(structured(&allowed)["total"].as_u64().unwrap_or(0) > 0, "{allowed}");
    assert_eq!(upstream_calls(&demo), before + 1);
    // A tool the hook does not match never invokes the function.
    gw.call("price_lookup", json!({"manga_id": "MNG-00000004"}));

    let calls = emulator.hook_calls();
    assert_eq!(calls.len(), 2, "one invocation per guarded call: {calls:?}");
    for call in &calls {
        assert_eq!(call["event"]["params"]["name"], "guard_deny");
        assert_eq!(call["event"]["params"]["arguments"]["tool"], "manga_search");
        assert_eq!(call["event"]["params"]["arguments"]["server"], "store");
    }
    assert_eq!(decisions(&gw, "lambda-deny", "manga_search", "deny"), 1.0);
    assert_eq!(decisions(&gw, "lambda-deny", "manga_search", "allow"), 1.0);
    assert!(Path::new(&record).exists(), "the function's server recorded what it saw");
}

#[test]
fn a_tasks_result_passes_the_after_hooks_of_the_call_that_created_it() {
    let port = free_port();
    let _everything = everything_server(port);
    let config = format!(
        "{}[[hooks]]\nname = \"reports\"\nphase = \"after\"\nmatch_tools = [\"simulate-research-query\"]\nbuiltin = \"redact\"\npatterns = [\"Research Report\"]\n",
        http_server("research", &format!("http://127.0.0.1:{port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let (_, created) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "simulate-research-query", "arguments": {"topic": "tokyo"}, "task": {"ttl": 60000}}}));
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}"));
    assert_eq!(
        decisions(&gw, "reports", "simulate-research-query", "replace"),
        0.0,
        "the task's creation is no result"
    );
    // tasks/result waits for the task, then answers its result through the hook.
    let (_, result) =
        gw.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": id}}));
    let text = result_text(&result);
    assert!(text.contains("[redacted]: tokyo") && !text.contains("Research Report"), "{result}");
    assert_eq!(result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id, "{result}");
    assert_eq!(decisions(&gw, "reports", "simulate-research-query", "replace"), 1.0);
}

#[test]
fn hooks_that_break_the_rules_are_refused_at_start() {
    let demo = Demo::http();
    let refused = |hooks: &str, expected: &str| {
        let file = TempFile::with("hooks.toml", format!("{}{hooks}", http_server("store", &demo.url())));
        let output = check_config(&["--config", file.arg()], &[]);
        let text = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(!output.status.success() && text.contains(expected), "{hooks}: {text}");
    };
    refused(
        "[[hooks]]\nname = \"x\"\nphase = \"before\"\nmatch_tools = [\"*\"]\nbuiltin = \"redact\"\ndetect = [\"email\"]\n",
        "runs in phase \"after\"",
    );
    refused(
        "[[hooks]]\nname = \"x\"\nphase = \"before\"\nmatch_tools = [\"*\"]\nserver = \"nowhere\"\ntool = \"t\"\n",
        "not a configured server",
    );
    refused(
        "[[hooks]]\nname = \"x\"\nphase = \"after\"\nmatch_tools = [\"*\"]\nbuiltin = \"redact\"\npatterns = [\"(unclosed\"]\n",
        "does not compile",
    );
    refused(
        "[[hooks]]\nname = \"x\"\nphase = \"after\"\nbuiltin = \"redact\"\ndetect = [\"card\"]\n",
        "match_tools",
    );
}
