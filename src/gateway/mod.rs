//! The gateway's state and its two operations on tools: list them, call one.
//!
//! [`Gateway`] owns the registry and one service stack per upstream server; the inbound HTTP
//! layer ([`crate::server`]) only decodes and dispatches to it, through the methods of
//! `surface.rs` (its fields are private).

pub mod call;
pub mod cancel;
pub mod capabilities;
mod door;
pub mod drift;
pub mod endpoints;
pub mod federation;
mod forwarded_meta;
mod guard;
pub mod list_changes;
mod rebuild;
pub mod refresh;
pub mod reload;
mod search;
pub mod settings;
pub mod subscriptions;
mod surface;
pub mod tasks;
pub mod upstreams;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::{
    backchannel::sessions::{Limits as SessionLimits, Sessions},
    config::{Config, LambdaEvent, ServerConfig, TransportKind},
    error::{Category, GatewayError},
    registry::{
        Catalog, Registry, ToolRecord, borrow,
        dynamic::DynamicRegistry,
        dynamodb::DynamoStore,
        entry::{RegistryEntry, ServerRef},
        pins::PinStore,
        redis_tier::RedisStore,
        url_policy,
    },
    resilience::{
        cache::{ResultCache, SharedResult},
        shared::SharedBreakers,
    },
    singleflight::SingleFlight,
    telemetry::metrics::Metrics,
};
pub use upstreams::Upstream;

/// Readiness as `/readyz` reports it.
#[derive(Debug, Default)]
pub struct Readiness {
    loaded: AtomicBool,
    /// Servers whose last tool refresh failed, with the reason.
    failing: RwLock<BTreeMap<String, String>>,
    /// The same servers: what kind of failure, since when (the first failure in a row).
    refresh_failures: RwLock<BTreeMap<String, RefreshFailure>>,
}

/// A server whose `tools/list` keeps failing, as [`capabilities`] reads it.
#[derive(Debug, Clone)]
pub struct RefreshFailure {
    /// `unreachable` (connect/timeout/IO), `needs_auth` (401/403) or `tools_list_failing`.
    pub reason: &'static str,
    pub detail: String,
    pub since: std::time::SystemTime,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    pub fn mark_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    pub fn set_server(&self, server: &str, failure: Option<String>) {
        if let Ok(mut failing) = self.failing.write() {
            match failure {
                Some(reason) => failing.insert(server.to_string(), reason),
                None => failing.remove(server),
            };
        }
    }

    /// Records the outcome of a server's tool refresh (`None`: it succeeded).
    pub fn set_server_result(&self, server: &str, error: Option<&crate::upstream::UpstreamError>) {
        self.set_server(server, error.map(ToString::to_string));
        let Ok(mut failures) = self.refresh_failures.write() else { return };
        let Some(error) = error else {
            failures.remove(server);
            return;
        };
        let reason = error.refresh_failure_reason();
        let since = match failures.get(server) {
            Some(previous) if previous.reason == reason => previous.since,
            _ => std::time::SystemTime::now(),
        };
        failures.insert(server.to_string(), RefreshFailure { reason, detail: error.to_string(), since });
    }

    /// Servers whose tool refresh is failing, by name.
    pub fn refresh_failures(&self) -> BTreeMap<String, RefreshFailure> {
        self.refresh_failures.read().map(|f| f.clone()).unwrap_or_default()
    }

    pub fn failing(&self) -> BTreeMap<String, String> {
        self.failing.read().map(|f| f.clone()).unwrap_or_default()
    }
}

