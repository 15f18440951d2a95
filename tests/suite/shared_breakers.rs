//! Circuit breakers shared by a fleet of gateways through one real redis-server: the open
//! period is shared, recovery does not depend on the instance that tripped, operator actions
//! apply to every instance, and what happened while Redis was away reaches the fleet later.
//!
//! To tell "blocked by the fleet" from "blocked by its own failures", the instances that
//! observe are given a working path to the server: only shared state can make them refuse.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::common::*;
use serde_json::{Value, json};

/// A gateway whose server `catalog` is reached at `url`, its breaker shared through Redis.
fn member(redis_port: u16, url: &str, open_base_ms: u64) -> Gateway {
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{redis_port}\"\nshared_breakers = true\n\
         [servers.catalog]\ntransport = \"http\"\nurl = \"{url}\"\ndiscover = false\n\
         [servers.catalog.breaker]\nconsecutive_failures = 3\nmin_calls = 1000\nopen_base_ms = {open_base_ms}\nopen_max_ms = {}\n\
         [[servers.catalog.tools]]\nname = \"price_lookup\"\ninputSchema = {{ type = \"object\" }}\n",
        open_base_ms * 4
    );
    Gateway::start(&config, &[])
}

fn lookup(gw: &Gateway) -> Value {
    gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}))
}

fn category(answer: &Value) -> &str {
    answer["error"]["data"]["category"].as_str().unwrap_or("ok")
}

/// Trips `gw`'s breaker through its own failures (its path to the server is dead).
fn trip(gw: &Gateway) {
    for _ in 0..3 {
        expect_error(&lookup(gw), -32000, "upstream_unavailable");
    }
    expect_error(&lookup(gw), -32004, "circuit_open");
}

fn health_probes(gw: &Gateway, result: &str) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_breaker_health_probes_total", &[&format!("result=\"{result}\"")])
}

fn transitions_to(gw: &Gateway, state: &str) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_breaker_transitions_total", &[&format!("to=\"{state}\"")])
}

#[test]
fn the_fleet_recovers_through_a_health_probe_when_the_instance_that_tripped_is_gone() {
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let demo = Demo::http();
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let mut a = member(redis_port, &dead, 1000);
    let b = member(redis_port, &demo.url(), 1000);
    trip(&a);
    wait_for("B to refuse on A's open state", || category(&lookup(&b)) == "circuit_open");
    let refused = lookup(&b);
    if category(&refused) == "circuit_open" {
        assert_eq!(refused["error"]["data"]["attempts"], 0, "{refused}");
    }
    // The instance that tripped dies while the circuit is open.
    a.proc.terminate();
    wait_for("B to serve again", || lookup(&b).get("result").is_some());
    // B came back through its own health probe, not straight to full traffic.
    assert!(health_probes(&b, "success") >= 1.0, "{}", b.metrics());
    assert!(transitions_to(&b, "closed") >= 1.0, "{}", b.metrics());
}

