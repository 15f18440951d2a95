//! The catalogue exported for model APIs (`GET /tools?format=…`, `mcp-gateway tools
//! export`) is accepted by each provider's OWN published types — botocore's Converse input
//! shape, the `anthropic`, `openai` and `google-genai` SDK models — for every tool of the
//! store's demo server, of the official `server-everything`, and of a static schema-heavy tool
//! set (recursive `$ref`, `allOf`, `oneOf`, `const`, maps, tuples, formats, names no API
//! accepts). Each validator is also shown to reject a broken export, so a green run means
//! something.

use std::{collections::BTreeSet, process::Command};

use crate::common::*;
use serde_json::{Value, json};

const ZOO: &str = "zoo.schema/heavy";
const NINE: &str = "9-lives";
const SHARED: &str = "shared_defs";

fn long_name() -> String {
    "z".repeat(100)
}

/// Tools no model API takes as they are: odd names and every JSON Schema feature that
/// needs converting.
fn zoo_tools() -> Value {
    // Shared definitions as an OpenAPI server's tools carry them: each level refers to the next
    // twice, so inlined (Gemini has no `$ref`) they would be 2^14 copies.
    let mut defs = serde_json::Map::new();
    for i in 0..14 {
        let next = format!("#/$defs/L{}", i + 1);
        defs.insert(
            format!("L{i}"),
            json!({"type": "object", "properties": {"left": {"$ref": next}, "right": {"$ref": next}}}),
        );
    }
    defs.insert("L14".into(), json!({"type": "string"}));
    json!([
        {
            "name": SHARED,
            "description": "Shared definitions reached by many paths.",
            "inputSchema": {"type": "object", "properties": {"tree": {"$ref": "#/$defs/L0"}}, "$defs": defs}
        },
        {
            "name": ZOO,
            "description": "Exercises the schema conversions.",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "Node": {"type": "object", "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["label"]},
                    "Money": {"type": "object", "properties": {"amount": {"type": "number", "exclusiveMinimum": 0}, "currency": {"const": "JPY"}}, "required": ["amount", "currency"], "additionalProperties": false}
                },
                "properties": {
                    "tree": {"$ref": "#/$defs/Node"},
                    "price": {"$ref": "#/$defs/Money"},
                    "when": {"type": "string", "format": "date-time"},
                    "site": {"type": "string", "format": "uri"},
                    "mode": {"oneOf": [{"const": "fast"}, {"const": "safe"}]},
                    "level": {"type": "integer", "enum": [1, 2, 3]},
                    "ratio": {"type": ["number", "null"], "multipleOf": 0.5},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
                    "combo": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]},
                    "sku-code": {"type": "string"}
                },
                "required": ["tree"],
                "additionalProperties": false
            }
        },
        {"name": long_name(), "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
        {"name": NINE, "description": "A name Gemini refuses (digit first).", "inputSchema": {"type": "object"}}
    ])
}

fn config(demo_url: &str, everything_url: Option<&str>) -> String {
    let mut servers = json!({
        "demo": {"transport": "http", "url": demo_url, "tools": zoo_tools()}
    });
    if let Some(url) = everything_url {
        servers["everything"] = json!({"transport": "http", "url": url});
    }
    toml::to_string(&json!({"servers": servers})).unwrap()
}

/// (format, strict) pairs exported and validated.
const FORMATS: [(&str, bool); 8] = [
    ("mcp", false),
    ("bedrock", false),
    ("anthropic", false),
    ("openai", false),
    ("openai", true),
    ("openai-responses", false),
    ("openai-responses", true),
    ("gemini", false),
];

