//! One operation, one tool: its name, description, input schema (parameters and body joined),
//! output schema and annotations, and what a call needs to build the request ([`Operation`]).
//! The rules are docs/openapi.md's "Mapping"; an operation they cannot serve is [`Skipped`]
//! with the reason, and the rest of the document serves.

use std::collections::{BTreeMap, HashSet};

use http::Method;
use serde_json::{Map, Value, json};

use super::{
    document::{Documents, Location, token},
    plan::{Body, BodyMedia, BodyShape, FILE_SCHEMA, Operation, Param, ParamIn, PartKind, PartPlan, Style},
    schema::{Converted, Schemas, is_plain_object},
};
use crate::shared_json::json_len;

/// An operation that was not turned into a tool, and why.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct Skipped {
    pub method: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    pub reason: String,
}

pub const METHODS: [(&str, Method); 8] = [
    ("get", Method::GET),
    ("put", Method::PUT),
    ("post", Method::POST),
    ("delete", Method::DELETE),
    ("options", Method::OPTIONS),
    ("head", Method::HEAD),
    ("patch", Method::PATCH),
    ("trace", Method::TRACE),
];

/// Headers a parameter may not set: those OpenAPI says to ignore (`Accept`, `Content-Type`,
/// `Authorization`), and those that would let an argument re-route or re-frame the request
/// (`Host`, framing and connection headers) or replace the credentials' cookie.
const IGNORED_HEADERS: [&str; 9] = [
    "accept",
    "content-type",
    "authorization",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
];

/// A tool name from an `operationId`: characters outside `[A-Za-z0-9_-]` become `_`, at most 64.
pub fn name_from_id(id: &str) -> String {
    let name: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    truncate(name)
}

/// The name of an operation without `operationId`: `{method}_{path}` with every run of other
/// characters than ASCII letters and digits as one `_` (`GET /products/{id}` → `get_products_id`).
pub fn name_from_route(method: &str, path: &str) -> String {
    let mut name = method.to_ascii_lowercase();
    let mut gap = true;
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            if gap {
                name.push('_');
            }
            name.push(c);
            gap = false;
        } else {
            gap = true;
        }
    }
    truncate(name)
}

fn truncate(mut name: String) -> String {
    if name.is_empty() {
        name.push('_');
    }
    name.truncate(64);
    name
}

/// Makes `name` unique among `taken`: `name`, else `name_2`, `name_3`, … (within 64 chars).
pub fn unique(name: String, taken: &mut HashSet<String>) -> String {
    if taken.insert(name.clone()) {
        return name;
    }
    for n in 2.. {
        let suffix = format!("_{n}");
        let mut base = name.clone();
        base.truncate(64 - suffix.len());
        let candidate = format!("{base}{suffix}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
    }
    unreachable!("an unused name exists")
}

/// The inputs of mapping one operation.
pub struct Route<'a> {
    pub method: &'a str,
    pub verb: Method,
    pub path: &'a str,
    pub path_item: &'a Value,
    pub operation: &'a Value,
    /// Where the path item was found (its refs are relative to it).
    pub from: &'a Location,
    pub root_security: Option<&'a Value>,
}

/// One operation mapped: its tool definition, its call plan, and what of its schemas was left
/// out or cut to fit the definition's bound (empty: nothing).
pub struct MappedOperation {
    pub definition: Value,
    pub operation: Operation,
    pub trimmed: Vec<String>,
}

