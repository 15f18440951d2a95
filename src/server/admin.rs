//! Operator endpoints, answered only to loopback peers (the sidecar's own task):
//! `GET /admin/breakers`, `POST /admin/breakers/{server}/open`, `POST /admin/breakers/{server}/close`,
//! `GET /admin/connections`, `GET /admin/registry`, `POST /admin/registry/refresh`,
//! `GET /admin/registry/drift`, `GET /admin/registry/collisions`, `GET /admin/registry/pins`,
//! `POST /admin/registry/approve`.

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use axum::{
    Json,
    extract::{ConnectInfo, Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::gateway::Gateway;

fn forbidden() -> Response {
    (StatusCode::FORBIDDEN, Json(json!({"error": "admin endpoints answer loopback peers only"})))
        .into_response()
}

pub async fn breakers(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let all = gateway.all_upstreams();
    let report: BTreeMap<&str, Value> = all.iter().map(|u| (u.name.as_ref(), u.breaker.report())).collect();
    Json(report).into_response()
}

/// `GET /admin/connections`: every persistent connection (WebSocket, SSE, stdio), its state
/// and history.
pub async fn connections(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let all = gateway.all_upstreams();
    let report: BTreeMap<&str, Value> =
        all.iter().filter_map(|u| Some((u.name.as_ref(), u.connection.as_ref()?.report()))).collect();
    Json(report).into_response()
}

pub async fn breaker_action(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((server, action)): Path<(String, String)>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let Some(upstream) = gateway.all_upstreams().into_iter().find(|u| *u.name == *server) else {
        return (StatusCode::NOT_FOUND, Json(json!({"error": format!("no server named {server:?}")})))
            .into_response();
    };
    match action.as_str() {
        "open" => upstream.breaker.force_open(),
        "close" => upstream.breaker.force_close(),
        _ => {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "action must be open or close"})))
                .into_response();
        }
    }
    tracing::warn!(server = %server, action = %action, "circuit breaker changed by an operator");
    Json(json!({"server": server, "breaker": upstream.breaker.report()})).into_response()
}

/// `GET /admin/registry`: every tool, where it comes from, its hashes and health.
pub async fn registry(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let registry = gateway.registry_entries.read().map(|e| e.clone()).unwrap_or_default();
    let tools: Vec<Value> = gateway
        .catalog()
        .snapshot()
        .tools()
        .iter()
        .map(|t| {
            let (tier, registered) = match &t.origin {
                Some(_) => ("dynamodb", registry.iter().find(|e| e.tool_name == *t.name)),
                None if gateway.upstreams.get(t.server.as_ref()).is_some_and(|u| !u.config.discover) => {
                    ("config", None)
                }
                None => ("discovered", None),
            };
            json!({
                "name": t.name.as_ref(),
                "server": t.server.as_ref(),
                "transport": t.transport.as_str(),
                "tier": tier,
                "schema_hash": t.schema_hash,
                "definition_hash": t.definition_hash,
                "status": registered.map_or("active", |e| e.status.as_str()),
                "healthy": registered.is_none_or(|e| e.healthy),
                "version": registered.map(|e| e.version),
                "updated_at": registered.map(|e| e.updated_at.as_str()),
                "breaker": gateway.upstreams.get(t.server.as_ref()).map(|u| u.breaker.state().name()),
            })
        })
        .collect();
    let tiers = gateway.registry.dynamic.as_ref().map(|d| d.report());
    Json(json!({"tools": tools, "tiers": tiers})).into_response()
}

/// `POST /admin/registry/refresh`: refresh now (answers at once; the refresh runs behind).
pub async fn registry_refresh(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    gateway.refresh_forced.notify_one();
    (StatusCode::ACCEPTED, Json(json!({"refresh": "scheduled"}))).into_response()
}

#[derive(serde::Deserialize)]
pub struct DriftQuery {
    server: Option<String>,
}

/// `GET /admin/registry/drift[?server=NAME]`.
pub async fn registry_drift(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    axum::extract::Query(query): axum::extract::Query<DriftQuery>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    Json(gateway.registry_drift(query.server.as_deref()).await).into_response()
}

/// `GET /admin/registry/collisions`: tool names servers offered and did not get as asked
/// (refused aliases of another server, names held or routed elsewhere, namespaced copies).
pub async fn registry_collisions(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let snapshot = gateway.catalog().snapshot();
    Json(json!({"collisions": snapshot.collisions()})).into_response()
}

/// `GET /admin/registry/pins`: definition pinning's state and the changes waiting for approval.
pub async fn registry_pins(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let report = match &gateway.pins {
        Some(pins) => json!({
            "enabled": true,
            "pin_file": gateway.config.catalogue.pin_file,
            "pinned": pins.pinned_count(),
            "pending": pins.pending(),
        }),
        None => json!({"enabled": false, "pending": []}),
    };
    Json(report).into_response()
}

/// What `POST /admin/registry/approve` takes: a tool (its server name or namespaced name),
/// optionally its server, or `all`.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    tool: Option<String>,
    server: Option<String>,
    #[serde(default)]
    all: bool,
}

/// `POST /admin/registry/approve`: approves pending definition changes; the catalogue is
/// rebuilt from the lists already known (no upstream is asked again).
pub async fn registry_approve(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: axum::body::Bytes,
) -> Response {
    use crate::registry::pins::Approval;
    if !peer.ip().is_loopback() {
        return forbidden();
    }
    let request: ApproveRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error =
                format!("body must be {{\"tool\": NAME, \"server\"?: NAME}} or {{\"all\": true}}: {e}");
            return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
        }
    };
    if request.tool.is_none() && !request.all {
        let error = "name a tool (\"tool\") or approve everything (\"all\": true)";
        return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
    }
    let Some(pins) = &gateway.pins else {
        let error = "definition pinning is off (catalogue.pin_tool_definitions = false): nothing to approve";
        return (StatusCode::CONFLICT, Json(json!({"error": error}))).into_response();
    };
    match pins.approve(request.tool.as_deref(), request.server.as_deref(), request.all) {
        Approval::Approved(approved) => {
            gateway.metrics.tool_definitions_pending.set(pins.pending_count() as i64);
            gateway.rebuild_now.notify_one();
            Json(json!({"approved": approved, "pending": pins.pending()})).into_response()
        }
        Approval::NothingPending => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no pending definition change matches", "pending": pins.pending()})),
        )
            .into_response(),
        Approval::Ambiguous(servers) => (
            StatusCode::CONFLICT,
            Json(json!({"error": "several servers have a pending change of this tool: name the server", "servers": servers})),
        )
            .into_response(),
    }
}
