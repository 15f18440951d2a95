//! Builds each configured upstream server: its transport (HTTP, Lambda, or a persistent
//! [`Connection`] over a WebSocket, legacy-SSE or stdio connector), its breaker and health
//! prober, and the call stack around the transport, whose layers and order are
//! [`crate::resilience::stack`]'s.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::{Context, anyhow, bail};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::{
    config::{Config, ServerConfig, TransportKind},
    protocol::mcp::{self, Era},
    resilience::{
        breaker::{Breaker, BreakerMetrics},
        health_probe::{ProbeMethod, Prober},
        shared::SharedBreakers,
        stack::{call_stack, probe_stack},
    },
    telemetry::metrics::Metrics,
    upstream::{
        UpstreamService,
        channel::Connector,
        connection::{Connection, ConnectionMetricFamilies, ConnectionSettings},
        credentials::{CredentialMetrics, Credentials},
        http::{HttpSettings, HttpTransport},
        lambda::{self, LambdaTransport},
        legacy_sse::{LegacySseConnector, LegacySseSettings},
        openapi::{OpenApiSettings, OpenApiTransport},
        stdio::{StdioConnector, StdioSettings},
        websocket::{WebSocketConnector, WebSocketSettings},
    },
};

/// One upstream server and the service that reaches it.
#[derive(Clone)]
pub struct Upstream {
    pub name: Arc<str>,
    pub transport: TransportKind,
    pub service: UpstreamService,
    /// Kept to report the era and close the session on shutdown.
    pub http: Option<HttpTransport>,
    /// The persistent connection (WebSocket, SSE, stdio): its state for `/readyz` and
    /// `/admin/connections`, and stopped on shutdown.
    pub connection: Option<Connection>,
    pub breaker: Arc<Breaker>,
    pub config: ServerConfig,
    /// The transport behind the attempt timeout only: the breaker's health probes.
    pub probe: UpstreamService,
    /// An OpenAPI target's transport: its mapped document (skipped operations for
    /// `/admin/registry`).
    pub openapi: Option<OpenApiTransport>,
    /// Set when a reload removed or replaced this stack: its background loops end.
    pub retirement: Retirement,
}

/// The end of a server stack's background loops (its list-change watch, its resource-update
/// relay, its recovery watch): a reload that removes or replaces the stack retires it, and
/// each loop started [`Retirement::until`] it ends then, whatever it was waiting for.
#[derive(Clone)]
pub struct Retirement(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Retirement {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(false).0))
    }
}

impl Retirement {
    /// Ends the loops (once; later calls change nothing).
    pub fn retire(&self) {
        self.0.send_replace(true);
    }

    pub fn is_retired(&self) -> bool {
        *self.0.borrow()
    }

    /// Runs `work` until it ends or the stack is retired.
    pub fn until<F>(&self, work: F) -> impl std::future::Future<Output = ()> + Send + 'static + use<F>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut retired = self.0.subscribe();
        async move {
            tokio::select! {
                _ = retired.wait_for(|retired| *retired) => {}
                () = work => {}
            }
        }
    }
}

impl Upstream {
    /// Starts the health prober of this server's breaker (`breaker.probe_interval_ms`; none
    /// when it is 0 or the breaker is disabled).
    pub fn start_health_prober(
        &self,
        shared: Option<Arc<SharedBreakers>>,
        probes: prometheus::IntCounterVec,
    ) {
        let Some(interval) = self.breaker.settings().probe_interval() else { return };
        let (transport, http) = (self.transport, self.http.clone());
        let method: ProbeMethod = Box::new(move || match transport {
            TransportKind::Lambda => "tools/list",
            TransportKind::Http => match http.as_ref().and_then(HttpTransport::era) {
                Some(Era::Legacy) => "ping",
                _ => mcp::DISCOVER,
            },
            TransportKind::Websocket | TransportKind::Sse | TransportKind::Stdio => "ping",
            // Not probed (see `breaker_settings`); named for completeness.
            TransportKind::Openapi => "ping",
        });
        let prober = Arc::new(Prober {
            breaker: Arc::downgrade(&self.breaker),
            service: self.probe.clone(),
            method,
            interval,
            shared,
            probes,
        });
        // Supervised: a restarted prober starts over from the breaker's state.
        let retirement = self.retirement.clone();
        crate::supervise::spawn(crate::supervise::Loop::Prober, move || {
            retirement.until(prober.clone().run())
        });
    }
}

