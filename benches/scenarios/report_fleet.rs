//! The markdown report of issue 56's fleets (S7, S8, S9): a table of every target with the
//! figure at each fleet size and the verdict at P = 32, the details of each scenario, and
//! the chart of the figures against P.

use crate::chart::{Panel, Series, svg};
use crate::fleet::{FLEET_MODES, TARGET_SIZE};
use crate::report_table::{Results, Table, failures, figure, last_text, verdict};

/// Whether `key` is one of the fleets' jobs.
pub(crate) fn is_fleet(key: &str) -> bool {
    ["s7/", "s8/", "s9/"]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

/// The fleet sizes that ran, smallest first.
fn sizes(results: &Results) -> Vec<usize> {
    let mut sizes: Vec<usize> = results
        .keys()
        .filter(|key| is_fleet(key))
        .filter_map(|key| key.rsplit('/').next()?.parse().ok())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

fn key(scenario: &str, mode: &str, p: usize) -> String {
    format!("{scenario}/{mode}/{p}")
}

/// The figure's median (one run in a fleet's plan).
fn value(results: &Results, key: &str, name: &str) -> Option<f64> {
    figure(results, key, name).map(|summary| summary.median)
}

/// `value` with `decimals` and `unit`, or why there is none (`—` when the job did not run).
fn show(results: &Results, key: &str, name: &str, decimals: usize, unit: &str) -> String {
    match value(results, key, name) {
        Some(v) => format!("{v:.decimals$}{unit}"),
        None => failures(results, key).map_or_else(|| "—".to_owned(), |f| format!("_{f}_")),
    }
}

/// `measured ÷ the same at P = 2`, of scenario/mode's figure `name`.
fn growth(results: &Results, scenario: &str, mode: &str, p: usize, name: &str) -> Option<f64> {
    let at_p = value(results, &key(scenario, mode, p), name)?;
    let at_two = value(results, &key(scenario, mode, 2), name)?;
    (at_two > 0.0).then(|| at_p / at_two)
}

/// One target row: its figure at every size, the target and the verdict at P = 32.
struct TargetRow<'a> {
    scenario: &'static str,
    what: String,
    /// The cell at fleet size `p`.
    at: Box<dyn Fn(usize) -> String + 'a>,
    target: &'static str,
    /// Whether the figure at P = 32 meets the target (`None`: no figure).
    met: Option<bool>,
}

/// Issue 56's section.
pub(crate) fn render(results: &Results) -> String {
    let sizes = sizes(results);
    let mut out = String::new();
    let mut headers: Vec<String> = vec!["#".into(), "figure".into()];
    headers.extend(sizes.iter().map(|p| format!("P = {p}")));
    headers.extend(["target at P = 32".into(), "verdict".into()]);
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut head = Table::new(&header_refs);
    for row in target_rows(results) {
        let mut cells = vec![row.scenario.to_owned(), row.what];
        cells.extend(sizes.iter().map(|&p| (row.at)(p)));
        cells.extend([row.target.to_owned(), verdict(row.met).to_owned()]);
        head.row(&cells);
    }
    out.push_str(
        "## Fleets (issue 56): S7 one lock, S8 a name per pair, S9 one holder and P − 1 waiting\n\n",
    );
    out.push_str(
        "Each process is a separate OS process (its own client and manager), started together \
         and measured over one window; commands are every process's (change-stream `aggregate` \
         and `getMore` included), server CPU is the server's over the window. P = 64 has no \
         target. One run each.\n\n",
    );
    out.push_str(&head.text);
    out.push_str(&s7_details(results, &sizes));
    out.push_str(&s8_details(results, &sizes));
    out.push_str(&s9_details(results, &sizes));
    out
}

#[allow(clippy::too_many_lines)]
fn target_rows(results: &Results) -> Vec<TargetRow<'_>> {
    let t = TARGET_SIZE;
    let at_target = |k: &str, name: &str| value(results, &key("s7", k, t), name);
    let share = move |mode: &'static str| {
        move |p: usize| {
            let k = key("s7", mode, p);
            format!(
                "{} ({})",
                show(results, &k, "acq_per_s", 0, "/s"),
                show(results, &k, "of_ceiling_pct", 0, " %")
            )
        }
    };
    let plain = move |scenario: &'static str, mode: &'static str, name: &'static str, digits| {
        move |p: usize| show(results, &key(scenario, mode, p), name, digits, "")
    };
    let fair = move |mode: &'static str| {
        move |p: usize| {
            let k = key("s7", mode, p);
            format!(
                "{} / {}",
                show(results, &k, "wait_p99_fair", 2, "×"),
                show(results, &k, "wait_max_fair", 2, "×")
            )
        }
    };
    let with_growth = move |scenario: &'static str,
                            mode: &'static str,
                            name: &'static str,
                            unit: &'static str| {
        move |p: usize| {
            let base = show(results, &key(scenario, mode, p), name, 3, unit);
            match growth(results, scenario, mode, p, name) {
                Some(g) if p != 2 => format!("{base} ({g:.1}×)"),
                _ => base,
            }
        }
    };
    let fair_met = |mode: &str, p99: f64, max: f64| {
        at_target(mode, "wait_p99_fair")
            .zip(at_target(mode, "wait_max_fair"))
            .map(|(a, b)| a <= p99 && b <= max)
    };
    let s9 = |mode: &str, name: &str| value(results, &key("s9", mode, t), name);
    let handover = move |mode: &'static str| {
        move |p: usize| {
            let k = key("s9", mode, p);
            format!(
                "{} ({})",
                show(results, &k, "handover_p50_ms", 1, " ms"),
                show(results, &k, "handover_max_ms", 1, " ms")
            )
        }
    };
    let crash = move |p: usize| {
        let cells: Vec<String> = FLEET_MODES
            .iter()
            .filter(|mode| results.contains_key(&key("s9", &format!("crash-{mode}"), p)))
            .map(|mode| {
                show(
                    results,
                    &key("s9", &format!("crash-{mode}"), p),
                    "takeover_ms",
                    0,
                    " ms",
                )
            })
            .collect();
        if cells.is_empty() {
            "—".to_owned()
        } else {
            cells.join(" / ")
        }
    };
    let crash_met = FLEET_MODES
        .iter()
        .map(|mode| {
            value(
                results,
                &key("s9", &format!("crash-{mode}"), t),
                "takeover_ms",
            )
        })
        .collect::<Option<Vec<f64>>>()
        .map(|takeovers| takeovers.iter().all(|&ms| ms <= 800.0));
    vec![
        TargetRow {
            scenario: "S7",
            what: "default: acquisitions/s (share of the ceiling)".into(),
            at: Box::new(share("default")),
            target: "≥ 90 %",
            met: at_target("default", "of_ceiling_pct").map(|v| v >= 90.0),
        },
        TargetRow {
            scenario: "S7",
            what: "default: commands per acquisition".into(),
            at: Box::new(plain("s7", "default", "cmds_per_acq", 2)),
            target: "≤ 0.5",
            met: at_target("default", "cmds_per_acq").map(|v| v <= 0.5),
        },
        TargetRow {
            scenario: "S7",
            what: "default: server CPU per acquisition, ms (÷ the same at P = 2)".into(),
            at: Box::new(with_growth("s7", "default", "cpu_ms_per_acq", "")),
            target: "≤ 2×",
            met: growth(results, "s7", "default", t, "cpu_ms_per_acq").map(|g| g <= 2.0),
        },
        TargetRow {
            scenario: "S7",
            what: "default: p99 / longest wait ÷ fair share".into(),
            at: Box::new(fair("default")),
            target: "≤ 2× / ≤ 3×",
            met: fair_met("default", 2.0, 3.0),
        },
        TargetRow {
            scenario: "S7",
            what: "default: least ÷ most acquisitions per process".into(),
            at: Box::new(plain("s7", "default", "least_most", 2)),
            target: "≥ 0.8",
            met: at_target("default", "least_most").map(|v| v >= 0.8),
        },
        TargetRow {
            scenario: "S7",
            what: "arrival order: acquisitions/s (share of the ceiling)".into(),
            at: Box::new(share("arrival")),
            target: "≥ 55 %",
            met: at_target("arrival", "of_ceiling_pct").map(|v| v >= 55.0),
        },
        TargetRow {
            scenario: "S7",
            what: "arrival order: commands per acquisition".into(),
            at: Box::new(plain("s7", "arrival", "cmds_per_acq", 2)),
            target: "≤ 3",
            met: at_target("arrival", "cmds_per_acq").map(|v| v <= 3.0),
        },
        TargetRow {
            scenario: "S7",
            what: "arrival order: p99 / longest wait ÷ fair share".into(),
            at: Box::new(fair("arrival")),
            target: "≤ 1.3× / ≤ 1.5×",
            met: fair_met("arrival", 1.3, 1.5),
        },
        TargetRow {
            scenario: "S8",
            what: "release-feed reads per acquisition: change events received (÷ the same at P = 2)"
                .into(),
            at: Box::new(with_growth("s8", "default", "feed_events_per_acq", "")),
            target: "≤ 1.5×",
            met: growth(results, "s8", "default", t, "feed_events_per_acq").map(|g| g <= 1.5),
        },
        TargetRow {
            scenario: "S8",
            what: "release-feed reads per acquisition: `getMore` + `aggregate` commands (÷ the same at P = 2)"
                .into(),
            at: Box::new(with_growth("s8", "default", "feed_per_acq", "")),
            target: "≤ 1.5×",
            met: growth(results, "s8", "default", t, "feed_per_acq").map(|g| g <= 1.5),
        },
        TargetRow {
            scenario: "S9",
            what: "default: commands per second per waiting process".into(),
            at: Box::new(plain("s9", "default", "waiter_cmds_per_s", 2)),
            target: "≤ 0.3",
            met: s9("default", "waiter_cmds_per_s").map(|v| v <= 0.3),
        },
        TargetRow {
            scenario: "S9",
            what: "arrival order: commands per second per waiting process".into(),
            at: Box::new(plain("s9", "arrival", "waiter_cmds_per_s", 2)),
            target: "≤ 0.3",
            met: s9("arrival", "waiter_cmds_per_s").map(|v| v <= 0.3),
        },
        TargetRow {
            scenario: "S9",
            what: "arrival order: server CPU while P − 1 wait, ms per s".into(),
            at: Box::new(plain("s9", "arrival", "cpu_ms_per_s", 1)),
            target: "≤ 30",
            met: s9("arrival", "cpu_ms_per_s").map(|v| v <= 30.0),
        },
        TargetRow {
            scenario: "S9",
            what: "default: server CPU while P − 1 wait, ms per s".into(),
            at: Box::new(plain("s9", "default", "cpu_ms_per_s", 1)),
            target: "≤ 10",
            met: s9("default", "cpu_ms_per_s").map(|v| v <= 10.0),
        },
        TargetRow {
            scenario: "S9",
            what: "arrival order: release → next grant, median (max)".into(),
            at: Box::new(handover("arrival")),
            target: "≤ 5 ms",
            met: s9("arrival", "handover_p50_ms").map(|v| v <= 5.0),
        },
        TargetRow {
            scenario: "S9",
            what: "default: release → next grant, median (max)".into(),
            at: Box::new(handover("default")),
            target: "≤ 5 ms",
            met: s9("default", "handover_p50_ms").map(|v| v <= 5.0),
        },
        TargetRow {
            scenario: "S9",
            what: format!(
                "crashed holder: lease end → next grant, default / arrival order (lease {})",
                crash_lease(results)
            ),
            at: Box::new(crash),
            target: "within a backoff (≤ 800 ms)",
            met: crash_met,
        },
    ]
}

