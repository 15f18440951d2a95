//! MCP Apps (SEP-1865, `io.modelcontextprotocol/ui`) and extension negotiation (SEP-2133)
//! through the gateway, with real peers on both sides: the official Python SDK 2.3's `Apps`
//! extension (`tests/peers/servers/apps_server.py`: a tool for the model and the app, a tool
//! for the app only, a `ui://` resource with CSP, permissions and domain, and a tool that
//! answers differently to an Apps host), the `@modelcontextprotocol/ext-apps` 2.0.3 example
//! servers (budget allocator over streamable HTTP, basic vanilla JS over stdio), and the Python
//! SDK's client acting as an Apps host or as a text-only client
//! (`tests/peers/clients/apps_client.py`), in the session era and in 2026-07-28.
//!
//! Decisions proven: a session-era host's extension reaches the server at the `initialize` of
//! its own upstream session (and an extension the gateway does not know, too); the server
//! answers it as an Apps host, and a text-only caller as a text-only client; a tool for the app
//! only is listed, with its visibility, to Apps hosts only, and never to other callers,
//! `search_tools`, `call_tool` or the exports; calling it without Apps is an unknown tool; what
//! a host reads through the gateway is what it reads direct (tools, `_meta`, resources, HTML);
//! a tool's `resourceUri` resolves after a collision prefix; declared extensions are bounded.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::*;

const APPS: &str = "io.modelcontextprotocol/ui";
const MIME: &str = "text/html;profile=mcp-app";

/// The Python SDK `Apps` server over streamable HTTP, its app named `app`.
fn apps_server(app: &str) -> (Proc, String) {
    let port = free_port();
    let mut command = Command::new(python());
    command
        .arg(peers_dir().join("servers/apps_server.py"))
        .arg(port.to_string())
        .args(["--app", app])
        .env("PYTHONUNBUFFERED", "1");
    let proc = Proc::spawn_until("apps-server", command, "READY");
    (proc, format!("http://127.0.0.1:{port}"))
}

/// The `[servers.NAME]` table running the Python SDK `Apps` server over stdio.
fn apps_stdio(name: &str, app: &str) -> String {
    let script = peers_dir().join("servers/apps_server.py");
    format!(
        "[servers.{name}]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"{}\", \"--stdio\", \"--app\", \"{app}\"]\n",
        python().display(),
        script.display()
    )
}

/// An `@modelcontextprotocol/ext-apps` example server's entry point.
fn ext_apps_example(package: &str) -> std::path::PathBuf {
    require(
        &peers_dir().join(format!("node_modules/@modelcontextprotocol/{package}/dist/index.js")),
        "the ext-apps example servers (npm)",
    )
}

/// An ext-apps example server over streamable HTTP (`PORT=P node dist/index.js`).
fn ext_apps_http(package: &str) -> (Proc, String) {
    let port = free_port();
    let mut command = Command::new(node22());
    command.arg(ext_apps_example(package)).env("PORT", port.to_string());
    let proc = Proc::spawn_on(package, command, port);
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// The capabilities of every `initialize` an `apps_server.py` saw, in order.
fn initializes(server: &str) -> Vec<Value> {
    let list: Value =
        reqwest::blocking::get(format!("{server}/control/initializes")).unwrap().json().unwrap();
    list.as_array().unwrap().clone()
}

/// The Python SDK client at `url` in `mode` (`legacy`, `2026-07-28`), as an Apps host
/// (`host = "apps"`) or a text-only client (`"text"`), calling `tool` if given.
fn host(url: &str, mode: &str, host: &str, tool: Option<&str>) -> Value {
    let output = Command::new(python())
        .arg(peers_dir().join("clients/apps_client.py"))
        .args([url, mode, host])
        .args(tool)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "apps_client {mode} {host} at {url}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON line")
}

