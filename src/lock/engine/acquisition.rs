//! The acquisition for the local waiters: at most one attempt in flight per name however
//! many local tasks wait, the backoff between attempts, and the one wake timer (the next
//! attempt, or the idle stop).
//!
//! | phase | meaning | leaves on |
//! |---|---|---|
//! | `Idle` | no attempt (nobody waits, or a mutex is held here) | a waiter, a try, a freed place → `Attempting` |
//! | `Attempting` | one acquisition call in flight | grant → `Idle`/next attempt; busy or error → `BackingOff` (or `Idle`) |
//! | `BackingOff` | waiting to retry | its timer, or a release seen here or on the store → `Attempting` |

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::state::NameState;
use crate::error::StoreError;
use crate::kind::Access;
use crate::lock::attempt::{self, Verdict};
use crate::lock::backoff::Backoff;
use crate::lock::message::{GuardReply, LockMsg, TryReply};
use crate::lock::orphan::GrantClaim;
use crate::lock::timer::{Timer, Timers};
use crate::lock::waiters::{NextWaiter, Waiter};
use crate::metrics::{LockMetrics, StoreOp};
use crate::options::LockOptions;
use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, WaitingForRelease};

pub(super) struct Acquisition {
    pub(super) phase: Phase,
    backoff: Backoff,
    /// Bumped whenever the wake timer is set or made stale; an older timer is ignored.
    generation: u64,
    wake_timer: Timer<LockMsg>,
}

pub(super) enum Phase {
    Idle,
    Attempting {
        attempt: Attempt,
        /// A release was seen while the attempt was in flight: if the attempt finds the
        /// name held, it was sent before the release, so the next one goes out at once.
        woken: bool,
    },
    BackingOff {
        /// Stepping back so other processes get a turn (starvation mode): a release does
        /// not cut this wait short, or this process would take the name straight back.
        yielding: bool,
        /// Counts this actor as wanting the store's release feed while another process
        /// holds the name.
        _waiting: Option<WaitingForRelease>,
    },
}

/// One attempt (or the grant part of a hand-over) in flight, for a waiter of `access`.
pub(super) struct Attempt {
    pub(super) lease: LeaseId,
    pub(super) access: Access,
    pub(super) options: Arc<LockOptions>,
    pub(super) metrics: LockMetrics,
    /// Set when the attempt serves a `try_acquire` rather than the waiter queue.
    pub(super) for_try: Option<TryReply>,
}

impl Attempt {
    pub(super) fn new(lease: LeaseId, next: NextWaiter, for_try: Option<TryReply>) -> Self {
        Self {
            lease,
            access: next.access,
            options: next.options,
            metrics: next.metrics,
            for_try,
        }
    }
}

impl Acquisition {
    pub(super) fn new(timers: &Timers) -> Self {
        Self {
            phase: Phase::Idle,
            backoff: Backoff::new(&LockOptions::default()),
            generation: 0,
            wake_timer: timers.timer(),
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Sets the wake timer to send `message(generation)` at `at`.
    pub(super) fn set_wake(
        &mut self,
        myself: &ActorRef<LockMsg>,
        at: Instant,
        message: impl FnOnce(u64) -> LockMsg + Send + 'static,
    ) {
        let generation = self.stale_timers();
        self.wake_timer.set(myself, at, move || message(generation));
    }

    /// Makes every timer set so far stale; returns the new generation.
    pub(super) fn stale_timers(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    pub(super) fn is_current(&self, generation: u64) -> bool {
        generation == self.generation
    }

    /// The attempt for `lease`, if it is the one in flight (the phase becomes `Idle`).
    fn take_attempt(&mut self, lease: LeaseId) -> Option<Attempt> {
        if !matches!(&self.phase, Phase::Attempting { attempt, .. } if attempt.lease == lease) {
            return None;
        }
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Attempting { attempt, .. } => Some(attempt),
            _ => None,
        }
    }

    /// Stops for good; returns the reply of a single try in flight, to be answered.
    pub(super) fn stop(&mut self) -> Option<TryReply> {
        self.wake_timer.cancel();
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Attempting { attempt, .. } => attempt.for_try,
            _ => None,
        }
    }
}

impl NameState {
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
        if self.acquisition.is_idle() {
            self.start_attempt(myself);
        }
    }

