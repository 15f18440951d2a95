//! Logging: JSON lines on stdout through a non-blocking writer, so a slow log pipe never
//! stalls a request. Call lines carry an argument *hash*, never the arguments.

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// Installs the global subscriber. Keep the guard alive until exit: it flushes the writer.
pub fn init(filter: &str, json: bool) -> WorkerGuard {
    let (writer, guard) =
        tracing_appender::non_blocking::NonBlockingBuilder::default().lossy(false).finish(std::io::stdout());
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(writer),
            )
            .init();
    } else {
        registry.with(fmt::layer().with_writer(writer)).init();
    }
    guard
}

/// Hash of canonical arguments, for correlating calls in logs without logging their content.
pub fn argument_hash(arguments: &serde_json::Value) -> String {
    crate::registry::record::canonical_hash(arguments)
}
