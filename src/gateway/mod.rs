//! The gateway's state and its two operations on tools: list them, call one.
//!
//! [`Gateway`] owns the registry and one service stack per upstream server; the inbound HTTP
//! layer ([`crate::server`]) only decodes and dispatches to it.

pub mod call;
pub mod refresh;
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
    config::{Config, ToolConfig},
    registry::{Catalog, Registry},
    resilience::cache::{InFlight, ResultCache},
    telemetry::metrics::Metrics,
};
pub use upstreams::Upstream;

/// Readiness as `/readyz` reports it.
#[derive(Debug, Default)]
pub struct Readiness {
    loaded: AtomicBool,
    /// Servers whose last tool refresh failed, with the reason.
    failing: RwLock<BTreeMap<String, String>>,
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

    pub fn failing(&self) -> BTreeMap<String, String> {
        self.failing.read().map(|f| f.clone()).unwrap_or_default()
    }
}

/// Everything a request needs, shared by all of them.
pub struct Gateway {
    pub config: Config,
    pub registry: Registry,
    pub upstreams: BTreeMap<String, Upstream>,
    pub metrics: Metrics,
    pub readiness: Readiness,
    /// Wakes the refresh loop early (e.g. a call for an unknown tool).
    pub refresh_now: Notify,
    /// Read-only results: cache and stale fallbacks.
    pub results: ResultCache,
    /// Identical read-only calls in flight.
    pub in_flight: InFlight,
    /// Settings of tools without a `[tools.NAME]` section.
    default_tool: ToolConfig,
}

impl Gateway {
    /// Builds the gateway from configuration: one service stack per server, an empty catalogue.
    pub async fn new(config: Config) -> anyhow::Result<Arc<Self>> {
        let metrics = Metrics::new();
        let upstreams = upstreams::build_all(&config, &metrics).await?;
        if config.shared_breakers
            && let Some(url) = &config.redis_url
        {
            let breakers = upstreams.values().map(|u| u.breaker.clone()).collect();
            crate::resilience::shared::start(url, breakers, metrics.shared_state_errors.clone())?;
            tracing::info!("circuit breaker state shared through Redis");
        }
        let routes = config
            .tools
            .iter()
            .filter_map(|(tool, settings)| Some((tool.clone(), settings.server.clone()?)))
            .collect();
        let registry = Registry::new(Arc::new(Catalog::new(routes)));
        Ok(Arc::new(Self {
            registry,
            upstreams,
            metrics,
            readiness: Readiness::default(),
            refresh_now: Notify::new(),
            results: ResultCache::new(config.cache.max_entries),
            in_flight: InFlight::default(),
            default_tool: ToolConfig::default(),
            config,
        }))
    }

    /// The `[tools.NAME]` settings of a tool (defaults when it has none).
    pub fn tool_settings(&self, name: &str) -> &ToolConfig {
        self.config.tools.get(name).unwrap_or(&self.default_tool)
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        self.registry.catalog()
    }

    /// `/readyz` body: ready once the registry has been loaded, with per-server state.
    pub fn readiness_report(&self) -> (bool, Value) {
        let ready = self.readiness.is_ready();
        let failing = self.readiness.failing();
        let servers: BTreeMap<&str, Value> = self
            .upstreams
            .values()
            .map(|u| {
                let state = match failing.get(u.name.as_ref()) {
                    Some(reason) => {
                        json!({"transport": u.transport.as_str(), "tools": "unavailable", "reason": reason})
                    }
                    None => json!({"transport": u.transport.as_str(), "tools": "loaded"}),
                };
                (u.name.as_ref(), state)
            })
            .collect();
        let reason = if ready { "registry loaded" } else { "registry not loaded yet" };
        (
            ready,
            json!({
                "ready": ready,
                "reason": reason,
                "tools": self.catalog().snapshot().len(),
                "servers": servers,
            }),
        )
    }

    /// Time the refresh loop waits between full refreshes.
    pub fn refresh_interval(&self) -> Duration {
        Duration::from_secs(self.config.refresh_interval_secs.max(1))
    }
}
