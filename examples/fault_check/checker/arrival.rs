//! The checks of the arrival-order scenario (plain locks with `Fairness::ArrivalOrder`,
//! waiters paused and killed), beside the plain-lock checks that run as in every scenario:
//!
//! - **First come, first served.** No entry of a task T (asked at aT, entered at eT) while a
//!   task U of another process, which asked more than [`SLACK`] before aT (and more than
//!   `SLACK` before eT, so that its first attempt had reached the server), was still waiting
//!   at eT — unless U's process was stopped or killed at some time in [aU, eT], or the line
//!   read just before eT shows U's place recorded after T's, later than aU by more than
//!   `SLACK` but no more than U's slowest attempt (an arrival is recorded late by its
//!   attempt's latency, beyond which alone the order is promised). Entries of a
//!   T whose own process was stopped or killed between its ask and its entry are not judged
//!   (when the store granted it is not known).
//! - **A dead or paused waiter stops holding the line back within its place's life.** After
//!   each waiter fault, the longest stretch during which the lock was free (no section held
//!   it) while a task of a live, running process waited for it must not exceed the place's
//!   life + [`GAP_SLACK`] + the longest backoff.
//!
//! Both checks fail the scenario when they had nothing to look at (no entry judged, no
//! waiter stopped, no waiter killed).
//!
//! The fleet scenarios (many processes on one lock) run the same checks; in the default
//! mode, which promises no order, only the second, with the bound of that mode: a release
//! wakes only the manager listed longest, and the others, waiting quietly, ask again
//! within the lease they were last told of (plus a backoff), so a turn given to a dead or
//! paused manager passes on within a lease.

use std::collections::BTreeMap;

use super::{ProcessRecord, Report, RunData, Section, merge};
use crate::clock::{MS, SEC, ms};
use crate::events::{Access, Event};
use crate::scenario::{WAITER_KILL, WAITER_STOP};

/// How far apart two asks must be before the earlier one must be served first, and how long
/// after its ask a waiter must have been waiting before it counts. An arrival on the record
/// is the store's clock at the attempt minus the wait the client measured when it sent it,
/// so each one is late by that attempt's one-way latency (connection pool checkout, a debug
/// build's encoding, the server's queue and commit order across connections — tens of ms on
/// a busy machine, more under load), plus 1 ms of `$$NOW` resolution; and the task's ask is
/// taken on the worker's clock a little before its lock's actor sees the request. 100 ms
/// covers two such latencies with room to spare while staying well under the 2 s acquire
/// timeout and the 50–250 ms holds, so that real overtakes (a whole hold long) show.
pub(crate) const SLACK: u64 = 100 * MS;

/// Added to a place's life for the line-blocking check: after the place ends, the waiters
/// behind it are not woken (nothing was released); each retries at the end of its backoff
/// (up to the longest backoff, counted separately), then one round trip to be granted and one
/// to record the entry. Three runs measured up to 1,075 ms against a 1 s place and a 100 ms
/// backoff on a quiet machine: 300 ms leaves those two round trips room on a loaded CI
/// machine (single calls of 170 ms and more were seen), still far below a place that did
/// not end.
pub(crate) const GAP_SLACK: u64 = 300 * MS;

/// The arrival-order scenario's settings, in clock nanoseconds, and the lines the monitor
/// saw.
#[derive(Debug, Clone)]
pub(crate) struct ArrivalBounds {
    /// How long a manager's place lasts after its last refused attempt (2 × the longest
    /// retry backoff; in the default mode, how long a refusal keeps a manager listed).
    pub(crate) place_life: u64,
    /// The longest one turn may wait for a dead or paused waiter's place: the place's life
    /// in arrival order; in the default mode the longest the others wait without asking.
    pub(crate) held_back: u64,
    /// Whether the locks grant in arrival order (else only the line-blocking check runs).
    pub(crate) in_order: bool,
    /// The longest retry backoff of a lock's waiters.
    pub(crate) backoff_max: u64,
    /// Every line of waiting managers the monitor read (only to explain an overtake).
    pub(crate) lines: Vec<LineSample>,
}

/// A lock's line as the monitor read it: `at` when the answer arrived.
#[derive(Debug, Clone)]
pub(crate) struct LineSample {
    pub(crate) at: u64,
    pub(crate) lock: String,
    pub(crate) holder: Option<String>,
    /// (manager, how long its oldest task had waited, in nanoseconds), earliest first.
    pub(crate) places: Vec<(String, u64)>,
}

