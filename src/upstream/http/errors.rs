//! How a streamable-HTTP server's statuses and the client's failures become
//! [`UpstreamError`]s, in one place: what was provably never sent (a connect failure), what
//! timed out, what the server refused (credentials, rate limits, a missing endpoint).

use std::time::Duration;

use http::{
    StatusCode,
    header::{HeaderMap, RETRY_AFTER},
};

use super::client::ClientError;
use crate::upstream::{UpstreamError, parse_retry_after};

pub(super) fn status_error(status: StatusCode, headers: &HeaderMap) -> UpstreamError {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            UpstreamError::Unauthorized { status: status.as_u16() }
        }
        StatusCode::TOO_MANY_REQUESTS => UpstreamError::RateLimited {
            retry_after: headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after),
        },
        StatusCode::NOT_FOUND => UpstreamError::NotFound("the MCP endpoint answered 404".into()),
        status => UpstreamError::Status { status: status.as_u16() },
    }
}

pub(crate) fn request_error(error: ClientError) -> UpstreamError {
    // A connect error — refused, TLS refused, or the connect timeout — provably never sent
    // the request.
    if error.is_connect() {
        UpstreamError::Connect(root_cause(&error))
    } else if error.is_timeout() {
        UpstreamError::Timeout(Duration::ZERO)
    } else {
        UpstreamError::Io(root_cause(&error))
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
