//! OpenTelemetry tracing: one span per inbound MCP message ([`MessageSpan`]), one child span
//! per upstream attempt ([`AttemptSpan`], made by `resilience::traced`), exported as
//! OTLP/HTTP protobuf by the SDK's batch processor (on a thread of its own), and W3C trace
//! context carried across the gateway.
//!
//! The spans are made with the OpenTelemetry SDK directly, not through `tracing` spans and a
//! bridge layer: a call's two spans then cost what the SDK costs (a span, its attributes, one
//! lock each), and the log pipeline never sees them. A message's [`Context`] is current while
//! its future is polled, so the attempt span, the log line's trace id and the upstream's
//! `traceparent` all come from it.
//!
//! Off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and
//! neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`). Off, no span is created
//! (one relaxed atomic load decides) and nothing is exported; the caller's trace context still
//! passes through unchanged, so the upstream joins the caller's trace and the log line carries
//! its trace id. The standard variables are read by the SDK and exporter themselves:
//! `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`, `…TIMEOUT`, `OTEL_TRACES_SAMPLER(_ARG)` (default
//! `parentbased_always_on`), `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_SERVICE_NAME`
//! defaults to `mcp-gateway`.
//!
//! Context sources, per message, first valid wins: `params._meta.traceparent` /
//! `params._meta.tracestate` (the keys of MCP's SEP-414), then the HTTP `traceparent` /
//! `tracestate` headers. An invalid `traceparent` is ignored (a new trace starts). Upstreams get
//! the attempt span's context (or, off, the caller's) as `traceparent`/`tracestate` headers and
//! `_meta` keys over HTTP, in `_meta` and the invocation's client context `custom` for Lambda;
//! the caller's `X-Request-Id` goes along as a header / `custom["x-request-id"]`, and its
//! `X-Amzn-Trace-Id` as that header of the Lambda invoke. Spans never carry arguments, results,
//! header values or `_meta` contents other than the trace context.

use std::sync::{
    Arc, OnceLock,
    atomic::{AtomicBool, Ordering},
};

use axum::http::HeaderMap;
use futures_util::future::Either;
use opentelemetry::{
    Context, KeyValue, StringValue,
    context::{FutureExt as _, WithContext},
    propagation::{Extractor, TextMapPropagator},
    trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _},
};
use opentelemetry_sdk::{
    propagation::TraceContextPropagator,
    trace::{SdkTracer, SdkTracerProvider},
};
use serde_json::Value;

/// `_meta` and header keys of the W3C trace context (SEP-414 uses the header names bare).
pub use crate::upstream::outbound::{AMZN_TRACE_ID, Outbound, REQUEST_ID, TRACEPARENT, TRACESTATE};
/// W3C caps `tracestate` at 32 members; 512 characters is what vendors propagate at most.
const MAX_TRACESTATE: usize = 512;
const MAX_AMZN_TRACE_ID: usize = 256;

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The tracer spans are made with (set once, by the first [`init`] that turns tracing on).
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether spans are being made and exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The tracer, when spans are being made.
fn tracer() -> Option<&'static SdkTracer> {
    if enabled() { TRACER.get() } else { None }
}

/// The installed tracer provider; [`Tracing::shutdown`] exports what is still buffered.
pub struct Tracing {
    provider: SdkTracerProvider,
}

/// Whether the environment asks for trace export.
pub fn wanted(env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |key: &str| env(key).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

/// Builds the OTLP exporter and the batch processor (on the current tokio runtime) and turns
/// span making on, when the environment asks for it; `Ok(None)` when tracing is off.
pub fn init() -> anyhow::Result<Option<Tracing>> {
    if !wanted(|k| std::env::var(k).ok()) {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| anyhow::anyhow!("OTLP trace exporter: {e}"))?;
    // The SDK's batch processor: a thread of its own, woken when a batch is full or the
    // export interval ends. Ending a span is one push onto its queue (the processor for the
    // tokio runtime woke a task for every span ended, two per call).
    let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter).build();
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "mcp-gateway".into());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .with_attribute(KeyValue::new("service.version", crate::VERSION))
        .build();
    let provider =
        SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
    if TRACER.set(provider.tracer("mcp-gateway")).is_err() {
        anyhow::bail!("OpenTelemetry tracing was already set up in this process");
    }
    ENABLED.store(true, Ordering::Relaxed);
    Ok(Some(Tracing { provider }))
}

