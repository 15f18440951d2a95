//! `[metrics]`: whether `GET /metrics` is served on the MCP listener.
//!
//! The Prometheus text names every tool, including those a policy hides from a caller, and
//! every server: once callers are identified (`[auth]`), it is not for everyone who can reach
//! `/mcp`. Without `[auth]` it stays open (the quick start scrapes `/metrics` on the one
//! listener); with `[auth]` it is closed unless configured, and `metrics_listen` (a listener
//! of its own, for the scraper) or the admin token serves it. See `docs/observability.md`.

use serde::{Deserialize, Serialize};

use super::{AuthConfig, AuthMode};

/// Who may read `GET /metrics` on the MCP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MainListenerMetrics {
    /// Anyone who reaches the listener (the default without `[auth]`).
    Open,
    /// Nobody: 404 with a body naming `metrics_listen` (the default with `[auth]`).
    Closed,
    /// Requests with `Authorization: Bearer <admin token>` (`admin.token[_file]`); others 401.
    Admin,
}

impl MainListenerMetrics {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Admin => "admin",
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    /// `open` | `closed` | `admin`; absent: `open` without `[auth]`, `closed` with it
    /// ([`MetricsSettings::main_listener`]).
    pub main_listener: Option<MainListenerMetrics>,
}

impl MetricsSettings {
    /// The setting in force: the configured one, else the default for `auth`.
    pub fn main_listener(&self, auth: &AuthConfig) -> MainListenerMetrics {
        self.main_listener.unwrap_or(match auth.mode {
            AuthMode::None => MainListenerMetrics::Open,
            AuthMode::Jwt | AuthMode::Header => MainListenerMetrics::Closed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_without_auth_closed_with_it_unless_configured() {
        let mut auth = AuthConfig::default();
        let unset = MetricsSettings::default();
        assert_eq!(unset.main_listener(&auth), MainListenerMetrics::Open);
        auth.mode = AuthMode::Header;
        assert_eq!(unset.main_listener(&auth), MainListenerMetrics::Closed);
        let admin = MetricsSettings { main_listener: Some(MainListenerMetrics::Admin) };
        assert_eq!(admin.main_listener(&auth), MainListenerMetrics::Admin);
        let open = MetricsSettings { main_listener: Some(MainListenerMetrics::Open) };
        assert_eq!(open.main_listener(&auth), MainListenerMetrics::Open);
    }
}
