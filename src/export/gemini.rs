//! Gemini: `tools = [{"functionDeclarations": [{"name", "description", "parameters"}]}]`,
//! `parameters` in Gemini's OpenAPI 3.0 subset (the `google-genai` SDK's `Schema`: upper-case
//! `type`, `nullable`, `enum` of strings, `anyOf`, `format`, `items`, `properties`,
//! `required`, bounds, `propertyOrdering`, `default`, `example`, `title`).
//!
//! Names: start with a letter or `_`, then letters, digits, `_ . : -`, at most 128 (mapped
//! otherwise). JSON Schema is converted keyword by keyword, and every change that loses
//! something is a line in the tool's `warnings`:
//! - `$ref` to `$defs`/`definitions` (any local pointer) is inlined; a recursive reference is
//!   cut after one expansion and the value left untyped (reported), and so is every reference
//!   met once the inlined schema holds [`MAX_INLINED_VALUES`] values (a definition reached by
//!   many paths is copied at each: an OpenAPI document's shared components would otherwise
//!   multiply; reported with the bound).
//! - `allOf` is merged into one schema (properties and `required` united; reported).
//! - `oneOf` becomes `anyOf` (reported: exclusivity not enforced); an `anyOf`/`type` branch
//!   `null` becomes `nullable: true`; a type list `["string","integer"]` becomes an `anyOf`.
//! - `const` and `enum` of strings become `enum`; non-string values move to the description
//!   ("Allowed values: …") since Gemini's `enum` takes strings only (reported).
//! - `format`: kept when Gemini knows it for the type (`date-time`/`enum` for strings,
//!   `float`/`double`, `int32`/`int64`); others move to the description (reported).
//! - `exclusiveMinimum`/`exclusiveMaximum` become inclusive bounds (reported); `examples`
//!   gives its first value as `example`.
//! - `additionalProperties` and any other keyword outside the subset are dropped (reported).
//!   `$schema` is the only keyword dropped without a line (it says nothing about the value).
//! - A parameter name outside Gemini's rule (`^[A-Za-z_][A-Za-z0-9_]{0,63}$`) is kept and
//!   reported (renaming arguments would need mapping back at call time).
//!
//! A tool without parameters has no `parameters` key (Gemini's way to say "no arguments").

use serde_json::{Map, Value, json};

use super::{Converted, schema};

/// Keywords copied as they are (camelCase, as the SDK's aliases).
const KEEP: &[&str] = &[
    "description",
    "title",
    "default",
    "example",
    "nullable",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
];

/// How many `$ref`s may be open at once (a cycle is cut at its second visit anyway).
const MAX_REF_DEPTH: usize = 16;
/// Most schema values one tool's parameters may hold once their `$ref`s are inlined; a `$ref`
/// met past it is cut (left untyped, reported).
pub const MAX_INLINED_VALUES: usize = 5_000;

pub fn tool(tool: &Value, name: &str, notes: &mut schema::Notes) -> Converted {
    let (root, description) = schema::prepare(tool, notes);
    let mut out = json!({"name": name});
    if let Some(description) = description {
        out["description"] = json!(description);
    }
    let mut converter = Converter { root: &root, notes, stack: Vec::new(), values: 0 };
    let parameters = converter.node(&root, "");
    if let Some(Value::Object(properties)) = parameters.get("properties") {
        for key in properties.keys() {
            if !parameter_name_ok(key) {
                converter.notes.add(
                    format!(
                        "parameter name {key:?} breaks Gemini's rule ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$ (kept)"
                    ),
                    "",
                );
            }
        }
        if !properties.is_empty() {
            out["parameters"] = parameters;
        }
    }
    Converted { tool: out, not_strict: None }
}

/// `tools` of a Gemini request: one `Tool` holding every declaration.
pub fn tools(declarations: Vec<Value>) -> Value {
    if declarations.is_empty() { json!([]) } else { json!([{"functionDeclarations": declarations}]) }
}

fn parameter_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

fn gemini_type(json_type: &str) -> Option<&'static str> {
    Some(match json_type {
        "string" => "STRING",
        "number" => "NUMBER",
        "integer" => "INTEGER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "object" => "OBJECT",
        "null" => "NULL",
        _ => return None,
    })
}

fn format_known(gemini_type: Option<&str>, format: &str) -> bool {
    matches!(
        (gemini_type, format),
        (Some("STRING"), "date-time" | "enum")
            | (Some("NUMBER"), "float" | "double")
            | (Some("INTEGER"), "int32" | "int64")
    )
}

