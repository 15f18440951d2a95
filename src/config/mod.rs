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
//!
//! The files, by job: [`schema`] the top-level struct and its small sections, [`server`] one
//! upstream server and the defaults it falls back to, [`env`] the environment overlay,
//! [`load`] file → overlay → typed, [`validate`] what serde cannot check; the larger sections
//! (auth, quotas, audit, inbound bounds, …) each in a file named after its `[section]`.

mod admin;
pub mod approvals;
mod audit;
mod auth;
mod catalogue;
pub mod endpoints;
mod env;
pub mod hooks;
mod inbound;
mod lambda_targets;
mod lenient;
mod load;
mod metrics;
mod openapi_target;
mod quotas;
mod registry_trust;
mod resilience;
pub mod restart_only;
mod schema;
mod server;
pub mod surface_control;
mod tasks;
mod tool_control;
mod upstream_auth;
mod validate;

pub use admin::AdminSettings;
pub use approvals::{ApprovalRule, ApprovalsConfig, Approver, Comparison, UserElicitation};
pub use audit::{AuditConfig, AuditSinkKind};
pub use auth::{ASYMMETRIC_ALGORITHMS, AuthConfig, AuthMode, PolicyConfig};
pub use catalogue::{CatalogueConfig, MAX_SEARCH_RESULTS, SearchConfig};
pub use endpoints::{EndpointConfig, EndpointToolControl, Selection};
pub use env::{CLI_ENV, ENV_PREFIX};
pub use hooks::HookConfig;
pub use inbound::InboundLimits;
pub use lambda_targets::{LambdaEvent, TARGET_SEPARATOR, check_definition, load_tools_file};
pub use metrics::{MainListenerMetrics, MetricsSettings};
pub use openapi_target::{
    DEFAULT_MAX_OPERATIONS, DEFAULT_MAX_SCHEMA_DEPTH, DEFAULT_MAX_SPEC_BYTES, SchemeCredential,
};
pub use quotas::{QuotaRule, QuotaScope, QuotasConfig};
pub use registry_trust::{RemoteMissBudget, UpstreamUrlSettings};
pub use resilience::{BreakerSettings, RetrySettings};
pub use schema::{AwsConfig, CacheConfig, Config, RegistryConfig, StdioCommand, ToolConfig};
pub use server::{ListBounds, ReconnectSettings, ServerConfig, ServerDefaults, TransportKind};
pub use tasks::TasksConfig;
pub use upstream_auth::{
    ACCESS_TOKEN_TYPE, AuthKind, ClientAuthMethod, DEFAULT_SIGV4_SERVICE, UpstreamAuthConfig,
};
