//! The HTTP side of callers' change notifications: the session era's `GET /mcp` stream and the
//! 2026-07-28 `subscriptions/listen` stream. Both carry `notifications/tools/list_changed`,
//! `notifications/resources/list_changed` and `notifications/prompts/list_changed`, each sent
//! when that list *this caller* may see changed (`gateway/list_changes.rs` decides; the
//! caller is established per request as for `POST`, and the `Host`/`Origin` edge guard has
//! already run), plus a keep-alive comment every [`KEEPALIVE`]. Their bound and their ends
//! (session `DELETE`, shutdown) are kept in `backchannel/listeners.rs`.
//!
//! - `GET /mcp` needs a session of the gateway's (`Mcp-Session-Id`: a back-channel session, or
//!   the stateless listen id a session-era `initialize` is given), opened by the same subject
//!   ([`crate::ownership`]). Without one: `405` with a JSON-RPC error (the transport lets a
//!   server offer no stream); an unknown or expired one of ours, or another subject's: `404`;
//!   a caller that does not accept `text/event-stream`: `406`.
//! - `subscriptions/listen` (modern callers, `POST`): the answer is an event stream that opens
//!   with `notifications/subscriptions/acknowledged` (the `notifications` the gateway honours:
//!   `toolsListChanged`, `resourcesListChanged`, `promptsListChanged`), then carries the
//!   notifications the caller asked for, each with
//!   `_meta["io.modelcontextprotocol/subscriptionId"]` = the request's id. At shutdown the
//!   stream ends with the request's `complete` result (a graceful close); the caller closing
//!   the stream cancels it.
//! - More than `inbound.max_listen_streams` open: `503` (`-32005`), the key named.
//! - Resource subscriptions (`gateway/subscriptions`): a session-era caller's `GET` stream
//!   carries the `notifications/resources/updated` of what its session subscribed to with
//!   `resources/subscribe` (and when the stream closes, those subscriptions end); a modern
//!   caller lists the URIs in `params.notifications.resourceSubscriptions` (at most
//!   `inbound.max_resource_subscriptions_per_caller`, more is refused with `-32005`), the
//!   acknowledgment lists those the gateway honours (routed, allowed by the policy, subscribed
//!   upstream; the others are left out, as the spec asks), and the subscriptions live as long
//!   as the stream.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{caller, dispatch::RequestInfo, sessions};
use crate::{
    backchannel::listeners::{self, Refused, Registration},
    error::{Category, GatewayError},
    gateway::{Gateway, federation::SurfaceCall, list_changes, subscriptions},
    identity::Caller,
    protocol::{jsonrpc, mcp},
};

/// How often an idle stream carries a keep-alive comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// The `_meta` key that ties a listen stream's messages to its request.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// `GET /mcp`: the session era's stream of server messages (list changes only). Routed here
/// only while the gateway follows list changes ([`super::get_mcp`]).
pub async fn get(State(gateway): State<Arc<Gateway>>, request: axum::extract::Request) -> Response {
    let peer =
        request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0);
    let headers = request.headers();
    let caller = match caller::establish(&gateway, headers, peer).await {
        Ok(caller) => super::endpoint::through(caller, super::endpoint::of(request.extensions())),
        Err(refused) => return refused,
    };
    if let Some(version) = headers.get(mcp::headers::names::PROTOCOL_VERSION) {
        let version = version.to_str().unwrap_or_default();
        if !mcp::is_supported(version) || version == mcp::MODERN_VERSION {
            gateway.record_rejection("unsupported_protocol_version");
            let err = GatewayError::new(
                Category::UnsupportedProtocolVersion,
                format!("{version:?} has no GET stream; a 2026-07-28 caller sends subscriptions/listen"),
            )
            .with_extra("supported", json!(mcp::LEGACY_VERSIONS));
            return refusal(StatusCode::BAD_REQUEST, &err);
        }
    }
    // Only the subject that opened the session (or was given the listen id) may listen on it.
    // An MCP Apps host's session is told when its own list (the tools for an app included)
    // changed.
    let mut apps = false;
    let session: Arc<str> = match gateway.sessions().lookup(headers, &caller) {
        sessions::Lookup::Found(session) => {
            apps = crate::protocol::extensions::negotiates_apps(Some(&session.capabilities));
            session.id.clone()
        }
        sessions::Lookup::Listen(id) => id,
        sessions::Lookup::Unknown => return sessions::unknown_session(),
        sessions::Lookup::Sessionless => {
            let mut response = refusal(
                StatusCode::METHOD_NOT_ALLOWED,
                &GatewayError::new(
                    Category::InvalidRequest,
                    "GET /mcp needs the Mcp-Session-Id the gateway's initialize answer gave; 2026-07-28 callers send subscriptions/listen",
                ),
            );
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
    };
    let info = RequestInfo::from_headers(headers, "", caller.clone());
    if !info.accepts_sse {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            &GatewayError::new(Category::InvalidRequest, "GET /mcp answers text/event-stream only"),
        );
    }
    let registration = match gateway.listeners().open(Some(session.clone())) {
        Ok(registration) => registration,
        Err(refused) => return refused_stream(&gateway, &refused),
    };
    let updates = gateway.attach_subscriber(subscriptions::session_key(&session), &caller);
    let mut listening = Listening::new(gateway, caller, registration, None, Lists::ALL, apps);
    listening.updates = Some(updates);
    stream(listening)
}

