//! The resilience stack against real upstream processes: breakers under a killed server,
//! failure attribution, retry safety and budget, deadlines and cancellation, fallbacks,
//! result caching and in-flight sharing, truncation, and breaker state shared through Redis.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use common::*;
use serde_json::{Value, json};

fn http_server(name: &str, url: &str, extra: &str) -> String {
    format!("[servers.{name}]\ntransport = \"http\"\nurl = \"{url}\"\n{extra}\n")
}

#[test]
fn a_killed_server_opens_its_breaker_fails_fast_and_recovers_when_restarted() {
    let port = free_port();
    let mut demo = Demo::start(false, port);
    let config = http_server(
        "catalog",
        &format!("http://127.0.0.1:{port}/mcp"),
        "[servers.catalog.breaker]\nopen_base_ms = 300\nopen_max_ms = 600\n",
    );
    let gw = Gateway::start(&config, &[]);
    let url = gw.url("/mcp");
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Steady load: 4 clients in a loop.
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (url, stop, answers, sent) = (url.clone(), stop.clone(), answers.clone(), sent.clone());
            std::thread::spawn(move || {
                let client =
                    reqwest::blocking::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    sent.fetch_add(1, Ordering::Relaxed);
                    let body = json!({"jsonrpc": "2.0", "id": format!("{worker}-{n}"), "method": "tools/call",
                        "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000001"}}});
                    let answer: Value =
                        client.post(&url).body(body.to_string()).send().unwrap().json().unwrap();
                    answers.lock().unwrap().push(answer);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    drop(demo.proc.child.kill());
    let _ = demo.proc.child.wait();
    std::thread::sleep(Duration::from_millis(1500));
    let open_metrics = gw.metrics();
    demo = Demo::start(false, port);
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), sent.load(Ordering::Relaxed), "every request got exactly one answer");
    let category = |a: &Value| a["error"]["data"]["category"].as_str().unwrap_or("ok").to_string();
    let open = answers.iter().filter(|a| category(a) == "circuit_open").count();
    assert!(open > 10, "calls during the outage failed fast with circuit_open ({open})");
    assert!(answers.iter().all(|a| a.get("result").is_some() || a.get("error").is_some()));
    // After the restart the probe closed the breaker and calls succeed again.
    assert!(answers.last().unwrap().get("result").is_some(), "last answer: {}", answers.last().unwrap());
    assert!(open_metrics.contains("mcp_gateway_breaker_state{server=\"catalog\"} 1"), "{open_metrics}");
    let metrics = gw.metrics();
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"catalog\"} 0"), "{metrics}");
    assert!(metric(&metrics, "mcp_gateway_breaker_transitions_total", &["to=\"closed\""]) >= 1.0);
    // Fail-fast cost inside the gateway, from its own log lines.
    let output = gw.proc.output();
    let fast: Vec<u64> = output
        .lines()
        .filter(|l| l.contains("\"outcome\":\"circuit_open\""))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["latency_us"].as_u64())
        .collect();
    assert!(!fast.is_empty());
    let mut sorted = fast.clone();
    sorted.sort_unstable();
    let p99 = sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)];
    assert!(p99 < 1000, "open-circuit calls must fail in under 1 ms inside the gateway; p99 {p99} µs");
    drop(demo);
}

#[test]
fn tool_errors_and_invalid_params_never_open_the_breaker() {
    let demo = Demo::http();
    let config = http_server(
        "catalog",
        &demo.url(),
        "[servers.catalog.breaker]\nconsecutive_failures = 2\nmin_calls = 4\n[[servers.catalog.tools]]\nname = \"ghost\"\ninputSchema = { type = \"object\" }\n",
    );
    let gw = Gateway::start(&config, &[]);
    for _ in 0..10 {
        let tool_error = gw.call("price_lookup", json!({"manga_id": "MNG-404"}));
        assert_eq!(tool_error["result"]["isError"], true);
        // The demo server answers -32602 for a tool it does not have.
        let rejected = gw.call("ghost", json!({}));
        let data = expect_error(&rejected, -32602, "upstream_rejected");
        assert_eq!(data["attempts"], 1, "client errors are not retried");
        let invalid = gw.call("price_lookup", json!({"manga_id": 5}));
        expect_error(&invalid, -32602, "bad_input");
    }
    let metrics = gw.metrics();
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"catalog\"} 0"), "{metrics}");
    assert_eq!(metric(&metrics, "mcp_gateway_breaker_transitions_total", &[]), 0.0, "{metrics}");
}

