//! Server→client requests (sampling, elicitation) relayed through the real gateway binary from
//! the conformance fixtures (`tests/peers/servers/conformance_server.py`, Python SDK 2.x, run with
//! `--log-requests` so the test sees what the upstream received) to callers: the official
//! Python SDK client with callbacks (`tests/peers/clients/relay_client.py`), and raw HTTP where the
//! test must misbehave as a caller (never answer, answer with someone else's id).

use std::{
    io::{BufRead, BufReader},
    process::Command,
    time::Duration,
};

use crate::common::*;
use serde_json::{Value, json};

const INITIALIZE_VERSION: &str = "2025-06-18";

/// The fixtures, printing every HTTP exchange; their `/mcp` URL.
fn fixtures() -> (Proc, String) {
    fixtures_with(&[])
}

fn fixtures_with(options: &[&str]) -> (Proc, String) {
    let port = free_port();
    let proc = conformance_fixtures(port, &[&["--log-requests"], options].concat());
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

fn gateway(upstream: &str, extra: &str) -> Gateway {
    Gateway::start(&format!("[servers.fixtures]\ntransport = \"http\"\nurl = \"{upstream}\"\n{extra}"), &[])
}

/// A client without timeouts: event streams stay open while the test acts.
fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(None).build().unwrap()
}

/// `initialize` with `capabilities`; the `Mcp-Session-Id` the gateway answered, if any.
fn initialize(gw: &Gateway, capabilities: Value, client_name: &str) -> Option<String> {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": INITIALIZE_VERSION, "capabilities": capabilities,
        "clientInfo": {"name": client_name, "version": "1"}}});
    let response = client()
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    let answer: Value = response.json().unwrap();
    assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
    session
}

/// POSTs `body` in `session`; status and body text.
fn post(gw: &Gateway, session: Option<&str>, body: &Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = client()
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", INITIALIZE_VERSION);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_string()).send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// An answer read message by message: an event stream, or one JSON body.
struct Answer {
    lines: Option<BufReader<reqwest::blocking::Response>>,
    json: Option<Value>,
}

impl Answer {
    fn next(&mut self) -> Option<Value> {
        if let Some(json) = self.json.take() {
            return Some(json);
        }
        let lines = self.lines.as_mut()?;
        let mut line = String::new();
        loop {
            line.clear();
            if lines.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return Some(serde_json::from_str(data).unwrap());
            }
        }
    }
}

/// A `tools/call` from `session` accepting event streams.
fn call(
    gw: &Gateway,
    session: Option<&str>,
    tool: &str,
    arguments: Value,
    headers: &[(&str, &str)],
) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let mut request = client()
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", INITIALIZE_VERSION);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_string()).send().unwrap();
    assert_eq!(response.status(), 200);
    let event_stream = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    if event_stream {
        Answer { lines: Some(BufReader::new(response)), json: None }
    } else {
        Answer { lines: None, json: Some(response.json().unwrap()) }
    }
}

