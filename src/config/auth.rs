//! Caller identity (`[auth]`) and tool policy (`[policy]`) settings, with documented defaults.
//!
//! Both are off by default: every caller is anonymous and may list and call every tool, as
//! before identity existed. `docs/identity-and-policy.md` explains each key.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::lenient;

/// How the listener identifies its callers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every caller is anonymous (today's behaviour).
    #[default]
    None,
    /// `Authorization: Bearer <JWT>`, checked against the issuer's JWKS.
    Jwt,
    /// Identity headers set by a trusted orchestrator (`subject_header`, …).
    Header,
}

/// `[auth]`: who is calling.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// jwt: the expected `iss` (required), also the authorization server named in the
    /// protected-resource metadata.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub issuer: Option<String>,
    /// jwt: accepted `aud` values, a string or a list (required: a token minted for another
    /// service must not be accepted here).
    #[serde(deserialize_with = "lenient::one_or_more_strings")]
    pub audience: Vec<String>,
    /// jwt: where the issuer's signing keys are published (one of `jwks_url`, `jwks_file`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub jwks_url: Option<String>,
    /// jwt: a JWKS file (read at start and every `jwks_refresh_secs`).
    pub jwks_file: Option<PathBuf>,
    /// jwt: the key set is read again this often, in seconds; a token naming an unknown `kid`
    /// also reads it again, at most once per `jwks_min_refetch_secs`.
    pub jwks_refresh_secs: u64,
    /// jwt: least time between the starts of two reads of the key set, in seconds, whether
    /// the earlier read succeeded, failed or still hangs (unknown-`kid` tokens cannot make the
    /// gateway hammer the issuer).
    pub jwks_min_refetch_secs: u64,
    /// jwt: the most bytes of a JWKS document read; a larger one fails the read and the
    /// previous key set stays.
    pub jwks_max_bytes: usize,
    /// jwt: bound on one whole read of `jwks_url` (connect, headers and body), in milliseconds.
    pub jwks_timeout_ms: u64,
    /// jwt: allowed clock skew for `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// jwt: accepted signature algorithms (asymmetric only: RS*, PS*, ES256, ES384, EdDSA).
    #[serde(deserialize_with = "lenient::strings")]
    pub algorithms: Vec<String>,
    /// jwt: the claim holding the scopes: a space-separated string (`scope`) or an array
    /// (`scp`); either shape is read from whichever claim is named.
    #[serde(deserialize_with = "lenient::string")]
    pub scope_claim: String,
    /// jwt: the claim holding the caller's groups (an array of strings, or one string).
    #[serde(deserialize_with = "lenient::string")]
    pub groups_claim: String,
    /// jwt: most verified tokens remembered (a repeat is a hash probe, not a signature check).
    pub token_cache_entries: usize,
    /// jwt: a verified token is remembered until its `exp` or this many seconds, whichever
    /// comes first.
    pub token_cache_secs: u64,
    /// header: the header naming the caller (required in header mode).
    #[serde(deserialize_with = "lenient::string")]
    pub subject_header: String,
    /// header: a header with the caller's groups (comma- or space-separated).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub groups_header: Option<String>,
    /// header: a header with the caller's scopes (comma- or space-separated).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub scopes_header: Option<String>,
    /// header: trust identity headers on a non-loopback listener (only when a proxy in front
    /// of the gateway always sets them and strips callers' own).
    pub trust_identity_header: bool,
    /// The protected resource's identifier in its metadata (RFC 9728); default
    /// `http://<Host of the request>/mcp`.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub resource: Option<String>,
    /// Scopes listed in the protected-resource metadata (`scopes_supported`); empty: omitted.
    #[serde(deserialize_with = "lenient::strings")]
    pub scopes_supported: Vec<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            mode: AuthMode::None,
            issuer: None,
            audience: Vec::new(),
            jwks_url: None,
            jwks_file: None,
            jwks_refresh_secs: 300,
            jwks_min_refetch_secs: 10,
            jwks_max_bytes: DEFAULT_JWKS_MAX_BYTES,
            jwks_timeout_ms: 5_000,
            leeway_secs: 60,
            algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
            scope_claim: "scope".into(),
            groups_claim: "groups".into(),
            token_cache_entries: 10_000,
            token_cache_secs: 300,
            subject_header: "x-caller-subject".into(),
            groups_header: None,
            scopes_header: None,
            trust_identity_header: false,
            resource: None,
            scopes_supported: Vec::new(),
        }
    }
}

