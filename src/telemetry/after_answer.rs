//! Work that belongs to a call but not to its answer's latency — the call's JSON log line —
//! runs after the answer has left: it is spawned onto the runtime, and the runtime reaches it
//! only once the connection task that made the answer has written it (hyper writes and
//! flushes a response in the same poll that produced it). Formatting a log line is about 5k
//! instructions, kept this way off the path of every answer.
//!
//! Nothing is lost at shutdown: pending work is counted, and [`drain`] waits for it after the
//! server has stopped. Outside a runtime (a unit test, a drop during runtime teardown) the
//! work runs at once.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Deferred work spawned and not yet run.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Runs `work` after the current task's answer has gone out (see the module docs).
pub fn defer(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let pending = Pending::new();
            runtime.spawn(async move {
                work();
                drop(pending);
            });
        }
        Err(_) => work(),
    }
}

/// Counts one piece of deferred work until it ran or was dropped unrun (runtime teardown).
struct Pending;

impl Pending {
    fn new() -> Self {
        PENDING.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING.fetch_sub(1, Ordering::Release);
    }
}

/// How much deferred work has not run yet.
fn pending() -> usize {
    PENDING.load(Ordering::Acquire)
}

/// Yields until every piece of deferred work has run (bounded: at most `max_yields` yields,
/// so a runtime that cannot run it does not hang shutdown). Returns what is still pending.
pub async fn drain(max_yields: usize) -> usize {
    for _ in 0..max_yields {
        if pending() == 0 {
            return 0;
        }
        tokio::task::yield_now().await;
    }
    pending()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn outside_a_runtime_the_work_runs_at_once() {
        let ran = Arc::new(Mutex::new(false));
        let flag = ran.clone();
        defer(move || *flag.lock().unwrap() = true);
        assert!(*ran.lock().unwrap());
    }

    #[test]
    fn deferred_work_runs_after_the_current_task_and_drain_waits_for_it() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = order.clone();
        runtime.block_on(async move {
            let later = seen.clone();
            defer(move || later.lock().unwrap().push("deferred"));
            seen.lock().unwrap().push("answer");
            // (Other tests of this process may have work pending too: the order is the check.)
            drain(1000).await;
            seen.lock().unwrap().push("drained");
        });
        assert_eq!(*order.lock().unwrap(), ["answer", "deferred", "drained"]);
    }
}
