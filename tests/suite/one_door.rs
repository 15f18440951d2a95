//! One door for every call: each path that ends in a server running a tool — a direct call, a
//! batch item, the `call_tool` meta-tool, an export alias, a fallback's alternative tool, a
//! held answer's retry and a task's creation — passes the same checks. For each path, a tool
//! the policy forbids stays forbidden (nothing reaches the server) and an argument the
//! catalogue fixes stays fixed (a caller's value is refused, never used; without one the
//! server sees the fixed value). Real processes: the built gateway with header identity, a
//! Cedar policy and an audit file, the demo store server (its `/_stats` says what it
//! received), and a server on a port nobody listens on (connection refused: nothing
//! delivered, so a fallback may run).

use crate::common::{Demo, Gateway, TempFile, expect_error, free_port, http_server, wait_for};
use serde_json::{Value, json};

const IDENTITY: &str =
    "[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\nscopes_header = \"x-caller-scopes\"\n";

/// `24h_search` (the demo's `manga_search`, renamed so that the Gemini export maps its name) needs the `store:search` scope; every other tool is open.
const POLICY: &str = r#"@id("search")
permit (principal, action, resource)
when { resource.name == "24h_search" && principal.scopes.contains("store:search") };

@id("open")
permit (principal, action, resource) when { resource.name != "24h_search" };
"#;

/// alice may search; mallory may not.
const ALICE: [(&str, &str); 2] = [("x-caller-subject", "alice"), ("x-caller-scopes", "store:search")];
const MALLORY: [(&str, &str); 2] = [("x-caller-subject", "mallory"), ("x-caller-scopes", "")];

struct Door {
    gw: Gateway,
    demo: Demo,
    audit: TempFile,
    _policy: TempFile,
}

impl Door {
    /// The gateway: `store` (the demo, `manga_search` renamed with `language` fixed to `en`)
    /// and `gone` (refuses connections; its `legacy_search` falls back to `24h_search`).
    fn start(search_mode: bool) -> Self {
        let demo = Demo::http();
        let policy = TempFile::new("one-door.cedar");
        std::fs::write(policy.path(), POLICY).unwrap();
        let audit = TempFile::new("one-door-audit.jsonl");
        let search = if search_mode { "[catalogue.search]\nenabled = true\n" } else { "" };
        let config = format!(
            "{IDENTITY}[policy]\nfile = {policy:?}\n[audit]\nsink = \"file\"\nfile = {audit:?}\n{search}{store}{gone}\
             discover = false\n[[servers.gone.tools]]\nname = \"legacy_search\"\n\
             inputSchema = {{ type = \"object\", properties = {{ query = {{ type = \"string\" }}, language = {{ type = \"string\" }} }} }}\n\
             annotations = {{ readOnlyHint = true }}\n\
             [tools.manga_search]\nrename = \"24h_search\"\nfixed_arguments = {{ language = \"en\" }}\n\
             [tools.legacy_search]\nfallback_tool = \"24h_search\"\n",
            policy = policy.path().to_str().unwrap(),
            audit = audit.path().to_str().unwrap(),
            store = http_server("store", &demo.url()),
            gone = http_server("gone", &format!("http://127.0.0.1:{}/mcp", free_port())),
        );
        let gw = Gateway::start(&config, &[]);
        Self { gw, demo, audit, _policy: policy }
    }

