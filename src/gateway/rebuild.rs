//! Rebuilding the catalogue, and what follows every rebuild: the catalogue's metrics, the
//! callers' list-change notices, the metric series of departed tools, the registry-built stacks
//! no live entry names any more.
//!
//! Two paths rebuild: the refresh loop, from the lists it has just read (`refresh.rs`), and a
//! reload, at once, from the lists the last build used (`reload.rs`): the new catalogue control
//! (a rename, a hidden tool) and a removed server's absence must be in force when the reload
//! answers, not after every server has listed its tools again — the slowest list can take its
//! whole timeout. The refresh that follows the reload then reads the lists anew.

use std::sync::Arc;

use super::Gateway;
use crate::registry::{
    catalog::{COLLISION_KINDS, Changes, ServerTools, Snapshot},
    entry::ServerRef,
    pins::Kind,
};

impl Gateway {
    /// Rebuilds the catalogue from `servers` (their lists as pinning serves them) and the
    /// registry's entries, then does what follows every rebuild. `count_membership`: count the
    /// tools added and removed (not on the first build, where everything is new).
    pub(super) async fn rebuild_catalogue(
        &self,
        servers: Vec<ServerTools>,
        count_membership: bool,
    ) -> (Arc<Snapshot>, Changes) {
        if let Ok(mut built) = self.built_lists.lock() {
            built.clone_from(&servers);
        }
        let registry = self.registry_entries.read().map(|e| e.clone()).unwrap_or_default();
        let (after, changes) = self.catalog().rebuild_off_runtime(servers, registry).await;
        let counters = &self.metrics.registry_tool_changes;
        if count_membership {
            counters.with_label_values(&["added"]).inc_by(changes.added);
            counters.with_label_values(&["removed"]).inc_by(changes.removed);
        }
        counters.with_label_values(&["changed"]).inc_by(changes.changed);
        self.metrics.registry_tools.set(after.len() as i64);
        for kind in COLLISION_KINDS {
            let count = after.collisions().iter().filter(|c| c.kind == *kind).count();
            self.metrics.tool_name_collisions.with_label_values(&[kind]).set(count as i64);
        }
        if let Some(pins) = &self.pins {
            self.metrics.tool_definitions_pending.set(pins.pending_count(Kind::Tool) as i64);
            self.metrics.tool_definitions_pinned.set(pins.pinned_count(Kind::Tool) as i64);
        }
        // Streams of callers whose list this changed are told (`list_changes`).
        self.list_changes.bump();
        let tools = after.tools();
        let departed = self.metrics.retain_tools(tools.iter().map(|t| (t.name.as_ref(), t.server.as_ref())));
        if departed > 0 {
            tracing::debug!(departed, "metric series of tools that left the catalogue removed");
        }
        // Registry servers no live entry names any more (removed, moved) are dropped.
        let mut live: Vec<Arc<ServerRef>> = tools.iter().filter_map(|t| t.origin.clone()).collect();
        if let Some(dynamic) = &self.registry.dynamic {
            live.extend(dynamic.fresh_origins());
        }
        self.prune_registry_upstreams(&live);
        (after, changes)
    }

    /// After a reload: the catalogue rebuilt at once under the settings in force, from the
    /// lists the last build used — a removed server's left out, a kept or rebuilt server's kept
    /// (with its configured tools as the file now says: they win over discovered ones of the
    /// same name, as at every refresh), an added server's configured tools in. Nothing is
    /// read from a server here; the refresh that follows does that.
    pub(super) async fn rebuild_catalogue_after_reload(&self) {
        let settings = self.settings();
        let built = self.built_lists.lock().map(|b| b.clone()).unwrap_or_default();
        let mut servers: Vec<ServerTools> = built
            .into_iter()
            .filter_map(|mut listed| {
                let upstream = settings.upstreams.get(&listed.server)?;
                let statics = &upstream.config.tools;
                listed.transport = upstream.transport;
                if !upstream.config.discover {
                    listed.tools = Arc::new(ServerTools::texts(statics));
                } else if !statics.is_empty() {
                    let mut tools = listed.parsed();
                    tools.retain(|t| !statics.iter().any(|s| s.get("name") == t.get("name")));
                    tools.extend(statics.iter().cloned());
                    listed.tools = Arc::new(ServerTools::texts(&tools));
                }
                Some(listed)
            })
            .collect();
        for (name, upstream) in &settings.upstreams {
            if !servers.iter().any(|s| s.server == *name) {
                let tools = Arc::new(ServerTools::texts(&upstream.config.tools));
                servers.push(ServerTools { server: name.clone(), transport: upstream.transport, tools });
            }
        }
        let (after, changes) = self.rebuild_catalogue(servers, true).await;
        tracing::info!(
            tools = after.len(),
            added = changes.added,
            removed = changes.removed,
            changed = changes.changed,
            "catalogue rebuilt under the reloaded configuration"
        );
    }
}
