//! The console's record of recent calls (`GET /admin/calls`) and of each server's last error
//! (`GET /admin/overview`).
//!
//! Why a record of its own: the log and audit lines leave the process, and the metrics keep
//! counts, not decisions; an operator at the console wants the last few calls as the gateway
//! decided them. It is filled in one place, `Gateway::record`, which every call passes once.
//! It is bounded (`admin.recent_calls`, default 200; 0: off, nothing kept) and holds no
//! arguments, results, tokens or claims: the time, the caller's subject (shown only as a short
//! hash), the tool, the server, the outcome, the attempts, the latency and the trace id.
//! Recording costs one short critical section (a push into the ring) and no formatting: entries
//! are formatted when read.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::SystemTime,
};

use serde_json::{Value, json};

/// Most servers whose last error is remembered (registry-built servers come and go).
const MAX_SERVERS: usize = 1024;

/// One call as the record keeps it.
#[derive(Debug, Clone)]
pub struct RecentCall {
    pub at: SystemTime,
    /// The caller's subject; only its short hash is ever shown.
    pub subject: Option<Arc<str>>,
    pub tool: Option<Arc<str>>,
    /// The name asked for, when it is not the tool that ran.
    pub requested_tool: Option<Arc<str>>,
    pub server: Option<Arc<str>>,
    pub outcome: &'static str,
    pub attempts: u32,
    pub latency_us: u64,
    pub trace_id: Option<String>,
}

/// A server's last failed call.
#[derive(Debug, Clone, Copy)]
struct LastError {
    category: &'static str,
    at: SystemTime,
}

/// The bounded record (newest last inside, newest first when shown).
#[derive(Debug)]
pub struct RecentCalls {
    capacity: usize,
    calls: Mutex<VecDeque<RecentCall>>,
    last_errors: Mutex<BTreeMap<Arc<str>, LastError>>,
}

/// Whether `outcome` counts against its server's health: every outcome the
/// `McpToolErrorRatioHigh` alert counts (deploy/alert-rules.yaml), i.e. all but successes, tool
/// errors (the tool ran and answered), cache hits, shared results, fallbacks — and the
/// caller's own errors ([`is_caller_error`]), which never reached the server and say nothing
/// of it.
pub fn is_error(outcome: &str) -> bool {
    !matches!(
        outcome,
        "success" | "tool_error" | "cache_hit" | "shared" | "fallback_stale" | "fallback_alternative"
    ) && !is_caller_error(outcome)
}

/// Whether `outcome` is the caller's (or the gateway's decision about the caller), decided
/// before anything was sent: bad or oversized input, an unknown tool, a policy denial, a
/// quota, a guardrail, a missing token, a cancellation. Such a call neither reached nor should
/// have reached the server, so it is out of the server's error ratio (numerator and
/// denominator), in the console and in the alert alike.
pub fn is_caller_error(outcome: &str) -> bool {
    matches!(
        outcome,
        "bad_input"
            | "unknown_tool"
            | "forbidden"
            | "quota_refused"
            | "guardrail"
            | "unauthenticated"
            | "payload_too_large"
            | "invalid_request"
            | "cancelled"
            | "caller_disconnected"
    )
}

