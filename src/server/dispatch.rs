//! Method dispatch for one decoded JSON-RPC message. Notifications get no answer; every
//! request gets exactly one.
//!
//! A `tools/call` is registered by the caller's id and whose it is (its owner by
//! [`crate::ownership`] with the session id it sent, else its TCP connection:
//! [`crate::gateway::cancel::Scope`]) while it runs, so a `notifications/cancelled` from the
//! same caller naming it drops it. The cancelled request is
//! then answered with the `cancelled` error (-32800) where an answer is owed: HTTP requires
//! one for a JSON POST and a batch entry. An event-stream answer simply ends without a
//! response (see [`super::mcp`]), as the MCP cancellation rules ask of a receiver.

use std::sync::{Arc, atomic::AtomicBool};

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::{
    backchannel::{LOG_LEVELS, META_LOG_LEVEL, Notifications},
    error::{Category, GatewayError},
    gateway::{
        Gateway,
        call::CallContext,
        cancel::Scope,
        capabilities,
        federation::{self, SurfaceCall},
        subscriptions,
        tasks::TaskCall,
    },
    ownership::Owner,
    protocol::{
        extensions,
        jsonrpc::{Entry, Message, Response},
        mcp, tasks,
    },
    telemetry::otel,
};

/// The caller's deadline header.
const REQUEST_TIMEOUT_MS: axum::http::HeaderName =
    axum::http::HeaderName::from_static("x-request-timeout-ms");

const INSTRUCTIONS: &str = "MCP tool gateway: one endpoint for every tool of every configured MCP server.";

/// What the HTTP request tells about its messages.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub request_id: Arc<str>,
    /// `Mcp-Method` header of a modern-era request, checked against the body.
    pub method_header: Option<String>,
    /// From `X-Request-Timeout-Ms`: when the caller stops waiting.
    pub deadline: Option<std::time::Instant>,
    /// The caller's `Mcp-Session-Id`, one part of the scope of its request ids for
    /// cancellation ([`crate::gateway::cancel::Scope`]).
    pub session: Option<Arc<str>>,
    /// Whether `Accept` names `text/event-stream` (the caller can receive a streamed answer).
    pub accepts_sse: bool,
    /// The `MCP-Protocol-Version` header (a session-era caller sends its negotiated version on
    /// every request after `initialize`; already checked to be a supported one).
    pub protocol_version: Option<Arc<str>>,
    /// The caller's trace context and request ids, for spans and upstreams.
    pub trace: otel::Inbound,
    /// Who is calling (anonymous unless the listener identifies callers).
    pub caller: Arc<crate::identity::Caller>,
    /// Whose what the request leaves behind is ([`crate::ownership`]); set from the verified
    /// session with [`RequestInfo::owned_through`], else the caller alone.
    pub owner: Owner,
    /// The gateway session the request presented, verified (set by
    /// [`RequestInfo::owned_through`]): a session-era caller's back-channel for resource
    /// subscriptions.
    pub verified_session: Option<Arc<str>>,
    /// The caller's back-channel session negotiated MCP Apps at `initialize` (a 2026-07-28
    /// caller states it on each request instead: [`RequestInfo::negotiates_apps`]).
    pub session_apps: bool,
}

impl RequestInfo {
    pub fn from_headers(headers: &HeaderMap, request_id: &str, caller: Arc<crate::identity::Caller>) -> Self {
        let request_id: Arc<str> = request_id.into();
        Self {
            owner: Owner::of(&caller, None),
            verified_session: None,
            session_apps: false,
            caller,
            trace: otel::Inbound::from_headers(headers, request_id.clone()),
            request_id,
            method_header: headers
                .get(mcp::headers::names::METHOD)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            deadline: headers
                .get(REQUEST_TIMEOUT_MS)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(crate::clock::after_millis),
            session: headers
                .get(mcp::headers::names::SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty() && v.len() <= 256)
                .map(Arc::from),
            protocol_version: headers
                .get(mcp::headers::names::PROTOCOL_VERSION)
                .and_then(|v| v.to_str().ok())
                .filter(|v| mcp::is_supported(v))
                .map(Arc::from),
            accepts_sse: headers
                .get_all(axum::http::header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.split(',').any(|t| t.trim().starts_with("text/event-stream"))),
        }
    }

