//! The per-name lock actor: owns one lock name's state machine
//! (idle → acquiring → held → releasing), its FIFO of local waiters, the renewal cadence and
//! the loss deadline.
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

use super::backoff::Backoff;
use super::hold::Hold;
use super::message::{GuardReply, LockMsg, ReleaseReply, TryReply};
use super::orphan;
use super::renewer::{Renewal, Renewer};
use super::route::RouteGate;
use super::starvation;
use super::store_call::{bounded, spawn_store_call};
use super::supervisor::SupervisorMsg;
use super::timer::{Timer, Timers};
use super::waiters::{Waiter, Waiters};
use crate::error::{LockError, LossReason, StoreError};
use crate::metrics::{AttemptResult, LockMetrics, RenewalResult, StoreOp};
use crate::name::LockName;
use crate::options::LockOptions;
use crate::store::{
    AcquireOutcome, AcquireRequest, ExtendOutcome, ExtendRequest, HandOverOutcome, HolderId,
    LeaseId, LeaseKey, LockStore, ReleaseOutcome, ReleaseWaiters, WaitingForRelease,
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
        /// The lease being handed over.
        from: LeaseId,
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
                options,
                requested_at,
                reply,
            } => state.on_acquire(&myself, options, requested_at, reply),
            LockMsg::TryAcquire { options, reply } => state.on_try_acquire(&myself, options, reply),
            #[cfg(feature = "test-hooks")]
            LockMsg::InjectPanic => panic!("lock actor {:?}: injected panic", state.name),
            LockMsg::Release {
                lease,
                token,
                reply,
            } => state.on_release(&myself, lease, token, reply),
            LockMsg::Shutdown { reply } => {
                state.shut_down().await;
                let _ = reply.send(());
                myself.stop(Some("manager shut down".to_owned()));
            }
            LockMsg::AttemptDone {
                lease,
                sent_at,
                result,
            } => state.on_attempt_done(&myself, lease, sent_at, result),
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
            } => state.on_hand_over_done(&myself, to, sent_at, result),
            LockMsg::IdleDue { generation } => state.on_idle_due(&myself, generation),
        }
        Ok(())
    }
}

