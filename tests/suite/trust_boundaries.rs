//! Trust boundaries of the running binary: what a browser page on the host, a registry writer
//! and a model inventing tool names can make the gateway do, and what its logs give away.
//! Real processes throughout: the gateway binary, the demo MCP server, redis-server, and a
//! plain TCP listener that counts every connection it is offered.

use std::{process::Command, sync::atomic::Ordering};

use crate::common::*;
use serde_json::{Value, json};

// --- Browser boundary: Host/Origin on every route, admin token -----------------------------

const GET_ROUTES: &[&str] = &[
    "/metrics",
    "/healthz",
    "/readyz",
    "/tools",
    "/capabilities",
    "/admin/breakers",
    "/admin/connections",
    "/admin/registry",
    "/admin/registry/drift",
];
const ADMIN_POSTS: &[&str] = &["/admin/breakers/demo/open", "/admin/registry/refresh"];

fn demo_gateway() -> Gateway {
    Gateway::start_with_args("", &[], &["--demo"])
}

fn breaker_state(gw: &Gateway) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_breaker_state", &["server=\"demo\""])
}

#[test]
fn a_browser_page_or_a_rebound_name_is_refused_on_every_route() {
    let gw = demo_gateway();
    let port = gw.addr.port();
    let rebound_host = format!("evil.example:{port}");
    // Cross-origin page (Origin), DNS rebinding (Host names the attacker's domain); both
    // carry the right admin token, which must not help.
    let attacks: [(&str, &str); 2] = [("origin", "http://evil.example"), ("host", rebound_host.as_str())];
    for (header, value) in attacks {
        for path in GET_ROUTES {
            let response = gw.admin_get(path).header(header, value).send().unwrap();
            assert_eq!(response.status(), 403, "GET {path} with {header}: {value}");
            let body: Value = response.json().unwrap();
            assert_eq!(body["error"]["data"]["category"], "forbidden_origin", "{path}: {body}");
        }
        for path in ADMIN_POSTS {
            let response = gw.admin_post(path).header(header, value).send().unwrap();
            assert_eq!(response.status(), 403, "POST {path} with {header}: {value}");
        }
        let response = gw
            .client
            .post(gw.url("/mcp"))
            .header(header, value)
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
            .send()
            .unwrap();
        assert_eq!(response.status(), 403, "POST /mcp with {header}: {value}");
    }
    assert_eq!(breaker_state(&gw), 0.0, "the forced open never happened");
    // The same requests from the sidecar's own task pass.
    for path in GET_ROUTES {
        assert_eq!(
            gw.admin_get(path).header("origin", "http://127.0.0.1:3000").send().unwrap().status(),
            200,
            "{path}"
        );
    }
    let m = gw.metrics();
    let refused = metric(&m, "mcp_gateway_http_rejections_total", &["reason=\"forbidden_origin\""])
        + metric(&m, "mcp_gateway_http_rejections_total", &["reason=\"forbidden_host\""]);
    assert_eq!(refused, 2.0 * (GET_ROUTES.len() + ADMIN_POSTS.len() + 1) as f64, "{m}");
}

#[test]
fn admin_actions_need_the_bearer_token() {
    let gw = demo_gateway();
    let open = "/admin/breakers/demo/open";
    let no_token = gw.client.post(gw.url(open)).send().unwrap();
    assert_eq!(no_token.status(), 401);
    assert!(no_token.headers().contains_key("www-authenticate"));
    let wrong = gw.client.post(gw.url(open)).bearer_auth("harness-admin-token-0123456788").send().unwrap();
    assert_eq!(wrong.status(), 401);
    let short = gw.client.get(gw.url("/admin/breakers")).bearer_auth("harness").send().unwrap();
    assert_eq!(short.status(), 401);
    assert_eq!(breaker_state(&gw), 0.0, "refused requests changed nothing");
    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_http_rejections_total", &["reason=\"admin_unauthorized\""]),
        3.0,
        "{m}"
    );

    let opened = gw.admin_post(open).send().unwrap();
    assert_eq!(opened.status(), 200);
    assert_eq!(breaker_state(&gw), 1.0);
    assert_eq!(gw.admin_post("/admin/breakers/demo/close").send().unwrap().status(), 200);
    assert_eq!(breaker_state(&gw), 0.0);
}

