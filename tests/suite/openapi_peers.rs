//! OpenAPI targets against REST services and documents nobody here wrote, each request checked
//! by a validator nobody here wrote either: Stoplight Prism (npm `@stoplight/prism-cli`), with
//! `--errors`, validates every request the gateway builds against the document (path,
//! query style, headers, security, body) and answers a violation with a 4xx and its reasons, so
//! a request built wrong fails the test. The public Swagger Petstore document
//! (`@readme/oas-examples`) is served by Prism as a validating mock; the FastAPI store service
//! (`tests/peers/openapi/store_api.py`) is called through Prism as a validating proxy, with the
//! document FastAPI generates. What each call must show: Prism's verdict "passed" for exactly
//! that request, and the answer the service gave.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::{Value, json};

use crate::common::*;
use crate::upstream_credentials::{OAuth, SECRET, secret_file};

/// Prism's entry point (npm `@stoplight/prism-cli`).
fn prism_entry() -> PathBuf {
    require(
        &peers_dir().join("node_modules/@stoplight/prism-cli/dist/index.js"),
        "Stoplight Prism (npm @stoplight/prism-cli)",
    )
}

/// The Swagger Petstore document as `@readme/oas-examples` ships it (OpenAPI 3.0).
pub(crate) fn petstore_document() -> PathBuf {
    require(
        &peers_dir().join("node_modules/@readme/oas-examples/3.0/json/petstore.json"),
        "the Swagger Petstore document (npm @readme/oas-examples)",
    )
}

/// A running Prism, mock or proxy, validating every request (`--errors`).
pub(crate) struct Prism {
    proc: Proc,
    pub(crate) port: u16,
    /// The log lines of its verdicts: (passed, failed). A mock says whether the request
    /// "passed the validation rules"; a proxy logs "Forwarding" for a valid request and
    /// "Request terminated with error" for one it refuses.
    marks: (&'static str, &'static str),
}

/// Prism's verdict on one request, from its log.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    Passed,
    Failed,
}

impl Prism {
    /// `prism mock DOCUMENT --errors`: answers from the document's examples, after validation.
    pub(crate) fn mock(document: &Path) -> Self {
        Self::start("mock", &[document.to_str().expect("a UTF-8 path")])
    }

    /// `prism proxy DOCUMENT UPSTREAM --errors`: validates, then forwards to `upstream`.
    pub(crate) fn proxy(document: &str, upstream: &str) -> Self {
        Self::start("proxy", &[document, upstream])
    }

