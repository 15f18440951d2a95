//! Quotas: how many calls a caller may make per window, and how many it may have in flight,
//! per (caller, tool) or per (caller, server) — for the whole fleet of gateways at once.
//!
//! A call is checked after its tool resolves (so its server is known) and before the resilience
//! stack: a call over a quota never reaches a breaker or an upstream, and is answered
//! `rate_limited` (`-32003`) with `retry_after_ms`. Every `[[quotas.rules]]` entry that applies
//! to the call (by tool, server and subject) is checked in order; the first that refuses
//! decides, and concurrency slots already taken for the earlier rules are given back.
//!
//! Where the decision is made:
//! - **Redis** (`redis_url` configured and answering): one Lua script per rule and call
//!   ([`fleet`]): GCRA for the rate, a sorted set of leases for concurrency, both read and
//!   written atomically with Redis's own clock, so every instance sees the same allowance.
//!   A concurrency slot is given back with a second command (`ZREM`) when the call ends; a
//!   gateway that dies leaves its leases to expire after `quotas.lease_ms`. A fast rate-only
//!   rule takes a batch of calls per decision and spends it locally ([`batches`]): one round
//!   trip per `quotas.fleet_batch_ms` of its rate instead of one per call.
//! - **Locally** ([`local`]): the same algorithms in memory, per instance, when no Redis is
//!   configured, or while Redis errors or times out (then for `quotas.redis_retry_ms` before
//!   Redis is tried again). Each instance then enforces every quota alone, so a fleet of N
//!   may allow up to N times a quota until Redis is back; local state is not carried over to
//!   Redis. `mcp_gateway_quota_local_decisions_total{quota}` and
//!   `mcp_gateway_quota_redis_available` say when this happens.
//!
//! Keys never hold a subject: `mcpgw:q:{<quota>:<sha256(subject)[..16]>:<tool|server>}:rate`
//! (and `:conc`); the braces keep both keys of a decision in one Redis Cluster slot.

pub mod batches;
pub mod fleet;
pub mod local;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    config::{QuotaScope, QuotasConfig},
    error::{Category, GatewayError},
    redis_link::RedisLink,
    telemetry::metrics::Metrics,
};

/// The `retry_after_ms` hint of a concurrency refusal: a slot frees when some call ends,
/// which the gateway cannot predict; callers should retry soon, with backoff.
pub const CONCURRENCY_RETRY_HINT: Duration = Duration::from_millis(100);

/// Which limit of a quota refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Rate,
    Concurrency,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Rate => "rate",
            Limit::Concurrency => "concurrency",
        }
    }
}

/// A call refused by a quota.
#[derive(Debug, Clone)]
pub struct Denial {
    pub quota: Arc<str>,
    pub limit: Limit,
    pub retry_after: Duration,
}

impl Denial {
    /// The JSON-RPC error of the refusal (`rate_limited`, never sent upstream).
    pub fn to_error(&self) -> GatewayError {
        let what = match self.limit {
            Limit::Rate => "calls per window",
            Limit::Concurrency => "calls in flight",
        };
        GatewayError::new(Category::RateLimited, format!("quota {} exceeded ({what})", self.quota))
            .with_retry_after(Some(self.retry_after.max(Duration::from_millis(1))))
            .with_extra("quota", serde_json::json!({"name": &*self.quota, "limit": self.limit.as_str()}))
    }
}

/// The limits of one rule, in the units both deciders use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Milliseconds between two calls at the sustained rate (0: no rate limit).
    pub emission_ms: f64,
    /// How far ahead of the sustained rate a caller may be (`(burst - 1) * emission_ms`).
    pub tolerance_ms: f64,
    /// Calls in flight at once (0: no limit).
    pub max_concurrent: u64,
}

/// Most calls one fleet decision may grant (`quotas.fleet_batch_ms`).
pub const MAX_BATCH: u64 = 1024;

struct Rule {
    name: Arc<str>,
    scope: QuotaScope,
    match_tool: Option<String>,
    match_server: Option<String>,
    subjects: HashSet<String>,
    limits: Limits,
    /// Calls one Redis decision may grant (1: call by call).
    batch: u64,
    counters: RuleCounters,
}

/// How many calls of `limits` one fleet decision may grant: `batch_ms` of the sustained rate,
/// for a rule with a rate and no concurrency limit (a lease is per call), else 1.
pub fn batch_size(limits: &Limits, batch_ms: u64) -> u64 {
    if limits.max_concurrent > 0 || limits.emission_ms <= 0.0 || batch_ms == 0 {
        return 1;
    }
    ((batch_ms as f64 / limits.emission_ms).floor() as u64).clamp(1, MAX_BATCH)
}

