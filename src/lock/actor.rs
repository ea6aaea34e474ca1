//! The per-name lock actor: owns one lock name's state machine, its FIFO of local waiters,
//! the renewal cadence and the loss deadline.
//!
//! The six phases, and what moves between them (each message is one transition of the
//! data-owning `Phase`):
//!
//! | phase | meaning | leaves on |
//! |---|---|---|
//! | `Idle` | nothing held, nobody waiting | an acquire / try → `Attempting` |
//! | `Attempting` | one acquisition call in flight | grant → `Held`; busy or error → `BackingOff` (or `Idle`) |
//! | `BackingOff` | waiting to retry | its timer, or a release seen on the store → `Attempting` |
//! | `Held` | a guard holds the lease; renewals keep it | release → local pass (`Held`), `HandingOver` or `Releasing`; loss → `Attempting` / `Idle` |
//! | `HandingOver` | the lease passes to a local waiter in one store call | answer → `Held` or `Attempting` |
//! | `Releasing` | a release call in flight | answer → `Attempting`, `BackingOff` (stepping back) or `Idle` |
//!
//! A hold is only ever used while it is provably valid (its loss deadline ahead): a release
//! that arrives past the deadline is a loss, and a local pass also needs every renewal
//! since the last confirmation answered. A lost hold's lease stays on the store until its
//! guard lets go or the loss margin has passed (see `hold::LostHold`).
//!
//! Store calls never run on the message loop: each is spawned (see `store_call`) and reports
//! back as a message, so the deadline timer is handled on time even while a call hangs, and
//! at most one acquisition attempt per name is in flight however many local tasks wait.
//!
//! The state machine stays whole in this file; its policies live beside it: what to do
//! with a grant nobody will use (`orphan`) and when local waiters step back for other
//! processes (`starvation`).

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::attempt::{self, Verdict};
use super::backoff::Backoff;
use super::hold::{self, Hold, HoldDue};
use super::message::{DetachReply, GuardReply, LockMsg, ReleaseReply, TryReply};
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
use crate::metrics::{AttemptResult, LockMetrics, StoreOp};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::request::HolderId;
use crate::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, HandOverOutcome, LeaseId, LockStore,
    ReleaseOutcome, ReleaseWaiters, WaitingForRelease,
};

/// The actor behaviour; all state lives in [`LockActorState`].
pub(crate) struct LockActor;

/// What a lock actor is started with.
pub(crate) struct LockActorArgs {
    pub(crate) name: LockName,
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) holder: HolderId,
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    /// How long the actor lingers with nothing held or queued (the manager's setting).
    pub(crate) idle_timeout: Duration,
    pub(crate) renewer: Renewer,
    pub(crate) release_waiters: ReleaseWaiters,
    pub(crate) timers: Timers,
    /// The count of requests sent on this actor's route (see `route`).
    pub(crate) gate: Arc<RouteGate>,
}

enum Phase {
    /// Nothing held, nobody waiting.
    Idle,
    /// One acquisition attempt is in flight.
    Attempting(Attempt),
    /// Waiting for the backoff timer before the next attempt.
    BackingOff {
        /// Stepping back so other processes get a turn (starvation mode): a release does
        /// not cut this wait short, or this process would take the lock straight back.
        yielding: bool,
        /// Counts this actor as wanting the store's release feed while another process
        /// holds the lock.
        _waiting: Option<WaitingForRelease>,
    },
    /// This process holds the lock for one guard.
    Held(Hold),
    /// The hold is being passed straight to the first local waiter's new lease (`to`):
    /// one store call, and the lock is never free in between.
    HandingOver {
        to: Attempt,
        /// The releasing guard's answer.
        reply: ReleaseReply,
    },
    /// A release is in flight; waiters queue behind it.
    Releasing {
        lease: LeaseId,
        reply: ReleaseReply,
        options: Arc<LockOptions>,
        metrics: LockMetrics,
    },
}

struct Attempt {
    lease: LeaseId,
    options: Arc<LockOptions>,
    metrics: LockMetrics,
    /// Set when the attempt serves a `try_acquire` rather than the waiter queue.
    for_try: Option<TryReply>,
}

