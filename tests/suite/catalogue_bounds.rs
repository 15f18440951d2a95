//! What an upstream may make the gateway hold (`src/registry/bounds.rs`), against a real
//! hostile upstream process (`tests/peers/scripted/hostile_server.py`, `/bloat-*` modes): a
//! first good list, then lists over a bound — too many tools, a definition too large, too
//! many bytes across pages, pages without end, a catalogue too large joined. Each such list
//! is refused whole: the server's last good tools stay listed and callable, the refusal is
//! counted per server and bound, logged, and reported by `GET /admin/registry`; the other
//! servers are refreshed as usual.
//!
//! And an alias-shaped name (an export's mapped name, or one that only looks like it) is
//! resolved from one map per catalogue snapshot, never by walking the catalogue per call.

use crate::common::*;
use serde_json::{Value, json};

fn mode_server(name: &str, addr: std::net::SocketAddr, mode: &str, extra: &str) -> String {
    format!("[servers.{name}]\ntransport = \"http\"\nurl = \"http://{addr}/{mode}\"\n{extra}")
}

fn refusals(gateway: &Gateway, server: &str, bound: &str) -> f64 {
    let server = format!("server=\"{server}\"");
    let bound = format!("bound=\"{bound}\"");
    metric(&gateway.metrics(), "mcp_gateway_catalogue_refusals_total", &[&server, &bound, "list=\"tools\""])
}

fn sorted_names(gateway: &Gateway) -> Vec<String> {
    let mut names = gateway.tool_names();
    names.sort();
    names
}

#[test]
fn a_list_over_a_bound_is_refused_whole_and_the_last_good_list_stays() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        "refresh_interval_secs = 3600\n{}{}{}{}{}",
        mode_server("count", addr, "bloat-count", "max_tools = 20\n"),
        // The default bound on one definition (64 KiB) against a 100 KiB one.
        mode_server("fat", addr, "bloat-definition", ""),
        mode_server("bytes", addr, "bloat-bytes", "max_catalogue_bytes = 8192\n"),
        mode_server("pages", addr, "bloat-pages", "max_list_pages = 3\n"),
        mode_server("steady", addr, "steady", ""),
    );
    let gateway = Gateway::start(&config, &[]);
    let good = ["kept_bytes", "kept_count", "kept_definition", "kept_pages", "steady_a", "steady_b"];
    assert_eq!(sorted_names(&gateway), good, "the first lists are within every bound");
    for (server, bound) in [("count", "count"), ("fat", "definition_bytes"), ("bytes", "list_bytes")] {
        assert_eq!(refusals(&gateway, server, bound), 0.0, "{server}: a zero series before any refusal");
    }

    // The next lists go over their bounds.
    gateway.admin_post("/admin/registry/refresh").send().unwrap();
    wait_for("four refusals", || {
        metric(&gateway.metrics(), "mcp_gateway_catalogue_refusals_total", &[]) == 4.0
    });
    assert_eq!(refusals(&gateway, "count", "count"), 1.0);
    assert_eq!(refusals(&gateway, "fat", "definition_bytes"), 1.0);
    assert_eq!(refusals(&gateway, "bytes", "list_bytes"), 1.0);
    assert_eq!(refusals(&gateway, "pages", "pages"), 1.0);
    assert_eq!(refusals(&gateway, "steady", "count"), 0.0);
    // Each was read only until its bound was passed: the fourth 2 KiB page of `bytes` passes
    // 8192 bytes, and no fourth page of `pages` was asked for.
    assert_eq!(hostile_methods(addr, "/bloat-bytes", "tools/list"), 1 + 4);
    assert_eq!(hostile_methods(addr, "/bloat-pages", "tools/list"), 1 + 3);
    assert_eq!(hostile_methods(addr, "/steady", "tools/list"), 2, "the other server was refreshed too");

    // The last good tools are still listed, and called on their servers.
    assert_eq!(sorted_names(&gateway), good, "nothing of a refused list is served");
    for (tool, path) in
        [("kept_count", "/bloat-count"), ("kept_definition", "/bloat-definition"), ("steady_a", "/steady")]
    {
        let answer = gateway.call(tool, json!({"q": "x"}));
        assert_eq!(answer["result"]["content"][0]["text"], format!("ok from {path}"), "{answer}");
    }
    expect_error(&gateway.call("many_0", json!({})), -32002, "unknown_tool");

    // The operator sees which server went over which bound, and the setting to raise.
    let (status, registry) = admin_get_json(&gateway, "/admin/registry");
    assert_eq!(status, 200);
    let reported: Vec<(String, String, String)> = registry["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (field("server"), field("bound"), field("setting"))
        })
        .collect();
    let expected = [
        ("bytes", "list_bytes", "max_catalogue_bytes"),
        ("count", "count", "max_tools"),
        ("fat", "definition_bytes", "max_tool_definition_bytes"),
        ("pages", "pages", "max_list_pages"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(reported, expected, "{registry}");
    let fat = registry["refusals"].as_array().unwrap().iter().find(|r| r["server"] == "fat").unwrap();
    assert_eq!(fat["limit"], 65536, "{fat}");
    let output = gateway.proc.output();
    for (server, bound) in
        [("count", "count"), ("fat", "definition_bytes"), ("bytes", "list_bytes"), ("pages", "pages")]
    {
        let logged = output.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|line| {
            line["message"].as_str().is_some_and(|m| m.starts_with("tools/list refused"))
                && line["server"] == server
                && line["bound"] == bound
        });
        assert!(logged, "a log line names {server} and its bound {bound}:\n{output}");
    }
}

