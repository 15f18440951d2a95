//! What an upstream may do to the catalogue and the gateway's telemetry, against hostile
//! upstream processes (`tests/peers/scripted/hostile_server.py`'s MCP modes) and the real gateway:
//! a `ttlMs: 1` hint with tools renamed on every list refreshes that server only and leaves
//! the metric series bounded; a server offering another's tool name or namespaced alias is
//! refused, visibly; a changed definition waits for an operator's approval when pinned.

use crate::common::*;
use serde_json::{Value, json};

/// An HTTP server of the hostile peer's MCP mode `mode` (discovering its tools).
fn mode_server(name: &str, addr: std::net::SocketAddr, mode: &str) -> String {
    format!("[servers.{name}]\ntransport = \"http\"\nurl = \"http://{addr}/{mode}\"\n")
}

#[test]
fn a_ttl_hint_refreshes_its_own_server_only_and_departed_tools_lose_their_series() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        "refresh_interval_secs = 3600\n[catalogue]\nmin_refresh_interval_ms = 200\n{}{}",
        mode_server("renamer", addr, "renaming"),
        mode_server("steady", addr, "steady"),
    );
    let gateway = Gateway::start(&config, &[]);
    let series = |gw: &Gateway| {
        // A tool's series appear at its first call: every tool listed now is called (the
        // renamed one may be gone by then: an unknown name gets no tool series). Only the
        // series labelled by a tool count: others (a server's change stream, its
        // subscriptions) may appear later on a busy machine, and are not what renames grow.
        for name in gw.tool_names() {
            gw.call(&name, json!({}));
        }
        let text = gw.metrics();
        text.lines().filter(|l| !l.starts_with('#') && l.contains("tool=\"")).count() as f64
    };
    wait_for("the renamer to be listed 4 times", || hostile_methods(addr, "/renaming", "tools/list") >= 4);
    let early = series(&gateway);
    wait_for("the renamer to be listed 12 times", || hostile_methods(addr, "/renaming", "tools/list") >= 12);
    // The hint honoured (bounded by min_refresh_interval_ms) for its own server only: the other
    // server was listed once, at start, and the renamer's hint never woke it.
    assert_eq!(hostile_methods(addr, "/steady", "tools/list"), 1);
    let metrics = gateway.metrics();
    let late = series(&gateway);
    let renamed: Vec<String> = distinct_label_values(&metrics, "mcp_gateway_tool_calls_total", "tool")
        .into_iter()
        .filter(|t| t.starts_with("renamed_"))
        .collect();
    assert!(renamed.len() <= 1, "series of tools that left the catalogue remain: {renamed:?}");
    // Eight more renames: each would add a tool's set of 46 series; the count stays put. One
    // set may be in flight between a rename and the next refresh dropping the departed tool.
    assert!(late <= early + 46.0, "series grew from {early} to {late}");
    assert!(early > 0.0);
    // The current tools still work.
    let answer = gateway.call("stable_tool", json!({}));
    assert!(answer.get("result").is_some(), "{answer}");
}