    /// The request's owner given the gateway session it presented, verified live and bound to
    /// this caller (`backchannel::sessions::Lookup::verified`).
    pub fn owned_through(self, session: Option<&Arc<str>>) -> Self {
        Self { owner: Owner::of(&self.caller, session), verified_session: session.cloned(), ..self }
    }
}

impl RequestInfo {
    /// Whether the caller of `message` negotiated MCP Apps: at its session's `initialize`, or
    /// in the request's own client capabilities (2026-07-28).
    pub fn negotiates_apps(&self, message_params: Option<&Value>) -> bool {
        self.session_apps || extensions::negotiates_apps(mcp::stated_capabilities("", message_params))
    }
}

/// The caller's `_meta.progressToken` of a `tools/call`, when it has a valid one.
pub fn progress_token(message: &Message) -> Option<&Value> {
    if message.method != "tools/call" || message.id.is_none() {
        return None;
    }
    let token = message.params.as_ref()?.get("_meta")?.get("progressToken")?;
    matches!(token, Value::String(_) | Value::Number(_)).then_some(token)
}

/// The lowest log level a `tools/call`'s caller wants relayed. A modern-era caller opts in per
/// request (`_meta["io.modelcontextprotocol/logLevel"]`; absent: none). Session-era and bare
/// callers get every level, as a session-era server without `logging/setLevel` may send them:
/// the gateway keeps no sessions, so it cannot remember a level set earlier.
pub fn log_level(message: &Message) -> Option<&'static str> {
    let params = message.params.as_ref();
    if !mcp::is_modern(params) {
        return Some(LOG_LEVELS[0]);
    }
    let wanted = params?.get("_meta")?.get(META_LOG_LEVEL)?.as_str()?;
    LOG_LEVELS.iter().find(|l| **l == wanted).copied()
}

/// Whether `answer` is the `cancelled` error of a call its caller cancelled.
pub fn is_cancelled(answer: &Response) -> bool {
    matches!(&answer.body, Err(e) if e.code == Category::Cancelled.code())
}

/// Answers one batch entry (or the single message). `notifications`: where a `tools/call`
/// sends its upstream's progress and log entries, when the caller receives them.
pub async fn entry(
    gateway: &Gateway,
    entry: Entry,
    info: &RequestInfo,
    notifications: Notifications,
) -> Option<Response> {
    match entry {
        Ok(message) => {
            // One span per message, parented on the caller's context; the upstream attempts
            // it makes see that context (and the request ids) through the scope.
            let inbound = info.trace.for_message(message.params.as_ref());
            let span = otel::MessageSpan::start(&message.method, message.id.as_ref(), &inbound);
            let answer =
                span.run(otel::scoped(inbound, message_answer(gateway, message, info, notifications))).await;
            if let Some(Response { body: Err(error), .. }) = &answer {
                let category = error.data.as_ref().and_then(|d| d.get("category")).and_then(Value::as_str);
                span.record_error_answer(error.code, category);
            }
            answer
        }
        Err(rejected) => {
            gateway.record_invalid_request();
            Some(Response::error(rejected.id, &rejected.error))
        }
    }
}

