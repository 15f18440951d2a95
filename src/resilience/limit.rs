//! Per-server concurrency limit with load shedding: when `max_concurrency` calls are already
//! in flight to a server, the next one is refused at once ([`UpstreamError::Overloaded`])
//! instead of queueing behind a server that is not keeping up.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use prometheus::IntCounter;
use tokio::sync::Semaphore;
use tower::{Layer, Service};

use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest};

/// Builds [`ConcurrencyLimit`]; clones share the same permits.
#[derive(Clone)]
pub struct ConcurrencyLimitLayer {
    permits: Arc<Semaphore>,
    limit: usize,
    shed: IntCounter,
}

impl ConcurrencyLimitLayer {
    pub fn new(limit: usize, shed: IntCounter) -> Self {
        Self { permits: Arc::new(Semaphore::new(limit)), limit, shed }
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit { inner, layer: self.clone() }
    }
}

/// Sheds calls beyond the limit.
#[derive(Clone)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    layer: ConcurrencyLimitLayer,
}

impl<S> Service<UpstreamRequest> for ConcurrencyLimit<S>
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
        let Ok(permit) = self.layer.permits.clone().try_acquire_owned() else {
            self.layer.shed.inc();
            return Box::pin(std::future::ready(Err(UpstreamError::Overloaded { limit: self.layer.limit })));
        };
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await;
            drop(permit);
            result
        })
    }
}
