//! stdio upstreams, end to end with real processes: the official `server-everything` in its
//! stdio mode, and `tests/peers/scripted/stdio_peer.py`, a child that misbehaves on request (dies
//! mid-answer, answers with a wrong id, writes garbage, never answers, sends an oversized
//! line, asks the gateway things). Every child appends its spawns and the cancellations it
//! receives to an events file, so restarts and cancellations are counted, not timed.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{
    Gateway, TempFile, everything_entry, expect_error, get_json, metric, peers_dir, structured, wait_for,
};
use serde_json::{Value, json};

fn peer_script() -> PathBuf {
    let script = peers_dir().join("scripted/stdio_peer.py");
    assert!(script.exists(), "tests/peers/scripted/stdio_peer.py is missing");
    script
}

/// A fresh events file for one child (removed when the test ends).
fn events_file(test: &str) -> TempFile {
    TempFile::new(&format!("stdio-{test}.events"))
}

fn events(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Pids of the children started so far, in order.
fn spawns(path: &Path) -> Vec<u32> {
    events(path).iter().filter_map(|l| l.strip_prefix("spawn ")?.parse().ok()).collect()
}

fn cancellations(path: &Path) -> usize {
    events(path).iter().filter(|l| l.starts_with("cancelled ")).count()
}

/// A `[servers.NAME]` table running the peer with `events`, plus `extra` lines.
fn peer_server(name: &str, events: &Path, args: &[&str], extra: &str) -> String {
    let mut all = vec![peer_script().display().to_string(), events.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    format!(
        "[servers.{name}]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = {}\n{extra}\n",
        serde_json::to_string(&all).unwrap()
    )
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn pid_in_log(gateway: &Gateway, server: &str) -> u32 {
    let output = gateway.proc.output();
    let line = output
        .lines()
        .find(|l| {
            l.contains("stdio server process started") && l.contains(&format!("\"server\":\"{server}\""))
        })
        .unwrap_or_else(|| panic!("no start line for {server}:\n{output}"));
    let v: Value = serde_json::from_str(line).unwrap();
    v["pid"].as_u64().unwrap() as u32
}

#[test]
fn server_everything_over_stdio_is_listed_called_and_heard() {
    let demo = common::Demo::http();
    let config = format!(
        "[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n\n[servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
        demo.url(),
        everything_entry().display()
    );
    let mut gateway = Gateway::start(&config, &[]);
    wait_for("both servers' tools", || {
        let names = gateway.tool_names();
        names.contains(&"echo".to_string()) && names.contains(&"manga_search".to_string())
    });

    let answer = gateway.call("echo", json!({"message": "over stdio"}));
    assert_eq!(answer["result"]["content"][0]["text"], "Echo: over stdio", "{answer}");
    let report = gateway.connections();
    assert_eq!(report["every"]["state"], "ready", "{report}");
    assert_eq!(report["every"]["transport"], "stdio");
    assert!(report["every"]["protocol_version"].is_string(), "{report}");
    assert!(report.get("demo").is_none(), "HTTP servers have no persistent connection: {report}");

    // Its stderr is in the gateway's log, as warn lines naming the server.
    wait_for("server-everything's stderr in the gateway log", || {
        gateway.proc.output().lines().any(|l| {
            l.contains("upstream stderr") && l.contains("\"server\":\"every\"") && l.contains("STDIO")
        })
    });
    let metrics = gateway.metrics();
    assert_eq!(
        metric(&metrics, "mcp_gateway_upstream_connection_state", &["server=\"every\"", "state=\"ready\""]),
        1.0
    );
    assert_eq!(metric(&metrics, "mcp_gateway_upstream_connection_state", &["server=\"every\""]), 1.0);
    assert_eq!(metric(&metrics, "mcp_gateway_upstream_era", &["server=\"every\"", "era=\"session\""]), 1.0);

    let child = pid_in_log(&gateway, "every");
    assert!(process_exists(child));
    let status = gateway.proc.terminate();
    assert!(status.success(), "{status}");
    assert!(!process_exists(child), "server-everything (pid {child}) outlived the gateway");
}

#[test]
fn a_lying_or_babbling_child_times_out_alone_and_keeps_its_connection() {
    let events = events_file("lying");
    let events = events.path();
    let config = format!("ready_min_tools = 1\n{}", peer_server("peer", events, &[], "timeout_ms = 2500"));
    let gateway = Gateway::start(&config, &[]);
    let first = gateway.call("ok", json!({}));
    let pid = structured(&first)["pid"].as_u64().unwrap() as u32;

    // An answer with an id nobody used completes nothing: the call times out, the answer is
    // dropped and counted.
    let answer = gateway.call("wrong_id", json!({}));
    expect_error(&answer, -32001, "timeout");
    assert!(answer.get("result").is_none(), "the invented id completed a call: {answer}");
    // Lines that are not JSON-RPC are dropped and counted; the framing holds.
    let answer = gateway.call("garbage", json!({}));
    expect_error(&answer, -32001, "timeout");
    let answer = gateway.call("hang", json!({}));
    let data = expect_error(&answer, -32001, "timeout");
    assert_eq!(data["attempts"], 1, "{answer}");

    let metrics = gateway.metrics();
    assert!(
        metric(
            &metrics,
            "mcp_gateway_upstream_dropped_messages_total",
            &["server=\"peer\"", "reason=\"unknown_id\""]
        ) >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_upstream_dropped_messages_total",
            &["server=\"peer\"", "reason=\"invalid\""]
        ),
        3.0
    );
    // Every abandoned call was cancelled upstream, by the gateway's own id.
    wait_for("three notifications/cancelled", || cancellations(events) >= 3);
    assert_eq!(cancellations(events), 3, "{:?}", self::events(events));

    // Same child, still ready: no restart for any of it.
    let again = gateway.call("ok", json!({}));
    assert_eq!(structured(&again)["pid"].as_u64().unwrap() as u32, pid);
    assert_eq!(spawns(events), vec![pid]);
    assert_eq!(gateway.connection_state("peer"), "ready");

    // Requests the child sends the gateway are answered at once: ping with {}, the rest -32601.
    let asked = gateway.call("ask", json!({}));
    assert_eq!(structured(&asked)["ping"], json!({}), "{asked}");
    assert_eq!(structured(&asked)["roots"]["code"], -32601, "{asked}");
}

#[test]
fn answers_out_of_order_reach_their_own_callers_whatever_ids_the_callers_used() {
    let events = events_file("order");
    let events = events.path();
    let config = format!("ready_min_tools = 1\n{}", peer_server("peer", events, &[], ""));
    let gateway = std::sync::Arc::new(Gateway::start(&config, &[]));
    // Both callers use JSON-RPC id 1; the child answers the second call first.
    let first = {
        let gateway = gateway.clone();
        std::thread::spawn(move || gateway.call("held", json!({})))
    };
    wait_for("the held call at the child", || self::events(events).iter().any(|l| l.starts_with("held ")));
    let second = gateway.call("ok", json!({}));
    let first = first.join().unwrap();
    assert_eq!(second["id"], 1);
    assert_eq!(structured(&second)["ok"], true, "{second}");
    assert_eq!(first["id"], 1);
    assert_eq!(structured(&first)["held"], true, "{first}");
    // The child saw two different ids: the gateway's own, not the callers'.
    let held_id =
        self::events(events).iter().find_map(|l| l.strip_prefix("held ")?.parse::<u64>().ok()).unwrap();
    assert_ne!(structured(&first)["released_by"].as_u64().unwrap(), held_id);
}

#[test]
fn a_child_gets_its_own_env_and_none_of_the_gateways() {
    let events = events_file("environ");
    let events = events.path();
    let config = format!(
        "ready_min_tools = 1\n{}",
        peer_server("peer", events, &[], "env = { PEER_SETTING = \"peer-setting-7f3a\" }")
    );
    // The gateway's environment holds credentials (here the test AWS keys every test gateway
    // gets, and a header secret); none of it may reach a child.
    let gateway =
        Gateway::start(&config, &[("MCP_GATEWAY_SERVERS__PEER__HEADERS__AUTHORIZATION", "Bearer s3cret")]);
    let answer = gateway.call("environ", json!({}));
    let seen = structured(&answer);
    assert_eq!(seen["PEER_SETTING"], "peer-setting-7f3a", "{answer}");
    let names: Vec<&str> = seen["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(names.contains(&"PATH"), "{names:?}");
    for leaked in
        ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MCP_GATEWAY_SERVERS__PEER__HEADERS__AUTHORIZATION"]
    {
        assert!(!names.contains(&leaked), "{leaked} reached the child: {names:?}");
    }
    // Nor is a configured env value ever logged.
    assert!(!gateway.proc.output().contains("peer-setting-7f3a"), "{}", gateway.proc.output());
}

#[test]
fn a_child_flooding_its_stderr_is_logged_cut_and_rate_limited() {
    let events = events_file("shout");
    let events = events.path();
    let config = format!("ready_min_tools = 1\n{}", peer_server("peer", events, &[], ""));
    let gateway = Gateway::start(&config, &[]);
    let answer = gateway.call("shout", json!({}));
    assert_eq!(structured(&answer)["ok"], true, "{answer}");
    let shouted = |output: &str| -> Vec<Value> {
        output
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| {
                v["message"] == "upstream stderr"
                    && v["stderr"].as_str().is_some_and(|s| s.starts_with("EEE"))
            })
            .collect()
    };
    wait_for("the first shouted line in the log", || !shouted(&gateway.proc.output()).is_empty());
    let lines = shouted(&gateway.proc.output());
    for line in &lines {
        assert_eq!(line["server"], "peer");
        let text = line["stderr"].as_str().unwrap();
        assert!(text.len() <= 1024 + '…'.len_utf8() && text.ends_with('…'), "not cut: {} bytes", text.len());
    }
    // 1000 lines written at once; at most 20 a second reach the log.
    assert!(lines.len() < 1000, "no rate limit: {} lines logged", lines.len());
    assert_eq!(gateway.connection_state("peer"), "ready");
}

#[test]
fn a_child_that_dies_or_floods_fails_its_call_and_is_restarted() {
    let events = events_file("dies");
    let events = events.path();
    let extra =
        "timeout_ms = 5000\nmax_response_bytes = 4096\nreconnect_initial_ms = 50\nreconnect_max_ms = 100";
    let config = format!("ready_min_tools = 1\n{}", peer_server("peer", events, &[], extra));
    let gateway = Gateway::start(&config, &[]);
    let first = structured(&gateway.call("ok", json!({})))["pid"].as_u64().unwrap() as u32;

    // Half an answer, then exit: the call may have run, so `upstream_error`, tried once.
    let answer = gateway.call("die", json!({}));
    let data = expect_error(&answer, -32000, "upstream_error");
    assert_eq!(data["attempts"], 1, "{answer}");
    wait_for("a second child", || spawns(events).len() == 2);
    wait_for("the connection ready again", || gateway.connection_state("peer") == "ready");
    let second = structured(&gateway.call("ok", json!({})))["pid"].as_u64().unwrap() as u32;
    assert_ne!(first, second);
    // The restarted child's tools are listed again at once (the interval is 300 s).
    wait_for("a tools/list of the restarted child", || {
        metric(
            &gateway.metrics(),
            "mcp_gateway_registry_refresh_total",
            &["server=\"peer\"", "outcome=\"success\""],
        ) >= 2.0
    });
    assert!(!process_exists(first), "the dead child was not reaped");

    // One line over max_response_bytes: that call is `response_too_large`, the child goes.
    let answer = gateway.call("big", json!({}));
    expect_error(&answer, -32000, "response_too_large");
    wait_for("a third child", || spawns(events).len() == 3);
    wait_for("the connection ready again", || gateway.connection_state("peer") == "ready");
    let third = structured(&gateway.call("ok", json!({})))["pid"].as_u64().unwrap() as u32;
    assert_eq!(spawns(events), vec![first, second, third]);
    wait_for("the flooding child stopped", || !process_exists(second));

    let report = gateway.connections();
    assert_eq!(report["peer"]["connects"], 3, "{report}");
    let metrics = gateway.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_upstream_reconnects_total", &["server=\"peer\""]), 2.0);
    // Log lines reach stdout in batches, shortly after they are logged.
    wait_for("the logged transition from ready to reconnecting", || {
        gateway.proc.output().lines().any(|l| {
            l.contains("upstream connection state changed")
                && l.contains("\"from\":\"ready\"")
                && l.contains("\"to\":\"reconnecting\"")
        })
    });
}

