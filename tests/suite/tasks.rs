//! MCP tasks relayed through the gateway, against the official TypeScript "everything" server
//! (session era, 2025-11-25 tasks: `simulate-research-query`, task support `required`): the
//! task-augmented `tools/call` answered at once with the gateway's own task id, `tasks/get`
//! polled to the end, `tasks/result`, `tasks/list` aggregated over two servers (for a caller
//! holding a session of the gateway's: what has no owner is never listed), `tasks/cancel`,
//! a task that outlives its call's deadline, callers refused for tasks they do not own, the
//! table's bound, and an ambiguous query whose elicitation reaches the official Python SDK
//! client on its `tasks/result` stream. A modern (2026-07-28) caller using the extension is
//! served from the same session-era server.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use crate::common::*;
use serde_json::{Value, json};

const TOOL: &str = "simulate-research-query";

/// Two everything servers (`alpha`, `beta`) behind one gateway; every tool is exposed under
/// its server's prefix (the two servers offer the same names).
fn two_servers(extra: &str) -> (Proc, Proc, Gateway) {
    let (a, b) = (free_port(), free_port());
    let alpha = everything_server(a);
    let beta = everything_server(b);
    let config = format!(
        "{}{}{extra}",
        http_server("alpha", &format!("http://127.0.0.1:{a}/mcp")),
        http_server("beta", &format!("http://127.0.0.1:{b}/mcp"))
    );
    (alpha, beta, Gateway::start(&config, &[]))
}

fn rpc(gw: &Gateway, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let (status, _, text) = gw.post_raw(body.to_string(), headers);
    assert_eq!(status, 200, "{method}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {text}"))
}

/// A task-augmented `tools/call` of `server`'s research tool; the answer.
fn create(gw: &Gateway, server: &str, topic: &str, headers: &[(&str, &str)]) -> Value {
    let params =
        json!({"name": format!("{server}__{TOOL}"), "arguments": {"topic": topic}, "task": {"ttl": 60000}});
    rpc(gw, "tools/call", params, headers)
}

fn task_id(created: &Value) -> String {
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}"));
    assert!(id.starts_with("mcpgw-task-"), "the caller gets the gateway's id: {created}");
    id.to_string()
}

