//! The rest of a server's surface through the one endpoint: `resources/list`,
//! `resources/templates/list`, `resources/read`, `prompts/list`, `prompts/get` and
//! `completion/complete`, federated across the configured discovering servers and the
//! registry-built ones.
//!
//! - **Lists** are read with each server's tools at every refresh (all pages, within the
//!   server's list bounds: `max_tools` items, definition and list bytes, pages), a list a
//!   server does not offer (`-32601`) being empty; a list that fails or goes over a bound
//!   keeps the server's last good one. Callers page through the gateway's own index with the
//!   gateway's own cursors ([`PAGE_SIZE`] items a page). What a server offers is learned as
//!   [`lists`] says (a Lambda function is asked `initialize` through the invoke path).
//! - **Whose lists**: the configured discovering servers, and the registry-built ones
//!   ([`registry_built`]: the servers registry entries name, read at each registry scan).
//! - **Prompts are pinned like tools** (`catalogue.pin_tool_definitions`): a prompt whose
//!   definition changed after it was pinned keeps its approved definition in the lists until
//!   an operator approves the change.
//! - **Routing** is the index's ([`index`]): a URI is never rewritten; a prompt name is the
//!   server's own unless two servers offer it (`server__name`); `completion/complete` goes to
//!   the server of the prompt or template its `ref` names.
//! - **The same control as tools.** With `[policy]`, Cedar decides on each resource, template
//!   and prompt (`Action::"read"`, `Action::"get"`; see `policy::engine`): what is denied is
//!   absent from the lists and refused `forbidden`. Reads, gets and completions go through the
//!   server's resilience stack (safe to repeat), are bounded by `defaults.max_result_bytes`
//!   (text cut and marked, a blob refused `response_too_large`), are checked for their shape
//!   before they reach the caller, and leave a metric sample, a log line (a URI's query values
//!   redacted, never contents) and an audit line. URIs are never metric labels.

mod answers;
pub mod index;
mod lists;
mod registry_built;
pub mod report;
pub mod uri_template;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, RwLock},
    time::Instant,
};

use serde_json::{Map, Value, json};
use tower::ServiceExt;

pub(in crate::gateway) use answers::not_found;
use answers::{bad_input, checked_completion, checked_contents, checked_messages, page_of};
pub use index::{Control, Index, ServerSurface, Unroutable};
use lists::LISTS;
pub use lists::list_surface;

use super::{Gateway, Upstream, refresh::ListFailure};
use crate::{
    audit::{AuditEntry, Decision},
    error::{Category, GatewayError},
    identity::Caller,
    policy::SurfaceItem,
    registry::{
        bounds::ListKind,
        pins::{Kind, PinStore},
    },
    upstream::{UpstreamReply, UpstreamRequest},
};

/// A policy's denial: the caller's error and the decision the audit line records.
pub(super) struct Denied {
    error: GatewayError,
    decision: Decision,
}

/// Items in one page of a caller's list.
pub const PAGE_SIZE: usize = 100;

/// One server's surface as its lists said, and as it is served (its prompts through
/// definition pinning, when that is on).
#[derive(Debug, Clone, Default)]
struct Learned {
    listed: ServerSurface,
    served: ServerSurface,
}

/// Every federated server's surface, and the index built from them.
pub struct Federation {
    /// What configuration decides (a reload replaces it and rebuilds the index).
    shape: RwLock<Arc<Shape>>,
    surfaces: Mutex<BTreeMap<Arc<str>, Learned>>,
    index: RwLock<Arc<Index>>,
}

/// What configuration decides of the federation.
struct Shape {
    /// `servers.NAME.resource_prefixes`, per server.
    prefixes: Vec<(Arc<str>, Vec<String>)>,
    /// `[prompts.*]` and `[resources]`.
    control: Control,
}

impl Shape {
    fn of(config: &crate::config::Config) -> Self {
        let prefixes = config
            .servers
            .iter()
            .filter(|(_, server)| !server.resource_prefixes.is_empty())
            .map(|(name, server)| (Arc::from(name.as_str()), server.resource_prefixes.clone()))
            .collect();
        let control = Control { prompts: config.prompts.clone(), resources: config.resources.clone() };
        Self { prefixes, control }
    }
}

