//! One upstream server's settings (`[servers.NAME]`), the transport it is reached by, and the
//! `[defaults]` every server falls back to, with the accessors that resolve one against the
//! other.

use std::{collections::BTreeMap, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    BreakerSettings, LambdaEvent, RetrySettings, SchemeCredential, StdioCommand, UpstreamAuthConfig, lenient,
};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerDefaults {
    /// TCP connect timeout for HTTP upstreams, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Total time for one upstream attempt, in milliseconds.
    pub timeout_ms: u64,
    /// Default caller deadline for a whole call, retries included, in milliseconds
    /// (a caller's `X-Request-Timeout-Ms` or `_meta` deadline overrides it).
    pub deadline_ms: u64,
    /// Calls in flight to one server before further calls are shed (`overloaded`).
    pub max_concurrency: usize,
    /// Result cache TTL for read-only tools, in milliseconds (0: no caching; identical
    /// read-only calls in flight are still shared).
    pub cache_ttl_ms: u64,
    /// Largest text content a tool result may carry before it is cut, in bytes (0: no limit).
    pub max_result_bytes: usize,
    /// Most bytes one upstream answer may occupy while it is read (an HTTP body, one SSE
    /// event, a Lambda payload); beyond it the answer is dropped with `response_too_large`.
    pub max_response_bytes: usize,
    /// Most tools one server's `tools/list` may hold (all pages together); a longer list is
    /// refused whole and the server's last good list stays served.
    pub max_tools: usize,
    /// Most bytes one tool definition may take as the server sent it; a list with a larger
    /// one is refused whole.
    pub max_tool_definition_bytes: usize,
    /// Most bytes all of one server's tool definitions may take together.
    pub max_catalogue_bytes: usize,
    /// Most `tools/list` pages followed (`nextCursor`) for one list.
    pub max_list_pages: usize,
    pub retry: RetrySettings,
    pub breaker: BreakerSettings,
    /// Persistent transports (WebSocket, SSE, stdio): first reconnect delay, in milliseconds
    /// (doubled after every failed attempt, with jitter).
    pub reconnect_initial_ms: u64,
    /// Longest delay between two reconnect attempts, in milliseconds.
    pub reconnect_max_ms: u64,
    /// After this long without a connection, in milliseconds, the server is `failed` and only
    /// retried every `reconnect_slow_retry_ms`.
    pub reconnect_give_up_ms: u64,
    /// Delay between attempts once `failed` or `needs_auth`, in milliseconds.
    pub reconnect_slow_retry_ms: u64,
    /// stdio servers: how long a child may take to exit after SIGTERM before it is killed,
    /// in milliseconds.
    pub stdio_stop_grace_ms: u64,
    /// WebSocket servers: a ping every this many milliseconds.
    pub ws_ping_interval_ms: u64,
    /// WebSocket servers: a pong (or a write) not done within this many milliseconds
    /// declares the connection broken (it is then reconnected).
    pub ws_pong_timeout_ms: u64,
}

impl Default for ServerDefaults {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 1_000,
            timeout_ms: 10_000,
            deadline_ms: 15_000,
            max_concurrency: 256,
            cache_ttl_ms: 0,
            max_result_bytes: 1024 * 1024,
            // Above Lambda's 6 MB response limit, so every answer a function can give fits,
            // and 8× `max_result_bytes`, so a result that is cut later still arrives whole.
            max_response_bytes: 8 * 1024 * 1024,
            // Above the 10,006 tools (2.1 MB) of the catalogue-scale test from one server.
            max_tools: 20_000,
            max_tool_definition_bytes: 64 * 1024,
            max_catalogue_bytes: 8 * 1024 * 1024,
            max_list_pages: 100,
            retry: RetrySettings::default(),
            breaker: BreakerSettings::default(),
            reconnect_initial_ms: 1_000,
            reconnect_max_ms: 30_000,
            reconnect_give_up_ms: 600_000,
            reconnect_slow_retry_ms: 300_000,
            stdio_stop_grace_ms: 2_000,
            ws_ping_interval_ms: 15_000,
            ws_pong_timeout_ms: 10_000,
        }
    }
}

