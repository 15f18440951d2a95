//! The HTTP side of inbound back-channel sessions (the table is [`crate::backchannel::sessions`]):
//! telling a POSTed JSON-RPC response from a request, routing it to the relayed request that
//! waits under its id, and the answers for unknown sessions and ids. A session reaches these
//! only through a lookup bound to the subject that opened it ([`crate::ownership`]): another
//! subject holding the id gets [`unknown_session`], never a relayed request to answer.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

pub use crate::backchannel::sessions::{Lookup, Refusal, wants_back_channel};
use crate::{
    backchannel::CallerSession,
    error::{Category, GatewayError},
    gateway::Gateway,
    protocol::{jsonrpc, mcp},
};

/// Whether `bytes` is one JSON-RPC response (not a request or notification); its id and the
/// message when it is.
pub fn as_response(bytes: &[u8]) -> Option<(String, Value)> {
    let message: Value = serde_json::from_slice(bytes).ok()?;
    let object = message.as_object()?;
    if object.contains_key("method") || !(object.contains_key("result") || object.contains_key("error")) {
        return None;
    }
    let id = match object.get("id")? {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some((id, message))
}

/// Routes the caller's response to its relayed request: `202`, or `400` for an id no request
/// of this session waits under.
pub fn route_response(session: &CallerSession, id: &str, message: Value) -> Response {
    if session.answer(id, message) {
        return StatusCode::ACCEPTED.into_response();
    }
    let shown: String = id.chars().take(80).collect();
    let err = GatewayError::new(
        Category::InvalidRequest,
        format!("no relayed request of this session waits for an answer under id {shown}"),
    )
    .with_extra("reason", json!("unknown_relayed_id"));
    refusal(StatusCode::BAD_REQUEST, &err)
}

/// `404` for an unknown or expired session id of the gateway's, or one another subject opened.
pub fn unknown_session() -> Response {
    let err = GatewayError::new(Category::InvalidRequest, "unknown or expired session; initialize again")
        .with_extra("reason", json!("unknown_session"));
    refusal(StatusCode::NOT_FOUND, &err)
}

/// The answer to an `initialize` that opened no session: `503` (`-32005`, retryable) when the
/// table is full of live sessions, `400` (`-32600`) when what it declared is too large to keep.
pub fn refused(gateway: &Gateway, id: Value, refusal: &Refusal) -> Response {
    let (status, reason, err) = match refusal {
        Refusal::Full { max_sessions } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "sessions_full",
            GatewayError::new(
                Category::Overloaded,
                format!("the gateway holds its most back-channel sessions ({max_sessions}); try again later"),
            )
            .with_limit("inbound.max_sessions", *max_sessions as u64),
        ),
        Refusal::TooLarge { bytes, max_session_bytes } => (
            StatusCode::BAD_REQUEST,
            "session_too_large",
            GatewayError::new(
                Category::InvalidRequest,
                format!(
                    "the declared back-channel capabilities and clientInfo take {bytes} bytes; a session keeps at most {max_session_bytes}"
                ),
            )
            .with_limit("inbound.max_session_bytes", *max_session_bytes as u64),
        ),
    };
    gateway.record_rejection(reason);
    let body = jsonrpc::Response::error(id, &err);
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

/// Adds the session id to the `initialize` answer.
pub fn with_session_id(mut response: Response, session: &CallerSession) -> Response {
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(mcp::headers::SESSION_ID, value);
    }
    response
}

fn refusal(status: StatusCode, err: &GatewayError) -> Response {
    let body = jsonrpc::Response::error(Value::Null, err);
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_told_from_requests() {
        assert_eq!(as_response(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#).map(|r| r.0), Some("x".into()));
        assert_eq!(
            as_response(br#"{"jsonrpc":"2.0","id":7,"error":{"code":1}}"#).map(|r| r.0),
            Some("7".into())
        );
        assert!(as_response(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        assert!(as_response(br#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#).is_none());
    }
}