/// Maps one operation to its tool definition and call plan, or says why it cannot. The
/// definition fits `max_definition_bytes`: an output schema that does not is left out, an
/// input schema's components that do not are cut (both reported in
/// [`MappedOperation::trimmed`]); only an input schema whose own properties do not fit skips
/// the operation.
pub fn map_operation(
    inliner: &mut Schemas<'_>,
    route: &Route<'_>,
    tool: String,
    max_definition_bytes: usize,
) -> Result<MappedOperation, String> {
    let op = route.operation;
    let from = route.from;
    // Parameters: the path item's, replaced by the operation's of the same name and place.
    let mut declared: Vec<(Location, Value)> = Vec::new();
    for list in [route.path_item.get("parameters"), op.get("parameters")] {
        let Some(list) = list else { continue };
        let Some(list) = list.as_array() else { return Err("parameters must be an array".into()) };
        for item in list {
            let (at, param) = inliner.docs().deref(from, item)?;
            let key = |p: &Value| (p.get("name").cloned(), p.get("in").cloned());
            declared.retain(|(_, old)| key(old) != key(&param));
            declared.push((at, param));
        }
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    // Path parameters first, so they keep their names when a query or header one shares it.
    declared
        .sort_by_key(|(_, p)| p.get("in").and_then(Value::as_str).and_then(ParamIn::parse).map(|l| l as u8));
    for (at, param) in &declared {
        let name = param.get("name").and_then(Value::as_str).ok_or("a parameter without a name")?;
        let place = param.get("in").and_then(Value::as_str).unwrap_or("");
        let location =
            ParamIn::parse(place).ok_or_else(|| format!("parameter {name:?}: unknown location {place:?}"))?;
        if location == ParamIn::Header && IGNORED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        let (style, schema) = match (param.get("schema"), param.get("content").and_then(Value::as_object)) {
            (Some(schema), _) => {
                let style = match param.get("style").and_then(Value::as_str) {
                    Some(text) => Style::parse(text)
                        .ok_or_else(|| format!("parameter {name:?}: unknown style {text:?}"))?,
                    None => match location {
                        ParamIn::Path | ParamIn::Header => Style::Simple,
                        ParamIn::Query | ParamIn::Cookie => Style::Form,
                    },
                };
                (style, inliner.convert(at, schema)?.value)
            }
            (None, Some(content)) => {
                let schema =
                    content.values().next().and_then(|m| m.get("schema")).cloned().unwrap_or(json!({}));
                (Style::Content, inliner.convert(at, &schema)?.value)
            }
            (None, None) => (Style::Simple, json!({"type": "string"})),
        };
        let explode = param.get("explode").and_then(Value::as_bool).unwrap_or(style == Style::Form);
        let required_here =
            location == ParamIn::Path || param.get("required").and_then(Value::as_bool) == Some(true);
        let property = if properties.contains_key(name) {
            format!("{}_{name}", location.as_str())
        } else {
            name.to_string()
        };
        if properties.contains_key(&property) {
            return Err(format!("parameter {name:?} in {place}: its argument name {property:?} is taken"));
        }
        let mut schema = match schema {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        if let Some(description) = param.get("description").and_then(Value::as_str) {
            schema.entry("description").or_insert_with(|| json!(description));
        }
        if param.get("deprecated") == Some(&Value::Bool(true)) {
            schema.insert("deprecated".into(), json!(true));
        }
        properties.insert(property.clone(), Value::Object(schema));
        if required_here {
            required.push(property.clone());
        }
        params.push(Param {
            property,
            name: name.to_string(),
            location,
            style,
            explode,
            required: required_here,
        });
    }
    for var in template_variables(route.path) {
        if !params.iter().any(|p| p.location == ParamIn::Path && p.name == var) {
            return Err(format!("path parameter {{{var}}} is not described"));
        }
    }
    let body = match op.get("requestBody") {
        None => None,
        Some(body) => Some(map_body(inliner, from, body, &mut properties, &mut required)?),
    };
    let mut input = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        input["required"] = json!(required);
    }
    let mut trimmed = Vec::new();
    let (output, mut wrap_result) = match output_schema(inliner, from, op) {
        Ok(found) => found,
        Err(reason) => {
            trimmed.push(format!("outputSchema left out: {reason}"));
            (None, false)
        }
    };
    let summary = op.get("summary").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let details = op.get("description").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let description = match (summary, details) {
        (Some(s), Some(d)) if s != d => format!("{s}\n\n{d}"),
        (Some(s), _) => s.to_string(),
        (None, Some(d)) => d.to_string(),
        (None, None) => format!("{} {}", route.verb, route.path),
    };
    let mut definition = json!({
        "name": tool,
        "description": description,
        "inputSchema": input,
        "annotations": annotations(&route.verb, summary),
    });
    // The input schema's components, within what the definition may still take (`"$defs":{}`
    // counted); cut when they do not fit.
    let refs = inliner.refs_in(&definition["inputSchema"]);
    if !refs.is_empty() {
        let used = json_len(&definition) + r#","$defs":{}"#.len();
        let budget = max_definition_bytes.checked_sub(used).ok_or_else(|| {
            format!("its tool definition of {used} bytes exceeds max_tool_definition_bytes ({max_definition_bytes})")
        })?;
        let defs = inliner.defs(&refs, budget).map_err(|e| format!("inputSchema: {e}"))?;
        if !defs.cut.is_empty() {
            trimmed.push(format!(
                "inputSchema cut to fit max_tool_definition_bytes ({max_definition_bytes}): {} of its components left open ({})",
                defs.cut.len(),
                shown_names(&defs.cut)
            ));
        }
        definition["inputSchema"]["$defs"] = Value::Object(defs.map);
    }
    let used = json_len(&definition);
    if used > max_definition_bytes {
        return Err(format!(
            "its tool definition of {used} bytes exceeds max_tool_definition_bytes ({max_definition_bytes})"
        ));
    }
    if let Some(mut output) = output {
        let refs = inliner.refs_in(&output);
        let own = json_len(&output)
            + r#","outputSchema":"#.len()
            + if refs.is_empty() { 0 } else { r#","$defs":{}"#.len() };
        let fitted = match max_definition_bytes.checked_sub(used + own) {
            None => Err(format!("{} bytes without its components", own)),
            Some(_) if refs.is_empty() => Ok(()),
            Some(budget) => match inliner.defs_within(&refs, budget, false) {
                Ok(defs) if defs.cut.is_empty() => {
                    output["$defs"] = Value::Object(defs.map);
                    Ok(())
                }
                Ok(defs) => Err(format!(
                    "its components take more than the {budget} bytes left ({} of them would be cut)",
                    defs.cut.len()
                )),
                Err(e) => Err(e),
            },
        };
        match fitted {
            Ok(()) => definition["outputSchema"] = output,
            Err(reason) => {
                wrap_result = false;
                trimmed.push(format!(
                    "outputSchema left out: it does not fit max_tool_definition_bytes ({max_definition_bytes}): {reason}"
                ));
            }
        }
    }
    let security = match op.get("security").or(route.root_security) {
        Some(Value::Array(alternatives)) => alternatives
            .iter()
            .map(|alt| alt.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default())
            .collect(),
        _ => Vec::new(),
    };
    let operation = Operation {
        tool,
        method: route.verb.clone(),
        path: route.path.to_string(),
        operation_id: op.get("operationId").and_then(Value::as_str).map(str::to_string),
        params,
        body,
        security,
        wrap_result,
    };
    Ok(MappedOperation { definition, operation, trimmed })
}

/// Up to five names, then how many more.
fn shown_names(names: &[String]) -> String {
    let mut shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        shown.push_str(&format!(", +{} more", names.len() - 5));
    }
    shown
}

/// The request body: its media type and where its value sits among the arguments. JSON wins
/// over a form, a form over `multipart/form-data`, that over any other media type (the first
/// in the document's order of names).
fn map_body(
    inliner: &mut Schemas<'_>,
    from: &Location,
    body: &Value,
    properties: &mut Map<String, Value>,
    required: &mut Vec<String>,
) -> Result<Body, String> {
    let (at, body) = inliner.docs().deref(from, body)?;
    let content = body.get("content").and_then(Value::as_object).ok_or("requestBody without content")?;
    let essence = |t: &str| t.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let pick = |wanted: &str| content.iter().find(|(t, _)| essence(t) == wanted);
    let (media, media_object) = if let Some((t, m)) = content.iter().find(|(t, _)| is_json(t)) {
        (BodyMedia::Json(t.clone()), m)
    } else if let Some((_, m)) = pick("application/x-www-form-urlencoded") {
        (BodyMedia::Form, m)
    } else if let Some((_, m)) = pick("multipart/form-data") {
        (BodyMedia::Multipart(Vec::new()), m)
    } else if let Some((t, m)) = content.iter().next() {
        if essence(t).starts_with("multipart/") {
            return Err(format!("request body of type {t} is not served (multipart/form-data is)"));
        }
        if !is_media_type(t.trim()) {
            return Err(format!("request body media type {t:?} is not a media type"));
        }
        (BodyMedia::Raw(t.trim().to_string()), m)
    } else {
        return Err("requestBody with an empty content".into());
    };
    let body_required = body.get("required").and_then(Value::as_bool) == Some(true);
    if let BodyMedia::Raw(media_type) = &media {
        let property = body_argument(properties)?;
        let mut schema = file_schema(body.get("description"), Some(media_type));
        if let Some(Value::Object(described)) = media_object.get("schema")
            && let Some(title) = described.get("title")
        {
            schema["title"] = title.clone();
        }
        properties.insert(property.clone(), schema);
        if body_required {
            required.push(property.clone());
        }
        return Ok(Body { media, shape: BodyShape::Whole(property), required: body_required });
    }
    let schema = match media_object.get("schema") {
        Some(schema) => inliner.convert(&at, schema)?,
        None => Converted { value: json!({}), ..Converted::default() },
    };
    // Its shape at the root, refs followed (a `$ref` to an object component spreads as the
    // object would).
    let mut view = inliner.view(&schema)?.value;
    let media = match media {
        BodyMedia::Multipart(_) => {
            let plans = multipart_plans(inliner, media_object, &mut view)?;
            BodyMedia::Multipart(plans)
        }
        other => other,
    };
    let names: Vec<String> = view
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let free_form = view.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false));
    let spread = is_plain_object(&view)
        && !free_form
        && !names.is_empty()
        && names.iter().all(|n| !properties.contains_key(n));
    let shape = if spread {
        let inner_required: Vec<String> = view
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        for name in &names {
            properties.insert(name.clone(), view["properties"][name].clone());
            if body_required && inner_required.contains(name) {
                required.push(name.clone());
            }
        }
        BodyShape::Spread(names)
    } else {
        let property = body_argument(properties)?;
        // A multipart body's file properties are rewritten in the view: it is the schema.
        let mut schema = match media {
            BodyMedia::Multipart(_) => view,
            _ => schema.value,
        };
        if let Some(description) = body.get("description").and_then(Value::as_str)
            && let Value::Object(map) = &mut schema
        {
            map.entry("description").or_insert_with(|| json!(description));
        }
        properties.insert(property.clone(), schema);
        if body_required {
            required.push(property.clone());
        }
        BodyShape::Whole(property)
    };
    Ok(Body { media, shape, required: body_required })
}

