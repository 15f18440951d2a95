//! Approvals of tool calls (`[approvals]`, Cedar `@approval`), against the demo store: a call
//! that needs a person waits (`approval_required`, nothing sent), passes once approved with
//! exactly the same caller, endpoint, tool and arguments, and only once; a denial, the bounds,
//! the audit lines and metrics, the user's page by its link, and a restart with a journal.

use std::process::Command;

use crate::common::*;
use serde_json::{Value, json};

const IDENTITY: &str = "[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\n";

/// The demo store behind a gateway with header identities, `approvals` as its `[approvals]`
/// section (rules included) and an audit file.
fn gateway(demo: &Demo, approvals: &str, audit: &str, extra: &str) -> Gateway {
    let config = format!(
        "{}{IDENTITY}[metrics]\nmain_listener = \"admin\"\n[audit]\nsink = \"file\"\nfile = \"{audit}\"\n{extra}\n[approvals]\n{approvals}",
        http_server("store", &demo.url())
    );
    Gateway::start(&config, &[])
}

/// The operator's rule: more than five of one volume in the cart.
const BULK_RULE: &str = "[[approvals.rules]]\nname = \"bulk\"\ntools = [\"add_to_cart\"]\nargument = \"/quantity\"\nop = \">\"\nvalue = 5\napprover = \"operator\"\n";

fn call_as(gw: &Gateway, subject: &str, tool: &str, arguments: Value) -> Value {
    gw.call_with(tool, arguments, &[("x-caller-subject", subject)])
}

fn cart(quantity: u64) -> Value {
    json!({"manga_id": "MNG-00000001", "quantity": quantity})
}

fn calls(demo: &Demo) -> u64 {
    demo.stats()["calls"].as_u64().unwrap()
}

/// The `approval_required` answer's approval.
fn waiting(answer: &Value) -> Value {
    expect_error(answer, -32013, "approval_required")["approval"].clone()
}

fn decide(gw: &Gateway, id: &str, action: &str) -> (u16, Value) {
    let response = gw.admin_post(&format!("/admin/approvals/{id}/{action}")).json(&json!({})).send().unwrap();
    (response.status().as_u16(), response.json().unwrap())
}

