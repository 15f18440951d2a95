//! The door's last step: a call that needs a person's approval (a Cedar `@approval` permit, or
//! an `[approvals]` rule) passes only with an approval of exactly this call, and is otherwise
//! refused — `approval_required` naming the approval, who decides and where, or
//! `approval_denied` — before anything is sent. Also the operators' and the approval page's
//! ways to list and decide (`server/admin.rs`, `server/approval_page.rs`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Gateway, settings::Settings};
use crate::{
    approvals::{self, Approval, Binding, Gate, Refused, Requirement, rules},
    config::{ApprovalsConfig, Approver},
    error::{Category, GatewayError},
    identity::Caller,
    registry::ToolRecord,
};

/// The approval a deciding Cedar permit asks for: who, and the permit's label.
pub(super) type CedarApproval = Option<(crate::config::Approver, Arc<str>)>;

/// The path of an approval's page for the caller's user; the secret follows as the fragment
/// (`#<secret>`), which a browser never sends to a server, a proxy log or a `Referer`.
pub fn page_path(id: &str) -> String {
    format!("/approvals/{id}")
}

/// How the caller of this call can be asked: its back-channel relay (a session-era caller that
/// declared elicitation), and the call's deadline.
#[derive(Clone, Copy, Default)]
pub(super) struct Asking<'a> {
    pub relay: Option<&'a crate::backchannel::Relay>,
    pub deadline: Option<std::time::Instant>,
    /// A 2026-07-28 caller: what it declared, and its answer to an approval question.
    pub modern: Option<&'a ModernRound>,
}

/// What a 2026-07-28 caller's `tools/call` says for its approval: the `clientCapabilities` it
/// declared in `_meta`, and — on a retry answering the gateway's question — the
/// `requestState` and `inputResponses` it sent (taken out of the call: the server never sees
/// a question it did not ask).
#[derive(Debug, Default)]
pub(super) struct ModernRound {
    pub declared: Value,
    pub answer: Option<(String, Value)>,
}

/// The prefix of the `requestState` of an approval question (the approval's id follows).
pub const STATE_PREFIX: &str = "mcpgw-approval.";
/// The key of the one question in its `input_required` result.
pub const QUESTION_KEY: &str = "mcpgw-approval";

