//! What a registry entry or a made-up tool name may make the gateway do.
//!
//! - `[registry.upstream_urls]`: the endpoints registry entries may point at. A DynamoDB item
//!   or a Redis `mcp:tool:<name>` key is data anyone with write access to the table can
//!   change; without an allowlist an entry could send callers' arguments to
//!   `http://169.254.169.254/` or an internal service. Like `stdio_commands` for programs.
//! - `[registry.remote_misses]`: how many lookups below memory (Redis GET, DynamoDB GetItem)
//!   names the gateway does not know may cost per second.
//!
//! See `docs/security-edge-and-registry.md`.

use serde::{Deserialize, Serialize};

use super::lenient;

/// `[registry.upstream_urls]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamUrlSettings {
    /// URL patterns a registry entry's `url` (http, websocket, sse) must match:
    /// `scheme://host[:port][/path-prefix]`, where host may be `*` (any) or `*.example.com`
    /// (any subdomain), port may be `*` (any; absent: the scheme's default), and a path
    /// prefix limits the path. Empty (the default): every registry URL is refused.
    /// Loopback, link-local, metadata and unspecified addresses (127.0.0.0/8, ::1,
    /// `localhost`, 169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, 0.0.0.0, ::)
    /// pass only a pattern that names that host literally, never a wildcard.
    #[serde(deserialize_with = "lenient::strings")]
    pub allow: Vec<String>,
    /// Resolve a host name and refuse it when it resolves to one of those addresses (unless
    /// a pattern names the name literally).
    pub resolve: bool,
}

impl Default for UpstreamUrlSettings {
    fn default() -> Self {
        Self { allow: Vec::new(), resolve: true }
    }
}

// The patterns' grammar lives with their matching (`registry::url_policy::validate`), which
// `serve` and `check-config` run on load: configuration imports nothing of the rooms above it.

/// `[registry.remote_misses]`: a token bucket of lookups below memory.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemoteMissBudget {
    /// Lookups below memory admitted per second, on average (0: no limit). A lookup that
    /// finds a live tool gives its token back, so the budget is spent by misses.
    pub per_sec: u32,
    /// Lookups admitted at once after a quiet period (the bucket's size; at least 1).
    pub burst: u32,
}

impl Default for RemoteMissBudget {
    fn default() -> Self {
        Self { per_sec: 20, burst: 50 }
    }
}