/// Polls `tasks/get` until the task's status is not `working`; every status seen, in order.
fn poll(gw: &Gateway, id: &str, headers: &[(&str, &str)]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen: Vec<String> = Vec::new();
    loop {
        let got = rpc(gw, "tasks/get", json!({"taskId": id}), headers);
        assert_eq!(got["result"]["taskId"], id, "{got}");
        let status =
            got["result"]["status"].as_str().unwrap_or_else(|| panic!("no status: {got}")).to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status != "working" {
            return seen;
        }
        assert!(Instant::now() < deadline, "the task never left `working`: {seen:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_research_task_is_created_polled_listed_cancelled_and_outlives_its_calls_deadline() {
    let (_alpha, _beta, gw) = two_servers("");

    // The tool keeps its task support in tools/list, and the gateway advertises tasks.
    let (_, list) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tool = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == format!("alpha__{TOOL}"))
        .cloned()
        .unwrap_or_else(|| panic!("{TOOL} is listed: {list}"));
    assert_eq!(tool["execution"]["taskSupport"], "required", "{tool}");
    let initialize = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params":
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, headers, text) = gw.post_raw(initialize.to_string(), &[]);
    assert_eq!(status, 200, "{text}");
    let init: Value = serde_json::from_str(&text).unwrap();
    // The gateway's listen id makes this anonymous caller the owner of its tasks (without a
    // session of the gateway's, its tasks would be listed to nobody: `src/ownership.rs`).
    let listen =
        headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("a listen id").to_string();
    let own = [("mcp-session-id", listen.as_str())];
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );

    // Without `task` the server refuses the tool (task support `required`): its own answer.
    let plain =
        rpc(&gw, "tools/call", json!({"name": format!("alpha__{TOOL}"), "arguments": {"topic": "x"}}), &[]);
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert!(result_text(&plain).contains("requires task augmentation"), "{plain}");

    // Created at once, with a deadline shorter than the research: the task outlives it.
    let created = create(&gw, "alpha", "tokyo", &[("x-request-timeout-ms", "1500"), own[0]]);
    let first = task_id(&created);
    assert_eq!(created["result"]["task"]["status"], "working", "{created}");
    // The server decides the task's ttl (this one always keeps its tasks 5 minutes).
    assert_eq!(created["result"]["task"]["ttl"], 300000, "{created}");
    let second = task_id(&create(&gw, "alpha", "osaka", &own));
    let on_beta = task_id(&create(&gw, "beta", "kyoto", &own));
    assert!(first != second && second != on_beta);

    // tasks/list: the three tasks, from both servers, under the gateway's ids.
    let listed = rpc(&gw, "tasks/list", json!({}), &own);
    let mut ids: Vec<&str> =
        listed["result"]["tasks"].as_array().unwrap().iter().filter_map(|t| t["taskId"].as_str()).collect();
    ids.sort_unstable();
    let mut expected = vec![first.as_str(), second.as_str(), on_beta.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "{listed}");

    // tasks/cancel of the beta task while it works.
    let cancelled = rpc(&gw, "tasks/cancel", json!({"taskId": on_beta}), &own);
    assert_eq!(
        (cancelled["result"]["taskId"].as_str(), cancelled["result"]["status"].as_str()),
        (Some(on_beta.as_str()), Some("cancelled")),
        "{cancelled}"
    );
    assert_eq!(rpc(&gw, "tasks/get", json!({"taskId": on_beta}), &own)["result"]["status"], "cancelled");

    // The first task, answered while `working`, completes: its call's deadline (1.5 s; the
    // research has four one-second stages) did not end it.
    let statuses = poll(&gw, &first, &own);
    assert_eq!(statuses.last().map(String::as_str), Some("completed"), "{statuses:?}");
    let result = rpc(&gw, "tasks/result", json!({"taskId": first}), &own);
    assert!(result_text(&result).contains("Research Report: tokyo"), "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], first,
        "{result}"
    );

    // tasks/result of a task still working waits for it (its own bound, not the server's).
    let waited = rpc(&gw, "tasks/result", json!({"taskId": second}), &own);
    assert!(result_text(&waited).contains("Research Report: osaka"), "{waited}");

    // An id the gateway never issued.
    let unknown =
        rpc(&gw, "tasks/get", json!({"taskId": "mcpgw-task-00000000000000000000000000000000"}), &[]);
    assert_eq!(expect_error(&unknown, -32602, "bad_input")["reason"], "unknown_task", "{unknown}");
}

#[test]
fn a_modern_caller_uses_the_tasks_extension_against_a_session_era_server() {
    let (_alpha, _beta, gw) = two_servers("");
    let discover = rpc(
        &gw,
        "server/discover",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        &[("mcp-protocol-version", "2026-07-28")],
    );
    assert_eq!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{discover}"
    );
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let headers = [("mcp-protocol-version", "2026-07-28")];
    // No `task` parameter: the caller declared the extension, the tool only runs as a task.
    let created = rpc(
        &gw,
        "tools/call",
        json!({"name": format!("alpha__{TOOL}"), "arguments": {"topic": "nara"}, "_meta": meta}),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", &format!("alpha__{TOOL}")),
        ],
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    assert!(created["result"]["ttlMs"].is_number() && created["result"].get("ttl").is_none(), "{created}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let done = loop {
        let got = rpc(&gw, "tasks/get", json!({"taskId": id, "_meta": meta}), &headers);
        assert_eq!(got["result"]["resultType"], "complete", "{got}");
        if got["result"]["status"] == "completed" {
            break got;
        }
        assert_eq!(got["result"]["status"], "working", "{got}");
        assert!(Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // The extension inlines the result.
    let text = done["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Research Report: nara"), "{done}");
    // tasks/update for keys never issued is acknowledged; tasks/cancel of an ended task is the
    // server's own refusal.
    let updated =
        rpc(&gw, "tasks/update", json!({"taskId": id, "inputResponses": {}, "_meta": meta}), &headers);
    assert_eq!(updated["result"], json!({"resultType": "complete"}), "{updated}");
    let cancel = rpc(&gw, "tasks/cancel", json!({"taskId": id, "_meta": meta}), &headers);
    assert!(cancel["error"].is_object(), "a completed task cannot be cancelled: {cancel}");
}

