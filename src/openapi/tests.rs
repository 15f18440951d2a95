//! Mapping a whole document: names, schemas, annotations, selection and skipped operations.

use serde_json::{Value, json};

use super::*;

fn limits() -> Limits {
    Limits { max_spec_bytes: 1 << 20, max_operations: 100, max_schema_depth: 32, max_list_bytes: 8 << 20 }
}

fn map(doc: Value, selection: &Selection) -> Mapped {
    map_text(
        &doc.to_string(),
        Location::Url("http://store.test/openapi.json".into()),
        selection,
        limits(),
        64 * 1024,
    )
    .expect("mapped")
}

fn store() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "store", "version": "1"},
        "servers": [{"url": "/api/{version}", "variables": {"version": {"default": "v1"}}}],
        "paths": {
            "/products/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "get": {
                    "operationId": "getProduct", "summary": "One product", "description": "By id.", "tags": ["catalogue"],
                    "parameters": [{"name": "id", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Product"}}}}}
                },
                "put": {
                    "operationId": "putProduct", "tags": ["catalogue"],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Product"}}}},
                    "responses": {"200": {"description": "ok"}}
                },
                "delete": {"responses": {"204": {"description": "gone"}, "200": {"description": "untyped", "content": {"application/json": {"schema": {"title": "Anything"}}}}}}
            },
            "/products": {
                "get": {"operationId": "listProducts", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Product"}}}}}}},
                "post": {
                    "operationId": "createProduct",
                    "requestBody": {"content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}}},
                    "responses": {"201": {"description": "made"}}
                }
            },
            "/upload": {"post": {"operationId": "upload", "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}}, "responses": {"200": {"description": "ok"}}}}
        },
        "components": {"schemas": {"Product": {"type": "object", "required": ["title"], "properties": {
            "title": {"type": "string"}, "price": {"type": "number"}, "related": {"type": "array", "items": {"$ref": "#/components/schemas/Product"}}
        }}}}
    })
}

fn tool<'a>(mapped: &'a Mapped, name: &str) -> &'a Value {
    mapped
        .tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name}: {:?}", mapped.tools))
}

#[test]
fn operations_become_tools() {
    let mapped = map(store(), &Selection::default());
    assert_eq!(mapped.server_url.as_deref(), Some("http://store.test/api/v1"));
    let names: Vec<&str> = mapped.tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["getProduct", "putProduct", "delete_products_id", "listProducts", "createProduct"],
        "document order"
    );
    let get = tool(&mapped, "getProduct");
    assert_eq!(get["description"], "One product\n\nBy id.");
    assert_eq!(
        get["inputSchema"]["properties"]["id"]["type"], "integer",
        "the path parameter keeps its name"
    );
    assert_eq!(get["inputSchema"]["properties"]["query_id"]["type"], "string", "the query one is renamed");
    assert_eq!(get["inputSchema"]["required"], json!(["id"]));
    assert_eq!(get["outputSchema"]["properties"]["title"]["type"], "string");
    assert_eq!(get["annotations"]["readOnlyHint"], true);
    let put = tool(&mapped, "putProduct");
    assert_eq!(put["inputSchema"]["required"], json!(["id", "title"]), "body properties spread");
    assert_eq!(put["annotations"]["idempotentHint"], true);
    assert_eq!(put["annotations"]["destructiveHint"], false);
    let delete = tool(&mapped, "delete_products_id");
    assert_eq!(delete["annotations"]["destructiveHint"], true);
    assert!(delete.get("outputSchema").is_none(), "a schema that says nothing gives none");
    assert!(!mapped.operations["delete_products_id"].wrap_result, "objects answered as they are");
    let create = tool(&mapped, "createProduct");
    assert_eq!(create["inputSchema"]["properties"]["body"]["type"], "array", "a non-object body is `body`");
    assert_eq!(create["annotations"]["idempotentHint"], false);
    assert!(create["annotations"].get("destructiveHint").is_none());
    let list = tool(&mapped, "listProducts");
    assert_eq!(list["outputSchema"]["properties"]["result"]["type"], "array");
    assert!(mapped.operations["listProducts"].wrap_result);
    assert_eq!(mapped.skipped.len(), 1);
    assert_eq!(mapped.skipped[0].operation_id.as_deref(), Some("upload"));
    assert!(mapped.skipped[0].reason.contains("multipart/form-data"), "{:?}", mapped.skipped);
    assert!(mapped.skipped[0].reason.contains("/paths/~1upload/post"), "{:?}", mapped.skipped);
}

