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

use serde_json::{Value, json};

use crate::protocol::param_headers;

/// A compiled input schema.
pub struct ArgumentSchema {
    validator: Option<jsonschema::Validator>,
    schema: Value,
    /// The schema's `default`s, gathered once: a call's arguments are walked only along the
    /// properties that have one (or lead to one), and none of the schema's maps is searched.
    defaults: Defaults,
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
            defaults: Defaults::of(schema, 0),
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
        self.defaults.fill(arguments);
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

/// The `default`s of a schema's `properties`, at every depth: what [`Defaults::fill`] inserts.
#[derive(Debug, Default)]
struct Defaults {
    /// Only the properties that have a `default` or defaults below them.
    properties: Vec<DefaultedProperty>,
}

#[derive(Debug)]
struct DefaultedProperty {
    name: String,
    /// Inserted when the property is absent.
    default: Option<Value>,
    /// Filled into the property's value when it is present.
    nested: Defaults,
}

impl Defaults {
    /// Deeper than any real schema; defaults below it are not filled.
    const MAX_DEPTH: usize = 64;

    fn of(schema: &Value, depth: usize) -> Self {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Self::default();
        };
        if depth > Self::MAX_DEPTH {
            return Self::default();
        }
        let properties = properties
            .iter()
            .map(|(name, property)| DefaultedProperty {
                name: name.clone(),
                default: property.get("default").cloned(),
                nested: Self::of(property, depth + 1),
            })
            .filter(|p| p.default.is_some() || !p.nested.properties.is_empty())
            .collect();
        Self { properties }
    }

    /// Inserts the `default` of each absent property, recursing into present objects.
    fn fill(&self, instance: &mut Value) {
        if self.properties.is_empty() {
            return;
        }
        let Value::Object(object) = instance else { return };
        for property in &self.properties {
            match object.get_mut(&property.name) {
                Some(present) => property.nested.fill(present),
                None => {
                    if let Some(default) = &property.default {
                        object.insert(property.name.clone(), default.clone());
                    }
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
    fn nested_defaults_fill_present_objects_only_and_never_replace_a_value() {
        let (schema, _) = ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "page": {
                    "type": "object",
                    "default": {"size": 10},
                    "properties": {
                        "size": {"type": "integer", "default": 20},
                        "sort": {"type": "object", "properties": {"by": {"type": "string", "default": "price"}}}
                    }
                }
            }
        }));
        let mut absent = json!({"query": "x"});
        schema.check(&mut absent).unwrap();
        assert_eq!(
            absent,
            json!({"query": "x", "page": {"size": 10}}),
            "an absent object takes its own default"
        );
        let mut present = json!({"query": "x", "page": {"sort": {}}});
        schema.check(&mut present).unwrap();
        assert_eq!(present, json!({"query": "x", "page": {"size": 20, "sort": {"by": "price"}}}));
        let mut given = json!({"page": {"size": 3, "sort": {"by": "title"}}});
        schema.check(&mut given).unwrap();
        assert_eq!(given, json!({"page": {"size": 3, "sort": {"by": "title"}}}));
        let mut not_an_object = json!({"page": 7});
        let _ = schema.check(&mut not_an_object);
        assert_eq!(
            not_an_object,
            json!({"page": 7}),
            "a value of another type is left for validation to refuse"
        );
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let (_, problem) = ArgumentSchema::compile(&json!({"$ref": "https://example.com/schema.json"}));
        assert!(problem.is_some());
    }
}
