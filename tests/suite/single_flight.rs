//! In-flight sharing of identical read-only calls through the real gateway and a slow demo
//! server: each waiter keeps its own deadline, and a leader that goes away (its client
//! disconnects, or its own deadline passes) hands over to exactly one waiter.

use std::{
    io::Write,
    net::TcpStream,
    sync::Arc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::common::*;
use serde_json::{Value, json};

fn config(demo: &Demo) -> String {
    format!("[servers.catalog]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url())
}

const TOOL: &str = "price_lookup";

fn arguments() -> Value {
    json!({"manga_id": "MNG-00000002"})
}

/// Waits (bounded) until `check` holds; panics with `what` otherwise.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn waiters(gw: &Gateway) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_in_flight_waiters", &[])
}

/// Identical calls that will wait for the one in flight.
fn followers(gw: &Arc<Gateway>, n: usize) -> Vec<JoinHandle<Value>> {
    (0..n)
        .map(|_| {
            let gw = gw.clone();
            std::thread::spawn(move || gw.call(TOOL, arguments()))
        })
        .collect()
}

fn assert_all_got_the_result(threads: Vec<JoinHandle<Value>>) {
    for thread in threads {
        let answer = thread.join().unwrap();
        assert_eq!(structured(&answer)["manga_id"], "MNG-00000002", "{answer}");
    }
}

#[test]
fn a_leader_whose_client_disconnects_hands_over_to_one_waiter() {
    // Slow enough that the waiters join and the leader leaves while its call is in flight.
    let demo = Demo::slow(5000);
    let gw = Arc::new(Gateway::start(&config(&demo), &[]));
    // The leader: a raw connection we can cut mid-call.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": TOOL, "arguments": arguments()}}).to_string();
    let mut leader = TcpStream::connect(gw.addr).unwrap();
    write!(
        leader,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_until("the leader's call never reached the server", || demo.stats()["calls"] == 1);
    let waiting = followers(&gw, 5);
    wait_until("the followers never joined the call in flight", || waiters(&gw) == 5.0);
    leader.shutdown(std::net::Shutdown::Both).unwrap();
    drop(leader);
    assert_all_got_the_result(waiting);
    // One call for the departed leader, one by the single waiter that took over; not 1 + 5.
    assert_eq!(demo.stats()["calls"], 2, "{}", demo.stats());
    let m = gw.metrics();
    assert_eq!(metric(&m, "mcp_gateway_result_cache_total", &["result=\"shared\""]), 4.0, "{m}");
    assert_eq!(waiters(&gw), 0.0);
}

#[test]
fn a_waiter_stops_at_its_own_deadline_while_the_others_get_the_result() {
    let demo = Demo::slow(5000);
    let gw = Arc::new(Gateway::start(&config(&demo), &[]));
    let leader = followers(&gw, 1);
    wait_until("the leader's call never reached the server", || demo.stats()["calls"] == 1);
    let patient = followers(&gw, 3);
    wait_until("the followers never joined the call in flight", || waiters(&gw) == 3.0);
    let hurried = gw.call_with(TOOL, arguments(), &[("X-Request-Timeout-Ms", "100")]);
    let data = expect_error(&hurried, -32001, "timeout");
    assert_eq!(data["attempts"], 0, "the hurried caller never went upstream: {hurried}");
    assert_all_got_the_result(leader);
    assert_all_got_the_result(patient);
    assert_eq!(demo.stats()["calls"], 1, "{}", demo.stats());
    let m = gw.metrics();
    assert_eq!(metric(&m, "mcp_gateway_result_cache_total", &["result=\"shared\""]), 3.0, "{m}");
}

#[test]
fn a_leader_out_of_its_own_time_hands_over_instead_of_sharing_its_timeout() {
    let demo = Demo::slow(6000);
    let gw = Arc::new(Gateway::start(&config(&demo), &[]));
    let leader = {
        let gw = gw.clone();
        std::thread::spawn(move || gw.call_with(TOOL, arguments(), &[("X-Request-Timeout-Ms", "3000")]))
    };
    wait_until("the leader's call never reached the server", || demo.stats()["calls"] == 1);
    let patient = followers(&gw, 4);
    wait_until("the followers never joined the call in flight", || waiters(&gw) == 4.0);
    let leader = leader.join().unwrap();
    expect_error(&leader, -32001, "timeout");
    // The leader's deadline was its own: the waiters get the result, through one new call.
    assert_all_got_the_result(patient);
    assert_eq!(demo.stats()["calls"], 2, "{}", demo.stats());
}
