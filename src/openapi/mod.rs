//! OpenAPI targets (`transport = "openapi"`): a REST service described by an OpenAPI 3.0 or
//! 3.1 document (JSON or YAML) served as tools, one per selected operation, with everything
//! the gateway does for MCP servers — the tools enter the catalogue through the same
//! `tools/list` path as a discovering server's ([`crate::upstream::openapi`] answers it), so
//! catalogue control, pinning, search, exports and policy apply unchanged.
//!
//! This module reads and maps documents; the transport builds calls from the result
//! ([`Mapped`]). By job:
//! - [`budget`]: text to a JSON value within a memory budget, YAML aliases included;
//! - [`document`]: text to JSON (line and column on a parse error), whole-document checks,
//!   `$ref` resolution across the document and the files beside it;
//! - [`schema`]: schemas as tool schemas (refs into `$defs`, each component converted once);
//! - [`select`]: `include` / `exclude`;
//! - [`mapping`]: one operation → one tool and its call plan, or a reason to skip it;
//! - [`request`]: a call's HTTP request from its arguments;
//! - [`reply`]: the HTTP answer as a tool result or an upstream error;
//! - [`fetch`]: a URL document fetched once, for `check-config`.

pub mod body;
pub mod budget;
pub mod document;
pub mod encoding;
pub mod fetch;
pub mod mapping;
pub mod plan;
pub mod request;
pub mod schema;
pub mod select;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
    sync::Arc,
};

use serde_json::Value;

use crate::shared_json::SharedJson;

use self::{
    document::Documents,
    mapping::{Route, map_operation, name_from_id, name_from_route, unique},
    schema::Schemas,
};
pub use self::{
    document::{DocError, Location},
    mapping::Skipped,
    plan::Operation,
    select::Selection,
};

/// The bounds of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_spec_bytes: usize,
    pub max_operations: usize,
    pub max_schema_depth: usize,
    /// Most bytes the mapped tool definitions may take together (the server's
    /// `max_catalogue_bytes`): past it the document is refused, as its list would be, before
    /// definitions many times the document's size are held.
    pub max_list_bytes: usize,
}

/// A document mapped: the tools, their call plans, what was skipped or trimmed and why.
///
/// The parsed document is not kept: only this. The tools are kept as their definitions' text
/// (a fraction of the memory the same definitions take as `serde_json::Value`s, and each
/// `$defs` component once: [`SharedJson`]), the very texts the catalogue then holds;
/// [`Mapped::tools`] parses them for the rare reader that needs values.
#[derive(Debug)]
pub struct Mapped {
    /// Where the document came from (shown in reports).
    pub source: String,
    /// The tool definitions in the document's order, as JSON text.
    pub list: Vec<SharedJson>,
    /// Call plans by tool name.
    pub operations: HashMap<String, Arc<Operation>>,
    pub skipped: Vec<Skipped>,
    /// Tools served with part of a schema left out or cut to fit their definition's bound.
    pub trimmed: Vec<Trimmed>,
    /// The document's first server URL (variables at their defaults), if it has one.
    pub server_url: Option<String>,
    /// `components.securitySchemes`, refs followed.
    pub schemes: BTreeMap<String, Value>,
    /// How many operations the document holds (before selection).
    pub total_operations: usize,
    /// The `include`/`exclude` selectors, as written, that match no operation of the document.
    pub unmatched_selectors: Vec<String>,
    /// Bytes of the document's text (and the files its refs reached), read to map it.
    pub document_bytes: usize,
    /// Components the tools' schemas refer to (each converted once, shared through `$defs`),
    /// and their bytes as JSON text.
    pub components: usize,
    pub component_bytes: usize,
}

/// A tool served with part of its schemas left out or cut, and what.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct Trimmed {
    pub tool: String,
    pub method: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    pub reason: String,
}

impl Mapped {
    /// The tool definitions as values (parsed from [`Mapped::list`]).
    pub fn tools(&self) -> Vec<Value> {
        self.list.iter().filter_map(|t| t.parse().ok()).collect()
    }

