//! Readiness as `/readyz` reports it: whether the registry has been loaded, and which
//! servers' tool refreshes keep failing (what kind of failure, since when). Separate from
//! the gateway's state: the refresher writes it, the probes and the capabilities read it.

use std::{
    collections::BTreeMap,
    sync::{
        RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

/// Readiness as `/readyz` reports it.
#[derive(Debug, Default)]
pub struct Readiness {
    loaded: AtomicBool,
    /// Servers whose last tool refresh failed, with the reason.
    failing: RwLock<BTreeMap<String, String>>,
    /// The same servers: what kind of failure, since when (the first failure in a row).
    refresh_failures: RwLock<BTreeMap<String, RefreshFailure>>,
}

/// A server whose `tools/list` keeps failing, as [`super::capabilities`] reads it.
#[derive(Debug, Clone)]
pub struct RefreshFailure {
    /// `unreachable` (connect/timeout/IO), `needs_auth` (401/403) or `tools_list_failing`.
    pub reason: &'static str,
    pub detail: String,
    pub since: std::time::SystemTime,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    pub fn mark_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    pub fn set_server(&self, server: &str, failure: Option<String>) {
        if let Ok(mut failing) = self.failing.write() {
            match failure {
                Some(reason) => failing.insert(server.to_string(), reason),
                None => failing.remove(server),
            };
        }
    }

    /// Records the outcome of a server's tool refresh (`None`: it succeeded).
    pub fn set_server_result(&self, server: &str, error: Option<&crate::upstream::UpstreamError>) {
        self.set_server(server, error.map(ToString::to_string));
        let Ok(mut failures) = self.refresh_failures.write() else { return };
        let Some(error) = error else {
            failures.remove(server);
            return;
        };
        let reason = error.refresh_failure_reason();
        let since = match failures.get(server) {
            Some(previous) if previous.reason == reason => previous.since,
            _ => std::time::SystemTime::now(),
        };
        failures.insert(server.to_string(), RefreshFailure { reason, detail: error.to_string(), since });
    }

    /// Servers whose tool refresh is failing, by name.
    pub fn refresh_failures(&self) -> BTreeMap<String, RefreshFailure> {
        self.refresh_failures.read().map(|f| f.clone()).unwrap_or_default()
    }

    pub fn failing(&self) -> BTreeMap<String, String> {
        self.failing.read().map(|f| f.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::upstream::UpstreamError;

    #[test]
    fn refresh_failures_are_classified_and_keep_their_first_time() {
        let readiness = Readiness::default();
        readiness.set_server_result("a", Some(&UpstreamError::Connect("refused".into())));
        let first = readiness.refresh_failures()["a"].clone();
        assert_eq!(first.reason, "unreachable");
        readiness.set_server_result("a", Some(&UpstreamError::Timeout(Duration::from_secs(1))));
        assert_eq!(readiness.refresh_failures()["a"].since, first.since, "same kind: since kept");
        readiness.set_server_result("a", Some(&UpstreamError::Unauthorized { status: 401 }));
        assert_eq!(readiness.refresh_failures()["a"].reason, "needs_auth");
        readiness.set_server_result("b", Some(&UpstreamError::Protocol("bad page".into())));
        assert_eq!(readiness.refresh_failures()["b"].reason, "tools_list_failing");
        assert_eq!(readiness.failing().len(), 2, "/readyz sees the same failures");
        readiness.set_server_result("a", None);
        assert!(!readiness.refresh_failures().contains_key("a"));
        assert!(!readiness.failing().contains_key("a"));
    }
}
