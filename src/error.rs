//! The error table: every gateway-made failure becomes a JSON-RPC error here, and only here.
//!
//! A [`GatewayError`] carries a [`Category`] (what went wrong, in words an orchestrator can
//! branch on) and the context of the call (tool, server, attempts, retry hint). The code,
//! message and the machine-readable `error.data` an agent needs to explain the failure to a
//! user are derived from the category by [`GatewayError::to_error_object`]. The README
//! documents the same table.

use std::{sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A JSON-RPC error object: what every error becomes on the wire (upstreams' errors arrive in
/// the same shape). It lives here, with the table, so that the protocol codec can depend on
/// the error table without the table depending back on the codec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// What went wrong, as the orchestrator sees it. `as_str` is the `error.data.category` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// The HTTP body is not JSON.
    ParseError,
    /// JSON, but not a valid JSON-RPC 2.0 request.
    InvalidRequest,
    /// The method is not one the gateway serves.
    MethodNotFound,
    /// The arguments (or params) fail the tool's `inputSchema` or the method's shape.
    BadInput,
    /// No server hosts a tool of this name.
    UnknownTool,
    /// The request body is over the configured limit (or a Lambda payload over 6 MB).
    PayloadTooLarge,
    /// The client asked for an MCP protocol version the gateway does not speak.
    UnsupportedProtocolVersion,
    /// A modern-era routing header disagrees with the body (`Mcp-Method`, `MCP-Protocol-Version`).
    HeaderMismatch,
    /// The upstream failed: 5xx, JSON-RPC internal error, Lambda `Unhandled`, a reset.
    UpstreamError,
    /// The upstream could not be reached at all (connection refused, DNS, TLS).
    UpstreamUnavailable,
    /// The upstream did not answer in time.
    Timeout,
    /// The upstream said "slow down" (HTTP 429, Lambda throttling).
    RateLimited,
    /// The server's circuit breaker is open: the call was not attempted.
    CircuitOpen,
    /// The server's concurrency limit is reached: the call was shed.
    Overloaded,
    /// The upstream is wrongly configured (Lambda function or HTTP endpoint not found).
    UpstreamMisconfigured,
    /// The upstream answered the call with a JSON-RPC error of its own (passed through).
    UpstreamRejected,
    /// The upstream answered something that is not MCP.
    UpstreamProtocol,
    /// The upstream's answer grew past the server's `max_response_bytes` while it was read.
    ResponseTooLarge,
    /// The upstream refused the gateway's credentials (HTTP 401/403): an operator must act.
    UpstreamAuth,
    /// A registry entry points at an endpoint `registry.upstream_urls` does not allow (or at a
    /// loopback, link-local or metadata address no pattern names): nothing was sent.
    UpstreamNotAllowed,
    /// The gateway could not obtain credentials for the upstream: its token endpoint is
    /// unreachable, failing or answered nonsense. Nothing was sent to the server.
    CredentialsUnavailable,
    /// A browser request from an origin that is not allowed (HTTP 403).
    ForbiddenOrigin,
    /// The caller cancelled the call (`notifications/cancelled`); answered only where an
    /// answer is owed (a JSON body or a batch entry; an event stream just ends).
    Cancelled,
    /// The caller may not do this: the tool policy denies the tool (`[policy]`), or the
    /// authorization server refused to exchange the caller's token for the server. Not
    /// retryable, never sent.
    Forbidden,
    /// The request has no valid caller identity (`[auth]`: HTTP 401 with `WWW-Authenticate`),
    /// or the server's credentials derive from the caller's own token (token exchange,
    /// pass-through) and the call carries none: never sent anonymously instead.
    Unauthenticated,
    /// A bug or an impossible state inside the gateway.
    Internal,
}

impl Category {
    /// Every category (a test fails to compile when a new one is missing here).
    pub const ALL: &'static [Category] = &[
        Category::ParseError,
        Category::InvalidRequest,
        Category::MethodNotFound,
        Category::BadInput,
        Category::UnknownTool,
        Category::PayloadTooLarge,
        Category::UnsupportedProtocolVersion,
        Category::HeaderMismatch,
        Category::UpstreamError,
        Category::UpstreamUnavailable,
        Category::Timeout,
        Category::RateLimited,
        Category::CircuitOpen,
        Category::Overloaded,
        Category::UpstreamMisconfigured,
        Category::UpstreamRejected,
        Category::UpstreamProtocol,
        Category::ResponseTooLarge,
        Category::UpstreamAuth,
        Category::UpstreamNotAllowed,
        Category::CredentialsUnavailable,
        Category::ForbiddenOrigin,
        Category::Cancelled,
        Category::Forbidden,
        Category::Unauthenticated,
        Category::Internal,
    ];

    /// The JSON-RPC `error.code`.
    pub fn code(self) -> i64 {
        match self {
            Category::ParseError => -32700,
            Category::InvalidRequest | Category::PayloadTooLarge => -32600,
            Category::ForbiddenOrigin => -32600,
            // The codes the 2026-07-28 revision defines.
            Category::HeaderMismatch => -32020,
            Category::UnsupportedProtocolVersion => -32022,
            Category::MethodNotFound => -32601,
            Category::BadInput => -32602,
            Category::Internal => -32603,
            Category::UpstreamError | Category::UpstreamUnavailable | Category::UpstreamProtocol => -32000,
            Category::ResponseTooLarge => -32000,
            Category::Timeout => -32001,
            Category::UnknownTool => -32002,
            Category::RateLimited => -32003,
            Category::CircuitOpen => -32004,
            Category::Overloaded => -32005,
            Category::UpstreamMisconfigured => -32006,
            Category::UpstreamAuth => -32007,
            Category::Forbidden => -32008,
            Category::Unauthenticated => -32009,
            Category::UpstreamNotAllowed => -32010,
            Category::CredentialsUnavailable => -32011,
            // Outside the reserved range; the code LSP gives a cancelled request.
            Category::Cancelled => -32800,
            // Replaced by the upstream's own code when there is one.
            Category::UpstreamRejected => -32000,
        }
    }

    /// The `error.data.category` string; also the `outcome` metric label for failures.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::ParseError => "parse_error",
            Category::InvalidRequest => "invalid_request",
            Category::MethodNotFound => "method_not_found",
            Category::BadInput => "bad_input",
            Category::UnknownTool => "unknown_tool",
            Category::PayloadTooLarge => "payload_too_large",
            Category::UnsupportedProtocolVersion => "unsupported_protocol_version",
            Category::HeaderMismatch => "header_mismatch",
            Category::UpstreamError => "upstream_error",
            Category::UpstreamUnavailable => "upstream_unavailable",
            Category::Timeout => "timeout",
            Category::RateLimited => "rate_limited",
            Category::CircuitOpen => "circuit_open",
            Category::Overloaded => "overloaded",
            Category::UpstreamMisconfigured => "upstream_misconfigured",
            Category::UpstreamRejected => "upstream_rejected",
            Category::UpstreamProtocol => "upstream_protocol",
            Category::ResponseTooLarge => "response_too_large",
            Category::UpstreamAuth => "upstream_auth",
            Category::UpstreamNotAllowed => "upstream_not_allowed",
            Category::CredentialsUnavailable => "credentials_unavailable",
            Category::ForbiddenOrigin => "forbidden_origin",
            Category::Cancelled => "cancelled",
            Category::Forbidden => "forbidden",
            Category::Unauthenticated => "unauthenticated",
            Category::Internal => "internal",
        }
    }

    /// Whether the same call may succeed if the caller tries again later.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Category::UpstreamError
                | Category::UpstreamUnavailable
                | Category::Timeout
                | Category::RateLimited
                | Category::CircuitOpen
                | Category::Overloaded
                | Category::CredentialsUnavailable
        )
    }

    /// The human-readable `error.message` stem.
    fn message(self) -> &'static str {
        match self {
            Category::ParseError => "Parse error",
            Category::InvalidRequest => "Invalid request",
            Category::MethodNotFound => "Method not found",
            Category::BadInput => "Invalid params",
            Category::UnknownTool => "Unknown tool",
            Category::PayloadTooLarge => "Payload too large",
            Category::UnsupportedProtocolVersion => "Unsupported protocol version",
            Category::HeaderMismatch => "Header mismatch",
            Category::UpstreamError => "Upstream server error",
            Category::UpstreamUnavailable => "Upstream server unavailable",
            Category::Timeout => "Upstream timeout",
            Category::RateLimited => "Upstream rate limited",
            Category::CircuitOpen => "Circuit open for upstream server",
            Category::Overloaded => "Upstream server overloaded",
            Category::UpstreamMisconfigured => "Upstream misconfigured",
            Category::UpstreamRejected => "Upstream rejected the request",
            Category::UpstreamProtocol => "Upstream protocol error",
            Category::ResponseTooLarge => "Upstream answer too large",
            Category::UpstreamAuth => "Upstream refused the gateway's credentials",
            Category::UpstreamNotAllowed => "Upstream not allowed",
            Category::CredentialsUnavailable => "Could not obtain credentials for the upstream",
            Category::ForbiddenOrigin => "Forbidden origin",
            Category::Cancelled => "Request cancelled",
            Category::Forbidden => "Forbidden",
            Category::Unauthenticated => "Unauthenticated",
            Category::Internal => "Internal error",
        }
    }
}

