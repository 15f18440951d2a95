//! Multi-round-trip requests (2026-07-28, SEP-2322) through the gateway, with the official
//! Python SDK 2.3 on both sides: a server whose tools ask the user (`Resolve` + `Elicit`) and
//! the client's model (`Sample`) (`tests/peers/mrtr_server.py`), and the SDK client answering
//! them (`tests/peers/mrtr_client.py`) in its default mode (modern: `input_required` and a
//! retry) and in legacy mode (session era: requests on the call's stream).
//!
//! Decisions proven: a modern caller's own `clientCapabilities` and `clientInfo` reach the
//! modern upstream (not the gateway's empty ones), `input_required` results and the caller's
//! retry (`inputResponses`, `requestState`) pass through untouched, the outcome is the same as
//! direct in both modes for an accepting, a refusing and a declining user; a session-era
//! caller of a 2026-07-28-only server is asked on its own stream and the gateway retries with
//! its answers; and no round of
//! such a call is ever answered from the result cache (a question is asked again; a caller
//! that never answers leaves nothing behind). A modern caller of a session-era-only server
//! (`--legacy-only`) is asked through `input_required` while the gateway holds the server's
//! request open, with the same answers as the session-era client direct; the server sees a
//! decline as a decline, an error for a question never answered, and nothing of a tampered,
//! replayed or expired `requestState`.

use std::{process::Command, time::Duration};

use crate::common::{Gateway, Proc, free_port, metric, peers_dir, python};
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

struct MrtrServer {
    _proc: Proc,
    url: String,
}

impl MrtrServer {
    fn start() -> Self {
        Self::start_with(&[])
    }

    fn start_with(options: &[&str]) -> Self {
        let port = free_port();
        let mut command = Command::new(python());
        command.arg(peers_dir().join("servers/mrtr_server.py")).arg(port.to_string()).args(options);
        let mut proc = Proc::spawn("mrtr-server", command);
        proc.wait_line("READY", Duration::from_secs(30));
        Self { _proc: proc, url: format!("http://127.0.0.1:{port}") }
    }

    /// Every `tools/call` round the server saw, in order.
    fn rounds(&self) -> Vec<Value> {
        self.control("rounds")
    }

    /// Every response a client POSTed to the server's own requests, in order.
    fn answers(&self) -> Vec<Value> {
        self.control("answers")
    }

    fn control(&self, what: &str) -> Vec<Value> {
        let list: Value =
            reqwest::blocking::get(format!("{}/control/{what}", self.url)).unwrap().json().unwrap();
        list.as_array().unwrap().clone()
    }
}

/// Runs the SDK client against `url` in `mode`, the user answering `answer`.
fn client(url: &str, mode: &str, answer: &str) -> Value {
    let output = Command::new(python())
        .arg(peers_dir().join("clients/mrtr_client.py"))
        .args([url, mode, answer])
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "mrtr_client {mode} {answer} at {url}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON line")
}

/// What the caller experienced: who asked what, and the two results' text and error flag.
fn outcome(report: &Value) -> Value {
    let result = |r: &Value| json!({"text": r["content"][0]["text"], "isError": r["isError"]});
    json!({"asked": report["asked"], "order": result(&report["order"]), "summary": result(&report["summary"])})
}

fn gateway_for(server: &MrtrServer) -> Gateway {
    gateway_with(server, "")
}

/// A gateway in front of `server`, `extra` prepended to its configuration (top-level sections).
fn gateway_with(server: &MrtrServer, extra: &str) -> Gateway {
    let config = format!(
        r#"
listen = "127.0.0.1:0"
{extra}
[defaults]
cache_ttl_ms = 60000
[servers.mrtr]
transport = "http"
url = "{}/mcp"
"#,
        server.url
    );
    Gateway::start(&config, &[])
}

