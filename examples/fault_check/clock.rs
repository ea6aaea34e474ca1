//! One clock for every process of a run: `CLOCK_MONOTONIC`, which on Linux is system-wide
//! (unlike `std::time::Instant`, whose values cannot be compared across processes) and keeps
//! running while a process is stopped.

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on the machine's monotonic clock.
pub(crate) fn now() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(spec) => {
            let secs = u64::try_from(spec.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(spec.tv_nsec()).unwrap_or(0);
            secs * 1_000_000_000 + nanos
        }
        // CLOCK_MONOTONIC exists on every Linux; a failure here would make every
        // comparison meaningless, so stop loudly.
        Err(error) => panic!("clock_gettime(CLOCK_MONOTONIC) failed: {error}"),
    }
}

/// Milliseconds, for printing nanosecond figures.
pub(crate) fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// Signed milliseconds between two clock readings.
pub(crate) fn ms_between(from: u64, to: u64) -> f64 {
    (to as f64 - from as f64) / 1e6
}

pub(crate) const MS: u64 = 1_000_000;
pub(crate) const SEC: u64 = 1_000_000_000;