fn lambda_config(emulator: &Demo, extra: &str) -> String {
    format!("[aws]\nendpoint_url = \"http://{}\"\n{extra}", emulator.addr)
}

fn lambda_tool(server: &str, function: &str, tool: &str, read_only: bool, extra: &str) -> String {
    format!(
        "[servers.{server}]\ntransport = \"lambda\"\nfunction = \"{function}\"\ndiscover = false\n{extra}\n[[servers.{server}.tools]]\nname = \"{tool}\"\ninputSchema = {{ type = \"object\" }}\nannotations = {{ readOnlyHint = {read_only} }}\n"
    )
}

fn invocations(emulator: &Demo, function: &str) -> u64 {
    let report: Value =
        reqwest::blocking::get(format!("http://{}/_invocations", emulator.addr)).unwrap().json().unwrap();
    report["functions"][function].as_u64().unwrap_or(0)
}

#[test]
fn a_total_outage_stays_within_the_retry_budget() {
    let emulator = Demo::lambda_api();
    let config = lambda_config(
        &emulator,
        &lambda_tool(
            "down",
            "mcp-demo-unhandled",
            "manga_search",
            true,
            "[servers.down.breaker]\nenabled = false\n[servers.down.retry]\nbudget_ratio = 0.2\nbudget_min_per_sec = 0\nbackoff_base_ms = 1\nbackoff_max_ms = 2\n",
        ),
    );
    let gw = Gateway::start(&config, &[]);
    let calls = 100;
    for _ in 0..calls {
        let answer = gw.call("manga_search", json!({}));
        expect_error(&answer, -32000, "upstream_error");
    }
    let attempts = invocations(&emulator, "mcp-demo-unhandled");
    assert!(attempts >= calls, "every call made at least one attempt ({attempts})");
    assert!(
        attempts <= calls + calls / 5 + 2,
        "retries stayed within 20% of calls: {attempts} attempts for {calls} calls"
    );
    let metrics = gw.metrics();
    assert!(
        metric(&metrics, "mcp_gateway_retries_total", &["result=\"denied_by_budget\""]) > 0.0,
        "{metrics}"
    );
    assert!(metric(&metrics, "mcp_gateway_retries_total", &["result=\"taken\""]) > 0.0, "{metrics}");
}

#[test]
fn rate_limits_wait_for_retry_after_and_unsafe_tools_are_not_retried_after_a_timeout() {
    let emulator = Demo::lambda_api();
    let mut config = lambda_tool("throttled", "mcp-demo-throttled", "lookup", true, "");
    config += &lambda_tool(
        "slow",
        "mcp-demo-slow-2000",
        "add_to_cart",
        false,
        "timeout_ms = 200\n[servers.slow.breaker]\nenabled = false\n",
    );
    let gw = Gateway::start(&lambda_config(&emulator, &config), &[]);
    let started = Instant::now();
    let answer = gw.call("lookup", json!({}));
    let elapsed = started.elapsed();
    let data = expect_error(&answer, -32003, "rate_limited");
    assert_eq!(data["attempts"], 3);
    assert!(elapsed >= Duration::from_millis(2000), "Retry-After: 1 was waited twice ({elapsed:?})");
    assert_eq!(invocations(&emulator, "mcp-demo-throttled"), 3);

    let answer = gw.call("add_to_cart", json!({}));
    let data = expect_error(&answer, -32001, "timeout");
    assert_eq!(data["attempts"], 1, "a non-idempotent call that may have run is never repeated");
    assert_eq!(invocations(&emulator, "mcp-demo-slow-2000"), 1);
}

