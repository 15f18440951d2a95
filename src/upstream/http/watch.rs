//! A streamable-HTTP server's change stream: how the gateway hears that a server's tools
//! changed, in the era it speaks, when the server declared `tools.listChanged`:
//! - **session era**: the standalone `GET` stream of its session ("Listening for Messages
//!   from the Server", 2025-11-25);
//! - **2026-07-28**: a `subscriptions/listen` request with `toolsListChanged`, whose answer
//!   stream stays open.
//!
//! Each `notifications/tools/list_changed` read there increments a counter the gateway
//! watches (`gateway/list_changes.rs` turns it into a rate-limited refresh of this server);
//! nothing of the message goes anywhere else. `notifications/resources/updated` read there is
//! offered to the server's update feed, rebuilt from its validated fields
//! (`backchannel/resource_updates.rs`; the gateway's subscription table relays it). A
//! session-era server that declared `resources.subscribe` gets its GET stream too (its updates
//! arrive there); a 2026-07-28 one gets a `subscriptions/listen` once the gateway is subscribed
//! to some URI on it, carrying those URIs (`resourceSubscriptions`): when they change, the
//! stream is opened again at once with the new list (the spec's way to change a subscription). Reads are bounded like answers: an event over
//! `max_response_bytes` ends the stream. A stream that ends, breaks or stays silent for
//! [`IDLE`] is opened again after a backoff (1 s doubling to 30 s, ±20%, back to 1 s after a
//! stream that lasted a minute). A server that refuses it (`405`, another 4xx, a JSON-RPC
//! error to `subscriptions/listen`) is not asked again until its era is learned anew. A server
//! whose era is not known yet, or that declared no `listChanged`, gets no stream: the watch
//! looks again every [`LEARN_POLL`]. `mcp_gateway_upstream_change_streams{server}` is 1
//! while a stream is open.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use http::{Method, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{
    CALL_CREDENTIALS, Headers, HttpTransport, Inner, Spoken,
    body::is_event_stream,
    client::Response,
    errors::{request_error, status_error},
};
use crate::{
    protocol::{
        mcp::{self, Era},
        sse,
    },
    upstream::UpstreamError,
};

/// How often a server that cannot be watched yet (era unknown, no `listChanged`, refused) is
/// looked at again.
const LEARN_POLL: Duration = Duration::from_secs(2);
/// A stream silent for this long (no event, no keep-alive comment) is opened again.
const IDLE: Duration = Duration::from_secs(600);
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A stream that lasted this long resets the backoff.
const HEALTHY: Duration = Duration::from_secs(60);
/// The method of the modern change stream.
const LISTEN: &str = "subscriptions/listen";

/// How one stream ended.
enum Ended {
    /// The server will not serve one (for this era and session).
    Refused(String),
    /// Closed, broken or failed: open it again after the backoff.
    Again(String),
    /// The resource URIs to subscribe to changed: open it again at once.
    Resubscribe,
}

impl HttpTransport {
    /// Starts watching the server's change stream (see the module doc); the receiver counts
    /// its `notifications/tools/list_changed`. The watch ends when the transport is dropped or
    /// the receiver is.
    /// `open` is set to 1 while a stream is open (from its first bytes on).
    pub fn watch_list_changes(&self, open: prometheus::IntGauge) -> watch::Receiver<u64> {
        let (changes, receiver) = watch::channel(0);
        let (inner, changes) = (Arc::downgrade(&self.inner), Arc::new(changes));
        // Supervised: a restarted watch opens the stream again.
        crate::supervise::spawn(crate::supervise::Loop::ChangeStream, move || {
            run(inner.clone(), changes.clone(), open.clone())
        });
        receiver
    }
}