/// Whether `message` is a `subscriptions/listen` this gateway serves: a modern request while
/// list-change streams are on (anything else goes the usual way: `-32601`).
pub fn is_listen(gateway: &Gateway, message: &jsonrpc::Message) -> bool {
    message.method == "subscriptions/listen"
        && message.id.is_some()
        && gateway.lists_changes()
        && mcp::is_modern(message.params.as_ref())
}

/// `subscriptions/listen` from a modern caller (see the module doc).
pub async fn subscribe(gateway: &Arc<Gateway>, message: jsonrpc::Message, info: &RequestInfo) -> Response {
    gateway.record_request(&message.method);
    let id = message.id.clone().unwrap_or(Value::Null);
    if let Some(err) = super::dispatch::protocol_error(&message, info) {
        return refusal_for(StatusCode::BAD_REQUEST, id, &err);
    }
    if !info.accepts_sse {
        let err = GatewayError::new(
            Category::InvalidRequest,
            "subscriptions/listen is answered with an event stream: send Accept: text/event-stream",
        );
        return refusal_for(StatusCode::NOT_ACCEPTABLE, id, &err);
    }
    let filter = message.params.as_ref().and_then(|p| p.get("notifications"));
    if filter.is_some_and(|f| !f.is_object()) {
        let err = GatewayError::new(Category::BadInput, "params.notifications must be an object");
        return refusal_for(StatusCode::OK, id, &err);
    }
    let asked = |key: &str| filter.and_then(|f| f.get(key)).and_then(Value::as_bool) == Some(true);
    let lists = Lists {
        tools: asked("toolsListChanged"),
        resources: asked("resourcesListChanged"),
        prompts: asked("promptsListChanged"),
    };
    let uris = match filter.and_then(|f| f.get("resourceSubscriptions")) {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            Some(items.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>())
        }
        Some(_) => {
            let err = GatewayError::new(
                Category::BadInput,
                "params.notifications.resourceSubscriptions must be an array of URI strings",
            );
            return refusal_for(StatusCode::OK, id, &err);
        }
    };
    let per_caller = gateway.resource_subscriptions().per_caller();
    if let Some(uris) = &uris
        && uris.len() > per_caller
    {
        let err = GatewayError::new(
            Category::Overloaded,
            format!("one subscriptions/listen may list at most {per_caller} resources"),
        )
        .with_limit("inbound.max_resource_subscriptions_per_caller", per_caller as u64);
        return refusal_for(StatusCode::OK, id, &err);
    }
    let registration = match gateway.listeners().open(None) {
        Ok(registration) => registration,
        Err(refused) => return refused_stream(gateway, &refused),
    };
    let (updates, resources) = match uris {
        Some(uris) => {
            let (updates, honoured) = subscribe_listed(gateway, uris, info).await;
            (Some(updates), Some(honoured))
        }
        None => (None, None),
    };
    let subscription = Subscription { id, lists, resources };
    let mut listening = Listening::new(
        gateway.clone(),
        info.caller.clone(),
        registration,
        Some(subscription),
        lists,
        info.negotiates_apps(message.params.as_ref()),
    );
    listening.updates = updates;
    stream(listening)
}

