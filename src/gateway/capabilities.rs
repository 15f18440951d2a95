//! What the orchestrator can count on right now: which tools are unavailable or degraded,
//! why and since when (`GET /capabilities`, `_meta["io.mcp-gateway/degraded"]` of
//! `tools/list`), and the optional leaving-out of unavailable tools
//! (`hide_unavailable_tools`).
//!
//! [`server_health`] collects one [`ServerHealth`] per server that is not fine, from every
//! source the gateway has: the circuit breaker (open: `circuit_open`, held open by an
//! operator: `circuit_forced_open`, half-open: `circuit_half_open`, degraded) and the tool
//! refresh (`tools/list` failing to connect: `unreachable`; refused credentials:
//! `needs_auth`; any other failure: `tools_list_failing`, degraded, since the last known
//! tools are still served), and the connection of a persistent transport (WebSocket, SSE,
//! stdio: `reconnecting`, `failed`, `needs_auth`, `disabled` are unavailable — calls fail fast
//! — and the first `connecting` is degraded). When two sources disagree, the worse
//! availability wins.
//!
//! "Unavailable" means calls are refused or fail now; "degraded" means they may work. Only
//! unavailable servers' tools are left out by `hide_unavailable_tools`: hiding a degraded tool
//! would make the model lose it for a blip. The summary is a few hundred bytes (a one-line
//! `text` for a prompt, plus the same facts as data); when everything is fine `tools/list`
//! carries no `_meta` key at all, so the healthy path stays a pre-serialized answer.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Instant, SystemTime},
};

use serde_json::{Value, json, value::RawValue};

use super::Gateway;
use crate::{
    registry::entry::rfc3339,
    resilience::breaker::{BreakerHealth, State},
    upstream::connection::ConnectionState,
};

/// The `_meta` key of `tools/list` that carries the summary (a gateway-owned prefix).
pub const META_KEY: &str = "io.mcp-gateway/degraded";

/// Longest `tools/list` cache hint (modern clients' `ttlMs`) while something is degraded, so
/// clients list again soon after a recovery.
const DEGRADED_TTL_MS: u64 = 5_000;

/// At most this many tool names per server in the one-line text.
const TEXT_TOOLS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Availability {
    /// Calls may work (half-open breaker, failing refresh with last known tools served).
    Degraded,
    /// Calls are refused or fail now.
    Unavailable,
}

impl Availability {
    pub fn name(self) -> &'static str {
        match self {
            Availability::Degraded => "degraded",
            Availability::Unavailable => "unavailable",
        }
    }
}

/// One server that is not fine.
#[derive(Debug, Clone)]
pub struct ServerHealth {
    pub availability: Availability,
    /// `circuit_open`, `circuit_forced_open`, `circuit_half_open`, `unreachable`, `needs_auth`,
    /// `tools_list_failing`; for persistent connections their state (`connecting`,
    /// `reconnecting`, `failed`, `needs_auth`, `disabled`).
    pub reason: &'static str,
    pub since: Option<SystemTime>,
    /// When an open breaker lets a probe through.
    pub retry_after_ms: Option<u64>,
    pub detail: Option<String>,
}

fn from_breaker(health: BreakerHealth) -> Option<ServerHealth> {
    let (availability, reason, retry_after_ms) = match health.state {
        State::Closed => return None,
        State::Open { .. } if health.forced_open => (Availability::Unavailable, "circuit_forced_open", None),
        State::Open { until } => {
            let left = until.saturating_duration_since(Instant::now()).as_millis() as u64;
            (Availability::Unavailable, "circuit_open", Some(left))
        }
        State::HalfOpen { .. } => (Availability::Degraded, "circuit_half_open", None),
    };
    Some(ServerHealth { availability, reason, since: health.since, retry_after_ms, detail: None })
}

