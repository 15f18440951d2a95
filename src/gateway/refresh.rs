//! Learning the tools: each server's `tools/list` (all pages) and the DynamoDB registry's
//! active tools (all pages), at start and on a jittered interval, merged with the tools
//! configuration declares, then swapped into the catalogue.
//!
//! A server whose refresh fails keeps its last known good tools (or its static ones), is
//! reported by `/readyz`, and is retried with a short backoff instead of waiting a whole
//! interval; a failed registry scan never replaces a good catalogue. A Redis invalidation
//! reloads one tool at once. A list over one of the server's bounds
//! ([`crate::registry::bounds`], or `catalogue.max_total_tools` for every list joined) is
//! refused whole and the server keeps its last good tools too, without being reported failing.
//!
//! Each server has its own due time. A `ttlMs` freshness hint in a server's `tools/list`
//! shortens that server's wait only, and never below `catalogue.min_refresh_interval_ms`
//! (default 30 s): an upstream answering `ttlMs: 1` once drove a full refresh of every server
//! plus a DynamoDB Scan about every second. The registry scan and the other servers keep
//! `refresh_interval_secs`; a listing identical to the previous one rebuilds nothing.
//!
//! A call for an unknown tool may wake the loop early, but a full refresh (DynamoDB Scan and
//! `tools/list` to every server) is expensive and a model can invent names at any rate: at
//! most one woken refresh per [`MISS_REFRESH_INTERVAL`] (60 s) per sidecar, none within 5 s
//! of any refresh; other wakes are dropped and counted
//! (`mcp_gateway_registry_miss_wakes_total{result="skipped"}`). Unknown names themselves
//! are answered from the registry's negative cache.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::future::join_all;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{
    Gateway, Upstream, federation,
    tool_list::{ListFailure, list_tools},
};
use crate::shared_json::SharedJson;
use crate::{
    clock,
    protocol::mcp::Era,
    registry::{
        bounds::{self, ListKind},
        catalog::{Changes, ServerTools},
        entry::{RegistryEntry, ServerRef},
        pins::PinStore,
    },
    supervise::{self, Loop},
};

/// Fastest retry of a failing server.
const MIN_RETRY: Duration = Duration::from_secs(2);
/// At most one refresh woken by unknown-tool calls per this period; wakes in between are
/// dropped (the periodic refresh and point lookups still find new tools).
pub const MISS_REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// No refresh woken by an unknown tool this soon after any refresh (it would learn nothing).
const MIN_WAKE_INTERVAL: Duration = Duration::from_secs(5);
/// A server's `list_changed` refreshes it this long after it arrives at the soonest, so a
/// burst of notifications (one per tool registered) is read as one list.
pub const LIST_CHANGED_DEBOUNCE: Duration = Duration::from_millis(250);

/// Keeps the last known good tool list of every server between refreshes.
pub struct Refresher {
    gateway: Arc<Gateway>,
    /// Each server's last list, each definition as its JSON text ([`ServerTools::tools`]).
    known: BTreeMap<String, Arc<Vec<SharedJson>>>,
    failures: HashMap<String, u32>,
    ttl_hints: HashMap<String, Duration>,
    /// When each discovering server's `tools/list` is read next.
    server_due: HashMap<String, tokio::time::Instant>,
    /// When the DynamoDB registry is scanned next.
    registry_due: tokio::time::Instant,
    loaded: bool,
    /// Servers whose refresh a `list_changed` scheduled and that has not run yet.
    list_scheduled: std::collections::HashSet<String>,
    /// When each server's last `list_changed` refresh was due (the rate limit's clock).
    list_last: HashMap<String, tokio::time::Instant>,
    /// The reading of the registry-built servers' lists started at the last scan
    /// ([`federation`]): one at a time, never holding up the refresh loop.
    registry_surfaces: Option<tokio::task::JoinHandle<()>>,
}

