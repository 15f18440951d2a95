//! The container-facing surface, through the real binary: `mcp-gateway healthcheck` exit codes
//! (running, stopped, wrong path, readiness) and the metrics-only listener.

use std::process::{Command, Output};

use crate::common::{BIN, Gateway, TempFile, free_port};

fn healthcheck(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("healthcheck").args(args).env_remove("MCP_GATEWAY_CONFIG").env_remove("MCP_GATEWAY_LISTEN");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("mcp-gateway healthcheck runs")
}

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn healthcheck_exit_codes_follow_the_gateway() {
    let mut gw = Gateway::start_with_args("", &[], &["--demo"]);
    let port = gw.addr.port();

    // Default target: /healthz on the configured listen port, a wildcard address probed on
    // loopback (as in a container: listen 0.0.0.0:PORT).
    let ok = healthcheck(&[], &[("MCP_GATEWAY_LISTEN", format!("0.0.0.0:{port}"))]);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));
    assert!(said(&ok).contains(&format!("http://127.0.0.1:{port}/healthz")), "{}", said(&ok));

    // The same from a config file.
    let file = TempFile::with("probe.toml", format!("listen = \"127.0.0.1:{port}\"\n"));
    let from_file = healthcheck(&["--config", file.arg()], &[]);
    drop(file);
    assert_eq!(from_file.status.code(), Some(0), "{}", said(&from_file));

    let ready = healthcheck(&["--url", &gw.url("/readyz")], &[]);
    assert_eq!(ready.status.code(), Some(0), "{}", said(&ready));

    let wrong = healthcheck(&["--url", &gw.url("/nope")], &[]);
    assert_eq!(wrong.status.code(), Some(1), "{}", said(&wrong));
    assert!(said(&wrong).contains("404"), "{}", said(&wrong));
    assert_eq!(said(&wrong).trim().lines().count(), 1, "one line why: {}", said(&wrong));

    assert!(gw.proc.terminate().success());
    let stopped = healthcheck(&["--url", &gw.url("/healthz")], &[]);
    assert_eq!(stopped.status.code(), Some(1), "{}", said(&stopped));
    assert!(said(&stopped).contains("cannot connect"), "{}", said(&stopped));

    // A configuration that cannot be read is unhealthy too, with the reason.
    let broken = healthcheck(&[], &[("MCP_GATEWAY_LISTEN", "not-an-address".into())]);
    assert_eq!(broken.status.code(), Some(1), "{}", said(&broken));
    assert!(said(&broken).contains("configuration"), "{}", said(&broken));
}

#[test]
fn metrics_listener_serves_only_metrics_on_any_address() {
    let metrics_port = free_port();
    // A non-loopback metrics address needs no allow_non_loopback (the main listener stays
    // on loopback): metrics carry no tool arguments or results.
    let gw =
        Gateway::start_with_args(&format!("metrics_listen = \"0.0.0.0:{metrics_port}\"\n"), &[], &["--demo"]);
    let base = format!("http://127.0.0.1:{metrics_port}");

    let metrics = gw.client.get(format!("{base}/metrics")).send().unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(
        metrics.headers()["content-type"].to_str().unwrap().starts_with("text/plain"),
        "{:?}",
        metrics.headers()
    );
    assert!(metrics.text().unwrap().contains("mcp_gateway_build_info"));

    for path in ["/mcp", "/admin/breakers", "/admin/registry", "/healthz", "/readyz", "/"] {
        let got = gw.client.get(format!("{base}{path}")).send().unwrap();
        assert_eq!(got.status(), 404, "GET {path} on the metrics listener");
    }
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let post =
        gw.client.post(format!("{base}/mcp")).header("content-type", "application/json").body(body).send();
    assert_eq!(post.unwrap().status(), 404, "POST /mcp on the metrics listener");
    let post_metrics = gw.client.post(format!("{base}/metrics")).send().unwrap();
    assert_eq!(post_metrics.status(), 404, "POST /metrics on the metrics listener");
    let admin = gw.client.post(format!("{base}/admin/breakers/demo/open")).send().unwrap();
    assert_eq!(admin.status(), 404, "POST /admin/... on the metrics listener");

    // The main listener keeps its own /metrics and /mcp.
    assert!(gw.metrics().contains("mcp_gateway_build_info"));
    let (status, _) = gw.rpc(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(status, 200);
}

#[test]
fn metrics_listen_from_the_environment() {
    let metrics_port = free_port();
    let env = [("MCP_GATEWAY_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}"))];
    let gw = Gateway::start_with_args("", &[(env[0].0, env[0].1.as_str())], &["--demo"]);
    let got = gw.client.get(format!("http://127.0.0.1:{metrics_port}/metrics")).send().unwrap();
    assert_eq!(got.status(), 200);
    assert!(got.text().unwrap().contains("mcp_gateway_in_flight"));
}