#[test]
fn without_a_token_or_an_admin_listener_admin_routes_are_off_and_say_how_to_enable_them() {
    let gw = Gateway::start_as_configured("", &[("MCP_GATEWAY_READY_MIN_TOOLS", "0")]);
    for path in ["/admin/breakers", "/admin/registry"] {
        let response = gw.client.get(gw.url(path)).bearer_auth(ADMIN_TOKEN).send().unwrap();
        assert_eq!(response.status(), 403, "{path}");
        let body: Value = response.json().unwrap();
        let why = body["error"].as_str().unwrap();
        assert!(why.contains("admin.token_file") && why.contains("admin.listen"), "{body}");
    }
    assert_eq!(gw.client.post(gw.url("/admin/registry/refresh")).send().unwrap().status(), 403);
    assert_eq!(gw.client.get(gw.url("/healthz")).send().unwrap().status(), 200, "the rest is served");
}

#[test]
fn an_admin_listener_serves_the_admin_routes_and_only_there() {
    let admin_port = free_port();
    let config = format!("[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n");
    let mut gw = Gateway::start_as_configured(&config, &[("MCP_GATEWAY_READY_MIN_TOOLS", "0")]);
    gw.proc.wait_line("admin listener on", std::time::Duration::from_secs(30));
    let admin = |path: &str| format!("http://127.0.0.1:{admin_port}{path}");
    let elsewhere = gw.client.get(gw.url("/admin/breakers")).send().unwrap();
    assert_eq!(elsewhere.status(), 404);
    let body: Value = elsewhere.json().unwrap();
    assert!(body["error"].as_str().unwrap().contains("admin.listen"), "{body}");
    assert_eq!(gw.client.get(admin("/admin/breakers")).send().unwrap().status(), 200);
    assert_eq!(gw.client.post(admin("/admin/registry/refresh")).send().unwrap().status(), 202);
    assert_eq!(gw.client.get(admin("/metrics")).send().unwrap().status(), 404, "admin routes only");
    let rebound = gw.client.get(admin("/admin/breakers")).header("host", "evil.example").send().unwrap();
    assert_eq!(rebound.status(), 403, "the admin listener checks Host too");
    let cross = gw
        .client
        .post(admin("/admin/registry/refresh"))
        .header("origin", "http://evil.example")
        .send()
        .unwrap();
    assert_eq!(cross.status(), 403, "and Origin");
}

// --- Registry entries: URL allowlist, removed entries ----------------------------------------