/// The crashed-holder runs' lease, `3000 ms`.
fn crash_lease(results: &Results) -> String {
    results
        .keys()
        .filter(|key| key.starts_with("s9/crash-"))
        .find_map(|key| value(results, key, "lease_ms"))
        .map_or_else(|| "?".to_owned(), |ms| format!("{ms:.0} ms"))
}

fn mode_label(mode: &str) -> &'static str {
    match mode {
        "default" => "default",
        "arrival" => "arrival order",
        "dl" => "DistributedLock's algorithm",
        _ => "?",
    }
}

/// The column of the release feed's event delays (S7, S8).
const FEED_DELAY: &str = "release-feed event delay p50 / p99 / max";

fn feed_delay(results: &Results, k: &str) -> String {
    format!(
        "{} / {} / {}",
        show(results, k, "feed_delay_p50_ms", 0, ""),
        show(results, k, "feed_delay_p99_ms", 0, ""),
        show(results, k, "feed_delay_max_ms", 0, " ms")
    )
}

fn s7_details(results: &Results, sizes: &[usize]) -> String {
    let mut t = Table::new(&[
        "P processes",
        "mode",
        "acquisitions/s",
        "of the ceiling",
        "commands / acquisition",
        "release-feed events / commands per acquisition",
        "server CPU / acquisition",
        "fair share",
        "wait p50 / p99 / longest",
        "p99 wait ÷ fair share",
        "longest ÷ fair share",
        "least ÷ most acquisitions per process",
        FEED_DELAY,
        "commands (all processes)",
    ]);
    for mode in ["default", "arrival", "dl"] {
        for &p in sizes {
            let k = key("s7", mode, p);
            if !results.contains_key(&k) {
                continue;
            }
            t.row(&[
                p.to_string(),
                mode_label(mode).into(),
                show(results, &k, "acq_per_s", 0, ""),
                show(results, &k, "of_ceiling_pct", 1, " %"),
                show(results, &k, "cmds_per_acq", 2, ""),
                format!(
                    "{} / {}",
                    show(results, &k, "feed_events_per_acq", 2, ""),
                    show(results, &k, "feed_per_acq", 2, "")
                ),
                show(results, &k, "cpu_ms_per_acq", 3, " ms"),
                show(results, &k, "fair_share_ms", 0, " ms"),
                format!(
                    "{} / {} / {}",
                    show(results, &k, "wait_p50_ms", 0, ""),
                    show(results, &k, "wait_p99_ms", 0, ""),
                    show(results, &k, "wait_max_ms", 0, " ms")
                ),
                show(results, &k, "wait_p99_fair", 2, "×"),
                show(results, &k, "wait_max_fair", 2, "×"),
                show(results, &k, "least_most", 2, ""),
                feed_delay(results, &k),
                last_text(results, &k, "commands"),
            ]);
        }
    }
    format!(
        "\n## S7: one lock, P processes of 2 tasks, 1 ms critical section\n\n\
         *Fair share*: (tasks − 1) × the window ÷ acquisitions, the wait if the lock went round \
         every task in strict order at the measured rate; a wait still going at the window's end \
         counts as long as it was then, so where the fair share is near the window or longer \
         (arrival order at 32 and 64 processes today) the ratios understate. *Of the \
         ceiling*: acquisitions/s × the mean critical section, as in S3.\n\n{}",
        t.text
    )
}

