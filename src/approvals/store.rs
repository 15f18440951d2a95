//! The approvals waiting for a decision or for their call, bound to the exact call.
//!
//! An approval is keyed by its [`Binding`] — caller subject, endpoint, tool, server and the
//! SHA-256 of the canonical arguments as the server will see them — and carries a random id
//! (the nonce) and, for the user's approval page, a random secret. A call passes only when an
//! approval of the same binding is approved and unexpired, and passing consumes it: a changed
//! argument, another caller or endpoint finds no approval (and asks anew), an expired one is
//! swept, a used one is gone (a replay asks anew). Nothing here sends anything: the door asks,
//! and the call is refused until it passes.
//!
//! Bounded: `max_pending` approvals in all, `max_pending_per_caller` per subject; the history
//! of decided approvals keeps the last `history`. Each change wakes the waiters ([`wait`]) —
//! an elicitation or a task waiting on its approval re-reads its state.
//!
//! [`wait`]: ApprovalStore::changed

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::rules::Requirement;
use crate::config::Approver;

/// What an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Binding {
    pub subject: Option<Arc<str>>,
    pub endpoint: Option<Arc<str>>,
    pub tool: Arc<str>,
    pub server: Arc<str>,
    pub args_sha256: String,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Asked; no decision yet.
    Pending,
    /// Approved; its call has not come back yet.
    Approved,
    /// Denied.
    Denied,
    /// Its call passed the door with it (approved, then used once).
    Used,
    /// Not decided, or not used, in time.
    Expired,
    /// Dropped by a restart before its call came back (from the journal).
    Lost,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Denied => "denied",
            Status::Used => "used",
            Status::Expired => "expired",
            Status::Lost => "lost",
        }
    }
}

/// One approval, as the console, the page and the audit trail see it.
#[derive(Debug, Clone)]
pub struct Approval {
    /// The nonce: 128 random bits, hex.
    pub id: String,
    pub binding: Binding,
    /// The arguments as the server will see them (shown to the approver; never logged).
    pub arguments: Value,
    pub approver: Approver,
    /// What asked for the approval (a rule's name, or `cedar:<policy id>`).
    pub rule: String,
    pub status: Status,
    pub asked_at: SystemTime,
    /// When it expires: undecided, or approved and not used.
    pub expires_at: SystemTime,
    /// Who decided (`operator`, `user`, `user:<subject>`), and when.
    pub decided_by: Option<String>,
    pub decided_at: Option<SystemTime>,
}

impl Approval {
    /// The facts a listing shows (the console, `GET /admin/approvals`).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "status": self.status.as_str(),
            "approver": self.approver.as_str(),
            "rule": self.rule,
            "subject": self.binding.subject.as_deref(),
            "endpoint": self.binding.endpoint.as_deref(),
            "tool": self.binding.tool.as_ref(),
            "server": self.binding.server.as_ref(),
            "args_sha256": self.binding.args_sha256,
            "arguments": self.arguments,
            "asked_at": rfc3339(self.asked_at),
            "expires_at": rfc3339(self.expires_at),
            "decided_by": self.decided_by,
            "decided_at": self.decided_at.map(rfc3339),
        })
    }
}

/// An RFC 3339 UTC timestamp with milliseconds.
pub fn rfc3339(at: SystemTime) -> String {
    let mut out = Vec::with_capacity(24);
    crate::telemetry::json_lines::timestamp(&mut out, at);
    String::from_utf8_lossy(&out).into_owned()
}

/// Something to audit and count.
#[derive(Debug, Clone)]
pub struct Event {
    /// `asked`, `approved`, `denied`, `used`, `expired`, `lost`.
    pub what: &'static str,
    pub approval: Approval,
}

/// What the door learns for one call that needs approval.
#[derive(Debug)]
pub enum Gate {
    /// Approved for exactly this call: it goes on (the approval is used up).
    Pass(Approval),
    /// Waiting for a decision (asked now, or before): the call is refused for now. The secret
    /// is the user's page's, for the caller that may carry it.
    Wait { approval: Approval, secret: String, new: bool },
    /// Denied: the call is refused (the denial is answered once; a later call asks anew).
    Denied(Approval),
    /// Too many approvals waiting: `true` for this caller's bound, `false` for the total.
    Full { per_caller: bool, limit: usize },
}

/// Why a decision was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such approval waiting (never asked, or already decided, used or expired).
    NotFound,
    /// The user's secret does not match (or the approval is the operator's to decide).
    WrongSecret,
}

