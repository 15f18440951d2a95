//! Who is calling: the identity every inbound request carries through the gateway.
//!
//! The listener decides a request's [`Caller`] before any JSON-RPC is read; everything after
//! it (tool policy, quotas, cancellation scope, audit, upstream credentials) asks this one
//! value instead of re-reading headers. Without an identity mechanism configured every caller
//! is [`Caller::anonymous`], which keeps today's behaviour.
//!
//! [`Authenticator`] is the listener's mechanism (`[auth] mode`): anonymous, JWT bearer
//! tokens ([`jwt`], keys from [`jwks`]) or trusted identity headers ([`header`]); a refusal is an
//! [`AuthFailure`], answered with 401 and a pointer to the protected-resource metadata
//! ([`metadata`]) before anything reaches an upstream.

pub mod header;
pub mod jwks;
pub mod jwt;
pub mod metadata;

use std::{net::SocketAddr, sync::Arc};

use axum::http::HeaderMap;

use serde_json::{Map, Value};

/// The caller of one HTTP request, as established by the listener.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The principal: a validated token's `sub`, or the trusted identity header's value.
    /// `None` for an anonymous caller.
    pub subject: Option<Arc<str>>,
    /// A validated token's claims (empty for anonymous and header-identified callers).
    pub claims: Map<String, Value>,
    /// OAuth scopes (the token's `scope`/`scp`), for policy.
    pub scopes: Vec<String>,
    /// Groups (the token's `groups` claim, or a trusted groups header), for policy.
    pub groups: Vec<String>,
    /// The caller's own bearer token, kept only for token exchange and configured
    /// pass-through. Never logged, never put in an error.
    pub token: Option<Arc<str>>,
    /// When the caller's token expires (its validated `exp`, seconds since the Unix epoch).
    /// Kept apart from `claims` (policy does not read it) for what is derived from the token:
    /// an exchanged upstream token is never used past it.
    pub expires_at: Option<u64>,
    /// The TCP peer the request came from (`None` when unknown, e.g. in unit tests).
    pub peer: Option<SocketAddr>,
    /// The endpoint the request came through (`/mcp/NAME`; `None`: the plain `/mcp`). Not
    /// identity, but part of every decision made for the request: what the caller sees and
    /// may call (`gateway/endpoints.rs`), what the policy reads (`context.endpoint`), and which
    /// gateway sessions it may present (`ownership::OpenedBy`).
    pub endpoint: Option<Arc<str>>,
}

impl Caller {
    /// A caller with no identity (the default listener).
    pub fn anonymous(peer: Option<SocketAddr>) -> Self {
        Self { peer, ..Self::default() }
    }

    /// This caller, coming through `endpoint`.
    pub fn at_endpoint(&self, endpoint: Option<Arc<str>>) -> Self {
        Self { endpoint, ..self.clone() }
    }

    /// The endpoint's name, `""` for the plain `/mcp` (what the policy's `context.endpoint`
    /// holds).
    pub fn endpoint_name(&self) -> &str {
        self.endpoint.as_deref().unwrap_or_default()
    }

    /// The subject, or `"anonymous"`: what audit lines and policy read.
    pub fn subject_or_anonymous(&self) -> &str {
        self.subject.as_deref().unwrap_or("anonymous")
    }
}

/// Why a request's identity was refused (answered 401).
#[derive(Debug, Clone)]
pub struct AuthFailure {
    /// Whether the request carried credentials (then the challenge says `invalid_token`).
    pub token_given: bool,
    /// Bounded metric label: `missing_token`, `expired`, `wrong_issuer`, `wrong_audience`, …
    pub reason: &'static str,
    /// For the error message and the log (never the token itself).
    pub detail: String,
}

impl AuthFailure {
    /// Credentials were given and are not valid.
    pub fn invalid(reason: &'static str, detail: String) -> Self {
        Self { token_given: true, reason, detail }
    }
}

/// The listener's way of establishing callers (`[auth] mode`).
pub enum Authenticator {
    /// Everyone is anonymous.
    Anonymous,
    Jwt(Box<jwt::JwtVerifier>),
    Header(header::HeaderIdentity),
}

impl Authenticator {
    pub async fn from_config(config: &crate::config::AuthConfig) -> anyhow::Result<Self> {
        use crate::config::AuthMode;
        Ok(match config.mode {
            AuthMode::None => Authenticator::Anonymous,
            AuthMode::Jwt => Authenticator::Jwt(Box::new(jwt::JwtVerifier::new(config).await?)),
            AuthMode::Header => Authenticator::Header(header::HeaderIdentity::new(config)?),
        })
    }

    /// The caller of a request with these headers, from `peer`.
    pub async fn caller(
        &self,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<Arc<Caller>, AuthFailure> {
        match self {
            Authenticator::Anonymous => Ok(Arc::new(Caller::anonymous(peer))),
            Authenticator::Header(identity) => Ok(Arc::new(Caller { peer, ..identity.caller(headers)? })),
            Authenticator::Jwt(verifier) => {
                let token = bearer_token(headers)?;
                let verified = verifier.verify(token).await?;
                Ok(Arc::new(Caller { peer, ..Caller::clone(&verified) }))
            }
        }
    }
}

/// The token of `Authorization: Bearer <token>`.
fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthFailure> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Err(AuthFailure {
            token_given: false,
            reason: "missing_token",
            detail: "no Authorization: Bearer token".into(),
        });
    };
    let text = value
        .to_str()
        .map_err(|_| AuthFailure::invalid("malformed", "the Authorization header is not text".into()))?;
    match text.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Ok(token.trim())
        }
        _ => Err(AuthFailure::invalid("malformed", "the Authorization header is not a Bearer token".into())),
    }
}
