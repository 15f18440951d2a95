//! How the gateway authenticates to one upstream server (`[servers.NAME.auth]`).
//!
//! Static `headers` cover a fixed API key; this table covers credentials that must be
//! obtained, renewed or derived per call: an OAuth 2.0 client-credentials token, an RFC 8693
//! token exchange of the caller's own token, an AWS SigV4 signature, or the caller's token
//! passed through unchanged. Secrets are never written in the configuration itself: a client
//! secret comes from a file (`client_secret_file`, read at every token request so a rotated
//! secret is picked up) or an environment variable (`client_secret_env`), and neither the
//! secret nor any token is logged or printed. The runtime side is `upstream::credentials`.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::lenient;

/// `urn:ietf:params:oauth:token-type:access_token`, the default `requested_token_type`.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Which credential a server gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthKind {
    /// OAuth 2.0 client credentials (RFC 6749 §4.4): one token per server, the gateway's own.
    ClientCredentials,
    /// OAuth 2.0 token exchange (RFC 8693) of the caller's validated token: one token per
    /// (caller token, server), on behalf of the caller.
    TokenExchange,
    /// AWS Signature Version 4 with the gateway's AWS credentials (the SDK's own chain).
    Sigv4,
    /// The caller's own `Authorization: Bearer` token, unchanged. Only for a server the
    /// caller's token was issued for (see docs/upstream-credentials.md).
    Passthrough,
}

impl AuthKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthKind::ClientCredentials => "client_credentials",
            AuthKind::TokenExchange => "token_exchange",
            AuthKind::Sigv4 => "sigv4",
            AuthKind::Passthrough => "passthrough",
        }
    }

    /// Whether the credential depends on the caller (then results are never shared between
    /// callers: no result cache, no joining of identical calls).
    pub fn per_caller(self) -> bool {
        matches!(self, AuthKind::TokenExchange | AuthKind::Passthrough)
    }
}

/// How the gateway authenticates itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuthMethod {
    /// HTTP Basic with the client id and secret (`client_secret_basic`).
    #[default]
    Basic,
    /// `client_id` and `client_secret` in the form body (`client_secret_post`).
    Post,
}

/// `[servers.NAME.auth]`. Keys that do not apply to `kind` are refused.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamAuthConfig {
    pub kind: AuthKind,
    /// OAuth: the token endpoint (`https://…/token`; `http://` only for loopback).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub token_url: Option<String>,
    /// OAuth: the gateway's client id at the token endpoint.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub client_id: Option<String>,
    /// OAuth: a file holding the client secret (surrounding whitespace ignored), read at every
    /// token request.
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// OAuth: the environment variable holding the client secret.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub client_secret_env: Option<String>,
    /// OAuth: `basic` (HTTP Basic, the default) or `post` (secret in the form body).
    #[serde(default)]
    pub client_auth: ClientAuthMethod,
    /// OAuth: scopes asked for (`scope`, space-separated on the wire).
    #[serde(default, deserialize_with = "lenient::strings")]
    pub scopes: Vec<String>,
    /// OAuth: the `audience` parameter (the server's identifier at the authorization server).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub audience: Option<String>,
    /// OAuth: the `resource` parameter (RFC 8707), for servers that name targets by URI.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub resource: Option<String>,
    /// Token exchange: the `requested_token_type`.
    #[serde(default = "access_token_type", deserialize_with = "lenient::string")]
    pub requested_token_type: String,
    /// OAuth: a token is renewed this many seconds before it expires (one renewal at a time;
    /// other calls keep using the still-valid token meanwhile).
    #[serde(default = "refresh_before_secs")]
    pub refresh_before_secs: u64,
    /// OAuth: the whole token request (connect, send, answer) must finish within this many
    /// milliseconds.
    #[serde(default = "token_timeout_ms")]
    pub token_timeout_ms: u64,
    /// Token exchange: most exchanged tokens kept (one per caller token); expired ones go
    /// first, then the soonest to expire.
    #[serde(default = "max_cached_tokens")]
    pub max_cached_tokens: usize,
    /// Token exchange: gateway-internal requests (`tools/list` discovery and refresh), which
    /// have no caller, use a client-credentials token of the same client. Off (the default):
    /// they are refused, and the server needs `discover = false` with static `tools`.
    #[serde(default)]
    pub discovery_with_client_credentials: bool,
    /// SigV4: the signing name: `execute-api` (API Gateway, the default), `lambda` (function
    /// URLs), `bedrock-agentcore` (AgentCore Gateway).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub service: Option<String>,
    /// SigV4: the signing region (default: `aws.region`, then the SDK's region chain).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub region: Option<String>,
}

fn access_token_type() -> String {
    ACCESS_TOKEN_TYPE.into()
}
fn refresh_before_secs() -> u64 {
    60
}
fn token_timeout_ms() -> u64 {
    5_000
}
fn max_cached_tokens() -> usize {
    10_000
}

/// The SigV4 signing name when `service` is not set.
pub const DEFAULT_SIGV4_SERVICE: &str = "execute-api";

impl UpstreamAuthConfig {
    /// A table of `kind` with every other key at its default.
    pub fn new(kind: AuthKind) -> Self {
        Self {
            kind,
            token_url: None,
            client_id: None,
            client_secret_file: None,
            client_secret_env: None,
            client_auth: ClientAuthMethod::Basic,
            scopes: Vec::new(),
            audience: None,
            resource: None,
            requested_token_type: access_token_type(),
            refresh_before_secs: refresh_before_secs(),
            token_timeout_ms: token_timeout_ms(),
            max_cached_tokens: max_cached_tokens(),
            discovery_with_client_credentials: false,
            service: None,
            region: None,
        }
    }

