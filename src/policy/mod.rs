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
//! catalogue snapshot, principal), bounded by `list_cache_entries`.

pub mod engine;
pub mod reload;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, Weak},
};

use bytes::Bytes;

pub use engine::{PolicyEngine, Principal, Verdict};
use reload::PolicyStore;

use crate::{
    config::PolicyConfig,
    identity::Caller,
    registry::{ToolRecord, catalog::Snapshot},
};

/// The tools one caller may see in one catalogue snapshot.
#[derive(Debug)]
pub struct ToolView {
    /// Exposed names of the visible tools (every tool the caller may call, listed or not).
    pub visible: HashSet<Arc<str>>,
    /// The `tools/list` result of the visible tools (`{"tools":[…]}`), serialised once.
    pub list_result: Bytes,
}

impl ToolView {
    pub fn shows(&self, tool: &str) -> bool {
        self.visible.contains(tool)
    }
}

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

    /// May `caller` call `tool`?
    pub fn decide(&self, caller: &Caller, tool: &ToolRecord) -> Verdict {
        self.store.current().1.decide(&Principal::of(caller), tool)
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
        let definitions: Vec<&serde_json::Value> = listing
            .meta()
            .iter()
            .chain(tools.iter().filter(|t| listing.lists(&t.name)).map(|t| &t.definition))
            .collect();
        let list_result = serde_json::to_vec(&serde_json::json!({ "tools": definitions }))
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(br#"{"tools":[]}"#));
        let view =
            Arc::new(ToolView { visible: tools.iter().map(|t| t.name.clone()).collect(), list_result });
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
    key.push_str(&serde_json::Value::Object(caller.claims.clone()).to_string());
    key
}
