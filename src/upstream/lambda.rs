//! AWS Lambda direct invoke: the stateless MCP servers of the store.
//!
//! One `Invoke` (RequestResponse) per request with the JSON-RPC request as payload. The
//! function answers with a JSON-RPC response or an API Gateway proxy shape whose `body` is
//! one. Function errors arrive as HTTP 200 with `X-Amz-Function-Error`, not as SDK errors.
//! The SDK's own retries are off: the gateway's retry layer owns retrying.
//!
//! "Never sent" is claimed only when proven: the SDK reports every failure to get an answer as
//! a dispatch failure, which "may have been sent" (a reset after the request went out is one).
//! Only a dispatch failure whose cause is a failed connection (hyper-util's connect error in
//! the source chain: refused, DNS, TLS, connect timeout) is [`UpstreamError::Connect`]; any
//! other is [`UpstreamError::Io`] (or a timeout), which a non-idempotent tool never retries.
//!
//! With `lambda_event = "agentcore"` the same Invoke carries AgentCore Gateway's Lambda target
//! contract instead ([`super::agentcore`]): the bare arguments as the event, the tool named in
//! the client context, the function's return mapped to a tool result. Function errors, bounds
//! and "never sent" are the same in both modes.
//!
//! Answer size: the service itself caps a synchronous answer at 6 MB, and the SDK reads the
//! whole payload before handing it over, so `max_response_bytes` cannot bound the read; it is
//! checked on the payload received (it matters for endpoint overrides that are not Lambda).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use aws_sdk_lambda::{
    error::SdkError, operation::invoke::InvokeError, primitives::Blob, types::InvocationType,
};
use base64::Engine;
use serde::Deserialize;
use tower::Service;

use super::{
    FunctionErrorKind, UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest,
    agentcore::{self, Prepared},
    decode_reply, parse_retry_after,
};
use crate::{config::AwsConfig, protocol::mcp};

/// Lambda's synchronous invoke payload limit.
pub const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

/// Builds the one Lambda client all Lambda upstreams share: standard credential and region
/// chain, optional endpoint override, SDK retries off.
pub async fn client(aws: &AwsConfig, connect_timeout: Duration) -> aws_sdk_lambda::Client {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder().connect_timeout(connect_timeout).build(),
        );
    if let Some(region) = &aws.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(endpoint) = &aws.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    aws_sdk_lambda::Client::new(&loader.load().await)
}

/// A Lambda-hosted MCP server.
#[derive(Clone)]
pub struct LambdaTransport {
    inner: Arc<Inner>,
}

struct Inner {
    client: aws_sdk_lambda::Client,
    function: String,
    qualifier: Option<String>,
    max_response_bytes: usize,
    next_id: AtomicU64,
    /// `Some(target)`: an AgentCore-style target (`lambda_event = "agentcore"`).
    agentcore_target: Option<String>,
}

impl LambdaTransport {
    /// `agentcore_target`: `Some(target)` invokes the function as an AgentCore Gateway Lambda
    /// target of that name (`lambda_event = "agentcore"`); `None` sends JSON-RPC requests.
    pub fn new(
        client: aws_sdk_lambda::Client,
        function: String,
        qualifier: Option<String>,
        max_response_bytes: usize,
        agentcore_target: Option<String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                function,
                qualifier,
                max_response_bytes,
                next_id: AtomicU64::new(1),
                agentcore_target,
            }),
        }
    }
}

impl Service<UpstreamRequest> for LambdaTransport {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.invoke(request).await })
    }
}

impl Inner {
    async fn invoke(&self, request: UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        let outbound = &request.outbound;
        let (payload, client_context) = match &self.agentcore_target {
            Some(target) => match agentcore::prepare(target, &request, MAX_PAYLOAD_BYTES)? {
                Prepared::Invoke(invocation) => (invocation.payload, Some(invocation.client_context)),
                Prepared::Answered(reply) => return Ok(reply),
            },
            None => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                // Lambda servers are stateless: every request carries the modern-era `_meta`.
                let payload = mcp::encode_patched_request(
                    id,
                    request.method,
                    &request.params,
                    mcp::Era::Modern,
                    &request.trace_patch(),
                );
                if payload.len() > MAX_PAYLOAD_BYTES {
                    return Err(UpstreamError::PayloadTooLarge {
                        size: payload.len(),
                        limit: MAX_PAYLOAD_BYTES,
                    });
                }
                // Trace context and request id in the client context.
                (payload, outbound.lambda_client_context())
            }
        };
        // `X-Amzn-Trace-Id` passed on.
        let invoke = self
            .client
            .invoke()
            .function_name(&self.function)
            .set_qualifier(self.qualifier.clone())
            .invocation_type(InvocationType::RequestResponse)
            .set_client_context(client_context)
            .payload(Blob::new(payload));
        let sent = match outbound.amzn_trace_id.clone() {
            Some(trace) => {
                invoke
                    .customize()
                    .mutate_request(move |http| {
                        http.headers_mut().insert("x-amzn-trace-id", trace.clone());
                    })
                    .send()
                    .await
            }
            None => invoke.send().await,
        };
        let output = sent.map_err(sdk_error)?;
        let body = output.payload().map(Blob::as_ref).unwrap_or_default();
        if body.len() > self.max_response_bytes {
            return Err(UpstreamError::ResponseTooLarge { limit: self.max_response_bytes });
        }
        if let Some(kind) = output.function_error() {
            return Err(function_error(kind, body));
        }
        match self.agentcore_target {
            Some(_) => agentcore::decode_return(body),
            None => decode_payload(body),
        }
    }
}

