//! The `mcp-gateway` binary: a thin CLI over the library.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use mcp_gateway::{
    config::{Config, ServerConfig, TransportKind},
    demo,
    gateway::{Gateway, refresh::Refresher},
    redact, server, telemetry,
};
use tokio::net::TcpListener;

/// mimalloc: the gateway allocates many small, short-lived buffers per call; a thread-caching
/// allocator makes that measurably cheaper than glibc malloc (see bench/results.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "mcp-gateway",
    version,
    about = "A sidecar MCP tool gateway: one localhost endpoint for the tools of many MCP servers (streamable HTTP, AWS Lambda)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    ///
    /// Configuration comes from --config (TOML), then MCP_GATEWAY_* environment variables
    /// (`__` separates nesting levels, e.g. MCP_GATEWAY_SERVERS__CATALOG__URL), then flags.
    Serve {
        /// TOML configuration file (see config/example.toml).
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Address to listen on [default: 127.0.0.1:8080].
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Allow a non-loopback --listen address (the gateway has no authentication).
        #[arg(long)]
        allow_non_loopback: bool,
        /// Start the store's demo MCP server on a loopback port and register it as `demo`.
        #[arg(long)]
        demo: bool,
        /// Log format on stdout.
        #[arg(long, value_enum, default_value = "json", env = "MCP_GATEWAY_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Run the store's demo MCP server on its own.
    DemoServer {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: SocketAddr,
        /// Serve it as a Lambda function behind the Lambda Invoke REST API
        /// (POST /2015-03-31/functions/{name}/invocations) instead of streamable HTTP.
        #[arg(long)]
        lambda_api: bool,
        /// Answer every tools/call after this many milliseconds (to demonstrate deadlines).
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// Behave as a session-era server (initialize required, Mcp-Session-Id checked).
        #[arg(long)]
        sessions: bool,
        /// Also offer this many generated read-only tools `bulk_00000`, `bulk_00001`, … (a large
        /// catalogue, for scale tests and benchmarks); each echoes its `n` argument.
        #[arg(long, default_value_t = 0)]
        extra_tools: usize,
    },
    /// Manage the DynamoDB tool registry (table from --table, dynamodb_table, or
    /// mcp-tool-registry; endpoint, region and Redis from the configuration/environment).
    Registry {
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Table name (overrides `dynamodb_table`).
        #[arg(long)]
        table: Option<String>,
        #[command(subcommand)]
        action: RegistryAction,
    },
    /// Probe a running gateway for a container health check: GET URL (2 s timeout), exit 0 on
    /// 2xx, else 1 with one line why. No shell or curl needed.
    ///
    /// The default is liveness (/healthz on the configured listen port): an upstream outage
    /// must not make the orchestrator restart the sidecar. Use --url …/readyz for readiness.
    Healthcheck {
        /// What to probe [default: http://127.0.0.1:<listen port>/healthz].
        #[arg(long)]
        url: Option<String>,
        /// Configuration to read the listen address from (when --url is not given).
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
    },
    /// The tool catalogue for model APIs.
    Tools {
        #[command(subcommand)]
        action: ToolsAction,
    },
    /// Load and validate the configuration, print it as the gateway sees it, and exit.
    CheckConfig {
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Print the configuration as JSON (same keys as the TOML file).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ToolsAction {
    /// Print the catalogue in a model API's tool shape (JSON, as `GET /tools?format=F`).
    ///
    /// With --url, from a running gateway (its MCP endpoint's `tools/list`); otherwise built
    /// from the configuration and registry as `serve` would (one refresh of every server and
    /// registry tier), without serving.
    Export {
        /// mcp | bedrock | anthropic | openai | openai-responses | gemini
        #[arg(long, default_value = "mcp")]
        format: String,
        /// OpenAI strict mode (openai, openai-responses).
        #[arg(long)]
        strict: bool,
        /// Leave out the tools of unavailable servers (default: `hide_unavailable_tools`).
        #[arg(long)]
        hide_unavailable: bool,
        /// MCP endpoint of a running gateway, e.g. http://127.0.0.1:8080/mcp (a bare
        /// http://host:port means its /mcp).
        #[arg(long, conflicts_with = "config")]
        url: Option<String>,
        /// With --url: a file holding the bearer token to send (a gateway with `[auth] mode =
        /// "jwt"` lists only what that caller may call).
        #[arg(long, requires = "url")]
        token_file: Option<PathBuf>,
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RegistryAction {
    /// Create the table (on-demand billing); succeeds if it exists.
    CreateTable,
    /// Write one tool from a JSON file: {name, description, inputSchema, annotations,
    /// server: {name, transport, url | function, qualifier}, status?, healthy?}.
    Put { file: PathBuf },
    /// Print one tool as stored.
    Get { name: String },
    /// List the active tools, one JSON line each.
    List,
    /// Delete a tool.
    Delete { name: String },
    /// Approve pending tool definition changes on a running gateway
    /// (`catalogue.pin_tool_definitions`): POST /admin/registry/approve. Needs no DynamoDB.
    Approve {
        /// The tool: its name on its server, or its namespaced `server__tool` name.
        #[arg(required_unless_present = "all")]
        tool: Option<String>,
        /// Approve every pending change.
        #[arg(long, conflicts_with = "tool")]
        all: bool,
        /// Only the change of this server (when several servers changed a tool of that name).
        #[arg(long)]
        server: Option<String>,
        /// The gateway's base URL [default: http://<admin.listen, else listen, from the
        /// configuration>]. The admin token (admin.token / admin.token_file) comes from the
        /// same configuration and environment.
        #[arg(long)]
        url: Option<String>,
    },
    /// Import every tool of a {"tools": [...]} file (e.g. config/manga-tools.json) onto one server.
    Import {
        file: PathBuf,
        /// The server the tools live on.
        #[arg(long)]
        server: String,
        /// http | lambda | websocket | sse | stdio
        #[arg(long, default_value = "http")]
        transport: String,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        function: Option<String>,
        #[arg(long)]
        qualifier: Option<String>,
        /// stdio: the name of one of the gateway's `stdio_commands`.
        #[arg(long)]
        command: Option<String>,
    },
}

async fn registry_command(
    config: Option<PathBuf>,
    table: Option<String>,
    action: RegistryAction,
) -> anyhow::Result<()> {
    use mcp_gateway::registry::{admin_cli, entry::ServerRef};
    use std::io::Write;
    let config = Config::load(config.as_deref(), std::env::vars())?;
    if let RegistryAction::Approve { tool, all, server, url } = action {
        let base = url.unwrap_or_else(|| {
            let listen = config.admin.listen.unwrap_or(config.listen);
            server::probe::default_url(listen).trim_end_matches("/healthz").to_string()
        });
        let token = config.admin.load_token()?;
        let answer =
            admin_cli::approve(&base, token.as_deref(), tool.as_deref(), server.as_deref(), all).await?;
        let _ = writeln!(std::io::stdout().lock(), "{answer}");
        return Ok(());
    }
    let client = admin_cli::RegistryClient::from_config(&config, table.as_deref()).await?;
    let mut out = std::io::stdout().lock();
    let table = client.dynamo.table().to_string();
    let fail = |e: mcp_gateway::registry::TierError| anyhow::anyhow!("{e}");
    match action {
        RegistryAction::CreateTable => {
            let created = client.dynamo.create_table().await.map_err(fail)?;
            let _ = writeln!(out, "table {table}: {}", if created { "created" } else { "already exists" });
        }
        RegistryAction::Put { file } => {
            let stored = client.put(admin_cli::entry_from_file(&file)?).await?;
            let _ = writeln!(out, "{}", admin_cli::summary(&stored));
        }
        RegistryAction::Get { name } => match client.dynamo.get(&name).await.map_err(fail)? {
            Some(entry) => {
                let _ = writeln!(out, "{}", serde_json::to_string_pretty(&entry)?);
            }
            None => bail!("no tool named {name:?} in {table}"),
        },
        RegistryAction::List => {
            for entry in client.dynamo.scan_active(|_| {}).await.map_err(fail)? {
                let _ = writeln!(out, "{}", admin_cli::summary(&entry));
            }
        }
        RegistryAction::Delete { name } => {
            if !client.delete(&name).await? {
                bail!("no tool named {name:?} in {table}");
            }
            let _ = writeln!(out, "deleted {name}");
        }
        RegistryAction::Approve { .. } => unreachable!("answered above, without DynamoDB"),
        RegistryAction::Import { file, server, transport, url, function, qualifier, command } => {
            let server = ServerRef {
                name: server,
                transport,
                url,
                function,
                qualifier,
                command,
                ..ServerRef::default()
            };
            let count = admin_cli::import(&client, &file, server).await?;
            let _ = writeln!(out, "imported {count} tools into {table}");
        }
    }
    Ok(())
}

/// Turns transparent huge pages off for this process. mimalloc asked for huge pages on its
/// arenas (`madvise`), so the first allocations faulted in whole 2 MiB pages: an idle gateway held
/// 10 MiB of them (of 11.5 MiB anonymous memory). A sidecar's heap is small and its memory is
/// budgeted, so resident size matters more here than the TLB savings huge pages bring to large
/// heaps. mimalloc is built with `no_thp` (it no longer asks); this prctl also covers hosts whose
/// THP mode is `always`. It fails harmlessly on kernels without it.
fn without_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Keeps a timer due within [`NEAR_TIMER`] pending for the life of the process.
///
/// Why: tokio wakes its driver (an `eventfd` write, then an extra `epoll_wait` turn) whenever a
/// timer is registered that is due before every pending one. Each call registers two, seconds
/// away — its deadline and its attempt timeout — so on a quiet gateway, with nothing due sooner,
/// every call paid two wake-ups (issue 10: strace at 250 calls/s counted 2.5 `write`s per call
/// against the bare forwarder's none). With a nearer timer always pending, a call's timers never
/// come first. The floor itself costs four wake-ups a second.
async fn keep_a_near_timer() {
    let mut tick = tokio::time::interval(NEAR_TIMER);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// See [`keep_a_near_timer`]: shorter than any attempt timeout worth having.
const NEAR_TIMER: Duration = Duration::from_millis(250);

fn main() -> anyhow::Result<()> {
    without_transparent_huge_pages();
    let cli = Cli::parse();
    if let Command::Healthcheck { url, config } = &cli.command {
        std::process::exit(healthcheck(url.clone(), config.as_deref()));
    }
    // The runtime's shape is configuration (`worker_threads`), so `serve` reads it first.
    let workers = match &cli.command {
        Command::Serve { config, .. } => Config::load(config.as_deref(), std::env::vars())?.worker_threads,
        _ => 1,
    };
    let runtime = match workers {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        0 => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?,
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen, allow_non_loopback, demo, log_format } => {
                serve(config, listen, allow_non_loopback, demo, log_format).await
            }
            Command::DemoServer { listen, lambda_api, delay_ms, sessions, extra_tools } => {
                demo::tools::set_extra_tools(extra_tools);
                let options = demo::http::DemoOptions { delay: Duration::from_millis(delay_ms), sessions };
                demo_server(listen, lambda_api, options).await
            }
            Command::Registry { config, table, action } => registry_command(config, table, action).await,
            Command::Tools {
                action: ToolsAction::Export { format, strict, hide_unavailable, url, token_file, config },
            } => tools_export(&format, strict, hide_unavailable, url, token_file, config).await,
            Command::Healthcheck { .. } => unreachable!("handled before the runtime starts"),
            Command::CheckConfig { config, json } => {
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
                use std::io::Write;
                let text = if json { serde_json::to_string_pretty(&config)? } else { format!("{config:#?}") };
                let _ = writeln!(std::io::stdout().lock(), "{text}");
                Ok(())
            }
        }
    })
}

async fn serve(
    config_path: Option<PathBuf>,
    listen: Option<SocketAddr>,
    allow_non_loopback: bool,
    demo: bool,
    log_format: LogFormat,
) -> anyhow::Result<()> {
    let mut config = Config::load(config_path.as_deref(), std::env::vars())?;
    // Tracing is off unless an OTLP endpoint is configured; a broken set-up is reported and
    // the gateway runs without it (traces are auxiliary, serving calls is not).
    let (otel, tracer, otel_error) = match telemetry::otel::init() {
        Ok(Some((otel, tracer))) => (Some(otel), Some(tracer), None),
        Ok(None) => (None, None, None),
        Err(e) => (None, None, Some(e)),
    };
    let _log_guard = telemetry::logging::init_with_tracer(
        &config.log_level,
        matches!(log_format, LogFormat::Json),
        tracer,
        telemetry::logging::Bounds::from_config(&config.inbound),
    );
    if let Some(e) = otel_error {
        tracing::error!(error = %format!("{e:#}"), "OpenTelemetry tracing is off: its configuration is invalid");
    } else if otel.is_some() {
        tracing::info!("OpenTelemetry tracing on: spans exported over OTLP/HTTP");
    }
    if let Some(listen) = listen {
        config.listen = listen;
    }
    config.allow_non_loopback |= allow_non_loopback;
    if !config.listen.ip().is_loopback() {
        if !config.allow_non_loopback {
            bail!(
                "refusing to listen on non-loopback address {} without --allow-non-loopback (the gateway has no authentication)",
                config.listen
            );
        }
        tracing::warn!(listen = %config.listen, "listening on a non-loopback address: anyone who can reach it can call every tool");
    }
    if demo {
        if config.servers.contains_key("demo") {
            bail!("--demo registers a server named \"demo\", but the configuration already has one");
        }
        let addr = demo::http::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), Default::default())
            .await
            .context("starting the demo server")?;
        config.servers.insert("demo".into(), demo_server_config(addr));
        tracing::info!(url = %format!("http://{addr}/mcp"), "demo MCP server started");
    }
    config.validate()?;

    let admin = server::admin::AdminAccess::from_settings(&config.admin)?;
    let gateway = Gateway::new(config.clone()).await?;
    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let bound = listener.local_addr()?;
    let shutdown = shutdown_signal();
    let servers: Vec<String> =
        gateway.upstreams.values().map(|u| format!("{}({})", u.name, u.transport.as_str())).collect();
    tracing::info!(
        listen = %bound,
        version = mcp_gateway::VERSION,
        servers = servers.len(),
        "mcp-gateway {} listening on http://{bound}/mcp with {} upstream server(s): {}",
        mcp_gateway::VERSION,
        servers.len(),
        if servers.is_empty() { "none".to_string() } else { servers.join(", ") }
    );

    if let Some(metrics_listen) = config.metrics_listen {
        // Any address: the metrics listener serves only /metrics (no tool data), so a
        // collector outside the task may scrape it without `allow_non_loopback`.
        let metrics_listener = TcpListener::bind(metrics_listen)
            .await
            .with_context(|| format!("binding the metrics listener {metrics_listen}"))?;
        let metrics_bound = metrics_listener.local_addr()?;
        tracing::info!(metrics_listen = %metrics_bound, "metrics listener on http://{metrics_bound}/metrics");
        let gateway = gateway.clone();
        tokio::spawn(async move {
            if let Err(e) = server::serve_metrics(metrics_listener, gateway).await {
                tracing::error!(error = %e, "metrics listener stopped");
            }
        });
    }
    if let Some(admin_listen) = config.admin.listen {
        let admin_listener = TcpListener::bind(admin_listen)
            .await
            .with_context(|| format!("binding the admin listener {admin_listen}"))?;
        let admin_bound = admin_listener.local_addr()?;
        tracing::info!(admin_listen = %admin_bound, "admin listener on http://{admin_bound}/admin/");
        let gateway = gateway.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            if let Err(e) = server::serve_admin(admin_listener, gateway, admin).await {
                tracing::error!(error = %e, "admin listener stopped");
            }
        });
    }
    tokio::spawn(Refresher::new(gateway.clone()).run());
    tokio::spawn(keep_a_near_timer());
    if config.registry.drift_interval_secs > 0 {
        let gateway = gateway.clone();
        let every = Duration::from_secs(config.registry.drift_interval_secs);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let report = gateway.registry_drift(None).await;
                tracing::info!(drift = %report, "registry drift checked");
            }
        });
    }
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let served = server::serve(listener, gateway.clone(), admin, shutdown, grace).await;
    close_sessions(&gateway).await;
    // The calls have drained and their audit lines are queued: write them out.
    if let Some(audit) = &gateway.audit {
        audit.close(Duration::from_secs(5));
    }
    // After the drain: the spans of drained calls are finished and go out now.
    if let Some(otel) = otel {
        otel.shutdown().await;
    }
    Ok(served?)
}

