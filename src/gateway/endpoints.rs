//! Endpoints per audience (`[endpoints.NAME]`, served at `/mcp/NAME`): what each one selects of
//! the catalogue and the resources and prompts, and how it shows its tools (its own catalogue
//! control on top of the global one).
//!
//! Why here and not in the server: the endpoint travels on the caller
//! ([`crate::identity::Caller::endpoint`]), and every decision on a tool reads it where the
//! gateway already decides — the door ([`Self::selects`], so no call path can skip it), the
//! tool view ([`Self::view`]: `tools/list`, the exports, search, `/capabilities`, the list-change
//! fingerprints) and the federation's checks of resources and prompts. A tool outside an
//! endpoint's selection is *unknown* there, never forbidden: an endpoint tells nothing of the
//! tools of the others.
//!
//! Names: selection patterns and `[endpoints.NAME.tools.TOOL]` keys are the global catalogue's
//! names (after `[tools.NAME] rename`). An endpoint's rename is resolved statically: its new
//! name stands for the tool there, its old name is unknown there, and a catalogue tool whose
//! name an endpoint gave to another tool is shadowed (left out) on that endpoint.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, Weak},
};

use serde_json::Value;

use crate::{
    config::{
        EndpointConfig, EndpointToolControl, Selection, endpoints::glob_matches,
        surface_control::PromptControl,
    },
    policy::ToolView,
    registry::{
        ToolRecord,
        catalog::{Listed, Snapshot, ToolList},
    },
    resource_uri::CanonicalUri,
};

/// Views kept per endpoint (one per distinct policy view, i.e. per principal under a policy);
/// when full, the endpoint's cache starts afresh.
pub const MAX_VIEWS_PER_ENDPOINT: usize = 1024;

/// The configured endpoints.
#[derive(Default)]
pub struct Endpoints {
    by_name: HashMap<Arc<str>, Endpoint>,
}

struct Endpoint {
    select: Selection,
    tools: HashMap<String, EndpointToolControl>,
    prompts: HashMap<String, PromptControl>,
    /// The endpoint's new tool names → the catalogue's.
    to_catalogue: HashMap<String, Arc<str>>,
    /// Catalogue names the endpoint renamed (unknown there by that name).
    renamed_away: HashSet<String>,
    views: Mutex<HashMap<usize, CachedView>>,
}

struct CachedView {
    snapshot: Weak<Snapshot>,
    /// The policy's view this one narrows (`None`: no policy).
    base: Option<Weak<ToolView>>,
    view: Arc<ToolView>,
}

impl Endpoints {
    pub fn new(config: &std::collections::BTreeMap<String, EndpointConfig>) -> Self {
        let by_name = config
            .iter()
            .map(|(name, endpoint)| {
                let to_catalogue = endpoint
                    .tools
                    .iter()
                    .filter_map(|(tool, c)| Some((c.rename.clone()?, Arc::<str>::from(tool.as_str()))))
                    .collect();
                let renamed_away = endpoint
                    .tools
                    .iter()
                    .filter(|(_, c)| c.rename.is_some())
                    .map(|(t, _)| t.clone())
                    .collect();
                let endpoint = Endpoint {
                    select: endpoint.select.clone(),
                    tools: endpoint.tools.clone().into_iter().collect(),
                    prompts: endpoint.prompts.clone().into_iter().collect(),
                    to_catalogue,
                    renamed_away,
                    views: Mutex::new(HashMap::new()),
                };
                (Arc::<str>::from(name.as_str()), endpoint)
            })
            .collect();
        Self { by_name }
    }

