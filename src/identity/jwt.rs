//! JWT bearer tokens: signature checked against the issuer's JWKS, then `iss`, `aud`, `exp`
//! and `nbf` (with leeway), by the `jsonwebtoken` crate; the verified caller is remembered by
//! its token so a repeat costs a hash probe instead of a signature check.
//!
//! The key set comes from `jwks_url` or `jwks_file`. It is read at start (a failure there is
//! logged, not fatal: the issuer may come up after the gateway), again every
//! `jwks_refresh_secs`, and at once when a token names a `kid` the set lacks (key rotation),
//! but never more often than `jwks_min_refetch_secs`: a stream of forged `kid`s cannot make
//! the gateway hammer the issuer. One read at a time; concurrent callers wait for it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind, jwk::JwkSet};
use serde_json::{Map, Value};

use super::{AuthFailure, Caller};
use crate::config::AuthConfig;

/// Where the signing keys are read from.
#[derive(Debug, Clone)]
enum KeySource {
    Url(String),
    File(std::path::PathBuf),
}

/// The key set as last read.
struct Keys {
    by_kid: HashMap<String, Vec<(Algorithm, DecodingKey)>>,
    /// Keys without a `kid` (used for tokens without one).
    anonymous: Vec<(Algorithm, DecodingKey)>,
    read_at: Option<Instant>,
}

/// A verified token's caller, remembered until `until`.
struct Remembered {
    caller: Arc<Caller>,
    until: Instant,
}

/// Verifies bearer tokens for one listener.
pub struct JwtVerifier {
    source: KeySource,
    /// The accepted algorithms.
    algorithms: Vec<Algorithm>,
    /// One validation per accepted algorithm: `jsonwebtoken` checks that every algorithm a
    /// validation lists belongs to the key's family, so RS256 and ES256 cannot share one.
    validations: HashMap<Algorithm, Validation>,
    keys: RwLock<Arc<Keys>>,
    /// One key-set read at a time.
    reading: tokio::sync::Mutex<()>,
    refresh: Duration,
    min_refetch: Duration,
    scope_claim: String,
    groups_claim: String,
    /// Verified tokens (foldhash, seeded per process: a token is ~1 KB of the caller's bytes,
    /// which SipHash costs ~3k instructions a call to hash).
    cache: Mutex<HashMap<Arc<str>, Remembered, foldhash::quality::RandomState>>,
    cache_entries: usize,
    cache_for: Duration,
    http: reqwest::Client,
}

