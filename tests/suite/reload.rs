//! Configuration reload (issue 40, point 3), black-box: the built gateway re-reads its file on
//! SIGHUP, on `POST /admin/config/reload` and, with `--watch`, when the file changes. Real
//! peers: the gated Python SDK server (`tests/peers/servers/gated_server.py`, session era, a
//! `hold` tool that blocks until the test releases it, every request it receives recorded in
//! order), the stdio peer (`scripted/stdio_peer.py`, its pid in its events file), the demo
//! store server, and a port nobody listens on. Each test waits for what a step causes (the
//! reload counter, the server's own record, the process table) and asserts what happened —
//! which process saw what, in which order — never how long anything took.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{
    Demo, Gated, Gateway, TempFile, admin_get_json, expect_error, free_port, http_server, metric, peers_dir,
    post_in_background, python_server, result_text, wait_for,
};

// --- The reload's own surface: counter, report, log --------------------------------------------

fn reloads(gw: &Gateway, trigger: &str, outcome: &str) -> f64 {
    let (trigger, outcome) = (format!("trigger=\"{trigger}\""), format!("outcome=\"{outcome}\""));
    metric(&gw.metrics(), "mcp_gateway_config_reloads_total", &[&trigger, &outcome])
}

fn gauge(gw: &Gateway, name: &str) -> f64 {
    metric(&gw.metrics(), name, &[])
}

/// `GET /admin/config/reload`: the generation and the last report.
fn reload_state(gw: &Gateway) -> Value {
    let (status, state) = admin_get_json(gw, "/admin/config/reload");
    assert_eq!(status, 200, "{state}");
    state
}

/// Sends SIGHUP and waits until the reload it causes is counted with `outcome` and reported;
/// returns the report.
fn reload_by_signal(gw: &Gateway, outcome: &str) -> Value {
    let counted = reloads(gw, "signal", outcome);
    let previous = reload_state(gw)["last"].clone();
    gw.sighup();
    wait_for(&format!("a reload by signal counted {outcome}"), || {
        reloads(gw, "signal", outcome) == counted + 1.0
    });
    let mut report = Value::Null;
    wait_for("its report", || {
        report = reload_state(gw)["last"].clone();
        report != previous && report["trigger"] == "signal" && report["outcome"] == outcome
    });
    report
}

/// `POST /admin/config/reload`: status and report.
fn reload_by_admin(gw: &Gateway) -> (u16, Value) {
    let response = gw.admin_post("/admin/config/reload").send().expect("gateway answers");
    let status = response.status().as_u16();
    (status, response.json().expect("a JSON report"))
}

/// The names in a report's `servers.<kind>`, sorted.
fn servers(report: &Value, kind: &str) -> Vec<String> {
    let mut names: Vec<String> = report["servers"][kind]
        .as_array()
        .unwrap_or_else(|| panic!("no servers.{kind} in {report}"))
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}

fn lists(report: &Value, key: &str, item: &str) -> bool {
    report[key].as_array().is_some_and(|items| items.iter().any(|i| i == item))
}

/// The gateway's JSON log lines whose message starts with `message`.
fn log_lines(gw: &Gateway, message: &str) -> Vec<Value> {
    gw.proc
        .output()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"].as_str().is_some_and(|m| m.starts_with(message)))
        .collect()
}

/// Waits until `count` log lines carry `message` (the log reaches stdout after the reload is
/// counted), checks there are no more, and returns them.
fn logged(gw: &Gateway, message: &str, count: usize) -> Vec<Value> {
    wait_for(&format!("{count} log lines {message:?}"), || log_lines(gw, message).len() >= count);
    let lines = log_lines(gw, message);
    assert_eq!(lines.len(), count, "{}", gw.proc.output());
    lines
}

/// A credential in a broken configuration line, which no log line may repeat.
const SECRET: &str = "reload-secret-0042";

const REFUSED: &str = "configuration reload refused; the running configuration stays";