#[test]
fn calls_fail_fast_while_the_child_is_being_restarted() {
    let events = events_file("fast");
    let events = events.path();
    // A backoff far longer than the test: the state stays `reconnecting` until it ends.
    let extra = "reconnect_initial_ms = 600000\nreconnect_max_ms = 600000";
    let config = format!("ready_min_tools = 1\n{}", peer_server("peer", events, &[], extra));
    let gateway = Gateway::start(&config, &[]);
    expect_error(&gateway.call("die", json!({})), -32000, "upstream_error");
    wait_for("the connection reconnecting", || gateway.connection_state("peer") == "reconnecting");

    let answer = gateway.call("ok", json!({}));
    let data = expect_error(&answer, -32000, "upstream_unavailable");
    assert_eq!(data["connection_state"], "reconnecting", "{answer}");
    assert_eq!(data["retryable"], true);
    assert_eq!(spawns(events).len(), 1, "no restart yet");

    let metrics = gateway.metrics();
    let state = |s: &str| {
        metric(
            &metrics,
            "mcp_gateway_upstream_connection_state",
            &["server=\"peer\"", &format!("state=\"{s}\"")],
        )
    };
    assert_eq!((state("reconnecting"), state("ready"), state("failed")), (1.0, 0.0, 0.0));
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_upstream_requests_total",
            &["server=\"peer\"", "status=\"not_connected\""]
        ),
        1.0
    );
    // A reconnect is expected to fix itself: readiness still counts the server's tools.
    let (status, report) = gateway.readyz();
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["servers"]["peer"]["connection"], "reconnecting", "{report}");
    // The orchestrator's view: the server's tools are unavailable now, for this reason.
    let (_, capabilities) = get_json(&gateway, "/capabilities");
    let peer = capabilities["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["server"] == "peer"))
        .unwrap_or_else(|| panic!("peer missing from {capabilities}"));
    assert_eq!(
        (&peer["status"], &peer["reason"]),
        (&json!("unavailable"), &json!("reconnecting")),
        "{capabilities}"
    );
    assert!(peer["tools"].as_array().is_some_and(|t| t.contains(&json!("ok"))), "{capabilities}");
    assert!(peer["since"].is_string(), "{capabilities}");
}

