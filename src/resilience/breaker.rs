//! Per-server circuit breaker: closed → open → half-open → closed.
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
//! With `probe_interval_ms` (the default, 1 s) callers' calls are never the probes: while open
//! every call is refused, and [`super::health_probe`] sends the server a cheap request on that
//! fixed interval; its first success closes the breaker. Recovery then takes at most about one
//! interval however long the outage was (a doubling open period made it grow with the outage),
//! and no caller's call is risked on a server that may still be down.
//!
//! With shared state ([`super::shared`]) a trip from closed is published to the fleet, a
//! probe needs a fleet-wide claim, and a failed probe re-opens this instance only.

use std::{
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant, SystemTime},
};

use prometheus::{IntCounter, IntCounterVec, IntGauge};
use serde_json::{Value, json};
use tower::{Layer, Service};

use super::classify::{Attribution, Outcome};
use crate::{
    config::BreakerSettings,
    upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest},
};

/// The three states (the gauge value in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// [0] Calls flow; outcomes are counted.
    Closed,
    /// [1] Calls are refused until `until`.
    Open { until: Instant },
    /// [2] A limited number of probes flow.
    HalfOpen { probes: u32 },
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open { .. } => "open",
            State::HalfOpen { .. } => "half_open",
        }
    }

    fn gauge(self) -> i64 {
        match self {
            State::Closed => 0,
            State::Open { .. } => 1,
            State::HalfOpen { .. } => 2,
        }
    }
}

/// One second of outcomes.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    second: u64,
    calls: u32,
    failures: u32,
}

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
}

