//! What a call carries through the pipeline (who asks, by when, where its notifications go)
//! and how it ended: the types every stage of `call` shares, kept apart so that the stages
//! depend on them and never on the pipeline that uses the stages.

use std::{
    sync::{Arc, atomic::AtomicBool},
    time::Instant,
};

use serde_json::Value;

use crate::backchannel::Notifications;

/// `_meta` key a caller may use to set its deadline, in milliseconds.
pub const META_TIMEOUT_MS: &str = "io.mcp-gateway/timeoutMs";
/// `_meta` key of the idempotency key: a caller may supply one; the gateway derives the key
/// it sends upstream (identical on every attempt) from tool, canonical arguments and it.
pub const META_IDEMPOTENCY_KEY: &str = "io.mcp-gateway/idempotencyKey";

/// Who is asking, for the log line, and by when they need the answer.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub request_id: Arc<str>,
    pub jsonrpc_id: Value,
    /// From the `X-Request-Timeout-Ms` header.
    pub deadline: Option<Instant>,
    /// Where the upstream's progress and log entries go, when the caller can receive them.
    pub notifications: Notifications,
    /// Set when the caller cancelled the call (`notifications/cancelled`) before dropping it.
    pub cancelled: Arc<AtomicBool>,
    /// Who is calling.
    pub caller: Arc<crate::identity::Caller>,
    /// The caller's `Mcp-Session-Id`, if it sent one: with the owner, whose retry may answer a
    /// question held for it (`backchannel::held`).
    pub session: Option<Arc<str>>,
    /// Whose what the call leaves behind is (a task, a held question): [`crate::ownership`].
    pub owner: crate::ownership::Owner,
    /// The caller negotiated MCP Apps: it may call a tool for an app only (its host calls it
    /// for the app), never through the search mode's `call_tool`, which the model calls.
    pub apps: bool,
}

/// How a call ended, for metrics and the log line.
pub(super) struct Ending {
    pub(super) outcome: &'static str,
    pub(super) attempts: u32,
    /// Whether the request may have reached a server (decides whether a fallback may run).
    pub(super) maybe_delivered: bool,
}

impl Ending {
    pub(super) fn unsent(outcome: &'static str) -> Self {
        Self { outcome, attempts: 0, maybe_delivered: false }
    }
}
