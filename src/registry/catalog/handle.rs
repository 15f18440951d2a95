//! The catalogue's handle: the current snapshot, what configuration decides of the next
//! build (routes, catalogue control, the search mode), and the rebuild that swaps a new
//! snapshot in, on tokio's blocking pool or not. Separate from `mod.rs`, which only names
//! the parts, so that the parts depend on the handle and the handle on none of them but the
//! snapshot it holds.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex, RwLock},
};

use bytes::Bytes;
use serde_json::Value;

use super::{
    changes::{Changes, changes},
    snapshot::Snapshot,
};
use crate::shared_json::SharedJson;
use crate::{
    config::{SearchConfig, TransportKind},
    registry::{bounds::Refusals, entry::RegistryEntry, record::ToolRecord},
    tool_control::{META_TOOLS, ToolOverrides, ToolPrefix},
    validation::SchemaCache,
};

/// The tools one server offers, as it described them.
#[derive(Debug, Clone)]
pub struct ServerTools {
    pub server: String,
    pub transport: TransportKind,
    /// Each tool's definition as its compact JSON text (a fraction of the memory of a parsed
    /// value; `$defs` entries shared between tools, [`SharedJson`]). Shared: the refresher
    /// keeps each server's last list and lends it to every build, which parses it for the
    /// time of the build.
    pub tools: Arc<Vec<SharedJson>>,
}

impl ServerTools {
    /// `tools` as kept: each definition's compact JSON text.
    pub fn texts(tools: &[Value]) -> Vec<SharedJson> {
        tools.iter().map(SharedJson::of).collect()
    }

    /// A definition's `name`, read from its text without parsing the rest into values
    /// (`None`: not an object, or no string `name`).
    pub fn name_of(text: &SharedJson) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Named {
            name: Option<String>,
        }
        text.parse::<Named>().ok()?.name
    }

    /// The tools parsed (a text that does not parse, which [`Self::texts`] never makes, is
    /// left out).
    pub fn parsed(&self) -> Vec<Value> {
        self.tools.iter().filter_map(|t| t.parse().ok()).collect()
    }
}

/// The catalogue: current snapshot plus what building it needs.
#[derive(Debug)]
pub struct Catalog {
    pub(super) current: RwLock<Arc<Snapshot>>,
    pub(super) schemas: SchemaCache,
    /// What configuration decides of the catalogue (a reload replaces it; the next build
    /// applies it).
    pub(super) control: RwLock<Arc<Configured>>,
    pub(super) logged_conflicts: Mutex<HashSet<String>>,
    /// Servers whose latest list went over a bound and was refused ([`super::bounds`]).
    pub(super) refusals: Refusals,
    /// Tests: a signal the next build waits for.
    #[cfg(test)]
    pub(super) test_gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

/// What configuration decides of the catalogue.
#[derive(Debug, Default)]
pub(super) struct Configured {
    /// Tool name → server that owns the bare name (`[tools.NAME] server`).
    pub(super) routes: BTreeMap<String, String>,
    /// Server → its `prefix` choice (absent: `on_collision`).
    pub(super) prefixes: BTreeMap<String, ToolPrefix>,
    /// Catalogue control, by catalogue name (`[tools.NAME]`).
    pub(super) overrides: BTreeMap<String, ToolOverrides>,
    /// The search mode's settings (`None`: `tools/list` holds every tool).
    pub(super) search: Option<SearchConfig>,
}

impl Catalog {
    pub fn new(routes: BTreeMap<String, String>) -> Self {
        let control = Configured { routes, ..Configured::default() };
        Self {
            current: RwLock::new(Arc::new(Snapshot::empty())),
            schemas: SchemaCache::default(),
            control: RwLock::new(Arc::new(control)),
            logged_conflicts: Mutex::new(HashSet::new()),
            refusals: Refusals::default(),
            #[cfg(test)]
            test_gate: Mutex::new(None),
        }
    }

    /// With catalogue control (`overrides` by catalogue name) and the search mode when
    /// `search.enabled`.
    pub fn controlled(self, overrides: BTreeMap<String, ToolOverrides>, search: &SearchConfig) -> Self {
        let control = self.control();
        self.reconfigure(control.routes.clone(), control.prefixes.clone(), overrides, search);
        self
    }

