//! Configuration reload without a restart: the file re-read (on `SIGHUP`, `serve --watch` or
//! `POST /admin/config/reload`), checked whole, and applied as one new [`Settings`].
//!
//! Why this shape: everything that can fail — loading and validating the file, building new
//! server stacks, compiling hooks, loading a new policy — happens before anything changes, so
//! a file that does not validate is refused with its reason and the running configuration
//! stays. Then one swap: calls that already took the old settings finish on them (their
//! server stack, timeouts, hooks), new calls take the new ones. A server whose settings did
//! not change keeps its stack — breaker state, connection or session, result cache entries;
//! a changed one is built anew; a removed (or replaced) one is retired once the calls on it
//! can have ended: its loops stop, its connection closes (a stdio child exits), its session
//! gets its DELETE. Keys that were consumed at start ([`crate::config::restart_only`]) keep
//! their running values and are reported as awaiting a restart.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, RwLock, Weak},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{Gateway, Upstream, endpoints::Endpoints, settings::Parts, settings::Settings, upstreams};
use crate::config::{
    Config,
    restart_only::{changed_sections, keep_restart_only, same},
};

/// Re-reads the configuration as `serve` first read it: the file, the `MCP_GATEWAY_*`
/// environment, the command line's flags. Runs on the blocking pool.
pub type Source = Arc<dyn Fn() -> anyhow::Result<Config> + Send + Sync>;

/// What asked for a reload (the `trigger` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `SIGHUP`.
    Signal,
    /// `serve --watch` saw the file change.
    Watch,
    /// `POST /admin/config/reload`.
    Admin,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Signal => "signal",
            Trigger::Watch => "watch",
            Trigger::Admin => "admin",
        }
    }
}

/// How a reload ended (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new generation is in force.
    Applied,
    /// The file says what is already in force.
    Unchanged,
    /// Refused; the running configuration stays.
    Invalid,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Unchanged => "unchanged",
            Outcome::Invalid => "invalid",
        }
    }
}

/// What one reload did.
#[derive(Debug, Clone)]
pub struct Report {
    pub outcome: Outcome,
    pub trigger: Trigger,
    /// When it ran.
    pub at: std::time::SystemTime,
    /// The generation in force after it.
    pub generation: u64,
    /// Why it was refused (`Invalid` only).
    pub error: Option<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub rebuilt: Vec<String>,
    pub kept: Vec<String>,
    /// Top-level sections whose applied values changed.
    pub changed: Vec<String>,
    /// Keys the file changed that keep their running values until a restart.
    pub restart_required: Vec<&'static str>,
}

impl Report {
    fn refused(trigger: Trigger, generation: u64, error: String) -> Self {
        Self {
            outcome: Outcome::Invalid,
            trigger,
            at: std::time::SystemTime::now(),
            generation,
            error: Some(error),
            added: Vec::new(),
            removed: Vec::new(),
            rebuilt: Vec::new(),
            kept: Vec::new(),
            changed: Vec::new(),
            restart_required: Vec::new(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "outcome": self.outcome.as_str(),
            "trigger": self.trigger.as_str(),
            "at": crate::registry::entry::rfc3339(self.at),
            "generation": self.generation,
            "error": self.error,
            "servers": {
                "added": self.added,
                "removed": self.removed,
                "rebuilt": self.rebuilt,
                "kept": self.kept,
            },
            "changed": self.changed,
            "restart_required": self.restart_required,
        })
    }
}

/// The gateway's reload state.
#[derive(Default)]
pub struct Reloads {
    /// One reload at a time (a signal during an admin reload waits for it).
    one_at_a_time: tokio::sync::Mutex<()>,
    source: OnceLock<Source>,
    last: RwLock<Option<Report>>,
    /// Wakes the refresh loop after an applied reload: it follows the servers and rebuilds
    /// the catalogue under the new control (`refresh.rs`).
    pub(super) applied: Notify,
}

/// How often a retiring stack checks whether the calls that could use it have ended.
const RETIRE_POLL: Duration = Duration::from_millis(100);

