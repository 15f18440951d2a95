//! Resource subscriptions through the gateway, end to end with real processes: the official
//! Python SDK 2.x client subscribing in both eras (the session era's `resources/subscribe` with
//! its GET stream, the modern `subscriptions/listen` with `resourceSubscriptions`), raw
//! session-era callers, the reference "everything" server over stdio, streamable HTTP and
//! HTTP+SSE (its
//! `toggle-subscriber-updates` tool sends an update for each subscribed URI at once), and a
//! fixture server on the official Python SDK (`tests/peers/servers/subscribing_server.py`) that
//! records every `resources/subscribe` and `resources/unsubscribe` it answers, so the tests
//! count what the upstream saw. Nothing waits on a clock: every step waits for what the
//! previous one causes.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::common::{
    Gateway, Proc, TempFile, everything_entry, everything_server, everything_sse_server, expect_error,
    free_port, metric, peers_dir, python, require, wait_for,
};

fn fixture_script() -> PathBuf {
    require(&peers_dir().join("servers/subscribing_server.py"), "tests/peers/servers/subscribing_server.py")
}

/// `[servers.NAME]` running the subscribing fixture over stdio (what it saw in `log`).
fn fixture_stdio(name: &str, log: &Path) -> String {
    format!(
        "[servers.{name}]\ntransport = \"stdio\"\ncommand = {}\nargs = {}\nenv = {{ SUBSCRIBING_LOG = {} }}\n",
        json!(python().display().to_string()),
        json!([fixture_script().display().to_string(), "stdio"]),
        json!(log.display().to_string()),
    )
}

/// How many times the fixture saw `line` (`subscribe URI`, `unsubscribe URI`).
fn seen(log: &Path, line: &str) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| *l == line).count()
}

/// The subscribe client (`tests/peers/clients/subscribe_client.py`) in `mode`.
fn subscribe_client(gateway: &Gateway, mode: &str, args: &[&str]) -> Proc {
    let script =
        require(&peers_dir().join("clients/subscribe_client.py"), "tests/peers/clients/subscribe_client.py");
    let mut command = Command::new(python());
    command.arg(script).args([gateway.url("/mcp").as_str(), mode]).args(args).env("PYTHONUNBUFFERED", "1");
    Proc::spawn(&format!("subscribe client ({mode})"), command)
}

/// The JSON line of the client's `event` containing `needle` (waiting up to 120 s for it).
fn client_event(client: &mut Proc, needle: &str) -> Value {
    let line = client.wait_line(needle, Duration::from_secs(120));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn updates(gateway: &Gateway, server: &str, result: &str) -> f64 {
    metric(
        &gateway.metrics(),
        "mcp_gateway_resource_updates_total",
        &[&format!("server=\"{server}\""), &format!("result=\"{result}\"")],
    )
}

fn upstream_subscriptions(gateway: &Gateway, server: &str) -> f64 {
    metric(&gateway.metrics(), "mcp_gateway_resource_subscriptions", &[&format!("server=\"{server}\"")])
}

/// Waits until the gateway lists the fixture's resources (its surface is known: subscriptions
/// are routed by it).
fn wait_resources(gateway: &Gateway, headers: &[(&str, &str)]) {
    wait_for("the fixture's resources", || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"});
        let (_, _, text) = gateway.post_raw(body.to_string(), headers);
        serde_json::from_str::<Value>(&text)
            .is_ok_and(|a| a["result"]["resources"].as_array().is_some_and(|r| r.len() == 4))
    });
}

/// A tool call through the gateway, asserting it succeeded.
fn call(gateway: &Gateway, tool: &str, arguments: Value) {
    let answer = gateway.call(tool, arguments);
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != true, "{answer}");
}

/// A raw session-era caller: `initialize` (as `subject`), `GET /mcp` with the session id it got
/// (every `data:` line collected by a reader thread), and its requests on that session.
struct RawCaller {
    session: String,
    subject: Option<String>,
    events: Arc<Mutex<Vec<Value>>>,
}