impl ModernRound {
    /// Reads a modern call's declaration, and takes out its answer to an approval question.
    pub(super) fn take(params: &mut serde_json::Map<String, Value>) -> Self {
        let declared = params
            .get("_meta")
            .and_then(|m| m.get(crate::protocol::mcp::META_CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or(Value::Null);
        let ours =
            params.get("requestState").and_then(Value::as_str).is_some_and(|s| s.starts_with(STATE_PREFIX));
        let answer = match ours {
            true => {
                let state = params.remove("requestState").and_then(|s| s.as_str().map(str::to_string));
                let responses = params.remove("inputResponses").unwrap_or(Value::Null);
                state.map(|state| (state, responses))
            }
            false => None,
        };
        Self { declared, answer }
    }
}

/// Why the door stays shut at this step.
pub(super) enum Stop {
    /// The caller's error (`approval_required`, `approval_denied`, a bound).
    Refused(GatewayError),
    /// A question for a 2026-07-28 caller (an `input_required` result); `waiting` is what the
    /// call records.
    Ask { waiting: GatewayError, question: Box<serde_json::value::RawValue> },
}

/// Where operators decide (the console's approvals view).
pub const CONSOLE_APPROVALS: &str = "/admin/console#approvals";

impl Gateway {
    /// Passes the call when it needs no approval or an approval of exactly it was given (using
    /// that approval up); otherwise the refusal the caller is answered. `arguments` are the
    /// final ones (fixed and default arguments set, hooks applied); the approval is bound to
    /// their whole canonical SHA-256 (`args_hash`, the log's short form, is its first 16 hex
    /// digits).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn approval_gate(
        &self,
        settings: &Arc<Settings>,
        caller: &Caller,
        request_id: &str,
        tool: &Arc<ToolRecord>,
        arguments: &Value,
        args_hash: &str,
        cedar: CedarApproval,
        asking: Asking<'_>,
    ) -> Result<(), Stop> {
        let config = &settings.config.approvals;
        let from_rules = match config.rules.is_empty() {
            true => None,
            false => rules::matching(&config.rules, caller, tool, arguments),
        };
        let from_cedar =
            cedar.map(|(approver, label)| Requirement { approver, rule: format!("cedar:{label}") });
        let Some(requirement) = rules::stricter(from_cedar, from_rules) else { return Ok(()) };
        let binding = Binding {
            subject: caller.subject.clone(),
            endpoint: caller.endpoint.clone(),
            tool: tool.name.clone(),
            server: tool.server.clone(),
            args_sha256: crate::registry::hash::canonical_sha256(arguments),
        };
        tracing::debug!(request_id, args_hash, tool = %tool.name, approver = requirement.approver.as_str(), "the call needs an approval");
        let mut events = Vec::new();
        let limits = approvals::limits(config);
        let mut gate =
            self.approvals.store.gate(limits, binding.clone(), arguments, &requirement, &mut events);
        self.approvals.record(&events);
        // The caller's user, asked through the caller when it can be: the gate is passed
        // again once the person decided (the approval is used up there, as for a retry).
        if let Gate::Wait { approval, secret, .. } = &gate
            && approval.approver == Approver::User
            && approval.status == approvals::Status::Pending
            && let Some(relay) = asking.relay
            && let Some(mode) =
                elicitation_mode(config, relay.declared().0, relay.caller.allows("elicitation/create"))
        {
            self.ask_user(config, relay, mode, approval, secret, asking.deadline).await;
            let mut events = Vec::new();
            gate = self.approvals.store.gate(limits, binding.clone(), arguments, &requirement, &mut events);
            self.approvals.record(&events);
        } else if let Gate::Wait { approval, secret, .. } = &gate
            && approval.approver == Approver::User
            && approval.status == approvals::Status::Pending
            && asking.relay.is_none()
            && let Some(modern) = asking.modern
            && let Some(mode) = elicitation_mode(config, &modern.declared, true)
        {
            let state = format!("{STATE_PREFIX}{}", approval.id);
            match modern.answer.as_ref().filter(|(answered, _)| *answered == state) {
                Some((_, responses)) => {
                    let response = responses.get(QUESTION_KEY).cloned().unwrap_or(Value::Null);
                    self.settle_approval(
                        mode,
                        approval,
                        secret,
                        ("result", response),
                        self.until(approval, asking.deadline),
                    )
                    .await;
                    let mut events = Vec::new();
                    gate = self.approvals.store.gate(
                        limits,
                        binding.clone(),
                        arguments,
                        &requirement,
                        &mut events,
                    );
                    self.approvals.record(&events);
                }
                None => {
                    let params = question_params(config, mode, approval, secret);
                    let question = crate::protocol::mrtr::input_required_result(
                        QUESTION_KEY,
                        "elicitation/create",
                        &params,
                        &state,
                    );
                    return Err(Stop::Ask { waiting: approval_required(config, approval, secret), question });
                }
            }
        }
        // An operator's approval, new: also sent to the bridge, whose answer may decide it.
        if let Gate::Wait { approval, new: true, .. } = &gate
            && approval.approver == Approver::Operator
            && let Some(bridge) = &config.bridge
        {
            self.ask_bridge(settings, bridge, approval, asking.deadline).await;
            let mut events = Vec::new();
            gate = self.approvals.store.gate(limits, binding, arguments, &requirement, &mut events);
            self.approvals.record(&events);
        }
        match gate {
            Gate::Pass(approval) => {
                tracing::info!(request_id, approval = %approval.id, tool = %tool.name, "approved call passes");
                Ok(())
            }
            Gate::Wait { approval, secret, .. } => {
                Err(Stop::Refused(approval_required(config, &approval, &secret)))
            }
            Gate::Denied(approval) => Err(Stop::Refused(
                GatewayError::new(
                    Category::ApprovalDenied,
                    format!(
                        "{} was denied by {} (approval {}); nothing was sent",
                        approval.binding.tool,
                        approval.decided_by.as_deref().unwrap_or("the approver"),
                        approval.id
                    ),
                )
                .with_extra("approval", facts(config, &approval, None)),
            )),
            Gate::Full { per_caller, limit } => {
                self.approvals.count_full(&tool.name, &tool.server);
                let (category, which) = match per_caller {
                    true => (Category::RateLimited, "approvals.max_pending_per_caller"),
                    false => (Category::Overloaded, "approvals.max_pending"),
                };
                Err(Stop::Refused(GatewayError::new(
                    category,
                    format!(
                        "{} needs an approval, and {limit} approvals already wait ({which}); nothing was sent",
                        tool.name
                    ),
                )
                .with_limit(which, limit as u64)))
            }
        }
    }

    /// Asks the caller's user through its relay (`elicitation/create`), and returns once the
    /// approval is decided, or when the person could not be asked or did not decide in time
    /// (the gate, passed again, then answers what stands). URL mode sends the page's link (the decision is taken there, never by
    /// the client); form mode shows the facts and takes the person's answer from the client.
    async fn ask_user(
        &self,
        config: &ApprovalsConfig,
        relay: &crate::backchannel::Relay,
        mode: Mode,
        approval: &Approval,
        secret: &str,
        deadline: Option<std::time::Instant>,
    ) {
        let until = self.until(approval, deadline);
        let params = question_params(config, mode, approval, secret);
        // Not answered in time: the approval still waits (the console, or a retry).
        if let Ok(answer) = relay.ask("elicitation/create", Some(params), Some(until)).await {
            self.settle_approval(mode, approval, secret, answer, until).await;
        }
    }

    /// Sends an operator's approval to the bridge tool (`[approvals.bridge]`) and decides it
    /// by the bridge's answer (`approve`, `deny`); anything else, a failure or no answer within
    /// its timeout leaves it waiting (logged). The bridge is configuration the operator trusts,
    /// as a guardrail hook is; it is recorded as `bridge:<server>/<tool>`.
    async fn ask_bridge(
        &self,
        settings: &Settings,
        bridge: &crate::config::approvals::ApprovalBridge,
        approval: &Approval,
        deadline: Option<std::time::Instant>,
    ) {
        use tower::ServiceExt;

        use crate::upstream::{UpstreamReply, UpstreamRequest};
        let Some(upstream) = settings.upstreams.get(&bridge.server) else { return };
        let own = std::time::Instant::now() + std::time::Duration::from_millis(bridge.timeout_ms);
        let until = deadline.map_or(own, |d| d.min(own));
        let mut facts = approval.to_json();
        if let Some(object) = facts.as_object_mut() {
            object.retain(|key, _| {
                [
                    "id",
                    "tool",
                    "server",
                    "subject",
                    "endpoint",
                    "arguments",
                    "args_sha256",
                    "rule",
                    "expires_at",
                ]
                .contains(&key.as_str())
            });
        }
        let mut params = serde_json::Map::new();
        params.insert("name".into(), json!(bridge.tool));
        params.insert("arguments".into(), facts);
        let tool: Arc<str> = bridge.tool.as_str().into();
        let mut request = UpstreamRequest::new("tools/call", params);
        request.tool = Some(tool);
        request.deadline = Some(until);
        let reply = tokio::time::timeout_at(until.into(), upstream.service.clone().oneshot(request)).await;
        let result: Option<Value> = match reply {
            Ok(Ok(UpstreamReply::Result(raw))) => serde_json::from_str(raw.into_raw().get()).ok(),
            _ => None,
        };
        let decision = result.as_ref().and_then(bridge_decision);
        tracing::info!(approval = %approval.id, bridge = %bridge.tool, decision = decision.unwrap_or("none"), "approval bridge answered");
        let approve = match decision {
            Some("approve") => true,
            Some("deny") => false,
            _ => return,
        };
        let by = format!("bridge:{}/{}", bridge.server, bridge.tool);
        let _ = self.decide_approval(&approval.id, approve, &by, None);
    }

    /// When asking stops: the call's deadline, or the approval's expiry if sooner.
    fn until(&self, approval: &Approval, deadline: Option<std::time::Instant>) -> std::time::Instant {
        let expires = approval
            .expires_at
            .duration_since(std::time::SystemTime::now())
            .map(|left| std::time::Instant::now() + left)
            .unwrap_or_else(|_| std::time::Instant::now());
        deadline.map_or(expires, |d| d.min(expires))
    }

    /// Acts on the caller's answer to the approval question (`kind`: `result` or `error`): a
    /// form's yes or no decides; a decline denies; a URL-mode accept waits for the decision on
    /// the page (until `until`); a cancel or an error leaves the approval waiting.
    async fn settle_approval(
        &self,
        mode: Mode,
        approval: &Approval,
        secret: &str,
        (kind, result): (&'static str, Value),
        until: std::time::Instant,
    ) {
        let action = result.get("action").and_then(Value::as_str).unwrap_or_default();
        if kind != "result" || !matches!(action, "accept" | "decline") {
            return;
        }
        let decision = match (mode, action) {
            (Mode::Form, "accept") => {
                Some(result.pointer("/content/approve").and_then(Value::as_bool) == Some(true))
            }
            (_, "decline") => Some(false),
            // URL mode: the person agreed to open the page; the decision is taken there.
            _ => None,
        };
        if let Some(approve) = decision {
            let by = if mode == Mode::Form { "user:elicitation" } else { "user:declined_link" };
            // Decided already (the console, the page) is no error: the gate reads its state.
            let _ = self.decide_approval(&approval.id, approve, by, Some(secret));
            return;
        }
        loop {
            let changed = self.approvals.store.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let decided = self
                .approvals
                .store
                .status(&approval.id)
                .is_none_or(|a| a.status != approvals::Status::Pending);
            if decided || tokio::time::timeout_at(until.into(), changed).await.is_err() {
                return;
            }
        }
    }

    /// Waiting approvals (oldest first) and the history (newest first), as the console lists
    /// them.
    pub fn approvals_listing(&self) -> Value {
        let settings = self.settings();
        let config = &settings.config.approvals;
        let mut events = Vec::new();
        let (waiting, history) = self.approvals.store.list(approvals::limits(config), &mut events);
        self.approvals.record(&events);
        json!({
            "waiting": waiting.iter().map(|a| facts(config, a, None)).collect::<Vec<_>>(),
            "history": history.iter().map(|a| facts(config, a, None)).collect::<Vec<_>>(),
            "limits": {
                "expiry_secs": config.expiry_secs,
                "max_pending": config.max_pending,
                "max_pending_per_caller": config.max_pending_per_caller,
            },
        })
    }

    /// Decides an approval: `secret` is the page's (the caller's user), `None` an operator's
    /// (authenticated by the admin token).
    pub fn decide_approval(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        secret: Option<&str>,
    ) -> Result<Value, Refused> {
        let settings = self.settings();
        let config = &settings.config.approvals;
        let mut events = Vec::new();
        let decided =
            self.approvals.store.decide(id, approve, by, secret, approvals::limits(config), &mut events);
        self.approvals.record(&events);
        decided.map(|approval| facts(config, &approval, None))
    }

    /// The facts of an approval for its page, when `secret` is the page's.
    pub fn approval_for_page(&self, id: &str, secret: &str) -> Option<Value> {
        let settings = self.settings();
        let approval = self.approvals.store.for_page(id, secret)?;
        Some(facts(&settings.config.approvals, &approval, None))
    }
}

/// The bridge's decision: `structuredContent.decision`, else a text block holding
/// `{"decision": …}`; an `isError` result decides nothing.
fn bridge_decision(result: &Value) -> Option<&str> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    if let Some(decision) = result.pointer("/structuredContent/decision").and_then(Value::as_str) {
        return Some(decision);
    }
    result.get("content")?.as_array()?.iter().find_map(|block| {
        let text = block.get("text")?.as_str()?;
        let parsed: Value = serde_json::from_str(text).ok()?;
        match parsed.get("decision")?.as_str()? {
            "approve" => Some("approve"),
            "deny" => Some("deny"),
            _ => None,
        }
    })
}

/// The `elicitation/create` params asking the caller's user about `approval`.
fn question_params(config: &ApprovalsConfig, mode: Mode, approval: &Approval, secret: &str) -> Value {
    let b = &approval.binding;
    let who = b.subject.as_deref().unwrap_or("an anonymous caller");
    match mode {
        Mode::Url => json!({
            "mode": "url",
            "elicitationId": approval.id,
            "url": user_link(config, &approval.id, secret),
            "message": format!("{} on {} waits for your approval (asked by {who}). Open the gateway's page to see the arguments and decide.", b.tool, b.server),
        }),
        Mode::Form => json!({
            "mode": "form",
            "message": format!(
                "Approve this tool call?\n{} on {}, asked by {who}, with these arguments (as the server will receive them):\n{}",
                b.tool,
                b.server,
                serde_json::to_string_pretty(&approval.arguments).unwrap_or_default()
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve this call", "description": format!("Run {} once with exactly these arguments", b.tool)}},
                "required": ["approve"],
            },
        }),
    }
}

/// How the caller's user is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Url,
    Form,
}

