//! One `tools/call`: resolve → validate and default → quotas (a refused call ends here,
//! before any breaker or upstream) → (read-only: cache, join an identical call in flight) →
//! forward through the server's stack → on failure, a configured fallback → cut to the size
//! budget → answer. Every exit records one metric sample, one log line and (when the audit
//! trail is on) one audit line.
//!
//! Progress and log entries: when the inbound side can deliver them to its caller it puts
//! sinks in the [`CallContext`] ([`Notifications`](crate::backchannel::Notifications), from
//! [`crate::backchannel::progress_channel`]); only a call that really goes upstream for this
//! caller carries them (the direct forward, or the leader of identical calls). A cache hit, a
//! follower sharing a leader's result and a fallback (stale or alternative tool) report
//! nothing: their result is the caller's whole answer. Cancellation: dropping `call_tool`'s
//! future is the one cancellation path (a caller gone, or a `notifications/cancelled` naming
//! the call);
//! [`CallContext::cancelled`] only decides which outcome the log line and metric record.
//!
//! This file holds the pipeline itself; its stages live beside it: `read_only` (cache and
//! joining an identical call in flight), `answering` (multi-round-trip questions, relayed or
//! held), `forward` (the upstream request and the server's stack), `fallback`, and `record`
//! (the metric, log line and audit line of every exit); `context` holds what they all share.

mod answering;
mod context;
mod fallback;
mod forward;
mod read_only;
mod record;

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value, json, value::RawValue};

use super::{Gateway, outbound::Released, settings::Settings};
use crate::{
    audit::Decision,
    backchannel::Relay,
    error::{Category, GatewayError},
    protocol::{mcp, mrtr},
    registry::ToolRecord,
    resilience::truncate,
};
pub use context::{CallContext, META_IDEMPOTENCY_KEY, META_TIMEOUT_MS};
use forward::Forwarded;
use read_only::result_key;
pub use record::{CANCELLED, DISCONNECTED};
use record::{Decided, Unanswered};

impl Gateway {
    /// The catalogue tool whose exported name (mapped for a model API) is `name`.
    fn exported_alias(&self, name: &str) -> Option<std::sync::Arc<crate::registry::ToolRecord>> {
        // The snapshot's alias map: built once per snapshot, a hash probe per name.
        let builds = &self.metrics.alias_map_builds;
        self.catalog().snapshot().exported_alias(name, || builds.inc())
    }

