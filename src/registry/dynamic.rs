//! Tools registered outside configuration: looked up memory → Redis → DynamoDB.
//!
//! - A hit below fills the tiers above (DynamoDB → Redis → memory).
//! - Concurrent misses for one name share one fetch ([`crate::singleflight`]); unknown names
//!   are remembered for `negative_ttl_secs` (also when only Redis is configured), so a model
//!   that keeps calling a made-up tool cannot hammer DynamoDB or Redis.
//! - Redis down or slow (calls capped at `redis_timeout_ms`): skipped, counted, never an
//!   error for the caller. DynamoDB down: the last known entry is served (stale-if-error),
//!   and after a failure lookups skip DynamoDB for `dynamodb_backoff_ms` (counted as
//!   `skipped`), serving stale at once instead of each waiting out the tier again; then one
//!   lookup (or the periodic scan) tries again and its success reopens the tier.
//! - Inactive or unhealthy tools are neither resolved nor listed.
//! - A remembered entry carries the tool record built from it ([`Live::record`]), built on
//!   the first call and dropped with the entry (expiry, invalidation, a newer entry): calls
//!   to a registry-only tool do not hash its schema and definition again on every call. The
//!   record depends only on the entry (its compiled schema is shared by hash), not on the
//!   catalogue's generation, so it stays right across catalogue rebuilds.
//!
//! The full catalogue of active tools is also read periodically (see `gateway::refresh`) into
//! the in-memory catalogue; this module serves the names that appeared since.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
    time::{Duration, Instant},
};

use prometheus::IntCounterVec;
use serde_json::{Value, json};

use super::{TierError, ToolRecord, dynamodb::DynamoStore, entry::RegistryEntry, redis_tier::RedisStore};
use crate::{
    config::RegistryConfig,
    singleflight::{Join, SingleFlight, Waited},
};

struct Remembered {
    /// `None`: known not to exist (negative entry).
    entry: Option<Arc<Live>>,
    stored: Instant,
}

/// A live registry entry as the memory tier holds it, with the tool record built from it.
#[derive(Debug)]
pub struct Live {
    pub entry: RegistryEntry,
    record: OnceLock<Arc<ToolRecord>>,
}

impl Live {
    pub fn new(entry: RegistryEntry) -> Arc<Self> {
        Arc::new(Self { entry, record: OnceLock::new() })
    }

    /// The entry's tool record, built once (by `build`) for the life of this entry.
    pub fn record(&self, build: impl FnOnce(&RegistryEntry) -> ToolRecord) -> Arc<ToolRecord> {
        self.record.get_or_init(|| Arc::new(build(&self.entry))).clone()
    }
}

/// Reachability of a tier as last seen: unknown, up, down.
#[derive(Default)]
struct Health(AtomicU8);

impl Health {
    fn set(&self, up: bool) {
        self.0.store(if up { 1 } else { 2 }, Ordering::Relaxed);
    }

    fn label(&self) -> &'static str {
        match self.0.load(Ordering::Relaxed) {
            1 => "reachable",
            2 => "unreachable",
            _ => "not yet used",
        }
    }
}

/// Lookups' view of DynamoDB after a failure: skipped until `retry_at`, then one lookup at a
/// time probes it.
#[derive(Default)]
struct Backoff {
    retry_at: Mutex<Option<Instant>>,
    probing: AtomicBool,
}

/// Permission to call the tier; a probe's claim is released on drop.
struct Admitted<'a> {
    probe: Option<&'a AtomicBool>,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if let Some(probing) = self.probe {
            probing.store(false, Ordering::Release);
        }
    }
}

impl Backoff {
    fn retry_at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.retry_at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `None`: skip the tier (backing off, or another lookup is probing it).
    fn admit(&self) -> Option<Admitted<'_>> {
        match *self.retry_at() {
            None => Some(Admitted { probe: None }),
            Some(at) if Instant::now() < at => None,
            Some(_) => self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
                .then_some(Admitted { probe: Some(&self.probing) }),
        }
    }

    fn failed(&self, period: Duration) {
        *self.retry_at() = Some(Instant::now() + period);
    }

    fn succeeded(&self) {
        *self.retry_at() = None;
    }
}

