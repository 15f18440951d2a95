//! The Redis tier: registry entries cached as JSON under `{prefix}{name}` with a TTL, shared
//! by every sidecar, and the invalidation channel that tells them a record changed.
//! Every call is bounded by a few milliseconds: a slow or dead Redis is skipped, never
//! waited for.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{TierError, entry::RegistryEntry};

const TIER: &str = "redis";

/// Pub/sub channel carrying the names of changed tools.
pub const INVALIDATION_CHANNEL: &str = "mcp:tool:invalidate";

fn error(e: impl std::fmt::Display) -> TierError {
    TierError { tier: TIER, reason: e.to_string() }
}

/// Registry entries in Redis.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    connection: std::sync::Arc<tokio::sync::Mutex<Option<ConnectionManager>>>,
    prefix: String,
    ttl: Duration,
    timeout: Duration,
}

impl RedisStore {
    pub fn new(url: &str, prefix: &str, ttl: Duration, timeout: Duration) -> Result<Self, TierError> {
        Ok(Self {
            client: redis::Client::open(url).map_err(error)?,
            connection: Default::default(),
            prefix: prefix.to_string(),
            ttl,
            timeout,
        })
    }

    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    async fn connection(&self) -> Result<ConnectionManager, TierError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(100))))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(0);
        let connection = tokio::time::timeout(
            self.timeout.max(Duration::from_millis(100)),
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
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
        let mut pipe = redis::pipe();
        for entry in entries {
            let text = serde_json::to_string(entry).map_err(error)?;
            pipe.cmd("SET")
                .arg(self.key(&entry.tool_name))
                .arg(text)
                .arg("PX")
                .arg(self.ttl.as_millis() as u64)
                .ignore();
        }
        let mut connection = self.connection().await?;
        let bound = self.timeout.max(Duration::from_millis(50)) * 10;
        match tokio::time::timeout(bound, pipe.query_async::<()>(&mut connection)).await {
            Ok(result) => result.map_err(error),
            Err(_) => Err(error("pipeline timed out")),
        }
    }

    /// Tells every gateway that `name` changed.
    pub async fn publish_invalidation(&self, name: &str) -> Result<(), TierError> {
        self.run::<()>(redis::cmd("PUBLISH").arg(INVALIDATION_CHANNEL).arg(name)).await
    }
}
