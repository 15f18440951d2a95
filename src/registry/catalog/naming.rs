//! How a tool gets its exposed name, and what is kept of the names it did not get.
//!
//! Names depend on the configuration and the servers' lists only, never on history, so a
//! reload and a restart of the same file give the same names. A server's `prefix` choice
//! ([`crate::tool_control::ToolPrefix`]) says whether its tools are `server__tool` always,
//! never, or on a collision (the default). A name several servers offer goes bare to a route
//! in configuration (`[tools.NAME] server = …`), else to the one `never` server offering it;
//! every other copy is exposed as `server__tool` (still matching `^[a-zA-Z0-9_-]{1,64}$`),
//! and a `never` server's copy that cannot be bare is refused. A tool name of the form `other__…`, where `other` is another
//! server, is that server's namespaced alias: it is refused, whoever offers it. Every
//! collision is kept in the snapshot ([`super::Snapshot::collisions`]:
//! `GET /admin/registry/collisions`, `mcp_gateway_tool_name_collisions{kind}`) and logged once.

use serde_json::Value;

use crate::registry::record::canonical_hash;

/// A tool name a server offered and did not get as it asked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Collision {
    /// The name the server offered.
    pub name: String,
    /// The server that offered it.
    pub server: String,
    /// The server the name belongs to (the alias's server, the holder, the route's server).
    pub owner: Option<String>,
    /// [`Collision::kind`] values: `alias_of_another_server` (refused), `name_held` (a
    /// `prefix = "never"` server holds the bare name, this copy is namespaced), `routed`
    /// (configuration routes the name elsewhere, this copy is namespaced), `shared_name` (no
    /// holder: every copy namespaced), `never_prefixed_clash` (a `never` server's tool whose
    /// name is routed elsewhere or claimed by another `never` server: refused),
    /// `namespaced_clash` (the namespaced name was taken: refused); catalogue
    /// control: `rename_clash` (a rename to a name another tool is served under: refused),
    /// `override_invalid` (an override the tool's definition does not take: refused, see
    /// `detail`), `reserved_name` (a meta-tool's name in search mode: namespaced, or refused
    /// when a rename asked for it).
    pub kind: &'static str,
    /// The name it is exposed under, if any.
    pub exposed: Option<String>,
    /// Why, when the kind alone does not say (an override that does not fit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Every [`Collision::kind`], for zero metric series.
pub const COLLISION_KINDS: &[&str] = &[
    "alias_of_another_server",
    "name_held",
    "routed",
    "shared_name",
    "never_prefixed_clash",
    "namespaced_clash",
    "rename_clash",
    "override_invalid",
    "reserved_name",
];

/// A name restricted to `[a-zA-Z0-9_-]` (others become `_`).
pub(super) fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// `server__tool`, restricted to `[a-zA-Z0-9_-]` and at most 64 characters (a hash suffix
/// keeps shortened names distinct).
pub fn namespaced(server: &str, tool: &str) -> String {
    let full = format!("{}__{}", clean(server), clean(tool));
    if full.len() <= 64 {
        return full;
    }
    let suffix = &canonical_hash(&Value::String(full.clone()))[..8];
    format!("{}_{suffix}", &full[..55])
}
