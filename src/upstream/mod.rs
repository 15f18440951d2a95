//! Outbound: one module per transport, each a `tower::Service<UpstreamRequest>`.
//!
//! A transport turns one MCP request into one JSON-RPC response from the upstream server, or
//! an [`UpstreamError`] saying why there is none. It knows nothing of retries, breakers or
//! metrics: those are layers around it (the resilience layers). Whether a reply is a success
//! is decided by the outcome classifier of the resilience layers, not here.

pub mod agentcore;
pub mod channel;
pub mod connection;
pub mod credentials;
pub mod http;
pub mod lambda;
pub mod legacy_sse;
pub mod openapi;
pub mod outbound;
pub mod stdio;
pub mod tls;
pub mod websocket;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, value::RawValue};
use tower::util::BoxCloneSyncService;

pub use crate::error::{CredentialFailure, FunctionErrorKind, UpstreamError};
use crate::{
    backchannel::{LogSubscription, ProgressSink, Relay, relay::Unanswered, subscriptions::ProgressRelay},
    protocol::{
        jsonrpc::ErrorObject,
        mcp::{Era, MetaPatch},
    },
};

/// One MCP request for an upstream server.
#[derive(Debug, Clone)]
pub struct UpstreamRequest {
    /// `tools/call`, `tools/list`, …
    pub method: &'static str,
    /// The params object, without era-specific `_meta` keys (the transport adds them).
    /// Shared: retries clone the request, not the caller's arguments.
    pub params: Arc<serde_json::Map<String, Value>>,
    /// The tool name on the upstream (for the `Mcp-Name` header of `tools/call`).
    pub tool: Option<Arc<str>>,
    /// `Mcp-Param-{Name}` headers (name without the prefix, encoded value) of a `tools/call`
    /// whose tool marks arguments with `x-mcp-header`; sent by HTTP in the modern era only.
    pub param_headers: Vec<(String, String)>,
    /// May this request be sent again after it reached the server (read-only, idempotent,
    /// or carrying an idempotency key the server honours)?
    pub safe_to_repeat: bool,
    /// When the caller stops waiting; set by the deadline layer, read by retry and timeout.
    pub deadline: Option<Instant>,
    /// Replaces the server's attempt timeout (`timeout_ms`) for this request: a `tasks/result`
    /// waits for its task, not for the server's usual answer time (`gateway/tasks.rs`).
    pub attempt_timeout: Option<Duration>,
    /// Attempts made so far, shared by every clone of the request (reported in `error.data`).
    pub attempts: Arc<AtomicU32>,
    /// Whether any attempt may have reached the server (set by the attempt layer; an attempt
    /// that provably never left leaves it as it was). Decides whether a fallback may run.
    pub maybe_delivered: Arc<AtomicBool>,
    /// Where the upstream's `notifications/progress` for this request go (their validated
    /// fields, [`ProgressUpdate`](crate::backchannel::to_caller::ProgressUpdate)), when the
    /// caller asked for progress and can receive it. `None`: the transport asks for no
    /// progress and drops any that comes.
    pub progress: Option<ProgressSink>,
    /// Where the upstream's `notifications/message` (log entries) for this request go, at or
    /// above a level, when the caller can receive them. `None`: no logs asked for or relayed.
    pub logs: Option<LogSubscription>,
    /// The way back to a back-channel caller for server→client requests ([`Relay`]); `None`:
    /// the call relays none (the transport's usual path).
    pub relay: Option<Relay>,
    /// A modern caller a session-era server may ask (its questions become `input_required`
    /// results while the exchange is held: [`crate::backchannel::held`]); `None`: as usual.
    pub ask: Option<crate::backchannel::held::Asker>,
    /// Trace context and request ids to send along (filled in by the attempt layer).
    pub outbound: outbound::Outbound,
    /// Who the call is for: read by upstream credentials that act for the caller (token
    /// exchange, pass-through). `None` for the gateway's own requests (`tools/list`).
    pub caller: Option<Arc<crate::identity::Caller>>,
}

impl UpstreamRequest {
    /// A gateway-internal request (e.g. `tools/list`): always safe to repeat.
    pub fn new(method: &'static str, params: serde_json::Map<String, Value>) -> Self {
        Self {
            method,
            params: Arc::new(params),
            tool: None,
            param_headers: Vec::new(),
            safe_to_repeat: true,
            deadline: None,
            attempt_timeout: None,
            attempts: Arc::default(),
            maybe_delivered: Arc::default(),
            progress: None,
            logs: None,
            relay: None,
            ask: None,
            outbound: outbound::Outbound::default(),
            caller: None,
        }
    }

