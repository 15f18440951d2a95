//! A document's schemas as tool schemas: kept as written, with `$ref`s pointing into a `$defs`
//! table (JSON Schema 2020-12, MCP's default dialect) instead of every component inlined into
//! every tool. OpenAPI 3.0's `nullable` becomes JSON Schema's `"null"` type, OpenAPI-only
//! keywords (`discriminator`, `xml`, `externalDocs`) are dropped.
//!
//! Why: inlined, GitHub's `repository` object was copied into hundreds of tools (and made
//! `repos/get` too large to serve at all); with refs each component is converted once per
//! document ([`Schemas`] keeps it under one `$defs` name) and each tool carries only the
//! components it reaches (`#/$defs/NAME`). A recursive type stays recursive (a `$ref` back to
//! its own definition) instead of being cut.
//!
//! Bounded: nesting deeper than `max_schema_depth` or more than [`MAX_NODES`] values within one
//! schema as written (a component or an operation's schema, each counted alone) makes that
//! schema unusable (the operation is skipped, or its output schema left out); the `$defs` a
//! tool carries are bounded by the bytes its definition may take ([`Schemas::defs`]): what
//! does not fit is cut (an open schema with a `$comment` saying why) and reported.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::document::{Documents, Location};
use crate::shared_json::json_len;

/// Most JSON values one schema as written (a component, an operation's schema) may hold.
pub const MAX_NODES: usize = 100_000;

/// Keywords whose value is data, not a schema: never walked for refs.
const DATA_KEYWORDS: [&str; 6] = ["example", "examples", "enum", "const", "default", "required"];
/// Keywords whose value maps names to schemas (the names are not keywords).
const SCHEMA_MAPS: [&str; 5] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/// OpenAPI keywords that are not JSON Schema.
const DROPPED: [&str; 3] = ["discriminator", "xml", "externalDocs"];
/// Most `$ref` hops followed to see what a schema's root is ([`Schemas::view`]).
const MAX_VIEW_HOPS: usize = 32;

/// One component a ref names: where it is, its `$defs` name, and once converted its body.
struct Slot {
    doc: Location,
    pointer: String,
    name: String,
    body: Option<Result<Def, String>>,
}

/// A converted component: its body (refs rewritten to `#/$defs/…`) as compact JSON text, the
/// slots it refers to, and its size as JSON text. Text, parsed again for each tool that carries
/// it: the converted components of a document would otherwise be a second parsed copy of its
/// `components` while it is mapped (GitHub's: about 12 MiB at the peak of mapping it).
struct Def {
    body: Box<str>,
    refs: BTreeSet<usize>,
    bytes: usize,
}

impl Def {
    /// The body parsed (it was written from a value: it parses).
    fn value(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A schema converted: the value and the components it refers to directly.
#[derive(Debug, Clone, Default)]
pub struct Converted {
    pub value: Value,
    pub refs: BTreeSet<usize>,
}

/// The `$defs` a tool schema carries, and what was cut to fit.
#[derive(Debug, Default)]
pub struct Defs {
    pub map: Map<String, Value>,
    /// Components left out (as open schemas) for the size bound.
    pub cut: Vec<String>,
    pub bytes: usize,
}

/// Every component of one document that a tool refers to, converted once.
pub struct Schemas<'a> {
    docs: &'a mut Documents,
    max_depth: usize,
    slots: Vec<Slot>,
    /// `doc#pointer` → slot.
    by_key: HashMap<String, usize>,
    names: HashSet<String>,
    /// `$defs` name → slot.
    by_name: HashMap<String, usize>,
    nodes: usize,
}

impl<'a> Schemas<'a> {
    pub fn new(docs: &'a mut Documents, max_depth: usize) -> Self {
        Self {
            docs,
            max_depth,
            slots: Vec::new(),
            by_key: HashMap::new(),
            names: HashSet::new(),
            by_name: HashMap::new(),
            nodes: 0,
        }
    }

    pub fn docs(&mut self) -> &mut Documents {
        self.docs
    }

    /// How many components have been named so far, and the bytes of those converted.
    pub fn stats(&self) -> (usize, usize) {
        let bytes = self.slots.iter().filter_map(|s| s.body.as_ref()?.as_ref().ok()).map(|d| d.bytes).sum();
        (self.slots.len(), bytes)
    }

    /// `schema` (found in the document at `from`) converted, its refs pointing into `$defs`.
    pub fn convert(&mut self, from: &Location, schema: &Value) -> Result<Converted, String> {
        self.nodes = 0;
        let mut refs = BTreeSet::new();
        let value = self.walk(from, schema, 0, &mut refs)?;
        Ok(Converted { value, refs })
    }