impl Federation {
    /// The federation of the configured servers: their prefixes route from the start.
    pub fn new(config: &crate::config::Config) -> Self {
        let shape = Shape::of(config);
        let index = RwLock::new(Arc::new(Index::build(&[], &shape.prefixes, &shape.control)));
        Self { shape: RwLock::new(Arc::new(shape)), surfaces: Mutex::default(), index }
    }

    /// Follows a configuration reload: the prefixes and the control of `config`, the surfaces
    /// of the servers it no longer configures (`configured` says which are) forgotten, and the
    /// index rebuilt.
    pub fn reconfigure(&self, config: &crate::config::Config, configured_before: &[String]) {
        if let Ok(mut shape) = self.shape.write() {
            *shape = Arc::new(Shape::of(config));
        }
        let Ok(mut surfaces) = self.surfaces.lock() else { return };
        surfaces.retain(|server, _| {
            config.servers.contains_key(server.as_ref()) || !configured_before.iter().any(|s| **s == **server)
        });
        self.rebuild(&surfaces);
    }

    /// The index in force.
    pub fn index(&self) -> Arc<Index> {
        self.index.read().map(|index| index.clone()).unwrap_or_default()
    }

    /// Keeps `server`'s surface, its prompts as `pins` serve them; when what is served
    /// changed, rebuilds the index (and says so).
    pub fn update(&self, server: &Arc<str>, listed: ServerSurface, pins: Option<&PinStore>) -> bool {
        let Ok(mut surfaces) = self.surfaces.lock() else { return false };
        let served = served(server, &listed, pins);
        let changed = surfaces.get(server).is_none_or(|known| known.served != served);
        surfaces.insert(server.clone(), Learned { listed, served });
        if changed {
            self.rebuild(&surfaces);
        }
        changed
    }

    /// Serves every server's prompts again as `pins` now say (after an approval).
    pub fn repin(&self, pins: &PinStore) -> bool {
        let Ok(mut surfaces) = self.surfaces.lock() else { return false };
        let mut changed = false;
        for (server, learned) in surfaces.iter_mut() {
            let served = served(server, &learned.listed, Some(pins));
            if served != learned.served {
                learned.served = served;
                changed = true;
            }
        }
        if changed {
            self.rebuild(&surfaces);
        }
        changed
    }

    /// Forgets the servers `gone` says are gone (a registry-built server no live entry names).
    pub fn forget(&self, gone: impl Fn(&str) -> bool) -> bool {
        let Ok(mut surfaces) = self.surfaces.lock() else { return false };
        let before = surfaces.len();
        surfaces.retain(|server, _| !gone(server));
        let changed = surfaces.len() != before;
        if changed {
            self.rebuild(&surfaces);
        }
        changed
    }

    /// The servers whose surface is known.
    pub fn servers(&self) -> Vec<Arc<str>> {
        self.surfaces.lock().map(|s| s.keys().cloned().collect()).unwrap_or_default()
    }

    fn rebuild(&self, surfaces: &BTreeMap<Arc<str>, Learned>) {
        let all: Vec<(Arc<str>, ServerSurface)> =
            surfaces.iter().map(|(s, v)| (s.clone(), v.served.clone())).collect();
        let shape = self.shape.read().map(|s| s.clone()).unwrap_or_else(|p| p.into_inner().clone());
        let built = Index::build(&all, &shape.prefixes, &shape.control);
        for collision in &built.collisions {
            tracing::warn!(kind = collision.kind, name = %crate::redact::text(&collision.name), servers = ?collision.servers, "claimed by more than one server: served by none (a prefix in the configuration names the owner)");
        }
        if let Ok(mut index) = self.index.write() {
            *index = Arc::new(built);
        }
    }
}

/// `listed` as it is served: its prompts through `pins` (a changed definition waits for
/// approval, the approved one served meanwhile, exactly as for tools).
fn served(server: &str, listed: &ServerSurface, pins: Option<&PinStore>) -> ServerSurface {
    let mut served = listed.clone();
    if let Some(pins) = pins {
        served.prompts = pins.resolve_prompts(server, &listed.prompts);
    }
    served
}

/// Who asks, for a federated method: the caller, the request id of the log line and the
/// caller's deadline.
pub struct SurfaceCall {
    pub caller: Arc<Caller>,
    pub request_id: Arc<str>,
    pub deadline: Option<Instant>,
    /// The caller speaks the 2026-07-28 revision (its results carry `resultType`, and lists
    /// their cache hints).
    pub modern: bool,
}

