//! The W3C trace context in and out of the gateway.
//!
//! Context sources, per message, first valid wins: `params._meta.traceparent` /
//! `params._meta.tracestate` (the keys of MCP's SEP-414), then the HTTP `traceparent` /
//! `tracestate` headers. An invalid `traceparent` is ignored (a new trace starts). Upstreams get
//! the attempt span's context (or, off, the caller's) as `traceparent`/`tracestate` headers and
//! `_meta` keys over HTTP, in `_meta` and the invocation's client context `custom` for Lambda;
//! the caller's `X-Request-Id` goes along as a header / `custom["x-request-id"]`, and its
//! `X-Amzn-Trace-Id` as that header of the Lambda invoke. Spans never carry arguments, results,
//! header values or `_meta` contents other than the trace context.

use std::sync::Arc;

use axum::http::HeaderMap;
use opentelemetry::{
    Context,
    propagation::{Extractor, TextMapPropagator},
    trace::TraceContextExt,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::Value;

use super::exporter::enabled;
use crate::upstream::outbound::{AMZN_TRACE_ID, Outbound, TRACEPARENT, TRACESTATE};

/// W3C caps `tracestate` at 32 members; 512 characters is what vendors propagate at most.
const MAX_TRACESTATE: usize = 512;
const MAX_AMZN_TRACE_ID: usize = 256;

/// What the inbound request says about the caller's trace and request, for one message.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    pub request_id: Option<Arc<str>>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    pub amzn_trace_id: Option<String>,
}

