//! Upstream credentials: what the gateway adds to a request so that a server accepts it,
//! beyond static `headers` (`[servers.NAME.auth]`, see docs/upstream-credentials.md).
//!
//! Four kinds, one question each call asks before anything is sent — [`Credentials::for_call`]:
//! - **client credentials**: the gateway's own OAuth token for the server, cached and renewed
//!   before it expires, one token request at a time ([`oauth`]);
//! - **token exchange** (RFC 8693): the caller's validated token exchanged for one issued to
//!   the server on the caller's behalf, cached per (caller token, server) until it expires;
//! - **SigV4**: the request signed with the gateway's AWS credentials (the SDK's own chain and
//!   signer) right before it leaves, over its final headers and body ([`sigv4`]);
//! - **pass-through**: the caller's own bearer token, unchanged, only where configured.
//!
//! A call whose credentials cannot be had fails with [`UpstreamError::Credentials`] and sends
//! nothing: a call that needs the caller's token and has none is never sent anonymously. A
//! server without `auth` has no `Credentials` at all, so it pays nothing per call.
//!
//! Tokens and secrets are never logged: a bearer header value is marked sensitive, the caller's
//! token is keyed by its SHA-256, and errors carry OAuth error codes, never descriptions.

pub mod oauth;
pub mod sigv4;

use std::sync::Arc;

use http::HeaderValue;
use prometheus::IntCounterVec;

use super::{CredentialFailure, UpstreamError, http::client::SignRequest};
use crate::{
    config::{AuthKind, Config, UpstreamAuthConfig},
    identity::Caller,
};

/// The credentials of one server.
#[derive(Clone)]
pub struct Credentials {
    kind: AuthKind,
    source: Source,
    server: Arc<str>,
    metrics: CredentialMetrics,
}

/// Names the kind and server only: nothing secret.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("kind", &self.kind).field("server", &self.server).finish()
    }
}

#[derive(Clone)]
enum Source {
    OAuth(Arc<oauth::TokenSource>),
    SigV4(Arc<sigv4::Signer>),
    Passthrough,
}

/// What one call's requests carry.
#[derive(Clone)]
pub enum Applied {
    /// An `Authorization` header value (marked sensitive).
    Bearer(HeaderValue),
    /// Sign every request just before it is sent.
    Signed(Arc<dyn SignRequest>),
}

/// The metric families credentials report to (labels: server names and fixed words only).
#[derive(Clone)]
pub struct CredentialMetrics {
    /// `mcp_gateway_upstream_token_fetches_total{server,kind,outcome}`.
    pub fetches: IntCounterVec,
    /// `mcp_gateway_upstream_auth_retries_total{server}`.
    pub retries: IntCounterVec,
}

impl CredentialMetrics {
    pub(crate) fn fetch(&self, server: &str, kind: &str, outcome: &str) {
        self.fetches.with_label_values(&[server, kind, outcome]).inc();
    }
}

impl Credentials {
    /// The credentials `auth` describes for server `name`. Nothing is fetched yet: the first
    /// call asks for the first token (or AWS credentials).
    pub fn new(
        name: &str,
        auth: &UpstreamAuthConfig,
        config: &Config,
        connect_timeout: std::time::Duration,
        metrics: CredentialMetrics,
    ) -> anyhow::Result<Self> {
        let server: Arc<str> = name.into();
        let source = match auth.kind {
            AuthKind::ClientCredentials | AuthKind::TokenExchange => Source::OAuth(Arc::new(
                oauth::TokenSource::new(server.clone(), auth.clone(), connect_timeout, metrics.clone())?,
            )),
            AuthKind::Sigv4 => Source::SigV4(Arc::new(sigv4::Signer::new(
                server.clone(),
                auth,
                &config.aws,
                metrics.clone(),
            ))),
            AuthKind::Passthrough => Source::Passthrough,
        };
        for outcome in ["success", "refused", "unavailable"] {
            let kind = match auth.kind {
                AuthKind::Passthrough => break,
                kind => kind.as_str(),
            };
            metrics.fetches.with_label_values(&[name, kind, outcome]);
            if auth.kind == AuthKind::TokenExchange && auth.discovery_with_client_credentials {
                metrics.fetches.with_label_values(&[name, AuthKind::ClientCredentials.as_str(), outcome]);
            }
        }
        metrics.retries.with_label_values(&[name]);
        Ok(Self { kind: auth.kind, source, server, metrics })
    }

    pub fn kind(&self) -> AuthKind {
        self.kind
    }

    /// What the requests of one call carry. `caller` is `None` for the gateway's own requests
    /// (`tools/list`).
    pub async fn for_call(&self, caller: Option<&Caller>) -> Result<Applied, UpstreamError> {
        match &self.source {
            Source::OAuth(tokens) => tokens.bearer(caller).await.map(Applied::Bearer),
            Source::SigV4(signer) => {
                signer.signing().await.map(|s| Applied::Signed(s as Arc<dyn SignRequest>))
            }
            Source::Passthrough => {
                let token = caller.and_then(|c| c.token.as_deref()).ok_or_else(|| {
                    no_caller_token("this server takes the caller's own token (auth kind \"passthrough\")")
                })?;
                bearer_header(token).map(Applied::Bearer)
            }
        }
    }

    /// Whether a 401 from the server is worth one renewal and one more try: the token may
    /// have been revoked or rotated before its stated expiry. A SigV4 signature or a caller's
    /// own token would only be refused again.
    pub fn renews_on_401(&self) -> bool {
        matches!(self.source, Source::OAuth(_))
    }

    /// The server refused `used` with a 401: forget it (unless a newer one replaced it
    /// meanwhile), so the next [`Credentials::for_call`] fetches a fresh token.
    pub fn refused(&self, caller: Option<&Caller>, used: &Applied) {
        if let (Source::OAuth(tokens), Applied::Bearer(value)) = (&self.source, used) {
            tokens.forget(caller, value);
            self.metrics.retries.with_label_values(&[&self.server]).inc();
        }
    }
}

/// `Bearer <token>`, marked sensitive (never printed by `Debug`, compressed by HPACK never).
pub(crate) fn bearer_header(token: &str) -> Result<HeaderValue, UpstreamError> {
    let mut value =
        HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| UpstreamError::Credentials {
            failure: CredentialFailure::Unavailable,
            detail: "the token is not a valid header value".into(),
        })?;
    value.set_sensitive(true);
    Ok(value)
}

pub(crate) fn no_caller_token(detail: &str) -> UpstreamError {
    UpstreamError::Credentials { failure: CredentialFailure::NoCallerToken, detail: detail.into() }
}
