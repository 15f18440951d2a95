//! The per-server call stack: built here, and only here. Every upstream server's calls go
//! through these layers, outermost first:
//!
//! ```text
//! deadline → retry (budgeted) → circuit breaker → concurrency limit
//!          → attempt metrics → attempt span → attempt timeout → transport
//! ```
//!
//! Why each sits where it does:
//! - [`deadline`](super::deadline) is outermost: it bounds the whole call, retries included,
//!   and writes the deadline into the request, so retries never start past it and attempt
//!   timeouts are cut to what is left.
//! - [`retry`](super::retry) sits outside the breaker: every attempt is seen by the breaker,
//!   and a call refused by an open breaker is never retried.
//! - the [`breaker`](super::breaker) sits outside the concurrency limit: a call it refuses
//!   takes no slot.
//! - the [`limit`](super::limit) sheds a call before it is an attempt: a shed call is neither
//!   metered nor traced as one.
//! - [`metered`](super::metered) sits outside the attempt timeout, so timed-out attempts are
//!   counted and timed too.
//! - [`traced`](super::traced) sits just outside the attempt timeout, inside the breaker and
//!   the limit: only attempts that are really made get a span (a call refused by an open
//!   breaker has none; its message span says `circuit_open` with 0 attempts), and each
//!   attempt's trace context is stamped into the request the transport sends.
//! - the attempt [`timeout`](super::timeout) is innermost: every attempt that is really sent
//!   passes it, so it also counts the attempts and notes whether any may have been delivered.
//! - the transport: HTTP, Lambda, or a persistent connection over a WebSocket, legacy-SSE or
//!   stdio connector — the same layers and the same outcome classifier for all.
//!
//! Beside it, each server's health prober ([`super::health_probe`]) calls the transport through
//! the attempt timeout alone ([`probe_stack`]). Around it, per tool, the gateway's call adds the
//! result cache, fallbacks and truncation ([`super::cache`], [`super::fallback`],
//! [`super::truncate`]).
//!
//! Each layer is a [`Step`](super::step::Step): what it does around one call of the service
//! inside it. The `tower` plumbing is written once for all of them: the `Service` in
//! [`super::step`], the `Layer` below.

use std::sync::Arc;

use tower::{ServiceBuilder, util::BoxCloneSyncService};

use super::{
    breaker::{Breaker, BreakerLayer},
    deadline::DeadlineLayer,
    limit::ConcurrencyLimitLayer,
    metered::MeteredLayer,
    retry::RetryLayer,
    step::{Layered, StackService},
    timeout::AttemptTimeoutLayer,
    traced::TracedLayer,
};
use crate::{
    config::{Config, ServerConfig},
    telemetry::metrics::Metrics,
    upstream::UpstreamService,
};

/// Wraps a transport in the call stack configured for server `name` (the order above).
pub fn call_stack<T>(
    name: &str,
    server: &ServerConfig,
    config: &Config,
    metrics: &Metrics,
    breaker: &Arc<Breaker>,
    transport: T,
) -> UpstreamService
where
    T: StackService + Sync,
{
    let defaults = &config.defaults;
    let server_name: Arc<str> = name.into();
    let transport_kind = server.transport.as_str();
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(
            server.deadline(defaults),
            server_name.clone(),
            metrics.cancellations.clone(),
        ))
        .layer(RetryLayer::new(server.retry(defaults).clone(), server_name, metrics.retries.clone()))
        .layer(BreakerLayer::new(breaker.clone()))
        .layer(ConcurrencyLimitLayer::new(
            server.max_concurrency(defaults),
            metrics.load_shed.with_label_values(&[name]),
        ))
        .layer(MeteredLayer::new(metrics, name, transport_kind))
        .layer(TracedLayer::new(name, transport_kind, breaker.clone()))
        .layer(AttemptTimeoutLayer::new(server.timeout(defaults)))
        .service(transport);
    BoxCloneSyncService::new(service)
}

/// The transport behind the attempt timeout only: what the health prober calls.
pub fn probe_stack<T>(server: &ServerConfig, config: &Config, transport: T) -> UpstreamService
where
    T: StackService + Sync,
{
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            .layer(AttemptTimeoutLayer::new(server.timeout(&config.defaults)))
            .service(transport),
    )
}

/// `tower::Layer` for each step: the layer puts the step around the service inside it.
macro_rules! layers {
    ($($step:ty),+ $(,)?) => {$(
        impl<S> tower::Layer<S> for $step {
            type Service = Layered<$step, S>;

            fn layer(&self, inner: S) -> Self::Service {
                Layered::new(self.clone(), inner)
            }
        }
    )+};
}

layers!(
    DeadlineLayer,
    RetryLayer,
    BreakerLayer,
    ConcurrencyLimitLayer,
    MeteredLayer,
    TracedLayer,
    AttemptTimeoutLayer,
);