impl Tracing {
    /// Exports every finished span still buffered, then stops the exporter. Call after the
    /// server drained, so the spans of drained calls go out. The SDK's shutdown blocks until
    /// its processor thread exported them, so it runs on a blocking thread.
    pub async fn shutdown(self) {
        ENABLED.store(false, Ordering::Relaxed);
        let provider = self.provider;
        match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %crate::redact::shown(&e), "trace export at shutdown failed")
            }
            Err(e) => tracing::warn!(error = %crate::redact::shown(&e), "trace export at shutdown failed"),
        }
    }
}

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

    fn remote_context(&self) -> Option<Context> {
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

/// What a message's span is named and its `mcp.method.name`: one of the methods the gateway
/// serves, else [`UNKNOWN_METHOD_SPAN`]. Span names are what tracing backends group and index
/// by, so they come from this fixed set, never from what a caller wrote.
pub fn span_method(method: &str) -> &'static str {
    const SERVED: [&str; 8] = [
        "tools/call",
        "tools/list",
        "initialize",
        "notifications/initialized",
        "notifications/cancelled",
        "logging/setLevel",
        "server/discover",
        "ping",
    ];
    SERVED.into_iter().find(|m| *m == method).unwrap_or(UNKNOWN_METHOD_SPAN)
}

/// The span name of every message whose method the gateway does not serve.
pub const UNKNOWN_METHOD_SPAN: &str = "mcp.unknown_method";

/// The span of one inbound message, parented on the caller's context; ended when dropped.
/// Empty (and free) when tracing is off.
#[must_use]
pub struct MessageSpan {
    cx: Option<Context>,
}

impl MessageSpan {
    /// Starts the span of one message. Named by [`span_method`]; a `tools/call` gets its tool
    /// in the name and as `gen_ai.tool.name` only once the tool resolved ([`record_call`]).
    pub fn start(method: &str, id: Option<&Value>, inbound: &Inbound) -> Self {
        let Some(tracer) = tracer() else { return Self { cx: None } };
        let method = span_method(method);
        let mut attributes = Vec::with_capacity(4);
        attributes.push(KeyValue::new("mcp.method.name", method));
        attributes.push(KeyValue::new("rpc.system.name", "jsonrpc"));
        if let Some(id) = id {
            let id = match id {
                Value::String(s) => bounded(s).to_string(),
                other => bounded(&other.to_string()).to_string(),
            };
            attributes.push(KeyValue::new("jsonrpc.request.id", id));
        }
        if let Some(request_id) = &inbound.request_id {
            attributes.push(KeyValue::new("mcp_gateway.request_id", StringValue::from(request_id.clone())));
        }
        let parent = inbound.remote_context().unwrap_or_default();
        Self { cx: Some(child_of(&parent, tracer, method, SpanKind::Server, attributes)) }
    }

    /// `future` (the message's work), run with this span's context current. Not an `async fn`:
    /// the message's future is large, and is wrapped in place rather than moved once more.
    pub fn run<F: Future>(&self, future: F) -> Either<WithContext<F>, F> {
        match &self.cx {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }

    /// Notes a gateway-made JSON-RPC error answer.
    pub fn record_error_answer(&self, code: i64, category: Option<&str>) {
        let Some(cx) = &self.cx else { return };
        let kind = category.map_or_else(|| code.to_string(), str::to_string);
        let span = cx.span();
        span.set_attributes([
            KeyValue::new("rpc.response.status_code", code.to_string()),
            KeyValue::new("error.type", kind.clone()),
        ]);
        span.set_status(Status::error(kind));
    }
}

impl Drop for MessageSpan {
    fn drop(&mut self) {
        if let Some(cx) = &self.cx {
            cx.span().end();
        }
    }
}

/// The span of one upstream attempt, a child of the current message's span; ended when
/// dropped (an attempt whose future is dropped still ends its span).
#[must_use]
pub struct AttemptSpan {
    cx: Context,
}

impl AttemptSpan {
    /// Starts an attempt span under the current message's span; `None` when tracing is off or
    /// no message span is current (the registry's background `tools/list`).
    pub fn start(name: String, attributes: Vec<KeyValue>) -> Option<Self> {
        let tracer = tracer()?;
        let parent = Context::current();
        if !parent.has_active_span() {
            return None;
        }
        Some(Self { cx: child_of(&parent, tracer, name, SpanKind::Client, attributes) })
    }

