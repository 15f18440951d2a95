//! What serde cannot check: cross-references between sections, the keys each transport
//! needs, and the bounds of every section (each section's own `validate`, called from here).

use anyhow::bail;

use super::{Config, TransportKind, surface_control};

impl Config {
    /// Checks what serde cannot: cross-references and required per-transport keys.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, server) in &self.servers {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                bail!("server name {name:?} must match [a-zA-Z0-9_-]+");
            }
            match server.transport {
                kind if kind.needs_url() && server.url.is_none() => {
                    bail!("server {name}: transport \"{}\" needs `url`", kind.as_str())
                }
                TransportKind::Websocket
                    if !server
                        .url
                        .as_deref()
                        .is_some_and(|u| u.starts_with("ws://") || u.starts_with("wss://")) =>
                {
                    bail!("server {name}: transport \"websocket\" needs a ws:// or wss:// `url`")
                }
                TransportKind::Sse
                    if !server
                        .url
                        .as_deref()
                        .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://")) =>
                {
                    bail!(
                        "server {name}: transport \"sse\" needs the http:// or https:// `url` of the SSE stream"
                    )
                }
                TransportKind::Stdio if server.command.as_deref().is_none_or(|c| c.trim().is_empty()) => {
                    bail!("server {name}: transport \"stdio\" needs `command` (the program to run)")
                }
                TransportKind::Lambda if server.function.is_none() => {
                    bail!("server {name}: transport \"lambda\" needs `function`")
                }
                _ => {}
            }
            if !server.discover
                && server.tools.is_empty()
                && server.file_tools.is_empty()
                && !server.is_agentcore()
            {
                bail!("server {name}: with discover = false it needs static `tools` (or `tools_file`)");
            }
            super::lambda_targets::validate(name, server, self)?;
            super::openapi_target::validate(name, server, &self.defaults)?;
            for prefix in &server.resource_prefixes {
                crate::resource_uri::check_prefix(prefix)
                    .map_err(|e| anyhow::anyhow!("servers.{name}.resource_prefixes: {e}"))?;
            }
            if let Some(auth) = &server.auth {
                auth.validate(name)?;
                if !matches!(server.transport, TransportKind::Http | TransportKind::Openapi) {
                    bail!(
                        "server {name}: `auth` applies to transports \"http\" and \"openapi\" only (Lambda uses the gateway's IAM role; persistent connections are shared by every caller)"
                    );
                }
            }
        }
        for (tool, settings) in &self.tools {
            if let Some(server) = &settings.server
                && !self.servers.contains_key(server)
            {
                bail!("tools.{tool}: unknown server {server:?}");
            }
            if settings.fallback_tool.as_deref() == Some(tool.as_str()) {
                bail!("tools.{tool}: a tool cannot be its own fallback");
            }
        }
        if self.shared_breakers && self.redis_url.is_none() {
            bail!("shared_breakers needs redis_url");
        }
        if (self.redis_cluster || self.redis_ca_file.is_some()) && self.redis_url.is_none() {
            bail!("redis_cluster and redis_ca_file need redis_url");
        }
        self.defaults.retry.validate("defaults")?;
        self.defaults.breaker.validate("defaults")?;
        for (name, server) in &self.servers {
            server.retry(&self.defaults).validate(name)?;
            server.breaker(&self.defaults).validate(name)?;
            let bounds = server.tool_list_bounds(&self.defaults);
            for (setting, value) in [
                ("max_tools", bounds.max_count),
                ("max_tool_definition_bytes", bounds.max_definition_bytes),
                ("max_catalogue_bytes", bounds.max_list_bytes),
                ("max_list_pages", bounds.max_pages),
            ] {
                if value == 0 {
                    bail!("servers.{name}.{setting} (or defaults.{setting}) must be positive");
                }
            }
        }
        for (name, command) in &self.stdio_commands {
            if command.command.trim().is_empty() {
                bail!("stdio_commands.{name}: `command` must name the program to run");
            }
        }
        if self.max_body_bytes == 0 {
            bail!("max_body_bytes must be positive");
        }
        self.quotas.validate()?;
        self.audit.validate()?;
        self.catalogue.validate()?;
        self.validate_catalogue_control()?;
        surface_control::validate(&self.prompts, &self.resources)?;
        super::endpoints::validate(&self.endpoints, &self.servers, self.serve_plain_mcp)?;
        self.inbound.validate()?;
        self.auth.validate(self.listen)?;
        self.admin.validate()?;
        self.tasks.validate()?;
        self.approvals.validate()?;
        if let Some(bridge) = &self.approvals.bridge
            && !self.servers.contains_key(&bridge.server)
        {
            bail!("approvals.bridge.server {:?} is not a configured server ([servers.NAME])", bridge.server);
        }
        super::hooks::validate(&self.hooks, &self.servers)?;
        Ok(())
    }
}
