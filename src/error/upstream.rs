//! Why an upstream gave no JSON-RPC answer ([`UpstreamError`]), and what each failure is for
//! the caller: its category, the error it is answered with, and the reason a server whose
//! `tools/list` fails is reported unavailable. The upstream room produces these errors and
//! labels its own metrics by them; what they mean to a caller is decided here.

use std::time::Duration;

use serde_json::json;

use super::{Category, ErrorObject, GatewayError};

/// Why an upstream gave no JSON-RPC answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Connection refused or timed out, DNS or TLS failure: the request never left the gateway.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection broke after the request may have been sent (for Lambda: any dispatch
    /// failure the SDK cannot prove happened before connecting).
    #[error("connection failed: {0}")]
    Io(String),
    /// No answer within the attempt's time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// An HTTP status that is not an MCP answer (5xx, unexpected 4xx).
    #[error("HTTP {status}")]
    Status { status: u16 },
    /// HTTP 429 or Lambda throttling.
    #[error("rate limited")]
    RateLimited { retry_after: Option<Duration> },
    /// A Lambda function error (`X-Amz-Function-Error`).
    #[error("function error ({kind}): {message}")]
    FunctionError { kind: FunctionErrorKind, message: String },
    /// The endpoint or function does not exist: a configuration error.
    #[error("not found: {0}")]
    NotFound(String),
    /// The call's arguments cannot make a request as the transport must build it (an OpenAPI
    /// operation's: a missing required argument, a file that is not base64 or over
    /// `max_request_bytes`): the caller's mistake, refused before sending (`bad_input`).
    #[error("{0}")]
    BadArguments(String),
    /// The request is too large for the transport (Lambda's 6 MB), refused before sending.
    #[error("request of {size} bytes exceeds the {limit}-byte limit")]
    PayloadTooLarge { size: usize, limit: usize },
    /// The answer grew past the server's `max_response_bytes` while it was read (a body, an
    /// SSE line or event, a Lambda payload): the rest was not read and the connection dropped.
    #[error("answer exceeds the {limit}-byte limit for one upstream answer")]
    ResponseTooLarge { limit: usize },
    /// The upstream refused the gateway's credentials (HTTP 401/403, or a refused WebSocket
    /// upgrade): nothing a retry or a breaker can fix; the server needs (new) credentials.
    #[error("upstream refused the gateway's credentials (HTTP {status})")]
    Unauthorized { status: u16 },
    /// A persistent transport (WebSocket, legacy SSE, stdio) has no ready connection: nothing
    /// was sent. `state` is the connection state (`connecting`, `reconnecting`, `failed`, …).
    #[error("no ready connection to the server (state: {state})")]
    NotConnected { state: &'static str },
    /// The upstream answered, but not with MCP/JSON-RPC.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server's circuit breaker is open: nothing was sent.
    #[error("circuit open; retry in {} ms", retry_after.as_millis())]
    CircuitOpen { retry_after: Duration },
    /// The server's concurrency limit is reached: nothing was sent.
    #[error("{limit} calls already in flight to this server")]
    Overloaded { limit: usize },
    /// The caller's deadline passed (the upstream call, if any, was cancelled).
    #[error("deadline of {0:?} exceeded")]
    DeadlineExceeded(Duration),
    /// The caller did not answer a server→client request relayed to it (see [`crate::upstream::relay`]) before
    /// the call's time ran out, or its session ended: the caller's doing, not the server's.
    #[error("the caller did not answer the relayed {0} request in time")]
    CallerDidNotAnswer(String),
    /// The gateway already holds its most exchanges of modern callers with session-era servers
    /// (`inbound.max_held_exchanges`, see `backchannel::held`): nothing was sent.
    #[error(
        "the gateway holds its most exchanges that may wait for a caller's input ({limit}, inbound.max_held_exchanges); try again later"
    )]
    HeldFull { limit: usize },
    /// No credentials for the server could be had ([`crate::upstream::credentials`]): nothing was sent.
    #[error("{detail}")]
    Credentials { failure: CredentialFailure, detail: String },
}

