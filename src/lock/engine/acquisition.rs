//! The acquisition for the local waiters: at most one attempt in flight per name however
//! many local tasks wait, as one data-owning phase moved by owned transitions (`advance`).
//!
//! | phase | owns | meaning | leaves on |
//! |---|---|---|---|
//! | `Idle` | the idle stop | no attempt (nobody waits, or a mutex is held here) | a waiter, a try, a freed place → `Attempting` |
//! | `Attempting` | the attempt, "woken", the backoff | one acquisition call in flight | grant → `Idle`/next attempt; busy or error → `BackingOff` (or `Idle`) |
//! | `BackingOff` | the backoff, the retry timer, "yielding" | waiting to retry | its timer, or a release seen here or on the store → `Attempting` |

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::attempt::{self, Deferred, Verdict};
use super::backoff::Backoff;
use super::listing::{mark_lasts, place_lasts, renew_place_after};
use super::phase::{Attempt, Phase};
use super::state::NameState;
use super::waiters::{NextWaiter, Waiter};
use crate::error::StoreError;
use crate::kind::Access;
use crate::lock::message::{GuardReply, LockMsg, TryReply};
use crate::lock::orphan::GrantClaim;
use crate::metrics::{LockMetrics, StoreOp};
use crate::options::LockOptions;
use crate::store::{AcquireOutcome, AcquireRequest, LeaseId};

/// The longest a mutex's waiter of the default mode waits without asking while the store's
/// release feed is watching: a release wakes the manager that waited longest, and the
/// lease's end (which the refusal told) is when a crashed holder's lock comes free, so
/// there is nothing to ask in between. Asking at least this often bounds what a wake-up
/// lost with a manager that stopped waiting costs the others.
pub(super) const QUIET_POLL: Duration = Duration::from_secs(5);

impl NameState {
    /// One transition of the acquisition: `next` is given the phase it is in (owned) and
    /// returns the phase it goes to. Transitions never nest: what runs inside one sees the
    /// acquisition idle, as it is between an answer and the next attempt.
    pub(super) fn advance(&mut self, next: impl FnOnce(&mut Self, Phase) -> Phase) {
        let phase = std::mem::take(&mut self.acquisition);
        self.acquisition = next(self, phase);
    }

