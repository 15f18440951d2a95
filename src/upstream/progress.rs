//! Progress relay on the upstream side: the gateway's own `progressToken` on an outgoing
//! request, and the upstream's `notifications/progress` for it handed to the call's
//! [`ProgressSink`].
//!
//! The token is the gateway's, never the caller's: a caller's token means nothing to the
//! upstream (two callers may both use `1`), and the inbound side maps the gateway's token back
//! to the caller's when it writes the notification out. A request without a sink carries no
//! token at all (any caller token is stripped), so a server sends no progress nobody reads.
//! Kept apart from the transports so each (HTTP today, persistent ones later) needs two calls:
//! [`ProgressRelay::outbound`] before encoding, [`ProgressRelay::offer`] per received message.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ProgressSink, UpstreamRequest};

/// The token and sink of one outgoing request.
#[derive(Debug)]
pub struct ProgressRelay {
    token: String,
    sink: ProgressSink,
}

#[derive(Deserialize)]
struct Notification {
    method: String,
    #[serde(default)]
    params: Option<Map<String, Value>>,
}

impl ProgressRelay {
    /// The params to send for `request` (JSON-RPC id `id` on this transport, unique among its
    /// requests in flight) and the relay that recognises its progress, if it wants progress.
    pub fn outbound(request: &UpstreamRequest, id: u64) -> (Cow<'_, Map<String, Value>>, Option<Self>) {
        let has_caller_token = request.params.get("_meta").and_then(|m| m.get("progressToken")).is_some();
        let Some(sink) = &request.progress else {
            if !has_caller_token {
                return (Cow::Borrowed(&request.params), None);
            }
            let mut params = request.params.clone();
            if let Some(Value::Object(meta)) = params.get_mut("_meta") {
                meta.remove("progressToken");
                if meta.is_empty() {
                    params.remove("_meta");
                }
            }
            return (Cow::Owned(params), None);
        };
        let token = format!("mcp-gateway-{id}");
        let mut params = request.params.clone();
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            meta.insert("progressToken".into(), Value::String(token.clone()));
        }
        (Cow::Owned(params), Some(Self { token, sink: sink.clone() }))
    }

    /// Hands `data` (one received JSON-RPC message) to the sink when it is a
    /// `notifications/progress` carrying this request's token. Never waits: a full sink drops
    /// the notification (progress is advisory).
    pub fn offer(&self, data: &str) {
        if !data.contains("notifications/progress") {
            return;
        }
        let Ok(message) = serde_json::from_str::<Notification>(data) else {
            return;
        };
        let Some(params) = message.params else { return };
        if message.method == "notifications/progress"
            && params.get("progressToken").and_then(Value::as_str) == Some(self.token.as_str())
        {
            let _ = self.sink.try_send(params);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(meta: Value) -> UpstreamRequest {
        let mut params = Map::new();
        params.insert("name".into(), json!("t"));
        params.insert("_meta".into(), meta);
        UpstreamRequest::new("tools/call", params)
    }

    #[test]
    fn without_a_sink_no_token_goes_upstream() {
        let r = request(json!({"progressToken": "caller-1", "trace": "x"}));
        let (params, relay) = ProgressRelay::outbound(&r, 7);
        assert!(relay.is_none());
        assert_eq!(params["_meta"], json!({"trace": "x"}));
        let r = request(json!({"progressToken": 5}));
        let (params, _) = ProgressRelay::outbound(&r, 7);
        assert!(params.get("_meta").is_none(), "an emptied _meta is dropped");
    }

    #[test]
    fn with_a_sink_the_gateway_token_replaces_the_callers_and_only_it_is_relayed() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let mut r = request(json!({"progressToken": "caller-1"}));
        r.progress = Some(tx);
        let (params, relay) = ProgressRelay::outbound(&r, 7);
        let relay = relay.expect("a relay");
        assert_eq!(params["_meta"]["progressToken"], "mcp-gateway-7");
        let ours = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "mcp-gateway-7", "progress": 1}});
        let other = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "mcp-gateway-8", "progress": 1}});
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}});
        for m in [&other, &log, &ours, &ours, &ours] {
            relay.offer(&m.to_string());
        }
        assert_eq!(rx.try_recv().expect("ours")["progress"], 1);
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "a full sink drops, it does not wait");
    }
}