impl Inbound {
    /// The HTTP request's trace headers (checked) and request id.
    pub fn from_headers(headers: &HeaderMap, request_id: Arc<str>) -> Self {
        use axum::http::HeaderName;
        // Constants, so each name is parsed at compile time rather than on every request.
        const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
        const TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);
        const AMZN_TRACE_ID_HEADER: HeaderName = HeaderName::from_static(AMZN_TRACE_ID);
        let text = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        let traceparent = text(TRACEPARENT_HEADER).filter(|v| valid_traceparent(v)).map(str::to_string);
        Self {
            request_id: Some(request_id),
            tracestate: traceparent.as_ref().and(text(TRACESTATE_HEADER)).and_then(clean_tracestate),
            traceparent,
            amzn_trace_id: text(AMZN_TRACE_ID_HEADER)
                .filter(|v| !v.is_empty() && v.len() <= MAX_AMZN_TRACE_ID && printable(v))
                .map(str::to_string),
        }
    }

    /// This message's view: a valid `_meta.traceparent` (with its `tracestate`) replaces the
    /// headers' context.
    pub fn for_message(&self, params: Option<&Value>) -> Self {
        let meta = params.and_then(|p| p.get("_meta"));
        let from_meta = meta.and_then(|m| m.get(TRACEPARENT)).and_then(Value::as_str).map(str::trim);
        match from_meta.filter(|v| valid_traceparent(v)) {
            Some(traceparent) => Self {
                traceparent: Some(traceparent.to_string()),
                tracestate: meta
                    .and_then(|m| m.get(TRACESTATE))
                    .and_then(Value::as_str)
                    .and_then(clean_tracestate),
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    pub(super) fn remote_context(&self) -> Option<Context> {
        let traceparent = Some(self.traceparent.clone()?);
        let carrier = Carrier { traceparent, tracestate: self.tracestate.clone() };
        let cx = TraceContextPropagator::new().extract(&carrier);
        cx.span().span_context().is_valid().then_some(cx)
    }
}

/// The two W3C trace-context fields, as the propagator reads them (rather than a hash map per
/// message).
#[derive(Default)]
struct Carrier {
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl Extractor for Carrier {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent.as_deref(),
            TRACESTATE => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        [(TRACEPARENT, &self.traceparent), (TRACESTATE, &self.tracestate)]
            .into_iter()
            .filter_map(|(key, value)| value.as_ref().map(|_| key))
            .collect()
    }
}

tokio::task_local! {
    static INBOUND: Inbound;
}

/// Runs `future` (one inbound message) with its inbound context visible to the upstream
/// attempts it makes.
pub async fn scoped<F: Future>(inbound: Inbound, future: F) -> F::Output {
    INBOUND.scope(inbound, future).await
}

fn with_inbound<T>(f: impl FnOnce(&Inbound) -> T) -> Option<T> {
    INBOUND.try_with(f).ok()
}

/// The trace id for the call's log line: the current span's when tracing is on, else the
/// caller's (from its `traceparent`), else none.
pub fn log_trace_id() -> Option<String> {
    if enabled() {
        let current = Context::map_current(|cx| {
            let span = cx.span();
            let context = span.span_context();
            context.is_valid().then(|| {
                let mut id = String::with_capacity(32);
                push_hex(&mut id, &context.trace_id().to_bytes());
                id
            })
        });
        if current.is_some() {
            return current;
        }
    }
    with_inbound(|inbound| inbound.traceparent.as_deref().and_then(trace_id_of).map(str::to_string)).flatten()
}

/// The trace context an upstream attempt carries: the current (attempt) span's when tracing
/// is on and a span is current, else the caller's unchanged.
fn outbound_context() -> Option<(String, Option<String>)> {
    if enabled()
        && let Some(current) = Context::map_current(span_context_of)
    {
        return Some(current);
    }
    with_inbound(|inbound| inbound.traceparent.clone().map(|tp| (tp, inbound.tracestate.clone()))).flatten()
}

/// What the transport sends along with this attempt: the trace context of
/// [`outbound_context`] (headers, and `_meta` keys written over the caller's by
/// [`Outbound::stamp_meta`]) and the caller's request ids from the inbound scope.
pub fn outbound() -> Outbound {
    // Both sources are checked already: the span's is written from a valid context, the
    // caller's was checked as it came in ([`Inbound`]).
    let (traceparent, tracestate) = outbound_context().unzip();
    let tracestate = tracestate.flatten();
    let (request_id, amzn_trace_id) =
        with_inbound(|i| (i.request_id.clone(), i.amzn_trace_id.clone())).unwrap_or_default();
    Outbound { traceparent, tracestate, request_id, amzn_trace_id }
}

/// The `traceparent` and `tracestate` (none when empty) of `cx`'s span, when it is valid.
fn span_context_of(cx: &Context) -> Option<(String, Option<String>)> {
    let span = cx.span();
    let context = span.span_context();
    context.is_valid().then(|| {
        let state = context.trace_state().header();
        (traceparent_of(context), Some(state).filter(|s| !s.is_empty()))
    })
}

/// A valid span context's `traceparent`, as the SDK's `TraceContextPropagator` writes it
/// (version `00`, the sampled flag only), without its trip through `format!`: one is written
/// per upstream attempt.
fn traceparent_of(context: &opentelemetry::trace::SpanContext) -> String {
    let mut traceparent = String::with_capacity(55);
    traceparent.push_str("00-");
    push_hex(&mut traceparent, &context.trace_id().to_bytes());
    traceparent.push('-');
    push_hex(&mut traceparent, &context.span_id().to_bytes());
    traceparent.push_str(if context.is_sampled() { "-01" } else { "-00" });
    traceparent
}

/// Appends `bytes` as lowercase hex.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, ids not all zero (W3C level 1;
/// a higher version with the same prefix is accepted as the spec asks).
pub fn valid_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match parts.as_slice() {
        [version, trace, span, flags, rest @ ..] => {
            hex(version, 2)
                && *version != "ff"
                && (rest.is_empty() || *version != "00")
                && hex(trace, 32)
                && hex(span, 16)
                && hex(flags, 2)
                && trace.bytes().any(|b| b != b'0')
                && span.bytes().any(|b| b != b'0')
        }
        _ => false,
    }
}

/// The trace id of a valid `traceparent`.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    valid_traceparent(traceparent).then(|| &traceparent[3..35])
}

fn clean_tracestate(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty() && value.len() <= MAX_TRACESTATE && printable(value)).then(|| value.to_string())
}

