//! A catalogue of 10,006 tools (the demo server's six and 10,000 generated ones, discovered
//! through its own `tools/list`): `tools/list` answers it in pages of
//! `catalogue.tools_page_size` (default 250) with the gateway's own cursors, in both eras,
//! each page a slice of one pre-serialised snapshot (the same bytes on every request); a
//! caller following `nextCursor` gets every tool once, in name order; a cursor the gateway did
//! not give is refused as the resources' lists refuse it; and calls resolve and validate
//! against the right tool's schema whatever the catalogue's size.

use crate::common::{Demo, Gateway, expect_error, peers_dir, python, require, structured};
use serde_json::{Value, json};

const BULK: usize = 10_000;
/// `catalogue.tools_page_size`'s default.
const PAGE: usize = 250;

fn list_page(gw: &Gateway, modern: bool, cursor: Option<&str>) -> (reqwest::header::HeaderMap, String) {
    let mut params = json!({});
    if modern {
        params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    }
    if let Some(cursor) = cursor {
        params["cursor"] = json!(cursor);
    }
    let body = json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": params});
    let (status, headers, text) = gw.post_raw(body.to_string(), &[]);
    assert_eq!(status, 200, "{}", &text[..text.len().min(500)]);
    (headers, text)
}

/// Every page's result, following `nextCursor` from the first page.
fn every_page(gw: &Gateway, modern: bool) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (headers, text) = list_page(gw, modern, cursor.as_deref());
        let length: usize = headers["content-length"].to_str().unwrap().parse().unwrap();
        assert_eq!(length, text.len(), "an exact Content-Length");
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["id"], "list");
        let result = parsed["result"].clone();
        cursor = result["nextCursor"].as_str().map(str::to_string);
        pages.push(result);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() <= BULK, "the cursors never end");
    }
}

fn names(pages: &[Value]) -> Vec<String> {
    pages
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ten_thousand_tools_are_listed_in_pages_and_called_by_name() {
    let demo = Demo::with_extra_tools(BULK);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);

    for modern in [false, true] {
        let pages = every_page(&gw, modern);
        assert_eq!(pages.len(), (BULK + 6).div_ceil(PAGE), "pages of {PAGE} (modern: {modern})");
        for page in &pages[..pages.len() - 1] {
            assert_eq!(page["tools"].as_array().unwrap().len(), PAGE);
            assert!(page["nextCursor"].as_str().is_some_and(|c| c.starts_with("mcpgw-cursor.")), "{modern}");
        }
        if modern {
            for page in &pages {
                assert_eq!(page["resultType"], "complete");
                assert_eq!(page["cacheScope"], "public");
                assert!(page["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{}", page["ttlMs"]);
            }
        }
        let names = names(&pages);
        assert_eq!(names.len(), BULK + 6, "every tool is listed (modern: {modern})");
        assert_eq!(names[0], "add_to_cart", "ordered by name");
        assert_eq!(names.iter().filter(|n| n.starts_with("bulk_")).count(), BULK);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    }
    assert_eq!(list_page(&gw, false, None).1, list_page(&gw, false, None).1, "the same bytes every time");
    let (_, modern_first) = list_page(&gw, true, None);
    assert_eq!(list_page(&gw, true, None).1, modern_first, "the same bytes every time (modern)");
    // A cursor taken again gives the same page again.
    let first: Value = serde_json::from_str(&list_page(&gw, false, None).1).unwrap();
    let cursor = first["result"]["nextCursor"].as_str().unwrap();
    assert_eq!(list_page(&gw, false, Some(cursor)).1, list_page(&gw, false, Some(cursor)).1);

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
fn the_page_size_is_the_operators_and_a_list_that_fits_is_one_page() {
    let demo = Demo::with_extra_tools(1_000);
    let config = |size: usize| {
        format!(
            "[catalogue]\ntools_page_size = {size}\n[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n",
            demo.url()
        )
    };
    let gw = Gateway::start(&config(400), &[]);
    let pages = every_page(&gw, false);
    let sizes: Vec<usize> = pages.iter().map(|p| p["tools"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, [400, 400, 206]);
    assert_eq!(gw.tool_names().len(), 1_006, "the test helper follows the cursors too");
    // A reload applies a new size to the next request: above the catalogue, one page.
    gw.rewrite_config(&config(5_000));
    let reloaded = gw.admin_post("/admin/config/reload").send().expect("gateway answers");
    assert_eq!(reloaded.status().as_u16(), 200);
    let pages = every_page(&gw, true);
    assert_eq!(pages.len(), 1);
    assert!(pages[0].get("nextCursor").is_none(), "{}", pages[0]["tools"].as_array().unwrap().len());
    assert_eq!(pages[0]["tools"].as_array().unwrap().len(), 1_006);
}

#[test]
fn a_cursor_the_gateway_did_not_give_is_refused_as_for_resources() {
    let demo = Demo::with_extra_tools(300);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
    let refusal = |method: &str, cursor: Value| {
        let (_, body) =
            gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"cursor": cursor}}));
        body["error"].clone()
    };
    for cursor in [json!("an upstream's cursor"), json!("mcpgw-cursor.!!")] {
        let tools = refusal("tools/list", cursor.clone());
        let resources = refusal("resources/list", cursor.clone());
        assert_eq!(tools["code"], -32602, "{tools}");
        assert_eq!(tools["code"], resources["code"], "{cursor}");
        assert_eq!(tools["message"], resources["message"], "{cursor}");
    }
    assert_eq!(refusal("tools/list", json!(7))["code"], -32602);
    // A resources cursor (an offset) is no tools cursor, and a tools cursor no resources one.
    assert_eq!(refusal("tools/list", json!("mcpgw-cursor.MTAw"))["code"], -32602);
    assert!(refusal("resources/list", json!("mcpgw-cursor.MTAw")).is_null(), "a resources cursor");
    let first = list_page(&gw, false, None).1;
    let first: Value = serde_json::from_str(&first).unwrap();
    let cursor = first["result"]["nextCursor"].clone();
    assert!(cursor.is_string(), "{}", first["result"]["tools"].as_array().unwrap().len());
    assert_eq!(refusal("resources/list", cursor)["code"], -32602);
}