/// The Redis and DynamoDB registry tiers, when configured.
async fn dynamic_registry(
    config: &Config,
    metrics: &Metrics,
) -> anyhow::Result<Option<Arc<DynamicRegistry>>> {
    let settings = &config.registry;
    let redis = crate::redis_link::RedisLink::from_config(config)?.map(|link| {
        RedisStore::new(
            link,
            &settings.redis_prefix,
            Duration::from_secs(settings.redis_ttl_secs),
            Duration::from_millis(settings.redis_timeout_ms),
        )
    });
    let dynamo = match &config.dynamodb_table {
        Some(table) => Some(
            DynamoStore::connect(
                table,
                config.dynamodb_endpoint.as_deref(),
                config.aws.region.as_deref(),
                Duration::from_millis(settings.dynamodb_timeout_ms),
                1,
            )
            .await
            .with_page_size(settings.scan_page_size),
        ),
        None => None,
    };
    if redis.is_none() && dynamo.is_none() {
        return Ok(None);
    }
    Ok(Some(Arc::new(
        DynamicRegistry::new(
            redis,
            dynamo,
            settings.clone(),
            metrics.registry_lookups.clone(),
            metrics.registry_remote_lookups.clone(),
        )
        .with_definition_bound(config.defaults.max_tool_definition_bytes, metrics.catalogue_refusals.clone()),
    )))
}

/// A registry-built server stack and the origin it was built from.
type BuiltFrom = (Arc<ServerRef>, Arc<Upstream>);

/// Everything a request needs, shared by all of them.
pub struct Gateway {
    /// The configuration in force and what was built from it (servers, endpoints, hooks,
    /// quotas, policy): swapped whole by a reload, taken once by each call.
    settings: arc_swap::ArcSwap<settings::Settings>,
    /// Reloads: one at a time, the source of the configuration, the last report.
    reloads: reload::Reloads,
    registry: Registry,
    /// Servers known only from registry entries, built on first use, with the origin they were
    /// built from (a changed origin rebuilds them).
    dynamic_upstreams: RwLock<BTreeMap<String, BuiltFrom>>,
    /// Registry origins whose URL `registry.upstream_urls` refused, with the refusal: later
    /// calls are answered without checking (or resolving) again until the entry changes.
    refused_origins: RwLock<BTreeMap<String, (Arc<ServerRef>, GatewayError)>>,
    /// Registry origins naming a configured server that were allowed to use it
    /// ([`crate::registry::borrow`]): later calls are not checked again until the entry changes.
    accepted_borrows: RwLock<BTreeMap<String, Arc<ServerRef>>>,
    lambda_client: tokio::sync::OnceCell<aws_sdk_lambda::Client>,
    /// The DynamoDB registry's active tools as of the last refresh (admin, drift).
    registry_entries: RwLock<Vec<RegistryEntry>>,
    /// The servers' lists the catalogue was last built from (as pinning serves them): a
    /// reload rebuilds from them at once (`rebuild.rs`).
    built_lists: std::sync::Mutex<Vec<crate::registry::catalog::ServerTools>>,
    metrics: Metrics,
    readiness: Readiness,
    /// Wakes the refresh loop early for a call to an unknown tool (rate-limited there).
    refresh_now: Notify,
    /// Refreshes at once (an operator's `POST /admin/registry/refresh`; not rate-limited).
    refresh_forced: Notify,
    /// Rebuilds the catalogue from the lists already known (an approval of a pinned definition).
    rebuild_now: Notify,
    /// Read-only results: cache and stale fallbacks.
    results: ResultCache,
    /// Identical read-only calls in flight.
    in_flight: SingleFlight<SharedResult>,
    /// Calls in flight by the caller's request id, for `notifications/cancelled`.
    cancellable: cancel::InFlightCalls,
    /// Inbound back-channel sessions (callers that can answer server→client requests).
    sessions: Arc<Sessions>,
    /// Session-era servers' questions to modern callers, held open for their answer.
    held: Arc<crate::backchannel::held::HeldExchanges>,
    /// The fleet's breaker state, when shared (registry-built servers join on first use).
    shared_breakers: Option<Arc<SharedBreakers>>,
    /// The audit trail (`None` with `audit.sink = "off"`).
    audit: Option<Arc<crate::audit::Audit>>,
    /// Approved tool definitions (`catalogue.pin_tool_definitions`).
    pins: Option<Arc<PinStore>>,
    /// How the listener establishes callers (`[auth]`).
    authenticator: crate::identity::Authenticator,
    /// Tasks relayed through the gateway: where each one lives and whose it is.
    tasks: tasks::TaskTable,
    /// Upstreams' list changes in, callers' list-change notifications out.
    list_changes: list_changes::ListChanges,
    /// Callers' change-notification streams.
    listeners: Arc<crate::backchannel::listeners::Listeners>,
    /// Every server's resources, resource templates and prompts, and their index.
    federation: federation::Federation,
    /// Callers' resource subscriptions and the gateway's own upstream.
    resource_subscriptions: subscriptions::ResourceSubscriptions,
    /// The console's record of recent calls and of each server's last error.
    recent_calls: crate::telemetry::recent_calls::RecentCalls,
    /// The console's live figures: snapshots of the call metrics over the last minute.
    overview: crate::telemetry::overview::Overview,
}