impl Rule {
    fn applies(&self, subject: &str, tool: &str, server: &str) -> bool {
        self.match_tool.as_deref().is_none_or(|p| glob(p, tool))
            && self.match_server.as_deref().is_none_or(|p| glob(p, server))
            && (self.subjects.is_empty() || self.subjects.contains(subject))
    }
}

/// One rule's counters (labels: quota names only), resolved once.
struct RuleCounters {
    rejected_rate: prometheus::IntCounter,
    rejected_concurrency: prometheus::IntCounter,
    local: prometheus::IntCounter,
    redis: prometheus::IntCounter,
    batched: prometheus::IntCounter,
}

impl RuleCounters {
    fn of(name: &str, metrics: &Metrics) -> Self {
        Self {
            rejected_rate: metrics.quota_rejections.with_label_values(&[name, Limit::Rate.as_str()]),
            rejected_concurrency: metrics
                .quota_rejections
                .with_label_values(&[name, Limit::Concurrency.as_str()]),
            local: metrics.quota_local_decisions.with_label_values(&[name]),
            redis: metrics.quota_redis_decisions.with_label_values(&[name]),
            batched: metrics.quota_batched_decisions.with_label_values(&[name]),
        }
    }

    fn rejected(&self, limit: Limit) -> &prometheus::IntCounter {
        match limit {
            Limit::Rate => &self.rejected_rate,
            Limit::Concurrency => &self.rejected_concurrency,
        }
    }
}

/// Every quota of a gateway.
pub struct Quotas {
    rules: Vec<Rule>,
    local: Arc<local::LocalQuotas>,
    fleet: Option<Arc<fleet::Fleet>>,
    batches: batches::Batches,
    lease: Duration,
    instance: Arc<str>,
    next_lease: AtomicU64,
    /// Subjects' key hashes, remembered (a SHA-256 per call otherwise); bounded like the local
    /// state, started afresh when full.
    subject_hashes: Mutex<HashMap<Arc<str>, Arc<str>, foldhash::quality::RandomState>>,
    max_subjects: usize,
}

/// Slots held by a call that passed its quotas: given back when dropped (the call ended).
#[derive(Default)]
pub struct QuotaPermit {
    leases: Vec<Lease>,
}

enum Lease {
    Local { local: Arc<local::LocalQuotas>, key: String },
    Fleet { fleet: Arc<fleet::Fleet>, key: String, member: String },
}

impl Drop for Lease {
    fn drop(&mut self) {
        match self {
            Lease::Local { local, key } => local.release(key),
            Lease::Fleet { fleet, key, member } => {
                fleet.release(std::mem::take(key), std::mem::take(member));
            }
        }
    }
}

impl Quotas {
    /// The quotas of `config` (`None` when there is no rule: a call then pays nothing).
    pub fn new(config: &QuotasConfig, link: Option<RedisLink>, metrics: &Metrics) -> Option<Arc<Self>> {
        if config.rules.is_empty() {
            return None;
        }
        let rules: Vec<Rule> = config
            .rules
            .iter()
            .map(|r| {
                let emission_ms =
                    if r.rate == 0 { 0.0 } else { r.window_secs as f64 * 1000.0 / r.rate as f64 };
                let limits = Limits {
                    emission_ms,
                    tolerance_ms: r.burst().saturating_sub(1) as f64 * emission_ms,
                    max_concurrent: r.max_concurrent,
                };
                Rule {
                    name: r.name.as_str().into(),
                    scope: r.scope,
                    match_tool: r.match_tool.clone(),
                    match_server: r.match_server.clone(),
                    subjects: r.subjects.iter().cloned().collect(),
                    batch: batch_size(&limits, config.fleet_batch_ms),
                    limits,
                    counters: RuleCounters::of(&r.name, metrics),
                }
            })
            .collect();
        let fleet = link.map(|link| {
            fleet::Fleet::start(
                link,
                Duration::from_millis(config.redis_timeout_ms),
                Duration::from_millis(config.redis_retry_ms),
                metrics.quota_redis_available.clone(),
                metrics.shared_state_errors.clone(),
            )
        });
        Some(Arc::new(Self {
            rules,
            local: Arc::new(local::LocalQuotas::new(config.local_max_keys)),
            fleet,
            batches: batches::Batches::new(
                config.local_max_keys,
                Duration::from_millis(config.fleet_batch_ms),
            ),
            lease: Duration::from_millis(config.lease_ms),
            instance: format!("{}-{:08x}", std::process::id(), fastrand::u32(..)).into(),
            next_lease: AtomicU64::new(0),
            subject_hashes: Mutex::default(),
            max_subjects: config.local_max_keys,
        }))
    }

