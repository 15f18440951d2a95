//! The in-memory catalogue: every tool of every server, resolved to one exposed name each.
//!
//! Built whole from each server's tool list and swapped atomically, so a lookup is a read
//! lock and a hash probe. Name conflicts resolve deterministically: a route in configuration
//! (`[tools.NAME] server = …`) wins and keeps the bare name; otherwise a server that held the
//! bare name in the previous catalogue keeps it and the newcomer is exposed as
//! `newcomer__tool`; with no holder every copy is exposed as `server__tool`, still matching
//! `^[a-zA-Z0-9_-]{1,64}$`. A tool name of the form `other__…`, where `other` is another
//! server, is that server's namespaced alias: it is refused, whoever offers it. Every
//! collision is kept in the snapshot ([`Snapshot::collisions`]: `GET /admin/registry/collisions`,
//! `mcp_gateway_tool_name_collisions{kind}`) and logged once.
//!
//! The `tools/list` result is serialised once per snapshot into shared bytes: a request
//! clones a reference to them (no copy, no serialisation), whatever the catalogue's size.
//!
//! A build is CPU work proportional to the catalogue (every definition hashed and copied, the
//! list serialised): with 10,006 tools about 200 ms. The refresher runs it on tokio's
//! blocking pool ([`Catalog::rebuild_off_runtime`]); on the runtime's thread it stalled every
//! call in flight for that long at each refresh (measured: p99 161 ms at 200 calls/s).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, Mutex, OnceLock, RwLock},
};

use bytes::Bytes;
use serde_json::Value;

use crate::tool_control::{Controlled, META_TOOLS, ToolOverrides};

use super::{
    bounds::Refusals,
    entry::{RegistryEntry, ServerRef},
    record::{Control, ToolRecord, canonical_hash, definition_hash},
    search::SearchIndex,
};
use crate::{
    config::{SearchConfig, TransportKind},
    export::names,
    validation::SchemaCache,
};

/// The tools one server offers, as it described them.
#[derive(Debug, Clone)]
pub struct ServerTools {
    pub server: String,
    pub transport: TransportKind,
    /// Shared: the refresher keeps each server's last list and lends it to every build.
    pub tools: Arc<Vec<Value>>,
}

/// How a rebuild changed the catalogue, by exposed name.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub added: u64,
    pub removed: u64,
    /// Same name, another definition hash (each is logged).
    pub changed: u64,
}

/// A tool name a server offered and did not get as it asked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Collision {
    /// The name the server offered.
    pub name: String,
    /// The server that offered it.
    pub server: String,
    /// The server the name belongs to (the alias's server, the holder, the route's server).
    pub owner: Option<String>,
    /// [`Collision::kind`] values: `alias_of_another_server` (refused), `name_held` (the
    /// holder kept the bare name, the newcomer is namespaced), `routed` (configuration routes
    /// the name elsewhere, this copy is namespaced), `shared_name` (no holder: every copy
    /// namespaced), `namespaced_clash` (the namespaced name was taken: refused); catalogue
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
    "namespaced_clash",
    "rename_clash",
    "override_invalid",
    "reserved_name",
];

/// Tools by exposed name, probed once per call (foldhash: the names are the operator's).
type ByName = HashMap<Arc<str>, Arc<ToolRecord>, foldhash::fast::RandomState>;

/// A tool that got a catalogue name, before catalogue control.
struct Candidate<'a> {
    /// Its catalogue name (bare or namespaced): the key of its `[tools.NAME]` section.
    exposed: String,
    /// Its name on the server.
    upstream: &'a str,
    server: &'a ServerTools,
    tool: &'a Value,
}

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

    /// Whether the catalogue tool `name` is in `tools/list`.
    pub fn lists(&self, name: &str) -> bool {
        match self {
            Listing::All => true,
            Listing::Search { pinned, .. } => pinned.contains(name),
        }
    }
}

/// One immutable version of the catalogue.
#[derive(Debug)]
pub struct Snapshot {
    by_name: ByName,
    /// The `tools/list` result (`{"tools":[…]}`), serialised once per snapshot.
    list_result: Bytes,
    /// Names offered and not granted as asked, by name then server.
    collisions: Vec<Collision>,
    /// What `tools/list` holds (and the search index in search mode).
    listing: Listing,
    /// Exported (model-API) names to their tools, built at the first alias lookup of this
    /// snapshot ([`Snapshot::exported_alias`]).
    aliases: OnceLock<Aliases>,
}