/// Subscribes a new listen stream to `uris` (duplicates once); the stream's updates and the
/// URIs honoured (in their canonical form), in the order asked. A URI refused (no canonical
/// form, unroutable, denied, over a bound, refused upstream) is left out: its error is logged
/// and counted like a `resources/subscribe`.
async fn subscribe_listed(
    gateway: &Arc<Gateway>,
    uris: Vec<String>,
    info: &RequestInfo,
) -> (subscriptions::Attached, Vec<String>) {
    let key = gateway.listen_subscriber_key();
    let updates = gateway.attach_subscriber(key.clone(), &info.caller);
    let call = SurfaceCall {
        caller: info.caller.clone(),
        request_id: info.request_id.clone(),
        deadline: info.deadline,
        modern: true,
    };
    let mut honoured: Vec<String> = Vec::new();
    for uri in uris {
        // Honoured in the canonical form the updates will name (two spellings of one URI, once).
        let canonical = crate::resource_uri::CanonicalUri::parse(&uri);
        if canonical.is_ok_and(|c| honoured.iter().any(|h| h == c.as_str())) {
            continue;
        }
        if let Ok(uri) = gateway.subscribe_resource(&key, &uri, &call).await {
            honoured.push(uri.as_str().to_string());
        }
    }
    (updates, honoured)
}

/// The lists whose changes a stream carries.
#[derive(Debug, Clone, Copy)]
struct Lists {
    tools: bool,
    resources: bool,
    prompts: bool,
}

impl Lists {
    const ALL: Lists = Lists { tools: true, resources: true, prompts: true };
}

/// A modern caller's subscription: the request's id, the lists whose changes it asked for and
/// the resources it subscribed to (`None`: it asked for none).
struct Subscription {
    id: Value,
    lists: Lists,
    resources: Option<Vec<String>>,
}

/// One open stream.
struct Listening {
    gateway: Arc<Gateway>,
    caller: Arc<Caller>,
    registration: Registration,
    generation: watch::Receiver<u64>,
    /// The fingerprints of the caller's lists (tools, resources, prompts) as last told (or as
    /// they were when the stream opened).
    seen: [u64; 3],
    subscription: Option<Subscription>,
    /// Which lists' changes are sent on this stream.
    lists: Lists,
    /// Notifications due and not yet sent (several lists may change at once).
    due: std::collections::VecDeque<&'static str>,
    acknowledged: bool,
    keepalive: tokio::time::Interval,
    ended: bool,
    /// The caller's resource updates (its subscriptions end when this is dropped).
    updates: Option<subscriptions::Attached>,
    /// The caller negotiated MCP Apps: its tool list holds the tools for an app.
    apps: bool,
}

