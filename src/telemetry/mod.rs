//! What operators see: Prometheus metrics and one JSON log line per call.

pub mod logging;
pub mod lossy;
pub mod metered;
pub mod metrics;
