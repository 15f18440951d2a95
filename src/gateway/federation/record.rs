//! The record of each federated request: one metric sample, one log line (a URI's query
//! values redacted, never contents) and, with the audit trail on, one audit line. Separate
//! so that every exit of every method (and of `resources/subscribe`) records the same way.

use std::{sync::Arc, time::Instant};

use serde_json::Value;

use super::{SurfaceCall, access::Denied};
use crate::{
    audit::{AuditEntry, Decision},
    error::{Category, GatewayError},
    gateway::{Gateway, outbound::Released},
    guardrail::Mark,
};

impl Gateway {
    /// Records a forwarded request's outcome and returns its answer (an error names the server).
    pub(in crate::gateway) fn answered(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: &Arc<str>,
        result: Result<Value, GatewayError>,
    ) -> Result<Value, GatewayError> {
        let outcome = result.as_ref().map_or_else(|e| e.category.as_str(), |_| "success");
        self.record_surface(call, started, method, item, Some(server), outcome, None);
        result.map_err(|e| e.with_server(server.clone()))
    }

    /// Records a forwarded item's outcome, with the hooks' decisions on it, and returns its
    /// answer as the outbound step released it (an error names the server).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gateway) fn answered_item(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: &Arc<str>,
        result: Result<Released<Value>, GatewayError>,
        guardrails: Vec<Mark>,
    ) -> Result<Released<Value>, GatewayError> {
        let outcome = result.as_ref().map_or_else(|e| e.category.as_str(), |_| "success");
        self.record_surface_marked(call, started, method, item, Some(server), outcome, None, guardrails);
        result.map_err(|e| e.with_server(server.clone()))
    }

    /// Records a request the policy refused, with its decision, and returns its error.
    pub(in crate::gateway) fn refused(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: &str,
        denied: Denied,
    ) -> GatewayError {
        let Denied { error, decision } = denied;
        self.record_surface(
            call,
            started,
            method,
            item,
            Some(server),
            error.category.as_str(),
            Some(decision),
        );
        error
    }

    /// One metric sample, one log line and (with the audit trail on) one audit line.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gateway) fn record_surface(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: Option<&str>,
        outcome: &str,
        denied: Option<Decision>,
    ) {
        self.record_surface_marked(call, started, method, item, server, outcome, denied, Vec::new());
    }

    /// [`Self::record_surface`] with the guardrail hooks' decisions for the audit line.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gateway) fn record_surface_marked(
        &self,
        call: &SurfaceCall,
        started: Instant,
        method: &'static str,
        item: &str,
        server: Option<&str>,
        outcome: &str,
        denied: Option<Decision>,
        guardrails: Vec<Mark>,
    ) {
        let elapsed = started.elapsed();
        let server_label = server.unwrap_or("");
        self.metrics.surface_requests.with_label_values(&[method, server_label, outcome]).inc();
        self.metrics
            .surface_request_duration
            .with_label_values(&[method, server_label])
            .observe(elapsed.as_secs_f64());
        let latency_us = elapsed.as_micros() as u64;
        tracing::info!(target: "mcp_gateway::call", request_id = &*call.request_id, method, item, server = server_label, outcome, latency_us, "{method}");
        if let Some(audit) = &self.audit {
            let entry = AuditEntry {
                at: std::time::SystemTime::now(),
                request_id: call.request_id.clone(),
                trace_id: crate::telemetry::otel::log_trace_id(),
                subject: call.caller.subject.clone(),
                method: Some(method),
                tool: Some(item.into()),
                requested_tool: None,
                server: server.map(Arc::from),
                endpoint: call.caller.endpoint.clone(),
                decision: denied.unwrap_or_else(Decision::no_policy),
                outcome: if outcome == "success" {
                    "success"
                } else {
                    Category::ALL.iter().find(|c| c.as_str() == outcome).map_or("error", |c| c.as_str())
                },
                args_sha256: None,
                latency_us,
                guardrails,
            };
            let audit = audit.clone();
            crate::telemetry::after_answer::defer(move || {
                audit.write(&entry);
            });
        }
    }
}
