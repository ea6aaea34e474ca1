//! How many renewals go in one store call, from how long the calls take.
//!
//! The renewer sends everything that is due at once, up to this size, so the size bounds
//! what one command costs, not how many renewals go out. Two limits, both measured:
//!
//! - **Deadlines.** A renewal must come back well before the loss deadline it is racing:
//!   a batch holds no more leases than the measured time per lease says can be renewed
//!   within a [`LATENCY_SHARE`] of the time left of the lease it is sized for (a bulk
//!   batch's last, an urgent one's first). A batch that took longer
//!   than that (a timeout counts as its whole time) replaces what was measured before: the
//!   server has changed, and the next batches shrink at once.
//! - **Cost.** A batch takes about `a + b·n + c·n²` for `n` leases: a round trip, a cost
//!   per lease, and on some servers a cost per lease that grows with the list (the test
//!   server matches lease ids against the whole list for each document; MongoDB looks each
//!   up in a sorted set). The three are fitted to recent batches by least squares, and where
//!   the time per lease, `a/n + b + c·n`, is lowest (`√(a/c)`) caps the size: past it,
//!   bigger batches renew fewer leases per second. It caps only where the fit says it is
//!   clearly cheaper per lease than the size the deadlines allow; where the fit finds no
//!   such minimum (MongoDB: `c` about 0), a flat curve, or too few distinct sizes to go
//!   on, only the deadlines cap.
//!
//! Recent batches count for more: each new one keeps [`DECAY`] of what was measured.

use std::time::Duration;

/// The size before anything has been measured.
const START: usize = 1_000;
/// The smallest size: below it the round trip, not the leases, is what a command costs.
const MIN: usize = 16;
/// The smallest size the cost fit may ask for: a fit that puts the cheapest size below it
/// is more likely noise than a server that renews a hundred leases faster one by one.
const COST_FLOOR: usize = 128;
/// The share of its leases' time left that one batch may take.
const LATENCY_SHARE: u32 = 4;
/// How much of the measurements so far survive each new one.
const DECAY: f64 = 0.95;
/// How much cheaper per lease a smaller size must be, by the fit, to be chosen over the
/// size the deadlines allow: less, and noise on a flat curve would decide.
const CLEARLY_CHEAPER: f64 = 1.25;
/// Sizes are fitted in thousands of leases, which keeps the sums of the fit well scaled.
const SCALE: f64 = 1_000.0;

/// What the manager has measured of its renewal commands.
#[derive(Debug, Clone)]
pub(crate) struct BatchSize {
    max: usize,
    /// Decayed sums of leases renewed and seconds taken: the mean time per lease.
    leases: f64,
    seconds: f64,
    /// Decayed sums for the least-squares fit of seconds against `x` = leases / [`SCALE`]:
    /// `Σxᵏ` for k = 0..=4 and `Σt·xᵏ` for k = 0..=2.
    x_powers: [f64; 5],
    t_x_powers: [f64; 3],
}

