//! `serve`: the configuration with its flags applied, tracing and logging, the gateway and its
//! listeners (MCP, metrics, admin), the background loops, the reload triggers, and the drain
//! on shutdown.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use mcp_gateway::{
    config::{Config, ServerConfig, TransportKind},
    demo,
    gateway::{Gateway, refresh::Refresher},
    server,
    supervise::{self, Loop},
    telemetry,
};
use tokio::net::TcpListener;

use super::{args::LogFormat, signal::shutdown_signal};

/// `serve`'s flags besides the configuration file.
pub struct Flags {
    pub listen: Option<SocketAddr>,
    pub allow_non_loopback: bool,
    pub demo: bool,
    pub watch: bool,
    pub log_format: LogFormat,
}

pub async fn run(config_path: Option<PathBuf>, flags: Flags) -> anyhow::Result<()> {
    let Flags { listen, allow_non_loopback, demo, watch, log_format } = flags;
    if watch && config_path.is_none() {
        bail!("--watch needs a configuration file to watch (--config or MCP_GATEWAY_CONFIG)");
    }
    // Read, not yet validated: `--demo`'s server joins it first, so that endpoints and hooks
    // of the file may name `demo` (validated below, after it joined).
    let mut config = Config::read(config_path.as_deref(), std::env::vars())?;
    // Tracing is off unless an OTLP endpoint is configured; a broken set-up is reported and
    // the gateway runs without it (traces are auxiliary, serving calls is not).
    let (otel, otel_error) = match telemetry::otel::init() {
        Ok(otel) => (otel, None),
        Err(e) => (None, Some(e)),
    };
    let _log_guard = telemetry::logging::init_bounded(
        &config.log_level,
        matches!(log_format, LogFormat::Json),
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
    let demo_server = match demo {
        true => {
            let addr = demo::http::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), Default::default())
                .await
                .context("starting the demo server")?;
            tracing::info!(url = %format!("http://{addr}/mcp"), "demo MCP server started");
            Some(demo_server_config(addr))
        }
        false => None,
    };
    with_demo_server(&mut config, demo_server.as_ref())?;
    // A newcomer's demo gets the console: with no admin token configured, a one-off token
    // (shown once below). Never weaker than without `--demo`: the admin routes still need it.
    let one_off_token = match demo && config.admin.token.is_none() && config.admin.token_file.is_none() {
        true => {
            let token = one_off_admin_token()?;
            config.admin.token = Some(token.clone());
            Some(token)
        }
        false => None,
    };
    config.validate()?;

    let admin = server::admin::AdminAccess::from_settings(&config.admin)?;
    let gateway = Gateway::new(config.clone()).await?;
    // A reload reads the file and the environment again, with this command line's flags, and
    // the one-off token `--demo` made at start (else an unchanged file would differ from the
    // running configuration in `admin` and report it as awaiting a restart).
    let source_path = config_path.clone();
    let start_token = one_off_token.clone();
    gateway.set_config_source(Arc::new(move || {
        let mut config = Config::read(source_path.as_deref(), std::env::vars())?;
        if let Some(listen) = listen {
            config.listen = listen;
        }
        config.allow_non_loopback |= allow_non_loopback;
        with_demo_server(&mut config, demo_server.as_ref())?;
        if config.admin.token.is_none() && config.admin.token_file.is_none() {
            config.admin.token.clone_from(&start_token);
        }
        config.validate()?;
        Ok(config)
    }));
    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let bound = listener.local_addr()?;
    let shutdown = shutdown_signal();
    let servers: Vec<String> = gateway
        .configured_upstreams()
        .iter()
        .map(|u| format!("{}({})", u.name, u.transport.as_str()))
        .collect();
    // Where the console is: the admin listener's address is known once it is bound (below).
    let console_on_main = config.admin.listen.is_none() && admin.enabled();
    let console = console_on_main.then(|| format!("http://{bound}{}", server::console::PAGE));
    tracing::info!(
        listen = %bound,
        version = mcp_gateway::VERSION,
        servers = servers.len(),
        "mcp-gateway {} listening on http://{bound}/mcp with {} upstream server(s): {}{}",
        mcp_gateway::VERSION,
        servers.len(),
        if servers.is_empty() { "none".to_string() } else { servers.join(", ") },
        console.as_deref().map(|c| format!("; console at {c}")).unwrap_or_default()
    );
    if let Some(console) = &console {
        announce_console(console, one_off_token.as_deref());
    }

    let on_main = config.metrics.main_listener(&config.auth);
    if on_main == mcp_gateway::config::MainListenerMetrics::Admin
        && config.admin.token.is_none()
        && config.admin.token_file.is_none()
    {
        tracing::warn!(
            "metrics.main_listener = \"admin\" without admin.token_file (or admin.token): GET /metrics on the MCP listener answers 401 to everyone"
        );
    } else if on_main != mcp_gateway::config::MainListenerMetrics::Open {
        tracing::info!(main_listener = on_main.as_str(), metrics_listen = ?config.metrics_listen, "GET /metrics on the MCP listener is not open to every caller (metrics.main_listener)");
    }
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
        announce_console(&format!("http://{admin_bound}{}", server::console::PAGE), one_off_token.as_deref());
        let gateway = gateway.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            if let Err(e) = server::serve_admin(admin_listener, gateway, admin).await {
                tracing::error!(error = %e, "admin listener stopped");
            }
        });
    }
    super::reload::start(&gateway, config_path.filter(|_| watch));
    if watch {
        tracing::info!("watching the configuration file: a change is reloaded without a restart");
    }
    // Supervised: a panic is logged, counted and the loop restarted (`supervise`).
    let refreshed = gateway.clone();
    supervise::spawn(Loop::Refresher, move || Refresher::new(refreshed.clone()).run());
    tokio::spawn(keep_a_near_timer());
    if config.registry.drift_interval_secs > 0 {
        let gateway = gateway.clone();
        let every = Duration::from_secs(config.registry.drift_interval_secs);
        supervise::spawn(Loop::Drift, move || {
            let gateway = gateway.clone();
            async move {
                loop {
                    tokio::time::sleep(every).await;
                    let report = gateway.registry_drift(None).await;
                    tracing::info!(drift = %report, "registry drift checked");
                }
            }
        });
    }
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let served = server::serve(listener, gateway.clone(), admin, shutdown, grace).await;
    gateway.close_connections().await;
    // The calls have drained and their audit lines are queued: write them out.
    gateway.flush_audit(Duration::from_secs(5));
    // After the drain: the spans of drained calls are finished and go out now.
    if let Some(otel) = otel {
        otel.shutdown().await;
    }
    Ok(served?)
}

