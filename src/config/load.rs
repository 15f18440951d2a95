//! Reading the configuration: the TOML file (if any), then the environment overlay
//! ([`super::env`]), then serde's typed view, then [`Config::validate`].

use std::path::Path;

use anyhow::Context;

use super::{Config, env::apply_env_overrides};

impl Config {
    /// Loads the file (if any), applies environment overrides, and validates.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let config = Self::read(path, env)?;
        config.validate()?;
        Ok(config)
    }

    /// Loads the file (if any) and applies environment overrides, without the checks across
    /// sections: for a caller that adds to it first (`--demo`'s server) and then calls
    /// [`Config::validate`].
    pub fn read(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<toml::Table>(&text).map_err(|e| {
                    anyhow::anyhow!("parsing config file {}: {}", path.display(), syntax_error(&text, &e))
                })?
            }
            None => toml::Table::new(),
        };
        apply_env_overrides(&mut table, env)?;
        let mut config: Config =
            toml::Value::Table(table.clone()).try_into().map_err(|e: toml::de::Error| {
                let message = without_values(&e.to_string());
                let hint = nearest_known_key(&message)
                    .map(|k| format!(" (did you mean `{k}`?)"))
                    .unwrap_or_default();
                anyhow::anyhow!("invalid configuration: {message}{hint}")
            })?;
        super::lambda_targets::prepare(&mut config, &table)?;
        super::openapi_target::prepare(&mut config)?;
        Ok(config)
    }
}