impl Attempt {
    fn new(lease: LeaseId, next: NextWaiter, for_try: Option<TryReply>) -> Self {
        Self {
            lease,
            options: next.options,
            metrics: next.metrics,
            for_try,
        }
    }
}

pub(crate) struct LockActorState {
    name: LockName,
    store: Arc<dyn LockStore>,
    holder: HolderId,
    supervisor: ActorRef<SupervisorMsg>,
    waiters: Waiters,
    phase: Phase,
    backoff: Backoff,
    /// The last hand-over reported that other processes have waited longer than a backoff
    /// interval: the next release frees the lock for them instead of handing it over.
    others_starving: bool,
    /// The store reported a release while an attempt was in flight: if that attempt finds
    /// the lock held, it was sent before the release, so the next one goes out at once.
    woken_while_attempting: bool,
    /// Counts this manager's actors waiting for another process's release.
    release_waiters: ReleaseWaiters,
    /// Bumped whenever a retry or idle timer is scheduled; older timers are ignored.
    generation: u64,
    /// Requests received, compared with the route's count before an idle stop.
    requests_seen: u64,
    gate: Arc<RouteGate>,
    idle_timeout: Duration,
    /// Sends this name's renewals batched with the other names' of the manager.
    renewer: Renewer,
    /// The held lease's next renewal or, while one is in flight, its loss deadline: one
    /// timer per hold (see [`LockActorState::arm_hold_timer`]).
    hold_timer: Timer<LockMsg>,
    /// The next attempt after a backoff, or the idle stop.
    wake_timer: Timer<LockMsg>,
}

