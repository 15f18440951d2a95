//! Every long-lived background loop of the gateway runs under [`spawn`]: a loop that panics is
//! logged (an error line naming it), counted (`mcp_gateway_background_restarts_total{loop}`,
//! one series per [`Loop`], a fixed set) and started again from scratch after a short backoff
//! ([`RESTART_BASE`], doubling to [`RESTART_MAX`] while it keeps dying at once). A loop that
//! keeps dying — [`DYING_RESTARTS`] restarts within [`DYING_WINDOW`] — makes `/readyz` answer
//! not ready, naming it.
//!
//! Why: a panic in a spawned task ends only that task, silently. The refresher once died on a
//! token endpoint's `expires_in` and the gateway stayed "registry not loaded yet" with no tools
//! for every server; the same panic in a later renewal ended all refreshes without a word.
//!
//! A loop that returns (its owner is gone) is not restarted. The debug build can make loops
//! panic mid-run, to test all this against the real binary (ignored by release builds):
//! `MCP_GATEWAY_DEBUG_PANIC_ONCE=refresher,prober,…` once each,
//! `MCP_GATEWAY_DEBUG_PANIC_ALWAYS=drift,…` on every run, and
//! `MCP_GATEWAY_DEBUG_RESTART_BASE_MS` replaces [`RESTART_BASE`].

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{
        Arc, LazyLock, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

/// The first restart of a loop waits this long; each restart of a loop that died at once
/// (within [`RESTART_MAX`] of its start) waits twice as long as the one before.
pub const RESTART_BASE: Duration = Duration::from_secs(1);
/// The longest wait before a restart.
pub const RESTART_MAX: Duration = Duration::from_secs(60);
/// Restarts of one loop within [`DYING_WINDOW`] that make the gateway not ready.
pub const DYING_RESTARTS: usize = 5;
/// See [`DYING_RESTARTS`].
pub const DYING_WINDOW: Duration = Duration::from_secs(300);
/// The debug build's fault injection (see the module doc).
pub const PANIC_ONCE_ENV: &str = "MCP_GATEWAY_DEBUG_PANIC_ONCE";
/// The debug build's fault injection: these loops panic on every run.
pub const PANIC_ALWAYS_ENV: &str = "MCP_GATEWAY_DEBUG_PANIC_ALWAYS";
/// The debug build's first restart wait, in milliseconds (instead of [`RESTART_BASE`]).
pub const RESTART_BASE_ENV: &str = "MCP_GATEWAY_DEBUG_RESTART_BASE_MS";
/// The debug build's variables (the configuration overlay skips them).
pub const DEBUG_ENV: &[&str] = &[PANIC_ONCE_ENV, PANIC_ALWAYS_ENV, RESTART_BASE_ENV];

/// The supervised loops: the metric's label values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// The `tools/list` and registry refresh ([`crate::gateway::refresh::Refresher`]).
    Refresher,
    /// The Redis registry invalidation subscription.
    Invalidations,
    /// A server's `list_changed` signal into the gateway's hub.
    ListChanges,
    /// A streamable-HTTP server's change stream.
    ChangeStream,
    /// Hidden servers and policy generation, for callers' list-change streams.
    Availability,
    /// A persistent server's recoveries, refreshing its tools.
    Recoveries,
    /// A server's health prober (open breaker).
    Prober,
    /// A persistent connection's supervisor (connect, reconnect, stop).
    Connection,
    /// The shared breakers' Redis writer and reader.
    SharedBreakers,
    /// The policy file's reload.
    PolicyReload,
    /// The registry drift check.
    Drift,
    /// The idle back-channel session sweeper.
    SessionSweeper,
    /// A server's `notifications/resources/updated` to the subscribed callers, and its
    /// re-subscriptions after a reconnect.
    ResourceUpdates,
    /// `serve --watch`: the configuration file, reloaded when it changes.
    ConfigWatch,
}