fn audit_lines(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn approval_lines(path: &str) -> Vec<Value> {
    audit_lines(path).into_iter().filter(|l| l["event"] == "approval").collect()
}

#[test]
fn an_approval_passes_exactly_its_call_once_and_nothing_is_sent_before() {
    let scratch = Scratch::new("approvals-binding");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let gw = gateway(&demo, "", &audit, BULK_RULE);
    let before = calls(&demo);

    // Below the amount: no approval needed.
    assert!(call_as(&gw, "alice", "add_to_cart", cart(2)).get("result").is_some());
    assert_eq!(calls(&demo), before + 1);

    // Above it: refused, nothing sent, the approval named.
    let first = waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)));
    assert_eq!(first["approver"], "operator");
    assert_eq!(first["tool"], "add_to_cart");
    assert_eq!(first["subject"], "alice");
    assert_eq!(first["rule"], "bulk");
    assert!(first.get("arguments").is_none(), "the caller is not sent its arguments back: {first}");
    assert!(first.get("url").is_none(), "no user link for an operator's approval");
    let id = first["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128 random bits");
    assert_eq!(calls(&demo), before + 1, "nothing sent before approval");
    // Asking again names the same approval.
    assert_eq!(waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)))["id"], id.as_str());

    // The operator sees the call as the server will see it.
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let item = &listing["waiting"][0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["arguments"], cart(8));
    assert_eq!(item["status"], "pending");
    // Without the admin token: refused.
    let anonymous = reqwest::blocking::Client::new().get(gw.url("/admin/approvals")).send().unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let forged = reqwest::blocking::Client::new()
        .post(gw.url(&format!("/admin/approvals/{id}/approve")))
        .send()
        .unwrap();
    assert_eq!(forged.status().as_u16(), 401);

    // Bob's identical call is another caller's: its own approval.
    let bobs = waiting(&call_as(&gw, "bob", "add_to_cart", cart(8)));
    assert_ne!(bobs["id"], id.as_str());

    let (status, decided) = decide(&gw, &id, "approve");
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["status"], "approved");
    assert_eq!(decide(&gw, &id, "approve").0, 404, "decided once");

    // A changed argument is not approved: asked anew, nothing sent.
    let changed = waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)));
    assert_ne!(changed["id"], id.as_str());
    // Another caller with the approved arguments: still waiting.
    assert_eq!(waiting(&call_as(&gw, "bob", "add_to_cart", cart(8)))["id"], bobs["id"]);
    assert_eq!(calls(&demo), before + 1);

    // The approved call passes, with exactly its arguments.
    let answer = call_as(&gw, "alice", "add_to_cart", cart(8));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(calls(&demo), before + 2);
    assert_eq!(demo.stats()["last_tool"]["arguments"], cart(8));

    // A replay asks anew.
    let replay = waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)));
    assert_ne!(replay["id"], id.as_str());
    assert_eq!(calls(&demo), before + 2);

    // A denial is answered once, then the call asks anew.
    let replay_id = replay["id"].as_str().unwrap();
    assert_eq!(decide(&gw, replay_id, "deny").0, 200);
    expect_error(&call_as(&gw, "alice", "add_to_cart", cart(8)), -32014, "approval_denied");
    assert_ne!(waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)))["id"], replay_id);
    assert_eq!(calls(&demo), before + 2, "no denied or unapproved call was sent");

    // Recorded: audit lines for each step (who, when, which digest; never the arguments),
    // the metrics per tool and outcome, the console's history.
    wait_for("the approval audit lines", || approval_lines(&audit).iter().any(|l| l["outcome"] == "denied"));
    let lines = approval_lines(&audit);
    let of_first: Vec<&str> = lines
        .iter()
        .filter(|l| l["approval_id"] == id.as_str())
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(of_first, ["asked", "approved", "used"]);
    let approved = lines.iter().find(|l| l["outcome"] == "approved").unwrap();
    assert_eq!(approved["decided_by"], "operator");
    assert_eq!(approved["subject"], "alice");
    assert_eq!(approved["tool"], "add_to_cart");
    assert_eq!(approved["args_sha256"].as_str().unwrap().len(), 64);
    assert!(approved["decided_at"].is_string());
    for line in &lines {
        assert!(!line.to_string().contains("MNG-00000001"), "arguments in an audit line: {line}");
    }
    let metrics = gw.metrics();
    let outcome = |o: &str| {
        metric(
            &metrics,
            "mcp_gateway_approvals_total",
            &["tool=\"add_to_cart\"", &format!("outcome=\"{o}\"")],
        )
    };
    assert_eq!(
        (outcome("asked"), outcome("approved"), outcome("used"), outcome("denied")),
        (5.0, 1.0, 1.0, 1.0)
    );
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let history: Vec<&str> =
        listing["history"].as_array().unwrap().iter().map(|a| a["status"].as_str().unwrap()).collect();
    assert_eq!(history, ["denied", "used"]);
}

#[test]
fn bounds_on_waiting_approvals_refuse_with_a_clear_error() {
    let scratch = Scratch::new("approvals-bounds");
    let demo = Demo::http();
    let gw = gateway(
        &demo,
        "max_pending = 3\nmax_pending_per_caller = 2\n",
        &scratch.path("audit.jsonl"),
        BULK_RULE,
    );
    waiting(&call_as(&gw, "alice", "add_to_cart", cart(6)));
    waiting(&call_as(&gw, "alice", "add_to_cart", cart(7)));
    let mine = call_as(&gw, "alice", "add_to_cart", cart(8));
    let data = expect_error(&mine, -32003, "rate_limited");
    assert_eq!(data["limit"], json!({"key": "approvals.max_pending_per_caller", "value": 2}), "{mine}");
    waiting(&call_as(&gw, "bob", "add_to_cart", cart(6)));
    let all = call_as(&gw, "carol", "add_to_cart", cart(6));
    let data = expect_error(&all, -32005, "overloaded");
    assert!(all["error"]["message"].as_str().unwrap().contains("approvals.max_pending"), "{all} {data}");
    // A waiting call asked again is no new approval: still answered.
    waiting(&call_as(&gw, "alice", "add_to_cart", cart(6)));
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_approvals_waiting", &[]), 3.0);
}