/// For serde's "unknown field `timout_ms`, expected one of `timeout_ms`, …": the known key
/// nearest the unknown one, when it is near enough to be a typo (at most a third of its
/// letters differ).
fn nearest_known_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, rest) = rest.split_once('`')?;
    let known = rest.split_once("expected")?.1;
    let known = known.split('\n').next().unwrap_or(known);
    known
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|key| (strsim::damerau_levenshtein(unknown, key), key))
        .filter(|(distance, _)| *distance * 3 <= unknown.chars().count().max(3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}

/// A TOML syntax error as line, column and reason. Not the parser's own rendering: it quotes
/// the offending line, which may hold a credential, and the message goes to the log (a
/// refused reload) and to stderr.
fn syntax_error(text: &str, error: &toml::de::Error) -> String {
    let reason = error.message().trim_end();
    let Some(span) = error.span() else { return reason.to_string() };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {reason}")
}

/// A typed-configuration error with every quoted value left out (`invalid type: string "…",
/// expected u64`): a value written under the wrong key may be a secret. Keys are quoted with
/// backticks and stay.
fn without_values(message: &str) -> String {
    let mut shown = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        match (c, inside) {
            ('"', false) => {
                shown.push_str("\"…");
                inside = true;
            }
            ('"', true) => {
                shown.push('"');
                inside = false;
            }
            (_, false) => shown.push(c),
            (_, true) => {}
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::TransportKind;

    #[test]
    fn an_unknown_key_names_the_nearest_known_one() {
        let refused = |text: &str| {
            let path =
                std::env::temp_dir().join(format!("mcpgw-near-{}-{}.toml", std::process::id(), text.len()));
            std::fs::write(&path, text).expect("temp file");
            let error = format!("{:#}", Config::load(Some(&path), env(&[])).expect_err("an unknown key"));
            let _ = std::fs::remove_file(&path);
            error
        };
        let typo = refused("[defaults]\ntimout_ms = 3\n");
        assert!(
            typo.contains("unknown field `timout_ms`") && typo.contains("(did you mean `timeout_ms`?)"),
            "{typo}"
        );
        let top = refused("[defualts]\n");
        assert!(top.contains("(did you mean `defaults`?)"), "{top}");
        // Nothing near: no guess.
        let far = refused("[defaults]\nzzzzzzzzzzzz = 3\n");
        assert!(far.contains("unknown field") && !far.contains("did you mean"), "{far}");
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn refusals_name_the_place_but_never_echo_a_value() {
        let path = std::env::temp_dir().join(format!("mcpgw-load-{}.toml", std::process::id()));
        let unclosed = "[servers.a]\ntransport = \"http\"\nheaders = { authorization = \"Bearer s3cret\" \n";
        std::fs::write(&path, unclosed).expect("temp file");
        let error = format!("{:#}", Config::load(Some(&path), env(&[])).expect_err("unclosed table"));
        assert!(error.contains("line 3, column"), "{error}");
        assert!(!error.contains("s3cret"), "the line is not quoted: {error}");
        let misplaced = "refresh_interval_secs = \"Bearer s3cret\"\n";
        std::fs::write(&path, misplaced).expect("temp file");
        let error = format!("{:#}", Config::load(Some(&path), env(&[])).expect_err("a string for a number"));
        let _ = std::fs::remove_file(&path);
        assert!(error.contains("refresh_interval_secs") && error.contains("invalid type"), "{error}");
        assert!(!error.contains("s3cret"), "the value is not quoted: {error}");
    }

    #[test]
    fn environment_overrides_every_level() {
        let config = Config::load(
            None,
            env(&[
                ("MCP_GATEWAY_LISTEN", "127.0.0.1:9999"),
                ("MCP_GATEWAY_MAX_BODY_BYTES", "2048"),
                ("MCP_GATEWAY_SERVERS__CATALOG__TRANSPORT", "http"),
                ("MCP_GATEWAY_SERVERS__CATALOG__URL", "http://127.0.0.1:1/mcp"),
                ("MCP_GATEWAY_SERVERS__CATALOG__TIMEOUT_MS", "250"),
                ("MCP_GATEWAY_AWS__ENDPOINT_URL", "http://127.0.0.1:2"),
                ("MCP_GATEWAY_ALLOWED_ORIGINS", r#"["https://shop.example"]"#),
                ("UNRELATED", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(config.listen.port(), 9999);
        assert_eq!(config.max_body_bytes, 2048);
        let catalog = &config.servers["catalog"];
        assert_eq!(catalog.transport, TransportKind::Http);
        assert_eq!(catalog.timeout(&config.defaults), Duration::from_millis(250));
        assert_eq!(config.aws.endpoint_url.as_deref(), Some("http://127.0.0.1:2"));
        assert_eq!(config.allowed_origins, vec!["https://shop.example"]);
    }

    #[test]
    fn string_keys_take_numeric_looking_values_and_cli_variables_are_skipped() {
        let config = Config::load(
            None,
            env(&[
                ("MCP_GATEWAY_SERVERS__FN__TRANSPORT", "lambda"),
                ("MCP_GATEWAY_SERVERS__FN__FUNCTION", "12345"),
                ("MCP_GATEWAY_SERVERS__FN__QUALIFIER", "7"),
                ("MCP_GATEWAY_SERVERS__FN__HEADERS__X_TENANT", "42"),
                ("MCP_GATEWAY_DYNAMODB_TABLE", "2024-01-01"),
                ("MCP_GATEWAY_REGISTRY__REDIS_PREFIX", "true"),
                ("MCP_GATEWAY_CONFIG", "/nonexistent.toml"),
                ("MCP_GATEWAY_LOG_FORMAT", "text"),
            ]),
        )
        .unwrap();
        let server = &config.servers["fn"];
        assert_eq!(server.qualifier.as_deref(), Some("7"));
        assert_eq!(server.function.as_deref(), Some("12345"));
        assert_eq!(server.headers["x_tenant"], "42");
        assert_eq!(config.dynamodb_table.as_deref(), Some("2024-01-01"));
        assert_eq!(config.registry.redis_prefix, "true");
        // Numeric keys still refuse text.
        let err = Config::load(None, env(&[("MCP_GATEWAY_MAX_BODY_BYTES", "lots")])).unwrap_err();
        assert!(format!("{err:#}").contains("max_body_bytes"), "{err:#}");
    }

    #[test]
    fn invalid_configurations_are_refused_with_a_reason() {
        let err = Config::load(None, env(&[("MCP_GATEWAY_SERVERS__X__TRANSPORT", "lambda")])).unwrap_err();
        assert!(format!("{err:#}").contains("needs `function`"));
        let err = Config::load(None, env(&[("MCP_GATEWAY_LISTEN_PORT", "1")])).unwrap_err();
        assert!(format!("{err:#}").contains("unknown field"));
        let server = [
            ("MCP_GATEWAY_SERVERS__X__TRANSPORT", "http"),
            ("MCP_GATEWAY_SERVERS__X__URL", "http://127.0.0.1:1/mcp"),
            ("MCP_GATEWAY_SERVERS__X__MAX_LIST_PAGES", "0"),
        ];
        let err = Config::load(None, env(&server)).unwrap_err();
        assert!(format!("{err:#}").contains("servers.x.max_list_pages"), "{err:#}");
        let err = Config::load(None, env(&[("MCP_GATEWAY_CATALOGUE__MAX_TOTAL_TOOLS", "0")])).unwrap_err();
        assert!(format!("{err:#}").contains("catalogue.max_total_tools must be positive"), "{err:#}");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Keys near the real ones (and not), values of every TOML shape (and not).
        fn pair() -> impl Strategy<Value = (String, String)> {
            let key = prop_oneof![
                Just("MCP_GATEWAY_MAX_BODY_BYTES".to_string()),
                Just("MCP_GATEWAY_INBOUND__MAX_BATCH_ITEMS".to_string()),
                Just("MCP_GATEWAY_SERVERS__A__URL".to_string()),
                Just("MCP_GATEWAY_SERVERS__A__TRANSPORT".to_string()),
                Just("MCP_GATEWAY_LISTEN".to_string()),
                Just("MCP_GATEWAY_DEFAULTS__RETRY__BUDGET_RATIO".to_string()),
                "MCP_GATEWAY_[A-Z_]{0,12}(__[A-Z_]{0,6}){0,3}",
                "[ -~]{0,16}",
            ];
            let value = prop_oneof![
                Just("0".to_string()),
                Just("true".to_string()),
                Just("[1, 2]".to_string()),
                Just("{ a = 1 }".to_string()),
                Just("http://127.0.0.1:1/mcp".to_string()),
                Just("1979-05-27".to_string()),
                any::<String>(),
            ];
            (key, value)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any environment: a configuration that validates, or an error; never a panic.
            #[test]
            fn arbitrary_environments_give_a_config_or_an_error(pairs in prop::collection::vec(pair(), 0..6)) {
                if let Ok(config) = Config::load(None, pairs) {
                    prop_assert!(config.validate().is_ok());
                    prop_assert!(config.inbound.max_batch_items > 0 && config.max_body_bytes > 0);
                }
            }

            /// A numeric key: any text is that number or an error, never a panic; a plain
            /// positive number is taken as it is.
            #[test]
            fn a_numeric_key_takes_a_number_or_fails(raw in any::<String>(), number in "[1-9][0-9]{0,5}") {
                let key = "MCP_GATEWAY_INBOUND__MAX_BATCH_ITEMS".to_string();
                if let Ok(config) = Config::load(None, vec![(key.clone(), raw)]) {
                    prop_assert!(config.inbound.max_batch_items > 0);
                }
                let config = Config::load(None, vec![(key, number.clone())]);
                prop_assert_eq!(config.map(|c| c.inbound.max_batch_items).ok(), number.parse::<usize>().ok());
            }
        }
    }
}