#[test]
fn the_callers_deadline_cuts_a_slow_call_and_the_upstream_sees_the_cancellation() {
    let demo = Demo::slow(3000);
    let gw = Gateway::start(&http_server("slow", &demo.url(), ""), &[]);
    let started = Instant::now();
    let answer =
        gw.call_with("price_lookup", json!({"manga_id": "MNG-00000001"}), &[("X-Request-Timeout-Ms", "300")]);
    let elapsed = started.elapsed();
    expect_error(&answer, -32001, "timeout");
    assert!(
        elapsed < Duration::from_millis(1000),
        "cut at the deadline, not the upstream's pace ({elapsed:?})"
    );
    // The deadline covers retries too: a read-only tool would be retried, but not past it.
    assert!(answer["error"]["data"]["attempts"].as_u64().unwrap() >= 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while demo.stats()["abandoned"] == 0 {
        assert!(Instant::now() < deadline, "the upstream never saw the call cancelled: {}", demo.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The `_meta` deadline works the same way.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "price_lookup",
        "arguments": {"manga_id": "MNG-00000001"}, "_meta": {"io.mcp-gateway/timeoutMs": 200}}});
    let started = Instant::now();
    let (_, answer) = gw.rpc(&body);
    expect_error(&answer, -32001, "timeout");
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert!(metric(&gw.metrics(), "mcp_gateway_cancellations_total", &["reason=\"deadline\""]) >= 2.0);
}