fn printable(value: &str) -> bool {
    value.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    impl opentelemetry::propagation::Injector for Carrier {
        fn set(&mut self, key: &str, value: String) {
            match key {
                TRACEPARENT => self.traceparent = Some(value),
                TRACESTATE => self.tracestate = Some(value),
                _ => {}
            }
        }
    }

    #[test]
    fn the_attempts_context_is_written_as_the_sdks_propagator_writes_it() {
        use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
        let state = TraceState::from_key_value([("vendor", "x1"), ("other", "y")]).unwrap();
        for (flags, state) in [(TraceFlags::SAMPLED, state), (TraceFlags::default(), TraceState::default())] {
            let context = SpanContext::new(
                TraceId::from_bytes(*b"\x00\x01\x0a\xf0\xffABCDEFGHIJK"),
                SpanId::from_bytes(*b"\x9f\x00\x10zZ7\x01\xee"),
                flags,
                true,
                state,
            );
            let mut carrier = Carrier::default();
            let cx = Context::new().with_remote_span_context(context.clone());
            TraceContextPropagator::new().inject_context(&cx, &mut carrier);
            assert_eq!(Some(traceparent_of(&context)), carrier.traceparent);
            assert!(valid_traceparent(&traceparent_of(&context)));
            let expected_state = carrier.tracestate.filter(|s| !s.is_empty());
            assert_eq!(span_context_of(&cx), Some((traceparent_of(&context), expected_state)));
        }
    }

    #[test]
    fn traceparents_are_checked() {
        assert!(valid_traceparent(TP));
        assert_eq!(trace_id_of(TP), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(!valid_traceparent(bad), "{bad}");
        }
        assert!(valid_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"));
    }

    #[test]
    fn the_callers_context_goes_through_the_propagator_whole() {
        let inbound = Inbound {
            traceparent: Some(TP.into()),
            tracestate: Some("a=1,b=2".into()),
            ..Default::default()
        };
        let cx = inbound.remote_context().expect("a valid remote context");
        let mut carrier = Carrier::default();
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        assert_eq!(carrier.traceparent.as_deref(), Some(TP));
        assert_eq!(carrier.tracestate.as_deref(), Some("a=1,b=2"));
        let invalid = Inbound { traceparent: Some("00-00-00-00".into()), ..Default::default() };
        assert!(invalid.remote_context().is_none());
        assert!(Inbound::default().remote_context().is_none());
    }

    #[test]
    fn meta_context_wins_over_headers_and_invalid_ones_are_ignored() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", TP.parse().unwrap());
        headers.insert("tracestate", "a=1".parse().unwrap());
        headers.insert("x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793".parse().unwrap());
        let inbound = Inbound::from_headers(&headers, "req-1".into());
        assert_eq!(inbound.traceparent.as_deref(), Some(TP));
        let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let params = json!({"_meta": {"traceparent": other}});
        let message = inbound.for_message(Some(&params));
        assert_eq!(message.traceparent.as_deref(), Some(other));
        assert_eq!(message.tracestate, None, "the header's tracestate belongs to the header's parent");
        let invalid = json!({"_meta": {"traceparent": "garbage"}});
        assert_eq!(inbound.for_message(Some(&invalid)).traceparent.as_deref(), Some(TP));
        assert_eq!(message.amzn_trace_id.as_deref(), Some("Root=1-5759e988-bd862e3fe1be46a994272793"));
    }

    #[test]
    fn lambda_client_context_is_base64_json_within_the_limit() {
        use base64::Engine;
        let outbound = Outbound {
            traceparent: Some(TP.into()),
            tracestate: Some("x".repeat(MAX_TRACESTATE)),
            request_id: Some("req-1".into()),
            amzn_trace_id: None,
        };
        let encoded = outbound.lambda_client_context().unwrap();
        let decoded: Value =
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(encoded).unwrap())
                .unwrap();
        assert_eq!(decoded["custom"]["traceparent"], TP);
        assert_eq!(decoded["custom"]["x-request-id"], "req-1");
        assert_eq!(Outbound::default().lambda_client_context(), None);
        let huge = Outbound { tracestate: Some("y".repeat(4000)), ..outbound };
        let decoded =
            base64::engine::general_purpose::STANDARD.decode(huge.lambda_client_context().unwrap()).unwrap();
        let decoded: Value = serde_json::from_slice(&decoded).unwrap();
        assert!(decoded["custom"].get("tracestate").is_none(), "dropped to fit");
    }

    #[test]
    fn off_the_caller_context_passes_through_unchanged() {
        let inbound =
            Inbound { traceparent: Some(TP.into()), request_id: Some("r".into()), ..Default::default() };
        let (sent, trace_id) = tokio_test_block_on(scoped(inbound, async { (outbound(), log_trace_id()) }));
        assert_eq!(sent.traceparent.as_deref(), Some(TP));
        assert_eq!(sent.request_id.as_deref(), Some("r"));
        assert_eq!(trace_id.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        let params =
            Map::from_iter([("_meta".to_string(), json!({"traceparent": "garbage", "tracestate": "a=1"}))]);
        let mut patch = crate::protocol::mcp::MetaPatch::default();
        sent.stamp_meta(&mut patch);
        let written: Value = serde_json::from_slice(&crate::protocol::mcp::encode_patched_request(
            1,
            "tools/call",
            &params,
            crate::protocol::mcp::Era::Legacy,
            &patch,
        ))
        .unwrap();
        assert_eq!(
            written["params"]["_meta"],
            json!({"traceparent": TP}),
            "the caller's tracestate went with its parent"
        );
        assert_eq!(params["_meta"]["traceparent"], "garbage", "the params themselves are not changed");
        assert_eq!(
            tokio_test_block_on(async { outbound() }),
            Outbound::default(),
            "no context, nothing stamped"
        );
    }

    fn tokio_test_block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }
}