impl LineSample {
    fn describe(&self) -> String {
        let places = self
            .places
            .iter()
            .map(|(holder, waited)| format!("{holder}:{:.0}", ms(*waited)))
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "{:.1} ms held by {}, line [{places}]",
            ms(self.at),
            self.holder.as_deref().unwrap_or("-")
        )
    }
}

/// How far from an entry the monitor's reads of the line are used to explain an overtake:
/// a little more than its 100 ms period.
const LINE_NEAR: u64 = 150 * MS;

/// What the arrival-order checks saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct ArrivalReport {
    /// Entries judged by the first-come-first-served check.
    pub(crate) entries_checked: usize,
    /// Entries not judged: their own process was stopped or killed while they waited.
    pub(crate) entries_exempt: usize,
    /// Judged entries while a task of another process that asked later was still waiting
    /// (the check had someone to serve out of order).
    pub(crate) contended_entries: usize,
    /// Earlier asks still waiting at an entry elsewhere, excused because their process was
    /// stopped or killed meanwhile.
    pub(crate) excused: usize,
    /// Earlier asks (by more than the slack) still waiting at an entry elsewhere: the
    /// violations of the check.
    pub(crate) overtakes: usize,
    /// Earlier asks still waiting at an entry elsewhere whose place the store had recorded
    /// as arriving after the entering task's ask, late by no more than their process's
    /// slowest attempt: the order is promised beyond an attempt's latency only.
    pub(crate) recorded_late: usize,
    /// The latest of those records, after the ask.
    pub(crate) latest_record: u64,
    /// Of those, overtakes of a manager the monitor saw in the line both within
    /// [`LINE_NEAR`] before and after the entry (its place was most likely live when the
    /// store granted the lock); the others' places had lapsed or were not read.
    pub(crate) overtakes_past_a_seen_place: usize,
    /// Of those, overtakes by a task whose own process had an earlier task (earlier than
    /// the overtaken one) on the lock give up within [`SLACK`] before the entry: the grant
    /// won for that task went to the next one in the process.
    pub(crate) overtakes_handed_on_locally: usize,
    pub(crate) waiter_stops: usize,
    pub(crate) waiter_kills: usize,
    /// The bound on the line-blocking stretch.
    pub(crate) gap_bound: u64,
    /// Free-while-waiting stretches that overlapped the time after a waiter fault.
    pub(crate) gaps_after_faults: usize,
    /// Waiter faults whose victim the monitor then saw holding a lock (an attempt sent
    /// just before the signal was granted): that lock is not judged after that fault, its
    /// unrecorded section making it look free.
    pub(crate) victims_granted: usize,
    /// The longest of them, and what it was.
    pub(crate) max_gap_after_fault: Option<(u64, String)>,
    /// The longest free-while-waiting stretch of the whole run, faults or not (for
    /// comparison: an ordinary hand-over's wake-up and round trips).
    pub(crate) max_gap_overall: Option<(u64, String)>,
}

impl ArrivalReport {
    pub(crate) fn add(&mut self, other: &ArrivalReport) {
        self.entries_checked += other.entries_checked;
        self.entries_exempt += other.entries_exempt;
        self.contended_entries += other.contended_entries;
        self.excused += other.excused;
        self.overtakes += other.overtakes;
        self.recorded_late += other.recorded_late;
        self.latest_record = self.latest_record.max(other.latest_record);
        self.overtakes_past_a_seen_place += other.overtakes_past_a_seen_place;
        self.overtakes_handed_on_locally += other.overtakes_handed_on_locally;
        self.waiter_stops += other.waiter_stops;
        self.waiter_kills += other.waiter_kills;
        self.gap_bound = self.gap_bound.max(other.gap_bound);
        self.gaps_after_faults += other.gaps_after_faults;
        self.victims_granted += other.victims_granted;
        keep_max(
            &mut self.max_gap_after_fault,
            other.max_gap_after_fault.clone(),
        );
        keep_max(&mut self.max_gap_overall, other.max_gap_overall.clone());
    }
}

fn keep_max(slot: &mut Option<(u64, String)>, candidate: Option<(u64, String)>) {
    if let Some((span, what)) = candidate
        && slot.as_ref().is_none_or(|(max, _)| span > *max)
    {
        *slot = Some((span, what));
    }
}