#[test]
fn a_caller_that_disconnects_cancels_the_upstream_call() {
    let demo = Demo::slow(3000);
    let gw = Gateway::start(&http_server("slow", &demo.url(), ""), &[]);
    let impatient = reqwest::blocking::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000001"}}});
    assert!(impatient.post(gw.url("/mcp")).body(body.to_string()).send().is_err());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = gw.metrics();
        if metric(&metrics, "mcp_gateway_cancellations_total", &["reason=\"disconnect\""]) >= 1.0
            && demo.stats()["abandoned"] == 1
        {
            break;
        }
        assert!(Instant::now() < deadline, "disconnect not propagated: {} / {}", demo.stats(), metrics);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn session_era_upstreams_get_notifications_cancelled() {
    // A session-era server: a call cut by the deadline is cancelled by notification.
    let demo = Demo::with_sessions(2000);
    let gw = Gateway::start(&http_server("legacy", &demo.url(), ""), &[]);
    assert!(gw.metrics().contains("mcp_gateway_upstream_era{era=\"session\",server=\"legacy\"} 1"));
    let started = Instant::now();
    let answer =
        gw.call_with("add_to_cart", json!({"manga_id": "MNG-00000001"}), &[("X-Request-Timeout-Ms", "300")]);
    expect_error(&answer, -32001, "timeout");
    assert!(started.elapsed() < Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(5);
    while demo.stats()["cancel_notifications"] != 1 {
        assert!(Instant::now() < deadline, "no notifications/cancelled reached the server: {}", demo.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The session outlives the cancellation; when the server forgets it, the gateway
    // re-initializes once and replays the call.
    reqwest::blocking::Client::new().post(format!("http://{}/_expire_sessions", demo.addr)).send().unwrap();
    let after = gw.call_with(
        "price_lookup",
        json!({"manga_id": "MNG-00000001"}),
        &[("X-Request-Timeout-Ms", "5000")],
    );
    assert_eq!(after["result"]["structuredContent"]["retail_price"], 528, "{after}");
}

#[test]
fn stale_results_and_alternative_tools_stand_in_for_a_failed_server() {
    let port = free_port();
    let mut demo = Demo::start(false, port);
    let spare = Demo::http();
    let mut config = http_server("catalog", &format!("http://127.0.0.1:{port}/mcp"), "");
    config += &http_server("spare", &spare.url(), "");
    config += "[tools.catalog__manga_search]\nstale_fallback = true\n[tools.catalog__inventory_check]\nfallback_tool = \"spare__inventory_check\"\n";
    let gw = Gateway::start(&config, &[]);
    let fresh = gw.call("catalog__manga_search", json!({"query": "naruto"}));
    assert!(fresh.get("result").is_some(), "{fresh}");
    drop(demo.proc.child.kill());
    let _ = demo.proc.child.wait();
    let stale = gw.call("catalog__manga_search", json!({"query": "naruto"}));
    let meta = &stale["result"]["_meta"];
    assert_eq!(meta["degraded"], true, "{stale}");
    assert_eq!(meta["stale"], true);
    assert_eq!(stale["result"]["structuredContent"], fresh["result"]["structuredContent"]);
    // Other arguments have no last good result: the failure is reported.
    let none = gw.call("catalog__manga_search", json!({"query": "bleach"}));
    assert!(none.get("error").is_some(), "{none}");
    let alternative = gw.call("catalog__inventory_check", json!({"manga_ids": ["MNG-00000001"]}));
    assert_eq!(alternative["result"]["_meta"]["fallback_tool"], "spare__inventory_check", "{alternative}");
    assert_eq!(alternative["result"]["structuredContent"]["items"][0]["stock"], 59);
    let metrics = gw.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_fallbacks_total", &["kind=\"stale\""]), 1.0, "{metrics}");
    assert_eq!(metric(&metrics, "mcp_gateway_fallbacks_total", &["kind=\"alternative\""]), 1.0, "{metrics}");
    demo = Demo::http();
    drop(demo);
}

#[test]
fn read_only_results_are_cached_and_identical_calls_in_flight_share_one_upstream_call() {
    let demo = Demo::slow(400);
    let config = http_server("catalog", &demo.url(), "")
        + "[tools.manga_search]\ncache_ttl_ms = 60000\n[tools.add_to_cart]\ncache_ttl_ms = 60000\n";
    let gw = Arc::new(Gateway::start(&config, &[]));
    // Ten identical read-only calls at once: one upstream call.
    let threads: Vec<_> = (0..10)
        .map(|_| {
            let gw = gw.clone();
            std::thread::spawn(move || gw.call("price_lookup", json!({"manga_id": "MNG-00000002"})))
        })
        .collect();
    let answers: Vec<Value> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(answers.iter().all(|a| a["result"]["structuredContent"]["manga_id"] == "MNG-00000002"));
    assert_eq!(demo.stats()["calls"], 1, "in-flight calls were not shared: {}", demo.stats());
    // Cached within the TTL (manga_search has one); argument order does not matter.
    gw.call("manga_search", json!({"query": "naruto", "language": "en"}));
    gw.call("manga_search", json!({"language": "en", "query": "naruto"}));
    assert_eq!(demo.stats()["calls"], 2);
    // Never for tools that are not read-only, whatever the configuration says.
    gw.call("add_to_cart", json!({"manga_id": "MNG-00000001"}));
    gw.call("add_to_cart", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(demo.stats()["calls"], 4);
    let metrics = gw.metrics();
    assert_eq!(
        metric(&metrics, "mcp_gateway_result_cache_total", &["tool=\"manga_search\"", "result=\"hit\""]),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "mcp_gateway_result_cache_total", &["tool=\"price_lookup\"", "result=\"shared\""]),
        9.0,
        "{metrics}"
    );
}

#[test]
fn oversized_results_are_cut_with_a_notice() {
    let demo = Demo::http();
    let config = http_server("catalog", &demo.url(), "") + "[tools.price_lookup]\nmax_result_bytes = 120\n";
    let gw = Gateway::start(&config, &[]);
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001", "include_history": true}));
    let content = answer["result"]["content"].as_array().unwrap();
    assert_eq!(content[0]["text"].as_str().unwrap().len(), 120, "{answer}");
    assert!(content[1]["text"].as_str().unwrap().starts_with("[truncated by mcp-gateway"));
    assert_eq!(answer["result"]["_meta"]["truncated"], true);
    assert_eq!(
        metric(&gw.metrics(), "mcp_gateway_result_truncations_total", &["tool=\"price_lookup\""]),
        1.0
    );
}

#[test]
fn two_gateways_share_breaker_state_through_redis() {
    let (_redis, redis_port) = redis_server();
    let dead = free_port();
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{redis_port}\"\nshared_breakers = true\n{}[[servers.down.tools]]\nname = \"order_status\"\ninputSchema = {{ type = \"object\" }}\n",
        http_server(
            "down",
            &format!("http://127.0.0.1:{dead}/mcp"),
            "discover = false\n[servers.down.breaker]\nopen_base_ms = 5000\n"
        )
    );
    let a = Gateway::start(&config, &[]);
    let b = Gateway::start(&config, &[]);
    for _ in 0..5 {
        expect_error(&a.call("order_status", json!({})), -32000, "upstream_unavailable");
    }
    expect_error(&a.call("order_status", json!({})), -32004, "circuit_open");
    let opened = Instant::now();
    loop {
        let answer = b.call("order_status", json!({}));
        if answer["error"]["data"]["category"] == "circuit_open" {
            break;
        }
        assert!(opened.elapsed() < Duration::from_secs(1), "B did not see A's open breaker within a second");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(opened.elapsed() < Duration::from_secs(1));
    // The admin view and operator actions.
    let report: Value = b.client.get(b.url("/admin/breakers")).send().unwrap().json().unwrap();
    assert!(report["down"]["remote_open_ms"].as_u64().unwrap() > 0, "{report}");
    let closed: Value = a.client.post(a.url("/admin/breakers/down/close")).send().unwrap().json().unwrap();
    assert_eq!(closed["breaker"]["state"], "closed");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let answer = b.call("order_status", json!({}));
        if answer["error"]["data"]["category"] == "upstream_unavailable" {
            break;
        }
        assert!(Instant::now() < deadline, "B did not see the close: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(a.client.post(a.url("/admin/breakers/nope/open")).send().unwrap().status(), 404);
}

#[test]
fn redis_unreachable_leaves_local_breakers_working() {
    let dead_redis = free_port();
    let dead = free_port();
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{dead_redis}\"\nshared_breakers = true\n{}[[servers.down.tools]]\nname = \"order_status\"\ninputSchema = {{ type = \"object\" }}\n",
        http_server("down", &format!("http://127.0.0.1:{dead}/mcp"), "discover = false\n")
    );
    let gw = Gateway::start(&config, &[]);
    for _ in 0..5 {
        expect_error(&gw.call("order_status", json!({})), -32000, "upstream_unavailable");
    }
    expect_error(&gw.call("order_status", json!({})), -32004, "circuit_open");
    std::thread::sleep(Duration::from_millis(500));
    assert!(metric(&gw.metrics(), "mcp_gateway_shared_state_errors_total", &[]) > 0.0);
}

#[test]
fn calls_beyond_the_concurrency_limit_are_shed_at_once() {
    let demo = Demo::slow(1000);
    let config = http_server("catalog", &demo.url(), "max_concurrency = 2\n");
    let gw = Arc::new(Gateway::start(&config, &[]));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let gw = gw.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                // Distinct arguments: no in-flight sharing.
                let answer = gw.call("manga_search", json!({"query": format!("naruto {i}")}));
                (answer, started.elapsed())
            })
        })
        .collect();
    let results: Vec<(Value, Duration)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let shed: Vec<&(Value, Duration)> =
        results.iter().filter(|(a, _)| a["error"]["data"]["category"] == "overloaded").collect();
    let served = results.iter().filter(|(a, _)| a.get("result").is_some()).count();
    assert_eq!(served, 2, "{results:?}");
    assert_eq!(shed.len(), 4, "{results:?}");
    for (answer, elapsed) in shed {
        expect_error(answer, -32005, "overloaded");
        assert!(*elapsed < Duration::from_millis(500), "shedding must not wait: {elapsed:?}");
    }
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_load_shed_total", &["server=\"catalog\""]), 4.0);
}
