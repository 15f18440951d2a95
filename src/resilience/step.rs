//! The plumbing every layer of the call stack shares ([`super::stack`] builds the stack): a
//! layer is a [`Step`], what it does around one call of the service inside it, and
//! [`Layered`] makes any step a `tower::Service` (readiness passed through, the future boxed).
//! So a layer's file holds its own logic and nothing of tower's boilerplate.

use std::task::{Context, Poll};

use tower::Service;

use crate::upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest};

/// What every layer of the stack wraps: a service of upstream requests, cloneable (a retried
/// call takes its own copy of the stack), whose futures can be boxed.
pub trait StackService:
    Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<S> StackService for S where
    S: Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

/// One layer's work around one call of the service inside it (`inner`, ready when this is
/// called, as `tower` promises).
pub trait Step: Clone {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture;
}

/// A step around the service inside it: the `tower::Service` of every layer of the stack.
#[derive(Clone)]
pub struct Layered<L, S> {
    step: L,
    inner: S,
}

impl<L, S> Layered<L, S> {
    /// `step` around `inner`.
    pub fn new(step: L, inner: S) -> Self {
        Self { step, inner }
    }
}

impl<L: Step, S: StackService> Service<UpstreamRequest> for Layered<L, S> {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        self.step.call(&mut self.inner, request)
    }
}
