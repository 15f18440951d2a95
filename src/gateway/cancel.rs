//! In-flight `tools/call`s by whose they are and the caller's own request id, so an inbound
//! `notifications/cancelled` can cancel the one it names — and only a call of its own sender.
//!
//! Whose a call is, its [`Scope`], is its owner by the one rule of [`crate::ownership`] (the
//! identified subject, else the anonymous caller's gateway session) and the `Mcp-Session-Id`
//! the request sent; a caller that owns nothing is scoped by its TCP connection instead:
//!
//! 1. **An owner** ([`Owner::Subject`], [`Owner::Session`]): a gateway session presented by
//!    another subject never gets here (`404` before dispatch), so only the owner's own
//!    requests carry its scope. Request ids are not secret and two sessions of one subject
//!    reuse them, so the session id the request sent narrows the scope: a subject's callers
//!    that send different ids (of the gateway's or their own) do not cancel each other's calls.
//! 2. **Nobody** ([`Owner::Nobody`], an anonymous caller without a gateway session): the TCP
//!    connection the call arrived on ([`crate::identity::Caller::peer`], ip and port), narrowed
//!    by an `Mcp-Session-Id` of its own if it sent one. That id alone is not proof of anything
//!    (any other caller can send the same string).
//!
//! The consequence of 2: the listener speaks HTTP/1.1, where a connection carries one request
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

use crate::{identity::Caller, ownership::Owner};

/// Whose a call is: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// An owner (never [`Owner::Nobody`]) and the `Mcp-Session-Id` the request sent (if any).
    Owned(Owner, Option<Arc<str>>),
    /// A caller that owns nothing: its TCP connection, and the `Mcp-Session-Id` of its own it
    /// sent (if any).
    Connection(Option<SocketAddr>, Option<Arc<str>>),
}

impl Scope {
    /// The scope of a request of `owner` ([`Owner::of`]) from `caller` that sent
    /// `session_header` (its `Mcp-Session-Id`, if any).
    pub fn of(owner: &Owner, session_header: Option<&Arc<str>>, caller: &Caller) -> Self {
        match owner {
            Owner::Nobody => Scope::Connection(caller.peer, session_header.cloned()),
            owner => Scope::Owned(owner.clone(), session_header.cloned()),
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
        Scope::Owned(Owner::Session(id.into()), Some(id.into()))
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
    fn the_scope_is_the_owner_and_its_session_else_the_connection() {
        let peer = |port| Some(SocketAddr::from(([127, 0, 0, 1], port)));
        let anonymous = |port| Caller::anonymous(peer(port));
        let alice = Caller { subject: Some("alice".into()), ..anonymous(1) };
        let bob = Caller { subject: Some("bob".into()), ..anonymous(1) };
        let ours: Arc<str> = "mcpgw-session-00".into();
        let theirs: Arc<str> = "sess-a".into();
        let scope = |caller: &Caller, verified: Option<&Arc<str>>, header: Option<&Arc<str>>| {
            Scope::of(&Owner::of(caller, verified), header, caller)
        };
        let as_alice = Owner::Subject("alice".into());
        assert_eq!(
            scope(&alice, Some(&ours), Some(&ours)),
            Scope::Owned(as_alice.clone(), Some(ours.clone()))
        );
        assert_eq!(scope(&alice, None, None), Scope::Owned(as_alice.clone(), None));
        assert_eq!(scope(&alice, None, Some(&theirs)), Scope::Owned(as_alice, Some(theirs.clone())));
        assert_ne!(scope(&alice, None, None), scope(&bob, None, None));
        assert_eq!(
            scope(&anonymous(1), Some(&ours), Some(&ours)),
            Scope::Owned(Owner::Session(ours.clone()), Some(ours.clone()))
        );
        assert_eq!(scope(&anonymous(1), None, None), Scope::Connection(peer(1), None));
        // Two anonymous connections never share a scope, even with the same id of their own.
        assert_ne!(scope(&anonymous(1), None, Some(&theirs)), scope(&anonymous(2), None, Some(&theirs)));
    }
}
