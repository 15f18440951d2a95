//! `[approvals]`: which tool calls wait for a person's approval before the gateway sends them,
//! who approves (the caller's user, or an operator), and the bounds of what waits. The rules
//! here sit beside the Cedar policy's `@approval("…")` annotations (`crate::approvals`); the
//! behaviour is described in `docs/approvals.md`. Rules, expiry and bounds are read at each
//! call, so a reload changes them for the next call; an approval already asked keeps the
//! expiry it was given.

use anyhow::bail;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::lenient;

/// Most rules a configuration may declare (each call needing none walks them all).
pub const MAX_APPROVAL_RULES: usize = 64;

/// Who must approve a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Approver {
    /// The person the caller acts for (the customer), reached through elicitation or the
    /// approval page's single-use link; an operator may decide it too.
    User,
    /// An operator, on the console (`/admin/approvals`): the caller's user cannot decide it.
    Operator,
}

impl Approver {
    pub fn as_str(self) -> &'static str {
        match self {
            Approver::User => "user",
            Approver::Operator => "operator",
        }
    }

    /// The approver an annotation names (`@approval("operator")`, `@approval("user")`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(Approver::User),
            "operator" => Some(Approver::Operator),
            _ => None,
        }
    }
}

/// How the caller's user is asked, when the caller can be asked (elicitation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UserElicitation {
    /// URL mode (the gateway's own page: the client never sees the decision) when the caller
    /// declared it, else form mode.
    #[default]
    PreferUrl,
    /// Form mode (the client shows the facts and returns the person's answer) when declared,
    /// else URL mode.
    PreferForm,
    /// URL mode only: the decision is always taken on the gateway's page.
    UrlOnly,
    /// Never asked by elicitation (the link, the console or a task).
    Off,
}

/// How a rule compares the argument its pointer names with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Comparison {
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
}

/// One rule: a call it matches (every condition it sets holds) waits for `approver`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// The rule's name (audit lines, metrics, the approval's facts).
    #[serde(deserialize_with = "lenient::string")]
    pub name: String,
    /// Tool name patterns (`*` any run of characters); empty: every tool.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub tools: Vec<String>,
    /// Server name patterns; empty: every server.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub servers: Vec<String>,
    /// Only tools whose `destructiveHint` is this (absent hints at the specification's
    /// default: destructive unless said otherwise).
    #[serde(default)]
    pub destructive: Option<bool>,
    /// Only tools whose `readOnlyHint` is this (`false`: every tool that may change something).
    #[serde(default)]
    pub read_only: Option<bool>,
    /// A JSON pointer into the arguments as the server will see them (`/total_jpy`); with
    /// `op` and `value`. An argument the pointer does not reach never matches.
    #[serde(default)]
    pub argument: Option<String>,
    #[serde(default)]
    pub op: Option<Comparison>,
    #[serde(default)]
    pub value: Option<Value>,
    /// Caller subjects (patterns); empty: every caller, anonymous ones included.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub callers: Vec<String>,
    /// Caller groups; any one of them matches; empty: no condition.
    #[serde(default, deserialize_with = "lenient::strings")]
    pub groups: Vec<String>,
    /// Who approves.
    pub approver: Approver,
}

/// An MCP tool on a configured server that operators' approvals are sent to (a ticketing or
/// chat bridge), like a guardrail hook: it gets the approval's facts and answers
/// `{"decision": "approve" | "deny" | "pending"}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalBridge {
    /// A configured server (`[servers.NAME]`).
    #[serde(deserialize_with = "lenient::string")]
    pub server: String,
    /// The tool on it.
    #[serde(deserialize_with = "lenient::string")]
    pub tool: String,
    /// Longest the call waits for the bridge's answer, in milliseconds (within the call's own
    /// deadline); past it the approval stays waiting (the console, a retry).
    #[serde(default = "default_bridge_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_bridge_timeout_ms() -> u64 {
    10_000
}