#[test]
fn selection_and_bounds() {
    let selection = Selection::parse(&["tag:catalogue".into()], &["operation:putProduct".into()]).unwrap();
    let mapped = map(store(), &selection);
    let names: Vec<&str> = mapped.tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["getProduct"]);
    assert!(mapped.skipped.is_empty(), "an operation not selected is not reported");
    let few = Limits { max_operations: 3, ..limits() };
    let err =
        map_text(&store().to_string(), Location::Url("http://x/d".into()), &Selection::default(), few, 65536)
            .unwrap_err();
    assert_eq!(err.at, "/paths");
    assert!(err.reason.contains("max_operations (3)"), "{err}");
    let mut broken = store();
    broken["paths"]["/products"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/Missing"});
    broken["paths"]["/products/{id}"]["put"]["requestBody"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/Missing"});
    let mapped = map(broken, &Selection::default());
    let skipped: Vec<&str> = mapped.skipped.iter().filter_map(|s| s.operation_id.as_deref()).collect();
    assert_eq!(
        skipped,
        ["putProduct", "upload"],
        "a bad request schema skips; a bad output schema only drops it"
    );
    assert!(
        mapped.skipped[0].reason.contains("nothing at /components/schemas/Missing"),
        "{:?}",
        mapped.skipped
    );
}
#[test]
fn data_keywords_and_strings_reused_through_refs_are_counted_by_the_inliner() {
    // One `enum` of 20,000 values, or one 256 KiB description, reused 20,000 times through
    // refs: 4×10⁸ values or 5 GB if inlined, from well under a megabyte of text.
    let refs = vec!["{$ref: '#/components/schemas/S'}"; 20_000].join(",");
    for target in [
        format!("{{type: integer, enum: [{}]}}", vec!["0"; 20_000].join(",")),
        format!("{{type: string, description: '{}'}}", "d".repeat(256 * 1024)),
    ] {
        let doc = format!(
            "openapi: 3.0.3\ninfo: {{title: x, version: '1'}}\npaths:\n  /a:\n    get:\n      operationId: a\n      parameters: [{{name: q, in: query, schema: {{allOf: [{refs}]}}}}]\n      responses: {{'200': {{description: ok}}}}\ncomponents:\n  schemas:\n    S: {target}\n"
        );
        assert!(doc.len() < 1 << 20, "{}", doc.len());
        let mapped = map_text(
            &doc,
            Location::Url("http://store.test/openapi.yaml".into()),
            &Selection::default(),
            Limits {
                max_spec_bytes: 4 << 20,
                max_operations: 100,
                max_schema_depth: 32,
                max_list_bytes: 8 << 20,
            },
            64 * 1024,
        )
        .expect("mapped");
        assert!(mapped.tools.is_empty());
        assert!(
            mapped.skipped[0].reason.contains("once")
                && mapped.skipped[0].reason.contains("$refs are inlined"),
            "{:?}",
            mapped.skipped
        );
    }
    // Many parameters, each within the bound of one schema: bounded together.
    let described = format!("{{type: string, description: '{}'}}", "d".repeat(64 * 1024));
    let params: Vec<String> = (0..400)
        .map(|i| format!("{{name: p{i}, in: query, schema: {{$ref: '#/components/schemas/S'}}}}"))
        .collect();
    let doc = format!(
        "openapi: 3.0.3\ninfo: {{title: x, version: '1'}}\npaths:\n  /a:\n    get:\n      operationId: a\n      parameters: [{}]\n      responses: {{'200': {{description: ok}}}}\n  /b:\n    get:\n      operationId: b\n      parameters: [{{name: q, in: query, schema: {{$ref: '#/components/schemas/S'}}}}]\n      responses: {{'200': {{description: ok}}}}\ncomponents:\n  schemas:\n    S: {described}\n",
        params.join(",")
    );
    let mapped = map_text(
        &doc,
        Location::Url("http://store.test/openapi.yaml".into()),
        &Selection::default(),
        Limits {
            max_spec_bytes: 4 << 20,
            max_operations: 100,
            max_schema_depth: 32,
            max_list_bytes: 8 << 20,
        },
        1 << 20,
    )
    .expect("mapped");
    assert_eq!(mapped.skipped.len(), 1, "{:?}", mapped.skipped);
    assert!(mapped.skipped[0].reason.contains("bytes of strings"), "{:?}", mapped.skipped);
    assert_eq!(mapped.tools.len(), 1, "the next operation starts its own count");
}

#[test]
fn the_mapped_definitions_stop_at_the_servers_catalogue_bytes() {
    // One 32 KB description shared by 2,000 operations: 64 MB of tool definitions from 370 KB.
    let ops: Vec<String> = (0..2_000)
        .map(|i| format!("  /o{i}:\n    get:\n      operationId: o{i}\n      parameters: [{{name: q, in: query, schema: {{$ref: '#/components/schemas/S'}}}}]\n      responses: {{'200': {{description: ok}}}}\n"))
        .collect();
    let doc = format!(
        "openapi: 3.0.3\ninfo: {{title: x, version: '1'}}\npaths:\n{}components:\n  schemas:\n    S: {{type: string, description: '{}'}}\n",
        ops.concat(),
        "d".repeat(32 * 1024)
    );
    assert!(doc.len() < 400 * 1024, "{}", doc.len());
    let limits = Limits {
        max_spec_bytes: 1 << 20,
        max_operations: 5_000,
        max_schema_depth: 32,
        max_list_bytes: 8 << 20,
    };
    let err =
        map_text(&doc, Location::Url("http://store.test/d".into()), &Selection::default(), limits, 64 * 1024)
            .expect_err("refused");
    assert!(err.reason.contains("max_catalogue_bytes"), "{err}");
    let roomy = Limits { max_list_bytes: 128 << 20, ..limits };
    let mapped =
        map_text(&doc, Location::Url("http://store.test/d".into()), &Selection::default(), roomy, 64 * 1024);
    assert_eq!(mapped.expect("mapped").tools.len(), 2_000);
}
