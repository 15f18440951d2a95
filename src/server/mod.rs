//! Inbound HTTP: `POST /mcp` (JSON-RPC), `GET /mcp` (list changes, [`listen`]), the same at
//! `/mcp/NAME` for each endpoint ([`endpoint`]), `GET /metrics`, `GET /healthz`, `GET /readyz`,
//! `GET /tools` (exports), `GET /capabilities`, `/admin/*` (behind [`admin::guard`]), the
//! optional metrics-only listener (`metrics_listen`) and the optional admin listener
//! (`admin.listen`). Every request on the main and admin listeners first passes
//! [`edge::EdgeGuard`] (`Host`/`Origin`).

pub mod admin;
pub mod app_frame;
pub mod approvals;
pub mod body;
pub mod caller;
pub mod catalogue;
pub mod console;
pub mod dispatch;
pub mod edge;
pub mod endpoint;
pub mod health;
pub mod listen;
pub mod listener;
pub mod mcp;
pub mod playground;
pub mod probe;
pub mod sessions;
pub mod stream;

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use tokio::net::TcpListener;

use crate::gateway::Gateway;

/// All routes of the main listener; `/admin/*` answer as `admin` says.
pub fn router(gateway: Arc<Gateway>, admin: &admin::AdminAccess) -> Router {
    Router::new()
        .route("/mcp", post(mcp::post).get(get_mcp).delete(mcp::delete))
        .route("/metrics", get(main_listener_metrics(&gateway.config(), admin)))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/tools", get(catalogue::tools))
        .route("/capabilities", get(catalogue::capabilities))
        .route(crate::identity::metadata::PATH, get(caller::protected_resource_metadata))
        .route("/.well-known/oauth-protected-resource/mcp", get(caller::protected_resource_metadata))
        .merge(approvals::page_routes())
        .merge(admin::routes(gateway.clone(), admin, false))
        .fallback(not_found)
        .with_state(gateway)
}

/// `GET /metrics` on the main listener, as `metrics.main_listener` says: served (`open`),
/// 404 with a body saying where metrics are (`closed`), or behind the admin token (`admin`,
/// 401 without it).
fn main_listener_metrics(
    config: &crate::config::Config,
    admin: &admin::AdminAccess,
) -> axum::routing::MethodRouter<Arc<Gateway>> {
    use crate::config::MainListenerMetrics;
    let mode = config.metrics.main_listener(&config.auth);
    let elsewhere = match config.metrics_listen {
        Some(addr) => serde_json::json!(format!("GET http://{addr}/metrics (metrics_listen)")),
        None => serde_json::Value::Null,
    };
    let admin = admin.clone();
    get(move |state: axum::extract::State<Arc<Gateway>>, headers: axum::http::HeaderMap| {
        let (admin, elsewhere) = (admin.clone(), elsewhere.clone());
        async move {
            match mode {
                MainListenerMetrics::Open => health::metrics(state).await,
                MainListenerMetrics::Admin if admin.bearer_matches(&headers) => health::metrics(state).await,
                MainListenerMetrics::Admin => admin::unauthorized(
                    "metrics on this listener need Authorization: Bearer <admin token> (metrics.main_listener = \"admin\")",
                ),
                MainListenerMetrics::Closed => {
                    let body = serde_json::json!({
                        "error": "metrics are not served on this listener (metrics.main_listener = \"closed\", the default with [auth])",
                        "metrics": elsewhere,
                        "hint": "scrape metrics_listen, or set metrics.main_listener = \"admin\" and send the admin token",
                        "docs": "docs/observability.md",
                    });
                    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
                }
            }
        }
    })
}

/// The metrics listener's routes: `GET /metrics` and nothing else. It is meant to be reachable
/// by a scraper outside the task, so it must expose no tool, admin or registry endpoint.
pub fn metrics_router(gateway: Arc<Gateway>) -> Router {
    async fn metrics_only() -> Response {
        let body = serde_json::json!({"error": "not found", "endpoints": ["GET /metrics"]});
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }
    Router::new()
        .route("/metrics", get(health::metrics).fallback(metrics_only))
        .fallback(metrics_only)
        .with_state(gateway)
}

/// The admin listener (`admin.listen`): the admin routes and nothing else, behind the same
/// `Host`/`Origin` checks and connection bounds as the main listener.
pub async fn serve_admin(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    admin: admin::AdminAccess,
) -> std::io::Result<()> {
    async fn admin_only() -> Response {
        let body = serde_json::json!({"error": "not found", "endpoints": ["/admin/..."]});
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }
    let loopback = listener.local_addr()?.ip().is_loopback();
    let routes = Router::new()
        .merge(admin::routes(gateway.clone(), &admin, true))
        .fallback(admin_only)
        .with_state(gateway.clone());
    let limits = listener::ConnectionLimits::from_config(&gateway.config().inbound);
    let over_cap = gateway.connections_over_cap_counter();
    let (_never_stopped, stop) = tokio::sync::watch::channel(false);
    let service = move |peer| -> listener::Service {
        let others = routed(routes.clone(), peer);
        let gateway = gateway.clone();
        Box::new(move |request: axum::extract::Request| -> listener::Answer {
            match edge::refusal(&gateway, loopback, request.headers()) {
                Some(refused) => Box::pin(std::future::ready(refused)),
                None => others(request),
            }
        })
    };
    listener::run(listener, service, limits, Some(over_cap), stop).await
}