    /// With each server's `prefix` choice (absent: `on_collision`).
    pub fn prefixed(self, prefixes: BTreeMap<String, ToolPrefix>) -> Self {
        let control = self.control();
        let search = control.search.clone().unwrap_or_default();
        self.reconfigure(control.routes.clone(), prefixes, control.overrides.clone(), &search);
        self
    }

    /// Replaces the routes, the catalogue control and the search mode (a configuration
    /// reload); the next build applies them.
    pub fn reconfigure(
        &self,
        routes: BTreeMap<String, String>,
        prefixes: BTreeMap<String, ToolPrefix>,
        overrides: BTreeMap<String, ToolOverrides>,
        search: &SearchConfig,
    ) {
        let control = Configured {
            routes,
            prefixes: prefixes.into_iter().filter(|(_, p)| *p != ToolPrefix::OnCollision).collect(),
            overrides: overrides.into_iter().filter(|(_, o)| !o.is_empty()).collect(),
            search: search.enabled.then(|| search.clone()),
        };
        match self.control.write() {
            Ok(mut current) => *current = Arc::new(control),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(control),
        }
    }

    pub(super) fn control(&self) -> Arc<Configured> {
        self.control.read().map(|c| c.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The servers whose latest list was refused for going over a bound (their last good list
    /// is what this catalogue serves of them).
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }

    /// Whether `name` is a meta-tool of the search mode in force.
    pub fn is_meta_tool(&self, name: &str) -> bool {
        META_TOOLS.contains(&name) && self.control.read().is_ok_and(|c| c.search.is_some())
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().map(|s| s.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    pub fn get(&self, name: &str) -> Option<Arc<ToolRecord>> {
        self.current.read().ok()?.by_name.get(name).cloned()
    }

    /// The whole `tools/list` result (all tools, by exposed name): shared bytes of a JSON object.
    pub fn list_result(&self) -> Bytes {
        self.snapshot().list_result()
    }

    /// The `tools/list` result (all tools, by exposed name), in pages.
    pub fn tool_list(&self) -> super::ToolList {
        self.snapshot().tool_list()
    }

    /// Rebuilds the catalogue from every server's tools and the registry's entries, and
    /// swaps it in. Configured and discovered tools win every name conflict with registry
    /// entries (configuration is the floor).
    pub fn rebuild(&self, servers: &[ServerTools], registry: &[RegistryEntry]) -> Arc<Snapshot> {
        let snapshot = Arc::new(self.build(servers, registry));
        let live: HashSet<String> = snapshot.by_name.values().map(|t| t.schema_hash.clone()).collect();
        self.schemas.retain(&live);
        if let Ok(mut current) = self.current.write() {
            *current = snapshot.clone();
        }
        snapshot
    }

    /// [`Self::rebuild`] on tokio's blocking pool, with what changed against the snapshot it
    /// replaces: the runtime's thread keeps serving calls meanwhile, and the old snapshot is
    /// compared and released there too. A build that panicked leaves the current snapshot in
    /// place (and is logged).
    pub async fn rebuild_off_runtime(
        self: &Arc<Self>,
        servers: Vec<ServerTools>,
        registry: Vec<RegistryEntry>,
    ) -> (Arc<Snapshot>, Changes) {
        let catalog = self.clone();
        let rebuilt = tokio::task::spawn_blocking(move || {
            let before = catalog.snapshot();
            let after = catalog.rebuild(&servers, &registry);
            let changes = changes(&before, &after);
            // The lists parsed for the build and the snapshot replaced are gone: their memory
            // goes back to the system now.
            drop((before, servers, registry));
            crate::shared_json::release_unshared();
            crate::allocator::release_freed();
            (after, changes)
        });
        match rebuilt.await {
            Ok(rebuilt) => rebuilt,
            Err(e) => {
                tracing::error!(error = %e, "catalogue rebuild failed; the previous catalogue stays");
                (self.snapshot(), Changes::default())
            }
        }
    }
}
