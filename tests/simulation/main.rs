//! Deterministic simulation: three lock managers (five or eight in half the schedules) over
//! one shared in-memory store under Tokio's paused clock, driven by a seed through
//! acquisitions — of mutexes, semaphore permits, read and write locks, and multi-locks over
//! several mutexes in any order — timeouts, cancellations, releases and drops with local
//! waiters queued, elections with slow bound actors, shutdowns at any point, store faults at
//! any point (hang then heal, stall then apply, errors), operators deleting records and
//! changing a semaphore's count, every process paused while another takes the expired
//! places, and a holder paused past its deadline with its release or detach on the way
//! (under a fairness bound longer than the renew deadline in a quarter of the schedules).
//! After every step the history is checked (see `history` for the rules, `wakes` for whom
//! each release wakes); at the end, that everything falls quiet.
//!
//! ```text
//! cargo test --all-features --test simulation                     # the seeds CI runs
//! MONGOLOCK_SIM_SCHEDULES=20000 cargo test --release --all-features --test simulation
//! MONGOLOCK_SIM_SEED=1234 cargo test --all-features --test simulation replay -- --nocapture
//! ```
//!
//! A failing schedule prints the command that replays it: the same seed gives the same
//! schedule, event for event (`the_same_seed_replays_the_same_schedule`).

mod history;
mod recorder;
mod wakes;
mod world;

use std::time::Instant as WallClock;

use world::World;

/// Schedules per run unless `MONGOLOCK_SIM_SCHEDULES` says otherwise; split over the shards.
const DEFAULT_SCHEDULES: u64 = 4_000;
const SHARDS: usize = 4;

/// What one schedule left: its trace and the violations found.
struct Outcome {
    trace: Vec<String>,
    violations: Vec<String>,
    report: String,
}

fn run(seed: u64) -> Outcome {
    quiet_injected_panics();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a runtime: {error}"),
    };
    runtime.block_on(async {
        mongolock::testing::seed_random(seed);
        let world = World::new(seed).await.run().await;
        let history = world.history();
        Outcome {
            trace: history.trace().to_vec(),
            violations: history.violations().to_vec(),
            report: history.render(60),
        }
    })
}

/// Lock actors panic on purpose in some schedules; their messages would drown the report.
fn quiet_injected_panics() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|message| message.contains("injected panic"));
            if !injected {
                default(info);
            }
        }));
    });
}