impl Gateway {
    /// Where a reload reads the configuration from (set once by `serve`; without it a
    /// reload is refused).
    pub fn set_config_source(&self, source: Source) {
        let _ = self.reloads.source.set(source);
    }

    /// `GET /admin/config/reload`: the generation in force and the last reload's report.
    pub fn reload_status(&self) -> Value {
        let last = self.reloads.last.read().ok().and_then(|last| last.as_ref().map(Report::to_json));
        json!({"generation": self.settings().generation(), "last": last})
    }

    /// Re-reads the configuration and applies it (or refuses it); counted, logged, and kept as
    /// the last report.
    pub async fn reload(self: &Arc<Self>, trigger: Trigger) -> Report {
        let _one = self.reloads.one_at_a_time.lock().await;
        let generation = self.settings().generation();
        let report = match self.load().await {
            Ok(config) => match self.apply(config, trigger).await {
                Ok(report) => report,
                Err(e) => Report::refused(trigger, generation, format!("{e:#}")),
            },
            Err(e) => Report::refused(trigger, generation, format!("{e:#}")),
        };
        self.metrics.config_reloads.with_label_values(&[trigger.as_str(), report.outcome.as_str()]).inc();
        match report.outcome {
            Outcome::Invalid => tracing::warn!(
                trigger = trigger.as_str(),
                generation,
                error = report.error.as_deref().unwrap_or_default(),
                "configuration reload refused; the running configuration stays"
            ),
            Outcome::Unchanged => {
                tracing::info!(
                    trigger = trigger.as_str(),
                    generation,
                    "configuration reloaded: nothing changed"
                )
            }
            Outcome::Applied => tracing::info!(
                trigger = trigger.as_str(),
                generation = report.generation,
                added = %report.added.join(","),
                removed = %report.removed.join(","),
                rebuilt = %report.rebuilt.join(","),
                kept = %report.kept.join(","),
                changed = %report.changed.join(","),
                "configuration reloaded"
            ),
        }
        if !report.restart_required.is_empty() {
            tracing::warn!(keys = %report.restart_required.join(","), "configuration keys changed that take effect only after a restart");
        }
        if report.outcome != Outcome::Invalid {
            self.metrics.config_restart_required.set(report.restart_required.len() as i64);
        }
        if let Ok(mut last) = self.reloads.last.write() {
            *last = Some(report.clone());
        }
        report
    }

    /// The configuration as the source reads it now, off the runtime's threads (an OpenAPI
    /// document may be mapped).
    async fn load(&self) -> anyhow::Result<Config> {
        let source = self.reloads.source.get().cloned().ok_or_else(|| {
            anyhow::anyhow!("this gateway was not started from a configuration it can re-read")
        })?;
        tokio::task::spawn_blocking(move || source())
            .await
            .map_err(|e| anyhow::anyhow!("reading the configuration: {e}"))?
    }