/// The default of `jwks_max_bytes`: a JWKS of a few dozen RSA keys is under 20 KiB.
pub const DEFAULT_JWKS_MAX_BYTES: usize = 256 * 1024;

/// The algorithms `algorithms` may name: asymmetric ones only (a shared secret would let
/// anyone holding the JWKS mint tokens).
pub const ASYMMETRIC_ALGORITHMS: &[&str] =
    &["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];

impl AuthConfig {
    /// Checks the keys the mode needs; `listen` decides whether header mode is allowed.
    pub fn validate(&self, listen: SocketAddr) -> anyhow::Result<()> {
        match self.mode {
            AuthMode::None => {}
            AuthMode::Jwt => {
                if self.issuer.as_deref().is_none_or(|i| i.trim().is_empty()) {
                    bail!("auth: mode = \"jwt\" needs `issuer`");
                }
                if self.audience.iter().all(|a| a.trim().is_empty()) {
                    bail!(
                        "auth: mode = \"jwt\" needs `audience` (the value this gateway's tokens carry in `aud`)"
                    );
                }
                match (&self.jwks_url, &self.jwks_file) {
                    (None, None) => bail!("auth: mode = \"jwt\" needs `jwks_url` or `jwks_file`"),
                    (Some(_), Some(_)) => bail!("auth: set one of `jwks_url` and `jwks_file`, not both"),
                    _ => {}
                }
                if self.jwks_max_bytes == 0 {
                    bail!("auth: jwks_max_bytes must be positive");
                }
                if self.jwks_timeout_ms == 0 {
                    bail!("auth: jwks_timeout_ms must be positive");
                }
                if self.algorithms.is_empty() {
                    bail!("auth: `algorithms` must name at least one algorithm");
                }
                for algorithm in &self.algorithms {
                    if !ASYMMETRIC_ALGORITHMS.contains(&algorithm.as_str()) {
                        bail!(
                            "auth: algorithm {algorithm:?} is not accepted (one of {})",
                            ASYMMETRIC_ALGORITHMS.join(", ")
                        );
                    }
                }
                if self.token_cache_secs == 0 && self.token_cache_entries > 0 {
                    bail!("auth: token_cache_secs must be positive (or token_cache_entries = 0)");
                }
            }
            AuthMode::Header => {
                if self.subject_header.trim().is_empty() {
                    bail!("auth: mode = \"header\" needs `subject_header`");
                }
                for name in
                    [Some(&self.subject_header), self.groups_header.as_ref(), self.scopes_header.as_ref()]
                        .into_iter()
                        .flatten()
                {
                    if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        bail!("auth: {name:?} is not a valid header name");
                    }
                }
                if !listen.ip().is_loopback() && !self.trust_identity_header {
                    bail!(
                        "auth: mode = \"header\" on the non-loopback listener {listen} would let any caller claim any identity; set `trust_identity_header = true` only when a proxy in front of the gateway sets these headers and strips callers' own"
                    );
                }
            }
        }
        Ok(())
    }
}

/// `[policy]`: which caller may see and call which tool.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// A Cedar policy file; unset: every caller may list and call every tool.
    pub file: Option<PathBuf>,
    /// How often the file's modification time is checked, in seconds (0: never reloaded).
    pub reload_secs: u64,
    /// Most filtered `tools/list` answers kept (one per distinct caller and catalogue).
    pub list_cache_entries: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self { file: None, reload_secs: 5, list_cache_entries: 1_024 }
    }
}