#[test]
fn a_cedar_approval_goes_to_the_user_by_a_single_use_link() {
    let scratch = Scratch::new("approvals-cedar");
    let policy = TempFile::with(
        "approvals.cedar",
        "@id(\"browse\")\npermit (principal, action, resource) when { resource.readOnly };\n\
         @id(\"checkout\")\n@approval(\"user\")\npermit (principal, action, resource == Tool::\"checkout\");\n",
    );
    let demo = Demo::http();
    let extra = format!("[policy]\nfile = \"{}\"\n", policy.arg());
    let gw = gateway(
        &demo,
        "user_link_in_answer = true\npublic_url = \"https://shop.example\"\n",
        &scratch.path("audit.jsonl"),
        &extra,
    );
    let before = calls(&demo);
    let order = json!({"shipping_address_id": "ADDR-1", "payment_method_id": "PM-1"});
    let approval = waiting(&call_as(&gw, "alice", "checkout", order.clone()));
    assert_eq!(approval["approver"], "user");
    assert_eq!(approval["rule"], "cedar:checkout");
    let id = approval["id"].as_str().unwrap();
    let url = approval["url"].as_str().unwrap();
    let prefix = format!("https://shop.example/approvals/{id}#");
    assert!(url.starts_with(&prefix), "{url}");
    let secret = &url[prefix.len()..];
    assert_eq!(secret.len(), 64, "256 random bits");

    // The page holds no data; its facts and its decision need the secret, in a JSON body.
    let client = reqwest::blocking::Client::new();
    let page = client.get(gw.url(&format!("/approvals/{id}"))).send().unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
    assert!(!page.text().unwrap().contains("checkout"));
    let view = |secret: &str| {
        client.post(gw.url(&format!("/approvals/{id}/view"))).json(&json!({"secret": secret})).send().unwrap()
    };
    assert_eq!(view(&"0".repeat(64)).status().as_u16(), 404, "a wrong secret sees nothing");
    let facts: Value = view(secret).json().unwrap();
    // The arguments as the server will see them: the schema's default filled in.
    assert_eq!(
        facts["arguments"],
        json!({"shipping_address_id": "ADDR-1", "payment_method_id": "PM-1", "gift_wrap": false})
    );
    assert_eq!(facts["subject"], "alice");
    let decide_with = |secret: &str, decision: &str| {
        client
            .post(gw.url(&format!("/approvals/{id}/decision")))
            .json(&json!({"secret": secret, "decision": decision}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(decide_with(&"0".repeat(64), "approve"), 404);
    // A form post (not JSON) decides nothing.
    let form = client
        .post(gw.url(&format!("/approvals/{id}/decision")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={secret}&decision=approve"))
        .send()
        .unwrap();
    assert_eq!(form.status().as_u16(), 415);
    // A foreign page posting the right JSON with the secret is still refused by its Origin.
    let foreign = client
        .post(gw.url(&format!("/approvals/{id}/decision")))
        .header("origin", "https://evil.example")
        .json(&json!({"secret": secret, "decision": "approve"}))
        .send()
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    assert_eq!(calls(&demo), before);
    assert_eq!(decide_with(secret, "approve"), 200);
    assert_eq!(decide_with(secret, "approve"), 404, "single use");
    assert_eq!(view(secret).status().as_u16(), 404, "the link is spent");

    let answer = call_as(&gw, "alice", "checkout", order.clone());
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(calls(&demo), before + 1);
    // Read-only tools need no approval.
    assert!(call_as(&gw, "alice", "manga_search", json!({"query": "x"})).get("result").is_some());
}

#[test]
fn a_restart_keeps_an_approved_call_and_audits_the_ones_it_lost() {
    let scratch = Scratch::new("approvals-restart");
    let audit = scratch.path("audit.jsonl");
    let state = scratch.path("state");
    let demo = Demo::http();
    let approvals = format!("state_dir = \"{state}\"\n");
    let gw = gateway(&demo, &approvals, &audit, BULK_RULE);
    let approved = waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)));
    let lost = waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)));
    assert_eq!(decide(&gw, approved["id"].as_str().unwrap(), "approve").0, 200);
    // A crash (SIGKILL), not a graceful stop.
    drop(gw);
    let gw = gateway(&demo, &approvals, &audit, BULK_RULE);
    wait_for("the lost approval's audit line", || {
        approval_lines(&audit).iter().any(|l| l["outcome"] == "lost" && l["approval_id"] == lost["id"])
    });
    let before = calls(&demo);
    let answer = call_as(&gw, "alice", "add_to_cart", cart(8));
    assert!(answer.get("result").is_some(), "the approved call survived the restart: {answer}");
    assert_eq!(calls(&demo), before + 1);
    // The lost one asks anew; the approved one was used once.
    assert_ne!(waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)))["id"], lost["id"]);
    waiting(&call_as(&gw, "alice", "add_to_cart", cart(8)));
    assert_eq!(calls(&demo), before + 1);
}

