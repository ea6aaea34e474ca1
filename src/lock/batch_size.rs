//! How many renewals go in one store call, learnt from how long the calls take.
//!
//! The right size depends on the server. MongoDB looks each `_id` of a batch up in its index,
//! so a batch's cost is a round trip plus a little per lease and bigger batches are cheaper
//! per lease; another server (the test server's `$in`) may cost more per lease the longer the
//! list, so that past some size bigger batches are slower per lease and, at tens of thousands
//! of leases, slower than the cadence allows. No constant suits both, so the size is found by
//! hill climbing on the measured time per lease:
//!
//! - every [`SAMPLES`] batches that filled at least three quarters of the current size, the
//!   mean time per lease is compared with that of the size before: better by more than
//!   [`TOLERANCE`], the size keeps moving the same way (× or ÷ [`STEP`]); worse, it turns
//!   back; about the same, it grows (fewer commands for the same cost);
//! - a batch that took more than a [`LATENCY_SHARE`] of the time its leases had left before
//!   their loss deadlines halves the size at once, whatever the climb says: a renewal must
//!   come back well before the deadline it is racing.
//!
//! Partly filled batches say little about the cost of a full one and are not counted.

use std::time::Duration;

/// The size the climb starts from.
const START: usize = 1_000;
/// The smallest size the climb goes down to.
const MIN: usize = 16;
/// The factor of one step of the climb.
const STEP: f64 = 1.5;
/// Full batches measured at one size before the next step.
const SAMPLES: u32 = 4;
/// Differences in time per lease smaller than this share are noise.
const TOLERANCE: f64 = 0.05;
/// The share of its leases' time left that one batch may take.
const LATENCY_SHARE: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Grow,
    Shrink,
}

/// The current batch size and what the climb has measured.
#[derive(Debug, Clone)]
pub(crate) struct BatchSize {
    limit: usize,
    max: usize,
    direction: Direction,
    /// Seconds per lease at the size before the current one.
    previous_cost: Option<f64>,
    /// Full batches at the current size: their count, leases and total time.
    samples: u32,
    leases: usize,
    took: Duration,
}

impl BatchSize {
    /// A climb between [`MIN`] and `max` (the store's largest batch; at least 1).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            limit: START.clamp(MIN.min(max), max),
            max,
            direction: Direction::Grow,
            previous_cost: None,
            samples: 0,
            leases: 0,
            took: Duration::ZERO,
        }
    }

    /// The most renewals to put in the next store call.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A batch of `leases` renewals was answered after `took`; its leases had at least
    /// `time_left` before their loss deadlines when it was sent.
    pub(crate) fn record(&mut self, leases: usize, took: Duration, time_left: Duration) {
        if took > time_left / LATENCY_SHARE {
            let halved = (leases.min(self.limit) / 2).max(MIN.min(self.max));
            if halved < self.limit {
                tracing::debug!(
                    from = self.limit,
                    to = halved,
                    ?took,
                    ?time_left,
                    "renewal batches take too long for their deadlines; halving them"
                );
                self.limit = halved;
                self.direction = Direction::Shrink;
                self.restart_samples(None);
            }
            return;
        }
        if leases.saturating_mul(4) < self.limit.saturating_mul(3) {
            return;
        }
        self.samples += 1;
        self.leases += leases;
        self.took += took;
        if self.samples < SAMPLES {
            return;
        }
        #[allow(clippy::cast_precision_loss)]
        let cost = self.took.as_secs_f64() / self.leases as f64;
        if let Some(previous) = self.previous_cost {
            if cost > previous * (1.0 + TOLERANCE) {
                self.direction = match self.direction {
                    Direction::Grow => Direction::Shrink,
                    Direction::Shrink => Direction::Grow,
                };
            } else if cost >= previous * (1.0 - TOLERANCE) {
                self.direction = Direction::Grow;
            }
        }
        self.step();
        self.restart_samples(Some(cost));
    }

    fn step(&mut self) {
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let next = match self.direction {
            Direction::Grow => (self.limit as f64 * STEP).ceil() as usize,
            Direction::Shrink => (self.limit as f64 / STEP).floor() as usize,
        };
        self.limit = next.clamp(MIN.min(self.max), self.max);
    }

    fn restart_samples(&mut self, cost: Option<f64>) {
        self.previous_cost = cost;
        self.samples = 0;
        self.leases = 0;
        self.took = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds full batches costing `cost(size)` until the size settles; returns the sizes.
    fn climb(sizer: &mut BatchSize, rounds: usize, cost: impl Fn(usize) -> Duration) -> Vec<usize> {
        let mut sizes = Vec::new();
        for _ in 0..rounds {
            let size = sizer.limit();
            sizer.record(size, cost(size), Duration::from_secs(60));
            sizes.push(sizer.limit());
        }
        sizes
    }

    fn micros(us: f64) -> Duration {
        Duration::from_secs_f64(us / 1e6)
    }

    #[test]
    fn a_round_trip_plus_a_little_per_lease_grows_to_the_store_limit() {
        // MongoDB-like: 1 ms per command, 5 µs per lease.
        let mut sizer = BatchSize::new(10_000);
        #[allow(clippy::cast_precision_loss)]
        let sizes = climb(&mut sizer, 200, |n| micros(1_000.0 + 5.0 * n as f64));
        assert_eq!(sizer.limit(), 10_000, "{sizes:?}");
    }

    #[test]
    fn a_cost_per_lease_growing_with_the_list_settles_near_the_cheapest_size() {
        // Fitted to the test server's renewals (250 leases 9.6 ms, 1,000 61 ms): 1 ms per
        // command and a per-lease cost growing with the list; cheapest per lease near 170.
        let mut sizer = BatchSize::new(10_000);
        #[allow(clippy::cast_precision_loss)]
        let cost = |n: usize| micros(1_000.0 + 26.0 * n as f64 + 0.034 * (n * n) as f64);
        let sizes = climb(&mut sizer, 400, cost);
        let settled = &sizes[sizes.len() - 40..];
        assert!(
            settled.iter().all(|size| (60..=600).contains(size)),
            "{settled:?}"
        );
    }

    #[test]
    fn a_batch_too_slow_for_its_deadlines_halves_the_size_at_once() {
        let mut sizer = BatchSize::new(10_000);
        let start = sizer.limit();
        sizer.record(start, Duration::from_millis(600), Duration::from_secs(2));
        assert_eq!(sizer.limit(), start / 2);
        sizer.record(
            start / 2,
            Duration::from_millis(400),
            Duration::from_secs(2),
        );
        assert_eq!(
            sizer.limit(),
            start / 2,
            "within a quarter of the time left"
        );
        for _ in 0..20 {
            sizer.record(
                sizer.limit(),
                Duration::from_secs(5),
                Duration::from_secs(2),
            );
        }
        assert_eq!(sizer.limit(), MIN, "never below the floor");
    }

    #[test]
    fn partial_batches_do_not_move_the_size() {
        let mut sizer = BatchSize::new(10_000);
        for _ in 0..100 {
            sizer.record(10, Duration::from_millis(1), Duration::from_secs(60));
        }
        assert_eq!(sizer.limit(), START);
    }

    #[test]
    fn a_store_without_bulk_writes_stays_at_one() {
        let mut sizer = BatchSize::new(1);
        assert_eq!(sizer.limit(), 1);
        climb(&mut sizer, 50, |_| Duration::from_millis(1));
        assert_eq!(sizer.limit(), 1);
        sizer.record(1, Duration::from_secs(5), Duration::from_secs(1));
        assert_eq!(sizer.limit(), 1);
    }
}