impl RawCaller {
    fn open(gateway: &Gateway, subject: Option<&str>) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
        let headers: Vec<(&str, &str)> = subject.map(|s| vec![("x-caller-subject", s)]).unwrap_or_default();
        let (status, answer_headers, text) = gateway.post_raw(init.to_string(), &headers);
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["result"]["capabilities"]["resources"]["subscribe"], true, "{answer}");
        let session = answer_headers["mcp-session-id"].to_str().unwrap().to_string();
        let client = reqwest::blocking::Client::builder().timeout(None::<Duration>).build().unwrap();
        let mut request = client
            .get(gateway.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(subject) = subject {
            request = request.header("x-caller-subject", subject);
        }
        let response = request.send().unwrap();
        assert_eq!(response.status(), 200);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(response).lines().map_while(Result::ok) {
                if let Some(data) = line.strip_prefix("data: ") {
                    sink.lock().unwrap().push(serde_json::from_str(data).unwrap());
                }
            }
        });
        Self { session, subject: subject.map(str::to_string), events }
    }

    /// `method` with `params` on the caller's session; the JSON-RPC answer.
    fn rpc(&self, gateway: &Gateway, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut headers =
            vec![("mcp-session-id", self.session.as_str()), ("mcp-protocol-version", "2025-11-25")];
        if let Some(subject) = &self.subject {
            headers.push(("x-caller-subject", subject.as_str()));
        }
        let (status, _, text) = gateway.post_raw(body.to_string(), &headers);
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// The URIs of the `notifications/resources/updated` received so far, in order.
    fn updated(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["method"] == "notifications/resources/updated")
            .map(|e| e["params"]["uri"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

#[test]
fn two_callers_make_one_upstream_subscription_and_only_the_last_one_leaving_unsubscribes() {
    let log = TempFile::new("subscribing-fanout.log");
    let config = format!("refresh_interval_secs = 3600\n\n{}", fixture_stdio("fix", log.path()));
    let gateway = Gateway::start(&config, &[]);
    wait_resources(&gateway, &[]);

    // A raw caller subscribes first: the gateway subscribes upstream before it answers.
    let raw = RawCaller::open(&gateway, None);
    wait_for("the raw caller's GET stream", || {
        metric(&gateway.metrics(), "mcp_gateway_listen_streams", &[]) >= 1.0
    });
    let answer = raw.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://a"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(seen(log.path(), "subscribe watch://a"), 1);

    // The official SDK client subscribes to the same URI (and to b): no second subscription
    // upstream for a.
    let mut sdk = subscribe_client(&gateway, "legacy", &["watch://a", "watch://b", "--until", "watch://b"]);
    client_event(&mut sdk, "\"subscribed\"");
    assert_eq!(seen(log.path(), "subscribe watch://a"), 1, "one upstream subscription for two callers");
    assert_eq!(seen(log.path(), "subscribe watch://b"), 1);
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 2.0);

    // One update, both callers.
    call(&gateway, "touch", json!({"uri": "watch://a"}));
    let got = client_event(&mut sdk, "\"uri\": \"watch://a\"");
    assert_eq!(got, json!({"event": "updated", "uri": "watch://a"}));
    wait_for("the raw caller's update", || raw.updated() == ["watch://a"]);
    assert_eq!(updates(&gateway, "fix", "relayed"), 2.0);

    // An update nobody subscribed to is dropped, and counted.
    call(&gateway, "touch", json!({"uri": "watch://c"}));
    wait_for("the unsubscribed update counted", || updates(&gateway, "fix", "unsubscribed") == 1.0);

    // One caller leaves: the other still wants a, so nothing is sent upstream.
    let answer = raw.rpc(&gateway, "resources/unsubscribe", json!({"uri": "watch://a"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(seen(log.path(), "unsubscribe watch://a"), 0);
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 2.0);

    // The SDK client gets b's update and leaves (its GET stream closes, its session ends): the
    // last subscriber of a and of b is gone, each is unsubscribed upstream exactly once.
    call(&gateway, "touch", json!({"uri": "watch://b"}));
    client_event(&mut sdk, "\"uri\": \"watch://b\"");
    wait_for("the upstream unsubscriptions", || {
        seen(log.path(), "unsubscribe watch://a") == 1 && seen(log.path(), "unsubscribe watch://b") == 1
    });
    wait_for("the SDK client to exit", || sdk.child.try_wait().unwrap().is_some());
    assert!(sdk.child.try_wait().unwrap().is_some_and(|s| s.success()), "{}", sdk.output());
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 0.0);
    assert_eq!(raw.updated(), ["watch://a"], "the raw caller unsubscribed before b's update");
    assert_eq!(updates(&gateway, "fix", "relayed"), 3.0);
    assert_eq!((seen(log.path(), "subscribe watch://a"), seen(log.path(), "unsubscribe watch://a")), (1, 1));
}

#[test]
fn the_policy_the_bounds_and_a_missing_back_channel_are_refused_with_precise_errors() {
    let log = TempFile::new("subscribing-policy.log");
    let policy = TempFile::with(
        "subscriptions.cedar",
        r#"
@id("tools")
permit (principal, action == Action::"call", resource);
@id("no-secrets")
permit (principal, action == Action::"read", resource)
when { principal.subject == "alice" || resource.uri != "watch://secret" };
"#,
    );
    let config = format!(
        "refresh_interval_secs = 3600\n\n[inbound]\nmax_resource_subscriptions_per_caller = 2\n\n[metrics]\nmain_listener = \"admin\"\n[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\n\n[policy]\nfile = {}\nreload_secs = 1\n\n{}",
        json!(policy.arg()),
        fixture_stdio("fix", log.path())
    );
    let gateway = Gateway::start(&config, &[]);
    let bob_headers = [("x-caller-subject", "bob")];
    wait_resources(&gateway, &[("x-caller-subject", "alice")]);

    // Without a session (no back-channel): refused, naming what is missing.
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "watch://a"}});
    let (_, _, text) = gateway.post_raw(body.to_string(), &bob_headers);
    let answer: Value = serde_json::from_str(&text).unwrap();
    expect_error(&answer, -32600, "invalid_request");
    assert!(answer["error"]["message"].as_str().unwrap().contains("GET /mcp"), "{answer}");

    let bob = RawCaller::open(&gateway, Some("bob"));
    // A URI no server serves: the spec's resource-not-found.
    let unknown = bob.rpc(&gateway, "resources/subscribe", json!({"uri": "nowhere://x"}));
    expect_error(&unknown, -32002, "resource_not_found");
    // The policy denies bob the secret: forbidden, and the upstream never hears of it.
    let denied = bob.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://secret"}));
    let data = expect_error(&denied, -32008, "forbidden");
    assert_eq!(data["rule"], "default_deny", "{denied}");
    assert_eq!(seen(log.path(), "subscribe watch://secret"), 0);
    // Two subscriptions are bob's bound; the third is refused with the key named.
    for uri in ["watch://a", "watch://b"] {
        let answer = bob.rpc(&gateway, "resources/subscribe", json!({"uri": uri}));
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    let over = bob.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://c"}));
    let data = expect_error(&over, -32005, "overloaded");
    assert_eq!(data["limit"], json!({"key": "inbound.max_resource_subscriptions_per_caller", "value": 2}));
    assert_eq!(seen(log.path(), "subscribe watch://c"), 0);
    // A 2026-07-28 caller listing more URIs than the bound in one subscriptions/listen: the
    // request is refused whole, the key named; a session-era method is not its way.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let listen = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {"_meta": meta,
        "notifications": {"resourceSubscriptions": ["watch://a", "watch://b", "watch://c"]}}});
    let modern_headers = [
        ("x-caller-subject", "bob"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let (_, _, text) = gateway.post_raw(listen.to_string(), &modern_headers);
    let refused: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let data = expect_error(&refused, -32005, "overloaded");
    assert_eq!(data["limit"]["key"], "inbound.max_resource_subscriptions_per_caller", "{refused}");
    let modern_subscribe = json!({"jsonrpc": "2.0", "id": 8, "method": "resources/subscribe",
        "params": {"_meta": meta, "uri": "watch://a"}});
    let mut headers = modern_headers;
    headers[3] = ("mcp-method", "resources/subscribe");
    let (_, _, text) = gateway.post_raw(modern_subscribe.to_string(), &headers[..]);
    let refused: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    expect_error(&refused, -32601, "method_not_found");
    assert!(refused["error"]["message"].as_str().unwrap().contains("resourceSubscriptions"), "{refused}");
    assert_eq!(seen(log.path(), "subscribe watch://c"), 0);

    // Subscribing again to what it holds is not one more.
    let again = bob.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://a"}));
    assert_eq!(again["result"], json!({}), "{again}");

    // Alice may watch the secret; bob receives none of its updates: the secret's update comes
    // first from the one connection, a's after it, so bob's stream holds only a's.
    let alice = RawCaller::open(&gateway, Some("alice"));
    let answer = alice.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://secret"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    gateway.call_with("touch", json!({"uri": "watch://secret"}), &bob_headers);
    gateway.call_with("touch", json!({"uri": "watch://a"}), &bob_headers);
    wait_for("bob's update of a", || bob.updated() == ["watch://a"]);
    wait_for("alice's update of the secret", || alice.updated() == ["watch://secret"]);
    assert_eq!(bob.updated(), ["watch://a"]);

    // The policy is asked again for every update: once a reload denies alice the secret, its
    // updates stop reaching her (dropped, counted `denied`) while b's still come.
    let answer = alice.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://b"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    let staged = policy.path().with_extension("staged");
    std::fs::write(
        &staged,
        r#"
@id("tools")
permit (principal, action == Action::"call", resource);
@id("no-secrets-at-all")
permit (principal, action == Action::"read", resource) when { resource.uri != "watch://secret" };
"#,
    )
    .unwrap();
    std::fs::rename(&staged, policy.path()).unwrap();
    wait_for("the reloaded policy to hide the secret from alice", || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"});
        let (_, _, text) = gateway.post_raw(body.to_string(), &[("x-caller-subject", "alice")]);
        serde_json::from_str::<Value>(&text)
            .is_ok_and(|a| a["result"]["resources"].as_array().is_some_and(|r| r.len() == 3))
    });
    gateway.call_with("touch", json!({"uri": "watch://secret"}), &bob_headers);
    gateway.call_with("touch", json!({"uri": "watch://b"}), &bob_headers);
    wait_for("alice's update of b", || alice.updated().len() == 2);
    assert_eq!(alice.updated(), ["watch://secret", "watch://b"]);
    assert_eq!(updates(&gateway, "fix", "denied"), 1.0);
}

