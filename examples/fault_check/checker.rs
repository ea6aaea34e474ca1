//! The checks run after a scenario, over what every process recorded (critical sections,
//! fenced writes, losses), what the orchestrator did (faults), what a monitor saw in the
//! lock collection, and the protected documents' final state. Pure: no I/O.

use std::collections::{BTreeMap, HashMap};

use mongolock::history;

use crate::clock::{ms, ms_between};
use crate::events::{Access, Event, GivenBack, WriteOutcome};

mod arrival;
mod shared;

pub(crate) use arrival::{ArrivalBounds, ArrivalReport, LineSample};
pub(crate) use shared::SharedReport;

/// Bounds the checks hold the run to, in clock nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// The lease length.
    pub(crate) expiry: u64,
    /// `expiry − renew_deadline`: how long a holder told of a loss has to stop before the
    /// next holder may enter, unless it lets go first.
    pub(crate) margin: u64,
    /// The longest sleep between two attempts of one waiter.
    pub(crate) max_backoff: u64,
    /// Added to `expiry + max_backoff` for store-call latency and driver reconnection.
    pub(crate) slack: u64,
    /// How long a record may show a lease no process holds.
    pub(crate) orphan_bound: u64,
    /// How many tokens a grant reserves: a record showing grant token `t` is held by the
    /// section of any token in `t .. t + tokens_per_grant` (holders the lease passed to
    /// locally take the next ones).
    pub(crate) tokens_per_grant: u64,
    /// When the workers were told to stop.
    pub(crate) until: u64,
}

/// One worker process, as the orchestrator saw it and as it recorded itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessRecord {
    pub(crate) index: u32,
    pub(crate) events: Vec<Event>,
    /// The grants its library was answered too late to use and released.
    pub(crate) given_back: Vec<GivenBack>,
    /// `SIGSTOP` .. `SIGCONT` intervals.
    pub(crate) stops: Vec<(u64, u64)>,
    pub(crate) killed_at: Option<u64>,
    /// Exited by itself, with status 0, after recording `done`.
    pub(crate) exited_cleanly: bool,
    /// The slowest acquisition attempt or hand-over its library measured (arrival order):
    /// how late the store may have recorded its arrival.
    pub(crate) slowest_attempt: Option<u64>,
}

impl ProcessRecord {
    fn holder(&self) -> Option<&str> {
        self.events.iter().find_map(|event| match event {
            Event::Hello { holder, .. } => Some(holder.as_str()),
            _ => None,
        })
    }

    fn stopped_during(&self, from: u64, to: u64) -> bool {
        self.stops
            .iter()
            .any(|(stop, cont)| *stop < to && *cont > from)
    }
}

/// A fault the orchestrator injected.
#[derive(Debug, Clone)]
pub(crate) struct FaultRecord {
    pub(crate) kind: String,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// A holder process was stopped or killed: recovery counts from `start` (others take
    /// over once its lease expires); otherwise from `end` (the store is usable again).
    pub(crate) holder_fault: bool,
    /// The server itself was stopped or killed (nothing can be released meanwhile).
    pub(crate) server_down: bool,
}

/// How many applied writes of a `SIGKILL`ed process may have gone unrecorded.
const KILLED_UNRECORDED_WRITES: u64 = 10;

/// A lock record seen by the monitor (`at` = when the answer arrived).
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: u64,
    pub(crate) lock: String,
    pub(crate) holder: Option<String>,
    pub(crate) token: u64,
}

/// A protected document after the run.
#[derive(Debug, Clone)]
pub(crate) struct ProtectedDoc {
    pub(crate) lock: String,
    /// How many writes were applied (`$inc`).
    pub(crate) applied: u64,
    /// The last (at most 1000) applied writes in server order: (token, process, seq).
    pub(crate) log: Vec<(u64, u32, u64)>,
}

#[derive(Debug, Clone)]
pub(crate) struct RunData {
    pub(crate) limits: Limits,
    pub(crate) locks: Vec<String>,
    pub(crate) processes: Vec<ProcessRecord>,
    pub(crate) faults: Vec<FaultRecord>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) docs: Vec<ProtectedDoc>,
    /// Held records read after every worker had stopped.
    pub(crate) final_held: Vec<Sample>,
    /// The arrival-order scenario's settings: its checks run when set.
    pub(crate) arrival: Option<ArrivalBounds>,
}