/// A failure the gateway answers with a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {detail}", category.as_str())]
pub struct GatewayError {
    pub category: Category,
    /// Human-readable detail appended to the message (never raw arguments or secrets).
    pub detail: String,
    pub tool: Option<Arc<str>>,
    pub server: Option<Arc<str>>,
    pub attempts: u32,
    pub retry_after: Option<Duration>,
    /// Extra structured data: schema violations, the upstream's own `error.data`, supported versions.
    pub extra: Option<Box<(&'static str, Value)>>,
    /// The upstream's own JSON-RPC code, for [`Category::UpstreamRejected`].
    pub upstream_code: Option<i64>,
}

impl GatewayError {
    pub fn new(category: Category, detail: impl Into<String>) -> Self {
        Self {
            category,
            detail: detail.into(),
            tool: None,
            server: None,
            attempts: 0,
            retry_after: None,
            extra: None,
            upstream_code: None,
        }
    }

    pub fn with_tool(mut self, tool: impl Into<Arc<str>>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    pub fn with_server(mut self, server: impl Into<Arc<str>>) -> Self {
        self.server = Some(server.into());
        self
    }

    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    pub fn with_extra(mut self, key: &'static str, value: Value) -> Self {
        self.extra = Some(Box::new((key, value)));
        self
    }

    /// Names the configured bound that was hit: `error.data.limit = {"key": …, "value": …}`.
    pub fn with_limit(self, key: &'static str, value: u64) -> Self {
        self.with_extra("limit", json!({"key": key, "value": value}))
    }

    /// The JSON-RPC error object, with `error.data` as documented in the README.
    pub fn to_error_object(&self) -> ErrorObject {
        let code = match (self.category, self.upstream_code) {
            (Category::UpstreamRejected, Some(code)) => code,
            (category, _) => category.code(),
        };
        let message = if self.detail.is_empty() {
            self.category.message().to_string()
        } else {
            format!("{}: {}", self.category.message(), self.detail)
        };
        let mut data = Map::new();
        data.insert("category".into(), json!(self.category.as_str()));
        data.insert("retryable".into(), json!(self.category.retryable()));
        data.insert("tool".into(), json!(self.tool.as_deref()));
        data.insert("server".into(), json!(self.server.as_deref()));
        data.insert("attempts".into(), json!(self.attempts));
        if let Some(after) = self.retry_after {
            data.insert("retry_after_ms".into(), json!(after.as_millis() as u64));
        }
        if let Some(code) = self.upstream_code {
            data.insert("upstream_code".into(), json!(code));
        }
        if let Some(extra) = &self.extra {
            let (key, value) = extra.as_ref();
            data.insert((*key).into(), value.clone());
        }
        ErrorObject { code, message, data: Some(Value::Object(data)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_carries_the_documented_data_fields() {
        let err = GatewayError::new(Category::RateLimited, "HTTP 429")
            .with_tool("manga_search")
            .with_server("catalog")
            .with_attempts(1)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let obj = err.to_error_object();
        assert_eq!(obj.code, -32003);
        let data = obj.data.unwrap();
        assert_eq!(data["category"], "rate_limited");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["tool"], "manga_search");
        assert_eq!(data["server"], "catalog");
        assert_eq!(data["attempts"], 1);
        assert_eq!(data["retry_after_ms"], 1500);
    }

    #[test]
    fn upstream_rejections_keep_the_upstream_code() {
        let mut err = GatewayError::new(Category::UpstreamRejected, "bad");
        err.upstream_code = Some(-32602);
        assert_eq!(err.to_error_object().code, -32602);
        assert!(!err.category.retryable());
    }
}

#[cfg(test)]
mod every_category {
    use super::Category;

    /// `Category::ALL` lists every variant once, in order: adding a variant without listing it
    /// fails this match at compile time (metrics remove a departed tool's series by this list).
    #[test]
    fn all_lists_every_category() {
        let position = |c: Category| -> usize {
            match c {
                Category::ParseError => 0,
                Category::InvalidRequest => 1,
                Category::MethodNotFound => 2,
                Category::BadInput => 3,
                Category::UnknownTool => 4,
                Category::PayloadTooLarge => 5,
                Category::UnsupportedProtocolVersion => 6,
                Category::HeaderMismatch => 7,
                Category::UpstreamError => 8,
                Category::UpstreamUnavailable => 9,
                Category::Timeout => 10,
                Category::RateLimited => 11,
                Category::CircuitOpen => 12,
                Category::Overloaded => 13,
                Category::UpstreamMisconfigured => 14,
                Category::UpstreamRejected => 15,
                Category::UpstreamProtocol => 16,
                Category::ResponseTooLarge => 17,
                Category::UpstreamAuth => 18,
                Category::UpstreamNotAllowed => 19,
                Category::CredentialsUnavailable => 20,
                Category::ForbiddenOrigin => 21,
                Category::Cancelled => 22,
                Category::Forbidden => 23,
                Category::Unauthenticated => 24,
                Category::Internal => 25,
            }
        };
        for (i, c) in Category::ALL.iter().enumerate() {
            assert_eq!(position(*c), i, "{c:?}");
        }
        assert_eq!(Category::ALL.len(), 26);
    }
}
