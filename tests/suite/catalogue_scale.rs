//! A catalogue of 10,006 tools (the demo server's six and 10,000 generated ones, discovered
//! through its own `tools/list`): every tool is listed in both eras from one pre-serialised
//! snapshot, the body is the same on every request, and calls resolve and validate against
//! the right tool's schema whatever the catalogue's size.

use crate::common::{Demo, Gateway, expect_error, structured};
use serde_json::{Value, json};

const BULK: usize = 10_000;

fn list(gw: &Gateway, modern: bool) -> (reqwest::header::HeaderMap, String) {
    let mut params = json!({});
    if modern {
        params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    }
    let body = json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": params});
    let (status, headers, text) = gw.post_raw(body.to_string(), &[]);
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    (headers, text)
}

#[test]
fn ten_thousand_tools_are_listed_whole_and_called_by_name() {
    let demo = Demo::with_extra_tools(BULK);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);

    let (headers, legacy) = list(&gw, false);
    let length: usize = headers["content-length"].to_str().unwrap().parse().unwrap();
    assert_eq!(length, legacy.len(), "the whole list, with an exact Content-Length");
    let parsed: Value = serde_json::from_str(&legacy).unwrap();
    assert_eq!(parsed["id"], "list");
    let tools = parsed["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), BULK + 6, "every tool is listed");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names[0], "add_to_cart", "ordered by name");
    assert_eq!(names.iter().filter(|n| n.starts_with("bulk_")).count(), BULK);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    assert_eq!(list(&gw, false).1, legacy, "the same bytes on every request");

    let (_, modern) = list(&gw, true);
    assert_eq!(list(&gw, true).1, modern, "the same bytes on every request (modern)");
    let modern: Value = serde_json::from_str(&modern).unwrap();
    let result = &modern["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["cacheScope"], "public");
    assert!(result["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{}", result["ttlMs"]);
    assert_eq!(result["tools"], parsed["result"]["tools"], "both eras list the same tools");

    // Calls resolve to the right tool, first, last and in between, and to the six.
    for i in [0, 4_321, BULK - 1] {
        let name = format!("bulk_{i:05}");
        let answer = gw.call(&name, json!({"n": i}));
        assert_eq!(structured(&answer), &json!({"tool": name, "n": i}), "{answer}");
    }
    let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert_eq!(structured(&answer)["retail_price"], 528, "{answer}");
    // Each tool's own schema is enforced (`n` is required and an integer).
    expect_error(&gw.call("bulk_00007", json!({"n": "seven"})), -32602, "bad_input");
    expect_error(&gw.call("bulk_00007", json!({})), -32602, "bad_input");
    expect_error(&gw.call(&format!("bulk_{BULK:05}"), json!({"n": 1})), -32002, "unknown_tool");
}

#[test]
fn a_batch_with_the_list_carries_the_same_tools() {
    let demo = Demo::with_extra_tools(BULK);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
    let (_, alone) = list(&gw, false);
    let alone: Value = serde_json::from_str(&alone).unwrap();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bulk_09999", "arguments": {"n": 2}}},
    ]);
    let (status, answers) = gw.rpc(&batch);
    assert_eq!(status, 200);
    assert_eq!(answers[0]["result"], alone["result"], "in a batch, the same list");
    assert_eq!(structured(&answers[1]), &json!({"tool": "bulk_09999", "n": 2}), "{}", answers[1]);
}