/// One acquisition of a plain lock: who asked when, and until when it surely waited.
#[derive(Debug, Clone)]
struct Wait {
    process: usize,
    task: u32,
    lock: String,
    asked: u64,
    /// When it entered, if it did.
    entered: Option<u64>,
    /// Until when it was surely still waiting: its entry, or (given up) its deadline, or
    /// (failed) the failure less the slack; `None` when its process was killed before it
    /// recorded an outcome.
    left: Option<u64>,
    /// How it ended, for the messages.
    outcome: &'static str,
}

fn waits(processes: &[ProcessRecord]) -> Vec<Wait> {
    let mut waits = Vec::new();
    for (p, process) in processes.iter().enumerate() {
        for event in &process.events {
            let wait = match event {
                Event::Enter {
                    lock,
                    task,
                    asked,
                    at,
                    access: Access::Exclusive,
                    ..
                } => Wait {
                    process: p,
                    task: *task,
                    lock: lock.clone(),
                    asked: *asked,
                    entered: Some(*at),
                    left: Some(*at),
                    outcome: "entered",
                },
                Event::Timeout {
                    lock,
                    task,
                    asked,
                    at,
                    limit_ms,
                    access: Access::Exclusive,
                } => Wait {
                    process: p,
                    task: *task,
                    lock: lock.clone(),
                    asked: *asked,
                    entered: None,
                    // The deadline: the acquisition gave up no earlier (its own clock
                    // started a little after the ask).
                    left: Some((*at).min(asked + limit_ms * MS)),
                    outcome: "gave up",
                },
                Event::AcquireError {
                    lock,
                    task,
                    asked,
                    at,
                    ..
                } => Wait {
                    process: p,
                    task: *task,
                    lock: lock.clone(),
                    asked: *asked,
                    entered: None,
                    left: Some(at.saturating_sub(SLACK).max(*asked)),
                    outcome: "failed",
                },
                _ => continue,
            };
            waits.push(wait);
        }
    }
    waits
}

/// Stopped, or killed, at some time in `[from, to]`.
fn disturbed(process: &ProcessRecord, from: u64, to: u64) -> bool {
    process.stopped_during(from, to) || process.killed_at.is_some_and(|k| k >= from && k <= to)
}

pub(super) fn check(
    bounds: &ArrivalBounds,
    sections: &[Section],
    run: &RunData,
    report: &mut Report,
) {
    let processes = &run.processes;
    let mut arrival = ArrivalReport {
        gap_bound: bounds.held_back + bounds.backoff_max + GAP_SLACK,
        ..ArrivalReport::default()
    };
    let waits = waits(processes);
    let mut by_lock: BTreeMap<&str, Vec<&Wait>> = BTreeMap::new();
    for wait in &waits {
        by_lock.entry(wait.lock.as_str()).or_default().push(wait);
    }
    if bounds.in_order {
        check_order(
            &by_lock,
            &bounds.lines,
            processes,
            &mut arrival,
            &mut report.violations,
        );
    }
    check_line_blocking(bounds, sections, &by_lock, run, &mut arrival, report);
    if bounds.in_order && arrival.entries_checked == 0 {
        report
            .violations
            .push("arrival order: no entry was judged by the first-come-first-served check".into());
    }
    if arrival.waiter_stops == 0 {
        report
            .violations
            .push("arrival order: no waiter was SIGSTOPped (nothing to check)".into());
    }
    if arrival.waiter_kills == 0 {
        report
            .violations
            .push("arrival order: no waiter was SIGKILLed (nothing to check)".into());
    }
    report.arrival = Some(arrival);
}

fn describe(wait: &Wait, processes: &[ProcessRecord]) -> String {
    format!(
        "w{} task {} (asked {:.1} ms, {} {})",
        processes[wait.process].index,
        wait.task,
        ms(wait.asked),
        wait.outcome,
        wait.left
            .map_or("-".into(), |left| format!("{:.1} ms", ms(left)))
    )
}

