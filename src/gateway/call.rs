//! One `tools/call`: resolve → validate and default → quotas (a refused call ends here,
//! before any breaker or upstream) → (read-only: cache, join an identical call in flight) →
//! forward through the server's stack → on failure, a configured fallback → cut to the size
//! budget → answer. Every exit records one metric sample, one log line and (when the audit
//! trail is on) one audit line.
//!
//! Progress and log entries: when the inbound side can deliver them to its caller it puts
//! sinks in the [`CallContext`] ([`Notifications`], from
//! [`crate::backchannel::progress_channel`]); only a call that really goes upstream for this
//! caller carries them (the direct forward, or the leader of identical calls). A cache hit, a
//! follower sharing a leader's result and a fallback (stale or alternative tool) report
//! nothing: their result is the caller's whole answer. Cancellation: dropping `call_tool`'s
//! future is the one cancellation path (a caller gone, or a `notifications/cancelled` naming
//! the call);
//! [`CallContext::cancelled`] only decides which outcome the log line and metric record.

use super::forwarded_meta::forwarded_meta;
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json, value::RawValue};
use tower::ServiceExt;

use super::{Gateway, door::Admitted, settings::Settings};
use crate::{
    audit::{AuditEntry, Decision},
    backchannel::{
        Notifications, Relay,
        held::{self, Asker, Binding, Step, Taken},
    },
    error::{Category, GatewayError},
    identity::Caller,
    protocol::{mcp, mrtr, param_headers},
    registry::{ToolRecord, record::canonical_hash},
    resilience::{cache::SharedResult, classify::Outcome, fallback, truncate},
    singleflight::{Join, Waited},
    telemetry::recent_calls::RecentCall,
    upstream::{UpstreamReply, UpstreamRequest},
};

/// `_meta` key a caller may use to set its deadline, in milliseconds.
pub const META_TIMEOUT_MS: &str = "io.mcp-gateway/timeoutMs";
/// `_meta` key of the idempotency key: a caller may supply one; the gateway derives the key
/// it sends upstream (identical on every attempt) from tool, canonical arguments and it.
pub const META_IDEMPOTENCY_KEY: &str = "io.mcp-gateway/idempotencyKey";

/// Who is asking, for the log line, and by when they need the answer.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub request_id: Arc<str>,
    pub jsonrpc_id: Value,
    /// From the `X-Request-Timeout-Ms` header.
    pub deadline: Option<Instant>,
    /// Where the upstream's progress and log entries go, when the caller can receive them.
    pub notifications: Notifications,
    /// Set when the caller cancelled the call (`notifications/cancelled`) before dropping it.
    pub cancelled: Arc<AtomicBool>,
    /// Who is calling.
    pub caller: Arc<crate::identity::Caller>,
    /// The caller's `Mcp-Session-Id`, if it sent one: with the owner, whose retry may answer a
    /// question held for it (`backchannel::held`).
    pub session: Option<Arc<str>>,
    /// Whose what the call leaves behind is (a task, a held question): [`crate::ownership`].
    pub owner: crate::ownership::Owner,
}

/// Most rounds of a multi-round-trip call answered for a session-era caller.
const MAX_INPUT_ROUNDS: usize = 8;

/// Tool-label for calls whose tool could not be resolved (bounded cardinality).
const UNRESOLVED: &str = "<unresolved>";

/// How a call ended, for metrics and the log line.
struct Ending {
    outcome: &'static str,
    attempts: u32,
    /// Whether the request may have reached a server (decides whether a fallback may run).
    maybe_delivered: bool,
}

impl Ending {
    fn unsent(outcome: &'static str) -> Self {
        Self { outcome, attempts: 0, maybe_delivered: false }
    }
}

/// The log line and metric of a call whose caller went away before the answer: dropping the
/// call's future (the HTTP connection closed) drops this armed, and it records the call.
struct Unanswered<'a> {
    gateway: &'a Gateway,
    ctx: &'a CallContext,
    started: Instant,
    tool: Arc<ToolRecord>,
    args_hash: String,
    decision: Decision,
    armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.armed {
            let hash = Some(std::mem::take(&mut self.args_hash)).filter(|hash| !hash.is_empty());
            let tool = Some(&self.tool);
            let outcome = if self.ctx.cancelled.load(Ordering::Relaxed) { CANCELLED } else { DISCONNECTED };
            let decided = Decided {
                decision: self.decision.clone(),
                requested: None,
                ran: None,
                guardrails: Vec::new(),
            };
            self.gateway.record(self.ctx, self.started, tool, outcome, 0, hash, decided);
        }
    }
}

/// What the audit line of a call says besides its outcome: the gateway's decision, the name
/// asked for when it is not the recorded tool's (no tool resolved, or an export alias), and
/// the tool that really ran when it is not the one asked for (a fallback's alternative).
struct Decided {
    decision: Decision,
    requested: Option<Arc<str>>,
    ran: Option<Arc<ToolRecord>>,
    /// The guardrail hooks' decisions, before and after the call.
    guardrails: Vec<crate::guardrail::Mark>,
}