/// A persistent connection (WebSocket, SSE, stdio) that is not ready: backing off is
/// unavailable now (calls fail fast until it is back), as are `failed`, `needs_auth` and
/// `disabled`; the first `connecting` is degraded (calls wait for that first attempt).
fn from_connection(
    (state, since, last_error): (ConnectionState, Instant, Option<String>),
) -> Option<ServerHealth> {
    let availability = match state {
        ConnectionState::Ready => return None,
        ConnectionState::Connecting => Availability::Degraded,
        ConnectionState::Reconnecting
        | ConnectionState::Failed
        | ConnectionState::NeedsAuth
        | ConnectionState::Disabled => Availability::Unavailable,
    };
    let since = SystemTime::now().checked_sub(since.elapsed());
    Some(ServerHealth {
        availability,
        reason: state.as_str(),
        since,
        retry_after_ms: None,
        detail: last_error,
    })
}

fn from_refresh(failure: super::RefreshFailure) -> ServerHealth {
    let availability = match failure.reason {
        "unreachable" | "needs_auth" | "circuit_open" => Availability::Unavailable,
        _ => Availability::Degraded,
    };
    ServerHealth {
        availability,
        reason: failure.reason,
        since: Some(failure.since),
        retry_after_ms: None,
        detail: Some(failure.detail),
    }
}

/// Keeps the worse of two reports of one server.
fn merge(map: &mut BTreeMap<String, ServerHealth>, server: &str, health: ServerHealth) {
    match map.get(server) {
        Some(have) if have.availability >= health.availability => {}
        _ => {
            map.insert(server.to_string(), health);
        }
    }
}

/// Every server that is not fine, from every health source.
pub fn server_health(gateway: &Gateway) -> BTreeMap<String, ServerHealth> {
    let mut out = BTreeMap::new();
    for upstream in gateway.all_upstreams() {
        if let Some(health) = from_breaker(upstream.breaker.health()) {
            merge(&mut out, &upstream.name, health);
        }
        if let Some(health) = upstream.connection.as_ref().and_then(|c| from_connection(c.health())) {
            merge(&mut out, &upstream.name, health);
        }
    }
    for (server, failure) in gateway.readiness.refresh_failures() {
        merge(&mut out, &server, from_refresh(failure));
    }
    out
}

/// The summary and what it implies for listing.
pub struct Summary {
    /// `GET /capabilities` body (and the `_meta` value).
    pub report: Value,
    /// Exposed names of the tools of unavailable servers.
    pub unavailable: BTreeSet<String>,
    pub degraded: bool,
}

/// The summary of `health` over the current catalogue, as far as `view` shows it (`None`:
/// every tool; with a tool policy, only the tools the caller may see are named or counted).
pub fn summarize(
    gateway: &Gateway,
    health: &BTreeMap<String, ServerHealth>,
    view: Option<&crate::policy::ToolView>,
) -> Summary {
    let mut tools_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut all = gateway.catalog().snapshot().tools();
    // The summary is for the orchestrator's model: it names no tool for an MCP App only.
    all.retain(|t| !crate::protocol::extensions::app_only(t.definition.head()));
    if let Some(view) = view {
        all.retain(|t| view.shows(&t.name));
    }
    for tool in &all {
        tools_of.entry(tool.server.to_string()).or_default().push(tool.name.to_string());
    }
    let mut unavailable = BTreeSet::new();
    let mut degraded_tools = 0;
    let mut servers = Vec::new();
    let mut phrases = Vec::new();
    for (server, h) in health {
        let tools = tools_of.get(server).cloned().unwrap_or_default();
        match h.availability {
            Availability::Unavailable => unavailable.extend(tools.iter().cloned()),
            Availability::Degraded => degraded_tools += tools.len(),
        }
        let since = h.since.map(rfc3339);
        let mut entry = json!({
            "server": server,
            "status": h.availability.name(),
            "reason": h.reason,
            "since": since,
            "tools": tools,
        });
        if let Some(ms) = h.retry_after_ms {
            entry["retry_after_ms"] = json!(ms);
        }
        if let Some(detail) = &h.detail {
            entry["detail"] = json!(detail);
        }
        servers.push(entry);
        let shown: Vec<&str> = tools.iter().take(TEXT_TOOLS).map(String::as_str).collect();
        let more = tools.len().saturating_sub(TEXT_TOOLS);
        let mut names = if shown.is_empty() { "no tools".to_string() } else { shown.join(", ") };
        if more > 0 {
            names.push_str(&format!(" +{more} more"));
        }
        let since = since.map(|s| format!(" since {s}")).unwrap_or_default();
        phrases.push(format!("{} {} ({}{since}): {names}", server, h.availability.name(), h.reason));
    }
    let total = all.len();
    let text = if health.is_empty() {
        format!("All {total} tools available.")
    } else {
        format!(
            "{} of {total} tools unavailable, {degraded_tools} degraded. {}.",
            unavailable.len(),
            phrases.join("; ")
        )
    };
    let status = if health.is_empty() { "ok" } else { "degraded" };
    let report = json!({
        "status": status,
        "text": text,
        "tools": {
            "total": total,
            "available": total - unavailable.len(),
            "unavailable": unavailable.len(),
            "degraded": degraded_tools,
        },
        "servers": servers,
        "hide_unavailable_tools": gateway.settings().config.hide_unavailable_tools,
    });
    Summary { report, unavailable, degraded: !health.is_empty() }
}

