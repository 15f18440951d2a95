//! Tool search: the index behind the `search_tools` meta-tool of the search mode
//! (`[catalogue.search]`), ranking the catalogue's tools against a caller's words with BM25
//! over their names, titles, descriptions and parameter names.
//!
//! Scoring is the `bm25` crate's (embedder and inverted-index scorer); the words are ours
//! ([`Words`]): tool and parameter names are split at `_`, `-`, `.`, `/` and case changes
//! (`manga_search`, `get-sum`, `includeHistory`), lower-cased, stop words dropped and a light
//! suffix stemming applied (`prices`, `priced` → `pric`), so a caller's phrase meets a tool's
//! identifiers. Names weigh most: a tool's name words are counted twice in its document.
//!
//! The index is built with the catalogue snapshot it serves (on the blocking pool, off the call
//! path) and answers from memory: a search is tokenising the query, one posting-list walk per
//! query word and a sort of the matches.

use std::sync::Arc;

use bm25::{Embedder, EmbedderBuilder, Scorer};
use serde_json::{Value, json};

use super::ToolRecord;
use crate::{
    config::SearchConfig,
    tool_control::{CALL_TOOL, SEARCH_TOOLS},
};

/// The definitions of `search_tools` and `call_tool` as `tools/list` shows them.
pub fn meta_tools(search: &SearchConfig) -> Vec<Value> {
    vec![
        json!({
            "name": SEARCH_TOOLS,
            "title": "Search tools",
            "description": format!(
                "Find the tools that fit a task among all the tools this gateway offers (only a few are listed). \
                 Describe the task in a few words; the answer lists up to {} best-matching tools, best first, \
                 each with its name, description and input schema. Then call one by its name, or through call_tool.",
                search.max_results
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                              "description": "What you want to do, in a few words (e.g. 'check stock of a manga')"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": search.max_results,
                                    "default": search.max_results, "description": "How many tools to return at most"}
                },
                "required": ["query"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": "Call a tool found with search_tools: its name, and its arguments as its input schema describes them. \
                            The answer is that tool's own answer.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search_tools gave it"},
                    "arguments": {"type": "object", "description": "The tool's arguments"}
                },
                "required": ["name"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
        }),
    ]
}

/// Longest query `search_tools` takes, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;

/// Words that say nothing about which tool fits.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in",
    "is", "it", "its", "me", "my", "of", "on", "or", "please", "that", "the", "this", "to", "want", "we",
    "what", "which", "with", "you", "your",
];

/// The tokenizer: identifiers split into words, lower-cased, stop words out, suffixes stemmed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Words;

impl bm25::Tokenizer for Words {
    fn tokenize(&self, text: &str) -> Vec<String> {
        words(text).filter(|w| !STOP_WORDS.contains(&w.as_str())).map(|w| stem(&w)).collect()
    }
}

/// The words of `text`: runs of letters and digits, split again where lower case turns upper.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|run| !run.is_empty()).flat_map(|run| {
        let mut parts = Vec::new();
        let mut current = String::new();
        let mut previous_lower = false;
        for c in run.chars() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            parts.push(current);
        }
        parts
    })
}

/// A light English suffix stemmer: plurals, `-ed`, `-ing`, then a final `e`, so the forms of a
/// word meet (`search`/`searches`/`searching`, `price`/`prices`/`priced`). Words of other
/// scripts are left as they are.
fn stem(word: &str) -> String {
    if !word.is_ascii() || word.len() <= 3 {
        return word.to_string();
    }
    let mut w = word;
    let mut owned;
    if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        owned = format!("{base}y");
        w = &owned;
    } else if ["sses", "ches", "shes", "xes", "zes"].iter().any(|s| w.ends_with(s)) {
        w = &w[..w.len() - 2];
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w = &w[..w.len() - 1];
    } else if let Some(base) = w.strip_suffix("ing").filter(|b| b.len() >= 3) {
        w = base;
    } else if let Some(base) = w.strip_suffix("ed").filter(|b| b.len() >= 3) {
        w = base;
    }
    owned = w.strip_suffix('e').filter(|b| b.len() >= 3).unwrap_or(w).to_string();
    owned
}

/// The text a tool is found by: its name (twice: names weigh most), title, description and
/// parameter names.
fn document(tool: &ToolRecord) -> String {
    let definition = tool.definition.value();
    let text = |key: &str| definition.get(key).and_then(Value::as_str).unwrap_or("");
    let title = match text("title") {
        "" => definition.pointer("/annotations/title").and_then(Value::as_str).unwrap_or(""),
        title => title,
    };
    let parameters: Vec<&str> = definition
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!("{name} {name} {title} {} {}", text("description"), parameters.join(" "), name = tool.name)
}

/// The search index of one catalogue snapshot.
pub struct SearchIndex {
    embedder: Embedder<u32, Words>,
    scorer: Scorer<u32, u32>,
    /// Document id → tool name (ids in name order: ties rank by name).
    names: Vec<Arc<str>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("tools", &self.names.len()).finish()
    }
}

impl SearchIndex {
    /// Indexes `tools` (in name order).
    pub fn build(tools: &[Arc<ToolRecord>]) -> Self {
        let documents: Vec<String> = tools.iter().map(|t| document(t)).collect();
        let corpus: Vec<&str> = documents.iter().map(String::as_str).collect();
        let embedder =
            EmbedderBuilder::<u32, Words>::with_tokenizer_and_fit_to_corpus(Words, &corpus).build();
        let mut scorer = Scorer::<u32, u32>::new();
        for (id, text) in corpus.iter().enumerate() {
            scorer.upsert(&(id as u32), embedder.embed(text));
        }
        Self { embedder, scorer, names: tools.iter().map(|t| t.name.clone()).collect() }
    }

    /// Tools matching `query`, best first (equal scores by name), with their scores.
    pub fn ranked(&self, query: &str) -> Vec<(&Arc<str>, f32)> {
        let mut matches = self.scorer.matches(&self.embedder.embed(query));
        matches.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        matches.into_iter().filter_map(|m| Some((self.names.get(m.id as usize)?, m.score))).collect()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bm25::Tokenizer;

    #[test]
    fn identifiers_split_and_forms_of_a_word_meet() {
        assert_eq!(
            Words.tokenize("manga_search get-sum includeHistory"),
            ["manga", "search", "get", "sum", "includ", "history"]
        );
        assert_eq!(Words.tokenize("the prices"), Words.tokenize("priced"));
        assert_eq!(Words.tokenize("searches"), Words.tokenize("searching"));
        assert_eq!(Words.tokenize("inventories"), ["inventory"]);
        assert_eq!(Words.tokenize("ワンピース 100巻"), ["ワンピース", "100巻"]);
    }
}
