//! The wake rule, seen by the witness (rule 11 of `history`): a mutex's release wakes
//! only the manager the store's rule lets in next — the earliest-arrived live place in the
//! name's line, where arrival order's waiters take places from their first refusal and
//! the default mode's are listed from a refusal that says how long they will wait — and
//! every manager when nobody is listed. A shared record's release (of a lease of arrival
//! order) wakes exactly the managers whose places its kind lets in next, read from the
//! record as the release left it: the earliest places as many as permits are free, or a
//! first write place when nobody holds, or the reads ahead of every write place while no
//! writer holds; nobody if places are live but none may go, everyone if none is live. A
//! hand-over that grants wakes nobody.
//!
//! The line is built here from the store's answers alone, independently of the store's
//! own. A woken manager whose next attempt at the name is refused while nobody took it
//! in between *cannot go*: the wake went to the wrong manager, or the manager's place
//! claimed an arrival its attempt no longer has. The history reports each (unless the
//! manager's store misbehaved meanwhile, when its attempt may have been applied long
//! after it was sent, or unless a place that arrived earlier was made known only after
//! the wake).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use mongolock::store::AcquireRequest;
use mongolock::{Access, HolderId, LockKind, LockRecord, MAX_LEASE_DURATION, MAX_PERMITS};
use tokio::time::Instant;

/// One manager's place in a name's line.
struct Place {
    /// The access its manager's attempt asked for.
    access: Access,
    arrival: Instant,
    until: Instant,
    /// Arrival order's place, which holds later arrivals back; a default-mode listing
    /// holds nobody back and only says whom a release wakes.
    ordered: bool,
    /// When the store's answer made the place known.
    placed: Instant,
}

/// A woken manager refused at its next attempt, with nobody granted the name between.
pub(crate) struct CannotGo {
    pub(crate) holder: String,
    pub(crate) name: String,
    pub(crate) woken: Instant,
}

#[derive(Default)]
pub(crate) struct WakeLedger {
    lines: BTreeMap<String, HashMap<HolderId, Place>>,
    /// Managers woken for a name that have not attempted it since: when.
    woken: HashMap<(String, String), Instant>,
    /// Managers a shared release let in but could not wake (no feed left: shut down), by
    /// name: their places hold later ones back until they end, as a woken manager's do
    /// until it attempts.
    unreachable: BTreeSet<(String, String)>,
    cannot_go: Vec<CannotGo>,
    /// Releases whose wake was judged, and how many managers they woke in all.
    pub(crate) releases: u64,
    pub(crate) wakeups: u64,
}

impl WakeLedger {
    /// The store refused `request` now, waking `passed_to` as it did: if its manager had
    /// been woken for the name and nobody took it since, it could not go — unless the
    /// refusal passed the wake on to managers whose places arrived before it (rule 22: a
    /// refusal by the line alone wakes the earliest place, whose manager is then judged
    /// the same way); then its place is taken (or renewed).
    pub(crate) fn refused(
        &mut self,
        request: &AcquireRequest,
        now: Instant,
        passed_to: &BTreeSet<String>,
    ) {
        let name = request.name.as_str().to_owned();
        let arrival = now
            .checked_sub(request.waited.min(MAX_LEASE_DURATION))
            .unwrap_or(now);
        if let Some(woken) = self
            .woken
            .remove(&(name.clone(), request.holder.as_str().to_owned()))
        {
            // Overtaken by a place that arrived earlier but was made known only after the
            // wake: the rule could not have let that one in. Or woken with an earlier place
            // it waits behind (a semaphore's release wakes as many places as permits came
            // free), whose manager has not attempted yet: that one goes first.
            let overtaken = self.lines.get(&name).is_some_and(|line| {
                line.iter().any(|(holder, place)| {
                    *holder != request.holder
                        && place.ordered
                        && place.until > now
                        && place.arrival < arrival
                        && (place.placed >= woken
                            || (!(request.access == Access::Read && place.access == Access::Read)
                                && {
                                    let key = (name.clone(), holder.as_str().to_owned());
                                    self.woken.contains_key(&key) || self.unreachable.contains(&key)
                                }))
                })
            });
            let passed_on = !passed_to.is_empty()
                && passed_to.iter().all(|woken| {
                    self.lines.get(&name).is_some_and(|line| {
                        line.iter().any(|(holder, place)| {
                            holder.as_str() == woken
                                && place.ordered
                                && place.until > now
                                && place.arrival < arrival
                        })
                    })
                });
            if !overtaken && !passed_on {
                self.cannot_go.push(CannotGo {
                    holder: request.holder.as_str().to_owned(),
                    name: name.clone(),
                    woken,
                });
            }
        }
        for woken in passed_to {
            self.woken.insert((name.clone(), woken.clone()), now);
        }
        let until = now + request.retry_within.min(MAX_LEASE_DURATION);
        let ordered = request.in_arrival_order;
        let listed =
            ordered || (request.access == Access::Exclusive && !request.retry_within.is_zero());
        if listed {
            self.lines.entry(name).or_default().insert(
                request.holder.clone(),
                Place {
                    access: request.access,
                    arrival,
                    until,
                    ordered,
                    placed: now,
                },
            );
        }
    }

