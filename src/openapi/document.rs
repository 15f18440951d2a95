//! Reading an OpenAPI document: JSON or YAML text into one JSON value (a parse error names the
//! line and column), the checks that refuse a document whole (its version, `paths`, the
//! operation count), and `$ref` resolution — local (`#/components/...`) and relative-file
//! (`common.yaml#/...`, files beside a file document), every file within the size bound.
//!
//! A `serde_json::Value` walker instead of a typed model: OpenAPI 3.1 schemas are full JSON
//! Schema (2020-12), which typed 3.0 models (`openapiv3`) cannot hold, and a walker keeps
//! whatever a schema says (`allOf`/`oneOf`/`anyOf`, vendor keywords) while it inlines refs.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::Value;

/// Why a document was refused: where (file or URL, and a JSON pointer or a line) and why.
#[derive(Debug, Clone)]
pub struct DocError {
    pub source: String,
    pub at: String,
    pub reason: String,
}

impl std::fmt::Display for DocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: at {}: {}", self.source, self.at, self.reason)
    }
}

impl std::error::Error for DocError {}

impl DocError {
    pub fn new(source: &str, at: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { source: source.to_string(), at: at.into(), reason: reason.into() }
    }
}

/// Parses a document's text: JSON when it starts with `{`, else YAML (a superset).
pub fn parse(text: &str, source: &str) -> Result<Value, DocError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).map_err(|e| {
            DocError::new(
                source,
                format!("line {} column {}", e.line(), e.column()),
                format!("invalid JSON: {e}"),
            )
        });
    }
    serde_norway::from_str::<Value>(trimmed).map_err(|e| {
        let at = match e.location() {
            Some(at) => format!("line {} column {}", at.line(), at.column()),
            None => "the document".to_string(),
        };
        DocError::new(source, at, format!("invalid YAML: {e}"))
    })
}

/// The whole-document checks: an OpenAPI 3.0 or 3.1 object with a `paths` object.
pub fn check_root(root: &Value, source: &str) -> Result<(), DocError> {
    let Some(map) = root.as_object() else {
        return Err(DocError::new(source, "/", "an OpenAPI document is an object"));
    };
    if map.contains_key("swagger") {
        return Err(DocError::new(
            source,
            "/swagger",
            "Swagger 2.0 is not served; convert the document to OpenAPI 3 (e.g. swagger2openapi)",
        ));
    }
    match map.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.0") || v.starts_with("3.1") => {}
        Some(v) => {
            return Err(DocError::new(
                source,
                "/openapi",
                format!("version {v:?} is not served (3.0 and 3.1 are)"),
            ));
        }
        None => return Err(DocError::new(source, "/openapi", "missing: not an OpenAPI 3 document")),
    }
    match map.get("paths") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(DocError::new(source, "/paths", "must be an object")),
    }
}

/// Where a document (or a file it refers to) lives: refs relative to it are resolved from here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    File(PathBuf),
    /// A document fetched over HTTP: only local refs are resolved in it.
    Url(String),
}

impl Location {
    pub fn shown(&self) -> String {
        match self {
            Location::File(path) => path.display().to_string(),
            Location::Url(url) => crate::redact::url(url),
        }
    }
}

/// Most files one document may pull in through relative refs.
const MAX_REFERENCED_FILES: usize = 64;
/// Most `$ref` hops followed to reach one object (a ref to a ref to …).
const MAX_REF_HOPS: usize = 32;

/// The root document and the files its refs reached, with the bytes read so far.
pub struct Documents {
    root: Location,
    docs: HashMap<Location, Arc<Value>>,
    bytes_read: usize,
    max_bytes: usize,
}

/// A value found through a ref, and the document it is in (its own refs are relative to it).
pub struct Found {
    pub doc: Location,
    /// `doc#pointer`: identifies the target (cycle detection).
    pub key: String,
    pub value: Arc<Value>,
    pub pointer: String,
}

impl Documents {
    pub fn new(root: Location, value: Value, bytes: usize, max_bytes: usize) -> Self {
        let mut docs = HashMap::new();
        docs.insert(root.clone(), Arc::new(value));
        Self { root, docs, bytes_read: bytes, max_bytes }
    }

    pub fn root(&self) -> &Location {
        &self.root
    }

    pub fn root_value(&self) -> Arc<Value> {
        self.docs.get(&self.root).cloned().unwrap_or_else(|| Arc::new(Value::Null))
    }

    /// Bytes of text read: the document and the files its refs reached.
    pub fn bytes_read(&self) -> usize {
        self.bytes_read
    }

    /// The parsed document at `at`, if it was read.
    pub fn value_of(&self, at: &Location) -> Option<Arc<Value>> {
        self.docs.get(at).cloned()
    }

