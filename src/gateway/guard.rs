//! Running the guardrail hooks (`crate::guardrail`) on a call: before it (on the arguments
//! the door checked) and after it (on the result the caller is about to get) — for a tool call,
//! and for the federated items of `prompts/get`, `completion/complete` and `resources/read`
//! ([`Subject`]: what the hooks are run on; the outbound step, `outbound.rs`, decides when). A hook that is
//! an MCP tool is called through its server's own stack — breaker, retries, credentials —
//! straight to that server, never through `call_tool`: a hook's call is not a caller's call,
//! so it passes no door and meets no hook (no recursion), and carries no caller token.
//!
//! Every decision is counted (`mcp_gateway_guardrail_decisions_total{hook,tool,decision}`)
//! and returned as a [`Mark`] for the call's audit line; neither holds what a rule matched.

use std::time::Instant;

use serde_json::{Map, Value, json, value::RawValue};
use tower::ServiceExt;

use super::{Gateway, settings::Settings};
use crate::{
    config::hooks::{BuiltinRule, FailureMode, HookPhase},
    error::{Category, GatewayError},
    guardrail::{
        Hook, HookKind, Mark,
        contract::{self, ItemKind, Verdict},
        decision,
    },
    identity::Caller,
    registry::ToolRecord,
    upstream::{UpstreamReply, UpstreamRequest},
};

/// A call a hook refused, with every decision made on it so far.
pub(super) struct Guarded {
    pub error: GatewayError,
    pub marks: Vec<Mark>,
    /// The hook that refused (the audit line's rule).
    pub hook: std::sync::Arc<str>,
}

/// What hooks run on: a tool, or a federated item (a prompt, a resource, a completion) by its
/// name on its server — a hook's `match_tools` patterns are matched against that name (the
/// prompt's, the resource's URI, the completion's prompt or template), its `match_servers`
/// against the server.
pub(super) struct Subject<'a> {
    pub kind: ItemKind,
    pub name: &'a str,
    pub server: &'a str,
    /// The metric's `tool` label for a federated item (its method); `None`: the tool's own.
    pub label: Option<&'static str>,
}

impl<'a> Subject<'a> {
    pub fn tool(tool: &'a ToolRecord) -> Self {
        Self { kind: ItemKind::Tool, name: &tool.name, server: &tool.server, label: None }
    }
}

/// How a hook's run ended, before its failure mode is applied.
enum Ran {
    Verdict(Verdict),
    TimedOut,
    Failed(String),
}

impl Gateway {
    /// The before-hooks on the checked arguments (none configured: the arguments as they are).
    /// A replacement passes catalogue control and the schema again: a fixed argument it leaves
    /// at its value stays, one it changes is refused; a refusal names the hook as the rule.
    pub(super) async fn guard_before(
        &self,
        settings: &Settings,
        caller: &Caller,
        tool: &std::sync::Arc<ToolRecord>,
        arguments: Value,
        deadline: Option<std::time::Instant>,
    ) -> Result<(Value, Vec<Mark>), Box<super::door::Refusal>> {
        if !settings.has_hooks() {
            return Ok((arguments, Vec::new()));
        }
        let recheck = |mut replaced: Value| {
            if let (Some(control), Value::Object(given)) = (&tool.control, &mut replaced) {
                given.retain(|key, value| control.fixed.get(key) != Some(value));
            }
            super::door::checked_arguments(tool, Some(replaced))
        };
        let subject = Subject::tool(tool);
        match self.guard_arguments(settings, caller, &subject, arguments, deadline, recheck).await {
            Ok(guarded) => Ok(guarded),
            Err(guarded) => {
                let args_hash = None;
                let decision = crate::audit::Decision {
                    allowed: false,
                    rule: format!("guardrail:{}", guarded.hook).into(),
                };
                Err(Box::new(super::door::Refusal {
                    error: guarded.error,
                    decision,
                    args_hash,
                    guardrails: guarded.marks,
                    question: None,
                }))
            }
        }
    }