/// The name of a body given whole: `body`, else `request_body`, else `_body`.
fn body_argument(properties: &Map<String, Value>) -> Result<String, String> {
    ["body", "request_body", "_body"]
        .into_iter()
        .find(|n| !properties.contains_key(*n))
        .map(str::to_string)
        .ok_or_else(|| "the body's argument names are all taken".to_string())
}

/// A file argument's schema ([`FILE_SCHEMA`]) with the property's description, and the media
/// type sent when the caller gives none.
fn file_schema(description: Option<&Value>, media_type: Option<&str>) -> Value {
    let mut schema: Value = serde_json::from_str(FILE_SCHEMA).unwrap_or_else(|_| json!({"type": "object"}));
    let mut said = match description.and_then(Value::as_str).map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => format!("{d} (a file: its bytes as base64 in `data`)"),
        None => "A file: its bytes as base64 in `data`.".to_string(),
    };
    if let Some(media_type) = media_type {
        let hint = if media_type.contains('*') {
            format!(" `mediaType` must be within {media_type}.")
        } else {
            format!(" Sent as {media_type}.")
        };
        said.push_str(&hint);
    }
    schema["description"] = json!(said);
    schema
}

/// The parts of a `multipart/form-data` body (its view, an object schema, whose file
/// properties are rewritten to file arguments here), and how each is sent.
fn multipart_plans(
    inliner: &mut Schemas<'_>,
    media_object: &Value,
    view: &mut Value,
) -> Result<Vec<PartPlan>, String> {
    let Some(props) = view.get_mut("properties").and_then(Value::as_object_mut) else {
        return Err("a multipart/form-data body needs an object schema with properties".into());
    };
    let mut plans = Vec::new();
    for (name, schema) in props.iter_mut() {
        // Part names go into `Content-Disposition` as they are: nothing that could end the
        // quoted name or the header line.
        if name.is_empty() || name.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
            return Err(format!("multipart property {name:?}: its name cannot be sent as a part name"));
        }
        let converted = Converted { value: schema.clone(), ..Converted::default() };
        let root = inliner.view(&converted)?.value;
        let items = match root.get("type").and_then(Value::as_str) {
            Some("array") => match root.get("items") {
                Some(items) => {
                    Some(inliner.view(&Converted { value: items.clone(), ..Converted::default() })?.value)
                }
                None => None,
            },
            _ => None,
        };
        let kind = match (file_kind(&root), items.as_ref().and_then(file_kind)) {
            (Some(kind), _) => {
                *schema = file_schema(root.get("description"), None);
                kind
            }
            (None, Some(kind)) => {
                let mut array = json!({"type": "array", "items": file_schema(None, None)});
                if let Some(description) = root.get("description") {
                    array["description"] = description.clone();
                }
                *schema = array;
                kind
            }
            (None, None) => PartKind::Text,
        };
        let content_type = media_object
            .pointer(&format!("/encoding/{}/contentType", token(name)))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.contains(',') && !t.contains('*') && is_media_type(t))
            .map(str::to_string);
        plans.push(PartPlan { name: name.clone(), kind, content_type });
    }
    Ok(plans)
}

