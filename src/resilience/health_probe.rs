//! The health prober of one server's breaker: while the breaker is open, a cheap request that
//! runs no tool, on a fixed interval (`breaker.probe_interval_ms`, default 1 s, each wait up to
//! a quarter longer at random).
//!
//! Why: with callers' calls as the probes, the open period doubled on every failed probe, so
//! recovery time grew with the outage (an upstream away for 7 s was used again 7.3 s after it
//! came back), and each probe risked a caller's call on a server that might still be down. Here
//! no caller's call reaches the server while the breaker is open; the first probe that gets an
//! answer closes it, so a server that is back is in use within about one interval.
//!
//! The probe is `server/discover` for a modern HTTP server (and one whose era is not known
//! yet), `ping` for a session-era or persistent (WebSocket, SSE, stdio) server, and a
//! `tools/list` invoke for Lambda. Any JSON-RPC answer, even an error, shows the server is
//! there; no answer (connect error, reset, timeout, 5xx, 429, refused credentials) keeps the
//! breaker open. The probe goes straight to the transport with the attempt timeout: no retry,
//! no breaker, no concurrency slot, not in the upstream request metrics.
//!
//! With shared breakers, one gateway of the fleet probes per server per interval: it must win
//! `SET mcp:{breakers}:health:<server> NX PX <interval>` first ([`SharedBreakers::claim_health_probe`]).
//! Its success closes its breaker and bumps the fleet's recovery counter; every other open
//! instance then probes once at once, without a claim (its own path to the server may differ),
//! and closes on its own success. Probes are counted in
//! `mcp_gateway_breaker_health_probes_total{server,result}` (`success`, `failure`, `peer`: the
//! interval's claim was a peer's).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use prometheus::IntCounterVec;
use tower::ServiceExt;

use super::{breaker::Breaker, shared::SharedBreakers};
use crate::upstream::{UpstreamReply, UpstreamRequest, UpstreamService};

/// Picks the probe's method at each probe (an HTTP server's era may be learnt meanwhile).
pub type ProbeMethod = Box<dyn Fn() -> &'static str + Send + Sync>;

/// What a prober needs.
pub struct Prober {
    pub breaker: Weak<Breaker>,
    /// The transport behind the attempt timeout only.
    pub service: UpstreamService,
    pub method: ProbeMethod,
    pub interval: Duration,
    pub shared: Option<Arc<SharedBreakers>>,
    pub probes: IntCounterVec,
}

impl Prober {
    /// Runs until the breaker is gone (its server's stack was replaced or dropped).
    pub async fn run(self: Arc<Self>) {
        loop {
            let Some(breaker) = self.breaker.upgrade() else { return };
            if !breaker.needs_health_probe() {
                // Woken when it opens; waking now and then lets a dropped stack end the task.
                let _ = tokio::time::timeout(Duration::from_secs(60), breaker.prober_woken()).await;
                continue;
            }
            // Up to a quarter longer at random: with shared breakers the claim's holder would
            // otherwise win every interval (it ticks just after its own claim expires), and an
            // instance whose own path is broken could keep the others from ever probing.
            let wait = crate::clock::capped(self.interval).mul_f64(1.0 + 0.25 * fastrand::f64());
            let peer_recovered = tokio::select! {
                _ = tokio::time::sleep(wait) => breaker.take_peer_recovered(),
                _ = breaker.prober_woken() => breaker.take_peer_recovered(),
            };
            if !breaker.needs_health_probe() {
                continue;
            }
            let server = breaker.server.clone();
            let claimed = match (&self.shared, peer_recovered) {
                (Some(shared), false) if breaker.claims_needed() => {
                    shared.claim_health_probe(&server, self.interval).await
                }
                _ => true,
            };
            if !claimed {
                self.probes.with_label_values(&[&server, "peer"]).inc();
                continue;
            }
            let method = (self.method)();
            let request = UpstreamRequest::new(method, serde_json::Map::new());
            let answered = matches!(
                self.service.clone().oneshot(request).await,
                Ok(UpstreamReply::Result(_) | UpstreamReply::Error(_))
            );
            let result = if answered { "success" } else { "failure" };
            self.probes.with_label_values(&[&server, result]).inc();
            tracing::debug!(server = %server, method, result, "breaker health probe");
            breaker.record_health_probe(answered);
        }
    }
}
