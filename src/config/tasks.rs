//! `[tasks]`: the bounds of MCP tasks relayed through the gateway (task-augmented `tools/call`
//! and the `tasks/*` methods, see `docs/protocol.md#tasks`). The gateway remembers which server
//! and which caller each task belongs to; these keys bound that table, how long an entry may
//! live, and how long a `tasks/result` may wait for its task.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Task relay settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TasksConfig {
    /// Most tasks the gateway routes at once (all callers together). A task-augmented call
    /// made while the table is full is refused (`overloaded`) before it reaches the server.
    pub max_tasks: usize,
    /// Longest an entry is kept, in milliseconds: the task's own `ttl` when it is shorter, this
    /// when the server gives none (unlimited) or a longer one.
    pub max_ttl_ms: u64,
    /// Longest a `tasks/result` waits for its task to finish, in milliseconds, when the caller
    /// sets no deadline of its own (`X-Request-Timeout-Ms`, `_meta["io.mcp-gateway/timeoutMs"]`).
    /// It replaces the server's `deadline_ms` and `timeout_ms` for that request only.
    pub result_timeout_ms: u64,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self { max_tasks: 1024, max_ttl_ms: 3_600_000, result_timeout_ms: 300_000 }
    }
}

impl TasksConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.max_tasks == 0 {
            bail!("tasks.max_tasks must be positive");
        }
        if self.max_ttl_ms < 1_000 {
            bail!("tasks.max_ttl_ms must be at least 1000");
        }
        if self.result_timeout_ms < 100 {
            bail!("tasks.result_timeout_ms must be at least 100");
        }
        Ok(())
    }

    pub fn max_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.max_ttl_ms)
    }

    pub fn result_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.result_timeout_ms)
    }
}