#[test]
fn the_sdk_client_gets_the_same_answers_through_the_gateway_as_direct_in_both_modes() {
    let server = MrtrServer::start();
    let gateway = gateway_for(&server);
    let (direct, through) = (format!("{}/mcp", server.url), gateway.url("/mcp"));
    for mode in ["auto", "legacy"] {
        for answer in ["accept", "refuse", "decline"] {
            let expected = outcome(&client(&direct, mode, answer));
            let before = server.rounds().len();
            let got = outcome(&client(&through, mode, answer));
            assert_eq!(got, expected, "{mode}/{answer}: through the gateway as direct");
            let rounds = &server.rounds()[before..];
            if mode == "auto" {
                // Two rounds per tool: the question, then the retry carrying the answer, each
                // with the caller's own declaration.
                let shape: Vec<(String, bool, bool)> = rounds
                    .iter()
                    .map(|r| {
                        (
                            r["tool"].as_str().unwrap().to_string(),
                            r["inputResponses"].as_bool().unwrap(),
                            r["requestState"].as_bool().unwrap(),
                        )
                    })
                    .collect();
                let expected_shape: Vec<(String, bool, bool)> = ["place_order", "summarise_reviews"]
                    .iter()
                    .flat_map(|t| [(t.to_string(), false, false), (t.to_string(), true, true)])
                    .collect();
                assert_eq!(shape, expected_shape, "{rounds:?}");
                for round in rounds {
                    assert_eq!(round["protocolVersion"], "2026-07-28");
                    assert!(round["clientCapabilities"]["elicitation"].is_object(), "{round}");
                    assert!(round["clientCapabilities"]["sampling"].is_object(), "{round}");
                    assert_ne!(
                        round["clientInfo"]["name"], "mcp-gateway",
                        "the caller's clientInfo: {round}"
                    );
                }
            }
        }
    }
    let accepted = outcome(&client(&through, "auto", "accept"));
    assert_eq!(accepted["order"]["text"], "order for Naruto vol. 1 placed, confirmed by yuki");
    assert_eq!(accepted["summary"]["text"], "Naruto: five stars");
}

/// POSTs a modern `tools/call` (with the caller's declaration) to `url`.
fn modern_call(url: &str, params: Value) -> Value {
    modern_call_as(url, params, None)
}

/// [`modern_call`] with the identity header `x-caller-subject: subject`.
fn modern_call_as(url: &str, params: Value, subject: Option<&str>) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        CAPABILITIES: {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-caller", "version": "1"}
    });
    let mut request = reqwest::blocking::Client::new().post(url);
    if let Some(subject) = subject {
        request = request.header("x-caller-subject", subject);
    }
    let response = request
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", params["name"].as_str().unwrap_or_default())
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string())
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().unwrap();
    // A JSON body, or an SSE stream whose last `data:` line is the answer.
    let body = text.lines().rev().find_map(|l| l.strip_prefix("data:")).unwrap_or(&text).trim().to_string();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn questions_pass_through_and_no_round_is_answered_from_the_cache() {
    let server = MrtrServer::start();
    let gateway = gateway_for(&server);
    let through = gateway.url("/mcp");
    let call = json!({"name": "summarise_reviews", "arguments": {"title": "Naruto"}});

    // Round one: the server's question reaches the caller untouched.
    let asked = modern_call(&through, call.clone());
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{asked}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{asked}");
    let state = result["requestState"].clone();
    assert!(state.is_string(), "{asked}");
    assert_eq!(server.rounds().last().unwrap()["clientInfo"]["name"], "raw-caller");

    // The caller answers: the retry completes.
    let mut retry = call.clone();
    retry["requestState"] = state;
    retry["inputResponses"] =
        json!({key: {"role": "assistant", "content": {"type": "text", "text": "ten stars"}, "model": "m"}});
    let answered = modern_call(&through, retry);
    assert_eq!(answered["result"]["content"][0]["text"], "Naruto: ten stars", "{answered}");

    // The same first round again (a read-only tool, cache on): asked again, never the
    // answer another round got; the server saw every round.
    let again = modern_call(&through, call);
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(server.rounds().len(), 3, "every round reached the server");
    // A caller that never answers holds nothing at the gateway: nothing in flight.
    let metrics = gateway.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_in_flight ", &[]), 0.0);
}