/// Builds every configured server's stack.
pub async fn build_all(
    config: &Config,
    metrics: &Metrics,
) -> anyhow::Result<BTreeMap<String, Arc<Upstream>>> {
    let needs_lambda = config.servers.values().any(|s| s.transport == TransportKind::Lambda);
    let lambda_client = if needs_lambda { Some(lambda_client(config).await) } else { None };
    let mut built = BTreeMap::new();
    for (name, server) in &config.servers {
        built.insert(name.clone(), Arc::new(build(name, server, config, metrics, lambda_client.as_ref())?));
    }
    Ok(built)
}

/// The Lambda client all Lambda upstreams share.
pub async fn lambda_client(config: &Config) -> aws_sdk_lambda::Client {
    let connect = std::time::Duration::from_millis(config.defaults.connect_timeout_ms);
    lambda::client(&config.aws, connect).await
}

/// Builds one server's stack.
pub fn build(
    name: &str,
    server: &ServerConfig,
    config: &Config,
    metrics: &Metrics,
    lambda_client: Option<&aws_sdk_lambda::Client>,
) -> anyhow::Result<Upstream> {
    let breaker = Arc::new(Breaker::new(
        name.into(),
        breaker_settings(server, config),
        BreakerMetrics {
            state: metrics.breaker_state.with_label_values(&[name]),
            transitions: metrics.breaker_transitions.clone(),
            rejected: metrics.breaker_rejected.with_label_values(&[name]),
        },
    ));
    let mut connection = None;
    let mut openapi = None;
    let (service, http, probe) = match server.transport {
        TransportKind::Http => {
            let url = server.url.as_deref().ok_or_else(|| anyhow!("server {name}: missing url"))?;
            let credentials = credentials(name, server, config, metrics)?;
            let transport = HttpTransport::new(HttpSettings {
                url: url.parse().with_context(|| format!("server {name}: invalid url {url:?}"))?,
                connect_timeout: server.connect_timeout(&config.defaults),
                headers: static_headers(name, server)?,
                max_response_bytes: server.max_response_bytes(&config.defaults),
                credentials,
            })
            .map_err(|e| anyhow!("server {name}: {e}"))?;
            let probe = probe_stack(server, config, transport.clone());
            (call_stack(name, server, config, metrics, &breaker, transport.clone()), Some(transport), probe)
        }
        TransportKind::Openapi => {
            let transport =
                openapi_transport(name, server, config, credentials(name, server, config, metrics)?)?;
            openapi = Some(transport.clone());
            let probe = probe_stack(server, config, transport.clone());
            (call_stack(name, server, config, metrics, &breaker, transport), None, probe)
        }
        TransportKind::Lambda => {
            let client = lambda_client.cloned().ok_or_else(|| anyhow!("lambda client missing"))?;
            let function =
                server.function.clone().ok_or_else(|| anyhow!("server {name}: missing function"))?;
            let target = server.is_agentcore().then(|| server.agentcore_target(name).to_string());
            let transport = LambdaTransport::new(
                client,
                function,
                server.qualifier.clone(),
                server.max_response_bytes(&config.defaults),
                target,
            );
            let probe = probe_stack(server, config, transport.clone());
            (call_stack(name, server, config, metrics, &breaker, transport), None, probe)
        }
        kind @ (TransportKind::Websocket | TransportKind::Sse | TransportKind::Stdio) => {
            let defaults = &config.defaults;
            let settings = ConnectionSettings {
                server: name.into(),
                transport: kind.as_str(),
                reconnect: server.reconnect(defaults),
                handshake_timeout: server.connect_timeout(defaults) + server.timeout(defaults),
            };
            let started = Connection::start(
                connector(name, server, config)?,
                settings,
                &ConnectionMetricFamilies {
                    state: metrics.upstream_connection_state.clone(),
                    era: metrics.upstream_era.clone(),
                    reconnects: metrics.upstream_reconnects.clone(),
                    dropped: metrics.upstream_dropped_messages.clone(),
                },
            );
            connection = Some(started.clone());
            let probe = probe_stack(server, config, started.clone());
            (call_stack(name, server, config, metrics, &breaker, started), None, probe)
        }
    };
    Ok(Upstream {
        name: name.into(),
        transport: server.transport,
        service,
        http,
        connection,
        breaker,
        // Its declared tools: inline `tools`, then those of `tools_file`.
        config: server.with_file_tools(),
        probe,
        openapi,
        retirement: Retirement::default(),
    })
}

