//! The per-name actor of a shared kind — a semaphore or a reader/writer lock — whose name
//! this process may hold several times at once: one lease per holder, each with its own
//! token, renewals, loss deadline and timer, beside one acquisition at a time for the
//! queue of local waiters.
//!
//! Two state machines run side by side in one actor:
//!
//! | part | states | moves on |
//! |---|---|---|
//! | acquisition | `Idle` → `Attempting` → `BackingOff` | a waiter, a grant (next waiter at once), busy (backoff), a release seen here or on the store (attempt now), a local release with waiters (the attempt is a hand-over) |
//! | each hold | held → renewing → released or lost | its timer, its renewal's answer, its guard |
//!
//! A hold obeys exactly the mutex's rules (see `hold.rs`): it is only used while its loss
//! deadline is ahead, a release past it is a loss, and a lost lease stays on the store for
//! the loss margin unless its guard lets go first. Unlike a mutex, a shared kind never
//! passes a place to a local waiter without a store call: other holders of the name may
//! have been granted larger tokens since this grant reserved its block (so a local pass
//! would break "every token larger than every one before"), and a reader admitted here
//! would overtake a writer waiting elsewhere. It passes it in one call instead
//! ([`LockStore::hand_over`]): the release and the next local waiter's attempt in one
//! write, under the store's grant rules and with the store's next token.
//!
//! Fairness here mirrors the store's: local waiters are served first come, first served,
//! except that when this process's writer leaves, the readers waiting here go before the
//! next writer (the store does the same across processes with its readers' turn).
//!
//! Store calls run off the message loop as in the mutex actor (`store_call`, `orphan`), so
//! deadlines fire on time while a call hangs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::actor::LockActorArgs;
use super::attempt::{self, Verdict};
use super::backoff::Backoff;
use super::hold::{self, Hold, HoldDue};
use super::message::{GuardReply, LockMsg, ReleaseReply, TryReply};
use super::orphan::GrantClaim;
use super::renewer::Renewer;
use super::route::RouteGate;
use super::starvation;
use super::store_call::spawn_store_call;
use super::supervisor::SupervisorMsg;
use super::timer::{Timer, Timers};
use super::waiters::{NextWaiter, Waiter, Waiters};
use crate::error::{LockError, LossReason, StoreError};
use crate::kind::{Access, LockKind};
use crate::metrics::{LockMetrics, StoreOp};
use crate::name::LockName;
use crate::options::{LockNameLabel, LockOptions};
use crate::store::request::HolderId;
use crate::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, HandOverOutcome, LeaseId, LeaseKey, LockStore,
    ReleaseOutcome, ReleaseWaiters, WaitingForRelease,
};

/// The actor behaviour; all state lives in [`SharedActorState`].
pub(crate) struct SharedLockActor;

/// The acquisition for the local waiters: at most one attempt in flight.
enum Acquisition {
    Idle,
    Attempting(Attempt),
    BackingOff {
        /// Stepping back so other processes get a turn: a release does not cut it short.
        yielding: bool,
        _waiting: Option<WaitingForRelease>,
    },
}

struct Attempt {
    lease: LeaseId,
    access: Access,
    options: Arc<LockOptions>,
    metrics: LockMetrics,
    for_try: Option<TryReply>,
}

impl Attempt {
    fn new(lease: LeaseId, next: NextWaiter, for_try: Option<TryReply>) -> Self {
        Self {
            lease,
            access: next.access,
            options: next.options,
            metrics: next.metrics,
            for_try,
        }
    }
}

/// A hand-over in flight: the place of the released lease `from` asked for a waiter (the
/// grant goes to the first waiter of `to.access` when it comes back; the release's answer
/// waits in `releasing`).
struct HandingOver {
    from: LeaseId,
    to: Attempt,
}

/// One lease this process holds on the name, with its own timer.
struct SharedHold {
    hold: Hold,
    access: Access,
    timer: Timer<LockMsg>,
}

/// A release in flight.
struct Releasing {
    reply: ReleaseReply,
    options: Arc<LockOptions>,
    metrics: LockMetrics,
}

