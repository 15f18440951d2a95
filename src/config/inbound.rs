//! Bounds on what an inbound caller can make the gateway hold or do (`[inbound]`): batch size,
//! back-channel sessions and the bytes each keeps, the lengths of caller-chosen values in log
//! lines and the log queue in bytes, HTTP read timeouts, idle keep-alive, and concurrent
//! connections. Each has a safe default; `docs/security-inbound-bounds.md` says what a caller
//! sees when one is hit.

use std::time::Duration;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[inbound]`: the inbound bounds.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InboundLimits {
    /// Most items in one JSON-RPC batch; a larger batch is refused whole with one `-32600`
    /// error before any item runs.
    pub max_batch_items: usize,
    /// Most bytes of answers one batch may collect; past it the remaining items are answered
    /// with a `-32600` error instead of their result.
    pub max_batch_answer_bytes: usize,
    /// Most back-channel sessions kept at once. When full, only expired sessions make room: a
    /// new `initialize` is refused with 503 rather than ending another caller's live session.
    pub max_sessions: usize,
    /// Most bytes of caller-declared state one session keeps (its back-channel capabilities
    /// and clientInfo name/version as JSON); a larger `initialize` is refused with 400.
    pub max_session_bytes: usize,
    /// Longest kept clientInfo `name` / `version`, in characters (longer ones are cut).
    pub max_client_info_chars: usize,
    /// Most calls of modern (2026-07-28) callers to session-era servers open at once whose
    /// server may ask the caller something (each holds an upstream session and its answer
    /// stream while the caller is asked: `backchannel::held`); one more is refused before
    /// anything is sent (`-32005`, `overloaded`).
    pub max_held_exchanges: usize,
    /// How long such a server's question waits for the caller's retry, in milliseconds; then
    /// the server gets a JSON-RPC error for it and the exchange is dropped.
    pub held_exchange_ttl_ms: u64,
    /// Longest value of one log line field, in bytes; longer values are cut and marked
    /// `…[truncated N bytes]`.
    pub log_max_field_bytes: usize,
    /// Most bytes of log lines waiting for stdout; past it new lines are dropped and counted
    /// (`mcp_gateway_log_lines_dropped_total`, `mcp_gateway_log_bytes_dropped_total`).
    pub log_queue_bytes: usize,
    /// Longest time from a connection being ready for a request to that request's headers
    /// being complete once its first byte arrived, in milliseconds (then the connection is
    /// closed).
    pub header_read_timeout_ms: u64,
    /// Longest time to read a request body once its headers are in, in milliseconds (then
    /// `408` with a JSON-RPC error).
    pub body_read_timeout_ms: u64,
    /// An idle keep-alive connection (no request started) is closed after this long, in
    /// milliseconds.
    pub idle_timeout_ms: u64,
    /// Most inbound connections open at once (the MCP and metrics listeners each); one more
    /// is answered `503` with a JSON-RPC error and closed.
    pub max_connections: usize,
    /// Most change-notification streams open at once (`GET /mcp` of session-era callers,
    /// `subscriptions/listen` of modern ones); one more is answered `503` (`-32005`). `0`
    /// turns list-change notifications off (`listChanged: false`, `GET /mcp` is 405).
    pub max_listen_streams: usize,
    /// Most resource subscriptions one caller holds (a session-era caller's session, or one
    /// 2026-07-28 `subscriptions/listen` stream); one more is refused (`-32005`, this key named).
    pub max_resource_subscriptions_per_caller: usize,
    /// Most resource subscriptions of all callers together; one more is refused (`-32005`,
    /// this key named). The gateway subscribes upstream once per (server, URI) within them.
    pub max_resource_subscriptions: usize,
}

impl Default for InboundLimits {
    fn default() -> Self {
        Self {
            max_batch_items: 64,
            max_batch_answer_bytes: 16 * 1024 * 1024,
            max_sessions: 1024,
            max_session_bytes: 16 * 1024,
            max_client_info_chars: 256,
            max_held_exchanges: 256,
            held_exchange_ttl_ms: 300_000,
            log_max_field_bytes: 4096,
            log_queue_bytes: 64 * 1024 * 1024,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 512,
            max_listen_streams: 256,
            max_resource_subscriptions_per_caller: 64,
            max_resource_subscriptions: 10_000,
        }
    }
}

impl InboundLimits {
    pub fn validate(&self) -> anyhow::Result<()> {
        let positive = [
            ("max_batch_items", self.max_batch_items as u64),
            ("max_batch_answer_bytes", self.max_batch_answer_bytes as u64),
            ("max_sessions", self.max_sessions as u64),
            ("max_session_bytes", self.max_session_bytes as u64),
            ("max_client_info_chars", self.max_client_info_chars as u64),
            ("max_held_exchanges", self.max_held_exchanges as u64),
            ("held_exchange_ttl_ms", self.held_exchange_ttl_ms),
            ("log_max_field_bytes", self.log_max_field_bytes as u64),
            ("log_queue_bytes", self.log_queue_bytes as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("max_connections", self.max_connections as u64),
            ("max_resource_subscriptions_per_caller", self.max_resource_subscriptions_per_caller as u64),
            ("max_resource_subscriptions", self.max_resource_subscriptions as u64),
        ];
        for (key, value) in positive {
            if value == 0 {
                bail!("inbound.{key} must be positive");
            }
        }
        if self.log_max_field_bytes < 16 {
            bail!("inbound.log_max_field_bytes must be at least 16");
        }
        Ok(())
    }

    pub fn held_exchange_ttl(&self) -> Duration {
        Duration::from_millis(self.held_exchange_ttl_ms)
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}
