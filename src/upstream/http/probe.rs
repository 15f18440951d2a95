//! Which era a streamable-HTTP server speaks, following the 2026-07-28 revision's
//! backward-compatibility rule. The first call to a server of unknown era probes it with
//! `server/discover` (modern shape: `_meta`, `MCP-Protocol-Version`, `Mcp-Method`). Only a
//! result whose `supportedVersions` lists 2026-07-28 makes it modern; any other answer — a
//! JSON-RPC error, a non-JSON-RPC body, a 4xx, a result without that version (what a lenient
//! session-era server answers) — makes the transport run `initialize` →
//! `notifications/initialized`, keep the `Mcp-Session-Id`, and speak the session era. A probe
//! that gets no answer about the era (connect error, timeout, 429, 5xx) fails the call with
//! that error and learns nothing: the next call probes again.
//!
//! The era is remembered per server. When a server later refuses it — a session-era `404`
//! (expired session) or `400` "no valid session", a `-32022` unsupported-version error not
//! listing the version sent, a modern request answered `400`/`404`/`405` without one of the
//! revision's own errors (told apart in [`super::exchange`]) — the transport probes once more
//! and replays the call once; a second refusal fails the call. Probes are serialized per
//! server and counted by a generation, so concurrent refusals re-probe once.

use std::sync::atomic::Ordering;

use http::{Method, StatusCode};
use serde_json::Value;

use super::{
    Headers, Inner, Learned, LegacySession, Spoken,
    answer::read_answer,
    errors::{request_error, status_error},
};
use crate::{
    protocol::{
        jsonrpc::ErrorObject,
        mcp::{self, headers},
    },
    upstream::{UpstreamError, UpstreamReply},
};

/// Why a probe learned nothing.
pub(super) enum ProbeError {
    /// No usable answer (transport failure, refused credentials, a handshake not understood).
    Failed(UpstreamError),
    /// The server answered `initialize` with its own failure: passed on as its answer.
    Answered(ErrorObject),
}

impl From<UpstreamError> for ProbeError {
    fn from(error: UpstreamError) -> Self {
        ProbeError::Failed(error)
    }
}

impl Inner {
    /// Learns the server's era unless another task did since `seen_generation`: `server/discover`,
    /// then `initialize` on any answer that does not show a modern server.
    pub(super) async fn probe(&self, seen_generation: u64) -> Result<(Spoken, u64), ProbeError> {
        let _guard = self.probe.lock().await;
        let current = self.learned();
        if current.generation > seen_generation
            && let Some(spoken) = current.spoken
        {
            return Ok((spoken, current.generation));
        }
        let learned = match self.discover().await {
            Ok(Some(declared)) => Ok((Spoken::Modern, declared)),
            Ok(None) => {
                self.initialize().await.map(|(session, declared)| (Spoken::Legacy(session), declared))
            }
            Err(error) => Err(ProbeError::Failed(error)),
        };
        let generation = current.generation + 1;
        if let Ok(mut era) = self.era.write() {
            *era = match &learned {
                Ok((spoken, declared)) => Learned {
                    spoken: Some(spoken.clone()),
                    generation,
                    list_changed: declared.list_changed,
                    offers: declared.offers,
                },
                // Nothing learned: the next call probes again.
                Err(_) => Learned { spoken: None, generation: current.generation, ..Learned::default() },
            };
        }
        if learned.is_ok() {
            self.learned_generation.send_replace(generation);
        }
        let learned = learned.map(|(spoken, _)| spoken);
        match &learned {
            Ok(Spoken::Modern) => {
                tracing::info!(url = %self.log_url, era = mcp::MODERN_VERSION, "upstream speaks the modern era")
            }
            Ok(Spoken::Legacy(session)) => {
                tracing::info!(url = %self.log_url, version = session.version, session = session.session_id.is_some(), "upstream speaks the session era")
            }
            Err(ProbeError::Failed(error)) => {
                tracing::warn!(url = %self.log_url, error = %crate::redact::shown(error), "era probe failed")
            }
            Err(ProbeError::Answered(error)) => {
                tracing::warn!(url = %self.log_url, code = error.code, message = %crate::redact::text(&error.message), "initialize refused")
            }
        }
        learned.map(|spoken| (spoken, generation))
    }

