//! Tool names each model API accepts, and the mapping of the names it does not.
//!
//! MCP allows names a model API refuses (dots, slashes, up to 128 characters); each format has
//! a [`NameRule`]. A name that follows the rule is kept; one that does not is mapped
//! deterministically: characters outside the rule become `_`, a leading character the rule
//! refuses gets a `_` in front, the result is cut so that `_` and the first 8 hex digits of the
//! SHA-256 of the *original* name fit, and those are appended. The same catalogue always gives
//! the same names; the export reports every mapping (exported → original) so the caller can
//! turn the model's tool call back into the gateway's name. Names that follow the rule claim
//! their names first; a mapped name that would collide with any other exported name takes 16
//! hex digits instead, and failing that a counter, so two tools never share a name.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// What one API accepts as a tool name.
#[derive(Debug, Clone, Copy)]
pub struct NameRule {
    /// Longest name, in characters (all accepted characters are ASCII).
    pub max: usize,
    /// Characters accepted as the first one.
    pub first: fn(char) -> bool,
    /// Characters accepted anywhere else.
    pub rest: fn(char) -> bool,
    /// The rule as the provider states it (for reports and docs).
    pub text: &'static str,
}

fn word_or_dash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn letter_or_underscore(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn gemini_rest(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

/// Bedrock Converse `ToolSpecification.name` (botocore service model: pattern
/// `[a-zA-Z0-9_-]+`, length 1–64), OpenAI `FunctionDefinition.name` ("a-z, A-Z, 0-9,
/// underscores and dashes, maximum length of 64") and Anthropic `Tool.name` (the API answers
/// `String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`).
pub const WORD_64: NameRule =
    NameRule { max: 64, first: word_or_dash, rest: word_or_dash, text: "^[a-zA-Z0-9_-]{1,64}$" };

/// Gemini `FunctionDeclaration.name` (google-genai SDK: "must start with a letter or an
/// underscore; a-z, A-Z, 0-9, underscores, dots, colons and dashes, maximum length of 128").
pub const GEMINI: NameRule = NameRule {
    max: 128,
    first: letter_or_underscore,
    rest: gemini_rest,
    text: "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$",
};

/// MCP itself: names are passed through unchanged.
pub const MCP: NameRule = NameRule { max: usize::MAX, first: |_| true, rest: |_| true, text: "any" };

impl NameRule {
    pub fn accepts(&self, name: &str) -> bool {
        let mut chars = name.chars();
        match chars.next() {
            None => false,
            Some(first) => {
                (self.first)(first) && chars.all(|c| (self.rest)(c)) && name.chars().count() <= self.max
            }
        }
    }

    /// The name cleaned to the rule's characters, `_` in front when the first is refused.
    fn sanitized(&self, name: &str) -> String {
        let mut out: String = name.chars().map(|c| if (self.rest)(c) { c } else { '_' }).collect();
        if !out.chars().next().is_some_and(self.first) {
            out.insert(0, '_');
        }
        out
    }

    fn mapped(&self, name: &str, hex_digits: usize) -> String {
        let digest = Sha256::digest(name.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let suffix = &hex[..hex_digits];
        let clean = self.sanitized(name);
        let keep = self.max.saturating_sub(hex_digits + 1);
        let head: String = clean.chars().take(keep).collect();
        format!("{head}_{suffix}")
    }
}

/// Exported names for `names` (in order), and the mappings made (exported → original).
pub fn assign(rule: &NameRule, names: &[&str]) -> (Vec<String>, BTreeMap<String, String>) {
    let mut taken: BTreeSet<String> =
        names.iter().filter(|n| rule.accepts(n)).map(|n| n.to_string()).collect();
    let mut mapped = BTreeMap::new();
    let exported = names
        .iter()
        .map(|name| {
            if rule.accepts(name) {
                return name.to_string();
            }
            let mut candidate = rule.mapped(name, 8);
            if taken.contains(&candidate) {
                candidate = rule.mapped(name, 16);
            }
            let base = candidate.clone();
            let mut n = 2;
            while taken.contains(&candidate) {
                let tail = format!("_{n}");
                let head: String = base.chars().take(rule.max.saturating_sub(tail.len())).collect();
                candidate = format!("{head}{tail}");
                n += 1;
            }
            taken.insert(candidate.clone());
            mapped.insert(candidate.clone(), name.to_string());
            candidate
        })
        .collect();
    (exported, mapped)
}

/// Whether `name` has the shape of a mapped name (`…_` + 8 or 16 hex digits, or a counter
/// after them): only those are worth looking up as aliases.
pub fn looks_mapped(name: &str) -> bool {
    let base = match name.rsplit_once('_') {
        Some((head, tail))
            if !tail.is_empty() && tail.len() <= 4 && tail.bytes().all(|b| b.is_ascii_digit()) =>
        {
            head
        }
        _ => name,
    };
    base.rsplit_once('_').is_some_and(|(_, hex)| {
        matches!(hex.len(), 8 | 16) && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The catalogue name an exported (mapped) name stands for, under any format's rule: what
/// lets an orchestrator call the gateway with the name the model used. One lookup in
/// [`aliases`]; a caller resolving many names builds that map once and keeps it.
pub fn original_of<'a>(exported: &str, catalogue: &[&'a str]) -> Option<&'a str> {
    if !looks_mapped(exported) {
        return None;
    }
    aliases(catalogue).get(exported).map(|&i| catalogue[i])
}

/// Every name the exports give `catalogue` (its names in catalogue order, as
/// `GET /tools?format=…` exports them), under every format's rule, to the index of the
/// catalogue name it stands for. The word rule (Bedrock, Anthropic, OpenAI) is asked first
/// and a name's first position wins, so a name two rules give differently resolves as the
/// word rule's export does. Built in one pass per rule: sorting or mapping the catalogue per
/// lookup is what this map saves.
pub fn aliases(catalogue: &[&str]) -> std::collections::HashMap<String, usize> {
    let mut map = std::collections::HashMap::new();
    for rule in [&WORD_64, &GEMINI] {
        let (names, _) = assign(rule, catalogue);
        for (i, name) in names.into_iter().enumerate() {
            map.entry(name).or_insert(i);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_stay_and_invalid_ones_map_deterministically_without_collisions() {
        let long = "x".repeat(100);
        let names = ["search_manga", "catalog.search", "catalog/search", "9lives", long.as_str()];
        let (out, map) = assign(&WORD_64, &names);
        assert_eq!(out[0], "search_manga");
        assert!(out.iter().all(|n| WORD_64.accepts(n)), "{out:?}");
        assert!(out[1].starts_with("catalog_search_") && out[2].starts_with("catalog_search_"));
        assert_ne!(out[1], out[2], "sanitized alike, the hash keeps them apart");
        assert_eq!(out[4].len(), 64);
        assert_eq!(map.len(), 3, "9lives is valid for WORD_64: {map:?}");
        assert_eq!(map[&out[1]], "catalog.search");
        assert_eq!(assign(&WORD_64, &names).0, out, "deterministic");

        let (gemini, map) = assign(&GEMINI, &names);
        assert_eq!(gemini[1], "catalog.search", "dots are fine for Gemini");
        assert!(gemini[3].starts_with("_9lives_"), "{gemini:?}");
        assert!(gemini.iter().all(|n| GEMINI.accepts(n)));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn mapped_names_lead_back_to_their_originals() {
        let catalogue = ["search", "catalog.search", "9lives"];
        let (bedrock, _) = assign(&WORD_64, &catalogue);
        let (gemini, _) = assign(&GEMINI, &catalogue);
        assert_eq!(original_of(&bedrock[1], &catalogue), Some("catalog.search"));
        assert_eq!(original_of(&gemini[2], &catalogue), Some("9lives"));
        assert_eq!(original_of("search", &catalogue), None, "not a mapped shape");
        assert_eq!(original_of("made_up_0123abcd", &catalogue), None);
    }

    /// The tool names of an export, in its order, read from the format's own shape.
    fn exported_names(format: crate::export::Format, body: &serde_json::Value) -> Vec<String> {
        use crate::export::Format;
        let (list, path): (&serde_json::Value, &[&str]) = match format {
            Format::Mcp | Format::Anthropic | Format::OpenAiResponses => (&body["tools"], &["name"]),
            Format::OpenAi => (&body["tools"], &["function", "name"]),
            Format::Bedrock => (&body["toolConfig"]["tools"], &["toolSpec", "name"]),
            Format::Gemini => (&body["tools"][0]["functionDeclarations"], &["name"]),
        };
        let tools = list.as_array().cloned().unwrap_or_default();
        tools
            .iter()
            .filter_map(|t| path.iter().try_fold(t, |v, key| v.get(key))?.as_str().map(String::from))
            .collect()
    }

    #[test]
    fn every_exported_name_of_every_format_leads_back_through_the_alias_map() {
        let long = "y".repeat(130);
        let squatter = WORD_64.mapped("a.b", 8);
        let catalogue = ["a.b", squatter.as_str(), "9lives", "ok_name", "x/y:z", long.as_str()];
        let tools: Vec<serde_json::Value> = catalogue
            .iter()
            .map(|n| serde_json::json!({"name": n, "description": "d", "inputSchema": {"type": "object"}}))
            .collect();
        let map = aliases(&catalogue);
        // MCP exports names unchanged: the catalogue's own lookup finds them.
        for format in crate::export::Format::ALL.into_iter().filter(|f| *f != crate::export::Format::Mcp) {
            let exported = crate::export::export(format, &tools, crate::export::Options::default());
            let names = exported_names(format, &exported);
            assert_eq!(names.len(), catalogue.len(), "{format:?}: {exported}");
            for (name, original) in names.iter().zip(catalogue) {
                let resolved = map.get(name.as_str()).map(|&i| catalogue[i]);
                assert_eq!(resolved, Some(original), "{format:?}: {name} stands for {original}");
            }
        }
    }

    #[test]
    fn a_mapped_name_never_takes_a_name_a_valid_tool_holds() {
        let odd = "a.b";
        let squatter = WORD_64.mapped(odd, 8);
        let (out, _) = assign(&WORD_64, &[odd, &squatter]);
        assert_eq!(out[1], squatter);
        assert_ne!(out[0], squatter);
        assert!(WORD_64.accepts(&out[0]));
    }
}