/// A gateway whose `[approvals]` has `public_url` set to its own address (known once it
/// listens: written and applied by a reload) and `approvals` besides.
fn gateway_with_its_own_url(demo: &Demo, approvals: &str, audit: &str, extra: &str) -> Gateway {
    let gw = gateway(demo, approvals, audit, extra);
    let config = std::fs::read_to_string(gw.config_path()).unwrap();
    gw.rewrite_config(&format!("{config}public_url = \"http://{}\"\n", gw.addr));
    let response = gw.admin_post("/admin/config/reload").send().unwrap();
    assert!(response.status().is_success(), "{}", response.text().unwrap());
    gw
}

/// The Python SDK client of `clients/approval_client.py` calling `tool` as `subject`, its
/// elicitation callback deciding `decision`.
fn sdk_client(gw: &Gateway, subject: &str, decision: &str, tool: &str, arguments: &Value) -> Value {
    sdk_client_in(gw, subject, decision, tool, arguments, "legacy")
}

/// [`sdk_client`] in the era `mode` names (`legacy`, `2026-07-28`).
fn sdk_client_in(
    gw: &Gateway,
    subject: &str,
    decision: &str,
    tool: &str,
    arguments: &Value,
    mode: &str,
) -> Value {
    let output = Command::new(python())
        .arg(peers_dir().join("clients/approval_client.py"))
        .args([&gw.url("/mcp"), subject, decision, tool, &arguments.to_string(), mode])
        .output()
        .expect("the approval client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "approval client failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

const CHECKOUT_RULE: &str =
    "[[approvals.rules]]\nname = \"checkout\"\ntools = [\"checkout\"]\napprover = \"user\"\n";

fn order() -> Value {
    json!({"shipping_address_id": "ADDR-7", "payment_method_id": "PM-7"})
}

#[test]
fn the_sdk_clients_user_approves_on_the_gateways_page_through_url_elicitation() {
    let scratch = Scratch::new("approvals-url");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let gw = gateway_with_its_own_url(&demo, "", &audit, CHECKOUT_RULE);
    let before = calls(&demo);
    let report = sdk_client(&gw, "alice", "approve", "checkout", &order());
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    assert_eq!(asked[0]["mode"], "url");
    let link = asked[0]["url"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("http://{}/approvals/{}#", gw.addr, asked[0]["id"].as_str().unwrap())),
        "{link}"
    );
    assert!(asked[0]["message"].as_str().unwrap().contains("checkout"));
    assert_eq!(asked[0]["page_status"], 200);
    assert_eq!(report["result"]["isError"], false, "{report}");
    assert_eq!(calls(&demo), before + 1);
    assert_eq!(demo.stats()["last_tool"]["arguments"]["shipping_address_id"], "ADDR-7");
    wait_for("the used approval's line", || approval_lines(&audit).iter().any(|l| l["outcome"] == "used"));
    let outcomes: Vec<String> =
        approval_lines(&audit).iter().map(|l| l["outcome"].as_str().unwrap().to_string()).collect();
    assert_eq!(outcomes, ["asked", "approved", "used"]);
    assert_eq!(approval_lines(&audit)[1]["decided_by"], "user");

    // Denied on the page: the call ends approval_denied (a tool execution error for this
    // 2025-11-25 caller), nothing sent.
    let report = sdk_client(&gw, "alice", "deny", "checkout", &order());
    assert_eq!(report["result"]["isError"], true, "{report}");
    let error = &report["result"]["_meta"]["mcp-gateway/error"];
    assert_eq!(error["data"]["category"], "approval_denied", "{report}");
    assert_eq!(calls(&demo), before + 1);
}

#[test]
fn the_sdk_clients_user_answers_a_form_elicitation_both_ways() {
    let scratch = Scratch::new("approvals-form");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    let gw = gateway(&demo, "elicitation = \"prefer_form\"\n", &audit, CHECKOUT_RULE);
    let before = calls(&demo);
    let report = sdk_client(&gw, "alice", "approve", "checkout", &order());
    let asked = &report["asked"][0];
    assert_eq!(asked["mode"], "form", "{report}");
    let message = asked["message"].as_str().unwrap();
    // The facts: the tool, who asks, the arguments as the server will see them (defaults in).
    for fact in ["checkout", "alice", "ADDR-7", "\"gift_wrap\": false"] {
        assert!(message.contains(fact), "{fact} not in {message}");
    }
    assert_eq!(asked["schema"]["properties"]["approve"]["type"], "boolean");
    assert_eq!(report["result"]["isError"], false, "{report}");
    assert_eq!(calls(&demo), before + 1);

    let report = sdk_client(&gw, "alice", "deny", "checkout", &order());
    assert_eq!(
        report["result"]["_meta"]["mcp-gateway/error"]["data"]["category"], "approval_denied",
        "{report}"
    );
    assert_eq!(calls(&demo), before + 1, "a denied call is never sent");
    wait_for("the denial's line", || approval_lines(&audit).iter().any(|l| l["outcome"] == "denied"));
    let decided: Vec<(String, String)> = approval_lines(&audit)
        .iter()
        .filter(|l| l["decided_by"].is_string() && l["outcome"] != "used")
        .map(|l| (l["outcome"].as_str().unwrap().to_string(), l["decided_by"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        decided,
        [("approved".into(), "user:elicitation".into()), ("denied".into(), "user:elicitation".into())]
    );
}

#[test]
fn the_approval_page_and_the_consoles_approvals_page_decide_in_a_real_browser() {
    require(std::path::Path::new("/usr/bin/chromium"), "Debian's chromium (apt-get install chromium)");
    require(&peers_dir().join("node_modules/playwright-core/package.json"), "playwright-core (npm)");
    let scratch = Scratch::new("approvals-browser");
    let demo = Demo::http();
    let rules = format!("{CHECKOUT_RULE}{BULK_RULE}");
    let gw =
        gateway_with_its_own_url(&demo, "user_link_in_answer = true\n", &scratch.path("audit.jsonl"), &rules);
    let before = calls(&demo);
    let users = waiting(&call_as(&gw, "alice", "checkout", order()));
    let link = users["url"].as_str().unwrap().to_string();
    let operators = waiting(&call_as(&gw, "bob", "add_to_cart", cart(8)));
    let operator_id = operators["id"].as_str().unwrap();

    let shots = repo_root().join("target/approval-screenshots");
    let output = Command::new(node22())
        .arg(peers_dir().join("clients/approvals_browser.mjs"))
        .args(["--url", &gw.url(""), "--token", ADMIN_TOKEN, "--link", &link, "--operator-id", operator_id])
        .arg("--shots")
        .arg(&shots)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .output()
        .expect("node runs the approvals driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success() && report.get("fatal").is_none(), "{report}");

    // The person's page: the facts as the server will see them, no data before the secret,
    // the secret gone from the address, never sent in a URL.
    let user = &report["user"];
    assert_eq!(user["status"], 200);
    assert!(user["csp"].as_str().unwrap().contains("frame-ancestors 'none'"));
    assert_eq!(user["facts"]["tool"], "checkout");
    assert_eq!(user["facts"]["subject"], "alice");
    assert_eq!(
        user["facts"]["arguments"],
        json!({"shipping_address_id": "ADDR-7", "payment_method_id": "PM-7", "gift_wrap": false})
    );
    assert_eq!(user["facts"]["digest"].as_str().unwrap().len(), 64);
    assert!(!user["address_after_load"].as_str().unwrap().contains('#'), "{user}");
    let secret = link.rsplit('#').next().unwrap();
    for url in user["log"]["request_urls"].as_array().unwrap() {
        assert!(!url.as_str().unwrap().contains(secret), "the secret in a request URL: {url}");
    }
    assert!(user["status_text"].as_str().unwrap().starts_with("Approved"), "{user}");
    assert_eq!(user["reopened"]["facts_hidden"], true, "the link is spent: {user}");
    assert_eq!(user["axe"], json!([]), "{user}");
    assert_eq!(
        user["log"]["console_errors"].as_array().unwrap().len(),
        1,
        "only the spent link's 404: {user}"
    );
    assert_eq!(user["log"]["page_errors"], json!([]));

    // The operator's console: the waiting call with its facts; approved there.
    let operator = &report["operator"];
    assert_eq!(operator["arguments"], cart(8));
    assert!(operator["heading"].as_str().unwrap().contains("add_to_cart"));
    assert!(operator["heading"].as_str().unwrap().contains("bob"));
    assert!(operator["text"].as_str().unwrap().contains("bulk"), "{operator}");
    assert!(operator["after"].as_str().unwrap().contains("approved by operator"), "{operator}");
    assert_eq!(operator["axe"], json!([]), "{operator}");
    assert_eq!(operator["log"]["page_errors"], json!([]));
    assert_eq!(operator["log"]["console_errors"], json!([]), "{operator}");

    // Nothing ran before; both calls pass now, once each.
    assert_eq!(calls(&demo), before);
    assert!(call_as(&gw, "alice", "checkout", order()).get("result").is_some());
    assert!(call_as(&gw, "bob", "add_to_cart", cart(8)).get("result").is_some());
    assert_eq!(calls(&demo), before + 2);
}

#[test]
fn a_2026_07_28_caller_is_asked_by_an_input_required_question_in_both_modes() {
    let scratch = Scratch::new("approvals-mrtr");
    let audit = scratch.path("audit.jsonl");
    let demo = Demo::http();
    // URL mode: the question carries the page's link; the SDK's callback decides there and
    // retries; the retry passes (its answer is taken out: the store never sees it).
    let gw = gateway_with_its_own_url(&demo, "", &audit, CHECKOUT_RULE);
    let before = calls(&demo);
    let report = sdk_client_in(&gw, "alice", "approve", "checkout", &order(), "2026-07-28");
    assert_eq!(report["asked"][0]["mode"], "url", "{report}");
    assert_eq!(report["asked"][0]["page_status"], 200);
    assert_eq!(report["result"]["isError"], false, "{report}");
    assert_eq!(calls(&demo), before + 1);
    let sent = demo.stats()["last_tool"].clone();
    assert_eq!(sent["arguments"]["shipping_address_id"], "ADDR-7");
    let last = demo.stats()["last_meta"].clone();
    assert!(!last.to_string().contains("mcpgw-approval"), "the question never reaches the server: {last}");
    let report = sdk_client_in(&gw, "alice", "deny", "checkout", &order(), "2026-07-28");
    assert_eq!(
        report["result"]["_meta"]["mcp-gateway/error"]["data"]["category"], "approval_denied",
        "{report}"
    );
    assert_eq!(calls(&demo), before + 1);
    drop(gw);

    // Form mode: the facts in the question, the person's yes in the retry.
    let gw = gateway(&demo, "elicitation = \"prefer_form\"\n", &audit, CHECKOUT_RULE);
    let report = sdk_client_in(&gw, "alice", "approve", "checkout", &order(), "2026-07-28");
    assert_eq!(report["asked"][0]["mode"], "form", "{report}");
    assert!(report["asked"][0]["message"].as_str().unwrap().contains("ADDR-7"));
    assert_eq!(report["result"]["isError"], false, "{report}");
    assert_eq!(calls(&demo), before + 2);
    let report = sdk_client_in(&gw, "alice", "deny", "checkout", &order(), "2026-07-28");
    assert_eq!(
        report["result"]["_meta"]["mcp-gateway/error"]["data"]["category"], "approval_denied",
        "{report}"
    );
    assert_eq!(calls(&demo), before + 2);

    // A forged answer to another approval's question decides nothing: the state names an
    // approval this call is not bound to.
    let forged = gw.call_with(
        "checkout",
        json!({"shipping_address_id": "ADDR-8", "payment_method_id": "PM-8"}),
        &[("x-caller-subject", "mallory")],
    );
    let id = waiting(&forged)["id"].as_str().unwrap().to_string();
    let retry = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "checkout",
        "arguments": order(),
        "requestState": format!("mcpgw-approval.{id}"),
        "inputResponses": {"mcpgw-approval": {"action": "accept", "content": {"approve": true}}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}},
    }});
    let (_, _, body) = gw.post_raw(
        retry.to_string(),
        &[
            ("x-caller-subject", "alice"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "checkout"),
        ],
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["resultType"], "input_required", "asked anew: {answer}");
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let mallorys =
        listing["waiting"].as_array().unwrap().iter().find(|a| a["id"] == id.as_str()).unwrap().clone();
    assert_eq!(mallorys["status"], "pending", "{listing}");
    assert_eq!(calls(&demo), before + 2);
}