/// Task creation is server-directed in the 2026-07-28 extension: a caller that declared the
/// extension may get a task for a call without a `task` parameter. Against a modern server
/// (`hostile_server.py`'s `/tasker`, which answers a task exactly when the call declares the
/// extension): the task reaches the caller under the gateway's id (not `upstream_protocol`),
/// its inlined result comes back through `tasks/get`, and a caller that declared nothing gets
/// the plain result, the server seeing no declaration. Read-only tools keep the result cache:
/// one that may run as a task (`long_job`) is never served from it to a declaring caller (a
/// task handle is one caller's); one that never does (`quick_lookup`) is, and goes without
/// the declaration.
#[test]
fn a_modern_server_may_answer_a_task_to_a_caller_that_declared_the_extension() {
    let (_server, addr) = hostile_server(&[]);
    // The read-only tool's results are cached: a plain call may be served from the cache, a
    // declaring one never is.
    let config = format!(
        "[servers.jobs]\ntransport = \"http\"\nurl = \"http://{addr}/tasker\"\n[tools.long_job]\ncache_ttl_ms = 600000\n[tools.quick_lookup]\ncache_ttl_ms = 600000\n"
    );
    let gw = Gateway::start(&config, &[]);
    wait_for("the job tool", || gw.tool_names().contains(&"long_job".to_string()));
    let headers =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "long_job")];
    let declared = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let plain = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });

    let created =
        rpc(&gw, "tools/call", json!({"name": "long_job", "arguments": {}, "_meta": declared}), &headers);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    assert!(id.starts_with("mcpgw-task-"), "the caller gets the gateway's id, not job-1: {created}");

    let get_headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tasks/get")];
    let done = rpc(&gw, "tasks/get", json!({"taskId": id, "_meta": declared}), &get_headers);
    assert_eq!(
        (done["result"]["taskId"].clone(), done["result"]["status"].clone()),
        (json!(id), json!("completed")),
        "{done}"
    );
    assert_eq!(done["result"]["result"]["content"][0]["text"], "done later", "the inlined result: {done}");

    // A tool that is not read-only goes the plain way (no cache): a task too.
    let submit =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "submit_job")];
    let write =
        rpc(&gw, "tools/call", json!({"name": "submit_job", "arguments": {}, "_meta": declared}), &submit);
    assert_eq!(write["result"]["resultType"], "task", "not upstream_protocol: {write}");
    assert!(write["result"]["taskId"].as_str().is_some_and(|t| t.starts_with("mcpgw-task-")), "{write}");

    // The same call, twice, from a caller that declared nothing: the result, not a task (the
    // second from the cache).
    for _ in 0..2 {
        let now =
            rpc(&gw, "tools/call", json!({"name": "long_job", "arguments": {}, "_meta": plain}), &headers);
        assert_eq!(now["result"]["content"][0]["text"], "done now", "{now}");
        assert!(now["result"].get("taskId").is_none(), "{now}");
    }
    // A second declaring call after the plain ones: its own task, not a cached answer.
    let again =
        rpc(&gw, "tools/call", json!({"name": "long_job", "arguments": {}, "_meta": declared}), &headers);
    assert_eq!(again["result"]["resultType"], "task", "{again}");
    assert_ne!(again["result"]["taskId"], json!(id), "{again}");

    // A read-only tool without task support: cached for declaring callers too, the server
    // asked once, without the declaration, and answering plainly.
    let quick =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "quick_lookup")];
    for _ in 0..2 {
        let looked = rpc(
            &gw,
            "tools/call",
            json!({"name": "quick_lookup", "arguments": {}, "_meta": declared}),
            &quick,
        );
        assert_eq!(looked["result"]["content"][0]["text"], "done now", "{looked}");
    }

    // What the server saw, in order: the declaration forwarded exactly when the caller made it.
    let log = hostile_log(addr);
    let calls: Vec<bool> =
        log.iter().filter(|e| e["method"] == "tools/call").map(|e| e["declared"] == true).collect();
    assert_eq!(
        calls,
        [true, true, false, true, false],
        "the second plain call came from the cache; every declaring one reached the server"
    );
    assert_eq!(log.iter().filter(|e| e["method"] == "tasks/get").count(), 1, "{log:?}");
}

