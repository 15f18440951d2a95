//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) through the gateway, with
//! real peers: FastMCP 4.x skills servers (`tests/peers/servers/skills_server.py`: a
//! `SkillsDirectoryProvider` over a folder of skills, and its `SkillsExtension`) read by
//! FastMCP's own client with `SkillsClientExtension` (`tests/peers/clients/skills_client.py`:
//! `list_skills_mcp` page by page, `get_skill`, `read_resource`, and `read_skill`, which reads
//! every file and checks it against the manifest's digest and size), in the 2026-07-28 era
//! (FastMCP serves the skills methods in no other). Checked: the same entries and digests
//! through the gateway as direct, two servers' skills merged and paged, a Cedar `forbid` on a
//! skill, an endpoint's selection, an after-hook on a `SKILL.md`, the extension declared only
//! where a server behind the endpoint carries it, and a server over stdio
//! (session era: carried as resources).

use std::{path::Path, process::Command};

use serde_json::{Value, json};

use crate::common::*;

fn skills_python() -> std::path::PathBuf {
    require(&peers_dir().join(".venv-skills/bin/python"), "tests/peers/.venv-skills (FastMCP)")
}

/// Writes the skill `path` (its last segment its name) under `root`, with `files` beside it.
fn write_skill(root: &Path, path: &str, body: &str, files: &[(&str, &str)]) {
    let dir = root.join(path);
    std::fs::create_dir_all(&dir).unwrap();
    let name = path.rsplit('/').next().unwrap();
    let skill = format!("---\nname: {name}\ndescription: The {name} skill\n---\n\n{body}\n");
    std::fs::write(dir.join("SKILL.md"), skill).unwrap();
    for (file, text) in files {
        let at = dir.join(file);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }
}