impl Gateway {
    /// Builds the gateway from configuration: one service stack per server, an empty catalogue.
    pub async fn new(config: Config) -> anyhow::Result<Arc<Self>> {
        crate::registry::url_policy::validate(&config.registry.upstream_urls)?;
        let metrics = Metrics::new();
        metrics.set_tool_label_cap(config.catalogue.max_tool_label_values);
        let upstreams = upstreams::build_all(&config, &metrics).await?;
        let shared_breakers = match crate::redis_link::RedisLink::from_config(&config)? {
            Some(link) if config.shared_breakers => {
                let shared = SharedBreakers::start(link, metrics.shared_state_errors.clone());
                upstreams.values().for_each(|u| shared.register(&u.breaker));
                tracing::info!("circuit breaker state shared through Redis");
                Some(shared)
            }
            _ => None,
        };
        let routes = config
            .tools
            .iter()
            .filter_map(|(tool, settings)| Some((tool.clone(), settings.server.clone()?)))
            .collect();
        let dynamic = dynamic_registry(&config, &metrics).await?;
        let quotas = crate::quota::Quotas::new(
            &config.quotas,
            crate::redis_link::RedisLink::from_config(&config)?,
            &metrics,
        );
        let audit = crate::audit::Audit::start(&config.audit);
        if let Some(audit) = &audit {
            metrics.watch_audit_drops(audit.dropped_lines());
        }
        let pins = match config.catalogue.pin_tool_definitions {
            true => Some(Arc::new(PinStore::load(config.catalogue.pin_file.clone())?)),
            false => None,
        };
        let authenticator = crate::identity::Authenticator::from_config(&config.auth).await?;
        let policy = crate::policy::Policy::start(&config.policy, metrics.policy_reloads.clone())?;
        let overrides =
            config.tools.iter().map(|(name, settings)| (name.clone(), settings.overrides())).collect();
        let catalog = Catalog::new(routes).controlled(overrides, &config.catalogue.search);
        let registry = Registry::new(Arc::new(catalog), dynamic);
        let settings = settings::Settings::new(settings::Parts {
            upstreams,
            endpoints: endpoints::Endpoints::new(&config.endpoints),
            hooks: crate::guardrail::Hooks::new(&config.hooks)?,
            quotas,
            policy,
            generation: 1,
            config: Arc::new(config.clone()),
        });
        metrics.config_generation.set(1);
        let gateway = Arc::new(Self {
            settings: arc_swap::ArcSwap::from_pointee(settings),
            reloads: reload::Reloads::default(),
            registry,
            dynamic_upstreams: RwLock::default(),
            refused_origins: RwLock::default(),
            accepted_borrows: RwLock::default(),
            cancellable: Default::default(),
            sessions: Arc::new(
                Sessions::counted(metrics.back_channel_sessions.clone())
                    .with_limits(SessionLimits::from_config(&config.inbound)),
            ),
            held: Arc::new(crate::backchannel::held::HeldExchanges::new(
                config.inbound.max_held_exchanges,
                config.inbound.held_exchange_ttl(),
            )),
            lambda_client: tokio::sync::OnceCell::new(),
            registry_entries: RwLock::default(),
            built_lists: Default::default(),
            readiness: Readiness::default(),
            refresh_now: Notify::new(),
            refresh_forced: Notify::new(),
            rebuild_now: Notify::new(),
            results: ResultCache::new(config.cache.max_entries),
            in_flight: SingleFlight::default(),
            shared_breakers,
            audit,
            pins,
            authenticator,
            tasks: tasks::TaskTable::new(&config.tasks),
            list_changes: Default::default(),
            federation: federation::Federation::new(&config),
            resource_subscriptions: subscriptions::ResourceSubscriptions::new(&config.inbound, &metrics),
            listeners: Arc::new(crate::backchannel::listeners::Listeners::new(
                config.inbound.max_listen_streams,
                Some(metrics.listen_streams.clone()),
            )),
            recent_calls: crate::telemetry::recent_calls::RecentCalls::new(config.admin.recent_calls),
            overview: crate::telemetry::overview::Overview::new(crate::telemetry::metrics::LATENCY_BUCKETS),
            metrics,
        });
        gateway.watch_list_changes();
        gateway.relay_resource_updates();
        for upstream in gateway.settings().upstreams.values() {
            gateway.start_server_loops(upstream);
        }
        Ok(gateway)
    }

