//! A local implementation of the Lambda Invoke REST API
//! (`POST /2015-03-31/functions/{name}/invocations`) that runs the demo server as a
//! Lambda-style handler: the JSON-RPC request is the event, the JSON-RPC response the result.
//!
//! The function name chooses the behaviour, so tests and demos can produce every answer the
//! real service gives (names are matched by prefix `mcp-demo`):
//!
//! | function name            | answer                                                      |
//! |--------------------------|-------------------------------------------------------------|
//! | `mcp-demo`               | the JSON-RPC response                                        |
//! | `mcp-demo-proxy`         | an API Gateway proxy shape whose `body` is the response      |
//! | `mcp-demo-unhandled`     | 200 + `X-Amz-Function-Error: Unhandled` (runtime crash)      |
//! | `mcp-demo-handled`       | 200 + `X-Amz-Function-Error: Handled`                        |
//! | `mcp-demo-throttled`     | 429 `TooManyRequestsException` with `Retry-After: 1`         |
//! | `mcp-demo-slow-<ms>`     | the JSON-RPC response after `<ms>` milliseconds              |
//! | anything else            | 404 `ResourceNotFoundException`                              |

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::handler;

/// Counts invocations per function, so tests can see how often the gateway called, and keeps
/// what the last one carried besides its payload (client context, `X-Amzn-Trace-Id`, `_meta`).
#[derive(Debug, Default)]
pub struct Invocations {
    counts: std::sync::Mutex<HashMap<String, u64>>,
    total: AtomicU64,
    last: std::sync::Mutex<Last>,
}

#[derive(Debug, Default)]
struct Last {
    client_context: Option<String>,
    amzn_trace_id: Option<String>,
    event: Bytes,
}

impl Invocations {
    fn record(&self, name: &str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(name.to_string()).or_default() += 1;
        }
    }
}

/// The emulator's routes. `GET /_invocations` reports the counts as JSON, and under `last` the
/// last invocation's decoded client context, `X-Amzn-Trace-Id` and event `_meta`.
pub fn router() -> Router {
    Router::new()
        .route("/2015-03-31/functions/{name}/invocations", post(invoke))
        .route("/_invocations", get(report))
        .with_state(Arc::new(Invocations::default()))
}

async fn report(State(invocations): State<Arc<Invocations>>) -> Response {
    use base64::Engine;
    let counts = invocations.counts.lock().map(|c| c.clone()).unwrap_or_default();
    let last = match invocations.last.lock() {
        Ok(last) => json!({
            // The Invoke API's `X-Amz-Client-Context`: base64 of a JSON object.
            "client_context": last
                .client_context
                .as_deref()
                .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
                .and_then(|json| serde_json::from_slice::<Value>(&json).ok()),
            "x-amzn-trace-id": last.amzn_trace_id,
            "meta": serde_json::from_slice::<Value>(&last.event)
                .ok()
                .and_then(|event| event.pointer("/params/_meta").cloned()),
        }),
        Err(_) => Value::Null,
    };
    axum::Json(json!({"total": invocations.total.load(Ordering::Relaxed), "functions": counts, "last": last}))
        .into_response()
}

async fn invoke(
    State(invocations): State<Arc<Invocations>>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    invocations.record(&name);
    if let Ok(mut last) = invocations.last.lock() {
        let text = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        *last = Last {
            client_context: text("x-amz-client-context"),
            amzn_trace_id: text("x-amzn-trace-id"),
            event: body.clone(),
        };
    }
    let _qualifier = query.get("Qualifier");
    if headers
        .get("x-amz-invocation-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t != "RequestResponse")
    {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValueException",
            "only RequestResponse is emulated",
        );
    }
    let Some(behaviour) = name.strip_prefix("mcp-demo") else {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("Function not found: arn:aws:lambda:local:000000000000:function:{name}"),
        );
    };
    match behaviour {
        "" => ok(run(&body)),
        "-proxy" => ok(serde_json::to_vec(&json!({
            "statusCode": 200,
            "headers": {"content-type": "application/json"},
            "body": String::from_utf8_lossy(&run(&body)),
            "isBase64Encoded": false,
        }))
        .unwrap_or_default()),
        "-unhandled" => function_error(
            "Unhandled",
            "Runtime.ExitError",
            "RequestId: 1 Error: Runtime exited with error: signal: killed",
        ),
        "-handled" => function_error("Handled", "ValueError", "the handler raised"),
        "-throttled" => {
            let mut response =
                aws_error(StatusCode::TOO_MANY_REQUESTS, "TooManyRequestsException", "Rate exceeded");
            response.headers_mut().insert("retry-after", "1".parse().expect("static header"));
            response
        }
        slow if slow.starts_with("-slow-") => {
            let ms: u64 = slow["-slow-".len()..].parse().unwrap_or(1000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok(run(&body))
        }
        _ => aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("Function not found: {name}"),
        ),
    }
}

fn run(event: &[u8]) -> Vec<u8> {
    // A notification has no response; Lambda still returns a result, `null`.
    handler::handle_body(event)
        .map(|v| serde_json::to_vec(&v).unwrap_or_default())
        .unwrap_or_else(|| b"null".to_vec())
}

fn ok(payload: Vec<u8>) -> Response {
    (StatusCode::OK, [("content-type", "application/json"), ("x-amz-executed-version", "$LATEST")], payload)
        .into_response()
}

fn function_error(kind: &'static str, error_type: &str, message: &str) -> Response {
    let body = json!({"errorMessage": message, "errorType": error_type}).to_string();
    (StatusCode::OK, [("content-type", "application/json"), ("x-amz-function-error", kind)], body)
        .into_response()
}

fn aws_error(status: StatusCode, error_type: &'static str, message: &str) -> Response {
    let body = json!({"Type": "User", "message": message}).to_string();
    (status, [("content-type", "application/json"), ("x-amzn-errortype", error_type)], body).into_response()
}

/// Binds `addr` and serves the emulator in the background; returns the bound address.
pub async fn spawn(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(
            axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            router(),
        )
        .await
        {
            tracing::error!(error = %e, "lambda emulator stopped");
        }
    });
    Ok(bound)
}