fn call_body(tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

fn listed(gw: &Gateway, tool: &str) -> bool {
    gw.tool_names().iter().any(|n| n == tool)
}

fn expect_unknown(answer: &Value) {
    expect_error(answer, -32002, "unknown_tool");
}

/// Waits until `tool` is (or is no longer) in `tools/list`. The catalogue under a reload's
/// `[tools.NAME]` control and without a removed server's tools is in force when the catalogue
/// is rebuilt after the reload; that it is so when the reload answers is
/// `the_catalogue_is_in_force_when_the_reload_answers`'s concern, so the other tests wait.
fn wait_listed(gw: &Gateway, tool: &str, listed_now: bool) {
    let what = format!("{tool} {} tools/list", if listed_now { "in" } else { "out of" });
    wait_for(&what, || listed(gw, tool) == listed_now);
}

/// A call held at the gated server long enough for any test step: per-server timeout and
/// deadline of a minute (the test releases it long before).
const LONG: &str = "timeout_ms = 60000\ndeadline_ms = 60000";

/// The in-flight call's answer, once released: the tool's own result.
fn expect_released(call: std::thread::JoinHandle<(u16, String, String)>, tag: &str) {
    let (status, _, body) = call.join().expect("the background call");
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(answer.get("error").is_none(), "the call in flight failed: {answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(result_text(&answer), format!("released {tag}"), "{answer}");
}

// --- 1. Calls in flight across a reload --------------------------------------------------------

#[test]
fn a_call_in_flight_on_a_removed_server_answers_its_result_and_then_the_session_ends() {
    let demo = Demo::http();
    let gated = Gated::start();
    let store = http_server("store", &demo.url());
    let gw = Gateway::start(&format!("{store}{}", gated.table(LONG)), &[]);
    wait_for("the gated server's tools", || listed(&gw, "hold"));

    let call = post_in_background(&gw, call_body("hold", json!({"tag": "inflight"})), &[]);
    wait_for("the held call at the server", || gated.started("inflight"));
    let held_session = gated.call_session("hold");

    gw.rewrite_config(&store);
    let report = reload_by_signal(&gw, "applied");
    assert_eq!(servers(&report, "removed"), ["gated"], "{report}");
    assert_eq!(servers(&report, "kept"), ["store"], "{report}");
    assert_eq!(servers(&report, "added"), Vec::<String>::new(), "{report}");
    assert_eq!(report["generation"], 2, "{report}");
    assert_eq!(gauge(&gw, "mcp_gateway_config_generation"), 2.0);

    // Its tools left the catalogue: unknown, and a new call never reaches it.
    wait_listed(&gw, "hold", false);
    let names = gw.tool_names();
    assert!(!names.iter().any(|n| n == "hold" || n == "quick"), "{names:?}");
    assert!(names.iter().any(|n| n == "manga_search"), "the kept server still serves: {names:?}");
    expect_unknown(&gw.call("quick", json!({"tag": "after"})));
    assert!(gated.position(|e| e["tool"] == "quick").is_none(), "{:?}", gated.events());
    assert!(gw.call("price_lookup", json!({"manga_id": "MNG-00000001"})).get("result").is_some());

    // The call in flight finishes on the stack it started with; only then is its session ended.
    gated.release();
    expect_released(call, "inflight");
    wait_for("the removed server's session ended (DELETE)", || !gated.deletes().is_empty());
    let released = gated.position(|e| e["event"] == "hold_released").unwrap();
    let deletes = gated.deletes();
    assert_eq!(deletes.len(), 1, "{:?}", gated.events());
    assert_eq!(deletes[0].1, held_session, "the DELETE ends the session the call ran on");
    assert!(
        deletes[0].0 > released,
        "the session ended before the call in flight answered: {:?}",
        gated.events()
    );
}

#[test]
fn a_call_in_flight_on_a_rebuilt_server_keeps_its_session_and_settings_and_later_calls_get_new_ones() {
    let gated = Gated::start();
    let gw = Gateway::start(&gated.table(LONG), &[]);
    wait_for("the gated server's tools", || listed(&gw, "hold"));

    let call = post_in_background(&gw, call_body("hold", json!({"tag": "inflight"})), &[]);
    wait_for("the held call at the server", || gated.started("inflight"));
    let held_session = gated.call_session("hold");
    let before_reload = gated.events().len();
    let initializes_before = gated.initializes();

    // The server's timeout drops to one second (a new stack, the old one kept for the call),
    // and a hook starts redacting what `hold` answers.
    gw.rewrite_config(&format!(
        "{}[[hooks]]\nname = \"hide-releases\"\nphase = \"after\"\nmatch_tools = [\"hold\"]\nbuiltin = \"redact\"\npatterns = [\"released [a-z]+\"]\n",
        gated.table("timeout_ms = 1000\ndeadline_ms = 60000")
    ));
    let report = reload_by_signal(&gw, "applied");
    assert_eq!(servers(&report, "rebuilt"), ["gated"], "{report}");
    assert_eq!(servers(&report, "kept"), Vec::<String>::new(), "{report}");
    assert!(lists(&report, "changed", "hooks"), "{report}");

    // A call after the reload: a new session, opened by a new `initialize` after the reload.
    let answer = gw.call("quick", json!({"tag": "after"}));
    assert_eq!(result_text(&answer), "quick after", "{answer}");
    let quick_session = gated.call_session("quick");
    assert_ne!(quick_session, held_session, "a call after the reload used the old stack's session");
    let events = gated.events();
    let issued_at =
        events.iter().position(|e| e["event"] == "session_issued" && e["session"] == quick_session.as_str());
    assert!(
        issued_at.is_some_and(|i| i >= before_reload),
        "the new session was not opened after the reload: {events:?}"
    );
    assert!(gated.initializes() > initializes_before);
    assert!(
        events[..before_reload]
            .iter()
            .any(|e| e["event"] == "session_issued" && e["session"] == held_session.as_str()),
        "{events:?}"
    );

    // A call after the reload runs on the new settings: held past its one-second timeout.
    let short = gw.call("hold", json!({"tag": "short"}));
    expect_error(&short, -32001, "timeout");
    assert_eq!(gated.call_session("hold"), held_session, "the first hold call is the one in flight");

    // The call in flight, started on the old settings (a minute, no hook), outlived the new
    // timeout and answers the tool's result unredacted; the old session ends only after it.
    gated.release();
    expect_released(call, "inflight");
    let hold_calls: Vec<Value> =
        gated.events().into_iter().filter(|e| e["rpc"] == "tools/call" && e["tool"] == "hold").collect();
    assert_eq!(hold_calls.len(), 2, "the call in flight was never replayed: {hold_calls:?}");
    assert_eq!(hold_calls[1]["session"], quick_session.as_str(), "{hold_calls:?}");
    // A call after the reload gets the hook.
    let late = gw.call("hold", json!({"tag": "late"}));
    assert_eq!(result_text(&late), "[redacted]", "{late}");
    wait_for("the old stack's session ended (DELETE)", || {
        gated.deletes().iter().any(|(_, s)| *s == held_session)
    });
    let released = gated.position(|e| e["event"] == "hold_released" && e["tag"] == "inflight").unwrap();
    let (deleted, _) = gated.deletes().into_iter().find(|(_, s)| *s == held_session).unwrap();
    assert!(deleted > released, "the old session ended before its call answered: {:?}", gated.events());
    assert!(!gated.deletes().iter().any(|(_, s)| *s == quick_session), "the new session was ended");
}

// --- 2. A server added and one removed ---------------------------------------------------------

/// Pids a stdio peer wrote to its events file (`spawn <pid>`).
fn spawned_pids(events: &Path) -> Vec<u32> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("spawn ")?.parse().ok())
        .collect()
}