    /// Builds everything `new` needs, then swaps it in; an error changes nothing.
    async fn apply(self: &Arc<Self>, new: Config, trigger: Trigger) -> anyhow::Result<Report> {
        let current = self.settings();
        let running = current.config.clone();
        let (new, restart_required) = keep_restart_only(&running, new);
        crate::registry::url_policy::validate(&new.registry.upstream_urls)?;
        let mut changed = changed_sections(&running, &new);
        // A tools file or an OpenAPI document is read at load, not written in the file: one
        // whose contents changed is a change of its server.
        let contents_changed = new.servers.keys().any(|name| !same_server(&running, &new, name));
        if contents_changed && !changed.iter().any(|section| section == "servers") {
            changed.push("servers".into());
            changed.sort();
        }
        let mut report = Report {
            outcome: Outcome::Unchanged,
            trigger,
            at: std::time::SystemTime::now(),
            generation: current.generation(),
            error: None,
            added: Vec::new(),
            removed: Vec::new(),
            rebuilt: Vec::new(),
            kept: Vec::new(),
            changed: Vec::new(),
            restart_required,
        };
        if changed.is_empty() {
            report.kept = current.upstreams.keys().cloned().collect();
            // The policy file has its own watcher; a signal asks it now too.
            if let Some(policy) = current.policy.clone() {
                let reloaded = tokio::task::spawn_blocking(move || policy.store.reload_if_changed()).await;
                if let Ok(Some(outcome)) = reloaded {
                    self.metrics.policy_reloads.with_label_values(&[outcome]).inc();
                }
            }
            return Ok(report);
        }
        // What cannot start anything first; the server stacks last (a stdio server's child
        // starts with its stack: not for a file refused on a hook or a policy).
        let hooks = crate::guardrail::Hooks::new(&new.hooks)?;
        let quotas = match same(&running.quotas, &new.quotas) {
            true => current.quotas.clone(),
            false => crate::quota::Quotas::new(
                &new.quotas,
                crate::redis_link::RedisLink::from_config(&new)?,
                &self.metrics,
            ),
        };
        let policy = match same(&running.policy, &new.policy) {
            true => current.policy.clone(),
            false => crate::policy::Policy::start(&new.policy, self.metrics.policy_reloads.clone())?,
        };
        let lambda = match new.servers.values().any(|s| s.transport == crate::config::TransportKind::Lambda) {
            true => Some(self.lambda_client.get_or_init(|| upstreams::lambda_client(&new)).await.clone()),
            false => None,
        };
        let mut stacks: BTreeMap<String, Arc<Upstream>> = BTreeMap::new();
        let mut built: Vec<Arc<Upstream>> = Vec::new();
        for (name, server) in &new.servers {
            match current.upstreams.get(name) {
                Some(old) if same_server(&running, &new, name) => {
                    report.kept.push(name.clone());
                    stacks.insert(name.clone(), old.clone());
                    continue;
                }
                Some(_) => report.rebuilt.push(name.clone()),
                None => report.added.push(name.clone()),
            }
            let stack = Arc::new(upstreams::build(name, server, &new, &self.metrics, lambda.as_ref())?);
            if let (Some(pins), Some(openapi)) = (&self.pins, &stack.openapi) {
                openapi.attach_pins(pins.clone());
            }
            built.push(stack.clone());
            stacks.insert(name.clone(), stack);
        }
        report.removed =
            current.upstreams.keys().filter(|name| !new.servers.contains_key(*name)).cloned().collect();

        // Nothing below fails: the new generation goes in whole.
        let generation = current.generation() + 1;
        report.generation = generation;
        report.changed = changed;
        let routes = new
            .tools
            .iter()
            .filter_map(|(tool, settings)| Some((tool.clone(), settings.server.clone()?)))
            .collect();
        let overrides =
            new.tools.iter().map(|(name, settings)| (name.clone(), settings.overrides())).collect();
        let prefixes = new.servers.iter().map(|(name, server)| (name.clone(), server.prefix)).collect();
        self.catalog().reconfigure(routes, prefixes, overrides, &new.catalogue.search);
        let configured_before: Vec<String> = current.upstreams.keys().cloned().collect();
        self.federation.reconfigure(&new, &configured_before);
        let retiring: Vec<Arc<Upstream>> = current
            .upstreams
            .iter()
            .filter(|(name, old)| stacks.get(*name).is_none_or(|now| !Arc::ptr_eq(now, old)))
            .map(|(_, old)| old.clone())
            .collect();
        let settings = Settings::new(Parts {
            endpoints: Endpoints::new(&new.endpoints),
            config: Arc::new(new),
            upstreams: stacks,
            hooks,
            quotas,
            policy,
            generation,
        });
        let old = Arc::downgrade(&current);
        drop(current);
        self.settings.store(Arc::new(settings));
        self.metrics.config_generation.set(generation as i64);
        // Registry origins were checked against the old configuration: checked again.
        if let Ok(mut refused) = self.refused_origins.write() {
            refused.clear();
        }
        if let Ok(mut accepted) = self.accepted_borrows.write() {
            accepted.clear();
        }
        for stack in &built {
            if let Some(shared) = &self.shared_breakers {
                shared.register(&stack.breaker);
            }
            self.start_server_loops(stack);
        }
        for name in &report.removed {
            if let Some(shared) = &self.shared_breakers {
                shared.unregister(name);
            }
        }
        for stack in retiring {
            self.retire(stack, old.clone(), &running);
        }
        report.outcome = Outcome::Applied;
        // In force when the reload answers: the catalogue under the new control, without the
        // removed servers' tools; then the refresh reads every list anew.
        self.rebuild_catalogue_after_reload().await;
        self.reloads.applied.notify_one();
        Ok(report)
    }