/// Keeps a timer due within [`NEAR_TIMER`] pending for the life of the process.
///
/// Why: tokio wakes its driver (an `eventfd` write, then an extra `epoll_wait` turn) whenever a
/// timer is registered that is due before every pending one. Each call registers two, seconds
/// away — its deadline and its attempt timeout — so on a quiet gateway, with nothing due sooner,
/// every call would pay two wake-ups (without this, strace at 250 calls/s counts 2.5 `write`s per call
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

/// The log line saying where the console is and how to open it; with a one-off token (`serve
/// --demo` without a configured one), the token itself, once, on stderr (not in the log lines,
/// which may be shipped elsewhere).
fn announce_console(url: &str, one_off_token: Option<&str>) {
    match one_off_token {
        Some(token) => {
            tracing::info!(console = %url, "operators' console at {url}: open it in a browser and paste the one-off admin token printed on stderr (valid until this process exits)");
            eprintln!("console: {url}  admin token (this run only): {token}");
        }
        None => tracing::info!(
            console = %url,
            "operators' console at {url}: open it in a browser and enter the admin token (admin.token_file)"
        ),
    }
}

/// 32 random bytes from the operating system, as 64 hex digits.
fn one_off_admin_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("generating the one-off admin token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Registers `--demo`'s server as `demo` (a configuration naming a server so is refused).
pub(super) fn with_demo_server(config: &mut Config, demo: Option<&ServerConfig>) -> anyhow::Result<()> {
    let Some(demo) = demo else { return Ok(()) };
    if config.servers.contains_key("demo") {
        bail!("--demo registers a server named \"demo\", but the configuration already has one");
    }
    config.servers.insert("demo".into(), demo.clone());
    Ok(())
}

pub(super) fn demo_server_config(addr: SocketAddr) -> ServerConfig {
    ServerConfig::new(TransportKind::Http, Some(format!("http://{addr}/mcp")), None, None)
}
