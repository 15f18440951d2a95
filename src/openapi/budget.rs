//! A document's text into a JSON value within a memory budget, counted while the parser
//! produces the value, so nothing beyond the budget is ever built.
//!
//! Why: YAML aliases repeat a node without repeating its text. A nested "billion laughs" is
//! caught by the YAML parser's own repetition limit, but a wide one is not: one anchor of
//! 20,000 items referenced 20,000 times is ~100 KB of text and 4×10⁸ values, enough to abort
//! the process on allocation. JSON has no aliases, yet its values are not equally cheap
//! either: `[{"a":1},…]` costs a map node (~640 bytes) per 8 bytes of text.
//!
//! How: the value is built by our own [`serde::de::DeserializeSeed`] (not `Value`'s
//! `Deserialize`) over the same parsers as before (`serde_norway`, `serde_json`), and every
//! value it is handed — every alias expansion included, since the YAML parser replays an
//! anchor's events on each alias — is charged its estimated heap cost before it is kept.
//! Past the budget the parse stops with an error: the work done is bounded by the budget
//! too (the replay is cut short), and aliases stay usable within it. One budget covers a
//! document and every file its `$ref`s pull in.
//!
//! The estimate is an upper bound of what `serde_json::Value` (no `preserve_order`) holds:
//! a slot per value (array slots counted twice for a `Vec`'s spare capacity), a whole B-tree
//! leaf per map plus twice an entry's size per entry (B-tree nodes are at least half full),
//! and every string's bytes plus an allocation overhead.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The budget is this many times `max_spec_bytes`. Real documents parse to ~20-25 times their
/// size by this estimate (Microsoft Graph v1.0, 20.3 MB: 22.5×; GitHub's REST API, 5.7 MB:
/// 25.1×): serde_json's maps cost a whole B-tree node each, however few their entries.
pub const BUDGET_FACTOR: usize = 32;
/// The smallest budget (small `max_spec_bytes` settings still parse a small document).
const MIN_BUDGET: usize = 1 << 20;

const SLOT: usize = std::mem::size_of::<Value>();
const KEY: usize = std::mem::size_of::<String>();
/// An array element: its slot, and as much spare capacity at worst.
const ARRAY_ELEMENT: usize = 2 * SLOT;
/// A map entry: key and value slots, twice (B-tree nodes are at least half full).
const MAP_ENTRY: usize = 2 * (KEY + SLOT);
/// A map's first node: a B-tree leaf of 11 entries and its header.
const MAP_NODE: usize = 11 * (KEY + SLOT) + 32;
/// What one heap allocation costs beyond its bytes.
const ALLOCATION: usize = 16;

/// What is left of a document's budget (shared by the document and the files it refers to).
#[derive(Debug, Clone)]
pub struct Budget {
    total: usize,
    left: usize,
}

impl Budget {
    /// The budget of a document of at most `max_spec_bytes`: `BUDGET_FACTOR` times that
    /// (1 GiB at the default 32 MiB), at least 1 MiB.
    pub fn for_spec_bytes(max_spec_bytes: usize) -> Self {
        let total = max_spec_bytes.saturating_mul(BUDGET_FACTOR).max(MIN_BUDGET);
        Self { total, left: total }
    }

    /// The whole budget in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    fn charge<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(E::custom(format!(
                    "the document's values exceed the parse budget of {} bytes ({BUDGET_FACTOR} × max_spec_bytes): \
                     YAML aliases that repeat too much, or too many small values",
                    self.total
                )))
            }
        }
    }
}

/// Where a value sits in what is parsed, for what is never read ([`Place::child`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The root of an OpenAPI document.
    Document,
    /// Its `components`.
    Components,
    /// Anything else (and the root of a file a `$ref` reaches).
    Any,
}

impl Place {
    /// Where the value under `key` sits; `None`: a part no tool is mapped from, read past
    /// without building it (serde_json skips its text; the YAML parser skips its events, an
    /// alias without replaying it: the work is bounded by the text). Those parts are the
    /// document's webhooks (`webhooks`, `x-webhooks`: requests the API sends, not
    /// operations) and its Example Objects (`components.examples`: referenced only from
    /// media types' `examples`, which no tool carries). GitHub's REST document: 30% of its
    /// text, about 15 MB of values at the peak of mapping it.
    fn child(self, key: &str) -> Option<Place> {
        match (self, key) {
            (Place::Document, "webhooks" | "x-webhooks") | (Place::Components, "examples") => None,
            (Place::Document, "components") => Some(Place::Components),
            _ => Some(Place::Any),
        }
    }
}