/// `tools export`: the catalogue of a running gateway (`--url`) or of one built from the
/// configuration, converted by the same code as `GET /tools`.
async fn tools_export(
    format: &str,
    strict: bool,
    hide_unavailable: bool,
    url: Option<String>,
    token_file: Option<PathBuf>,
    config: Option<PathBuf>,
) -> anyhow::Result<()> {
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
            let (tools, degraded) = remote_tools(&url, token.as_deref()).await?;
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
            Refresher::new(gateway.clone()).refresh_all().await;
            // Under a tool policy, the export shows what an anonymous caller may call.
            let view = gateway.tool_view(&mcp_gateway::identity::Caller::anonymous(None));
            let body = server::catalogue::export_catalogue(&gateway, view.as_deref(), format, options, hide);
            close_sessions(&gateway).await;
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

/// Runs the health probe; returns the process exit code.
fn healthcheck(url: Option<String>, config: Option<&std::path::Path>) -> i32 {
    use std::io::Write;
    let url = match url {
        Some(url) => url,
        None => match Config::load(config, std::env::vars()) {
            Ok(config) => server::probe::default_url(config.listen),
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "unhealthy: cannot read the configuration: {e:#}");
                return 1;
            }
        },
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "unhealthy: cannot start a runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(server::probe::probe(&url)) {
        Ok(line) => {
            let _ = writeln!(std::io::stdout(), "{line}");
            0
        }
        Err(line) => {
            let _ = writeln!(std::io::stderr(), "{line}");
            1
        }
    }
}

