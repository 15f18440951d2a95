//! Circuit breaker state shared across gateway instances through Redis (opt-in:
//! `shared_breakers = true` with `redis_url`).
//!
//! When an instance opens a server's breaker it writes `mcp:{breakers}:<server>` = its instance
//! id with `SET NX PX` (open period + a probe window): the first writer owns the open state.
//! Every instance polls the keys every 200 ms; a key owned by another instance makes the
//! local breaker refuse calls, so peers fail fast within a second and never probe. Only the
//! owner's breaker goes half-open and probes; on success it deletes the key (peers close), on
//! failure it extends it. A dead owner's key simply expires. When Redis is unreachable each
//! instance keeps its local breaker, the errors are counted, and sharing resumes by itself.
//! The keys share the hash tag `{breakers}`, so the poll's multi-key pipeline stays within one
//! slot on a Redis Cluster; the connection comes from [`crate::redis_link`].

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::redis_link::{RedisConnection as ConnectionManager, RedisLink, Timeouts};
use prometheus::IntCounterVec;
use tokio::sync::mpsc;

use super::breaker::{Breaker, Transition};

/// How often peers' breaker keys are read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Extra key lifetime beyond the open period, for the owner's probe to finish.
const PROBE_WINDOW: Duration = Duration::from_secs(5);
/// Redis calls on this path must be fast or skipped.
const REDIS_TIMEOUT: Duration = Duration::from_millis(50);

fn key(server: &str) -> String {
    format!("mcp:{{breakers}}:{server}")
}

/// Starts the publisher and poller tasks for `breakers`.
pub fn start(client: RedisLink, breakers: Vec<Arc<Breaker>>, errors: IntCounterVec) -> anyhow::Result<()> {
    let instance: Arc<str> = format!("{}-{:08x}", std::process::id(), fastrand::u32(..)).into();
    let (sender, receiver) = mpsc::unbounded_channel();
    for breaker in &breakers {
        breaker.set_notifier(sender.clone());
    }
    let by_name: BTreeMap<Arc<str>, Arc<Breaker>> =
        breakers.into_iter().map(|b| (b.server.clone(), b)).collect();
    tokio::spawn(run(client, instance, by_name, receiver, errors));
    Ok(())
}

async fn connect(client: &RedisLink) -> Option<ConnectionManager> {
    let timeouts = Timeouts { connect: Duration::from_millis(250), response: REDIS_TIMEOUT, retries: 1 };
    client.connect(timeouts).await.ok()
}

async fn run(
    client: RedisLink,
    instance: Arc<str>,
    breakers: BTreeMap<Arc<str>, Arc<Breaker>>,
    mut transitions: mpsc::UnboundedReceiver<(Arc<str>, Transition)>,
    errors: IntCounterVec,
) {
    let mut connection: Option<ConnectionManager> = None;
    let mut ticker = tokio::time::interval(POLL_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warned = false;
    loop {
        let event = tokio::select! {
            _ = ticker.tick() => None,
            event = transitions.recv() => match event {
                Some(event) => Some(event),
                None => return,
            },
        };
        if connection.is_none() {
            connection = connect(&client).await;
            if connection.is_none() {
                errors.with_label_values(&["connect"]).inc();
                if !warned {
                    tracing::warn!("Redis unreachable: circuit breakers work locally until it is back");
                    warned = true;
                }
                breakers.values().for_each(|b| b.apply_remote(None, false));
                continue;
            }
            if warned {
                tracing::info!("Redis reachable again: circuit breaker state is shared");
                warned = false;
            }
        }
        let Some(con) = connection.as_mut() else { continue };
        let operation = if event.is_some() { "publish" } else { "poll" };
        let result = match event {
            Some((server, transition)) => publish(con, &instance, &server, transition).await,
            None => poll(con, &instance, &breakers).await,
        };
        if let Err(e) = result {
            errors.with_label_values(&[operation]).inc();
            tracing::debug!(error = %e, "shared breaker state: Redis call failed");
            breakers.values().for_each(|b| b.apply_remote(None, false));
            connection = None;
        }
    }
}

async fn publish(
    con: &mut ConnectionManager,
    instance: &str,
    server: &str,
    transition: Transition,
) -> redis::RedisResult<()> {
    let key = key(server);
    let call = async {
        match transition {
            Transition::Opened { open_for } => {
                let ttl = (open_for + PROBE_WINDOW).as_millis() as u64;
                // First writer owns the open state; the owner extends its own key.
                let owner: Option<String> = redis::cmd("GET").arg(&key).query_async(con).await?;
                if owner.as_deref() == Some(instance) {
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(instance)
                        .arg("XX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async::<()>(con)
                        .await
                } else {
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(instance)
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async::<()>(con)
                        .await
                }
            }
            Transition::Closed => {
                // Delete only our own key: a peer's open state is its to end.
                let owner: Option<String> = redis::cmd("GET").arg(&key).query_async(con).await?;
                if owner.as_deref() == Some(instance) {
                    redis::cmd("DEL").arg(&key).query_async::<()>(con).await?;
                }
                Ok(())
            }
        }
    };
    tokio::time::timeout(REDIS_TIMEOUT * 4, call)
        .await
        .unwrap_or_else(|_| Err(redis::RedisError::from((redis::ErrorKind::Io, "timeout"))))
}

async fn poll(
    con: &mut ConnectionManager,
    instance: &str,
    breakers: &BTreeMap<Arc<str>, Arc<Breaker>>,
) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    for server in breakers.keys() {
        let key = key(server);
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
    }
    let replies: Vec<(Option<String>, i64)> = tokio::time::timeout(REDIS_TIMEOUT * 4, pipe.query_async(con))
        .await
        .unwrap_or_else(|_| Err(redis::RedisError::from((redis::ErrorKind::Io, "timeout"))))?;
    let now = Instant::now();
    for ((_, breaker), (owner, pttl)) in breakers.iter().zip(replies) {
        match owner {
            Some(owner) if pttl > 0 => {
                let mine = owner == instance;
                breaker.apply_remote(Some(now + Duration::from_millis(pttl as u64)), mine);
            }
            _ => breaker.apply_remote(None, false),
        }
    }
    Ok(())
}
