//! One `tools/call`: resolve → validate and default → forward through the server's stack →
//! classify → record → answer. Every exit records exactly one metric sample and one log line.

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value, json, value::RawValue};
use tower::ServiceExt;

use super::Gateway;
use crate::{
    error::{Category, GatewayError},
    protocol::mcp,
    registry::ToolRecord,
    resilience::classify::Outcome,
    telemetry::logging::argument_hash,
    upstream::{UpstreamReply, UpstreamRequest},
};

/// Who is asking, for the log line.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub request_id: Arc<str>,
    pub jsonrpc_id: Value,
}

/// Tool-label for calls whose tool could not be resolved (bounded cardinality).
const UNRESOLVED: &str = "<unresolved>";

impl Gateway {
    /// Runs a `tools/call`; the `Ok` value is the upstream's result, passed through untouched.
    pub async fn call_tool(
        &self,
        params: Option<Value>,
        ctx: &CallContext,
    ) -> Result<Box<RawValue>, GatewayError> {
        let started = Instant::now();
        let params = match params {
            Some(Value::Object(map)) => map,
            _ => {
                return Err(self.refuse(
                    ctx,
                    started,
                    None,
                    bad_input("params must be an object with a tool name"),
                ));
            }
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(self.refuse(ctx, started, None, bad_input("params.name must be a string")));
        };
        let Some(tool) = self.registry.resolve(name).await else {
            self.refresh_now.notify_one();
            let err = GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", truncated(name)),
            )
            .with_tool(name);
            return Err(self.refuse(ctx, started, None, err));
        };
        let mut arguments = match crate::validation::arguments_object(&params) {
            Ok(args) => args,
            Err(reason) => return Err(self.refuse(ctx, started, Some(&tool), bad_input(reason))),
        };
        if let Err(violations) = tool.schema.check(&mut arguments) {
            let err = GatewayError::new(
                Category::BadInput,
                format!(
                    "arguments do not match the inputSchema of {} ({} violation(s))",
                    tool.name,
                    violations.len()
                ),
            )
            .with_extra("violations", Value::Array(violations));
            return Err(self.refuse(ctx, started, Some(&tool), err));
        }
        let Some(upstream) = self.upstreams.get(tool.server.as_ref()) else {
            let err = GatewayError::new(Category::Internal, "tool resolved to an unconfigured server");
            return Err(self.refuse(ctx, started, Some(&tool), err));
        };
        let args_hash = argument_hash(&arguments);
        let request = upstream_request(&tool, arguments, params.get("_meta"));

        self.metrics.in_flight.inc();
        let result = upstream.service.clone().oneshot(request).await;
        self.metrics.in_flight.dec();

        let outcome = Outcome::of(&result, true);
        let attempts = 1;
        let answer = match result {
            Ok(UpstreamReply::Result(raw)) => Ok(raw),
            Ok(UpstreamReply::Error(upstream_error)) => {
                let category = if outcome.is_hard_failure() {
                    Category::UpstreamError
                } else {
                    Category::UpstreamRejected
                };
                let mut err = GatewayError::new(category, upstream_error.message);
                err.upstream_code = Some(upstream_error.code);
                if let Some(data) = upstream_error.data {
                    err = err.with_extra("upstream_data", data);
                }
                Err(err)
            }
            Err(transport_error) => {
                let retry_after = match outcome {
                    Outcome::RateLimited { retry_after } => retry_after,
                    _ => None,
                };
                Err(GatewayError::new(Outcome::category_of(&transport_error), transport_error.to_string())
                    .with_retry_after(retry_after))
            }
        };
        let answer = answer.map_err(|e| {
            e.with_tool(tool.name.as_ref()).with_server(tool.server.as_ref()).with_attempts(attempts)
        });
        let label = match &answer {
            Ok(_) => outcome.label(),
            Err(e) => e.category.as_str(),
        };
        self.record(ctx, started, Some(&tool), label, attempts, Some(&args_hash));
        answer
    }

    /// Records a call that was answered by the gateway itself, and returns its error.
    fn refuse(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        err: GatewayError,
    ) -> GatewayError {
        let err = match tool {
            Some(t) => err.with_tool(t.name.as_ref()).with_server(t.server.as_ref()),
            None => err,
        };
        self.record(ctx, started, tool, err.category.as_str(), 0, None);
        err
    }

    fn record(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        outcome: &str,
        attempts: u32,
        args_hash: Option<&str>,
    ) {
        let elapsed = started.elapsed();
        let (tool_name, server, transport) = match tool {
            Some(t) => (t.name.as_ref(), t.server.as_ref(), t.transport.as_str()),
            None => (UNRESOLVED, "", ""),
        };
        self.metrics.tool_calls.with_label_values(&[tool_name, server, outcome]).inc();
        if tool.is_some() {
            self.metrics
                .tool_call_duration
                .with_label_values(&[tool_name, server])
                .observe(elapsed.as_secs_f64());
        }
        tracing::info!(
            target: "mcp_gateway::call",
            request_id = %ctx.request_id,
            jsonrpc_id = %ctx.jsonrpc_id,
            tool = tool_name,
            server,
            transport,
            outcome,
            latency_us = elapsed.as_micros() as u64,
            attempts,
            args_hash = args_hash.unwrap_or(""),
            "tools/call"
        );
    }
}

fn bad_input(detail: &str) -> GatewayError {
    GatewayError::new(Category::BadInput, detail)
}

/// Caller-supplied names are echoed in errors, but never unboundedly.
fn truncated(name: &str) -> &str {
    match name.char_indices().nth(64) {
        Some((i, _)) => &name[..i],
        None => name,
    }
}

/// The upstream `tools/call`: the upstream's own tool name, the checked arguments, and the
/// caller's non-reserved `_meta` (progress tokens, trace ids) passed along.
fn upstream_request(tool: &ToolRecord, arguments: Value, meta: Option<&Value>) -> UpstreamRequest {
    let mut params = Map::new();
    params.insert("name".into(), json!(tool.upstream_name.as_ref()));
    params.insert("arguments".into(), arguments);
    if let Some(forwarded) = meta.and_then(mcp::forwardable_meta) {
        params.insert("_meta".into(), Value::Object(forwarded));
    }
    UpstreamRequest { method: "tools/call", params, tool: Some(tool.upstream_name.clone()) }
}
