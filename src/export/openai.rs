//! OpenAI: Chat Completions `tools = [{"type": "function", "function": {"name",
//! "description", "parameters", "strict"?}}]` and the Responses API's flat `{"type":
//! "function", "name", "description", "parameters", "strict"}` (the `openai` SDK's
//! `ChatCompletionToolParam`/`FunctionDefinition` and `FunctionToolParam`).
//!
//! Names follow `^[a-zA-Z0-9_-]{1,64}$` (mapped otherwise). Without strict mode the JSON
//! Schema is passed as it is (root forced to `type: object`).
//!
//! **Strict mode** (`strict=true`, Structured Outputs) needs, and gets: every object with
//! `additionalProperties: false` and every property in `required` — a property that was
//! optional becomes nullable (`["T", "null"]`, a `null` branch in `anyOf`, `null` in `enum`), so
//! the model sends `null` for "not given". `oneOf` becomes `anyOf` (reported: exclusivity is
//! not enforced). Keywords strict mode does not take and that only narrow a value (`default`,
//! `minLength`, `maxLength`, `uniqueItems`, `minProperties`, `maxProperties`, `examples`,
//! unsupported `format`s, …) are removed and reported. A tool stays non-strict, and is listed
//! in `not_strict` with the reason, when its schema has what strict mode cannot express: an
//! object with free-form keys (`additionalProperties` a schema or `true`, or no `properties`
//! below the root), a value of any type (no `type`), `allOf`, `not`, `if`/`then`/`else`,
//! `patternProperties`, dependent schemas, a root that is not a plain object, more than
//! 5000 properties or nesting deeper than 10 levels (OpenAI's documented limits).

use serde_json::{Map, Value, json};

use super::{Converted, Options, schema};

/// Structured Outputs limits.
const MAX_PROPERTIES: usize = 5000;
const MAX_DEPTH: usize = 10;

/// Keywords strict mode refuses and that change what a value means: the tool cannot be strict.
const INEXPRESSIBLE: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "prefixItems",
    "contains",
];

/// Keywords strict mode refuses that only narrow or annotate a value: removed and reported.
const REMOVABLE: &[&str] = &[
    "default",
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
    "minContains",
    "maxContains",
    "$comment",
    "$id",
];

/// String formats strict mode accepts.
const FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

struct Parts {
    name: String,
    description: Option<String>,
    parameters: Value,
    strict: bool,
    not_strict: Option<String>,
}

fn parts(tool: &Value, name: &str, options: Options, notes: &mut schema::Notes) -> Parts {
    let (root, description) = schema::prepare(tool, notes);
    if !options.strict {
        for key in ["oneOf", "anyOf", "allOf", "enum", "not"] {
            if root.get(key).is_some() {
                notes.add(format!("{key} at the root: OpenAI refuses it there"), "");
            }
        }
        return Parts { name: name.into(), description, parameters: root, strict: false, not_strict: None };
    }
    let mut strict_notes = schema::Notes::default();
    match strict_schema(&root, &mut strict_notes) {
        Ok(parameters) => {
            notes.absorb(strict_notes, "");
            Parts { name: name.into(), description, parameters, strict: true, not_strict: None }
        }
        Err(reason) => Parts {
            name: name.into(),
            description,
            parameters: root,
            strict: false,
            not_strict: Some(reason),
        },
    }
}

/// Chat Completions: `{"type": "function", "function": {…}}`.
pub fn chat_tool(tool: &Value, name: &str, options: Options, notes: &mut schema::Notes) -> Converted {
    let p = parts(tool, name, options, notes);
    let mut function = json!({"name": p.name, "parameters": p.parameters});
    if let Some(description) = p.description {
        function["description"] = json!(description);
    }
    if options.strict {
        function["strict"] = json!(p.strict);
    }
    Converted { tool: json!({"type": "function", "function": function}), not_strict: p.not_strict }
}

/// Responses API: `{"type": "function", "name", "parameters", "strict"}` (flat).
pub fn responses_tool(tool: &Value, name: &str, options: Options, notes: &mut schema::Notes) -> Converted {
    let p = parts(tool, name, options, notes);
    let mut out = json!({"type": "function", "name": p.name, "parameters": p.parameters, "strict": p.strict});
    if let Some(description) = p.description {
        out["description"] = json!(description);
    }
    Converted { tool: out, not_strict: p.not_strict }
}

struct Strict<'n> {
    notes: &'n mut schema::Notes,
    properties: usize,
}

/// The schema under Structured Outputs rules, or why it cannot be.
pub fn strict_schema(root: &Value, notes: &mut schema::Notes) -> Result<Value, String> {
    if root.get("anyOf").is_some() || root.get("oneOf").is_some() {
        return Err("the root is a union (anyOf/oneOf), strict mode needs a plain object".into());
    }
    let mut ctx = Strict { notes, properties: 0 };
    let mut out = ctx.node(root, "", 0, true)?;
    // Definitions are converted like any schema ($ref is supported in strict mode).
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(map)) = root.get(defs) {
            let mut converted = Map::new();
            for (key, def) in map {
                let path = schema::child(&schema::child("", defs), key);
                converted.insert(key.clone(), ctx.node(def, &path, 1, false)?);
            }
            out[defs] = Value::Object(converted);
        }
    }
    if ctx.properties > MAX_PROPERTIES {
        return Err(format!("{} properties, strict mode allows {MAX_PROPERTIES}", ctx.properties));
    }
    Ok(out)
}

