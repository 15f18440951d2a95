//! The registry tiers against real components: DynamoDB Local and redis-server on loopback
//! ports, the registry CLI writing to them, gateways reading through memory → Redis →
//! DynamoDB, and drift against the official "everything" server.

use std::sync::Arc;

use crate::common::*;
use serde_json::{Value, json};

/// The gateway's configuration reading the registry from `stores` (all pages of 100 items), then
/// `extra`.
fn config(stores: &Stores, extra: &str) -> String {
    // ready_min_tools = 0: some tests start on an empty registry on purpose.
    format!(
        "refresh_interval_secs = 1\nready_min_tools = 0\n{}[registry]\nscan_page_size = 100\nnegative_ttl_secs = 30\n{extra}",
        stores.config()
    )
}

fn import_catalog(stores: &Stores, demo: &Demo, announce: bool) {
    registry_cli(
        &stores.env(announce),
        &[
            "import",
            "config/manga-tools.json",
            "--server",
            "catalog",
            "--transport",
            "http",
            "--url",
            &demo.url(),
        ],
    );
}

#[test]
fn registered_tools_are_listed_and_called_through_a_registry_built_server() {
    let stores = Stores::start(true, true);
    let demo = Demo::http();
    import_catalog(&stores, &demo, true);
    let gw = Gateway::start(&config(&stores, ""), REGISTRY_LOOPBACK);
    let names = gw.tool_names();
    assert_eq!(names.len(), 6, "{names:?}");
    let answer = gw.call("manga_search", json!({"query": "ワンピース"}));
    assert_eq!(structured(&answer)["results"][0]["manga_id"], "MNG-00000001", "{answer}");
    // Validation uses the registered schema.
    expect_error(&gw.call("manga_search", json!({})), -32602, "bad_input");
    let ready: Value = gw.client.get(gw.url("/readyz")).send().unwrap().json().unwrap();
    assert_eq!(ready["tiers"]["dynamodb"], "reachable", "{ready}");
    let admin: Value = gw.admin_get("/admin/registry").send().unwrap().json().unwrap();
    let search = admin["tools"].as_array().unwrap().iter().find(|t| t["name"] == "manga_search").unwrap();
    assert_eq!(search["tier"], "dynamodb", "{admin}");
    assert_eq!(search["version"], 1);
    // A schema change written to DynamoDB alone (no Redis, no invalidation) is picked up by
    // the periodic refresh and counted.
    let mut stricter = manga_tool("manga_search", &demo.url());
    stricter["inputSchema"]["required"] = json!(["query", "genre"]);
    stores.put(false, &stricter);
    wait_for("the refresh to pick up the schema change", || {
        metric(&gw.metrics(), "mcp_gateway_registry_tool_changes_total", &["change=\"changed\""]) >= 1.0
    });
    expect_error(&gw.call("manga_search", json!({"query": "x"})), -32602, "bad_input");
}

#[test]
fn lookups_go_memory_redis_dynamodb_and_fill_the_tiers_above() {
    let stores = Stores::start(true, true);
    let demo = Demo::http();
    // Long refresh interval: names registered after start are found by point lookups.
    let config = config(&stores, "").replace("refresh_interval_secs = 1", "refresh_interval_secs = 600");
    let a = Gateway::start(&config, REGISTRY_LOOPBACK);
    let b = Gateway::start(&config, REGISTRY_LOOPBACK);
    // Written to DynamoDB only (no Redis entry, no invalidation).
    stores.put(false, &manga_tool("price_lookup", &demo.url()));
    let first = a.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(first["result"]["structuredContent"]["retail_price"], 528, "{first}");
    let m = a.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"miss\""]),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"dynamodb\"", "result=\"hit\""]),
        1.0,
        "{m}"
    );
    a.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    let m = a.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"memory\"", "result=\"hit\""]),
        1.0,
        "{m}"
    );
    // A filled Redis serves the second gateway without DynamoDB.
    b.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    let m = b.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"hit\""]),
        1.0,
        "{m}"
    );
    assert_eq!(metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"dynamodb\""]), 0.0, "{m}");
}

#[test]
fn concurrent_misses_share_one_read_and_unknown_names_are_cached_negatively() {
    let stores = Stores::start(true, false);
    let gw = Arc::new(Gateway::start(&config(&stores, ""), REGISTRY_LOOPBACK));
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let gw = gw.clone();
            std::thread::spawn(move || gw.call("made_up_tool", json!({})))
        })
        .collect();
    for t in threads {
        expect_error(&t.join().unwrap(), -32002, "unknown_tool");
    }
    for _ in 0..20 {
        expect_error(&gw.call("made_up_tool", json!({})), -32002, "unknown_tool");
    }
    let m = gw.metrics();
    let reads = metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"dynamodb\""]);
    assert_eq!(reads, 1.0, "70 calls for one unknown name must read DynamoDB once:\n{m}");
    assert!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"memory\"", "result=\"negative\""]) >= 20.0
    );
}

