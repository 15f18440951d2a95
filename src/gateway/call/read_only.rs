//! The read-only path of a call: a fresh cached result, or joining an identical call already
//! in flight (single-flight), or leading a new one whose result is kept. Separate from the
//! pipeline because it is the one place results are shared between callers, keyed by
//! [`result_key`].

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json};

use super::{context::Ending, forward::Forwarded};
use crate::{
    backchannel::Notifications,
    error::{Category, GatewayError},
    gateway::{Gateway, door::Admitted, forwarded_meta::forwarded_meta, settings::Settings},
    identity::Caller,
    protocol::mrtr,
    registry::{ToolRecord, record::canonical_hash},
    resilience::{cache::SharedResult, classify::Outcome},
    singleflight::{Join, Waited},
};

impl Gateway {
    /// Read-only tools: a fresh cached result, or the result of an identical call already in
    /// flight, or a new call whose result is kept for later.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call_read_only(
        &self,
        admitted: &Admitted,
        key: &str,
        meta: Option<&Value>,
        deadline: Option<Instant>,
        notifications: &Notifications,
        caller: &Arc<Caller>,
    ) -> (SharedResult, Ending) {
        let tool = admitted.tool();
        let settings = admitted.settings();
        let ttl = Duration::from_millis(
            settings.settings_of(tool).cache_ttl_ms.unwrap_or(settings.config.defaults.cache_ttl_ms),
        );
        if !ttl.is_zero()
            && let Some(hit) = self.results.fresh(key, ttl)
        {
            self.metrics
                .result_cache
                .with_label_values(&[self.metrics.tool_label(&tool.name, &tool.server), "hit"])
                .inc();
            return (Ok(hit), Ending::unsent("cache_hit"));
        }
        let mut role = self.in_flight.join(key);
        loop {
            match role {
                Join::Leader(leader) => {
                    self.metrics
                        .result_cache
                        .with_label_values(&[self.metrics.tool_label(&tool.name, &tool.server), "miss"])
                        .inc();
                    let call =
                        Forwarded { admitted, meta, round: mrtr::Round::default(), deadline, task: None };
                    let (result, ending) = self.forward(call, notifications.clone(), caller).await;
                    self.remember(settings, tool, key, ttl, &result, ending.outcome);
                    if ran_out_of_own_time(&result, deadline) {
                        // Our caller's deadline is not the waiters': one of them takes over.
                        drop(leader);
                    } else {
                        leader.finish(&result);
                    }
                    return (result, ending);
                }
                Join::Follower(follower) => {
                    let waiting = Waiting::new(&self.metrics.in_flight_waiters);
                    let waited = follower.wait(deadline).await;
                    drop(waiting);
                    match waited {
                        Waited::Done(shared) => {
                            self.metrics
                                .result_cache
                                .with_label_values(&[
                                    self.metrics.tool_label(&tool.name, &tool.server),
                                    "shared",
                                ])
                                .inc();
                            let outcome = if shared.is_ok() { "shared" } else { "shared_failure" };
                            return (shared, Ending::unsent(outcome));
                        }
                        // The leader went away (cancelled, or out of its own time): we lead.
                        Waited::Promoted(leader) => role = Join::Leader(leader),
                        Waited::TimedOut => {
                            let err = GatewayError::new(
                                Category::Timeout,
                                "the caller's deadline passed while waiting for an identical call in flight",
                            )
                            .with_attempts(0);
                            return (Err(err), Ending::unsent(Category::Timeout.as_str()));
                        }
                    }
                }
            }
        }
    }

    /// Keeps a good read-only result when it can be served again (cache or stale fallback).
    /// Results with `isError` are not kept (`outcome` is the call's, already classified).
    fn remember(
        &self,
        settings: &Settings,
        tool: &ToolRecord,
        key: &str,
        ttl: Duration,
        result: &SharedResult,
        outcome: &str,
    ) {
        let Ok(raw) = result else { return };
        if (ttl.is_zero() && !settings.settings_of(tool).stale_fallback)
            || outcome != Outcome::Success.label()
            || !mrtr::is_complete(raw)
        {
            return;
        }
        self.results.store(key, raw.clone());
    }
}

/// A leader's timeout that its own caller's deadline caused: not an answer for waiters.
fn ran_out_of_own_time(result: &SharedResult, deadline: Option<Instant>) -> bool {
    matches!(result, Err(e) if e.category == Category::Timeout)
        && deadline.is_some_and(|d| Instant::now() >= d)
}

/// Counts a caller waiting for an identical call in flight, until it stops (or is dropped).
struct Waiting<'a>(&'a prometheus::IntGauge);

impl<'a> Waiting<'a> {
    fn new(gauge: &'a prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The key under which a read-only call's result is cached and shared with identical calls in
/// flight: the tool, its canonical arguments, and — when there are any — the forwarded `_meta`
/// and the caller's identified subject. What reaches the server is exactly tool + arguments +
/// forwarded `_meta`, and per-user context may ride in `_meta` (a user key, a tenant), so two
/// calls that differ there are two upstream calls; with identity configured two subjects never
/// share a result either. Calls without either keep the plain key (and its sharing).
pub(super) fn result_key(tool: &str, args_hash: &str, meta: Option<&Value>, subject: Option<&str>) -> String {
    let mut key = String::with_capacity(tool.len() + 2 + 2 * args_hash.len());
    key.push_str(tool);
    key.push('\0');
    key.push_str(args_hash);
    let forwarded = if meta.is_some() { forwarded_meta(meta) } else { Map::new() };
    if subject.is_some() || !forwarded.is_empty() {
        key.push('\0');
        key.push_str(&canonical_hash(&json!([subject, forwarded])));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_keys_differ_by_forwarded_meta_and_subject_but_not_by_trace_context() {
        let plain = result_key("t", "h", None, None);
        assert_eq!(plain, "t\0h", "calls without _meta or identity keep the plain key");
        let trace = json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "tracestate": "k=v", "progressToken": 5, "io.mcp-gateway/timeoutMs": 100,
            "io.modelcontextprotocol/protocolVersion": "x"});
        assert_eq!(result_key("t", "h", Some(&trace), None), plain, "nothing forwarded, nothing keyed");
        let alice = result_key("t", "h", Some(&json!({"user_key": "alice"})), None);
        let bob = result_key("t", "h", Some(&json!({"user_key": "bob"})), None);
        assert!(alice != bob && alice != plain && bob != plain);
        assert_ne!(result_key("t", "h", None, Some("alice")), result_key("t", "h", None, Some("bob")));
        assert_ne!(result_key("t", "h", None, Some("alice")), plain);
        let forwarded =
            forwarded_meta(Some(&json!({"user_key": "u", "traceparent": "x", "progressToken": 1})));
        assert_eq!(Value::Object(forwarded), json!({"user_key": "u"}));
    }
}
