//! Sending one call upstream: the upstream `tools/call` encoded from what the door admitted
//! (tool name, checked arguments, forwarded `_meta`, idempotency key, multi-round-trip
//! fields), sent through the server's stack, and its answer mapped. Separate so that what
//! reaches a server is decided in one place.

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value, json};
use tower::ServiceExt;

use super::context::{Ending, META_IDEMPOTENCY_KEY};
use crate::{
    backchannel::Notifications,
    error::GatewayError,
    gateway::{Gateway, door::Admitted, forwarded_meta::forwarded_meta},
    identity::Caller,
    protocol::{mrtr, param_headers},
    registry::record::canonical_hash,
    resilience::{cache::SharedResult, classify::Outcome},
    upstream::{UpstreamReply, UpstreamRequest},
};

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
    /// Sends the call through the server's stack and maps the answer.
    pub(super) async fn forward(
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
}

/// What of a caller's `tools/call` goes upstream: the call the door admitted (the tool and its
/// checked arguments — nothing else reaches a server), the caller's `_meta`, the
/// multi-round-trip fields and the call's deadline.
pub(super) struct Forwarded<'a> {
    pub(super) admitted: &'a Admitted,
    pub(super) meta: Option<&'a Value>,
    pub(super) round: mrtr::Round,
    pub(super) deadline: Option<Instant>,
    /// The `task` parameter of a task-augmented call (2025-11-25 form).
    pub(super) task: Option<Value>,
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
        param_headers::for_call(tool.schema.value(), arguments)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gateway::settings::Settings, registry::ToolRecord};

    fn tool(read_only: bool) -> ToolRecord {
        ToolRecord::for_tests("add_to_cart", "cart", json!({}), read_only)
    }

    fn key(request: &UpstreamRequest) -> Option<&Value> {
        request.params.get("_meta").and_then(|m| m.get(META_IDEMPOTENCY_KEY))
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
