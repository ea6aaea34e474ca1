//! The markdown report of issue 17's rows (P1–P4): a table of every target with its figures
//! and verdict, the mutex cycle measured in the same run as the baseline, then the details.

use crate::plan::P3_MIXES;
use crate::primitives::P1_KINDS;
use crate::report_table::{Results, Table, cell, failures, figure, last_text, runs, text, verdict};

/// A verdict that only counts while every run completed and nothing safety-related broke.
fn judged(complete: bool, met: Option<bool>) -> &'static str {
    if complete {
        verdict(met)
    } else {
        "**missed** (not all held)"
    }
}

fn p1_label(kind: &str, k: &str, permits: &str) -> String {
    match kind {
        "mutex" => "mutex (the baseline)".to_owned(),
        "semaphore" => format!("semaphore permit (N = {permits})"),
        "read" => "read lock".to_owned(),
        "write" => "write lock (no target)".to_owned(),
        "multi" => format!("multi-lock of k = {k} free names"),
        "mutex_floor" => "driver floor of the mutex (its commands, no runtime)".to_owned(),
        "semaphore_floor" => "driver floor of the semaphore".to_owned(),
        "read_floor" => "driver floor of the read lock".to_owned(),
        _ => "?".to_owned(),
    }
}

/// How a P3 mix's fairness differs from the default, for its labels.
fn p3_setting(mix: &str) -> &'static str {
    match mix {
        "roles-bound800" => ", fairness bound 800 ms (as before)",
        "roles-fifo" => ", arrival order",
        "roles-floor" => ", one in-process FIFO lock (tokio `RwLock`, no store)",
        _ => "",
    }
}

