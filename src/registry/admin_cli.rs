//! The `mcp-gateway registry …` commands: write and read the DynamoDB registry, and tell
//! running gateways about changes (Redis entry updated, invalidation published) so they
//! see them within a second rather than after a TTL.

use std::{io::Write, path::Path, time::Duration};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::tool_control::ToolOverrides;

use super::{
    dynamodb::{DEFAULT_TABLE, DynamoStore},
    entry::{RegistryEntry, ServerRef},
    redis_tier::RedisStore,
};
use crate::config::Config;

/// How many times a registry command tries one DynamoDB request (the AWS CLI's default).
const COMMAND_ATTEMPTS: u32 = 3;

/// The stores a registry command talks to.
pub struct RegistryClient {
    pub dynamo: DynamoStore,
    redis: Option<RedisStore>,
}

impl RegistryClient {
    pub async fn from_config(config: &Config, table: Option<&str>) -> anyhow::Result<Self> {
        let table = table.or(config.dynamodb_table.as_deref()).unwrap_or(DEFAULT_TABLE);
        let dynamo = DynamoStore::connect(
            table,
            config.dynamodb_endpoint.as_deref(),
            config.aws.region.as_deref(),
            Duration::from_millis(config.registry.dynamodb_timeout_ms.max(5_000)),
            COMMAND_ATTEMPTS,
        )
        .await;
        let redis = crate::redis_link::RedisLink::from_config(config)?.map(|link| {
            RedisStore::new(
                link,
                &config.registry.redis_prefix,
                Duration::from_secs(config.registry.redis_ttl_secs),
                Duration::from_millis(500),
            )
        });
        Ok(Self { dynamo, redis })
    }

    /// Tells running gateways (best effort: DynamoDB is the truth, refreshes converge anyway).
    async fn announce(&self, name: &str, entry: Option<&RegistryEntry>) {
        let Some(redis) = &self.redis else { return };
        let written = match entry {
            Some(entry) if entry.is_live() => redis.set(entry).await,
            _ => redis.delete(name).await,
        };
        if let Err(e) = written.and(redis.publish_invalidation(name).await) {
            eprintln!("warning: Redis not updated ({e}); gateways will see the change at their next refresh");
        }
    }

    pub async fn put(&self, entry: RegistryEntry) -> anyhow::Result<RegistryEntry> {
        let stored = self.dynamo.put(entry).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        self.announce(&stored.tool_name, Some(&stored)).await;
        Ok(stored)
    }

    pub async fn delete(&self, name: &str) -> anyhow::Result<bool> {
        let existed = self.dynamo.delete(name).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        self.announce(name, None).await;
        Ok(existed)
    }
}

/// Reads a tool definition file for `put`: the tool (name, description, inputSchema,
/// annotations) plus `server` ({name, transport, url | function, qualifier | command}), and
/// optionally `status`, `healthy` and `overrides` (catalogue control, checked here as far as
/// the definition allows).
pub fn entry_from_file(path: &Path) -> anyhow::Result<RegistryEntry> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let server: ServerRef =
        serde_json::from_value(doc.get("server").cloned().context("the file needs a `server` object")?)
            .context("`server` needs name and transport")?;
    let name = doc.get("name").and_then(Value::as_str).context("the file needs a tool `name`")?.to_string();
    let status = doc.get("status").and_then(Value::as_str).unwrap_or("active").to_string();
    let healthy = doc.get("healthy").and_then(Value::as_bool).unwrap_or(true);
    let overrides: ToolOverrides = match doc.get("overrides") {
        Some(value) => serde_json::from_value(value.clone()).context("`overrides`")?,
        None => ToolOverrides::default(),
    };
    if let Some(map) = doc.as_object_mut() {
        for key in ["name", "server", "status", "healthy", "overrides"] {
            map.remove(key);
        }
    }
    if let Err(problem) = overrides.apply(&name, &doc) {
        bail!("overrides of {name}: {problem}");
    }
    let mut entry = new_entry(name, doc, server, status, healthy)?;
    entry.overrides = overrides;
    Ok(entry)
}