/// The transport an upstream server is reached by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Streamable HTTP (both protocol eras).
    Http,
    /// AWS Lambda direct `Invoke`.
    Lambda,
    /// A persistent WebSocket connection (`url = "ws://…"`), multiplexed by JSON-RPC id.
    Websocket,
    /// The 2024-11-05 HTTP+SSE transport (`url = "http://…/sse"`).
    Sse,
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio,
    /// A REST service described by an OpenAPI document: each operation is a tool
    /// ([`crate::openapi`]).
    Openapi,
}

impl TransportKind {
    pub const ALL: [TransportKind; 6] = [
        TransportKind::Http,
        TransportKind::Lambda,
        TransportKind::Websocket,
        TransportKind::Sse,
        TransportKind::Stdio,
        TransportKind::Openapi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Http => "http",
            TransportKind::Lambda => "lambda",
            TransportKind::Websocket => "websocket",
            TransportKind::Sse => "sse",
            TransportKind::Stdio => "stdio",
            TransportKind::Openapi => "openapi",
        }
    }

    /// The kind a registry entry's `transport` names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// One long-lived connection per server, run by [`crate::upstream::connection`].
    pub fn is_persistent(self) -> bool {
        matches!(self, TransportKind::Websocket | TransportKind::Sse | TransportKind::Stdio)
    }

    /// Needs `url`.
    pub fn needs_url(self) -> bool {
        matches!(self, TransportKind::Http | TransportKind::Websocket | TransportKind::Sse)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub transport: TransportKind,
    /// Streamable HTTP endpoint, e.g. `http://catalog.internal:8080/mcp`; the WebSocket URL
    /// (`ws://…`, `wss://…`) or the legacy SSE stream URL (`http://…/sse`).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub url: Option<String>,
    /// stdio: the program to run.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub args: Vec<String>,
    /// stdio: its environment besides `PATH`, `HOME`, … Never logged or printed.
    #[serde(default, deserialize_with = "lenient::string_map")]
    pub env: BTreeMap<String, String>,
    /// Lambda function name or ARN.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub function: Option<String>,
    /// Lambda alias or version.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub qualifier: Option<String>,
    /// Lambda: what the function takes as its event — `jsonrpc` (one JSON-RPC request) or
    /// `agentcore` (AgentCore Gateway's Lambda target contract: bare arguments, the tool named
    /// in the client context; no `tools/list`, so never discovered).
    #[serde(default)]
    pub lambda_event: LambdaEvent,
    /// `lambda_event = "agentcore"`: the target in `bedrockAgentCoreToolName =
    /// "<target>___<tool>"` (default: the server's name).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub agentcore_target: Option<String>,
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    #[serde(default)]
    pub max_response_bytes: Option<usize>,
    /// Overrides of the `defaults` list bounds (`max_tools`, `max_tool_definition_bytes`,
    /// `max_catalogue_bytes`, `max_list_pages`).
    #[serde(default)]
    pub max_tools: Option<usize>,
    #[serde(default)]
    pub max_tool_definition_bytes: Option<usize>,
    #[serde(default)]
    pub max_catalogue_bytes: Option<usize>,
    #[serde(default)]
    pub max_list_pages: Option<usize>,
    /// Replaces `[defaults.retry]` for this server.
    #[serde(default)]
    pub retry: Option<RetrySettings>,
    /// Replaces `[defaults.breaker]` for this server.
    #[serde(default)]
    pub breaker: Option<BreakerSettings>,
    /// Overrides of the `defaults.reconnect_*` delays (persistent transports).
    #[serde(default)]
    pub reconnect_initial_ms: Option<u64>,
    #[serde(default)]
    pub reconnect_max_ms: Option<u64>,
    #[serde(default)]
    pub reconnect_give_up_ms: Option<u64>,
    #[serde(default)]
    pub reconnect_slow_retry_ms: Option<u64>,
    /// Learn the tools from the server's own `tools/list` (on start and every refresh).
    #[serde(default = "yes")]
    pub discover: bool,
    /// Registry entries naming this server may use it (its address, headers and
    /// credentials) whatever address they carry. Off: an entry naming it is served only
    /// when it carries this server's transport and address, and refused otherwise
    /// (`docs/security-edge-and-registry.md`).
    #[serde(default)]
    pub registry_may_use: bool,
    /// URI prefixes whose resources this server serves, listed or not (links in tool
    /// results): `resources/read` of a URI under one goes here, before any listing or
    /// template; it also names the owner of a URI two servers list.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub resource_prefixes: Vec<String>,
    /// Whether this server's tools are exposed as `server__tool`: `on_collision` (default),
    /// `always` or `never` ([`crate::tool_control::ToolPrefix`]).
    #[serde(default)]
    pub prefix: crate::tool_control::ToolPrefix,
    /// Extra HTTP headers sent upstream (e.g. authorization). Never logged.
    #[serde(default, deserialize_with = "lenient::string_map")]
    pub headers: BTreeMap<String, String>,
    /// Tools described statically (used as is, and kept even when discovery fails).
    #[serde(default)]
    pub tools: Vec<Value>,
    /// More static tools, from a JSON file: an array of tool definitions as AgentCore targets
    /// declare them (name, description, inputSchema, optional outputSchema, annotations),
    /// checked at load.
    #[serde(default)]
    pub tools_file: Option<std::path::PathBuf>,
    /// The definitions read from `tools_file` at load (served after `tools`).
    #[serde(skip)]
    pub file_tools: Vec<Value>,
    /// How the gateway authenticates to this server beyond static `headers`: OAuth client
    /// credentials, token exchange, SigV4 or pass-through (`[servers.NAME.auth]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<UpstreamAuthConfig>,
    /// `transport = "openapi"`: the OpenAPI document (a file path or an http(s) URL).
    #[serde(default, deserialize_with = "lenient::opt_string", skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// `transport = "openapi"`: where its operations are called (default: the document's
    /// first `servers` entry, its variables at their defaults).
    #[serde(default, deserialize_with = "lenient::opt_string", skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `transport = "openapi"`: the operations served (`operation:ID`, `tag:NAME`,
    /// `path:GLOB` or `path:METHOD GLOB`; empty: every operation) …
    #[serde(default, deserialize_with = "lenient::strings", skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// … minus these (same selectors).
    #[serde(default, deserialize_with = "lenient::strings", skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// `transport = "openapi"`: the credentials of the document's `securitySchemes`, by
    /// scheme name (values from the environment or a file; never logged or printed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security: BTreeMap<String, SchemeCredential>,
    /// `transport = "openapi"`: the bounds of the document (bytes, operations, schema depth;
    /// [`crate::openapi::Limits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spec_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_operations: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_schema_depth: Option<usize>,
    /// `transport = "openapi"`: the most bytes one request body may take as sent (files
    /// decoded, multipart framing included); default: the gateway's `max_body_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<usize>,
    /// The document of a file `spec`, read and mapped at load (`check-config` reports it).
    #[serde(skip)]
    pub openapi_document: Option<std::sync::Arc<crate::openapi::Mapped>>,
}