/// Metric handles of one server's breaker.
#[derive(Clone)]
pub struct BreakerMetrics {
    pub state: IntGauge,
    pub transitions: IntCounterVec,
    pub rejected: IntCounter,
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

/// Whether a call may go ahead.
#[derive(Debug)]
pub enum Admission {
    Allowed { probe: bool },
    Rejected { retry_after: Duration },
}

/// How long a caller is told to wait while this instance waits for a fleet probe claim.
const CLAIM_WAIT: Duration = Duration::from_millis(200);

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
            }),
            metrics,
            notify: Mutex::new(None),
            wake_prober: tokio::sync::Notify::new(),
        }
    }

    /// Routes transitions to the shared store.
    pub fn set_notifier(&self, sender: TransitionSender) {
        if let Ok(mut notify) = self.notify.lock() {
            *notify = Some(sender);
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

    /// Decides whether a call may go ahead now.
    pub fn admit(&self) -> Admission {
        if !self.settings.enabled {
            return Admission::Allowed { probe: false };
        }
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.forced_open {
            self.metrics.rejected.inc();
            return Admission::Rejected { retry_after: Duration::from_millis(self.settings.open_base_ms) };
        }
        match inner.state {
            State::Closed => Admission::Allowed { probe: false },
            // The health prober, not a caller's call, finds out whether the server is back.
            State::Open { until } if self.settings.probe_interval().is_some() => {
                self.metrics.rejected.inc();
                let interval = Duration::from_millis(self.settings.probe_interval_ms);
                Admission::Rejected { retry_after: until.saturating_duration_since(now).max(interval) }
            }
            State::Open { until } if until > now => {
                self.metrics.rejected.inc();
                Admission::Rejected { retry_after: until - now }
            }
            State::Open { .. } if inner.claims_needed && !inner.probe_granted => {
                // The fleet allows one probe at a time: ask for the claim, refuse meanwhile.
                inner.wants_probe = true;
                self.metrics.rejected.inc();
                Admission::Rejected { retry_after: CLAIM_WAIT }
            }
            State::Open { .. } => {
                inner.probe_granted = false;
                inner.wants_probe = false;
                self.transition(&mut inner, State::HalfOpen { probes: 1 });
                Admission::Allowed { probe: true }
            }
            State::HalfOpen { probes } if probes < self.settings.half_open_probes => {
                inner.state = State::HalfOpen { probes: probes + 1 };
                Admission::Allowed { probe: true }
            }
            State::HalfOpen { .. } => {
                self.metrics.rejected.inc();
                Admission::Rejected { retry_after: Duration::from_millis(100) }
            }
        }
    }

    /// Records the outcome of an admitted call, as [`Outcome::attribution`] says it counts.
    pub fn record(&self, outcome: Outcome, probe: bool) {
        if !self.settings.enabled {
            return;
        }
        let attribution = outcome.attribution();
        let now = Instant::now();
        let mut inner = self.lock();
        if probe {
            if let State::HalfOpen { .. } = inner.state {
                match attribution {
                    // A shed or abandoned probe proved nothing: free its slot, decide later.
                    Attribution::Neither => free_probe_slot(&mut inner),
                    Attribution::HardFailure | Attribution::RateFailure => {
                        inner.backoff =
                            (inner.backoff * 2).min(Duration::from_millis(self.settings.open_max_ms));
                        self.open(&mut inner, now);
                    }
                    Attribution::Success => {
                        inner.backoff = Duration::from_millis(self.settings.open_base_ms);
                        self.close(&mut inner);
                        self.publish(Transition::Recovered);
                    }
                }
            }
            return;
        }
        if inner.state != State::Closed || attribution == Attribution::Neither {
            return;
        }
        let second = now.duration_since(self.epoch).as_secs();
        let slots = inner.buckets.len();
        let bucket = &mut inner.buckets[(second % slots as u64) as usize];
        if bucket.second != second {
            *bucket = Bucket { second, calls: 0, failures: 0 };
        }
        bucket.calls += 1;
        match attribution {
            Attribution::HardFailure => {
                bucket.failures += 1;
                inner.consecutive += 1;
            }
            Attribution::RateFailure => bucket.failures += 1,
            Attribution::Success => inner.consecutive = 0,
            Attribution::Neither => {}
        }
        let oldest = second.saturating_sub(slots as u64 - 1);
        let (calls, failures) = inner
            .buckets
            .iter()
            .filter(|b| b.second >= oldest && b.second <= second && b.calls > 0)
            .fold((0u32, 0u32), |(c, f), b| (c + b.calls, f + b.failures));
        let rate_tripped = calls >= self.settings.min_calls
            && f64::from(failures) / f64::from(calls.max(1)) >= self.settings.failure_rate;
        if inner.consecutive >= self.settings.consecutive_failures || rate_tripped {
            tracing::warn!(
                server = %self.server,
                consecutive = inner.consecutive,
                window_calls = calls,
                window_failures = failures,
                "circuit breaker opens"
            );
            let until = self.open(&mut inner, now);
            self.publish(Transition::Tripped { until });
        }
    }

    /// Releases a probe slot of a call that ended without an outcome (cancelled).
    pub fn release_probe(&self) {
        free_probe_slot(&mut self.lock());
    }

    /// Opens for the current backoff (jittered ±20%); returns when the open period ends.
    fn open(&self, inner: &mut Inner, now: Instant) -> Instant {
        let until = now + inner.backoff.mul_f64(0.8 + 0.4 * fastrand::f64());
        self.transition(inner, State::Open { until });
        inner.consecutive = 0;
        inner.probe_granted = false;
        inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        self.wake_prober.notify_one();
        until
    }

    /// Whether the health prober should probe now (open, not forced open, probing on).
    pub fn needs_health_probe(&self) -> bool {
        let inner = self.lock();
        self.settings.probe_interval().is_some()
            && !inner.forced_open
            && matches!(inner.state, State::Open { .. })
    }

    /// Waits until the breaker opens or a peer recovers the server (or returns at once if
    /// either happened since the last wait).
    pub async fn prober_woken(&self) {
        self.wake_prober.notified().await;
    }

    /// Whether a peer's health probe succeeded since the last call (and forgets it).
    pub fn take_peer_recovered(&self) -> bool {
        std::mem::take(&mut self.lock().peer_recovered)
    }

    /// Whether probes need a fleet-wide claim now.
    pub fn claims_needed(&self) -> bool {
        self.lock().claims_needed
    }

    /// The outcome of a health probe: a success closes the breaker (and tells the fleet), a
    /// failure keeps it open for another interval.
    pub fn record_health_probe(&self, reached: bool) {
        let mut inner = self.lock();
        if inner.forced_open || !matches!(inner.state, State::Open { .. }) {
            return;
        }
        if reached {
            tracing::info!(server = %self.server, "health probe answered: circuit breaker closes");
            inner.backoff = Duration::from_millis(self.settings.open_base_ms);
            inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
            self.close(&mut inner);
            drop(inner);
            self.publish(Transition::Recovered);
        } else {
            let interval = Duration::from_millis(self.settings.probe_interval_ms);
            inner.state = State::Open { until: Instant::now() + interval };
        }
    }

    fn close(&self, inner: &mut Inner) {
        self.transition(inner, State::Closed);
        inner.consecutive = 0;
        inner.probe_granted = false;
        inner.wants_probe = false;
    }

    fn transition(&self, inner: &mut Inner, to: State) {
        if inner.state.name() != to.name() {
            self.metrics.transitions.with_label_values(&[&self.server, to.name()]).inc();
            tracing::info!(server = %self.server, from = inner.state.name(), to = to.name(), "circuit breaker transition");
        }
        match (inner.state, to) {
            (_, State::Closed) => inner.left_closed_at = None,
            (State::Closed, _) => inner.left_closed_at = Some(SystemTime::now()),
            _ => {}
        }
        inner.state = to;
        self.metrics.state.set(to.gauge());
    }

    fn publish(&self, transition: Transition) {
        if let Ok(notify) = self.notify.lock()
            && let Some(sender) = notify.as_ref()
        {
            let _ = sender.send((self.server.clone(), transition));
        }
    }

    /// Operator action: open and stay open until [`Self::force_close`]; the fleet follows.
    pub fn force_open(&self) {
        self.apply_forced_open();
        self.publish(Transition::ForcedOpen);
    }

    /// Operator action: close now and forget failures; the fleet follows.
    pub fn force_close(&self) {
        self.apply_forced_close();
        self.publish(Transition::ForcedClosed);
    }

    /// An operator's open, made here or on a peer.
    pub fn apply_forced_open(&self) {
        let mut inner = self.lock();
        inner.forced_open = true;
        let open_for = Duration::from_millis(self.settings.open_max_ms);
        self.transition(&mut inner, State::Open { until: Instant::now() + open_for });
    }

    /// An operator's close, made here or on a peer.
    pub fn apply_forced_close(&self) {
        let mut inner = self.lock();
        inner.forced_open = false;
        inner.backoff = Duration::from_millis(self.settings.open_base_ms);
        inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        self.close(&mut inner);
    }

    pub fn is_forced_open(&self) -> bool {
        self.lock().forced_open
    }

    /// A peer tripped: stay away from the server until `until` (the fleet's open period),
    /// then come back through a probe like any open breaker.
    pub fn apply_fleet_open(&self, until: Instant) {
        let mut inner = self.lock();
        match inner.state {
            State::Closed => {
                tracing::info!(server = %self.server, "a peer opened this server's circuit");
                self.transition(&mut inner, State::Open { until });
                inner.consecutive = 0;
                inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
                self.wake_prober.notify_one();
            }
            State::Open { until: ours } if ours < until => inner.state = State::Open { until },
            _ => {}
        }
    }

    /// A peer's probe succeeded: an open breaker here probes at once (through the fleet's
    /// claim, so instances come back one probe at a time, not all at once).
    pub fn apply_fleet_recovered(&self) {
        let mut inner = self.lock();
        if inner.forced_open {
            return;
        }
        if self.settings.probe_interval().is_some() {
            // This instance's own health probe confirms it (its path may differ), unclaimed.
            if let State::Open { .. } = inner.state {
                inner.peer_recovered = true;
                self.wake_prober.notify_one();
            }
            return;
        }
        if let State::Open { .. } = inner.state {
            inner.state = State::Open { until: Instant::now() };
            inner.backoff = Duration::from_millis(self.settings.open_base_ms);
        }
    }

    /// Whether probes need a fleet-wide claim (the shared store is reachable) or not.
    pub fn set_claims_needed(&self, needed: bool) {
        let mut inner = self.lock();
        inner.claims_needed = needed;
        if !needed {
            inner.wants_probe = false;
        }
    }

    /// Whether this instance is waiting for a probe claim (and stops asking).
    pub fn take_probe_wish(&self) -> bool {
        let mut inner = self.lock();
        let due = matches!(inner.state, State::Open { until } if until <= Instant::now());
        let wish = inner.wants_probe && due && !inner.forced_open && !inner.probe_granted;
        inner.wants_probe = false;
        wish
    }

    /// The fleet's claim was won: the next call here is the probe.
    pub fn grant_probe(&self) {
        self.lock().probe_granted = true;
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

/// Gives back a half-open probe slot whose call proved nothing about the server.
fn free_probe_slot(inner: &mut Inner) {
    if let State::HalfOpen { probes } = inner.state {
        inner.state = State::HalfOpen { probes: probes.saturating_sub(1) };
    }
}

/// Builds [`BreakerService`].
#[derive(Clone)]
pub struct BreakerLayer {
    breaker: Arc<Breaker>,
}

impl BreakerLayer {
    pub fn new(breaker: Arc<Breaker>) -> Self {
        Self { breaker }
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService { inner, breaker: self.breaker.clone() }
    }
}

/// Refuses calls while the breaker is open; reports every outcome to it.
#[derive(Clone)]
pub struct BreakerService<S> {
    inner: S,
    breaker: Arc<Breaker>,
}

/// Releases a half-open probe slot if the call is dropped before its outcome is known.
struct ProbeGuard {
    breaker: Arc<Breaker>,
    armed: bool,
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if self.armed {
            self.breaker.release_probe();
        }
    }
}

impl<S> Service<UpstreamRequest> for BreakerService<S>
where
    S: Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>,
    S::Future: Send + 'static,
{
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let probe = match self.breaker.admit() {
            Admission::Rejected { retry_after } => {
                return Box::pin(std::future::ready(Err(UpstreamError::CircuitOpen { retry_after })));
            }
            Admission::Allowed { probe } => probe,
        };
        let tools_call = request.method == "tools/call";
        let breaker = self.breaker.clone();
        let call = self.inner.call(request);
        Box::pin(async move {
            let mut guard = ProbeGuard { breaker: breaker.clone(), armed: probe };
            let result = call.await;
            guard.armed = false;
            breaker.record(Outcome::of(&result, tools_call), probe);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Opts;

    fn breaker(settings: BreakerSettings) -> Breaker {
        let metrics = BreakerMetrics {
            state: IntGauge::new("s", "s").unwrap(),
            transitions: IntCounterVec::new(Opts::new("t", "t"), &["server", "to"]).unwrap(),
            rejected: IntCounter::new("r", "r").unwrap(),
        };
        Breaker::new("srv".into(), settings, metrics)
    }

    const DOWN: Outcome = Outcome::ServerError { reached_server: false };

    /// Settings without health probes: callers' calls are the probes.
    fn callers_probe() -> BreakerSettings {
        BreakerSettings { probe_interval_ms: 0, ..Default::default() }
    }

    #[test]
    fn with_health_probes_no_caller_probes_and_a_probe_answer_closes() {
        let b = breaker(BreakerSettings {
            consecutive_failures: 1,
            open_base_ms: 1,
            probe_interval_ms: 50,
            ..Default::default()
        });
        let (sender, mut heard) = tokio::sync::mpsc::unbounded_channel();
        b.set_notifier(sender);
        b.record(DOWN, false);
        assert!(matches!(heard.try_recv(), Ok((_, Transition::Tripped { .. }))));
        std::thread::sleep(Duration::from_millis(10));
        // Past the open period, callers are still refused: only the prober probes.
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        assert!(b.needs_health_probe());
        b.record_health_probe(false);
        assert!(matches!(b.admit(), Admission::Rejected { .. }), "a failed probe keeps it open");
        b.record_health_probe(true);
        assert_eq!(b.state(), State::Closed);
        assert!(matches!(heard.try_recv(), Ok((_, Transition::Recovered))));
        assert!(matches!(b.admit(), Admission::Allowed { probe: false }));
        // A peer's recovery asks this instance's prober for its own probe; forced open is not probed.
        b.record(DOWN, false);
        b.apply_fleet_recovered();
        assert!(b.take_peer_recovered());
        b.force_open();
        assert!(!b.needs_health_probe());
    }

    #[test]
    fn consecutive_hard_failures_trip_and_a_probe_closes() {
        let b = breaker(BreakerSettings { consecutive_failures: 3, open_base_ms: 50, ..callers_probe() });
        for _ in 0..2 {
            assert!(matches!(b.admit(), Admission::Allowed { probe: false }));
            b.record(DOWN, false);
        }
        assert_eq!(b.state(), State::Closed);
        b.record(DOWN, false);
        assert!(matches!(b.state(), State::Open { .. }));
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        std::thread::sleep(Duration::from_millis(70));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        // Exactly one probe at a time.
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        b.record(Outcome::Success, true);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn health_keeps_when_the_breaker_left_closed_until_it_closes() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 1, ..callers_probe() });
        assert!(b.health().since.is_none());
        let before = SystemTime::now();
        b.record(DOWN, false);
        let since = b.health().since.expect("open: since set");
        assert!(since >= before);
        // A failed probe re-opens: still unavailable since the first trip.
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        assert_eq!(b.health().since, Some(since), "half-open keeps it");
        b.record(DOWN, true);
        assert_eq!(b.health().since, Some(since), "re-opened keeps it");
        b.force_close();
        assert!(b.health().since.is_none());
        b.force_open();
        assert!(b.health().forced_open && b.health().since.is_some());
    }

    #[test]
    fn failed_probes_reopen_with_a_longer_backoff() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 40, ..callers_probe() });
        b.record(DOWN, false);
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        b.record(Outcome::Timeout, true);
        assert_eq!(b.report()["next_open_ms"], 80);
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
    }

    #[test]
    fn tool_errors_client_errors_and_rate_limits_do_not_trip_consecutively() {
        let b = breaker(BreakerSettings { consecutive_failures: 2, min_calls: 1000, ..callers_probe() });
        for outcome in [
            Outcome::ToolError,
            Outcome::ClientError,
            Outcome::NotFound,
            Outcome::RateLimited { retry_after: None },
        ] {
            for _ in 0..10 {
                b.record(outcome, false);
            }
        }
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn the_failure_rate_trips_once_enough_calls_are_seen() {
        let b = breaker(BreakerSettings {
            consecutive_failures: 100,
            min_calls: 10,
            failure_rate: 0.5,
            ..callers_probe()
        });
        for i in 0..9 {
            b.record(if i % 2 == 0 { DOWN } else { Outcome::Success }, false);
        }
        assert_eq!(b.state(), State::Closed, "fewer calls than min_calls never trip");
        b.record(Outcome::RateLimited { retry_after: None }, false);
        assert!(matches!(b.state(), State::Open { .. }));
    }

    #[test]
    fn forced_open_stays_open_until_closed() {
        let b = breaker(BreakerSettings { open_base_ms: 1, open_max_ms: 1, ..callers_probe() });
        b.force_open();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        b.force_close();
        assert!(matches!(b.admit(), Admission::Allowed { probe: false }));
    }

    #[test]
    fn shed_and_abandoned_calls_neither_count_nor_reset() {
        let b = breaker(BreakerSettings { consecutive_failures: 3, min_calls: 1000, ..callers_probe() });
        for _ in 0..2 {
            b.record(DOWN, false);
            // Between failures, calls the gateway shed or the caller gave up on.
            b.record(Outcome::Refused, false);
            b.record(Outcome::Abandoned, false);
        }
        assert_eq!(b.report()["consecutive_failures"], 2, "neither reset the count");
        for _ in 0..10 {
            b.record(Outcome::Abandoned, false);
        }
        assert_eq!(b.state(), State::Closed, "caller deadlines never trip a healthy server");
        b.record(DOWN, false);
        assert!(matches!(b.state(), State::Open { .. }));
    }

    #[test]
    fn a_shed_or_abandoned_probe_frees_its_slot_and_decides_nothing() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 20, ..callers_probe() });
        b.record(DOWN, false);
        std::thread::sleep(Duration::from_millis(40));
        for outcome in [Outcome::Refused, Outcome::Abandoned] {
            assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
            b.record(outcome, true);
            assert_eq!(b.state().name(), "half_open", "{outcome:?} must not close or re-open");
        }
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }), "the slot was freed");
        b.record(Outcome::Success, true);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn only_trips_from_closed_and_successful_probes_are_told_to_the_fleet() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 20, ..callers_probe() });
        let (sender, mut heard) = tokio::sync::mpsc::unbounded_channel();
        b.set_notifier(sender);
        b.record(DOWN, false);
        assert!(matches!(heard.try_recv(), Ok((_, Transition::Tripped { .. }))));
        std::thread::sleep(Duration::from_millis(40));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        b.record(DOWN, true);
        assert!(heard.try_recv().is_err(), "a failed probe re-opens this instance only");
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        b.record(Outcome::Success, true);
        assert!(matches!(heard.try_recv(), Ok((_, Transition::Recovered))));
    }

    #[test]
    fn with_fleet_claims_a_probe_waits_for_its_grant() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 20, ..callers_probe() });
        b.set_claims_needed(true);
        b.record(DOWN, false);
        assert!(!b.take_probe_wish(), "no wish while the open period runs");
        std::thread::sleep(Duration::from_millis(40));
        assert!(matches!(b.admit(), Admission::Rejected { .. }), "no probe without the claim");
        assert!(b.take_probe_wish());
        b.grant_probe();
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        assert!(matches!(b.admit(), Admission::Rejected { .. }), "one probe per grant");
        b.record(Outcome::Success, true);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn a_peer_trip_opens_and_a_peer_recovery_brings_a_probe_forward() {
        let b = breaker(BreakerSettings { open_base_ms: 60_000, ..callers_probe() });
        b.apply_fleet_open(Instant::now() + Duration::from_secs(60));
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        b.apply_fleet_recovered();
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }), "probe now, not after 60 s");
        b.record(Outcome::Success, true);
        assert_eq!(b.state(), State::Closed);
    }
}
