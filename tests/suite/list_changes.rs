//! List changes end to end with real processes: upstreams that change their tools (a Python
//! SDK 2.x server, `tests/peers/servers/changing_tools_server.py`, over stdio and over
//! streamable HTTP in the modern era; `server-everything` over stdio, which registers tools
//! after its handshake), the official Python SDK 2.x client in both eras waiting for
//! `notifications/tools/list_changed` through the gateway (the session era's GET stream, the
//! modern `subscriptions/listen`), raw streams for identities under a policy, a server going
//! down under `hide_unavailable_tools`, and a scripted server flooding `list_changed`
//! (`tests/peers/scripted/flooding_server.py`, which records every `tools/list` it answers).
//! Nothing waits on a clock: every step waits for what the previous one causes.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::common::{
    Gateway, Proc, TempFile, everything_entry, free_port, metric, peers_dir, python, require, wait_for,
};

fn changing_server_script() -> PathBuf {
    require(
        &peers_dir().join("servers/changing_tools_server.py"),
        "tests/peers/servers/changing_tools_server.py",
    )
}

/// `[servers.NAME]` running the changing-tools server over stdio (its tools/list log in `log`).
fn changing_stdio(name: &str, log: &Path, extra: &str) -> String {
    format!(
        "[servers.{name}]\ntransport = \"stdio\"\ncommand = {}\nargs = {}\nenv = {{ CHANGING_TOOLS_LOG = {} }}\n{extra}\n",
        json!(python().display().to_string()),
        json!([changing_server_script().display().to_string(), "stdio"]),
        json!(log.display().to_string()),
    )
}

/// The changing-tools server over streamable HTTP on a free port.
fn changing_http() -> (Proc, u16) {
    let port = free_port();
    let mut command = Command::new(python());
    command.arg(changing_server_script()).args(["http", &port.to_string()]).env("PYTHONUNBUFFERED", "1");
    (Proc::spawn_until("changing-tools (http)", command, "READY"), port)
}

/// The list-changes client (`tests/peers/clients/list_changes_client.py`) in `mode`.
fn list_changes_client(gateway: &Gateway, mode: &str) -> Proc {
    let script = require(
        &peers_dir().join("clients/list_changes_client.py"),
        "tests/peers/clients/list_changes_client.py",
    );
    let mut command = Command::new(python());
    command.arg(script).args([&gateway.url("/mcp"), mode]).env("PYTHONUNBUFFERED", "1");
    Proc::spawn(&format!("list-changes client ({mode})"), command)
}