fn names(report: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        report["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    names
}

/// What a host sees that must be the same through the gateway as direct: each tool's name and
/// `_meta`, and each read of its `resourceUri` (URI, MIME type, `_meta`, HTML).
fn seen(report: &Value) -> Value {
    let mut tools: Vec<Value> = report["tools"].as_array().unwrap().clone();
    tools.sort_by_key(|t| t["name"].as_str().unwrap_or_default().to_string());
    json!({"tools": tools, "reads": report["reads"]})
}

fn gateway_mcp(gw: &Gateway) -> String {
    gw.url("/mcp")
}

/// A raw JSON-RPC request to the gateway with extra headers; the answer's JSON (or its SSE
/// message) and the response headers.
fn post(gw: &Gateway, body: &Value, headers: &[(&str, &str)]) -> (Value, reqwest::header::HeaderMap) {
    let mut request = gw
        .client
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.json(body).send().unwrap();
    let headers = response.headers().clone();
    let text = response.text().unwrap();
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("not JSON-RPC: {text}"));
    (json, headers)
}

fn modern_meta(apps: bool) -> Value {
    let capabilities = if apps { json!({"extensions": {APPS: {"mimeTypes": [MIME]}}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

#[test]
fn a_session_era_apps_host_gets_the_app_tool_and_its_server_hears_the_extension() {
    let (_server, url) = apps_server("clock");
    let gw = Gateway::start(&http_server("clock", &format!("{url}/mcp")), &[]);
    let direct = host(&format!("{url}/mcp"), "legacy", "apps", Some("get_time"));
    let before = initializes(&url).len();

    let through = host(&gateway_mcp(&gw), "legacy", "apps", Some("get_time"));
    // The host sees what it sees direct: both tools (the app's with its visibility), their
    // `_meta.ui`, and each `ui://` resource with its MIME type, `_meta.ui` and HTML.
    assert_eq!(seen(&through), seen(&direct), "through the gateway vs direct");
    assert_eq!(names(&through), ["get_time", "refresh_time"]);
    let app_only = through["tools"].as_array().unwrap().iter().find(|t| t["name"] == "refresh_time").unwrap();
    assert_eq!(app_only["meta"]["ui"]["visibility"], json!(["app"]));
    let read = &through["reads"]["get_time"];
    assert_eq!(read["mimeType"], MIME);
    assert_eq!(read["meta"]["ui"]["csp"]["connectDomains"], json!(["https://api.example.com"]));
    assert_eq!(read["meta"]["ui"]["permissions"], json!({"clipboardWrite": {}}));
    assert_eq!(read["meta"]["ui"]["domain"], "clock.apps.example.com");
    // The server answered as to an Apps host, because its `initialize` said so.
    assert_eq!(through["call"]["text"], "apps host: 12:00 from clock", "{through}");
    let seen_since: Vec<Value> = initializes(&url).split_off(before);
    assert!(
        seen_since.iter().any(|c| c["extensions"][APPS]["mimeTypes"] == json!([MIME])),
        "the server saw the host's extension at an initialize: {seen_since:?}"
    );
    // The gateway declares MCP Apps: it carries it and a server behind it links an app.
    assert_eq!(through["extensions"], json!({APPS: {}}), "{through}");

    // A text-only caller: no tool for the app, and the server answers it as text-only.
    let text = host(&gateway_mcp(&gw), "legacy", "text", Some("get_time"));
    assert_eq!(names(&text), ["get_time"]);
    assert_eq!(text["call"]["text"], "text-only: 12:00 from clock");
}

#[test]
fn a_modern_apps_host_reads_what_it_reads_direct_and_a_text_client_no_app_tool() {
    let (_server, url) = apps_server("clock");
    let gw = Gateway::start(&http_server("clock", &format!("{url}/mcp")), &[]);
    let direct = host(&format!("{url}/mcp"), "2026-07-28", "apps", Some("get_time"));
    let through = host(&gateway_mcp(&gw), "2026-07-28", "apps", Some("get_time"));
    assert_eq!(seen(&through), seen(&direct));
    assert_eq!(names(&through), ["get_time", "refresh_time"]);
    assert_eq!(through["call"]["text"], "apps host: 12:00 from clock");
    let app_call = host(&gateway_mcp(&gw), "2026-07-28", "apps", Some("refresh_time"));
    assert_eq!(app_call["call"]["text"], "refreshed by clock", "{app_call}");

    let text = host(&gateway_mcp(&gw), "2026-07-28", "text", Some("get_time"));
    assert_eq!(names(&text), ["get_time"]);
    assert_eq!(text["call"]["text"], "text-only: 12:00 from clock");
}

#[test]
fn a_tool_for_the_app_only_reaches_no_model_and_is_unknown_to_other_callers() {
    let (_server, url) = apps_server("clock");
    let config = format!(
        "{}[catalogue.search]\nenabled = true\npinned = [\"get_time\"]\n",
        http_server("clock", &format!("{url}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let call = |name: &str, meta: Value| {
        post(
            &gw,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}, "_meta": meta}}),
            &[],
        )
        .0
    };
    // Without Apps: the app's tool is unknown, exactly as a tool no server offers.
    let refused = call("refresh_time", json!({}));
    let unknown = call("no_such_tool", json!({}));
    assert_eq!(refused["error"]["code"], unknown["error"]["code"], "{refused}");
    assert_eq!(refused["error"]["data"]["category"], "unknown_tool", "{refused}");
    // A modern caller without Apps: the same, in its era's code.
    let refused = call("refresh_time", modern_meta(false));
    assert_eq!(refused["error"]["data"]["category"], "unknown_tool", "{refused}");
    // An Apps host calls it (through the door, as any call).
    let called = call("refresh_time", modern_meta(true));
    assert_eq!(called["result"]["content"][0]["text"], "refreshed by clock", "{called}");
    // Through `call_tool` (the model's path in search mode) it is unknown even to an Apps host.
    let meta_call = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "call_tool",
            "arguments": {"name": "refresh_time", "arguments": {}}, "_meta": modern_meta(true)}}),
        &[],
    )
    .0;
    assert!(!meta_call.to_string().contains("refreshed by"), "{meta_call}");
    // `search_tools` never finds it, whoever asks.
    let search = call_search(&gw, "refresh time clock app");
    assert!(search.contains("get_time") && !search.contains("refresh_time"), "{search}");
    // In search mode an Apps host's list holds the meta-tools, the pinned tool and the app's.
    let (listed, _) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": modern_meta(true)}}),
        &[],
    );
    // ...and is its own: no cache may hand it to a caller without Apps.
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    let listed: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(listed.contains(&"refresh_time") && listed.contains(&"get_time"), "{listed:?}");
    // The exports a model reads: never the app's tool.
    for format in ["mcp", "openai", "anthropic"] {
        let (status, body) = get_json(&gw, &format!("/tools?format={format}"));
        assert_eq!(status, 200);
        assert!(!body.to_string().contains("refresh_time"), "{format}: {body}");
    }
    let (_, capabilities) = get_json(&gw, "/capabilities");
    assert!(!capabilities.to_string().contains("refresh_time"), "{capabilities}");
}

