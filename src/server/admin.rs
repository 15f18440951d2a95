//! Operator endpoints, answered only to loopback peers (the sidecar's own task):
//! `GET /admin/breakers`, `POST /admin/breakers/{server}/open`, `POST /admin/breakers/{server}/close`.

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
    let report: BTreeMap<&str, Value> =
        gateway.upstreams.values().map(|u| (u.name.as_ref(), u.breaker.report())).collect();
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
    let Some(upstream) = gateway.upstreams.get(&server) else {
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
