//! The door: the one authorize-and-prepare step that every path ending in a server running a
//! tool passes — a direct call, a batch item, the `call_tool` meta-tool, an export alias, a
//! fallback's alternative tool, a held answer's retry, a task's creation. For the tool that
//! will really run it decides, in this order: the caller's endpoint (a tool outside its
//! selection is `unknown_tool` there, as for a name no server offers: an endpoint reveals
//! nothing of the others' tools), the tool policy (identity is already on the
//! caller), catalogue control (fixed arguments refused when sent, then set; the operator's
//! defaults), the tool's input schema (with its own defaults), the quotas, the guardrail
//! hooks that run before a call (`gateway/guard.rs`), whose replaced arguments pass catalogue
//! control and the schema again, and last a person's approval where the policy or
//! `[approvals]` asks for one (`gateway/approval.rs`), bound to the arguments as the server
//! will see them: an unapproved call is refused here, before anything is sent.
//!
//! The door decides under the settings the call took when it came in ([`super::settings`]),
//! and the `Admitted` call carries them on: the forward, the after-hooks, a fallback's own
//! door all read the same generation, whatever a reload changes meanwhile.
//!
//! What passes is an [`Admitted`] call, and an `Admitted` is the only thing the call path's
//! forward accepts. Its fields are private to this module, so a new path cannot reach a server
//! without coming through here: the type system, not a reviewer, keeps the door shut.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Gateway, settings::Settings};
use crate::{
    audit::Decision,
    error::{Category, GatewayError},
    identity::Caller,
    quota::QuotaPermit,
    registry::{ToolRecord, record::canonical_hash},
};

/// A call that passed the door: the tool that runs, its arguments as the server will see
/// them (fixed arguments set, defaults filled, checked against the schema), the policy's
/// decision, and the quota permit held until the call ends (dropped with it).
pub(super) struct Admitted {
    tool: Arc<ToolRecord>,
    arguments: Value,
    args_hash: String,
    decision: Decision,
    /// The before-hooks' decisions (for the audit line).
    guardrails: Vec<crate::guardrail::Mark>,
    /// The settings in force when the call came in: its server stack, hooks and tool settings
    /// to its end, whatever a reload changes meanwhile.
    settings: Arc<Settings>,
    _permit: Option<QuotaPermit>,
}

impl Admitted {
    pub(super) fn tool(&self) -> &Arc<ToolRecord> {
        &self.tool
    }

    pub(super) fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The SHA-256 of the canonical arguments (the log and audit lines' `args_sha256`).
    pub(super) fn args_hash(&self) -> &str {
        &self.args_hash
    }

    pub(super) fn decision(&self) -> &Decision {
        &self.decision
    }

    pub(super) fn guardrails(&self) -> &[crate::guardrail::Mark] {
        &self.guardrails
    }

    pub(super) fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// An admitted call for the call path's unit tests, which exercise what happens after
    /// the door.
    #[cfg(test)]
    pub(super) fn for_tests(tool: ToolRecord, arguments: Value, settings: Arc<Settings>) -> Self {
        let args_hash = canonical_hash(&arguments);
        let decision = Decision::no_policy();
        let guardrails = Vec::new();
        Self { tool: Arc::new(tool), arguments, args_hash, decision, guardrails, settings, _permit: None }
    }
}

/// Why the door stayed shut: the caller's error, and what the audit line records of it.
pub(super) struct Refusal {
    pub error: GatewayError,
    pub decision: Decision,
    /// The arguments' hash, when the refusal came after they were checked (quotas).
    pub args_hash: Option<String>,
    /// The before-hooks' decisions, when a hook refused the call.
    pub guardrails: Vec<crate::guardrail::Mark>,
    /// Instead of an error, a question for a 2026-07-28 caller (an `input_required` result
    /// asking its user to approve the call): the call is answered with it, nothing sent.
    pub question: Option<Box<serde_json::value::RawValue>>,
}

impl Gateway {
    /// Runs `tool`'s checks for `caller` on the arguments the caller sent (`params.arguments`,
    /// absent meaning `{}`), within the call's deadline (`asking`, with the caller's relay when
    /// its user can be asked to approve). The policy is asked first, so a forbidden tool tells nothing of
    /// its schema; the quotas last, so a refused call spends none.
    pub(super) async fn admit(
        &self,
        settings: &Arc<Settings>,
        caller: &Caller,
        request_id: &str,
        tool: Arc<ToolRecord>,
        arguments: Option<Value>,
        asking: super::approval::Asking<'_>,
    ) -> Result<Admitted, Box<Refusal>> {
        let deadline = asking.deadline;
        if let Some(endpoint) = &caller.endpoint
            && !settings.endpoints.selects(endpoint, &tool)
        {
            tracing::debug!(request_id, tool = %tool.name, endpoint = %endpoint, "tool outside the endpoint's selection: unknown there");
            let error = GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", tool.name.as_ref()),
            );
            return Err(Box::new(Refusal {
                error,
                decision: Decision::no_policy(),
                args_hash: None,
                guardrails: Vec::new(),
                question: None,
            }));
        }
        let (decision, cedar_approval) = self.decide(settings, caller, request_id, &tool)?;
        let arguments = match checked_arguments(&tool, arguments) {
            Ok(arguments) => arguments,
            Err(error) => {
                return Err(Box::new(Refusal {
                    error,
                    decision,
                    args_hash: None,
                    guardrails: Vec::new(),
                    question: None,
                }));
            }
        };
        let permit = match &settings.quotas {
            Some(quotas) => match quotas.check(caller.subject_or_anonymous(), &tool.name, &tool.server).await
            {
                Ok(permit) => Some(permit),
                Err(denial) => {
                    let error = denial.to_error();
                    let decision = Decision::denied_by_quota(&denial.quota);
                    let args_hash = Some(canonical_hash(&arguments));
                    return Err(Box::new(Refusal {
                        error,
                        decision,
                        args_hash,
                        guardrails: Vec::new(),
                        question: None,
                    }));
                }
            },
            None => None,
        };
        let (arguments, guardrails) = self.guard_before(settings, caller, &tool, arguments, deadline).await?;
        let args_hash = canonical_hash(&arguments);
        if let Err(stop) = self
            .approval_gate(
                settings,
                caller,
                request_id,
                &tool,
                &arguments,
                &args_hash,
                cedar_approval,
                asking,
            )
            .await
        {
            let (error, question) = match stop {
                super::approval::Stop::Refused(error) => (error, None),
                super::approval::Stop::Ask { waiting, question } => (waiting, Some(question)),
            };
            return Err(Box::new(Refusal {
                error,
                decision,
                args_hash: Some(args_hash),
                guardrails,
                question,
            }));
        }
        let settings = settings.clone();
        Ok(Admitted { tool, arguments, args_hash, decision, guardrails, settings, _permit: permit })
    }

