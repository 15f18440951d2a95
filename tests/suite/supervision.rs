//! Clocks a peer chooses, and the gateway's background loops (`src/clock.rs`,
//! `src/supervise.rs`), against the real binary and a real hostile peer
//! (`tests/peers/scripted/hostile_server.py`):
//!
//! - a token endpoint answering `expires_in: 18446744073709551615` (u64::MAX seconds) once
//!   panicked the refresher on `Instant + Duration`: the gateway never became ready and no
//!   server's tools were listed. Now its token is kept for the documented cap (one year), the
//!   gateway is ready, every server's tools are listed and the guarded server is called with
//!   the token, asked for once.
//! - every supervised loop made to panic once (the debug build's
//!   `MCP_GATEWAY_DEBUG_PANIC_ONCE`) is logged, counted in
//!   `mcp_gateway_background_restarts_total{loop}`, restarted, and does its job again.
//! - a loop that keeps dying (`MCP_GATEWAY_DEBUG_PANIC_ALWAYS`) makes `/readyz` answer 503
//!   naming it, while calls are still served.

use crate::common::*;
use serde_json::{Value, json};

/// The JSON log lines of `gateway` whose message is `message`.
fn log_lines(gateway: &Gateway, message: &str) -> Vec<Value> {
    gateway
        .proc
        .output()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == message)
        .collect()
}

#[test]
fn a_token_endpoint_answering_a_lifetime_of_u64_max_seconds_gets_a_capped_token_and_every_server_is_listed() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        r#"
{plain}
{guarded}
[servers.guarded.auth]
kind = "client_credentials"
token_url = "http://{addr}/token-forever"
client_id = "mcp-gateway"
client_secret_env = "GUARDED_SECRET"
"#,
        plain = http_server("plain", &format!("http://{addr}/steady")),
        guarded = http_server("guarded", &format!("http://{addr}/bearer")),
    );
    // On the code before the clock rule this never became ready: the refresher panicked.
    let gateway = Gateway::start(&config, &[("GUARDED_SECRET", "s3cret")]);
    let (status, report) = gateway.readyz();
    assert_eq!(status, 200, "{report}");
    let names = gateway.tool_names();
    for tool in ["steady_a", "steady_b", "guarded_echo"] {
        assert!(names.iter().any(|n| n == tool), "{tool} is not listed: {names:?}");
    }
    let answer = gateway.call("guarded_echo", json!({"q": "x"}));
    assert_eq!(result_text(&answer), "ok from /bearer", "{answer}");

    // One token for the listing and the call: kept, and for the capped lifetime.
    assert_eq!(hostile_hits(addr, "/token-forever"), 1);
    let obtained = log_lines(&gateway, "upstream token obtained");
    assert_eq!(obtained.len(), 1, "{obtained:?}");
    assert_eq!(obtained[0]["lifetime_secs"], json!(mcp_gateway::clock::MAX_TOKEN_LIFETIME.as_secs()));
    assert_eq!(obtained[0]["lifetime_capped"], json!(true), "{}", obtained[0]);
    let refused = hostile_log(addr).iter().filter(|r| r["path"] == "/bearer" && r["status"] != 200).count();
    assert_eq!(refused, 0, "every request reached the guarded server with the token");
    // And the refresher never had to be restarted.
    let metrics = gateway.metrics();
    assert!(metrics.contains("mcp_gateway_background_restarts_total{loop=\"refresher\"} 0"), "{metrics}");
}

/// The `[servers.child]` table of `tests/peers/scripted/stdio_peer.py`, recording to `events`.
fn stdio_child(events: &std::path::Path) -> String {
    let script = peers_dir().join("scripted/stdio_peer.py");
    let args = serde_json::to_string(&[script.display().to_string(), events.display().to_string()]).unwrap();
    format!("[servers.child]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = {args}\n")
}

/// The pids the stdio peer recorded as started, in order.
fn spawned(events: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("spawn ")?.trim().parse().ok())
        .collect()
}