#[test]
fn a_well_formed_question_passes_a_servers_after_hooks_redacted_and_its_answer_meets_them() {
    // The outbound step (docs/hooks.md): only `input_required` passes without a hook's decision
    // (its questions redacted by the built-in hooks); the final result of the retry meets the
    // hooks as any result does.
    let server = MrtrServer::start();
    let hooks = "[[hooks]]\nname = \"stars\"\nphase = \"after\"\nmatch_servers = [\"mrtr\"]\nbuiltin = \"redact\"\npatterns = [\"ten stars\", \"Naruto\"]\n";
    let gateway = gateway_with(&server, hooks);
    let through = gateway.url("/mcp");
    let call = json!({"name": "summarise_reviews", "arguments": {"title": "Naruto"}});
    let asked = modern_call(&through, call.clone());
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let key = result["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).expect("a question");
    // What it asks is the server's words: redacted as a relayed request's are.
    let question = &result["inputRequests"][&key]["params"]["messages"][0]["content"]["text"];
    assert_eq!(question, "Summarise reviews of [redacted]", "{asked}");
    let mut retry = call;
    retry["requestState"] = result["requestState"].clone();
    retry["inputResponses"] =
        json!({key: {"role": "assistant", "content": {"type": "text", "text": "ten stars"}, "model": "m"}});
    let answered = modern_call(&through, retry);
    assert_eq!(answered["result"]["content"][0]["text"], "[redacted]: [redacted]", "{answered}");
}

#[test]
fn a_session_era_caller_of_a_modern_only_server_is_asked_on_its_stream() {
    let server = MrtrServer::start_with(&["--modern-only"]);
    let gateway = gateway_for(&server);
    let (direct, through) = (format!("{}/mcp", server.url), gateway.url("/mcp"));
    for answer in ["accept", "refuse", "decline"] {
        // The modern client direct is the reference; the session-era client cannot reach
        // this server direct at all, and through the gateway must get the same answers.
        let expected = outcome(&client(&direct, "auto", answer));
        let before = server.rounds().len();
        let got = outcome(&client(&through, "legacy", answer));
        assert_eq!(got, expected, "legacy/{answer} through the gateway as modern direct");
        let rounds = &server.rounds()[before..];
        let retries: Vec<bool> = rounds.iter().map(|r| r["inputResponses"].as_bool().unwrap()).collect();
        assert_eq!(
            retries,
            [false, true, false, true],
            "a question, then the retry with the answer: {rounds:?}"
        );
        for round in rounds {
            // What the caller's session declared at initialize, told to the modern server.
            assert!(round["clientCapabilities"]["elicitation"].is_object(), "{round}");
            assert!(round["clientCapabilities"]["sampling"].is_object(), "{round}");
            assert_ne!(round["clientInfo"]["name"], "mcp-gateway", "{round}");
        }
    }
}

#[test]
fn a_session_era_caller_that_never_answers_a_modern_only_server_gets_a_timeout_and_no_retry_is_sent() {
    let server = MrtrServer::start_with(&["--modern-only"]);
    // The wait for the caller is bounded by the call's deadline (4 s), longer than the
    // attempt timeout (1.5 s): the caller's silence is its own, never an upstream timeout.
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[servers.mrtr]\ntransport = \"http\"\nurl = \"{}/mcp\"\ntimeout_ms = 1500\ndeadline_ms = 4000\n",
        server.url
    );
    let gateway = Gateway::start(&config, &[]);
    // A guard far beyond the 4 s deadline: a wait for the caller that the deadline does not
    // bound (it once lasted until the session expired) fails here instead of passing late.
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(90)).build().unwrap();
    let post = |session: Option<&str>, body: Value| {
        let mut request = client
            .post(gateway.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.body(body.to_string()).send().unwrap()
    };
    let initialized = post(
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "silent-caller", "version": "1"}}}),
    );
    let session = initialized.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "place_order", "arguments": {"item": "Naruto vol. 1"}}});
    // The whole answer stream: the question, then (nobody answering) the call's end.
    let stream = post(Some(&session), call).text().unwrap();
    let messages: Vec<Value> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{stream}");
    assert_eq!(messages[0]["method"], "elicitation/create", "{stream}");
    let answer = &messages[1];
    assert_eq!(answer["id"], 7, "{stream}");
    assert_eq!(answer["error"]["code"], -32001, "{stream}");
    assert_eq!(answer["error"]["data"]["category"], "timeout", "{stream}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("caller did not answer"), "{answer}");
    // The server saw the first round only: no retry was made up without the caller's answer.
    let rounds = server.rounds();
    let retries: Vec<bool> = rounds.iter().map(|r| r["inputResponses"].as_bool().unwrap()).collect();
    assert_eq!(retries, [false], "{rounds:?}");
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_in_flight ", &[]), 0.0);
    let (status, breakers) = crate::common::admin_get_json(&gateway, "/admin/breakers");
    assert_eq!(status, 200, "{breakers}");
    assert_eq!(
        breakers["mrtr"]["consecutive_failures"], 0,
        "the caller's silence is not the server's: {breakers}"
    );
}

