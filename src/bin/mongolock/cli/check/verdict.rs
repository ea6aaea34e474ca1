//! What `mongolock check` concludes from the sections every worker reported and the
//! protected records' final state: the rules of `mongolock::history` (no overlap among
//! holders not told of a loss, tokens increasing in entry order, every stale write refused),
//! its own check of the records against the applied writes, and the figures (throughput,
//! hand-over latency). Pure: no I/O.

use std::collections::BTreeMap;

use mongolock::history;

use super::record::{Section, Write};

/// A protected record as it ended: the largest token recorded and how many writes it counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FinalRecord {
    pub(crate) token: u64,
    pub(crate) writes: u64,
}

/// One check: its name, how many cases it looked at, and what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) cases: usize,
    pub(crate) violations: Vec<String>,
}

impl Check {
    /// A check of that name, before it looked at any case.
    fn named(name: &'static str) -> Self {
        Self {
            name,
            cases: 0,
            violations: Vec::new(),
        }
    }
}

/// The figures of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figures {
    pub(crate) acquisitions: usize,
    /// Hand-overs to a waiter (the next holder was waiting when the previous one left) in
    /// the same process: from the previous holder leaving to the next entering, in
    /// nanoseconds, sorted.
    pub(crate) local_hand_overs: Latencies,
    /// The same, to a waiter in another process.
    pub(crate) remote_hand_overs: Latencies,
    pub(crate) losses: usize,
    pub(crate) writes_applied: usize,
    pub(crate) writes_failed: usize,
    pub(crate) stale_refused: usize,
}

/// Latencies in nanoseconds, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Latencies(Vec<u64>);

impl Latencies {
    fn new(mut latencies: Vec<u64>) -> Self {
        latencies.sort_unstable();
        Self(latencies)
    }

    pub(crate) fn count(&self) -> usize {
        self.0.len()
    }

    /// The `percent`-th percentile (nearest rank).
    pub(crate) fn percentile(&self, percent: usize) -> Option<u64> {
        let count = self.0.len();
        if count == 0 {
            return None;
        }
        let rank = (percent * count).div_ceil(100).clamp(1, count);
        Some(self.0[rank - 1])
    }
}

/// Sections by lock, in entry order.
fn by_lock(sections: &[Section]) -> BTreeMap<&str, Vec<&Section>> {
    let mut locks: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for section in sections {
        locks
            .entry(section.lock.as_str())
            .or_default()
            .push(section);
    }
    for list in locks.values_mut() {
        list.sort_by_key(|section| (section.entered, section.token));
    }
    locks
}

fn who(section: &Section) -> String {
    format!(
        "worker {} task {} (token {})",
        section.worker, section.task, section.token
    )
}

/// A section as the history rules see it: a holder until it was told of its loss or left.
fn as_held(section: &Section) -> history::Section<u64> {
    let told = section.lost.as_ref().map(|(told_at, _)| *told_at);
    history::Section {
        token: section.token,
        entered: section.entered,
        counted_until: Some(told.map_or(section.exited, |told| told.min(section.exited))),
    }
}

/// Each lock's sections as the history rules see them, in the same order.
fn held(sections: &[&Section]) -> Vec<history::Section<u64>> {
    sections.iter().map(|section| as_held(section)).collect()
}

/// The history rule: no two sections of one lock overlap unless the earlier one had been
/// told of its loss before the later one entered.
fn no_overlap(locks: &BTreeMap<&str, Vec<&Section>>) -> Check {
    let mut check = Check::named("no overlap among holders not told of a loss");
    for (lock, sections) in locks {
        check.cases += sections.len();
        for history::Pair { earlier, later } in history::overlaps(&held(sections)) {
            let (earlier, later) = (sections[earlier], sections[later]);
            check.violations.push(format!(
                "{lock}: {} entered {:.3} ms before {} left",
                who(later),
                ms(earlier.exited - later.entered),
                who(earlier)
            ));
        }
    }
    check
}