impl Loop {
    pub const ALL: &[Loop] = &[
        Loop::Refresher,
        Loop::Invalidations,
        Loop::ListChanges,
        Loop::ChangeStream,
        Loop::Availability,
        Loop::Recoveries,
        Loop::Prober,
        Loop::Connection,
        Loop::SharedBreakers,
        Loop::PolicyReload,
        Loop::Drift,
        Loop::SessionSweeper,
        Loop::ResourceUpdates,
        Loop::ConfigWatch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Loop::Refresher => "refresher",
            Loop::Invalidations => "invalidations",
            Loop::ListChanges => "list_changes",
            Loop::ChangeStream => "change_stream",
            Loop::Availability => "availability",
            Loop::Recoveries => "recoveries",
            Loop::Prober => "prober",
            Loop::Connection => "connection",
            Loop::SharedBreakers => "shared_breakers",
            Loop::PolicyReload => "policy_reload",
            Loop::Drift => "drift",
            Loop::SessionSweeper => "session_sweeper",
            Loop::ResourceUpdates => "resource_updates",
            Loop::ConfigWatch => "config_watch",
        }
    }

    fn index(self) -> usize {
        Loop::ALL.iter().position(|l| *l == self).unwrap_or(0)
    }
}

/// Restart counts and recent restarts of every loop.
pub struct Supervision {
    loops: Vec<LoopState>,
    /// The first restart's wait ([`RESTART_BASE`]; shorter in unit tests).
    restart_base: Duration,
}

#[derive(Default)]
struct LoopState {
    restarts: AtomicU64,
    recent: Mutex<VecDeque<Instant>>,
    /// Armed by [`PANIC_ONCE_ENV`]; cleared by the one panic it causes.
    panic_once: AtomicBool,
    /// Set by [`PANIC_ALWAYS_ENV`].
    panic_always: AtomicBool,
}

/// The process's supervision.
pub fn global() -> &'static Arc<Supervision> {
    static GLOBAL: LazyLock<Arc<Supervision>> = LazyLock::new(|| Arc::new(Supervision::from_env()));
    &GLOBAL
}

/// Runs the loop `start` makes on tokio, under the [`global`] supervision.
pub fn spawn<F, Fut>(which: Loop, start: F) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    global().clone().spawn(which, start)
}

impl Supervision {
    pub fn new() -> Self {
        Self::with_restart_base(RESTART_BASE)
    }

    /// With `base` as the first restart's wait.
    pub fn with_restart_base(base: Duration) -> Self {
        Self { loops: Loop::ALL.iter().map(|_| LoopState::default()).collect(), restart_base: base }
    }

    /// With the faults and restart wait of the debug build's [`DEBUG_ENV`].
    fn from_env() -> Self {
        if !cfg!(debug_assertions) {
            return Self::new();
        }
        let base = std::env::var(RESTART_BASE_ENV).ok().and_then(|ms| ms.trim().parse::<u64>().ok());
        let supervision = Self::with_restart_base(base.map_or(RESTART_BASE, Duration::from_millis));
        let named = |var: &str| -> Vec<Loop> {
            let names = std::env::var(var).unwrap_or_default();
            names
                .split(',')
                .filter_map(|name| Loop::ALL.iter().find(|l| l.name() == name.trim()).copied())
                .collect()
        };
        for which in named(PANIC_ONCE_ENV) {
            supervision.arm_panic_once(which);
        }
        for which in named(PANIC_ALWAYS_ENV) {
            supervision.loops[which.index()].panic_always.store(true, Ordering::Release);
        }
        supervision
    }

    /// Makes `which` panic once, mid-run (after its first poll that waits).
    pub fn arm_panic_once(&self, which: Loop) {
        self.loops[which.index()].panic_once.store(true, Ordering::Release);
    }

    /// Restarts of `which` since start.
    pub fn restarts(&self, which: Loop) -> u64 {
        self.loops[which.index()].restarts.load(Ordering::Acquire)
    }

    /// The loops that keep dying ([`DYING_RESTARTS`] within [`DYING_WINDOW`]), with their
    /// recent restarts.
    pub fn dying(&self) -> Vec<(Loop, usize)> {
        let now = Instant::now();
        Loop::ALL
            .iter()
            .filter_map(|which| {
                let mut recent = self.loops[which.index()].recent.lock().unwrap_or_else(|p| p.into_inner());
                prune(&mut recent, now);
                (recent.len() >= DYING_RESTARTS).then_some((*which, recent.len()))
            })
            .collect()
    }

    fn record_restart(&self, which: Loop) {
        let state = &self.loops[which.index()];
        state.restarts.fetch_add(1, Ordering::AcqRel);
        let now = Instant::now();
        let mut recent = state.recent.lock().unwrap_or_else(|p| p.into_inner());
        prune(&mut recent, now);
        // Bounded: older entries than the window are gone, and only the count matters.
        if recent.len() >= DYING_RESTARTS * 4 {
            recent.pop_front();
        }
        recent.push_back(now);
    }