impl Actor for LockActor {
    type Msg = LockMsg;
    type State = LockActorState;
    type Arguments = LockActorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<LockMsg>,
        args: LockActorArgs,
    ) -> Result<LockActorState, ActorProcessingErr> {
        Ok(LockActorState {
            waiters: Waiters::default(),
            others_starving: false,
            backoff: Backoff::new(&LockOptions::default()),
            idle_timeout: args.idle_timeout,
            renewer: args.renewer,
            release_waiters: args.release_waiters,
            woken_while_attempting: false,
            hold_timer: args.timers.timer(),
            wake_timer: args.timers.timer(),
            name: args.name,
            store: args.store,
            holder: args.holder,
            supervisor: args.supervisor,
            phase: Phase::Idle,
            generation: 0,
            requests_seen: 0,
            gate: args.gate,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<LockMsg>,
        message: LockMsg,
        state: &mut LockActorState,
    ) -> Result<(), ActorProcessingErr> {
        if message.is_counted_request() {
            state.requests_seen += 1;
        }
        match message {
            LockMsg::Acquire {
                access: Access::Exclusive,
                options,
                requested_at,
                reply,
            } => state.on_acquire(&myself, options, requested_at, reply),
            LockMsg::TryAcquire {
                access: Access::Exclusive,
                options,
                reply,
            } => state.on_try_acquire(&myself, options, reply),
            // This process uses the name as a mutex: another kind cannot share it.
            LockMsg::Acquire { access, reply, .. } => {
                let _ = reply.send(Err(state.mismatch(access)));
            }
            LockMsg::TryAcquire { access, reply, .. } => {
                let _ = reply.send(Err(state.mismatch(access)));
            }
            LockMsg::Detach {
                lease,
                token,
                reply,
            } => state.on_detach(&myself, lease, token, reply),
            #[cfg(feature = "testing")]
            LockMsg::InjectPanic => panic!("lock actor {:?}: injected panic", state.name),
            LockMsg::Release {
                lease,
                token,
                reply,
            } => state.on_release(&myself, lease, token, reply),
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
                if generation == state.generation && matches!(state.phase, Phase::BackingOff { .. })
                {
                    state.start_attempt(&myself, None);
                }
            }
            LockMsg::Wake => match state.phase {
                Phase::BackingOff {
                    yielding: false, ..
                } => {
                    state.next_generation(); // the pending retry timer is now stale
                    state.start_attempt(&myself, None);
                }
                Phase::Attempting(_) => state.woken_while_attempting = true,
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

impl LockActorState {
    /// Takes the phase out, leaving `Idle` for the caller to replace, if `is_current` says
    /// it is the one a message answers; otherwise leaves it alone (a stale answer).
    fn take_phase_if(&mut self, is_current: impl FnOnce(&Phase) -> bool) -> Option<Phase> {
        is_current(&self.phase).then(|| std::mem::replace(&mut self.phase, Phase::Idle))
    }

    /// The hold, if `lease` is the one held.
    fn held(&mut self, lease: LeaseId) -> Option<&mut Hold> {
        match &mut self.phase {
            Phase::Held(hold) if hold.lease() == lease => Some(hold),
            _ => None,
        }
    }

    fn on_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        options: Arc<LockOptions>,
        requested_at: Instant,
        reply: GuardReply,
    ) {
        self.waiters.push(Waiter {
            access: Access::Exclusive,
            metrics: LockMetrics::new(&self.name, options.lock_name_label()),
            options,
            requested_at,
            reply,
        });
        if matches!(self.phase, Phase::Idle) {
            self.start_attempt(myself, None);
        }
    }

    fn on_try_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        options: Arc<LockOptions>,
        reply: TryReply,
    ) {
        if matches!(self.phase, Phase::Idle) {
            self.start_attempt(myself, Some((options, reply)));
        } else {
            // This process already holds the lock or has tasks queued for it: it is not free
            // for a newcomer, and jumping the local queue would be unfair.
            let _ = reply.send(Ok(None));
        }
    }

    /// Sends one acquisition attempt for the waiter queue, or for a `try_acquire`.
    fn start_attempt(
        &mut self,
        myself: &ActorRef<LockMsg>,
        for_try: Option<(Arc<LockOptions>, TryReply)>,
    ) {
        self.wake_timer.cancel();
        self.woken_while_attempting = false;
        let (next, for_try) = match for_try {
            Some((options, reply)) => {
                let metrics = LockMetrics::new(&self.name, options.lock_name_label());
                let next = NextWaiter {
                    access: Access::Exclusive,
                    options,
                    metrics,
                    waited: Duration::ZERO,
                };
                (next, Some(reply))
            }
            None => match self.waiters.next_live() {
                Some(next) => (next, None),
                None => return self.become_idle(myself),
            },
        };
        let request = self.acquire_request(LeaseId::new(), &next);
        let options = next.options.clone();
        self.phase = Phase::Attempting(Attempt::new(request.lease, next, for_try));
        attempt::send_attempt(myself, &self.store, request, &options);
    }

    fn acquire_request(&self, lease: LeaseId, next: &NextWaiter) -> AcquireRequest {
        AcquireRequest::new(
            self.name.clone(),
            lease,
            self.holder.clone(),
            next.options.lease_duration(),
        )
        .with_waited(next.waited)
    }

    fn on_attempt_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        // Not the attempt in flight: dropping its claim releases whatever it granted.
        let Some(Phase::Attempting(attempt)) = self.take_phase_if(
            |phase| matches!(phase, Phase::Attempting(attempt) if attempt.lease == lease),
        ) else {
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
            // Waiters may have queued behind the try attempt.
            return self.start_attempt(myself, None);
        }
        let held_elsewhere = error.is_none();
        if let Some(error) = error.filter(|error| !error.is_transient()) {
            self.waiters.fail_all(error.into());
            return self.become_idle(myself);
        }
        if !self.waiters.prune() {
            return self.become_idle(myself);
        }
        if held_elsewhere && std::mem::take(&mut self.woken_while_attempting) {
            return self.start_attempt(myself, None);
        }
        self.backoff.follow(&attempt.options);
        let delay = crate::random::with_rng(|rng| self.backoff.next_delay(rng));
        let generation = self.next_generation();
        self.wake_timer
            .set(myself, Instant::now() + delay, move || LockMsg::RetryDue {
                generation,
            });
        self.phase = Phase::BackingOff {
            yielding: false,
            _waiting: held_elsewhere.then(|| self.release_waiters.waiting()),
        };
    }

    /// The attempt won: hand a guard to its caller, then keep the lease alive.
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
        let mut hold = Hold::new(
            attempt.lease,
            (token, reserved_until),
            attempt.options,
            attempt.metrics,
            sent_at,
        );
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
            None => self.waiters.deliver(make_guard),
        };
        tracing::debug!(lock = %self.name, token, delivered, "lock acquired");
        let first_renewal = self.renewer.align(
            hold.next_renewal_after(sent_at),
            hold.options().renew_interval(),
        );
        hold.granted(first_renewal);
        self.phase = Phase::Held(hold);
        // Armed before anything else: a hold passed on below keeps this timer (its renewals
        // and its deadline), and a released one cancels it.
        self.arm_hold_timer(myself);
        if !delivered {
            // The caller left while the attempt was in flight: pass the lock to the next
            // waiter or give it straight back.
            self.begin_release(myself, None);
        }
    }

    /// Sets the hold's one timer (see [`Hold::timer_at`]).
    fn arm_hold_timer(&mut self, myself: &ActorRef<LockMsg>) {
        let Phase::Held(hold) = &self.phase else {
            return;
        };
        let (at, lease) = (hold.timer_at(), hold.lease());
        self.hold_timer
            .set(myself, at, move || LockMsg::HoldDue { lease });
    }

    fn on_hold_due(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        let Some(hold) = self.held(lease) else {
            return;
        };
        match hold.due(Instant::now()) {
            HoldDue::Deadline => {
                let reason = hold.deadline_reason();
                return self.lose(myself, reason, LeaseLeft::OnStore);
            }
            HoldDue::Renewal => self.send_renewal(myself),
            HoldDue::Nothing => {}
        }
        self.arm_hold_timer(myself);
    }

    fn send_renewal(&mut self, myself: &ActorRef<LockMsg>) {
        if let Phase::Held(hold) = &mut self.phase {
            self.renewer.renew(hold.renewal(&self.name, myself));
        }
    }

    fn on_renew_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ExtendOutcome, StoreError>,
    ) {
        // Borrows only the phase, so the name and the renewer stay usable beside the hold.
        let hold = match &mut self.phase {
            Phase::Held(hold) if hold.lease() == lease => hold,
            _ => return,
        };
        match hold.apply_renewal(&self.name, sent_at, result, &self.renewer) {
            Some(reason) => self.lose(myself, reason, LeaseLeft::Gone),
            None => self.arm_hold_timer(myself),
        }
    }

    /// Ends the current hold with a loss signal, then serves waiters. A lease `left` on the
    /// store is freed once the holder lets go, or after the loss margin (see
    /// `hold::LostHold`) — never at the instant the holder is told.
    fn lose(&mut self, myself: &ActorRef<LockMsg>, reason: LossReason, left: LeaseLeft) {
        let Some(Phase::Held(hold)) = self.take_phase_if(|phase| matches!(phase, Phase::Held(_)))
        else {
            return;
        };
        self.hold_timer.cancel();
        tracing::warn!(lock = %self.name, token = hold.token(), %reason, "lock lost");
        let lost = hold.lose(&self.name, &reason);
        if matches!(left, LeaseLeft::OnStore) {
            lost.spawn_release(&self.store);
        }
        self.start_attempt(myself, None);
    }

    fn on_release(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: ReleaseReply,
    ) {
        let answer = match &self.phase {
            Phase::Held(hold) if hold.is(lease, token) => {
                if hold.is_valid_at(Instant::now()) {
                    return self.begin_release(myself, reply);
                }
                // Past its deadline (the process was paused, or the deadline's own message
                // is still queued): the lease may be somebody else's by now, so the critical
                // section may not have been exclusive — a loss, not a release.
                let reason = hold.deadline_reason();
                self.lose(myself, reason.clone(), LeaseLeft::OnStore);
                Err(LockError::Lost(reason))
            }
            // A stale guard (its hold was lost and already reported): nothing to release.
            // The guard reports its loss itself.
            _ => Ok(()),
        };
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
    }

    /// The error for a request of `access` to this mutex.
    fn mismatch(&self, access: Access) -> LockError {
        LockError::KindMismatch {
            name: self.name.as_str().to_owned(),
            found: LockKind::Mutex,
            asked: access.kind(),
        }
    }

    /// A multi-lock takes this hold's lease to release it with its other members in one
    /// store call: the hold ends here as a release (never passed on locally: the lease is
    /// the multi-lock's to free), and the call's answer comes back as `ReleaseDone`.
    fn on_detach(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: DetachReply,
    ) {
        let now = Instant::now();
        let answer = match &self.phase {
            Phase::Held(hold) if hold.is(lease, token) && hold.is_valid_at(now) => {
                let Some(Phase::Held(hold)) =
                    self.take_phase_if(|phase| matches!(phase, Phase::Held(_)))
                else {
                    return;
                };
                self.hold_timer.cancel();
                let key = hold.key(&self.name);
                self.phase = Phase::Releasing {
                    lease,
                    reply: None,
                    options: hold.options().clone(),
                    metrics: hold.metrics().clone(),
                };
                hold.released();
                Ok(key)
            }
            Phase::Held(hold) if hold.is(lease, token) => {
                // Past its deadline: a loss, exactly as a late release is.
                let reason = hold.deadline_reason();
                self.lose(myself, reason.clone(), LeaseLeft::OnStore);
                Err(LockError::Lost(reason))
            }
            _ => Err(LockError::Lost(LossReason::Superseded)),
        };
        let _ = reply.send(answer);
    }

    /// The held lock's guard let go: pass it to the next local waiter (without a store call
    /// while the hold is provably valid and reserved tokens last, else in one hand-over
    /// call), or release it.
    fn begin_release(&mut self, myself: &ActorRef<LockMsg>, reply: ReleaseReply) {
        let Some(Phase::Held(hold)) = self.take_phase_if(|phase| matches!(phase, Phase::Held(_)))
        else {
            return;
        };
        let next = if self.others_starving {
            None
        } else {
            self.waiters.next_live()
        };
        match next {
            Some(next) if hold.can_pass_locally(&next.options, Instant::now()) => {
                self.pass_locally(myself, hold, reply, next);
            }
            Some(next) => self.begin_hand_over(myself, hold, reply, next),
            None => self.begin_store_release(myself, hold, reply),
        }
    }

    /// Passes `hold` to the first waiter with no store call at all: the lease stays, its
    /// renewal and deadline timers keep running, and the waiter gets the next of the tokens
    /// the store reserved with the grant (so tokens still increase across processes: the
    /// store's next grant is past the whole block). The block's size bounds how many local
    /// holders follow one another before a store call hears whether other processes wait.
    fn pass_locally(
        &mut self,
        myself: &ActorRef<LockMsg>,
        hold: Hold,
        reply: ReleaseReply,
        next: NextWaiter,
    ) {
        let next = hold.pass_locally(next.options, next.metrics);
        if let Some(reply) = reply {
            let _ = reply.send(Ok(()));
        }
        let delivered = self.waiters.deliver(|| next.guard(&self.name, myself));
        next.metrics().attempt(AttemptResult::Acquired);
        next.metrics().held(1.0);
        tracing::debug!(lock = %self.name, token = next.token(), delivered, "lock passed to a local waiter");
        self.phase = Phase::Held(next);
        if !delivered {
            // Every waiter left meanwhile: nobody holds the lease now.
            self.begin_release(myself, None);
        }
    }

    /// Passes `hold` straight to the first waiter in one store call (see
    /// [`LockStore::hand_over`]), so a contended lock does not sit free while this process
    /// has callers queued. Like an attempt, a call whose answer is late is waited for and
    /// whatever it granted released, so no lease is left that nobody holds.
    fn begin_hand_over(
        &mut self,
        myself: &ActorRef<LockMsg>,
        hold: Hold,
        reply: ReleaseReply,
        next: NextWaiter,
    ) {
        self.hold_timer.cancel();
        let from = hold.key(&self.name);
        hold.released();
        let to = LeaseId::new();
        let request = self.acquire_request(to, &next);
        let options = next.options.clone();
        self.phase = Phase::HandingOver {
            to: Attempt::new(to, next, None),
            reply,
        };
        attempt::send_hand_over(myself, &self.store, from, request, &options);
    }

    fn on_hand_over_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        to: LeaseId,
        sent_at: Instant,
        result: Result<HandOverOutcome, StoreError>,
        claim: GrantClaim,
    ) {
        let Some(Phase::HandingOver { to: attempt, reply }) = self.take_phase_if(
            |phase| matches!(phase, Phase::HandingOver { to: attempt, .. } if attempt.lease == to),
        ) else {
            return;
        };
        attempt
            .metrics
            .store_call(StoreOp::HandOver, sent_at.elapsed(), result.is_err());
        let (_, longest_backoff) = attempt.options.retry_backoff();
        let (answer, granted) = match result {
            Ok(HandOverOutcome::HandedOver {
                token,
                contended_for,
            }) => {
                self.others_starving =
                    contended_for.is_some_and(|waited| waited >= longest_backoff);
                (Ok(()), Some(token))
            }
            Ok(HandOverOutcome::Released { .. }) => (Ok(()), None),
            Ok(HandOverOutcome::NotOwner) => {
                attempt.metrics.loss(&LossReason::Superseded);
                (Err(LockError::Lost(LossReason::Superseded)), None)
            }
            Err(error) => {
                // It may have been applied (its answer was lost): the claim releases both
                // leases. A timed-out one is released by its task once the store answers.
                tracing::warn!(lock = %self.name, %error, "hand-over failed; both leases are released");
                (Err(LockError::Store(error)), None)
            }
        };
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
        match granted {
            Some(token) if Instant::now() < sent_at + attempt.options.renew_deadline() => {
                attempt.metrics.attempt(AttemptResult::Acquired);
                self.grant(myself, attempt, token, sent_at, claim);
            }
            // Answered after its own renew deadline, it cannot be used safely (the claim
            // releases it); or nothing was granted.
            _ => self.start_attempt(myself, None),
        }
    }

    fn begin_store_release(&mut self, myself: &ActorRef<LockMsg>, hold: Hold, reply: ReleaseReply) {
        self.hold_timer.cancel();
        let (key, lease) = (hold.key(&self.name), hold.lease());
        let timeout = hold.options().renew_deadline();
        self.phase = Phase::Releasing {
            lease,
            reply,
            options: hold.options().clone(),
            metrics: hold.metrics().clone(),
        };
        hold.released();
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

    fn on_release_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ReleaseOutcome, StoreError>,
    ) {
        let Some(Phase::Releasing {
            reply,
            options,
            metrics,
            ..
        }) = self.take_phase_if(
            |phase| matches!(phase, Phase::Releasing { lease: releasing, .. } if *releasing == lease),
        )
        else {
            return;
        };
        self.others_starving = false;
        let (_, longest_backoff) = options.retry_backoff();
        let step_back = starvation::step_back(&result, longest_backoff);
        metrics.store_call(StoreOp::Release, sent_at.elapsed(), result.is_err());
        let answer = hold::release_answer(&self.name, lease, result, &metrics);
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
        if let Some(delay) = step_back.filter(|_| self.waiters.prune()) {
            let generation = self.next_generation();
            self.wake_timer
                .set(myself, Instant::now() + delay, move || LockMsg::RetryDue {
                    generation,
                });
            self.phase = Phase::BackingOff {
                yielding: true,
                _waiting: None,
            };
            return;
        }
        self.start_attempt(myself, None);
    }

    fn become_idle(&mut self, myself: &ActorRef<LockMsg>) {
        self.phase = Phase::Idle;
        let generation = self.next_generation();
        self.wake_timer
            .set(myself, Instant::now() + self.idle_timeout, move || {
                LockMsg::IdleDue { generation }
            });
    }

    fn on_idle_due(&mut self, myself: &ActorRef<LockMsg>, generation: u64) {
        if generation != self.generation || !matches!(self.phase, Phase::Idle) {
            return;
        }
        if self.gate.try_retire(self.requests_seen) {
            // No request can reach us any more: the supervisor forgets us, we stop.
            let _ = self.supervisor.send_message(SupervisorMsg::ChildIdle {
                name: self.name.clone(),
                actor: myself.get_id(),
            });
            myself.stop(Some("idle".to_owned()));
        } else {
            // A request is on its way; if its sender took it elsewhere, try again later.
            self.become_idle(myself);
        }
    }

    /// Fails waiters, tells a live holder it lost the lock (its lease is freed once it lets
    /// go, or after the loss margin), and answers what is in flight. A grant still in flight
    /// is released through its claim when its answer finds this actor gone.
    fn shut_down(&mut self) {
        self.waiters.fail_all(LockError::ShutDown);
        self.hold_timer.cancel();
        self.wake_timer.cancel();
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Held(hold) => {
                hold.lose(&self.name, &LossReason::Shutdown)
                    .spawn_release(&self.store);
            }
            Phase::Attempting(Attempt {
                for_try: Some(reply),
                ..
            }) => {
                let _ = reply.send(Err(LockError::ShutDown));
            }
            Phase::Releasing {
                reply: Some(reply), ..
            }
            | Phase::HandingOver {
                reply: Some(reply), ..
            } => {
                let _ = reply.send(Err(LockError::ShutDown));
            }
            Phase::Attempting(_)
            | Phase::Releasing { reply: None, .. }
            | Phase::HandingOver { reply: None, .. }
            | Phase::Idle
            | Phase::BackingOff { .. } => {}
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }
}

