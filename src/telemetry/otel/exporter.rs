//! The switch and the exporter: whether spans are made (one relaxed atomic load decides),
//! the tracer they are made with, and the OTLP exporter and batch processor set up from the
//! standard `OTEL_*` variables and shut down after the server drained. Separate so that the
//! spans and the trace context depend on the switch, never on each other's home.

use std::sync::{
    OnceLock,
    atomic::{AtomicBool, Ordering},
};

use opentelemetry::{KeyValue, trace::TracerProvider as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The tracer spans are made with (set once, by the first [`init`] that turns tracing on).
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether spans are being made and exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The tracer, when spans are being made.
pub(super) fn tracer() -> Option<&'static SdkTracer> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
