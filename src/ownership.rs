//! Whose a thing is: the one rule for everything the gateway keeps of one caller for a later
//! request — relayed tasks (`gateway/tasks.rs`), the scope of request ids for cancellation
//! (`gateway/cancel.rs`), held exchanges (`backchannel/held.rs`), back-channel sessions and the
//! relayed requests waiting in them (`backchannel/sessions.rs`, `server/sessions.rs`), and
//! listen streams with their stateless ids (`backchannel/listeners.rs`). Written down for
//! operators in `docs/security.md#ownership`.
//!
//! The rule:
//! 1. **A gateway session is bound to the subject that opened it, and to the endpoint it was
//!    opened on** ([`OpenedBy`]; `[endpoints.NAME]`, `docs/endpoints.md`): a
//!    back-channel session remembers the subject of its `initialize`, a stateless listen id
//!    carries it in its keyed tag. A request presenting it with another subject — an anonymous
//!    request presenting an identified subject's session, or the reverse — is answered as for
//!    an unknown session: `404` (`reason: unknown_session`). Why 404 rather than 403, or
//!    serving the request as sessionless: a 403 would confirm to the presenter that the id is
//!    live (an oracle for stolen or guessed ids), and serving it sessionless would silently
//!    hand a caller a different owner than the one it asked for; 404 is what the transport
//!    tells a client whose session is gone, so an honest client initializes again.
//! 2. **An identified caller owns by its subject** ([`Owner::Subject`]), whichever session of
//!    its own it uses.
//! 3. **An anonymous caller owns only through a session the gateway minted for it**
//!    ([`Owner::Session`]: a back-channel session id or a listen id, 128 random bits). An
//!    `Mcp-Session-Id` the gateway never issued proves nothing — any other caller can send the
//!    same string — so it never makes an owner (it only narrows scopes, below).
//! 4. **What has no owner cannot be listed by anyone** ([`Owner::Nobody`], an anonymous caller
//!    without a gateway session). Such a caller may still create a task (its call answers at
//!    once, the work outlives it), but the task is *unlisted*: no `tasks/list` shows it, its
//!    creator's included (nothing tells two such callers apart), and it is reachable only by
//!    the gateway's unguessable task id, from a caller that owns nothing either
//!    ([`Owner::may_use_by_id`]). A caller that wants its tasks listed opens a session (any
//!    session-era `initialize` is given a listen id while list changes are on) or identifies.
//!
//! Request ids (cancellation) and held questions are not unguessable, or not only: their scope
//! is the owner *and* the `Mcp-Session-Id` the request sent (two sessions of one subject reuse
//! JSON-RPC ids), and for an owner-less caller its TCP connection (`gateway/cancel.rs`).
//! Subscriptions to progress and log entries belong to their call and travel only on that
//! call's own answer, so they keep no table another caller could reach.

use std::sync::Arc;

use crate::identity::Caller;

/// Whose something is: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// An identified caller.
    Subject(Arc<str>),
    /// An anonymous caller through a session the gateway minted for it.
    Session(Arc<str>),
    /// An anonymous caller without a gateway session: owns nothing.
    Nobody,
}

impl Owner {
    /// The owner of a request from `caller` that presented `session`: a gateway session id
    /// already found live *and bound to this caller* ([`OpenedBy::admits`]), or `None`.
    pub fn of(caller: &Caller, session: Option<&Arc<str>>) -> Self {
        match (&caller.subject, session) {
            (Some(subject), _) => Owner::Subject(subject.clone()),
            (None, Some(session)) => Owner::Session(session.clone()),
            (None, None) => Owner::Nobody,
        }
    }

    /// Whether this owner may see (list, cancel by request id, answer) what `other` owns.
    /// Nobody may see what nobody owns.
    pub fn may_access(&self, other: &Owner) -> bool {
        self == other && *self != Owner::Nobody
    }

    /// Whether this owner may use what `other` owns when it names it by an unguessable id the
    /// gateway minted (a task id): as [`Self::may_access`], and an owner-less caller may use
    /// an owner-less thing (the id is its bearer capability).
    pub fn may_use_by_id(&self, other: &Owner) -> bool {
        self.may_access(other) || (*self == Owner::Nobody && *other == Owner::Nobody)
    }

