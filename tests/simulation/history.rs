//! What happened in one schedule, and the invariants checked against it as it happens.
//!
//! Holders are the simulated tasks with a guard (one name each, or every member of a
//! multi-lock), the raw "intruder" process, and election terms. Each holds a name with an
//! access: the whole of a mutex, a semaphore's permit, a reader's or the writer's side. A
//! holder *occupies* its name until it lets go, or until its end — when it was told of a
//! loss, or its lease's oracle deadline (last confirmed send + renew deadline), whichever is
//! first — lies the margin (`expiry − renew_deadline`) back; an intruder, never told,
//! occupies until it releases or its lease expires. The rules:
//!
//! 1. **Exclusion with a margin.** A grant may happen only where its access fits beside the
//!    name's occupants: nobody beside a mutex holder or a writer; no writer beside a reader;
//!    fewer than N permits beside a permit of a semaphore of N (the count its record had
//!    at the grant, as the witness read it: a count lowered by `set_permits` admits nobody
//!    until fewer hold, and a request of a count the record had before is held to the
//!    current one). Occupants not yet
//!    told (and before their deadline) are reported apart from those within the margin.
//! 2. **Tokens increase** per name: every token the store issues is above every one it
//!    issued for the name before (checked in the store's order by the witness); a token
//!    passed locally is above every token issued for the name before the pass; a shared
//!    place is never passed locally, though readers of one process waiting together may
//!    join a read as it is delivered, under the tokens its grant reserved; no token is
//!    delivered twice.
//! 3. **A release answered `Ok`** means no other lease was granted the holder's place since
//!    the hold began: any grant of a mutex or a writer, a reader beside a writer, or a
//!    permit that made more than N with this holder counted.
//! 4. **Told in time:** no holder stays untold past its oracle deadline.
//! 5. **No orphan:** a record (or a shared record's holding) held by a lease nobody owns is
//!    released within 5 ms when its manager's store was healthy, within
//!    `expiry + stall + renew deadline` otherwise. A multi-lock still acquiring owns what its
//!    manager holds of its names; once it gave up, a member it leaves held is a partial
//!    multi-lock.
//! 6. **One leader:** election terms of different candidates never overlap.
//! 7. **Answers in time:** `acquire_timeout(d)` answers within `d`, `try_acquire` within the
//!    renew deadline (a multi-lock's within two: its tries, then giving back what it took),
//!    every acquisition by shutdown.
//! 8. **Arrival order** (schedules whose tasks wait in line): the store grants an
//!    attempt or hand-over in arrival order only if no other manager's live place it waits
//!    behind (any, but a reader's behind a reader) arrived earlier (checked by the witness, in the store's order, against the line
//!    its answers built); a task in arrival order gets its lock only from a grant asked for
//!    its own arrival, never by a local pass nor by a grant asked for a task that left.
//! 9. **Order in a process** (arrival order, every kind but the multi-lock): a task gets a
//!    name only if no task of its process that asked earlier for the same kind still waits
//!    for it, readers and writers alike (a reader/writer lock's readers' turn in a process
//!    is the default mode's). A semaphore's count is part of its kind: permits go to the
//!    waiters of the count they were asked for, so a handle of a stale count (after
//!    `set_permits`) queues apart.
//!
//! 10. **A late release is a loss:** a release (a multi-lock's: its members' detaches)
//!     asked past the hold's oracle deadline is never answered `Ok`, whether or not
//!     anyone took the lock meanwhile: the critical section may not have been exclusive;
//!     and a hold let go (released or dropped) past its deadline is never passed on to a
//!     local waiter.
//!
//! 11. **The wake rule** (checked by the witness, see `wakes`): a mutex's release wakes
//!     only the manager of the earliest place in the name's line as the store's answers
//!     built it (arrival order's places and the default mode's listings alike), or every
//!     manager when nobody is listed; a shared record's release of arrival order wakes
//!     exactly the managers whose places its kind lets in next (nobody if none may go,
//!     everyone if no place is live); a hand-over that grants wakes nobody; and a woken
//!     manager goes — its next attempt is not refused unless somebody took the name in
//!     between (or, woken with an earlier place it waits behind, that one has not gone).
//!
//! The exception, as documented: an operator's deletion of a record (or a force-release)
//! frees its leases behind their holders' backs. Those holders are exempt from 1–3 from then
//! on, and their process may still pass a lease to its own waiters only until the renew
//! deadline after the deletion.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongolock::Access;
use mongolock::history as rules;
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
    pub(crate) fairness_bound: Duration,
}

impl Timings {
    fn margin(&self) -> Duration {
        self.expiry - self.renew_deadline
    }
}

/// One holder of a name.
struct Holder {
    manager: Option<usize>,
    token: u64,
    entered: Instant,
    access: Access,
    lease: Option<LeaseId>,
    told: Option<Instant>,
    /// Fixed end (an intruder's lease expiry).
    expires: Option<Instant>,
}

/// One grant of a name, as the history saw it.
struct Grant {
    at: Instant,
    lease: Option<LeaseId>,
    token: u64,
    access: Access,
    /// The other holders occupying the name when it was granted.
    beside: Vec<Who>,
}

/// A multi-lock acquisition: its names and (once it gave up) when it did.
struct MultiAttempt {
    manager: usize,
    names: Vec<String>,
    gave_up: Option<Instant>,
}

/// Whether holders with accesses `a` and `b` may hold one name at once (permits are counted
/// apart).
fn compatible(a: Access, b: Access) -> bool {
    matches!(
        (a, b),
        (Access::Read, Access::Read) | (Access::Permit { .. }, Access::Permit { .. })
    )
}