    /// Whether the kind talks to a token endpoint.
    pub fn is_oauth(&self) -> bool {
        matches!(self.kind, AuthKind::ClientCredentials | AuthKind::TokenExchange)
    }

    /// Checks what serde cannot: the keys `kind` needs, and no key of another kind.
    pub fn validate(&self, server: &str) -> anyhow::Result<()> {
        let kind = self.kind.as_str();
        let oauth_keys = [
            ("token_url", self.token_url.is_some()),
            ("client_id", self.client_id.is_some()),
            ("client_secret_file", self.client_secret_file.is_some()),
            ("client_secret_env", self.client_secret_env.is_some()),
            ("scopes", !self.scopes.is_empty()),
            ("audience", self.audience.is_some()),
            ("resource", self.resource.is_some()),
        ];
        let sigv4_keys = [("service", self.service.is_some()), ("region", self.region.is_some())];
        let foreign: Vec<&str> = match self.kind {
            AuthKind::ClientCredentials | AuthKind::TokenExchange => {
                sigv4_keys.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect()
            }
            AuthKind::Sigv4 => oauth_keys.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect(),
            AuthKind::Passthrough => {
                oauth_keys.iter().chain(&sigv4_keys).filter(|(_, set)| *set).map(|(k, _)| *k).collect()
            }
        };
        if !foreign.is_empty() {
            bail!("servers.{server}.auth: {} do(es) not apply to kind \"{kind}\"", foreign.join(", "));
        }
        if self.discovery_with_client_credentials && self.kind != AuthKind::TokenExchange {
            bail!(
                "servers.{server}.auth: discovery_with_client_credentials applies to kind \"token_exchange\" only"
            );
        }
        if !self.is_oauth() {
            return Ok(());
        }
        let Some(url) = self.token_url.as_deref() else {
            bail!("servers.{server}.auth: kind \"{kind}\" needs `token_url`");
        };
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| anyhow::anyhow!("servers.{server}.auth: invalid token_url: {e}"))?;
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]" | "::1"));
        if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
            bail!("servers.{server}.auth: token_url must be https:// (http:// only for a loopback address)");
        }
        if self.client_id.as_deref().is_none_or(str::is_empty) {
            bail!("servers.{server}.auth: kind \"{kind}\" needs `client_id`");
        }
        match (&self.client_secret_file, &self.client_secret_env) {
            (Some(_), Some(_)) => {
                bail!("servers.{server}.auth: set one of client_secret_file and client_secret_env, not both")
            }
            (None, None) => bail!(
                "servers.{server}.auth: kind \"{kind}\" needs `client_secret_file` or `client_secret_env` (a secret is never written in the configuration)"
            ),
            _ => {}
        }
        if self.token_timeout_ms == 0 {
            bail!("servers.{server}.auth: token_timeout_ms must be positive");
        }
        if self.kind == AuthKind::TokenExchange && self.max_cached_tokens == 0 {
            bail!("servers.{server}.auth: max_cached_tokens must be positive");
        }
        Ok(())
    }

    /// The client secret, read now from its file or environment variable. The error names
    /// where it was looked for, never a value.
    pub fn client_secret(&self) -> anyhow::Result<String> {
        let secret = match (&self.client_secret_file, &self.client_secret_env) {
            (Some(path), _) => std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("client secret file {}: {e}", path.display()))?,
            (None, Some(name)) => std::env::var(name)
                .map_err(|_| anyhow::anyhow!("client secret environment variable {name} is not set"))?,
            (None, None) => bail!("no client secret configured"),
        };
        let secret = secret.trim();
        if secret.is_empty() {
            bail!("the client secret is empty");
        }
        Ok(secret.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(kind: AuthKind) -> UpstreamAuthConfig {
        UpstreamAuthConfig {
            token_url: Some("https://auth.example/token".into()),
            client_id: Some("gateway".into()),
            client_secret_env: Some("SECRET".into()),
            ..UpstreamAuthConfig::new(kind)
        }
    }

    #[test]
    fn each_kind_needs_its_keys_and_refuses_the_others() {
        assert!(oauth(AuthKind::ClientCredentials).validate("s").is_ok());
        assert!(oauth(AuthKind::TokenExchange).validate("s").is_ok());
        let mut no_url = oauth(AuthKind::ClientCredentials);
        no_url.token_url = None;
        assert!(no_url.validate("s").unwrap_err().to_string().contains("token_url"));
        let mut both = oauth(AuthKind::ClientCredentials);
        both.client_secret_file = Some("/run/secret".into());
        assert!(both.validate("s").unwrap_err().to_string().contains("not both"));
        let mut plain_http = oauth(AuthKind::ClientCredentials);
        plain_http.token_url = Some("http://auth.example/token".into());
        assert!(plain_http.validate("s").unwrap_err().to_string().contains("https"));
        plain_http.token_url = Some("http://127.0.0.1:9/token".into());
        assert!(plain_http.validate("s").is_ok(), "loopback may be plain HTTP");
        let mut sigv4 = UpstreamAuthConfig::new(AuthKind::Sigv4);
        assert!(sigv4.validate("s").is_ok());
        sigv4.client_id = Some("x".into());
        assert!(sigv4.validate("s").unwrap_err().to_string().contains("client_id"));
        let mut passthrough = UpstreamAuthConfig::new(AuthKind::Passthrough);
        assert!(passthrough.validate("s").is_ok());
        passthrough.service = Some("lambda".into());
        assert!(passthrough.validate("s").is_err());
    }
}
