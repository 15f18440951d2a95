//! The resilience stack against real upstream processes: breakers under a killed server,
//! failure attribution, retry safety and budget, deadlines and cancellation, fallbacks,
//! result caching and in-flight sharing, truncation, and breaker state shared through Redis.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::common::*;
use serde_json::{Value, json};

#[test]
fn a_killed_server_opens_its_breaker_fails_fast_and_recovers_when_restarted() {
    let port = free_port();
    let mut demo = Demo::start(false, port);
    let config = http_server("catalog", &format!("http://127.0.0.1:{port}/mcp"))
        + "[servers.catalog.breaker]\nopen_base_ms = 300\nopen_max_ms = 600\n";
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
    let category = |a: &Value| a["error"]["data"]["category"].as_str().unwrap_or("ok").to_string();
    let count = |what: &str| answers.lock().unwrap().iter().filter(|a| category(a) == what).count();
    wait_for("calls before the outage", || count("ok") >= 5);
    drop(demo.proc.child.kill());
    let _ = demo.proc.child.wait();
    wait_for("calls failing fast during the outage", || count("circuit_open") > 10);
    let open_metrics = gw.metrics();
    let before_restart = answers.lock().unwrap().len();
    demo = Demo::start(false, port);
    wait_for("a success after the restart", || {
        answers.lock().unwrap()[before_restart..].iter().any(|a| a.get("result").is_some())
    });
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), sent.load(Ordering::Relaxed), "every request got exactly one answer");
    assert!(answers.iter().all(|a| a.get("result").is_some() || a.get("error").is_some()));
    // Calls that met the open circuit first never reached the transport (a call whose first
    // attempt failed and whose retry met the open circuit reports that one attempt).
    let refused_outright = answers
        .iter()
        .filter(|a| category(a) == "circuit_open" && a["error"]["data"]["attempts"] == 0)
        .count();
    assert!(refused_outright > 0, "no call was refused without an attempt");
    // After the restart the probe closed the breaker and calls succeed again.
    assert!(answers.last().unwrap().get("result").is_some(), "last answer: {}", answers.last().unwrap());
    assert!(open_metrics.contains("mcp_gateway_breaker_state{server=\"catalog\"} 1"), "{open_metrics}");
    let metrics = gw.metrics();
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"catalog\"} 0"), "{metrics}");
    assert!(metric(&metrics, "mcp_gateway_breaker_transitions_total", &["to=\"closed\""]) >= 1.0);
    drop(demo);
}

#[test]
fn tool_errors_and_invalid_params_never_open_the_breaker() {
    let demo = Demo::http();
    let config = http_server("catalog", &demo.url())
        + "[servers.catalog.breaker]\nconsecutive_failures = 2\nmin_calls = 4\n[[servers.catalog.tools]]\nname = \"ghost\"\ninputSchema = { type = \"object\" }\n";
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
    let attempts = emulator.invocations("mcp-demo-unhandled");
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
    let config = format!(
        "log_level = \"info,mcp_gateway::resilience::retry=debug\"\n{}",
        lambda_config(&emulator, &config)
    );
    let gw = Gateway::start(&config, &[]);
    let answer = gw.call("lookup", json!({}));
    let data = expect_error(&answer, -32003, "rate_limited");
    assert_eq!(data["attempts"], 3);
    assert_eq!(emulator.invocations("mcp-demo-throttled"), 3);
    // Each retry waited at least the upstream's Retry-After (1 s), by the gateway's own plan.
    let waits: Vec<u64> = gw
        .proc
        .output()
        .lines()
        .filter(|l| l.contains("\"retrying\""))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["wait_ms"].as_u64())
        .collect();
    assert_eq!(waits.len(), 2, "{}", gw.proc.output());
    assert!(waits.iter().all(|&w| w >= 1000), "Retry-After: 1 was honoured: {waits:?}");

    let answer = gw.call("add_to_cart", json!({}));
    let data = expect_error(&answer, -32001, "timeout");
    assert_eq!(data["attempts"], 1, "a non-idempotent call that may have run is never repeated");
    assert_eq!(emulator.invocations("mcp-demo-slow-2000"), 1);
}

#[test]
fn the_callers_deadline_cuts_a_slow_call_and_the_upstream_sees_the_cancellation() {
    let demo = Demo::slow(3000);
    let gw = Gateway::start(&http_server("slow", &demo.url()), &[]);
    let answer =
        gw.call_with("price_lookup", json!({"manga_id": "MNG-00000001"}), &[("X-Request-Timeout-Ms", "300")]);
    expect_error(&answer, -32001, "timeout");
    // The deadline covers retries too: a read-only tool would be retried, but not past it.
    assert!(answer["error"]["data"]["attempts"].as_u64().unwrap() >= 1);
    wait_for("the upstream to see the call cancelled", || demo.stats()["abandoned"] != 0);
    // The `_meta` deadline works the same way.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "price_lookup",
        "arguments": {"manga_id": "MNG-00000001"}, "_meta": {"io.mcp-gateway/timeoutMs": 200}}});
    let (_, answer) = gw.rpc(&body);
    expect_error(&answer, -32001, "timeout");
    assert!(metric(&gw.metrics(), "mcp_gateway_cancellations_total", &["reason=\"deadline\""]) >= 2.0);
}

