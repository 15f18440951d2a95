//! Attempt timeout: bounds one upstream attempt, and turns expiry into
//! [`UpstreamError::Timeout`] so it is classified like any other failure. Dropping the inner
//! future cancels the attempt (for HTTP that closes the response stream).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

use crate::upstream::UpstreamError;

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

impl<S, R> Service<R> for AttemptTimeout<S>
where
    S: Service<R, Error = UpstreamError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = UpstreamError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, UpstreamError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let limit = self.limit;
        let attempt = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(limit, attempt).await {
                Ok(result) => result,
                Err(_) => Err(UpstreamError::Timeout(limit)),
            }
        })
    }
}