fn text_of(result: &Value) -> String {
    result["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// The field `name=` of a fixture log line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ').find_map(|f| f.strip_prefix(&format!("{name}="))).unwrap_or_default()
}

#[test]
fn the_sdk_clients_callbacks_answer_the_fixtures_requests_and_closing_ends_the_upstream_session() {
    let (mut fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "");
    let output = Command::new(python())
        .arg(peers_dir().join("clients/relay_client.py"))
        .arg(gw.url("/mcp"))
        .output()
        .expect("the relay client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "relay client failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();

    // The caller's callbacks saw the fixture's requests, in order, with their text…
    assert_eq!(
        report["asked"],
        json!([
            {"method": "sampling/createMessage", "text": "What is the capital of Japan?"},
            {"method": "elicitation/create", "text": "Who is ordering?"},
        ]),
        "{report}"
    );
    // …and the fixture's results carry the callbacks' answers.
    let sampled = &report["sampling"];
    assert_eq!(sampled["isError"], false, "{report}");
    assert_eq!(sampled["content"][0]["text"], "LLM response: Tokyo, said the caller's model", "{report}");
    let elicited = report["elicitation"]["content"][0]["text"].as_str().unwrap();
    assert!(elicited.starts_with("User response: action=accept"), "{elicited}");
    assert!(elicited.contains("'username': 'yuki'"), "{elicited}");

    // The upstream saw one dedicated session stating the caller's capabilities, both calls in
    // it, both answers POSTed back in it, and its DELETE when the SDK closed its session.
    let handshake = fixtures.wait_line("rpc=initialize", Duration::from_secs(30));
    assert_eq!(field(&handshake, "caps"), "elicitation,sampling", "{handshake}");
    let dedicated = field(&handshake, "new_session").to_string();
    assert!(!dedicated.is_empty(), "{handshake}");
    let in_session = |rpc: &str| {
        let log = fixtures.output();
        log.lines().filter(|l| l.contains(&format!("rpc={rpc} ")) && field(l, "session") == dedicated).count()
    };
    wait_for("both calls and both answers in the dedicated session", || {
        in_session("tools/call") == 2 && in_session("response") == 2
    });
    wait_for("the upstream to see the dedicated session's DELETE", || {
        fixtures
            .output()
            .lines()
            .any(|l| l.starts_with("HTTP DELETE /mcp 200") && field(l, "session") == dedicated)
    });
    let metrics = gw.metrics();
    let relayed = |method: &str| {
        metric(
            &metrics,
            "mcp_gateway_relayed_requests_total",
            &[&format!("method=\"{method}\""), "outcome=\"answered\""],
        )
    };
    assert_eq!((relayed("sampling/createMessage"), relayed("elicitation/create")), (1.0, 1.0), "{metrics}");
    assert_eq!(metric(&metrics, "mcp_gateway_back_channel_sessions", &[]), 0.0, "closed: {metrics}");
}

#[test]
fn relayed_requests_of_a_hooked_server_reach_the_sdk_clients_callbacks_redacted() {
    // The outbound step (docs/hooks.md#what-each-kind-gives-a-hook): a server's question to the
    // caller is upstream data like its results.
    let (_fixtures, upstream) = fixtures();
    let hooks = "[[hooks]]\nname = \"places\"\nphase = \"after\"\nmatch_servers = [\"fixtures\"]\nbuiltin = \"redact\"\npatterns = [\"Japan\", \"ordering\"]\n";
    let gw = gateway(&upstream, hooks);
    let output = Command::new(python())
        .arg(peers_dir().join("clients/relay_client.py"))
        .arg(gw.url("/mcp"))
        .output()
        .expect("the relay client runs");
    assert!(output.status.success(), "relay client failed: {}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["asked"],
        json!([
            {"method": "sampling/createMessage", "text": "What is the capital of [redacted]?"},
            {"method": "elicitation/create", "text": "Who is [redacted]?"},
        ]),
        "{report}"
    );
    assert_eq!(report["sampling"]["isError"], false, "the caller's answer still goes back: {report}");
}

#[test]
fn a_caller_without_the_capability_gets_no_session_and_the_fixtures_is_error() {
    let (fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "");
    let session = initialize(&gw, json!({}), "plain-caller");
    assert!(
        session.as_deref().is_some_and(|s| s.starts_with("mcpgw-listen-")),
        "no back-channel capability: no back-channel session, only a stateless listen id for the GET stream ({session:?})"
    );
    let session =
        initialize(&gw, json!({"roots": {"listChanged": true}, "experimental": {}}), "rooted-caller");
    assert!(session.is_some_and(|s| s.starts_with("mcpgw-session-")), "roots needs a back-channel too");
    let mut answer = call(&gw, None, "test_sampling", json!({"prompt": "hi"}), &[]);
    let response = answer.next().expect("an answer");
    assert_eq!(response["result"]["isError"], true, "{response}");
    assert!(text_of(&response).contains("does not support sampling"), "{response}");
    let log = fixtures.output();
    assert!(!log.contains("rpc=initialize client=plain-caller"), "no dedicated session: {log}");
}

#[test]
fn a_caller_that_never_answers_gets_a_caller_timeout_that_the_breaker_does_not_count() {
    let (fixtures, upstream) = fixtures();
    // The attempt timeout (1.5 s, ample for the fixture's own work) is shorter than the
    // deadline (4 s): the wait for the caller is the caller's time, not an upstream timeout
    // counted by the breaker.
    let gw = gateway(&upstream, "timeout_ms = 1500\ndeadline_ms = 4000\n");
    let session = initialize(&gw, json!({"sampling": {}}), "silent-caller").expect("a session");

    let mut answer = call(&gw, Some(&session), "test_sampling", json!({"prompt": "anyone?"}), &[]);
    let asked = answer.next().expect("the relayed request");
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    let relayed_id = asked["id"].as_str().unwrap().to_string();
    assert!(relayed_id.starts_with("mcpgw-relay-"), "{asked}");
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "anyone?", "{asked}");
    // Never answered: the call ends with a timeout error naming the caller.
    let response = answer.next().expect("the call's answer");
    let data = expect_error(&response, -32001, "timeout");
    assert!(response["error"]["message"].as_str().unwrap().contains("caller did not answer"), "{response}");
    assert_eq!(data["attempts"], 1, "relayed calls are never retried: {response}");
    // A late answer finds nothing waiting.
    let late = json!({"jsonrpc": "2.0", "id": relayed_id, "result": {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}});
    let (status, body) = post(&gw, Some(&session), &late, &[]);
    assert_eq!(status, 400, "{body}");

    // The caller's own deadline (shorter than the attempt timeout) ends the wait the same way.
    let mut answer = call(
        &gw,
        Some(&session),
        "test_sampling",
        json!({"prompt": "still?"}),
        &[("x-request-timeout-ms", "2500")],
    );
    assert_eq!(answer.next().expect("the relayed request")["method"], "sampling/createMessage");
    let response = answer.next().expect("the call's answer");
    expect_error(&response, -32001, "timeout");

    let unanswered = metric(&gw.metrics(), "mcp_gateway_relayed_requests_total", &["outcome=\"unanswered\""]);
    assert_eq!(unanswered, 2.0);
    let (_, breakers) = admin_get_json(&gw, "/admin/breakers");
    assert_eq!(breakers["fixtures"]["consecutive_failures"], 0, "{breakers}");
    assert_eq!(breakers["fixtures"]["state"], "closed", "{breakers}");
    let log = fixtures.output();
    assert_eq!(log.lines().filter(|l| l.contains("rpc=tools/call ")).count(), 2, "one attempt each: {log}");
}

#[test]
fn a_server_that_refuses_the_session_era_keeps_the_normal_path_for_back_channel_callers() {
    let (fixtures, upstream) = fixtures_with(&["--refuse-initialize"]);
    let gw = gateway(&upstream, "");
    let session = initialize(&gw, json!({"sampling": {}}), "modern-bound").expect("a session");
    // The dedicated handshake is refused: the call goes the normal (2026-07-28) way, telling the
    // server what the caller's session declared (so a modern server may ask with
    // `input_required`). This fixture asks the session-era way instead, which its SDK refuses on
    // a 2026-07-28 request: the server's failure, answered as such, not "does not support
    // sampling" (the gateway's empty capabilities) and not a failure in the gateway.
    let response =
        call(&gw, Some(&session), "test_sampling", json!({"prompt": "hi"}), &[]).next().expect("an answer");
    assert!(!response.to_string().contains("does not support sampling"), "{response}");
    expect_error(&response, -32000, "upstream_protocol");
    let response = call(&gw, Some(&session), "test_simple_text", json!({}), &[]).next().expect("an answer");
    assert_eq!(text_of(&response), "This is a simple text response for testing.", "{response}");
    // The refusal is remembered for the caller: one handshake attempt, not one per call. (The
    // fixture prints in order: once both calls are in its log, any handshake is too.)
    wait_for("both calls in the fixture's log", || fixtures.output().matches("rpc=tools/call ").count() >= 2);
    let log = fixtures.output();
    let refused = log
        .lines()
        .filter(|l| l.starts_with("HTTP POST /mcp 400") && l.contains("client=modern-bound"))
        .count();
    assert_eq!(refused, 1, "{log}");
}

#[test]
fn a_caller_that_goes_away_while_asked_cancels_the_upstream_call() {
    let (mut fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "");
    let session = initialize(&gw, json!({"sampling": {}}), "leaving-caller").expect("a session");
    let mut answer = call(&gw, Some(&session), "test_sampling", json!({"prompt": "bye?"}), &[]);
    assert_eq!(answer.next().expect("the relayed request")["method"], "sampling/createMessage");
    let handshake = fixtures.wait_line("client=leaving-caller", Duration::from_secs(30));
    let dedicated = field(&handshake, "new_session").to_string();
    drop(answer); // the caller closes its stream instead of answering
    wait_for("the upstream to get notifications/cancelled in the dedicated session", || {
        fixtures
            .output()
            .lines()
            .any(|l| l.contains("rpc=notifications/cancelled ") && field(l, "session") == dedicated)
    });
    wait_for("the relayed request to be counted unanswered", || {
        metric(&gw.metrics(), "mcp_gateway_relayed_requests_total", &["outcome=\"unanswered\""]) == 1.0
    });
    let (_, breakers) = admin_get_json(&gw, "/admin/breakers");
    assert_eq!(breakers["fixtures"]["consecutive_failures"], 0, "{breakers}");
}

#[test]
fn a_caller_may_take_longer_than_the_attempt_timeout_within_its_deadline() {
    let (_fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "timeout_ms = 1500\n");
    let session = initialize(&gw, json!({"sampling": {}}), "slow-caller").expect("a session");
    let mut answer = call(&gw, Some(&session), "test_sampling", json!({"prompt": "think hard"}), &[]);
    let asked = answer.next().expect("the relayed request");
    let relayed_id = asked["id"].as_str().unwrap().to_string();
    // The caller thinks for twice the server's attempt timeout (a person answering a form takes
    // longer than any server should): the attempt's clock does not run meanwhile.
    std::thread::sleep(Duration::from_millis(3000));
    let reply = json!({"jsonrpc": "2.0", "id": relayed_id, "result": {"role": "assistant", "content": {"type": "text", "text": "slow but sure"}, "model": "m"}});
    let (status, body) = post(&gw, Some(&session), &reply, &[]);
    assert_eq!(status, 202, "{body}");
    let response = answer.next().expect("the call's answer");
    assert_eq!(text_of(&response), "LLM response: slow but sure", "{response}");
}

#[test]
fn answers_are_routed_by_the_minted_id_within_their_own_session_only() {
    let (_fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "");
    let asker = initialize(&gw, json!({"sampling": {}}), "asker").expect("a session");
    let other = initialize(&gw, json!({"sampling": {}}), "other").expect("another session");
    assert_ne!(asker, other);

    let mut answer = call(&gw, Some(&asker), "test_sampling", json!({"prompt": "2+2?"}), &[]);
    let asked = answer.next().expect("the relayed request");
    let relayed_id = asked["id"].as_str().unwrap().to_string();
    let reply = |id: &str, text: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}});
    // Another session cannot answer it, nor can an id never minted.
    let (status, body) = post(&gw, Some(&other), &reply(&relayed_id, "intruder"), &[]);
    assert_eq!(status, 400, "{body}");
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{body}");
    assert_eq!(refused["error"]["data"]["reason"], "unknown_relayed_id", "{body}");
    let (status, body) =
        post(&gw, Some(&asker), &reply("mcpgw-relay-00000000000000000000000000000000", "guess"), &[]);
    assert_eq!(status, 400, "{body}");
    // Its own session answers it, once.
    let (status, body) = post(&gw, Some(&asker), &reply(&relayed_id, "four"), &[]);
    assert_eq!(status, 202, "{body}");
    let (status, _) = post(&gw, Some(&asker), &reply(&relayed_id, "five"), &[]);
    assert_eq!(status, 400);
    let response = answer.next().expect("the call's answer");
    assert_eq!(text_of(&response), "LLM response: four", "{response}");
    assert_eq!(response["id"], 7, "{response}");
}