#[test]
fn a_batch_with_the_list_carries_the_same_page() {
    let demo = Demo::with_extra_tools(BULK);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
    let (_, alone) = list_page(&gw, false, None);
    let alone: Value = serde_json::from_str(&alone).unwrap();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bulk_09999", "arguments": {"n": 2}}},
    ]);
    let (status, answers) = gw.rpc(&batch);
    assert_eq!(status, 200);
    assert_eq!(answers[0]["result"], alone["result"], "in a batch, the same page");
    assert_eq!(structured(&answers[1]), &json!({"tool": "bulk_09999", "n": 2}), "{}", answers[1]);
}

#[test]
fn the_official_python_client_follows_the_pages_in_both_eras() {
    let demo = Demo::with_extra_tools(1_000);
    let gw =
        Gateway::start(&format!("[servers.demo]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
    let script =
        require(&peers_dir().join("clients/python_client.py"), "tests/peers/clients/python_client.py");
    for mode in ["legacy", "2026-07-28"] {
        // A tool of the last page, called by name.
        let output = std::process::Command::new(python())
            .arg(&script)
            .args([gw.url("/mcp").as_str(), mode, "bulk_00999", r#"{"n": 999}"#])
            .output()
            .expect("python client runs");
        assert!(output.status.success(), "{mode}: {}", String::from_utf8_lossy(&output.stderr));
        let out: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(out["pages"], 1_006_usize.div_ceil(PAGE), "{mode}");
        let names = out["tools"].as_array().unwrap();
        assert_eq!(names.len(), 1_006, "{mode}: every tool, once");
        let unique: std::collections::BTreeSet<&str> = names.iter().filter_map(Value::as_str).collect();
        assert_eq!(unique.len(), 1_006, "{mode}");
        assert_eq!(
            out["result"]["structuredContent"],
            json!({"tool": "bulk_00999", "n": 999}),
            "{mode}: {out}"
        );
    }
}
