//! The caller's `_meta` as the gateway forwards it upstream: one rule, used by the call path
//! (what reaches the server, and so what the result cache keys on) and by tasks (what a task's
//! follow-up requests carry).

use serde_json::{Map, Value};

use crate::protocol::mcp;

/// The caller's `_meta` as forwarded upstream: without the keys the protocol reserves, the
/// gateway's own (`io.mcp-gateway/…`), the progress token (the transport sets the gateway's own
/// when the call relays progress) and the trace context (each attempt stamps its own, from the
/// caller's: `Outbound::stamp_meta`). Everything else goes to the server as the caller sent it.
pub fn forwarded_meta(meta: Option<&Value>) -> Map<String, Value> {
    let mut forwarded = meta.and_then(mcp::forwardable_meta).unwrap_or_default();
    forwarded.retain(|k, _| {
        !k.starts_with("io.mcp-gateway/")
            && !matches!(k.as_str(), "progressToken" | "traceparent" | "tracestate")
    });
    forwarded
}
