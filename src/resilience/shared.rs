//! Circuit breaker state shared by a fleet of gateway instances through Redis (opt-in:
//! `shared_breakers = true` with `redis_url`).
//!
//! What is shared, and why each rule is there:
//! - **The open period.** An instance that trips from closed writes
//!   `mcp:{breakers}:open:<server>` with the period as its TTL (`SET NX`: the first trip
//!   defines it). Peers poll every 200 ms and stay away until it expires, so a dead server is
//!   learnt once for the whole fleet.
//! - **Recovery does not depend on one instance.** After the open period any instance with
//!   traffic may probe, but only one at a time fleet-wide: it must win
//!   `SET mcp:{breakers}:probe:<server> NX PX <open_base_ms>`. A failed probe re-opens the
//!   prober alone (its own growing backoff) and leaves the claim to expire, so the fleet sends
//!   at most one probe per base open period; it does not extend the fleet's open period, so an
//!   instance whose own path to the server is broken cannot keep a healthy server blocked for
//!   the others. A successful probe bumps `mcp:{breakers}:recovered:<server>`: every open peer
//!   then probes (one at a time, through the claim) instead of returning to full traffic at once;
//!   it also deletes the open key. With health probes (`breaker.probe_interval_ms`, the default)
//!   callers' calls are never probes: one instance per interval wins
//!   `SET mcp:{breakers}:health:<server> NX PX <interval>` and probes, and after a peer's
//!   recovery every open instance probes once on its own ([`super::health_probe`]).
//! - **Operator actions apply to the fleet.** An open by hand sets
//!   `mcp:{breakers}:forced:<server>`; a close by hand deletes it with the open and probe keys
//!   and bumps `mcp:{breakers}:reset:<server>`; every instance follows.
//! - **Changes made while Redis was away are reconciled.** Transitions that could not be
//!   written are kept (bounded) and written, in order, when Redis answers again; an open
//!   period already over is dropped. Meanwhile each instance's breaker works alone and probes
//!   without claims.
//!
//! Every key carries the `{breakers}` hash tag, so one pipeline reads them all on a Redis
//! Cluster too; the connection (plain, TLS, cluster) comes from [`crate::redis_link`]. Servers built at run time (from registry entries) join with [`SharedBreakers::register`].

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use prometheus::IntCounterVec;
use tokio::sync::mpsc;

use super::breaker::{Breaker, Transition, TransitionSender};
use crate::redis_link::{RedisConnection, RedisLink, Timeouts};

/// How often the fleet's keys are read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Redis calls on this path must be fast or skipped.
const REDIS_TIMEOUT: Duration = Duration::from_millis(200);
/// Transitions kept while Redis is away (the oldest are dropped beyond this).
const MAX_PENDING: usize = 1024;

fn key(kind: &str, server: &str) -> String {
    format!("mcp:{{breakers}}:{kind}:{server}")
}

type Breakers = Arc<Mutex<BTreeMap<Arc<str>, Arc<Breaker>>>>;

/// The fleet's view of every breaker of this instance.
pub struct SharedBreakers {
    breakers: Breakers,
    sender: TransitionSender,
    client: RedisLink,
    instance: Arc<str>,
    /// The connection health-probe claims go through (made on first use, dropped on error).
    claims: tokio::sync::Mutex<Option<RedisConnection>>,
    errors: IntCounterVec,
}

impl SharedBreakers {
    /// Starts the task that writes this instance's transitions and reads the fleet's.
    pub fn start(client: RedisLink, errors: IntCounterVec) -> Arc<Self> {
        let instance: Arc<str> = format!("{}-{:08x}", std::process::id(), fastrand::u32(..)).into();
        let (sender, receiver) = mpsc::unbounded_channel();
        let breakers = Breakers::default();
        // Supervised: a restarted task takes over the queue of transitions and reads the
        // fleet afresh.
        let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
        let (link, id, shared, failures) =
            (client.clone(), instance.clone(), breakers.clone(), errors.clone());
        crate::supervise::spawn(crate::supervise::Loop::SharedBreakers, move || {
            let task = Fleet {
                client: link.clone(),
                instance: id.clone(),
                breakers: shared.clone(),
                errors: failures.clone(),
                seen: BTreeMap::new(),
            };
            let receiver = receiver.clone();
            async move { task.run(receiver.lock_owned().await).await }
        });
        Arc::new(Self { breakers, sender, client, instance, claims: Default::default(), errors })
    }

