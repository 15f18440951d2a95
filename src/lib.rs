//! `mcp-gateway`: a sidecar that takes an orchestrator's MCP `tools/call` on localhost, finds
//! the MCP server hosting the tool, and gets the call there and back — fast, safely, and with a
//! structured answer when something is down.
//!
//! The data path of one call, module by module:
//! [`server`] decodes JSON-RPC → [`registry`] resolves the tool → [`validation`] checks and
//! defaults the arguments → [`quota`] checks the caller's quotas → [`upstream`] forwards
//! through the per-server call stack ([`resilience::stack`], where its order is written down)
//! → [`resilience::classify`] names the outcome → [`telemetry`] records it →
//! [`error`] maps every failure to its category and JSON-RPC error in one place; [`audit`] writes one
//! line per call decision. What reaches a caller besides its answer (progress, log entries,
//! relayed server→client requests) goes through [`backchannel`].

pub mod allocator;
pub mod approvals;
pub mod audit;
pub mod backchannel;
pub mod clock;
pub mod config;
pub mod demo;
pub mod error;
pub mod export;
pub mod gateway;
pub mod guardrail;
pub mod identity;
pub mod openapi;
pub mod ownership;
pub mod policy;
pub mod protocol;
pub mod quota;
pub mod redact;
pub mod redis_link;
pub mod registry;
pub mod resilience;
pub mod resource_uri;
pub mod server;
pub mod shared_json;
pub mod singleflight;
pub mod supervise;
pub mod telemetry;
pub mod tool_control;
pub mod upstream;
pub mod validation;

/// The gateway's own version, reported in `serverInfo` / `clientInfo` and `/metrics`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
