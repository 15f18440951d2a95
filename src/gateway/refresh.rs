//! Learning the tools: each server's `tools/list` (all pages) at start and on a jittered
//! interval, merged with the tools configuration declares, then swapped into the catalogue.
//!
//! A server whose refresh fails keeps its last known good tools (or its static ones), is
//! reported by `/readyz`, and is retried with a short backoff instead of waiting a whole
//! interval. A call for an unknown tool wakes the loop early (at most every few seconds).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::future::join_all;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use super::{Gateway, Upstream};
use crate::{
    protocol::mcp::Era,
    registry::catalog::ServerTools,
    upstream::{UpstreamError, UpstreamReply, UpstreamRequest},
};

/// Upper bound on `tools/list` pages, against a server that paginates forever.
const MAX_PAGES: usize = 100;
/// Fastest retry of a failing server.
const MIN_RETRY: Duration = Duration::from_secs(2);
/// Least time between refreshes woken by unknown-tool calls.
const MIN_WAKE_INTERVAL: Duration = Duration::from_secs(5);

/// Reads every page of a server's `tools/list`.
pub async fn list_tools(upstream: &Upstream) -> Result<Vec<Value>, UpstreamError> {
    #[derive(Deserialize)]
    struct Page {
        #[serde(default)]
        tools: Vec<Value>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = Map::new();
        if let Some(c) = cursor.take() {
            params.insert("cursor".into(), json!(c));
        }
        let reply = upstream.service.clone().oneshot(UpstreamRequest::new("tools/list", params)).await?;
        let page: Page = match reply {
            UpstreamReply::Result(raw) => serde_json::from_str(raw.get())
                .map_err(|e| UpstreamError::Protocol(format!("tools/list result: {e}")))?,
            UpstreamReply::Error(e) => {
                return Err(UpstreamError::Protocol(format!("tools/list failed: {} {}", e.code, e.message)));
            }
        };
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(UpstreamError::Protocol(format!("tools/list has more than {MAX_PAGES} pages")))
}

/// Keeps the last known good tool list of every server between refreshes.
pub struct Refresher {
    gateway: Arc<Gateway>,
    known: BTreeMap<String, Vec<Value>>,
    failures: HashMap<String, u32>,
}

impl Refresher {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        let known =
            gateway.upstreams.iter().map(|(name, u)| (name.clone(), u.config.tools.clone())).collect();
        Self { gateway, known, failures: HashMap::new() }
    }

    /// Refreshes every discovering server concurrently and rebuilds the catalogue.
    pub async fn refresh_all(&mut self) {
        let started = Instant::now();
        let gateway = self.gateway.clone();
        let discovering: Vec<&Upstream> = gateway.upstreams.values().filter(|u| u.config.discover).collect();
        let results = join_all(discovering.iter().map(|u| async move { (*u, list_tools(u).await) })).await;
        for (upstream, result) in results {
            let name = upstream.name.to_string();
            match result {
                Ok(mut tools) => {
                    // Static descriptions win over discovered ones of the same name.
                    let statics = &upstream.config.tools;
                    tools.retain(|t| !statics.iter().any(|s| s.get("name") == t.get("name")));
                    tools.extend(statics.iter().cloned());
                    self.known.insert(name.clone(), tools);
                    self.failures.remove(&name);
                    gateway.readiness.set_server(&name, None);
                    gateway.metrics.registry_refreshes.with_label_values(&[&name, "success"]).inc();
                }
                Err(e) => {
                    *self.failures.entry(name.clone()).or_default() += 1;
                    tracing::warn!(server = %name, error = %e, "tools/list failed; keeping the last known tools");
                    gateway.readiness.set_server(&name, Some(e.to_string()));
                    gateway.metrics.registry_refreshes.with_label_values(&[&name, "failure"]).inc();
                }
            }
            if let Some(http) = &upstream.http {
                for (era, label) in [(Era::Modern, "2026-07-28"), (Era::Legacy, "session")] {
                    let value = i64::from(http.era() == Some(era));
                    gateway.metrics.upstream_era.with_label_values(&[&name, label]).set(value);
                }
            }
        }
        self.rebuild(started);
    }

    fn rebuild(&self, started: Instant) {
        let gateway = &self.gateway;
        let before = gateway.catalog().snapshot();
        let servers: Vec<ServerTools> = self
            .known
            .iter()
            .filter_map(|(name, tools)| {
                let upstream = gateway.upstreams.get(name)?;
                Some(ServerTools {
                    server: name.clone(),
                    transport: upstream.transport,
                    tools: tools.clone(),
                })
            })
            .collect();
        let after = gateway.catalog().rebuild(&servers);
        let old: HashMap<_, _> = before.tools().into_iter().map(|t| (t.name.clone(), t)).collect();
        let (mut added, mut changed) = (0, 0);
        for tool in after.tools() {
            match old.get(&tool.name) {
                None => added += 1,
                Some(previous) if previous.definition_hash != tool.definition_hash => {
                    changed += 1;
                    tracing::warn!(
                        tool = %tool.name,
                        server = %tool.server,
                        before = %previous.definition_hash,
                        after = %tool.definition_hash,
                        schema_before = %previous.schema_hash,
                        schema_after = %tool.schema_hash,
                        "tool definition changed"
                    );
                }
                Some(_) => {}
            }
        }
        let removed = old.keys().filter(|name| gateway.catalog().get(name).is_none()).count();
        gateway.metrics.registry_tools.set(after.len() as i64);
        tracing::info!(
            tools = after.len(),
            servers = servers.len(),
            added,
            removed,
            changed,
            failing = self.failures.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "registry refreshed"
        );
    }

    /// How long to wait before the next refresh: a jittered interval, or a short backoff
    /// while a server is failing.
    fn next_wait(&self) -> Duration {
        let interval = self.gateway.refresh_interval();
        let jittered = interval.mul_f64(0.9 + 0.2 * fastrand::f64());
        match self.failures.values().max() {
            Some(&failures) => {
                let backoff = MIN_RETRY.saturating_mul(1 << failures.saturating_sub(1).min(8));
                backoff.min(jittered)
            }
            None => jittered,
        }
    }

    /// Runs forever: the first refresh marks the gateway ready.
    pub async fn run(mut self) {
        self.refresh_all().await;
        self.gateway.readiness.mark_loaded();
        let mut last = Instant::now();
        loop {
            let wait = self.next_wait();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.gateway.refresh_now.notified() => {
                    let since = last.elapsed();
                    if since < MIN_WAKE_INTERVAL {
                        tokio::time::sleep(MIN_WAKE_INTERVAL - since).await;
                    }
                }
            }
            self.refresh_all().await;
            last = Instant::now();
        }
    }
}
