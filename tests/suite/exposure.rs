//! What the running gateway exposes beyond its answers, against real processes: its logs
//! (every URL it writes is redacted, whatever path writes it), `GET /metrics` on the MCP
//! listener (closed once callers are identified), and the configured servers a registry
//! entry could borrow (refused unless the server opts in).
//!
//! - logs: a gateway at debug level, JSON lines, with secret-bearing URLs (`user:SECRET@`
//!   user-info and `?api_key=SECRET` query values) on every path that logs a URL — the token
//!   renewal after a 401 (OAuth peer + a JWT-checking MCP server), the era probe and the
//!   `tools/list` refresh of an HTTP server that refuses connections, the reconnects of a
//!   WebSocket and an SSE server that refuse them, an OAuth token endpoint that refuses them,
//!   a registry entry (Redis) whose URL is refused — and none of the secrets in its output.
//! - metrics: with `[auth]` and no setting, `/metrics` on the MCP listener answers 404 naming
//!   `metrics_listen`, which serves it; `main_listener = "admin"` serves it to the admin token
//!   only; without `[auth]` it stays open; `check-config` prints the setting in force.
//! - borrowing: a registry entry (in Redis) naming a configured server at another address is
//!   refused — no token fetched, nothing reaches the server, counted, logged, listed by
//!   `/admin/registry` — and with `servers.NAME.registry_may_use = true` it is served through
//!   that server, credentials and all.

use std::{process::Command, sync::atomic::Ordering};

use crate::{
    common::*,
    upstream_credentials::{Guarded, OAuth, SECRET, secret_file, whoami},
};
use serde_json::{Value, json};

