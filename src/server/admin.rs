//! Operator endpoints: `GET /admin/breakers`, `POST /admin/breakers/{server}/open|close`,
//! `GET /admin/connections`, `GET /admin/registry`, `POST /admin/registry/refresh`,
//! `GET /admin/registry/drift`, `GET /admin/registry/collisions`, `GET /admin/registry/surface`,
//! `GET /admin/registry/pins`, `POST /admin/registry/approve`, `GET /admin/registry/memory`, and for the console
//! (`docs/console.md`): `GET /admin/overview`, `GET /admin/calls`, `POST /admin/playground`
//! ([`super::playground`]) and the console's page, script and style ([`super::console`]).
//!
//! Who may call them is decided in one place, [`guard`], a middleware on every admin route
//! (the handlers below check nothing). A loopback peer is not enough (a browser page or a
//! local proxy is loopback too); see [`AdminAccess`] and `docs/security-edge-and-registry.md`:
//!
//! | `admin.token[_file]` | `admin.listen` | on the main listener | on the admin listener |
//! |---|---|---|---|
//! | — | — | 403, body says how to enable | (none) |
//! | set | — | `Authorization: Bearer <token>` | (none) |
//! | — | set | 404, body names the admin listener | loopback peers |
//! | set | set | 404, body names the admin listener | `Authorization: Bearer <token>` |
//!
//! The console's three static assets ([`super::console::is_console_asset`]) are the one
//! exception: where a bearer token would be asked for, they are served without it (they hold
//! no data). Everywhere else in the table they are refused like every admin route.

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use axum::{
    Json, Router,
    extract::{ConnectInfo, Path, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{
    config::AdminSettings,
    gateway::Gateway,
    registry::memory::{ServerMemory, value_heap},
};

/// How the admin routes are reached, from `[admin]`.
#[derive(Clone, Default)]
pub struct AdminAccess {
    /// SHA-256 of the bearer token; compared in constant time.
    token: Option<[u8; 32]>,
    /// Served on `admin.listen` only.
    own_listener: bool,
}

impl AdminAccess {
    /// Reads the token (file or setting); errors name what is wrong.
    pub fn from_settings(settings: &AdminSettings) -> anyhow::Result<Self> {
        let token = settings.load_token()?.map(|t| Sha256::digest(t.as_bytes()).into());
        Ok(Self { token, own_listener: settings.listen.is_some() })
    }

    /// Admin routes off (no token, no listener).
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Whether the admin routes are served at all (a token, or a listener of their own).
    pub fn enabled(&self) -> bool {
        self.token.is_some() || self.own_listener
    }

    /// Whether `headers` carry `Authorization: Bearer <admin token>` (false without a token).
    pub fn bearer_matches(&self, headers: &axum::http::HeaderMap) -> bool {
        let Some(expected) = &self.token else { return false };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .is_some_and(|token| same_digest(expected, &Sha256::digest(token.trim().as_bytes()).into()))
    }

    /// `None` when the request may pass; else the answer (token missing or wrong, routes not
    /// served on this listener, admin off).
    fn refusal(&self, on_admin_listener: bool, request: &Request) -> Option<Response> {
        if !on_admin_listener && self.own_listener {
            return Some(refused(
                StatusCode::NOT_FOUND,
                "admin endpoints are served on the admin listener only (admin.listen)",
            ));
        }
        match &self.token {
            Some(_) if self.bearer_matches(request.headers()) => None,
            Some(_) if super::console::is_console_asset(request.uri().path()) => None,
            // A kept MCP App page: its unguessable one-time id is the capability (a frame
            // cannot send the token; `app_frame`).
            Some(_) if super::app_frame::is_frame(request.uri().path()) => None,
            Some(_) => Some(unauthorized(
                "admin endpoints need Authorization: Bearer <admin token> (admin.token_file)",
            )),
            None if on_admin_listener => {
                let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
                if peer.is_some_and(|p| p.ip().is_loopback()) {
                    None
                } else {
                    Some(refused(
                        StatusCode::FORBIDDEN,
                        "the admin listener answers loopback peers only (or set admin.token_file)",
                    ))
                }
            }
            None => Some(refused(
                StatusCode::FORBIDDEN,
                "admin endpoints are disabled: set admin.token_file (or MCP_GATEWAY_ADMIN__TOKEN) and send Authorization: Bearer <token>, or set admin.listen to serve them on a listener of their own",
            )),
        }
    }
}

/// Equal 32-byte digests, compared without an early exit.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// 401 with `WWW-Authenticate` naming the admin realm.
pub(super) fn unauthorized(why: &str) -> Response {
    let mut response = refused(StatusCode::UNAUTHORIZED, why);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"mcp-gateway admin\""));
    response
}

