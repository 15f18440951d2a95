//! Tool policy: which caller may see and call which tool, decided by Cedar ([`engine`]) from
//! a file reloaded without a restart ([`reload`]).
//!
//! One decision serves everything: `tools/call` (batch items too) is refused with
//! `forbidden` when denied, and the denied tools are absent from `tools/list`, the exports
//! (`GET /tools`, `tools export`) and `GET /capabilities` ([`ToolView`]). A tool that exists
//! but is denied answers `forbidden` when called by name (whether or not the caller could
//! see it); a name no server offers stays `unknown_tool`. Without `[policy] file` nothing
//! here runs: the gateway holds `None` and every path is one branch.
//!
//! A filtered list costs one decision per tool, so views are cached per (policy generation,
//! catalogue snapshot, principal), bounded by `list_cache_entries`. A call's decision is
//! cached too, per (principal, tool record, policy generation), bounded by
//! [`MAX_CACHED_DECISIONS`]: a caller's repeat calls of a tool cost a map lookup, not a Cedar
//! evaluation. Both caches compare the whole principal (never a hash of it).

pub mod engine;
pub mod reload;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, Weak},
};

pub use engine::{PolicyEngine, Principal, SurfaceItem, Verdict};
use reload::PolicyStore;

use crate::{
    config::PolicyConfig,
    identity::Caller,
    registry::{
        ToolRecord,
        catalog::{Listed, Snapshot, ToolList},
    },
};

/// The tools one caller may see in one catalogue snapshot.
#[derive(Debug)]
pub struct ToolView {
    /// Exposed names of the visible tools (every tool the caller may call, listed or not).
    pub visible: HashSet<Arc<str>>,
    /// The `tools/list` result of the visible tools (`{"tools":[…]}`), serialised once, in
    /// pages.
    pub list: ToolList,
    /// Definitions shown instead of the catalogue's, by catalogue name: an endpoint's own
    /// catalogue control (`[endpoints.NAME.tools.TOOL]`); empty under the policy alone.
    pub shown: HashMap<Arc<str>, serde_json::Value>,
}

impl ToolView {
    pub fn shows(&self, tool: &str) -> bool {
        self.visible.contains(tool)
    }

    /// The definition of `tool` as this view's caller sees it (the catalogue's parsed from
    /// its text, see [`crate::registry::record::Definition`]).
    pub fn definition(&self, tool: &ToolRecord) -> serde_json::Value {
        self.shown.get(&tool.name).cloned().unwrap_or_else(|| tool.definition.value())
    }

    /// The entry of `tool` in a list built for this view's caller: the catalogue's text, or
    /// the definition this view shows instead.
    pub fn listed<'a>(&'a self, tool: &'a ToolRecord) -> Listed<'a> {
        self.shown.get(&tool.name).map_or(Listed::Text(&tool.definition), Listed::Value)
    }
}

/// Most per-call decisions kept (every caller and tool); when full, the cache starts afresh.
pub const MAX_CACHED_DECISIONS: usize = 65_536;

struct CachedDecision {
    generation: u64,
    /// The record decided on (weak: its memory cannot be reused while this is held, so an
    /// equal pointer is the same record; a refreshed record is a new one).
    record: Weak<ToolRecord>,
    verdict: Verdict,
}

/// Per principal key, per tool name (foldhash, seeded per process: the keys are long).
type Decisions = HashMap<String, HashMap<Arc<str>, CachedDecision, Seeded>, Seeded>;
type Seeded = foldhash::quality::RandomState;

struct CachedView {
    generation: u64,
    /// The snapshot the view was built from (weak: an old catalogue is not kept alive).
    snapshot: Weak<Snapshot>,
    view: Arc<ToolView>,
}

/// The policy in force and the cache of filtered views.
pub struct Policy {
    pub store: PolicyStore,
    views: Mutex<HashMap<String, CachedView>>,
    max_views: usize,
    decisions: Mutex<(Decisions, usize)>,
}

