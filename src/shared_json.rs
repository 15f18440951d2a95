//! A JSON value held as its compact text, with every `$defs` entry held once for the whole
//! process and shared by every text that has it (and a value's text length, counted without
//! writing it: [`json_len`]).
//!
//! Why: a large API document's tools refer to the same components over and over. Microsoft
//! Graph's 11,422 tools carry 99,654 `$defs` entries of which 2,098 are distinct: 85.7 MB of
//! definitions written out, 11.7 MB once the entries are shared. An MCP server whose schemas
//! come from Pydantic models repeats its models' `$defs` the same way. So a definition, a
//! schema kept for validation and a mapped OpenAPI tool are each held in pieces: their own
//! text, and between its pieces the `$defs` entries, each an interned `"name":{…}` text.
//! Written out, the pieces are byte for byte the value's compact JSON (`serde_json`'s), so
//! hashes, pins, pages and exports see the same text as before.
//!
//! The entries are interned in one process-wide table keyed by their text: content decides
//! sharing, whichever server, refresh or reload the text came from. [`release_unshared`] drops
//! the entries no text holds any more (after each catalogue rebuild and refresh); the table is
//! therefore bounded by what the held lists contain, which their own bounds limit.

use std::{
    borrow::Cow,
    collections::HashSet,
    fmt,
    sync::{Arc, LazyLock, Mutex},
};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A JSON value's compact text in pieces (see the module doc). Cheap to clone.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedJson(Arc<Parts>);

#[derive(PartialEq, Eq)]
struct Parts {
    /// Bytes of the whole text.
    len: usize,
    pieces: Box<[Piece]>,
}

#[derive(PartialEq, Eq)]
enum Piece {
    /// Text only this value has.
    Own(Box<str>),
    /// The entries of one `$defs` object, each `"name":{…}` (written comma-separated; the
    /// braces are in the own text around them).
    Defs(Box<[Arc<str>]>),
}

/// The interned `$defs` entries.
static ENTRIES: LazyLock<Mutex<HashSet<Arc<str>, foldhash::fast::RandomState>>> =
    LazyLock::new(Mutex::default);

fn intern(text: String) -> Arc<str> {
    let Ok(mut entries) = ENTRIES.lock() else { return Arc::from(text) };
    if let Some(found) = entries.get(text.as_str()) {
        return found.clone();
    }
    let entry: Arc<str> = Arc::from(text);
    entries.insert(entry.clone());
    entry
}

/// Drops the interned entries no text holds any more.
pub fn release_unshared() {
    if let Ok(mut entries) = ENTRIES.lock() {
        entries.retain(|e| Arc::strong_count(e) > 1);
        entries.shrink_to_fit();
    }
}

/// The interned entries: how many, and the bytes of their text.
pub fn interned() -> (usize, usize) {
    ENTRIES.lock().map(|e| (e.len(), e.iter().map(|t| t.len()).sum())).unwrap_or_default()
}

impl SharedJson {
    /// `value`'s compact text, its `$defs` entries interned.
    pub fn of(value: &Value) -> Self {
        let mut builder = Builder::default();
        builder.value(value);
        builder.finish()
    }

    /// Bytes of the whole text.
    pub fn len(&self) -> usize {
        self.0.len
    }

    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Appends the whole text to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.0.len);
        for piece in &self.0.pieces {
            match piece {
                Piece::Own(text) => out.extend_from_slice(text.as_bytes()),
                Piece::Defs(entries) => {
                    for (i, entry) in entries.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(entry.as_bytes());
                    }
                }
            }
        }
    }

    /// The whole text (borrowed when it is one piece).
    pub fn text(&self) -> Cow<'_, str> {
        if let [Piece::Own(text)] = &*self.0.pieces {
            return Cow::Borrowed(text);
        }
        let mut out = Vec::with_capacity(self.0.len);
        self.write_to(&mut out);
        Cow::Owned(utf8(out))
    }

    /// The text parsed.
    pub fn parse<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.text())
    }

    /// The held text's address: equal for clones of one text, never for two held texts.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Whether both are the same held text (not only equal ones).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Bytes this text holds on its own: its own pieces and the references to shared entries
    /// (the entries themselves are [`Self::shared_entries`]).
    pub fn own_bytes(&self) -> usize {
        let pieces = self.0.pieces.iter().map(|p| match p {
            Piece::Own(text) => text.len(),
            Piece::Defs(entries) => entries.len() * size_of::<Arc<str>>(),
        });
        size_of::<Parts>() + self.0.pieces.len() * size_of::<Piece>() + pieces.sum::<usize>()
    }

    /// The shared `$defs` entries it refers to.
    pub fn shared_entries(&self) -> impl Iterator<Item = &Arc<str>> {
        self.0.pieces.iter().flat_map(|p| match p {
            Piece::Own(_) => [].iter(),
            Piece::Defs(entries) => entries.iter(),
        })
    }
}

impl From<&Value> for SharedJson {
    fn from(value: &Value) -> Self {
        Self::of(value)
    }
}