    /// Whether any attempt of this request may have reached the server.
    pub fn maybe_delivered(&self) -> bool {
        self.maybe_delivered.load(Ordering::Relaxed)
    }

    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// The changes to this request's `_meta` when it is sent with JSON-RPC id `id` in `era`
    /// (the gateway's progress token, the modern era's log level, the attempt's trace
    /// context), and the relay of the notifications it wants, if any
    /// ([`ProgressRelay::outbound`]).
    pub fn notifications_relay(&self, id: u64, era: Era) -> (MetaPatch, Option<ProgressRelay>) {
        let (mut patch, relay) =
            ProgressRelay::outbound(&self.params, self.progress.as_ref(), self.logs.as_ref(), id, era);
        self.outbound.stamp_meta(&mut patch);
        (patch, relay)
    }

    /// The changes to this request's `_meta` on a transport that relays no notifications:
    /// the attempt's trace context.
    pub fn trace_patch(&self) -> MetaPatch {
        let mut patch = MetaPatch::default();
        self.outbound.stamp_meta(&mut patch);
        patch
    }

    /// Time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// The upstream's JSON-RPC answer: its `result` kept as raw bytes, or its `error`.
#[derive(Debug)]
pub enum UpstreamReply {
    Result(RawResult),
    Error(ErrorObject),
}

/// An upstream `result`, kept as the bytes it came in. Whether it is a failed tool call
/// (`isError: true`) is read from those bytes once, when first asked: the retry layer, the
/// breaker and the call all ask, and a large result is scanned once, not three times.
#[derive(Debug)]
pub struct RawResult {
    raw: Box<RawValue>,
    tool_error: std::sync::OnceLock<bool>,
}

impl RawResult {
    pub fn new(raw: Box<RawValue>) -> Self {
        Self { raw, tool_error: std::sync::OnceLock::new() }
    }

    /// The result's JSON text.
    pub fn get(&self) -> &str {
        self.raw.get()
    }

    pub fn into_raw(self) -> Box<RawValue> {
        self.raw
    }

    /// Whether the result says `isError: true` (only `isError` is read). The result is parsed
    /// for it only when its text could say so: `"isError"` followed by `: true`, or a `\u`
    /// escape that could spell the key. Most results (`"isError": false`, or none) are
    /// answered after a byte search instead of a second parse.
    pub fn is_tool_error(&self) -> bool {
        *self.tool_error.get_or_init(|| {
            let text = self.raw.get();
            if !may_say_true(text, &IS_ERROR_KEY) && UNICODE_ESCAPE.find(text.as_bytes()).is_none() {
                return false;
            }
            serde_json::from_str::<crate::protocol::jsonrpc::CallResultProbe>(text)
                .is_ok_and(|probe| probe.is_error)
        })
    }
}

/// The searchers of [`RawResult::is_tool_error`], built once: building one costs more than
/// searching a typical result with it.
static IS_ERROR_KEY: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\"isError\""));
static UNICODE_ESCAPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\\u"));

/// Whether `key` appears in `text` followed by `:` and `true` (JSON whitespace allowed around
/// the colon): a necessary condition for that key being `true` anywhere in the JSON text.
fn may_say_true(text: &str, key: &memchr::memmem::Finder<'_>) -> bool {
    let ws: &[char] = &[' ', '\t', '\n', '\r'];
    key.find_iter(text.as_bytes()).any(|at| {
        text[at + key.needle().len()..]
            .trim_start_matches(ws)
            .strip_prefix(':')
            .is_some_and(|value| value.trim_start_matches(ws).starts_with("true"))
    })
}

/// A relayed request the caller did not answer ends the call as the caller's doing.
impl From<Unanswered> for UpstreamError {
    fn from(unanswered: Unanswered) -> Self {
        match unanswered {
            Unanswered::NotDeclared(method) => {
                UpstreamError::Protocol(format!("the client did not declare the capability {method} needs"))
            }
            Unanswered::Silent(method) => UpstreamError::CallerDidNotAnswer(method),
        }
    }
}

impl UpstreamError {
    /// Whether the request provably never left the gateway (so repeating it, or calling
    /// another tool instead, cannot repeat a side effect).
    pub fn never_sent(&self) -> bool {
        matches!(
            self,
            UpstreamError::Connect(_)
                | UpstreamError::CircuitOpen { .. }
                | UpstreamError::Overloaded { .. }
                | UpstreamError::HeldFull { .. }
                | UpstreamError::PayloadTooLarge { .. }
                | UpstreamError::BadArguments(_)
                | UpstreamError::NotConnected { .. }
                | UpstreamError::Credentials { .. }
        )
    }

