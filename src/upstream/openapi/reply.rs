//! An HTTP answer as what the gateway's layers expect of a transport: a 2xx is a tool result
//! (JSON as `structuredContent` plus its text; text as text; images and audio as such; other
//! bytes as an embedded blob); a 4xx the caller can correct is a tool result with `isError`
//! and a bounded excerpt (the model reads it; the breaker counts it as an answer); 401/403,
//! 408, 429, 5xx and redirects are the upstream errors every transport reports, so retry,
//! breaker and the caller's error category treat them as for an MCP server.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json, value::RawValue};

use crate::openapi::mapping::is_json;
use crate::upstream::{RawResult, UpstreamError, UpstreamReply, parse_retry_after};

/// Most bytes of a 4xx body quoted in the tool result.
pub const ERROR_EXCERPT_BYTES: usize = 2048;

/// What arrived.
pub struct Answer<'a> {
    pub status: u16,
    pub content_type: Option<&'a str>,
    pub retry_after: Option<&'a str>,
    pub body: &'a [u8],
}

pub fn map(answer: &Answer<'_>, wrap_result: bool) -> Result<UpstreamReply, UpstreamError> {
    let retry_after = || answer.retry_after.and_then(parse_retry_after);
    match answer.status {
        200..=299 => result(success(answer, wrap_result)),
        401 | 403 => Err(UpstreamError::Unauthorized { status: answer.status }),
        408 => Err(UpstreamError::Timeout(Duration::ZERO)),
        429 => Err(UpstreamError::RateLimited { retry_after: retry_after() }),
        503 if answer.retry_after.is_some() => Err(UpstreamError::RateLimited { retry_after: retry_after() }),
        400..=499 => result(client_error(answer)),
        status => Err(UpstreamError::Status { status }),
    }
}

fn result(value: Value) -> Result<UpstreamReply, UpstreamError> {
    let raw = RawValue::from_string(value.to_string())
        .map_err(|e| UpstreamError::Protocol(format!("result not encoded: {e}")))?;
    Ok(UpstreamReply::Result(RawResult::new(raw)))
}

fn success(answer: &Answer<'_>, wrap_result: bool) -> Value {
    let content_type = answer.content_type.unwrap_or("").to_string();
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if answer.body.is_empty() {
        return json!({"content": [{"type": "text", "text": format!("HTTP {} (no content)", answer.status)}]});
    }
    if is_json(&essence)
        && let Ok(value) = serde_json::from_slice::<Value>(answer.body)
    {
        let text = String::from_utf8_lossy(answer.body).into_owned();
        let structured = match value {
            Value::Object(map) if !wrap_result => Value::Object(map),
            other => json!({"result": other}),
        };
        return json!({"content": [{"type": "text", "text": text}], "structuredContent": structured});
    }
    let blob = || base64::engine::general_purpose::STANDARD.encode(answer.body);
    if essence.starts_with("image/") {
        return json!({"content": [{"type": "image", "data": blob(), "mimeType": essence}]});
    }
    if essence.starts_with("audio/") {
        return json!({"content": [{"type": "audio", "data": blob(), "mimeType": essence}]});
    }
    match std::str::from_utf8(answer.body) {
        Ok(text) => json!({"content": [{"type": "text", "text": text}]}),
        Err(_) => json!({"content": [{
            "type": "resource",
            "resource": {"uri": "openapi:response", "mimeType": if essence.is_empty() { "application/octet-stream" } else { &essence }, "blob": blob()}
        }]}),
    }
}

fn client_error(answer: &Answer<'_>) -> Value {
    let text = String::from_utf8_lossy(answer.body);
    let mut cut = text.len().min(ERROR_EXCERPT_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = if cut < text.len() { " …" } else { "" };
    let reason =
        http::StatusCode::from_u16(answer.status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    json!({
        "content": [{"type": "text", "text": format!("HTTP {} {reason}: {}{more}", answer.status, &text[..cut])}],
        "isError": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer<'a>(status: u16, content_type: Option<&'a str>, body: &'a [u8]) -> Answer<'a> {
        Answer { status, content_type, retry_after: None, body }
    }

    fn result_of(reply: Result<UpstreamReply, UpstreamError>) -> Value {
        match reply {
            Ok(UpstreamReply::Result(raw)) => serde_json::from_str(raw.get()).unwrap(),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn statuses_map_to_results_and_errors() {
        let ok = result_of(map(&answer(200, Some("application/json; charset=utf-8"), br#"{"id":1}"#), false));
        assert_eq!(ok["structuredContent"], json!({"id": 1}));
        assert_eq!(ok["content"][0]["text"], r#"{"id":1}"#);
        let list = result_of(map(&answer(200, Some("application/json"), b"[1,2]"), true));
        assert_eq!(list["structuredContent"], json!({"result": [1, 2]}));
        let text = result_of(map(&answer(200, Some("text/plain"), b"hello"), false));
        assert_eq!(text["content"][0]["text"], "hello");
        assert!(text.get("structuredContent").is_none());
        let missing = map(&answer(404, Some("application/json"), br#"{"detail":"no such product"}"#), false);
        let Ok(UpstreamReply::Result(raw)) = missing else { panic!() };
        assert!(raw.is_tool_error());
        let missing: Value = serde_json::from_str(raw.get()).unwrap();
        assert_eq!(missing["content"][0]["text"], r#"HTTP 404 Not Found: {"detail":"no such product"}"#);
        let long = vec![b'x'; 10_000];
        let cut = result_of(map(&answer(422, None, &long), false));
        assert!(cut["content"][0]["text"].as_str().unwrap().len() < ERROR_EXCERPT_BYTES + 64);
        assert!(matches!(
            map(&answer(401, None, b""), false),
            Err(UpstreamError::Unauthorized { status: 401 })
        ));
        assert!(matches!(
            map(&answer(403, None, b""), false),
            Err(UpstreamError::Unauthorized { status: 403 })
        ));
        assert!(matches!(map(&answer(500, None, b""), false), Err(UpstreamError::Status { status: 500 })));
        assert!(matches!(map(&answer(503, None, b""), false), Err(UpstreamError::Status { status: 503 })));
        assert!(matches!(map(&answer(302, None, b""), false), Err(UpstreamError::Status { status: 302 })));
        assert!(matches!(map(&answer(408, None, b""), false), Err(UpstreamError::Timeout(_))));
        let limited = Answer { status: 503, content_type: None, retry_after: Some("3"), body: b"" };
        assert!(
            matches!(map(&limited, false), Err(UpstreamError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(3))
        );
        let limited = Answer { status: 429, content_type: None, retry_after: None, body: b"" };
        assert!(matches!(map(&limited, false), Err(UpstreamError::RateLimited { retry_after: None })));
    }
}