/// Whether `pid` still runs (a zombie waiting to be reaped has exited).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn one_reload_adds_a_server_whose_tools_serve_and_removes_a_stdio_server_whose_process_exits() {
    let demo = Demo::http();
    let gated = Gated::start();
    let stdio_events = TempFile::new("reload-stdio.events");
    let script = peers_dir().join("scripted/stdio_peer.py");
    let local = format!(
        "[servers.local]\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = {}\n",
        json!([script.display().to_string(), stdio_events.arg()])
    );
    let store = http_server("store", &demo.url());
    let gw = Gateway::start(&format!("{store}{local}"), &[]);
    wait_for("the stdio server's tools", || listed(&gw, "ok"));
    let answer = gw.call("ok", json!({}));
    let pid = answer["result"]["structuredContent"]["pid"].as_u64().expect("the peer's pid") as u32;
    assert_eq!(spawned_pids(stdio_events.path()), [pid]);
    assert!(running(pid));
    assert!(!listed(&gw, "quick"));

    gw.rewrite_config(&format!("{store}{}", gated.table("")));
    let report = reload_by_signal(&gw, "applied");
    assert_eq!(servers(&report, "added"), ["gated"], "{report}");
    assert_eq!(servers(&report, "removed"), ["local"], "{report}");
    assert_eq!(servers(&report, "kept"), ["store"], "{report}");

    // The added server's tools are listed (the refresh after the reload) and callable.
    wait_for("the added server's tools listed", || listed(&gw, "quick") && listed(&gw, "hold"));
    let answer = gw.call("quick", json!({"tag": "added"}));
    assert_eq!(result_text(&answer), "quick added", "{answer}");
    assert!(
        gated.position(|e| e["rpc"] == "tools/call" && e["tool"] == "quick").is_some(),
        "{:?}",
        gated.events()
    );

    // The removed server's tools are unknown and its process exits; no new one is started.
    expect_unknown(&gw.call("ok", json!({})));
    wait_for("the removed stdio server's process to exit", || !running(pid));
    assert_eq!(spawned_pids(stdio_events.path()), [pid], "the removed server was started again");
    assert!(gw.tool_names().iter().any(|n| n == "manga_search"));
}