async fn run(inner: Weak<Inner>, changes: Arc<watch::Sender<u64>>, open: prometheus::IntGauge) {
    let mut backoff = MIN_BACKOFF;
    let mut refused_generation: Option<u64> = None;
    let Some(mut wanted) = inner.upgrade().map(|strong| strong.wanted.subscribe()) else { return };
    loop {
        if changes.is_closed() {
            return;
        }
        let Some(strong) = inner.upgrade() else { return };
        let learned = strong.learned();
        // Resource updates need the stream too: a session-era server sends them on its GET
        // stream (kept open, as subscriptions are made on the session), a modern one only on a
        // listen stream naming them (opened once some URI is wanted).
        let subscribed = match learned.spoken {
            Some(Spoken::Modern) => !wanted.borrow_and_update().is_empty(),
            _ => true,
        };
        let watched = learned.list_changed || (learned.offers.subscribe && subscribed);
        let Some(spoken) = learned.spoken.clone().filter(|_| watched) else {
            drop(strong);
            tokio::select! {
                () = tokio::time::sleep(LEARN_POLL) => {}
                _ = wanted.changed() => {}
            }
            continue;
        };
        if refused_generation == Some(learned.generation) {
            drop(strong);
            tokio::time::sleep(LEARN_POLL).await;
            continue;
        }
        let opened = Instant::now();
        let ended = with_credentials(&strong, strong.listen(&spoken, &changes, &open)).await;
        open.set(0);
        match ended {
            Ended::Refused(why) => {
                tracing::info!(url = %strong.log_url, reason = %crate::redact::shown(&why), "upstream serves no change stream; its tools are refreshed on the interval");
                refused_generation = Some(learned.generation);
                continue;
            }
            Ended::Again(why) => {
                tracing::debug!(url = %strong.log_url, reason = %crate::redact::shown(&why), "upstream change stream ended; opening it again");
            }
            Ended::Resubscribe => continue,
        }
        drop(strong);
        if opened.elapsed() >= HEALTHY {
            backoff = MIN_BACKOFF;
        }
        tokio::time::sleep(backoff.mul_f64(0.8 + 0.4 * fastrand::f64())).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Runs `stream` with the server's credentials in scope, as a call would.
async fn with_credentials(inner: &Inner, stream: impl std::future::Future<Output = Ended>) -> Ended {
    let Some(credentials) = &inner.credentials else { return stream.await };
    match credentials.for_call(None).await {
        Ok(applied) => CALL_CREDENTIALS.scope(applied, stream).await,
        Err(e) => Ended::Again(format!("no credentials: {e}")),
    }
}

impl Inner {
    /// Opens the change stream of the era spoken and reads it until it ends.
    async fn listen(
        &self,
        spoken: &Spoken,
        changes: &watch::Sender<u64>,
        open: &prometheus::IntGauge,
    ) -> Ended {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = match spoken {
            Spoken::Legacy(session) => self.build(Method::GET, Headers::Legacy(session)),
            Spoken::Modern => {
                let mut params = Map::new();
                let mut notifications = json!({"toolsListChanged": true, "resourcesListChanged": true, "promptsListChanged": true});
                let wanted = self.wanted.borrow().clone();
                if !wanted.is_empty() {
                    notifications["resourceSubscriptions"] = json!(wanted);
                }
                params.insert("notifications".into(), notifications);
                self.build(Method::POST, Headers::Modern { method: LISTEN, tool: None, params: &[] })
                    .body(mcp::encode_request(id, LISTEN, &params, Era::Modern))
            }
        };
        let response = match request.timeout(IDLE).send().await {
            Ok(response) => response,
            Err(e) => return Ended::Again(request_error(e).to_string()),
        };
        let status = response.status();
        if !status.is_success() {
            let error = status_error(status, response.headers());
            // A server error or a rate limit may pass; anything else is the server's answer.
            return if status.is_server_error()
                || status == StatusCode::TOO_MANY_REQUESTS
                || matches!(error, UpstreamError::Unauthorized { .. })
            {
                Ended::Again(error.to_string())
            } else {
                Ended::Refused(format!("HTTP {status}"))
            };
        }
        if !is_event_stream(&response) {
            return Ended::Refused("the answer is not an event stream".into());
        }
        self.read_changes(response, id, matches!(spoken, Spoken::Modern), changes, open).await
    }

    /// Reads a change stream: counts its `notifications/tools/list_changed`, ends at the
    /// answer to `subscriptions/listen` (modern: a graceful close, or an error).
    async fn read_changes(
        &self,
        mut response: Response,
        id: u64,
        modern: bool,
        changes: &watch::Sender<u64>,
        open: &prometheus::IntGauge,
    ) -> Ended {
        let mut decoder = sse::Decoder::with_limit(self.max_response_bytes);
        let mut wanted = self.wanted.subscribe();
        wanted.borrow_and_update();
        loop {
            let read = tokio::select! {
                read = tokio::time::timeout(IDLE, response.chunk()) => read,
                // A modern server's subscriptions are the stream's request: a new list, a new
                // stream. A session-era server's live on its session (`resources/subscribe`).
                Ok(()) = wanted.changed(), if modern => return Ended::Resubscribe,
            };
            let chunk = match read {
                Err(_) => return Ended::Again(format!("silent for {} s", IDLE.as_secs())),
                Ok(Err(e)) => return Ended::Again(request_error(e).to_string()),
                Ok(Ok(None)) => return Ended::Again("closed by the server".into()),
                Ok(Ok(Some(chunk))) => chunk,
            };
            // The first bytes (a modern server's acknowledgment, a GET stream's first event or
            // comment): the server is now sending on this stream.
            open.set(1);
            let events = match decoder.feed(&chunk) {
                Ok(events) => events,
                Err(e) => return Ended::Again(format!("an event exceeded {} bytes", e.limit)),
            };
            for event in events {
                if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                    continue;
                }
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else { continue };
                match message.get("method").and_then(Value::as_str) {
                    Some(
                        "notifications/tools/list_changed"
                        | "notifications/resources/list_changed"
                        | "notifications/prompts/list_changed",
                    ) => {
                        changes.send_modify(|n| *n = n.wrapping_add(1));
                    }
                    Some("notifications/resources/updated") => {
                        self.updates.offer(message.get("params").and_then(Value::as_object));
                    }
                    Some(_) => {}
                    None if modern && message.get("id").and_then(Value::as_u64) == Some(id) => {
                        return match message.get("error") {
                            Some(error) => Ended::Refused(format!(
                                "subscriptions/listen refused: {}",
                                error.get("message").and_then(Value::as_str).unwrap_or("no message")
                            )),
                            None => Ended::Again("the server ended the subscription".into()),
                        };
                    }
                    None => {}
                }
            }
        }
    }
}