    /// The tool policy's one decision on `tool` for `caller`, counted; a denial is refused. An
    /// allowed call may come with the approval a deciding permit asks for (`@approval`).
    fn decide(
        &self,
        settings: &Settings,
        caller: &Caller,
        request_id: &str,
        tool: &Arc<ToolRecord>,
    ) -> Result<(Decision, super::approval::CedarApproval), Box<Refusal>> {
        let Some(policy) = &settings.policy else { return Ok((Decision::no_policy(), None)) };
        let verdict = policy.decide(caller, tool);
        let outcome = if verdict.allowed { "allow" } else { "deny" };
        self.metrics.policy_decisions.with_label_values(&[&verdict.rule, &tool.server, outcome]).inc();
        let decision = Decision { allowed: verdict.allowed, rule: verdict.rule };
        if decision.allowed {
            return Ok((decision, verdict.approval));
        }
        tracing::info!(request_id, tool = %tool.name, server = %tool.server, rule = %decision.rule, subject = caller.subject_or_anonymous(), "tool call denied by policy");
        let error = GatewayError::new(
            Category::Forbidden,
            format!("the tool policy does not allow this caller to call {}", tool.name),
        )
        .with_extra("rule", Value::String(decision.rule.to_string()));
        Err(Box::new(Refusal { error, decision, args_hash: None, guardrails: Vec::new(), question: None }))
    }
}

/// The arguments object, fixed arguments set and defaults filled in, checked against the
/// tool's schema. A caller sending a fixed argument is refused: the schema it was shown has
/// no such argument, and silently replacing its value would answer another question than the
/// one it asked.
pub(super) fn checked_arguments(tool: &ToolRecord, arguments: Option<Value>) -> Result<Value, GatewayError> {
    let mut arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(object @ Value::Object(_)) => object,
        Some(_) => return Err(GatewayError::new(Category::BadInput, "arguments must be an object")),
    };
    if let Some(control) = &tool.control
        && !control.fixed.is_empty()
        && let Value::Object(given) = &mut arguments
    {
        let sent: Vec<Value> = control
            .fixed
            .keys()
            .filter(|key| given.contains_key(*key))
            .map(|key| json!({"path": format!("/{key}"), "message": format!("{key} is set by the gateway for {}; leave it out", tool.name)}))
            .collect();
        if !sent.is_empty() {
            return Err(GatewayError::new(
                Category::BadInput,
                format!("arguments of {} set what the gateway fixes ({} argument(s))", tool.name, sent.len()),
            )
            .with_extra("violations", Value::Array(sent)));
        }
        given.extend(control.fixed.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    tool.schema.check(&mut arguments).map_err(|violations| {
        GatewayError::new(
            Category::BadInput,
            format!(
                "arguments do not match the inputSchema of {} ({} violation(s))",
                tool.name,
                violations.len()
            ),
        )
        .with_extra("violations", Value::Array(violations))
    })?;
    Ok(arguments)
}
