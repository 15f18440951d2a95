//! A call's subscriptions to the upstream's notifications, progress and log entries: what the
//! caller wants ([`LogSubscription`], the call's progress sink), the gateway's own
//! `progressToken` (and, for log entries, the modern era's per-request log level) on the
//! outgoing request, and the upstream's `notifications/progress` and `notifications/message`
//! for it handed to the call's sinks, rebuilt from their validated fields ([`super::to_caller`]).
//!
//! The token is the gateway's, never the caller's: a caller's token means nothing to the
//! upstream (two callers may both use `1`), and the inbound side maps the gateway's token back
//! to the caller's when it writes the notification out. A request without a progress sink
//! carries no token at all (any caller token is stripped), so a server sends no progress nobody
//! reads. Log entries are asked for only when the request has a log subscription: in the modern
//! era through `_meta["io.modelcontextprotocol/logLevel"]` (absent means none), while a
//! session-era server sends what its session allows and the relay filters by level.
//! Kept apart from the transports so each (HTTP today, persistent ones later) needs two calls:
//! [`ProgressRelay::outbound`] before encoding, [`ProgressRelay::offer`] per received message;
//! reading the messages off the wire stays the transport's.
//!
//! Ownership ([`crate::ownership`]): a subscription is its call's, made from the call's own
//! request and written only on that call's answer, so no other caller can name or reach it —
//! the token is per upstream request and never leaves the gateway.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    ProgressSink,
    to_caller::{LogEntry, ProgressUpdate, ToCaller},
};
use crate::protocol::mcp::{Era, MetaPatch};

/// The modern era's per-request log opt-in.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

pub use super::to_caller::LOG_LEVELS;

/// The rank of a log level name (`None`: not a level).
pub fn log_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// A call's wish for log entries: `notifications/message` params at or above `min_level` go
/// to `sink` (the same bounded, lossy kind of channel as progress).
#[derive(Debug, Clone)]
pub struct LogSubscription {
    pub sink: ProgressSink,
    pub min_level: &'static str,
}

/// The token and sinks of one outgoing request.
#[derive(Debug)]
pub struct ProgressRelay {
    progress: Option<(String, ProgressSink)>,
    logs: Option<(usize, ProgressSink)>,
}

#[derive(Deserialize)]
struct Notification {
    method: String,
    #[serde(default)]
    params: Option<Map<String, Value>>,
}

impl ProgressRelay {
    /// The changes to the `_meta` of a request with `params` (JSON-RPC id `id` on its
    /// transport, unique among its requests in flight, in `era`) that wants `progress` and
    /// `logs`, and the relay for its notifications, if it wants any. The params themselves are
    /// not copied: the patch is applied as they are written
    /// ([`crate::protocol::mcp::encode_patched_request`]).
    pub fn outbound(
        params: &Map<String, Value>,
        progress: Option<&ProgressSink>,
        logs: Option<&LogSubscription>,
        id: u64,
        era: Era,
    ) -> (MetaPatch, Option<Self>) {
        let has_caller_token = params.get("_meta").and_then(|m| m.get("progressToken")).is_some();
        let mut patch =
            MetaPatch { drop: if has_caller_token { vec!["progressToken"] } else { vec![] }, set: vec![] };
        let mut relay = Self { progress: None, logs: None };
        if let Some(sink) = progress {
            let token = format!("mcp-gateway-{id}");
            patch.set.push(("progressToken", Value::String(token.clone())));
            relay.progress = Some((token, sink.clone()));
        }
        if let Some(logs) = logs {
            if era == Era::Modern {
                patch.set.push((META_LOG_LEVEL, Value::String(logs.min_level.into())));
            }
            relay.logs = Some((log_rank(logs.min_level).unwrap_or(0), logs.sink.clone()));
        }
        let wanted = relay.progress.is_some() || relay.logs.is_some();
        (patch, wanted.then_some(relay))
    }