/// Whether a schema (its root) is a file: OpenAPI 3.0's `type: string, format: binary`, or
/// 3.1's `contentMediaType` / `contentEncoding` on a string.
fn file_kind(schema: &Value) -> Option<PartKind> {
    let string = match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
        None => true,
        _ => false,
    };
    if !string {
        return None;
    }
    if let Some(encoding) = schema.get("contentEncoding").and_then(Value::as_str) {
        return encoding.eq_ignore_ascii_case("base64").then_some(PartKind::Base64File);
    }
    let binary = schema.get("format").and_then(Value::as_str) == Some("binary");
    (binary || schema.get("contentMediaType").is_some()).then_some(PartKind::File)
}

/// `type/subtype` with optional `; parameters`, in header-safe characters (RFC 9110 tokens).
pub fn is_media_type(text: &str) -> bool {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let mut pieces = text.splitn(2, ';');
    let essence = pieces.next().unwrap_or("").trim();
    let params_ok = pieces.next().is_none_or(|p| p.chars().all(|c| c == '\t' || (' '..='~').contains(&c)));
    match essence.split_once('/') {
        Some((kind, sub)) => {
            !kind.is_empty()
                && !sub.is_empty()
                && kind.chars().all(tchar)
                && sub.chars().all(tchar)
                && params_ok
        }
        None => false,
    }
}

