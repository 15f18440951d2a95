//! Resources, resource templates, prompts and completion of every server through the one
//! endpoint, with real servers none of which was written here for the gateway: two instances
//! of the suite's fixture server on the official Python SDK (`a` and `b`: every URI and prompt
//! of one is claimed by the other) and the official TypeScript "everything" server; callers are
//! raw JSON-RPC, the official Python SDK client in all three of its connect modes, and the
//! conformance suite (`conformance_server.rs`). Checked: what each caller sees, which server
//! received each request (the fixture servers log every exchange), the routing rules on
//! collisions and prefixes, the policy's decisions, and what the metrics and logs carry.

use std::process::Command;

use crate::common::*;
use serde_json::{Value, json};

/// Two fixture servers (`a` owns the `test://static-` prefix) and the everything server.
struct Surfaces {
    gw: Gateway,
    a: Proc,
    b: Proc,
    _every: Proc,
}

impl Surfaces {
    fn start(extra: &str) -> Self {
        let (a_port, b_port, every_port) = (free_port(), free_port(), free_port());
        let a = conformance_fixtures(a_port, &["--log-requests"]);
        let b = conformance_fixtures(b_port, &["--log-requests"]);
        let every = everything_server(every_port);
        let config = format!(
            "{}resource_prefixes = [\"test://static-\"]\n{}{}{extra}",
            http_server("a", &format!("http://127.0.0.1:{a_port}/mcp")),
            http_server("b", &format!("http://127.0.0.1:{b_port}/mcp")),
            http_server("every", &format!("http://127.0.0.1:{every_port}/mcp")),
        );
        let gw = Gateway::start(&config, &[]);
        Self { gw, a, b, _every: every }
    }

    fn rpc(&self, method: &str, params: Value) -> Value {
        let (status, answer) =
            self.gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        assert_eq!(status, 200, "{answer}");
        answer
    }

    fn result(&self, method: &str, params: Value) -> Value {
        let answer = self.rpc(method, params);
        answer.get("result").cloned().unwrap_or_else(|| panic!("{method}: {answer}"))
    }

    /// Every page of a list, through the gateway's cursors.
    fn all(&self, method: &str, key: &str) -> Vec<Value> {
        let (mut items, mut cursor) = (Vec::new(), Value::Null);
        loop {
            let params = if cursor.is_null() { json!({}) } else { json!({"cursor": cursor}) };
            let page = self.result(method, params);
            items.extend(page[key].as_array().cloned().unwrap_or_default());
            cursor = page.get("nextCursor").cloned().unwrap_or(Value::Null);
            if cursor.is_null() {
                return items;
            }
        }
    }
}

/// How many requests of `method` a fixture server logged.
fn received(server: &Proc, method: &str) -> usize {
    server.output().lines().filter(|l| l.contains(&format!("rpc={method} "))).count()
}

fn field<'a>(items: &'a [Value], key: &str) -> Vec<&'a str> {
    items.iter().filter_map(|i| i[key].as_str()).collect()
}

