//! Building a snapshot: every server's tools granted a name (`naming`), catalogue control
//! applied (renames, hidden tools, the search mode's reserved names), the registry's entries
//! added under the configured and discovered tools, and the `tools/list` bytes serialised.
//! Separate from the catalogue's handle: this is the one CPU-heavy step, run off the runtime.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, OnceLock},
};

use serde_json::Value;

use super::{
    handle::{Catalog, ServerTools},
    naming::{Collision, clean, namespaced},
    pages::{Listed, ToolList},
    snapshot::{ByName, Listing, Snapshot},
};
use crate::shared_json::SharedJson;
use crate::{
    registry::{entry::RegistryEntry, record::ToolRecord, search::SearchIndex},
    tool_control::{META_TOOLS, ToolPrefix},
};

/// A tool that got a catalogue name, before catalogue control.
pub(super) struct Candidate<'a> {
    /// Its catalogue name (bare or namespaced): the key of its `[tools.NAME]` section.
    pub(super) exposed: String,
    /// Its name on the server.
    pub(super) upstream: &'a str,
    pub(super) server: &'a ServerTools,
    /// Its definition's text in the server's list: parsed when its record is made (one
    /// definition at a time, never the whole catalogue at once), and shared by the record
    /// that serves it as it is.
    pub(super) text: &'a SharedJson,
}

