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
    sync::{Arc, Mutex, RwLock},
};

use bytes::Bytes;
use serde_json::Value;

use super::{
    entry::{RegistryEntry, ServerRef},
    record::{ToolRecord, canonical_hash, definition_hash},
};
use crate::{config::TransportKind, validation::SchemaCache};

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
    /// namespaced), `namespaced_clash` (the namespaced name was taken: refused).
    pub kind: &'static str,
    /// The name it is exposed under, if any.
    pub exposed: Option<String>,
}

/// Every [`Collision::kind`], for zero metric series.
pub const COLLISION_KINDS: &[&str] =
    &["alias_of_another_server", "name_held", "routed", "shared_name", "namespaced_clash"];

/// Tools by exposed name, probed once per call (foldhash: the names are the operator's).
type ByName = HashMap<Arc<str>, Arc<ToolRecord>, foldhash::fast::RandomState>;

/// One immutable version of the catalogue.
#[derive(Debug)]
pub struct Snapshot {
    by_name: ByName,
    /// The `tools/list` result (`{"tools":[…]}`), serialised once per snapshot.
    list_result: Bytes,
    /// Names offered and not granted as asked, by name then server.
    collisions: Vec<Collision>,
}

const EMPTY_LIST: &str = r#"{"tools":[]}"#;

impl Snapshot {
    fn empty() -> Self {
        Self {
            by_name: ByName::default(),
            list_result: Bytes::from_static(EMPTY_LIST.as_bytes()),
            collisions: Vec::new(),
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

    /// All tools, ordered by exposed name.
    pub fn tools(&self) -> Vec<Arc<ToolRecord>> {
        let mut tools: Vec<_> = self.by_name.values().cloned().collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }
}

/// The catalogue: current snapshot plus what building it needs.
#[derive(Debug)]
pub struct Catalog {
    current: RwLock<Arc<Snapshot>>,
    schemas: SchemaCache,
    /// Tool name → server that owns the bare name (from configuration).
    routes: BTreeMap<String, String>,
    logged_conflicts: Mutex<HashSet<String>>,
    /// Tests: a signal the next build waits for.
    #[cfg(test)]
    test_gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl Catalog {
    pub fn new(routes: BTreeMap<String, String>) -> Self {
        Self {
            current: RwLock::new(Arc::new(Snapshot::empty())),
            schemas: SchemaCache::default(),
            routes,
            logged_conflicts: Mutex::new(HashSet::new()),
            #[cfg(test)]
            test_gate: Mutex::new(None),
        }
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
                    }),
                    None => granted.push((server, tool)),
                }
            }
            if granted.is_empty() {
                continue;
            }
            let routed = self.routes.get(*name);
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
                if by_name.contains_key(exposed.as_str()) {
                    collisions.push(Collision {
                        name: name.to_string(),
                        server: server.server.clone(),
                        owner: by_name.get(exposed.as_str()).map(|t| t.server.to_string()),
                        kind: "namespaced_clash",
                        exposed: None,
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
                    });
                }
                let record = self.record(&exposed, name, server, tool);
                by_name.insert(record.name.clone(), Arc::new(record));
            }
        }
        self.log_collisions(&collisions);
        for entry in registry {
            if by_name.contains_key(entry.tool_name.as_str()) {
                continue;
            }
            let record = self.record_for_entry(entry);
            by_name.insert(record.name.clone(), Arc::new(record));
        }
        let mut list: Vec<&Arc<ToolRecord>> = by_name.values().collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        let definitions: Vec<&Value> = list.iter().map(|t| &t.definition).collect();
        let list_result = serde_json::to_vec(&serde_json::json!({ "tools": definitions }))
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(EMPTY_LIST.as_bytes()));
        Snapshot { by_name, list_result, collisions }
    }

    /// The record of a registry entry (its schema compiled through the shared cache).
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
