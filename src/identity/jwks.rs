//! The issuer's signing keys (JWKS) for JWT verification: read, bounded and rate-limited.
//!
//! The key set is the one thing a caller's token can make the gateway fetch, so neither a
//! hostile or hanging JWKS endpoint nor a stream of forged tokens may slow valid callers down
//! or make the gateway hammer the issuer:
//!
//! - **Known keys never wait.** A token whose `kid` is in the current set is verified from it
//!   (an `Arc` read); a set older than `jwks_refresh_secs` is refreshed in the background while
//!   its keys keep serving.
//! - **One read in flight.** A read runs in a task of its own; tokens naming an unknown `kid`
//!   while it runs wait for that read (a `watch` channel), never for a second one, and a
//!   caller that goes away does not cancel it.
//! - **Attempts, not successes, are spaced.** A read starts only `jwks_min_refetch_secs` after
//!   the previous one *started*, whether that one succeeded, failed or still hangs. An unknown
//!   `kid` when no read may start is refused at once.
//! - **Bounded reads.** At most `jwks_max_bytes` of the document are read, within
//!   `jwks_timeout_ms`; a larger, failed or unparsable answer leaves the last good set in place.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

use anyhow::Context;
use jsonwebtoken::{Algorithm, DecodingKey, jwk::JwkSet};
use tokio::{io::AsyncReadExt, sync::watch};

use crate::config::AuthConfig;

/// Where the signing keys are read from.
#[derive(Debug, Clone)]
enum KeySource {
    Url(String),
    File(PathBuf),
}

/// The key set as last read successfully.
pub struct Keys {
    by_kid: HashMap<String, Vec<(Algorithm, DecodingKey)>>,
    /// Keys without a `kid` (used for tokens without one).
    anonymous: Vec<(Algorithm, DecodingKey)>,
    /// When this set was read (`None`: no read has succeeded yet).
    pub read_at: Option<Instant>,
}

impl Keys {
    /// The key for `kid` (or, without one, an anonymous key) and `alg`.
    pub fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let candidates = match kid {
            Some(kid) => self.by_kid.get(kid)?,
            None => &self.anonymous,
        };
        candidates.iter().find(|(a, _)| *a == alg).map(|(_, k)| k.clone())
    }
}

/// The issuer's key set and the one read of it that may be in flight.
#[derive(Clone)]
pub struct KeyStore {
    inner: Arc<Inner>,
}

struct Inner {
    source: KeySource,
    /// The accepted algorithms (keys of others are skipped).
    algorithms: Vec<Algorithm>,
    http: reqwest::Client,
    max_bytes: usize,
    refresh: Duration,
    min_refetch: Duration,
    keys: RwLock<Arc<Keys>>,
    reads: Mutex<Reads>,
}

/// When the last read started and, while it runs, how to wait for it.
#[derive(Default)]
struct Reads {
    last_attempt: Option<Instant>,
    /// Becomes `true` when the read in flight ends (its sender is dropped if its task dies).
    in_flight: Option<watch::Receiver<bool>>,
}

impl KeyStore {
    /// The store `config` describes, with the key set read once (a failure there is logged,
    /// not fatal: the issuer may come up after the gateway; it counts as an attempt).
    pub async fn new(config: &AuthConfig, algorithms: Vec<Algorithm>) -> anyhow::Result<Self> {
        let source = match (&config.jwks_url, &config.jwks_file) {
            (Some(url), _) => KeySource::Url(url.clone()),
            (None, Some(file)) => KeySource::File(file.clone()),
            (None, None) => anyhow::bail!("auth: jwt mode needs jwks_url or jwks_file"),
        };
        let store = Self {
            inner: Arc::new(Inner {
                source,
                algorithms,
                http: reqwest::Client::builder()
                    .timeout(Duration::from_millis(config.jwks_timeout_ms.max(1)))
                    .build()?,
                max_bytes: config.jwks_max_bytes.max(1),
                refresh: Duration::from_secs(config.jwks_refresh_secs.max(1)),
                min_refetch: Duration::from_secs(config.jwks_min_refetch_secs),
                keys: RwLock::new(Arc::new(Keys {
                    by_kid: HashMap::new(),
                    anonymous: Vec::new(),
                    read_at: None,
                })),
                reads: Mutex::default(),
            }),
        };
        store.inner.lock_reads().last_attempt = Some(Instant::now());
        if let Err(e) = store.inner.read().await {
            tracing::warn!(error = %crate::redact::text(&format!("{e:#}")), "auth: the JWKS could not be read at start; tokens are refused until it can be");
        }
        Ok(store)
    }

    /// The key set as last read.
    pub fn current(&self) -> Arc<Keys> {
        self.inner.current()
    }

