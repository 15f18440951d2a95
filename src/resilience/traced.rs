//! The layer of the call stack that gives every upstream attempt its own span (a child of the
//! inbound message's span) and stamps the attempt's W3C trace context into the request's
//! `_meta`, where the transports take it for their headers / Lambda client context. Its place
//! in the stack ([`super::stack`]) gives a span only to attempts that are really made.
//!
//! Off (see [`otel`]), no span is made; the caller's trace context is still stamped so
//! it passes through. Outside an inbound message (the registry's background `tools/list`) it
//! does nothing.

use std::sync::Arc;

use opentelemetry::trace::Status;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{
    breaker::Breaker,
    step::{StackService, Step},
};
use crate::{
    telemetry::otel,
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
}

impl Step for TracedLayer {
    fn call<S: StackService>(&self, inner: &mut S, mut request: UpstreamRequest) -> UpstreamFuture {
        if !otel::enabled() || tracing::Span::current().is_none() {
            otel::stamp_meta(&mut request.params);
            request.outbound = otel::outbound(&request.params);
            return Box::pin(inner.call(request));
        }
        // The attempt timeout, inside, counts this attempt.
        let attempt = request.attempts() + 1;
        let method = request.method;
        let name = match &request.tool {
            Some(tool) => format!("{method} {tool}"),
            None => method.to_string(),
        };
        let span = tracing::info_span!(
            target: otel::SPAN_TARGET,
            "mcp.client",
            otel.name = name,
            otel.kind = "client",
            mcp.method.name = method,
            rpc.system.name = "jsonrpc",
            gen_ai.tool.name = request.tool.as_deref(),
            mcp_gateway.server = &*self.server,
            mcp_gateway.transport = self.transport,
            mcp_gateway.attempt = i64::from(attempt),
            mcp_gateway.breaker.state = self.breaker.state().name(),
        );
        let future = span.in_scope(|| {
            otel::stamp_meta(&mut request.params);
            request.outbound = otel::outbound(&request.params);
            inner.call(request)
        });
        let recorded = span.clone();
        Box::pin(
            async move {
                let result = future.await;
                let status = match &result {
                    Ok(_) => "200",
                    Err(e) => e.status_label(),
                };
                recorded.set_attribute("mcp_gateway.upstream.status", status);
                match &result {
                    Ok(UpstreamReply::Error(error)) => {
                        recorded.set_attribute("rpc.response.status_code", error.code.to_string());
                        recorded.set_attribute("error.type", error.code.to_string());
                        recorded.set_status(Status::error("JSON-RPC error"));
                    }
                    Err(_) => {
                        recorded.set_attribute("error.type", status);
                        recorded.set_status(Status::error(status));
                    }
                    Ok(UpstreamReply::Result(_)) => {}
                }
                result
            }
            .instrument(span),
        )
    }
}
