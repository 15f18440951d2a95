//! `[quotas]`: how many calls a caller may make, and how many it may have in flight, per tool
//! or per server. Quotas are shared by the fleet through `redis_url` (one atomic script per
//! decision) and decided by each instance alone while Redis is away or when none is configured.
//! The behaviour is described in `docs/quotas-and-audit.md`.

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::lenient;

/// Quota rules and how they reach Redis.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuotasConfig {
    /// The rules, checked in order; a call must pass every rule that applies to it.
    pub rules: Vec<QuotaRule>,
    /// Longest a quota decision may wait for Redis, in milliseconds; past it the call is
    /// decided locally (and counted as such).
    pub redis_timeout_ms: u64,
    /// After a Redis failure, decisions stay local this long, in milliseconds, before Redis is
    /// tried again (so an unreachable Redis costs one timeout per interval, not one per call).
    pub redis_retry_ms: u64,
    /// How long a concurrency slot held in Redis lives if its gateway dies before releasing
    /// it, in milliseconds. A call running longer than this loses its slot (the slot is freed
    /// early), so keep it above the longest call deadline.
    pub lease_ms: u64,
    /// Most (rule, caller, tool/server) keys each instance keeps for local decisions (and for
    /// the unspent calls of fleet batches).
    pub local_max_keys: usize,
    /// How much of a rate-only quota's sustained allowance one instance may take from Redis in
    /// one decision, in milliseconds of that rate: calls then spend the batch without a round
    /// trip, and what is not spent within this time is given up (never handed to another
    /// call later). A quota slower than one call per this time is decided in Redis call by
    /// call, as is every rule with `max_concurrent`. 0: every call decided in Redis.
    pub fleet_batch_ms: u64,
}

impl Default for QuotasConfig {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            redis_timeout_ms: 50,
            redis_retry_ms: 1_000,
            lease_ms: 120_000,
            local_max_keys: 100_000,
            fleet_batch_ms: 10,
        }
    }
}

/// What a quota counts: a caller's calls to each tool, or to each server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QuotaScope {
    /// One allowance per (caller, tool).
    #[default]
    Tool,
    /// One allowance per (caller, server): every tool of the server shares it.
    Server,
}

impl QuotaScope {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaScope::Tool => "tool",
            QuotaScope::Server => "server",
        }
    }
}

/// One quota rule.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuotaRule {
    /// The rule's name: the `rule` of a denial's audit line, `error.data.quota`, the metrics'
    /// `quota` label and part of its Redis keys (`[A-Za-z0-9_-]+`).
    #[serde(deserialize_with = "lenient::string")]
    pub name: String,
    pub scope: QuotaScope,
    /// Tools the rule applies to: an exact name or a glob with `*` (unset: every tool).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub match_tool: Option<String>,
    /// Servers the rule applies to: an exact name or a glob with `*` (unset: every server).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub match_server: Option<String>,
    /// Callers (subjects) the rule applies to; empty: every caller, anonymous included.
    #[serde(deserialize_with = "lenient::strings")]
    pub subjects: Vec<String>,
    /// Calls allowed per `window_secs` (0: no rate limit).
    pub rate: u64,
    /// The window `rate` is counted over, in seconds.
    pub window_secs: u64,
    /// Calls that may be made at once after a quiet period (default: `rate`, so a fresh
    /// caller may use a whole window's allowance at once, then one call per `window/rate`).
    pub burst: Option<u64>,
    /// Calls in flight at once (0: no concurrency limit).
    pub max_concurrent: u64,
}

impl QuotaRule {
    /// `burst`, defaulting to `rate`.
    pub fn burst(&self) -> u64 {
        self.burst.unwrap_or(self.rate)
    }
}

impl QuotasConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut names = std::collections::HashSet::new();
        for rule in &self.rules {
            let name = &rule.name;
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                bail!("quotas.rules: name {name:?} must match [A-Za-z0-9_-]+");
            }
            if !names.insert(name.as_str()) {
                bail!("quotas.rules: two rules are named {name:?}");
            }
            if rule.rate == 0 && rule.max_concurrent == 0 {
                bail!("quota {name}: set `rate` (with `window_secs`) or `max_concurrent`");
            }
            if rule.rate > 0 && rule.window_secs == 0 {
                bail!("quota {name}: `rate` needs a positive `window_secs`");
            }
            if rule.rate > 0 && rule.burst() == 0 {
                bail!("quota {name}: `burst` must be at least 1");
            }
            if rule.rate == 0 && rule.burst.is_some() {
                bail!("quota {name}: `burst` needs `rate`");
            }
        }
        if !self.rules.is_empty() {
            if self.redis_timeout_ms == 0 || self.lease_ms == 0 {
                bail!("quotas.redis_timeout_ms and quotas.lease_ms must be positive");
            }
            if self.local_max_keys == 0 {
                bail!("quotas.local_max_keys must be positive");
            }
            if self.fleet_batch_ms > 3_600_000 {
                bail!("quotas.fleet_batch_ms must be at most 3600000 (an hour)");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> anyhow::Result<()> {
        let config: QuotasConfig = toml::from_str(&format!("[[rules]]\n{text}"))?;
        config.validate()
    }

    #[test]
    fn rules_are_checked() {
        assert!(rule("name = \"a\"\nrate = 5\nwindow_secs = 60").is_ok());
        assert!(rule("name = \"a\"\nmax_concurrent = 2\nscope = \"server\"").is_ok());
        assert!(rule("name = \"a b\"\nrate = 5\nwindow_secs = 60").is_err());
        assert!(rule("name = \"a\"").is_err(), "a rule limits something");
        assert!(rule("name = \"a\"\nrate = 5").is_err(), "a rate needs a window");
        assert!(rule("name = \"a\"\nrate = 5\nwindow_secs = 1\nburst = 0").is_err());
        assert!(rule("name = \"a\"\nmax_concurrent = 1\nscope = \"caller\"").is_err());
        let twice =
            "[[rules]]\nname = \"a\"\nmax_concurrent = 1\n[[rules]]\nname = \"a\"\nmax_concurrent = 1";
        assert!(toml::from_str::<QuotasConfig>(twice).unwrap().validate().is_err());
    }
}