/// Parses `text` as YAML within `budget`.
pub fn yaml(text: &str, budget: &mut Budget, place: Place) -> Result<Value, serde_norway::Error> {
    budget.charge::<serde_norway::Error>(SLOT)?;
    Seed { budget, place }.deserialize(serde_norway::Deserializer::from_str(text))
}

/// Parses `text` as JSON within `budget`.
pub fn json(text: &str, budget: &mut Budget, place: Place) -> Result<Value, serde_json::Error> {
    budget.charge::<serde_json::Error>(SLOT)?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Seed { budget, place }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// One value, its own slot already charged by whoever holds it.
struct Seed<'a> {
    budget: &'a mut Budget,
    place: Place,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // As `Value` does: a non-finite number is null.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.budget.charge(v.len().saturating_add(ALLOCATION))?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.budget.charge(v.len().saturating_add(ALLOCATION))?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.charge(ALLOCATION)?;
        let mut items = Vec::new();
        loop {
            self.budget.charge(ARRAY_ELEMENT)?;
            match seq.next_element_seed(Seed { budget: &mut *self.budget, place: Place::Any })? {
                Some(item) => items.push(item),
                None => {
                    // A document holds many short arrays (enums, `required`): no spare room kept.
                    items.shrink_to_fit();
                    return Ok(Value::Array(items));
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.budget.charge(MAP_NODE)?;
        let mut map = Map::new();
        loop {
            self.budget.charge(MAP_ENTRY)?;
            let Some(key) = access.next_key_seed(KeySeed { budget: &mut *self.budget })? else {
                return Ok(Value::Object(map));
            };
            match self.place.child(&key) {
                Some(place) => {
                    let value = access.next_value_seed(Seed { budget: &mut *self.budget, place })?;
                    map.insert(key, value);
                }
                None => access.next_value::<de::IgnoredAny>().map(drop)?,
            }
        }
    }
}

/// A map key as text (YAML keys may be numbers or booleans: read as their text, as
/// `Value`'s own deserialisation does).
struct KeySeed<'a> {
    budget: &'a mut Budget,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.budget.charge(v.len().saturating_add(ALLOCATION))?;
        Ok(v.to_string())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        self.budget.charge(v.len().saturating_add(ALLOCATION))?;
        Ok(v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        self.visit_string(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        self.visit_string(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        self.visit_string(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        self.visit_string(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One anchor of `items` items referenced `refs` times: the wide alias bomb.
    fn wide_aliases(items: usize, refs: usize) -> String {
        let mut text = String::from("openapi: 3.0.3\npaths: {}\nx-a: &a [");
        text.push_str(&vec!["0"; items].join(","));
        text.push_str("]\nx-b: [");
        text.push_str(&vec!["*a"; refs].join(","));
        text.push_str("]\n");
        text
    }

    #[test]
    fn wide_aliases_stop_at_the_budget_and_small_ones_expand() {
        let bomb = wide_aliases(20_000, 20_000);
        assert!(bomb.len() < 150_000, "{} bytes", bomb.len());
        let mut budget = Budget::for_spec_bytes(bomb.len());
        let err = yaml(&bomb, &mut budget, Place::Any).unwrap_err().to_string();
        assert!(err.contains("parse budget"), "{err}");
        let mut budget = Budget::for_spec_bytes(1 << 20);
        let fine = yaml(&wide_aliases(10, 10), &mut budget, Place::Any).unwrap();
        assert_eq!(fine["x-b"][9][9], 0, "aliases within the budget expand as before");
    }

    #[test]
    fn the_values_are_those_of_value_deserialize() {
        let yaml_text = "a: 1\n2: [true, null, 1.5, -3, x]\n? [k]\n: v\nn: .nan\n";
        let mut budget = Budget::for_spec_bytes(1 << 20);
        let ours = yaml(yaml_text, &mut budget, Place::Any);
        let theirs = serde_norway::from_str::<Value>(yaml_text);
        assert_eq!(ours.is_ok(), theirs.is_ok(), "{ours:?} / {theirs:?}");
        let simple = "a: 1\n2: [true, null, 1.5, -3, x]\nn: .nan\nbig: 18446744073709551615\n";
        assert_eq!(
            yaml(simple, &mut budget, Place::Any).unwrap(),
            serde_norway::from_str::<Value>(simple).unwrap()
        );
        let json_text = r#"{"a": [1, -2, 2.5, "é\n", {"b": null}], "c": true}"#;
        assert_eq!(
            json(json_text, &mut budget, Place::Any).unwrap(),
            serde_json::from_str::<Value>(json_text).unwrap()
        );
        assert!(json("{} x", &mut budget, Place::Any).is_err(), "trailing text is refused");
    }

    #[test]
    fn a_documents_webhooks_and_example_objects_are_read_past_and_still_bounded() {
        let doc = r##"{"openapi": "3.1.0", "paths": {"/a": {"get": {"responses": {"200": {"content": {"application/json":
            {"examples": {"e": {"$ref": "#/components/examples/big"}}}}}}}}},
            "webhooks": {"w": {"post": {}}}, "x-webhooks": [1, 2],
            "components": {"examples": {"big": {"value": [1, 2, 3]}}, "schemas": {"examples": {"type": "string"}}},
            "x-other": {"webhooks": 1, "components": {"examples": 2}}}"##;
        let mut budget = Budget::for_spec_bytes(1 << 20);
        let root = json(doc, &mut budget, Place::Document).unwrap();
        for unread in ["/webhooks", "/x-webhooks", "/components/examples"] {
            assert!(root.pointer(unread).is_none(), "{unread} is not built");
        }
        // Only at those places: a schema named `examples`, a media type's `examples`, and the
        // same keys anywhere else are kept.
        for kept in [
            "/components/schemas/examples",
            "/paths/~1a/get/responses/200/content/application~1json/examples",
            "/x-other/webhooks",
            "/x-other/components/examples",
        ] {
            assert!(root.pointer(kept).is_some(), "{kept} is kept");
        }
        let yaml_doc =
            "openapi: 3.0.3\npaths: {}\nwebhooks: {w: 1}\ncomponents:\n  examples: {e: 1}\n  schemas: {}\n";
        let root = yaml(yaml_doc, &mut budget, Place::Document).unwrap();
        assert!(root.get("webhooks").is_none() && root.pointer("/components/examples").is_none());
        assert!(root.pointer("/components/schemas").is_some());
        // A file a `$ref` reaches is read whole.
        let file =
            json(r#"{"webhooks": 1, "components": {"examples": 2}}"#, &mut budget, Place::Any).unwrap();
        assert_eq!(file["components"]["examples"], 2);
        // An alias read past is not replayed: the wide alias bomb there parses within a budget
        // its expansion (4×10⁸ values) would pass many times over.
        let bomb = wide_aliases(20_000, 20_000).replace("x-b:", "webhooks:");
        let mut budget = Budget::for_spec_bytes(bomb.len());
        let root = yaml(&bomb, &mut budget, Place::Document).unwrap();
        assert!(root.get("webhooks").is_none());
        assert_eq!(root["x-a"].as_array().map(Vec::len), Some(20_000));
        // Nor is anything read past built or charged: many values there fit the smallest budget.
        let many = format!(r#"{{"webhooks": [{}]}}"#, vec![r#"{"a":1}"#; 20_000].join(","));
        let mut budget = Budget::for_spec_bytes(many.len() / 64);
        assert!(json(&many, &mut budget, Place::Document).is_ok());
        assert!(json(&many, &mut budget, Place::Any).is_err(), "built, they pass it");
    }

    #[test]
    fn small_maps_cost_their_node_in_json_too() {
        let many = format!("[{}]", vec![r#"{"a":1}"#; 20_000].join(","));
        let mut budget = Budget::for_spec_bytes(many.len() / 64);
        assert!(budget.total() < 20_000 * MAP_NODE);
        let err = json(&many, &mut budget, Place::Any).unwrap_err().to_string();
        assert!(err.contains("parse budget"), "{err}");
    }
}
