//! Quotas shared by two gateway processes through one real redis-server (and decided locally
//! while it is away), and the audit trail: one line per `tools/call` decision, in a file or
//! tagged on stdout, never with the arguments, and never losing a line without saying so.
//!
//! Windows are an hour long, so nothing here depends on timing: a quota of N calls allows
//! exactly N, whenever they are made.

use std::{
    io::{BufRead, BufReader},
    process::Command,
    sync::{Arc, Mutex},
};

use crate::common::*;
use serde_json::{Value, json};

const PER_WINDOW: usize = 6;

/// A gateway on the demo server, its quotas shared through Redis on `redis_port`: `lookups`
/// allows PER_WINDOW `price_lookup` calls an hour (per caller: every caller is anonymous here),
/// `probe` is generous (its calls bring a gateway back to Redis without using `lookups`).
fn member(redis_port: u16, demo: &Demo) -> Gateway {
    Gateway::start(&shared_quota_config(redis_port, demo, PER_WINDOW, ""), &[])
}

/// The members' configuration: `lookups` allows `per_hour` calls, `quotas_extra` goes into
/// `[quotas]`.
fn shared_quota_config(redis_port: u16, demo: &Demo, per_hour: usize, quotas_extra: &str) -> String {
    format!(
        r#"redis_url = "redis://127.0.0.1:{redis_port}"
[servers.catalog]
transport = "http"
url = "{url}"
[quotas]
redis_timeout_ms = 5000
redis_retry_ms = 100
{quotas_extra}
[[quotas.rules]]
name = "lookups"
match_tool = "price_*"
rate = {per_hour}
window_secs = 3600
[[quotas.rules]]
name = "probe"
match_tool = "manga_search"
rate = 100000
window_secs = 1
[audit]
sink = "stdout"
"#,
        url = demo.url()
    )
}

fn lookup(gw: &Gateway) -> Value {
    gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}))
}

fn counter(gw: &Gateway, name: &str, quota: &str) -> f64 {
    metric(&gw.metrics(), name, &[&format!("quota=\"{quota}\"")])
}

fn redis_available(gw: &Gateway) -> f64 {
    metric(&gw.metrics(), "mcp_gateway_quota_redis_available", &[])
}