impl JwtVerifier {
    /// Builds the verifier and reads the key set once (a failure is logged and retried on
    /// the first token).
    pub async fn new(config: &AuthConfig) -> anyhow::Result<Self> {
        let source = match (&config.jwks_url, &config.jwks_file) {
            (Some(url), _) => KeySource::Url(url.clone()),
            (None, Some(file)) => KeySource::File(file.clone()),
            (None, None) => anyhow::bail!("auth: jwt mode needs jwks_url or jwks_file"),
        };
        let algorithms: Vec<Algorithm> = config
            .algorithms
            .iter()
            .map(|a| a.parse())
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("auth: algorithms {:?}: {e}", config.algorithms))?;
        let validations = algorithms
            .iter()
            .map(|alg| {
                let mut validation = Validation::new(*alg);
                validation.leeway = config.leeway_secs;
                validation.validate_nbf = true;
                validation.set_issuer(&[config.issuer.clone().unwrap_or_default()]);
                validation.set_audience(&config.audience);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                (*alg, validation)
            })
            .collect();
        let verifier = Self {
            source,
            algorithms,
            validations,
            keys: RwLock::new(Arc::new(Keys {
                by_kid: HashMap::new(),
                anonymous: Vec::new(),
                read_at: None,
            })),
            reading: tokio::sync::Mutex::new(()),
            refresh: Duration::from_secs(config.jwks_refresh_secs.max(1)),
            min_refetch: Duration::from_secs(config.jwks_min_refetch_secs),
            scope_claim: config.scope_claim.clone(),
            groups_claim: config.groups_claim.clone(),
            cache: Mutex::new(HashMap::default()),
            cache_entries: config.token_cache_entries,
            cache_for: Duration::from_secs(config.token_cache_secs),
            http: reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?,
        };
        if let Err(e) = verifier.read_keys().await {
            tracing::warn!(error = %crate::redact::shown(&e), "auth: the JWKS could not be read at start; tokens are refused until it can be");
        }
        Ok(verifier)
    }

    /// The caller a bearer token stands for, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Arc<Caller>, AuthFailure> {
        let now = Instant::now();
        if let Ok(cache) = self.cache.lock()
            && let Some(hit) = cache.get(token)
            && hit.until > now
        {
            return Ok(hit.caller.clone());
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthFailure::invalid("malformed", format!("not a JWT: {e}")))?;
        let Some(validation) = self.validations.get(&header.alg) else {
            return Err(AuthFailure::invalid(
                "algorithm",
                format!("algorithm {:?} is not accepted", header.alg),
            ));
        };
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, validation)
            .map_err(|e| AuthFailure::invalid(failure_reason(e.kind()), e.to_string()))?;
        let exp = data.claims.get("exp").and_then(Value::as_u64);
        let caller = Arc::new(self.caller_of(data.claims, token));
        self.remember(token, &caller, exp, now);
        Ok(caller)
    }

    /// The decoding key for `kid`: from the current set, or (unknown `kid`, stale set) after
    /// reading the set again, rate-limited.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, AuthFailure> {
        let keys = self.current();
        let stale = keys.read_at.is_none_or(|at| at.elapsed() >= self.refresh);
        if !stale && let Some(key) = find(&keys, kid, alg) {
            return Ok(key);
        }
        let may_read = keys.read_at.is_none_or(|at| at.elapsed() >= self.min_refetch);
        if may_read {
            let guard = self.reading.lock().await;
            // Another caller may have read it meanwhile.
            let again = self.current();
            if Arc::ptr_eq(&again, &keys)
                && let Err(e) = self.read_keys().await
            {
                tracing::warn!(error = %crate::redact::shown(&e), "auth: reading the JWKS failed; the previous key set stays");
            }
            drop(guard);
        }
        find(&self.current(), kid, alg).ok_or_else(|| match (self.current().read_at, kid) {
            (None, _) => {
                AuthFailure::invalid("jwks_unavailable", "the issuer's key set could not be read".into())
            }
            (Some(_), Some(kid)) => {
                let shown: String = kid.chars().take(64).collect();
                AuthFailure::invalid(
                    "unknown_key",
                    format!("no key {shown:?} for {alg:?} in the issuer's key set"),
                )
            }
            (Some(_), None) => AuthFailure::invalid("unknown_key", format!("no {alg:?} key without a kid")),
        })
    }

    fn current(&self) -> Arc<Keys> {
        self.keys.read().map(|k| k.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Reads the key set and swaps it in. Keys of algorithms not accepted are skipped.
    async fn read_keys(&self) -> anyhow::Result<()> {
        let text = match &self.source {
            KeySource::Url(url) => {
                let response = self.http.get(url).send().await?;
                let status = response.status();
                anyhow::ensure!(status.is_success(), "GET {url}: HTTP {status}");
                response.text().await?
            }
            KeySource::File(path) => tokio::fs::read_to_string(path).await?,
        };
        let set: JwkSet = serde_json::from_str(&text)?;
        let mut by_kid = HashMap::new();
        let mut anonymous = Vec::new();
        for jwk in &set.keys {
            let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
            let algorithms: Vec<Algorithm> =
                match jwk.common.key_algorithm.and_then(|a| a.to_string().parse().ok()) {
                    Some(alg) => vec![alg],
                    None => self.algorithms.clone(),
                };
            for alg in algorithms.into_iter().filter(|a| self.algorithms.contains(a)) {
                match &jwk.common.key_id {
                    Some(kid) => by_kid.entry(kid.clone()).or_insert_with(Vec::new).push((alg, key.clone())),
                    None => anonymous.push((alg, key.clone())),
                }
            }
        }
        tracing::info!(keys = by_kid.len() + anonymous.len(), "auth: JWKS read");
        let keys = Arc::new(Keys { by_kid, anonymous, read_at: Some(Instant::now()) });
        if let Ok(mut current) = self.keys.write() {
            *current = keys;
        }
        Ok(())
    }

    fn caller_of(&self, mut claims: Map<String, Value>, token: &str) -> Caller {
        let subject = claims.get("sub").and_then(Value::as_str).map(Arc::from);
        let scopes = strings_of(claims.get(&self.scope_claim));
        let groups = strings_of(claims.get(&self.groups_claim));
        // Not kept among the claims policy reads: they are the token's plumbing.
        for plumbing in ["exp", "iat", "nbf", "jti"] {
            claims.remove(plumbing);
        }
        Caller { subject, claims, scopes, groups, token: Some(Arc::from(token)), peer: None }
    }

    fn remember(&self, token: &str, caller: &Arc<Caller>, exp: Option<u64>, now: Instant) {
        if self.cache_entries == 0 {
            return;
        }
        let left = exp
            .map(|exp| Duration::from_secs(exp.saturating_sub(jsonwebtoken::get_current_timestamp())))
            .unwrap_or(self.cache_for);
        let until = now + left.min(self.cache_for);
        let Ok(mut cache) = self.cache.lock() else { return };
        if cache.len() >= self.cache_entries {
            cache.retain(|_, r| r.until > now);
            if cache.len() >= self.cache_entries {
                // Still full of live tokens: start over rather than scan for the oldest.
                cache.clear();
            }
        }
        cache.insert(Arc::from(token), Remembered { caller: caller.clone(), until });
    }
}

fn find(keys: &Keys, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    match kid {
        Some(kid) => keys.by_kid.get(kid)?.iter().find(|(a, _)| *a == alg).map(|(_, k)| k.clone()),
        None => keys.anonymous.iter().find(|(a, _)| *a == alg).map(|(_, k)| k.clone()),
    }
}

/// A claim as a list of strings: a space-separated string or an array of strings.
fn strings_of(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(text)) => text.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// The metric label of a refused token (bounded).
fn failure_reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not_yet_valid",
        ErrorKind::InvalidIssuer => "wrong_issuer",
        ErrorKind::InvalidAudience => "wrong_audience",
        ErrorKind::InvalidSignature => "bad_signature",
        ErrorKind::MissingRequiredClaim(_) => "missing_claim",
        ErrorKind::InvalidAlgorithm => "algorithm",
        _ => "malformed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_claims_read_as_string_or_array() {
        assert_eq!(strings_of(Some(&Value::String("a b  c".into()))), vec!["a", "b", "c"]);
        assert_eq!(strings_of(Some(&serde_json::json!(["x", 1, "y"]))), vec!["x", "y"]);
        assert!(strings_of(None).is_empty());
    }
}
