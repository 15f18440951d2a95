//! What indexed resources cost the gateway's memory: 10,000 resources of one server (the
//! hostile peer's `/resources` mode, listing them as the overhead benchmark's resource upstream
//! does: a URI, a name, a title, a description and a MIME type each, 100 a page) hold at most
//! 1 KiB of resident memory each, over the same gateway in front of a server listing none.
//! Each definition is kept once, as its compact JSON text, shared by the server's surface and
//! the index (`gateway/federation/listed.rs`); as trees of JSON values held three times they
//! took about 3 KB each.

use serde_json::json;

use crate::common::{Gateway, hostile_server};

const RESOURCES: usize = 10_000;

/// The gateway's resident memory, in KiB, in front of the hostile peer's MCP mode `mode`, once
/// it lists `count` resources.
fn rss_with(mode: &str, count: usize) -> u64 {
    let (_server, addr) = hostile_server(&[]);
    let config =
        format!("ready_min_tools = 0\n[servers.res]\ntransport = \"http\"\nurl = \"http://{addr}/{mode}\"\n");
    let gateway = Gateway::start(&config, &[]);
    let listed = || {
        let (mut listed, mut cursor) = (0, None::<String>);
        loop {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            let (_, body) = gateway
                .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params}));
            listed += body["result"]["resources"].as_array().map_or(0, Vec::len);
            match body["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return listed,
            }
        }
    };
    crate::common::wait_for("the resources indexed", || listed() == count);
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.proc.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn ten_thousand_resources_cost_at_most_a_kib_each() {
    let idle = rss_with("steady", 0);
    let full = rss_with("resources", RESOURCES);
    let per_resource = full.saturating_sub(idle) * 1024 / RESOURCES as u64;
    assert!(
        per_resource <= 1024,
        "{per_resource} bytes a resource ({idle} KiB idle, {full} KiB with {RESOURCES})"
    );
    eprintln!("{per_resource} bytes a resource ({idle} KiB idle, {full} KiB with {RESOURCES})");
}
