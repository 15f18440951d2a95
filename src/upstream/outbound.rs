//! What a transport sends along with one attempt besides the request itself: the W3C trace
//! context and the caller's request ids, as HTTP headers or as a Lambda `ClientContext`, and
//! the trace context in the request's `_meta` too. The attempt layer (`resilience::traced`)
//! fills it in; transports only read it, so they need to know nothing of tracing.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::protocol::mcp::MetaPatch;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
pub const REQUEST_ID: &str = "x-request-id";
pub const AMZN_TRACE_ID: &str = "x-amzn-trace-id";

/// What a transport sends along with one attempt: the trace context stamped into the
/// request's `_meta` by the attempt layer, and the caller's request ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outbound {
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    pub request_id: Option<Arc<str>>,
    pub amzn_trace_id: Option<String>,
}

impl Outbound {
    /// Adds the trace context to the changes to a request's `_meta` (SEP-414's keys): its
    /// `traceparent`, and its `tracestate` or, without one, the caller's dropped (it described
    /// the caller's parent). Without a context the caller's `_meta` goes as it came. Applied
    /// as the request is written: the params, shared by a call's attempts, are not copied.
    pub fn stamp_meta(&self, patch: &mut MetaPatch) {
        let Some(traceparent) = &self.traceparent else { return };
        patch.set.push((TRACEPARENT, Value::String(traceparent.clone())));
        match &self.tracestate {
            Some(state) => patch.set.push((TRACESTATE, Value::String(state.clone()))),
            None => patch.drop.push(TRACESTATE),
        }
    }

    /// The HTTP headers: `traceparent`, `tracestate`, `x-request-id`.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            (TRACEPARENT, self.traceparent.as_deref()),
            (TRACESTATE, self.tracestate.as_deref()),
            (REQUEST_ID, self.request_id.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
    }

    /// The Lambda invocation's `ClientContext` (base64 JSON `{"custom": {...}}`), within the
    /// API's 3,583-byte limit (the `tracestate` is left out if it would not fit); `None` when
    /// there is nothing to send.
    pub fn lambda_client_context(&self) -> Option<String> {
        use base64::Engine;
        let encode = |custom: Map<String, Value>| {
            let json = serde_json::json!({ "custom": custom }).to_string();
            base64::engine::general_purpose::STANDARD.encode(json)
        };
        let mut custom = Map::new();
        for (name, value) in self.headers() {
            custom.insert(name.into(), Value::String(value.into()));
        }
        if custom.is_empty() {
            return None;
        }
        let encoded = encode(custom.clone());
        if encoded.len() <= LAMBDA_CLIENT_CONTEXT_MAX {
            return Some(encoded);
        }
        custom.remove(TRACESTATE);
        Some(encode(custom)).filter(|e| e.len() <= LAMBDA_CLIENT_CONTEXT_MAX)
    }

    /// [`Outbound::lambda_client_context`] with `extra` keys in `custom`, which are always
    /// kept (the trace keys give way first); `None` if they alone exceed the limit.
    pub fn lambda_client_context_with(&self, extra: &[(&str, &str)]) -> Option<String> {
        use base64::Engine;
        let encode = |custom: &Map<String, Value>| {
            let json = serde_json::json!({ "custom": custom }).to_string();
            base64::engine::general_purpose::STANDARD.encode(json)
        };
        let mut custom: Map<String, Value> =
            self.headers().map(|(name, value)| (name.to_string(), serde_json::json!(value))).collect();
        for (key, value) in extra {
            custom.insert((*key).to_string(), serde_json::json!(value));
        }
        for dropped in [None, Some(TRACESTATE), Some(TRACEPARENT)] {
            if let Some(key) = dropped {
                custom.remove(key);
            }
            let encoded = encode(&custom);
            if encoded.len() <= LAMBDA_CLIENT_CONTEXT_MAX {
                return Some(encoded);
            }
        }
        None
    }
}

/// The Invoke API's limit on `ClientContext` (base64 characters).
pub const LAMBDA_CLIENT_CONTEXT_MAX: usize = 3583;
