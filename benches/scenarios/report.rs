//! The markdown report: a headline table of every target with its baseline from the same
//! run, then the details of each scenario.

use crate::plan::{S1_SYSTEMS, S3_SYSTEMS, S4_TASKS, S5_LOCKS};
use crate::report_table::{
    Results, Table, cell, failures, figure, last_text, number, ratio, runs, text, verdict,
};

/// The whole report: S1–S6 if any ran, then issue 17's rows, then issue 56's fleets (S7–S9),
/// each if any ran.
pub(crate) fn render(results: &Results) -> String {
    use crate::report_fleet::is_fleet;
    let mut out = String::new();
    let mut section = |text: String| {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&text);
    };
    if results
        .keys()
        .any(|key| !key.starts_with('p') && !is_fleet(key))
    {
        section(render_s(results));
    }
    if results.keys().any(|key| key.starts_with('p')) {
        section(crate::report_primitives::render(results));
    }
    if results.keys().any(|key| is_fleet(key)) {
        section(crate::report_fleet::render(results));
    }
    out
}

/// S1–S6.
#[allow(clippy::too_many_lines)]
fn render_s(results: &Results) -> String {
    let mut out = String::new();
    let fmt_ratio = |r: Option<f64>| r.map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));

    // Headline: every target of the issue against its baseline.
    let mut head = Table::new(&[
        "#",
        "figure",
        "mongolock",
        "baseline (same run)",
        "ratio",
        "target",
        "verdict",
    ]);
    let s1 = figure(results, "s1/paired", "ratio");
    head.row(&[
        "S1".into(),
        "uncontended acquire+release, p50 (paired: alternating cycles, one process)".into(),
        cell(results, "s1/paired", "mongolock_p50_us", 0, " µs"),
        format!(
            "driver floor ({}): {}",
            text(results, "s1/floor", "floor_commands").unwrap_or_else(|| "?".into()),
            cell(results, "s1/paired", "floor_p50_us", 0, " µs")
        ),
        cell(results, "s1/paired", "ratio", 2, "×"),
        "≤ 1.10×".into(),
        verdict(s1.map(|r| r.median <= 1.10)).into(),
    ]);
    let against_try = figure(results, "s1/acquire-vs-try", "ratio");
    head.row(&[
        "S1".into(),
        "acquire+release against try_acquire+release, p50 (paired, same two commands)".into(),
        cell(results, "s1/acquire-vs-try", "acquire_p50_us", 0, " µs"),
        format!(
            "try_acquire: {}",
            cell(results, "s1/acquire-vs-try", "try_p50_us", 0, " µs")
        ),
        cell(results, "s1/acquire-vs-try", "ratio", 2, "×"),
        "≤ 1.05×".into(),
        verdict(against_try.map(|r| r.median <= 1.05)).into(),
    ]);
    let server_cpu = figure(results, "s1/server-cpu", "ratio");
    head.row(&[
        "S1".into(),
        "server CPU per 1,000 cycles (alternating blocks, one client)".into(),
        cell(results, "s1/server-cpu", "mongolock_cpu_ms", 0, " ms"),
        format!(
            "the cycle before shared kinds (written out): {}",
            cell(results, "s1/server-cpu", "before_shared_cpu_ms", 0, " ms")
        ),
        cell(results, "s1/server-cpu", "ratio", 2, "×"),
        "≤ 1.10×".into(),
        verdict(server_cpu.map(|r| r.median <= 1.10)).into(),
    ]);
    head.row(&[
        "S1".into(),
        "server CPU: mongolock ÷ its own commands replayed (what the runtime adds); the replay ÷ the cycle before shared kinds (what today's commands add)".into(),
        format!(
            "replayed commands: {}",
            cell(results, "s1/server-cpu", "floor_cpu_ms", 0, " ms")
        ),
        "the same blocks".into(),
        format!(
            "{} ; {}",
            cell(results, "s1/server-cpu", "runtime_ratio", 2, "×"),
            cell(results, "s1/server-cpu", "commands_ratio", 2, "×")
        ),
        "—".into(),
        "—".into(),
    ]);
    let commands = figure(results, "s1/mongolock", "cmds_per_cycle");
    head.row(&[
        "S1".into(),
        "commands per acquire+release".into(),
        cell(results, "s1/mongolock", "cmds_per_cycle", 2, ""),
        cell(results, "s1/floor", "cmds_per_cycle", 2, ""),
        "—".into(),
        "exactly 2".into(),
        verdict(commands.map(|c| (c.max - 2.0).abs() < 1e-9 && (c.min - 2.0).abs() < 1e-9)).into(),
    ]);
    let cycles = text(results, "s1/leftovers", "cycles").unwrap_or_else(|| "?".into());
    let tasks = figure(results, "s1/leftovers", "extra_tasks_after_1s");
    head.row(&[
        "S1".into(),
        format!("live tasks 1 s after {cycles} cycles, above idle (memory store)"),
        format!(
            "{} (right after: {})",
            cell(results, "s1/leftovers", "extra_tasks_after_1s", 0, ""),
            cell(results, "s1/leftovers", "tasks_after", 0, "")
        ),
        format!(
            "idle: {}",
            cell(results, "s1/leftovers", "tasks_idle", 0, " tasks")
        ),
        "—".into(),
        "0 (back to idle within 1 s)".into(),
        verdict(tasks.map(|t| t.max == 0.0)).into(),
    ]);
    let rss = figure(results, "s1/leftovers", "extra_rss_after_1s_kib");
    head.row(&[
        "S1".into(),
        format!("resident memory 1 s after {cycles} cycles, above idle"),
        cell(results, "s1/leftovers", "extra_rss_after_1s_kib", 0, " KiB"),
        format!(
            "idle: {}",
            cell(results, "s1/leftovers", "rss_idle_kib", 0, " KiB")
        ),
        "—".into(),
        "back to idle (≤ 512 KiB allocator slack)".into(),
        verdict(rss.map(|r| r.median <= 512.0)).into(),
    ]);
    let s2 = ratio(results, ("s2", "lock_ns"), ("s2", "two_round_trips_ns"));
    head.row(&[
        "S2".into(),
        "memory store acquire+release, mean".into(),
        cell(results, "s2", "lock_ns", 0, " ns"),
        format!(
            "two mpsc+oneshot round trips: {}",
            cell(results, "s2", "two_round_trips_ns", 0, " ns")
        ),
        fmt_ratio(s2),
        "≤ 3×".into(),
        verdict(s2.map(|r| r <= 3.0)).into(),
    ]);
    for tasks in S4_TASKS {
        let (m, f) = (format!("s4/mongolock/{tasks}"), format!("s4/floor/{tasks}"));
        let r = ratio(results, (&m, "cycles_per_s"), (&f, "cycles_per_s"));
        head.row(&[
            "S4".into(),
            format!("distinct names, {tasks} tasks: cycles/s"),
            cell(results, &m, "cycles_per_s", 0, "/s"),
            format!(
                "driver floor: {}",
                cell(results, &f, "cycles_per_s", 0, "/s")
            ),
            fmt_ratio(r),
            "≥ 0.9×".into(),
            verdict(r.map(|r| r >= 0.9)).into(),
        ]);
    }
    let s3 = ratio(
        results,
        ("s3/mongolock", "acq_per_s"),
        ("s3/dl", "acq_per_s"),
    );
    head.row(&[
        "S3".into(),
        "one lock, 64 tasks in 2 managers, 1 ms critical section: acquisitions/s".into(),
        cell(results, "s3/mongolock", "acq_per_s", 0, "/s"),
        format!(
            "DistributedLock algorithm: {}",
            cell(results, "s3/dl", "acq_per_s", 0, "/s")
        ),
        fmt_ratio(s3),
        "≥ 2×".into(),
        verdict(s3.map(|r| r >= 2.0)).into(),
    ]);
    let held = figure(results, "s3/mongolock", "held_pct");
    head.row(&[
        "S3".into(),
        "lock held while anyone waits".into(),
        cell(results, "s3/mongolock", "held_pct", 1, " %"),
        format!(
            "DistributedLock: {}",
            cell(results, "s3/dl", "held_pct", 1, " %")
        ),
        "—".into(),
        "≥ 85 %".into(),
        verdict(held.map(|h| h.median >= 85.0)).into(),
    ]);
    let per_acq = figure(results, "s3/mongolock", "cmds_per_acq");
    head.row(&[
        "S3".into(),
        "commands per acquisition".into(),
        cell(results, "s3/mongolock", "cmds_per_acq", 2, ""),
        format!(
            "DistributedLock: {}",
            cell(results, "s3/dl", "cmds_per_acq", 2, "")
        ),
        "—".into(),
        "≤ 1.2".into(),
        verdict(per_acq.map(|c| c.median <= 1.2)).into(),
    ]);
    let p99 = figure(results, "s3/mongolock", "handover_p99_ms");
    head.row(&[
        "S3".into(),
        "hand-over between managers, p99 (p50)".into(),
        format!(
            "{} ({})",
            cell(results, "s3/mongolock", "handover_p99_ms", 1, " ms"),
            cell(results, "s3/mongolock", "handover_p50_ms", 1, " ms")
        ),
        format!(
            "DistributedLock: {} ({})",
            cell(results, "s3/dl", "handover_p99_ms", 1, " ms"),
            cell(results, "s3/dl", "handover_p50_ms", 1, " ms")
        ),
        "—".into(),
        "p99 ≤ 25 ms".into(),
        verdict(p99.map(|p| p.median <= 25.0)).into(),
    ]);
    s3_fairness_rows(results, &mut head);
    let share = figure(results, "s3/mongolock", "share_a_pct");
    head.row(&[
        "S3".into(),
        "manager A's share of acquisitions".into(),
        cell(results, "s3/mongolock", "share_a_pct", 1, " %"),
        format!(
            "DistributedLock: {}",
            cell(results, "s3/dl", "share_a_pct", 1, " %")
        ),
        "—".into(),
        "30–70 %".into(),
        verdict(share.map(|s| s.min >= 30.0 && s.max <= 70.0)).into(),
    ]);
    for n in S5_LOCKS {
        let key = format!("s5/{n}");
        if !results.contains_key(&key) {
            continue;
        }
        let lost = figure(results, &key, "lost");
        let complete = runs(results, &key)
            .iter()
            .all(|run| run.failure.is_none() && !run.values.contains_key("timeout"));
        head.row(&[
            "S5".into(),
            format!("{n} locks held through 3 cadences (2 s): lost"),
            format!(
                "{} of {}",
                cell(results, &key, "lost", 0, ""),
                cell(results, &key, "acquired", 0, " acquired")
            ),
            "—".into(),
            "—".into(),
            "0 lost".into(),
            verdict(lost.as_ref().map(|l| l.max == 0.0 && complete)).into(),
        ]);
        // Renewal cost and memory count only while every lock is held.
        let all_held = complete && lost.is_some_and(|l| l.max == 0.0);
        let judged = |met: Option<bool>| {
            if all_held {
                verdict(met)
            } else {
                "**missed** (not all held)"
            }
        };
        let per_cadence = figure(results, &key, "cmds_per_cadence");
        head.row(&[
            "S5".into(),
            format!("{n} locks: renewal commands per cadence"),
            cell(results, &key, "cmds_per_cadence", 1, ""),
            "—".into(),
            "—".into(),
            "≤ 20".into(),
            judged(per_cadence.map(|c| c.median <= 20.0)).into(),
        ]);
        let kib = figure(results, &key, "kib_per_lock");
        head.row(&[
            "S5".into(),
            format!("{n} locks: resident memory per held lock"),
            cell(results, &key, "kib_per_lock", 2, " KiB"),
            "—".into(),
            "—".into(),
            "≤ 10 KiB".into(),
            judged(kib.map(|k| k.median <= 10.0)).into(),
        ]);
    }
    let lease = figure(results, "s6", "lease_ms").map(|s| s.median);
    let retry = figure(results, "s6", "retry_ms").map(|s| s.median);
    let crash = figure(results, "s6", "crash_ms");
    let crash_bound = lease.zip(retry).map(|(l, r)| l + r);
    head.row(&[
        "S6".into(),
        "election: leader killed → new leader (separate clients)".into(),
        cell(results, "s6", "crash_ms", 0, " ms"),
        format!(
            "lease {} ms + retry {} ms",
            lease.map_or("?".into(), |l| number(l, 0)),
            retry.map_or("?".into(), |r| number(r, 0))
        ),
        "—".into(),
        "≤ lease + retry".into(),
        verdict(crash.zip(crash_bound).map(|(c, b)| c.max <= b)).into(),
    ]);
    let resign = figure(results, "s6", "resign_ms");
    head.row(&[
        "S6".into(),
        "election: leader resigns → new leader".into(),
        cell(results, "s6", "resign_ms", 0, " ms"),
        format!(
            "2 × retry = {}",
            retry.map_or("?".into(), |r| number(2.0 * r, 0))
        ),
        "—".into(),
        "≤ 2 × retry".into(),
        verdict(resign.zip(retry).map(|(c, r)| c.max <= 2.0 * r)).into(),
    ]);
    out.push_str("## Targets (medians of the repetitions; range and count in brackets)\n\n");
    out.push_str(&head.text);

    // S1 details.
    let mut t = Table::new(&[
        "S1 system",
        "p50",
        "p99",
        "mean",
        "commands/cycle",
        "commands (last run)",
        "p50 ÷ floor",
    ]);
    for system in S1_SYSTEMS {
        let key = format!("s1/{system}");
        t.row(&[
            s1_label(system).into(),
            cell(results, &key, "p50_us", 0, " µs"),
            cell(results, &key, "p99_us", 0, " µs"),
            cell(results, &key, "mean_us", 0, " µs"),
            if system == "memory" {
                "— (no server)".into()
            } else {
                cell(results, &key, "cmds_per_cycle", 2, "")
            },
            last_text(results, &key, "commands"),
            fmt_ratio(ratio(results, (&key, "p50_us"), ("s1/floor", "p50_us"))),
        ]);
    }
    out.push_str("\n## S1: uncontended acquire + release, one task\n\n");
    out.push_str(&t.text);

    // S3 details.
    let mut t = Table::new(&[
        "S3 system",
        "acquisitions/s",
        "held while waiting",
        "commands/acquisition",
        "hand-overs A↔B",
        "hand-over p50",
        "hand-over p99",
        "share A",
        "critical section, mean",
        "of the ceiling",
        "overlapping holds",
        "commands (last run)",
    ]);
    for system in S3_SYSTEMS {
        let key = format!("s3/{system}");
        t.row(&[
            s3_label(system).into(),
            cell(results, &key, "acq_per_s", 0, ""),
            cell(results, &key, "held_pct", 1, " %"),
            cell(results, &key, "cmds_per_acq", 2, ""),
            cell(results, &key, "handovers", 0, ""),
            cell(results, &key, "handover_p50_ms", 1, " ms"),
            cell(results, &key, "handover_p99_ms", 1, " ms"),
            cell(results, &key, "share_a_pct", 1, " %"),
            cell(results, &key, "critical_ms", 2, " ms"),
            cell(results, &key, "of_ceiling_pct", 1, " %"),
            cell(results, &key, "overlaps", 0, ""),
            last_text(results, &key, "commands"),
        ]);
    }
    out.push_str("\n## S3: one lock, 64 tasks in two processes (separate clients), 1 ms critical section\n\n");
    out.push_str(
        "*Of the ceiling*: acquisitions/s × the mean critical section (`tokio::time::sleep(1 ms)` \
         plus scheduling), the share of the most any lock could reach with no gap at all \
         between holders.\n\n",
    );
    out.push_str(&t.text);
    let mut t = Table::new(&[
        "S3 system",
        "FIFO share",
        "wait p50 / p99 / max",
        "p99 ÷ FIFO share",
        "max ÷ FIFO share",
        "manager A: p50 / p99 / max",
        "manager B: p50 / p99 / max",
    ]);
    let waits = |key: &str, side: &str| {
        format!(
            "{} / {} / {}",
            cell(results, key, &format!("wait{side}_p50_ms"), 0, ""),
            cell(results, key, &format!("wait{side}_p99_ms"), 0, ""),
            cell(results, key, &format!("wait{side}_max_ms"), 0, " ms"),
        )
    };
    for system in S3_SYSTEMS {
        let key = format!("s3/{system}");
        t.row(&[
            s3_label(system).into(),
            cell(results, &key, "fifo_share_ms", 0, " ms"),
            waits(&key, ""),
            cell(results, &key, "wait_p99_fifo", 2, "×"),
            cell(results, &key, "wait_max_fifo", 2, "×"),
            waits(&key, "_a"),
            waits(&key, "_b"),
        ]);
    }
    out.push_str("\n### S3: each acquisition's wait, acquire called → returned\n\n");
    out.push_str(
        "*FIFO share*: (tasks − 1) × the mean gap between grants, what each task would wait \
         if the lock went round all 64 in strict arrival order at the measured rate.\n\n",
    );
    out.push_str(&t.text);

    // S5 details.
    let mut t = Table::new(&[
        "S5 locks",
        "acquired",
        "acquire time",
        "lost while acquiring",
        "lost after 3 cadences",
        "commands/cadence",
        "commands in 3 cadences (last run)",
        "KiB per lock",
        "notes",
    ]);
    for n in S5_LOCKS {
        let key = format!("s5/{n}");
        if !results.contains_key(&key) {
            continue;
        }
        let mut notes: Vec<String> = runs(results, &key)
            .iter()
            .filter_map(|run| run.values.get("shutdown").map(|s| format!("shutdown {s}")))
            .collect();
        notes.extend(failures(results, &key));
        t.row(&[
            format!("{n}"),
            cell(results, &key, "acquired", 0, ""),
            cell(results, &key, "acquire_s", 1, " s"),
            cell(results, &key, "lost_while_acquiring", 0, ""),
            cell(results, &key, "lost", 0, ""),
            cell(results, &key, "cmds_per_cadence", 1, ""),
            last_text(results, &key, "renewal_commands"),
            cell(results, &key, "kib_per_lock", 2, ""),
            if notes.is_empty() {
                "—".into()
            } else {
                notes.join("; ")
            },
        ]);
    }
    out.push_str("\n## S5: one manager holding N locks (expiry 6 s, cadence 2 s)\n\n");
    out.push_str(&t.text);

    // The probes of the server's own costs.
    for (label, heading) in [
        (
            "explain",
            "Extend filter and batched renewal on the server (`explain`)",
        ),
        (
            "feeds",
            "A change stream's event after its write, by open streams (`feeds`)",
        ),
    ] {
        if let Some(run) = runs(results, label).first() {
            out.push_str(&format!("\n## {heading}\n\n"));
            let mut t = Table::new(&["figure", "value"]);
            for (key, value) in &run.values {
                t.row(&[format!("`{key}`"), value.clone()]);
            }
            if let Some(failure) = &run.failure {
                t.row(&["failure".into(), failure.clone()]);
            }
            out.push_str(&t.text);
        }
    }
    out
}

