//! A document's schemas made self-contained for a tool definition: every `$ref` inlined
//! (`allOf`/`oneOf`/`anyOf` and every other keyword kept), OpenAPI 3.0's `nullable` turned
//! into JSON Schema's `"null"` type, OpenAPI-only keywords (`discriminator`, `xml`,
//! `externalDocs`) dropped.
//!
//! Bounded: a ref back to a schema being inlined (a recursive type) becomes `{}` (any value)
//! with a `$comment` naming it; nesting deeper than `max_schema_depth` or an inlined schema of
//! more than [`MAX_NODES`] values, or the schemas of one operation together of more than
//! [`MAX_OPERATION_NODES`] values or [`MAX_STRING_BYTES`] of strings (refs reused many times
//! grow them exponentially; data keywords like `enum` are counted too), makes the
//! operation unmappable instead of the gateway slow.

use serde_json::{Map, Value, json};

use super::document::{Documents, Location};

/// Most JSON values one inlined schema may hold.
pub const MAX_NODES: usize = 100_000;
/// Most bytes of strings the schemas of one operation may hold once inlined (data keywords
/// such as `enum` and `example` included: a ref reused many times copies them each time).
pub const MAX_STRING_BYTES: usize = 8 << 20;
/// Most JSON values the schemas of one operation may hold together (its parameters, body and
/// answer: each bounded by [`MAX_NODES`], but an operation may have many).
pub const MAX_OPERATION_NODES: usize = 4 * MAX_NODES;

/// Keywords whose value is data, not a schema: never walked for refs.
const DATA_KEYWORDS: [&str; 6] = ["example", "examples", "enum", "const", "default", "required"];
/// Keywords whose value maps names to schemas (the names are not keywords).
const SCHEMA_MAPS: [&str; 5] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/// OpenAPI keywords that are not JSON Schema.
const DROPPED: [&str; 3] = ["discriminator", "xml", "externalDocs"];

pub struct Inliner<'a> {
    docs: &'a mut Documents,
    max_depth: usize,
    /// The refs being inlined, outermost first (a ref found again is a cycle).
    stack: Vec<String>,
    nodes: usize,
    /// Values and string bytes inlined for the current operation ([`Inliner::begin_operation`]).
    operation_nodes: usize,
    bytes: usize,
}

impl<'a> Inliner<'a> {
    pub fn new(docs: &'a mut Documents, max_depth: usize) -> Self {
        Self { docs, max_depth, stack: Vec::new(), nodes: 0, operation_nodes: 0, bytes: 0 }
    }

    pub fn docs(&mut self) -> &mut Documents {
        self.docs
    }

    /// `schema` (found in the document at `from`) with its refs inlined.
    pub fn inline(&mut self, from: &Location, schema: &Value) -> Result<Value, String> {
        self.nodes = 0;
        self.walk(from, schema, 0)
    }

    /// Starts the count of what one operation's schemas may hold together.
    pub fn begin_operation(&mut self) {
        self.operation_nodes = 0;
        self.bytes = 0;
    }

