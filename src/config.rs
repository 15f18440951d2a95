//! Configuration: a TOML file, then `MCP_GATEWAY_*` environment overrides, then CLI flags.
//!
//! Every key can be overridden from the environment, as ECS task definitions set them:
//! `MCP_GATEWAY_<KEY>` for a top-level key and `__` between nesting levels, e.g.
//! `MCP_GATEWAY_LISTEN=127.0.0.1:9000`, `MCP_GATEWAY_SERVERS__CATALOG__URL=http://…/mcp`,
//! `MCP_GATEWAY_AWS__ENDPOINT_URL=http://127.0.0.1:9001`. Keys are matched lower-cased.
//! A value is read as TOML when it parses as a TOML value (numbers, booleans, arrays, inline
//! tables) and as a plain string otherwise; string settings take a numeric-looking value as
//! its text ([`lenient`]), so `MCP_GATEWAY_SERVERS__X__QUALIFIER=7` is the qualifier `"7"`.
//! The variables of the command line itself (`MCP_GATEWAY_CONFIG`, `MCP_GATEWAY_LOG_FORMAT`,
//! see [`CLI_ENV`]) are not configuration keys and are left to the CLI.

mod admin;
mod audit;
mod auth;
mod catalogue;
mod inbound;
mod lambda_targets;
mod lenient;
mod quotas;
mod registry_trust;
mod resilience;
mod upstream_auth;

pub use admin::AdminSettings;
pub use audit::{AuditConfig, AuditSinkKind};
pub use auth::{ASYMMETRIC_ALGORITHMS, AuthConfig, AuthMode, PolicyConfig};
pub use catalogue::CatalogueConfig;
pub use inbound::InboundLimits;
pub use lambda_targets::{LambdaEvent, TARGET_SEPARATOR, check_definition, load_tools_file};
pub use quotas::{QuotaRule, QuotaScope, QuotasConfig};
pub use registry_trust::{RemoteMissBudget, UpstreamUrlSettings};
pub use resilience::{BreakerSettings, RetrySettings};
pub use upstream_auth::{
    ACCESS_TOKEN_TYPE, AuthKind, ClientAuthMethod, DEFAULT_SIGV4_SERVICE, UpstreamAuthConfig,
};

use std::{collections::BTreeMap, net::SocketAddr, path::Path, time::Duration};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The environment variable prefix for overrides.
pub const ENV_PREFIX: &str = "MCP_GATEWAY_";

