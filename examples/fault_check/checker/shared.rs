//! The checks of the shared kinds — semaphores and reader/writer locks — over the same
//! critical sections, with the same clock discipline, as the mutex's: a section counts as a
//! holder from its recorded entry (taken after the grant returned) until it was told of a
//! loss, stopped touching the resource (taken before its release was sent) or was killed, so
//! that an overlap of two recorded intervals is an overlap of two holders that both believed
//! they held. A section whose process was `SIGSTOP`ped is exempt from exclusion (it cannot be
//! told of its loss; the fence has to stop it instead) and counted apart.

use std::collections::{BTreeMap, BTreeSet};

use crate::events::Event;

use super::{
    Access, LOSS_RECORDING_SLACK, ProcessRecord, Report, RunData, Section, merge, ms, ms_between,
};

/// How many overlaps of one lock are spelled out; the rest are counted in one line.
const DETAILED: usize = 10;

/// A reader/writer lock with this many reads that never had two readers at once did not
/// share (a run has hundreds).
const READS_TO_SHARE: usize = 10;

/// How long before a kill the semaphore must have been full for its return to full use to
/// be required (a name nobody contended for need not fill up again).
const FULL_BEFORE_KILL: u64 = 2 * crate::clock::SEC;

/// What the shared-kind checks saw, for the summary.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedReport {
    /// Sections holding a semaphore permit, a read, a write.
    pub(crate) permits: usize,
    pub(crate) reads: usize,
    pub(crate) writes: usize,
    /// Acquire timeouts by what was asked (`permit`, `read`, `write`, `lock`).
    pub(crate) timeouts: BTreeMap<&'static str, usize>,
    /// Most permit holders at once (not counting paused ones), and the semaphore's count.
    pub(crate) peak_permits: Option<(usize, u32)>,
    /// Most readers at once (not counting paused ones).
    pub(crate) peak_readers: usize,
    /// Reads entered while another reader was inside.
    pub(crate) shared_reads: usize,
    /// Kills of a permit holder after which the semaphore had to fill up again, and the
    /// slowest it did.
    pub(crate) permits_back: usize,
    pub(crate) slowest_permit_back: Option<u64>,
    /// Per side, the longest wait without an entry of that side, in time free of faults.
    pub(crate) longest_quiet_wait: BTreeMap<&'static str, u64>,
}

impl SharedReport {
    pub(super) fn count_timeout(&mut self, access: Access) {
        *self.timeouts.entry(label(access)).or_default() += 1;
    }

    /// Adds another scenario's figures.
    pub(crate) fn add(&mut self, other: &SharedReport) {
        self.permits += other.permits;
        self.reads += other.reads;
        self.writes += other.writes;
        for (access, n) in &other.timeouts {
            *self.timeouts.entry(access).or_default() += n;
        }
        if let Some((peak, permits)) = other.peak_permits
            && self.peak_permits.is_none_or(|(p, _)| peak > p)
        {
            self.peak_permits = Some((peak, permits));
        }
        self.peak_readers = self.peak_readers.max(other.peak_readers);
        self.shared_reads += other.shared_reads;
        self.permits_back += other.permits_back;
        if let Some(slowest) = other.slowest_permit_back {
            self.slowest_permit_back =
                Some(self.slowest_permit_back.map_or(slowest, |s| s.max(slowest)));
        }
        for (side, gap) in &other.longest_quiet_wait {
            let entry = self.longest_quiet_wait.entry(side).or_default();
            *entry = (*entry).max(*gap);
        }
    }
}

fn label(access: Access) -> &'static str {
    match access {
        Access::Exclusive => "lock",
        Access::Permit(_) => "permit",
        Access::Read => "read",
        Access::Write => "write",
    }
}

/// What exclusion a shared name promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// At most this many holders at once.
    Semaphore(u32),
    /// Readers together, or one writer alone.
    ReadWrite,
}

impl Shape {
    /// The shape of a lock's sections; `None` for a mutex (or an election). Sections of two
    /// kinds on one name are a violation (the store refuses a mismatched kind).
    pub(super) fn of(
        lock: &str,
        list: &[&Section],
        processes: &[ProcessRecord],
        report: &mut Report,
    ) -> Option<Self> {
        let shape_of = |access: Access| match access {
            Access::Exclusive => None,
            Access::Permit(permits) => Some(Shape::Semaphore(permits)),
            Access::Read | Access::Write => Some(Shape::ReadWrite),
        };
        let first = list.first()?;
        let shape = shape_of(first.access);
        if let Some(other) = list.iter().find(|s| shape_of(s.access) != shape) {
            report.violations.push(format!(
                "{lock}: held as two kinds of lock: {} and {}",
                first.describe(processes),
                other.describe(processes)
            ));
        }
        shape
    }

    /// Whether `total` holders of which `writers` write break the exclusion.
    fn too_many(self, total: usize, writers: usize) -> bool {
        match self {
            Shape::Semaphore(permits) => total > permits as usize,
            Shape::ReadWrite => writers > 0 && total > 1,
        }
    }
}

/// Every check of one semaphore or reader/writer lock; `list` is sorted by entry.
pub(super) fn check_lock(
    shape: Shape,
    lock: &str,
    list: &[&Section],
    run: &RunData,
    report: &mut Report,
) {
    for section in list {
        match section.access {
            Access::Permit(_) => report.shared.permits += 1,
            Access::Read => report.shared.reads += 1,
            Access::Write => report.shared.writes += 1,
            Access::Exclusive => {}
        }
    }
    let timeline = check_exclusion(shape, lock, list, run, report);
    check_margin(shape, lock, list, run, report);
    check_tokens(lock, list, run, report);
    match shape {
        Shape::Semaphore(permits) => {
            check_permits_back(permits, lock, list, &timeline, run, report);
        }
        Shape::ReadWrite => {
            check_exclusion_order(lock, list, run, report);
            // Only the names the workers contend for: a solo worker's own name has one task,
            // whose reads cannot overlap and whose writes come when its dice say.
            if run.locks.iter().any(|l| l == lock) {
                check_sides(lock, list, run, report);
            }
        }
    }
}

