//! One ownership rule for every table (`src/ownership.rs`, `docs/security.md#ownership`),
//! across two callers per table, against real peers: the official "everything" server's
//! task tool (tasks), the slow demo store (cancellation of a call by its request id), the
//! Python SDK conformance fixtures (a relayed `sampling/createMessage` waiting for its
//! caller's answer), the Python SDK multi-round-trip server in session-era-only mode (a
//! question held for a modern caller), and listen streams (`GET`/`DELETE /mcp`). Callers are
//! anonymous ones sending `Mcp-Session-Id`s of their own (not the gateway's), and JWT subjects
//! `alice` and `bob` with tokens from a real OAuth server, `bob` presenting `alice`'s session id.

use std::{
    io::{BufRead, BufReader},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use crate::{common::*, identity_policy::OAuth};
use serde_json::{Value, json};

const RESEARCH: &str = "simulate-research-query";
const SESSION_ERA: &str = "2025-11-25";

type Headers<'a> = Vec<(&'a str, &'a str)>;

fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

/// POSTs `message`; the status, the answer's `Mcp-Session-Id` and its body (`Null` if empty).
fn post(gw: &Gateway, message: &Value, headers: &[(&str, &str)]) -> (u16, Option<String>, Value) {
    let (status, answer_headers, text) = gw.post_raw(message.to_string(), headers);
    let session = answer_headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    (status, session, body)
}

/// A request answered `200`; its body.
fn ok(gw: &Gateway, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let (status, _, body) = post(gw, &request(method, params), headers);
    assert_eq!(status, 200, "{method}: {body}");
    body
}

/// Asserts the gateway answered as for an unknown session: `404`, `unknown_session`.
fn assert_unknown_session(what: &str, status: u16, body: &Value) {
    assert_eq!(status, 404, "{what}: {body}");
    assert_eq!(body["error"]["data"]["reason"], "unknown_session", "{what}: {body}");
}

/// A session-era `initialize` declaring `capabilities`; the `Mcp-Session-Id` it was given (a
/// back-channel session when it declares one, else a stateless listen id).
fn initialize(gw: &Gateway, capabilities: Value, headers: &[(&str, &str)]) -> String {
    let params = json!({"protocolVersion": SESSION_ERA, "capabilities": capabilities,
        "clientInfo": {"name": "ownership", "version": "1"}});
    let mut headers = headers.to_vec();
    headers.push(("accept", "application/json, text/event-stream"));
    let (status, session, body) = post(gw, &request("initialize", params), &headers);
    assert_eq!(status, 200, "{body}");
    session.unwrap_or_else(|| panic!("no Mcp-Session-Id: {body}"))
}

/// A task-augmented call of the everything server's research tool; the gateway's task id.
fn create_task(gw: &Gateway, topic: &str, headers: &[(&str, &str)]) -> String {
    let params = json!({"name": RESEARCH, "arguments": {"topic": topic}, "task": {"ttl": 60000}});
    let created = ok(gw, "tools/call", params, headers);
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}"));
    assert!(id.starts_with("mcpgw-task-"), "{created}");
    id.to_string()
}

/// The task ids `tasks/list` answers.
fn listed(gw: &Gateway, headers: &[(&str, &str)]) -> Vec<String> {
    let list = ok(gw, "tasks/list", json!({}), headers);
    let tasks = list["result"]["tasks"].as_array().unwrap_or_else(|| panic!("no tasks: {list}"));
    let mut ids: Vec<String> =
        tasks.iter().filter_map(|t| t["taskId"].as_str()).map(str::to_string).collect();
    ids.sort();
    ids
}

/// Asserts `tasks/get`, `tasks/result` and `tasks/cancel` of `id` are refused `task_not_owned`.
fn assert_not_owned(gw: &Gateway, id: &str, headers: &[(&str, &str)], who: &str) {
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let refused = ok(gw, method, json!({"taskId": id}), headers);
        assert_eq!(
            expect_error(&refused, -32008, "forbidden")["reason"],
            "task_not_owned",
            "{who} {method}: {refused}"
        );
    }
}

