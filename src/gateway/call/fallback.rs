//! What stands in for a failed call: a stale cached result, or a configured alternative tool
//! called through the door on the caller's arguments. Separate because it decides whether a
//! second call is safe at all (a side effect must never repeat).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, value::RawValue};

use super::{context::CallContext, forward::Forwarded};
use crate::gateway::approval::Asking;
use crate::{
    backchannel::Notifications,
    error::GatewayError,
    gateway::{Gateway, settings::Settings},
    protocol::mrtr,
    registry::ToolRecord,
    resilience::fallback,
};

impl Gateway {
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
    pub(super) async fn fallback(
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
        // Nobody is asked to approve an alternative: one needing approval is no fallback.
        let admission = self.admit(
            settings,
            &ctx.caller,
            &ctx.request_id,
            alternative,
            arguments?,
            Asking { relay: None, deadline, modern: None },
        );
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
}

/// What stood in for a failed call: a stale result, or an alternative tool's (that tool).
pub(super) struct Fallback {
    pub(super) result: Box<RawValue>,
    pub(super) alternative: Option<Arc<ToolRecord>>,
}

impl Fallback {
    /// The `kind` label of `mcp_gateway_fallbacks_total`.
    pub(super) fn kind(&self) -> &'static str {
        if self.alternative.is_some() { "alternative" } else { "stale" }
    }
}
