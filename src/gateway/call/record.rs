//! How every exit of a call is recorded: one metric sample, one log line (written after the
//! answer has left) and, with the audit trail on, one audit line, plus the console's recent
//! call. Separate so that each path through the pipeline records the same way, including a
//! call whose caller went away ([`Unanswered`]).

use std::{
    sync::{Arc, atomic::Ordering},
    time::Instant,
};

use serde_json::Value;

use super::context::CallContext;
use crate::{
    audit::{AuditEntry, Decision},
    error::GatewayError,
    gateway::Gateway,
    registry::ToolRecord,
    telemetry::recent_calls::RecentCall,
};

/// Tool-label for calls whose tool could not be resolved (bounded cardinality).
const UNRESOLVED: &str = "<unresolved>";

/// The log line and metric of a call whose caller went away before the answer: dropping the
/// call's future (the HTTP connection closed) drops this armed, and it records the call.
pub(super) struct Unanswered<'a> {
    pub(super) gateway: &'a Gateway,
    pub(super) ctx: &'a CallContext,
    pub(super) started: Instant,
    pub(super) tool: Arc<ToolRecord>,
    pub(super) args_hash: String,
    pub(super) decision: Decision,
    pub(super) armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.armed {
            let hash = Some(std::mem::take(&mut self.args_hash)).filter(|hash| !hash.is_empty());
            let tool = Some(&self.tool);
            let outcome = if self.ctx.cancelled.load(Ordering::Relaxed) { CANCELLED } else { DISCONNECTED };
            let decided = Decided {
                decision: self.decision.clone(),
                requested: None,
                ran: None,
                guardrails: Vec::new(),
            };
            self.gateway.record(self.ctx, self.started, tool, outcome, 0, hash, decided);
        }
    }
}

/// What the audit line of a call says besides its outcome: the gateway's decision, the name
/// asked for when it is not the recorded tool's (no tool resolved, or an export alias), and
/// the tool that really ran when it is not the one asked for (a fallback's alternative).
pub(super) struct Decided {
    pub(super) decision: Decision,
    pub(super) requested: Option<Arc<str>>,
    pub(super) ran: Option<Arc<ToolRecord>>,
    /// The guardrail hooks' decisions, before and after the call.
    pub(super) guardrails: Vec<crate::guardrail::Mark>,
}

/// The outcome label of a call whose caller disconnected before the answer.
pub const DISCONNECTED: &str = "caller_disconnected";
/// The outcome label of a call its caller cancelled with `notifications/cancelled`.
pub const CANCELLED: &str = "cancelled";

impl Gateway {
    /// Records a call that was answered by the gateway itself, and returns its error.
    pub(super) fn refuse(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        err: GatewayError,
    ) -> GatewayError {
        self.refuse_decided(ctx, started, tool, err, Decision::no_policy())
    }

