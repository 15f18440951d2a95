//! The Redis tier: registry entries cached as JSON under `{prefix}{name}` with a TTL, shared
//! by every sidecar, and the invalidation channel that tells them a record changed.
//! Every call is bounded by a few milliseconds: a slow or dead Redis is skipped, never
//! waited for. The connection (single node or cluster, plain or TLS) comes from
//! [`crate::redis_link`]; in cluster mode the refresh writes keys one by one (concurrently)
//! instead of one pipeline, since the keys live in different hash slots.

use std::time::Duration;

use redis::aio::PubSub;

use super::{TierError, entry::RegistryEntry};
use crate::redis_link::{RedisConnection, RedisLink, Timeouts};

const TIER: &str = "redis";

/// Pub/sub channel carrying the names of changed tools.
pub const INVALIDATION_CHANNEL: &str = "mcp:tool:invalidate";

fn error(e: impl std::fmt::Display) -> TierError {
    TierError { tier: TIER, reason: e.to_string() }
}

/// Registry entries in Redis.
#[derive(Clone)]
pub struct RedisStore {
    link: RedisLink,
    connection: std::sync::Arc<tokio::sync::Mutex<Option<RedisConnection>>>,
    prefix: String,
    ttl: Duration,
    timeout: Duration,
}

impl RedisStore {
    pub fn new(link: RedisLink, prefix: &str, ttl: Duration, timeout: Duration) -> Self {
        Self { link, connection: Default::default(), prefix: prefix.to_string(), ttl, timeout }
    }

    /// A pub/sub connection subscribed to the invalidation channel.
    pub async fn subscribe_invalidations(&self) -> Result<PubSub, TierError> {
        self.link.subscribe(INVALIDATION_CHANNEL).await.map_err(error)
    }

    async fn connection(&self) -> Result<RedisConnection, TierError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        // TLS handshakes and cluster discovery need more than a GET's few milliseconds.
        let connect = self.timeout.max(Duration::from_millis(500));
        let timeouts = Timeouts { connect, response: self.timeout, retries: 0 };
        let connection = tokio::time::timeout(connect * 2, self.link.connect(timeouts))
            .await
            .map_err(|_| error("connect timed out"))?
            .map_err(error)?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    async fn run<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, TierError> {
        let mut connection = self.connection().await?;
        match tokio::time::timeout(self.timeout, command.query_async(&mut connection)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                *self.connection.lock().await = None;
                Err(error(e))
            }
            Err(_) => Err(error(format!("no answer within {:?}", self.timeout))),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    pub async fn get(&self, name: &str) -> Result<Option<RegistryEntry>, TierError> {
        let raw: Option<String> = self.run(redis::cmd("GET").arg(self.key(name))).await?;
        raw.map(|text| serde_json::from_str(&text).map_err(error)).transpose()
    }

    pub async fn set(&self, entry: &RegistryEntry) -> Result<(), TierError> {
        let text = serde_json::to_string(entry).map_err(error)?;
        self.run::<()>(
            redis::cmd("SET")
                .arg(self.key(&entry.tool_name))
                .arg(text)
                .arg("PX")
                .arg(self.ttl.as_millis() as u64),
        )
        .await
    }

    pub async fn delete(&self, name: &str) -> Result<(), TierError> {
        self.run::<()>(redis::cmd("DEL").arg(self.key(name))).await
    }

    /// Writes every entry in one pipeline (refreshes).
    pub async fn set_all(&self, entries: &[RegistryEntry]) -> Result<(), TierError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut commands = Vec::with_capacity(entries.len());
        for entry in entries {
            let text = serde_json::to_string(entry).map_err(error)?;
            let mut set = redis::cmd("SET");
            set.arg(self.key(&entry.tool_name)).arg(text).arg("PX").arg(self.ttl.as_millis() as u64);
            commands.push(set);
        }
        let connection = self.connection().await?;
        let bound = self.timeout.max(Duration::from_millis(50)) * 10;
        let write = async {
            if connection.is_cluster() {
                // Keys in different slots: one command each, all in flight at once.
                let writes = commands.iter().map(|set| {
                    let mut connection = connection.clone();
                    async move { set.query_async::<()>(&mut connection).await }
                });
                futures_util::future::join_all(writes)
                    .await
                    .into_iter()
                    .collect::<Result<Vec<()>, _>>()
                    .map(|_| ())
            } else {
                let mut pipe = redis::pipe();
                for set in &commands {
                    pipe.add_command(set.clone()).ignore();
                }
                pipe.query_async::<()>(&mut connection.clone()).await
            }
        };
        match tokio::time::timeout(bound, write).await {
            Ok(result) => result.map_err(error),
            Err(_) => Err(error("pipeline timed out")),
        }
    }

    /// Tells every gateway that `name` changed.
    pub async fn publish_invalidation(&self, name: &str) -> Result<(), TierError> {
        self.run::<()>(redis::cmd("PUBLISH").arg(INVALIDATION_CHANNEL).arg(name)).await
    }
}
