//! `[catalogue]`: what an upstream may do to the gateway's catalogue and its telemetry.
//!
//! An upstream is outside the gateway's trust boundary: it chooses its tool names and
//! definitions, and its freshness hints (`ttlMs`). These settings bound what that choice can
//! cost — how often one server's hint may trigger a refresh, how many tool label values the
//! metrics may carry — and whether a changed tool definition goes live at once or waits for an
//! operator's approval (definition pinning). See `docs/security-catalogue.md`.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Catalogue trust settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogueConfig {
    /// Shortest wait a server's `ttlMs` hint may ask for before that
    /// server's `tools/list` is read again, in milliseconds. A hint refreshes its own server
    /// only; the other servers and the DynamoDB scan keep `refresh_interval_secs`.
    pub min_refresh_interval_ms: u64,
    /// Shortest time between two refreshes of one server caused by its
    /// `notifications/tools/list_changed`, in milliseconds: notifications arriving sooner are
    /// coalesced into one refresh at the end of the interval, so an upstream cannot drive a
    /// refresh storm. Refreshes that server only.
    pub list_changed_min_interval_ms: u64,
    /// A discovered tool's definition is pinned at first sight (or from `pin_file`); a changed
    /// definition is not served until approved (`mcp-gateway registry approve`), the approved
    /// one stays in service meanwhile.
    pub pin_tool_definitions: bool,
    /// JSON file of approved definitions (read at start, written on every approval and every
    /// first-seen tool), so approvals survive a restart. Unset: pins live in memory only.
    pub pin_file: Option<PathBuf>,
    /// Most distinct `tool` label values the per-tool metrics may carry; calls of tools beyond
    /// it are counted under `tool="other"`. Series of tools that left the catalogue are removed.
    pub max_tool_label_values: usize,
    /// Most tools every server's lists may hold together (the catalogue they are joined
    /// into); a server's list that would take the total past it is refused whole, and that
    /// server keeps its last good list. Every server's tools count (configured ones too);
    /// registry entries do not (each is bounded by `defaults.max_tool_definition_bytes`).
    pub max_total_tools: usize,
    /// Most tools one `tools/list` page holds; a longer list is paged with `nextCursor`, as
    /// resources are (the exports, `GET /tools` and `search_tools` always see every tool).
    pub tools_page_size: usize,
    /// Tool search (`[catalogue.search]`): `tools/list` holds `search_tools` and `call_tool`
    /// (plus the pinned tools) instead of the whole catalogue.
    pub search: SearchConfig,
}

/// The tool search mode (see `docs/catalogue-control.md`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// `tools/list` holds the `search_tools` and `call_tool` meta-tools and the pinned tools;
    /// every tool stays callable by name.
    pub enabled: bool,
    /// Tools listed beside the meta-tools (the names callers see).
    #[serde(deserialize_with = "super::lenient::strings")]
    pub pinned: Vec<String>,
    /// Most tools one search answers with (a caller may ask for fewer, never more).
    pub max_results: usize,
}

/// Default `catalogue.tools_page_size`: a first page is at most 250 tools' bytes (about 1.25
/// times a whole 200-tool catalogue's) whatever the catalogue's size; bench/catalogue-scale.sh
/// measures its p50 against a 200-tool catalogue's.
pub const DEFAULT_TOOLS_PAGE_SIZE: usize = 250;

/// Largest `catalogue.search.max_results`: an answer carries every tool's schema.
pub const MAX_SEARCH_RESULTS: usize = 50;

impl Default for SearchConfig {
    fn default() -> Self {
        Self { enabled: false, pinned: Vec::new(), max_results: 5 }
    }
}

impl Default for CatalogueConfig {
    fn default() -> Self {
        Self {
            min_refresh_interval_ms: 30_000,
            list_changed_min_interval_ms: 2_000,
            pin_tool_definitions: false,
            pin_file: None,
            max_tool_label_values: 20_000,
            max_total_tools: 100_000,
            tools_page_size: DEFAULT_TOOLS_PAGE_SIZE,
            search: SearchConfig::default(),
        }
    }
}

impl CatalogueConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.min_refresh_interval_ms < 100 {
            bail!("catalogue.min_refresh_interval_ms must be at least 100");
        }
        if self.list_changed_min_interval_ms < 100 {
            bail!("catalogue.list_changed_min_interval_ms must be at least 100");
        }
        if self.max_total_tools == 0 {
            bail!("catalogue.max_total_tools must be positive");
        }
        if self.tools_page_size == 0 {
            bail!("catalogue.tools_page_size must be positive");
        }
        if self.max_tool_label_values == 0 {
            bail!("catalogue.max_tool_label_values must be positive");
        }
        if self.pin_file.is_some() && !self.pin_tool_definitions {
            bail!("catalogue.pin_file needs catalogue.pin_tool_definitions = true");
        }
        let search = &self.search;
        if !(1..=MAX_SEARCH_RESULTS).contains(&search.max_results) {
            bail!("catalogue.search.max_results must be between 1 and {MAX_SEARCH_RESULTS}");
        }
        if let Some(bad) = search.pinned.iter().find(|n| !crate::tool_control::valid_name(n)) {
            bail!("catalogue.search.pinned: {bad:?} is not a tool name (^[a-zA-Z0-9_-]{{1,64}}$)");
        }
        if let Some(meta) =
            search.pinned.iter().find(|n| crate::tool_control::META_TOOLS.contains(&n.as_str()))
        {
            bail!("catalogue.search.pinned: {meta:?} is a meta-tool, always listed in search mode");
        }
        Ok(())
    }
}
