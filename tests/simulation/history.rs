//! What happened in one schedule, and the invariants checked against it as it happens.
//!
//! Holders are the simulated tasks with a guard, the raw "intruder" process, and election
//! terms. The rules (margin = `expiry − renew_deadline`):
//!
//! 1. **Exclusion with a margin.** A grant on a name to a lease may happen only once every
//!    other holder of that name has let go, or its end — when it was told of a loss, or its
//!    lease's oracle deadline (last confirmed send + renew deadline), whichever is first —
//!    lies at least the margin back. An intruder holds until it releases or its lease expires.
//! 2. **Tokens increase** in grant order per name.
//! 3. **A release answered `Ok`** means no other lease was granted the name since the hold
//!    began.
//! 4. **Told in time:** no holder stays untold past its oracle deadline.
//! 5. **No orphan:** a record held by a lease nobody owns is released within 5 ms when its
//!    manager's store was healthy, within `expiry + stall + renew deadline` otherwise.
//! 6. **One leader:** election terms of different candidates never overlap.
//! 7. **Answers in time:** `acquire_timeout(d)` answers within `d`, `try_acquire` within the
//!    renew deadline, every acquisition by shutdown.
//!
//! The exception, as documented: an operator's deletion of a record (or a force-release)
//! frees its lease behind the holder's back. That holder is exempt from 1–3 from then on,
//! and its process may still pass the lease to its own waiters only until the renew
//! deadline after the deletion.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongolock::store::LeaseId;
use tokio::time::Instant;

use super::recorder::{self, Ledger};

/// Slack for "at the same instant" under the paused clock (timers tick in whole ms).
const INSTANT: Duration = Duration::from_millis(1);
/// How long a lease nobody owns may stay held while its store is healthy.
const ORPHAN_TIGHT: Duration = Duration::from_millis(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Who {
    Client(usize),
    Intruder(u64),
    Term(usize, u64),
}

pub(crate) struct Timings {
    pub(crate) expiry: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) max_stall: Duration,
    pub(crate) block: u64,
}

impl Timings {
    fn margin(&self) -> Duration {
        self.expiry - self.renew_deadline
    }
}

/// One holder of a name.
struct Holder {
    name: String,
    manager: Option<usize>,
    token: u64,
    lease: Option<LeaseId>,
    told: Option<Instant>,
    /// Fixed end (an intruder's lease expiry).
    expires: Option<Instant>,
}

pub(crate) struct History {
    start: Instant,
    timings: Timings,
    ledger: Arc<Mutex<Ledger>>,
    trace: Vec<String>,
    violations: Vec<String>,
    /// Live holders (not yet letting go).
    holders: BTreeMap<Who, Holder>,
    /// Per name: every grant in order, as (at, lease, token).
    grants: BTreeMap<String, Vec<(Instant, Option<LeaseId>, u64)>>,
    /// Per name: the largest token granted (outside the operator exception).
    largest: BTreeMap<String, u64>,
    /// Leases an operator freed, and when.
    freed_by_operator: HashMap<LeaseId, Instant>,
    /// Per manager: the last time its store misbehaved (now, while it does).
    faulty_until: BTreeMap<usize, Instant>,
    faulty_now: BTreeMap<usize, bool>,
    /// Records seen held by nobody: (name, token) → since.
    orphans: BTreeMap<(String, u64), Instant>,
    /// Election terms: (election, candidate, token) → (start, end).
    terms: Vec<(String, usize, u64, Instant, Option<Instant>)>,
    reported_overlaps: BTreeSet<String>,
    reported_untold: BTreeSet<Who>,
    /// Candidates told to resign (or shut down): their term ends with a release, not a
    /// loss, and may outlast the deadline while that release is in flight.
    resigning: BTreeSet<usize>,
    /// When every process was paused, and for how long (the clock jumped).
    pauses: Vec<(Instant, Duration)>,
}

impl History {
    pub(crate) fn new(timings: Timings, ledger: Arc<Mutex<Ledger>>) -> Self {
        Self {
            start: Instant::now(),
            timings,
            ledger,
            trace: Vec::new(),
            violations: Vec::new(),
            holders: BTreeMap::new(),
            grants: BTreeMap::new(),
            largest: BTreeMap::new(),
            freed_by_operator: HashMap::new(),
            faulty_until: BTreeMap::new(),
            faulty_now: BTreeMap::new(),
            orphans: BTreeMap::new(),
            terms: Vec::new(),
            reported_overlaps: BTreeSet::new(),
            reported_untold: BTreeSet::new(),
            resigning: BTreeSet::new(),
            pauses: Vec::new(),
        }
    }

    fn at(&self, instant: Instant) -> String {
        let since = instant.saturating_duration_since(self.start);
        format!("{:>9.3}s", since.as_secs_f64())
    }

