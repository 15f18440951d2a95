//! The console's live figures (`GET /admin/overview`): calls per second, error ratio and
//! p50/p99 latency, for the gateway and per server, over the last minute.
//!
//! Why from the gateway's own metrics: the console must show what Prometheus would compute
//! from `mcp_gateway_tool_calls_total` and `mcp_gateway_tool_call_duration_seconds`, not a
//! second opinion. Each overview request reads those two families once (a snapshot of
//! cumulative counts per server) and compares it with the oldest snapshot of a small ring
//! taken no more than [`WINDOW`] ago; so nothing runs while nobody looks, the ring holds at
//! most one snapshot a second ([`MAX_SNAPSHOTS`]), and the first request after start compares
//! with the zero snapshot of start. Errors are the outcomes the `McpToolErrorRatioHigh` alert
//! counts ([`super::recent_calls::is_error`]), over the calls that reached or should have
//! reached a server (a caller's own error, [`super::recent_calls::is_caller_error`], is in
//! neither); percentiles interpolate inside the histogram's
//! buckets as `histogram_quantile` does.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use prometheus::core::Collector;

use super::metrics::Metrics;

/// The window the rates and percentiles cover.
pub const WINDOW: Duration = Duration::from_secs(60);
/// One snapshot a second over the window, and the one just before it.
const MAX_SNAPSHOTS: usize = 62;

