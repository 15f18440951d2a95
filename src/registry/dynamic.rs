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
//! - Lookups below memory are budgeted (`[registry.remote_misses]`, a token bucket; a lookup
//!   that finds a tool gives its token back): beyond it a name not in memory is answered
//!   unknown without a Redis GET or DynamoDB GetItem, so a burst of made-up names costs a
//!   bounded number of remote lookups. The memory tier evicts its oldest entry in O(1).
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

use super::{
    TierError, ToolRecord,
    bounds::{Bound, ListKind},
    dynamodb::DynamoStore,
    entry::RegistryEntry,
    redis_tier::RedisStore,
};
use crate::{
    config::RegistryConfig,
    singleflight::{Join, SingleFlight, Waited},
};

struct Remembered {
    /// `None`: known not to exist (negative entry).
    entry: Option<Arc<Live>>,
    stored: Instant,
    /// Position in [`Memory::order`]: an older queue item of the same name is stale.
    seq: u64,
}

/// The memory tier: names in insertion order, so the oldest is evicted in O(1) (amortised)
/// instead of scanning every entry under the lock when the tier is full.
#[derive(Default)]
struct Memory {
    entries: HashMap<Arc<str>, Remembered>,
    /// `(name, seq)`, oldest first; items whose seq no longer matches are skipped.
    order: std::collections::VecDeque<(Arc<str>, u64)>,
    next_seq: u64,
}

impl Memory {
    fn get(&self, name: &str) -> Option<&Remembered> {
        self.entries.get(name)
    }

    fn values(&self) -> impl Iterator<Item = &Remembered> {
        self.entries.values()
    }

    fn remove(&mut self, name: &str) {
        self.entries.remove(name);
        self.compact();
    }

    /// Inserts or replaces `name`; when full, drops the oldest other entry.
    fn insert(&mut self, name: &str, entry: Option<Arc<Live>>, max_entries: usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(existing) = self.entries.get_mut(name) {
            existing.entry = entry;
            existing.stored = Instant::now();
            existing.seq = seq;
            let key = self.entries.get_key_value(name).map(|(k, _)| k.clone());
            if let Some(key) = key {
                self.order.push_back((key, seq));
            }
            self.compact();
            return;
        }
        while self.entries.len() >= max_entries.max(1) {
            let Some((oldest, oldest_seq)) = self.order.pop_front() else { break };
            if self.entries.get(&oldest).is_some_and(|r| r.seq == oldest_seq) {
                self.entries.remove(&oldest);
            }
        }
        let key: Arc<str> = name.into();
        self.order.push_back((key.clone(), seq));
        self.entries.insert(key, Remembered { entry, stored: Instant::now(), seq });
        self.compact();
    }