/// The history rule: each lock's tokens strictly increase in the order its holders entered.
fn tokens_in_entry_order(locks: &BTreeMap<&str, Vec<&Section>>) -> Check {
    let mut check = Check::named("tokens increase in entry order");
    for (lock, sections) in locks {
        check.cases += sections.len();
        for history::Pair { earlier, later } in history::tokens_out_of_entry_order(&held(sections))
        {
            check.violations.push(format!(
                "{lock}: {} entered after {}",
                who(sections[later]),
                who(sections[earlier])
            ));
        }
    }
    check
}

/// The history rule for the write with an older token each section makes after its own
/// (stale if its own was applied), and no holder's own write refused.
fn stale_writes_refused(sections: &[Section]) -> Check {
    let mut check = Check::named("every stale write refused");
    for section in sections {
        if let Some(stale) = &section.stale {
            check.cases += 1;
            // Sent once the holder's own write was answered.
            let newest = (section.write == Write::Applied).then_some(section.token);
            if history::is_stale(stale.token, newest) && stale.write == Write::Applied {
                check.violations.push(format!(
                    "{}: a write with the older token {} was applied while {} held it",
                    section.lock,
                    stale.token,
                    who(section)
                ));
            }
        }
        if let Write::Fenced { recorded } = section.write {
            check.violations.push(format!(
                "{}: the holder's own write was refused: {} had already written while {} held it",
                section.lock,
                recorded,
                who(section)
            ));
        }
    }
    check
}

/// Each protected record ends with the largest token that wrote it and counts every applied
/// write (a failed write may or may not have been applied).
fn records_match(sections: &[Section], records: &BTreeMap<String, FinalRecord>) -> Check {
    let mut check = Check::named("protected records match the applied writes");
    let mut expected: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for section in sections {
        let entry = expected.entry(section.lock.as_str()).or_default();
        match section.write {
            Write::Applied => {
                entry.0 = entry.0.max(section.token);
                entry.1 += 1;
            }
            Write::Failed { .. } => entry.2 += 1,
            Write::Fenced { .. } => {}
        }
    }
    for (lock, (token, applied, unknown)) in expected {
        check.cases += 1;
        let Some(record) = records.get(lock) else {
            if applied > 0 {
                check
                    .violations
                    .push(format!("{lock}: {applied} applied write(s) but no record"));
            }
            continue;
        };
        if record.token < token {
            check.violations.push(format!(
                "{lock}: the record holds token {} but {token} wrote it",
                record.token
            ));
        }
        if record.writes < applied || record.writes > applied + unknown {
            check.violations.push(format!(
                "{lock}: the record counts {} writes; {applied} were applied and {unknown} \
                 failed",
                record.writes
            ));
        }
    }
    check
}

/// The checks, in the order they are shown.
pub(crate) fn checks(sections: &[Section], records: &BTreeMap<String, FinalRecord>) -> Vec<Check> {
    let locks = by_lock(sections);
    vec![
        no_overlap(&locks),
        tokens_in_entry_order(&locks),
        stale_writes_refused(sections),
        records_match(sections, records),
    ]
}

/// The figures of the run.
pub(crate) fn figures(sections: &[Section]) -> Figures {
    let locks = by_lock(sections);
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for pair in locks.values().flat_map(|sections| sections.windows(2)) {
        if pair[1].asked < pair[0].exited {
            let latency = pair[1].entered.saturating_sub(pair[0].exited);
            if pair[0].worker == pair[1].worker {
                local.push(latency);
            } else {
                remote.push(latency);
            }
        }
    }
    let count = |keep: fn(&Section) -> bool| sections.iter().filter(|s| keep(s)).count();
    Figures {
        acquisitions: sections.len(),
        local_hand_overs: Latencies::new(local),
        remote_hand_overs: Latencies::new(remote),
        losses: count(|s| s.lost.is_some()),
        writes_applied: count(|s| s.write == Write::Applied),
        writes_failed: count(|s| matches!(s.write, Write::Failed { .. })),
        stale_refused: count(|s| {
            s.stale
                .as_ref()
                .is_some_and(|stale| matches!(stale.write, Write::Fenced { .. }))
        }),
    }
}