#[test]
fn every_background_loop_made_to_panic_once_is_counted_restarted_and_does_its_job_again() {
    const LOOPS: &[&str] = &[
        "refresher",
        "list_changes",
        "change_stream",
        "recoveries",
        "prober",
        "connection",
        "policy_reload",
        "drift",
    ];
    let (_hostile, addr) = hostile_server(&[]);
    let scratch = Scratch::new("supervision");
    let events = std::path::PathBuf::from(scratch.path("child.events"));
    let policy = std::path::PathBuf::from(scratch.path("policy.cedar"));
    std::fs::write(
        &policy,
        "permit(principal, action, resource) unless { resource.name == \"steady_b\" };\n",
    )
    .unwrap();
    let config = format!(
        r#"
[defaults.retry]
max_retries_safe = 0
[defaults.breaker]
consecutive_failures = 3
min_calls = 1000
probe_interval_ms = 200
[registry]
drift_interval_secs = 1
[policy]
file = {policy:?}
reload_secs = 1
{plain}
{flaky}
{child}
"#,
        plain = http_server("plain", &format!("http://{addr}/steady")),
        flaky = http_server("flaky", &format!("http://{addr}/flaky")),
        child = stdio_child(&events),
    );
    let gateway = Gateway::start(&config, &[("MCP_GATEWAY_DEBUG_PANIC_ONCE", &LOOPS.join(","))]);

    // Every loop died once, was logged by name and counted.
    wait_for("every loop to be restarted once", || {
        let metrics = gateway.metrics();
        LOOPS.iter().all(|name| {
            metric(&metrics, "mcp_gateway_background_restarts_total", &[&format!("loop=\"{name}\"")]) == 1.0
        })
    });
    let panicked: Vec<String> = log_lines(&gateway, "background loop panicked; restarting it")
        .iter()
        .filter_map(|line| line["background_loop"].as_str().map(str::to_string))
        .collect();
    for name in LOOPS {
        assert_eq!(panicked.iter().filter(|n| n == name).count(), 1, "{name}: {panicked:?}");
    }

    // The refresher came back: ready, every server's tools listed (the policy hides steady_b).
    let (status, report) = gateway.readyz();
    assert_eq!(status, 200, "{report}");
    let names = gateway.tool_names();
    for tool in ["steady_a", "echo", "ok"] {
        assert!(names.iter().any(|n| n == tool), "{tool} is not listed: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "steady_b"), "{names:?}");

    // The connection came back: it died while starting its child; the child its restart
    // started (the last one) answers.
    let answer = gateway.call("ok", json!({}));
    let pid = structured(&answer)["pid"].as_u64().unwrap_or_else(|| panic!("{answer}"));
    let pids = spawned(&events);
    assert_eq!(pids.last().map(|p| u64::from(*p)), Some(pid), "{pids:?}");

    // The policy reload came back: a new file is read.
    let staged = policy.with_extension("staged");
    std::fs::write(&staged, "permit(principal, action, resource);\n").unwrap();
    std::fs::rename(&staged, &policy).unwrap();
    wait_for("the reloaded policy to list steady_b", || gateway.tool_names().iter().any(|n| n == "steady_b"));

    // The drift check came back (it died before its first check).
    wait_for("a drift check", || !log_lines(&gateway, "registry drift checked").is_empty());

    // The prober came back: the flaky server goes down, its breaker opens, probes fail; it
    // comes up, a probe succeeds and calls go through again.
    let post =
        |path: &str| reqwest::blocking::Client::new().post(format!("http://{addr}{path}")).send().unwrap();
    post("/_down");
    let probes = |result: &str| {
        metric(
            &gateway.metrics(),
            "mcp_gateway_breaker_health_probes_total",
            &[&format!("result=\"{result}\"")],
        )
    };
    wait_for("the breaker to open and a probe to fail", || {
        let _ = gateway.call("echo", json!({"q": "x"}));
        probes("failure") >= 1.0
    });
    post("/_up");
    wait_for("a probe to succeed and a call to go through", || {
        probes("success") >= 1.0 && gateway.call("echo", json!({"q": "x"})).get("result").is_some()
    });

    // Nothing died more than once: the gateway stays ready, no loop is reported dying.
    let (status, report) = gateway.readyz();
    assert_eq!(status, 200, "{report}");
    assert!(report.get("background_loops").is_none(), "{report}");
}

#[test]
fn a_loop_that_keeps_dying_makes_the_gateway_not_ready_and_is_named_while_the_rest_serves() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        "[registry]\ndrift_interval_secs = 1\n{}",
        http_server("plain", &format!("http://{addr}/steady"))
    );
    // The drift check panics on every run, restarted after 1 ms, 2 ms, 4 ms, …
    let gateway = Gateway::start_unready(
        &config,
        &[("MCP_GATEWAY_DEBUG_PANIC_ALWAYS", "drift"), ("MCP_GATEWAY_DEBUG_RESTART_BASE_MS", "1")],
        &[],
    );
    let restarts = |name: &str| {
        metric(&gateway.metrics(), "mcp_gateway_background_restarts_total", &[&format!("loop=\"{name}\"")])
    };
    wait_for("the drift check to die five times", || restarts("drift") >= 5.0);
    wait_for("the tools to be listed", || gateway.tool_names().iter().any(|n| n == "steady_a"));

    let (status, report) = gateway.readyz();
    assert_eq!(status, 503, "{report}");
    assert!(report["background_loops"]["drift"].as_u64() >= Some(5), "{report}");
    let reason = report["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("drift") && reason.contains("keep dying"), "{report}");
    assert_eq!(restarts("refresher"), 0.0);
    let answer = gateway.call("steady_a", json!({"q": "x"}));
    assert_eq!(result_text(&answer), "ok from /steady", "{answer}");
}
