//! OAuth 2.0 tokens for an upstream: client credentials (RFC 6749 §4.4) and token exchange
//! (RFC 8693) at the server's token endpoint.
//!
//! **Cache.** A token is kept until `refresh_before_secs` before its expiry (`expires_in`; a
//! token without one is kept [`DEFAULT_LIFETIME`], and none longer than
//! [`crate::clock::MAX_TOKEN_LIFETIME`], one year, whatever `expires_in` says: an endpoint
//! answering `18446744073709551615` once panicked the clock and, with it, the tool refresh);
//! an exchanged token also never outlives the
//! caller's token (its `exp` claim, when the caller was identified by a validated JWT). The
//! gateway's own token has one entry; exchanged tokens one per caller token, keyed by the
//! token's SHA-256 and bounded by `max_cached_tokens` (expired entries go first, then the
//! soonest to expire).
//!
//! **One request at a time.** Token requests for one key go through [`SingleFlight`]: the
//! first call that needs a new token asks, concurrent ones wait for its answer. A renewal
//! before expiry does not hold anyone up: calls keep using the still-valid token while one of
//! them renews it, and a failed renewal leaves the old token in use until it expires.
//!
//! **Bounds.** The whole token request is bounded by `token_timeout_ms` (its connect by the
//! server's `connect_timeout_ms`); the answer is read up to [`MAX_TOKEN_RESPONSE_BYTES`].

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use base64::Engine;
use http::HeaderValue;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{CredentialMetrics, bearer_header, no_caller_token};
use crate::{
    clock,
    config::{AuthKind, ClientAuthMethod, UpstreamAuthConfig},
    identity::Caller,
    singleflight::{Join, SingleFlight, Waited},
    upstream::{CredentialFailure, UpstreamError},
};

/// How long a token without `expires_in` is kept.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The most of a token endpoint's answer that is read.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// RFC 8693's token type of an access token (the caller's token is one).
const ACCESS_TOKEN_TYPE: &str = crate::config::ACCESS_TOKEN_TYPE;
const EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The cache key of the gateway's own (client-credentials) token.
const OWN: &str = "";

/// A token and when to stop using it.
#[derive(Clone)]
struct Token {
    header: HeaderValue,
    /// When a renewal is due (`refresh_before_secs` before expiry).
    renew_at: Instant,
    expires_at: Instant,
    /// Its lifetime as kept, and whether `expires_in` said more (for the log).
    lifetime: Duration,
    capped: bool,
}

/// The token requests of one server.
pub struct TokenSource {
    server: Arc<str>,
    settings: UpstreamAuthConfig,
    http: reqwest::Client,
    cache: Mutex<HashMap<String, Token>>,
    flights: SingleFlight<Result<Token, UpstreamError>>,
    metrics: CredentialMetrics,
}

/// What a token request asks for.
#[derive(Clone, Copy)]
enum Grant<'a> {
    ClientCredentials,
    Exchange { subject_token: &'a str },
}

impl Grant<'_> {
    fn kind(self) -> AuthKind {
        match self {
            Grant::ClientCredentials => AuthKind::ClientCredentials,
            Grant::Exchange { .. } => AuthKind::TokenExchange,
        }
    }
}

/// A token endpoint's answer (RFC 6749 §5.1, RFC 8693 §2.2.1).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
}

/// A token endpoint's refusal (RFC 6749 §5.2): only the code is kept (descriptions may echo
/// what was sent).
#[derive(Deserialize)]
struct TokenError {
    error: String,
}