fn redis_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
    assert!(output.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Writes a registry entry for `tool` on server `server` at `url` (transport from the URL).
fn put_entry(redis_port: u16, tool: &str, server: &str, transport: &str, url: &str) {
    let entry = json!({
        "tool_name": tool,
        "definition": {"description": tool, "inputSchema": {"type": "object"}},
        "server": {"name": server, "transport": transport, "url": url},
        "status": "active",
        "healthy": true,
        "version": 1,
        "updated_at": "2025-01-01T00:00:00Z",
    });
    redis_cli(redis_port, &["SET", &format!("mcp:tool:{tool}"), &entry.to_string()]);
}

#[test]
fn registry_entries_pointing_outside_the_allowlist_are_refused_and_nothing_is_sent() {
    let (_redis, redis_port) = redis_server();
    let demo = Demo::http();
    let (trap_port, trap_connections) = counting_listener();
    // The demo's exact address is named; everything else only through the `http://*:*`
    // wildcard, which never reaches loopback, link-local or metadata addresses.
    let allow = format!(r#"["http://127.0.0.1:{}", "http://*:*"]"#, demo.addr.port());
    let config = format!("redis_url = \"redis://127.0.0.1:{redis_port}\"\nready_min_tools = 0\n");
    let gw = Gateway::start(&config, &[("MCP_GATEWAY_REGISTRY__UPSTREAM_URLS__ALLOW", allow.as_str())]);

    put_entry(
        redis_port,
        "imds",
        "imds",
        "http",
        "http://169.254.169.254/latest/meta-data/iam?token=SECRET9",
    );
    put_entry(redis_port, "loopback_trap", "trap", "http", &format!("http://127.0.0.1:{trap_port}/mcp"));
    put_entry(redis_port, "ws_trap", "wstrap", "websocket", &format!("ws://127.0.0.1:{trap_port}/ws"));
    put_entry(redis_port, "sneaky", "sneaky", "http", &format!("http://localhost:{trap_port}/mcp"));
    put_entry(redis_port, "price_lookup", "demo", "http", &demo.url());

    for (tool, reason) in [
        ("imds", "special_address"),
        ("loopback_trap", "special_address"),
        ("ws_trap", "not_allowlisted"),
        ("sneaky", "special_address"),
    ] {
        for _ in 0..2 {
            let answer = gw.call(tool, json!({}));
            let data = expect_error(&answer, -32010, "upstream_not_allowed");
            assert_eq!(data["reason"], reason, "{tool}: {answer}");
            assert_eq!(data["tool"], tool, "{answer}");
            assert!(!answer.to_string().contains("SECRET9"), "{answer}");
        }
    }
    // The allowed entry works: the refusals are the allowlist's, not a broken registry.
    let allowed = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(structured(&allowed)["retail_price"], 528, "{allowed}");
    assert_eq!(trap_connections.load(Ordering::SeqCst), 0, "nothing was sent to the trap");

    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_upstreams_refused_total", &["reason=\"special_address\""]),
        6.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "mcp_gateway_registry_upstreams_refused_total", &["reason=\"not_allowlisted\""]),
        2.0,
        "{m}"
    );
    // Log lines are written behind the answers: wait for the one of the first refusal.
    let refusal_logged =
        |output: &str| output.lines().any(|l| l.contains("upstream URL refused") && l.contains("\"imds\""));
    wait_for("the refusal's log line", || refusal_logged(&gw.proc.output()));
    let output = gw.proc.output();
    let refusal_line = output
        .lines()
        .find(|l| l.contains("upstream URL refused") && l.contains("\"imds\""))
        .unwrap_or_else(|| panic!("no refusal log line naming the tool:\n{output}"));
    assert!(refusal_line.contains("token=<redacted>") && !output.contains("SECRET9"), "{refusal_line}");
}

#[test]
fn a_removed_registry_entry_drops_the_upstream_built_from_it() {
    let (_redis, redis_port) = redis_server();
    let demo = Demo::http();
    let config = format!("redis_url = \"redis://127.0.0.1:{redis_port}\"\nready_min_tools = 0\n");
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    put_entry(redis_port, "price_lookup", "regdemo", "http", &demo.url());
    assert!(gw.call("price_lookup", json!({"manga_id": "MNG-00000001"})).get("result").is_some());
    let (_, breakers) = admin_get_json(&gw, "/admin/breakers");
    assert!(breakers.get("regdemo").is_some(), "built from the entry: {breakers}");
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_registry_upstreams ", &[]), 1.0);

    // The entry goes (as `registry delete` does it: key deleted, invalidation published).
    redis_cli(redis_port, &["DEL", "mcp:tool:price_lookup"]);
    wait_for("the registry server to be dropped", || {
        // Published again until seen: the gateway's subscription may still be starting.
        redis_cli(redis_port, &["PUBLISH", "mcp:tool:invalidate", "price_lookup"]);
        admin_get_json(&gw, "/admin/breakers").1.get("regdemo").is_none()
    });
    let m = gw.metrics();
    assert_eq!(metric(&m, "mcp_gateway_registry_upstreams ", &[]), 0.0, "{m}");
    assert_eq!(metric(&m, "mcp_gateway_registry_upstreams_dropped_total", &[]), 1.0, "{m}");
    expect_error(&gw.call("price_lookup", json!({"manga_id": "MNG-00000001"})), -32002, "unknown_tool");
}

// --- Made-up names: a bounded number of remote lookups -----------------------------------------