/// The elicitation mode to ask a caller that declared `capabilities` in, as `approvals.elicitation` prefers and
/// the caller declared (`elicitation.url`, `elicitation.form`; a bare `elicitation: {}` is
/// form mode, as the specification reads it). `None`: the caller cannot be asked.
fn elicitation_mode(config: &ApprovalsConfig, capabilities: &Value, allowed: bool) -> Option<Mode> {
    use crate::config::UserElicitation;
    if config.elicitation == UserElicitation::Off || !allowed {
        return None;
    }
    let declared = capabilities.get("elicitation");
    // URL mode sends an absolute link: only with `public_url` (the address the person's
    // browser reaches).
    let url =
        config.public_url.is_some() && declared.and_then(|e| e.get("url")).is_some_and(Value::is_object);
    let form = declared.is_some_and(|e| {
        e.get("form").is_some_and(Value::is_object) || e.as_object().is_some_and(|o| !o.contains_key("url"))
    });
    match config.elicitation {
        UserElicitation::PreferUrl if url => Some(Mode::Url),
        UserElicitation::PreferUrl if form => Some(Mode::Form),
        UserElicitation::PreferForm if form => Some(Mode::Form),
        UserElicitation::PreferForm | UserElicitation::UrlOnly if url => Some(Mode::Url),
        _ => None,
    }
}

