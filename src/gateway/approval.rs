//! The door's last step: a call that needs a person's approval (a Cedar `@approval` permit, or
//! an `[approvals]` rule) passes only with an approval of exactly this call, and is otherwise
//! refused — `approval_required` naming the approval, who decides and where, or
//! `approval_denied` — before anything is sent. Also the operators' and the approval page's
//! ways to list and decide (`server/admin.rs`, `server/approval_page.rs`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Gateway, door::CedarApproval, settings::Settings};
use crate::{
    approvals::{self, Approval, Binding, Gate, Refused, Requirement, rules},
    config::{ApprovalsConfig, Approver},
    error::{Category, GatewayError},
    identity::Caller,
    registry::ToolRecord,
};

/// The path of an approval's page for the caller's user; the secret follows as the fragment
/// (`#<secret>`), which a browser never sends to a server, a proxy log or a `Referer`.
pub fn page_path(id: &str) -> String {
    format!("/approvals/{id}")
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
    ) -> Result<(), GatewayError> {
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
        let gate = self.approvals.store.gate(
            approvals::limits(config),
            binding,
            arguments,
            &requirement,
            &mut events,
        );
        self.approvals.record(&events);
        match gate {
            Gate::Pass(approval) => {
                tracing::info!(request_id, approval = %approval.id, tool = %tool.name, "approved call passes");
                Ok(())
            }
            Gate::Wait { approval, secret, .. } => Err(approval_required(config, &approval, &secret)),
            Gate::Denied(approval) => Err(GatewayError::new(
                Category::ApprovalDenied,
                format!(
                    "{} was denied by {} (approval {}); nothing was sent",
                    approval.binding.tool,
                    approval.decided_by.as_deref().unwrap_or("the approver"),
                    approval.id
                ),
            )
            .with_extra("approval", facts(config, &approval, None))),
            Gate::Full { per_caller, limit } => {
                self.approvals.count_full(&tool.name, &tool.server);
                let (category, which) = match per_caller {
                    true => (Category::RateLimited, "approvals.max_pending_per_caller"),
                    false => (Category::Overloaded, "approvals.max_pending"),
                };
                Err(GatewayError::new(
                    category,
                    format!(
                        "{} needs an approval, and {limit} approvals already wait ({which}); nothing was sent",
                        tool.name
                    ),
                )
                .with_limit(which, limit as u64))
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
