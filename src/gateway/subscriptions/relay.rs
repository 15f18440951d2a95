//! The upstream side of resource subscriptions: telling a server what the gateway subscribes
//! to, reading its `notifications/resources/updated` and relaying each to the callers who
//! subscribed to that URI, and subscribing again after a reconnect.
//!
//! Per transport (what "telling the server" is):
//! - persistent connections (stdio, WebSocket, HTTP+SSE) and session-era streamable-HTTP
//!   servers: `resources/subscribe` / `resources/unsubscribe {uri}` through the server's
//!   stack, as the gateway itself (no caller's credentials: the subscription is shared). The
//!   updates arrive on the connection (the multiplexer) or on the session's `GET` stream
//!   (`upstream/http/watch.rs`);
//! - 2026-07-28 servers have no `resources/subscribe`: the URIs go in the `resourceSubscriptions`
//!   of the gateway's `subscriptions/listen` to that server, which is opened again with the new
//!   list whenever it changes.
//!
//! After a reconnect (a persistent connection ready again) or a new session (a streamable-HTTP
//! server's era learned anew), every URI still wanted is subscribed again: a server keeps no
//! subscription across connections or sessions.

use std::sync::{Arc, Weak};

use serde_json::{Map, json};
use tokio::sync::broadcast;
use tower::ServiceExt;

use super::{Joined, SubscriberKey, Target};
use crate::{
    backchannel::resource_updates::ResourceUpdated,
    error::{Category, GatewayError},
    gateway::{Gateway, Upstream},
    identity::Caller,
    protocol::mcp::Era,
    resource_uri::CanonicalUri,
    upstream::{UpstreamReply, UpstreamRequest},
};

impl Gateway {
    /// Takes `target` for `key` and, when it is the first, subscribes upstream; a refused
    /// upstream subscription leaves nothing behind.
    pub(super) async fn join_upstream(
        &self,
        key: &SubscriberKey,
        caller: &Arc<Caller>,
        target: Target,
    ) -> Result<(), GatewayError> {
        let table = &self.resource_subscriptions;
        let lock = table.op_lock(&target.0);
        let _held = lock.lock().await;
        if table.join(key, caller, &target)? != Joined::First {
            return Ok(());
        }
        match self.tell_upstream(&target, true).await {
            Ok(()) => Ok(()),
            Err(err) => {
                table.part(key, &target);
                Err(err)
            }
        }
    }

    /// Gives `target` up for `key` and, when nobody wants it any more, unsubscribes upstream
    /// (a failure is logged: the caller's subscription is gone either way).
    pub(super) async fn part_upstream(&self, key: &SubscriberKey, target: &Target) {
        let table = &self.resource_subscriptions;
        let lock = table.op_lock(&target.0);
        let _held = lock.lock().await;
        if table.part(key, target)
            && let Err(err) = self.tell_upstream(target, false).await
        {
            tracing::warn!(server = %target.0, uri = %crate::redact::url(target.1.as_str()), error = %crate::redact::shown(&err), "resources/unsubscribe upstream failed");
        }
    }

    /// Tells the server of `target` to subscribe (or unsubscribe), as its era asks.
    async fn tell_upstream(&self, target: &Target, subscribe: bool) -> Result<(), GatewayError> {
        let (server, uri) = target;
        let Some(upstream) = self.configured_upstream(server.as_ref()) else {
            return Err(GatewayError::new(
                Category::Internal,
                "the server of this resource is not configured",
            ));
        };
        if let Some(http) = &upstream.http
            && http.era() == Some(Era::Modern)
        {
            let uris = self.resource_subscriptions.targets_of(server);
            http.want_resources(uris.iter().map(|u| u.as_str().to_string()).collect());
            return Ok(());
        }
        let method = if subscribe { "resources/subscribe" } else { "resources/unsubscribe" };
        let mut params = Map::new();
        params.insert("uri".into(), json!(uri.as_str()));
        match upstream.service.clone().oneshot(UpstreamRequest::new(method, params)).await {
            Ok(UpstreamReply::Result(_)) => Ok(()),
            Ok(UpstreamReply::Error(error)) => Err(GatewayError::from_upstream_reply(error, false)),
            Err(error) => Err(GatewayError::from_upstream(&error)),
        }
    }

    /// Subscribes again to every URI still wanted on `server` (after a reconnect or a new
    /// session).
    async fn resubscribe(&self, server: &Arc<str>) {
        let table = &self.resource_subscriptions;
        let lock = table.op_lock(server);
        let _held = lock.lock().await;
        for uri in table.targets_of(server) {
            let target = (server.clone(), uri);
            if let Err(err) = self.tell_upstream(&target, true).await {
                tracing::warn!(server = %server, uri = %crate::redact::url(target.1.as_str()), error = %crate::redact::shown(&err), "subscribing again after a reconnect failed");
            }
        }
    }

