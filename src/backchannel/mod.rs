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
///
/// Every item goes through the sink's [`Screen`] when the call set one (the gateway's outbound
/// step, `gateway/outbound.rs`: the after-hooks of the call's tool); the channel has no other
/// way in, so nothing reaches the caller's stream unscreened.
#[derive(Clone)]
pub struct ProgressSink {
    tx: tokio::sync::mpsc::Sender<ToCaller>,
    /// A thin pointer (the sink is in every call's future, cloned into each request).
    screen: Option<std::sync::Arc<Box<dyn Screen>>>,
}

/// An item the caller's stream did not take (full or gone); it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSent;

/// What the gateway's outbound step does to each item on its way to a caller's stream:
/// the item as it may be written (redacted), or `None` to drop it.
pub trait Screen: Send + Sync {
    fn screen(&self, item: ToCaller) -> Option<ToCaller>;
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressSink").field("screened", &self.screen.is_some()).finish()
    }
}

impl ProgressSink {
    /// Hands `item` (screened) to the caller's stream without waiting; a full or closed
    /// channel drops it.
    pub fn try_send(&self, item: ToCaller) -> Result<(), NotSent> {
        match self.screened(item) {
            Some(item) => self.tx.try_send(item).map_err(|_| NotSent),
            None => Ok(()),
        }
    }

    /// Hands `item` (screened) to the caller's stream, waiting for room; a closed channel
    /// drops it.
    pub async fn send(&self, item: ToCaller) -> Result<(), NotSent> {
        match self.screened(item) {
            Some(item) => self.tx.send(item).await.map_err(|_| NotSent),
            None => Ok(()),
        }
    }

    /// The same channel, every item passing `screen` (replacing any screen set before).
    pub fn with_screen(&self, screen: std::sync::Arc<Box<dyn Screen>>) -> Self {
        Self { tx: self.tx.clone(), screen: Some(screen) }
    }

    fn screened(&self, item: ToCaller) -> Option<ToCaller> {
        match &self.screen {
            Some(screen) => screen.screen(item),
            None => Some(item),
        }
    }
}

/// An unscreened sink on a channel of the caller's own bound (tests, and whoever makes its own
/// channel).
impl From<tokio::sync::mpsc::Sender<ToCaller>> for ProgressSink {
    fn from(tx: tokio::sync::mpsc::Sender<ToCaller>) -> Self {
        Self { tx, screen: None }
    }
}

/// How many progress notifications may wait for the caller before newer ones are dropped.
pub const PROGRESS_BUFFER: usize = 32;

/// A call's progress sink and the inbound side's receiving end.
pub fn progress_channel() -> (ProgressSink, tokio::sync::mpsc::Receiver<ToCaller>) {
    let (tx, rx) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
    (ProgressSink { tx, screen: None }, rx)
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