fn redis_gets(redis_port: u16) -> u64 {
    let stats = redis_cli(redis_port, &["INFO", "commandstats"]);
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[test]
fn a_burst_of_made_up_names_costs_a_bounded_number_of_remote_lookups() {
    let (_redis, redis_port) = redis_server();
    let (per_sec, burst) = (2u64, 10u64);
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{redis_port}\"\nready_min_tools = 0\n[registry.remote_misses]\nper_sec = {per_sec}\nburst = {burst}\n"
    );
    let gw = Gateway::start(&config, &[]);
    // Names no tool API accepts never go below memory at all.
    redis_cli(redis_port, &["CONFIG", "RESETSTAT"]);
    for i in 0..30 {
        expect_error(&gw.call(&format!("not a tool name {i}!"), json!({})), -32002, "unknown_tool");
    }
    assert_eq!(redis_gets(redis_port), 0);

    redis_cli(redis_port, &["CONFIG", "RESETSTAT"]);
    let names = 300;
    for i in 0..names {
        expect_error(&gw.call(&format!("invented_{i}"), json!({})), -32002, "unknown_tool");
    }
    // What happened, counted on both sides: the budget is spent on lookups first, every name
    // beyond it is answered without one (the bucket refills at `per_sec`, far slower than the
    // burst), and each admitted lookup is exactly one Redis GET.
    let gets = redis_gets(redis_port);
    let m = gw.metrics();
    assert!(gets >= burst, "the budget is spent on lookups first: {gets}\n{m}");
    let admitted = metric(&m, "mcp_gateway_registry_remote_lookups_total", &["result=\"admitted\""]);
    let over = metric(&m, "mcp_gateway_registry_remote_lookups_total", &["result=\"over_budget\""]);
    assert_eq!(admitted as u64, gets, "the gateway's count agrees with Redis's: {m}");
    assert_eq!((admitted + over) as u64, names, "{m}");
    assert!(
        over as u64 > names / 2,
        "{gets} Redis GETs for {names} made-up names (per_sec {per_sec}, burst {burst})\n{m}"
    );
}

// --- Secrets in logs and check-config --------------------------------------------------------

const SECRETS: &[&str] = &["SECRET123", "pass@", "hunter2-ARG", "sk-live-0123456789abcdef"];

#[test]
fn urls_and_arguments_are_redacted_in_logs_and_check_config() {
    let demo = Demo::http();
    let url = format!("http://user:pass@{}/mcp?api_key=SECRET123&region=eu", demo.addr);
    let config = format!(
        "ready_min_tools = 0\n[servers.keyed]\ntransport = \"http\"\nurl = \"{url}\"\n\
         [servers.child]\ntransport = \"stdio\"\ncommand = \"python3\"\n\
         args = [\"-c\", \"import sys; sys.stdin.read()\", \"--api-key\", \"hunter2-ARG\", \"--token=sk-live-0123456789abcdef\", \"--port\", \"8080\"]\n"
    );
    let mut gw = Gateway::start(&config, &[]);
    // The era probe logs the upstream's URL.
    gw.proc.wait_line("upstream speaks", std::time::Duration::from_secs(30));
    gw.proc.wait_line("persistent upstream connection starting", std::time::Duration::from_secs(30));
    let logs = gw.proc.output();
    for secret in SECRETS {
        assert!(!logs.contains(secret), "{secret} in the logs:\n{logs}");
    }
    assert!(logs.contains("/mcp?api_key=<redacted>&region=<redacted>"), "the URL stays readable:\n{logs}");

    let file = TempFile::with("trust-check-config.toml", &config);
    for json_flag in [false, true] {
        let mut command = Command::new(BIN);
        command.args(["check-config", "--config", file.arg()]);
        if json_flag {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let printed = String::from_utf8(output.stdout).unwrap();
        for secret in SECRETS {
            assert!(
                !printed.contains(secret),
                "{secret} printed by check-config (json {json_flag}):\n{printed}"
            );
        }
        if json_flag {
            let parsed: Value = serde_json::from_str(&printed).unwrap();
            assert_eq!(
                parsed["servers"]["keyed"]["url"],
                format!("http://user:<redacted>@{}/mcp?api_key=<redacted>&region=<redacted>", demo.addr)
            );
            assert_eq!(
                parsed["servers"]["child"]["args"],
                json!([
                    "-c",
                    "import sys; sys.stdin.read()",
                    "--api-key",
                    "<redacted>",
                    "--token=<redacted>",
                    "--port",
                    "8080"
                ])
            );
        }
    }
}