impl Policy {
    /// Loads `[policy] file` (an invalid file stops the start) and starts its watcher.
    pub fn start(
        config: &PolicyConfig,
        reloads: prometheus::IntCounterVec,
    ) -> anyhow::Result<Option<Arc<Self>>> {
        let Some(path) = &config.file else { return Ok(None) };
        let policy = Arc::new(Self {
            store: PolicyStore::load(path)?,
            views: Mutex::new(HashMap::new()),
            max_views: config.list_cache_entries,
            decisions: Mutex::new((HashMap::default(), 0)),
        });
        if config.reload_secs > 0 {
            reload::watch(
                Arc::downgrade(&policy),
                std::time::Duration::from_secs(config.reload_secs),
                reloads,
            );
        }
        Ok(Some(policy))
    }

    /// May `caller` see and read the resource, or see and get the prompt? (Not cached: lists
    /// of resources and prompts are read far less often than tools are called.)
    pub fn decide_item(&self, caller: &Caller, item: SurfaceItem<'_>) -> Verdict {
        let (_, engine) = self.store.current();
        engine.decide_item(&Principal::of(caller), item)
    }

    /// May `caller` call `tool`? (Cached per principal, tool record and policy generation.)
    pub fn decide(&self, caller: &Caller, tool: &Arc<ToolRecord>) -> Verdict {
        let (generation, engine) = self.store.current();
        let key = principal_key(caller);
        if let Ok(cache) = self.decisions.lock()
            && let Some(cached) = cache.0.get(&key).and_then(|tools| tools.get(&*tool.name))
            && cached.generation == generation
            && std::ptr::eq(cached.record.as_ptr(), Arc::as_ptr(tool))
        {
            return cached.verdict.clone();
        }
        let verdict = engine.decide(&Principal::of(caller), tool);
        if let Ok(mut cache) = self.decisions.lock() {
            let (decisions, count) = &mut *cache;
            if *count >= MAX_CACHED_DECISIONS {
                decisions.clear();
                *count = 0;
            }
            let cached =
                CachedDecision { generation, record: Arc::downgrade(tool), verdict: verdict.clone() };
            if decisions.entry(key).or_default().insert(tool.name.clone(), cached).is_none() {
                *count += 1;
            }
        }
        verdict
    }

    /// The tools of `snapshot` that `caller` may see (cached).
    pub fn view(&self, caller: &Caller, snapshot: &Arc<Snapshot>) -> Arc<ToolView> {
        let (generation, engine) = self.store.current();
        let key = principal_key(caller);
        if let Ok(views) = self.views.lock()
            && let Some(cached) = views.get(&key)
            && cached.generation == generation
            && std::ptr::eq(cached.snapshot.as_ptr(), Arc::as_ptr(snapshot))
        {
            return cached.view.clone();
        }
        let principal = Principal::of(caller);
        let tools: Vec<Arc<ToolRecord>> =
            snapshot.tools().into_iter().filter(|t| engine.decide(&principal, t).allowed).collect();
        // What `tools/list` holds: every visible tool, or in search mode the meta-tools and
        // the visible pinned tools (the others stay callable, and findable by search).
        let listing = snapshot.listing();
        let listed = tools.iter().filter(|t| listing.lists(t)).map(|t| Listed::Text(&t.definition));
        let list = ToolList::build(listing.meta(), listed);
        let view = Arc::new(ToolView {
            visible: tools.iter().map(|t| t.name.clone()).collect(),
            list,
            shown: HashMap::new(),
        });
        if self.max_views > 0
            && let Ok(mut views) = self.views.lock()
        {
            if views.len() >= self.max_views {
                views.retain(|_, v| v.generation == generation && v.snapshot.strong_count() > 0);
                if views.len() >= self.max_views {
                    views.clear();
                }
            }
            views.insert(
                key,
                CachedView { generation, snapshot: Arc::downgrade(snapshot), view: view.clone() },
            );
        }
        view
    }
}

