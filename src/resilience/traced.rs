//! The layer of the call stack that gives every upstream attempt its own span (a child of the
//! inbound message's span) and hands the attempt's W3C trace context to the transport
//! (`request.outbound`), which sends it as headers / Lambda client context and writes it into
//! the request's `_meta` as it encodes it. Its place in the stack ([`super::stack`]) gives a
//! span only to attempts that are really made.
//!
//! Off (see [`otel`]), no span is made; the caller's trace context is still handed on so
//! it passes through. Outside an inbound message (the registry's background `tools/list`) it
//! does nothing.

use std::sync::Arc;

use opentelemetry::{KeyValue, StringValue};

use super::{
    breaker::Breaker,
    step::{StackService, Step},
};
use crate::{
    telemetry::otel::{self, AttemptSpan},
    upstream::{UpstreamFuture, UpstreamReply, UpstreamRequest},
};

/// Wraps each attempt in a span.
#[derive(Clone)]
pub struct TracedLayer {
    server: Arc<str>,
    transport: &'static str,
    breaker: Arc<Breaker>,
}

impl TracedLayer {
    pub fn new(server: &str, transport: &'static str, breaker: Arc<Breaker>) -> Self {
        Self { server: server.into(), transport, breaker }
    }

    /// The attempt's span, when tracing is on and a message's span is current.
    fn span(&self, request: &UpstreamRequest) -> Option<AttemptSpan> {
        if !otel::enabled() {
            return None;
        }
        // The attempt timeout, inside, counts this attempt.
        let attempt = request.attempts() + 1;
        let method = request.method;
        let name = match &request.tool {
            Some(tool) => format!("{method} {tool}"),
            None => method.to_string(),
        };
        let mut attributes = Vec::with_capacity(7);
        attributes.push(KeyValue::new("mcp.method.name", method));
        attributes.push(KeyValue::new("rpc.system.name", "jsonrpc"));
        if let Some(tool) = &request.tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", StringValue::from(tool.clone())));
        }
        // Shared, not copied: the names live as long as the server's stack.
        attributes.push(KeyValue::new("mcp_gateway.server", StringValue::from(self.server.clone())));
        attributes.push(KeyValue::new("mcp_gateway.transport", self.transport));
        attributes.push(KeyValue::new("mcp_gateway.attempt", i64::from(attempt)));
        attributes.push(KeyValue::new("mcp_gateway.breaker.state", self.breaker.state().name()));
        AttemptSpan::start(name, attributes)
    }
}

impl Step for TracedLayer {
    fn call<S: StackService>(&self, inner: &mut S, mut request: UpstreamRequest) -> UpstreamFuture {
        let Some(span) = self.span(&request) else {
            request.outbound = otel::outbound();
            return Box::pin(inner.call(request));
        };
        let future = span.in_scope(|| {
            request.outbound = otel::outbound();
            inner.call(request)
        });
        Box::pin(async move {
            let result = span.run(future).await;
            let status = match &result {
                Ok(_) => "200",
                Err(e) => e.status_label(),
            };
            let upstream_status = KeyValue::new("mcp_gateway.upstream.status", status);
            match &result {
                Ok(UpstreamReply::Error(error)) => span.record(
                    [
                        upstream_status,
                        KeyValue::new("rpc.response.status_code", error.code.to_string()),
                        KeyValue::new("error.type", error.code.to_string()),
                    ],
                    Some("JSON-RPC error".into()),
                ),
                Err(_) => span
                    .record([upstream_status, KeyValue::new("error.type", status)], Some(status.to_string())),
                Ok(UpstreamReply::Result(_)) => span.record([upstream_status], None),
            }
            result
        })
    }
}
