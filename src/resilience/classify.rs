//! The one outcome classifier. Every later decision (metrics, logs, retries, circuit
//! breaking) reads the [`Outcome`] of a call from here, so a failure is judged the same way
//! everywhere; the category and code the caller is answered with are the error table's
//! ([`crate::error`]).
//!
//! Failure attribution follows the design notes: only infrastructure failures (connect
//! errors, resets, timeouts, 5xx, Lambda `Unhandled`, upstream internal errors) are
//! [`Outcome::ServerError`]/[`Outcome::Timeout`]; invalid params, unknown tools and `isError`
//! tool results are the caller's or the tool's business and never count against a server.
//!
//! Two decisions of this module's own:
//! - An upstream's `-32020` (header mismatch) or `-32022` (unsupported protocol version) as a
//!   final answer is a client error of the gateway's (what it sent did not suit the server):
//!   not retried, not counted by the breaker (the error table answers it as
//!   `upstream_protocol`). During era
//!   detection the HTTP transport reads such answers itself, before anything is classified.
//! - An answer over `max_response_bytes` ([`Outcome::Oversized`]) counts as a hard failure
//!   (a server that sends 100 MB for one call is misbehaving, and its breaker should notice)
//!   but is not retried: the same request would most likely bring the same answer.

use std::time::Duration;

use crate::upstream::{FunctionErrorKind, UpstreamError, UpstreamReply};

/// What one upstream call amounted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Success,
    /// A result with `isError: true`: the tool ran and reported a failure. Passed through.
    ToolError,
    /// The upstream rejected the request as the caller's mistake (invalid params, …).
    ClientError,
    /// The tool, function or endpoint does not exist upstream.
    NotFound,
    /// The upstream asked us to slow down.
    RateLimited { retry_after: Option<Duration> },
    /// The upstream (or the way to it) failed.
    ServerError { reached_server: bool },
    /// The upstream did not answer in time (attempt timeout or the caller's deadline).
    Timeout,
    /// The upstream's answer exceeded `max_response_bytes`: counted, never retried.
    Oversized,
    /// The upstream refused the gateway's credentials (401/403): not retried, not counted —
    /// a breaker cannot fix credentials, and tripping it would hide the real cause.
    Unauthorized,
    /// The gateway refused to send (circuit open, overloaded, no ready connection): says
    /// nothing about the server.
    Refused,
    /// The caller stopped waiting (its deadline passed, or it went away) before the server
    /// answered: says nothing about the server either.
    Abandoned,
}

/// What one outcome means for the server's circuit breaker — the attribution table of
/// docs/resilience.md, in code. Only the server's own failures count against it; a refusal by the gateway
/// or a caller that stopped waiting leaves its counts as they were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribution {
    /// The server answered as a working server does (a result, a tool error, a client error).
    Success,
    /// The server failed: counts in a row and against the windowed rate.
    HardFailure,
    /// The server asked to slow down: counts against the rate only, and neither adds to nor
    /// resets the consecutive count.
    RateFailure,
    /// Not the server's doing, nor proof of its health: not counted at all.
    Neither,
}

impl Outcome {
    /// Classifies a transport result. `tools_call` says whether to look for `isError`.
    pub fn of(result: &Result<UpstreamReply, UpstreamError>, tools_call: bool) -> Self {
        match result {
            Ok(UpstreamReply::Result(raw)) if tools_call && raw.is_tool_error() => Outcome::ToolError,
            Ok(UpstreamReply::Result(_)) => Outcome::Success,
            Ok(UpstreamReply::Error(error)) => match error.code {
                // Method not found / unknown tool / resource not found upstream.
                -32601 | -32002 => Outcome::NotFound,
                // The modern revision's header mismatch and unsupported version: the request
                // the gateway built did not suit the server (inside the -32000 range below).
                -32020 | -32022 => Outcome::ClientError,
                // Internal error and the implementation-defined server error range.
                -32603 | -32099..=-32000 => Outcome::ServerError { reached_server: true },
                _ => Outcome::ClientError,
            },
            Err(error) => Self::of_error(error),
        }
    }