fn s8_details(results: &Results, sizes: &[usize]) -> String {
    let mut t = Table::new(&[
        "P processes",
        "names",
        "acquisitions/s",
        "commands / acquisition",
        "release-feed events received / acquisition",
        "÷ the same at P = 2",
        "release-feed commands / acquisition",
        "÷ the same at P = 2",
        "server CPU / acquisition",
        "least ÷ most acquisitions per process",
        "wait p99 / longest",
        FEED_DELAY,
        "commands (all processes)",
    ]);
    for &p in sizes {
        let k = key("s8", "default", p);
        if !results.contains_key(&k) {
            continue;
        }
        t.row(&[
            p.to_string(),
            (p / 2).to_string(),
            show(results, &k, "acq_per_s", 0, ""),
            show(results, &k, "cmds_per_acq", 2, ""),
            show(results, &k, "feed_events_per_acq", 3, ""),
            growth(results, "s8", "default", p, "feed_events_per_acq")
                .map_or_else(|| "—".to_owned(), |g| format!("{g:.2}×")),
            show(results, &k, "feed_per_acq", 3, ""),
            growth(results, "s8", "default", p, "feed_per_acq")
                .map_or_else(|| "—".to_owned(), |g| format!("{g:.2}×")),
            show(results, &k, "cpu_ms_per_acq", 3, " ms"),
            show(results, &k, "least_most", 2, ""),
            format!(
                "{} / {}",
                show(results, &k, "wait_p99_ms", 0, ""),
                show(results, &k, "wait_max_ms", 0, " ms")
            ),
            feed_delay(results, &k),
            last_text(results, &k, "commands"),
        ]);
    }
    format!(
        "\n## S8: P/2 names, each shared by two processes of 2 tasks (default fairness)\n\n\
         *Release-feed events*: the change events every process's release feed received \
         (the documents in its change streams' batches); *commands*: the `getMore`s reading \
         them and the `aggregate`s opening the streams. A busy server packs more events into \
         each `getMore`'s answer, so the commands can fall while the events grow. *Event \
         delay*: from the write's time on the server (the event's `wallTime`) to the batch's \
         arrival in the process; the fairness bound holds only while it stays under the \
         releasing process's step back (100 ms).\n\n{}",
        t.text
    )
}