/// The JSON line of `event` the client printed (waiting up to 120 s for it).
fn client_event(client: &mut Proc, event: &str) -> Value {
    let line = client.wait_line(&format!("\"event\": \"{event}\""), Duration::from_secs(120));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn names(event: &Value) -> Vec<String> {
    event["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
}

fn metric_sum(gateway: &Gateway, name: &str, filters: &[&str]) -> f64 {
    metric(&gateway.metrics(), name, filters)
}

/// A `tools/call` through the gateway (as `subject` when given), asserting it succeeded.
fn call_as(gateway: &Gateway, subject: Option<&str>, tool: &str, arguments: Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let headers: Vec<(&str, &str)> = subject.map(|s| vec![("x-caller-subject", s)]).unwrap_or_default();
    let (status, _, text) = gateway.post_raw(body.to_string(), &headers);
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != true, "{answer}");
}

/// A raw session-era change stream: `initialize` (as `subject`), then `GET /mcp` with the
/// session id it gave; every `data:` line is collected by a reader thread.
struct RawStream {
    session: String,
    /// The identity the stream was opened under: its session id is bound to it.
    subject: Option<String>,
    events: Arc<Mutex<Vec<Value>>>,
    ended: Arc<Mutex<bool>>,
}

impl RawStream {
    fn open(gateway: &Gateway, subject: Option<&str>) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(subject) = subject {
            headers.push(("x-caller-subject", subject));
        }
        let (status, answer_headers, text) = gateway.post_raw(init.to_string(), &headers);
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["result"]["capabilities"]["tools"]["listChanged"], true, "{answer}");
        let session = answer_headers
            .get("mcp-session-id")
            .expect("a session-era initialize gets a session id for its GET stream")
            .to_str()
            .unwrap()
            .to_string();
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
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let events = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(false));
        let (sink, done) = (events.clone(), ended.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(response).lines().map_while(Result::ok) {
                if let Some(data) = line.strip_prefix("data: ") {
                    sink.lock().unwrap().push(serde_json::from_str(data).unwrap());
                }
            }
            *done.lock().unwrap() = true;
        });
        Self { session, subject: subject.map(str::to_string), events, ended }
    }

    fn count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn wait_events(&self, n: usize, what: &str) {
        wait_for(what, || self.count() >= n);
    }

    /// Ends the stream with `DELETE /mcp` and waits for its end.
    fn end(&self, gateway: &Gateway) {
        let mut request = gateway.client.delete(gateway.url("/mcp")).header("mcp-session-id", &self.session);
        if let Some(subject) = &self.subject {
            // Only the subject the id was given to may end it (`src/ownership.rs`).
            request = request.header("x-caller-subject", subject);
        }
        let deleted = request.send().unwrap();
        assert_eq!(deleted.status(), 204);
        wait_for("the stream to end after DELETE", || *self.ended.lock().unwrap());
    }

    fn all_list_changed(&self) -> bool {
        self.events.lock().unwrap().iter().all(|e| e["method"] == "notifications/tools/list_changed")
    }
}

fn lines_of(path: &Path, line: &str) -> usize {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter(|l| *l == line).count()
}

#[test]
fn a_session_era_python_client_hears_a_stdio_upstream_change_on_its_get_stream() {
    let log = TempFile::new("changing-stdio.log");
    let config = format!("refresh_interval_secs = 3600\n\n{}", changing_stdio("changing", log.path(), ""));
    let gateway = Gateway::start(&config, &[]);
    wait_for("the changing server's tools", || gateway.tool_names().contains(&"grow".to_string()));

    let mut client = list_changes_client(&gateway, "legacy");
    let connected = client_event(&mut client, "connected");
    assert!(!names(&connected).contains(&"fresh_tool".to_string()), "{connected}");
    // The SDK opens its GET stream by itself after the handshake.
    wait_for("the client's GET stream", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) >= 1.0);

    call_as(&gateway, None, "grow", json!({"name": "fresh_tool"}));
    let changed = client_event(&mut client, "changed");
    assert!(names(&changed).contains(&"fresh_tool".to_string()), "the new tool is listed: {changed}");
    assert!(
        metric_sum(
            &gateway,
            "mcp_gateway_upstream_list_changed_total",
            &[r#"server="changing""#, r#"result="refreshed""#]
        ) >= 1.0,
        "{}",
        gateway.metrics()
    );
    assert!(metric_sum(&gateway, "mcp_gateway_list_changed_sent_total", &[]) >= 1.0);
    assert!(lines_of(log.path(), "tools/list") >= 2, "the upstream was listed again");
}

