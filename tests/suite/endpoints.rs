//! Endpoints per audience (`[endpoints.NAME]` at `/mcp/NAME`, docs/endpoints.md) with real
//! processes: the built gateway, the demo store server (its `/_stats` says what it received),
//! a server on a port nobody listens on (connection refused: a fallback may run), the official
//! Python SDK client against an endpoint, and the changing-tools Python SDK server for list
//! changes and prompts. Each endpoint lists its own selection under its own catalogue control;
//! a tool outside it is unknown there on every call path and never reaches its server; the
//! policy sees the endpoint; a session is bound to its endpoint; list changes, exports and
//! `/capabilities` are per endpoint. Nothing waits on a clock: each step waits for what the
//! previous one causes.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::common::{
    Demo, Gateway, TempFile, expect_error, free_port, http_server, metric, peers_dir, python, require,
    wait_for,
};

/// `store` (the demo; `inventory_check` renamed `24h_stock`, which the Gemini export maps) and
/// `gone` (refuses connections; its read-only `legacy_stock` falls back to `24h_stock`).
/// `browse`: read-only tools but `24h_stock`, `manga_search` shown as `find_manga`,
/// `manga_recommendations` hidden. `cart`: the store's cart, checkout and `24h_*` tools.
fn config(demo: &Demo, extra: &str) -> String {
    format!(
        "{extra}{store}{gone}discover = false\n[[servers.gone.tools]]\nname = \"legacy_stock\"\n\
         inputSchema = {{ type = \"object\", properties = {{ manga_ids = {{ type = \"array\", items = {{ type = \"string\" }} }} }} }}\n\
         annotations = {{ readOnlyHint = true }}\n\
         [tools.inventory_check]\nrename = \"24h_stock\"\n\
         [tools.legacy_stock]\nfallback_tool = \"24h_stock\"\n\
         [endpoints.browse.select]\nread_only = true\nexclude_tools = [\"24h_stock\"]\n\
         [endpoints.browse.tools.manga_search]\nrename = \"find_manga\"\ndescription = \"Find a manga in the store\"\n\
         [endpoints.browse.tools.manga_recommendations]\nhide = true\n\
         [endpoints.cart.select]\nservers = [\"store\"]\ntools = [\"add_to_cart\", \"checkout\", \"24h_*\"]\n",
        store = http_server("store", &demo.url()),
        gone = http_server("gone", &format!("http://127.0.0.1:{}/mcp", free_port())),
    )
}

fn post(
    gw: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
    message: &Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request =
        gw.client.post(gw.url(path)).header("content-type", "application/json").body(message.to_string());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let answer_headers = response.headers().clone();
    let text = response.text().unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (status, answer_headers, body)
}

fn rpc(gw: &Gateway, path: &str, headers: &[(&str, &str)], method: &str, params: Value) -> Value {
    let (status, _, body) =
        post(gw, path, headers, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    assert_eq!(status, 200, "{path} {method}: {body}");
    body
}

fn call(gw: &Gateway, path: &str, params: Value) -> Value {
    rpc(gw, path, &[], "tools/call", params)
}

fn listed(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> BTreeSet<String> {
    let answer = rpc(gw, path, headers, "tools/list", json!({}));
    answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn get_json(gw: &Gateway, path: &str) -> (u16, Value) {
    let response = gw.client.get(gw.url(path)).send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap())
}

fn upstream_calls(demo: &Demo) -> u64 {
    demo.stats()["calls"].as_u64().unwrap()
}

/// An unknown tool, exactly as for a name no server offers (the session era's `-32002`,
/// `unknown_tool`): no server named, nothing of the tool's whereabouts.
fn expect_unknown(answer: &Value, path: &str) {
    let data = expect_error(answer, -32002, "unknown_tool");
    assert!(data["server"].is_null(), "{path}: an unknown tool names no server: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Unknown tool: no server offers a tool named"), "{path}: {answer}");
}

/// Every `name` in an export's JSON.
fn exported_names(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(key, v)| match (key.as_str(), v) {
                ("name", Value::String(name)) => vec![name.clone()],
                _ => exported_names(v),
            })
            .collect(),
        Value::Array(items) => items.iter().flat_map(exported_names).collect(),
        _ => Vec::new(),
    }
}