async fn message_answer(
    gateway: &Gateway,
    message: Message,
    info: &RequestInfo,
    notifications: Notifications,
) -> Option<Response> {
    gateway.record_request(&message.method);
    let Some(id) = message.id.clone() else {
        if message.method == "notifications/cancelled" {
            cancel(gateway, message.params.as_ref(), info);
        }
        // notifications/initialized, notifications/cancelled, …: nothing to answer.
        return None;
    };
    if let Some(err) = protocol_error(&message, info) {
        return Some(Response::error(id, &err));
    }
    let params = message.params;
    let modern = mcp::is_modern(params.as_ref());
    let ttl_ms = gateway.refresh_interval().as_millis() as u64;
    let answer = match message.method.as_str() {
        "tools/call" => {
            let cancelled = Arc::new(AtomicBool::new(false));
            let ctx = CallContext {
                request_id: info.request_id.clone(),
                jsonrpc_id: id.clone(),
                deadline: info.deadline,
                notifications,
                cancelled: cancelled.clone(),
                caller: info.caller.clone(),
                session: info.session.clone(),
                owner: info.owner.clone(),
                apps: info.negotiates_apps(params.as_ref()),
            };
            let scope = Scope::of(&info.owner, info.session.as_ref(), &info.caller);
            let registration = gateway.register_cancellable(scope, &id, cancelled);
            // The call's state (every layer's future) is boxed once here: the futures around it
            // (this one, the span, axum's handler box) stay small and cheap to move.
            let answer = tokio::select! {
                answer = Box::pin(gateway.call_tool(params, &ctx)) => answer,
                // Dropping the call's future (the other branch) is the cancellation path.
                () = registration.cancelled() => Err(GatewayError::new(
                    Category::Cancelled,
                    "the caller cancelled this request (notifications/cancelled)",
                )),
            };
            drop(registration);
            // A refusal the model can act on (its arguments, a guardrail, the policy) is a tool
            // execution error for a caller of 2025-11-25 or later (SEP-1303): a result the
            // model reads, the gateway's error kept in `_meta`.
            let execution_error = |err: &GatewayError| {
                mcp::takes_tool_execution_errors(info.protocol_version.as_deref(), modern)
                    .then(|| err.to_tool_execution_error(modern))
                    .flatten()
            };
            return Some(match answer {
                // Only what the outbound step released is written (`gateway/outbound.rs`).
                Ok(released) if modern => Response::result(id, mcp::with_result_type(released.into_inner())),
                Ok(released) => Response::result(id, released.into_inner()),
                Err(err) => match execution_error(&err) {
                    Some(result) if modern => Response::result(id, mcp::with_result_type(result)),
                    Some(result) => Response::result(id, result),
                    None => Response { id, body: Err(err.to_error_object_for(modern)) },
                },
            });
        }
        "tools/list" => {
            // While some server is not fine: the list with the degradation summary (and
            // without unavailable tools when `hide_unavailable_tools`).
            // Under a tool policy: only the tools this caller may call (a cached view).
            // In pages of `catalogue.tools_page_size`, with the gateway's own cursors.
            // A caller that negotiated MCP Apps also gets the tools for an app only.
            let view = gateway.tool_view(&info.caller);
            let apps = info.negotiates_apps(params.as_ref());
            let list = match &view {
                _ if apps => gateway.apps_tool_list(view.as_deref()),
                Some(view) => view.list.clone(),
                None => gateway.catalog().tool_list(),
            };
            let page = match tools_page(gateway, &list, params.as_ref()) {
                Ok(page) => page,
                Err(err) => return Some(Response { id, body: Err(err.to_error_object_for(modern)) }),
            };
            if let Some((list, ttl_cap)) = capabilities::degraded_tools_list(gateway, view.as_deref(), &page)
            {
                if modern {
                    let list = mcp::cacheable(list, ttl_cap.min(ttl_ms));
                    return Some(Response::result(id, if apps { mcp::private(list) } else { list }));
                }
                return Some(Response::result(id, list));
            }
            // Otherwise a slice of the pre-serialised list, shared (not copied) by every request.
            // An Apps host's list is its own: no cache may hand it to a caller without Apps.
            let fields = match (modern, apps) {
                (false, _) => String::new(),
                (true, false) => mcp::cache_fields(ttl_ms),
                (true, true) => mcp::private_cache_fields(ttl_ms),
            };
            let (head, tail, end) = page.result_parts(&fields);
            return Some(Response::shared(id, head, tail, end));
        }
        "initialize" => {
            let requested = params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
            let mut result =
                mcp::initialize_result(requested, "mcp-gateway", crate::VERSION, Some(INSTRUCTIONS));
            // Upstream log entries are relayed on tools/call answers (see `log_level`).
            if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
                capabilities.insert("logging".into(), json!({}));
                // Tasks are relayed when some upstream tool can run as one.
                if gateway.offers_tasks() {
                    capabilities.insert("tasks".into(), tasks::session_capability());
                }
            }
            declare_list_changed(&mut result, gateway.lists_changes());
            declare_surface(&mut result, gateway);
            declare_extensions(&mut result, gateway, info, false);
            result
        }
        method if federation::METHODS.contains(&method) => {
            let call = SurfaceCall {
                caller: info.caller.clone(),
                request_id: info.request_id.clone(),
                deadline: caller_deadline(info.deadline, params.as_ref()),
                modern,
            };
            return Some(match Box::pin(gateway.surface_method(method, params, &call)).await {
                Ok(released) => Response::result_value(id, &released.into_inner()),
                Err(err) => Response { id, body: Err(err.to_error_object_for(modern)) },
            });
        }
        method if subscriptions::METHODS.contains(&method) => {
            let call = SurfaceCall {
                caller: info.caller.clone(),
                request_id: info.request_id.clone(),
                deadline: caller_deadline(info.deadline, params.as_ref()),
                modern,
            };
            let session = info.verified_session.as_ref();
            return Some(match Box::pin(gateway.subscription_method(method, params, session, &call)).await {
                Ok(result) => Response::result_value(id, &result),
                Err(err) => Response { id, body: Err(err.to_error_object_for(modern)) },
            });
        }
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
            let call = TaskCall {
                request_id: info.request_id.clone(),
                owner: info.owner.clone(),
                modern,
                deadline: caller_deadline(info.deadline, params.as_ref()),
                relay: notifications.relay,
                caller: info.caller.clone(),
            };
            return Some(match Box::pin(gateway.task_method(&message.method, params, call)).await {
                Ok(released) => Response::result_value(id, &released.into_inner()),
                Err(err) => Response { id, body: Err(err.to_error_object_for(modern)) },
            });
        }
        // Session era: accepted and answered, but the gateway keeps no sessions to hold a level
        // in, so it relays every level and the client filters (see `log_level`).
        "logging/setLevel" => {
            let level = params.as_ref().and_then(|p| p.get("level")).and_then(Value::as_str);
            if !level.is_some_and(|l| LOG_LEVELS.contains(&l)) {
                let err = GatewayError::new(
                    Category::BadInput,
                    format!("params.level must be one of {LOG_LEVELS:?}"),
                );
                return Some(Response::error(id, &err));
            }
            json!({})
        }
        "server/discover" => {
            let mut result = mcp::discover_result("mcp-gateway", crate::VERSION, Some(INSTRUCTIONS), ttl_ms);
            declare_list_changed(&mut result, gateway.lists_changes());
            declare_surface(&mut result, gateway);
            declare_extensions(&mut result, gateway, info, true);
            result
        }
        "ping" => json!({}),
        other => {
            let shown: String = other.chars().take(64).collect();
            let err = GatewayError::new(Category::MethodNotFound, shown);
            return Some(Response::error(id, &err));
        }
    };
    Some(Response::result_value(id, &answer))
}