fn refused(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({"error": why, "docs": "docs/security-edge-and-registry.md"}))).into_response()
}

/// The state of one listener's [`guard`].
#[derive(Clone)]
pub struct GuardState {
    gateway: Arc<Gateway>,
    access: AdminAccess,
    on_admin_listener: bool,
}

/// The one check in front of every admin route.
pub async fn guard(State(state): State<GuardState>, request: Request, next: Next) -> Response {
    match state.access.refusal(state.on_admin_listener, &request) {
        None => next.run(request).await,
        Some(refusal) => {
            let reason = match refusal.status() {
                StatusCode::UNAUTHORIZED => "admin_unauthorized",
                StatusCode::NOT_FOUND => "admin_elsewhere",
                _ => "admin_forbidden",
            };
            state.gateway.record_rejection(reason);
            refusal
        }
    }
}

/// The admin routes behind their [`guard`], for the main listener (`on_admin_listener`
/// false) or the admin listener.
pub fn routes(gateway: Arc<Gateway>, access: &AdminAccess, on_admin_listener: bool) -> Router<Arc<Gateway>> {
    let state = GuardState { gateway, access: access.clone(), on_admin_listener };
    Router::new()
        .route("/admin/breakers", get(breakers))
        .route("/admin/breakers/{server}/{action}", post(breaker_action))
        .route("/admin/connections", get(connections))
        .route("/admin/registry", get(registry))
        .route("/admin/registry/refresh", post(registry_refresh))
        .route("/admin/registry/memory", get(registry_memory))
        .route("/admin/config/reload", get(reload_status).post(reload_now))
        .route("/admin/registry/drift", get(registry_drift))
        .route("/admin/registry/collisions", get(registry_collisions))
        .route("/admin/registry/surface", get(registry_surface))
        .route("/admin/registry/pins", get(registry_pins))
        .route("/admin/registry/approve", post(registry_approve))
        .route("/admin/overview", get(overview))
        .route("/admin/calls", get(calls))
        .route("/admin/endpoints", get(endpoints))
        .route("/admin/hooks", get(hooks))
        .route("/admin/playground", post(super::playground::call))
        .route("/admin/playground/app", post(super::app_frame::open))
        .route("/admin/console/app/{id}", get(super::app_frame::serve))
        .merge(super::console::routes())
        .merge(super::approvals::admin_routes())
        .route_layer(axum::middleware::from_fn_with_state(state, guard))
}

/// `GET /admin/overview`: the console's live figures (`telemetry::overview`).
pub async fn overview(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.overview_report()).into_response()
}

/// `GET /admin/endpoints`: each endpoint, its selection and the tools it serves now.
pub async fn endpoints(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.endpoints_report()).into_response()
}

/// `GET /admin/hooks`: each guardrail hook as configured, and its decisions since start.
pub async fn hooks(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.hooks_report()).into_response()
}

/// `GET /admin/calls`: the console's record of recent calls, newest first
/// (`telemetry::recent_calls`; never arguments or results).
pub async fn calls(State(gateway): State<Arc<Gateway>>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], gateway.recent_calls_report()).into_response()
}

pub async fn breakers(State(gateway): State<Arc<Gateway>>) -> Response {
    let all = gateway.all_upstreams();
    let report: BTreeMap<&str, Value> = all.iter().map(|u| (u.name.as_ref(), u.breaker.report())).collect();
    Json(report).into_response()
}

/// `GET /admin/connections`: every persistent connection (WebSocket, SSE, stdio), its state
/// and history.
pub async fn connections(State(gateway): State<Arc<Gateway>>) -> Response {
    let all = gateway.all_upstreams();
    let report: BTreeMap<&str, Value> =
        all.iter().filter_map(|u| Some((u.name.as_ref(), u.connection.as_ref()?.report()))).collect();
    Json(report).into_response()
}

pub async fn breaker_action(
    State(gateway): State<Arc<Gateway>>,
    Path((server, action)): Path<(String, String)>,
) -> Response {
    let Some(upstream) = gateway.all_upstreams().into_iter().find(|u| *u.name == *server) else {
        return (StatusCode::NOT_FOUND, Json(json!({"error": format!("no server named {server:?}")})))
            .into_response();
    };
    match action.as_str() {
        "open" => upstream.breaker.force_open(),
        "close" => upstream.breaker.force_close(),
        _ => {
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "action must be open or close"})))
                .into_response();
        }
    }
    tracing::warn!(server = %server, action = %action, "circuit breaker changed by an operator");
    Json(json!({"server": server, "breaker": upstream.breaker.report()})).into_response()
}

