//! List changes, both ways: what an upstream's `notifications/tools/list_changed` makes the
//! gateway do, and when a caller's stream is told that its list changed.
//!
//! **From upstreams.** A configured, discovering server that says its tools changed (over a
//! persistent connection, a session-era GET stream or a modern `subscriptions/listen`
//! stream) has *that server* refreshed, never the others. An upstream must not be able to drive
//! a refresh storm: notifications are coalesced ([`ListChanges::upstream_changed`] keeps one
//! pending mark per server) and the refresh loop runs at most one list-change refresh per
//! server per `catalogue.list_changed_min_interval_ms`, after a short debounce
//! (`refresh.rs`). Every notification is counted as `refreshed` or `coalesced`
//! (`mcp_gateway_upstream_list_changed_total{server,result}`); the server label is a
//! configured server's name, so it is bounded by configuration.
//!
//! **To callers.** A generation counter moves whenever what some caller sees may have moved:
//! a catalogue rebuild, a policy reload, a change in the set of unavailable servers while
//! `hide_unavailable_tools` is on (watched every [`AVAILABILITY_EVERY`]). Each open stream
//! then computes a fingerprint of *its caller's* list ([`fingerprint`]): the bytes its
//! `tools/list` would carry (the policy's view of the catalogue for that caller, or the whole
//! catalogue), plus the names of its visible tools hidden as unavailable. A notification is
//! sent only when that fingerprint changed, so a caller whose policy hides the tool that came
//! or went is not told, and a caller is told when a server it uses becomes unavailable. The
//! degradation summary `tools/list` carries in `_meta` (which changes with every breaker tick)
//! is not part of the fingerprint: it is not the list.

