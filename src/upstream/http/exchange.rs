//! One POST of a request in the era a streamable-HTTP server was found to speak, and what its
//! status and body say: the server's answer (a JSON-RPC error in a 4xx body included), a
//! failure the caller gets, or a refusal of the era, which makes the call re-probe once
//! ([`super::probe`]). A session-era request dropped before its answer is cancelled by
//! notification ([`super::request::CancelOnDrop`]); a modern-era one by closing its stream.

use std::sync::atomic::Ordering;

use http::{Method, StatusCode};
use serde_json::Value;

use super::{
    Headers, Inner, Spoken,
    answer::{Resume, read_answer},
    body::{ERROR_BODY_PREFIX, read_prefix},
    errors::{request_error, status_error},
    request::{CancelOnDrop, with_outbound},
};
use crate::{
    protocol::{
        jsonrpc::{ErrorObject, UpstreamResponse},
        mcp::{self, Era},
    },
    upstream::{UpstreamError, UpstreamReply, UpstreamRequest, reply_from},
};

/// What one POST produced.
pub(super) enum Exchange {
    Reply(UpstreamReply),
    /// The server refused the era the request was sent in; the error is what the caller gets
    /// if it refuses again after a re-probe.
    Refused(UpstreamError),
}

impl Inner {
    /// One POST of `request` in the era the server was found to speak.
    pub(super) async fn post(
        &self,
        request: &UpstreamRequest,
        spoken: &Spoken,
    ) -> Result<Exchange, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let session = match spoken {
            Spoken::Modern => None,
            Spoken::Legacy(session) => Some(session),
        };
        let (era, sent_version, era_headers) = match session {
            None => (
                Era::Modern,
                mcp::MODERN_VERSION,
                Headers::Modern {
                    method: request.method,
                    tool: request.tool.as_deref(),
                    params: &request.param_headers,
                },
            ),
            Some(session) => (Era::Legacy, session.version, Headers::Legacy(session)),
        };
        let (patch, relay) = request.notifications_relay(id, era);
        let body = mcp::encode_patched_request(id, request.method, &request.params, era, &patch);
        let builder = with_outbound(self.build(Method::POST, era_headers).body(body), &request.outbound);
        // A session-era server learns of a dropped call (deadline, caller gone) by notification;
        // a modern-era call is cancelled by closing its stream, which dropping does.
        let mut cancel = CancelOnDrop { pending: session.map(|session| (self, session, id)) };
        let response = builder.send().await.map_err(request_error)?;
        let status = response.status();
        if status.is_success() {
            let resume = session.map(|session| Resume { inner: self, session, deadline: request.deadline });
            let answer = read_answer(response, id, self.max_response_bytes, resume, relay.as_ref()).await;
            cancel.disarm();
            return match answer? {
                UpstreamReply::Error(e) if refuses(&e, sent_version) => {
                    Ok(Exchange::Refused(UpstreamError::Protocol(format!("{} {}", e.code, e.message))))
                }
                reply => Ok(Exchange::Reply(reply)),
            };
        }
        cancel.disarm();
        let with_session = session.is_some_and(|s| s.session_id.is_some());
        match status {
            // What the caller gets if even a fresh session is refused.
            StatusCode::NOT_FOUND if with_session => Ok(Exchange::Refused(UpstreamError::Protocol(
                "the server refused a fresh session too (HTTP 404 right after a new handshake)".into(),
            ))),
            StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(status_error(status, response.headers()))
            }
            s if s.is_server_error() => Err(status_error(status, response.headers())),
            _ => {
                let failed = status_error(status, response.headers());
                let body = read_prefix(response, ERROR_BODY_PREFIX).await;
                let parsed = serde_json::from_slice::<UpstreamResponse>(&body).ok();
                let error = parsed.as_ref().and_then(|r| r.error.as_ref());
                if status == StatusCode::BAD_REQUEST
                    && session.is_some()
                    && (with_session && complains_about_session(error)
                        || refuses_legacy_version(error, sent_version))
                {
                    // Some servers (the TypeScript SDK's examples) answer an unknown session
                    // with 400 "No valid session ID" instead of 404; a server redeployed
                    // without the session era refuses its version.
                    return Ok(Exchange::Refused(failed));
                }
                let may_be_legacy = matches!(
                    status,
                    StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
                );
                if session.is_none() && may_be_legacy && !is_modern_rejection(parsed.as_ref()) {
                    return Ok(Exchange::Refused(failed));
                }
                // A JSON-RPC error in a 4xx body is the server's answer to the request.
                match parsed.and_then(|p| reply_from(p).ok()) {
                    Some(reply @ UpstreamReply::Error(_)) => Ok(Exchange::Reply(reply)),
                    _ => Err(failed),
                }
            }
        }
    }
}

/// An answer refusing the version the request was sent in (`-32022` not listing it).
pub(super) fn refuses(error: &ErrorObject, sent_version: &str) -> bool {
    mcp::refuses_version(error.code, error.data.as_ref(), sent_version)
}

/// A session-era request refused for its version: `-32022` not listing it, or a
/// session-era SDK's "Unsupported protocol version" (`-32000` from the TypeScript SDK).
fn refuses_legacy_version(error: Option<&ErrorObject>, sent_version: &str) -> bool {
    error.is_some_and(|e| {
        refuses(e, sent_version) || e.message.to_ascii_lowercase().contains("unsupported protocol version")
    })
}

/// A JSON-RPC error whose message is about the session id.
fn complains_about_session(error: Option<&ErrorObject>) -> bool {
    error.is_some_and(|e| e.message.to_ascii_lowercase().contains("session"))
}

/// A modern server refuses a request with one of the revision's own errors: `-32020`
/// (header mismatch), `-32021` (missing client capability), or `-32022` (unsupported version)
/// listing the modern version among those it supports. Anything else in a 400/404/405 means
/// the server predates the modern era.
///
/// A standard JSON-RPC error (`-32601`…`-32603`, `-32700`) in such a status is the modern
/// server's answer to this request (e.g. `-32602` for an unknown tool) and is kept as one;
/// session-era transports refuse a request without a session with `-32000` (TypeScript SDK)
/// or `-32600` (Python SDK 1.x): "Bad Request: No valid session ID".
fn is_modern_rejection(response: Option<&UpstreamResponse>) -> bool {
    let Some(error) = response.and_then(|r| r.error.as_ref()) else {
        return false;
    };
    match error.code {
        -32020 | -32021 | -32603..=-32601 | -32700 => true,
        -32022 => error
            .data
            .as_ref()
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|versions| versions.iter().any(|v| v == mcp::MODERN_VERSION)),
        _ => false,
    }
}