/// Environment variables with the prefix that belong to the command line (flags' `env`), not
/// to the configuration: the overlay skips them.
pub const CLI_ENV: &[&str] = &["MCP_GATEWAY_CONFIG", "MCP_GATEWAY_LOG_FORMAT"];

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address of the inbound MCP endpoint. Loopback unless `allow_non_loopback`.
    pub listen: SocketAddr,
    /// Binding a non-loopback address must be asked for explicitly.
    pub allow_non_loopback: bool,
    /// A second listener serving only `GET /metrics` (e.g. `0.0.0.0:9464` for a collector
    /// container). Any address is allowed: metrics carry no tool arguments or results.
    pub metrics_listen: Option<SocketAddr>,
    /// Largest accepted POST body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Browser origins allowed besides loopback ones (others get 403).
    #[serde(deserialize_with = "lenient::strings")]
    pub allowed_origins: Vec<String>,
    /// How often each server's `tools/list` is read again, in seconds.
    pub refresh_interval_secs: u64,
    /// How long shutdown waits for in-flight calls, in seconds.
    pub shutdown_grace_secs: u64,
    /// `/readyz` answers 200 only once the catalogue holds at least this many tools (0: ready
    /// as soon as the first refresh is done, even with no tool).
    pub ready_min_tools: usize,
    /// `tracing` filter, e.g. `info` or `mcp_gateway=debug`.
    #[serde(deserialize_with = "lenient::string")]
    pub log_level: String,
    /// Runtime threads: 1 runs everything on one thread (lowest latency for a sidecar with a
    /// fraction of a core); 0 uses one worker per CPU.
    pub worker_threads: usize,
    /// Defaults applied to every server that does not set its own value.
    pub defaults: ServerDefaults,
    /// AWS settings for Lambda upstreams.
    pub aws: AwsConfig,
    /// The upstream MCP servers, by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Per-tool settings: routes (a tool name bound to a server wins every name conflict),
    /// fallbacks, caching, result size budget.
    pub tools: BTreeMap<String, ToolConfig>,
    /// Redis URL (e.g. `redis://127.0.0.1:6379`) for state shared across gateway instances.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub redis_url: Option<String>,
    /// PEM file of the CA that signs the Redis server certificate (a private CA); without it
    /// a `rediss://` server is checked against the bundled public roots.
    pub redis_ca_file: Option<std::path::PathBuf>,
    /// `redis_url` is a Redis Cluster (one seed node, or several separated by commas).
    pub redis_cluster: bool,
    /// Share circuit breaker state across instances through `redis_url`.
    pub shared_breakers: bool,
    /// DynamoDB table of registered tools (enables the DynamoDB tier).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dynamodb_table: Option<String>,
    /// DynamoDB endpoint override (DynamoDB Local in tests).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub dynamodb_endpoint: Option<String>,
    /// Registry tiers: memory → Redis (`redis_url`) → DynamoDB (`dynamodb_table`).
    pub registry: RegistryConfig,
    /// Bounds of the read-only result cache (also the store of stale fallbacks).
    pub cache: CacheConfig,
    /// Leave the tools of unavailable servers (breaker open, unreachable, refused
    /// credentials) out of `tools/list` and of `/tools` exports.
    pub hide_unavailable_tools: bool,
    /// The only commands a registry entry may start (`transport = "stdio"` entries name one
    /// of these by key): a DynamoDB item can pick among them, never supply a command, its
    /// arguments or its environment. Configured `[servers.NAME]` need no entry here.
    pub stdio_commands: BTreeMap<String, StdioCommand>,
    /// Call quotas per (caller, tool) and per (caller, server), shared through `redis_url`.
    pub quotas: QuotasConfig,
    /// The audit trail: one JSON line per `tools/call` decision.
    pub audit: AuditConfig,
    /// What an upstream may do to the catalogue: refresh bounds, definition pinning, metric
    /// label bounds (`[catalogue]`).
    pub catalogue: CatalogueConfig,
    /// Bounds on what inbound callers can make the gateway hold (`[inbound]`, see
    /// `docs/security-inbound-bounds.md`).
    pub inbound: InboundLimits,
    /// Caller identity: anonymous (default), JWT bearer tokens, or trusted headers.
    pub auth: AuthConfig,
    /// Tool policy (Cedar): which caller may list and call which tool.
    pub policy: PolicyConfig,
    /// Who may use `/admin/*`: a bearer token and/or a listener of their own (off unless
    /// configured; see `docs/security-edge-and-registry.md`).
    pub admin: AdminSettings,
}

/// A command a stdio server runs as (`[servers.NAME]` of `transport = "stdio"`, or
/// `[stdio_commands.NAME]` for registry entries).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StdioCommand {
    /// The program (a path, or a name looked up in `PATH`).
    #[serde(deserialize_with = "lenient::string")]
    pub command: String,
    #[serde(deserialize_with = "lenient::strings")]
    pub args: Vec<String>,
    /// Environment of the child besides the few variables it inherits (`PATH`, `HOME`, …);
    /// values are never logged or printed.
    #[serde(deserialize_with = "lenient::string_map")]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// How long a tool looked up in Redis/DynamoDB is kept in memory, in seconds.
    pub memory_ttl_secs: u64,
    /// How long an unknown name is remembered as unknown, in seconds.
    pub negative_ttl_secs: u64,
    /// Most looked-up tools kept in memory.
    pub memory_max_entries: usize,
    /// Redis key prefix of registry entries.
    #[serde(deserialize_with = "lenient::string")]
    pub redis_prefix: String,
    /// TTL of registry entries in Redis, in seconds.
    pub redis_ttl_secs: u64,
    /// Longest a Redis call may take before it is skipped, in milliseconds.
    pub redis_timeout_ms: u64,
    /// Longest a DynamoDB call may take, in milliseconds.
    pub dynamodb_timeout_ms: u64,
    /// After a failed DynamoDB call, lookups skip DynamoDB (serving the last known entry)
    /// for this long, in milliseconds; then one lookup tries again.
    pub dynamodb_backoff_ms: u64,
    /// Items per DynamoDB scan page (0: DynamoDB's own 1 MB pages).
    pub scan_page_size: u32,
    /// Compare registered tools with their servers' live `tools/list` this often (0: only
    /// on demand, `GET /admin/registry/drift`).
    pub drift_interval_secs: u64,
    /// Where registry entries may point (`[registry.upstream_urls]`).
    pub upstream_urls: UpstreamUrlSettings,
    /// Lookups below memory for names not in the catalogue (`[registry.remote_misses]`).
    pub remote_misses: RemoteMissBudget,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            memory_ttl_secs: 30,
            negative_ttl_secs: 5,
            memory_max_entries: 10_000,
            redis_prefix: "mcp:tool:".into(),
            redis_ttl_secs: 60,
            redis_timeout_ms: 5,
            dynamodb_timeout_ms: 1_000,
            dynamodb_backoff_ms: 5_000,
            scan_page_size: 0,
            drift_interval_secs: 0,
            upstream_urls: UpstreamUrlSettings::default(),
            remote_misses: RemoteMissBudget::default(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Most results kept (oldest evicted first).
    pub max_entries: usize,
    /// How old a last good result may be to serve as a stale fallback, in milliseconds.
    pub stale_max_age_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self { max_entries: 10_000, stale_max_age_ms: 300_000 }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            allow_non_loopback: false,
            metrics_listen: None,
            max_body_bytes: 1024 * 1024,
            allowed_origins: Vec::new(),
            refresh_interval_secs: 300,
            shutdown_grace_secs: 30,
            ready_min_tools: 1,
            log_level: "info".into(),
            worker_threads: 1,
            defaults: ServerDefaults::default(),
            aws: AwsConfig::default(),
            servers: BTreeMap::new(),
            tools: BTreeMap::new(),
            redis_url: None,
            redis_ca_file: None,
            redis_cluster: false,
            shared_breakers: false,
            hide_unavailable_tools: false,
            dynamodb_table: None,
            dynamodb_endpoint: None,
            registry: RegistryConfig::default(),
            cache: CacheConfig::default(),
            stdio_commands: BTreeMap::new(),
            quotas: QuotasConfig::default(),
            audit: AuditConfig::default(),
            catalogue: CatalogueConfig::default(),
            inbound: InboundLimits::default(),
            auth: AuthConfig::default(),
            policy: PolicyConfig::default(),
            admin: AdminSettings::default(),
        }
    }
}

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

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AwsConfig {
    /// Region; falls back to the standard chain (`AWS_REGION`, profile, IMDS).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub region: Option<String>,
    /// Endpoint override (tests, local emulators). Production leaves it unset.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub endpoint_url: Option<String>,
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
}