    fn walk(&mut self, from: &Location, value: &Value, depth: usize) -> Result<Value, String> {
        if depth > self.max_depth {
            return Err(format!("a schema is nested deeper than max_schema_depth ({})", self.max_depth));
        }
        self.nodes += 1;
        self.operation_nodes += 1;
        self.bounded()?;
        match value {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    return self.referenced(from, reference, map, depth);
                }
                let mut out = Map::new();
                for (key, child) in map {
                    if DROPPED.contains(&key.as_str()) || key == "nullable" {
                        continue;
                    }
                    let inlined = if DATA_KEYWORDS.contains(&key.as_str()) || key.starts_with("x-") {
                        self.count(child)?;
                        child.clone()
                    } else if SCHEMA_MAPS.contains(&key.as_str()) && child.is_object() {
                        let mut named = Map::new();
                        for (name, schema) in child.as_object().into_iter().flatten() {
                            named.insert(name.clone(), self.walk(from, schema, depth + 1)?);
                        }
                        Value::Object(named)
                    } else {
                        self.walk(from, child, depth + 1)?
                    };
                    out.insert(key.clone(), inlined);
                }
                if map.get("nullable") == Some(&Value::Bool(true)) {
                    nullable(&mut out);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => items
                .iter()
                .map(|item| self.walk(from, item, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => {
                self.count(other)?;
                Ok(other.clone())
            }
        }
    }

    /// Counts what copying `value` as it is adds (its values beyond the one counted by
    /// `walk`, and its strings' bytes), stopping at the first bound it passes.
    fn count(&mut self, value: &Value) -> Result<(), String> {
        let mut pending = vec![value];
        while let Some(value) = pending.pop() {
            match value {
                Value::String(text) => self.bytes += text.len(),
                Value::Array(items) => {
                    self.nodes += items.len();
                    self.operation_nodes += items.len();
                    pending.extend(items);
                }
                Value::Object(map) => {
                    self.nodes += map.len();
                    self.operation_nodes += map.len();
                    self.bytes += map.keys().map(String::len).sum::<usize>();
                    pending.extend(map.values());
                }
                _ => {}
            }
            self.bounded()?;
        }
        Ok(())
    }

    fn bounded(&self) -> Result<(), String> {
        if self.nodes > MAX_NODES {
            return Err(format!("a schema holds more than {MAX_NODES} values once its $refs are inlined"));
        }
        if self.operation_nodes > MAX_OPERATION_NODES {
            return Err(format!(
                "the operation's schemas hold more than {MAX_OPERATION_NODES} values once their $refs are inlined"
            ));
        }
        if self.bytes > MAX_STRING_BYTES {
            return Err(format!(
                "the operation's schemas hold more than {MAX_STRING_BYTES} bytes of strings once their $refs are inlined"
            ));
        }
        Ok(())
    }

    fn referenced(
        &mut self,
        from: &Location,
        reference: &str,
        map: &Map<String, Value>,
        depth: usize,
    ) -> Result<Value, String> {
        let found = self.docs.resolve(from, reference)?;
        if self.stack.contains(&found.key) {
            return Ok(json!({"$comment": format!("recursive reference to {reference}, not expanded")}));
        }
        // Walked where it is in its document (held by this Arc), not copied first.
        let document = found.value.clone();
        let target = document.pointer(&found.pointer).unwrap_or(&Value::Null);
        self.stack.push(found.key);
        let inlined = self.walk(&found.doc, target, depth + 1);
        self.stack.pop();
        let mut inlined = inlined?;
        // OpenAPI 3.1 allows keywords beside a `$ref` (a description, say): they win.
        if let Value::Object(out) = &mut inlined {
            for (key, sibling) in map.iter().filter(|(k, _)| k.as_str() != "$ref") {
                out.insert(key.clone(), self.walk(from, sibling, depth + 1)?);
            }
        }
        Ok(inlined)
    }
}

/// OpenAPI 3.0's `nullable: true`: `"null"` added to the type (or the schema made an `anyOf`
/// with `{"type": "null"}` when it has no type).
fn nullable(schema: &mut Map<String, Value>) {
    match schema.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            schema.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push(json!("null"));
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(schema));
            schema.insert("anyOf".into(), json!([inner, {"type": "null"}]));
        }
    }
}

/// Whether a schema describes a JSON object with named properties (`type: object` or no type
/// and `properties`), and nothing that would make it something else.
pub fn is_plain_object(schema: &Value) -> bool {
    let typed_object = match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        None => schema.get("properties").is_some(),
        _ => false,
    };
    typed_object && ["allOf", "oneOf", "anyOf", "not", "if", "$ref"].iter().all(|k| schema.get(k).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(components: Value) -> Documents {
        Documents::new(
            Location::Url("http://x/doc".into()),
            json!({"components": {"schemas": components}}),
            0,
            1 << 20,
        )
    }

    #[test]
    fn refs_are_inlined_and_cycles_cut() {
        let mut docs = docs(json!({
            "Node": {"type": "object", "properties": {"name": {"type": "string", "nullable": true}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
            "Pet": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"type": "string"}], "discriminator": {"propertyName": "x"}}
        }));
        let from = docs.root().clone();
        let mut inliner = Inliner::new(&mut docs, 32);
        let pet = inliner
            .inline(&from, &json!({"$ref": "#/components/schemas/Pet", "description": "a pet"}))
            .unwrap();
        assert_eq!(pet["description"], "a pet");
        assert!(pet.get("discriminator").is_none());
        let node = &pet["oneOf"][0];
        assert_eq!(node["properties"]["name"]["type"], json!(["string", "null"]));
        let child = &node["properties"]["children"]["items"];
        assert!(child["$comment"].as_str().unwrap().contains("recursive"), "{child}");
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let mut docs = docs(
            json!({"A": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}}),
        );
        let from = docs.root().clone();
        let err =
            Inliner::new(&mut docs, 3).inline(&from, &json!({"$ref": "#/components/schemas/A"})).unwrap_err();
        assert!(err.contains("max_schema_depth (3)"), "{err}");
        // Each level refers to the next twice: 2^20 copies once inlined.
        let mut levels = Map::new();
        for i in 0..20 {
            let next = format!("#/components/schemas/L{}", i + 1);
            levels.insert(format!("L{i}"), json!({"allOf": [{"$ref": next}, {"$ref": next}]}));
        }
        levels.insert("L20".into(), json!({"type": "string"}));
        let mut docs = self::docs(Value::Object(levels));
        let err = Inliner::new(&mut docs, 64)
            .inline(&from, &json!({"$ref": "#/components/schemas/L0"}))
            .unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }
}
