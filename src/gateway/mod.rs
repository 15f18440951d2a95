//! The gateway's state and its two operations on tools: list them, call one.
//!
//! [`Gateway`] owns the registry and one service stack per upstream server; the inbound HTTP
//! layer ([`crate::server`]) only decodes and dispatches to it, through the methods of
//! `surface.rs` (its fields are private). Readiness is `readiness`; the stacks of servers
//! known only from registry entries, and the checks before one is used, `registry_upstreams`.

pub mod approval;
mod approval_tasks;
pub mod call;
pub mod cancel;
pub mod capabilities;
mod door;
pub mod drift;
pub mod endpoints;
mod extensions;
pub mod federation;
mod forwarded_meta;
mod guard;
pub mod list_changes;
pub mod outbound;
mod readiness;
mod rebuild;
pub mod refresh;
mod registry_upstreams;
pub mod reload;
mod routing_report;
mod search;
pub mod settings;
pub mod subscriptions;
mod surface;
pub mod tasks;
pub mod tool_list;
pub mod upstreams;

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::{
    backchannel::sessions::{Limits as SessionLimits, Sessions},
    config::Config,
    error::GatewayError,
    registry::{
        Catalog, Registry,
        dynamic::DynamicRegistry,
        dynamodb::DynamoStore,
        entry::{RegistryEntry, ServerRef},
        pins::PinStore,
        redis_tier::RedisStore,
    },
    resilience::{
        cache::{ResultCache, SharedResult},
        shared::SharedBreakers,
    },
    singleflight::SingleFlight,
    telemetry::metrics::Metrics,
};
pub use readiness::{Readiness, RefreshFailure};
pub use upstreams::Upstream;

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
    /// Calls waiting for a person's approval, bound to the exact call (`[approvals]`).
    approvals: crate::approvals::Approvals,
    /// Tasks of the gateway's own that wait for an approval, then make their call.
    approval_tasks: approval_tasks::ApprovalTasks,
    /// The gateway itself, for work it starts that outlives a request (an approval task).
    me: std::sync::OnceLock<std::sync::Weak<Gateway>>,
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
        if let Some(pins) = &pins {
            upstreams.values().filter_map(|u| u.openapi.as_ref()).for_each(|t| t.attach_pins(pins.clone()));
        }
        let authenticator = crate::identity::Authenticator::from_config(&config.auth).await?;
        let policy = crate::policy::Policy::start(&config.policy, metrics.policy_reloads.clone())?;
        let overrides =
            config.tools.iter().map(|(name, settings)| (name.clone(), settings.overrides())).collect();
        let prefixes = config.servers.iter().map(|(name, server)| (name.clone(), server.prefix)).collect();
        let catalog = Catalog::new(routes).prefixed(prefixes).controlled(overrides, &config.catalogue.search);
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
            approvals: crate::approvals::Approvals::start(&config.approvals, audit.clone(), metrics.clone()),
            approval_tasks: Default::default(),
            me: std::sync::OnceLock::new(),
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
        let _ = gateway.me.set(Arc::downgrade(&gateway));
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
    /// Most tools one `tools/list` page holds (`catalogue.tools_page_size`).
    pub fn tools_page_size(&self) -> usize {
        self.settings().config.catalogue.tools_page_size
    }

    pub fn refresh_interval(&self) -> Duration {
        Duration::from_secs(self.settings().config.refresh_interval_secs.max(1))
    }
}
