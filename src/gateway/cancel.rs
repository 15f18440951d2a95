//! In-flight `tools/call`s by the caller's own request id, so an inbound
//! `notifications/cancelled` can cancel the one it names.
//!
//! The key is the caller's `Mcp-Session-Id` (when it sends one) and its JSON-RPC id: two
//! callers with sessions never collide. Callers without a session share one id space: a
//! cancel names every session-less call in flight under that id (the orchestrator is expected
//! to use unique ids, as JSON-RPC asks of one client). Cancelling fires the call's
//! [`Registration::cancelled`] future; the dispatcher then drops the call, which runs the
//! existing cancellation path (a session-era upstream gets `notifications/cancelled`, a
//! modern one sees its stream closed) and records the outcome `cancelled`.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use serde_json::Value;
use tokio::sync::Notify;

type Key = (Option<Arc<str>>, String);
/// The calls registered under one key, each with its registration serial.
type Entries = Vec<(u64, Arc<Signal>)>;

/// The registry; one per gateway.
#[derive(Default)]
pub struct InFlightCalls {
    calls: Mutex<HashMap<Key, Entries, foldhash::fast::RandomState>>,
    serial: AtomicU64,
}

struct Signal {
    fired: Arc<AtomicBool>,
    notify: Notify,
}

/// A registered call; dropping it unregisters the call.
pub struct Registration<'a> {
    registry: &'a InFlightCalls,
    key: Key,
    serial: u64,
    signal: Arc<Signal>,
}

/// The registry key's id part: the id's JSON text (`1` and `"1"` are different ids).
fn id_key(id: &Value) -> String {
    id.to_string()
}

impl InFlightCalls {
    /// Registers the call `id` of `session`; `fired` is set when it is cancelled.
    pub fn register(
        &self,
        session: Option<Arc<str>>,
        id: &Value,
        fired: Arc<AtomicBool>,
    ) -> Registration<'_> {
        let key = (session, id_key(id));
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Signal { fired, notify: Notify::new() });
        if let Ok(mut calls) = self.calls.lock() {
            calls.entry(key.clone()).or_default().push((serial, signal.clone()));
        }
        Registration { registry: self, key, serial, signal }
    }

    /// Cancels the calls in flight under `id` for `session`; returns how many there were.
    pub fn cancel(&self, session: Option<Arc<str>>, id: &Value) -> usize {
        let key = (session, id_key(id));
        let Ok(calls) = self.calls.lock() else { return 0 };
        let Some(found) = calls.get(&key) else { return 0 };
        for (_, signal) in found {
            signal.fired.store(true, Ordering::Relaxed);
            signal.notify.notify_one();
        }
        found.len()
    }

    /// Calls registered now (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.calls.lock().map(|c| c.values().map(Vec::len).sum()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Registration<'_> {
    /// Resolves when the call is cancelled (never, otherwise).
    pub async fn cancelled(&self) {
        if self.signal.fired.load(Ordering::Relaxed) {
            return;
        }
        // `notify_one` stores a permit, so a cancel between the check and here is not lost.
        self.signal.notify.notified().await;
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.registry.calls.lock()
            && let Some(list) = calls.get_mut(&self.key)
        {
            list.retain(|(serial, _)| *serial != self.serial);
            if list.is_empty() {
                calls.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_cancel_reaches_only_the_named_call_of_that_session() {
        let calls = InFlightCalls::default();
        let a: Arc<str> = "session-a".into();
        let b: Arc<str> = "session-b".into();
        let (fa, fb, fn_) = (Arc::default(), Arc::default(), Arc::default());
        let ra = calls.register(Some(a.clone()), &json!(1), Arc::clone(&fa));
        let rb = calls.register(Some(b.clone()), &json!(1), Arc::clone(&fb));
        let rn = calls.register(None, &json!("1"), Arc::clone(&fn_));
        assert_eq!(calls.cancel(Some(a.clone()), &json!(1)), 1);
        ra.cancelled().await;
        assert!(fa.load(Ordering::Relaxed) && !fb.load(Ordering::Relaxed) && !fn_.load(Ordering::Relaxed));
        assert_eq!(calls.cancel(None, &json!(1)), 0, "the number 1 is not the string \"1\"");
        drop((ra, rb, rn));
        assert!(calls.is_empty(), "dropping a registration unregisters it");
        assert_eq!(calls.cancel(Some(a), &json!(1)), 0);
    }
}