    /// The `status` label of `mcp_gateway_upstream_requests_total` for this failure.
    pub fn status_label(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "connect_error",
            UpstreamError::Io(_) => "io_error",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::Status { status } => status_class(*status),
            UpstreamError::RateLimited { .. } => "429",
            UpstreamError::FunctionError { kind: FunctionErrorKind::Unhandled, .. } => {
                "function_error_unhandled"
            }
            UpstreamError::FunctionError { kind: FunctionErrorKind::Handled, .. } => "function_error_handled",
            UpstreamError::NotFound(_) => "404",
            UpstreamError::PayloadTooLarge { .. } => "payload_too_large",
            UpstreamError::BadArguments(_) => "bad_arguments",
            UpstreamError::ResponseTooLarge { .. } => "response_too_large",
            UpstreamError::Protocol(_) => "protocol_error",
            UpstreamError::Unauthorized { status } => status_class(*status),
            UpstreamError::NotConnected { .. } => "not_connected",
            UpstreamError::CircuitOpen { .. } => "circuit_open",
            UpstreamError::Overloaded { .. } => "overloaded",
            UpstreamError::HeldFull { .. } => "held_full",
            UpstreamError::DeadlineExceeded(_) => "deadline_exceeded",
            UpstreamError::CallerDidNotAnswer(_) => "caller_did_not_answer",
            UpstreamError::Credentials { .. } => "no_credentials",
        }
    }
}

fn status_class(status: u16) -> &'static str {
    match status {
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        402..=499 => "4xx",
        501 | 505..=599 => "5xx",
        _ => "other",
    }
}

/// What every upstream service and layer returns.
pub type UpstreamFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<UpstreamReply, UpstreamError>> + Send>>;

/// The type-erased per-server service every caller uses.
pub type UpstreamService = BoxCloneSyncService<UpstreamRequest, UpstreamReply, UpstreamError>;

/// Parses a `Retry-After` header value given in seconds (HTTP-dates are ignored).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    // Infinity, NaN and negatives are no answer; the rest is capped at an hour (`crate::clock`).
    if !secs.is_finite() {
        return None;
    }
    crate::clock::secs_f64(secs).map(|wait| wait.min(Duration::from_secs(3600)))
}

/// Decodes one JSON-RPC response body into a reply.
pub fn decode_reply(body: &[u8]) -> Result<UpstreamReply, UpstreamError> {
    // Checked as UTF-8 once, so serde_json does not re-check each string and the raw result.
    let text = std::str::from_utf8(body).map_err(|e| {
        UpstreamError::Protocol(format!(
            "invalid JSON-RPC response: invalid UTF-8 at byte {}",
            e.valid_up_to()
        ))
    })?;
    let response: crate::protocol::jsonrpc::UpstreamResponse = serde_json::from_str(text)
        .map_err(|e| UpstreamError::Protocol(format!("invalid JSON-RPC response: {e}")))?;
    reply_from(response)
}

pub(crate) fn reply_from(
    response: crate::protocol::jsonrpc::UpstreamResponse,
) -> Result<UpstreamReply, UpstreamError> {
    match (response.result, response.error) {
        (_, Some(error)) => Ok(UpstreamReply::Error(error)),
        (Some(result), None) => Ok(UpstreamReply::Result(RawResult::new(result))),
        (None, None) => Err(UpstreamError::Protocol("response has neither result nor error".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says_error(text: &str) -> bool {
        RawResult::new(RawValue::from_string(text.to_string()).expect("JSON")).is_tool_error()
    }

    #[test]
    fn a_reply_that_is_not_utf8_is_a_protocol_error() {
        let mut body = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#.to_vec();
        body.push(0xff);
        body.extend_from_slice(br#""}]}}"#);
        assert!(matches!(decode_reply(&body), Err(UpstreamError::Protocol(m)) if m.contains("UTF-8")));
        let fine = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\u{30ef}\"}]}}";
        assert!(
            matches!(decode_reply(fine.as_bytes()), Ok(UpstreamReply::Result(r)) if r.get().contains('\u{30ef}'))
        );
    }

    #[test]
    fn a_tool_error_is_read_from_is_error_however_it_is_spelled() {
        assert!(says_error(r#"{"content":[],"isError":true}"#));
        assert!(says_error(r#"{"content":[],"is\u0045rror":true}"#), "an escaped key is the same key");
        assert!(!says_error(r#"{"content":[],"isError":false}"#));
        assert!(!says_error(r#"{"content":[{"type":"text","text":"no isError here"}]}"#));
        assert!(!says_error(r#"{"content":[{"type":"text","text":"caf\u00e9"}]}"#));
        assert!(!says_error(r#"{"content":[]}"#));
        assert!(says_error("{\"content\":[],\"isError\" :\n\ttrue}"), "whitespace around the colon");
        assert!(
            !says_error(r#"{"content":[{"isError":true}],"isError":false}"#),
            "only the top level counts"
        );
        assert!(!says_error(r#"{"content":[{"type":"text","text":"\"isError\": true"}]}"#));
    }
}
