//! One resolved tool: where it lives, what it accepts, and how safe it is to retry.

use std::sync::Arc;

use serde_json::Value;

pub use super::hash::{canonical_hash, definition_hash, schema_and_definition_hashes};
use crate::{config::TransportKind, shared_json::SharedJson, validation::ArgumentSchema};

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

/// A tool's definition as callers see it, held as its compact JSON text (what `tools/list`,
/// the exports and `search_tools` serve, byte for byte; its `$defs` entries shared between
/// tools, [`SharedJson`]) and a parsed head: every field but the
/// schemas (`name`, `description`, `annotations`, `execution`, …), which is what the call path,
/// policy and reports read. A definition as a `serde_json::Value` takes about 8.7× its text
/// (a map node per small schema object), so a catalogue of thousands of definitions (an
/// OpenAPI document's) holds them as text: GitHub's REST document 52 MiB of values against 5 MiB
/// of text. The whole value is parsed from the text for the rare reader that needs it
/// ([`Definition::value`]).
#[derive(Debug, Clone)]
pub struct Definition {
    text: SharedJson,
    head: Arc<Value>,
}

/// The fields not kept in a definition's head (read from its text when needed).
const SCHEMA_FIELDS: [&str; 2] = ["inputSchema", "outputSchema"];

impl Definition {
    /// `tool` under the name `name`. `text`: `tool`'s text in its server's list, shared (not
    /// copied) when the tool keeps its own name.
    pub fn of(tool: &Value, text: Option<&SharedJson>, name: &str) -> Self {
        if tool.get("name").and_then(Value::as_str) == Some(name) {
            return match text {
                Some(text) => Self { text: text.clone(), head: Arc::new(head_of(tool)) },
                None => Self::from(tool),
            };
        }
        let mut own = tool.clone();
        own["name"] = Value::String(name.to_string());
        Self::from(&own)
    }

    /// The definition's compact JSON text (its `$defs` entries shared with every other
    /// definition that has them: [`SharedJson`]).
    pub fn text(&self) -> &SharedJson {
        &self.text
    }

    /// Every field but `inputSchema` and `outputSchema`, parsed.
    pub fn head(&self) -> &Value {
        &self.head
    }

    /// The whole definition, parsed from its text.
    pub fn value(&self) -> Value {
        self.text.parse().unwrap_or(Value::Null)
    }

    /// A field of the definition: from the head, or (a schema) parsed from the text.
    pub fn field(&self, key: &str) -> Option<Value> {
        if SCHEMA_FIELDS.contains(&key) {
            return self.value().get_mut(key).map(Value::take);
        }
        self.head.get(key).cloned()
    }

    /// The definition's `name`.
    pub fn name(&self) -> Option<&str> {
        self.head.get("name").and_then(Value::as_str)
    }

    /// Whether its text is `text` itself (shared with a server's list, not copied).
    pub fn shares(&self, text: &SharedJson) -> bool {
        self.text.ptr_eq(text)
    }

    /// Bytes of its text.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

impl From<&Value> for Definition {
    fn from(value: &Value) -> Self {
        Self { text: SharedJson::of(value), head: Arc::new(head_of(value)) }
    }
}

/// Every field of `definition` but its schemas.
fn head_of(definition: &Value) -> Value {
    match definition {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !SCHEMA_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl From<Value> for Definition {
    fn from(value: Value) -> Self {
        Self::from(&value)
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