pub(crate) struct SharedActorState {
    name: LockName,
    store: Arc<dyn LockStore>,
    holder: HolderId,
    supervisor: ActorRef<SupervisorMsg>,
    /// The kind the first request asked for (reported when a mutex request comes).
    kind: LockKind,
    /// The semaphore capacity this actor added to the permits gauge, taken back when it
    /// stops.
    reported_permits: Option<(LockNameLabel, f64)>,
    waiters: Waiters,
    acquisition: Acquisition,
    holds: HashMap<LeaseId, SharedHold>,
    releasing: HashMap<LeaseId, Releasing>,
    /// Hand-overs in flight, by the new lease: beside the acquisition, so a busy
    /// semaphore passes each released permit on while an attempt is out.
    handing_over: HashMap<LeaseId, HandingOver>,
    backoff: Backoff,
    /// This process's writer left with readers waiting here: they go first.
    /// How many of the readers waiting when this process's writer left still go first
    /// (only those: readers arriving later queue in order, so writers are not shut out).
    readers_first: usize,
    woken_while_attempting: bool,
    /// Other processes have waited longer than a backoff (the last hand-over said so):
    /// the next release goes to the store plainly, and this process steps back.
    others_starving: bool,
    release_waiters: ReleaseWaiters,
    generation: u64,
    requests_seen: u64,
    gate: Arc<RouteGate>,
    idle_timeout: Duration,
    renewer: Renewer,
    timers: Timers,
    wake_timer: Timer<LockMsg>,
}

/// What a shared actor is started with: the mutex actor's arguments and the kind of the
/// request that started it.
pub(crate) struct SharedActorArgs {
    pub(crate) base: LockActorArgs,
    pub(crate) kind: LockKind,
}

