//! The built-in rules' detectors: e-mail addresses, telephone numbers, payment card numbers
//! (Luhn-checked, so an order number of 16 digits is not mistaken for one) and operator
//! regexes; redaction of what they find in a result's strings, and the search of arguments.
//! Matching is the `regex` crate's (linear in the text), so a hostile string costs no more
//! than its length.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::contract::ItemKind;
use crate::config::hooks::Detector;

/// Whether a MIME type's content is text (its blob is read for redaction).
fn is_textual(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence.starts_with("text/")
        || essence == "application/json"
        || essence.ends_with("+json")
        || essence == "application/xml"
        || essence.ends_with("+xml")
}

static EMAIL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[a-z0-9._%+-]{1,64}@[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*\.[a-z]{2,24}\b").ok()
});
/// A `+` country code and 8 to 14 digits (spaces, dots or dashes between groups), or a national
/// number with a separator between each of three groups (`03-1234-5678`, `(555) 123-4567`).
static PHONE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}\b|(?:\(\d{2,4}\)[ .-]?|\b\d{2,4}[ .-])\d{3,4}[ .-]\d{3,4}\b)")
        .ok()
});
/// 13 to 19 digits, optionally grouped by single spaces or dashes; Luhn decides.
static CARD: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b\d(?:[ -]?\d){12,18}\b").ok());

/// The compiled detectors of one built-in hook.
pub struct Detectors {
    kinds: Vec<Detector>,
    patterns: Vec<Regex>,
}

impl Detectors {
    /// Cards go first: their digits would also read as a telephone number.
    pub fn new(mut kinds: Vec<Detector>, patterns: Vec<Regex>) -> Self {
        kinds.sort_by_key(|kind| match kind {
            Detector::Card => 0,
            Detector::Email => 1,
            Detector::Phone => 2,
        });
        kinds.dedup();
        Self { kinds, patterns }
    }

    /// Whether any detector finds something in `text`.
    pub fn finds(&self, text: &str) -> bool {
        self.kinds.iter().any(|kind| finds_kind(*kind, text))
            || self.patterns.iter().any(|p| p.is_match(text))
    }

    /// `text` with every finding replaced by `[redacted:KIND]` (`[redacted]` for operator
    /// patterns), or `None` when nothing was found.
    pub fn redact(&self, text: &str) -> Option<String> {
        let mut current: Option<String> = None;
        for &kind in &self.kinds {
            let source = current.as_deref().unwrap_or(text);
            if let Some(changed) = redact_kind(kind, source) {
                current = Some(changed);
            }
        }
        for pattern in &self.patterns {
            let source = current.as_deref().unwrap_or(text);
            if pattern.is_match(source) {
                current = Some(pattern.replace_all(source, "[redacted]").into_owned());
            }
        }
        current
    }

    /// Whether any string in `value` (keys and values, at any depth) holds a finding.
    pub fn finds_in(&self, value: &Value) -> bool {
        match value {
            Value::String(text) => self.finds(text),
            Value::Array(items) => items.iter().any(|item| self.finds_in(item)),
            Value::Object(map) => map.iter().any(|(key, item)| self.finds(key) || self.finds_in(item)),
            // A card number sent as a JSON number is still a card number.
            Value::Number(number) => self.finds(&number.to_string()),
            Value::Bool(_) | Value::Null => false,
        }
    }

