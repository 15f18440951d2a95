//! Attempt timeout: bounds one upstream attempt by the server's `timeout_ms`, cut to what is
//! left of the caller's deadline, and turns expiry into [`UpstreamError::Timeout`] so it is
//! classified like any other failure. It is the innermost layer: every attempt that is really
//! sent passes here, so it also counts the attempts and notes whether any may have been
//! delivered. Dropping the inner future cancels the
//! attempt (for HTTP that closes the response stream).

use std::{
    sync::atomic::Ordering,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest};

/// Builds [`AttemptTimeout`].
#[derive(Debug, Clone, Copy)]
pub struct AttemptTimeoutLayer {
    limit: Duration,
}

impl AttemptTimeoutLayer {
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for AttemptTimeoutLayer {
    type Service = AttemptTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AttemptTimeout { inner, limit: self.limit }
    }
}

/// Fails an attempt that takes longer than its limit.
#[derive(Debug, Clone)]
pub struct AttemptTimeout<S> {
    inner: S,
    limit: Duration,
}

impl<S> Service<UpstreamRequest> for AttemptTimeout<S>
where
    S: Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>,
    S::Future: Send + 'static,
{
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let (limit, cut_by_deadline) = match request.remaining() {
            Some(left) if left < self.limit => (left, true),
            _ => (self.limit, false),
        };
        request.attempts.fetch_add(1, Ordering::Relaxed);
        // Assume delivery until the attempt proves otherwise (a dropped attempt may have left).
        let delivered = request.maybe_delivered.clone();
        let delivered_before = delivered.swap(true, Ordering::Relaxed);
        // An attempt that runs out while its call waits for the caller's answer to a relayed
        // request ran out on the caller's time: attributed to the caller (upstream::relay).
        let relay = request.relay.as_ref().map(|r| r.state.clone());
        let attempt = self.inner.call(request);
        Box::pin(async move {
            let result = match tokio::time::timeout(limit, attempt).await {
                Ok(result) => result,
                Err(_) if let Some(method) = relay.as_ref().and_then(|r| r.waiting()) => {
                    Err(UpstreamError::CallerDidNotAnswer(method))
                }
                Err(_) if cut_by_deadline => Err(UpstreamError::DeadlineExceeded(limit)),
                Err(_) => Err(UpstreamError::Timeout(limit)),
            };
            if result.as_ref().is_err_and(UpstreamError::never_sent) {
                delivered.store(delivered_before, Ordering::Relaxed);
            }
            result
        })
    }
}