#[test]
fn redis_stopping_mid_test_only_costs_a_skip() {
    let mut stores = Stores::start(true, true);
    let demo = Demo::http();
    let config = config(&stores, "").replace("refresh_interval_secs = 1", "refresh_interval_secs = 600");
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    if let Some((redis, _)) = stores.redis.as_mut() {
        let _ = redis.child.kill();
        let _ = redis.child.wait();
    }
    stores.put(false, &manga_tool("inventory_check", &demo.url()));
    let answer = gw.call("inventory_check", json!({"manga_ids": ["MNG-00000001"]}));
    assert_eq!(answer["result"]["structuredContent"]["items"][0]["stock"], 59, "{answer}");
    let m = gw.metrics();
    assert!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"error\""]) >= 1.0,
        "{m}"
    );
}

#[test]
fn dynamodb_stopping_keeps_the_last_known_good_registry() {
    let mut stores = Stores::start(true, false);
    let demo = Demo::http();
    import_catalog(&stores, &demo, false);
    let gw = Gateway::start(&config(&stores, ""), REGISTRY_LOOPBACK);
    assert_eq!(gw.tool_names().len(), 6);
    stores.kill_dynamo();
    // Refreshes (every second) now fail; nothing is emptied.
    wait_for("two failed refreshes", || {
        metric(
            &gw.metrics(),
            "mcp_gateway_registry_refresh_total",
            &["server=\"dynamodb\"", "outcome=\"failure\""],
        ) >= 2.0
    });
    assert_eq!(gw.tool_names().len(), 6, "a failed refresh must not empty the catalogue");
    let answer = gw.call("manga_search", json!({"query": "naruto"}));
    assert!(answer.get("result").is_some(), "{answer}");
}

#[test]
fn both_tiers_down_at_start_still_serve_configuration() {
    let dead_redis = free_port();
    let dead_dynamo = free_port();
    let demo = Demo::http();
    let config = format!(
        "redis_url = \"redis://127.0.0.1:{dead_redis}\"\ndynamodb_table = \"t\"\ndynamodb_endpoint = \"http://127.0.0.1:{dead_dynamo}\"\n[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n",
        demo.url()
    );
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    assert_eq!(gw.tool_names().len(), 6);
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert!(answer.get("result").is_some(), "{answer}");
    expect_error(&gw.call("not_there", json!({})), -32002, "unknown_tool");
    let ready: Value = gw.client.get(gw.url("/readyz")).send().unwrap().json().unwrap();
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["tiers"]["dynamodb"], "unreachable", "{ready}");
    assert_eq!(ready["tiers"]["redis"], "unreachable", "{ready}");
}

#[test]
fn schema_changes_are_picked_up_counted_and_seen_by_every_gateway_through_invalidation() {
    let stores = Stores::start(true, true);
    let demo = Demo::http();
    import_catalog(&stores, &demo, true);
    let config = config(&stores, "").replace("refresh_interval_secs = 1", "refresh_interval_secs = 600");
    let a = Gateway::start(&config, REGISTRY_LOOPBACK);
    let b = Gateway::start(&config, REGISTRY_LOOPBACK);
    // max_results now tops out at 3: a stricter schema.
    let mut tool = manga_tool("manga_search", &demo.url());
    tool["inputSchema"]["properties"]["max_results"]["maximum"] = json!(3);
    stores.put(true, &tool);
    // Refreshes run every 10 minutes here: only the invalidation channel can carry it.
    for gw in [&a, &b] {
        wait_for("the stricter schema to apply", || {
            let answer = gw.call("manga_search", json!({"query": "x", "max_results": 5}));
            answer["error"]["data"]["category"] == "bad_input"
        });
    }
    for gw in [&a, &b] {
        let m = gw.metrics();
        assert_eq!(
            metric(&m, "mcp_gateway_registry_tool_changes_total", &["change=\"changed\""]),
            1.0,
            "{m}"
        );
    }
    // Deactivated tools disappear.
    let mut inactive = manga_tool("checkout", &demo.url());
    inactive["status"] = json!("inactive");
    stores.put(true, &inactive);
    wait_for("the inactive tool to disappear", || !a.tool_names().contains(&"checkout".to_string()));
    expect_error(
        &a.call("checkout", json!({"shipping_address_id": "a", "payment_method_id": "p"})),
        -32002,
        "unknown_tool",
    );
}

