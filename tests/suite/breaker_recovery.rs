//! Recovery after an outage does not grow with the outage, and no caller's call is risked on a
//! server that may be down: while a breaker is open the gateway probes the server itself
//! (`breaker.probe_interval_ms`), and with shared breakers one gateway of the fleet probes per
//! interval. Asserted by what the upstream (`tests/peers/scripted/hostile_server.py`'s `/recorder` and
//! `/flaky` modes, which record every request in order) and the callers saw, not by time.

use crate::common::*;
use serde_json::{Value, json};

fn category(answer: &Value) -> &str {
    match answer.get("result") {
        Some(_) => "ok",
        None => answer["error"]["data"]["category"].as_str().unwrap_or("?"),
    }
}

fn breaker(probe_interval_ms: u64) -> String {
    format!(
        "[defaults.retry]\nmax_retries_safe = 0\n[defaults.breaker]\nconsecutive_failures = 3\nmin_calls = 1000\nprobe_interval_ms = {probe_interval_ms}\n"
    )
}

#[test]
fn a_server_back_after_an_outage_is_used_again_without_risking_a_callers_call() {
    let scratch = Scratch::new("recovery");
    let log = scratch.path("upstream.jsonl");
    let port = free_port();
    let mut upstream = hostile_server_on(port, &log);
    let config = format!(
        "{}[servers.rec]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/recorder\"\n",
        breaker(200)
    );
    let gateway = Gateway::start(&config, &[]);
    let mut answers: Vec<String> = Vec::new();
    let call = |answers: &mut Vec<String>| {
        let answer = gateway.call("echo", json!({"q": "x"}));
        answers.push(category(&answer).to_string());
    };
    for _ in 0..3 {
        call(&mut answers);
    }
    assert!(answers.iter().all(|a| a == "ok"), "{answers:?}");
    let first_pid = upstream.child.id();

    // The upstream dies; callers keep calling.
    let _ = upstream.child.kill();
    let _ = upstream.child.wait();
    let failures = |gw: &Gateway| {
        metric(&gw.metrics(), "mcp_gateway_breaker_health_probes_total", &["result=\"failure\""])
    };
    wait_for("the breaker to open and probes to fail", || {
        call(&mut answers);
        answers.iter().filter(|a| *a == "circuit_open").count() >= 3 && failures(&gateway) >= 3.0
    });

    // It comes back on the same port: callers' calls are refused until a probe succeeds, and
    // the first call that goes through succeeds.
    let _upstream = hostile_server_on(port, &log);
    wait_for("a call to succeed again", || {
        call(&mut answers);
        answers.last().is_some_and(|a| a == "ok")
    });
    for _ in 0..3 {
        call(&mut answers);
    }

    let opened = answers.iter().position(|a| a == "circuit_open").unwrap();
    let back = opened + answers[opened..].iter().position(|a| a == "ok").unwrap();
    assert!(
        answers[opened..back].iter().all(|a| a == "circuit_open"),
        "after the breaker opened, a caller's call met the down server: {answers:?}"
    );
    assert!(answers[back..].iter().all(|a| a == "ok"), "{answers:?}");

    // What the upstream saw: before its restart, only the calls that succeeded; after it, a
    // probe first, and every tools/call it received succeeded.
    let seen: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let restarted: Vec<&Value> = seen.iter().filter(|e| e["pid"] != first_pid).collect();
    assert!(!restarted.is_empty(), "{seen:?}");
    assert_eq!(restarted[0]["method"], "server/discover", "the probe comes first: {restarted:?}");
    let calls_seen = seen.iter().filter(|e| e["method"] == "tools/call").count();
    let calls_ok = answers.iter().filter(|a| *a == "ok").count();
    assert_eq!(calls_seen, calls_ok, "every call the upstream saw succeeded: {seen:?} {answers:?}");
    let metrics = gateway.metrics();
    assert!(metric(&metrics, "mcp_gateway_breaker_health_probes_total", &["result=\"success\""]) >= 1.0);
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"rec\"} 0"), "{metrics}");
}

#[test]
fn with_shared_breakers_one_gateway_of_the_fleet_probes_per_interval() {
    let (_redis, redis_port) = redis_server();
    let (_upstream, addr) = hostile_server(&[]);
    let interval_ms = 300;
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{redis_port}\"\nshared_breakers = true\n{}[servers.flaky]\ntransport = \"http\"\nurl = \"http://{addr}/flaky\"\n",
        breaker(interval_ms)
    );
    let a = Gateway::start(&config, &[]);
    let b = Gateway::start(&config, &[]);
    assert_eq!(category(&a.call("echo", json!({}))), "ok");
    assert_eq!(category(&b.call("echo", json!({}))), "ok");

    // Down: every request is recorded and answered 503. A trips; B learns it from the fleet.
    let client = reqwest::blocking::Client::new();
    client.post(format!("http://{addr}/_down")).send().unwrap();
    for _ in 0..3 {
        assert_eq!(category(&a.call("echo", json!({}))), "upstream_error");
    }
    assert_eq!(category(&a.call("echo", json!({}))), "circuit_open");
    let open = |gw: &Gateway| gw.metrics().contains("mcp_gateway_breaker_state{server=\"flaky\"} 1");
    wait_for("B to follow A's trip", || open(&b));
    let down_probes = || {
        hostile_log(addr)
            .into_iter()
            .filter(|e| e["status"] == 503 && e["method"] == "server/discover")
            .count()
    };
    wait_for("a dozen probes while down", || {
        for gw in [&a, &b] {
            assert_eq!(category(&gw.call("echo", json!({}))), "circuit_open");
        }
        down_probes() >= 12
    });

    // Back: both gateways serve again, each first call that goes through succeeds.
    client.post(format!("http://{addr}/_up")).send().unwrap();
    for gw in [&a, &b] {
        wait_for("the gateway to serve again", || match category(&gw.call("echo", json!({}))) {
            "ok" => true,
            "circuit_open" => false,
            other => panic!("a caller's call met the server before a probe did: {other}"),
        });
    }

    let log = hostile_log(addr);
    let down: Vec<&Value> = log.iter().filter(|e| e["status"] == 503).collect();
    // Only A's three tripping calls reached the server while it was down; the rest were probes.
    assert_eq!(down.iter().filter(|e| e["method"] == "tools/call").count(), 3, "{down:?}");
    let probes: Vec<f64> =
        down.iter().filter(|e| e["method"] == "server/discover").map(|e| e["t"].as_f64().unwrap()).collect();
    // At most one probe per interval for the fleet, counted over the whole outage (as the
    // upstream's own clock saw them): two gateways probing on their own would send twice that.
    let intervals = (probes[probes.len() - 1] - probes[0]) / (interval_ms as f64 / 1000.0);
    assert!(
        (probes.len() as f64) <= intervals + 2.0,
        "{} probes over {intervals:.1} intervals: {probes:?}",
        probes.len()
    );
    let peer =
        |gw: &Gateway| metric(&gw.metrics(), "mcp_gateway_breaker_health_probes_total", &["result=\"peer\""]);
    assert!(peer(&a) + peer(&b) >= 1.0, "no interval was left to a peer");
}