    /// Checks a call of `subject` to `tool` on `server` against every rule that applies; the
    /// permit holds the call's concurrency slots until dropped.
    pub async fn check(&self, subject: &str, tool: &str, server: &str) -> Result<QuotaPermit, Denial> {
        let mut permit = QuotaPermit::default();
        let mut subject_hash: Option<Arc<str>> = None;
        for rule in self.rules.iter().filter(|r| r.applies(subject, tool, server)) {
            let hash = subject_hash.get_or_insert_with(|| self.subject_hash(subject));
            let target = match rule.scope {
                QuotaScope::Tool => tool,
                QuotaScope::Server => server,
            };
            let key = key(&rule.name, hash, target);
            match self.decide(rule, key).await {
                Ok(Some(lease)) => permit.leases.push(lease),
                Ok(None) => {}
                Err(limit) => {
                    let (limit, retry_after) = limit;
                    rule.counters.rejected(limit).inc();
                    // `permit` drops here: slots taken for earlier rules are given back.
                    return Err(Denial { quota: rule.name.clone(), limit, retry_after });
                }
            }
        }
        Ok(permit)
    }

    /// `hash_subject(subject)`, remembered.
    fn subject_hash(&self, subject: &str) -> Arc<str> {
        let mut known = self.subject_hashes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hash) = known.get(subject) {
            return hash.clone();
        }
        if known.len() >= self.max_subjects {
            known.clear();
        }
        let hash: Arc<str> = hash_subject(subject).into();
        known.insert(subject.into(), hash.clone());
        hash
    }

    /// One rule's decision: from a batch Redis granted earlier, else in Redis when it answers,
    /// else locally.
    async fn decide(&self, rule: &Rule, key: String) -> Result<Option<Lease>, (Limit, Duration)> {
        if let Some(fleet) = &self.fleet {
            if rule.batch > 1 && self.batches.spend(&key, Instant::now()) {
                rule.counters.batched.inc();
                return Ok(None);
            }
            let member = if rule.limits.max_concurrent > 0 {
                let n = self.next_lease.fetch_add(1, Ordering::Relaxed);
                format!("{}:{n}", self.instance)
            } else {
                String::new()
            };
            let asked_at = Instant::now();
            if let Some(verdict) = fleet.decide(&key, &rule.limits, self.lease, &member, rule.batch).await {
                rule.counters.redis.inc();
                return match verdict {
                    Ok(_) if rule.limits.max_concurrent > 0 => {
                        Ok(Some(Lease::Fleet { fleet: fleet.clone(), key, member }))
                    }
                    Ok(granted) => {
                        // This call spends one; the rest wait for the next calls of the key.
                        self.batches.keep(key, granted.saturating_sub(1), asked_at);
                        Ok(None)
                    }
                    Err(refused) => Err(refused),
                };
            }
        }
        rule.counters.local.inc();
        match self.local.decide(&key, &rule.limits) {
            Ok(true) => Ok(Some(Lease::Local { local: self.local.clone(), key })),
            Ok(false) => Ok(None),
            Err(refused) => Err(refused),
        }
    }
}

/// The Redis (and local) key base of a rule's allowance for one caller and tool or server.
pub fn key(quota: &str, subject_hash: &str, target: &str) -> String {
    format!("mcpgw:q:{{{quota}:{subject_hash}:{target}}}")
}

pub use crate::redact::hash_subject;

