//! Read-only tool results: a bounded cache (fresh hits within a TTL, last good results kept
//! for stale fallbacks). Keys are tool + canonical arguments + the caller's forwarded `_meta`
//! and identified subject when there are any (`gateway::call::read_only::result_key`: per-user context
//! in `_meta` is never answered with another caller's result). Never used for tools that are
//! not read-only. Identical read-only calls running at the same time share one upstream call
//! through [`crate::singleflight`].
//!
//! Entries are shared (`Arc`): the lock is held for a hash probe and a reference count, and
//! the copy a caller gets is made after it is released, so one large result being read does
//! not stall every other read-only call.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::error::GatewayError;
use serde_json::value::RawValue;

/// What a shared call yields.
pub type SharedResult = Result<Box<RawValue>, GatewayError>;

struct Entry {
    value: Arc<RawValue>,
    stored: Instant,
    seq: u64,
}

/// Bounded result store; the oldest entries are evicted first.
pub struct ResultCache {
    inner: Mutex<Store>,
    max_entries: usize,
}

/// Keys are tool + SHA-256s of the arguments (and of `_meta` and subject): no caller can aim them at one bucket, so the
/// fast hasher is safe here (SipHash cost more than the rest of a cache probe).
struct Store {
    entries: HashMap<Arc<str>, Entry, foldhash::fast::RandomState>,
    order: VecDeque<(Arc<str>, u64)>,
    seq: u64,
}

impl ResultCache {
    pub fn new(max_entries: usize) -> Self {
        Self {
            inner: Mutex::new(Store { entries: HashMap::default(), order: VecDeque::new(), seq: 0 }),
            max_entries: max_entries.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A result stored less than `ttl` ago.
    pub fn fresh(&self, key: &str, ttl: Duration) -> Option<Box<RawValue>> {
        let shared = {
            let store = self.lock();
            let entry = store.entries.get(key)?;
            (entry.stored.elapsed() < ttl).then(|| entry.value.clone())?
        };
        Some(copy(&shared))
    }

    /// The last good result, if younger than `max_age`, with its age.
    pub fn stale(&self, key: &str, max_age: Duration) -> Option<(Box<RawValue>, Duration)> {
        let (shared, age) = {
            let store = self.lock();
            let entry = store.entries.get(key)?;
            let age = entry.stored.elapsed();
            (age < max_age).then(|| (entry.value.clone(), age))?
        };
        Some((copy(&shared), age))
    }

    pub fn store(&self, key: &str, value: Box<RawValue>) {
        let value: Arc<RawValue> = Arc::from(value);
        let key: Arc<str> = Arc::from(key);
        let mut store = self.lock();
        store.seq += 1;
        let seq = store.seq;
        store.order.push_back((key.clone(), seq));
        store.entries.insert(key, Entry { value, stored: Instant::now(), seq });
        while store.entries.len() > self.max_entries {
            let Some((old, old_seq)) = store.order.pop_front() else { break };
            if store.entries.get(&*old).is_some_and(|e| e.seq == old_seq) {
                store.entries.remove(&*old);
            }
        }
        // Keep the order queue from growing with superseded entries.
        if store.order.len() > self.max_entries * 2 {
            let Store { entries, order, .. } = &mut *store;
            order.retain(|(k, s)| entries.get(&**k).is_some_and(|e| e.seq == *s));
        }
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A caller's own copy of a shared result (made outside the lock).
fn copy(shared: &RawValue) -> Box<RawValue> {
    shared.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn fresh_stale_and_bounded() {
        let cache = ResultCache::new(2);
        cache.store("a", raw("1"));
        assert!(cache.fresh("a", Duration::from_secs(1)).is_some());
        assert!(cache.fresh("a", Duration::ZERO).is_none());
        assert!(cache.stale("a", Duration::from_secs(1)).is_some());
        cache.store("b", raw("2"));
        cache.store("c", raw("3"));
        assert_eq!(cache.len(), 2);
        assert!(cache.fresh("a", Duration::from_secs(1)).is_none(), "oldest evicted");
    }
}