struct Converter<'a, 'n> {
    root: &'a Value,
    notes: &'n mut schema::Notes,
    /// `$ref`s being expanded (cycle detection).
    stack: Vec<String>,
    /// Schema values converted so far (against [`MAX_INLINED_VALUES`]).
    values: usize,
}

impl Converter<'_, '_> {
    fn node(&mut self, value: &Value, path: &str) -> Value {
        self.values += 1;
        let Value::Object(object) = value else {
            self.notes.add("boolean schema: value left untyped", path);
            return json!({});
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            return self.reference(object, reference, path);
        }
        if let Some(Value::Array(parts)) = object.get("allOf") {
            let merged = self.merge_all_of(object, parts, path);
            return self.node(&Value::Object(merged), path);
        }
        self.plain(object, path)
    }

    fn reference(&mut self, object: &Map<String, Value>, reference: &str, path: &str) -> Value {
        let siblings = schema::without(object, &["$ref"]);
        let target = schema::lookup(self.root, reference);
        let recursive = self.stack.iter().any(|r| r == reference) || self.stack.len() >= MAX_REF_DEPTH;
        let over = self.values >= MAX_INLINED_VALUES;
        match target {
            Some(Value::Object(target)) if !recursive && !over => {
                let mut merged = target.clone();
                merged.extend(siblings);
                self.stack.push(reference.to_string());
                let out = self.node(&Value::Object(merged), path);
                self.stack.pop();
                out
            }
            _ => {
                let line = match (recursive, over, target.is_some()) {
                    (true, _, _) => format!("recursive $ref {reference} cut: value left untyped"),
                    (false, true, true) => format!(
                        "$ref {reference} cut: the inlined parameters would hold more than {MAX_INLINED_VALUES} schema values; value left untyped"
                    ),
                    _ => format!("unresolvable $ref {reference} cut: value left untyped"),
                };
                self.notes.add(line, path);
                let mut out = Map::new();
                if let Some(d) = siblings.get("description") {
                    out.insert("description".into(), d.clone());
                }
                Value::Object(out)
            }
        }
    }