    /// Runs the loop `start` makes; see the module doc.
    pub fn spawn<F, Fut>(self: Arc<Self>, which: Loop, mut start: F) -> tokio::task::JoinHandle<()>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(async move {
            let mut backoff = self.restart_base;
            loop {
                let started = Instant::now();
                let state = &self.loops[which.index()];
                let armed = state.panic_once.swap(false, Ordering::AcqRel)
                    || state.panic_always.load(Ordering::Acquire);
                let run = PanicOnce { inner: Box::pin(start()), armed };
                match tokio::spawn(run).await {
                    Ok(()) => return,
                    Err(e) if e.is_panic() => {
                        let panic = e.into_panic();
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "(no message)".into());
                        if started.elapsed() >= RESTART_MAX {
                            backoff = self.restart_base;
                        }
                        self.record_restart(which);
                        tracing::error!(
                            background_loop = which.name(),
                            panic = %message,
                            restart_in_ms = backoff.as_millis() as u64,
                            "background loop panicked; restarting it"
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = backoff.saturating_mul(2).min(RESTART_MAX);
                    }
                    // Cancelled: the runtime is shutting down.
                    Err(_) => return,
                }
            }
        })
    }
}

impl Default for Supervision {
    fn default() -> Self {
        Self::new()
    }
}

fn prune(recent: &mut VecDeque<Instant>, now: Instant) {
    while recent.front().is_some_and(|at| now.saturating_duration_since(*at) > DYING_WINDOW) {
        recent.pop_front();
    }
}

/// A loop's future that, when armed, panics at its first poll that waits (mid-run).
struct PanicOnce<Fut> {
    inner: Pin<Box<Fut>>,
    armed: bool,
}

impl<Fut: Future<Output = ()>> Future for PanicOnce<Fut> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let polled = self.inner.as_mut().poll(cx);
        if polled.is_pending() && self.armed {
            self.armed = false;
            panic!("injected panic (debug fault injection)");
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// A loop that reports each start, then waits for ever.
    fn reporting(
        started: mpsc::UnboundedSender<u32>,
    ) -> impl FnMut() -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let mut runs = 0;
        move || {
            runs += 1;
            let (run, started) = (runs, started.clone());
            Box::pin(async move {
                let _ = started.send(run);
                std::future::pending::<()>().await;
            })
        }
    }

    /// Restarts within milliseconds: these tests count runs, not time.
    fn fast() -> Arc<Supervision> {
        Arc::new(Supervision::with_restart_base(Duration::from_millis(1)))
    }

    #[tokio::test]
    async fn a_loop_that_panics_once_is_counted_and_runs_again() {
        for which in Loop::ALL {
            let supervision = fast();
            supervision.arm_panic_once(*which);
            let (sender, mut started) = mpsc::unbounded_channel();
            let handle = supervision.clone().spawn(*which, reporting(sender));
            assert_eq!(started.recv().await, Some(1), "{which:?}: the first run");
            assert_eq!(started.recv().await, Some(2), "{which:?}: the restart");
            assert_eq!(supervision.restarts(*which), 1, "{which:?}");
            assert!(supervision.dying().is_empty());
            handle.abort();
        }
    }

    #[tokio::test]
    async fn a_loop_that_keeps_dying_is_reported_and_a_finished_one_is_not_restarted() {
        let supervision = fast();
        let (sender, mut started) = mpsc::unbounded_channel();
        let mut runs = 0u32;
        let handle = supervision.clone().spawn(Loop::Drift, move || {
            runs += 1;
            let (run, sender) = (runs, sender.clone());
            async move {
                let _ = sender.send(run);
                if run <= DYING_RESTARTS as u32 {
                    panic!("dies at once");
                }
            }
        });
        for run in 1..=DYING_RESTARTS as u32 + 1 {
            assert_eq!(started.recv().await, Some(run));
        }
        // The last run returned: the supervisor ends and starts nothing more.
        handle.await.expect("the supervisor ends");
        assert_eq!(started.recv().await, None);
        assert_eq!(supervision.restarts(Loop::Drift), DYING_RESTARTS as u64);
        assert_eq!(supervision.dying(), vec![(Loop::Drift, DYING_RESTARTS)]);
        assert_eq!(supervision.restarts(Loop::Refresher), 0);
    }

    #[test]
    fn loop_names_are_distinct() {
        let names: std::collections::BTreeSet<&str> = Loop::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(names.len(), Loop::ALL.len());
    }
}
