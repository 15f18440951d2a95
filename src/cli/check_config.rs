//! `check-config`: the configuration as the gateway would run with it, validated and printed
//! (Rust debug form, or `--json` with the TOML file's keys), with every secret redacted.

use std::{io::Write, path::PathBuf};

use mcp_gateway::{config::Config, redact};

pub fn run(config: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let mut config = Config::load(config.as_deref(), std::env::vars())?;
    mcp_gateway::registry::url_policy::validate(&config.registry.upstream_urls)?;
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
    let text = if json { serde_json::to_string_pretty(&config)? } else { format!("{config:#?}") };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(())
}
