//! `tools/list` in pages. A list (per catalogue snapshot, per caller's view) holds each tool's
//! definition as the catalogue holds it, a shared text ([`SharedJson`]), in list order: a page
//! writes out its own definitions and nothing else, so its cost is the page's size whatever
//! the catalogue's, and a list of thousands of tools holds no second copy of their text.
//!
//! **Order and cursors.** The search mode's meta-tools come first, then the tools ordered by
//! the name callers see. A cursor names the last tool of the page it ends (and where it was),
//! not an offset: the next page starts after that name in the list in force when it is asked
//! for. So a catalogue that changes between two pages never makes a caller see a tool twice
//! nor skip one that was there all along under the same name; a tool added meanwhile is seen
//! if its name comes after the cursor's, a removed one is simply absent, a renamed one is seen
//! under its new name if that comes after the cursor's (the list-change notification tells
//! the caller to list again). A cursor this gateway did not give is refused (`bad_input`), as
//! for resources.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use bytes::Bytes;
use serde_json::Value;
use std::{
    hash::{BuildHasher, Hasher},
    sync::{Arc, OnceLock},
};

use crate::{registry::record::Definition, shared_json::SharedJson};

/// The prefix of the gateway's own list cursors (the resources' too).
const CURSOR_PREFIX: &str = "mcpgw-cursor.";
/// What a tools cursor's payload starts with (a resources cursor's is a number).
const TOOLS_TAG: &str = "tools:";

/// Why a cursor was refused: the caller's error detail.
pub const FOREIGN_CURSOR: &str = "params.cursor is not a cursor this gateway gave";

/// One `tools/list`: each tool's definition in list order, held as it is (a catalogue
/// record's shared text, or a value written once). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolList {
    entries: Arc<[Entry]>,
    /// The meta-tools at the head (search mode), before the tools ordered by name.
    meta: usize,
    /// The list's fingerprint, computed at the first ask ([`Self::fingerprint`]).
    fingerprint: Arc<OnceLock<u64>>,
}

#[derive(Debug)]
struct Entry {
    /// The name callers see (the definition's `name`).
    name: Box<str>,
    definition: Held,
}

#[derive(Debug)]
enum Held {
    /// A catalogue record's text (shared with the record).
    Text(SharedJson),
    /// A value's compact JSON.
    Written(Box<str>),
}

