//! Identity headers set by a trusted orchestrator or proxy: the subject (required), groups
//! and scopes (comma- or space-separated). Only safe where callers cannot set the headers
//! themselves, so configuration refuses the mode on a non-loopback listener unless
//! `trust_identity_header` says a proxy in front strips callers' own.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName};

use super::{AuthFailure, Caller};
use crate::config::AuthConfig;

/// Longest header value taken (longer: refused, not cut).
const MAX_VALUE: usize = 1024;

/// Reads a caller from the configured headers.
pub struct HeaderIdentity {
    subject: HeaderName,
    groups: Option<HeaderName>,
    scopes: Option<HeaderName>,
}

impl HeaderIdentity {
    pub fn new(config: &AuthConfig) -> anyhow::Result<Self> {
        let name = |n: &str| {
            HeaderName::from_bytes(n.as_bytes()).map_err(|e| anyhow::anyhow!("auth: header {n:?}: {e}"))
        };
        Ok(Self {
            subject: name(&config.subject_header)?,
            groups: config.groups_header.as_deref().map(name).transpose()?,
            scopes: config.scopes_header.as_deref().map(name).transpose()?,
        })
    }

    /// The caller the headers name; a missing or unreadable subject is refused.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Caller, AuthFailure> {
        let value = |name: &HeaderName| -> Result<Option<&str>, AuthFailure> {
            match headers.get(name) {
                None => Ok(None),
                Some(v) => match v.to_str() {
                    Ok(text) if text.len() <= MAX_VALUE => Ok(Some(text.trim())),
                    _ => Err(AuthFailure::invalid(
                        "bad_header",
                        format!("header {name} is not readable text of at most {MAX_VALUE} bytes"),
                    )),
                },
            }
        };
        let subject = value(&self.subject)?.filter(|s| !s.is_empty()).ok_or_else(|| AuthFailure {
            token_given: false,
            reason: "missing_identity",
            detail: format!("the {} header naming the caller is missing", self.subject),
        })?;
        let list = |name: &Option<HeaderName>| -> Result<Vec<String>, AuthFailure> {
            let Some(name) = name else { return Ok(Vec::new()) };
            Ok(value(name)?
                .map(|v| v.split([',', ' ']).filter(|s| !s.is_empty()).map(str::to_string).collect())
                .unwrap_or_default())
        };
        Ok(Caller {
            subject: Some(Arc::from(subject)),
            groups: list(&self.groups)?,
            scopes: list(&self.scopes)?,
            ..Caller::default()
        })
    }
}