use std::{
    collections::{BTreeSet, HashSet},
    hash::{BuildHasher, Hash, Hasher},
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use tokio::sync::{Notify, watch};

use super::{Gateway, capabilities};
use crate::identity::Caller;

/// How often the set of unavailable servers (and the policy generation) is compared with the
/// last one.
pub const AVAILABILITY_EVERY: Duration = Duration::from_millis(500);

/// The gateway's side of list changes (see the module doc).
pub struct ListChanges {
    generation: watch::Sender<u64>,
    /// Configured servers that sent `list_changed` since the refresh loop last looked.
    pending: Mutex<BTreeSet<Arc<str>>>,
    /// Wakes the refresh loop for `pending`.
    pub(super) wake: Notify,
}

impl Default for ListChanges {
    fn default() -> Self {
        Self { generation: watch::channel(0).0, pending: Mutex::default(), wake: Notify::new() }
    }
}

impl ListChanges {
    /// What callers may see might have changed: every stream compares its fingerprint.
    pub fn bump(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// A receiver that wakes at each [`ListChanges::bump`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Takes the servers whose notifications wait for the refresh loop.
    pub(super) fn take_pending(&self) -> BTreeSet<Arc<str>> {
        self.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default()
    }

    /// Marks `server` changed; `false` when it was already marked (this notification is
    /// coalesced into the one waiting).
    fn mark(&self, server: &Arc<str>) -> bool {
        self.pending.lock().is_ok_and(|mut p| p.insert(server.clone()))
    }
}

impl Gateway {
    /// The list-change hub.
    pub fn list_changes(&self) -> &ListChanges {
        &self.list_changes
    }

    /// Callers' change-notification streams (their bound and their ends).
    pub fn listeners(&self) -> &Arc<crate::backchannel::listeners::Listeners> {
        &self.listeners
    }

    /// Whether callers can be told of list changes (`listChanged` in `initialize` and
    /// `server/discover`).
    pub fn lists_changes(&self) -> bool {
        self.listeners.enabled()
    }

    /// An upstream said its tools changed `count` times: its refresh is asked for (once per
    /// wait, see the module doc). Servers that are not configured and discovering are ignored.
    pub fn upstream_list_changed(&self, server: &Arc<str>, count: u64) {
        if count == 0 || !self.configured_upstream(server.as_ref()).is_some_and(|u| u.config.discover) {
            return;
        }
        let counter = &self.metrics.upstream_list_changed;
        let coalesced = if self.list_changes.mark(server) { count - 1 } else { count };
        if coalesced > 0 {
            counter.with_label_values(&[server.as_ref(), "coalesced"]).inc_by(coalesced);
        }
        if coalesced < count {
            tracing::debug!(server = %server, "upstream says its tools changed; refreshing that server");
            self.list_changes.wake.notify_one();
        }
    }

    /// Counts what the refresh loop made of one pending mark.
    pub(super) fn record_list_changed(&self, server: &str, refreshed: bool) {
        let result = if refreshed { "refreshed" } else { "coalesced" };
        self.metrics.upstream_list_changed.with_label_values(&[server, result]).inc();
    }

    /// Counts one `notifications/tools/list_changed` sent to a caller.
    pub fn record_list_changed_sent(&self) {
        self.metrics.list_changed_sent.inc();
    }

    /// Starts the availability watch (once, at start): what moves the generation besides
    /// catalogue rebuilds and the servers' own change signals ([`Self::watch_list_changes_of`]).
    pub(super) fn watch_list_changes(self: &Arc<Self>) {
        if self.listeners.enabled() {
            let gateway = Arc::downgrade(self);
            crate::supervise::spawn(crate::supervise::Loop::Availability, move || {
                watch_availability(gateway.clone())
            });
        }
    }

    /// Starts a persistent or streamable-HTTP discovering server's own change signal.
    pub(super) fn watch_list_changes_of(self: &Arc<Self>, upstream: &Arc<super::Upstream>) {
        let changes = match (&upstream.connection, &upstream.http) {
            (Some(connection), _) => connection.list_changes(),
            (None, Some(http)) => http.watch_list_changes(
                self.metrics.upstream_change_streams.with_label_values(&[upstream.name.as_ref()]),
            ),
            _ => return,
        };
        let gateway = Arc::downgrade(self);
        let server = upstream.name.clone();
        let retirement = upstream.retirement.clone();
        // Supervised: a restarted one counts from the signal's current value.
        crate::supervise::spawn(crate::supervise::Loop::ListChanges, move || {
            retirement.until(forward(gateway.clone(), server.clone(), changes.clone()))
        });
    }

    /// The unavailable servers whose tools `hide_unavailable_tools` leaves out (empty when
    /// it is off).
    fn hidden_servers(&self) -> BTreeSet<String> {
        if !self.settings().config.hide_unavailable_tools {
            return BTreeSet::new();
        }
        capabilities::server_health(self)
            .into_iter()
            .filter(|(_, h)| h.availability == capabilities::Availability::Unavailable)
            .map(|(server, _)| server)
            .collect()
    }

    /// Moves with the policy file's reloads and with the configuration's: a reload that
    /// brings a new policy starts its file's count again.
    fn policy_generation(&self) -> u64 {
        let settings = self.settings();
        let file = settings.policy.as_ref().map_or(0, |p| p.store.current().0);
        settings.generation().wrapping_shl(32) ^ file
    }
}

/// Counts an upstream's notifications (a counter watched for increments) into the hub.
async fn forward(gateway: Weak<Gateway>, server: Arc<str>, mut changes: watch::Receiver<u64>) {
    let mut seen = *changes.borrow_and_update();
    while changes.changed().await.is_ok() {
        let now = *changes.borrow_and_update();
        let Some(gateway) = gateway.upgrade() else { return };
        gateway.upstream_list_changed(&server, now.wrapping_sub(seen));
        seen = now;
    }
}

/// Moves the generation when the hidden servers or the policy change (while streams are open).
async fn watch_availability(gateway: Weak<Gateway>) {
    let mut last: Option<(BTreeSet<String>, u64)> = None;
    let mut tick = tokio::time::interval(AVAILABILITY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(gateway) = gateway.upgrade() else { return };
        // Compared on every tick, streams or not, so a stream opened just before a change
        // still sees it (its own baseline is taken when it opens).
        let now = (gateway.hidden_servers(), gateway.policy_generation());
        if last.as_ref().is_some_and(|l| *l != now) && !gateway.listeners.is_empty() {
            gateway.list_changes.bump();
        }
        last = Some(now);
    }
}

/// A fingerprint of the tool list `caller` sees now (see the module doc): equal fingerprints,
/// equal lists. `apps`: the caller negotiated MCP Apps, so its list holds the tools for an app.
pub fn fingerprint(gateway: &Gateway, caller: &Caller, apps: bool) -> u64 {
    let view = gateway.tool_view(caller);
    // Each list hashes itself once (its clones share the hash), so the streams of callers
    // who see the same list hash it once.
    let list = match &view {
        _ if apps => gateway.apps_tool_list(view.as_deref()).fingerprint(),
        Some(view) => view.list.fingerprint(),
        None => gateway.catalog().tool_list().fingerprint(),
    };
    let mut hasher = foldhash::quality::FixedState::with_seed(0x6669_6e67).build_hasher();
    list.hash(&mut hasher);
    let hidden = gateway.hidden_servers();
    if !hidden.is_empty() {
        let hidden: HashSet<&str> = hidden.iter().map(String::as_str).collect();
        for tool in gateway.catalog().snapshot().tools() {
            if hidden.contains(tool.server.as_ref()) && view.as_ref().is_none_or(|v| v.shows(&tool.name)) {
                tool.name.hash(&mut hasher);
            }
        }
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_mark_coalesces_until_taken() {
        let changes = ListChanges::default();
        let server: Arc<str> = "s".into();
        assert!(changes.mark(&server));
        assert!(!changes.mark(&server), "coalesced");
        assert_eq!(changes.take_pending().len(), 1);
        assert!(changes.mark(&server), "taken: the next one counts again");
    }
}