/// `GET /admin/registry`: every tool, where it comes from, its hashes and health, its
/// definition as callers see it (description, input schema, annotations) and what catalogue
/// control changed (`control`: the names of fixed and default arguments, never their values);
/// the tools catalogue control hides (`hidden`); the servers whose latest list was refused
/// for going over a bound (`refusals`); and per OpenAPI server, its document's operations and
/// those skipped with the reason (`openapi`).
pub async fn registry(State(gateway): State<Arc<Gateway>>) -> Response {
    let registry = gateway.registry_entries();
    let tools: Vec<Value> = gateway
        .catalog()
        .snapshot()
        .tools()
        .iter()
        .map(|t| {
            let (tier, registered) = match &t.origin {
                Some(_) => ("dynamodb", registry.iter().find(|e| e.tool_name == *t.name)),
                None if gateway
                    .configured_upstream(t.server.as_ref())
                    .is_some_and(|u| !u.config.discover) =>
                {
                    ("config", None)
                }
                None => ("discovered", None),
            };
            json!({
                "name": t.name.as_ref(),
                "server": t.server.as_ref(),
                "transport": t.transport.as_str(),
                "tier": tier,
                "schema_hash": t.schema_hash,
                "definition_hash": t.definition_hash,
                "status": registered.map_or("active", |e| e.status.as_str()),
                "healthy": registered.is_none_or(|e| e.healthy),
                "version": registered.map(|e| e.version),
                "updated_at": registered.map(|e| e.updated_at.as_str()),
                "breaker": gateway.configured_upstream(t.server.as_ref()).map(|u| u.breaker.state().name()),
                "upstream_name": t.upstream_name.as_ref(),
                "description": t.definition.head().get("description"),
                "input_schema": t.definition.field("inputSchema"),
                "annotations": t.definition.head().get("annotations"),
                // MCP Apps: the app it links and its visibility (the playground says what it
                // does with them).
                "ui": t.definition.head().pointer("/_meta/ui"),
                "control": control_report(gateway.config().tools.get(t.settings_name())),
            })
        })
        .collect();
    let tiers = gateway.registry_tiers_report();
    // Registry entries whose server was refused (URL not allowed, a configured server's name
    // at another address): their tools are listed above but their calls are refused.
    let refused = gateway.refused_registry_origins();
    // Servers whose latest list went over a bound: what is served of them is their last good list.
    let refusals = gateway.catalog().refusals().list();
    let config = gateway.config();
    let hidden: Vec<&str> =
        config.tools.iter().filter(|(_, t)| t.hide).map(|(name, _)| name.as_str()).collect();
    // OpenAPI servers: what their document maps to, the operations skipped with why, why the
    // document was last refused, and their target origin (and one waiting for approval).
    let openapi: serde_json::Map<String, Value> = gateway
        .all_upstreams()
        .iter()
        .filter_map(|u| {
            let transport = u.openapi.as_ref()?;
            let mut report = json!({
                "target_origin": transport.target_origin(),
                "pending_origin": transport.pending_origin().map(|p| p["pending_origin"].clone()),
                "refused": transport.refused(),
            });
            if let Some(mapped) = transport.mapped() {
                report["source"] = json!(mapped.source);
                report["operations"] = json!(mapped.total_operations);
                report["tools"] = json!(mapped.list.len());
                report["skipped"] = json!(mapped.skipped);
                report["trimmed"] = json!(mapped.trimmed);
            }
            Some((u.name.to_string(), report))
        })
        .collect();
    let memory = memory_report(&gateway);
    Json(json!({"tools": tools, "tiers": tiers, "refused": refused, "refusals": refusals, "hidden": hidden, "openapi": openapi, "memory": memory}))
        .into_response()
}

/// `GET /admin/registry/memory`: per server, the estimated bytes its tools, schemas,
/// resources and documents hold ([`crate::registry::memory`] says how it is estimated).
pub async fn registry_memory(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(json!({"servers": memory_report(&gateway), "estimated": MEMORY_ESTIMATE})).into_response()
}

const MEMORY_ESTIMATE: &str = "heap bytes of the values held, by serde_json's layout, plus text kept as text; allocator overhead and the catalogue's name tables not counted";