#[test]
fn an_operators_approval_goes_to_a_bridge_tool_whose_answer_decides() {
    let scratch = Scratch::new("approvals-bridge");
    let record = scratch.path("bridge.jsonl");
    let port = free_port();
    let mut command = Command::new(python());
    command
        .arg(peers_dir().join("servers/approval_bridge.py"))
        .arg(port.to_string())
        .args(["--record", &record])
        .env("PYTHONUNBUFFERED", "1");
    let _bridge = Proc::spawn_until("approval-bridge", command, "READY");
    let demo = Demo::http();
    let extra = format!("{BULK_RULE}{}", http_server("tickets", &format!("http://127.0.0.1:{port}/mcp")));
    let gw = gateway(
        &demo,
        "[approvals.bridge]\nserver = \"tickets\"\ntool = \"request_approval\"\n",
        &scratch.path("audit.jsonl"),
        &extra,
    );
    let before = calls(&demo);
    // The bridge approves at once: the call passes without a retry.
    let answer = call_as(&gw, "alice", "add_to_cart", cart(6));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(calls(&demo), before + 1);
    // It denies: refused, nothing sent.
    expect_error(&call_as(&gw, "alice", "add_to_cart", cart(7)), -32014, "approval_denied");
    // It opens a ticket: the call waits, the console decides.
    let waiting_one = waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)));
    assert_eq!(calls(&demo), before + 1);
    let asked: Vec<Value> =
        std::fs::read_to_string(&record).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[2]["id"], waiting_one["id"]);
    assert_eq!(asked[2]["arguments"], cart(9), "the bridge sees the arguments as the server will");
    assert_eq!(asked[2]["subject"], "alice");
    assert_eq!(asked[2]["args_sha256"], waiting_one["args_sha256"]);
    // Asked again while it waits: the bridge is not asked twice.
    waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)));
    assert_eq!(std::fs::read_to_string(&record).unwrap().lines().count(), 3);
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let by: Vec<&str> =
        listing["history"].as_array().unwrap().iter().map(|a| a["decided_by"].as_str().unwrap()).collect();
    assert_eq!(by, ["bridge:tickets/request_approval", "bridge:tickets/request_approval"]);
}