#[test]
fn tools_over_the_label_cap_are_counted_as_other() {
    let demo = Demo::http();
    let config = format!(
        "[catalogue]\nmax_tool_label_values = 2\n[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n",
        demo.url()
    );
    let gateway = Gateway::start(&config, &[]);
    // No tool is a label value before its first call.
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_metric_tool_label_values", &[]), 0.0);
    // Calls spread over every tool: the first two called are admitted, the rest are `other`.
    for tool in ["price_lookup", "inventory_check", "manga_search", "checkout", "add_to_cart"] {
        gateway.call(tool, json!({}));
    }
    let answer = gateway.call("manga_recommendations", json!({}));
    assert!(answer.get("result").is_some() || answer.get("error").is_some(), "{answer}");
    let metrics = gateway.metrics();
    let tools = distinct_label_values(&metrics, "mcp_gateway_tool_calls_total", "tool");
    let expected: std::collections::BTreeSet<String> =
        ["price_lookup", "inventory_check", "other"].iter().map(|s| s.to_string()).collect();
    assert_eq!(tools, expected);
    let others: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("mcp_gateway_tool_calls_total{") && l.contains("tool=\"other\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(others, 4.0, "{metrics}");
    assert_eq!(metric(&metrics, "mcp_gateway_metric_tool_label_values", &[]), 2.0);
    // Two tools and `other`, each with one zero set: the series stay bounded.
    let per_tool = |tool: &str| {
        metrics.lines().filter(|l| !l.starts_with('#') && l.contains(&format!("tool=\"{tool}\""))).count()
    };
    let tool_series = metrics.lines().filter(|l| !l.starts_with('#') && l.contains("tool=\"")).count();
    assert_eq!(tool_series, per_tool("price_lookup") + per_tool("inventory_check") + per_tool("other"));
    assert_eq!(per_tool("price_lookup"), per_tool("other"), "{metrics}");
}

#[test]
fn a_server_cannot_take_another_servers_name_or_its_alias() {
    let demo = Demo::http();
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        "[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n{}",
        demo.url(),
        mode_server("evil", addr, "shadow")
    );
    let gateway = Gateway::start(&config, &[]);
    // `manga_search` is offered by both: each copy under its own server's name. The hostile
    // server's `demo__manga_search` is the demo server's alias: refused.
    let names = gateway.tool_names();
    assert!(names.contains(&"demo__manga_search".to_string()), "{names:?}");
    assert!(names.contains(&"evil__manga_search".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("evil__demo__")), "{names:?}");
    let (_, listed) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let shadow = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "demo__manga_search")
        .cloned()
        .unwrap();
    assert!(!shadow["description"].as_str().unwrap_or("").contains("IGNORE"), "{shadow}");
    // A call to the demo server's name reaches the demo server, never the hostile one.
    for _ in 0..3 {
        let answer = gateway.call("demo__manga_search", json!({"query": "naruto"}));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    assert_eq!(hostile_methods(addr, "/shadow", "tools/call"), 0);
    // Visible: the admin endpoint, the metric, the log.
    let (status, report) = admin_get_json(&gateway, "/admin/registry/collisions");
    assert_eq!(status, 200);
    let refused: Vec<&Value> = report["collisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "alias_of_another_server")
        .collect();
    assert_eq!(refused.len(), 1, "{report}");
    assert_eq!(refused[0]["name"], "demo__manga_search");
    assert_eq!(refused[0]["server"], "evil");
    assert_eq!(refused[0]["owner"], "demo");
    let metrics = gateway.metrics();
    assert_eq!(
        metric(&metrics, "mcp_gateway_tool_name_collisions", &["kind=\"alias_of_another_server\""]),
        1.0,
        "{metrics}"
    );
    // The log line is written behind the answers; wait for it to arrive.
    wait_for("the refusal's log line", || {
        gateway
            .proc
            .output()
            .lines()
            .any(|l| l.contains("tool name refused") && l.contains("demo__manga_search"))
    });
}

/// The description of `tool` in the gateway's `tools/list`.
fn description(gateway: &Gateway, tool: &str) -> String {
    let (_, listed) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .and_then(|t| t["description"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_changed_definition_is_not_served_until_approved() {
    let (_hostile, addr) = hostile_server(&[]);
    let scratch = Scratch::new("pins");
    let pin_file = scratch.path("pins.json");
    let config = format!(
        "refresh_interval_secs = 3600\n[catalogue]\npin_tool_definitions = true\npin_file = \"{pin_file}\"\n{}",
        mode_server("words", addr, "rugpull")
    );
    let gateway = Gateway::start(&config, &[]);
    assert_eq!(description(&gateway, "lookup"), "Looks a word up.");
    let metrics = gateway.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_tool_definitions_pending", &[]), 0.0, "{metrics}");

    // The server changes the description: the pinned one is still served (and called).
    gateway.admin_post("/admin/registry/refresh").send().unwrap();
    wait_for("the change to be pending", || {
        metric(&gateway.metrics(), "mcp_gateway_tool_definitions_pending", &[]) == 1.0
    });
    assert_eq!(hostile_methods(addr, "/rugpull", "tools/list"), 2);
    assert_eq!(description(&gateway, "lookup"), "Looks a word up.");
    let answer = gateway.call("lookup", json!({"q": "x"}));
    assert!(answer.get("result").is_some(), "{answer}");
    let (_, pins) = admin_get_json(&gateway, "/admin/registry/pins");
    assert_eq!(pins["pending"][0]["tool"], "lookup", "{pins}");
    assert_eq!(pins["pending"][0]["serving"], "approved", "{pins}");
    wait_for("the pending change's log line", || gateway.proc.output().contains("not served until approved"));

    // The CLI without the admin token is refused by the gateway's admin guard.
    let refused = std::process::Command::new(BIN)
        .args(["registry", "approve", "lookup", "--url", &gateway.url("")])
        .env_remove("MCP_GATEWAY_ADMIN__TOKEN")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("401"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // Approved with the CLI (the token from the environment, as for the gateway): the new
    // definition is served, without listing the server again.
    let approved = std::process::Command::new(BIN)
        .args(["registry", "approve", "lookup", "--url", &gateway.url("")])
        .env("MCP_GATEWAY_ADMIN__TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let answer: Value = serde_json::from_slice(&approved.stdout).unwrap();
    assert_eq!(answer["approved"][0]["tool"], "lookup", "{answer}");
    wait_for("the approved definition to be served", || {
        description(&gateway, "lookup").contains("evil.example")
    });
    assert_eq!(metric(&gateway.metrics(), "mcp_gateway_tool_definitions_pending", &[]), 0.0);
    assert_eq!(hostile_methods(addr, "/rugpull", "tools/list"), 2);
    // Nothing left to approve.
    let again = std::process::Command::new(BIN)
        .args(["registry", "approve", "--all", "--url", &gateway.url("")])
        .env("MCP_GATEWAY_ADMIN__TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(!again.status.success());

    // The approval survives a restart: the pin file holds the new definition.
    let pins: Value = serde_json::from_str(&std::fs::read_to_string(&pin_file).unwrap()).unwrap();
    let pinned = pins["pins"][0]["definition"]["description"].as_str().unwrap();
    assert!(pinned.contains("evil.example"), "{pins}");
}