    /// [`Self::refuse`] after the tool policy decided (`decision` goes into the audit line).
    pub(super) fn refuse_decided(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        err: GatewayError,
        decision: Decision,
    ) -> GatewayError {
        let err = match tool {
            Some(t) => err.with_tool(t.name.clone()).with_server(t.server.clone()),
            None => err,
        };
        let decided = Decided { decision, requested: err.tool.clone(), ran: None, guardrails: Vec::new() };
        self.record(ctx, started, tool, err.category.as_str(), 0, None, decided);
        err
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        outcome: &'static str,
        attempts: u32,
        args_hash: Option<String>,
        decided: Decided,
    ) {
        let elapsed = started.elapsed();
        let latency_us = elapsed.as_micros() as u64;
        let call_lines = tracing::enabled!(target: "mcp_gateway::call", tracing::Level::INFO);
        let trace_id = if call_lines || self.audit.is_some() || self.recent_calls.enabled() {
            crate::telemetry::otel::log_trace_id()
        } else {
            None
        };
        // The log and audit lines name the tool that really ran (a fallback's alternative), and
        // the name asked for when it differs; the metrics stay on the tool asked for.
        let ran = decided.ran.as_ref().or(tool);
        let asked = decided.requested.or_else(|| tool.map(|t| t.name.clone()));
        let (named, requested) = match ran {
            Some(ran) => (Some(ran.name.clone()), asked.filter(|name| *name != ran.name)),
            None => (asked, None),
        };
        // The console's record: never arguments or results (`telemetry::recent_calls`).
        self.recent_calls.push(RecentCall {
            at: std::time::SystemTime::now(),
            subject: ctx.caller.subject.clone(),
            tool: named.clone(),
            requested_tool: requested.clone(),
            server: ran.map(|t| t.server.clone()),
            outcome,
            attempts,
            latency_us,
            trace_id: trace_id.clone(),
        });
        if let Some(audit) = &self.audit {
            let entry = AuditEntry {
                at: std::time::SystemTime::now(),
                request_id: ctx.request_id.clone(),
                trace_id: trace_id.clone(),
                subject: ctx.caller.subject.clone(),
                method: None,
                tool: named,
                requested_tool: requested.clone(),
                server: ran.map(|t| t.server.clone()),
                endpoint: ctx.caller.endpoint.clone(),
                decision: decided.decision,
                outcome,
                args_sha256: args_hash.clone(),
                latency_us,
                guardrails: decided.guardrails,
            };
            let audit = audit.clone();
            crate::telemetry::after_answer::defer(move || {
                audit.write(&entry);
            });
        }
        let (tool_name, server, transport) = labels(tool);
        let tool_name = if tool.is_some() { self.metrics.tool_label(tool_name, server) } else { tool_name };
        self.metrics.tool_calls.with_label_values(&[tool_name, server, outcome]).inc();
        if tool.is_some() {
            self.metrics
                .tool_call_duration
                .with_label_values(&[tool_name, server])
                .observe(elapsed.as_secs_f64());
        }
        crate::telemetry::otel::record_call(outcome, attempts, tool_name, server, transport);
        // The log line is formatted after the answer has left (telemetry::after_answer).
        if !call_lines {
            return;
        }
        let line = CallLine {
            request_id: ctx.request_id.clone(),
            trace_id,
            jsonrpc_id: ctx.jsonrpc_id.clone(),
            tool: ran.cloned(),
            requested,
            outcome,
            latency_us,
            attempts,
            args_hash,
        };
        crate::telemetry::after_answer::defer(move || line.log());
    }
}

/// A call's tool, server and transport as its metrics and log line name them.
fn labels(tool: Option<&Arc<ToolRecord>>) -> (&str, &str, &'static str) {
    match tool {
        Some(t) => (t.name.as_ref(), t.server.as_ref(), t.transport.as_str()),
        None => (UNRESOLVED, "", ""),
    }
}

/// The fields of a call's log line, taken when the call ends and written after its answer.
struct CallLine {
    request_id: Arc<str>,
    trace_id: Option<String>,
    jsonrpc_id: Value,
    /// The tool that really ran.
    tool: Option<Arc<ToolRecord>>,
    /// The name asked for, when it is not the tool that ran's (an export alias, a fallback).
    requested: Option<Arc<str>>,
    outcome: &'static str,
    latency_us: u64,
    attempts: u32,
    args_hash: Option<String>,
}

impl CallLine {
    fn log(&self) {
        let (tool, server, transport) = labels(self.tool.as_ref());
        tracing::info!(
            target: "mcp_gateway::call",
            request_id = &*self.request_id,
            trace_id = self.trace_id.as_deref(),
            jsonrpc_id = %self.jsonrpc_id,
            tool,
            requested_tool = self.requested.as_deref(),
            server,
            transport,
            outcome = self.outcome,
            latency_us = self.latency_us,
            attempts = self.attempts,
            args_hash = self.args_hash.as_deref().unwrap_or(""),
            "tools/call"
        );
    }
}