pub(crate) struct History {
    start: Instant,
    timings: Timings,
    ledger: Arc<Mutex<Ledger>>,
    trace: Vec<String>,
    violations: Vec<String>,
    /// Live holders (not yet letting go), by who and name.
    holders: BTreeMap<(Who, String), Holder>,
    /// Per name: every grant in order.
    grants: BTreeMap<String, Vec<Grant>>,
    /// Per name: every token delivered to a holder.
    delivered: BTreeMap<String, BTreeSet<u64>>,
    /// Leases an operator freed, and when.
    freed_by_operator: HashMap<LeaseId, Instant>,
    /// Per manager: the last time its store misbehaved (now, while it does).
    faulty_until: BTreeMap<usize, Instant>,
    faulty_now: BTreeMap<usize, bool>,
    /// Records seen held by nobody: (name, token) → since.
    orphans: BTreeMap<(String, u64), Instant>,
    /// Multi-lock acquisitions by client, while acquiring and after giving up.
    multis: BTreeMap<usize, MultiAttempt>,
    /// Election terms: (election, candidate, token) → (start, end).
    terms: Vec<(String, usize, u64, Instant, Option<Instant>)>,
    reported_overlaps: BTreeSet<String>,
    reported_untold: BTreeSet<(Who, String)>,
    /// Candidates told to resign (or shut down): their term ends with a release, not a
    /// loss, and may outlast the deadline while that release is in flight.
    resigning: BTreeSet<usize>,
    /// When every process was paused, and for how long (the clock jumped).
    pauses: Vec<(Instant, Duration)>,
    /// The grants being noted are a multi-lock's members, each taken when its turn came,
    /// not now: when a member was passed locally is not known.
    members_taken_earlier: bool,
    /// Tasks waiting in line (arrival order), by client: rule 9.
    waiting_in_line: BTreeMap<usize, LineWaiter>,
    /// Leases whose holder let go past their deadline, with its token: rule 10.
    let_go_late: HashMap<LeaseId, u64>,
}

