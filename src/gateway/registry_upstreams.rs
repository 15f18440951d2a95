//! Servers known only from registry entries: their stacks built on first use (one per
//! origin, rebuilt when the origin moves, dropped when no live entry names it), and the
//! checks before a registry entry's calls are sent anywhere: `registry.upstream_urls` and
//! borrowing a configured server ([`crate::registry::borrow`]), refusals remembered per origin.

use std::sync::Arc;

use serde_json::json;

use super::{Gateway, Upstream, settings, upstreams};
use crate::{
    config::{LambdaEvent, ServerConfig, TransportKind},
    error::{Category, GatewayError},
    registry::{ToolRecord, borrow, entry::ServerRef, url_policy},
};

impl Gateway {
    /// The server stack a tool's calls go through: a configured server, or one built from the
    /// tool's registry entry on first use (with the default per-server settings). A registry
    /// server whose origin (transport, URL, function, qualifier) changed is rebuilt, so an
    /// entry that moves to another endpoint is followed without a restart.
    pub async fn upstream_for(&self, tool: &ToolRecord) -> Result<Arc<Upstream>, GatewayError> {
        self.upstream_in(&self.settings(), tool).await
    }

    /// [`Self::upstream_for`] under the settings a call took at its start.
    pub(in crate::gateway) async fn upstream_in(
        &self,
        settings: &settings::Settings,
        tool: &ToolRecord,
    ) -> Result<Arc<Upstream>, GatewayError> {
        if let Some(upstream) = settings.upstreams.get(tool.server.as_ref()) {
            if let Some(origin) = &tool.origin {
                self.check_borrow(origin, upstream, &tool.name, settings).await?;
            }
            return Ok(upstream.clone());
        }
        // A configured server's tool whose server a reload removed (the call resolved it from
        // the catalogue just before the rebuild): unknown now, as it is to the next caller.
        let origin = tool.origin.as_ref().ok_or_else(|| {
            GatewayError::new(
                Category::UnknownTool,
                format!("no server offers a tool named {:?}", tool.name.as_ref()),
            )
        })?;
        let cached = self.dynamic_upstreams.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((built_from, upstream)) = &cached
            && built_from == origin
        {
            return Ok(upstream.clone());
        }
        let refused = self.refused_origins.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((refused_from, refusal)) = refused
            && refused_from == *origin
        {
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal_reason(&refusal)]).inc();
            return Err(refusal.with_tool(tool.name.clone()));
        }
        // Boxed: building may load the AWS SDK's configuration, whose future is kilobytes;
        // inline it would size every call's future.
        Box::pin(self.build_registry_upstream(origin, &tool.name, settings)).await
    }

    /// A registry entry naming a configured server: served through that server's stack only
    /// as [`crate::registry::borrow`] allows, and its own URL (if any) only if
    /// `registry.upstream_urls` allows it. A refusal is counted, logged and remembered like a
    /// refused URL; an accepted origin is remembered so that calls check it once.
    async fn check_borrow(
        &self,
        origin: &Arc<ServerRef>,
        configured: &Upstream,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<(), GatewayError> {
        let accepted = self.accepted_borrows.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if accepted.is_some_and(|accepted| accepted == *origin) {
            return Ok(());
        }
        let refused = self.refused_origins.read().ok().and_then(|m| m.get(&origin.name).cloned());
        if let Some((refused_from, refusal)) = refused
            && refused_from == *origin
        {
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal_reason(&refusal)]).inc();
            return Err(refusal.with_tool(tool));
        }
        if let Err(refusal) = borrow::check(&origin.name, origin, &configured.config) {
            let shown = origin.url.as_deref().map(crate::redact::url);
            tracing::warn!(
                tool,
                server = %origin.name,
                transport = %origin.transport,
                url = ?shown,
                reason = refusal.reason,
                "registry entry names a configured server at another address; refused, nothing sent (servers.NAME.registry_may_use)"
            );
            self.metrics.registry_upstreams_refused.with_label_values(&[refusal.reason]).inc();
            let error = GatewayError::new(Category::UpstreamNotAllowed, refusal.detail)
                .with_server(origin.name.as_str())
                .with_extra("reason", json!(refusal.reason));
            if let Ok(mut refused) = self.refused_origins.write() {
                refused.insert(origin.name.clone(), (origin.clone(), error.clone()));
            }
            return Err(error.with_tool(tool));
        }
        self.check_registry_url(origin, tool, settings).await?;
        if let Ok(mut accepted) = self.accepted_borrows.write() {
            accepted.insert(origin.name.clone(), origin.clone());
        }
        Ok(())
    }

    /// The registry origins refused so far (`GET /admin/registry`): server, transport,
    /// redacted URL, reason and detail.
    pub fn refused_registry_origins(&self) -> Vec<serde_json::Value> {
        let Ok(refused) = self.refused_origins.read() else { return Vec::new() };
        refused
            .iter()
            .map(|(name, (origin, error))| {
                json!({
                    "server": name,
                    "transport": origin.transport,
                    "url": origin.url.as_deref().map(crate::redact::url),
                    "function": origin.function,
                    "reason": refusal_reason(error),
                    "detail": error.detail,
                })
            })
            .collect()
    }

    /// `registry.upstream_urls`: a registry URL must be allowed before anything is sent to it.
    /// A refusal is counted, logged (tool, server, redacted URL) and remembered for its origin.
    async fn check_registry_url(
        &self,
        origin: &Arc<ServerRef>,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<(), GatewayError> {
        let Some(url) = origin.url.as_deref() else { return Ok(()) };
        let Err(refusal) = url_policy::check(url, &settings.config.registry.upstream_urls).await else {
            return Ok(());
        };
        let shown = crate::redact::url(url);
        tracing::warn!(
            tool,
            server = %origin.name,
            url = %shown,
            reason = refusal.reason,
            detail = %refusal.detail,
            "registry entry's upstream URL refused; nothing sent"
        );
        self.metrics.registry_upstreams_refused.with_label_values(&[refusal.reason]).inc();
        let error = GatewayError::new(
            Category::UpstreamNotAllowed,
            format!("server {} at {shown}: {}", origin.name, refusal.detail),
        )
        .with_server(origin.name.as_str())
        .with_extra("reason", json!(refusal.reason));
        if let Ok(mut refused) = self.refused_origins.write() {
            refused.insert(origin.name.clone(), (origin.clone(), error.clone()));
        }
        Err(error.with_tool(tool))
    }

    /// Drops the registry-built stacks (and remembered refusals) whose origin no live entry
    /// names any more: a removed or moved entry must not leave a connection (a stdio child,
    /// a WebSocket) or a breaker behind. `live` are the origins still in use.
    pub fn prune_registry_upstreams(&self, live: &[Arc<ServerRef>]) -> usize {
        let mut by_name: std::collections::HashMap<&str, Vec<&Arc<ServerRef>>> = Default::default();
        for origin in live {
            by_name.entry(origin.name.as_str()).or_default().push(origin);
        }
        let in_use = |name: &str, origin: &Arc<ServerRef>| {
            by_name.get(name).is_some_and(|origins| origins.contains(&origin))
        };
        let mut dropped = Vec::new();
        if let Ok(mut map) = self.dynamic_upstreams.write() {
            map.retain(|name, (origin, upstream)| {
                let keep = in_use(name, origin);
                if !keep {
                    dropped.push(upstream.clone());
                }
                keep
            });
            self.metrics.registry_upstreams.set(map.len() as i64);
        }
        if let Ok(mut refused) = self.refused_origins.write() {
            refused.retain(|name, (origin, _)| in_use(name, origin));
        }
        if let Ok(mut accepted) = self.accepted_borrows.write() {
            accepted.retain(|name, origin| in_use(name, origin));
        }
        for upstream in &dropped {
            tracing::info!(server = %upstream.name, transport = upstream.transport.as_str(), "registry server no longer named by a live entry; its stack is dropped");
            self.metrics.registry_upstreams_dropped.inc();
            // Ends a session-era HTTP session; a persistent connection stops when its last
            // handle (this one, or a call in flight) goes.
            if let Some(http) = upstream.http.clone() {
                tokio::spawn(async move { http.close().await });
            }
        }
        dropped.len()
    }

    /// Builds (once per origin) the stack of a server known only from the registry.
    async fn build_registry_upstream(
        &self,
        origin: &Arc<ServerRef>,
        tool: &str,
        settings: &settings::Settings,
    ) -> Result<Arc<Upstream>, GatewayError> {
        let config = &settings.config;
        let misconfigured = |detail: String| GatewayError::new(Category::UpstreamMisconfigured, detail);
        let transport = TransportKind::parse(&origin.transport).ok_or_else(|| {
            misconfigured(format!("transport {:?} of server {} is not served", origin.transport, origin.name))
        })?;
        if transport == TransportKind::Openapi {
            return Err(misconfigured(format!(
                "server {} is an OpenAPI target, which only configuration declares (a registry entry cannot carry its document)",
                origin.name
            )));
        }
        if transport.needs_url() {
            self.check_registry_url(origin, tool, settings).await?;
        }
        let mut server = ServerConfig::new(
            transport,
            origin.url.clone(),
            origin.function.clone(),
            origin.qualifier.clone(),
        );
        if transport == TransportKind::Stdio {
            // A registry entry picks one of the commands configuration allows; it never
            // supplies a program, arguments or environment of its own.
            let allowed = origin.command.as_deref().and_then(|key| config.stdio_commands.get(key));
            let Some(allowed) = allowed else {
                return Err(misconfigured(format!(
                    "stdio server {} names command {:?}, which is not in the gateway's stdio_commands (registry entries may only start commands configuration allows)",
                    origin.name, origin.command
                )));
            };
            server.command = Some(allowed.command.clone());
            server.args = allowed.args.clone();
            server.env = allowed.env.clone();
        }
        if transport == TransportKind::Lambda {
            server.lambda_event = LambdaEvent::parse(origin.lambda_event.as_deref()).ok_or_else(|| {
                misconfigured(format!(
                    "server {} has lambda_event {:?}; the gateway serves \"jsonrpc\" and \"agentcore\"",
                    origin.name, origin.lambda_event
                ))
            })?;
            server.agentcore_target = origin.agentcore_target.clone();
        }
        // Its tools come from the registry, not from its own tools/list.
        server.discover = false;
        let lambda = match transport {
            TransportKind::Lambda => {
                Some(self.lambda_client.get_or_init(|| upstreams::lambda_client(config)).await)
            }
            _ => None,
        };
        let built = upstreams::build(&origin.name, &server, config, &self.metrics, lambda)
            .map_err(|e| misconfigured(format!("{e:#}")))?;
        let mut map = self.dynamic_upstreams.write().map_err(|_| unknown_server())?;
        // Another call may have built the same origin meanwhile: keep one stack per origin.
        if let Some((built_from, upstream)) = map.get(&origin.name)
            && built_from == origin
        {
            return Ok(upstream.clone());
        }
        if let Some(shared) = &self.shared_breakers {
            shared.register(&built.breaker);
        }
        built.start_health_prober(self.shared_breakers.clone(), self.metrics.breaker_health_probes.clone());
        let upstream = Arc::new(built);
        let replaced = map.insert(origin.name.clone(), (origin.clone(), upstream.clone())).is_some();
        self.metrics.registry_upstreams.set(map.len() as i64);
        if replaced {
            tracing::warn!(server = %origin.name, transport = transport.as_str(), url = ?origin.url.as_deref().map(crate::redact::url), function = ?origin.function, "registry server's origin changed; rebuilt its stack");
        } else {
            tracing::info!(server = %origin.name, transport = transport.as_str(), "registry server connected");
        }
        Ok(upstream)
    }
}

/// The metric label of a remembered refusal.
fn refusal_reason(error: &GatewayError) -> &'static str {
    let reason = error.extra.as_ref().and_then(|extra| extra.1.as_str());
    crate::telemetry::metrics::UPSTREAM_REFUSAL_REASONS
        .iter()
        .find(|known| Some(**known) == reason)
        .copied()
        .unwrap_or("not_allowlisted")
}

/// A resolved tool whose server the gateway cannot name (a record without an origin).
fn unknown_server() -> GatewayError {
    GatewayError::new(Category::Internal, "tool resolved to an unknown server")
}
