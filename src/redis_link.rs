//! One way to reach Redis for everything that shares state through it (the registry's Redis
//! tier and its invalidation channel, the shared circuit breakers): configuration in, a
//! connection out.
//!
//! - `redis://` or `rediss://` (TLS through rustls; ElastiCache in-transit encryption and
//!   ElastiCache Serverless need it). Server certificates are checked against the bundled
//!   Mozilla roots (the Amazon CAs are among them), or only against `redis_ca_file` (PEM)
//!   when a private CA signs them. Host names are always verified.
//! - `redis_cluster = true`: Redis Cluster (ElastiCache cluster mode enabled, Serverless).
//!   `redis_url` is one seed node, or several separated by commas; the client learns the slot
//!   map and follows `MOVED`/`ASK`. Multi-key commands and pipelines must stay within one hash
//!   slot: callers either use a hash tag (the breaker keys) or send keys one by one.
//! - Pub/sub always uses a plain connection to the first seed node: classic `PUBLISH` is
//!   broadcast to every node of a cluster, so a subscriber on any node sees every message.
//!
//! Lives at the top level because both `registry` and `resilience` use it, and `registry`
//! must not depend on `resilience`.

use std::{path::Path, time::Duration};

use redis::{
    Client, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, TlsCertificates, Value,
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub},
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
};

use crate::config::Config;

/// Where and how to reach Redis; cheap to clone.
#[derive(Clone)]
pub struct RedisLink {
    target: Target,
    /// A single-node client for pub/sub (the only node, or the first seed of a cluster).
    pubsub: Client,
    description: String,
}

// Built once per process and cloned rarely: the size of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Target {
    Single(Client),
    Cluster(ClusterClient),
}

/// Connection settings of one user of the link.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
    /// Reconnection attempts inside one request (single node; the cluster client retries
    /// redirections itself).
    pub retries: usize,
}

/// A connection to a single node or a cluster, usable with every `redis` command API.
#[derive(Clone)]
pub enum RedisConnection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(c) => c.req_packed_command(cmd),
            RedisConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
        }
    }
}

impl RedisConnection {
    /// Whether this is a cluster connection (pipelines must then stay within one slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }
}

impl RedisLink {
    /// The link `redis_url`, `redis_ca_file` and `redis_cluster` describe, if Redis is configured.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Self>> {
        match &config.redis_url {
            Some(url) => Ok(Some(Self::new(url, config.redis_ca_file.as_deref(), config.redis_cluster)?)),
            None => Ok(None),
        }
    }

    pub fn new(url: &str, ca_file: Option<&Path>, cluster: bool) -> anyhow::Result<Self> {
        let urls: Vec<&str> = url.split(',').map(str::trim).filter(|u| !u.is_empty()).collect();
        let Some(first) = urls.first() else { anyhow::bail!("redis_url is empty") };
        if urls.len() > 1 && !cluster {
            anyhow::bail!("redis_url lists several nodes: that needs redis_cluster = true");
        }
        let tls = first.starts_with("rediss://");
        let certificates = match ca_file {
            Some(path) if tls => {
                let pem = std::fs::read(path)
                    .map_err(|e| anyhow::anyhow!("reading redis_ca_file {}: {e}", path.display()))?;
                Some(TlsCertificates { client_tls: None, root_cert: Some(pem) })
            }
            Some(_) => anyhow::bail!("redis_ca_file needs a rediss:// redis_url"),
            None => None,
        };
        let single = |url: &str| -> RedisResult<Client> {
            match &certificates {
                Some(certs) => Client::build_with_tls(url, certs.clone()),
                None => Client::open(url),
            }
        };
        let pubsub = single(first).map_err(|e| anyhow::anyhow!("redis_url: {e}"))?;
        let target = if cluster {
            let mut builder = redis::cluster::ClusterClientBuilder::new(urls.iter().copied());
            if let Some(certs) = &certificates {
                builder = builder.certs(certs.clone());
            }
            Target::Cluster(builder.build().map_err(|e| anyhow::anyhow!("redis_url: {e}"))?)
        } else {
            Target::Single(pubsub.clone())
        };
        let description = format!(
            "{}{}{}",
            if cluster { "cluster" } else { "single node" },
            if tls { ", TLS" } else { "" },
            if ca_file.is_some() { " (private CA)" } else { "" }
        );
        Ok(Self { target, pubsub, description })
    }

    /// What kind of link this is, for logs ("cluster, TLS").
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// Opens a connection (single node: a reconnecting manager; cluster: the slot-aware client).
    pub async fn connect(&self, timeouts: Timeouts) -> RedisResult<RedisConnection> {
        match &self.target {
            Target::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeouts.connect))
                    .set_response_timeout(Some(timeouts.response))
                    .set_number_of_retries(timeouts.retries);
                let manager = ConnectionManager::new_with_config(client.clone(), config).await?;
                Ok(RedisConnection::Single(manager))
            }
            Target::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(timeouts.connect)
                    .set_response_timeout(timeouts.response);
                let connection = client.get_async_connection_with_config(config).await?;
                Ok(RedisConnection::Cluster(connection))
            }
        }
    }

    /// A pub/sub connection subscribed to `channel`.
    pub async fn subscribe(&self, channel: &str) -> RedisResult<PubSub> {
        let mut pubsub = self.pubsub.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok(pubsub)
    }
}

/// Turns an elapsed timeout into a Redis I/O error (for callers that bound a whole exchange).
pub fn timed_out(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_string()))
}