    /// A hand-over's release went through but its waiter was refused (an earlier place
    /// goes first): in arrival order the waiter's manager takes its place.
    pub(crate) fn hand_over_refused(&mut self, request: &AcquireRequest, now: Instant) {
        if request.in_arrival_order {
            self.refused(request, now, &BTreeSet::new());
        } else {
            self.woken.remove(&(
                request.name.as_str().to_owned(),
                request.holder.as_str().to_owned(),
            ));
        }
    }

    /// The store granted `name` to `holder`: its place goes, and nobody woken before can
    /// be said not to go any more.
    pub(crate) fn granted(&mut self, name: &str, holder: &HolderId) {
        if let Some(line) = self.lines.get_mut(name) {
            line.remove(holder);
        }
        self.woken.retain(|(woken_for, _), _| woken_for != name);
        self.unreachable.retain(|(woken_for, _)| woken_for != name);
    }

    /// `holder`'s waiters for `name` gave up.
    pub(crate) fn withdrawn(&mut self, name: &str, holder: &HolderId) {
        if let Some(line) = self.lines.get_mut(name) {
            line.remove(holder);
        }
    }

    /// An operator deleted `name`'s record: its line went with it.
    pub(crate) fn deleted(&mut self, name: &str) {
        self.lines.remove(name);
        self.woken.retain(|(woken_for, _), _| woken_for != name);
        self.unreachable.retain(|(woken_for, _)| woken_for != name);
    }

    /// Whom a release of `name` now may wake: the managers of the earliest-arrived live
    /// places (ties in arrival: any of them). Empty: nobody is listed, so everyone.
    pub(crate) fn next(&self, name: &str, now: Instant) -> BTreeSet<String> {
        let Some(line) = self.lines.get(name) else {
            return BTreeSet::new();
        };
        let live = || line.iter().filter(|(_, place)| place.until > now);
        let Some(earliest) = live().map(|(_, place)| place.arrival).min() else {
            return BTreeSet::new();
        };
        live()
            .filter(|(_, place)| place.arrival == earliest)
            .map(|(holder, _)| holder.as_str().to_owned())
            .collect()
    }

    /// A release of `name` (a hand-over's that granted nobody, or one that granted
    /// `granted_to`) woke the feeds of `woken` among every manager's `feeds`; `expected`
    /// is [`WakeLedger::next`] as the release came. Returns what broke the rule.
    pub(crate) fn judge(
        &mut self,
        name: &str,
        expected: &BTreeSet<String>,
        (woken, feeds): (&BTreeSet<String>, &BTreeSet<String>),
        now: Instant,
    ) -> Option<String> {
        self.releases += 1;
        self.wakeups += woken.len() as u64;
        for holder in woken {
            self.woken.insert((name.to_owned(), holder.clone()), now);
        }
        let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        if expected.is_empty() {
            (woken != feeds).then(|| {
                format!(
                    "a release of {name} with nobody listed woke [{}], not every manager [{}]",
                    names(woken),
                    names(feeds)
                )
            })
        } else {
            // One of them; nobody only if one of them has no feed (its manager shut down
            // and left its place to end by itself: the store may have picked that one).
            let may_wake_nobody = !expected.is_subset(feeds);
            let wrong = woken.len() > 1
                || !woken.is_subset(expected)
                || (woken.is_empty() && !may_wake_nobody);
            wrong.then(|| {
                format!(
                    "a release of {name} woke [{}], but the store's rule lets in [{}] next (one of them)",
                    names(woken),
                    names(expected)
                )
            })
        }
    }

