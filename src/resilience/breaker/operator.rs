//! An operator's hand on a breaker (`/admin`): forced open until closed by hand, or closed now
//! with its failures forgotten. Made here or on a peer; the fleet follows ([`super::fleet`]).

use std::time::Duration;

use super::{Breaker, Bucket, Transition, state::State};

impl Breaker {
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
        inner.reason = Some("forced open by an operator".into());
        let open_for = Duration::from_millis(self.settings.open_max_ms);
        self.transition(&mut inner, State::Open { until: crate::clock::after(open_for) });
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{
        config::BreakerSettings,
        resilience::breaker::{Admission, callers_probe, test_breaker as breaker},
    };

    #[test]
    fn forced_open_stays_open_until_closed() {
        let b = breaker(BreakerSettings { open_base_ms: 1, open_max_ms: 1, ..callers_probe() });
        b.force_open();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(b.admit(), Admission::Rejected { .. }));
        b.force_close();
        assert!(matches!(b.admit(), Admission::Allowed { probe: false }));
    }
}
