//! `POST /admin/playground`: the console calls a tool as the operator.
//!
//! Why through [`Gateway::call_tool`]: the playground must be no back door. The call passes
//! the same door as any caller's (catalogue control, policy, argument validation and fixed
//! arguments, quotas), is counted in the metrics and the console's record, and leaves an audit
//! line. The caller the policy and the audit line see is the subject `admin`
//! ([`PLAYGROUND_SUBJECT`]) with no claims, scopes or groups: a policy grants the console
//! what it grants a caller named `admin`, nothing more. The call owns nothing (no task or
//! held question is left for a later request to pick up). The admin guard is in front.
//!
//! With `"endpoint": NAME` the call comes through that endpoint (`/mcp/NAME`): its selection
//! and renames decide as for its callers (a tool outside it is `unknown_tool`).
//!
//! Answer: `200 {"result": <the tool result>}` or `200 {"error": {"code", "message",
//! "data"}}` (the JSON-RPC error the gateway answers a session-era caller); `400` for a body
//! that is not `{"tool": NAME, "arguments"?: {...}, "endpoint"?: NAME}` or names no endpoint.

use std::sync::{Arc, atomic::AtomicBool};

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

use crate::{
    gateway::{Gateway, call::CallContext},
    identity::Caller,
    ownership::Owner,
};

/// The subject of every playground call.
pub const PLAYGROUND_SUBJECT: &str = "admin";

/// What the playground takes.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaygroundCall {
    tool: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    /// Through `/mcp/NAME` (absent: the plain `/mcp`).
    #[serde(default)]
    endpoint: Option<String>,
}

/// `POST /admin/playground`.
pub async fn call(State(gateway): State<Arc<Gateway>>, body: Bytes) -> Response {
    let request: PlaygroundCall = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error =
                format!("body must be {{\"tool\": NAME, \"arguments\": {{...}}, \"endpoint\"?: NAME}}: {e}");
            return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
        }
    };
    let endpoint = match request.endpoint.as_deref() {
        None => None,
        Some(name) => match gateway.settings().endpoints().known(name) {
            Some(known) => Some(known),
            None => {
                let error = format!(
                    "no endpoint named {:?} is configured",
                    name.chars().take(64).collect::<String>()
                );
                return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
            }
        },
    };
    let caller = Caller { subject: Some(PLAYGROUND_SUBJECT.into()), endpoint, ..Caller::default() };
    let request_id: Arc<str> = format!("console-{:016x}", fastrand::u64(..)).into();
    let ctx = CallContext {
        request_id,
        jsonrpc_id: json!("playground"),
        deadline: None,
        notifications: Default::default(),
        cancelled: Arc::new(AtomicBool::new(false)),
        caller: Arc::new(caller),
        session: None,
        owner: Owner::Nobody,
        // The playground tries tools as a model would: never a tool for an MCP App only.
        apps: false,
    };
    let params = json!({"name": request.tool, "arguments": request.arguments});
    match Box::pin(gateway.call_tool(Some(params), &ctx)).await {
        // The result as the server sent it (not parsed again): `{"result": <raw>}`.
        Ok(released) => {
            let raw = released.into_inner();
            let body = format!("{{\"result\":{}}}", raw.get());
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(err) => Json(json!({"error": err.to_error_object_for(false)})).into_response(),
    }
}