/// One holder entering or leaving, in time order: at one instant a leaving goes first, so
/// that intervals that only touch do not overlap (as in the mutex check).
fn events(
    list: &[&Section],
    ends: &[u64],
    include: impl Fn(usize) -> bool,
) -> Vec<(u64, bool, usize)> {
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(list.len() * 2);
    for (i, section) in list.iter().enumerate() {
        if include(i) && ends[i] > section.enter {
            events.push((section.enter, true, i));
            events.push((ends[i], false, i));
        }
    }
    events.sort_unstable();
    events
}

fn writers(list: &[&Section], inside: &BTreeSet<usize>) -> usize {
    inside
        .iter()
        .filter(|i| list[**i].access == Access::Write)
        .count()
}

fn describe_all(
    list: &[&Section],
    inside: &BTreeSet<usize>,
    processes: &[ProcessRecord],
) -> String {
    inside
        .iter()
        .map(|i| list[*i].describe(processes))
        .collect::<Vec<_>>()
        .join("; ")
}

/// No instant with more holders than the shape admits, counting every holder that was not
/// told of a loss. Returns the count of unpaused holders after every change, in time order.
fn check_exclusion(
    shape: Shape,
    lock: &str,
    list: &[&Section],
    run: &RunData,
    report: &mut Report,
) -> Vec<(u64, usize)> {
    let processes = &run.processes;
    let ends: Vec<u64> = list
        .iter()
        .map(|s| s.end(processes).unwrap_or(u64::MAX))
        .collect();
    let paused: Vec<bool> = list.iter().map(|s| s.paused(processes)).collect();
    let mut inside = BTreeSet::new();
    let mut steady = BTreeSet::new();
    let mut timeline = Vec::new();
    let mut found = 0;
    for (at, entering, i) in events(list, &ends, |_| true) {
        if !entering {
            inside.remove(&i);
            if steady.remove(&i) {
                timeline.push((at, steady.len()));
            }
            continue;
        }
        inside.insert(i);
        if !paused[i] {
            steady.insert(i);
            timeline.push((at, steady.len()));
        }
        let section = list[i];
        match section.access {
            Access::Permit(permits) => {
                let peak = report.shared.peak_permits.map_or(0, |(p, _)| p);
                if steady.len() > peak {
                    report.shared.peak_permits = Some((steady.len(), permits));
                }
            }
            Access::Read if !paused[i] => {
                let readers = steady.len() - writers(list, &steady);
                report.shared.peak_readers = report.shared.peak_readers.max(readers);
                if readers > 1 {
                    report.shared.shared_reads += 1;
                }
            }
            _ => {}
        }
        if !shape.too_many(inside.len(), writers(list, &inside)) {
            continue;
        }
        if !shape.too_many(steady.len(), writers(list, &steady)) {
            report.paused_overlaps += 1;
            continue;
        }
        found += 1;
        if found <= DETAILED {
            let until = steady.iter().map(|j| ends[*j]).min().unwrap_or(u64::MAX);
            report.violations.push(format!(
                "{lock}: {} holders at once ({}) for {:.1} ms from {:.1} ms: {}",
                steady.len(),
                match shape {
                    Shape::Semaphore(permits) => format!("{permits} permits"),
                    Shape::ReadWrite => format!("{} writing", writers(list, &steady)),
                },
                ms_between(at, until),
                ms(at),
                describe_all(list, &steady, processes)
            ));
        }
    }
    if found > DETAILED {
        report.violations.push(format!(
            "{lock}: {} more entries into a full lock",
            found - DETAILED
        ));
    }
    timeline
}

