//! `[[hooks]]`: guardrails on `tools/call` (see `docs/hooks.md`). Each hook runs before a call
//! (on the tool, its checked arguments and the caller) or after it (on the result), for the
//! tools it matches by name or server pattern, and is either a built-in rule (redact detected
//! values in results, refuse arguments carrying them) or an MCP tool on a configured server.
//! This file holds the keys and what serde cannot check; `crate::guardrail` compiles them.

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::lenient;

/// Most hooks a configuration may declare (each call walks the matching ones in order).
pub const MAX_HOOKS: usize = 32;
/// Most patterns (match patterns, or operator regexes) a hook may list.
pub const MAX_HOOK_PATTERNS: usize = 64;
/// Longest operator regex, in characters.
pub const MAX_REGEX_CHARS: usize = 1024;

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPhase {
    /// Before the call reaches the server: allow, deny, or replace the arguments.
    Before,
    /// After the server answered: allow, deny, or replace the result.
    After,
}

impl HookPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            HookPhase::Before => "before",
            HookPhase::After => "after",
        }
    }
}

/// What a hook that does not answer (timeout) or fails decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// The call goes on as if the hook had allowed it.
    Open,
    /// The call is refused (`guardrail`), as if the hook had denied it.
    #[default]
    Closed,
}

/// A built-in rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinRule {
    /// After: replaces what the detectors find in text content and `structuredContent`
    /// strings with `[redacted:KIND]`.
    Redact,
    /// Before: refuses a call whose arguments hold a string the detectors find.
    Refuse,
}

/// A detector of the built-in rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// E-mail addresses.
    Email,
    /// Telephone numbers written with a `+` country code or separators.
    Phone,
    /// Payment card numbers (13 to 19 digits, spaces or dashes allowed) passing the Luhn check.
    Card,
}

impl Detector {
    pub fn as_str(self) -> &'static str {
        match self {
            Detector::Email => "email",
            Detector::Phone => "phone",
            Detector::Card => "card",
        }
    }
}

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// The hook's name: the `hook` label of its decisions and the name in audit lines.
    #[serde(deserialize_with = "lenient::string")]
    pub name: String,
    pub phase: HookPhase,
    /// Catalogue tool names the hook applies to (`*` matches any run of characters).
    #[serde(default, deserialize_with = "lenient::strings")]
    pub match_tools: Vec<String>,
    /// Server names whose tools the hook applies to (`*` as above). With both lists set, a
    /// tool must match both.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub match_servers: Vec<String>,
    /// A built-in rule, or else `server` and `tool`.
    #[serde(default)]
    pub builtin: Option<BuiltinRule>,
    /// The built-in rule's detectors.
    #[serde(default)]
    pub detect: Vec<Detector>,
    /// The built-in rule's operator regular expressions (Rust `regex` syntax).
    #[serde(default, deserialize_with = "lenient::strings")]
    pub patterns: Vec<String>,
    /// The configured server whose MCP tool is the hook.
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub server: Option<String>,
    /// The hook tool's name on that server (its own name, not a catalogue alias).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub tool: Option<String>,
    /// Longest the hook may take, in milliseconds (never past the call's own deadline).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// What a hook that times out or fails decides.
    #[serde(default)]
    pub failure: FailureMode,
}

fn default_timeout_ms() -> u64 {
    1_000
}

/// Checks the hooks against each other and the servers they name.
pub fn validate(
    hooks: &[HookConfig],
    servers: &std::collections::BTreeMap<String, super::ServerConfig>,
) -> anyhow::Result<()> {
    if hooks.len() > MAX_HOOKS {
        bail!("at most {MAX_HOOKS} [[hooks]] ({} configured)", hooks.len());
    }
    let mut names = std::collections::BTreeSet::new();
    for hook in hooks {
        let name = &hook.name;
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!("hook name {name:?} must match [a-zA-Z0-9_-]{{1,64}}");
        }
        if !names.insert(name.as_str()) {
            bail!("hook {name}: the name is used twice");
        }
        if hook.match_tools.is_empty() && hook.match_servers.is_empty() {
            bail!("hook {name}: set `match_tools` or `match_servers` (use [\"*\"] for every tool)");
        }
        if hook.match_tools.len() + hook.match_servers.len() > MAX_HOOK_PATTERNS {
            bail!("hook {name}: at most {MAX_HOOK_PATTERNS} match patterns");
        }
        if !(10..=300_000).contains(&hook.timeout_ms) {
            bail!("hook {name}: timeout_ms must be between 10 and 300000");
        }
        match (hook.builtin, &hook.server, &hook.tool) {
            (Some(rule), None, None) => {
                if hook.detect.is_empty() && hook.patterns.is_empty() {
                    bail!("hook {name}: a built-in rule needs `detect` or `patterns`");
                }
                match (rule, hook.phase) {
                    (BuiltinRule::Redact, HookPhase::After) | (BuiltinRule::Refuse, HookPhase::Before) => {}
                    (BuiltinRule::Redact, _) => {
                        bail!("hook {name}: builtin \"redact\" runs in phase \"after\"")
                    }
                    (BuiltinRule::Refuse, _) => {
                        bail!("hook {name}: builtin \"refuse\" runs in phase \"before\"")
                    }
                }
                if hook.patterns.len() > MAX_HOOK_PATTERNS {
                    bail!("hook {name}: at most {MAX_HOOK_PATTERNS} patterns");
                }
                for pattern in &hook.patterns {
                    if pattern.chars().count() > MAX_REGEX_CHARS {
                        bail!("hook {name}: a pattern is longer than {MAX_REGEX_CHARS} characters");
                    }
                    if let Err(error) = compile_pattern(pattern) {
                        bail!("hook {name}: pattern {pattern:?} does not compile: {error}");
                    }
                }
            }
            (None, Some(server), Some(tool)) => {
                if !hook.detect.is_empty() || !hook.patterns.is_empty() {
                    bail!("hook {name}: `detect` and `patterns` belong to a built-in rule");
                }
                let Some(config) = servers.get(server) else {
                    bail!("hook {name}: server {server:?} is not a configured server");
                };
                if config.auth.as_ref().is_some_and(|auth| auth.kind.per_caller()) {
                    bail!(
                        "hook {name}: server {server} uses the caller's own credentials, and a hook never carries them"
                    );
                }
                if tool.is_empty() {
                    bail!("hook {name}: `tool` is empty");
                }
            }
            _ => bail!("hook {name}: set either `builtin` or both `server` and `tool`"),
        }
    }
    Ok(())
}

/// Most memory one compiled operator regex may take (the `regex` crate's size limit).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// An operator regex, compiled with a size bound (a pattern cannot make the gateway build an
/// automaton of unbounded size; the `regex` crate's matching is linear in the input).
pub fn compile_pattern(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).build()
}
