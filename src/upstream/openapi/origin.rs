//! The origin an OpenAPI target's calls go to when the document names it (no `base_url`):
//! pinned at the first mapping (or read from the pin store), followed along a path change at
//! that origin, and a different origin held pending until an operator approves it, so a
//! changed document cannot move the configured credentials elsewhere.

use std::time::SystemTime;

use crate::registry::pins::PinStore;

/// The target of a document without `base_url`: the origin approved (pinned at the first
/// mapping) with the latest `servers` URL at that origin, and another one the document now
/// names, waiting for approval.
#[derive(Debug, Default)]
pub struct OriginPin {
    pub(super) approved: Option<Target>,
    pub(super) pending: Option<(Target, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// `scheme://host:port`.
    pub(super) origin: String,
    /// The full `servers` URL calls are made under.
    pub(super) url: String,
}

impl Target {
    fn of(url: &str) -> Option<Self> {
        Some(Self { origin: origin_of(url)?, url: url.to_string() })
    }
}

/// `scheme://host[:port]` of `url` (the port always written), lower-cased.
pub fn origin_of(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    Some(format!("{}://{}:{}", parsed.scheme(), host, parsed.port_or_known_default()?).to_ascii_lowercase())
}

impl OriginPin {
    /// What the document now names: followed at the approved origin, pending at another. The
    /// first origin is the pin file's when `pins` holds one for `server`, else the offered one
    /// (then written to `pins`).
    pub(super) fn offer(&mut self, server: &str, url: &str, pins: Option<&PinStore>) {
        let Some(offered) = Target::of(url) else { return };
        if self.approved.is_none() {
            match pins.and_then(|p| p.origin(server)) {
                Some(pinned) => self.approved = Some(Target { url: at_origin(&pinned, url), origin: pinned }),
                None => {
                    tracing::info!(server, origin = %offered.origin, "OpenAPI target origin pinned at first mapping");
                    if let Some(pins) = pins {
                        pins.pin_origin(server, &offered.origin);
                    }
                    self.approved = Some(offered);
                    self.pending = None;
                    return;
                }
            }
        }
        let Some(approved) = &self.approved else { return };
        if approved.origin == offered.origin {
            self.approved = Some(offered);
            self.pending = None;
            return;
        }
        if self.pending.as_ref().is_none_or(|(p, _)| p.origin != offered.origin) {
            tracing::warn!(
                server,
                approved = %approved.origin,
                offered = %offered.origin,
                "OpenAPI document names another target origin; calls stay on the approved one until approved (POST /admin/registry/approve {{\"origin\": SERVER}})"
            );
        }
        let since = SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let since =
            self.pending.as_ref().filter(|(p, _)| p.origin == offered.origin).map_or(since, |(_, s)| *s);
        self.pending = Some((offered, since));
    }

    /// The pin file's origin for a document mapped before the pins were known: it is the
    /// approved one, and the document's (when another) waits for approval.
    pub(super) fn reconcile(&mut self, server: &str, pins: &PinStore) {
        match (pins.origin(server), self.approved.take()) {
            (_, None) => {}
            (None, Some(approved)) => {
                pins.pin_origin(server, &approved.origin);
                self.approved = Some(approved);
            }
            (Some(_), Some(mapped)) => self.offer(server, &mapped.url, Some(pins)),
        }
    }
}

/// `url` with its scheme, host and port replaced by `origin`'s (its path and query kept).
fn at_origin(origin: &str, url: &str) -> String {
    let (Ok(mut at), Ok(url)) = (reqwest::Url::parse(origin), reqwest::Url::parse(url)) else {
        return origin.to_string();
    };
    at.set_path(url.path());
    at.set_query(url.query());
    at.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_origin_is_pinned_and_another_waits_while_a_path_change_is_followed() {
        assert_eq!(
            origin_of("HTTPS://API.Example.com/v1?x=1").as_deref(),
            Some("https://api.example.com:443")
        );
        assert_eq!(origin_of("http://h:8080/").as_deref(), Some("http://h:8080"));
        assert_eq!(origin_of("/relative"), None);
        let mut pin = OriginPin::default();
        pin.offer("s", "https://api.example.com/v1", None);
        pin.offer("s", "https://api.example.com:443/v2", None);
        assert_eq!(pin.approved.as_ref().map(|a| a.url.as_str()), Some("https://api.example.com:443/v2"));
        assert!(pin.pending.is_none(), "the same origin is followed");
        pin.offer("s", "https://evil.example.net/v2", None);
        assert_eq!(pin.approved.as_ref().map(|a| a.origin.as_str()), Some("https://api.example.com:443"));
        assert_eq!(
            pin.pending.as_ref().map(|(p, _)| p.origin.as_str()),
            Some("https://evil.example.net:443")
        );
        pin.offer("s", "https://api.example.com/v3", None);
        assert!(pin.pending.is_none(), "back at the approved origin: nothing pending");

        // A pin store's origin wins over a document first seen after a restart.
        let pins = PinStore::load(None).unwrap();
        pins.pin_origin("s", "https://api.example.com:443");
        let mut restarted = OriginPin::default();
        restarted.offer("s", "https://evil.example.net/v2?k=1", Some(&pins));
        let approved = restarted.approved.clone().unwrap();
        assert_eq!(
            approved.url, "https://api.example.com/v2?k=1",
            "the approved origin, the document's path"
        );
        assert!(restarted.pending.is_some());
        // A file document mapped before the store was attached is reconciled with it.
        let mut loaded = OriginPin::default();
        loaded.offer("s", "https://evil.example.net/", None);
        loaded.reconcile("s", &pins);
        assert_eq!(loaded.approved.as_ref().map(|a| a.origin.as_str()), Some("https://api.example.com:443"));
        assert!(loaded.pending.is_some());
        let mut fresh = OriginPin::default();
        fresh.offer("t", "https://first.example/", None);
        fresh.reconcile("t", &pins);
        assert_eq!(pins.origin("t").as_deref(), Some("https://first.example:443"), "written to the store");
    }
}