/// What building `name`'s stack would refuse, checked without starting anything (no
/// connection, no child process, no request): the same constructors [`build`] runs, so
/// `check-config` refuses exactly what `serve` and a reload would (an unreadable secret, an
/// OpenAPI document with no server URL and no `base_url`, a header that is no header).
pub fn check(name: &str, server: &ServerConfig, config: &Config, metrics: &Metrics) -> anyhow::Result<()> {
    match server.transport {
        TransportKind::Http => {
            let url = server.url.as_deref().ok_or_else(|| anyhow!("server {name}: missing url"))?;
            HttpTransport::new(HttpSettings {
                url: url.parse().with_context(|| format!("server {name}: invalid url {url:?}"))?,
                connect_timeout: server.connect_timeout(&config.defaults),
                headers: static_headers(name, server)?,
                max_response_bytes: server.max_response_bytes(&config.defaults),
                credentials: credentials(name, server, config, metrics)?,
            })
            .map_err(|e| anyhow!("server {name}: {e}"))?;
        }
        TransportKind::Openapi => {
            openapi_transport(name, server, config, credentials(name, server, config, metrics)?)?;
        }
        TransportKind::Lambda => {
            server.function.as_deref().ok_or_else(|| anyhow!("server {name}: missing function"))?;
        }
        TransportKind::Websocket | TransportKind::Sse | TransportKind::Stdio => {
            connector(name, server, config)?;
        }
    }
    Ok(())
}

/// The credentials of `[servers.NAME.auth]`, if any; an OAuth secret that cannot be read is a
/// configuration error, said at start.
fn credentials(
    name: &str,
    server: &ServerConfig,
    config: &Config,
    metrics: &Metrics,
) -> anyhow::Result<Option<Credentials>> {
    let Some(auth) = &server.auth else { return Ok(None) };
    let credentials = Credentials::new(
        name,
        auth,
        config,
        server.connect_timeout(&config.defaults),
        CredentialMetrics {
            fetches: metrics.upstream_token_fetches.clone(),
            retries: metrics.upstream_auth_retries.clone(),
        },
    )
    .with_context(|| format!("server {name}: auth"))?;
    if auth.is_oauth() {
        auth.client_secret().with_context(|| format!("server {name}: auth"))?;
    }
    Ok(Some(credentials))
}

