//! Guardrail hooks (`[[hooks]]`, `docs/hooks.md`): what an operator puts between a caller and
//! a tool — a rule that refuses arguments carrying a card number, a redaction of e-mail
//! addresses in results, or any decision an MCP tool of its own makes (a Lambda function, an
//! HTTP service, a local program). This room holds the hooks as compiled from configuration,
//! which hooks a tool meets, the built-in detectors ([`detect`]) and the hook tool's contract
//! ([`contract`]); running them on a call is the gateway's (`gateway/guard.rs`), which owns
//! the path to the hook's server.

pub mod contract;
pub mod detect;

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};

use crate::{
    config::hooks::{BuiltinRule, FailureMode, HookConfig, HookPhase, compile_pattern},
    error::{Category, GatewayError},
};

/// The `decision` label values of `mcp_gateway_guardrail_decisions_total` (a bounded set).
pub mod decision {
    pub const ALLOW: &str = "allow";
    pub const DENY: &str = "deny";
    pub const REPLACE: &str = "replace";
    pub const TIMEOUT_OPEN: &str = "timeout_open";
    pub const TIMEOUT_CLOSED: &str = "timeout_closed";
    pub const ERROR_OPEN: &str = "error_open";
    pub const ERROR_CLOSED: &str = "error_closed";
}

/// What a hook is.
pub enum HookKind {
    Builtin {
        rule: BuiltinRule,
        detectors: detect::Detectors,
    },
    /// An MCP tool on a configured server, called by its own name there.
    Tool {
        server: Arc<str>,
        tool: Arc<str>,
    },
}

/// One compiled hook.
pub struct Hook {
    pub name: Arc<str>,
    pub phase: HookPhase,
    match_tools: Vec<String>,
    match_servers: Vec<String>,
    pub kind: HookKind,
    pub timeout: Duration,
    pub failure: FailureMode,
}

impl Hook {
    /// Whether the hook applies to catalogue tool `tool` of server `server`.
    pub fn applies_to(&self, tool: &str, server: &str) -> bool {
        let any =
            |patterns: &[String], name: &str| patterns.is_empty() || patterns.iter().any(|p| glob(p, name));
        any(&self.match_tools, tool) && any(&self.match_servers, server)
    }

    /// The guardrail error a caller sees when this hook refuses the call.
    pub fn refusal(&self, reason: Option<&str>) -> GatewayError {
        let detail = match reason {
            Some(reason) => format!("guardrail {} refused the call: {reason}", self.name),
            None => format!("guardrail {} refused the call", self.name),
        };
        let mut guardrail = json!({"hook": self.name.as_ref(), "phase": self.phase.as_str()});
        if let Some(reason) = reason {
            guardrail["reason"] = Value::String(reason.to_owned());
        }
        GatewayError::new(Category::Guardrail, detail).with_extra("guardrail", guardrail)
    }
}

/// A hook's decision on one call, for the audit line (never what it matched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub hook: Arc<str>,
    pub phase: HookPhase,
    pub decision: &'static str,
}

/// Every configured hook, in configuration order.
#[derive(Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
}

impl Hooks {
    /// Compiles validated configuration (an operator regex that does not compile is refused).
    pub fn new(config: &[HookConfig]) -> anyhow::Result<Self> {
        let mut hooks = Vec::with_capacity(config.len());
        for hook in config {
            let kind = match (hook.builtin, &hook.server, &hook.tool) {
                (Some(rule), _, _) => {
                    let patterns = hook
                        .patterns
                        .iter()
                        .map(|p| compile_pattern(p).map_err(|e| anyhow::anyhow!("hook {}: {e}", hook.name)))
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    HookKind::Builtin {
                        rule,
                        detectors: detect::Detectors::new(hook.detect.clone(), patterns),
                    }
                }
                (None, Some(server), Some(tool)) => {
                    HookKind::Tool { server: Arc::from(server.as_str()), tool: Arc::from(tool.as_str()) }
                }
                _ => anyhow::bail!("hook {}: set either `builtin` or both `server` and `tool`", hook.name),
            };
            hooks.push(Hook {
                name: Arc::from(hook.name.as_str()),
                phase: hook.phase,
                match_tools: hook.match_tools.clone(),
                match_servers: hook.match_servers.clone(),
                kind,
                timeout: Duration::from_millis(hook.timeout_ms),
                failure: hook.failure,
            });
        }
        Ok(Self { hooks })
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks of `phase` that apply to `tool` on `server`, in order.
    pub fn matching<'a>(
        &'a self,
        phase: HookPhase,
        tool: &'a str,
        server: &'a str,
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks.iter().filter(move |h| h.phase == phase && h.applies_to(tool, server))
    }

    /// Whether some after-hook applies to `tool` on `server`.
    pub fn guards_results_of(&self, tool: &str, server: &str) -> bool {
        self.matching(HookPhase::After, tool, server).next().is_some()
    }

    /// Every hook's name (the metric's label values are these and nothing else).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.hooks.iter().map(|h| h.name.as_ref())
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("*", "anything"));
        assert!(glob("manga_*", "manga_search"));
        assert!(!glob("manga_*", "cart_manga_search"));
        assert!(glob("*_search", "manga_search"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        assert!(glob("checkout", "checkout"));
        assert!(!glob("checkout", "checkout2"));
        assert!(!glob("ab*ba", "aba"), "the ends may not overlap");
    }
}
