//! The breaker in the call stack: a call is refused at once while the breaker is open
//! ([`UpstreamError::CircuitOpen`], nothing sent), and every admitted call's outcome is
//! recorded; a probe dropped before its outcome frees its slot.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use super::{Breaker, state::Admission};
use crate::{
    resilience::classify::Outcome,
    upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest},
};

/// Builds [`BreakerService`].
#[derive(Clone)]
pub struct BreakerLayer {
    breaker: Arc<Breaker>,
}

impl BreakerLayer {
    pub fn new(breaker: Arc<Breaker>) -> Self {
        Self { breaker }
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService { inner, breaker: self.breaker.clone() }
    }
}

/// Refuses calls while the breaker is open; reports every outcome to it.
#[derive(Clone)]
pub struct BreakerService<S> {
    inner: S,
    breaker: Arc<Breaker>,
}

/// Releases a half-open probe slot if the call is dropped before its outcome is known.
struct ProbeGuard {
    breaker: Arc<Breaker>,
    armed: bool,
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if self.armed {
            self.breaker.release_probe();
        }
    }
}

impl<S> Service<UpstreamRequest> for BreakerService<S>
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
        let probe = match self.breaker.admit() {
            Admission::Rejected { retry_after } => {
                return Box::pin(std::future::ready(Err(UpstreamError::CircuitOpen { retry_after })));
            }
            Admission::Allowed { probe } => probe,
        };
        let tools_call = request.method == "tools/call";
        let breaker = self.breaker.clone();
        let call = self.inner.call(request);
        Box::pin(async move {
            let mut guard = ProbeGuard { breaker: breaker.clone(), armed: probe };
            let result = call.await;
            guard.armed = false;
            breaker.record(Outcome::of(&result, tools_call), probe);
            result
        })
    }
}
