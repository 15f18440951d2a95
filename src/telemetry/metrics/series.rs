//! Series upkeep. Labelled counters are pre-initialised: every server, and every tool from its
//! first use, gets a zero series for each outcome an alert divides by or counts (call
//! outcomes and error categories, upstream statuses, breaker transitions, fallbacks, shedding,
//! retries, registry tier errors), so a ratio such as `errors / calls` is 0 rather than empty
//! before the first error. Fixed label sets are created at construction (`register`);
//! per-server ones by [`Metrics::ensure_series`], which the `/metrics` handlers call with the
//! servers in force (a few dozen series each, whatever their catalogues' size); per-tool ones
//! at the tool's first use ([`Metrics::tool_label`], see `labels`), never for a tool nobody
//! called. A tool that leaves the catalogue loses them ([`Metrics::retain_tools`]).

use super::Metrics;
use crate::error::Category;

/// `tool_calls` outcomes given a zero series per tool: successes, tool errors, fallbacks and
/// every error category a call can end in (the alert rules count them all).
const CALL_OUTCOMES: &[&str] =
    &["success", "tool_error", "cache_hit", "shared", "fallback_stale", "fallback_alternative"];
const CALL_ERROR_CATEGORIES: &[Category] = &[
    Category::BadInput,
    Category::PayloadTooLarge,
    Category::UpstreamError,
    Category::UpstreamUnavailable,
    Category::Timeout,
    Category::RateLimited,
    Category::CircuitOpen,
    Category::Overloaded,
    Category::UpstreamMisconfigured,
    Category::UpstreamAuth,
    Category::UpstreamRejected,
    Category::UpstreamProtocol,
    Category::Forbidden,
    Category::Internal,
];
/// Upstream attempt statuses given a zero series per server.
const UPSTREAM_STATUSES: &[&str] = &[
    "200",
    "connect_error",
    "io_error",
    "timeout",
    "429",
    "404",
    "500",
    "502",
    "503",
    "504",
    "5xx",
    "protocol_error",
    "function_error_unhandled",
    "function_error_handled",
    "401",
    "403",
    "not_connected",
];
const BREAKER_TARGETS: &[&str] = &["open", "half_open", "closed"];

impl Metrics {
    /// Drops every per-tool series of `tool` on `server`.
    pub(super) fn remove_tool_series(&self, tool: &str, server: &str) {
        let outcomes = CALL_OUTCOMES
            .iter()
            .copied()
            .chain(["shared_failure"])
            .chain(Category::ALL.iter().map(|c| c.as_str()));
        for outcome in outcomes {
            let _ = self.tool_calls.remove_label_values(&[tool, server, outcome]);
        }
        let _ = self.tool_call_duration.remove_label_values(&[tool, server]);
        for kind in ["stale", "alternative"] {
            let _ = self.fallbacks.remove_label_values(&[tool, kind]);
        }
        for result in ["hit", "miss", "shared"] {
            let _ = self.result_cache.remove_label_values(&[tool, result]);
        }
        let _ = self.truncations.remove_label_values(&[tool]);
    }

    /// Removes the gauge series of a server a reload removed: a gauge left at its last value
    /// would go on saying, say, that a breaker is open, for a server that is gone (and keep
    /// its alert firing). Its counters stay: they only ever stop growing.
    pub fn forget_server(&self, server: &str, connection_states: &[&str]) {
        let _ = self.breaker_state.remove_label_values(&[server]);
        let _ = self.upstream_change_streams.remove_label_values(&[server]);
        let _ = self.resource_subscriptions.remove_label_values(&[server]);
        for era in ["session", "2026-07-28"] {
            let _ = self.upstream_era.remove_label_values(&[server, era]);
        }
        for state in connection_states {
            let _ = self.upstream_connection_state.remove_label_values(&[server, state]);
        }
        if let Ok(mut seen) = self.initialised.lock() {
            seen.remove(&format!("\0{server}"));
        }
    }

    /// Creates the zero series of every server (`(server, transport)`) not seen before (cheap
    /// when nothing is new: one set lookup each).
    pub fn ensure_series<'a>(&self, servers: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let Ok(mut seen) = self.initialised.lock() else { return };
        for (server, transport) in servers {
            if !seen.insert(format!("\0{server}")) {
                continue;
            }
            for status in UPSTREAM_STATUSES {
                self.upstream_requests.with_label_values(&[server, transport, status]);
            }
            self.upstream_duration.with_label_values(&[server, transport]);
            for to in BREAKER_TARGETS {
                self.breaker_transitions.with_label_values(&[server, to]);
            }
            self.breaker_rejected.with_label_values(&[server]);
            for result in ["success", "failure", "peer"] {
                self.breaker_health_probes.with_label_values(&[server, result]);
            }
            self.load_shed.with_label_values(&[server]);
            for result in ["taken", "denied_by_budget"] {
                self.retries.with_label_values(&[server, result]);
            }
            for reason in ["deadline", "disconnect"] {
                self.cancellations.with_label_values(&[server, reason]);
            }
            for outcome in ["success", "failure"] {
                self.registry_refreshes.with_label_values(&[server, outcome]);
            }
            for bound in crate::registry::bounds::Bound::ALL {
                self.catalogue_refusals.with_label_values(&[
                    server,
                    crate::registry::bounds::ListKind::Tools.as_str(),
                    bound.as_str(),
                ]);
            }
            if matches!(transport, "websocket" | "sse" | "stdio") {
                self.upstream_reconnects.with_label_values(&[server]);
                for reason in ["unknown_id", "invalid", "progress_overflow"] {
                    self.upstream_dropped_messages.with_label_values(&[server, reason]);
                }
            }
        }
    }

    /// Creates the zero series of `tool` (a label value: an admitted tool, or `other`) on
    /// `server`: every call outcome an alert counts, the latency histogram, the fallback kinds,
    /// the cache results and truncations.
    pub(super) fn create_tool_series(&self, tool: &str, server: &str) {
        let outcomes = CALL_OUTCOMES.iter().copied().chain(CALL_ERROR_CATEGORIES.iter().map(|c| c.as_str()));
        for outcome in outcomes {
            self.tool_calls.with_label_values(&[tool, server, outcome]);
        }
        self.tool_call_duration.with_label_values(&[tool, server]);
        for kind in ["stale", "alternative"] {
            self.fallbacks.with_label_values(&[tool, kind]);
        }
        for result in ["hit", "miss", "shared"] {
            self.result_cache.with_label_values(&[tool, result]);
        }
        self.truncations.with_label_values(&[tool]);
    }
}
