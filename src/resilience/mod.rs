//! Resilience: how the outcome of an upstream call is judged, and the tower layers of the
//! per-server stack that act on that judgement. The stack, outermost first:
//! [`deadline`] → [`retry`] (budgeted) → [`breaker`] → [`limit`] (load shedding) →
//! [`timeout`] (per attempt) → transport; beside it, [`health_probe`] probes a server whose
//! breaker is open. Retry sits outside the breaker so every attempt is
//! seen by it and an open breaker is never retried. Around the stack, for each tool:
//! [`cache`] (read-only results, in-flight sharing), [`fallback`], [`truncate`].

pub mod breaker;
pub mod cache;
pub mod classify;
pub mod deadline;
pub mod fallback;
pub mod health_probe;
pub mod limit;
pub mod retry;
pub mod shared;
pub mod timeout;
pub mod truncate;
