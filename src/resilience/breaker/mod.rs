//! Per-server circuit breaker: closed → open → half-open → closed. This file is the breaker
//! itself (its settings, metrics, and what it reports); its jobs, by file:
//! - [`state`]: the state machine: admitting calls, recording outcomes, opening and closing;
//! - [`probing`]: what the health prober ([`super::health_probe`]) asks of it;
//! - [`fleet`]: what the other instances hear and send ([`super::shared`]);
//! - [`operator`]: an operator's forced open and close;
//! - [`layer`]: the tower layer that puts it in the call stack.
//!
//! It trips on either `consecutive_failures` hard failures in a row (a dead server is noticed
//! in a handful of calls) or a failure rate over a sliding window once `min_calls` calls are
//! in it (a half-broken busy server is noticed without tripping on noise). While open, calls
//! are refused at once with the time left; after a jittered backoff that doubles on every
//! failed probe, exactly `half_open_probes` calls go through; success closes, failure reopens.
//!
//! What counts is decided by [`Outcome::attribution`] (the attribution table of docs/resilience.md): only
//! hard failures (connect errors, resets, attempt timeouts, 5xx, Lambda `Unhandled`) count in
//! a row; rate limiting counts toward the rate only; tool errors, invalid params and unknown
//! tools are successes of the server; calls the gateway shed and calls whose caller stopped
//! waiting count as nothing at all — a shed or abandoned probe frees its slot, it never closes
//! or re-opens the circuit.
//!
//! [`Outcome::attribution`]: super::classify::Outcome::attribution

mod fleet;
mod layer;
mod operator;
mod probing;
mod state;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use prometheus::{IntCounter, IntCounterVec, IntGauge};
use serde_json::{Value, json};

use self::state::Bucket;
pub use self::{
    layer::BreakerLayer,
    state::{Admission, State},
};
use crate::config::BreakerSettings;

/// What the breaker's jobs share, behind one lock: its state and counts, and the flags the
/// operator, the fleet and the health prober set.
#[derive(Debug)]
struct Inner {
    state: State,
    consecutive: u32,
    buckets: Vec<Bucket>,
    /// The open period used at the next trip.
    backoff: Duration,
    /// Set by an operator: the breaker stays open until closed by hand.
    forced_open: bool,
    /// The fleet's state store is reachable: a probe needs a fleet-wide claim first.
    claims_needed: bool,
    /// The fleet granted this instance the next probe.
    probe_granted: bool,
    /// A call arrived after the open period: this instance would like to probe.
    wants_probe: bool,
    /// When the breaker last left closed (wall clock, for `/capabilities`); `None` while closed.
    left_closed_at: Option<SystemTime>,
    /// A peer's health probe succeeded: this instance's prober probes at once, unclaimed.
    peer_recovered: bool,
    /// Why it is not closed, in words for an operator (`None` while closed): what tripped it,
    /// a failed probe, an operator, a peer.
    reason: Option<String>,
}

/// A change the other instances of the fleet should hear about (shared breaker state).
/// A failed probe is deliberately not one of them: it re-opens this instance only, so an
/// instance whose own path to the server is broken cannot keep the fleet away from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Tripped from closed by this instance's own counts: the fleet stays away until then.
    Tripped { until: Instant },
    /// This instance's probe succeeded: the server is back.
    Recovered,
    /// An operator opened the breaker (until closed by hand).
    ForcedOpen,
    /// An operator closed the breaker.
    ForcedClosed,
}

/// Where transitions go when breaker state is shared across instances.
pub type TransitionSender = tokio::sync::mpsc::UnboundedSender<(Arc<str>, Transition)>;

/// Metric handles of one server's breaker.
#[derive(Clone)]
pub struct BreakerMetrics {
    pub state: IntGauge,
    pub transitions: IntCounterVec,
    pub rejected: IntCounter,
}