    fn of_error(error: &UpstreamError) -> Self {
        match error {
            UpstreamError::Connect(_) => Outcome::ServerError { reached_server: false },
            UpstreamError::Io(_) | UpstreamError::Protocol(_) => {
                Outcome::ServerError { reached_server: true }
            }
            UpstreamError::Timeout(_) => Outcome::Timeout,
            UpstreamError::Status { status } if *status >= 500 => {
                Outcome::ServerError { reached_server: true }
            }
            UpstreamError::Status { status: 404 | 405 } | UpstreamError::NotFound(_) => Outcome::NotFound,
            UpstreamError::Status { .. } => Outcome::ClientError,
            UpstreamError::RateLimited { retry_after } => Outcome::RateLimited { retry_after: *retry_after },
            UpstreamError::FunctionError { kind: FunctionErrorKind::Unhandled, .. } => {
                Outcome::ServerError { reached_server: true }
            }
            UpstreamError::FunctionError { kind: FunctionErrorKind::Handled, .. } => Outcome::ClientError,
            UpstreamError::PayloadTooLarge { .. } => Outcome::ClientError,
            // Nothing was sent: the caller's arguments, not the server.
            UpstreamError::BadArguments(_) => Outcome::Refused,
            UpstreamError::ResponseTooLarge { .. } => Outcome::Oversized,
            UpstreamError::Unauthorized { .. } => Outcome::Unauthorized,
            UpstreamError::CircuitOpen { .. }
            | UpstreamError::Overloaded { .. }
            | UpstreamError::HeldFull { .. }
            | UpstreamError::NotConnected { .. } => Outcome::Refused,
            // Nothing was sent: the token endpoint or the caller, not the server.
            UpstreamError::Credentials { .. } => Outcome::Refused,
            UpstreamError::DeadlineExceeded(_) => Outcome::Abandoned,
            // Waiting for the caller's answer to a relayed request: the caller's time, not the
            // server's failure (see backchannel::relay).
            UpstreamError::CallerDidNotAnswer(_) => Outcome::Abandoned,
        }
    }

    /// Whether trying again may help (the retry layer also checks tool safety and budget).
    pub fn is_retryable(self) -> bool {
        matches!(self, Outcome::RateLimited { .. } | Outcome::ServerError { .. } | Outcome::Timeout)
    }

    /// Whether this counts as a hard failure for a circuit breaker's consecutive count.
    pub fn is_hard_failure(self) -> bool {
        self.attribution() == Attribution::HardFailure
    }

    /// Whether this counts against the server's windowed success rate.
    pub fn counts_against_success_rate(self) -> bool {
        matches!(self.attribution(), Attribution::HardFailure | Attribution::RateFailure)
    }

    /// How the server's circuit breaker counts this outcome.
    pub fn attribution(self) -> Attribution {
        match self {
            Outcome::Success | Outcome::ToolError | Outcome::ClientError | Outcome::NotFound => {
                Attribution::Success
            }
            Outcome::ServerError { .. } | Outcome::Timeout | Outcome::Oversized => Attribution::HardFailure,
            Outcome::RateLimited { .. } => Attribution::RateFailure,
            Outcome::Unauthorized | Outcome::Refused | Outcome::Abandoned => Attribution::Neither,
        }
    }

    /// The metric label and log field.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::ToolError => "tool_error",
            Outcome::ClientError => "client_error",
            Outcome::NotFound => "not_found",
            Outcome::RateLimited { .. } => "rate_limited",
            Outcome::ServerError { .. } => "server_error",
            Outcome::Timeout => "timeout",
            Outcome::Oversized => "response_too_large",
            Outcome::Unauthorized => "unauthorized",
            Outcome::Refused => "refused",
            Outcome::Abandoned => "abandoned",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::ErrorObject;
    use serde_json::value::RawValue;

    fn result(json: &str) -> Result<UpstreamReply, UpstreamError> {
        Ok(UpstreamReply::Result(crate::upstream::RawResult::new(
            RawValue::from_string(json.into()).unwrap(),
        )))
    }

    fn rpc_error(code: i64) -> Result<UpstreamReply, UpstreamError> {
        Ok(UpstreamReply::Error(ErrorObject { code, message: "x".into(), data: None }))
    }

