//! Mapping a whole document: names, schemas, annotations, selection and skipped operations.

use serde_json::{Value, json};

use super::*;

fn limits() -> Limits {
    Limits { max_spec_bytes: 1 << 20, max_operations: 100, max_schema_depth: 32, max_list_bytes: 8 << 20 }
}

fn map(doc: Value, selection: &Selection) -> Mapped {
    map_text(
        doc.to_string(),
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

fn tool(mapped: &Mapped, name: &str) -> Value {
    mapped
        .tools()
        .into_iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name}: {}", mapped.list_result()))
}

#[test]
fn operations_become_tools() {
    let mapped = map(store(), &Selection::default());
    assert_eq!(mapped.server_url.as_deref(), Some("http://store.test/api/v1"));
    let tools = mapped.tools();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
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
    let tools = mapped.tools();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["getProduct"]);
    assert!(mapped.skipped.is_empty(), "an operation not selected is not reported");
    let few = Limits { max_operations: 3, ..limits() };
    let err =
        map_text(store().to_string(), Location::Url("http://x/d".into()), &Selection::default(), few, 65536)
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
fn data_keywords_and_strings_reused_through_refs_never_expand() {
    // One `enum` of 20,000 values, or one 256 KiB description, reused 20,000 times through
    // refs: 4×10⁸ values or 5 GB if inlined, from well under a megabyte of text. Refs stay refs
    // (`$defs`): the component is held once per tool, and a definition over its bound is cut
    // or its operation skipped with the reason — nothing is expanded.
    let refs = vec!["{$ref: '#/components/schemas/S'}"; 20_000].join(",");
    for target in [
        format!("{{type: integer, enum: [{}]}}", vec!["0"; 20_000].join(",")),
        format!("{{type: string, description: '{}'}}", "d".repeat(256 * 1024)),
    ] {
        let doc = format!(
            "openapi: 3.0.3\ninfo: {{title: x, version: '1'}}\npaths:\n  /a:\n    get:\n      operationId: a\n      parameters: [{{name: q, in: query, schema: {{allOf: [{refs}]}}}}]\n      responses: {{'200': {{description: ok}}}}\ncomponents:\n  schemas:\n    S: {target}\n"
        );
        assert!(doc.len() < 1 << 20, "{}", doc.len());
        let limits = Limits {
            max_spec_bytes: 4 << 20,
            max_operations: 100,
            max_schema_depth: 32,
            max_list_bytes: 8 << 20,
        };
        let mapped = map_text(
            doc,
            Location::Url("http://store.test/openapi.yaml".into()),
            &Selection::default(),
            limits,
            64 * 1024,
        )
        .expect("mapped");
        let bytes = mapped.list_result().len();
        assert!(bytes <= 64 * 1024 + 16, "{bytes} bytes of definitions");
        assert!(
            mapped.list.len() + mapped.skipped.len() == 1,
            "served or skipped with a reason: {:?}",
            mapped.skipped
        );
    }
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
    let err = map_text(
        doc.clone(),
        Location::Url("http://store.test/d".into()),
        &Selection::default(),
        limits,
        64 * 1024,
    )
    .expect_err("refused");
    assert!(err.reason.contains("max_catalogue_bytes"), "{err}");
    let roomy = Limits { max_list_bytes: 128 << 20, ..limits };
    let mapped = map_text(
        doc.clone(),
        Location::Url("http://store.test/d".into()),
        &Selection::default(),
        roomy,
        64 * 1024,
    );
    assert_eq!(mapped.expect("mapped").list.len(), 2_000);
}

/// A document whose `Repo` answer is large (`fields` properties) and shared by two operations,
/// with a recursive `Node` and an OpenAPI 3.0 `nullable`.
fn shared(fields: usize) -> Value {
    let mut repo = serde_json::Map::new();
    for i in 0..fields {
        repo.insert(format!("field_{i}"), json!({"type": "string", "description": "x".repeat(40)}));
    }
    repo.insert("owner".into(), json!({"$ref": "#/components/schemas/User"}));
    repo.insert("tree".into(), json!({"$ref": "#/components/schemas/Node"}));
    let answer = json!({"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Repo"}}}}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "repos", "version": "1"},
        "servers": [{"url": "http://repos.test"}],
        "paths": {
            "/repos/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {"operationId": "repos/get", "responses": answer},
                "patch": {
                    "operationId": "repos/update",
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/RepoUpdate"}}}},
                    "responses": answer
                }
            }
        },
        "components": {"schemas": {
            "Repo": {"type": "object", "properties": repo},
            "User": {"type": "object", "properties": {"login": {"type": "string"}, "site": {"type": "string", "nullable": true}}},
            "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
            "RepoUpdate": {"type": "object", "properties": {
                "name": {"type": "string"},
                "owner": {"$ref": "#/components/schemas/User"},
                "tree": {"$ref": "#/components/schemas/Node"},
                "visibility": {"type": "string", "enum": ["public", "private"], "default": "public"}
            }}
        }}
    })
}

