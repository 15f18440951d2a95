//! Every key of the configuration table (docs/configuration.md) can be set through the
//! environment, as an ECS task definition sets it; the command line's own variables
//! (`MCP_GATEWAY_CONFIG`, `MCP_GATEWAY_LOG_FORMAT`) are not mistaken for keys. The effective configuration is read
//! back from the real binary (`check-config --json`).

use std::{collections::BTreeMap, process::Command, time::Duration};

use crate::common::{self, BIN, Proc, TempFile, repo_root};
use serde_json::{Value, json};

/// Placeholders of the configuration table's key column and the names this test uses for them.
const SERVER: &str = "cat7";
const TOOL: &str = "lookup";
const COMMAND: &str = "catalog_cli";

/// The value the test sets for each concrete key (TOML-ish text, as an operator writes it in
/// a task definition) and what `check-config --json` must then show (objects: a subset).
fn cases() -> BTreeMap<String, (&'static str, Value)> {
    let s = |k: &str| k.replace("NAME_S", SERVER).replace("NAME_T", TOOL).replace("NAME_C", COMMAND);
    let raw: Vec<(String, &'static str, Value)> = vec![
        (s("listen"), "127.0.0.1:9000", json!("127.0.0.1:9000")),
        (s("allow_non_loopback"), "true", json!(true)),
        (s("max_body_bytes"), "2048", json!(2048)),
        (s("allowed_origins"), r#"["https://shop.example"]"#, json!(["https://shop.example"])),
        (s("refresh_interval_secs"), "77", json!(77)),
        (s("worker_threads"), "3", json!(3)),
        (s("log_level"), "mcp_gateway=debug,info", json!("mcp_gateway=debug,info")),
        (s("shutdown_grace_secs"), "45", json!(45)),
        (s("metrics_listen"), "0.0.0.0:9464", json!("0.0.0.0:9464")),
        // `admin` needs the admin token, which is set below.
        (s("metrics.main_listener"), "admin", json!("admin")),
        (s("ready_min_tools"), "4", json!(4)),
        (s("defaults.connect_timeout_ms"), "111", json!(111)),
        (s("defaults.timeout_ms"), "222", json!(222)),
        (s("defaults.max_response_bytes"), "1048576", json!(1048576)),
        (s("defaults.max_tools"), "5000", json!(5000)),
        (s("defaults.max_tool_definition_bytes"), "32768", json!(32768)),
        (s("defaults.max_catalogue_bytes"), "4194304", json!(4194304)),
        (s("defaults.max_list_pages"), "10", json!(10)),
        (s("defaults.deadline_ms"), "3333", json!(3333)),
        (s("defaults.max_concurrency"), "17", json!(17)),
        (s("defaults.cache_ttl_ms"), "500", json!(500)),
        (s("defaults.max_result_bytes"), "4096", json!(4096)),
        (s("defaults.retry.max_retries_safe"), "4", json!(4)),
        (s("defaults.retry.max_retries_unsafe"), "1", json!(1)),
        (s("defaults.retry.honours_idempotency_keys"), "true", json!(true)),
        (s("defaults.retry.backoff_base_ms"), "30", json!(30)),
        (s("defaults.retry.backoff_max_ms"), "900", json!(900)),
        (s("defaults.retry.retry_after_cap_ms"), "1500", json!(1500)),
        (s("defaults.retry.budget_ratio"), "0.3", json!(0.3)),
        (s("defaults.retry.budget_min_per_sec"), "6", json!(6)),
        (s("defaults.retry.budget_window_secs"), "20", json!(20)),
        (s("defaults.breaker.enabled"), "false", json!(false)),
        (s("defaults.breaker.consecutive_failures"), "9", json!(9)),
        (s("defaults.breaker.failure_rate"), "0.75", json!(0.75)),
        (s("defaults.breaker.min_calls"), "33", json!(33)),
        (s("defaults.breaker.window_secs"), "12", json!(12)),
        (s("defaults.breaker.open_base_ms"), "1200", json!(1200)),
        (s("defaults.breaker.open_max_ms"), "40000", json!(40000)),
        (s("defaults.breaker.half_open_probes"), "2", json!(2)),
        // `http`: the one transport every server key (including `auth`) applies to.
        (s("servers.NAME_S.transport"), "http", json!("http")),
        (s("servers.NAME_S.url"), "http://catalog:8080/mcp", json!("http://catalog:8080/mcp")),
        (s("servers.NAME_S.function"), "mangaassist-checkout-mcp", json!("mangaassist-checkout-mcp")),
        // A Lambda version: numeric-looking, and still a string.
        (s("servers.NAME_S.qualifier"), "7", json!("7")),
        (s("servers.NAME_S.discover"), "false", json!(false)),
        (s("servers.NAME_S.registry_may_use"), "true", json!(true)),
        (s("servers.NAME_S.resource_prefixes"), r#"["manga://catalog/"]"#, json!(["manga://catalog/"])),
        (s("servers.NAME_S.prefix"), "always", json!("always")),
        // Lambda-only keys: accepted (and shown) on any server, as `function` is.
        (s("servers.NAME_S.lambda_event"), "agentcore", json!("agentcore")),
        (s("servers.NAME_S.agentcore_target"), "catalog-v2", json!("catalog-v2")),
        // Read from the working directory: the crate's root under `cargo test`.
        (
            s("servers.NAME_S.tools_file"),
            "tests/peers/servers/lambda_store_tools.json",
            json!("tests/peers/servers/lambda_store_tools.json"),
        ),
        (
            s("servers.NAME_S.tools"),
            r#"[{name = "order_status", description = "Status of an order", inputSchema = {type = "object"}}]"#,
            json!([{"name": "order_status", "description": "Status of an order", "inputSchema": {"type": "object"}}]),
        ),
        (
            s("servers.NAME_S.headers"),
            r#"{authorization = "Bearer 12345"}"#,
            json!({"authorization": "<redacted>"}),
        ),
        (s("servers.NAME_S.command"), "/usr/local/bin/catalog-mcp", json!("/usr/local/bin/catalog-mcp")),
        (s("servers.NAME_S.args"), r#"["--stdio", "--region=ap"]"#, json!(["--stdio", "--region=ap"])),
        (s("servers.NAME_S.env"), r#"{API_TOKEN = "s3cret"}"#, json!({"API_TOKEN": "<redacted>"})),
        (s("servers.NAME_S.reconnect_initial_ms"), "51", json!(51)),
        (s("servers.NAME_S.reconnect_max_ms"), "5001", json!(5001)),
        (s("servers.NAME_S.reconnect_give_up_ms"), "60001", json!(60001)),
        (s("servers.NAME_S.reconnect_slow_retry_ms"), "30001", json!(30001)),
        (s("defaults.reconnect_initial_ms"), "500", json!(500)),
        (s("defaults.reconnect_max_ms"), "20000", json!(20000)),
        (s("defaults.reconnect_give_up_ms"), "120000", json!(120000)),
        (s("defaults.reconnect_slow_retry_ms"), "90000", json!(90000)),
        (s("defaults.stdio_stop_grace_ms"), "750", json!(750)),
        (s("defaults.ws_ping_interval_ms"), "2500", json!(2500)),
        (s("defaults.ws_pong_timeout_ms"), "1500", json!(1500)),
        (s("stdio_commands.NAME_C.command"), "/opt/mcp/catalog", json!("/opt/mcp/catalog")),
        (s("stdio_commands.NAME_C.args"), r#"["serve", "--stdio"]"#, json!(["serve", "--stdio"])),
        (s("stdio_commands.NAME_C.env"), r#"{CATALOG_KEY = "k-123"}"#, json!({"CATALOG_KEY": "<redacted>"})),
        (s("servers.NAME_S.timeout_ms"), "333", json!(333)),
        (s("servers.NAME_S.deadline_ms"), "4444", json!(4444)),
        (s("servers.NAME_S.max_concurrency"), "5", json!(5)),
        (s("servers.NAME_S.retry"), "{max_retries_safe = 0}", json!({"max_retries_safe": 0})),
        (s("servers.NAME_S.breaker"), "{consecutive_failures = 2}", json!({"consecutive_failures": 2})),
        (s("tools.NAME_T.server"), SERVER, json!(SERVER)),
        (s("tools.NAME_T.stale_fallback"), "true", json!(true)),
        (s("tools.NAME_T.fallback_tool"), "order_status", json!("order_status")),
        (s("tools.NAME_T.cache_ttl_ms"), "250", json!(250)),
        (s("tools.NAME_T.max_result_bytes"), "100", json!(100)),
        (s("tools.NAME_T.rename"), "find_order", json!("find_order")),
        (s("prompts.greeting.rename"), "hello", json!("hello")),
        (s("prompts.greeting.description"), "Greets a shopper", json!("Greets a shopper")),
        (s("prompts.greeting.hide"), "false", json!(false)),
        (s("resources.hide"), r#"["manga://internal/"]"#, json!(["manga://internal/"])),
        (
            s("resources.descriptions"),
            r#"{"manga://catalog/top" = "The best sellers"}"#,
            json!({"manga://catalog/top": "The best sellers"}),
        ),
        (s("serve_plain_mcp"), "false", json!(false)),
        (s("endpoints.shop.select.servers"), r#"["cat7"]"#, json!(["cat7"])),
        (s("endpoints.shop.select.tools"), r#"["get_*"]"#, json!(["get_*"])),
        (s("endpoints.shop.select.exclude_tools"), r#"["get_secret"]"#, json!(["get_secret"])),
        (s("endpoints.shop.select.read_only"), "true", json!(true)),
        (s("endpoints.shop.select.destructive"), "false", json!(false)),
        (s("endpoints.shop.select.idempotent"), "true", json!(true)),
        (s("endpoints.shop.select.open_world"), "false", json!(false)),
        (s("endpoints.shop.select.resources"), r#"["manga://catalog/"]"#, json!(["manga://catalog/"])),
        (
            s("endpoints.shop.select.exclude_resources"),
            r#"["manga://catalog/x/"]"#,
            json!(["manga://catalog/x/"]),
        ),
        (s("endpoints.shop.select.prompts"), r#"["greet*"]"#, json!(["greet*"])),
        (s("endpoints.shop.select.exclude_prompts"), r#"["greet_admin"]"#, json!(["greet_admin"])),
        (s("endpoints.shop.tools.lookup.rename"), "find_it", json!("find_it")),
        (s("endpoints.shop.tools.lookup.description"), "Finds it", json!("Finds it")),
        (s("endpoints.shop.tools.lookup.hide"), "false", json!(false)),
        (s("endpoints.shop.prompts.greeting.description"), "Says hi", json!("Says hi")),
        (s("endpoints.shop.prompts.greeting.hide"), "false", json!(false)),
        (s("tools.NAME_T.description"), "Look an order up", json!("Look an order up")),
        (s("tools.NAME_T.hide"), "true", json!(true)),
        (s("tools.NAME_T.annotations"), "{readOnlyHint = true}", json!({"readOnlyHint": true})),
        (s("tools.NAME_T.fixed_arguments"), r#"{tenant = "acme"}"#, json!({"tenant": "acme"})),
        (s("tools.NAME_T.default_arguments"), "{limit = 5}", json!({"limit": 5})),
        (s("catalogue.tools_page_size"), "120", json!(120)),
        (s("catalogue.search.enabled"), "true", json!(true)),
        (s("catalogue.search.pinned"), r#"["order_status"]"#, json!(["order_status"])),
        (s("catalogue.search.max_results"), "7", json!(7)),
        (
            s("redis_url"),
            "rediss://default:s3cret@cache.example:6379",
            json!("rediss://default:<redacted>@cache.example:6379"),
        ),
        (s("redis_ca_file"), "/etc/ssl/private-ca.pem", json!("/etc/ssl/private-ca.pem")),
        (s("redis_cluster"), "true", json!(true)),
        (s("shared_breakers"), "true", json!(true)),
        (s("hide_unavailable_tools"), "true", json!(true)),
        (s("dynamodb_table"), "tools-2024", json!("tools-2024")),
        (s("dynamodb_endpoint"), "http://127.0.0.1:8000", json!("http://127.0.0.1:8000")),
        (s("registry.memory_ttl_secs"), "31", json!(31)),
        (s("registry.negative_ttl_secs"), "6", json!(6)),
        (s("registry.memory_max_entries"), "999", json!(999)),
        (s("registry.redis_prefix"), "tools:", json!("tools:")),
        (s("registry.redis_ttl_secs"), "61", json!(61)),
        (s("registry.redis_timeout_ms"), "8", json!(8)),
        (s("registry.dynamodb_timeout_ms"), "1001", json!(1001)),
        (s("registry.dynamodb_backoff_ms"), "4321", json!(4321)),
        (s("registry.scan_page_size"), "50", json!(50)),
        (s("registry.drift_interval_secs"), "120", json!(120)),
        (s("aws.region"), "ap-northeast-1", json!("ap-northeast-1")),
        (s("aws.endpoint_url"), "http://127.0.0.1:9001", json!("http://127.0.0.1:9001")),
        (s("cache.max_entries"), "123", json!(123)),
        (s("cache.stale_max_age_ms"), "60000", json!(60000)),
        (
            s("quotas.rules"),
            r#"[{name = "per-tool", match_tool = "price_*", rate = 5, window_secs = 60}]"#,
            json!([{
                "name": "per-tool", "scope": "tool", "match_tool": "price_*", "match_server": null,
                "subjects": [], "rate": 5, "window_secs": 60, "burst": null, "max_concurrent": 0
            }]),
        ),
        (
            s("hooks"),
            r#"[{name = "pii", phase = "after", match_tools = ["manga_*"], builtin = "redact", detect = ["email", "card"], patterns = ["ORD-[0-9]{8}"]}]"#,
            json!([{
                "name": "pii", "phase": "after", "match_tools": ["manga_*"], "match_servers": [],
                "builtin": "redact", "detect": ["email", "card"], "patterns": ["ORD-[0-9]{8}"],
                "server": null, "tool": null, "timeout_ms": 1000, "failure": "closed"
            }]),
        ),
        (
            s("approvals.rules"),
            r#"[{name = "big-cart", tools = ["add_to_cart"], argument = "/quantity", op = ">", value = 5, approver = "user"}]"#,
            json!([{
                "name": "big-cart", "tools": ["add_to_cart"], "servers": [], "destructive": null,
                "read_only": null, "argument": "/quantity", "op": ">", "value": 5, "callers": [],
                "groups": [], "approver": "user"
            }]),
        ),
        (s("approvals.expiry_secs"), "900", json!(900)),
        (s("approvals.max_pending"), "64", json!(64)),
        (s("approvals.max_pending_per_caller"), "4", json!(4)),
        (s("approvals.public_url"), "https://shop-gateway.example", json!("https://shop-gateway.example")),
        (s("approvals.elicitation"), "prefer_form", json!("prefer_form")),
        (s("approvals.user_link_in_answer"), "true", json!(true)),
        (s("approvals.history"), "50", json!(50)),
        (
            s("approvals.bridge"),
            // The configured server of this test (SERVER).
            r#"{server = "cat7", tool = "ask_operator", timeout_ms = 5000}"#,
            json!({"server": SERVER, "tool": "ask_operator", "timeout_ms": 5000}),
        ),
        (s("approvals.state_dir"), "/tmp/mcp-gateway-approvals", json!("/tmp/mcp-gateway-approvals")),
        (s("quotas.redis_timeout_ms"), "75", json!(75)),
        (s("quotas.redis_retry_ms"), "1500", json!(1500)),
        (s("quotas.lease_ms"), "90000", json!(90000)),
        (s("quotas.local_max_keys"), "5000", json!(5000)),
        (s("quotas.fleet_batch_ms"), "25", json!(25)),
        (s("audit.sink"), "stdout", json!("stdout")),
        (s("audit.file"), "/var/log/mcp-gateway/audit.jsonl", json!("/var/log/mcp-gateway/audit.jsonl")),
        (s("audit.queue_bytes"), "65536", json!(65536)),
        (s("defaults.breaker.probe_interval_ms"), "250", json!(250)),
        (s("catalogue.min_refresh_interval_ms"), "5000", json!(5000)),
        (s("catalogue.list_changed_min_interval_ms"), "750", json!(750)),
        (s("catalogue.pin_tool_definitions"), "true", json!(true)),
        (s("catalogue.pin_file"), "/var/lib/mcp-gateway/pins.json", json!("/var/lib/mcp-gateway/pins.json")),
        (s("catalogue.max_tool_label_values"), "500", json!(500)),
        (s("catalogue.max_total_tools"), "50000", json!(50000)),
        (s("inbound.max_batch_items"), "16", json!(16)),
        (s("inbound.max_batch_answer_bytes"), "1000000", json!(1000000)),
        (s("inbound.max_sessions"), "32", json!(32)),
        (s("inbound.max_session_bytes"), "2048", json!(2048)),
        (s("inbound.max_client_info_chars"), "64", json!(64)),
        (s("inbound.log_max_field_bytes"), "300", json!(300)),
        (s("inbound.log_queue_bytes"), "1048576", json!(1048576)),
        (s("inbound.header_read_timeout_ms"), "2500", json!(2500)),
        (s("inbound.body_read_timeout_ms"), "7000", json!(7000)),
        (s("inbound.idle_timeout_ms"), "15000", json!(15000)),
        (s("inbound.max_connections"), "100", json!(100)),
        (s("inbound.max_listen_streams"), "12", json!(12)),
        (s("inbound.max_resource_subscriptions_per_caller"), "8", json!(8)),
        (s("inbound.max_resource_subscriptions"), "500", json!(500)),
        (s("inbound.max_held_exchanges"), "9", json!(9)),
        (s("inbound.held_exchange_ttl_ms"), "45000", json!(45000)),
        (s("tasks.max_tasks"), "64", json!(64)),
        (s("tasks.max_ttl_ms"), "600000", json!(600000)),
        (s("tasks.result_timeout_ms"), "90000", json!(90000)),
        // Header mode on the loopback listen above: valid with every other auth key set.
        (s("auth.mode"), "header", json!("header")),
        (s("auth.issuer"), "https://auth.example", json!("https://auth.example")),
        (s("auth.audience"), "mcp-gateway", json!(["mcp-gateway"])),
        (s("auth.jwks_url"), "https://auth.example/jwks", json!("https://auth.example/jwks")),
        (s("auth.jwks_file"), "/etc/jwks.json", json!("/etc/jwks.json")),
        (s("auth.jwks_refresh_secs"), "600", json!(600)),
        (s("auth.jwks_min_refetch_secs"), "30", json!(30)),
        (s("auth.jwks_max_bytes"), "65536", json!(65536)),
        (s("auth.jwks_timeout_ms"), "2000", json!(2000)),
        (s("auth.leeway_secs"), "30", json!(30)),
        (s("auth.algorithms"), r#"["ES256"]"#, json!(["ES256"])),
        (s("auth.scope_claim"), "scp", json!("scp")),
        (s("auth.groups_claim"), "roles", json!("roles")),
        (s("auth.token_cache_entries"), "500", json!(500)),
        (s("auth.token_cache_secs"), "60", json!(60)),
        (s("auth.subject_header"), "x-user", json!("x-user")),
        (s("auth.groups_header"), "x-groups", json!("x-groups")),
        (s("auth.scopes_header"), "x-scopes", json!("x-scopes")),
        (s("auth.trust_identity_header"), "true", json!(true)),
        (s("auth.resource"), "https://gw.example/mcp", json!("https://gw.example/mcp")),
        (s("auth.scopes_supported"), r#"["store:browse"]"#, json!(["store:browse"])),
        (s("policy.file"), "config/store-policy.cedar", json!("config/store-policy.cedar")),
        (s("policy.reload_secs"), "7", json!(7)),
        (s("policy.list_cache_entries"), "64", json!(64)),
        (s("admin.token_file"), "/run/secrets/admin-token", json!("/run/secrets/admin-token")),
        // The token itself is never printed.
        (s("admin.token"), "0123456789abcdef-admin", json!("<redacted>")),
        (s("admin.listen"), "127.0.0.1:9465", json!("127.0.0.1:9465")),
        (s("admin.recent_calls"), "50", json!(50)),
        (
            s("registry.upstream_urls"),
            r#"{ allow = ["https://*.tools.example"], resolve = false }"#,
            json!({"allow": ["https://*.tools.example"], "resolve": false}),
        ),
        (s("registry.remote_misses"), "{ per_sec = 7, burst = 9 }", json!({"per_sec": 7, "burst": 9})),
        (
            s("registry.upstream_urls.allow"),
            r#"["https://*.tools.example"]"#,
            json!(["https://*.tools.example"]),
        ),
        (s("registry.upstream_urls.resolve"), "false", json!(false)),
        (s("registry.remote_misses.per_sec"), "7", json!(7)),
        (s("registry.remote_misses.burst"), "9", json!(9)),
        (
            s("servers.NAME_S.spec"),
            "tests/peers/openapi/store_openapi.json",
            json!("tests/peers/openapi/store_openapi.json"),
        ),
        (s("servers.NAME_S.base_url"), "http://store:8000", json!("http://store:8000")),
        (s("servers.NAME_S.include"), r#"["tag:catalogue"]"#, json!(["tag:catalogue"])),
        (s("servers.NAME_S.exclude"), r#"["path:DELETE /**"]"#, json!(["path:DELETE /**"])),
        (
            s("servers.NAME_S.security"),
            r#"{ApiKeyAuth = {env = "CAT7_KEY"}}"#,
            json!({"ApiKeyAuth": {"env": "CAT7_KEY"}}),
        ),
        (s("servers.NAME_S.max_spec_bytes"), "1048576", json!(1048576)),
        (s("servers.NAME_S.max_operations"), "500", json!(500)),
        (s("servers.NAME_S.max_schema_depth"), "12", json!(12)),
        (s("servers.NAME_S.max_request_bytes"), "262144", json!(262144)),
        (
            s("servers.NAME_S.auth"),
            r#"{kind = "client_credentials", token_url = "https://auth.example/token", client_id = "7", client_secret_env = "CAT7_SECRET", scopes = ["catalog:read"], refresh_before_secs = 120}"#,
            json!({"kind": "client_credentials", "client_id": "7", "client_secret_env": "CAT7_SECRET", "scopes": ["catalog:read"], "refresh_before_secs": 120}),
        ),
    ];
    raw.into_iter().map(|(k, v, e)| (k, (v, e))).collect()
}

/// The keys of the configuration table (docs/configuration.md), expanded: `a.b` / `c` is `a.b` and `a.c`,
/// `x.{a,b}` is `x.a` and `x.b`, and `x.*` is every key under `x` of the effective default
/// configuration (so a new field under a documented wildcard needs a case here too).
fn documented_keys(defaults: &Value) -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("docs/configuration.md")).unwrap();
    let mut rows = readme.lines().skip_while(|l| !l.starts_with("| key | default | meaning |")).skip(2);
    let mut keys = Vec::new();
    for row in rows.by_ref().take_while(|l| l.starts_with('|')) {
        let cell = row.split('|').nth(1).unwrap();
        let segments: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
        assert!(!segments.is_empty(), "docs/configuration.md: config row without a key: {row}");
        let parent = segments[0].rsplit_once('.').map(|(p, _)| p.to_string());
        for (i, segment) in segments.iter().enumerate() {
            let full = match (&parent, i) {
                (Some(parent), i) if i > 0 && !segment.contains('.') => format!("{parent}.{segment}"),
                _ => segment.to_string(),
            };
            let full = full
                .replace("servers.NAME", &format!("servers.{SERVER}"))
                .replace("tools.NAME", &format!("tools.{TOOL}"))
                .replace("prompts.NAME", "prompts.greeting")
                .replace("endpoints.NAME", "endpoints.shop")
                .replace(".tools.TOOL", &format!(".tools.{TOOL}"))
                .replace(".prompts.PROMPT", ".prompts.greeting")
                .replace("stdio_commands.NAME", &format!("stdio_commands.{COMMAND}"));
            if let Some((prefix, rest)) = full.split_once('{') {
                let inner = rest.trim_end_matches('}');
                keys.extend(inner.split(',').map(|k| format!("{prefix}{k}")));
            } else if let Some(prefix) = full.strip_suffix(".*") {
                let table = lookup(defaults, prefix).unwrap_or_else(|| panic!("{prefix}.* is not a table"));
                let fields = table.as_object().unwrap_or_else(|| panic!("{prefix}.* is not a table"));
                keys.extend(fields.keys().map(|k| format!("{prefix}.{k}")));
            } else {
                keys.push(full);
            }
        }
    }
    assert!(keys.len() > 40, "the docs/configuration.md table was not found or is nearly empty: {keys:?}");
    keys
}

fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, k| v.get(k))
}

fn env_name(key: &str) -> String {
    format!("MCP_GATEWAY_{}", key.replace('.', "__").to_ascii_uppercase())
}

fn check_config(env: &[(String, String)]) -> Value {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let output = common::check_config(&["--json"], &pairs);
    assert!(
        output.status.success(),
        "check-config failed with {env:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `expected` is found in `actual` (objects: every expected key, recursively).
fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            e.iter().all(|(k, v)| a.get(k).is_some_and(|a| contains(a, v)))
        }
        (Value::Number(a), Value::Number(e)) => a.as_f64() == e.as_f64(),
        _ => actual == expected,
    }
}

#[test]
fn every_documented_key_can_be_set_through_the_environment() {
    let defaults = check_config(&[]);
    let cases = cases();
    let documented = documented_keys(&defaults);
    let missing: Vec<&String> = documented.iter().filter(|k| !cases.contains_key(*k)).collect();
    assert!(missing.is_empty(), "documented keys this test does not set (add a case): {missing:?}");

    // The command line's own variables ride along: a config file through MCP_GATEWAY_CONFIG
    // (its key is overridden by the environment, its other key kept) and a log format.
    let file = TempFile::with(
        "config-env.toml",
        "refresh_interval_secs = 5\n[registry]\nredis_prefix = \"from-file:\"\n",
    );
    let mut env: Vec<(String, String)> = vec![
        ("MCP_GATEWAY_CONFIG".into(), file.arg().to_string()),
        ("MCP_GATEWAY_LOG_FORMAT".into(), "text".into()),
        // The secrets the cases name: check-config reads them as serve does.
        ("CAT7_SECRET".into(), "client-secret".into()),
        ("CAT7_KEY".into(), "api-key".into()),
    ];
    env.extend(documented.iter().map(|k| (env_name(k), cases[k].0.to_string())));
    let effective = check_config(&env);
    let file_prefix = check_config(&env[..1])["registry"]["redis_prefix"].clone();
    drop(file);

    for key in &documented {
        let expected = &cases[key].1;
        let actual = lookup(&effective, key).unwrap_or_else(|| panic!("{key} missing from {effective:#}"));
        assert!(
            contains(actual, expected),
            "{key} (set by {}): expected {expected}, got {actual}",
            env_name(key)
        );
        if let Some(default) = lookup(&defaults, key) {
            assert!(
                !contains(default, expected),
                "{key}: the test value equals the default, so proves nothing"
            );
        }
    }
    assert_eq!(effective["refresh_interval_secs"], json!(77), "environment wins over the file");
    assert_eq!(file_prefix, json!("from-file:"), "MCP_GATEWAY_CONFIG names the file that is read");
}

#[test]
fn numeric_lambda_qualifier_is_a_string() {
    let env = [
        ("MCP_GATEWAY_SERVERS__FN__TRANSPORT".to_string(), "lambda".to_string()),
        ("MCP_GATEWAY_SERVERS__FN__FUNCTION".to_string(), "checkout".to_string()),
        ("MCP_GATEWAY_SERVERS__FN__QUALIFIER".to_string(), "7".to_string()),
    ];
    assert_eq!(check_config(&env)["servers"]["fn"]["qualifier"], json!("7"));
}

#[test]
fn serve_reads_its_config_and_log_format_from_the_environment() {
    let file = TempFile::with("config-env-serve.toml", "listen = \"127.0.0.1:0\"\nlog_level = \"info\"\n");
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--demo"])
        .env("MCP_GATEWAY_CONFIG", file.path())
        .env("MCP_GATEWAY_LOG_FORMAT", "text")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    let mut gateway = Proc::spawn("mcp-gateway", command);
    let line = gateway.wait_line("listening on http://127.0.0.1:", Duration::from_secs(30));
    drop(file);
    // Port 0 came from the file; text format from the environment (JSON lines start with `{`).
    assert!(!line.contains("127.0.0.1:8080"), "{line}");
    assert!(!line.trim_start().starts_with('{'), "expected a text log line: {line}");
    assert!(gateway.terminate().success(), "{}", gateway.output());
}