    /// Redacts every string of `value` in place; whether anything changed.
    pub fn redact_in(&self, value: &mut Value) -> bool {
        match value {
            Value::String(text) => match self.redact(text) {
                Some(changed) => {
                    *text = changed;
                    true
                }
                None => false,
            },
            Value::Array(items) => {
                items.iter_mut().fold(false, |changed, item| self.redact_in(item) | changed)
            }
            Value::Object(map) => {
                map.values_mut().fold(false, |changed, item| self.redact_in(item) | changed)
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => false,
        }
    }

    /// Redacts a `tools/call` result: the text of `type: "text"` content blocks (and of an
    /// embedded resource's text) and every string of `structuredContent`. Whether anything
    /// changed.
    pub fn redact_result(&self, result: &mut Value) -> bool {
        let mut changed = false;
        if let Some(Value::Array(blocks)) = result.get_mut("content") {
            for block in blocks {
                changed |= self.redact_block(block);
            }
        }
        if let Some(structured) = result.get_mut("structuredContent") {
            changed |= self.redact_in(structured);
        }
        changed
    }

    /// Redacts what passes to a caller as an item of `kind` (`docs/hooks.md`): a tool result
    /// ([`Self::redact_result`]); a resource's `contents[].text` and the base64 `blob` of a
    /// textual MIME type (decoded, redacted, encoded again; any other blob is binary and is
    /// not read); a prompt's `description` and its messages' text (text blocks, embedded
    /// resources' text); a completion's values. Whether anything changed.
    pub fn redact_item(&self, kind: ItemKind, item: &mut Value) -> bool {
        match kind {
            ItemKind::Tool => self.redact_result(item),
            ItemKind::Resource => {
                let Some(Value::Array(contents)) = item.get_mut("contents") else { return false };
                contents.iter_mut().fold(false, |changed, content| self.redact_contents(content) | changed)
            }
            ItemKind::Prompt => {
                let mut changed = item.get_mut("description").is_some_and(|d| self.redact_in(d));
                if let Some(Value::Array(messages)) = item.get_mut("messages") {
                    for message in messages {
                        if let Some(content) = message.get_mut("content") {
                            changed |= self.redact_block(content);
                        }
                    }
                }
                changed
            }
            ItemKind::Completion => {
                item.pointer_mut("/completion/values").is_some_and(|values| self.redact_in(values))
            }
        }
    }

    /// A content block's text (`type: "text"`) or embedded resource (`type: "resource"`).
    fn redact_block(&self, block: &mut Value) -> bool {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => block.get_mut("text").is_some_and(|text| self.redact_in(text)),
            Some("resource") => block.get_mut("resource").is_some_and(|r| self.redact_contents(r)),
            _ => false,
        }
    }

    /// One resource contents: its `text`, or its `blob` when its MIME type is textual.
    fn redact_contents(&self, contents: &mut Value) -> bool {
        if let Some(text) = contents.get_mut("text") {
            return self.redact_in(text);
        }
        let textual = contents.get("mimeType").and_then(Value::as_str).is_some_and(is_textual);
        if !textual {
            return false;
        }
        let Some(Value::String(blob)) = contents.get_mut("blob") else { return false };
        use base64::{Engine, engine::general_purpose::STANDARD};
        let Some(text) = STANDARD.decode(blob.as_bytes()).ok().and_then(|b| String::from_utf8(b).ok()) else {
            return false;
        };
        match self.redact(&text) {
            Some(redacted) => {
                *blob = STANDARD.encode(redacted);
                true
            }
            None => false,
        }
    }
}

fn finds_kind(kind: Detector, text: &str) -> bool {
    let Some(regex) = regex_of(kind) else { return false };
    match kind {
        Detector::Card => regex.find_iter(text).any(|m| luhn_valid(m.as_str())),
        Detector::Phone => regex.find_iter(text).any(|m| !inside_a_number(text, m.start(), m.end())),
        Detector::Email => regex.is_match(text),
    }
}

fn redact_kind(kind: Detector, text: &str) -> Option<String> {
    let regex = regex_of(kind)?;
    let label = match kind {
        Detector::Card => "[redacted:card]",
        Detector::Email => "[redacted:email]",
        Detector::Phone => "[redacted:phone]",
    };
    let mut found = false;
    let replaced = regex.replace_all(text, |caps: &regex::Captures<'_>| {
        let Some(whole) = caps.get(0) else { return String::new() };
        let matched = whole.as_str();
        let kept = match kind {
            Detector::Card => !luhn_valid(matched),
            Detector::Phone => inside_a_number(text, whole.start(), whole.end()),
            Detector::Email => false,
        };
        if kept {
            return matched.to_owned();
        }
        found = true;
        label.to_owned()
    });
    found.then(|| replaced.into_owned())
}

/// Whether the match `start..end` of `text` is part of a longer run of grouped digits (`4111
/// 1111 1111 1112` is no telephone number even though `4111 1111 1111` could read as one).
fn inside_a_number(text: &str, start: usize, end: usize) -> bool {
    let separator = |c: char| matches!(c, ' ' | '.' | '-');
    let mut before = text[..start].chars().rev();
    let mut after = text[end..].chars();
    let digit_before = match before.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some(c) if separator(c) => before.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    };
    let digit_after = match after.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some(c) if separator(c) => after.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    };
    digit_before || digit_after
}

fn regex_of(kind: Detector) -> Option<&'static Regex> {
    match kind {
        Detector::Email => EMAIL.as_ref(),
        Detector::Phone => PHONE.as_ref(),
        Detector::Card => CARD.as_ref(),
    }
}