/// Nanoseconds as milliseconds.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::super::record::StaleWrite;
    use super::*;

    const MS: u64 = 1_000_000;

    fn section(worker: u32, token: u64, asked: u64, entered: u64, exited: u64) -> Section {
        Section {
            worker,
            task: 0,
            lock: "a".to_owned(),
            token,
            asked: asked * MS,
            entered: entered * MS,
            exited: exited * MS,
            write: Write::Applied,
            stale: Some(StaleWrite {
                token: token - 1,
                write: Write::Fenced { recorded: token },
            }),
            lost: None,
            release_error: None,
        }
    }

    fn records(token: u64, writes: u64) -> BTreeMap<String, FinalRecord> {
        BTreeMap::from([("a".to_owned(), FinalRecord { token, writes })])
    }

    fn violations(sections: &[Section], records: &BTreeMap<String, FinalRecord>) -> Vec<String> {
        checks(sections, records)
            .into_iter()
            .flat_map(|check| check.violations)
            .collect()
    }

    #[test]
    fn a_clean_hand_over_passes_and_is_measured() {
        let run = [section(1, 10, 0, 1, 5), section(2, 11, 2, 7, 9)];
        assert_eq!(violations(&run, &records(11, 2)), Vec::<String>::new());
        let figures = figures(&run);
        assert_eq!(figures.remote_hand_overs.count(), 1);
        assert_eq!(figures.remote_hand_overs.percentile(99), Some(2 * MS));
        assert_eq!(figures.local_hand_overs.percentile(50), None);
        assert_eq!(figures.stale_refused, 2);
    }

    #[test]
    fn each_check_catches_its_violation() {
        // Overlap: the second entered before the first left, and nobody was told.
        let overlap = [section(1, 10, 0, 1, 5), section(2, 11, 2, 3, 9)];
        let found = violations(&overlap, &records(11, 2));
        assert!(
            found.iter().any(|v| v.contains("entered 2.000 ms before")),
            "{found:?}"
        );
        // Told of the loss before the next one entered: allowed.
        let mut told = overlap.clone();
        told[0].lost = Some((2 * MS, "deadline".to_owned()));
        assert_eq!(violations(&told, &records(11, 2)), Vec::<String>::new());
        // Tokens out of entry order.
        let backwards = [section(1, 11, 0, 1, 2), section(2, 10, 2, 3, 4)];
        let found = violations(&backwards, &records(11, 2));
        assert!(
            found.iter().any(|v| v.contains("entered after")),
            "{found:?}"
        );
        // A stale write applied, and a holder's own write refused.
        let mut stale = [section(1, 10, 0, 1, 2)];
        stale[0].stale = Some(StaleWrite {
            token: 9,
            write: Write::Applied,
        });
        let found = violations(&stale, &records(10, 1));
        assert!(
            found
                .iter()
                .any(|v| v.contains("older token 9 was applied")),
            "{found:?}"
        );
        let mut refused = [section(1, 10, 0, 1, 2)];
        refused[0].write = Write::Fenced { recorded: 12 };
        let found = violations(&refused, &records(12, 0));
        assert!(
            found.iter().any(|v| v.contains("own write was refused")),
            "{found:?}"
        );
        // The record lost a write, or holds an older token.
        let run = [section(1, 10, 0, 1, 2), section(2, 11, 2, 3, 4)];
        let found = violations(&run, &records(11, 1));
        assert!(
            found.iter().any(|v| v.contains("counts 1 writes")),
            "{found:?}"
        );
        let found = violations(&run, &records(10, 2));
        assert!(
            found.iter().any(|v| v.contains("holds token 10")),
            "{found:?}"
        );
    }
}