    /// The before-hooks of `tool`, in order, on `arguments` (as the door checked them). A
    /// replacement is checked again by `recheck` (the door's catalogue control and schema);
    /// one that fails it is a failure of the hook. The first refusal ends the run.
    pub(super) async fn guard_arguments(
        &self,
        settings: &Settings,
        caller: &Caller,
        tool: &Subject<'_>,
        mut arguments: Value,
        deadline: Option<Instant>,
        recheck: impl Fn(Value) -> Result<Value, GatewayError>,
    ) -> Result<(Value, Vec<Mark>), Box<Guarded>> {
        let mut marks = Vec::new();
        for hook in settings.hooks.matching(HookPhase::Before, tool.name, tool.server) {
            let ran = match &hook.kind {
                HookKind::Builtin { rule: BuiltinRule::Refuse, detectors } => {
                    if detectors.finds_in(&arguments) {
                        Ran::Verdict(Verdict::Deny {
                            reason: Some("the arguments hold a value this guardrail refuses".into()),
                        })
                    } else {
                        Ran::Verdict(Verdict::Allow)
                    }
                }
                HookKind::Builtin { .. } => Ran::Verdict(Verdict::Allow),
                HookKind::Tool { server, tool: hook_tool } => {
                    let input = contract::hook_input(
                        HookPhase::Before,
                        &hook.name,
                        tool.kind,
                        tool.name,
                        tool.server,
                        &arguments,
                        None,
                        caller,
                    );
                    self.run_hook_tool(settings, hook, server, hook_tool, input, deadline).await
                }
            };
            let ran = match ran {
                Ran::Verdict(Verdict::Replace(replacement)) => match recheck(replacement) {
                    Ok(checked) => {
                        arguments = checked;
                        Ran::Verdict(Verdict::Replace(Value::Null))
                    }
                    Err(error) => Ran::Failed(format!(
                        "its arguments fail the {}'s checks ({})",
                        tool.kind.as_str(),
                        error.category.as_str()
                    )),
                },
                other => other,
            };
            let (label, refused) = self.settle(hook, tool, ran);
            marks.push(Mark { hook: hook.name.clone(), phase: HookPhase::Before, decision: label });
            if let Some(error) = refused {
                return Err(Box::new(Guarded { error, marks, hook: hook.name.clone() }));
            }
        }
        Ok((arguments, marks))
    }

