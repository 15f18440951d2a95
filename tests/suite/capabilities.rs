//! Capability degradation the orchestrator can act on: when a server stops, `GET
//! /capabilities` and `tools/list`'s `_meta["io.mcp-gateway/degraded"]` name its tools as
//! unavailable, with the reason and since when; with `hide_unavailable_tools` (or
//! `/tools?hide_unavailable=true`) they are left out; when it comes back, so do they.
//! Real processes throughout: the gateway, the store's demo server (killed and restarted on
//! the same port) and the Python SDK server that stays up.

use std::{collections::BTreeSet, process::Command, time::SystemTime};

use crate::common::*;
use mcp_gateway::registry::entry::rfc3339;
use serde_json::{Value, json};

const META: &str = "io.mcp-gateway/degraded";
const DEMO_TOOLS: [&str; 6] =
    ["add_to_cart", "checkout", "inventory_check", "manga_recommendations", "manga_search", "price_lookup"];
const PY_TOOLS: [&str; 2] = ["add", "shout"];

fn config(demo_port: u16, py_port: u16, hide: bool) -> String {
    format!(
        r#"
refresh_interval_secs = 1
hide_unavailable_tools = {hide}

[defaults.retry]
max_retries_safe = 0
max_retries_unsafe = 0

[defaults.breaker]
consecutive_failures = 2
open_base_ms = 1000
open_max_ms = 2000

[servers.demo]
transport = "http"
url = "http://127.0.0.1:{demo_port}/mcp"

[servers.py]
transport = "http"
url = "http://127.0.0.1:{py_port}/mcp"
"#
    )
}

