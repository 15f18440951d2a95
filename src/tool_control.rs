//! Catalogue control: what an operator changes about a tool between its server and its
//! callers — the name they see (`rename`), its `description`, whether they see it at all
//! (`hide`), its `annotations` (merged over the server's), arguments the gateway sets on every
//! call (`fixed_arguments`, removed from the schema callers see) and arguments it fills in when
//! the caller leaves them out (`default_arguments`, shown as `default` in the schema).
//!
//! The same [`ToolOverrides`] come from `[tools.NAME]` of the configuration and from a registry
//! entry's `overrides`; configuration wins key by key. [`ToolOverrides::apply`] turns a tool as
//! its server describes it into what the catalogue serves: the definition callers see (what
//! `tools/list`, the exports, search, `/capabilities` and the Cedar policy all read) and the
//! schema the gateway validates a call against once the fixed arguments are in (the server's
//! own, with the defaults). An override that cannot apply to the tool (a fixed argument the
//! schema lacks, a value the schema refuses) is an error: the catalogue then withholds the
//! tool rather than serve it without the operator's constraint.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The meta-tool that searches the catalogue in search mode (`[catalogue.search]`).
pub const SEARCH_TOOLS: &str = "search_tools";
/// The meta-tool that calls a tool by name in search mode.
pub const CALL_TOOL: &str = "call_tool";
/// The names the gateway's own tools hold in search mode: no tool is served under them there.
pub const META_TOOLS: &[&str] = &[SEARCH_TOOLS, CALL_TOOL];

/// Whether a server's tools are exposed under `server__tool` (`[servers.NAME] prefix`).
///
/// Names depend on the configuration and the servers' lists, never on history: the same file
/// and the same lists give the same names after a reload as after a restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolPrefix {
    /// Every tool as `server__tool`.
    Always,
    /// Every tool under its own name; a name another `never` server offers too is refused on
    /// both (unless `[tools.NAME] server` routes it), and one a server with another choice
    /// offers too stays with this server (the other's copy is namespaced).
    Never,
    /// The default: a tool under its own name while no other server offers that name; a name
    /// several servers offer is namespaced on every one of them (unless a route or a `never`
    /// server holds it), so a caller's call never silently reaches another server.
    #[default]
    OnCollision,
}

impl ToolPrefix {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolPrefix::Always => "always",
            ToolPrefix::Never => "never",
            ToolPrefix::OnCollision => "on_collision",
        }
    }
}

/// The annotations an override may set, with the JSON type each takes.
pub const ANNOTATIONS: &[(&str, &str)] = &[
    ("title", "string"),
    ("readOnlyHint", "boolean"),
    ("destructiveHint", "boolean"),
    ("idempotentHint", "boolean"),
    ("openWorldHint", "boolean"),
];

/// What an operator changes about one tool (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolOverrides {
    /// The name callers see (the server still gets its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rename: Option<String>,
    /// Replaces the server's description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Left out of everything callers see; calling it is `unknown_tool`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hide: bool,
    /// Set over the server's annotations, key by key.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
    /// Set by the gateway on every call; absent from the schema callers see.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub fixed_arguments: Map<String, Value>,
    /// Filled in when a call leaves them out; shown as `default` in the schema.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub default_arguments: Map<String, Value>,
}

/// A tool as the catalogue serves it after [`ToolOverrides::apply`].
#[derive(Debug, Clone)]
pub struct Controlled {
    /// The name callers see.
    pub name: String,
    /// The definition callers see (`name` set to [`Self::name`]).
    pub definition: Value,
    /// The schema a call is checked against once the fixed arguments are in: the server's
    /// own, with the default arguments as `default`.
    pub schema: Value,
    /// Arguments the gateway sets on every call.
    pub fixed: Map<String, Value>,
}