#[test]
fn a_modern_python_client_hears_a_modern_upstream_change_through_subscriptions_listen() {
    let (_server, port) = changing_http();
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.changing]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the changing server's tools", || gateway.tool_names().contains(&"grow".to_string()));
    let (_, discover) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}));
    assert_eq!(discover["result"]["capabilities"]["tools"]["listChanged"], true, "{discover}");

    // The gateway's own subscription to the upstream (its `subscriptions/listen`) is open.
    wait_for("the gateway's subscription upstream", || {
        metric_sum(&gateway, "mcp_gateway_upstream_change_streams", &[r#"server="changing""#]) == 1.0
    });
    let mut client = list_changes_client(&gateway, "2026-07-28");
    let listening = client_event(&mut client, "listening");
    assert!(!names(&listening).contains(&"modern_tool".to_string()), "{listening}");
    call_as(&gateway, None, "grow", json!({"name": "modern_tool"}));
    let changed = client_event(&mut client, "changed");
    assert!(names(&changed).contains(&"modern_tool".to_string()), "{changed}");
    assert!(
        metric_sum(&gateway, "mcp_gateway_upstream_list_changed_total", &[r#"server="changing""#]) >= 1.0,
        "the change came from the upstream's listen stream, not a refresh on the interval: {}",
        gateway.metrics()
    );
}

#[test]
fn server_everything_over_stdio_says_its_tools_changed_and_only_it_is_refreshed() {
    let demo = crate::common::Demo::http();
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n\n[servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
        demo.url(),
        everything_entry().display()
    );
    let gateway = Gateway::start(&config, &[]);
    // server-everything registers its task tool after `notifications/initialized` and says so
    // with notifications/tools/list_changed.
    wait_for("server-everything's list_changed", || {
        metric_sum(&gateway, "mcp_gateway_upstream_list_changed_total", &[r#"server="every""#]) >= 1.0
    });
    wait_for("its refresh", || {
        metric_sum(
            &gateway,
            "mcp_gateway_registry_refresh_total",
            &[r#"server="every""#, r#"outcome="success""#],
        ) >= 2.0
    });
    assert!(gateway.tool_names().contains(&"simulate-research-query".to_string()));
    assert_eq!(
        metric_sum(
            &gateway,
            "mcp_gateway_registry_refresh_total",
            &[r#"server="demo""#, r#"outcome="success""#]
        ),
        1.0,
        "the other server was not refreshed: {}",
        gateway.metrics()
    );
}

#[test]
fn a_server_going_down_under_hide_unavailable_tools_notifies_its_listeners() {
    let log = TempFile::new("changing-down.log");
    let config = format!(
        "refresh_interval_secs = 3600\nhide_unavailable_tools = true\n\n[defaults]\nreconnect_initial_ms = 600000\nreconnect_max_ms = 600000\n\n{}",
        changing_stdio("changing", log.path(), "")
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the changing server's tools", || gateway.tool_names().contains(&"grow".to_string()));
    let stream = RawStream::open(&gateway, None);
    wait_for("the stream", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) >= 1.0);
    assert_eq!(stream.count(), 0);

    // The child dies: the connection waits 10 minutes before reconnecting, so the server is
    // unavailable and its tools leave the list.
    let output = gateway.proc.output();
    let line = output.lines().find(|l| l.contains("stdio server process started")).expect("a start line");
    let pid = serde_json::from_str::<Value>(line).unwrap()["pid"].as_u64().unwrap();
    Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    stream.wait_events(1, "the list_changed for the server going down");
    assert!(stream.all_list_changed());
    assert!(!gateway.tool_names().contains(&"grow".to_string()), "hidden now");
    stream.end(&gateway);
    assert_eq!(stream.count(), 1);
}

#[test]
fn a_flood_of_list_changed_causes_a_bounded_number_of_refreshes() {
    let events = TempFile::new("flood.events");
    let script =
        require(&peers_dir().join("scripted/flooding_server.py"), "tests/peers/scripted/flooding_server.py");
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.flood]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = {}\n",
        json!([script.display().to_string(), events.arg()])
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the first tools/list", || lines_of(events.path(), "tools/list") == 1);

    call_as(&gateway, None, "flood", json!({"count": 300}));
    wait_for("every notification counted", || {
        metric_sum(&gateway, "mcp_gateway_upstream_list_changed_total", &[r#"server="flood""#]) >= 300.0
    });
    let refreshed = metric_sum(
        &gateway,
        "mcp_gateway_upstream_list_changed_total",
        &[r#"server="flood""#, r#"result="refreshed""#],
    );
    let coalesced = metric_sum(
        &gateway,
        "mcp_gateway_upstream_list_changed_total",
        &[r#"server="flood""#, r#"result="coalesced""#],
    );
    assert_eq!(refreshed + coalesced, 300.0);
    // Each refresh a notification scheduled runs once (and the list it reads never changes).
    wait_for("the scheduled refreshes", || lines_of(events.path(), "tools/list") == 1 + refreshed as usize);
    assert!(
        (1.0..=2.0).contains(&refreshed),
        "300 notifications in a burst: one debounced refresh, at most one more after the interval ({refreshed})"
    );
    assert!(lines_of(events.path(), "tools/list") <= 3);
}

#[test]
fn a_caller_whose_policy_hides_the_changed_tool_is_not_told() {
    let log = TempFile::new("changing-policy.log");
    let policy = TempFile::with(
        "list-changes.cedar",
        r#"
@id("alice-all")
permit (principal, action == Action::"call", resource) when { principal.subject == "alice" };
@id("bob-no-secrets")
permit (principal, action == Action::"call", resource)
when { principal.subject == "bob" && !(resource.name like "secret*") };
"#,
    );
    let config = format!(
        "refresh_interval_secs = 3600\n\n[metrics]\nmain_listener = \"admin\"\n[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\n\n[policy]\nfile = {}\n\n{}",
        json!(policy.arg()),
        changing_stdio("changing", log.path(), "")
    );
    let gateway = Gateway::start(&config, &[]);
    let listed = |subject: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let (_, _, text) = gateway.post_raw(body.to_string(), &[("x-caller-subject", subject)]);
        let answer: Value = serde_json::from_str(&text).unwrap();
        answer["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    wait_for("the changing server's tools", || listed("bob").contains(&"grow".to_string()));
    let alice = RawStream::open(&gateway, Some("alice"));
    let bob = RawStream::open(&gateway, Some("bob"));
    wait_for("both streams", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) >= 2.0);

    // A tool only alice may see.
    call_as(&gateway, Some("alice"), "grow", json!({"name": "secret_plan"}));
    alice.wait_events(1, "alice told of secret_plan");
    assert!(listed("alice").contains(&"secret_plan".to_string()));
    assert!(!listed("bob").contains(&"secret_plan".to_string()));
    // Then one both may see: bob's first notification is about it, not about the secret. By
    // events, not clocks: alice was told of the secret (waited for above), bob of nothing yet.
    assert_eq!(bob.count(), 0, "bob was told of a change he cannot see");
    call_as(&gateway, Some("alice"), "grow", json!({"name": "public_note"}));
    alice.wait_events(2, "alice told of public_note");
    bob.wait_events(1, "bob told of public_note");
    assert!(listed("bob").contains(&"public_note".to_string()));
    alice.end(&gateway);
    bob.end(&gateway);
    assert_eq!((alice.count(), bob.count()), (2, 1));
    assert!(alice.all_list_changed() && bob.all_list_changed());
    assert_eq!(metric_sum(&gateway, "mcp_gateway_list_changed_sent_total", &[]), 3.0);
}

#[test]
fn get_needs_a_session_the_edge_guard_applies_and_streams_are_bounded() {
    let gateway = Gateway::start_with_args("[inbound]\nmax_listen_streams = 1\n", &[], &["--demo"]);
    let get = |headers: &[(&str, &str)]| {
        let mut request = gateway.client.get(gateway.url("/mcp")).header("accept", "text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        (status, response.text().unwrap_or_default())
    };
    // No session: 405 with a JSON-RPC error.
    let (status, text) = get(&[]);
    assert_eq!(status, 405, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    // A listen id the gateway did not mint: 404 (initialize again).
    let (status, text) =
        get(&[("mcp-session-id", "mcpgw-listen-00000000000000000000000000000000-0000000000000000")]);
    assert_eq!(status, 404, "{text}");
    // The Host/Origin edge guard applies as for POST.
    let (status, _) = get(&[("origin", "http://evil.example")]);
    assert_eq!(status, 403);

    let first = RawStream::open(&gateway, None);
    wait_for("the stream", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) >= 1.0);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "second", "version": "1"}}});
    let (_, headers, _) = gateway.post_raw(init.to_string(), &[]);
    let second = headers["mcp-session-id"].to_str().unwrap().to_string();
    let (status, text) = get(&[("mcp-session-id", &second)]);
    assert_eq!(status, 503, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], -32005, "{body}");
    assert_eq!(body["error"]["data"]["limit"], json!({"key": "inbound.max_listen_streams", "value": 1}));
    // DELETE ends the first; its place is free again.
    first.end(&gateway);
    wait_for("the place freed", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) == 0.0);
    let again = RawStream::open(&gateway, None);
    again.end(&gateway);
}

#[test]
fn a_session_era_http_upstream_is_heard_on_its_get_stream() {
    let script = require(
        &peers_dir().join("scripted/session_stream_server.py"),
        "tests/peers/scripted/session_stream_server.py",
    );
    let mut command = Command::new("python3");
    command.arg("-u").arg(script);
    let (_peer, addr) = Proc::spawn_listening("session-stream-server", command);
    let stats =
        || -> Value { reqwest::blocking::get(format!("http://{addr}/_stats")).unwrap().json().unwrap() };
    let config = format!(
        "refresh_interval_secs = 3600\n\n[servers.sess]\ntransport = \"http\"\nurl = \"http://{addr}/mcp\"\n"
    );
    let gateway = Gateway::start(&config, &[]);
    wait_for("the server's tools", || gateway.tool_names().contains(&"grow".to_string()));
    // The gateway opens the GET stream of its session, since the server declared listChanged.
    wait_for("the gateway's GET stream upstream", || stats()["open"] == 1);
    wait_for("its gauge", || {
        metric_sum(&gateway, "mcp_gateway_upstream_change_streams", &[r#"server="sess""#]) == 1.0
    });
    let caller = RawStream::open(&gateway, None);
    wait_for("the caller's stream", || metric_sum(&gateway, "mcp_gateway_listen_streams", &[]) >= 1.0);

    call_as(&gateway, None, "grow", json!({"name": "from_get_stream"}));
    caller.wait_events(1, "the caller told of the change");
    assert!(gateway.tool_names().contains(&"from_get_stream".to_string()));
    assert!(
        metric_sum(&gateway, "mcp_gateway_upstream_list_changed_total", &[r#"server="sess""#]) >= 1.0,
        "{}",
        gateway.metrics()
    );
    assert_eq!(stats()["lists"], 2, "one refresh for one change");
    caller.end(&gateway);
}

#[test]
fn a_prompt_added_upstream_is_read_again_and_only_the_prompt_list_change_is_told() {
    let log = TempFile::new("changing-prompts.log");
    let config = format!("refresh_interval_secs = 3600\n\n{}", changing_stdio("changing", log.path(), ""));
    let gateway = Gateway::start(&config, &[]);
    wait_for("the changing server's prompt", || {
        let (_, answer) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}));
        answer["result"]["prompts"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == "hello"))
    });
    let stream = RawStream::open(&gateway, None);
    call_as(&gateway, None, "add_prompt", json!({"name": "fresh_prompt"}));
    stream.wait_events(1, "the prompt list change on the stream");
    let (_, answer) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}));
    let names: Vec<&str> =
        answer["result"]["prompts"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"fresh_prompt"), "{answer}");
    let got = gateway
        .rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "fresh_prompt"}}))
        .1;
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "prompt fresh_prompt", "{got}");
    // The tools did not change: only the prompts' notification was sent.
    let events: Vec<Value> = stream.events.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["method"], "notifications/prompts/list_changed", "{events:?}");
    assert!(
        metric_sum(&gateway, "mcp_gateway_upstream_list_changed_total", &[r#"server="changing""#]) >= 1.0,
        "the upstream's notification was heard"
    );
    stream.end(&gateway);
}