pub fn is_json(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// The JSON schema of the first success response (200, 201, … then `2XX`), as an object
/// schema: an object as it is (its root `$ref` followed), anything else as `{"result": …}`
/// (then `true`: results are wrapped so). `Ok(None)` when no success response has a JSON body
/// or its schema says nothing (`{}`, as FastAPI writes for an untyped answer): the tool has
/// no `outputSchema`, and an object answer is its structured content as it is. `Err` when the
/// schema cannot be converted (reported; the tool is served without it).
fn output_schema(
    inliner: &mut Schemas<'_>,
    from: &Location,
    op: &Value,
) -> Result<(Option<Value>, bool), String> {
    let Some(responses) = op.get("responses").and_then(Value::as_object) else { return Ok((None, false)) };
    let mut codes: Vec<&String> = responses.keys().filter(|c| c.starts_with('2')).collect();
    codes.sort();
    let Some(code) = codes.first() else { return Ok((None, false)) };
    let (at, response) = inliner.docs().deref(from, &responses[code.as_str()])?;
    let Some(content) = response.get("content").and_then(Value::as_object) else { return Ok((None, false)) };
    let Some(schema) = content.iter().find(|(t, _)| is_json(t)).and_then(|(_, m)| m.get("schema")) else {
        return Ok((None, false));
    };
    let schema = inliner.convert(&at, schema)?;
    let view = inliner.view(&schema)?;
    if says_nothing(&view.value) {
        return Ok((None, false));
    }
    if is_plain_object(&view.value) {
        return Ok((Some(view.value), false));
    }
    let wrapped = json!({"type": "object", "properties": {"result": schema.value}, "required": ["result"]});
    Ok((Some(wrapped), true))
}

/// A schema with no constraint (only annotations): any value.
fn says_nothing(schema: &Value) -> bool {
    schema.as_object().is_some_and(|m| {
        m.keys().all(|k| ["title", "description", "$comment", "example", "examples"].contains(&k.as_str()))
    })
}

/// The hints a method gives: GET/HEAD/OPTIONS/TRACE read-only; PUT and DELETE idempotent;
/// DELETE destructive, PUT not; POST and PATCH neither read-only nor idempotent (and, as MCP
/// assumes of a tool that is not read-only, possibly destructive). Every REST service is
/// outside the gateway: open-world.
fn annotations(method: &Method, title: Option<&str>) -> Value {
    let mut hints = match *method {
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE => {
            json!({"readOnlyHint": true, "idempotentHint": true, "destructiveHint": false})
        }
        Method::PUT => json!({"readOnlyHint": false, "idempotentHint": true, "destructiveHint": false}),
        Method::DELETE => json!({"readOnlyHint": false, "idempotentHint": true, "destructiveHint": true}),
        _ => json!({"readOnlyHint": false, "idempotentHint": false}),
    };
    hints["openWorldHint"] = json!(true);
    if let Some(title) = title {
        hints["title"] = json!(title);
    }
    hints
}

/// The `{name}`s of a path template.
pub fn template_variables(path: &str) -> Vec<&str> {
    let mut vars = Vec::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else { break };
        vars.push(&rest[start + 1..start + len]);
        rest = &rest[start + len + 1..];
    }
    vars
}