/// What the checks found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    pub(crate) acquisitions: usize,
    pub(crate) acquire_timeouts: usize,
    pub(crate) writes: usize,
    pub(crate) applied_writes: usize,
    /// Writes refused with `LockError::Fenced`.
    pub(crate) fenced_writes: usize,
    /// Of those, writes sent after a newer holder's write had been acknowledged.
    pub(crate) superseded_writes_rejected: usize,
    /// Critical sections whose process was `SIGSTOP`ped (exempt from the overlap check).
    pub(crate) paused_sections: usize,
    /// Overlaps involving a paused section (allowed; their writes must be fenced).
    pub(crate) paused_overlaps: usize,
    /// Hand-overs where the previous holder had been told of a loss.
    pub(crate) handovers_after_loss: usize,
    /// Smallest (next holder's entry − previous holder told of its loss), nanoseconds.
    pub(crate) min_loss_gap: Option<i64>,
    /// Per fault kind: the longest time from the fault to the next entry on every lock.
    pub(crate) recovery: BTreeMap<String, u64>,
    /// Longest time a record showed a lease no process held, and which.
    pub(crate) max_unowned: Option<(u64, String)>,
    /// Latest a record still listed a `SIGKILL`ed holder's lease, after the kill.
    pub(crate) killed_lease_seen: Option<u64>,
    /// What the checks of semaphores and reader/writer locks saw.
    pub(crate) shared: SharedReport,
    /// What the arrival-order checks saw (that scenario only).
    pub(crate) arrival: Option<ArrivalReport>,
    pub(crate) violations: Vec<String>,
}

#[derive(Debug, Clone)]
struct WriteRecord {
    process: u32,
    token: u64,
    seq: u64,
    sent: u64,
    done: u64,
    outcome: WriteOutcome,
}

#[derive(Debug, Clone)]
struct Section {
    process: usize,
    lock: String,
    task: u32,
    access: Access,
    token: u64,
    asked: u64,
    enter: u64,
    lost: Option<u64>,
    exit: Option<u64>,
    released: Option<u64>,
    release_ok: bool,
}

