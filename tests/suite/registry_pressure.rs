//! The registry under pressure, against DynamoDB Local, redis-server and demo servers: made-up
//! tool names cannot make a sidecar refresh everything over and over, a DynamoDB outage costs
//! one failed read rather than one per lookup, and a registry entry that moves to another
//! server is followed. Counts come from the gateway's `/metrics` and the demo servers' stats.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

/// The gateway's configuration: the stores, `top` lines, then `[registry]` settings.
fn config(stores: &Stores, top: &str, registry: &str) -> String {
    // Some of these gateways start with an empty registry: ready with no tools.
    format!(
        "{}ready_min_tools = 0\n{top}\n[registry]\nnegative_ttl_secs = 600\n{registry}\n",
        stores.config()
    )
}

fn lookups(metrics: &str, tier: &str, result: &str) -> f64 {
    let tier = format!("tier=\"{tier}\"");
    let result = format!("result=\"{result}\"");
    metric(metrics, "mcp_gateway_registry_lookups_total", &[&tier, &result])
}

/// Full refreshes seen: DynamoDB scans and `tools/list` rounds to the configured server.
fn refreshes(metrics: &str, source: &str) -> f64 {
    metric(metrics, "mcp_gateway_registry_refresh_total", &[&format!("server=\"{source}\"")])
}

#[test]
fn made_up_names_wake_at_most_one_full_refresh_and_are_then_answered_from_memory() {
    let stores = Stores::start(true, false);
    let demo = Demo::http();
    let top = format!(
        "refresh_interval_secs = 600\n[servers.shop]\ntransport = \"http\"\nurl = \"{}\"\n",
        demo.url()
    );
    let gw = Gateway::start(&config(&stores, &top, ""), REGISTRY_LOOPBACK);
    let before = gw.metrics();
    // Fifty different made-up names, spread over more than ten seconds (the old limit was
    // one woken refresh every five seconds).
    for i in 0..50 {
        expect_error(&gw.call(&format!("invented_tool_{i}"), json!({})), -32002, "unknown_tool");
        std::thread::sleep(Duration::from_millis(250));
    }
    // Asked again: every name is answered from the negative cache.
    for i in 0..50 {
        expect_error(&gw.call(&format!("invented_tool_{i}"), json!({})), -32002, "unknown_tool");
    }
    let after = gw.metrics();
    let scans = refreshes(&after, "dynamodb") - refreshes(&before, "dynamodb");
    let listings = refreshes(&after, "shop") - refreshes(&before, "shop");
    assert!(scans <= 1.0, "{scans} DynamoDB scans woken by made-up names:\n{after}");
    assert!(listings <= 1.0, "{listings} tools/list rounds woken by made-up names:\n{after}");
    assert!(
        metric(&after, "mcp_gateway_registry_miss_wakes_total", &["result=\"skipped\""]) >= 1.0,
        "{after}"
    );
    // One point read per name, then memory.
    assert_eq!(lookups(&after, "dynamodb", "miss"), 50.0, "{after}");
    assert_eq!(lookups(&after, "memory", "negative"), 50.0, "{after}");
}

#[test]
fn without_dynamodb_redis_misses_are_cached_negatively_too() {
    let stores = Stores::start(false, true);
    let gw = Gateway::start(&config(&stores, "", ""), REGISTRY_LOOPBACK);
    for _ in 0..20 {
        expect_error(&gw.call("made_up_tool", json!({})), -32002, "unknown_tool");
    }
    let m = gw.metrics();
    assert_eq!(lookups(&m, "redis", "miss"), 1.0, "one Redis read for 20 calls:\n{m}");
    assert_eq!(lookups(&m, "memory", "negative"), 19.0, "{m}");
}

#[test]
fn during_a_dynamodb_outage_stale_entries_are_served_without_asking_it_again() {
    let mut stores = Stores::start(true, false);
    let demo = Demo::http();
    // A generous timeout: a cold DynamoDB Local must not fail the first read (that would
    // start the back-off before the outage).
    let config = config(
        &stores,
        "refresh_interval_secs = 600",
        "memory_ttl_secs = 1\ndynamodb_backoff_ms = 600000\ndynamodb_timeout_ms = 10000\n",
    );
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    // Registered after the start-up scan: found by a point lookup and kept in memory.
    stores.put(false, &manga_tool("price_lookup", &demo.url()));
    let first = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(structured(&first)["retail_price"], 528, "{first}\n{}", gw.metrics());
    stores.kill_dynamo();
    // Let the memory entry go past its TTL: from now on it is stale.
    std::thread::sleep(Duration::from_millis(1_200));
    for _ in 0..20 {
        let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
        assert_eq!(structured(&answer)["retail_price"], 528, "{answer}");
    }
    let m = gw.metrics();
    assert_eq!(lookups(&m, "dynamodb", "error"), 1.0, "DynamoDB tried once, then backed off:\n{m}");
    assert_eq!(lookups(&m, "dynamodb", "skipped"), 19.0, "{m}");
    assert_eq!(lookups(&m, "memory", "stale"), 20.0, "{m}");
}

#[test]
fn a_registry_entry_moved_to_another_server_is_followed() {
    let stores = Stores::start(true, true);
    let old = Demo::http();
    let new = Demo::http();
    let gw = Gateway::start(&config(&stores, "refresh_interval_secs = 1", ""), REGISTRY_LOOPBACK);
    stores.put(true, &manga_tool("price_lookup", &old.url()));
    let call = || gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(structured(&call())["retail_price"], 528);
    assert_eq!(old.stats()["calls"], 1);
    // Same server name, another URL.
    stores.put(true, &manga_tool("price_lookup", &new.url()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while new.stats()["calls"] == 0 {
        assert!(
            Instant::now() < deadline,
            "calls still go to the old server: old {} / new {}",
            old.stats(),
            new.stats()
        );
        assert_eq!(structured(&call())["retail_price"], 528);
        std::thread::sleep(Duration::from_millis(50));
    }
    let old_calls = old.stats()["calls"].clone();
    for _ in 0..3 {
        assert_eq!(structured(&call())["retail_price"], 528);
    }
    assert_eq!(new.stats()["calls"], 4, "{}", new.stats());
    assert_eq!(old.stats()["calls"], old_calls, "the old server is no longer called");
}