/// The breaker of one upstream server.
pub struct Breaker {
    pub server: Arc<str>,
    settings: BreakerSettings,
    epoch: Instant,
    inner: Mutex<Inner>,
    metrics: BreakerMetrics,
    /// Receives transitions for the shared store; `None` without sharing.
    notify: Mutex<Option<TransitionSender>>,
    /// Wakes the health prober: the breaker opened, or a peer recovered the server.
    wake_prober: tokio::sync::Notify,
}

impl Breaker {
    pub fn new(server: Arc<str>, settings: BreakerSettings, metrics: BreakerMetrics) -> Self {
        let buckets = vec![Bucket::default(); settings.window_secs.max(1) as usize];
        let backoff = Duration::from_millis(settings.open_base_ms);
        metrics.state.set(0);
        Self {
            server,
            settings,
            epoch: Instant::now(),
            inner: Mutex::new(Inner {
                state: State::Closed,
                consecutive: 0,
                buckets,
                backoff,
                forced_open: false,
                claims_needed: false,
                probe_granted: false,
                wants_probe: false,
                left_closed_at: None,
                peer_recovered: false,
                reason: None,
            }),
            metrics,
            notify: Mutex::new(None),
            wake_prober: tokio::sync::Notify::new(),
        }
    }

    pub fn settings(&self) -> &BreakerSettings {
        &self.settings
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn state(&self) -> State {
        self.lock().state
    }

    /// State, operator override and since when the breaker is not closed (health summaries).
    pub fn health(&self) -> BreakerHealth {
        let inner = self.lock();
        BreakerHealth { state: inner.state, forced_open: inner.forced_open, since: inner.left_closed_at }
    }

    /// The admin view.
    pub fn report(&self) -> Value {
        let now = Instant::now();
        let inner = self.lock();
        let retry_after_ms = match inner.state {
            State::Open { until } => until.saturating_duration_since(now).as_millis() as u64,
            _ => 0,
        };
        json!({
            "state": inner.state.name(),
            "forced_open": inner.forced_open,
            "reason": inner.reason,
            "since": inner.left_closed_at.map(crate::registry::entry::rfc3339),
            "consecutive_failures": inner.consecutive,
            "next_open_ms": inner.backoff.as_millis() as u64,
            "retry_after_ms": retry_after_ms,
            "fleet_claims": inner.claims_needed,
            "settings": {
                "consecutive_failures": self.settings.consecutive_failures,
                "failure_rate": self.settings.failure_rate,
                "min_calls": self.settings.min_calls,
                "window_secs": self.settings.window_secs,
                "open_base_ms": self.settings.open_base_ms,
                "open_max_ms": self.settings.open_max_ms,
                "half_open_probes": self.settings.half_open_probes,
            },
        })
    }
}

/// What [`Breaker::health`] reports.
#[derive(Debug, Clone, Copy)]
pub struct BreakerHealth {
    pub state: State,
    pub forced_open: bool,
    /// When it left closed (`None` while closed).
    pub since: Option<SystemTime>,
}

/// A breaker for the tests, counting into unregistered metrics.
#[cfg(test)]
fn test_breaker(settings: BreakerSettings) -> Breaker {
    use prometheus::Opts;
    let metrics = BreakerMetrics {
        state: IntGauge::new("s", "s").unwrap(),
        transitions: IntCounterVec::new(Opts::new("t", "t"), &["server", "to"]).unwrap(),
        rejected: IntCounter::new("r", "r").unwrap(),
    };
    Breaker::new("srv".into(), settings, metrics)
}

/// A hard failure of a server that was never reached.
#[cfg(test)]
const DOWN: super::classify::Outcome = super::classify::Outcome::ServerError { reached_server: false };

/// Settings without health probes: callers' calls are the probes.
#[cfg(test)]
fn callers_probe() -> BreakerSettings {
    BreakerSettings { probe_interval_ms: 0, ..Default::default() }
}