/// Why [`UpstreamError::Credentials`]: decides the caller's error category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialFailure {
    /// The server's credentials derive from the caller's token and the call has none.
    NoCallerToken,
    /// The authorization server refused to exchange the caller's token.
    CallerTokenRefused,
    /// The authorization server refused the gateway's own client (id, secret, scope).
    ClientRefused,
    /// The token endpoint (or the AWS credential chain) is unreachable, failing, or answered
    /// something unusable.
    Unavailable,
    /// The configuration gives no usable credential for what the call needs (an OpenAPI
    /// operation's security scheme with no secret configured, a secret that is no header
    /// value): trying again cannot help until an operator changes the configuration.
    NotConfigured,
}

/// `X-Amz-Function-Error` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionErrorKind {
    /// The runtime failed (crash, timeout, out of memory): an infrastructure failure.
    Unhandled,
    /// The function reported an error itself.
    Handled,
}

impl std::fmt::Display for FunctionErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FunctionErrorKind::Unhandled => "Unhandled",
            FunctionErrorKind::Handled => "Handled",
        })
    }
}

impl UpstreamError {
    /// The error-table category a failed transport call is answered with.
    pub fn category(&self) -> Category {
        match self {
            UpstreamError::Connect(_) => Category::UpstreamUnavailable,
            UpstreamError::Io(_) => Category::UpstreamError,
            UpstreamError::Timeout(_) => Category::Timeout,
            UpstreamError::Status { status } if *status >= 500 => Category::UpstreamError,
            UpstreamError::Status { status: 404 | 405 } | UpstreamError::NotFound(_) => {
                Category::UpstreamMisconfigured
            }
            UpstreamError::Status { .. } => Category::UpstreamProtocol,
            UpstreamError::RateLimited { .. } => Category::RateLimited,
            UpstreamError::FunctionError { kind: FunctionErrorKind::Unhandled, .. } => {
                Category::UpstreamError
            }
            UpstreamError::FunctionError { kind: FunctionErrorKind::Handled, .. } => {
                Category::UpstreamRejected
            }
            UpstreamError::PayloadTooLarge { .. } => Category::PayloadTooLarge,
            UpstreamError::BadArguments(_) => Category::BadInput,
            UpstreamError::ResponseTooLarge { .. } => Category::ResponseTooLarge,
            UpstreamError::Protocol(_) => Category::UpstreamProtocol,
            UpstreamError::Unauthorized { .. } => Category::UpstreamAuth,
            // A persistent connection refused for its credentials: an operator must act, as
            // for an HTTP 401/403 (still not counted: nothing was sent).
            UpstreamError::NotConnected { state: "needs_auth" } => Category::UpstreamAuth,
            UpstreamError::NotConnected { .. } => Category::UpstreamUnavailable,
            UpstreamError::CircuitOpen { .. } => Category::CircuitOpen,
            UpstreamError::Overloaded { .. } | UpstreamError::HeldFull { .. } => Category::Overloaded,
            UpstreamError::DeadlineExceeded(_) => Category::Timeout,
            UpstreamError::CallerDidNotAnswer(_) => Category::Timeout,
            UpstreamError::Credentials { failure, .. } => match failure {
                CredentialFailure::NoCallerToken => Category::Unauthenticated,
                CredentialFailure::CallerTokenRefused => Category::Forbidden,
                CredentialFailure::ClientRefused => Category::UpstreamAuth,
                CredentialFailure::Unavailable => Category::CredentialsUnavailable,
                CredentialFailure::NotConfigured => Category::UpstreamMisconfigured,
            },
        }
    }

    /// Why a server whose `tools/list` failed with this is unavailable, as `/readyz`'s
    /// capability summary names it: `unreachable` (connect, timeout, I/O, no connection, a
    /// token endpoint down), `needs_auth` (401/403, refused credentials), `circuit_open`, or
    /// `tools_list_failing`.
    pub fn refresh_failure_reason(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_)
            | UpstreamError::Io(_)
            | UpstreamError::Timeout(_)
            | UpstreamError::NotConnected { .. }
            | UpstreamError::NotFound(_) => "unreachable",
            // The token endpoint is down: the server is out of reach for now.
            UpstreamError::Credentials { failure: CredentialFailure::Unavailable, .. } => "unreachable",
            UpstreamError::Unauthorized { .. }
            | UpstreamError::Status { status: 401 | 403 }
            | UpstreamError::Credentials { .. } => "needs_auth",
            UpstreamError::CircuitOpen { .. } => "circuit_open",
            _ => "tools_list_failing",
        }
    }
}

