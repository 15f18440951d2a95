//! Drift: what the registry says a server offers, against what the server's live
//! `tools/list` says — tools added on the server, tools removed from it, schemas changed —
//! and the OpenAPI servers whose document now names another target origin than the approved
//! one (`origin_changed`, [`crate::upstream::openapi`]). Exposed at `GET /admin/registry/drift`
//! and as `mcp_gateway_registry_drift_tools`.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::{Gateway, tool_list::list_tools};
use crate::registry::{entry::RegistryEntry, record::canonical_hash};

impl Gateway {
    /// Compares every registry server (or only `only`) with its live tools.
    pub async fn registry_drift(&self, only: Option<&str>) -> Value {
        let entries = self.registry_entries.read().map(|e| e.clone()).unwrap_or_default();
        let mut by_server: BTreeMap<String, Vec<RegistryEntry>> = BTreeMap::new();
        for entry in entries {
            if only.is_none_or(|o| o == entry.server.name) {
                by_server.entry(entry.server.name.clone()).or_default().push(entry);
            }
        }
        let mut report = serde_json::Map::new();
        for (server, registered) in by_server {
            let record = self.catalog().record_for_entry(&registered[0]);
            let live = match self.upstream_for(&record).await {
                // Its registry entries are all there is to know of it.
                Ok(upstream) if upstream.config.is_agentcore() => {
                    report.insert(
                        server,
                        json!({"skipped": "AgentCore Lambda target: no tools/list to compare with"}),
                    );
                    continue;
                }
                Ok(upstream) => {
                    let bounds = upstream.config.tool_list_bounds(&self.settings().config.defaults);
                    list_tools(&upstream, bounds).await.map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            let live = match live {
                Ok(listing) => {
                    listing.tools.iter().filter_map(|t| t.parse::<Value>().ok()).collect::<Vec<_>>()
                }
                Err(reason) => {
                    report.insert(server, json!({"error": reason}));
                    continue;
                }
            };
            let schema =
                |tool: &Value| canonical_hash(tool.get("inputSchema").unwrap_or(&json!({"type": "object"})));
            let live_by_name: HashMap<&str, &Value> =
                live.iter().filter_map(|t| Some((t.get("name")?.as_str()?, t))).collect();
            let registered_names: HashMap<&str, &RegistryEntry> =
                registered.iter().map(|e| (e.tool_name.as_str(), e)).collect();
            let mut added: Vec<&str> =
                live_by_name.keys().filter(|n| !registered_names.contains_key(*n)).copied().collect();
            let mut removed: Vec<&str> =
                registered_names.keys().filter(|n| !live_by_name.contains_key(*n)).copied().collect();
            let mut changed: Vec<Value> = registered
                .iter()
                .filter_map(|entry| {
                    let live_tool = live_by_name.get(entry.tool_name.as_str())?;
                    let (registered_hash, live_hash) = (entry.schema_hash(), schema(live_tool));
                    (registered_hash != live_hash)
                        .then(|| json!({"tool": entry.tool_name, "registry_schema_hash": registered_hash, "live_schema_hash": live_hash}))
                })
                .collect();
            added.sort_unstable();
            removed.sort_unstable();
            changed.sort_by(|a, b| a["tool"].as_str().cmp(&b["tool"].as_str()));
            for (kind, count) in
                [("added", added.len()), ("removed", removed.len()), ("schema_changed", changed.len())]
            {
                self.metrics.registry_drift.with_label_values(&[&server, kind]).set(count as i64);
            }
            let drifted = !(added.is_empty() && removed.is_empty() && changed.is_empty());
            report.insert(
                server,
                json!({"drifted": drifted, "added": added, "removed": removed, "schema_changed": changed}),
            );
        }
        for pending in self.pending_origins() {
            let Some(server) = pending["server"].as_str().map(str::to_string) else { continue };
            if only.is_some_and(|o| o != server) {
                continue;
            }
            let entry = report.entry(server).or_insert_with(
                || json!({"drifted": false, "added": [], "removed": [], "schema_changed": []}),
            );
            entry["drifted"] = json!(true);
            entry["origin_changed"] =
                json!({"approved": pending["approved_origin"], "offered": pending["pending_origin"]});
        }
        Value::Object(report)
    }

    /// OpenAPI servers whose document names a target origin waiting for approval.
    pub fn pending_origins(&self) -> Vec<Value> {
        self.all_upstreams().iter().filter_map(|u| u.openapi.as_ref()?.pending_origin()).collect()
    }

    /// Approves `server`'s pending target origin (`None`: nothing pending there).
    pub fn approve_origin(&self, server: &str) -> Option<String> {
        let upstream = self.all_upstreams().into_iter().find(|u| &*u.name == server)?;
        upstream.openapi.as_ref()?.approve_origin()
    }
}
