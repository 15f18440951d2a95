//! Helpers every format shares: the tool's description, the root `inputSchema`, local `$ref`
//! lookup, and the per-tool warning list (one line per kind of change, with where it
//! happened), so a report stays short enough to read even for a schema-heavy tool.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Changes made to one tool, grouped: what was done → the schema paths it was done at.
#[derive(Debug, Default)]
pub struct Notes {
    by_kind: BTreeMap<String, Vec<String>>,
}

/// At most this many paths are listed per kind of change.
const MAX_PATHS: usize = 4;

impl Notes {
    pub fn add(&mut self, what: impl Into<String>, path: &str) {
        let paths = self.by_kind.entry(what.into()).or_default();
        let shown = if path.is_empty() { "/".to_string() } else { path.to_string() };
        if !paths.contains(&shown) {
            paths.push(shown);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// One line per kind: `what (at /a, /b, +3 more)`.
    pub fn into_lines(self) -> Vec<String> {
        self.by_kind
            .into_iter()
            .map(|(what, paths)| {
                let more = paths.len().saturating_sub(MAX_PATHS);
                let mut at = paths.into_iter().take(MAX_PATHS).collect::<Vec<_>>().join(", ");
                if more > 0 {
                    at.push_str(&format!(", +{more} more"));
                }
                format!("{what} (at {at})")
            })
            .collect()
    }
}

/// The tool's description, else its title, else `annotations.title`.
pub fn description(tool: &Value) -> Option<String> {
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    text(tool.get("description"))
        .or_else(|| text(tool.get("title")))
        .or_else(|| text(tool.get("annotations").and_then(|a| a.get("title"))))
        .map(str::to_string)
}

/// The tool's `inputSchema` as an object schema: a missing or non-object schema becomes
/// `{"type":"object"}`, a missing root `type` is set to `object` (every model API requires
/// an object at the root; MCP does too, so this only repairs a non-conforming server).
pub fn root_schema(tool: &Value, notes: &mut Notes) -> Value {
    match tool.get("inputSchema") {
        Some(Value::Object(schema)) => {
            let mut schema = schema.clone();
            match schema.get("type") {
                Some(Value::String(t)) if t == "object" => {}
                None => {
                    notes.add("root type missing: set to object", "");
                    schema.insert("type".into(), json!("object"));
                }
                Some(other) => {
                    notes.add(format!("root type {other} is not object: set to object"), "");
                    schema.insert("type".into(), json!("object"));
                }
            }
            Value::Object(schema)
        }
        Some(_) => {
            notes.add("inputSchema is not an object: replaced by an empty object schema", "");
            json!({"type": "object"})
        }
        None => json!({"type": "object"}),
    }
}

/// The target of a local `$ref` (`#`, `#/$defs/X`, `#/definitions/X`, any JSON pointer into
/// the root); `None` for remote or broken references.
pub fn lookup<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() { Some(root) } else { root.pointer(pointer) }
}

/// `path` + `/key` (JSON pointer, `~` and `/` escaped).
pub fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// A copy of `object` without `keys`.
pub fn without(object: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    object.iter().filter(|(k, _)| !keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_group_by_kind_and_cap_paths() {
        let mut notes = Notes::default();
        for p in ["/a", "/b", "/c", "/d", "/e", "/a"] {
            notes.add("format dropped", p);
        }
        notes.add("oneOf became anyOf", "");
        assert_eq!(
            notes.into_lines(),
            vec![
                "format dropped (at /a, /b, /c, /d, +1 more)".to_string(),
                "oneOf became anyOf (at /)".into()
            ]
        );
    }

    #[test]
    fn refs_resolve_locally_only() {
        let root = json!({"$defs": {"a/b": {"type": "string"}}, "definitions": {"x": {"type": "integer"}}});
        assert_eq!(lookup(&root, "#/$defs/a~1b"), Some(&json!({"type": "string"})));
        assert_eq!(lookup(&root, "#/definitions/x"), Some(&json!({"type": "integer"})));
        assert!(lookup(&root, "https://example.com/s.json").is_none());
        assert_eq!(lookup(&root, "#"), Some(&root));
    }
}