    fn merge_all_of(
        &mut self,
        object: &Map<String, Value>,
        parts: &[Value],
        path: &str,
    ) -> Map<String, Value> {
        self.notes.add("allOf merged into one schema", path);
        let mut merged = schema::without(object, &["allOf"]);
        for part in parts {
            let part = match part.get("$ref").and_then(Value::as_str) {
                Some(r) => schema::lookup(self.root, r).cloned().unwrap_or_else(|| {
                    self.notes.add(format!("unresolvable $ref {r} in allOf ignored"), path);
                    json!({})
                }),
                None => part.clone(),
            };
            let Value::Object(part) = part else { continue };
            for (key, value) in part {
                match (key.as_str(), merged.get_mut(&key), &value) {
                    ("properties", Some(Value::Object(have)), Value::Object(more)) => {
                        for (k, v) in more {
                            have.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                    ("required", Some(Value::Array(have)), Value::Array(more)) => {
                        for v in more {
                            if !have.contains(v) {
                                have.push(v.clone());
                            }
                        }
                    }
                    (_, Some(_), _) => {}
                    (_, None, _) => {
                        merged.insert(key, value);
                    }
                }
            }
        }
        merged
    }

    fn plain(&mut self, object: &Map<String, Value>, path: &str) -> Value {
        let mut out = Map::new();
        let mut described: Vec<String> = Vec::new();
        let mut nullable = false;

        // type: one Gemini type, `nullable` for null, an anyOf for several.
        let types: Vec<&str> = match object.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if object.contains_key("properties") => vec!["object"],
            _ => Vec::new(),
        };
        nullable |= types.contains(&"null") && types.len() > 1;
        let concrete: Vec<&str> =
            types.iter().copied().filter(|t| *t != "null" || types.len() == 1).collect();
        for t in &concrete {
            if gemini_type(t).is_none() {
                self.notes.add(format!("unknown type {t:?} dropped"), path);
            }
        }
        let mapped: Vec<&'static str> = concrete.iter().filter_map(|t| gemini_type(t)).collect();
        let single = if mapped.len() == 1 { Some(mapped[0]) } else { None };
        if mapped.len() > 1 {
            let branches: Vec<Value> = concrete
                .iter()
                .map(|t| {
                    let mut branch = schema::without(object, &["type", "description", "title", "default"]);
                    if *t != "array" {
                        branch.retain(|k, _| {
                            !["items", "prefixItems", "minItems", "maxItems"].contains(&k.as_str())
                        });
                    }
                    if *t != "object" {
                        let object_only = [
                            "properties",
                            "required",
                            "additionalProperties",
                            "minProperties",
                            "maxProperties",
                        ];
                        branch.retain(|k, _| !object_only.contains(&k.as_str()));
                    }
                    branch.insert("type".into(), json!(t));
                    self.plain(&branch, path)
                })
                .collect();
            out.insert("anyOf".into(), Value::Array(branches));
        } else if let Some(t) = single {
            out.insert("type".into(), json!(t));
        }

        for (key, value) in object {
            match key.as_str() {
                "type" | "$schema" | "$defs" | "definitions" | "properties" | "required" | "items" => {}
                k if KEEP.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                _ if mapped.len() > 1 => {} // carried by each branch
                "anyOf" | "oneOf" => {
                    if key == "oneOf" {
                        self.notes.add("oneOf became anyOf (exclusivity not enforced)", path);
                    }
                    let at = schema::child(path, key);
                    let mut branches = Vec::new();
                    for (i, branch) in value.as_array().into_iter().flatten().enumerate() {
                        let converted = self.node(branch, &schema::child(&at, &i.to_string()));
                        if converted.get("type") == Some(&json!("NULL"))
                            && converted.as_object().is_some_and(|o| o.len() == 1)
                        {
                            nullable = true;
                        } else {
                            branches.push(converted);
                        }
                    }
                    if !branches.is_empty()
                        && branches.iter().all(|b| b.as_object().is_some_and(Map::is_empty))
                    {
                        self.notes.add(format!("{key} of untyped branches (key rules) dropped"), path);
                        branches.clear();
                    }
                    match branches.len() {
                        0 => {}
                        1 => {
                            if let Some(Value::Object(only)) = branches.pop() {
                                for (k, v) in only {
                                    out.entry(k).or_insert(v);
                                }
                            }
                        }
                        _ => {
                            out.insert("anyOf".into(), Value::Array(branches));
                        }
                    }
                }
                "const" => match value {
                    Value::String(_) => {
                        out.insert("enum".into(), json!([value]));
                        out.entry("type").or_insert(json!("STRING"));
                    }
                    Value::Null => nullable = true,
                    other => {
                        self.notes.add("const of a non-string value moved to the description", path);
                        described.push(format!("Must be {other}."));
                    }
                },
                "enum" => {
                    let values = value.as_array().cloned().unwrap_or_default();
                    nullable |= values.contains(&Value::Null);
                    let values: Vec<Value> = values.into_iter().filter(|v| !v.is_null()).collect();
                    if values.iter().all(Value::is_string) {
                        out.insert("enum".into(), Value::Array(values));
                        out.entry("type").or_insert(json!("STRING"));
                    } else {
                        self.notes.add("enum of non-string values moved to the description", path);
                        let shown: Vec<String> = values.iter().map(Value::to_string).collect();
                        described.push(format!("Allowed values: {}.", shown.join(", ")));
                    }
                }
                "format" => {
                    let format = value.as_str().unwrap_or_default();
                    if format_known(single, format) {
                        out.insert("format".into(), value.clone());
                    } else {
                        self.notes.add(format!("format {format:?} moved to the description"), path);
                        described.push(format!("Format: {format}."));
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" if value.is_number() => {
                    let bound = if key == "exclusiveMinimum" { "minimum" } else { "maximum" };
                    self.notes.add(format!("{key} became an inclusive {bound}"), path);
                    out.entry(bound).or_insert(value.clone());
                }
                "examples" => {
                    if let Some(first) = value.as_array().and_then(|a| a.first()) {
                        out.entry("example").or_insert(first.clone());
                    }
                    if value.as_array().is_some_and(|a| a.len() > 1) {
                        self.notes.add("examples: only the first kept (as example)", path);
                    }
                }
                "additionalProperties" => match value {
                    Value::Bool(true) => {}
                    Value::Bool(false) => self
                        .notes
                        .add("additionalProperties: false dropped (Gemini cannot forbid extra keys)", path),
                    _ => self
                        .notes
                        .add("additionalProperties schema dropped (free-form keys not described)", path),
                },
                other => self.notes.add(format!("{other} dropped (not in Gemini's schema subset)"), path),
            }
        }

        if mapped.len() > 1 {
            // Properties and items went into the branch of their type.
            if nullable {
                out.insert("nullable".into(), json!(true));
            }
            return Value::Object(out);
        }
        if let Some(Value::Object(properties)) = object.get("properties") {
            let at = schema::child(path, "properties");
            let mut converted = Map::new();
            for (key, property) in properties {
                converted.insert(key.clone(), self.node(property, &schema::child(&at, key)));
            }
            let required: Vec<Value> = object
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter(|n| n.as_str().is_some_and(|n| converted.contains_key(n)))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            out.insert("properties".into(), Value::Object(converted));
            if !required.is_empty() {
                out.insert("required".into(), Value::Array(required));
            }
        }
        match object.get("items") {
            Some(items @ Value::Object(_)) => {
                out.insert("items".into(), self.node(items, &schema::child(path, "items")));
            }
            Some(Value::Array(_)) => {
                self.notes.add("tuple items dropped (Gemini takes one item schema)", path)
            }
            Some(_) | None => {}
        }
        if nullable {
            out.insert("nullable".into(), json!(true));
        }
        if !described.is_empty() {
            let base = out.get("description").and_then(Value::as_str).unwrap_or_default().trim().to_string();
            let extra = described.join(" ");
            let text = if base.is_empty() { extra } else { format!("{base} {extra}") };
            out.insert("description".into(), json!(text));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(schema: Value) -> (Value, Vec<String>) {
        let mut notes = schema::Notes::default();
        let out = tool(&json!({"name": "t", "inputSchema": schema}), "t", &mut notes).tool;
        (out["parameters"].clone(), notes.into_lines())
    }

    #[test]
    fn refs_are_inlined_unions_and_nulls_converted_and_losses_reported() {
        let (p, warnings) = convert(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "$defs": {"Pos": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
            "properties": {
                "at": {"$ref": "#/$defs/Pos", "description": "where"},
                "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]},
                "maybe": {"type": ["string", "null"], "format": "uri"},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                "both": {"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}
            },
            "required": ["at"],
            "additionalProperties": false
        }));
        assert_eq!(p["type"], "OBJECT");
        assert_eq!(
            p["properties"]["at"],
            json!({"type": "OBJECT", "description": "where", "properties": {"x": {"type": "NUMBER"}}, "required": ["x"]})
        );
        assert_eq!(
            p["properties"]["mode"]["anyOf"],
            json!([{"enum": ["a"], "type": "STRING"}, {"enum": ["b"], "type": "STRING"}])
        );
        assert_eq!(
            p["properties"]["maybe"],
            json!({"type": "STRING", "nullable": true, "description": "Format: uri."})
        );
        assert_eq!(p["properties"]["level"]["description"], "Allowed values: 1, 2, 3.");
        assert_eq!(p["properties"]["both"]["required"], json!(["b"]));
        assert!(p.get("$schema").is_none() && p.get("$defs").is_none());
        let text = warnings.join("\n");
        for expected in [
            "oneOf became anyOf",
            "format \"uri\" moved",
            "enum of non-string",
            "additionalProperties schema dropped",
            "additionalProperties: false dropped (Gemini cannot forbid extra keys) (at /)",
            "allOf merged",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        assert!(!text.contains("$schema"), "{text}");
    }

    #[test]
    fn a_type_list_becomes_an_any_of_with_each_types_keywords() {
        let (p, _) = convert(json!({"type": "object", "properties": {
            "v": {"type": ["object", "array", "null"], "description": "either", "properties": {"a": {"type": "string"}}, "items": {"type": "integer"}}
        }}));
        let v = &p["properties"]["v"];
        assert_eq!(v["nullable"], true);
        assert_eq!(v["description"], "either");
        assert_eq!(v["anyOf"][0]["type"], "OBJECT");
        assert_eq!(v["anyOf"][0]["properties"]["a"]["type"], "STRING");
        assert_eq!(v["anyOf"][1]["type"], "ARRAY");
        assert_eq!(v["anyOf"][1]["items"]["type"], "INTEGER");
        assert!(v.get("properties").is_none() && v.get("items").is_none());
        assert!(v["anyOf"][0].get("items").is_none() && v["anyOf"][1].get("properties").is_none());
    }

    #[test]
    fn recursive_refs_are_cut_and_reported_and_empty_parameters_left_out() {
        let (p, warnings) = convert(json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        }));
        assert_eq!(p["properties"]["tree"]["properties"]["kids"]["items"], json!({}));
        assert!(warnings.join("\n").contains("recursive $ref #/$defs/Node cut"), "{warnings:?}");
        let (p, _) = convert(json!({"type": "object", "properties": {}}));
        assert!(p.is_null());
    }
}