#[test]
fn callers_deadlines_never_open_the_breaker_of_a_slow_healthy_server() {
    // The reproduction: short caller deadlines on a slow tool of a healthy server.
    let demo = Demo::slow(1500);
    let config = http_server("slow", &demo.url())
        + "[servers.slow.breaker]\nconsecutive_failures = 3\nmin_calls = 4\n";
    let gw = Gateway::start(&config, &[]);
    for i in 0..8 {
        let answer = gw.call_with(
            "add_to_cart",
            json!({"manga_id": format!("MNG-0000000{i}")}),
            &[("X-Request-Timeout-Ms", "50")],
        );
        expect_error(&answer, -32001, "timeout");
    }
    let metrics = gw.metrics();
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"slow\"} 0"), "{metrics}");
    assert_eq!(metric(&metrics, "mcp_gateway_breaker_transitions_total", &[]), 0.0, "{metrics}");
    // Every tool of the server is still served.
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(answer["result"]["structuredContent"]["retail_price"], 528, "{answer}");
}

#[test]
fn a_caller_that_disconnects_cancels_the_upstream_call() {
    let demo = Demo::slow(3000);
    let gw = Gateway::start(&http_server("slow", &demo.url()), &[]);
    let impatient = reqwest::blocking::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000001"}}});
    assert!(impatient.post(gw.url("/mcp")).body(body.to_string()).send().is_err());
    wait_for("the disconnect to reach the upstream", || {
        metric(&gw.metrics(), "mcp_gateway_cancellations_total", &["reason=\"disconnect\""]) >= 1.0
            && demo.stats()["abandoned"] == 1
    });
    // The call is accounted for: the in-flight gauge is back to zero, and the call has its
    // metric sample and its log line.
    let metrics = gw.metrics();
    assert!(metrics.contains("\nmcp_gateway_in_flight 0"), "{metrics}");
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_tool_calls_total",
            &["tool=\"price_lookup\"", "outcome=\"caller_disconnected\""]
        ),
        1.0,
        "{metrics}"
    );
    // Log lines reach stdout in batches, shortly after they are logged.
    wait_for("the call's log line", || {
        gw.proc.output().lines().any(|l| l.contains("\"outcome\":\"caller_disconnected\""))
    });
}

#[test]
fn session_era_upstreams_get_notifications_cancelled() {
    // A session-era server: a call cut by the deadline is cancelled by notification.
    let demo = Demo::with_sessions(2000);
    let gw = Gateway::start(&http_server("legacy", &demo.url()), &[]);
    assert!(gw.metrics().contains("mcp_gateway_upstream_era{era=\"session\",server=\"legacy\"} 1"));
    let answer =
        gw.call_with("add_to_cart", json!({"manga_id": "MNG-00000001"}), &[("X-Request-Timeout-Ms", "300")]);
    expect_error(&answer, -32001, "timeout");
    wait_for("notifications/cancelled to reach the server", || demo.stats()["cancel_notifications"] == 1);
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
    let mut config = http_server("catalog", &format!("http://127.0.0.1:{port}/mcp"));
    config += &http_server("spare", &spare.url());
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
    let config = http_server("catalog", &demo.url())
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
    let config = http_server("catalog", &demo.url()) + "[tools.price_lookup]\nmax_result_bytes = 120\n";
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
fn redis_unreachable_leaves_local_breakers_working() {
    let dead_redis = free_port();
    let dead = free_port();
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{dead_redis}\"\nshared_breakers = true\n{}[[servers.down.tools]]\nname = \"order_status\"\ninputSchema = {{ type = \"object\" }}\n",
        http_server("down", &format!("http://127.0.0.1:{dead}/mcp")) + "discover = false\n"
    );
    let gw = Gateway::start(&config, &[]);
    for _ in 0..5 {
        expect_error(&gw.call("order_status", json!({})), -32000, "upstream_unavailable");
    }
    expect_error(&gw.call("order_status", json!({})), -32004, "circuit_open");
    wait_for("the Redis errors to be counted", || {
        metric(&gw.metrics(), "mcp_gateway_shared_state_errors_total", &[]) > 0.0
    });
}

