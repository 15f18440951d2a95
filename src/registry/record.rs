//! One resolved tool: where it lives, what it accepts, and how safe it is to retry.

use std::sync::Arc;

use serde_json::Value;

pub use super::hash::{canonical_hash, definition_hash};
use crate::{config::TransportKind, validation::ArgumentSchema};

/// A tool as the gateway exposes it.
#[derive(Debug)]
pub struct ToolRecord {
    /// The name callers use (namespaced `server__tool` when two servers share a name).
    pub name: Arc<str>,
    /// The name on the upstream server.
    pub upstream_name: Arc<str>,
    pub server: Arc<str>,
    pub transport: TransportKind,
    /// The `tools/list` entry callers see (with `name` set to [`Self::name`]).
    pub definition: Definition,
    /// Hash of the canonical `inputSchema`; compiled validators are shared by this key.
    pub schema_hash: String,
    /// Hash of description + schema + annotations: a change alters what the LLM sees.
    pub definition_hash: String,
    pub schema: Arc<ArgumentSchema>,
    /// `annotations.readOnlyHint` (default false).
    pub read_only: bool,
    /// `annotations.idempotentHint` (default false).
    pub idempotent: bool,
    /// Where the tool came from when not from configuration or discovery: its registry
    /// entry's server (DynamoDB-registered tools).
    pub origin: Option<Arc<super::entry::ServerRef>>,
    /// Catalogue control applied to this tool (`None`: served as its server describes it).
    pub control: Option<Arc<Control>>,
}

#[cfg(test)]
impl ToolRecord {
    /// A plain record for unit tests: an object schema, the given name, server and definition.
    pub fn for_tests(name: &str, server: &str, definition: Value, read_only: bool) -> Self {
        let (schema, _) = ArgumentSchema::compile(&serde_json::json!({"type": "object"}));
        Self {
            name: name.into(),
            upstream_name: name.into(),
            server: server.into(),
            transport: TransportKind::Http,
            definition: definition.into(),
            schema_hash: String::new(),
            definition_hash: String::new(),
            schema: Arc::new(schema),
            read_only,
            idempotent: false,
            origin: None,
            control: None,
        }
    }
}

/// A tool's definition as callers see it: the value in its server's list itself, shared (not
/// copied) when the catalogue serves it as the server described it under its own name, else a
/// value of its own (renamed, namespaced, under catalogue control). A server's list is held by
/// the refresher until the server lists again; the catalogue built from it lends from it,
/// so a catalogue of 10,000 definitions holds them once, not twice.
#[derive(Debug, Clone)]
pub enum Definition {
    Shared(Arc<Vec<Value>>, usize),
    Owned(Value),
}

impl Definition {
    /// `tool` (an element of `list`) named `name`: shared when it already has that name.
    pub fn of(list: &Arc<Vec<Value>>, tool: &Value, name: &str) -> Self {
        let start = list.as_ptr() as usize;
        let at = (tool as *const Value as usize).wrapping_sub(start) / std::mem::size_of::<Value>().max(1);
        let same = list.get(at).is_some_and(|t| std::ptr::eq(t, tool));
        if same && tool.get("name").and_then(Value::as_str) == Some(name) {
            return Definition::Shared(list.clone(), at);
        }
        let mut own = tool.clone();
        own["name"] = Value::String(name.to_string());
        Definition::Owned(own)
    }

    /// Whether it is the server's own value, shared.
    pub fn is_shared(&self) -> bool {
        matches!(self, Definition::Shared(..))
    }
}

impl std::ops::Deref for Definition {
    type Target = Value;

    fn deref(&self) -> &Value {
        match self {
            Definition::Shared(list, at) => list.get(*at).unwrap_or(&Value::Null),
            Definition::Owned(value) => value,
        }
    }
}

impl From<Value> for Definition {
    fn from(value: Value) -> Self {
        Definition::Owned(value)
    }
}

/// What catalogue control left on a tool for its calls.
#[derive(Debug, Clone, Default)]
pub struct Control {
    /// The tool's catalogue name before a rename: the key of its `[tools.NAME]` settings.
    pub catalogue_name: Arc<str>,
    /// Arguments the gateway sets on every call (a caller sending one is refused).
    pub fixed: serde_json::Map<String, Value>,
}

impl ToolRecord {
    /// The name of the tool's `[tools.NAME]` settings (its name before a rename).
    pub fn settings_name(&self) -> &str {
        self.control.as_ref().map_or(&self.name, |c| &c.catalogue_name)
    }
}