impl TokenSource {
    pub fn new(
        server: Arc<str>,
        settings: UpstreamAuthConfig,
        connect_timeout: Duration,
        metrics: CredentialMetrics,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .timeout(Duration::from_millis(settings.token_timeout_ms))
            // A token endpoint that redirects is misconfigured; following it would send the
            // client secret somewhere nobody configured.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            server,
            settings,
            http,
            cache: Mutex::default(),
            flights: SingleFlight::default(),
            metrics,
        })
    }

    /// The `Authorization` value for a call by `caller` (`None`: the gateway's own request).
    pub async fn bearer(&self, caller: Option<&Caller>) -> Result<HeaderValue, UpstreamError> {
        match self.settings.kind {
            AuthKind::TokenExchange => match (caller, caller.and_then(|c| c.token.as_deref())) {
                (Some(caller), Some(subject_token)) => {
                    let key = cache_key(subject_token);
                    let cap = caller_expiry(caller);
                    self.token(&key, Grant::Exchange { subject_token }, cap).await
                }
                (Some(_), None) => Err(no_caller_token(
                    "this server takes a token exchanged for the caller's own, and the call carries none",
                )),
                (None, _) if self.settings.discovery_with_client_credentials => {
                    self.token(OWN, Grant::ClientCredentials, None).await
                }
                (None, _) => Err(no_caller_token(
                    "gateway-internal requests to a token_exchange server need discovery_with_client_credentials (or discover = false with static tools)",
                )),
            },
            _ => self.token(OWN, Grant::ClientCredentials, None).await,
        }
        .map(|token| token.header)
    }

    /// Forgets the token a server refused, unless a newer one is cached already.
    pub fn forget(&self, caller: Option<&Caller>, refused: &HeaderValue) {
        let key = match (self.settings.kind, caller.and_then(|c| c.token.as_deref())) {
            (AuthKind::TokenExchange, Some(subject_token)) => cache_key(subject_token),
            _ => OWN.to_string(),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.get(&key).is_some_and(|t| t.header == refused) {
            cache.remove(&key);
        }
    }

    /// The cached token for `key`, or a new one (one token request per key at a time).
    async fn token(&self, key: &str, grant: Grant<'_>, cap: Option<Instant>) -> Result<Token, UpstreamError> {
        let cached = self.cached(key);
        if let Some(token) = &cached
            && Instant::now() < token.renew_at
        {
            return Ok(token.clone());
        }
        let mut role = self.flights.join(key);
        loop {
            match role {
                Join::Leader(leader) => {
                    let result = self.fetch(grant, cap).await;
                    if let Ok(token) = &result {
                        self.store(key, token.clone());
                    }
                    leader.finish(&result);
                    return match (result, cached) {
                        // A failed renewal: the old token is still good until it expires.
                        (Err(error), Some(old)) if Instant::now() < old.expires_at => {
                            tracing::warn!(server = %self.server, error = %crate::redact::shown(&error), "token renewal failed; the current token is used until it expires");
                            Ok(old)
                        }
                        (result, _) => result,
                    };
                }
                Join::Follower(follower) => {
                    // Someone is renewing: a still-valid token needs no waiting.
                    if let Some(token) = &cached
                        && Instant::now() < token.expires_at
                    {
                        return Ok(token.clone());
                    }
                    match follower.wait(None).await {
                        Waited::Done(result) => return result,
                        Waited::Promoted(leader) => role = Join::Leader(leader),
                        Waited::TimedOut => {
                            return Err(unavailable("gave up waiting for a token request"));
                        }
                    }
                }
            }
        }
    }

    fn cached(&self, key: &str) -> Option<Token> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Keeps `token`, making room within `max_cached_tokens`: expired entries first, then the
    /// one that expires soonest.
    fn store(&self, key: &str, token: Token) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let limit = self.settings.max_cached_tokens.max(1);
        if !cache.contains_key(key) && cache.len() >= limit {
            let now = Instant::now();
            cache.retain(|_, t| t.expires_at > now);
            if cache.len() >= limit
                && let Some(soonest) = cache.iter().min_by_key(|(_, t)| t.expires_at).map(|(k, _)| k.clone())
            {
                cache.remove(&soonest);
            }
        }
        cache.insert(key.to_string(), token);
    }

    /// One token request.
    async fn fetch(&self, grant: Grant<'_>, cap: Option<Instant>) -> Result<Token, UpstreamError> {
        let kind = grant.kind().as_str();
        let result = self.request(grant, cap).await;
        let outcome = match &result {
            Ok(_) => "success",
            Err(UpstreamError::Credentials { failure: CredentialFailure::Unavailable, .. }) => "unavailable",
            Err(_) => "refused",
        };
        self.metrics.fetch(&self.server, kind, outcome);
        match &result {
            Ok(token) => tracing::info!(
                server = %self.server,
                kind,
                lifetime_secs = token.lifetime.as_secs(),
                lifetime_capped = token.capped,
                "upstream token obtained"
            ),
            Err(error) => {
                tracing::warn!(server = %self.server, kind, error = %crate::redact::shown(error), "upstream token request failed")
            }
        }
        result
    }

    async fn request(&self, grant: Grant<'_>, cap: Option<Instant>) -> Result<Token, UpstreamError> {
        let settings = &self.settings;
        let (Some(url), Some(client_id)) = (settings.token_url.as_deref(), settings.client_id.as_deref())
        else {
            return Err(unavailable("no token_url or client_id"));
        };
        let secret = settings.client_secret().map_err(|e| UpstreamError::Credentials {
            failure: CredentialFailure::ClientRefused,
            detail: format!("cannot read the client secret: {e}"),
        })?;
        let mut form = Form::default();
        match grant {
            Grant::ClientCredentials => form.add("grant_type", "client_credentials"),
            Grant::Exchange { subject_token } => {
                form.add("grant_type", EXCHANGE_GRANT);
                form.add("subject_token", subject_token);
                form.add("subject_token_type", ACCESS_TOKEN_TYPE);
                form.add("requested_token_type", &settings.requested_token_type);
            }
        }
        if !settings.scopes.is_empty() {
            form.add("scope", &settings.scopes.join(" "));
        }
        if let Some(audience) = &settings.audience {
            form.add("audience", audience);
        }
        if let Some(resource) = &settings.resource {
            form.add("resource", resource);
        }
        let mut request = self
            .http
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(http::header::ACCEPT, "application/json");
        match settings.client_auth {
            ClientAuthMethod::Basic => {
                // RFC 6749 §2.3.1: both form-encoded before Basic.
                let pair = format!("{}:{}", form_encode(client_id), form_encode(&secret));
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                let mut value = HeaderValue::try_from(format!("Basic {encoded}"))
                    .map_err(|_| unavailable("client id or secret is not a valid header value"))?;
                value.set_sensitive(true);
                request = request.header(http::header::AUTHORIZATION, value);
            }
            ClientAuthMethod::Post => {
                form.add("client_id", client_id);
                form.add("client_secret", &secret);
            }
        }
        let asked = Instant::now();
        let mut response = request.body(form.0).send().await.map_err(|e| {
            let what = if e.is_timeout() { "timed out" } else { "unreachable" };
            unavailable(&format!("the token endpoint {what}"))
        })?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|_| unavailable("the token endpoint's answer broke off"))?
        {
            if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
                return Err(unavailable("the token endpoint's answer is too large"));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let code = serde_json::from_slice::<TokenError>(&body).ok().map(|e| e.error);
            return Err(refusal(grant, status.as_u16(), code.as_deref()));
        }
        let answer: TokenResponse = serde_json::from_slice(&body)
            .map_err(|_| unavailable("the token endpoint answered something that is not a token response"))?;
        if !answer.token_type.eq_ignore_ascii_case("bearer") {
            return Err(unavailable("the token endpoint issued a token that is not a bearer token"));
        }
        let (lifetime, capped) = answer.expires_in.map_or((DEFAULT_LIFETIME, false), clock::token_lifetime);
        let mut expires_at = clock::later(asked, lifetime);
        if let Some(cap) = cap {
            expires_at = expires_at.min(cap);
        }
        let renew_at = expires_at
            .checked_sub(Duration::from_secs(settings.refresh_before_secs))
            .unwrap_or(asked)
            .max(asked);
        Ok(Token { header: bearer_header(&answer.access_token)?, renew_at, expires_at, lifetime, capped })
    }
}