impl fmt::Display for SharedJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for SharedJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedJson({} bytes, {} pieces)", self.0.len, self.0.pieces.len())
    }
}

/// Bytes of `value` serialised as JSON, counted without building the text.
pub fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Writes a value as `serde_json` does, cutting the text at each `$defs` object's entries.
#[derive(Default)]
struct Builder {
    own: Vec<u8>,
    pieces: Vec<Piece>,
    len: usize,
}

impl Builder {
    fn value(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                self.own.push(b'{');
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        self.own.push(b',');
                    }
                    write_json(&mut self.own, key);
                    self.own.push(b':');
                    match item {
                        Value::Object(defs) if key == "$defs" && !defs.is_empty() => {
                            self.own.push(b'{');
                            self.defs(defs);
                            self.own.push(b'}');
                        }
                        item => self.value(item),
                    }
                }
                self.own.push(b'}');
            }
            Value::Array(items) => {
                self.own.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.own.push(b',');
                    }
                    self.value(item);
                }
                self.own.push(b']');
            }
            scalar => write_json(&mut self.own, scalar),
        }
    }

    fn defs(&mut self, defs: &serde_json::Map<String, Value>) {
        self.flush();
        let entries: Box<[Arc<str>]> = defs
            .iter()
            .map(|(name, schema)| {
                let mut entry = Vec::new();
                write_json(&mut entry, name);
                entry.push(b':');
                write_json(&mut entry, schema);
                intern(utf8(entry))
            })
            .collect();
        self.len += entries.iter().map(|e| e.len()).sum::<usize>() + entries.len() - 1;
        self.pieces.push(Piece::Defs(entries));
    }

    fn flush(&mut self) {
        if !self.own.is_empty() {
            let own = std::mem::take(&mut self.own);
            self.len += own.len();
            self.pieces.push(Piece::Own(utf8(own).into_boxed_str()));
        }
    }

    fn finish(mut self) -> SharedJson {
        self.flush();
        SharedJson(Arc::new(Parts { len: self.len, pieces: self.pieces.into_boxed_slice() }))
    }
}

/// `value` as compact JSON (a `Value` or a string always serialises).
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

/// `serde_json` writes UTF-8; were it ever not, the text is kept with replacement characters.
fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn corpus() -> Vec<Value> {
        vec![
            json!({"name": "plain", "inputSchema": {"type": "object"}}),
            json!({"name": "q\"uo\\te\u{1}é", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"type": "string", "description": "ünï \"x\""}, "B": {"$defs": {"C": {}}, "type": ["null", 1.5, -3, true]}}},
                "outputSchema": {"$defs": {"A": {"type": "string", "description": "ünï \"x\""}}, "items": [{"$defs": {"Z": {"const": 0}}}]}}),
            json!({"$defs": {}, "x": [[], {}, null, 1e300, 18446744073709551615u64]}),
            json!([{"$defs": {"only": 1}}, "$defs"]),
            json!("a string"),
            json!({"$defs": "not an object"}),
        ]
    }

    #[test]
    fn written_out_it_is_serde_jsons_compact_text() {
        for value in corpus() {
            let shared = SharedJson::of(&value);
            assert_eq!(shared.text(), value.to_string());
            assert_eq!(shared.len(), value.to_string().len());
            assert_eq!(shared.parse::<Value>().unwrap(), value);
        }
    }

    #[test]
    fn equal_defs_entries_are_one_held_text() {
        let a = SharedJson::of(
            &json!({"inputSchema": {"$defs": {"Pet": {"type": "object", "title": "shared-test-pet"}}}}),
        );
        let b = SharedJson::of(
            &json!({"name": "b", "outputSchema": {"$defs": {"Pet": {"type": "object", "title": "shared-test-pet"}, "Other": {}}}}),
        );
        let pet_a = a.shared_entries().next().unwrap();
        let pet_b = b.shared_entries().find(|e| e.starts_with("\"Pet\"")).unwrap();
        assert!(Arc::ptr_eq(pet_a, pet_b), "one text for the entry both have");
        assert_eq!(b.shared_entries().count(), 2);
        // An entry named the same but different is its own text.
        let c = SharedJson::of(&json!({"$defs": {"Pet": {"type": "object", "title": "shared-test-pet-2"}}}));
        assert!(!Arc::ptr_eq(pet_a, c.shared_entries().next().unwrap()));
        assert!(a.own_bytes() < a.len() + 64);
    }

    #[test]
    fn entries_nothing_holds_are_released() {
        let unique = json!({"$defs": {"Released": {"title": "shared-json-release-test"}}});
        let held = SharedJson::of(&unique);
        let weak = Arc::downgrade(held.shared_entries().next().unwrap());
        release_unshared();
        assert!(weak.upgrade().is_some(), "held by a text: kept");
        drop(held);
        release_unshared();
        assert!(weak.upgrade().is_none(), "held by nothing: released");
    }
}