#[test]
fn components_are_shared_through_defs_and_recursion_is_kept() {
    let mapped = map(shared(3), &Selection::default());
    assert!(
        mapped.skipped.is_empty() && mapped.trimmed.is_empty(),
        "{:?} {:?}",
        mapped.skipped,
        mapped.trimmed
    );
    let get = tool(&mapped, "repos_get");
    let output = &get["outputSchema"];
    assert_eq!(output["type"], "object", "the root ref is followed: MCP wants an object root");
    assert_eq!(output["properties"]["owner"], json!({"$ref": "#/$defs/User"}));
    assert_eq!(output["$defs"]["User"]["properties"]["site"]["type"], json!(["string", "null"]));
    assert_eq!(
        output["$defs"]["Node"]["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Node"}),
        "a recursive type stays recursive"
    );
    let update = tool(&mapped, "repos_update");
    let input = &update["inputSchema"];
    assert_eq!(input["properties"]["owner"], json!({"$ref": "#/$defs/User"}), "body spread through its $ref");
    assert_eq!(input["$defs"]["User"], output["$defs"]["User"], "the same component, the same body");
    assert!(input["$defs"].get("Repo").is_none(), "only what the schema reaches");
    assert_eq!(mapped.components, 4, "each component converted once for the whole document");
}

#[test]
fn an_output_schema_over_the_bound_is_left_out_and_the_operation_kept() {
    // `Repo` with 2,000 fields: over 64 KiB as JSON.
    let mapped = map(shared(2_000), &Selection::default());
    assert!(mapped.skipped.is_empty(), "no operation skipped: {:?}", mapped.skipped);
    let get = tool(&mapped, "repos_get");
    assert!(get.get("outputSchema").is_none(), "{get}");
    assert!(!mapped.operations["repos_get"].wrap_result, "answered as a tool without outputSchema");
    let trimmed: Vec<(&str, &str)> =
        mapped.trimmed.iter().map(|t| (t.tool.as_str(), t.reason.as_str())).collect();
    assert_eq!(trimmed.len(), 2, "{trimmed:?}");
    assert!(trimmed.iter().all(|(_, r)| r.starts_with("outputSchema left out")), "{trimmed:?}");
    assert!(trimmed[0].1.contains("max_tool_definition_bytes (65536)"), "{trimmed:?}");
    assert!(mapped.list_result().len() < 64 * 1024, "both definitions fit their bound");
    // The input schema keeps its components.
    assert_eq!(tool(&mapped, "repos_update")["inputSchema"]["$defs"]["User"]["type"], "object");
}

#[test]
fn an_input_schema_over_the_bound_is_cut_and_reported() {
    let mut doc = shared(3);
    let mut big = serde_json::Map::new();
    for i in 0..2_000 {
        big.insert(format!("p{i}"), json!({"type": "integer", "description": "y".repeat(40)}));
    }
    doc["components"]["schemas"]["User"]["properties"]["profile"] =
        json!({"$ref": "#/components/schemas/Big"});
    doc["components"]["schemas"]["Big"] = json!({"type": "object", "properties": big});
    let mapped = map(doc, &Selection::default());
    assert!(mapped.skipped.is_empty(), "{:?}", mapped.skipped);
    let update = tool(&mapped, "repos_update");
    let defs = &update["inputSchema"]["$defs"];
    assert!(defs["Big"]["$comment"].as_str().unwrap().contains("not expanded"), "{defs}");
    assert!(defs["User"]["properties"].get("login").is_some(), "the nearer component is kept whole");
    let reasons: Vec<&str> = mapped.trimmed.iter().map(|t| t.reason.as_str()).collect();
    assert!(reasons.iter().any(|r| r.starts_with("inputSchema cut") && r.contains("Big")), "{reasons:?}");
}