impl Catalog {
    pub(super) fn build(&self, servers: &[ServerTools], registry: &[RegistryEntry]) -> Snapshot {
        #[cfg(test)]
        super::tests::wait_at_gate(self);
        let control = self.control();
        // tool name → servers offering it, in server order.
        let mut owners: BTreeMap<&str, Vec<(&ServerTools, &SharedJson)>> = BTreeMap::new();
        // Only the names are read here; each definition is parsed when its record is made.
        let names: Vec<Vec<Option<String>>> =
            servers.iter().map(|s| s.tools.iter().map(ServerTools::name_of).collect()).collect();
        for (server, names) in servers.iter().zip(&names) {
            let mut seen = HashSet::new();
            for (tool, name) in server.tools.iter().zip(names) {
                let Some(name) = name.as_deref() else {
                    tracing::warn!(server = %server.server, "tool without a name ignored");
                    continue;
                };
                if seen.insert(name) {
                    owners.entry(name).or_default().push((server, tool));
                }
            }
        }
        let server_prefixes: Vec<(String, &str)> = servers
            .iter()
            .map(|s| s.server.as_str())
            .chain(registry.iter().map(|e| e.server.name.as_str()))
            .map(|server| (format!("{}__", clean(server)), server))
            .collect();
        let mut collisions = Vec::new();
        let mut by_name = ByName::default();
        // Catalogue names granted so far, and the tools that got one.
        let mut natural: HashSet<String> = HashSet::new();
        let mut candidates: Vec<Candidate<'_>> = Vec::new();
        for (name, copies) in &owners {
            // Another server's namespaced alias is that server's, whoever offers it.
            let mut granted: Vec<(&ServerTools, &SharedJson)> = Vec::with_capacity(copies.len());
            for (server, tool) in copies {
                let alias_of = server_prefixes
                    .iter()
                    .find(|(prefix, owner)| name.starts_with(prefix.as_str()) && *owner != server.server)
                    .map(|(_, owner)| owner.to_string());
                match alias_of {
                    Some(owner) => collisions.push(Collision {
                        name: name.to_string(),
                        server: server.server.clone(),
                        owner: Some(owner),
                        kind: "alias_of_another_server",
                        exposed: None,
                        detail: None,
                    }),
                    None => granted.push((server, tool)),
                }
            }
            if granted.is_empty() {
                continue;
            }
            let routed = control.routes.get(*name);
            let prefix_of = |server: &str| control.prefixes.get(server).copied().unwrap_or_default();
            // Who holds the bare name: the route's server; else the one `never` server
            // offering it; else the one server offering it that does not always prefix.
            // Never the server that held it before: names do not depend on history.
            let claimants: Vec<&str> = granted
                .iter()
                .map(|(s, _)| s.server.as_str())
                .filter(|s| prefix_of(s) != ToolPrefix::Always)
                .collect();
            let nevers: Vec<&str> =
                claimants.iter().copied().filter(|s| prefix_of(s) == ToolPrefix::Never).collect();
            let holder: Option<String> = match (routed, nevers.as_slice(), claimants.as_slice()) {
                (Some(owner), _, _) => Some(owner.clone()),
                (None, [never], _) => Some(never.to_string()),
                (None, [], [only]) => Some(only.to_string()),
                _ => None,
            };
            for (server, tool) in &granted {
                let prefix = prefix_of(&server.server);
                let bare = holder.as_deref() == Some(server.server.as_str());
                if !bare && prefix == ToolPrefix::Never {
                    // Its own name is another's (a route) or claimed by another `never`
                    // server: refused rather than renamed against the configuration.
                    collisions.push(Collision {
                        name: name.to_string(),
                        server: server.server.clone(),
                        owner: holder.clone(),
                        kind: "never_prefixed_clash",
                        exposed: None,
                        detail: None,
                    });
                    continue;
                }
                let exposed = if bare { name.to_string() } else { namespaced(&server.server, name) };
                if natural.contains(exposed.as_str()) {
                    let owner =
                        candidates.iter().find(|c| c.exposed == exposed).map(|c| c.server.server.clone());
                    collisions.push(Collision {
                        name: name.to_string(),
                        server: server.server.clone(),
                        owner,
                        kind: "namespaced_clash",
                        exposed: None,
                        detail: None,
                    });
                    continue;
                }
                if !bare && prefix != ToolPrefix::Always {
                    let kind = match (routed, &holder) {
                        (Some(_), _) => "routed",
                        (None, Some(_)) => "name_held",
                        (None, None) => "shared_name",
                    };
                    collisions.push(Collision {
                        name: name.to_string(),
                        server: server.server.clone(),
                        owner: holder.clone(),
                        kind,
                        exposed: Some(exposed.clone()),
                        detail: None,
                    });
                }
                natural.insert(exposed.clone());
                candidates.push(Candidate { exposed, upstream: name, server, text: tool });
            }
        }
        self.serve_candidates(candidates, &mut by_name, &mut collisions);
        for entry in registry {
            let overrides = self.entry_overrides(entry);
            let exposed = overrides.rename.as_deref().unwrap_or(&entry.tool_name);
            if by_name.contains_key(exposed) || (control.search.is_some() && META_TOOLS.contains(&exposed)) {
                continue;
            }
            match self.controlled_record_for_entry(entry, &overrides) {
                Ok(Some(record)) => {
                    by_name.insert(record.name.clone(), Arc::new(record));
                }
                Ok(None) => {}
                Err(problem) => {
                    tracing::warn!(tool = %entry.tool_name, server = %entry.server.name, problem, "registry entry's overrides do not fit its tool; not served");
                    collisions.push(Collision {
                        name: entry.tool_name.clone(),
                        server: entry.server.name.clone(),
                        owner: None,
                        kind: "override_invalid",
                        exposed: None,
                        detail: Some(problem),
                    });
                }
            }
        }
        self.log_collisions(&collisions);
        let mut list: Vec<&Arc<ToolRecord>> = by_name.values().collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        let listing = match &control.search {
            None => Listing::All,
            Some(search) => {
                // `search_tools` answers the model: never with a tool for an MCP App only.
                let sorted: Vec<Arc<ToolRecord>> = list
                    .iter()
                    .filter(|t| !crate::protocol::extensions::app_only(t.definition.head()))
                    .map(|t| (*t).clone())
                    .collect();
                Listing::Search {
                    meta: crate::registry::search::meta_tools(search),
                    pinned: search.pinned.iter().map(|n| Arc::from(n.as_str())).collect(),
                    index: Arc::new(SearchIndex::build(&sorted)),
                }
            }
        };
        let listed = list.iter().filter(|t| listing.lists(t)).map(|t| Listed::Text(&t.definition));
        let list = ToolList::build(listing.meta(), listed);
        Snapshot { by_name, list, collisions, listing, aliases: OnceLock::new(), apps_list: OnceLock::new() }
    }