    fn walk(
        &mut self,
        from: &Location,
        value: &Value,
        depth: usize,
        refs: &mut BTreeSet<usize>,
    ) -> Result<Value, String> {
        if depth > self.max_depth {
            return Err(format!("a schema is nested deeper than max_schema_depth ({})", self.max_depth));
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(format!("a schema holds more than {MAX_NODES} values"));
        }
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, child) in map {
                    if DROPPED.contains(&key.as_str()) || key == "nullable" {
                        continue;
                    }
                    let converted = if key == "$ref" {
                        match child.as_str() {
                            Some(reference) => {
                                let slot = self.slot(from, reference)?;
                                refs.insert(slot);
                                json!(format!("#/$defs/{}", self.slots[slot].name))
                            }
                            None => child.clone(),
                        }
                    } else if DATA_KEYWORDS.contains(&key.as_str()) || key.starts_with("x-") {
                        child.clone()
                    } else if SCHEMA_MAPS.contains(&key.as_str()) && child.is_object() {
                        let mut named = Map::new();
                        for (name, schema) in child.as_object().into_iter().flatten() {
                            named.insert(name.clone(), self.walk(from, schema, depth + 1, refs)?);
                        }
                        Value::Object(named)
                    } else {
                        self.walk(from, child, depth + 1, refs)?
                    };
                    out.insert(key.clone(), converted);
                }
                if map.get("nullable") == Some(&Value::Bool(true)) {
                    nullable(&mut out);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => items
                .iter()
                .map(|item| self.walk(from, item, depth + 1, refs))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => Ok(other.clone()),
        }
    }

    /// The slot of the component `reference` (written in the document at `from`) names: found
    /// (a ref to nothing is an error here), named on first sight, converted later (on demand).
    fn slot(&mut self, from: &Location, reference: &str) -> Result<usize, String> {
        let found = self.docs.resolve(from, reference)?;
        if let Some(slot) = self.by_key.get(&found.key) {
            return Ok(*slot);
        }
        let last = found.pointer.rsplit('/').next().unwrap_or("");
        let last = last.replace("~1", "/").replace("~0", "~");
        let mut base: String = last
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
            .collect();
        if base.is_empty() {
            base.push_str("schema");
        }
        let mut name = base.clone();
        let mut n = 2;
        while !self.names.insert(name.clone()) {
            name = format!("{base}_{n}");
            n += 1;
        }
        let slot = self.slots.len();
        self.by_name.insert(name.clone(), slot);
        self.slots.push(Slot { doc: found.doc, pointer: found.pointer, name, body: None });
        self.by_key.insert(found.key, slot);
        Ok(slot)
    }

    /// Converts the component of `slot` if it is not yet (each one once per document).
    fn ensure(&mut self, slot: usize) -> Result<&Def, String> {
        if self.slots[slot].body.is_none() {
            let (doc, pointer) = (self.slots[slot].doc.clone(), self.slots[slot].pointer.clone());
            let document = self.docs.value_of(&doc);
            let target = document.as_ref().and_then(|d| d.pointer(&pointer)).unwrap_or(&Value::Null);
            let converted = self.convert(&doc, target).map(|c| {
                let body = c.value.to_string().into_boxed_str();
                Def { bytes: body.len(), body, refs: c.refs }
            });
            self.slots[slot].body = Some(converted);
        }
        match &self.slots[slot].body {
            Some(Ok(def)) => Ok(def),
            Some(Err(reason)) => Err(format!("{} ({})", reason, self.slots[slot].pointer)),
            None => Err("a component was not converted".into()),
        }
    }

    /// The `$defs` a schema referring to `refs` needs: every component it reaches, within
    /// `budget` bytes. When they do not fit, the nearest ones (breadth first) are kept while they
    /// fit and the others become open schemas with a `$comment` (listed in [`Defs::cut`]);
    /// `Err` when even that does not fit, or a component cannot be converted.
    pub fn defs(&mut self, refs: &BTreeSet<usize>, budget: usize) -> Result<Defs, String> {
        self.defs_within(refs, budget, true)
    }