/// An OAuth error answer as a credentials failure.
fn refusal(grant: Grant<'_>, status: u16, code: Option<&str>) -> UpstreamError {
    let failure = match (code, grant) {
        // The caller's token is not accepted for this exchange (expired, wrong audience,
        // not allowed to reach this server).
        (Some("invalid_grant" | "invalid_target" | "invalid_request"), Grant::Exchange { .. }) => {
            CredentialFailure::CallerTokenRefused
        }
        _ if status >= 500 || status == 429 => CredentialFailure::Unavailable,
        _ if (400..500).contains(&status) => CredentialFailure::ClientRefused,
        _ => CredentialFailure::Unavailable,
    };
    let code = code.map(|c| c.chars().take(64).collect::<String>());
    UpstreamError::Credentials {
        failure,
        detail: match code {
            Some(code) => format!("the token endpoint refused the request (HTTP {status}, {code})"),
            None => format!("the token endpoint answered HTTP {status}"),
        },
    }
}

fn unavailable(detail: &str) -> UpstreamError {
    UpstreamError::Credentials { failure: CredentialFailure::Unavailable, detail: detail.into() }
}

/// The cache key of a caller's token: its SHA-256, so the cache holds no caller token.
fn cache_key(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut key = String::with_capacity(64);
    for byte in digest {
        key.push_str(&format!("{byte:02x}"));
    }
    key
}

