//! Budgeted, idempotency-aware retries.
//!
//! A failed attempt is tried again only when all of these hold:
//! - the outcome is retryable ([`Outcome::is_retryable`]: server errors, timeouts, rate limits);
//! - repeating is safe: the request is `safe_to_repeat` (read-only or idempotent tool, or an
//!   idempotency key the server honours), or it provably never left the gateway (connect
//!   failure) — then up to `max_retries_unsafe`;
//! - attempts remain (`max_retries_safe` / `max_retries_unsafe`);
//! - a `Retry-After` is no longer than `retry_after_cap_ms` (it is then honoured);
//! - the wait (exponential backoff, full jitter) ends before the caller's deadline;
//! - the server's retry budget allows it: retries are at most `budget_ratio` of calls plus
//!   `budget_min_per_sec` (tower's `TpsBudget`), so an outage multiplies load by that much at
//!   most. Retries taken and denied are counted.

use std::{sync::Arc, time::Duration};

use prometheus::IntCounterVec;
use tower::{
    ServiceExt,
    retry::budget::{Budget, TpsBudget},
};

use super::{
    classify::Outcome,
    step::{StackService, Step},
};
use crate::{
    config::RetrySettings,
    upstream::{UpstreamFuture, UpstreamRequest},
};

/// Retries failed attempts within the rules above (its place: [`super::stack`]); clones share
/// one budget (the state is one `Arc`: a call clones it once).
#[derive(Clone)]
pub struct RetryLayer(Arc<Shared>);

struct Shared {
    settings: RetrySettings,
    budget: TpsBudget,
    server: Arc<str>,
    retries: IntCounterVec,
}

impl RetryLayer {
    pub fn new(settings: RetrySettings, server: Arc<str>, retries: IntCounterVec) -> Self {
        let budget = TpsBudget::new(
            Duration::from_secs(settings.budget_window_secs.clamp(1, 60)),
            settings.budget_min_per_sec,
            settings.budget_ratio,
        );
        Self(Arc::new(Shared { settings, budget, server, retries }))
    }
}

impl Shared {
    /// The wait before retry number `retry` (0-based), or `None` if no retry may happen.
    fn plan(&self, request: &UpstreamRequest, outcome: Outcome, retry: u32) -> Option<Duration> {
        if !outcome.is_retryable() {
            return None;
        }
        // A call that relayed a request to its caller (a person or model may have been asked)
        // is never repeated.
        if request.relay.as_ref().is_some_and(|r| r.relayed()) {
            return None;
        }
        let never_left = matches!(outcome, Outcome::ServerError { reached_server: false });
        let max = if request.safe_to_repeat {
            self.settings.max_retries_safe
        } else if never_left {
            self.settings.max_retries_unsafe
        } else {
            return None;
        };
        if retry >= max {
            return None;
        }
        let ceiling = self
            .settings
            .backoff_base_ms
            .saturating_mul(1u64 << retry.min(16))
            .min(self.settings.backoff_max_ms);
        let mut wait = Duration::from_millis(fastrand::u64(0..=ceiling));
        if let Outcome::RateLimited { retry_after: Some(after) } = outcome {
            if after > self.settings.retry_after_cap() {
                return None;
            }
            wait = wait.max(after);
        }
        if request.deadline.is_some_and(|deadline| crate::clock::after(wait) >= deadline) {
            return None;
        }
        Some(wait)
    }
}

impl Step for RetryLayer {
    fn call<S: StackService>(&self, inner: &mut S, request: UpstreamRequest) -> UpstreamFuture {
        // The service made ready for this call goes with it; a clone stays for the next call
        // (one clone of the stack per call, not one per attempt).
        let clone = inner.clone();
        let mut inner = std::mem::replace(inner, clone);
        let layer = self.0.clone();
        Box::pin(async move {
            layer.budget.deposit();
            let tools_call = request.method == "tools/call";
            let mut retry = 0;
            loop {
                let result = match inner.ready().await {
                    Ok(ready) => ready.call(request.clone()).await,
                    Err(error) => Err(error),
                };
                let outcome = Outcome::of(&result, tools_call);
                let Some(wait) = layer.plan(&request, outcome, retry) else {
                    return result;
                };
                if !layer.budget.withdraw() {
                    layer.retries.with_label_values(&[&layer.server, "denied_by_budget"]).inc();
                    return result;
                }
                layer.retries.with_label_values(&[&layer.server, "taken"]).inc();
                tracing::debug!(server = %layer.server, retry = retry + 1, wait_ms = wait.as_millis() as u64, outcome = outcome.label(), "retrying");
                tokio::time::sleep(wait).await;
                retry += 1;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Opts;

    fn layer(settings: RetrySettings) -> Arc<Shared> {
        RetryLayer::new(
            settings,
            "s".into(),
            IntCounterVec::new(Opts::new("r", "r"), &["server", "result"]).unwrap(),
        )
        .0
    }

    fn request(safe: bool) -> UpstreamRequest {
        let mut r = UpstreamRequest::new("tools/call", Default::default());
        r.safe_to_repeat = safe;
        r
    }

    #[test]
    fn safety_decides_what_may_be_repeated() {
        let l = layer(RetrySettings::default());
        let sent = Outcome::ServerError { reached_server: true };
        let never_left = Outcome::ServerError { reached_server: false };
        assert!(l.plan(&request(true), sent, 0).is_some());
        assert!(l.plan(&request(true), sent, 2).is_none(), "two retries at most");
        assert!(l.plan(&request(false), sent, 0).is_none(), "not after it reached the server");
        assert!(l.plan(&request(false), Outcome::Timeout, 0).is_none(), "a timeout may have run it");
        assert!(l.plan(&request(false), never_left, 0).is_none(), "default: unsafe tools get 0 retries");
        let unsafe_ok = layer(RetrySettings { max_retries_unsafe: 1, ..Default::default() });
        assert!(unsafe_ok.plan(&request(false), never_left, 0).is_some());
        assert!(l.plan(&request(true), Outcome::ClientError, 0).is_none());
        assert!(l.plan(&request(true), Outcome::ToolError, 0).is_none());
    }

    #[test]
    fn retry_after_is_honoured_capped_and_bounded_by_the_deadline() {
        let l = layer(RetrySettings::default());
        let limited = |secs| Outcome::RateLimited { retry_after: Some(Duration::from_secs_f64(secs)) };
        assert!(l.plan(&request(true), limited(1.5), 0).unwrap() >= Duration::from_millis(1500));
        assert!(l.plan(&request(true), limited(5.0), 0).is_none(), "over the cap");
        let mut near = request(true);
        near.deadline = Some(std::time::Instant::now() + Duration::from_millis(500));
        assert!(l.plan(&near, limited(1.0), 0).is_none(), "would end past the deadline");
    }
}