impl BatchSize {
    /// Sizes between [`MIN`] and `max` (the store's largest batch; at least 1).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            leases: 0.0,
            seconds: 0.0,
            x_powers: [0.0; 5],
            t_x_powers: [0.0; 3],
        }
    }

    /// The most renewals to put in a store call whose leases have `time_left` before
    /// their loss deadlines.
    pub(crate) fn limit(&self, time_left: Duration) -> usize {
        let floor = MIN.min(self.max);
        if self.leases <= 0.0 || self.seconds <= 0.0 {
            return START.clamp(floor, self.max);
        }
        let per_lease = self.seconds / self.leases;
        let budget = (time_left / LATENCY_SHARE).as_secs_f64();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let in_time = ((budget / per_lease).min(usize::MAX as f64) as usize).clamp(floor, self.max);
        self.cheaper_than(in_time)
            .unwrap_or(in_time)
            .clamp(floor, self.max)
    }

    /// A smaller size than `size` at which the fitted time per lease is clearly lower (by
    /// [`CLEARLY_CHEAPER`]): on a curve that is flat within the noise, more leases per
    /// command is better.
    fn cheaper_than(&self, size: usize) -> Option<usize> {
        let [a, b, c] = self.fit()?;
        // (With `&&` instead, a fit with one of them negative reaches `√(a/c)`, a NaN, which
        // `min` turns into `usize::MAX`: never below `size`, so the answer is `None` all the
        // same; only `a` exactly 0 would differ. The mutant survives as equivalent.)
        if a <= 0.0 || c <= 0.0 {
            return None;
        }
        let per_lease = |n: usize| {
            #[allow(clippy::cast_precision_loss)]
            let x = n as f64 / SCALE;
            a / x + b + c * x
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let cheapest = (((a / c).sqrt() * SCALE).min(usize::MAX as f64) as usize)
            .max(COST_FLOOR.min(self.max));
        // (`<=` for either `<` changes only exact ties: at `cheapest == size` the second
        // test fails anyway, and a float tie in the second is never met; both mutants
        // survive as equivalent.)
        (cheapest < size && per_lease(cheapest) * CLEARLY_CHEAPER < per_lease(size))
            .then_some(cheapest)
    }

    /// `[a, b, c]` of `t ≈ a + b·x + c·x²` by least squares, if the sizes measured are
    /// spread enough to say.
    fn fit(&self) -> Option<[f64; 3]> {
        let s = &self.x_powers;
        let matrix = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]];
        let det = determinant(&matrix);
        // Relative to the scale of its entries: near zero when the sizes barely differ
        // (and NaN, never a usable fit, fails the comparison too). (`>=` differs only where
        // the two are exactly equal, which measured sizes never make: the mutant survives
        // as equivalent.)
        let spread = det.abs() > 1e-9 * s[0] * s[2] * s[4];
        // Cramer's rule: each coefficient is the determinant with its column replaced by
        // the right-hand side, over the matrix's.
        spread.then(|| {
            std::array::from_fn(|column| {
                let mut replaced = matrix;
                for (row, t) in replaced.iter_mut().zip(self.t_x_powers) {
                    row[column] = t;
                }
                determinant(&replaced) / det
            })
        })
    }

    /// A batch of `leases` renewals, sent with `time_left` before the last of their loss
    /// deadlines (the one its size was chosen for), was answered (or timed out) after `took`.
    pub(crate) fn record(&mut self, leases: usize, took: Duration, time_left: Duration) {
        if leases == 0 {
            return;
        }
        let late = took > time_left / LATENCY_SHARE;
        let kept = if late { 0.0 } else { DECAY };
        let seconds = took.as_secs_f64();
        #[allow(clippy::cast_precision_loss)]
        let count = leases as f64;
        self.leases = self.leases * kept + count;
        self.seconds = self.seconds * kept + seconds;
        // A late batch says the server changed, but one point fits no curve: the fit keeps
        // its history and learns from the late batch like any other.
        let x = count / SCALE;
        let mut power = 1.0;
        for (k, sum) in self.x_powers.iter_mut().enumerate() {
            *sum = *sum * DECAY + power;
            if let Some(t_sum) = self.t_x_powers.get_mut(k) {
                *t_sum = *t_sum * DECAY + seconds * power;
            }
            power *= x;
        }
        tracing::trace!(
            leases,
            ?took,
            ?time_left,
            micros_per_lease = self.seconds / self.leases * 1e6,
            limit_for_time_left = self.limit(time_left),
            "renewal batch measured"
        );
    }
}