fn s9_details(results: &Results, sizes: &[usize]) -> String {
    let mut t = Table::new(&[
        "P processes",
        "mode",
        "commands/s per waiting process",
        "of which release feed",
        "release events received/s per waiting process",
        "holder's commands/s",
        "server CPU while waiting, ms per s",
        "release → next grant: first / median / max",
        "of the median: the release command + the rest",
        "commands of the waiters in the window",
    ]);
    for mode in FLEET_MODES {
        for &p in sizes {
            let k = key("s9", mode, p);
            if !results.contains_key(&k) {
                continue;
            }
            t.row(&[
                p.to_string(),
                mode_label(mode).into(),
                show(results, &k, "waiter_cmds_per_s", 2, ""),
                show(results, &k, "waiter_feed_per_s", 2, ""),
                show(results, &k, "waiter_feed_events_per_s", 2, ""),
                show(results, &k, "holder_cmds_per_s", 2, ""),
                show(results, &k, "cpu_ms_per_s", 1, ""),
                format!(
                    "{} / {} / {} (n = {})",
                    show(results, &k, "handover_first_ms", 1, ""),
                    show(results, &k, "handover_p50_ms", 1, ""),
                    show(results, &k, "handover_max_ms", 1, " ms"),
                    show(results, &k, "rounds", 0, "")
                ),
                format!(
                    "{} + {}",
                    show(results, &k, "handover_release_call_p50_ms", 1, ""),
                    show(results, &k, "handover_after_release_p50_ms", 1, " ms"),
                ),
                last_text(results, &k, "commands"),
            ]);
        }
    }
    let mut crash = Table::new(&[
        "P processes",
        "mode",
        "lease",
        "lease end → next grant (server clock)",
        "kill → next grant",
    ]);
    for mode in FLEET_MODES {
        for &p in sizes {
            let k = key("s9", &format!("crash-{mode}"), p);
            if !results.contains_key(&k) {
                continue;
            }
            crash.row(&[
                p.to_string(),
                mode_label(mode).into(),
                show(results, &k, "lease_ms", 0, " ms"),
                show(results, &k, "takeover_ms", 0, " ms"),
                show(results, &k, "kill_to_grant_ms", 0, " ms"),
            ]);
        }
    }
    format!(
        "\n## S9: one process holds the lock (renewing), P − 1 processes of one task wait\n\n\
         The window starts once every waiter has asked. After it, the holder releases and the \
         time to the next waiter's grant is measured (release called → grant returned, wall \
         clock across processes); the new holder then releases in turn, a second apart. \
         The median splits into the holder's release command (called → answered) and the \
         rest (the release event reaching the woken process, its attempt, the hops between \
         the runtime's tasks).\n\n\
         {}\n### S9: a crashed holder (killed with SIGKILL while P − 1 wait)\n\n{}",
        t.text, crash.text
    )
}