#[test]
fn a_caller_cannot_use_a_task_it_does_not_own() {
    let (_alpha, _beta, gw) = two_servers("");
    // A back-channel session (declares elicitation) owns its tasks.
    let session = |name: &str| -> String {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": name, "version": "1"}}});
        let (status, headers, text) =
            gw.post_raw(body.to_string(), &[("accept", "application/json, text/event-stream")]);
        assert_eq!(status, 200, "{text}");
        headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no session: {text}"))
            .to_string()
    };
    let owner = session("owner");
    let other = session("other");
    let created = create(&gw, "alpha", "sapporo", &[("mcp-session-id", &owner)]);
    let id = task_id(&created);
    assert_eq!(
        rpc(&gw, "tasks/get", json!({"taskId": id}), &[("mcp-session-id", &owner)])["result"]["taskId"],
        id
    );
    for headers in [vec![("mcp-session-id", other.as_str())], vec![]] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let refused = rpc(&gw, method, json!({"taskId": id}), &headers);
            assert_eq!(
                expect_error(&refused, -32008, "forbidden")["reason"],
                "task_not_owned",
                "{method}: {refused}"
            );
        }
        let listed = rpc(&gw, "tasks/list", json!({}), &headers);
        assert_eq!(listed["result"]["tasks"], json!([]), "another caller's list: {listed}");
    }
    // The owner's task was not touched by the refused cancels.
    let statuses = poll(&gw, &id, &[("mcp-session-id", &owner)]);
    assert_eq!(statuses.last().map(String::as_str), Some("completed"), "{statuses:?}");
}

#[test]
fn a_full_task_table_refuses_the_call_before_the_server_sees_it() {
    let (_alpha, _beta, gw) = two_servers("[tasks]\nmax_tasks = 2\n");
    // A back-channel session owns (and lists) its tasks.
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"}}});
    let (_, headers, text) = gw.post_raw(initialize.to_string(), &[]);
    let session =
        headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or_else(|| panic!("{text}"));
    let own = [("mcp-session-id", session)];
    let one = task_id(&create(&gw, "alpha", "one", &own));
    let two = task_id(&create(&gw, "beta", "two", &own));
    let refused = create(&gw, "alpha", "three", &own);
    let data = expect_error(&refused, -32005, "overloaded");
    assert_eq!(data["limit"]["key"], "tasks.max_tasks", "{refused}");
    assert_eq!(data["attempts"], 0, "refused before the server was called: {refused}");
    let listed = rpc(&gw, "tasks/list", json!({}), &own);
    let ids: Vec<&str> =
        listed["result"]["tasks"].as_array().unwrap().iter().filter_map(|t| t["taskId"].as_str()).collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&one.as_str()) && ids.contains(&two.as_str()), "{listed}");
}

#[test]
fn an_ambiguous_query_asks_the_python_sdk_client_on_its_tasks_result_stream() {
    let port = free_port();
    let _everything = everything_server(port);
    let gw = Gateway::start(&http_server("everything", &format!("http://127.0.0.1:{port}/mcp")), &[]);
    let output = Command::new(python())
        .arg(peers_dir().join("clients/task_client.py"))
        .args([&gw.url("/mcp"), TOOL, "python", "snake"])
        .output()
        .expect("the task client runs");
    assert!(
        output.status.success(),
        "task client failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        gw.proc.output()
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        seen["created"]["task"]["taskId"].as_str().is_some_and(|id| id.starts_with("mcpgw-task-")),
        "{seen}"
    );
    assert_eq!(
        seen["statuses"],
        json!(["working", "input_required"]),
        "the task waited for the caller: {seen}"
    );
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{seen}");
    assert!(asked[0].as_str().unwrap_or_default().contains("python"), "{seen}");
    let report = seen["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        report.contains("Research Report: python (snake)"),
        "the caller's answer reached the server: {seen}"
    );
    assert_eq!(seen["final"]["status"], "completed", "{seen}");
    assert!(
        metric(
            &gw.metrics(),
            "mcp_gateway_relayed_requests_total",
            &["method=\"elicitation/create\"", "outcome=\"answered\""]
        ) >= 1.0
    );
}
