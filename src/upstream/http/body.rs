//! Bodies of a streamable-HTTP server read within their bounds, never checked after: a JSON
//! body by its `Content-Length` up front and by counting chunks, at the server's
//! `max_response_bytes` ([`UpstreamError::ResponseTooLarge`]); a 4xx body only up to
//! [`ERROR_BODY_PREFIX`] (enough for a JSON-RPC error), a 5xx body not at all. SSE streams are
//! bounded per line and per event by their decoder (see [`super::answer`]).

use std::time::Duration;

use http::header::CONTENT_TYPE;

use super::{client::Response, errors::request_error};
use crate::upstream::UpstreamError;

/// How much of a 4xx body is read for its JSON-RPC error; the rest is never read.
pub const ERROR_BODY_PREFIX: usize = 64 * 1024;

pub(super) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// Reads a whole body of at most `limit` bytes: refused up front by `Content-Length`, else at
/// the chunk that crosses the limit (dropping the response then closes the connection).
/// A body that arrives in one piece (most JSON answers) is kept as it came, not copied.
pub(crate) async fn read_body(mut response: Response, limit: usize) -> Result<bytes::Bytes, UpstreamError> {
    let declared = response.content_length().unwrap_or(0);
    if declared > limit as u64 {
        return Err(UpstreamError::ResponseTooLarge { limit });
    }
    let Some(first) = response.chunk().await.map_err(request_error)? else {
        return Ok(bytes::Bytes::new());
    };
    if first.len() > limit {
        return Err(UpstreamError::ResponseTooLarge { limit });
    }
    let Some(second) = response.chunk().await.map_err(request_error)? else {
        return Ok(first);
    };
    let mut body = Vec::with_capacity((declared as usize).max(first.len() + second.len()));
    body.extend_from_slice(&first);
    let mut next = Some(second);
    while let Some(chunk) = next {
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::ResponseTooLarge { limit });
        }
        if body.len() + chunk.len() > body.capacity() && body.len() > 64 * 1024 {
            // One growth to the cap instead of doubling (see `sse::Decoder::reserve`).
            body.reserve_exact(limit - body.len());
        }
        body.extend_from_slice(&chunk);
        next = response.chunk().await.map_err(request_error)?;
    }
    Ok(body.into())
}

/// The first `limit` bytes of a body (or all of a shorter one); read errors end it early.
pub(super) async fn read_prefix(mut response: Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]),
            _ => break,
        }
    }
    body
}

/// Reads the rest of an answered stream in the background. Servers end a request's stream
/// right after its answer; closing it early instead would look like a client disconnect,
/// which some session-era servers treat as the end of the session, and would cost the
/// pooled connection.
pub(super) fn drain(mut response: Response) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let mut left: usize = 1 << 20;
            while let Ok(Some(chunk)) = response.chunk().await {
                left = left.saturating_sub(chunk.len());
                if left == 0 {
                    break;
                }
            }
        })
        .await;
    });
}