impl Listening {
    fn new(
        gateway: Arc<Gateway>,
        caller: Arc<Caller>,
        registration: Registration,
        subscription: Option<Subscription>,
        lists: Lists,
        apps: bool,
    ) -> Self {
        let mut generation = gateway.list_changes().subscribe();
        generation.borrow_and_update();
        let seen = fingerprints(&gateway, &caller, apps);
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            gateway,
            caller,
            registration,
            generation,
            seen,
            subscription,
            lists,
            due: Default::default(),
            acknowledged: false,
            keepalive,
            ended: false,
            updates: None,
            apps,
        }
    }

    fn meta(&self) -> Option<Value> {
        self.subscription.as_ref().map(|s| json!({ SUBSCRIPTION_ID: s.id }))
    }

    async fn next_event(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        if !self.acknowledged {
            self.acknowledged = true;
            if let Some(subscription) = &self.subscription {
                let mut honoured = serde_json::Map::new();
                for (asked, key) in [
                    (subscription.lists.tools, "toolsListChanged"),
                    (subscription.lists.resources, "resourcesListChanged"),
                    (subscription.lists.prompts, "promptsListChanged"),
                ] {
                    if asked {
                        honoured.insert(key.into(), json!(true));
                    }
                }
                if let Some(resources) = &subscription.resources {
                    honoured.insert("resourceSubscriptions".into(), json!(resources));
                }
                let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": self.meta(), "notifications": honoured}});
                return Some(event(&ack));
            }
        }
        loop {
            if let Some(method) = self.due.pop_front() {
                self.gateway.record_list_changed_sent();
                let mut notification = json!({"jsonrpc": "2.0", "method": method});
                if let Some(meta) = self.meta() {
                    notification["params"] = json!({"_meta": meta});
                }
                return Some(event(&notification));
            }
            tokio::select! {
                () = self.registration.closed() => {
                    self.ended = true;
                    // A graceful close of a subscription: its request's result.
                    let subscription = self.subscription.as_ref()?;
                    let done = json!({"jsonrpc": "2.0", "id": subscription.id,
                        "result": {"resultType": "complete", "_meta": self.meta()}});
                    return Some(event(&done));
                }
                changed = self.generation.changed() => {
                    if changed.is_err() {
                        self.ended = true;
                        return None;
                    }
                    self.generation.borrow_and_update();
                    let now = fingerprints(&self.gateway, &self.caller, self.apps);
                    let asked = [self.lists.tools, self.lists.resources, self.lists.prompts];
                    for (i, method) in CHANGED.iter().enumerate() {
                        if asked[i] && now[i] != self.seen[i] {
                            self.due.push_back(method);
                        }
                    }
                    self.seen = now;
                }
                Some(update) = next_update(&mut self.updates) => {
                    return Some(event(&update.to_notification(self.meta().as_ref())));
                }
                _ = self.keepalive.tick() => return Some(Bytes::from_static(b":\n\n")),
            }
        }
    }
}

/// The notification of each list, in the order of [`fingerprints`].
const CHANGED: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
];

/// What `caller` sees of the tools, the resources (with templates) and the prompts, as
/// fingerprints: equal fingerprints, equal lists.
fn fingerprints(gateway: &Gateway, caller: &Caller, apps: bool) -> [u64; 3] {
    let (resources, prompts) = gateway.surface_fingerprints(caller);
    [list_changes::fingerprint(gateway, caller, apps), resources, prompts]
}

/// The next resource update of a stream that has subscriptions (never, for one without).
async fn next_update(
    updates: &mut Option<subscriptions::Attached>,
) -> Option<crate::backchannel::resource_updates::ResourceUpdated> {
    match updates {
        Some(attached) => attached.updates.recv().await,
        None => std::future::pending().await,
    }
}

fn event(message: &Value) -> Bytes {
    let data = serde_json::to_string(message).unwrap_or_default();
    Bytes::from(format!("event: message\ndata: {data}\n\n"))
}

fn stream(listening: Listening) -> Response {
    let events = futures_util::stream::unfold(listening, |mut listening| async move {
        let bytes = listening.next_event().await?;
        Some((Ok::<_, Infallible>(bytes), listening))
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// The answer when no stream could be opened.
fn refused_stream(gateway: &Gateway, refused: &Refused) -> Response {
    match refused {
        Refused::Full { limit } => {
            gateway.record_rejection("listen_streams_full");
            let err = GatewayError::new(
                Category::Overloaded,
                format!("the gateway holds its most change-notification streams ({limit}); try again later"),
            )
            .with_limit("inbound.max_listen_streams", *limit as u64);
            refusal(StatusCode::SERVICE_UNAVAILABLE, &err)
        }
        Refused::Off => refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            &GatewayError::new(Category::InvalidRequest, "list-change notifications are off"),
        ),
    }
}

fn refusal(status: StatusCode, err: &GatewayError) -> Response {
    refusal_for(status, Value::Null, err)
}

fn refusal_for(status: StatusCode, id: Value, err: &GatewayError) -> Response {
    let body = jsonrpc::Response::error(id, err);
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

/// The `Mcp-Session-Id` a session-era `initialize` answer gets when it opened no back-channel
/// session: a stateless listen id bound to `caller`'s subject, so the caller can open the GET
/// stream.
pub fn with_listen_id(mut response: Response, caller: &Caller) -> Response {
    let opened_by = crate::ownership::OpenedBy::of(caller);
    if let Ok(value) = HeaderValue::from_str(&listeners::mint_listen_id(&opened_by)) {
        response.headers_mut().insert(mcp::headers::names::SESSION_ID, value);
    }
    response
}