/// The loss margin: a holder told of its loss still counts until it lets go or the margin
/// after the notice has passed, so nobody may take its place within that time. Also the
/// smallest gap between a notice and the entry that took the told holder's place.
fn check_margin(shape: Shape, lock: &str, list: &[&Section], run: &RunData, report: &mut Report) {
    let processes = &run.processes;
    let margin = run.limits.margin;
    let ends: Vec<u64> = list
        .iter()
        .map(|s| s.end(processes).unwrap_or(u64::MAX))
        .collect();
    let let_go = |s: &Section| {
        [
            s.exit,
            processes[s.process].killed_at.filter(|k| *k >= s.asked),
        ]
        .into_iter()
        .flatten()
        .min()
    };
    // Told while still inside: counted until it let go or the margin ran out.
    let extended: Vec<u64> = list
        .iter()
        .zip(&ends)
        .map(|(s, end)| match s.lost {
            Some(lost) if let_go(s).is_none_or(|at| at > lost) => {
                let limit = (lost + margin).saturating_sub(LOSS_RECORDING_SLACK);
                let_go(s).unwrap_or(u64::MAX).min(limit).max(*end)
            }
            _ => *end,
        })
        .collect();
    let paused: Vec<bool> = list.iter().map(|s| s.paused(processes)).collect();
    let mut inside = BTreeSet::new();
    // After each unpaused entry: (entry, holders, writers) not counting told holders.
    let mut entries: Vec<(u64, usize, usize)> = Vec::new();
    for (at, entering, i) in events(list, &extended, |i| !paused[i]) {
        if !entering {
            inside.remove(&i);
            continue;
        }
        inside.insert(i);
        let counted: BTreeSet<usize> = inside.iter().copied().filter(|j| ends[*j] > at).collect();
        entries.push((at, counted.len(), writers(list, &counted)));
        if !shape.too_many(inside.len(), writers(list, &inside))
            || shape.too_many(counted.len(), writers(list, &counted))
        {
            // Within the admitted count, or already a plain overlap reported above.
            continue;
        }
        let told: Vec<String> = inside
            .difference(&counted)
            .map(|j| list[*j].describe(processes))
            .collect();
        report.violations.push(format!(
            "{lock}: {} entered while {} had been told of its loss less than the margin ({:.0} ms) before, still inside",
            list[i].describe(processes),
            told.join("; "),
            ms(margin)
        ));
    }
    for section in list.iter().filter(|s| !s.paused(processes)) {
        let Some(lost) = section
            .lost
            .filter(|l| section.exit.is_none_or(|e| *l <= e))
        else {
            continue;
        };
        let writer = usize::from(section.access == Access::Write);
        let from = entries.partition_point(|(at, _, _)| *at < lost);
        let took_its_place = entries[from..]
            .iter()
            .take_while(|(at, _, _)| *at <= lost + 4 * run.limits.expiry)
            .find(|(_, holders, writers)| shape.too_many(holders + 1, writers + writer));
        if let Some((at, _, _)) = took_its_place {
            report.handovers_after_loss += 1;
            let gap = i64::try_from(*at).unwrap_or(i64::MAX) - i64::try_from(lost).unwrap_or(0);
            report.min_loss_gap = Some(report.min_loss_gap.map_or(gap, |g| g.min(gap)));
        }
    }
}

/// Tokens: each granted once, and a grant asked for after another section had entered
/// carries a larger token than that section's (the store's "larger than every token issued
/// before", which holds for every permit and side: a shared kind never passes a place to a
/// local waiter on its grant's reserved tokens). Entry order alone proves nothing here: two
/// holders granted at once may record their entries in either order, so only a request
/// sent after the other's grant returned is known to come later.
fn check_tokens(lock: &str, list: &[&Section], run: &RunData, report: &mut Report) {
    let processes = &run.processes;
    let mut seen: BTreeMap<u64, &Section> = BTreeMap::new();
    for section in list {
        if let Some(other) = seen.insert(section.token, section) {
            report.violations.push(format!(
                "{lock}: token {} granted twice: {} and {}",
                section.token,
                other.describe(processes),
                section.describe(processes)
            ));
        }
    }
    // The largest token among the sections entered so far, by entry.
    let mut largest: Vec<usize> = Vec::with_capacity(list.len());
    for (i, section) in list.iter().enumerate() {
        match largest.last() {
            Some(&j) if list[j].token >= section.token => largest.push(j),
            _ => largest.push(i),
        }
    }
    let mut found = 0;
    for section in list {
        let before = list.partition_point(|s| s.enter < section.asked);
        let Some(&j) = before.checked_sub(1).and_then(|b| largest.get(b)) else {
            continue;
        };
        if list[j].token >= section.token {
            found += 1;
            if found <= DETAILED {
                report.violations.push(format!(
                    "{lock}: token order: {} was asked for after {} had entered, with a token no larger",
                    section.describe(processes),
                    list[j].describe(processes)
                ));
            }
        }
    }
    if found > DETAILED {
        report.violations.push(format!(
            "{lock}: {} more grants with a token no larger than an earlier grant's",
            found - DETAILED
        ));
    }
}

/// A writer after the readers it excluded, and readers after the writer they waited for:
/// when A ended before B entered and one of them writes, A's token must be smaller. If it
/// were larger, A was granted after B, inside B's lease (B was granted before and held
/// until at least its entry, after A ended) — unless B's process was stopped and its lease
/// expired meanwhile.
fn check_exclusion_order(lock: &str, list: &[&Section], run: &RunData, report: &mut Report) {
    let processes = &run.processes;
    // Ended sections by end, with the largest token so far (all, and writers only).
    let mut ended: Vec<(u64, usize)> = list
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.end(processes).map(|end| (end, i)))
        .collect();
    ended.sort_unstable();
    let largest_so_far = |only_writers: bool| -> Vec<(u64, Option<usize>)> {
        let mut best: Option<usize> = None;
        ended
            .iter()
            .map(|&(end, i)| {
                if (!only_writers || list[i].access == Access::Write)
                    && best.is_none_or(|b| list[i].token > list[b].token)
                {
                    best = Some(i);
                }
                (end, best)
            })
            .collect()
    };
    let any = largest_so_far(false);
    let written = largest_so_far(true);
    let mut found = 0;
    for section in list.iter().filter(|s| !s.paused(processes)) {
        let before = if section.access == Access::Write {
            &any
        } else {
            &written
        };
        let n = before.partition_point(|(end, _)| *end <= section.enter);
        let Some(j) = n.checked_sub(1).and_then(|k| before[k].1) else {
            continue;
        };
        if list[j].token > section.token {
            found += 1;
            if found <= DETAILED {
                report.violations.push(format!(
                    "{lock}: {} ended before {} entered but has the larger token",
                    list[j].describe(processes),
                    section.describe(processes)
                ));
            }
        }
    }
    if found > DETAILED {
        report.violations.push(format!(
            "{lock}: {} more sections ordered against their tokens",
            found - DETAILED
        ));
    }
}