/// Tool names LLM tool APIs accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolOverrides {
    /// Whether nothing is overridden (the tool is served as its server describes it).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These overrides (configuration) over `base` (a registry entry's): every key set here
    /// wins, the maps merge key by key, `hide` from either hides.
    pub fn over(&self, base: &ToolOverrides) -> ToolOverrides {
        let merged = |top: &Map<String, Value>, under: &Map<String, Value>| {
            let mut out = under.clone();
            out.extend(top.iter().map(|(k, v)| (k.clone(), v.clone())));
            out
        };
        ToolOverrides {
            rename: self.rename.clone().or_else(|| base.rename.clone()),
            description: self.description.clone().or_else(|| base.description.clone()),
            hide: self.hide || base.hide,
            annotations: merged(&self.annotations, &base.annotations),
            fixed_arguments: merged(&self.fixed_arguments, &base.fixed_arguments),
            default_arguments: merged(&self.default_arguments, &base.default_arguments),
        }
    }

    /// What can be checked without the tool's schema: the new name's shape, the annotations'
    /// names and types, no argument both fixed and defaulted.
    pub fn check(&self) -> Result<(), String> {
        if let Some(rename) = &self.rename
            && !valid_name(rename)
        {
            return Err(format!("rename {rename:?} must match ^[a-zA-Z0-9_-]{{1,64}}$"));
        }
        for (key, value) in &self.annotations {
            let Some((_, kind)) = ANNOTATIONS.iter().find(|(known, _)| known == key) else {
                let known: Vec<&str> = ANNOTATIONS.iter().map(|(k, _)| *k).collect();
                return Err(format!("annotations.{key} is not an MCP tool annotation (one of {known:?})"));
            };
            let fits = match *kind {
                "string" => value.is_string(),
                _ => value.is_boolean(),
            };
            if !fits {
                return Err(format!("annotations.{key} must be a {kind}, not {value}"));
            }
        }
        if let Some(both) = self.fixed_arguments.keys().find(|k| self.default_arguments.contains_key(*k)) {
            return Err(format!(
                "argument {both:?} is both fixed and defaulted (a fixed argument is never the caller's to give)"
            ));
        }
        Ok(())
    }

    /// Applies the overrides to `tool` (its server's definition) exposed under `name` (its
    /// catalogue name before any rename). `Ok(None)`: hidden. `Err`: an override that does not
    /// fit the tool, said precisely.
    pub fn apply(&self, name: &str, tool: &Value) -> Result<Option<Controlled>, String> {
        if self.hide {
            return Ok(None);
        }
        self.check()?;
        let empty = json!({"type": "object"});
        let upstream_schema = tool.get("inputSchema").unwrap_or(&empty);
        self.check_arguments(upstream_schema)?;
        let exposed = self.rename.clone().unwrap_or_else(|| name.to_string());
        let mut definition = tool.clone();
        let Some(fields) = definition.as_object_mut() else {
            return Err("the tool definition is not an object".into());
        };
        fields.insert("name".into(), json!(exposed));
        if let Some(description) = &self.description {
            fields.insert("description".into(), json!(description));
        }
        if !self.annotations.is_empty() {
            let annotations = fields.entry("annotations").or_insert_with(|| json!({}));
            if !annotations.is_object() {
                *annotations = json!({});
            }
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.extend(self.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut schema = upstream_schema.clone();
        with_defaults(&mut schema, &self.default_arguments);
        let mut shown = schema.clone();
        without_fixed(&mut shown, &self.fixed_arguments, &self.default_arguments);
        if tool.get("inputSchema").is_some()
            || !self.fixed_arguments.is_empty()
            || !self.default_arguments.is_empty()
        {
            fields.insert("inputSchema".into(), shown);
        }
        Ok(Some(Controlled { name: exposed, definition, schema, fixed: self.fixed_arguments.clone() }))
    }

    /// Fixed and default arguments are properties of `schema`, and their values pass it.
    fn check_arguments(&self, schema: &Value) -> Result<(), String> {
        if self.fixed_arguments.is_empty() && self.default_arguments.is_empty() {
            return Ok(());
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (kind, arguments) in [("fixed", &self.fixed_arguments), ("default", &self.default_arguments)] {
            for key in arguments.keys() {
                if !properties.is_some_and(|p| p.contains_key(key)) {
                    let known: Vec<&String> = properties.map(|p| p.keys().collect()).unwrap_or_default();
                    return Err(format!(
                        "{kind} argument {key:?} is not a property of the tool's inputSchema (properties: {known:?})"
                    ));
                }
            }
        }
        let mut options = jsonschema::options();
        if schema.get("$schema").is_none() {
            options = options.with_draft(jsonschema::Draft::Draft202012);
        }
        // A schema the gateway cannot compile is forwarded unvalidated anyway: nothing to check.
        let Ok(validator) = options.build(schema) else { return Ok(()) };
        let mut instance = self.default_arguments.clone();
        instance.extend(self.fixed_arguments.iter().map(|(k, v)| (k.clone(), v.clone())));
        let instance = Value::Object(instance);
        for error in validator.iter_errors(&instance) {
            let path = error.instance_path().to_string();
            // Root-level errors (`required` of other properties, …) are the caller's to satisfy.
            let Some(key) = path.strip_prefix('/').map(|p| p.split('/').next().unwrap_or(p)) else {
                continue;
            };
            let key = key.replace("~1", "/").replace("~0", "~");
            let kind = if self.fixed_arguments.contains_key(&key) { "fixed" } else { "default" };
            return Err(format!("{kind} argument {key:?} fails the tool's inputSchema at {path}: {error}"));
        }
        Ok(())
    }
}

/// Sets each default argument as its property's `default`.
fn with_defaults(schema: &mut Value, defaults: &Map<String, Value>) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return };
    for (key, value) in defaults {
        if let Some(Value::Object(property)) = properties.get_mut(key) {
            property.insert("default".into(), value.clone());
        }
    }
}