    fn start(mode: &str, args: &[&str]) -> Self {
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(prism_entry())
            .arg(mode)
            .args(args)
            .args(["--errors", "--host", "127.0.0.1", "--port", &port.to_string()])
            .env("NO_COLOR", "1")
            .env("FORCE_COLOR", "0");
        let proc = Proc::spawn_until(&format!("prism {mode}"), command, "Prism is listening");
        let marks = if mode == "proxy" {
            ("> Forwarding", "Request terminated with error")
        } else {
            ("passed the validation rules", "did not pass the validation rules")
        };
        Self { proc, port, marks }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Prism's verdicts so far, in the order the requests came.
    pub(crate) fn verdicts(&self) -> Vec<Verdict> {
        self.proc
            .lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|line| {
                if line.contains(self.marks.0) {
                    Some(Verdict::Passed)
                } else if line.contains(self.marks.1) {
                    Some(Verdict::Failed)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Requests Prism received so far.
    pub(crate) fn received(&self) -> usize {
        self.proc.lines.lock().unwrap().iter().filter(|l| l.contains("Request received")).count()
    }

    /// Waits for the verdict on request number `n` (from 1) and returns it.
    pub(crate) fn verdict(&self, n: usize) -> Verdict {
        wait_for(&format!("Prism's verdict on request {n}"), || self.verdicts().len() >= n);
        self.verdicts().swap_remove(n - 1)
    }

    pub(crate) fn output(&self) -> String {
        self.proc.output()
    }
}

/// Calls `tool` through the gateway, then asserts that it reached Prism as exactly one more
/// request and that Prism found it valid. Returns the gateway's answer.
pub(crate) fn call_validated(gateway: &Gateway, prism: &Prism, tool: &str, arguments: Value) -> Value {
    let before = prism.received();
    let answer = gateway.call(tool, arguments.clone());
    let n = before + 1;
    assert_eq!(
        prism.verdict(n),
        Verdict::Passed,
        "Prism refused the request the gateway built for {tool}({arguments}); answer: {answer}\nPrism:\n{}",
        prism.output()
    );
    assert_eq!(prism.received(), n, "{tool}: one call must be one request; Prism:\n{}", prism.output());
    answer
}

/// The tool result of an answer (a JSON-RPC error fails the test).
fn tool_result(answer: &Value) -> &Value {
    answer.get("result").unwrap_or_else(|| panic!("not a tool result: {answer}"))
}

/// Whether the tool result says the service answered with an error status.
fn is_error(answer: &Value) -> bool {
    tool_result(answer).get("isError") == Some(&Value::Bool(true))
}

fn petstore_config(prism: &Prism, oauth: &OAuth, secret_path: &str) -> String {
    format!(
        r#"
[servers.petstore]
transport = "openapi"
spec = "{document}"
base_url = "{base}"
[servers.petstore.security.api_key]
env = "PETSTORE_API_KEY"
[servers.petstore.auth]
kind = "client_credentials"
token_url = "{oauth}/token"
client_id = "mcp-gateway"
client_secret_file = "{secret_path}"
"#,
        document = petstore_document().display(),
        base = prism.url(),
        oauth = oauth.server,
    )
}

#[test]
fn petstore_operations_built_by_the_gateway_pass_prism_validation() {
    let prism = Prism::mock(&petstore_document());
    let scratch = Scratch::new("petstore");
    let secret_path = secret_file(&scratch, SECRET);
    let oauth = OAuth::start(&secret_path);
    let gateway = Gateway::start(
        &petstore_config(&prism, &oauth, &secret_path),
        &[("PETSTORE_API_KEY", "special-key-ペット")],
    );

    // The document's 20 operations are 20 tools, the multipart/form-data upload included.
    let names = gateway.tool_names();
    assert_eq!(names.len(), 20, "{names:?}");
    for name in [
        "uploadFile",
        "findPetsByStatus",
        "getPetById",
        "deletePet",
        "updatePetWithForm",
        "placeOrder",
        "addPet",
    ] {
        assert!(names.contains(&name.to_string()), "{name} missing from {names:?}");
    }

    // Query array, `form` style exploded (status=available&status=sold), OAuth bearer token.
    let found =
        call_validated(&gateway, &prism, "findPetsByStatus", json!({"status": ["available", "sold"]}));
    assert!(!is_error(&found), "{found}");
    // Prism's answer from the document's example, as structured content (an array: `result`).
    assert_eq!(structured(&found)["result"][0]["name"], "doggie", "{found}");
    // Query strings that need percent-encoding.
    let tagged =
        call_validated(&gateway, &prism, "findPetsByTags", json!({"tags": ["manga & anime", "ペット"]}));
    assert!(!is_error(&tagged), "{tagged}");
    // Integer path parameter; the `api_key` header scheme from the environment.
    let pet = call_validated(&gateway, &prism, "getPetById", json!({"petId": 7}));
    assert!(!is_error(&pet), "{pet}");
    // A header parameter (named like the api_key scheme, but an argument of this operation).
    let deleted = call_validated(&gateway, &prism, "deletePet", json!({"petId": 7, "api_key": "caller-key"}));
    assert_ne!(tool_result(&deleted)["content"], Value::Null, "{deleted}");
    // application/x-www-form-urlencoded body. The document declares only a 405 for it, so
    // Prism answers 405 to a valid request: a 4xx tool result carrying the status.
    let form = call_validated(
        &gateway,
        &prism,
        "updatePetWithForm",
        json!({"petId": 7, "name": "Rex", "status": "sold"}),
    );
    assert!(is_error(&form), "{form}");
    assert!(result_text(&form).contains("405"), "{form}");
    // JSON body, its properties spread as arguments (the body is `components/schemas/Order`).
    let order = call_validated(
        &gateway,
        &prism,
        "placeOrder",
        json!({"id": 3, "petId": 7, "quantity": 2, "shipDate": "2026-11-27T17:00:00Z", "status": "placed", "complete": false}),
    );
    assert!(!is_error(&order), "{order}");
    // A request body given by `$ref` (components/requestBodies/Pet), nested objects and arrays.
    let added = call_validated(
        &gateway,
        &prism,
        "addPet",
        json!({"name": "Rex", "photoUrls": ["https://example.com/rex.png"], "category": {"id": 1, "name": "dogs"},
               "tags": [{"id": 2, "name": "good"}], "status": "available"}),
    );
    assert_ne!(tool_result(&added)["content"], Value::Null, "{added}");
    // multipart/form-data: a text part and a file part (`format: binary`), as Prism expects.
    let uploaded = call_validated(
        &gateway,
        &prism,
        "uploadFile",
        json!({"petId": 7, "additionalMetadata": "front ペット", "file": {"data": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "rex.png"}}),
    );
    assert!(!is_error(&uploaded), "{uploaded}");
    // Query strings with reserved characters; a path segment with a space and non-ASCII.
    let login =
        call_validated(&gateway, &prism, "loginUser", json!({"username": "ミカ", "password": "p&ss=1 ?#"}));
    assert!(!is_error(&login), "{login}");
    let user = call_validated(&gateway, &prism, "getUserByName", json!({"username": "user one ä"}));
    assert!(!is_error(&user), "{user}");

    // The secrets are on the wire, never in the gateway's log.
    let log = gateway.proc.output();
    assert!(!log.contains("special-key-ペット") && !log.contains(SECRET), "a secret in the log:\n{log}");
    // Every token request the gateway made succeeded (one, reused).
    assert_eq!(oauth.client_credentials(), 1);
}

/// The FastAPI store service (`tests/peers/openapi/store_api.py`, in `.venv-openapi`) on a
/// free port: it records every request as it arrived (`GET /_received`).
fn store_service() -> (Proc, u16) {
    let port = free_port();
    let python = require(
        &peers_dir().join(".venv-openapi/bin/python"),
        "the FastAPI store service's virtualenv (tests/peers/.venv-openapi)",
    );
    let mut command = Command::new(python);
    command
        .arg(peers_dir().join("openapi/store_api.py"))
        .arg(port.to_string())
        .env("STORE_API_KEY", "store-key-0123");
    (Proc::spawn_until("store_api.py", command, "READY"), port)
}

/// The calls the store service received, in order (not the gateway's reads of its document).
fn received(port: u16) -> Vec<Value> {
    let all: Vec<Value> =
        reqwest::blocking::get(format!("http://127.0.0.1:{port}/_received")).unwrap().json().unwrap();
    all.into_iter().filter(|r| r["path"] != "/openapi.json").collect()
}

#[test]
fn the_fastapi_store_through_prism_validating_proxy_with_the_document_fastapi_generates() {
    let (_store, store_port) = store_service();
    let document = format!("http://127.0.0.1:{store_port}/openapi.json");
    let prism = Prism::proxy(&document, &format!("http://127.0.0.1:{store_port}"));
    let config = format!(
        r#"
[servers.store]
transport = "openapi"
spec = "{document}"
base_url = "{}"
[servers.store.security.APIKeyHeader]
env = "STORE_API_KEY"
"#,
        prism.url()
    );
    let gateway = Gateway::start(&config, &[("STORE_API_KEY", "store-key-0123")]);
    let names = gateway.tool_names();
    // Every operation is a tool, the multipart and octet-stream uploads included.
    assert!(
        names.contains(&"uploadCover".to_string()) && names.contains(&"putBlob".to_string()),
        "{names:?}"
    );
    let (_, registry) = admin_get_json(&gateway, "/admin/registry");
    assert_eq!(registry["openapi"]["store"]["skipped"], json!([]), "{registry}");

    let mut sent = 0;
    let mut call = |tool: &str, arguments: Value| {
        let answer = call_validated(&gateway, &prism, tool, arguments);
        sent += 1;
        // Prism passed it on: the service saw exactly this many requests.
        wait_for("the store to record the request", || received(store_port).len() >= sent);
        assert_eq!(received(store_port).len(), sent, "{tool}: {answer}");
        answer
    };

    // Query: a string and an array (FastAPI's `form`, exploded: genre=a&genre=b).
    let found = call("searchProducts", json!({"q": "piece", "genre": ["shonen", "seinen"], "limit": 5}));
    assert_eq!(structured(&found)["result"][0]["id"], "MNG-00000001", "{found}");
    let product = call("getProduct", json!({"product_id": "MNG-00000015"}));
    assert_eq!(structured(&product)["title"], "Vinland Saga", "{product}");
    // PUT with a JSON body spread as arguments beside the path parameter.
    let stocked = call("setStock", json!({"product_id": "MNG-00000004", "tokyo": 3, "osaka": 0}));
    assert_eq!(structured(&stocked)["stock"]["tokyo"], 3, "{stocked}");
    // The document's APIKeyHeader scheme (X-API-Key) from the environment; a 201.
    let order = call("createOrder", json!({"product_id": "MNG-00000001", "quantity": 2, "note": "gift"}));
    assert_eq!(structured(&order)["total_jpy"], 1056, "{order}");
    let last = received(store_port).pop().unwrap();
    assert_eq!(last["headers"]["x-api-key"], "store-key-0123", "{last}");
    // A path parameter and a body property share a name: the body is one `body` argument.
    let echoed =
        call("echoBody", json!({"product_id": "MNG-00000001", "body": {"product_id": "other", "note": "n"}}));
    assert_eq!(structured(&echoed)["path_product_id"], "MNG-00000001", "{echoed}");
    assert_eq!(structured(&echoed)["body"]["product_id"], "other", "{echoed}");
    // Uploads, through Prism's validation: a multipart file part and a raw octet-stream body.
    // ASCII bytes: Prism's proxy forwards a multipart part as text (a byte over 0x7F comes out
    // UTF-8 encoded); tests/suite/openapi.rs proves binary bytes arrive exactly, by SHA-256.
    let cover = call(
        "uploadCover",
        json!({"product_id": "MNG-00000001", "cover": {"data": "aGVsbG8gY292ZXI=", "mediaType": "image/png", "filename": "c.png"}, "caption": "front"}),
    );
    assert_eq!(
        (
            structured(&cover)["filename"].clone(),
            structured(&cover)["bytes"].clone(),
            structured(&cover)["caption"].clone()
        ),
        (json!("c.png"), json!(11), json!("front")),
        "{cover}"
    );
    let blob = call("putBlob", json!({"name": "b1", "body": {"data": "AAECAw=="}}));
    assert_eq!(structured(&blob)["bytes"], 4, "{blob}");
    // A form body.
    let form = call("echoForm", json!({"title": "ワンピース & co", "quantity": 3}));
    assert_eq!(structured(&form)["title"], "ワンピース & co", "{form}");
    // Query styles beyond the default, a header and a cookie parameter.
    let styled = call(
        "echo",
        json!({"segment": "a b/ä", "ids": [1, 2], "words": ["x", "y"], "codes": ["p", "q"],
               "filter": {"genre": "shonen"}, "tag": ["t1", "t2"], "x-note": "hello", "session": "s1"}),
    );
    assert_eq!(structured(&styled)["segment"], "a b/ä", "{styled}");
    assert_eq!(structured(&styled)["tag"], json!(["t1", "t2"]), "{styled}");
    // FastAPI's generated operationId for an operation that names none.
    let cancelled = call("cancel_order_orders__order_id__delete", json!({"order_id": "ORD-1"}));
    assert!(!is_error(&cancelled), "{cancelled}");
}