#[test]
fn unknown_sessions_are_404_and_delete_ends_the_session_and_its_upstream_session() {
    let (mut fixtures, upstream) = fixtures();
    let gw = gateway(&upstream, "");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, body) = post(&gw, Some("mcpgw-session-ffffffffffffffffffffffffffffffff"), &ping, &[]);
    assert_eq!(status, 404, "{body}");
    // An id the gateway never issues stays what it was before sessions: a cancellation scope.
    assert_eq!(post(&gw, Some("sess-a"), &ping, &[]).0, 200);

    let session = initialize(&gw, json!({"elicitation": {}}), "deleting-caller").expect("a session");
    let mut answer = call(&gw, Some(&session), "test_simple_text", json!({}), &[]);
    let response = answer.next().expect("an answer");
    assert_eq!(text_of(&response), "This is a simple text response for testing.", "{response}");
    let handshake = fixtures.wait_line("client=deleting-caller", Duration::from_secs(30));
    assert_eq!(field(&handshake, "caps"), "elicitation", "{handshake}");
    let dedicated = field(&handshake, "new_session").to_string();

    let deleted = client().delete(gw.url("/mcp")).header("mcp-session-id", &session).send().unwrap();
    assert_eq!(deleted.status(), 204);
    wait_for("the upstream to see the dedicated session's DELETE", || {
        fixtures
            .output()
            .lines()
            .any(|l| l.starts_with("HTTP DELETE /mcp 200") && field(l, "session") == dedicated)
    });
    assert_eq!(post(&gw, Some(&session), &ping, &[]).0, 404, "an ended session is unknown");
    // …except to the initialize that replaces it.
    let initialize_again = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": INITIALIZE_VERSION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "back"}}});
    let (status, body) = post(&gw, Some(&session), &initialize_again, &[]);
    assert_eq!(status, 200, "{body}");
    let again = client().delete(gw.url("/mcp")).header("mcp-session-id", &session).send().unwrap();
    assert_eq!(again.status(), 404);
    let sessionless = client().delete(gw.url("/mcp")).send().unwrap();
    assert_eq!(sessionless.status(), 405);
}

#[test]
fn shutdown_ends_the_dedicated_upstream_sessions() {
    let (mut fixtures, upstream) = fixtures();
    let mut gw = gateway(&upstream, "");
    let session = initialize(&gw, json!({"sampling": {}}), "left-open").expect("a session");
    let response = call(&gw, Some(&session), "test_simple_text", json!({}), &[]).next().expect("an answer");
    assert_eq!(text_of(&response), "This is a simple text response for testing.", "{response}");
    let handshake = fixtures.wait_line("client=left-open", Duration::from_secs(30));
    let dedicated = field(&handshake, "new_session").to_string();
    assert!(!dedicated.is_empty(), "{handshake}");
    assert!(!fixtures.output().contains("HTTP DELETE"), "nothing ended yet");
    // The caller never sends DELETE; SIGTERM to the gateway ends its session upstream.
    let status = gw.proc.terminate();
    assert!(status.success(), "{status}");
    wait_for("the upstream to see the dedicated session's DELETE", || {
        fixtures
            .output()
            .lines()
            .any(|l| l.starts_with("HTTP DELETE /mcp 200") && field(l, "session") == dedicated)
    });
}
