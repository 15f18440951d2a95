//! The one rule for clocks whose length someone else chose: a peer (a token's `expires_in`, a
//! `ttlMs` hint, `Retry-After`, a Redis PTTL, a task's TTL), a caller (`X-Request-Timeout-Ms`,
//! `_meta` `io.mcp-gateway/timeoutMs`, a JWT's `exp`) or an operator (a timeout in the
//! configuration).
//!
//! Why: `Instant + Duration` panics when the sum does not fit, and a panic in a background
//! loop once ended it for good (a token endpoint answering `expires_in: 18446744073709551615`
//! stopped the refresher: the gateway never became ready). So nothing adds a duration to an
//! instant directly: [`after`] and [`later`] cap the duration at [`MAX_HORIZON`] (one year)
//! and use `checked_add`, so they cannot panic. Durations parsed from floats go through
//! [`secs_f64`] (NaN, negative and infinite values are refused or capped, never a panic).
//!
//! Caps of their own, below the horizon, are where their value is used:
//! [`MAX_TOKEN_LIFETIME`] for upstream tokens (a token is renewed at the latest after a year,
//! whatever its endpoint claims), the task and held-exchange TTL maxima of the configuration,
//! the deadline of a server for a caller's timeout.

use std::time::{Duration, Instant};

/// One day.
pub const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// The furthest any clock is set: one year. Any longer duration is read as this.
pub const MAX_HORIZON: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// The longest an upstream token is kept, whatever `expires_in` says: one year.
pub const MAX_TOKEN_LIFETIME: Duration = MAX_HORIZON;

/// `wait`, capped at [`MAX_HORIZON`].
pub fn capped(wait: Duration) -> Duration {
    wait.min(MAX_HORIZON)
}

/// `Instant::now()` plus `wait` (capped at [`MAX_HORIZON`]); never panics.
pub fn after(wait: Duration) -> Instant {
    later(Instant::now(), wait)
}

/// `at` plus `wait` (capped at [`MAX_HORIZON`]); never panics. Should even a year not fit in
/// the platform's clock, the latest of a day and `at` itself is returned.
pub fn later(at: Instant, wait: Duration) -> Instant {
    at.checked_add(capped(wait)).or_else(|| at.checked_add(wait.min(DAY))).unwrap_or(at)
}

/// tokio's clock: `tokio::time::Instant::now()` plus `wait`, as [`after`].
pub fn after_tokio(wait: Duration) -> tokio::time::Instant {
    later_tokio(tokio::time::Instant::now(), wait)
}

/// tokio's clock: `at` plus `wait`, as [`later`].
pub fn later_tokio(at: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    at.checked_add(capped(wait)).or_else(|| at.checked_add(wait.min(DAY))).unwrap_or(at)
}

/// `ms` milliseconds as a deadline from now (see [`after`]).
pub fn after_millis(ms: u64) -> Instant {
    after(Duration::from_millis(ms))
}

/// A duration in (fractional) seconds parsed from a peer: `None` for NaN or a negative value;
/// capped at [`MAX_HORIZON`] (infinity included).
pub fn secs_f64(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).map_or(MAX_HORIZON, capped))
}

/// A token's lifetime as its endpoint stated it (`expires_in`, seconds), capped at
/// [`MAX_TOKEN_LIFETIME`]; whether it was capped.
pub fn token_lifetime(expires_in_secs: u64) -> (Duration, bool) {
    let stated = Duration::from_secs(expires_in_secs);
    (stated.min(MAX_TOKEN_LIFETIME), stated > MAX_TOKEN_LIFETIME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_max_seconds_and_millis_are_a_year_from_now() {
        let before = Instant::now();
        for wait in [Duration::from_secs(u64::MAX), Duration::from_millis(u64::MAX), Duration::MAX] {
            let at = after(wait);
            assert!(at >= before + MAX_HORIZON, "{wait:?}");
            assert!(at <= Instant::now() + MAX_HORIZON);
            let tokio_at = after_tokio(wait);
            assert!(tokio_at <= tokio::time::Instant::now() + MAX_HORIZON);
        }
        assert!(after_millis(u64::MAX) <= Instant::now() + MAX_HORIZON);
    }

    #[test]
    fn short_waits_are_kept_exactly() {
        let at = Instant::now();
        assert_eq!(later(at, Duration::from_millis(1500)), at + Duration::from_millis(1500));
        assert_eq!(later(at, Duration::ZERO), at);
        let tokio_at = tokio::time::Instant::now();
        assert_eq!(later_tokio(tokio_at, Duration::from_secs(7)), tokio_at + Duration::from_secs(7));
    }

    #[test]
    fn a_later_at_the_end_of_the_platforms_clock_stays_there_without_panicking() {
        // The last instant the platform can represent (to the second).
        let mut far = Instant::now();
        for shift in (0..63).rev() {
            while let Some(next) = far.checked_add(Duration::from_secs(1 << shift)) {
                far = next;
            }
        }
        assert_eq!(later(far, Duration::from_secs(u64::MAX)), far);
        assert_eq!(later(far, Duration::from_secs(2)), far);
    }

    #[test]
    fn floats_from_peers_never_panic() {
        assert_eq!(secs_f64(f64::NAN), None);
        assert_eq!(secs_f64(-1.0), None);
        assert_eq!(secs_f64(f64::NEG_INFINITY), None);
        assert_eq!(secs_f64(f64::INFINITY), Some(MAX_HORIZON));
        assert_eq!(secs_f64(f64::MAX), Some(MAX_HORIZON));
        assert_eq!(secs_f64(1.5), Some(Duration::from_millis(1500)));
        assert_eq!(secs_f64(0.0), Some(Duration::ZERO));
    }

    #[test]
    fn token_lifetimes_are_capped_at_a_year() {
        assert_eq!(token_lifetime(u64::MAX), (MAX_TOKEN_LIFETIME, true));
        assert_eq!(token_lifetime(3600), (Duration::from_secs(3600), false));
        assert_eq!(token_lifetime(MAX_TOKEN_LIFETIME.as_secs()), (MAX_TOKEN_LIFETIME, false));
        assert_eq!(MAX_TOKEN_LIFETIME.as_secs(), 31_536_000);
    }
}
