//! JWT bearer tokens: signature checked against the issuer's JWKS, then `iss`, `aud`, `exp`
//! and `nbf` (with leeway), by the `jsonwebtoken` crate; the verified caller is remembered by
//! its token so a repeat costs a hash probe instead of a signature check.
//!
//! The key set and its reads (bounded, spaced, one in flight, never waited on for a known
//! key) are [`super::jwks`]'s; this module only verifies tokens against it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};

use super::{AuthFailure, Caller, jwks::KeyStore};
use crate::config::AuthConfig;

/// A verified token's caller, remembered until `until`.
struct Remembered {
    caller: Arc<Caller>,
    until: Instant,
}

/// Verifies bearer tokens for one listener.
pub struct JwtVerifier {
    /// One validation per accepted algorithm: `jsonwebtoken` checks that every algorithm a
    /// validation lists belongs to the key's family, so RS256 and ES256 cannot share one.
    validations: HashMap<Algorithm, Validation>,
    keys: KeyStore,
    scope_claim: String,
    groups_claim: String,
    /// Verified tokens (foldhash, seeded per process: a token is ~1 KB of the caller's bytes,
    /// which SipHash costs ~3k instructions a call to hash).
    cache: Mutex<HashMap<Arc<str>, Remembered, foldhash::quality::RandomState>>,
    cache_entries: usize,
    cache_for: Duration,
}

impl JwtVerifier {
    /// Builds the verifier and reads the key set once (a failure is logged; a later token
    /// may read it again once `jwks_min_refetch_secs` have passed).
    pub async fn new(config: &AuthConfig) -> anyhow::Result<Self> {
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
        Ok(Self {
            validations,
            keys: KeyStore::new(config, algorithms).await?,
            scope_claim: config.scope_claim.clone(),
            groups_claim: config.groups_claim.clone(),
            cache: Mutex::new(HashMap::default()),
            cache_entries: config.token_cache_entries,
            cache_for: Duration::from_secs(config.token_cache_secs),
        })
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
        let caller = Arc::new(self.caller_of(data.claims, token));
        self.remember(token, &caller, caller.expires_at, now);
        Ok(caller)
    }

    /// The decoding key for `kid` (see [`KeyStore::key`]), or why there is none.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, AuthFailure> {
        let (key, keys) = self.keys.key(kid, alg).await;
        key.ok_or_else(|| match (keys.read_at, kid) {
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

    fn caller_of(&self, mut claims: Map<String, Value>, token: &str) -> Caller {
        let subject = claims.get("sub").and_then(Value::as_str).map(Arc::from);
        // Validated (and required) above; kept for what is derived from the token, such as an
        // exchanged upstream token, which must not outlive it.
        let expires_at = claims.get("exp").and_then(Value::as_u64);
        let scopes = strings_of(claims.get(&self.scope_claim));
        let groups = strings_of(claims.get(&self.groups_claim));
        // Not kept among the claims policy reads: they are the token's plumbing.
        for plumbing in ["exp", "iat", "nbf", "jti"] {
            claims.remove(plumbing);
        }
        Caller {
            subject,
            claims,
            scopes,
            groups,
            token: Some(Arc::from(token)),
            expires_at,
            peer: None,
            endpoint: None,
        }
    }

    fn remember(&self, token: &str, caller: &Arc<Caller>, exp: Option<u64>, now: Instant) {
        if self.cache_entries == 0 {
            return;
        }
        let left = exp
            .map(|exp| Duration::from_secs(exp.saturating_sub(jsonwebtoken::get_current_timestamp())))
            .unwrap_or(self.cache_for);
        // `token_cache_secs` is the operator's: an absurd value must not overflow the clock.
        let Some(until) = now.checked_add(left.min(self.cache_for)) else { return };
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