/// The methods this module answers.
pub const METHODS: [&str; 6] = [
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

impl Gateway {
    /// The federation of resources, templates and prompts.
    pub fn federation(&self) -> &Federation {
        &self.federation
    }

    /// Keeps what a refresh read of `upstream`'s surface; a list that failed or went over a
    /// bound keeps the server's last good surface (logged; a bound also counted and shown in
    /// `GET /admin/registry`, as for tools).
    pub(super) fn learn_surface(
        &self,
        upstream: &Upstream,
        read: Result<ServerSurface, (ListKind, ListFailure)>,
    ) {
        let name = upstream.name.to_string();
        match read {
            Ok(surface) => {
                for (_, _, kind) in LISTS {
                    self.catalog().refusals().clear(&name, kind);
                }
                let pins = self.pins.as_deref();
                if self.federation.update(&upstream.name, surface, pins) {
                    // Callers' streams compare what they see now with what they were told.
                    self.list_changes().bump();
                }
                self.count_prompt_pins();
            }
            Err((kind, ListFailure::Refused(exceeded))) => {
                tracing::warn!(server = %name, list = kind.as_str(), bound = exceeded.bound.as_str(), limit = exceeded.limit, seen = exceeded.seen, "{} refused: {exceeded}; keeping the server's last good one", kind.as_str());
                self.metrics
                    .catalogue_refusals
                    .with_label_values(&[&name, kind.as_str(), exceeded.bound.as_str()])
                    .inc();
                self.catalog().refusals().record(&name, kind, &exceeded);
            }
            Err((kind, ListFailure::Upstream(error))) => {
                tracing::warn!(server = %name, list = kind.as_str(), error = %crate::redact::shown(&error), "reading the list failed; keeping the server's last good one");
            }
        }
    }

    /// Serves the federated prompts again after an approval of pinned definitions.
    pub(super) fn repin_prompts(&self) {
        let Some(pins) = self.pins.as_deref() else { return };
        if self.federation.repin(pins) {
            self.list_changes().bump();
        }
        self.count_prompt_pins();
    }

    fn count_prompt_pins(&self) {
        if let Some(pins) = self.pins.as_deref() {
            self.metrics.prompt_definitions_pending.set(pins.pending_count(Kind::Prompt) as i64);
            self.metrics.prompt_definitions_pinned.set(pins.pinned_count(Kind::Prompt) as i64);
        }
    }

    /// Answers one of [`METHODS`], in the caller's protocol revision.
    pub async fn surface_method(
        &self,
        method: &str,
        params: Option<Value>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let mut result = self.surface_answer(method, params, call).await?;
        let Some(object) = result.as_object_mut() else { return Ok(result) };
        // The server's own revision fields and identity are not the gateway's answer.
        for key in ["resultType", "ttlMs", "cacheScope"] {
            object.remove(key);
        }
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.remove("io.modelcontextprotocol/serverInfo");
            if meta.is_empty() {
                object.remove("_meta");
            }
        }
        if call.modern {
            object.insert("resultType".into(), json!("complete"));
            if method.ends_with("/list") {
                // Fresh until the next refresh; a list filtered by the policy is this caller's.
                let scope = if self.settings().policy.is_some() { "private" } else { "public" };
                object.insert("ttlMs".into(), json!(self.refresh_interval().as_millis() as u64));
                object.insert("cacheScope".into(), json!(scope));
            } else if method == "resources/read" {
                // A read is a cacheable result too (2026-07-28 `ReadResourceResult extends
                // CacheableResult`: both fields required). Its freshness is the server's to
                // know, not the gateway's: not to be reused, and only by this caller.
                object.insert("ttlMs".into(), json!(0));
                object.insert("cacheScope".into(), json!("private"));
            }
        }
        Ok(result)
    }

    async fn surface_answer(
        &self,
        method: &str,
        params: Option<Value>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let params = match params {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(bad_input("params must be an object")),
        };
        let index = self.federation.index();
        match method {
            "resources/list" => {
                let visible = index.resources.iter().filter(|r| self.may_read(&call.caller, r, false));
                page_of(visible.map(|r| &r.definition), &params, "resources")
            }
            "resources/templates/list" => {
                let visible =
                    index.templates.iter().map(|(r, _)| r).filter(|r| self.may_read(&call.caller, r, true));
                page_of(visible.map(|r| &r.definition), &params, "resourceTemplates")
            }
            "prompts/list" => {
                let visible: Vec<std::borrow::Cow<'_, Value>> = index
                    .prompts
                    .iter()
                    .filter(|p| self.may_get(&call.caller, p).is_ok())
                    .map(|p| self.prompt_as_shown(&call.caller, p))
                    .collect();
                page_of(visible.iter().map(|p| p.as_ref()), &params, "prompts")
            }
            "resources/read" => self.read_resource(&index, params, call).await,
            "prompts/get" => self.get_prompt(&index, params, call).await,
            _ => self.complete(&index, params, call).await,
        }
    }

    async fn read_resource(
        &self,
        index: &Index,
        params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let started = Instant::now();
        let Some(uri) = params.get("uri").and_then(Value::as_str).map(str::to_string) else {
            return Err(bad_input("params.uri must be a string"));
        };
        let shown = crate::redact::url(&uri);
        let server = match index.route_uri(&uri) {
            Ok(server) => server,
            Err(why) => {
                let err = not_found(&uri, why);
                self.record_surface(
                    call,
                    started,
                    "resources/read",
                    &shown,
                    None,
                    err.category.as_str(),
                    None,
                );
                return Err(err);
            }
        };
        let listed = index.resource(&uri);
        let item = SurfaceItem::Resource {
            uri: &uri,
            server: &server,
            mime_type: listed.and_then(|r| r.mime_type.as_deref()),
            template: false,
        };
        if let Err(denied) = self.decide_item(&call.caller, item) {
            return Err(self.refused(call, started, "resources/read", &shown, &server, *denied));
        }
        let result = self
            .forward_surface(&server, "resources/read", params, Some(uri.as_str().into()), call)
            .await
            .and_then(|result| checked_contents(result, self.settings().config.defaults.max_result_bytes));
        self.answered(call, started, "resources/read", &shown, &server, result)
    }

    async fn get_prompt(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let started = Instant::now();
        let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_string) else {
            return Err(bad_input("params.name must be a string"));
        };
        let Some(prompt) = index.prompt(&name) else {
            let shown: String = name.chars().take(64).collect();
            let err = bad_input(&format!("no server offers a prompt named {shown:?}"));
            self.record_surface(call, started, "prompts/get", &shown, None, err.category.as_str(), None);
            return Err(err);
        };
        if let Err(denied) = self.may_get(&call.caller, prompt) {
            return Err(self.refused(call, started, "prompts/get", &prompt.name, &prompt.server, *denied));
        }
        params.insert("name".into(), json!(prompt.upstream_name.as_ref()));
        let result = self
            .forward_surface(&prompt.server, "prompts/get", params, Some(prompt.upstream_name.clone()), call)
            .await
            .and_then(|result| checked_messages(result, self.settings().config.defaults.max_result_bytes));
        self.answered(call, started, "prompts/get", &prompt.name, &prompt.server, result)
    }

    async fn complete(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let started = Instant::now();
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let (server, shown, name_header) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                let Some(prompt) = index.prompt(name) else {
                    return Err(bad_input("params.ref names no prompt a server offers"));
                };
                if let Err(denied) = self.may_get(&call.caller, prompt) {
                    return Err(self.refused(
                        call,
                        started,
                        "completion/complete",
                        &prompt.name,
                        &prompt.server,
                        *denied,
                    ));
                }
                params.insert(
                    "ref".into(),
                    json!({"type": "ref/prompt", "name": prompt.upstream_name.as_ref()}),
                );
                (prompt.server.clone(), prompt.name.to_string(), Some(prompt.upstream_name.clone()))
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
                let Some(template) = index.route_template(uri) else {
                    return Err(bad_input("params.ref names no resource template a server offers"));
                };
                let item = SurfaceItem::Resource {
                    uri: &template.uri,
                    server: &template.server,
                    mime_type: template.mime_type.as_deref(),
                    template: true,
                };
                if let Err(denied) = self.decide_item(&call.caller, item) {
                    return Err(self.refused(
                        call,
                        started,
                        "completion/complete",
                        &template.uri,
                        &template.server,
                        *denied,
                    ));
                }
                (template.server.clone(), template.uri.to_string(), None)
            }
            _ => return Err(bad_input("params.ref.type must be ref/prompt or ref/resource")),
        };
        // A server that declared no completions is not asked: its completion is empty.
        if !index.completing.contains(&server) {
            self.record_surface(call, started, "completion/complete", &shown, Some(&server), "success", None);
            return Ok(json!({"completion": {"values": [], "hasMore": false}}));
        }
        let result = self
            .forward_surface(&server, "completion/complete", params, name_header, call)
            .await
            .and_then(checked_completion);
        self.answered(call, started, "completion/complete", &shown, &server, result)
    }

    /// Records a forwarded request's outcome and returns its answer (an error names the server).
    pub(super) fn answered(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: &Arc<str>,
        result: Result<Value, GatewayError>,
    ) -> Result<Value, GatewayError> {
        let outcome = result.as_ref().map_or_else(|e| e.category.as_str(), |_| "success");
        self.record_surface(call, started, method, item, Some(server), outcome, None);
        result.map_err(|e| e.with_server(server.clone()))
    }

    /// Records a request the policy refused, with its decision, and returns its error.
    pub(super) fn refused(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: &str,
        denied: Denied,
    ) -> GatewayError {
        let Denied { error, decision } = denied;
        self.record_surface(
            call,
            started,
            method,
            item,
            Some(server),
            error.category.as_str(),
            Some(decision),
        );
        error
    }

    /// The policy's decision on a resource or prompt; a denial with its decision.
    pub(super) fn decide_item(&self, caller: &Caller, item: SurfaceItem<'_>) -> Result<(), Box<Denied>> {
        // Outside the caller's endpoint: unknown there, as for what no server offers.
        if !self.endpoint_selects(caller, item) {
            let error = match item {
                SurfaceItem::Resource { uri, template: false, .. } => {
                    not_found(uri, index::Unroutable::Unknown)
                }
                SurfaceItem::Resource { .. } => {
                    bad_input("params.ref names no resource template a server offers")
                }
                SurfaceItem::Prompt { name, .. } => {
                    let shown: String = name.chars().take(64).collect();
                    bad_input(&format!("no server offers a prompt named {shown:?}"))
                }
            };
            return Err(Box::new(Denied { error, decision: Decision::no_policy() }));
        }
        let settings = self.settings();
        let Some(policy) = &settings.policy else { return Ok(()) };
        let verdict = policy.decide_item(caller, item);
        let server = match item {
            SurfaceItem::Resource { server, .. } | SurfaceItem::Prompt { server, .. } => server,
        };
        let outcome = if verdict.allowed { "allow" } else { "deny" };
        self.metrics.policy_decisions.with_label_values(&[&verdict.rule, server, outcome]).inc();
        if verdict.allowed {
            return Ok(());
        }
        let what = match item {
            SurfaceItem::Resource { .. } => "read this resource",
            SurfaceItem::Prompt { .. } => "get this prompt",
        };
        let err = GatewayError::new(
            Category::Forbidden,
            format!("the policy does not allow this caller to {what}"),
        )
        .with_server(server)
        .with_extra("rule", json!(verdict.rule.as_ref()));
        Err(Box::new(Denied { error: err, decision: Decision { allowed: false, rule: verdict.rule } }))
    }

    /// Fingerprints of the resources (and templates) and of the prompts `caller` sees now:
    /// equal fingerprints, equal lists (`server/listen.rs` tells a stream when one moves).
    pub fn surface_fingerprints(&self, caller: &Caller) -> (u64, u64) {
        use std::hash::{BuildHasher, Hash, Hasher};
        let index = self.federation.index();
        let state = foldhash::quality::FixedState::with_seed(0x7375_7266);
        let mut resources = state.build_hasher();
        for r in index.resources.iter().filter(|r| self.may_read(caller, r, false)) {
            (r.uri.as_ref(), r.server.as_ref(), r.definition.to_string()).hash(&mut resources);
        }
        for (t, _) in index.templates.iter().filter(|(t, _)| self.may_read(caller, t, true)) {
            (t.uri.as_ref(), t.server.as_ref(), t.definition.to_string()).hash(&mut resources);
        }
        let mut prompts = state.build_hasher();
        for p in index.prompts.iter().filter(|p| self.may_get(caller, p).is_ok()) {
            (p.name.as_ref(), self.prompt_as_shown(caller, p).to_string()).hash(&mut prompts);
        }
        (resources.finish(), prompts.finish())
    }

    fn may_read(&self, caller: &Caller, resource: &index::Resource, template: bool) -> bool {
        let item = SurfaceItem::Resource {
            uri: &resource.uri,
            server: &resource.server,
            mime_type: resource.mime_type.as_deref(),
            template,
        };
        self.endpoint_selects(caller, item)
            && self.settings().policy.as_ref().is_none_or(|policy| policy.decide_item(caller, item).allowed)
    }

    /// Whether the caller's endpoint (if any) serves the resource or prompt.
    fn endpoint_selects(&self, caller: &Caller, item: SurfaceItem<'_>) -> bool {
        let Some(endpoint) = caller.endpoint.as_deref() else { return true };
        match item {
            SurfaceItem::Resource { uri, server, .. } => {
                self.settings().endpoints.selects_resource(endpoint, uri, server)
            }
            SurfaceItem::Prompt { name, server, .. } => {
                self.settings().endpoints.selects_prompt(endpoint, name, server)
            }
        }
    }

    /// A prompt's definition as the caller's endpoint shows it (its own description, if any).
    fn prompt_as_shown<'a>(&self, caller: &Caller, prompt: &'a index::Prompt) -> std::borrow::Cow<'a, Value> {
        let settings = self.settings();
        let description =
            caller.endpoint.as_deref().and_then(|e| settings.endpoints.prompt_description(e, &prompt.name));
        match (description, prompt.definition.as_object()) {
            (Some(description), Some(object)) => {
                let mut object = object.clone();
                object.insert("description".into(), Value::String(description.to_string()));
                std::borrow::Cow::Owned(Value::Object(object))
            }
            _ => std::borrow::Cow::Borrowed(&prompt.definition),
        }
    }

    fn may_get(&self, caller: &Caller, prompt: &index::Prompt) -> Result<(), Box<Denied>> {
        let item = SurfaceItem::Prompt {
            name: &prompt.name,
            upstream_name: &prompt.upstream_name,
            server: &prompt.server,
        };
        self.decide_item(caller, item)
    }

    /// Sends one request to `server` through its stack and parses the result.
    async fn forward_surface(
        &self,
        server: &str,
        method: &'static str,
        params: Map<String, Value>,
        name: Option<Arc<str>>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let Some(upstream) = self.surface_upstream(server) else {
            return Err(GatewayError::new(Category::Internal, "the server of this item is not configured"));
        };
        let mut request = UpstreamRequest::new(method, params);
        request.tool = name;
        request.deadline = call.deadline;
        request.caller = Some(call.caller.clone());
        match upstream.service.clone().oneshot(request).await {
            Ok(UpstreamReply::Result(raw)) => serde_json::from_str(raw.get()).map_err(|e| {
                GatewayError::new(
                    Category::UpstreamProtocol,
                    format!("the server's {method} result is not JSON: {e}"),
                )
            }),
            Ok(UpstreamReply::Error(error)) => Err(GatewayError::from_upstream_reply(error, false)),
            Err(error) => Err(GatewayError::from_upstream(&error)),
        }
    }

    /// One metric sample, one log line and (with the audit trail on) one audit line.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_surface(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: Option<&str>,
        outcome: &str,
        denied: Option<Decision>,
    ) {
        let elapsed = started.elapsed();
        let server_label = server.unwrap_or("");
        self.metrics.surface_requests.with_label_values(&[method, server_label, outcome]).inc();
        self.metrics
            .surface_request_duration
            .with_label_values(&[method, server_label])
            .observe(elapsed.as_secs_f64());
        let latency_us = elapsed.as_micros() as u64;
        tracing::info!(target: "mcp_gateway::call", request_id = &*call.request_id, method, item, server = server_label, outcome, latency_us, "{method}");
        if let Some(audit) = &self.audit {
            let entry = AuditEntry {
                at: std::time::SystemTime::now(),
                request_id: call.request_id.clone(),
                trace_id: crate::telemetry::otel::log_trace_id(),
                subject: call.caller.subject.clone(),
                method: Some(method),
                tool: Some(item.into()),
                requested_tool: None,
                server: server.map(Arc::from),
                endpoint: call.caller.endpoint.clone(),
                decision: denied.unwrap_or_else(Decision::no_policy),
                outcome: if outcome == "success" {
                    "success"
                } else {
                    Category::ALL.iter().find(|c| c.as_str() == outcome).map_or("error", |c| c.as_str())
                },
                args_sha256: None,
                latency_us,
                guardrails: Vec::new(),
            };
            let audit = audit.clone();
            crate::telemetry::after_answer::defer(move || {
                audit.write(&entry);
            });
        }
    }
}
