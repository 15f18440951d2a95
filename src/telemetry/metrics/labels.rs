//! The bounded `tool` label: at most `catalogue.max_tool_label_values` distinct tools are
//! admitted (first come, kept while they stay in the catalogue); calls of any other tool are
//! counted under `tool="other"`. When a tool leaves the catalogue ([`Metrics::retain_tools`])
//! its series are removed, so an upstream that renames its tools on every list cannot grow the
//! series without bound. `mcp_gateway_metric_series` reports the count at each scrape.

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

    /// The `tool` label value of `tool`: its name when admitted, else [`OTHER_TOOL`].
    pub fn tool_label<'a>(&self, tool: &'a str) -> &'a str {
        match self.tool_labels.read() {
            Ok(labels) if labels.admitted.contains_key(tool) => tool,
            _ => OTHER_TOOL,
        }
    }

    /// Makes the catalogue's tools (`(tool, server)`) the admitted label values: tools that left
    /// it (or moved to another server) lose their series, new ones are admitted while the cap
    /// allows (in the order given). Returns how many series sets were removed.
    ///
    /// Lock order, as in [`Self::ensure_series`]: the set of initialised series first, then the
    /// admitted labels. A scrape creating a tool's zero series and a refresh removing that tool
    /// are thereby one before the other: the series cannot be created after their removal (a
    /// leak that grew with every rename) and the two cannot wait on each other.
    pub fn retain_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
        let current: HashMap<&str, &str> = tools.into_iter().collect();
        let Ok(mut seen) = self.initialised.lock() else { return 0 };
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
            seen.remove(&format!("{tool}\0{server}"));
        }
        let mut fresh: Vec<(&str, &str)> = current
            .iter()
            .filter(|(tool, _)| !labels.admitted.contains_key(**tool))
            .map(|(t, s)| (*t, *s))
            .collect();
        fresh.sort_unstable();
        for (tool, server) in fresh {
            if labels.admitted.len() >= labels.cap {
                break;
            }
            labels.admitted.insert(tool.into(), server.into());
        }
        self.tool_label_values.set(labels.admitted.len() as i64);
        departed.len()
    }
}