    pub(crate) fn note(&mut self, what: impl AsRef<str>) {
        let line = format!("{} {}", self.at(Instant::now()), what.as_ref());
        self.trace.push(line);
    }

    pub(crate) fn violation(&mut self, what: impl AsRef<str>) {
        let line = format!("{} VIOLATION {}", self.at(Instant::now()), what.as_ref());
        self.trace.push(line.clone());
        self.violations.push(line);
    }

    pub(crate) fn violations(&self) -> &[String] {
        &self.violations
    }

    pub(crate) fn trace(&self) -> &[String] {
        &self.trace
    }

    /// The oracle deadline of `lease`.
    fn deadline_of(&self, lease: Option<LeaseId>) -> Option<Instant> {
        let lease = lease?;
        recorder::lock(&self.ledger)
            .confirmed_send(lease)
            .map(|sent| sent + self.timings.renew_deadline)
    }

    fn exempt(&self, lease: Option<LeaseId>, now: Instant) -> bool {
        lease
            .and_then(|lease| self.freed_by_operator.get(&lease))
            .is_some_and(|freed| *freed <= now)
    }

    /// When the next grant of `holder`'s name may come at the earliest, if `holder` has
    /// stopped counting: the loss margin after it was told or its oracle deadline passed,
    /// or (an intruder, never told) the end of its lease.
    fn free_from(&self, holder: &Holder) -> Option<Instant> {
        if let Some(expires) = holder.expires {
            return Some(expires);
        }
        let ended = [holder.told, self.deadline_of(holder.lease)];
        ended
            .into_iter()
            .flatten()
            .min()
            .map(|end| end + self.timings.margin())
    }

    /// A grant of `name` to `who` with `token` (its lease found by the oracle, or given);
    /// returns its place among the name's grants.
    pub(crate) fn granted(
        &mut self,
        who: Who,
        name: &str,
        manager: Option<usize>,
        token: u64,
        lease: Option<LeaseId>,
        expires: Option<Instant>,
    ) -> usize {
        let now = Instant::now();
        let lease = lease
            .or_else(|| recorder::lock(&self.ledger).lease_of(name, token, self.timings.block));
        self.note(format!(
            "grant {name} token {token} to {who:?} (manager {manager:?})"
        ));
        if lease.is_none() {
            self.violation(format!(
                "{who:?} got token {token} on {name}, which no store call granted"
            ));
        }
        let exempt = self.exempt(lease, now);
        if let Some(freed) = lease
            .and_then(|lease| self.freed_by_operator.get(&lease))
            .copied()
            && now > freed + self.timings.renew_deadline + INSTANT
        {
            self.violation(format!(
                "{who:?} got token {token} on {name} from a lease an operator freed {:?} ago (allowed: the renew deadline)",
                now - freed
            ));
        }
        // 1. Exclusion with a margin.
        let margin = self.timings.margin();
        let mut problems = Vec::new();
        for (other, holder) in &self.holders {
            if exempt
                || holder.name != name
                || *other == who
                || (holder.lease == lease && lease.is_some())
            {
                continue;
            }
            if self.exempt(holder.lease, now) {
                continue;
            }
            match self.free_from(holder) {
                Some(free) if now + INSTANT >= free => {}
                Some(free) => problems.push(format!(
                    "{who:?} granted {name} (token {token}) {:?} before {other:?} (token {}) was told or due plus the margin {margin:?}",
                    free - now,
                    holder.token
                )),
                None => problems.push(format!(
                    "{who:?} granted {name} (token {token}) while {other:?} (token {}) holds it untold",
                    holder.token
                )),
            }
        }
        for problem in problems {
            self.violation(problem);
        }
        // 2. Tokens increase.
        if !exempt {
            let largest = self.largest.entry(name.to_owned()).or_default();
            if token <= *largest {
                let largest = *largest;
                self.violation(format!(
                    "{who:?} got token {token} on {name}, not above {largest} granted before"
                ));
            } else {
                *largest = token;
            }
        }
        let grants = self.grants.entry(name.to_owned()).or_default();
        grants.push((now, lease, token));
        let place = grants.len();
        self.holders.insert(
            who,
            Holder {
                name: name.to_owned(),
                manager,
                token,
                lease,
                told: None,
                expires,
            },
        );
        place
    }

    /// `who` was told it lost its hold.
    pub(crate) fn told(&mut self, who: Who, reason: &str) {
        self.note(format!("{who:?} told: {reason}"));
        if let Some(holder) = self.holders.get_mut(&who) {
            holder.told.get_or_insert(Instant::now());
        }
    }

    /// `who` stops acting on its hold (dropping or releasing its guard).
    pub(crate) fn letting_go(&mut self, who: Who) {
        self.note(format!("{who:?} lets go"));
        self.holders.remove(&who);
    }

