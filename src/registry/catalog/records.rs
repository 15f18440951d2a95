//! The record of a tool as callers are served it: the server's definition as offered, or
//! under catalogue control (a rename, fixed arguments, an override) for a configured tool or
//! a registry entry, its schema compiled through the shared cache. Separate from the build,
//! which decides which tools are served; this decides what each one's record holds.

use std::sync::Arc;

use serde_json::Value;

use super::{
    build::Candidate,
    handle::{Catalog, ServerTools},
};
use crate::shared_json::SharedJson;
use crate::{
    config::TransportKind,
    registry::{
        entry::{RegistryEntry, ServerRef},
        record::{
            Control, Definition, ToolRecord, canonical_hash, definition_hash, schema_and_definition_hashes,
        },
    },
    tool_control::{Controlled, META_TOOLS, ToolOverrides},
};

impl Catalog {
    /// The overrides of a registry entry: its own, under the configuration's for its name.
    pub(super) fn entry_overrides(&self, entry: &RegistryEntry) -> ToolOverrides {
        match self.control().overrides.get(&entry.tool_name) {
            Some(config) => config.over(&entry.overrides),
            None => entry.overrides.clone(),
        }
    }

    /// A registry entry's record as callers are served it, for a lookup of `name` below
    /// memory: `None` when the entry is hidden, renamed to another name, its overrides do not
    /// fit it, or the name is a meta-tool's in search mode.
    pub fn served_record_for_entry(&self, entry: &RegistryEntry, name: &str) -> Option<ToolRecord> {
        if self.control().search.is_some() && META_TOOLS.contains(&name) {
            return None;
        }
        let record = self.controlled_record_for_entry(entry, &self.entry_overrides(entry)).ok()??;
        (&*record.name == name).then_some(record)
    }

    pub(super) fn controlled_record_for_entry(
        &self,
        entry: &RegistryEntry,
        overrides: &ToolOverrides,
    ) -> Result<Option<ToolRecord>, String> {
        if overrides.is_empty() {
            return Ok(Some(self.record_for_entry(entry)));
        }
        let Some(controlled) = overrides.apply(&entry.tool_name, &entry.tool_definition())? else {
            return Ok(None);
        };
        let transport = TransportKind::parse(&entry.server.transport).unwrap_or(TransportKind::Http);
        let server = ServerTools { server: entry.server.name.clone(), transport, tools: Arc::default() };
        let mut record = self.build_record(&entry.tool_name, &entry.tool_name, &server, controlled);
        record.origin = Some(Arc::new(ServerRef::clone(&entry.server)));
        Ok(Some(record))
    }

    pub(super) fn controlled_record(&self, candidate: &Candidate<'_>, controlled: Controlled) -> ToolRecord {
        self.build_record(&candidate.exposed, candidate.upstream, candidate.server, controlled)
    }

    /// The record of a tool under catalogue control (`catalogue_name`: its name before a
    /// rename; the schema compiled is the one calls are checked against).
    fn build_record(
        &self,
        catalogue_name: &str,
        upstream: &str,
        server: &ServerTools,
        controlled: Controlled,
    ) -> ToolRecord {
        let Controlled { name, definition, schema, fixed } = controlled;
        let schema_hash = canonical_hash(&schema);
        let compiled = self.schemas.get_or_compile(&schema_hash, &schema, &name);
        let hint = |key: &str| {
            definition.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool).unwrap_or(false)
        };
        ToolRecord {
            upstream_name: upstream.into(),
            server: server.server.as_str().into(),
            transport: server.transport,
            definition_hash: definition_hash(&definition),
            read_only: hint("readOnlyHint"),
            idempotent: hint("idempotentHint"),
            definition: definition.into(),
            schema_hash,
            schema: compiled,
            origin: None,
            control: Some(Arc::new(Control { catalogue_name: catalogue_name.into(), fixed })),
            name: name.into(),
        }
    }

    /// The record of a registry entry as registered, without catalogue control (its schema
    /// compiled through the shared cache).
    pub fn record_for_entry(&self, entry: &RegistryEntry) -> ToolRecord {
        let transport = TransportKind::parse(&entry.server.transport).unwrap_or(TransportKind::Http);
        let server = ServerTools { server: entry.server.name.clone(), transport, tools: Arc::default() };
        let mut record =
            self.record(&entry.tool_name, &entry.tool_name, &server, &entry.tool_definition(), None);
        record.origin = Some(Arc::new(ServerRef::clone(&entry.server)));
        record
    }

    pub(super) fn record(
        &self,
        exposed: &str,
        upstream: &str,
        server: &ServerTools,
        tool: &Value,
        text: Option<&SharedJson>,
    ) -> ToolRecord {
        let definition = Definition::of(tool, text, exposed);
        let empty_schema = serde_json::json!({"type": "object"});
        let input_schema = tool.get("inputSchema").unwrap_or(&empty_schema);
        let (schema_hash, definition_hash) = schema_and_definition_hashes(tool, &empty_schema);
        let schema = self.schemas.get_or_compile(&schema_hash, input_schema, exposed);
        let hint = |key: &str| {
            tool.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool).unwrap_or(false)
        };
        ToolRecord {
            name: exposed.into(),
            upstream_name: upstream.into(),
            server: server.server.as_str().into(),
            transport: server.transport,
            definition_hash,
            definition,
            schema_hash,
            schema,
            read_only: hint("readOnlyHint"),
            idempotent: hint("idempotentHint"),
            origin: None,
            control: None,
        }
    }
}