/// The seed of schedule `index` after `base` (spread by splitmix64, so neighbouring
/// indices give unrelated schedules).
fn seed_of(base: u64, index: u64) -> u64 {
    let mut z = base.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    let value = value.trim();
    match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

fn failure(seed: u64, outcome: &Outcome) -> String {
    format!(
        "schedule {seed:#x} broke a guarantee:\n{}\nlast events:\n{}\nreplay: MONGOLOCK_SIM_SEED={seed:#x} cargo test --all-features --test simulation replay -- --nocapture",
        outcome.violations.join("\n"),
        outcome.report
    )
}

fn shard(index: u64) {
    let schedules = env_u64("MONGOLOCK_SIM_SCHEDULES").unwrap_or(DEFAULT_SCHEDULES);
    let base = env_u64("MONGOLOCK_SIM_BASE").unwrap_or(0);
    let started = WallClock::now();
    let mut ran = 0;
    for schedule in (index..schedules).step_by(SHARDS) {
        let seed = seed_of(base, schedule);
        let outcome = run(seed);
        assert!(outcome.violations.is_empty(), "{}", failure(seed, &outcome));
        ran += 1;
    }
    eprintln!(
        "simulation shard {index}: {ran} schedules, no violation, in {:.1?}",
        started.elapsed()
    );
}

#[test]
fn schedules_shard_0() {
    shard(0);
}

#[test]
fn schedules_shard_1() {
    shard(1);
}

#[test]
fn schedules_shard_2() {
    shard(2);
}

#[test]
fn schedules_shard_3() {
    shard(3);
}

/// Schedules that broke a guarantee once, found from other bases than the default run's,
/// replayed on every run. (A change to how the world draws its schedules changes what a
/// seed runs: then they are only more schedules.)
const FOUND: [(u64, &str); 3] = [
    (
        0x3e6984a1bf383e85,
        "a grant that reached its caller past its loss deadline was returned",
    ),
    (
        0x881244c7249f82c2,
        "a waiter that let a late grant go asked again behind its process's later waiters",
    ),
    (
        0x61d07b7cfbb92b32,
        "a leader paused past its deadline, told as it resumed after another was elected",
    ),
];

#[test]
fn schedules_found_before_hold() {
    for (seed, what) in FOUND {
        let outcome = run(seed);
        assert!(
            outcome.violations.is_empty(),
            "({what}) {}",
            failure(seed, &outcome)
        );
    }
}

/// `MONGOLOCK_SIM_SEED=… cargo test --test simulation replay -- --nocapture` prints the
/// schedule's whole trace and fails if it breaks a guarantee.
#[test]
fn replay() {
    let Some(seed) = env_u64("MONGOLOCK_SIM_SEED") else {
        return;
    };
    let outcome = run(seed);
    for line in &outcome.trace {
        println!("{line}");
    }
    assert!(outcome.violations.is_empty(), "{}", failure(seed, &outcome));
}

/// One seed, one schedule: two runs of a seed give the same trace, so a failure found
/// once can be replayed and debugged.
///
/// The same events at each instant, that is: tasks woken together by one `watch` send
/// (every guard of a read lease told of its loss at once) run in an order tokio draws
/// from a generator it seeds per runtime, which only `tokio_unstable` lets a test fix.
#[test]
fn the_same_seed_replays_the_same_schedule() {
    for seed in [1, 0xfeed, seed_of(7, 3)] {
        let (first, second) = (run(seed), run(seed));
        assert!(first.trace.len() > 50, "a schedule did next to nothing");
        assert_eq!(
            by_instant(first.trace),
            by_instant(second.trace),
            "seed {seed:#x} ran two different schedules"
        );
    }
}

/// A trace with the lines of each instant sorted (see the test above).
fn by_instant(mut trace: Vec<String>) -> Vec<String> {
    let instant = |line: &String| line.split_whitespace().next().map(str::to_owned);
    trace
        .chunk_by_mut(|a, b| instant(a) == instant(b))
        .for_each(<[String]>::sort);
    trace
}

/// Looks for violations over many seeds without stopping at the first, and says after how
/// many schedules each kind of violation was first found (`--ignored`; for measuring how
/// quickly the simulator finds a bug).
#[test]
#[ignore = "a search, not a check: run it by hand"]
fn hunt() {
    let schedules = env_u64("MONGOLOCK_SIM_SCHEDULES").unwrap_or(DEFAULT_SCHEDULES);
    let base = env_u64("MONGOLOCK_SIM_BASE").unwrap_or(0);
    // Per kind: after how many schedules first, its seed and wording, in how many schedules.
    let mut found: std::collections::BTreeMap<String, (u64, u64, String, u64)> = Default::default();
    for schedule in 0..schedules {
        let seed = seed_of(base, schedule);
        let outcome = run(seed);
        let mut kinds = std::collections::BTreeSet::new();
        for violation in &outcome.violations {
            kinds.insert(kind_of(violation));
            found
                .entry(kind_of(violation))
                .or_insert((schedule + 1, seed, violation.clone(), 0));
        }
        for kind in kinds {
            if let Some(entry) = found.get_mut(&kind) {
                entry.3 += 1;
            }
        }
    }
    println!("{schedules} schedules from base {base:#x}:");
    for (kind, (after, seed, example, schedules)) in &found {
        println!(
            "  {kind}: in {schedules} schedules, first after {after} (seed {seed:#x}): {example}"
        );
    }
}

/// A violation's kind: its wording without the numbers and names.
fn kind_of(violation: &str) -> String {
    let text = violation.split(" VIOLATION ").nth(1).unwrap_or(violation);
    for (needle, kind) in [
        // The more specific wordings first.
        ("a woken manager that cannot go", "woken manager cannot go"),
        ("lets in", "release woke another than the next"),
        (
            "not every manager",
            "release with nobody listed woke only some",
        ),
        (
            "a hand-over that granted",
            "granting hand-over woke managers",
        ),
        (
            "let go past its deadline",
            "local pass of a hold let go past its deadline",
        ),
        ("partial multi-lock", "partial multi-lock left held"),
        ("already lost", "multi-lock acquired with a member lost"),
        ("not told of a loss hold it", "more than N permits untold"),
        (
            "permits within the loss margin",
            "more than N permits within the margin",
        ),
        ("reader/writer conflict", "writer beside another holder"),
        (
            "by a local pass",
            "local-pass token below one issued before",
        ),
        ("the store issued token", "store token not increasing"),
        ("delivered twice", "token delivered twice"),
        ("holds it untold", "granted while another holds untold"),
        ("plus the margin", "granted within the loss margin"),
        ("not above", "token not increasing"),
        ("past the hold's deadline", "release Ok past the deadline"),
        ("answered Ok", "release Ok after a foreign grant"),
        ("not told of its loss", "not told by the deadline"),
        ("no owner", "lease held by nobody"),
        ("overlaps", "election terms overlap"),
        ("answered after", "answer late"),
        ("still wait", "acquisition never answered"),
        (
            "store calls after its shutdown",
            "store calls after shutdown",
        ),
        ("tasks alive", "tasks left after shutdown"),
        ("timers after", "timers left after shutdown"),
        (
            "operator freed",
            "local pass long after an operator's deletion",
        ),
        ("no store call granted", "token from nowhere"),
        (
            "after the store was last asked",
            "local pass past the fairness bound",
        ),
        ("said others had waited", "local pass while others starve"),
    ] {
        if text.contains(needle) {
            return kind.to_owned();
        }
    }
    text.chars().take(60).collect()
}
