//! OpenAPI targets (`transport = "openapi"`, docs/openapi.md) against a real REST service: the
//! store's catalogue as a FastAPI application (`tests/peers/openapi/store_api.py`), mapped
//! from the document FastAPI generates for it. The service records every request as it
//! arrived (`GET /_received`), so the tests assert what the service saw — paths, queries,
//! headers, bodies, how many attempts — not what the gateway says it sent. SigV4 is checked
//! by botocore inside the service, over the request as received.

use std::{path::PathBuf, process::Command, time::Duration};

use crate::common::*;
use serde_json::{Value, json};

/// The key the service expects in `X-API-Key` (never to appear in the gateway's output).
const API_KEY: &str = "store-key-3f9a1c7e5b2d";

/// The Python of `tests/peers/.venv-openapi` (scripts/install-test-deps.sh).
fn openapi_python() -> PathBuf {
    require(
        &peers_dir().join(".venv-openapi/bin/python"),
        "tests/peers/.venv-openapi (scripts/install-test-deps.sh)",
    )
}

/// The FastAPI store service on a free port.
struct Store {
    _proc: Proc,
    port: u16,
    client: reqwest::blocking::Client,
}

impl Store {
    fn start() -> Self {
        let port = free_port();
        let mut command = Command::new(openapi_python());
        command
            .arg(peers_dir().join("openapi/store_api.py"))
            .arg(port.to_string())
            .env("PYTHONUNBUFFERED", "1")
            .env("STORE_API_KEY", API_KEY)
            // The gateway's SigV4 credentials (the harness's static test ones).
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test");
        let mut proc = Proc::spawn("store-api", command);
        proc.wait_line("READY", Duration::from_secs(60));
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { _proc: proc, port, client }
    }

    fn spec(&self) -> String {
        format!("http://127.0.0.1:{}/openapi.json", self.port)
    }

    /// Every request the service received (but `/openapi.json` fetches), in order.
    fn received(&self) -> Vec<Value> {
        let all: Vec<Value> = self
            .client
            .get(format!("http://127.0.0.1:{}/_received", self.port))
            .send()
            .unwrap()
            .json()
            .unwrap();
        all.into_iter().filter(|r| r["path"] != "/openapi.json").collect()
    }

    /// How many times the document was fetched.
    fn document_fetches(&self) -> usize {
        let all: Vec<Value> = self
            .client
            .get(format!("http://127.0.0.1:{}/_received", self.port))
            .send()
            .unwrap()
            .json()
            .unwrap();
        all.iter().filter(|r| r["path"] == "/openapi.json").count()
    }

    /// How many requests reached `path`.
    fn hits(&self, path: &str) -> usize {
        self.received().iter().filter(|r| r["path"] == path).count()
    }
}