#[test]
fn the_catalogue_joined_from_every_server_is_bounded_too() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        "refresh_interval_secs = 3600\n[catalogue]\nmax_total_tools = 10\n{}{}",
        // Its 50 tools are within its own bound (20,000 by default), not within the total.
        mode_server("count", addr, "bloat-count", ""),
        mode_server("steady", addr, "steady", ""),
    );
    let gateway = Gateway::start(&config, &[]);
    assert_eq!(sorted_names(&gateway), ["kept_count", "steady_a", "steady_b"]);
    gateway.admin_post("/admin/registry/refresh").send().unwrap();
    wait_for("the refusal", || refusals(&gateway, "count", "total_count") == 1.0);
    assert_eq!(hostile_methods(addr, "/steady", "tools/list"), 2);
    assert_eq!(sorted_names(&gateway), ["kept_count", "steady_a", "steady_b"]);
    let (_, registry) = admin_get_json(&gateway, "/admin/registry");
    assert_eq!(registry["refusals"][0]["setting"], "catalogue.max_total_tools", "{registry}");
    assert_eq!(registry["refusals"][0]["seen"], 52, "{registry}");
}

#[test]
fn alias_shaped_names_resolve_from_one_map_per_catalogue_snapshot() {
    let (_hostile, addr) = hostile_server(&[]);
    let mut config = String::from("[servers.odd]\ntransport = \"http\"\n");
    config += &format!("url = \"http://{addr}/recorder\"\ndiscover = false\n");
    for name in ["catalog.search", "9lives", "plain_tool"] {
        config += &format!(
            "[[servers.odd.tools]]\nname = \"{name}\"\ndescription = \"d\"\ninputSchema = {{ type = \"object\" }}\n"
        );
    }
    let gateway = Gateway::start(&config, &[]);
    let (status, exported) = get_json(&gateway, "/tools?format=bedrock");
    assert_eq!(status, 200, "{exported}");
    let mapped = exported["gateway"]["names"].as_object().unwrap().clone();
    assert_eq!(mapped.len(), 1, "{exported}");
    let (alias, original) = mapped.iter().next().unwrap();
    assert_eq!(original, "catalog.search");

    // 63 alias-shaped names that stand for nothing and the export's alias, in one batch.
    let mut batch: Vec<Value> = (0..63)
        .map(|i| {
            let name = if i % 2 == 0 { format!("x_{i:08x}") } else { format!("x_{i:016x}") };
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {}}})
        })
        .collect();
    batch.push(json!({"jsonrpc": "2.0", "id": "alias", "method": "tools/call", "params": {"name": alias, "arguments": {"q": "x"}}}));
    let (status, answers) = gateway.rpc(&Value::Array(batch));
    assert_eq!(status, 200);
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 64);
    for answer in &answers[..63] {
        expect_error(answer, -32002, "unknown_tool");
    }
    assert_eq!(answers[63]["result"]["content"][0]["text"], "ok from /recorder", "{}", answers[63]);
    let calls: Vec<Value> = hostile_log(addr).into_iter().filter(|e| e["method"] == "tools/call").collect();
    assert_eq!(calls.len(), 1, "only the alias reached the server: {calls:?}");
    assert_eq!(calls[0]["tool"], "catalog.search", "under its own name");

    // One map for the snapshot, however many names were looked up in it.
    let again = gateway.call(alias, json!({"q": "y"}));
    assert!(again.get("result").is_some(), "{again}");
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_alias_map_builds_total", &[]), 1.0);
}

#[test]
fn a_registry_entry_over_the_definition_bound_is_not_served() {
    // DynamoDB Local: an entry of 100 KiB (below DynamoDB's own 400 KB item limit) beside an
    // ordinary one, against the default 64 KiB bound of one definition.
    let stores = Stores::dynamodb();
    let demo = Demo::http();
    stores.put(false, &manga_tool("manga_search", &demo.url()));
    let mut fat = manga_tool("price_lookup", &demo.url());
    fat["name"] = json!("fat_entry");
    fat["description"] = json!("A".repeat(100 * 1024));
    stores.put(false, &fat);
    let config = format!("refresh_interval_secs = 3600\nready_min_tools = 0\n{}", stores.config());
    let gateway = Gateway::start(&config, REGISTRY_LOOPBACK);
    // Ready with no tool (`ready_min_tools = 0`): the scan's catalogue comes in one snapshot.
    wait_for("the registry scan's catalogue", || !gateway.tool_names().is_empty());
    assert_eq!(gateway.tool_names(), ["manga_search"], "the scan served the entry within the bound only");
    // A lookup below memory (the name is not in the catalogue) refuses it too.
    expect_error(&gateway.call("fat_entry", json!({"manga_id": "MNG-00000001"})), -32002, "unknown_tool");
    let refused = metric(
        &gateway.metrics(),
        "mcp_gateway_catalogue_refusals_total",
        &["server=\"catalog\"", "bound=\"definition_bytes\""],
    );
    assert!(refused >= 2.0, "the scan and the lookup each refused it: {refused}");
    // The log line is written by the batched log writer: waited for, not raced.
    wait_for("the refusal's log line", || gateway.proc.output().contains("registry entry refused"));
}
