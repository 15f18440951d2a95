//! Clocks a peer chooses (`src/clock.rs`), against the real binary and a real hostile peer
//! (`tests/peers/scripted/hostile_server.py`):
//!
//! - a token endpoint answering `expires_in: 18446744073709551615` (u64::MAX seconds) once
//!   panicked the refresher on `Instant + Duration`: the gateway never became ready and no
//!   server's tools were listed. Now its token is kept for the documented cap (one year), the
//!   gateway is ready, every server's tools are listed and the guarded server is called with
//!   the token, asked for once.

use crate::common::*;
use serde_json::{Value, json};

/// The JSON log lines of `gateway` whose message is `message`.
fn log_lines(gateway: &Gateway, message: &str) -> Vec<Value> {
    gateway
        .proc
        .output()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == message)
        .collect()
}

#[test]
fn a_token_endpoint_answering_a_lifetime_of_u64_max_seconds_gets_a_capped_token_and_every_server_is_listed() {
    let (_hostile, addr) = hostile_server(&[]);
    let config = format!(
        r#"
{plain}
{guarded}
[servers.guarded.auth]
kind = "client_credentials"
token_url = "http://{addr}/token-forever"
client_id = "mcp-gateway"
client_secret_env = "GUARDED_SECRET"
"#,
        plain = http_server("plain", &format!("http://{addr}/steady")),
        guarded = http_server("guarded", &format!("http://{addr}/bearer")),
    );
    // On the code before the clock rule this never became ready: the refresher panicked.
    let gateway = Gateway::start(&config, &[("GUARDED_SECRET", "s3cret")]);
    let (status, report) = gateway.readyz();
    assert_eq!(status, 200, "{report}");
    let names = gateway.tool_names();
    for tool in ["steady_a", "steady_b", "guarded_echo"] {
        assert!(names.iter().any(|n| n == tool), "{tool} is not listed: {names:?}");
    }
    let answer = gateway.call("guarded_echo", json!({"q": "x"}));
    assert_eq!(result_text(&answer), "ok from /bearer", "{answer}");

    // One token for the listing and the call: kept, and for the capped lifetime.
    assert_eq!(hostile_hits(addr, "/token-forever"), 1);
    let obtained = log_lines(&gateway, "upstream token obtained");
    assert_eq!(obtained.len(), 1, "{obtained:?}");
    assert_eq!(obtained[0]["lifetime_secs"], json!(mcp_gateway::clock::MAX_TOKEN_LIFETIME.as_secs()));
    assert_eq!(obtained[0]["lifetime_capped"], json!(true), "{}", obtained[0]);
    let refused = hostile_log(addr).iter().filter(|r| r["path"] == "/bearer" && r["status"] != 200).count();
    assert_eq!(refused, 0, "every request reached the guarded server with the token");
}