    /// Retires a removed or replaced server stack once no call can still be using it: when
    /// the settings that held it are gone (every call that took them has ended), or at the
    /// latest after the server's deadline (no call on it outlives that). Then its loops end,
    /// its persistent connection stops (a stdio child is stopped) and its session is closed.
    /// A removed server's gauges are removed then too, unless a later reload configured the
    /// name again.
    fn retire(self: &Arc<Self>, stack: Arc<Upstream>, old: Weak<Settings>, running: &Config) {
        let bound = stack.config.deadline(&running.defaults) + Duration::from_secs(1);
        let stop_grace = Duration::from_millis(running.defaults.stdio_stop_grace_ms) + Duration::from_secs(2);
        let gateway = Arc::downgrade(self);
        tokio::spawn(async move {
            let until = Instant::now() + bound;
            while old.strong_count() > 0 && Instant::now() < until {
                tokio::time::sleep(RETIRE_POLL).await;
            }
            stack.retirement.retire();
            if let Some(connection) = &stack.connection {
                connection.shutdown(stop_grace).await;
            }
            if let Some(http) = &stack.http {
                http.close().await;
            }
            tracing::info!(server = %stack.name, transport = stack.transport.as_str(), "server stack retired after a reload");
            if let Some(gateway) = gateway.upgrade()
                && gateway.configured_upstream(&stack.name).is_none()
            {
                let states = crate::upstream::connection::ConnectionState::ALL.map(|s| s.as_str());
                gateway.metrics.forget_server(&stack.name, &states);
            }
        });
    }
}

/// Whether server `name` is configured alike in both (its own table and the defaults it falls
/// back to, its tools file's and OpenAPI document's contents as loaded).
fn same_server(running: &Config, new: &Config, name: &str) -> bool {
    let (Some(a), Some(b)) = (running.servers.get(name), new.servers.get(name)) else { return false };
    same(a, b)
        && same(&running.defaults, &new.defaults)
        && a.file_tools == b.file_tools
        && match (&a.openapi_document, &b.openapi_document) {
            (Some(a), Some(b)) => a.list == b.list && a.server_url == b.server_url && a.schemes == b.schemes,
            (a, b) => a.is_none() && b.is_none(),
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerConfig, TransportKind};

    fn with_server(server: ServerConfig) -> Config {
        let mut config = Config::default();
        config.servers.insert("catalog".into(), server);
        config
    }

    fn http() -> ServerConfig {
        ServerConfig::new(TransportKind::Http, Some("http://127.0.0.1:9/mcp".into()), None, None)
    }

    #[test]
    fn a_server_is_kept_only_when_nothing_it_is_built_from_changed() {
        let running = with_server(http());
        assert!(same_server(&running, &with_server(http()), "catalog"), "identical: kept");

        let mut timeout = http();
        timeout.timeout_ms = Some(2_000);
        assert!(!same_server(&running, &with_server(timeout), "catalog"), "its own timeout: rebuilt");

        let mut defaults = with_server(http());
        defaults.defaults.timeout_ms += 1;
        assert!(!same_server(&running, &defaults, "catalog"), "the defaults it falls back on: rebuilt");

        let mut file_tools = http();
        file_tools.file_tools = vec![json!({"name": "lookup", "inputSchema": {"type": "object"}})];
        assert!(
            !same_server(&running, &with_server(file_tools), "catalog"),
            "its tools file's contents: rebuilt"
        );

        assert!(!same_server(&running, &Config::default(), "catalog"), "removed: not the same");
    }
}
