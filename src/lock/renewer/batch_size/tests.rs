//! The batch size's tests: against modelled store costs, what it learns from each command and how
//! big a batch it allows.

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
