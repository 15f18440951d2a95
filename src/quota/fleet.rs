//! Quota decisions shared by the fleet: one Lua script per rule and call, run atomically by
//! Redis (`EVALSHA`, loaded again by the client after a `NOSCRIPT`, e.g. after a restart).
//!
//! The script reads Redis's own clock (`TIME`), so instances with skewed clocks agree. It
//! checks the concurrency leases first (expired ones removed, then counted), then the rate
//! (GCRA: a key holding the theoretical arrival time, expiring with it), and writes nothing
//! unless the call is allowed: a refusal by one limit never uses up the other. A rule without a
//! concurrency limit may ask for a batch of calls (`quotas.fleet_batch_ms`); the script grants
//! as many as the allowance holds now, and the caller spends them locally. An allowed call
//! under a concurrency limit adds its lease (score: expiry time); [`Fleet::release`] removes it
//! with `ZREM` when the call ends, a second round trip after the answer has been sent.
//!
//! Any error or a reply slower than `quotas.redis_timeout_ms` makes the caller decide locally,
//! and Redis is left alone for `quotas.redis_retry_ms`; `mcp_gateway_quota_redis_available`
//! is 0 meanwhile.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use prometheus::{IntCounterVec, IntGauge};

use super::{CONCURRENCY_RETRY_HINT, Limit, Limits};
use crate::redis_link::{RedisConnection, RedisLink, Timeouts};

/// KEYS: rate key, concurrency key. ARGV: emission interval (ms), tolerance (ms), most calls
/// in flight (0: none), lease (ms), lease member, concurrency retry hint (ms), calls wanted
/// (a batch: more than 1 only for a rule without a concurrency limit).
/// Returns `{allowed (1/0), retry_after_ms, limit (1 rate, 2 concurrency), calls granted}`:
/// of a batch, as many calls as the allowance holds now (at least 1 when allowed).
const SCRIPT: &str = r"
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local max_conc = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local granted = math.max(1, tonumber(ARGV[7]) or 1)
if max_conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= max_conc then
    return {0, tonumber(ARGV[6]), 2, 0}
  end
end
if emission > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or now) or now
  if tat < now then tat = now end
  local allow_at = tat - tolerance
  if now < allow_at then
    return {0, math.max(1, math.ceil(allow_at - now)), 1, 0}
  end
  local fit = math.floor((now + tolerance - tat) / emission) + 1
  if fit < granted then granted = math.max(1, fit) end
  local new_tat = tat + granted * emission
  redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.max(1, math.ceil(new_tat - now)))
end
if max_conc > 0 then
  redis.call('ZADD', KEYS[2], now + lease, ARGV[5])
  redis.call('PEXPIRE', KEYS[2], lease)
end
return {1, 0, 0, granted}
";

/// The fleet's quota state in Redis, as one instance reaches it.
pub struct Fleet {
    link: RedisLink,
    script: redis::Script,
    connection: Mutex<Option<RedisConnection>>,
    connecting: AtomicBool,
    /// Decisions are local until then (after a failure).
    local_until: Mutex<Option<Instant>>,
    timeout: Duration,
    retry: Duration,
    available: IntGauge,
    errors: IntCounterVec,
}

impl Fleet {
    /// Starts connecting (decisions are local until connected).
    pub fn start(
        link: RedisLink,
        timeout: Duration,
        retry: Duration,
        available: IntGauge,
        errors: IntCounterVec,
    ) -> Arc<Self> {
        available.set(0);
        errors.with_label_values(&["quota"]);
        let fleet = Arc::new(Self {
            link,
            script: redis::Script::new(SCRIPT),
            connection: Mutex::new(None),
            connecting: AtomicBool::new(false),
            local_until: Mutex::new(None),
            timeout,
            retry,
            available,
            errors,
        });
        fleet.connect();
        fleet
    }

