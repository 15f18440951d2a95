//! A tower layer that gives every upstream attempt its own span (a child of the inbound
//! message's span) and stamps the attempt's W3C trace context into the request's `_meta`,
//! where the transports take it for their headers / Lambda client context. It sits just
//! outside the attempt timeout, inside the breaker and the concurrency limit: only attempts
//! that are really made get a span (a call refused by an open breaker has none; its message
//! span says `circuit_open` with 0 attempts).
//!
//! Off (see [`super::otel`]), no span is made; the caller's trace context is still stamped so
//! it passes through. Outside an inbound message (the registry's background `tools/list`) it
//! does nothing.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use opentelemetry::trace::Status;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::otel;
use crate::{
    resilience::breaker::Breaker,
    upstream::{UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest},
};

/// Builds [`Traced`].
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

impl<S> Layer<S> for TracedLayer {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Traced { inner, layer: self.clone() }
    }
}

/// Wraps each attempt of the inner service in a span.
#[derive(Clone)]
pub struct Traced<S> {
    inner: S,
    layer: TracedLayer,
}

impl<S> Service<UpstreamRequest> for Traced<S>
where
    S: Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>,
    S::Future: Send + 'static,
{
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: UpstreamRequest) -> Self::Future {
        if !otel::enabled() || tracing::Span::current().is_none() {
            otel::stamp_meta(&mut request.params);
            request.outbound = otel::outbound(&request.params);
            return Box::pin(self.inner.call(request));
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
            mcp_gateway.server = &*self.layer.server,
            mcp_gateway.transport = self.layer.transport,
            mcp_gateway.attempt = i64::from(attempt),
            mcp_gateway.breaker.state = self.layer.breaker.state().name(),
        );
        let future = span.in_scope(|| {
            otel::stamp_meta(&mut request.params);
            request.outbound = otel::outbound(&request.params);
            self.inner.call(request)
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