    /// Resolves `reference` (as written in a document at `from`) to its target.
    pub fn resolve(&mut self, from: &Location, reference: &str) -> Result<Found, String> {
        let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let doc = if file.is_empty() { from.clone() } else { self.load_relative(from, file)? };
        let value = self.docs.get(&doc).cloned().ok_or_else(|| format!("$ref {reference:?}: not loaded"))?;
        let pointer = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy().into_owned();
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!("$ref {reference:?}: only JSON pointers (#/...) are resolved"));
        }
        if value.pointer(&pointer).is_none() {
            return Err(format!("$ref {reference:?}: nothing at {pointer} in {}", doc.shown()));
        }
        let key = format!("{}#{pointer}", doc.shown());
        Ok(Found { doc, key, value, pointer })
    }

    /// Follows `value`'s `$ref`s (if any) to the object they name; `from` is where `value` is.
    pub fn deref(&mut self, from: &Location, value: &Value) -> Result<(Location, Value), String> {
        let mut current = (from.clone(), value.clone());
        for _ in 0..MAX_REF_HOPS {
            let Some(reference) = current.1.get("$ref").and_then(Value::as_str) else {
                return Ok(current);
            };
            let found = self.resolve(&current.0, reference)?;
            let target = found.value.pointer(&found.pointer).cloned().unwrap_or(Value::Null);
            current = (found.doc, target);
        }
        Err(format!("more than {MAX_REF_HOPS} $ref hops (a cycle of refs?)"))
    }

    fn load_relative(&mut self, from: &Location, file: &str) -> Result<Location, String> {
        let Location::File(base) = from else {
            return Err(format!(
                "$ref to {file:?}: refs to other files are resolved for file documents only"
            ));
        };
        if file.contains("://") {
            return Err(format!("$ref to {file:?}: remote refs are not fetched"));
        }
        let path = base.parent().unwrap_or(Path::new(".")).join(file);
        let location = Location::File(path.clone());
        if self.docs.contains_key(&location) {
            return Ok(location);
        }
        if self.docs.len() > MAX_REFERENCED_FILES {
            return Err(format!("more than {MAX_REFERENCED_FILES} files referred to"));
        }
        let size = std::fs::metadata(&path).map_err(|e| format!("$ref to {}: {e}", path.display()))?.len();
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if self.bytes_read.saturating_add(size) > self.max_bytes {
            return Err(format!(
                "$ref to {}: the document and its files exceed max_spec_bytes ({})",
                path.display(),
                self.max_bytes
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("$ref to {}: {e}", path.display()))?;
        self.bytes_read += text.len();
        let value = parse(&text, &location.shown()).map_err(|e| e.to_string())?;
        self.docs.insert(location.clone(), Arc::new(value));
        Ok(location)
    }
}

/// The JSON pointer token for `key` (`~` and `/` escaped).
pub fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_the_line() {
        let err = parse("{\n \"openapi\": \"3.1.0\",\n \"paths\": {,}\n}", "doc.json").unwrap_err();
        assert_eq!(err.at, "line 3 column 12", "{err}");
        let err = parse("openapi: 3.0.3\npaths:\n  /a: [\n", "doc.yaml").unwrap_err();
        assert!(err.at.starts_with("line "), "{err}");
        let yaml = parse(
            "openapi: 3.0.3\npaths:\n  /a:\n    get:\n      responses:\n        200: {description: ok}\n",
            "d",
        )
        .unwrap();
        assert!(
            yaml.pointer("/paths/~1a/get/responses/200").is_some(),
            "integer keys read as strings: {yaml}"
        );
    }

    #[test]
    fn only_openapi_3_is_served() {
        let check = |doc: Value| check_root(&doc, "d").map_err(|e| e.at);
        assert_eq!(check(serde_json::json!({"openapi": "3.1.0", "paths": {}})), Ok(()));
        assert_eq!(check(serde_json::json!({"swagger": "2.0"})), Err("/swagger".into()));
        assert_eq!(check(serde_json::json!({"openapi": "4.0"})), Err("/openapi".into()));
        assert_eq!(check(serde_json::json!({"openapi": "3.0.0", "paths": []})), Err("/paths".into()));
    }

    #[test]
    fn refs_resolve_locally_and_name_what_is_missing() {
        let root = serde_json::json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"type": "string"}}}});
        let mut docs = Documents::new(Location::Url("http://x/doc".into()), root, 0, 1024);
        let from = docs.root().clone();
        let (_, target) = docs.deref(&from, &serde_json::json!({"$ref": "#/components/schemas/A"})).unwrap();
        assert_eq!(target, serde_json::json!({"type": "string"}));
        let err = docs.resolve(&from, "#/components/schemas/C").err().unwrap();
        assert!(err.contains("nothing at /components/schemas/C"), "{err}");
        let err = docs.resolve(&from, "other.yaml#/x").err().unwrap();
        assert!(err.contains("file documents only"), "{err}");
        let looped =
            serde_json::json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/A"}}}});
        let mut docs = Documents::new(Location::Url("http://x/doc".into()), looped, 0, 1024);
        let err = docs.deref(&from, &serde_json::json!({"$ref": "#/components/schemas/A"})).unwrap_err();
        assert!(err.contains("hops"), "{err}");
    }
}