impl Strict<'_> {
    fn node(&mut self, value: &Value, path: &str, depth: usize, root: bool) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nesting deeper than {MAX_DEPTH} levels at {path}"));
        }
        let Value::Object(object) = value else {
            return Err(format!("boolean schema at {path} (any value)"));
        };
        if let Some(key) = INEXPRESSIBLE.iter().find(|k| object.contains_key(**k)) {
            return Err(format!("{key} at {} is not supported in strict mode", shown(path)));
        }
        let mut out = Map::new();
        for (key, v) in object {
            match key.as_str() {
                "$schema" | "$defs" | "definitions" => {}
                k if REMOVABLE.contains(&k) => self.notes.add(format!("{k} removed"), path),
                "format" => match v.as_str() {
                    Some(f) if FORMATS.contains(&f) => {
                        out.insert(key.clone(), v.clone());
                    }
                    _ => self.notes.add(format!("format {v} removed (not supported in strict mode)"), path),
                },
                "properties" | "required" | "additionalProperties" | "items" | "anyOf" | "oneOf" => {}
                _ => {
                    out.insert(key.clone(), v.clone());
                }
            }
        }
        let mut types: Vec<&str> = match object.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() && object.contains_key("properties") {
            // An object by its keywords: say so (strict mode wants the type).
            types.push("object");
            out.insert("type".into(), json!("object"));
        }
        let union = object.get("anyOf").or_else(|| object.get("oneOf"));
        if types.is_empty()
            && union.is_none()
            && !object.contains_key("$ref")
            && !object.contains_key("enum")
            && !object.contains_key("const")
        {
            return Err(format!("a value of any type at {} (no type)", shown(path)));
        }
        if let Some(Value::Array(branches)) = union {
            if object.contains_key("oneOf") {
                self.notes.add("oneOf became anyOf (exclusivity not enforced)", path);
            }
            let key = if object.contains_key("anyOf") { "anyOf" } else { "oneOf" };
            let mut converted = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                let at = schema::child(&schema::child(path, key), &i.to_string());
                converted.push(self.node(branch, &at, depth + 1, false)?);
            }
            out.insert("anyOf".into(), Value::Array(converted));
        }
        if types.contains(&"object") {
            self.object(object, &mut out, path, depth, root)?;
        }
        if let Some(items) = object.get("items") {
            let at = schema::child(path, "items");
            out.insert("items".into(), self.node(items, &at, depth + 1, false)?);
        } else if types.contains(&"array") {
            return Err(format!("an array of any items at {} (no items)", shown(path)));
        }
        Ok(Value::Object(out))
    }

    fn object(
        &mut self,
        object: &Map<String, Value>,
        out: &mut Map<String, Value>,
        path: &str,
        depth: usize,
        root: bool,
    ) -> Result<(), String> {
        match object.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => return Err(format!("an object with free-form keys at {}", shown(path))),
        }
        let properties = match object.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            None if root => Map::new(),
            _ => return Err(format!("an object with free-form keys at {} (no properties)", shown(path))),
        };
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        self.properties += properties.len();
        let mut converted = Map::new();
        for (key, property) in &properties {
            let at = schema::child(&schema::child(path, "properties"), key);
            let mut strict = self.node(property, &at, depth + 1, false)?;
            if !required.contains(&key.as_str()) {
                strict = nullable(strict);
                self.notes.add("optional properties made required and nullable", &at);
            }
            converted.insert(key.clone(), strict);
        }
        let names: Vec<Value> = converted.keys().map(|k| json!(k)).collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), json!(false));
        Ok(())
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "the root" } else { path }
}

/// The schema, also accepting `null`.
fn nullable(mut schema: Value) -> Value {
    let null = json!("null");
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
        if schema.get("type").is_none() {
            return schema;
        }
    }
    match schema.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = t.clone();
            schema["type"] = json!([t, "null"]);
            return schema;
        }
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null);
            }
            return schema;
        }
        _ => {}
    }
    if let Some(Value::Array(branches)) = schema.get_mut("anyOf") {
        if !branches.iter().any(|b| b.get("type") == Some(&null)) {
            branches.push(json!({"type": "null"}));
        }
        return schema;
    }
    json!({"anyOf": [schema, {"type": "null"}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_makes_every_property_required_and_optional_ones_nullable() {
        let root = json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "default": 10},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}
            },
            "required": ["q"]
        });
        let mut notes = schema::Notes::default();
        let out = strict_schema(&root, &mut notes).unwrap();
        assert_eq!(out["additionalProperties"], false);
        // Every property, in the schema's own order (serde_json keeps map order in this build).
        assert_eq!(out["required"], json!(["q", "limit", "kind", "tags"]));
        assert_eq!(out["properties"]["limit"]["type"], json!(["integer", "null"]));
        assert!(out["properties"]["limit"].get("default").is_none());
        assert_eq!(out["properties"]["kind"]["enum"], json!(["a", "b", null]));
        assert_eq!(out["properties"]["q"]["type"], "string");
        assert_eq!(out["properties"]["tags"]["items"]["additionalProperties"], false);
        assert_eq!(out["properties"]["tags"]["items"]["properties"]["k"]["type"], json!(["string", "null"]));
        let lines = notes.into_lines().join("\n");
        assert!(lines.contains("default removed") && lines.contains("minLength removed"), "{lines}");
    }

    #[test]
    fn maps_untyped_values_and_all_of_cannot_be_strict() {
        let mut notes = schema::Notes::default();
        for (schema, why) in [
            (
                json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}}}),
                "free-form",
            ),
            (json!({"type": "object", "properties": {"v": {}}}), "any type"),
            (json!({"type": "object", "properties": {"v": {"allOf": [{"type": "string"}]}}}), "allOf"),
            (json!({"type": "object", "anyOf": [{"type": "object"}]}), "union"),
        ] {
            let err = strict_schema(&schema, &mut notes).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }
}
