//! The gateway under test: the built `mcp-gateway` binary serving a configuration written to a
//! temp file, with static AWS test credentials and the harness's admin token, plus its one-shot
//! subcommands (`registry`, `check-config`).

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{Proc, TempFile};

pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-gateway");

/// The binary the gateway and demo servers are started from: `MCPGW_TEST_BIN` when set
/// (a copy of this worktree's build, when several worktrees share one target directory and
/// overwrite each other's `target/debug/mcp-gateway`), else [`BIN`].
pub fn bin() -> String {
    std::env::var("MCPGW_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// The admin bearer token of gateways the harness starts (`admin.token`).
pub const ADMIN_TOKEN: &str = "harness-admin-token-0123456789";

/// Environment letting registry entries point at loopback test servers: registry URLs must
/// match `registry.upstream_urls.allow`, and loopback needs a pattern naming it literally.
pub const REGISTRY_LOOPBACK: &[(&str, &str)] =
    &[("MCP_GATEWAY_REGISTRY__UPSTREAM_URLS__ALLOW", r#"["http://127.0.0.1:*", "ws://127.0.0.1:*"]"#)];

/// Static test credentials: the AWS SDK must never probe instance metadata.
const AWS_TEST_ENV: [(&str, &str); 4] = [
    ("AWS_ACCESS_KEY_ID", "test"),
    ("AWS_SECRET_ACCESS_KEY", "test"),
    ("AWS_REGION", "us-east-1"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
];

/// The `[servers.NAME]` table of a streamable-HTTP server at `url` (append lines for more keys).
pub fn http_server(name: &str, url: &str) -> String {
    format!("[servers.{name}]\ntransport = \"http\"\nurl = \"{url}\"\n")
}

/// A running `mcp-gateway serve`.
pub struct Gateway {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub client: reqwest::blocking::Client,
    _config: TempFile,
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

    /// Like [`Gateway::start_as_configured`], with extra command-line arguments.
    pub fn start_with_args_as_configured(config: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let gateway = Self::spawn(config, env, args);
        gateway.wait_ready();
        gateway
    }

    /// Starts `mcp-gateway serve` like [`Gateway::start`] with its address space limited to
    /// `kib` KiB (`ulimit -v`, as a container's memory limit would do): an allocation past it
    /// aborts the process.
    pub fn start_within_memory(config: &str, env: &[(&str, &str)], kib: u64) -> Self {
        let mut with_token = vec![("MCP_GATEWAY_ADMIN__TOKEN", ADMIN_TOKEN)];
        with_token.extend_from_slice(env);
        let gateway = Self::spawn_limited(config, &with_token, &[], Some(kib));
        gateway.wait_ready();
        gateway
    }

    fn spawn(config: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        Self::spawn_limited(config, env, args, None)
    }

    fn spawn_limited(config: &str, env: &[(&str, &str)], args: &[&str], kib: Option<u64>) -> Self {
        let config_file = TempFile::with("gateway.toml", config);
        let mut command = match kib {
            None => Command::new(bin()),
            Some(kib) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", "ulimit -v \"$0\" && exec \"$@\"", &kib.to_string(), &bin()]);
                sh
            }
        };
        command
            .args(["serve", "--config", config_file.arg(), "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(AWS_TEST_ENV)
            .envs(env.iter().copied());
        let (proc, addr) = Proc::spawn_listening("mcp-gateway", command);
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { proc, addr, client, _config: config_file }
    }

    /// Starts `mcp-gateway serve` (with the admin token) whose configuration takes long to
    /// load (a large OpenAPI document is mapped before the gateway listens): waits up to
    /// `load_within` for it to listen, then until it is ready. The limit only stops a broken
    /// run from hanging.
    pub fn start_slow_loading(config: &str, load_within: Duration) -> Self {
        let config_file = TempFile::with("gateway.toml", config);
        let mut command = Command::new(bin());
        command
            .args(["serve", "--config", config_file.arg(), "--listen", "127.0.0.1:0"])
            .envs(AWS_TEST_ENV)
            .env("MCP_GATEWAY_ADMIN__TOKEN", ADMIN_TOKEN);
        let mut proc = Proc::spawn("mcp-gateway", command);
        let line = proc.wait_line("\"listen\"", load_within);
        let addr = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["listen"].as_str().and_then(|l| l.parse().ok()))
            .unwrap_or_else(|| panic!("no address in the start-up line {line}"));
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        let gateway = Self { proc, addr, client, _config: config_file };
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

    /// `GET /readyz`: status and JSON report.
    pub fn readyz(&self) -> (u16, Value) {
        let response = self.client.get(self.url("/readyz")).send().expect("gateway answers /readyz");
        let status = response.status().as_u16();
        (status, response.json().expect("/readyz answers JSON"))
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

    /// Every tool name of `tools/list`, following `nextCursor` through every page.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut params = json!({});
        loop {
            let (_, body) =
                self.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}));
            let result = &body["result"];
            let tools = result["tools"].as_array().unwrap_or_else(|| panic!("no tools in {body}"));
            names.extend(tools.iter().map(|t| t["name"].as_str().unwrap().to_string()));
            match result["nextCursor"].as_str() {
                Some(cursor) => params = json!({"cursor": cursor}),
                None => return names,
            }
        }
    }

    /// `GET /metrics` on the MCP listener, with the admin token (what a gateway with `[auth]`
    /// and `metrics.main_listener = "admin"` asks for; an open listener ignores it).
    /// `GET /metrics` (with the admin token, which a listener in `admin` mode asks for); a
    /// closed `/metrics` fails the test here instead of reading as zero series.
    pub fn metrics(&self) -> String {
        let response = self.client.get(self.url("/metrics")).bearer_auth(ADMIN_TOKEN).send().unwrap();
        let status = response.status();
        let body = response.text().unwrap();
        assert!(status.is_success(), "GET /metrics answered {status}: {body}");
        body
    }

    /// `GET path` with the harness's admin bearer token.
    pub fn admin_get(&self, path: &str) -> reqwest::blocking::RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(ADMIN_TOKEN)
    }

    /// `POST path` with the harness's admin bearer token.
    pub fn admin_post(&self, path: &str) -> reqwest::blocking::RequestBuilder {
        self.client.post(self.url(path)).bearer_auth(ADMIN_TOKEN)
    }

    /// `server`'s entry in `GET /admin/breakers`.
    pub fn breaker(&self, server: &str) -> Value {
        let report: Value = self.admin_get("/admin/breakers").send().unwrap().json().unwrap();
        report[server].clone()
    }

    /// `GET /admin/connections`: the persistent upstream connections, by server.
    pub fn connections(&self) -> Value {
        self.admin_get("/admin/connections").send().unwrap().json().unwrap()
    }

    /// The state of `server`'s connection (`"absent"` when it has none).
    pub fn connection_state(&self, server: &str) -> String {
        self.connections()[server]["state"].as_str().unwrap_or("absent").to_string()
    }

    /// The configuration file the gateway was started with (`--config`).
    pub fn config_path(&self) -> &std::path::Path {
        self._config.path()
    }

    /// Replaces the configuration file with `config` atomically: written to a file beside it,
    /// then renamed over it, so a reader (a reload, the `--watch` poll) sees the old file or
    /// the new one, never half of one.
    pub fn rewrite_config(&self, config: &str) {
        let path = self.config_path();
        let next = path.with_extension("toml.next");
        std::fs::write(&next, config).unwrap_or_else(|e| panic!("cannot write {}: {e}", next.display()));
        std::fs::rename(&next, path).unwrap_or_else(|e| panic!("cannot rename over {}: {e}", path.display()));
    }

    /// Sends the gateway SIGHUP (re-read the configuration).
    pub fn sighup(&self) {
        self.proc.signal("HUP");
    }
}

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