    /// The after-hooks of `tool`, in order, on the result `raw` of a call made with
    /// `arguments`; a result a hook changed is serialised again (the size budget is applied
    /// after this).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn guard_result(
        &self,
        settings: &Settings,
        caller: &Caller,
        tool: &ToolRecord,
        arguments: &Value,
        raw: Box<RawValue>,
        deadline: Option<Instant>,
        marks: &mut Vec<Mark>,
    ) -> Result<Box<RawValue>, GatewayError> {
        if !settings.hooks.guards_results_of(&tool.name, &tool.server) {
            return Ok(raw);
        }
        // A result the gateway cannot read (nested past serde_json's depth limit) is not let
        // through unguarded.
        let Ok(result) = serde_json::from_str::<Value>(raw.get()) else {
            return Err(GatewayError::new(
                Category::Guardrail,
                "the result cannot be read for the guardrails that apply to it",
            ));
        };
        let subject = Subject::tool(tool);
        let check = |replacement: Value| contract::check_result(&replacement).map(|()| replacement);
        match self.guard_value(settings, caller, &subject, arguments, result, deadline, marks, check).await? {
            (_, false) => Ok(raw),
            (result, true) => serde_json::value::to_raw_value(&result).map_err(|e| {
                GatewayError::new(Category::Internal, format!("serialising a guarded result: {e}"))
            }),
        }
    }

    /// The after-hooks on a result (or item) of `tool`; whether one changed it. A replacement
    /// is checked by `check` as an upstream's answer of that kind is (and may be fitted by it).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn guard_value(
        &self,
        settings: &Settings,
        caller: &Caller,
        tool: &Subject<'_>,
        arguments: &Value,
        mut result: Value,
        deadline: Option<Instant>,
        marks: &mut Vec<Mark>,
        check: impl Fn(Value) -> Result<Value, String>,
    ) -> Result<(Value, bool), GatewayError> {
        let mut changed = false;
        for hook in settings.hooks.matching(HookPhase::After, tool.name, tool.server) {
            let ran = match &hook.kind {
                HookKind::Builtin { rule: BuiltinRule::Redact, detectors } => {
                    if detectors.redact_item(tool.kind, &mut result) {
                        changed = true;
                        Ran::Verdict(Verdict::Replace(Value::Null))
                    } else {
                        Ran::Verdict(Verdict::Allow)
                    }
                }
                HookKind::Builtin { .. } => Ran::Verdict(Verdict::Allow),
                HookKind::Tool { server, tool: hook_tool } => {
                    let input = contract::hook_input(
                        HookPhase::After,
                        &hook.name,
                        tool.kind,
                        tool.name,
                        tool.server,
                        arguments,
                        Some(&result),
                        caller,
                    );
                    match self.run_hook_tool(settings, hook, server, hook_tool, input, deadline).await {
                        Ran::Verdict(Verdict::Replace(replacement)) => match check(replacement) {
                            Ok(checked) => {
                                result = checked;
                                changed = true;
                                Ran::Verdict(Verdict::Replace(Value::Null))
                            }
                            Err(reason) => Ran::Failed(format!(
                                "its result is no well-formed {} answer: {reason}",
                                tool.kind.as_str()
                            )),
                        },
                        other => other,
                    }
                }
            };
            let (label, refused) = self.settle(hook, tool, ran);
            marks.push(Mark { hook: hook.name.clone(), phase: HookPhase::After, decision: label });
            if let Some(error) = refused {
                return Err(error);
            }
        }
        Ok((result, changed))
    }

    /// The decision label of a hook's run (its failure mode applied), counted and logged, and
    /// the caller's error when it refuses the call.
    fn settle(&self, hook: &Hook, tool: &Subject<'_>, ran: Ran) -> (&'static str, Option<GatewayError>) {
        // A resource's URI is logged as every URI is: its query values redacted.
        let logged = match tool.kind {
            ItemKind::Resource => std::borrow::Cow::Owned(crate::redact::url(tool.name)),
            _ => std::borrow::Cow::Borrowed(tool.name),
        };
        let closed = hook.failure == FailureMode::Closed;
        let (label, refused) = match ran {
            Ran::Verdict(Verdict::Allow) => (decision::ALLOW, None),
            Ran::Verdict(Verdict::Replace(_)) => (decision::REPLACE, None),
            Ran::Verdict(Verdict::Deny { reason }) => (decision::DENY, Some(hook.refusal(reason.as_deref()))),
            Ran::TimedOut if closed => {
                (decision::TIMEOUT_CLOSED, Some(hook.refusal(Some("the guardrail did not answer in time"))))
            }
            Ran::TimedOut => (decision::TIMEOUT_OPEN, None),
            Ran::Failed(why) => {
                tracing::warn!(hook = %hook.name, kind = tool.kind.as_str(), tool = %logged, reason = %why, "guardrail hook failed");
                if closed {
                    (decision::ERROR_CLOSED, Some(hook.refusal(Some("the guardrail failed"))))
                } else {
                    (decision::ERROR_OPEN, None)
                }
            }
        };
        // A tool's own label (bounded by the catalogue); a federated item's is its method.
        let tool_label = match tool.label {
            Some(method) => method,
            None => self.metrics.tool_label(tool.name, tool.server),
        };
        self.metrics.guardrail_decisions.with_label_values(&[&hook.name, tool_label, label]).inc();
        tracing::info!(hook = %hook.name, phase = hook.phase.as_str(), kind = tool.kind.as_str(), tool = %logged, decision = label, "guardrail decision");
        (label, refused)
    }

    /// Calls a hook tool on its configured server, within the hook's timeout and the call's
    /// deadline, and reads its verdict.
    async fn run_hook_tool(
        &self,
        settings: &Settings,
        hook: &Hook,
        server: &str,
        hook_tool: &std::sync::Arc<str>,
        input: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Ran {
        let Some(upstream) = settings.upstreams.get(server) else {
            return Ran::Failed(format!("server {server} is not configured"));
        };
        let own = Instant::now() + hook.timeout;
        let until = deadline.map_or(own, |deadline| deadline.min(own));
        let mut params = Map::new();
        params.insert("name".into(), json!(hook_tool.as_ref()));
        params.insert("arguments".into(), Value::Object(input));
        let mut request = UpstreamRequest::new("tools/call", params);
        request.tool = Some(hook_tool.clone());
        request.deadline = Some(until);
        let answer = tokio::time::timeout_at(until.into(), upstream.service.clone().oneshot(request)).await;
        let reply = match answer {
            Err(_) => return Ran::TimedOut,
            Ok(Ok(UpstreamReply::Result(raw))) => raw.into_raw(),
            Ok(Ok(UpstreamReply::Error(error))) => {
                return Ran::Failed(format!("the hook tool answered JSON-RPC error {}", error.code));
            }
            Ok(Err(error)) => {
                let error = GatewayError::from_upstream(&error);
                if error.category == Category::Timeout {
                    return Ran::TimedOut;
                }
                return Ran::Failed(format!("the hook's server failed ({})", error.category.as_str()));
            }
        };
        let result: Value = match serde_json::from_str(reply.get()) {
            Ok(value) => value,
            Err(_) => return Ran::Failed("the hook's answer is not JSON".into()),
        };
        match contract::read_verdict(hook.phase, &result) {
            Ok(verdict) => Ran::Verdict(verdict),
            Err(reason) => Ran::Failed(reason),
        }
    }
}