fn call_search(gw: &Gateway, query: &str) -> String {
    let (answer, _) = post(
        gw,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_tools",
            "arguments": {"query": query}, "_meta": modern_meta(true)}}),
        &[],
    );
    assert!(answer.get("result").is_some(), "{answer}");
    answer.to_string()
}

#[test]
fn a_tools_resource_uri_resolves_after_a_collision_prefix_and_a_rename() {
    let (_a, a) = apps_server("clock-a");
    let (_b, b) = apps_server("clock-b");
    let config = format!(
        "{}{}[tools.b__refresh_time]\nrename = \"refresh_clock_b\"\n",
        http_server("a", &format!("{a}/mcp")),
        http_server("b", &format!("{b}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let through = host(&gateway_mcp(&gw), "legacy", "apps", None);
    assert_eq!(
        names(&through),
        ["a__get_time", "a__refresh_time", "b__get_time", "refresh_clock_b"],
        "{through}"
    );
    // Each tool's `resourceUri` is its server's URI, read from that server.
    for (tool, app) in [
        ("a__get_time", "clock-a"),
        ("a__refresh_time", "clock-a"),
        ("b__get_time", "clock-b"),
        ("refresh_clock_b", "clock-b"),
    ] {
        let read = &through["reads"][tool];
        assert_eq!(read["uri"], format!("ui://{app}/app.html"), "{tool}: {read}");
        assert!(read["text"].as_str().unwrap().contains(&format!("<p id=app>{app}</p>")), "{tool}: {read}");
    }
}

#[test]
fn the_ext_apps_examples_read_through_the_gateway_as_direct_over_http_and_stdio() {
    let (_budget, budget) = ext_apps_http("server-budget-allocator");
    // basic-vanillajs: the gateway runs it over stdio; the host reads it direct over HTTP.
    let (_basic, basic_direct) = ext_apps_http("server-basic-vanillajs");
    let config = format!(
        "{}[servers.basic]\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"{}\", \"--stdio\"]\n",
        http_server("budget", &budget),
        node22().display(),
        ext_apps_example("server-basic-vanillajs").display()
    );
    let gw = Gateway::start(&config, &[]);
    // The examples speak the session era only: a 2026-07-28 host reads them through the
    // gateway as a session-era host reads them direct.
    let mut direct = host(&budget, "legacy", "apps", None);
    let basic = host(&basic_direct, "legacy", "apps", None);
    direct["tools"].as_array_mut().unwrap().extend(basic["tools"].as_array().unwrap().iter().cloned());
    for (tool, read) in basic["reads"].as_object().unwrap() {
        direct["reads"][tool] = read.clone();
    }
    for mode in ["legacy", "2026-07-28"] {
        let through = host(&gateway_mcp(&gw), mode, "apps", None);
        assert!(seen(&through) == seen(&direct), "{mode}: through the gateway differs from direct");
        assert_eq!(through["reads"]["get-budget-data"]["mimeType"], MIME);
        assert_eq!(through["reads"]["get-time"]["mimeType"], MIME);
    }
    // Neither example declares the extension; their tools link apps, which the gateway
    // carries: it declares MCP Apps in both eras.
    let session = host(&gateway_mcp(&gw), "legacy", "text", None);
    assert_eq!(session["extensions"], json!({APPS: {}}), "initialize");
    let (discovered, _) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta(false)}}),
        &[],
    );
    assert_eq!(discovered["result"]["capabilities"]["extensions"], json!({APPS: {}}), "{discovered}");
}