fn determinant(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

#[cfg(test)]
#[allow(clippy::cast_precision_loss)]
mod tests {
    use super::*;

    const TWO_SECONDS: Duration = Duration::from_secs(2);

    /// A command's time for `n` leases: `a + b·n + c·n²` microseconds.
    fn costing(a: f64, b: f64, c: f64) -> impl Fn(usize) -> Duration {
        move |n| Duration::from_secs_f64((a + b * n as f64 + c * (n * n) as f64) / 1e6)
    }

    /// Sends batches as the renewer does: as many as are queued (`queued(round)`) up to the
    /// size allowed for `time_left`, each costing `cost(size)`; returns the sizer and the
    /// sizes sent.
    fn run(
        rounds: usize,
        time_left: Duration,
        queued: impl Fn(usize) -> usize,
        cost: impl Fn(usize) -> Duration,
    ) -> (BatchSize, Vec<usize>) {
        let mut sizer = BatchSize::new(10_000);
        let sizes = (0..rounds)
            .map(|round| {
                let size = sizer.limit(time_left).min(queued(round).max(1));
                sizer.record(size, cost(size), time_left);
                size
            })
            .collect();
        (sizer, sizes)
    }

    /// Backlogs that vary as they do under load: between 100 and 10,000.
    fn varied(round: usize) -> usize {
        [100, 2_500, 10_000, 700, 6_000, 300, 10_000, 1_500][round % 8]
    }

    fn full(_: usize) -> usize {
        10_000
    }

    /// Fitted to the test server's renewals of uuid lease ids: 1 ms a command, 20 µs a
    /// lease, and 0.02 µs more per lease for each lease in the list.
    fn test_server(n: usize) -> Duration {
        costing(1_000.0, 20.0, 0.02)(n)
    }

    #[test]
    fn a_round_trip_plus_a_little_per_lease_reaches_the_store_limit() {
        // MongoDB-like: 1 ms per command, 5 µs per lease; a quarter of 2 s fits 10,000.
        let (sizer, _) = run(40, TWO_SECONDS, varied, costing(1_000.0, 5.0, 0.0));
        assert_eq!(sizer.limit(TWO_SECONDS), 10_000);
    }

    #[test]
    fn a_cost_per_lease_growing_with_the_list_caps_at_the_cheapest_size() {
        // √(a/c) = √(1,000 / 0.02) ≈ 224.
        let (sizer, _) = run(60, TWO_SECONDS, varied, test_server);
        let limit = sizer.limit(TWO_SECONDS);
        assert!((128..=400).contains(&limit), "{limit}");
    }

    #[test]
    fn batches_stay_within_a_quarter_of_the_time_left() {
        // 200 µs a lease: a quarter of 2 s fits 2,500.
        let cost = costing(0.0, 200.0, 0.0);
        let (_, sizes) = run(40, TWO_SECONDS, full, &cost);
        for &size in &sizes[5..] {
            assert!(
                cost(size) <= TWO_SECONDS / LATENCY_SHARE,
                "{size}: {sizes:?}"
            );
        }
    }

    #[test]
    fn a_stall_shrinks_the_next_batches_at_once() {
        let (mut sizer, _) = run(10, TWO_SECONDS, full, costing(0.0, 20.0, 0.0));
        let before = sizer.limit(TWO_SECONDS);
        // One batch timed out: it took all of its time left.
        sizer.record(before, TWO_SECONDS, TWO_SECONDS);
        let after = sizer.limit(TWO_SECONDS);
        assert!(after * 2 < before, "{before} -> {after}");
    }

    #[test]
    fn less_time_left_means_smaller_batches() {
        let (sizer, _) = run(10, TWO_SECONDS, full, costing(0.0, 50.0, 0.0));
        let relaxed = sizer.limit(TWO_SECONDS);
        let pressed = sizer.limit(Duration::from_millis(200));
        assert!(pressed * 5 < relaxed, "{relaxed} vs {pressed}");
        assert_eq!(sizer.limit(Duration::ZERO), MIN);
    }

    #[test]
    fn one_size_only_fits_no_curve() {
        let (sizer, _) = run(20, Duration::from_secs(60), |_| 500, test_server);
        assert_eq!(sizer.fit(), None);
        assert_eq!(sizer.cheaper_than(10_000), None);
    }

    /// A sizer fitted to exact points of `cost` (none of them late).
    fn fitted(cost: impl Fn(usize) -> Duration) -> BatchSize {
        let mut sizer = BatchSize::new(10_000);
        for _ in 0..4 {
            for n in [100, 1_000, 5_000, 10_000, 300, 2_000] {
                sizer.record(n, cost(n), Duration::from_secs(3_600));
            }
        }
        sizer
    }

    #[test]
    fn the_cost_cap_is_the_fitted_cheapest_size_and_only_where_clearly_cheaper() {
        let sizer = fitted(test_server);
        // √(a/c) = √(1,000 / 0.02) ≈ 224 leases, at about 29 µs a lease.
        let cheapest = sizer.cheaper_than(10_000);
        assert!(
            cheapest.is_some_and(|size| (220..=228).contains(&size)),
            "{cheapest:?}"
        );
        // 300 leases cost about 29.3 µs each: not clearly more.
        assert_eq!(sizer.cheaper_than(300), None);
        // Never a size above the one asked about: that one is what the deadlines allow.
        assert_eq!(sizer.cheaper_than(20), None);
        assert_eq!(sizer.cheaper_than(200), None);
    }

    #[test]
    fn the_cheapest_size_is_weighed_with_its_round_trip_share() {
        // No per-lease term: at √(a/c) ≈ 224 leases the round trip's share (a/n) is half of
        // the cost, so 400 leases (10.5 µs each against 8.9 µs) are not clearly dearer.
        let sizer = fitted(costing(1_000.0, 0.0, 0.02));
        assert_eq!(sizer.cheaper_than(400), None);
        assert!(sizer.cheaper_than(10_000).is_some());
    }

    #[test]
    fn a_curve_without_a_minimum_caps_nothing() {
        // Cheaper per lease the more leases: a fit with c < 0 has no cheapest size.
        let sizer = fitted(costing(1_000.0, 20.0, -0.000_5));
        assert_eq!(sizer.cheaper_than(10_000), None);
        // Nor has one with a < 0 (no round trip to share out).
        let sizer = fitted(costing(-200.0, 20.0, 0.02));
        assert_eq!(sizer.cheaper_than(10_000), None);
    }

    /// The fit recovers the coefficients of exact points (in seconds, `x` in thousands of
    /// leases), and refuses sizes within a few percent of one another: too close to say
    /// how the cost grows.
    #[test]
    fn the_fit_recovers_a_cost_curve_from_sizes_spread_enough() {
        let [a, b, c] = fitted(test_server).fit().expect("spread sizes fit");
        // 1 ms, 20 µs a lease (20 ms a thousand), 0.02 µs a lease squared (20 ms a
        // thousand squared).
        for (got, want) in [(a, 1e-3), (b, 20e-3), (c, 20e-3)] {
            assert!((got - want).abs() < want * 1e-6, "{got} for {want}");
        }
        let measured = |sizes: [usize; 3]| {
            let mut sizer = BatchSize::new(10_000);
            for _ in 0..4 {
                for n in sizes {
                    sizer.record(n, test_server(n), Duration::from_secs(3_600));
                }
            }
            sizer.fit()
        };
        // Spread is relative: small batches fit as well as large ones.
        let [_, small_b, _] = measured([100, 200, 300]).expect("small sizes fit");
        assert!((small_b - 20e-3).abs() < 20e-9, "{small_b}");
        assert_eq!(measured([1_000, 1_025, 1_050]), None, "sizes 5 % apart");
    }

    /// A batch that took more than its share of the time left replaces what was measured
    /// (the server changed); one that took exactly its share is on time and adds to it.
    #[test]
    fn only_a_batch_past_its_share_of_the_time_left_replaces_the_measurements() {
        let fast = || run(10, TWO_SECONDS, |_| 1_000, costing(0.0, 20.0, 0.0)).0;
        let share = TWO_SECONDS / LATENCY_SHARE;
        let mut late = fast();
        // 1 ms a lease: a quarter of 2 s fits 500.
        late.record(1_000, Duration::from_secs(1), TWO_SECONDS);
        assert_eq!(late.limit(TWO_SECONDS), 500);
        let mut on_time = fast();
        // Half a millisecond a lease on its own would allow 1,000; with the fast history,
        // more.
        on_time.record(1_000, share, TWO_SECONDS);
        assert!(
            on_time.limit(TWO_SECONDS) > 1_000,
            "{}",
            on_time.limit(TWO_SECONDS)
        );
    }

    #[test]
    fn batches_answered_in_no_time_count_as_nothing_measured() {
        let mut sizer = BatchSize::new(10_000);
        sizer.record(100, Duration::ZERO, TWO_SECONDS);
        assert_eq!(sizer.limit(TWO_SECONDS), START);
    }

    #[test]
    fn a_store_without_bulk_writes_stays_at_one() {
        let mut sizer = BatchSize::new(1);
        assert_eq!(sizer.limit(TWO_SECONDS), 1);
        sizer.record(1, Duration::from_secs(5), Duration::from_secs(1));
        assert_eq!(sizer.limit(TWO_SECONDS), 1);
    }
}