/// The schema callers see: fixed arguments gone from `properties` and `required`, and
/// defaulted ones no longer `required` (the gateway fills them in).
fn without_fixed(schema: &mut Value, fixed: &Map<String, Value>, defaults: &Map<String, Value>) {
    let Some(object) = schema.as_object_mut() else { return };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.retain(|key, _| !fixed.contains_key(key));
    }
    let emptied = match object.get_mut("required") {
        Some(Value::Array(required)) => {
            required.retain(|key| {
                key.as_str().is_none_or(|k| !fixed.contains_key(k) && !defaults.contains_key(k))
            });
            required.is_empty()
        }
        _ => false,
    };
    if emptied {
        object.remove("required");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_to_cart() -> Value {
        json!({
            "name": "add_to_cart",
            "description": "Add a manga item to the cart.",
            "inputSchema": {"type": "object", "properties": {
                "manga_id": {"type": "string"},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
                "store": {"type": "string", "enum": ["tokyo", "osaka"]}
            }, "required": ["manga_id", "store"], "additionalProperties": false},
            "annotations": {"readOnlyHint": false, "openWorldHint": false}
        })
    }

    fn overrides(value: Value) -> ToolOverrides {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn every_override_changes_what_callers_see_and_nothing_else() {
        let o = overrides(json!({
            "rename": "put_in_cart", "description": "Put a volume in the cart.",
            "annotations": {"idempotentHint": true, "title": "Cart"},
            "fixed_arguments": {"store": "tokyo"}, "default_arguments": {"quantity": 2}
        }));
        let c = o.apply("add_to_cart", &add_to_cart()).unwrap().unwrap();
        assert_eq!(c.name, "put_in_cart");
        let d = &c.definition;
        assert_eq!(d["name"], "put_in_cart");
        assert_eq!(d["description"], "Put a volume in the cart.");
        assert_eq!(
            d["annotations"],
            json!({"readOnlyHint": false, "openWorldHint": false, "idempotentHint": true, "title": "Cart"})
        );
        let shown = &d["inputSchema"];
        assert!(shown["properties"].get("store").is_none(), "{shown}");
        assert_eq!(shown["required"], json!(["manga_id"]));
        assert_eq!(shown["properties"]["quantity"]["default"], 2);
        assert_eq!(shown["additionalProperties"], false);
        // The schema calls are checked against keeps the fixed argument and its requirement.
        assert_eq!(c.schema["required"], json!(["manga_id", "store"]));
        assert_eq!(c.schema["properties"]["quantity"]["default"], 2);
        assert_eq!(c.fixed, *json!({"store": "tokyo"}).as_object().unwrap());
    }

    #[test]
    fn hidden_tools_are_not_served_and_empty_overrides_change_nothing() {
        assert!(overrides(json!({"hide": true})).apply("x", &add_to_cart()).unwrap().is_none());
        let c = ToolOverrides::default().apply("add_to_cart", &add_to_cart()).unwrap().unwrap();
        assert_eq!(c.definition, add_to_cart());
        assert_eq!(c.schema, add_to_cart()["inputSchema"]);
    }

    #[test]
    fn overrides_that_do_not_fit_the_tool_are_refused_precisely() {
        let err = |o: Value| overrides(o).apply("add_to_cart", &add_to_cart()).unwrap_err();
        assert!(
            err(json!({"fixed_arguments": {"shop": "x"}}))
                .contains("fixed argument \"shop\" is not a property")
        );
        assert!(
            err(json!({"fixed_arguments": {"store": "kyoto"}})).contains("fixed argument \"store\" fails")
        );
        assert!(
            err(json!({"default_arguments": {"quantity": 99}}))
                .contains("default argument \"quantity\" fails")
        );
        assert!(err(json!({"rename": "has space"})).contains("must match"));
        assert!(err(json!({"annotations": {"readOnly": true}})).contains("not an MCP tool annotation"));
        assert!(err(json!({"annotations": {"readOnlyHint": "yes"}})).contains("must be a boolean"));
        assert!(
            err(json!({"fixed_arguments": {"store": "tokyo"}, "default_arguments": {"store": "osaka"}}))
                .contains("both fixed and defaulted")
        );
    }

    #[test]
    fn configuration_wins_over_a_registry_entry_key_by_key() {
        let entry =
            overrides(json!({"rename": "a", "description": "entry", "annotations": {"readOnlyHint": true},
            "fixed_arguments": {"store": "osaka"}}));
        let config = overrides(
            json!({"rename": "b", "annotations": {"title": "T"}, "fixed_arguments": {"store": "tokyo"}}),
        );
        let merged = config.over(&entry);
        assert_eq!(merged.rename.as_deref(), Some("b"));
        assert_eq!(merged.description.as_deref(), Some("entry"));
        assert_eq!(Value::Object(merged.annotations), json!({"readOnlyHint": true, "title": "T"}));
        assert_eq!(Value::Object(merged.fixed_arguments), json!({"store": "tokyo"}));
    }
}