/// Counts allowed calls; checks every refusal is the quota's, with a retry hint.
fn allowed(answer: &Value) -> bool {
    if answer.get("result").is_some() {
        return !answer["result"]["isError"].as_bool().unwrap_or(false);
    }
    let data = expect_error(answer, -32003, "rate_limited");
    assert_eq!(data["quota"], json!({"name": "lookups", "limit": "rate"}), "{answer}");
    assert!(data["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0), "{answer}");
    assert_eq!(data["attempts"], 0, "never sent upstream: {answer}");
    false
}

/// Brings `gw` back to deciding in Redis, with calls that do not touch `lookups`.
fn back_on_redis(gw: &Gateway) {
    wait_for("quota decisions in Redis again", || {
        gw.call("manga_search", json!({"query": "naruto"}));
        redis_available(gw) == 1.0
    });
}

#[test]
fn a_rate_quota_holds_across_two_gateways_and_through_a_redis_restart() {
    let redis_port = free_port();
    let mut redis = redis_server_on(redis_port);
    let demo = Demo::http();
    let a = member(redis_port, &demo);
    let b = member(redis_port, &demo);
    back_on_redis(&a);
    back_on_redis(&b);

    // Alternating between the two gateways: exactly PER_WINDOW calls get through, in all.
    let ok = (0..PER_WINDOW * 2).filter(|i| allowed(&lookup(if i % 2 == 0 { &a } else { &b }))).count();
    assert_eq!(ok, PER_WINDOW, "the quota holds across both gateways");
    let upstream_calls = |d: &Demo| d.stats()["calls"].as_u64().unwrap();
    let searches =
        |gw: &Gateway| metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["tool=\"manga_search\""]);
    let seen = upstream_calls(&demo) as f64 - searches(&a) - searches(&b);
    assert_eq!(seen, PER_WINDOW as f64, "refused calls never reached the server");
    for gw in [&a, &b] {
        assert_eq!(counter(gw, "mcp_gateway_quota_redis_decisions_total", "lookups"), PER_WINDOW as f64);
        assert_eq!(counter(gw, "mcp_gateway_quota_local_decisions_total", "lookups"), 0.0);
        let rejected = counter(gw, "mcp_gateway_quota_rejections_total", "lookups");
        assert!(rejected > 0.0, "{}", gw.metrics());
        let limited = metric(
            &gw.metrics(),
            "mcp_gateway_tool_calls_total",
            &["tool=\"price_lookup\"", "outcome=\"quota_refused\""],
        );
        assert_eq!(limited, rejected);
        // The breaker saw none of it.
        assert_eq!(metric(&gw.metrics(), "mcp_gateway_breaker_transitions_total", &["to=\"open\""]), 0.0);
    }

    // Redis goes away: calls go on, decided locally (each instance alone, from a fresh state).
    redis.terminate();
    let before = counter(&a, "mcp_gateway_quota_local_decisions_total", "lookups");
    let local_ok = (0..PER_WINDOW + 3).filter(|_| allowed(&lookup(&a))).count();
    assert_eq!(local_ok, PER_WINDOW, "the quota still holds on this instance, locally");
    assert_eq!(
        counter(&a, "mcp_gateway_quota_local_decisions_total", "lookups") - before,
        (PER_WINDOW + 3) as f64,
        "every decision was local"
    );
    assert_eq!(redis_available(&a), 0.0);

    // Redis is back (empty, on the same port): decisions go back to it, shared again.
    let _redis = redis_server_on(redis_port);
    back_on_redis(&a);
    back_on_redis(&b);
    let redis_before: Vec<f64> =
        [&a, &b].iter().map(|gw| counter(gw, "mcp_gateway_quota_redis_decisions_total", "lookups")).collect();
    let local_before: Vec<f64> =
        [&a, &b].iter().map(|gw| counter(gw, "mcp_gateway_quota_local_decisions_total", "lookups")).collect();
    let ok = (0..PER_WINDOW * 2).filter(|i| allowed(&lookup(if i % 2 == 0 { &b } else { &a }))).count();
    assert_eq!(ok, PER_WINDOW, "shared again after the restart");
    for (i, gw) in [&a, &b].into_iter().enumerate() {
        let redis_decisions =
            counter(gw, "mcp_gateway_quota_redis_decisions_total", "lookups") - redis_before[i];
        assert_eq!(redis_decisions, PER_WINDOW as f64, "every decision in Redis");
        assert_eq!(counter(gw, "mcp_gateway_quota_local_decisions_total", "lookups"), local_before[i]);
    }

    // Each call left one audit line on its gateway's stdout, tagged apart from the logs.
    let calls_to_a = metric(&a.metrics(), "mcp_gateway_tool_calls_total", &[]);
    wait_for("an audit line per call", || {
        a.proc.output().lines().filter(|l| l.contains("\"log\":\"audit\"")).count() as f64 == calls_to_a
    });
}

#[test]
fn a_fast_quota_takes_a_batch_per_round_trip_and_the_fleet_never_allows_more_than_the_quota() {
    // 20 calls an hour with batches of an hour of the rate: the first decision may take all 20.
    // (A real fast quota has a 10 ms batch; an hour keeps this independent of timing.)
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let demo = Demo::http();
    let config = shared_quota_config(redis_port, &demo, 20, "fleet_batch_ms = 3600000");
    let a = Gateway::start(&config, &[]);
    let b = Gateway::start(&config, &[]);
    back_on_redis(&a);
    back_on_redis(&b);

    assert!(allowed(&lookup(&a)), "the first call takes the batch");
    assert_eq!(counter(&a, "mcp_gateway_quota_redis_decisions_total", "lookups"), 1.0);
    // The whole allowance is in a's batch: b is refused by Redis (early, as documented).
    assert!(!allowed(&lookup(&b)), "b finds the fleet's allowance taken");
    assert_eq!(counter(&b, "mcp_gateway_quota_redis_decisions_total", "lookups"), 1.0);
    // a spends its batch without a round trip, then Redis refuses it too.
    let spent = (0..25).filter(|_| allowed(&lookup(&a))).count();
    assert_eq!(spent, 19, "20 calls in all, the quota");
    assert_eq!(counter(&a, "mcp_gateway_quota_batched_decisions_total", "lookups"), 19.0);
    assert_eq!(
        counter(&a, "mcp_gateway_quota_redis_decisions_total", "lookups"),
        7.0,
        "one round trip for the batch, then one per refused call"
    );
    assert!(!allowed(&lookup(&b)));
    let searches =
        |gw: &Gateway| metric(&gw.metrics(), "mcp_gateway_tool_calls_total", &["tool=\"manga_search\""]);
    let seen = demo.stats()["calls"].as_u64().unwrap() as f64 - searches(&a) - searches(&b);
    assert_eq!(seen, 20.0, "the server saw exactly the quota's calls");
    for gw in [&a, &b] {
        assert_eq!(counter(gw, "mcp_gateway_quota_local_decisions_total", "lookups"), 0.0);
    }
}

/// A gateway whose one server holds every call until the test opens it.
fn holding_member(redis_port: u16, upstream: std::net::SocketAddr) -> Gateway {
    let config = format!(
        r#"redis_url = "redis://127.0.0.1:{redis_port}"
[servers.slow]
transport = "http"
url = "http://{upstream}/hold"
discover = false
timeout_ms = 60000
deadline_ms = 60000
[[servers.slow.tools]]
name = "hold_call"
inputSchema = {{ type = "object" }}
[quotas]
redis_timeout_ms = 5000
[[quotas.rules]]
name = "slow-slots"
scope = "server"
match_server = "slow"
max_concurrent = 2
"#
    );
    Gateway::start(&config, &[])
}

#[test]
fn a_concurrency_quota_holds_across_two_gateways() {
    let redis_port = free_port();
    let _redis = redis_server_on(redis_port);
    let (_upstream, addr) = hostile_server(&[]);
    let a = Arc::new(holding_member(redis_port, addr));
    let b = Arc::new(holding_member(redis_port, addr));
    for gw in [&a, &b] {
        wait_for("Redis connected", || redis_available(gw) == 1.0);
    }
    let held = |gw: &Arc<Gateway>| {
        let gw = gw.clone();
        std::thread::spawn(move || gw.call("hold_call", json!({})))
    };
    let first = held(&a);
    wait_for("the first call at the server", || hostile_hits(addr, "hold_current") == 1);
    let second = held(&b);
    wait_for("the second call at the server", || hostile_hits(addr, "hold_current") == 2);
    // A third call, on either gateway, is refused at once.
    for gw in [&a, &b] {
        let refused = gw.call("hold_call", json!({}));
        let data = expect_error(&refused, -32003, "rate_limited");
        assert_eq!(data["quota"], json!({"name": "slow-slots", "limit": "concurrency"}), "{refused}");
        assert!(data["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0), "{refused}");
    }
    reqwest::blocking::Client::new().post(format!("http://{addr}/_open")).send().unwrap();
    for call in [first, second] {
        let answer = call.join().unwrap();
        assert!(answer.get("result").is_some(), "{answer}");
    }
    assert_eq!(hostile_hits(addr, "hold_peak"), 2, "the server never saw more than two at once");
    assert_eq!(hostile_hits(addr, "hold_calls"), 2, "refused calls never reached it");
    // The slots were given back: calls go through again.
    wait_for("a slot free again", || a.call("hold_call", json!({})).get("result").is_some());
    assert_eq!(counter(&a, "mcp_gateway_quota_local_decisions_total", "slow-slots"), 0.0);
}

fn audit_gateway(demo: &Demo, audit: &str) -> Gateway {
    let config = format!(
        r#"[servers.catalog]
transport = "http"
url = "{url}"
[[quotas.rules]]
name = "search-rate"
match_tool = "manga_search"
rate = 2
window_secs = 3600
[audit]
{audit}
"#,
        url = demo.url()
    );
    Gateway::start(&config, &[])
}

fn read_lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn every_call_leaves_one_audit_line_without_its_arguments() {
    let scratch = Scratch::new("audit");
    let file = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let mut gw = audit_gateway(&demo, &format!("sink = \"file\"\nfile = \"{file}\""));
    let marker = format!("MARKER-{}-{}", std::process::id(), free_port());
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let headers = [("x-request-id", "audit-req-1"), ("traceparent", traceparent)];
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(gw.call_with("manga_search", json!({"query": marker}), &headers));
    }
    answers.push(gw.call("no_such_tool", json!({"query": marker})));
    answers.push(gw.call("price_lookup", json!({"manga_id": "MNG-99999999"})));
    expect_error(&answers[2], -32003, "rate_limited");
    expect_error(&answers[3], -32002, "unknown_tool");
    wait_for("five audit lines", || read_lines(&file).len() >= 5);
    let lines = read_lines(&file);
    assert_eq!(lines.len(), 5, "{lines:?}");
    for line in &lines {
        for key in [
            "ts",
            "request_id",
            "trace_id",
            "subject",
            "tool",
            "server",
            "decision",
            "rule",
            "outcome",
            "args_sha256",
            "latency_us",
        ] {
            assert!(line.get(key).is_some(), "{key} missing: {line}");
        }
        assert_eq!(line["log"], "audit");
        assert!(line["subject"].is_null(), "anonymous callers: {line}");
    }
    let outcomes: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (l["outcome"].as_str().unwrap(), l["decision"].as_str().unwrap(), l["rule"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("ok", "allow", "no_policy"),
            ("ok", "allow", "no_policy"),
            ("quota_refused", "deny", "search-rate"),
            ("unknown_tool", "allow", "no_policy"),
            ("tool_error", "allow", "no_policy"),
        ]
    );
    let (search, denied) = (&lines[0], &lines[2]);
    assert_eq!((search["tool"].as_str(), search["server"].as_str()), (Some("manga_search"), Some("catalog")));
    assert_eq!(search["request_id"], "audit-req-1");
    assert_eq!(search["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(denied["args_sha256"], search["args_sha256"], "same arguments, same hash");
    assert!(search["args_sha256"].as_str().is_some_and(|h| h.len() == 16));
    assert_eq!(lines[3]["tool"], "no_such_tool");
    assert!(lines[3]["server"].is_null() && lines[3]["args_sha256"].is_null());
    // The arguments are nowhere: not in the trail, not in the gateway's own output.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&marker), "{text}");
    assert!(terminate_and_output(&mut gw).find(&marker).is_none(), "the marker leaked to stdout");
    assert_eq!(read_lines(&file).len(), 5, "nothing written twice at exit");
}

#[test]
fn lines_a_blocked_sink_cannot_take_are_counted_and_the_gap_is_reported_in_the_trail() {
    let scratch = Scratch::new("audit-fifo");
    let fifo = scratch.path("audit.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let demo = Demo::http();
    // Nobody reads the pipe yet: the writer blocks opening it, and the queue (1 KiB) fills.
    let gw = audit_gateway(&demo, &format!("sink = \"file\"\nfile = \"{fifo}\"\nqueue_bytes = 1024"));
    let mut calls = 0u64;
    for _ in 0..40 {
        gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
        calls += 1;
    }
    let dropped = |gw: &Gateway| metric(&gw.metrics(), "mcp_gateway_audit_lines_dropped_total", &[]) as u64;
    wait_for("lines dropped", || dropped(&gw) > 0);
    assert!(dropped(&gw) <= calls - 2, "some lines waited in the queue");
    // Someone reads the pipe now.
    let read: Arc<Mutex<Vec<String>>> = Arc::default();
    let reader = {
        let (read, fifo) = (read.clone(), fifo.clone());
        std::thread::spawn(move || {
            let file = std::fs::File::open(fifo).unwrap();
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                read.lock().unwrap().push(line);
            }
        })
    };
    let gap_reported = || read.lock().unwrap().iter().any(|l| l.contains("\"dropped_before\""));
    wait_for("a line reporting the gap", || {
        gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
        calls += 1;
        gap_reported()
    });
    wait_for("every line written or counted", || read.lock().unwrap().len() as u64 + dropped(&gw) == calls);
    // Lines dropped after the last line written are reported on the next one: one more call,
    // its line into the now empty queue, so every gap so far is in the trail.
    let dropped_so_far = dropped(&gw);
    gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    calls += 1;
    wait_for("the last line written", || read.lock().unwrap().len() as u64 + dropped_so_far == calls);
    assert_eq!(dropped(&gw), dropped_so_far, "an empty queue took the line");
    let lines: Vec<Value> = read.lock().unwrap().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let reported: u64 = lines.iter().filter_map(|l| l["dropped_before"].as_u64()).sum();
    assert_eq!(reported, dropped(&gw), "the trail itself says how many lines are missing");
    drop(gw);
    reader.join().unwrap();
}

/// Stops a gateway and returns everything it printed.
fn terminate_and_output(gw: &mut Gateway) -> String {
    gw.proc.terminate();
    gw.proc.output()
}