/// Tools by every name `GET /tools?format=…` exports them under.
type Aliases = HashMap<String, Arc<ToolRecord>, foldhash::fast::RandomState>;

const EMPTY_LIST: &str = r#"{"tools":[]}"#;

impl Snapshot {
    fn empty() -> Self {
        Self {
            by_name: ByName::default(),
            list_result: Bytes::from_static(EMPTY_LIST.as_bytes()),
            collisions: Vec::new(),
            listing: Listing::All,
            aliases: OnceLock::new(),
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

    /// The `tools/list` result of this snapshot: shared bytes, a JSON object.
    pub fn list_result(&self) -> Bytes {
        self.list_result.clone()
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

/// The catalogue: current snapshot plus what building it needs.
#[derive(Debug)]
pub struct Catalog {
    current: RwLock<Arc<Snapshot>>,
    schemas: SchemaCache,
    /// What configuration decides of the catalogue (a reload replaces it; the next build
    /// applies it).
    control: RwLock<Arc<Configured>>,
    logged_conflicts: Mutex<HashSet<String>>,
    /// Servers whose latest list went over a bound and was refused ([`super::bounds`]).
    refusals: Refusals,
    /// Tests: a signal the next build waits for.
    #[cfg(test)]
    test_gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

/// What configuration decides of the catalogue.
#[derive(Debug, Default)]
struct Configured {
    /// Tool name → server that owns the bare name (`[tools.NAME] server`).
    routes: BTreeMap<String, String>,
    /// Catalogue control, by catalogue name (`[tools.NAME]`).
    overrides: BTreeMap<String, ToolOverrides>,
    /// The search mode's settings (`None`: `tools/list` holds every tool).
    search: Option<SearchConfig>,
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
        let routes = self.control().routes.clone();
        self.reconfigure(routes, overrides, search);
        self
    }

    /// Replaces the routes, the catalogue control and the search mode (a configuration
    /// reload); the next build applies them.
    pub fn reconfigure(
        &self,
        routes: BTreeMap<String, String>,
        overrides: BTreeMap<String, ToolOverrides>,
        search: &SearchConfig,
    ) {
        let control = Configured {
            routes,
            overrides: overrides.into_iter().filter(|(_, o)| !o.is_empty()).collect(),
            search: search.enabled.then(|| search.clone()),
        };
        match self.control.write() {
            Ok(mut current) => *current = Arc::new(control),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(control),
        }
    }

    fn control(&self) -> Arc<Configured> {
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

    /// The `tools/list` result (all tools, by exposed name): shared bytes of a JSON object.
    pub fn list_result(&self) -> Bytes {
        self.snapshot().list_result()
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

    fn build(&self, servers: &[ServerTools], registry: &[RegistryEntry]) -> Snapshot {
        #[cfg(test)]
        tests::wait_at_gate(self);
        let control = self.control();
        // tool name → servers offering it, in server order.
        let mut owners: BTreeMap<&str, Vec<(&ServerTools, &Value)>> = BTreeMap::new();
        for server in servers {
            let mut seen = HashSet::new();
            for tool in server.tools.iter() {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    tracing::warn!(server = %server.server, "tool without a name ignored");
                    continue;
                };
                if seen.insert(name) {
                    owners.entry(name).or_default().push((server, tool));
                }
            }
        }
        let previous = self.snapshot();
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
            let mut granted: Vec<(&ServerTools, &Value)> = Vec::with_capacity(copies.len());
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
            // Without a route, a server that held the bare name keeps it.
            let holder = match routed {
                Some(owner) => Some(owner.clone()),
                None if granted.len() > 1 => previous
                    .by_name
                    .get(*name)
                    .filter(|held| held.origin.is_none() && &*held.upstream_name == *name)
                    .filter(|held| granted.iter().any(|(s, _)| *s.server == *held.server))
                    .map(|held| held.server.to_string()),
                None => None,
            };
            for (server, tool) in &granted {
                let bare = granted.len() == 1 || holder.as_deref() == Some(server.server.as_str());
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
                if !bare {
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
                candidates.push(Candidate { exposed, upstream: name, server, tool });
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
                let sorted: Vec<Arc<ToolRecord>> = list.iter().map(|t| (*t).clone()).collect();
                Listing::Search {
                    meta: super::search::meta_tools(search),
                    pinned: search.pinned.iter().map(|n| Arc::from(n.as_str())).collect(),
                    index: Arc::new(SearchIndex::build(&sorted)),
                }
            }
        };
        let definitions: Vec<&Value> = listing
            .meta()
            .iter()
            .chain(list.iter().filter(|t| listing.lists(&t.name)).map(|t| &t.definition))
            .collect();
        let list_result = serde_json::to_vec(&serde_json::json!({ "tools": definitions }))
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(EMPTY_LIST.as_bytes()));
        Snapshot { by_name, list_result, collisions, listing, aliases: OnceLock::new() }
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
            let overrides = control.overrides.get(&candidate.exposed);
            let reserved = control.search.is_some() && META_TOOLS.contains(&candidate.exposed.as_str());
            let Some(overrides) = overrides.filter(|o| !o.is_empty()) else {
                if !reserved {
                    let record =
                        self.record(&candidate.exposed, candidate.upstream, candidate.server, candidate.tool);
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
                    let record = self.record(&exposed, candidate.upstream, candidate.server, candidate.tool);
                    by_name.insert(record.name.clone(), Arc::new(record));
                }
                continue;
            };
            match overrides.apply(&candidate.exposed, candidate.tool) {
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

    /// The overrides of a registry entry: its own, under the configuration's for its name.
    fn entry_overrides(&self, entry: &RegistryEntry) -> ToolOverrides {
        match self.control().overrides.get(&entry.tool_name) {
            Some(config) => config.over(&entry.overrides),
            None => entry.overrides.clone(),
        }
    }

    /// A registry entry's record as callers are served it, for a lookup of `name` below
    /// memory: `None` when the entry is hidden, renamed to another name, its overrides do not
    /// fit it, or the name is a meta-tool's in search mode.
    pub fn served_record_for_entry(&self, entry: &RegistryEntry, name: &str) -> Option<ToolRecord> {
        if self.control().search.is_some() && META_TOOLS.contains(&name) {
            return None;
        }
        let record = self.controlled_record_for_entry(entry, &self.entry_overrides(entry)).ok()??;
        (&*record.name == name).then_some(record)
    }

    fn controlled_record_for_entry(
        &self,
        entry: &RegistryEntry,
        overrides: &ToolOverrides,
    ) -> Result<Option<ToolRecord>, String> {
        if overrides.is_empty() {
            return Ok(Some(self.record_for_entry(entry)));
        }
        let Some(controlled) = overrides.apply(&entry.tool_name, &entry.tool_definition())? else {
            return Ok(None);
        };
        let transport = TransportKind::parse(&entry.server.transport).unwrap_or(TransportKind::Http);
        let server = ServerTools { server: entry.server.name.clone(), transport, tools: Arc::default() };
        let mut record = self.build_record(&entry.tool_name, &entry.tool_name, &server, controlled);
        record.origin = Some(Arc::new(ServerRef::clone(&entry.server)));
        Ok(Some(record))
    }

    fn controlled_record(&self, candidate: &Candidate<'_>, controlled: Controlled) -> ToolRecord {
        self.build_record(&candidate.exposed, candidate.upstream, candidate.server, controlled)
    }

    /// The record of a tool under catalogue control (`catalogue_name`: its name before a
    /// rename; the schema compiled is the one calls are checked against).
    fn build_record(
        &self,
        catalogue_name: &str,
        upstream: &str,
        server: &ServerTools,
        controlled: Controlled,
    ) -> ToolRecord {
        let Controlled { name, definition, schema, fixed } = controlled;
        let schema_hash = canonical_hash(&schema);
        let compiled = self.schemas.get_or_compile(&schema_hash, &schema, &name);
        let hint = |key: &str| {
            definition.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool).unwrap_or(false)
        };
        ToolRecord {
            upstream_name: upstream.into(),
            server: server.server.as_str().into(),
            transport: server.transport,
            definition_hash: definition_hash(&definition),
            read_only: hint("readOnlyHint"),
            idempotent: hint("idempotentHint"),
            definition,
            schema_hash,
            schema: compiled,
            origin: None,
            control: Some(Arc::new(Control { catalogue_name: catalogue_name.into(), fixed })),
            name: name.into(),
        }
    }

    /// The record of a registry entry as registered, without catalogue control (its schema
    /// compiled through the shared cache).
    pub fn record_for_entry(&self, entry: &RegistryEntry) -> ToolRecord {
        let transport = TransportKind::parse(&entry.server.transport).unwrap_or(TransportKind::Http);
        let server = ServerTools { server: entry.server.name.clone(), transport, tools: Arc::default() };
        let mut record = self.record(&entry.tool_name, &entry.tool_name, &server, &entry.tool_definition());
        record.origin = Some(Arc::new(ServerRef::clone(&entry.server)));
        record
    }

    fn record(&self, exposed: &str, upstream: &str, server: &ServerTools, tool: &Value) -> ToolRecord {
        let mut definition = tool.clone();
        definition["name"] = Value::String(exposed.to_string());
        let empty_schema = serde_json::json!({"type": "object"});
        let input_schema = tool.get("inputSchema").unwrap_or(&empty_schema);
        let schema_hash = canonical_hash(input_schema);
        let schema = self.schemas.get_or_compile(&schema_hash, input_schema, exposed);
        let hint = |key: &str| {
            tool.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool).unwrap_or(false)
        };
        ToolRecord {
            name: exposed.into(),
            upstream_name: upstream.into(),
            server: server.server.as_str().into(),
            transport: server.transport,
            definition_hash: definition_hash(&definition),
            definition,
            schema_hash,
            schema,
            read_only: hint("readOnlyHint"),
            idempotent: hint("idempotentHint"),
            origin: None,
            control: None,
        }
    }

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

/// What `after` changed against `before`; every changed definition is logged (in name order).
fn changes(before: &Snapshot, after: &Snapshot) -> Changes {
    let mut changes = Changes::default();
    for tool in after.tools() {
        match before.by_name.get(&tool.name) {
            None => changes.added += 1,
            Some(previous) if previous.definition_hash != tool.definition_hash => {
                changes.changed += 1;
                tracing::warn!(
                    tool = %tool.name,
                    server = %tool.server,
                    before = %previous.definition_hash,
                    after = %tool.definition_hash,
                    schema_before = %previous.schema_hash,
                    schema_after = %tool.schema_hash,
                    "tool definition changed"
                );
            }
            Some(_) => {}
        }
    }
    changes.removed = before.by_name.keys().filter(|name| !after.by_name.contains_key(*name)).count() as u64;
    changes
}

/// A name restricted to `[a-zA-Z0-9_-]` (others become `_`).
fn clean(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use serde_json::json;

    /// A build of a catalogue with a gate waits for its signal first.
    pub(super) fn wait_at_gate(catalog: &Catalog) {
        let gate = catalog.test_gate.lock().ok().and_then(|mut g| g.take());
        if let Some(gate) = gate {
            // Only a guard against a hang: the signal comes from the runtime's thread, so it
            // never arrives while this build holds that thread.
            gate.recv_timeout(std::time::Duration::from_secs(30))
                .expect("the build held the runtime's thread: the task that signals it never ran");
        }
    }

    #[test]
    fn a_rebuild_leaves_the_runtime_free_for_calls() {
        // A current-thread runtime, as the gateway's default: the build must not run on it.
        // The build waits until a task on the runtime has run; were it on the runtime's
        // thread, that task could never run and the build would fail its guard.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let catalog = Arc::new(Catalog::new(BTreeMap::new()));
        let (signal, gate) = mpsc::channel();
        *catalog.test_gate.lock().unwrap() = Some(gate);
        let (snapshot, changes) = runtime.block_on(async {
            let rebuilding = catalog.rebuild_off_runtime(vec![server("a", &["search"])], Vec::new());
            let call_in_flight = async move {
                tokio::task::yield_now().await;
                signal.send(()).unwrap();
            };
            tokio::join!(rebuilding, call_in_flight).0
        });
        assert_eq!(snapshot.len(), 1);
        assert!(catalog.get("search").is_some(), "the new snapshot is swapped in");
        assert_eq!(changes, Changes { added: 1, removed: 0, changed: 0 });
    }

    fn server(name: &str, tools: &[&str]) -> ServerTools {
        ServerTools {
            server: name.into(),
            transport: TransportKind::Http,
            tools: Arc::new(
                tools.iter().map(|t| json!({"name": t, "inputSchema": {"type": "object"}})).collect(),
            ),
        }
    }

    #[test]
    fn conflicts_are_namespaced_unless_configuration_routes_them() {
        let catalog = Catalog::new(BTreeMap::new());
        catalog.rebuild(&[server("a", &["search", "only_a"]), server("b", &["search"])], &[]);
        assert!(catalog.get("search").is_none());
        assert_eq!(&*catalog.get("a__search").unwrap().upstream_name, "search");
        assert!(catalog.get("b__search").is_some());
        assert!(catalog.get("only_a").is_some());

        let routed = Catalog::new(BTreeMap::from([("search".to_string(), "b".to_string())]));
        routed.rebuild(&[server("a", &["search"]), server("b", &["search"])], &[]);
        assert_eq!(&*routed.get("search").unwrap().server, "b");
        assert!(routed.get("a__search").is_some());
    }

    #[test]
    fn another_servers_alias_is_refused_and_a_held_name_stays_with_its_holder() {
        let catalog = Catalog::new(BTreeMap::new());
        catalog.rebuild(&[server("demo", &["search"]), server("evil", &["demo__search"])], &[]);
        assert!(catalog.get("demo__search").is_none(), "another server's alias is refused");
        let snapshot = catalog.snapshot();
        let refused = &snapshot.collisions()[0];
        assert_eq!((refused.kind, refused.server.as_str()), ("alias_of_another_server", "evil"));
        // demo holds `search`; evil starts offering it too: demo keeps it, evil is namespaced.
        catalog.rebuild(&[server("demo", &["search"]), server("evil", &["search", "demo__search"])], &[]);
        assert_eq!(&*catalog.get("search").unwrap().server, "demo");
        assert_eq!(&*catalog.get("evil__search").unwrap().server, "evil");
        assert!(catalog.get("demo__search").is_none());
        let kinds: Vec<&str> = catalog.snapshot().collisions().iter().map(|c| c.kind).collect();
        assert_eq!(kinds, ["alias_of_another_server", "name_held"]);
    }

    #[test]
    fn a_rebuild_counts_what_it_added_removed_and_changed() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let catalog = Arc::new(Catalog::new(BTreeMap::new()));
        let mut edited = server("a", &["keep", "edit", "drop"]);
        runtime.block_on(catalog.rebuild_off_runtime(vec![edited.clone()], Vec::new()));
        let mut tools = (*edited.tools).clone();
        tools.retain(|t| t["name"] != "drop");
        tools[1]["description"] = json!("now says more");
        tools.push(json!({"name": "new", "inputSchema": {"type": "object"}}));
        edited.tools = Arc::new(tools);
        let (_, changes) = runtime.block_on(catalog.rebuild_off_runtime(vec![edited], Vec::new()));
        assert_eq!(changes, Changes { added: 1, removed: 1, changed: 1 });
    }

    fn controlled(overrides: Value, search: bool) -> Catalog {
        let overrides: BTreeMap<String, ToolOverrides> = serde_json::from_value(overrides).unwrap();
        let search = SearchConfig { enabled: search, pinned: vec!["pinned".into()], max_results: 5 };
        Catalog::new(BTreeMap::new()).controlled(overrides, &search)
    }

    #[test]
    fn catalogue_control_renames_hides_and_keeps_the_settings_name() {
        let catalog = controlled(
            json!({"a": {"rename": "b"}, "b": {"rename": "a"}, "gone": {"hide": true},
            "c": {"fixed_arguments": {"x": 1}}}),
            false,
        );
        catalog.rebuild(&[server("s", &["a", "b", "gone", "c"])], &[]);
        let swapped = catalog.get("b").unwrap();
        assert_eq!(
            (&*swapped.upstream_name, swapped.settings_name()),
            ("a", "a"),
            "two tools may swap names"
        );
        assert_eq!(&*catalog.get("a").unwrap().upstream_name, "b");
        assert!(catalog.get("gone").is_none(), "hidden");
        // `c`'s schema has no property `x`: withheld, and reported.
        assert!(catalog.get("c").is_none());
        let snapshot = catalog.snapshot();
        let refused = &snapshot.collisions()[0];
        assert_eq!((refused.kind, refused.name.as_str()), ("override_invalid", "c"));
        assert!(refused.detail.as_deref().unwrap().contains("not a property"), "{refused:?}");
        let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
        assert_eq!(list["tools"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_rename_never_takes_a_name_another_tool_keeps() {
        let catalog = controlled(json!({"a": {"rename": "b"}}), false);
        catalog.rebuild(&[server("s", &["a", "b"])], &[]);
        assert_eq!(&*catalog.get("b").unwrap().upstream_name, "b");
        assert!(catalog.get("a").is_none());
        assert_eq!(catalog.snapshot().collisions()[0].kind, "rename_clash");
    }

    #[test]
    fn search_mode_lists_the_meta_tools_and_the_pinned_ones_and_reserves_their_names() {
        let catalog = controlled(json!({}), true);
        catalog.rebuild(&[server("s", &["pinned", "other", "search_tools"])], &[]);
        let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
        let names: Vec<&str> =
            list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["search_tools", "call_tool", "pinned"]);
        assert!(catalog.get("other").is_some(), "every tool stays callable by name");
        assert_eq!(&*catalog.get("s__search_tools").unwrap().upstream_name, "search_tools");
        assert!(catalog.get("search_tools").is_none());
        let snapshot = catalog.snapshot();
        assert_eq!(snapshot.search_index().unwrap().len(), 3);
        assert_eq!(snapshot.collisions()[0].kind, "reserved_name");
    }

    #[test]
    fn registry_entries_take_their_own_overrides_under_the_configurations() {
        let catalog = controlled(json!({"entry_tool": {"description": "from configuration"}}), false);
        let entry = RegistryEntry {
            tool_name: "entry_tool".into(),
            definition: json!({"description": "d", "inputSchema": {"type": "object", "properties": {"k": {"type": "string"}}}}),
            server: ServerRef {
                name: "reg".into(),
                transport: "http".into(),
                url: Some("http://127.0.0.1:1/mcp".into()),
                function: None,
                qualifier: None,
                command: None,
                lambda_event: None,
                agentcore_target: None,
            },
            status: "active".into(),
            healthy: true,
            version: 1,
            updated_at: String::new(),
            overrides: serde_json::from_value(
                json!({"rename": "renamed_entry", "fixed_arguments": {"k": "v"}}),
            )
            .unwrap(),
        };
        catalog.rebuild(&[], std::slice::from_ref(&entry));
        let record = catalog.get("renamed_entry").unwrap();
        assert_eq!(record.definition["description"], "from configuration");
        assert_eq!(record.control.as_ref().unwrap().fixed["k"], "v");
        assert!(record.definition["inputSchema"]["properties"].get("k").is_none());
        assert!(catalog.served_record_for_entry(&entry, "entry_tool").is_none(), "not under its old name");
        assert!(catalog.served_record_for_entry(&entry, "renamed_entry").is_some());
    }

    #[test]
    fn the_alias_map_is_built_once_per_snapshot_and_resolves_what_the_exports_give() {
        let catalog = Catalog::new(BTreeMap::new());
        let names = ["catalog.search", "9lives", "plain", "x/y"];
        catalog.rebuild(&[server("s", &names)], &[]);
        let snapshot = catalog.snapshot();
        let builds = std::cell::Cell::new(0);
        let tools: Vec<Value> = snapshot.tools().iter().map(|t| t.definition.clone()).collect();
        for format in crate::export::Format::ALL {
            let body = crate::export::export(format, &tools, crate::export::Options::default());
            let mapped = body["gateway"]["names"].as_object().cloned().unwrap_or_default();
            for (exported, original) in &mapped {
                let found = snapshot.exported_alias(exported, || builds.set(builds.get() + 1));
                assert_eq!(found.map(|t| t.name.to_string()).as_deref(), original.as_str(), "{format:?}");
            }
        }
        // Alias-shaped names that stand for nothing: a probe each, no walk of the catalogue.
        for i in 0..64 {
            let unknown = format!("x_{:08x}", i);
            assert!(snapshot.exported_alias(&unknown, || builds.set(builds.get() + 1)).is_none());
            assert!(
                snapshot.exported_alias(&format!("x_{:016x}", i), || builds.set(builds.get() + 1)).is_none()
            );
        }
        assert!(
            snapshot.exported_alias("plain", || builds.set(builds.get() + 1)).is_none(),
            "not a mapped shape"
        );
        assert_eq!(builds.get(), 1, "one map per snapshot, however many lookups");
        // A new snapshot builds its own.
        catalog.rebuild(&[server("s", &["other.name"])], &[]);
        let next = catalog.snapshot();
        let exported = names::assign(&names::WORD_64, &["other.name"]).0.remove(0);
        assert_eq!(
            next.exported_alias(&exported, || builds.set(builds.get() + 1))
                .map(|t| t.name.to_string())
                .as_deref(),
            Some("other.name")
        );
        assert_eq!(builds.get(), 2);
    }

    #[test]
    fn list_is_sorted_and_names_stay_valid() {
        let catalog = Catalog::new(BTreeMap::new());
        catalog.rebuild(&[server("z", &["b", "a"])], &[]);
        let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
        assert_eq!(list["tools"][0]["name"], "a");
        let long = namespaced(&"s".repeat(40), &"t.x".repeat(20));
        assert!(long.len() <= 64 && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