    /// `server/discover`: `Ok(Some(declared))` only for a result listing the modern version
    /// (with what its capabilities declare); `Ok(None)` for any other answer; `Err` when there
    /// was no answer about the era (connection, timeout, 429, 5xx, an over-limit body) or the
    /// credentials were refused.
    async fn discover(&self) -> Result<Option<Declared>, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .build(Method::POST, Headers::Modern { method: mcp::DISCOVER, tool: None, params: &[] })
            .body(mcp::encode_discover(id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if status.is_success() {
            return match read_answer(response, id, self.max_response_bytes, None, None).await {
                Ok(UpstreamReply::Result(raw)) => Ok(serde_json::from_str::<Value>(raw.get())
                    .ok()
                    .filter(mcp::shows_modern)
                    .map(|result| Declared::of(&result))),
                Ok(UpstreamReply::Error(_)) | Err(UpstreamError::Protocol(_)) => Ok(None),
                Err(error) => Err(error),
            };
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(status_error(status, response.headers()))
            }
            s if s.is_server_error() => Err(status_error(status, response.headers())),
            _ => Ok(None),
        }
    }

    /// Runs the session-era handshake and returns the session (and what the server declared).
    async fn initialize(&self) -> Result<(LegacySession, Declared), ProbeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let response = self
            .build(Method::POST, Headers::Handshake)
            .body(mcp::encode_initialize(id))
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(status, response.headers()).into());
        }
        let session_id = response.headers().get(headers::SESSION_ID).cloned();
        let reply = read_answer(response, id, self.max_response_bytes, None, None).await?;
        let mut declared = Declared::default();
        let version = match &reply {
            UpstreamReply::Result(raw) => serde_json::from_str::<Value>(raw.get()).ok().and_then(|v| {
                declared = Declared::of(&v);
                v.get("protocolVersion").and_then(Value::as_str).map(str::to_string)
            }),
            // The server's own failure (internal error, implementation-defined server errors)
            // is its answer to the call; any other error means the handshake is not understood.
            UpstreamReply::Error(e) if e.code == -32603 || (-32099..=-32000).contains(&e.code) => {
                let message = format!("initialize failed: {}", e.message);
                return Err(ProbeError::Answered(ErrorObject { message, ..e.clone() }));
            }
            UpstreamReply::Error(e) => {
                return Err(
                    UpstreamError::Protocol(format!("initialize failed: {} {}", e.code, e.message)).into()
                );
            }
        };
        let version = legacy_version(version.as_deref()).ok_or_else(|| {
            UpstreamError::Protocol(format!("upstream chose an unsupported protocol version {version:?}"))
        })?;
        let session = LegacySession { session_id, version };
        self.send_initialized(&session).await?;
        Ok((session, declared))
    }

    /// Ends a session-era handshake: `notifications/initialized` under the new session.
    pub(super) async fn send_initialized(&self, session: &LegacySession) -> Result<(), UpstreamError> {
        let notified = self
            .build(Method::POST, Headers::Legacy(session))
            .body(mcp::encode_notification("notifications/initialized", None))
            .send()
            .await
            .map_err(request_error)?;
        if !notified.status().is_success() {
            return Err(status_error(notified.status(), notified.headers()));
        }
        Ok(())
    }
}

/// The session-era version a server chose in `initialize`, if the gateway speaks it.
pub(super) fn legacy_version(chosen: Option<&str>) -> Option<&'static str> {
    mcp::LEGACY_VERSIONS.iter().find(|v| Some(**v) == chosen).copied()
}

/// What an `initialize` or `server/discover` result declares: `capabilities.tools.listChanged`,
/// and the lists besides tools the server offers.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Declared {
    list_changed: bool,
    offers: mcp::Offers,
}

impl Declared {
    fn of(result: &Value) -> Self {
        Declared {
            // A change of any list the gateway reads is a reason to watch for it.
            list_changed: ["tools", "resources", "prompts"].iter().any(|list| {
                result.pointer(&format!("/capabilities/{list}/listChanged")).and_then(Value::as_bool)
                    == Some(true)
            }),
            offers: mcp::Offers::declared(result),
        }
    }
}