/// `capabilities.tools.listChanged`: true while callers can be told of list changes (the
/// GET stream, `subscriptions/listen`: `server/listen.rs`).
fn declare_list_changed(result: &mut Value, on: bool) {
    if let Some(tools) = result.pointer_mut("/capabilities/tools").and_then(Value::as_object_mut) {
        tools.insert("listChanged".into(), Value::Bool(on));
    }
}

/// `capabilities.extensions`: the extensions the gateway carries that a server behind the
/// caller's endpoint offers (`gateway/extensions.rs`), when there is one.
fn declare_extensions(result: &mut Value, gateway: &Gateway, info: &RequestInfo, modern: bool) {
    let declared = gateway.declared_extensions(info.caller.endpoint.as_deref(), modern);
    if declared.is_empty() {
        return;
    }
    if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
        capabilities.insert("extensions".into(), Value::Object(declared));
    }
}

/// `capabilities.resources`, `.prompts` and `.completions`, for what the servers behind the
/// gateway really offer; their `listChanged` as for tools, and `resources.subscribe` when
/// some server declared it (`gateway/subscriptions`).
fn declare_surface(result: &mut Value, gateway: &Gateway) {
    let index = gateway.federation().index();
    let list_changed = gateway.lists_changes();
    let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) else { return };
    if index.offers_resources() {
        let subscribe = gateway.offers_subscriptions();
        capabilities.insert("resources".into(), json!({"subscribe": subscribe, "listChanged": list_changed}));
    }
    if index.offers_prompts() {
        capabilities.insert("prompts".into(), json!({"listChanged": list_changed}));
    }
    if index.offers_completions() {
        capabilities.insert("completions".into(), json!({}));
    }
}

