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
//! - **Routing** is the index's ([`index`]): a URI is taken in its one canonical form
//!   (`crate::resource_uri`: RFC 3986 normalisation, what cannot be normalised safely refused)
//!   before any decision, and the server is sent that form; a prompt name is the server's own
//!   unless two servers offer it (`server__name`); `completion/complete` goes to the server of
//!   the prompt or template its `ref` names.
//! - **The same control as tools.** With `[policy]`, Cedar decides on each resource, template
//!   and prompt (`Action::"read"`, `Action::"get"`; see `policy::engine`): what is denied is
//!   absent from the lists and refused `forbidden`. Reads, gets and completions go through the
//!   server's resilience stack (safe to repeat), are bounded by `defaults.max_result_bytes`
//!   (text cut and marked, a blob refused `response_too_large`), are checked for their shape
//!   before they reach the caller, and leave a metric sample, a log line (a URI's query values
//!   redacted, never contents) and an audit line. URIs are never metric labels.
//!
//! This file holds the federation's state and what a refresh learns; answering the methods
//! is `serve`, what a caller may see and get `access`, and the record of each request
//! `record`.

mod access;
mod answers;
pub mod index;
mod listed;
mod lists;
mod record;
mod registry_built;
pub mod report;
mod serve;
mod skills;
pub mod uri_template;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, RwLock},
    time::Instant,
};

pub(in crate::gateway) use answers::{canonical_param, canonical_uri, not_found};
pub use index::{Control, Index, ServerSurface, Unroutable};
pub use listed::Listed;
use lists::LISTS;
pub use lists::list_surface;

use super::{Gateway, Upstream, tool_list::ListFailure};
use crate::{
    identity::Caller,
    registry::{
        bounds::ListKind,
        pins::{Kind, PinStore},
    },
};

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
pub const METHODS: [&str; 8] = [
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "skills/list",
    "skills/get",
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
                self.catalog().refusals().clear(&name, ListKind::Skills);
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
}