#[test]
fn over_stdio_the_app_tool_is_still_for_apps_hosts_only() {
    let gw = Gateway::start(&apps_stdio("clock", "clock"), &[]);
    let apps = host(&gateway_mcp(&gw), "legacy", "apps", Some("refresh_time"));
    assert_eq!(names(&apps), ["get_time", "refresh_time"]);
    assert_eq!(apps["call"]["text"], "refreshed by clock");
    assert_eq!(apps["reads"]["get_time"]["meta"]["ui"]["domain"], "clock.apps.example.com");
    let text = host(&gateway_mcp(&gw), "legacy", "text", Some("refresh_time"));
    assert_eq!(names(&text), ["get_time"]);
    assert!(text["call"]["error"].is_string() || text["call"]["isError"] == true, "{text}");
}

#[test]
fn declared_extensions_pass_through_unknown_ones_included_and_are_bounded() {
    let (_server, url) = apps_server("clock");
    let gw = Gateway::start(&http_server("clock", &format!("{url}/mcp")), &[]);
    let initialize = |extensions: Value| {
        post(
            &gw,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                "capabilities": {"extensions": extensions}, "clientInfo": {"name": "raw", "version": "1"}}}),
            &[],
        )
    };
    // An extension the gateway does not know reaches the server beside MCP Apps.
    let (answer, headers) =
        initialize(json!({APPS: {"mimeTypes": [MIME]}, "com.example/unknown": {"level": 2}}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        answer["result"]["capabilities"]["extensions"].get("com.example/unknown").is_none(),
        "not invented"
    );
    let session = headers.get("mcp-session-id").expect("a session for a caller declaring extensions");
    let session = session.to_str().unwrap().to_string();
    let before = initializes(&url).len();
    let (called, _) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_time", "arguments": {}}}),
        &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-06-18")],
    );
    assert_eq!(called["result"]["content"][0]["text"], "apps host: 12:00 from clock", "{called}");
    let seen_since = initializes(&url).split_off(before);
    assert!(
        seen_since.iter().any(|c| c["extensions"]["com.example/unknown"] == json!({"level": 2})),
        "{seen_since:?}"
    );
    // Bounds: too many, a malformed identifier, too large: refused whole (-32602), never cut.
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("com.example/e{i}"), json!({}))).collect();
    let (refused, _) = initialize(Value::Object(many));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"]["key"], "extensions.max_declared", "{refused}");
    let (refused, _) = initialize(json!({"not an identifier": {}}));
    assert_eq!(refused["error"]["data"]["reason"], "extensions_refused", "{refused}");
    let (refused, _) = initialize(json!({"com.example/big": {"s": "x".repeat(9000)}}));
    assert_eq!(refused["error"]["data"]["limit"]["key"], "extensions.max_declared_bytes", "{refused}");
    // And in a 2026-07-28 request's own capabilities.
    let mut meta = modern_meta(false);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {"bad id": {}}});
    let (refused, _) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}}),
        &[],
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[test]
fn a_hook_may_rewrite_an_apps_html_but_never_its_csp() {
    let (_server, url) = apps_server("clock");
    let hooks_port = free_port();
    let mut command = Command::new(python());
    command
        .arg(peers_dir().join("servers/hook_server.py"))
        .arg(hooks_port.to_string())
        .env("PYTHONUNBUFFERED", "1");
    let _hooks = Proc::spawn_until("hook-server", command, "READY");
    let config = format!(
        "{}{}[[hooks]]\nname = \"app_page\"\nphase = \"after\"\nmatch_tools = [\"ui://*\"]\nserver = \"hooks\"\ntool = \"guard_app\"\n",
        http_server("clock", &format!("{url}/mcp")),
        http_server("hooks", &format!("http://127.0.0.1:{hooks_port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let through = host(&gateway_mcp(&gw), "legacy", "apps", None);
    let read = &through["reads"]["get_time"];
    // The one way out: the hook's page reaches the host...
    assert_eq!(read["text"], "<!doctype html><p>checked by the hook</p>", "{read}");
    // ...framed by the server's own `_meta.ui`, not the wider CSP the hook claimed.
    assert_eq!(read["meta"]["ui"]["csp"]["connectDomains"], json!(["https://api.example.com"]), "{read}");
    assert_eq!(read["meta"]["ui"]["domain"], "clock.apps.example.com", "{read}");
}

#[test]
fn the_consoles_playground_shows_a_tools_app_sandboxed_under_the_resources_csp() {
    require(std::path::Path::new("/usr/bin/chromium"), "Debian's chromium (apt-get install chromium)");
    require(&peers_dir().join("node_modules/playwright-core/package.json"), "playwright-core (npm)");
    let (_server, url) = apps_server("clock");
    let demo = Demo::http();
    let config =
        format!("{}{}", http_server("clock", &format!("{url}/mcp")), http_server("shop", &demo.url()));
    let gw = Gateway::start(&config, &[]);
    let output = Command::new(node22())
        .arg(peers_dir().join("clients/console_app.mjs"))
        .args(["--url", &gw.url(""), "--token", ADMIN_TOKEN, "--tools", "get_time,refresh_time,manga_search"])
        .args(["--show", "get_time"])
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .output()
        .expect("node runs the console driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success() && report.get("fatal").is_none(), "{report}");
    let shown = |tool: &str| report["tools"][tool].as_str().unwrap_or_default().to_string();
    assert!(shown("get_time").contains("ui://clock/app.html"), "{report}");
    assert!(!shown("get_time").contains("For the app only"), "{report}");
    assert!(shown("refresh_time").contains("For the app only"), "{report}");
    assert!(report["tools"]["manga_search"].is_null(), "a tool without an app: nothing shown: {report}");
    // The app ran, framed without same origin: it reads neither the console nor its token.
    let app = &report["app"];
    assert_eq!(app["status"], 200, "{report}");
    assert_eq!(app["sandbox"], "allow-scripts", "{report}");
    assert_eq!(app["inside"]["ran"], "yes", "{report}");
    assert_eq!(app["inside"]["text"], "clock", "{report}");
    assert_eq!(app["inside"]["origin"], "null", "{report}");
    assert_eq!(app["inside"]["parentReadable"], false, "{report}");
    assert_eq!(app["inside"]["storage"], "denied", "{report}");
    // Under the policy of the resource's `_meta.ui.csp`, sandboxed even outside the frame.
    let policy = app["policy"].as_str().unwrap_or_default();
    assert!(policy.starts_with("sandbox allow-scripts; default-src 'none';"), "{policy}");
    assert!(policy.contains("connect-src https://api.example.com;"), "{policy}");
    assert!(policy.contains("script-src 'unsafe-inline' https://cdn.example.com;"), "{policy}");
    assert_eq!(app["again"], 404, "a page is served once: {report}");
    assert_eq!(report["page_errors"], json!([]), "{report}");
    assert_eq!(report["console_errors"], json!([]), "{report}");
    // The page is minted only for the admin token.
    let (status, _) = {
        let response = gw
            .client
            .post(gw.url("/admin/playground/app"))
            .header("content-type", "application/json")
            .body(r#"{"uri": "ui://clock/app.html"}"#)
            .send()
            .unwrap();
        (response.status().as_u16(), ())
    };
    assert_eq!(status, 401);
}

#[test]
fn an_apps_hosts_stream_is_told_when_only_a_tool_for_the_app_changes() {
    let (_server, url) = apps_server("clock");
    let base = http_server("clock", &format!("{url}/mcp"));
    let gw = Gateway::start(&base, &[]);
    let (answer, headers) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {APPS: {"mimeTypes": [MIME]}}}, "clientInfo": {"name": "host", "version": "1"}}}),
        &[],
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let session = headers.get("mcp-session-id").expect("a session").to_str().unwrap().to_string();
    let response = reqwest::blocking::Client::builder()
        .timeout(None::<std::time::Duration>)
        .build()
        .unwrap()
        .get(gw.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let (events, heard) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(response).lines().map_while(Result::ok) {
            if let Some(data) = line.strip_prefix("data:").and_then(|d| serde_json::from_str(d.trim()).ok()) {
                let _ = events.send(data);
            }
        }
    });
    // Only the tool for the app changes (renamed): no model's list moves, the host's does.
    gw.rewrite_config(&format!("{base}[tools.refresh_time]\nrename = \"refresh_clock\"\n"));
    gw.sighup();
    let told = loop {
        let event = heard.recv_timeout(std::time::Duration::from_secs(60)).expect("the host is told");
        if event["method"] == "notifications/tools/list_changed" {
            break event;
        }
    };
    assert_eq!(told["method"], "notifications/tools/list_changed");
    let (listed, _) = post(
        &gw,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")],
    );
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"refresh_clock") && !names.contains(&"refresh_time"), "{names:?}");
}