#[test]
fn resources_templates_prompts_and_completion_of_three_servers_through_one_endpoint() {
    let s = Surfaces::start("");
    // What the upstreams offer is declared.
    let init = s.result(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let caps = &init["capabilities"];
    assert!(
        caps["resources"].is_object() && caps["prompts"].is_object() && caps["completions"].is_object(),
        "{caps}"
    );

    // Resources keep their URIs; a URI both fixture servers list is served once, by the owner
    // the prefix names; one no prefix covers is listed by nobody.
    let resources = s.all("resources/list", "resources");
    let uris = field(&resources, "uri");
    assert!(uris.contains(&"test://static-text") && uris.contains(&"test://static-binary"), "{uris:?}");
    assert!(uris.iter().any(|u| u.starts_with("demo://resource/static/document/")), "{uris:?}");
    assert!(!uris.contains(&"test://watched-resource"), "claimed by a and b, owned by none: {uris:?}");
    assert_eq!(uris.iter().filter(|u| **u == "test://static-text").count(), 1);

    // Reads go to the right server, by prefix, listing and template.
    let before = (received(&s.a, "resources/read"), received(&s.b, "resources/read"));
    let text = s.result("resources/read", json!({"uri": "test://static-text"}));
    assert_eq!(text["contents"][0]["text"], "This is the content of the static text resource.", "{text}");
    let blob = s.result("resources/read", json!({"uri": "test://static-binary"}));
    assert!(blob["contents"][0]["blob"].is_string(), "{blob}");
    wait_for("a's log of the reads", || received(&s.a, "resources/read") == before.0 + 2);
    assert_eq!(received(&s.b, "resources/read"), before.1, "b owns none of these");
    let templated = s.result("resources/read", json!({"uri": "demo://resource/dynamic/text/9"}));
    assert_eq!(templated["contents"][0]["uri"], "demo://resource/dynamic/text/9", "{templated}");

    // A URI two servers claim, or none serves: the specification's resource-not-found.
    let claimed = s.rpc("resources/read", json!({"uri": "test://watched-resource"}));
    let data = expect_error(&claimed, -32002, "resource_not_found");
    assert_eq!(data["uri"], "test://watched-resource");
    assert!(claimed["error"]["message"].as_str().unwrap().contains("several servers claim it"), "{claimed}");
    let unknown = s.rpc("resources/read", json!({"uri": "nowhere://x?token=SECRET-IN-URI"}));
    expect_error(&unknown, -32002, "resource_not_found");

    // Templates, every server's.
    let templates = s.all("resources/templates/list", "resourceTemplates");
    let texts = field(&templates, "uriTemplate");
    assert!(texts.contains(&"demo://resource/dynamic/text/{resourceId}"), "{texts:?}");
    assert!(
        !texts.contains(&"test://template/{id}/data"),
        "a template two servers list is refused: {texts:?}"
    );

    // Prompts: a name both fixture servers offer is namespaced for each; the server sees its own.
    let prompts = s.all("prompts/list", "prompts");
    let names = field(&prompts, "name");
    for name in ["a__test_simple_prompt", "b__test_simple_prompt", "args-prompt", "completable-prompt"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert!(!names.contains(&"test_simple_prompt"), "{names:?}");
    let before = received(&s.b, "prompts/get");
    let got = s.result(
        "prompts/get",
        json!({"name": "b__test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": "y"}}),
    );
    assert!(got["messages"][0]["content"]["text"].as_str().unwrap().contains("arg1='x'"), "{got}");
    wait_for("b's log of the get", || received(&s.b, "prompts/get") == before + 1);
    let embedded = s.result(
        "prompts/get",
        json!({"name": "resource-prompt", "arguments": {"resourceType": "Text", "resourceId": "2"}}),
    );
    assert_eq!(embedded["messages"][1]["content"]["type"], "resource", "{embedded}");
    expect_error(&s.rpc("prompts/get", json!({"name": "test_simple_prompt"})), -32602, "bad_input");

    // Completion goes to the server of the prompt or template its ref names.
    let completed = s.result(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "a__test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "pa"}}),
    );
    assert_eq!(completed["completion"]["values"], json!(["paris", "park", "party"]), "{completed}");
    let department = s.result(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "E"}}),
    );
    assert_eq!(department["completion"]["values"], json!(["Engineering"]), "{department}");

    // Metrics by method, server and outcome, never a URI; logs redact a URI's query.
    let metrics = s.gw.metrics();
    assert!(
        metric(
            &metrics,
            "mcp_gateway_surface_requests_total",
            &["method=\"resources/read\"", "server=\"a\"", "outcome=\"success\""]
        ) >= 2.0,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "mcp_gateway_surface_requests_total",
            &["method=\"resources/read\"", "outcome=\"resource_not_found\""]
        ) >= 2.0,
        "{metrics}"
    );
    assert!(!metrics.contains("demo://") && !metrics.contains("test://"), "a URI in the metrics");
    wait_for("the reads' log lines", || s.gw.proc.output().contains("\"method\":\"resources/read\""));
    assert!(!s.gw.proc.output().contains("SECRET-IN-URI"), "a URI's query value in the logs");
}

