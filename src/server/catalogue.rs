//! `GET /tools?format=…` (the catalogue in a model API's tool shape, see [`crate::export`])
//! and `GET /capabilities` (what is unavailable or degraded, see
//! [`crate::gateway::capabilities`]). Both read only the catalogue and health state: no
//! upstream is called, so they answer at once even while every server is down.
//!
//! Query of `/tools`: `format` (`mcp` by default; `bedrock`, `anthropic`, `openai`,
//! `openai-responses`, `gemini`), `strict` (OpenAI strict mode, `false` by default) and
//! `hide_unavailable` (defaults to `hide_unavailable_tools`). A bad value is a 400 naming the
//! accepted ones. Like `POST /mcp` it is served to any peer the listener accepts: it shows
//! nothing `tools/list` does not. With `[auth]` both establish the caller as `POST /mcp`
//! does (401 without a valid identity), and with `[policy]` both show only the tools that
//! caller may call. Both take `endpoint=NAME`: the catalogue as `/mcp/NAME` serves it
//! ([`super::endpoint`]; an unknown name is 404).

use std::{collections::HashMap, net::SocketAddr, sync::Arc};

use axum::{
    Extension, Json,
    extract::{ConnectInfo, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    export::{self, Format, Options},
    gateway::{Gateway, capabilities},
};

/// The catalogue exported in `format`, the unavailable tools left out when `hide`; the report
/// (`gateway`) also names what was left out and, when something is degraded, the summary.
/// `view`: the tools the caller may see under a tool policy (`None`: every tool).
pub fn export_catalogue(
    gateway: &Gateway,
    view: Option<&crate::policy::ToolView>,
    format: Format,
    options: Options,
    hide: bool,
) -> Value {
    let health = capabilities::server_health(gateway);
    let summary = capabilities::summarize(gateway, &health, view);
    let mut left_out = Vec::new();
    let snapshot = gateway.catalog().snapshot();
    // What `tools/list` holds: in search mode the meta-tools and the pinned tools.
    let listing = snapshot.listing();
    let tools: Vec<Value> = listing
        .meta()
        .iter()
        .cloned()
        .chain(
            snapshot
                .tools()
                .iter()
                .filter(|t| listing.lists(t))
                .filter(|t| view.is_none_or(|v| v.shows(&t.name)))
                .filter(|t| {
                    let hidden = hide && summary.unavailable.contains(t.name.as_ref());
                    if hidden {
                        let reason = health.get(t.server.as_ref()).map(|h| h.reason);
                        left_out.push(
                            json!({"name": t.name.as_ref(), "server": t.server.as_ref(), "reason": reason}),
                        );
                    }
                    !hidden
                })
                .map(|t| view.map_or_else(|| t.definition.value(), |v| v.definition(t))),
        )
        .collect();
    let mut body = export::export(format, &tools, options);
    body["gateway"]["left_out"] = Value::Array(left_out);
    if summary.degraded {
        body["gateway"]["capabilities"] = summary.report;
    }
    body
}

fn bad_request(message: String) -> Response {
    let body = json!({"error": message, "formats": Format::names()});
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

fn flag(query: &HashMap<String, String>, key: &str, default: bool) -> Result<bool, String> {
    match query.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v.is_empty() || v == "true" || v == "1" => Ok(true),
        Some(v) if v == "false" || v == "0" => Ok(false),
        Some(v) => Err(format!("{key} must be true or false, not {v:?}")),
    }
}

/// `GET /tools`.
pub async fn tools(
    State(gateway): State<Arc<Gateway>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match super::caller::establish(&gateway, &headers, peer.map(|p| p.0.0)).await {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    if let Some(unknown) =
        query.keys().find(|k| !["format", "strict", "hide_unavailable", "endpoint"].contains(&k.as_str()))
    {
        let shown: String = unknown.chars().take(64).collect();
        return bad_request(format!(
            "unknown parameter {shown:?} (format, strict, hide_unavailable, endpoint)"
        ));
    }
    let caller = match super::endpoint::from_query(&gateway, query.get("endpoint")) {
        Ok(endpoint) => super::endpoint::through(caller, endpoint),
        Err(refused) => return *refused,
    };
    let format = match query.get("format") {
        None => Format::Mcp,
        Some(text) => match Format::parse(text) {
            Some(format) => format,
            None => {
                let shown: String = text.chars().take(64).collect();
                return bad_request(format!("unknown format {shown:?}"));
            }
        },
    };
    let strict = match flag(&query, "strict", false) {
        Ok(strict) => strict,
        Err(message) => return bad_request(message),
    };
    if strict && !matches!(format, Format::OpenAi | Format::OpenAiResponses) {
        return bad_request("strict applies to the openai and openai-responses formats only".into());
    }
    let hide = match flag(&query, "hide_unavailable", gateway.config().hide_unavailable_tools) {
        Ok(hide) => hide,
        Err(message) => return bad_request(message),
    };
    let view = gateway.tool_view(&caller);
    Json(export_catalogue(&gateway, view.as_deref(), format, Options { strict }, hide)).into_response()
}

/// `GET /capabilities` (`?endpoint=NAME`: as that endpoint's callers see it).
pub async fn capabilities(
    State(gateway): State<Arc<Gateway>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match super::caller::establish(&gateway, &headers, peer.map(|p| p.0.0)).await {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    if let Some(unknown) = query.keys().find(|k| k.as_str() != "endpoint") {
        let shown: String = unknown.chars().take(64).collect();
        return bad_request(format!("unknown parameter {shown:?} (endpoint)"));
    }
    let caller = match super::endpoint::from_query(&gateway, query.get("endpoint")) {
        Ok(endpoint) => super::endpoint::through(caller, endpoint),
        Err(refused) => return *refused,
    };
    let view = gateway.tool_view(&caller);
    Json(capabilities::report(&gateway, view.as_deref())).into_response()
}