    /// The key for a token's `kid` and `alg`, and the set it was looked up in.
    ///
    /// A key of the current set is returned at once (a stale set starts a background refresh
    /// when one may start). An unknown `kid` waits for the read in flight, or starts one when
    /// the spacing allows; otherwise it is answered from the current set (`None`) at once.
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> (Option<DecodingKey>, Arc<Keys>) {
        let keys = self.current();
        if let Some(key) = keys.find(kid, alg) {
            if keys.read_at.is_none_or(|at| at.elapsed() >= self.inner.refresh) {
                // Nobody waits for this read.
                drop(self.join_or_start());
            }
            return (Some(key), keys);
        }
        if let Some(mut done) = self.join_or_start() {
            // Bounded by the read's own timeout; a read whose task died counts as done.
            let _ = done.wait_for(|finished| *finished).await;
        }
        let keys = self.current();
        (keys.find(kid, alg), keys)
    }

    /// The read in flight, or a new one when the spacing allows (`None`: neither).
    fn join_or_start(&self) -> Option<watch::Receiver<bool>> {
        let mut reads = self.inner.lock_reads();
        if let Some(in_flight) = &reads.in_flight {
            return Some(in_flight.clone());
        }
        let now = Instant::now();
        if reads.last_attempt.is_some_and(|at| now.saturating_duration_since(at) < self.inner.min_refetch) {
            return None;
        }
        reads.last_attempt = Some(now);
        let (finished, done) = watch::channel(false);
        reads.in_flight = Some(done.clone());
        drop(reads);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            if let Err(e) = inner.read().await {
                tracing::warn!(error = %crate::redact::text(&format!("{e:#}")), "auth: reading the JWKS failed; the previous key set stays");
            }
            inner.lock_reads().in_flight = None;
            finished.send_replace(true);
        });
        Some(done)
    }
}

impl Inner {
    fn lock_reads(&self) -> std::sync::MutexGuard<'_, Reads> {
        self.reads.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn current(&self) -> Arc<Keys> {
        self.keys.read().map(|k| k.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Reads the key set and swaps it in. Keys of algorithms not accepted are skipped.
    async fn read(&self) -> anyhow::Result<()> {
        let document = self.fetch().await?;
        let set: JwkSet = serde_json::from_slice(&document).context("the JWKS is not a JWK set")?;
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
        match self.keys.write() {
            Ok(mut current) => *current = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
        Ok(())
    }

    /// The JWKS document, at most `max_bytes` of it.
    async fn fetch(&self) -> anyhow::Result<Vec<u8>> {
        let limit = self.max_bytes;
        let too_large = |source: &dyn std::fmt::Display| {
            anyhow::anyhow!("the JWKS at {source} is larger than jwks_max_bytes ({limit} bytes)")
        };
        match &self.source {
            KeySource::Url(url) => {
                let mut response = self.http.get(url).send().await.with_context(|| format!("GET {url}"))?;
                let status = response.status();
                anyhow::ensure!(status.is_success(), "GET {url}: HTTP {status}");
                if response.content_length().is_some_and(|length| length > limit as u64) {
                    return Err(too_large(url));
                }
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await.with_context(|| format!("GET {url}: body"))? {
                    if body.len().saturating_add(chunk.len()) > limit {
                        return Err(too_large(url));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(body)
            }
            KeySource::File(path) => {
                let file =
                    tokio::fs::File::open(path).await.with_context(|| format!("{}", path.display()))?;
                let mut body = Vec::new();
                file.take((limit as u64).saturating_add(1))
                    .read_to_end(&mut body)
                    .await
                    .with_context(|| format!("{}", path.display()))?;
                if body.len() > limit {
                    return Err(too_large(&path.display()));
                }
                Ok(body)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(file: &std::path::Path, max_bytes: usize, min_refetch_secs: u64) -> AuthConfig {
        AuthConfig {
            jwks_file: Some(file.to_path_buf()),
            jwks_max_bytes: max_bytes,
            jwks_min_refetch_secs: min_refetch_secs,
            ..AuthConfig::default()
        }
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("mcpgw-jwks-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn a_document_over_the_bound_fails_the_read_and_the_last_good_set_stays() {
        let path = temp_file("bound.json", r#"{"keys": []}"#);
        let store = KeyStore::new(&config(&path, 64, 0), vec![Algorithm::RS256]).await.unwrap();
        let good = store.current();
        assert!(good.read_at.is_some(), "a set within the bound is read");
        std::fs::write(&path, format!(r#"{{"keys": [], "padding": "{}"}}"#, "x".repeat(100))).unwrap();
        let error = store.inner.read().await.unwrap_err().to_string();
        assert!(error.contains("larger than jwks_max_bytes (64 bytes)"), "{error}");
        assert!(Arc::ptr_eq(&store.current(), &good), "the last good set stays");
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn a_failed_read_at_start_spaces_the_next_attempt() {
        let missing = std::env::temp_dir().join(format!("mcpgw-jwks-{}-missing.json", std::process::id()));
        let store = KeyStore::new(&config(&missing, 1024, 3600), vec![Algorithm::RS256]).await.unwrap();
        assert!(store.current().read_at.is_none(), "the read at start failed");
        assert!(store.join_or_start().is_none(), "no second attempt within the spacing");
        let (key, keys) = store.key(Some("any"), Algorithm::RS256).await;
        assert!(key.is_none() && keys.read_at.is_none(), "refused at once from the (empty) set");
    }
}