fn demo_server_config(addr: SocketAddr) -> ServerConfig {
    ServerConfig::new(TransportKind::Http, Some(format!("http://{addr}/mcp")), None, None)
}

async fn close_sessions(gateway: &Arc<Gateway>) {
    let upstreams = gateway.all_upstreams();
    // Persistent connections stop together (stdio children: SIGTERM, then kill after the
    // grace), so shutdown leaves no child process behind.
    let grace = Duration::from_millis(gateway.config.defaults.stdio_stop_grace_ms) + Duration::from_secs(2);
    let persistent = upstreams.iter().filter_map(|u| u.connection.as_ref()).map(|c| c.shutdown(grace));
    futures_util::future::join_all(persistent).await;
    for upstream in &upstreams {
        if let Some(http) = &upstream.http {
            http.close().await;
        }
    }
    // The dedicated upstream sessions of back-channel callers (gateway::sessions).
    gateway.sessions.close_all().await;
}

async fn demo_server(
    listen: SocketAddr,
    lambda_api: bool,
    options: demo::http::DemoOptions,
) -> anyhow::Result<()> {
    let _log_guard = telemetry::logging::init("info", true);
    let shutdown = shutdown_signal();
    let bound = if lambda_api {
        demo::lambda_api::spawn(listen).await?
    } else {
        demo::http::spawn(listen, options).await?
    };
    if lambda_api {
        tracing::info!(listen = %bound, "manga demo MCP server listening as Lambda functions at http://{bound}/2015-03-31/functions/mcp-demo/invocations");
    } else {
        tracing::info!(listen = %bound, "manga demo MCP server listening on http://{bound}/mcp");
    }
    shutdown.await;
    Ok(())
}

/// Registers the SIGTERM (ECS stop) and SIGINT (Ctrl-C) handlers at once and returns a
/// future that resolves when either arrives. Called before the startup line is logged, so a
/// signal sent right after it drains the gateway instead of killing it with the default action.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        async fn recv(signal: Option<Signal>) {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            tokio::select! {
                _ = recv(term) => {}
                _ = recv(interrupt) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
