//! The layer of the call stack that counts every upstream attempt by status and times it
//! (`mcp_gateway_upstream_requests_total`, `mcp_gateway_upstream_request_duration_seconds`).
//! Its place in the stack, and why: [`super::stack`].
//! The layer's state is shared (one `Arc` per attempt, no string copied) and the
//! `status="200"` series is resolved once, on the first successful attempt.

use std::{
    sync::{Arc, OnceLock},
    time::Instant,
};

use prometheus::{Histogram, IntCounter, IntCounterVec};

use super::step::{StackService, Step};
use crate::{
    telemetry::metrics::Metrics,
    upstream::{UpstreamFuture, UpstreamRequest},
};

/// Counts and times each attempt.
#[derive(Clone)]
pub struct MeteredLayer(Arc<Series>);

struct Series {
    /// `upstream_requests_total` curried with `{server, transport}`; `status` is added per call.
    requests: IntCounterVec,
    server: String,
    transport: &'static str,
    duration: Histogram,
    /// The `status="200"` series, once used.
    ok: OnceLock<IntCounter>,
}

impl Series {
    fn count(&self, status: &str) {
        if status == "200" {
            self.ok
                .get_or_init(|| self.requests.with_label_values(&[&self.server, self.transport, "200"]))
                .inc();
        } else {
            self.requests.with_label_values(&[self.server.as_str(), self.transport, status]).inc();
        }
    }
}

impl MeteredLayer {
    pub fn new(metrics: &Metrics, server: &str, transport: &'static str) -> Self {
        Self(Arc::new(Series {
            requests: metrics.upstream_requests.clone(),
            server: server.to_string(),
            transport,
            duration: metrics.upstream_duration.with_label_values(&[server, transport]),
            ok: OnceLock::new(),
        }))
    }
}

impl Step for MeteredLayer {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture {
        let started = Instant::now();
        let series = self.0.clone();
        let attempt = inner.call(request);
        Box::pin(async move {
            let result = attempt.await;
            series.duration.observe(started.elapsed().as_secs_f64());
            let status = match &result {
                Ok(_) => "200",
                Err(e) => e.status_label(),
            };
            series.count(status);
            result
        })
    }
}
