//! Catalogue control and tool search, end to end with real processes: the demo store server
//! (its `/_stats` reports the tool name and arguments it received), the official
//! `server-everything`, the built gateway with header identity and a Cedar policy, its
//! exports and its CLI. What is checked is what callers see (`tools/list`, `/tools`,
//! `/capabilities`, `tools export`), what the upstream received, and what the policy decided.

use std::process::Command;

use crate::common::{
    BIN, Demo, Gateway, TempFile, everything_server, expect_error, free_port, get_json, metric, wait_for,
};
use serde_json::{Value, json};

/// A Cedar policy file removed on drop.
struct PolicyFile(std::path::PathBuf);

impl PolicyFile {
    fn new(text: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "catalogue-control-{}-{}.cedar",
            std::process::id(),
            free_port()
        ));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for PolicyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Callers named by headers; `/metrics` (closed on the MCP listener once `[auth]` is on) is read
/// with the admin token.
const IDENTITY: &str = "[metrics]\nmain_listener = \"admin\"\n[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\nscopes_header = \"x-caller-scopes\"\n";

fn rpc_as(gw: &Gateway, subject: &str, scopes: &str, message: &Value) -> Value {
    let headers = [("x-caller-subject", subject), ("x-caller-scopes", scopes)];
    let (status, _, body) = gw.post_raw(message.to_string(), &headers);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn call_as(gw: &Gateway, subject: &str, scopes: &str, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    rpc_as(gw, subject, scopes, &message)
}

fn list_as(gw: &Gateway, subject: &str, scopes: &str) -> Vec<Value> {
    let answer = rpc_as(gw, subject, scopes, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    answer["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("{answer}"))
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
}

fn get_as(gw: &Gateway, subject: &str, path: &str) -> Value {
    let response = gw.client.get(gw.url(path)).header("x-caller-subject", subject).send().unwrap();
    assert_eq!(response.status(), 200);
    response.json().unwrap()
}

/// Runs `mcp-gateway tools export ARGS --config CONFIG`.
fn cli_export(config: &str, args: &[&str]) -> Value {
    let file = TempFile::new("catalogue-control.toml");
    let path = file.path().to_path_buf();
    std::fs::write(&path, config).unwrap();
    let output =
        Command::new(BIN).args(["tools", "export"]).args(args).arg("--config").arg(&path).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The demo server's record of the last call it received: `{name, arguments}`.
fn received(demo: &Demo) -> Value {
    demo.stats()["last_tool"].clone()
}

#[test]
fn renamed_hidden_described_annotated_fixed_and_defaulted_tools_end_to_end() {
    let demo = Demo::http();
    // The policy judges tools as callers see them: the new name, the overridden annotations.
    let policy = PolicyFile::new(
        r#"@id("by-new-name")
permit (principal, action, resource)
when { resource.name == "find_manga" && resource.upstreamName == "manga_search" };

@id("idempotent")
permit (principal, action, resource) when { resource.idempotent };
"#,
    );
    let config = format!(
        r#"{IDENTITY}[policy]
file = {policy:?}
[servers.store]
transport = "http"
url = "{url}"
[tools.manga_search]
rename = "find_manga"
description = "Find manga in the store's catalogue."
fixed_arguments = {{ language = "en" }}
default_arguments = {{ max_results = 3 }}
[tools.price_lookup]
annotations = {{ title = "Price", idempotentHint = true }}
[tools.checkout]
hide = true
"#,
        policy = policy.0.to_str().unwrap(),
        url = demo.url()
    );
    let gw = Gateway::start(&config, &[]);

    // tools/list: the renamed tool and the one the annotation override makes idempotent.
    let tools = list_as(&gw, "alice", "");
    assert_eq!(names(&tools), ["find_manga", "price_lookup"]);
    let find = &tools[0];
    assert_eq!(find["description"], "Find manga in the store's catalogue.");
    let schema = &find["inputSchema"];
    assert!(schema["properties"].get("language").is_none(), "the fixed argument is not shown: {schema}");
    assert_eq!(schema["properties"]["max_results"]["default"], 3);
    assert_eq!(schema["required"], json!(["query"]));
    let price = &tools[1];
    assert_eq!(price["annotations"]["title"], "Price");
    assert_eq!(price["annotations"]["idempotentHint"], true);
    assert_eq!(
        price["annotations"]["readOnlyHint"], true,
        "the server's annotations stay under the overrides"
    );

    // A call by the new name reaches the server under its own name, with the fixed argument
    // injected and the operator's default filled in (and, as always, the schema's own).
    let answer = call_as(&gw, "alice", "", "find_manga", json!({"query": "One Piece"}));
    assert!(answer["result"]["content"].is_array(), "{answer}");
    assert_eq!(
        received(&demo),
        json!({"name": "manga_search", "arguments": {"query": "One Piece", "language": "en", "max_results": 3,
            "in_stock_only": false}})
    );
    let answer = call_as(&gw, "alice", "", "find_manga", json!({"query": "One Piece", "max_results": 7}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(received(&demo)["arguments"]["max_results"], 7, "a given argument is the caller's");
    let calls = demo.stats()["calls"].as_u64().unwrap();

    // Sending a fixed argument is refused precisely, before anything goes upstream.
    let refused = call_as(&gw, "alice", "", "find_manga", json!({"query": "One Piece", "language": "ja"}));
    let data = expect_error(&refused, -32602, "bad_input");
    assert_eq!(data["violations"][0]["path"], "/language", "{refused}");
    assert_eq!(data["tool"], "find_manga");
    // The old name, a hidden tool: no such tool. A denied tool: forbidden.
    expect_error(&call_as(&gw, "alice", "", "manga_search", json!({"query": "x"})), -32002, "unknown_tool");
    expect_error(
        &call_as(&gw, "alice", "", "checkout", json!({"shipping_address_id": "a", "payment_method_id": "p"})),
        -32002,
        "unknown_tool",
    );
    let denied = call_as(&gw, "alice", "", "inventory_check", json!({"manga_ids": ["MNG-00000001"]}));
    assert_eq!(expect_error(&denied, -32008, "forbidden")["rule"], "default_deny");
    assert_eq!(demo.stats()["calls"].as_u64().unwrap(), calls, "no refused call reached the server");
    let allowed = call_as(&gw, "alice", "", "price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert!(allowed.get("result").is_some(), "{allowed}");
    let m = gw.metrics();
    assert!(
        metric(&m, "mcp_gateway_policy_decisions_total", &["rule=\"by-new-name\"", "outcome=\"allow\""])
            >= 2.0,
        "the policy decided on the new name"
    );
    assert_eq!(
        metric(&m, "mcp_gateway_policy_decisions_total", &["rule=\"idempotent\"", "outcome=\"allow\""]),
        1.0
    );

    // Exports and /capabilities show exactly what tools/list shows.
    let mcp = get_as(&gw, "alice", "/tools?format=mcp");
    assert_eq!(mcp["tools"], json!(tools));
    let openai = get_as(&gw, "alice", "/tools?format=openai");
    let exported: Vec<&str> =
        openai["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(exported, ["find_manga", "price_lookup"]);
    assert!(openai["tools"][0]["function"]["parameters"]["properties"].get("language").is_none());
    let capabilities = get_as(&gw, "alice", "/capabilities");
    assert_eq!(capabilities["tools"]["total"], 2, "{capabilities}");
    // The CLI, built from configuration (an anonymous caller under the same policy).
    let from_cli = cli_export(&config, &["--format", "mcp"]);
    assert_eq!(from_cli["tools"], json!(tools));
}

#[test]
fn check_config_shows_catalogue_control_and_refuses_what_cannot_apply() {
    let file = TempFile::new("catalogue-control-check.toml");
    let path = file.path().to_path_buf();
    let check = |toml: &str| {
        std::fs::write(&path, toml).unwrap();
        Command::new(BIN).args(["check-config", "--json", "--config"]).arg(&path).output().unwrap()
    };
    let server = "[servers.store]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/mcp\"\ndiscover = false\ntools = [{name = \"add_to_cart\", inputSchema = {type = \"object\", properties = {manga_id = {type = \"string\"}, quantity = {type = \"integer\", maximum = 10}}}}, {name = \"checkout\"}]\n";
    let ok = check(&format!(
        "{server}[tools.add_to_cart]\nrename = \"put_in_cart\"\ndefault_arguments = {{quantity = 2}}\n[catalogue.search]\nenabled = true\npinned = [\"put_in_cart\"]\n"
    ));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let shown: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(shown["tools"]["add_to_cart"]["rename"], "put_in_cart");
    assert_eq!(shown["tools"]["add_to_cart"]["default_arguments"], json!({"quantity": 2}));
    assert_eq!(
        shown["catalogue"]["search"],
        json!({"enabled": true, "pinned": ["put_in_cart"], "max_results": 5})
    );
    for (extra, says) in [
        ("[tools.add_to_cart]\nrename = \"checkout\"\n", "collides with the tool \"checkout\""),
        ("[tools.add_to_cart]\ndefault_arguments = {quantity = 11}\n", "default argument \"quantity\" fails"),
        (
            "[tools.add_to_cart]\nfixed_arguments = {store = \"tokyo\"}\n",
            "fixed argument \"store\" is not a property",
        ),
    ] {
        let refused = check(&format!("{server}{extra}"));
        assert!(!refused.status.success(), "{extra} was accepted");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("tools.add_to_cart") && stderr.contains(says), "{extra}: {stderr}");
    }
}

/// The demo store and server-everything behind one gateway in search mode.
struct SearchSetup {
    demo: Demo,
    _everything: crate::common::Proc,
    gw: Gateway,
}

fn search_setup(extra: &str) -> SearchSetup {
    let demo = Demo::http();
    let port = free_port();
    let everything = everything_server(port);
    let config = format!(
        "{extra}[servers.store]\ntransport = \"http\"\nurl = \"{}\"\n[servers.everything]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n[catalogue.search]\nenabled = true\npinned = [\"manga_search\"]\nmax_results = 5\n",
        demo.url()
    );
    let gw = Gateway::start(&config, &[]);
    let setup = SearchSetup { demo, _everything: everything, gw };
    wait_for("both servers' tools", || {
        search(&setup.gw, "anyone", "", "echo back the input string", 5).contains(&"echo".to_string())
            && search(&setup.gw, "anyone", "", "check stock", 5).contains(&"inventory_check".to_string())
    });
    setup
}

fn search_answer(gw: &Gateway, subject: &str, scopes: &str, query: &str, max: u64) -> Value {
    call_as(gw, subject, scopes, "search_tools", json!({"query": query, "max_results": max}))
}

fn search(gw: &Gateway, subject: &str, scopes: &str, query: &str, max: u64) -> Vec<String> {
    let answer = search_answer(gw, subject, scopes, query, max);
    let found = answer["result"]["structuredContent"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("{answer}"));
    found.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn search_mode_lists_meta_tools_finds_under_policy_and_calls_through_call_tool() {
    let policy = PolicyFile::new(
        r#"@id("all-but-checkout") permit (principal, action, resource) when { resource.name != "checkout" };
@id("buyers") permit (principal, action, resource) when { principal.scopes.contains("store:buy") };
"#,
    );
    let setup = search_setup(&format!("{IDENTITY}[policy]\nfile = {:?}\n", policy.0.to_str().unwrap()));
    let gw = &setup.gw;

    // tools/list: the two meta-tools and the pinned tool, whatever the catalogue holds.
    let listed = list_as(gw, "alice", "");
    assert_eq!(names(&listed), ["search_tools", "call_tool", "manga_search"]);
    assert_eq!(listed[0]["inputSchema"]["required"], json!(["query"]));
    let exported = get_as(gw, "alice", "/tools?format=anthropic");
    let exported: Vec<&str> =
        exported["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(exported, ["search_tools", "call_tool", "manga_search"], "exports follow tools/list");

    // Search answers with the definitions callers see, best first; the policy filters them.
    let answer = search_answer(gw, "bob", "store:buy", "checkout the cart and pay for the order", 3);
    let found = &answer["result"]["structuredContent"]["tools"];
    assert_eq!(found[0]["name"], "checkout", "{answer}");
    assert!(found[0]["inputSchema"]["properties"]["payment_method_id"].is_object());
    let text: Value = serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text["tools"], found, "the text carries the same tools for a model");
    let for_alice = search(gw, "alice", "", "checkout the cart and pay for the order", 5);
    assert!(!for_alice.contains(&"checkout".to_string()), "{for_alice:?}");
    assert!(!for_alice.is_empty());

    // call_tool calls what search found, through the policy and validation like a call by name.
    let calls = setup.demo.stats()["calls"].as_u64().unwrap();
    let via = call_as(
        gw,
        "alice",
        "",
        "call_tool",
        json!({"name": "price_lookup", "arguments": {"manga_id": "MNG-00000001"}}),
    );
    let direct = call_as(gw, "alice", "", "price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert!(via.get("result").is_some(), "{via}");
    assert_eq!(via["result"], direct["result"], "found tools are callable by name too");
    assert_eq!(setup.demo.stats()["calls"].as_u64().unwrap(), calls + 2);
    assert_eq!(setup.demo.stats()["last_tool"]["name"], "price_lookup");
    let pay =
        json!({"name": "checkout", "arguments": {"shipping_address_id": "a", "payment_method_id": "p"}});
    expect_error(&call_as(gw, "alice", "", "call_tool", pay.clone()), -32008, "forbidden");
    assert!(call_as(gw, "bob", "store:buy", "call_tool", pay)["result"].is_object());
    let echoed =
        call_as(gw, "alice", "", "call_tool", json!({"name": "echo", "arguments": {"message": "through"}}));
    assert_eq!(echoed["result"]["content"][0]["text"], "Echo: through", "{echoed}");
    expect_error(
        &call_as(gw, "alice", "", "call_tool", json!({"name": "price_lookup", "arguments": {"manga_id": 7}})),
        -32602,
        "bad_input",
    );
    expect_error(
        &call_as(gw, "alice", "", "call_tool", json!({"name": "no_such_tool"})),
        -32002,
        "unknown_tool",
    );
    expect_error(&call_as(gw, "alice", "", "search_tools", json!({"query": ""})), -32602, "bad_input");
    expect_error(
        &call_as(gw, "alice", "", "search_tools", json!({"query": "x", "max_results": 6})),
        -32602,
        "bad_input",
    );
    // Calls through call_tool are counted under the tool they called.
    let m = gw.metrics();
    assert!(metric(&m, "mcp_gateway_tool_calls_total", &["tool=\"price_lookup\""]) >= 2.0);
    assert_eq!(metric(&m, "mcp_gateway_tool_calls_total", &["tool=\"call_tool\""]), 0.0);
}

/// The labelled query set: a task in a user's words and the tool meant for it, over the
/// store's six tools and server-everything's.
const LABELLED: &[(&str, &str)] = &[
    ("search the catalog for One Piece volume 100", "manga_search"),
    ("find manga titles by keyword", "manga_search"),
    ("what is the price of this manga", "price_lookup"),
    ("current price and discounts for an ISBN", "price_lookup"),
    ("is this manga in stock at the warehouse", "inventory_check"),
    ("check availability and restock date", "inventory_check"),
    ("put a volume in my shopping cart", "add_to_cart"),
    ("add an item to the cart", "add_to_cart"),
    ("place the order and pay", "checkout"),
    ("process checkout with my saved payment method", "checkout"),
    ("recommend manga based on my reading history", "manga_recommendations"),
    ("personalized suggestions for a shojo fan", "manga_recommendations"),
    ("echo back a message", "echo"),
    ("add two numbers together", "get-sum"),
    ("sum of a and b", "get-sum"),
    ("return a tiny image", "get-tiny-image"),
    ("show environment variables of the server", "get-env"),
    ("a long running operation with progress updates", "trigger-long-running-operation"),
    ("a resource reference MCP clients can use", "get-resource-reference"),
    ("compress a file with gzip", "gzip-file-as-resource"),
    ("structured content with an output schema", "get-structured-content"),
    ("resource links to several resources", "get-resource-links"),
    ("message with annotations metadata", "get-annotated-message"),
    ("turn simulated logging on or off", "toggle-simulated-logging"),
];

#[test]
fn search_ranks_the_intended_tool_in_the_top_three() {
    let setup = search_setup("");
    let gw = &setup.gw;
    let (_, everything) = get_json(gw, "/tools?format=mcp");
    assert!(
        everything["tools"].as_array().unwrap().len() <= 3,
        "search mode lists only the meta-tools and the pins"
    );
    let mut misses = Vec::new();
    for (query, intended) in LABELLED {
        let top = search(gw, "anyone", "", query, 3);
        if !top.iter().any(|name| name == intended) {
            misses.push(format!("{query:?}: wanted {intended}, got {top:?}"));
        }
    }
    assert!(LABELLED.len() >= 20);
    assert!(
        misses.is_empty(),
        "{} of {} queries missed:\n{}",
        misses.len(),
        LABELLED.len(),
        misses.join("\n")
    );
}
