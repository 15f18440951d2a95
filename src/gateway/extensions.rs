//! The extensions the gateway declares to a caller, and what MCP Apps changes in a caller's
//! `tools/list`. The rule (one, for every extension the gateway carries) is
//! [`crate::protocol::extensions`]'s: declared when the gateway carries it and a server behind
//! the caller's endpoint offers it.
//!
//! "Offers" is the server's handshake (`capabilities.extensions`), and two readings of the
//! catalogue for the extensions whose servers show them there: tasks, when some tool the caller
//! can reach declares `execution.taskSupport` (a session-era server declares tasks as a
//! capability, which the gateway relays in the extension's form); MCP Apps, when some tool
//! links a UI resource (`_meta.ui.resourceUri`: the ext-apps 2.0 example servers link their
//! apps without declaring the extension).

use serde_json::{Map, Value, json};

use super::Gateway;
use crate::{
    policy::ToolView,
    protocol::{extensions, tasks},
    registry::catalog::ToolList,
};

impl Gateway {
    /// `capabilities.extensions` of the gateway's `initialize` (`modern`: `server/discover`)
    /// for a caller of `endpoint` (`None`: the whole catalogue); empty when nothing is offered.
    /// The tasks extension is the 2026-07-28 form of tasks: a session-era caller is declared
    /// `capabilities.tasks` instead.
    pub fn declared_extensions(&self, endpoint: Option<&str>, modern: bool) -> Map<String, Value> {
        let settings = self.settings();
        let behind = |server: &str| endpoint.is_none_or(|e| settings.endpoints.selects_server(e, server));
        let mut handshakes = extensions::Carried::default();
        for upstream in self.all_upstreams() {
            if !behind(&upstream.name) {
                continue;
            }
            let offers = match (&upstream.http, &upstream.connection) {
                (Some(http), _) => http.offers(),
                (None, Some(connection)) => connection.offers(),
                (None, None) => continue,
            };
            handshakes = handshakes.union(offers.extensions);
        }
        let tools = self.catalog().snapshot().tools();
        let reachable = || {
            tools.iter().filter(|t| match endpoint {
                Some(e) => settings.endpoints.selects(e, t),
                None => true,
            })
        };
        let mut declared = Map::new();
        for id in extensions::CARRIED {
            let offered = match id {
                tasks::EXTENSION => {
                    modern
                        && reachable().any(|t| {
                            tasks::task_support(t.definition.head()) != tasks::TaskSupport::Forbidden
                        })
                }
                extensions::APPS => {
                    handshakes.has(id)
                        || reachable().any(|t| {
                            t.definition.head().pointer("/_meta/ui/resourceUri").is_some_and(Value::is_string)
                        })
                }
                // Read from the federation's index, which knows every server's skills list
                // (registry-built servers' too).
                extensions::SKILLS => self.federation().index().skill_servers.iter().any(|s| behind(s)),
                _ => handshakes.has(id),
            };
            if offered {
                declared.insert(id.to_string(), json!({}));
            }
        }
        declared
    }

    /// The `tools/list` of a caller that negotiated MCP Apps, who sees `view` (`None`: the whole
    /// catalogue): the tools for an app only besides the rest, each as the view shows it,
    /// ordered by the name the caller sees. The whole catalogue's is built once per snapshot;
    /// a view's (a policy, an endpoint) is built per request, and only when it shows a tool for
    /// an app only (else it is the view's own list).
    pub fn apps_tool_list(&self, view: Option<&ToolView>) -> ToolList {
        let snapshot = self.catalog().snapshot();
        let Some(view) = view else { return snapshot.apps_tool_list() };
        let tools = snapshot.tools();
        if !tools.iter().any(|t| view.shows(&t.name) && extensions::app_only(t.definition.head())) {
            return view.list.clone();
        }
        let listing = snapshot.listing();
        let mut listed: Vec<_> = tools
            .iter()
            .filter(|t| view.shows(&t.name) && listing.lists_for_apps(t))
            .map(|t| view.listed(t))
            .collect();
        listed.sort_by_cached_key(|l| l.name().to_owned());
        ToolList::build(listing.meta(), listed.into_iter())
    }
}
