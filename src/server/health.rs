//! Liveness, readiness and the Prometheus endpoint.

use std::sync::Arc;

use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::gateway::Gateway;

/// Alive: the process answers HTTP.
pub async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// Ready: 200 once the registry is loaded, 503 before, with a JSON reason either way.
pub async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let (ready, report) = gateway.readiness_report();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(report)).into_response()
}

pub async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], gateway.metrics.render())
        .into_response()
}
