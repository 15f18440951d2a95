//! The tool registry: which server hosts which tool, with what schema.
//!
//! Resolution goes through tiers, fastest first. The in-memory [`catalog::Catalog`] — built
//! from configuration, the servers' own `tools/list`, and the DynamoDB registry's active
//! tools — is the first tier and configuration is its floor; [`dynamic::DynamicRegistry`]
//! (Redis, then DynamoDB) serves names registered since the last refresh.

pub mod admin_cli;
pub mod borrow;
pub mod bounds;
pub mod catalog;
pub mod dynamic;
pub mod dynamodb;
pub mod entry;
pub mod hash;
pub mod memory;
pub mod pins;
pub mod record;
pub mod redis_tier;
pub mod search;
pub mod url_policy;

use std::sync::Arc;

pub use catalog::Catalog;
pub use record::ToolRecord;

/// A tier that could not answer (down, slow, malformed data).
#[derive(Debug, Clone, thiserror::Error)]
#[error("registry tier {tier} failed: {reason}")]
pub struct TierError {
    pub tier: &'static str,
    pub reason: String,
}

/// The tiers in lookup order: the in-memory catalogue, then Redis and DynamoDB.
pub struct Registry {
    catalog: Arc<Catalog>,
    pub dynamic: Option<Arc<dynamic::DynamicRegistry>>,
}

impl Registry {
    pub fn new(catalog: Arc<Catalog>, dynamic: Option<Arc<dynamic::DynamicRegistry>>) -> Self {
        Self { catalog, dynamic }
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Resolves a tool: the catalogue first (no await on the hot path), then Redis and
    /// DynamoDB for names registered since the last refresh.
    pub async fn resolve(&self, name: &str) -> Option<Arc<ToolRecord>> {
        if let Some(found) = self.catalog.get(name) {
            return Some(found);
        }
        if !valid_tool_name(name) {
            return None;
        }
        // Boxed: the tiers' futures (Redis, the DynamoDB SDK) are kilobytes, and inline they
        // would size every call's future, memory hits included.
        let live = Box::pin(self.dynamic.as_ref()?.lookup(name)).await?;
        live.record(|entry| self.catalog.served_record_for_entry(entry, name))
    }
}

/// Names worth a lookup below memory (what LLM tool APIs accept, at most 64 characters).
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))
}