/// The approval's facts as the approver and the caller see them. `link`: the user's page
/// link, for the caller allowed to carry it.
fn facts(config: &ApprovalsConfig, approval: &Approval, link: Option<String>) -> Value {
    let mut facts = approval.to_json();
    if let Some(object) = facts.as_object_mut() {
        object.insert("console".into(), Value::String(absolute(config, CONSOLE_APPROVALS)));
        if let Some(link) = link {
            object.insert("url".into(), Value::String(link));
        }
    }
    facts
}

fn absolute(config: &ApprovalsConfig, path: &str) -> String {
    match &config.public_url {
        Some(base) => format!("{}{path}", base.trim_end_matches('/')),
        None => path.to_string(),
    }
}

/// The user's page link (with its secret).
pub(super) fn user_link(config: &ApprovalsConfig, id: &str, secret: &str) -> String {
    absolute(config, &format!("{}#{secret}", page_path(id)))
}

/// The `approval_required` answer: the approval, who decides, where, and that the same call
/// passes once approved. The arguments are not repeated (the caller sent them).
fn approval_required(config: &ApprovalsConfig, approval: &Approval, secret: &str) -> GatewayError {
    let link = (approval.approver == Approver::User && config.user_link_in_answer)
        .then(|| user_link(config, &approval.id, secret));
    let whom = match (approval.approver, &link) {
        (Approver::Operator, _) => "an operator's approval on the gateway's console".to_string(),
        (Approver::User, Some(link)) => format!("the user's approval at {link}"),
        (Approver::User, None) => {
            "the user's approval (this caller can be asked neither by elicitation nor by task; an operator may decide it on the gateway's console)".to_string()
        }
    };
    let status = match approval.status {
        approvals::Status::Approved => "approved, waiting for this call",
        _ => "waiting",
    };
    let mut facts = facts(config, approval, link);
    if let Some(object) = facts.as_object_mut() {
        // The caller sent the arguments; the answer carries their digest only.
        object.remove("arguments");
    }
    GatewayError::new(
        Category::ApprovalRequired,
        format!(
            "{} needs {whom} (approval {}, {status}, until {}); nothing was sent. Call again with the same arguments once it is approved.",
            approval.binding.tool,
            approval.id,
            approvals::store::rfc3339(approval.expires_at)
        ),
    )
    .with_extra("approval", facts)
}