/// The Redis and DynamoDB tiers behind the in-memory catalogue.
pub struct DynamicRegistry {
    pub redis: Option<RedisStore>,
    pub dynamo: Option<DynamoStore>,
    settings: RegistryConfig,
    memory: Mutex<HashMap<String, Remembered>>,
    fetching: SingleFlight<Option<Arc<Live>>>,
    lookups: IntCounterVec,
    redis_health: Health,
    dynamo_health: Health,
    dynamo_backoff: Backoff,
}

impl DynamicRegistry {
    pub fn new(
        redis: Option<RedisStore>,
        dynamo: Option<DynamoStore>,
        settings: RegistryConfig,
        lookups: IntCounterVec,
    ) -> Self {
        Self {
            redis,
            dynamo,
            settings,
            memory: Mutex::default(),
            fetching: SingleFlight::default(),
            lookups,
            redis_health: Health::default(),
            dynamo_health: Health::default(),
            dynamo_backoff: Backoff::default(),
        }
    }

    fn count(&self, tier: &str, result: &str) {
        self.lookups.with_label_values(&[tier, result]).inc();
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<String, Remembered>> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks a name up below the catalogue. `None`: no live tool of that name.
    pub async fn lookup(&self, name: &str) -> Option<Arc<Live>> {
        let ttl = Duration::from_secs(self.settings.memory_ttl_secs);
        let negative_ttl = Duration::from_secs(self.settings.negative_ttl_secs);
        if let Some(remembered) = self.memory().get(name) {
            let age = remembered.stored.elapsed();
            match &remembered.entry {
                Some(entry) if age < ttl => {
                    self.count("memory", "hit");
                    return Some(entry.clone());
                }
                None if age < negative_ttl => {
                    self.count("memory", "negative");
                    return None;
                }
                _ => {}
            }
        }
        self.count("memory", "miss");
        let mut role = self.fetching.join(name);
        loop {
            match role {
                Join::Leader(leader) => {
                    let fetched = self.fetch(name).await;
                    leader.finish(&fetched);
                    return fetched;
                }
                Join::Follower(follower) => match follower.wait(None).await {
                    Waited::Done(shared) => return shared,
                    // The fetching caller was cancelled: this one fetches instead.
                    Waited::Promoted(leader) => role = Join::Leader(leader),
                    Waited::TimedOut => return None,
                },
            }
        }
    }

    /// Redis, then DynamoDB; fills the tiers above on a hit.
    async fn fetch(&self, name: &str) -> Option<Arc<Live>> {
        let mut redis_answered = false;
        if let Some(redis) = &self.redis {
            match redis.get(name).await {
                Ok(Some(entry)) if entry.is_live() => {
                    self.redis_health.set(true);
                    self.count("redis", "hit");
                    let live = Live::new(entry);
                    self.remember(name, Some(live.clone()));
                    return Some(live);
                }
                Ok(_) => {
                    self.redis_health.set(true);
                    self.count("redis", "miss");
                    redis_answered = true;
                }
                Err(e) => {
                    self.redis_health.set(false);
                    self.count("redis", "error");
                    tracing::warn!(error = %e, "registry: Redis skipped");
                }
            }
        }
        let Some(dynamo) = &self.dynamo else {
            // Redis is the last tier: its "no such tool" is remembered like DynamoDB's.
            if redis_answered {
                self.remember(name, None);
            }
            return None;
        };
        let Some(_admitted) = self.dynamo_backoff.admit() else {
            self.count("dynamodb", "skipped");
            return self.stale(name);
        };
        match dynamo.get(name).await {
            Ok(Some(entry)) if entry.is_live() => {
                self.dynamo_backoff.succeeded();
                self.dynamo_health.set(true);
                self.count("dynamodb", "hit");
                if let Some(redis) = &self.redis
                    && redis.set(&entry).await.is_err()
                {
                    self.count("redis", "error");
                }
                let live = Live::new(entry);
                self.remember(name, Some(live.clone()));
                Some(live)
            }
            Ok(_) => {
                self.dynamo_backoff.succeeded();
                self.dynamo_health.set(true);
                self.count("dynamodb", "miss");
                self.remember(name, None);
                None
            }
            Err(e) => {
                self.dynamo_failed();
                self.count("dynamodb", "error");
                tracing::warn!(error = %e, tool = name, "registry: DynamoDB unreachable; serving the last known entry if any");
                self.stale(name)
            }
        }
    }

    /// The last known entry of a name, when DynamoDB cannot be asked.
    fn stale(&self, name: &str) -> Option<Arc<Live>> {
        let stale = self.memory().get(name).and_then(|r| r.entry.clone());
        if stale.is_some() {
            self.count("memory", "stale");
        }
        stale
    }

    fn dynamo_failed(&self) {
        self.dynamo_health.set(false);
        self.dynamo_backoff.failed(Duration::from_millis(self.settings.dynamodb_backoff_ms));
    }

    fn remember(&self, name: &str, entry: Option<Arc<Live>>) {
        let mut memory = self.memory();
        if memory.len() >= self.settings.memory_max_entries.max(1) && !memory.contains_key(name) {
            // Bounded: drop the oldest entry.
            if let Some(oldest) = memory.iter().min_by_key(|(_, r)| r.stored).map(|(k, _)| k.clone()) {
                memory.remove(&oldest);
            }
        }
        memory.insert(name.to_string(), Remembered { entry, stored: Instant::now() });
    }

    /// Forgets a name (another gateway or the CLI changed it).
    pub fn invalidate(&self, name: &str) {
        self.memory().remove(name);
    }

    /// Every active, healthy tool in DynamoDB (all pages), written to Redis in one pipeline.
    pub async fn scan(&self) -> Result<Vec<RegistryEntry>, TierError> {
        let Some(dynamo) = &self.dynamo else {
            return Ok(Vec::new());
        };
        let entries = match dynamo.scan_active(|_| {}).await {
            Ok(entries) => {
                self.dynamo_health.set(true);
                self.dynamo_backoff.succeeded();
                entries
            }
            Err(e) => {
                self.dynamo_failed();
                return Err(e);
            }
        };
        let live: Vec<RegistryEntry> = entries.into_iter().filter(RegistryEntry::is_live).collect();
        if let Some(redis) = &self.redis {
            match redis.set_all(&live).await {
                Ok(()) => self.redis_health.set(true),
                Err(e) => {
                    self.redis_health.set(false);
                    self.count("redis", "error");
                    tracing::warn!(error = %e, "registry: Redis not updated by the refresh");
                }
            }
        }
        Ok(live)
    }

    /// A fresh read of one name from DynamoDB (after an invalidation).
    pub async fn reload(&self, name: &str) -> Result<Option<RegistryEntry>, TierError> {
        self.invalidate(name);
        let Some(dynamo) = &self.dynamo else { return Ok(None) };
        let entry = dynamo.get(name).await?.filter(RegistryEntry::is_live);
        if let Some(entry) = &entry {
            self.remember(name, Some(Live::new(entry.clone())));
        }
        Ok(entry)
    }

    /// `/readyz` view of the tiers.
    pub fn report(&self) -> Value {
        json!({
            "redis": if self.redis.is_some() { self.redis_health.label() } else { "not configured" },
            "dynamodb": if self.dynamo.is_some() { self.dynamo_health.label() } else { "not configured" },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_failure_the_tier_is_skipped_then_probed_by_one_lookup_at_a_time() {
        let backoff = Backoff::default();
        assert!(backoff.admit().is_some_and(|a| a.probe.is_none()), "healthy: every lookup goes");
        backoff.failed(Duration::from_secs(3600));
        assert!(backoff.admit().is_none(), "backing off: skipped, stale served");
        backoff.failed(Duration::ZERO);
        let probe = backoff.admit().expect("back-off over: one lookup probes");
        assert!(backoff.admit().is_none(), "while it probes, the others are skipped");
        drop(probe);
        let probe = backoff.admit().expect("a probe that ended without an answer frees the claim");
        backoff.succeeded();
        drop(probe);
        assert!(backoff.admit().is_some_and(|a| a.probe.is_none()), "a success reopens the tier");
    }
}
