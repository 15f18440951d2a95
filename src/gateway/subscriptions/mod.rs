//! Resource subscriptions that fan in and out: callers subscribe to resource URIs, the gateway
//! subscribes upstream once per (server, URI) however many callers want it, relays each
//! `notifications/resources/updated` to the callers subscribed to that URI who may still see
//! it, and unsubscribes upstream when the last of them leaves.
//!
//! Why a table of its own: a subscription outlives the request that made it and belongs to a
//! caller's back-channel, not to a call. Who is a subscriber ([`SubscriberKey`]):
//! - a session-era caller's gateway session (`Mcp-Session-Id`, a back-channel session or a
//!   listen id): `resources/subscribe` and `resources/unsubscribe` on `POST`, the updates on
//!   its `GET /mcp` stream ([`Gateway::attach_subscriber`]). Its subscriptions end with
//!   `resources/unsubscribe`, `DELETE /mcp`, or when the session's `GET` stream closes (a
//!   listen id never expires by itself, so the stream is what tells the gateway the caller is
//!   gone). Subscribing before the stream is open is allowed: updates wait for no stream and
//!   are dropped (counted `no_stream`) until one is open; a subscriber that never opens one
//!   is left after [`STREAMLESS_TTL`] (swept every [`SWEEP_EVERY`]), as an idle back-channel
//!   session expires, so a caller cannot park upstream subscriptions without a back-channel.
//! - a 2026-07-28 caller's `subscriptions/listen` stream (its `resourceSubscriptions`): the
//!   subscriptions live exactly as long as that stream.
//!
//! The rules, in one place:
//! - **Routing and policy** as `resources/read`: the URI is taken in its canonical form
//!   (`crate::resource_uri`; no form: `-32602` `bad_input`), which every decision, the table
//!   and the server see (a caller's updates name that form); the federation index routes it
//!   (unroutable: `-32002` `resource_not_found`), the server must have declared
//!   `resources.subscribe`, and the policy's `Action::"read"` decides (a caller who may not
//!   read a resource may not watch it either; denied: `forbidden`). The policy is asked again
//!   for every update relayed, so a policy reload stops updates to a caller it now denies.
//! - **Bounds**: at most `inbound.max_resource_subscriptions_per_caller` per subscriber and
//!   `inbound.max_resource_subscriptions` in all; one more is refused (`-32005` `overloaded`,
//!   the key named in `error.data.limit`). An update waits in a stream's buffer of
//!   [`STREAM_BUFFER`]; past it, updates are dropped (counted `full`).
//! - **Upstream, once**: the first subscriber of (server, URI) makes the gateway subscribe
//!   upstream (its failure is the caller's error, nothing kept); the last one leaving makes
//!   it unsubscribe. Who sends what is decided under one lock per server ([`relay`]), so a
//!   subscribe racing an unsubscribe never leaves the upstream subscribed to nothing or
//!   unsubscribed from something wanted.
//! - **Metrics** (never a URI as a label): `mcp_gateway_resource_subscriptions{server}` (the
//!   gateway's subscriptions upstream) and
//!   `mcp_gateway_resource_updates_total{server,result}` (`relayed`, or dropped:
//!   `unsubscribed`, `denied`, `no_stream`, `full`, `lagged`).

pub mod relay;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, Weak, atomic::AtomicU64},
};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Gateway;
use crate::{
    backchannel::resource_updates::ResourceUpdated,
    error::{Category, GatewayError},
    identity::Caller,
    resource_uri::CanonicalUri,
};

/// The methods of session-era callers this module answers.
pub const METHODS: [&str; 2] = ["resources/subscribe", "resources/unsubscribe"];

/// How long a subscriber without a stream keeps its subscriptions (an idle session's life).
pub const STREAMLESS_TTL: std::time::Duration = crate::backchannel::sessions::IDLE_TTL;
/// How often subscribers without a stream are looked at.
pub const SWEEP_EVERY: std::time::Duration = crate::backchannel::sessions::SWEEP_EVERY;

/// Updates waiting for one caller's stream before newer ones are dropped.
pub const STREAM_BUFFER: usize = 64;

/// Who holds subscriptions: `session:<id>` (a session-era caller's gateway session) or
/// `listen:<n>` (one modern `subscriptions/listen` stream).
pub type SubscriberKey = Arc<str>;

/// The key of a session-era caller's session.
pub fn session_key(session: &str) -> SubscriberKey {
    format!("session:{session}").into()
}

/// A (server, URI) the gateway may be subscribed to upstream.
type Target = (Arc<str>, CanonicalUri);

