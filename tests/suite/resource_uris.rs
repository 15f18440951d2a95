//! Resource URIs as hostile input, against a real TypeScript-SDK `McpServer`
//! (`tests/peers/servers/resolving_resources_server.mjs`, npm `@modelcontextprotocol/sdk`) that
//! resolves every URI it is sent with `new URL` — so `file:///public/../private/key` reads
//! `file:///private/key` there — and records the raw `params.uri` of every read and subscribe.
//! Checked: dotted, percent-encoded and re-cased spellings of an excluded URI reach it through
//! none of an endpoint's `exclude_resources`, `[resources] hide` and a Cedar `forbid`, on
//! `resources/read`, `resources/subscribe` and `subscriptions/listen`; what cannot be
//! normalised safely is refused; what is served, subscribed and unsubscribed is forwarded in
//! its canonical form, and an update relayed names it; and a URI one server lists and
//! another's template matches is a reported collision.

use std::{
    io::{BufRead, BufReader},
    time::Duration,
};

use serde_json::{Value, json};

use crate::common::*;

fn peer_script() -> String {
    require(
        &peers_dir().join("servers/resolving_resources_server.mjs"),
        "tests/peers/servers/resolving_resources_server.mjs",
    )
    .display()
    .to_string()
}

/// `[servers.NAME]` running the peer over stdio in `role`.
fn peer(name: &str, role: &str) -> String {
    format!(
        "[servers.{name}]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = {}\n",
        json!([peer_script(), role])
    )
}

/// Spellings of `file:///private/key` a prefix on the raw text would not see, and that the
/// peer (`new URL`) resolves to it.
const RESOLVING_TO_PRIVATE: [&str; 8] = [
    "file:///public/../private/key",
    "file:///./private/key",
    "file:///public/%2e%2e/private/key",
    "file:///public/%2E./private/key",
    "FILE:///private/key",
    "file:///%70rivate/key",
    "file:/public/../private/key",
    "file://LocalHost/private/key",
];

/// Spellings with no canonical form: refused before any decision (`reason`).
const REFUSED: [(&str, &str); 4] = [
    ("file:///public\\..\\private/key", "backslash"),
    ("file:///public/%2F..%2Fprivate/key", "encoded_separator"),
    ("file:///public/.\t./private/key", "control_character"),
    ("file:private/key", "missing_authority"),
];

fn rpc_at(gw: &Gateway, path: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request =
        gw.client.post(gw.url(path)).header("content-type", "application/json").body(body.to_string());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().expect("gateway answers");
    let text = response.text().unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("non-JSON answer ({e}): {text}"))
}

/// What the peer was sent: its raw `resources/read` and `resources/subscribe` URIs.
fn seen(gw: &Gateway) -> (Vec<String>, Vec<String>) {
    let answer = gw.call("seen_files", json!({}));
    let text = result_text(&answer);
    let seen: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {answer}"));
    let list =
        |key: &str| seen[key].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect();
    (list("reads"), list("subscribes"))
}

