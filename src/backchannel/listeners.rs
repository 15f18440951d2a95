//! Callers' change-notification streams: the session-era `GET /mcp` stream and the modern
//! `subscriptions/listen` stream both carry `notifications/tools/list_changed` (what decides
//! when to send one is `gateway/list_changes.rs`; the HTTP side is `server/listen.rs`). This
//! module keeps the bookkeeping every such stream needs, whatever its era:
//!
//! - **A bound.** At most `inbound.max_listen_streams` streams are open at once; one more is
//!   refused ([`Refused::Full`], 503 `-32005` with the key named) rather than letting callers
//!   park an unbounded number of long-lived responses. `0` turns the feature off.
//! - **An end.** A stream ends when its caller goes away (the body is dropped), when the
//!   session it was opened under ends (`DELETE /mcp`, [`Listeners::close_session`]) or at
//!   shutdown ([`Listeners::close_all`]), so a long-lived stream never holds up a drain.
//! - **Listen session ids.** The session era's GET stream needs an `Mcp-Session-Id`, but the
//!   gateway keeps no table for callers that need nothing else: a session-era `initialize`
//!   that opens no back-channel session is given a *stateless* id, `mcpgw-listen-` + 128
//!   random bits + a tag keyed by a per-process secret over the random part and the subject
//!   that opened it ([`mint_listen_id`]; the id is bound to that subject, [`crate::ownership`]:
//!   presented by another subject, or anonymously, it does not verify and is answered `404`
//!   like an unknown one). The gateway
//!   recognises its own ids without storing them ([`is_listen_id`]), so a flood of
//!   `initialize`s costs no memory and cannot crowd out back-channel sessions; after a restart
//!   the ids no longer verify and callers get 404 (initialize again), as for an expired session.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::ownership::OpenedBy;

/// The prefix of a stateless listen session id.
pub const LISTEN_ID_PREFIX: &str = "mcpgw-listen-";

/// The per-process secret that tags listen session ids.
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            tracing::error!("no OS randomness for the listen id key; falling back to a weak generator");
            key[..16].copy_from_slice(&fastrand::u128(..).to_le_bytes());
            key[16..].copy_from_slice(&fastrand::u128(..).to_le_bytes());
        }
        key
    })
}