/// Polls `tasks/get` until the task leaves `working`; its last status.
fn final_status(gw: &Gateway, id: &str, headers: &[(&str, &str)]) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = ok(gw, "tasks/get", json!({"taskId": id}), headers);
        let status = got["result"]["status"].as_str().unwrap_or_else(|| panic!("{got}")).to_string();
        if status != "working" {
            return status;
        }
        assert!(Instant::now() < deadline, "the task never left `working`");
        thread::sleep(Duration::from_millis(200));
    }
}

fn everything() -> (Proc, String) {
    let port = free_port();
    (everything_server(port), http_server("everything", &format!("http://127.0.0.1:{port}/mcp")))
}

/// A gateway checking JWTs from `oauth`, in front of `servers`.
fn jwt_gateway(oauth: &OAuth, servers: &str) -> Gateway {
    let config = format!(
        "[auth]\nmode = \"jwt\"\nissuer = \"{}\"\naudience = \"mcp-gateway\"\njwks_url = \"{}\"\njwks_min_refetch_secs = 0\n[metrics]\nmain_listener = \"admin\"\n\n{servers}",
        oauth.issuer,
        oauth.jwks_url()
    );
    Gateway::start(&config, &[])
}

/// `alice`'s and `bob`'s `Authorization` values.
fn bearers(oauth: &OAuth) -> (String, String) {
    (
        format!("Bearer {}", oauth.token("alice", "store:browse")),
        format!("Bearer {}", oauth.token("bob", "store:browse")),
    )
}

fn with_session<'a>(authorization: &'a str, session: &'a str) -> Headers<'a> {
    vec![("authorization", authorization), ("mcp-session-id", session)]
}

fn delete(gw: &Gateway, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = gw.client.delete(gw.url("/mcp"));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().expect("the gateway answers DELETE");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

#[test]
fn anonymous_callers_with_ids_of_their_own_do_not_share_tasks() {
    let (_everything, server) = everything();
    let gw = Gateway::start(&server, &[]);
    let (a, b): (Headers, Headers) = (vec![("mcp-session-id", "sess-a")], vec![("mcp-session-id", "sess-b")]);
    let of_a = create_task(&gw, "kobe", &a);
    let of_b = create_task(&gw, "nara", &b);
    // An id of a client's own proves nothing, so neither owns by it: each list used to show
    // both tasks (one shared anonymous owner). A task of nobody is listed to nobody.
    let (seen_by_a, seen_by_b) = (listed(&gw, &a), listed(&gw, &b));
    assert!(!seen_by_b.contains(&of_a), "B sees A's task: {seen_by_b:?}");
    assert!(!seen_by_a.contains(&of_b), "A sees B's task: {seen_by_a:?}");
    assert_eq!((seen_by_a, seen_by_b, listed(&gw, &[])), (vec![], vec![], vec![]));
    // The unguessable id alone still reaches it, from a caller that owns nothing either.
    let got = ok(&gw, "tasks/get", json!({"taskId": of_a}), &a);
    assert_eq!(got["result"]["taskId"], of_a.as_str(), "{got}");

    // An anonymous caller holding a session the gateway minted owns through it: its task is
    // listed to it alone and refused to the others; it cannot use another's unowned task.
    let minted = initialize(&gw, json!({"elicitation": {}}), &[]);
    assert!(minted.starts_with("mcpgw-session-"), "{minted}");
    let c: Headers = vec![("mcp-session-id", minted.as_str())];
    let of_c = create_task(&gw, "kyoto", &c);
    assert_eq!(listed(&gw, &c), vec![of_c.clone()]);
    assert_not_owned(&gw, &of_c, &a, "A");
    assert_not_owned(&gw, &of_c, &b, "B");
    assert_not_owned(&gw, &of_c, &[], "a sessionless caller");
    assert_not_owned(&gw, &of_a, &c, "the session holder");
    assert!(!listed(&gw, &a).contains(&of_c) && !listed(&gw, &b).contains(&of_c));
    // The refused cancels touched nothing.
    assert_eq!(final_status(&gw, &of_c, &c), "completed");
    assert_eq!(final_status(&gw, &of_a, &a), "completed");
}

#[test]
fn a_subject_presenting_anothers_session_id_cannot_read_or_cancel_her_tasks() {
    let oauth = OAuth::start();
    let (_everything, server) = everything();
    let gw = jwt_gateway(&oauth, &server);
    let (alice_auth, bob_auth) = bearers(&oauth);
    let (alice, bob): (Headers, Headers) =
        (vec![("authorization", &alice_auth)], vec![("authorization", &bob_auth)]);
    let session = initialize(&gw, json!({"elicitation": {}}), &alice);
    let hers = with_session(&alice_auth, &session);
    let task = create_task(&gw, "sendai", &hers);
    // Bob holding her session id: refused as for an unknown session, before anything is read.
    let bob_with_hers = with_session(&bob_auth, &session);
    for (method, params) in [
        ("tasks/list", json!({})),
        ("tasks/get", json!({"taskId": task})),
        ("tasks/result", json!({"taskId": task})),
        ("tasks/cancel", json!({"taskId": task})),
    ] {
        let (status, _, body) = post(&gw, &request(method, params), &bob_with_hers);
        assert_unknown_session(&format!("bob's {method} in alice's session"), status, &body);
    }
    let (status, body) = delete(&gw, &bob_with_hers);
    assert_unknown_session("bob's DELETE of alice's session", status, &body);
    // Bob under his own identity: an empty list, her task refused.
    assert_eq!(listed(&gw, &bob), Vec::<String>::new());
    assert_not_owned(&gw, &task, &bob, "bob");
    // Alice owns by her subject, in her session or out of it; her session still works.
    assert_eq!(listed(&gw, &alice), vec![task.clone()]);
    assert_eq!(listed(&gw, &hers), vec![task.clone()]);
    assert_eq!(final_status(&gw, &task, &hers), "completed", "bob's cancels reached nothing");
    let result = ok(&gw, "tasks/result", json!({"taskId": task}), &hers);
    assert!(result_text(&result).contains("Research Report: sendai"), "{result}");
}

fn call_body(id: Value, manga: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "price_lookup", "arguments": {"manga_id": manga}}})
    .to_string()
}