fn tools(gateway: &Gateway) -> Vec<Value> {
    let (_, body) = gateway.rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    body["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("no tools: {body}"))
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no tool {name} in {tools:#?}"))
}

fn store_config(store: &Store) -> String {
    format!(
        "[servers.store]\ntransport = \"openapi\"\nspec = \"{}\"\nexclude = [\"operation:statusCode\", \"operation:signedLookup\"]\n\
         [servers.store.security.APIKeyHeader]\nenv = \"STORE_API_KEY\"\n",
        store.spec()
    )
}

#[test]
fn the_fastapi_document_maps_to_tools_with_schemas_and_annotations() {
    let store = Store::start();
    let gateway = Gateway::start(&store_config(&store), &[("STORE_API_KEY", API_KEY)]);
    let listed = tools(&gateway);
    let mut names: Vec<&str> = listed.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel_order_orders__order_id__delete",
            "createOrder",
            "echo",
            "echoBody",
            "echoForm",
            "getProduct",
            "putBlob",
            "searchProducts",
            "setStock",
            "uploadCover",
        ],
        "every selected operation, the multipart and octet-stream uploads included"
    );

    let get = tool(&listed, "getProduct");
    assert_eq!(get["description"], "One product\n\nA volume by its catalogue id.");
    assert_eq!(get["inputSchema"]["required"], json!(["product_id"]));
    assert_eq!(get["inputSchema"]["properties"]["product_id"]["type"], "string");
    assert_eq!(get["outputSchema"]["properties"]["price_jpy"]["type"], "integer", "the $ref'd Product");
    assert_eq!(get["annotations"]["readOnlyHint"], true);
    let search = tool(&listed, "searchProducts");
    assert_eq!(search["outputSchema"]["properties"]["result"]["type"], "array", "an array answer is wrapped");
    // Components are shared through `$defs`, not inlined (docs/openapi.md).
    let items = &search["outputSchema"]["properties"]["result"]["items"];
    assert_eq!(items["$ref"], "#/$defs/Product", "{items}");
    assert_eq!(search["outputSchema"]["$defs"]["Product"]["properties"]["title"]["type"], "string");
    let order = tool(&listed, "createOrder");
    assert_eq!(order["inputSchema"]["required"], json!(["product_id", "quantity"]), "the body spread");
    assert_eq!(order["inputSchema"]["properties"]["quantity"]["minimum"], 1.0, "as pydantic wrote it");
    assert_eq!(order["annotations"]["idempotentHint"], false);
    assert_eq!(order["annotations"]["readOnlyHint"], false);
    let stock = tool(&listed, "setStock");
    assert_eq!(
        (stock["annotations"]["idempotentHint"].clone(), stock["annotations"]["destructiveHint"].clone()),
        (json!(true), json!(false))
    );
    let cancel = tool(&listed, "cancel_order_orders__order_id__delete");
    assert_eq!(cancel["annotations"]["destructiveHint"], true);
    let echo_body = tool(&listed, "echoBody");
    let body = &echo_body["inputSchema"]["properties"]["body"];
    let body = body["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map_or(body, |name| &echo_body["inputSchema"]["$defs"][name]);
    assert_eq!(
        body["properties"]["product_id"]["type"], "string",
        "a body property named like a path parameter keeps the body whole, under `body`"
    );
    assert_eq!(echo_body["inputSchema"]["required"], json!(["product_id", "body"]));
    let form = tool(&listed, "echoForm");
    assert_eq!(form["inputSchema"]["required"], json!(["title", "quantity"]), "a form body spread too");

    // The uploads are file arguments: base64 content, with the media type and file name.
    let cover = tool(&listed, "uploadCover");
    let file = &cover["inputSchema"]["properties"]["cover"];
    assert_eq!(file["properties"]["data"]["contentEncoding"], "base64", "{cover}");
    assert_eq!(file["required"], json!(["data"]));
    assert_eq!(cover["inputSchema"]["required"], json!(["product_id", "cover"]), "{cover}");
    let blob = tool(&listed, "putBlob");
    assert_eq!(blob["inputSchema"]["properties"]["body"]["properties"], file["properties"], "{blob}");

    // Nothing skipped: the report says so.
    let (status, registry) = admin_get_json(&gateway, "/admin/registry");
    assert_eq!(status, 200);
    let report = &registry["openapi"]["store"];
    assert_eq!(report["tools"], 10, "{report}");
    assert_eq!(report["skipped"], json!([]), "{report}");
    // Catalogue tools like any other: the registry lists them with their server and hashes.
    let listed_in_registry = registry["tools"].as_array().unwrap();
    let get_entry = listed_in_registry.iter().find(|t| t["name"] == "getProduct").unwrap();
    assert_eq!(
        (get_entry["server"].clone(), get_entry["transport"].clone()),
        (json!("store"), json!("openapi"))
    );
    assert!(get_entry["definition_hash"].is_string(), "{get_entry}");

    // A document given by URL is fetched again on every refresh.
    let fetched = store.document_fetches();
    let refresh = gateway.admin_post("/admin/registry/refresh").send().unwrap();
    assert!(refresh.status().is_success(), "{}", refresh.status());
    wait_for("the refresh to fetch the document again", || store.document_fetches() > fetched);

    // check-config fetches and maps it too, and skips nothing.
    let spec = store.spec();
    let env = [
        ("MCP_GATEWAY_SERVERS__STORE__TRANSPORT", "openapi"),
        ("MCP_GATEWAY_SERVERS__STORE__SPEC", spec.as_str()),
    ];
    let checked = check_config(&["--json"], &env);
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
}

#[test]
fn calls_encode_path_query_header_cookie_and_bodies_as_the_document_says() {
    let store = Store::start();
    let gateway = Gateway::start(&store_config(&store), &[("STORE_API_KEY", API_KEY)]);

    let echoed = gateway.call(
        "echo",
        json!({
            "segment": "a/b c?#é",
            "tag": ["x", "y z"],
            "ids": [1, 2],
            "words": ["a", "b"],
            "codes": ["p", "q"],
            "filter": {"genre": "shonen", "max_price": 500},
            "x-note": "hi",
            "session": "s1"
        }),
    );
    let seen = structured(&echoed);
    assert_eq!(seen["segment"], "a/b c?#é", "{echoed}");
    assert_eq!(seen["raw_path"], "/echo/a%2Fb%20c%3F%23%C3%A9", "a path value cannot add segments");
    assert_eq!(
        seen["query"],
        "tag=x&tag=y%20z&ids=1,2&words=a%20b&codes=p|q&filter%5Bgenre%5D=shonen&filter%5Bmax_price%5D=500",
        "form exploded, form not exploded, spaceDelimited, pipeDelimited, deepObject"
    );
    assert_eq!(seen["tag"], json!(["x", "y z"]));
    assert_eq!((seen["x_note"].clone(), seen["session"].clone()), (json!("hi"), json!("s1")));

    let body =
        gateway.call("echoBody", json!({"product_id": "P1", "body": {"product_id": "B1", "note": "n"}}));
    assert_eq!(
        structured(&body),
        &json!({"path_product_id": "P1", "body": {"product_id": "B1", "note": "n"}})
    );

    let form = gateway.call("echoForm", json!({"title": "鬼滅 & co=1", "quantity": 2}));
    assert_eq!(structured(&form), &json!({"title": "鬼滅 & co=1", "quantity": 2}), "{form}");
    let sent = store.received().into_iter().find(|r| r["path"] == "/echo-form").unwrap();
    assert_eq!(sent["headers"]["content-type"], "application/x-www-form-urlencoded");
    assert_eq!(sent["body"], "title=%E9%AC%BC%E6%BB%85%20%26%20co%3D1&quantity=2");

    // A JSON body, the API key from the environment, and a result as structured content.
    let order = gateway.call("createOrder", json!({"product_id": "MNG-00000001", "quantity": 2}));
    assert_eq!(structured(&order)["total_jpy"], 1056, "{order}");
    let sent = store.received().into_iter().find(|r| r["path"] == "/orders").unwrap();
    assert_eq!(sent["headers"]["x-api-key"], API_KEY, "the service received the key");
    assert_eq!(
        serde_json::from_str::<Value>(sent["body"].as_str().unwrap()).unwrap(),
        json!({"product_id": "MNG-00000001", "quantity": 2})
    );
    assert!(
        !gateway.proc.output().contains(API_KEY),
        "the API key is never logged:\n{}",
        gateway.proc.output()
    );

    // A missing required argument is refused before anything is sent.
    let before = store.received().len();
    let refused = gateway.call("getProduct", json!({}));
    assert!(refused.get("error").is_some() || refused["result"]["isError"] == true, "{refused}");
    assert_eq!(store.received().len(), before, "nothing sent for invalid arguments");
}

/// Base64 and SHA-256 of `bytes`, as a call sends them and the service reports them.
fn b64_and_sha(bytes: &[u8]) -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let sha: String = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    (base64::engine::general_purpose::STANDARD.encode(bytes), sha)
}

