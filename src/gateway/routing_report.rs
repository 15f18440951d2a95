//! What the console shows of the routing the configuration in force decides: each endpoint
//! (`GET /admin/endpoints`: its selection and the tools it serves now) and each guardrail hook
//! (`GET /admin/hooks`: what it matches, what it does, and its decisions so far).
//!
//! Why from the settings and the metrics: an operator must see what the gateway decides, not
//! a second reading of the file — the endpoints' selection applied to the catalogue in force
//! (the door's own [`super::endpoints::Endpoints::selects`]), and the decisions the hooks
//! counted in `mcp_gateway_guardrail_decisions_total`.

use std::collections::BTreeMap;

use prometheus::core::Collector;
use serde_json::{Value, json};

use super::Gateway;

impl Gateway {
    /// `GET /admin/endpoints`: every `[endpoints.NAME]`, its path and selection as configured,
    /// and the catalogue tools it serves now (before any caller's policy).
    pub fn endpoints_report(&self) -> Value {
        let settings = self.settings();
        let tools = self.catalog().snapshot().tools();
        let endpoints: Vec<Value> = settings
            .config()
            .endpoints
            .iter()
            .map(|(name, endpoint)| {
                let served: Vec<&str> = tools
                    .iter()
                    .filter(|tool| settings.endpoints().selects(name, tool))
                    .map(|tool| tool.name.as_ref())
                    .collect();
                let renamed: BTreeMap<&str, &str> = endpoint
                    .tools
                    .iter()
                    .filter_map(|(tool, control)| Some((tool.as_str(), control.rename.as_deref()?)))
                    .collect();
                json!({
                    "name": name,
                    "path": format!("/mcp/{name}"),
                    "select": endpoint.select,
                    "renamed": renamed,
                    "tool_count": served.len(),
                    "tools": served,
                })
            })
            .collect();
        json!({"endpoints": endpoints})
    }

    /// `GET /admin/hooks`: every `[[hooks]]` entry as configured (what it matches and does,
    /// its failure mode) and its decisions since start, by decision.
    pub fn hooks_report(&self) -> Value {
        let mut decisions: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for family in self.metrics.guardrail_decisions.collect() {
            for metric in family.get_metric() {
                let label = |name: &str| {
                    metric.get_label().iter().find(|l| l.name() == name).map(|l| l.value().to_string())
                };
                let (Some(hook), Some(decision)) = (label("hook"), label("decision")) else { continue };
                let count = metric.get_counter().get_value() as u64;
                *decisions.entry(hook).or_default().entry(decision).or_default() += count;
            }
        }
        let settings = self.settings();
        let hooks: Vec<Value> = settings
            .config()
            .hooks
            .iter()
            .map(|hook| {
                let mut entry = serde_json::to_value(hook).unwrap_or_else(|_| json!({"name": hook.name}));
                let counted = decisions.remove(hook.name.as_str()).unwrap_or_default();
                if let Some(map) = entry.as_object_mut() {
                    map.insert("decisions".into(), json!(counted));
                }
                entry
            })
            .collect();
        json!({"hooks": hooks})
    }
}