/// Bounds and expiry in force for one call (read from the settings of the call).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub expiry: Duration,
    pub max_pending: usize,
    pub max_pending_per_caller: usize,
    pub history: usize,
}

struct Entry {
    approval: Approval,
    /// The user's page secret (256 random bits, hex), and its SHA-256 for the comparison.
    secret: String,
    secret_digest: [u8; 32],
    expires: Instant,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Entry>,
    by_binding: HashMap<Binding, String>,
    per_caller: HashMap<Option<Arc<str>>, usize>,
    history: VecDeque<Approval>,
}

/// The approvals of one gateway process.
#[derive(Default)]
pub struct ApprovalStore {
    inner: Mutex<Inner>,
    changed: tokio::sync::Notify,
}

impl ApprovalStore {
    /// The gate of the call bound to `binding`, which `requirement` says needs approval.
    pub fn gate(
        &self,
        limits: Limits,
        binding: Binding,
        arguments: &Value,
        requirement: &Requirement,
        events: &mut Vec<Event>,
    ) -> Gate {
        let Ok(mut inner) = self.inner.lock() else {
            return Gate::Full { per_caller: false, limit: 0 };
        };
        inner.sweep(Instant::now(), limits.history, events);
        if let Some(id) = inner.by_binding.get(&binding).cloned() {
            let status = inner.by_id.get(&id).map(|e| e.approval.status);
            match status {
                Some(Status::Approved) => {
                    if let Some(approval) = inner.remove(&id, limits.history, Status::Used) {
                        events.push(Event { what: "used", approval: approval.clone() });
                        drop(inner);
                        self.changed.notify_waiters();
                        return Gate::Pass(approval);
                    }
                }
                Some(Status::Denied) => {
                    if let Some(approval) = inner.remove(&id, limits.history, Status::Denied) {
                        return Gate::Denied(approval);
                    }
                }
                Some(_) => {
                    if let Some(entry) = inner.by_id.get(&id) {
                        let (approval, secret) = (entry.approval.clone(), entry.secret.clone());
                        return Gate::Wait { approval, secret, new: false };
                    }
                }
                None => {}
            }
        }
        if inner.by_id.len() >= limits.max_pending {
            return Gate::Full { per_caller: false, limit: limits.max_pending };
        }
        let mine = inner.per_caller.get(&binding.subject).copied().unwrap_or(0);
        if mine >= limits.max_pending_per_caller {
            return Gate::Full { per_caller: true, limit: limits.max_pending_per_caller };
        }
        let now = SystemTime::now();
        let approval = Approval {
            id: random_hex(16),
            binding: binding.clone(),
            arguments: arguments.clone(),
            approver: requirement.approver,
            rule: requirement.rule.clone(),
            status: Status::Pending,
            asked_at: now,
            expires_at: now + limits.expiry,
            decided_by: None,
            decided_at: None,
        };
        let secret = random_hex(32);
        let secret_digest = Sha256::digest(secret.as_bytes()).into();
        let entry = Entry {
            approval: approval.clone(),
            secret: secret.clone(),
            secret_digest,
            expires: Instant::now() + limits.expiry,
        };
        *inner.per_caller.entry(binding.subject.clone()).or_default() += 1;
        inner.by_binding.insert(binding, approval.id.clone());
        inner.by_id.insert(approval.id.clone(), entry);
        events.push(Event { what: "asked", approval: approval.clone() });
        Gate::Wait { approval, secret, new: true }
    }

