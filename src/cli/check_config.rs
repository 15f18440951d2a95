//! `check-config`: the configuration as the gateway would run with it, validated and printed
//! with every secret redacted: as TOML an operator can copy back into a file (every key of the
//! file, defaults included; unset ones left out, since TOML has no null), or with `--json`
//! (the same keys, unset ones as `null`). An OpenAPI server's document is read (a URL one
//! fetched) and mapped: a document the gateway would refuse fails it with the same reason, and
//! every operation it would skip is a `warning:` line on stderr. The policy file is parsed
//! and the hooks' patterns compiled, as `serve` and a reload do: what they would refuse, this
//! refuses with the same reason.

use std::{io::Write, path::PathBuf};

use anyhow::Context;
use mcp_gateway::{
    config::{Config, TransportKind},
    redact,
};

pub async fn run(config: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let mut config = Config::load(config.as_deref(), std::env::vars())?;
    mcp_gateway::registry::url_policy::validate(&config.registry.upstream_urls)?;
    mcp_gateway::guardrail::Hooks::new(&config.hooks)?;
    if config.policy.file.is_some() {
        // Loaded once, not watched.
        let once = mcp_gateway::config::PolicyConfig { reload_secs: 0, ..config.policy.clone() };
        let reloads = mcp_gateway::telemetry::metrics::Metrics::new().policy_reloads.clone();
        mcp_gateway::policy::Policy::start(&once, reloads)?;
    }
    // OpenAPI documents given by URL: fetched and mapped as the gateway would at start.
    for (name, server) in &mut config.servers {
        if server.transport != TransportKind::Openapi || !server.spec_is_url() {
            continue;
        }
        let url = server.spec.clone().unwrap_or_default();
        let mapped = mcp_gateway::openapi::fetch::fetch_and_map(
            &url,
            &server.openapi_selection()?,
            server.openapi_limits(),
            server.tool_list_bounds(&config.defaults).max_definition_bytes,
            server.connect_timeout(&config.defaults) + server.timeout(&config.defaults),
        )
        .await
        .with_context(|| format!("server {name}: spec"))?;
        server.openapi_document = Some(std::sync::Arc::new(mapped));
    }
    // OpenAPI documents: every operation that will not be served, and why.
    for (name, server) in &config.servers {
        for skipped in server.openapi_document.iter().flat_map(|m| m.skipped.iter()) {
            let id = skipped.operation_id.as_deref().map(|id| format!(" ({id})")).unwrap_or_default();
            let _ = writeln!(
                std::io::stderr().lock(),
                "warning: servers.{name}: OpenAPI operation {} {}{id} skipped: {}",
                skipped.method,
                skipped.path,
                skipped.reason
            );
        }
    }
    // OpenAPI tools served with part of a schema left out or cut, and why.
    for (name, server) in &config.servers {
        for trimmed in server.openapi_document.iter().flat_map(|m| m.trimmed.iter()) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "warning: servers.{name}: OpenAPI tool {} ({} {}) trimmed: {}",
                trimmed.tool,
                trimmed.method,
                trimmed.path,
                trimmed.reason
            );
        }
    }
    // Header values are usually credentials: never print them.
    for server in config.servers.values_mut() {
        server.headers.values_mut().for_each(|v| *v = "<redacted>".into());
        server.env.values_mut().for_each(|v| *v = "<redacted>".into());
    }
    for command in config.stdio_commands.values_mut() {
        command.env.values_mut().for_each(|v| *v = "<redacted>".into());
    }
    config.redis_url = config.redis_url.as_deref().map(redact::url);
    // URLs lose their user-info and query values, arguments their secret-looking
    // values (redact): the structure stays readable.
    for server in config.servers.values_mut() {
        server.url = server.url.as_deref().map(redact::url);
        server.args = redact::args(&server.args);
    }
    for command in config.stdio_commands.values_mut() {
        command.args = redact::args(&command.args);
    }
    config.dynamodb_endpoint = config.dynamodb_endpoint.as_deref().map(redact::url);
    config.aws.endpoint_url = config.aws.endpoint_url.as_deref().map(redact::url);
    config.admin = config.admin.redacted();
    // The setting in force, not only what was written (its default depends on `[auth]`).
    config.metrics.main_listener = Some(config.metrics.main_listener(&config.auth));
    let text = if json { serde_json::to_string_pretty(&config)? } else { as_toml(&config)? };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(())
}

/// `config` as a TOML document with the file's keys: its JSON form without the unset (`null`)
/// values, which TOML cannot write and which are what an absent key means.
fn as_toml(config: &Config) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(config)?;
    drop_nulls(&mut value);
    Ok(toml::to_string_pretty(&value)?)
}

fn drop_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => {
            items.retain(|v| !v.is_null());
            items.iter_mut().for_each(drop_nulls);
        }
        _ => {}
    }
}