/// Exported tool names, in order, for any format.
fn exported_names(doc: &Value) -> Vec<String> {
    let name = |v: &Value| v.as_str().unwrap().to_string();
    match doc["format"].as_str().unwrap() {
        "bedrock" => doc["toolConfig"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| name(&t["toolSpec"]["name"]))
            .collect(),
        "openai" => doc["tools"].as_array().unwrap().iter().map(|t| name(&t["function"]["name"])).collect(),
        "gemini" => doc["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| name(&t["name"]))
            .collect(),
        _ => doc["tools"].as_array().unwrap().iter().map(|t| name(&t["name"])).collect(),
    }
}

fn export(gateway: &Gateway, format: &str, strict: bool) -> Value {
    let (status, doc) = get_json(gateway, &format!("/tools?format={format}&strict={strict}"));
    assert_eq!(status, 200, "{doc}");
    doc
}

#[test]
fn every_tool_validates_against_each_providers_own_types_and_names_map_back() {
    let demo = Demo::http();
    let port = free_port();
    let _everything = everything_server(port);
    let everything_url = format!("http://127.0.0.1:{port}/mcp");
    let config = config(&demo.url(), Some(&everything_url));
    let gateway = Gateway::start(&config, &[]);
    wait_for("the demo, zoo and server-everything tools", || {
        let names = gateway.tool_names();
        ["manga_search", "price_lookup", ZOO, NINE, "echo", "get-sum"]
            .iter()
            .all(|n| names.contains(&n.to_string()))
    });
    let catalogue: BTreeSet<String> = gateway.tool_names().into_iter().collect();
    assert!(catalogue.len() >= 6 + 3 + 10, "{catalogue:?}");
    // The store's catalogue (the shared docs' manga-tools.json, which the demo server serves)
    // is all in it.
    let store: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("config/manga-tools.json")).unwrap())
            .unwrap();
    for tool in store["tools"].as_array().unwrap() {
        assert!(catalogue.contains(tool["name"].as_str().unwrap()), "{} missing", tool["name"]);
    }

    for (format, strict) in FORMATS {
        let doc = export(&gateway, format, strict);
        let what = format!("{format} (strict={strict})");
        if let Err(problems) = validate_export(&doc) {
            panic!("{what} export refused by the provider's types:\n{problems}\n{doc:#}");
        }
        // Every tool is there once, and every exported name maps back to a catalogue name.
        let names = exported_names(&doc);
        assert_eq!(names.len(), catalogue.len(), "{what}: {names:?}");
        let mapping = doc["gateway"]["names"].as_object().unwrap();
        let back: BTreeSet<String> = names
            .iter()
            .map(|n| mapping.get(n).and_then(Value::as_str).map_or(n.clone(), str::to_string))
            .collect();
        assert_eq!(back, catalogue, "{what}: names do not map back to the catalogue");
        assert_eq!(doc["gateway"]["tools"], catalogue.len(), "{what}");
    }

    // The names each API refuses are mapped (and only those).
    let bedrock = export(&gateway, "bedrock", false);
    let mapped: BTreeSet<&str> =
        bedrock["gateway"]["names"].as_object().unwrap().values().filter_map(Value::as_str).collect();
    assert_eq!(mapped, BTreeSet::from([ZOO, long_name().as_str()]), "{:#}", bedrock["gateway"]);
    let gemini = export(&gateway, "gemini", false);
    let mapped: BTreeSet<&str> =
        gemini["gateway"]["names"].as_object().unwrap().values().filter_map(Value::as_str).collect();
    assert_eq!(mapped, BTreeSet::from([ZOO, NINE]), "{:#}", gemini["gateway"]);
    // A mapped name is also accepted by tools/call: the upstream is called with the original
    // name (the demo server knows no "9-lives", and says so by that name).
    let alias =
        gemini["gateway"]["names"].as_object().unwrap().iter().find(|(_, o)| *o == NINE).unwrap().0.clone();
    let answer = gateway.call(&alias, json!({}));
    assert_eq!(answer["error"]["data"]["category"], "upstream_rejected", "{answer}");
    assert_eq!(answer["error"]["data"]["tool"], NINE, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("Unknown tool: 9-lives"), "{answer}");
    // Bedrock needs a description: the tool without one gets its name, reported.
    let warnings = &bedrock["gateway"]["warnings"][long_name()];
    assert!(warnings.to_string().contains("no description"), "{warnings}");

    // Gemini: every lossy conversion of the zoo is reported, none silently.
    let warnings = gemini["gateway"]["warnings"][ZOO].as_array().unwrap();
    let text = warnings.iter().map(|w| w.as_str().unwrap()).collect::<Vec<_>>().join("\n");
    for expected in [
        "recursive $ref #/$defs/Node cut",
        "exclusiveMinimum became an inclusive minimum",
        "format \"uri\" moved to the description",
        "oneOf became anyOf",
        "enum of non-string values moved to the description",
        "multipleOf dropped",
        "additionalProperties schema dropped",
        "additionalProperties: false dropped",
        "prefixItems dropped",
        "allOf merged into one schema",
        "parameter name \"sku-code\"",
    ] {
        assert!(text.contains(expected), "Gemini warnings of {ZOO} lack {expected:?}:\n{text}");
    }

    // Shared `$defs`: kept as they are where the API takes `$ref`, inlined for Gemini within
    // its bound and the cut reported.
    let anthropic = export(&gateway, "anthropic", false);
    let shared = anthropic["tools"].as_array().unwrap().iter().find(|t| t["name"] == SHARED).unwrap();
    assert_eq!(shared["input_schema"]["$defs"].as_object().map(|d| d.len()), Some(15), "{shared}");
    let warnings = gemini["gateway"]["warnings"][SHARED].to_string();
    assert!(warnings.contains("more than 5000 schema values"), "{warnings}");
    let declared = gemini["tools"][0]["functionDeclarations"].as_array().unwrap();
    let tree = &declared.iter().find(|t| t["name"] == SHARED).unwrap()["parameters"]["properties"]["tree"];
    assert!(tree.to_string().len() < 2_000_000, "bounded: {} bytes", tree.to_string().len());

    // OpenAI strict: the zoo cannot be strict (reported), the store's tools all are.
    let strict = export(&gateway, "openai", true);
    let not_strict = strict["gateway"]["not_strict"].as_object().unwrap();
    assert!(not_strict.contains_key(ZOO), "{not_strict:?}");
    for tool in [
        "manga_search",
        "price_lookup",
        "checkout",
        "add_to_cart",
        "inventory_check",
        "manga_recommendations",
    ] {
        assert!(!not_strict.contains_key(tool), "{tool} should be strict: {not_strict:?}");
    }
    let strict_tools = strict["tools"].as_array().unwrap();
    let price = strict_tools.iter().find(|t| t["function"]["name"] == "price_lookup").unwrap();
    assert_eq!(price["function"]["strict"], true);
    assert!(
        price["function"]["description"].as_str().unwrap().ends_with("Give exactly one of: manga_id | isbn.")
    );

    // The CLI shares the conversion: from the running gateway, and built from configuration.
    let from_url = cli_export(&["--format", "gemini", "--url", &gateway.url("")], None);
    assert_eq!(from_url["tools"], gemini["tools"]);
    validate_export(&from_url).unwrap();
    let from_config = cli_export(&["--format", "bedrock"], Some(&config));
    validate_export(&from_config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(from_config["toolConfig"], bedrock["toolConfig"]);
}