/// A task waiting in line for one name (rule 9).
pub(crate) struct LineWaiter {
    pub(crate) manager: usize,
    pub(crate) name: String,
    pub(crate) access: Access,
    pub(crate) asked: Instant,
    /// When its `acquire_timeout` gives up, if it has one.
    pub(crate) gives_up: Option<Instant>,
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
            delivered: BTreeMap::new(),
            freed_by_operator: HashMap::new(),
            faulty_until: BTreeMap::new(),
            faulty_now: BTreeMap::new(),
            orphans: BTreeMap::new(),
            multis: BTreeMap::new(),
            terms: Vec::new(),
            reported_overlaps: BTreeSet::new(),
            reported_untold: BTreeSet::new(),
            resigning: BTreeSet::new(),
            pauses: Vec::new(),
            members_taken_earlier: false,
            waiting_in_line: BTreeMap::new(),
            let_go_late: HashMap::new(),
        }
    }

    /// Client `id` starts waiting in line (rule 9).
    pub(crate) fn waits_in_line(&mut self, id: usize, waiter: LineWaiter) {
        self.waiting_in_line.insert(id, waiter);
    }

    /// Client `id`'s acquisition in line was answered, whatever the answer.
    pub(crate) fn stopped_waiting(&mut self, id: usize) {
        self.waiting_in_line.remove(&id);
    }

    /// Rule 9: in arrival order, a process serves its own tasks in the order they asked,
    /// readers and writers alike. So a
    /// task of `manager` that asked at `asked` gets `name` only if no task of the same
    /// manager that asked earlier for the same kind still waits for it (one whose timeout
    /// ends now may have left).
    pub(crate) fn served_in_process_order(
        &mut self,
        who: Who,
        (manager, name): (usize, &str),
        access: Access,
        asked: Instant,
    ) {
        let now = Instant::now();
        let overtaken: Vec<String> = self
            .waiting_in_line
            .iter()
            .filter(|(_, waiter)| {
                waiter.manager == manager
                    && waiter.name == name
                    && waiter.access.kind() == access.kind()
                    && waiter.asked + INSTANT < asked
                    && waiter.gives_up.is_none_or(|at| at > now + INSTANT)
            })
            .map(|(id, waiter)| {
                format!(
                    "client {id} ({}, asked {:?} earlier)",
                    waiter.access.as_str(),
                    asked - waiter.asked
                )
            })
            .collect();
        if !overtaken.is_empty() {
            self.violation(format!(
                "{who:?} got {name} ({}) in arrival order ahead of its process's earlier waiters: {}",
                access.as_str(),
                overtaken.join(", ")
            ));
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

    /// When `holder` stopped (or stops) believing it holds: told of a loss, or its oracle
    /// deadline, whichever is first; an intruder's lease end. `None`: no end known.
    fn believed_end(&self, holder: &Holder) -> Option<Instant> {
        if let Some(expires) = holder.expires {
            return Some(expires);
        }
        [holder.told, self.deadline_of(holder.lease)]
            .into_iter()
            .flatten()
            .min()
    }

    /// `holder` as the history rules see it: a holder not told of a loss until its believed
    /// end (letting go removes it from the live holders).
    fn as_held(&self, holder: &Holder) -> rules::Section<Instant> {
        rules::Section {
            token: holder.token,
            entered: holder.entered,
            counted_until: self.believed_end(holder),
        }
    }

    /// When the next grant of `holder`'s name may come at the earliest, if `holder` has
    /// stopped counting: the loss margin after it was told or its oracle deadline passed,
    /// or (an intruder, never told) the end of its lease.
    fn free_from(&self, holder: &Holder) -> Option<Instant> {
        let end = self.believed_end(holder)?;
        Some(if holder.expires.is_some() {
            end
        } else {
            end + self.timings.margin()
        })
    }

    /// A grant of `name` to `who` for `access` with `token` (its lease found by the oracle,
    /// or given); returns its place among the name's grants.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn granted(
        &mut self,
        who: Who,
        name: &str,
        access: Access,
        manager: Option<usize>,
        token: u64,
        lease: Option<LeaseId>,
        expires: Option<Instant>,
    ) -> usize {
        let now = Instant::now();
        // A permit is held to the count its record had at the grant, as the witness read it.
        let access = match access {
            Access::Permit { .. } => recorder::lock(&self.ledger)
                .count_of(name, token)
                .map_or(access, |permits| Access::Permit { permits }),
            other => other,
        };
        let lease = lease
            .or_else(|| recorder::lock(&self.ledger).lease_of(name, token, self.timings.block));
        self.note(format!(
            "grant {name} ({}) token {token} to {who:?} (manager {manager:?})",
            access.as_str()
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
        let beside = if exempt {
            Vec::new()
        } else {
            self.check_exclusion(who, name, access, token, lease, now)
        };
        // 10. Nothing passes on a hold let go past its deadline.
        if let Some(late) = lease
            .and_then(|lease| self.let_go_late.get(&lease))
            .copied()
            && token > late
        {
            self.violation(format!(
                "{who:?} got token {token} on {name} by a local pass from token {late}, let go past its deadline"
            ));
        }
        // 2. Tokens increase.
        if !exempt {
            self.check_token(who, name, access, token, lease, now);
        }
        let grants = self.grants.entry(name.to_owned()).or_default();
        grants.push(Grant {
            at: now,
            lease,
            token,
            access,
            beside,
        });
        let place = grants.len();
        self.holders.insert(
            (who, name.to_owned()),
            Holder {
                manager,
                token,
                entered: now,
                access,
                lease,
                told: None,
                expires,
            },
        );
        place
    }

    /// `who` holds `name` with `token` but was lost before it was delivered (a multi-lock's
    /// member lost while the next was awaited): it owns its lease until it lets go, told
    /// from the start, and its grant is not checked again.
    pub(crate) fn held_lost(
        &mut self,
        who: Who,
        name: &str,
        access: Access,
        manager: Option<usize>,
        token: u64,
    ) {
        let lease = recorder::lock(&self.ledger).lease_of(name, token, self.timings.block);
        self.holders.insert(
            (who, name.to_owned()),
            Holder {
                manager,
                token,
                entered: Instant::now(),
                access,
                lease,
                told: Some(Instant::now()),
                expires: None,
            },
        );
    }

    /// Rule 1: the grant fits beside the name's occupants. Returns the occupants.
    fn check_exclusion(
        &mut self,
        who: Who,
        name: &str,
        access: Access,
        token: u64,
        lease: Option<LeaseId>,
        now: Instant,
    ) -> Vec<Who> {
        let margin = self.timings.margin();
        // Every other holder still occupying the name: (who, token, access, untold, free).
        let mut occupants = Vec::new();
        for ((other, other_name), holder) in &self.holders {
            if other_name != name || *other == who || (holder.lease == lease && lease.is_some()) {
                continue;
            }
            if self.exempt(holder.lease, now) {
                continue;
            }
            let free = self.free_from(holder);
            if free.is_some_and(|free| now + INSTANT >= free) {
                continue;
            }
            // The history rule (no overlap among holders not told of a loss) names the
            // untold ones; the margin after their end is the simulator's own.
            let untold = self.as_held(holder).holds_untold_at(now);
            occupants.push((*other, holder.token, holder.access, untold, free));
        }
        let mut problems = Vec::new();
        let mut permits_beside = Vec::new();
        for &(other, other_token, other_access, untold, free) in &occupants {
            if compatible(access, other_access) {
                if matches!(other_access, Access::Permit { .. }) {
                    permits_beside.push((other, other_token, untold));
                }
                continue;
            }
            let mutexes = access == Access::Exclusive && other_access == Access::Exclusive;
            problems.push(match (mutexes, free) {
                (true, Some(free)) => format!(
                    "{who:?} granted {name} (token {token}) {:?} before {other:?} (token {other_token}) was told or due plus the margin {margin:?}",
                    free - now
                ),
                (true, None) => format!(
                    "{who:?} granted {name} (token {token}) while {other:?} (token {other_token}) holds it untold"
                ),
                (false, _) => format!(
                    "reader/writer conflict: {who:?} granted {} of {name} (token {token}) while {other:?} holds {} (token {other_token}) {}",
                    access.as_str(),
                    other_access.as_str(),
                    if untold {
                        "untold".to_owned()
                    } else {
                        format!("within the loss margin ({:?} left)", free.map(|free| free - now).unwrap_or_default())
                    }
                ),
            });
        }
        if let Access::Permit { permits } = access
            && permits_beside.len() >= permits as usize
        {
            let untold = permits_beside
                .iter()
                .filter(|(_, _, untold)| *untold)
                .count();
            let list: Vec<String> = permits_beside
                .iter()
                .map(|(other, token, untold)| {
                    format!(
                        "{other:?} token {token}{}",
                        if *untold { "" } else { " (told or due)" }
                    )
                })
                .collect();
            problems.push(if untold >= permits as usize {
                format!(
                    "more than {permits} permits: {who:?} granted {name} (token {token}) while {untold} holders not told of a loss hold it: {}",
                    list.join(", ")
                )
            } else {
                format!(
                    "more than {permits} permits within the loss margin: {who:?} granted {name} (token {token}) beside {}",
                    list.join(", ")
                )
            });
        }
        for problem in problems {
            self.violation(problem);
        }
        occupants.into_iter().map(|(other, ..)| other).collect()
    }

    /// Rule 2 for one delivered token: never delivered before; a token after its lease's
    /// grant token either a reader's that joined the read as it was delivered, or a
    /// mutex's passed locally above every token the store issued for the name before the
    /// pass. A grant's own token was checked in the store's order already.
    fn check_token(
        &mut self,
        who: Who,
        name: &str,
        access: Access,
        token: u64,
        lease: Option<LeaseId>,
        now: Instant,
    ) {
        if !self
            .delivered
            .entry(name.to_owned())
            .or_default()
            .insert(token)
        {
            self.violation(format!(
                "{who:?} got token {token} on {name}, delivered twice"
            ));
        }
        let Some(lease) = lease else { return };
        let (grant_token, largest, granted_send, contended_for) = {
            let ledger = recorder::lock(&self.ledger);
            (
                ledger.grant_token(name, lease),
                ledger.largest_issued_before(name, now),
                ledger.granted_send(lease),
                ledger.contended_for(lease),
            )
        };
        // Others waited the bound (the hand-over said so): the lock goes back, never on.
        if let (Some(grant_token), Some(waited)) = (grant_token, contended_for)
            && token > grant_token
            && waited >= self.timings.fairness_bound
        {
            self.violation(format!(
                "{who:?} got token {token} on {name} by a local pass, though the hand-over that granted {grant_token} said others had waited {waited:?} (fairness bound {:?})",
                self.timings.fairness_bound
            ));
        }
        // Bounded unfairness: the store is asked at least once per fairness bound, so
        // nobody elsewhere waits unseen longer than that (a pause of every process aside).
        if let (Some(grant_token), Some(sent)) = (grant_token, granted_send)
            && !self.members_taken_earlier
            && token > grant_token
            && now > sent + self.timings.fairness_bound + INSTANT + self.paused_between(sent, now)
        {
            self.violation(format!(
                "{who:?} got token {token} on {name} by a local pass {:?} after the store was last asked (its lease was granted {grant_token}; fairness bound {:?})",
                now - sent,
                self.timings.fairness_bound
            ));
        }
        // A shared place never passes locally; readers waiting together join a read as it
        // is granted, under tokens the grant reserved (so the store issued them with it).
        if let Some(grant_token) = grant_token
            && token > grant_token
            && access.kind().is_shared()
        {
            let granted_at = self
                .grants
                .get(name)
                .and_then(|grants| {
                    grants
                        .iter()
                        .filter(|grant| grant.lease == Some(lease))
                        .map(|grant| grant.at)
                        .min()
                })
                .unwrap_or(now);
            if access != Access::Read || now > granted_at + INSTANT {
                self.violation(format!(
                    "{who:?} got token {token} of {name}'s {} granted {grant_token} {:?} after that grant was delivered: a shared place passed on locally",
                    access.as_str(),
                    now - granted_at
                ));
            }
            return;
        }
        if let (Some(grant_token), Some(largest)) = (grant_token, largest)
            && token > grant_token
            && !rules::token_increases(largest, token)
        {
            self.violation(format!(
                "{who:?} got token {token} on {name} by a local pass (its lease was granted {grant_token}), not above {largest} the store issued before"
            ));
        }
    }

    /// Rule 8 for a task in arrival order that got `token` on `name`, having asked at
    /// `asked`: the token is its lease's grant token (no local pass), and the grant was
    /// asked for this very task's arrival (so the store, which grants only ahead of every
    /// later live place in line, served the line's order — the witness checks that part).
    /// A grant asked for an earlier task that left, then handed to this one, would
    /// overtake whoever asked in between.
    pub(crate) fn served_in_arrival_order(
        &mut self,
        who: Who,
        name: &str,
        token: u64,
        asked: Instant,
    ) {
        let (grant_token, claimed, writers_behind) = {
            let ledger = recorder::lock(&self.ledger);
            let Some(lease) = ledger.lease_of(name, token, self.timings.block) else {
                return; // reported by `granted`
            };
            (
                ledger.grant_token(name, lease),
                ledger.claimed_arrival(lease),
                ledger.writers_behind_read(lease),
            )
        };
        if grant_token != Some(token) {
            // A reader that shared a read granted in line (rule 3's token check says it
            // joined as the grant was delivered) must have asked before the earliest writer
            // elsewhere in line then, and before the grant was asked for.
            let joined_in_order = writers_behind.is_some_and(|earliest_writer| {
                claimed.is_some() && earliest_writer.is_none_or(|writer| asked < writer)
            });
            if !joined_in_order {
                self.violation(format!(
                    "{who:?} got token {token} on {name} in arrival order by a local pass (its lease was granted {grant_token:?}), not as a reader ahead of every writer in line (earliest {writers_behind:?}, asked {asked:?})"
                ));
            }
            return;
        }
        match claimed {
            // Asked for a later task of its process: this one had let its own grant go (it
            // reached it past the loss deadline, the process paused) and asked again with its
            // arrival while that attempt was out. The store let the later arrival in, so
            // nobody that arrived before either task was overtaken.
            Some(claimed) if claimed > asked + INSTANT && self.let_own_grant_go(name, asked, token) => {}
            Some(claimed) if claimed > asked + INSTANT => self.violation(format!(
                "{who:?} got {name} (token {token}) in arrival order from a grant asked for a task that arrived {:?} after it",
                claimed - asked
            )),
            // Asked for an earlier task of its process (which left): whoever asked in
            // between elsewhere was overtaken.
            Some(claimed) if claimed + INSTANT < asked => self.violation(format!(
                "{who:?} got {name} (token {token}) in arrival order from a grant asked for a task that arrived {:?} before it",
                asked - claimed
            )),
            Some(_) => {}
            None => self.violation(format!(
                "{who:?} got {name} (token {token}) in arrival order from a grant not asked in arrival order"
            )),
        }
    }

    /// Whether `name` was granted before `token` for a task that arrived at `asked` and
    /// nobody entered with that grant: the task it was asked for let it go.
    fn let_own_grant_go(&self, name: &str, asked: Instant, token: u64) -> bool {
        let delivered = self.delivered.get(name);
        recorder::lock(&self.ledger)
            .grants_claiming(name, asked, INSTANT)
            .into_iter()
            .any(|granted| {
                granted < token && delivered.is_none_or(|tokens| !tokens.contains(&granted))
            })
    }

    /// What the witness found wrong in the store's own order.
    pub(crate) fn check_store(&mut self) {
        let (problems, cannot_go) = {
            let mut ledger = recorder::lock(&self.ledger);
            (
                ledger.take_store_violations(),
                ledger.wakes.take_cannot_go(),
            )
        };
        for problem in problems {
            self.violation(problem);
        }
        // Rule 11: a woken manager goes, unless its store misbehaved meanwhile (an attempt
        // applied long after it was sent claims a later arrival than its place).
        for woken in cannot_go {
            let manager = woken
                .holder
                .as_str()
                .strip_prefix("manager-")
                .and_then(|id| id.parse().ok());
            let what = format!(
                "{} was woken by a release of {} {:?} ago, and its next attempt was refused though nobody took the name meanwhile: a woken manager that cannot go",
                woken.holder,
                woken.name,
                Instant::now() - woken.woken
            );
            if manager.is_some_and(|manager| self.faulty_since(manager, woken.woken)) {
                self.note(format!("{what} (its store misbehaved)"));
            } else {
                self.violation(what);
            }
        }
    }

    /// `who` was told it lost its hold (every name it holds).
    pub(crate) fn told(&mut self, who: Who, reason: &str) {
        self.note(format!("{who:?} told: {reason}"));
        let now = Instant::now();
        for ((holder_who, _), holder) in self.holders.iter_mut() {
            if *holder_who == who {
                holder.told.get_or_insert(now);
            }
        }
    }

    /// `who` was told it lost its hold of `name` (a multi-lock's member).
    pub(crate) fn told_of(&mut self, who: Who, name: &str, reason: &str) {
        self.note(format!("{who:?} told of {name}: {reason}"));
        if let Some(holder) = self.holders.get_mut(&(who, name.to_owned())) {
            holder.told.get_or_insert(Instant::now());
        }
    }

    /// `who` stops acting on its hold (dropping or releasing its guard), of every name.
    pub(crate) fn letting_go(&mut self, who: Who) {
        self.note(format!("{who:?} lets go"));
        self.holders.retain(|(holder, _), _| *holder != who);
    }

    /// Whether the grants noted next are a multi-lock's members (see `members_taken_earlier`).
    pub(crate) fn members_taken_earlier(&mut self, members: bool) {
        self.members_taken_earlier = members;
    }

    /// Client `id` starts acquiring `names` all at once through `manager`.
    pub(crate) fn multi_acquiring(&mut self, id: usize, manager: usize, names: Vec<String>) {
        self.multis.insert(
            id,
            MultiAttempt {
                manager,
                names,
                gave_up: None,
            },
        );
    }

    /// Client `id`'s multi-lock acquisition ended: with every member (`true`) or none.
    pub(crate) fn multi_ended(&mut self, id: usize, acquired: bool) {
        if acquired {
            self.multis.remove(&id);
        } else if let Some(attempt) = self.multis.get_mut(&id) {
            attempt.gave_up.get_or_insert(Instant::now());
        }
    }

    /// `who`'s release of the hold of `name` granted `place`-th was answered `Ok`: nobody
    /// else may have been granted its place from then until the store released the lease
    /// (or, passed to a local waiter, until now).
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
        let Some(access) = self
            .grants
            .get(name)
            .and_then(|grants| grants.get(place.wrapping_sub(1)))
            .map(|grant| grant.access)
        else {
            return;
        };
        let until = released.unwrap_or(now);
        let foreign: Vec<u64> = self
            .grants
            .get(name)
            .into_iter()
            .flatten()
            .skip(place)
            .filter(|grant| {
                grant.lease != lease && grant.at < until && !self.exempt(grant.lease, grant.at)
            })
            .filter(|grant| match (access, grant.access) {
                (Access::Read, Access::Read) => false,
                // A permit beside this one took its place only if, with it counted, the
                // grant made more than its count.
                (Access::Permit { .. }, Access::Permit { permits }) => {
                    let others = grant.beside.iter().filter(|other| **other != who).count();
                    others + 2 > permits as usize
                }
                _ => true,
            })
            .map(|grant| grant.token)
            .collect();
        if !foreign.is_empty() {
            self.violation(format!(
                "{who:?}'s release of {name} token {token} was answered Ok, but tokens {foreign:?} were granted its place meanwhile"
            ));
        }
    }

    /// Rule 10: what `who`, letting go now, holds past its oracle deadline: each name,
    /// token and by how much. Those leases are never passed on from then.
    pub(crate) fn past_deadline(&mut self, who: Who) -> Vec<(String, u64, Duration)> {
        let now = Instant::now();
        let mut overdue = Vec::new();
        for ((holder_who, name), holder) in &self.holders {
            if *holder_who != who {
                continue;
            }
            if let (Some(lease), Some(deadline)) = (holder.lease, self.deadline_of(holder.lease))
                && now > deadline + INSTANT
            {
                overdue.push((name.clone(), holder.token, now - deadline));
                let last = self.let_go_late.entry(lease).or_insert(holder.token);
                *last = (*last).max(holder.token);
            }
        }
        overdue
    }

    /// Rule 10: `who`'s release was answered `Ok` although it asked past the deadline of
    /// what `overdue` lists (see [`History::past_deadline`]).
    pub(crate) fn released_ok_past_deadline(
        &mut self,
        who: Who,
        overdue: &[(String, u64, Duration)],
    ) {
        for (name, token, late) in overdue {
            self.violation(format!(
                "{who:?}'s release of {name} token {token} was answered Ok, though asked {late:?} past the hold's deadline"
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

    /// An operator deleted `name`'s record, which carried `leases`.
    pub(crate) fn operator_freed(&mut self, name: &str, leases: &[LeaseId]) {
        self.note(format!("operator frees {name} ({leases:?})"));
        let now = Instant::now();
        for lease in leases {
            self.freed_by_operator.insert(*lease, now);
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

    /// Rule 4: nobody stays untold past its oracle deadline (reported once per holding).
    pub(crate) fn check_told_in_time(&mut self) {
        let now = Instant::now();
        let mut problems = Vec::new();
        for (key, holder) in &self.holders {
            let who = key.0;
            let resigning =
                matches!(who, Who::Term(candidate, _) if self.resigning.contains(&candidate));
            if holder.told.is_some()
                || holder.expires.is_some()
                || holder.manager.is_none()
                || resigning
                || self.reported_untold.contains(key)
            {
                continue;
            }
            if let Some(deadline) = self.deadline_of(holder.lease)
                && now > deadline + INSTANT
                && !self.exempt(holder.lease, now)
            {
                problems.push((
                    key.clone(),
                    format!(
                        "{who:?} (token {} on {}) not told of its loss {:?} after its deadline",
                        holder.token,
                        key.1,
                        now - deadline
                    ),
                ));
            }
        }
        for (key, problem) in problems {
            self.reported_untold.insert(key);
            self.violation(problem);
        }
    }

    /// Rule 5: a held record (each holding of a shared one) is owned by a holder, or was
    /// not orphaned for long.
    ///
    /// `records` has one entry per holding: its name, the manager holding it (`None` for
    /// the intruder) and its grant token.
    pub(crate) fn check_orphans(&mut self, records: Vec<(String, Option<usize>, u64)>) {
        let now = Instant::now();
        let margin = self.timings.margin();
        // A lost term's guard is dropped by the campaign by the end of its margin at the
        // latest (the runtime frees the lease then): it owns nothing after that.
        self.holders.retain(|(who, _), holder| {
            !matches!(who, Who::Term(..))
                || holder
                    .told
                    .is_none_or(|told| told + margin + INSTANT >= now)
        });
        let block = self.timings.block;
        let mut seen = Vec::new();
        let mut problems = Vec::new();
        for (name, manager, token) in records {
            let owned = self.holders.iter().any(|((_, held), holder)| {
                *held == name
                    && holder.manager == manager
                    && holder.token >= token
                    && holder.token < token + block
            }) || self.acquiring_multi_owns(&name, manager);
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
                let partial = manager.and_then(|manager| self.gave_up_multi(&name, manager, since));
                let what = match partial {
                    Some(client) => {
                        format!("partial multi-lock left held (client {client} gave up): ")
                    }
                    None => String::new(),
                };
                problems.push(format!(
                    "{what}{name} held by manager {manager:?} (token {token}) with no owner for {unowned:?} (bound {bound:?})"
                ));
            }
        }
        self.orphans.retain(|key, _| seen.contains(key));
        // An attempt that gave up long ago can no longer explain an orphan.
        let forget = self.timings.expiry * 10;
        self.multis
            .retain(|_, attempt| attempt.gave_up.is_none_or(|gave_up| gave_up + forget > now));
        for problem in problems {
            self.violation(problem);
        }
    }

    /// Whether a multi-lock still acquiring on `manager` owns a holding of `name` there: a
    /// member it took while waiting for the next, maybe passed to it by a local holder of
    /// an older lease (so the record's token tells nothing about when it was taken).
    fn acquiring_multi_owns(&self, name: &str, manager: Option<usize>) -> bool {
        let Some(manager) = manager else { return false };
        self.multis.values().any(|attempt| {
            attempt.gave_up.is_none()
                && attempt.manager == manager
                && attempt.names.iter().any(|member| member == name)
        })
    }

    /// The client whose multi-lock over `name` on `manager` gave up by `since`, if any.
    fn gave_up_multi(&self, name: &str, manager: usize, since: Instant) -> Option<usize> {
        self.multis.iter().find_map(|(client, attempt)| {
            (attempt.manager == manager
                && attempt
                    .gave_up
                    .is_some_and(|gave_up| gave_up <= since + INSTANT)
                && attempt.names.iter().any(|member| member == name))
            .then_some(*client)
        })
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
            (Who::Term(candidate, token), election.to_owned()),
            Holder {
                manager: Some(manager),
                token,
                entered: Instant::now(),
                access: Access::Exclusive,
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
        // A resigning candidate's term ends when its release is sent (after its work
        // returned), also when the release fails and the news that comes later is a
        // deposal (the lease then expired while nobody led).
        if resigned || self.resigning.contains(&candidate) {
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
        let key = (Who::Term(candidate, token), election.to_owned());
        if resigned {
            self.holders.remove(&key);
        } else if let Some(holder) = self.holders.get_mut(&key) {
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
    /// its candidate is stepping down: then its end is known once reported. As a lock
    /// holder's, a term is believed in only until its lease's oracle deadline: a candidate
    /// paused past it learns of the loss as it resumes, in whatever order its tasks run
    /// then, and rule 4 holds it to being told in time otherwise.
    pub(crate) fn check_terms(&mut self) {
        let now = Instant::now();
        let unknown_end = |candidate: &usize, end: &Option<Instant>| {
            end.is_none() && self.resigning.contains(candidate)
        };
        let believed_until = |election: &str, token: u64, end: Option<Instant>| {
            let lease = recorder::lock(&self.ledger).lease_of(election, token, self.timings.block);
            [Some(end.unwrap_or(now)), self.deadline_of(lease)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now)
        };
        let mut problems = Vec::new();
        for (i, (e1, c1, t1, s1, end1)) in self.terms.iter().enumerate() {
            for (e2, c2, t2, s2, end2) in &self.terms[i + 1..] {
                if e1 != e2 || c1 == c2 || unknown_end(c1, end1) || unknown_end(c2, end2) {
                    continue;
                }
                let (end1, end2) = (
                    believed_until(e1, *t1, *end1),
                    believed_until(e2, *t2, *end2),
                );
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

/// The checker on hand-made histories: each rule for the new kinds flags what it must, and
/// only that.
#[cfg(test)]
mod tests {
    use super::*;
    use mongolock::LockName;

    const PERMITS: Access = Access::Permit { permits: 2 };

    fn paused(test: impl std::future::Future<Output = ()>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        runtime.block_on(test);
    }

    fn history() -> (History, Arc<Mutex<Ledger>>) {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let timings = Timings {
            expiry: Duration::from_millis(1_500),
            renew_deadline: Duration::from_millis(900),
            max_stall: Duration::from_millis(2_000),
            block: 16,
            fairness_bound: Duration::from_millis(40),
        };
        (History::new(timings, ledger.clone()), ledger)
    }

    /// A grant of `name` to client `id` with a lease the oracle knows, confirmed now.
    fn grant(
        history: &mut History,
        ledger: &Mutex<Ledger>,
        id: usize,
        name: &str,
        access: Access,
        token: u64,
    ) -> usize {
        let lease = LeaseId::new();
        let name_value = LockName::new(name).expect("a valid name");
        recorder::lock(ledger).granted(&name_value, token, lease, Instant::now());
        history.granted(
            Who::Client(id),
            name,
            access,
            Some(0),
            token,
            Some(lease),
            None,
        )
    }

    fn flagged(history: &History, needle: &str) -> bool {
        history
            .violations()
            .iter()
            .any(|line| line.contains(needle))
    }

    /// Rule 6 judges a term as the exclusion rules judge a holder: believed in until its
    /// candidate is told of the loss or its lease's deadline passes, whichever is first.
    #[test]
    fn terms_overlap_only_while_both_candidates_may_believe_they_lead() {
        paused(async {
            let (mut history, ledger) = history();
            let name = LockName::new("leader").expect("a valid name");
            recorder::lock(&ledger).granted(&name, 1, LeaseId::new(), Instant::now());
            history.term_began("leader", 0, 0, 1);
            tokio::time::advance(Duration::from_millis(100)).await;
            recorder::lock(&ledger).granted(&name, 17, LeaseId::new(), Instant::now());
            history.term_began("leader", 1, 1, 17);
            tokio::time::advance(Duration::from_millis(100)).await;
            history.check_terms();
            assert!(
                flagged(&history, "candidate 0's term (token 1"),
                "a second leader within the first's deadline: {:?}",
                history.violations()
            );

            // Paused past its deadline, told only afterwards: no longer a leader by then.
            let (mut history, ledger) = self::history();
            recorder::lock(&ledger).granted(&name, 1, LeaseId::new(), Instant::now());
            history.term_began("leader", 0, 0, 1);
            tokio::time::advance(Duration::from_millis(1_000)).await;
            recorder::lock(&ledger).granted(&name, 17, LeaseId::new(), Instant::now());
            history.term_began("leader", 1, 1, 17);
            tokio::time::advance(Duration::from_millis(100)).await;
            history.term_ended("leader", 0, 1, false, "deposed");
            history.check_terms();
            assert!(!flagged(&history, "overlaps"), "{:?}", history.violations());
        });
    }

    #[test]
    fn a_permit_beyond_the_count_is_flagged_and_the_count_is_not() {
        paused(async {
            let (mut history, ledger) = history();
            grant(&mut history, &ledger, 1, "pool", PERMITS, 1);
            grant(&mut history, &ledger, 2, "pool", PERMITS, 17);
            assert!(history.violations().is_empty(), "two permits of two");
            grant(&mut history, &ledger, 3, "pool", PERMITS, 33);
            assert!(
                flagged(&history, "more than 2 permits: Client(3)"),
                "{:?}",
                history.violations()
            );
            assert!(flagged(&history, "2 holders not told of a loss"));
        });
    }

    #[test]
    fn a_permit_within_the_loss_margin_is_flagged_and_after_it_is_not() {
        paused(async {
            let (mut history, ledger) = history();
            grant(&mut history, &ledger, 1, "pool", PERMITS, 1);
            grant(&mut history, &ledger, 2, "pool", PERMITS, 17);
            history.told(Who::Client(1), "lost");
            history.told(Who::Client(2), "lost");
            tokio::time::advance(Duration::from_millis(100)).await;
            grant(&mut history, &ledger, 3, "pool", PERMITS, 33);
            assert!(
                flagged(&history, "more than 2 permits within the loss margin"),
                "{:?}",
                history.violations()
            );
            let before = history.violations().len();
            tokio::time::advance(Duration::from_millis(600)).await;
            grant(&mut history, &ledger, 4, "pool", PERMITS, 49);
            assert_eq!(history.violations().len(), before, "the margin has passed");
        });
    }

    #[test]
    fn a_writer_beside_a_reader_is_flagged_both_ways_and_readers_share() {
        paused(async {
            let (mut history, ledger) = history();
            grant(&mut history, &ledger, 1, "schema", Access::Read, 1);
            grant(&mut history, &ledger, 2, "schema", Access::Read, 17);
            assert!(history.violations().is_empty(), "readers share");
            grant(&mut history, &ledger, 3, "schema", Access::Write, 33);
            assert!(
                flagged(
                    &history,
                    "reader/writer conflict: Client(3) granted write of schema"
                ),
                "{:?}",
                history.violations()
            );
            let (mut history, ledger) = self::history();
            grant(&mut history, &ledger, 1, "schema", Access::Write, 1);
            grant(&mut history, &ledger, 2, "schema", Access::Read, 17);
            assert!(flagged(&history, "granted read of schema"));
            assert!(flagged(&history, "holds write"));
        });
    }

    #[test]
    fn a_member_left_held_after_a_multi_lock_gave_up_is_flagged() {
        paused(async {
            let (mut history, _ledger) = history();
            let names = vec!["alpha".to_owned(), "beta".to_owned()];
            history.multi_acquiring(7, 0, names);
            let held = || vec![("alpha".to_owned(), Some(0), 17)];
            history.check_orphans(held());
            tokio::time::advance(Duration::from_millis(50)).await;
            history.check_orphans(held());
            assert!(
                history.violations().is_empty(),
                "a member taken while waiting for the next is the acquisition's"
            );
            history.multi_ended(7, false);
            history.check_orphans(held());
            tokio::time::advance(Duration::from_millis(10)).await;
            history.check_orphans(held());
            assert!(
                flagged(&history, "partial multi-lock left held (client 7 gave up)"),
                "{:?}",
                history.violations()
            );
        });
    }

    #[test]
    fn a_release_ok_after_the_permit_was_taken_is_flagged() {
        paused(async {
            let (mut history, ledger) = history();
            let place = grant(&mut history, &ledger, 1, "pool", PERMITS, 1);
            // Client 1 counted no more (told, margin passed): two others may take both
            // places, but then its release must not be answered Ok.
            history.told(Who::Client(1), "lost");
            tokio::time::advance(Duration::from_millis(700)).await;
            grant(&mut history, &ledger, 2, "pool", PERMITS, 17);
            grant(&mut history, &ledger, 3, "pool", PERMITS, 33);
            assert!(
                history.violations().is_empty(),
                "{:?}",
                history.violations()
            );
            tokio::time::advance(Duration::from_millis(10)).await;
            history.released_ok(Who::Client(1), "pool", 1, place);
            assert!(
                flagged(&history, "release of pool token 1 was answered Ok"),
                "{:?}",
                history.violations()
            );
            assert!(
                flagged(&history, "tokens [33]"),
                "only the third took its place"
            );
        });
    }

    #[test]
    fn a_token_passed_locally_below_one_issued_before_is_flagged() {
        paused(async {
            let (mut history, ledger) = history();
            let name = LockName::new("baton").expect("a valid name");
            let first = LeaseId::new();
            {
                let mut ledger = recorder::lock(&ledger);
                ledger.granted(&name, 1, first, Instant::now());
                ledger.issued(&name, 1);
            }
            history.granted(
                Who::Client(1),
                "baton",
                Access::Exclusive,
                Some(0),
                1,
                Some(first),
                None,
            );
            tokio::time::advance(Duration::from_millis(10)).await;
            // The store granted the name to another lease meanwhile (an expiry takeover).
            recorder::lock(&ledger).issued(&name, 17);
            tokio::time::advance(Duration::from_millis(1)).await;
            history.letting_go(Who::Client(1));
            history.granted(
                Who::Client(2),
                "baton",
                Access::Exclusive,
                Some(0),
                2,
                Some(first),
                None,
            );
            assert!(
                flagged(
                    &history,
                    "by a local pass (its lease was granted 1), not above 17"
                ),
                "{:?}",
                history.violations()
            );
            history.letting_go(Who::Client(2));
            history.granted(
                Who::Client(3),
                "baton",
                Access::Exclusive,
                Some(0),
                2,
                Some(first),
                None,
            );
            assert!(flagged(&history, "delivered twice"));
        });
    }

    #[test]
    fn a_shared_place_passed_locally_is_flagged_and_readers_joining_a_grant_are_not() {
        paused(async {
            let (mut history, ledger) = history();
            let permit = grant(&mut history, &ledger, 1, "pool", PERMITS, 1);
            assert_eq!(permit, 1);
            let read = grant(&mut history, &ledger, 2, "files", Access::Read, 1);
            assert_eq!(read, 1);
            let lease_of = |name: &str| recorder::lock(&ledger).lease_of(name, 1, 16);
            // Readers waiting together join the read as it is delivered.
            for (client, token) in [(3, 2), (4, 3)] {
                history.granted(
                    Who::Client(client),
                    "files",
                    Access::Read,
                    Some(0),
                    token,
                    lease_of("files"),
                    None,
                );
            }
            assert!(
                history.violations().is_empty(),
                "{:?}",
                history.violations()
            );
            tokio::time::advance(Duration::from_millis(10)).await;
            history.letting_go(Who::Client(1));
            history.granted(
                Who::Client(5),
                "pool",
                PERMITS,
                Some(0),
                2,
                lease_of("pool"),
                None,
            );
            assert!(
                flagged(&history, "token 2 of pool's permit granted 1 10ms after"),
                "{:?}",
                history.violations()
            );
            history.granted(
                Who::Client(6),
                "files",
                Access::Read,
                Some(0),
                4,
                lease_of("files"),
                None,
            );
            assert!(
                flagged(&history, "token 4 of files's read granted 1 10ms after"),
                "{:?}",
                history.violations()
            );
        });
    }

    #[test]
    fn a_local_pass_past_the_fairness_bound_is_flagged_and_one_within_it_is_not() {
        paused(async {
            let (mut history, ledger) = history();
            let granted = grant(&mut history, &ledger, 1, "baton", Access::Exclusive, 7);
            assert_eq!(granted, 1);
            let lease = recorder::lock(&ledger).lease_of("baton", 7, 16);
            let pass = |history: &mut History, client: usize, token: u64| {
                history.letting_go(Who::Client(client - 1));
                history.granted(
                    Who::Client(client),
                    "baton",
                    Access::Exclusive,
                    Some(0),
                    token,
                    lease,
                    None,
                );
            };
            tokio::time::advance(Duration::from_millis(40)).await;
            pass(&mut history, 2, 8);
            tokio::time::advance(Duration::from_millis(1)).await;
            pass(&mut history, 3, 9);
            assert!(
                !flagged(&history, "after the store was last asked"),
                "{:?}",
                history.violations()
            );
            tokio::time::advance(Duration::from_millis(1)).await;
            pass(&mut history, 4, 10);
            assert!(
                flagged(
                    &history,
                    "by a local pass 42ms after the store was last asked"
                ),
                "{:?}",
                history.violations()
            );
        });
    }

    #[test]
    fn a_token_the_store_issued_below_an_earlier_one_is_flagged() {
        paused(async {
            let (mut history, ledger) = history();
            let name = LockName::new("schema").expect("a valid name");
            recorder::lock(&ledger).issued(&name, 17);
            recorder::lock(&ledger).issued(&name, 33);
            history.check_store();
            assert!(history.violations().is_empty());
            recorder::lock(&ledger).issued(&name, 33);
            history.check_store();
            assert!(
                flagged(
                    &history,
                    "the store issued token 33 on schema, not above 33"
                ),
                "{:?}",
                history.violations()
            );
        });
    }
}
