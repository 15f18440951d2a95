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

use super::budget::{Budget, Place};

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

/// Parses a document's text: JSON when it starts with `{`, else YAML (a superset), within
/// `budget` ([`super::budget`]: however its aliases repeat, the value built stays in it).
/// `place`: [`Place::Document`] for an OpenAPI document's root (the parts no tool is mapped
/// from are read past, not built), [`Place::Any`] for a file a `$ref` reaches.
pub fn parse(text: &str, source: &str, budget: &mut Budget, place: Place) -> Result<Value, DocError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        return super::budget::json(trimmed, budget, place).map_err(|e| {
            DocError::new(
                source,
                format!("line {} column {}", e.line(), e.column()),
                format!("invalid JSON: {e}"),
            )
        });
    }
    super::budget::yaml(trimmed, budget, place).map_err(|e| {
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
    /// What parsing the files the refs name may still build ([`super::budget`]).
    budget: Budget,
    /// A file document's directory, absolute and lexically normal: the only place its file
    /// refs may reach.
    confine: Option<PathBuf>,
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
        let confine = match &root {
            Location::File(path) => Some(absolute(path.parent().unwrap_or(Path::new("")))),
            Location::Url(_) => None,
        };
        let budget = Budget::for_spec_bytes(max_bytes);
        Self { root, docs, bytes_read: bytes, max_bytes, budget, confine }
    }

    /// The same, with what is left of the budget the root document was parsed in.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
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
        match value.pointer(&pointer) {
            None => return Err(format!("$ref {reference:?}: nothing at {pointer} in {}", doc.shown())),
            // What another file gives is an object (a schema, a parameter, ...), never a
            // bare scalar or list: a file that is not OpenAPI cannot be inlined whole.
            Some(target) if !file.is_empty() && !target.is_object() => {
                return Err(format!("$ref {reference:?}: names no object in {}", doc.shown()));
            }
            Some(_) => {}
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

    /// Loads the file `file` names, relative to `from` (a file document): only a relative
    /// path that stays in the root document's directory once normalised and once its symbolic
    /// links are followed, read within `max_spec_bytes` (with everything read before it) and
    /// the parse budget, and whose content is an object.
    fn load_relative(&mut self, from: &Location, file: &str) -> Result<Location, String> {
        let (Location::File(base), Some(confine)) = (from, &self.confine) else {
            return Err(format!(
                "$ref to {file:?}: refs to other files are resolved for file documents only"
            ));
        };
        if file.contains("://") {
            return Err(format!("$ref to {file:?}: remote refs are not fetched"));
        }
        let relative = Path::new(file);
        if relative.has_root() || relative.is_absolute() || file.starts_with('\\') {
            return Err(format!(
                "$ref to {file:?}: an absolute path; file refs name files in the document's directory"
            ));
        }
        let path = absolute(&base.parent().unwrap_or(Path::new("")).join(relative));
        if !path.starts_with(confine) {
            return Err(format!("$ref to {file:?}: leaves the document's directory ({})", confine.display()));
        }
        let location = Location::File(path.clone());
        if self.docs.contains_key(&location) {
            return Ok(location);
        }
        if self.docs.len() > MAX_REFERENCED_FILES {
            return Err(format!("more than {MAX_REFERENCED_FILES} files referred to"));
        }
        // Symbolic links followed: the file itself must be in the directory, itself resolved.
        let real_dir = std::fs::canonicalize(confine).map_err(|e| format!("$ref to {file:?}: {e}"))?;
        let real = std::fs::canonicalize(&path).map_err(|e| format!("$ref to {file:?}: {e}"))?;
        if !real.starts_with(&real_dir) {
            return Err(format!(
                "$ref to {file:?}: leaves the document's directory ({}) through a symbolic link",
                confine.display()
            ));
        }
        let left = self.max_bytes.saturating_sub(self.bytes_read);
        let text =
            read_within(&real, left).map_err(|e| format!("$ref to {file:?}: {e}"))?.ok_or_else(|| {
                format!(
                    "$ref to {file:?}: the document and its files exceed max_spec_bytes ({})",
                    self.max_bytes
                )
            })?;
        self.bytes_read += text.len();
        let value =
            parse(&text, &location.shown(), &mut self.budget, Place::Any).map_err(|e| e.to_string())?;
        if !value.is_object() {
            return Err(format!("$ref to {file:?}: the file is not a JSON or YAML object"));
        }
        self.docs.insert(location.clone(), Arc::new(value));
        Ok(location)
    }
}

/// `path` made absolute (against the working directory) and lexically normal: no `.`, and
/// every `..` applied to what precedes it (never past the root).
fn absolute(path: &Path) -> PathBuf {
    use std::path::Component;
    let joined = match path.is_absolute() {
        true => path.to_path_buf(),
        false => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(path),
    };
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// The file's text when it holds at most `limit` bytes (`None` beyond), read no further.
fn read_within(path: &Path, limit: usize) -> std::io::Result<Option<String>> {
    use std::io::Read;
    // Checked before opening: opening a FIFO would wait for a writer.
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(std::io::Error::other)
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
        let budget = &mut Budget::for_spec_bytes(1 << 20);
        let err =
            parse("{\n \"openapi\": \"3.1.0\",\n \"paths\": {,}\n}", "doc.json", budget, Place::Document)
                .unwrap_err();
        assert_eq!(err.at, "line 3 column 12", "{err}");
        let err =
            parse("openapi: 3.0.3\npaths:\n  /a: [\n", "doc.yaml", budget, Place::Document).unwrap_err();
        assert!(err.at.starts_with("line "), "{err}");
        let yaml = parse(
            "openapi: 3.0.3\npaths:\n  /a:\n    get:\n      responses:\n        200: {description: ok}\n",
            "d",
            budget,
            Place::Document,
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

    /// A directory of its own under the temporary one, emptied first.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-gateway-refs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("specs/shared")).unwrap();
        dir
    }

    #[test]
    fn file_refs_stay_in_the_document_directory_and_name_objects() {
        let dir = scratch("confine");
        let specs = dir.join("specs");
        std::fs::write(dir.join("admin-token"), "s3cret-admin-token\n").unwrap();
        std::fs::write(dir.join("outside.yaml"), "Secret: {type: string, description: leaked}\n").unwrap();
        std::fs::write(specs.join("token.txt"), "s3cret-beside\n").unwrap();
        std::fs::write(specs.join("list.yaml"), "- a\n- b\n").unwrap();
        std::fs::write(
            specs.join("shared/common.yaml"),
            "Name: {type: string}\nUp: {$ref: '../top.yaml#/Top'}\n",
        )
        .unwrap();
        std::fs::write(specs.join("top.yaml"), "Top: {type: integer}\nWord: hello\n").unwrap();
        std::os::unix::fs::symlink(dir.join("outside.yaml"), specs.join("link.yaml")).unwrap();
        let doc = specs.join("doc.yaml");
        let mut docs = Documents::new(Location::File(doc.clone()), serde_json::json!({}), 0, 1 << 20);
        let from = docs.root().clone();
        let refused = |docs: &mut Documents, reference: &str| match docs.resolve(&from, reference) {
            Ok(found) => panic!("{reference} resolved to {}", found.value),
            Err(reason) => reason,
        };
        let absolute = format!("{}#/Secret", dir.join("outside.yaml").display());
        assert!(refused(&mut docs, &absolute).contains("absolute path"));
        assert!(refused(&mut docs, "../outside.yaml#/Secret").contains("leaves the document's directory"));
        assert!(refused(&mut docs, "shared/../../admin-token").contains("leaves the document's directory"));
        assert!(refused(&mut docs, "link.yaml#/Secret").contains("symbolic link"));
        assert!(refused(&mut docs, "token.txt").contains("not a JSON or YAML object"));
        assert!(refused(&mut docs, "list.yaml").contains("not a JSON or YAML object"));
        assert!(refused(&mut docs, "top.yaml#/Word").contains("names no object"));
        // Within the directory, `..` that stays inside is fine, and refs chain across files.
        let found = docs.resolve(&from, "shared/common.yaml#/Name").unwrap();
        assert_eq!(found.value.pointer(&found.pointer), Some(&serde_json::json!({"type": "string"})));
        let (_, up) = docs.deref(&found.doc, &serde_json::json!({"$ref": "common.yaml#/Up"})).unwrap();
        assert_eq!(up, serde_json::json!({"type": "integer"}));
        let found = docs.resolve(&from, "shared/../top.yaml#/Top").unwrap();
        assert!(found.value.pointer(&found.pointer).is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