fn cancel_note(request_id: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
}

/// POSTs `body` from another thread (its own connection); the status and parsed body.
fn in_background(gw: &Gateway, body: String, headers: &[(&str, &str)]) -> thread::JoinHandle<(u16, Value)> {
    let call = post_in_background(gw, body, headers);
    thread::spawn(move || {
        let (status, _, body) = call.join().unwrap();
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    })
}

fn cancelled_calls(gw: &Gateway) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["outcome=\"cancelled\""])
}

#[test]
fn a_subject_presenting_anothers_session_id_cannot_cancel_her_call() {
    let oauth = OAuth::start();
    let demo = Demo::slow(30_000);
    let gw = jwt_gateway(&oauth, &format!("{}timeout_ms = 60000\n", http_server("store", &demo.url())));
    let (alice_auth, bob_auth) = bearers(&oauth);
    let session = initialize(&gw, json!({"roots": {}}), &[("authorization", &alice_auth)]);
    let hers = with_session(&alice_auth, &session);
    let call = in_background(&gw, call_body(json!("order-7"), "MNG-00000001"), &hers);
    wait_for("her call to reach the server", || demo.stats()["calls"] == 1);
    // Bob holding her session id names her call: refused as an unknown session.
    let (status, _, body) = post(&gw, &cancel_note(json!("order-7")), &with_session(&bob_auth, &session));
    assert_unknown_session("bob's cancel in alice's session", status, &body);
    // Under his own identity his scope holds no such call.
    let (status, _, _) = post(&gw, &cancel_note(json!("order-7")), &[("authorization", &bob_auth)]);
    assert_eq!(status, 202);
    assert_eq!(cancelled_calls(&gw), 0.0);
    // Her own cancel, sent after his from another connection, still finds the call in flight.
    let (status, _, _) = post(&gw, &cancel_note(json!("order-7")), &hers);
    assert_eq!(status, 202);
    let (status, answer) = call.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    expect_error(&answer, -32800, "cancelled");
    assert_eq!(cancelled_calls(&gw), 1.0);
}

