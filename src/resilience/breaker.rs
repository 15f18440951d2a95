//! Per-server circuit breaker: closed → open → half-open → closed.
//!
//! It trips on either `consecutive_failures` hard failures in a row (a dead server is noticed
//! in a handful of calls) or a failure rate over a sliding window once `min_calls` calls are
//! in it (a half-broken busy server is noticed without tripping on noise). While open, calls
//! are refused at once with the time left; after a jittered backoff that doubles on every
//! failed probe, exactly `half_open_probes` calls go through; success closes, failure reopens.
//!
//! What counts is decided by [`Outcome`]: only hard failures (connect errors, resets,
//! timeouts, 5xx, Lambda `Unhandled`) count in a row; rate limiting counts toward the rate
//! only; tool errors, invalid params and unknown tools are successes of the server.

use std::{
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use prometheus::{IntCounter, IntCounterVec, IntGauge};
use serde_json::{Value, json};
use tower::{Layer, Service};

use super::{classify::Outcome, settings::BreakerSettings};
use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest};

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
    /// Another gateway instance reported the server open until then (shared state).
    remote_open_until: Option<Instant>,
}

impl Inner {
    /// A peer owns an open state for this server.
    fn remote_open(&self, now: Instant) -> Option<Duration> {
        self.remote_open_until.filter(|until| *until > now).map(|until| until - now)
    }
}

/// Metric handles of one server's breaker.
#[derive(Clone)]
pub struct BreakerMetrics {
    pub state: IntGauge,
    pub transitions: IntCounterVec,
    pub rejected: IntCounter,
}

/// A change other instances should hear about (shared breaker state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Opened { open_for: Duration },
    Closed,
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
}

/// Whether a call may go ahead.
#[derive(Debug)]
pub enum Admission {
    Allowed { probe: bool },
    Rejected { retry_after: Duration },
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
                remote_open_until: None,
            }),
            metrics,
            notify: Mutex::new(None),
        }
    }

    /// Routes transitions to the shared store.
    pub fn set_notifier(&self, sender: TransitionSender) {
        if let Ok(mut notify) = self.notify.lock() {
            *notify = Some(sender);
        }
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
        if let Some(retry_after) = inner.remote_open(now) {
            // A peer opened this server's breaker and owns the probe: fail fast here.
            self.metrics.rejected.inc();
            return Admission::Rejected { retry_after };
        }
        match inner.state {
            State::Closed => Admission::Allowed { probe: false },
            State::Open { until } if until > now => {
                self.metrics.rejected.inc();
                Admission::Rejected { retry_after: until - now }
            }
            State::Open { .. } => {
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

    /// Records the outcome of an admitted call.
    pub fn record(&self, outcome: Outcome, probe: bool) {
        if !self.settings.enabled {
            return;
        }
        let now = Instant::now();
        let mut inner = self.lock();
        if probe {
            if let State::HalfOpen { .. } = inner.state {
                if outcome.counts_against_success_rate() {
                    inner.backoff = (inner.backoff * 2).min(Duration::from_millis(self.settings.open_max_ms));
                    self.trip(&mut inner, now);
                } else {
                    inner.backoff = Duration::from_millis(self.settings.open_base_ms);
                    self.close(&mut inner);
                }
            }
            return;
        }
        if inner.state != State::Closed {
            return;
        }
        let second = now.duration_since(self.epoch).as_secs();
        let slots = inner.buckets.len();
        let bucket = &mut inner.buckets[(second % slots as u64) as usize];
        if bucket.second != second {
            *bucket = Bucket { second, calls: 0, failures: 0 };
        }
        bucket.calls += 1;
        if outcome.counts_against_success_rate() {
            bucket.failures += 1;
        }
        if outcome.is_hard_failure() {
            inner.consecutive += 1;
        } else if !matches!(outcome, Outcome::RateLimited { .. }) {
            inner.consecutive = 0;
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
            self.trip(&mut inner, now);
        }
    }

    /// Releases a probe slot of a call that ended without an outcome (cancelled).
    pub fn release_probe(&self) {
        let mut inner = self.lock();
        if let State::HalfOpen { probes } = inner.state {
            inner.state = State::HalfOpen { probes: probes.saturating_sub(1) };
        }
    }

    fn trip(&self, inner: &mut Inner, now: Instant) {
        let open_for = inner.backoff.mul_f64(0.8 + 0.4 * fastrand::f64());
        self.transition(inner, State::Open { until: now + open_for });
        inner.consecutive = 0;
        inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        self.publish(Transition::Opened { open_for });
    }

    fn close(&self, inner: &mut Inner) {
        self.transition(inner, State::Closed);
        inner.consecutive = 0;
        inner.remote_open_until = None;
        self.publish(Transition::Closed);
    }

    fn transition(&self, inner: &mut Inner, to: State) {
        if inner.state.name() != to.name() {
            self.metrics.transitions.with_label_values(&[&self.server, to.name()]).inc();
            tracing::info!(server = %self.server, from = inner.state.name(), to = to.name(), "circuit breaker transition");
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

    /// Operator action: open and stay open until [`Self::force_close`].
    pub fn force_open(&self) {
        let mut inner = self.lock();
        inner.forced_open = true;
        let open_for = Duration::from_millis(self.settings.open_max_ms);
        self.transition(&mut inner, State::Open { until: Instant::now() + open_for });
        self.publish(Transition::Opened { open_for });
    }

    /// Operator action: close now and forget failures.
    pub fn force_close(&self) {
        let mut inner = self.lock();
        inner.forced_open = false;
        inner.backoff = Duration::from_millis(self.settings.open_base_ms);
        inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        self.close(&mut inner);
    }

    /// The shared store's view: open until then, by this instance (`mine`) or a peer.
    /// Only a peer's open state refuses calls here; our own is governed locally.
    pub fn apply_remote(&self, open_until: Option<Instant>, mine: bool) {
        let mut inner = self.lock();
        inner.remote_open_until = if mine { None } else { open_until };
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
            "remote_open_ms": inner.remote_open_until.map(|u| u.saturating_duration_since(now).as_millis() as u64),
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

    #[test]
    fn consecutive_hard_failures_trip_and_a_probe_closes() {
        let b = breaker(BreakerSettings { consecutive_failures: 3, open_base_ms: 50, ..Default::default() });
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
    fn failed_probes_reopen_with_a_longer_backoff() {
        let b = breaker(BreakerSettings { consecutive_failures: 1, open_base_ms: 40, ..Default::default() });
        b.record(DOWN, false);
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(b.admit(), Admission::Allowed { probe: true }));
        b.record(Outcome::Timeout, true);
        assert_eq!(b.report()["next_open_ms"], 80);
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
    }

    #[test]
    fn tool_errors_client_errors_and_rate_limits_do_not_trip_consecutively() {
        let b = breaker(BreakerSettings { consecutive_failures: 2, min_calls: 1000, ..Default::default() });
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
            ..Default::default()
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
        let b = breaker(BreakerSettings { open_base_ms: 1, open_max_ms: 1, ..Default::default() });
        b.force_open();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        b.force_close();
        assert!(matches!(b.admit(), Admission::Allowed { probe: false }));
    }
}