    #[test]
    fn tool_errors_and_client_errors_never_count_against_the_server() {
        for outcome in [
            Outcome::of(&result(r#"{"content":[],"isError":true}"#), true),
            Outcome::of(&result(r#"{"content":[]}"#), true),
            Outcome::of(&rpc_error(-32602), true),
            Outcome::of(&rpc_error(-32002), true),
            Outcome::of(&Err(UpstreamError::NotFound("f".into())), true),
        ] {
            assert!(!outcome.is_hard_failure(), "{outcome:?}");
            assert!(!outcome.counts_against_success_rate(), "{outcome:?}");
        }
        assert_eq!(Outcome::of(&result(r#"{"isError":true}"#), true), Outcome::ToolError);
    }

    #[test]
    fn infrastructure_failures_count_and_rate_limits_count_only_toward_the_rate() {
        let down = Outcome::of(&Err(UpstreamError::Connect("refused".into())), true);
        assert_eq!(down, Outcome::ServerError { reached_server: false });
        assert!(down.is_hard_failure() && down.is_retryable());
        assert!(Outcome::of(&rpc_error(-32603), true).is_hard_failure());
        assert!(Outcome::of(&Err(UpstreamError::Status { status: 503 }), true).is_hard_failure());
        let unhandled =
            UpstreamError::FunctionError { kind: FunctionErrorKind::Unhandled, message: String::new() };
        assert!(Outcome::of(&Err(unhandled), true).is_hard_failure());
        let limited = Outcome::of(&Err(UpstreamError::RateLimited { retry_after: None }), true);
        assert!(!limited.is_hard_failure() && limited.counts_against_success_rate());
    }

    /// The attribution table of docs/resilience.md, row by row: what each outcome does to the breaker.
    #[test]
    fn attribution_table() {
        use Attribution::*;
        let function = |kind| Err(UpstreamError::FunctionError { kind, message: String::new() });
        let rows: Vec<(&str, Result<UpstreamReply, UpstreamError>, Attribution)> = vec![
            ("success", result(r#"{"content":[]}"#), Success),
            ("isError", result(r#"{"content":[],"isError":true}"#), Success),
            ("upstream -32602", rpc_error(-32602), Success),
            ("upstream -32601", rpc_error(-32601), Success),
            ("upstream -32603", rpc_error(-32603), HardFailure),
            ("429", Err(UpstreamError::RateLimited { retry_after: None }), RateFailure),
            ("attempt timeout", Err(UpstreamError::Timeout(Duration::from_secs(1))), HardFailure),
            ("caller deadline", Err(UpstreamError::DeadlineExceeded(Duration::from_millis(50))), Neither),
            ("shed", Err(UpstreamError::Overloaded { limit: 1 }), Neither),
            ("circuit open", Err(UpstreamError::CircuitOpen { retry_after: Duration::ZERO }), Neither),
            ("connect refused", Err(UpstreamError::Connect("refused".into())), HardFailure),
            ("reset mid-answer", Err(UpstreamError::Io("reset".into())), HardFailure),
            ("5xx", Err(UpstreamError::Status { status: 503 }), HardFailure),
            ("other 4xx", Err(UpstreamError::Status { status: 400 }), Success),
            ("Lambda Unhandled", function(FunctionErrorKind::Unhandled), HardFailure),
            ("Lambda Handled", function(FunctionErrorKind::Handled), Success),
            ("Lambda throttle", Err(UpstreamError::RateLimited { retry_after: None }), RateFailure),
            ("function not found", Err(UpstreamError::NotFound("f".into())), Success),
            ("upstream -32020", rpc_error(-32020), Success),
            ("upstream -32022", rpc_error(-32022), Success),
            ("answer over the cap", Err(UpstreamError::ResponseTooLarge { limit: 10 }), HardFailure),
            ("credentials refused", Err(UpstreamError::Unauthorized { status: 401 }), Neither),
            ("no ready connection", Err(UpstreamError::NotConnected { state: "reconnecting" }), Neither),
            (
                "caller silent on a relayed request",
                Err(UpstreamError::CallerDidNotAnswer("s".into())),
                Neither,
            ),
        ];
        for (row, reply, expected) in rows {
            assert_eq!(Outcome::of(&reply, true).attribution(), expected, "row {row}");
        }
        // A caller that disconnects drops the call: the breaker is never told (its probe
        // slot is released by the breaker's guard), which is what `Neither` means.
        assert_eq!(Outcome::Abandoned.attribution(), Neither);
        assert!(!Outcome::Abandoned.is_retryable() && !Outcome::Refused.is_retryable());
    }

    #[test]
    fn modern_refusals_are_our_client_errors_and_oversized_answers_count_without_retry() {
        for code in [-32020, -32022] {
            let outcome = Outcome::of(&rpc_error(code), true);
            assert_eq!(outcome, Outcome::ClientError);
            assert!(!outcome.is_retryable() && !outcome.counts_against_success_rate());
        }
        assert!(Outcome::of(&rpc_error(-32010), true).is_hard_failure());
        let big = Outcome::of(&Err(UpstreamError::ResponseTooLarge { limit: 10 }), true);
        assert!(big.is_hard_failure() && !big.is_retryable());
    }
}