fn s1_label(system: &str) -> &'static str {
    match system {
        "mongolock" => "mongolock (MongoDB)",
        "floor" => "driver floor: the same commands, issued directly",
        "dl" => "DistributedLock algorithm (findAndModify + deleteOne)",
        "peer" => "distributed-lock-mongo 0.2 (crates.io)",
        "memory" => "mongolock (memory store)",
        _ => "?",
    }
}

fn s3_label(system: &str) -> &'static str {
    match system {
        "mongolock" => "mongolock (defaults: adaptive backoff 10–800 ms)",
        "mongolock-random" => "mongolock (random 10–800 ms retry)",
        "mongolock-bound800" => "mongolock, fairness bound 800 ms (the rule before the bound)",
        "mongolock-fifo" => "mongolock, arrival order (Fairness::ArrivalOrder)",
        "dl" => "DistributedLock algorithm (random 10–800 ms poll, delete on release)",
        "peer" => "distributed-lock-mongo 0.2 (10 ms poll)",
        _ => "?",
    }
}

/// One fairness target row: (what, figure, digits, unit, target, whether a median meets it).
type FairnessRow = (
    &'static str,
    &'static str,
    usize,
    &'static str,
    &'static str,
    fn(f64) -> bool,
);

/// Issue 25's default-mode rows (a waiter's turn in bounded time at nearly all the speed),
/// then the arrival-order rows (`Fairness::ArrivalOrder`: strict turns at a bounded cost),
/// each against a baseline measured in the same run.
fn s3_fairness_rows(results: &Results, head: &mut Table) {
    let default_rows: [FairnessRow; 4] = [
        (
            "share of the ceiling (default fairness bound)",
            "of_ceiling_pct",
            1,
            " %",
            "≥ 90 %",
            |v| v >= 90.0,
        ),
        (
            "p99 wait per acquisition ÷ the FIFO share",
            "wait_p99_fifo",
            2,
            "×",
            "≤ 2×",
            |v| v <= 2.0,
        ),
        (
            "longest wait ÷ the FIFO share",
            "wait_max_fifo",
            2,
            "×",
            "≤ 3×",
            |v| v <= 3.0,
        ),
        (
            "commands per acquisition (default fairness bound)",
            "cmds_per_acq",
            2,
            "",
            "≤ 0.2",
            |v| v <= 0.2,
        ),
    ];
    fairness_rows(
        results,
        head,
        "s3/mongolock",
        ("bound 800 ms (as before)", "s3/mongolock-bound800"),
        &default_rows,
    );
    let fifo_rows: [FairnessRow; 4] = [
        (
            "share of the ceiling (arrival order)",
            "of_ceiling_pct",
            1,
            " %",
            "≥ 55 %",
            |v| v >= 55.0,
        ),
        (
            "p99 wait per acquisition ÷ the FIFO share (arrival order)",
            "wait_p99_fifo",
            2,
            "×",
            "≤ 1.3×",
            |v| v <= 1.3,
        ),
        (
            "longest wait ÷ the FIFO share (arrival order)",
            "wait_max_fifo",
            2,
            "×",
            "≤ 1.5×",
            |v| v <= 1.5,
        ),
        (
            "commands per acquisition (arrival order)",
            "cmds_per_acq",
            2,
            "",
            "≤ 2.5",
            |v| v <= 2.5,
        ),
    ];
    fairness_rows(
        results,
        head,
        "s3/mongolock-fifo",
        ("default fairness bound", "s3/mongolock"),
        &fifo_rows,
    );
}

/// A headline row per target: the median of `key`'s figure judged against the target, with
/// the same figure of the `(label, key)` baseline beside it.
fn fairness_rows(
    results: &Results,
    head: &mut Table,
    key: &str,
    (label, baseline): (&str, &str),
    rows: &[FairnessRow],
) {
    for &(what, value, digits, unit, target, met) in rows {
        head.row(&[
            "S3".into(),
            what.into(),
            cell(results, key, value, digits, unit),
            format!("{label}: {}", cell(results, baseline, value, digits, unit)),
            "—".into(),
            target.into(),
            verdict(figure(results, key, value).map(|f| met(f.median))).into(),
        ]);
    }
}