    /// Runs `f` with this span's context current (what the attempt stamps upstream).
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        let _current = self.cx.clone().attach();
        f()
    }

    /// Runs `future` (the attempt) with this span's context current.
    pub async fn run<F: Future>(&self, future: F) -> F::Output {
        future.with_context(self.cx.clone()).await
    }

    /// Notes how the attempt ended: its attributes, and an error status when it failed.
    pub fn record(&self, attributes: impl IntoIterator<Item = KeyValue>, error: Option<String>) {
        let span = self.cx.span();
        span.set_attributes(attributes);
        if let Some(error) = error {
            span.set_status(Status::error(error));
        }
    }
}

impl Drop for AttemptSpan {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

/// A new span started under `parent`, and the context that has it current.
fn child_of(
    parent: &Context,
    tracer: &SdkTracer,
    name: impl Into<std::borrow::Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> Context {
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(tracer, parent);
    parent.with_span(span)
}

/// Notes on the current message span how a `tools/call` ended (called where the call's log
/// line is written, so both always agree).
/// `tool` is the resolved tool's catalogue name (ignored when `server` is empty: the tool did
/// not resolve, and a caller-invented name appears neither in the span name nor as an attribute).
pub fn record_call(outcome: &str, attempts: u32, tool: &str, server: &str, transport: &str) {
    if !enabled() {
        return;
    }
    let cache = match outcome {
        "cache_hit" => "hit",
        "shared" | "shared_failure" => "shared",
        _ if attempts > 0 => "miss",
        _ => "none",
    };
    let fallback = match outcome {
        "fallback_stale" => "stale",
        "fallback_alternative" => "alternative",
        _ => "none",
    };
    let failed =
        !matches!(outcome, "success" | "cache_hit" | "shared" | "fallback_stale" | "fallback_alternative");
    let mut attributes = Vec::with_capacity(9);
    if !server.is_empty() {
        // A catalogue name: the set is the operator's, not the caller's.
        attributes.push(KeyValue::new("gen_ai.tool.name", bounded(tool).to_string()));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        attributes.push(KeyValue::new("mcp_gateway.server", server.to_string()));
        attributes.push(KeyValue::new("mcp_gateway.transport", transport.to_string()));
    }
    attributes.push(KeyValue::new("mcp_gateway.outcome", outcome.to_string()));
    attributes.push(KeyValue::new("mcp_gateway.attempts", i64::from(attempts)));
    // Each attribute costs a call about 1.3k instructions to export; `cache` says what the
    // booleans `cache_hit` and `shared` once repeated.
    attributes.push(KeyValue::new("mcp_gateway.cache", cache));
    attributes.push(KeyValue::new("mcp_gateway.fallback", fallback));
    if failed {
        attributes.push(KeyValue::new("error.type", outcome.to_string()));
    }
    Context::map_current(|cx| {
        let span = cx.span();
        if !server.is_empty() {
            span.update_name(format!("tools/call {}", bounded(tool)));
        }
        span.set_attributes(attributes);
        if failed {
            span.set_status(Status::error(outcome.to_string()));
        }
    });
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

/// Caller-supplied names are shown in span names, but never unboundedly.
fn bounded(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((i, _)) => &text[..i],
        None => text,
    }
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
    fn only_an_endpoint_turns_tracing_on_and_the_standard_switches_keep_it_off() {
        fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
            let pairs: Vec<(String, String)> =
                pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            move |k| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
        }
        assert!(!wanted(env(&[])));
        assert!(!wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!wanted(env(&[("OTEL_SERVICE_NAME", "x"), ("OTEL_EXPORTER_OTLP_HEADERS", "a=b")])));
        assert!(wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")])));
        assert!(wanted(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")])));
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert!(!wanted(env(&[endpoint, ("OTEL_SDK_DISABLED", "true")])));
        assert!(!wanted(env(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])));
    }

    #[test]
    fn span_names_come_from_a_fixed_set() {
        for served in ["tools/call", "tools/list", "initialize", "ping", "notifications/cancelled"] {
            assert_eq!(span_method(served), served);
        }
        for invented in ["tools/cal", "x".repeat(10_000).as_str(), "resources/list", "", "TOOLS/CALL"] {
            assert_eq!(span_method(invented), UNKNOWN_METHOD_SPAN, "{invented:.20}");
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
