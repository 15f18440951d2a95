//! Who is calling: the identity every inbound request carries through the gateway.
//!
//! The listener decides a request's [`Caller`] before any JSON-RPC is read; everything after
//! it (tool policy, quotas, cancellation scope, audit, upstream credentials) asks this one
//! value instead of re-reading headers. Without an identity mechanism configured every caller
//! is [`Caller::anonymous`], which keeps today's behaviour.

use std::{net::SocketAddr, sync::Arc};

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
    /// The TCP peer the request came from (`None` when unknown, e.g. in unit tests).
    pub peer: Option<SocketAddr>,
}

impl Caller {
    /// A caller with no identity (the default listener).
    pub fn anonymous(peer: Option<SocketAddr>) -> Self {
        Self { peer, ..Self::default() }
    }

    /// The subject, or `"anonymous"`: what audit lines and policy read.
    pub fn subject_or_anonymous(&self) -> &str {
        self.subject.as_deref().unwrap_or("anonymous")
    }
}
