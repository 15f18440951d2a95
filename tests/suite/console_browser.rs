//! The operators' console (`GET /admin/console`) in a real browser: Debian's headless Chromium,
//! driven by `tests/peers/clients/console_browser.mjs` (playwright-core, axe-core) against the
//! real gateway with a demo server, a server on a dead port (a breaker and a last error to
//! show), definition pinning with a changed definition waiting for approval, and a Cedar
//! policy, and two instances of the conformance fixture server (`a` and `b`: resources, templates
//! and prompts, each claimed by both; `a` owns the `test://static-` prefix) for the Catalogue
//! page's resources and prompts. The driver reports what the browser saw; this test judges it and checks the
//! gateway's own view (the admin API) after each action. Screenshots of every page go to
//! `target/console-screenshots/`; with `UPDATE_SCREENSHOT=1` the Servers page also to
//! `docs/console.png` (the README's picture).

use std::{path::Path, process::Command};

use crate::common::*;
use serde_json::{Value, json};

/// Runs the browser driver against `gateway`; its JSON report.
fn drive(gateway: &Gateway, shots: &Path, docs_shot: &Path) -> Value {
    require(Path::new("/usr/bin/chromium"), "Debian's chromium (apt-get install chromium)");
    require(&peers_dir().join("node_modules/playwright-core/package.json"), "playwright-core (npm)");
    require(&peers_dir().join("node_modules/axe-core/axe.min.js"), "axe-core (npm)");
    let output = Command::new(node22())
        .arg(peers_dir().join("clients/console_browser.mjs"))
        .args(["--url", &gateway.url(""), "--token", ADMIN_TOKEN])
        .args(["--server", "shop", "--dead", "dead", "--pinned-server", "words", "--pinned-tool", "lookup"])
        .args(["--tool", "manga_search", "--surface-server", "b"])
        .args(["--endpoint", "browse", "--outside-tool", "ping_dead"])
        .arg("--shots")
        .arg(shots)
        .arg("--docs-shot")
        .arg(docs_shot)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .output()
        .expect("node runs the console driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the driver printed no report\nstdout: {stdout}\nstderr: {stderr}"));
    assert!(
        output.status.success() && report.get("fatal").is_none(),
        "the driver failed: {report}\nstderr: {stderr}\ngateway:\n{}",
        gateway.proc.output()
    );
    report
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The entries of a driver log (`console_errors`, `http_errors`…) outside the `phase` given.
fn outside<'a>(log: &'a Value, kind: &str, phase: &str) -> Vec<&'a Value> {
    items(&log[kind]).iter().filter(|e| e["phase"] != phase).collect()
}

