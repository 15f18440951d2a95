//! The supervisor: the task that opens a persistent connection, runs the session-era
//! handshake (`initialize`, then `notifications/initialized`: these transports predate the
//! modern era) and keeps it up:
//!
//! ```text
//! connecting ──▶ ready ──▶ reconnecting ──▶ ready …
//!     │                        │
//!     └──── 10 min without a connection ──▶ failed (slow retry, every 5 min) ──▶ ready
//!     any attempt refused as 401/403 ──▶ needs_auth (slow retry) ──▶ ready
//!     gateway shutdown, or the server's stack dropped ──▶ disabled
//! ```
//!
//! Reconnects wait 1 s, doubling to 30 s, each delay jittered by ±20%
//! (`defaults.reconnect_*`). A connection counts as recovered only once it has stayed ready
//! for `reconnect_max_ms`: a server that crashes right after each handshake keeps backing
//! off (and ends `failed`) instead of being restarted every second forever.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::sync::watch;

use super::{ConnectionState, Shared, multiplexer::Live};
use crate::{
    protocol::mcp,
    upstream::{UpstreamReply, channel::ConnectError},
};

/// What the supervisor is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    Running,
    /// Gateway shutdown: the server ends `disabled`, as its metric says.
    Shutdown,
    /// Every handle is gone (a registry server's stack replaced): its successor under the
    /// same name owns the state metric from now on, so the last transition leaves it alone.
    Dropped,
}

/// Why an attempt to connect failed.
enum Failure {
    NeedsAuth(String),
    Other(String),
}

impl Shared {
    /// Connects and runs the handshake, bounded by `handshake_timeout`.
    async fn open(self: &Arc<Self>) -> Result<(Arc<Live>, &'static str), Failure> {
        let within = self.settings.handshake_timeout;
        let channel = match tokio::time::timeout(within, self.connector.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(ConnectError::NeedsAuth { status })) => {
                return Err(Failure::NeedsAuth(format!("credentials refused (HTTP {status})")));
            }
            Ok(Err(e)) => return Err(Failure::Other(e.to_string())),
            Err(_) => return Err(Failure::Other(format!("no connection within {within:?}"))),
        };
        let live = Live::start(
            channel,
            self.settings.server.clone(),
            self.metrics.dropped.clone(),
            self.list_changed.clone(),
            self.updates.clone(),
        );
        if let Ok(mut opening) = self.opening.lock() {
            *opening = Some(live.clone());
        }
        let handshake = tokio::time::timeout(within, self.handshake(&live)).await;
        if let Ok(mut opening) = self.opening.lock() {
            opening.take();
        }
        match handshake {
            Ok(Ok(version)) => Ok((live, version)),
            Ok(Err(reason)) => {
                live.close();
                Err(Failure::Other(reason))
            }
            Err(_) => {
                live.close();
                Err(Failure::Other(format!("no answer to initialize within {within:?}")))
            }
        }
    }

    /// `initialize` → `notifications/initialized`; returns the version the server chose.
    async fn handshake(&self, live: &Arc<Live>) -> Result<&'static str, String> {
        let id = self.next_id();
        let message = String::from_utf8(mcp::encode_initialize(id)).unwrap_or_default();
        let answer = live.register(id, None).ok_or("connection closed during the handshake")?;
        if !live.send(message).await {
            return Err("connection closed during the handshake".into());
        }
        let reply = answer
            .await
            .map_err(|_| "connection closed during the handshake".to_string())?
            .map_err(|e| format!("initialize failed: {e}"))?;
        let raw = match reply {
            UpstreamReply::Result(raw) => raw.into_raw(),
            UpstreamReply::Error(e) => return Err(format!("initialize refused: {} {}", e.code, e.message)),
        };
        let result = serde_json::from_str::<Value>(raw.get()).unwrap_or_default();
        if let Ok(mut offers) = self.offers.lock() {
            *offers = mcp::Offers::declared(&result);
        }
        let chosen = result.get("protocolVersion").and_then(Value::as_str).map(str::to_string);
        let version = mcp::LEGACY_VERSIONS
            .iter()
            .find(|v| Some(**v) == chosen.as_deref())
            .copied()
            .ok_or_else(|| format!("the server chose an unsupported protocol version {chosen:?}"))?;
        let initialized = String::from_utf8(mcp::encode_notification("notifications/initialized", None))
            .unwrap_or_default();
        if !live.send(initialized).await {
            return Err("connection closed during the handshake".into());
        }
        Ok(version)
    }
}