    /// The configuration in force and what was built from it. A call takes it once and keeps
    /// it to its end ([`settings`]).
    pub fn settings(&self) -> Arc<settings::Settings> {
        self.settings.load_full()
    }

    /// Starts a configured server's background loops: its breaker's health prober, and for a
    /// discovering server the watches of its recoveries, its list changes and its resource
    /// updates. Each ends when the stack is retired by a reload ([`upstreams::Retirement`]).
    fn start_server_loops(self: &Arc<Self>, upstream: &Arc<Upstream>) {
        upstream
            .start_health_prober(self.shared_breakers.clone(), self.metrics.breaker_health_probes.clone());
        if !upstream.config.discover {
            return;
        }
        self.refresh_on_recovery(upstream);
        self.watch_list_changes_of(upstream);
        self.relay_resource_updates_of(upstream);
    }

    /// A persistent server that comes back (a restarted child, a reconnected socket) may
    /// serve other tools than before, or was never listed: its recovery refreshes at once
    /// instead of waiting for the refresh interval or the failure backoff.
    fn refresh_on_recovery(self: &Arc<Self>, upstream: &Arc<Upstream>) {
        let Some(connection) = &upstream.connection else { return };
        let mut first = Some(connection.recoveries());
        let gateway = Arc::downgrade(self);
        let server = upstream.name.clone();
        let retirement = upstream.retirement.clone();
        let mine = Arc::downgrade(upstream);
        // Supervised; a restarted watch subscribes anew (it holds no strong reference).
        crate::supervise::spawn(crate::supervise::Loop::Recoveries, move || {
            let first = first.take();
            let (gateway, server, mine) = (gateway.clone(), server.clone(), mine.clone());
            retirement.until(async move {
                let again = || Some(mine.upgrade()?.connection.as_ref()?.recoveries());
                let Some(mut recoveries) = first.or_else(again) else { return };
                while recoveries.next().await {
                    let Some(gateway) = gateway.upgrade() else { break };
                    tracing::info!(server = %server, "persistent upstream recovered; refreshing its tools");
                    gateway.refresh_forced.notify_one();
                }
            })
        });
    }

    /// The server stack a tool's calls go through: a configured server, or one built from the
    /// tool's registry entry on first use (with the default per-server settings). A registry
    /// server whose origin (transport, URL, function, qualifier) changed is rebuilt, so an
    /// entry that moves to another endpoint is followed without a restart.
    pub async fn upstream_for(&self, tool: &ToolRecord) -> Result<Arc<Upstream>, GatewayError> {
        self.upstream_in(&self.settings(), tool).await
    }