impl Section {
    /// When the section stopped counting as a holder: told of a loss, stopped writing, or
    /// killed.
    fn end(&self, processes: &[ProcessRecord]) -> Option<u64> {
        [
            self.lost,
            self.exit,
            processes[self.process]
                .killed_at
                .filter(|k| *k >= self.asked),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The section as the history rules see it: a holder until its end.
    fn as_held(&self, processes: &[ProcessRecord]) -> history::Section<u64> {
        history::Section {
            token: self.token,
            entered: self.enter,
            counted_until: self.end(processes),
        }
    }

    fn paused(&self, processes: &[ProcessRecord]) -> bool {
        let end = self.end(processes).unwrap_or(u64::MAX);
        processes[self.process].stopped_during(self.asked, end)
    }

    fn describe(&self, processes: &[ProcessRecord]) -> String {
        let access = match self.access {
            Access::Exclusive => String::new(),
            Access::Permit(_) => "permit ".to_owned(),
            Access::Read => "read ".to_owned(),
            Access::Write => "write ".to_owned(),
        };
        format!(
            "{} {access}token {} (process w{} task {}, asked {:.1} ms, entered {:.1} ms, lost {}, exit {})",
            self.lock,
            self.token,
            processes[self.process].index,
            self.task,
            ms(self.asked),
            ms(self.enter),
            self.lost.map_or("-".into(), |t| format!("{:.1} ms", ms(t))),
            self.exit.map_or("-".into(), |t| format!("{:.1} ms", ms(t))),
        )
    }
}

/// `[from, to)` intervals, merged into disjoint ones in time order (empty ones dropped).
fn merge(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.retain(|(from, to)| from < to);
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (from, to) in intervals {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

pub(crate) fn check(run: &RunData) -> Report {
    let mut report = Report::default();
    let processes = &run.processes;
    let (sections, writes) = collect(run, &mut report);
    report.acquisitions = sections.len();
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for section in &sections {
        by_lock
            .entry(section.lock.as_str())
            .or_default()
            .push(section);
    }
    for list in by_lock.values_mut() {
        list.sort_by_key(|s| (s.enter, s.token));
    }
    report.paused_sections = sections.iter().filter(|s| s.paused(processes)).count();

    for (lock, list) in &by_lock {
        match shared::Shape::of(lock, list, processes, &mut report) {
            None => check_sections(lock, list, run, &mut report),
            Some(shape) => shared::check_lock(shape, lock, list, run, &mut report),
        }
    }
    let mut all_locks: Vec<&str> = run.locks.iter().map(String::as_str).collect();
    all_locks.extend(by_lock.keys().copied());
    all_locks.extend(run.docs.iter().map(|d| d.lock.as_str()));
    all_locks.sort_unstable();
    all_locks.dedup();
    for lock in all_locks {
        let lock_writes: Vec<&WriteRecord> = writes
            .iter()
            .filter(|(name, _)| name == lock)
            .map(|(_, w)| w)
            .collect();
        // Every token known to have been granted: entered sections, and (for a killed
        // process whose last lines were never written) what the monitor and the protected
        // document saw.
        let mut tokens: Vec<u64> = by_lock
            .get(lock)
            .map(|list| list.iter().map(|s| s.token).collect())
            .unwrap_or_default();
        tokens.extend(
            run.samples
                .iter()
                .filter(|s| s.lock == lock)
                .map(|s| s.token),
        );
        if let Some(doc) = run.docs.iter().find(|d| d.lock == lock) {
            tokens.extend(doc.log.iter().map(|(token, _, _)| *token));
        }
        tokens.sort_unstable();
        tokens.dedup();
        check_writes(lock, &lock_writes, &tokens, &mut report);
        if let Some(doc) = run.docs.iter().find(|d| d.lock == lock) {
            check_document(doc, &lock_writes, processes, &mut report);
        }
    }
    check_unowned(run, &sections, &mut report);
    check_killed_leases(run, &mut report);
    check_progress(run, &by_lock, &mut report);
    check_processes(run, &sections, &mut report);
    if let Some(bounds) = &run.arrival {
        arrival::check(bounds, &sections, run, &mut report);
    }
    report
}

/// Sections and writes from every process's events; malformed sequences are violations.
fn collect(run: &RunData, report: &mut Report) -> (Vec<Section>, Vec<(String, WriteRecord)>) {
    let mut sections: Vec<Section> = Vec::new();
    let mut writes = Vec::new();
    for (p, process) in run.processes.iter().enumerate() {
        let mut open: HashMap<(String, u64), usize> = HashMap::new();
        for event in &process.events {
            match event {
                Event::Enter {
                    lock,
                    task,
                    token,
                    asked,
                    at,
                    access,
                } => {
                    open.insert((lock.clone(), *token), sections.len());
                    sections.push(Section {
                        process: p,
                        lock: lock.clone(),
                        task: *task,
                        access: *access,
                        token: *token,
                        asked: *asked,
                        enter: *at,
                        lost: None,
                        exit: None,
                        released: None,
                        release_ok: false,
                    });
                }
                Event::Lost {
                    lock, token, at, ..
                } => match open.get(&(lock.clone(), *token)) {
                    Some(&i) => {
                        sections[i].lost = Some(sections[i].lost.map_or(*at, |l| l.min(*at)));
                    }
                    None => report.violations.push(format!(
                        "w{}: told of the loss of {lock} token {token}, which it never entered",
                        process.index
                    )),
                },
                Event::Exit {
                    lock,
                    token,
                    at,
                    released,
                    outcome,
                    ..
                } => match open.get(&(lock.clone(), *token)) {
                    Some(&i) => {
                        sections[i].exit = Some(*at);
                        sections[i].released = Some(*released);
                        sections[i].release_ok = outcome == "ok";
                    }
                    None => report.violations.push(format!(
                        "w{}: left {lock} token {token}, which it never entered",
                        process.index
                    )),
                },
                Event::Write {
                    lock,
                    token,
                    seq,
                    sent,
                    done,
                    outcome,
                    ..
                } => {
                    report.writes += 1;
                    match outcome {
                        WriteOutcome::Applied => report.applied_writes += 1,
                        WriteOutcome::Fenced(_) => report.fenced_writes += 1,
                        _ => {}
                    }
                    writes.push((
                        lock.clone(),
                        WriteRecord {
                            process: process.index,
                            token: *token,
                            seq: *seq,
                            sent: *sent,
                            done: *done,
                            outcome: outcome.clone(),
                        },
                    ));
                }
                Event::Timeout {
                    asked,
                    at,
                    limit_ms,
                    lock,
                    access,
                    ..
                } => {
                    report.acquire_timeouts += 1;
                    report.shared.count_timeout(*access);
                    let limit = limit_ms * crate::clock::MS;
                    let late = at.saturating_sub(*asked).saturating_sub(limit);
                    // A timeout is a bound the caller relies on (unless its process was
                    // stopped meanwhile).
                    if late > run.limits.slack && !process.stopped_during(*asked, *at) {
                        report.violations.push(format!(
                            "w{}: acquire_timeout({limit_ms} ms) on {lock} returned {:.0} ms late",
                            process.index,
                            ms(late)
                        ));
                    }
                }
                Event::Hang {
                    what,
                    waited_ms,
                    at,
                } => {
                    let since = at.saturating_sub(waited_ms * crate::clock::MS);
                    if !process.stopped_during(since, *at) {
                        report.violations.push(format!(
                            "w{}: hang: {what} did not return within {waited_ms} ms",
                            process.index
                        ));
                    }
                }
                Event::Hello { .. } | Event::AcquireError { .. } | Event::Done { .. } => {}
            }
        }
    }
    (sections, writes)
}

/// How much later a worker may record a loss than its runtime told it (the watcher task's
/// wake-up on a loaded machine): the margin check allows this much.
const LOSS_RECORDING_SLACK: u64 = 100 * crate::clock::MS;

/// Mutual exclusion, strictly increasing tokens in entry order, and the loss margin: the
/// next holder enters only once the previous one has let go or the margin after its loss
/// notice has passed.
fn check_sections(lock: &str, list: &[&Section], run: &RunData, report: &mut Report) {
    let processes = &run.processes;
    let mut seen_tokens: HashMap<u64, &Section> = HashMap::new();
    for section in list {
        if let Some(other) = seen_tokens.insert(section.token, section) {
            report.violations.push(format!(
                "{lock}: token {} granted twice: {} and {}",
                section.token,
                other.describe(processes),
                section.describe(processes)
            ));
        }
    }
    // The history rules; a section whose process was stopped is the fault checker's to
    // excuse (its writes must be fenced).
    let held: Vec<history::Section<u64>> = list.iter().map(|s| s.as_held(processes)).collect();
    for history::Pair { earlier, later } in history::overlaps(&held) {
        let (earlier, later) = (list[earlier], list[later]);
        if earlier.paused(processes) || later.paused(processes) {
            report.paused_overlaps += 1;
            continue;
        }
        let end = earlier.end(processes).unwrap_or(u64::MAX);
        report.violations.push(format!(
            "{lock}: two holders at once for {:.1} ms: {} and {}",
            ms(end.min(later.end(processes).unwrap_or(u64::MAX)) - later.enter),
            earlier.describe(processes),
            later.describe(processes)
        ));
    }
    let steady: Vec<&&Section> = list.iter().filter(|s| !s.paused(processes)).collect();
    let steady_held: Vec<history::Section<u64>> =
        steady.iter().map(|s| s.as_held(processes)).collect();
    for history::Pair { earlier, later } in history::tokens_out_of_entry_order(&steady_held) {
        report.violations.push(format!(
            "{lock}: tokens not increasing in entry order: {} entered before {}",
            steady[earlier].describe(processes),
            steady[later].describe(processes)
        ));
    }
    // The loss margin, the fault checker's own: the next holder enters only once the one
    // told of its loss has let go or the margin has passed.
    for pair in steady.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if let Some(lost) = a.lost.filter(|l| a.exit.is_none_or(|e| *l <= e)) {
            report.handovers_after_loss += 1;
            let gap = i64::try_from(b.enter).unwrap_or(i64::MAX) - i64::try_from(lost).unwrap_or(0);
            report.min_loss_gap = Some(report.min_loss_gap.map_or(gap, |g| g.min(gap)));
            let let_go = [
                a.exit,
                processes[a.process].killed_at.filter(|k| *k >= a.asked),
            ]
            .into_iter()
            .flatten()
            .min();
            let still_in = let_go.is_none_or(|at| at > b.enter);
            if still_in && b.enter + LOSS_RECORDING_SLACK < lost + run.limits.margin {
                report.violations.push(format!(
                    "{lock}: {} entered {:.1} ms after {} was told of its loss, still inside; the margin is {:.0} ms",
                    b.describe(processes),
                    ms(b.enter.saturating_sub(lost)),
                    a.describe(processes),
                    ms(run.limits.margin)
                ));
            }
        }
    }
}

/// The fence: no write is applied after a write with a larger token was acknowledged, and
/// every refusal names a token a later holder really had. The server runs with
/// `--sync-on-commit`: an acknowledged write survives a crash, so every one counts.
fn check_writes(lock: &str, writes: &[&WriteRecord], tokens: &[u64], report: &mut Report) {
    let fenced: Vec<history::FencedWrite<u64>> = writes
        .iter()
        .map(|w| history::FencedWrite {
            token: w.token,
            sent: w.sent,
            answered: w.done,
            applied: w.outcome == WriteOutcome::Applied,
        })
        .collect();
    for history::StaleApplied { write, newer } in history::stale_writes_applied(&fenced) {
        let write = writes[write];
        report.violations.push(format!(
            "{lock}: stale write applied: w{} seq {} with token {} sent {:.1} ms after token {newer} was acknowledged",
            write.process,
            write.seq,
            write.token,
            ms(write.sent)
        ));
    }
    let acknowledged = history::Acknowledged::new(&fenced);
    for write in writes {
        match &write.outcome {
            WriteOutcome::Fenced(recorded) => {
                if history::is_stale(write.token, acknowledged.newest_before(write.sent)) {
                    report.superseded_writes_rejected += 1;
                }
                if *recorded <= write.token || tokens.binary_search(recorded).is_err() {
                    report.violations.push(format!(
                        "{lock}: w{} seq {} with token {} was refused for token {recorded}, which no later holder had",
                        write.process, write.seq, write.token
                    ));
                }
            }
            WriteOutcome::NoMatch => report.violations.push(format!(
                "{lock}: w{} seq {}: a fenced upsert matched nothing",
                write.process, write.seq
            )),
            _ => {}
        }
    }
}

/// The server's own record: applied tokens never go backwards, a refused write never
/// appears, and the count of applied writes matches what the writers were told.
fn check_document(
    doc: &ProtectedDoc,
    writes: &[&WriteRecord],
    processes: &[ProcessRecord],
    report: &mut Report,
) {
    let lock = &doc.lock;
    if let Some(pair) = doc.log.windows(2).find(|pair| pair[1].0 < pair[0].0) {
        report.violations.push(format!(
            "{lock}: the protected document applied token {} after token {}",
            pair[1].0, pair[0].0
        ));
    }
    let outcome_of: HashMap<(u32, u64), &WriteOutcome> = writes
        .iter()
        .map(|w| ((w.process, w.seq), &w.outcome))
        .collect();
    for (token, process, seq) in &doc.log {
        if let Some(WriteOutcome::Fenced(_)) = outcome_of.get(&(*process, *seq)) {
            report.violations.push(format!(
                "{lock}: w{process} seq {seq} (token {token}) was reported fenced off but is in the document"
            ));
        }
    }
    let applied = writes
        .iter()
        .filter(|w| w.outcome == WriteOutcome::Applied)
        .count() as u64;
    let uncertain = writes
        .iter()
        .filter(|w| matches!(w.outcome, WriteOutcome::Failed(_)))
        .count() as u64;
    // Writes of a killed process in flight at the kill, or whose outcome line had not been
    // written yet, are recorded nowhere (a few per process).
    let killed = KILLED_UNRECORDED_WRITES
        * processes.iter().filter(|p| p.killed_at.is_some()).count() as u64;
    if doc.applied < applied || doc.applied > applied + uncertain + killed {
        report.violations.push(format!(
            "{lock}: the document counts {} applied writes; the writers saw {applied} applied and {uncertain} with an unknown outcome",
            doc.applied
        ));
    }
}

/// No record shows a lease that no process holds for longer than the bound (a timed-out or
/// cancelled acquisition the server applied late, a release that never happened).
fn check_unowned(run: &RunData, sections: &[Section], report: &mut Report) {
    let limits = &run.limits;
    let processes = &run.processes;
    let by_token: HashMap<(&str, u64), &Section> = sections
        .iter()
        .map(|s| ((s.lock.as_str(), s.token), s))
        .collect();
    let process_of = |holder: &str| processes.iter().find(|p| p.holder() == Some(holder));
    // (lock, token) -> (first, last) unowned observation and the holder.
    let mut unowned: BTreeMap<(String, u64), (u64, u64, String)> = BTreeMap::new();
    let grace = limits.slack;
    for sample in run.samples.iter().chain(&run.final_held) {
        let Some(holder) = &sample.holder else {
            continue;
        };
        let grant = sample.token..sample.token.saturating_add(limits.tokens_per_grant.max(1));
        let owned = grant
            .filter_map(|token| by_token.get(&(sample.lock.as_str(), token)))
            .any(|section| {
                // A section owns its lease from the acquire call until its release
                // returned; after a loss or a failed release the lease may legitimately
                // linger until it expires on the server.
                let until = match (section.released, section.release_ok) {
                    (Some(released), true) => released,
                    _ => section
                        .end(processes)
                        .unwrap_or(u64::MAX)
                        .saturating_add(limits.expiry),
                };
                sample.at + grace >= section.asked && sample.at <= until.saturating_add(grace)
            });
        if owned {
            continue;
        }
        let entry = unowned
            .entry((sample.lock.clone(), sample.token))
            .or_insert((sample.at, sample.at, holder.clone()));
        entry.1 = entry.1.max(sample.at);
    }
    for ((lock, token), (first, last, holder)) in unowned {
        let process = process_of(&holder);
        // A grant answered too late to use is the runtime's to release from when the answer
        // reached it: before that, the lease waits on the store's and the machine's
        // latency, which no runtime controls (a deterministic test covers the release).
        let learned = process
            .into_iter()
            .flat_map(|p| &p.given_back)
            .filter(|given| given.lock == lock && given.token == token)
            .map(|given| given.at)
            .min();
        let first = learned.map_or(first, |at| first.max(at));
        let span = last.saturating_sub(first);
        let window = (first.saturating_sub(2 * limits.expiry), last);
        let holder_faulted = process.is_some_and(|p| {
            p.stopped_during(window.0, window.1) || p.killed_at.is_some_and(|k| k <= window.1)
        });
        // While the server is down, or holds every command on its connection for the
        // fault's duration (`blockConnection`), no release can take effect: a lease a
        // stalled hand-over or release leaves behind is freed when the server gets to it.
        // The acquire-timeout fault stalls the solo worker's next `findAndModify`, which
        // may be the release of a grant its caller gave up on: the runtime stops waiting
        // for it after its call timeout and leaves the lease to expire.
        let solo_stalled =
            |f: &FaultRecord| f.kind == "acquire-timeout" && lock.starts_with("solo-");
        // A fail point that fails every write (`close`, `error-<code>`) makes releases fail
        // too; the runtime retries them, so the lease must be gone within the bound of the
        // fault's end rather than of its start.
        let writes_failed = |f: &FaultRecord| {
            (f.kind == "close" || f.kind.starts_with("error-"))
                && last <= f.end.saturating_add(limits.orphan_bound)
        };
        let releases_held_up = run.faults.iter().any(|f| {
            (f.server_down || f.kind == "block" || solo_stalled(f) || writes_failed(f))
                && f.start < window.1
                && f.end > window.0
        });
        let what = format!(
            "{lock} token {token} held by {holder} with no holder for {:.0} ms (from {:.1} ms)",
            ms(span),
            ms(first)
        );
        if holder_faulted || releases_held_up {
            continue;
        }
        if report
            .max_unowned
            .as_ref()
            .is_none_or(|(max, _)| span > *max)
        {
            report.max_unowned = Some((span, what.clone()));
        }
        if span > limits.orphan_bound {
            report
                .violations
                .push(format!("lease held by nobody: {what}"));
        }
    }
}

/// A `SIGKILL`ed holder's leases come back: no record lists one of them once a lease
/// length (plus slack for the monitor's answer in flight) has passed since the kill. The
/// records list unexpired holdings only, by the server's clock, which the kill cannot stop.
fn check_killed_leases(run: &RunData, report: &mut Report) {
    let limits = &run.limits;
    for process in &run.processes {
        let (Some(killed), Some(holder)) = (process.killed_at, process.holder()) else {
            continue;
        };
        let mut latest: Option<&Sample> = None;
        for sample in run.samples.iter().chain(&run.final_held) {
            if sample.at > killed
                && sample.holder.as_deref() == Some(holder)
                && latest.is_none_or(|l| sample.at > l.at)
            {
                latest = Some(sample);
            }
        }
        let Some(sample) = latest else {
            continue;
        };
        let after = sample.at - killed;
        report.killed_lease_seen = Some(report.killed_lease_seen.map_or(after, |s| s.max(after)));
        if after > limits.expiry + limits.slack {
            report.violations.push(format!(
                "the lease of SIGKILLed w{} on {} (token {}) was still listed {:.0} ms after the kill (lease {:.0} ms)",
                process.index,
                sample.lock,
                sample.token,
                ms(after),
                ms(limits.expiry)
            ));
        }
    }
}

/// After the last fault of a burst, every lock is entered again within
/// expiry + maximum backoff (+ slack).
fn check_progress(run: &RunData, by_lock: &BTreeMap<&str, Vec<&Section>>, report: &mut Report) {
    let limits = &run.limits;
    let bound = limits.expiry + limits.max_backoff + limits.slack;
    for fault in &run.faults {
        let anchor = if fault.holder_fault {
            fault.start
        } else {
            fault.end
        };
        // Only the last fault of a burst, and only with time left to see the recovery.
        let interrupted = run
            .faults
            .iter()
            .any(|other| other.start > fault.start && other.start <= anchor + bound);
        if interrupted || anchor + bound > limits.until {
            continue;
        }
        let mut slowest = 0;
        for lock in &run.locks {
            let next = by_lock
                .get(lock.as_str())
                .and_then(|list| list.iter().map(|s| s.enter).find(|enter| *enter > anchor));
            match next {
                Some(enter) if enter - anchor <= bound => slowest = slowest.max(enter - anchor),
                Some(enter) => {
                    slowest = slowest.max(enter - anchor);
                    report.violations.push(format!(
                        "no progress: {lock} was next entered {:.0} ms after the {} fault ({:.0} ms allowed)",
                        ms_between(anchor, enter),
                        fault.kind,
                        ms(bound)
                    ));
                }
                None => report.violations.push(format!(
                    "no progress: {lock} was never entered again after the {} fault at {:.1} ms",
                    fault.kind,
                    ms(anchor)
                )),
            }
        }
        let entry = report.recovery.entry(fault.kind.clone()).or_default();
        *entry = (*entry).max(slowest);
    }
}

/// Every process that was not killed finished its run and exited by itself; every section
/// ended; nothing was held once all workers had stopped.
fn check_processes(run: &RunData, sections: &[Section], report: &mut Report) {
    for process in &run.processes {
        if process.killed_at.is_none() && !process.exited_cleanly {
            report.violations.push(format!(
                "hang: w{} did not finish its run and exit by itself",
                process.index
            ));
        }
    }
    for section in sections {
        if section.end(&run.processes).is_none() && run.processes[section.process].exited_cleanly {
            report.violations.push(format!(
                "hang: {} never ended",
                section.describe(&run.processes)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{MS, SEC};

    pub(super) fn limits() -> Limits {
        Limits {
            expiry: 1500 * MS,
            margin: 600 * MS,
            max_backoff: 100 * MS,
            slack: 1500 * MS,
            orphan_bound: SEC,
            tokens_per_grant: 16,
            until: 100 * SEC,
        }
    }

    fn enter(lock: &str, token: u64, at: u64) -> Event {
        Event::Enter {
            lock: lock.into(),
            task: 0,
            token,
            asked: at - MS,
            at,
            access: Access::Exclusive,
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

    fn write(lock: &str, token: u64, seq: u64, sent: u64, outcome: WriteOutcome) -> Event {
        Event::Write {
            lock: lock.into(),
            task: 0,
            token,
            seq,
            sent,
            done: sent + MS,
            outcome,
        }
    }

    /// How many of the report's violations mention `text`.
    pub(super) fn violations_with(report: &Report, text: &str) -> usize {
        report
            .violations
            .iter()
            .filter(|v| v.contains(text))
            .count()
    }

    pub(super) fn process(index: u32, events: Vec<Event>) -> ProcessRecord {
        let mut all = vec![Event::Hello {
            pid: index,
            holder: format!("w{index}"),
        }];
        all.extend(events);
        ProcessRecord {
            index,
            events: all,
            exited_cleanly: true,
            ..ProcessRecord::default()
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
            arrival: None,
        }
    }

    #[test]
    fn a_clean_hand_over_passes() {
        let data = run(vec![
            process(0, vec![enter("a", 1, SEC), exit("a", 1, 2 * SEC)]),
            process(1, vec![enter("a", 2, 2 * SEC + MS), exit("a", 2, 3 * SEC)]),
        ]);
        let report = check(&data);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.acquisitions, 2);
    }

    #[test]
    fn overlaps_and_token_order_are_caught_unless_paused() {
        let overlapping = vec![
            process(0, vec![enter("a", 2, SEC), exit("a", 2, 3 * SEC)]),
            process(1, vec![enter("a", 1, 2 * SEC), exit("a", 1, 4 * SEC)]),
        ];
        let report = check(&run(overlapping.clone()));
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        let mut paused = overlapping;
        paused[0].stops.push((SEC + MS, 2 * SEC + MS));
        let report = check(&run(paused));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.paused_overlaps, 1);
    }

    fn lost_at(token: u64, at: u64) -> Event {
        Event::Lost {
            lock: "a".into(),
            task: 0,
            token,
            at,
            reason: "deadline".into(),
        }
    }

    /// The next holder may enter once the told holder has let go, or once the margin after
    /// the notice has passed — never while the told holder is still inside within the
    /// margin (the runtime used to free the lease at the very instant it told the holder).
    #[test]
    fn a_holder_told_of_a_loss_keeps_its_margin_unless_it_lets_go() {
        let cases = [
            // Still inside, next entry 300 ms after the notice: the margin is 600 ms.
            (5 * SEC, 2 * SEC + 300 * MS, 1),
            // Still inside, next entry 700 ms after: past the margin.
            (5 * SEC, 2 * SEC + 700 * MS, 0),
            // Let go 100 ms after the notice, next entry 300 ms after: fine.
            (2 * SEC + 100 * MS, 2 * SEC + 300 * MS, 0),
        ];
        for (exit_at, next_enter, violations) in cases {
            let data = run(vec![
                process(
                    0,
                    vec![
                        enter("a", 1, SEC),
                        lost_at(1, 2 * SEC),
                        exit("a", 1, exit_at),
                    ],
                ),
                process(1, vec![enter("a", 2, next_enter), exit("a", 2, 6 * SEC)]),
            ]);
            let report = check(&data);
            assert_eq!(
                report.violations.len(),
                violations,
                "exit {exit_at}, next {next_enter}: {:?}",
                report.violations
            );
            assert_eq!(
                report.min_loss_gap,
                Some(i64::try_from(next_enter - 2 * SEC).unwrap())
            );
        }
    }

    #[test]
    fn stale_writes_must_be_refused_once_a_newer_one_was_acknowledged() {
        let data = run(vec![
            process(
                0,
                vec![
                    enter("a", 1, SEC),
                    write("a", 1, 0, SEC, WriteOutcome::Applied),
                    write("a", 1, 1, 3 * SEC, WriteOutcome::Applied),
                    write("a", 1, 2, 4 * SEC, WriteOutcome::Fenced(2)),
                    exit("a", 1, 4 * SEC),
                ],
            ),
            process(
                1,
                vec![
                    enter("a", 2, 2 * SEC),
                    write("a", 2, 0, 2 * SEC, WriteOutcome::Applied),
                    exit("a", 2, 5 * SEC),
                ],
            ),
        ]);
        let report = check(&data);
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.contains("stale write applied")),
            "{:?}",
            report.violations
        );
        assert_eq!(report.superseded_writes_rejected, 1);
    }

    #[test]
    fn a_lease_nobody_holds_is_caught() {
        let mut data = run(vec![process(
            0,
            vec![enter("a", 1, SEC), exit("a", 1, 2 * SEC)],
        )]);
        for i in 0..20 {
            data.samples.push(Sample {
                at: 3 * SEC + i * 100 * MS,
                lock: "a".into(),
                holder: Some("w0".into()),
                token: 7,
            });
        }
        let report = check(&data);
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.contains("held by nobody")),
            "{:?}",
            report.violations
        );
    }

    /// A grant answered too late to use is judged from when its process read the answer:
    /// released within the bound of that, it is no orphan; one it read early and kept is.
    #[test]
    fn a_grant_given_back_is_judged_from_when_its_answer_came() {
        for (read_at, violations) in [(2_500 * MS, 0), (3 * SEC, 0), (SEC, 1)] {
            let mut worker = process(0, vec![enter("a", 1, SEC), exit("a", 1, 2 * SEC)]);
            worker.given_back.push(GivenBack {
                at: read_at,
                lock: "a".into(),
                token: 7,
            });
            let mut data = run(vec![worker]);
            // Seen unowned from 2 s to 3.2 s: 1.2 s, more than the bound.
            for i in 0..13 {
                data.samples.push(Sample {
                    at: 2 * SEC + i * 100 * MS,
                    lock: "a".into(),
                    holder: Some("w0".into()),
                    token: 7,
                });
            }
            let report = check(&data);
            let found = report
                .violations
                .iter()
                .filter(|v| v.contains("held by nobody"))
                .count();
            assert_eq!(
                found, violations,
                "read at {read_at}: {:?}",
                report.violations
            );
        }
    }

    /// How many leases held by nobody the checker reports once a fault of `kind` ran from
    /// `start` to `end`, and the report.
    fn unowned_under_a_fault(
        data: &RunData,
        kind: &str,
        (start, end): (u64, u64),
    ) -> (usize, Report) {
        let mut data = data.clone();
        data.faults.push(FaultRecord {
            kind: kind.into(),
            start,
            end,
            holder_fault: false,
            server_down: false,
        });
        let report = check(&data);
        let found = report
            .violations
            .iter()
            .filter(|v| v.contains("held by nobody"))
            .count();
        (found, report)
    }

    /// The acquire-timeout fault stalls the solo worker's commands, its releases among
    /// them: a lease left on its own lock then is excused, one on a shared lock is not.
    #[test]
    fn a_release_the_acquire_timeout_fault_stalled_is_excused_on_solo_locks() {
        for (lock, violations) in [("solo-w0-t0", 0), ("a", 1)] {
            let mut data = run(vec![process(
                0,
                vec![enter(lock, 1, SEC), exit(lock, 1, 2 * SEC)],
            )]);
            data.locks = vec![lock.into()];
            for i in 0..20 {
                data.samples.push(Sample {
                    at: 3 * SEC + i * 100 * MS,
                    lock: lock.into(),
                    holder: Some("w0".into()),
                    token: 7,
                });
            }
            data.limits.until = 4 * SEC;
            let (found, report) =
                unowned_under_a_fault(&data, "acquire-timeout", (2 * SEC, 4 * SEC));
            assert_eq!(found, violations, "{lock}: {:?}", report.violations);
        }
    }

    /// A fail point that fails every write fails the release of a grant nobody owns too;
    /// the runtime retries it, so the lease may outlast the fault by the bound, not more.
    #[test]
    fn a_release_a_failing_write_held_up_is_excused_until_the_bound_after_the_fault() {
        for (last_sample, violations) in [(4 * SEC + 800 * MS, 0), (5 * SEC + 500 * MS, 1)] {
            let mut data = run(vec![process(
                0,
                vec![enter("a", 1, SEC), exit("a", 1, 2 * SEC)],
            )]);
            let mut at = 3 * SEC;
            while at <= last_sample {
                data.samples.push(Sample {
                    at,
                    lock: "a".into(),
                    holder: Some("w0".into()),
                    token: 7,
                });
                at += 100 * MS;
            }
            data.limits.until = 6 * SEC;
            let (found, report) =
                unowned_under_a_fault(&data, "error-10107", (2 * SEC + 500 * MS, 4 * SEC));
            assert_eq!(
                found, violations,
                "until {last_sample}: {:?}",
                report.violations
            );
        }
    }

    #[test]
    fn a_lease_passed_on_locally_is_held_by_the_next_token() {
        // The record keeps showing the grant's token 7 while local holders 8 and 9 follow.
        let mut data = run(vec![process(
            0,
            vec![
                enter("a", 7, SEC),
                exit("a", 7, 2 * SEC),
                enter("a", 8, 2 * SEC + 2 * MS),
                exit("a", 8, 4 * SEC),
                enter("a", 9, 4 * SEC + 2 * MS),
                exit("a", 9, 6 * SEC),
            ],
        )]);
        for i in 0..50 {
            data.samples.push(Sample {
                at: SEC + i * 100 * MS,
                lock: "a".into(),
                holder: Some("w0".into()),
                token: 7,
            });
        }
        let report = check(&data);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }

    #[test]
    fn progress_is_required_after_a_fault() {
        let mut data = run(vec![process(
            0,
            vec![enter("a", 1, SEC), exit("a", 1, 2 * SEC)],
        )]);
        data.faults.push(FaultRecord {
            kind: "server-stop".into(),
            start: 3 * SEC,
            end: 4 * SEC,
            holder_fault: false,
            server_down: true,
        });
        let report = check(&data);
        assert!(
            report.violations.iter().any(|v| v.contains("no progress")),
            "{:?}",
            report.violations
        );
    }
}