    /// `who`'s release of the hold granted `place`-th was answered `Ok`: nobody else may have
    /// been granted the name from then until the store released the lease (or, passed to a
    /// local waiter, until now).
    pub(crate) fn released_ok(&mut self, who: Who, name: &str, token: u64, place: usize) {
        let now = Instant::now();
        let (lease, released) = {
            let ledger = recorder::lock(&self.ledger);
            let lease = ledger.lease_of(name, token, self.timings.block);
            (lease, lease.and_then(|lease| ledger.released_at(lease)))
        };
        self.note(format!("{who:?} released {name} token {token}: ok"));
        if self.exempt(lease, now) {
            return;
        }
        let until = released.unwrap_or(now);
        let foreign: Vec<u64> = self
            .grants
            .get(name)
            .into_iter()
            .flatten()
            .skip(place)
            .filter(|(at, other, _)| *other != lease && *at < until && !self.exempt(*other, *at))
            .map(|(_, _, token)| *token)
            .collect();
        if !foreign.is_empty() {
            self.violation(format!(
                "{who:?}'s release of {name} token {token} was answered Ok, but tokens {foreign:?} were granted to others meanwhile"
            ));
        }
    }

    /// Every process was paused for `jump` until now.
    pub(crate) fn paused(&mut self, jump: Duration) {
        self.note(format!("every process was paused for {jump:?}"));
        self.pauses.push((Instant::now() - jump, jump));
    }

    /// How long every process was paused between `from` and `to`: nobody can answer then.
    pub(crate) fn paused_between(&self, from: Instant, to: Instant) -> Duration {
        self.pauses
            .iter()
            .filter(|(start, _)| *start >= from && *start < to)
            .map(|(_, jump)| *jump)
            .sum()
    }

    /// An operator deleted `name`'s record, which carried `lease` (if any).
    pub(crate) fn operator_freed(&mut self, name: &str, lease: Option<LeaseId>) {
        self.note(format!("operator frees {name} ({lease:?})"));
        if let Some(lease) = lease {
            self.freed_by_operator.insert(lease, Instant::now());
        }
    }

    /// The store of `manager` misbehaves (`true`) or is healthy again.
    pub(crate) fn store_faulty(&mut self, manager: usize, faulty: bool) {
        let now = Instant::now();
        self.note(format!("manager {manager} store faulty: {faulty}"));
        self.faulty_now.insert(manager, faulty);
        self.faulty_until.insert(manager, now);
    }

    fn faulty_since(&self, manager: usize, since: Instant) -> bool {
        self.faulty_now.get(&manager).copied().unwrap_or(false)
            || self
                .faulty_until
                .get(&manager)
                .is_some_and(|until| *until + self.timings.max_stall >= since)
    }

    /// Rule 4: nobody stays untold past its oracle deadline (reported once per holder).
    pub(crate) fn check_told_in_time(&mut self) {
        let now = Instant::now();
        let mut problems = Vec::new();
        for (who, holder) in &self.holders {
            let resigning =
                matches!(who, Who::Term(candidate, _) if self.resigning.contains(candidate));
            if holder.told.is_some()
                || holder.expires.is_some()
                || holder.manager.is_none()
                || resigning
                || self.reported_untold.contains(who)
            {
                continue;
            }
            if let Some(deadline) = self.deadline_of(holder.lease)
                && now > deadline + INSTANT
                && !self.exempt(holder.lease, now)
            {
                problems.push((
                    *who,
                    format!(
                        "{who:?} (token {} on {}) not told of its loss {:?} after its deadline",
                        holder.token,
                        holder.name,
                        now - deadline
                    ),
                ));
            }
        }
        for (who, problem) in problems {
            self.reported_untold.insert(who);
            self.violation(problem);
        }
    }

    /// Rule 5: a held record is owned by a holder, or was not orphaned for long.
    ///
    /// `records` has one entry per held record: its name, the manager holding it (`None`
    /// for the intruder) and its grant token.
    pub(crate) fn check_orphans(&mut self, records: Vec<(String, Option<usize>, u64)>) {
        let now = Instant::now();
        let margin = self.timings.margin();
        // A lost term's guard is dropped by the campaign by the end of its margin at the
        // latest (the runtime frees the lease then): it owns nothing after that.
        self.holders.retain(|who, holder| {
            !matches!(who, Who::Term(..))
                || holder
                    .told
                    .is_none_or(|told| told + margin + INSTANT >= now)
        });
        let block = self.timings.block;
        let mut seen = Vec::new();
        let mut problems = Vec::new();
        for (name, manager, token) in records {
            let owned = self.holders.values().any(|holder| {
                holder.name == name
                    && holder.manager == manager
                    && holder.token >= token
                    && holder.token < token + block
            });
            if owned {
                continue;
            }
            let key = (name.clone(), token);
            let since = *self.orphans.entry(key.clone()).or_insert(now);
            seen.push(key);
            let unowned = now - since;
            let bound = match manager {
                Some(manager) if !self.faulty_since(manager, since) => ORPHAN_TIGHT,
                _ => self.timings.expiry + self.timings.max_stall + self.timings.renew_deadline,
            };
            if unowned > bound {
                problems.push(format!(
                    "{name} held by manager {manager:?} (token {token}) with no owner for {unowned:?} (bound {bound:?})"
                ));
            }
        }
        self.orphans.retain(|key, _| seen.contains(key));
        for problem in problems {
            self.violation(problem);
        }
    }