#[test]
fn calls_beyond_the_concurrency_limit_are_shed_at_once() {
    let demo = Demo::slow(1000);
    let config = http_server("catalog", &demo.url()) + "max_concurrency = 2\n";
    let gw = Arc::new(Gateway::start(&config, &[]));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let gw = gw.clone();
            // Distinct arguments: no in-flight sharing.
            std::thread::spawn(move || gw.call("manga_search", json!({"query": format!("naruto {i}")})))
        })
        .collect();
    let results: Vec<Value> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let shed: Vec<&Value> =
        results.iter().filter(|a| a["error"]["data"]["category"] == "overloaded").collect();
    let served = results.iter().filter(|a| a.get("result").is_some()).count();
    assert_eq!(served, 2, "{results:?}");
    assert_eq!(shed.len(), 4, "{results:?}");
    for answer in shed {
        let data = expect_error(answer, -32005, "overloaded");
        assert_eq!(data["attempts"], 0, "shed calls are never sent: {answer}");
    }
    assert_eq!(demo.stats()["calls"], 2, "only the admitted calls reached the server");
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_load_shed_total", &["server=\"catalog\""]), 4.0);
}

#[test]
fn a_hung_server_trips_its_breaker_even_while_calls_are_shed() {
    // Two permits; the server never answers within the attempt timeout. Each round: two
    // calls take the permits and time out, four more are shed at once. Shed calls must not
    // reset the consecutive count, so the second round's timeouts trip the breaker.
    let demo = Demo::slow(60_000);
    let config = http_server("hung", &demo.url())
        + "max_concurrency = 2\ntimeout_ms = 400\n[servers.hung.breaker]\nconsecutive_failures = 3\nmin_calls = 1000\nopen_base_ms = 60000\n";
    let gw = Arc::new(Gateway::start(&config, &[]));
    for round in 0..2u64 {
        let call = |i: u64| {
            let gw = gw.clone();
            // Not idempotent: a timed-out attempt is never retried, so each call is one attempt.
            std::thread::spawn(move || {
                gw.call("add_to_cart", json!({"manga_id": format!("MNG-{round}{i:07}")}))
            })
        };
        let holders: Vec<_> = (0..2).map(call).collect();
        wait_for("both permits taken", || demo.stats()["calls"] == 2 * (round + 1));
        let shed: Vec<Value> = (2..6).map(call).map(|t| t.join().unwrap()).collect();
        for answer in &shed {
            expect_error(answer, -32005, "overloaded");
        }
        for holder in holders {
            expect_error(&holder.join().unwrap(), -32001, "timeout");
        }
    }
    let metrics = gw.metrics();
    assert!(metrics.contains("mcp_gateway_breaker_state{server=\"hung\"} 1"), "{metrics}");
    expect_error(&gw.call("add_to_cart", json!({"manga_id": "MNG-00000001"})), -32004, "circuit_open");
}

#[test]
fn fallback_tools_never_repeat_a_side_effect_and_keep_the_callers_meta() {
    let slow = Demo::slow(5_000);
    let spare = Demo::http();
    let dead = free_port();
    let mut config = http_server("checkout", &slow.url()) + "timeout_ms = 300\n";
    config += &(http_server("gone", &format!("http://127.0.0.1:{dead}/mcp"))
        + "discover = false\n[[servers.gone.tools]]\nname = \"add_to_cart\"\ninputSchema = { type = \"object\" }\n");
    config += &http_server("spare", &spare.url());
    config += "[tools.checkout__add_to_cart]\nfallback_tool = \"spare__add_to_cart\"\n";
    config += "[tools.gone__add_to_cart]\nfallback_tool = \"spare__add_to_cart\"\n";
    let gw = Gateway::start(&config, &[]);
    let meta = json!({"trace": "t-1", "io.mcp-gateway/idempotencyKey": "cart-7"});
    let call = |tool: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool,
            "arguments": {"manga_id": "MNG-00000001"}, "_meta": meta}});
        gw.rpc(&body).1
    };
    // add_to_cart is neither read-only nor idempotent. Its attempt timed out: it may have run,
    // so no second call is made anywhere.
    let timed_out = call("checkout__add_to_cart");
    expect_error(&timed_out, -32001, "timeout");
    assert_eq!(spare.stats()["calls"], 0, "a call that may have run was repeated elsewhere");
    // Its server refused the connection: nothing was sent, the alternative may run, and it
    // carries the caller's _meta (the derived idempotency key too).
    let refused = call("gone__add_to_cart");
    assert_eq!(refused["result"]["_meta"]["fallback_tool"], "spare__add_to_cart", "{refused}");
    assert_eq!(spare.stats()["calls"], 1);
    let seen = &spare.stats()["last_meta"];
    assert_eq!(seen["trace"], "t-1", "{seen}");
    assert!(seen["io.mcp-gateway/idempotencyKey"].is_string(), "{seen}");
    let metrics = gw.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_fallbacks_total", &["kind=\"alternative\""]), 1.0, "{metrics}");
}
