//! Per-server concurrency limit with load shedding: when `max_concurrency` calls are already
//! in flight to a server, the next one is refused at once ([`UpstreamError::Overloaded`])
//! instead of queueing behind a server that is not keeping up.

use std::sync::Arc;

use prometheus::IntCounter;
use tokio::sync::Semaphore;

use super::step::{StackService, Step};
use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamRequest};

/// Sheds calls beyond the limit (its place: [`super::stack`]); clones share the same permits.
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

impl Step for ConcurrencyLimitLayer {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            self.shed.inc();
            return Box::pin(std::future::ready(Err(UpstreamError::Overloaded { limit: self.limit })));
        };
        let call = inner.call(request);
        Box::pin(async move {
            let result = call.await;
            drop(permit);
            result
        })
    }
}