    /// Drops stale queue items once they outnumber the live ones (O(n) once per n changes).
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|(name, seq)| entries.get(name).is_some_and(|r| r.seq == *seq));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A token bucket of lookups below memory (`[registry.remote_misses]`): a burst of made-up
/// names costs at most `burst` + `per_sec`×seconds Redis GETs / DynamoDB GetItems.
struct MissBudget {
    per_sec: f64,
    burst: f64,
    /// Tokens left and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl MissBudget {
    fn new(settings: &crate::config::RemoteMissBudget) -> Self {
        let burst = f64::from(settings.burst.max(1));
        Self { per_sec: f64::from(settings.per_sec), burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token; `false` when the budget is spent (0 per second: no limit).
    fn try_take(&self) -> bool {
        if self.per_sec <= 0.0 {
            return true;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, counted) = &mut *state;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*counted).as_secs_f64() * self.per_sec).min(self.burst);
        *counted = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A lookup that found a live tool was no miss: its token comes back.
    fn give_back(&self) {
        if self.per_sec <= 0.0 {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 = (state.0 + 1.0).min(self.burst);
    }
}

/// A live registry entry as the memory tier holds it, with the tool record built from it.
#[derive(Debug)]
pub struct Live {
    pub entry: RegistryEntry,
    /// `None` inside: the entry is not served under the name it was looked up by (hidden,
    /// renamed, overrides that do not fit).
    record: OnceLock<Option<Arc<ToolRecord>>>,
}

impl Live {
    pub fn new(entry: RegistryEntry) -> Arc<Self> {
        Arc::new(Self { entry, record: OnceLock::new() })
    }

    /// The entry's tool record, built once (by `build`) for the life of this entry.
    pub fn record(
        &self,
        build: impl FnOnce(&RegistryEntry) -> Option<ToolRecord>,
    ) -> Option<Arc<ToolRecord>> {
        self.record.get_or_init(|| build(&self.entry).map(Arc::new)).clone()
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
        *self.retry_at() = Some(crate::clock::after(period));
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
    memory: Mutex<Memory>,
    fetching: SingleFlight<Option<Arc<Live>>>,
    lookups: IntCounterVec,
    /// Admitted / over-budget lookups below memory.
    remote_lookups: IntCounterVec,
    misses: MissBudget,
    redis_health: Health,
    dynamo_health: Health,
    dynamo_backoff: Backoff,
    /// `defaults.max_tool_definition_bytes` for entries of these tiers (`None`: unbounded).
    definition_bound: Option<DefinitionBound>,
}

/// Entries whose definition is over this many bytes are not served, as a server's list with
/// such a definition is not ([`super::bounds`]).
struct DefinitionBound {
    max_bytes: usize,
    /// `mcp_gateway_catalogue_refusals_total`.
    refusals: IntCounterVec,
}

impl DynamicRegistry {
    pub fn new(
        redis: Option<RedisStore>,
        dynamo: Option<DynamoStore>,
        settings: RegistryConfig,
        lookups: IntCounterVec,
        remote_lookups: IntCounterVec,
    ) -> Self {
        Self {
            redis,
            dynamo,
            misses: MissBudget::new(&settings.remote_misses),
            settings,
            memory: Mutex::default(),
            fetching: SingleFlight::default(),
            lookups,
            remote_lookups,
            redis_health: Health::default(),
            dynamo_health: Health::default(),
            dynamo_backoff: Backoff::default(),
            definition_bound: None,
        }
    }

    /// Entries whose definition takes more than `max_bytes` are refused (logged, counted on
    /// `refusals` under `bound="definition_bytes"`) wherever they are read: lookup, scan, reload.
    pub fn with_definition_bound(mut self, max_bytes: usize, refusals: IntCounterVec) -> Self {
        self.definition_bound = Some(DefinitionBound { max_bytes, refusals });
        self
    }

    /// Whether `entry`'s definition is within the bound.
    fn admits(&self, entry: &RegistryEntry) -> bool {
        let Some(bound) = &self.definition_bound else { return true };
        let bytes = super::bounds::json_len(&entry.definition);
        if bytes <= bound.max_bytes {
            return true;
        }
        tracing::warn!(
            tool = %entry.tool_name,
            server = %entry.server.name,
            bytes,
            limit = bound.max_bytes,
            setting = "defaults.max_tool_definition_bytes",
            "registry entry refused: its definition is over the bound"
        );
        let labels = [entry.server.name.as_str(), ListKind::Tools.as_str(), Bound::DefinitionBytes.as_str()];
        bound.refusals.with_label_values(&labels).inc();
        false
    }

    fn count(&self, tier: &str, result: &str) {
        self.lookups.with_label_values(&[tier, result]).inc();
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
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
                    // Only the fetching caller spends the budget (its followers share the
                    // answer); over budget, the name is unknown without asking below.
                    if !self.misses.try_take() {
                        self.remote_lookups.with_label_values(&["over_budget"]).inc();
                        leader.finish(&None);
                        return None;
                    }
                    self.remote_lookups.with_label_values(&["admitted"]).inc();
                    let fetched = self.fetch(name).await;
                    if fetched.is_some() {
                        self.misses.give_back();
                    }
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
                Ok(Some(entry)) if entry.is_live() && self.admits(&entry) => {
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
                    tracing::warn!(error = %crate::redact::shown(&e), "registry: Redis skipped");
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
            Ok(Some(entry)) if entry.is_live() && self.admits(&entry) => {
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
                tracing::warn!(error = %crate::redact::shown(&e), tool = name, "registry: DynamoDB unreachable; serving the last known entry if any");
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
        // Bounded: the oldest entry goes when full.
        self.memory().insert(name, entry, self.settings.memory_max_entries);
    }

    /// The servers of the live entries memory still holds within their TTL (their stacks are
    /// kept; see `Gateway::prune_registry_upstreams`).
    pub fn fresh_origins(&self) -> Vec<Arc<super::entry::ServerRef>> {
        let ttl = Duration::from_secs(self.settings.memory_ttl_secs);
        self.memory()
            .values()
            .filter(|r| r.stored.elapsed() < ttl)
            .filter_map(|r| r.entry.as_ref())
            .map(|live| Arc::new(live.entry.server.clone()))
            .collect()
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
        let live: Vec<RegistryEntry> =
            entries.into_iter().filter(RegistryEntry::is_live).filter(|e| self.admits(e)).collect();
        if let Some(redis) = &self.redis {
            match redis.set_all(&live).await {
                Ok(()) => self.redis_health.set(true),
                Err(e) => {
                    self.redis_health.set(false);
                    self.count("redis", "error");
                    tracing::warn!(error = %crate::redact::shown(&e), "registry: Redis not updated by the refresh");
                }
            }
        }
        Ok(live)
    }

    /// A fresh read of one name from DynamoDB (after an invalidation).
    pub async fn reload(&self, name: &str) -> Result<Option<RegistryEntry>, TierError> {
        self.invalidate(name);
        let Some(dynamo) = &self.dynamo else { return Ok(None) };
        let entry = dynamo.get(name).await?.filter(RegistryEntry::is_live).filter(|e| self.admits(e));
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
    fn the_memory_tier_evicts_the_oldest_and_keeps_its_queue_bounded() {
        let mut memory = Memory::default();
        for i in 0..10 {
            memory.insert(&format!("t{i}"), None, 4);
        }
        assert_eq!(memory.len(), 4);
        assert!(memory.get("t5").is_none() && memory.get("t6").is_some() && memory.get("t9").is_some());
        // Refreshing a name moves it to the back: it outlives names inserted before it.
        memory.insert("t6", None, 4);
        memory.insert("t10", None, 4);
        assert!(memory.get("t6").is_some() && memory.get("t7").is_none());
        for _ in 0..10_000 {
            memory.insert("t6", None, 4);
        }
        assert!(memory.order.len() <= 2 * memory.len() + 65, "stale queue items are compacted");
        memory.remove("t6");
        assert!(memory.get("t6").is_none());
    }

    #[test]
    fn the_miss_budget_admits_a_burst_then_refuses() {
        let budget = MissBudget::new(&crate::config::RemoteMissBudget { per_sec: 1, burst: 3 });
        let started = Instant::now();
        let admitted = (0..100).filter(|_| budget.try_take()).count();
        // The burst, plus at most what the bucket refilled while the loop ran.
        let refilled = started.elapsed().as_secs_f64().ceil() as usize;
        assert!(admitted >= 3 && admitted <= 3 + refilled, "{admitted}");
        budget.give_back();
        assert!(budget.try_take(), "a found tool's token comes back");
        let unlimited = MissBudget::new(&crate::config::RemoteMissBudget { per_sec: 0, burst: 1 });
        assert!((0..1000).all(|_| unlimited.try_take()));
    }

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
