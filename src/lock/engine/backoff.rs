//! Sleep between acquisition attempts while another process holds the lock.

use std::time::Duration;

use rand::Rng;

use crate::options::LockOptions;

/// Growth factor of adaptive backoff per consecutive failed attempt.
const GROWTH: f64 = 1.5;
/// Relative jitter of adaptive backoff (±20 %).
const JITTER: f64 = 0.2;
/// Past this many failures the adaptive delay is pinned at `max` anyway; capping `n` keeps
/// `1.5^n` finite.
const MAX_EXPONENT: u32 = 64;

/// The backoff of one run of refused attempts (an actor's acquisition, from an attempt's
/// grant or an idle pause to the next: a new run starts afresh; a hand-over's grant
/// beside a backoff leaves it running, see `Phase::Attempting`); the range and strategy
/// are those of the acquisition being served
/// ([`LockOptions::with_retry_backoff`], [`LockOptions::with_adaptive_backoff`]).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    adaptive: bool,
    failures: u32,
}

impl Backoff {
    pub(crate) fn new(options: &LockOptions) -> Self {
        let (min, max) = options.retry_backoff();
        let adaptive = options.adaptive_backoff();
        Self {
            min,
            max,
            adaptive,
            failures: 0,
        }
    }

    /// Takes the range and strategy of the acquisition now served.
    pub(crate) fn follow(&mut self, options: &LockOptions) {
        (self.min, self.max) = options.retry_backoff();
        self.adaptive = options.adaptive_backoff();
    }

    /// Whether an attempt of this run was refused already.
    pub(crate) fn has_refusals(&self) -> bool {
        self.failures > 0
    }

    /// Records a failed attempt and returns how long to sleep before the next one.
    pub(crate) fn next_delay(&mut self, rng: &mut impl Rng) -> Duration {
        let delay = if self.adaptive {
            let base = self.min.as_secs_f64() * GROWTH.powi(self.failures.min(MAX_EXPONENT) as i32);
            let jittered = base * rng.random_range((1.0 - JITTER)..=(1.0 + JITTER));
            Duration::from_secs_f64(jittered.clamp(self.min.as_secs_f64(), self.max.as_secs_f64()))
        } else if self.min == self.max {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        };
        self.failures = self.failures.saturating_add(1);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{SeedableRng, rngs::StdRng};

    fn backoff(min_ms: u64, extra_ms: u64, adaptive: bool) -> Backoff {
        let min = Duration::from_millis(min_ms);
        let options = LockOptions::default()
            .with_retry_backoff(min, min + Duration::from_millis(extra_ms))
            .with_adaptive_backoff(adaptive);
        Backoff::new(&options)
    }

    proptest! {
        #[test]
        fn delays_stay_within_bounds(min in 1u64..1000, extra in 0u64..5000, adaptive: bool, seed: u64, steps in 1usize..200) {
            let mut strategy = backoff(min, extra, adaptive);
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..steps {
                let delay = strategy.next_delay(&mut rng);
                prop_assert!(delay >= strategy.min && delay <= strategy.max, "{delay:?} outside {:?}..={:?}", strategy.min, strategy.max);
            }
        }

        #[test]
        fn adaptive_grows_by_one_and_a_half_with_bounded_jitter(min in 1u64..100, seed: u64, steps in 1u32..12) {
            // A max far above min·1.5^steps so no clamping interferes.
            let mut strategy = backoff(min, 1_000_000, true);
            let mut rng = StdRng::seed_from_u64(seed);
            for n in 0..steps {
                let expected = min as f64 / 1000.0 * 1.5f64.powi(n as i32);
                let delay = strategy.next_delay(&mut rng).as_secs_f64();
                let low = (expected * 0.8).max(min as f64 / 1000.0);
                prop_assert!(delay >= low - 1e-9 && delay <= expected * 1.2 + 1e-9, "attempt {n}: {delay} not within 20 % of {expected}");
            }
        }

        #[test]
        fn adaptive_saturates_at_max(min in 1u64..50, extra in 0u64..500, seed: u64) {
            let mut strategy = backoff(min, extra, true);
            let mut rng = StdRng::seed_from_u64(seed);
            let mut last = Duration::ZERO;
            for _ in 0..200 {
                last = strategy.next_delay(&mut rng);
            }
            prop_assert_eq!(last, strategy.max);
        }
    }

    #[test]
    fn adaptive_jitter_goes_both_ways() {
        // The first delay is min·(1 ± 20 %), clamped at min: with min well inside the range
        // seen from a higher step, look at the third (min·1.5², 22.5 ms from 10 ms).
        let (mut below, mut above) = (false, false);
        for seed in 0..200 {
            let mut strategy = backoff(10, 10_000, true);
            let mut rng = StdRng::seed_from_u64(seed);
            let third = (0..3).map(|_| strategy.next_delay(&mut rng)).last();
            let third = third.map(|delay| delay.as_secs_f64() * 1000.0);
            below |= third < Some(22.5 * 0.95);
            above |= third > Some(22.5 * 1.05);
        }
        assert!(
            below && above,
            "jitter must spread delays both below and above the growth"
        );
    }

    #[test]
    fn a_backoff_follows_the_options_of_the_acquisition_served() {
        let mut strategy = backoff(10, 10, false);
        let later = LockOptions::default()
            .with_retry_backoff(Duration::from_secs(3), Duration::from_secs(3))
            .with_adaptive_backoff(true);
        strategy.follow(&later);
        let delay = strategy.next_delay(&mut StdRng::seed_from_u64(1));
        assert_eq!(delay, Duration::from_secs(3));
        assert!(strategy.adaptive);
    }

    #[test]
    fn uniform_uses_the_whole_range() {
        let mut strategy = backoff(10, 790, false);
        let mut rng = StdRng::seed_from_u64(7);
        let delays: Vec<_> = (0..1000).map(|_| strategy.next_delay(&mut rng)).collect();
        let (low, high) = (delays.iter().min().copied(), delays.iter().max().copied());
        assert!(low < Some(Duration::from_millis(50)), "{low:?}");
        assert!(high > Some(Duration::from_millis(750)), "{high:?}");
    }
}
