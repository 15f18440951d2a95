//! Argument validation against a tool's `inputSchema` (JSON Schema 2020-12 unless the schema
//! names another draft), with the `jsonschema` crate. Each distinct schema is compiled once
//! and shared by every tool that has it (keyed by schema hash). Remote `$ref`s are never
//! fetched: the crate is built without its HTTP resolver, so a schema that needs one fails
//! to compile, and such a tool is forwarded unvalidated with a warning.
//! Missing optional arguments that have a `default` are filled in before forwarding.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use serde_json::{Map, Value, json};

use crate::protocol::param_headers;

/// A compiled input schema.
pub struct ArgumentSchema {
    validator: Option<jsonschema::Validator>,
    schema: Value,
    /// Whether some property (through `properties`) has a `default`: without one, a call's
    /// arguments are not walked to fill any.
    has_defaults: bool,
    /// Whether some property is annotated with `x-mcp-header` ([`param_headers::declared`]).
    param_headers: bool,
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentSchema").field("compiled", &self.validator.is_some()).finish()
    }
}

impl ArgumentSchema {
    /// Compiles a schema; `Err` carries the reason it could not be compiled.
    pub fn compile(schema: &Value) -> (Self, Option<String>) {
        let mut options = jsonschema::options();
        if schema.get("$schema").is_none() {
            options = options.with_draft(jsonschema::Draft::Draft202012);
        }
        let (validator, problem) = match options.build(schema) {
            Ok(validator) => (Some(validator), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let compiled = Self {
            validator,
            schema: schema.clone(),
            has_defaults: has_defaults(schema, 0),
            param_headers: param_headers::declared(schema),
        };
        (compiled, problem)
    }

    /// The schema as given (what it was compiled from).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether calls of this tool may carry `Mcp-Param-*` headers (see [`param_headers`]).
    pub fn declares_param_headers(&self) -> bool {
        self.param_headers
    }

    /// Fills defaults into `arguments` and validates them. `Err` lists every violation as
    /// `{"path": JSON pointer, "message": …}`.
    pub fn check(&self, arguments: &mut Value) -> Result<(), Vec<Value>> {
        if self.has_defaults {
            fill_defaults(&self.schema, arguments);
        }
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        if validator.is_valid(arguments) {
            return Ok(());
        }
        Err(validator
            .iter_errors(arguments)
            .map(|e| json!({"path": e.instance_path().to_string(), "message": e.to_string()}))
            .collect())
    }
}

/// Whether [`fill_defaults`] can ever insert anything for this schema.
fn has_defaults(schema: &Value, depth: usize) -> bool {
    // Deeper than any real schema; past it, assume defaults (fill_defaults then decides).
    if depth > 64 {
        return true;
    }
    schema.get("properties").and_then(Value::as_object).is_some_and(|properties| {
        properties.values().any(|p| p.get("default").is_some() || has_defaults(p, depth + 1))
    })
}

/// Inserts `default` values of absent properties, recursing into present objects.
fn fill_defaults(schema: &Value, instance: &mut Value) {
    let (Some(properties), Value::Object(object)) =
        (schema.get("properties").and_then(Value::as_object), instance)
    else {
        return;
    };
    for (key, property) in properties {
        match object.get_mut(key) {
            Some(present) => fill_defaults(property, present),
            None => {
                if let Some(default) = property.get("default") {
                    object.insert(key.clone(), default.clone());
                }
            }
        }
    }
}

/// Compiled schemas shared across tools and refreshes, keyed by schema hash.
#[derive(Debug, Default)]
pub struct SchemaCache {
    compiled: Mutex<HashMap<String, Arc<ArgumentSchema>>>,
}

impl SchemaCache {
    /// The compiled schema for `hash`, compiling `schema` on first use.
    pub fn get_or_compile(&self, hash: &str, schema: &Value, tool: &str) -> Arc<ArgumentSchema> {
        if let Some(found) = self.compiled.lock().ok().and_then(|c| c.get(hash).cloned()) {
            return found;
        }
        let (compiled, problem) = ArgumentSchema::compile(schema);
        if let Some(reason) = problem {
            tracing::warn!(
                tool,
                schema_hash = hash,
                reason,
                "inputSchema does not compile; calls are forwarded unvalidated"
            );
        }
        let compiled = Arc::new(compiled);
        if let Ok(mut cache) = self.compiled.lock() {
            cache.insert(hash.to_string(), compiled.clone());
        }
        compiled
    }

    /// Drops schemas no tool uses any more.
    pub fn retain(&self, live: &std::collections::HashSet<String>) {
        if let Ok(mut cache) = self.compiled.lock() {
            cache.retain(|hash, _| live.contains(hash));
        }
    }
}

/// The arguments object of a `tools/call`, defaulting to `{}`: taken out of the params (not
/// copied; the call forwards them from here on).
pub fn arguments_object(params: &mut Map<String, Value>) -> Result<Value, &'static str> {
    match params.remove("arguments") {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => Err("arguments must be an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "language": {"type": "string", "enum": ["ja", "en"], "default": "ja"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}
            },
            "required": ["query"]
        })
    }

    #[test]
    fn defaults_are_filled_and_every_violation_is_listed() {
        let (schema, problem) = ArgumentSchema::compile(&search_schema());
        assert!(problem.is_none());
        let mut ok = json!({"query": "naruto"});
        schema.check(&mut ok).unwrap();
        assert_eq!(ok, json!({"query": "naruto", "language": "ja", "max_results": 5}));
        let mut bad = json!({"language": "fr", "max_results": 99});
        let violations = schema.check(&mut bad).unwrap_err();
        assert_eq!(violations.len(), 3, "{violations:?}");
        assert!(violations.iter().any(|v| v["path"] == "/max_results"));
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let (_, problem) = ArgumentSchema::compile(&json!({"$ref": "https://example.com/schema.json"}));
        assert!(problem.is_some());
    }
}