impl Refresher {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        let known = gateway
            .settings()
            .upstreams
            .iter()
            .map(|(name, u)| (name.clone(), Arc::new(ServerTools::texts(&u.config.tools))))
            .collect();
        Self {
            gateway,
            known,
            failures: HashMap::new(),
            ttl_hints: HashMap::new(),
            server_due: HashMap::new(),
            registry_due: tokio::time::Instant::now(),
            loaded: false,
            list_scheduled: Default::default(),
            list_last: HashMap::new(),
            registry_surfaces: None,
        }
    }

    /// Refreshes every discovering server and the registry concurrently, then rebuilds.
    pub async fn refresh_all(&mut self) {
        let discovering: Vec<String> = self
            .gateway
            .settings()
            .upstreams
            .values()
            .filter(|u| u.config.discover)
            .map(|u| u.name.to_string())
            .collect();
        self.refresh(&discovering, true).await;
    }

    /// Refreshes the named servers (and the registry when `scan`) concurrently, then rebuilds
    /// if anything changed. Each refreshed server gets its next due time.
    async fn refresh(&mut self, names: &[String], scan: bool) {
        let started = Instant::now();
        let gateway = self.gateway.clone();
        let settings = gateway.settings();
        let selected: Vec<&Arc<Upstream>> = names.iter().filter_map(|n| settings.upstreams.get(n)).collect();
        let defaults = &settings.config.defaults;
        let servers = join_all(selected.iter().map(|u| async move {
            let bounds = u.config.tool_list_bounds(defaults);
            // Tools first: the first request learns the server's era and what it declares.
            let tools = list_tools(u, bounds).await;
            let surface = federation::list_surface(u, bounds).await;
            (*u, tools, surface)
        }));
        let scanning = async { if scan { self.scan_registry().await } else { None } };
        let (results, registry) = tokio::join!(servers, scanning);
        let mut changed = !self.loaded;
        for (upstream, result, surface) in results {
            let name = upstream.name.to_string();
            gateway.learn_surface(upstream, surface);
            // Every server's lists joined stay within `catalogue.max_total_tools`.
            let result = result.and_then(|listing| {
                let others: usize =
                    self.known.iter().filter(|(known, _)| **known != name).map(|(_, t)| t.len()).sum();
                let max_total = settings.config.catalogue.max_total_tools;
                bounds::check_total(others.saturating_add(listing.tools.len()), max_total)
                    .map_err(ListFailure::Refused)?;
                Ok(listing)
            });
            match result {
                Ok(listing) => {
                    gateway.catalog().refusals().clear(&name, ListKind::Tools);
                    // Static descriptions win over discovered ones of the same name.
                    let statics = &upstream.config.tools;
                    let mut tools = listing.tools;
                    if !statics.is_empty() {
                        tools.retain(|t| {
                            let name = ServerTools::name_of(t);
                            !statics.iter().any(|s| s.get("name").and_then(Value::as_str) == name.as_deref())
                        });
                        tools.extend(ServerTools::texts(statics));
                    }
                    if self.known.get(&name).is_none_or(|known| **known != tools) {
                        changed = true;
                        // The list it replaces is released on the blocking pool: freeing thousands
                        // of definitions is milliseconds the runtime's thread need not spend.
                        if let Some(replaced) = self.known.insert(name.clone(), Arc::new(tools)) {
                            tokio::task::spawn_blocking(move || drop(replaced));
                        }
                    }
                    self.failures.remove(&name);
                    match listing.ttl {
                        Some(ttl) => self.ttl_hints.insert(name.clone(), ttl),
                        None => self.ttl_hints.remove(&name),
                    };
                    gateway.readiness.set_server_result(&name, None);
                    gateway.metrics.registry_refreshes.with_label_values(&[&name, "success"]).inc();
                }
                Err(ListFailure::Refused(exceeded)) => {
                    // The server answered: not a failure of it (no backoff, still ready); its
                    // last good list stays in the catalogue.
                    let bound = exceeded.bound;
                    tracing::warn!(
                        server = %name,
                        bound = bound.as_str(),
                        setting = bound.tools_setting(),
                        limit = exceeded.limit,
                        seen = exceeded.seen,
                        "tools/list refused: {exceeded}; keeping the server's last good tools"
                    );
                    gateway
                        .metrics
                        .catalogue_refusals
                        .with_label_values(&[&name, ListKind::Tools.as_str(), bound.as_str()])
                        .inc();
                    gateway.catalog().refusals().record(&name, ListKind::Tools, &exceeded);
                }
                Err(ListFailure::Upstream(e)) => {
                    *self.failures.entry(name.clone()).or_default() += 1;
                    tracing::warn!(server = %name, error = %crate::redact::shown(&e), "tools/list failed; keeping the last known tools");
                    gateway.readiness.set_server_result(&name, Some(&e));
                    gateway.metrics.registry_refreshes.with_label_values(&[&name, "failure"]).inc();
                }
            }
            if let Some(http) = &upstream.http {
                for (era, label) in [(Era::Modern, "2026-07-28"), (Era::Legacy, "session")] {
                    let value = i64::from(http.era() == Some(era));
                    gateway.metrics.upstream_era.with_label_values(&[&name, label]).set(value);
                }
            }
            let due = clock::after_tokio(self.server_wait(&name));
            self.list_scheduled.remove(&name);
            self.server_due.insert(name, due);
        }
        if scan {
            self.registry_due = clock::after_tokio(jittered(gateway.refresh_interval()));
        }
        if let Some(entries) = registry
            && let Ok(mut current) = gateway.registry_entries.write()
        {
            changed = true;
            *current = entries;
        }
        let source = if scan { "all" } else { "server" };
        gateway
            .metrics
            .registry_refresh_duration
            .with_label_values(&[source])
            .observe(started.elapsed().as_secs_f64());
        if changed {
            self.rebuild(started).await;
        } else {
            // A list refused after it was read leaves `$defs` entries no text holds (a rebuild
            // releases them too).
            crate::shared_json::release_unshared();
        }
        if scan {
            self.federate_registry_servers();
        }
    }

    /// Starts reading the lists of the servers the registry's entries name, unless the last
    /// scan's reading is still going (then this scan's is skipped).
    fn federate_registry_servers(&mut self) {
        if self.registry_surfaces.as_ref().is_some_and(|reading| !reading.is_finished()) {
            return;
        }
        let gateway = self.gateway.clone();
        let mut origins: Vec<Arc<ServerRef>> =
            gateway.catalog().snapshot().tools().iter().filter_map(|t| t.origin.clone()).collect();
        if let Some(dynamic) = &gateway.registry.dynamic {
            origins.extend(dynamic.fresh_origins());
        }
        if origins.is_empty()
            && gateway.federation().servers().iter().all(|s| gateway.configured_upstream(s).is_some())
        {
            return;
        }
        self.registry_surfaces =
            Some(tokio::spawn(async move { gateway.federate_registry_servers(origins).await }));
    }

    /// The registry's active tools, or `None` when the scan failed (keep what we have).
    async fn scan_registry(&self) -> Option<Vec<RegistryEntry>> {
        let dynamic = self.gateway.registry.dynamic.as_ref()?;
        dynamic.dynamo.as_ref()?;
        let started = Instant::now();
        let metrics = &self.gateway.metrics;
        match dynamic.scan().await {
            Ok(entries) => {
                metrics
                    .registry_refresh_duration
                    .with_label_values(&["dynamodb"])
                    .observe(started.elapsed().as_secs_f64());
                metrics.registry_refreshes.with_label_values(&["dynamodb", "success"]).inc();
                Some(entries)
            }
            Err(e) => {
                metrics.registry_refreshes.with_label_values(&["dynamodb", "failure"]).inc();
                tracing::warn!(error = %crate::redact::shown(&e), "registry scan failed; keeping the last known registry tools");
                None
            }
        }
    }

    async fn rebuild(&mut self, started: Instant) {
        let gateway = &self.gateway;
        let settings = gateway.settings();
        let mut servers: Vec<ServerTools> = self
            .known
            .iter()
            .filter_map(|(name, tools)| {
                let upstream = settings.upstreams.get(name)?;
                Some(ServerTools {
                    server: name.clone(),
                    transport: upstream.transport,
                    tools: tools.clone(),
                })
            })
            .collect();
        if let Some(pins) = gateway.pins.clone() {
            servers = pinned(gateway, pins, servers).await;
        }
        let server_count = servers.len();
        let registry_count = gateway.registry_entries.read().map(|e| e.len()).unwrap_or_default();
        let (after, Changes { added, removed, changed }) =
            gateway.rebuild_catalogue(servers, self.loaded).await;
        self.loaded = true;
        tracing::info!(
            tools = after.len(),
            servers = server_count,
            registry_tools = registry_count,
            added,
            removed,
            changed,
            failing = self.failures.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "registry refreshed"
        );
    }

    /// Follows a configuration reload: a removed server's tools, due times and failures are
    /// forgotten (its tools leave at the rebuild); a new or rebuilt server starts from its
    /// configured tools (a discovering one adds its listing at the refresh that follows).
    fn follow_reload(&mut self) {
        let settings = self.gateway.settings();
        let gone: Vec<String> =
            self.known.keys().filter(|name| !settings.upstreams.contains_key(*name)).cloned().collect();
        for name in &gone {
            self.known.remove(name);
            self.failures.remove(name);
            self.ttl_hints.remove(name);
            self.server_due.remove(name);
            self.list_scheduled.remove(name);
            self.list_last.remove(name);
            self.gateway.readiness.set_server_result(name, None);
        }
        for (name, upstream) in &settings.upstreams {
            let statics = Arc::new(ServerTools::texts(&upstream.config.tools));
            if !upstream.config.discover || !self.known.contains_key(name) {
                self.known.insert(name.clone(), statics);
            }
        }
    }

    /// Reloads one tool named by an invalidation and rebuilds.
    async fn reload(&mut self, name: &str) {
        let Some(dynamic) = self.gateway.registry.dynamic.clone() else { return };
        match dynamic.reload(name).await {
            Ok(entry) => {
                if let Ok(mut entries) = self.gateway.registry_entries.write() {
                    entries.retain(|e| e.tool_name != name);
                    entries.extend(entry);
                }
                self.rebuild(Instant::now()).await;
            }
            Err(e) => {
                tracing::warn!(tool = name, error = %crate::redact::shown(&e), "invalidated tool could not be reloaded; refresh will retry")
            }
        }
    }

    /// How long `server` waits before its next `tools/list`: the jittered refresh interval,
    /// shortened by its own `ttlMs` hint (never below `catalogue.min_refresh_interval_ms`), or
    /// a short backoff while it is failing.
    fn server_wait(&self, server: &str) -> Duration {
        let interval = self.gateway.refresh_interval();
        let floor = Duration::from_millis(self.gateway.settings().config.catalogue.min_refresh_interval_ms);
        let hinted =
            self.ttl_hints.get(server).map_or(interval, |ttl| (*ttl).clamp(floor.min(interval), interval));
        let wait = jittered(hinted);
        match self.failures.get(server) {
            Some(&failures) => {
                let backoff = MIN_RETRY.saturating_mul(1 << failures.saturating_sub(1).min(8));
                backoff.min(wait)
            }
            None => wait,
        }
    }

    /// Schedules the refresh of every server whose `list_changed` arrived: after
    /// [`LIST_CHANGED_DEBOUNCE`], and no sooner than `catalogue.list_changed_min_interval_ms`
    /// after its last one; a server already scheduled absorbs the notification.
    fn schedule_list_changed(&mut self) {
        let now = tokio::time::Instant::now();
        let floor =
            Duration::from_millis(self.gateway.settings().config.catalogue.list_changed_min_interval_ms);
        for server in self.gateway.list_changes.take_pending() {
            let name = server.to_string();
            if self.list_scheduled.contains(&name) {
                self.gateway.record_list_changed(&name, false);
                continue;
            }
            let earliest = self.list_last.get(&name).map_or(now, |last| clock::later_tokio(*last, floor));
            let at = earliest.max(clock::later_tokio(now, LIST_CHANGED_DEBOUNCE));
            self.list_last.insert(name.clone(), at);
            self.list_scheduled.insert(name.clone());
            let due = self.server_due.entry(name.clone()).or_insert(at);
            *due = (*due).min(at);
            self.gateway.record_list_changed(&name, true);
        }
    }

    /// The servers whose refresh is due at `now`.
    fn due_servers(&self, now: tokio::time::Instant) -> Vec<String> {
        self.server_due.iter().filter(|(_, due)| **due <= now).map(|(name, _)| name.clone()).collect()
    }

    /// The earliest due time of any server or of the registry scan.
    fn next_due(&self) -> tokio::time::Instant {
        self.server_due.values().copied().fold(self.registry_due, std::cmp::min)
    }

    /// Runs forever: the first refresh marks the gateway ready.
    pub async fn run(mut self) {
        let mut invalidations = self.subscribe();
        self.refresh_all().await;
        self.gateway.readiness.mark_loaded();
        let mut last = Instant::now();
        let mut last_woken: Option<Instant> = None;
        loop {
            let next = self.next_due();
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {
                    let now = tokio::time::Instant::now();
                    let due = self.due_servers(now);
                    let scan = self.registry_due <= now;
                    self.refresh(&due, scan).await;
                    if scan {
                        last = Instant::now();
                    }
                    continue;
                }
                _ = self.gateway.refresh_forced.notified() => {}
                _ = self.gateway.list_changes.wake.notified() => {
                    self.schedule_list_changed();
                    continue;
                }
                _ = self.gateway.rebuild_now.notified() => {
                    self.rebuild(Instant::now()).await;
                    continue;
                }
                _ = self.gateway.reloads.applied.notified() => {
                    // The servers or the catalogue control changed: every list is read again
                    // and the catalogue rebuilt, whether or not a listing differs.
                    self.follow_reload();
                    self.refresh_all().await;
                    self.rebuild(Instant::now()).await;
                    last = Instant::now();
                    continue;
                }
                _ = self.gateway.refresh_now.notified() => {
                    let wakes = &self.gateway.metrics.registry_miss_wakes;
                    if last.elapsed() < MIN_WAKE_INTERVAL
                        || last_woken.is_some_and(|at| at.elapsed() < MISS_REFRESH_INTERVAL)
                    {
                        wakes.with_label_values(&["skipped"]).inc();
                        continue;
                    }
                    wakes.with_label_values(&["refreshed"]).inc();
                    last_woken = Some(Instant::now());
                }
                Some(name) = invalidations.recv() => {
                    self.reload(&name).await;
                    continue;
                }
            }
            self.refresh_all().await;
            last = Instant::now();
        }
    }

    /// Listens on the Redis invalidation channel (reconnecting every second when Redis is
    /// away); names arrive on the returned channel.
    fn subscribe(&self) -> mpsc::UnboundedReceiver<String> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let Some(redis) = self.gateway.registry.dynamic.as_ref().and_then(|d| d.redis.clone()) else {
            return receiver;
        };
        let errors = self.gateway.metrics.shared_state_errors.clone();
        // Ends when the refresher that reads it is gone (a restarted one subscribes anew).
        supervise::spawn(Loop::Invalidations, move || {
            let (redis, sender, errors) = (redis.clone(), sender.clone(), errors.clone());
            subscription(redis, sender, errors)
        });
        receiver
    }
}