/// One server's cumulative counts at a snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub calls: u64,
    /// The calls that reached or should have reached a server (all but the caller's own
    /// errors): the error ratio's denominator.
    pub judged: u64,
    pub errors: u64,
    /// Cumulative bucket counts of the duration histogram (upper bounds in `bounds`).
    pub buckets: Vec<u64>,
    pub observed: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.calls += other.calls;
        self.judged += other.judged;
        self.errors += other.errors;
        self.observed += other.observed;
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
    }

    /// What happened between `earlier` and `self` (counters only grow, unless a series was
    /// dropped with a tool that left the catalogue: then what is left).
    fn since(&self, earlier: Option<&Counts>) -> Counts {
        let Some(earlier) = earlier else { return self.clone() };
        let minus = |a: u64, b: u64| a.saturating_sub(b);
        Counts {
            calls: minus(self.calls, earlier.calls),
            judged: minus(self.judged, earlier.judged),
            errors: minus(self.errors, earlier.errors),
            observed: minus(self.observed, earlier.observed),
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .map(|(i, b)| minus(*b, earlier.buckets.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// Cumulative counts per server (`""`: calls no server was chosen for) at one instant.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    servers: BTreeMap<String, Counts>,
}

/// Figures over the window, for the gateway or one server.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub calls_per_sec: f64,
    /// `None` without calls in the window.
    pub error_ratio: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Calls in the window.
    pub calls: u64,
}

/// What one overview request computes.
#[derive(Debug)]
pub struct Window {
    pub seconds: f64,
    pub gateway: Figures,
    pub servers: BTreeMap<String, Figures>,
}

/// The ring of snapshots.
#[derive(Debug)]
pub struct Overview {
    ring: Mutex<VecDeque<Snapshot>>,
    bounds: Vec<f64>,
}

impl Overview {
    /// A ring holding the zero snapshot of now (the gateway's start).
    pub fn new(bounds: &[f64]) -> Self {
        let start = Snapshot { at: Instant::now(), servers: BTreeMap::new() };
        Self { ring: Mutex::new(VecDeque::from([start])), bounds: bounds.to_vec() }
    }

    /// Reads the metrics now and compares with the oldest snapshot of the last [`WINDOW`].
    pub fn window(&self, metrics: &Metrics) -> Window {
        let now = Snapshot { at: Instant::now(), servers: read(metrics) };
        let base = {
            let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            // Drop what a newer snapshot replaces as the window's start.
            while ring.len() > 1 && ring.get(1).is_some_and(|s| now.at.duration_since(s.at) >= WINDOW) {
                ring.pop_front();
            }
            let base = ring.iter().find(|s| now.at.duration_since(s.at) <= WINDOW).or(ring.back()).cloned();
            if ring.back().is_none_or(|last| now.at.duration_since(last.at) >= Duration::from_secs(1)) {
                if ring.len() >= MAX_SNAPSHOTS {
                    ring.pop_front();
                }
                ring.push_back(now.clone());
            }
            base
        };
        let (seconds, earlier) = match &base {
            Some(base) => (now.at.duration_since(base.at).as_secs_f64(), Some(&base.servers)),
            None => (0.0, None),
        };
        let mut total = Counts::default();
        let mut servers = BTreeMap::new();
        for (server, counts) in &now.servers {
            let delta = counts.since(earlier.and_then(|e| e.get(server)));
            total.add(&delta);
            if !server.is_empty() {
                servers.insert(server.clone(), self.figures(&delta, seconds));
            }
        }
        Window { seconds, gateway: self.figures(&total, seconds), servers }
    }

    fn figures(&self, delta: &Counts, seconds: f64) -> Figures {
        let calls_per_sec = if seconds > 0.0 { delta.calls as f64 / seconds } else { 0.0 };
        Figures {
            calls_per_sec,
            error_ratio: (delta.judged > 0).then(|| delta.errors as f64 / delta.judged as f64),
            p50_ms: quantile(0.5, &self.bounds, delta).map(|s| s * 1000.0),
            p99_ms: quantile(0.99, &self.bounds, delta).map(|s| s * 1000.0),
            calls: delta.calls,
        }
    }
}

/// The `q` quantile (seconds) of the observations in `counts`, interpolated linearly inside
/// its bucket; in the last (`+Inf`) bucket, the highest finite bound. `None` without any.
pub fn quantile(q: f64, bounds: &[f64], counts: &Counts) -> Option<f64> {
    if counts.observed == 0 {
        return None;
    }
    let rank = q * counts.observed as f64;
    let mut below = 0u64;
    let mut lower = 0.0;
    for (i, upper) in bounds.iter().enumerate() {
        let cumulative = counts.buckets.get(i).copied().unwrap_or(below);
        if cumulative as f64 >= rank {
            let inside = cumulative.saturating_sub(below);
            if inside == 0 {
                return Some(*upper);
            }
            return Some(lower + (upper - lower) * ((rank - below as f64) / inside as f64));
        }
        below = cumulative;
        lower = *upper;
    }
    bounds.last().copied()
}

/// Cumulative counts per server from the two metric families.
fn read(metrics: &Metrics) -> BTreeMap<String, Counts> {
    let mut servers: BTreeMap<String, Counts> = BTreeMap::new();
    for family in metrics.tool_calls.collect() {
        for metric in family.get_metric() {
            let (mut server, mut outcome) = ("", "");
            for label in metric.get_label() {
                match label.name() {
                    "server" => server = label.value(),
                    "outcome" => outcome = label.value(),
                    _ => {}
                }
            }
            let count = metric.get_counter().get_value() as u64;
            if count == 0 {
                continue;
            }
            let entry = servers.entry(server.to_owned()).or_default();
            entry.calls += count;
            // A caller's own error never reached the server: out of its ratio's denominator
            // as out of its numerator.
            if !super::recent_calls::is_caller_error(outcome) {
                entry.judged += count;
            }
            if super::recent_calls::is_error(outcome) {
                entry.errors += count;
            }
        }
    }
    for family in metrics.tool_call_duration.collect() {
        for metric in family.get_metric() {
            let histogram = metric.get_histogram();
            if histogram.get_sample_count() == 0 {
                continue;
            }
            let server = metric.get_label().iter().find(|l| l.name() == "server").map_or("", |l| l.value());
            let counts = Counts {
                observed: histogram.get_sample_count(),
                buckets: histogram.get_bucket().iter().map(|b| b.cumulative_count()).collect(),
                ..Counts::default()
            };
            servers.entry(server.to_owned()).or_default().add(&counts);
        }
    }
    servers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_inside_the_bucket_as_histogram_quantile_does() {
        let bounds = [0.1, 0.2, 0.4];
        // 10 observations: 2 under 0.1 s, 6 in (0.1, 0.2], 2 in (0.2, 0.4].
        let counts = Counts { calls: 10, judged: 10, errors: 0, buckets: vec![2, 8, 10], observed: 10 };
        let p50 = quantile(0.5, &bounds, &counts).unwrap();
        assert!((p50 - 0.15).abs() < 1e-9, "{p50}");
        let p99 = quantile(0.99, &bounds, &counts).unwrap();
        assert!((p99 - 0.39).abs() < 1e-9, "{p99}");
        // Beyond the last finite bound: that bound.
        let slow = Counts { calls: 1, judged: 1, errors: 0, buckets: vec![0, 0, 0], observed: 1 };
        assert_eq!(quantile(0.5, &bounds, &slow), Some(0.4));
        assert_eq!(quantile(0.5, &bounds, &Counts::default()), None);
    }

    #[test]
    fn the_window_counts_what_happened_since_its_start() {
        let metrics = Metrics::new();
        let overview = Overview::new(&[0.1, 1.0]);
        metrics.tool_calls.with_label_values(&["t", "s", "success"]).inc_by(3);
        metrics.tool_calls.with_label_values(&["t", "s", "upstream_timeout"]).inc();
        metrics.tool_calls.with_label_values(&["<unresolved>", "", "unknown_tool"]).inc();
        // The caller's own errors: calls, but not the server's errors.
        metrics.tool_calls.with_label_values(&["t", "s", "bad_input"]).inc_by(4);
        metrics.tool_calls.with_label_values(&["t", "s", "quota_refused"]).inc();
        let window = overview.window(&metrics);
        let s = &window.servers["s"];
        assert_eq!(s.calls, 9);
        assert_eq!(s.error_ratio, Some(0.25), "one timeout in the four calls that reached s");
        assert_eq!(window.gateway.calls, 10);
        assert!(!window.servers.contains_key(""));
    }
}
