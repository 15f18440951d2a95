//! The browser boundary of a loopback listener: every request, on every route, passes the
//! same `Host` and `Origin` checks before anything else reads it ([`EdgeGuard`]).
//!
//! A web page in a browser on the host can reach `127.0.0.1`; so can a DNS-rebound name
//! (`evil.example` resolving to 127.0.0.1). The page's requests carry an `Origin` (on POSTs and
//! cross-origin fetches) and the name it used as `Host`. So: an `Origin` must be a loopback
//! origin or one of `allowed_origins`, and on a loopback listener the `Host` must name a
//! loopback host (or the host of an allowed origin). Refused with 403 and a JSON-RPC error
//! body (`forbidden_origin`), counted in `mcp_gateway_http_rejections_total{reason}`
//! (`forbidden_host`, `forbidden_origin`). This is the DNS-rebinding defence the MCP transport
//! specification asks for, applied to `GET /metrics`, `/tools`, `/admin/*` … as to `POST /mcp`.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures_util::future::{Either, Ready, ready};
use serde_json::Value;

use crate::{
    error::{Category, GatewayError},
    gateway::Gateway,
    protocol::jsonrpc,
};

/// Wraps a listener's service: requests that fail the checks never reach it.
#[derive(Clone)]
pub struct EdgeGuard<S> {
    gateway: Arc<Gateway>,
    /// Check `Host` (the listener is bound to a loopback address).
    check_host: bool,
    inner: S,
}

impl<S> EdgeGuard<S> {
    /// `loopback_listener`: the listener's address is a loopback one (then `Host` is checked).
    pub fn new(gateway: Arc<Gateway>, loopback_listener: bool, inner: S) -> Self {
        Self { gateway, check_host: loopback_listener, inner }
    }
}

impl<S> tower::Service<Request> for EdgeGuard<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match refusal(&self.gateway, self.check_host, request.headers()) {
            Some(refused) => Either::Left(ready(Ok(refused))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

/// The 403 a request gets when its `Host` or `Origin` is not allowed; `None` when it passes.
pub fn refusal(gateway: &Gateway, check_host: bool, headers: &HeaderMap) -> Option<Response> {
    let allowed = &gateway.config().allowed_origins;
    if check_host
        && let Some(host) = headers.get(header::HOST)
        && !host_allowed(host, allowed)
    {
        gateway.record_rejection("forbidden_host");
        let err = GatewayError::new(
            Category::ForbiddenOrigin,
            "the Host header is not a loopback host (DNS rebinding protection)",
        );
        return Some(forbidden(&err));
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin_allowed(origin, allowed)
    {
        gateway.record_rejection("forbidden_origin");
        let err = GatewayError::new(Category::ForbiddenOrigin, "the Origin header is not an allowed origin");
        return Some(forbidden(&err));
    }
    None
}

fn forbidden(err: &GatewayError) -> Response {
    let body = jsonrpc::Response::error(Value::Null, err);
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

/// Loopback origins are always allowed (the orchestrator and local tools); others only when
/// configured.
pub fn origin_allowed(origin: &HeaderValue, allowed: &[String]) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => rest.split(':').next().unwrap_or_default(),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// On a loopback listener, the `Host` must name a loopback host (or the host of a configured
/// origin): a browser page on a rebound name sends that name as `Host`, with or without an
/// `Origin`.
pub fn host_allowed(host: &HeaderValue, allowed_origins: &[String]) -> bool {
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if ["localhost", "127.0.0.1", "::1"].iter().any(|loopback| name.eq_ignore_ascii_case(loopback)) {
        return true;
    }
    allowed_origins.iter().any(|origin| {
        let rest = origin.split_once("://").map_or(origin.as_str(), |(_, r)| r);
        rest.eq_ignore_ascii_case(host)
            || rest.split(':').next().is_some_and(|h| h.eq_ignore_ascii_case(host))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_or_configured_origins_pass() {
        let allowed = vec!["https://shop.example".to_string()];
        for ok in ["http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080", "https://shop.example"] {
            assert!(origin_allowed(&HeaderValue::from_static(ok), &allowed), "{ok}");
        }
        for bad in
            ["https://evil.example", "http://localhost.evil.example", "null", "http://127.0.0.1.nip.io"]
        {
            assert!(!origin_allowed(&HeaderValue::from_static(bad), &allowed), "{bad}");
        }
    }

    #[test]
    fn only_loopback_or_configured_hosts_pass() {
        let allowed = vec!["https://shop.example".to_string()];
        for ok in ["localhost:8080", "127.0.0.1", "[::1]:9", "LOCALHOST", "shop.example"] {
            assert!(host_allowed(&HeaderValue::from_static(ok), &allowed), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example.com:8080", "localhost.evil.example", "127.0.0.2"] {
            assert!(!host_allowed(&HeaderValue::from_static(bad), &allowed), "{bad}");
        }
    }
}
