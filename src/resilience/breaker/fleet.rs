//! The breaker's side of shared state ([`crate::resilience::shared`]): a trip from closed is
//! published to the fleet, a probe needs a fleet-wide claim, and a failed probe re-opens this
//! instance only. What the peers did reaches the breaker through the `apply_fleet_*` hooks.

use std::time::{Duration, Instant};

use super::{Breaker, Bucket, Transition, TransitionSender, state::State};

impl Breaker {
    /// Routes transitions to the shared store.
    pub fn set_notifier(&self, sender: TransitionSender) {
        if let Ok(mut notify) = self.notify.lock() {
            *notify = Some(sender);
        }
    }

    pub(super) fn publish(&self, transition: Transition) {
        if let Ok(notify) = self.notify.lock()
            && let Some(sender) = notify.as_ref()
        {
            let _ = sender.send((self.server.clone(), transition));
        }
    }

    /// A peer tripped: stay away from the server until `until` (the fleet's open period),
    /// then come back through a probe like any open breaker.
    pub fn apply_fleet_open(&self, until: Instant) {
        let mut inner = self.lock();
        match inner.state {
            State::Closed => {
                tracing::info!(server = %self.server, "a peer opened this server's circuit");
                inner.reason = Some("opened by another instance of the fleet".into());
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

    /// Whether probes need a fleet-wide claim now.
    pub fn claims_needed(&self) -> bool {
        self.lock().claims_needed
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::resilience::classify::Outcome;
    use crate::{
        config::BreakerSettings,
        resilience::breaker::{Admission, DOWN, callers_probe, test_breaker as breaker},
    };

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
