//! The registry under pressure, against DynamoDB Local, redis-server and demo servers: made-up
//! tool names cannot make a sidecar refresh everything over and over, a DynamoDB outage costs
//! one failed read rather than one per lookup, and a registry entry that moves to another
//! server is followed. Counts come from the gateway's `/metrics` and the demo servers' stats.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

/// DynamoDB Local (optional) and redis-server (optional), with the table created.
struct Stores {
    dynamo: Option<(Proc, u16)>,
    redis: Option<(Proc, u16)>,
}

impl Stores {
    fn start(with_dynamo: bool, with_redis: bool) -> Self {
        let stores = Self { dynamo: with_dynamo.then(dynamodb_local), redis: with_redis.then(redis_server) };
        if stores.dynamo.is_some() {
            registry_cli(&stores.env(false), &["create-table"]);
        }
        stores
    }

    fn env(&self, announce: bool) -> Vec<(&'static str, String)> {
        let mut env = vec![("MCP_GATEWAY_DYNAMODB_TABLE", "mcp-tool-registry".to_string())];
        if let Some((_, port)) = &self.dynamo {
            env.push(("MCP_GATEWAY_DYNAMODB_ENDPOINT", format!("http://127.0.0.1:{port}")));
        }
        if announce && let Some((_, port)) = &self.redis {
            env.push(("MCP_GATEWAY_REDIS_URL", format!("redis://127.0.0.1:{port}")));
        }
        env
    }

    /// Gateway configuration: top-level lines, then `[registry]` settings.
    fn config(&self, top: &str, registry: &str) -> String {
        let mut config = String::new();
        if let Some((_, port)) = &self.dynamo {
            config += &format!(
                "dynamodb_table = \"mcp-tool-registry\"\ndynamodb_endpoint = \"http://127.0.0.1:{port}\"\n"
            );
        }
        if let Some((_, port)) = &self.redis {
            config += &format!("redis_url = \"redis://127.0.0.1:{port}\"\n");
        }
        // Some of these gateways start with an empty registry: ready with no tools.
        format!("{config}ready_min_tools = 0\n{top}\n[registry]\nnegative_ttl_secs = 600\n{registry}\n")
    }

    fn put(&self, announce: bool, tool: Value) {
        let path = temp_path("tool.json");
        std::fs::write(&path, tool.to_string()).unwrap();
        registry_cli(&self.env(announce), &["put", path.to_str().unwrap()]);
        let _ = std::fs::remove_file(path);
    }

    fn kill_dynamo(&mut self) {
        if let Some((dynamo, _)) = self.dynamo.as_mut() {
            let _ = dynamo.child.kill();
            let _ = dynamo.child.wait();
        }
    }
}

/// A registry entry for one of the demo's tools, hosted by server "catalog" at `url`.
fn manga_tool(name: &str, url: &str) -> Value {
    let tools: Value = serde_json::from_str(include_str!("../../config/manga-tools.json")).unwrap();
    let mut tool = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap().clone();
    tool["server"] = json!({"name": "catalog", "transport": "http", "url": url});
    tool
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
    let gw = Gateway::start(&stores.config(&top, ""), REGISTRY_LOOPBACK);
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
    let gw = Gateway::start(&stores.config("", ""), REGISTRY_LOOPBACK);
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
    let config = stores.config(
        "refresh_interval_secs = 600",
        "memory_ttl_secs = 1\ndynamodb_backoff_ms = 600000\ndynamodb_timeout_ms = 10000\n",
    );
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    // Registered after the start-up scan: found by a point lookup and kept in memory.
    stores.put(false, manga_tool("price_lookup", &demo.url()));
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
    let gw = Gateway::start(&stores.config("refresh_interval_secs = 1", ""), REGISTRY_LOOPBACK);
    stores.put(true, manga_tool("price_lookup", &old.url()));
    let call = || gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(structured(&call())["retail_price"], 528);
    assert_eq!(old.stats()["calls"], 1);
    // Same server name, another URL.
    stores.put(true, manga_tool("price_lookup", &new.url()));
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
