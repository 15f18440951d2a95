//! The environment overlay: `MCP_GATEWAY_A__B=value` sets `a.b` of the TOML table before it
//! is typed (see the module documentation of [`super`] for the rules).

use anyhow::bail;

/// The environment variable prefix for overrides.
pub const ENV_PREFIX: &str = "MCP_GATEWAY_";

/// Environment variables with the prefix that belong to the command line (flags' `env`) or to
/// the debug build's fault injection ([`crate::supervise::DEBUG_ENV`]), not to the
/// configuration: the overlay skips them.
pub const CLI_ENV: &[&str] = &[
    "MCP_GATEWAY_CONFIG",
    "MCP_GATEWAY_LOG_FORMAT",
    "MCP_GATEWAY_WATCH",
    crate::supervise::PANIC_ONCE_ENV,
    crate::supervise::PANIC_ALWAYS_ENV,
    crate::supervise::RESTART_BASE_ENV,
];

/// Applies `MCP_GATEWAY_A__B=value` as `table.a.b = value`.
pub(super) fn apply_env_overrides(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<()> {
    let mut vars: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| {
            k.starts_with(ENV_PREFIX) && k.len() > ENV_PREFIX.len() && !CLI_ENV.contains(&k.as_str())
        })
        .collect();
    vars.sort();
    for (key, raw) in vars {
        let path: Vec<String> = key[ENV_PREFIX.len()..].split("__").map(str::to_ascii_lowercase).collect();
        if path.iter().any(String::is_empty) {
            bail!("environment variable {key}: empty key segment");
        }
        let value = parse_env_value(&raw);
        let (last, parents) = path.split_last().expect("non-empty path");
        let mut cursor = &mut *table;
        for segment in parents {
            let entry =
                cursor.entry(segment.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cursor = match entry {
                toml::Value::Table(t) => t,
                _ => bail!("environment variable {key}: {segment} is not a table"),
            };
        }
        cursor.insert(last.clone(), value);
    }
    Ok(())
}

fn parse_env_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        // No setting is a date: `2024-01-01` stays the text it is.
        .filter(|v| !matches!(v, toml::Value::Datetime(_)))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}
