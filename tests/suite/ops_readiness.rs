//! `/readyz` is ready only when tools can be served (at least `ready_min_tools`, default 1):
//! a gateway whose only upstream is down at start answers 503 with the reason, stays alive
//! (`/healthz`, `mcp-gateway healthcheck`), and becomes ready by itself once the upstream is
//! up and a refresh has brought its tools in.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use crate::common::{BIN, Demo, Gateway, free_port};
use serde_json::Value;

/// Polls `/readyz` until `done(status, report)`; panics with the last answer after 30 s.
fn readyz_until(gw: &Gateway, done: impl Fn(u16, &Value) -> bool) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, report) = gw.readyz();
        if done(status, &report) {
            return (status, report);
        }
        assert!(Instant::now() < deadline, "/readyz never reached the expected state: {status} {report}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn healthcheck_code(url: &str) -> Option<i32> {
    Command::new(BIN).args(["healthcheck", "--url", url]).output().unwrap().status.code()
}

#[test]
fn a_gateway_whose_only_upstream_is_down_is_not_ready_until_tools_arrive() {
    let port = free_port();
    let config = format!(
        "refresh_interval_secs = 1\n[servers.late]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let gw = Gateway::start_unready(&config, &[], &[]);

    // Once the first refresh is done (registry loaded), still not ready, for want of tools.
    let (status, report) =
        readyz_until(&gw, |_, r| r["reason"].as_str().is_some_and(|r| r.contains("required")));
    assert_eq!(status, 503, "{report}");
    assert_eq!(report["servers"]["late"]["tools"], "unavailable", "{report}");
    assert_eq!(report["ready"], false, "{report}");
    assert_eq!(report["tools"], 0, "{report}");
    assert_eq!(report["ready_min_tools"], 1, "{report}");
    let reason = report["reason"].as_str().unwrap();
    assert!(reason.contains("0 tool(s)") && reason.contains("ready_min_tools"), "{reason}");
    // Alive all the same: the container health check (liveness) passes, readiness does not.
    assert_eq!(healthcheck_code(&gw.url("/healthz")), Some(0));
    assert_eq!(healthcheck_code(&gw.url("/readyz")), Some(1));

    // The upstream comes up on its address: a refresh brings its tools in and the gateway
    // becomes ready without a restart.
    let _demo = Demo::start(false, port);
    let (status, report) = readyz_until(&gw, |status, _| status == 200);
    assert_eq!(report["ready"], true, "{report}");
    assert_eq!(report["servers"]["late"]["tools"], "loaded", "{report}");
    assert!(report["tools"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(status, 200);
    assert!(gw.tool_names().contains(&"manga_search".to_string()));
    assert_eq!(healthcheck_code(&gw.url("/readyz")), Some(0));
}

#[test]
fn ready_min_tools_sets_the_bar() {
    // The demo server has six tools: a minimum of seven is never met, zero always is.
    let gw = Gateway::start_unready("ready_min_tools = 7\n", &[], &["--demo"]);
    let (status, report) =
        readyz_until(&gw, |_, r| r["reason"].as_str().is_some_and(|r| r.contains("required")));
    assert_eq!(status, 503, "{report}");
    assert_eq!(report["tools"], 6, "{report}");
    assert!(report["reason"].as_str().unwrap().contains("6 tool(s) can be served, 7 required"), "{report}");

    let empty = Gateway::start_unready("ready_min_tools = 0\n", &[], &[]);
    let (status, report) = readyz_until(&empty, |status, _| status == 200);
    assert_eq!((status, &report["tools"]), (200, &serde_json::json!(0)), "{report}");
}