    /// Serves the tools that got a catalogue name, with catalogue control applied: tools
    /// that keep their name first, then renamed ones (a rename never takes a name another
    /// tool keeps; two tools may swap names), hidden ones left out.
    fn serve_candidates(
        &self,
        candidates: Vec<Candidate<'_>>,
        by_name: &mut ByName,
        collisions: &mut Vec<Collision>,
    ) {
        let control = self.control();
        let mut renamed = Vec::new();
        for candidate in candidates {
            // A text the refresher kept always parses (it wrote it from a value).
            let Ok(tool) = candidate.text.parse::<Value>() else { continue };
            let overrides = control.overrides.get(&candidate.exposed);
            let reserved = control.search.is_some() && META_TOOLS.contains(&candidate.exposed.as_str());
            let Some(overrides) = overrides.filter(|o| !o.is_empty()) else {
                if !reserved {
                    let record = self.record(
                        &candidate.exposed,
                        candidate.upstream,
                        candidate.server,
                        &tool,
                        Some(candidate.text),
                    );
                    by_name.insert(record.name.clone(), Arc::new(record));
                    continue;
                }
                // A meta-tool's name in search mode: the server's tool is namespaced.
                let exposed = namespaced(&candidate.server.server, candidate.upstream);
                let clash = by_name.contains_key(exposed.as_str());
                collisions.push(Collision {
                    name: candidate.exposed.clone(),
                    server: candidate.server.server.clone(),
                    owner: None,
                    kind: "reserved_name",
                    exposed: (!clash).then(|| exposed.clone()),
                    detail: Some("a meta-tool's name in search mode".into()),
                });
                if !clash {
                    let record = self.record(
                        &exposed,
                        candidate.upstream,
                        candidate.server,
                        &tool,
                        Some(candidate.text),
                    );
                    by_name.insert(record.name.clone(), Arc::new(record));
                }
                continue;
            };
            match overrides.apply(&candidate.exposed, &tool) {
                Ok(None) => {}
                Ok(Some(controlled)) if controlled.name != candidate.exposed => {
                    renamed.push((candidate, controlled))
                }
                Ok(Some(controlled)) if reserved => renamed.push((candidate, controlled)),
                Ok(Some(controlled)) => {
                    let record = self.controlled_record(&candidate, controlled);
                    by_name.insert(record.name.clone(), Arc::new(record));
                }
                Err(problem) => collisions.push(Collision {
                    name: candidate.exposed.clone(),
                    server: candidate.server.server.clone(),
                    owner: None,
                    kind: "override_invalid",
                    exposed: None,
                    detail: Some(problem),
                }),
            }
        }
        for (candidate, controlled) in renamed {
            let reserved = control.search.is_some() && META_TOOLS.contains(&controlled.name.as_str());
            if reserved || by_name.contains_key(controlled.name.as_str()) {
                collisions.push(Collision {
                    name: candidate.exposed.clone(),
                    server: candidate.server.server.clone(),
                    owner: by_name.get(controlled.name.as_str()).map(|t| t.server.to_string()),
                    kind: if reserved { "reserved_name" } else { "rename_clash" },
                    exposed: None,
                    detail: Some(format!("renamed to {:?}, a name already served", controlled.name)),
                });
                continue;
            }
            let record = self.controlled_record(&candidate, controlled);
            by_name.insert(record.name.clone(), Arc::new(record));
        }
    }
}

impl Catalog {
    /// Logs each collision once (per name, server and kind) while it lasts.
    fn log_collisions(&self, collisions: &[Collision]) {
        let Ok(mut logged) = self.logged_conflicts.lock() else {
            return;
        };
        let current: HashSet<String> =
            collisions.iter().map(|c| format!("{}\0{}\0{}", c.name, c.server, c.kind)).collect();
        for collision in collisions {
            let key = format!("{}\0{}\0{}", collision.name, collision.server, collision.kind);
            if !logged.insert(key) {
                continue;
            }
            match collision.kind {
                "override_invalid" | "rename_clash" | "reserved_name" => tracing::warn!(
                    tool = %collision.name,
                    server = %collision.server,
                    kind = collision.kind,
                    exposed = ?collision.exposed,
                    detail = ?collision.detail,
                    "catalogue control: the tool is not served as configured"
                ),
                "alias_of_another_server" | "namespaced_clash" => tracing::warn!(
                    tool = %collision.name,
                    server = %collision.server,
                    owner = ?collision.owner,
                    kind = collision.kind,
                    "tool name refused: it belongs to another server"
                ),
                _ => tracing::warn!(
                    tool = %collision.name,
                    server = %collision.server,
                    owner = ?collision.owner,
                    exposed = ?collision.exposed,
                    kind = collision.kind,
                    "tool name served by several servers; this copy is namespaced"
                ),
            }
        }
        // A collision that ended is logged again if it comes back.
        logged.retain(|key| current.contains(key));
    }
}
