//! Resilience: how the outcome of an upstream call is judged, and the tower layers of the
//! per-server stack that act on that judgement.

pub mod classify;
pub mod timeout;
