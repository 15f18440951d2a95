//! The caller's back-channel: everything that reaches a caller of `tools/call` besides its
//! answer, and the sessions that make it possible. Three things travel on it, all on the
//! call's one notification channel ([`ProgressSink`]), in the order they came:
//! - progress and log entries the upstream sends for the call ([`subscriptions`]);
//! - server→client requests (sampling, elicitation, roots) relayed to a caller that declared
//!   the capability ([`relay`]), over an inbound session ([`caller`], kept in [`sessions`]);
//! - for a modern (2026-07-28) caller, which has no such stream: a session-era server's
//!   requests become `input_required` results while the upstream exchange is held open
//!   ([`held`]), and the caller's retry answers them;
//! - and, off any call, a server's `notifications/resources/updated` for the callers subscribed
//!   to that URI ([`resource_updates`]);
//! - nothing else: each item is a typed value rebuilt from validated fields ([`to_caller`]),
//!   never the upstream's JSON.
//!
//! This room sits below the rooms that use it: `gateway/`, `upstream/`, `resilience/` and
//! `server/` import it, and it imports none of them. The inbound side (`server/`) writes what it
//! carries on the caller's event stream and routes the caller's answers back; a transport reads
//! the upstream's messages off its wire and hands them here.

pub mod caller;
pub mod held;
pub mod listeners;
pub mod relay;
pub mod resource_updates;
pub mod sessions;
pub mod subscriptions;
pub mod to_caller;

pub use self::{
    caller::{CallerSession, ID_PREFIX},
    relay::Relay,
    subscriptions::{LOG_LEVELS, LogSubscription, META_LOG_LEVEL},
    to_caller::ToCaller,
};

/// The sending end of a call's notification channel (progress, log entries and relayed
/// requests, each rebuilt from validated fields: [`to_caller`]). Bounded and lossy on purpose:
/// a transport uses `try_send`, so an upstream that floods progress cannot grow memory or slow
/// the answer; progress is advisory, the result is not.
pub type ProgressSink = tokio::sync::mpsc::Sender<ToCaller>;

/// How many progress notifications may wait for the caller before newer ones are dropped.
pub const PROGRESS_BUFFER: usize = 32;

/// A call's progress sink and the inbound side's receiving end.
pub fn progress_channel() -> (ProgressSink, tokio::sync::mpsc::Receiver<ToCaller>) {
    tokio::sync::mpsc::channel(PROGRESS_BUFFER)
}

/// What a caller receives besides the answer (all `None`: nothing).
#[derive(Debug, Clone, Default)]
pub struct Notifications {
    pub progress: Option<ProgressSink>,
    pub logs: Option<LogSubscription>,
    /// The way back to a back-channel caller for server→client requests ([`relay`]).
    pub relay: Option<Relay>,
    /// A modern caller a session-era server may ask through held exchanges ([`held`]).
    pub ask: Option<held::Asker>,
}