    /// Hands `data` (one received JSON-RPC message) to a sink when it is a
    /// `notifications/progress` carrying this request's token, or a `notifications/message` at
    /// or above the subscribed level — rebuilt from their validated fields only
    /// ([`super::to_caller`]): nothing else the upstream put in them goes on. Never waits: a full
    /// sink drops it (both are advisory).
    pub fn offer(&self, data: &str) {
        if !data.contains("notifications/") {
            return;
        }
        let Ok(message) = serde_json::from_str::<Notification>(data) else {
            return;
        };
        let Some(params) = message.params else { return };
        match message.method.as_str() {
            "notifications/progress" => {
                if let Some((token, sink)) = &self.progress
                    && params.get("progressToken").and_then(Value::as_str) == Some(token.as_str())
                    && let Some(update) = ProgressUpdate::from_params(&params)
                {
                    let _ = sink.try_send(ToCaller::Progress(update));
                }
            }
            "notifications/message" => {
                if let Some((min, sink)) = &self.logs
                    && let Some(entry) = LogEntry::from_params(&params)
                    && log_rank(entry.level()).is_some_and(|r| r >= *min)
                {
                    let _ = sink.try_send(ToCaller::Log(entry));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::mcp;

    /// What a transport's request holds of a call's subscriptions.
    struct Request {
        params: Map<String, Value>,
        progress: Option<ProgressSink>,
        logs: Option<LogSubscription>,
    }

    /// The params `request` is sent with (id `id`, in `era`), and its relay.
    fn sent(request: &Request, id: u64, era: Era) -> (Value, Option<ProgressRelay>) {
        let (patch, relay) = ProgressRelay::outbound(
            &request.params,
            request.progress.as_ref(),
            request.logs.as_ref(),
            id,
            era,
        );
        let body = mcp::encode_patched_request(id, "tools/call", &request.params, era, &patch);
        let mut message: Value = serde_json::from_slice(&body).unwrap();
        if let Some(meta) = message["params"].get_mut("_meta").and_then(Value::as_object_mut) {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/") || k == META_LOG_LEVEL);
            if meta.is_empty() {
                message["params"].as_object_mut().unwrap().remove("_meta");
            }
        }
        (message["params"].take(), relay)
    }

    fn request(meta: Value) -> Request {
        let mut params = Map::new();
        params.insert("name".into(), json!("t"));
        params.insert("_meta".into(), meta);
        Request { params, progress: None, logs: None }
    }

    #[test]
    fn without_a_sink_no_token_goes_upstream() {
        let r = request(json!({"progressToken": "caller-1", "trace": "x"}));
        let (params, relay) = sent(&r, 7, Era::Modern);
        assert!(relay.is_none());
        assert_eq!(params["_meta"], json!({"trace": "x"}));
        let r = request(json!({"progressToken": 5}));
        let (params, _) = sent(&r, 7, Era::Legacy);
        assert!(params.get("_meta").is_none(), "an emptied _meta is dropped");
    }

    #[test]
    fn with_a_sink_the_gateway_token_replaces_the_callers_and_only_it_is_relayed() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(2);
        let mut r = request(json!({"progressToken": "caller-1"}));
        r.progress = Some(tx.into());
        let (params, relay) = sent(&r, 7, Era::Legacy);
        let relay = relay.expect("a relay");
        assert_eq!(params["_meta"]["progressToken"], "mcp-gateway-7");
        let ours = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "mcp-gateway-7", "progress": 1}});
        let other = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "mcp-gateway-8", "progress": 1}});
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}});
        for m in [&other, &log, &ours, &ours, &ours] {
            relay.offer(&m.to_string());
        }
        let Ok(ToCaller::Progress(update)) = rx.try_recv() else { panic!("ours") };
        assert_eq!(update.progress(), 1.0);
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "a full sink drops, it does not wait");
    }

    #[test]
    fn logs_are_asked_for_in_the_modern_era_and_relayed_from_their_level_up() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut r = request(json!({}));
        r.logs = Some(LogSubscription { sink: tx.into(), min_level: "warning" });
        let (params, relay) = sent(&r, 1, Era::Modern);
        assert_eq!(params["_meta"], json!({META_LOG_LEVEL: "warning"}));
        let (legacy, legacy_relay) = sent(&r, 1, Era::Legacy);
        assert!(legacy.get("_meta").is_none(), "a session-era server is not sent the modern key");
        assert!(legacy_relay.is_some_and(|relay| relay.logs.is_some()), "its logs are still relayed");
        let relay = relay.expect("a relay");
        for level in ["debug", "info", "warning", "error", "bogus"] {
            let m = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}});
            relay.offer(&m.to_string());
        }
        let got: Vec<&str> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|item| match item {
                ToCaller::Log(entry) => entry.level(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, ["warning", "error"]);
    }
}