    /// Runs a `tools/call`; the `Ok` value is the result (the upstream's, passed through
    /// untouched unless a fallback, an after-hook or the size budget changed it), released by
    /// the outbound step (`gateway/outbound.rs`); an upstream's own error is released by it too.
    pub async fn call_tool(
        &self,
        params: Option<Value>,
        ctx: &CallContext,
    ) -> Result<Released<Box<RawValue>>, GatewayError> {
        let started = Instant::now();
        // The settings in force now are this call's to its end (`settings`).
        let settings = self.settings();
        let mut params = match params {
            Some(Value::Object(map)) => map,
            _ => {
                return Err(self.refuse(
                    ctx,
                    started,
                    None,
                    bad_input("params must be an object with a tool name"),
                ));
            }
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(self.refuse(ctx, started, None, bad_input("params.name must be a string")));
        };
        // Search mode: `search_tools` is answered here; `call_tool` becomes the named tool's call.
        let mut for_the_model = false;
        if self.catalog().is_meta_tool(name) {
            for_the_model = true;
            if name == crate::tool_control::SEARCH_TOOLS {
                return self
                    .search_tools(&params, &ctx.caller)
                    .map(Released::search_answer)
                    .map_err(|err| self.refuse(ctx, started, None, err));
            }
            if let Err(err) = super::search::unwrap_call_tool(&mut params) {
                return Err(self.refuse(ctx, started, None, err));
            }
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(self.refuse(ctx, started, None, bad_input("params.name must be a string")));
        };
        // An endpoint's own name for a tool (`[endpoints.NAME.tools.TOOL] rename`) stands for
        // the catalogue's; the name it renamed away is unknown there.
        let name = match &ctx.caller.endpoint {
            Some(endpoint) => settings.endpoints.catalogue_name(endpoint, name),
            None => Some(name),
        };
        let Some(name) = name else {
            let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
            let err = GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", truncated(name)),
            )
            .with_tool(truncated(name));
            return Err(self.refuse(ctx, started, None, err));
        };
        // A name from a model API export (`GET /tools?format=…`) that was mapped to fit the
        // API's rule stands for a catalogue tool; the audit line keeps the name asked for.
        let (resolved, alias) = match self.registry.resolve(name).await {
            Some(tool) => (Some(tool), None),
            None => (self.exported_alias(name), Some(Arc::<str>::from(truncated(name)))),
        };
        // A tool for an MCP App only is called by the app's host: to any other caller (and
        // through `call_tool`, which the model calls) it is unknown, as a hidden tool is.
        let resolved = resolved.filter(|tool| {
            !crate::protocol::extensions::app_only(tool.definition.head()) || (ctx.apps && !for_the_model)
        });
        let Some(tool) = resolved else {
            self.refresh_now.notify_one();
            let err = GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", truncated(name)),
            )
            .with_tool(truncated(name));
            return Err(self.refuse(ctx, started, None, err));
        };
        // The caller's arguments as sent are kept (copied) only when an alternative tool may
        // need them: the alternative passes the door on them, under its own rules.
        let raw_arguments = params.remove("arguments");
        let kept = settings.settings_of(&tool).fallback_tool.is_some().then(|| raw_arguments.clone());
        // Dropping this future while the quotas are asked still records the call.
        let mut unanswered = Unanswered {
            gateway: self,
            ctx,
            started,
            tool: tool.clone(),
            args_hash: String::new(),
            decision: Decision::no_policy(),
            armed: true,
        };
        let deadline = caller_deadline(ctx.deadline, params.get("_meta"));
        // What only the door's refusals need (a task-asking caller's params, a modern
        // caller's approval round) lives in this block, not across the rest of the call.
        let admitted = {
            // A session-era caller asking for a task keeps its call's params: needing an approval,
            // it gets a task of the gateway's own that makes the call once approved.
            let for_task = (params.contains_key("task")
                && !mcp::is_modern(params.get("_meta").map(|m| json!({"_meta": m})).as_ref()))
            .then(|| {
                let mut kept = params.clone();
                if let Some(arguments) = &raw_arguments {
                    kept.insert("arguments".into(), arguments.clone());
                }
                kept
            });
            // A 2026-07-28 caller may be asked to approve by an `input_required` question, and its
            // retry answering it is taken out of the call here (the server never asked it).
            let modern = mcp::is_modern(params.get("_meta").map(|meta| json!({"_meta": meta})).as_ref())
                .then(|| super::approval::ModernRound::take(&mut params));
            let asking = super::approval::Asking {
                relay: ctx.notifications.relay.as_ref(),
                deadline,
                modern: modern.as_ref(),
            };
            let admission =
                self.admit(&settings, &ctx.caller, &ctx.request_id, tool.clone(), raw_arguments, asking);
            match admission.await {
                Ok(admitted) => admitted,
                Err(refusal) => {
                    unanswered.armed = false;
                    // An unknown tool (outside the caller's endpoint) names no server.
                    let err = match refusal.error.category {
                        Category::UnknownTool => refusal.error.with_tool(tool.name.clone()),
                        _ => refusal.error.with_tool(tool.name.clone()).with_server(tool.server.clone()),
                    };
                    let decided = Decided {
                        decision: refusal.decision,
                        requested: alias,
                        ran: None,
                        guardrails: refusal.guardrails,
                    };
                    // A task-asking caller whose call waits for an approval: a task of the gateway's
                    // own, completed by the call once approved.
                    let approval_id = err
                        .extra
                        .as_deref()
                        .filter(|(key, _)| *key == "approval")
                        .and_then(|(_, facts)| facts.get("id"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    if err.category == Category::ApprovalRequired
                        && let (Some(kept), Some(approval)) = (for_task, approval_id)
                        && matches!(self.task_parameter(&tool, &kept), Ok(Some(_)))
                    {
                        let created = self.start_approval_task(kept, ctx, &approval);
                        self.record(
                            ctx,
                            started,
                            Some(&tool),
                            "approval_task",
                            0,
                            refusal.args_hash,
                            decided,
                        );
                        return created
                            .and_then(|task| {
                                serde_json::value::to_raw_value(&task)
                                    .map_err(|e| GatewayError::new(Category::Internal, e.to_string()))
                            })
                            .map(Released::search_answer);
                    }
                    // A question for a modern caller (its user's approval): an answer, not an error.
                    if let Some(question) = refusal.question {
                        self.record(
                            ctx,
                            started,
                            Some(&tool),
                            "input_required",
                            0,
                            refusal.args_hash,
                            decided,
                        );
                        return Ok(Released::search_answer(question));
                    }
                    // A quota's refusal is the caller's, not an upstream's 429: its own outcome, out
                    // of the server's error ratio.
                    let outcome = match err.category {
                        Category::RateLimited => "quota_refused",
                        category => category.as_str(),
                    };
                    self.record(ctx, started, Some(&tool), outcome, 0, refusal.args_hash, decided);
                    return Err(err);
                }
            }
        };
        unanswered.args_hash = admitted.args_hash().to_owned();
        unanswered.decision = admitted.decision().clone();
        // The outbound step screens what the call's stream carries (progress, log entries,
        // relayed requests) when after-hooks guard this tool.
        // Boxed: taken only when hooks match; inline it would grow every call's future.
        let screened = self.screened_notifications(&settings, &tool.name, &tool.server, &ctx.notifications);
        let screened_ctx =
            screened.map(|notifications| Box::new(CallContext { notifications, ..ctx.clone() }));
        let ctx = screened_ctx.as_deref().unwrap_or(ctx);
        // Tasks: a 2025-11-25 `task` parameter goes to the server as the caller sent it (checked);
        // a modern caller declaring the tasks extension lets the gateway ask for a task where
        // the tool can only run as one. Such a call holds a slot of the task table.
        let task = match self.task_parameter(&tool, &params) {
            Ok(task) => task,
            Err(err) => {
                unanswered.armed = false;
                return Err(self.refuse_decided(ctx, started, Some(&tool), err, admitted.decision().clone()));
            }
        };
        let slot = match &task {
            Some(_) => match self.tasks().reserve() {
                Ok(slot) => Some(slot),
                Err(err) => {
                    unanswered.armed = false;
                    return Err(self.refuse_decided(
                        ctx,
                        started,
                        Some(&tool),
                        err,
                        admitted.decision().clone(),
                    ));
                }
            },
            None => None,
        };
        // Task creation is server-directed in the 2026-07-28 extension: a modern caller that
        // declared it lets the server answer a call with a task, and a task it is answered with
        // is recorded as a requested one is (below). A read-only call the gateway may cache or
        // share goes without the caller's declaration (the server answers it plainly), unless
        // the tool says it may run as a task: then it is the caller's own call (a task handle
        // is never cached nor shared).
        let server_may_task = task.is_none() && declares_tasks(&params);
        let may_run_as_task = server_may_task
            && crate::protocol::tasks::task_support(tool.definition.head())
                != crate::protocol::tasks::TaskSupport::Forbidden;
        let meta = params.get("_meta");
        let round = mrtr::Round::of(&params);
        let key = result_key(&tool.name, admitted.args_hash(), meta, ctx.caller.subject.as_deref());

        // A call that may relay requests to its caller is its own: never served from the
        // cache nor shared with identical calls (the answer may hold what its caller said).
        // Nor is a call whose server's credentials are the caller's own (token exchange,
        // pass-through): its result is for that caller only. Nor is a round of a
        // multi-round-trip request (the server may ask this caller, or it answers a question).
        let (mut result, mut ending) = if tool.read_only
            && task.is_none()
            && !may_run_as_task
            && ctx.notifications.relay.is_none()
            && !settings.credentials_per_caller(&tool.server)
            && !round.is_conversation()
        {
            self.call_read_only(&admitted, &key, meta, deadline, &ctx.notifications, &ctx.caller).await
        } else {
            let notifications = self.with_asker(ctx, meta, &round, &tool, admitted.args_hash());
            let call = Forwarded { admitted: &admitted, meta, round, deadline, task: task.clone() };
            self.forward_answering(call, notifications, ctx).await
        };
        // A task the server chose to create for a caller that declared it can take one: a
        // slot of the table now (the table full: refused, the upstream task left to its ttl).
        let server_tasked = server_may_task
            && result.as_ref().is_ok_and(|raw| crate::protocol::tasks::is_extension_task(raw.get()));
        let slot = match slot {
            None if server_tasked => match self.tasks().reserve() {
                Ok(slot) => Some(slot),
                Err(err) => {
                    result = Err(err);
                    None
                }
            },
            slot => slot,
        };
        // A task the server created: recorded for routing, its id the gateway's own. The call
        // ends here; the task lives on upstream.
        if let (Some(slot), Ok(raw)) = (slot, &result) {
            result = match self.upstream_in(&settings, &tool).await {
                Ok(upstream) => {
                    let owner = ctx.owner.clone();
                    let dedicated = ctx.notifications.relay.as_ref().map(|r| r.caller.clone());
                    let guard = (settings.has_hooks() && settings.guards_results_of(&tool)).then(|| {
                        super::tasks::TaskGuard {
                            tool: tool.clone(),
                            arguments: admitted.arguments().clone(),
                        }
                    });
                    let form = task_form(meta);
                    self.record_task(
                        slot,
                        raw.clone(),
                        upstream,
                        owner,
                        dedicated,
                        form,
                        guard,
                        tool.name.clone(),
                    )
                }
                Err(err) => Err(err),
            };
        }
        // Nor is a call that relayed a request followed by a fallback: someone was asked.
        let relayed = ctx.notifications.relay.as_ref().is_some_and(Relay::relayed);
        let mut ran = None;
        if let Err(err) = &result
            && !relayed
            && task.is_none()
            && !server_tasked
            && let Some(fallback) = self
                .fallback(&settings, &tool, &key, kept, meta, deadline, err, ending.maybe_delivered, ctx)
                .await
        {
            let kind = fallback.kind();
            self.metrics
                .fallbacks
                .with_label_values(&[self.metrics.tool_label(&tool.name, &tool.server), kind])
                .inc();
            ending.outcome = if kind == "stale" { "fallback_stale" } else { "fallback_alternative" };
            ran = fallback.alternative.clone();
            result = Ok(fallback.result);
        }
        // The outbound step on the answer the caller gets (a cache hit, a shared or a fallback
        // result too), before the size budget: the `resultType` rule and the after-hooks; a
        // task's creation passes (the task table's), a well-formed question to the caller too.
        let mut guardrails = admitted.guardrails().to_vec();
        result = match result {
            Ok(raw) => {
                let arguments = admitted.arguments();
                let released = self.release_result(
                    &settings,
                    &ctx.caller,
                    &tool,
                    arguments,
                    raw,
                    task.is_some() || server_tasked,
                    deadline,
                    &mut guardrails,
                );
                let released = released.await;
                if let Err(err) = &released
                    && matches!(err.category, Category::Guardrail | Category::UpstreamProtocol)
                {
                    ending.outcome = err.category.as_str();
                }
                released
            }
            Err(err) => Err(self.release_error(&settings, &tool.name, &tool.server, err)),
        };
        let result = result.map(|raw| Self::released_result(self.fit_budget(&settings, &tool, raw)));
        unanswered.armed = false;
        let args_hash = std::mem::take(&mut unanswered.args_hash);
        let decided = Decided { decision: admitted.decision().clone(), requested: alias, ran, guardrails };
        self.record(ctx, started, Some(&tool), ending.outcome, ending.attempts, Some(args_hash), decided);
        result.map_err(|e| e.with_tool(tool.name.clone()).with_server(tool.server.clone()))
    }

    /// The `task` parameter the upstream call carries, if any: the caller's own (2025-11-25,
    /// checked), or for a modern caller that declared the tasks extension an empty one when
    /// the tool can only run as a task (the extension lets the server decide; the gateway
    /// decides for a session-era server that cannot).
    fn task_parameter(
        &self,
        tool: &ToolRecord,
        params: &Map<String, Value>,
    ) -> Result<Option<Value>, GatewayError> {
        if let Some(task) = crate::protocol::tasks::requested(params).map_err(bad_input)? {
            return Ok(Some(task));
        }
        if declares_tasks(params)
            && crate::protocol::tasks::task_support(tool.definition.head())
                == crate::protocol::tasks::TaskSupport::Required
        {
            return Ok(Some(json!({})));
        }
        Ok(None)
    }

    fn fit_budget(&self, settings: &Settings, tool: &ToolRecord, raw: Box<RawValue>) -> Box<RawValue> {
        let budget =
            settings.settings_of(tool).max_result_bytes.unwrap_or(settings.config.defaults.max_result_bytes);
        match truncate::truncate(&raw, budget) {
            Some(cut) => {
                self.metrics
                    .truncations
                    .with_label_values(&[self.metrics.tool_label(&tool.name, &tool.server)])
                    .inc();
                cut
            }
            None => raw,
        }
    }
}