/// Approval settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// The rules, in order; the first matching rule names the approver (a Cedar
    /// `@approval("operator")` outranks a rule's `user`).
    pub rules: Vec<ApprovalRule>,
    /// How long an approval may wait for its decision, and how long an approved call may wait
    /// for its caller's retry, in seconds.
    pub expiry_secs: u64,
    /// Most approvals waiting (asked and not decided, or approved and not used), all callers.
    pub max_pending: usize,
    /// Most approvals one caller (subject) may have waiting.
    pub max_pending_per_caller: usize,
    /// The gateway's address as the approver's browser reaches it (`https://gw.example.com`):
    /// the approval page's links are absolute under it. Unset: links are paths.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub public_url: Option<String>,
    /// Whether an `approval_required` answer carries the user's single-use approval link. Off by
    /// default: that answer reaches the model, and a model that can open links could approve
    /// its own call; the link then only travels by elicitation (shown to the person, not the
    /// model), and a caller that cannot elicit waits for an operator.
    pub user_link_in_answer: bool,
    /// How a caller's user is asked by elicitation (session-era relay, or a 2026-07-28
    /// `input_required` question).
    pub elicitation: UserElicitation,
    /// Decided approvals kept for the console's history.
    pub history: usize,
    /// Where operators' approvals are also sent (`[approvals.bridge]`); unset: the console and
    /// the admin API only.
    pub bridge: Option<ApprovalBridge>,
    /// A directory for the approvals' journal (`approvals.jsonl`): an approved call not yet
    /// sent survives a restart, and what a restart dropped is audited at start. Unset: pending
    /// approvals live in memory only (a restart drops them; the caller's retry asks again).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub state_dir: Option<String>,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            expiry_secs: 600,
            max_pending: 1024,
            max_pending_per_caller: 16,
            public_url: None,
            user_link_in_answer: false,
            elicitation: UserElicitation::PreferUrl,
            history: 200,
            bridge: None,
            state_dir: None,
        }
    }
}

impl ApprovalsConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.rules.len() > MAX_APPROVAL_RULES {
            bail!("approvals.rules: at most {MAX_APPROVAL_RULES} rules");
        }
        if !(10..=86_400).contains(&self.expiry_secs) {
            bail!("approvals.expiry_secs must be between 10 and 86400");
        }
        if self.max_pending == 0 || self.max_pending > 1_000_000 {
            bail!("approvals.max_pending must be between 1 and 1000000");
        }
        if self.max_pending_per_caller == 0 || self.max_pending_per_caller > self.max_pending {
            bail!("approvals.max_pending_per_caller must be between 1 and approvals.max_pending");
        }
        if self.history > 10_000 {
            bail!("approvals.history must be at most 10000");
        }
        if let Some(url) = &self.public_url {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("approvals.public_url {url:?} is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("approvals.public_url must be an http or https URL");
            }
        }
        if let Some(bridge) = &self.bridge
            && !(100..=600_000).contains(&bridge.timeout_ms)
        {
            bail!("approvals.bridge.timeout_ms must be between 100 and 600000");
        }
        let mut names = std::collections::HashSet::new();
        for rule in &self.rules {
            let name = &rule.name;
            if name.trim().is_empty() {
                bail!("approvals.rules: every rule needs a name");
            }
            if !names.insert(name.as_str()) {
                bail!("approvals.rules: two rules are named {name:?}");
            }
            match (&rule.argument, &rule.op, &rule.value) {
                (None, None, None) => {}
                (Some(pointer), Some(op), Some(value)) => {
                    if !pointer.is_empty() && !pointer.starts_with('/') {
                        bail!(
                            "approvals.rules {name}: argument {pointer:?} is not a JSON pointer (it starts with /)"
                        );
                    }
                    let ordered = !matches!(op, Comparison::Eq | Comparison::Ne);
                    if ordered && !value.is_number() {
                        bail!(
                            "approvals.rules {name}: >, >=, < and <= compare numbers; value must be a number"
                        );
                    }
                }
                _ => bail!("approvals.rules {name}: argument, op and value go together"),
            }
        }
        Ok(())
    }

    pub fn expiry(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.expiry_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<ApprovalsConfig> {
        let config: ApprovalsConfig = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn rules_are_checked_for_what_serde_cannot() {
        let ok = parse(
            "[[rules]]\nname = \"big\"\ntools = [\"checkout\"]\nargument = \"/total_jpy\"\nop = \">\"\nvalue = 20000\napprover = \"user\"\n",
        )
        .unwrap();
        assert_eq!(ok.rules[0].op, Some(Comparison::Gt));
        for (bad, says) in [
            ("[[rules]]\nname = \"x\"\nargument = \"/a\"\napprover = \"user\"\n", "go together"),
            (
                "[[rules]]\nname = \"x\"\nargument = \"a\"\nop = \"==\"\nvalue = 1\napprover = \"user\"\n",
                "JSON pointer",
            ),
            (
                "[[rules]]\nname = \"x\"\nargument = \"/a\"\nop = \">\"\nvalue = \"1\"\napprover = \"user\"\n",
                "numbers",
            ),
            (
                "[[rules]]\nname = \"x\"\napprover = \"user\"\n[[rules]]\nname = \"x\"\napprover = \"operator\"\n",
                "two rules",
            ),
            ("expiry_secs = 1\n", "expiry_secs"),
            ("max_pending_per_caller = 0\n", "max_pending_per_caller"),
            ("public_url = \"ftp://x\"\n", "public_url"),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert!(parse("[[rules]]\nname = \"x\"\napprover = \"boss\"\n").is_err());
    }
}