// --- 3. Servers whose settings did not change keep their stacks ---------------------------------

#[test]
fn unchanged_servers_keep_breaker_and_session_and_a_changed_one_gets_a_new_breaker() {
    let gated = Gated::start();
    let closed = format!("http://127.0.0.1:{}/mcp", free_port());
    let gone = |breaker: &str| {
        format!(
            "{}discover = false\nbreaker = {{ {breaker}, probe_interval_ms = 0, open_base_ms = 600000, open_max_ms = 600000 }}\n\
             [[servers.gone.tools]]\nname = \"gone_tool\"\ninputSchema = {{ type = \"object\" }}\n",
            http_server("gone", &closed)
        )
    };
    let tripping = gone("consecutive_failures = 1");
    let base = format!("{}{tripping}", gated.table(""));
    let gw = Gateway::start(&base, &[]);
    wait_for("the gated server's tools", || listed(&gw, "quick"));
    assert_eq!(result_text(&gw.call("quick", json!({"tag": "one"}))), "quick one");
    let session = gated.call_session("quick");
    let initializes = gated.initializes();

    // A signal with the file as it is: nothing to apply.
    let report = reload_by_signal(&gw, "unchanged");
    assert_eq!(report["generation"], 1, "{report}");
    assert_eq!(gauge(&gw, "mcp_gateway_config_generation"), 1.0);

    // One refused connection trips `gone`'s breaker.
    let failed = gw.call("gone_tool", json!({}));
    assert!(failed.get("error").is_some(), "{failed}");
    wait_for("gone's breaker open", || gw.breaker("gone")["state"] == "open");

    // A change elsewhere (an endpoint): both servers keep their stacks.
    gw.rewrite_config(&format!("{base}[endpoints.ops.select]\nservers = [\"gated\"]\n"));
    let report = reload_by_signal(&gw, "applied");
    assert_eq!(servers(&report, "kept"), ["gated", "gone"], "{report}");
    assert_eq!(servers(&report, "rebuilt"), Vec::<String>::new(), "{report}");
    assert!(lists(&report, "changed", "endpoints"), "{report}");
    assert_eq!(gw.breaker("gone")["state"], "open", "the kept breaker was reset");
    assert_eq!(result_text(&gw.call("quick", json!({"tag": "two"}))), "quick two");
    assert_eq!(gated.initializes(), initializes, "a kept server saw a new initialize: {:?}", gated.events());
    let sessions: Vec<Value> =
        gated.events().into_iter().filter(|e| e["tool"] == "quick").map(|e| e["session"].clone()).collect();
    assert_eq!(sessions, [json!(session), json!(session)], "the kept server's calls share one session");
    assert!(gated.deletes().is_empty(), "{:?}", gated.events());

    // A change to `gone`'s own table: it is rebuilt with a new (closed) breaker; `gated` kept.
    let changed = format!(
        "{}{}[endpoints.ops.select]\nservers = [\"gated\"]\n",
        gated.table(""),
        gone("consecutive_failures = 5")
    );
    gw.rewrite_config(&changed);
    let report = reload_by_signal(&gw, "applied");
    assert_eq!(servers(&report, "rebuilt"), ["gone"], "{report}");
    assert_eq!(servers(&report, "kept"), ["gated"], "{report}");
    assert_eq!(gw.breaker("gone")["state"], "closed", "{}", gw.breaker("gone"));
    assert_eq!(result_text(&gw.call("quick", json!({"tag": "three"}))), "quick three");
    assert_eq!(gated.initializes(), initializes, "{:?}", gated.events());
    assert!(gated.deletes().is_empty(), "{:?}", gated.events());
}

// --- 4. A file that does not load or validate ----------------------------------------------------

