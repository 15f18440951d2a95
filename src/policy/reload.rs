//! The policy file in force, and the watcher that reloads it without a restart.
//!
//! The watcher checks the file's modification time and size every `reload_secs`; a change
//! is parsed whole and swapped in only when valid. A bad file is logged with the line and
//! column of each error and the previous policy stays in force
//! (`mcp_gateway_policy_reloads_total{outcome="invalid"}`). Replace the file atomically
//! (write a new one and rename it over the old, as ConfigMap volumes do): a watcher may
//! otherwise catch a half-written file (refused, then the complete one is loaded).

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use super::engine::PolicyEngine;

/// What identifies a version of the file on disk.
type Stamp = (Option<SystemTime>, u64);

/// The policy in force and its generation (bumped at each successful reload).
pub struct PolicyStore {
    path: PathBuf,
    current: RwLock<(u64, Arc<PolicyEngine>)>,
    stamp: std::sync::Mutex<Stamp>,
    generations: AtomicU64,
}

fn stamp_of(path: &Path) -> std::io::Result<Stamp> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.modified().ok(), meta.len()))
}

impl PolicyStore {
    /// Loads the file; a missing or invalid file is an error (the gateway does not start).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let stamp = stamp_of(path).map_err(|e| anyhow::anyhow!("policy file {}: {e}", path.display()))?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("policy file {}: {e}", path.display()))?;
        let engine = PolicyEngine::parse(&text)
            .map_err(|e| anyhow::anyhow!("policy file {} is invalid: {e}", path.display()))?;
        tracing::info!(file = %path.display(), policies = engine.len(), "policy loaded");
        Ok(Self {
            path: path.to_path_buf(),
            current: RwLock::new((1, Arc::new(engine))),
            stamp: std::sync::Mutex::new(stamp),
            generations: AtomicU64::new(1),
        })
    }

    /// The policy in force and its generation.
    pub fn current(&self) -> (u64, Arc<PolicyEngine>) {
        self.current.read().map(|c| c.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Reloads when the file changed: `Some("loaded" | "invalid" | "unreadable")`, `None`
    /// when it did not change.
    pub fn reload_if_changed(&self) -> Option<&'static str> {
        let stamp = match stamp_of(&self.path) {
            Ok(stamp) => stamp,
            Err(e) => {
                let mut last = self.stamp.lock().ok()?;
                if last.0.is_some() {
                    tracing::error!(file = %self.path.display(), error = %e, "policy file unreadable; the previous policy stays in force");
                    *last = (None, 0);
                    return Some("unreadable");
                }
                return None;
            }
        };
        {
            let mut last = self.stamp.lock().ok()?;
            if *last == stamp {
                return None;
            }
            *last = stamp;
        }
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!(file = %self.path.display(), error = %e, "policy file unreadable; the previous policy stays in force");
                return Some("unreadable");
            }
        };
        match PolicyEngine::parse(&text) {
            Ok(engine) => {
                let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
                let policies = engine.len();
                if let Ok(mut current) = self.current.write() {
                    *current = (generation, Arc::new(engine));
                }
                tracing::info!(file = %self.path.display(), policies, generation, "policy reloaded");
                Some("loaded")
            }
            Err(e) => {
                tracing::error!(file = %self.path.display(), error = %e, "policy file invalid; the previous policy stays in force");
                Some("invalid")
            }
        }
    }
}

/// Polls the file every `every` until the store is dropped, counting reload outcomes.
pub fn watch(store: std::sync::Weak<super::Policy>, every: Duration, reloads: prometheus::IntCounterVec) {
    // Supervised: a panic while reloading keeps the policy in force and polls on after a restart.
    crate::supervise::spawn(crate::supervise::Loop::PolicyReload, move || {
        let (store, reloads) = (store.clone(), reloads.clone());
        async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(policy) = store.upgrade() else { break };
                // Reading and parsing a file is blocking work: off the runtime's threads.
                let outcome = tokio::task::spawn_blocking(move || policy.store.reload_if_changed()).await;
                if let Ok(Some(outcome)) = outcome {
                    reloads.with_label_values(&[outcome]).inc();
                }
            }
        }
    });
}