/// First come, first served across processes (see the module's documentation).
fn check_order(
    by_lock: &BTreeMap<&str, Vec<&Wait>>,
    lines: &[LineSample],
    processes: &[ProcessRecord],
    arrival: &mut ArrivalReport,
    violations: &mut Vec<String>,
) {
    for (lock, list) in by_lock {
        for t in list {
            let Some(entered) = t.entered else { continue };
            if disturbed(&processes[t.process], t.asked, entered) {
                arrival.entries_exempt += 1;
                continue;
            }
            arrival.entries_checked += 1;
            let mut contended = false;
            for u in list {
                // U was still waiting at T's entry (its grant, if any, came after T's
                // section, which began before the entry was recorded).
                if u.process == t.process
                    || u.asked >= entered
                    || u.left.is_none_or(|l| l <= entered)
                {
                    continue;
                }
                if u.asked > t.asked {
                    contended = true;
                    continue;
                }
                if u.asked + SLACK >= t.asked || u.asked + SLACK >= entered {
                    continue;
                }
                if disturbed(&processes[u.process], u.asked, entered) {
                    arrival.excused += 1;
                    continue;
                }
                // What the monitor saw of the line just before and just after the entry.
                let near: Vec<&LineSample> = lines
                    .iter()
                    .filter(|l| {
                        l.lock == **lock
                            && l.at + LINE_NEAR >= entered
                            && l.at <= entered + LINE_NEAR
                    })
                    .collect();
                let before = near.iter().rev().find(|l| l.at <= entered);
                let after = near.iter().find(|l| l.at > entered);
                let manager = processes[u.process].holder();
                // The store records an arrival as its clock at the attempt less the wait the
                // client measured when it sent it: late by the attempt's latency, beyond
                // which alone the order is promised. U's place, read just before the entry,
                // arrived that late (more than the slack, no later than U's slowest
                // attempt), and after T's place (or T's ask, T not in line): the store kept
                // its line.
                let recorded = |of: Option<&str>| {
                    before.and_then(|l| {
                        let (_, waited) = l.places.iter().find(|(h, _)| Some(h.as_str()) == of)?;
                        Some(l.at.saturating_sub(*waited))
                    })
                };
                let (u_recorded, t_recorded) =
                    (recorded(manager), recorded(processes[t.process].holder()));
                let late = u_recorded.map(|at| at.saturating_sub(u.asked));
                let kept_its_line = u_recorded.is_some_and(|u_at| match t_recorded {
                    Some(t_at) => t_at <= u_at,
                    None => t.asked <= u_at + SLACK,
                });
                if let (Some(late), Some(slowest)) = (late, processes[u.process].slowest_attempt)
                    && late > SLACK
                    && late <= slowest + SLACK
                    && kept_its_line
                {
                    arrival.recorded_late += 1;
                    arrival.latest_record = arrival.latest_record.max(late);
                    continue;
                }
                arrival.overtakes += 1;
                let in_line = |sample: Option<&&LineSample>| {
                    sample
                        .is_some_and(|l| l.places.iter().any(|(h, _)| Some(h.as_str()) == manager))
                };
                let seen = in_line(before) && in_line(after);
                if seen {
                    arrival.overtakes_past_a_seen_place += 1;
                }
                // A task of T's own process that asked before U and gave up just before T
                // entered: the grant was most likely won for it and handed to T in the
                // process, without the store judging T's own arrival.
                let handed_on = list.iter().find(|w| {
                    w.process == t.process
                        && w.entered.is_none()
                        && w.asked < u.asked
                        && w.left.is_some_and(|l| l <= entered && l + SLACK >= entered)
                });
                let story = match handed_on {
                    Some(w) => {
                        arrival.overtakes_handed_on_locally += 1;
                        format!(
                            "handed on in its process: {} gave up {:.1} ms before this entry",
                            describe(w, processes),
                            ms(entered - w.left.unwrap_or(entered))
                        )
                    }
                    None if seen => {
                        "its manager was in line just before and just after the entry".to_owned()
                    }
                    None => "its manager's place was not seen in line around the entry".to_owned(),
                };
                let show = |sample: Option<&&LineSample>| {
                    sample.map_or("not read".to_owned(), |l| l.describe())
                };
                violations.push(format!(
                    "{lock}: out of arrival order: {} entered at {:.1} ms, while {} had asked {:.1} ms before it and was still waiting; {}; the line before the entry: {}; after: {}",
                    describe(t, processes),
                    ms(entered),
                    describe(u, processes),
                    ms(t.asked - u.asked),
                    story,
                    show(before),
                    show(after),
                ));
            }
            if contended {
                arrival.contended_entries += 1;
            }
        }
    }
}

/// `[from, to)` less the stopped stretches of `process` and everything from its kill on.
fn running_parts(process: &ProcessRecord, from: u64, to: u64) -> Vec<(u64, u64)> {
    let to = process.killed_at.map_or(to, |k| to.min(k));
    let mut parts = vec![(from, to)];
    for (stop, cont) in &process.stops {
        parts = parts
            .into_iter()
            .flat_map(|(a, b)| {
                if *cont <= a || *stop >= b {
                    vec![(a, b)]
                } else {
                    vec![(a, *stop), (*cont, b)]
                }
            })
            .filter(|(a, b)| a < b)
            .collect();
    }
    parts
}