    /// [`Self::defs`]; with `cut_allowed` false, a result that needed a cut has its `cut`
    /// listed but its `map` left empty: the caller discards it (an output schema is served
    /// whole or not at all), so no component body is copied for it. Bodies are copied once the
    /// walk is done, never for a walk whose result is thrown away.
    pub fn defs_within(
        &mut self,
        refs: &BTreeSet<usize>,
        budget: usize,
        cut_allowed: bool,
    ) -> Result<Defs, String> {
        let mut out = Defs::default();
        // In `$defs` order: a component's slot (its body) or `None` (a stub, in `cut`).
        let mut chosen: Vec<(String, Option<usize>)> = Vec::new();
        let mut queue: VecDeque<usize> = refs.iter().copied().collect();
        let mut seen: HashSet<usize> = refs.iter().copied().collect();
        let mut cutting = false;
        // The entry's overhead in `"$defs":{…}`: quotes, colon, comma.
        let entry = |name: &str, bytes: usize| name.len() + bytes + 4;
        let stub = |name: &str| json!({"$comment": format!("{name} not expanded: the tool definition would exceed max_tool_definition_bytes")});
        // A stub's bytes: its text's without the name, plus the name's (a `$defs` name is made
        // of characters JSON writes as they are, see `slot`), counted without building it.
        let stub_overhead = json_len(&stub(""));
        let stub_len = |name: &str| stub_overhead + name.len();
        // Bytes the queued components take at least (each as a stub).
        let mut queued_floor: usize = 0;
        let mut floors: HashMap<usize, usize> = HashMap::new();
        for slot in &queue {
            let name = &self.slots[*slot].name;
            let floor = entry(name, stub_len(name));
            floors.insert(*slot, floor);
            queued_floor += floor;
        }
        while let Some(slot) = queue.pop_front() {
            queued_floor -= floors.get(&slot).copied().unwrap_or(0);
            let name = self.slots[slot].name.clone();
            if !cutting {
                let (bytes, fresh) = {
                    let def = self.ensure(slot)?;
                    let fresh: Vec<usize> = def.refs.iter().copied().filter(|r| !seen.contains(r)).collect();
                    (def.bytes, fresh)
                };
                let cost = entry(&name, bytes);
                let mut fresh_floor = 0;
                for r in &fresh {
                    let n = &self.slots[*r].name;
                    fresh_floor += entry(n, stub_len(n));
                }
                if out.bytes + cost + queued_floor + fresh_floor <= budget {
                    chosen.push((name, Some(slot)));
                    out.bytes += cost;
                    for r in fresh {
                        seen.insert(r);
                        let n = &self.slots[r].name;
                        let floor = entry(n, stub_len(n));
                        floors.insert(r, floor);
                        queued_floor += floor;
                        queue.push_back(r);
                    }
                    continue;
                }
                cutting = true;
            }
            out.bytes += entry(&name, stub_len(&name));
            chosen.push((name.clone(), None));
            out.cut.push(name);
        }
        if out.bytes > budget {
            return Err(format!(
                "its schemas' components take more than the {budget} bytes its definition may still take"
            ));
        }
        if !cut_allowed && !out.cut.is_empty() {
            return Ok(out);
        }
        for (name, slot) in chosen {
            let body = match slot {
                Some(slot) => self.ensure(slot)?.value(),
                None => stub(&name),
            };
            out.map.insert(name, body);
        }
        Ok(out)
    }

