//! The catalogue in the tool shapes of the model APIs (`GET /tools?format=…`,
//! `mcp-gateway tools export`), so an orchestrator hands the gateway's tools to a model
//! without converting them itself.
//!
//! One module per format ([`mcp`], [`bedrock`], [`anthropic`], [`openai`], [`gemini`]); this
//! one assigns names ([`names`]: each API's name rule, invalid names mapped deterministically
//! and reported) and builds the answer:
//!
//! ```json
//! {"format": "bedrock", "toolConfig": {"tools": [...]},
//!  "gateway": {"tools": 8, "names": {"exported": "original"}, "warnings": {"tool": ["..."]}}}
//! ```
//!
//! The API's own field (`toolConfig` for Bedrock, `tools` for the others) is what goes into
//! the model request as it is; `gateway` is the report: name mappings, and per tool every
//! change the conversion made (nothing is dropped without a line there). With OpenAI strict
//! mode, `gateway.not_strict` names the tools that could not be made strict (sent non-strict)
//! and why. Tools come in catalogue order (by exposed name), so the output is stable.

pub mod anthropic;
pub mod bedrock;
pub mod gemini;
pub mod mcp;
pub mod names;
pub mod openai;
pub mod schema;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use self::{names::NameRule, schema::Notes};

/// A model API's tool shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// MCP `tools/list` result (unchanged definitions).
    Mcp,
    /// Amazon Bedrock Converse `toolConfig`.
    Bedrock,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// OpenAI Chat Completions `tools` (`{"type":"function","function":{…}}`).
    OpenAi,
    /// OpenAI Responses `tools` (`{"type":"function","name":…}`, flat).
    OpenAiResponses,
    /// Gemini `tools` (`[{"functionDeclarations":[…]}]`, OpenAPI 3.0 subset schemas).
    Gemini,
}

impl Format {
    pub const ALL: [Format; 6] = [
        Format::Mcp,
        Format::Bedrock,
        Format::Anthropic,
        Format::OpenAi,
        Format::OpenAiResponses,
        Format::Gemini,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Mcp => "mcp",
            Format::Bedrock => "bedrock",
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
            Format::OpenAiResponses => "openai-responses",
            Format::Gemini => "gemini",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == text.trim().to_ascii_lowercase())
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|f| f.name()).collect()
    }

    fn rule(self) -> &'static NameRule {
        match self {
            Format::Mcp => &names::MCP,
            Format::Bedrock | Format::Anthropic | Format::OpenAi | Format::OpenAiResponses => &names::WORD_64,
            Format::Gemini => &names::GEMINI,
        }
    }
}

/// Export options.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// OpenAI formats: make every schema strict (Structured Outputs rules); tools that cannot
    /// be are exported non-strict and listed in `gateway.not_strict`.
    pub strict: bool,
}

/// One converted tool.
pub struct Converted {
    pub tool: Value,
    /// Why strict mode was not possible (OpenAI with `strict`).
    pub not_strict: Option<String>,
}

/// Converts MCP tool definitions (a `tools/list` result's `tools`) to `format`.
pub fn export(format: Format, tools: &[Value], options: Options) -> Value {
    let originals: Vec<&str> =
        tools.iter().map(|t| t.get("name").and_then(Value::as_str).unwrap_or("")).collect();
    let (exported, mapped) = names::assign(format.rule(), &originals);
    let mut converted = Vec::with_capacity(tools.len());
    let mut warnings = BTreeMap::new();
    let mut not_strict = BTreeMap::new();
    for ((tool, name), original) in tools.iter().zip(&exported).zip(&originals) {
        let mut notes = Notes::default();
        let out = match format {
            Format::Mcp => mcp::tool(tool),
            Format::Bedrock => bedrock::tool(tool, name, &mut notes),
            Format::Anthropic => anthropic::tool(tool, name, &mut notes),
            Format::OpenAi => openai::chat_tool(tool, name, options, &mut notes),
            Format::OpenAiResponses => openai::responses_tool(tool, name, options, &mut notes),
            Format::Gemini => gemini::tool(tool, name, &mut notes),
        };
        if let Some(reason) = out.not_strict {
            not_strict.insert(original.to_string(), reason);
        }
        if !notes.is_empty() {
            warnings.insert(original.to_string(), notes.into_lines());
        }
        converted.push(out.tool);
    }
    let count = converted.len();
    let mut body = Map::new();
    body.insert("format".into(), json!(format.name()));
    let (key, value) = match format {
        Format::Mcp => ("tools", Value::Array(converted)),
        Format::Bedrock => ("toolConfig", bedrock::tool_config(converted)),
        Format::Anthropic | Format::OpenAi | Format::OpenAiResponses => ("tools", Value::Array(converted)),
        Format::Gemini => ("tools", gemini::tools(converted)),
    };
    body.insert(key.into(), value);
    let mut report = json!({
        "tools": count,
        "name_rule": format.rule().text,
        "names": mapped,
        "warnings": warnings,
    });
    if options.strict && matches!(format, Format::OpenAi | Format::OpenAiResponses) {
        report["strict"] = json!(true);
        report["not_strict"] = json!(not_strict);
    }
    if format == Format::Bedrock && count == 0 {
        report["note"] =
            json!("no tools: leave toolConfig out of the Converse request (it needs at least one tool)");
    }
    body.insert("gateway".into(), report);
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_parses_and_unknown_ones_do_not() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
        assert_eq!(Format::parse("OpenAI"), Some(Format::OpenAi));
        assert!(Format::parse("cohere").is_none());
    }

    #[test]
    fn names_are_mapped_and_reported_per_format() {
        let tools =
            vec![json!({"name": "catalog.search", "description": "d", "inputSchema": {"type": "object"}})];
        let out = export(Format::Bedrock, &tools, Options::default());
        let exported = out["toolConfig"]["tools"][0]["toolSpec"]["name"].as_str().unwrap().to_string();
        assert!(exported.starts_with("catalog_search_"));
        assert_eq!(out["gateway"]["names"][&exported], "catalog.search");
        let gemini = export(Format::Gemini, &tools, Options::default());
        assert_eq!(gemini["tools"][0]["functionDeclarations"][0]["name"], "catalog.search");
        assert_eq!(gemini["gateway"]["names"], json!({}));
    }
}
