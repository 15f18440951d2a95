//! The tool registry: which server hosts which tool, with what schema.
//!
//! Resolution goes through tiers behind [`ToolTier`], fastest first. The in-memory
//! [`catalog::Catalog`] — built from configuration and the servers' own `tools/list` — is the
//! first tier and the floor: later tiers (Redis, DynamoDB) add tools, never remove the ones
//! configuration declares.

pub mod catalog;
pub mod record;

use std::sync::Arc;

pub use catalog::Catalog;
pub use record::ToolRecord;

/// A place tools can be looked up in.
#[async_trait::async_trait]
pub trait ToolTier: Send + Sync {
    /// Short name for logs and metrics (`memory`, `redis`, `dynamodb`).
    fn tier(&self) -> &'static str;
    /// Looks a tool up by its exposed name. `Err` means the tier could not answer.
    async fn lookup(&self, name: &str) -> Result<Option<Arc<ToolRecord>>, TierError>;
}

/// A tier that could not answer (down, slow, malformed data).
#[derive(Debug, Clone, thiserror::Error)]
#[error("registry tier {tier} failed: {reason}")]
pub struct TierError {
    pub tier: &'static str,
    pub reason: String,
}

/// The tiers in lookup order.
pub struct Registry {
    catalog: Arc<Catalog>,
    lower: Vec<Arc<dyn ToolTier>>,
}

impl Registry {
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Self { catalog, lower: Vec::new() }
    }

    /// Adds a tier consulted after the ones already present.
    pub fn with_tier(mut self, tier: Arc<dyn ToolTier>) -> Self {
        self.lower.push(tier);
        self
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Resolves a tool: memory first (no await on the hot path), then the lower tiers.
    pub async fn resolve(&self, name: &str) -> Option<Arc<ToolRecord>> {
        if let Some(found) = self.catalog.get(name) {
            return Some(found);
        }
        for tier in &self.lower {
            match tier.lookup(name).await {
                Ok(Some(found)) => return Some(found),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "registry tier skipped"),
            }
        }
        None
    }
}