#[test]
fn a_command_that_cannot_start_ends_failed_not_needs_auth_and_costs_readiness() {
    let config = r#"
ready_min_tools = 1
[servers.gone]
transport = "stdio"
command = "/nonexistent/mcp-stdio-server"
discover = false
tools = [{name = "lookup", description = "d", inputSchema = {type = "object"}}]
reconnect_initial_ms = 10
reconnect_max_ms = 20
reconnect_give_up_ms = 200
reconnect_slow_retry_ms = 600000
"#;
    let gateway = Gateway::start_unready(config, &[], &[]);
    wait_for("the connection failed", || gateway.connection_state("gone") == "failed");
    let report = gateway.connections();
    assert!(report["gone"]["last_error"].as_str().unwrap().contains("cannot start"), "{report}");
    assert!(report["gone"]["failed_attempts"].as_u64().unwrap() >= 2, "{report}");

    let metrics = gateway.metrics();
    let state = |s: &str| {
        metric(
            &metrics,
            "mcp_gateway_upstream_connection_state",
            &["server=\"gone\"", &format!("state=\"{s}\"")],
        )
    };
    assert_eq!((state("failed"), state("needs_auth"), state("connecting")), (1.0, 0.0, 0.0));

    let answer = gateway.call("lookup", json!({}));
    let data = expect_error(&answer, -32000, "upstream_unavailable");
    assert_eq!(data["connection_state"], "failed", "{answer}");

    // Its only tool cannot be served for now: not ready, and /readyz says why.
    let (status, report) = gateway.readyz();
    assert_eq!(status, 503, "{report}");
    assert_eq!(report["tools_unreachable"], 1, "{report}");
    assert_eq!(report["servers"]["gone"]["connection"], "failed", "{report}");
}