#[test]
fn the_policy_decides_what_is_listed_read_got_and_completed() {
    let policy = TempFile::new("federation.cedar");
    std::fs::write(
        policy.path(),
        r#"@id("static-docs")
permit (principal, action == Action::"read", resource)
when { resource.server == "every" && resource.uri like "demo://resource/static/*" };

@id("weather")
permit (principal, action == Action::"get", resource) when { resource.name == "args-prompt" };
"#,
    )
    .unwrap();
    let s = Surfaces::start(&format!("[policy]\nfile = {:?}\n", policy.path().to_str().unwrap()));
    let uris: Vec<String> = s
        .all("resources/list", "resources")
        .iter()
        .filter_map(|r| r["uri"].as_str().map(String::from))
        .collect();
    assert!(!uris.is_empty() && uris.iter().all(|u| u.starts_with("demo://resource/static/")), "{uris:?}");
    let names: Vec<String> = s
        .all("prompts/list", "prompts")
        .iter()
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect();
    assert_eq!(names, ["args-prompt"]);
    assert!(s.all("resources/templates/list", "resourceTemplates").is_empty(), "no template is permitted");

    let allowed = s.result("resources/read", json!({"uri": "demo://resource/static/document/features.md"}));
    assert!(allowed["contents"][0]["text"].is_string(), "{allowed}");
    let before = received(&s.a, "resources/read");
    let denied = s.rpc("resources/read", json!({"uri": "test://static-text"}));
    assert_eq!(expect_error(&denied, -32008, "forbidden")["rule"], "default_deny");
    expect_error(
        &s.rpc("resources/read", json!({"uri": "demo://resource/dynamic/text/1"})),
        -32008,
        "forbidden",
    );
    expect_error(&s.rpc("prompts/get", json!({"name": "a__test_simple_prompt"})), -32008, "forbidden");
    let completion = json!({"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": ""}});
    expect_error(&s.rpc("completion/complete", completion), -32008, "forbidden");
    assert!(
        s.result("prompts/get", json!({"name": "args-prompt", "arguments": {"city": "Osaka"}}))["messages"]
            .is_array()
    );
    assert_eq!(received(&s.a, "resources/read"), before, "a refused read reached a server");
}

