//! One immutable version of the catalogue, and what `tools/list` holds of it.
//!
//! The `tools/list` result is serialised once per snapshot into shared bytes: a request
//! takes its page as a slice of them (no copy, no serialisation), whatever the catalogue's
//! size (see `pages`).
//! Separate from the build: a snapshot is only read, by every call.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use serde_json::Value;

use super::{
    naming::Collision,
    pages::{Listed, ToolList},
};
use crate::{
    export::names,
    protocol::extensions,
    registry::{record::ToolRecord, search::SearchIndex},
};

/// Tools by exposed name, probed once per call (foldhash: the names are the operator's).
pub(super) type ByName = HashMap<Arc<str>, Arc<ToolRecord>, foldhash::fast::RandomState>;

/// What `tools/list` holds: every tool, or (search mode) the meta-tools and the pinned tools.
#[derive(Debug)]
pub enum Listing {
    All,
    Search {
        /// `search_tools` and `call_tool`.
        meta: Vec<Value>,
        /// Tools listed beside them (names callers see).
        pinned: HashSet<Arc<str>>,
        /// The index `search_tools` answers from, built with this snapshot.
        index: Arc<SearchIndex>,
    },
}

impl Listing {
    /// The meta-tools' definitions (none outside search mode).
    pub fn meta(&self) -> &[Value] {
        match self {
            Listing::All => &[],
            Listing::Search { meta, .. } => meta,
        }
    }

    /// Whether the catalogue tool is in `tools/list` (and so in the exports and `GET /tools`):
    /// never a tool for an MCP App only, whose model must not see it
    /// ([`extensions::app_only`]).
    pub fn lists(&self, tool: &ToolRecord) -> bool {
        !extensions::app_only(tool.definition.head()) && self.lists_name(&tool.name)
    }

    /// Whether the catalogue tool is in the `tools/list` of a caller that negotiated MCP Apps:
    /// what [`Listing::lists`] lists, and the tools for an app only (its host calls them for
    /// the app and keeps them from the model).
    pub fn lists_for_apps(&self, tool: &ToolRecord) -> bool {
        extensions::app_only(tool.definition.head()) || self.lists_name(&tool.name)
    }

    fn lists_name(&self, name: &str) -> bool {
        match self {
            Listing::All => true,
            Listing::Search { pinned, .. } => pinned.contains(name),
        }
    }
}

/// One immutable version of the catalogue.
#[derive(Debug)]
pub struct Snapshot {
    pub(super) by_name: ByName,
    /// The `tools/list` result (`{"tools":[…]}`), serialised once per snapshot, in pages.
    pub(super) list: ToolList,
    /// Names offered and not granted as asked, by name then server.
    pub(super) collisions: Vec<Collision>,
    /// What `tools/list` holds (and the search index in search mode).
    pub(super) listing: Listing,
    /// Exported (model-API) names to their tools, built at the first alias lookup of this
    /// snapshot ([`Snapshot::exported_alias`]).
    pub(super) aliases: OnceLock<Aliases>,
    /// The `tools/list` of a caller that negotiated MCP Apps (the tools for an app only
    /// besides the rest), built at the first such list of this snapshot
    /// ([`Snapshot::apps_tool_list`]).
    pub(super) apps_list: OnceLock<ToolList>,
}

/// Tools by every name `GET /tools?format=…` exports them under.
type Aliases = HashMap<String, Arc<ToolRecord>, foldhash::fast::RandomState>;

impl Snapshot {
    pub(super) fn empty() -> Self {
        Self {
            by_name: ByName::default(),
            list: ToolList::default(),
            collisions: Vec::new(),
            listing: Listing::All,
            aliases: OnceLock::new(),
            apps_list: OnceLock::new(),
        }
    }

    /// What `tools/list` holds: the search mode's meta-tools, and which tools it lists.
    pub fn listing(&self) -> &Listing {
        &self.listing
    }

    /// The search index (search mode only).
    pub fn search_index(&self) -> Option<&Arc<SearchIndex>> {
        match &self.listing {
            Listing::All => None,
            Listing::Search { index, .. } => Some(index),
        }
    }

    /// Names servers offered and did not get as they asked (see [`Collision`]).
    pub fn collisions(&self) -> &[Collision] {
        &self.collisions
    }

    /// The whole `tools/list` result of this snapshot: shared bytes, a JSON object.
    pub fn list_result(&self) -> Bytes {
        self.list.whole()
    }

    /// The `tools/list` result of this snapshot, in pages.
    pub fn tool_list(&self) -> ToolList {
        self.list.clone()
    }

    /// The `tools/list` result of this snapshot for a caller that negotiated MCP Apps: with
    /// the tools for an app only ([`Listing::lists_for_apps`]); the same list as
    /// [`Snapshot::tool_list`] when the catalogue has none. Built once per snapshot.
    pub fn apps_tool_list(&self) -> ToolList {
        self.apps_list
            .get_or_init(|| {
                if !self.by_name.values().any(|t| extensions::app_only(t.definition.head())) {
                    return self.list.clone();
                }
                let tools = self.tools();
                let listed = tools
                    .iter()
                    .filter(|t| self.listing.lists_for_apps(t))
                    .map(|t| Listed::Text(&t.definition));
                ToolList::build(self.listing.meta(), listed)
            })
            .clone()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The tool callers know as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolRecord>> {
        self.by_name.get(name)
    }

    /// All tools, ordered by exposed name.
    pub fn tools(&self) -> Vec<Arc<ToolRecord>> {
        let mut tools: Vec<_> = self.by_name.values().cloned().collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// The tool whose exported name (mapped for a model API, see [`crate::export::names`]) is
    /// `name`. Only names of a mapped shape are looked up; the map from every exported name to
    /// its tool is built once per snapshot, at the first such lookup (`on_build` runs then,
    /// and only then), so an alias-shaped name costs a hash probe, never a walk of the
    /// catalogue. The mapping is the exports' own ([`names::aliases`] over the catalogue in
    /// name order).
    pub fn exported_alias(&self, name: &str, on_build: impl FnOnce()) -> Option<Arc<ToolRecord>> {
        if !names::looks_mapped(name) {
            return None;
        }
        let aliases = self.aliases.get_or_init(|| {
            on_build();
            let tools = self.tools();
            let catalogue: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            names::aliases(&catalogue).into_iter().map(|(alias, i)| (alias, tools[i].clone())).collect()
        });
        aliases.get(name).cloned()
    }
}
