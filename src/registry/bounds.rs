//! How much of an upstream's lists the gateway agrees to hold.
//!
//! An upstream chooses how many tools it lists, how large each definition is and how many
//! pages it spreads them over; each page alone is bounded by `max_response_bytes`, but
//! without a bound on the list as a whole one server made the gateway hold 25 pages of
//! 7.9 MB (43 → 816 MiB resident) and every caller's `tools/list` 195 MB. Here each list is
//! counted while it is read ([`Tally`]), against the server's [`ListBounds`]: pages followed,
//! items, bytes of one item's definition, bytes of all of them. A list over any bound is
//! refused whole (the server keeps its last good list) and the refusal is kept for the admin
//! API ([`Refusals`]); the refresher logs it and counts it
//! (`mcp_gateway_catalogue_refusals_total{server,list,bound}`).
//!
//! The bounds are the list's, not the tools': prompts and resources (not served yet) take
//! the same [`ListBounds`] and [`Tally`] under their own [`ListKind`].

use std::{
    collections::BTreeMap,
    fmt,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use serde::Serialize;

pub use crate::config::ListBounds;

/// A list an upstream serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    ResourceTemplates,
    Prompts,
    /// `skills/list` (the Skills extension).
    Skills,
}

impl ListKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resource_templates",
            ListKind::Prompts => "prompts",
            ListKind::Skills => "skills",
        }
    }
}

/// One bound of a list (the `bound` label and the admin API's `bound`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Pages followed (`nextCursor`).
    Pages,
    /// Items in one server's list.
    Count,
    /// Bytes of one item's definition, as the upstream sent it.
    DefinitionBytes,
    /// Bytes of every definition of one server's list together.
    ListBytes,
    /// Items of every server's list together (the catalogue they are joined into).
    TotalCount,
}

impl Bound {
    pub const ALL: [Bound; 5] =
        [Bound::Pages, Bound::Count, Bound::DefinitionBytes, Bound::ListBytes, Bound::TotalCount];

    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Pages => "pages",
            Bound::Count => "count",
            Bound::DefinitionBytes => "definition_bytes",
            Bound::ListBytes => "list_bytes",
            Bound::TotalCount => "total_count",
        }
    }

    /// The setting that sets it, for tools (what a log line tells the operator to raise).
    pub fn tools_setting(self) -> &'static str {
        match self {
            Bound::Pages => "max_list_pages",
            Bound::Count => "max_tools",
            Bound::DefinitionBytes => "max_tool_definition_bytes",
            Bound::ListBytes => "max_catalogue_bytes",
            Bound::TotalCount => "catalogue.max_total_tools",
        }
    }
}

/// A bound a list went over: which, its limit, and what was seen when it was passed (the
/// count stops there: the rest of the list is not read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub bound: Bound,
    pub limit: u64,
    pub seen: u64,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Exceeded { bound, limit, seen } = self;
        match bound {
            Bound::Pages => write!(f, "more than {limit} pages"),
            Bound::Count => write!(f, "more than {limit} items"),
            Bound::DefinitionBytes => write!(f, "a definition of {seen} bytes, over the {limit}-byte bound"),
            Bound::ListBytes => write!(f, "more than {limit} bytes of definitions (at least {seen})"),
            Bound::TotalCount => write!(f, "{seen} items in the whole catalogue, over the bound of {limit}"),
        }
    }
}

/// One list counted while it is read.
#[derive(Debug)]
pub struct Tally {
    bounds: ListBounds,
    pages: usize,
    count: usize,
    bytes: usize,
}

impl Tally {
    pub fn new(bounds: ListBounds) -> Self {
        Self { bounds, pages: 0, count: 0, bytes: 0 }
    }

    /// Counts a page about to be read.
    pub fn page(&mut self) -> Result<(), Exceeded> {
        self.pages += 1;
        check(Bound::Pages, self.bounds.max_pages, self.pages)
    }

    /// Counts one item whose definition took `bytes`.
    pub fn item(&mut self, bytes: usize) -> Result<(), Exceeded> {
        check(Bound::DefinitionBytes, self.bounds.max_definition_bytes, bytes)?;
        self.count += 1;
        check(Bound::Count, self.bounds.max_count, self.count)?;
        self.bytes = self.bytes.saturating_add(bytes);
        check(Bound::ListBytes, self.bounds.max_list_bytes, self.bytes)
    }
}