/// Per server: what its tools, schemas, resources and OpenAPI document hold (estimated).
pub fn memory_report(gateway: &Gateway) -> BTreeMap<String, ServerMemory> {
    let mut report: BTreeMap<String, ServerMemory> = BTreeMap::new();
    let mut schemas_seen = std::collections::HashSet::new();
    // A `$defs` entry is held once for the process: counted once, with the first server seen
    // referring to it; a text the catalogue shares with a mapped document, once too.
    let mut entries_seen = std::collections::HashSet::new();
    let mut texts_seen = std::collections::HashSet::new();
    let mut shared = |memory: &mut ServerMemory, text: &crate::shared_json::SharedJson| {
        for entry in text.shared_entries() {
            if entries_seen.insert(entry.as_ptr()) {
                memory.shared += entry.len();
            }
        }
    };
    for tool in gateway.catalog().snapshot().tools() {
        let entry = report.entry(tool.server.to_string()).or_default();
        // Its own text (the `$defs` entries apart) and its parsed head.
        let text = tool.definition.text();
        if texts_seen.insert(text.id()) {
            entry.tools += text.own_bytes();
            shared(entry, text);
        }
        entry.tools += value_heap(tool.definition.head());
        if schemas_seen.insert(tool.schema_hash.clone()) {
            entry.schemas += tool.schema.text().own_bytes();
            shared(entry, tool.schema.text());
            entry.schemas_compiled += usize::from(tool.schema.is_compiled());
        }
    }
    let index = gateway.federation().index();
    // Resources and templates are kept as their compact text (federation's `Listed`, shared
    // with the server's surface: counted once), prompts as values.
    let resources = index.resources.iter().map(|r| (&r.server, r.definition.get().len()));
    let templates = index.templates.iter().map(|(t, _)| (&t.server, t.definition.get().len()));
    let prompts = index.prompts.iter().map(|p| (&p.server, value_heap(&p.definition)));
    for (server, bytes) in resources.chain(templates).chain(prompts) {
        report.entry(server.to_string()).or_default().resources += bytes;
    }
    for upstream in gateway.all_upstreams() {
        let Some(mapped) = upstream.openapi.as_ref().and_then(|o| o.mapped()) else { continue };
        let entry = report.entry(upstream.name.to_string()).or_default();
        let plans: usize = mapped
            .operations
            .iter()
            .map(|(name, op)| {
                let params: usize = op.params.iter().map(|p| 64 + p.property.len() + p.name.len()).sum();
                256 + 2 * name.len() + op.path.len() + params
            })
            .sum();
        // The mapped definitions are the catalogue's own texts unless renamed or overridden.
        for text in &mapped.list {
            if texts_seen.insert(text.id()) {
                entry.documents += text.own_bytes();
                shared(entry, text);
            }
        }
        entry.documents += plans;
        entry.document_read += mapped.document_bytes;
    }
    report.into_iter().map(|(server, memory)| (server, memory.finish())).collect()
}

/// What catalogue control (`[tools.NAME]`) changed on a tool; `null`: nothing. Argument values
/// are not shown (an operator may fix a credential-like value).
fn control_report(settings: Option<&crate::config::ToolConfig>) -> Value {
    let Some(s) = settings else { return Value::Null };
    let keys = |map: &serde_json::Map<String, Value>| map.keys().cloned().collect::<Vec<_>>();
    if s.rename.is_none()
        && s.description.is_none()
        && s.annotations.is_empty()
        && s.fixed_arguments.is_empty()
        && s.default_arguments.is_empty()
    {
        return Value::Null;
    }
    json!({
        "renamed": s.rename.is_some(),
        "description": s.description.is_some(),
        "annotations": keys(&s.annotations),
        "fixed_arguments": keys(&s.fixed_arguments),
        "default_arguments": keys(&s.default_arguments),
    })
}

/// `POST /admin/registry/refresh`: refresh now (answers at once; the refresh runs behind).
/// `GET /admin/config/reload`: the configuration generation in force and the last reload's
/// report (docs/reload.md).
pub async fn reload_status(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.reload_status()).into_response()
}

/// `POST /admin/config/reload`: re-reads the configuration now; 200 with the report when it
/// was applied (or changed nothing), 422 with the reason when the file was refused (the
/// running configuration stays).
pub async fn reload_now(State(gateway): State<Arc<Gateway>>) -> Response {
    use crate::gateway::reload::{Outcome, Trigger};
    let report = gateway.reload(Trigger::Admin).await;
    let status = match report.outcome {
        Outcome::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        Outcome::Applied | Outcome::Unchanged => StatusCode::OK,
    };
    (status, Json(report.to_json())).into_response()
}

pub async fn registry_refresh(State(gateway): State<Arc<Gateway>>) -> Response {
    gateway.force_refresh();
    (StatusCode::ACCEPTED, Json(json!({"refresh": "scheduled"}))).into_response()
}

