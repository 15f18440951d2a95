//! Builds one service stack per configured upstream server:
//! metrics → attempt timeout → transport (HTTP or Lambda). Resilience layers (retry, breaker,
//! limits) slot in above the timeout.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Context, anyhow};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tower::{ServiceBuilder, util::BoxCloneSyncService};

use crate::{
    config::{Config, ServerConfig, TransportKind},
    resilience::timeout::AttemptTimeoutLayer,
    telemetry::{metered::MeteredLayer, metrics::Metrics},
    upstream::{
        UpstreamService,
        http::{HttpSettings, HttpTransport},
        lambda::{self, LambdaTransport},
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
    pub config: ServerConfig,
}

/// Builds every configured server's stack.
pub async fn build_all(config: &Config, metrics: &Metrics) -> anyhow::Result<BTreeMap<String, Upstream>> {
    let needs_lambda = config.servers.values().any(|s| s.transport == TransportKind::Lambda);
    let lambda_client = if needs_lambda {
        let connect = std::time::Duration::from_millis(config.defaults.connect_timeout_ms);
        Some(lambda::client(&config.aws, connect).await)
    } else {
        None
    };
    let mut built = BTreeMap::new();
    for (name, server) in &config.servers {
        let timeout = server.timeout(&config.defaults);
        let metered = MeteredLayer::new(metrics, name, server.transport.as_str());
        let (service, http) = match server.transport {
            TransportKind::Http => {
                let url = server.url.as_deref().ok_or_else(|| anyhow!("server {name}: missing url"))?;
                let transport = HttpTransport::new(HttpSettings {
                    url: url.parse().with_context(|| format!("server {name}: invalid url {url:?}"))?,
                    connect_timeout: server.connect_timeout(&config.defaults),
                    headers: static_headers(name, server)?,
                })
                .map_err(|e| anyhow!("server {name}: {e}"))?;
                let stack = ServiceBuilder::new()
                    .layer(metered)
                    .layer(AttemptTimeoutLayer::new(timeout))
                    .service(transport.clone());
                (BoxCloneSyncService::new(stack), Some(transport))
            }
            TransportKind::Lambda => {
                let client = lambda_client.clone().ok_or_else(|| anyhow!("lambda client missing"))?;
                let function =
                    server.function.clone().ok_or_else(|| anyhow!("server {name}: missing function"))?;
                let transport = LambdaTransport::new(client, function, server.qualifier.clone());
                let stack = ServiceBuilder::new()
                    .layer(metered)
                    .layer(AttemptTimeoutLayer::new(timeout))
                    .service(transport);
                (BoxCloneSyncService::new(stack), None)
            }
        };
        built.insert(
            name.clone(),
            Upstream {
                name: name.as_str().into(),
                transport: server.transport,
                service,
                http,
                config: server.clone(),
            },
        );
    }
    Ok(built)
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