fn tools_list(gateway: &Gateway) -> Value {
    let (status, body) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

fn names(tools: &Value) -> BTreeSet<String> {
    tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The summary's entry for the demo server when it says: unavailable, circuit open, since
/// `not_before` or later, with its six tools (and nothing about the Python server).
fn demo_down(summary: &Value, not_before: &str) -> bool {
    let Some(servers) = summary["servers"].as_array() else { return false };
    let [demo] = servers.as_slice() else { return false };
    demo["server"] == "demo"
        && demo["status"] == "unavailable"
        && demo["reason"] == "circuit_open"
        && demo["since"].as_str().is_some_and(|since| since >= not_before)
        && names_of(&demo["tools"]) == set(&DEMO_TOOLS)
        && summary["status"] == "degraded"
        && summary["tools"]["unavailable"] == 6
        && summary["tools"]["available"] == 2
        && summary["text"].as_str().is_some_and(|t| {
            t.starts_with("6 of 8 tools unavailable")
                && t.contains("demo unavailable (circuit_open since")
                && t.contains("manga_search")
        })
}

fn names_of(list: &Value) -> BTreeSet<String> {
    list.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

#[test]
fn a_stopped_server_is_reported_left_out_on_request_and_back_after_restart() {
    let demo_port = free_port();
    let mut demo = Demo::start(false, demo_port);
    let py_port = free_port();
    let _py = python_server(py_port);
    let shown = Gateway::start(&config(demo_port, py_port, false), &[]);
    let hiding = Gateway::start(&config(demo_port, py_port, true), &[]);
    let all: BTreeSet<String> = set(&DEMO_TOOLS).union(&set(&PY_TOOLS)).cloned().collect();
    for gateway in [&shown, &hiding] {
        wait_for("all eight tools listed", || names(&tools_list(gateway)["tools"]) == all);
        let (status, capabilities) = get_json(gateway, "/capabilities");
        assert_eq!(status, 200);
        assert_eq!(capabilities["status"], "ok", "{capabilities}");
        assert_eq!(capabilities["text"], "All 8 tools available.");
        assert!(tools_list(gateway).get("_meta").is_none(), "no summary while everything is fine");
    }

    // Stop the demo server: the refreshes (every second) fail, its breaker opens.
    let before_kill = rfc3339(SystemTime::now());
    demo.proc.child.kill().unwrap();
    demo.proc.child.wait().unwrap();

    for gateway in [&shown, &hiding] {
        wait_for("/capabilities to name the demo tools as unavailable (circuit_open, since)", || {
            demo_down(&get_json(gateway, "/capabilities").1, &before_kill)
        });
    }
    // Without the option: every tool listed, the summary in _meta.
    wait_for("tools/list with the summary and all tools", || {
        let list = tools_list(&shown);
        names(&list["tools"]) == all && demo_down(&list["_meta"][META], &before_kill)
    });
    // With it: the demo tools left out, the summary still says why.
    wait_for("tools/list without the demo tools", || {
        let list = tools_list(&hiding);
        names(&list["tools"]) == set(&PY_TOOLS) && demo_down(&list["_meta"][META], &before_kill)
    });
    // Exports follow the same rule, and the query parameter overrides the configuration.
    wait_for("exports leaving the demo tools out on request", || {
        let (_, kept) = get_json(&shown, "/tools?format=anthropic");
        let (_, hidden) = get_json(&shown, "/tools?format=anthropic&hide_unavailable=true");
        let (_, hiding_default) = get_json(&hiding, "/tools?format=anthropic");
        let left_out: BTreeSet<String> = hidden["gateway"]["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["server"] == "demo" && t["reason"] == "circuit_open")
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names(&kept["tools"]) == all
            && names(&hidden["tools"]) == set(&PY_TOOLS)
            && left_out == set(&DEMO_TOOLS)
            && names(&hiding_default["tools"]) == set(&PY_TOOLS)
            && demo_down(&hidden["gateway"]["capabilities"], &before_kill)
    });

    // Restart it on the same port: the next refresh is the breaker's probe; all comes back.
    let _demo = Demo::start(false, demo_port);
    for gateway in [&shown, &hiding] {
        wait_for("every tool available again", || {
            let (_, capabilities) = get_json(gateway, "/capabilities");
            let list = tools_list(gateway);
            capabilities["status"] == "ok" && names(&list["tools"]) == all && list.get("_meta").is_none()
        });
    }
}

/// An HTTP server (Python stdlib) that answers every POST with 401: a server that refuses
/// the gateway's credentials.
const UNAUTHORIZED_SERVER: &str = r#"
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(401); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(json.dumps({"listen": "127.0.0.1:%d" % s.server_port}), flush=True)
s.serve_forever()
"#;

#[test]
fn unreachable_and_unauthorized_servers_are_left_out_and_a_failing_one_only_reported() {
    let demo = Demo::http();
    let mut command = Command::new("python3");
    command.arg("-c").arg(UNAUTHORIZED_SERVER);
    let (_locked, locked_addr) = Proc::spawn_listening("401 server", command);
    let (_hostile, hostile_addr) = hostile_server(&[]);
    let gone_port = free_port();
    // Breakers off: the reasons come from the tool refresh alone. Static tools, so the
    // servers that never list have tools to report.
    let config = format!(
        r#"
refresh_interval_secs = 1
hide_unavailable_tools = true

[defaults.breaker]
enabled = false

[servers.demo]
transport = "http"
url = "{demo}"

[servers.locked]
transport = "http"
url = "http://{locked_addr}/mcp"
tools = [{{name = "vault", inputSchema = {{type = "object"}}}}]

[servers.gone]
transport = "http"
url = "http://127.0.0.1:{gone_port}/mcp"
tools = [{{name = "ghost", inputSchema = {{type = "object"}}}}]

[servers.odd]
transport = "http"
url = "http://{hostile_addr}/refuse--32603"
tools = [{{name = "quirk", inputSchema = {{type = "object"}}}}]
"#,
        demo = demo.url()
    );
    let gateway = Gateway::start(&config, &[]);
    let reasons = |summary: &Value| -> Vec<(String, String, String)> {
        summary["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["since"].is_string() && s["detail"].is_string())
            .map(|s| {
                let tools = names_of(&s["tools"]).into_iter().collect::<Vec<_>>().join(",");
                (
                    s["server"].as_str().unwrap().to_string(),
                    format!("{}:{}", s["status"].as_str().unwrap(), s["reason"].as_str().unwrap()),
                    tools,
                )
            })
            .collect()
    };
    let expected = vec![
        ("gone".to_string(), "unavailable:unreachable".to_string(), "ghost".to_string()),
        ("locked".to_string(), "unavailable:needs_auth".to_string(), "vault".to_string()),
        ("odd".to_string(), "degraded:tools_list_failing".to_string(), "quirk".to_string()),
    ];
    wait_for("/capabilities to give each failing server its reason", || {
        reasons(&get_json(&gateway, "/capabilities").1) == expected
    });
    // Unavailable servers' tools are left out; the degraded server's tool stays listed.
    let list = tools_list(&gateway);
    let mut listed = set(&DEMO_TOOLS);
    listed.insert("quirk".to_string());
    assert_eq!(names(&list["tools"]), listed, "{list}");
    assert_eq!(reasons(&list["_meta"][META]), expected);
    let text = list["_meta"][META]["text"].as_str().unwrap();
    assert!(text.starts_with("2 of 9 tools unavailable, 1 degraded."), "{text}");
}