/// The free-while-waiting stretches (see the module's documentation), measured after each
/// waiter fault.
fn check_line_blocking(
    bounds: &ArrivalBounds,
    sections: &[Section],
    by_lock: &BTreeMap<&str, Vec<&Wait>>,
    run: &RunData,
    arrival: &mut ArrivalReport,
    report: &mut Report,
) {
    let processes = &run.processes;
    let limits = &run.limits;
    // Each waiter fault's victim and the stretch after it in which its place may still
    // hold the line back, and then some.
    let mut windows: Vec<(u64, u64, String)> = Vec::new();
    // (lock, from, to): a victim the monitor saw holding the lock after its fault, from the
    // fault until its lease surely ended; its section, if any, was recorded late or never,
    // so the sections would show the lock free.
    let mut victim_held: Vec<(&str, u64, u64)> = Vec::new();
    for fault in &run.faults {
        let victim = if fault.kind == WAITER_STOP {
            arrival.waiter_stops += 1;
            processes
                .iter()
                .find(|p| p.stops.contains(&(fault.start, fault.end)))
        } else if fault.kind == WAITER_KILL {
            arrival.waiter_kills += 1;
            processes.iter().find(|p| p.killed_at == Some(fault.start))
        } else {
            continue;
        };
        let who = victim.map_or("?".to_owned(), |p| format!("w{}", p.index));
        let window_end = fault.end + bounds.place_life + bounds.backoff_max + SEC;
        windows.push((
            fault.start,
            window_end,
            format!("{} of {who} at {:.1} ms", fault.kind, ms(fault.start)),
        ));
        // While stopped, or once killed (until the lease of a grant it never heard of has
        // surely ended): a stopped victim holds the lock again, legitimately, once resumed.
        let seen_until = if fault.kind == WAITER_KILL {
            fault.end + limits.expiry + limits.slack
        } else {
            fault.end
        };
        let holder = victim.and_then(ProcessRecord::holder);
        let mut granted = false;
        for sample in &run.samples {
            if sample.at >= fault.start
                && sample.at <= seen_until
                && holder.is_some()
                && sample.holder.as_deref() == holder
            {
                granted = true;
                victim_held.push((
                    sample.lock.as_str(),
                    fault.start,
                    sample.at + limits.expiry + limits.slack,
                ));
            }
        }
        if granted {
            arrival.victims_granted += 1;
        }
    }
    for (lock, waits) in by_lock {
        let mut list: Vec<&Section> = sections.iter().filter(|s| s.lock == *lock).collect();
        list.sort_by_key(|s| (s.enter, s.token));
        // Free stretches: from the end of everything entered so far to the next entry. A
        // section holds the lock until its release returned, or — lost, killed, released
        // with an error — until its lease may have lasted.
        let mut free: Vec<(u64, u64)> = Vec::new();
        let mut busy_until: Option<u64> = None;
        for section in &list {
            if let Some(busy) = busy_until
                && section.enter > busy
            {
                free.push((busy, section.enter));
            }
            let held_until = match (section.released, section.release_ok) {
                (Some(released), true) => released,
                _ => section
                    .end(processes)
                    .unwrap_or(limits.until)
                    .saturating_add(limits.expiry),
            };
            busy_until = Some(busy_until.map_or(held_until, |b| b.max(held_until)));
        }
        if let Some(busy) = busy_until
            && busy < limits.until
        {
            free.push((busy, limits.until));
        }
        // Waiting: from SLACK after the ask (its first attempt reached the server) until it
        // surely stopped, while its process ran.
        let waiting = merge(
            waits
                .iter()
                .flat_map(|w| {
                    let process = &processes[w.process];
                    let until = w.left.or(process.killed_at).unwrap_or(limits.until);
                    running_parts(process, w.asked + SLACK, until)
                })
                .collect(),
        );
        for (free_from, free_to) in free {
            for (wait_from, wait_to) in &waiting {
                let (from, to) = ((*wait_from).max(free_from), (*wait_to).min(free_to));
                if from >= to {
                    continue;
                }
                if victim_held
                    .iter()
                    .any(|(held, start, end)| held == lock && from < *end && to > *start)
                {
                    continue;
                }
                let span = to - from;
                let what = format!(
                    "{lock} free with a task waiting from {:.1} ms to {:.1} ms",
                    ms(from),
                    ms(to)
                );
                keep_max(&mut arrival.max_gap_overall, Some((span, what.clone())));
                for (start, end, fault) in &windows {
                    if from >= *end || to <= *start {
                        continue;
                    }
                    arrival.gaps_after_faults += 1;
                    let what = format!("{what}, after the {fault}");
                    keep_max(&mut arrival.max_gap_after_fault, Some((span, what.clone())));
                    if span > arrival.gap_bound {
                        report.violations.push(format!(
                            "arrival order: a waiter fault held the line back too long: {what} ({:.0} ms; a place holds a turn back up to {:.0} ms, bound {:.0} ms)",
                            ms(span),
                            ms(bounds.held_back),
                            ms(arrival.gap_bound)
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{limits, process, violations_with};
    use super::*;
    use crate::checker::{FaultRecord, check};

    fn enter(lock: &str, task: u32, token: u64, asked: u64, at: u64) -> Event {
        Event::Enter {
            lock: lock.into(),
            task,
            token,
            asked,
            at,
            access: Access::Exclusive,
        }
    }

    fn exit(lock: &str, task: u32, token: u64, at: u64) -> Event {
        Event::Exit {
            lock: lock.into(),
            task,
            token,
            at,
            released: at + MS,
            outcome: "ok".into(),
        }
    }

    fn run(processes: Vec<ProcessRecord>) -> RunData {
        RunData {
            limits: limits(),
            locks: vec!["a".into()],
            processes,
            faults: Vec::new(),
            samples: Vec::new(),
            docs: Vec::new(),
            final_held: Vec::new(),
            arrival: Some(ArrivalBounds {
                place_life: 200 * MS,
                held_back: 200 * MS,
                in_order: true,
                backoff_max: 100 * MS,
                lines: Vec::new(),
            }),
        }
    }

    /// Process `index` stopped (`SIGSTOP`) from `start` to `end`, as the orchestrator records it.
    fn waiter_stop(data: &mut RunData, index: usize, (start, end): (u64, u64)) {
        data.processes[index].stops.push((start, end));
        data.faults.push(waiter_fault(WAITER_STOP, start, end));
    }

    /// Process `index` killed (`SIGKILL`) at `at`, as the orchestrator records it.
    fn waiter_kill(data: &mut RunData, index: usize, at: u64) {
        data.processes[index].killed_at = Some(at);
        data.faults.push(waiter_fault(WAITER_KILL, at, at));
    }

    fn waiter_fault(kind: &str, start: u64, end: u64) -> FaultRecord {
        FaultRecord {
            kind: kind.into(),
            start,
            end,
            holder_fault: true,
            server_down: false,
        }
    }

    fn stop_and_kill(data: &mut RunData, stopped: usize, killed: usize) {
        waiter_stop(data, stopped, (50 * SEC, 51 * SEC));
        waiter_kill(data, killed, 60 * SEC);
    }

    fn order_violations(report: &Report) -> usize {
        violations_with(report, "out of arrival order")
    }

    /// w0 holds "a" from 49 s to 50 s; w1, asking at 49.5 s, enters at `enters` under
    /// `token` and leaves at 52 s.
    fn holder_then_waiter(token: u64, enters: u64) -> Vec<ProcessRecord> {
        vec![
            process(
                0,
                vec![
                    enter("a", 0, 1, 49 * SEC, 49 * SEC),
                    exit("a", 0, 1, 50 * SEC),
                ],
            ),
            process(
                1,
                vec![
                    enter("a", 0, token, 49 * SEC + 500 * MS, enters),
                    exit("a", 0, token, 52 * SEC),
                ],
            ),
        ]
    }

    /// w0 holds "a" from 1 s to 4 s (it asked at the same instant as w1 and entered at
    /// once: fine); w1, asking at 1 s, waits until 5 s; w2, asking at `w2_asked`, enters at
    /// 4.01 s; w3 is stopped and killed (the scenario's faults).
    fn w2_enters_before_w1(w2_asked: u64) -> RunData {
        let mut data = run(vec![
            process(
                0,
                vec![enter("a", 0, 1, SEC, SEC), exit("a", 0, 1, 4 * SEC)],
            ),
            process(
                1,
                vec![enter("a", 0, 3, SEC, 5 * SEC), exit("a", 0, 3, 6 * SEC)],
            ),
            process(
                2,
                vec![
                    enter("a", 0, 2, w2_asked, 4 * SEC + 10 * MS),
                    exit("a", 0, 2, 4 * SEC + 900 * MS),
                ],
            ),
            process(3, Vec::new()),
        ]);
        stop_and_kill(&mut data, 3, 3);
        data
    }

    /// w1 asked 500 ms before w2 but w2 entered first: caught, unless w1 was stopped
    /// meanwhile, or the asks were closer than the slack.
    #[test]
    fn an_overtake_is_caught_unless_excused() {
        let cases = [
            (SEC + 500 * MS, None, 1),
            (SEC + 500 * MS, Some((2 * SEC, 3 * SEC)), 0),
            (SEC + 50 * MS, None, 0),
        ];
        for (w2_asked, stop, expected) in cases {
            let mut data = w2_enters_before_w1(w2_asked);
            if let Some(stop) = stop {
                data.processes[1].stops.push(stop);
            }
            let report = check(&data);
            assert_eq!(
                order_violations(&report),
                expected,
                "{w2_asked} {stop:?}: {:?}",
                report.violations
            );
            let arrival = report.arrival.expect("arrival report");
            assert_eq!(arrival.entries_checked, if stop.is_some() { 2 } else { 3 });
            assert_eq!(arrival.waiter_stops, 1);
            assert_eq!(arrival.waiter_kills, 1);
        }
    }

    /// w1 asked 500 ms before w2, but the store recorded w1's place 600 ms after its ask,
    /// behind w2's: excused while w1's slowest attempt took that long, an overtake if none
    /// did, or if the store had w1's place ahead of w2's.
    #[test]
    fn an_overtake_of_a_place_recorded_late_by_its_latency_is_excused() {
        let cases = [
            (Some(700 * MS), 2500 * MS, 0),
            (Some(300 * MS), 2500 * MS, 1),
            (None, 2500 * MS, 1),
            (Some(700 * MS), 2 * SEC, 1),
        ];
        for (slowest, w2_waited, expected) in cases {
            let mut data = w2_enters_before_w1(SEC + 500 * MS);
            data.processes[1].slowest_attempt = slowest;
            if let Some(bounds) = data.arrival.as_mut() {
                bounds.lines.push(LineSample {
                    at: 4 * SEC,
                    lock: "a".into(),
                    holder: Some("w0".into()),
                    places: vec![("w2".into(), w2_waited), ("w1".into(), 2400 * MS)],
                });
            }
            let report = check(&data);
            assert_eq!(
                order_violations(&report),
                expected,
                "{slowest:?}: {:?}",
                report.violations
            );
            let arrival = report.arrival.expect("arrival report");
            assert_eq!(arrival.recorded_late, 1 - expected);
        }
    }

    /// w0's task 1 asked first and gave up just before w0's task 0 (which asked after w1)
    /// entered: an overtake, told as a grant handed on in the process.
    #[test]
    fn a_grant_handed_on_after_a_local_give_up_is_told_as_such() {
        let mut data = run(vec![
            process(
                0,
                vec![
                    Event::Timeout {
                        lock: "a".into(),
                        task: 1,
                        asked: SEC,
                        at: 3 * SEC,
                        limit_ms: 2000,
                        access: Access::Exclusive,
                    },
                    enter("a", 0, 2, 2 * SEC, 3 * SEC + 5 * MS),
                    exit("a", 0, 2, 3 * SEC + 100 * MS),
                ],
            ),
            process(
                1,
                vec![
                    enter("a", 0, 3, SEC + 500 * MS, 3 * SEC + 200 * MS),
                    exit("a", 0, 3, 4 * SEC),
                ],
            ),
            process(2, Vec::new()),
        ]);
        stop_and_kill(&mut data, 2, 2);
        let report = check(&data);
        assert_eq!(order_violations(&report), 1, "{:?}", report.violations);
        let arrival = report.arrival.expect("arrival report");
        assert_eq!(arrival.overtakes_handed_on_locally, 1);
    }

    /// A waiter that gave up before the entry elsewhere was not overtaken; one whose
    /// deadline came after it was.
    #[test]
    fn a_waiter_that_gave_up_counts_until_its_deadline() {
        for (limit_ms, expected) in [(1000, 0), (5000, 1)] {
            let mut data = run(vec![
                process(
                    0,
                    vec![enter("a", 0, 1, SEC, SEC), exit("a", 0, 1, 4 * SEC)],
                ),
                process(
                    1,
                    vec![Event::Timeout {
                        lock: "a".into(),
                        task: 0,
                        asked: SEC,
                        at: SEC + limit_ms * MS,
                        limit_ms,
                        access: Access::Exclusive,
                    }],
                ),
                process(
                    2,
                    vec![
                        enter("a", 0, 2, 2 * SEC, 4 * SEC + 10 * MS),
                        exit("a", 0, 2, 5 * SEC),
                    ],
                ),
                process(3, Vec::new()),
            ]);
            stop_and_kill(&mut data, 3, 3);
            let report = check(&data);
            assert_eq!(
                order_violations(&report),
                expected,
                "{limit_ms}: {:?}",
                report.violations
            );
        }
    }

    /// A victim killed as its attempt was granted holds the lock until its lease ends,
    /// though no section of it was recorded: the monitor saw it holding, so the lock is not
    /// judged free after that fault.
    #[test]
    fn a_killed_victim_seen_holding_is_not_judged() {
        for (seen, expected) in [(false, 1), (true, 0)] {
            let mut processes = holder_then_waiter(3, 51 * SEC + 600 * MS);
            processes.extend([process(2, Vec::new()), process(3, Vec::new())]);
            let mut data = run(processes);
            data.limits.until = 53 * SEC;
            waiter_kill(&mut data, 2, 50 * SEC);
            waiter_stop(&mut data, 3, (52 * SEC, 53 * SEC));
            if seen {
                data.samples.push(crate::checker::Sample {
                    at: 50 * SEC + 200 * MS,
                    lock: "a".into(),
                    holder: Some("w2".into()),
                    token: 2,
                });
            }
            let report = check(&data);
            let found = violations_with(&report, "held the line back");
            assert_eq!(found, expected, "{seen}: {:?}", report.violations);
            let arrival = report.arrival.expect("arrival report");
            assert_eq!(arrival.victims_granted, usize::from(seen));
        }
    }

    /// A fleet in the default mode promises no order: an overtake is no violation and no
    /// entry needs judging; a free-while-waiting stretch is held to its own bound (a
    /// lease, here 1 s, plus the backoff and slack): 800 ms is fine, 1.6 s too long.
    #[test]
    fn the_default_mode_is_judged_on_the_line_blocking_only() {
        for (next_enter, expected) in [(50 * SEC + 800 * MS, 0), (51 * SEC + 600 * MS, 1)] {
            let mut processes = holder_then_waiter(2, next_enter);
            processes.push(process(
                2,
                vec![
                    enter("a", 0, 3, 49 * SEC, 53 * SEC),
                    exit("a", 0, 3, 54 * SEC),
                ],
            ));
            processes.push(process(3, Vec::new()));
            let mut data = run(processes);
            data.limits.until = 55 * SEC;
            if let Some(bounds) = data.arrival.as_mut() {
                bounds.in_order = false;
                bounds.held_back = SEC;
            }
            // w2, which asked before w1, entered after it: an overtake in arrival order.
            stop_and_kill(&mut data, 3, 3);
            let report = check(&data);
            assert_eq!(order_violations(&report), 0, "{:?}", report.violations);
            assert_eq!(
                violations_with(&report, "held the line back"),
                expected,
                "{:?}",
                report.violations
            );
            assert_eq!(
                violations_with(&report, "no entry was judged"),
                0,
                "{:?}",
                report.violations
            );
        }
    }

    /// The lock free for 800 ms after a waiter fault while w1 waits: too long; 150 ms is
    /// fine. Without any waiter fault the scenario fails as vacuous.
    #[test]
    fn a_line_held_back_too_long_is_caught_and_no_fault_is_a_violation() {
        for (next_enter, expected) in [(50 * SEC + 150 * MS, 0), (50 * SEC + 800 * MS, 1)] {
            let mut processes = holder_then_waiter(2, next_enter);
            processes.push(process(2, Vec::new()));
            let mut data = run(processes);
            data.limits.until = 52 * SEC;
            stop_and_kill(&mut data, 2, 2);
            let report = check(&data);
            let found = violations_with(&report, "held the line back");
            assert_eq!(found, expected, "{:?}", report.violations);
        }
        let data = run(vec![process(
            0,
            vec![enter("a", 0, 1, SEC, SEC), exit("a", 0, 1, 2 * SEC)],
        )]);
        let report = check(&data);
        assert_eq!(
            violations_with(&report, "nothing to check"),
            2,
            "{:?}",
            report.violations
        );
    }
}
