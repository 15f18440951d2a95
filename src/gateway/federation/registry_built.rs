//! The surfaces of registry-built servers: servers that exist only because registry entries
//! name them. Their tools come from the registry, but their resources, templates and prompts
//! can only come from themselves, so at every registry scan the gateway reads their lists as
//! it reads a configured server's: within the same bounds (the default per-server list
//! bounds), routed by the same index, refreshed at the next scan.
//!
//! - **Which servers**: the origins of the catalogue's registry tools and of the registry
//!   entries looked up since the last scan, at most [`MAX_REGISTRY_SURFACES`] of them (in name
//!   order; the rest are logged and not federated). An entry naming a configured server is
//!   that server: it is federated by its own configuration (`discover`), never twice.
//! - **Once a call has built it**: the stack read is the one the server's first call built
//!   (through `registry.upstream_urls` and `stdio_commands`); the federation never connects
//!   to, starts or trips the breaker of a server no caller has used (a registry may name
//!   hundreds), so a registry-built server's resources and prompts appear from the scan after
//!   its first call.
//! - **What it offers** is learned as for any server of its transport: a streamable-HTTP
//!   server's handshake (a server never asked yet is asked one `tools/list` page first, which
//!   carries it), a Lambda function's `initialize`. A persistent connection (stdio,
//!   WebSocket, HTTP+SSE) is read once its handshake is done: a connection not ready yet is
//!   read at the next scan.
//! - **Gone**: a server no live entry names any more leaves the index with its stack.

use std::{collections::BTreeMap, sync::Arc};

use futures_util::StreamExt;
use tower::ServiceExt;

use crate::{
    gateway::{Gateway, Upstream},
    registry::entry::ServerRef,
    upstream::{UpstreamRequest, connection::ConnectionState},
};

/// Most registry-built servers whose lists are read at one scan.
pub const MAX_REGISTRY_SURFACES: usize = 256;
/// Registry-built servers read at once.
const CONCURRENT_READS: usize = 8;

impl Gateway {
    /// Reads the lists of the registry-built servers `origins` name (and forgets those of
    /// servers no origin names any more).
    pub(in crate::gateway) async fn federate_registry_servers(&self, origins: Vec<Arc<ServerRef>>) {
        let settings = self.settings();
        let mut by_name: BTreeMap<String, Arc<ServerRef>> = BTreeMap::new();
        for origin in origins {
            if !settings.upstreams.contains_key(&origin.name) {
                by_name.entry(origin.name.clone()).or_insert(origin);
            }
        }
        let gone = |server: &str| !settings.upstreams.contains_key(server) && !by_name.contains_key(server);
        if self.federation.forget(gone) {
            self.list_changes().bump();
        }
        if by_name.len() > MAX_REGISTRY_SURFACES {
            tracing::warn!(
                servers = by_name.len(),
                limit = MAX_REGISTRY_SURFACES,
                "more registry-built servers than the federation reads; those after the first {MAX_REGISTRY_SURFACES} by name offer no resources or prompts"
            );
        }
        let reads = by_name.into_values().take(MAX_REGISTRY_SURFACES).map(|origin| async move {
            let Some(upstream) = self.registry_upstream(&origin) else {
                tracing::debug!(server = %origin.name, "registry-built server not federated until a call has built it");
                return;
            };
            if !ready(&upstream).await {
                return;
            }
            let bounds = upstream.config.tool_list_bounds(&self.settings().config.defaults);
            // Subscriptions are kept on configured servers' connections only (docs/protocol.md).
            let read = super::list_surface(&upstream, bounds).await.map(|mut surface| {
                surface.subscribe = false;
                surface
            });
            self.learn_surface(&upstream, read);
        });
        futures_util::stream::iter(reads).buffer_unordered(CONCURRENT_READS).collect::<Vec<()>>().await;
    }

    /// The stack a call built for a registry origin (through the same checks as for a call), if
    /// one has.
    fn registry_upstream(&self, origin: &Arc<ServerRef>) -> Option<Arc<Upstream>> {
        let cached = self.dynamic_upstreams.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((built_from, upstream)) = cached
            && built_from == *origin
        {
            return Some(upstream);
        }
        // Not built yet: no call has needed this server, and the federation does not connect
        // to it (or start it) on its own.
        None
    }

    /// The stack of a federated server: configured, or registry-built.
    pub(super) fn surface_upstream(&self, server: &str) -> Option<Arc<Upstream>> {
        if let Some(upstream) = self.configured_upstream(server) {
            return Some(upstream);
        }
        let dynamic = self.dynamic_upstreams.read().ok()?;
        dynamic.get(server).map(|(_, upstream)| upstream.clone())
    }
}

/// Whether `upstream` has declared what it offers: a streamable-HTTP server never asked is
/// asked one `tools/list` page (its first request carries the handshake); a persistent
/// connection must be ready.
async fn ready(upstream: &Upstream) -> bool {
    if let Some(connection) = &upstream.connection {
        return connection.state() == ConnectionState::Ready;
    }
    if let Some(http) = &upstream.http
        && http.era().is_none()
    {
        let first = UpstreamRequest::new("tools/list", serde_json::Map::new());
        if let Err(error) = upstream.service.clone().oneshot(first).await {
            tracing::debug!(server = %upstream.name, error = %crate::redact::shown(&error), "registry-built server did not answer; its lists are read at the next scan");
            return false;
        }
    }
    true
}