impl TransportKind {
    pub const ALL: [TransportKind; 5] = [
        TransportKind::Http,
        TransportKind::Lambda,
        TransportKind::Websocket,
        TransportKind::Sse,
        TransportKind::Stdio,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Http => "http",
            TransportKind::Lambda => "lambda",
            TransportKind::Websocket => "websocket",
            TransportKind::Sse => "sse",
            TransportKind::Stdio => "stdio",
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
            retry: None,
            breaker: None,
            reconnect_initial_ms: None,
            reconnect_max_ms: None,
            reconnect_give_up_ms: None,
            reconnect_slow_retry_ms: None,
            discover: true,
            headers: BTreeMap::new(),
            tools: Vec::new(),
            tools_file: None,
            file_tools: Vec::new(),
            auth: None,
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

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolConfig {
    /// The server that owns this tool name when several offer it.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub server: Option<String>,
    /// Serve the last good result (marked stale) when the server fails or its circuit is
    /// open. Read-only tools only.
    pub stale_fallback: bool,
    /// Call this tool instead when the server fails or its circuit is open.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub fallback_tool: Option<String>,
    /// Overrides `defaults.cache_ttl_ms` for this tool (read-only tools only).
    pub cache_ttl_ms: Option<u64>,
    /// Overrides `defaults.max_result_bytes` for this tool.
    pub max_result_bytes: Option<usize>,
}

impl Config {
    /// Loads the file (if any), applies environment overrides, and validates.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<toml::Table>(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => toml::Table::new(),
        };
        apply_env_overrides(&mut table, env)?;
        let mut config: Config =
            toml::Value::Table(table.clone()).try_into().context("invalid configuration")?;
        lambda_targets::prepare(&mut config, &table)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde cannot: cross-references and required per-transport keys.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, server) in &self.servers {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                bail!("server name {name:?} must match [a-zA-Z0-9_-]+");
            }
            match server.transport {
                kind if kind.needs_url() && server.url.is_none() => {
                    bail!("server {name}: transport \"{}\" needs `url`", kind.as_str())
                }
                TransportKind::Websocket
                    if !server
                        .url
                        .as_deref()
                        .is_some_and(|u| u.starts_with("ws://") || u.starts_with("wss://")) =>
                {
                    bail!("server {name}: transport \"websocket\" needs a ws:// or wss:// `url`")
                }
                TransportKind::Sse
                    if !server
                        .url
                        .as_deref()
                        .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://")) =>
                {
                    bail!(
                        "server {name}: transport \"sse\" needs the http:// or https:// `url` of the SSE stream"
                    )
                }
                TransportKind::Stdio if server.command.as_deref().is_none_or(|c| c.trim().is_empty()) => {
                    bail!("server {name}: transport \"stdio\" needs `command` (the program to run)")
                }
                TransportKind::Lambda if server.function.is_none() => {
                    bail!("server {name}: transport \"lambda\" needs `function`")
                }
                _ => {}
            }
            if !server.discover
                && server.tools.is_empty()
                && server.file_tools.is_empty()
                && !server.is_agentcore()
            {
                bail!("server {name}: with discover = false it needs static `tools` (or `tools_file`)");
            }
            lambda_targets::validate(name, server, self)?;
            if let Some(auth) = &server.auth {
                auth.validate(name)?;
                if server.transport != TransportKind::Http {
                    bail!(
                        "server {name}: `auth` applies to transport \"http\" only (Lambda uses the gateway's IAM role; persistent connections are shared by every caller)"
                    );
                }
            }
        }
        for (tool, settings) in &self.tools {
            if let Some(server) = &settings.server
                && !self.servers.contains_key(server)
            {
                bail!("tools.{tool}: unknown server {server:?}");
            }
            if settings.fallback_tool.as_deref() == Some(tool.as_str()) {
                bail!("tools.{tool}: a tool cannot be its own fallback");
            }
        }
        if self.shared_breakers && self.redis_url.is_none() {
            bail!("shared_breakers needs redis_url");
        }
        if (self.redis_cluster || self.redis_ca_file.is_some()) && self.redis_url.is_none() {
            bail!("redis_cluster and redis_ca_file need redis_url");
        }
        self.defaults.retry.validate("defaults")?;
        self.defaults.breaker.validate("defaults")?;
        for (name, server) in &self.servers {
            server.retry(&self.defaults).validate(name)?;
            server.breaker(&self.defaults).validate(name)?;
        }
        for (name, command) in &self.stdio_commands {
            if command.command.trim().is_empty() {
                bail!("stdio_commands.{name}: `command` must name the program to run");
            }
        }
        if self.max_body_bytes == 0 {
            bail!("max_body_bytes must be positive");
        }
        self.quotas.validate()?;
        self.audit.validate()?;
        self.catalogue.validate()?;
        self.inbound.validate()?;
        self.auth.validate(self.listen)?;
        self.admin.validate()?;
        Ok(())
    }
}