#[test]
fn refresh_reads_every_page_of_a_large_registry() {
    let stores = Stores::start(true, false);
    let mut tools = Vec::new();
    for i in 0..520 {
        tools.push(json!({"name": format!("tool_{i:04}"), "description": "generated", "inputSchema": {"type": "object"}}));
    }
    let path = temp_path("many.json");
    std::fs::write(&path, json!({"tools": tools}).to_string()).unwrap();
    registry_cli(
        &stores.env(false),
        &["import", path.to_str().unwrap(), "--server", "bulk", "--url", "http://127.0.0.1:9/mcp"],
    );
    let _ = std::fs::remove_file(path);
    let gw = Gateway::start(&config(&stores, ""), REGISTRY_LOOPBACK);
    let names = gw.tool_names();
    assert_eq!(names.len(), 520, "all pages (100 items each) were read");
    assert_eq!(names[0], "tool_0000");
    assert_eq!(names[519], "tool_0519");
}

#[test]
fn drift_against_a_live_everything_server() {
    let stores = Stores::start(true, false);
    let port = free_port();
    let _everything = everything_server(port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let server = json!({"name": "everything", "transport": "http", "url": url});
    // A deliberately stale entry: echo's schema differs, and a tool the server no longer has.
    stores.put(false, &json!({"name": "echo", "description": "old", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}, "server": server}));
    stores.put(false, &json!({"name": "retired_tool", "description": "gone", "inputSchema": {"type": "object"}, "server": server}));
    let gw = Gateway::start(&config(&stores, ""), REGISTRY_LOOPBACK);
    let drift: Value = gw.admin_get("/admin/registry/drift").send().unwrap().json().unwrap();
    let everything = &drift["everything"];
    assert_eq!(everything["drifted"], true, "{drift}");
    assert_eq!(everything["removed"], json!(["retired_tool"]), "{drift}");
    assert!(everything["added"].as_array().unwrap().iter().any(|t| t == "get-sum"), "{drift}");
    assert_eq!(everything["schema_changed"][0]["tool"], "echo", "{drift}");
    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_drift_tools", &["server=\"everything\"", "kind=\"removed\""]),
        1.0
    );
}

#[test]
fn registry_entries_carry_catalogue_control_under_the_configurations() {
    let stores = Stores::start(true, false);
    let demo = Demo::http();
    let mut search = manga_tool("manga_search", &demo.url());
    search["overrides"] = json!({"rename": "find_manga", "fixed_arguments": {"language": "en"}});
    stores.put(false, &search);
    let mut price = manga_tool("price_lookup", &demo.url());
    price["overrides"] = json!({"hide": true});
    stores.put(false, &price);
    stores.put(false, &manga_tool("inventory_check", &demo.url()));
    let gw = Gateway::start(
        &format!("{}[tools.manga_search]\ndescription = \"Find manga (configured).\"\n", stores.config()),
        REGISTRY_LOOPBACK,
    );
    wait_for("the registry's tools", || gw.tool_names().len() == 2);
    assert_eq!(gw.tool_names(), ["find_manga", "inventory_check"]);
    let (_, listed) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let find = &listed["result"]["tools"][0];
    assert_eq!(find["description"], "Find manga (configured).", "configuration wins over the entry");
    assert!(find["inputSchema"]["properties"].get("language").is_none(), "{find}");
    let answer = gw.call("find_manga", json!({"query": "One Piece"}));
    assert!(answer.get("result").is_some(), "{answer}");
    let received = &demo.stats()["last_tool"];
    assert_eq!(received["name"], "manga_search");
    assert_eq!(received["arguments"]["language"], "en", "{received}");
    // Neither the old name nor the hidden tool is served, from memory or below it.
    expect_error(&gw.call("manga_search", json!({"query": "x"})), -32002, "unknown_tool");
    expect_error(&gw.call("price_lookup", json!({"manga_id": "MNG-00000001"})), -32002, "unknown_tool");
    let listed = registry_cli(&stores.env(false), &["list"]);
    assert!(listed.contains("\"rename\":\"find_manga\""), "{listed}");
}

/// Reads one whole HTTP/1.1 request (head, then `content-length` bytes of body); `None` when
/// the connection ends first.
fn read_request(stream: &std::net::TcpStream) -> Option<()> {
    use std::io::{BufRead, Read};
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).ok()?;
    let mut reader = std::io::BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    reader.read_exact(&mut vec![0; length]).ok()
}

/// A DynamoDB endpoint that closes the first connection without answering and answers every
/// later request with an empty JSON object; counts the requests it read.
fn endpoint_that_drops_the_first_connection() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            if read_request(&stream).is_none() {
                continue;
            }
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                continue; // dropped: the connection closes with no answer
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (port, requests)
}

#[test]
fn a_registry_command_tries_again_when_dynamodb_closes_the_connection_unanswered() {
    let (port, requests) = endpoint_that_drops_the_first_connection();
    let out = registry_cli(
        &[
            ("MCP_GATEWAY_DYNAMODB_TABLE", "mcp-tool-registry".to_string()),
            ("MCP_GATEWAY_DYNAMODB_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ],
        &["create-table"],
    );
    assert!(out.contains("table mcp-tool-registry: created"), "{out}");
    assert_eq!(
        requests.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the first request was dropped and the second answered"
    );
}