    /// Relays one update from `server` to the callers subscribed to its URI (in its canonical
    /// form, which the relayed update names) who may still read it (the policy asked again),
    /// each to its stream without waiting.
    pub(super) fn relay_update(&self, server: &Arc<str>, update: &ResourceUpdated) {
        let table = &self.resource_subscriptions;
        // No subscription is to a URI without a canonical form.
        let Ok(uri) = CanonicalUri::parse(update.uri()) else {
            return table.count(server, "unsubscribed", 1);
        };
        let update = &update.with_uri(uri.as_str());
        let target: Target = (server.clone(), uri);
        let receivers: Vec<(Arc<Caller>, Option<tokio::sync::mpsc::Sender<ResourceUpdated>>)> =
            match table.state.lock() {
                Ok(state) => state
                    .by_target
                    .get(&target)
                    .into_iter()
                    .flatten()
                    .filter_map(|key| state.subscribers.get(key))
                    .map(|s| (s.caller.clone(), s.sink.as_ref().map(|(_, sink)| sink.clone())))
                    .collect(),
                Err(_) => Vec::new(),
            };
        if receivers.is_empty() {
            return table.count(server, "unsubscribed", 1);
        }
        let index = self.federation().index();
        let mime_type = index.resource(&target.1).and_then(|r| r.mime_type.clone());
        for (caller, sink) in receivers {
            let item = crate::policy::SurfaceItem::Resource {
                uri: &target.1,
                server,
                mime_type: mime_type.as_deref(),
            };
            let result =
                if !self.settings().policy.as_ref().is_none_or(|p| p.decide_item(&caller, item).allowed) {
                    "denied"
                } else {
                    match sink.map(|sink| sink.try_send(update.clone())) {
                        None => "no_stream",
                        Some(Err(_)) => "full",
                        Some(Ok(())) => "relayed",
                    }
                };
            table.count(server, result, 1);
        }
    }

    /// Starts the sweep of subscribers that never had a stream (once, at start).
    pub(in crate::gateway) fn relay_resource_updates(self: &Arc<Self>) {
        let gateway = Arc::downgrade(self);
        crate::supervise::spawn(crate::supervise::Loop::ResourceUpdates, move || {
            sweep_streamless(gateway.clone())
        });
    }

    /// Starts, for a discovering server with a persistent connection or a streamable-HTTP
    /// transport, the loop that relays its updates and subscribes again after reconnects.
    pub(in crate::gateway) fn relay_resource_updates_of(self: &Arc<Self>, upstream: &Arc<Upstream>) {
        if upstream.connection.is_none() && upstream.http.is_none() {
            return;
        }
        let gateway = Arc::downgrade(self);
        let server = upstream.name.clone();
        let mine = Arc::downgrade(upstream);
        let retirement = upstream.retirement.clone();
        crate::supervise::spawn(crate::supervise::Loop::ResourceUpdates, move || {
            retirement.until(relay_loop(gateway.clone(), server.clone(), mine.clone()))
        });
    }
}

/// Leaves the subscribers that never had a stream within [`super::STREAMLESS_TTL`].
async fn sweep_streamless(gateway: Weak<Gateway>) {
    let mut tick = tokio::time::interval(super::SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(gateway) = gateway.upgrade() else { return };
        for key in gateway.resource_subscriptions.streamless(std::time::Instant::now()) {
            tracing::info!(subscriber = %crate::redact::session_tag(&key), "resource subscriptions without a stream ended (idle)");
            gateway.leave_subscriptions(&key).await;
        }
    }
}

/// What one server's loop waits for besides updates: its next reconnect or new session.
enum Renewals {
    Connection(crate::upstream::connection::Recoveries),
    Http(tokio::sync::watch::Receiver<u64>),
}

impl Renewals {
    /// `false` once there will be none.
    async fn next(&mut self) -> bool {
        match self {
            Renewals::Connection(recoveries) => recoveries.next().await,
            Renewals::Http(generations) => generations.changed().await.is_ok(),
        }
    }
}

/// Holds no strong reference to the gateway or the server between events: the receivers do
/// not keep the connection open, and end when it is gone.
async fn relay_loop(gateway: Weak<Gateway>, server: Arc<str>, mine: Weak<Upstream>) {
    let Some((mut updates, mut renewals)) =
        mine.upgrade().and_then(|upstream| match (&upstream.connection, &upstream.http) {
            (Some(connection), _) => {
                Some((connection.resource_updates(), Renewals::Connection(connection.recoveries())))
            }
            (None, Some(http)) => {
                let mut generations = http.learned_generations();
                generations.borrow_and_update();
                Some((http.resource_updates(), Renewals::Http(generations)))
            }
            (None, None) => None,
        })
    else {
        return;
    };
    let mut renewing = true;
    loop {
        tokio::select! {
            update = updates.recv() => {
                let Some(gateway) = gateway.upgrade() else { return };
                match update {
                    Ok(update) => gateway.relay_update(&server, &update),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        gateway.resource_subscriptions.count(&server, "lagged", n);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
            renewed = renewals.next(), if renewing => {
                if !renewed {
                    renewing = false;
                    continue;
                }
                let Some(gateway) = gateway.upgrade() else { return };
                gateway.resubscribe(&server).await;
            }
        }
    }
}