#[test]
fn the_official_python_client_reads_resources_prompts_and_completions_in_every_connect_mode() {
    let s = Surfaces::start("");
    for mode in ["legacy", "auto", "2026-07-28"] {
        let output = Command::new(python())
            .arg(peers_dir().join("clients/surface_client.py"))
            .args([&s.gw.url("/mcp"), mode, "test://static-text", "args-prompt", r#"{"city": "Kyoto"}"#])
            .output()
            .unwrap();
        assert!(output.status.success(), "{mode}: {}", String::from_utf8_lossy(&output.stderr));
        let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            seen["resources"].as_array().unwrap().contains(&json!("test://static-text")),
            "{mode}: {seen}"
        );
        assert!(
            seen["templates"]
                .as_array()
                .unwrap()
                .contains(&json!("demo://resource/dynamic/blob/{resourceId}")),
            "{mode}"
        );
        assert!(seen["prompts"].as_array().unwrap().contains(&json!("b__test_prompt_with_image")), "{mode}");
        assert_eq!(
            seen["read"]["contents"][0]["text"], "This is the content of the static text resource.",
            "{mode}"
        );
        assert_eq!(seen["prompt"]["messages"][0]["content"]["text"], "What's weather in Kyoto?", "{mode}");
        assert!(seen["completion"]["completion"]["values"].is_array(), "{mode}: {seen}");
    }
}

/// Lists, a read, a get and a completion through a gateway in front of one server.
fn surface_works(
    server: &str,
    config: &str,
    uri: &str,
    prompt: (&str, Value),
    completion: Option<(&str, &str)>,
) {
    let gw = Gateway::start(config, &[]);
    let rpc = |method: &str, params: Value| {
        let (_, answer) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        answer.get("result").cloned().unwrap_or_else(|| panic!("{server} {method}: {answer}"))
    };
    wait_for(&format!("{server}'s resources"), || {
        rpc("resources/list", json!({}))["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["uri"] == uri))
    });
    let read = rpc("resources/read", json!({"uri": uri}));
    assert!(read["contents"][0]["text"].is_string(), "{server}: {read}");
    assert!(
        !rpc("resources/templates/list", json!({}))["resourceTemplates"].as_array().unwrap().is_empty(),
        "{server}"
    );
    let (name, arguments) = prompt;
    let got = rpc("prompts/get", json!({"name": name, "arguments": arguments}));
    assert!(got["messages"][0]["content"]["text"].is_string(), "{server}: {got}");
    if let Some((argument, value)) = completion {
        let params = json!({"ref": {"type": "ref/prompt", "name": name}, "argument": {"name": argument, "value": value}});
        assert!(rpc("completion/complete", params)["completion"]["values"].is_array(), "{server}");
    }
}

#[test]
fn resources_and_prompts_of_stdio_websocket_and_http_sse_servers() {
    // The everything server over stdio and over HTTP+SSE (TypeScript SDK).
    let stdio = format!(
        "[servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        everything_entry().to_str().unwrap()
    );
    let args = ("args-prompt", json!({"city": "Nagoya"}));
    let docs = "demo://resource/static/document/features.md";
    surface_works("stdio", &stdio, docs, args.clone(), Some(("city", "")));
    let sse_port = free_port();
    let _sse = everything_sse_server(sse_port);
    let sse = format!("[servers.every]\ntransport = \"sse\"\nurl = \"http://127.0.0.1:{sse_port}/sse\"\n");
    surface_works("sse", &sse, docs, args, Some(("city", "")));
    // The Python SDK 1.x FastMCP server over WebSocket (it declares no completions: the
    // gateway answers an empty completion for it without asking).
    let ws_port = free_port();
    let _ws = python_ws_server(ws_port, None);
    let ws = format!("[servers.py]\ntransport = \"websocket\"\nurl = \"ws://127.0.0.1:{ws_port}/ws\"\n");
    surface_works(
        "websocket",
        &ws,
        "ws://peer/notes/today",
        ("greet", json!({"name": "Aiko"})),
        Some(("name", "A")),
    );
}

#[test]
fn fastmcp_and_langchain_read_resources_and_prompts_through_the_gateway_unchanged() {
    let s = Surfaces::start("");
    let output = Command::new(lambda_python())
        .arg(peers_dir().join("clients/framework_surface_client.py"))
        .args([
            &s.gw.url("/mcp"),
            "test://static-text",
            "b__test_prompt_with_arguments",
            r#"{"arg1": "p", "arg2": "q"}"#,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    let fastmcp = &seen["fastmcp"];
    assert!(fastmcp["resources"].as_array().unwrap().contains(&json!("test://static-text")), "{seen}");
    assert!(
        fastmcp["prompts"].as_array().unwrap().contains(&json!("b__test_prompt_with_arguments")),
        "{seen}"
    );
    assert_eq!(fastmcp["read"][0], "This is the content of the static text resource.");
    assert_eq!(fastmcp["prompt"][0], "Prompt with arguments: arg1='p', arg2='q'");
    let langchain = &seen["langchain"];
    assert_eq!(langchain["resources"][0]["source"], "test://static-text", "{seen}");
    assert_eq!(langchain["resources"][0]["data"], "This is the content of the static text resource.");
    assert_eq!(langchain["prompt"][0], "Prompt with arguments: arg1='p', arg2='q'");
}

#[test]
fn catalogue_control_renames_describes_and_hides_prompts_and_resources() {
    let every_port = free_port();
    let _every = everything_server(every_port);
    let config = format!(
        "{}[prompts.args-prompt]\nrename = \"weather\"\ndescription = \"The weather in a city.\"\n\
         [prompts.simple-prompt]\nhide = true\n\
         [resources]\nhide = [\"demo://resource/static/document/startup\", \"demo://resource/dynamic/blob/\"]\n\
         descriptions = {{ \"demo://resource/static/document/features.md\" = \"What the server can do.\" }}\n",
        http_server("every", &format!("http://127.0.0.1:{every_port}/mcp"))
    );
    let gw = Gateway::start(&config, &[]);
    let rpc = |method: &str, params: Value| {
        gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).1
    };
    let prompts = rpc("prompts/list", json!({}))["result"]["prompts"].clone();
    let names: Vec<&str> = prompts.as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(
        names.contains(&"weather") && !names.contains(&"args-prompt") && !names.contains(&"simple-prompt"),
        "{names:?}"
    );
    let weather = prompts.as_array().unwrap().iter().find(|p| p["name"] == "weather").unwrap();
    assert_eq!(weather["description"], "The weather in a city.");
    // The server receives its own name.
    let got = rpc("prompts/get", json!({"name": "weather", "arguments": {"city": "Kobe"}}));
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "What's weather in Kobe?", "{got}");
    expect_error(&rpc("prompts/get", json!({"name": "simple-prompt"})), -32602, "bad_input");
    expect_error(
        &rpc("prompts/get", json!({"name": "args-prompt", "arguments": {"city": "x"}})),
        -32602,
        "bad_input",
    );
    // Hidden resources: not listed, not read; a description replaced.
    let resources = rpc("resources/list", json!({}))["result"]["resources"].clone();
    let uris: Vec<&str> = resources.as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert!(!uris.iter().any(|u| u.contains("startup")), "{uris:?}");
    let features = resources
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == "demo://resource/static/document/features.md")
        .unwrap();
    assert_eq!(features["description"], "What the server can do.");
    expect_error(
        &rpc("resources/read", json!({"uri": "demo://resource/static/document/startup.md"})),
        -32002,
        "resource_not_found",
    );
    let templates = rpc("resources/templates/list", json!({}))["result"]["resourceTemplates"].clone();
    assert!(
        templates.as_array().unwrap().iter().all(|t| !t["uriTemplate"].as_str().unwrap().contains("/blob/")),
        "{templates}"
    );
    expect_error(
        &rpc("resources/read", json!({"uri": "demo://resource/dynamic/blob/1"})),
        -32002,
        "resource_not_found",
    );
}
