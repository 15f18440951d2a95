//! The operators' console's server side (`docs/console.md`), end to end with the built gateway
//! and the demo store server: the live overview after real calls (counted, a failing server's
//! last error, a breaker forced open and closed), the bounded record of recent calls (newest
//! first, never arguments), the playground going through the same door as any caller (policy,
//! fixed arguments, the audit line naming `admin`), the static assets (CSP, no token needed,
//! refused when admin is off or served elsewhere), and `serve --demo`'s one-off token.

use std::{process::Command, time::Duration};

use serde_json::{Value, json};

use crate::common::{
    ADMIN_TOKEN, Demo, Gateway, Proc, Scratch, TempFile, admin_get_json, bin, check_config, expect_error,
    free_port, http_server, wait_for,
};

/// The policy of every console response (the shared contract, docs/console.md).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS: [(&str, &str); 3] = [
    ("/admin/console", "text/html"),
    ("/admin/console/console.js", "text/javascript"),
    ("/admin/console/console.css", "text/css"),
];

/// `server`'s entry in `GET /admin/overview`.
fn server_of<'a>(overview: &'a Value, server: &str) -> &'a Value {
    overview["servers"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == server))
        .unwrap_or_else(|| panic!("no server {server} in {overview}"))
}

fn overview(gw: &Gateway) -> Value {
    let (status, body) = admin_get_json(gw, "/admin/overview");
    assert_eq!(status, 200, "{body}");
    body
}

fn playground(gw: &Gateway, body: &Value) -> Value {
    let response = gw.admin_post("/admin/playground").json(body).send().unwrap();
    assert_eq!(response.status(), 200);
    response.json().unwrap()
}

