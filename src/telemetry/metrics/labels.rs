//! The bounded `tool` label, and the per-tool series that come with it.
//!
//! A tool's series exist from its first use, not from its arrival in the catalogue: a
//! catalogue of 19,000 tools used to export 46 zero series per tool (every outcome, every cache
//! result and fallback, a whole latency histogram) before a single call, some 900,000 series
//! that a managed Prometheus bills one by one. Now a tool is admitted as a label value at its
//! first call ([`Metrics::tool_label`]), and only then gets its zero series, the whole set at
//! once, so the ratios of that tool are 0 rather than empty from then on.
//!
//! At most `catalogue.max_tool_label_values` distinct tools are admitted (first called, first
//! admitted; kept while they stay in the catalogue); calls of any other tool are counted under
//! `tool="other"`, whose zero series a server gets at its first such call. When a tool leaves
//! the catalogue ([`Metrics::retain_tools`]) its series are removed and its place is free, so
//! an upstream that renames its tools on every list cannot grow the series without bound.
//! `mcp_gateway_metric_series` reports the count at each scrape.

use std::{collections::HashMap, sync::Arc};

use super::{Metrics, OTHER_TOOL};

/// Default cap on distinct tool label values (`catalogue.max_tool_label_values`).
pub(super) const DEFAULT_TOOL_LABEL_CAP: usize = 20_000;

impl Metrics {
    /// Sets the cap on distinct tool label values (`catalogue.max_tool_label_values`).
    pub fn set_tool_label_cap(&self, cap: usize) {
        if let Ok(mut labels) = self.tool_labels.write() {
            labels.cap = cap.max(1);
        }
    }

