//! The in-memory catalogue: every tool of every server, resolved to one exposed name each.
//!
//! Built whole from each server's tool list and swapped atomically, so a lookup is a read
//! lock and a hash probe. Name conflicts resolve deterministically: a route in configuration
//! (`[tools.NAME] server = …`) wins and keeps the bare name; otherwise every copy is exposed
//! as `server__tool`, still matching `^[a-zA-Z0-9_-]{1,64}$`. Each conflict is logged once.
//!
//! The `tools/list` result is serialised once per snapshot into shared bytes: a request
//! clones a reference to them (no copy, no serialisation), whatever the catalogue's size.

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
    pub tools: Vec<Value>,
}

/// Tools by exposed name, probed once per call (foldhash: the names are the operator's).
type ByName = HashMap<Arc<str>, Arc<ToolRecord>, foldhash::fast::RandomState>;

/// One immutable version of the catalogue.
#[derive(Debug)]
pub struct Snapshot {
    by_name: ByName,
    /// The `tools/list` result (`{"tools":[…]}`), serialised once per snapshot.
    list_result: Bytes,
}

const EMPTY_LIST: &str = r#"{"tools":[]}"#;

impl Snapshot {
    fn empty() -> Self {
        Self { by_name: ByName::default(), list_result: Bytes::from_static(EMPTY_LIST.as_bytes()) }
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
}

impl Catalog {
    pub fn new(routes: BTreeMap<String, String>) -> Self {
        Self {
            current: RwLock::new(Arc::new(Snapshot::empty())),
            schemas: SchemaCache::default(),
            routes,
            logged_conflicts: Mutex::new(HashSet::new()),
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

    fn build(&self, servers: &[ServerTools], registry: &[RegistryEntry]) -> Snapshot {
        // tool name → servers offering it, in server order.
        let mut owners: BTreeMap<&str, Vec<(&ServerTools, &Value)>> = BTreeMap::new();
        for server in servers {
            let mut seen = HashSet::new();
            for tool in &server.tools {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    tracing::warn!(server = %server.server, "tool without a name ignored");
                    continue;
                };
                if seen.insert(name) {
                    owners.entry(name).or_default().push((server, tool));
                }
            }
        }
        let mut by_name = ByName::default();
        for (name, copies) in &owners {
            let routed = self.routes.get(*name);
            if copies.len() > 1 {
                self.log_conflict(name, copies, routed);
            }
            for (server, tool) in copies {
                let exposed = if copies.len() == 1 || routed.is_some_and(|r| *r == server.server) {
                    name.to_string()
                } else {
                    namespaced(&server.server, name)
                };
                if by_name.contains_key(exposed.as_str()) {
                    tracing::warn!(tool = %exposed, server = %server.server, "namespaced name collides; tool skipped");
                    continue;
                }
                let record = self.record(&exposed, name, server, tool);
                by_name.insert(record.name.clone(), Arc::new(record));
            }
        }
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
        Snapshot { by_name, list_result }
    }

    /// The record of a registry entry (its schema compiled through the shared cache).
    pub fn record_for_entry(&self, entry: &RegistryEntry) -> ToolRecord {
        let transport = TransportKind::parse(&entry.server.transport).unwrap_or(TransportKind::Http);
        let server = ServerTools { server: entry.server.name.clone(), transport, tools: Vec::new() };
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

    fn log_conflict(&self, name: &str, copies: &[(&ServerTools, &Value)], routed: Option<&String>) {
        let Ok(mut logged) = self.logged_conflicts.lock() else {
            return;
        };
        if logged.insert(name.to_string()) {
            let servers: Vec<&str> = copies.iter().map(|(s, _)| s.server.as_str()).collect();
            match routed {
                Some(owner) => {
                    tracing::warn!(tool = name, ?servers, owner = %owner, "tool name served by several servers; configuration route wins, others namespaced")
                }
                None => tracing::warn!(
                    tool = name,
                    ?servers,
                    "tool name served by several servers; all exposed as server__tool"
                ),
            }
        }
    }
}

/// `server__tool`, restricted to `[a-zA-Z0-9_-]` and at most 64 characters (a hash suffix
/// keeps shortened names distinct).
pub fn namespaced(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
    };
    let full = format!("{}__{}", clean(server), clean(tool));
    if full.len() <= 64 {
        return full;
    }
    let suffix = &canonical_hash(&Value::String(full.clone()))[..8];
    format!("{}_{suffix}", &full[..55])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server(name: &str, tools: &[&str]) -> ServerTools {
        ServerTools {
            server: name.into(),
            transport: TransportKind::Http,
            tools: tools.iter().map(|t| json!({"name": t, "inputSchema": {"type": "object"}})).collect(),
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
    fn list_is_sorted_and_names_stay_valid() {
        let catalog = Catalog::new(BTreeMap::new());
        catalog.rebuild(&[server("z", &["b", "a"])], &[]);
        let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
        assert_eq!(list["tools"][0]["name"], "a");
        let long = namespaced(&"s".repeat(40), &"t.x".repeat(20));
        assert!(long.len() <= 64 && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