/// The subscription table (see the module doc).
pub struct ResourceSubscriptions {
    state: Mutex<State>,
    /// One lock per server: held while the table changes and the upstream is told.
    ops: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    per_caller: usize,
    total: usize,
    next_stream: AtomicU64,
    subscriptions_gauge: prometheus::IntGaugeVec,
    updates_counter: prometheus::IntCounterVec,
}

#[derive(Default)]
struct State {
    subscribers: HashMap<SubscriberKey, Subscriber>,
    /// Who wants each target; a target is here exactly while the gateway is (or is becoming)
    /// subscribed upstream.
    by_target: HashMap<Target, BTreeSet<SubscriberKey>>,
    /// Subscriptions of all subscribers.
    total: usize,
}

struct Subscriber {
    caller: Arc<Caller>,
    wants: BTreeSet<Target>,
    /// The stream its updates go to (its number, its sender).
    sink: Option<(u64, mpsc::Sender<ResourceUpdated>)>,
    /// When it came without a stream (swept after [`STREAMLESS_TTL`] unless one is attached).
    since: std::time::Instant,
}

/// How a subscription was taken.
#[derive(Debug, PartialEq, Eq)]
enum Joined {
    /// The subscriber had it already.
    Already,
    /// The first subscriber of the target: the upstream is to be told.
    First,
    /// Others want it too: the gateway is subscribed upstream already.
    Shared,
}

impl ResourceSubscriptions {
    pub fn new(limits: &crate::config::InboundLimits, metrics: &crate::telemetry::metrics::Metrics) -> Self {
        Self {
            state: Mutex::default(),
            ops: Mutex::default(),
            per_caller: limits.max_resource_subscriptions_per_caller,
            total: limits.max_resource_subscriptions,
            next_stream: AtomicU64::new(1),
            subscriptions_gauge: metrics.resource_subscriptions.clone(),
            updates_counter: metrics.resource_updates.clone(),
        }
    }

    /// The most subscriptions one subscriber may hold.
    pub fn per_caller(&self) -> usize {
        self.per_caller
    }

    fn op_lock(&self, server: &Arc<str>) -> Arc<tokio::sync::Mutex<()>> {
        match self.ops.lock() {
            Ok(mut ops) => ops.entry(server.clone()).or_default().clone(),
            Err(_) => Arc::default(),
        }
    }

    /// Takes `target` for `key` within the bounds (call with the server's lock held).
    fn join(
        &self,
        key: &SubscriberKey,
        caller: &Arc<Caller>,
        target: &Target,
    ) -> Result<Joined, GatewayError> {
        let Ok(mut state) = self.state.lock() else {
            return Err(GatewayError::new(Category::Internal, "the subscription table is unavailable"));
        };
        let held = state.subscribers.get(key).map_or(0, |s| s.wants.len());
        if state.subscribers.get(key).is_some_and(|s| s.wants.contains(target)) {
            return Ok(Joined::Already);
        }
        if held >= self.per_caller {
            return Err(GatewayError::new(
                Category::Overloaded,
                format!(
                    "this caller holds its most resource subscriptions ({}); unsubscribe from one first",
                    self.per_caller
                ),
            )
            .with_limit("inbound.max_resource_subscriptions_per_caller", self.per_caller as u64));
        }
        if state.total >= self.total {
            return Err(GatewayError::new(
                Category::Overloaded,
                format!(
                    "the gateway holds its most resource subscriptions ({}); try again later",
                    self.total
                ),
            )
            .with_limit("inbound.max_resource_subscriptions", self.total as u64));
        }
        let subscriber = state.subscribers.entry(key.clone()).or_insert_with(|| Subscriber {
            caller: caller.clone(),
            wants: BTreeSet::new(),
            sink: None,
            since: std::time::Instant::now(),
        });
        subscriber.wants.insert(target.clone());
        state.total += 1;
        let wanted_by = state.by_target.entry(target.clone()).or_default();
        wanted_by.insert(key.clone());
        if wanted_by.len() == 1 {
            self.subscriptions_gauge.with_label_values(&[target.0.as_ref()]).inc();
            Ok(Joined::First)
        } else {
            Ok(Joined::Shared)
        }
    }

    /// Gives `target` up for `key` (with the server's lock held); whether nobody wants it any
    /// more (the upstream is to be told).
    fn part(&self, key: &SubscriberKey, target: &Target) -> bool {
        let Ok(mut state) = self.state.lock() else { return false };
        let State { subscribers, by_target, total } = &mut *state;
        let Some(subscriber) = subscribers.get_mut(key) else { return false };
        if !subscriber.wants.remove(target) {
            return false;
        }
        *total = total.saturating_sub(1);
        if subscriber.wants.is_empty() && subscriber.sink.is_none() {
            subscribers.remove(key);
        }
        let Some(wanted_by) = by_target.get_mut(target) else { return false };
        wanted_by.remove(key);
        if !wanted_by.is_empty() {
            return false;
        }
        by_target.remove(target);
        self.subscriptions_gauge.with_label_values(&[target.0.as_ref()]).dec();
        true
    }

