//! `[endpoints.NAME]`: one MCP endpoint per audience, served at `/mcp/NAME`, each with its own
//! selection of what the servers offer (`select`: by server, tool name pattern and annotation,
//! resource URI prefix, prompt name pattern) and its own catalogue control on top of the global
//! one (`[endpoints.NAME.tools.TOOL]`, `[endpoints.NAME.prompts.PROMPT]`: rename, description,
//! hide). Checked here at load; applied by `gateway/endpoints.rs`. `serve_plain_mcp = false`
//! closes the plain `/mcp` (the whole catalogue) so that only the endpoints are served.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::{lenient, surface_control::PromptControl};

/// Most endpoints one gateway serves (each one is a cached view per caller).
pub const MAX_ENDPOINTS: usize = 64;
/// Most patterns (or prefixes) in one list of a selection.
pub const MAX_PATTERNS: usize = 256;

/// Whether `name` is an endpoint name: `[a-z0-9_-]{1,64}` (it is a URL path segment).
pub fn valid_endpoint_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// `[endpoints.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// What of the catalogue the endpoint serves (every criterion left out selects all).
    pub select: Selection,
    /// Catalogue control of the endpoint's tools, by the name the global catalogue gives them.
    pub tools: BTreeMap<String, EndpointToolControl>,
    /// Catalogue control of the endpoint's prompts, by the name the global catalogue gives them:
    /// `description` and `hide` (a prompt's rename is global, `[prompts.NAME]`).
    pub prompts: BTreeMap<String, PromptControl>,
}

/// `[endpoints.NAME.select]`: a tool is served when it passes every criterion given; an empty
/// list (or an absent annotation) does not narrow.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Selection {
    /// Servers whose tools, resources and prompts the endpoint serves (empty: every server).
    #[serde(deserialize_with = "lenient::strings")]
    pub servers: Vec<String>,
    /// Tool name patterns (`*` any run of characters, `?` one): a tool must match one.
    #[serde(deserialize_with = "lenient::strings")]
    pub tools: Vec<String>,
    /// Tool name patterns: a tool matching one is left out (wins over `tools`).
    #[serde(deserialize_with = "lenient::strings")]
    pub exclude_tools: Vec<String>,
    /// Only tools whose `readOnlyHint` is this (absent hints at the MCP defaults).
    pub read_only: Option<bool>,
    /// Only tools whose `destructiveHint` is this.
    pub destructive: Option<bool>,
    /// Only tools whose `idempotentHint` is this.
    pub idempotent: Option<bool>,
    /// Only tools whose `openWorldHint` is this.
    pub open_world: Option<bool>,
    /// URI prefixes: a resource (or template) must start with one (empty: every URI).
    #[serde(deserialize_with = "lenient::strings")]
    pub resources: Vec<String>,
    /// URI prefixes left out (wins over `resources`).
    #[serde(deserialize_with = "lenient::strings")]
    pub exclude_resources: Vec<String>,
    /// Prompt name patterns: a prompt must match one (empty: every prompt).
    #[serde(deserialize_with = "lenient::strings")]
    pub prompts: Vec<String>,
    /// Prompt name patterns left out.
    #[serde(deserialize_with = "lenient::strings")]
    pub exclude_prompts: Vec<String>,
}

/// `[endpoints.NAME.tools.TOOL]`: how the endpoint shows one of its tools.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointToolControl {
    /// The name the endpoint's callers see and call (the server still gets its own).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub rename: Option<String>,
    /// A description replacing the catalogue's.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub description: Option<String>,
    /// Left out of the endpoint: calling it there is `unknown_tool`.
    pub hide: bool,
}

