//! `[audit]`: where the audit trail goes (one JSON line per `tools/call` decision) and how
//! much of it may wait for a slow sink. The behaviour is described in
//! `docs/quotas-and-audit.md`.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Where audit lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditSinkKind {
    /// No audit trail (nothing is formatted or queued).
    #[default]
    Off,
    /// Standard output, each line tagged `"log":"audit"` so a log router can send it apart.
    Stdout,
    /// Appended to `audit.file`.
    File,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    pub sink: AuditSinkKind,
    /// The file `sink = "file"` appends to (created if missing).
    pub file: Option<PathBuf>,
    /// Most bytes of audit lines waiting for the sink; lines beyond it are dropped and counted
    /// (`mcp_gateway_audit_lines_dropped_total`, and `dropped_before` in the next line written).
    pub queue_bytes: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { sink: AuditSinkKind::Off, file: None, queue_bytes: 4 * 1024 * 1024 }
    }
}

impl AuditConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        match (self.sink, &self.file) {
            (AuditSinkKind::File, None) => bail!("audit.sink = \"file\" needs audit.file"),
            (AuditSinkKind::File, Some(path)) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                if let Some(dir) = parent
                    && !dir.is_dir()
                {
                    bail!("audit.file {}: the directory does not exist", path.display());
                }
            }
            _ => {}
        }
        if self.queue_bytes < 1024 {
            bail!("audit.queue_bytes must be at least 1024");
        }
        Ok(())
    }
}