/// Serves [`metrics_router`] on `listener` until the process exits, with the same
/// connection bounds as the MCP listener (`[inbound]`).
pub async fn serve_metrics(listener: TcpListener, gateway: Arc<Gateway>) -> std::io::Result<()> {
    let routes = metrics_router(gateway.clone());
    let limits = listener::ConnectionLimits::from_config(&gateway.config().inbound);
    let over_cap = gateway.connections_over_cap_counter();
    let (_never_stopped, stop) = tokio::sync::watch::channel(false);
    let service = move |peer| routed(routes.clone(), peer);
    listener::run(listener, service, limits, Some(over_cap), stop).await
}

/// A connection's service that sends everything through `routes`.
fn routed(routes: Router, peer: std::net::SocketAddr) -> listener::Service {
    Box::new(move |mut request: axum::extract::Request| -> listener::Answer {
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        let routes = routes.clone();
        Box::pin(async move {
            match tower::ServiceExt::oneshot(routes, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        })
    })
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({"error": "not found", "endpoints": ["/mcp", "/metrics", "/healthz", "/readyz", "/tools", "/capabilities"]})),
    )
        .into_response()
}

/// One connection's service: `POST /mcp`, nearly every request a sidecar serves, goes straight
/// to its handler; everything else through the [`router`], with the peer's address for the
/// handlers that read it. It sits behind [`edge::EdgeGuard`], so both paths are checked. The router's matching, its per-request extensions and
/// boxed handler cost more than the rest of the HTTP edge of a call.
fn mcp_first(
    gateway: Arc<Gateway>,
    routes: Router,
    peer: std::net::SocketAddr,
    loopback_listener: bool,
) -> listener::Service {
    let others = routed(routes, peer);
    Box::new(move |mut request: axum::extract::Request| -> listener::Answer {
        if let Some(refused) = edge::refusal(&gateway, loopback_listener, request.headers()) {
            return Box::pin(std::future::ready(refused));
        }
        // `/mcp/NAME` is served as `/mcp` for the endpoint NAME (recorded on the request).
        if let Err(refused) = endpoint::route(&gateway, &mut request) {
            return Box::pin(std::future::ready(*refused));
        }
        if request.method() == axum::http::Method::POST && request.uri().path() == "/mcp" {
            let gateway = gateway.clone();
            return Box::pin(async move { mcp::post_from(gateway, Some(peer), request).await });
        }
        others(request)
    })
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish
/// (up to `grace`). Connections are bounded as [`listener`] says (`[inbound]`).
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    admin: admin::AdminAccess,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let routes = router(gateway.clone(), &admin);
    let app_gateway = gateway.clone();
    let loopback = listener.local_addr()?.ip().is_loopback();
    let service = move |peer| mcp_first(app_gateway.clone(), routes.clone(), peer, loopback);
    let limits = listener::ConnectionLimits::from_config(&gateway.config().inbound);
    let over_cap = gateway.connections_over_cap_counter();
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let server = listener::run(listener, service, limits, Some(over_cap), stop_rx.clone());
    tokio::pin!(server);
    let mut stop = stop_rx;
    tokio::select! {
        result = &mut server => return result,
        _ = stop.wait_for(|stopping| *stopping) => {}
    }
    // Change-notification streams never end by themselves: they end now, gracefully.
    let streams = gateway.listeners().close_all();
    tracing::info!(
        in_flight = gateway.calls_in_flight(),
        streams,
        grace_secs = grace.as_secs(),
        "shutting down: draining in-flight requests"
    );
    let drained = tokio::time::timeout(grace, &mut server).await;
    // The last calls' log lines are written after their answers: let them out.
    crate::telemetry::after_answer::drain(10_000).await;
    match drained {
        Ok(result) => {
            tracing::info!("drained; bye");
            result
        }
        Err(_) => {
            tracing::warn!(
                in_flight = gateway.calls_in_flight(),
                "grace period over; exiting with requests in flight"
            );
            Ok(())
        }
    }
}

/// `GET /mcp`: the list-change stream ([`listen::get`]) while the gateway follows list
/// changes, else 405 with `Allow: POST` ([`mcp::not_allowed`]).
pub async fn get_mcp(
    axum::extract::State(gateway): axum::extract::State<Arc<Gateway>>,
    request: axum::extract::Request,
) -> Response {
    if !gateway.lists_changes() {
        return mcp::not_allowed().await;
    }
    listen::get(axum::extract::State(gateway), request).await
}