    pub(super) fn on_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        access: Access,
        options: Arc<LockOptions>,
        requested_at: Instant,
        reply: GuardReply,
    ) {
        if let (Access::Permit { permits }, None) = (access, &self.reported_permits) {
            let policy = options.lock_name_label().clone();
            LockMetrics::semaphore_permits(&self.name, &policy, f64::from(permits));
            self.reported_permits = Some((policy, f64::from(permits)));
        }
        self.waiters.push(Waiter {
            access,
            metrics: LockMetrics::for_access(&self.name, options.lock_name_label(), access),
            options,
            requested_at,
            reply,
        });
        // Idle with attempts allowed, the queue held nobody before this waiter (a live
        // waiter would have an attempt out), so `len() == 1` only restates that; a mutant
        // of `len` survives for this reason.
        let asks_at_once =
            self.acquisition.is_idle() && self.may_attempt() && self.waiters.len() == 1;
        if !asks_at_once {
            // Queued behind another waiter, an attempt or a hold here: it waits.
            self.waiters.waiting();
        }
        self.advance(|this, phase| match phase {
            Phase::Idle { .. } => this.start_attempt(myself, None),
            phase => phase,
        });
    }

    pub(super) fn on_try_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        access: Access,
        options: Arc<LockOptions>,
        reply: TryReply,
    ) {
        self.advance(|this, phase| match phase {
            Phase::Idle { .. } if this.may_attempt() && this.waiters.next_live().is_none() => {
                let metrics =
                    LockMetrics::for_access(&this.name, options.lock_name_label(), access);
                let next = NextWaiter {
                    access,
                    options,
                    metrics,
                    waited: Duration::ZERO,
                    requested_at: Instant::now(),
                };
                let backoff = Backoff::new(&next.options);
                this.send_attempt(myself, next, Some(reply), backoff)
            }
            phase => {
                // This process holds the name or has tasks queued for it: a newcomer does
                // not jump their queue.
                let _ = reply.send(Ok(None));
                phase
            }
        });
    }

    /// Sends one attempt for the next waiter (going on with `backoff`, if refusals came
    /// before), or idles if there is nothing to do (or a mutex is held here: its waiters
    /// get it when it is passed on or freed).
    fn start_attempt(&mut self, myself: &ActorRef<LockMsg>, backoff: Option<Backoff>) -> Phase {
        match self
            .may_attempt()
            .then(|| self.waiters.next_in_turn())
            .flatten()
        {
            Some(next) => {
                let backoff = backoff.unwrap_or_else(|| Backoff::new(&next.options));
                self.send_attempt(myself, next, None, backoff)
            }
            // No attempt until a waiter or a freed place asks for one.
            None => self.idle(myself),
        }
    }

    fn send_attempt(
        &mut self,
        myself: &ActorRef<LockMsg>,
        next: NextWaiter,
        for_try: Option<TryReply>,
        backoff: Backoff,
    ) -> Phase {
        let request = self.acquire_request(&next, for_try.is_some(), backoff.has_refusals());
        let options = next.options.clone();
        let (lease, listed_for) = (request.lease, request.retry_within);
        // A try answers now; a waiting acquisition lets renewals that fell behind go first,
        // unless it waits in arrival order: there the attempt takes the task's place in line
        // when it reaches the store, and a wait would put the task behind whoever asked
        // elsewhere meanwhile.
        let renewals_behind = (for_try.is_none() && !options.in_arrival_order())
            .then(|| self.renewer.behind(options.renew_interval()))
            .flatten();
        let deferred = attempt::send_attempt(
            myself,
            &self.store,
            &self.cleanups,
            request,
            &options,
            renewals_behind,
        );
        Phase::Attempting {
            attempt: Attempt {
                deferred,
                listed_for,
                ..Attempt::new(lease, next, for_try)
            },
            woken: false,
            backoff,
        }
    }

    /// The request of an attempt for `next`, under a new lease id (`refused_before`: an
    /// attempt of this acquisition was refused already).
    pub(super) fn acquire_request(
        &self,
        next: &NextWaiter,
        single_try: bool,
        refused_before: bool,
    ) -> AcquireRequest {
        let request = AcquireRequest::new(
            self.name.clone(),
            LeaseId::new(),
            self.holder.clone(),
            next.options.lease_duration(),
        )
        .with_waited(next.waited)
        .with_access(next.access)
        .with_arrival_order(next.options.in_arrival_order());
        // A waiting attempt marks the record if refused: in line in arrival order, as a
        // waiting reader or writer on a shared record; a mutex's waiter of the default mode
        // is listed (for a release to wake it first if it waited longest) from its second
        // attempt on, so the uncontended cycle's acquire stays as small as it can be (a
        // release with nobody listed wakes everyone) — and from its first while the release
        // feed watches, which it does only while this manager has met contention: a process
        // back from its fairness step back is refused by the one it let in, and unlisted
        // until its retry, a release made meanwhile would wake every waiting process. A
        // single try comes back only if its caller asks again: it marks nothing (in line,
        // its place ends as it is taken).
        let quietly = self.waits_quietly(&next.options);
        let marks_record = next.access.kind().is_shared()
            || next.options.in_arrival_order()
            || refused_before
            || quietly;
        if single_try || !marks_record {
            return request;
        }
        let lasts = if next.options.in_arrival_order() {
            place_lasts(&next.options)
        } else if quietly {
            // Listed for as long as it may wait without asking.
            QUIET_POLL + mark_lasts(&next.options)
        } else {
            mark_lasts(&next.options)
        };
        request.with_retry_within(lasts)
    }

    /// Whether a refused waiter waits quietly for the release feed or its lease's end,
    /// rather than polling: a mutex's, in the default mode (arrival order's place must be
    /// renewed within its life), while the store's feed is watching.
    fn waits_quietly(&self, options: &LockOptions) -> bool {
        !self.kind.is_shared() && !options.in_arrival_order() && self.release_waiters.is_feed_live()
    }

    /// Whether a refused attempt left a waiter in line (arrival order: every waiting attempt
    /// takes a place; a single try never gets here) with the store's release feed watching,
    /// so that a release wakes it when its kind lets it in (a mutex's turn, a permit come
    /// free, a readers' batch): the store's rule 22 wakes exactly those, of any kind.
    fn waits_in_line(&self, attempt: &Attempt) -> bool {
        attempt.options.in_arrival_order() && self.release_waiters.is_feed_live()
    }

    pub(super) fn on_attempt_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        // Refused with nobody holding (a shared record names its first holder when busy).
        let found_free = matches!(result, Ok(AcquireOutcome::Busy { holder: None, .. }));
        let lease_left = match &result {
            Ok(AcquireOutcome::Busy { lease_left, .. }) => *lease_left,
            _ => None,
        };
        self.advance(|this, phase| match phase {
            // The lease check is equivalent to `true` today (a surviving mutant says so): one
            // attempt is in flight at a time, and a phase leaves `Attempting` only through its
            // answer, at shutdown (after which none is sent) or by abandoning an attempt never
            // sent (which never answers). It stays so that a change
            // letting an attempt be abandoned cannot take one attempt's grant for another's.
            Phase::Attempting {
                attempt,
                woken,
                backoff,
            } if attempt.lease == lease => {
                match attempt::judge(
                    &this.name,
                    (StoreOp::Acquire, sent_at),
                    result,
                    &attempt.options,
                    &attempt.metrics,
                ) {
                    Verdict::Granted(grant) => {
                        this.kind_on_record = true;
                        this.grant(myself, attempt, grant, sent_at, claim, false);
                        // Another place may be free: serve the next waiter at once (a
                        // mutex held here waits for its release instead).
                        this.start_attempt(myself, None)
                    }
                    Verdict::Refused(error) => this.attempt_failed(
                        myself,
                        attempt,
                        (error, found_free, lease_left),
                        woken,
                        backoff,
                    ),
                }
            }
            // Not the attempt in flight: dropping its claim releases whatever it granted.
            phase => phase,
        });
    }

    fn attempt_failed(
        &mut self,
        myself: &ActorRef<LockMsg>,
        attempt: Attempt,
        (error, found_free, lease_left): (Option<StoreError>, bool, Option<Duration>),
        woken: bool,
        mut backoff: Backoff,
    ) -> Phase {
        // Found held: the record is of this process's family.
        self.kind_on_record |= error.is_none();
        if let Some(reply) = attempt.for_try {
            let _ = reply.send(match error {
                Some(error) => Err(error.into()),
                None => Ok(None),
            });
            // Waiters may have queued behind the try attempt.
            return self.start_attempt(myself, Some(backoff));
        }
        self.waiters.waiting();
        let held_elsewhere = error.is_none();
        if held_elsewhere {
            self.refused(&attempt);
        }
        if let Some(error) = error.filter(|error| !error.is_transient()) {
            // Refused for good (a kind or count mismatch, a bad count): only those who
            // asked for this access fail; the others' requests may be fine.
            if self.kind.is_shared() {
                self.waiters.fail_first_for(attempt.access, error.into());
            } else {
                self.waiters.fail_all(error.into());
            }
            return self.start_attempt(myself, Some(backoff));
        }
        if !self.waiters.prune() {
            return self.idle(myself);
        }
        if held_elsewhere && woken {
            return self.start_attempt(myself, Some(backoff));
        }
        if found_free && attempt.access == Access::Read && self.waiters.readers_turn_refused() {
            // A reader of this process's readers' turn was refused with nobody holding: the
            // store's turn is over and a writer waits (perhaps this process's own, whose
            // turn the store keeps). Its other readers would be refused alike, each after a
            // backoff with nobody left to release and wake anyone: the first in line, the
            // writer, tries at once instead.
            return self.start_attempt(myself, Some(backoff));
        }
        if held_elsewhere
            && attempt.access == Access::Write
            && !attempt.options.in_arrival_order()
            && self.waiters.reader_turn_for_refused_writer()
        {
            // A refused writer at the head of the line would keep this process's readers
            // from ever asking, yet during a readers' turn (readers waited elsewhere when
            // a writer left) the store admits them and not the writer. One attempt for the
            // first reader, then the usual backoff; a refused reader also marks readers
            // waiting, so they get the next turn. In arrival order there is no readers'
            // turn, and the line serves the writer before readers that came after it: a
            // reader of this process that asked later must not go first.
            return self.start_attempt(myself, Some(backoff));
        }
        backoff.follow(&attempt.options);
        let mut delay = crate::random::with_rng(|rng| backoff.next_delay(rng));
        // Only a waiter listed for longer than it may sleep: one that asked before the feed
        // was watching is listed for a backoff's time, and polls once more first. A `>=`
        // mutant survives, equivalent: it differs only for a listing of exactly `QUIET_POLL`
        // (a longest backoff of half of it), which needs the feed to have started while the
        // attempt was out, and a feed's start wakes every waiter, ending that quiet wait.
        if held_elsewhere && attempt.listed_for > QUIET_POLL && self.waits_quietly(&attempt.options)
        {
            // Nothing to ask until a release wakes it or the lease ends; the backoff's
            // delay on top spreads the waiters' attempts at a crashed holder's lease end.
            delay += lease_left.map_or(QUIET_POLL, |left| left.min(QUIET_POLL));
        } else if held_elsewhere && self.waits_in_line(&attempt) {
            // In line: woken when its turn comes; until then it renews its place (or asks
            // at the lease's end, when a crashed holder's place comes free: on a shared
            // record, the lease that ends first).
            let renew_place =
                crate::random::with_rng(|rng| renew_place_after(&attempt.options, rng));
            let at_lease_end = lease_left.map_or(renew_place, |left| left + delay);
            delay = delay.max(renew_place.min(at_lease_end));
        }
        self.retry_after(myself, delay, false, held_elsewhere, backoff)
    }

    /// Backs off for `delay`: the phase to go to.
    pub(super) fn retry_after(
        &mut self,
        myself: &ActorRef<LockMsg>,
        delay: Duration,
        yielding: bool,
        held_elsewhere: bool,
        backoff: Backoff,
    ) -> Phase {
        let mut retry = self.timers.timer();
        let timer = retry.id();
        retry.set(myself, Instant::now() + delay, move || LockMsg::RetryDue {
            timer,
        });
        Phase::BackingOff {
            backoff,
            retry,
            yielding,
            _waiting: held_elsewhere.then(|| self.release_waiters.waiting()),
        }
    }

    pub(super) fn on_retry_due(&mut self, myself: &ActorRef<LockMsg>, timer: u64) {
        self.advance(|this, phase| match phase {
            Phase::BackingOff { backoff, retry, .. } if retry.id() == timer => {
                this.start_attempt(myself, Some(backoff))
            }
            phase => phase,
        });
    }

    /// The store says the name became free (released or deleted, by any process).
    pub(super) fn on_wake(&mut self, myself: &ActorRef<LockMsg>) {
        self.advance(|this, phase| this.woken(myself, phase));
    }

    /// A waiter left: with nobody else waiting, a backoff has nothing to retry for, an
    /// attempt still waiting for renewals is not sent, and going idle takes this manager's
    /// place out of the line (an attempt in flight does the same when it comes back).
    pub(super) fn on_waiter_left(&mut self, myself: &ActorRef<LockMsg>) {
        let first_left = self.waiters.first_left();
        if self.waiters.prune() {
            self.withdraw_mark_if_no_writer_waits();
            if first_left {
                self.give_place_to_next_waiter(myself);
            }
            return;
        }
        self.advance(|this, phase| match phase {
            Phase::BackingOff { .. } => this.idle(myself),
            Phase::Attempting { attempt, .. }
                if attempt.deferred.as_ref().is_some_and(Deferred::abandon) =>
            {
                this.idle(myself)
            }
            phase => phase,
        });
    }

    /// A place this process held is free again: a waiter backing off (not yielding) tries
    /// now; with nothing left to do, the actor idles.
    pub(super) fn place_freed(&mut self, myself: &ActorRef<LockMsg>) {
        self.advance(|this, phase| match phase {
            Phase::Idle { .. } => this.start_attempt(myself, None),
            phase => this.woken(myself, phase),
        });
    }

    /// The name may be free: a waiter backing off (not yielding to others) tries now, an
    /// attempt in flight is marked to try again at once if refused.
    fn woken(&mut self, myself: &ActorRef<LockMsg>, phase: Phase) -> Phase {
        match phase {
            Phase::BackingOff {
                yielding: false,
                backoff,
                ..
            } => self.start_attempt(myself, Some(backoff)),
            Phase::Attempting {
                attempt, backoff, ..
            } => Phase::Attempting {
                attempt,
                woken: true,
                backoff,
            },
            phase => phase,
        }
    }
}