    /// [`Self::upstream_for`] under the settings a call took at its start.
    pub(super) async fn upstream_in(
        &self,
        settings: &settings::Settings,
        tool: &ToolRecord,
    ) -> Result<Arc<Upstream>, GatewayError> {
        if let Some(upstream) = settings.upstreams.get(tool.server.as_ref()) {
            if let Some(origin) = &tool.origin {
                self.check_borrow(origin, upstream, &tool.name, settings).await?;
            }
            return Ok(upstream.clone());
        }
        // A configured server's tool whose server a reload removed (the call resolved it from
        // the catalogue just before the rebuild): unknown now, as it is to the next caller.
        let origin = tool.origin.as_ref().ok_or_else(|| {
            GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", tool.name.as_ref()),
            )
        })?;
        let cached = self.dynamic_upstreams.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((built_from, upstream)) = &cached
            && built_from == origin
        {
            return Ok(upstream.clone());
        }
        let refused = self.refused_origins.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((refused_from, refusal)) = refused
            && refused_from == *origin
        {
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal_reason(&refusal)]).inc();
            return Err(refusal.with_tool(tool.name.clone()));
        }
        // Boxed: building may load the AWS SDK's configuration, whose future is kilobytes;
        // inline it would size every call's future.
        Box::pin(self.build_registry_upstream(origin, &tool.name, settings)).await
    }

    /// A registry entry naming a configured server: served through that server's stack only
    /// as [`crate::registry::borrow`] allows, and its own URL (if any) only if
    /// `registry.upstream_urls` allows it. A refusal is counted, logged and remembered like a
    /// refused URL; an accepted origin is remembered so that calls check it once.
    async fn check_borrow(
        &self,
        origin: &Arc<ServerRef>,
        configured: &Upstream,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<(), GatewayError> {
        let accepted = self.accepted_borrows.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if accepted.is_some_and(|accepted| accepted == *origin) {
            return Ok(());
        }
        let refused = self.refused_origins.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((refused_from, refusal)) = refused
            && refused_from == *origin
        {
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal_reason(&refusal)]).inc();
            return Err(refusal.with_tool(tool));
        }
        if let Err(refusal) = borrow::check(&origin.name, origin, &configured.config) {
            let shown = origin.url.as_deref().map(crate::redact::url);
            tracing::warn!(
                tool,
                server = %origin.name,
                transport = %origin.transport,
                url = ?shown,
                reason = refusal.reason,
                "registry entry names a configured server at another address; refused, nothing sent (servers.NAME.registry_may_use)"
            );
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal.reason]).inc();
            let error = GatewayError::new(Category::UpstreamNotAllowed, refusal.detail)
                .with_server(origin.name.as_str())
                .with_extra("reason", json!(refusal.reason));
            if let Ok(mut refused) = self.refused_origins.write() {
                refused.insert(origin.name.clone(), (origin.clone(), error.clone()));
            }
            return Err(error.with_tool(tool));
        }
        self.check_registry_url(origin, tool, settings).await?;
        if let Ok(mut accepted) = self.accepted_borrows.write() {
            accepted.insert(origin.name.clone(), origin.clone());
        }
        Ok(())
    }

    /// The registry origins refused so far (`GET /admin/registry`): server, transport,
    /// redacted URL, reason and detail.
    pub fn refused_registry_origins(&self) -> Vec<serde_json::Value> {
        let Ok(refused) = self.refused_origins.read() else { return Vec::new() };
        refused
            .iter()
            .map(|(name, (origin, error))| {
                json!({
                    "server": name,
                    "transport": origin.transport,
                    "url": origin.url.as_deref().map(crate::redact::url),
                    "function": origin.function,
                    "reason": refusal_reason(error),
                    "detail": error.detail,
                })
            })
            .collect()
    }

    /// `registry.upstream_urls`: a registry URL must be allowed before anything is sent to it.
    /// A refusal is counted, logged (tool, server, redacted URL) and remembered for its origin.
    async fn check_registry_url(
        &self,
        origin: &Arc<ServerRef>,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<(), GatewayError> {
        let Some(url) = origin.url.as_deref() else { return Ok(()) };
        let Err(refusal) = url_policy::check(url, &settings.config.registry.upstream_urls).await else {
            return Ok(());
        };
        let shown = crate::redact::url(url);
        tracing::warn!(
            tool,
            server = %origin.name,
            url = %shown,
            reason = refusal.reason,
            detail = %refusal.detail,
            "registry entry's upstream URL refused; nothing sent"
        );
        self.metrics.registry_upstreams_refused.with_label_values(&[refusal.reason]).inc();
        let error = GatewayError::new(
            Category::UpstreamNotAllowed,
            format!("server {} at {shown}: {}", origin.name, refusal.detail),
        )
        .with_server(origin.name.as_str())
        .with_extra("reason", json!(refusal.reason));
        if let Ok(mut refused) = self.refused_origins.write() {
            refused.insert(origin.name.clone(), (origin.clone(), error.clone()));
        }
        Err(error.with_tool(tool))
    }

    /// Drops the registry-built stacks (and remembered refusals) whose origin no live entry
    /// names any more: a removed or moved entry must not leave a connection (a stdio child,
    /// a WebSocket) or a breaker behind. `live` are the origins still in use.
    pub fn prune_registry_upstreams(&self, live: &[Arc<ServerRef>]) -> usize {
        let mut by_name: std::collections::HashMap<&str, Vec<&Arc<ServerRef>>> = Default::default();
        for origin in live {
            by_name.entry(origin.name.as_str()).or_default().push(origin);
        }
        let in_use = |name: &str, origin: &Arc<ServerRef>| {
            by_name.get(name).is_some_and(|origins| origins.contains(&origin))
        };
        let mut dropped = Vec::new();
        if let Ok(mut map) = self.dynamic_upstreams.write() {
            map.retain(|name, (origin, upstream)| {
                let keep = in_use(name, origin);
                if !keep {
                    dropped.push(upstream.clone());
                }
                keep
            });
            self.metrics.registry_upstreams.set(map.len() as i64);
        }
        if let Ok(mut refused) = self.refused_origins.write() {
            refused.retain(|name, (origin, _)| in_use(name, origin));
        }
        if let Ok(mut accepted) = self.accepted_borrows.write() {
            accepted.retain(|name, origin| in_use(name, origin));
        }
        for upstream in &dropped {
            tracing::info!(server = %upstream.name, transport = upstream.transport.as_str(), "registry server no longer named by a live entry; its stack is dropped");
            self.metrics.registry_upstreams_dropped.inc();
            // Ends a session-era HTTP session; a persistent connection stops when its last
            // handle (this one, or a call in flight) goes.
            if let Some(http) = upstream.http.clone() {
                tokio::spawn(async move { http.close().await });
            }
        }
        dropped.len()
    }

    /// Builds (once per origin) the stack of a server known only from the registry.
    async fn build_registry_upstream(
        &self,
        origin: &Arc<ServerRef>,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<Arc<Upstream>, GatewayError> {
        let config = &settings.config;
        let misconfigured = |detail: String| GatewayError::new(Category::UpstreamMisconfigured, detail);
        let transport = TransportKind::parse(&origin.transport).ok_or_else(|| {
            misconfigured(format!("transport {:?} of server {} is not served", origin.transport, origin.name))
        })?;
        if transport == TransportKind::Openapi {
            return Err(misconfigured(format!(
                "server {} is an OpenAPI target, which only configuration declares (a registry entry cannot carry its document)",
                origin.name
            )));
        }
        if transport.needs_url() {
            self.check_registry_url(origin, tool, settings).await?;
        }
        let mut server = ServerConfig::new(
            transport,
            origin.url.clone(),
            origin.function.clone(),
            origin.qualifier.clone(),
        );
        if transport == TransportKind::Stdio {
            // A registry entry picks one of the commands configuration allows; it never
            // supplies a program, arguments or environment of its own.
            let allowed = origin.command.as_deref().and_then(|key| config.stdio_commands.get(key));
            let Some(allowed) = allowed else {
                return Err(misconfigured(format!(
                    "stdio server {} names command {:?}, which is not in the gateway's stdio_commands (registry entries may only start commands configuration allows)",
                    origin.name, origin.command
                )));
            };
            server.command = Some(allowed.command.clone());
            server.args = allowed.args.clone();
            server.env = allowed.env.clone();
        }
        if transport == TransportKind::Lambda {
            server.lambda_event = LambdaEvent::parse(origin.lambda_event.as_deref()).ok_or_else(|| {
                misconfigured(format!(
                    "server {} has lambda_event {:?}; the gateway serves \"jsonrpc\" and \"agentcore\"",
                    origin.name, origin.lambda_event
                ))
            })?;
            server.agentcore_target = origin.agentcore_target.clone();
        }
        // Its tools come from the registry, not from its own tools/list.
        server.discover = false;
        let lambda = match transport {
            TransportKind::Lambda => {
                Some(self.lambda_client.get_or_init(|| upstreams::lambda_client(config)).await)
            }
            _ => None,
        };
        let built = upstreams::build(&origin.name, &server, config, &self.metrics, lambda)
            .map_err(|e| misconfigured(format!("{e:#}")))?;
        let mut map = self.dynamic_upstreams.write().map_err(|_| unknown_server())?;
        // Another call may have built the same origin meanwhile: keep one stack per origin.
        if let Some((built_from, upstream)) = map.get(&origin.name)
            && built_from == origin
        {
            return Ok(upstream.clone());
        }
        if let Some(shared) = &self.shared_breakers {
            shared.register(&built.breaker);
        }
        built.start_health_prober(self.shared_breakers.clone(), self.metrics.breaker_health_probes.clone());
        let upstream = Arc::new(built);
        let replaced = map.insert(origin.name.clone(), (origin.clone(), upstream.clone())).is_some();
        self.metrics.registry_upstreams.set(map.len() as i64);
        if replaced {
            tracing::warn!(server = %origin.name, transport = transport.as_str(), url = ?origin.url.as_deref().map(crate::redact::url), function = ?origin.function, "registry server's origin changed; rebuilt its stack");
        } else {
            tracing::info!(server = %origin.name, transport = transport.as_str(), "registry server connected");
        }
        Ok(upstream)
    }

    /// Every server stack, configured and registry-built.
    pub fn all_upstreams(&self) -> Vec<Arc<Upstream>> {
        let mut all: Vec<Arc<Upstream>> = self.settings().upstreams.values().cloned().collect();
        if let Ok(dynamic) = self.dynamic_upstreams.read() {
            all.extend(dynamic.values().map(|(_, upstream)| upstream.clone()));
        }
        all
    }

    /// Servers whose persistent connection is in a lasting down state (`failed`,
    /// `needs_auth`, `disabled`): their tools cannot be served for now.
    pub fn unreachable_servers(&self) -> std::collections::BTreeSet<Arc<str>> {
        self.all_upstreams()
            .into_iter()
            .filter(|u| u.connection.as_ref().is_some_and(|c| c.state().is_lasting()))
            .map(|u| u.name.clone())
            .collect()
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        self.registry.catalog()
    }

    /// The tools `caller` may see, under a policy or through an endpoint (`None`: all of
    /// them, as the catalogue shows them).
    pub fn tool_view(&self, caller: &crate::identity::Caller) -> Option<Arc<crate::policy::ToolView>> {
        let settings = self.settings();
        if settings.policy.is_none() && caller.endpoint.is_none() {
            return None;
        }
        let snapshot = self.catalog().snapshot();
        let base = settings.policy.as_ref().map(|policy| policy.view(caller, &snapshot));
        match &caller.endpoint {
            Some(endpoint) => Some(settings.endpoints.view(endpoint, &snapshot, base)),
            None => base,
        }
    }

    /// `/readyz` body: ready once the registry has been loaded, with per-server state.
    pub fn readiness_report(&self) -> (bool, Value) {
        let ready = self.readiness.is_ready();
        let failing = self.readiness.failing();
        let settings = self.settings();
        let servers: BTreeMap<&str, Value> = settings
            .upstreams
            .values()
            .map(|u| {
                let mut state = match failing.get(u.name.as_ref()) {
                    Some(reason) => {
                        json!({"transport": u.transport.as_str(), "tools": "unavailable", "reason": reason})
                    }
                    None => json!({"transport": u.transport.as_str(), "tools": "loaded"}),
                };
                if let Some(connection) = &u.connection {
                    let connection_state = connection.state();
                    state["connection"] = json!(connection_state.as_str());
                    // Like an open breaker, a reconnect is expected to end within seconds.
                    if connection_state.is_lasting() {
                        state["tools"] = json!("unavailable");
                        state["reason"] = json!(format!("connection {}", connection_state.as_str()));
                    }
                }
                (u.name.as_ref(), state)
            })
            .collect();
        let reason = if ready { "registry loaded" } else { "registry not loaded yet" };
        let tiers = match &self.registry.dynamic {
            Some(dynamic) => dynamic.report(),
            None => json!({"redis": "not configured", "dynamodb": "not configured"}),
        };
        (
            ready,
            json!({
                "ready": ready,
                "reason": reason,
                "tools": self.catalog().snapshot().len(),
                "servers": servers,
                "tiers": tiers,
            }),
        )
    }

    /// Time the refresh loop waits between full refreshes.
    pub fn refresh_interval(&self) -> Duration {
        Duration::from_secs(self.settings().config.refresh_interval_secs.max(1))
    }
}

/// The metric label of a remembered refusal.
fn refusal_reason(error: &GatewayError) -> &'static str {
    let reason = error.extra.as_ref().and_then(|extra| extra.1.as_str());
    crate::telemetry::metrics::UPSTREAM_REFUSAL_REASONS
        .iter()
        .find(|known| Some(**known) == reason)
        .copied()
        .unwrap_or("not_allowlisted")
}

