//! `tools export`: the catalogue in a model API's tool shape, from a running gateway (`--url`,
//! read over its MCP endpoint with a small HTTP client) or from a gateway built from the
//! configuration without serving.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use mcp_gateway::{
    config::Config,
    gateway::{Gateway, refresh::Refresher},
    server,
};

/// Where `tools export` reads the catalogue: a running gateway (`url`, with a token), or one
/// built from `config` (as the endpoint `endpoint` serves it, when named).
pub struct Source {
    pub url: Option<String>,
    pub token_file: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub endpoint: Option<String>,
}

/// `tools export`: the catalogue of a running gateway (`--url`) or of one built from the
/// configuration, converted by the same code as `GET /tools`.
pub async fn run(format: &str, strict: bool, hide_unavailable: bool, source: Source) -> anyhow::Result<()> {
    let Source { url, token_file, config, endpoint } = source;
    use mcp_gateway::export::{self, Format, Options};
    use std::io::Write;
    let Some(format) = Format::parse(format) else {
        bail!("unknown format {format:?}; one of {}", Format::names().join(", "));
    };
    if strict && !matches!(format, Format::OpenAi | Format::OpenAiResponses) {
        bail!("--strict applies to the openai and openai-responses formats only");
    }
    let options = Options { strict };
    let body = match url {
        Some(url) => {
            let token = match token_file {
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("reading the token file {}", path.display()))?
                        .trim()
                        .to_string(),
                ),
                None => None,
            };
            let (mut tools, degraded) = remote_tools(&url, token.as_deref()).await?;
            // A model reads the export: never a tool for an MCP App only (any MCP endpoint may
            // list one; a gateway's own `tools/list` never does to a caller without Apps).
            tools.retain(|t| !mcp_gateway::protocol::extensions::app_only(t));
            let unavailable: Vec<&str> = degraded
                .as_ref()
                .and_then(|d| d.get("servers"))
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter(|s| s.get("status").and_then(serde_json::Value::as_str) == Some("unavailable"))
                .flat_map(|s| s.get("tools").and_then(serde_json::Value::as_array).into_iter().flatten())
                .filter_map(serde_json::Value::as_str)
                .collect();
            let (kept, left_out): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
                tools.into_iter().partition(|t| {
                    !hide_unavailable
                        || !t
                            .get("name")
                            .and_then(serde_json::Value::as_str)
                            .is_some_and(|n| unavailable.contains(&n))
                });
            let mut body = export::export(format, &kept, options);
            body["gateway"]["left_out"] = left_out.iter().map(|t| t["name"].clone()).collect();
            if let Some(degraded) = degraded {
                body["gateway"]["capabilities"] = degraded;
            }
            body
        }
        None => {
            let config = Config::load(config.as_deref(), std::env::vars())?;
            config.validate()?;
            let hide = hide_unavailable || config.hide_unavailable_tools;
            let gateway = Gateway::new(config).await?;
            let endpoint = match endpoint {
                Some(name) => match gateway.settings().endpoints().known(&name) {
                    Some(endpoint) => Some(endpoint),
                    None => bail!("no endpoint named {name:?} is configured ([endpoints.NAME])"),
                },
                None => None,
            };
            Refresher::new(gateway.clone()).refresh_all().await;
            // Under a tool policy, the export shows what an anonymous caller may call (through
            // the endpoint, when one is named).
            let caller = mcp_gateway::identity::Caller::anonymous(None).at_endpoint(endpoint);
            let view = gateway.tool_view(&caller);
            let body = server::catalogue::export_catalogue(&gateway, view.as_deref(), format, options, hide);
            gateway.close_connections().await;
            body
        }
    };
    let _ = writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}

/// Every page of `tools/list` from an MCP endpoint, and its degradation summary if any.
async fn remote_tools(
    url: &str,
    token: Option<&str>,
) -> anyhow::Result<(Vec<serde_json::Value>, Option<serde_json::Value>)> {
    use mcp_gateway::gateway::capabilities::META_KEY;
    // A gateway's base URL means its MCP endpoint.
    let url = match url.split_once("://") {
        Some((_, rest)) if !rest.trim_end_matches('/').contains('/') => {
            format!("{}/mcp", url.trim_end_matches('/'))
        }
        _ => url.to_string(),
    };
    let url = url.as_str();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let mut tools = Vec::new();
    let mut degraded = None;
    let mut cursor: Option<String> = None;
    for page in 0..100 {
        let params = match &cursor {
            Some(c) => serde_json::json!({"cursor": c}),
            None => serde_json::json!({}),
        };
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params});
        let mut post = client.post(url).header("accept", "application/json, text/event-stream");
        if let Some(token) = token {
            post = post.bearer_auth(token);
        }
        let response = post.json(&request).send().await.with_context(|| format!("POST {url}"))?;
        let status = response.status();
        let answer: serde_json::Value =
            response.json().await.with_context(|| format!("{url} answered HTTP {status} without JSON"))?;
        if let Some(error) = answer.get("error") {
            bail!("{url} refused tools/list: {error}");
        }
        let result = answer.get("result").with_context(|| format!("{url}: no result in {answer}"))?;
        tools.extend(result.get("tools").and_then(serde_json::Value::as_array).cloned().unwrap_or_default());
        if degraded.is_none() {
            degraded = result.get("_meta").and_then(|m| m.get(META_KEY)).cloned();
        }
        match result.get("nextCursor").and_then(serde_json::Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => return Ok((tools, degraded)),
        }
    }
    bail!("{url}: tools/list has more than 100 pages")
}