    /// Opens the connection in the background (once at a time).
    fn connect(self: &Arc<Self>) {
        if self.connecting.swap(true, Ordering::AcqRel) || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            let timeouts = Timeouts {
                connect: fleet.timeout.max(Duration::from_millis(250)),
                response: fleet.timeout,
                retries: 1,
            };
            match fleet.link.connect(timeouts).await {
                Ok(connection) => {
                    *fleet.connection.lock().unwrap_or_else(|p| p.into_inner()) = Some(connection);
                    *fleet.local_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    fleet.available.set(1);
                    tracing::info!("quotas are shared through Redis");
                }
                Err(e) => {
                    tracing::warn!(error = %crate::redact::shown(&e), "quotas: Redis unreachable, deciding locally");
                    fleet.failed();
                }
            }
            fleet.connecting.store(false, Ordering::Release);
        });
    }

    fn failed(&self) {
        self.errors.with_label_values(&["quota"]).inc();
        if self.available.get() != 0 {
            tracing::warn!("quotas: Redis failed or too slow; deciding locally for a while");
        }
        self.available.set(0);
        *self.local_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(crate::clock::after(self.retry));
    }

    /// The connection, unless Redis is to be left alone for now.
    fn usable(self: &Arc<Self>) -> Option<RedisConnection> {
        let local_until = *self.local_until.lock().unwrap_or_else(|p| p.into_inner());
        if local_until.is_some_and(|until| Instant::now() < until) {
            return None;
        }
        let connection = self.connection.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if connection.is_none() {
            self.connect();
        }
        connection
    }

    /// Decides one call in Redis, or a batch of up to `wanted` calls of a rule without a
    /// concurrency limit: `Ok(calls granted)`, or `None` when Redis cannot decide now (decide
    /// locally).
    pub async fn decide(
        self: &Arc<Self>,
        key: &str,
        limits: &Limits,
        lease: Duration,
        member: &str,
        wanted: u64,
    ) -> Option<Result<u64, (Limit, Duration)>> {
        let mut connection = self.usable()?;
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(format!("{key}:rate"))
            .key(format!("{key}:conc"))
            .arg(format!("{:.3}", limits.emission_ms))
            .arg(format!("{:.3}", limits.tolerance_ms))
            .arg(limits.max_concurrent)
            .arg(lease.as_millis() as u64)
            .arg(member)
            .arg(CONCURRENCY_RETRY_HINT.as_millis() as u64)
            .arg(wanted.max(1));
        let reply =
            tokio::time::timeout(self.timeout, invocation.invoke_async::<Vec<i64>>(&mut connection)).await;
        match reply {
            Ok(Ok(reply)) if reply.len() == 4 => {
                self.available.set(1);
                Some(match (reply[0], reply[2]) {
                    // Never more than asked for, whatever the reply says.
                    (1, _) => Ok((reply[3].max(1) as u64).min(wanted.max(1))),
                    (_, 2) => Err((Limit::Concurrency, Duration::from_millis(reply[1].max(1) as u64))),
                    _ => Err((Limit::Rate, Duration::from_millis(reply[1].max(1) as u64))),
                })
            }
            Ok(Ok(reply)) => {
                tracing::error!(?reply, "quotas: unexpected reply from the Redis script");
                self.failed();
                None
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %crate::redact::shown(&e), "quotas: Redis call failed");
                self.failed();
                None
            }
            Err(_) => {
                self.failed();
                None
            }
        }
    }

    /// Gives back a concurrency lease (in the background; if it fails, the lease expires).
    pub fn release(self: &Arc<Self>, key: String, member: String) {
        let Some(mut connection) = self.connection.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let timeout = self.timeout;
        runtime.spawn(async move {
            let mut command = redis::cmd("ZREM");
            command.arg(format!("{key}:conc")).arg(member);
            let removed = command.query_async::<i64>(&mut connection);
            if !matches!(tokio::time::timeout(timeout, removed).await, Ok(Ok(_))) {
                tracing::debug!("quotas: a concurrency lease could not be given back; it will expire");
            }
        });
    }
}