/// The official Python SDK client against `url`: its tool list and the call's result.
fn python_client(gw: &Gateway, url: &str, mode: &str, tool: &str, arguments: Value) -> Value {
    let script =
        require(&peers_dir().join("clients/python_client.py"), "tests/peers/clients/python_client.py");
    let output = Command::new(python())
        .arg(script)
        .args([url, mode, tool, &arguments.to_string()])
        .output()
        .expect("python client runs");
    assert!(
        output.status.success(),
        "python client ({mode}) failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        gw.proc.output()
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn each_endpoint_lists_its_selection_under_its_own_catalogue_control() {
    let demo = Demo::http();
    let gw = Gateway::start(&config(&demo, ""), &[]);
    let all = set(&[
        "manga_search",
        "price_lookup",
        "24h_stock",
        "add_to_cart",
        "checkout",
        "manga_recommendations",
        "legacy_stock",
    ]);
    wait_for("the whole catalogue on /mcp", || listed(&gw, "/mcp", &[]) == all);
    assert_eq!(listed(&gw, "/mcp/browse", &[]), set(&["find_manga", "price_lookup", "legacy_stock"]));
    assert_eq!(listed(&gw, "/mcp/cart", &[]), set(&["24h_stock", "add_to_cart", "checkout"]));
    let browse = rpc(&gw, "/mcp/browse", &[], "tools/list", json!({}));
    let find =
        browse["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "find_manga").unwrap();
    assert_eq!(find["description"], "Find a manga in the store", "{find}");

    // The official SDK client, in both eras, sees and calls the endpoint's own names; the
    // server gets its own name.
    for mode in ["legacy", "2026-07-28"] {
        let before = upstream_calls(&demo);
        let out = python_client(&gw, &gw.url("/mcp/browse"), mode, "find_manga", json!({"query": "naruto"}));
        let tools: BTreeSet<String> =
            out["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
        assert_eq!(tools, set(&["find_manga", "price_lookup", "legacy_stock"]), "{mode}: {out}");
        assert_ne!(out["result"]["isError"], true, "{mode}: {out}");
        assert_eq!(upstream_calls(&demo), before + 1, "{mode}");
        assert_eq!(demo.stats()["last_tool"]["name"], "manga_search");
    }
    // The name the endpoint renamed away is unknown there, and still the catalogue's on /mcp.
    expect_unknown(
        &call(&gw, "/mcp/browse", json!({"name": "manga_search", "arguments": {"query": "x"}})),
        "renamed",
    );
    assert!(
        call(&gw, "/mcp", json!({"name": "manga_search", "arguments": {"query": "x"}}))["result"].is_object()
    );

    // Exports and /capabilities per endpoint.
    let (status, exported) = get_json(&gw, "/tools?endpoint=browse");
    assert_eq!(status, 200, "{exported}");
    let names: BTreeSet<String> = exported["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, set(&["find_manga", "price_lookup", "legacy_stock"]), "{exported}");
    let (_, cart) = get_json(&gw, "/tools?endpoint=cart&format=openai");
    let cart_names: BTreeSet<String> = exported_names(&cart["tools"]).into_iter().collect();
    assert!(cart_names.contains("add_to_cart") && !cart_names.contains("price_lookup"), "{cart}");
    let (status, capabilities) = get_json(&gw, "/capabilities?endpoint=cart");
    assert_eq!(status, 200, "{capabilities}");
    assert_eq!(capabilities["tools"]["total"], 3, "{capabilities}");
    let (_, whole) = get_json(&gw, "/capabilities");
    assert_eq!(whole["tools"]["total"], 7, "{whole}");

    // An unknown endpoint: 404 with a JSON-RPC error body, wherever it is named.
    for path in ["/mcp/nope", "/mcp/", "/mcp/Browse"] {
        let (status, _, body) =
            post(&gw, path, &[], &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], -32600, "{path}: {body}");
        assert_eq!(body["error"]["data"]["reason"], "unknown_endpoint", "{path}: {body}");
    }
    for path in ["/tools?endpoint=nope", "/capabilities?endpoint=nope"] {
        let (status, body) = get_json(&gw, path);
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["data"]["reason"], "unknown_endpoint", "{path}: {body}");
    }
}

#[test]
fn a_tool_outside_the_selection_is_unknown_on_every_call_path_and_never_forwarded() {
    let demo = Demo::http();
    let audit = TempFile::new("endpoints-audit.jsonl");
    let extra = format!("[audit]\nsink = \"file\"\nfile = {}\n", json!(audit.arg()));
    let gw = Gateway::start(&config(&demo, &extra), &[]);
    wait_for("the catalogue", || listed(&gw, "/mcp/cart", &[]).contains("24h_stock"));
    let stock = |arguments: Value| json!({"name": "24h_stock", "arguments": arguments});
    let ids = json!({"manga_ids": ["MNG-00000001"]});
    let before = upstream_calls(&demo);

    // Direct, in both eras (the modern era's code is -32602, as for a name no server offers).
    expect_unknown(&call(&gw, "/mcp/browse", stock(ids.clone())), "direct");
    let modern = json!({"name": "24h_stock", "arguments": ids,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}});
    let nowhere = json!({"name": "no_such_tool", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}});
    let (outside, absent) = (call(&gw, "/mcp/browse", modern), call(&gw, "/mcp/browse", nowhere));
    expect_error(&outside, -32602, "unknown_tool");
    assert_eq!(outside["error"]["code"], absent["error"]["code"], "{outside} {absent}");
    assert!(outside["error"]["data"]["server"].is_null(), "{outside}");
    // A batch item, beside an item the endpoint serves.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": stock(ids.clone())},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    ]);
    let (status, _, answer) = post(&gw, "/mcp/browse", &[], &batch);
    assert_eq!(status, 200, "{answer}");
    expect_unknown(&answer.as_array().unwrap()[0], "batch");
    // The name a model API export maps it to (a Gemini function name cannot start with a digit).
    let (_, exported) = get_json(&gw, "/tools?format=gemini&endpoint=cart");
    let alias = exported_names(&exported)
        .into_iter()
        .find(|name| name.starts_with("_24h_stock"))
        .unwrap_or_else(|| panic!("no mapped name for 24h_stock: {exported}"));
    expect_unknown(&call(&gw, "/mcp/browse", json!({"name": alias, "arguments": ids})), "alias");
    // A task's creation.
    let task = json!({"name": "24h_stock", "arguments": ids, "task": {"ttl": 60000}});
    expect_unknown(&call(&gw, "/mcp/browse", task), "task");
    // A held answer's retry: the door decides before the state is looked at.
    let retry = json!({"name": "24h_stock", "arguments": ids, "requestState": "mcpgw-state.not-a-real-state",
        "inputResponses": {"q": {"action": "accept", "content": {}}}});
    expect_unknown(&call(&gw, "/mcp/browse", retry), "held retry");
    // A fallback whose alternative the endpoint does not serve does not run there.
    let legacy = json!({"name": "legacy_stock", "arguments": ids});
    let failed = call(&gw, "/mcp/browse", legacy.clone());
    assert!(failed.get("error").is_some(), "no fallback outside the endpoint: {failed}");
    assert_eq!(failed["error"]["data"]["tool"], "legacy_stock", "{failed}");
    assert_eq!(upstream_calls(&demo), before, "a tool outside the endpoint reached the server");

    // The same paths where the endpoint serves the tool (or on /mcp) do reach it.
    assert!(call(&gw, "/mcp/cart", stock(ids.clone()))["result"].is_object());
    assert_eq!(upstream_calls(&demo), before + 1);
    assert!(call(&gw, "/mcp/cart", json!({"name": alias, "arguments": ids}))["result"].is_object());
    assert_eq!(upstream_calls(&demo), before + 2);
    let fell_back = call(&gw, "/mcp", legacy);
    assert_eq!(fell_back["result"]["_meta"]["fallback_tool"], "24h_stock", "{fell_back}");
    assert_eq!(upstream_calls(&demo), before + 3);
    assert_eq!(demo.stats()["last_tool"]["name"], "inventory_check");
    // Refused at the door: counted as unknown_tool calls, never as upstream attempts.
    let metrics = gw.metrics();
    assert!(
        metric(&metrics, "mcp_gateway_tool_calls_total", &[r#"outcome="unknown_tool""#]) >= 5.0,
        "{metrics}"
    );
    // The audit line names the endpoint (the operator sees which door refused what).
    let lines = || -> Vec<Value> {
        let text = std::fs::read_to_string(audit.path()).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let refused =
        |l: &Value| l["endpoint"] == "browse" && l["outcome"] == "unknown_tool" && l["tool"] == "24h_stock";
    wait_for("the refusals' audit lines", || lines().iter().filter(|l| refused(l)).count() >= 5);
    let served = |l: &Value| l["endpoint"] == "cart" && l["outcome"] == "ok" && l["tool"] == "24h_stock";
    wait_for("the cart's audit line", || lines().iter().any(served));
    assert!(lines().iter().any(|l| l.get("endpoint").is_none() && l["outcome"] == "fallback_alternative"));
}

#[test]
fn the_call_tool_meta_tool_does_not_reach_outside_the_endpoint() {
    let demo = Demo::http();
    let gw = Gateway::start(&config(&demo, "[catalogue.search]\nenabled = true\n"), &[]);
    let meta = |name: &str| json!({"name": "call_tool", "arguments": {"name": name, "arguments": {"manga_ids": ["MNG-1"]}}});
    wait_for("the catalogue", || call(&gw, "/mcp/cart", meta("24h_stock")).get("result").is_some());
    let before = upstream_calls(&demo);
    expect_unknown(&call(&gw, "/mcp/browse", meta("24h_stock")), "call_tool");
    assert_eq!(upstream_calls(&demo), before, "call_tool reached a tool outside the endpoint");
    // search_tools finds only the endpoint's tools, under the endpoint's names.
    let found = call(
        &gw,
        "/mcp/browse",
        json!({"name": "search_tools", "arguments": {"query": "manga search stock inventory"}}),
    );
    let names = exported_names(&found["result"]["structuredContent"]);
    assert!(!names.iter().any(|n| n == "24h_stock" || n == "manga_search"), "{found}");
}

#[test]
fn the_policy_sees_the_endpoint() {
    let demo = Demo::http();
    let policy = TempFile::with(
        "endpoints.cedar",
        r#"
@id("cart-needs-buy")
forbid (principal, action, resource)
when { context.endpoint == "cart" && !principal.scopes.contains("store:buy") };
@id("open")
permit (principal, action, resource);
"#,
    );
    let identity = format!(
        "[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\nscopes_header = \"x-caller-scopes\"\n[policy]\nfile = {}\n",
        json!(policy.arg())
    );
    let gw = Gateway::start(&config(&demo, &identity), &[]);
    let mallory = [("x-caller-subject", "mallory"), ("x-caller-scopes", "store:browse")];
    let alice = [("x-caller-subject", "alice"), ("x-caller-scopes", "store:buy")];
    wait_for("the catalogue", || listed(&gw, "/mcp", &mallory).contains("add_to_cart"));
    // The same caller: the whole catalogue on /mcp (context.endpoint == ""), nothing on cart.
    assert!(listed(&gw, "/mcp/cart", &mallory).is_empty());
    assert_eq!(listed(&gw, "/mcp/cart", &alice), set(&["24h_stock", "add_to_cart", "checkout"]));
    let before = upstream_calls(&demo);
    let add = json!({"name": "add_to_cart", "arguments": {"manga_id": "MNG-00000001"}});
    let denied = rpc(&gw, "/mcp/cart", &mallory, "tools/call", add.clone());
    let data = expect_error(&denied, -32008, "forbidden");
    assert_eq!(data["rule"], "cart-needs-buy", "{denied}");
    assert_eq!(upstream_calls(&demo), before);
    assert!(rpc(&gw, "/mcp/cart", &alice, "tools/call", add)["result"].is_object());
    assert_eq!(upstream_calls(&demo), before + 1);
}

/// A session-era stream on `path`: `initialize`, then `GET` with the session id it gave.
struct Stream {
    session: String,
    events: Arc<Mutex<Vec<Value>>>,
}

fn initialize(gw: &Gateway, path: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, headers, answer) = post(gw, path, &[], &init);
    assert_eq!(status, 200, "{answer}");
    headers.get("mcp-session-id").expect("a session id for the GET stream").to_str().unwrap().to_string()
}

fn get_stream(gw: &Gateway, path: &str, session: &str) -> reqwest::blocking::Response {
    let client = reqwest::blocking::Client::builder().timeout(None::<Duration>).build().unwrap();
    client
        .get(gw.url(path))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap()
}

impl Stream {
    fn open(gw: &Gateway, path: &str) -> Self {
        let session = initialize(gw, path);
        let response = get_stream(gw, path, &session);
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
        Self { session, events }
    }

    fn count(&self) -> usize {
        self.events.lock().unwrap().len()
    }
}

#[test]
fn a_session_is_bound_to_the_endpoint_it_was_opened_on() {
    let demo = Demo::http();
    let gw = Gateway::start(&config(&demo, ""), &[]);
    let session = initialize(&gw, "/mcp/browse");
    // Presented on another endpoint, or on /mcp: unknown there (404, as another subject's).
    for path in ["/mcp/cart", "/mcp"] {
        let response = get_stream(&gw, path, &session);
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().unwrap();
        assert_eq!(body["error"]["data"]["reason"], "unknown_session", "{path}: {body}");
        let deleted = gw.client.delete(gw.url(path)).header("mcp-session-id", &session).send().unwrap();
        assert_eq!(deleted.status(), 404, "{path}");
    }
    let (status, _, body) = post(
        &gw,
        "/mcp/cart",
        &[("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(status, 404, "{body}");
    // On its own endpoint it serves, and ends.
    assert_eq!(get_stream(&gw, "/mcp/browse", &session).status(), 200);
    let deleted = gw.client.delete(gw.url("/mcp/browse")).header("mcp-session-id", &session).send().unwrap();
    assert_eq!(deleted.status(), 204);
}

#[test]
fn list_changes_and_prompts_are_per_endpoint() {
    let log = TempFile::new("endpoints-changing.log");
    let script = require(
        &peers_dir().join("servers/changing_tools_server.py"),
        "tests/peers/servers/changing_tools_server.py",
    );
    let config = format!(
        "refresh_interval_secs = 3600\n[metrics]\nmain_listener = \"open\"\n\
         [servers.changing]\ntransport = \"stdio\"\ncommand = {}\nargs = {}\nenv = {{ CHANGING_TOOLS_LOG = {} }}\n\
         [endpoints.all.select]\nservers = [\"changing\"]\n\
         [endpoints.all.prompts.hello]\ndescription = \"Say hello (all)\"\n\
         [endpoints.public.select]\nservers = [\"changing\"]\ntools = [\"grow\", \"public_*\"]\nexclude_prompts = [\"*\"]\n",
        json!(python().display().to_string()),
        json!([script.display().to_string(), "stdio"]),
        json!(log.path().display().to_string()),
    );
    let gw = Gateway::start(&config, &[]);
    wait_for("the changing server's tools", || listed(&gw, "/mcp/public", &[]).contains("grow"));

    // Prompts: the endpoint's own description; none at all on `public`.
    let hello_listed = || rpc(&gw, "/mcp", &[], "prompts/list", json!({}))["result"]["prompts"].to_string();
    wait_for("the changing server's prompt", || hello_listed().contains("\"hello\""));
    let prompts = rpc(&gw, "/mcp/all", &[], "prompts/list", json!({}));
    let hello =
        prompts["result"]["prompts"].as_array().unwrap().iter().find(|p| p["name"] == "hello").cloned();
    assert_eq!(hello.as_ref().map(|h| h["description"].clone()), Some(json!("Say hello (all)")), "{prompts}");
    let none = rpc(&gw, "/mcp/public", &[], "prompts/list", json!({}));
    assert_eq!(none["result"]["prompts"], json!([]), "{none}");
    let refused = rpc(&gw, "/mcp/public", &[], "prompts/get", json!({"name": "hello"}));
    let data = expect_error(&refused, -32602, "bad_input");
    assert!(data["server"].is_null(), "{refused}");

    let all = Stream::open(&gw, "/mcp/all");
    let public = Stream::open(&gw, "/mcp/public");
    wait_for("both streams", || metric(&gw.metrics(), "mcp_gateway_listen_streams", &[]) >= 2.0);
    // A tool only `all` selects: `all` is told, `public` is not.
    assert!(
        call(&gw, "/mcp/all", json!({"name": "grow", "arguments": {"name": "secret_plan"}}))["result"]
            .is_object()
    );
    wait_for("all told of secret_plan", || all.count() >= 1);
    assert!(listed(&gw, "/mcp/all", &[]).contains("secret_plan"));
    assert!(!listed(&gw, "/mcp/public", &[]).contains("secret_plan"));
    // Then one both select: public's first notification is about it, not the other. By events,
    // not clocks: `all` was told of secret_plan (waited for above), public of nothing yet.
    assert_eq!(public.count(), 0, "public was told of a change it cannot see");
    assert!(
        call(&gw, "/mcp/public", json!({"name": "grow", "arguments": {"name": "public_note"}}))["result"]
            .is_object()
    );
    wait_for("all told of public_note", || all.count() >= 2);
    wait_for("public told of public_note", || public.count() >= 1);
    let first = public.events.lock().unwrap()[0].clone();
    assert_eq!(first["method"], "notifications/tools/list_changed", "{first}");
    assert!(listed(&gw, "/mcp/public", &[]).contains("public_note"));
    assert_eq!(public.count(), 1, "{}", public.session);
}

#[test]
fn a_closed_plain_mcp_serves_only_the_endpoints() {
    let demo = Demo::http();
    let gw = Gateway::start(&config(&demo, "serve_plain_mcp = false\n"), &[]);
    wait_for("the cart endpoint", || listed(&gw, "/mcp/cart", &[]).contains("add_to_cart"));
    let (status, _, body) =
        post(&gw, "/mcp", &[], &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["data"]["reason"], "unknown_endpoint", "{body}");
    let (status, body) = get_json(&gw, "/tools");
    assert_eq!(status, 404, "{body}");
    let (status, _) = get_json(&gw, "/tools?endpoint=cart");
    assert_eq!(status, 200);

    // `tools export` from the configuration, as an endpoint serves it; an unknown one refused.
    let file = TempFile::with("endpoints-export.toml", config(&demo, ""));
    let export = |endpoint: &str| {
        Command::new(crate::common::BIN)
            .args(["tools", "export", "--config", file.arg(), "--endpoint", endpoint])
            .output()
            .unwrap()
    };
    let output = export("browse");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let exported: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: BTreeSet<String> = exported["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, set(&["find_manga", "price_lookup", "legacy_stock"]), "{exported}");
    let unknown = export("nope");
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no endpoint named \"nope\""));
}

#[test]
fn resources_and_templates_are_per_endpoint() {
    let every_port = crate::common::free_port();
    let _every = crate::common::everything_server(every_port);
    let config = format!(
        "{}[endpoints.docs.select]\nresources = [\"demo://resource/static/document/\"]\n\
         [endpoints.bare.select]\nexclude_resources = [\"demo://\"]\n",
        http_server("every", &format!("http://127.0.0.1:{every_port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let uris = |path: &str, method: &str, key: &str, field: &str| -> Vec<String> {
        let answer = rpc(&gw, path, &[], method, json!({}));
        answer["result"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[field].as_str().unwrap().to_string())
            .collect()
    };
    wait_for("the everything server's resources and templates", || {
        !uris("/mcp", "resources/list", "resources", "uri").is_empty()
            && !uris("/mcp", "resources/templates/list", "resourceTemplates", "uriTemplate").is_empty()
    });
    let docs = uris("/mcp/docs", "resources/list", "resources", "uri");
    assert!(
        !docs.is_empty() && docs.iter().all(|u| u.starts_with("demo://resource/static/document/")),
        "{docs:?}"
    );
    assert!(uris("/mcp/docs", "resources/templates/list", "resourceTemplates", "uriTemplate").is_empty());
    assert!(!uris("/mcp", "resources/templates/list", "resourceTemplates", "uriTemplate").is_empty());
    assert!(uris("/mcp/bare", "resources/list", "resources", "uri").is_empty());
    // A read outside the endpoint is resource-not-found there, as for a URI no server serves.
    let read = json!({"uri": "demo://resource/dynamic/text/9"});
    let refused = rpc(&gw, "/mcp/docs", &[], "resources/read", read.clone());
    let data = expect_error(&refused, -32002, "resource_not_found");
    assert!(data["server"].is_null(), "{refused}");
    assert!(rpc(&gw, "/mcp", &[], "resources/read", read)["result"]["contents"].is_array());
    let inside = rpc(&gw, "/mcp/docs", &[], "resources/read", json!({"uri": docs[0]}));
    assert!(inside["result"]["contents"].is_array(), "{inside}");
}