#[test]
fn shutdown_leaves_no_child_even_one_that_ignores_sigterm() {
    let polite = events_file("polite");
    let polite = polite.path();
    let stubborn = events_file("stubborn");
    let stubborn = stubborn.path();
    let config = format!(
        "ready_min_tools = 1\n[defaults]\nstdio_stop_grace_ms = 300\n\n{}\n{}",
        peer_server("polite", polite, &[], ""),
        peer_server("stubborn", stubborn, &["--ignore-sigterm"], "")
    );
    let mut gateway = Gateway::start(&config, &[]);
    wait_for("both children ready", || {
        gateway.connection_state("polite") == "ready" && gateway.connection_state("stubborn") == "ready"
    });
    let pids: Vec<u32> = spawns(polite).into_iter().chain(spawns(stubborn)).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| process_exists(*p)));

    let status = gateway.proc.terminate();
    assert!(status.success(), "{status}");
    for pid in &pids {
        assert!(!process_exists(*pid), "child {pid} outlived the gateway:\n{}", gateway.proc.output());
    }
    let output = gateway.proc.output();
    assert!(
        output.lines().any(|l| l.contains("ignored SIGTERM") && l.contains("\"server\":\"stubborn\"")),
        "the stubborn child was not killed after the grace:\n{output}"
    );
    assert!(!output.lines().any(|l| l.contains("ignored SIGTERM") && l.contains("\"server\":\"polite\"")));
}