/// When the lock could not be expected to serve both sides, (from, to): each injected fault
/// with the time the locks need to recover from it, and the stalls the run showed without
/// one (a debug build's server on a busy machine can stall writes for a second): a
/// section's release that failed leaves its lease until it expires, and a holder told of a
/// loss (its renewals stalled) keeps its place until then too.
fn disturbed(run: &RunData, list: &[&Section]) -> Vec<(u64, u64)> {
    let limits = &run.limits;
    let bound = limits.expiry + limits.max_backoff + limits.slack;
    let mut windows: Vec<(u64, u64)> = run
        .faults
        .iter()
        .map(|f| {
            let anchor = if f.holder_fault { f.start } else { f.end };
            (f.start, anchor.max(f.end) + bound)
        })
        .collect();
    for section in list {
        if let (Some(exit), Some(released), false) =
            (section.exit, section.released, section.release_ok)
        {
            windows.push((exit, released + limits.expiry + limits.max_backoff));
        }
        if let Some(lost) = section.lost {
            windows.push((lost, lost + limits.expiry + limits.max_backoff));
        }
    }
    windows.sort_unstable();
    windows
}

/// The stretches of (from, to) outside every window, in time order.
fn quiet_stretches(from: u64, to: u64, windows: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut stretches = Vec::new();
    let mut at = from;
    for &(start, end) in windows {
        if end <= at {
            continue;
        }
        if start >= to {
            break;
        }
        if start > at {
            stretches.push((at, start));
        }
        at = at.max(end);
    }
    if to > at {
        stretches.push((at, to));
    }
    stretches
}

/// When `side` of `lock` was asked for and not yet granted: from each ask to its entry or
/// to its timeout, merged into disjoint spans in time order.
fn waiting(lock: &str, side: Access, list: &[&Section], run: &RunData) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = list
        .iter()
        .filter(|s| s.access == side)
        .map(|s| (s.asked, s.enter))
        .collect();
    for process in &run.processes {
        for event in &process.events {
            if let Event::Timeout {
                lock: name,
                asked,
                at,
                access,
                ..
            } = event
                && name == lock
                && *access == side
            {
                spans.push((*asked, *at));
            }
        }
    }
    merge(spans)
}

/// Within (from, to), the most time spent waiting inside one stretch free of faults, and
/// where that stretch starts. Waiting is summed across the stretch, so a caller that keeps
/// timing out and asking again counts as one that waits on.
fn longest_quiet_wait(
    from: u64,
    to: u64,
    waiting: &[(u64, u64)],
    windows: &[(u64, u64)],
) -> (u64, u64) {
    let mut best = (0, from);
    for (start, end) in quiet_stretches(from, to, windows) {
        let waited = waiting
            .iter()
            .map(|&(a, b)| b.min(end).saturating_sub(a.max(start)))
            .sum();
        if waited > best.0 {
            best = (waited, start);
        }
    }
    best
}

/// A crashed holder's permit comes back: after a holder of a permit is `SIGKILL`ed, the
/// semaphore (full before the kill) is full again within a lease plus backoff and slack —
/// impossible while the dead holder's lease still took a permit. Full again needs as many
/// tasks asking at once as there are permits, which the survivors may not be; so the
/// semaphore passes too if, from the dead lease's expiry until the next fault, no task
/// waited longer than a backoff plus slack while a permit was free by the live holders'
/// count (a permit the dead lease still took keeps such a task out).
fn check_permits_back(
    permits: u32,
    lock: &str,
    list: &[&Section],
    timeline: &[(u64, usize)],
    run: &RunData,
    report: &mut Report,
) {
    let limits = &run.limits;
    let bound = limits.expiry + limits.max_backoff + limits.slack;
    let full = permits as usize;
    for (p, process) in run.processes.iter().enumerate() {
        let Some(killed) = process.killed_at else {
            continue;
        };
        let held = list.iter().any(|s| {
            s.process == p
                && s.enter <= killed
                && s.lost.is_none_or(|l| l > killed)
                && s.exit.is_none_or(|e| e > killed)
        });
        let interrupted = run
            .faults
            .iter()
            .any(|f| f.start > killed && f.start <= killed + bound);
        if !held || interrupted || killed + bound > limits.until {
            continue;
        }
        let start =
            timeline.partition_point(|(at, _)| *at < killed.saturating_sub(FULL_BEFORE_KILL));
        let was_full = timeline[start..]
            .iter()
            .take_while(|(at, _)| *at <= killed)
            .any(|(_, n)| *n >= full);
        if !was_full {
            continue;
        }
        report.shared.permits_back += 1;
        let after = timeline.partition_point(|(at, _)| *at < killed);
        let found = timeline[after..].iter().find(|(_, n)| *n >= full);
        if let Some(&(at, _)) = found
            && at - killed <= bound
        {
            report.shared.slowest_permit_back = Some(
                report
                    .shared
                    .slowest_permit_back
                    .map_or(at - killed, |s| s.max(at - killed)),
            );
            continue;
        }
        let from = killed + limits.expiry + limits.slack;
        let next_fault = run
            .faults
            .iter()
            .map(|f| f.start)
            .filter(|&start| start > killed);
        let to = next_fault.min().unwrap_or(limits.until).min(limits.until);
        let waits = waiting(lock, Access::Permit(permits), list, run);
        let (longest, since) =
            longest_wait_beside_a_free_permit((from, to), full, timeline, &waits);
        let allowed = limits.max_backoff + limits.slack;
        if longest > allowed {
            report.violations.push(format!(
                "{lock}: the permit of SIGKILLed w{} did not come back: {} holders again {} after the kill at {:.1} ms ({:.0} ms allowed), and a task waited {:.0} ms from {:.1} ms with a permit free ({:.0} ms allowed)",
                process.index,
                full,
                found.map_or("never".to_owned(), |(at, _)| format!("{:.0} ms", ms(at - killed))),
                ms(killed),
                ms(bound),
                ms(longest),
                ms(since),
                ms(allowed)
            ));
        }
    }
}

