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

    /// Takes `other`'s lines, all at `path`.
    pub fn absorb(&mut self, other: Notes, path: &str) {
        for (what, paths) in other.by_kind {
            for p in paths {
                self.add(what.clone(), &format!("{path}{}", if p == "/" { "" } else { &p }));
            }
        }
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

/// The schema and description a model API gets: [`root_schema`] with a root `allOf` merged
/// and a root `oneOf`/`anyOf` flattened. Model APIs refuse unions at the root (Anthropic:
/// "input_schema does not support oneOf, allOf, or anyOf at the top level"; OpenAI: the
/// same), and the common MCP use of one — "give `id` or `isbn`" as branches that only list
/// `required` keys — is a rule about which arguments to give: the branches' properties join
/// the root's, and the rule moves to the tool description ("Give exactly one of: id | isbn.").
/// The gateway still validates every call against the original schema, so a call that
/// breaks the rule is refused with `-32602` before it reaches the server.
pub fn prepare(tool: &Value, notes: &mut Notes) -> (Value, Option<String>) {
    let mut root = root_schema(tool, notes);
    let mut description = description(tool);
    let snapshot = root.clone();
    let Value::Object(object) = &mut root else { return (root, description) };
    if let Some(Value::Array(parts)) = object.remove("allOf") {
        notes.add("allOf at the root merged (model APIs refuse it there)", "");
        for part in &parts {
            let part = resolve(&snapshot, part);
            merge_into(object, &part, true);
        }
    }
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = object.remove(key) else { continue };
        let mut alternatives = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let branch = resolve(&snapshot, branch);
            merge_into(object, &branch, false);
            let required: Vec<&str> = branch
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let label = match (required.is_empty(), branch.get("title").and_then(Value::as_str)) {
                (false, _) => required.join(" + "),
                (true, Some(title)) => title.to_string(),
                (true, None) => format!("alternative {}", i + 1),
            };
            alternatives.push(label);
        }
        let rule = if key == "oneOf" { "exactly one" } else { "at least one" };
        notes.add(
            format!("{key} at the root flattened: \"give {rule} of\" moved to the description (calls are still checked against the original schema)"),
            "",
        );
        let sentence = format!("Give {rule} of: {}.", alternatives.join(" | "));
        description = Some(match description {
            Some(d) => format!("{d} {sentence}"),
            None => sentence,
        });
    }
    (root, description)
}

/// A branch with its local `$ref` resolved (one level).
fn resolve(root: &Value, branch: &Value) -> Value {
    match branch.get("$ref").and_then(Value::as_str).and_then(|r| lookup(root, r)) {
        Some(target) => target.clone(),
        None => branch.clone(),
    }
}

/// Adds a branch's properties (and, when `with_required`, its `required`) to `object`.
fn merge_into(object: &mut Map<String, Value>, branch: &Value, with_required: bool) {
    let Value::Object(branch) = branch else { return };
    if let Some(Value::Object(more)) = branch.get("properties") {
        let properties = object.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(have) = properties {
            for (k, v) in more {
                have.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    if with_required && let Some(Value::Array(more)) = branch.get("required") {
        let required = object.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(have) = required {
            for v in more {
                if !have.contains(v) {
                    have.push(v.clone());
                }
            }
        }
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
    fn a_root_one_of_of_required_keys_becomes_a_sentence() {
        let tool = json!({"name": "p", "description": "Prices.", "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "isbn": {"type": "string"}},
            "oneOf": [{"required": ["id"]}, {"required": ["isbn"]}]
        }});
        let mut notes = Notes::default();
        let (schema, description) = prepare(&tool, &mut notes);
        assert!(schema.get("oneOf").is_none());
        assert_eq!(description.as_deref(), Some("Prices. Give exactly one of: id | isbn."));
        assert!(notes.into_lines()[0].starts_with("oneOf at the root flattened"));
    }

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
