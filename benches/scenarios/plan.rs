//! What the parent runs: every measurement as a child process with its arguments, how many
//! repetitions and how long each may take, for the smoke (under `cargo test`), quick and full
//! modes.

use crate::job::{Job, Mode, args, job};

/// The S4 task counts.
pub(crate) const S4_TASKS: [usize; 3] = [1, 8, 64];
/// The S5 lock counts.
pub(crate) const S5_LOCKS: [usize; 3] = [1_000, 10_000, 50_000];
/// The S1 systems.
pub(crate) const S1_SYSTEMS: [&str; 5] = ["mongolock", "floor", "dl", "peer", "memory"];
/// Repetitions of S1 in a full run: the ratio to the floor is the smallest effect measured.
const S1_FULL_REPS: usize = 5;
/// The S3 systems; `mongolock-fifo` is `mongolock` with `Fairness::ArrivalOrder`.
pub(crate) const S3_SYSTEMS: [&str; 6] = [
    "mongolock",
    "mongolock-bound800",
    "mongolock-fifo",
    "mongolock-random",
    "dl",
    "peer",
];

/// The P3 mixes: 10 % writes drawn per operation, or 10 % of the tasks writing only.
/// P3's workloads; `roles-fifo` is `roles` with `Fairness::ArrivalOrder`; `roles-bound800` is
/// `roles` under the fairness rule as it was before the bound (a bound of 800 ms, the
/// backoff's maximum): the same-run baseline of issue 25's row; `roles-floor` is `roles` on
/// one in-process FIFO lock (`tokio::sync::RwLock`, no store): what strict arrival order
/// costs with nothing else, the floor of the arrival-order row.
pub(crate) const P3_MIXES: [&str; 5] = [
    "ops",
    "roles",
    "roles-fifo",
    "roles-bound800",
    "roles-floor",
];

/// What a P3 mix's suffix stands for: the `p3` child's extra arguments.
const P3_VARIANTS: [(&str, &str); 3] = [
    ("-bound800", " fairness_bound_ms=800"),
    ("-fifo", " fairness=arrival"),
    ("-floor", " lock=tokio"),
];

/// The `p3` child's arguments naming `mix`: its base mix and the options of its suffix.
fn p3_mix_args(mix: &str) -> String {
    P3_VARIANTS
        .iter()
        .find_map(|(suffix, extra)| {
            mix.strip_suffix(suffix)
                .map(|base| format!("mix={base}{extra}"))
        })
        .unwrap_or_else(|| format!("mix={mix}"))
}

