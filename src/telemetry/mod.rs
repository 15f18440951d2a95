//! What operators see: Prometheus metrics, one JSON log line per call, and (when an OTLP
//! endpoint is configured) OpenTelemetry traces.

pub mod after_answer;
pub mod json_lines;
pub mod logging;
pub mod lossy;
pub mod metered;
pub mod metrics;
pub mod otel;
pub mod traced;