fn wait_listed(gw: &Gateway) {
    wait_for("the peer's resources", || {
        let answer = rpc_at(gw, "/mcp", "resources/list", json!({}), &[]);
        answer["result"]["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["uri"] == "file:///public/readme"))
    });
}

/// Reads every hostile spelling through `path`: each is refused (`code`, `category`), the
/// public readme read through dots is served in its canonical form, and the peer was sent
/// that canonical form only.
fn reads_reach_no_private_key(gw: &Gateway, path: &str, code: i64, category: &str) {
    for uri in RESOLVING_TO_PRIVATE {
        let answer = rpc_at(gw, path, "resources/read", json!({"uri": uri}), &[]);
        assert!(!answer.to_string().contains("PRIVATE-KEY-CONTENTS"), "{uri} read the key: {answer}");
        expect_error(&answer, code, category);
    }
    for (uri, reason) in REFUSED {
        let answer = rpc_at(gw, path, "resources/read", json!({"uri": uri}), &[]);
        assert_eq!(expect_error(&answer, -32602, "bad_input")["reason"], reason, "{uri}: {answer}");
    }
    let dotted = rpc_at(gw, path, "resources/read", json!({"uri": "file:///public/sub/../%72eadme"}), &[]);
    assert_eq!(dotted["result"]["contents"][0]["text"], "public readme", "{dotted}");
    let (reads, _) = seen(gw);
    assert_eq!(reads, ["file:///public/readme"], "the peer was sent the canonical form only");
}

#[test]
fn dotted_and_encoded_uris_do_not_pass_an_endpoints_exclusion() {
    let config = format!(
        "{}[endpoints.shop.select]\nexclude_resources = [\"file:///private/\"]\n",
        peer("files", "files")
    );
    let gw = Gateway::start(&config, &[]);
    wait_listed(&gw);
    reads_reach_no_private_key(&gw, "/mcp/shop", -32002, "resource_not_found");
}

#[test]
fn dotted_and_encoded_uris_do_not_pass_a_hide_prefix() {
    let config = format!("{}[resources]\nhide = [\"file:///private/\"]\n", peer("files", "files"));
    let gw = Gateway::start(&config, &[]);
    wait_listed(&gw);
    reads_reach_no_private_key(&gw, "/mcp", -32002, "resource_not_found");
    // A hide prefix not in the canonical form is refused at load, naming the form to write.
    let refused = check_config_text(&format!(
        "{}[resources]\nhide = [\"FILE:///x/../private/\"]\n",
        peer("f", "files")
    ));
    assert!(refused.contains("write \"file:///private/\""), "{refused}");
}

#[test]
fn dotted_and_encoded_uris_do_not_pass_a_cedar_forbid() {
    let policy = TempFile::with(
        "uri-canonical.cedar",
        r#"@id("tools")
permit (principal, action == Action::"call", resource);
@id("reads")
permit (principal, action == Action::"read", resource);
@id("no-private")
forbid (principal, action == Action::"read", resource) when { resource.uri like "file:///private/*" };
"#,
    );
    let config = format!("{}[policy]\nfile = {:?}\n", peer("files", "files"), policy.arg());
    let gw = Gateway::start(&config, &[]);
    wait_listed(&gw);
    reads_reach_no_private_key(&gw, "/mcp", -32008, "forbidden");
}

#[test]
fn dotted_uris_subscribe_to_nothing_excluded_in_either_era() {
    let config = format!(
        "{}[endpoints.shop.select]\nexclude_resources = [\"file:///private/\"]\n",
        peer("files", "files")
    );
    let gw = Gateway::start(&config, &[]);
    wait_listed(&gw);
    // The session era: initialize on the endpoint, subscribe on its session.
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}});
    let response = gw
        .client
        .post(gw.url("/mcp/shop"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).to_string())
        .send()
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let on_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    for uri in RESOLVING_TO_PRIVATE {
        let answer = rpc_at(&gw, "/mcp/shop", "resources/subscribe", json!({"uri": uri}), &on_session);
        expect_error(&answer, -32002, "resource_not_found");
    }
    for (uri, reason) in REFUSED {
        let answer = rpc_at(&gw, "/mcp/shop", "resources/subscribe", json!({"uri": uri}), &on_session);
        assert_eq!(expect_error(&answer, -32602, "bad_input")["reason"], reason, "{uri}: {answer}");
    }
    let public = rpc_at(
        &gw,
        "/mcp/shop",
        "resources/subscribe",
        json!({"uri": "file:///public/./readme"}),
        &on_session,
    );
    assert_eq!(public["result"], json!({}), "{public}");

    // 2026-07-28: subscriptions/listen honours the canonical form of what it may watch only.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let mut asked: Vec<&str> = RESOLVING_TO_PRIVATE.to_vec();
    asked.push("file:///public/sub/../readme");
    let listen = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"resourceSubscriptions": asked}}});
    let client = reqwest::blocking::Client::builder().timeout(None::<Duration>).build().unwrap();
    let stream = client
        .post(gw.url("/mcp/shop"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(listen.to_string())
        .send()
        .unwrap();
    let ack = BufReader::new(stream)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("data: ").map(|d| serde_json::from_str::<Value>(d).unwrap()))
        .expect("the listen stream's acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["file:///public/readme"]),
        "{ack}"
    );
    let (_, subscribes) = seen(&gw);
    assert_eq!(
        subscribes,
        ["file:///public/readme"],
        "the peer was asked to watch the canonical readme only"
    );
}