/// The supervisor: connect, serve, reconnect with backoff, until stopped.
pub(super) async fn supervise(shared: Arc<Shared>, mut stop: watch::Receiver<Stop>) {
    let settings = shared.settings.reconnect;
    let mut backoff = settings.initial;
    let mut failing_since: Option<Instant> = None;
    let mut ever_ready = false;
    let mut attempts: u64 = 0;
    // A supervisor restarted after a panic (`crate::supervise`) closes what its predecessor
    // left open and connects afresh.
    if let Some(left) = shared.live() {
        shared.set_live(None);
        left.close();
    }
    loop {
        if *stop.borrow() != Stop::Running {
            break;
        }
        attempts += 1;
        if attempts > 1 {
            shared.metrics.reconnects.inc();
        }
        let opened = tokio::select! {
            opened = shared.open() => opened,
            _ = stopped(&mut stop) => break,
        };
        let delay = match opened {
            Ok((live, version)) => {
                shared.set_live(Some(live.clone()));
                shared.transition(ConnectionState::Ready, None, |s| {
                    s.connects += 1;
                    s.protocol_version = Some(version);
                    s.first_attempt_done = true;
                });
                ever_ready = true;
                let ready_at = Instant::now();
                let mut done = live.done.subscribe();
                let ended = tokio::select! {
                    ended = done.wait_for(Option::is_some) => ended.ok().and_then(|e| (*e).clone()),
                    _ = stopped(&mut stop) => None,
                };
                shared.set_live(None);
                live.close();
                let Some(reason) = ended else {
                    live.wait_closed(Duration::from_secs(60)).await;
                    break;
                };
                if ready_at.elapsed() >= settings.max {
                    // It was stable: a fresh outage, with a fresh backoff and give-up clock.
                    backoff = settings.initial;
                    failing_since = None;
                }
                failing_since.get_or_insert_with(Instant::now);
                shared.transition(
                    ConnectionState::Reconnecting,
                    Some(format!("connection lost: {reason}")),
                    |s| {
                        s.failed_attempts = 0;
                    },
                );
                next_backoff(&mut backoff, settings.max)
            }
            Err(Failure::NeedsAuth(reason)) => {
                failing_since.get_or_insert_with(Instant::now);
                shared.transition(ConnectionState::NeedsAuth, Some(reason), |s| {
                    s.failed_attempts += 1;
                    s.first_attempt_done = true;
                });
                settings.slow_retry
            }
            Err(Failure::Other(reason)) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                let (state, delay) = if since.elapsed() >= settings.give_up_after {
                    (ConnectionState::Failed, settings.slow_retry)
                } else if ever_ready {
                    (ConnectionState::Reconnecting, next_backoff(&mut backoff, settings.max))
                } else {
                    (ConnectionState::Connecting, next_backoff(&mut backoff, settings.max))
                };
                shared.transition(state, Some(reason), |s| {
                    s.failed_attempts += 1;
                    s.first_attempt_done = true;
                });
                delay
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(&mut stop) => break,
        }
    }
    // A stop during a handshake leaves that connection here.
    let opening = shared.opening.lock().ok().and_then(|mut o| o.take());
    for live in [shared.live(), opening].into_iter().flatten() {
        shared.set_live(None);
        live.close();
        live.wait_closed(Duration::from_secs(60)).await;
    }
    let replaced = *stop.borrow() == Stop::Dropped;
    shared.transition_inner(ConnectionState::Disabled, None, !replaced, |s| s.first_attempt_done = true);
}

/// The current delay, jittered by ±20%; doubles the next one up to `max`.
fn next_backoff(backoff: &mut Duration, max: Duration) -> Duration {
    let delay = crate::clock::capped(*backoff).mul_f64(0.8 + 0.4 * fastrand::f64());
    *backoff = backoff.saturating_mul(2).min(max);
    delay
}

