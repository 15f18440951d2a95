//! The categories of failure an orchestrator can branch on, and what each one is on the wire:
//! its JSON-RPC code (by protocol revision), its `error.data.category` string, its message
//! stem, and whether trying again may help.

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
    /// No server serves this resource URI (none lists it, no template or configured prefix
    /// covers it, or two servers claim it): `resources/read` and `resources/subscribe`.
    ResourceNotFound,
    /// A guardrail hook (`[[hooks]]`) refused the call: it denied the arguments or the result,
    /// or it failed (or did not answer in time) with `failure = "closed"`. `error.data` names
    /// the hook and the phase, and carries the hook's reason when it gave one.
    Guardrail,
    /// The call waits for a person's approval (`[approvals]`, `@approval`): nothing was sent.
    /// `error.data.approval` names the approval, who approves and where; the same call (same
    /// caller, endpoint, tool and arguments) passes once approved.
    ApprovalRequired,
    /// The person asked denied the call: nothing was sent.
    ApprovalDenied,
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
        Category::ResourceNotFound,
        Category::Guardrail,
        Category::ApprovalRequired,
        Category::ApprovalDenied,
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
            // The code the resources page of the specification gives "resource not found".
            Category::ResourceNotFound => -32002,
            Category::RateLimited => -32003,
            Category::CircuitOpen => -32004,
            Category::Overloaded => -32005,
            Category::UpstreamMisconfigured => -32006,
            Category::UpstreamAuth => -32007,
            Category::Forbidden => -32008,
            Category::Unauthenticated => -32009,
            Category::UpstreamNotAllowed => -32010,
            Category::CredentialsUnavailable => -32011,
            Category::Guardrail => -32012,
            Category::ApprovalRequired => -32013,
            Category::ApprovalDenied => -32014,
            // Outside the reserved range; the code LSP gives a cancelled request.
            Category::Cancelled => -32800,
            // Replaced by the upstream's own code when there is one.
            Category::UpstreamRejected => -32000,
        }
    }

    /// The JSON-RPC `error.code` answered to a caller that speaks the modern revision
    /// (2026-07-28): it names unknown tools -32602 and, since SEP-2164, unknown resources
    /// -32602 too; it never sends -32002.
    pub fn modern_code(self) -> i64 {
        match self {
            Category::UnknownTool | Category::ResourceNotFound => -32602,
            other => other.code(),
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
            Category::ResourceNotFound => "resource_not_found",
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
            Category::Guardrail => "guardrail",
            Category::ApprovalRequired => "approval_required",
            Category::ApprovalDenied => "approval_denied",
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
                | Category::ApprovalRequired
        )
    }

    /// The human-readable `error.message` stem.
    pub(super) fn message(self) -> &'static str {
        match self {
            Category::ParseError => "Parse error",
            Category::InvalidRequest => "Invalid request",
            Category::MethodNotFound => "Method not found",
            Category::BadInput => "Invalid params",
            Category::UnknownTool => "Unknown tool",
            Category::ResourceNotFound => "Resource not found",
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
            Category::Guardrail => "Refused by a guardrail",
            Category::ApprovalRequired => "Approval required",
            Category::ApprovalDenied => "Approval denied",
        }
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
                Category::ResourceNotFound => 26,
                Category::Guardrail => 27,
                Category::ApprovalRequired => 28,
                Category::ApprovalDenied => 29,
            }
        };
        for (i, c) in Category::ALL.iter().enumerate() {
            assert_eq!(position(*c), i, "{c:?}");
        }
        assert_eq!(Category::ALL.len(), 30);
    }
}