#[test]
fn updates_and_unsubscribes_name_the_canonical_uri() {
    let gw = Gateway::start(&peer("files", "files"), &[]);
    wait_listed(&gw);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}});
    let (_, headers, text) = gw.post_raw(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).to_string(),
        &[],
    );
    assert!(headers.contains_key("mcp-session-id"), "{text}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_string();
    let on_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    // The session's GET stream, every `data:` line collected.
    let client = reqwest::blocking::Client::builder().timeout(None::<Duration>).build().unwrap();
    let stream = client
        .get(gw.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let sink = events.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Some(data) = line.strip_prefix("data: ") {
                sink.lock().unwrap().push(serde_json::from_str(data).unwrap());
            }
        }
    });
    wait_for("the session's GET stream", || metric(&gw.metrics(), "mcp_gateway_listen_streams", &[]) >= 1.0);
    let subscribed =
        rpc_at(&gw, "/mcp", "resources/subscribe", json!({"uri": "file:///public/./readme"}), &on_session);
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");

    // The server names the URI in another spelling: the update reaches the subscriber, naming
    // the canonical form it subscribed to.
    let touched = gw.call("touch_files", json!({"uri": "file:///public/./readme"}));
    assert_eq!(result_text(&touched), "sent", "{touched}");
    let updated = || -> Vec<Value> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["method"] == "notifications/resources/updated")
            .cloned()
            .collect()
    };
    wait_for("the relayed update", || !updated().is_empty());
    assert_eq!(updated()[0]["params"]["uri"], "file:///public/readme", "{:?}", updated());

    // Unsubscribing in a third spelling ends the subscription, upstream too.
    let gone = rpc_at(
        &gw,
        "/mcp",
        "resources/unsubscribe",
        json!({"uri": "file:///public/sub/../readme"}),
        &on_session,
    );
    assert_eq!(gone["result"], json!({}), "{gone}");
    let answer = gw.call("seen_files", json!({}));
    let seen: Value = serde_json::from_str(&result_text(&answer)).unwrap();
    assert_eq!(seen["subscribes"], json!(["file:///public/readme"]), "{seen}");
    assert_eq!(seen["unsubscribes"], json!(["file:///public/readme"]), "{seen}");
}

#[test]
fn a_uri_one_server_lists_and_another_templates_is_a_reported_collision() {
    let config = format!("{}{}", peer("lister", "lister"), peer("templater", "templater"));
    let gw = Gateway::start(&config, &[]);
    let surface = || admin_get_json(&gw, "/admin/registry/surface").1;
    // Both surfaces known: the template is there, and the listed URI is either claimed or
    // (what a gateway without the rule did) served as the lister's.
    wait_for("both servers' surfaces", || {
        let s = surface();
        let listed = s["resources"].as_array().is_some_and(|r| !r.is_empty());
        let claimed = s["collisions"].as_array().is_some_and(|c| !c.is_empty());
        s["resource_templates"].as_array().is_some_and(|t| !t.is_empty()) && (listed || claimed)
    });
    let collisions = surface()["collisions"].clone();
    assert_eq!(
        collisions,
        json!([{"kind": "resource", "name": "notes://shared/1", "servers": ["lister", "templater"]}]),
        "{collisions}"
    );
    let claimed = rpc_at(&gw, "/mcp", "resources/read", json!({"uri": "notes://shared/1"}), &[]);
    expect_error(&claimed, -32002, "resource_not_found");
    let message = claimed["error"]["message"].as_str().unwrap();
    assert!(message.contains("several servers claim it (lister, templater)"), "{claimed}");
    let listed = rpc_at(&gw, "/mcp", "resources/list", json!({}), &[]);
    assert_eq!(listed["result"]["resources"], json!([]), "served by neither: {listed}");
    let other = rpc_at(&gw, "/mcp", "resources/read", json!({"uri": "notes://shared/2"}), &[]);
    assert_eq!(other["result"]["contents"][0]["text"], "the templater's note 2", "{other}");
    drop(gw);

    // A prefix names the owner: no collision, the owner serves it.
    let owned = format!(
        "{}{}resource_prefixes = [\"notes://shared/\"]\n",
        peer("lister", "lister"),
        peer("templater", "templater")
    );
    let gw = Gateway::start(&owned, &[]);
    wait_for("the templater's template", || {
        admin_get_json(&gw, "/admin/registry/surface").1["resource_templates"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    });
    let read = rpc_at(&gw, "/mcp", "resources/read", json!({"uri": "notes://shared/1"}), &[]);
    assert_eq!(read["result"]["contents"][0]["text"], "the templater's note 1", "{read}");
    assert_eq!(admin_get_json(&gw, "/admin/registry/surface").1["collisions"], json!([]));
}

/// `mcp-gateway check-config` of `config`: what it printed.
fn check_config_text(config: &str) -> String {
    let file = TempFile::with("uri-check.toml", config);
    let output = check_config(&["--config", file.arg()], &[]);
    assert!(!output.status.success(), "a non-canonical prefix was accepted");
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}
