//! What a rebuild changed against the snapshot it replaced, by exposed name: counted for
//! the metrics and the change notifications, every changed definition logged. Separate: it
//! compares two finished snapshots and has nothing to do with building one.

use super::snapshot::Snapshot;

/// How a rebuild changed the catalogue, by exposed name.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub added: u64,
    pub removed: u64,
    /// Same name, another definition hash (each is logged).
    pub changed: u64,
}

/// What `after` changed against `before`; every changed definition is logged (in name order).
pub(super) fn changes(before: &Snapshot, after: &Snapshot) -> Changes {
    let mut changes = Changes::default();
    for tool in after.tools() {
        match before.by_name.get(&tool.name) {
            None => changes.added += 1,
            Some(previous) if previous.definition_hash != tool.definition_hash => {
                changes.changed += 1;
                tracing::warn!(
                    tool = %tool.name,
                    server = %tool.server,
                    before = %previous.definition_hash,
                    after = %tool.definition_hash,
                    schema_before = %previous.schema_hash,
                    schema_after = %tool.schema_hash,
                    "tool definition changed"
                );
            }
            Some(_) => {}
        }
    }
    changes.removed = before.by_name.keys().filter(|name| !after.by_name.contains_key(*name)).count() as u64;
    changes
}