#[test]
fn anonymous_callers_sending_the_same_id_of_their_own_cannot_cancel_each_others_calls() {
    let demo = Demo::slow(5_000);
    let gw = Gateway::start(&format!("{}timeout_ms = 60000\n", http_server("store", &demo.url())), &[]);
    let shared = [("mcp-session-id", "shared-by-both")];
    let call = in_background(&gw, call_body(json!(7), "MNG-00000001"), &shared);
    wait_for("A's call to reach the server", || demo.stats()["calls"] == 1);
    // B, on another connection, sends A's id of its own and A's request id.
    let (status, _, _) = post(&gw, &cancel_note(json!(7)), &shared);
    assert_eq!(status, 202);
    let (status, answer) = call.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["manga_id"], "MNG-00000001", "{answer}");
    assert_eq!(cancelled_calls(&gw), 0.0);
    assert_eq!((demo.stats()["answered"].as_u64(), demo.stats()["abandoned"].as_u64()), (Some(1), Some(0)));
}

/// A `tools/call` of `tool` reading its event stream; the stream's lines.
fn call_on_stream(
    gw: &Gateway,
    tool: &str,
    arguments: Value,
    headers: &[(&str, &str)],
) -> BufReader<reqwest::blocking::Response> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let mut request = reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .unwrap()
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", SESSION_ERA);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_string()).send().unwrap();
    assert_eq!(response.status(), 200);
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    BufReader::new(response)
}

/// The next message on an event stream.
fn next_message(lines: &mut BufReader<reqwest::blocking::Response>) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(lines.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            return serde_json::from_str(data).unwrap();
        }
    }
}

#[test]
fn a_subject_presenting_anothers_session_id_cannot_answer_her_relayed_request() {
    let oauth = OAuth::start();
    let port = free_port();
    let _fixtures = conformance_fixtures(port, &[]);
    let gw = jwt_gateway(&oauth, &http_server("fixtures", &format!("http://127.0.0.1:{port}/mcp")));
    let (alice_auth, bob_auth) = bearers(&oauth);
    let session = initialize(&gw, json!({"sampling": {}}), &[("authorization", &alice_auth)]);
    let hers = with_session(&alice_auth, &session);
    let mut stream = call_on_stream(&gw, "test_sampling", json!({"prompt": "2+2?"}), &hers);
    let asked = next_message(&mut stream);
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    let relayed = asked["id"].as_str().unwrap_or_else(|| panic!("{asked}")).to_string();
    let reply = |text: &str| json!({"jsonrpc": "2.0", "id": relayed, "result": {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}});
    // Bob holding her session id and the relayed request's id: refused, it keeps waiting.
    let (status, _, body) = post(&gw, &reply("intruder"), &with_session(&bob_auth, &session));
    assert_unknown_session("bob's answer in alice's session", status, &body);
    // She answers it: her call gets her answer.
    let (status, _, body) = post(&gw, &reply("four"), &hers);
    assert_eq!(status, 202, "{body}");
    let response = next_message(&mut stream);
    assert_eq!(response["id"], 7, "{response}");
    assert_eq!(response["result"]["content"][0]["text"], "LLM response: four", "{response}");
}

/// The multi-round-trip server speaking the session era only; its `/mcp` URL and its record of
/// the answers it was sent.
struct HeldServer {
    _proc: Proc,
    url: String,
}

impl HeldServer {
    fn start() -> Self {
        let port = free_port();
        let mut command = Command::new(python());
        command.arg(peers_dir().join("servers/mrtr_server.py")).arg(port.to_string()).arg("--legacy-only");
        let mut proc = Proc::spawn("mrtr-server", command);
        proc.wait_line("READY", Duration::from_secs(30));
        Self { _proc: proc, url: format!("http://127.0.0.1:{port}") }
    }

    /// The answers the server got to its own requests, in order.
    fn answers(&self) -> Vec<Value> {
        let list: Value =
            reqwest::blocking::get(format!("{}/control/answers", self.url)).unwrap().json().unwrap();
        list.as_array().unwrap().clone()
    }
}

