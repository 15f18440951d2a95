//! Inbound HTTP: `POST /mcp` (JSON-RPC), `GET /metrics`, `GET /healthz`, `GET /readyz`,
//! `GET /tools` (exports), `GET /capabilities`, `/admin/*` (behind [`admin::guard`]), the
//! optional metrics-only listener (`metrics_listen`) and the optional admin listener
//! (`admin.listen`). Every request on the main and admin listeners first passes
//! [`edge::EdgeGuard`] (`Host`/`Origin`).

pub mod admin;
pub mod body;
pub mod catalogue;
pub mod dispatch;
pub mod edge;
pub mod health;
pub mod mcp;
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
        .route("/mcp", post(mcp::post).get(mcp::not_allowed).delete(mcp::delete))
        .route("/metrics", get(health::metrics))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/tools", get(catalogue::tools))
        .route("/capabilities", get(catalogue::capabilities))
        .merge(admin::routes(gateway.clone(), admin, false))
        .fallback(not_found)
        .with_state(gateway)
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
/// `Host`/`Origin` checks as the main listener.
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
    let edge_gateway = gateway.clone();
    let routes = Router::new()
        .merge(admin::routes(gateway.clone(), &admin, true))
        .fallback(admin_only)
        .with_state(gateway)
        .layer(tower::layer::layer_fn(move |inner| {
            edge::EdgeGuard::new(edge_gateway.clone(), loopback, inner)
        }));
    axum::serve(listener, routes.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
}

/// Serves [`metrics_router`] on `listener` until the process exits.
pub async fn serve_metrics(listener: TcpListener, gateway: Arc<Gateway>) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(gateway)).await
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
#[derive(Clone)]
struct McpFirst {
    gateway: Arc<Gateway>,
    routes: Router,
    peer: std::net::SocketAddr,
}

impl tower::Service<axum::extract::Request> for McpFirst {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>,
    >;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: axum::extract::Request) -> Self::Future {
        if request.method() == axum::http::Method::POST && request.uri().path() == "/mcp" {
            let gateway = self.gateway.clone();
            let peer = Some(self.peer);
            return Box::pin(async move { Ok(mcp::post_from(gateway, peer, request).await) });
        }
        request.extensions_mut().insert(axum::extract::ConnectInfo(self.peer));
        let routes = self.routes.clone();
        Box::pin(tower::ServiceExt::oneshot(routes, request))
    }
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight requests finish
/// (up to `grace`).
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
    let app = tower::service_fn(move |incoming: axum::serve::IncomingStream<'_, _>| {
        let peer: std::net::SocketAddr = *incoming.remote_addr();
        let service = McpFirst { gateway: app_gateway.clone(), routes: routes.clone(), peer };
        let guarded = edge::EdgeGuard::new(app_gateway.clone(), loopback, service);
        std::future::ready(Ok::<_, std::convert::Infallible>(guarded))
    });
    let server = axum::serve(
        axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        app,
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    })
    .into_future();
    tokio::pin!(server);
    let mut stop = stop_rx;
    tokio::select! {
        result = &mut server => return result,
        _ = stop.wait_for(|stopping| *stopping) => {}
    }
    tracing::info!(
        in_flight = gateway.metrics.in_flight.get(),
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
                in_flight = gateway.metrics.in_flight.get(),
                "grace period over; exiting with requests in flight"
            );
            Ok(())
        }
    }
}
