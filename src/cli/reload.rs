//! What asks `serve` to reload its configuration: `SIGHUP`, and with `--watch` a change of the
//! file. The reload itself is the gateway's ([`mcp_gateway::gateway::reload`]).
//!
//! The watcher compares the file's bytes every [`WATCH_EVERY`] and reads a change once it has
//! stopped changing (two reads [`SETTLE`] apart agree), so an editor writing the file in
//! pieces is not reloaded half-written. Replacing the file atomically (write, then rename —
//! as Kubernetes ConfigMap volumes and most deploy tools do) is still the safe way.

use std::{path::PathBuf, sync::Arc, time::Duration};

use mcp_gateway::{
    gateway::{Gateway, reload::Trigger},
    supervise::{self, Loop},
};

/// How often `--watch` reads the file.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long a changed file must stay the same before it is read as the new configuration.
const SETTLE: Duration = Duration::from_millis(250);

/// Starts the `SIGHUP` handler and, when `watch` names the file, its watcher.
pub fn start(gateway: &Arc<Gateway>, watch: Option<PathBuf>) {
    start_signal(gateway);
    if let Some(path) = watch {
        let gateway = Arc::downgrade(gateway);
        // Supervised: a restarted watcher starts from the file as it is then.
        supervise::spawn(Loop::ConfigWatch, move || watch_file(gateway.clone(), path.clone()));
    }
}

#[cfg(unix)]
fn start_signal(gateway: &Arc<Gateway>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            tracing::error!(error = %e, "SIGHUP cannot be handled: the configuration reloads only through the admin API or --watch");
            return;
        }
    };
    let gateway = Arc::downgrade(gateway);
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(gateway) = gateway.upgrade() else { return };
            gateway.reload(Trigger::Signal).await;
        }
    });
}

#[cfg(not(unix))]
fn start_signal(_gateway: &Arc<Gateway>) {}

/// Reloads when the file's contents change (and have settled).
async fn watch_file(gateway: std::sync::Weak<Gateway>, path: PathBuf) {
    let read = |path: &PathBuf| std::fs::read(path).ok();
    let mut seen = read(&path);
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = read(&path);
        if now == seen {
            continue;
        }
        tokio::time::sleep(SETTLE).await;
        let settled = read(&path);
        if settled != now {
            continue;
        }
        seen = settled;
        let Some(gateway) = gateway.upgrade() else { return };
        if seen.is_none() {
            tracing::warn!(file = %path.display(), "the configuration file cannot be read; the running configuration stays");
            continue;
        }
        gateway.reload(Trigger::Watch).await;
    }
}