/// A modern (2026-07-28) `tools/call` with `params`; the answer.
fn modern_call(gw: &Gateway, params: Value, headers: &[(&str, &str)]) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "ownership", "version": "1"}
    });
    let mut headers = headers.to_vec();
    let name = params["name"].as_str().unwrap_or_default().to_string();
    headers.extend([
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name.as_str()),
    ]);
    let (status, answer_headers, text) = gw.post_raw(request("tools/call", params).to_string(), &headers);
    assert_eq!(status, 200, "{text}");
    let event_stream = answer_headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = if event_stream {
        text.lines().rev().find_map(|l| l.strip_prefix("data:")).unwrap_or_default().trim().to_string()
    } else {
        text.clone()
    };
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Asks `gw`'s held server the question of `summarise_reviews` as `owner`, has `intruder`
/// answer it with the state `owner` was given (refused, the server sees nothing), then
/// `owner` (the call completes with that answer).
fn held_question_answered_by_its_owner_only(
    gw: &Gateway,
    server: &HeldServer,
    owner: &[(&str, &str)],
    intruder: &[(&str, &str)],
) {
    let call = json!({"name": "summarise_reviews", "arguments": {"title": "Naruto"}});
    let asked = modern_call(gw, call.clone(), owner);
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap_or_else(|| panic!("{asked}")).to_string();
    let key = asked["result"]["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).unwrap();
    let mut retry = call;
    retry["requestState"] = json!(state);
    retry["inputResponses"] =
        json!({key: {"role": "assistant", "content": {"type": "text", "text": "ten stars"}, "model": "m"}});
    let before = server.answers().len();
    let refused = modern_call(gw, retry.clone(), intruder);
    assert_eq!(refused["error"]["data"]["reason"], "request_state_other_caller", "{refused}");
    assert_eq!(server.answers().len(), before, "the intruder's answer never reached the server");
    let answer = modern_call(gw, retry, owner);
    assert_eq!(answer["result"]["content"][0]["text"], "Naruto: ten stars", "{answer}");
    assert_eq!(server.answers().len(), before + 1);
}

#[test]
fn a_question_held_for_one_caller_is_answered_by_that_caller_only() {
    let server = HeldServer::start();
    let servers = http_server("mrtr", &format!("{}/mcp", server.url));
    // Anonymous callers sending ids of their own.
    let gw = Gateway::start(&servers, &[]);
    held_question_answered_by_its_owner_only(
        &gw,
        &server,
        &[("mcp-session-id", "sess-a")],
        &[("mcp-session-id", "sess-b")],
    );
    // JWT subjects.
    let oauth = OAuth::start();
    let gw = jwt_gateway(&oauth, &servers);
    let (alice, bob) = bearers(&oauth);
    held_question_answered_by_its_owner_only(
        &gw,
        &server,
        &[("authorization", &alice)],
        &[("authorization", &bob)],
    );
}

/// `GET /mcp` (the session era's change stream); the status and, when refused, the body.
fn listen(gw: &Gateway, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = gw.client.get(gw.url("/mcp")).header("accept", "text/event-stream");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().expect("the gateway answers GET");
    let status = response.status().as_u16();
    if status == 200 {
        // An open stream: dropped (the caller goes away).
        return (status, Value::Null);
    }
    (status, response.json().unwrap_or(Value::Null))
}

#[test]
fn a_subject_presenting_anothers_session_id_cannot_listen_on_it_or_end_it() {
    let oauth = OAuth::start();
    let (_everything, server) = everything();
    let gw = jwt_gateway(&oauth, &server);
    let (alice_auth, bob_auth) = bearers(&oauth);
    let alice = [("authorization", alice_auth.as_str())];
    let listen_id = initialize(&gw, json!({}), &alice);
    assert!(listen_id.starts_with("mcpgw-listen-"), "{listen_id}");
    let back_channel = initialize(&gw, json!({"roots": {}}), &alice);
    for id in [&listen_id, &back_channel] {
        let (status, body) = listen(&gw, &with_session(&bob_auth, id));
        assert_unknown_session("bob's GET on alice's id", status, &body);
        let (status, body) = delete(&gw, &with_session(&bob_auth, id));
        assert_unknown_session("bob's DELETE of alice's id", status, &body);
        assert_eq!(listen(&gw, &with_session(&alice_auth, id)).0, 200, "hers still");
    }
    for id in [&listen_id, &back_channel] {
        assert_eq!(delete(&gw, &with_session(&alice_auth, id)).0, 204);
    }
}