impl LockActorState {
    fn on_acquire(
        &mut self,
        myself: &ActorRef<LockMsg>,
        options: Arc<LockOptions>,
        requested_at: Instant,
        reply: GuardReply,
    ) {
        self.waiters.push(Waiter {
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
        let (options, metrics, for_try, waited) = match for_try {
            Some((options, reply)) => {
                let metrics = LockMetrics::new(&self.name, options.lock_name_label());
                (options, metrics, Some(reply), Duration::ZERO)
            }
            None => {
                let live = self.waiters.prune();
                match self.waiters.front().filter(|_| live) {
                    Some((options, metrics, waited)) => (options, metrics, None, waited),
                    None => return self.become_idle(myself),
                }
            }
        };
        let lease = LeaseId::new();
        let request = AcquireRequest {
            name: self.name.clone(),
            lease,
            holder: self.holder.clone(),
            expiry: options.expiry(),
            waited,
        };
        let limits = (
            options.renew_deadline(),
            orphan::late_answer_limit(&options),
        );
        self.phase = Phase::Attempting(Attempt {
            lease,
            options,
            metrics,
            for_try,
        });
        let orphan = LeaseKey {
            name: request.name.clone(),
            lease,
        };
        let store = self.store.clone();
        orphan::run_granting_call(
            myself,
            &self.store,
            async move { store.try_acquire(&request).await },
            limits,
            |result| matches!(result, Ok(AcquireOutcome::Acquired { .. })),
            vec![orphan],
            move |sent_at, result| LockMsg::AttemptDone {
                lease,
                sent_at,
                result,
            },
        );
    }

    fn on_attempt_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<AcquireOutcome, StoreError>,
    ) {
        let attempt = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Attempting(attempt) if attempt.lease == lease => attempt,
            other => {
                // Not the attempt we are waiting for (cannot happen with one attempt in
                // flight, but a grant must never be left behind).
                self.phase = other;
                if matches!(result, Ok(AcquireOutcome::Acquired { .. })) {
                    orphan::release(&self.store, &self.name, lease, self.default_timeout());
                }
                return;
            }
        };
        let took = sent_at.elapsed();
        attempt
            .metrics
            .store_call(StoreOp::Acquire, took, result.is_err());
        let deadline = sent_at + attempt.options.renew_deadline();
        match result {
            Ok(AcquireOutcome::Acquired { token }) if Instant::now() < deadline => {
                attempt.metrics.attempt(AttemptResult::Acquired);
                self.backoff.reset();
                self.grant(myself, attempt, token, sent_at);
            }
            Ok(AcquireOutcome::Acquired { .. }) => {
                // The grant arrived after its own renew deadline: it cannot be used safely.
                tracing::warn!(lock = %self.name, ?took, "acquisition answered too late to use; releasing it");
                attempt.metrics.attempt(AttemptResult::Error);
                orphan::release(
                    &self.store,
                    &self.name,
                    lease,
                    attempt.options.renew_deadline(),
                );
                self.attempt_failed(myself, attempt, None);
            }
            Ok(AcquireOutcome::Busy { .. }) => {
                attempt.metrics.attempt(AttemptResult::Contended);
                self.attempt_failed(myself, attempt, None);
            }
            Err(error) => {
                tracing::warn!(lock = %self.name, %error, "acquisition attempt failed");
                attempt.metrics.attempt(AttemptResult::Error);
                // An attempt that failed may still have been applied (its answer was lost):
                // release its lease id so it cannot linger as a phantom hold. A timed-out one
                // is released by its own task once the store answers.
                if !matches!(error, StoreError::Timeout(_)) {
                    orphan::release(
                        &self.store,
                        &self.name,
                        lease,
                        attempt.options.renew_deadline(),
                    );
                }
                self.attempt_failed(myself, attempt, Some(error));
            }
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
        let delay = self.backoff.next_delay(&mut rand::rng());
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
    ) {
        let reserved_until = token.saturating_add(self.store.tokens_per_grant().max(1) - 1);
        let mut hold = Hold::new(
            attempt.lease,
            token,
            reserved_until,
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
        hold.metrics.held(1.0);
        hold.next_renewal = self.renewer.align(
            hold.next_renewal_after(sent_at),
            hold.options.extension_cadence(),
        );
        let lease = hold.lease;
        self.phase = Phase::Held(hold);
        if !delivered {
            // Every caller left while the attempt was in flight: give the lock straight back.
            return self.begin_release(myself, lease, None);
        }
        self.arm_hold_timer(myself);
    }

    /// Sets the hold's one timer: at its next renewal, or at its loss deadline while a
    /// renewal is in flight (a renewal is always due before the deadline, so the deadline is
    /// armed whenever a store call could hang).
    fn arm_hold_timer(&mut self, myself: &ActorRef<LockMsg>) {
        let Phase::Held(hold) = &self.phase else {
            return;
        };
        let at = if hold.renewal_in_flight {
            hold.deadline
        } else {
            hold.next_renewal.min(hold.deadline)
        };
        let lease = hold.lease;
        self.hold_timer
            .set(myself, at, move || LockMsg::HoldDue { lease });
    }

    fn on_hold_due(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId) {
        let Phase::Held(hold) = &self.phase else {
            return;
        };
        if hold.lease != lease {
            return;
        }
        let now = Instant::now();
        if now >= hold.deadline {
            return self.on_deadline(myself);
        }
        if !hold.renewal_in_flight && now >= hold.next_renewal {
            self.send_renewal(myself);
        }
        self.arm_hold_timer(myself);
    }

    fn send_renewal(&mut self, myself: &ActorRef<LockMsg>) {
        let Phase::Held(hold) = &mut self.phase else {
            return;
        };
        let remaining = hold.deadline.saturating_duration_since(Instant::now());
        hold.renewal_in_flight = true;
        let request = ExtendRequest {
            key: hold.key(&self.name),
            expiry: hold.options.expiry(),
        };
        // Bounded by the time left before the deadline: a later answer is useless anyway.
        self.renewer.renew(Renewal {
            request,
            within: remaining,
            actor: myself.clone(),
        });
    }

    fn on_renew_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ExtendOutcome, StoreError>,
    ) {
        let Phase::Held(hold) = &mut self.phase else {
            return;
        };
        if hold.lease != lease {
            return;
        }
        hold.renewal_in_flight = false;
        hold.metrics
            .store_call(StoreOp::Extend, sent_at.elapsed(), result.is_err());
        match result {
            Ok(ExtendOutcome::Extended) => {
                tracing::trace!(lock = %self.name, token = hold.token, "lease renewed");
                hold.metrics.renewal(RenewalResult::Extended);
                hold.confirm(sent_at);
                hold.next_renewal = self.renewer.align(
                    hold.next_renewal_after(sent_at),
                    hold.options.extension_cadence(),
                );
                self.arm_hold_timer(myself);
            }
            Ok(ExtendOutcome::NotOwner) => {
                hold.metrics.renewal(RenewalResult::Lost);
                self.lose(myself, LossReason::Superseded);
            }
            Err(error) => {
                tracing::warn!(lock = %self.name, token = hold.token, %error, "lease renewal failed; retrying until the renew deadline");
                hold.metrics.renewal(RenewalResult::Error);
                // A renewal our own timeout cut short went unanswered: that is a silent
                // store, not a failing one.
                hold.last_error = (!matches!(error, StoreError::Timeout(_))).then_some(error);
                hold.next_renewal = hold.retry_renewal_at();
                self.arm_hold_timer(myself);
            }
        }
    }

    /// The hold's loss deadline passed: it is lost, whatever the store says later.
    fn on_deadline(&mut self, myself: &ActorRef<LockMsg>) {
        let Phase::Held(hold) = &self.phase else {
            return;
        };
        let reason = hold.deadline_reason();
        // The lease may still be valid on the store (a slow network): free it for others.
        orphan::release(
            &self.store,
            &self.name,
            hold.lease,
            hold.options.renew_deadline(),
        );
        self.lose(myself, reason);
    }

    /// Ends the current hold with a loss signal, then serves waiters.
    fn lose(&mut self, myself: &ActorRef<LockMsg>, reason: LossReason) {
        let Phase::Held(hold) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        self.end_hold_timers();
        tracing::warn!(lock = %self.name, token = hold.token, %reason, "lock lost");
        hold.metrics.loss(&reason);
        hold.metrics.hold_ended(hold.acquired_at.elapsed());
        hold.signal_loss(reason);
        self.start_attempt(myself, None);
    }

    fn on_release(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        token: u64,
        reply: ReleaseReply,
    ) {
        match &self.phase {
            Phase::Held(hold) if hold.lease == lease && hold.token == token => {
                self.begin_release(myself, lease, reply);
            }
            // A stale guard (its hold was lost and already reported): nothing to release.
            _ => {
                if let Some(reply) = reply {
                    let _ = reply.send(Ok(()));
                }
            }
        }
    }

    fn begin_release(&mut self, myself: &ActorRef<LockMsg>, lease: LeaseId, reply: ReleaseReply) {
        let Phase::Held(hold) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        let mut next = (!self.others_starving && self.waiters.prune())
            .then(|| self.waiters.front())
            .flatten();
        if let Some((options, metrics, _)) =
            next.take_if(|(options, _, _)| hold.can_pass_locally(options))
        {
            return self.pass_locally(myself, hold, reply, options, metrics);
        }
        self.end_hold_timers();
        hold.metrics.hold_ended(hold.acquired_at.elapsed());
        if let Some(next) = next {
            return self.begin_hand_over(myself, hold, reply, next);
        }
        self.phase = Phase::Releasing {
            lease,
            reply,
            options: hold.options.clone(),
            metrics: hold.metrics.clone(),
        };
        let key = hold.key(&self.name);
        let store = self.store.clone();
        spawn_store_call(
            myself,
            hold.options.renew_deadline(),
            async move { store.release(&key).await },
            move |sent_at, result| LockMsg::ReleaseDone {
                lease,
                sent_at,
                result,
            },
        );
        hold.mark_released();
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
        options: Arc<LockOptions>,
        metrics: LockMetrics,
    ) {
        hold.metrics.hold_ended(hold.acquired_at.elapsed());
        let next = hold.pass_locally(options, metrics);
        if let Some(reply) = reply {
            let _ = reply.send(Ok(()));
        }
        let delivered = self.waiters.deliver(|| next.guard(&self.name, myself));
        next.metrics.attempt(AttemptResult::Acquired);
        next.metrics.held(1.0);
        tracing::debug!(lock = %self.name, token = next.token, delivered, "lock passed to a local waiter");
        let lease = next.lease;
        self.phase = Phase::Held(next);
        if !delivered {
            // Every waiter left meanwhile: nobody holds the lease now.
            self.begin_release(myself, lease, None);
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
        (options, metrics, waited): (Arc<LockOptions>, LockMetrics, Duration),
    ) {
        let from = hold.key(&self.name);
        hold.mark_released();
        let to = LeaseId::new();
        let request = AcquireRequest {
            name: self.name.clone(),
            lease: to,
            holder: self.holder.clone(),
            expiry: options.expiry(),
            waited,
        };
        let limits = (
            options.renew_deadline(),
            orphan::late_answer_limit(&options),
        );
        self.phase = Phase::HandingOver {
            from: from.lease,
            to: Attempt {
                lease: to,
                options,
                metrics,
                for_try: None,
            },
            reply,
        };
        let new = LeaseKey {
            name: from.name.clone(),
            lease: to,
        };
        let store = self.store.clone();
        let orphans = vec![new, from.clone()];
        orphan::run_granting_call(
            myself,
            &self.store,
            async move { store.hand_over(&from, &request).await },
            limits,
            |result| matches!(result, Ok(HandOverOutcome::HandedOver { .. })),
            orphans,
            move |sent_at, result| LockMsg::HandOverDone {
                to,
                sent_at,
                result,
            },
        );
    }

    fn on_hand_over_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        to: LeaseId,
        sent_at: Instant,
        result: Result<HandOverOutcome, StoreError>,
    ) {
        let (from, attempt, reply) = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::HandingOver {
                from,
                to: attempt,
                reply,
            } if attempt.lease == to => (from, attempt, reply),
            other => {
                self.phase = other;
                return;
            }
        };
        attempt
            .metrics
            .store_call(StoreOp::HandOver, sent_at.elapsed(), result.is_err());
        let (_, longest_backoff) = attempt.options.busy_wait();
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
                tracing::warn!(lock = %self.name, %error, "hand-over failed; both leases are released");
                // It may have been applied (its answer was lost): nobody owns either lease
                // now. A timed-out one is released by its task once the store answers.
                if !matches!(error, StoreError::Timeout(_)) {
                    let timeout = attempt.options.renew_deadline();
                    orphan::release(&self.store, &self.name, attempt.lease, timeout);
                    orphan::release(&self.store, &self.name, from, timeout);
                }
                (Err(LockError::Store(error)), None)
            }
        };
        if let Some(reply) = reply {
            let _ = reply.send(answer);
        }
        match granted {
            Some(token) if Instant::now() < sent_at + attempt.options.renew_deadline() => {
                attempt.metrics.attempt(AttemptResult::Acquired);
                self.grant(myself, attempt, token, sent_at);
            }
            Some(_) => {
                // Answered after its own renew deadline: it cannot be used safely.
                let timeout = attempt.options.renew_deadline();
                orphan::release(&self.store, &self.name, attempt.lease, timeout);
                self.start_attempt(myself, None);
            }
            None => self.start_attempt(myself, None),
        }
    }

    fn on_release_done(
        &mut self,
        myself: &ActorRef<LockMsg>,
        lease: LeaseId,
        sent_at: Instant,
        result: Result<ReleaseOutcome, StoreError>,
    ) {
        let (reply, options, metrics) = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Releasing {
                lease: releasing,
                reply,
                options,
                metrics,
            } if releasing == lease => (reply, options, metrics),
            other => {
                self.phase = other;
                return;
            }
        };
        metrics.store_call(StoreOp::Release, sent_at.elapsed(), result.is_err());
        self.others_starving = false;
        let (_, longest_backoff) = options.busy_wait();
        let step_back = starvation::step_back(&result, longest_backoff);
        let answer = match result {
            Ok(ReleaseOutcome::Released { .. }) => Ok(()),
            // The record no longer carried our lease: it had expired and been taken over
            // before the release — the caller must know its critical section was not exclusive.
            Ok(ReleaseOutcome::NotOwner) => {
                metrics.loss(&LossReason::Superseded);
                Err(LockError::Lost(LossReason::Superseded))
            }
            Err(error) => {
                tracing::warn!(lock = %self.name, %lease, %error, "release failed; the lease will expire on the store");
                Err(LockError::Store(error))
            }
        };
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

    async fn shut_down(&mut self) {
        self.waiters.fail_all(LockError::ShutDown);
        self.end_hold_timers();
        self.wake_timer.cancel();
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Held(hold) => {
                let key = hold.key(&self.name);
                let timeout = hold.options.renew_deadline();
                hold.metrics.loss(&LossReason::Shutdown);
                hold.metrics.hold_ended(hold.acquired_at.elapsed());
                hold.signal_loss(LossReason::Shutdown);
                if let Err(error) = bounded(timeout, self.store.release(&key)).await {
                    tracing::warn!(lock = %self.name, %error, "release at shutdown failed; the lease will expire on the store");
                }
            }
            Phase::Attempting(attempt) => {
                if let Some(reply) = attempt.for_try {
                    let _ = reply.send(Err(LockError::ShutDown));
                }
                // A grant still in flight is released by the attempt task once it finds
                // this actor gone.
            }
            Phase::Releasing {
                reply: Some(reply), ..
            } => {
                let _ = reply.send(Err(LockError::ShutDown));
            }
            Phase::HandingOver {
                reply: Some(reply), ..
            } => {
                let _ = reply.send(Err(LockError::ShutDown));
                // A hand-over still in flight is released by its task once it finds this
                // actor gone.
            }
            Phase::Releasing { reply: None, .. }
            | Phase::HandingOver { reply: None, .. }
            | Phase::Idle
            | Phase::BackingOff { .. } => {}
        }
    }

    fn default_timeout(&self) -> Duration {
        self.waiters
            .front()
            .map(|(options, _, _)| options.renew_deadline())
            .unwrap_or(LockOptions::default().renew_deadline())
    }

    /// A hold ended: its renewal and deadline timers have no purpose any more.
    fn end_hold_timers(&mut self) {
        self.hold_timer.cancel();
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }
}