/// What the server was answered to its own requests, as comparable text (the elicitation's
/// action and content, the sampled text, an error's code).
fn answered(answers: &[Value]) -> Vec<Value> {
    answers
        .iter()
        .map(|a| match (&a["result"], &a["error"]) {
            (Value::Null, error) => json!({"error": error["code"]}),
            (result, _) if result.get("action").is_some() => {
                json!({"action": result["action"], "content": result["content"]})
            }
            (result, _) => json!({"sampled": result["content"]["text"]}),
        })
        .collect()
}

#[test]
fn a_modern_caller_of_a_session_era_only_server_is_asked_through_input_required() {
    let server = MrtrServer::start_with(&["--legacy-only"]);
    let gateway = gateway_for(&server);
    let (direct, through) = (format!("{}/mcp", server.url), gateway.url("/mcp"));
    for answer in ["accept", "refuse", "decline"] {
        // The session-era client direct is the reference (the only era this server speaks).
        let before = (server.rounds().len(), server.answers().len());
        let expected = outcome(&client(&direct, "legacy", answer));
        let expected_answers = answered(&server.answers()[before.1..]);
        for mode in ["auto", "legacy"] {
            let before = (server.rounds().len(), server.answers().len());
            let got = outcome(&client(&through, mode, answer));
            assert_eq!(
                got, expected,
                "{mode}/{answer}: through the gateway as the session-era client direct"
            );
            assert_eq!(
                answered(&server.answers()[before.1..]),
                expected_answers,
                "{mode}/{answer}: the server was answered what the direct client answered it"
            );
            // One session-era call per tool: the caller's retry answered the held request,
            // it never became a second call.
            let rounds = &server.rounds()[before.0..];
            let tools: Vec<&str> = rounds.iter().map(|r| r["tool"].as_str().unwrap()).collect();
            assert_eq!(tools, ["place_order", "summarise_reviews"], "{mode}/{answer}: {rounds:?}");
            for round in rounds {
                assert!(round["protocolVersion"].is_null(), "session era: {round}");
                assert_eq!(round["inputResponses"], false, "{round}");
            }
        }
        if answer == "decline" {
            assert_eq!(
                expected_answers[0],
                json!({"action": "decline", "content": null}),
                "{expected_answers:?}"
            );
        }
    }
    let accepted = outcome(&client(&through, "auto", "accept"));
    assert_eq!(accepted["order"]["text"], "order for Naruto vol. 1 placed, confirmed by yuki");
    assert_eq!(accepted["summary"]["text"], "Naruto: five stars");
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_in_flight ", &[]), 0.0);
}