#[test]
fn uploads_reach_the_service_as_files_and_bad_or_oversized_ones_are_never_sent() {
    let store = Store::start();
    let config = store_config(&store).replacen(
        "[servers.store.security",
        "max_request_bytes = 4096\n[servers.store.security",
        1,
    );
    let gateway = Gateway::start(&config, &[("STORE_API_KEY", API_KEY)]);

    // multipart/form-data: the file part with its name and type, a text part beside it.
    let png: Vec<u8> =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".iter().copied().chain((0..=255u8).cycle().take(1000)).collect();
    let (data, sha) = b64_and_sha(&png);
    let uploaded = gateway.call(
        "uploadCover",
        json!({"product_id": "MNG-00000004", "cover": {"data": data, "mediaType": "image/png", "filename": "表紙 1.png"}, "caption": "vol. 1"}),
    );
    assert_eq!(
        structured(&uploaded),
        &json!({
            "product_id": "MNG-00000004", "filename": "表紙 1.png", "content_type": "image/png",
            "bytes": png.len(), "sha256": sha, "caption": "vol. 1"
        }),
        "the service parsed the part it received: {uploaded}"
    );
    let sent = store.received().into_iter().find(|r| r["path"] == "/covers/MNG-00000004").unwrap();
    assert!(sent["headers"]["content-type"].as_str().unwrap().starts_with("multipart/form-data; boundary="));

    // application/octet-stream: the bytes as the body, with the document's media type.
    let bytes: Vec<u8> = (0..=255u8).rev().collect();
    let (data, sha) = b64_and_sha(&bytes);
    let put = gateway.call("putBlob", json!({"name": "raw", "body": {"data": data}}));
    assert_eq!(
        structured(&put),
        &json!({"name": "raw", "content_type": "application/octet-stream", "bytes": 256, "sha256": sha}),
        "{put}"
    );

    // Refused with a precise invalid-params error, and nothing reaches the service: a file
    // over max_request_bytes (refused before it is decoded), invalid base64, a media type
    // the operation does not take.
    let before = store.received().len();
    let (big, _) = b64_and_sha(&[7u8; 4097]);
    let refused = gateway.call("uploadCover", json!({"product_id": "MNG-00000004", "cover": {"data": big}}));
    let data = expect_error(&refused, -32602, "bad_input");
    assert_eq!(
        refused["error"]["message"].as_str().map(|m| m
            .contains("argument \"cover\": the file's 4097 bytes exceed max_request_bytes (4096): not sent")),
        Some(true),
        "{refused}"
    );
    assert_eq!(data["retryable"], false, "{refused}");
    let bad = gateway.call("putBlob", json!({"name": "raw", "body": {"data": "bm90IGJhc2U2N!=="}}));
    expect_error(&bad, -32602, "bad_input");
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("argument \"body\": data is not base64"),
        "{bad}"
    );
    let typed =
        gateway.call("putBlob", json!({"name": "raw", "body": {"data": "AAAA", "mediaType": "text/html"}}));
    expect_error(&typed, -32602, "bad_input");
    let schema = gateway.call("putBlob", json!({"name": "raw", "body": {"bytes": "AAAA"}}));
    expect_error(&schema, -32602, "bad_input");
    assert_eq!(store.received().len(), before, "nothing sent for a refused upload");
}

