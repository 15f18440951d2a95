//! An upstream's `notifications/resources/updated`, from the transport that read it to the
//! gateway's subscription table (`gateway/subscriptions`), which relays it to the callers
//! subscribed to that URI.
//!
//! Why a module of its own: a transport (the multiplexer of a persistent connection, the
//! change stream of a streamable-HTTP server) only *offers* what it read here; it does not know
//! who subscribed. What it offers is rebuilt from validated fields ([`ResourceUpdated`]: the
//! `uri`, a string of at most [`MAX_URI_BYTES`], and an optional `title` string of at most
//! [`MAX_TITLE_CHARS`]), never the upstream's JSON — as for everything else that reaches a
//! caller ([`super::to_caller`]). The feed is a bounded broadcast channel
//! ([`FEED_BUFFER`] updates): a server that floods updates faster than the gateway relays them
//! loses the oldest (the reader counts them as dropped, `lagged`), it never grows memory.

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

/// Longest URI an update may name (as the federation's routing bound).
pub const MAX_URI_BYTES: usize = 4096;
/// Longest title kept from an update; a longer one is left out.
pub const MAX_TITLE_CHARS: usize = 256;
/// Updates read from one server and not yet relayed, before the oldest are dropped.
pub const FEED_BUFFER: usize = 256;

/// The validated fields of one `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUpdated {
    uri: String,
    title: Option<String>,
}

impl ResourceUpdated {
    /// The update in a notification's `params`; `None` when `uri` is missing, not a string,
    /// empty or longer than [`MAX_URI_BYTES`]. A `title` that is not a short string is left
    /// out; every other key is dropped.
    pub fn from_params(params: &Map<String, Value>) -> Option<Self> {
        let uri = params.get("uri")?.as_str()?;
        if uri.is_empty() || uri.len() > MAX_URI_BYTES {
            return None;
        }
        let title = params
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| t.chars().count() <= MAX_TITLE_CHARS)
            .map(str::to_string);
        Some(Self { uri: uri.to_string(), title })
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The same update naming `uri` (the form the gateway's callers subscribed to).
    pub fn with_uri(&self, uri: &str) -> Self {
        if self.uri == uri {
            return self.clone();
        }
        Self { uri: uri.to_string(), ..self.clone() }
    }

    /// The whole notification for a caller, with `_meta` (a modern stream's subscription id)
    /// when given.
    pub fn to_notification(&self, meta: Option<&Value>) -> Value {
        let mut params = Map::new();
        params.insert("uri".into(), json!(self.uri));
        if let Some(title) = &self.title {
            params.insert("title".into(), json!(title));
        }
        if let Some(meta) = meta {
            params.insert("_meta".into(), meta.clone());
        }
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params})
    }
}

/// Where one server's transport offers the updates it read (cheap to clone).
#[derive(Debug, Clone)]
pub struct UpdateFeed(broadcast::Sender<ResourceUpdated>);

impl Default for UpdateFeed {
    fn default() -> Self {
        Self(broadcast::channel(FEED_BUFFER).0)
    }
}

impl UpdateFeed {
    /// Offers the `params` of a `notifications/resources/updated`; invalid ones are ignored
    /// (`false`). Never waits: nobody listening, or a full buffer, costs nothing here.
    pub fn offer(&self, params: Option<&Map<String, Value>>) -> bool {
        let Some(update) = params.and_then(ResourceUpdated::from_params) else { return false };
        let _ = self.0.send(update);
        true
    }

    /// A receiver of the updates offered from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ResourceUpdated> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn only_the_validated_fields_are_kept() {
        let update = ResourceUpdated::from_params(&params(
            json!({"uri": "file:///a", "title": "A", "extra": {"id": 1}, "_meta": {"x": 1}}),
        ))
        .expect("valid");
        assert_eq!(
            update.to_notification(None),
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": "file:///a", "title": "A"}})
        );
        let meta = json!({"io.modelcontextprotocol/subscriptionId": 7});
        assert_eq!(update.to_notification(Some(&meta))["params"]["_meta"], meta);
        let long_title = "t".repeat(MAX_TITLE_CHARS + 1);
        let update = ResourceUpdated::from_params(&params(json!({"uri": "u", "title": long_title})));
        assert_eq!(update.map(|u| u.title), Some(None), "a long title is left out");
        for bad in
            [json!({}), json!({"uri": 1}), json!({"uri": ""}), json!({"uri": "x".repeat(MAX_URI_BYTES + 1)})]
        {
            assert!(ResourceUpdated::from_params(&params(bad.clone())).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_feed_is_bounded_and_a_slow_reader_lags() {
        let feed = UpdateFeed::default();
        assert!(feed.offer(Some(&params(json!({"uri": "u"})))), "nobody listening costs nothing");
        let mut rx = feed.subscribe();
        for _ in 0..FEED_BUFFER + 3 {
            feed.offer(Some(&params(json!({"uri": "u"}))));
        }
        assert!(!feed.offer(None));
        assert!(matches!(rx.try_recv(), Err(broadcast::error::TryRecvError::Lagged(3))));
        assert!(rx.try_recv().is_ok());
    }
}