#[test]
fn check_config_validates_approvals_and_the_environment_sets_them() {
    let bridge_elsewhere =
        TempFile::with("approvals-bridge.toml", "[approvals.bridge]\nserver = \"nowhere\"\ntool = \"ask\"\n");
    let checked = check_config(&["--config", bridge_elsewhere.arg()], &[]);
    assert!(!checked.status.success());
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(stderr.contains("approvals.bridge.server \"nowhere\" is not a configured server"), "{stderr}");
    let half_rule = TempFile::with(
        "approvals-rule.toml",
        "[[approvals.rules]]\nname = \"big\"\nargument = \"/total_jpy\"\napprover = \"user\"\n",
    );
    let checked = check_config(&["--config", half_rule.arg()], &[]);
    assert!(!checked.status.success());
    assert!(String::from_utf8_lossy(&checked.stderr).contains("argument, op and value go together"));
    // `MCP_GATEWAY_APPROVALS__*` sets the section, and check-config refuses what serve would.
    let empty = TempFile::with("approvals-empty.toml", "");
    let checked = check_config(
        &["--json", "--config", empty.arg()],
        &[("MCP_GATEWAY_APPROVALS__EXPIRY_SECS", "120"), ("MCP_GATEWAY_APPROVALS__ELICITATION", "url_only")],
    );
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let printed: Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(printed["approvals"]["expiry_secs"], 120);
    assert_eq!(printed["approvals"]["elicitation"], "url_only");
    let checked = check_config(&["--config", empty.arg()], &[("MCP_GATEWAY_APPROVALS__EXPIRY_SECS", "5")]);
    assert!(!checked.status.success());
    assert!(
        String::from_utf8_lossy(&checked.stderr)
            .contains("approvals.expiry_secs must be between 10 and 86400")
    );
}