/// `notifications/cancelled`: cancels the caller's call `params.requestId`, if in flight.
/// Unknown ids (finished, never seen) are ignored, as the MCP cancellation rules ask.
fn cancel(gateway: &Gateway, params: Option<&Value>, info: &RequestInfo) {
    let Some(request_id) = params.and_then(|p| p.get("requestId")) else { return };
    if !matches!(request_id, Value::String(_) | Value::Number(_)) {
        return;
    }
    // Only the sender's own calls: see `gateway::cancel` for how the gateway knows whose a
    // call is.
    let found = gateway.cancel_call(Scope::of(&info.owner, info.session.as_ref(), &info.caller), request_id);
    let reason: String = params
        .and_then(|p| p.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    tracing::info!(request_id = %info.request_id, cancelled_id = %request_id, found, reason, "notifications/cancelled");
}

/// Modern-era checks: a `_meta` protocol version we speak, and an `Mcp-Method` header that
/// agrees with the body.
pub fn protocol_error(message: &Message, info: &RequestInfo) -> Option<GatewayError> {
    if let Some(version) = mcp::meta_version(message.params.as_ref())
        && !mcp::is_supported(version)
    {
        return Some(
            GatewayError::new(Category::UnsupportedProtocolVersion, format!("{version:?}"))
                .with_extra("supported", json!(mcp::supported_versions())),
        );
    }
    // The extensions a caller declares reach its servers as written: bounded and checked
    // first (`protocol::extensions`), refused whole rather than cut.
    if let Err(refused) =
        extensions::check_declared(mcp::stated_capabilities(&message.method, message.params.as_ref()))
    {
        let mut err = GatewayError::new(Category::BadInput, refused.to_string())
            .with_extra("reason", json!("extensions_refused"));
        if let Some((key, limit)) = refused.limit() {
            err = err.with_limit(key, limit);
        }
        return Some(err);
    }
    match &info.method_header {
        Some(header) if header != &message.method => Some(GatewayError::new(
            Category::HeaderMismatch,
            "the Mcp-Method header does not match the request body",
        )),
        _ => None,
    }
}

/// A `tasks/*` request's own deadline: `X-Request-Timeout-Ms` or
/// `_meta["io.mcp-gateway/timeoutMs"]`, the earlier wins (`None`: the gateway's bounds apply).
fn caller_deadline(header: Option<std::time::Instant>, params: Option<&Value>) -> Option<std::time::Instant> {
    let from_meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(crate::gateway::call::META_TIMEOUT_MS))
        .and_then(Value::as_u64)
        .map(crate::clock::after_millis);
    match (header, from_meta) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The `tools/list` page `params.cursor` asks for (the first without one); a cursor this
/// gateway did not give is refused as the resources' lists refuse it.
fn tools_page(
    gateway: &Gateway,
    list: &crate::registry::catalog::ToolList,
    params: Option<&Value>,
) -> Result<crate::registry::catalog::Page, GatewayError> {
    let cursor = match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor.as_str()),
        Some(_) => return Err(GatewayError::new(Category::BadInput, "params.cursor must be a string")),
    };
    list.page(cursor, gateway.tools_page_size())
        .map_err(|detail| GatewayError::new(Category::BadInput, detail))
}