/// When the caller's own token expires (its validated `exp`, [`Caller::expires_at`]), if
/// known: already passed is now; further than the clock's cap ([`clock::after`]: a year) is
/// that cap.
fn caller_expiry(caller: &Caller) -> Option<Instant> {
    let exp = caller.expires_at?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(clock::after(Duration::from_secs(exp.saturating_sub(now))))
}

/// An `application/x-www-form-urlencoded` body.
#[derive(Default)]
struct Form(String);

impl Form {
    fn add(&mut self, name: &str, value: &str) {
        if !self.0.is_empty() {
            self.0.push('&');
        }
        self.0.push_str(&form_encode(name));
        self.0.push('=');
        self.0.push_str(&form_encode(value));
    }
}

/// The form encoding of the URL standard: alphanumerics and `*-._` as they are, space as `+`,
/// every other byte as `%XX`.
fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => out.push(byte as char),
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded_as_browsers_encode_them() {
        assert_eq!(form_encode("a b+c/d:é"), "a+b%2Bc%2Fd%3A%C3%A9");
        let mut form = Form::default();
        form.add("grant_type", "client_credentials");
        form.add("scope", "cart:read cart:write");
        assert_eq!(form.0, "grant_type=client_credentials&scope=cart%3Aread+cart%3Awrite");
    }

    #[test]
    fn refusals_say_whose_fault_they_are() {
        let exchange = Grant::Exchange { subject_token: "t" };
        let failure = |grant, status, code| match refusal(grant, status, code) {
            UpstreamError::Credentials { failure, .. } => failure,
            other => panic!("{other:?}"),
        };
        assert_eq!(failure(exchange, 400, Some("invalid_grant")), CredentialFailure::CallerTokenRefused);
        assert_eq!(failure(exchange, 401, Some("invalid_client")), CredentialFailure::ClientRefused);
        assert_eq!(
            failure(Grant::ClientCredentials, 400, Some("invalid_grant")),
            CredentialFailure::ClientRefused
        );
        assert_eq!(failure(Grant::ClientCredentials, 503, None), CredentialFailure::Unavailable);
        assert_eq!(failure(Grant::ClientCredentials, 429, None), CredentialFailure::Unavailable);
    }

    #[test]
    fn the_callers_expiry_caps_without_overflowing() {
        let caller = |exp| Caller { expires_at: exp, ..Caller::default() };
        assert!(caller_expiry(&caller(None)).is_none(), "no exp: no cap");
        let far = caller_expiry(&caller(Some(u64::MAX))).expect("too far for the clock: the clock's cap");
        assert!(far > Instant::now(), "a cap in the future, not a panic");
        let past = caller_expiry(&caller(Some(1))).expect("an exp long past is a cap");
        assert!(past <= Instant::now(), "an expired caller caps at now");
    }

    #[test]
    fn the_cache_key_is_not_the_token() {
        let key = cache_key("eyJhbGciOi.secret.sig");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("secret"));
    }
}
