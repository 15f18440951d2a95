//! `[admin]`: who may use the operator endpoints (`/admin/*`: breakers, connections, registry).
//!
//! A loopback peer proves nothing: a web page in a browser on the host, a DNS-rebound name
//! or a local reverse proxy all arrive from 127.0.0.1. So admin actions need more than
//! loopback: a bearer token (`token_file`, or `token` from the environment), and/or a listener
//! of their own (`listen`). With neither, the admin routes are off and answer 403 with a body
//! saying how to turn them on. See `docs/security-edge-and-registry.md`.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::lenient;

/// Shortest admin token accepted, in bytes (a token is a secret, not a password to remember).
pub const MIN_TOKEN_BYTES: usize = 16;

/// Access to `/admin/*`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSettings {
    /// Serve the admin routes on this address only (off unless set). Without a token it must
    /// be a loopback address, and its peers must be loopback.
    pub listen: Option<SocketAddr>,
    /// A file holding the admin bearer token (surrounding whitespace ignored). Requests to
    /// `/admin/*` then need `Authorization: Bearer <token>`.
    pub token_file: Option<PathBuf>,
    /// The token itself, for environments that inject secrets as variables
    /// (`MCP_GATEWAY_ADMIN__TOKEN`). Never printed by `check-config`.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub token: Option<String>,
    /// How many recent calls the console's record keeps (`GET /admin/calls`; 0 turns the
    /// record off). Each entry is a few hundred bytes, never arguments or results.
    pub recent_calls: usize,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self { listen: None, token_file: None, token: None, recent_calls: DEFAULT_RECENT_CALLS }
    }
}

/// `admin.recent_calls` unless set.
pub const DEFAULT_RECENT_CALLS: usize = 200;
/// Most calls the record may keep (a larger record is memory, not insight).
pub const MAX_RECENT_CALLS: usize = 10_000;

impl AdminSettings {
    /// The configured token, read from `token` or `token_file` (not both).
    pub fn load_token(&self) -> anyhow::Result<Option<String>> {
        let token = match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => bail!("admin: set token or token_file, not both"),
            (Some(token), None) => token.trim().to_string(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .with_context(|| format!("admin.token_file: reading {}", path.display()))?
                .trim()
                .to_string(),
            (None, None) => return Ok(None),
        };
        if token.len() < MIN_TOKEN_BYTES {
            bail!("admin token must be at least {MIN_TOKEN_BYTES} bytes");
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            bail!("admin token must be printable ASCII without spaces (it travels in a header)");
        }
        Ok(Some(token))
    }

    /// Checks what needs no file: a non-loopback admin listener needs a token.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(listen) = self.listen
            && !listen.ip().is_loopback()
            && self.token.is_none()
            && self.token_file.is_none()
        {
            bail!("admin.listen {listen} is not loopback: it needs admin.token_file (or admin.token)");
        }
        if self.recent_calls > MAX_RECENT_CALLS {
            bail!(
                "admin.recent_calls = {} is over {MAX_RECENT_CALLS} (the console's record of recent calls; 0 turns it off)",
                self.recent_calls
            );
        }
        Ok(())
    }

    /// `check-config`'s copy: the token itself replaced.
    pub fn redacted(&self) -> Self {
        Self { token: self.token.as_ref().map(|_| "<redacted>".into()), ..self.clone() }
    }
}
