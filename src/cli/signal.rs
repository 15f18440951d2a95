//! The signals that stop the process: SIGTERM (an ECS stop) and SIGINT (Ctrl-C) start the
//! drain of `serve` and end `demo-server`.

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
