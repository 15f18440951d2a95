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

/// Ready: 200 once the registry is loaded **and** the catalogue holds at least
/// `ready_min_tools` tools (default 1), else 503; a JSON reason either way. A gateway whose
/// every upstream failed at start has nothing to serve, so it is not ready; it becomes ready
/// by itself when a refresh brings tools in. A server whose breaker is open still counts: its
/// tools come back within seconds, and readiness must not flap with every breaker. The same
/// goes for a persistent connection that is `connecting` or `reconnecting`; one that is
/// `failed`, `needs_auth` or `disabled` will not be back within seconds, so its tools are not
/// counted (reported as `tools_unreachable`). A background loop that keeps dying
/// ([`crate::supervise`]) makes it not ready, named under `background_loops`.
pub async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let (loaded, mut report) = gateway.readiness_report();
    let unreachable = gateway.unreachable_servers();
    let snapshot = gateway.catalog().snapshot();
    let tools = if unreachable.is_empty() {
        snapshot.len()
    } else {
        let down = snapshot.tools().iter().filter(|t| unreachable.contains(&t.server)).count();
        report["tools_unreachable"] = json!(down);
        snapshot.len() - down
    };
    report["tools"] = json!(tools);
    let minimum = gateway.config().ready_min_tools;
    let dying = crate::supervise::global().dying();
    let ready = loaded && tools >= minimum && dying.is_empty();
    report["ready"] = json!(ready);
    report["ready_min_tools"] = json!(minimum);
    if loaded && tools < minimum {
        report["reason"] = json!(format!(
            "{tools} tool(s) can be served, {minimum} required (ready_min_tools): no upstream has answered tools/list with tools yet"
        ));
    }
    if !dying.is_empty() {
        let names: Vec<&str> = dying.iter().map(|(which, _)| which.name()).collect();
        report["background_loops"] =
            dying.iter().map(|(which, restarts)| (which.name().to_string(), json!(restarts))).collect();
        report["reason"] = json!(format!(
            "background loop(s) {} keep dying ({} or more restarts within {} s)",
            names.join(", "),
            crate::supervise::DYING_RESTARTS,
            crate::supervise::DYING_WINDOW.as_secs()
        ));
    }
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(report)).into_response()
}

/// The Prometheus text, with a zero series for every known tool and server (see
/// [`crate::telemetry::metrics`]).
pub async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], gateway.render_metrics())
        .into_response()
}
