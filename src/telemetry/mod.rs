//! What operators see: Prometheus metrics, one JSON log line per call, and (when an OTLP
//! endpoint is configured) OpenTelemetry traces. The layers that meter and trace each upstream
//! attempt are part of the call stack, in `resilience` (`metered`, `traced`).

pub mod after_answer;
pub mod json_lines;
pub mod logging;
pub mod lossy;
pub mod metrics;
pub mod otel;
pub mod overview;
pub mod recent_calls;