#[test]
fn an_instance_whose_own_path_is_broken_cannot_keep_a_healthy_server_blocked() {
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let demo = Demo::http();
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    // A cannot reach the server (its own network); B and C can.
    let a = Arc::new(member(redis_port, &dead, 300));
    let b = member(redis_port, &demo.url(), 300);
    let c = member(redis_port, &demo.url(), 300);
    trip(&a);
    wait_for("B to refuse on A's open state", || category(&lookup(&b)) == "circuit_open");
    // A keeps calling, and its probes keep failing, all through the rest of the test.
    let stop = Arc::new(AtomicBool::new(false));
    let prober = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let answer = lookup(&a);
                assert!(answer.get("error").is_some(), "A's path is broken: {answer}");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    wait_for("B to serve again", || lookup(&b).get("result").is_some());
    wait_for("C to serve again", || lookup(&c).get("result").is_some());
    let probes_before = health_probes(&a, "failure");
    // While A's failed probes go on, B and C are never blocked again.
    wait_for("A to fail more probes", || health_probes(&a, "failure") >= probes_before + 2.0);
    for gw in [&b, &c] {
        for _ in 0..20 {
            let answer = lookup(gw);
            assert!(answer.get("result").is_some(), "a healthy server was blocked again: {answer}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    prober.join().unwrap();
    assert!(a.metrics().contains("mcp_gateway_breaker_state{server=\"catalog\"} 1"), "{}", a.metrics());
}

#[test]
fn operator_actions_on_any_instance_apply_to_the_fleet() {
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let a_port = free_port();
    let b_demo = Demo::http();
    // A's open period is long: only a fleet-wide close can bring it back within this test.
    let a = member(redis_port, &format!("http://127.0.0.1:{a_port}/mcp"), 300_000);
    let b = member(redis_port, &b_demo.url(), 300_000);
    trip(&a);
    wait_for("B to refuse on A's open state", || category(&lookup(&b)) == "circuit_open");
    let _a_demo = Demo::start(false, a_port);
    // Closed by hand on B, which did not trip it.
    let closed: Value = b.admin_post("/admin/breakers/catalog/close").send().unwrap().json().unwrap();
    assert_eq!(closed["breaker"]["state"], "closed", "{closed}");
    wait_for("A to follow the close", || lookup(&a).get("result").is_some());
    assert!(lookup(&b).get("result").is_some());
    // Opened by hand on A: B refuses too, until closed by hand (here on A).
    a.admin_post("/admin/breakers/catalog/open").send().unwrap();
    wait_for("B to follow the open", || category(&lookup(&b)) == "circuit_open");
    let report: Value = b.admin_get("/admin/breakers").send().unwrap().json().unwrap();
    assert_eq!(report["catalog"]["forced_open"], true, "{report}");
    a.admin_post("/admin/breakers/catalog/close").send().unwrap();
    wait_for("B to follow the second close", || lookup(&b).get("result").is_some());
    assert_eq!(a.admin_post("/admin/breakers/nope/open").send().unwrap().status(), 404);
}

#[test]
fn a_trip_made_while_redis_was_away_reaches_the_fleet_when_it_returns() {
    let redis_port = free_port();
    let mut redis = redis_server_on(redis_port);
    let demo = Demo::http();
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let a = member(redis_port, &dead, 60_000);
    let b = member(redis_port, &demo.url(), 60_000);
    assert!(lookup(&b).get("result").is_some());
    redis.terminate();
    wait_for("A to notice Redis is gone", || {
        metric(&a.metrics(), "mcp_gateway_shared_state_errors_total", &[]) > 0.0
    });
    trip(&a);
    // Redis stays away for a while after the trip: A tries (and fails) to reach it again.
    let errors = |gw: &Gateway| metric(&gw.metrics(), "mcp_gateway_shared_state_errors_total", &[]);
    let after_trip = errors(&a);
    wait_for("A to retry Redis after the trip", || errors(&a) >= after_trip + 3.0);
    // B knows nothing yet: its calls succeed.
    assert!(lookup(&b).get("result").is_some());
    let _redis = redis_server_on(redis_port);
    wait_for("B to learn of A's trip", || category(&lookup(&b)) == "circuit_open");
}

#[test]
fn servers_built_from_registry_entries_share_their_breaker_too() {
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let stores = Stores::dynamodb();
    // The registry says the catalogue lives on a port where nothing listens yet.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let catalogue = "config/manga-tools.json";
    registry_cli(
        &stores.env(false),
        &["import", catalogue, "--server", "catalog", "--transport", "http", "--url", &url],
    );
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{redis_port}\"\nshared_breakers = true\n{}\
         [defaults.breaker]\nopen_base_ms = 300000\nopen_max_ms = 300000\n",
        stores.config()
    );
    let a = Gateway::start(&config, REGISTRY_LOOPBACK);
    let b = Gateway::start(&config, REGISTRY_LOOPBACK);
    // B builds its stack for the registry server (one failure of its own, far from a trip).
    expect_error(&lookup(&b), -32000, "upstream_unavailable");
    // A trips (read-only calls are retried, so a few calls make the five failures).
    let mut calls = 0;
    while category(&lookup(&a)) != "circuit_open" {
        calls += 1;
        assert!(calls <= 5, "A's breaker did not open");
    }
    // The server comes up: B could reach it, but stays away while the fleet's circuit is open.
    let _demo = Demo::start(false, port);
    wait_for("B to refuse on A's open state", || category(&lookup(&b)) == "circuit_open");
}