/// The `error.data` of a JSON-RPC error answer.
fn refused(answer: &Value) -> (i64, String) {
    let error = &answer["error"];
    (
        error["code"].as_i64().unwrap_or_default(),
        error["data"]["reason"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn a_modern_caller_that_never_answers_leaves_the_server_an_error_and_nothing_held() {
    let server = MrtrServer::start_with(&["--legacy-only"]);
    let gateway = gateway_with(&server, "[inbound]\nheld_exchange_ttl_ms = 1000");
    let through = gateway.url("/mcp");
    let call = json!({"name": "summarise_reviews", "arguments": {"title": "Naruto"}});
    let asked = modern_call(&through, call.clone());
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let (_, request) = result["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{asked}");
    assert!(request["params"]["maxTokens"].is_number(), "the 2026-07-28 shape: {asked}");
    let state = result["requestState"].as_str().expect("a requestState").to_string();
    assert!(state.starts_with("mcpgw-state."), "{state}");
    // Nobody answers: once the question expires, the server gets an error for its request.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while server.answers().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the server was never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(answered(&server.answers()), [json!({"error": -32001})]);
    // A retry after that is refused by the gateway; the server saw one call and one answer.
    let mut late = call;
    late["requestState"] = json!(state);
    late["inputResponses"] =
        json!({"mcpgw-input": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});
    let answer = modern_call(&through, late);
    assert_eq!(refused(&answer), (-32602, "request_state_expired".to_string()), "{answer}");
    assert_eq!((server.rounds().len(), server.answers().len()), (1, 1));
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_in_flight ", &[]), 0.0);
}

#[test]
fn tampered_replayed_and_over_the_bound_states_never_reach_the_server() {
    let server = MrtrServer::start_with(&["--legacy-only"]);
    let gateway = gateway_with(
        &server,
        "[inbound]\nmax_held_exchanges = 1\n[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"",
    );
    let through = gateway.url("/mcp");
    let call = json!({"name": "summarise_reviews", "arguments": {"title": "Naruto"}});
    let asked = modern_call_as(&through, call.clone(), Some("alice"));
    let state = asked["result"]["requestState"].as_str().expect("a requestState").to_string();
    let key = asked["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let retry = |state: &str| {
        let mut retry = call.clone();
        retry["requestState"] = json!(state);
        retry["inputResponses"] = json!({&key: {"role": "assistant", "content": {"type": "text", "text": "ten stars"}, "model": "m"}});
        retry
    };
    // The bound: alice's exchange is held, so another call that may be asked is refused.
    let over = modern_call_as(&through, call.clone(), Some("carol"));
    assert_eq!(over["error"]["code"], -32005, "{over}");
    assert_eq!(over["error"]["data"]["category"], "overloaded", "{over}");
    // One character of the state changed.
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() - 5;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let answer = modern_call_as(&through, retry(&tampered), Some("alice"));
    assert_eq!(refused(&answer), (-32602, "request_state_forged".to_string()), "{answer}");
    assert_eq!(answer["error"]["data"]["category"], "bad_input", "{answer}");
    // Alice's state replayed by bob.
    let answer = modern_call_as(&through, retry(&state), Some("bob"));
    assert_eq!(refused(&answer), (-32602, "request_state_other_caller".to_string()), "{answer}");
    // Alice's state on another call.
    let mut other = retry(&state);
    other["arguments"]["title"] = json!("One Piece");
    let answer = modern_call_as(&through, other, Some("alice"));
    assert_eq!(refused(&answer), (-32602, "request_state_other_call".to_string()), "{answer}");
    assert_eq!(
        (server.rounds().len(), server.answers().len()),
        (1, 0),
        "nothing refused reached the server (carol's call was refused before it was sent)"
    );
    // Alice herself answers: the held request gets her answer and the call completes.
    let answer = modern_call_as(&through, retry(&state), Some("alice"));
    assert_eq!(answer["result"]["content"][0]["text"], "Naruto: ten stars", "{answer}");
    assert_eq!(answered(&server.answers()), [json!({"sampled": "ten stars"})]);
    // Once: the same state again is refused.
    let again = modern_call_as(&through, retry(&state), Some("alice"));
    assert_eq!(refused(&again), (-32602, "request_state_unknown".to_string()), "{again}");
    assert_eq!((server.rounds().len(), server.answers().len()), (1, 1));
}
