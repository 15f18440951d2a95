//! A listed resource or resource template as the gateway keeps it: the definition serialised
//! once, compactly, as the text callers are sent, and beside it only what routing and the
//! policy read (its canonical URI or its template, its MIME type).
//!
//! Why not a `serde_json::Value`: a definition of three short strings (`uri`, `name`,
//! `mimeType`) took about 1 KB as a map of values, and each resource was held three times
//! (the server's surface as listed, as served, and the index), some 3 KB a resource: 30 MB
//! for 10,000. Here the three places share one allocation of each (`Arc`), a few hundred
//! bytes a resource in all. A definition is edited only when it is kept (a listed URI
//! rewritten to its canonical form) and when the configuration replaces its description,
//! which parses and serialises that one again.
//!
//! A resource's key is its [`CanonicalUri`], made once here as the list is read: a URI with no
//! canonical form is not kept (the caller logs why), and one that is not canonical is kept,
//! and listed, in its canonical form (`crate::resource_uri`).

use std::sync::Arc;

use serde_json::{Value, value::RawValue};

use crate::resource_uri::{CanonicalUri, UriRefusal};

/// One listed resource (keyed by its canonical `uri`: [`ListedResource`]) or template (keyed by
/// its `uriTemplate` as written: [`ListedTemplate`]).
#[derive(Debug, Clone)]
pub struct Listed<K> {
    pub key: K,
    pub mime_type: Option<Arc<str>>,
    /// The definition as listed (compact JSON, the server's key order; a resource's `uri` in
    /// its canonical form).
    pub definition: Arc<RawValue>,
}

/// A listed resource, under its canonical URI.
pub type ListedResource = Listed<CanonicalUri>;
/// A listed resource template, under its text as the server wrote it.
pub type ListedTemplate = Listed<Arc<str>>;

/// The key field of a resource.
pub const RESOURCE_KEY: &str = "uri";
/// The key field of a resource template.
pub const TEMPLATE_KEY: &str = "uriTemplate";

/// Why a listed resource is not kept.
#[derive(Debug, PartialEq)]
pub enum NotKept {
    /// Not an object with a string `uri` (nothing to serve it under).
    NoUri,
    /// Its URI (as listed) has no canonical form.
    Refused(String, UriRefusal),
    /// A skill entry that is not one (see [`ListedResource::skill`]).
    NotASkill(String),
}

/// The MIME types of one list, each kept once (a list has a handful, repeated on every item);
/// at most [`MimeTypes::MAX`] are shared, any further one is kept per item.
#[derive(Debug, Default)]
pub struct MimeTypes(std::collections::HashMap<Box<str>, Arc<str>>);

impl MimeTypes {
    pub const MAX: usize = 64;

    fn get(&mut self, mime: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(mime) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(mime);
        if self.0.len() < Self::MAX {
            self.0.insert(mime.into(), shared.clone());
        }
        shared
    }
}

impl<K> PartialEq for Listed<K> {
    /// The same definition (its key and MIME type are read from it).
    fn eq(&self, other: &Self) -> bool {
        self.definition.get() == other.definition.get()
    }
}

impl ListedResource {
    /// `definition` kept under its canonical URI (written into it when the server wrote
    /// another form), its MIME type shared through `mimes`; or why not.
    pub fn resource(mut definition: Value, mimes: &mut MimeTypes) -> Result<Self, NotKept> {
        let raw = definition.as_object().and_then(|d| d.get(RESOURCE_KEY)).and_then(Value::as_str);
        let Some(raw) = raw else { return Err(NotKept::NoUri) };
        let uri = CanonicalUri::parse(raw).map_err(|refusal| NotKept::Refused(raw.to_string(), refusal))?;
        if uri.as_str() != raw {
            definition[RESOURCE_KEY] = Value::from(uri.as_str());
        }
        let mime_type = mime_type(&definition, mimes);
        let definition = compact(&definition).ok_or(NotKept::NoUri)?;
        Ok(Self { key: uri, mime_type, definition })
    }
}

/// The last segment of a skill's URI: the skill is the directory holding it.
pub const SKILL_FILE: &str = "/SKILL.md";