fn check(bound: Bound, limit: usize, seen: usize) -> Result<(), Exceeded> {
    if seen <= limit {
        return Ok(());
    }
    Err(Exceeded { bound, limit: limit as u64, seen: seen as u64 })
}

/// Whether the catalogue may hold `count` items of every server together.
pub fn check_total(count: usize, max_total: usize) -> Result<(), Exceeded> {
    check(Bound::TotalCount, max_total, count)
}

pub use crate::shared_json::json_len;

/// A server's latest list refused, as `GET /admin/registry` reports it (`refusals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub server: String,
    pub list: &'static str,
    pub bound: &'static str,
    /// The setting that sets the bound.
    pub setting: &'static str,
    pub limit: u64,
    pub seen: u64,
    pub detail: String,
    /// When it was refused (Unix seconds).
    pub at: u64,
}

/// The servers whose latest list was refused; a list accepted later clears its server.
#[derive(Debug, Default)]
pub struct Refusals(Mutex<BTreeMap<(String, &'static str), Refusal>>);

impl Refusals {
    pub fn record(&self, server: &str, kind: ListKind, exceeded: &Exceeded) {
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let refusal = Refusal {
            server: server.to_string(),
            list: kind.as_str(),
            bound: exceeded.bound.as_str(),
            setting: exceeded.bound.tools_setting(),
            limit: exceeded.limit,
            seen: exceeded.seen,
            detail: exceeded.to_string(),
            at,
        };
        if let Ok(mut refusals) = self.0.lock() {
            refusals.insert((server.to_string(), kind.as_str()), refusal);
        }
    }

    pub fn clear(&self, server: &str, kind: ListKind) {
        if let Ok(mut refusals) = self.0.lock() {
            refusals.remove(&(server.to_string(), kind.as_str()));
        }
    }

    /// Every standing refusal, by server.
    pub fn list(&self) -> Vec<Refusal> {
        self.0.lock().map(|r| r.values().cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: ListBounds =
        ListBounds { max_pages: 2, max_count: 3, max_definition_bytes: 100, max_list_bytes: 250 };

    #[test]
    fn each_bound_is_passed_by_one_more_and_not_before() {
        let mut tally = Tally::new(BOUNDS);
        assert!(tally.page().is_ok() && tally.page().is_ok());
        assert_eq!(tally.page().unwrap_err().bound, Bound::Pages);

        let mut tally = Tally::new(BOUNDS);
        assert_eq!(
            tally.item(101).unwrap_err(),
            Exceeded { bound: Bound::DefinitionBytes, limit: 100, seen: 101 }
        );
        assert!(tally.item(100).is_ok() && tally.item(100).is_ok());
        assert_eq!(tally.item(51).unwrap_err().bound, Bound::ListBytes);

        let mut tally = Tally::new(BOUNDS);
        for _ in 0..3 {
            assert!(tally.item(1).is_ok());
        }
        assert_eq!(tally.item(1).unwrap_err(), Exceeded { bound: Bound::Count, limit: 3, seen: 4 });
        assert_eq!(check_total(11, 10).unwrap_err().bound, Bound::TotalCount);
        assert!(check_total(10, 10).is_ok());
        let value = serde_json::json!({"description": "d", "inputSchema": {"type": "object"}});
        assert_eq!(json_len(&value), value.to_string().len());
    }

    #[test]
    fn a_refusal_stands_until_its_server_is_cleared() {
        let refusals = Refusals::default();
        refusals.record("a", ListKind::Tools, &Exceeded { bound: Bound::Count, limit: 3, seen: 4 });
        refusals.record("b", ListKind::Tools, &Exceeded { bound: Bound::Pages, limit: 2, seen: 3 });
        let listed = refusals.list();
        assert_eq!(
            (listed[0].server.as_str(), listed[0].bound, listed[0].setting),
            ("a", "count", "max_tools")
        );
        refusals.clear("a", ListKind::Tools);
        assert_eq!(refusals.list().len(), 1);
        assert_eq!(refusals.list()[0].server, "b");
    }
}