    /// Claims the fleet's health probe of `server` for one `interval`
    /// (`SET mcp:{breakers}:health:<server> NX PX <interval>`): `true` when this instance
    /// probes. When Redis cannot answer, this instance probes on its own (as its breaker works
    /// alone then).
    pub async fn claim_health_probe(&self, server: &str, interval: std::time::Duration) -> bool {
        let mut connection = self.claims.lock().await;
        if connection.is_none() {
            *connection = connect(&self.client).await;
        }
        let Some(con) = connection.as_mut() else {
            self.errors.with_label_values(&["claim"]).inc();
            return true;
        };
        let claimed: redis::RedisResult<Option<String>> = bounded(
            redis::cmd("SET")
                .arg(key("health", server))
                .arg(self.instance.as_ref())
                .arg("NX")
                .arg("PX")
                .arg(interval.as_millis().max(1) as u64)
                .query_async(con),
        )
        .await;
        match claimed {
            Ok(won) => won.is_some(),
            Err(e) => {
                tracing::debug!(server, error = %crate::redact::shown(&e), "health probe claim failed; probing alone");
                self.errors.with_label_values(&["claim"]).inc();
                *connection = None;
                true
            }
        }
    }

    /// Shares `breaker` from now on.
    pub fn register(&self, breaker: &Arc<Breaker>) {
        breaker.set_notifier(self.sender.clone());
        if let Ok(mut breakers) = self.breakers.lock() {
            breakers.insert(breaker.server.clone(), breaker.clone());
        }
    }

    /// Stops following the breaker of `server` (a reload removed it).
    pub fn unregister(&self, server: &str) {
        if let Ok(mut breakers) = self.breakers.lock() {
            breakers.remove(server);
        }
    }
}

async fn connect(client: &RedisLink) -> Option<RedisConnection> {
    let timeouts = Timeouts { connect: Duration::from_millis(250), response: REDIS_TIMEOUT, retries: 1 };
    client.connect(timeouts).await.ok()
}

/// Counters last seen per server, to act on changes only (never on history).
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    recovered: i64,
    reset: i64,
}

struct Fleet {
    client: RedisLink,
    instance: Arc<str>,
    breakers: Breakers,
    errors: IntCounterVec,
    seen: BTreeMap<Arc<str>, Seen>,
}

impl Fleet {
    fn snapshot(&self) -> Vec<Arc<Breaker>> {
        self.breakers.lock().map(|b| b.values().cloned().collect()).unwrap_or_default()
    }

    fn set_claims_needed(&self, needed: bool) {
        self.snapshot().iter().for_each(|b| b.set_claims_needed(needed));
    }

