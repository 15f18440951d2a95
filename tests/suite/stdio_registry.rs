//! stdio servers named by DynamoDB registry entries (DynamoDB Local, the registry CLI, the
//! gateway binary, the Python stdio peer). The security rule under test: an entry can only
//! pick one of the commands the gateway's configuration lists in `stdio_commands`; it can
//! never make the gateway run a program of its choosing.

use std::process::Command;

use crate::common::*;
use serde_json::{Value, json};

fn stdio_tool(name: &str, server: &str, command: &str) -> Value {
    json!({
        "name": name,
        "description": format!("{name} over stdio"),
        "inputSchema": {"type": "object"},
        "server": {"name": server, "transport": "stdio", "command": command},
    })
}

#[test]
fn registry_stdio_entries_start_only_allowlisted_commands() {
    let (_dynamo, port) = dynamodb_local();
    // Generous DynamoDB timeouts: DynamoDB Local on a loaded machine is slow, and its speed
    // is not what this test is about.
    let env = vec![
        ("MCP_GATEWAY_DYNAMODB_TABLE", "mcp-tool-registry".to_string()),
        ("MCP_GATEWAY_DYNAMODB_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("MCP_GATEWAY_REGISTRY__DYNAMODB_TIMEOUT_MS", "30000".to_string()),
    ];
    registry_cli(&env, &["create-table"]);

    let events = TempFile::new("stdio-registry.events");

    registry_put(&env, &stdio_tool("ok", "peer", "peer"));
    // `touch` exists on PATH, and is not in stdio_commands.
    registry_put(&env, &stdio_tool("rogue", "rogue", "touch"));
    // The CLI refuses a stdio entry without a command.
    let path = temp_path("stdio-nocmd.json");
    let mut no_command = stdio_tool("nocmd", "x", "peer");
    no_command["server"].as_object_mut().unwrap().remove("command");
    std::fs::write(&path, no_command.to_string()).unwrap();
    let refused = Command::new(BIN)
        .args(["registry", "put", path.to_str().unwrap()])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a command"), "{refused:?}");

    let config = format!(
        "refresh_interval_secs = 1\nready_min_tools = 2\ndynamodb_table = \"mcp-tool-registry\"\ndynamodb_endpoint = \"http://127.0.0.1:{port}\"\n[registry]\ndynamodb_timeout_ms = 30000\n\n[stdio_commands.peer]\ncommand = \"python3\"\nargs = [{:?}, {:?}]\n",
        peers_dir().join("scripted/stdio_peer.py").display().to_string(),
        events.arg().to_string(),
    );
    let gateway = Gateway::start(&config, &[]);

    // The allowlisted command runs, started on first use.
    let answer = gateway.call("ok", json!({}));
    assert_eq!(structured(&answer)["ok"], true, "{answer}");
    let started: Vec<String> =
        std::fs::read_to_string(events.path()).unwrap().lines().map(str::to_string).collect();
    assert_eq!(started.iter().filter(|l| l.starts_with("spawn ")).count(), 1, "{started:?}");
    let connections: Value = gateway.admin_get("/admin/connections").send().unwrap().json().unwrap();
    assert_eq!(connections["peer"]["state"], "ready", "{connections}");

    // The other names a program the configuration does not list: refused, nothing started.
    let answer = gateway.call("rogue", json!({}));
    let data = expect_error(&answer, -32006, "upstream_misconfigured");
    assert_eq!(data["attempts"], 0, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("stdio_commands"), "{answer}");
    let connections: Value = gateway.admin_get("/admin/connections").send().unwrap().json().unwrap();
    assert!(connections.get("rogue").is_none(), "{connections}");
    let output = gateway.proc.output();
    assert!(
        !output
            .lines()
            .any(|l| l.contains("stdio server process started") && l.contains("\"server\":\"rogue\"")),
        "{output}"
    );
}