/// A gateway whose stdout is read only up to its start-up line, then left unread (a stuck log
/// shipper): its pipe fills and stays full until the test reads it. Killed when dropped.
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

impl Drop for UnreadGateway {
    /// A test that fails half-way leaves no gateway behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `mcp-gateway registry …` with the given environment; returns stdout, panics on failure.
pub fn registry_cli(env: &[(&str, String)], args: &[&str]) -> String {
    let mut command = Command::new(BIN);
    command.arg("registry").args(args).envs(AWS_TEST_ENV);
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

/// `mcp-gateway registry put` of one entry (written to a temp file for the CLI).
pub fn registry_put(env: &[(&str, String)], entry: &Value) {
    let file = TempFile::with("registry-entry.json", entry.to_string());
    registry_cli(env, &["put", file.arg()]);
}

/// `mcp-gateway check-config ARGS` with nothing but `PATH` and `env` in its environment (none
/// of the test process's own `MCP_GATEWAY_*` variables), run to completion.
pub fn check_config(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin())
        .arg("check-config")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("mcp-gateway check-config runs")
}

/// POSTs `body` to the gateway's `/mcp` from another thread (its own connection, so the test
/// can act meanwhile); the handle yields status, content type and body.
pub fn post_in_background(
    gw: &Gateway,
    body: String,
    headers: &[(&str, &str)],
) -> std::thread::JoinHandle<(u16, String, String)> {
    let url = gw.url("/mcp");
    let headers: Vec<(String, String)> =
        headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        let mut request = client.post(url).header("content-type", "application/json").body(body);
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        let response = request.send().expect("gateway answers");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (status, content_type, response.text().unwrap())
    })
}