/// An OpenAPI target's transport: its document (mapped at load for a file), the secrets of
/// its security schemes read now (one that cannot be read refuses the start).
fn openapi_transport(
    name: &str,
    server: &ServerConfig,
    config: &Config,
    credentials: Option<Credentials>,
) -> anyhow::Result<OpenApiTransport> {
    let spec = server.spec.clone().ok_or_else(|| anyhow!("server {name}: missing spec"))?;
    let loaded = server.openapi_document.clone();
    if let Some(mapped) = &loaded
        && server.base_url.is_none()
        && mapped.server_url.is_none()
    {
        bail!(
            "server {name}: the document {} has no absolute `servers` URL; set servers.{name}.base_url",
            mapped.source
        );
    }
    let mut secrets = std::collections::BTreeMap::new();
    for (scheme, credential) in &server.security {
        let secret = credential.secret().with_context(|| format!("servers.{name}.security.{scheme}"))?;
        secrets.insert(scheme.clone(), (credential.username.clone(), secret));
    }
    OpenApiTransport::new(OpenApiSettings {
        server: name.into(),
        spec,
        loaded,
        base_url: server.base_url.clone(),
        selection: server.openapi_selection().with_context(|| format!("server {name}"))?,
        limits: server.openapi_limits(&config.defaults),
        max_definition_bytes: server.tool_list_bounds(&config.defaults).max_definition_bytes,
        connect_timeout: server.connect_timeout(&config.defaults),
        headers: static_headers(name, server)?,
        max_response_bytes: server.max_response_bytes(&config.defaults),
        max_request_bytes: server.max_request_bytes.unwrap_or(config.max_body_bytes),
        credentials,
        secrets,
    })
    .map_err(|e| anyhow!("server {name}: {e}"))
}

/// The server's breaker settings. An AgentCore Lambda target has no request that runs no
/// tool (no `tools/list`, no `ping`), so the gateway cannot probe it: after the open period
/// callers' calls are the probes, as with `probe_interval_ms = 0`.
fn breaker_settings(server: &ServerConfig, config: &Config) -> crate::config::BreakerSettings {
    let mut settings = server.breaker(&config.defaults).clone();
    // An OpenAPI target answers `ping` and `tools/list` itself: a probe would prove nothing
    // about the REST service, so callers' calls are the probes there too.
    if server.is_agentcore() || server.transport == TransportKind::Openapi {
        settings.probe_interval_ms = 0;
    }
    settings
}

/// The connector of a persistent server: adding a transport kind is one arm here.
fn connector(name: &str, server: &ServerConfig, config: &Config) -> anyhow::Result<Box<dyn Connector>> {
    let max_message_bytes = server.max_response_bytes(&config.defaults);
    Ok(match server.transport {
        TransportKind::Stdio => Box::new(StdioConnector::new(StdioSettings {
            server: name.into(),
            command: server.stdio_command().ok_or_else(|| anyhow!("server {name}: missing command"))?,
            max_message_bytes,
            stop_grace: std::time::Duration::from_millis(config.defaults.stdio_stop_grace_ms),
        })),
        TransportKind::Websocket => {
            let url = server.url.as_deref().ok_or_else(|| anyhow!("server {name}: missing url"))?;
            let settings = WebSocketSettings {
                url: url.parse().with_context(|| format!("server {name}: invalid url {url:?}"))?,
                headers: static_headers(name, server)?,
                connect_timeout: server.connect_timeout(&config.defaults),
                max_message_bytes,
                ping_interval: Duration::from_millis(config.defaults.ws_ping_interval_ms),
                pong_timeout: Duration::from_millis(config.defaults.ws_pong_timeout_ms),
            };
            Box::new(WebSocketConnector::new(settings).map_err(|e| anyhow!("server {name}: {e}"))?)
        }
        TransportKind::Sse => {
            let url = server.url.as_deref().ok_or_else(|| anyhow!("server {name}: missing url"))?;
            let settings = LegacySseSettings {
                url: url.parse().with_context(|| format!("server {name}: invalid url {url:?}"))?,
                headers: static_headers(name, server)?,
                connect_timeout: server.connect_timeout(&config.defaults),
                post_timeout: server.timeout(&config.defaults),
                max_message_bytes,
            };
            Box::new(LegacySseConnector::new(settings).map_err(|e| anyhow!("server {name}: {e}"))?)
        }
        kind @ (TransportKind::Http | TransportKind::Lambda | TransportKind::Openapi) => {
            bail!("server {name}: transport {:?} is not a persistent transport", kind.as_str())
        }
    })
}

fn static_headers(server: &str, config: &ServerConfig) -> anyhow::Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (key, value) in &config.headers {
        let name = HeaderName::try_from(key.as_str())
            .with_context(|| format!("server {server}: invalid header name {key:?}"))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .with_context(|| format!("server {server}: invalid value for header {key}"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}