/// Every job of `mode`.
#[allow(clippy::too_many_lines)]
pub(crate) fn jobs(mode: Mode) -> Vec<Job> {
    let (reps, s1_cycles, s2_cycles, s4_ms, s3_ms, s3_warmup) = match mode {
        Mode::Smoke => (1, 30, 2_000, 300, 1_000, 200),
        Mode::Quick => (1, 300, 20_000, 1_500, 3_000, 1_000),
        Mode::Full => (3, 1_000, 50_000, 3_000, 10_000, 1_000),
    };
    let mut jobs = Vec::new();
    let s1_reps = if mode == Mode::Full {
        S1_FULL_REPS
    } else {
        reps
    };
    for system in S1_SYSTEMS
        .iter()
        .chain(&["paired", "acquire-vs-try", "server-cpu"])
    {
        jobs.push(job(
            "s1",
            &format!("s1/{system}"),
            &args(&format!(
                "s1 system={system} cycles={s1_cycles} warmup={}",
                s1_cycles / 10
            )),
            s1_reps,
            120,
        ));
    }
    let leftover_cycles = if mode == Mode::Smoke { 500 } else { 10_000 };
    jobs.push(job(
        "s1",
        "s1/leftovers",
        &args(&format!("leftovers cycles={leftover_cycles}")),
        reps,
        60,
    ));
    jobs.push(job(
        "s2",
        "s2",
        &args(&format!("s2 cycles={s2_cycles} batches=5")),
        reps,
        60,
    ));
    for tasks in S4_TASKS {
        if mode == Mode::Smoke && tasks > 8 {
            continue;
        }
        for system in ["mongolock", "floor"] {
            jobs.push(job(
                "s4",
                &format!("s4/{system}/{tasks}"),
                &args(&format!("s4 system={system} tasks={tasks} millis={s4_ms}")),
                reps,
                60,
            ));
        }
    }
    for system in S3_SYSTEMS {
        jobs.push(job(
            "s3",
            &format!("s3/{system}"),
            &args(&format!(
                "s3 system={system} tasks=64 critical_ms=1 warmup_ms={s3_warmup} millis={s3_ms}"
            )),
            reps,
            (s3_ms + s3_warmup) / 1000 + 60,
        ));
    }
    let (cadence, expiry) = if mode == Mode::Smoke {
        (500, 1_500)
    } else {
        (2_000, 6_000)
    };
    for n in S5_LOCKS {
        let (acquire_cap, cap) = match (mode, n) {
            (Mode::Smoke, 1_000) => (20, 60),
            (Mode::Smoke, _) => continue,
            (Mode::Quick, 50_000) => continue,
            (Mode::Quick, 10_000) => (25, 90),
            (_, 1_000) => (30, 90),
            (_, 10_000) => (60, 150),
            _ => (120, 240),
        };
        let n_run = if mode == Mode::Smoke { 100 } else { n };
        jobs.push(job(
            "s5",
            &format!("s5/{n}"),
            &args(&format!(
                "s5 n={n_run} cadence_ms={cadence} expiry_ms={expiry} concurrency=64 \
                 acquire_cap_ms={}",
                acquire_cap * 1000
            )),
            reps,
            cap,
        ));
    }
    let (lease, renew, retry) = if mode == Mode::Smoke {
        (1_200, 800, 300)
    } else {
        (3_000, 2_000, 1_000)
    };
    jobs.push(job(
        "s6",
        "s6",
        &args(&format!(
            "s6 lease_ms={lease} renew_ms={renew} retry_ms={retry}"
        )),
        reps,
        90,
    ));
    jobs.extend(primitive_jobs(
        mode, reps, s1_reps, s1_cycles, s3_ms, s3_warmup,
    ));
    let (sizes, singles) = match mode {
        Mode::Smoke => ("100,1000", 100),
        Mode::Quick => ("1000,10000", 300),
        Mode::Full => ("1000,10000", 1000),
    };
    jobs.push(job(
        "explain",
        "explain",
        &args(&format!(
            "explain sizes={sizes} singles={singles} batch=1000"
        )),
        1,
        180,
    ));
    let (streams, writes, idle_ms) = match mode {
        Mode::Smoke => ("1,8", 50, 1000),
        Mode::Quick | Mode::Full => ("1,2,8,32,64", 300, 5000),
    };
    jobs.push(job(
        "feeds",
        "feeds",
        &args(&format!(
            "feeds streams={streams} writes={writes} idle_ms={idle_ms}"
        )),
        1,
        180,
    ));
    jobs.extend(crate::fleet::jobs(mode));
    jobs
}

/// Issue 17's rows: P1 (uncontended cycles of every primitive interleaved with the mutex),
/// P2 (semaphore contention), P3 (reader/writer contention), P4 (10,000 permits held).
fn primitive_jobs(
    mode: Mode,
    reps: usize,
    p1_reps: usize,
    p1_cycles: usize,
    contention_ms: u64,
    contention_warmup: u64,
) -> Vec<Job> {
    let mut jobs = vec![job(
        "p1",
        "p1",
        &args(&format!(
            "p1 cycles={p1_cycles} warmup={} permits=8 k=4",
            p1_cycles / 10
        )),
        p1_reps,
        180,
    )];
    let contention_cap = (contention_ms + contention_warmup) / 1000 + 60;
    jobs.push(job(
        "p2",
        "p2",
        &args(&format!(
            "p2 permits=8 tasks=64 critical_ms=1 warmup_ms={contention_warmup} \
             millis={contention_ms}"
        )),
        reps,
        contention_cap,
    ));
    for mix in P3_MIXES {
        jobs.push(job(
            "p3",
            &format!("p3/{mix}"),
            &args(&format!(
                "p3 {} write_pct=10 tasks=64 critical_ms=1 \
                 warmup_ms={contention_warmup} millis={contention_ms}",
                p3_mix_args(mix)
            )),
            reps,
            contention_cap,
        ));
    }
    let (sems, permits, cadence, expiry, acquire_cap, cap) = if mode == Mode::Smoke {
        (20, 5, 500, 1_500, 20, 60)
    } else {
        (1_000, 10, 2_000, 6_000, 60, 150)
    };
    jobs.push(job(
        "p4",
        "p4",
        &args(&format!(
            "p4 sems={sems} permits={permits} cadence_ms={cadence} expiry_ms={expiry} \
             concurrency=64 acquire_cap_ms={}",
            acquire_cap * 1000
        )),
        reps,
        cap,
    ));
    jobs
}
