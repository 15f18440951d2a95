//! Every request to a streamable-HTTP server is built here, in one place ([`Inner::build`]):
//! the static headers, the call's credentials (a bearer token, or a SigV4 signer that signs the
//! request as it leaves), content negotiation, then the era's headers. Modern-era `tools/call`
//! requests mirror the arguments the tool's `inputSchema` marks with `x-mcp-header` into
//! `Mcp-Param-{Name}` headers ([`UpstreamRequest::param_headers`]); session-era requests carry
//! the negotiated version and the session id.
//!
//! [`UpstreamRequest::param_headers`]: crate::upstream::UpstreamRequest::param_headers

use std::time::Duration;

use http::{
    Method,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
};

use super::{CALL_CREDENTIALS, Inner, LegacySession, client::RequestBuilder};
use crate::{
    protocol::{
        mcp::{self, headers},
        param_headers,
    },
    upstream::{credentials::Applied, outbound::Outbound},
};

/// The era-specific headers of one request (see [`Inner::build`]).
pub(super) enum Headers<'a> {
    /// A modern request: version, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
    Modern { method: &'static str, tool: Option<&'a str>, params: &'a [(String, String)] },
    /// `initialize`: no version header, no session yet.
    Handshake,
    /// A session-era request: the negotiated version (2025-06-18 on) and the session id.
    Legacy(&'a LegacySession),
    /// A reconnection `GET` of a session-era stream, resuming after the given event id.
    Resume(&'a LegacySession, &'a str),
}

impl Inner {
    /// Builds every request to the server: the static headers (credentials), content
    /// negotiation, then the era's headers.
    pub(super) fn build(&self, method: Method, era: Headers<'_>) -> RequestBuilder {
        // Sized once for the static headers and the era's (no regrowth on the way).
        let mut map = HeaderMap::with_capacity(self.headers.len() + 8);
        for (name, value) in &self.headers {
            map.append(name.clone(), value.clone());
        }
        let applied = match &self.credentials {
            None => None,
            Some(_) => CALL_CREDENTIALS.try_with(Applied::clone).ok(),
        };
        let mut signer = None;
        match applied {
            Some(Applied::Bearer(value)) => {
                map.insert(AUTHORIZATION, value);
            }
            Some(Applied::Signed(sign)) => signer = Some(sign),
            None => {}
        }
        if method == Method::POST {
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let accept = if method == Method::GET { "text/event-stream" } else { headers::ACCEPT_BOTH };
        map.insert(ACCEPT, HeaderValue::from_static(accept));
        let mut builder = self.client.request(method, self.url.clone()).headers(map);
        if let Some(signer) = signer {
            builder = builder.signed_by(signer);
        }
        match era {
            Headers::Modern { method, tool, params } => {
                builder = builder
                    .typed_header(
                        headers::names::PROTOCOL_VERSION,
                        HeaderValue::from_static(mcp::MODERN_VERSION),
                    )
                    .typed_header(headers::names::METHOD, HeaderValue::from_static(method));
                if let Some(tool) = tool {
                    // The spec's value encoding, sentinel-looking names included.
                    builder = builder.header(headers::names::NAME, param_headers::encode(tool));
                }
                for (name, value) in params {
                    builder = builder.header(format!("{}{name}", param_headers::PREFIX), value);
                }
            }
            Headers::Handshake => {}
            Headers::Legacy(session) => builder = legacy_headers(builder, session),
            Headers::Resume(session, last_event_id) => {
                builder = legacy_headers(builder, session).header("last-event-id", last_event_id);
            }
        }
        builder
    }
}

/// The attempt's trace context (also in `_meta`) and the caller's request id, as headers. A
/// value that cannot be a header value is left out rather than failing the call.
pub(super) fn with_outbound(mut builder: RequestBuilder, outbound: &Outbound) -> RequestBuilder {
    for (name, value) in outbound.headers() {
        if let Ok(value) = HeaderValue::from_str(value) {
            builder = builder.typed_header(HeaderName::from_static(name), value);
        }
    }
    builder
}

fn legacy_headers(builder: RequestBuilder, session: &LegacySession) -> RequestBuilder {
    let mut builder = builder;
    // The header exists from 2025-06-18 on.
    if session.version >= "2025-06-18" {
        builder =
            builder.typed_header(headers::names::PROTOCOL_VERSION, HeaderValue::from_static(session.version));
    }
    if let Some(id) = &session.session_id {
        builder = builder.typed_header(headers::names::SESSION_ID, id.clone());
    }
    builder
}

/// Sends `notifications/cancelled` for a session-era request dropped before its answer. The
/// notification is built only then: the common case, an answered call, builds nothing.
pub(super) struct CancelOnDrop<'a> {
    /// The session and id of the request; `None` once the answer came (or modern era).
    pub(super) pending: Option<(&'a Inner, &'a LegacySession, u64)>,
}

impl CancelOnDrop<'_> {
    pub(super) fn disarm(&mut self) {
        self.pending = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some((inner, session, id)) = self.pending.take() else {
            return;
        };
        let params = serde_json::json!({"requestId": id, "reason": "cancelled by the gateway (deadline or caller gone)"});
        let request = inner
            .build(Method::POST, Headers::Legacy(session))
            .timeout(Duration::from_secs(2))
            .body(mcp::encode_notification("notifications/cancelled", Some(params)));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = request.send().await;
            });
        }
    }
}