/// A FastMCP skills server over streamable HTTP serving the skills under `root`.
fn skills_server(root: &Path, page_size: Option<usize>) -> (Proc, String) {
    let port = free_port();
    let mut command = Command::new(skills_python());
    command
        .arg(peers_dir().join("servers/skills_server.py"))
        .arg(root)
        .args(["http", &port.to_string()])
        .env("PYTHONUNBUFFERED", "1");
    if let Some(size) = page_size {
        command.env("SKILLS_PAGE_SIZE", size.to_string());
    }
    let proc = Proc::spawn_until("fastmcp-skills", command, "READY");
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// FastMCP's client at `url` doing `actions` (see the script); what it printed.
fn client(url: &str, actions: &[&str]) -> Value {
    let output = Command::new(skills_python())
        .arg(peers_dir().join("clients/skills_client.py"))
        .arg(url)
        .args(actions)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "skills_client.py {actions:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn action<'a>(seen: &'a Value, action: &str) -> &'a Value {
    &seen["actions"][action]
}

fn listed(seen: &Value) -> Vec<Value> {
    action(seen, "list")["skills"].as_array().cloned().unwrap_or_else(|| panic!("no listing: {seen}"))
}

fn uris(skills: &[Value]) -> Vec<String> {
    skills.iter().map(|s| s["uri"].as_str().unwrap().to_string()).collect()
}

fn declares_skills(seen: &Value) -> bool {
    seen["extensions"].get("io.modelcontextprotocol/skills").is_some()
}

/// A JSON-RPC request to the gateway at `path`, in the 2026-07-28 envelope when `modern`.
fn rpc_at(gw: &Gateway, path: &str, method: &str, mut params: Value, modern: bool) -> Value {
    if modern {
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        params["_meta"]["io.modelcontextprotocol/clientInfo"] = json!({"name": "t", "version": "1"});
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = gw
        .client
        .post(gw.url(path))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .expect("gateway answers");
    let text = response.text().unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("non-JSON answer ({e}): {text}"))
}

#[test]
fn a_skills_server_reads_the_same_through_the_gateway_as_direct() {
    let root = Scratch::new("skills-one");
    write_skill(root.dir(), "git-workflow", "Branch from main.", &[("references/GUIDE.md", "guide\n")]);
    write_skill(
        root.dir(),
        "acme/billing/refunds",
        "Refund per policy.",
        &[("examples/email.md", "Dear…\n")],
    );
    let (_server, url) = skills_server(root.dir(), None);
    let gw = Gateway::start(&http_server("skills", &url), &[]);

    let actions = [
        "list",
        "get:skill://git-workflow/SKILL.md",
        "get:skill://acme/billing/refunds/SKILL.md",
        "read:skill://acme/billing/refunds/examples/email.md",
        "verify:skill://git-workflow/SKILL.md",
        "verify:skill://acme/billing/refunds/SKILL.md",
        "get:skill://nowhere/SKILL.md",
    ];
    let direct = client(&url, &actions);
    let through = client(&gw.url("/mcp"), &actions);
    assert_eq!(through["version"], "2026-07-28", "{through}");
    assert!(declares_skills(&direct) && declares_skills(&through), "{through}");
    // The same entries, frontmatter and digests; files read and verified against them.
    assert_eq!(listed(&through).len(), 2, "{through}");
    for name in &actions[..6] {
        assert_eq!(action(&through, name), action(&direct, name), "{name}");
    }
    assert_eq!(
        action(&through, "verify:skill://acme/billing/refunds/SKILL.md")["verified"],
        json!(["SKILL.md", "examples/email.md"])
    );
    // An unknown skill is -32602, as the server itself answers.
    assert_eq!(action(&through, "get:skill://nowhere/SKILL.md")["error"]["code"], -32602, "{through}");
    assert_eq!(action(&direct, "get:skill://nowhere/SKILL.md")["error"]["code"], -32602, "{direct}");
}

#[test]
fn two_servers_skills_are_merged_and_paged_and_a_shared_uri_is_served_by_neither() {
    let (a_root, b_root) = (Scratch::new("skills-a"), Scratch::new("skills-b"));
    for i in 0..60 {
        write_skill(a_root.dir(), &format!("alpha-{i:02}"), &format!("alpha body {i}"), &[]);
        write_skill(b_root.dir(), &format!("beta-{i:02}"), &format!("beta body {i}"), &[("notes.md", "b\n")]);
    }
    write_skill(a_root.dir(), "shared", "a's shared", &[]);
    write_skill(b_root.dir(), "shared", "b's shared", &[]);
    // Each server answers in pages of 25: the gateway reads them all.
    let (_a, a_url) = skills_server(a_root.dir(), Some(25));
    let (_b, b_url) = skills_server(b_root.dir(), Some(25));
    let gw = Gateway::start(&format!("{}{}", http_server("a", &a_url), http_server("b", &b_url)), &[]);

    let through =
        client(&gw.url("/mcp"), &["list", "get:skill://shared/SKILL.md", "read:skill://beta-07/notes.md"]);
    let skills = listed(&through);
    // 120 skills in the gateway's pages of 100, sorted by URI, each as its server lists it.
    assert_eq!(action(&through, "list")["pages"], 2, "{through}");
    let mut expected: Vec<Value> = listed(&client(&a_url, &["list"]))
        .into_iter()
        .chain(listed(&client(&b_url, &["list"])))
        .filter(|s| s["uri"] != "skill://shared/SKILL.md")
        .collect();
    expected.sort_by(|x, y| x["uri"].as_str().cmp(&y["uri"].as_str()));
    assert_eq!(skills.len(), 120);
    assert_eq!(skills, expected);
    // A skill URI is its server's own (SEP-2640): two servers' same URI is served by neither.
    assert_eq!(action(&through, "get:skill://shared/SKILL.md")["error"]["code"], -32602, "{through}");
    // A file of b's skill is read from b.
    assert_eq!(action(&through, "read:skill://beta-07/notes.md")["text"], "b\n", "{through}");
    // Operators see the skills per server, and the collision.
    let (_, surface) = admin_get_json(&gw, "/admin/registry/surface");
    assert_eq!(surface["totals"]["skills"], 120, "{surface}");
    let collision = json!({"kind": "skill", "name": "skill://shared/SKILL.md", "servers": ["a", "b"]});
    assert!(surface["collisions"].as_array().unwrap().contains(&collision), "{surface}");
    let b = surface["servers"].as_array().unwrap().iter().find(|s| s["server"] == "b").unwrap();
    assert_eq!((b["skills"].clone(), b["skills_extension"].clone()), (json!(60), json!(true)), "{b}");
}

#[test]
fn a_cedar_forbid_on_a_skill_hides_it_and_refuses_it_and_its_files() {
    let root = Scratch::new("skills-policy");
    write_skill(root.dir(), "git-workflow", "Branch from main.", &[("references/GUIDE.md", "guide\n")]);
    write_skill(root.dir(), "deploy", "Deploy with care.", &[("scripts/run.sh", "echo\n")]);
    // A SKILL.md nested in the forbidden skill's directory: FastMCP serves it as one of the
    // skill's files, and the decision on the skill covers it.
    write_skill(root.dir(), "deploy/rollback", "Roll back.", &[("steps.md", "1. undo\n")]);
    let (_server, url) = skills_server(root.dir(), None);
    let policy = TempFile::with(
        "skills.cedar",
        r#"@id("everything")
permit (principal, action, resource);

@id("no-deploy")
forbid (principal, action == Action::"read", resource == Resource::"skill://deploy/SKILL.md");
"#,
    );
    let config = format!("{}[policy]\nfile = {:?}\n", http_server("skills", &url), policy.arg());
    let gw = Gateway::start(&config, &[]);

    let seen = client(
        &gw.url("/mcp"),
        &[
            "list",
            "get:skill://deploy/SKILL.md",
            "read:skill://deploy/SKILL.md",
            "read:skill://deploy/scripts/run.sh",
            "read:skill://deploy/rollback/SKILL.md",
            "read:skill://deploy/rollback/steps.md",
            "read:skill://git-workflow/references/GUIDE.md",
        ],
    );
    assert_eq!(uris(&listed(&seen)), ["skill://git-workflow/SKILL.md"], "{seen}");
    for refused in [
        "get:skill://deploy/SKILL.md",
        "read:skill://deploy/SKILL.md",
        "read:skill://deploy/scripts/run.sh",
        "read:skill://deploy/rollback/SKILL.md",
        "read:skill://deploy/rollback/steps.md",
    ] {
        assert_eq!(action(&seen, refused)["error"]["code"], -32008, "{refused}: {seen}");
    }
    assert_eq!(action(&seen, "read:skill://git-workflow/references/GUIDE.md")["text"], "guide\n");
}

#[test]
fn an_endpoint_lists_only_the_skills_of_the_servers_it_selects() {
    let (a_root, b_root) = (Scratch::new("skills-ep-a"), Scratch::new("skills-ep-b"));
    write_skill(a_root.dir(), "alpha", "a", &[]);
    write_skill(b_root.dir(), "beta", "b", &[("notes.md", "b\n")]);
    let (_a, a_url) = skills_server(a_root.dir(), None);
    let (_b, b_url) = skills_server(b_root.dir(), None);
    // A server without skills: the gateway's demo store.
    let demo = Demo::http();
    let config = format!(
        "{}{}{}[endpoints.alpha.select]\nservers = [\"a\"]\n\
         [endpoints.no-beta.select]\nexclude_resources = [\"skill://beta/\"]\n\
         [endpoints.tools.select]\nservers = [\"store\"]\n",
        http_server("a", &a_url),
        http_server("b", &b_url),
        http_server("store", &demo.url()),
    );
    let gw = Gateway::start(&config, &[]);

    let everything = client(&gw.url("/mcp"), &["list"]);
    assert_eq!(uris(&listed(&everything)), ["skill://alpha/SKILL.md", "skill://beta/SKILL.md"]);
    for endpoint in ["/mcp/alpha", "/mcp/no-beta"] {
        let seen =
            client(&gw.url(endpoint), &["list", "get:skill://beta/SKILL.md", "read:skill://beta/notes.md"]);
        assert_eq!(uris(&listed(&seen)), ["skill://alpha/SKILL.md"], "{endpoint}: {seen}");
        assert_eq!(action(&seen, "get:skill://beta/SKILL.md")["error"]["code"], -32602, "{endpoint}: {seen}");
        assert!(action(&seen, "read:skill://beta/notes.md")["error"].is_object(), "{endpoint}: {seen}");
    }
    // An endpoint selecting no server that carries skills is not declared the extension, and
    // the methods are unknown there.
    let none = client(&gw.url("/mcp/tools"), &[]);
    assert!(!declares_skills(&none), "{none}");
    let answer = rpc_at(&gw, "/mcp/tools", "skills/list", json!({}), true);
    expect_error(&answer, -32601, "method_not_found");
}

#[test]
fn an_after_hook_redacts_a_skill_md_and_the_digest_stays_the_servers() {
    let root = Scratch::new("skills-hook");
    write_skill(root.dir(), "onboarding", "Use the token secret-token-4711 to log in.", &[]);
    let (_server, url) = skills_server(root.dir(), None);
    let config = format!(
        "{}[[hooks]]\nname = \"skill-secrets\"\nphase = \"after\"\nmatch_tools = [\"skill://*\"]\n\
         builtin = \"redact\"\npatterns = [\"secret-token-[0-9]+\"]\n",
        http_server("skills", &url)
    );
    let gw = Gateway::start(&config, &[]);
    let actions = [
        "get:skill://onboarding/SKILL.md",
        "read:skill://onboarding/SKILL.md",
        "verify:skill://onboarding/SKILL.md",
    ];
    let direct = client(&url, &actions);
    let through = client(&gw.url("/mcp"), &actions);
    let text = action(&through, "read:skill://onboarding/SKILL.md")["text"].as_str().unwrap().to_string();
    assert!(text.contains("[redacted]") && !text.contains("secret-token-4711"), "{text}");
    // The entry (its digest) is passed as the server gave it: the gateway does not forge a
    // digest for the content it changed, so FastMCP's verification refuses the edited file.
    assert_eq!(action(&through, actions[0]), action(&direct, actions[0]));
    let verify = &action(&through, "verify:skill://onboarding/SKILL.md")["error"];
    assert!(
        verify["message"].as_str().is_some_and(|m| m.contains("promised") || m.contains("digest")),
        "{through}"
    );
    assert!(action(&direct, "verify:skill://onboarding/SKILL.md")["verified"].is_array(), "{direct}");
}

#[test]
fn the_extension_is_declared_to_every_caller_a_skills_server_serves() {
    // One rule for every carried extension (protocol/extensions.rs): the gateway states what it
    // offers, as a server does, whether or not the caller declared the extension itself.
    let root = Scratch::new("skills-declare");
    write_skill(root.dir(), "alpha", "a", &[]);
    let (_server, url) = skills_server(root.dir(), None);
    let gw = Gateway::start(&http_server("skills", &url), &[]);

    // FastMCP's client with and without SkillsClientExtension (2026-07-28: server/discover).
    assert!(declares_skills(&client(&gw.url("/mcp"), &["--no-extension"])));
    assert!(declares_skills(&client(&gw.url("/mcp"), &[])));

    // Session era: `initialize`'s capabilities.extensions.
    let init = |capabilities: Value| {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}});
        rpc_at(&gw, "/mcp", "initialize", params, false)["result"]["capabilities"].clone()
    };
    let declared = init(json!({"extensions": {"io.modelcontextprotocol/skills": {}}}));
    assert_eq!(declared["extensions"]["io.modelcontextprotocol/skills"], json!({}), "{declared}");
    let undeclared = init(json!({}));
    assert_eq!(undeclared["extensions"]["io.modelcontextprotocol/skills"], json!({}), "{undeclared}");

    // A caller that sends the methods without having declared the extension is answered: the
    // request is its own opt-in (as FastMCP's server answers it).
    let listing = rpc_at(&gw, "/mcp", "skills/list", json!({}), true);
    assert_eq!(listing["result"]["skills"][0]["uri"], "skill://alpha/SKILL.md", "{listing}");
    assert_eq!(listing["result"]["resultType"], "complete");
    assert!(listing["result"]["ttlMs"].is_u64() && listing["result"]["cacheScope"] == "public", "{listing}");
    let session = rpc_at(&gw, "/mcp", "skills/get", json!({"uri": "skill://alpha/SKILL.md"}), false);
    assert_eq!(session["result"]["skill"]["frontmatter"]["name"], "alpha", "{session}");
}