    async fn run(
        mut self,
        mut transitions: tokio::sync::OwnedMutexGuard<mpsc::UnboundedReceiver<(Arc<str>, Transition)>>,
    ) {
        let mut connection: Option<RedisConnection> = None;
        let mut pending: VecDeque<(Arc<str>, Transition)> = VecDeque::new();
        let mut ticker = tokio::time::interval(POLL_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut warned = false;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                event = transitions.recv() => match event {
                    Some(event) => pending.push_back(event),
                    None => return,
                },
            }
            // Everything queued is written before the fleet is read, so an instance never
            // reads back an older state over its own newer one.
            while let Ok(event) = transitions.try_recv() {
                pending.push_back(event);
            }
            if pending.len() > MAX_PENDING {
                pending.drain(..pending.len() - MAX_PENDING);
            }
            if connection.is_none() {
                connection = connect(&self.client).await;
                match (&connection, warned) {
                    (None, _) => {
                        self.errors.with_label_values(&["connect"]).inc();
                        if !warned {
                            tracing::warn!(
                                "Redis unreachable: circuit breakers work locally until it is back"
                            );
                            warned = true;
                        }
                        self.set_claims_needed(false);
                        continue;
                    }
                    (Some(_), true) => {
                        tracing::info!(
                            pending = pending.len(),
                            "Redis reachable again: circuit breaker state is shared"
                        );
                        warned = false;
                    }
                    (Some(_), false) => {}
                }
            }
            let Some(con) = connection.as_mut() else { continue };
            let result = async {
                while let Some((server, transition)) = pending.front().cloned() {
                    write(con, &self.instance, &server, transition).await.map_err(|e| ("publish", e))?;
                    pending.pop_front();
                }
                self.read(con).await.map_err(|e| ("poll", e))?;
                self.claim(con).await.map_err(|e| ("claim", e))
            }
            .await;
            match result {
                Ok(()) => self.set_claims_needed(true),
                Err((operation, e)) => {
                    self.errors.with_label_values(&[operation]).inc();
                    tracing::debug!(error = %crate::redact::shown(&e), operation, "shared breaker state: Redis call failed");
                    self.set_claims_needed(false);
                    connection = None;
                }
            }
        }
    }

    /// Applies the fleet's state to every local breaker.
    async fn read(&mut self, con: &mut RedisConnection) -> redis::RedisResult<()> {
        let breakers = self.snapshot();
        if breakers.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for breaker in &breakers {
            let server = &breaker.server;
            pipe.cmd("GET").arg(key("open", server));
            pipe.cmd("PTTL").arg(key("open", server));
            pipe.cmd("EXISTS").arg(key("forced", server));
            pipe.cmd("GET").arg(key("recovered", server));
            pipe.cmd("GET").arg(key("reset", server));
        }
        type Row = (Option<String>, i64, bool, Option<i64>, Option<i64>);
        let rows: Vec<Row> = bounded(pipe.query_async(con)).await?;
        let now = Instant::now();
        for (breaker, (owner, pttl, forced, recovered, reset)) in breakers.iter().zip(rows) {
            let now_seen = Seen { recovered: recovered.unwrap_or(0), reset: reset.unwrap_or(0) };
            let before = self.seen.insert(breaker.server.clone(), now_seen);
            if let Some(before) = before {
                if now_seen.reset != before.reset && !forced {
                    breaker.apply_forced_close();
                }
                if now_seen.recovered != before.recovered {
                    breaker.apply_fleet_recovered();
                }
            }
            if forced && !breaker.is_forced_open() {
                breaker.apply_forced_open();
            } else if !forced && breaker.is_forced_open() {
                breaker.apply_forced_close();
            }
            if let Some(owner) = owner
                && pttl > 0
                && *owner != *self.instance
            {
                // A PTTL is Redis's to say: the clock rule caps it (`clock`).
                breaker
                    .apply_fleet_open(crate::clock::later(now, Duration::from_millis(pttl.unsigned_abs())));
            }
        }
        Ok(())
    }

    /// Claims the fleet's single probe for every breaker that would like to probe.
    async fn claim(&self, con: &mut RedisConnection) -> redis::RedisResult<()> {
        for breaker in self.snapshot() {
            if !breaker.take_probe_wish() {
                continue;
            }
            let hold = breaker.settings().open_base_ms.max(1);
            let won: Option<String> = bounded(
                redis::cmd("SET")
                    .arg(key("probe", &breaker.server))
                    .arg(self.instance.as_ref())
                    .arg("NX")
                    .arg("PX")
                    .arg(hold)
                    .query_async(con),
            )
            .await?;
            if won.is_some() {
                tracing::debug!(server = %breaker.server, "won the fleet's probe claim");
                breaker.grant_probe();
            }
        }
        Ok(())
    }
}

/// Writes one transition of this instance.
async fn write(
    con: &mut RedisConnection,
    instance: &str,
    server: &str,
    transition: Transition,
) -> redis::RedisResult<()> {
    match transition {
        Transition::Tripped { until } => {
            let left = until.saturating_duration_since(Instant::now()).as_millis() as u64;
            if left == 0 {
                return Ok(()); // An open period that ended while Redis was away.
            }
            let _: Option<String> = bounded(
                redis::cmd("SET")
                    .arg(key("open", server))
                    .arg(instance)
                    .arg("NX")
                    .arg("PX")
                    .arg(left)
                    .query_async(con),
            )
            .await?;
        }
        Transition::Recovered => {
            let mut pipe = redis::pipe();
            // The open period ends with the recovery (a health probe can succeed within it).
            pipe.cmd("DEL").arg(key("probe", server)).arg(key("open", server)).ignore();
            pipe.cmd("INCR").arg(key("recovered", server)).ignore();
            bounded(pipe.query_async::<()>(con)).await?;
        }
        Transition::ForcedOpen => {
            bounded(redis::cmd("SET").arg(key("forced", server)).arg(instance).query_async::<()>(con))
                .await?;
        }
        Transition::ForcedClosed => {
            let mut pipe = redis::pipe();
            pipe.cmd("DEL")
                .arg(key("forced", server))
                .arg(key("open", server))
                .arg(key("probe", server))
                .ignore();
            pipe.cmd("INCR").arg(key("reset", server)).ignore();
            bounded(pipe.query_async::<()>(con)).await?;
        }
    }
    Ok(())
}

async fn bounded<T>(call: impl std::future::Future<Output = redis::RedisResult<T>>) -> redis::RedisResult<T> {
    tokio::time::timeout(REDIS_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| Err(redis::RedisError::from((redis::ErrorKind::Io, "timeout"))))
}