/// Within (from, to), the longest stretch in which some task waited (`waits`: disjoint,
/// in time order) while fewer than `full` permits were held by the live holders'
/// `timeline` (count after each change), and where it began.
fn longest_wait_beside_a_free_permit(
    (from, to): (u64, u64),
    full: usize,
    timeline: &[(u64, usize)],
    waits: &[(u64, u64)],
) -> (u64, u64) {
    let held_at = |t: u64| {
        let i = timeline.partition_point(|(at, _)| *at <= t);
        i.checked_sub(1).map_or(0, |i| timeline[i].1)
    };
    let waiting_at = |t: u64| waits.iter().any(|&(a, b)| a <= t && t < b);
    let mut edges: Vec<u64> = timeline
        .iter()
        .map(|(at, _)| *at)
        .chain(waits.iter().flat_map(|&(a, b)| [a, b]))
        .filter(|&t| from < t && t < to)
        .chain([from, to])
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let (mut best, mut open) = ((0, from), None::<u64>);
    for pair in edges.windows(2) {
        let (start, end) = (pair[0], pair[1]);
        if waiting_at(start) && held_at(start) < full {
            let began = *open.get_or_insert(start);
            if end - began > best.0 {
                best = (end - began, began);
            }
        } else {
            open = None;
        }
    }
    best
}

