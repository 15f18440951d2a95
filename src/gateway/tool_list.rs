//! Reading a server's `tools/list`: every page, each definition counted against the server's
//! bounds before it is parsed ([`crate::registry::bounds`]), large pages parsed off the
//! runtime's thread. Its own room because three readers share it and its failure type: the
//! refresh loop (`refresh.rs`), the drift check (`drift.rs`) and the federation, whose lists of
//! resources and prompts fail the same ways (`federation/lists.rs`).

use serde::Deserialize;
use serde_json::{Map, Value, json, value::RawValue};
use tower::ServiceExt;

use super::Upstream;
use crate::shared_json::SharedJson;
use crate::{
    registry::bounds::{Exceeded, ListBounds, Tally},
    upstream::{RawResult, UpstreamError, UpstreamReply, UpstreamRequest},
};
use std::time::Duration;

/// A server's tools and its freshness hint.
pub struct Listing {
    /// Each definition as compact JSON text, written from its parsed value (so the same
    /// definition is the same text whatever the server's spacing); kept as text, never the
    /// whole list as values at once ([`crate::registry::catalog::ServerTools`]).
    pub tools: Vec<SharedJson>,
    pub ttl: Option<Duration>,
}

/// Why a server's `tools/list` gave no list.
#[derive(Debug)]
pub enum ListFailure {
    /// The server did not answer it (or not with a list).
    Upstream(UpstreamError),
    /// The list went over one of the server's bounds ([`bounds`]): refused whole.
    Refused(Exceeded),
}

impl std::fmt::Display for ListFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListFailure::Upstream(e) => e.fmt(f),
            ListFailure::Refused(exceeded) => write!(f, "tools/list refused: {exceeded}"),
        }
    }
}

impl From<UpstreamError> for ListFailure {
    fn from(e: UpstreamError) -> Self {
        ListFailure::Upstream(e)
    }
}

/// Reads every page of a server's `tools/list`, counting it against `bounds` as it goes:
/// the first bound passed ends the reading and refuses the list.
pub async fn list_tools(upstream: &Upstream, bounds: ListBounds) -> Result<Listing, ListFailure> {
    let mut tally = Tally::new(bounds);
    if let Some(openapi) = &upstream.openapi {
        // An OpenAPI target's tools are mapped into the texts the catalogue holds: taken as
        // they are (one page), counted against the same bounds, never written out and parsed
        // again (Microsoft Graph's would be 85 MB of JSON each refresh).
        let tools = openapi.tools().await?;
        tally.page().map_err(ListFailure::Refused)?;
        for tool in &tools {
            tally.item(tool.len()).map_err(ListFailure::Refused)?;
        }
        return Ok(Listing { tools, ttl: None });
    }
    let mut listing = Listing { tools: Vec::new(), ttl: None };
    let mut cursor: Option<String> = None;
    loop {
        tally.page().map_err(ListFailure::Refused)?;
        let mut params = Map::new();
        if let Some(c) = cursor.take() {
            params.insert("cursor".into(), json!(c));
        }
        let reply = upstream.service.clone().oneshot(UpstreamRequest::new("tools/list", params)).await?;
        let page = match reply {
            UpstreamReply::Result(raw) => {
                let (page, counted) = parse_page(raw, tally).await?;
                tally = counted;
                page
            }
            UpstreamReply::Error(e) => {
                let failed = UpstreamError::Protocol(format!("tools/list failed: {} {}", e.code, e.message));
                return Err(failed.into());
            }
        };
        listing.tools.extend(page.tools);
        if let Some(ms) = page.ttl_ms {
            // Bounded where it is used ([`Refresher::server_wait`]).
            let ttl = Duration::from_millis(ms);
            listing.ttl = Some(listing.ttl.map_or(ttl, |t| t.min(ttl)));
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(listing),
        }
    }
}

/// One page of a `tools/list` result, each definition as the server sent it.
#[derive(Deserialize)]
struct RawPage<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<u64>,
}

/// One page, its definitions counted, parsed and written again as compact text.
struct Page {
    tools: Vec<SharedJson>,
    next_cursor: Option<String>,
    ttl_ms: Option<u64>,
}

/// Pages from this size up are parsed on tokio's blocking pool: a page of thousands of tools
/// (2.1 MB for the demo's 10,006) takes milliseconds, which on the runtime's thread every
/// call in flight would wait out.
const LARGE_PAGE_BYTES: usize = 256 * 1024;

/// Parses a page and counts each definition on `tally` (its size as sent) before it is
/// parsed: a definition over a bound is never turned into a value.
async fn parse_page(raw: RawResult, mut tally: Tally) -> Result<(Page, Tally), ListFailure> {
    let large = raw.get().len() >= LARGE_PAGE_BYTES;
    let parse = move || {
        let protocol = |e: serde_json::Error| UpstreamError::Protocol(format!("tools/list result: {e}"));
        let page = serde_json::from_str::<RawPage<'_>>(raw.get()).map_err(protocol)?;
        let mut tools = Vec::with_capacity(page.tools.len());
        for definition in page.tools {
            tally.item(definition.get().len()).map_err(ListFailure::Refused)?;
            let value = serde_json::from_str::<Value>(definition.get()).map_err(protocol)?;
            tools.push(SharedJson::of(&value));
        }
        let page = Page { tools, next_cursor: page.next_cursor, ttl_ms: page.ttl_ms };
        Ok((page, tally))
    };
    if !large {
        return parse();
    }
    tokio::task::spawn_blocking(parse)
        .await
        .unwrap_or_else(|e| Err(UpstreamError::Protocol(format!("tools/list result not parsed: {e}")).into()))
}
