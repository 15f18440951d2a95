//! The breaker's state machine: whether a call may go ahead ([`Breaker::admit`]), what its
//! outcome does to the counts ([`Breaker::record`]), and the transitions between closed, open
//! and half-open, each counted, logged and shown on the state gauge.

use std::time::{Duration, Instant, SystemTime};

use super::{Breaker, Inner, Transition};
use crate::resilience::classify::{Attribution, Outcome};

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

    pub(super) fn gauge(self) -> i64 {
        match self {
            State::Closed => 0,
            State::Open { .. } => 1,
            State::HalfOpen { .. } => 2,
        }
    }
}

/// One second of outcomes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Bucket {
    pub(super) second: u64,
    pub(super) calls: u32,
    pub(super) failures: u32,
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
                        inner.reason = Some(format!("a probe call failed ({})", outcome.label()));
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
            inner.reason = Some(if inner.consecutive >= self.settings.consecutive_failures {
                format!("{} consecutive failures, the last {}", inner.consecutive, outcome.label())
            } else {
                format!(
                    "{failures} of {calls} calls failed within {} s, the last {}",
                    self.settings.window_secs,
                    outcome.label()
                )
            });
            let until = self.open(&mut inner, now);
            self.publish(Transition::Tripped { until });
        }
    }

    /// Releases a probe slot of a call that ended without an outcome (cancelled).
    pub fn release_probe(&self) {
        free_probe_slot(&mut self.lock());
    }

    /// Opens for the current backoff (jittered ±20%); returns when the open period ends.
    pub(super) fn open(&self, inner: &mut Inner, now: Instant) -> Instant {
        let until = crate::clock::later(
            now,
            crate::clock::capped(inner.backoff).mul_f64(0.8 + 0.4 * fastrand::f64()),
        );
        self.transition(inner, State::Open { until });
        inner.consecutive = 0;
        inner.probe_granted = false;
        inner.buckets.iter_mut().for_each(|b| *b = Bucket::default());
        self.wake_prober.notify_one();
        until
    }

    pub(super) fn close(&self, inner: &mut Inner) {
        self.transition(inner, State::Closed);
        inner.reason = None;
        inner.consecutive = 0;
        inner.probe_granted = false;
        inner.wants_probe = false;
    }

    pub(super) fn transition(&self, inner: &mut Inner, to: State) {
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
}

/// Gives back a half-open probe slot whose call proved nothing about the server.
fn free_probe_slot(inner: &mut Inner) {
    if let State::HalfOpen { probes } = inner.state {
        inner.state = State::HalfOpen { probes: probes.saturating_sub(1) };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        config::BreakerSettings,
        resilience::breaker::{Admission, DOWN, callers_probe, test_breaker as breaker},
    };

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
    fn an_open_breaker_says_why_and_since_when_until_it_closes() {
        let b = breaker(BreakerSettings { consecutive_failures: 2, ..callers_probe() });
        assert_eq!(b.report()["reason"], serde_json::Value::Null);
        b.record(DOWN, false);
        b.record(DOWN, false);
        let report = b.report();
        let expected = format!("2 consecutive failures, the last {}", DOWN.label());
        assert_eq!(report["reason"], expected.as_str(), "{report}");
        assert!(report["since"].as_str().is_some_and(|at| at.ends_with('Z')), "{report}");
        b.force_close();
        assert_eq!(b.report()["reason"], serde_json::Value::Null);
        b.force_open();
        assert_eq!(b.report()["reason"], "forced open by an operator");
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
}
