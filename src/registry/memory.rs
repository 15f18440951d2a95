//! Where the catalogue's memory goes, per server: an estimate an operator can act on ("this
//! document costs 40 MiB, most of it schemas"), reported by `GET /admin/registry` (`memory`),
//! `GET /admin/registry/memory` and the console's Servers page.
//!
//! Estimated, not measured: the allocator is not asked. Each figure is the heap bytes the held
//! values take by serde_json's layout (a string its bytes, an array 32 bytes per element, an
//! object one B-tree node of 632 bytes per 8 entries plus its keys, each recursively), plus the
//! text kept as text (definitions and schemas: their own text, and each shared `$defs` entry
//! once for the whole report, [`crate::shared_json`]). Allocator rounding and the
//! catalogue's own tables (hash maps of names) are not counted; the figures are meant for
//! comparing servers and seeing what grows, within tens of percent of what the process holds.

use serde::Serialize;
use serde_json::Value;

/// Bytes one B-tree node of a `serde_json::Map` takes (11 keys of 24, 11 values of 32, links).
const MAP_NODE: usize = 632;
/// Entries per node assumed (B-tree nodes are between half and wholly full).
const MAP_ENTRIES_PER_NODE: usize = 8;
/// A `serde_json::Value` inline.
const VALUE: usize = 32;

/// The heap bytes `value` takes as a `serde_json::Value` (estimated; see the module's doc).
pub fn value_heap(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.len() * VALUE + items.iter().map(value_heap).sum::<usize>(),
        Value::Object(map) => {
            let nodes = map.len().div_ceil(MAP_ENTRIES_PER_NODE).max(1);
            nodes * MAP_NODE + map.iter().map(|(k, v)| k.len() + value_heap(v)).sum::<usize>()
        }
        _ => 0,
    }
}

/// One server's share, in estimated bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerMemory {
    /// Its tools in the catalogue: each record's definition (its own JSON text, `$defs`
    /// entries apart, and its parsed head: every field but the schemas).
    pub tools: usize,
    /// Its input schemas kept for validation, as text (each distinct schema once, `$defs`
    /// entries apart; a schema compiled at a first call also holds a validator, not counted)
    /// and how many of them are compiled.
    pub schemas: usize,
    pub schemas_compiled: usize,
    /// The `$defs` entries its definitions and schemas refer to, each held once for the
    /// process and counted once here, with the first server seen referring to it.
    pub shared: usize,
    /// Its resources, resource templates and prompts in the federation's index.
    pub resources: usize,
    /// What is kept of its OpenAPI document once mapped besides the catalogue's texts: the
    /// definitions the catalogue does not share (renamed tools) and the call plans (the parsed
    /// document itself is dropped after mapping).
    pub documents: usize,
    /// The document's text as read to map it (not kept; for comparison).
    pub document_read: usize,
    pub total: usize,
}

impl ServerMemory {
    pub fn finish(mut self) -> Self {
        self.total = self.tools + self.schemas + self.shared + self.resources + self.documents;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_grow_with_what_is_held() {
        let small = serde_json::json!({"type": "string"});
        let large =
            serde_json::json!({"type": "object", "properties": {"a": small.clone(), "b": small.clone()}});
        assert_eq!(value_heap(&small), MAP_NODE + 4 + 6);
        assert!(value_heap(&large) > 3 * MAP_NODE);
        let memory = ServerMemory { tools: 1, schemas: 2, resources: 3, documents: 4, ..Default::default() };
        assert_eq!(memory.finish().total, 10);
    }
}