/// Checks `[endpoints.*]`: names, bounds, patterns, servers that exist, renames distinct.
pub fn validate(
    endpoints: &BTreeMap<String, EndpointConfig>,
    servers: &BTreeMap<String, super::ServerConfig>,
    serve_plain_mcp: bool,
) -> anyhow::Result<()> {
    if endpoints.len() > MAX_ENDPOINTS {
        bail!("endpoints: {} endpoints configured, at most {MAX_ENDPOINTS}", endpoints.len());
    }
    if !serve_plain_mcp && endpoints.is_empty() {
        bail!("serve_plain_mcp = false needs at least one [endpoints.NAME] (nothing would serve MCP)");
    }
    for (name, endpoint) in endpoints {
        if !valid_endpoint_name(name) {
            bail!(
                "endpoints.{name}: an endpoint name must match [a-z0-9_-]{{1,64}} (it is the path /mcp/NAME)"
            );
        }
        let select = &endpoint.select;
        for server in &select.servers {
            if !servers.contains_key(server) {
                bail!("endpoints.{name}.select.servers: unknown server {server:?}");
            }
        }
        for (key, list) in [
            ("servers", &select.servers),
            ("tools", &select.tools),
            ("exclude_tools", &select.exclude_tools),
            ("resources", &select.resources),
            ("exclude_resources", &select.exclude_resources),
            ("prompts", &select.prompts),
            ("exclude_prompts", &select.exclude_prompts),
        ] {
            if list.len() > MAX_PATTERNS {
                bail!("endpoints.{name}.select.{key}: {} entries, at most {MAX_PATTERNS}", list.len());
            }
            if list.iter().any(|p| p.is_empty() || p.len() > 256) {
                bail!("endpoints.{name}.select.{key}: every entry must be 1 to 256 characters");
            }
        }
        for (key, list) in
            [("resources", &select.resources), ("exclude_resources", &select.exclude_resources)]
        {
            for prefix in list {
                crate::resource_uri::check_prefix(prefix)
                    .map_err(|e| anyhow::anyhow!("endpoints.{name}.select.{key}: {e}"))?;
            }
        }
        let mut shown: BTreeMap<&str, &str> = BTreeMap::new();
        for (tool, control) in &endpoint.tools {
            if let Some(rename) = &control.rename {
                if !crate::tool_control::valid_name(rename) {
                    bail!(
                        "endpoints.{name}.tools.{tool}: rename {rename:?} must match ^[a-zA-Z0-9_-]{{1,64}}$"
                    );
                }
                if control.hide {
                    bail!("endpoints.{name}.tools.{tool}: a hidden tool cannot be renamed");
                }
                if crate::tool_control::META_TOOLS.contains(&rename.as_str()) {
                    bail!("endpoints.{name}.tools.{tool}: {rename:?} is a meta-tool's name");
                }
                if let Some(other) = shown.insert(rename, tool) {
                    bail!("endpoints.{name}.tools.{tool}: rename {rename:?} is also tools.{other}'s");
                }
            }
        }
        if let Some(prompt) = endpoint.prompts.iter().find(|(_, c)| c.rename.is_some()).map(|(p, _)| p) {
            bail!(
                "endpoints.{name}.prompts.{prompt}: an endpoint shows or hides a prompt and may replace its description; renaming is [prompts.NAME]'s (for every endpoint)"
            );
        }
        super::surface_control::validate(&endpoint.prompts, &Default::default())
            .map_err(|e| anyhow::anyhow!("endpoints.{name}.{e}"))?;
    }
    Ok(())
}

/// Whether `name` matches `pattern`: `*` is any run of characters (none too), `?` one
/// character, everything else itself.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with one backtrack point (the last `*`): linear in practice, never
    // exponential whatever the pattern.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_and_single_characters() {
        assert!(glob_matches("get_*", "get_order"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("*order*", "lookup_order_status"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "ac"));
        assert!(!glob_matches("get_*", "search_get_"));
        assert!(glob_matches("exact", "exact") && !glob_matches("exact", "exactly"));
        assert!(glob_matches("*_*_*", "a_b_c") && !glob_matches("*_*_*", "a_b"));
    }

    #[test]
    fn names_bounds_and_renames_are_checked() {
        assert!(valid_endpoint_name("support-2_a") && !valid_endpoint_name("Support"));
        assert!(!valid_endpoint_name("") && !valid_endpoint_name(&"a".repeat(65)));
        let demo = super::super::ServerConfig::new(
            super::super::TransportKind::Http,
            Some("http://127.0.0.1:1/mcp".into()),
            None,
            None,
        );
        let servers = BTreeMap::from([("demo".to_string(), demo)]);
        let mut endpoint = EndpointConfig::default();
        endpoint.select.servers = vec!["nope".into()];
        let one = |e: &EndpointConfig| BTreeMap::from([("shop".to_string(), e.clone())]);
        assert!(
            validate(&one(&endpoint), &servers, true).unwrap_err().to_string().contains("unknown server")
        );
        endpoint.select.servers = vec!["demo".into()];
        assert!(validate(&one(&endpoint), &servers, true).is_ok());
        let rename = |to: &str| EndpointToolControl { rename: Some(to.into()), ..Default::default() };
        endpoint.tools = BTreeMap::from([("a".to_string(), rename("x")), ("b".to_string(), rename("x"))]);
        assert!(validate(&one(&endpoint), &servers, true).unwrap_err().to_string().contains("tools.b"));
        assert!(validate(&BTreeMap::new(), &servers, false).is_err(), "nothing would serve MCP");
        let bad = BTreeMap::from([("Shop".to_string(), EndpointConfig::default())]);
        assert!(validate(&bad, &servers, true).is_err());
    }
}