fn function_error(kind: &str, body: &[u8]) -> UpstreamError {
    #[derive(Deserialize, Default)]
    struct LambdaError {
        #[serde(rename = "errorType", default)]
        error_type: String,
    }
    // Only the error type is kept: an error message may echo arguments or secrets.
    let parsed: LambdaError = serde_json::from_slice(body).unwrap_or_default();
    UpstreamError::FunctionError {
        kind: if kind == "Handled" { FunctionErrorKind::Handled } else { FunctionErrorKind::Unhandled },
        message: if parsed.error_type.is_empty() { "function failed".into() } else { parsed.error_type },
    }
}

/// Decodes a function's answer: a JSON-RPC response, or an API Gateway proxy shape around one.
pub fn decode_payload(body: &[u8]) -> Result<UpstreamReply, UpstreamError> {
    #[derive(Deserialize)]
    struct Proxy {
        #[serde(rename = "statusCode")]
        status_code: u16,
        #[serde(default)]
        body: Option<String>,
        #[serde(rename = "isBase64Encoded", default)]
        base64: bool,
        #[serde(default)]
        headers: std::collections::HashMap<String, String>,
    }
    let Ok(proxy) = serde_json::from_slice::<Proxy>(body) else {
        return decode_reply(body);
    };
    match proxy.status_code {
        429 => {
            let retry_after = proxy
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
                .and_then(|(_, v)| parse_retry_after(v));
            return Err(UpstreamError::RateLimited { retry_after });
        }
        404 => {
            return Err(UpstreamError::NotFound("the function's proxy answer is 404".into()));
        }
        200..=299 | 400 => {}
        status => return Err(UpstreamError::Status { status }),
    }
    let text = proxy.body.unwrap_or_default();
    if proxy.base64 {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| UpstreamError::Protocol(format!("proxy body is not base64: {e}")))?;
        decode_reply(&bytes)
    } else {
        decode_reply(text.as_bytes())
    }
}

fn sdk_error(error: SdkError<InvokeError>) -> UpstreamError {
    match error {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            match service.into_err() {
                InvokeError::TooManyRequestsException(e) => UpstreamError::RateLimited {
                    retry_after: e.retry_after_seconds().and_then(parse_retry_after),
                },
                InvokeError::ResourceNotFoundException(e) => {
                    UpstreamError::NotFound(e.message().unwrap_or("function not found").to_string())
                }
                InvokeError::RequestTooLargeException(_) => {
                    UpstreamError::PayloadTooLarge { size: MAX_PAYLOAD_BYTES + 1, limit: MAX_PAYLOAD_BYTES }
                }
                _ => UpstreamError::Status { status },
            }
        }
        SdkError::TimeoutError(_) => UpstreamError::Timeout(Duration::ZERO),
        SdkError::DispatchFailure(failure) => {
            let connector = failure.as_connector_error();
            let cause = connector.map(|e| root_cause(e)).unwrap_or_else(|| "dispatch failure".into());
            if connector.is_some_and(|e| failed_to_connect(e)) {
                UpstreamError::Connect(cause)
            } else if failure.is_timeout() {
                UpstreamError::Timeout(Duration::ZERO)
            } else {
                UpstreamError::Io(cause)
            }
        }
        SdkError::ResponseError(e) => UpstreamError::Io(format!("{:?}", e.raw().status())),
        other => UpstreamError::Protocol(other.to_string()),
    }
}

/// Whether the error chain holds hyper-util's connect error: the request never left.
fn failed_to_connect(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|e| e.is_connect()) {
            return true;
        }
        next = error.source();
    }
    false
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_bodies_are_unwrapped() {
        let inner = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        let proxy = serde_json::json!({"statusCode": 200, "body": inner}).to_string();
        assert!(matches!(decode_payload(proxy.as_bytes()), Ok(UpstreamReply::Result(_))));
        let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
        let proxy = serde_json::json!({"statusCode": 200, "body": b64, "isBase64Encoded": true}).to_string();
        assert!(matches!(decode_payload(proxy.as_bytes()), Ok(UpstreamReply::Result(_))));
        let limited = serde_json::json!({"statusCode": 429, "headers": {"Retry-After": "2"}}).to_string();
        assert!(matches!(
            decode_payload(limited.as_bytes()),
            Err(UpstreamError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(2)
        ));
        assert!(matches!(decode_payload(inner.as_bytes()), Ok(UpstreamReply::Result(_))));
    }
}