    /// Approves or denies a pending approval. `secret`: the user's page secret (`None`: an
    /// operator, authenticated by the admin token). An approved call gets `expiry` from now to
    /// come back.
    pub fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        secret: Option<&str>,
        limits: Limits,
        events: &mut Vec<Event>,
    ) -> Result<Approval, Refused> {
        let Ok(mut inner) = self.inner.lock() else { return Err(Refused::NotFound) };
        inner.sweep(Instant::now(), limits.history, events);
        let entry = inner.by_id.get_mut(id).ok_or(Refused::NotFound)?;
        if let Some(secret) = secret {
            let given: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
            if entry.approval.approver != Approver::User || !same_digest(&given, &entry.secret_digest) {
                return Err(Refused::WrongSecret);
            }
        }
        if entry.approval.status != Status::Pending {
            return Err(Refused::NotFound);
        }
        let now = SystemTime::now();
        entry.approval.status = if approve { Status::Approved } else { Status::Denied };
        entry.approval.decided_by = Some(by.to_string());
        entry.approval.decided_at = Some(now);
        entry.approval.expires_at = now + limits.expiry;
        entry.expires = Instant::now() + limits.expiry;
        let approval = entry.approval.clone();
        events.push(Event { what: if approve { "approved" } else { "denied" }, approval: approval.clone() });
        drop(inner);
        self.changed.notify_waiters();
        Ok(approval)
    }

    /// The approval `id` when `secret` is its page's and it waits for a decision (the page
    /// shows it; no side effect). A decided approval's link is spent.
    pub fn for_page(&self, id: &str, secret: &str) -> Option<Approval> {
        let inner = self.inner.lock().ok()?;
        let entry = inner.by_id.get(id)?;
        let given: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        (entry.approval.approver == Approver::User
            && entry.approval.status == Status::Pending
            && same_digest(&given, &entry.secret_digest)
            && entry.expires > Instant::now())
        .then(|| entry.approval.clone())
    }

    /// The approval `id` as it stands (waiting, or in the history).
    pub fn status(&self, id: &str) -> Option<Approval> {
        let inner = self.inner.lock().ok()?;
        if let Some(entry) = inner.by_id.get(id) {
            return Some(entry.approval.clone());
        }
        inner.history.iter().rev().find(|a| a.id == id).cloned()
    }

    /// Waiting approvals (oldest first) and the history (newest first), after a sweep.
    pub fn list(&self, limits: Limits, events: &mut Vec<Event>) -> (Vec<Approval>, Vec<Approval>) {
        let Ok(mut inner) = self.inner.lock() else { return (Vec::new(), Vec::new()) };
        inner.sweep(Instant::now(), limits.history, events);
        let mut waiting: Vec<Approval> = inner.by_id.values().map(|e| e.approval.clone()).collect();
        waiting.sort_by_key(|a| a.asked_at);
        let history = inner.history.iter().rev().cloned().collect();
        (waiting, history)
    }

    /// Expires what is past its time (audited by the caller of this).
    pub fn sweep(&self, limits: Limits, events: &mut Vec<Event>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.sweep(Instant::now(), limits.history, events);
        }
        if !events.is_empty() {
            self.changed.notify_waiters();
        }
    }

    /// Every approval waiting (for the journal's compaction).
    pub fn snapshot(&self) -> Vec<Approval> {
        self.inner.lock().map(|i| i.by_id.values().map(|e| e.approval.clone()).collect()).unwrap_or_default()
    }

    /// How many approvals wait (the gauge).
    pub fn waiting(&self) -> usize {
        self.inner.lock().map(|i| i.by_id.len()).unwrap_or(0)
    }

    /// Resolves at the next change of any approval (a waiter then re-reads its own).
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Puts back an approved call found in the journal at start.
    pub fn restore(&self, approval: Approval, remaining: Duration) {
        let Ok(mut inner) = self.inner.lock() else { return };
        let secret = random_hex(32);
        let secret_digest = Sha256::digest(secret.as_bytes()).into();
        *inner.per_caller.entry(approval.binding.subject.clone()).or_default() += 1;
        inner.by_binding.insert(approval.binding.clone(), approval.id.clone());
        let entry =
            Entry { approval: approval.clone(), secret, secret_digest, expires: Instant::now() + remaining };
        inner.by_id.insert(approval.id, entry);
    }

    /// Records an approval in the history only (one a restart lost).
    pub fn remember(&self, approval: Approval, history: usize) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.keep(approval, history);
        }
    }
}

impl Inner {
    fn remove(&mut self, id: &str, history: usize, status: Status) -> Option<Approval> {
        let entry = self.by_id.remove(id)?;
        if self.by_binding.get(&entry.approval.binding).is_some_and(|i| i == id) {
            self.by_binding.remove(&entry.approval.binding);
        }
        if let Some(count) = self.per_caller.get_mut(&entry.approval.binding.subject) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_caller.remove(&entry.approval.binding.subject);
            }
        }
        let mut approval = entry.approval;
        approval.status = status;
        self.keep(approval.clone(), history);
        Some(approval)
    }

    fn keep(&mut self, approval: Approval, history: usize) {
        if history == 0 {
            return;
        }
        while self.history.len() >= history {
            self.history.pop_front();
        }
        self.history.push_back(approval);
    }

    fn sweep(&mut self, now: Instant, history: usize, events: &mut Vec<Event>) {
        let expired: Vec<String> =
            self.by_id.iter().filter(|(_, e)| e.expires <= now).map(|(id, _)| id.clone()).collect();
        for id in expired {
            if let Some(approval) = self.remove(&id, history, Status::Expired) {
                events.push(Event { what: "expired", approval });
            }
        }
    }
}

