//! One clock for every process of a check: `CLOCK_MONOTONIC`, which on Linux is
//! system-wide (unlike `std::time::Instant`, whose values cannot be compared across
//! processes).

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on the machine's monotonic clock (0 if it cannot be read, which no Linux
/// does; the parent then finds every section at time 0 and reports the run as broken).
pub(crate) fn now() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |spec| {
        let secs = u64::try_from(spec.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(spec.tv_nsec()).unwrap_or(0);
        secs * 1_000_000_000 + nanos
    })
}