#[test]
fn a_modern_python_client_subscribes_through_subscriptions_listen() {
    let log = TempFile::new("subscribing-modern.log");
    let config = format!("refresh_interval_secs = 3600\n\n{}", fixture_stdio("fix", log.path()));
    let gateway = Gateway::start(&config, &[]);
    wait_resources(&gateway, &[]);
    let (_, discover) = gateway
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}));
    assert_eq!(discover["result"]["capabilities"]["resources"]["subscribe"], true, "{discover}");

    // The acknowledgment lists what the gateway honours: not a URI no server serves.
    let mut client = subscribe_client(&gateway, "2026-07-28", &["watch://a", "nowhere://x"]);
    let subscribed = client_event(&mut client, "\"subscribed\"");
    assert_eq!(subscribed["honored"], json!(["watch://a"]), "{subscribed}");
    assert_eq!(seen(log.path(), "subscribe watch://a"), 1);
    call(&gateway, "touch", json!({"uri": "watch://a"}));
    assert_eq!(client_event(&mut client, "\"updated\""), json!({"event": "updated", "uri": "watch://a"}));
    // The stream gone, the subscription is gone upstream.
    wait_for("the upstream unsubscription", || seen(log.path(), "unsubscribe watch://a") == 1);
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 0.0);
}