#[test]
fn the_overview_counts_real_calls_names_a_failing_servers_last_error_and_shows_a_forced_breaker() {
    let demo = Demo::http();
    // `gone` lists a tool of its own but nothing listens at its address.
    let config = format!(
        "{store}{gone}discover = false\n[[servers.gone.tools]]\nname = \"legacy_search\"\ninputSchema = {{ type = \"object\" }}\n",
        store = http_server("store", &demo.url()),
        gone = http_server("gone", &format!("http://127.0.0.1:{}/mcp", free_port())),
    );
    let gw = Gateway::start(&config, &[]);
    for query in ["naruto", "one piece", "frieren"] {
        let answer = gw.call("manga_search", json!({"query": query}));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    // The caller's own errors — bad arguments, once directly and once from the playground —
    // never reached the store: they say nothing of its health.
    expect_error(&gw.call("manga_search", json!({"max_results": 99})), -32602, "bad_input");
    let bad = playground(&gw, &json!({"tool": "manga_search", "arguments": {"max_results": 99}}));
    assert_eq!(bad["error"]["data"]["category"], "bad_input", "{bad}");
    let failed = gw.call("legacy_search", json!({}));
    let category =
        failed["error"]["data"]["category"].as_str().unwrap_or_else(|| panic!("{failed}")).to_owned();
    assert_eq!(demo.stats()["calls"], 3, "the demo server saw the three searches");

    let first = overview(&gw);
    let gateway = &first["gateway"];
    assert_eq!(gateway["ready"], true, "{first}");
    assert_eq!(gateway["tools"], gw.tool_names().len(), "{first}");
    assert_eq!(gateway["calls"], 6, "every call is counted: {first}");
    assert_eq!(gateway["error_ratio"], 0.25, "of the four calls that reached a server: {first}");
    assert!(gateway["calls_per_sec"].as_f64().is_some_and(|r| r > 0.0), "{first}");
    let store = server_of(&first, "store");
    assert_eq!((store["calls"].as_u64(), store["error_ratio"].as_f64()), (Some(5), Some(0.0)), "{first}");
    assert_eq!(store["transport"], "http");
    assert_eq!(store["breaker"], "closed");
    assert!(store["last_error"].is_null(), "{first}");
    let (p50, p99) = (store["p50_ms"].as_f64().unwrap(), store["p99_ms"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99, "{first}");
    let gone = server_of(&first, "gone");
    assert_eq!((gone["calls"].as_u64(), gone["error_ratio"].as_f64()), (Some(1), Some(1.0)), "{first}");
    assert_eq!(gone["last_error"]["category"], category.as_str(), "{first}");
    assert!(gone["last_error"]["at"].as_str().is_some_and(|at| at.ends_with('Z')), "{first}");

    // A breaker forced open shows as open, and a call is refused without reaching the server.
    let forced = gw.admin_post("/admin/breakers/store/open").send().unwrap();
    assert_eq!(forced.status(), 200);
    let down = overview(&gw);
    assert_eq!(server_of(&down, "store")["breaker"], "open");
    assert_eq!(server_of(&down, "store")["breaker_reason"], "forced open by an operator", "{down}");
    assert!(
        server_of(&down, "store")["breaker_since"].as_str().is_some_and(|at| at.ends_with('Z')),
        "{down}"
    );
    let refused = gw.call("manga_search", json!({"query": "naruto"}));
    expect_error(&refused, refused["error"]["code"].as_i64().unwrap(), "circuit_open");
    assert_eq!(demo.stats()["calls"], 3, "the refused call never reached the server");
    let after = overview(&gw);
    assert_eq!(server_of(&after, "store")["last_error"]["category"], "circuit_open", "{after}");
    assert_eq!(gw.admin_post("/admin/breakers/store/close").send().unwrap().status(), 200);
    assert_eq!(server_of(&overview(&gw), "store")["breaker"], "closed");
}

#[test]
fn the_calls_record_keeps_the_newest_calls_up_to_its_capacity_and_never_their_arguments() {
    let demo = Demo::http();
    let config = format!("{}[admin]\nrecent_calls = 3\n", http_server("store", &demo.url()));
    let gw = Gateway::start(&config, &[]);
    let marker = format!("MARKER-{}-{}", std::process::id(), free_port());
    let calls = [
        ("manga_search", json!({"query": marker})),
        ("price_lookup", json!({"manga_id": marker})),
        ("inventory_check", json!({"manga_ids": [marker]})),
        ("manga_search", json!({"query": format!("{marker} again")})),
        ("price_lookup", json!({"manga_id": "MNG-00000001"})),
    ];
    for (tool, arguments) in &calls {
        gw.call(tool, arguments.clone());
    }
    let (status, record) = admin_get_json(&gw, "/admin/calls");
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["capacity"], 3);
    let entries = record["calls"].as_array().unwrap();
    let tools: Vec<&str> = entries.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["price_lookup", "manga_search", "inventory_check"], "newest first: {record}");
    for entry in entries {
        assert_eq!(entry["server"], "store", "{entry}");
        assert!(entry["subject"].is_null(), "anonymous callers: {entry}");
        assert!(entry["at"].as_str().is_some_and(|at| at.ends_with('Z')), "{entry}");
        assert!(entry["latency_us"].as_u64().is_some() && entry["outcome"].is_string(), "{entry}");
    }
    assert_eq!((entries[0]["outcome"].as_str(), entries[0]["attempts"].as_u64()), (Some("success"), Some(1)));
    // The arguments are nowhere in what the console reads.
    for path in ["/admin/calls", "/admin/overview"] {
        let text = gw.admin_get(path).send().unwrap().text().unwrap();
        assert!(!text.contains(&marker), "{path} leaks an argument: {text}");
    }
}