/// Runs `mcp-gateway tools export ARGS` (with `config` as --config when given).
fn cli_export(args: &[&str], config: Option<&str>) -> Value {
    let mut command = Command::new(BIN);
    command.args(["tools", "export"]).args(args);
    let file = config.map(|config| TempFile::with("export.toml", config));
    if let Some(file) = &file {
        command.arg("--config").arg(file.path());
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "tools export failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

#[test]
fn each_validator_rejects_a_broken_export() {
    let demo = Demo::http();
    let gateway = Gateway::start(&config(&demo.url(), None), &[]);
    wait_for("the demo tools and the four declared ones", || gateway.tool_names().len() == 10);
    type Break = fn(&mut Value);
    let cases: [(&str, bool, Break, &str); 8] = [
        (
            "bedrock",
            false,
            |d| drop(d["toolConfig"]["tools"][0]["toolSpec"].as_object_mut().unwrap().remove("inputSchema")),
            "Missing required parameter",
        ),
        (
            "bedrock",
            false,
            |d| d["toolConfig"]["tools"][0]["toolSpec"]["name"] = json!("a.b"),
            "breaks the service model's pattern",
        ),
        ("anthropic", false, |d| d["tools"][0]["input_schema"] = json!("object"), "anthropic ToolParam"),
        (
            "openai",
            false,
            |d| drop(d["tools"][0]["function"].as_object_mut().unwrap().remove("name")),
            "openai ChatCompletionToolParam",
        ),
        (
            "openai",
            true,
            |d| {
                let tool = d["tools"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .find(|t| t["function"]["name"] == "manga_search")
                    .unwrap();
                tool["function"]["parameters"].as_object_mut().unwrap().remove("additionalProperties");
            },
            "lacks additionalProperties: false",
        ),
        ("openai-responses", false, |d| d["tools"][0]["type"] = json!("fn"), "openai FunctionToolParam"),
        (
            "gemini",
            false,
            |d| {
                let declarations = d["tools"][0]["functionDeclarations"].as_array_mut().unwrap();
                let search = declarations.iter_mut().find(|t| t["name"] == "manga_search").unwrap();
                search["parameters"]["type"] = json!("OBJEKT");
            },
            "gemini Tool[0]: the SDK warns: OBJEKT is not a valid Type",
        ),
        (
            "gemini",
            false,
            |d| d["tools"][0]["functionDeclarations"][0]["parametersSchema"] = json!({}),
            "Extra inputs are not permitted",
        ),
    ];
    for (format, strict, break_it, expected) in cases {
        let mut doc = export(&gateway, format, strict);
        validate_export(&doc)
            .unwrap_or_else(|e| panic!("the unbroken {format} export must pass first:\n{e}"));
        break_it(&mut doc);
        match validate_export(&doc) {
            Ok(out) => panic!("the {format} validator accepted a broken export: {out}"),
            Err(problems) => {
                assert!(problems.contains(expected), "{format}: expected {expected:?} in:\n{problems}")
            }
        }
    }
}

#[test]
fn bad_export_requests_are_refused_with_the_accepted_values() {
    let demo = Demo::http();
    let gateway = Gateway::start(&config(&demo.url(), None), &[]);
    for (query, expected) in [
        ("format=cohere", "unknown format"),
        ("format=gemini&strict=true", "strict applies to the openai"),
        ("format=openai&strict=maybe", "strict must be true or false"),
        ("format=openai&colour=blue", "unknown parameter"),
    ] {
        let (status, body) = get_json(&gateway, &format!("/tools?{query}"));
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body["error"].as_str().unwrap().contains(expected), "{query}: {body}");
        assert_eq!(
            body["formats"],
            json!(["mcp", "bedrock", "anthropic", "openai", "openai-responses", "gemini"])
        );
    }
    let (status, body) = get_json(&gateway, "/tools");
    assert_eq!(status, 200);
    assert_eq!(body["format"], "mcp", "MCP is the default format");
}