/// Whether a lost hold's lease may still be on the store.
enum LeaseLeft {
    /// It may (a deadline loss): free it once the holder lets go.
    OnStore,
    /// The store already said it is somebody else's.
    Gone,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tokio::time::Instant;

    use crate::lock::message::LockMsg;
    use crate::lock::runtime::Runtime;
    use crate::name::LockName;
    use crate::options::LockOptions;
    use crate::store::memory::MemoryStore;
    use crate::store::request::HolderId;
    use crate::store::{AcquireOutcome, AcquireRequest, LeaseId, LockStore};

    /// The manager shuts down while an acquisition's answer is queued behind the shutdown
    /// (a store that answers at once queues it at the attempt): the stopping actor never
    /// handles it, and the grant it carries is released, not left held by nobody until it
    /// expires.
    #[tokio::test(start_paused = true)]
    async fn a_grant_queued_behind_shutdown_is_released() {
        let store = MemoryStore::new();
        let runtime = Runtime::start(
            Arc::new(store.clone()),
            HolderId::generate(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        let name = LockName::new("queued").unwrap();
        let options = Arc::new(LockOptions::default());
        let lock = runtime.lock(name.clone(), options.clone());
        lock.acquire().await.unwrap().release().await.unwrap();
        let route = lock.cached_route().unwrap();

        // Both messages wait in the mailbox before the actor runs.
        let (reply, answer) = oneshot::channel();
        let acquire = LockMsg::Acquire {
            access: crate::kind::Access::Exclusive,
            options,
            requested_at: Instant::now(),
            reply,
        };
        assert!(route.send_request(acquire).is_ok());
        let (stopped, _) = oneshot::channel();
        route
            .actor
            .send_message(LockMsg::Shutdown { reply: stopped })
            .unwrap();
        assert!(
            answer.await.unwrap().is_err(),
            "the waiter is failed by the shutdown"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;

        let other = AcquireRequest::new(
            name,
            LeaseId::new(),
            HolderId::generate(),
            Duration::from_secs(30),
        );
        assert!(
            matches!(
                store.try_acquire(&other).await.unwrap(),
                AcquireOutcome::Acquired { .. }
            ),
            "a grant nobody owns is still held after the shutdown"
        );
    }
}