/// Applies `MCP_GATEWAY_A__B=value` as `table.a.b = value`.
fn apply_env_overrides(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<()> {
    let mut vars: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| {
            k.starts_with(ENV_PREFIX) && k.len() > ENV_PREFIX.len() && !CLI_ENV.contains(&k.as_str())
        })
        .collect();
    vars.sort();
    for (key, raw) in vars {
        let path: Vec<String> = key[ENV_PREFIX.len()..].split("__").map(str::to_ascii_lowercase).collect();
        if path.iter().any(String::is_empty) {
            bail!("environment variable {key}: empty key segment");
        }
        let value = parse_env_value(&raw);
        let (last, parents) = path.split_last().expect("non-empty path");
        let mut cursor = &mut *table;
        for segment in parents {
            let entry =
                cursor.entry(segment.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cursor = match entry {
                toml::Value::Table(t) => t,
                _ => bail!("environment variable {key}: {segment} is not a table"),
            };
        }
        cursor.insert(last.clone(), value);
    }
    Ok(())
}

fn parse_env_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        // No setting is a date: `2024-01-01` stays the text it is.
        .filter(|v| !matches!(v, toml::Value::Datetime(_)))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn environment_overrides_every_level() {
        let config = Config::load(
            None,
            env(&[
                ("MCP_GATEWAY_LISTEN", "127.0.0.1:9999"),
                ("MCP_GATEWAY_MAX_BODY_BYTES", "2048"),
                ("MCP_GATEWAY_SERVERS__CATALOG__TRANSPORT", "http"),
                ("MCP_GATEWAY_SERVERS__CATALOG__URL", "http://127.0.0.1:1/mcp"),
                ("MCP_GATEWAY_SERVERS__CATALOG__TIMEOUT_MS", "250"),
                ("MCP_GATEWAY_AWS__ENDPOINT_URL", "http://127.0.0.1:2"),
                ("MCP_GATEWAY_ALLOWED_ORIGINS", r#"["https://shop.example"]"#),
                ("UNRELATED", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(config.listen.port(), 9999);
        assert_eq!(config.max_body_bytes, 2048);
        let catalog = &config.servers["catalog"];
        assert_eq!(catalog.transport, TransportKind::Http);
        assert_eq!(catalog.timeout(&config.defaults), Duration::from_millis(250));
        assert_eq!(config.aws.endpoint_url.as_deref(), Some("http://127.0.0.1:2"));
        assert_eq!(config.allowed_origins, vec!["https://shop.example"]);
    }

    #[test]
    fn string_keys_take_numeric_looking_values_and_cli_variables_are_skipped() {
        let config = Config::load(
            None,
            env(&[
                ("MCP_GATEWAY_SERVERS__FN__TRANSPORT", "lambda"),
                ("MCP_GATEWAY_SERVERS__FN__FUNCTION", "12345"),
                ("MCP_GATEWAY_SERVERS__FN__QUALIFIER", "7"),
                ("MCP_GATEWAY_SERVERS__FN__HEADERS__X_TENANT", "42"),
                ("MCP_GATEWAY_DYNAMODB_TABLE", "2024-01-01"),
                ("MCP_GATEWAY_REGISTRY__REDIS_PREFIX", "true"),
                ("MCP_GATEWAY_CONFIG", "/nonexistent.toml"),
                ("MCP_GATEWAY_LOG_FORMAT", "text"),
            ]),
        )
        .unwrap();
        let server = &config.servers["fn"];
        assert_eq!(server.qualifier.as_deref(), Some("7"));
        assert_eq!(server.function.as_deref(), Some("12345"));
        assert_eq!(server.headers["x_tenant"], "42");
        assert_eq!(config.dynamodb_table.as_deref(), Some("2024-01-01"));
        assert_eq!(config.registry.redis_prefix, "true");
        // Numeric keys still refuse text.
        let err = Config::load(None, env(&[("MCP_GATEWAY_MAX_BODY_BYTES", "lots")])).unwrap_err();
        assert!(format!("{err:#}").contains("max_body_bytes"), "{err:#}");
    }

    #[test]
    fn invalid_configurations_are_refused_with_a_reason() {
        let err = Config::load(None, env(&[("MCP_GATEWAY_SERVERS__X__TRANSPORT", "lambda")])).unwrap_err();
        assert!(format!("{err:#}").contains("needs `function`"));
        let err = Config::load(None, env(&[("MCP_GATEWAY_LISTEN_PORT", "1")])).unwrap_err();
        assert!(format!("{err:#}").contains("unknown field"));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Keys near the real ones (and not), values of every TOML shape (and not).
        fn pair() -> impl Strategy<Value = (String, String)> {
            let key = prop_oneof![
                Just("MCP_GATEWAY_MAX_BODY_BYTES".to_string()),
                Just("MCP_GATEWAY_INBOUND__MAX_BATCH_ITEMS".to_string()),
                Just("MCP_GATEWAY_SERVERS__A__URL".to_string()),
                Just("MCP_GATEWAY_SERVERS__A__TRANSPORT".to_string()),
                Just("MCP_GATEWAY_LISTEN".to_string()),
                Just("MCP_GATEWAY_DEFAULTS__RETRY__BUDGET_RATIO".to_string()),
                "MCP_GATEWAY_[A-Z_]{0,12}(__[A-Z_]{0,6}){0,3}",
                "[ -~]{0,16}",
            ];
            let value = prop_oneof![
                Just("0".to_string()),
                Just("true".to_string()),
                Just("[1, 2]".to_string()),
                Just("{ a = 1 }".to_string()),
                Just("http://127.0.0.1:1/mcp".to_string()),
                Just("1979-05-27".to_string()),
                any::<String>(),
            ];
            (key, value)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any environment: a configuration that validates, or an error; never a panic.
            #[test]
            fn arbitrary_environments_give_a_config_or_an_error(pairs in prop::collection::vec(pair(), 0..6)) {
                if let Ok(config) = Config::load(None, pairs) {
                    prop_assert!(config.validate().is_ok());
                    prop_assert!(config.inbound.max_batch_items > 0 && config.max_body_bytes > 0);
                }
            }

            /// A numeric key: any text is that number or an error, never a panic; a plain
            /// positive number is taken as it is.
            #[test]
            fn a_numeric_key_takes_a_number_or_fails(raw in any::<String>(), number in "[1-9][0-9]{0,5}") {
                let key = "MCP_GATEWAY_INBOUND__MAX_BATCH_ITEMS".to_string();
                if let Ok(config) = Config::load(None, vec![(key.clone(), raw)]) {
                    prop_assert!(config.inbound.max_batch_items > 0);
                }
                let config = Config::load(None, vec![(key, number.clone())]);
                prop_assert_eq!(config.map(|c| c.inbound.max_batch_items).ok(), number.parse::<usize>().ok());
            }
        }
    }
}
