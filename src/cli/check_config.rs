//! `check-config`: the configuration as the gateway would run with it, validated and printed
//! with every secret redacted: as TOML an operator can copy back into a file (every key of the
//! file, defaults included; unset ones left out, since TOML has no null), or with `--json`
//! (the same keys, unset ones as `null`). An OpenAPI server's document is read (a URL one
//! fetched) and mapped: a document the gateway would refuse fails it with the same reason, and
//! every operation it would skip is a `warning:` line on stderr. The policy file is parsed
//! and the hooks' patterns compiled, as `serve` and a reload do: what they would refuse, this
//! refuses with the same reason. Every server is then checked as its stack would be built
//! (`gateway::upstreams::check`: secrets read, URLs, headers, an OpenAPI document's server
//! URL), nothing started; `--demo` checks the file as `serve --demo` runs it. It ends with a
//! one-line verdict on stderr (servers, tools known before start, warnings).

use std::{io::Write, path::PathBuf};

use anyhow::Context;
use mcp_gateway::{
    config::{Config, TransportKind},
    redact,
};

pub async fn run(config: Option<PathBuf>, json: bool, demo: bool) -> anyhow::Result<()> {
    let mut config = Config::read(config.as_deref(), std::env::vars())?;
    if demo {
        // The address `serve --demo` gives its server is chosen when it starts; its place
        // here stands for it.
        let placeholder = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        super::serve::with_demo_server(&mut config, Some(&super::serve::demo_server_config(placeholder)))?;
    }
    config.validate()?;
    mcp_gateway::registry::url_policy::validate(&config.registry.upstream_urls)?;
    mcp_gateway::guardrail::Hooks::new(&config.hooks)?;
    let metrics = mcp_gateway::telemetry::metrics::Metrics::new();
    if config.policy.file.is_some() {
        // Loaded once, not watched.
        let once = mcp_gateway::config::PolicyConfig { reload_secs: 0, ..config.policy.clone() };
        mcp_gateway::policy::Policy::start(&once, metrics.policy_reloads.clone())?;
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
            server.openapi_limits(&config.defaults),
            server.tool_list_bounds(&config.defaults).max_definition_bytes,
            server.connect_timeout(&config.defaults) + server.timeout(&config.defaults),
        )
        .await
        .with_context(|| format!("server {name}: spec"))?;
        server.openapi_document = Some(std::sync::Arc::new(mapped));
    }
    // Every server as its stack would be built, nothing started: secrets read, URLs, headers,
    // an OpenAPI document's server URL.
    for (name, server) in &config.servers {
        mcp_gateway::gateway::upstreams::check(name, server, &config, &metrics)?;
    }
    // OpenAPI documents: every operation that will not be served, and why; every selector
    // that selects nothing.
    let mut warnings = 0usize;
    let mut warn = |line: String| {
        warnings += 1;
        let _ = writeln!(std::io::stderr().lock(), "warning: {line}");
    };
    for (name, server) in &config.servers {
        for mapped in server.openapi_document.iter() {
            for skipped in &mapped.skipped {
                let id = skipped.operation_id.as_deref().map(|id| format!(" ({id})")).unwrap_or_default();
                warn(format!(
                    "servers.{name}: OpenAPI operation {} {}{id} skipped: {}",
                    skipped.method, skipped.path, skipped.reason
                ));
            }
            for selector in &mapped.unmatched_selectors {
                warn(format!("servers.{name}: {selector} matches no operation of {}", mapped.source));
            }
        }
    }
    for (name, server) in &config.servers {
        for trimmed in server.openapi_document.iter().flat_map(|m| m.trimmed.iter()) {
            warn(format!(
                "servers.{name}: OpenAPI tool {} ({} {}) trimmed: {}",
                trimmed.tool, trimmed.method, trimmed.path, trimmed.reason
            ));
        }
    }
    let verdict = verdict(&config, warnings);
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
    let mut value = serde_json::to_value(&config)?;
    shortest_floats(&mut value);
    let text = if json { serde_json::to_string_pretty(&value)? } else { as_toml(value)? };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    let _ = writeln!(std::io::stderr().lock(), "{verdict}");
    Ok(())
}

/// The one-line verdict: how many servers of which transport, how many tools are known before
/// any server is asked (declared ones and mapped OpenAPI operations; MCP servers add theirs
/// when they answer `tools/list`), how many warnings.
fn verdict(config: &Config, warnings: usize) -> String {
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    let mut tools = 0usize;
    for server in config.servers.values() {
        *kinds.entry(server.transport.as_str()).or_default() += 1;
        tools += server.tools.len() + server.file_tools.len();
        tools += server.openapi_document.as_ref().map_or(0, |mapped| mapped.list.len());
    }
    let kinds: Vec<String> = kinds.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    let kinds = if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) };
    format!(
        "check-config: ok: {} server(s){kinds}, {} tool(s) known before start, {} warning(s)",
        config.servers.len(),
        tools,
        warnings
    )
}

/// Numbers as the file wrote them: a setting held as `f32` (a ratio like `0.2`) widens to
/// `0.20000000298023224` in JSON; a value that is exactly an `f32` is written in that
/// type's shortest form. A genuine `f64` is left as it is (it never equals its `f32`).
fn shortest_floats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(number) => {
            if let Some(wide) = number.as_f64().filter(|_| number.is_f64()) {
                let narrow = wide as f32;
                if f64::from(narrow) == wide
                    && let Ok(shortest) = narrow.to_string().parse::<f64>()
                    && let Some(shown) = serde_json::Number::from_f64(shortest)
                {
                    *number = shown;
                }
            }
        }
        serde_json::Value::Object(map) => map.values_mut().for_each(shortest_floats),
        serde_json::Value::Array(items) => items.iter_mut().for_each(shortest_floats),
        _ => {}
    }
}

/// The configuration's JSON form as a TOML document with the file's keys: without the unset
/// (`null`) values, which TOML cannot write and which are what an absent key means.
fn as_toml(mut value: serde_json::Value) -> anyhow::Result<String> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_are_shown_as_written() {
        let mut value = json!({"ratio": f64::from(0.2f32), "exact": 0.5, "wide": 0.1, "count": 3});
        shortest_floats(&mut value);
        assert_eq!(value.to_string(), r#"{"ratio":0.2,"exact":0.5,"wide":0.1,"count":3}"#);
    }
}