/// The Luhn check of a card number's digits (separators ignored), 13 to 19 digits.
pub fn luhn_valid(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                *d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all() -> Detectors {
        Detectors::new(vec![Detector::Email, Detector::Phone, Detector::Card], Vec::new())
    }

    #[test]
    fn every_kind_of_item_is_redacted_where_it_carries_text() {
        use base64::{Engine, engine::general_purpose::STANDARD};
        let d = all();
        let mut resource = json!({"contents": [
            {"uri": "a://1", "text": "mail ann@example.com"},
            {"uri": "a://2", "mimeType": "text/plain; charset=utf-8", "blob": STANDARD.encode("ann@example.com")},
            {"uri": "a://3", "mimeType": "image/png", "blob": STANDARD.encode("ann@example.com")},
        ]});
        assert!(d.redact_item(ItemKind::Resource, &mut resource));
        assert_eq!(resource["contents"][0]["text"], "mail [redacted:email]");
        assert_eq!(resource["contents"][1]["blob"], STANDARD.encode("[redacted:email]"));
        assert_eq!(resource["contents"][2]["blob"], STANDARD.encode("ann@example.com"), "binary: not read");
        let mut prompt = json!({"description": "for ann@example.com", "messages": [
            {"role": "user", "content": {"type": "text", "text": "to ann@example.com"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "a://1", "text": "ann@example.com"}}},
        ]});
        assert!(d.redact_item(ItemKind::Prompt, &mut prompt));
        assert!(!prompt.to_string().contains("ann@example.com"), "{prompt}");
        let mut completion = json!({"completion": {"values": ["ann@example.com", "bob"]}});
        assert!(d.redact_item(ItemKind::Completion, &mut completion));
        assert_eq!(completion["completion"]["values"], json!(["[redacted:email]", "bob"]));
        let mut clean = json!({"completion": {"values": ["bob"]}});
        assert!(!d.redact_item(ItemKind::Completion, &mut clean));
    }

    #[test]
    fn luhn_accepts_test_cards_and_refuses_near_misses() {
        assert!(luhn_valid("4111 1111 1111 1111"));
        assert!(luhn_valid("5500-0000-0000-0004"));
        assert!(luhn_valid("378282246310005"));
        assert!(!luhn_valid("4111 1111 1111 1112"));
        assert!(!luhn_valid("1234"));
    }

    #[test]
    fn redaction_keeps_luhn_invalid_digits_and_names_what_it_replaced() {
        let d = all();
        let text =
            "card 4111 1111 1111 1111, order 4111111111111112, mail a.b@example.co.jp, tel +81 90-1234-5678";
        let out = d.redact(text).unwrap();
        assert_eq!(
            out,
            "card [redacted:card], order 4111111111111112, mail [redacted:email], tel [redacted:phone]"
        );
        assert!(d.redact("MNG-00000004 costs 528 yen on 2026-11-27").is_none());
        assert_eq!(d.redact("call 03-1234-5678").unwrap(), "call [redacted:phone]");
        let grouped = "not 4111 1111 1111 1112";
        assert!(d.redact(grouped).is_none(), "a Luhn-invalid grouped number is no phone either");
        assert!(!d.finds(grouped));
    }

    #[test]
    fn operator_patterns_and_structured_content_are_redacted() {
        let d = Detectors::new(vec![Detector::Email], vec![Regex::new(r"ORD-\d{6}").unwrap()]);
        let mut result = json!({
            "content": [{"type": "text", "text": "ORD-123456 for x@y.com"}, {"type": "image", "data": "x@y.com"}],
            "structuredContent": {"orders": [{"id": "ORD-654321", "n": 2}]}
        });
        assert!(d.redact_result(&mut result));
        assert_eq!(result["content"][0]["text"], "[redacted] for [redacted:email]");
        assert_eq!(result["content"][1]["data"], "x@y.com", "only text blocks are text");
        assert_eq!(result["structuredContent"]["orders"][0]["id"], "[redacted]");
    }

    #[test]
    fn arguments_are_searched_at_any_depth() {
        let d = Detectors::new(vec![Detector::Card], Vec::new());
        assert!(d.finds_in(&json!({"payment": {"number": "4111-1111-1111-1111"}})));
        assert!(d.finds_in(&json!({"n": 4111111111111111u64})));
        assert!(!d.finds_in(&json!({"manga_id": "MNG-00000004", "quantity": 2})));
    }
}