#[test]
fn a_fastmcp_server_over_stdio_is_carried_as_resources() {
    let root = Scratch::new("skills-stdio");
    write_skill(root.dir(), "git-workflow", "Branch from main.", &[("references/GUIDE.md", "guide\n")]);
    let config = format!(
        "[servers.skills]\ntransport = \"stdio\"\ncommand = {:?}\nargs = {}\n",
        skills_python().display().to_string(),
        json!([
            peers_dir().join("servers/skills_server.py").display().to_string(),
            root.dir().display().to_string(),
            "stdio"
        ]),
    );
    let gw = Gateway::start(&config, &[]);
    // Over stdio the gateway speaks the session era, where FastMCP neither declares the
    // extension nor serves its methods: the skills are its resources, read as such.
    let seen =
        client(&gw.url("/mcp"), &["--no-extension", "resources", "verify:skill://git-workflow/SKILL.md"]);
    assert!(!declares_skills(&seen), "{seen}");
    assert_eq!(action(&seen, "resources")["uris"], json!(["skill://git-workflow/SKILL.md"]), "{seen}");
    assert_eq!(
        action(&seen, "verify:skill://git-workflow/SKILL.md")["verified"],
        json!(["SKILL.md", "references/GUIDE.md"]),
        "{seen}"
    );
    let answer = rpc_at(&gw, "/mcp", "skills/list", json!({}), true);
    expect_error(&answer, -32601, "method_not_found");
}

