//! Argument validation against a tool's `inputSchema` (JSON Schema 2020-12 unless the schema
//! names another draft), with the `jsonschema` crate. Each distinct schema is shared by every
//! tool that has it (keyed by schema hash) and compiled at its tool's first call, not when the
//! catalogue is built: a catalogue of thousands of tools (an OpenAPI document's) holds compiled
//! validators only for the tools that are called. Remote `$ref`s are never fetched: the crate
//! is built without its HTTP resolver, so a schema that needs one fails to compile, and such a
//! tool is forwarded unvalidated with a warning (logged at that first call).
//! Missing optional arguments that have a `default` are filled in before forwarding, through
//! local `$ref`s (`#/$defs/…`) as through inlined schemas.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use serde_json::{Value, json};

use crate::protocol::param_headers;
use crate::shared_json::SharedJson;

/// A compiled input schema.
pub struct ArgumentSchema {
    /// Compiled at the first check (`None` inside: the schema does not compile).
    validator: OnceLock<Option<jsonschema::Validator>>,
    /// The tool that first had the schema (named in the warning if it does not compile).
    tool: String,
    /// The schema as JSON text, parsed again to compile it: a catalogue holds thousands of
    /// schemas and compiles the few called, and text is a fraction of a value's memory (its
    /// `$defs` entries shared with the definitions that have them, [`SharedJson`]).
    text: SharedJson,
    /// The schema as a value, kept only when calls read it (`x-mcp-header` annotations).
    value: Option<Value>,
    /// The schema's `default`s, gathered once: a call's arguments are walked only along the
    /// properties that have one (or lead to one), and none of the schema's maps is searched.
    defaults: Defaults,
    /// Whether some property is annotated with `x-mcp-header` ([`param_headers::declared`]).
    param_headers: bool,
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let compiled = self.validator.get().map(Option::is_some);
        f.debug_struct("ArgumentSchema").field("compiled", &compiled).finish()
    }
}

impl ArgumentSchema {
    /// Compiles a schema now; the second value is the reason it could not be compiled.
    pub fn compile(schema: &Value) -> (Self, Option<String>) {
        let (validator, problem) = build(schema);
        let compiled = Self::lazy(schema, "");
        let _ = compiled.validator.set(validator);
        (compiled, problem)
    }

    /// A schema compiled at its first [`Self::check`] (`tool` is named in the warning logged
    /// then if it does not compile).
    pub fn lazy(schema: &Value, tool: &str) -> Self {
        let param_headers = param_headers::declared(schema);
        Self {
            validator: OnceLock::new(),
            tool: tool.to_string(),
            text: SharedJson::of(schema),
            value: param_headers.then(|| schema.clone()),
            defaults: Defaults::of(schema, schema, 0),
            param_headers,
        }
    }

    /// Whether the schema has been compiled (a call checked against it).
    pub fn is_compiled(&self) -> bool {
        self.validator.get().is_some()
    }

    fn validator(&self) -> Option<&jsonschema::Validator> {
        self.validator
            .get_or_init(|| {
                let parsed = self.text.parse::<Value>();
                let (validator, problem) = match &parsed {
                    Ok(schema) => build(schema),
                    Err(e) => (None, Some(e.to_string())),
                };
                if let Some(reason) = problem {
                    tracing::warn!(
                        tool = %self.tool,
                        reason,
                        "inputSchema does not compile; calls are forwarded unvalidated"
                    );
                }
                validator
            })
            .as_ref()
    }

    /// The schema as a value, when calls read it (it declares `x-mcp-header` annotations).
    pub fn value(&self) -> Option<&Value> {
        self.value.as_ref()
    }

    /// The schema's text (what it is kept as).
    pub fn text(&self) -> &SharedJson {
        &self.text
    }

    /// Whether calls of this tool may carry `Mcp-Param-*` headers (see [`param_headers`]).
    pub fn declares_param_headers(&self) -> bool {
        self.param_headers
    }