/// A resolved tool whose server the gateway cannot name (a record without an origin).
fn unknown_server() -> GatewayError {
    GatewayError::new(Category::Internal, "tool resolved to an unknown server")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::UpstreamError;

    #[test]
    fn refresh_failures_are_classified_and_keep_their_first_time() {
        let readiness = Readiness::default();
        readiness.set_server_result("a", Some(&UpstreamError::Connect("refused".into())));
        let first = readiness.refresh_failures()["a"].clone();
        assert_eq!(first.reason, "unreachable");
        readiness.set_server_result("a", Some(&UpstreamError::Timeout(Duration::from_secs(1))));
        assert_eq!(readiness.refresh_failures()["a"].since, first.since, "same kind: since kept");
        readiness.set_server_result("a", Some(&UpstreamError::Unauthorized { status: 401 }));
        assert_eq!(readiness.refresh_failures()["a"].reason, "needs_auth");
        readiness.set_server_result("b", Some(&UpstreamError::Protocol("bad page".into())));
        assert_eq!(readiness.refresh_failures()["b"].reason, "tools_list_failing");
        assert_eq!(readiness.failing().len(), 2, "/readyz sees the same failures");
        readiness.set_server_result("a", None);
        assert!(!readiness.refresh_failures().contains_key("a"));
        assert!(!readiness.failing().contains_key("a"));
    }
}