/// `pattern` with `*` matching any run of characters (every other character literally).
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QuotaRule;

    #[test]
    fn globs_match_exact_names_and_stars() {
        assert!(glob("price_lookup", "price_lookup"));
        assert!(!glob("price_lookup", "price_lookups"));
        assert!(glob("price_*", "price_lookup"));
        assert!(glob("*", ""));
        assert!(glob("*_lookup", "price_lookup"));
        assert!(glob("p*e*p", "price_lookup"));
        assert!(!glob("p*x", "price_lookup"));
        assert!(glob("a*b*c", "aXbYbZc"));
    }

    fn quotas(rules: Vec<QuotaRule>) -> Arc<Quotas> {
        let config = QuotasConfig { rules, ..QuotasConfig::default() };
        config.validate().unwrap();
        Quotas::new(&config, None, &Metrics::new()).unwrap()
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    #[test]
    fn distinct_subjects_have_distinct_allowances_and_keys_hold_no_subject() {
        let q = quotas(vec![QuotaRule {
            name: "per-tool".into(),
            rate: 2,
            window_secs: 3600,
            ..QuotaRule::default()
        }]);
        block_on(async {
            for subject in ["alice", "bob"] {
                assert!(q.check(subject, "lookup", "catalog").await.is_ok());
                assert!(q.check(subject, "lookup", "catalog").await.is_ok());
                let denied = q.check(subject, "lookup", "catalog").await.err().expect("third call refused");
                assert_eq!((&*denied.quota, denied.limit), ("per-tool", Limit::Rate));
                assert!(denied.retry_after > Duration::from_secs(1000), "{:?}", denied.retry_after);
            }
            // Per tool: another tool of the same server has its own allowance.
            assert!(q.check("alice", "search", "catalog").await.is_ok());
        });
        let k = key("per-tool", &hash_subject("alice@example.com"), "lookup");
        assert!(!k.contains("alice"), "{k}");
        assert_ne!(hash_subject("alice"), hash_subject("bob"));
    }

    #[test]
    fn server_scope_shares_one_allowance_and_rules_pick_their_callers_and_tools() {
        let q = quotas(vec![
            QuotaRule {
                name: "per-server".into(),
                scope: QuotaScope::Server,
                match_server: Some("cat*".into()),
                subjects: vec!["alice".into()],
                rate: 1,
                window_secs: 3600,
                ..QuotaRule::default()
            },
            QuotaRule {
                name: "checkout".into(),
                match_tool: Some("checkout".into()),
                max_concurrent: 1,
                ..QuotaRule::default()
            },
        ]);
        block_on(async {
            assert!(q.check("alice", "lookup", "catalog").await.is_ok());
            let denied = q.check("alice", "search", "catalog").await.err().expect("same server");
            assert_eq!(&*denied.quota, "per-server");
            assert!(q.check("bob", "search", "catalog").await.is_ok(), "bob is not subject to it");
            assert!(q.check("alice", "lookup", "orders").await.is_ok(), "another server");
            let held = q.check("bob", "checkout", "orders").await.expect("one in flight");
            let denied = q.check("carol", "checkout", "orders").await.err();
            assert!(denied.is_none(), "concurrency is per caller too");
            let denied = q.check("bob", "checkout", "orders").await.err().expect("a second in flight");
            assert_eq!((denied.limit, denied.retry_after), (Limit::Concurrency, CONCURRENCY_RETRY_HINT));
            drop(held);
            assert!(q.check("bob", "checkout", "orders").await.is_ok(), "the slot came back");
        });
    }

    #[test]
    fn only_fast_rate_only_rules_are_batched_and_never_past_the_cap() {
        let rate = |per_sec: f64, max_concurrent| Limits {
            emission_ms: 1000.0 / per_sec,
            tolerance_ms: 0.0,
            max_concurrent,
        };
        assert_eq!(batch_size(&rate(1000.0, 0), 10), 10, "10 ms of 1,000 calls/s");
        assert_eq!(batch_size(&rate(50.0, 0), 10), 1, "slower than a call per 10 ms: call by call");
        assert_eq!(batch_size(&rate(1e8, 0), 10), MAX_BATCH);
        assert_eq!(batch_size(&rate(1000.0, 5), 10), 1, "a concurrency lease is per call");
        assert_eq!(batch_size(&rate(1000.0, 0), 0), 1, "fleet_batch_ms = 0");
        let concurrency_only = Limits { emission_ms: 0.0, tolerance_ms: 0.0, max_concurrent: 3 };
        assert_eq!(batch_size(&concurrency_only, 10), 1);
    }

    #[test]
    fn a_refusal_by_a_later_rule_gives_back_the_slots_of_earlier_ones() {
        let q = quotas(vec![
            QuotaRule { name: "slots".into(), max_concurrent: 1, ..QuotaRule::default() },
            QuotaRule { name: "rate".into(), rate: 1, window_secs: 3600, ..QuotaRule::default() },
        ]);
        block_on(async {
            let first = q.check("anonymous", "t", "s").await.expect("first call");
            drop(first);
            let denied = q.check("anonymous", "t", "s").await.err().expect("rate refuses");
            assert_eq!(&*denied.quota, "rate");
            // The slot taken by `slots` for the refused call is free again: only `rate` refuses.
            let again = q.check("anonymous", "t", "s").await.err().expect("still the rate");
            assert_eq!(&*again.quota, "rate");
        });
    }
}