fn new_entry(
    name: String,
    definition: Value,
    server: ServerRef,
    status: String,
    healthy: bool,
) -> anyhow::Result<RegistryEntry> {
    if !matches!(server.transport.as_str(), "http" | "lambda" | "websocket" | "sse" | "stdio") {
        bail!("transport must be http, lambda, websocket, sse or stdio");
    }
    if matches!(server.transport.as_str(), "http" | "websocket" | "sse") && server.url.is_none() {
        bail!("an {} server needs a url", server.transport);
    }
    if server.transport == "stdio" && server.command.is_none() {
        bail!("a stdio server needs a command: the name of one of the gateway's stdio_commands");
    }
    if server.transport == "lambda" && server.function.is_none() {
        bail!("a lambda server needs a function");
    }
    if crate::config::LambdaEvent::parse(server.lambda_event.as_deref()).is_none() {
        bail!("lambda_event must be jsonrpc or agentcore");
    }
    if server.lambda_event.as_deref() == Some("agentcore") {
        if server.transport != "lambda" {
            bail!("lambda_event = agentcore applies to a lambda server");
        }
        // A registry tool of an AgentCore target is all the gateway knows of it: check it
        // as a declared one.
        let mut tool = definition.clone();
        if let Some(map) = tool.as_object_mut() {
            map.insert("name".into(), serde_json::json!(name));
        }
        crate::config::check_definition(&tool)
            .map_err(|reason| anyhow::anyhow!("tool {name:?}: {reason}"))?;
    }
    if !matches!(status.as_str(), "active" | "inactive") {
        bail!("status must be active or inactive");
    }
    Ok(RegistryEntry {
        tool_name: name,
        definition,
        server,
        status,
        healthy,
        version: 0,
        updated_at: String::new(),
        overrides: ToolOverrides::default(),
    })
}

/// `registry import`: every tool of a `{"tools": [...]}` file onto one server, with a
/// progress line.
pub async fn import(client: &RegistryClient, path: &Path, server: ServerRef) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let tools = doc.get("tools").and_then(Value::as_array).context("the file needs a `tools` array")?;
    let total = tools.len();
    let started = std::time::Instant::now();
    for (i, tool) in tools.iter().enumerate() {
        let mut definition = tool.clone();
        let name = definition.get("name").and_then(Value::as_str).context("a tool has no name")?.to_string();
        if let Some(map) = definition.as_object_mut() {
            map.remove("name");
        }
        client.put(new_entry(name, definition, server.clone(), "active".into(), true)?).await?;
        if (i + 1) % 25 == 0 || i + 1 == total {
            let mut err = std::io::stderr().lock();
            let _ =
                writeln!(err, "imported {}/{total} tools ({:.1} s)", i + 1, started.elapsed().as_secs_f64());
        }
    }
    Ok(total)
}

/// One line per entry for `registry list`.
pub fn summary(entry: &RegistryEntry) -> Value {
    let mut line = json!({
        "name": entry.tool_name,
        "server": entry.server.name,
        "transport": entry.server.transport,
        "status": entry.status,
        "healthy": entry.healthy,
        "version": entry.version,
        "updated_at": entry.updated_at,
        "schema_hash": entry.schema_hash(),
    });
    if !entry.overrides.is_empty() {
        line["overrides"] = json!(entry.overrides);
    }
    line
}

/// What `registry approve` names: a tool or a prompt (or neither, with `--all`), or the
/// target origin of the OpenAPI server given with it (`origin`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Named<'a> {
    pub tool: Option<&'a str>,
    pub prompt: Option<&'a str>,
    pub origin: bool,
}

/// `registry approve`: asks a running gateway (`base`, e.g. `http://127.0.0.1:8080`) to approve
/// pending definition changes, with the admin bearer `token` when one is configured; returns
/// its answer, or fails with it.
pub async fn approve(
    base: &str,
    token: Option<&str>,
    named: Named<'_>,
    server: Option<&str>,
    all: bool,
) -> anyhow::Result<Value> {
    let url = format!("{}/admin/registry/approve", base.trim_end_matches('/'));
    let mut body = json!({});
    if let Some(tool) = named.tool {
        body["tool"] = json!(tool);
    }
    if let Some(prompt) = named.prompt {
        body["prompt"] = json!(prompt);
    }
    match (named.origin, server) {
        (true, Some(server)) => body["origin"] = json!(server),
        (false, Some(server)) => body["server"] = json!(server),
        (_, None) => {}
    }
    if all {
        body["all"] = json!(true);
    }
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let mut request = client.post(&url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let answer: Value =
        response.json().await.with_context(|| format!("{url} answered HTTP {status} without JSON"))?;
    if !status.is_success() {
        bail!("{url} answered HTTP {status}: {answer}");
    }
    Ok(answer)
}