/// The error-table category for an upstream's JSON-RPC error answer (`hard_failure`: the
/// outcome classifier counts it against the server); its own code is kept in
/// `error.data.upstream_code` either way.
pub fn category_of_reply(code: i64, hard_failure: bool) -> Category {
    match code {
        // Not the caller's mistake, and not a code to hand the caller as its own: a
        // modern client would take `-32020` for a mismatch in its own headers.
        -32020 | -32022 => Category::UpstreamProtocol,
        _ if hard_failure => Category::UpstreamError,
        _ => Category::UpstreamRejected,
    }
}

impl GatewayError {
    /// The answer to a failed transport call: its category and text, the retry hint of a
    /// rate limit or an open circuit, and the state of a connection that was not ready.
    pub fn from_upstream(error: &UpstreamError) -> Self {
        let retry_after = match error {
            UpstreamError::RateLimited { retry_after } => *retry_after,
            UpstreamError::CircuitOpen { retry_after } => Some(*retry_after),
            _ => None,
        };
        let err = GatewayError::new(error.category(), error.to_string()).with_retry_after(retry_after);
        match error {
            UpstreamError::NotConnected { state } => err.with_extra("connection_state", json!(state)),
            _ => err,
        }
    }

    /// The answer to an upstream's own JSON-RPC error (see [`category_of_reply`]): its
    /// message, its code in `upstream_code` (and as the answer's code when it is the caller's
    /// business), its `data` in `upstream_data`.
    pub fn from_upstream_reply(error: ErrorObject, hard_failure: bool) -> Self {
        let mut err = GatewayError::new(category_of_reply(error.code, hard_failure), error.message);
        err.upstream_code = Some(error.code);
        match error.data {
            Some(data) => err.with_extra("upstream_data", data),
            None => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_refusals_are_protocol_errors_and_server_errors_are_upstream_errors() {
        for code in [-32020, -32022] {
            assert_eq!(category_of_reply(code, false), Category::UpstreamProtocol);
        }
        assert_eq!(category_of_reply(-32010, true), Category::UpstreamError);
        assert_eq!(category_of_reply(-32602, false), Category::UpstreamRejected);
        let reply = ErrorObject { code: -32602, message: "bad".into(), data: Some(json!({"k": 1})) };
        let object = GatewayError::from_upstream_reply(reply, false).to_error_object();
        assert_eq!(object.code, -32602, "the caller's business: the upstream's own code");
        let data = object.data.unwrap_or_default();
        assert_eq!(
            (data["upstream_code"].clone(), data["upstream_data"].clone()),
            (json!(-32602), json!({"k": 1}))
        );
    }

    #[test]
    fn a_connection_waiting_for_credentials_is_an_auth_failure_the_others_are_unavailable() {
        let category = |state| UpstreamError::NotConnected { state }.category();
        assert_eq!(category("needs_auth"), Category::UpstreamAuth);
        for state in ["connecting", "reconnecting", "failed", "disabled"] {
            assert_eq!(category(state), Category::UpstreamUnavailable, "{state}");
        }
        let err = GatewayError::from_upstream(&UpstreamError::NotConnected { state: "failed" });
        assert_eq!(err.extra.map(|e| e.1), Some(json!("failed")));
    }

    #[test]
    fn rate_limits_and_open_circuits_carry_their_retry_hint() {
        let limited = UpstreamError::RateLimited { retry_after: Some(Duration::from_millis(1500)) };
        assert_eq!(GatewayError::from_upstream(&limited).retry_after, Some(Duration::from_millis(1500)));
        let open = UpstreamError::CircuitOpen { retry_after: Duration::from_secs(2) };
        let err = GatewayError::from_upstream(&open);
        assert_eq!((err.category, err.retry_after), (Category::CircuitOpen, Some(Duration::from_secs(2))));
        assert_eq!(GatewayError::from_upstream(&UpstreamError::Io("reset".into())).retry_after, None);
    }
}