/// Every operation of the document: (path, method name, method, JSON pointer).
pub fn operations(paths: &Map<String, Value>) -> Vec<(String, &'static str, Method, String)> {
    let mut found = Vec::new();
    for (path, item) in paths {
        let Some(item) = item.as_object() else { continue };
        for (name, method) in &METHODS {
            if item.contains_key(*name) {
                found.push((path.clone(), *name, method.clone(), format!("/paths/{}/{name}", token(path))));
            }
        }
    }
    found
}

/// Counts an operation's tags for the report (`tags` as strings).
pub fn tags(op: &Value) -> Vec<String> {
    op.get("tags")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The security schemes of the document (`components.securitySchemes`), refs followed.
pub fn security_schemes(docs: &mut Documents) -> BTreeMap<String, Value> {
    let root = docs.root_value();
    let from = docs.root().clone();
    let mut schemes = BTreeMap::new();
    for (name, scheme) in
        root.pointer("/components/securitySchemes").and_then(Value::as_object).into_iter().flatten()
    {
        if let Ok((_, scheme)) = docs.deref(&from, scheme) {
            schemes.insert(name.clone(), scheme);
        }
    }
    schemes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_ids_and_routes() {
        assert_eq!(name_from_id("getProduct"), "getProduct");
        assert_eq!(name_from_id("products.get by id"), "products_get_by_id");
        assert_eq!(name_from_route("GET", "/products/{id}/reviews"), "get_products_id_reviews");
        assert_eq!(name_from_route("delete", "/"), "delete");
        assert_eq!(name_from_id(&"x".repeat(100)).len(), 64);
        let mut taken = HashSet::new();
        assert_eq!(unique("a".into(), &mut taken), "a");
        assert_eq!(unique("a".into(), &mut taken), "a_2");
        assert_eq!(unique("a".into(), &mut taken), "a_3");
        assert_eq!(template_variables("/a/{x}/b/{y}"), vec!["x", "y"]);
    }
}