impl Entry {
    fn len(&self) -> usize {
        match &self.definition {
            Held::Text(text) => text.len(),
            Held::Written(text) => text.len(),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match &self.definition {
            Held::Text(text) => text.write_to(out),
            Held::Written(text) => out.extend_from_slice(text.as_bytes()),
        }
    }
}

/// One page: the definitions it holds (comma-separated, without the brackets) and the cursor
/// of the next page, if there is one.
#[derive(Debug, Clone)]
pub struct Page {
    pub tools: Bytes,
    pub next_cursor: Option<String>,
}

impl Page {
    /// The page as one JSON result, `{<fields>"tools":[…],"nextCursor":…}` in three parts:
    /// a head, the definitions, a tail. `fields` (e.g. the cache hints of a 2026-07-28 answer)
    /// is empty or ends with a comma.
    pub fn result_parts(&self, fields: &str) -> (Bytes, Bytes, Bytes) {
        let head = match fields {
            "" => Bytes::from_static(br#"{"tools":["#),
            fields => Bytes::from(format!(r#"{{{fields}"tools":["#)),
        };
        let tail = match &self.next_cursor {
            // A cursor is base64url after an ASCII prefix: nothing in it needs escaping.
            Some(cursor) => Bytes::from(format!(r#"],"nextCursor":"{cursor}"}}"#)),
            None => Bytes::from_static(b"]}"),
        };
        (head, self.tools.clone(), tail)
    }

    /// The page's definitions, parsed (the degraded answer edits them).
    pub fn definitions(&self) -> Vec<Value> {
        let mut text = Vec::with_capacity(self.tools.len() + 2);
        text.push(b'[');
        text.extend_from_slice(&self.tools);
        text.push(b']');
        serde_json::from_slice(&text).unwrap_or_default()
    }
}

impl Default for ToolList {
    fn default() -> Self {
        Self::build(&[], std::iter::empty::<Listed<'_>>())
    }
}

/// A definition a list is written from: a catalogue record's (its text, shared as it is) or a
/// value (a meta-tool, or one a caller's view edited).
#[derive(Debug, Clone, Copy)]
pub enum Listed<'a> {
    Text(&'a Definition),
    Value(&'a Value),
}

impl<'a> Listed<'a> {
    /// The name the entry lists the tool under.
    pub fn name(&self) -> &'a str {
        match *self {
            Listed::Text(d) => d.name(),
            Listed::Value(v) => v.get("name").and_then(Value::as_str),
        }
        .unwrap_or_default()
    }

    fn held(&self) -> Held {
        match self {
            Listed::Text(d) => Held::Text(d.text().clone()),
            Listed::Value(v) => Held::Written(v.to_string().into_boxed_str()),
        }
    }
}

impl ToolList {
    /// `meta` (in that order) then `tools` (ordered here by name).
    pub fn build<'a>(meta: &'a [Value], tools: impl Iterator<Item = Listed<'a>>) -> Self {
        let mut tools: Vec<(&str, Listed<'a>)> = tools.map(|d| (d.name(), d)).collect();
        tools.sort_by(|a, b| a.0.cmp(b.0));
        let meta_entries = meta.iter().map(Listed::Value).map(|d| (d.name(), d));
        let entries: Arc<[Entry]> = meta_entries
            .chain(tools)
            .map(|(name, d)| Entry { name: name.into(), definition: d.held() })
            .collect();
        Self { entries, meta: meta.len(), fingerprint: Arc::default() }
    }

    /// The whole list, `{"tools":[…]}` (the exports' input), written out.
    pub fn whole(&self) -> Bytes {
        let mut whole = Vec::with_capacity(self.written_len(&self.entries) + 12);
        whole.extend_from_slice(br#"{"tools":["#);
        write_entries(&self.entries, &mut whole);
        whole.extend_from_slice(b"]}");
        Bytes::from(whole)
    }

    /// A hash of the list's bytes, computed once per list (its clones share it): equal lists,
    /// equal fingerprints (the list-change streams compare them).
    pub fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| {
            let mut hasher = foldhash::quality::FixedState::with_seed(0x6c69_7374).build_hasher();
            let mut buffer = Vec::new();
            for entry in self.entries.iter() {
                buffer.clear();
                entry.write(&mut buffer);
                hasher.write(&buffer);
            }
            hasher.write_usize(self.entries.len());
            hasher.finish()
        })
    }

    fn written_len(&self, entries: &[Entry]) -> usize {
        entries.iter().map(|e| e.len() + 1).sum()
    }

    /// Tools listed (meta-tools included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The page after `cursor` (`None`: the first) of at most `size` tools; `Err` for a
    /// cursor this gateway did not give.
    pub fn page(&self, cursor: Option<&str>, size: usize) -> Result<Page, &'static str> {
        let size = size.max(1);
        let start = match cursor {
            None => 0,
            Some(cursor) => self.resume(&decode(cursor).ok_or(FOREIGN_CURSOR)?),
        };
        let end = (start + size).min(self.entries.len());
        if start >= end {
            return Ok(Page { tools: Bytes::new(), next_cursor: None });
        }
        let entries = &self.entries[start..end];
        let mut tools = Vec::with_capacity(self.written_len(entries));
        write_entries(entries, &mut tools);
        let last = &self.entries[end - 1];
        let next_cursor = (end < self.entries.len()).then(|| {
            encode(&Cursor { meta: end - 1 < self.meta, index: end - 1, name: last.name.to_string() })
        });
        Ok(Page { tools: Bytes::from(tools), next_cursor })
    }

    /// Where the page after `cursor` starts in this list.
    fn resume(&self, cursor: &Cursor) -> usize {
        // The list the cursor was given from, unchanged there: the next entry.
        if let Some(entry) = self.entries.get(cursor.index)
            && *entry.name == *cursor.name
            && (cursor.index < self.meta) == cursor.meta
        {
            return cursor.index + 1;
        }
        let tools = &self.entries[self.meta..];
        if cursor.meta {
            // A meta-tool that moved: after it if it is still there, else the first tool.
            return self.entries[..self.meta]
                .iter()
                .position(|e| *e.name == *cursor.name)
                .map_or(self.meta, |i| i + 1);
        }
        self.meta + tools.partition_point(|e| *e.name <= *cursor.name)
    }
}

/// `entries`' definitions, comma-separated.
fn write_entries(entries: &[Entry], out: &mut Vec<u8>) {
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        entry.write(out);
    }
}

/// What a tools cursor says: the last tool of the page it ends, and where it was.
#[derive(Debug, PartialEq)]
struct Cursor {
    meta: bool,
    index: usize,
    name: String,
}

fn encode(cursor: &Cursor) -> String {
    let section = if cursor.meta { 'm' } else { 't' };
    let payload = format!("{TOOLS_TAG}{section}{}:{}", cursor.index, cursor.name);
    format!("{CURSOR_PREFIX}{}", URL_SAFE_NO_PAD.encode(payload))
}

fn decode(cursor: &str) -> Option<Cursor> {
    let encoded = cursor.strip_prefix(CURSOR_PREFIX)?;
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()?;
    let rest = text.strip_prefix(TOOLS_TAG)?;
    let meta = match rest.as_bytes().first()? {
        b'm' => true,
        b't' => false,
        _ => return None,
    };
    let (index, name) = rest[1..].split_once(':')?;
    Some(Cursor { meta, index: index.parse().ok()?, name: name.to_string() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools(names: &[&str]) -> Vec<Value> {
        names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect()
    }

    fn names(page: &Page) -> Vec<String> {
        page.definitions().iter().map(|d| d["name"].as_str().unwrap_or_default().to_string()).collect()
    }

    /// Every page from the first, following the cursors (`lists` gives the list in force at
    /// each page: a catalogue may change between pages).
    fn walk(mut lists: impl FnMut(usize) -> ToolList, size: usize) -> Vec<String> {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        for i in 0.. {
            let page = lists(i).page(cursor.as_deref(), size).unwrap();
            seen.extend(names(&page));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        seen
    }

    #[test]
    fn pages_cover_the_list_once_in_name_order_and_equal_the_whole_when_it_fits() {
        let defs = tools(&["c", "a", "e", "b", "d"]);
        let list = ToolList::build(&[], defs.iter().map(Listed::Value));
        assert_eq!(walk(|_| list.clone(), 2), ["a", "b", "c", "d", "e"]);
        let whole: Value = serde_json::from_slice(&list.whole()).unwrap();
        assert_eq!(whole["tools"].as_array().map(Vec::len), Some(5));
        // One page holds it all: the very bytes of the whole list, no cursor.
        let page = list.page(None, 5).unwrap();
        assert!(page.next_cursor.is_none());
        let (head, body, tail) = page.result_parts("");
        assert_eq!([head, body, tail].concat(), list.whole().to_vec());
        let empty = ToolList::default();
        let (head, body, tail) = empty.page(None, 5).unwrap().result_parts("");
        assert_eq!([head, body, tail].concat(), br#"{"tools":[]}"#.to_vec());
    }

    #[test]
    fn a_lists_fingerprint_is_that_of_its_bytes_however_its_definitions_are_held() {
        let defs = [
            json!({"name": "a", "inputSchema": {"type": "object", "$defs": {"X": {"type": "string"}}}}),
            json!({"name": "b", "inputSchema": {"type": "object"}}),
        ];
        let held: Vec<Definition> = defs.iter().map(Definition::from).collect();
        let from_values = ToolList::build(&[], defs.iter().map(Listed::Value));
        let from_texts = ToolList::build(&[], held.iter().map(Listed::Text));
        assert_eq!(from_values.whole(), from_texts.whole());
        assert_eq!(from_values.fingerprint(), from_texts.fingerprint());
        assert_eq!(from_texts.fingerprint(), from_texts.clone().fingerprint());
        let other = ToolList::build(&[], defs[..1].iter().map(Listed::Value));
        assert_ne!(other.fingerprint(), from_values.fingerprint());
        let renamed =
            json!({"name": "b", "inputSchema": {"type": "object", "$defs": {"Y": {"type": "string"}}}});
        let changed = ToolList::build(&[], [Listed::Value(&defs[0]), Listed::Value(&renamed)].into_iter());
        assert_ne!(changed.fingerprint(), from_values.fingerprint(), "a changed component changes it");
    }

    #[test]
    fn a_page_result_carries_its_cursor_and_fields() {
        let defs = tools(&["a", "b", "c"]);
        let list = ToolList::build(&[], defs.iter().map(Listed::Value));
        let page = list.page(None, 2).unwrap();
        let (head, body, tail) = page.result_parts(r#""ttlMs":5,"#);
        let result: Value = serde_json::from_slice(&[head, body, tail].concat()).unwrap();
        assert_eq!(result["ttlMs"], 5);
        assert_eq!(result["tools"].as_array().map(Vec::len), Some(2));
        let cursor = result["nextCursor"].as_str().unwrap();
        assert_eq!(names(&list.page(Some(cursor), 2).unwrap()), ["c"]);
    }

    #[test]
    fn meta_tools_come_first_then_the_tools_by_name() {
        let meta = tools(&["search_tools", "call_tool"]);
        let defs = tools(&["b", "a"]);
        let list = ToolList::build(&meta, defs.iter().map(Listed::Value));
        assert_eq!(walk(|_| list.clone(), 1), ["search_tools", "call_tool", "a", "b"]);
    }

    #[test]
    fn foreign_cursors_are_refused() {
        let defs = tools(&["a", "b"]);
        let list = ToolList::build(&[], defs.iter().map(Listed::Value));
        let resources_cursor = format!("{CURSOR_PREFIX}{}", URL_SAFE_NO_PAD.encode("100"));
        for cursor in ["", "an upstream's cursor", "mcpgw-cursor.!!", resources_cursor.as_str()] {
            assert_eq!(list.page(Some(cursor), 1).unwrap_err(), FOREIGN_CURSOR, "{cursor}");
        }
        let forged = format!("{CURSOR_PREFIX}{}", URL_SAFE_NO_PAD.encode("tools:t99:zzz"));
        assert!(list.page(Some(&forged), 1).unwrap().tools.is_empty(), "after the last: an empty page");
    }

    #[test]
    fn a_catalogue_change_between_pages_skips_and_repeats_no_tool_that_stayed() {
        let before = tools(&["a", "b", "c", "d", "e", "f"]);
        // After the first page (a, b): `a` and `e` removed, `bb` and `aa` added, `c` renamed `z`.
        let after = tools(&["aa", "b", "bb", "d", "f", "z"]);
        let lists = [
            ToolList::build(&[], before.iter().map(Listed::Value)),
            ToolList::build(&[], after.iter().map(Listed::Value)),
        ];
        let seen = walk(|i| lists[i.min(1)].clone(), 2);
        assert_eq!(seen, ["a", "b", "bb", "d", "f", "z"]);
        // Every tool there all along (b, d, f) seen exactly once; nothing twice.
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), seen.len());
    }
}