/// Both sides of a reader/writer lock progress and readers share: each side entered; in
/// time free of faults (injected, or shown by a failed release or a loss) neither side
/// waits longer than a lease plus backoff and slack without one of its own entering, while
/// the lock was in use (from its first entry to its last, of either side); two readers were
/// inside at once. Only waiting counts: a stretch in which nobody asked for a side is a lull
/// in demand, not starvation.
fn check_sides(lock: &str, list: &[&Section], run: &RunData, report: &mut Report) {
    let processes = &run.processes;
    let limits = &run.limits;
    let bound = limits.expiry + limits.max_backoff + limits.slack;
    let (Some(first), Some(last)) = (list.first(), list.iter().map(|s| s.enter).max()) else {
        return;
    };
    let first = first.enter;
    let windows = disturbed(run, list);
    for side in [Access::Read, Access::Write] {
        let entries: Vec<u64> = list
            .iter()
            .filter(|s| s.access == side)
            .map(|s| s.enter)
            .collect();
        if entries.is_empty() {
            report.violations.push(format!(
                "{lock}: starved: no {} ever entered ({} sections of the other side)",
                label(side),
                list.len()
            ));
            continue;
        }
        let waiting = waiting(lock, side, list, run);
        let mut stops = vec![first];
        stops.extend(&entries);
        stops.push(last);
        for pair in stops.windows(2) {
            let (waited, from) = longest_quiet_wait(pair[0], pair[1], &waiting, &windows);
            let longest = report
                .shared
                .longest_quiet_wait
                .entry(label(side))
                .or_default();
            *longest = (*longest).max(waited);
            if waited > bound {
                report.violations.push(format!(
                    "{lock}: starved: no {} entered while one waited {:.0} ms of time free of faults, in the stretch from {:.1} ms ({:.0} ms allowed)",
                    label(side),
                    ms(waited),
                    ms(from),
                    ms(bound)
                ));
            }
        }
    }
    let reads = list.iter().filter(|s| s.access == Access::Read).count();
    let mut steady: Vec<&&Section> = list
        .iter()
        .filter(|s| s.access == Access::Read && !s.paused(processes))
        .collect();
    steady.sort_by_key(|s| s.enter);
    let mut latest_end = 0;
    let shared = steady.iter().any(|s| {
        let overlaps = s.enter < latest_end;
        latest_end = latest_end.max(s.end(processes).unwrap_or(u64::MAX));
        overlaps
    });
    if reads >= READS_TO_SHARE && !shared {
        report.violations.push(format!(
            "{lock}: readers never shared: {reads} reads, never two at once"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{limits, process, violations_with};
    use super::super::{FaultRecord, RunData, Sample, check};
    use super::*;
    use crate::clock::{MS, SEC};
    use crate::events::Event;

    fn enter(lock: &str, access: Access, token: u64, asked: u64, at: u64) -> Event {
        Event::Enter {
            lock: lock.into(),
            task: 0,
            token,
            asked,
            at,
            access,
        }
    }

    fn exit(lock: &str, token: u64, at: u64) -> Event {
        Event::Exit {
            lock: lock.into(),
            task: 0,
            token,
            at,
            released: at + MS,
            outcome: "ok".into(),
        }
    }

    fn lost(lock: &str, token: u64, at: u64) -> Event {
        Event::Lost {
            lock: lock.into(),
            task: 0,
            token,
            at,
            reason: "deadline".into(),
        }
    }

    /// One section: entered at `from` (asked 1 ms before), left at `to`.
    fn held(lock: &str, access: Access, token: u64, from: u64, to: u64) -> Vec<Event> {
        vec![
            enter(lock, access, token, from - MS, from),
            exit(lock, token, to),
        ]
    }

    fn run_of(locks: &[&str], processes: Vec<ProcessRecord>) -> RunData {
        RunData {
            limits: limits(),
            locks: locks.iter().map(|l| (*l).to_owned()).collect(),
            processes,
            faults: Vec::new(),
            samples: Vec::new(),
            docs: Vec::new(),
            final_held: Vec::new(),
            arrival: None,
        }
    }

    const P3: Access = Access::Permit(3);

    /// Three permit holders at once pass; a fourth entering before any left is caught,
    /// unless one of the four was stopped meanwhile.
    #[test]
    fn more_holders_than_permits_are_caught_unless_paused() {
        let three = |fourth_at: u64| {
            vec![
                process(0, held("s", P3, 10, SEC, 3 * SEC)),
                process(1, held("s", P3, 30, SEC + 10 * MS, 3 * SEC)),
                process(2, held("s", P3, 50, SEC + 20 * MS, 3 * SEC)),
                process(3, held("s", P3, 70, fourth_at, 4 * SEC)),
            ]
        };
        let report = check(&run_of(&["s"], three(3 * SEC)));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.shared.peak_permits, Some((3, 3)));
        assert_eq!(report.shared.permits, 4);

        let report = check(&run_of(&["s"], three(2 * SEC)));
        assert_eq!(
            violations_with(&report, "4 holders at once (3 permits)"),
            1,
            "{:?}",
            report.violations
        );
        assert_eq!(report.shared.peak_permits, Some((4, 3)));

        let mut paused = three(2 * SEC);
        paused[1].stops.push((SEC + 500 * MS, 2 * SEC + 500 * MS));
        let report = check(&run_of(&["s"], paused));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.paused_overlaps, 1);
    }

    /// A holder told of its loss still counts for the margin unless it lets go: a full
    /// semaphore admits nobody in its place before then.
    #[test]
    fn a_told_permit_holder_keeps_its_margin() {
        for (next_at, violations) in [(2 * SEC + 300 * MS, 1), (2 * SEC + 700 * MS, 0)] {
            let data = run_of(
                &["s"],
                vec![
                    process(
                        0,
                        vec![
                            enter("s", P3, 10, SEC - MS, SEC),
                            lost("s", 10, 2 * SEC),
                            exit("s", 10, 5 * SEC),
                        ],
                    ),
                    process(1, held("s", P3, 30, SEC + 10 * MS, 6 * SEC)),
                    process(2, held("s", P3, 50, SEC + 20 * MS, 6 * SEC)),
                    process(3, held("s", P3, 70, next_at, 6 * SEC)),
                ],
            );
            let report = check(&data);
            assert_eq!(
                violations_with(&report, "less than the margin"),
                violations,
                "next at {next_at}: {:?}",
                report.violations
            );
            assert_eq!(
                report.violations.len(),
                violations,
                "{:?}",
                report.violations
            );
            assert_eq!(
                report.min_loss_gap,
                Some(i64::try_from(next_at - 2 * SEC).unwrap())
            );
        }
    }

    /// A grant asked for after another entered must carry a larger token; holders granted
    /// at once may record their entries in either order.
    #[test]
    fn token_order_follows_requests_not_entries() {
        // w1 asked before w0 entered and recorded its entry first: no order is known.
        let concurrent = run_of(
            &["s"],
            vec![
                process(
                    0,
                    vec![
                        enter("s", P3, 10, SEC, SEC + 5 * MS),
                        exit("s", 10, 2 * SEC),
                    ],
                ),
                process(
                    1,
                    vec![
                        enter("s", P3, 30, SEC, SEC + 2 * MS),
                        exit("s", 30, 2 * SEC),
                    ],
                ),
            ],
        );
        let report = check(&concurrent);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        // w1 asked after w0 had entered and got a smaller token.
        let late = run_of(
            &["s"],
            vec![
                process(0, held("s", P3, 30, SEC, 2 * SEC)),
                process(
                    1,
                    vec![
                        enter("s", P3, 10, SEC + 10 * MS, SEC + 20 * MS),
                        exit("s", 10, 2 * SEC),
                    ],
                ),
            ],
        );
        let report = check(&late);
        assert_eq!(
            violations_with(&report, "token order"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// A permit never carries a token of its process's earlier grant's block once another
    /// process was granted a larger one (tokens 100, 116, then 101 in the first process).
    #[test]
    fn a_permit_never_carries_an_older_block_token() {
        let data = |token: u64| {
            let mut first = held("s", P3, 100, SEC, 2 * SEC);
            first.extend(held("s", P3, token, 2 * SEC + MS, 3 * SEC));
            run_of(
                &["s"],
                vec![
                    process(0, first),
                    process(1, held("s", P3, 116, SEC + 100 * MS, 3 * SEC)),
                ],
            )
        };
        let report = check(&data(132));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        let report = check(&data(101));
        assert_eq!(
            violations_with(&report, "token order"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// A writer shares the lock with nobody; readers share it with each other.
    #[test]
    fn a_writer_with_any_other_holder_is_caught() {
        let readers = || {
            vec![
                process(0, held("rw", Access::Read, 10, SEC, 2 * SEC)),
                process(1, held("rw", Access::Read, 30, SEC + 100 * MS, 2 * SEC)),
            ]
        };
        let mut clean = readers();
        clean.push(process(
            2,
            held("rw", Access::Write, 50, 2 * SEC + MS, 3 * SEC),
        ));
        let report = check(&run_of(&["rw"], clean));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.shared.peak_readers, 2);
        assert_eq!(report.shared.shared_reads, 1);

        let mut with_reader = readers();
        with_reader.push(process(
            2,
            held("rw", Access::Write, 50, SEC + 500 * MS, 3 * SEC),
        ));
        let report = check(&run_of(&["rw"], with_reader));
        assert_eq!(
            violations_with(&report, "1 writing"),
            1,
            "{:?}",
            report.violations
        );

        let two_writers = vec![
            process(0, held("rw", Access::Write, 10, SEC, 2 * SEC)),
            process(1, held("rw", Access::Write, 30, SEC + 500 * MS, 3 * SEC)),
            process(2, held("rw", Access::Read, 50, 3 * SEC + MS, 4 * SEC)),
        ];
        let report = check(&run_of(&["rw"], two_writers));
        assert_eq!(
            violations_with(&report, "2 writing"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// A writer's token is larger than the readers' it excluded, even a reader that entered
    /// after the writer asked (so the request order says nothing).
    #[test]
    fn a_writer_is_ordered_after_the_readers_it_excluded() {
        let data = |writer_token: u64| {
            run_of(
                &["rw"],
                vec![
                    process(0, held("rw", Access::Read, 50, SEC, 2 * SEC)),
                    process(
                        1,
                        vec![
                            enter(
                                "rw",
                                Access::Write,
                                writer_token,
                                SEC - 10 * MS,
                                2 * SEC + MS,
                            ),
                            exit("rw", writer_token, 3 * SEC),
                        ],
                    ),
                ],
            )
        };
        let report = check(&data(70));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        let report = check(&data(30));
        assert_eq!(
            violations_with(&report, "but has the larger token"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// Readers that never overlap in a run full of reads did not share.
    #[test]
    fn readers_must_share_at_some_point() {
        let mut events = Vec::new();
        for i in 0..12 {
            events.extend(held(
                "rw",
                Access::Read,
                10 + i * 20,
                SEC + i * 200 * MS,
                SEC + i * 200 * MS + 100 * MS,
            ));
        }
        events.extend(held("rw", Access::Write, 1000, 4 * SEC, 4 * SEC + 100 * MS));
        let report = check(&run_of(&["rw"], vec![process(0, events.clone())]));
        assert_eq!(
            violations_with(&report, "readers never shared"),
            1,
            "{:?}",
            report.violations
        );
        events.extend(held(
            "rw",
            Access::Read,
            1020,
            4 * SEC + 200 * MS,
            4 * SEC + 400 * MS,
        ));
        events.extend(held(
            "rw",
            Access::Read,
            1040,
            4 * SEC + 300 * MS,
            4 * SEC + 500 * MS,
        ));
        let report = check(&run_of(&["rw"], vec![process(0, events)]));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }

    /// Two readers every 200 ms for 10 s; writers entering at 1.15 s and 9.15 s only, the
    /// second asked at `second_write_asked`. Tokens are the entry's millisecond, so that
    /// they follow time.
    fn reads_with_two_writes(second_write_asked: u64) -> Vec<Event> {
        let mut events = Vec::new();
        for i in 0..50 {
            for at in [SEC + i * 200 * MS, SEC + i * 200 * MS + 10 * MS] {
                events.extend(held("rw", Access::Read, at / MS, at, at + 100 * MS));
            }
        }
        events.extend(held(
            "rw",
            Access::Write,
            1150,
            SEC + 150 * MS,
            SEC + 190 * MS,
        ));
        let second = 9 * SEC + 150 * MS;
        events.push(enter("rw", Access::Write, 9150, second_write_asked, second));
        events.push(exit("rw", 9150, second + 40 * MS));
        events
    }

    /// A side that waits longer than the bound in time free of faults with none of its own
    /// entering starved; the same wait across a fault is allowed.
    #[test]
    fn a_starved_side_is_caught_outside_faults() {
        let events = reads_with_two_writes(SEC + 200 * MS);
        let mut data = run_of(&["rw"], vec![process(0, events)]);
        data.limits.until = 11 * SEC;
        let report = check(&data);
        assert_eq!(
            violations_with(&report, "starved: no write"),
            1,
            "{:?}",
            report.violations
        );
        assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
        // A fault from 2 s to 3 s excuses until 3 s + 3.1 s: the waits in the quiet
        // stretches left (1.2 s .. 2 s and 6.1 s .. 9.15 s) are within the bound.
        data.faults.push(FaultRecord {
            kind: "block".into(),
            start: 2 * SEC,
            end: 3 * SEC,
            holder_fault: false,
            server_down: false,
        });
        let report = check(&data);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert!(report.shared.longest_quiet_wait["write"] > 3 * SEC - 100 * MS);
        // Without the fault, a release that failed (a stalled server) at 2.5 s excuses
        // until 2.5 s + 1.6 s, leaving 4.1 s .. 9.15 s: too long still. One at 4.5 s as
        // well leaves 1.2 s .. 2.5 s and 6.1 s .. 9.15 s: within the bound. Releases that
        // worked excuse nothing.
        data.faults.clear();
        let fail_release_at = |data: &mut RunData, at: u64, outcome: &str| {
            for event in &mut data.processes[0].events {
                if let Event::Exit {
                    at: exit,
                    outcome: recorded,
                    ..
                } = event
                    && *exit == at
                {
                    *recorded = outcome.into();
                }
            }
        };
        let timed_out = "store call timed out after 900ms";
        fail_release_at(&mut data, 2 * SEC + 500 * MS, timed_out);
        let report = check(&data);
        assert_eq!(
            violations_with(&report, "starved"),
            1,
            "{:?}",
            report.violations
        );
        fail_release_at(&mut data, 4 * SEC + 500 * MS, timed_out);
        let report = check(&data);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        fail_release_at(&mut data, 4 * SEC + 500 * MS, "ok");
        let report = check(&data);
        assert_eq!(
            violations_with(&report, "starved"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// After a permit holder is killed, a semaphore that was full fills up again within the
    /// bound; if it stays one short while a task waits, the permit leaked. A task that asks
    /// only late, with nobody waiting before, shows nothing either way: too few asked to
    /// fill it.
    #[test]
    fn a_killed_holders_permit_must_come_back() {
        let data_asked = |asked: u64, back_at: u64, token: u64| {
            let mut victim = process(0, vec![enter("s", P3, 10, SEC - MS, SEC)]);
            victim.killed_at = Some(2 * SEC);
            victim.exited_cleanly = false;
            let mut data = run_of(
                &["s"],
                vec![
                    victim,
                    // Leaves and comes back, so that the semaphore makes progress.
                    process(
                        1,
                        [
                            held("s", P3, 30, SEC + 10 * MS, 4 * SEC),
                            held("s", P3, 90, 4 * SEC + 500 * MS, 20 * SEC),
                        ]
                        .concat(),
                    ),
                    process(2, held("s", P3, 50, SEC + 20 * MS, 20 * SEC)),
                    process(
                        3,
                        vec![
                            enter("s", P3, token, asked, back_at),
                            exit("s", token, 20 * SEC),
                        ],
                    ),
                ],
            );
            data.faults.push(FaultRecord {
                kind: "holder-kill".into(),
                start: 2 * SEC,
                end: 2 * SEC,
                holder_fault: true,
                server_down: false,
            });
            data
        };
        let data = |back_at: u64| data_asked(2 * SEC + 100 * MS, back_at, 70);
        let report = check(&data(3 * SEC + 600 * MS));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.shared.permits_back, 1);
        assert_eq!(report.shared.slowest_permit_back, Some(SEC + 600 * MS));
        let report = check(&data(9 * SEC));
        assert_eq!(
            violations_with(&report, "did not come back"),
            1,
            "{:?}",
            report.violations
        );
        let report = check(&data_asked(9 * SEC - MS, 9 * SEC, 110));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.shared.permits_back, 1);
    }

    /// The monitor must stop listing a killed holder's lease once it expired.
    #[test]
    fn a_killed_holders_lease_must_leave_the_record() {
        let data = |last_seen: u64| {
            let mut victim = process(0, vec![enter("s", P3, 10, SEC - MS, SEC)]);
            victim.killed_at = Some(2 * SEC);
            victim.exited_cleanly = false;
            let mut data = run_of(&["s"], vec![victim]);
            for at in (2 * SEC..=last_seen).step_by(100_000_000) {
                data.samples.push(Sample {
                    at,
                    lock: "s".into(),
                    holder: Some("w0".into()),
                    token: 10,
                });
            }
            data
        };
        let report = check(&data(3 * SEC + 400 * MS));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.killed_lease_seen, Some(SEC + 400 * MS));
        let report = check(&data(6 * SEC));
        assert_eq!(
            violations_with(&report, "still listed"),
            1,
            "{:?}",
            report.violations
        );
    }

    #[test]
    fn two_kinds_on_one_name_are_caught() {
        let report = check(&run_of(
            &["s"],
            vec![
                process(0, held("s", P3, 10, SEC, 2 * SEC)),
                process(1, held("s", Access::Read, 30, 3 * SEC, 4 * SEC)),
            ],
        ));
        assert_eq!(
            violations_with(&report, "two kinds"),
            1,
            "{:?}",
            report.violations
        );
    }

    /// A long stretch in which nobody asked for a write is a lull in demand, not
    /// starvation; a writer that keeps timing out and asking again, each try shorter than
    /// the bound, is starved all the same.
    #[test]
    fn only_waiting_counts_towards_starvation() {
        // The second write asked 1 ms before it entered: 8 s without a write, none waiting.
        let report = check(&run_of(
            &["rw"],
            vec![process(0, reads_with_two_writes(9 * SEC + 149 * MS))],
        ));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert!(report.shared.longest_quiet_wait["write"] < 10 * MS);
        // Before it, tries of 2 s each timing out, 100 ms apart, from 1.3 s on.
        let mut events = reads_with_two_writes(9 * SEC + 149 * MS);
        for i in 0..3 {
            let asked = SEC + 300 * MS + i * 2100 * MS;
            events.push(Event::Timeout {
                lock: "rw".into(),
                task: 1,
                asked,
                at: asked + 2 * SEC,
                limit_ms: 2000,
                access: Access::Write,
            });
        }
        let report = check(&run_of(&["rw"], vec![process(0, events)]));
        assert_eq!(
            violations_with(&report, "starved: no write"),
            1,
            "{:?}",
            report.violations
        );
    }

    #[test]
    fn quiet_stretches_skip_windows() {
        let windows = [(2 * SEC, 3 * SEC), (5 * SEC, 6 * SEC)];
        assert_eq!(
            quiet_stretches(0, 10 * SEC, &windows),
            [(0, 2 * SEC), (3 * SEC, 5 * SEC), (6 * SEC, 10 * SEC)]
        );
        assert_eq!(quiet_stretches(2 * SEC + 1, 3 * SEC, &windows), []);
        assert_eq!(
            quiet_stretches(SEC, 4 * SEC, &windows),
            [(SEC, 2 * SEC), (3 * SEC, 4 * SEC)]
        );
    }

    /// Waiting is summed over one quiet stretch, never across a window.
    #[test]
    fn a_quiet_wait_sums_within_one_stretch() {
        let windows = [(5 * SEC, 6 * SEC)];
        let waiting = [
            (SEC, 2 * SEC),
            (3 * SEC, 5 * SEC + 500 * MS),
            (7 * SEC, 8 * SEC),
        ];
        assert_eq!(
            longest_quiet_wait(0, 10 * SEC, &waiting, &windows),
            (3 * SEC, 0)
        );
        assert_eq!(
            longest_quiet_wait(4 * SEC, 10 * SEC, &waiting, &windows),
            (SEC, 4 * SEC)
        );
    }
}