/// A document with uploads: multipart (OpenAPI 3.0 `format: binary`, 3.1 `contentMediaType`,
/// an array of files, `encoding`), a raw `application/octet-stream` body and an `image/*` one.
fn uploads() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "uploads", "version": "1"},
        "paths": {
            "/covers/{id}": {"post": {
                "operationId": "uploadCover",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"required": true, "content": {"multipart/form-data": {
                    "schema": {"$ref": "#/components/schemas/Cover"},
                    "encoding": {"meta": {"contentType": "application/vnd.meta+json"}, "cover": {"contentType": "image/png, image/jpeg"}}
                }}},
                "responses": {"200": {"description": "ok"}}
            }},
            "/raw": {"put": {
                "operationId": "putRaw",
                "requestBody": {"required": true, "description": "The archive.", "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {"204": {"description": "stored"}}
            }},
            "/picture": {"post": {
                "operationId": "postPicture",
                "requestBody": {"content": {"image/*": {}}},
                "responses": {"204": {"description": "stored"}}
            }}
        },
        "components": {"schemas": {
            "Cover": {"type": "object", "required": ["cover"], "properties": {
                "cover": {"type": "string", "contentMediaType": "image/png", "description": "The front cover"},
                "pages": {"type": "array", "items": {"type": "string", "format": "binary"}},
                "signed": {"type": "string", "contentEncoding": "base64"},
                "caption": {"type": "string"},
                "meta": {"type": "object", "properties": {"w": {"type": "integer"}}}
            }}
        }}
    })
}

#[test]
fn uploads_map_to_file_arguments() {
    use self::plan::{BodyMedia, BodyShape, PartKind};
    let mapped = map(uploads(), &Selection::default());
    assert!(mapped.skipped.is_empty(), "{:?}", mapped.skipped);
    let cover = tool(&mapped, "uploadCover");
    let props = &cover["inputSchema"]["properties"];
    let file: Value = serde_json::from_str(plan::FILE_SCHEMA).unwrap();
    for key in ["type", "properties", "required", "additionalProperties"] {
        assert_eq!(props["cover"][key], file[key], "a 3.1 contentMediaType string is a file: {key}");
        assert_eq!(props["pages"]["items"][key], file[key], "an array of 3.0 binary strings: {key}");
        assert_eq!(props["signed"][key], file[key], "contentEncoding: base64: {key}");
    }
    assert_eq!(props["cover"]["properties"]["data"]["contentEncoding"], "base64");
    assert!(props["cover"]["description"].as_str().unwrap().starts_with("The front cover"), "{props}");
    assert_eq!(props["caption"], json!({"type": "string"}), "other properties as they are");
    assert_eq!(props["meta"]["type"], "object");
    assert_eq!(cover["inputSchema"]["required"], json!(["id", "cover"]), "spread, as a JSON body is");
    let plan = &mapped.operations["uploadCover"];
    let body = plan.body.as_ref().unwrap();
    assert!(matches!(&body.shape, BodyShape::Spread(names) if names.len() == 5), "{body:?}");
    let BodyMedia::Multipart(parts) = &body.media else { panic!("{body:?}") };
    let kind = |name: &str| parts.iter().find(|p| p.name == name).map(|p| (p.kind, p.content_type.clone()));
    assert_eq!(kind("cover"), Some((PartKind::File, None)), "a list of media types is no one type");
    assert_eq!(kind("pages"), Some((PartKind::File, None)));
    assert_eq!(kind("signed"), Some((PartKind::Base64File, None)));
    assert_eq!(kind("caption"), Some((PartKind::Text, None)));
    assert_eq!(kind("meta"), Some((PartKind::Text, Some("application/vnd.meta+json".into()))));

    let raw = tool(&mapped, "putRaw");
    assert_eq!(raw["inputSchema"]["required"], json!(["body"]));
    let described = raw["inputSchema"]["properties"]["body"]["description"].as_str().unwrap();
    assert!(
        described.starts_with("The archive.") && described.contains("application/octet-stream"),
        "{described}"
    );
    let raw_body = mapped.operations["putRaw"].body.as_ref().unwrap();
    assert_eq!(raw_body.media, BodyMedia::Raw("application/octet-stream".into()));
    let picture = mapped.operations["postPicture"].body.as_ref().unwrap();
    assert_eq!(picture.media, BodyMedia::Raw("image/*".into()));
    assert!(tool(&mapped, "postPicture")["inputSchema"].get("required").is_none());
}

#[test]
fn multipart_names_that_cannot_be_part_names_and_other_multiparts_are_skipped() {
    let mut doc = uploads();
    doc["components"]["schemas"]["Cover"]["properties"]["bad\"name"] = json!({"type": "string"});
    doc["paths"]["/mixed"] = json!({"post": {"operationId": "mixed", "requestBody": {"content": {"multipart/mixed": {}}}, "responses": {"200": {"description": "ok"}}}});
    let mapped = map(doc, &Selection::default());
    let reasons: Vec<(Option<&str>, &str)> =
        mapped.skipped.iter().map(|s| (s.operation_id.as_deref(), s.reason.as_str())).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].1.contains("cannot be sent as a part name"), "{reasons:?}");
    assert!(reasons[1].1.contains("multipart/mixed is not served"), "{reasons:?}");
}