    /// The `tools/list` result, `{"tools":[…]}`, written out.
    pub fn list_result(&self) -> String {
        let mut out = Vec::with_capacity(self.list.iter().map(|t| t.len() + 1).sum::<usize>() + 12);
        out.extend_from_slice(br#"{"tools":["#);
        for (i, tool) in self.list.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            tool.write_to(&mut out);
        }
        out.extend_from_slice(b"]}");
        // Every definition is UTF-8 JSON text.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Whether `spec` names an http(s) URL (else it is a file path).
pub fn is_url(spec: &str) -> bool {
    let lower = spec.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Reads, checks and maps a document file.
pub fn load_file(
    path: &Path,
    selection: &Selection,
    limits: Limits,
    max_definition_bytes: usize,
) -> Result<Mapped, DocError> {
    let shown = path.display().to_string();
    let size = std::fs::metadata(path).map_err(|e| DocError::new(&shown, "the file", e.to_string()))?.len();
    if usize::try_from(size).unwrap_or(usize::MAX) > limits.max_spec_bytes {
        return Err(DocError::new(
            &shown,
            "the file",
            format!("{size} bytes exceed max_spec_bytes ({})", limits.max_spec_bytes),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| DocError::new(&shown, "the file", e.to_string()))?;
    map_text(text, Location::File(path.to_path_buf()), selection, limits, max_definition_bytes)
}

/// Checks and maps a document's text, read from `location` (the text is dropped once parsed:
/// mapping holds the parsed document, not both).
pub fn map_text(
    text: String,
    location: Location,
    selection: &Selection,
    limits: Limits,
    max_definition_bytes: usize,
) -> Result<Mapped, DocError> {
    let source = location.shown();
    let mut budget = budget::Budget::for_spec_bytes(limits.max_spec_bytes);
    let root = document::parse(&text, &source, &mut budget, budget::Place::Document)?;
    let text_bytes = text.len();
    drop(text);
    document::check_root(&root, &source)?;
    let mut docs =
        Documents::new(location.clone(), root, text_bytes, limits.max_spec_bytes).with_budget(budget);
    let root = docs.root_value();
    let empty = serde_json::Map::new();
    let paths = root.get("paths").and_then(Value::as_object).unwrap_or(&empty);
    let all = mapping::operations(paths);
    if all.len() > limits.max_operations {
        return Err(DocError::new(
            &source,
            "/paths",
            format!("{} operations exceed max_operations ({})", all.len(), limits.max_operations),
        ));
    }
    let schemes = mapping::security_schemes(&mut docs);
    let server_url = server_url(&root, &location);
    let root_security = root.get("security").cloned();
    let mut mapped = Mapped {
        source: source.clone(),
        list: Vec::new(),
        operations: HashMap::new(),
        skipped: Vec::new(),
        trimmed: Vec::new(),
        server_url,
        schemes,
        total_operations: all.len(),
        unmatched_selectors: Vec::new(),
        document_bytes: 0,
        components: 0,
        component_bytes: 0,
    };
    let mut hits = select::Hits::default();
    let mut taken = HashSet::new();
    let mut list_bytes = 0usize;
    let mut inliner = Schemas::new(&mut docs, limits.max_schema_depth);
    for (path, method_name, verb, pointer) in all {
        let item = &paths[&path];
        // A path item is borrowed as it is; only one given by `$ref` is resolved (a copy).
        let resolved;
        let (item_at, item) = match item.get("$ref") {
            None => (location.clone(), item),
            Some(_) => match inliner.docs().deref(&location, item) {
                Ok((at, value)) => {
                    resolved = value;
                    (at, &resolved)
                }
                Err(reason) => {
                    mapped.skipped.push(Skipped {
                        method: verb.to_string(),
                        path,
                        operation_id: None,
                        reason,
                    });
                    continue;
                }
            },
        };
        let op = item.get(method_name).unwrap_or(&Value::Null);
        let operation_id = op.get("operationId").and_then(Value::as_str).map(str::to_string);
        let tags = mapping::tags(op);
        let candidate = select::Candidate {
            operation_id: operation_id.as_deref(),
            tags: &tags,
            method: &verb,
            path: &path,
        };
        selection.note(&candidate, &mut hits);
        if !selection.selects(&candidate) {
            continue;
        }
        let skip = |reason: String| Skipped {
            method: verb.to_string(),
            path: path.clone(),
            operation_id: operation_id.clone(),
            reason: format!("{reason} (at {pointer})"),
        };
        if !op.is_object() {
            mapped.skipped.push(skip("the operation is not an object".into()));
            continue;
        }
        let base = match &operation_id {
            Some(id) => name_from_id(id),
            None => name_from_route(method_name, &path),
        };
        let route = Route {
            method: method_name,
            verb: verb.clone(),
            path: &path,
            path_item: item,
            operation: op,
            from: &item_at,
            root_security: root_security.as_ref(),
        };
        let name = unique(base, &mut taken);
        match map_operation(&mut inliner, &route, name.clone(), max_definition_bytes) {
            Ok(done) => {
                let definition = SharedJson::of(&done.definition);
                drop(done.definition);
                // The definitions together stop at the server's catalogue bound: past it the
                // document is refused, as its list would be, before more is held.
                list_bytes = list_bytes.saturating_add(definition.len());
                if list_bytes > limits.max_list_bytes {
                    return Err(DocError::new(
                        &source,
                        "/paths",
                        format!(
                            "the tool definitions exceed max_catalogue_bytes ({})",
                            limits.max_list_bytes
                        ),
                    ));
                }
                mapped.list.push(definition);
                for reason in done.trimmed {
                    mapped.trimmed.push(Trimmed {
                        tool: name.clone(),
                        method: verb.to_string(),
                        path: path.clone(),
                        operation_id: operation_id.clone(),
                        reason,
                    });
                }
                mapped.operations.insert(name, Arc::new(done.operation));
            }
            Err(reason) => {
                taken.remove(&name);
                mapped.skipped.push(skip(reason));
            }
        }
    }
    mapped.unmatched_selectors = selection.unmatched(&hits);
    (mapped.components, mapped.component_bytes) = inliner.stats();
    mapped.document_bytes = docs.bytes_read();
    Ok(mapped)
}

/// The first `servers` entry's URL with its variables at their defaults; a relative URL is
/// resolved against the document's own URL (a file document has none: `None`). No `servers`
/// means `/` (OpenAPI's default): the root of a fetched document's host.
fn server_url(root: &Value, location: &Location) -> Option<String> {
    let first = root.get("servers").and_then(Value::as_array).and_then(|s| s.first());
    let Some(server) = first else {
        return match location {
            Location::Url(base) => reqwest::Url::parse(base).ok()?.join("/").ok().map(String::from),
            Location::File(_) => None,
        };
    };
    let mut url = server.get("url")?.as_str()?.to_string();
    if let Some(variables) = server.get("variables").and_then(Value::as_object) {
        for (name, variable) in variables {
            if let Some(default) = variable.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    if is_url(&url) {
        return Some(url);
    }
    match location {
        Location::Url(base) => reqwest::Url::parse(base).ok()?.join(&url).ok().map(String::from),
        Location::File(_) => None,
    }
}

#[cfg(test)]
mod tests;
