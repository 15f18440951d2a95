//! A tower layer that counts every upstream attempt by status and times it
//! (`mcp_gateway_upstream_requests_total`, `mcp_gateway_upstream_request_duration_seconds`).
//! It sits outside the attempt timeout so timed-out attempts are counted too.
//! The layer's state is shared (one `Arc` per attempt, no string copied) and the
//! `status="200"` series is resolved once, on the first successful attempt.

use std::{
    sync::{Arc, OnceLock},
    task::{Context, Poll},
    time::Instant,
};

use prometheus::{Histogram, IntCounter, IntCounterVec};
use tower::{Layer, Service};

use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamReply};

/// Builds [`Metered`].
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
    pub fn new(metrics: &super::metrics::Metrics, server: &str, transport: &'static str) -> Self {
        Self(Arc::new(Series {
            requests: metrics.upstream_requests.clone(),
            server: server.to_string(),
            transport,
            duration: metrics.upstream_duration.with_label_values(&[server, transport]),
            ok: OnceLock::new(),
        }))
    }
}

impl<S> Layer<S> for MeteredLayer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metered { inner, layer: self.clone() }
    }
}

/// Counts and times each call of the inner service.
#[derive(Clone)]
pub struct Metered<S> {
    inner: S,
    layer: MeteredLayer,
}

impl<S, R> Service<R> for Metered<S>
where
    S: Service<R, Response = UpstreamReply, Error = UpstreamError>,
    S::Future: Send + 'static,
{
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let started = Instant::now();
        let series = self.layer.0.clone();
        let attempt = self.inner.call(request);
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