#[test]
fn a_broken_file_is_refused_with_its_reason_and_the_running_configuration_serves() {
    let demo = Demo::http();
    let store = http_server("store", &demo.url());
    let gw = Gateway::start(&store, &[]);
    wait_for("the store's tools", || listed(&gw, "manga_search"));
    assert_eq!(reload_state(&gw), json!({"generation": 1, "last": null}));
    assert_eq!(gauge(&gw, "mcp_gateway_config_generation"), 1.0);

    let still_serves = |gw: &Gateway| {
        assert!(listed(gw, "manga_search"));
        let answer = gw.call("price_lookup", json!({"manga_id": "MNG-00000001"}));
        assert!(answer.get("result").is_some() && answer["result"]["isError"] != true, "{answer}");
    };

    // Not TOML (a string left open, on a line that carries a credential): SIGHUP is refused,
    // counted and logged with the parser's line, never with the line's contents.
    gw.rewrite_config(&format!("{store}headers = {{ authorization = \"Bearer {SECRET} }}\n"));
    let report = reload_by_signal(&gw, "invalid");
    assert_eq!(report["generation"], 1, "{report}");
    let reason = report["error"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("line"), "the reason names the line: {report}");
    let refused = logged(&gw, REFUSED, 1);
    assert!(refused[0]["error"].as_str().is_some_and(|e| e.contains("line")), "{}", refused[0]);
    assert!(!gw.proc.output().contains(SECRET), "the log echoes the file's contents:\n{}", gw.proc.output());
    still_serves(&gw);

    // The same file through the admin route: 422 and the reason.
    let (status, report) = reload_by_admin(&gw);
    assert_eq!(status, 422, "{report}");
    assert_eq!(
        (report["outcome"].as_str(), report["trigger"].as_str()),
        (Some("invalid"), Some("admin")),
        "{report}"
    );
    assert!(report["error"].as_str().is_some_and(|e| e.contains("line")), "{report}");
    logged(&gw, REFUSED, 2);

    // Valid TOML that does not validate: a hook naming a server that does not exist.
    let bad_hook = format!(
        "{store}[[hooks]]\nname = \"ghost\"\nphase = \"before\"\nmatch_tools = [\"*\"]\nserver = \"nowhere\"\ntool = \"t\"\n"
    );
    gw.rewrite_config(&bad_hook);
    let report = reload_by_signal(&gw, "invalid");
    assert!(report["error"].as_str().is_some_and(|e| e.contains("nowhere")), "{report}");
    let refused = logged(&gw, REFUSED, 3);
    assert!(refused[2]["error"].as_str().is_some_and(|e| e.contains("nowhere")), "{}", refused[2]);
    still_serves(&gw);

    // An unknown key.
    gw.rewrite_config(&format!("not_a_setting = 1\n{store}"));
    let (status, report) = reload_by_admin(&gw);
    assert_eq!(status, 422, "{report}");
    assert!(report["error"].as_str().is_some_and(|e| e.contains("not_a_setting")), "{report}");
    let refused = logged(&gw, REFUSED, 4);
    assert!(refused[3]["error"].as_str().is_some_and(|e| e.contains("not_a_setting")), "{}", refused[3]);
    still_serves(&gw);

    // A policy file that cannot be read.
    let missing = std::env::temp_dir().join(format!("mcp-gateway-test-{}-no-such.cedar", std::process::id()));
    gw.rewrite_config(&format!("{store}[policy]\nfile = {:?}\n", missing.display().to_string()));
    let (status, report) = reload_by_admin(&gw);
    assert_eq!(status, 422, "{report}");
    assert!(report["error"].as_str().is_some_and(|e| e.contains("no-such.cedar")), "{report}");
    logged(&gw, REFUSED, 5);
    still_serves(&gw);

    assert_eq!(reloads(&gw, "signal", "invalid"), 2.0);
    assert_eq!(reloads(&gw, "admin", "invalid"), 3.0);
    assert_eq!(gauge(&gw, "mcp_gateway_config_generation"), 1.0, "nothing was applied");
    assert!(log_lines(&gw, "configuration reloaded").is_empty(), "{}", gw.proc.output());

    // The fixed file applies.
    gw.rewrite_config(&format!("{store}[tools.price_lookup]\nrename = \"price\"\n"));
    let (status, report) = reload_by_admin(&gw);
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (report["outcome"].as_str(), report["trigger"].as_str()),
        (Some("applied"), Some("admin")),
        "{report}"
    );
    assert_eq!(report["generation"], 2, "{report}");
    assert!(lists(&report, "changed", "tools"), "{report}");
    assert!(report.get("error").is_none_or(Value::is_null), "{report}");
    // The admin token from the environment and `--listen` from the command line are applied
    // as at start: nothing the file leaves out reads as a change needing a restart.
    assert_eq!(report["restart_required"], json!([]), "{report}");
    assert_eq!(gauge(&gw, "mcp_gateway_config_restart_required"), 0.0);
    wait_listed(&gw, "price", true);
    assert!(!listed(&gw, "price_lookup"));
    assert_eq!(reload_state(&gw)["last"], report);
    assert_eq!(reloads(&gw, "admin", "applied"), 1.0);
    let reloaded = logged(&gw, "configuration reloaded", 1);
    assert_eq!(
        (reloaded[0]["generation"].as_u64(), reloaded[0]["trigger"].as_str()),
        (Some(2), Some("admin")),
        "{}",
        reloaded[0]
    );

    // The same file once more: nothing to apply.
    let (status, report) = reload_by_admin(&gw);
    assert_eq!((status, report["outcome"].as_str()), (200, Some("unchanged")), "{report}");
    assert_eq!(gauge(&gw, "mcp_gateway_config_generation"), 2.0);
    assert!(!gw.proc.output().contains(SECRET), "{}", gw.proc.output());
}