fn yes() -> bool {
    true
}

impl ServerConfig {
    /// A server with every setting at its default (built at run time: the demo server,
    /// servers known from registry entries).
    pub fn new(
        transport: TransportKind,
        url: Option<String>,
        function: Option<String>,
        qualifier: Option<String>,
    ) -> Self {
        Self {
            transport,
            url,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            function,
            qualifier,
            lambda_event: LambdaEvent::Jsonrpc,
            agentcore_target: None,
            connect_timeout_ms: None,
            timeout_ms: None,
            deadline_ms: None,
            max_concurrency: None,
            max_response_bytes: None,
            max_tools: None,
            max_tool_definition_bytes: None,
            max_catalogue_bytes: None,
            max_list_pages: None,
            retry: None,
            breaker: None,
            reconnect_initial_ms: None,
            reconnect_max_ms: None,
            reconnect_give_up_ms: None,
            reconnect_slow_retry_ms: None,
            discover: true,
            registry_may_use: false,
            resource_prefixes: Vec::new(),
            prefix: crate::tool_control::ToolPrefix::default(),
            headers: BTreeMap::new(),
            tools: Vec::new(),
            tools_file: None,
            file_tools: Vec::new(),
            auth: None,
            spec: None,
            base_url: None,
            include: Vec::new(),
            exclude: Vec::new(),
            security: BTreeMap::new(),
            max_spec_bytes: None,
            max_request_bytes: None,
            max_operations: None,
            max_schema_depth: None,
            openapi_document: None,
        }
    }