/// `n` random bytes from the OS generator, hex.
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    if getrandom::fill(&mut bytes).is_err() {
        tracing::error!("no OS randomness for an approval id; falling back to a weak generator");
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Constant-time equality of two digests.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { expiry: Duration::from_secs(60), max_pending: 3, max_pending_per_caller: 2, history: 10 }
    }

    fn binding(subject: &str, digest: &str) -> Binding {
        Binding {
            subject: Some(subject.into()),
            endpoint: None,
            tool: "checkout".into(),
            server: "store".into(),
            args_sha256: digest.into(),
        }
    }

    fn user() -> Requirement {
        Requirement { approver: Approver::User, rule: "big".into() }
    }

    fn ask(store: &ApprovalStore, b: Binding) -> Gate {
        store.gate(limits(), b, &Value::Null, &user(), &mut Vec::new())
    }

    #[test]
    fn an_approval_passes_its_own_call_once_and_no_other() {
        let store = ApprovalStore::default();
        let Gate::Wait { approval, secret, new: true } = ask(&store, binding("alice", "d1")) else {
            panic!()
        };
        // Asking again waits on the same approval.
        let Gate::Wait { approval: again, new: false, .. } = ask(&store, binding("alice", "d1")) else {
            panic!()
        };
        assert_eq!(again.id, approval.id);
        // The page's secret decides; another secret does not.
        let mut events = Vec::new();
        assert_eq!(
            store.decide(&approval.id, true, "user", Some("nope"), limits(), &mut events).unwrap_err(),
            Refused::WrongSecret
        );
        store.decide(&approval.id, true, "user", Some(&secret), limits(), &mut events).unwrap();
        assert_eq!(
            store.decide(&approval.id, true, "user", Some(&secret), limits(), &mut events).unwrap_err(),
            Refused::NotFound,
            "decided once"
        );
        // Another argument digest, another caller: not approved, asked anew.
        assert!(matches!(ask(&store, binding("alice", "d2")), Gate::Wait { new: true, .. }));
        assert!(matches!(
            ask(&store, binding("bob", "d1")),
            Gate::Full { per_caller: false, .. } | Gate::Wait { new: true, .. }
        ));
        // The call itself passes, once; a replay asks anew.
        assert!(matches!(ask(&store, binding("alice", "d1")), Gate::Pass(_)));
        assert!(matches!(ask(&store, binding("alice", "d1")), Gate::Wait { new: true, .. }));
    }

    #[test]
    fn bounds_refuse_new_approvals_and_expiry_frees_them() {
        let store = ApprovalStore::default();
        assert!(matches!(ask(&store, binding("alice", "1")), Gate::Wait { .. }));
        assert!(matches!(ask(&store, binding("alice", "2")), Gate::Wait { .. }));
        assert!(matches!(ask(&store, binding("alice", "3")), Gate::Full { per_caller: true, limit: 2 }));
        assert!(matches!(ask(&store, binding("bob", "1")), Gate::Wait { .. }));
        assert!(matches!(ask(&store, binding("carol", "1")), Gate::Full { per_caller: false, limit: 3 }));
        // Expired (an expiry of zero): swept, audited, history kept.
        let mut events = Vec::new();
        let zero = Limits { expiry: Duration::ZERO, ..limits() };
        store.sweep(zero, &mut events);
        assert_eq!(events.len(), 0, "their own expiry is a minute");
        let store = ApprovalStore::default();
        store.gate(zero, binding("alice", "1"), &Value::Null, &user(), &mut events);
        events.clear();
        store.sweep(limits(), &mut events);
        assert_eq!(events.iter().map(|e| e.what).collect::<Vec<_>>(), ["expired"]);
        assert_eq!(store.waiting(), 0);
        let (_, history) = store.list(limits(), &mut Vec::new());
        assert_eq!(history[0].status, Status::Expired);
    }

    #[test]
    fn a_denial_is_answered_once() {
        let store = ApprovalStore::default();
        let Gate::Wait { approval, .. } = ask(&store, binding("alice", "1")) else { panic!() };
        store.decide(&approval.id, false, "operator", None, limits(), &mut Vec::new()).unwrap();
        assert!(matches!(ask(&store, binding("alice", "1")), Gate::Denied(_)));
        assert!(matches!(ask(&store, binding("alice", "1")), Gate::Wait { new: true, .. }));
    }
}