    /// What `key` is subscribed to now.
    fn wants(&self, key: &SubscriberKey) -> Vec<Target> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.subscribers.get(key).map(|s| s.wants.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// The URIs the gateway is subscribed to on `server`.
    fn targets_of(&self, server: &str) -> Vec<CanonicalUri> {
        let Ok(state) = self.state.lock() else { return Vec::new() };
        let mut uris: Vec<CanonicalUri> =
            state.by_target.keys().filter(|(s, _)| s.as_ref() == server).map(|(_, u)| u.clone()).collect();
        uris.sort();
        uris
    }

    /// Subscribers that have had no stream for [`STREAMLESS_TTL`] at `now`.
    fn streamless(&self, now: std::time::Instant) -> Vec<SubscriberKey> {
        let Ok(state) = self.state.lock() else { return Vec::new() };
        state
            .subscribers
            .iter()
            .filter(|(_, s)| s.sink.is_none() && now.saturating_duration_since(s.since) >= STREAMLESS_TTL)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// How many subscriptions `key` holds (tests, admin).
    pub fn held_by(&self, key: &str) -> usize {
        self.state.lock().ok().and_then(|s| s.subscribers.get(key).map(|s| s.wants.len())).unwrap_or(0)
    }

    fn count(&self, server: &str, result: &str, n: u64) {
        if n > 0 {
            self.updates_counter.with_label_values(&[server, result]).inc_by(n);
        }
    }
}

/// A stream attached to a subscriber: its updates, until dropped. Dropping it ends the
/// subscriber's subscriptions (the stream was its back-channel).
pub struct Attached {
    pub updates: mpsc::Receiver<ResourceUpdated>,
    _detach: Detach,
}

struct Detach {
    gateway: Weak<Gateway>,
    key: SubscriberKey,
    stream: u64,
}

impl Drop for Detach {
    fn drop(&mut self) {
        let Some(gateway) = self.gateway.upgrade() else { return };
        let table = &gateway.resource_subscriptions;
        let current = table.state.lock().is_ok_and(|mut state| match state.subscribers.get_mut(&self.key) {
            Some(subscriber) if subscriber.sink.as_ref().is_some_and(|(n, _)| *n == self.stream) => {
                subscriber.sink = None;
                if subscriber.wants.is_empty() {
                    state.subscribers.remove(&self.key);
                }
                true
            }
            _ => false,
        });
        // Only the stream updates go to: an older stream of the same session changes nothing.
        if current && tokio::runtime::Handle::try_current().is_ok() {
            let key = self.key.clone();
            tokio::spawn(async move { gateway.leave_subscriptions(&key).await });
        }
    }
}

impl Gateway {
    /// The resource subscription table.
    pub fn resource_subscriptions(&self) -> &ResourceSubscriptions {
        &self.resource_subscriptions
    }

    /// Whether callers may subscribe to resources: some server declared `resources.subscribe`
    /// and callers' streams are on (`inbound.max_listen_streams > 0`).
    pub fn offers_subscriptions(&self) -> bool {
        self.lists_changes() && !self.federation().index().subscribing.is_empty()
    }

    /// Attaches a stream to `key` (created if new): the subscriber's updates go there from now
    /// on, until the returned value is dropped.
    pub fn attach_subscriber(self: &Arc<Self>, key: SubscriberKey, caller: &Arc<Caller>) -> Attached {
        let table = &self.resource_subscriptions;
        let stream = table.next_stream.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (sink, updates) = mpsc::channel(STREAM_BUFFER);
        if let Ok(mut state) = table.state.lock() {
            let subscriber = state.subscribers.entry(key.clone()).or_insert_with(|| Subscriber {
                caller: caller.clone(),
                wants: BTreeSet::new(),
                sink: None,
                since: std::time::Instant::now(),
            });
            subscriber.sink = Some((stream, sink));
        }
        Attached { updates, _detach: Detach { gateway: Arc::downgrade(self), key, stream } }
    }

    /// A fresh key for a modern caller's `subscriptions/listen` stream.
    pub fn listen_subscriber_key(&self) -> SubscriberKey {
        let n = self.resource_subscriptions.next_stream.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("listen:{n}").into()
    }

    /// Subscribes `key` (whose caller is `call.caller`) to `uri`: taken in its canonical form,
    /// routed, checked by the policy, within the bounds, and subscribed upstream when it is the
    /// first (see the module doc); the form subscribed to. Logged, counted and audited as
    /// `resources/subscribe`.
    pub async fn subscribe_resource(
        &self,
        key: &SubscriberKey,
        uri: &str,
        call: &super::federation::SurfaceCall,
    ) -> Result<CanonicalUri, GatewayError> {
        let started = std::time::Instant::now();
        const METHOD: &str = "resources/subscribe";
        let uri = match super::federation::canonical_uri(uri) {
            Ok(uri) => uri,
            Err(err) => {
                self.record_surface(call, started, METHOD, "", None, err.category.as_str(), None);
                return Err(err);
            }
        };
        let shown = crate::redact::url(uri.as_str());
        let index = self.federation().index();
        let server = match index.route_uri(&uri) {
            Ok(server) => server,
            Err(why) => {
                let err = super::federation::not_found(&uri, why);
                self.record_surface(call, started, METHOD, &shown, None, err.category.as_str(), None);
                return Err(err);
            }
        };
        if !index.subscribes(&server) {
            let err = GatewayError::new(
                Category::MethodNotFound,
                "the server of this resource does not offer subscriptions (resources.subscribe)",
            )
            .with_server(server.clone());
            self.record_surface(call, started, METHOD, &shown, Some(&server), err.category.as_str(), None);
            return Err(err);
        }
        let item = crate::policy::SurfaceItem::Resource {
            uri: &uri,
            server: &server,
            mime_type: index.resource(&uri).and_then(|r| r.mime_type.as_deref()),
        };
        if let Err(denied) = self.decide_item(&call.caller, item) {
            return Err(self.refused(call, started, METHOD, &shown, &server, *denied));
        }
        let result = self.join_upstream(key, &call.caller, (server.clone(), uri.clone())).await;
        self.answered(call, started, METHOD, &shown, &server, result.map(|()| json!({})))?;
        Ok(uri)
    }

    /// Unsubscribes `key` from `uri` (on whichever server it was subscribed through); nothing
    /// to do when it was not subscribed. The upstream is told when it was the last subscriber.
    pub async fn unsubscribe_resource(&self, key: &SubscriberKey, uri: &CanonicalUri) {
        for target in self.resource_subscriptions.wants(key).into_iter().filter(|(_, u)| u == uri) {
            self.part_upstream(key, &target).await;
        }
    }

    /// Ends every subscription of `key` (its stream or session is gone).
    pub async fn leave_subscriptions(&self, key: &SubscriberKey) {
        for target in self.resource_subscriptions.wants(key) {
            self.part_upstream(key, &target).await;
        }
    }

    /// Answers `resources/subscribe` or `resources/unsubscribe` (`{uri}` → `{}`) of a
    /// session-era caller whose verified gateway session is `session`.
    pub async fn subscription_method(
        &self,
        method: &str,
        params: Option<Value>,
        session: Option<&Arc<str>>,
        call: &super::federation::SurfaceCall,
    ) -> Result<Value, GatewayError> {
        if call.modern {
            return Err(GatewayError::new(
                Category::MethodNotFound,
                format!(
                    "{method} is not part of 2026-07-28: send subscriptions/listen with params.notifications.resourceSubscriptions"
                ),
            ));
        }
        if !self.lists_changes() {
            return Err(GatewayError::new(
                Category::InvalidRequest,
                "resource subscriptions need callers' streams, which are off (inbound.max_listen_streams = 0)",
            ));
        }
        let Some(session) = session else {
            return Err(GatewayError::new(
                Category::InvalidRequest,
                format!(
                    "{method} needs a back-channel: send the Mcp-Session-Id the gateway's initialize answer gave, and open GET /mcp with it to receive notifications/resources/updated"
                ),
            ));
        };
        let Some(uri) = params.as_ref().and_then(|p| p.get("uri")).and_then(Value::as_str) else {
            return Err(GatewayError::new(Category::BadInput, "params.uri must be a string"));
        };
        let key = session_key(session);
        if method == METHODS[0] {
            self.subscribe_resource(&key, uri, call).await?;
        } else {
            let uri = super::federation::canonical_param(params.as_ref().and_then(|p| p.get("uri")))?;
            self.unsubscribe_resource(&key, &uri).await;
        }
        Ok(json!({}))
    }

    /// Ends the subscriptions of a session-era caller's session (`DELETE /mcp`).
    pub fn end_session_subscriptions(self: &Arc<Self>, session: &str) {
        let key = session_key(session);
        if self.resource_subscriptions.held_by(&key) == 0 || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let gateway = self.clone();
        tokio::spawn(async move { gateway.leave_subscriptions(&key).await });
    }
}

#[cfg(test)]
mod tests;