#[test]
fn a_reload_keeps_waiting_and_approved_calls_and_applies_new_rules_to_the_next_call() {
    let scratch = Scratch::new("approvals-reload");
    let demo = Demo::http();
    let gw = gateway(&demo, "", &scratch.path("audit.jsonl"), BULK_RULE);
    let approved = waiting(&call_as(&gw, "alice", "add_to_cart", cart(9)));
    let pending = waiting(&call_as(&gw, "bob", "add_to_cart", cart(9)));
    assert_eq!(decide(&gw, approved["id"].as_str().unwrap(), "approve").0, 200);
    // The rule's threshold moves up: 8 no longer needs approval, 9 still does.
    let config = std::fs::read_to_string(gw.config_path()).unwrap().replace("value = 5", "value = 8");
    gw.rewrite_config(&config);
    let response = gw.admin_post("/admin/config/reload").send().unwrap();
    assert!(response.status().is_success(), "{}", response.text().unwrap());
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let ids: Vec<&str> =
        listing["waiting"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{listing}");
    assert!(
        ids.contains(&approved["id"].as_str().unwrap()) && ids.contains(&pending["id"].as_str().unwrap())
    );
    let before = calls(&demo);
    assert!(call_as(&gw, "carol", "add_to_cart", cart(8)).get("result").is_some(), "the new rule: 8 passes");
    assert_eq!(calls(&demo), before + 1);
    waiting(&call_as(&gw, "carol", "add_to_cart", cart(9)));
    // The approval given before the reload still passes its call, once; bob's still waits.
    assert!(call_as(&gw, "alice", "add_to_cart", cart(9)).get("result").is_some());
    assert_eq!(waiting(&call_as(&gw, "bob", "add_to_cart", cart(9)))["id"], pending["id"]);
    assert_eq!(calls(&demo), before + 2);
}

/// A JSON-RPC request as `subject`, a 2025-11-25 caller without a session.
fn rpc_as(gw: &Gateway, subject: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let headers = [("x-caller-subject", subject), ("mcp-protocol-version", "2025-11-25")];
    let (status, _, text) = gw.post_raw(body.to_string(), &headers);
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_task_asking_caller_gets_a_task_that_completes_after_the_decision() {
    let scratch = Scratch::new("approvals-task");
    let demo = Demo::http();
    let gw = gateway(&demo, "", &scratch.path("audit.jsonl"), BULK_RULE);
    let before = calls(&demo);
    let call = json!({"name": "add_to_cart", "arguments": cart(8), "task": {"ttl": 60000}});
    let created = rpc_as(&gw, "alice", "tools/call", call.clone());
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("mcpgw-approval-task-"), "{id}");
    assert_eq!(calls(&demo), before, "nothing sent before the approval");
    // Another caller cannot reach it.
    let foreign = rpc_as(&gw, "bob", "tasks/get", json!({"taskId": id}));
    assert!(foreign.get("error").is_some(), "{foreign}");
    assert_eq!(rpc_as(&gw, "alice", "tasks/get", json!({"taskId": id}))["result"]["status"], "working");

    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let approval = listing["waiting"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(decide(&gw, &approval, "approve").0, 200);
    let result = rpc_as(&gw, "alice", "tasks/result", json!({"taskId": id}));
    assert!(result["result"]["content"].is_array(), "{result}");
    assert_ne!(result["result"]["isError"], true, "{result}");
    assert_eq!(calls(&demo), before + 1);
    assert_eq!(demo.stats()["last_tool"]["arguments"], cart(8));
    assert_eq!(rpc_as(&gw, "alice", "tasks/get", json!({"taskId": id}))["result"]["status"], "completed");

    // Denied: the task fails with approval_denied; nothing sent.
    let created = rpc_as(&gw, "alice", "tools/call", call);
    let id = created["result"]["task"]["taskId"].as_str().unwrap().to_string();
    let listing: Value = gw.admin_get("/admin/approvals").send().unwrap().json().unwrap();
    let approval = listing["waiting"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(decide(&gw, &approval, "deny").0, 200);
    let failed = rpc_as(&gw, "alice", "tasks/result", json!({"taskId": id}));
    assert_eq!(failed["error"]["data"]["category"], "approval_denied", "{failed}");
    assert_eq!(rpc_as(&gw, "alice", "tasks/get", json!({"taskId": id}))["result"]["status"], "failed");
    assert_eq!(calls(&demo), before + 1);
}
