//! Quota decisions made by this instance alone (no Redis configured, or Redis away): the same
//! GCRA and concurrency count as the Redis script, in a bounded in-memory map.
//!
//! The map holds at most `quotas.local_max_keys` keys. When it is full, keys whose allowance is
//! back to full and that hold no call in flight are forgotten first (they mean nothing); if it
//! is still full, a new key is allowed without being tracked until room frees up — a bound on
//! memory matters more than a quota for a caller the instance has never seen.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::{CONCURRENCY_RETRY_HINT, Limit, Limits};

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// GCRA's theoretical arrival time, in milliseconds since `epoch`.
    tat_ms: f64,
    in_flight: u64,
}

pub struct LocalQuotas {
    entries: Mutex<HashMap<String, Entry>>,
    max_keys: usize,
    epoch: Instant,
}

impl LocalQuotas {
    pub fn new(max_keys: usize) -> Self {
        Self { entries: Mutex::new(HashMap::new()), max_keys: max_keys.max(1), epoch: Instant::now() }
    }

    fn now_ms(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1000.0
    }

    /// Decides one call: `Ok(true)` when it took a concurrency slot (give it back with
    /// [`Self::release`]), `Ok(false)` when allowed without one, `Err` when refused.
    pub fn decide(&self, key: &str, limits: &Limits) -> Result<bool, (Limit, Duration)> {
        let now = self.now_ms();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if !entries.contains_key(key) && entries.len() >= self.max_keys {
            entries.retain(|_, e| e.in_flight > 0 || e.tat_ms > now);
            if entries.len() >= self.max_keys {
                return Ok(false);
            }
        }
        let entry = entries.entry(key.to_string()).or_insert(Entry { tat_ms: now, in_flight: 0 });
        if limits.max_concurrent > 0 && entry.in_flight >= limits.max_concurrent {
            return Err((Limit::Concurrency, CONCURRENCY_RETRY_HINT));
        }
        if limits.emission_ms > 0.0 {
            let tat = entry.tat_ms.max(now);
            let allow_at = tat - limits.tolerance_ms;
            if now < allow_at {
                let wait = crate::clock::secs_f64((allow_at - now) / 1000.0).unwrap_or_default();
                return Err((Limit::Rate, wait.max(Duration::from_millis(1))));
            }
            entry.tat_ms = tat + limits.emission_ms;
        }
        if limits.max_concurrent > 0 {
            entry.in_flight += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Gives back a concurrency slot taken by [`Self::decide`].
    pub fn release(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.get_mut(key) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_window: u64, window_ms: f64, burst: u64) -> Limits {
        let emission_ms = window_ms / per_window as f64;
        Limits { emission_ms, tolerance_ms: (burst - 1) as f64 * emission_ms, max_concurrent: 0 }
    }

    #[test]
    fn gcra_allows_the_burst_then_one_call_per_emission_interval() {
        let local = LocalQuotas::new(10);
        let limits = rate(3, 3_600_000.0, 3);
        let before_first = Instant::now();
        for _ in 0..3 {
            assert_eq!(local.decide("k", &limits), Ok(false));
        }
        let (limit, wait) = local.decide("k", &limits).unwrap_err();
        let between = before_first.elapsed();
        assert_eq!(limit, Limit::Rate);
        // The next call is allowed one emission interval (20 minutes) after the first: the
        // wait is that interval less what passed since the first call, whatever the machine's
        // speed (no slack guessed; 1 ms for the float arithmetic of milliseconds).
        let interval = Duration::from_secs(1200);
        let rounding = Duration::from_millis(1);
        assert!(wait <= interval && wait + between + rounding >= interval, "{wait:?} after {between:?}");
    }

    #[test]
    fn the_map_is_bounded() {
        let local = LocalQuotas::new(2);
        let limits = rate(1, 3_600_000.0, 1);
        assert_eq!(local.decide("a", &limits), Ok(false));
        assert_eq!(local.decide("b", &limits), Ok(false));
        // Full of live keys: a third key is allowed untracked, every time.
        assert_eq!(local.decide("c", &limits), Ok(false));
        assert_eq!(local.decide("c", &limits), Ok(false));
        assert!(local.decide("a", &limits).is_err(), "tracked keys keep their state");
        assert_eq!(local.entries.lock().unwrap().len(), 2);
    }
}
