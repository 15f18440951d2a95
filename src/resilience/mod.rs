//! Resilience: how the outcome of an upstream call is judged ([`classify`]), and the per-server
//! call stack that acts on that judgement. The stack is built in one place, [`stack`], where its
//! order and the reasons for it are written down; its layers are [`deadline`], [`retry`],
//! [`breaker`], [`limit`], [`metered`], [`traced`] and [`timeout`]. Beside it,
//! [`health_probe`] probes a server whose breaker is open, and [`shared`] shares breaker state
//! across the fleet. Around the stack, for each tool: [`cache`] (read-only results, in-flight
//! sharing), [`fallback`], [`truncate`].

pub mod breaker;
pub mod cache;
pub mod classify;
pub mod deadline;
pub mod fallback;
pub mod health_probe;
pub mod limit;
pub mod metered;
pub mod retry;
pub mod shared;
pub mod stack;
pub mod step;
pub mod timeout;
pub mod traced;
pub mod truncate;