#[test]
fn a_restarted_server_is_subscribed_again_and_its_updates_keep_coming() {
    let log = TempFile::new("subscribing-restart.log");
    let config = format!("refresh_interval_secs = 3600\n\n{}", fixture_stdio("fix", log.path()));
    let gateway = Gateway::start(&config, &[]);
    wait_resources(&gateway, &[]);
    let raw = RawCaller::open(&gateway, None);
    let answer = raw.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://a"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(seen(log.path(), "subscribe watch://a"), 1);

    // The server process exits; the gateway starts it again and subscribes it again.
    let _ = gateway.call("crash", json!({}));
    wait_for("the restarted server subscribed again", || seen(log.path(), "subscribe watch://a") == 2);
    call(&gateway, "touch", json!({"uri": "watch://a"}));
    wait_for("the update from the restarted server", || raw.updated() == ["watch://a"]);
    assert_eq!(seen(log.path(), "unsubscribe watch://a"), 0);
}

#[test]
fn a_modern_upstream_gets_the_uris_in_its_subscriptions_listen() {
    // The SDK's streamable-HTTP server answers `server/discover` with 2026-07-28: the gateway
    // speaks the modern era to it, where `resources/subscribe` does not exist.
    let port = free_port();
    let mut command = Command::new(python());
    command.arg(fixture_script()).args(["http", &port.to_string()]).env("PYTHONUNBUFFERED", "1");
    let _server = Proc::spawn_until("subscribing (http)", command, "READY");
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.fix]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gateway = Gateway::start(&config, &[]);
    wait_resources(&gateway, &[]);
    let raw = RawCaller::open(&gateway, None);
    let answer = raw.rpc(&gateway, "resources/subscribe", json!({"uri": "watch://a"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 1.0);
    // The gateway's subscriptions/listen to the server is opened again with the URI; an update
    // published before it is open reaches nobody, so the test touches until one arrives.
    wait_for("an update through the gateway's listen stream", || {
        call(&gateway, "touch", json!({"uri": "watch://a"}));
        raw.updated().first().is_some_and(|u| u == "watch://a")
    });
    // The last subscriber gone, the URI leaves the listen stream's list.
    let answer = raw.rpc(&gateway, "resources/unsubscribe", json!({"uri": "watch://a"}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert_eq!(upstream_subscriptions(&gateway, "fix"), 0.0);
}

/// The everything server's updates reach the official SDK client through a gateway whose
/// `config` names it `every`; `ready` is what to wait for before asking for an update.
fn everything_updates_reach_a_python_client(gateway: &Gateway, ready: impl Fn() -> bool) {
    wait_for("the everything server's resources", || {
        let (_, answer) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}));
        answer["result"]["resources"].as_array().is_some_and(|r| !r.is_empty())
    });
    let (_, answer) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}));
    let uri = answer["result"]["resources"][0]["uri"].as_str().unwrap().to_string();
    wait_for("the upstream's update channel", &ready);
    let mut client = subscribe_client(gateway, "legacy", &[uri.as_str()]);
    client_event(&mut client, "\"subscribed\"");
    assert_eq!(upstream_subscriptions(gateway, "every"), 1.0);
    // The tool sends an update for every URI the gateway's session subscribed to, at once.
    call(gateway, "toggle-subscriber-updates", json!({}));
    assert_eq!(client_event(&mut client, "\"updated\""), json!({"event": "updated", "uri": uri}));
    wait_for("the last subscriber gone", || upstream_subscriptions(gateway, "every") == 0.0);
    assert!(updates(gateway, "every", "relayed") >= 1.0);
}

#[test]
fn the_everything_server_over_stdio_sends_updates_to_a_python_client() {
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n",
        json!(everything_entry().display().to_string())
    );
    let gateway = Gateway::start(&config, &[]);
    everything_updates_reach_a_python_client(&gateway, || true);
}

#[test]
fn the_everything_server_over_streamable_http_sends_updates_on_the_gateways_session() {
    let port = free_port();
    let _every = everything_server(port);
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.every]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gateway = Gateway::start(&config, &[]);
    // The session's GET stream carries the updates: it is open before one is asked for.
    everything_updates_reach_a_python_client(&gateway, || {
        metric(&gateway.metrics(), "mcp_gateway_upstream_change_streams", &["server=\"every\""]) == 1.0
    });
}

#[test]
fn the_everything_server_over_http_sse_sends_updates_on_the_gateways_connection() {
    let port = free_port();
    let _every = everything_sse_server(port);
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.every]\ntransport = \"sse\"\nurl = \"http://127.0.0.1:{port}/sse\"\n"
    );
    let gateway = Gateway::start(&config, &[]);
    everything_updates_reach_a_python_client(&gateway, || true);
}