    /// An election term began (`Elected`): the candidate on `manager` holds the election's
    /// lock with `token` until its term ends.
    pub(crate) fn term_began(
        &mut self,
        election: &str,
        candidate: usize,
        manager: usize,
        token: u64,
    ) {
        self.note(format!(
            "candidate {candidate} elected in {election} (token {token})"
        ));
        self.terms
            .push((election.to_owned(), candidate, token, Instant::now(), None));
        let lease = recorder::lock(&self.ledger).lease_of(election, token, self.timings.block);
        self.holders.insert(
            Who::Term(candidate, token),
            Holder {
                name: election.to_owned(),
                manager: Some(manager),
                token,
                lease,
                told: None,
                expires: None,
            },
        );
    }

    /// `candidate` was told to step down (resign, its handle dropped, its manager shut
    /// down): its term ends with a release.
    pub(crate) fn resigning(&mut self, candidate: usize) {
        self.resigning.insert(candidate);
    }

    /// An election term ended: `Deposed` (`resigned` false) or `Resigned`. A loss is told
    /// before anyone else can lead, so the term ends now; a resignation is reported once the
    /// release was answered (or failed), but the candidate let go when it sent the release,
    /// its bound actor drained: another may lead from then on, before the report arrives.
    pub(crate) fn term_ended(
        &mut self,
        election: &str,
        candidate: usize,
        token: u64,
        resigned: bool,
        how: &str,
    ) {
        let mut now = Instant::now();
        let mut how = how.to_owned();
        if resigned {
            let let_go = {
                let ledger = recorder::lock(&self.ledger);
                ledger
                    .lease_of(election, token, self.timings.block)
                    .and_then(|lease| ledger.release_sent(lease))
            };
            if let Some(let_go) = let_go {
                now = now.min(let_go);
                how = format!("{how}, let go at {}", self.at(let_go));
            }
        }
        self.note(format!(
            "candidate {candidate} ends its term in {election} (token {token}): {how}"
        ));
        if resigned {
            self.holders.remove(&Who::Term(candidate, token));
        } else if let Some(holder) = self.holders.get_mut(&Who::Term(candidate, token)) {
            // A lost term's lease stays until its work has stopped or the margin has passed.
            holder.told.get_or_insert(now);
        }
        let term = self.terms.iter_mut().find(|(e, c, t, _, end)| {
            e == election && *c == candidate && *t == token && end.is_none()
        });
        match term {
            Some(term) => term.4 = Some(now),
            None => self.violation(format!(
                "candidate {candidate} ended a term (token {token}) it never began"
            )),
        }
    }

    /// Rule 6: terms of different candidates never overlap. An open term ends now, unless
    /// its candidate is stepping down: then its end is known once reported.
    pub(crate) fn check_terms(&mut self) {
        let now = Instant::now();
        let unknown_end = |candidate: &usize, end: &Option<Instant>| {
            end.is_none() && self.resigning.contains(candidate)
        };
        let mut problems = Vec::new();
        for (i, (e1, c1, t1, s1, end1)) in self.terms.iter().enumerate() {
            for (e2, c2, t2, s2, end2) in &self.terms[i + 1..] {
                if e1 != e2 || c1 == c2 || unknown_end(c1, end1) || unknown_end(c2, end2) {
                    continue;
                }
                let (end1, end2) = (end1.unwrap_or(now), end2.unwrap_or(now));
                if *s1 < end2 && *s2 < end1 {
                    let key = format!("{e1}/{c1}/{t1}/{c2}/{t2}");
                    problems.push((key, format!(
                        "{e1}: candidate {c1}'s term (token {t1}, from {}) overlaps candidate {c2}'s (token {t2}, from {}) at least until {}",
                        self.at(*s1), self.at(*s2), self.at(end1.min(end2))
                    )));
                }
            }
        }
        for (key, problem) in problems {
            if self.reported_overlaps.insert(key) {
                self.violation(problem);
            }
        }
    }

    /// The trace, for a failure report.
    pub(crate) fn render(&self, last: usize) -> String {
        let mut text = String::new();
        let from = self.trace.len().saturating_sub(last);
        for line in &self.trace[from..] {
            let _ = writeln!(text, "  {line}");
        }
        text
    }
}