#[derive(serde::Deserialize)]
pub struct DriftQuery {
    server: Option<String>,
}

/// `GET /admin/registry/drift[?server=NAME]`.
pub async fn registry_drift(
    State(gateway): State<Arc<Gateway>>,
    axum::extract::Query(query): axum::extract::Query<DriftQuery>,
) -> Response {
    Json(gateway.registry_drift(query.server.as_deref()).await).into_response()
}

/// `GET /admin/registry/collisions`: tool names servers offered and did not get as asked
/// (refused aliases of another server, names held or routed elsewhere, namespaced copies).
pub async fn registry_collisions(State(gateway): State<Arc<Gateway>>) -> Response {
    let snapshot = gateway.catalog().snapshot();
    Json(json!({"collisions": snapshot.collisions()})).into_response()
}

/// `GET /admin/registry/surface`: the federated resources, templates and prompts per server,
/// and what two servers both claim (`gateway::federation::report`).
pub async fn registry_surface(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(crate::gateway::federation::report::report(&gateway.federation().index())).into_response()
}

/// `GET /admin/registry/pins`: definition pinning's state and the changes waiting for approval.
pub async fn registry_pins(State(gateway): State<Arc<Gateway>>) -> Response {
    use crate::registry::pins::Kind;
    // OpenAPI target origins are pinned whether definition pinning is on or not.
    let origins = gateway.pending_origins();
    let report = match gateway.pins() {
        Some(pins) => json!({
            "enabled": true,
            "pin_file": gateway.config().catalogue.pin_file,
            "pinned": pins.pinned_count(Kind::Tool),
            "pinned_prompts": pins.pinned_count(Kind::Prompt),
            "pending": pins.pending().into_iter().chain(origins).collect::<Vec<_>>(),
        }),
        None => json!({"enabled": false, "pending": origins}),
    };
    Json(report).into_response()
}

/// What `POST /admin/registry/approve` takes: a tool or a prompt (its server name or
/// namespaced name), optionally its server, or `all`; or `origin`: an OpenAPI server whose
/// document's new target origin is approved.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    origin: Option<String>,
    tool: Option<String>,
    prompt: Option<String>,
    server: Option<String>,
    #[serde(default)]
    all: bool,
}

/// `POST /admin/registry/approve`: approves pending definition changes; the catalogue is
/// rebuilt from the lists already known (no upstream is asked again).
pub async fn registry_approve(State(gateway): State<Arc<Gateway>>, body: axum::body::Bytes) -> Response {
    use crate::registry::pins::{Approval, Kind};
    let request: ApproveRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error =
                format!("body must be {{\"tool\": NAME, \"server\"?: NAME}} or {{\"all\": true}}: {e}");
            return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
        }
    };
    if let Some(server) = &request.origin {
        if request.tool.is_some() || request.prompt.is_some() || request.all {
            let error = "\"origin\" names an OpenAPI server alone";
            return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
        }
        return match gateway.approve_origin(server) {
            Some(origin) => Json(json!({"approved": [{"server": server, "kind": "origin", "origin": origin}], "pending": gateway.pending_origins()})).into_response(),
            None => (
                StatusCode::NOT_FOUND,
                Json(json!({"error": "no target origin change is pending for this server", "pending": gateway.pending_origins()})),
            )
                .into_response(),
        };
    }
    let named = match (request.tool.as_deref(), request.prompt.as_deref()) {
        (Some(tool), None) => Some((Kind::Tool, tool)),
        (None, Some(prompt)) => Some((Kind::Prompt, prompt)),
        (None, None) if request.all => None,
        _ => {
            let error =
                "name a tool (\"tool\") or a prompt (\"prompt\"), or approve everything (\"all\": true)";
            return (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response();
        }
    };
    let (Some(pins), Some(approval)) =
        (gateway.pins(), gateway.approve_definitions(named, request.server.as_deref(), request.all))
    else {
        let error = "definition pinning is off (catalogue.pin_tool_definitions = false): nothing to approve";
        return (StatusCode::CONFLICT, Json(json!({"error": error}))).into_response();
    };
    match approval {
        Approval::Approved(approved) => Json(json!({"approved": approved, "pending": pins.pending()})).into_response(),
        Approval::NothingPending => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no pending definition change matches", "pending": pins.pending()})),
        )
            .into_response(),
        Approval::Ambiguous(servers) => (
            StatusCode::CONFLICT,
            Json(json!({"error": "several servers have a pending change of this name: name the server", "servers": servers})),
        )
            .into_response(),
    }
}
