//! OpenAPI documents as hostile input (docs/openapi.md, "Hostile documents"): a document is
//! another party's text, read again at every refresh, so none may abort the gateway, read its
//! files, steer a call outside its operation's path, or move its credentials elsewhere. Each
//! test runs the gateway binary against real processes: Python's own static file server
//! (`http.server`, which resolves dot segments after decoding `%2F`, as many servers and
//! frameworks do) serving documents and answering calls, recording what reached it
//! (`tests/peers/scripted/recording_file_server.py`), and the demo MCP server as the other
//! server that must keep serving.

use std::{path::Path, process::Command};

use serde_json::{Value, json};

use crate::common::*;

/// The static file server over `dir`, recording every request.
struct FileServer {
    _proc: Proc,
    port: u16,
}

impl FileServer {
    fn start(dir: &Path) -> Self {
        let port = free_port();
        let mut command = Command::new("python3");
        command
            .arg(peers_dir().join("scripted/recording_file_server.py"))
            .arg(dir)
            .arg(port.to_string())
            .env("PYTHONUNBUFFERED", "1");
        let proc = Proc::spawn_until("recording-file-server", command, "READY");
        Self { _proc: proc, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request received so far: `{method, path, resolved, headers}`.
    fn received(&self) -> Vec<Value> {
        reqwest::blocking::get(self.url("/_received")).unwrap().json().unwrap()
    }

    fn fetches_of(&self, path: &str) -> usize {
        self.received().iter().filter(|r| r["path"] == path).count()
    }
}

fn tool_named(gateway: &Gateway, suffix: &str) -> String {
    gateway
        .tool_names()
        .into_iter()
        .find(|n| n == suffix || n.ends_with(&format!("__{suffix}")))
        .unwrap_or_else(|| panic!("no tool {suffix} in {:?}", gateway.tool_names()))
}

/// One anchor of `items` items, referenced `refs` times.
fn wide_aliases(items: usize, refs: usize) -> String {
    format!(
        "openapi: 3.0.3\ninfo: {{title: wide, version: '1'}}\npaths: {{}}\nx-a: &a [{}]\nx-b: [{}]\n",
        vec!["0"; items].join(","),
        vec!["*a"; refs].join(",")
    )
}

/// The nested "billion laughs": nine levels of nine references.
fn nested_aliases() -> String {
    let mut text =
        String::from("openapi: 3.0.3\ninfo: {title: lol, version: '1'}\npaths: {}\nl0: &l0 [lol]\n");
    for level in 1..10 {
        let refs = vec![format!("*l{}", level - 1); 9].join(",");
        text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    text
}

/// A 64 KiB scalar referenced 4,000 times (250 MiB once expanded, from 76 KB of text).
fn huge_scalar() -> String {
    format!(
        "openapi: 3.0.3\ninfo: {{title: big, version: '1'}}\npaths: {{}}\nx-s: &s '{}'\nx-t: [{}]\n",
        "x".repeat(64 * 1024),
        vec!["*s"; 4_000].join(",")
    )
}

/// An `enum` of 20,000 values reused through 5,000 refs: 10⁸ values once inlined.
fn inlined_bomb() -> String {
    format!(
        "openapi: 3.0.3\ninfo: {{title: inlined, version: '1'}}\npaths:\n  /a:\n    get:\n      operationId: a\n      parameters: [{{name: q, in: query, schema: {{allOf: [{}]}}}}]\n      responses: {{'200': {{description: ok}}}}\ncomponents:\n  schemas:\n    S: {{type: integer, enum: [{}]}}\n",
        vec!["{$ref: '#/components/schemas/S'}"; 5_000].join(","),
        vec!["0"; 20_000].join(",")
    )
}

/// A document fine in every way, its responses shared through an anchor.
const SMALL_ALIASES: &str = "openapi: 3.0.3
info: {title: fine, version: '1'}
paths:
  /ping.json:
    get:
      operationId: ping
      responses: &ok
        '200': {description: ok}
  /pong.json:
    get:
      operationId: pong
      responses: *ok
";

#[test]
fn a_crafted_document_corpus_is_refused_with_reasons_while_the_other_servers_keep_serving() {
    let docs = Scratch::new("hostile-corpus");
    let wide = wide_aliases(20_000, 20_000);
    assert!(wide.len() < 100 * 1024, "about 100 KB of text: {}", wide.len());
    let corpus = [
        ("wide", "wide.yaml", wide),
        ("laughs", "laughs.yaml", nested_aliases()),
        ("scalar", "scalar.yaml", huge_scalar()),
        (
            "deep_yaml",
            "deep.yaml",
            format!("openapi: 3.0.3\npaths: {{}}\nx: {}{}\n", "[".repeat(5_000), "]".repeat(5_000)),
        ),
        (
            "deep_json",
            "deep.json",
            format!(
                r#"{{"openapi": "3.0.3", "paths": {{}}, "x": {}{}}}"#,
                "[".repeat(5_000),
                "]".repeat(5_000)
            ),
        ),
        ("inlined", "inlined.yaml", inlined_bomb()),
        (
            "remote_ref",
            "remote.yaml",
            "openapi: 3.0.3\npaths:\n  /a:\n    get:\n      parameters: [{name: q, in: query, schema: {$ref: '../../etc/passwd'}}]\n      responses: {'200': {description: ok}}\n".to_string(),
        ),
    ];
    for (_, file, text) in &corpus {
        std::fs::write(docs.dir().join(file), text).unwrap();
    }
    std::fs::write(docs.dir().join("fine.yaml"), SMALL_ALIASES).unwrap();
    std::fs::write(docs.dir().join("ping.json"), r#"{"pong": true}"#).unwrap();
    let files = FileServer::start(docs.dir());
    let demo = Demo::http();
    let mut config = http_server("demo", &demo.url());
    let servers = corpus.iter().map(|(server, file, _)| (*server, *file)).chain([("fine", "fine.yaml")]);
    for (server, file) in servers {
        // 1 MiB documents: a parse budget of 32 MiB each (32 × max_spec_bytes).
        config.push_str(&format!(
            "[servers.{server}]\ntransport = \"openapi\"\nspec = \"{}\"\nbase_url = \"{}\"\nmax_spec_bytes = 1048576\n",
            files.url(&format!("/{file}")),
            files.url("")
        ));
    }
    // As in a container with a memory limit: an allocation past 3 GiB of address space aborts.
    let mut gateway = Gateway::start_within_memory(&config, &[], 3 * 1024 * 1024);

    let reasons = [
        ("wide", "parse budget"),
        ("laughs", "YAML"),
        ("scalar", "parse budget"),
        ("deep_yaml", "recursion limit"),
        ("deep_json", "recursion limit"),
        ("remote_ref", "file documents only"),
    ];
    // Each hostile document's server reports why its document was refused (or what it skipped).
    // The refs bomb is no reason to refuse: its refs stay refs (`$defs`), so it maps to one
    // bounded definition — served, or skipped or trimmed with the reason — never expanded.
    let reported = |gateway: &Gateway, server: &str, want: &str| {
        let (_, registry) = admin_get_json(gateway, "/admin/registry");
        let report = &registry["openapi"][server];
        let reason = report["refused"].as_str().or_else(|| {
            report["skipped"].as_array().and_then(|s| s.first()).and_then(|s| s["reason"].as_str())
        });
        let bomb = &registry["openapi"]["inlined"];
        let bomb_bounded = bomb["tools"].as_u64().is_some_and(|n| n <= 1)
            || bomb["skipped"].as_array().is_some_and(|s| !s.is_empty());
        bomb_bounded && reason.is_some_and(|r| r.contains(want))
    };
    let check = |gateway: &mut Gateway| {
        wait_for("every hostile document's reason", || {
            if let Ok(Some(status)) = gateway.proc.child.try_wait() {
                panic!("the gateway died ({status}):\n{}", gateway.proc.output());
            }
            reasons.iter().all(|(server, want)| reported(gateway, server, want))
        });
        let answer = gateway.call(&tool_named(gateway, "manga_search"), json!({"query": "naruto"}));
        assert!(answer.get("result").is_some(), "the demo server keeps answering: {answer}");
        let answer = gateway.call(&tool_named(gateway, "ping"), json!({}));
        assert_eq!(structured(&answer)["pong"], true, "{answer}");
        assert!(gateway.tool_names().iter().any(|n| n.ends_with("pong")), "aliases within the budget expand");
    };
    check(&mut gateway);
    // Every refresh reads the documents again: the gateway keeps standing after that too.
    let fetched = files.fetches_of("/wide.yaml");
    let refresh = gateway.admin_post("/admin/registry/refresh").send().unwrap();
    assert!(refresh.status().is_success(), "{}", refresh.status());
    wait_for("the refresh to read the wide document again", || files.fetches_of("/wide.yaml") > fetched);
    check(&mut gateway);
    wait_for("a log line per refused document", || gateway.proc.output().contains("tools/list failed"));
}

#[test]
fn file_refs_stay_in_the_document_directory_and_the_admin_token_is_never_listed() {
    const TOKEN: &str = "admin-token-f00dfeedc0ffee42";
    let root = Scratch::new("hostile-refs");
    std::fs::create_dir_all(root.dir().join("specs/shared")).unwrap();
    std::fs::write(root.dir().join("admin.token"), TOKEN).unwrap();
    std::fs::write(root.dir().join("secrets.yaml"), format!("Token: {{type: string, default: {TOKEN}}}\n"))
        .unwrap();
    std::os::unix::fs::symlink(root.dir().join("secrets.yaml"), root.dir().join("specs/linked.yaml"))
        .unwrap();
    std::fs::write(root.dir().join("specs/shared/common.yaml"), "Name: {type: string, maxLength: 40}\n")
        .unwrap();
    let operation = |id: &str, reference: &str| {
        format!(
            "  /{id}:\n    get:\n      operationId: {id}\n      parameters:\n        - {{name: q, in: query, schema: {{$ref: '{reference}'}}}}\n      responses: {{'200': {{description: ok}}}}\n"
        )
    };
    let mut doc = String::from("openapi: 3.0.3\ninfo: {title: refs, version: '1'}\npaths:\n");
    doc.push_str(&operation("parent", "../admin.token"));
    doc.push_str(&operation("absolute", &root.path("admin.token")));
    doc.push_str(&operation("object", "../secrets.yaml#/Token"));
    doc.push_str(&operation("symlink", "linked.yaml#/Token"));
    doc.push_str(&operation("sideways", "shared/../../specs/../admin.token"));
    doc.push_str(&operation("inside", "shared/common.yaml#/Name"));
    std::fs::write(root.dir().join("specs/doc.yaml"), doc).unwrap();
    let config = format!(
        "[admin]\ntoken_file = \"{}\"\n[servers.refs]\ntransport = \"openapi\"\nspec = \"{}\"\nbase_url = \"http://127.0.0.1:9\"\n",
        root.path("admin.token"),
        root.path("specs/doc.yaml")
    );
    let gateway = Gateway::start_as_configured(&config, &[]);
    let (_, listed) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["inside"], "only the ref inside the document's directory maps: {listed}");
    // The component is kept as written, behind a `$ref` into the tool's `$defs`.
    let schema = &listed["result"]["tools"][0]["inputSchema"];
    let q = &schema["properties"]["q"];
    let q = match q["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => &schema["$defs"][name],
        None => q,
    };
    assert_eq!(q["maxLength"], 40, "{schema}");
    assert!(!listed.to_string().contains(TOKEN), "the admin token is never listed: {listed}");
    let registry: Value =
        gateway.client.get(gateway.url("/admin/registry")).bearer_auth(TOKEN).send().unwrap().json().unwrap();
    let skipped = registry["openapi"]["refs"]["skipped"].as_array().cloned().unwrap_or_default();
    let reason = |id: &str| {
        skipped
            .iter()
            .find(|s| s["operation_id"] == id)
            .and_then(|s| s["reason"].as_str())
            .unwrap_or_else(|| panic!("{id} not skipped: {skipped:?}"))
            .to_string()
    };
    assert!(reason("parent").contains("leaves the document's directory"), "{}", reason("parent"));
    assert!(reason("absolute").contains("absolute path"), "{}", reason("absolute"));
    assert!(reason("object").contains("leaves the document's directory"), "{}", reason("object"));
    assert!(reason("symlink").contains("symbolic link"), "{}", reason("symlink"));
    assert!(reason("sideways").contains("leaves the document's directory"), "{}", reason("sideways"));
    assert!(!gateway.proc.output().contains(TOKEN), "nor logged");
}

/// A REST service behind a server that resolves dot segments: users' public keys at
/// `/users/{user}/keys.json`, and the server's own at `/keys.json` (excluded).
const KEYS_DOC: &str = "openapi: 3.0.3
info: {title: keys, version: '1'}
paths:
  /users/{user}/keys.json:
    get:
      operationId: userKeys
      parameters: [{name: user, in: path, required: true, schema: {type: string}}]
      responses: {'200': {description: ok, content: {application/json: {schema: {type: object}}}}}
  /shelves/{shelf}/keys.json:
    get:
      operationId: shelfKeys
      parameters: [{name: shelf, in: path, required: true, style: label, schema: {type: string}}]
      responses: {'200': {description: ok, content: {application/json: {schema: {type: object}}}}}
  /files/{name}:
    get:
      operationId: publicFile
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      responses: {'200': {description: ok, content: {application/json: {schema: {type: object}}}}}
  /keys.json:
    get:
      operationId: serverKeys
      responses: {'200': {description: ok, content: {application/json: {schema: {type: object}}}}}
";

#[test]
fn dot_segment_path_values_never_reach_an_excluded_operation() {
    const SERVER_KEY: &str = "server-private-key-9c1e";
    let site = Scratch::new("hostile-dots");
    std::fs::create_dir_all(site.dir().join("users/alice")).unwrap();
    std::fs::create_dir_all(site.dir().join("files")).unwrap();
    std::fs::write(site.dir().join("users/alice/keys.json"), r#"{"key": "alice-public"}"#).unwrap();
    std::fs::write(site.dir().join("files/readme.json"), r#"{"readme": true}"#).unwrap();
    std::fs::write(site.dir().join("keys.json"), format!(r#"{{"key": "{SERVER_KEY}"}}"#)).unwrap();
    let files = FileServer::start(site.dir());
    let doc = TempFile::with("keys.yaml", KEYS_DOC);
    let config = format!(
        "[servers.keys]\ntransport = \"openapi\"\nspec = \"{}\"\nbase_url = \"{}\"\nexclude = [\"operation:serverKeys\"]\n",
        doc.arg(),
        files.url("")
    );
    let gateway = Gateway::start(&config, &[]);
    assert!(!gateway.tool_names().iter().any(|n| n.ends_with("serverKeys")), "excluded");
    let alice = gateway.call(&tool_named(&gateway, "userKeys"), json!({"user": "alice"}));
    assert_eq!(structured(&alice)["key"], "alice-public", "{alice}");
    let readme = gateway.call(&tool_named(&gateway, "publicFile"), json!({"name": "readme.json"}));
    assert_eq!(structured(&readme)["readme"], true, "{readme}");

    let attempts = [
        ("userKeys", json!({"user": ".."})),
        ("userKeys", json!({"user": "x/../.."})),
        ("shelfKeys", json!({"shelf": "."})),
        ("publicFile", json!({"name": "../keys.json"})),
        ("publicFile", json!({"name": "..\\keys.json"})),
    ];
    for (tool, arguments) in attempts {
        let answer = gateway.call(&tool_named(&gateway, tool), arguments.clone());
        assert!(
            !answer.to_string().contains(SERVER_KEY),
            "{tool} {arguments}: the excluded operation answered: {answer}"
        );
        assert_eq!(
            answer["error"]["code"], -32602,
            "{tool} {arguments}: refused as invalid params: {answer}"
        );
    }
    let received = files.received();
    let resolved: Vec<&str> = received.iter().filter_map(|r| r["resolved"].as_str()).collect();
    assert_eq!(resolved, ["/users/alice/keys.json", "/files/readme.json"], "{received:#?}");
}

/// A document without `base_url` whose `servers` URL moves to another origin.
fn moving_doc(target: &str) -> String {
    format!(
        "openapi: 3.0.3\ninfo: {{title: moving, version: '1'}}\nservers: [{{url: '{target}'}}]\npaths:\n  /ping.json:\n    get:\n      operationId: ping\n      responses: {{'200': {{description: ok, content: {{application/json: {{schema: {{type: object}}}}}}}}}}\n"
    )
}

#[test]
fn static_headers_go_to_the_target_never_to_a_document_host_of_another_origin() {
    const KEY: &str = "static-key-5ab1e";
    let (target_dir, docs_dir) = (Scratch::new("headers-target"), Scratch::new("headers-docs"));
    std::fs::write(target_dir.dir().join("ping.json"), r#"{"pong": true}"#).unwrap();
    let (target, docs) = (FileServer::start(target_dir.dir()), FileServer::start(docs_dir.dir()));
    // The same document on the document host (another origin) and on the target itself.
    std::fs::write(docs_dir.dir().join("api.yaml"), moving_doc(&target.url(""))).unwrap();
    std::fs::write(target_dir.dir().join("api.yaml"), moving_doc(&target.url(""))).unwrap();
    let config = format!(
        "[servers.elsewhere]\ntransport = \"openapi\"\nspec = \"{}\"\n[servers.elsewhere.headers]\nX-Api-Key = \"{KEY}\"\n\
         [servers.beside]\ntransport = \"openapi\"\nspec = \"{}\"\nbase_url = \"{}\"\n[servers.beside.headers]\nX-Api-Key = \"{KEY}\"\n",
        docs.url("/api.yaml"),
        target.url("/api.yaml"),
        target.url("")
    );
    let gateway = Gateway::start(&config, &[]);
    for tool in gateway.tool_names() {
        assert_eq!(structured(&gateway.call(&tool, json!({})))["pong"], true, "{tool}");
    }
    let at_target = target.received();
    let pings: Vec<&Value> = at_target.iter().filter(|r| r["path"] == "/ping.json").collect();
    assert_eq!(pings.len(), 2, "{at_target:#?}");
    assert!(pings.iter().all(|p| p["headers"]["x-api-key"] == KEY), "the target gets its headers: {pings:?}");
    let fetches = docs.received();
    assert!(!fetches.is_empty());
    for fetch in fetches {
        assert!(fetch["headers"].get("x-api-key").is_none(), "the document host got the key: {fetch}");
    }
    // A document on the target's own origin (`base_url`'s) is fetched with them.
    let own: Vec<&Value> = at_target.iter().filter(|r| r["path"] == "/api.yaml").collect();
    assert!(!own.is_empty() && own.iter().all(|f| f["headers"]["x-api-key"] == KEY), "{own:?}");
}

#[test]
fn a_url_documents_target_origin_is_pinned_until_an_operator_approves_another() {
    let (first_dir, second_dir, docs_dir) =
        (Scratch::new("origin-first"), Scratch::new("origin-second"), Scratch::new("origin-docs"));
    for dir in [&first_dir, &second_dir] {
        std::fs::write(dir.dir().join("ping.json"), r#"{"pong": true}"#).unwrap();
    }
    let (first, second, docs) = (
        FileServer::start(first_dir.dir()),
        FileServer::start(second_dir.dir()),
        FileServer::start(docs_dir.dir()),
    );
    std::fs::write(docs_dir.dir().join("api.yaml"), moving_doc(&first.url(""))).unwrap();
    let config = format!("[servers.moving]\ntransport = \"openapi\"\nspec = \"{}\"\n", docs.url("/api.yaml"));
    let gateway = Gateway::start(&config, &[]);
    let ping = tool_named(&gateway, "ping");
    assert_eq!(structured(&gateway.call(&ping, json!({})))["pong"], true);
    assert_eq!(first.fetches_of("/ping.json"), 1);

    // The document now names another origin: calls stay on the approved one.
    std::fs::write(docs_dir.dir().join("api.yaml"), moving_doc(&second.url(""))).unwrap();
    let fetched = docs.fetches_of("/api.yaml");
    assert!(gateway.admin_post("/admin/registry/refresh").send().unwrap().status().is_success());
    wait_for("the refresh to read the moved document", || docs.fetches_of("/api.yaml") > fetched);
    wait_for("the new origin to wait for approval", || {
        admin_get_json(&gateway, "/admin/registry/pins").1["pending"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["kind"] == "origin" && p["server"] == "moving"))
    });
    assert_eq!(structured(&gateway.call(&ping, json!({})))["pong"], true);
    assert_eq!(first.fetches_of("/ping.json"), 2, "still the approved origin");
    assert_eq!(second.fetches_of("/ping.json"), 0, "the new origin is not called before approval");
    let (_, drift) = admin_get_json(&gateway, "/admin/registry/drift");
    assert_eq!(drift["moving"]["drifted"], true, "{drift}");
    let second_origin = second.url("");
    assert_eq!(drift["moving"]["origin_changed"]["offered"], second_origin.as_str(), "{drift}");
    let (_, registry) = admin_get_json(&gateway, "/admin/registry");
    assert_eq!(registry["openapi"]["moving"]["target_origin"], first.url("").as_str());

    // Approved: calls go to the new origin.
    let approved =
        gateway.admin_post("/admin/registry/approve").json(&json!({"origin": "moving"})).send().unwrap();
    assert!(approved.status().is_success(), "{}", approved.text().unwrap());
    assert_eq!(structured(&gateway.call(&ping, json!({})))["pong"], true);
    assert_eq!(second.fetches_of("/ping.json"), 1, "the approved origin is called");
    assert_eq!(first.fetches_of("/ping.json"), 2);
    wait_for("the origin change logged", || gateway.proc.output().contains("names another target origin"));
}

#[test]
fn with_a_pin_file_the_approved_origin_survives_a_restart() {
    let (first_dir, second_dir, docs_dir, state) = (
        Scratch::new("restart-first"),
        Scratch::new("restart-second"),
        Scratch::new("restart-docs"),
        Scratch::new("restart-pins"),
    );
    for dir in [&first_dir, &second_dir] {
        std::fs::write(dir.dir().join("ping.json"), r#"{"pong": true}"#).unwrap();
    }
    let (first, second, docs) = (
        FileServer::start(first_dir.dir()),
        FileServer::start(second_dir.dir()),
        FileServer::start(docs_dir.dir()),
    );
    std::fs::write(docs_dir.dir().join("api.yaml"), moving_doc(&first.url(""))).unwrap();
    let config = format!(
        "[catalogue]\npin_tool_definitions = true\npin_file = \"{}\"\n[servers.moving]\ntransport = \"openapi\"\nspec = \"{}\"\n",
        state.path("pins.json"),
        docs.url("/api.yaml")
    );
    {
        let gateway = Gateway::start(&config, &[]);
        assert_eq!(structured(&gateway.call(&tool_named(&gateway, "ping"), json!({})))["pong"], true);
    }
    let pins: Value =
        serde_json::from_str(&std::fs::read_to_string(state.path("pins.json")).unwrap()).unwrap();
    let first_origin = first.url("");
    assert!(
        pins["pins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["server"] == "moving" && p["origin"] == first_origin.as_str()),
        "{pins}"
    );
    // Moved while the gateway was down: the restarted gateway does not trust it anew.
    std::fs::write(docs_dir.dir().join("api.yaml"), moving_doc(&second.url(""))).unwrap();
    let gateway = Gateway::start(&config, &[]);
    wait_for("the moved origin to wait for approval", || {
        admin_get_json(&gateway, "/admin/registry/pins").1["pending"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["kind"] == "origin" && p["server"] == "moving"))
    });
    assert_eq!(structured(&gateway.call(&tool_named(&gateway, "ping"), json!({})))["pong"], true);
    assert_eq!((first.fetches_of("/ping.json"), second.fetches_of("/ping.json")), (2, 0));
}