    /// The `tool` label value of the catalogue tool `tool` of `server`: its name once admitted,
    /// else [`OTHER_TOOL`]. The first use of a tool admits it while the cap allows and creates
    /// its zero series (one write lock, once per tool); every later use is one read lock and
    /// one probe. Only tools a server offers may be passed here (never a caller's made-up name).
    pub fn tool_label<'a>(&self, tool: &'a str, server: &str) -> &'a str {
        if let Ok(labels) = self.tool_labels.read() {
            match labels.admitted.get(tool) {
                Some(admitted) if **admitted == *server => return tool,
                // Moved to another server since: the slow path moves its series.
                Some(_) => {}
                None if labels.admitted.len() >= labels.cap && labels.others.contains(server) => {
                    return OTHER_TOOL;
                }
                None => {}
            }
        }
        let Ok(mut labels) = self.tool_labels.write() else { return OTHER_TOOL };
        if let Some(before) = labels.admitted.get(tool).cloned() {
            if *before == *server {
                return tool;
            }
            labels.admitted.remove(tool);
            self.remove_tool_series(tool, &before);
        }
        if labels.admitted.len() < labels.cap {
            self.create_tool_series(tool, server);
            labels.admitted.insert(tool.into(), server.into());
            self.tool_label_values.set(labels.admitted.len() as i64);
            return tool;
        }
        if !labels.others.contains(server) {
            self.create_tool_series(OTHER_TOOL, server);
            labels.others.insert(server.into());
        }
        OTHER_TOOL
    }

    /// Keeps the admitted label values of the tools still in the catalogue (`(tool, server)`):
    /// tools that left it (or moved to another server) lose their series, and their places are
    /// free for the next tools called. Returns how many tools lost them.
    pub fn retain_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
        let current: HashMap<&str, &str, foldhash::fast::RandomState> = tools.into_iter().collect();
        let Ok(mut labels) = self.tool_labels.write() else { return 0 };
        let departed: Vec<(Arc<str>, Arc<str>)> = labels
            .admitted
            .iter()
            .filter(|(tool, server)| current.get(tool.as_ref()) != Some(&server.as_ref()))
            .map(|(tool, server)| (tool.clone(), server.clone()))
            .collect();
        for (tool, server) in &departed {
            labels.admitted.remove(tool);
            self.remove_tool_series(tool, server);
        }
        self.tool_label_values.set(labels.admitted.len() as i64);
        departed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Series of the exposition carrying a `tool` label.
    fn tool_series(metrics: &Metrics) -> usize {
        let text = String::from_utf8(metrics.render()).unwrap_or_default();
        text.lines().filter(|l| !l.starts_with('#') && l.contains("tool=\"")).count()
    }

    fn catalogue(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("tool_{i:05}"), "srv".to_string())).collect()
    }

    #[test]
    fn no_tool_series_before_use_whatever_the_catalogue_size() {
        for n in [200, 5_000] {
            let metrics = Metrics::new();
            let tools = catalogue(n);
            metrics.retain_tools(tools.iter().map(|(t, s)| (t.as_str(), s.as_str())));
            metrics.ensure_series([("srv", "http")]);
            assert_eq!(tool_series(&metrics), 0, "{n} tools, none called");
            assert_eq!(metrics.tool_label_values.get(), 0);
        }
        // The whole exposition is the same size for both catalogues.
        let sizes: Vec<usize> = [200, 5_000]
            .into_iter()
            .map(|n| {
                let metrics = Metrics::new();
                let tools = catalogue(n);
                metrics.retain_tools(tools.iter().map(|(t, s)| (t.as_str(), s.as_str())));
                metrics.ensure_series([("srv", "http")]);
                metrics.render().len()
            })
            .collect();
        assert_eq!(sizes[0], sizes[1]);
    }

    #[test]
    fn a_tool_gets_its_whole_zero_set_at_its_first_use() {
        let metrics = Metrics::new();
        assert_eq!(metrics.tool_label("tool_a", "srv"), "tool_a");
        let per_tool = tool_series(&metrics);
        // Every outcome, fallback kind, cache result, truncations and the histogram.
        assert!(per_tool >= 40, "{per_tool}");
        let text = String::from_utf8(metrics.render()).unwrap_or_default();
        assert!(
            text.contains(r#"mcp_gateway_tool_calls_total{outcome="timeout",server="srv",tool="tool_a"} 0"#)
        );
        assert_eq!(metrics.tool_label("tool_a", "srv"), "tool_a");
        assert_eq!(tool_series(&metrics), per_tool, "a second use creates nothing");
    }

    #[test]
    fn label_values_stay_bounded_when_calls_spread_over_every_tool() {
        let metrics = Metrics::new();
        metrics.set_tool_label_cap(10);
        metrics.tool_label("first", "srv");
        let per_tool = tool_series(&metrics);
        let tools = catalogue(500);
        for (tool, server) in &tools {
            let label = metrics.tool_label(tool, server);
            metrics.tool_calls.with_label_values(&[label, server, "success"]).inc();
        }
        assert_eq!(metrics.tool_label_values.get(), 10);
        // Ten tools (`first` and nine others) and `other`, each with one zero set.
        assert_eq!(tool_series(&metrics), 11 * per_tool);
        assert_eq!(metrics.tool_label("tool_00499", "srv"), OTHER_TOOL);
        assert_eq!(metrics.tool_calls.with_label_values(&[OTHER_TOOL, "srv", "success"]).get(), 491);
    }

    #[test]
    fn a_departed_tool_frees_its_place_and_loses_its_series() {
        let metrics = Metrics::new();
        metrics.set_tool_label_cap(1);
        assert_eq!(metrics.tool_label("old", "srv"), "old");
        assert_eq!(metrics.tool_label("new", "srv"), OTHER_TOOL);
        let before = tool_series(&metrics);
        assert_eq!(metrics.retain_tools([("new", "srv")]), 1);
        assert_eq!(metrics.tool_label("new", "srv"), "new");
        let text = String::from_utf8(metrics.render()).unwrap_or_default();
        assert!(!text.contains("tool=\"old\""), "{text}");
        assert_eq!(tool_series(&metrics), before, "one tool and `other`, as before");
    }

    #[test]
    fn a_tool_that_moved_to_another_server_moves_its_series() {
        let metrics = Metrics::new();
        metrics.tool_label("t", "one");
        let before = tool_series(&metrics);
        assert_eq!(metrics.tool_label("t", "two"), "t");
        let text = String::from_utf8(metrics.render()).unwrap_or_default();
        assert!(!text.contains("server=\"one\",tool=\"t\""), "{text}");
        assert_eq!(tool_series(&metrics), before);
    }
}