/// Forwards the names of the Redis invalidation channel (reconnecting every second while
/// Redis is away) until `sender`'s receiver is gone.
async fn subscription(
    redis: crate::registry::redis_tier::RedisStore,
    sender: mpsc::UnboundedSender<String>,
    errors: prometheus::IntCounterVec,
) {
    loop {
        if sender.is_closed() {
            return;
        }
        match redis.subscribe_invalidations().await {
            Ok(mut pubsub) => {
                let mut messages = pubsub.on_message();
                while let Some(message) = futures_util::StreamExt::next(&mut messages).await {
                    if let Ok(name) = message.get_payload::<String>()
                        && sender.send(name).is_err()
                    {
                        return;
                    }
                }
            }
            Err(_) => errors.with_label_values(&["subscribe"]).inc(),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `wait` ±10% (capped first, so the product cannot overflow).
fn jittered(wait: Duration) -> Duration {
    clock::capped(wait).mul_f64(0.9 + 0.2 * fastrand::f64())
}

/// The servers' tools as pinning serves them (on tokio's blocking pool: every discovered
/// definition is hashed). Configured (static) tools are the operator's and are not pinned.
async fn pinned(gateway: &Gateway, pins: Arc<PinStore>, servers: Vec<ServerTools>) -> Vec<ServerTools> {
    let settings = gateway.settings();
    let statics: HashMap<String, Vec<Value>> = servers
        .iter()
        .filter_map(|s| Some((s.server.clone(), settings.upstreams.get(&s.server)?.config.tools.clone())))
        .collect();
    let fallback = servers.clone();
    let fallback_statics = statics.clone();
    let resolved = tokio::task::spawn_blocking(move || {
        servers
            .into_iter()
            .map(|mut server| {
                let configured = statics.get(&server.server).map(Vec::as_slice).unwrap_or_default();
                let is_static = |t: &Value| configured.iter().any(|s| s.get("name") == t.get("name"));
                let (fixed, discovered): (Vec<Value>, Vec<Value>) =
                    server.parsed().into_iter().partition(|t| is_static(t));
                let mut tools = pins.resolve(&server.server, &discovered);
                tools.extend(fixed);
                server.tools = Arc::new(ServerTools::texts(&tools));
                server
            })
            .collect()
    });
    match resolved.await {
        Ok(servers) => servers,
        Err(e) => {
            tracing::error!(error = %e, "pinning failed; serving the static tools only");
            fallback
                .into_iter()
                .map(|mut server| {
                    server.tools = Arc::new(ServerTools::texts(
                        fallback_statics.get(&server.server).map(Vec::as_slice).unwrap_or_default(),
                    ));
                    server
                })
                .collect()
        }
    }
}
