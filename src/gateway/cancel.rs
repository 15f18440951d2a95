//! In-flight `tools/call`s by whose they are and the caller's own request id, so an inbound
//! `notifications/cancelled` can cancel the one it names — and only a call of its own sender.
//!
//! Whose a call is, its [`Scope`], is decided from what the gateway can trust, in this order:
//!
//! 1. **The caller's back-channel session**, when its request carries an `Mcp-Session-Id` the
//!    gateway issued (128 random bits; an unknown or expired one of ours is refused with `404`
//!    before any dispatch, so one that gets here is live). Only the session's holder knows it.
//! 2. **The caller's identified subject** ([`crate::identity::Caller::subject`]), when identity
//!    is configured: a caller can cancel only calls made under its own identity.
//! 3. **The TCP connection** the call arrived on ([`crate::identity::Caller::peer`], ip and
//!    port), for an anonymous caller without a session of ours.
//!
//! An `Mcp-Session-Id` the gateway never issued (a client's own) is not proof of anything (any
//! other caller can send the same string), so it only narrows scopes 2 and 3: two callers of
//! one subject that send different ids of their own do not cancel each other's calls.
//!
//! The consequence of 3: the listener speaks HTTP/1.1, where a connection carries one request
//! at a time, so an anonymous sessionless caller cannot send a `notifications/cancelled` on the
//! connection its call is still running on, except in the same batch. It cancels by closing
//! that connection (the call is dropped, the usual disconnect path), or it gets a scope it can
//! use from another connection: a back-channel session, or an identity. That is the price of
//! not letting any caller on the network cancel any other caller's call 7.
//!
//! Cancelling fires the call's [`Registration::cancelled`] future; the dispatcher then drops the
//! call, which runs the existing cancellation path (a session-era upstream gets
//! `notifications/cancelled`, a modern one sees its stream closed) and records the outcome
//! `cancelled`.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use serde_json::Value;
use tokio::sync::Notify;

use crate::{backchannel::ID_PREFIX, identity::Caller};

/// Whose a call is: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A back-channel session the gateway issued.
    Session(Arc<str>),
    /// An identified caller, and the `Mcp-Session-Id` of its own it sent (if any).
    Subject(Arc<str>, Option<Arc<str>>),
    /// An anonymous caller without a session of ours: its TCP connection, and the
    /// `Mcp-Session-Id` of its own it sent (if any).
    Connection(Option<SocketAddr>, Option<Arc<str>>),
}

impl Scope {
    /// The scope of a request that sent `session_header` (its `Mcp-Session-Id`, if any) from
    /// `caller`. An id with the gateway's prefix is one the gateway issued and still holds:
    /// unknown ones are refused before dispatch.
    pub fn of(session_header: Option<&Arc<str>>, caller: &Caller) -> Self {
        match session_header {
            Some(id) if id.starts_with(ID_PREFIX) => Scope::Session(id.clone()),
            own => match &caller.subject {
                Some(subject) => Scope::Subject(subject.clone(), own.cloned()),
                None => Scope::Connection(caller.peer, own.cloned()),
            },
        }
    }
}

type Key = (Scope, String);
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
    /// Registers the call `id` of `scope`; `fired` is set when it is cancelled.
    pub fn register(&self, scope: Scope, id: &Value, fired: Arc<AtomicBool>) -> Registration<'_> {
        let key = (scope, id_key(id));
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Signal { fired, notify: Notify::new() });
        if let Ok(mut calls) = self.calls.lock() {
            calls.entry(key.clone()).or_default().push((serial, signal.clone()));
        }
        Registration { registry: self, key, serial, signal }
    }

    /// Cancels the calls in flight under `id` in `scope`; returns how many there were.
    pub fn cancel(&self, scope: Scope, id: &Value) -> usize {
        let key = (scope, id_key(id));
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

    fn session(id: &str) -> Scope {
        Scope::Session(id.into())
    }

    #[tokio::test]
    async fn a_cancel_reaches_only_the_named_call_of_that_session() {
        let calls = InFlightCalls::default();
        let (fa, fb, fn_) = (Arc::default(), Arc::default(), Arc::default());
        let ra = calls.register(session("session-a"), &json!(1), Arc::clone(&fa));
        let rb = calls.register(session("session-b"), &json!(1), Arc::clone(&fb));
        let rn = calls.register(session("session-c"), &json!("1"), Arc::clone(&fn_));
        assert_eq!(calls.cancel(session("session-a"), &json!(1)), 1);
        ra.cancelled().await;
        assert!(fa.load(Ordering::Relaxed) && !fb.load(Ordering::Relaxed) && !fn_.load(Ordering::Relaxed));
        assert_eq!(calls.cancel(session("session-c"), &json!(1)), 0, "the number 1 is not the string \"1\"");
        drop((ra, rb, rn));
        assert!(calls.is_empty(), "dropping a registration unregisters it");
        assert_eq!(calls.cancel(session("session-a"), &json!(1)), 0);
    }

    #[test]
    fn the_scope_is_our_session_else_the_subject_else_the_connection() {
        let peer = |port| Some(SocketAddr::from(([127, 0, 0, 1], port)));
        let anonymous = |port| Caller::anonymous(peer(port));
        let alice = Caller { subject: Some("alice".into()), ..anonymous(1) };
        let ours: Arc<str> = format!("{ID_PREFIX}session-00").into();
        let theirs: Arc<str> = "sess-a".into();
        assert_eq!(Scope::of(Some(&ours), &alice), Scope::Session(ours.clone()));
        assert_eq!(Scope::of(Some(&ours), &anonymous(1)), Scope::Session(ours.clone()));
        assert_eq!(Scope::of(None, &alice), Scope::Subject("alice".into(), None));
        assert_eq!(Scope::of(Some(&theirs), &alice), Scope::Subject("alice".into(), Some(theirs.clone())));
        assert_eq!(Scope::of(None, &anonymous(1)), Scope::Connection(peer(1), None));
        // Two anonymous connections never share a scope, even with the same id of their own.
        assert_ne!(Scope::of(Some(&theirs), &anonymous(1)), Scope::of(Some(&theirs), &anonymous(2)));
        assert_ne!(
            Scope::of(None, &alice),
            Scope::of(None, &Caller { subject: Some("bob".into()), ..anonymous(1) })
        );
    }
}
