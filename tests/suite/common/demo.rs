//! The demo MCP server of the gateway binary (`mcp-gateway demo-server`) as its own process:
//! over streamable HTTP, or behind the Lambda Invoke API it emulates (`--lambda-api`), with
//! optional delays, sessions and generated tools, and its own counters of what it received.

use std::{net::SocketAddr, process::Command};

use serde_json::Value;

use super::{Proc, bin};

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

    /// The HTTP demo server offering `n` generated tools `bulk_00000`… besides the six.
    pub fn with_extra_tools(n: usize) -> Self {
        let n = n.to_string();
        Self::start_args(false, 0, 0, &["--extra-tools", &n])
    }

    pub fn start_with(lambda: bool, port: u16, delay_ms: u64) -> Self {
        Self::start_args(lambda, port, delay_ms, &[])
    }

    fn start_args(lambda: bool, port: u16, delay_ms: u64, extra: &[&str]) -> Self {
        let mut command = Command::new(bin());
        let listen = format!("127.0.0.1:{port}");
        let delay = delay_ms.to_string();
        command.args(["demo-server", "--listen", &listen, "--delay-ms", &delay]).args(extra);
        if lambda {
            command.arg("--lambda-api");
        }
        let (proc, addr) = Proc::spawn_listening("demo-server", command);
        Self { proc, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// `GET /_stats` of the HTTP demo server.
    pub fn stats(&self) -> Value {
        reqwest::blocking::get(format!("http://{}/_stats", self.addr)).unwrap().json().unwrap()
    }

    /// Invocations of `function` the Lambda emulator received.
    pub fn invocations(&self, function: &str) -> u64 {
        let report: Value =
            reqwest::blocking::get(format!("http://{}/_invocations", self.addr)).unwrap().json().unwrap();
        report["functions"][function].as_u64().unwrap_or(0)
    }
}