// --- 5. --watch ---------------------------------------------------------------------------------

fn watched_file_applies(args: &[&str], env: &[(&str, &str)]) {
    let demo = Demo::http();
    let store = http_server("store", &demo.url());
    let gw = Gateway::start_with_args(&store, env, args);
    wait_for("the store's tools", || listed(&gw, "checkout"));

    // A broken file is refused by the watch too, and the running configuration serves.
    gw.rewrite_config(&format!("{store}[tools.checkout\n"));
    wait_for("a refusal by the watch", || reloads(&gw, "watch", "invalid") >= 1.0);
    assert!(listed(&gw, "checkout"));
    assert_eq!(reload_state(&gw)["last"]["outcome"], "invalid");

    gw.rewrite_config(&format!("{store}[tools.checkout]\nhide = true\n"));
    wait_for("a reload by the watch", || reloads(&gw, "watch", "applied") == 1.0);
    assert_eq!(reloads(&gw, "watch", "invalid"), 1.0, "the broken file was refused once, not at every read");
    let state = reload_state(&gw);
    assert_eq!(state["last"]["trigger"], "watch", "{state}");
    assert_eq!(state["last"]["generation"], 2, "{state}");
    assert!(lists(&state["last"], "changed", "tools"), "{state}");
    assert_eq!(state["last"]["restart_required"], json!([]), "{state}");
    wait_listed(&gw, "checkout", false);
    expect_unknown(&gw.call("checkout", json!({"shipping_address_id": "a-1", "payment_method_id": "p-1"})));
    assert_eq!(reloads(&gw, "signal", "applied") + reloads(&gw, "admin", "applied"), 0.0);
}

#[test]
fn with_watch_a_changed_file_applies_without_a_signal() {
    watched_file_applies(&["--watch"], &[]);
}

#[test]
fn watch_from_the_environment_applies_a_changed_file_too() {
    watched_file_applies(&[], &[("MCP_GATEWAY_WATCH", "true")]);
}

// --- 6. Settings apply at once ------------------------------------------------------------------