/// Resolves once a stop is asked for (or every owner is gone).
async fn stopped(stop: &mut watch::Receiver<Stop>) {
    let _ = stop.wait_for(|s| *s != Stop::Running).await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use serde_json::Map;

    use super::*;
    use crate::{
        config::ReconnectSettings,
        upstream::{
            UpstreamError, UpstreamRequest,
            channel::{Connector, MessageChannel},
            connection::{Connection, ConnectionSettings, test_families as families},
        },
    };
    use tower::Service;

    /// Refuses every connection, as `refusal` says, counting the attempts.
    struct Refusing {
        refusal: ConnectError,
        attempts: Arc<AtomicU64>,
    }

    impl Connector for Refusing {
        fn connect(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>
        {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let refusal = self.refusal.clone();
            Box::pin(async move { Err(refusal) })
        }

        fn describe(&self) -> String {
            "refusing".into()
        }
    }

    fn quick(server: &str) -> ConnectionSettings {
        ConnectionSettings {
            server: server.into(),
            transport: "websocket",
            reconnect: ReconnectSettings {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(2),
                give_up_after: Duration::from_secs(3600),
                slow_retry: Duration::from_secs(3600),
            },
            handshake_timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn refused_credentials_wait_for_the_slow_retry_while_an_outage_backs_off_quickly() {
        let metrics = families();
        let auth_attempts = Arc::new(AtomicU64::new(0));
        let down_attempts = Arc::new(AtomicU64::new(0));
        let auth = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::NeedsAuth { status: 401 },
                attempts: auth_attempts.clone(),
            }),
            quick("auth"),
            &metrics,
        );
        let down = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::Unreachable("refused".into()),
                attempts: down_attempts.clone(),
            }),
            quick("down"),
            &metrics,
        );
        // While the unreachable server is retried 50 times on its 1-2 ms backoff, the one that
        // refused the gateway's credentials is not tried again (its slow retry is an hour).
        while down_attempts.load(Ordering::Relaxed) < 50 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(auth_attempts.load(Ordering::Relaxed), 1);
        assert_eq!(auth.state(), ConnectionState::NeedsAuth);
        assert_eq!(down.state(), ConnectionState::Connecting);
        let refused = auth.clone().call(UpstreamRequest::new("tools/list", Map::new())).await;
        assert!(matches!(refused, Err(UpstreamError::NotConnected { state: "needs_auth" })), "{refused:?}");
        let gauge = |server: &str, state: &str| metrics.state.with_label_values(&[server, state]).get();
        assert_eq!((gauge("auth", "needs_auth"), gauge("auth", "connecting")), (1, 0));
        assert_eq!(auth.report()["last_error"], "credentials refused (HTTP 401)");
    }

    #[tokio::test]
    async fn an_outage_longer_than_the_give_up_time_ends_failed() {
        let metrics = families();
        let mut settings = quick("gone");
        settings.reconnect.give_up_after = Duration::from_millis(20);
        let attempts = Arc::new(AtomicU64::new(0));
        let connection = Connection::start(
            Box::new(Refusing {
                refusal: ConnectError::Unreachable("refused".into()),
                attempts: attempts.clone(),
            }),
            settings,
            &metrics,
        );
        let mut status = connection.shared.status.subscribe();
        let _ = status.wait_for(|s| s.state == ConnectionState::Failed).await;
        let tried = attempts.load(Ordering::Relaxed);
        assert!(tried >= 2, "{tried}");
        let refused = connection.clone().call(UpstreamRequest::new("tools/list", Map::new())).await;
        assert!(matches!(refused, Err(UpstreamError::NotConnected { state: "failed" })), "{refused:?}");
        connection.shutdown(Duration::from_secs(5)).await;
        assert_eq!(attempts.load(Ordering::Relaxed), tried, "a failed server waits for its slow retry");
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_bounded_jitter() {
        let mut backoff = Duration::from_secs(1);
        let delays: Vec<Duration> =
            (0..8).map(|_| next_backoff(&mut backoff, Duration::from_secs(30))).collect();
        for (delay, nominal) in delays.iter().zip([1u64, 2, 4, 8, 16, 30, 30, 30]) {
            let nominal = Duration::from_secs(nominal);
            assert!(
                *delay >= nominal.mul_f64(0.8) && *delay <= nominal.mul_f64(1.2),
                "{delay:?} vs {nominal:?}"
            );
        }
    }
}
