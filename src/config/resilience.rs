//! Per-server resilience settings, with documented defaults. `[defaults.retry]` and
//! `[defaults.breaker]` apply to every server; a server's own `[servers.X.retry]` or
//! `[servers.X.breaker]` table replaces them (keys it leaves out take the built-in defaults).

use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

/// Retry policy of one server.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrySettings {
    /// Extra attempts for read-only or idempotent tools (and `tools/list`).
    pub max_retries_safe: u32,
    /// Extra attempts for other tools when the request provably never reached the server,
    /// or when the server honours idempotency keys.
    pub max_retries_unsafe: u32,
    /// The server deduplicates by the `_meta` idempotency key, so any tool may be retried.
    pub honours_idempotency_keys: bool,
    /// First backoff; doubles per retry, with full jitter.
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Longest `Retry-After` the gateway will wait for before retrying (longer: no retry).
    pub retry_after_cap_ms: u64,
    /// Retries may add at most this fraction of the server's calls (0.2 = 20%) …
    pub budget_ratio: f32,
    /// … plus this many retries per second regardless of traffic.
    pub budget_min_per_sec: u32,
    /// Window over which calls are counted for the budget, in seconds (1–60).
    pub budget_window_secs: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_retries_safe: 2,
            max_retries_unsafe: 0,
            honours_idempotency_keys: false,
            backoff_base_ms: 25,
            backoff_max_ms: 1_000,
            retry_after_cap_ms: 2_000,
            budget_ratio: 0.2,
            budget_min_per_sec: 5,
            budget_window_secs: 10,
        }
    }
}

/// Circuit breaker thresholds of one server.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerSettings {
    pub enabled: bool,
    /// Trip after this many hard failures in a row.
    pub consecutive_failures: u32,
    /// Trip when the failure rate over the window reaches this fraction …
    pub failure_rate: f64,
    /// … once the window holds at least this many calls.
    pub min_calls: u32,
    /// Sliding window length, in seconds.
    pub window_secs: u64,
    /// First open period; doubles on each failed probe (jittered ±20%), up to `open_max_ms`
    /// (with health probes, `probe_interval_ms`, the open period only spreads a trip to the fleet).
    pub open_base_ms: u64,
    pub open_max_ms: u64,
    /// Concurrent probes allowed while half-open (callers' calls; `probe_interval_ms = 0` only).
    pub half_open_probes: u32,
    /// While open, the gateway itself probes the server on this fixed interval with a cheap
    /// request that runs no tool (`server/discover` for a modern server, `ping` for a
    /// session-era or persistent one, `tools/list` for Lambda); the first success closes the
    /// breaker, and no caller's call is risked on a server that may be down. With shared
    /// breakers one gateway of the fleet probes per interval. 0: no health probe — after the
    /// open period (doubling per failed probe) callers' calls are the probes.
    pub probe_interval_ms: u64,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            consecutive_failures: 5,
            failure_rate: 0.5,
            min_calls: 20,
            window_secs: 10,
            open_base_ms: 1_000,
            open_max_ms: 30_000,
            half_open_probes: 1,
            probe_interval_ms: 1_000,
        }
    }
}

impl RetrySettings {
    pub fn validate(&self, server: &str) -> anyhow::Result<()> {
        if !(1..=60).contains(&self.budget_window_secs) {
            bail!("server {server}: retry.budget_window_secs must be within 1..=60");
        }
        if !(0.0..=10.0).contains(&self.budget_ratio) {
            bail!("server {server}: retry.budget_ratio must be within 0..=10");
        }
        Ok(())
    }

    pub fn retry_after_cap(&self) -> Duration {
        Duration::from_millis(self.retry_after_cap_ms)
    }
}

impl BreakerSettings {
    /// The health probe's interval while open, when the gateway probes (not callers' calls).
    pub fn probe_interval(&self) -> Option<Duration> {
        (self.enabled && self.probe_interval_ms > 0).then(|| Duration::from_millis(self.probe_interval_ms))
    }

    pub fn validate(&self, server: &str) -> anyhow::Result<()> {
        if !(0.0..=1.0).contains(&self.failure_rate) || self.failure_rate == 0.0 {
            bail!("server {server}: breaker.failure_rate must be within (0, 1]");
        }
        if self.consecutive_failures == 0 || self.half_open_probes == 0 || self.window_secs == 0 {
            bail!(
                "server {server}: breaker.consecutive_failures, half_open_probes and window_secs must be positive"
            );
        }
        if (1..50).contains(&self.probe_interval_ms) {
            bail!("server {server}: breaker.probe_interval_ms must be 0 (off) or at least 50");
        }
        Ok(())
    }
}