#[test]
fn statuses_map_to_tool_errors_auth_rate_limits_and_breaker_failures() {
    let store = Store::start();
    let config = format!(
        "[servers.flaky]\ntransport = \"openapi\"\nspec = \"{}\"\ninclude = [\"operation:statusCode\", \"operation:createOrder\"]\n\
         [servers.flaky.retry]\nmax_retries_safe = 0\nmax_retries_unsafe = 0\n\
         [servers.flaky.breaker]\nconsecutive_failures = 2\nmin_calls = 1000\nopen_base_ms = 600000\nopen_max_ms = 600000\n",
        store.spec()
    );
    // No security configured: createOrder requires APIKeyHeader, so it is never sent.
    let gateway = Gateway::start(&config, &[]);

    // 4xx: a tool result the model can read, with the status and the body's excerpt; the
    // breaker counts it as an answer.
    for _ in 0..3 {
        let missing = gateway.call("statusCode", json!({"code": 404}));
        assert_eq!(missing["result"]["isError"], true, "{missing}");
        assert_eq!(result_text(&missing), r#"HTTP 404 Not Found: {"detail":"status 404"}"#);
    }
    let unprocessable = gateway.call("statusCode", json!({"code": 422}));
    assert!(result_text(&unprocessable).starts_with("HTTP 422"), "{unprocessable}");
    assert_eq!(gateway.breaker("flaky")["consecutive_failures"], 0);

    expect_error(&gateway.call("statusCode", json!({"code": 401})), -32007, "upstream_auth");
    expect_error(&gateway.call("statusCode", json!({"code": 403})), -32007, "upstream_auth");
    let limited = gateway.call("statusCode", json!({"code": 429, "retry_after": 1}));
    expect_error(&limited, -32003, "rate_limited");
    expect_error(&gateway.call("statusCode", json!({"code": 503, "retry_after": 1})), -32003, "rate_limited");
    assert_eq!(store.hits("/status/429"), 1, "retries off: one attempt");
    assert_eq!(gateway.breaker("flaky")["state"], "closed");

    let needs_key = gateway.call("createOrder", json!({"product_id": "MNG-00000001", "quantity": 1}));
    // Missing from the configuration: not retryable (trying again cannot help).
    expect_error(&needs_key, -32006, "upstream_misconfigured");
    assert_eq!(needs_key["error"]["data"]["retryable"], false, "{needs_key}");
    assert_eq!(store.hits("/orders"), 0, "an operation whose security is not configured is never sent");

    // 5xx: counted against the breaker, which opens after two; the third call is not sent.
    expect_error(&gateway.call("statusCode", json!({"code": 500})), -32000, "upstream_error");
    expect_error(&gateway.call("statusCode", json!({"code": 502})), -32000, "upstream_error");
    assert_eq!(gateway.breaker("flaky")["state"], "open");
    expect_error(&gateway.call("statusCode", json!({"code": 500})), -32004, "circuit_open");
    assert_eq!(
        (store.hits("/status/500"), store.hits("/status/502")),
        (1, 1),
        "the open breaker sent nothing"
    );
}

#[test]
fn catalogue_control_renames_fixes_arguments_and_hides_openapi_tools() {
    let store = Store::start();
    let config = format!(
        "{}[tools.getProduct]\nrename = \"product_lookup\"\n[tools.searchProducts]\nfixed_arguments = {{limit = 1}}\n\
         [tools.cancel_order_orders__order_id__delete]\nhide = true\n",
        store_config(&store)
    );
    let gateway = Gateway::start(&config, &[("STORE_API_KEY", API_KEY)]);
    let names = gateway.tool_names();
    assert!(
        names.contains(&"product_lookup".to_string()) && !names.contains(&"getProduct".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("cancel_order")), "hidden: {names:?}");
    let product = gateway.call("product_lookup", json!({"product_id": "MNG-00000004"}));
    assert_eq!(structured(&product)["title"], "Demon Slayer", "{product}");
    assert_eq!(store.hits("/products/MNG-00000004"), 1);
    let found = gateway.call("searchProducts", json!({"q": "a"}));
    assert_eq!(structured(&found)["result"].as_array().map(Vec::len), Some(1), "{found}");
    let sent = store.received().into_iter().find(|r| r["path"] == "/products").unwrap();
    assert_eq!(sent["query"], "q=a&limit=1", "the fixed argument reached the service");
}

#[test]
fn sigv4_signatures_verify_with_botocore_over_the_request_received() {
    let store = Store::start();
    let config = format!(
        "[servers.aws]\ntransport = \"openapi\"\nspec = \"{}\"\ninclude = [\"operation:signedLookup\"]\n\
         [servers.aws.auth]\nkind = \"sigv4\"\nservice = \"execute-api\"\nregion = \"eu-west-1\"\n",
        store.spec()
    );
    let gateway = Gateway::start(&config, &[]);
    let answer = gateway.call("signedLookup", json!({"item": "vol 1", "body": {"q": "鬼滅"}}));
    let checked = structured(&answer);
    assert_eq!(checked["verified"], true, "botocore recomputed the same signature: {answer}");
    assert_eq!(
        (checked["service"].clone(), checked["region"].clone()),
        (json!("execute-api"), json!("eu-west-1"))
    );
    assert_eq!(checked["payload"], json!({"q": "鬼滅"}));
    let signed: Vec<&str> =
        checked["signed_headers"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(signed.contains(&"host") && signed.contains(&"x-amz-date"), "{signed:?}");

    // The check is not vacuous: a wrong signature does not verify.
    let forged: Value = store
        .client
        .post(format!("http://127.0.0.1:{}/signed/x", store.port))
        .header("x-amz-date", "20260101T000000Z")
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=test/20260101/eu-west-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00",
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(forged["verified"], false, "{forged}");
}

/// A document for the file tests: one operation whose schema lives in a file beside it (a
/// relative `$ref`), one whose body is `application/octet-stream` (a file argument).
const FILE_DOC: &str = r#"openapi: 3.0.3
info: {title: files, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /prices/{sku}:
    get:
      operationId: getPrice
      parameters:
        - {name: sku, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "common.yaml#/components/schemas/Price"}
  /upload:
    post:
      operationId: upload
      requestBody:
        content:
          application/octet-stream: {schema: {type: string, format: binary}}
      responses:
        "200": {description: ok}
"#;

const COMMON_DOC: &str = r#"components:
  schemas:
    Price:
      type: object
      properties:
        amount: {type: number}
        currency: {type: string, nullable: true}
"#;

#[test]
fn file_documents_resolve_relative_refs_and_bad_ones_are_refused_with_a_pointer() {
    let dir = Scratch::new("openapi-docs");
    std::fs::write(dir.path("store.yaml"), FILE_DOC).unwrap();
    std::fs::write(dir.path("common.yaml"), COMMON_DOC).unwrap();
    let env = |spec: &str| {
        vec![
            ("MCP_GATEWAY_SERVERS__PRICES__TRANSPORT".to_string(), "openapi".to_string()),
            ("MCP_GATEWAY_SERVERS__PRICES__SPEC".to_string(), spec.to_string()),
        ]
    };
    let run = |spec: &str| {
        let env = env(spec);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        check_config(&["--json"], &pairs)
    };

    // Good: loads; the octet-stream upload is a tool too (nothing skipped, no warning).
    let good = run(&dir.path("store.yaml"));
    let stderr = String::from_utf8_lossy(&good.stderr);
    assert!(good.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");

    // The served tools carry the schema from the other file (nullable turned into JSON Schema).
    let config =
        format!("[servers.prices]\ntransport = \"openapi\"\nspec = \"{}\"\n", dir.path("store.yaml"));
    let gateway = Gateway::start(&config, &[]);
    let listed = tools(&gateway);
    assert_eq!(listed.len(), 2, "{listed:#?}");
    assert_eq!(tool(&listed, "upload")["inputSchema"]["properties"]["body"]["required"], json!(["data"]));
    assert_eq!(listed[0]["outputSchema"]["properties"]["currency"]["type"], json!(["string", "null"]));
    // A changed file is read again on the next refresh: its new operation becomes a tool.
    let grown = FILE_DOC.replace(
        "  /upload:",
        "  /stock/{sku}:\n    delete:\n      parameters: [{name: sku, in: path, required: true, schema: {type: string}}]\n      responses: {\"204\": {description: gone}}\n  /upload:",
    );
    std::fs::write(dir.path("store.yaml"), grown).unwrap();
    gateway.admin_post("/admin/registry/refresh").send().unwrap();
    wait_for("the changed document's new tool", || {
        gateway.tool_names().contains(&"delete_stock_sku".to_string())
    });
    drop(gateway);

    // Bad: parse errors name the line; structural ones the JSON pointer; check-config and
    // serve refuse alike.
    std::fs::write(dir.path("broken.yaml"), "openapi: 3.1.0\npaths:\n  /a: [\n").unwrap();
    let broken = run(&dir.path("broken.yaml"));
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(!broken.status.success());
    assert!(stderr.contains(&dir.path("broken.yaml")) && stderr.contains("at line "), "{stderr}");
    std::fs::write(dir.path("paths.json"), r#"{"openapi": "3.0.3", "paths": ["/a"]}"#).unwrap();
    let structural = run(&dir.path("paths.json"));
    let stderr = String::from_utf8_lossy(&structural.stderr);
    assert!(!structural.status.success());
    assert!(
        stderr.contains(&format!("{}: at /paths: must be an object", dir.path("paths.json"))),
        "{stderr}"
    );
    std::fs::write(dir.path("swagger.json"), r#"{"swagger": "2.0", "paths": {}}"#).unwrap();
    let swagger = run(&dir.path("swagger.json"));
    assert!(String::from_utf8_lossy(&swagger.stderr).contains("at /swagger: Swagger 2.0 is not served"));

    let serve = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env(&dir.path("paths.json")))
        .output()
        .expect("the gateway runs");
    assert!(!serve.status.success(), "a bad document refuses the start");
    let said = String::from_utf8_lossy(&serve.stderr);
    assert!(said.contains(&format!("{}: at /paths: must be an object", dir.path("paths.json"))), "{said}");
}

#[test]
fn openapi_tools_are_exported_searched_and_called_through_call_tool_like_any_other() {
    let store = Store::start();
    let config = format!("{}[catalogue.search]\nenabled = true\nmax_results = 5\n", store_config(&store));
    let gateway = Gateway::start(&config, &[("STORE_API_KEY", API_KEY)]);
    // Search mode: the model sees the two meta-tools, and finds the operation by its summary.
    let found = gateway.call("search_tools", json!({"query": "search the catalogue", "max_results": 5}));
    let tools = found["result"]["structuredContent"]["tools"].as_array().cloned().unwrap_or_default();
    let search = tools.iter().find(|t| t["name"] == "searchProducts").unwrap_or_else(|| panic!("{found}"));
    assert!(search["inputSchema"]["properties"]["q"].is_object(), "{search}");
    assert_eq!(search["annotations"]["readOnlyHint"], true, "GET is read-only: {search}");
    // call_tool reaches the service through the same door, and the service sees the request.
    let via =
        gateway.call("call_tool", json!({"name": "getProduct", "arguments": {"product_id": "MNG-00000004"}}));
    assert_eq!(structured(&via)["title"], "Demon Slayer", "{via}");
    assert_eq!(store.hits("/products/MNG-00000004"), 1);
    // The exports follow what callers see: the meta-tools in search mode.
    let (status, exported) = get_json(&gateway, "/tools?format=openai");
    assert_eq!(status, 200, "{exported}");
    let text = exported.to_string();
    assert!(text.contains("search_tools") && text.contains("call_tool"), "{text}");

    // Without search mode, every mapped operation is exported in a model API's shape.
    let plain = Gateway::start(&store_config(&store), &[("STORE_API_KEY", API_KEY)]);
    let (status, exported) = get_json(&plain, "/tools?format=anthropic");
    assert_eq!(status, 200, "{exported}");
    let product = exported["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "getProduct"))
        .unwrap_or_else(|| panic!("{exported}"));
    assert!(product["input_schema"]["properties"]["product_id"].is_object(), "{product}");
}