/// Whether a call comes from a modern (2026-07-28) caller that declared the tasks extension in
/// its per-request capabilities (forwarded as they are: the server may then answer a task).
fn declares_tasks(params: &Map<String, Value>) -> bool {
    let wrapped = params.get("_meta").map(|meta| json!({"_meta": meta}));
    mcp::is_modern(wrapped.as_ref()) && crate::protocol::tasks::declares_extension(wrapped.as_ref())
}

fn bad_input(detail: &str) -> GatewayError {
    GatewayError::new(Category::BadInput, detail)
}

/// Caller-supplied names are echoed in errors, but never unboundedly.
fn truncated(name: &str) -> &str {
    match name.char_indices().nth(64) {
        Some((i, _)) => &name[..i],
        None => name,
    }
}

/// The earlier of the header deadline and a `_meta` one.
fn caller_deadline(header: Option<Instant>, meta: Option<&Value>) -> Option<Instant> {
    let from_meta =
        meta.and_then(|m| m.get(META_TIMEOUT_MS)).and_then(Value::as_u64).map(crate::clock::after_millis);
    match (header, from_meta) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The form a caller reads tasks in: the extension's for a modern caller.
fn task_form(meta: Option<&Value>) -> crate::protocol::tasks::Form {
    let wrapped = meta.map(|meta| json!({"_meta": meta}));
    if mcp::is_modern(wrapped.as_ref()) {
        crate::protocol::tasks::Form::Extension
    } else {
        crate::protocol::tasks::Form::Session
    }
}