    fn rpc(&self, headers: &[(&str, &str)], message: &Value) -> Value {
        let (status, _, body) = self.gw.post_raw(message.to_string(), headers);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn call(&self, headers: &[(&str, &str)], params: Value) -> Value {
        self.rpc(headers, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
    }

    fn upstream_calls(&self) -> u64 {
        self.demo.stats()["calls"].as_u64().unwrap()
    }

    /// What the demo server last received: `{name, arguments}`.
    fn received(&self) -> Value {
        self.demo.stats()["last_tool"].clone()
    }

    fn audit_lines(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.audit.path()).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// Checks one path: `params_for(arguments)` builds the path's `tools/call` params for
    /// `24h_search` with those arguments. mallory is refused by the policy, alice's own
    /// `language` is refused, and alice's call without one reaches the server with `en`.
    fn holds(&self, path: &str, params_for: impl Fn(Value) -> Value) {
        let before = self.upstream_calls();
        let denied = self.call(&MALLORY, params_for(json!({"query": "naruto"})));
        let data = expect_error(&denied, -32008, "forbidden");
        assert_eq!(data["rule"], "default_deny", "{path}: {denied}");
        let overridden = self.call(&ALICE, params_for(json!({"query": "naruto", "language": "ja"})));
        let data = expect_error(&overridden, -32602, "bad_input");
        assert_eq!(data["violations"][0]["path"], "/language", "{path}: {overridden}");
        assert_eq!(self.upstream_calls(), before, "{path}: a refused call reached the server");
        let _ = self.call(&ALICE, params_for(json!({"query": "naruto"})));
        assert_eq!(self.upstream_calls(), before + 1, "{path}: the admitted call reached the server once");
        let received = self.received();
        assert_eq!(received["name"], "manga_search", "{path}: {received}");
        assert_eq!(received["arguments"]["language"], "en", "{path}: the fixed argument: {received}");
    }
}

#[test]
fn direct_batch_alias_task_and_held_retry_calls_pass_the_same_door() {
    let door = Door::start(false);
    door.holds("direct", |arguments| json!({"name": "24h_search", "arguments": arguments}));

    // A batch item: the same checks as alone, each item on its own.
    let before = door.upstream_calls();
    let batch = |headers: &[(&str, &str)], arguments: Value| {
        let item = |id: u64| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "24h_search", "arguments": arguments}})
        };
        let answer = door.rpc(headers, &json!([item(1), {"jsonrpc": "2.0", "id": 2, "method": "ping"}]));
        answer.as_array().unwrap()[0].clone()
    };
    expect_error(&batch(&MALLORY, json!({"query": "x"})), -32008, "forbidden");
    expect_error(&batch(&ALICE, json!({"query": "x", "language": "ja"})), -32602, "bad_input");
    assert_eq!(door.upstream_calls(), before, "batch: a refused item reached the server");
    assert!(batch(&ALICE, json!({"query": "x"})).get("result").is_some());
    assert_eq!(door.received()["arguments"]["language"], "en");

    // An export alias: the name the Gemini export maps `24h_search` to (a Gemini function
    // name cannot start with a digit) is the same tool, under the same rules.
    let exported: Value = door
        .gw
        .client
        .get(door.gw.url("/tools?format=gemini"))
        .header(ALICE[0].0, ALICE[0].1)
        .header(ALICE[1].0, ALICE[1].1)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let alias = exported_names(&exported)
        .into_iter()
        .find(|name| name.starts_with("_24h_search"))
        .unwrap_or_else(|| panic!("no mapped name for 24h_search: {exported}"));
    assert_ne!(alias, "24h_search");
    door.holds("export alias", |arguments| json!({"name": alias, "arguments": arguments}));
    // The audit line names the tool that ran and the name the caller used.
    let by_alias = |l: &Value| l["requested_tool"] == json!(alias) && l["outcome"] == "ok";
    wait_for("the alias call's audit line", || door.audit_lines().iter().any(by_alias));
    let lines = door.audit_lines();
    let line = lines.iter().find(|l| by_alias(l)).unwrap();
    assert_eq!(line["tool"], "24h_search", "{line}");
    assert_eq!(line["subject"], "alice", "{line}");

    // A task's creation: the `task` parameter does not open another door.
    door.holds(
        "task",
        |arguments| json!({"name": "24h_search", "arguments": arguments, "task": {"ttl": 60000}}),
    );

    // A held answer's retry (a `requestState` of the gateway's): the policy and the catalogue
    // decide before the state is even looked at.
    let state = "mcpgw-state.not-a-real-state";
    let retry = |arguments: Value| {
        json!({"name": "24h_search", "arguments": arguments, "requestState": state,
            "inputResponses": {"q": {"action": "accept", "content": {}}}})
    };
    let denied = door.call(&MALLORY, retry(json!({"query": "x"})));
    expect_error(&denied, -32008, "forbidden");
    let overridden = door.call(&ALICE, retry(json!({"query": "x", "language": "ja"})));
    expect_error(&overridden, -32602, "bad_input");
    let refused_state = door.call(&ALICE, retry(json!({"query": "x"})));
    let data = expect_error(&refused_state, -32602, "bad_input");
    assert!(data.get("reason").is_some(), "past the door, the state itself is refused: {refused_state}");
}

#[test]
fn the_call_tool_meta_tool_passes_the_same_door() {
    let door = Door::start(true);
    door.holds(
        "call_tool",
        |arguments| json!({"name": "call_tool", "arguments": {"name": "24h_search", "arguments": arguments}}),
    );
}

#[test]
fn a_fallback_alternative_passes_the_door_of_the_tool_that_runs() {
    let door = Door::start(false);
    let legacy = |arguments: Value| json!({"name": "legacy_search", "arguments": arguments});
    // `gone` refuses the connection: nothing was delivered, so the alternative may run — but
    // only as a call of its own would. mallory may not search: the fallback does not happen
    // and mallory gets the first tool's failure.
    let before = door.upstream_calls();
    let denied = door.call(&MALLORY, legacy(json!({"query": "naruto"})));
    let error = denied.get("error").unwrap_or_else(|| panic!("no fallback for mallory: {denied}"));
    assert_eq!(error["data"]["tool"], "legacy_search", "{denied}");
    assert_eq!(door.upstream_calls(), before, "the forbidden alternative reached the server");
    // alice asks legacy_search (which takes a language) for Japanese: the alternative fixes
    // `language`, so it cannot answer that question and does not run.
    let japanese = door.call(&ALICE, legacy(json!({"query": "naruto", "language": "ja"})));
    assert!(japanese.get("error").is_some(), "the fixed argument was overridden: {japanese}");
    assert_eq!(door.upstream_calls(), before, "an alternative that fixes language ran with the caller's");
    // Without a language, the alternative runs with its fixed one.
    let answer = door.call(&ALICE, legacy(json!({"query": "naruto"})));
    assert_eq!(answer["result"]["_meta"]["fallback_tool"], "24h_search", "{answer}");
    assert_eq!(door.upstream_calls(), before + 1);
    assert_eq!(door.received()["arguments"]["language"], "en");
    // The audit line names the tool that really ran and the one asked for.
    wait_for("the fallback's audit line", || {
        door.audit_lines().iter().any(|l| l["outcome"] == "fallback_alternative")
    });
    let lines = door.audit_lines();
    let line = lines.iter().find(|l| l["outcome"] == "fallback_alternative").unwrap();
    assert_eq!(line["tool"], "24h_search", "{line}");
    assert_eq!(line["server"], "store", "{line}");
    assert_eq!(line["requested_tool"], "legacy_search", "{line}");
    assert_eq!(line["subject"], "alice", "{line}");
}

/// Every `name` in an export's JSON.
fn exported_names(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(key, v)| match (key.as_str(), v) {
                ("name", Value::String(name)) => vec![name.clone()],
                _ => exported_names(v),
            })
            .collect(),
        Value::Array(items) => items.iter().flat_map(exported_names).collect(),
        _ => Vec::new(),
    }
}