fn tag(random: &str, opened_by: &OpenedBy) -> String {
    let mut hasher = Sha256::new();
    hasher.update(key());
    hasher.update(random.as_bytes());
    // Length-prefixed, and an anonymous opener differs from every subject.
    match opened_by.subject() {
        Some(subject) => {
            hasher.update((subject.len() as u64).to_be_bytes());
            hasher.update(subject.as_bytes());
        }
        None => hasher.update(u64::MAX.to_be_bytes()),
    }
    // The endpoint the id was minted on: the plain `/mcp` differs from every endpoint.
    match opened_by.endpoint() {
        Some(endpoint) => {
            hasher.update((endpoint.len() as u64).to_be_bytes());
            hasher.update(endpoint.as_bytes());
        }
        None => hasher.update(u64::MAX.to_be_bytes()),
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A fresh stateless listen session id bound to `opened_by` (see the module doc).
pub fn mint_listen_id(opened_by: &OpenedBy) -> String {
    let minted = super::caller::mint_id("listen");
    let random = minted.trim_start_matches(LISTEN_ID_PREFIX).to_string();
    format!("{LISTEN_ID_PREFIX}{random}-{}", tag(&random, opened_by))
}

/// Whether `id` is a listen session id this process minted for `presenter`'s subject.
pub fn is_listen_id(id: &str, presenter: &OpenedBy) -> bool {
    let Some(rest) = id.strip_prefix(LISTEN_ID_PREFIX) else { return false };
    let Some((random, given)) = rest.split_once('-') else { return false };
    random.len() == 32 && random.bytes().all(|b| b.is_ascii_hexdigit()) && tag(random, presenter) == given
}

/// Why no stream was opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max_listen_streams` streams are open.
    Full { limit: usize },
    /// `inbound.max_listen_streams = 0`: list-change notifications are off.
    Off,
}

struct Open {
    /// The `Mcp-Session-Id` the stream was opened under (`None`: a modern listen).
    session: Option<Arc<str>>,
    close: oneshot::Sender<()>,
}

/// The open streams.
pub struct Listeners {
    open: Mutex<HashMap<u64, Open>>,
    next: AtomicU64,
    limit: usize,
    gauge: Option<prometheus::IntGauge>,
}

/// One open stream: ends (and frees its place) when dropped; [`Registration::closed`]
/// resolves when the gateway ends it (session ended, shutdown).
pub struct Registration {
    listeners: Arc<Listeners>,
    id: u64,
    closed: Option<oneshot::Receiver<()>>,
}

impl Registration {
    /// Resolves when the gateway ends the stream (not when the caller goes away: that drops
    /// the body, and this registration with it).
    pub async fn closed(&mut self) {
        match self.closed.as_mut() {
            Some(receiver) => {
                let _ = receiver.await;
                self.closed = None;
            }
            None => std::future::pending().await,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.listeners.remove(self.id);
    }
}

impl Listeners {
    pub fn new(limit: usize, gauge: Option<prometheus::IntGauge>) -> Self {
        Self { open: Mutex::default(), next: AtomicU64::new(1), limit, gauge }
    }

    /// Whether list-change streams are served at all (`inbound.max_listen_streams > 0`).
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Opens a stream under `session` (the caller's `Mcp-Session-Id`, when it has one).
    pub fn open(self: &Arc<Self>, session: Option<Arc<str>>) -> Result<Registration, Refused> {
        if self.limit == 0 {
            return Err(Refused::Off);
        }
        let (close, closed) = oneshot::channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let Ok(mut open) = self.open.lock() else { return Err(Refused::Full { limit: self.limit }) };
            if open.len() >= self.limit {
                return Err(Refused::Full { limit: self.limit });
            }
            open.insert(id, Open { session, close });
            self.counted(open.len());
        }
        Ok(Registration { listeners: self.clone(), id, closed: Some(closed) })
    }

    fn remove(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&id);
            self.counted(open.len());
        }
    }

    fn counted(&self, open: usize) {
        if let Some(gauge) = &self.gauge {
            gauge.set(open as i64);
        }
    }

    /// Ends every stream opened under `session` (its `DELETE /mcp`); how many there were.
    pub fn close_session(&self, session: &str) -> usize {
        self.close_where(|open| open.session.as_deref() == Some(session))
    }

    /// Ends every stream (shutdown).
    pub fn close_all(&self) -> usize {
        self.close_where(|_| true)
    }

    fn close_where(&self, matches: impl Fn(&Open) -> bool) -> usize {
        let ended: Vec<Open> = match self.open.lock() {
            Ok(mut open) => {
                let ids: Vec<u64> = open.iter().filter(|(_, o)| matches(o)).map(|(id, _)| *id).collect();
                let ended = ids.iter().filter_map(|id| open.remove(id)).collect();
                self.counted(open.len());
                ended
            }
            Err(_) => Vec::new(),
        };
        let count = ended.len();
        for open in ended {
            let _ = open.close.send(());
        }
        count
    }

    pub fn len(&self) -> usize {
        self.open.lock().map(|o| o.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_ids_verify_only_when_minted_here_for_the_same_subject() {
        let anonymous = OpenedBy::default();
        let alice = OpenedBy::of(&crate::identity::Caller {
            subject: Some("alice".into()),
            ..crate::identity::Caller::anonymous(None)
        });
        let bob = OpenedBy::of(&crate::identity::Caller {
            subject: Some("bob".into()),
            ..crate::identity::Caller::anonymous(None)
        });
        let id = mint_listen_id(&anonymous);
        assert!(id.starts_with(LISTEN_ID_PREFIX), "{id}");
        assert!(is_listen_id(&id, &anonymous));
        assert!(!is_listen_id(&id, &alice), "an anonymous id presented by a subject");
        assert_ne!(id, mint_listen_id(&anonymous));
        let alices = mint_listen_id(&alice);
        assert!(is_listen_id(&alices, &alice));
        assert!(!is_listen_id(&alices, &bob) && !is_listen_id(&alices, &anonymous), "bound to alice");
        // ... and to the endpoint it was minted on.
        let on_cart =
            OpenedBy::of(&crate::identity::Caller::anonymous(None).at_endpoint(Some("cart".into())));
        let carts = mint_listen_id(&on_cart);
        assert!(is_listen_id(&carts, &on_cart));
        assert!(!is_listen_id(&carts, &anonymous) && !is_listen_id(&id, &on_cart), "bound to the endpoint");
        // Any change to the random part or the tag fails.
        let mut forged = id.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == '0' { '1' } else { '0' });
        assert!(!is_listen_id(&forged, &anonymous));
        assert!(!is_listen_id("mcpgw-listen-00000000000000000000000000000000-0000000000000000", &anonymous));
        assert!(!is_listen_id("mcpgw-session-abc", &anonymous));
    }

    #[tokio::test]
    async fn the_table_is_bounded_and_ends_streams_by_session_or_all() {
        let listeners = Arc::new(Listeners::new(2, None));
        let mut a = listeners.open(Some("s1".into())).unwrap();
        let b = listeners.open(None).unwrap();
        assert_eq!(listeners.open(None).err(), Some(Refused::Full { limit: 2 }));
        drop(b);
        let mut c = listeners.open(Some("s2".into())).expect("a dropped stream frees its place");
        assert_eq!(listeners.close_session("s1"), 1);
        a.closed().await;
        assert_eq!(listeners.len(), 1);
        assert_eq!(listeners.close_all(), 1);
        c.closed().await;
        assert!(listeners.is_empty());
        let off = Arc::new(Listeners::new(0, None));
        assert_eq!(off.open(None).err(), Some(Refused::Off));
    }
}