    /// Whom a release of the shared record `name` now wakes, `record` being the record as
    /// the release left it: the managers of the live places its kind lets in next (a place
    /// waits only behind places that arrived strictly before it), `None` when no place is
    /// live (everyone).
    pub(crate) fn next_shared(
        &self,
        name: &str,
        record: &LockRecord,
        now: Instant,
    ) -> Option<BTreeSet<String>> {
        let line = self.lines.get(name)?;
        let live: Vec<(&HolderId, &Place)> =
            line.iter().filter(|(_, place)| place.until > now).collect();
        if live.is_empty() {
            return None;
        }
        let before = |place: &Place, counts: &dyn Fn(&Place) -> bool| {
            live.iter()
                .filter(|(_, earlier)| earlier.arrival < place.arrival && counts(earlier))
                .count()
        };
        let held = record.holders.len();
        let writer_holds = record
            .holders
            .iter()
            .any(|holding| holding.access == Access::Write);
        let admitted = |place: &Place| match (record.kind, place.access) {
            (LockKind::Semaphore { permits }, _) => {
                before(place, &|_| true) < (permits as usize).saturating_sub(held)
            }
            (_, Access::Read) => {
                !writer_holds
                    && held < MAX_PERMITS as usize
                    && before(place, &|earlier| earlier.access == Access::Write) == 0
            }
            _ => held == 0 && before(place, &|_| true) == 0,
        };
        Some(
            live.iter()
                .filter(|(_, place)| admitted(place))
                .map(|(holder, _)| holder.as_str().to_owned())
                .collect(),
        )
    }

    /// A release of the shared record `name` woke the feeds of `woken` among every
    /// manager's `feeds`; `expected` is [`WakeLedger::next_shared`] as the release left the
    /// record (`None`: everyone). Returns what broke the rule.
    pub(crate) fn judge_shared(
        &mut self,
        name: &str,
        expected: Option<&BTreeSet<String>>,
        (woken, feeds): (&BTreeSet<String>, &BTreeSet<String>),
        now: Instant,
    ) -> Option<String> {
        let Some(expected) = expected else {
            let problem = self.judge(name, &BTreeSet::new(), (woken, feeds), now);
            // Everyone woke, of whom a few may go: the others' refusals are no defect.
            for holder in woken {
                self.woken.remove(&(name.to_owned(), holder.clone()));
            }
            return problem;
        };
        self.releases += 1;
        self.wakeups += woken.len() as u64;
        for holder in woken {
            self.woken.insert((name.to_owned(), holder.clone()), now);
        }
        // A manager that shut down has no feed left to wake.
        let reachable: BTreeSet<String> = expected.intersection(feeds).cloned().collect();
        for holder in expected.difference(feeds) {
            self.unreachable.insert((name.to_owned(), holder.clone()));
        }
        (*woken != reachable).then(|| {
            let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
            format!(
                "a shared release of {name} woke [{}], but its kind lets in [{}] next (all of them)",
                names(woken),
                names(&reachable)
            )
        })
    }

    /// A hand-over granted `name`: it must wake nobody.
    pub(crate) fn judge_handed_over(
        &mut self,
        name: &str,
        woken: &BTreeSet<String>,
    ) -> Option<String> {
        (!woken.is_empty()).then(|| {
            format!(
                "a hand-over that granted {name} woke {} managers' release feeds",
                woken.len()
            )
        })
    }

    /// The woken managers found unable to go since the last call.
    pub(crate) fn take_cannot_go(&mut self) -> Vec<CannotGo> {
        std::mem::take(&mut self.cannot_go)
    }
}