/// Everything of a caller a policy can read, as one string (the view cache's key; compared
/// whole, so two callers never share a view by a hash collision).
fn principal_key(caller: &Caller) -> String {
    let mut key = String::new();
    key.push_str(caller.subject_or_anonymous());
    key.push('\0');
    key.push(if caller.subject.is_none() { 'a' } else { 's' });
    for list in [&caller.scopes, &caller.groups] {
        key.push('\0');
        let mut sorted: Vec<&String> = list.iter().collect();
        sorted.sort();
        for item in sorted {
            key.push_str(item);
            key.push('\u{1}');
        }
    }
    key.push('\0');
    key.push_str(caller.endpoint_name());
    key.push('\0');
    // Serialised without a copy of the claims (a map of JSON values always serialises).
    key.push_str(&serde_json::to_string(&caller.claims).unwrap_or_default());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(read_only: bool) -> Arc<ToolRecord> {
        let definition = json!({"annotations": {"readOnlyHint": read_only}});
        Arc::new(ToolRecord::for_tests("add_to_cart", "cart", definition, read_only))
    }

    fn caller(scopes: &[&str]) -> Caller {
        Caller {
            subject: Some("alice".into()),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            ..Caller::default()
        }
    }

    #[test]
    fn cached_call_decisions_are_per_principal_and_per_record() {
        let dir = std::env::temp_dir().join(format!("mcpgw-policy-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("policy.cedar");
        std::fs::write(
            &file,
            "@id(\"buy\")\npermit (principal, action, resource) when { principal.scopes.contains(\"buy\") };\n\
             @id(\"browse\")\npermit (principal, action, resource) when { resource.readOnly };\n",
        )
        .unwrap();
        let config = PolicyConfig { file: Some(file.clone()), reload_secs: 0, ..PolicyConfig::default() };
        let policy = Policy::start(&config, crate::telemetry::metrics::Metrics::new().policy_reloads.clone())
            .unwrap()
            .unwrap();
        let writable = tool(false);
        // The same subject with other scopes is another principal: never the cached verdict.
        assert!(!policy.decide(&caller(&["browse"]), &writable).allowed);
        assert!(policy.decide(&caller(&["buy"]), &writable).allowed);
        assert!(!policy.decide(&caller(&["browse"]), &writable).allowed, "from the cache, still denied");
        let verdict = policy.decide(&caller(&["buy"]), &writable);
        assert_eq!((verdict.allowed, &*verdict.rule), (true, "buy"));
        // A new record of the same tool (a refreshed catalogue made it read-only) is decided anew.
        let read_only = tool(true);
        let verdict = policy.decide(&caller(&["browse"]), &read_only);
        assert_eq!((verdict.allowed, &*verdict.rule), (true, "browse"));
        assert!(!policy.decide(&caller(&["browse"]), &writable).allowed, "the old record's verdict");
        // The endpoint is in the request's context, and in the caches' key.
        std::fs::write(
            &file,
            "@id(\"cart\")\npermit (principal, action, resource) when { context.endpoint == \"cart\" };\n",
        )
        .unwrap();
        let config = PolicyConfig { file: Some(file.clone()), reload_secs: 0, ..PolicyConfig::default() };
        let policy = Policy::start(&config, crate::telemetry::metrics::Metrics::new().policy_reloads.clone())
            .unwrap()
            .unwrap();
        let on_cart = caller(&[]).at_endpoint(Some("cart".into()));
        assert!(!policy.decide(&caller(&[]), &writable).allowed, "the plain /mcp: context.endpoint is \"\"");
        assert!(policy.decide(&on_cart, &writable).allowed);
        assert!(!policy.decide(&caller(&[]), &writable).allowed, "not the cart's cached verdict");
        std::fs::remove_dir_all(&dir).ok();
    }
}
