//! How the process stops: the signals that start a drain, and the upstream connections and
//! sessions closed once the gateway is done with them.

use std::{sync::Arc, time::Duration};

use mcp_gateway::gateway::Gateway;

pub async fn close_sessions(gateway: &Arc<Gateway>) {
    let upstreams = gateway.all_upstreams();
    // Persistent connections stop together (stdio children: SIGTERM, then kill after the
    // grace), so shutdown leaves no child process behind.
    let grace = Duration::from_millis(gateway.config.defaults.stdio_stop_grace_ms) + Duration::from_secs(2);
    let persistent = upstreams.iter().filter_map(|u| u.connection.as_ref()).map(|c| c.shutdown(grace));
    futures_util::future::join_all(persistent).await;
    for upstream in &upstreams {
        if let Some(http) = &upstream.http {
            http.close().await;
        }
    }
    // The dedicated upstream sessions of back-channel callers (gateway::sessions).
    gateway.sessions.close_all().await;
}

/// Registers the SIGTERM (ECS stop) and SIGINT (Ctrl-C) handlers at once and returns a
/// future that resolves when either arrives. Called before the startup line is logged, so a
/// signal sent right after it drains the gateway instead of killing it with the default action.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        async fn recv(signal: Option<Signal>) {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            tokio::select! {
                _ = recv(term) => {}
                _ = recv(interrupt) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
