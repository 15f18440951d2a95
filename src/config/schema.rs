//! The configuration's top level: the [`Config`] struct every part of the gateway reads, and
//! the small sections that belong to no room of their own (registry tiers, result cache, AWS,
//! stdio commands, per-tool settings), with their defaults. The per-server schema is in
//! [`super::server`]; the larger sections each have a file of their own beside this one.

use std::{collections::BTreeMap, net::SocketAddr};

use serde::{Deserialize, Serialize};

use super::{
    AdminSettings, AuditConfig, AuthConfig, CatalogueConfig, InboundLimits, MetricsSettings, PolicyConfig,
    QuotasConfig, RemoteMissBudget, ServerConfig, ServerDefaults, UpstreamUrlSettings, lenient,
};

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
    /// Whether `GET /metrics` is also served on the MCP listener (`[metrics]`: open without
    /// `[auth]`, closed with it, unless configured).
    pub metrics: MetricsSettings,
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
    /// Catalogue control of prompts (`[prompts.NAME]`: rename, description, hide).
    pub prompts: BTreeMap<String, super::surface_control::PromptControl>,
    /// Catalogue control of resources (`[resources]`: hide, descriptions).
    pub resources: super::surface_control::ResourceControl,
    /// Endpoints per audience (`[endpoints.NAME]`, served at `/mcp/NAME`).
    pub endpoints: BTreeMap<String, super::endpoints::EndpointConfig>,
    /// Whether the plain `/mcp` (the whole catalogue) is served; `false` leaves only the
    /// endpoints (`/mcp` is then 404).
    pub serve_plain_mcp: bool,
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
    /// MCP tasks relayed through the gateway: the routing table's bounds (`[tasks]`).
    pub tasks: super::TasksConfig,
    /// Guardrail hooks on `tools/call` (`[[hooks]]`, see `docs/hooks.md`), in the order they run.
    pub hooks: Vec<super::HookConfig>,
    /// Calls that wait for a person's approval (`[approvals]`, see `docs/approvals.md`).
    pub approvals: super::ApprovalsConfig,
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
            metrics: MetricsSettings::default(),
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
            prompts: BTreeMap::new(),
            resources: super::surface_control::ResourceControl::default(),
            endpoints: BTreeMap::new(),
            serve_plain_mcp: true,
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
            tasks: super::TasksConfig::default(),
            approvals: super::ApprovalsConfig::default(),
            hooks: Vec::new(),
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
    /// Catalogue control (see `crate::tool_control`): the name callers see instead of
    /// this one (the server still gets its own).
    #[serde(deserialize_with = "lenient::opt_string", skip_serializing_if = "Option::is_none")]
    pub rename: Option<String>,
    /// Replaces the server's description.
    #[serde(deserialize_with = "lenient::opt_string", skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Left out of `tools/list`, the exports, `/capabilities` and search; a call is `unknown_tool`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hide: bool,
    /// MCP annotations set over the server's (`title`, `readOnlyHint`, `destructiveHint`,
    /// `idempotentHint`, `openWorldHint`).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub annotations: serde_json::Map<String, serde_json::Value>,
    /// Arguments the gateway sets on every call, removed from the schema callers see; a caller
    /// sending one is refused (`bad_input`).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub fixed_arguments: serde_json::Map<String, serde_json::Value>,
    /// Arguments filled in when a call leaves them out, shown as `default` in the schema.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub default_arguments: serde_json::Map<String, serde_json::Value>,
}

impl ToolConfig {
    /// The catalogue control keys of this section.
    pub fn overrides(&self) -> crate::tool_control::ToolOverrides {
        crate::tool_control::ToolOverrides {
            rename: self.rename.clone(),
            description: self.description.clone(),
            hide: self.hide,
            annotations: self.annotations.clone(),
            fixed_arguments: self.fixed_arguments.clone(),
            default_arguments: self.default_arguments.clone(),
        }
    }
}
