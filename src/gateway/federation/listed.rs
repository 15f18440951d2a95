//! A listed resource or resource template as the gateway keeps it: the definition serialised
//! once, compactly, as the text callers are sent, and beside it only what routing and the
//! policy read (its URI or template, its MIME type).
//!
//! Why not a `serde_json::Value`: a definition of three short strings (`uri`, `name`,
//! `mimeType`) took about 1 KB as a map of values, and each resource was held three times
//! (the server's surface as listed, as served, and the index), some 3 KB a resource: 30 MB
//! for 10,000. Here the three places share one allocation of each (`Arc`), a few hundred
//! bytes a resource in all. A definition is edited only when the configuration replaces its
//! description, which parses and serialises that one again.

use std::sync::Arc;

use serde_json::{Value, value::RawValue};

/// One listed resource (keyed by `uri`) or template (keyed by `uriTemplate`).
#[derive(Debug, Clone)]
pub struct Listed {
    /// `uri`, or `uriTemplate` for a template, as the server wrote it.
    pub key: Arc<str>,
    pub mime_type: Option<Arc<str>>,
    /// The definition as listed (compact JSON, the server's key order).
    pub definition: Arc<RawValue>,
}

/// The key field of a resource.
pub const RESOURCE_KEY: &str = "uri";
/// The key field of a resource template.
pub const TEMPLATE_KEY: &str = "uriTemplate";

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

impl PartialEq for Listed {
    /// The same definition (its key and MIME type are read from it).
    fn eq(&self, other: &Self) -> bool {
        self.definition.get() == other.definition.get()
    }
}

impl Listed {
    /// `definition` kept, when it is an object whose `key_field` is a string (a resource
    /// without a URI is not served, so not kept); its MIME type shared through `mimes`.
    pub fn of(definition: &Value, key_field: &str, mimes: &mut MimeTypes) -> Option<Self> {
        let key = definition.as_object()?.get(key_field)?.as_str()?;
        let raw = serde_json::value::to_raw_value(definition).ok()?;
        Some(Self {
            key: key.into(),
            mime_type: definition.get("mimeType").and_then(Value::as_str).map(|m| mimes.get(m)),
            definition: Arc::from(raw),
        })
    }

    /// The definition with `field` set to `value` (a description from the configuration).
    pub fn with_field(&self, field: &str, value: Value) -> Self {
        let mut definition = self.parsed();
        if let Some(object) = definition.as_object_mut() {
            object.insert(field.into(), value);
        }
        match serde_json::value::to_raw_value(&definition) {
            Ok(raw) => Self { definition: Arc::from(raw), ..self.clone() },
            Err(_) => self.clone(),
        }
    }

    /// The definition, parsed (for the rare reader of another field: the admin report).
    pub fn parsed(&self) -> Value {
        serde_json::from_str(self.definition.get()).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_definition_is_kept_as_its_compact_text_with_its_key_and_mime_type() {
        let definition = json!({"uri": "file:///a", "name": "a", "mimeType": "text/plain"});
        let listed = Listed::of(&definition, RESOURCE_KEY, &mut MimeTypes::default()).unwrap();
        assert_eq!(&*listed.key, "file:///a");
        assert_eq!(listed.mime_type.as_deref(), Some("text/plain"));
        assert_eq!(listed.definition.get(), definition.to_string());
        assert_eq!(listed.parsed(), definition);
        assert!(Listed::of(&json!({"name": "no uri"}), RESOURCE_KEY, &mut MimeTypes::default()).is_none());
        assert!(Listed::of(&json!({"uri": 7}), RESOURCE_KEY, &mut MimeTypes::default()).is_none());
        let described = listed.with_field("description", json!("The a."));
        assert_eq!(described.parsed()["description"], "The a.");
        assert_ne!(described, listed);
        assert_eq!(Listed::of(&definition, RESOURCE_KEY, &mut MimeTypes::default()).unwrap(), listed);
    }
}