/// The outcome label of a call whose caller disconnected before the answer.
pub const DISCONNECTED: &str = "caller_disconnected";
/// The outcome label of a call its caller cancelled with `notifications/cancelled`.
pub const CANCELLED: &str = "cancelled";

/// Keeps `mcp_gateway_in_flight` right however the call ends (answered or dropped).
struct InFlightGuard(prometheus::IntGauge);

impl InFlightGuard {
    fn new(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Gateway {
    /// The catalogue tool whose exported name (mapped for a model API) is `name`.
    fn exported_alias(&self, name: &str) -> Option<std::sync::Arc<crate::registry::ToolRecord>> {
        // The snapshot's alias map: built once per snapshot, a hash probe per name.
        let builds = &self.metrics.alias_map_builds;
        self.catalog().snapshot().exported_alias(name, || builds.inc())
    }

    /// Runs a `tools/call`; the `Ok` value is the result (the upstream's, passed through
    /// untouched unless a fallback or the size budget changed it).
    pub async fn call_tool(
        &self,
        params: Option<Value>,
        ctx: &CallContext,
    ) -> Result<Box<RawValue>, GatewayError> {
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
        if self.catalog().is_meta_tool(name) {
            if name == crate::tool_control::SEARCH_TOOLS {
                return self
                    .search_tools(&params, &ctx.caller)
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
        let admission =
            self.admit(&settings, &ctx.caller, &ctx.request_id, tool.clone(), raw_arguments, deadline);
        let admitted = match admission.await {
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
                let outcome = err.category.as_str();
                self.record(ctx, started, Some(&tool), outcome, 0, refusal.args_hash, decided);
                return Err(err);
            }
        };
        unanswered.args_hash = admitted.args_hash().to_owned();
        unanswered.decision = admitted.decision().clone();
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
                    self.record_task(slot, raw.clone(), upstream, owner, dedicated, task_form(meta), guard)
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
            && let Some(fallback) = self
                .fallback(&settings, &tool, &key, kept, meta, deadline, err, ending.maybe_delivered, ctx)
                .await
        {
            let kind = fallback.kind();
            self.metrics.fallbacks.with_label_values(&[self.metrics.tool_label(&tool.name), kind]).inc();
            ending.outcome = if kind == "stale" { "fallback_stale" } else { "fallback_alternative" };
            ran = fallback.alternative.clone();
            result = Ok(fallback.result);
        }
        // After-hooks on the answer the caller gets (a cache hit, a shared or a fallback result
        // too), before the size budget; a task's creation and a question to the caller pass.
        let mut guardrails = admitted.guardrails().to_vec();
        if task.is_none()
            && settings.has_hooks()
            && let Ok(raw) = result
        {
            result = if mrtr::is_complete(&raw) {
                let arguments = admitted.arguments();
                self.guard_result(&settings, &ctx.caller, &tool, arguments, raw, deadline, &mut guardrails)
                    .await
            } else {
                Ok(raw)
            };
            if let Err(err) = &result
                && err.category == Category::Guardrail
            {
                ending.outcome = Category::Guardrail.as_str();
            }
        }
        let result = result.map(|raw| self.fit_budget(&settings, &tool, raw));
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
        let wrapped = params.get("_meta").map(|meta| json!({"_meta": meta}));
        let modern = mcp::is_modern(wrapped.as_ref());
        if modern
            && crate::protocol::tasks::declares_extension(wrapped.as_ref())
            && crate::protocol::tasks::task_support(&tool.definition)
                == crate::protocol::tasks::TaskSupport::Required
        {
            return Ok(Some(json!({})));
        }
        Ok(None)
    }

    /// Read-only tools: a fresh cached result, or the result of an identical call already in
    /// flight, or a new call whose result is kept for later.
    #[allow(clippy::too_many_arguments)]
    async fn call_read_only(
        &self,
        admitted: &Admitted,
        key: &str,
        meta: Option<&Value>,
        deadline: Option<Instant>,
        notifications: &Notifications,
        caller: &Arc<Caller>,
    ) -> (SharedResult, Ending) {
        let tool = admitted.tool();
        let settings = admitted.settings();
        let ttl = Duration::from_millis(
            settings.settings_of(tool).cache_ttl_ms.unwrap_or(settings.config.defaults.cache_ttl_ms),
        );
        if !ttl.is_zero()
            && let Some(hit) = self.results.fresh(key, ttl)
        {
            self.metrics.result_cache.with_label_values(&[self.metrics.tool_label(&tool.name), "hit"]).inc();
            return (Ok(hit), Ending::unsent("cache_hit"));
        }
        let mut role = self.in_flight.join(key);
        loop {
            match role {
                Join::Leader(leader) => {
                    self.metrics
                        .result_cache
                        .with_label_values(&[self.metrics.tool_label(&tool.name), "miss"])
                        .inc();
                    let call =
                        Forwarded { admitted, meta, round: mrtr::Round::default(), deadline, task: None };
                    let (result, ending) = self.forward(call, notifications.clone(), caller).await;
                    self.remember(settings, tool, key, ttl, &result, ending.outcome);
                    if ran_out_of_own_time(&result, deadline) {
                        // Our caller's deadline is not the waiters': one of them takes over.
                        drop(leader);
                    } else {
                        leader.finish(&result);
                    }
                    return (result, ending);
                }
                Join::Follower(follower) => {
                    let waiting = Waiting::new(&self.metrics.in_flight_waiters);
                    let waited = follower.wait(deadline).await;
                    drop(waiting);
                    match waited {
                        Waited::Done(shared) => {
                            self.metrics
                                .result_cache
                                .with_label_values(&[self.metrics.tool_label(&tool.name), "shared"])
                                .inc();
                            let outcome = if shared.is_ok() { "shared" } else { "shared_failure" };
                            return (shared, Ending::unsent(outcome));
                        }
                        // The leader went away (cancelled, or out of its own time): we lead.
                        Waited::Promoted(leader) => role = Join::Leader(leader),
                        Waited::TimedOut => {
                            let err = GatewayError::new(
                                Category::Timeout,
                                "the caller's deadline passed while waiting for an identical call in flight",
                            )
                            .with_attempts(0);
                            return (Err(err), Ending::unsent(Category::Timeout.as_str()));
                        }
                    }
                }
            }
        }
    }

    /// Keeps a good read-only result when it can be served again (cache or stale fallback).
    /// Results with `isError` are not kept (`outcome` is the call's, already classified).
    fn remember(
        &self,
        settings: &Settings,
        tool: &ToolRecord,
        key: &str,
        ttl: Duration,
        result: &SharedResult,
        outcome: &str,
    ) {
        let Ok(raw) = result else { return };
        if (ttl.is_zero() && !settings.settings_of(tool).stale_fallback)
            || outcome != Outcome::Success.label()
            || !mrtr::is_complete(raw)
        {
            return;
        }
        self.results.store(key, raw.clone());
    }

    /// [`Self::forward`], and for a session-era caller with a back-channel whose server is of
    /// the modern era: the server is told what the caller's session declared, each
    /// `input_required` question goes to the caller on its stream (the relay), and the call is
    /// retried with the answers — at most [`MAX_INPUT_ROUNDS`] rounds. A caller that declines
    /// or answers with an error is answered by the server (a decline is an answer); one that
    /// never answers ends the call as `caller_did_not_answer`.
    async fn forward_answering(
        &self,
        call: Forwarded<'_>,
        notifications: Notifications,
        ctx: &CallContext,
    ) -> (SharedResult, Ending) {
        let caller = &ctx.caller;
        let tool = call.admitted.tool();
        // A modern caller's retry answering a question the gateway held for it.
        if let Some(state) = call.round.request_state().filter(|s| held::is_ours(s)) {
            return self.answer_held(&call, state, ctx).await;
        }
        let relay = match &notifications.relay {
            Some(relay) if call.round == mrtr::Round::default() => relay.clone(),
            _ => return self.forward(call, notifications, caller).await,
        };
        let Forwarded { admitted, meta, deadline, task, .. } = call;
        // The caller is asked within the call's time: its own deadline, else the server's (as
        // when a session-era server's request is relayed within that server's call).
        let asking_until = self.deadline_or_the_servers(admitted.settings(), tool, deadline).await;
        let (capabilities, client_info) = relay.declared();
        let declared = mrtr::Round::declared(capabilities, client_info);
        let mut round = declared.clone();
        let mut last = None;
        for _ in 0..MAX_INPUT_ROUNDS {
            let call = Forwarded { admitted, meta, round, deadline, task: task.clone() };
            let (result, ending) = self.forward(call, notifications.clone(), caller).await;
            let questions = match &result {
                Ok(raw) => match mrtr::Questions::of(raw) {
                    None => return (result, ending),
                    Some(Ok(questions)) => questions,
                    Some(Err(reason)) => {
                        let err = GatewayError::new(
                            Category::UpstreamProtocol,
                            format!("the server asked for input the gateway cannot relay: {reason}"),
                        );
                        return (Err(err), ending);
                    }
                },
                Err(_) => return (result, ending),
            };
            let mut responses = Map::new();
            for (key, method, params) in questions.requests.iter().cloned() {
                match relay.ask(&method, params, Some(asking_until)).await {
                    // A decline is an answer (`action: decline` in the result); an error the
                    // caller answered is passed on as the response to that question.
                    Ok((_, answer)) => {
                        responses.insert(key, answer);
                    }
                    Err(err) => {
                        return (
                            Err(GatewayError::from_upstream(&crate::upstream::UpstreamError::from(err))),
                            ending,
                        );
                    }
                }
            }
            round = declared.answering(responses, questions);
            last = Some(ending);
        }
        let err = GatewayError::new(
            Category::UpstreamProtocol,
            format!("the server was still asking for input after {MAX_INPUT_ROUNDS} rounds"),
        );
        (Err(err), last.unwrap_or(Ending::unsent("upstream_protocol")))
    }

    /// The caller's deadline, else the tool's server's own (`deadline_ms`) from now: how long a
    /// caller may be waited for when it is asked during a call.
    async fn deadline_or_the_servers(
        &self,
        settings: &Settings,
        tool: &ToolRecord,
        deadline: Option<Instant>,
    ) -> Instant {
        if let Some(deadline) = deadline {
            return deadline;
        }
        let defaults = &settings.config.defaults;
        let limit = match self.upstream_in(settings, tool).await {
            Ok(upstream) => upstream.config.deadline(defaults),
            Err(_) => Duration::from_millis(defaults.deadline_ms),
        };
        Instant::now() + limit
    }

    /// The caller's notifications, with the way to ask it for a modern caller whose first
    /// round declares a capability a server may ask under (used if the server turns out to
    /// speak the session era: `backchannel::held`).
    fn with_asker(
        &self,
        ctx: &CallContext,
        meta: Option<&Value>,
        round: &mrtr::Round,
        tool: &ToolRecord,
        args_hash: &str,
    ) -> Notifications {
        let mut notifications = ctx.notifications.clone();
        let modern = meta.and_then(|m| m.get(mcp::META_PROTOCOL_VERSION)).and_then(Value::as_str)
            == Some(mcp::MODERN_VERSION);
        if modern && notifications.relay.is_none() && round.retry.is_empty() && round.may_be_asked() {
            let client_info = match round.client_value(mcp::META_CLIENT_INFO) {
                info @ Value::Object(_) => info,
                _ => json!({"name": "mcp-gateway", "version": crate::VERSION}),
            };
            notifications.ask = Some(Asker {
                exchanges: self.held.clone(),
                capabilities: round.client_value(mcp::META_CLIENT_CAPABILITIES),
                client_info,
                binding: self.binding(ctx, tool, args_hash),
            });
        }
        notifications
    }

    /// Whose retry may answer a question held for this call.
    fn binding(&self, ctx: &CallContext, tool: &ToolRecord, args_hash: &str) -> Binding {
        Binding::new(&ctx.owner, ctx.session.as_deref(), &tool.name, args_hash)
    }

    /// A retry carrying a `requestState` the gateway handed out: checked, its answer handed to
    /// the held exchange, and the exchange's next step awaited (the result, or the server's
    /// next question as another `input_required`). A refused state never reaches the server.
    async fn answer_held(
        &self,
        call: &Forwarded<'_>,
        state: &str,
        ctx: &CallContext,
    ) -> (SharedResult, Ending) {
        let tool = call.admitted.tool();
        let binding = self.binding(ctx, tool, call.admitted.args_hash());
        let next = match self.held.take(state, &binding, call.round.input_responses()) {
            Ok(Taken::Answered(next)) => next,
            Ok(Taken::AskAgain(asked)) => return (Ok(asked), Ending::unsent("success")),
            Err(refusal) => {
                tracing::info!(request_id = %ctx.request_id, tool = %tool.name, reason = refusal.reason(), "requestState refused");
                let err = GatewayError::new(Category::BadInput, refusal.message())
                    .with_extra("reason", json!(refusal.reason()));
                return (Err(err), Ending::unsent(Category::BadInput.as_str()));
            }
        };
        let answered = Ending { outcome: Outcome::Success.label(), attempts: 1, maybe_delivered: true };
        let deadline = self.deadline_or_the_servers(call.admitted.settings(), tool, call.deadline).await;
        // Dropping `next` (the deadline passed, the caller went away) ends the exchange.
        let step = tokio::time::timeout_at(deadline.into(), next).await;
        let in_error = |err: GatewayError| {
            let outcome = err.category.as_str();
            (Err(err), Ending { outcome, ..answered })
        };
        match step {
            Err(_) => in_error(GatewayError::new(
                Category::Timeout,
                "the caller's deadline passed before the server answered",
            )),
            Ok(Err(_)) => in_error(GatewayError::new(
                Category::UpstreamError,
                "the server's exchange ended before it answered",
            )),
            Ok(Ok(Step::Asks { question, answer })) => {
                (Ok(self.held.hold(&binding, question, answer)), answered)
            }
            Ok(Ok(Step::Done(Ok(Ok(raw))))) => (Ok(raw), answered),
            Ok(Ok(Step::Done(Ok(Err(error))))) => in_error(GatewayError::from_upstream_reply(error, false)),
            Ok(Ok(Step::Done(Err(error)))) => in_error(GatewayError::from_upstream(&error)),
        }
    }

    /// Sends the call through the server's stack and maps the answer.
    async fn forward(
        &self,
        call: Forwarded<'_>,
        notifications: Notifications,
        caller: &Arc<Caller>,
    ) -> (SharedResult, Ending) {
        let tool = call.admitted.tool();
        let settings = call.admitted.settings();
        let upstream = match self.upstream_in(settings, tool).await {
            Ok(upstream) => upstream,
            Err(err) => {
                let outcome = err.category.as_str();
                return (Err(err), Ending::unsent(outcome));
            }
        };
        // An AgentCore target's event is the bare arguments: no key can reach its function.
        let honours_keys = upstream.config.retry(&settings.config.defaults).honours_idempotency_keys
            && !upstream.config.is_agentcore();
        let mut request = upstream_request(call, honours_keys);
        request.progress = notifications.progress;
        request.logs = notifications.logs;
        request.relay = notifications.relay;
        request.ask = notifications.ask;
        request.caller = Some(caller.clone());
        let attempts = request.attempts.clone();
        let delivered = request.maybe_delivered.clone();

        let in_flight = InFlightGuard::new(&self.metrics.in_flight);
        let result = upstream.service.clone().oneshot(request).await;
        drop(in_flight);

        let attempts = attempts.load(std::sync::atomic::Ordering::Relaxed);
        let maybe_delivered = delivered.load(std::sync::atomic::Ordering::Relaxed);
        let outcome = Outcome::of(&result, true);
        let answer = match result {
            Ok(UpstreamReply::Result(raw)) => Ok(raw.into_raw()),
            Ok(UpstreamReply::Error(upstream_error)) => {
                Err(GatewayError::from_upstream_reply(upstream_error, outcome.is_hard_failure()))
            }
            Err(transport_error) => Err(GatewayError::from_upstream(&transport_error)),
        };
        let label = match &answer {
            Ok(_) => outcome.label(),
            Err(e) => e.category.as_str(),
        };
        (answer.map_err(|e| e.with_attempts(attempts)), Ending { outcome: label, attempts, maybe_delivered })
    }

    /// A configured fallback for a failed call, if one applies and is available.
    ///
    /// A stale result is always safe to serve. An alternative tool is called only when a
    /// second call cannot repeat a side effect: the tool is read-only or idempotent, or no
    /// attempt can have reached its server (connect refused, circuit open, shed). A checkout
    /// that timed out may have charged the customer; it is never followed by another call.
    /// The alternative passes the door on the arguments the caller sent, as a call of its own
    /// would: its policy, its catalogue control (a fixed argument the caller set refuses the
    /// fallback; it is never overwritten), its schema and its quotas. It carries the caller's
    /// `_meta` (idempotency key, trace ids) but reports no progress or log entries.
    #[allow(clippy::too_many_arguments)]
    async fn fallback(
        &self,
        settings: &Arc<Settings>,
        tool: &Arc<ToolRecord>,
        key: &str,
        arguments: Option<Option<Value>>,
        meta: Option<&Value>,
        deadline: Option<Instant>,
        err: &GatewayError,
        maybe_delivered: bool,
        ctx: &CallContext,
    ) -> Option<Fallback> {
        if !err.category.retryable() {
            return None;
        }
        let tool_settings = settings.settings_of(tool);
        let reason = err.category.as_str();
        if tool_settings.stale_fallback && tool.read_only {
            let max_age = Duration::from_millis(settings.config.cache.stale_max_age_ms);
            if let Some((stale, age)) = self.results.stale(key, max_age) {
                return Some(Fallback {
                    result: fallback::mark_stale(&stale, age, reason),
                    alternative: None,
                });
            }
        }
        let alternative_name = tool_settings.fallback_tool.as_deref()?;
        if maybe_delivered && !(tool.read_only || tool.idempotent) {
            tracing::info!(
                tool = %tool.name,
                fallback = alternative_name,
                "no fallback: the call may have reached the server and the tool is not idempotent"
            );
            return None;
        }
        let alternative = self.registry.resolve(alternative_name).await?;
        let admission = self.admit(settings, &ctx.caller, &ctx.request_id, alternative, arguments?, deadline);
        let admitted = match admission.await {
            Ok(admitted) => admitted,
            Err(refusal) => {
                tracing::info!(
                    request_id = %ctx.request_id,
                    tool = %tool.name,
                    fallback = alternative_name,
                    refused = refusal.error.category.as_str(),
                    rule = %refusal.decision.rule,
                    "no fallback: the alternative tool refuses this call"
                );
                return None;
            }
        };
        let call =
            Forwarded { admitted: &admitted, meta, round: mrtr::Round::default(), deadline, task: None };
        let (result, _) = self.forward(call, Notifications::default(), &ctx.caller).await;
        let raw = result.ok()?;
        let result = fallback::mark_alternative(&raw, alternative_name, reason);
        Some(Fallback { result, alternative: Some(admitted.tool().clone()) })
    }

    fn fit_budget(&self, settings: &Settings, tool: &ToolRecord, raw: Box<RawValue>) -> Box<RawValue> {
        let budget =
            settings.settings_of(tool).max_result_bytes.unwrap_or(settings.config.defaults.max_result_bytes);
        match truncate::truncate(&raw, budget) {
            Some(cut) => {
                self.metrics.truncations.with_label_values(&[self.metrics.tool_label(&tool.name)]).inc();
                cut
            }
            None => raw,
        }
    }

    /// Records a call that was answered by the gateway itself, and returns its error.
    fn refuse(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        err: GatewayError,
    ) -> GatewayError {
        self.refuse_decided(ctx, started, tool, err, Decision::no_policy())
    }

    /// [`Self::refuse`] after the tool policy decided (`decision` goes into the audit line).
    fn refuse_decided(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        err: GatewayError,
        decision: Decision,
    ) -> GatewayError {
        let err = match tool {
            Some(t) => err.with_tool(t.name.clone()).with_server(t.server.clone()),
            None => err,
        };
        let decided = Decided { decision, requested: err.tool.clone(), ran: None, guardrails: Vec::new() };
        self.record(ctx, started, tool, err.category.as_str(), 0, None, decided);
        err
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        ctx: &CallContext,
        started: Instant,
        tool: Option<&Arc<ToolRecord>>,
        outcome: &'static str,
        attempts: u32,
        args_hash: Option<String>,
        decided: Decided,
    ) {
        let elapsed = started.elapsed();
        let latency_us = elapsed.as_micros() as u64;
        let call_lines = tracing::enabled!(target: "mcp_gateway::call", tracing::Level::INFO);
        let trace_id = if call_lines || self.audit.is_some() || self.recent_calls.enabled() {
            crate::telemetry::otel::log_trace_id()
        } else {
            None
        };
        // The log and audit lines name the tool that really ran (a fallback's alternative), and
        // the name asked for when it differs; the metrics stay on the tool asked for.
        let ran = decided.ran.as_ref().or(tool);
        let asked = decided.requested.or_else(|| tool.map(|t| t.name.clone()));
        let (named, requested) = match ran {
            Some(ran) => (Some(ran.name.clone()), asked.filter(|name| *name != ran.name)),
            None => (asked, None),
        };
        // The console's record: never arguments or results (`telemetry::recent_calls`).
        self.recent_calls.push(RecentCall {
            at: std::time::SystemTime::now(),
            subject: ctx.caller.subject.clone(),
            tool: named.clone(),
            requested_tool: requested.clone(),
            server: ran.map(|t| t.server.clone()),
            outcome,
            attempts,
            latency_us,
            trace_id: trace_id.clone(),
        });
        if let Some(audit) = &self.audit {
            let entry = AuditEntry {
                at: std::time::SystemTime::now(),
                request_id: ctx.request_id.clone(),
                trace_id: trace_id.clone(),
                subject: ctx.caller.subject.clone(),
                method: None,
                tool: named,
                requested_tool: requested.clone(),
                server: ran.map(|t| t.server.clone()),
                endpoint: ctx.caller.endpoint.clone(),
                decision: decided.decision,
                outcome,
                args_sha256: args_hash.clone(),
                latency_us,
                guardrails: decided.guardrails,
            };
            let audit = audit.clone();
            crate::telemetry::after_answer::defer(move || {
                audit.write(&entry);
            });
        }
        let (tool_name, server, transport) = labels(tool);
        let tool_name = if tool.is_some() { self.metrics.tool_label(tool_name) } else { tool_name };
        self.metrics.tool_calls.with_label_values(&[tool_name, server, outcome]).inc();
        if tool.is_some() {
            self.metrics
                .tool_call_duration
                .with_label_values(&[tool_name, server])
                .observe(elapsed.as_secs_f64());
        }
        crate::telemetry::otel::record_call(outcome, attempts, tool_name, server, transport);
        // The log line is formatted after the answer has left (telemetry::after_answer).
        if !call_lines {
            return;
        }
        let line = CallLine {
            request_id: ctx.request_id.clone(),
            trace_id,
            jsonrpc_id: ctx.jsonrpc_id.clone(),
            tool: ran.cloned(),
            requested,
            outcome,
            latency_us,
            attempts,
            args_hash,
        };
        crate::telemetry::after_answer::defer(move || line.log());
    }
}

/// A call's tool, server and transport as its metrics and log line name them.
fn labels(tool: Option<&Arc<ToolRecord>>) -> (&str, &str, &'static str) {
    match tool {
        Some(t) => (t.name.as_ref(), t.server.as_ref(), t.transport.as_str()),
        None => (UNRESOLVED, "", ""),
    }
}

/// The fields of a call's log line, taken when the call ends and written after its answer.
struct CallLine {
    request_id: Arc<str>,
    trace_id: Option<String>,
    jsonrpc_id: Value,
    /// The tool that really ran.
    tool: Option<Arc<ToolRecord>>,
    /// The name asked for, when it is not the tool that ran's (an export alias, a fallback).
    requested: Option<Arc<str>>,
    outcome: &'static str,
    latency_us: u64,
    attempts: u32,
    args_hash: Option<String>,
}

impl CallLine {
    fn log(&self) {
        let (tool, server, transport) = labels(self.tool.as_ref());
        tracing::info!(
            target: "mcp_gateway::call",
            request_id = &*self.request_id,
            trace_id = self.trace_id.as_deref(),
            jsonrpc_id = %self.jsonrpc_id,
            tool,
            requested_tool = self.requested.as_deref(),
            server,
            transport,
            outcome = self.outcome,
            latency_us = self.latency_us,
            attempts = self.attempts,
            args_hash = self.args_hash.as_deref().unwrap_or(""),
            "tools/call"
        );
    }
}

/// A leader's timeout that its own caller's deadline caused: not an answer for waiters.
fn ran_out_of_own_time(result: &SharedResult, deadline: Option<Instant>) -> bool {
    matches!(result, Err(e) if e.category == Category::Timeout)
        && deadline.is_some_and(|d| Instant::now() >= d)
}

/// Counts a caller waiting for an identical call in flight, until it stops (or is dropped).
struct Waiting<'a>(&'a prometheus::IntGauge);

impl<'a> Waiting<'a> {
    fn new(gauge: &'a prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
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

/// The key under which a read-only call's result is cached and shared with identical calls in
/// flight: the tool, its canonical arguments, and — when there are any — the forwarded `_meta`
/// and the caller's identified subject. What reaches the server is exactly tool + arguments +
/// forwarded `_meta`, and per-user context may ride in `_meta` (a user key, a tenant), so two
/// calls that differ there are two upstream calls; with identity configured two subjects never
/// share a result either. Calls without either keep the plain key (and its sharing).
fn result_key(tool: &str, args_hash: &str, meta: Option<&Value>, subject: Option<&str>) -> String {
    let mut key = String::with_capacity(tool.len() + 2 + 2 * args_hash.len());
    key.push_str(tool);
    key.push('\0');
    key.push_str(args_hash);
    let forwarded = if meta.is_some() { forwarded_meta(meta) } else { Map::new() };
    if subject.is_some() || !forwarded.is_empty() {
        key.push('\0');
        key.push_str(&canonical_hash(&json!([subject, forwarded])));
    }
    key
}

/// What of a caller's `tools/call` goes upstream: the call the door admitted (the tool and its
/// checked arguments — nothing else reaches a server), the caller's `_meta`, the
/// multi-round-trip fields and the call's deadline.
struct Forwarded<'a> {
    admitted: &'a Admitted,
    meta: Option<&'a Value>,
    round: mrtr::Round,
    deadline: Option<Instant>,
    /// The `task` parameter of a task-augmented call (2025-11-25 form).
    task: Option<Value>,
}

/// What stood in for a failed call: a stale result, or an alternative tool's (that tool).
struct Fallback {
    result: Box<RawValue>,
    alternative: Option<Arc<ToolRecord>>,
}

impl Fallback {
    /// The `kind` label of `mcp_gateway_fallbacks_total`.
    fn kind(&self) -> &'static str {
        if self.alternative.is_some() { "alternative" } else { "stale" }
    }
}

/// The upstream `tools/call`: the upstream's own tool name, the checked arguments, the
/// caller's forwarded `_meta` ([`forwarded_meta`]) with its client declaration, the retry
/// fields of a multi-round-trip request, and for tools that are neither read-only nor
/// idempotent an idempotency key derived from the operation (each round its own).
fn upstream_request(call: Forwarded<'_>, honours_keys: bool) -> UpstreamRequest {
    let Forwarded { admitted, meta, round, deadline, task } = call;
    let (tool, arguments) = (admitted.tool(), admitted.arguments());
    let mut forwarded = forwarded_meta(meta);
    let naturally_safe = tool.read_only || tool.idempotent;
    if !naturally_safe {
        let caller_key = meta.and_then(|m| m.get(META_IDEMPOTENCY_KEY)).cloned().unwrap_or(Value::Null);
        let key =
            canonical_hash(&json!([tool.upstream_name.as_ref(), arguments, caller_key, round.retry_value()]));
        forwarded.insert(META_IDEMPOTENCY_KEY.into(), json!(key));
    }
    let param_headers = if tool.schema.declares_param_headers() {
        // The schema calls are checked against: the server's own, fixed arguments included.
        param_headers::for_call(Some(tool.schema.schema()), arguments)
    } else {
        Vec::new()
    };
    let mut params = Map::new();
    params.insert("name".into(), json!(tool.upstream_name.as_ref()));
    params.insert("arguments".into(), arguments.clone());
    if let Some(task) = task {
        params.insert("task".into(), task);
    }
    round.apply(&mut params, &mut forwarded);
    if !forwarded.is_empty() {
        params.insert("_meta".into(), Value::Object(forwarded));
    }
    let mut request = UpstreamRequest::new("tools/call", params);
    request.tool = Some(tool.upstream_name.clone());
    request.param_headers = param_headers;
    request.safe_to_repeat = naturally_safe || honours_keys;
    request.deadline = deadline;
    request
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(read_only: bool) -> ToolRecord {
        ToolRecord::for_tests("add_to_cart", "cart", json!({}), read_only)
    }

    fn key(request: &UpstreamRequest) -> Option<&Value> {
        request.params.get("_meta").and_then(|m| m.get(META_IDEMPOTENCY_KEY))
    }

    #[test]
    fn result_keys_differ_by_forwarded_meta_and_subject_but_not_by_trace_context() {
        let plain = result_key("t", "h", None, None);
        assert_eq!(plain, "t\0h", "calls without _meta or identity keep the plain key");
        let trace = json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "tracestate": "k=v", "progressToken": 5, "io.mcp-gateway/timeoutMs": 100,
            "io.modelcontextprotocol/protocolVersion": "x"});
        assert_eq!(result_key("t", "h", Some(&trace), None), plain, "nothing forwarded, nothing keyed");
        let alice = result_key("t", "h", Some(&json!({"user_key": "alice"})), None);
        let bob = result_key("t", "h", Some(&json!({"user_key": "bob"})), None);
        assert!(alice != bob && alice != plain && bob != plain);
        assert_ne!(result_key("t", "h", None, Some("alice")), result_key("t", "h", None, Some("bob")));
        assert_ne!(result_key("t", "h", None, Some("alice")), plain);
        let forwarded =
            forwarded_meta(Some(&json!({"user_key": "u", "traceparent": "x", "progressToken": 1})));
        assert_eq!(Value::Object(forwarded), json!({"user_key": "u"}));
    }