    /// The components a converted value refers to (its `#/$defs/…` refs).
    pub fn refs_in(&self, value: &Value) -> BTreeSet<usize> {
        fn walk(value: &Value, by_name: &HashMap<String, usize>, out: &mut BTreeSet<usize>) {
            match value {
                Value::Object(map) => {
                    for (key, child) in map {
                        if key == "$ref"
                            && let Some(name) = child.as_str().and_then(|r| r.strip_prefix("#/$defs/"))
                            && let Some(slot) = by_name.get(name)
                        {
                            out.insert(*slot);
                        }
                        walk(child, by_name, out);
                    }
                }
                Value::Array(items) => items.iter().for_each(|i| walk(i, by_name, out)),
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        walk(value, &self.by_name, &mut out);
        out
    }

    /// What a converted schema is at its root: its `$ref`s followed (the referenced body, the
    /// keywords beside the ref laid over it), for decisions about its shape (an object? says
    /// nothing?). The refs inside stay refs.
    pub fn view(&mut self, schema: &Converted) -> Result<Converted, String> {
        let mut current = schema.clone();
        for _ in 0..MAX_VIEW_HOPS {
            let Some(target) = current.value.get("$ref").and_then(Value::as_str) else {
                return Ok(current);
            };
            let Some(name) = target.strip_prefix("#/$defs/") else { return Ok(current) };
            let Some(slot) = self.by_name.get(name).copied() else { return Ok(current) };
            let def = self.ensure(slot)?;
            let mut body = def.value();
            let mut refs = def.refs.clone();
            if let (Value::Object(out), Value::Object(siblings)) = (&mut body, &current.value) {
                for (key, sibling) in siblings.iter().filter(|(k, _)| k.as_str() != "$ref") {
                    out.insert(key.clone(), sibling.clone());
                }
            }
            refs.extend(current.refs.iter().copied().filter(|r| *r != slot));
            // The slot itself stays needed if the body refers back to it.
            current = Converted { value: body, refs };
        }
        Err(format!("more than {MAX_VIEW_HOPS} $ref hops at a schema's root"))
    }
}

/// Names by slot, for reports (tests).
#[cfg(test)]
pub(crate) fn names(schemas: &Schemas<'_>) -> std::collections::BTreeMap<usize, String> {
    schemas.slots.iter().enumerate().map(|(i, s)| (i, s.name.clone())).collect()
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
    fn refs_point_into_defs_and_recursion_stays_recursive() {
        let mut docs = docs(json!({
            "Node": {"type": "object", "properties": {"name": {"type": "string", "nullable": true}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
            "Pet": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"type": "string"}], "discriminator": {"propertyName": "x"}}
        }));
        let from = docs.root().clone();
        let mut schemas = Schemas::new(&mut docs, 32);
        let pet = schemas
            .convert(&from, &json!({"$ref": "#/components/schemas/Pet", "description": "a pet"}))
            .unwrap();
        assert_eq!(pet.value, json!({"$ref": "#/$defs/Pet", "description": "a pet"}));
        let defs = schemas.defs(&pet.refs, 1 << 20).unwrap();
        assert!(defs.cut.is_empty());
        assert!(defs.map["Pet"].get("discriminator").is_none());
        assert_eq!(defs.map["Pet"]["oneOf"][0], json!({"$ref": "#/$defs/Node"}));
        let node = &defs.map["Node"];
        assert_eq!(node["properties"]["name"]["type"], json!(["string", "null"]));
        assert_eq!(node["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        let view = schemas.view(&pet).unwrap();
        assert_eq!(view.value["description"], "a pet");
        assert!(view.value.get("oneOf").is_some());
        assert_eq!(names(&schemas).len(), 2, "each component once");
    }

    #[test]
    fn depth_is_bounded_per_schema_and_defs_by_bytes() {
        let mut docs = docs(
            json!({"A": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}}),
        );
        let from = docs.root().clone();
        let mut schemas = Schemas::new(&mut docs, 2);
        let a = schemas.convert(&from, &json!({"$ref": "#/components/schemas/A"})).unwrap();
        let err = schemas.defs(&a.refs, 1 << 20).unwrap_err();
        assert!(err.contains("max_schema_depth (2)"), "{err}");
        // Each level refers to the next twice: inlined, 2^20 copies; as refs, 21 components.
        let mut levels = Map::new();
        for i in 0..20 {
            let next = format!("#/components/schemas/L{}", i + 1);
            levels.insert(format!("L{i}"), json!({"allOf": [{"$ref": next}, {"$ref": next}]}));
        }
        levels.insert("L20".into(), json!({"type": "string"}));
        let mut docs = self::docs(Value::Object(levels));
        let mut schemas = Schemas::new(&mut docs, 64);
        let l0 = schemas.convert(&from, &json!({"$ref": "#/components/schemas/L0"})).unwrap();
        let defs = schemas.defs(&l0.refs, 1 << 20).unwrap();
        assert_eq!(defs.map.len(), 21);
        // A small budget keeps the nearest components and cuts the rest, saying so.
        let defs = schemas.defs(&l0.refs, 1200).unwrap();
        assert!(!defs.cut.is_empty() && defs.map.contains_key("L0"), "{:?}", defs.map.keys());
        assert!(defs.bytes <= 1200);
        let last = &defs.map[defs.cut.last().unwrap().as_str()];
        assert!(last["$comment"].as_str().unwrap().contains("not expanded"), "{last}");
        // Where a cut is not allowed (an output schema: whole or nothing), the same walk says
        // what would be cut and copies no component for a result that is thrown away.
        let refused = schemas.defs_within(&l0.refs, 1200, false).unwrap();
        assert_eq!((refused.cut.clone(), refused.bytes), (defs.cut.clone(), defs.bytes));
        assert!(refused.map.is_empty(), "{:?}", refused.map.keys());
        let whole = schemas.defs_within(&l0.refs, 1 << 20, false).unwrap();
        assert_eq!(whole.map, schemas.defs(&l0.refs, 1 << 20).unwrap().map, "the same $defs when all fit");
        assert!(schemas.defs(&l0.refs, 10).is_err(), "not even the stubs fit");
    }
}
