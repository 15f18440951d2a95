//! Read-only tool results: a bounded cache (fresh hits within a TTL, last good results kept
//! for stale fallbacks) and in-flight sharing, so identical read-only calls running at the
//! same time make one upstream call. Keys are tool + canonical arguments. Never used for
//! tools that are not read-only.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::value::RawValue;
use tokio::sync::broadcast;

use crate::error::GatewayError;

/// What a shared call yields.
pub type SharedResult = Result<Box<RawValue>, GatewayError>;

struct Entry {
    value: Box<RawValue>,
    stored: Instant,
    seq: u64,
}

/// Bounded result store; the oldest entries are evicted first.
pub struct ResultCache {
    inner: Mutex<Store>,
    max_entries: usize,
}

struct Store {
    entries: HashMap<String, Entry>,
    order: VecDeque<(String, u64)>,
    seq: u64,
}

impl ResultCache {
    pub fn new(max_entries: usize) -> Self {
        Self {
            inner: Mutex::new(Store { entries: HashMap::new(), order: VecDeque::new(), seq: 0 }),
            max_entries: max_entries.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A result stored less than `ttl` ago.
    pub fn fresh(&self, key: &str, ttl: Duration) -> Option<Box<RawValue>> {
        let store = self.lock();
        let entry = store.entries.get(key)?;
        (entry.stored.elapsed() < ttl).then(|| entry.value.clone())
    }

    /// The last good result, if younger than `max_age`, with its age.
    pub fn stale(&self, key: &str, max_age: Duration) -> Option<(Box<RawValue>, Duration)> {
        let store = self.lock();
        let entry = store.entries.get(key)?;
        let age = entry.stored.elapsed();
        (age < max_age).then(|| (entry.value.clone(), age))
    }

    pub fn store(&self, key: String, value: Box<RawValue>) {
        let mut store = self.lock();
        store.seq += 1;
        let seq = store.seq;
        store.order.push_back((key.clone(), seq));
        store.entries.insert(key, Entry { value, stored: Instant::now(), seq });
        while store.entries.len() > self.max_entries {
            let Some((old, old_seq)) = store.order.pop_front() else { break };
            if store.entries.get(&old).is_some_and(|e| e.seq == old_seq) {
                store.entries.remove(&old);
            }
        }
        // Keep the order queue from growing with superseded entries.
        if store.order.len() > self.max_entries * 2 {
            let Store { entries, order, .. } = &mut *store;
            order.retain(|(k, s)| entries.get(k).is_some_and(|e| e.seq == *s));
        }
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type Waiting<T> = Arc<Mutex<HashMap<String, broadcast::Sender<T>>>>;

/// Identical calls in flight: the first runs, the others wait for its result.
pub struct InFlight<T = SharedResult> {
    calls: Waiting<T>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        Self { calls: Arc::default() }
    }
}

/// The caller's role for one key.
pub enum Join<T = SharedResult> {
    /// Run the call and [`Leader::finish`] with its result.
    Leader(Leader<T>),
    /// Wait for the leader's result.
    Follower(broadcast::Receiver<T>),
}

/// Held by the caller that runs the call; followers are released when it finishes or drops.
pub struct Leader<T = SharedResult> {
    calls: Waiting<T>,
    key: String,
}

impl<T: Clone> InFlight<T> {
    pub fn join(&self, key: &str) -> Join<T> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = calls.get(key) {
            return Join::Follower(sender.subscribe());
        }
        let (sender, _) = broadcast::channel(1);
        calls.insert(key.to_string(), sender);
        Join::Leader(Leader { calls: self.calls.clone(), key: key.to_string() })
    }
}

impl<T: Clone> Leader<T> {
    pub fn finish(self, result: &T) {
        let sender = self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
        if let Some(sender) = sender {
            let _ = sender.send(result.clone());
        }
    }
}

impl<T> Drop for Leader<T> {
    fn drop(&mut self) {
        // A cancelled leader: followers see the channel close and run their own call.
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
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
        cache.store("a".into(), raw("1"));
        assert!(cache.fresh("a", Duration::from_secs(1)).is_some());
        assert!(cache.fresh("a", Duration::ZERO).is_none());
        assert!(cache.stale("a", Duration::from_secs(1)).is_some());
        cache.store("b".into(), raw("2"));
        cache.store("c".into(), raw("3"));
        assert_eq!(cache.len(), 2);
        assert!(cache.fresh("a", Duration::from_secs(1)).is_none(), "oldest evicted");
    }

    #[tokio::test]
    async fn followers_get_the_leaders_result() {
        let inflight: InFlight = InFlight::default();
        let Join::Leader(leader) = inflight.join("k") else { panic!("first is leader") };
        let Join::Follower(mut follower) = inflight.join("k") else { panic!("second follows") };
        leader.finish(&Ok(raw("7")));
        assert_eq!(follower.recv().await.unwrap().unwrap().get(), "7");
        assert!(matches!(inflight.join("k"), Join::Leader(_)), "finished calls are forgotten");
    }
}
