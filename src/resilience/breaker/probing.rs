//! What the health prober ([`crate::resilience::health_probe`]) asks of a breaker. With
//! `probe_interval_ms` (the default, 1 s) callers' calls are never the probes: while open every
//! call is refused, and the prober sends the server a cheap request on that fixed interval; its
//! first success closes the breaker. Recovery then takes at most about one interval however
//! long the outage was (a doubling open period made it grow with the outage), and no caller's
//! call is risked on a server that may still be down.

use std::time::Duration;

use super::{Breaker, Bucket, Transition, state::State};

impl Breaker {
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
            inner.state = State::Open { until: crate::clock::after(interval) };
            if !inner.reason.as_deref().is_some_and(|r| r.ends_with("; health probes unanswered")) {
                let tripped = inner.reason.take().unwrap_or_else(|| "open".into());
                inner.reason = Some(format!("{tripped}; health probes unanswered"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        config::BreakerSettings,
        resilience::breaker::{Admission, DOWN, test_breaker as breaker},
    };

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
}