#[test]
fn the_playground_calls_through_the_door_as_admin() {
    let demo = Demo::http();
    let scratch = Scratch::new("console-playground");
    let audit = scratch.path("audit.jsonl");
    let policy = TempFile::with(
        "console-playground.cedar",
        "@id(\"open\")\npermit (principal, action, resource);\n\
         @id(\"no-stock-for-admin\")\nforbid (principal == Caller::\"admin\", action, resource) when { resource.name == \"inventory_check\" };\n",
    );
    let config = format!(
        "{store}[tools.manga_search]\nfixed_arguments = {{ language = \"en\" }}\n[policy]\nfile = {policy:?}\n[audit]\nsink = \"file\"\nfile = \"{audit}\"\n",
        store = http_server("store", &demo.url()),
        policy = policy.path().to_str().unwrap(),
    );
    let gw = Gateway::start(&config, &[]);
    let upstream_calls = demo.stats()["calls"].clone();

    // The catalogue view the playground's form is built from: the schema callers see, and
    // what catalogue control changed (the fixed argument's name, not its value).
    let (_, registry) = admin_get_json(&gw, "/admin/registry");
    let search = registry["tools"].as_array().unwrap().iter().find(|t| t["name"] == "manga_search").unwrap();
    assert_eq!(search["control"]["fixed_arguments"], json!(["language"]), "{search}");
    assert!(search["input_schema"]["properties"]["query"].is_object(), "{search}");
    assert!(search["input_schema"]["properties"].get("language").is_none(), "{search}");
    assert_eq!(search["annotations"]["readOnlyHint"], true, "{search}");
    let price = registry["tools"].as_array().unwrap().iter().find(|t| t["name"] == "price_lookup").unwrap();
    assert!(price["control"].is_null(), "{price}");

    // Forbidden for subject admin by the policy: the structured error, nothing upstream.
    let denied =
        playground(&gw, &json!({"tool": "inventory_check", "arguments": {"manga_ids": ["MNG-00000001"]}}));
    assert_eq!(denied["error"]["data"]["category"], "forbidden", "{denied}");
    assert_eq!(denied["error"]["data"]["rule"], "no-stock-for-admin", "{denied}");
    // A fixed argument sent: refused before anything goes upstream.
    let fixed =
        playground(&gw, &json!({"tool": "manga_search", "arguments": {"query": "x", "language": "ja"}}));
    assert_eq!(fixed["error"]["data"]["category"], "bad_input", "{fixed}");
    assert!(fixed["error"]["code"].is_i64() && fixed["error"]["message"].is_string(), "{fixed}");
    assert_eq!(demo.stats()["calls"], upstream_calls, "no refused call reached the server");
    // A valid call: the server's result, with the fixed argument injected.
    let ok = playground(&gw, &json!({"tool": "manga_search", "arguments": {"query": "One Piece"}}));
    assert!(ok["result"]["content"].is_array(), "{ok}");
    assert_eq!(demo.stats()["last_tool"]["arguments"]["language"], "en");
    // The same pipeline as a caller's: three audit lines naming subject admin, and the record.
    let read = || -> Vec<Value> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_for("three audit lines", || read().len() >= 3);
    let lines = read();
    let seen: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (l["subject"].as_str().unwrap(), l["tool"].as_str().unwrap(), l["outcome"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("admin", "inventory_check", "forbidden"),
            ("admin", "manga_search", "bad_input"),
            ("admin", "manga_search", "ok")
        ]
    );
    let (_, record) = admin_get_json(&gw, "/admin/calls");
    let subject = record["calls"][0]["subject"].as_str().unwrap();
    assert!(subject.len() == 16 && subject != "admin", "a short hash of the subject: {record}");
    // Not a playground call: a body that names no tool; and no token, no call.
    let bad = gw.admin_post("/admin/playground").body("{\"arguments\": {}}").send().unwrap();
    assert_eq!(bad.status(), 400);
    let anonymous = gw.client.post(gw.url("/admin/playground")).json(&json!({"tool": "manga_search"})).send();
    assert_eq!(anonymous.unwrap().status(), 401);
    assert_eq!(read().len(), 3, "neither reached the door");
}