    pub(super) fn on_try_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        access: Access,
        options: Arc<LockOptions>,
        reply: TryReply,
    ) {
        if self.acquisition.is_idle() && self.may_attempt() && self.waiters.next_live().is_none() {
            let metrics = LockMetrics::for_access(&self.name, options.lock_name_label(), access);
            let next = NextWaiter {
                access,
                options,
                metrics,
                waited: Duration::ZERO,
            };
            self.send_attempt(myself, next, Some(reply));
        } else {
            // This process holds the name or has tasks queued for it: a newcomer does not
            // jump their queue.
            let _ = reply.send(Ok(None));
        }
    }

    /// The waiter the next attempt is for: the first in line, or, while this process's
    /// writer has just left, the first reader.
    pub(super) fn next_waiter(&mut self) -> Option<NextWaiter> {
        if self.readers_first > 0 {
            match self.waiters.first_live_for(Access::Read) {
                Some(reader) => {
                    self.readers_first -= 1;
                    return Some(reader);
                }
                None => self.readers_first = 0,
            }
        }
        self.waiters.next_live()
    }

    /// Sends one attempt for the next waiter, or idles if there is nothing to do (or a
    /// mutex is held here: its waiters get it when it is passed on or freed).
    pub(super) fn start_attempt(&mut self, myself: &ActorRef<LockMsg>) {
        self.acquisition.wake_timer.cancel();
        match self.may_attempt().then(|| self.next_waiter()).flatten() {
            Some(next) => self.send_attempt(myself, next, None),
            None => self.stop_attempting(myself),
        }
    }

    /// No attempt until a waiter or a freed place asks for one; an unused actor arms its
    /// idle stop.
    fn stop_attempting(&mut self, myself: &ActorRef<LockMsg>) {
        self.acquisition.phase = Phase::Idle;
        self.idle_if_unused(myself);
    }

    fn send_attempt(
        &mut self,
        myself: &ActorRef<LockMsg>,
        next: NextWaiter,
        for_try: Option<TryReply>,
    ) {
        self.acquisition.wake_timer.cancel();
        let request = self.acquire_request(&next, for_try.is_some());
        let options = next.options.clone();
        self.acquisition.phase = Phase::Attempting {
            attempt: Attempt::new(request.lease, next, for_try),
            woken: false,
        };
        attempt::send_attempt(myself, &self.store, request, &options);
    }

    /// The request of an attempt for `next`, under a new lease id.
    pub(super) fn acquire_request(&self, next: &NextWaiter, single_try: bool) -> AcquireRequest {
        let request = AcquireRequest::new(
            self.name.clone(),
            LeaseId::new(),
            self.holder.clone(),
            next.options.lease_duration(),
        )
        .with_waited(next.waited)
        .with_access(next.access);
        if !next.access.kind().is_shared() || single_try {
            // A mutex's waiters are not marked on its record; a single try comes back only
            // if its caller asks again: it marks nothing.
            return request;
        }
        // A refused reader or writer is back within its longest backoff (sooner when a
        // release wakes it): its mark outlives that, and no longer.
        let (_, longest_backoff) = next.options.retry_backoff();
        request.with_retry_within(longest_backoff * 2)
    }

    pub(super) fn on_attempt_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        let woken = matches!(
            self.acquisition.phase,
            Phase::Attempting { woken: true, .. }
        );
        // Not the attempt in flight: dropping its claim releases whatever it granted.
        let Some(attempt) = self.acquisition.take_attempt(lease) else {
            return;
        };
        match attempt::judge(
            &self.name,
            (StoreOp::Acquire, sent_at),
            result,
            &attempt.options,
            &attempt.metrics,
        ) {
            Verdict::Granted(token) => {
                self.acquisition.backoff.reset();
                self.grant(myself, attempt, token, sent_at, claim);
                // Another place may be free: serve the next waiter at once (a mutex held
                // here waits for its release instead).
                if self.acquisition.is_idle() {
                    self.start_attempt(myself);
                }
            }
            Verdict::Refused(error) => self.attempt_failed(myself, attempt, error, woken),
        }
    }

    fn attempt_failed(
        &mut self,
        myself: &ActorRef<LockMsg>,
        attempt: Attempt,
        error: Option<StoreError>,
        woken: bool,
    ) {
        if let Some(reply) = attempt.for_try {
            let _ = reply.send(match error {
                Some(error) => Err(error.into()),
                None => Ok(None),
            });
            // Waiters may have queued behind the try attempt.
            return self.start_attempt(myself);
        }
        let held_elsewhere = error.is_none();
        if let Some(error) = error.filter(|error| !error.is_transient()) {
            // Refused for good (a kind or count mismatch, a bad count): only those who
            // asked for this access fail; the others' requests may be fine.
            if self.kind.is_shared() {
                self.waiters.fail_first_for(attempt.access, error.into());
            } else {
                self.waiters.fail_all(error.into());
            }
            return self.start_attempt(myself);
        }
        if !self.waiters.prune() {
            return self.stop_attempting(myself);
        }
        if held_elsewhere && woken {
            return self.start_attempt(myself);
        }
        if held_elsewhere
            && attempt.access == Access::Write
            && self.readers_first == 0
            && self.waiters.count_for(Access::Read) > 0
        {
            // A refused writer at the head of the line would keep this process's readers
            // from ever asking, yet during a readers' turn (readers waited elsewhere when
            // a writer left) the store admits them and not the writer. One attempt for the
            // first reader, then the usual backoff; a refused reader also marks readers
            // waiting, so they get the next turn.
            self.readers_first = 1;
            return self.start_attempt(myself);
        }
        self.acquisition.backoff.follow(&attempt.options);
        let delay = crate::random::with_rng(|rng| self.acquisition.backoff.next_delay(rng));
        self.retry_after(myself, delay, false, held_elsewhere);
    }

    pub(super) fn retry_after(
        &mut self,
        myself: &ActorRef<LockMsg>,
        delay: Duration,
        yielding: bool,
        held_elsewhere: bool,
    ) {
        let at = Instant::now() + delay;
        self.acquisition
            .set_wake(myself, at, |generation| LockMsg::RetryDue { generation });
        self.acquisition.phase = Phase::BackingOff {
            yielding,
            _waiting: held_elsewhere.then(|| self.release_waiters.waiting()),
        };
    }

    pub(super) fn on_retry_due(&mut self, myself: &ActorRef<LockMsg>, generation: u64) {
        if self.acquisition.is_current(generation)
            && matches!(self.acquisition.phase, Phase::BackingOff { .. })
        {
            self.start_attempt(myself);
        }
    }

    /// The store says the name became free (released or deleted, by any process).
    pub(super) fn on_wake(&mut self, myself: &ActorRef<LockMsg>) {
        match self.acquisition.phase {
            Phase::BackingOff {
                yielding: false, ..
            } => {
                self.acquisition.stale_timers(); // the pending retry timer is now stale
                self.start_attempt(myself);
            }
            Phase::Attempting { ref mut woken, .. } => *woken = true,
            _ => {}
        }
    }
}