    /// Fills defaults into `arguments` and validates them. `Err` lists every violation as
    /// `{"path": JSON pointer, "message": …}`.
    pub fn check(&self, arguments: &mut Value) -> Result<(), Vec<Value>> {
        self.defaults.fill(arguments);
        let Some(validator) = self.validator() else {
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

/// The validator of `schema`, or why it cannot be built.
fn build(schema: &Value) -> (Option<jsonschema::Validator>, Option<String>) {
    let mut options = jsonschema::options();
    if schema.get("$schema").is_none() {
        options = options.with_draft(jsonschema::Draft::Draft202012);
    }
    match options.build(schema) {
        Ok(validator) => (Some(validator), None),
        Err(e) => (None, Some(e.to_string())),
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

    /// `root` is the whole schema: a property given as a local `$ref` (`#/$defs/X`, any
    /// pointer into the root) is read where it points, so defaults below a shared definition
    /// are filled as they were when the definition was inlined (`MAX_DEPTH` ends a cycle).
    fn of(schema: &Value, root: &Value, depth: usize) -> Self {
        if depth > Self::MAX_DEPTH {
            return Self::default();
        }
        let schema = followed(schema, root);
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Self::default();
        };
        let properties = properties
            .iter()
            .map(|(name, property)| DefaultedProperty {
                name: name.clone(),
                default: property.get("default").or_else(|| followed(property, root).get("default")).cloned(),
                nested: Self::of(property, root, depth + 1),
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

/// `schema` with its local `$ref` followed (a few hops; a ref that leads nowhere local: the
/// schema as it is).
fn followed<'a>(mut schema: &'a Value, root: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let Some(pointer) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'))
        else {
            break;
        };
        match if pointer.is_empty() { Some(root) } else { root.pointer(pointer) } {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// Schemas shared across tools and refreshes, keyed by schema hash (each compiled at its
/// first check).
#[derive(Debug, Default)]
pub struct SchemaCache {
    compiled: Mutex<HashMap<String, Arc<ArgumentSchema>>>,
}

impl SchemaCache {
    /// The schema for `hash`: the one already shared, else `schema` (compiled at its first
    /// check).
    pub fn get_or_compile(&self, hash: &str, schema: &Value, tool: &str) -> Arc<ArgumentSchema> {
        if let Some(found) = self.compiled.lock().ok().and_then(|c| c.get(hash).cloned()) {
            return found;
        }
        let shared = Arc::new(ArgumentSchema::lazy(schema, tool));
        if let Ok(mut cache) = self.compiled.lock() {
            cache.insert(hash.to_string(), shared.clone());
        }
        shared
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

    /// `schema` with every local `$ref` replaced by what it points to (no cycles in it).
    fn inlined(schema: &Value, root: &Value) -> Value {
        match schema {
            Value::Object(map) => {
                let mut out = serde_json::Map::new();
                if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                    let found = root.pointer(target.trim_start_matches('#')).expect("local ref");
                    if let Value::Object(body) = inlined(found, root) {
                        out.extend(body);
                    }
                }
                for (key, value) in map.iter().filter(|(k, _)| *k != "$ref" && *k != "$defs") {
                    out.insert(key.clone(), inlined(value, root));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| inlined(i, root)).collect()),
            other => other.clone(),
        }
    }

    #[test]
    fn a_schema_with_defs_accepts_refuses_and_fills_exactly_as_inlined() {
        let shared = json!({
            "type": "object",
            "properties": {
                "owner": {"$ref": "#/$defs/User"},
                "members": {"type": "array", "items": {"$ref": "#/$defs/User"}},
                "settings": {"$ref": "#/$defs/Settings", "description": "beside the ref"},
                "name": {"type": "string", "minLength": 1}
            },
            "required": ["name"],
            "$defs": {
                "User": {"type": "object", "properties": {
                    "login": {"type": "string", "pattern": "^[a-z]+$"},
                    "site": {"type": ["string", "null"]},
                    "role": {"$ref": "#/$defs/Role"}
                }, "required": ["login"]},
                "Role": {"type": "string", "enum": ["admin", "member"], "default": "member"},
                "Settings": {"allOf": [{"$ref": "#/$defs/Visibility"}, {"type": "object", "properties": {"wiki": {"type": "boolean", "default": true}}}]},
                "Visibility": {"type": "object", "properties": {"visibility": {"type": "string", "enum": ["public", "private"], "default": "public"}}}
            }
        });
        let flat = inlined(&shared, &shared);
        assert!(!flat.to_string().contains("$ref"), "{flat}");
        let (with_refs, problem) = ArgumentSchema::compile(&shared);
        assert!(problem.is_none(), "{problem:?}");
        let (without, _) = ArgumentSchema::compile(&flat);
        let corpus = [
            json!({"name": "x"}),
            json!({}),
            json!({"name": ""}),
            json!({"name": "x", "owner": {"login": "ana"}}),
            json!({"name": "x", "owner": {"login": "Ana"}}),
            json!({"name": "x", "owner": {}}),
            json!({"name": "x", "owner": {"login": "ana", "site": null}}),
            json!({"name": "x", "owner": {"login": "ana", "site": 3}}),
            json!({"name": "x", "owner": {"login": "ana", "role": "admin"}}),
            json!({"name": "x", "owner": {"login": "ana", "role": "owner"}}),
            json!({"name": "x", "members": [{"login": "a"}, {"login": "b", "role": "admin"}]}),
            json!({"name": "x", "members": [{"login": "a"}, {"role": "admin"}]}),
            json!({"name": "x", "members": "ana"}),
            json!({"name": "x", "settings": {}}),
            json!({"name": "x", "settings": {"visibility": "secret"}}),
            json!({"name": "x", "settings": {"wiki": "yes"}}),
            json!({"name": "x", "settings": {"visibility": "private", "wiki": false}}),
            json!({"name": 3, "owner": {"login": 4}, "settings": []}),
        ];
        for arguments in corpus {
            let (mut a, mut b) = (arguments.clone(), arguments.clone());
            let (ra, rb) = (with_refs.check(&mut a), without.check(&mut b));
            assert_eq!(ra.is_ok(), rb.is_ok(), "{arguments}: {ra:?} vs {rb:?}");
            assert_eq!(
                ra.err().map(|e| e.len()),
                rb.err().map(|e| e.len()),
                "{arguments}: as many violations"
            );
            assert_eq!(a, b, "{arguments}: the same defaults filled");
        }
        let mut filled = json!({"name": "x", "owner": {"login": "ana"}, "settings": {}});
        with_refs.check(&mut filled).unwrap();
        assert_eq!(filled["owner"]["role"], "member", "a default below a $ref is filled");
    }

    #[test]
    fn schemas_compile_at_their_first_check() {
        let cache = SchemaCache::default();
        let schema = cache.get_or_compile("h", &search_schema(), "t");
        assert!(!schema.is_compiled(), "nothing compiled while the catalogue is built");
        assert!(schema.check(&mut json!({"query": 3})).is_err());
        assert!(schema.is_compiled());
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let (_, problem) = ArgumentSchema::compile(&json!({"$ref": "https://example.com/schema.json"}));
        assert!(problem.is_some());
    }
}