#[test]
fn the_console_assets_carry_the_csp_and_need_no_token_while_its_data_does() {
    let demo = Demo::http();
    let gw = Gateway::start(&http_server("store", &demo.url()), &[]);
    for (path, content_type) in ASSETS {
        let response = gw.client.get(gw.url(path)).send().unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        assert_eq!(header("content-security-policy"), CSP, "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header("cache-control"), "no-store", "{path}");
        assert!(header("content-type").starts_with(content_type), "{path}: {}", header("content-type"));
        assert!(response.headers().get("set-cookie").is_none(), "{path}");
    }
    for path in ["/admin/overview", "/admin/calls", "/admin/breakers", "/admin/registry/surface"] {
        let response = gw.client.get(gw.url(path)).send().unwrap();
        assert_eq!(response.status(), 401, "{path} without the token");
        let wrong = gw.client.get(gw.url(path)).bearer_auth("not-the-admin-token-at-all").send().unwrap();
        assert_eq!(wrong.status(), 401, "{path} with a wrong token");
        assert_eq!(gw.admin_get(path).send().unwrap().status(), 200, "{path} with the token");
    }

    // Admin off: the console is refused like every admin route.
    let off = Gateway::start_as_configured(&http_server("store", &demo.url()), &[]);
    for (path, _) in ASSETS {
        let response = off.client.get(off.url(path)).send().unwrap();
        assert_eq!(response.status(), 403, "{path} with admin off");
        assert!(response.headers().get("content-security-policy").is_none());
    }

    // On its own listener: not on the main one; on the admin listener without the token too.
    let port = free_port();
    let config = format!("{}[admin]\nlisten = \"127.0.0.1:{port}\"\n", http_server("store", &demo.url()));
    let own = Gateway::start(&config, &[]);
    let client = &own.client;
    assert_eq!(client.get(own.url("/admin/console")).send().unwrap().status(), 404);
    let admin_url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    wait_for("the admin listener", || client.get(admin_url("/admin/console")).send().is_ok());
    let page = client.get(admin_url("/admin/console")).send().unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-security-policy"], CSP);
    assert_eq!(client.get(admin_url("/admin/overview")).send().unwrap().status(), 401);
    assert_eq!(
        client.get(admin_url("/admin/overview")).bearer_auth(ADMIN_TOKEN).send().unwrap().status(),
        200
    );
}

#[test]
fn serve_demo_prints_where_the_console_is_and_a_one_off_token_that_opens_it() {
    let mut command = Command::new(bin());
    command
        .args(["serve", "--demo", "--listen", "127.0.0.1:0"])
        .env_remove("MCP_GATEWAY_ADMIN__TOKEN")
        .env_remove("MCP_GATEWAY_ADMIN__TOKEN_FILE")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    let (mut proc, addr) = Proc::spawn_listening("mcp-gateway", command);
    let console = format!("http://{addr}/admin/console");
    let startup = proc.wait_line("\"listen\"", Duration::from_secs(30));
    assert!(startup.contains(&format!("console at {console}")), "{startup}");
    let line = proc.wait_line("admin token (this run only): ", Duration::from_secs(30));
    assert!(line.contains(&console), "{line}");
    let token = line.rsplit(' ').next().unwrap().to_owned();
    assert!(token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
    assert!(proc.wait_line("operators' console at", Duration::from_secs(30)).contains(&console));
    // The token is printed once, and never in a log line.
    let output = proc.output();
    assert_eq!(output.matches(&token).count(), 1, "{output}");

    let client = reqwest::blocking::Client::new();
    let overview = format!("http://{addr}/admin/overview");
    assert_eq!(client.get(&overview).send().unwrap().status(), 401, "never weaker than the guard");
    assert_eq!(client.get(&overview).bearer_auth("0123456789abcdef0123").send().unwrap().status(), 401);
    let opened = client.get(&overview).bearer_auth(&token).send().unwrap();
    assert_eq!(opened.status(), 200);
    let body: Value = opened.json().unwrap();
    assert!(body["servers"].as_array().unwrap().iter().any(|s| s["name"] == "demo"), "{body}");
    assert_eq!(client.get(&console).send().unwrap().status(), 200);
    assert!(proc.terminate().success(), "{}", proc.output());
}

#[test]
fn check_config_shows_the_record_size_and_refuses_one_over_its_bound() {
    let shown = check_config(&["--json"], &[("MCP_GATEWAY_ADMIN__RECENT_CALLS", "0")]);
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    let config: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(config["admin"]["recent_calls"], 0, "0 turns the record off");
    let default = check_config(&["--json"], &[]);
    let config: Value = serde_json::from_slice(&default.stdout).unwrap();
    assert_eq!(config["admin"]["recent_calls"], 200);
    let refused = check_config(&["--json"], &[("MCP_GATEWAY_ADMIN__RECENT_CALLS", "10001")]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("admin.recent_calls = 10001 is over 10000"), "{stderr}");
}