fn redis_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
    assert!(output.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Writes a registry entry for `tool` on `server` into Redis (as `registry put` does).
fn put_entry(redis_port: u16, tool: &str, server: Value) {
    let entry = json!({
        "tool_name": tool,
        "definition": {"description": tool, "inputSchema": {"type": "object"}},
        "server": server,
        "status": "active",
        "healthy": true,
        "version": 1,
        "updated_at": "2025-01-01T00:00:00Z",
    });
    redis_cli(redis_port, &["SET", &format!("mcp:tool:{tool}"), &entry.to_string()]);
}

/// Whether a JSON log line of `output` has `message` and mentions `server`.
fn logged(output: &str, message: &str, server: &str) -> bool {
    output.lines().any(|l| l.contains(message) && l.contains(&format!("\"{server}\"")))
}

// --- Logs: every URL redacted ------------------------------------------------------------------

/// Secrets put into URLs (user-info and query values); none may reach the gateway's output.
const URL_SECRETS: &[&str] = &[
    "SECRET-renew-user",
    "SECRET-renew-query",
    "SECRET-probe",
    "SECRET-ws",
    "SECRET-sse",
    "SECRET-token",
    "SECRET-reg",
];

#[test]
fn every_path_that_logs_a_url_logs_it_redacted() {
    let scratch = Scratch::new("exposure-logs");
    let oauth = OAuth::start(&secret_file(&scratch, SECRET));
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let (_redis, redis_port) = redis_server();
    let guarded = upstream.url.trim_start_matches("http://");
    let closed = free_port();
    let config = format!(
        r#"
log_level = "debug"
ready_min_tools = 1
refresh_interval_secs = 1
redis_url = "redis://127.0.0.1:{redis_port}"
[servers.checkout]
transport = "http"
url = "http://gateway:SECRET-renew-user@{guarded}/mcp?api_key=SECRET-renew-query"
[servers.checkout.auth]
kind = "client_credentials"
token_url = "{}/token"
client_id = "mcp-gateway"
client_secret_file = "{}"
resource = "urn:mcp:checkout"
[servers.down_http]
transport = "http"
url = "http://probe:SECRET-probe@127.0.0.1:{closed}/mcp?api_key=SECRET-probe"
[servers.down_ws]
transport = "websocket"
url = "ws://ws:SECRET-ws@127.0.0.1:{closed}/ws?token=SECRET-ws"
reconnect_initial_ms = 50
reconnect_max_ms = 200
[servers.down_sse]
transport = "sse"
url = "http://sse:SECRET-sse@127.0.0.1:{closed}/sse?key=SECRET-sse"
reconnect_initial_ms = 50
reconnect_max_ms = 200
[servers.no_token]
transport = "http"
url = "http://127.0.0.1:{closed}/mcp"
[servers.no_token.auth]
kind = "client_credentials"
token_url = "http://client:SECRET-token@127.0.0.1:{closed}/token?tenant=SECRET-token"
client_id = "mcp-gateway"
client_secret_file = "{}"
"#,
        oauth.server,
        scratch.path("client-secret"),
        scratch.path("client-secret"),
    );
    let gw = Gateway::start(&config, &[]);

    // Renewal: the server revokes the token; the next call is refused (401), renewed, and
    // tried once more — the renewal's log line names the upstream URL.
    assert_eq!(whoami(&gw.call("whoami", json!({})))["sub"], "mcp-gateway");
    upstream.revoke_seen();
    assert_eq!(whoami(&gw.call("whoami", json!({})))["sub"], "mcp-gateway");
    assert_eq!(upstream.refused("revoked"), 1, "one refusal, then the renewed token");
    assert_eq!(oauth.client_credentials(), 2, "exactly one renewal");

    // A registry entry whose URL (with secrets) the allowlist refuses.
    put_entry(
        redis_port,
        "leaky_lookup",
        json!({"name": "leaky", "transport": "http", "url": format!("http://reg:SECRET-reg@127.0.0.1:{closed}/mcp?api_key=SECRET-reg")}),
    );
    expect_error(&gw.call("leaky_lookup", json!({})), -32010, "upstream_not_allowed");

    // Every path has logged (log lines are written behind the answers: wait for them).
    let paths: [(&str, &str); 8] = [
        ("renewing it and trying once more", "url"),
        ("era probe failed", "url"),
        ("tools/list failed", "down_http"),
        ("upstream connection attempt failed", "down_ws"),
        ("upstream connection attempt failed", "down_sse"),
        ("persistent upstream connection starting", "down_ws"),
        ("upstream token request failed", "no_token"),
        ("upstream URL refused", "leaky"),
    ];
    for (message, server) in paths {
        wait_for(&format!("{message:?} ({server})"), || logged(&gw.proc.output(), message, server));
    }
    let output = gw.proc.output();
    for secret in URL_SECRETS {
        assert!(!output.contains(secret), "{secret} in the gateway's output:\n{output}");
    }
    // The lines still say which endpoint: user names and query keys stay.
    let renewal = output.lines().find(|l| l.contains("renewing it and trying once more")).unwrap_or_default();
    assert!(renewal.contains("gateway:<redacted>@") && renewal.contains("api_key=<redacted>"), "{renewal}");
}

// --- /metrics on the MCP listener --------------------------------------------------------------

const HEADER_AUTH: &str = "[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\n";

fn check_config(config: &str) -> Value {
    let file = TempFile::with("exposure-check.toml", config);
    let output = Command::new(BIN).args(["check-config", "--json", "--config", file.arg()]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn with_auth_metrics_leave_the_mcp_listener_for_metrics_listen() {
    let metrics_port = free_port();
    let config = format!("ready_min_tools = 0\nmetrics_listen = \"127.0.0.1:{metrics_port}\"\n{HEADER_AUTH}");
    let gw = Gateway::start(&config, &[]);
    // Closed on the MCP listener, even with the admin token; the body says where they are.
    for with_token in [false, true] {
        let mut request = gw.client.get(gw.url("/metrics"));
        if with_token {
            request = request.bearer_auth(ADMIN_TOKEN);
        }
        let response = request.send().unwrap();
        assert_eq!(response.status(), 404);
        let body: Value = response.json().unwrap();
        assert!(
            body["metrics"].as_str().unwrap().contains(&format!("127.0.0.1:{metrics_port}/metrics")),
            "{body}"
        );
        assert!(body["error"].as_str().unwrap().contains("metrics.main_listener"), "{body}");
    }
    // The metrics listener serves them.
    let scraped = gw.client.get(format!("http://127.0.0.1:{metrics_port}/metrics")).send().unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(scraped.text().unwrap().contains("mcp_gateway_"));
    assert_eq!(check_config(&config)["metrics"]["main_listener"], "closed");

    // Without [auth], as in the quick start: open on the one listener.
    let open = Gateway::start("ready_min_tools = 0\n", &[]);
    let response = open.client.get(open.url("/metrics")).send().unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().unwrap().contains("mcp_gateway_"));
    assert_eq!(check_config("ready_min_tools = 0\n")["metrics"]["main_listener"], "open");
}

#[test]
fn admin_mode_serves_metrics_to_the_admin_token_only() {
    let config = format!("ready_min_tools = 0\n{HEADER_AUTH}[metrics]\nmain_listener = \"admin\"\n");
    let gw = Gateway::start(&config, &[]);
    let refused = gw.client.get(gw.url("/metrics")).send().unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
    let body: Value = refused.json().unwrap();
    assert!(body["error"].as_str().unwrap().contains("admin token"), "{body}");
    let wrong = gw.client.get(gw.url("/metrics")).bearer_auth("not-the-admin-token-at-all").send().unwrap();
    assert_eq!(wrong.status(), 401);
    // A caller identity is not the admin token.
    let caller = gw.client.get(gw.url("/metrics")).header("x-caller-subject", "alice").send().unwrap();
    assert_eq!(caller.status(), 401);
    let served = gw.client.get(gw.url("/metrics")).bearer_auth(ADMIN_TOKEN).send().unwrap();
    assert_eq!(served.status(), 200);
    assert!(served.text().unwrap().contains("mcp_gateway_"));
    assert_eq!(check_config(&config)["metrics"]["main_listener"], "admin");
}

// --- A registry entry borrowing a configured server --------------------------------------------

/// The gateway's configuration: `checkout` behind client credentials (a static tool only, so
/// `whoami` exists in the catalogue only through the registry), the registry in Redis.
fn borrow_config(
    oauth: &OAuth,
    upstream: &Guarded,
    secret_path: &str,
    redis_port: u16,
    opt_in: bool,
) -> String {
    format!(
        r#"
redis_url = "redis://127.0.0.1:{redis_port}"
ready_min_tools = 0
[servers.checkout]
transport = "http"
url = "{}/mcp"
discover = false
registry_may_use = {opt_in}
tools = [{{ name = "cart_total", description = "unused here", inputSchema = {{ type = "object" }} }}]
[servers.checkout.auth]
kind = "client_credentials"
token_url = "{}/token"
client_id = "mcp-gateway"
client_secret_file = "{secret_path}"
resource = "urn:mcp:checkout"
"#,
        upstream.url, oauth.server
    )
}

#[test]
fn a_registry_entry_naming_a_configured_server_elsewhere_is_refused_unless_the_server_opts_in() {
    let scratch = Scratch::new("exposure-borrow");
    let secret_path = secret_file(&scratch, SECRET);
    let oauth = OAuth::start(&secret_path);
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let (_redis, redis_port) = redis_server();
    let (trap_port, trap_connections) = counting_listener();
    // The registry writer names the configured server, at an address of its own.
    put_entry(
        redis_port,
        "whoami",
        json!({"name": "checkout", "transport": "http", "url": format!("http://127.0.0.1:{trap_port}/mcp")}),
    );

    let gw =
        Gateway::start(&borrow_config(&oauth, &upstream, &secret_path, redis_port, false), REGISTRY_LOOPBACK);
    for _ in 0..2 {
        let answer = gw.call("whoami", json!({}));
        let data = expect_error(&answer, -32010, "upstream_not_allowed");
        assert_eq!(data["reason"], "configured_server", "{answer}");
        assert_eq!(data["tool"], "whoami", "{answer}");
    }
    // No token was fetched, nothing reached the configured server nor the entry's address.
    assert_eq!(oauth.client_credentials(), 0, "the configured server's credentials were used");
    assert!(upstream.seen().is_empty(), "the configured server was called: {:?}", upstream.seen());
    assert_eq!(trap_connections.load(Ordering::SeqCst), 0);
    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_upstreams_refused_total", &["reason=\"configured_server\""]),
        2.0,
        "{m}"
    );
    let (_, registry) = admin_get_json(&gw, "/admin/registry");
    let refused = registry["refused"].as_array().unwrap_or_else(|| panic!("{registry}"));
    assert_eq!(refused.len(), 1, "{registry}");
    assert_eq!(refused[0]["server"], "checkout");
    assert_eq!(refused[0]["reason"], "configured_server");
    wait_for("the refusal's log line", || {
        logged(&gw.proc.output(), "registry entry names a configured server", "checkout")
    });
    drop(gw);

    // The server opts in: the entry is served through it, its token and all.
    let gw =
        Gateway::start(&borrow_config(&oauth, &upstream, &secret_path, redis_port, true), REGISTRY_LOOPBACK);
    let claims = whoami(&gw.call("whoami", json!({})));
    assert_eq!(claims["sub"], "mcp-gateway", "{claims}");
    assert_eq!(claims["aud"], "urn:mcp:checkout", "{claims}");
    assert_eq!(oauth.client_credentials(), 1);
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(trap_connections.load(Ordering::SeqCst), 0, "the configured address is used, not the entry's");

    // Opting in does not lift the allowlist from the entry's own address.
    put_entry(
        redis_port,
        "whoami",
        json!({"name": "checkout", "transport": "http", "url": "http://169.254.169.254/mcp"}),
    );
    redis_cli(redis_port, &["PUBLISH", "mcp:tool:invalidate", "whoami"]);
    wait_for("the changed entry to be refused by the allowlist", || {
        redis_cli(redis_port, &["PUBLISH", "mcp:tool:invalidate", "whoami"]);
        gw.call("whoami", json!({}))["error"]["data"]["category"] == "upstream_not_allowed"
    });
    let reached = upstream.seen().len();
    let answer = gw.call("whoami", json!({}));
    assert_eq!(
        expect_error(&answer, -32010, "upstream_not_allowed")["reason"],
        "not_allowlisted",
        "{answer}"
    );
    assert_eq!(upstream.seen().len(), reached, "the refused entry reached the configured server");
}