#[test]
fn an_endpoint_a_refuse_hook_a_rename_and_a_quota_apply_by_one_reload() {
    let demo = Demo::http();
    let store = http_server("store", &demo.url());
    let gw = Gateway::start(&store, &[]);
    wait_for("the store's tools", || listed(&gw, "manga_search"));
    let card = json!({"shipping_address_id": "a-1", "payment_method_id": "4111-1111-1111-1111"});
    let endpoint_list = |gw: &Gateway| {
        gw.client
            .post(gw.url("/mcp/shop"))
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
            .send()
            .expect("gateway answers")
    };
    let price = json!({"manga_id": "MNG-00000001"});
    let policy = TempFile::with("reload-policy.cedar", NO_CART_POLICY);

    // Before: no endpoint, no hook, no rename, no quota, no policy.
    assert!(listed(&gw, "add_to_cart"));
    assert_eq!(endpoint_list(&gw).status().as_u16(), 404);
    let answer = gw.call("checkout", card.clone());
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(listed(&gw, "manga_search") && !listed(&gw, "find_manga"));
    for _ in 0..2 {
        assert!(gw.call("price_lookup", price.clone()).get("result").is_some());
    }

    gw.rewrite_config(&format!(
        "{store}[endpoints.shop.select]\nservers = [\"store\"]\ntools = [\"price_lookup\", \"inventory_check\"]\n\
         [[hooks]]\nname = \"no-cards\"\nphase = \"before\"\nmatch_tools = [\"*\"]\nbuiltin = \"refuse\"\ndetect = [\"card\"]\n\
         [tools.manga_search]\nrename = \"find_manga\"\n\
         [[quotas.rules]]\nname = \"one-price\"\nmatch_tool = \"price_lookup\"\nrate = 1\nwindow_secs = 3600\n\
         [policy]\nfile = {:?}\n",
        policy.arg()
    ));
    let report = reload_by_signal(&gw, "applied");
    for section in ["endpoints", "hooks", "tools", "quotas", "policy"] {
        assert!(lists(&report, "changed", section), "{section} not in changed: {report}");
    }
    assert_eq!(servers(&report, "kept"), ["store"], "{report}");
    assert_eq!(report["restart_required"], json!([]), "{report}");

    // The endpoint serves its selection.
    let response = endpoint_list(&gw);
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().unwrap();
    let mut names: Vec<&str> =
        body["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort();
    assert_eq!(names, ["inventory_check", "price_lookup"], "{body}");

    // The refuse hook: the card never reaches the server.
    let calls_before = demo.stats()["calls"].as_u64().unwrap();
    let refused = gw.call("checkout", card);
    let data = expect_error(&refused, -32012, "guardrail");
    assert_eq!(data["guardrail"]["hook"], "no-cards", "{refused}");
    assert_eq!(demo.stats()["calls"].as_u64().unwrap(), calls_before);

    // The rename.
    wait_listed(&gw, "find_manga", true);
    assert!(!listed(&gw, "manga_search"));
    assert!(gw.call("find_manga", json!({"query": "naruto"})).get("result").is_some());
    expect_unknown(&gw.call("manga_search", json!({"query": "naruto"})));

    // The quota: one call an hour from now on (the two before it do not count).
    assert!(gw.call("price_lookup", price.clone()).get("result").is_some());
    let limited = gw.call("price_lookup", price);
    let data = expect_error(&limited, -32003, "rate_limited");
    assert_eq!(data["quota"]["name"], "one-price", "{limited}");

    // The policy: the cart is neither listed nor callable.
    assert!(!listed(&gw, "add_to_cart"));
    let denied = gw.call("add_to_cart", json!({"manga_id": "MNG-00000001", "quantity": 1}));
    expect_error(&denied, -32008, "forbidden");
}

/// Everyone may call everything but the cart.
const NO_CART_POLICY: &str = r#"
@id("everyone")
permit(principal, action == Action::"call", resource);

@id("no-cart")
forbid(principal, action == Action::"call", resource) when { resource.name == "add_to_cart" };
"#;

// --- 7. Keys that take effect only after a restart -----------------------------------------------

#[test]
fn restart_only_keys_are_reported_and_kept_while_the_rest_applies() {
    let demo = Demo::http();
    let store = http_server("store", &demo.url());
    let gw = Gateway::start(&store, &[]);
    wait_for("the store's tools", || listed(&gw, "checkout"));
    assert_eq!(gauge(&gw, "mcp_gateway_config_restart_required"), 0.0);

    gw.rewrite_config(&format!(
        "log_level = \"debug\"\n{store}[inbound]\nmax_batch_items = 8\n[tools.checkout]\nhide = true\n"
    ));
    let report = reload_by_signal(&gw, "applied");
    assert!(lists(&report, "restart_required", "log_level"), "{report}");
    assert!(lists(&report, "restart_required", "inbound"), "{report}");
    assert!(lists(&report, "changed", "tools"), "{report}");
    assert!(!lists(&report, "changed", "log_level") && !lists(&report, "changed", "inbound"), "{report}");
    assert!(gauge(&gw, "mcp_gateway_config_restart_required") >= 2.0, "{}", gw.metrics());
    let restart = logged(&gw, "configuration keys changed that take effect only after a restart", 1);
    let keys = restart[0]["keys"].to_string();
    assert!(keys.contains("log_level") && keys.contains("inbound"), "{}", restart[0]);

    // The reloadable part applied; the restart-only ones kept their running values: a batch of
    // nine items is still within the running limit (64), and no debug line appears.
    wait_listed(&gw, "checkout", false);
    let batch: Vec<Value> =
        (0..9).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"})).collect();
    let (status, answer) = gw.rpc(&Value::Array(batch));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer.as_array().map(Vec::len), Some(9), "{answer}");
    assert!(
        !gw.proc.output().lines().any(|l| l.contains("\"level\":\"DEBUG\"")),
        "log_level applied without a restart"
    );
}

// --- The catalogue when the reload answers --------------------------------------------------------