    pub fn connect_timeout(&self, defaults: &ServerDefaults) -> Duration {
        Duration::from_millis(self.connect_timeout_ms.unwrap_or(defaults.connect_timeout_ms))
    }

    pub fn timeout(&self, defaults: &ServerDefaults) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(defaults.timeout_ms))
    }

    pub fn deadline(&self, defaults: &ServerDefaults) -> Duration {
        Duration::from_millis(self.deadline_ms.unwrap_or(defaults.deadline_ms))
    }

    pub fn max_concurrency(&self, defaults: &ServerDefaults) -> usize {
        self.max_concurrency.unwrap_or(defaults.max_concurrency).max(1)
    }

    /// At least 1 KiB: a smaller cap would refuse every answer.
    pub fn max_response_bytes(&self, defaults: &ServerDefaults) -> usize {
        self.max_response_bytes.unwrap_or(defaults.max_response_bytes).max(1024)
    }

    /// What this server's `tools/list` may hold (see [`crate::registry::bounds`]).
    pub fn tool_list_bounds(&self, defaults: &ServerDefaults) -> ListBounds {
        ListBounds {
            max_pages: self.max_list_pages.unwrap_or(defaults.max_list_pages),
            max_count: self.max_tools.unwrap_or(defaults.max_tools),
            max_definition_bytes: self
                .max_tool_definition_bytes
                .unwrap_or(defaults.max_tool_definition_bytes),
            max_list_bytes: self.max_catalogue_bytes.unwrap_or(defaults.max_catalogue_bytes),
        }
    }

    pub fn retry<'a>(&'a self, defaults: &'a ServerDefaults) -> &'a RetrySettings {
        self.retry.as_ref().unwrap_or(&defaults.retry)
    }

    pub fn breaker<'a>(&'a self, defaults: &'a ServerDefaults) -> &'a BreakerSettings {
        self.breaker.as_ref().unwrap_or(&defaults.breaker)
    }

    /// The reconnect schedule of a persistent transport.
    pub fn reconnect(&self, defaults: &ServerDefaults) -> ReconnectSettings {
        let ms = |own: Option<u64>, default: u64| Duration::from_millis(own.unwrap_or(default));
        let initial =
            ms(self.reconnect_initial_ms, defaults.reconnect_initial_ms).max(Duration::from_millis(1));
        ReconnectSettings {
            initial,
            max: ms(self.reconnect_max_ms, defaults.reconnect_max_ms).max(initial),
            give_up_after: ms(self.reconnect_give_up_ms, defaults.reconnect_give_up_ms),
            slow_retry: ms(self.reconnect_slow_retry_ms, defaults.reconnect_slow_retry_ms)
                .max(Duration::from_millis(1)),
        }
    }

    /// The command of a stdio server.
    pub fn stdio_command(&self) -> Option<StdioCommand> {
        Some(StdioCommand { command: self.command.clone()?, args: self.args.clone(), env: self.env.clone() })
    }
}

/// When a persistent connection is tried again (see `defaults.reconnect_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectSettings {
    pub initial: Duration,
    pub max: Duration,
    pub give_up_after: Duration,
    pub slow_retry: Duration,
}

/// What one server's list may hold (the settings; `registry::bounds` counts a list against
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListBounds {
    /// Most pages followed.
    pub max_pages: usize,
    /// Most items.
    pub max_count: usize,
    /// Most bytes of one item's definition.
    pub max_definition_bytes: usize,
    /// Most bytes of all definitions together.
    pub max_list_bytes: usize,
}
