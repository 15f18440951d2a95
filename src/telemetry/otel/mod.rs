//! OpenTelemetry tracing: one span per inbound MCP message ([`MessageSpan`]), one child span
//! per upstream attempt ([`AttemptSpan`], made by `resilience::traced`), exported as
//! OTLP/HTTP protobuf by the SDK's batch processor (on a thread of its own), and W3C trace
//! context carried across the gateway.
//!
//! The spans are made with the OpenTelemetry SDK directly, not through `tracing` spans and a
//! bridge layer: a call's two spans then cost what the SDK costs (a span, its attributes, one
//! lock each), and the log pipeline never sees them. A message's
//! [`Context`](opentelemetry::Context) is current while its future is polled, so the attempt
//! span, the log line's trace id and the upstream's `traceparent` all come from it.
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
//! This file only names the parts: the switch and the exporter are `exporter`, the spans
//! `spans`, the trace context in and out of the gateway `context`.

mod context;
mod exporter;
mod spans;

pub use context::{Inbound, log_trace_id, outbound, scoped, trace_id_of, valid_traceparent};
pub use exporter::{Tracing, enabled, init, wanted};
pub use spans::{AttemptSpan, MessageSpan, UNKNOWN_METHOD_SPAN, record_call, span_method};

/// `_meta` and header keys of the W3C trace context (SEP-414 uses the header names bare).
pub use crate::upstream::outbound::{AMZN_TRACE_ID, Outbound, REQUEST_ID, TRACEPARENT, TRACESTATE};
