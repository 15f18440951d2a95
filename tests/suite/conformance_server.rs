//! The official MCP conformance suite's server scenarios about tools, resources, prompts and
//! completion, run DIRECT against an upstream carrying the suite's fixtures
//! (`tests/peers/servers/conformance_server.py`, Python SDK 2.x) and THROUGH the gateway in
//! front of it. Every scenario that passes direct must pass
//! through, except the ones listed in [`DIRECT_ONLY`] with the reason; those must still fail
//! through (so the list is updated the day the gateway learns them), and nothing else may
//! differ.

use std::process::Command;

use crate::common::*;

const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "dns-rebinding-protection",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "completion-complete",
];

/// Scenarios that pass direct but not through the gateway, and why: none. Sampling and
/// elicitation (server→client requests, SEP-1034 defaults and SEP-1330 enum schemas included)
/// are relayed to a caller that declared the capability (inbound back-channel session,
/// dedicated session-era upstream session). The suite (0.1.16) has no scenario for
/// 2026-07-28 multi-round-trip requests, tasks or list changes. `resources-subscribe` and
/// `resources-unsubscribe` are not run: the Python SDK's server does not implement them, so
/// they fail direct.
const DIRECT_ONLY: &[(&str, &str)] = &[];

/// Runs one scenario against `url`; returns (passed, total) checks and the output.
fn run(url: &str, scenario: &str) -> (u32, u32, String) {
    let output = Command::new(node22())
        .arg(conformance_suite())
        .args(["server", "--url", url, "--scenario", scenario])
        .output()
        .expect("the conformance suite runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    let plain = strip_ansi(&text);
    let line = plain
        .lines()
        .find(|l| l.trim_start().starts_with("Passed:"))
        .unwrap_or_else(|| panic!("no result line for {scenario} at {url}:\n{plain}"));
    let counts = line.trim_start().trim_start_matches("Passed:").trim();
    let (passed, rest) = counts.split_once('/').unwrap();
    let total = rest.split(|c: char| !c.is_ascii_digit()).next().unwrap();
    (passed.trim().parse().unwrap(), total.parse().unwrap(), plain)
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_suites_tool_resource_prompt_and_completion_scenarios_pass_through_the_gateway_wherever_they_pass_direct()
 {
    let port = free_port();
    let _fixtures = conformance_fixtures(port, &[]);
    let direct_url = format!("http://127.0.0.1:{port}/mcp");
    let gw =
        Gateway::start(&format!("[servers.fixtures]\ntransport = \"http\"\nurl = \"{direct_url}\"\n"), &[]);
    let through_url = gw.url("/mcp");

    let mut table = Vec::new();
    let mut problems = Vec::new();
    for scenario in SCENARIOS {
        // Direct and through at once: they share nothing (the fixtures keep per-session state).
        let ((dp, dt, direct_out), (tp, tt, through_out)) = std::thread::scope(|s| {
            let direct = s.spawn(|| run(&direct_url, scenario));
            let through = run(&through_url, scenario);
            (direct.join().expect("direct run"), through)
        });
        let direct_ok = dp == dt && dt > 0;
        let through_ok = tp == tt && tt > 0;
        table.push(format!("{scenario:32} direct {dp}/{dt}  through {tp}/{tt}"));
        if !direct_ok {
            problems.push(format!("{scenario} fails DIRECT against the fixtures:\n{direct_out}"));
            continue;
        }
        let expected_direct_only = DIRECT_ONLY.iter().find(|(s, _)| s == scenario);
        match (through_ok, expected_direct_only) {
            (true, None) => {}
            (false, None) => {
                problems.push(format!("{scenario} passes direct but fails THROUGH:\n{through_out}"))
            }
            (false, Some(_)) => {}
            (true, Some((_, why))) => problems.push(format!(
                "{scenario} now passes through the gateway; remove it from DIRECT_ONLY (was: {why})"
            )),
        }
    }
    eprintln!("conformance (server scenarios):\n{}", table.join("\n"));
    assert!(problems.is_empty(), "{}\n\n{}", table.join("\n"), problems.join("\n\n"));
}

/// What `dns-rebinding-protection` checks, and the case it does not: a rebound `Host` with no
/// `Origin` at all (the suite sends both, and the `Origin` check alone already refuses that).
#[test]
fn a_rebound_host_is_refused_on_a_loopback_listener_even_without_an_origin() {
    let demo = Demo::http();
    let gw =
        Gateway::start(&format!("[servers.store]\ntransport = \"http\"\nurl = \"{}\"\n", demo.url()), &[]);
    let ping = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let (status, _, body) = gw.post_raw(ping.clone(), &[("host", "evil.example.com:8080")]);
    assert_eq!(status, 403, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["data"]["category"], "forbidden_origin", "{answer}");
    assert_eq!(metric(&gw.metrics(), "mcp_gateway_http_rejections_total", &["forbidden_host"]), 1.0);
    let port = gw.addr.port();
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), "[::1]".to_string()] {
        let (status, _, body) = gw.post_raw(ping.clone(), &[("host", host.as_str())]);
        assert_eq!(status, 200, "{host}: {body}");
    }
}