impl RecentCalls {
    /// A record of the last `capacity` calls (0: keeps nothing).
    pub fn new(capacity: usize) -> Self {
        Self { capacity, calls: Mutex::new(VecDeque::with_capacity(capacity)), last_errors: Mutex::default() }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether anything is kept (the caller may skip building the entry).
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Records one call; the oldest entry goes when the record is full.
    pub fn push(&self, call: RecentCall) {
        if is_error(call.outcome)
            && let Some(server) = &call.server
        {
            let mut errors = self.last_errors.lock().unwrap_or_else(|p| p.into_inner());
            if errors.len() < MAX_SERVERS || errors.contains_key(server) {
                errors.insert(server.clone(), LastError { category: call.outcome, at: call.at });
            }
        }
        if self.capacity == 0 {
            return;
        }
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if calls.len() >= self.capacity {
            calls.pop_front();
        }
        calls.push_back(call);
    }

    /// `server`'s last failed call, as the overview shows it (`null`: none since start).
    pub fn last_error(&self, server: &str) -> Value {
        let errors = self.last_errors.lock().unwrap_or_else(|p| p.into_inner());
        match errors.get(server) {
            Some(e) => json!({"category": e.category, "at": crate::registry::entry::rfc3339(e.at)}),
            None => Value::Null,
        }
    }

    /// `GET /admin/calls`, serialised: the capacity and the calls, newest first. The entries
    /// are copied out under the lock and written after it (a poll never holds up a call for
    /// long), straight to JSON text (no intermediate `Value` tree: the console asks every 2 s).
    pub fn report(&self) -> Vec<u8> {
        let calls: Vec<RecentCall> = {
            let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            calls.iter().rev().cloned().collect()
        };
        let mut hashes: BTreeMap<Arc<str>, Arc<str>> = BTreeMap::new();
        let shown: Vec<Shown<'_>> = calls
            .iter()
            .map(|c| Shown {
                at: crate::registry::entry::rfc3339(c.at),
                subject: c.subject.as_ref().map(|s| {
                    hashes.entry(s.clone()).or_insert_with(|| crate::redact::hash_subject(s).into()).clone()
                }),
                tool: c.tool.as_deref(),
                requested_tool: c.requested_tool.as_deref(),
                server: c.server.as_deref(),
                outcome: c.outcome,
                attempts: c.attempts,
                latency_us: c.latency_us,
                trace_id: c.trace_id.as_deref(),
            })
            .collect();
        let report = Report { capacity: self.capacity, calls: shown };
        // Strings, numbers and nulls only: serialising cannot fail.
        serde_json::to_vec(&report).unwrap_or_default()
    }
}

/// `GET /admin/calls`'s body.
#[derive(serde::Serialize)]
struct Report<'a> {
    capacity: usize,
    calls: Vec<Shown<'a>>,
}

/// One call as `GET /admin/calls` shows it.
#[derive(serde::Serialize)]
struct Shown<'a> {
    at: String,
    /// The subject's short hash ([`crate::redact::hash_subject`]), never the subject.
    subject: Option<Arc<str>>,
    tool: Option<&'a str>,
    requested_tool: Option<&'a str>,
    server: Option<&'a str>,
    outcome: &'a str,
    attempts: u32,
    latency_us: u64,
    trace_id: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, outcome: &'static str) -> RecentCall {
        RecentCall {
            at: SystemTime::now(),
            subject: Some("alice".into()),
            tool: Some(tool.into()),
            requested_tool: None,
            server: Some("s".into()),
            outcome,
            attempts: 1,
            latency_us: 5,
            trace_id: None,
        }
    }

    #[test]
    fn keeps_the_newest_calls_up_to_its_capacity_newest_first() {
        let record = RecentCalls::new(3);
        for i in 0..5 {
            record.push(call(&format!("t{i}"), "success"));
        }
        let report: Value = serde_json::from_slice(&record.report()).unwrap();
        let tools: Vec<&str> =
            report["calls"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
        assert_eq!(tools, ["t4", "t3", "t2"]);
        assert_eq!(report["capacity"], 3);
        // The subject is shown as its short hash only.
        assert_eq!(report["calls"][0]["subject"], crate::redact::hash_subject("alice"));
    }

    #[test]
    fn a_record_of_zero_keeps_nothing_but_still_knows_the_last_error() {
        let record = RecentCalls::new(0);
        record.push(call("t", "upstream_timeout"));
        record.push(call("t", "success"));
        let report: Value = serde_json::from_slice(&record.report()).unwrap();
        assert_eq!(report["calls"], json!([]));
        assert_eq!(record.last_error("s")["category"], "upstream_timeout");
        assert_eq!(record.last_error("other"), Value::Null);
    }

    #[test]
    fn errors_are_what_the_error_ratio_alert_counts() {
        assert!(is_error("circuit_open"));
        assert!(is_error("rate_limited"), "an upstream's 429");
        // The caller's own errors say nothing of the server.
        for caller in ["bad_input", "unknown_tool", "forbidden", "quota_refused", "guardrail"] {
            assert!(!is_error(caller) && is_caller_error(caller), "{caller}");
        }
        assert!(!is_error("tool_error"));
        assert!(!is_error("fallback_stale"));
    }
}