#[test]
fn the_console_shows_every_page_and_runs_the_operators_flow_in_a_real_browser() {
    let demo = Demo::http();
    let (_hostile, words) = hostile_server(&[]);
    let scratch = Scratch::new("console");
    let pin_file = scratch.path("pins.json");
    let policy = TempFile::with(
        "console.cedar",
        "@id(\"read-only\")\npermit (principal, action, resource) when { resource.readOnly };\n\
         @id(\"cart\")\npermit (principal, action, resource) when { resource.name == \"add_to_cart\" };\n",
    );
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let (a_port, b_port) = (free_port(), free_port());
    let _fixtures = (conformance_fixtures(a_port, &[]), conformance_fixtures(b_port, &[]));
    let fixtures = format!(
        "{}resource_prefixes = [\"test://static-\"]\n{}",
        http_server("a", &format!("http://127.0.0.1:{a_port}/mcp")),
        http_server("b", &format!("http://127.0.0.1:{b_port}/mcp")),
    );
    let config = format!(
        "refresh_interval_secs = 3600\n[catalogue]\npin_tool_definitions = true\npin_file = {pin_file:?}\n\
         [policy]\nfile = {policy:?}\n{demo}{dead}discover = false\n[[servers.dead.tools]]\nname = \"ping_dead\"\n\
         inputSchema = {{ type = \"object\" }}\nannotations = {{ readOnlyHint = true }}\n\
         [servers.words]\ntransport = \"http\"\nurl = \"http://{words}/rugpull\"\n\
         [tools.manga_recommendations]\nrename = \"recommend_manga\"\n\
         [tools.price_lookup]\nfixed_arguments = {{ include_history = false }}\n\
         [tools.checkout]\nhide = true\n\
         [endpoints.browse.select]\nservers = [\"shop\"]\nread_only = true\n\
         [[hooks]]\nname = \"no-emails\"\nphase = \"after\"\nmatch_servers = [\"shop\"]\nbuiltin = \"redact\"\ndetect = [\"email\"]\n{fixtures}",
        policy = policy.arg(),
        demo = http_server("shop", &demo.url()),
        dead = http_server("dead", &dead),
    );
    let gateway = Gateway::start(&config, &[]);

    // A pinned definition changes on its server: the change waits for approval.
    gateway.admin_post("/admin/registry/refresh").send().unwrap();
    wait_for("the changed definition to be pending", || {
        metric(&gateway.metrics(), "mcp_gateway_tool_definitions_pending", &[]) == 1.0
    });
    // Calls for the Recent calls page and the figures: one served, one to the dead port.
    let served = gateway.call("manga_search", json!({"query": "naruto"}));
    assert!(served.get("result").is_some(), "{served}");
    let failed = gateway.call("ping_dead", json!({}));
    assert!(failed.get("error").is_some(), "{failed}");

    let shots = repo_root().join("target/console-screenshots");
    // The README's picture is rewritten only when asked (`UPDATE_SCREENSHOT=1`), so a test run
    // leaves the checkout as it was; otherwise it is one more artefact.
    let docs_shot = match std::env::var_os("UPDATE_SCREENSHOT") {
        Some(_) => repo_root().join("docs/console.png"),
        None => shots.join("console.png"),
    };
    let report = drive(&gateway, &shots, &docs_shot);

    // The shell is served under the strict CSP; the token is in sessionStorage, never a cookie.
    assert_eq!(report["shell"]["status"], 200, "{}", report["shell"]);
    let csp = report["shell"]["csp"].as_str().unwrap_or_default();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(report["token_stored_in"]["cookies"], "", "{}", report["token_stored_in"]);
    assert_eq!(report["token_stored_in"]["local"], json!([]), "{}", report["token_stored_in"]);
    assert_eq!(items(&report["token_stored_in"]["session"]).len(), 1, "{}", report["token_stored_in"]);

    // Every page loads, shows its data, and passes axe-core with no serious or critical violation.
    for page in ["servers", "catalogue", "approvals", "calls", "playground"] {
        let info = &report["pages"][page];
        assert_eq!(info["visible"], true, "{page}: {info}");
        assert_eq!(info["token_form_visible"], false, "{page}: {info}");
        assert_eq!(info["axe"], json!([]), "{page}: accessibility violations: {}", info["axe"]);
        assert!(shots.join(format!("{page}.png")).is_file(), "{page}: no screenshot");
    }
    let servers = &report["pages"]["servers"];
    let row = |name: &str| {
        items(&servers["rows"])
            .iter()
            .filter_map(Value::as_str)
            .find(|r| r.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name}: {servers}"))
            .to_string()
    };
    assert!(row("shop").contains("closed"), "{}", row("shop"));
    // The endpoints (what each serves) and the hooks (their decisions so far).
    let endpoints: Vec<&str> = items(&servers["endpoints"]).iter().filter_map(Value::as_str).collect();
    assert!(
        endpoints.iter().any(|r| r.starts_with("/mcp/browse")
            && r.contains("servers: shop")
            && r.contains("manga_search")),
        "{servers}"
    );
    assert!(endpoints.iter().all(|r| !r.contains("ping_dead")), "browse serves only shop's tools: {servers}");
    let hooks: Vec<&str> = items(&servers["hooks"]).iter().filter_map(Value::as_str).collect();
    assert!(hooks.iter().any(|r| r.starts_with("no-emails") && r.contains("allow 1")), "{servers}");
    // Each server's estimated memory (GET /admin/registry/memory) is in its row.
    assert!(row("shop").contains(" MiB"), "the memory column: {}", row("shop"));
    let (_, overview) = admin_get_json(&gateway, "/admin/overview");
    let dead_overview =
        items(&overview["servers"]).iter().find(|s| s["name"] == "dead").cloned().unwrap_or_default();
    let category = dead_overview["last_error"]["category"].as_str();
    let category = category.unwrap_or_else(|| panic!("the dead server has no last error: {overview}"));
    assert!(row("dead").contains(category), "the last error ({category}) is not shown: {}", row("dead"));
    let catalogue = &report["pages"]["catalogue"];
    for tool in ["manga_search", "ping_dead", "lookup"] {
        assert!(
            items(&catalogue["rows"]).iter().any(|r| r.as_str().is_some_and(|r| r.starts_with(tool))),
            "{catalogue}"
        );
    }
    // Catalogue control shown: a rename, a fixed argument (its name only).
    let catalogue_row = |tool: &str| {
        items(&catalogue["rows"])
            .iter()
            .filter_map(Value::as_str)
            .find(|r| r.starts_with(tool))
            .unwrap_or_else(|| panic!("no row for {tool}: {catalogue}"))
            .to_string()
    };
    assert!(catalogue_row("recommend_manga").contains("renamed from manga_recommendations"), "{catalogue}");
    assert!(catalogue_row("price_lookup").contains("fixed: include_history"), "{catalogue}");
    assert!(catalogue_row("manga_search").contains("readOnly"), "annotations shown: {catalogue}");
    assert!(catalogue["hidden"].as_str().is_some_and(|h| h.contains("checkout")), "{catalogue}");
    assert!(!items(&catalogue["rows"]).iter().any(|r| r.as_str().is_some_and(|r| r.starts_with("checkout"))));
    // Resources and prompts next to tools: counts per server (the report's own), what both
    // fixture servers claim, and the items.
    let surface = &catalogue["surface"];
    let (_, report_of_surface) = admin_get_json(&gateway, "/admin/registry/surface");
    for server in ["a", "b"] {
        let counts = items(&report_of_surface["servers"]).iter().find(|s| s["server"] == server).cloned();
        let counts = counts.unwrap_or_else(|| panic!("{server} not in the report: {report_of_surface}"));
        let shown = format!(
            "{server} {} {} {}",
            counts["resources"], counts["resource_templates"], counts["prompts"]
        );
        assert!(
            items(&surface["servers"]).iter().any(|r| r.as_str().is_some_and(|r| r.starts_with(&shown))),
            "{shown}: {surface}"
        );
    }
    assert!(report_of_surface["totals"]["prompts"].as_u64().is_some_and(|n| n > 0), "{report_of_surface}");
    let claimed = |text: &str| {
        items(&surface["collisions"])
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains(text) && r.contains("a, b")))
    };
    assert!(claimed("test://watched-resource"), "a URI both list: {surface}");
    assert!(claimed("test_prompt_with_image"), "a prompt both offer: {surface}");
    let listed = |list: &str, text: &str| {
        items(&surface[list]).iter().any(|r| r.as_str().is_some_and(|r| r.contains(text)))
    };
    assert!(listed("prompts", "b__test_prompt_with_image"), "{surface}");
    assert!(listed("resources", "test://static-text"), "served by the prefix's owner: {surface}");
    assert!(!listed("resources", "test://watched-resource"), "a claimed URI is not served: {surface}");
    assert!(listed("resources", "test://static-binary"), "{surface}");
    assert!(claimed("test://template/{id}/data"), "a template both list: {surface}");
    assert!(!listed("templates", "test://template/"), "a claimed template is not served: {surface}");
    let found = items(&catalogue["search"]["rows"]);
    assert!(
        !found.is_empty() && found.iter().all(|r| r.as_str().is_some_and(|r| r.contains("manga_search"))),
        "{catalogue}"
    );
    let pending = &report["pages"]["approvals"]["pending"][0];
    assert_eq!(
        (pending["server"].as_str(), pending["tool"].as_str()),
        (Some("words"), Some("lookup")),
        "{pending}"
    );
    assert!(!items(&pending["inserted"]).is_empty(), "no difference shown: {pending}");
    let calls = &report["pages"]["calls"]["rows"];
    assert!(items(calls).iter().any(|r| r.as_str().is_some_and(|r| r.contains("manga_search"))), "{calls}");
    assert!(items(calls).iter().any(|r| r.as_str().is_some_and(|r| r.contains("ping_dead"))), "{calls}");
    assert!(items(&report["pages"]["playground"]["tools"]).contains(&json!("manga_search")));
    assert!(docs_shot.is_file(), "no {}", docs_shot.display());

    // With the token: no console error, page error or failed request; the only HTTP error is
    // the playground's refused call (its console line is the browser's report of that answer).
    let with_token = &report["with_token"];
    assert_eq!(with_token["page_errors"], json!([]), "{with_token}");
    assert_eq!(with_token["failed_requests"], json!([]), "{with_token}");
    assert_eq!(
        outside(with_token, "console_errors", "flow:playground"),
        Vec::<&Value>::new(),
        "{with_token}"
    );
    for error in items(&with_token["http_errors"]) {
        assert_eq!(
            (error["phase"].as_str(), error["url"].as_str()),
            (Some("flow:playground"), Some("/admin/playground")),
            "{error}"
        );
    }

    // The flow: the demo server's breaker forced open, then closed, seen in /admin/breakers too.
    let flow = &report["flow"];
    assert_eq!(flow["breaker_before"]["api"]["state"], "closed", "{flow}");
    assert_eq!(flow["after_open"]["ui"], "open", "{flow}");
    assert_eq!(flow["after_open"]["api"]["state"], "open", "{flow}");
    assert_eq!(flow["after_open"]["api"]["forced_open"], true, "{flow}");
    // A server that is down says why, and since when.
    assert_eq!(flow["after_open"]["api"]["reason"], "forced open by an operator", "{flow}");
    let cell = flow["after_open"]["cell"].as_str().unwrap_or_default();
    assert!(cell.contains("forced open by an operator") && cell.contains("since"), "{flow}");
    assert_eq!(flow["after_close"]["ui"], "closed", "{flow}");
    assert_eq!(flow["after_close"]["api"]["state"], "closed", "{flow}");
    assert_eq!(gateway.breaker("shop")["state"], "closed");

    // The configuration reloaded from the Servers page: the same file, so nothing applied; the
    // page says so and shows the report the admin API keeps.
    assert_eq!(flow["config_before"]["last"], Value::Null, "{flow}");
    assert_eq!(flow["after_reload"]["api"]["last"]["outcome"], "unchanged", "{flow}");
    assert_eq!(flow["after_reload"]["api"]["last"]["trigger"], "admin", "{flow}");
    let status = flow["after_reload"]["status"].as_str().unwrap_or_default();
    assert!(status.contains("nothing changed"), "{flow}");
    let config = flow["after_reload"]["config"].as_str().unwrap_or_default();
    assert!(config.contains("generation 1") && config.contains("last reload unchanged (admin"), "{flow}");

    // A pinned change approved: gone from /admin/registry/pins, and now served.
    assert_eq!(flow["pins_before"]["pending"][0]["tool"], "lookup", "{flow}");
    assert_eq!(flow["after_approve"]["api"]["pending"], json!([]), "{flow}");
    let (_, pins) = admin_get_json(&gateway, "/admin/registry/pins");
    assert_eq!(pins["pending"], json!([]), "{pins}");
    let pinned: Value = serde_json::from_str(&std::fs::read_to_string(&pin_file).unwrap()).unwrap();
    let approved = items(&pinned["pins"]).iter().find(|p| p["tool"] == "lookup").cloned().unwrap_or_default();
    assert_eq!(
        approved["hash"],
        pending_hash(&flow["pins_before"]),
        "the pin file holds the approved definition: {pinned}"
    );

    // The playground: a form from the inputSchema (required, defaults, enums), a validation
    // error shown with its violation, then a success shown.
    let form = items(&flow["form"]);
    let field = |name: &str| {
        form.iter().find(|f| f["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}: {form:?}"))
    };
    assert_eq!(
        (field("query")["type"].clone(), field("query")["required"].clone()),
        (json!("string"), json!(true))
    );
    assert_eq!(field("language")["tag"], "select");
    assert_eq!(field("language")["value"], "\"ja\"", "the default is preselected");
    assert_eq!(field("language")["options"], json!(["(not set)", "ja", "en"]));
    assert_eq!(field("max_results")["value"], "5", "the default is prefilled");
    let answers = items(&flow["playground_answers"]);
    assert_eq!(answers.len(), 3, "{flow}");
    let violations = items(&answers[0]["body"]["error"]["data"]["violations"]);
    assert!(violations.iter().any(|v| v["path"] == "/max_results"), "{}", answers[0]);
    let shown = &flow["playground_error"];
    assert!(
        items(&shown["violations"]).iter().any(|v| v.as_str().is_some_and(|v| v.contains("/max_results"))),
        "{shown}"
    );
    assert_eq!(answers[1]["body"]["result"]["isError"], false, "{}", answers[1]);
    assert!(flow["playground_result"]["shown"].as_str().is_some_and(|s| s.contains("Result")), "{flow}");
    // Through the chosen endpoint: a tool outside its selection is unknown there.
    assert_eq!(flow["endpoints_offered"], json!(["", "browse"]), "{flow}");
    assert_eq!(answers[2]["body"]["error"]["data"]["category"], "unknown_tool", "{}", answers[2]);
    assert!(
        flow["playground_outside"]["shown"].as_str().is_some_and(|s| s.contains("unknown_tool")),
        "{flow}"
    );

    // Live figures: a call made meanwhile is shown without a reload; a hidden tab pauses.
    let live = &report["live"];
    assert_eq!(live["call_status"], 200, "{live}");
    assert_eq!(live["same_document"], true, "{live}");
    assert!(live["indicator_visible_tab"].as_str().is_some_and(|t| t.starts_with("live")), "{live}");
    assert_eq!(live["indicator_hidden_tab"], "paused", "{live}");
    assert!(live["indicator_visible_again"].as_str().is_some_and(|t| t.starts_with("live")), "{live}");

    // The keyboard moves between pages.
    assert_eq!(report["keyboard"]["focused_after_arrow"], "catalogue", "{}", report["keyboard"]);
    assert_eq!(report["keyboard"]["opened"], "#catalogue", "{}", report["keyboard"]);
    assert_eq!(report["keyboard"]["focus_after_refresh"], "shop/close", "{}", report["keyboard"]);

    // Without the token: the token form and no data; reads and actions are refused, a wrong
    // token is refused with a message, and the breaker was not touched.
    let bare = &report["no_token"];
    for state in [&bare["initial"], &bare["wrong_token"]] {
        assert_eq!(state["token_form_visible"], true, "{bare}");
        assert_eq!(state["pages_visible"], json!([]), "{bare}");
        assert_eq!(state["data_rows"], 0, "{bare}");
        assert_eq!(state["mentions"], json!([]), "{bare}");
    }
    assert_eq!(bare["requests_before_token"], 0, "{bare}");
    assert_eq!(bare["actions"], json!({"read": 401, "open": 401, "approve": 401}), "{bare}");
    assert!(bare["wrong_token"]["message"].as_str().is_some_and(|m| m.contains("401")), "{bare}");
    assert_eq!(bare["breaker_after"]["state"], "closed", "{bare}");
    assert_eq!(bare["breaker_after"]["forced_open"], false, "{bare}");
    assert_eq!(bare["axe"], json!([]), "{bare}");
    let without = &report["without_token"];
    assert_eq!(without["page_errors"], json!([]), "{without}");
    assert_eq!(without["failed_requests"], json!([]), "{without}");
    // Every HTTP error without the token is the guard's 401 to an admin data path.
    for error in items(&without["http_errors"]) {
        assert_eq!(error["status"], 401, "{error}");
    }
}

/// The pending hash of the first change in a `/admin/registry/pins` report.
fn pending_hash(pins: &Value) -> Value {
    pins["pending"][0]["pending_hash"].clone()
}
