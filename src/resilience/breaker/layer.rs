//! The breaker in the call stack: a call is refused at once while the breaker is open
//! ([`UpstreamError::CircuitOpen`], nothing sent), and every admitted call's outcome is
//! recorded; a probe dropped before its outcome frees its slot.

use std::sync::Arc;

use super::{Breaker, state::Admission};
use crate::{
    resilience::{
        classify::Outcome,
        step::{StackService, Step},
    },
    upstream::{UpstreamError, UpstreamFuture, UpstreamRequest},
};

/// Refuses calls while the breaker is open; reports every outcome to it.
#[derive(Clone)]
pub struct BreakerLayer {
    breaker: Arc<Breaker>,
}

impl BreakerLayer {
    pub fn new(breaker: Arc<Breaker>) -> Self {
        Self { breaker }
    }
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

impl Step for BreakerLayer {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture {
        let probe = match self.breaker.admit() {
            Admission::Rejected { retry_after } => {
                return Box::pin(std::future::ready(Err(UpstreamError::CircuitOpen { retry_after })));
            }
            Admission::Allowed { probe } => probe,
        };
        let tools_call = request.method == "tools/call";
        let breaker = self.breaker.clone();
        let call = inner.call(request);
        Box::pin(async move {
            let mut guard = ProbeGuard { breaker: breaker.clone(), armed: probe };
            let result = call.await;
            guard.armed = false;
            breaker.record(Outcome::of(&result, tools_call), probe);
            result
        })
    }
}