/// The chart of every fleet figure against P (`fleet.svg`), when any fleet ran.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn chart(results: &Results) -> Option<String> {
    let sizes = sizes(results);
    if sizes.is_empty() {
        return None;
    }
    let series =
        |label: &str, colour: &'static str, scenario: &str, mode: &str, name: &str| Series {
            label: label.to_owned(),
            colour,
            points: sizes
                .iter()
                .filter_map(|&p| {
                    value(results, &key(scenario, mode, p), name).map(|v| (p as f64, v))
                })
                .collect(),
        };
    let modes = |scenario: &str, name: &str| {
        let mut lines = vec![
            series("default", "#1f77b4", scenario, "default", name),
            series("arrival order", "#d62728", scenario, "arrival", name),
        ];
        if scenario == "s7" {
            lines.push(series("DistributedLock", "#7f7f7f", scenario, "dl", name));
        }
        lines
    };
    let panel = |title: &str, log_y: bool, target: Option<f64>, series: Vec<Series>| Panel {
        title: title.to_owned(),
        log_y,
        target,
        series,
    };
    let panels = vec![
        panel(
            "S7: share of the ceiling, %",
            false,
            None,
            modes("s7", "of_ceiling_pct"),
        ),
        panel(
            "S7: commands per acquisition",
            true,
            None,
            modes("s7", "cmds_per_acq"),
        ),
        panel(
            "S7: server CPU per acquisition, ms",
            true,
            None,
            modes("s7", "cpu_ms_per_acq"),
        ),
        panel(
            "S7: p99 wait ÷ fair share",
            true,
            None,
            modes("s7", "wait_p99_fair"),
        ),
        panel(
            "S7: least ÷ most acquisitions per process",
            false,
            Some(0.8),
            modes("s7", "least_most"),
        ),
        panel(
            "S8: release-feed reads per acquisition",
            true,
            None,
            vec![
                series("events", "#1f77b4", "s8", "default", "feed_events_per_acq"),
                series("commands", "#ff7f0e", "s8", "default", "feed_per_acq"),
            ],
        ),
        panel(
            "S9: commands/s per waiting process",
            true,
            Some(0.3),
            modes("s9", "waiter_cmds_per_s"),
        ),
        panel(
            "S9: server CPU while waiting, ms per s",
            true,
            None,
            modes("s9", "cpu_ms_per_s"),
        ),
        panel(
            "S9: release → next grant, median ms",
            true,
            Some(5.0),
            modes("s9", "handover_p50_ms"),
        ),
    ];
    Some(svg(
        "mongolock fleets (issue 56): S7 one lock, S8 a name per pair, S9 one holder",
        &panels,
        3,
    ))
}