impl Actor for SharedLockActor {
    type Msg = LockMsg;
    type State = SharedActorState;
    type Arguments = SharedActorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<LockMsg>,
        args: SharedActorArgs,
    ) -> Result<SharedActorState, ActorProcessingErr> {
        let base = args.base;
        Ok(SharedActorState {
            wake_timer: base.timers.timer(),
            name: base.name,
            store: base.store,
            holder: base.holder,
            supervisor: base.supervisor,
            kind: args.kind,
            reported_permits: None,
            waiters: Waiters::default(),
            acquisition: Acquisition::Idle,
            holds: HashMap::new(),
            releasing: HashMap::new(),
            handing_over: HashMap::new(),
            backoff: Backoff::new(&LockOptions::default()),
            readers_first: 0,
            woken_while_attempting: false,
            others_starving: false,
            release_waiters: base.release_waiters,
            generation: 0,
            requests_seen: 0,
            gate: base.gate,
            idle_timeout: base.idle_timeout,
            renewer: base.renewer,
            timers: base.timers,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<LockMsg>,
        state: &mut SharedActorState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((policy, permits)) = state.reported_permits.take() {
            LockMetrics::semaphore_permits(&state.name, &policy, -permits);
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<LockMsg>,
        message: LockMsg,
        state: &mut SharedActorState,
    ) -> Result<(), ActorProcessingErr> {
        if message.is_counted_request() {
            state.requests_seen += 1;
        }
        match message {
            LockMsg::Acquire { access, reply, .. } if !access.kind().is_shared() => {
                let _ = reply.send(Err(state.mismatch(access)));
            }
            LockMsg::TryAcquire { access, reply, .. } if !access.kind().is_shared() => {
                let _ = reply.send(Err(state.mismatch(access)));
            }
            LockMsg::Acquire {
                access,
                options,
                requested_at,
                reply,
            } => state.on_acquire(&myself, access, options, requested_at, reply),
            LockMsg::TryAcquire {
                access,
                options,
                reply,
            } => state.on_try_acquire(&myself, access, options, reply),
            #[cfg(feature = "testing")]
            LockMsg::InjectPanic => panic!("lock actor {:?}: injected panic", state.name),
            LockMsg::Release {
                lease,
                token,
                reply,
            } => state.on_release(&myself, lease, token, reply),
            LockMsg::Detach { reply, .. } => {
                // Multi-locks are made of mutexes only.
                let _ = reply.send(Err(state.mismatch(Access::Exclusive)));
            }
            LockMsg::Shutdown { reply } => {
                state.shut_down();
                let _ = reply.send(());
                myself.stop(Some("manager shut down".to_owned()));
            }
            LockMsg::AttemptDone {
                lease,
                sent_at,
                result,
                claim,
            } => state.on_attempt_done(&myself, lease, sent_at, result, claim),
            LockMsg::RetryDue { generation } => {
                if generation == state.generation
                    && matches!(state.acquisition, Acquisition::BackingOff { .. })
                {
                    state.start_attempt(&myself, None);
                }
            }
            LockMsg::Wake => match state.acquisition {
                Acquisition::BackingOff {
                    yielding: false, ..
                } => {
                    state.next_generation();
                    state.start_attempt(&myself, None);
                }
                Acquisition::Attempting(_) => state.woken_while_attempting = true,
                _ => {}
            },
            LockMsg::HoldDue { lease } => state.on_hold_due(&myself, lease),
            LockMsg::RenewDone {
                lease,
                sent_at,
                result,
            } => state.on_renew_done(&myself, lease, sent_at, result),
            LockMsg::ReleaseDone {
                lease,
                sent_at,
                result,
            } => state.on_release_done(&myself, lease, sent_at, result),
            LockMsg::HandOverDone {
                to,
                sent_at,
                result,
                claim,
            } => state.on_hand_over_done(&myself, to, sent_at, result, claim),
            LockMsg::IdleDue { generation } => state.on_idle_due(&myself, generation),
        }
        Ok(())
    }
}

impl SharedActorState {
    fn mismatch(&self, access: Access) -> LockError {
        LockError::KindMismatch {
            name: self.name.as_str().to_owned(),
            found: self.kind,
            asked: access.kind(),
        }
    }

    fn on_acquire(
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
        if matches!(self.acquisition, Acquisition::Idle) {
            self.start_attempt(myself, None);
        }
    }

    fn on_try_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        access: Access,
        options: Arc<LockOptions>,
        reply: TryReply,
    ) {
        if matches!(self.acquisition, Acquisition::Idle) && self.waiters.next_live().is_none() {
            let metrics = LockMetrics::for_access(&self.name, options.lock_name_label(), access);
            let next = NextWaiter {
                access,
                options,
                metrics,
                waited: Duration::ZERO,
            };
            self.send_attempt(myself, next, Some(reply));
        } else {
            // Tasks of this process wait for the name: a newcomer does not jump their queue.
            let _ = reply.send(Ok(None));
        }
    }

    /// The waiter the next attempt is for: the first in line, or, while this process's
    /// writer has just left, the first reader.
    fn next_waiter(&mut self) -> Option<NextWaiter> {
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

    /// Sends one attempt for the next waiter, or becomes idle if nothing is left to do.
    fn start_attempt(&mut self, myself: &ActorRef<LockMsg>, for_try: Option<TryReply>) {
        self.wake_timer.cancel();
        self.woken_while_attempting = false;
        match self.next_waiter() {
            Some(next) => self.send_attempt(myself, next, for_try),
            None => {
                self.acquisition = Acquisition::Idle;
                self.idle_if_unused(myself);
            }
        }
    }

    fn send_attempt(
        &mut self,
        myself: &ActorRef<LockMsg>,
        next: NextWaiter,
        for_try: Option<TryReply>,
    ) {
        self.wake_timer.cancel();
        let request = self.acquire_request(&next, for_try.is_some());
        let options = next.options.clone();
        self.acquisition = Acquisition::Attempting(Attempt::new(request.lease, next, for_try));
        attempt::send_attempt(myself, &self.store, request, &options);
    }

    /// The request of an attempt for `next`, under a new lease id.
    fn acquire_request(&self, next: &NextWaiter, single_try: bool) -> AcquireRequest {
        let (_, longest_backoff) = next.options.retry_backoff();
        AcquireRequest::new(
            self.name.clone(),
            LeaseId::new(),
            self.holder.clone(),
            next.options.lease_duration(),
        )
        .with_waited(next.waited)
        .with_access(next.access)
        // A refused reader or writer is back within its longest backoff (sooner when a
        // release wakes it): its mark outlives that, and no longer. A single try comes
        // back only if its caller asks again: it marks nothing.
        .with_retry_within(if single_try {
            Duration::ZERO
        } else {
            longest_backoff * 2
        })
    }

    fn on_attempt_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        if !matches!(&self.acquisition, Acquisition::Attempting(attempt) if attempt.lease == lease)
        {
            return; // a stale answer: dropping its claim releases what it granted
        }
        let Acquisition::Attempting(attempt) =
            std::mem::replace(&mut self.acquisition, Acquisition::Idle)
        else {
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
                self.backoff.reset();
                self.grant(myself, attempt, token, sent_at, claim);
                // Another place may be free: serve the next waiter at once.
                self.start_attempt(myself, None);
            }
            Verdict::Refused(error) => self.attempt_failed(myself, attempt, error),
        }
    }

    fn attempt_failed(
        &mut self,
        myself: &ActorRef<LockMsg>,
        attempt: Attempt,
        error: Option<StoreError>,
    ) {
        if let Some(reply) = attempt.for_try {
            let _ = reply.send(match error {
                Some(error) => Err(error.into()),
                None => Ok(None),
            });
            return self.start_attempt(myself, None);
        }
        let held_elsewhere = error.is_none();
        if let Some(error) = error.filter(|error| !error.is_transient()) {
            // Refused for good (a kind or count mismatch, a bad count): only those who
            // asked for this access fail; the others' requests may be fine.
            self.waiters.fail_first_for(attempt.access, error.into());
            return self.start_attempt(myself, None);
        }
        if !self.waiters.prune() {
            self.acquisition = Acquisition::Idle;
            return self.idle_if_unused(myself);
        }
        if held_elsewhere && std::mem::take(&mut self.woken_while_attempting) {
            return self.start_attempt(myself, None);
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
            return self.start_attempt(myself, None);
        }
        self.back_off(myself, &attempt.options, false, held_elsewhere);
    }

    fn back_off(
        &mut self,
        myself: &ActorRef<LockMsg>,
        options: &LockOptions,
        yielding: bool,
        held_elsewhere: bool,
    ) {
        self.backoff.follow(options);
        let delay = crate::random::with_rng(|rng| self.backoff.next_delay(rng));
        self.retry_after(myself, delay, yielding, held_elsewhere);
    }

    fn retry_after(
        &mut self,
        myself: &ActorRef<LockMsg>,
        delay: Duration,
        yielding: bool,
        held_elsewhere: bool,
    ) {
        let generation = self.next_generation();
        self.wake_timer
            .set(myself, Instant::now() + delay, move || LockMsg::RetryDue {
                generation,
            });
        self.acquisition = Acquisition::BackingOff {
            yielding,
            _waiting: held_elsewhere.then(|| self.release_waiters.waiting()),
        };
    }

    /// The attempt won: a guard for its caller (or, if it left, for the next waiter with
    /// the same access), and renewals from now on.
    fn grant(
        &mut self,
        myself: &ActorRef<LockMsg>,
        attempt: Attempt,
        token: u64,
        sent_at: Instant,
        claim: GrantClaim,
    ) {
        claim.keep();
        let reserved_until = token.saturating_add(self.store.tokens_per_grant().max(1) - 1);
        let access = attempt.access;
        let mut hold = Hold::new(
            attempt.lease,
            (token, reserved_until),
            attempt.options,
            attempt.metrics,
            sent_at,
        )
        .in_shared_record();
        let make_guard = || hold.guard(&self.name, myself);
        let delivered = match attempt.for_try {
            Some(reply) => match reply.send(Ok(Some(make_guard()))) {
                Ok(()) => true,
                Err(Ok(Some(guard))) => {
                    guard.disarm();
                    false
                }
                Err(_) => false,
            },
            None => self.waiters.deliver_for(access, make_guard),
        };
        tracing::debug!(lock = %self.name, token, access = access.as_str(), delivered, "acquired");
        let first_renewal = self.renewer.align(
            hold.next_renewal_after(sent_at),
            hold.options().renew_interval(),
        );
        hold.granted(first_renewal);
        let lease = hold.lease();
        self.holds.insert(
            lease,
            SharedHold {
                hold,
                access,
                timer: self.timers.timer(),
            },
        );
        self.arm_hold_timer(myself, lease);
        if !delivered {
            // Nobody to hand it to either (every waiter of this access left): a plain
            // release, which leaves the acquisition to the caller.
            self.release_hold(myself, lease, None, false);
        }
    }

    fn arm_hold_timer(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        if let Some(held) = self.holds.get_mut(&lease) {
            let at = held.hold.timer_at();
            held.timer
                .set(myself, at, move || LockMsg::HoldDue { lease });
        }
    }

    fn on_hold_due(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        let Some(held) = self.holds.get_mut(&lease) else {
            return;
        };
        match held.hold.due(Instant::now()) {
            HoldDue::Deadline => {
                let reason = held.hold.deadline_reason();
                return self.lose(myself, lease, reason, true);
            }
            HoldDue::Renewal => self.renewer.renew(held.hold.renewal(&self.name, myself)),
            HoldDue::Nothing => {}
        }
        self.arm_hold_timer(myself, lease);
    }

    fn on_renew_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ExtendOutcome, StoreError>,
    ) {
        let Some(held) = self.holds.get_mut(&lease) else {
            return;
        };
        match held
            .hold
            .apply_renewal(&self.name, sent_at, result, &self.renewer)
        {
            Some(reason) => self.lose(myself, lease, reason, false),
            None => self.arm_hold_timer(myself, lease),
        }
    }

    /// Ends the hold of `lease` with a loss signal; a lease possibly `on_store` is freed
    /// once its guard lets go or after the loss margin.
    fn lose(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        reason: LossReason,
        on_store: bool,
    ) {
        let Some(mut held) = self.holds.remove(&lease) else {
            return;
        };
        held.timer.cancel();
        tracing::warn!(lock = %self.name, token = held.hold.token(), %reason, "lost");
        let lost = held.hold.lose(&self.name, &reason);
        if on_store {
            lost.spawn_release(&self.store);
        }
        self.place_freed(myself);
    }

    fn on_release(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: ReleaseReply,
    ) {
        let answer = match self.holds.get(&lease) {
            Some(held) if held.hold.is(lease, token) => {
                if held.hold.is_valid_at(Instant::now()) {
                    return self.release_hold(myself, lease, reply, true);
                }
                // Past its deadline: the place may be somebody else's by now — a loss.
                let reason = held.hold.deadline_reason();
                self.lose(myself, lease, reason.clone(), true);
                Err(LockError::Lost(reason))
            }
            _ => Ok(()),
        };
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    /// The guard of `lease` let go: its place goes back through the store, never to a local
    /// waiter without a store call as a mutex's may (the next token of this grant's block
    /// may be smaller than one another holder of the name was granted since, and every
    /// grant's token must exceed every token issued before it). With local waiters and no
    /// attempt in flight, one hand-over call releases the place and asks it for the next
    /// waiter, under the store's grant rules, so a busy name takes one command per holder
    /// instead of a release and an attempt; otherwise a plain release.
    fn release_hold(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        reply: ReleaseReply,
        may_hand_over: bool,
    ) {
        let Some(mut held) = self.holds.remove(&lease) else {
            return;
        };
        held.timer.cancel();
        if held.access == Access::Write {
            self.readers_first = self.waiters.count_for(Access::Read);
        }
        let key = held.hold.key(&self.name);
        let timeout = held.hold.options().renew_deadline();
        self.releasing.insert(
            lease,
            Releasing {
                reply,
                options: held.hold.options().clone(),
                metrics: held.hold.metrics().clone(),
            },
        );
        held.hold.released();
        if let Some(next) = may_hand_over
            .then(|| self.hand_over_target(held.access))
            .flatten()
        {
            return self.send_hand_over(myself, key, next);
        }
        let store = self.store.clone();
        spawn_store_call(
            myself,
            timeout,
            async move { store.release(&key).await },
            move |sent_at, result| LockMsg::ReleaseDone {
                lease,
                sent_at,
                result,
            },
        );
    }

    /// The waiter a released place of `access` is handed to, if any: not while this
    /// process steps back for others or others starve, and only for a waiter no attempt
    /// or hand-over in flight is already asking a place for. Permits go to the waiters of
    /// their count, any number of hand-overs beside the attempt; a reader/writer lock's
    /// place only when nothing else is in flight, to the waiter the next attempt would be
    /// for (its local fairness).
    fn hand_over_target(&mut self, access: Access) -> Option<NextWaiter> {
        if self.others_starving
            || matches!(
                self.acquisition,
                Acquisition::BackingOff { yielding: true, .. }
            )
        {
            return None;
        }
        if let Access::Permit { .. } = access {
            let attempting = match &self.acquisition {
                Acquisition::Attempting(attempt) if attempt.access == access => 1,
                _ => 0,
            };
            let asked = attempting + self.handing_over.len();
            return (self.waiters.count_for(access) > asked)
                .then(|| self.waiters.first_live_for(access))
                .flatten();
        }
        let idle = matches!(
            self.acquisition,
            Acquisition::Idle | Acquisition::BackingOff { .. }
        );
        (idle && self.handing_over.is_empty())
            .then(|| self.next_waiter())
            .flatten()
    }

    /// Sends the hand-over of the released place `from` to `next`.
    fn send_hand_over(&mut self, myself: &ActorRef<LockMsg>, from: LeaseKey, next: NextWaiter) {
        let request = self.acquire_request(&next, false);
        let options = next.options.clone();
        self.handing_over.insert(
            request.lease,
            HandingOver {
                from: from.lease,
                to: Attempt::new(request.lease, next, None),
            },
        );
        attempt::send_hand_over(myself, &self.store, from, request, &options);
    }

    /// The hand-over's answer is two: the release's, for the guard that let go, and the
    /// attempt's, judged as any attempt's. The acquisition goes on as it was: a grant
    /// leaves the count of places held as it found it — except a read, after which more
    /// readers may be let in at once — and a place that became free (the new lease
    /// refused, or the old one not ours any more) is one a waiter may try for now.
    fn on_hand_over_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        to: LeaseId,
        sent_at: Instant,
        result: Result<HandOverOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        // Not in flight any more (shut down): dropping its claim releases both leases.
        let Some(HandingOver { from, to: attempt }) = self.handing_over.remove(&to) else {
            return;
        };
        let (released, acquired) = match result {
            Ok(HandOverOutcome::HandedOver {
                token,
                contended_for,
            }) => {
                let (_, longest_backoff) = attempt.options.retry_backoff();
                self.others_starving =
                    contended_for.is_some_and(|waited| waited >= longest_backoff);
                (
                    Ok(ReleaseOutcome::Released { contended_for }),
                    Ok(AcquireOutcome::Acquired { token }),
                )
            }
            Ok(HandOverOutcome::Released { contended_for }) => (
                Ok(ReleaseOutcome::Released { contended_for }),
                Ok(AcquireOutcome::Busy { holder: None }),
            ),
            // The place was not ours any more: nothing was written.
            Ok(HandOverOutcome::NotOwner) => (
                Ok(ReleaseOutcome::NotOwner),
                Ok(AcquireOutcome::Busy { holder: None }),
            ),
            Err(error) => (Err(error.clone()), Err(error)),
        };
        // The call is counted once, as a hand-over, by `judge` below.
        self.answer_release(from, released, None);
        match attempt::judge(
            &self.name,
            (StoreOp::HandOver, sent_at),
            acquired,
            &attempt.options,
            &attempt.metrics,
        ) {
            Verdict::Granted(token) => {
                let access = attempt.access;
                self.grant(myself, attempt, token, sent_at, claim);
                if access == Access::Read || matches!(self.acquisition, Acquisition::Idle) {
                    self.place_freed(myself);
                }
            }
            Verdict::Refused(error) => {
                if let Some(error) = error.filter(|error| !error.is_transient()) {
                    // Refused for good: only those who asked for this access fail.
                    self.waiters.fail_first_for(attempt.access, error.into());
                }
                self.place_freed(myself);
            }
        }
    }

    /// Answers the guard whose release of `lease` the store answered with `result`; a
    /// release call sent at `sent_at` is counted in the metrics.
    fn answer_release(
        &mut self,
        lease: LeaseId,
        result: Result<ReleaseOutcome, StoreError>,
        sent_at: Option<Instant>,
    ) {
        let Some(Releasing { reply, metrics, .. }) = self.releasing.remove(&lease) else {
            return;
        };
        if let Some(sent_at) = sent_at {
            metrics.store_call(StoreOp::Release, sent_at.elapsed(), result.is_err());
        }
        let answer = hold::release_answer(&self.name, lease, result, &metrics);
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    fn on_release_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ReleaseOutcome, StoreError>,
    ) {
        let Some(releasing) = self.releasing.get(&lease) else {
            return;
        };
        let (_, longest_backoff) = releasing.options.retry_backoff();
        let step_back = starvation::step_back(&result, longest_backoff);
        self.answer_release(lease, result, Some(sent_at));
        // Stepping back below, if others still wait, gives them their turn.
        self.others_starving = false;
        match step_back {
            // Others have waited long: let them have the freed place before we retry.
            Some(delay)
                if self.waiters.prune()
                    && !matches!(self.acquisition, Acquisition::Attempting(_)) =>
            {
                self.retry_after(myself, delay, true, false);
            }
            _ => self.place_freed(myself),
        }
    }

    /// A place this process held is free again: a waiter backing off (not yielding) tries
    /// now; with nothing left to do, the actor idles.
    fn place_freed(&mut self, myself: &ActorRef<LockMsg>) {
        match self.acquisition {
            Acquisition::Idle
            | Acquisition::BackingOff {
                yielding: false, ..
            } => {
                self.next_generation();
                self.start_attempt(myself, None);
            }
            Acquisition::Attempting(_) => self.woken_while_attempting = true,
            Acquisition::BackingOff { yielding: true, .. } => {}
        }
    }

    /// Arms the idle stop when nothing is held, released, handed over, attempted or waited
    /// for.
    fn idle_if_unused(&mut self, myself: &ActorRef<LockMsg>) {
        if !self.is_unused() {
            return;
        }
        let generation = self.next_generation();
        self.wake_timer
            .set(myself, Instant::now() + self.idle_timeout, move || {
                LockMsg::IdleDue { generation }
            });
    }

    fn on_idle_due(&mut self, myself: &ActorRef<LockMsg>, generation: u64) {
        if generation != self.generation || !self.is_unused() {
            return;
        }
        if self.gate.try_retire(self.requests_seen) {
            let _ = self.supervisor.send_message(SupervisorMsg::ChildIdle {
                name: self.name.clone(),
                actor: myself.get_id(),
            });
            myself.stop(Some("idle".to_owned()));
        } else {
            self.idle_if_unused(myself);
        }
    }

    /// Nothing held, released, handed over or attempted.
    fn is_unused(&self) -> bool {
        self.holds.is_empty()
            && self.releasing.is_empty()
            && self.handing_over.is_empty()
            && matches!(self.acquisition, Acquisition::Idle)
    }

    /// Fails waiters, tells every live holder of its loss (each lease freed once its guard
    /// lets go, or after the loss margin) and answers what is in flight.
    fn shut_down(&mut self) {
        self.waiters.fail_all(LockError::ShutDown);
        self.wake_timer.cancel();
        for (_, mut held) in self.holds.drain() {
            held.timer.cancel();
            held.hold
                .lose(&self.name, &LossReason::Shutdown)
                .spawn_release(&self.store);
        }
        for (_, releasing) in self.releasing.drain() {
            if let Some(reply) = releasing.reply {
                let _ = reply.send(Err(LockError::ShutDown));
            }
        }
        // Their answers find nothing in flight: their claims release both leases.
        self.handing_over.clear();
        if let Acquisition::Attempting(Attempt {
            for_try: Some(reply),
            ..
        }) = std::mem::replace(&mut self.acquisition, Acquisition::Idle)
        {
            let _ = reply.send(Err(LockError::ShutDown));
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }
}