    /// The endpoint's own name for `name` (`Arc` shared with the configuration), if it exists.
    pub fn known(&self, name: &str) -> Option<Arc<str>> {
        self.by_name.get_key_value(name).map(|(k, _)| k.clone())
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The catalogue name of the tool `endpoint`'s callers call `name` (`None`: no tool has
    /// that name there — it was renamed away).
    pub fn catalogue_name<'a>(&'a self, endpoint: &str, name: &'a str) -> Option<&'a str> {
        let Some(e) = self.by_name.get(endpoint) else { return Some(name) };
        if let Some(catalogue) = e.to_catalogue.get(name) {
            return Some(catalogue);
        }
        (!e.renamed_away.contains(name)).then_some(name)
    }

    /// Whether `endpoint` serves `tool` (its selection, its `hide`, no shadowing rename). An
    /// unknown endpoint serves nothing.
    pub fn selects(&self, endpoint: &str, tool: &ToolRecord) -> bool {
        self.by_name.get(endpoint).is_some_and(|e| e.selects(tool))
    }

    /// Whether `endpoint` serves the resource `uri` of `server` (its prefixes are canonical,
    /// checked at load, and so is `uri`: `file:///public/../private/x` is under
    /// `file:///private/`).
    pub fn selects_resource(&self, endpoint: &str, uri: &CanonicalUri, server: &str) -> bool {
        self.selects_uri_text(endpoint, uri.as_str(), server)
    }

    /// Whether `endpoint` serves the resource template `text` of `server`.
    pub fn selects_template(&self, endpoint: &str, text: &str, server: &str) -> bool {
        self.selects_uri_text(endpoint, text, server)
    }

    fn selects_uri_text(&self, endpoint: &str, text: &str, server: &str) -> bool {
        self.by_name.get(endpoint).is_some_and(|e| {
            let s = &e.select;
            on_server(s, server)
                && (s.resources.is_empty() || s.resources.iter().any(|p| text.starts_with(p.as_str())))
                && !s.exclude_resources.iter().any(|p| text.starts_with(p.as_str()))
        })
    }

    /// Whether `endpoint` selects `server` at all (`select.servers`, empty: all): what the
    /// server offers as a whole, such as an extension, is carried there.
    pub fn selects_server(&self, endpoint: &str, server: &str) -> bool {
        self.by_name.get(endpoint).is_some_and(|e| on_server(&e.select, server))
    }

    /// Whether `endpoint` serves the prompt the catalogue calls `name`, of `server`.
    pub fn selects_prompt(&self, endpoint: &str, name: &str, server: &str) -> bool {
        self.by_name.get(endpoint).is_some_and(|e| {
            let s = &e.select;
            on_server(s, server)
                && !e.prompts.get(name).is_some_and(|c| c.hide)
                && (s.prompts.is_empty() || s.prompts.iter().any(|p| glob_matches(p, name)))
                && !s.exclude_prompts.iter().any(|p| glob_matches(p, name))
        })
    }

    /// The description `endpoint` shows for the prompt the catalogue calls `name`, if its own.
    pub fn prompt_description(&self, endpoint: &str, name: &str) -> Option<&str> {
        self.by_name.get(endpoint)?.prompts.get(name)?.description.as_deref()
    }

    /// The tools of `snapshot` that `endpoint` shows, narrowing `base` (the policy's view for
    /// the caller; `None` without a policy). Cached per (snapshot, base view).
    pub fn view(
        &self,
        endpoint: &str,
        snapshot: &Arc<Snapshot>,
        base: Option<Arc<ToolView>>,
    ) -> Arc<ToolView> {
        let Some(e) = self.by_name.get(endpoint) else { return Arc::new(empty_view()) };
        let key = base.as_ref().map_or(0, |b| Arc::as_ptr(b) as usize);
        if let Ok(views) = e.views.lock()
            && let Some(cached) = views.get(&key)
            && std::ptr::eq(cached.snapshot.as_ptr(), Arc::as_ptr(snapshot))
            && match (&cached.base, &base) {
                (None, None) => true,
                (Some(weak), Some(base)) => std::ptr::eq(weak.as_ptr(), Arc::as_ptr(base)),
                _ => false,
            }
        {
            return cached.view.clone();
        }
        let view = Arc::new(e.build(snapshot, base.as_deref()));
        if let Ok(mut views) = e.views.lock() {
            if views.len() >= MAX_VIEWS_PER_ENDPOINT {
                views.retain(|_, v| {
                    v.snapshot.strong_count() > 0 && v.base.as_ref().is_none_or(|b| b.strong_count() > 0)
                });
                if views.len() >= MAX_VIEWS_PER_ENDPOINT {
                    views.clear();
                }
            }
            let cached = CachedView {
                snapshot: Arc::downgrade(snapshot),
                base: base.as_ref().map(Arc::downgrade),
                view: view.clone(),
            };
            views.insert(key, cached);
        }
        view
    }
}

fn on_server(select: &Selection, server: &str) -> bool {
    select.servers.is_empty() || select.servers.iter().any(|s| s == server)
}

fn empty_view() -> ToolView {
    ToolView { visible: HashSet::new(), list: ToolList::default(), shown: HashMap::new() }
}

impl Endpoint {
    fn selects(&self, tool: &ToolRecord) -> bool {
        let s = &self.select;
        let name = tool.name.as_ref();
        let control = self.tools.get(name);
        if control.is_some_and(|c| c.hide) {
            return false;
        }
        // A catalogue name this endpoint gave to another tool is that tool's here.
        if control.is_none_or(|c| c.rename.is_none()) && self.to_catalogue.contains_key(name) {
            return false;
        }
        let hint = |key: &str, default: bool| {
            tool.definition
                .head()
                .get("annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let wants =
            |wanted: Option<bool>, key: &str, default: bool| wanted.is_none_or(|w| hint(key, default) == w);
        on_server(s, &tool.server)
            && (s.tools.is_empty() || s.tools.iter().any(|p| glob_matches(p, name)))
            && !s.exclude_tools.iter().any(|p| glob_matches(p, name))
            && wants(s.read_only, "readOnlyHint", false)
            && wants(s.destructive, "destructiveHint", true)
            && wants(s.idempotent, "idempotentHint", false)
            && wants(s.open_world, "openWorldHint", true)
    }

    fn build(&self, snapshot: &Arc<Snapshot>, base: Option<&ToolView>) -> ToolView {
        let tools: Vec<Arc<ToolRecord>> = snapshot
            .tools()
            .into_iter()
            .filter(|t| base.is_none_or(|b| b.shows(&t.name)) && self.selects(t))
            .collect();
        let mut shown = HashMap::new();
        for tool in &tools {
            let Some(control) = self.tools.get(tool.name.as_ref()) else { continue };
            if control.rename.is_none() && control.description.is_none() {
                continue;
            }
            let mut definition = tool.definition.value();
            if let Some(object) = definition.as_object_mut() {
                if let Some(rename) = &control.rename {
                    object.insert("name".into(), Value::String(rename.clone()));
                }
                if let Some(description) = &control.description {
                    object.insert("description".into(), Value::String(description.clone()));
                }
            }
            shown.insert(tool.name.clone(), definition);
        }
        let listing = snapshot.listing();
        // Ordered by the names this endpoint shows (a rename moves a tool), as pages need.
        let listed = tools
            .iter()
            .filter(|t| listing.lists(t))
            .map(|t| shown.get(&t.name).map_or(Listed::Text(&t.definition), Listed::Value));
        let list = ToolList::build(listing.meta(), listed);
        ToolView { visible: tools.iter().map(|t| t.name.clone()).collect(), list, shown }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn endpoints(select: Selection, tools: BTreeMap<String, EndpointToolControl>) -> Endpoints {
        let config = EndpointConfig { select, tools, ..EndpointConfig::default() };
        Endpoints::new(&BTreeMap::from([("shop".to_string(), config)]))
    }

    fn tool(name: &str, server: &str, read_only: bool) -> ToolRecord {
        let definition = json!({"name": name, "annotations": {"readOnlyHint": read_only}});
        ToolRecord::for_tests(name, server, definition, read_only)
    }

    #[test]
    fn selection_by_server_pattern_annotation_and_exclusion() {
        let select = Selection {
            servers: vec!["demo".into()],
            tools: vec!["get_*".into(), "search".into()],
            exclude_tools: vec!["get_secret".into()],
            read_only: Some(true),
            ..Selection::default()
        };
        let e = endpoints(select, BTreeMap::new());
        assert!(e.selects("shop", &tool("get_book", "demo", true)));
        assert!(e.selects("shop", &tool("search", "demo", true)));
        assert!(!e.selects("shop", &tool("get_book", "other", true)), "another server");
        assert!(!e.selects("shop", &tool("get_secret", "demo", true)), "excluded");
        assert!(!e.selects("shop", &tool("get_cart", "demo", false)), "not read-only");
        assert!(!e.selects("shop", &tool("checkout", "demo", true)), "no pattern matches");
        assert!(
            !e.selects("elsewhere", &tool("get_book", "demo", true)),
            "an unknown endpoint serves nothing"
        );
    }

    #[test]
    fn renames_resolve_statically_and_shadow_the_catalogue_name() {
        let control = |rename: Option<&str>, hide: bool| EndpointToolControl {
            rename: rename.map(str::to_string),
            hide,
            ..EndpointToolControl::default()
        };
        let tools = BTreeMap::from([
            ("search_catalog".to_string(), control(Some("find"), false)),
            ("checkout".to_string(), control(None, true)),
        ]);
        let e = endpoints(Selection::default(), tools);
        assert_eq!(e.catalogue_name("shop", "find"), Some("search_catalog"));
        assert_eq!(e.catalogue_name("shop", "search_catalog"), None, "renamed away");
        assert_eq!(e.catalogue_name("shop", "get_book"), Some("get_book"));
        assert!(e.selects("shop", &tool("search_catalog", "demo", true)));
        assert!(!e.selects("shop", &tool("find", "demo", true)), "shadowed by the rename");
        assert!(!e.selects("shop", &tool("checkout", "demo", false)), "hidden");
    }
}