impl ListedResource {
    /// A skill entry of `skills/list` kept under the canonical URI of its `SKILL.md` (written
    /// into it when the server wrote another form; nothing else of the entry is touched, its
    /// manifest's digests least of all); or why not: an entry whose `uri` is not a `SKILL.md`,
    /// or without a `frontmatter` object naming the skill, or whose `resources` is neither an
    /// array nor `"dynamic"`, is not an entry a host may load (SEP-2640), so not served.
    pub fn skill(mut definition: Value) -> Result<Self, NotKept> {
        let entry = definition.as_object().ok_or(NotKept::NoUri)?;
        let raw = entry.get(RESOURCE_KEY).and_then(Value::as_str).ok_or(NotKept::NoUri)?;
        let uri = CanonicalUri::parse(raw).map_err(|refusal| NotKept::Refused(raw.to_string(), refusal))?;
        let named = entry.get("frontmatter").and_then(|f| f.get("name")).is_some_and(Value::is_string);
        let manifest = match entry.get("resources") {
            Some(Value::Array(_)) => true,
            Some(Value::String(s)) => s == "dynamic",
            _ => false,
        };
        if !uri.as_str().ends_with(SKILL_FILE) || !named || !manifest {
            return Err(NotKept::NotASkill(raw.to_string()));
        }
        if uri.as_str() != raw {
            definition[RESOURCE_KEY] = Value::from(uri.as_str());
        }
        let definition = compact(&definition).ok_or(NotKept::NoUri)?;
        Ok(Self { key: uri, mime_type: None, definition })
    }
}

impl ListedTemplate {
    /// `definition` kept, when it is an object whose `uriTemplate` is a string (a template
    /// without one is not served, so not kept); its MIME type shared through `mimes`.
    pub fn template(definition: &Value, mimes: &mut MimeTypes) -> Option<Self> {
        let key = definition.as_object()?.get(TEMPLATE_KEY)?.as_str()?;
        Some(Self {
            key: key.into(),
            mime_type: mime_type(definition, mimes),
            definition: compact(definition)?,
        })
    }
}

impl<K: Clone> Listed<K> {
    /// The definition with `field` set to `value` (a description from the configuration).
    pub fn with_field(&self, field: &str, value: Value) -> Self {
        Self { definition: with_field(&self.definition, field, value), ..self.clone() }
    }

    /// The definition, parsed (for the rare reader of another field: the admin report).
    pub fn parsed(&self) -> Value {
        parsed(&self.definition)
    }
}

/// `definition` with `field` set to `value` (the same definition when it cannot be).
pub fn with_field(definition: &Arc<RawValue>, field: &str, value: Value) -> Arc<RawValue> {
    let mut edited = parsed(definition);
    if let Some(object) = edited.as_object_mut() {
        object.insert(field.into(), value);
    }
    compact(&edited).unwrap_or_else(|| definition.clone())
}

/// A kept definition, parsed.
pub fn parsed(definition: &RawValue) -> Value {
    serde_json::from_str(definition.get()).unwrap_or(Value::Null)
}

fn compact(definition: &Value) -> Option<Arc<RawValue>> {
    serde_json::value::to_raw_value(definition).ok().map(Arc::from)
}

fn mime_type(definition: &Value, mimes: &mut MimeTypes) -> Option<Arc<str>> {
    definition.get("mimeType").and_then(Value::as_str).map(|m| mimes.get(m))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_definition_is_kept_as_its_compact_text_with_its_key_and_mime_type() {
        let definition = json!({"uri": "file:///a", "name": "a", "mimeType": "text/plain"});
        let listed = Listed::resource(definition.clone(), &mut MimeTypes::default()).unwrap();
        assert_eq!(listed.key.as_str(), "file:///a");
        assert_eq!(listed.mime_type.as_deref(), Some("text/plain"));
        assert_eq!(listed.definition.get(), definition.to_string());
        assert_eq!(listed.parsed(), definition);
        let no_uri = |d: Value| Listed::resource(d, &mut MimeTypes::default()).unwrap_err();
        assert_eq!(no_uri(json!({"name": "no uri"})), NotKept::NoUri);
        assert_eq!(no_uri(json!({"uri": 7})), NotKept::NoUri);
        let described = listed.with_field("description", json!("The a."));
        assert_eq!(described.parsed()["description"], "The a.");
        assert_ne!(described, listed);
        assert_eq!(Listed::resource(definition, &mut MimeTypes::default()).unwrap(), listed);

        let template = json!({"uriTemplate": "File:///{name}", "name": "t"});
        let listed = Listed::template(&template, &mut MimeTypes::default()).unwrap();
        assert_eq!(&*listed.key, "File:///{name}", "a template is kept as written");
        assert!(Listed::template(&json!({"uriTemplate": 7}), &mut MimeTypes::default()).is_none());
    }

    #[test]
    fn a_resource_is_kept_under_its_canonical_uri_written_into_its_definition_or_refused() {
        let definition = json!({"uri": "FILE:///public/./Caf%c3%a9", "name": "cafe"});
        let listed = Listed::resource(definition, &mut MimeTypes::default()).unwrap();
        assert_eq!(listed.key.as_str(), "file:///public/Caf%C3%A9");
        assert_eq!(listed.parsed()["uri"], "file:///public/Caf%C3%A9", "listed in its canonical form");
        let refused = Listed::resource(json!({"uri": "file:///a\\b"}), &mut MimeTypes::default());
        assert_eq!(refused.unwrap_err(), NotKept::Refused("file:///a\\b".into(), UriRefusal::Backslash));
    }
}