    /// The owner as a kind and a name, for digests (`backchannel/held.rs`).
    pub fn parts(&self) -> (&'static str, Option<&str>) {
        match self {
            Owner::Subject(subject) => ("subject", Some(subject)),
            Owner::Session(session) => ("session", Some(session)),
            Owner::Nobody => ("nobody", None),
        }
    }
}

/// The subject a gateway session was opened by (`None`: an anonymous caller), and the
/// endpoint it was opened on (`None`: the plain `/mcp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenedBy(Option<Arc<str>>, Option<Arc<str>>);

impl OpenedBy {
    /// The binding of a session `caller` opens.
    pub fn of(caller: &Caller) -> Self {
        Self(caller.subject.clone(), caller.endpoint.clone())
    }

    /// Whether `caller` may present the session: the same subject, or anonymous for an
    /// anonymous session, on the same endpoint (a session opened on `/mcp/a` is unknown on
    /// `/mcp/b` and on `/mcp`: 404, as for another subject's).
    pub fn admits(&self, caller: &Caller) -> bool {
        self.0 == caller.subject && self.1 == caller.endpoint
    }

    /// The subject, for a keyed tag (`backchannel/listeners.rs`).
    pub fn subject(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The endpoint, for a keyed tag (`backchannel/listeners.rs`).
    pub fn endpoint(&self) -> Option<&str> {
        self.1.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(subject: Option<&str>) -> Caller {
        Caller { subject: subject.map(Arc::from), ..Caller::anonymous(None) }
    }

    #[test]
    fn the_subject_owns_else_a_gateway_session_else_nobody() {
        let session: Arc<str> = "mcpgw-session-00".into();
        assert_eq!(Owner::of(&caller(Some("alice")), Some(&session)), Owner::Subject("alice".into()));
        assert_eq!(Owner::of(&caller(Some("alice")), None), Owner::Subject("alice".into()));
        assert_eq!(Owner::of(&caller(None), Some(&session)), Owner::Session(session.clone()));
        assert_eq!(Owner::of(&caller(None), None), Owner::Nobody);
    }

    #[test]
    fn nobody_sees_what_nobody_owns_and_an_unowned_id_is_a_bearer_for_owner_less_callers() {
        let (alice, bob) = (Owner::Subject("alice".into()), Owner::Subject("bob".into()));
        let session = Owner::Session("mcpgw-session-00".into());
        assert!(alice.may_access(&alice) && session.may_access(&session));
        assert!(!alice.may_access(&bob) && !session.may_access(&alice) && !alice.may_access(&session));
        assert!(!Owner::Nobody.may_access(&Owner::Nobody), "no listing of what has no owner");
        assert!(Owner::Nobody.may_use_by_id(&Owner::Nobody));
        assert!(!alice.may_use_by_id(&Owner::Nobody) && !session.may_use_by_id(&Owner::Nobody));
        assert!(!Owner::Nobody.may_use_by_id(&alice) && !Owner::Nobody.may_use_by_id(&session));
    }

    #[test]
    fn a_session_admits_only_the_subject_that_opened_it() {
        let by_alice = OpenedBy::of(&caller(Some("alice")));
        assert!(by_alice.admits(&caller(Some("alice"))));
        assert!(!by_alice.admits(&caller(Some("bob"))));
        assert!(!by_alice.admits(&caller(None)), "an anonymous request cannot present alice's session");
        let anonymous = OpenedBy::of(&caller(None));
        assert!(anonymous.admits(&caller(None)));
        assert!(!anonymous.admits(&caller(Some("alice"))));
        // The endpoint it was opened on is part of the binding.
        let on = |subject: Option<&str>, endpoint: Option<&str>| {
            caller(subject).at_endpoint(endpoint.map(Arc::from))
        };
        let alice_on_cart = OpenedBy::of(&on(Some("alice"), Some("cart")));
        assert!(alice_on_cart.admits(&on(Some("alice"), Some("cart"))));
        assert!(!alice_on_cart.admits(&on(Some("alice"), Some("support"))), "another endpoint");
        assert!(!alice_on_cart.admits(&caller(Some("alice"))), "the plain /mcp");
        assert!(!by_alice.admits(&on(Some("alice"), Some("cart"))), "a plain /mcp session on an endpoint");
    }
}