/// A session-era caller's GET stream of list changes; every `data:` message collected.
fn change_stream(gw: &Gateway) -> std::sync::Arc<std::sync::Mutex<Vec<Value>>> {
    use std::io::{BufRead, BufReader};
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, headers, text) = gw.post_raw(init.to_string(), &[]);
    assert_eq!(status, 200, "{text}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_string();
    let client = reqwest::blocking::Client::builder().timeout(None::<std::time::Duration>).build().unwrap();
    let response = client
        .get(gw.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(response).lines().map_while(Result::ok) {
            if let Some(data) = line.strip_prefix("data: ") {
                sink.lock().unwrap().push(serde_json::from_str(data).unwrap_or(Value::Null));
            }
        }
    });
    events
}

#[test]
fn a_changed_skill_is_told_as_a_resources_list_change() {
    let root = Scratch::new("skills-change");
    write_skill(root.dir(), "git-workflow", "Branch from main.", &[("references/GUIDE.md", "guide\n")]);
    let port = free_port();
    let mut command = Command::new(skills_python());
    command
        .arg(peers_dir().join("servers/skills_server.py"))
        .arg(root.dir())
        .args(["http", &port.to_string()])
        .env("PYTHONUNBUFFERED", "1")
        .env("SKILLS_RELOAD", "1");
    let _server = Proc::spawn_until("fastmcp-skills", command, "READY");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let gw = Gateway::start(&format!("refresh_interval_secs = 1\n{}", http_server("skills", &url)), &[]);
    let before = listed(&client(&gw.url("/mcp"), &["list"]));
    let resources_before = rpc_at(&gw, "/mcp", "resources/list", json!({}), false)["result"].clone();
    let events = change_stream(&gw);
    wait_for("the change stream", || metric(&gw.metrics(), "mcp_gateway_listen_streams", &[]) >= 1.0);

    // One file of the skill changes: its digest in the skill's entry changes, and nothing
    // else the caller lists does. SEP-2640 names no list change of its own: the caller is told
    // its resources changed, and lists the skills again.
    std::fs::write(root.dir().join("git-workflow/references/GUIDE.md"), "guide, second edition\n").unwrap();
    wait_for("notifications/resources/list_changed", || {
        events.lock().unwrap().iter().any(|e| e["method"] == "notifications/resources/list_changed")
    });
    let after = listed(&client(&gw.url("/mcp"), &["list"]));
    assert_ne!(before, after);
    assert_eq!(after, listed(&client(&url, &["list"])), "the server's new digests");
    assert_eq!(
        rpc_at(&gw, "/mcp", "resources/list", json!({}), false)["result"],
        resources_before,
        "the resources list itself did not change"
    );
}