/// `GET /capabilities` body, for a caller who sees `view` (`None`: every tool).
pub fn report(gateway: &Gateway, view: Option<&crate::policy::ToolView>) -> Value {
    summarize(gateway, &server_health(gateway), view).report
}

/// The `tools/list` result while some server is not fine: the list with the summary under
/// `_meta[META_KEY]`, without the unavailable tools when `hide_unavailable_tools` is set, and
/// the cache hint cap (ms) to apply. `None` while everything is fine: the caller sends the
/// catalogue's pre-serialized list as it is (the healthy path parses nothing).
///
/// `view`: the tools the caller may see under a tool policy (`None`: every tool); `page`: the
/// page of them asked for (an unavailable tool hidden leaves its page one tool shorter: the
/// cursors stay those of the whole list).
pub fn degraded_tools_list(
    gateway: &Gateway,
    view: Option<&crate::policy::ToolView>,
    page: &crate::registry::catalog::Page,
) -> Option<(Box<RawValue>, u64)> {
    let health = server_health(gateway);
    if health.is_empty() {
        return None;
    }
    let summary = summarize(gateway, &health, view);
    let mut tools = page.definitions();
    if gateway.settings().config.hide_unavailable_tools {
        tools.retain(|t| {
            t.get("name").and_then(Value::as_str).is_none_or(|n| !summary.unavailable.contains(n))
        });
    }
    let mut result = serde_json::Map::new();
    result.insert("tools".into(), Value::Array(tools));
    if let Some(cursor) = &page.next_cursor {
        result.insert("nextCursor".into(), json!(cursor));
    }
    result.insert("_meta".into(), json!({ META_KEY: summary.report }));
    let answer = serde_json::value::to_raw_value(&result).ok()?;
    Some((answer, DEGRADED_TTL_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(availability: Availability, reason: &'static str) -> ServerHealth {
        ServerHealth { availability, reason, since: None, retry_after_ms: None, detail: None }
    }

    #[test]
    fn the_worse_report_of_a_server_wins_whatever_the_order() {
        let mut map = BTreeMap::new();
        merge(&mut map, "s", health(Availability::Degraded, "tools_list_failing"));
        merge(&mut map, "s", health(Availability::Unavailable, "circuit_open"));
        merge(&mut map, "s", health(Availability::Degraded, "circuit_half_open"));
        assert_eq!(map["s"].reason, "circuit_open");
    }

    #[test]
    fn breaker_states_map_to_availability() {
        let since = Some(SystemTime::now());
        let open = BreakerHealth { state: State::Open { until: Instant::now() }, forced_open: false, since };
        let forced = BreakerHealth { forced_open: true, ..open };
        let half = BreakerHealth { state: State::HalfOpen { probes: 1 }, forced_open: false, since };
        let closed = BreakerHealth { state: State::Closed, forced_open: false, since: None };
        assert_eq!(
            from_breaker(open).map(|h| (h.availability, h.reason)),
            Some((Availability::Unavailable, "circuit_open"))
        );
        assert_eq!(from_breaker(forced).map(|h| h.reason), Some("circuit_forced_open"));
        assert_eq!(
            from_breaker(half).map(|h| (h.availability, h.reason)),
            Some((Availability::Degraded, "circuit_half_open"))
        );
        assert!(from_breaker(closed).is_none());
        assert_eq!(from_breaker(open).and_then(|h| h.since), since);
    }
}
