//! The unspent calls of fleet batches: a fast rate-only quota takes up to
//! `quotas.fleet_batch_ms` of its rate from Redis in one decision ([`super::fleet`]), and the
//! instance's next calls for that key spend it here without a round trip.
//!
//! A batch is good for `fleet_batch_ms` after Redis granted it; what is left then is given up,
//! so calls of one grant are spread over at most that time and the fleet never allows more
//! than the quota. The map holds at most `quotas.local_max_keys` keys: when full, spent and
//! stale batches are forgotten; if it is still full, a new batch is given up at once (its key
//! is decided in Redis again on its next call) — conservative, never more calls than granted.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

#[derive(Debug, Clone, Copy)]
struct Batch {
    remaining: u64,
    until: Instant,
}

pub struct Batches {
    entries: Mutex<HashMap<String, Batch>>,
    max_keys: usize,
    good_for: Duration,
}

impl Batches {
    pub fn new(max_keys: usize, good_for: Duration) -> Self {
        Self { entries: Mutex::new(HashMap::new()), max_keys: max_keys.max(1), good_for }
    }

    /// Spends one call of `key`'s batch: `true` when there was one (the call is allowed).
    pub fn spend(&self, key: &str, now: Instant) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get_mut(key) {
            Some(batch) if batch.remaining > 0 && now < batch.until => {
                batch.remaining -= 1;
                true
            }
            Some(_) => {
                entries.remove(key);
                false
            }
            None => false,
        }
    }

    /// Keeps `calls` more of `key`'s allowance, granted by Redis at `granted_at`.
    pub fn keep(&self, key: String, calls: u64, granted_at: Instant) {
        if calls == 0 {
            return;
        }
        let until = granted_at + self.good_for;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if !entries.contains_key(&key) && entries.len() >= self.max_keys {
            entries.retain(|_, b| b.remaining > 0 && granted_at < b.until);
            if entries.len() >= self.max_keys {
                return;
            }
        }
        let batch = entries.entry(key).or_insert(Batch { remaining: 0, until });
        if granted_at >= batch.until {
            batch.remaining = 0;
        }
        batch.remaining += calls;
        batch.until = batch.until.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_spent_call_by_call_and_given_up_when_stale() {
        let batches = Batches::new(10, Duration::from_millis(10));
        let t0 = Instant::now();
        assert!(!batches.spend("k", t0), "nothing granted yet");
        batches.keep("k".into(), 2, t0);
        assert!(batches.spend("k", t0));
        assert!(batches.spend("k", t0 + Duration::from_millis(9)));
        assert!(!batches.spend("k", t0 + Duration::from_millis(9)), "two granted, two spent");
        batches.keep("k".into(), 5, t0);
        assert!(!batches.spend("k", t0 + Duration::from_millis(10)), "stale: given up");
        assert!(!batches.spend("k", t0), "and forgotten");
    }

    #[test]
    fn the_map_is_bounded_and_a_batch_without_room_is_given_up() {
        let batches = Batches::new(1, Duration::from_millis(10));
        let t0 = Instant::now();
        batches.keep("a".into(), 3, t0);
        batches.keep("b".into(), 3, t0);
        assert!(!batches.spend("b", t0), "no room for b's batch: given up");
        assert!(batches.spend("a", t0));
        // Once a's batch is stale, b's next batch takes its place.
        batches.keep("b".into(), 3, t0 + Duration::from_millis(20));
        assert!(batches.spend("b", t0 + Duration::from_millis(20)));
        assert_eq!(batches.entries.lock().unwrap().len(), 1);
    }
}
