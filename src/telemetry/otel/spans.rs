//! The spans: one per inbound MCP message ([`MessageSpan`]), one child span per upstream
//! attempt ([`AttemptSpan`], made by `resilience::traced`), and how a `tools/call` ended noted
//! on its message's span ([`record_call`]). Their names come from a fixed set and they never
//! carry arguments, results, header values or `_meta` contents.

use futures_util::future::Either;
use opentelemetry::{
    Context, KeyValue, StringValue,
    context::{FutureExt as _, WithContext},
    trace::{SpanKind, Status, TraceContextExt, Tracer as _},
};
use opentelemetry_sdk::trace::SdkTracer;
use serde_json::Value;

use super::{
    context::Inbound,
    exporter::{enabled, tracer},
};

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

    #[test]
    fn span_names_come_from_a_fixed_set() {
        for served in ["tools/call", "tools/list", "initialize", "ping", "notifications/cancelled"] {
            assert_eq!(span_method(served), served);
        }
        for invented in ["tools/cal", "x".repeat(10_000).as_str(), "resources/list", "", "TOOLS/CALL"] {
            assert_eq!(span_method(invented), UNKNOWN_METHOD_SPAN, "{invented:.20}");
        }
    }
}