#[test]
fn the_catalogue_is_in_force_when_the_reload_answers() {
    // `gated` is slow to list its tools at the refresh after the reload (its list is held
    // until the end): what the reload decided must not wait for it.
    let demo = Demo::http();
    let gated = Gated::start();
    let extra_port = free_port();
    let _extra = python_server(extra_port);
    let store = http_server("store", &demo.url());
    let gated_table = gated.table(LONG);
    let extra = http_server("extra", &format!("http://127.0.0.1:{extra_port}/mcp"));
    let gw = Gateway::start(&format!("{store}{gated_table}{extra}"), &[]);
    wait_for("every server's tools", || {
        listed(&gw, "quick") && listed(&gw, "add") && listed(&gw, "checkout")
    });

    gated.hold_lists();
    gw.rewrite_config(&format!(
        "{store}{gated_table}[tools.checkout]\nhide = true\n[tools.price_lookup]\nrename = \"price\"\n"
    ));
    let (status, report) = reload_by_admin(&gw);
    assert_eq!((status, report["outcome"].as_str()), (200, Some("applied")), "{report}");
    assert_eq!(servers(&report, "removed"), ["extra"], "{report}");

    // Answered "applied": the hidden tool, the old name and the removed server's tools are
    // gone, and the new name serves — while the refresh waits for the slow server's list.
    wait_for("the refresh after the reload at the slow server", || {
        gated.position(|e| e["event"] == "list_held").is_some()
    });
    let names = gw.tool_names();
    for gone in ["checkout", "price_lookup", "add", "shout"] {
        assert!(!names.iter().any(|n| n == gone), "{gone} still listed after the reload answered: {names:?}");
    }
    assert!(names.iter().any(|n| n == "price"), "the new name is not listed: {names:?}");
    let calls = demo.stats()["calls"].as_u64().unwrap();
    expect_unknown(&gw.call("checkout", json!({"shipping_address_id": "a-1", "payment_method_id": "p-1"})));
    assert_eq!(demo.stats()["calls"].as_u64().unwrap(), calls, "a hidden tool reached its server");
    expect_unknown(&gw.call("add", json!({"a": 1, "b": 2})));
    let priced = gw.call("price", json!({"manga_id": "MNG-00000001"}));
    assert!(priced.get("result").is_some(), "{priced}");
    gated.open_lists();
}

// --- Names: the same file gives the same names after a reload as after a restart -------------

/// The tool names a gateway lists, sorted (`tools/list` is ordered by name already).
fn names_of(gw: &Gateway) -> Vec<String> {
    gw.tool_names()
}

#[test]
fn a_reload_and_a_restart_of_the_same_file_give_the_same_tool_names() {
    let (shop, mirror) = (Demo::http(), Demo::http());
    let gw = Gateway::start(&http_server("shop", &shop.url()), &[]);
    wait_listed(&gw, "manga_search", true);

    // A second server offering the same tools joins by a reload: every shared name is
    // namespaced on both, as a restart with that file names them; nobody's `manga_search`
    // silently reaches the newcomer.
    let both = format!("{}{}", http_server("shop", &shop.url()), http_server("mirror", &mirror.url()));
    gw.rewrite_config(&both);
    reload_by_signal(&gw, "applied");
    wait_listed(&gw, "shop__manga_search", true);
    let reloaded = names_of(&gw);
    assert!(reloaded.contains(&"mirror__manga_search".to_string()), "{reloaded:?}");
    assert!(!reloaded.contains(&"manga_search".to_string()), "{reloaded:?}");
    expect_unknown(&gw.call("manga_search", json!({"query": "x"})));
    let restarted = Gateway::start(&both, &[]);
    wait_listed(&restarted, "shop__manga_search", true);
    assert_eq!(names_of(&restarted), reloaded, "a restart named the tools otherwise than the reload");

    // `prefix = "never"` on shop: shop keeps its names, the mirror's copies are namespaced —
    // after a reload and after a restart alike.
    let kept = format!(
        "{}prefix = \"never\"\n{}",
        http_server("shop", &shop.url()),
        http_server("mirror", &mirror.url())
    );
    gw.rewrite_config(&kept);
    reload_by_signal(&gw, "applied");
    wait_listed(&gw, "manga_search", true);
    let reloaded = names_of(&gw);
    assert!(reloaded.contains(&"mirror__manga_search".to_string()), "{reloaded:?}");
    assert!(!reloaded.contains(&"shop__manga_search".to_string()), "{reloaded:?}");
    let restarted = Gateway::start(&kept, &[]);
    wait_listed(&restarted, "manga_search", true);
    assert_eq!(names_of(&restarted), reloaded, "a restart named the tools otherwise than the reload");
}

#[test]
fn a_reload_of_an_unchanged_file_under_demo_awaits_no_restart() {
    // No admin token configured: `--demo` makes a one-off one (printed once on stderr), which
    // a reload of the same file must keep rather than report `admin` as changed.
    let gw = Gateway::start_with_args_as_configured("log_level = \"info\"\n", &[], &["--demo"]);
    let output = gw.proc.output();
    let token = output
        .lines()
        .find_map(|line| line.split("admin token (this run only): ").nth(1))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no one-off token printed: {output}"))
        .to_string();
    let response = gw
        .client
        .post(gw.url("/admin/config/reload"))
        .bearer_auth(&token)
        .send()
        .expect("the gateway answers");
    assert_eq!(response.status().as_u16(), 200);
    let report: Value = response.json().expect("a JSON report");
    assert_eq!(report["outcome"], "unchanged", "{report}");
    assert_eq!(report["restart_required"], json!([]), "{report}");
    assert_eq!(servers(&report, "kept"), ["demo"], "{report}");
}
