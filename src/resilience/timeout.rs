//! Attempt timeout: bounds one upstream attempt by the server's `timeout_ms`, cut to what is
//! left of the caller's deadline, and turns expiry into [`UpstreamError::Timeout`] so it is
//! classified like any other failure. Every attempt that is really sent passes here (its
//! place: [`super::stack`]), so it also counts the attempts and notes whether any may have been
//! delivered. Dropping the inner future cancels the attempt (for HTTP that closes the response
//! stream).
//!
//! The attempt's clock stops while its call waits for the caller's answer to a relayed
//! server→client request (`backchannel::relay`): `timeout_ms` measures the server, and the wait is
//! the caller's, bounded by the call's deadline instead.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use super::step::{StackService, Step};
use crate::{
    backchannel::relay::RelayState,
    upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest},
};

/// Fails an attempt that takes longer than its limit.
#[derive(Debug, Clone, Copy)]
pub struct AttemptTimeoutLayer {
    limit: Duration,
}

impl AttemptTimeoutLayer {
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl Step for AttemptTimeoutLayer {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture {
        // A request may carry its own limit (a `tasks/result` waiting for its task).
        let own = request.attempt_timeout.unwrap_or(self.limit);
        let (limit, cut_by_deadline) = match request.remaining() {
            Some(left) if left < own => (left, true),
            _ => (own, false),
        };
        request.attempts.fetch_add(1, Ordering::Relaxed);
        // Assume delivery until the attempt proves otherwise (a dropped attempt may have left).
        let delivered = request.maybe_delivered.clone();
        let delivered_before = delivered.swap(true, Ordering::Relaxed);
        // A call that relays server→client requests: the attempt clock stops while the caller
        // is asked (backchannel::relay), since that time is the caller's, bounded by its deadline.
        let relay = request.relay.as_ref().map(|r| r.state.clone());
        let attempt = inner.call(request);
        Box::pin(async move {
            let timed_out = || {
                if cut_by_deadline {
                    UpstreamError::DeadlineExceeded(limit)
                } else {
                    UpstreamError::Timeout(limit)
                }
            };
            let result = match relay {
                None => tokio::time::timeout(limit, attempt).await.unwrap_or_else(|_| Err(timed_out())),
                Some(relay) => pausing_while_the_caller_is_asked(limit, attempt, &relay)
                    .await
                    .unwrap_or_else(|()| Err(timed_out())),
            };
            if result.as_ref().is_err_and(UpstreamError::never_sent) {
                delivered.store(delivered_before, Ordering::Relaxed);
            }
            result
        })
    }
}

/// Runs `attempt` for `limit` of its own time: time spent waiting for the caller's answer to a
/// relayed request does not count. `Err(())` when the attempt's own time ran out.
async fn pausing_while_the_caller_is_asked(
    limit: Duration,
    attempt: impl std::future::Future<Output = Result<UpstreamReply, UpstreamError>>,
    relay: &RelayState,
) -> Result<Result<UpstreamReply, UpstreamError>, ()> {
    let mut attempt = std::pin::pin!(attempt);
    let started = Instant::now();
    let waited_before = relay.waited();
    loop {
        if relay.waiting().is_some() {
            tokio::select! {
                result = &mut attempt => return Ok(result),
                () = relay.until_answered() => continue,
            }
        }
        let own = started.elapsed().saturating_sub(relay.waited().saturating_sub(waited_before));
        let Some(left) = limit.checked_sub(own).filter(|left| !left.is_zero()) else {
            return Err(());
        };
        if let Ok(result) = tokio::time::timeout(left, &mut attempt).await {
            return Ok(result);
        }
    }
}