    fn plain<'a>(admitted: &'a Admitted, meta: Option<&'a Value>) -> Forwarded<'a> {
        Forwarded { admitted, meta, round: mrtr::Round::default(), deadline: None, task: None }
    }

    fn admitted(read_only: bool, arguments: Value) -> Admitted {
        Admitted::for_tests(tool(read_only), arguments, Settings::for_tests())
    }

    #[test]
    fn unsafe_tools_carry_an_idempotency_key_derived_from_the_operation() {
        let args = json!({"manga_id": "MNG-1", "quantity": 2});
        let reordered = json!({"quantity": 2, "manga_id": "MNG-1"});
        let a = upstream_request(plain(&admitted(false, args.clone()), None), false);
        let b = upstream_request(plain(&admitted(false, reordered), None), false);
        assert!(key(&a).is_some());
        assert_eq!(key(&a), key(&b), "same operation, same key (and the same on every attempt)");
        let other = upstream_request(plain(&admitted(false, json!({"manga_id": "MNG-2"})), None), false);
        assert_ne!(key(&a), key(&other));
        let caller = json!({META_IDEMPOTENCY_KEY: "cart-123", "trace": "t"});
        let keyed = upstream_request(plain(&admitted(false, args), Some(&caller)), false);
        assert_ne!(key(&a), key(&keyed), "a caller key makes a distinct operation");
        assert_eq!(keyed.params["_meta"]["trace"], "t");
        let with_token = json!({"progressToken": "p-1", "trace": "t"});
        let stripped = upstream_request(plain(&admitted(true, json!({})), Some(&with_token)), false);
        assert_eq!(stripped.params["_meta"], json!({"trace": "t"}), "the caller's token stays here");
        assert!(!a.safe_to_repeat, "not retried after sending unless the server honours keys");
        assert!(upstream_request(plain(&admitted(false, json!({})), None), true).safe_to_repeat);
        let read_only = upstream_request(plain(&admitted(true, json!({})), None), false);
        assert!(key(&read_only).is_none() && read_only.safe_to_repeat);
    }

    #[test]
    fn each_round_of_a_multi_round_trip_call_is_its_own_operation() {
        let meta = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
        let first = mrtr::Round::of(&json!({"_meta": meta}).as_object().cloned().unwrap());
        let retry = mrtr::Round::of(
            &json!({"_meta": meta, "inputResponses": {"q": {"action": "accept"}}, "requestState": "s"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let admitted = admitted(false, json!({"manga_id": "MNG-1"}));
        let call =
            |round| Forwarded { admitted: &admitted, meta: Some(&meta), round, deadline: None, task: None };
        let asked = upstream_request(call(first), false);
        let answered = upstream_request(call(retry), false);
        assert_eq!(
            asked.params["_meta"]["io.modelcontextprotocol/clientCapabilities"],
            json!({"elicitation": {}})
        );
        assert!(asked.params.get("requestState").is_none());
        assert_eq!(answered.params["requestState"], "s");
        assert_eq!(answered.params["inputResponses"], json!({"q": {"action": "accept"}}));
        assert_ne!(key(&asked), key(&answered), "the answered round is another operation");
    }
}
