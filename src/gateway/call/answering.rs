//! Multi-round-trip answering: a modern server's `input_required` questions relayed to a
//! session-era caller on its stream and the call retried with the answers, and a modern
//! caller's retry answering a question the gateway held for it (`backchannel::held`).
//! Separate from the pipeline because only calls that may ask their caller come here.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json};

use super::{
    context::{CallContext, Ending},
    forward::Forwarded,
};
use crate::{
    backchannel::{
        Notifications, Relay,
        held::{self, Asker, Binding, Step, Taken},
    },
    error::{Category, GatewayError},
    gateway::{Gateway, settings::Settings},
    identity::Caller,
    protocol::{mcp, mrtr},
    registry::ToolRecord,
    resilience::{cache::SharedResult, classify::Outcome},
};

/// Most rounds of a multi-round-trip call answered for a session-era caller.
const MAX_INPUT_ROUNDS: usize = 8;

impl Gateway {
    /// [`Self::forward`], and for a session-era caller with a back-channel whose server is of
    /// the modern era: the server is told what the caller's session declared, each
    /// `input_required` question goes to the caller on its stream (the relay), and the call is
    /// retried with the answers — at most [`MAX_INPUT_ROUNDS`] rounds. A caller that declines
    /// or answers with an error is answered by the server (a decline is an answer); one that
    /// never answers ends the call as `caller_did_not_answer`.
    pub(super) async fn forward_answering(
        &self,
        call: Forwarded<'_>,
        notifications: Notifications,
        ctx: &CallContext,
    ) -> (SharedResult, Ending) {
        let caller = &ctx.caller;
        // A modern caller's retry answering a question the gateway held for it.
        if let Some(state) = call.round.request_state().filter(|s| held::is_ours(s)) {
            return Box::pin(self.answer_held(&call, state, ctx)).await;
        }
        let relay = match &notifications.relay {
            Some(relay) if call.round == mrtr::Round::default() => relay.clone(),
            _ => return self.forward(call, notifications, caller).await,
        };
        // Boxed: the rounds with a caller are the rare path, and would otherwise grow every
        // forwarded call's future (benches/alloc_per_call.rs keeps `tools/call`'s small).
        Box::pin(self.forward_with_rounds(call, notifications, relay, caller)).await
    }

    /// [`Self::forward_answering`]'s rounds: each `input_required` question of the server
    /// asked to the caller through `relay`, and the call retried with the answers.
    async fn forward_with_rounds(
        &self,
        call: Forwarded<'_>,
        notifications: Notifications,
        relay: Relay,
        caller: &Arc<Caller>,
    ) -> (SharedResult, Ending) {
        let tool = call.admitted.tool();
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
    pub(super) fn with_asker(
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
}
