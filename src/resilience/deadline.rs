//! Deadline: bounds the whole call, retries included, by the caller's deadline
//! (`X-Request-Timeout-Ms` header or `_meta["io.mcp-gateway/timeoutMs"]`, else the server's
//! `deadline_ms`). Inner layers read the deadline from the request: retries never start past
//! it and attempt timeouts are cut to what is left. When it passes — or the caller goes away
//! and the call is dropped — the upstream call is cancelled and the cancellation counted.

use std::time::{Duration, Instant};

use prometheus::IntCounterVec;

use super::step::{StackService, Step};
use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamRequest};

/// Enforces the caller's deadline over the whole call (its place: [`super::stack`]).
#[derive(Clone)]
pub struct DeadlineLayer {
    default: Duration,
    server: std::sync::Arc<str>,
    cancellations: IntCounterVec,
}

impl DeadlineLayer {
    pub fn new(default: Duration, server: std::sync::Arc<str>, cancellations: IntCounterVec) -> Self {
        Self { default, server, cancellations }
    }
}

/// Counts a call dropped before it finished (the caller disconnected).
struct DisconnectGuard {
    layer: DeadlineLayer,
    armed: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.armed {
            self.layer.cancellations.with_label_values(&[&self.layer.server, "disconnect"]).inc();
            tracing::info!(server = %self.layer.server, "caller went away; upstream call cancelled");
        }
    }
}

impl Step for DeadlineLayer {
    fn call<S: StackService>(&self, inner: &mut S, mut request: UpstreamRequest) -> UpstreamFuture {
        let now = Instant::now();
        let deadline = request.deadline.unwrap_or_else(|| crate::clock::later(now, self.default));
        request.deadline = Some(deadline);
        let budget = deadline.saturating_duration_since(now);
        let layer = self.clone();
        let relay = request.relay.as_ref().map(|r| r.state.clone());
        let call = inner.call(request);
        Box::pin(async move {
            let mut guard = DisconnectGuard { layer: layer.clone(), armed: true };
            let result = tokio::time::timeout_at(deadline.into(), call).await;
            guard.armed = false;
            match result {
                // An attempt cut short by the deadline (attempt timeout layer) counts the same.
                Ok(Err(UpstreamError::DeadlineExceeded(_))) | Err(_) => {
                    layer.cancellations.with_label_values(&[&layer.server, "deadline"]).inc();
                    // Spent waiting for the caller's answer to a relayed request: say so.
                    match relay.and_then(|r| r.waiting()) {
                        Some(method) => Err(UpstreamError::CallerDidNotAnswer(method)),
                        None => Err(UpstreamError::DeadlineExceeded(budget)),
                    }
                }
                Ok(result) => result,
            }
        })
    }
}