/// Issue 17's section.
#[allow(clippy::too_many_lines)]
pub(crate) fn render(results: &Results) -> String {
    let mut out = String::new();
    let mut head = Table::new(&[
        "#",
        "figure",
        "measured",
        "baseline (same run)",
        "target",
        "verdict",
    ]);
    let k_text = text(results, "p1", "k").unwrap_or_else(|| "4".into());
    let permits_text = text(results, "p1", "permits").unwrap_or_else(|| "8".into());
    let k: f64 = k_text.parse().unwrap_or(4.0);
    let mutex_p50 = cell(results, "p1", "mutex_p50_us", 0, " µs");
    let mutex_cmds = cell(results, "p1", "mutex_cmds_per_cycle", 2, "");
    for (kind, ratio_bound, cmds_bound, cmds_target) in [
        ("semaphore", 1.10, 2.0, "exactly 2".to_owned()),
        ("read", 1.10, 2.0, "exactly 2".to_owned()),
        (
            "multi",
            (k + 1.0) / 2.0,
            k + 1.0,
            format!("≤ k + 1 = {}", k + 1.0),
        ),
    ] {
        let label = p1_label(kind, &k_text, &permits_text);
        let ratio = figure(results, "p1", &format!("{kind}_ratio"));
        head.row(&[
            "P1".into(),
            format!("{label}: acquire + release, p50 (interleaved with the mutex cycle)"),
            format!(
                "{} = {} the mutex",
                cell(results, "p1", &format!("{kind}_p50_us"), 0, " µs"),
                cell(results, "p1", &format!("{kind}_ratio"), 2, "×")
            ),
            format!("mutex cycle: {mutex_p50}"),
            format!("≤ {ratio_bound:.2}× the mutex"),
            verdict(ratio.map(|r| r.median <= ratio_bound)).into(),
        ]);
        let commands = figure(results, "p1", &format!("{kind}_cmds_per_cycle"));
        let exact = kind != "multi";
        head.row(&[
            "P1".into(),
            format!("{label}: commands per cycle"),
            cell(results, "p1", &format!("{kind}_cmds_per_cycle"), 2, ""),
            format!("mutex: {mutex_cmds}"),
            cmds_target,
            verdict(commands.map(|c| {
                if exact {
                    (c.min - cmds_bound).abs() < 1e-9 && (c.max - cmds_bound).abs() < 1e-9
                } else {
                    c.max <= cmds_bound + 1e-9
                }
            }))
            .into(),
        ]);
    }

    let p2_permits: f64 = text(results, "p2", "permits")
        .and_then(|p| p.parse().ok())
        .unwrap_or(8.0);
    let held = figure(results, "p2", "held_pct");
    head.row(&[
        "P2".into(),
        "semaphore N = 8, 64 tasks in 2 processes, 1 ms hold: permit-time held (8 permits × \
         the window = 100 %)"
            .into(),
        cell(results, "p2", "held_pct", 1, " %"),
        format!(
            "{} acquisitions/s, hold {}",
            cell(results, "p2", "acq_per_s", 0, ""),
            cell(results, "p2", "hold_ms", 2, " ms")
        ),
        "≥ 90 % of the ceiling".into(),
        verdict(held.map(|h| h.median >= 90.0)).into(),
    ]);
    let share = figure(results, "p2", "share_a_pct");
    head.row(&[
        "P2".into(),
        "process A's share of acquisitions (B's)".into(),
        format!(
            "{} ({})",
            cell(results, "p2", "share_a_pct", 1, " %"),
            cell(results, "p2", "share_b_pct", 1, " %")
        ),
        "—".into(),
        "30–70 %".into(),
        verdict(share.map(|s| s.min >= 30.0 && s.max <= 70.0)).into(),
    ]);
    let holders = figure(results, "p2", "max_holders");
    head.row(&[
        "P2".into(),
        "most permits held at one instant (safety)".into(),
        cell(results, "p2", "max_holders", 0, ""),
        "—".into(),
        format!("≤ {p2_permits:.0}"),
        verdict(holders.map(|h| h.max <= p2_permits)).into(),
    ]);

    for mix in P3_MIXES {
        let key = format!("p3/{mix}");
        // The floor is a baseline, judged by nothing: it shows in the rows below.
        if !results.contains_key(&key) || mix == "roles-floor" {
            continue;
        }
        let workload = match mix {
            "ops" => "each operation a write with p = 10 %".to_owned(),
            _ => format!(
                "{} of 64 tasks write only{}",
                text(results, &key, "writer_tasks").unwrap_or_else(|| "?".into()),
                p3_setting(mix)
            ),
        };
        let over = figure(results, &key, "write_p99_over_hold");
        head.row(&[
            "P3".into(),
            format!(
                "reader/writer, 90 % reads ({workload}), 64 tasks in 2 processes: writers' \
                 wait p99 (p50)"
            ),
            format!(
                "{} ({}) = {} the mean hold",
                cell(results, &key, "write_wait_p99_ms", 1, " ms"),
                cell(results, &key, "write_wait_p50_ms", 1, " ms"),
                cell(results, &key, "write_p99_over_hold", 1, "×")
            ),
            format!("mean hold {}", cell(results, &key, "hold_ms", 2, " ms")),
            "≤ 10 × the mean hold".into(),
            verdict(over.map(|o| o.median <= 10.0)).into(),
        ]);
        let no_read = figure(results, &key, "seconds_without_read");
        let no_write = figure(results, &key, "seconds_without_write");
        head.row(&[
            "P3".into(),
            format!("{workload}: whole seconds with no read / no write granted"),
            format!(
                "{} / {} of {}",
                cell(results, &key, "seconds_without_read", 0, ""),
                cell(results, &key, "seconds_without_write", 0, ""),
                cell(results, &key, "seconds", 0, " s")
            ),
            format!(
                "reads {}, writes {}",
                cell(results, &key, "reads", 0, ""),
                cell(results, &key, "writes", 0, "")
            ),
            "0 / 0 (both sides progress every second)".into(),
            verdict(
                no_read
                    .zip(no_write)
                    .map(|(r, w)| r.max == 0.0 && w.max == 0.0),
            )
            .into(),
        ]);
        let overlaps = figure(results, &key, "writer_overlaps");
        head.row(&[
            "P3".into(),
            format!("{workload}: a writer beside any other holder (safety)"),
            cell(results, &key, "writer_overlaps", 0, ""),
            "—".into(),
            "0".into(),
            verdict(overlaps.map(|o| o.max == 0.0)).into(),
        ]);
    }

    // Issue 25's rows: writers' turn within 20 holds at p99 by default, within 10 in arrival
    // order; each beside the same run's figure it is compared with.
    for (key, label, baseline_key, baseline_label, bound) in [
        (
            "p3/roles",
            "*roles* (default fairness bound)",
            "p3/roles-bound800",
            "bound 800 ms (as before)",
            20.0,
        ),
        (
            "p3/roles-fifo",
            "*roles*, arrival order",
            "p3/roles",
            "*roles* (default)",
            10.0,
        ),
    ] {
        if let Some(over) = figure(results, key, "write_p99_over_hold") {
            head.row(&[
                "P3".into(),
                format!("{label}: writers' wait p99 ÷ the mean hold"),
                cell(results, key, "write_p99_over_hold", 1, "×"),
                format!(
                    "{baseline_label}: {}",
                    cell(results, baseline_key, "write_p99_over_hold", 1, "×")
                ),
                format!("≤ {bound:.0}×"),
                verdict(Some(over.median <= bound)).into(),
            ]);
        }
    }
    // What arrival order costs beyond strict order itself: the same tasks on one in-process
    // FIFO lock, with no store and no processes, set the floor.
    if let (Some(fifo), Some(floor)) = (
        figure(results, "p3/roles-fifo", "write_p99_over_hold"),
        figure(results, "p3/roles-floor", "write_p99_over_hold"),
    ) {
        head.row(&[
            "P3".into(),
            "*roles*, arrival order: writers' wait p99 ÷ the in-process FIFO lock's (tokio \
             `RwLock`, same tasks, no store)"
                .into(),
            format!("{:.2}× (medians)", fifo.median / floor.median),
            format!(
                "the in-process lock: {} the mean hold",
                cell(results, "p3/roles-floor", "write_p99_over_hold", 1, "×")
            ),
            "—".into(),
            "—".into(),
        ]);
    }
    // What each turn costs beyond its holds in arrival order, where the store decides every
    // turn: the lock's idle time from one turn's last release to the next turn's entry.
    if figure(results, "p3/roles-fifo", "turn_gap_local_p50_ms").is_some() {
        head.row(&[
            "P3".into(),
            "*roles*, arrival order: the lock idle between turns, p50, next turn in the same \
             process / in the other"
                .into(),
            format!(
                "{} / {}",
                cell(results, "p3/roles-fifo", "turn_gap_local_p50_ms", 2, " ms"),
                cell(results, "p3/roles-fifo", "turn_gap_cross_p50_ms", 2, " ms")
            ),
            format!(
                "the mean hold: {}",
                cell(results, "p3/roles-fifo", "hold_ms", 2, " ms")
            ),
            "—".into(),
            "—".into(),
        ]);
    }

    if results.contains_key("p4") {
        let lost = figure(results, "p4", "lost");
        let complete = runs(results, "p4")
            .iter()
            .all(|run| run.failure.is_none() && !run.values.contains_key("timeout"));
        head.row(&[
            "P4".into(),
            format!(
                "one manager, {} permits of each of {} semaphores, 3 cadences: lost",
                text(results, "p4", "permits").unwrap_or_else(|| "?".into()),
                text(results, "p4", "sems").unwrap_or_else(|| "?".into())
            ),
            format!(
                "{} of {}",
                cell(results, "p4", "lost", 0, ""),
                cell(results, "p4", "acquired", 0, " acquired")
            ),
            "—".into(),
            "0 lost".into(),
            verdict(lost.as_ref().map(|l| l.max == 0.0 && complete)).into(),
        ]);
        let all_held = complete && lost.is_some_and(|l| l.max == 0.0);
        let per_cadence = figure(results, "p4", "cmds_per_cadence");
        head.row(&[
            "P4".into(),
            "renewal commands per cadence".into(),
            cell(results, "p4", "cmds_per_cadence", 1, ""),
            "—".into(),
            "≤ 20".into(),
            judged(all_held, per_cadence.map(|c| c.median <= 20.0)).into(),
        ]);
    }
    out.push_str(
        "## Issue 17: semaphores, reader/writer locks, multi-locks (medians of the \
         repetitions; range and count in brackets)\n\n",
    );
    out.push_str(&head.text);

    // P1 details.
    if results.contains_key("p1") {
        let mut t = Table::new(&[
            "P1 primitive",
            "p50",
            "p99",
            "p50 ÷ mutex p50",
            "runtime: p50 ÷ its floor's",
            "server: its floor ÷ the mutex's floor",
            "commands/cycle",
            "commands (last run)",
        ]);
        for kind in P1_KINDS {
            let floored = ["mutex", "semaphore", "read"].contains(&kind);
            t.row(&[
                p1_label(kind, &k_text, &permits_text),
                cell(results, "p1", &format!("{kind}_p50_us"), 0, " µs"),
                cell(results, "p1", &format!("{kind}_p99_us"), 0, " µs"),
                cell(results, "p1", &format!("{kind}_ratio"), 2, "×"),
                if floored {
                    cell(results, "p1", &format!("{kind}_runtime_ratio"), 2, "×")
                } else {
                    "—".into()
                },
                if floored {
                    cell(results, "p1", &format!("{kind}_server_ratio"), 2, "×")
                } else {
                    "—".into()
                },
                cell(results, "p1", &format!("{kind}_cmds_per_cycle"), 2, ""),
                last_text(results, "p1", &format!("{kind}_commands")),
            ]);
        }
        out.push_str(
            "\n### P1: uncontended acquire + release, one task, every primitive interleaved \
             with the mutex\n\n",
        );
        out.push_str(&t.text);
    }

    // P2 details.
    if results.contains_key("p2") {
        let mut t = Table::new(&[
            "acquisitions/s",
            "permit-time held",
            "all 8 busy",
            "hold, mean",
            "wait p50",
            "wait p99",
            "share A",
            "share B",
            "commands/acquisition",
            "most holders at once",
            "commands (last run)",
        ]);
        t.row(&[
            cell(results, "p2", "acq_per_s", 0, ""),
            cell(results, "p2", "held_pct", 1, " %"),
            cell(results, "p2", "all_busy_pct", 1, " %"),
            cell(results, "p2", "hold_ms", 2, " ms"),
            cell(results, "p2", "wait_p50_ms", 1, " ms"),
            cell(results, "p2", "wait_p99_ms", 1, " ms"),
            cell(results, "p2", "share_a_pct", 1, " %"),
            cell(results, "p2", "share_b_pct", 1, " %"),
            cell(results, "p2", "cmds_per_acq", 2, ""),
            cell(results, "p2", "max_holders", 0, ""),
            last_text(results, "p2", "commands"),
        ]);
        out.push_str(
            "\n### P2: semaphore of 8 permits, 64 tasks in two processes (separate clients), \
             1 ms hold\n\n",
        );
        out.push_str(
            "*Permit-time held*: the critical sections (acquire returned → release called) \
             summed over the window, divided by 8 permits × the window: 100 % is every permit \
             busy back to back. *All 8 busy*: the share of the window with 8 critical sections \
             under way at once.\n\n",
        );
        out.push_str(&t.text);
    }

    // P3 details.
    let mut t = Table::new(&[
        "P3 mix",
        "reads",
        "writes",
        "acquisitions/s",
        "hold, mean",
        "writers' wait p50",
        "p99",
        "max",
        "readers' wait p50",
        "p99",
        "max",
        "still waiting at the end (w / r)",
        "seconds without a read / write",
        "share A",
        "commands/acquisition",
        "commands (last run)",
    ]);
    let mut any_p3 = false;
    for mix in P3_MIXES {
        let key = format!("p3/{mix}");
        if !results.contains_key(&key) {
            continue;
        }
        any_p3 = true;
        t.row(&[
            match mix {
                "ops" => "10 % writes per operation".to_owned(),
                _ => format!(
                    "{} writer tasks{}",
                    text(results, &key, "writer_tasks").unwrap_or_else(|| "?".into()),
                    p3_setting(mix)
                ),
            },
            cell(results, &key, "reads", 0, ""),
            cell(results, &key, "writes", 0, ""),
            cell(results, &key, "acq_per_s", 0, ""),
            cell(results, &key, "hold_ms", 2, " ms"),
            cell(results, &key, "write_wait_p50_ms", 1, " ms"),
            cell(results, &key, "write_wait_p99_ms", 1, " ms"),
            cell(results, &key, "write_wait_max_ms", 1, " ms"),
            cell(results, &key, "read_wait_p50_ms", 1, " ms"),
            cell(results, &key, "read_wait_p99_ms", 1, " ms"),
            cell(results, &key, "read_wait_max_ms", 1, " ms"),
            format!(
                "{} / {}",
                cell(results, &key, "pending_writes", 0, ""),
                cell(results, &key, "pending_reads", 0, "")
            ),
            format!(
                "{} / {}",
                cell(results, &key, "seconds_without_read", 0, ""),
                cell(results, &key, "seconds_without_write", 0, "")
            ),
            cell(results, &key, "share_a_pct", 1, " %"),
            cell(results, &key, "cmds_per_acq", 2, ""),
            last_text(results, &key, "commands"),
        ]);
    }
    if any_p3 {
        out.push_str(
            "\n### P3: reader/writer lock, 64 tasks in two processes (separate clients), 1 ms \
             hold, 90 % reads\n\n",
        );
        out.push_str(
            "Waits run from calling `read`/`write` to its return; a wait still unanswered when \
             the window closes counts up to the close (a lower bound). *No starvation*: every \
             whole second of the window saw at least one read and one write granted.\n\n",
        );
        out.push_str(&t.text);
    }

    // P4 details.
    if results.contains_key("p4") {
        let mut t = Table::new(&[
            "acquired",
            "acquire time",
            "lost while acquiring",
            "lost after 3 cadences",
            "commands/cadence",
            "commands in 3 cadences (last run)",
            "KiB per permit",
            "notes",
        ]);
        let mut notes: Vec<String> = runs(results, "p4")
            .iter()
            .filter_map(|run| run.values.get("shutdown").map(|s| format!("shutdown {s}")))
            .collect();
        notes.extend(failures(results, "p4"));
        t.row(&[
            cell(results, "p4", "acquired", 0, ""),
            cell(results, "p4", "acquire_s", 1, " s"),
            cell(results, "p4", "lost_while_acquiring", 0, ""),
            cell(results, "p4", "lost", 0, ""),
            cell(results, "p4", "cmds_per_cadence", 1, ""),
            last_text(results, "p4", "renewal_commands"),
            cell(results, "p4", "kib_per_permit", 2, ""),
            if notes.is_empty() {
                "—".into()
            } else {
                notes.join("; ")
            },
        ]);
        out.push_str(
            "\n### P4: one manager holding the permits of many semaphores (full run: 10 of \
             each of 1,000, expiry 6 s, cadence 2 s)\n\n",
        );
        out.push_str(&t.text);
    }
    out
}
